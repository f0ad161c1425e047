//! Manifest against manifest: the drift `probegen check` reports after a kernel upgrade, and
//! the coverage diff `probegen diff` posts on a review. Pure: manifests in, data and markdown
//! out, deterministic.
//!
//! Probes are keyed by (module, function). A probe only in the old set is *removed*, with its
//! fate in the new one: excluded by a rule, no longer reachable, or gone from the source; a
//! removed probe gone from the source and a new probe in the same file, on the same object and
//! layer, are a *rename*; the same function in another module is a *module move*. Probes in
//! both sets are compared for argument count, return kind, attach verdict and file.

use askama::Template;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

use manifest::{Layer, Manifest, Object, Probe, ProbeSummary, Rule};

use crate::markdown::{cell, code_list, code_list_or_dash, code_or_em_dash, count};
use crate::verbs::{self, VerbStatus};

/// Which set a report talks about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SetId {
    pub kernel: String,
    pub vendor: String,
}

impl SetId {
    fn of(m: &Manifest) -> Self {
        Self {
            kernel: m.kernel.version.clone(),
            vendor: m.vendor.clone(),
        }
    }
}

/// What became of a removed probe in the new set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "now", rename_all = "kebab-case")]
pub enum Fate {
    /// Still reachable; a rule drops it now.
    Excluded { rule: Rule, evidence: String },
    /// Still defined in the source, no longer reached from the entries.
    Unreachable,
    /// No longer defined in the source.
    Gone,
    /// Not in the new manifest (unreachable or gone: only the source can tell).
    Absent,
}

