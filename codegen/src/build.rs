//! Selection + graph + binaries -> [`Manifest`].

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use analyzer::{AttachVerdict, Binaries};
use analyzer::{CallGraph, EdgeKind, FnId};
use heuristics::{nearest_attachable, ManifestLimits, Selection, Verdict};

use crate::attach::{attach, attach_of, module_name};
use manifest::{
    Derivation, Excluded, FocusOp, GapKind, KernelInfo, Layer, Manifest, Probe, ProbeArg,
    ReturnKind, Stats, Suggestion, SCHEMA_ID,
};

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

/// The kept functions in probe-id order (by name, module, file).
fn kept_in_probe_order<'s>(g: &CallGraph, sel: &'s Selection) -> Vec<&'s Verdict> {
    let mut kept: Vec<_> = sel.kept().collect();
    kept.sort_by(|a, b| {
        let (x, y) = (g.node(a.id), g.node(b.id));
        (x.name.as_str(), module_name(g, a.id), x.file.as_str()).cmp(&(
            y.name.as_str(),
            module_name(g, b.id),
            y.file.as_str(),
        ))
    });
    kept
}

/// Each kept function's probe id (its position in probe order).
fn probe_ids(kept: &[&Verdict]) -> BTreeMap<FnId, u32> {
    kept.iter()
        .enumerate()
        .map(|(i, v)| (v.id, i as u32))
        .collect()
}

/// The kept functions a program attaches to.
fn with_program(g: &CallGraph, bins: Option<&Binaries>, kept: &[&Verdict]) -> BTreeSet<FnId> {
    kept.iter()
        .filter(|v| attach(&attach_of(g, bins, v.id)).has_program())
        .map(|v| v.id)
        .collect()
}

pub fn build_manifest(
    g: &CallGraph,
    sel: &Selection,
    bins: Option<&Binaries>,
    kernel: KernelInfo,
    entries: &[String],
) -> Manifest {
    let kept = kept_in_probe_order(g, sel);
    let probe_index = probe_ids(&kept);
    // Kept functions a program attaches to: their failures are records of their own, so
    // what they do below is not their callers' (pins_user_memory stops at them).
    let probed = with_program(g, bins, &kept);
    let with_program: BTreeMap<FnId, u32> = probe_index
        .iter()
        .filter(|(f, _)| probed.contains(f))
        .map(|(&f, &i)| (f, i))
        .collect();
    let site_cx = crate::sites::SiteCtx {
        g,
        sel,
        probed: &with_program,
        depth: sel.manifest_limits.calls_depth,
    };
    let mut stats = Stats {
        reachable: sel.verdicts.len(),
        ..Stats::default()
    };
    let mut probes = Vec::with_capacity(kept.len());
    for (i, v) in kept.iter().enumerate() {
        let mut p = probe_of(g, bins, v, i as u32, &probe_index, sel.manifest_limits);
        p.pins_user_memory = pins_user_memory(
            g,
            v.id,
            &sel.pins_user_memory,
            &probed,
            sel.manifest_limits.calls_depth,
        );
        p.error_sites = Some(crate::sites::error_sites(&site_cx, v.id));
        *stats.attach.entry(p.attach).or_default() += 1;
        if p.attach.has_program() {
            stats.attachable += 1;
        }
        match p.layer {
            Layer::Core => stats.core += 1,
            Layer::Vendor => stats.vendor += 1,
        }
        probes.push(p);
    }
    stats.probes = probes.len();
    let mut excluded: Vec<Excluded> = sel.excluded().map(|v| excluded_of(g, v)).collect();
    for e in &excluded {
        *stats.excluded.entry(e.rule).or_default() += 1;
    }
    excluded
        .sort_by(|a, b| (&a.function, &a.module, &a.file).cmp(&(&b.function, &b.module, &b.file)));
    let data_plane = crate::dataplane::data_plane_probes(g, sel, bins, probes.len() as u32);
    Manifest {
        schema: SCHEMA_ID.to_string(),
        kernel,
        vendor: sel.vendor.clone(),
        entries: entries.to_vec(),
        degraded: Vec::new(),
        focus_ops: focus_ops_of(sel),
        probes,
        excluded,
        data_plane,
        stats,
    }
}

