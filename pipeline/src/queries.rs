//! The read-only questions about a tree: `graph` (counts), `path` (one call path) and
//! `explain` (one function's verdict). Each returns what to print; the CLI prints it.

use std::collections::BTreeMap;

use analyzer::CallGraph;

use crate::degraded::{enforce, missing_entry};
use crate::selection::select;
use crate::source::{entry_names, load};
use crate::{Error, Loaded, Notice, SourceOptions};

/// What `graph` reports: the tree, the graph's counts and the set reachable from the entries.
pub struct GraphSummary {
    pub loaded: Loaded,
    pub vendor: Option<String>,
    pub entries: Vec<String>,
    /// Parse warnings, `file:line: message`.
    pub warnings: usize,
    pub reachable: usize,
    pub per_module: BTreeMap<String, usize>,
}

/// `graph`: load `opts.vendor`'s tree (or the whole tree) and count what the entries reach.
/// `show_warnings`: every parse warning is also a [`Notice::ParseWarning`].
pub fn graph(
    opts: &SourceOptions,
    entries: &[String],
    show_warnings: bool,
    notify: &mut dyn FnMut(Notice),
) -> Result<GraphSummary, Error> {
    let rules = crate::load_rules(opts.rules.as_deref())?;
    let loaded = load(opts, &rules, notify)?;
    let Loaded { tree, graph } = &loaded;
    let names = entry_names(entries);
    let mut warnings = 0;
    for w in tree.all_warnings() {
        warnings += 1;
        if show_warnings {
            notify(Notice::ParseWarning(w.to_string()));
        }
    }
    enforce(opts, &tree.degraded, false, notify)?;
    let ids = graph
        .entries(&names)
        .map_err(|n| missing_entry(tree, &n.0, !entries.is_empty()))?;
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
    if let Some(stats) = tree.cache_stats() {
        notify(Notice::CacheStats(stats.to_string()));
    }
    let reachable = reach.len();
    Ok(GraphSummary {
        loaded,
        vendor: opts.vendor.clone(),
        entries: names,
        warnings,
        reachable,
        per_module,
    })
}

