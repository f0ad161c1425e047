//! Writing a bundle (`probegen bundle --out DIR`): every checked-in set
//! (`<sets>/linux-*/<vendor>/`) compiled to its BPF object, with its manifest and `index.json`
//! (the agent's `collect --bundle` reads it).
//!
//! Beside each set, the union set of every pair of vendors of one kernel
//! (`linux-6.12/mlx5+rxe/`, the manifests joined by `manifest::union`): the agent runs it on a
//! host with both drivers loaded.
//!
//! Two steps are the caller's, passed in as a [`Toolchain`]: rendering a union's C (code
//! generation) and compiling C to an object (clang). This crate runs neither, so the agent that
//! reads bundles carries no compiler and no code generator.
//!
//! Deterministic: the same sets and the same toolchain give byte-identical files.

use std::path::{Path, PathBuf};

use manifest::{Layer, Manifest};

use crate::error::BundleError;
use crate::read::{
    sha256_tag, BundleIndex, BundleSet, KernelVersion, BUNDLE_INDEX, BUNDLE_SCHEMA, SET_MANIFEST,
    SET_OBJECT,
};

/// One compilation: `source` (a set's `probes.bpf.c` under `root`, beside or under the shared
/// header `root/probegen.bpf.h`) into `object`. `root` is what the object may name of the
/// source's path (as its own name), so that the objects are the same in every checkout.
#[derive(Debug, Clone, Copy)]
pub struct CompileJob<'a> {
    pub root: &'a Path,
    pub source: &'a Path,
    pub object: &'a Path,
}

/// The steps the caller owns: the C of a union set, and the compiler.
pub trait Toolchain {
    /// The BPF C of `m` (a union set), headed with `refresh` (what writes it again).
    fn render(&self, m: &Manifest, refresh: &str) -> Result<String, BundleError>;
    /// Compiles one set's C to its object.
    fn compile(&self, job: &CompileJob<'_>) -> Result<(), BundleError>;
}

/// The probe set directories under `sets` (`linux-*/<vendor>/` with a manifest.yaml), sorted.
fn set_dirs(sets: &Path) -> Result<Vec<PathBuf>, BundleError> {
    let read = |d: &Path| -> Result<Vec<PathBuf>, BundleError> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(d)
            .map_err(BundleError::io(d))?
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
        return Err(BundleError::Invalid(format!(
            "{}: no probe set (expected linux-<ver>/<vendor>/manifest.yaml under it)",
            sets.display()
        )));
    }
    Ok(out)
}

/// One set into `out/<linux-ver>/<vendor>/`: its index entry and its manifest.
fn bundle_set(
    sets: &Path,
    dir: &Path,
    out: &Path,
    tools: &dyn Toolchain,
) -> Result<(BundleSet, Manifest), BundleError> {
    let rel = dir
        .strip_prefix(sets)
        .map_err(|_| {
            BundleError::Invalid(format!("{}: outside {}", dir.display(), sets.display()))
        })?
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
        return Err(BundleError::Invalid(format!(
            "{}: missing (expected the set's BPF C)",
            src.display()
        )));
    }
    let entry = write_set(&rel, &m, &text, out, |object| {
        tools.compile(&CompileJob {
            root: sets,
            source: &src,
            object,
        })
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
    compile_to: impl FnOnce(&Path) -> Result<(), BundleError>,
) -> Result<BundleSet, BundleError> {
    let v = KernelVersion::parse_prefix(&m.kernel.version).ok_or_else(|| {
        BundleError::Invalid(format!(
            "{rel}/{SET_MANIFEST}: kernel.version `{}`: expected X.Y.Z",
            m.kernel.version
        ))
    })?;
    let target = out.join(rel);
    std::fs::create_dir_all(&target).map_err(BundleError::io(&target))?;
    std::fs::write(target.join(SET_MANIFEST), text).map_err(BundleError::io(&target))?;
    let object = target.join(SET_OBJECT);
    compile_to(&object)?;
    let object_bytes = std::fs::read(&object).map_err(BundleError::io(&object))?;
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
        flavor: crate::read::flavor_of_dir(rel),
        vendor: m.vendor.clone(),
        kernel: m.kernel.version.clone(),
        series: format!("{}.{}", v.0, v.1),
        driver_modules,
        manifest_sha256: sha256_tag(text.as_bytes()),
        object_sha256: sha256_tag(&object_bytes),
        attachable: m.attachable().count() + m.data_plane.len(),
    })
}

