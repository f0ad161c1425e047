//! Subcommand bodies: load, call the pipeline crates, print.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use analyzer::facts_cache::CacheLocation;
use analyzer::graph::DEFAULT_ENTRIES;
use analyzer::source::{LoadOptions, SourceTree};
use analyzer::{CallGraph, VendorScope};

use crate::{Format, SourceArgs};

pub type CmdResult = Result<ExitCode, String>;

pub struct Loaded {
    /// Shared by the vendors of one `generate --vendor a,b` run (one parse).
    pub tree: std::sync::Arc<SourceTree>,
    pub graph: CallGraph,
}

/// The rules of a run: `--rules FILE` or the built-in ones, parsed once and passed to every
/// step (vendor directories, selection).
pub fn rules_of(src: &SourceArgs) -> Result<heuristics::Rules, String> {
    load_rules(src.rules.as_deref())
}

pub fn vendor_scope(
    rules: &heuristics::Rules,
    vendor: Option<&str>,
) -> Result<VendorScope, String> {
    let Some(v) = vendor_dirs(rules, vendor)? else {
        return Ok(VendorScope::default());
    };
    Ok(rules.scope_of(&v))
}

/// The source directories of `--vendor`, from the rules of this run.
pub fn vendor_dirs(
    rules: &heuristics::Rules,
    vendor: Option<&str>,
) -> Result<Option<Vec<String>>, String> {
    let Some(v) = vendor else {
        return Ok(None);
    };
    let vendor = rules.vendor(v).ok_or_else(|| {
        format!(
            "unknown --vendor `{v}`: known vendors are {}",
            rules.vendor_names().join(", ")
        )
    })?;
    Ok(Some(vendor.dirs.clone()))
}

/// Where the per-file facts cache lives: `$PROBEGEN_CACHE/facts` (the kernel cache's root),
/// else `$XDG_CACHE_HOME/probegen/facts`, else `~/.cache/probegen/facts`; none with `--no-cache`
/// or without a home directory.
pub fn facts_cache(src: &SourceArgs) -> Result<Option<CacheLocation>, String> {
    if src.no_cache {
        return Ok(None);
    }
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let root = env("PROBEGEN_CACHE")
        .or_else(|| env("XDG_CACHE_HOME").map(|d| d.join("probegen")))
        .or_else(|| env("HOME").map(|d| d.join(".cache").join("probegen")));
    let max_bytes = match std::env::var("PROBEGEN_FACTS_CACHE_MB") {
        Ok(v) => match v.trim().parse::<u64>() {
            Ok(mb) if mb > 0 => mb.saturating_mul(1024 * 1024),
            _ => {
                return Err(format!(
                    "PROBEGEN_FACTS_CACHE_MB=`{v}`: expected a positive number of megabytes"
                ))
            }
        },
        Err(_) => analyzer::facts_cache::DEFAULT_MAX_BYTES,
    };
    Ok(root.map(|r| CacheLocation {
        dir: r.join("facts"),
        max_bytes,
    }))
}

pub fn load(src: &SourceArgs, rules: &heuristics::Rules) -> Result<Loaded, String> {
    let t0 = std::time::Instant::now();
    let scope = vendor_scope(rules, src.vendor.as_deref())?;
    let tree = SourceTree::load(
        &src.kernel_src,
        &LoadOptions {
            kconfig: src.kconfig.clone(),
            unbuilt_dirs: vendor_dirs(rules, src.vendor.as_deref())?.unwrap_or_default(),
            facts_cache: facts_cache(src)?,
            ..LoadOptions::new(rules.source_layout())
        },
    )
    .map_err(|e| e.to_string())?;
    let t1 = t0.elapsed();
    let graph = CallGraph::build(&tree, &scope);
    let tree = std::sync::Arc::new(tree);
    if std::env::var_os("PROBEGEN_TIMINGS").is_some() {
        eprintln!(
            "timings: load {:?} (tree-sitter parse {:?} summed over threads), graph {:?}",
            t1,
            std::time::Duration::from_nanos(
                analyzer::cparse::PARSE_NS.load(std::sync::atomic::Ordering::Relaxed)
            ),
            t0.elapsed() - t1
        );
    }
    Ok(Loaded { tree, graph })
}