impl Fate {
    pub fn text(&self) -> String {
        match self {
            Fate::Excluded { rule, evidence } => format!("excluded by {rule}: {evidence}"),
            Fate::Unreachable => "no longer reachable from the entries".into(),
            Fate::Gone => "gone from the source".into(),
            Fate::Absent => "not in the new set (unreachable or gone)".into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Removed {
    #[serde(flatten)]
    pub probe: ProbeSummary,
    #[serde(flatten)]
    pub fate: Fate,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Renamed {
    pub from: ProbeSummary,
    pub to: ProbeSummary,
    /// How the new target was matched: a successor found through the former callers, or the
    /// most similar name in the same file.
    pub why: String,
}

/// A name the rules (or the checked-in set's focus members) rely on that the new tree lacks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MissingName {
    /// `focus-member`, `focus-override`, `hardware-command`, `hardware-function`, `override`
    /// or `vendor-dir`.
    pub kind: String,
    pub name: String,
    /// The new tree's nearest names of the same kind, best first.
    pub candidates: Vec<String>,
    /// The checked-in set relied on it (a focus member it was derived with, a name in a
    /// probe's evidence or rule): losing it changes the set, and `check` exits 1. Rules
    /// names the set never used are listed for the rules' upkeep only.
    pub used_by_set: bool,
}

/// What an upgrade changes under the rules themselves.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct RulesDrift {
    pub missing: Vec<MissingName>,
    /// Focus members the new tree derives that the checked-in set did not have.
    pub new_focus_members: Vec<String>,
}

impl RulesDrift {
    pub fn is_empty(&self) -> bool {
        self.missing.is_empty() && self.new_focus_members.is_empty()
    }

    /// Missing names the checked-in set relied on.
    pub fn breaking(&self) -> usize {
        self.missing.iter().filter(|m| m.used_by_set).count()
    }
}

/// Names the rules reference, by kind, for [`rules_drift`].
pub struct RulesNames {
    /// (kind, name) of functions the rules name: hardware commands and functions of the
    /// vendor, function overrides.
    pub functions: Vec<(String, String)>,
    /// Members named by the rules' focus_ops overrides.
    pub focus_overrides: Vec<String>,
    /// Source directories of the vendor.
    pub vendor_dirs: Vec<String>,
}

/// Up to three names of `pool` nearest to `name` (shared prefix and suffix), best first.
pub(crate) fn nearest_names(name: &str, pool: &[String]) -> Vec<String> {
    let mut scored: Vec<(usize, &String)> = pool
        .iter()
        .filter(|p| p.as_str() != name)
        .map(|p| (similarity(name, p), p))
        // Half the name shared at its ends: `resize_cq` ~ `resize_user_cq`.
        .filter(|(s, _)| *s * 2 >= name.len())
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    scored.into_iter().take(3).map(|(_, p)| p.clone()).collect()
}

/// The rules drift of an upgrade: focus members of the checked-in set that the new
/// `struct ib_device_ops` lacks (`resize_cq` -> `resize_user_cq`), rules names the new tree
/// neither defines nor calls, and focus members new in this tree.
pub(crate) fn rules_drift(
    old: &Manifest,
    new: &Manifest,
    ops_members: &[String],
    names: &RulesNames,
    known_function: &dyn Fn(&str) -> bool,
    function_pool: &[String],
    dir_exists: &dyn Fn(&str) -> bool,
) -> RulesDrift {
    let mut d = RulesDrift::default();
    // Whether the checked-in set names `x` in a probe's evidence (`calls mlx5_cmd_exec`) or
    // kept it by an override.
    let used = |x: &str| {
        old.probes.iter().any(|p| {
            p.evidence
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .any(|w| w == x)
                || (p.rule == Rule::Override && p.function == x)
        }) || old
            .excluded
            .iter()
            .any(|e| e.rule == Rule::Override && e.function == x)
    };
    let focus_new: BTreeSet<&str> = new.focus_ops.iter().map(|f| f.member.as_str()).collect();
    let focus_old: BTreeSet<&str> = old.focus_ops.iter().map(|f| f.member.as_str()).collect();
    for f in &old.focus_ops {
        if !ops_members.iter().any(|m| m == &f.member) {
            d.missing.push(MissingName {
                kind: "focus-member".into(),
                name: f.member.clone(),
                candidates: nearest_names(&f.member, ops_members),
                used_by_set: true,
            });
        }
    }
    for m in &names.focus_overrides {
        if !ops_members.iter().any(|x| x == m) {
            d.missing.push(MissingName {
                kind: "focus-override".into(),
                name: m.clone(),
                candidates: nearest_names(m, ops_members),
                used_by_set: old.focus_ops.iter().any(|f| &f.member == m),
            });
        }
    }
    for (kind, f) in &names.functions {
        if !known_function(f) {
            d.missing.push(MissingName {
                kind: kind.clone(),
                name: f.clone(),
                candidates: nearest_names(f, function_pool),
                used_by_set: used(f),
            });
        }
    }
    for dir in &names.vendor_dirs {
        if !dir_exists(dir) {
            d.missing.push(MissingName {
                kind: "vendor-dir".into(),
                name: dir.clone(),
                candidates: Vec::new(),
                used_by_set: old.probes.iter().any(|p| p.file.starts_with(dir.as_str())),
            });
        }
    }
    if !old.focus_ops.is_empty() {
        d.new_focus_members = focus_new
            .difference(&focus_old)
            .map(|s| s.to_string())
            .collect();
    }
    // What the set relied on first.
    d.missing.sort_by(|a, b| {
        (!a.used_by_set, &a.kind, &a.name).cmp(&(!b.used_by_set, &b.kind, &b.name))
    });
    d
}

/// Replace similarity-based renames (and removals) of probes gone from the source by the
/// successor the new graph shows: `successor(removed function)` gives (new function, why).
pub fn apply_successors(
    d: &mut Drift,
    successor: &dyn Fn(&ProbeSummary) -> Option<(String, String)>,
) {
    let mut renamed = Vec::new();
    for r in std::mem::take(&mut d.renamed) {
        match successor(&r.from) {
            Some((f, why)) if f != r.to.function => {
                if let Some(j) = d.added.iter().position(|a| a.function == f) {
                    let to = d.added.remove(j);
                    d.added.push(r.to);
                    renamed.push(Renamed {
                        from: r.from,
                        to,
                        why,
                    });
                } else {
                    renamed.push(r);
                }
            }
            Some((_, why)) => renamed.push(Renamed { why, ..r }),
            None => renamed.push(r),
        }
    }
    let mut removed = Vec::new();
    for r in std::mem::take(&mut d.removed) {
        let gone = matches!(r.fate, Fate::Gone | Fate::Absent);
        let succ = if gone { successor(&r.probe) } else { None };
        match succ.and_then(|(f, why)| Some((d.added.iter().position(|a| a.function == f)?, why))) {
            Some((j, why)) => {
                let to = d.added.remove(j);
                renamed.push(Renamed {
                    from: r.probe,
                    to,
                    why,
                });
            }
            None => removed.push(r),
        }
    }
    d.removed = removed;
    d.renamed = renamed;
    d.added
        .sort_by(|a, b| (&a.function, &a.module).cmp(&(&b.function, &b.module)));
    d.renamed
        .sort_by(|a, b| a.from.function.cmp(&b.from.function));
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChangeKind {
    Nargs,
    Returns,
    Attach,
    File,
    Module,
}

impl ChangeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Nargs => "nargs",
            ChangeKind::Returns => "returns",
            ChangeKind::Attach => "attach",
            ChangeKind::File => "file",
            ChangeKind::Module => "module",
        }
    }
}

