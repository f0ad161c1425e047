//! Manifest against manifest: the drift `probegen check` reports after a kernel upgrade, and
//! the coverage diff `probegen diff` posts on a review. Pure: manifests in, data and markdown
//! out, deterministic.
//!
//! Probes are keyed by (module, function). A probe only in the old set is *removed*, with its
//! fate in the new one: excluded by a rule, no longer reachable, or gone from the source; a
//! removed probe gone from the source and a new probe in the same file, on the same object and
//! layer, are a *rename*; the same function in another module is a *module move*. Probes in
//! both sets are compared for argument count, return kind, attach verdict and file.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde::Serialize;

use manifest::{Attach, FocusKind, Layer, Manifest, Object, Probe, Rule};

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

/// The fields of a probe a reviewer needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProbeSummary {
    pub function: String,
    pub module: String,
    pub file: String,
    pub line: usize,
    pub layer: Layer,
    pub object: Object,
    pub rule: Rule,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub focus: Option<FocusKind>,
    pub attach: Attach,
}

impl From<&Probe> for ProbeSummary {
    fn from(p: &Probe) -> Self {
        Self {
            function: p.function.clone(),
            module: p.module.clone(),
            file: p.file.clone(),
            line: p.line,
            layer: p.layer,
            object: p.object,
            rule: p.rule,
            focus: p.focus,
            attach: p.attach,
        }
    }
}