/// The error sites of function `id` as its probe lists them (`explain`): the same walk as
/// [`build_manifest`], over the same probes.
pub fn error_sites_of(
    g: &CallGraph,
    sel: &Selection,
    bins: Option<&Binaries>,
    id: FnId,
) -> Vec<manifest::ErrorSite> {
    let kept = kept_in_probe_order(g, sel);
    let probe_index = probe_ids(&kept);
    let probed = with_program(g, bins, &kept);
    let with_program = probe_index
        .into_iter()
        .filter(|(f, _)| probed.contains(f))
        .collect();
    let cx = crate::sites::SiteCtx {
        g,
        sel,
        probed: &with_program,
        depth: sel.manifest_limits.calls_depth,
    };
    crate::sites::error_sites(&cx, id)
}

fn path_names(g: &CallGraph, p: &[FnId]) -> Vec<String> {
    p.iter().map(|&f| g.node(f).name.clone()).collect()
}

/// (return kind, size in bytes, argument count) per BTF, else per the source.
fn signature_of(n: &analyzer::FnNode, bins: Option<&Binaries>) -> (ReturnKind, u32, usize) {
    match bins.and_then(|b| b.signature(n.module.as_deref(), &n.name)) {
        Some(s) => (return_kind(s.ret), s.ret_size, s.nargs),
        None => {
            let size = match n.ret {
                analyzer::RetKind::Ptr => 8,
                analyzer::RetKind::Bool => 1,
                analyzer::RetKind::Void => 0,
                analyzer::RetKind::Int => 4,
            };
            (return_kind(n.ret), size, n.nparams)
        }
    }
}

/// The manifest entry of kept function `v`, probe `id`.
fn probe_of(
    g: &CallGraph,
    bins: Option<&Binaries>,
    v: &heuristics::Verdict,
    id: u32,
    probe_index: &BTreeMap<FnId, u32>,
    limits: ManifestLimits,
) -> Probe {
    let n = g.node(v.id);
    let verdict = attach_of(g, bins, v.id);
    let (returns, ret_size, nargs) = signature_of(n, bins);
    let suggest = if verdict.is_attachable() {
        None
    } else {
        nearest_attachable(g, v.id, limits.suggest_hops, |c| {
            attach_of(g, bins, c).is_attachable()
        })
        .map(|(c, relation)| Suggestion {
            function: g.node(c).name.clone(),
            module: module_name(g, c),
            relation,
        })
    };
    Probe {
        id,
        function: n.name.clone(),
        module: module_name(g, v.id),
        file: n.file.clone(),
        line: n.line,
        layer: v.layer,
        object: v.object,
        rule: v.rule,
        focus: v.focus,
        // set by build_manifest, which knows every probe's program
        pins_user_memory: false,
        evidence: v.evidence.clone(),
        returns,
        ret_size,
        null_ok: returns == ReturnKind::Ptr && n.null_ok,
        nargs,
        attach: attach(&verdict),
        attach_symbol: match &verdict {
            AttachVerdict::CloneOnly { symbol } => Some(symbol.clone()),
            _ => None,
        },
        suggest,
        args: scalar_args(n),
        calls: probed_callees(g, v.id, probe_index, limits.calls_depth),
        path: path_names(g, &v.path),
        // set by build_manifest, which knows every probe's program
        error_sites: None,
    }
}

fn excluded_of(g: &CallGraph, v: &heuristics::Verdict) -> Excluded {
    let n = g.node(v.id);
    Excluded {
        function: n.name.clone(),
        module: module_name(g, v.id),
        file: n.file.clone(),
        line: n.line,
        rule: v.rule,
        evidence: v.evidence.clone(),
        path: path_names(g, &v.path),
    }
}

// The analyzer's return and attach classes in the manifest's terms (the selection's verdicts
// already speak the manifest's vocabulary). Exhaustive matches on purpose: a new value
// upstream fails to compile here until the manifest has it too.

fn return_kind(r: analyzer::RetKind) -> ReturnKind {
    match r {
        analyzer::RetKind::Int => ReturnKind::Int,
        analyzer::RetKind::Ptr => ReturnKind::Ptr,
        analyzer::RetKind::Bool => ReturnKind::Bool,
        analyzer::RetKind::Void => ReturnKind::Void,
    }
}

