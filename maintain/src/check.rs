//! `check`'s work beyond the manifest comparison ([`crate::compare`]): the rules drift against
//! the new tree, and the successor of a probe gone from the source.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use analyzer::{CallGraph, FnId};
use heuristics::Rules;
use manifest::{Manifest, ProbeSummary};

use crate::compare::{RulesDrift, RulesNames};
use crate::port::SetProbe;

/// The rules drift of `check`: what the rules and the checked-in set name that the new tree
/// lacks, with the nearest names it has.
/// `dir_exists` says whether a directory (relative to the source tree) exists.
pub fn rules_drift(
    g: &CallGraph,
    rules: &Rules,
    old: &Manifest,
    new: &Manifest,
    dir_exists: &dyn Fn(&str) -> bool,
) -> RulesDrift {
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
    let names = RulesNames {
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
    crate::compare::rules_drift(
        old,
        new,
        &ops_members,
        &names,
        &|f| pool.binary_search_by(|p| p.as_str().cmp(f)).is_ok(),
        &pool,
        dir_exists,
    )
}

/// The successor of a probe gone from the source: a new probe in the same file that its
/// former callers (the probes that called it in the checked-in set) now reach, doing the same
/// job: the innermost such probe that changes state (pins user pages, allocates) or commands
/// the hardware; else the innermost one. `ib_umem_get` -> `__ib_umem_get_va` on 7.x.
pub fn successor(
    g: &CallGraph,
    old: &Manifest,
    new: &Manifest,
    rules: &Rules,
    r: &ProbeSummary,
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
    let mut depth_of: BTreeMap<FnId, usize> = Default::default();
    let mut queue: VecDeque<(FnId, usize)> = callers
        .iter()
        .flat_map(|c| g.find(c).iter().map(|&id| (id, 0)))
        .collect();
    while let Some((f, d)) = queue.pop_front() {
        if d > rules.replacement_depth || depth_of.contains_key(&f) {
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
    let job = |id: FnId| -> Option<String> {
        let n = g.node(id);
        n.external_calls
            .iter()
            .find(|c| rules.is_state_changing_call(c) || hw.contains(c))
            .map(|c| format!("calls `{c}`"))
    };
    let mut candidates: Vec<(bool, usize, FnId)> = depth_of
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

/// A manifest's probes as `port` compares them.
pub fn set_of(m: &Manifest) -> Vec<SetProbe> {
    m.probes
        .iter()
        .map(|p| SetProbe {
            function: p.function.clone(),
            module: p.module.clone(),
            file: p.file.clone(),
            layer: p.layer,
            object: p.object,
            focus: p.focus,
        })
        .collect()
}
