//! Layer preservation on the real Debian trees of every checked-in set (`generated/sets.txt`:
//! 5.10 to 7.3): for every failure layer of the control path, each set keeps the function that
//! returns the error, or has a probe on its nearest attachable caller when the binary inlined
//! it. The layers are found in the call graph of each tree, not listed by name, so a kernel
//! that renames or splits a function (7.2: `ib_umem_get` -> `__ib_umem_get_va` behind five
//! wrappers; `.resize_cq` -> `.resize_user_cq`) is checked for what its code does.

// A test reads as one scenario from setup to assertions; the 80-line limit is for the code.
#![allow(clippy::too_many_lines)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use analyzer::DEFAULT_ENTRIES;
use analyzer::{CallGraph, EdgeKind, FnId};
use manifest::Manifest;

const VENDORS: &[&str] = &["mlx5", "bnxt_re", "irdma", "rxe"];

fn checked_in(ver: &str, vendor: &str) -> Manifest {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("generated/linux-{ver}/{vendor}/manifest.yaml"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run scripts/regenerate.sh)", path.display()));
    Manifest::from_yaml(&text, &path.display().to_string()).unwrap_or_else(|e| panic!("{e}"))
}

struct Tree<'b> {
    graph: CallGraph,
    rules: heuristics::Rules,
    binaries: &'b analyzer::Binaries,
}

/// The Debian binaries of `ver`, loaded once for its four vendors.
fn binaries(ver: &str) -> analyzer::Binaries {
    let dir = common::kernel_dir(ver);
    analyzer::Binaries::load(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .unwrap_or_else(|| {
            panic!(
                "{}: no vmlinux/modules (run scripts/fetch-kernel.sh {ver})",
                dir.display()
            )
        })
}

/// The tree as `generate --vendor` sees it: the core and that vendor's driver, parsed even
/// when the config does not build it (bnxt_re on 6.1).
fn tree<'b>(ver: &str, vendor: &str, binaries: &'b analyzer::Binaries) -> Tree<'b> {
    let rules = heuristics::Rules::builtin().expect("built-in rules");
    let dirs = rules.vendor(vendor).expect("vendor").dirs.clone();
    let dir = common::kernel_dir(ver);
    let t = common::load_with(
        &dir,
        &analyzer::LoadOptions {
            unbuilt_dirs: dirs.clone(),
            ..common::load_options()
        },
    );
    Tree {
        graph: CallGraph::build(&t, &rules.scope_of(&dirs)),
        rules,
        binaries,
    }
}

/// A probe of the set on `function`, or on its nearest attachable caller when the binary
/// inlined it (whether or not the selection kept the inlined function itself). Returns what
/// was found, for the failure message.
fn kept_or_caller(t: &Tree<'_>, m: &Manifest, function: &str) -> Result<String, String> {
    let Some(p) = m.probes.iter().find(|p| p.function == function) else {
        let g = &t.graph;
        let attachable = |f: FnId| {
            let n = g.node(f);
            t.binaries
                .verdict(n.module.as_deref(), &n.name)
                .is_attachable()
        };
        for &id in g.find(function) {
            let n = g.node(id);
            if attachable(id) || !n.built {
                continue;
            }
            let hops = t.rules.suggest_hops;
            if let Some((c, manifest::Relation::Caller)) =
                heuristics::nearest_attachable(g, id, hops, attachable)
            {
                let caller = &g.node(c).name;
                if m.probes.iter().any(|q| &q.function == caller) {
                    return Ok(format!("{function} (inlined) via probed caller {caller}"));
                }
            }
        }
        return Err(format!("{function} is not a probe"));
    };
    if p.attach.as_str() == "fexit"
        || p.attach.as_str() == "clone-only"
        || p.attach.as_str() == "not-built"
    {
        return Ok(format!("{function} ({})", p.attach));
    }
    // A module built without BTF (every module of 5.10): the set keeps the function, and only
    // a kprobe reaches it there; a probe's caller would be no-btf just the same.
    let module_without_btf = t.binaries.module(&p.module).is_some_and(|b| !b.has_btf());
    if p.attach.as_str() == "no-btf" && module_without_btf {
        return Ok(format!("{function} (no-btf: {} has no BTF)", p.module));
    }
    match &p.suggest {
        Some(s)
            if s.relation.as_str() == "caller"
                && m.probes.iter().any(|q| q.function == s.function) =>
        {
            Ok(format!(
                "{function} ({}) via caller {}",
                p.attach, s.function
            ))
        }
        other => Err(format!(
            "{function} is {} and its nearest attachable caller ({other:?}) is not a probe",
            p.attach
        )),
    }
}

