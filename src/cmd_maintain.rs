//! The maintenance workflows: `check` (kernel upgrade), `port` (another vendor), `diff`
//! (coverage diff for a review) and `coverage` (against a failure log). Glue only: read,
//! call the pure work in the `maintain` crate, print.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::ExitCode;

use analyzer::graph::DEFAULT_ENTRIES;
use analyzer::source::{LoadOptions, SourceTree};
use analyzer::CallGraph;
use clap::ValueEnum;
use maintain::port::Side;
use manifest::Manifest;

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
    let text = manifest::input::read_text(
        path,
        manifest::input::MAX_MANIFEST_BYTES,
        manifest::MANIFEST_WHAT,
    )?;
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
    crate::degraded::enforce(&src, &s.degraded, true)?;
    let new = commands::manifest_of(&src, &s);
    let g = &s.loaded.graph;
    let defined = |f: &str| !g.find(f).is_empty();
    let mut d = maintain::compare::drift(&old, &new, Some(&defined));
    maintain::compare::apply_successors(&mut d, &|r| {
        maintain::check::successor(g, &old, &new, &s.rules, r)
    });
    let rd = maintain::check::rules_drift(g, &s.rules, &old, &new, &|d| {
        src.kernel_src.join(d).is_dir()
    });
    let drifted = !d.is_empty() || rd.breaking() > 0;
    match format {
        ReportFormat::Markdown => {
            let mut text = maintain::compare::check_markdown(&d, &against.display().to_string())
                .map_err(|e| e.to_string())?;
            text.push_str(
                &maintain::compare::rules_drift_markdown(&rd).map_err(|e| e.to_string())?,
            );
            text.push_str(&crate::degraded::markdown(&new.degraded));
            emit(&text)?
        }
        ReportFormat::Json => {
            let mut v = serde_json::to_value(&d).map_err(|e| e.to_string())?;
            if let Some(o) = v.as_object_mut() {
                o.insert("against".into(), against.display().to_string().into());
                o.insert("drift".into(), drifted.into());
                o.insert(
                    "rules_drift".into(),
                    serde_json::to_value(&rd).map_err(|e| e.to_string())?,
                );
                if !new.degraded.is_empty() {
                    let gaps = serde_json::to_value(&new.degraded).map_err(|e| e.to_string())?;
                    o.insert("degraded".into(), gaps);
                }
            }
            print_json(Ok(v))?;
        }
    }
    Ok(if !drifted {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
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
            ..LoadOptions::new(rules.source_layout())
        },
    )
    .map_err(|e| e.to_string())?;
    let binaries =
        analyzer::traceability::Binaries::load(a.kernel_src).map_err(|e| e.to_string())?;
    let entries: Vec<String> = DEFAULT_ENTRIES.iter().map(|s| s.to_string()).collect();
    let kernel = manifest::KernelInfo {
        version: tree.version.clone().unwrap_or_else(|| "unknown".into()),
        config: a
            .kconfig
            .map_or_else(|| ".config".to_string(), |p| p.display().to_string()),
    };
    let manifest_for = |name: &str, v: &heuristics::Vendor| -> Result<Manifest, String> {
        let g = CallGraph::build(&tree, &rules.scope_of(&v.dirs));
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
    let g = CallGraph::build(&tree, &rules.scope_of(&dirs));
    let (fs, ts) = (maintain::check::set_of(&fm), maintain::check::set_of(&tm));
    let p = maintain::port::port(
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
        ReportFormat::Markdown => emit(&p.to_markdown().map_err(|e| e.to_string())?)?,
        ReportFormat::Json => print_json(serde_json::to_value(&p))?,
    }
    Ok(ExitCode::SUCCESS)
}

/// `probegen diff OLD NEW`.
pub fn diff(old: &Path, new: &Path, format: ReportFormat) -> CmdResult {
    let (o, n) = (read_manifest(old)?, read_manifest(new)?);
    let d = maintain::compare::coverage_diff(&o, &n);
    match format {
        ReportFormat::Markdown => {
            emit(&maintain::compare::diff_markdown(&d).map_err(|e| e.to_string())?)?
        }
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
    let text = manifest::input::read_text(
        failures,
        manifest::input::MAX_CSV_BYTES,
        "a failure log (CSV verb,errno,weight)",
    )?;
    let (rows, bad) = maintain::coverage::parse_failures(&text);
    if !bad.is_empty() {
        // The first rows name the problem; millions of lines would bury it.
        const SHOWN: usize = 20;
        for b in bad.iter().take(SHOWN) {
            if lenient {
                eprintln!(
                    "probegen: warning: {origin}:{}: {} (skipped)",
                    b.line, b.error
                );
            } else {
                eprintln!("probegen: {origin}:{}: {}", b.line, b.error);
            }
        }
        if bad.len() > SHOWN {
            eprintln!(
                "probegen: {origin}: ... and {} more malformed row(s)",
                bad.len() - SHOWN
            );
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
    maintain::coverage::total_weight(&rows, &origin)?;
    let c = maintain::coverage::coverage(&m, &manifest.display().to_string(), &rows, bad);
    match format {
        ReportFormat::Markdown => {
            emit(&maintain::coverage::coverage_markdown(&c).map_err(|e| e.to_string())?)?
        }
        ReportFormat::Json => print_json(serde_json::to_value(&c))?,
    }
    Ok(ExitCode::SUCCESS)
}