/// One property of a probe present in both sets that changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    pub function: String,
    /// The module in the new set.
    pub module: String,
    pub what: ChangeKind,
    pub old: String,
    pub new: String,
}

/// Everything that differs between two probe sets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Drift {
    pub old: SetId,
    pub new: SetId,
    pub added: Vec<ProbeSummary>,
    pub removed: Vec<Removed>,
    pub renamed: Vec<Renamed>,
    pub changed: Vec<Change>,
    /// Source files whose probes live in another module now (`umem.c`: ib_uverbs -> ib_core
    /// in 7.x), whatever became of the probes themselves.
    pub file_moves: Vec<FileMove>,
    /// Data-plane probes only one of the sets has (a renamed event callback shows as one of
    /// each), or whose class or attach verdict changed.
    pub data_plane: Vec<DataPlaneChange>,
}

/// A data-plane probe of one set that the other lacks or has otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DataPlaneChange {
    pub function: String,
    pub module: String,
    /// `added`, `removed`, or what changed (`class async_event -> completion`).
    pub what: String,
}

/// The data-plane probes of `old` and `new` compared by (module, function).
fn data_plane_drift(old: &Manifest, new: &Manifest) -> Vec<DataPlaneChange> {
    let key = |d: &manifest::DataPlaneProbe| (d.module.clone(), d.function.clone());
    let o: BTreeMap<_, _> = old.data_plane.iter().map(|d| (key(d), d)).collect();
    let n: BTreeMap<_, _> = new.data_plane.iter().map(|d| (key(d), d)).collect();
    let mut out = Vec::new();
    for (k, d) in &o {
        let what = match n.get(k) {
            None => "removed".to_string(),
            Some(e) if e.class != d.class => format!("class {} -> {}", d.class, e.class),
            Some(e) if e.attach != d.attach => format!("attach {} -> {}", d.attach, e.attach),
            Some(_) => continue,
        };
        out.push(DataPlaneChange {
            function: k.1.clone(),
            module: k.0.clone(),
            what,
        });
    }
    for k in n.keys().filter(|k| !o.contains_key(*k)) {
        out.push(DataPlaneChange {
            function: k.1.clone(),
            module: k.0.clone(),
            what: "added".to_string(),
        });
    }
    out.sort_by(|a, b| (&a.function, &a.module).cmp(&(&b.function, &b.module)));
    out
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileMove {
    pub file: String,
    pub old_module: String,
    pub new_module: String,
}

/// Files with probes in both sets whose module differs.
fn file_moves(old: &Manifest, new: &Manifest) -> Vec<FileMove> {
    let modules = |m: &Manifest| -> BTreeMap<String, String> {
        m.probes
            .iter()
            .filter(|p| p.module != "inline")
            .map(|p| (p.file.clone(), p.module.clone()))
            .collect()
    };
    let (o, n) = (modules(old), modules(new));
    o.iter()
        .filter_map(|(file, om)| {
            let nm = n.get(file)?;
            (nm != om).then(|| FileMove {
                file: file.clone(),
                old_module: om.clone(),
                new_module: nm.clone(),
            })
        })
        .collect()
}

impl Drift {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty()
            && self.removed.is_empty()
            && self.renamed.is_empty()
            && self.changed.is_empty()
            && self.data_plane.is_empty()
    }

    /// Items to review.
    pub fn len(&self) -> usize {
        self.added.len()
            + self.removed.len()
            + self.renamed.len()
            + self.changed.len()
            + self.data_plane.len()
    }
}

type Key = (String, String);

fn key(p: &Probe) -> Key {
    (p.module.clone(), p.function.clone())
}