/// Functions reachable from `from` in the vendor's part of the graph (the core and the
/// vendor's own directories).
fn reach_of(t: &Tree<'_>, vendor: &str, from: &[FnId]) -> BTreeSet<FnId> {
    let dirs = &t.rules.vendor(vendor).expect("vendor").dirs;
    let other_vendor = |f: FnId| {
        let file = &t.graph.node(f).file;
        t.rules.vendor_of_file(file).is_some() && !dirs.iter().any(|d| file.starts_with(d))
    };
    let mut seen: BTreeSet<FnId> = from.iter().copied().collect();
    let mut stack: Vec<FnId> = from.to_vec();
    while let Some(f) = stack.pop() {
        for (c, _) in t.graph.callees(f) {
            if !other_vendor(c) && seen.insert(c) {
                stack.push(c);
            }
        }
    }
    seen
}

fn handler(t: &Tree<'_>, name: &str) -> Vec<FnId> {
    t.graph.find(name).to_vec()
}

/// Every layer of one set: (layer, function) pairs that must be kept.
fn layers(t: &Tree<'_>, m: &Manifest, vendor: &str) -> Vec<(&'static str, String)> {
    let g = &t.graph;
    let mut out = Vec::new();
    // User-memory pinning: the functions below ibv_reg_mr's handler that call pin_user_pages*.
    let reg = reach_of(t, vendor, &handler(t, "ib_uverbs_reg_mr"));
    let pinning: BTreeSet<String> = reg
        .iter()
        .map(|&f| g.node(f))
        .filter(|n| {
            n.external_calls
                .iter()
                .any(|c| c.starts_with("pin_user_pages") || c.starts_with("get_user_pages"))
        })
        .map(|n| n.name.clone())
        .collect();
    assert!(
        !pinning.is_empty(),
        "{vendor}: no function below ib_uverbs_reg_mr pins user pages"
    );
    for f in pinning {
        out.push(("user-memory pinning", f));
    }
    // GID/AV resolution on the modify-QP path.
    let modify = reach_of(t, vendor, &handler(t, "ib_uverbs_modify_qp"));
    let fill = g.find("rdma_fill_sgid_attr");
    assert!(
        fill.iter().any(|f| modify.contains(f)),
        "{vendor}: rdma_fill_sgid_attr not below ib_uverbs_modify_qp"
    );
    out.push(("GID/AV resolution", "rdma_fill_sgid_attr".into()));
    // The QP state-transition check: ib_modify_qp_is_ok returns bool; the error comes from
    // the vendor function that calls it on the modify path.
    let is_ok = g.find("ib_modify_qp_is_ok");
    let checkers: BTreeSet<String> = modify
        .iter()
        .filter(|&&f| {
            g.callees(f).iter().any(|(c, _)| is_ok.contains(c))
                && t.rules.vendor_of_file(&g.node(f).file) == Some(vendor)
        })
        .map(|&f| g.node(f).name.clone())
        .collect();
    assert!(
        !checkers.is_empty(),
        "{vendor}: no vendor function on the modify path calls ib_modify_qp_is_ok"
    );
    for f in checkers {
        out.push(("QP state-transition check", f));
    }
    // The CQ resize path: the vendor's implementation of the resize member, whatever the
    // tree names it (resize_cq up to 6.x, resize_user_cq in 7.x).
    let focus_members: BTreeSet<&str> = m
        .focus_ops
        .iter()
        .filter(|f| f.derivation.as_str() != "excluded")
        .map(|f| f.member.as_str())
        .collect();
    let resize: Vec<&str> = focus_members
        .iter()
        .copied()
        .filter(|mem| mem.starts_with("resize"))
        .collect();
    assert_eq!(resize.len(), 1, "one resize member derived: {resize:?}");
    // (bnxt_re implements it from 6.2 on: a driver without it has no resize path to keep.)
    for f in implementations(t, vendor, resize[0]) {
        out.push(("CQ resize path", f));
    }
    // The CQ size check: rxe checks in a function of its own, the others inline it in their
    // create and resize implementations (covered above and by create_cq).
    for f in implementations(t, vendor, "create_cq") {
        out.push(("CQ size check", f));
    }
    // rxe up to 6.x checks in rxe_cq_chk_attr; 7.x moved the check into rxe_create_cq and
    // rxe_resize_cq (covered above).
    if vendor == "rxe" && !g.find("rxe_cq_chk_attr").is_empty() {
        out.push(("CQ size check", "rxe_cq_chk_attr".into()));
    }
    // The firmware-command issuers: vendor functions that call a hardware command directly,
    // below a create or modify of a QP (the path every vendor drives through firmware).
    let v = t.rules.vendor(vendor).expect("vendor");
    let create_qp = reach_of(t, vendor, &handler(t, "ib_uverbs_modify_qp"));
    let issuers: BTreeSet<String> = create_qp
        .iter()
        .filter(|&&f| t.rules.vendor_of_file(&g.node(f).file) == Some(vendor))
        .filter(|&&f| {
            let n = g.node(f);
            v.hardware_functions.contains(&n.name)
                || n.external_calls
                    .iter()
                    .any(|c| v.hardware_commands.contains(c))
                || g.callees(f)
                    .iter()
                    .any(|(c, _)| v.hardware_commands.contains(&g.node(*c).name))
        })
        .map(|&f| g.node(f).name.clone())
        .collect();
    assert!(
        !issuers.is_empty(),
        "{vendor}: no firmware-command issuer below ib_uverbs_modify_qp"
    );
    let kept_issuers = issuers
        .iter()
        .filter(|f| kept_or_caller(t, m, f).is_ok())
        .count();
    assert!(
        kept_issuers > 0,
        "{vendor}: none of the firmware-command issuers on the modify path is kept: {issuers:?}"
    );
    out
}

