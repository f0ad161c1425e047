//! `probegen bundle --out DIR`: every checked-in set (`<sets>/linux-*/<vendor>/`) compiled to
//! its BPF object, with its manifest and `index.json` (the agent's `collect --bundle` reads it).
//!
//! Beside each set, the union set of every pair of vendors of one kernel
//! (`linux-6.12/mlx5+rxe/`, see `manifest::union`): the agent runs it on a host with both
//! drivers loaded.
//!
//! Deterministic: the same sets and the same clang give byte-identical files. The objects keep
//! `-g` (libbpf needs their BTF) but no path of this checkout: `-fdebug-prefix-map` rewrites the
//! sets directory to its own name and `-fdebug-compilation-dir=.` drops the working directory;
//! clang runs in the sets' parent, where the rewritten path still names the source (BTF's line
//! info embeds the source lines it reads there).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use manifest::{Layer, Manifest};
use probegen_agent::{
    sha256_tag, BundleIndex, BundleSet, KernelVersion, BUNDLE_INDEX, BUNDLE_SCHEMA, DEFAULT_FLAVOR,
    SET_MANIFEST, SET_OBJECT,
};

/// The Debian flavor of a set from its kernel directory (`linux-6.12-cloud/mlx5` -> cloud;
/// `linux-6.12/mlx5` -> amd64): `generated/sets.txt` names a flavor's kernel `6.12-cloud`.
fn flavor_of_dir(rel: &str) -> String {
    let kernel = rel.split('/').next().unwrap_or("");
    let kernel = kernel.strip_prefix("linux-").unwrap_or(kernel);
    match kernel.split_once('-') {
        Some((_, flavor)) if !flavor.is_empty() => flavor.to_string(),
        _ => DEFAULT_FLAVOR.to_string(),
    }
}

/// `probegen bundle --list DIR`: the index of a bundle, one set a line (directory, vendor,
/// series, flavor, the kernel release it was generated from, its driver modules), and the sets
/// the index names whose files are missing or differ.
pub(crate) fn list(dir: &Path) -> Result<ExitCode, String> {
    let bundle = probegen_agent::read_bundle(dir)?;
    println!("dir\tvendor\tseries\tflavor\tkernel\tdrivers");
    for s in &bundle.sets {
        println!(
            "{}\t{}\t{}\t{}\t{}\t{}",
            s.dir,
            s.vendor,
            s.series,
            s.flavor,
            s.kernel,
            s.driver_modules.join(",")
        );
    }
    for line in &bundle.skipped {
        eprintln!("probegen bundle --list: {line}");
    }
    Ok(if bundle.skipped.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The probe set directories under `sets` (`linux-*/<vendor>/` with a manifest.yaml), sorted.
fn set_dirs(sets: &Path) -> Result<Vec<PathBuf>, String> {
    let read = |d: &Path| -> Result<Vec<PathBuf>, String> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(d)
            .map_err(|e| format!("{}: {e}", d.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_dir())
            .collect();
        v.sort();
        Ok(v)
    };
    let mut out = Vec::new();
    for kernel in read(sets)? {
        let linux = kernel
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("linux-"));
        if !linux {
            continue;
        }
        out.extend(
            read(&kernel)?
                .into_iter()
                .filter(|d| d.join(SET_MANIFEST).is_file()),
        );
    }
    if out.is_empty() {
        return Err(format!(
            "{}: no probe set (expected linux-<ver>/<vendor>/manifest.yaml under it)",
            sets.display()
        ));
    }
    Ok(out)
}

/// Compiles `src` (a set's probes.bpf.c under `root`, the shared header in `sets`) to `out` as
/// scripts/e2e-collect.sh does, without paths: `root` is written as its own name.
fn compile(root: &Path, sets: &Path, src: &Path, out: &Path) -> Result<(), String> {
    let clang = std::env::var_os("CLANG").unwrap_or_else(|| "clang".into());
    let name = root
        .file_name()
        .map_or_else(|| "sets".into(), |n| n.to_string_lossy().into_owned());
    let parent = src
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| format!("{}: not inside a set directory", src.display()))?;
    // BTF line info carries each source line, which clang reads back through the mapped
    // (relative) path: run where that path resolves, or the lines are silently left out.
    let result = Command::new(&clang)
        .current_dir(root.parent().unwrap_or(root))
        .args(["-target", "bpf", "-O2", "-g", "-D__TARGET_ARCH_x86"])
        .arg("-I/usr/include/x86_64-linux-gnu")
        .arg("-I")
        .arg(parent)
        .arg("-I")
        .arg(sets)
        .arg(format!("-fdebug-prefix-map={}={name}", root.display()))
        .arg("-fdebug-compilation-dir=.")
        .arg("-c")
        .arg(src)
        .arg("-o")
        .arg(out)
        .output()
        .map_err(|e| {
            format!(
                "{}: {e} (needed to compile the sets)",
                clang.to_string_lossy()
            )
        })?;
    if !result.status.success() {
        let err = String::from_utf8_lossy(&result.stderr);
        let first = err.lines().find(|l| l.contains("error")).unwrap_or("");
        return Err(format!("{}: does not compile: {first}", src.display()));
    }
    Ok(())
}

