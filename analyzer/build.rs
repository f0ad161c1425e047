//! Fingerprints the analyzer's own sources and the locked parser versions: the facts cache
//! (src/facts_cache.rs) keys every entry by it, so facts extracted by another build of the
//! analyzer are never reused. Compiles csrc/ (the body walk's child listing) against the
//! private headers of the tree-sitter release the lock pins.

use std::collections::hash_map::DefaultHasher;
use std::hash::Hasher;
use std::path::{Path, PathBuf};

fn main() {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let mut files = Vec::new();
    collect(&manifest_dir.join("src"), &mut files);
    collect(&manifest_dir.join("csrc"), &mut files);
    files.sort();
    files.push(manifest_dir.join("Cargo.toml"));
    // The workspace lock pins tree-sitter and its C grammar.
    files.push(manifest_dir.join("..").join("Cargo.lock"));
    let mut h = DefaultHasher::new();
    h.write(env!("CARGO_PKG_VERSION").as_bytes());
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
        h.write(
            f.strip_prefix(&manifest_dir)
                .unwrap_or(f)
                .to_string_lossy()
                .as_bytes(),
        );
        h.write(&std::fs::read(f).unwrap_or_default());
    }
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=csrc");
    compile_c(&manifest_dir);
    println!(
        "cargo:rustc-env=PROBEGEN_ANALYZER_BUILD={}-{:016x}",
        env!("CARGO_PKG_VERSION"),
        h.finish()
    );
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// csrc/visible_children.c, with tree-sitter's `src/` (its private headers) on the include
/// path: tree-sitter's build exports its public `include/` (links = "tree-sitter"), and the
/// private headers sit beside it in the same package.
fn compile_c(manifest_dir: &Path) {
    let Some(include) = std::env::var_os("DEP_TREE_SITTER_INCLUDE") else {
        panic!("tree-sitter's build did not export DEP_TREE_SITTER_INCLUDE");
    };
    let include = PathBuf::from(include);
    let private = include.parent().map(|p| p.join("src")).unwrap_or_default();
    cc::Build::new()
        .flag_if_supported("-std=c11")
        .include(&private)
        .include(&include)
        .define("_POSIX_C_SOURCE", "200112L")
        .define("_DEFAULT_SOURCE", None)
        .file(manifest_dir.join("csrc").join("visible_children.c"))
        .compile("probegen_visible_children");
}
