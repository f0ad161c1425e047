//! `generate`: the selection of one vendor or several (one parse), rendered and written
//! atomically, one directory per vendor.

use std::path::Path;

use crate::degraded::enforce;
use crate::selection::{manifest_of, select_vendors, select_with_rules, Selected};
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
            let mut write = |s: Selected, notify: &mut dyn FnMut(Notice)| {
                let one = SourceOptions {
                    vendor: Some(s.vendor.clone()),
                    ..opts.clone()
                };
                let line = write_set(&one, &s, &out.join(&s.vendor), with_header, notify)?;
                notify(Notice::Wrote(line));
                Ok(())
            };
            if select_vendors(opts, &rules, &names, all, entries, notify, &mut write)? == 0 {
                return Err(Error::NoVendorBuilt(
                    opts.vendor.clone().unwrap_or_default(),
                ));
            }
        }
        VendorRequest::Single => {
            let s = select_with_rules(opts, rules, entries, notify)?;
            let line = write_set(opts, &s, out, with_header, notify)?;
            notify(Notice::Wrote(line));
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

/// Validate one selection against the binaries, render its set (with the shared header when
/// `with_header`) and write it to `out`; returns the summary line.
fn write_set(
    opts: &SourceOptions,
    s: &Selected,
    out: &Path,
    with_header: bool,
    notify: &mut dyn FnMut(Notice),
) -> Result<String, Error> {
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
    codegen::write_set_atomic(out, &files)?;
    let st = &manifest.stats;
    Ok(format!(
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
    ))
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