/// One set into `out/<linux-ver>/<vendor>/`: its index entry and its manifest.
fn bundle_set(sets: &Path, dir: &Path, out: &Path) -> Result<(BundleSet, Manifest), String> {
    let rel = dir
        .strip_prefix(sets)
        .map_err(|_| format!("{}: outside {}", dir.display(), sets.display()))?
        .to_string_lossy()
        .into_owned();
    let manifest_path = dir.join(SET_MANIFEST);
    let text = manifest::read_text(
        &manifest_path,
        manifest::MAX_MANIFEST_BYTES,
        manifest::MANIFEST_WHAT,
    )?;
    let m = Manifest::from_yaml(&text, &manifest_path.display().to_string())?;
    let src = dir.join("probes.bpf.c");
    if !src.is_file() {
        return Err(format!(
            "{}: missing (expected the set's BPF C)",
            src.display()
        ));
    }
    let entry = write_set(&rel, &m, &text, out, |object| {
        compile(sets, sets, &src, object)
    })?;
    Ok((entry, m))
}

/// Writes a set's manifest `text` into `out/<rel>/`, compiles its object there, and returns
/// its index entry.
fn write_set(
    rel: &str,
    m: &Manifest,
    text: &str,
    out: &Path,
    compile_to: impl FnOnce(&Path) -> Result<(), String>,
) -> Result<BundleSet, String> {
    let v = KernelVersion::parse_prefix(&m.kernel.version).ok_or_else(|| {
        format!(
            "{rel}/{SET_MANIFEST}: kernel.version `{}`: expected X.Y.Z",
            m.kernel.version
        )
    })?;
    let target = out.join(rel);
    std::fs::create_dir_all(&target).map_err(|e| format!("{}: {e}", target.display()))?;
    std::fs::write(target.join(SET_MANIFEST), text)
        .map_err(|e| format!("{}: {e}", target.display()))?;
    let object = target.join(SET_OBJECT);
    compile_to(&object)?;
    let object_bytes = std::fs::read(&object).map_err(|e| format!("{}: {e}", object.display()))?;
    let mut driver_modules: Vec<String> = m
        .probes
        .iter()
        .filter(|p| p.layer == Layer::Vendor)
        .map(|p| p.module.clone())
        .collect();
    driver_modules.sort();
    driver_modules.dedup();
    Ok(BundleSet {
        dir: rel.to_string(),
        vendor: m.vendor.clone(),
        kernel: m.kernel.version.clone(),
        series: format!("{}.{}", v.0, v.1),
        flavor: flavor_of_dir(rel),
        driver_modules,
        manifest_sha256: sha256_tag(text.as_bytes()),
        object_sha256: sha256_tag(&object_bytes),
    })
}

