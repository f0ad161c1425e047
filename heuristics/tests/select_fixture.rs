//! The selection on the two-vendor fixture, with every vendor in the graph: the vendor gate
//! drops the other vendor, the ops implementations are kept with their member's object, and an
//! override wins with its reason.

use std::path::Path;

use analyzer::{CallGraph, VendorScope};
use analyzer::{LoadOptions, SourceTree};
use heuristics::{select, FocusKind, Rule, Rules};

fn graph() -> CallGraph {
    let root =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernel-fixtures/ops-table-two-vendors");
    let layout = Rules::builtin().expect("rules").source_layout();
    let tree = SourceTree::load(&root, &LoadOptions::new(layout)).expect("fixture loads");
    CallGraph::build(&tree, &VendorScope::default())
}

fn verdict<'a>(s: &'a heuristics::Selection, g: &CallGraph, name: &str) -> &'a heuristics::Verdict {
    let id = *g
        .find(name)
        .first()
        .unwrap_or_else(|| panic!("{name} in the fixture"));
    s.verdict_of(id)
        .unwrap_or_else(|| panic!("{name} reachable"))
}

#[test]
fn vendor_gate_ops_impl_and_objects() {
    let g = graph();
    let rules = Rules::builtin().expect("rules");
    let entries = g.entries(&["ib_uverbs_ioctl".to_string()]).expect("entry");
    let s = select(&g, &rules, vendor(&rules, "mlx5"), &entries).expect("select");

    let mlx5 = verdict(&s, &g, "mlx5_ib_create_qp");
    assert!(mlx5.keep);
    assert_eq!(
        (mlx5.rule, mlx5.focus),
        (Rule::Focus, Some(FocusKind::OpsImpl))
    );
    assert_eq!(mlx5.object, heuristics::Object::QP);
    assert!(
        mlx5.evidence.contains("ib_device_ops.create_qp"),
        "{}",
        mlx5.evidence
    );

    for other in ["bnxt_re_create_qp", "bnxt_re_alloc_pd"] {
        let v = verdict(&s, &g, other);
        assert!(!v.keep, "{other}");
        assert_eq!(v.rule, Rule::VendorGate, "{other}: {}", v.evidence);
    }
    // The core caller of ops.create_qp is kept on that evidence; every verdict has a path from
    // the entry.
    let core = verdict(&s, &g, "ib_create_qp_user");
    assert_eq!((core.keep, core.focus), (true, Some(FocusKind::OpsCaller)));
    assert!(s
        .verdicts
        .iter()
        .all(|v| g.node(v.path[0]).name == "ib_uverbs_ioctl"));

    // The same graph for bnxt_re: the gate turns around.
    let s = select(&g, &rules, vendor(&rules, "bnxt_re"), &entries).expect("select");
    assert!(verdict(&s, &g, "bnxt_re_create_qp").keep);
    assert_eq!(verdict(&s, &g, "mlx5_ib_create_qp").rule, Rule::VendorGate);
}

#[test]
fn overrides_win_with_their_reason() {
    let g = graph();
    let text = heuristics::BUILTIN_RULES.replace(
        "overrides:\n  include: []\n  exclude: []",
        "overrides:\n  include: []\n  exclude:\n    - {function: mlx5_ib_create_qp, reason: \"known noisy\"}",
    );
    let rules = Rules::parse(&text, "test-rules.yaml").expect("rules");
    let entries = g.entries(&["ib_uverbs_ioctl".to_string()]).expect("entry");
    let s = select(&g, &rules, vendor(&rules, "mlx5"), &entries).expect("select");
    let v = verdict(&s, &g, "mlx5_ib_create_qp");
    assert_eq!((v.keep, v.rule), (false, Rule::Override));
    assert!(v.evidence.contains("known noisy"));
    // a name is checked once, where it is looked up; the selection takes a looked-up vendor
    assert!(rules.vendor("nosuchvendor").is_none());
    assert_eq!(vendor(&rules, "mlx5").name, "mlx5");
}

/// The rules' vendor `name` (the selection takes a vendor already looked up).
fn vendor<'r>(rules: &'r Rules, name: &str) -> &'r heuristics::Vendor {
    rules
        .vendor(name)
        .unwrap_or_else(|| panic!("{name} in the rules"))
}
