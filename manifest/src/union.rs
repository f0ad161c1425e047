//! One set for a host with two vendor drivers: the union of their sets of one kernel.
//!
//! Why: one collector runs one object, and a host with a NIC and Soft-RoCE (or two NIC
//! vendors) should have both drivers watched with the verbs core probed once. The core
//! probes of two vendors' sets are the same functions (a core function is selected the same
//! way whichever driver sits below; a vendor's ops can add a few), so the union keeps each
//! `(module, function)` once, renumbers the ids in order (the first set's probes, then the
//! second's new ones) and joins the call edges of a probe both sets have. Pure data: the
//! caller renders the BPF C from the result as from any manifest.

use std::collections::{BTreeMap, BTreeSet};

use crate::types::{Manifest, Probe, Stats};

/// The union of `sets` (two or more vendors' manifests of one kernel), or why they cannot be
/// joined (another kernel or schema, a vendor twice).
pub fn union(sets: &[&Manifest]) -> Result<Manifest, crate::ManifestError> {
    join(sets).map_err(crate::ManifestError::Union)
}

fn join(sets: &[&Manifest]) -> Result<Manifest, String> {
    let (first, rest) = sets
        .split_first()
        .ok_or("union of no set: expected two or more")?;
    if rest.is_empty() {
        return Err("union of one set: expected two or more".into());
    }
    let mut vendors = BTreeSet::new();
    for m in sets {
        if m.kernel.version != first.kernel.version || m.schema != first.schema {
            return Err(format!(
                "{} set of kernel {} ({}) and {} set of kernel {} ({}): expected one kernel and schema",
                first.vendor, first.kernel.version, first.schema, m.vendor, m.kernel.version, m.schema
            ));
        }
        if !vendors.insert(m.vendor.as_str()) {
            return Err(format!(
                "vendor {} twice: expected distinct vendors",
                m.vendor
            ));
        }
    }
    let probes = union_probes(sets);
    let in_union: BTreeSet<(&str, &str)> = probes
        .iter()
        .map(|p| (p.module.as_str(), p.function.as_str()))
        .collect();
    let mut out = Manifest {
        schema: first.schema.clone(),
        kernel: first.kernel.clone(),
        vendor: vendors.into_iter().collect::<Vec<_>>().join("+"),
        entries: sorted_union(sets.iter().flat_map(|m| m.entries.iter().cloned())),
        degraded: Vec::new(),
        focus_ops: Vec::new(),
        probes: Vec::new(),
        // a function one vendor's gate excluded may be the other vendor's probe
        excluded: Vec::new(),
        data_plane: Vec::new(),
        stats: Stats::default(),
    };
    for m in sets {
        for d in &m.degraded {
            if !out.degraded.contains(d) {
                out.degraded.push(d.clone());
            }
        }
        for f in &m.focus_ops {
            if !out.focus_ops.iter().any(|o| o.member == f.member) {
                out.focus_ops.push(f.clone());
            }
        }
        for e in &m.excluded {
            let key = (e.module.as_str(), e.function.as_str());
            let seen = out
                .excluded
                .iter()
                .any(|o| (o.module.as_str(), o.function.as_str()) == key);
            if !in_union.contains(&key) && !seen {
                out.excluded.push(e.clone());
            }
        }
    }
    out.data_plane = union_data_plane(sets, probes.len() as u32);
    out.probes = probes;
    out.stats = stats(&out, sets);
    Ok(out)
}

/// Each data-plane `(module, function)` once (the core's event callbacks are in every
/// vendor's set), ids after the union's probes.
fn union_data_plane(sets: &[&Manifest], first_id: u32) -> Vec<crate::types::DataPlaneProbe> {
    let mut out: Vec<crate::types::DataPlaneProbe> = Vec::new();
    for d in sets.iter().flat_map(|m| &m.data_plane) {
        if !out
            .iter()
            .any(|o| o.module == d.module && o.function == d.function)
        {
            let mut d = d.clone();
            d.id = first_id + out.len() as u32;
            out.push(d);
        }
    }
    out
}

fn sorted_union(items: impl Iterator<Item = String>) -> Vec<String> {
    items.collect::<BTreeSet<_>>().into_iter().collect()
}