impl ProbeSummary {
    /// `focus (ops-impl)`, `override`.
    pub fn rule_text(&self) -> String {
        match &self.focus {
            Some(f) => format!("{} ({f})", self.rule),
            None => self.rule.to_string(),
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
pub fn nearest_names(name: &str, pool: &[String]) -> Vec<String> {
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
pub fn rules_drift(
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
    }

    /// Items to review.
    pub fn len(&self) -> usize {
        self.added.len() + self.removed.len() + self.renamed.len() + self.changed.len()
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

/// Compare two probe sets. `defined` says whether a function is still defined in the new
/// source (`None` when only the manifests are known: removed probes absent from the new
/// manifest are then [`Fate::Absent`]).
pub fn drift(old: &Manifest, new: &Manifest, defined: Option<&dyn Fn(&str) -> bool>) -> Drift {
    let (og, ng) = (group(old), group(new));
    let keys: BTreeSet<&Key> = og.keys().chain(ng.keys()).collect();
    let mut changed = Vec::new();
    let mut removed_p: Vec<&Probe> = Vec::new();
    let mut added_p: Vec<&Probe> = Vec::new();
    for k in keys {
        let o = og.get(k).map_or(&[][..], Vec::as_slice);
        let n = ng.get(k).map_or(&[][..], Vec::as_slice);
        let (pairs, ro, an) = pair_same_key(o, n);
        for (a, b) in pairs {
            changed.extend(changes(a, b));
        }
        removed_p.extend(ro);
        added_p.extend(an);
    }

    // Module moves: the same function removed from one module and added in another.
    let mut i = 0;
    while i < removed_p.len() {
        let r = removed_p[i];
        if let Some(j) = added_p.iter().position(|a| a.function == r.function) {
            let a = added_p.remove(j);
            changed.extend(changes(r, a));
            removed_p.remove(i);
        } else {
            i += 1;
        }
    }

    let in_manifest = |m: &Manifest, f: &str| {
        m.probes.iter().any(|p| p.function == f) || m.excluded.iter().any(|e| e.function == f)
    };
    let fate_of = |p: &Probe| -> Fate {
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
    };

    // Renames: a removed probe gone from the source and a new function in the same file, on
    // the same object and layer; the most similar name wins, ties by name.
    let mut renamed = Vec::new();
    let mut removed = Vec::new();
    for r in removed_p {
        let fate = fate_of(r);
        if matches!(fate, Fate::Gone | Fate::Absent) {
            let best = added_p
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
                .map(|(j, _)| j);
            if let Some(j) = best {
                let a = added_p.remove(j);
                renamed.push(Renamed {
                    from: r.into(),
                    to: a.into(),
                    why: "same file, object and layer; most similar name".into(),
                });
                continue;
            }
        }
        removed.push(Removed {
            probe: r.into(),
            fate,
        });
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
    }
}

/// Markdown table cell: no pipes or newlines.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn count(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// Markdown sections shared by `check` and `diff`: added, removed, renamed, changed.
fn drift_sections(d: &Drift, out: &mut String) {
    if !d.file_moves.is_empty() {
        let _ = writeln!(out, "\n## Module moves ({})\n", d.file_moves.len());
        let _ = writeln!(out, "| file | old module | new module |");
        let _ = writeln!(out, "|---|---|---|");
        for m in &d.file_moves {
            let _ = writeln!(out, "| {} | {} | {} |", m.file, m.old_module, m.new_module);
        }
    }
    if !d.added.is_empty() {
        let _ = writeln!(out, "\n## Added probes ({})\n", d.added.len());
        let _ = writeln!(
            out,
            "| function | module | file | object | layer | rule | attach |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|");
        for p in &d.added {
            let _ = writeln!(
                out,
                "| `{}` | {} | {}:{} | {} | {} | {} | {} |",
                p.function,
                p.module,
                p.file,
                p.line,
                p.object,
                p.layer,
                p.rule_text(),
                p.attach
            );
        }
    }
    if !d.removed.is_empty() {
        let _ = writeln!(out, "\n## Removed probes ({})\n", d.removed.len());
        let _ = writeln!(out, "| function | module | file | was | now |");
        let _ = writeln!(out, "|---|---|---|---|---|");
        for r in &d.removed {
            let p = &r.probe;
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} | {} |",
                p.function,
                p.module,
                p.file,
                p.rule_text(),
                cell(&r.fate.text())
            );
        }
    }
    if !d.renamed.is_empty() {
        let _ = writeln!(out, "\n## Renamed targets ({})\n", d.renamed.len());
        let _ = writeln!(out, "| old | new | module | file | object | layer | why |");
        let _ = writeln!(out, "|---|---|---|---|---|---|---|");
        for r in &d.renamed {
            let _ = writeln!(
                out,
                "| `{}` | `{}` | {} | {} | {} | {} | {} |",
                r.from.function,
                r.to.function,
                r.to.module,
                r.to.file,
                r.to.object,
                r.to.layer,
                cell(&r.why)
            );
        }
    }
    if !d.changed.is_empty() {
        let _ = writeln!(out, "\n## Changed probes ({})\n", d.changed.len());
        let _ = writeln!(out, "| function | module | what | old | new |");
        let _ = writeln!(out, "|---|---|---|---|---|");
        for c in &d.changed {
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} | {} |",
                c.function,
                c.module,
                c.what.as_str(),
                cell(&c.old),
                cell(&c.new)
            );
        }
    }
}

/// The rules-drift section of `probegen check`.
pub fn rules_drift_markdown(r: &RulesDrift) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "\n## Rules drift\n");
    if r.is_empty() {
        let _ = writeln!(
            out,
            "None: every name the rules and the set's focus members rely on is in the new tree."
        );
        return out;
    }
    let (relied, upkeep): (Vec<&MissingName>, Vec<&MissingName>) =
        r.missing.iter().partition(|m| m.used_by_set);
    let gap = if relied.is_empty() { "" } else { "\n" };
    if !relied.is_empty() {
        let _ = writeln!(
            out,
            "Names the checked-in set relied on that the new tree lacks (the set changes):\n"
        );
        let _ = writeln!(out, "| kind | name | nearest in the new tree |");
        let _ = writeln!(out, "|---|---|---|");
        for m in relied {
            let cands = if m.candidates.is_empty() {
                "-".to_string()
            } else {
                m.candidates
                    .iter()
                    .map(|c| format!("`{c}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let _ = writeln!(out, "| {} | `{}` | {} |", m.kind, m.name, cands);
        }
    }
    if !upkeep.is_empty() {
        let _ = writeln!(
            out,
            "{gap}Rules names this tree lacks that the set did not use (rules upkeep): {}",
            upkeep
                .iter()
                .map(|m| format!("`{}` ({})", m.name, m.kind))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if !r.new_focus_members.is_empty() {
        let _ = writeln!(
            out,
            "\nFocus members new in this tree (derived from `struct ib_device_ops`): {}",
            r.new_focus_members
                .iter()
                .map(|m| format!("`{m}`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    out
}

/// The `probegen check` report.
pub fn check_markdown(d: &Drift, against: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# probegen check: {} set of {} against the {} source\n",
        d.old.vendor, d.old.kernel, d.new.kernel
    );
    let _ = writeln!(out, "Checked `{against}`.\n");
    if d.is_empty() {
        let _ = writeln!(
            out,
            "**No drift**: the regenerated set is the same probe for probe."
        );
        return out;
    }
    let _ = writeln!(
        out,
        "**Drift: {} to review** ({} added, {} removed, {} renamed, {} changed).",
        count(d.len(), "item"),
        d.added.len(),
        d.removed.len(),
        d.renamed.len(),
        d.changed.len()
    );
    drift_sections(d, &mut out);
    out
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

fn arrow(old: usize, new: usize) -> String {
    match new.cmp(&old) {
        std::cmp::Ordering::Equal => old.to_string(),
        std::cmp::Ordering::Greater => format!("{old} → {new} (+{})", new - old),
        std::cmp::Ordering::Less => format!("{old} → {new} (−{})", old - new),
    }
}

fn below_text(s: &VerbStatus) -> String {
    s.below.len().to_string()
}

pub fn diff_markdown(d: &CoverageDiff) -> String {
    let mut out = String::new();
    let dr = &d.drift;
    let _ = writeln!(
        out,
        "# Probe set diff: {} {} → {} {}\n",
        dr.old.vendor, dr.old.kernel, dr.new.vendor, dr.new.kernel
    );
    let _ = writeln!(
        out,
        "{} (was {}): {} added, {} removed, {} renamed, {} changed.",
        count(d.probes.new, "probe"),
        d.probes.old,
        dr.added.len(),
        dr.removed.len(),
        dr.renamed.len(),
        dr.changed.len()
    );
    drift_sections(dr, &mut out);

    let _ = writeln!(out, "\n## Coverage by object and layer\n");
    let _ = writeln!(out, "| object | core | vendor | total |");
    let _ = writeln!(out, "|---|---|---|---|");
    let mut objects: Vec<Object> = Vec::new();
    for o in &d.objects {
        if !objects.contains(&o.object) {
            objects.push(o.object);
        }
    }
    for obj in objects {
        let get = |layer: Option<Layer>| {
            d.objects
                .iter()
                .filter(|o| o.object == obj && layer.is_none_or(|l| o.layer == l))
                .fold((0, 0), |(a, b), o| (a + o.old, b + o.new))
        };
        let (c, v, t) = (get(Some(Layer::Core)), get(Some(Layer::Vendor)), get(None));
        let _ = writeln!(
            out,
            "| {obj} | {} | {} | {} |",
            arrow(c.0, c.1),
            arrow(v.0, v.1),
            arrow(t.0, t.1)
        );
    }

    let _ = writeln!(out, "\n## Userspace verbs\n");
    let _ = writeln!(
        out,
        "The handler each verb lands in (rdma-core 44's command or method, the kernel's \
         handler for it) and the probes below it.\n"
    );
    let _ = writeln!(out, "| verb | via | handler | old | new | probes below |");
    let _ = writeln!(out, "|---|---|---|---|---|---|");
    for v in &d.verbs {
        let handler = v
            .new
            .handler
            .as_deref()
            .or(v.old.handler.as_deref())
            .map_or_else(|| "—".to_string(), |h| format!("`{h}`"));
        let mark = |s: &VerbStatus| {
            let m = if s.covered { "✅" } else { "❌" };
            format!("{m} {}", s.verdict.short())
        };
        let _ = writeln!(
            out,
            "| `{}` | {} `{}` | {} | {} | {} | {} |",
            v.verb,
            v.new.transport.as_str(),
            v.new.id,
            handler,
            mark(&v.old),
            mark(&v.new),
            if v.old.below == v.new.below {
                below_text(&v.new)
            } else {
                format!("{} → {}", below_text(&v.old), below_text(&v.new))
            }
        );
    }
    let changed: Vec<&VerbDiff> = d
        .verbs
        .iter()
        .filter(|v| v.old.below != v.new.below)
        .collect();
    if !changed.is_empty() {
        let _ = writeln!(out, "\nProbes below a handler that changed:\n");
        for v in changed {
            let o: BTreeSet<&String> = v.old.below.iter().collect();
            let n: BTreeSet<&String> = v.new.below.iter().collect();
            let plus: Vec<String> = n.difference(&o).map(|s| format!("+{s}")).collect();
            let minus: Vec<String> = o.difference(&n).map(|s| format!("−{s}")).collect();
            let _ = writeln!(
                out,
                "- `{}`: {}",
                v.verb,
                minus.into_iter().chain(plus).collect::<Vec<_>>().join(", ")
            );
        }
    }
    out
}

#[cfg(test)]
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
        assert!(check_markdown(&d, "x.yaml").contains("No drift"));
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
        let md = check_markdown(&d, "old.yaml");
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