fn attach_text(p: &Probe) -> String {
    match &p.attach_symbol {
        Some(s) => format!("{} ({s})", p.attach),
        None => p.attach.to_string(),
    }
}

/// Pair the probes of one key: same file first, then in order.
fn pair_same_key<'a>(old: &[&'a Probe], new: &[&'a Probe]) -> PairResult<'a> {
    let mut used_new = vec![false; new.len()];
    let mut pairs = Vec::new();
    let mut left_old = Vec::new();
    for o in old {
        match new
            .iter()
            .enumerate()
            .find(|(i, n)| !used_new[*i] && n.file == o.file)
        {
            Some((i, n)) => {
                used_new[i] = true;
                pairs.push((*o, *n));
            }
            None => left_old.push(*o),
        }
    }
    let mut left_new: Vec<&Probe> = new
        .iter()
        .enumerate()
        .filter(|(i, _)| !used_new[*i])
        .map(|(_, n)| *n)
        .collect();
    let mut still_old = Vec::new();
    for o in left_old {
        if left_new.is_empty() {
            still_old.push(o);
        } else {
            pairs.push((o, left_new.remove(0)));
        }
    }
    (pairs, still_old, left_new)
}

type PairResult<'a> = (Vec<(&'a Probe, &'a Probe)>, Vec<&'a Probe>, Vec<&'a Probe>);

fn changes(o: &Probe, n: &Probe) -> Vec<Change> {
    let mut out = Vec::new();
    let mut push = |what: ChangeKind, old: String, new: String| {
        if old != new {
            out.push(Change {
                function: n.function.clone(),
                module: n.module.clone(),
                what,
                old,
                new,
            });
        }
    };
    push(ChangeKind::Module, o.module.clone(), n.module.clone());
    push(ChangeKind::File, o.file.clone(), n.file.clone());
    push(ChangeKind::Nargs, o.nargs.to_string(), n.nargs.to_string());
    push(
        ChangeKind::Returns,
        o.returns.to_string(),
        n.returns.to_string(),
    );
    push(ChangeKind::Attach, attach_text(o), attach_text(n));
    out
}

/// Similarity of two names for rename pairing: shared prefix plus shared suffix, in bytes.
fn similarity(a: &str, b: &str) -> usize {
    let pre = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    let suf = a
        .bytes()
        .rev()
        .zip(b.bytes().rev())
        .take_while(|(x, y)| x == y)
        .count();
    (pre + suf).min(a.len().max(b.len()))
}

fn group(m: &Manifest) -> BTreeMap<Key, Vec<&Probe>> {
    let mut g: BTreeMap<Key, Vec<&Probe>> = BTreeMap::new();
    for p in &m.probes {
        g.entry(key(p)).or_default().push(p);
    }
    g
}

/// Probes of two sets after pairing: property changes of probes in both, and the probes only
/// one side has.
struct Paired<'a> {
    changed: Vec<Change>,
    removed: Vec<&'a Probe>,
    added: Vec<&'a Probe>,
}

/// Pair the probes of both sets by (module, function), then the leftovers by function alone:
/// the same function removed from one module and added in another is a module move, a change.
fn pair_probes<'a>(old: &'a Manifest, new: &'a Manifest) -> Paired<'a> {
    let (og, ng) = (group(old), group(new));
    let keys: BTreeSet<&Key> = og.keys().chain(ng.keys()).collect();
    let mut p = Paired {
        changed: Vec::new(),
        removed: Vec::new(),
        added: Vec::new(),
    };
    for k in keys {
        let o = og.get(k).map_or(&[][..], Vec::as_slice);
        let n = ng.get(k).map_or(&[][..], Vec::as_slice);
        let (pairs, ro, an) = pair_same_key(o, n);
        for (a, b) in pairs {
            p.changed.extend(changes(a, b));
        }
        p.removed.extend(ro);
        p.added.extend(an);
    }
    let mut i = 0;
    while i < p.removed.len() {
        let r = p.removed[i];
        if let Some(j) = p.added.iter().position(|a| a.function == r.function) {
            let a = p.added.remove(j);
            p.changed.extend(changes(r, a));
            p.removed.remove(i);
        } else {
            i += 1;
        }
    }
    p
}

/// The function is a probe or an exclusion of the manifest.
fn in_manifest(m: &Manifest, f: &str) -> bool {
    m.probes.iter().any(|p| p.function == f) || m.excluded.iter().any(|e| e.function == f)
}

