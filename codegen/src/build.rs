//! Selection + graph + binaries -> [`Manifest`].

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use analyzer::graph::{CallGraph, FnId};
use analyzer::traceability::{AttachVerdict, Binaries};
use heuristics::{nearest_attachable, Selection};

use crate::manifest::{Excluded, KernelInfo, Manifest, Probe, Stats, Suggestion, SCHEMA_ID};

/// How deep below a probe to look for the probes it calls (through unprobed functions).
const CALLS_DEPTH: usize = 8;

fn module_name(g: &CallGraph, id: FnId) -> String {
    g.node(id).module.clone().unwrap_or_else(|| "inline".into())
}

fn attach_of(g: &CallGraph, bins: Option<&Binaries>, id: FnId) -> AttachVerdict {
    let n = g.node(id);
    if !n.built {
        return AttachVerdict::NotBuilt;
    }
    match bins {
        Some(b) => b.verdict(n.module.as_deref(), &n.name),
        None if n.module.is_none() => AttachVerdict::Inlined,
        // No binaries to check against: the source says it is a real function.
        None => AttachVerdict::Fexit,
    }
}

/// A probe whose source and binary disagree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    pub function: String,
    pub module: String,
    pub what: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.function, self.module, self.what)
    }
}

/// Check every attachable probe against the binary: BTF FUNC present, argument count and
/// return kind equal to the source's. All mismatches are returned together.
pub fn validate(m: &Manifest, g: &CallGraph, sel: &Selection, bins: &Binaries) -> Vec<Mismatch> {
    let mut out = Vec::new();
    for v in sel.kept() {
        let n = g.node(v.id);
        let module = module_name(g, v.id);
        if !attach_of(g, Some(bins), v.id).is_attachable() {
            continue;
        }
        let mm = |what: String| Mismatch {
            function: n.name.clone(),
            module: module.clone(),
            what,
        };
        match bins.signature(n.module.as_deref(), &n.name) {
            None => out.push(mm("no BTF FUNC in the module".into())),
            Some(sig) => {
                if sig.nargs != n.nparams {
                    out.push(mm(format!(
                        "source {}:{} has {} parameters, BTF has {}",
                        n.file, n.line, n.nparams, sig.nargs
                    )));
                }
                if sig.ret != n.ret {
                    out.push(mm(format!(
                        "source returns {} (`{}`), BTF returns {}",
                        n.ret.as_str(),
                        n.ret_type,
                        sig.ret.as_str()
                    )));
                }
            }
        }
    }
    let _ = m;
    out.sort_by(|a, b| (&a.function, &a.module).cmp(&(&b.function, &b.module)));
    out
}

