//! The maintenance workflows: `check` (kernel upgrade), `port` (another vendor), `diff`
//! (coverage diff for a review) and `coverage` (against a failure log). Glue only: read,
//! call the pure comparisons in `codegen::compare`, `codegen::coverage`, `heuristics::port`,
//! print.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::ExitCode;

use analyzer::graph::DEFAULT_ENTRIES;
use analyzer::source::{LoadOptions, SourceTree};
use analyzer::{CallGraph, VendorScope};
use clap::ValueEnum;
use codegen::Manifest;
use heuristics::port::{SetProbe, Side};

use crate::commands::{self, CmdResult};
use crate::SourceArgs;

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
pub enum ReportFormat {
    Markdown,
    Json,
}

/// One line, with long quoted excerpts of the input (serde echoes them) cut short.
fn one_line(s: &str) -> String {
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = String::new();
    let mut quoted = false;
    for (i, part) in s.split('"').enumerate() {
        if i > 0 {
            out.push('"');
            quoted = !quoted;
        }
        if quoted && part.chars().count() > 40 {
            out.extend(part.chars().take(37));
            out.push_str("...");
        } else {
            out.push_str(part);
        }
    }
    out
}

/// Read and parse a manifest; errors name the file (and line:column for YAML errors).
pub fn read_manifest(path: &Path) -> Result<Manifest, String> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{origin}: {e}"))?;
    Manifest::from_yaml(&text, &origin).map_err(|e| {
        let e = one_line(&e);
        if e.contains("expected") {
            e
        } else {
            format!("{e} (expected a probegen manifest.yaml)")
        }
    })
}

/// Write a report to stdout; a closed pipe (`| head`) is not an error.
fn emit(text: &str) -> Result<(), String> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(format!("stdout: {e}")),
        _ => Ok(()),
    }
}

fn print_json(v: Result<serde_json::Value, serde_json::Error>) -> Result<(), String> {
    let v = v.map_err(|e| e.to_string())?;
    emit(&(serde_json::to_string_pretty(&v).map_err(|e| e.to_string())? + "\n"))
}