/// A gap of the analysed input as a manifest `degraded` entry.
pub fn degraded(d: &analyzer::Degradation) -> manifest::Degraded {
    use analyzer::DegradedKind as K;
    let kind = match d.kind {
        K::Unreadable => GapKind::Unreadable,
        K::Undecodable => GapKind::Undecodable,
        K::UnbalancedConditional => GapKind::UnbalancedConditional,
        K::ParseErrors => GapKind::ParseErrors,
        K::TooDeep => GapKind::TooDeep,
        K::ConfigMissing => GapKind::ConfigMissing,
        K::MakefileMissing => GapKind::MakefileMissing,
        K::ModuleMissing => GapKind::ModuleMissing,
    };
    manifest::Degraded {
        kind,
        file: d.file.clone(),
        line: d.line,
        detail: d.detail.clone(),
    }
}

fn focus_ops_of(sel: &Selection) -> Vec<FocusOp> {
    use heuristics::Derivation as D;
    sel.focus_ops
        .members
        .values()
        .map(|m| {
            let (derivation, why) = match &m.derivation {
                D::Constructor => (Derivation::Constructor, "returns the object".to_string()),
                D::Updates { token } => {
                    (Derivation::Updates, format!("takes the object, `{token}`"))
                }
                D::Included { reason } => (Derivation::Included, reason.clone()),
                D::Excluded { reason } => (Derivation::Excluded, reason.clone()),
            };
            FocusOp {
                member: m.member.clone(),
                object: m.object,
                derivation,
                why,
            }
        })
        .collect()
}

/// Probes reachable from `id` through unprobed functions.
/// The probes below `id` through unprobed functions, up to `calls_depth` calls down.
fn probed_callees(
    g: &CallGraph,
    id: FnId,
    probes: &BTreeMap<FnId, u32>,
    calls_depth: usize,
) -> Vec<u32> {
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
            } else if d + 1 < calls_depth {
                queue.push_back((c, d + 1));
            }
        }
    }
    out.into_iter().collect()
}

/// Whether `id`'s body pins user memory: a function of `pinning` (its own body calls a pinning
/// function) is `id` itself or is reached from it through body calls (direct, macro, inline:
/// not a dispatch through an ops table or a uverbs method table, whose target fails on its
/// own account) to callees without a program of their own (`probed`): header and compiler
/// inlines, functions the selection dropped, kept functions that cannot be attached. A
/// failure of such a callee is only ever seen as `id`'s, so its pinning is `id`'s fact.
/// 7.x pins in `__ib_umem_get_va` (a probe: the fact is its own, not its callers'); 6.x in
/// `ib_umem_get`. As deep as a probe's `calls` look (the rules' `calls_depth`).
fn pins_user_memory(
    g: &CallGraph,
    id: FnId,
    pinning: &BTreeSet<FnId>,
    probed: &BTreeSet<FnId>,
    calls_depth: usize,
) -> bool {
    let mut seen = BTreeSet::from([id]);
    let mut queue = VecDeque::from([(id, 0usize)]);
    while let Some((f, d)) = queue.pop_front() {
        if pinning.contains(&f) {
            return true;
        }
        if d + 1 >= calls_depth {
            continue;
        }
        for (c, e) in g.callees(f) {
            let body_call = matches!(
                e.kind,
                EdgeKind::Direct | EdgeKind::Macro | EdgeKind::Inline
            );
            if body_call && !probed.contains(&c) && seen.insert(c) {
                queue.push_back((c, d + 1));
            }
        }
    }
    false
}

/// Arguments recorded on failure: the first four scalar parameters (flags, masks, lengths,
/// addresses passed as integers); pointers are meaningless once the call has returned.
fn scalar_args(n: &analyzer::FnNode) -> Vec<ProbeArg> {
    n.params
        .iter()
        .enumerate()
        .filter(|(_, p)| p.scalar && !p.name.is_empty())
        .take(4)
        .map(|(index, p)| ProbeArg {
            index,
            name: p.name.clone(),
        })
        .collect()
}