pub fn build_manifest(
    g: &CallGraph,
    sel: &Selection,
    bins: Option<&Binaries>,
    kernel: KernelInfo,
    entries: &[String],
) -> Manifest {
    let mut kept: Vec<_> = sel.kept().collect();
    kept.sort_by(|a, b| {
        let (x, y) = (g.node(a.id), g.node(b.id));
        (x.name.as_str(), module_name(g, a.id), x.file.as_str()).cmp(&(
            y.name.as_str(),
            module_name(g, b.id),
            y.file.as_str(),
        ))
    });
    let probe_index: BTreeMap<FnId, u32> = kept
        .iter()
        .enumerate()
        .map(|(i, v)| (v.id, i as u32))
        .collect();
    let path_names = |p: &[FnId]| {
        p.iter()
            .map(|&f| g.node(f).name.clone())
            .collect::<Vec<_>>()
    };
    let mut stats = Stats {
        reachable: sel.verdicts.len(),
        ..Stats::default()
    };
    let mut probes = Vec::with_capacity(kept.len());
    for (i, v) in kept.iter().enumerate() {
        let n = g.node(v.id);
        let module = module_name(g, v.id);
        let attach = attach_of(g, bins, v.id);
        let sig = bins.and_then(|b| b.signature(n.module.as_deref(), &n.name));
        let (returns, ret_size, nargs) = match sig {
            Some(s) => (s.ret, s.ret_size, s.nargs),
            None => (
                n.ret,
                match n.ret {
                    analyzer::RetKind::Ptr => 8,
                    analyzer::RetKind::Bool => 1,
                    analyzer::RetKind::Void => 0,
                    analyzer::RetKind::Int => 4,
                },
                n.nparams,
            ),
        };
        let suggest = if attach.is_attachable() {
            None
        } else {
            nearest_attachable(g, v.id, 3, |c| attach_of(g, bins, c).is_attachable()).map(
                |(c, relation)| Suggestion {
                    function: g.node(c).name.clone(),
                    module: module_name(g, c),
                    relation: relation.to_string(),
                },
            )
        };
        *stats.attach.entry(attach.as_str().to_string()).or_default() += 1;
        if attach.is_attachable() || matches!(attach, AttachVerdict::CloneOnly { .. }) {
            stats.attachable += 1;
        }
        match v.layer {
            heuristics::Layer::Core => stats.core += 1,
            heuristics::Layer::Vendor => stats.vendor += 1,
        }
        probes.push(Probe {
            id: i as u32,
            function: n.name.clone(),
            module,
            file: n.file.clone(),
            line: n.line,
            layer: match v.layer {
                heuristics::Layer::Core => "core".into(),
                heuristics::Layer::Vendor => "vendor".into(),
            },
            object: v.object.as_str().to_string(),
            rule: v.rule.as_str().to_string(),
            focus: v.focus.map(|f| {
                serde_json::to_value(f)
                    .ok()
                    .and_then(|x| x.as_str().map(str::to_string))
                    .unwrap_or_default()
            }),
            evidence: v.evidence.clone(),
            returns: returns.as_str().to_string(),
            ret_size,
            null_ok: returns == analyzer::RetKind::Ptr && n.null_ok,
            nargs,
            attach: attach.as_str().to_string(),
            attach_symbol: match &attach {
                AttachVerdict::CloneOnly { symbol } => Some(symbol.clone()),
                _ => None,
            },
            suggest,
            args: scalar_args(n),
            calls: probed_callees(g, v.id, &probe_index),
            path: path_names(&v.path),
        });
    }
    stats.probes = probes.len();
    let mut excluded: Vec<Excluded> = sel
        .excluded()
        .map(|v| {
            let n = g.node(v.id);
            *stats
                .excluded
                .entry(v.rule.as_str().to_string())
                .or_default() += 1;
            Excluded {
                function: n.name.clone(),
                module: module_name(g, v.id),
                file: n.file.clone(),
                line: n.line,
                rule: v.rule.as_str().to_string(),
                evidence: v.evidence.clone(),
                path: path_names(&v.path),
            }
        })
        .collect();
    excluded
        .sort_by(|a, b| (&a.function, &a.module, &a.file).cmp(&(&b.function, &b.module, &b.file)));
    Manifest {
        schema: SCHEMA_ID.to_string(),
        kernel,
        vendor: sel.vendor.clone(),
        entries: entries.to_vec(),
        degraded: Vec::new(),
        focus_ops: focus_ops_of(sel),
        probes,
        excluded,
        stats,
    }
}

fn focus_ops_of(sel: &Selection) -> Vec<crate::manifest::FocusOp> {
    use heuristics::focus_ops::Derivation;
    sel.focus_ops
        .members
        .values()
        .map(|m| {
            let (derivation, why) = match &m.derivation {
                Derivation::Constructor => ("constructor", "returns the object".to_string()),
                Derivation::Updates { token } => {
                    ("updates", format!("takes the object, `{token}`"))
                }
                Derivation::Included { reason } => ("included", reason.clone()),
                Derivation::Excluded { reason } => ("excluded", reason.clone()),
            };
            crate::manifest::FocusOp {
                member: m.member.clone(),
                object: m.object.as_str().to_string(),
                derivation: derivation.to_string(),
                why,
            }
        })
        .collect()
}

/// Probes reachable from `id` through unprobed functions.
fn probed_callees(g: &CallGraph, id: FnId, probes: &BTreeMap<FnId, u32>) -> Vec<u32> {
    let mut out = BTreeSet::new();
    let mut seen = BTreeSet::from([id]);
    let mut queue = VecDeque::from([(id, 0usize)]);
    while let Some((f, d)) = queue.pop_front() {
        for (c, _) in g.callees(f) {
            if !seen.insert(c) {
                continue;
            }
            if let Some(&p) = probes.get(&c) {
                out.insert(p);
            } else if d + 1 < CALLS_DEPTH {
                queue.push_back((c, d + 1));
            }
        }
    }
    out.into_iter().collect()
}

/// Arguments recorded on failure: the first four scalar parameters (flags, masks, lengths,
/// addresses passed as integers); pointers are meaningless once the call has returned.
fn scalar_args(n: &analyzer::FnNode) -> Vec<crate::manifest::ProbeArg> {
    n.params
        .iter()
        .enumerate()
        .filter(|(_, p)| p.scalar && !p.name.is_empty())
        .take(4)
        .map(|(index, p)| crate::manifest::ProbeArg {
            index,
            name: p.name.clone(),
        })
        .collect()
}
