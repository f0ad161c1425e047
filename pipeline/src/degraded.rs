//! Completeness of a run: the vendor's driver must be there and built, a missing entry names
//! what lost it, and a degraded input fails `generate` and `check` unless `--allow-degraded`,
//! always with one summary line.

use analyzer::Degradation;
use analyzer::SourceTree;

use crate::{Error, Notice, SourceOptions};

/// The vendor's driver directory must exist and hold a file the config builds; otherwise the
/// set would silently be core-only. `--not-built` asks for that set explicitly.
pub(crate) fn vendor_present(
    opts: &SourceOptions,
    vendor: &heuristics::Vendor,
    tree: &SourceTree,
) -> Result<(), Error> {
    if opts.not_built {
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
    let not_built = |why: String| Error::VendorNotBuilt {
        vendor: vendor.name.clone(),
        why,
    };
    if !tree.root.join(dir).is_dir() {
        return Err(not_built(format!(
            "{dir} is not in {}: expected the vendor's driver sources",
            tree.root.display()
        )));
    }
    let prefix = format!("{dir}/");
    if !tree.build.modules.keys().any(|f| f.starts_with(&prefix)) {
        let why = tree
            .build
            .unbuilt
            .keys()
            .find(|f| f.starts_with(&prefix))
            .map(|f| analyzer::why_missing_file(tree, f))
            .unwrap_or_else(|| format!("no Makefile under {dir} names a built object"));
        return Err(not_built(format!(
            "{} does not build {dir} ({why})",
            tree.config_name()
        )));
    }
    Ok(())
}

/// An entry function that is not in the tree: the user's `--entry` or a default one.
pub(crate) fn missing_entry(tree: &SourceTree, name: &str, named_by_user: bool) -> Error {
    Error::MissingEntry {
        name: name.to_string(),
        root: tree.root.clone(),
        named_by_user,
        why: analyzer::why_missing(tree, name),
    }
}

/// The `## Degraded input` section of a markdown report (empty when nothing was lost).
pub fn degraded_markdown(degraded: &[manifest::Degraded]) -> String {
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

/// The one-line summary of a degraded input as a warning; an error when `fail` and the user
/// did not pass `--allow-degraded`.
pub(crate) fn enforce(
    opts: &SourceOptions,
    degraded: &[Degradation],
    fail: bool,
    notify: &mut dyn FnMut(Notice),
) -> Result<(), Error> {
    if degraded.is_empty() {
        return Ok(());
    }
    let summary = analyzer::degradation_summary(degraded);
    if fail && !opts.allow_degraded {
        return Err(Error::Degraded { summary });
    }
    notify(Notice::Warning(summary));
    Ok(())
}
