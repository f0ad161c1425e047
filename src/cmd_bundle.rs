//! `probegen bundle --out DIR`: the `bundle` crate writes it; the two steps it leaves to its
//! caller are here: a union set's C (the pipeline renders it as `generate` does) and clang.
//!
//! The objects keep `-g` (libbpf needs their BTF) but no path of this checkout:
//! `-fdebug-prefix-map` rewrites the sets directory to its own name and
//! `-fdebug-compilation-dir=.` drops the working directory; clang runs in the sets' parent,
//! where the rewritten path still names the source (BTF's line info embeds the source lines it
//! reads there).

use std::path::Path;
use std::process::{Command, ExitCode};

use bundle::{BundleError, CompileJob, Toolchain};
use manifest::Manifest;

/// clang (`$CLANG`, else `clang` on the path) and the pipeline's renderer.
struct Clang;

impl Toolchain for Clang {
    fn render(&self, m: &Manifest, refresh: &str) -> Result<String, BundleError> {
        pipeline::render_bpf(m, refresh).map_err(|e| BundleError::Compile(e.to_string()))
    }

    /// Compiles as scripts/e2e-collect.sh does, without paths: `root` is written as its own
    /// name.
    fn compile(&self, job: &CompileJob<'_>) -> Result<(), BundleError> {
        let clang = std::env::var_os("CLANG").unwrap_or_else(|| "clang".into());
        let root = job.root;
        let name = root
            .file_name()
            .map_or_else(|| "sets".into(), |n| n.to_string_lossy().into_owned());
        let parent = job.source.parent().and_then(Path::parent).ok_or_else(|| {
            BundleError::Compile(format!(
                "{}: not inside a set directory",
                job.source.display()
            ))
        })?;
        // BTF line info carries each source line, which clang reads back through the mapped
        // (relative) path: run where that path resolves, or the lines are silently left out.
        let result = Command::new(&clang)
            .current_dir(root.parent().unwrap_or(root))
            .args(["-target", "bpf", "-O2", "-g", "-D__TARGET_ARCH_x86"])
            .arg("-I/usr/include/x86_64-linux-gnu")
            .arg("-I")
            .arg(parent)
            .arg("-I")
            .arg(root)
            .arg(format!("-fdebug-prefix-map={}={name}", root.display()))
            .arg("-fdebug-compilation-dir=.")
            .arg("-c")
            .arg(job.source)
            .arg("-o")
            .arg(job.object)
            .output()
            .map_err(|e| {
                BundleError::Compile(format!(
                    "{}: {e} (needed to compile the sets)",
                    clang.to_string_lossy()
                ))
            })?;
        if !result.status.success() {
            let err = String::from_utf8_lossy(&result.stderr);
            let first = err.lines().find(|l| l.contains("error")).unwrap_or("");
            return Err(BundleError::Compile(format!(
                "{}: does not compile: {first}",
                job.source.display()
            )));
        }
        Ok(())
    }
}

/// `probegen bundle --list DIR`: the index of a bundle, one set a line (directory, vendor,
/// series, flavor, the kernel release it was generated from, its driver modules), and the sets
/// the index names whose files are missing or differ (exit 1).
pub(crate) fn list(dir: &Path) -> Result<ExitCode, BundleError> {
    let bundle = bundle::read_bundle(dir)?;
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

/// Writes the bundle into `out` and prints one line per set.
pub(crate) fn bundle(sets: &Path, out: &Path) -> Result<ExitCode, BundleError> {
    let index = bundle::write_bundle(sets, out, &Clang)?;
    let out = std::path::absolute(out).unwrap_or_else(|_| out.to_path_buf());
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