fn entry_names(entries: &[String]) -> Vec<String> {
    if entries.is_empty() {
        DEFAULT_ENTRIES.iter().map(|s| s.to_string()).collect()
    } else {
        entries.to_vec()
    }
}

pub fn graph(
    src: &SourceArgs,
    entries: &[String],
    format: Format,
    show_warnings: bool,
) -> CmdResult {
    let Loaded { tree, graph } = load(src, &rules_of(src)?)?;
    let names = entry_names(entries);
    let warnings: Vec<String> = tree.all_warnings().map(|w| w.to_string()).collect();
    if show_warnings {
        for w in &warnings {
            eprintln!("warning: {w}");
        }
    }
    crate::degraded::enforce(src, &tree.degraded, false)?;
    let ids = graph
        .entries(&names)
        .map_err(|n| crate::degraded::missing_entry(&tree, &n, !entries.is_empty()))?;
    let reach = graph.reach(&ids);
    let mut per_module: BTreeMap<String, usize> = BTreeMap::new();
    for id in reach.keys() {
        let m = graph
            .node(*id)
            .module
            .clone()
            .unwrap_or_else(|| "(header inline)".into());
        *per_module.entry(m).or_default() += 1;
    }
    let summary = GraphSummary {
        tree: &tree,
        stats: graph.stats(),
        vendor: src.vendor.as_deref(),
        entries: &names,
        warnings: warnings.len(),
        reachable: reach.len(),
        per_module: &per_module,
    };
    match format {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&summary.json()).map_err(|e| e.to_string())?
        ),
        Format::Text => summary.print_text(),
    }
    if let Some(stats) = &tree.cache_stats {
        eprintln!("facts cache: {stats}");
    }
    Ok(ExitCode::SUCCESS)
}

/// What `graph` prints: the tree, the graph's counts and the reachable set.
struct GraphSummary<'a> {
    tree: &'a SourceTree,
    stats: &'a analyzer::graph::GraphStats,
    vendor: Option<&'a str>,
    entries: &'a [String],
    warnings: usize,
    reachable: usize,
    per_module: &'a BTreeMap<String, usize>,
}

impl GraphSummary<'_> {
    fn json(&self) -> serde_json::Value {
        let s = self.stats;
        serde_json::json!({
            "kernel": self.tree.version,
            "vendor": self.vendor,
            "entries": self.entries,
            "files": s.files,
            "functions": s.functions,
            "edges": s.edges,
            "edges_by_kind": s.edges_by_kind,
            "parse_errors": s.parse_errors,
            "warnings": self.warnings,
            "ops_tables": s.ops_tables,
            "write_commands": s.write_commands,
            "uapi_methods": s.uapi_methods,
            "unresolved_indirect_calls": s.unresolved_indirect_calls,
            "reachable": self.reachable,
            "reachable_by_module": self.per_module,
        })
    }

    fn print_text(&self) {
        let s = self.stats;
        println!(
            "kernel      {}",
            self.tree.version.as_deref().unwrap_or("unknown")
        );
        println!("vendor      {}", self.vendor.unwrap_or("(all)"));
        println!(
            "files       {} ({} .c not built by the config)",
            s.files, self.tree.skipped_unbuilt
        );
        println!("functions   {}", s.functions);
        println!("edges       {}", s.edges);
        for (k, n) in &s.edges_by_kind {
            println!("  {k:<14}{n}");
        }
        println!(
            "parse errors {} ({} warnings)",
            s.parse_errors, self.warnings
        );
        println!(
            "ops tables  {}  write commands {}  uapi methods {}",
            s.ops_tables, s.write_commands, s.uapi_methods
        );
        println!(
            "reachable   {} from {}",
            self.reachable,
            self.entries.join(", ")
        );
        for (m, n) in self.per_module {
            println!("  {m:<18}{n}");
        }
    }
}

