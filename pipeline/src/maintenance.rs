//! The maintenance workflows: `check` (a kernel upgrade), `port` (another vendor), `diff`
//! (coverage diff for a review) and `coverage` (against a failure log). The inputs are read
//! and selected here, through the same selection as `generate`; the `maintain` crate does the
//! pure comparison.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use analyzer::CallGraph;
use analyzer::SourceTree;
use manifest::Manifest;

use crate::degraded::{degraded_markdown, enforce};
use crate::selection::{manifest_of, select, select_vendors, EachSelection, Selected};
use crate::source::resolve_vendor;
use crate::{Error, Notice, SourceOptions};

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
pub fn read_manifest(path: &Path) -> Result<Manifest, Error> {
    let origin = path.display().to_string();
    let text = manifest::read_text(path, manifest::MAX_MANIFEST_BYTES, manifest::MANIFEST_WHAT)
        .map_err(|e| Error::Input(e.to_string()))?;
    Manifest::from_yaml(&text, &origin).map_err(|e| {
        let e = one_line(&e.to_string());
        Error::Input(if e.contains("expected") {
            e
        } else {
            format!("{e} (expected a probegen manifest.yaml)")
        })
    })
}

/// What `check` found: the set's drift, the rules' drift and what the input lost.
pub struct CheckReport {
    /// The checked manifest, as named on the command line.
    pub against: String,
    pub drift: maintain::Drift,
    pub rules_drift: maintain::RulesDrift,
    pub degraded: Vec<manifest::Degraded>,
    /// The regenerated set as pictures with the drift drawn on them (`check --html`).
    pub html: String,
}

/// What a change picture draws, from a drift between two sets: added, removed (at its place
/// in `old`, with its fate), renamed (removed -> successor) and moved probes.
fn change_marks(old: &Manifest, d: &maintain::Drift) -> codegen::ChangeMarks {
    let old_path = |module: &str, function: &str| {
        old.probes
            .iter()
            .find(|p| p.module == module && p.function == function)
            .map(|p| p.path.clone())
            .unwrap_or_default()
    };
    let mut removed: Vec<codegen::RemovedProbe> = d
        .removed
        .iter()
        .map(|r| codegen::RemovedProbe {
            function: r.probe.function.clone(),
            module: r.probe.module.clone(),
            fate: r.fate.text(),
            path: old_path(&r.probe.module, &r.probe.function),
        })
        .collect();
    // a renamed probe is removed under its old name, and its successor is drawn to it
    removed.extend(d.renamed.iter().map(|r| codegen::RemovedProbe {
        function: r.from.function.clone(),
        module: r.from.module.clone(),
        fate: format!("renamed to {} ({})", r.to.function, r.why),
        path: old_path(&r.from.module, &r.from.function),
    }));
    codegen::ChangeMarks {
        added: d.added.iter().map(|p| p.function.clone()).collect(),
        removed,
        renamed: d
            .renamed
            .iter()
            .map(|r| (r.from.function.clone(), r.to.function.clone()))
            .collect(),
        moved: d
            .changed
            .iter()
            .filter(|c| c.what == maintain::ChangeKind::Module)
            .map(|c| (c.function.clone(), c.old.clone(), c.new.clone()))
            .collect(),
    }
}

impl CheckReport {
    /// Exit 1: the set or the rules drifted.
    pub fn drifted(&self) -> bool {
        !self.drift.is_empty() || self.rules_drift.breaking() > 0
    }

    pub fn markdown(&self) -> Result<String, Error> {
        let mut text = maintain::check_markdown(&self.drift, &self.against)?;
        text.push_str(&maintain::rules_drift_markdown(&self.rules_drift)?);
        text.push_str(&degraded_markdown(&self.degraded));
        Ok(text)
    }

    pub fn json(&self) -> Result<serde_json::Value, Error> {
        let mut v = serde_json::to_value(&self.drift)?;
        if let Some(o) = v.as_object_mut() {
            o.insert("against".into(), self.against.clone().into());
            o.insert("drift".into(), self.drifted().into());
            o.insert(
                "rules_drift".into(),
                serde_json::to_value(&self.rules_drift)?,
            );
            if !self.degraded.is_empty() {
                o.insert("degraded".into(), serde_json::to_value(&self.degraded)?);
            }
        }
        Ok(v)
    }
}