/// What became of a probe of the old set that the new set lacks.
fn fate_of(new: &Manifest, defined: Option<&dyn Fn(&str) -> bool>, p: &Probe) -> Fate {
    if let Some(e) = new
        .excluded
        .iter()
        .find(|e| e.function == p.function && e.module == p.module)
        .or_else(|| new.excluded.iter().find(|e| e.function == p.function))
    {
        return Fate::Excluded {
            rule: e.rule,
            evidence: e.evidence.clone(),
        };
    }
    match defined {
        Some(d) if d(&p.function) => Fate::Unreachable,
        Some(_) => Fate::Gone,
        None if in_manifest(new, &p.function) => Fate::Unreachable,
        None => Fate::Absent,
    }
}

/// The added probe a removed one was renamed to: in the same file, on the same object and
/// layer, not in the old set; the most similar name wins, ties by name.
fn rename_target(old: &Manifest, r: &Probe, added: &[&Probe]) -> Option<usize> {
    added
        .iter()
        .enumerate()
        .filter(|(_, a)| {
            a.file == r.file
                && a.object == r.object
                && a.layer == r.layer
                && !in_manifest(old, &a.function)
        })
        .max_by(|(_, a), (_, b)| {
            similarity(&r.function, &a.function)
                .cmp(&similarity(&r.function, &b.function))
                .then_with(|| b.function.cmp(&a.function))
        })
        .map(|(j, _)| j)
}

/// Compare two probe sets. `defined` says whether a function is still defined in the new
/// source (`None` when only the manifests are known: removed probes absent from the new
/// manifest are then [`Fate::Absent`]).
pub fn drift(old: &Manifest, new: &Manifest, defined: Option<&dyn Fn(&str) -> bool>) -> Drift {
    let Paired {
        mut changed,
        removed: removed_p,
        added: mut added_p,
    } = pair_probes(old, new);
    // Renames: only a removed probe gone from the source can have been renamed.
    let mut renamed = Vec::new();
    let mut removed = Vec::new();
    for r in removed_p {
        let fate = fate_of(new, defined, r);
        let gone = matches!(fate, Fate::Gone | Fate::Absent);
        match gone.then(|| rename_target(old, r, &added_p)).flatten() {
            Some(j) => renamed.push(Renamed {
                from: r.into(),
                to: added_p.remove(j).into(),
                why: "same file, object and layer; most similar name".into(),
            }),
            None => removed.push(Removed {
                probe: r.into(),
                fate,
            }),
        }
    }
    let mut added: Vec<ProbeSummary> = added_p.into_iter().map(ProbeSummary::from).collect();
    added.sort_by(|a, b| (&a.function, &a.module).cmp(&(&b.function, &b.module)));
    removed.sort_by(|a, b| {
        (&a.probe.function, &a.probe.module).cmp(&(&b.probe.function, &b.probe.module))
    });
    renamed.sort_by(|a, b| a.from.function.cmp(&b.from.function));
    changed.sort_by(|a, b| (&a.function, &a.module, a.what).cmp(&(&b.function, &b.module, b.what)));
    Drift {
        old: SetId::of(old),
        new: SetId::of(new),
        added,
        removed,
        renamed,
        changed,
        file_moves: file_moves(old, new),
        data_plane: data_plane_drift(old, new),
    }
}

/// `` `name` (kind), ... `` of the rules names only the rules' upkeep needs.
fn upkeep_list(missing: &[&MissingName]) -> String {
    let named: Vec<String> = missing
        .iter()
        .map(|m| format!("`{}` ({})", m.name, m.kind))
        .collect();
    named.join(", ")
}

/// The `probegen check` report; `templates/drift_sections.md` holds the sections it shares
/// with `diff`.
#[derive(Template)]
#[template(path = "check.md", escape = "none")]
struct CheckTemplate<'a> {
    d: &'a Drift,
    against: &'a str,
}

/// The rules-drift section of `probegen check`.
#[derive(Template)]
#[template(path = "rules_drift.md", escape = "none")]
struct RulesDriftTemplate<'a> {
    r: &'a RulesDrift,
    /// Missing names the checked-in set relied on.
    relied: Vec<&'a MissingName>,
    /// Missing names only the rules' upkeep needs.
    upkeep: Vec<&'a MissingName>,
}