impl GraphSummary {
    pub fn json(&self) -> serde_json::Value {
        let s = self.loaded.graph.stats();
        serde_json::json!({
            "kernel": self.loaded.tree.version,
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

    /// The text report, one line per count.
    pub fn text(&self) -> String {
        let s = self.loaded.graph.stats();
        let tree = &self.loaded.tree;
        let mut out = format!(
            "kernel      {}\nvendor      {}\nfiles       {} ({} .c not built by the config)\nfunctions   {}\nedges       {}\n",
            tree.version.as_deref().unwrap_or("unknown"),
            self.vendor.as_deref().unwrap_or("(all)"),
            s.files,
            tree.skipped_unbuilt,
            s.functions,
            s.edges,
        );
        for (k, n) in &s.edges_by_kind {
            out.push_str(&format!("  {k:<14}{n}\n"));
        }
        out.push_str(&format!(
            "parse errors {} ({} warnings)\nops tables  {}  write commands {}  uapi methods {}\nreachable   {} from {}\n",
            s.parse_errors,
            self.warnings,
            s.ops_tables,
            s.write_commands,
            s.uapi_methods,
            self.reachable,
            self.entries.join(", ")
        ));
        for (m, n) in &self.per_module {
            out.push_str(&format!("  {m:<18}{n}\n"));
        }
        out
    }
}

/// `path`: the shortest call path from `from` to `to`, one line per hop; `None` when there is
/// none.
pub fn path(
    opts: &SourceOptions,
    from: &str,
    to: &str,
    notify: &mut dyn FnMut(Notice),
) -> Result<Option<Vec<String>>, Error> {
    let rules = crate::load_rules(opts.rules.as_deref())?;
    let Loaded { tree, graph } = load(opts, &rules, notify)?;
    enforce(opts, &tree.degraded, false, notify)?;
    let from_ids = graph
        .entries(&[from.to_string()])
        .map_err(|n| Error::UnknownFrom(n.0))?;
    let targets = graph.find(to);
    if targets.is_empty() {
        return Err(Error::UnknownTo(to.to_string()));
    }
    let reach = graph.reach(&from_ids);
    let best = targets
        .iter()
        .filter_map(|t| CallGraph::path_in(&reach, *t))
        .min_by_key(|p| p.len());
    let Some(p) = best else {
        return Ok(None);
    };
    let mut lines = Vec::with_capacity(p.len());
    for (id, edge) in p {
        let n = graph.node(id);
        let module = n.module.as_deref().unwrap_or("inline");
        lines.push(match edge {
            None => format!("{} ({module}) {}:{}", n.name, n.file, n.line),
            Some(e) => {
                let via = e
                    .via
                    .as_deref()
                    .map(|v| format!(" {v}"))
                    .unwrap_or_default();
                format!(
                    "  -> {} ({module}) [{}{via} at {}:{}]",
                    n.name,
                    e.kind.as_str(),
                    e.file,
                    e.line
                )
            }
        });
    }
    Ok(Some(lines))
}

/// What `explain` says about one function: a block of lines per definition.
pub struct Explanation {
    pub lines: Vec<String>,
    /// Whether some definition is reachable from the entries (the others are only named).
    pub found: bool,
}

/// `errors` lines of `explain`: one per error site, `EINVAL request file:line [via f] check`.
fn site_lines(sites: &[manifest::ErrorSite]) -> Vec<String> {
    if sites.is_empty() {
        return vec!["  errors    none the code shows".to_string()];
    }
    sites
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let head = if i == 0 {
                "  errors    "
            } else {
                "            "
            };
            let errno = s.errno.map_or("any".to_string(), |e| e.to_string());
            let via = if s.via.is_empty() {
                String::new()
            } else {
                format!(" via {}", s.via.join(" -> "))
            };
            let callee = match (&s.callee, s.callee_probe) {
                (Some(c), Some(p)) => format!(" from {c} (probe {p})"),
                (Some(c), None) => format!(" from {c}"),
                _ => String::new(),
            };
            let check = if s.check.is_empty() {
                String::new()
            } else {
                format!(": {}", s.check)
            };
            format!(
                "{head}{errno} {} {}:{}{via}{callee}{check}",
                s.class, s.file, s.line
            )
        })
        .collect()
}

/// `explain`: verdict, rule, evidence and call path of every definition of `function`.
pub fn explain(
    opts: &SourceOptions,
    function: &str,
    notify: &mut dyn FnMut(Notice),
) -> Result<Explanation, Error> {
    let s = select(opts, &[], notify)?;
    enforce(opts, &s.degraded, false, notify)?;
    let g = &s.loaded.graph;
    let ids = g.find(function);
    if ids.is_empty() {
        return Err(Error::UnknownFunction(function.to_string()));
    }
    let mut out = Explanation {
        lines: Vec::new(),
        found: false,
    };
    for &id in ids {
        let n = g.node(id);
        let module = n.module.as_deref().unwrap_or("inline");
        let data_plane = data_plane_lines(&s, id);
        let Some(v) = s.selection.verdict_of(id) else {
            if data_plane.is_empty() {
                out.lines.push(format!(
                    "{function} ({module}, {}:{}): not reachable from {}",
                    n.file,
                    n.line,
                    s.entries.join(", ")
                ));
            } else {
                out.found = true;
                out.lines
                    .push(format!("{function} ({module}, {}:{})", n.file, n.line));
                out.lines.extend(data_plane);
            }
            continue;
        };
        out.found = true;
        let verdict = if v.keep { "KEEP" } else { "DROP" };
        out.lines
            .push(format!("{function} ({module}, {}:{})", n.file, n.line));
        out.lines.push(format!("  verdict   {verdict}"));
        out.lines.push(format!("  rule      {}", v.rule.as_str()));
        if let Some(f) = v.focus {
            out.lines.push(format!("  focus     {f:?}"));
        }
        out.lines.push(format!("  object    {}", v.object.as_str()));
        out.lines.push(format!("  evidence  {}", v.evidence));
        if let Some(b) = &s.binaries {
            out.lines.push(format!(
                "  attach    {}",
                b.verdict(n.module.as_deref(), &n.name).as_str()
            ));
        }
        let path: Vec<&str> = v.path.iter().map(|&p| g.node(p).name.as_str()).collect();
        out.lines.push(format!("  path      {}", path.join(" -> ")));
        let sites = codegen::error_sites_of(g, &s.selection, s.binaries.as_deref(), id);
        out.lines.extend(site_lines(&sites));
        out.lines.extend(data_plane);
    }
    Ok(out)
}

/// `explain`'s lines for a data-plane function: its class, what the filter passes and the
/// evidence that chose it.
fn data_plane_lines(s: &crate::Selected, id: analyzer::FnId) -> Vec<String> {
    let Some(p) = s.selection.data_plane.iter().find(|p| p.id == id) else {
        return Vec::new();
    };
    let mut out = vec![format!("  data plane  {} (kind: data_plane)", p.class)];
    match p.arg {
        Some(a) if !p.errors.is_empty() => out.push(format!(
            "  filter      argument {a}: {}",
            p.errors.join(", ")
        )),
        _ => out.push("  filter      every call".to_string()),
    }
    for e in &p.evidence {
        out.push(format!(
            "  {:<11} {}:{}: {}",
            e.via.as_str(),
            e.file,
            e.line,
            e.detail
        ));
    }
    out
}