/// `check`: regenerate `against`'s vendor in memory (the selection of `generate`) and compare.
pub fn check(
    opts: &SourceOptions,
    against: &Path,
    notify: &mut dyn FnMut(Notice),
) -> Result<CheckReport, Error> {
    let old = read_manifest(against)?;
    let mut opts = opts.clone();
    match &opts.vendor {
        Some(v) if *v != old.vendor => {
            return Err(Error::VendorMismatch {
                given: v.clone(),
                against: against.display().to_string(),
                set: old.vendor.clone(),
            })
        }
        Some(_) => {}
        None => opts.vendor = Some(old.vendor.clone()),
    }
    let s = select(&opts, &[], notify)?;
    enforce(&opts, &s.degraded, true, notify)?;
    let new = manifest_of(&opts, &s);
    let g = &s.loaded.graph;
    let defined = |f: &str| !g.find(f).is_empty();
    let mut drift = maintain::drift(&old, &new, Some(&defined));
    maintain::apply_successors(&mut drift, &|r| {
        maintain::successor(g, &old, &new, &s.rules, r)
    });
    let rules_drift = maintain::rules_drift(g, &s.rules, &old, &new, &|d| {
        opts.kernel_src.join(d).is_dir()
    });
    let html = codegen::render_change_html(
        &new,
        &change_marks(&old, &drift),
        Some(g),
        &format!("probegen check --against {}", against.display()),
    );
    Ok(CheckReport {
        against: against.display().to_string(),
        drift,
        rules_drift,
        degraded: new.degraded,
        html,
    })
}

/// What `port` is given.
#[derive(Clone, Debug, Default)]
pub struct PortOptions {
    pub kernel_src: PathBuf,
    pub kconfig: Option<PathBuf>,
    /// Source vendor.
    pub from: String,
    /// Target vendor.
    pub to: String,
    pub rules: Option<PathBuf>,
}

/// The two probe sets `port` maps, each selected exactly as `generate --vendor from,to
/// --not-built` selects it (one parse, the facts cache, inlined wrappers; a degraded input is
/// a warning), and the tree they were selected on.
fn port_selection(
    a: &PortOptions,
    rules: &heuristics::Rules,
    notify: &mut dyn FnMut(Notice),
) -> Result<(Manifest, Manifest, Arc<SourceTree>), Error> {
    resolve_vendor(rules, "--from", &a.from, None)?;
    resolve_vendor(rules, "--to", &a.to, None)?;
    if a.from == a.to {
        return Err(Error::SameVendor(a.from.clone()));
    }
    let opts = SourceOptions {
        kernel_src: a.kernel_src.clone(),
        kconfig: a.kconfig.clone(),
        vendor: Some(format!("{},{}", a.from, a.to)),
        allow_degraded: true,
        not_built: true,
        rules: a.rules.clone(),
        btf: None,
        no_cache: false,
    };
    let mut sets: Vec<(Manifest, Arc<SourceTree>)> = Vec::with_capacity(2);
    let finish = |s: Selected, notices: &mut Vec<Notice>| {
        enforce(&opts, &s.degraded, false, &mut |n| notices.push(n))?;
        let one = SourceOptions {
            vendor: Some(s.vendor.clone()),
            ..opts.clone()
        };
        Ok((manifest_of(&one, &s), s.loaded.tree.clone()))
    };
    let mut keep = |set, _: &mut dyn FnMut(Notice)| {
        sets.push(set);
        Ok(())
    };
    let each = EachSelection {
        finish: &finish,
        take: &mut keep,
    };
    let vendors = [a.from.clone(), a.to.clone()];
    select_vendors(&opts, rules, &vendors, false, &[], notify, each)?;
    let mut sets = sets.into_iter();
    match (sets.next(), sets.next()) {
        (Some((from, tree)), Some((to, _))) => Ok((from, to, tree)),
        // Not input-dependent: select_vendors selects every vendor of a list or fails (only
        // `all` skips vendors).
        _ => unreachable!("two vendors listed, two selections"),
    }
}

