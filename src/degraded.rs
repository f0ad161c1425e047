//! Completeness at the command line: the vendor's driver must be there and built, a missing
//! entry names what lost it, and a degraded input fails `generate` and `check` (exit 2) unless
//! `--allow-degraded`, always with one summary line on stderr.

use analyzer::completeness::{self, Degradation};
use analyzer::missing;
use analyzer::source::SourceTree;

use crate::SourceArgs;

/// The vendor's driver directory must exist and hold a file the config builds; otherwise the
/// set would silently be core-only. `--not-built` asks for that set explicitly.
pub fn vendor_present(
    src: &SourceArgs,
    name: &str,
    vendor: &heuristics::Vendor,
    tree: &SourceTree,
) -> Result<(), String> {
    if src.not_built {
        return Ok(());
    }
    let kbuild_top = &tree.layout().kbuild_top;
    let Some(dir) = vendor
        .dirs
        .iter()
        .find(|d| d.starts_with(kbuild_top.as_str()))
    else {
        return Ok(());
    };
    let dir = dir.trim_end_matches('/');
    let hint = "pass --not-built to write its set anyway (vendor probes `not-built`)";
    if !tree.root.join(dir).is_dir() {
        return Err(format!(
            "--vendor {name}: {dir} is not in {}: expected the vendor's driver sources; {hint}",
            tree.root.display()
        ));
    }
    let prefix = format!("{dir}/");
    if !tree.build.modules.keys().any(|f| f.starts_with(&prefix)) {
        let why = tree
            .build
            .unbuilt
            .keys()
            .find(|f| f.starts_with(&prefix))
            .map(|f| missing::why_missing_file(tree, f))
            .unwrap_or_else(|| format!("no Makefile under {dir} names a built object"));
        return Err(format!(
            "--vendor {name}: {} does not build {dir} ({why}); {hint}",
            tree.config_name()
        ));
    }
    Ok(())
}

/// "entry `x` not found in DIR: <why>", for an entry the user named or a default one.
pub fn missing_entry(tree: &SourceTree, name: &str, named_by_user: bool) -> String {
    let what = if named_by_user {
        "--entry"
    } else {
        "default entry"
    };
    format!(
        "{what} `{name}` not found in {}: {}",
        tree.root.display(),
        missing::why_missing(tree, name)
    )
}

/// The `## Degraded input` section of a markdown report (empty when nothing was lost).
pub fn markdown(degraded: &[manifest::Degraded]) -> String {
    if degraded.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "\n## Degraded input\n\nThe sources could not be fully read or evaluated: the regenerated set may lack probes the kernel has.\n\n| kind | file | line | what was lost |\n|---|---|---|---|\n",
    );
    for d in degraded {
        s.push_str(&format!(
            "| {} | `{}` | {} | {} |\n",
            d.kind, d.file, d.line, d.detail
        ));
    }
    s
}

/// Print the one-line summary of a degraded input; an error (exit 2) when `fail` and the user
/// did not pass `--allow-degraded`.
pub fn enforce(src: &SourceArgs, degraded: &[Degradation], fail: bool) -> Result<(), String> {
    if degraded.is_empty() {
        return Ok(());
    }
    let line = completeness::summary(degraded);
    if fail && !src.allow_degraded {
        return Err(format!(
            "{line} (pass --allow-degraded to go on; the output then lists what was lost)"
        ));
    }
    eprintln!("probegen: warning: {line}");
    Ok(())
}