/// The rules-drift section of `probegen check`.
pub fn rules_drift_markdown(r: &RulesDrift) -> Result<String, askama::Error> {
    let (relied, upkeep) = r.missing.iter().partition(|m| m.used_by_set);
    RulesDriftTemplate { r, relied, upkeep }.render()
}

/// The `probegen check` report.
pub fn check_markdown(d: &Drift, against: &str) -> Result<String, askama::Error> {
    CheckTemplate { d, against }.render()
}

/// Probes per (object, layer) in both sets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ObjectLayer {
    pub object: Object,
    pub layer: Layer,
    pub old: usize,
    pub new: usize,
}

/// One verb in both sets.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VerbDiff {
    pub verb: String,
    pub old: VerbStatus,
    pub new: VerbStatus,
}

/// Probe counts of the two sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub old: usize,
    pub new: usize,
}

/// The `probegen diff` report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CoverageDiff {
    #[serde(flatten)]
    pub drift: Drift,
    pub probes: Counts,
    pub objects: Vec<ObjectLayer>,
    pub verbs: Vec<VerbDiff>,
}

pub fn coverage_diff(old: &Manifest, new: &Manifest) -> CoverageDiff {
    let tally = |m: &Manifest| {
        let mut t: BTreeMap<(Object, Layer), usize> = BTreeMap::new();
        for p in &m.probes {
            *t.entry((p.object, p.layer)).or_default() += 1;
        }
        t
    };
    let (to, tn) = (tally(old), tally(new));
    // Every (object, layer), in the order the report lists them, zero counts included.
    let objects = Object::ALL
        .iter()
        .flat_map(|&object| Layer::ALL.iter().map(move |&layer| (object, layer)))
        .map(|k| ObjectLayer {
            object: k.0,
            layer: k.1,
            old: to.get(&k).copied().unwrap_or(0),
            new: tn.get(&k).copied().unwrap_or(0),
        })
        .collect();
    let (so, sn) = (verbs::statuses(old), verbs::statuses(new));
    let verbs = verbs::REPORTED_VERBS
        .iter()
        .filter_map(|v| {
            let o = so.iter().find(|s| s.verb == *v)?;
            let n = sn.iter().find(|s| s.verb == *v)?;
            Some(VerbDiff {
                verb: v.to_string(),
                old: o.clone(),
                new: n.clone(),
            })
        })
        .collect();
    CoverageDiff {
        drift: drift(old, new, None),
        probes: Counts {
            old: old.probes.len(),
            new: new.probes.len(),
        },
        objects,
        verbs,
    }
}

/// `3`, `3 → 5 (+2)`, `5 → 3 (−2)` of an (old, new) count.
fn arrow(&(old, new): &(usize, usize)) -> String {
    match new.cmp(&old) {
        std::cmp::Ordering::Equal => old.to_string(),
        std::cmp::Ordering::Greater => format!("{old} → {new} (+{})", new - old),
        std::cmp::Ordering::Less => format!("{old} → {new} (−{})", old - new),
    }
}

/// The handler a verb lands in, the new set's first, `—` when neither set knows it.
fn handler_cell(v: &VerbDiff) -> String {
    code_or_em_dash(v.new.handler.as_deref().or(v.old.handler.as_deref()))
}

/// `✅ probed`, `❌ excluded (...)`: a verb's coverage in one set.
fn mark(s: &VerbStatus) -> String {
    let m = if s.covered { "✅" } else { "❌" };
    format!("{m} {}", s.verdict.short())
}

/// How many probes are below the handler, `old → new` when the probes changed.
fn below_cell(v: &VerbDiff) -> String {
    if v.old.below == v.new.below {
        v.new.below.len().to_string()
    } else {
        format!("{} → {}", v.old.below.len(), v.new.below.len())
    }
}

/// `−gone, +new` probes below a verb's handler.
fn below_change(v: &VerbDiff) -> String {
    let o: BTreeSet<&String> = v.old.below.iter().collect();
    let n: BTreeSet<&String> = v.new.below.iter().collect();
    let minus = o.difference(&n).map(|s| format!("−{s}"));
    let plus = n.difference(&o).map(|s| format!("+{s}"));
    minus.chain(plus).collect::<Vec<_>>().join(", ")
}