pub fn path(src: &SourceArgs, from: &str, to: &str) -> CmdResult {
    let Loaded { tree, graph } = load(src, &rules_of(src)?)?;
    crate::degraded::enforce(src, &tree.degraded, false)?;
    let from_ids = graph.entries(&[from.to_string()]).map_err(|n| {
        format!("unknown --from `{n}`: no function of that name in the built sources")
    })?;
    let targets = graph.find(to);
    if targets.is_empty() {
        return Err(format!("unknown --to `{to}`: no function of that name in the built sources (or outside the vendor scope)"));
    }
    let reach = graph.reach(&from_ids);
    let best = targets
        .iter()
        .filter_map(|t| CallGraph::path_in(&reach, *t))
        .min_by_key(|p| p.len());
    let Some(p) = best else {
        println!("no path from {from} to {to}");
        return Ok(ExitCode::from(1));
    };
    for (id, edge) in p {
        let n = graph.node(id);
        let module = n.module.as_deref().unwrap_or("inline");
        match edge {
            None => println!("{} ({module}) {}:{}", n.name, n.file, n.line),
            Some(e) => {
                let via = e
                    .via
                    .as_deref()
                    .map(|v| format!(" {v}"))
                    .unwrap_or_default();
                println!(
                    "  -> {} ({module}) [{}{via} at {}:{}]",
                    n.name,
                    e.kind.as_str(),
                    e.file,
                    e.line
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn load_rules(path: Option<&std::path::Path>) -> Result<heuristics::Rules, String> {
    match path {
        None => heuristics::Rules::builtin().map_err(|e| e.to_string()),
        Some(p) => {
            let text = analyzer::limits::read_text(
                p,
                analyzer::limits::MAX_RULES_BYTES,
                "a probegen rules file",
            )?;
            analyzer::limits::check_yaml_nesting(&text, &p.display().to_string())?;
            heuristics::Rules::parse(&text, &p.display().to_string()).map_err(|e| e.to_string())
        }
    }
}

/// Everything `generate` and `explain` need: graph, selection, binaries.
pub struct Selected {
    pub loaded: Loaded,
    /// The rules of this run (parsed once).
    pub rules: heuristics::Rules,
    pub selection: heuristics::Selection,
    pub binaries: Option<std::sync::Arc<analyzer::traceability::Binaries>>,
    pub entries: Vec<String>,
    /// What the analysis could not read or evaluate (sources, config, binaries).
    pub degraded: Vec<analyzer::completeness::Degradation>,
}

pub fn select(src: &SourceArgs) -> Result<Selected, String> {
    select_from(src, &[])
}

/// The binaries that give attach verdicts: `--btf DIR`, else the kernel tree's own
/// `vmlinux` and `modules/` (fetch-kernel.sh). `None` for a source-only tree.
pub fn binaries_of(src: &SourceArgs) -> Result<Option<analyzer::traceability::Binaries>, String> {
    match &src.btf {
        Some(dir) => {
            let b = analyzer::traceability::Binaries::load_dir(dir, &src.kernel_src)
                .map_err(|e| e.to_string())?;
            Ok(Some(b))
        }
        None => analyzer::traceability::Binaries::load(&src.kernel_src).map_err(|e| e.to_string()),
    }
}

/// [`select`] from explicit entry functions (none: the uverbs entries).
pub fn select_from(src: &SourceArgs, entries: &[String]) -> Result<Selected, String> {
    select_with_rules(src, rules_of(src)?, entries)
}

/// [`select_from`] with the rules of this run already parsed.
fn select_with_rules(
    src: &SourceArgs,
    rules: heuristics::Rules,
    entries: &[String],
) -> Result<Selected, String> {
    let Some(vendor) = src.vendor.clone() else {
        return Err("--vendor is required (mlx5, bnxt_re, irdma, rxe, ...)".into());
    };
    if rules.vendor(&vendor).is_none() {
        return Err(format!(
            "unknown --vendor `{vendor}`: known vendors are {}",
            rules.vendor_names().join(", ")
        ));
    }
    let loaded = load(src, &rules)?;
    let binaries = binaries_of(src)?.map(std::sync::Arc::new);
    select_loaded(src, rules, loaded, binaries, &vendor, entries)
}

/// The selection of `vendor` on a tree already loaded (and binaries already read).
fn select_loaded(
    src: &SourceArgs,
    rules: heuristics::Rules,
    loaded: Loaded,
    binaries: Option<std::sync::Arc<analyzer::traceability::Binaries>>,
    vendor: &str,
    entries: &[String],
) -> Result<Selected, String> {
    let named_by_user = !entries.is_empty();
    let entries = entry_names(entries);
    let ids = loaded
        .graph
        .entries(&entries)
        .map_err(|n| crate::degraded::missing_entry(&loaded.tree, &n, named_by_user))?;
    // A degraded tree (a truncated .config) fails on that first, unless allowed: it is the
    // cause, an unbuilt vendor only its consequence.
    if let Some(v) = rules
        .vendor(vendor)
        .filter(|_| loaded.tree.degraded.is_empty() || src.allow_degraded)
    {
        crate::degraded::vendor_present(src, vendor, v, &loaded.tree)?;
    }
    let g = &loaded.graph;
    // Functions the binary inlined are wrappers for the selection's depth limits.
    let inlined = |id: analyzer::FnId| {
        let n = g.node(id);
        binaries.as_ref().is_some_and(|b| {
            n.module.is_some()
                && b.verdict(n.module.as_deref(), &n.name)
                    == analyzer::traceability::AttachVerdict::Inlined
        })
    };
    let selection =
        heuristics::select_with(g, &rules, vendor, &ids, &inlined).map_err(|e| e.to_string())?;
    let mut degraded = loaded.tree.degraded.clone();
    degraded.extend(analyzer::completeness::module_gaps(
        &src.kernel_src,
        &loaded.tree.build,
        binaries.as_deref(),
        selection
            .verdicts
            .iter()
            .filter(|v| v.keep)
            .map(|v| g.node(v.id).file.as_str()),
    ));
    Ok(Selected {
        loaded,
        rules,
        selection,
        binaries,
        entries,
        degraded,
    })
}

pub fn manifest_of(src: &SourceArgs, s: &Selected) -> manifest::Manifest {
    let mut m = manifest_without_gaps(src, s);
    m.degraded = s.degraded.iter().map(codegen::build::degraded).collect();
    m
}

fn manifest_without_gaps(src: &SourceArgs, s: &Selected) -> manifest::Manifest {
    let config = match &src.kconfig {
        Some(p) => p.display().to_string(),
        None => ".config".to_string(),
    };
    codegen::build_manifest(
        &s.loaded.graph,
        &s.selection,
        s.binaries.as_deref(),
        manifest::KernelInfo {
            version: s
                .loaded
                .tree
                .version
                .clone()
                .unwrap_or_else(|| "unknown".into()),
            config,
        },
        &s.entries,
    )
}

/// `--vendor a,b,c` or `--vendor all` (every vendor of the rules whose driver the config
/// builds): the vendors, or `None` for one plain vendor.
fn vendor_list(src: &SourceArgs, rules: &heuristics::Rules) -> Result<Option<Vec<String>>, String> {
    let Some(v) = src.vendor.as_deref() else {
        return Ok(None);
    };
    if v != "all" && !v.contains(',') {
        return Ok(None);
    }
    let names: Vec<String> = if v == "all" {
        rules.vendor_names()
    } else {
        v.split(',').map(|s| s.trim().to_string()).collect()
    };
    for n in &names {
        if n.is_empty() || rules.vendor(n).is_none() {
            return Err(format!(
                "unknown vendor `{n}` in --vendor {v}: known vendors are {}",
                rules.vendor_names().join(", ")
            ));
        }
    }
    Ok(Some(names))
}

/// `header_dir`: where the shared `probegen.bpf.h` goes, once; `None` puts it into each set.
pub fn generate(
    src: &SourceArgs,
    out: &std::path::Path,
    entries: &[String],
    header_dir: Option<&std::path::Path>,
) -> CmdResult {
    let rules = rules_of(src)?;
    if let Some(vendors) = vendor_list(src, &rules)? {
        generate_many(src, rules, &vendors, out, entries, header_dir)?;
    } else {
        let s = select_with_rules(src, rules, entries)?;
        let line = write_set(src, &s, out, header_dir.is_none())?;
        println!("{line}");
    }
    if let Some(dir) = header_dir {
        let header = codegen::bpf::render_header().map_err(|e| e.to_string())?;
        let path = dir.join(codegen::bpf::HEADER_NAME);
        codegen::output::write_atomic(&path, header.as_bytes())
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Several vendors from one parse of the tree and one read of the binaries: one directory
/// per vendor under `out`, each byte-identical to a single-vendor run. `all` keeps the
/// vendors whose driver the config builds.
fn generate_many(
    src: &SourceArgs,
    rules: heuristics::Rules,
    vendors: &[String],
    out: &std::path::Path,
    entries: &[String],
    header_dir: Option<&std::path::Path>,
) -> Result<(), String> {
    let all = src.vendor.as_deref() == Some("all");
    let dirs: Vec<String> = vendors
        .iter()
        .filter_map(|v| rules.vendor(v))
        .flat_map(|v| v.dirs.iter().cloned())
        .collect();
    let t0 = std::time::Instant::now();
    let tree = SourceTree::load(
        &src.kernel_src,
        &LoadOptions {
            kconfig: src.kconfig.clone(),
            // `all` asks for what the config builds; a list names vendors to report even
            // when not built (bnxt_re on 6.1: its probes are `not-built`).
            unbuilt_dirs: if all { Vec::new() } else { dirs },
            facts_cache: facts_cache(src)?,
            ..LoadOptions::new(rules.source_layout())
        },
    )
    .map_err(|e| e.to_string())?;
    let tree = std::sync::Arc::new(tree);
    let binaries = binaries_of(src)?.map(std::sync::Arc::new);
    if std::env::var_os("PROBEGEN_TIMINGS").is_some() {
        eprintln!(
            "timings: load {:?} (once for {} vendors)",
            t0.elapsed(),
            vendors.len()
        );
    }
    let mut written = 0;
    for v in vendors {
        let vd = rules.vendor(v).map(|x| x.dirs.clone()).unwrap_or_default();
        let built = tree.files.iter().any(|f| {
            vd.iter().any(|d| f.path.starts_with(d.as_str()))
                && tree.build.module_of(&f.path).is_some()
        });
        if all && !built {
            eprintln!("probegen: {v}: not built by this config, skipped (--vendor all)");
            continue;
        }
        let src_v = SourceArgs {
            vendor: Some(v.clone()),
            ..src.clone()
        };
        let loaded = Loaded {
            tree: tree.clone(),
            graph: CallGraph::build(&tree, &rules.scope_of(&vd)),
        };
        let s = select_loaded(&src_v, rules.clone(), loaded, binaries.clone(), v, entries)?;
        let line = write_set(&src_v, &s, &out.join(v), header_dir.is_none())?;
        println!("{line}");
        written += 1;
    }
    if written == 0 {
        return Err(format!(
            "--vendor {}: no vendor's driver is built by this config",
            src.vendor.as_deref().unwrap_or("")
        ));
    }
    Ok(())
}

/// Validate one selection against the binaries, render its set (with the shared header when
/// `with_header`) and write it to `out`; returns the summary line.
fn write_set(
    src: &SourceArgs,
    s: &Selected,
    out: &std::path::Path,
    with_header: bool,
) -> Result<String, String> {
    crate::degraded::enforce(src, &s.degraded, true)?;
    if s.binaries.is_none() {
        eprintln!(
            "probegen: warning: no vmlinux/modules in {}: attach verdicts are unchecked (run scripts/fetch-kernel.sh)",
            src.kernel_src.display()
        );
    }
    let manifest = manifest_of(src, s);
    let g = &s.loaded.graph;
    if let Some(b) = &s.binaries {
        let mismatches = codegen::build::validate(&manifest, g, &s.selection, b);
        if !mismatches.is_empty() {
            let list: Vec<String> = mismatches.iter().map(|m| format!("  {m}")).collect();
            return Err(format!(
                "{} probe target(s) disagree with the binaries in {}:\n{}",
                mismatches.len(),
                src.kernel_src.display(),
                list.join("\n")
            ));
        }
    }
    let attachable = |id: analyzer::FnId| {
        let n = g.node(id);
        s.binaries
            .as_ref()
            .is_some_and(|b| b.verdict(n.module.as_deref(), &n.name).is_attachable())
    };
    let cx = codegen::report::RenderContext {
        graph: g,
        selection: &s.selection,
        attachable: &attachable,
        refresh: refresh_command(src),
    };
    let mut files = codegen::render_all(&manifest, &cx).map_err(|e| e.to_string())?;
    if with_header {
        let header = codegen::bpf::render_header().map_err(|e| e.to_string())?;
        files.push((codegen::bpf::HEADER_NAME.to_string(), header));
    }
    codegen::output::write_set_atomic(out, &files)?;
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

pub fn explain(src: &SourceArgs, function: &str) -> CmdResult {
    let s = select(src)?;
    crate::degraded::enforce(src, &s.degraded, false)?;
    let g = &s.loaded.graph;
    let ids = g.find(function);
    if ids.is_empty() {
        return Err(format!("unknown function `{function}`: not defined in the built sources (or outside the vendor scope)"));
    }
    let mut found = false;
    for &id in ids {
        let n = g.node(id);
        let module = n.module.as_deref().unwrap_or("inline");
        let Some(v) = s.selection.verdict_of(id) else {
            println!(
                "{function} ({module}, {}:{}): not reachable from {}",
                n.file,
                n.line,
                s.entries.join(", ")
            );
            continue;
        };
        found = true;
        let verdict = if v.keep { "KEEP" } else { "DROP" };
        println!("{function} ({module}, {}:{})", n.file, n.line);
        println!("  verdict   {verdict}");
        println!("  rule      {}", v.rule.as_str());
        if let Some(f) = v.focus {
            println!("  focus     {f:?}");
        }
        println!("  object    {}", v.object.as_str());
        println!("  evidence  {}", v.evidence);
        if let Some(b) = &s.binaries {
            println!(
                "  attach    {}",
                b.verdict(n.module.as_deref(), &n.name).as_str()
            );
        }
        println!(
            "  path      {}",
            v.path
                .iter()
                .map(|&p| g.node(p).name.as_str())
                .collect::<Vec<_>>()
                .join(" -> ")
        );
    }
    Ok(if found {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The command that regenerates a probe set, printed in the generated files' headers. It does
/// not name the output directory, so the files are the same wherever they are written.
fn refresh_command(src: &SourceArgs) -> String {
    let dir = src
        .kernel_src
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!(
        "scripts/regenerate.sh  (this set alone: probegen generate --kernel-src <{dir}> --vendor {} --out DIR)",
        src.vendor.as_deref().unwrap_or("?"),
    )
}