/// Each `(module, function)` once, ids renumbered in order, call edges mapped and joined.
fn union_probes(sets: &[&Manifest]) -> Vec<Probe> {
    let mut out: Vec<Probe> = Vec::new();
    let mut at: BTreeMap<(String, String), usize> = BTreeMap::new();
    // per set: old id -> new id
    let mut renumber: Vec<BTreeMap<u32, u32>> = Vec::new();
    for m in sets {
        let mut map = BTreeMap::new();
        for p in &m.probes {
            let key = (p.module.clone(), p.function.clone());
            let i = *at.entry(key).or_insert_with(|| {
                let mut q = p.clone();
                q.calls.clear();
                q.id = out.len() as u32;
                out.push(q);
                out.len() - 1
            });
            map.insert(p.id, i as u32);
        }
        renumber.push(map);
    }
    let mut sites_mapped = vec![false; out.len()];
    for (m, map) in sets.iter().zip(&renumber) {
        for p in &m.probes {
            let Some(&me) = map.get(&p.id) else { continue };
            let q = &mut out[me as usize];
            q.calls.extend(p.calls.iter().filter_map(|c| map.get(c)));
            q.calls.sort_unstable();
            q.calls.dedup();
            // the error sites came with the first set's copy: its probe ids, mapped once
            if !std::mem::replace(&mut sites_mapped[me as usize], true) {
                for site in q.error_sites.iter_mut().flatten() {
                    site.callee_probe = site.callee_probe.and_then(|c| map.get(&c).copied());
                }
            }
        }
    }
    out
}

/// The union's counts; `reachable` is the largest of the sets' (the functions the entries
/// reach through either driver overlap in the core, so a sum would count those twice).
fn stats(m: &Manifest, sets: &[&Manifest]) -> Stats {
    let mut s = Stats {
        reachable: sets.iter().map(|m| m.stats.reachable).max().unwrap_or(0),
        probes: m.probes.len(),
        attachable: m.attachable().count(),
        ..Stats::default()
    };
    for p in &m.probes {
        match p.layer {
            crate::Layer::Core => s.core += 1,
            crate::Layer::Vendor => s.vendor += 1,
        }
        *s.attach.entry(p.attach).or_default() += 1;
    }
    for e in &m.excluded {
        *s.excluded.entry(e.rule).or_default() += 1;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(path: &str) -> Manifest {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../generated/");
        let text = std::fs::read_to_string(format!("{dir}{path}/manifest.yaml")).expect(path);
        Manifest::from_yaml(&text, path).expect(path)
    }

    /// The checked-in 6.12 mlx5 and rxe sets: every probe of each is in the union once, the
    /// core ones shared, each probe's call edges point at the same functions as before.
    #[test]
    fn two_vendors_share_their_core_probes() {
        let (mlx5, rxe) = (set("linux-6.12/mlx5"), set("linux-6.12/rxe"));
        let u = union(&[&mlx5, &rxe]).expect("union");
        assert_eq!(u.vendor, "mlx5+rxe");
        crate::validate(&u, "union").expect("a valid manifest");
        let keys = |m: &Manifest| -> BTreeSet<(String, String)> {
            m.probes
                .iter()
                .map(|p| (p.module.clone(), p.function.clone()))
                .collect()
        };
        let both: BTreeSet<_> = keys(&mlx5).intersection(&keys(&rxe)).cloned().collect();
        assert!(both.len() >= 30, "shared core probes: {}", both.len());
        assert_eq!(
            u.probes.len(),
            mlx5.probes.len() + rxe.probes.len() - both.len()
        );
        assert_eq!(keys(&u), keys(&mlx5).union(&keys(&rxe)).cloned().collect());
        let name = |m: &Manifest, id: u32| {
            let p = &m.probes[id as usize];
            (p.module.clone(), p.function.clone())
        };
        for m in [&mlx5, &rxe] {
            for p in &m.probes {
                let q = u
                    .probes
                    .iter()
                    .find(|q| (q.module.as_str(), q.function.as_str()) == (&p.module, &p.function))
                    .expect("in the union");
                for c in &p.calls {
                    let callee = name(m, *c);
                    assert!(
                        q.calls.iter().any(|d| name(&u, *d) == callee),
                        "{}: call to {callee:?} kept",
                        p.function
                    );
                }
            }
        }
        // a propagated site names the same callee probe by function as in its own set
        for q in &u.probes {
            let src = [&mlx5, &rxe].into_iter().find_map(|m| {
                m.probes
                    .iter()
                    .find(|p| (&p.module, &p.function) == (&q.module, &q.function))
                    .map(|p| (m, p))
            });
            let (m, p) = src.expect("from a set");
            for (a, b) in q
                .error_sites
                .iter()
                .flatten()
                .zip(p.error_sites.iter().flatten())
            {
                assert_eq!(
                    a.callee_probe.map(|c| name(&u, c)),
                    b.callee_probe.map(|c| name(m, c)),
                    "{}",
                    q.function
                );
            }
        }
        assert_eq!(u.stats.probes, u.probes.len());
        assert_eq!(u.stats.core + u.stats.vendor, u.probes.len());
        // the same input gives the same union
        assert_eq!(union(&[&mlx5, &rxe]).ok(), Some(u));
    }

    #[test]
    fn sets_that_cannot_be_joined_are_named() {
        let (a, b) = (set("linux-6.12/mlx5"), set("linux-6.1/rxe"));
        let e = union(&[&a, &b]).unwrap_err().to_string();
        assert!(e.contains("expected one kernel"), "{e}");
        assert!(union(&[&a, &a])
            .unwrap_err()
            .to_string()
            .contains("vendor mlx5 twice"));
        assert!(union(&[&a]).is_err());
    }
}