/// The union set of `sets` (two or more vendors of one kernel), validated, with its C: the
/// manifests joined by `manifest::union`, the C rendered by the caller's toolchain as
/// `generate` renders any set.
fn union_set(sets: &[&Manifest], tools: &dyn Toolchain) -> Result<(Manifest, String), BundleError> {
    let m = manifest::union(sets)?;
    manifest::validate(&m, &format!("the union {}", m.vendor))?;
    let vendors: Vec<&str> = sets.iter().map(|s| s.vendor.as_str()).collect();
    let refresh = format!(
        "probegen bundle (the union of the {} sets of {})",
        vendors.join(" and "),
        m.kernel.version
    );
    let c = tools.render(&m, &refresh)?;
    Ok((m, c))
}

/// For each kernel, the union set of every pair of its vendors (`linux-6.12/mlx5+rxe`): a
/// host with two drivers loaded runs both drivers' probes and the core ones once. Their C is
/// rendered into `scratch/union/` (written into the objects as `union/...`), then compiled.
fn bundle_unions(
    sets: &Path,
    singles: &[(BundleSet, Manifest)],
    out: &Path,
    scratch: &Path,
    tools: &dyn Toolchain,
) -> Result<Vec<BundleSet>, BundleError> {
    let root = scratch.join("union");
    // the shared header beside the unions' C, so that every path the compiler writes is under
    // `root` (mapped to `union`): a path of this checkout in an object would differ per checkout
    std::fs::create_dir_all(&root).map_err(BundleError::io(&root))?;
    let header = sets.join("probegen.bpf.h");
    std::fs::copy(&header, root.join("probegen.bpf.h")).map_err(|e| {
        BundleError::Invalid(format!(
            "{}: {e} (expected the sets' shared header)",
            header.display()
        ))
    })?;
    let kernel_of = |s: &BundleSet| s.dir.split('/').next().unwrap_or("").to_string();
    let mut entries = Vec::new();
    for (i, (a, ma)) in singles.iter().enumerate() {
        for (b, mb) in &singles[i + 1..] {
            if kernel_of(a) != kernel_of(b) {
                continue;
            }
            let (m, c) = union_set(&[ma, mb], tools)
                .map_err(|e| BundleError::Invalid(format!("{} and {}: {e}", a.dir, b.dir)))?;
            let rel = format!("{}/{}", kernel_of(a), m.vendor);
            let text = m
                .to_yaml()
                .map_err(|e| BundleError::Invalid(format!("{rel}: {e}")))?;
            let src_dir = root.join(&rel);
            std::fs::create_dir_all(&src_dir).map_err(BundleError::io(&src_dir))?;
            let src = src_dir.join("probes.bpf.c");
            std::fs::write(&src, c).map_err(BundleError::io(&src))?;
            entries.push(write_set(&rel, &m, &text, out, |object| {
                tools.compile(&CompileJob {
                    root: &root,
                    source: &src,
                    object,
                })
            })?);
        }
    }
    Ok(entries)
}

/// Writes the bundle of the sets under `sets` into `out` (built beside it, then put in its
/// place: a reader never sees half a bundle): its index, sets sorted by directory.
pub fn write_bundle(
    sets: &Path,
    out: &Path,
    tools: &dyn Toolchain,
) -> Result<BundleIndex, BundleError> {
    let sets = std::fs::canonicalize(sets).map_err(BundleError::io(sets))?;
    // the compiler runs in the scratch root, so a relative `--out` (as the package build
    // passes) would name no file there
    let out = &std::path::absolute(out).map_err(BundleError::io(out))?;
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
        .map(|dir| bundle_set(&sets, dir, &partial, tools))
        .collect::<Result<Vec<_>, _>>()
        .and_then(|singles| {
            let unions = bundle_unions(&sets, &singles, &partial, &scratch, tools)?;
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
    let json = serde_json::to_string_pretty(&index)
        .map_err(|e| BundleError::Invalid(e.to_string()))?
        + "\n";
    std::fs::write(partial.join(BUNDLE_INDEX), json).map_err(BundleError::io(&partial))?;
    if out.exists() {
        if !out.join(BUNDLE_INDEX).is_file() {
            let _ = std::fs::remove_dir_all(&partial);
            return Err(BundleError::Invalid(format!(
                "{}: exists and is not a bundle (no {BUNDLE_INDEX}): not replaced",
                out.display()
            )));
        }
        std::fs::remove_dir_all(out).map_err(BundleError::io(out))?;
    }
    std::fs::rename(&partial, out).map_err(BundleError::io(out))?;
    Ok(index)
}