/// `probegen check`: regenerate in memory and compare with `against`. Exit 0 no drift, 1 drift.
pub fn check(src: &SourceArgs, against: &Path, format: ReportFormat) -> CmdResult {
    let old = read_manifest(against)?;
    let mut src = src.clone();
    match &src.vendor {
        Some(v) if *v != old.vendor => {
            return Err(format!(
                "--vendor {v}, but {} is the {} probe set: expected --vendor {}",
                against.display(),
                old.vendor,
                old.vendor
            ))
        }
        Some(_) => {}
        None => src.vendor = Some(old.vendor.clone()),
    }
    let s = commands::select(&src)?;
    let new = commands::manifest_of(&src, &s);
    let g = &s.loaded.graph;
    let defined = |f: &str| !g.find(f).is_empty();
    let d = codegen::compare::drift(&old, &new, Some(&defined));
    match format {
        ReportFormat::Markdown => emit(&codegen::compare::check_markdown(
            &d,
            &against.display().to_string(),
        ))?,
        ReportFormat::Json => {
            let mut v = serde_json::to_value(&d).map_err(|e| e.to_string())?;
            if let Some(o) = v.as_object_mut() {
                o.insert("against".into(), against.display().to_string().into());
                o.insert("drift".into(), (!d.is_empty()).into());
            }
            print_json(Ok(v))?;
        }
    }
    Ok(if d.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn set_of(m: &Manifest) -> Vec<SetProbe> {
    m.probes
        .iter()
        .map(|p| SetProbe {
            function: p.function.clone(),
            module: p.module.clone(),
            file: p.file.clone(),
            layer: p.layer.clone(),
            object: p.object.clone(),
            focus: p.focus.clone(),
        })
        .collect()
}

/// Options of `probegen port`.
pub struct PortArgs<'a> {
    pub kernel_src: &'a Path,
    pub kconfig: Option<&'a Path>,
    pub from: &'a str,
    pub to: &'a str,
    pub rules: Option<&'a Path>,
    pub format: ReportFormat,
}

/// `probegen port`: both vendors' sets from one source tree, mapped through ib_device_ops.
pub fn port(a: &PortArgs) -> CmdResult {
    let rules = commands::load_rules(a.rules)?;
    let vendor = |flag: &str, name: &str| {
        rules.vendor(name).ok_or_else(|| {
            format!(
                "unknown {flag} `{name}`: known vendors are {}",
                rules.vendor_names().join(", ")
            )
        })
    };
    let (fv, tv) = (vendor("--from", a.from)?, vendor("--to", a.to)?);
    if a.from == a.to {
        return Err(format!(
            "--from and --to are both `{}`: expected two different vendors",
            a.from
        ));
    }
    let tree = SourceTree::load(
        a.kernel_src,
        &LoadOptions {
            kconfig: a.kconfig.map(Path::to_path_buf),
            ..LoadOptions::default()
        },
    )
    .map_err(|e| e.to_string())?;
    let binaries =
        analyzer::traceability::Binaries::load(a.kernel_src).map_err(|e| e.to_string())?;
    let entries: Vec<String> = DEFAULT_ENTRIES.iter().map(|s| s.to_string()).collect();
    let kernel = codegen::manifest::KernelInfo {
        version: tree.version.clone().unwrap_or_else(|| "unknown".into()),
        config: a
            .kconfig
            .map_or_else(|| ".config".to_string(), |p| p.display().to_string()),
    };
    let manifest_for = |name: &str, v: &heuristics::Vendor| -> Result<Manifest, String> {
        let g = CallGraph::build(&tree, &VendorScope::only(&v.dirs));
        let ids = g
            .entries(&entries)
            .map_err(|n| format!("entry `{n}` not found in {}", a.kernel_src.display()))?;
        let sel = heuristics::select(&g, &rules, name, &ids).map_err(|e| e.to_string())?;
        Ok(codegen::build_manifest(
            &g,
            &sel,
            binaries.as_ref(),
            kernel.clone(),
            &entries,
        ))
    };
    let (fm, tm) = (manifest_for(a.from, fv)?, manifest_for(a.to, tv)?);
    let dirs: Vec<String> = fv
        .dirs
        .iter()
        .chain(&tv.dirs)
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let g = CallGraph::build(&tree, &VendorScope::only(&dirs));
    let (fs, ts) = (set_of(&fm), set_of(&tm));
    let p = heuristics::port::port(
        &g,
        Side {
            name: a.from,
            vendor: fv,
            set: &fs,
        },
        Side {
            name: a.to,
            vendor: tv,
            set: &ts,
        },
    );
    match a.format {
        ReportFormat::Markdown => emit(&p.to_markdown())?,
        ReportFormat::Json => print_json(serde_json::to_value(&p))?,
    }
    Ok(ExitCode::SUCCESS)
}

/// `probegen diff OLD NEW`.
pub fn diff(old: &Path, new: &Path, format: ReportFormat) -> CmdResult {
    let (o, n) = (read_manifest(old)?, read_manifest(new)?);
    let d = codegen::compare::coverage_diff(&o, &n);
    match format {
        ReportFormat::Markdown => emit(&codegen::compare::diff_markdown(&d))?,
        ReportFormat::Json => print_json(serde_json::to_value(&d))?,
    }
    Ok(ExitCode::SUCCESS)
}

/// `probegen coverage --manifest M --failures CSV`.
pub fn coverage(
    manifest: &Path,
    failures: &Path,
    format: ReportFormat,
    lenient: bool,
) -> CmdResult {
    let m = read_manifest(manifest)?;
    let origin = failures.display().to_string();
    let text = std::fs::read_to_string(failures).map_err(|e| format!("{origin}: {e}"))?;
    let (rows, bad) = codegen::coverage::parse_failures(&text);
    if !bad.is_empty() {
        for b in &bad {
            if lenient {
                eprintln!(
                    "probegen: warning: {origin}:{}: {} (skipped)",
                    b.line, b.error
                );
            } else {
                eprintln!("probegen: {origin}:{}: {}", b.line, b.error);
            }
        }
        if !lenient {
            eprintln!(
                "probegen: {origin}: {} malformed row(s); fix them or pass --lenient to skip them",
                bad.len()
            );
            return Ok(ExitCode::from(2));
        }
    }
    if rows.is_empty() {
        return Err(format!(
            "{origin}: no failure rows: expected lines `verb,errno,weight`"
        ));
    }
    let c = codegen::coverage::coverage(&m, &manifest.display().to_string(), &rows, bad);
    match format {
        ReportFormat::Markdown => emit(&codegen::coverage::coverage_markdown(&c))?,
        ReportFormat::Json => print_json(serde_json::to_value(&c))?,
    }
    Ok(ExitCode::SUCCESS)
}