/// Vendor functions assigned to `member` in the vendor's ops tables.
fn implementations(t: &Tree<'_>, vendor: &str, member: &str) -> Vec<String> {
    let g = &t.graph;
    let mut out = BTreeSet::new();
    for id in 0..g.nodes().len() {
        let f: FnId = id;
        for (caller, e) in g.callers(f) {
            let _ = caller;
            if e.kind == EdgeKind::OpsTable
                && e.via.as_deref() == Some(member)
                && t.rules.vendor_of_file(&g.node(f).file) == Some(vendor)
            {
                out.insert(g.node(f).name.clone());
            }
        }
    }
    out.into_iter().collect()
}

#[test]
fn every_failure_layer_is_kept_on_every_kernel_and_vendor() {
    let mut failures = Vec::new();
    let mut table: BTreeMap<(String, String), usize> = BTreeMap::new();
    for ver in common::checked_in_kernels() {
        let bins = binaries(ver);
        let vendors = common::checked_in_sets()
            .iter()
            .filter(|(k, _)| *k == ver)
            .map(|(_, v)| *v);
        for vendor in vendors {
            let t = tree(ver, vendor, &bins);
            let entries: Vec<String> = DEFAULT_ENTRIES.iter().map(|s| s.to_string()).collect();
            t.graph.entries(&entries).expect("uverbs entries");
            let m = checked_in(ver, vendor);
            for (layer, function) in layers(&t, &m, vendor) {
                match kept_or_caller(&t, &m, &function) {
                    Ok(_) => {
                        *table
                            .entry((ver.to_string(), vendor.to_string()))
                            .or_default() += 1
                    }
                    Err(e) => failures.push(format!("{ver} {vendor} {layer}: {e}")),
                }
            }
        }
    }
    for ((ver, vendor), n) in &table {
        println!("{ver} {vendor}: {n} layer functions kept");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// 7.2 pins user memory in `__ib_umem_get_va`, five wrappers below the driver: the set keeps
/// it (the reg_mr EFAULT is the core's, not the driver's), and follows the renamed resize
/// member.
#[test]
fn seven_two_keeps_the_pinning_function_and_the_renamed_resize() {
    for vendor in VENDORS {
        let m = checked_in("7.2", vendor);
        let p = m
            .probes
            .iter()
            .find(|p| p.function == "__ib_umem_get_va")
            .unwrap_or_else(|| panic!("7.2 {vendor}: __ib_umem_get_va is not a probe"));
        assert_eq!(p.attach.as_str(), "fexit", "7.2 {vendor}");
        assert!(p.evidence.contains("pin_user_pages"), "{}", p.evidence);
        assert!(m.focus_ops.iter().any(|f| f.member == "resize_user_cq"));
        assert!(!m.focus_ops.iter().any(|f| f.member == "resize_cq"));
    }
}