/// One object's (old, new) probe counts in the diff's coverage table.
struct ObjectRow {
    object: Object,
    core: (usize, usize),
    vendor: (usize, usize),
    total: (usize, usize),
}

/// The rows of the coverage table: objects in the order [`CoverageDiff::objects`] lists them.
fn object_rows(objects: &[ObjectLayer]) -> Vec<ObjectRow> {
    let mut order: Vec<Object> = Vec::new();
    for o in objects {
        if !order.contains(&o.object) {
            order.push(o.object);
        }
    }
    let sum = |object: Object, layer: Option<Layer>| {
        objects
            .iter()
            .filter(|o| o.object == object && layer.is_none_or(|l| o.layer == l))
            .fold((0, 0), |(a, b), o| (a + o.old, b + o.new))
    };
    order
        .into_iter()
        .map(|object| ObjectRow {
            object,
            core: sum(object, Some(Layer::Core)),
            vendor: sum(object, Some(Layer::Vendor)),
            total: sum(object, None),
        })
        .collect()
}

/// The `probegen diff` report.
#[derive(Template)]
#[template(path = "diff.md", escape = "none")]
struct DiffTemplate<'a> {
    cov: &'a CoverageDiff,
    /// The drift, named `d` as `templates/drift_sections.md` expects.
    d: &'a Drift,
    objects: Vec<ObjectRow>,
    /// Verbs whose probes below the handler changed.
    below_changed: Vec<&'a VerbDiff>,
}

/// The `probegen diff` report.
pub fn diff_markdown(cov: &CoverageDiff) -> Result<String, askama::Error> {
    DiffTemplate {
        cov,
        d: &cov.drift,
        objects: object_rows(&cov.objects),
        below_changed: cov
            .verbs
            .iter()
            .filter(|v| v.old.below != v.new.below)
            .collect(),
    }
    .render()
}

#[cfg(test)]
// A test reads as one scenario from setup to assertions; the 80-line limit is for the code.
#[allow(clippy::too_many_lines)]
mod tests {
    use super::*;
    use manifest::{Excluded, KernelInfo, Stats};

    fn probe(function: &str, module: &str, file: &str, object: &str, layer: &str) -> Probe {
        Probe {
            id: 0,
            function: function.into(),
            module: module.into(),
            file: file.into(),
            line: 10,
            layer: manifest::Layer::parse(layer).expect("layer"),
            object: manifest::Object::parse(object).expect("object"),
            rule: manifest::Rule::parse("focus").expect("rule"),
            focus: Some(manifest::FocusKind::parse("hardware").expect("focus")),
            pins_user_memory: false,
            error_sites: None,
            evidence: String::new(),
            returns: manifest::ReturnKind::parse("int").expect("returns"),
            ret_size: 4,
            null_ok: false,
            nargs: 2,
            attach: manifest::Attach::parse("fexit").expect("attach"),
            attach_symbol: None,
            suggest: None,
            args: Vec::new(),
            calls: Vec::new(),
            path: vec!["ib_uverbs_write".into(), function.into()],
        }
    }

    fn manifest(version: &str, probes: Vec<Probe>, excluded: Vec<Excluded>) -> Manifest {
        let mut probes = probes;
        for (i, p) in probes.iter_mut().enumerate() {
            p.id = i as u32;
        }
        Manifest {
            data_plane: Vec::new(),
            focus_ops: Vec::new(),
            schema: manifest::SCHEMA_ID.into(),
            kernel: KernelInfo {
                version: version.into(),
                config: ".config".into(),
            },
            vendor: "mlx5".into(),
            entries: vec!["ib_uverbs_write".into()],
            degraded: Vec::new(),
            probes,
            excluded,
            stats: Stats::default(),
        }
    }

    const QP_C: &str = "drivers/infiniband/hw/mlx5/qp.c";

    #[test]
    fn same_set_has_no_drift() {
        let m = manifest("6.12", vec![probe("a", "m", QP_C, "QP", "vendor")], vec![]);
        let d = drift(&m, &m, None);
        assert!(d.is_empty());
        assert!(check_markdown(&d, "x.yaml").unwrap().contains("No drift"));
    }

