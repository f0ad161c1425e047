//! `probegen bundle --out DIR`: every checked-in set (`<sets>/linux-*/<vendor>/`) compiled to
//! its BPF object, with its manifest and `index.json` (the agent's `collect --bundle` reads it).
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
    sha256_tag, BundleIndex, BundleSet, KernelVersion, BUNDLE_INDEX, BUNDLE_SCHEMA, SET_MANIFEST,
    SET_OBJECT,
};

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

/// Compiles `src` (a set's probes.bpf.c) to `out` as scripts/e2e-collect.sh does, without paths.
fn compile(sets: &Path, src: &Path, out: &Path) -> Result<(), String> {
    let clang = std::env::var_os("CLANG").unwrap_or_else(|| "clang".into());
    let name = sets
        .file_name()
        .map_or_else(|| "sets".into(), |n| n.to_string_lossy().into_owned());
    let parent = src
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| format!("{}: not inside a set directory", src.display()))?;
    // BTF line info carries each source line, which clang reads back through the mapped
    // (relative) path: run where that path resolves, or the lines are silently left out.
    let result = Command::new(&clang)
        .current_dir(sets.parent().unwrap_or(sets))
        .args(["-target", "bpf", "-O2", "-g", "-D__TARGET_ARCH_x86"])
        .arg("-I/usr/include/x86_64-linux-gnu")
        .arg("-I")
        .arg(parent)
        .arg("-I")
        .arg(sets)
        .arg(format!("-fdebug-prefix-map={}={name}", sets.display()))
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

/// One set into `out/<linux-ver>/<vendor>/`: its index entry.
fn bundle_set(sets: &Path, dir: &Path, out: &Path) -> Result<BundleSet, String> {
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
    let v = KernelVersion::parse_prefix(&m.kernel.version).ok_or_else(|| {
        format!(
            "{}: kernel.version `{}`: expected X.Y.Z",
            manifest_path.display(),
            m.kernel.version
        )
    })?;
    let src = dir.join("probes.bpf.c");
    if !src.is_file() {
        return Err(format!(
            "{}: missing (expected the set's BPF C)",
            src.display()
        ));
    }
    let target = out.join(&rel);
    std::fs::create_dir_all(&target).map_err(|e| format!("{}: {e}", target.display()))?;
    std::fs::write(target.join(SET_MANIFEST), &text)
        .map_err(|e| format!("{}: {e}", target.display()))?;
    let object = target.join(SET_OBJECT);
    compile(sets, &src, &object)?;
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
        dir: rel,
        vendor: m.vendor.clone(),
        kernel: m.kernel.version.clone(),
        series: format!("{}.{}", v.0, v.1),
        driver_modules,
        manifest_sha256: sha256_tag(text.as_bytes()),
        object_sha256: sha256_tag(&object_bytes),
    })
}

/// Writes the bundle into `out` (built beside it, then put in its place: a reader never sees
/// half a bundle) and prints one line per set.
pub(crate) fn bundle(sets: &Path, out: &Path) -> Result<ExitCode, String> {
    let sets = std::fs::canonicalize(sets).map_err(|e| format!("{}: {e}", sets.display()))?;
    let dirs = set_dirs(&sets)?;
    let partial = out.with_extension(format!("partial-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&partial);
    let mut index = BundleIndex {
        schema: BUNDLE_SCHEMA.into(),
        sets: Vec::new(),
    };
    for dir in &dirs {
        match bundle_set(&sets, dir, &partial) {
            Ok(s) => index.sets.push(s),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&partial);
                return Err(e);
            }
        }
    }
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
            "{} {} (kernel {}, series {}, drivers {})",
            s.dir,
            s.manifest_sha256,
            s.kernel,
            s.series,
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