/// The manifests of `port`'s two sets, as `port` selects them (the same as `generate`'s).
pub fn port_sets(
    a: &PortOptions,
    notify: &mut dyn FnMut(Notice),
) -> Result<(Manifest, Manifest), Error> {
    let rules = crate::load_rules(a.rules.as_deref())?;
    let (from, to, _) = port_selection(a, &rules, notify)?;
    Ok((from, to))
}

/// `port`: both vendors' sets (see [`port_sets`]) mapped through `ib_device_ops`, on a graph
/// of the same tree with both vendors in scope.
pub fn port(a: &PortOptions, notify: &mut dyn FnMut(Notice)) -> Result<maintain::Port, Error> {
    let rules = crate::load_rules(a.rules.as_deref())?;
    let (from_set, to_set, tree) = port_selection(a, &rules, notify)?;
    let from = resolve_vendor(&rules, "--from", &a.from, None)?;
    let to = resolve_vendor(&rules, "--to", &a.to, None)?;
    let dirs: Vec<String> = from
        .dirs
        .iter()
        .chain(&to.dirs)
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let g = CallGraph::build(&tree, &rules.scope_of(&dirs));
    let (fs, ts) = (maintain::set_of(&from_set), maintain::set_of(&to_set));
    Ok(maintain::port(
        &g,
        maintain::Side {
            name: &a.from,
            vendor: from,
            set: &fs,
        },
        maintain::Side {
            name: &a.to,
            vendor: to,
            set: &ts,
        },
    )
    .with_data_plane(&from_set, &to_set))
}

/// Writes a page (`--html FILE`) atomically: a failure leaves the earlier file whole.
pub fn write_page(path: &Path, page: &str) -> Result<(), Error> {
    codegen::write_atomic(path, page.as_bytes())
        .map_err(|e| Error::Input(format!("--html {}: {e}", path.display())))
}

/// `diff OLD NEW`: the coverage diff of two manifests, and the new set's pictures with the
/// drift drawn on them (`diff --html`; manifests only, so every edge is drawn as a call).
pub fn diff(old: &Path, new: &Path) -> Result<(maintain::CoverageDiff, String), Error> {
    let (o, n) = (read_manifest(old)?, read_manifest(new)?);
    let drift = maintain::drift(&o, &n, None);
    let html = codegen::render_change_html(
        &n,
        &change_marks(&o, &drift),
        None,
        &format!("probegen diff {} {}", old.display(), new.display()),
    );
    Ok((maintain::coverage_diff(&o, &n), html))
}

/// How many malformed rows of a failure log are named one by one; millions of lines would
/// bury the problem.
const MALFORMED_SHOWN: usize = 20;

/// `coverage --manifest M --failures CSV`: the covered share of a failure log. Malformed rows
/// are notices (warnings when `lenient`, which skips them; otherwise an error follows).
pub fn coverage(
    manifest: &Path,
    failures: &Path,
    lenient: bool,
    notify: &mut dyn FnMut(Notice),
) -> Result<maintain::CoverageReport, Error> {
    let m = read_manifest(manifest)?;
    let origin = failures.display().to_string();
    let text = manifest::read_text(
        failures,
        manifest::MAX_CSV_BYTES,
        "a failure log (CSV verb,errno,weight)",
    )
    .map_err(|e| Error::Input(e.to_string()))?;
    let (rows, bad) = maintain::parse_failures(&text);
    if !bad.is_empty() {
        for b in bad.iter().take(MALFORMED_SHOWN) {
            notify(if lenient {
                Notice::Warning(format!("{origin}:{}: {} (skipped)", b.line, b.error))
            } else {
                Notice::Line(format!("{origin}:{}: {}", b.line, b.error))
            });
        }
        if bad.len() > MALFORMED_SHOWN {
            notify(Notice::Line(format!(
                "{origin}: ... and {} more malformed row(s)",
                bad.len() - MALFORMED_SHOWN
            )));
        }
        if !lenient {
            return Err(Error::MalformedRows {
                origin,
                count: bad.len(),
            });
        }
    }
    if rows.is_empty() {
        return Err(Error::Input(format!(
            "{origin}: no failure rows: expected lines `verb,errno,weight`"
        )));
    }
    maintain::total_weight(&rows, &origin)?;
    Ok(maintain::coverage(
        &m,
        &manifest.display().to_string(),
        &rows,
        bad,
    ))
}