    #[test]
    fn classifies_every_kind_of_drift() {
        let mut sig = probe("sig", "mlx5_ib", QP_C, "QP", "vendor");
        let old = manifest(
            "6.1",
            vec![
                probe("old_name", "mlx5_ib", QP_C, "QP", "vendor"),
                probe(
                    "dropped",
                    "ib_core",
                    "drivers/infiniband/core/verbs.c",
                    "QP",
                    "core",
                ),
                probe(
                    "moved",
                    "ib_core",
                    "drivers/infiniband/core/a.c",
                    "MR",
                    "core",
                ),
                probe(
                    "wandered",
                    "ib_core",
                    "drivers/infiniband/core/b.c",
                    "MR",
                    "core",
                ),
                sig.clone(),
                probe(
                    "vanished",
                    "mlx5_ib",
                    "drivers/infiniband/hw/mlx5/mr.c",
                    "MR",
                    "vendor",
                ),
            ],
            vec![],
        );
        sig.nargs = 3;
        sig.attach = manifest::Attach::Inlined;
        let new = manifest(
            "6.12",
            vec![
                probe("new_name", "mlx5_ib", QP_C, "QP", "vendor"),
                probe(
                    "moved",
                    "ib_core",
                    "drivers/infiniband/core/c.c",
                    "MR",
                    "core",
                ),
                probe(
                    "wandered",
                    "ib_uverbs",
                    "drivers/infiniband/core/b.c",
                    "MR",
                    "core",
                ),
                sig,
                probe(
                    "fresh",
                    "ib_core",
                    "drivers/infiniband/core/verbs.c",
                    "CQ",
                    "core",
                ),
            ],
            vec![Excluded {
                function: "dropped".into(),
                module: "ib_core".into(),
                file: "drivers/infiniband/core/verbs.c".into(),
                line: 1,
                rule: manifest::Rule::parse("read-only").expect("rule"),
                evidence: "name says query".into(),
                path: vec![],
            }],
        );
        let defined = |f: &str| f == "vanished_but_defined";
        let d = drift(&old, &new, Some(&defined));
        assert_eq!(
            d.added
                .iter()
                .map(|p| p.function.as_str())
                .collect::<Vec<_>>(),
            ["fresh"]
        );
        let removed: Vec<(&str, &Fate)> = d
            .removed
            .iter()
            .map(|r| (r.probe.function.as_str(), &r.fate))
            .collect();
        assert_eq!(
            removed,
            [
                (
                    "dropped",
                    &Fate::Excluded {
                        rule: manifest::Rule::parse("read-only").expect("rule"),
                        evidence: "name says query".into()
                    }
                ),
                ("vanished", &Fate::Gone),
            ]
        );
        assert_eq!(d.renamed.len(), 1);
        assert_eq!(
            (
                d.renamed[0].from.function.as_str(),
                d.renamed[0].to.function.as_str()
            ),
            ("old_name", "new_name")
        );
        let changed: Vec<(&str, &str, &str, &str)> = d
            .changed
            .iter()
            .map(|c| {
                (
                    c.function.as_str(),
                    c.what.as_str(),
                    c.old.as_str(),
                    c.new.as_str(),
                )
            })
            .collect();
        assert_eq!(
            changed,
            [
                (
                    "moved",
                    "file",
                    "drivers/infiniband/core/a.c",
                    "drivers/infiniband/core/c.c"
                ),
                ("sig", "nargs", "2", "3"),
                ("sig", "attach", "fexit", "inlined"),
                ("wandered", "module", "ib_core", "ib_uverbs"),
            ]
        );
        let md = check_markdown(&d, "old.yaml").unwrap();
        assert!(md.contains("**Drift: 8 items to review**"), "{md}");
        assert!(md.contains("| `old_name` | `new_name` |"), "{md}");
        // Manifest-only: the vanished probe is absent, not known to be gone.
        let d = drift(&old, &new, None);
        assert!(d
            .removed
            .iter()
            .any(|r| r.probe.function == "vanished" && r.fate == Fate::Absent));
    }

    #[test]
    fn same_key_twice_pairs_by_file() {
        let a = probe("create_qp", "ib_core", "x.c", "QP", "core");
        let b = probe("create_qp", "ib_core", "y.c", "QP", "core");
        let old = manifest("1", vec![a.clone(), b.clone()], vec![]);
        let new = manifest("2", vec![b, a], vec![]);
        assert!(drift(&old, &new, None).is_empty());
    }
}
