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
    let text = analyzer::limits::read_text(
        path,
        analyzer::limits::MAX_MANIFEST_BYTES,
        "a probegen manifest.yaml",
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
    let mut d = codegen::compare::drift(&old, &new, Some(&defined));
    codegen::compare::apply_successors(&mut d, &|r| successor(g, &old, &new, &s.rules, r));
    let rd = rules_drift(&src, &s, &old, &new);
    let drifted = !d.is_empty() || rd.breaking() > 0;
    match format {
        ReportFormat::Markdown => {
            let mut text = codegen::compare::check_markdown(&d, &against.display().to_string());
            text.push_str(&codegen::compare::rules_drift_markdown(&rd));
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

/// The rules drift of `check`: what the rules and the checked-in set name that the new tree
/// lacks, with the nearest names it has.
fn rules_drift(
    src: &SourceArgs,
    s: &commands::Selected,
    old: &Manifest,
    new: &Manifest,
) -> codegen::compare::RulesDrift {
    let g = &s.loaded.graph;
    let rules = &s.rules;
    let ops_members: Vec<String> = g
        .ops_struct()
        .map(|(_, ms)| ms.iter().map(|m| m.name.clone()).collect())
        .unwrap_or_default();
    // A function is known when the tree defines it or calls it (mlx5_cmd_exec lives in
    // mlx5_core, outside the analysed directories).
    let mut pool: BTreeSet<String> = BTreeSet::new();
    for n in g.nodes() {
        pool.insert(n.name.clone());
        pool.extend(n.external_calls.iter().cloned());
    }
    let mut functions = Vec::new();
    if let Some(v) = rules.vendor(&new.vendor) {
        for f in &v.hardware_commands {
            functions.push(("hardware-command".to_string(), f.clone()));
        }
        for f in &v.hardware_functions {
            functions.push(("hardware-function".to_string(), f.clone()));
        }
    }
    for o in rules
        .overrides
        .include
        .iter()
        .chain(&rules.overrides.exclude)
    {
        functions.push(("override".to_string(), o.function.clone()));
    }
    let names = codegen::compare::RulesNames {
        functions,
        focus_overrides: rules
            .focus_ops
            .include
            .iter()
            .chain(&rules.focus_ops.exclude)
            .map(|o| o.member.clone())
            .collect(),
        vendor_dirs: rules
            .vendor(&new.vendor)
            .map(|v| v.dirs.clone())
            .unwrap_or_default(),
    };
    let pool: Vec<String> = pool.into_iter().collect();
    codegen::compare::rules_drift(
        old,
        new,
        &ops_members,
        &names,
        &|f| pool.binary_search_by(|p| p.as_str().cmp(f)).is_ok(),
        &pool,
        &|d| src.kernel_src.join(d).is_dir(),
    )
}

/// The successor of a probe gone from the source: a new probe in the same file that its
/// former callers (the probes that called it in the checked-in set) now reach, doing the same
/// job: the innermost such probe that changes state (pins user pages, allocates) or commands
/// the hardware; else the innermost one. `ib_umem_get` -> `__ib_umem_get_va` on 7.x.
fn successor(
    g: &CallGraph,
    old: &Manifest,
    new: &Manifest,
    rules: &heuristics::Rules,
    r: &codegen::compare::ProbeSummary,
) -> Option<(String, String)> {
    let gone = old
        .probes
        .iter()
        .find(|p| p.function == r.function && p.module == r.module)?;
    let callers: Vec<&str> = old
        .probes
        .iter()
        .filter(|p| p.calls.contains(&gone.id))
        .map(|p| p.function.as_str())
        .collect();
    let in_new: BTreeSet<&str> = new.probes.iter().map(|p| p.function.as_str()).collect();
    // Breadth-first from the former callers: (depth, function) of candidates.
    let mut depth_of: std::collections::BTreeMap<analyzer::FnId, usize> = Default::default();
    let mut queue: std::collections::VecDeque<(analyzer::FnId, usize)> = callers
        .iter()
        .flat_map(|c| g.find(c).iter().map(|&id| (id, 0)))
        .collect();
    while let Some((f, d)) = queue.pop_front() {
        if d > 12 || depth_of.contains_key(&f) {
            continue;
        }
        depth_of.insert(f, d);
        for (c, _) in g.callees(f) {
            queue.push_back((c, d + 1));
        }
    }
    let hw: Vec<&String> = rules
        .vendor(&new.vendor)
        .map(|v| v.hardware_commands.iter().collect())
        .unwrap_or_default();
    let job = |id: analyzer::FnId| -> Option<String> {
        let n = g.node(id);
        n.external_calls
            .iter()
            .find(|c| rules.is_state_changing_call(c) || hw.contains(c))
            .map(|c| format!("calls `{c}`"))
    };
    let mut candidates: Vec<(bool, usize, analyzer::FnId)> = depth_of
        .iter()
        .filter(|(&id, _)| {
            let n = g.node(id);
            n.file == r.file && in_new.contains(n.name.as_str()) && n.name != r.function
        })
        .map(|(&id, &d)| (job(id).is_some(), d, id))
        .collect();
    // Doing the job first, then deepest, then by name.
    candidates.sort_by(|a, b| {
        b.0.cmp(&a.0)
            .then(b.1.cmp(&a.1))
            .then_with(|| g.node(a.2).name.cmp(&g.node(b.2).name))
    });
    let &(_, d, id) = candidates.first()?;
    let why = format!(
        "successor: former caller{} {} reach{} it in {} ({} call{} down){}",
        if callers.len() == 1 { "" } else { "s" },
        callers
            .iter()
            .map(|c| format!("`{c}`"))
            .collect::<Vec<_>>()
            .join(", "),
        if callers.len() == 1 { "es" } else { "" },
        r.file,
        d,
        if d == 1 { "" } else { "s" },
        job(id).map(|j| format!("; {j}")).unwrap_or_default()
    );
    Some((g.node(id).name.clone(), why))
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
    let text = analyzer::limits::read_text(
        failures,
        analyzer::limits::MAX_CSV_BYTES,
        "a failure log (CSV verb,errno,weight)",
    )?;
    let (rows, bad) = codegen::coverage::parse_failures(&text);
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
    codegen::coverage::total_weight(&rows, &origin)?;
    let c = codegen::coverage::coverage(&m, &manifest.display().to_string(), &rows, bad);
    match format {
        ReportFormat::Markdown => emit(&codegen::coverage::coverage_markdown(&c))?,
        ReportFormat::Json => print_json(serde_json::to_value(&c))?,
    }
    Ok(ExitCode::SUCCESS)
}