/// For each kernel, the union set of every pair of its vendors (`linux-6.12/mlx5+rxe`): a
/// host with two drivers loaded runs both drivers' probes and the core ones once. Their C is
/// rendered into `scratch/union/` (written into the objects as `union/...`), then compiled.
fn bundle_unions(
    sets: &Path,
    singles: &[(BundleSet, Manifest)],
    out: &Path,
    scratch: &Path,
) -> Result<Vec<BundleSet>, String> {
    let root = scratch.join("union");
    // the shared header beside the unions' C, so that every path clang writes is under `root`
    // (mapped to `union`): a path of this checkout in an object would differ per checkout
    std::fs::create_dir_all(&root).map_err(|e| format!("{}: {e}", root.display()))?;
    let header = sets.join("probegen.bpf.h");
    std::fs::copy(&header, root.join("probegen.bpf.h")).map_err(|e| {
        format!(
            "{}: {e} (expected the sets' shared header)",
            header.display()
        )
    })?;
    let kernel_of = |s: &BundleSet| s.dir.split('/').next().unwrap_or("").to_string();
    let mut entries = Vec::new();
    for (i, (a, ma)) in singles.iter().enumerate() {
        for (b, mb) in &singles[i + 1..] {
            if kernel_of(a) != kernel_of(b) {
                continue;
            }
            let (m, c) = pipeline::union_set(&[ma, mb])
                .map_err(|e| format!("{} and {}: {e}", a.dir, b.dir))?;
            let rel = format!("{}/{}", kernel_of(a), m.vendor);
            let text = m.to_yaml().map_err(|e| format!("{rel}: {e}"))?;
            let src_dir = root.join(&rel);
            std::fs::create_dir_all(&src_dir).map_err(|e| format!("{}: {e}", src_dir.display()))?;
            let src = src_dir.join("probes.bpf.c");
            std::fs::write(&src, c).map_err(|e| format!("{}: {e}", src.display()))?;
            entries.push(write_set(&rel, &m, &text, out, |object| {
                compile(&root, &root, &src, object)
            })?);
        }
    }
    Ok(entries)
}

/// Writes the bundle into `out` (built beside it, then put in its place: a reader never sees
/// half a bundle) and prints one line per set.
pub(crate) fn bundle(sets: &Path, out: &Path) -> Result<ExitCode, String> {
    let sets = std::fs::canonicalize(sets).map_err(|e| format!("{}: {e}", sets.display()))?;
    // clang runs in the scratch root, so a relative `--out` (as the package build passes)
    // would name no file there
    let out = &std::path::absolute(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let dirs = set_dirs(&sets)?;
    let partial = out.with_extension(format!("partial-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&partial);
    let mut index = BundleIndex {
        schema: BUNDLE_SCHEMA.into(),
        sets: Vec::new(),
    };
    let scratch = out.with_extension(format!("union-{}", std::process::id()));
    let built = dirs
        .iter()
        .map(|dir| bundle_set(&sets, dir, &partial))
        .collect::<Result<Vec<_>, _>>()
        .and_then(|singles| {
            let unions = bundle_unions(&sets, &singles, &partial, &scratch)?;
            Ok(singles.into_iter().map(|(s, _)| s).chain(unions).collect())
        });
    let _ = std::fs::remove_dir_all(&scratch);
    match built {
        Ok(all) => index.sets = all,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&partial);
            return Err(e);
        }
    }
    index.sets.sort_by(|a, b| a.dir.cmp(&b.dir));
    let json = serde_json::to_string_pretty(&index).map_err(|e| e.to_string())? + "\n";
    std::fs::write(partial.join(BUNDLE_INDEX), json)
        .map_err(|e| format!("{}: {e}", partial.display()))?;
    if out.exists() {
        if !out.join(BUNDLE_INDEX).is_file() {
            let _ = std::fs::remove_dir_all(&partial);
            return Err(format!(
                "{}: exists and is not a bundle (no {BUNDLE_INDEX}): not replaced",
                out.display()
            ));
        }
        std::fs::remove_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    }
    std::fs::rename(&partial, out).map_err(|e| format!("{}: {e}", out.display()))?;
    for s in &index.sets {
        println!(
            "{} {} (kernel {}, series {}, flavor {}, drivers {})",
            s.dir,
            s.manifest_sha256,
            s.kernel,
            s.series,
            s.flavor,
            s.driver_modules.join(",")
        );
    }
    eprintln!(
        "probegen bundle: {} sets in {}",
        index.sets.len(),
        out.display()
    );
    Ok(ExitCode::SUCCESS)
}
