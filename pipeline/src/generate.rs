//! `generate`: the selection of one vendor or several (one parse), rendered and written
//! atomically, one directory per vendor.

use std::path::{Path, PathBuf};

use crate::degraded::enforce;
use crate::selection::{manifest_of, select_vendors, select_with_rules, EachSelection, Selected};
use crate::source::{vendor_request, VendorRequest};
use crate::{Error, Notice, SourceOptions};

/// Write the probe set of `opts.vendor` into `out` (a list or `all`: one directory per vendor
/// under `out`, each byte-identical to a single-vendor run). `header_dir`: where the shared
/// `probegen.bpf.h` goes, once; `None` puts it into each set. Each written set is a
/// [`Notice::Wrote`].
pub fn generate(
    opts: &SourceOptions,
    out: &Path,
    entries: &[String],
    header_dir: Option<&Path>,
    notify: &mut dyn FnMut(Notice),
) -> Result<(), Error> {
    let rules = crate::load_rules(opts.rules.as_deref())?;
    let with_header = header_dir.is_none();
    match vendor_request(&rules, opts.vendor.as_deref())? {
        VendorRequest::Many { names, all } => {
            // Checked and rendered beside the next vendor; written here, in the list's order,
            // so a set that fails leaves every earlier one whole and no later one written.
            let finish = |s: Selected, notices: &mut Vec<Notice>| {
                let one = SourceOptions {
                    vendor: Some(s.vendor.clone()),
                    ..opts.clone()
                };
                let dir = out.join(&s.vendor);
                render_set(&one, &s, with_header, &mut |n| notices.push(n)).map(|r| (dir, r))
            };
            let mut take = |(dir, set): (PathBuf, RenderedSet), notify: &mut dyn FnMut(Notice)| {
                write_set(&dir, set, notify)
            };
            let each = EachSelection {
                finish: &finish,
                take: &mut take,
            };
            if select_vendors(opts, &rules, &names, all, entries, notify, each)? == 0 {
                return Err(Error::NoVendorBuilt(
                    opts.vendor.clone().unwrap_or_default(),
                ));
            }
        }
        VendorRequest::Single => {
            let s = select_with_rules(opts, rules, entries, notify)?;
            let set = render_set(opts, &s, with_header, notify)?;
            write_set(out, set, notify)?;
        }
    }
    if let Some(dir) = header_dir {
        let header = codegen::render_header()?;
        let path = dir.join(codegen::HEADER_NAME);
        codegen::write_atomic(&path, header.as_bytes())
            .map_err(|e| Error::Output(format!("{}: {e}", path.display())))?;
    }
    Ok(())
}

/// One probe set's files, rendered, and its summary line: what [`write_set`] writes.
struct RenderedSet {
    files: Vec<(String, String)>,
    summary: String,
}

/// Validate one selection against the binaries and render its set (with the shared header
/// when `with_header`); touches no output.
fn render_set(
    opts: &SourceOptions,
    s: &Selected,
    with_header: bool,
    notify: &mut dyn FnMut(Notice),
) -> Result<RenderedSet, Error> {
    enforce(opts, &s.degraded, true, notify)?;
    if s.binaries.is_none() {
        notify(Notice::Warning(format!(
            "no vmlinux/modules in {}: attach verdicts are unchecked (run scripts/fetch-kernel.sh)",
            opts.kernel_src.display()
        )));
    }
    let manifest = manifest_of(opts, s);
    let g = &s.loaded.graph;
    if let Some(b) = &s.binaries {
        let mismatches = codegen::validate(&manifest, g, &s.selection, b);
        if !mismatches.is_empty() {
            return Err(Error::BinaryMismatch {
                count: mismatches.len(),
                kernel: opts.kernel_src.clone(),
                list: mismatches.iter().map(|m| format!("  {m}")).collect(),
            });
        }
    }
    let attachable = |id: analyzer::FnId| {
        let n = g.node(id);
        s.binaries
            .as_ref()
            .is_some_and(|b| b.verdict(n.module.as_deref(), &n.name).is_attachable())
    };
    let cx = codegen::RenderContext {
        graph: g,
        selection: &s.selection,
        attachable: &attachable,
        refresh: refresh_command(opts),
    };
    let mut files = codegen::render_all(&manifest, &cx)?;
    if with_header {
        let header = codegen::render_header()?;
        files.push((codegen::HEADER_NAME.to_string(), header));
    }
    let st = &manifest.stats;
    let summary = format!(
        "{}: {} probes ({} core, {} vendor, {} attachable) from {} reachable functions; wrote {}",
        manifest.vendor,
        st.probes,
        st.core,
        st.vendor,
        st.attachable,
        st.reachable,
        files
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(RenderedSet { files, summary })
}

/// Write a rendered set into `out`, atomically, and say so.
fn write_set(out: &Path, set: RenderedSet, notify: &mut dyn FnMut(Notice)) -> Result<(), Error> {
    codegen::write_set_atomic(out, &set.files)?;
    notify(Notice::Wrote(set.summary));
    Ok(())
}

/// The command that regenerates a probe set, printed in the generated files' headers. It does
/// not name the output directory, so the files are the same wherever they are written.
fn refresh_command(opts: &SourceOptions) -> String {
    let dir = opts
        .kernel_src
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!(
        "scripts/regenerate.sh  (this set alone: probegen generate --kernel-src <{dir}> --vendor {} --out DIR)",
        opts.vendor.as_deref().unwrap_or("?"),
    )
}
