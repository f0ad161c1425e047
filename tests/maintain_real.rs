//! The maintenance workflows on the real Debian 6.12 and 6.1 sources and binaries, and on the
//! checked-in probe sets. They fail, never skip, when a tree is missing
//! (`common::kernel_dir`). Run with `--nocapture` to see the reports.

// A test reads as one scenario from setup to assertions; the 80-line limit is for the code.
#![allow(clippy::too_many_lines)]

mod common;

use common::{probegen, stderr, stdout};

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Output;

use analyzer::CallGraph;
use maintain::Transport;
use manifest::Manifest;
use serde_json::{json, Value};

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

fn checked_in(ver: &str, vendor: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("generated")
        .join(format!("linux-{ver}"))
        .join(vendor)
        .join("manifest.yaml")
}

fn read(path: &Path) -> Manifest {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Manifest::from_yaml(&text, &s(path)).expect("parse manifest")
}

/// A set generated now from the real tree (once per test process); its manifest path.
fn fresh(ver: &str, vendor: &str) -> PathBuf {
    common::generated_set(ver, vendor).join("manifest.yaml")
}

fn json_of(o: &Output) -> Value {
    serde_json::from_str(&stdout(o))
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}{}", stdout(o), stderr(o)))
}

fn functions(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x["function"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn check_6_1_mlx5_set_against_the_6_12_source_reports_the_drift() {
    let k612 = s(&common::kernel_dir("6.12"));
    let against = s(&checked_in("6.1", "mlx5"));
    let o = probegen(&[
        "check",
        "--kernel-src",
        &k612,
        "--vendor",
        "mlx5",
        "--against",
        &against,
    ]);
    println!("{}", stdout(&o));
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let md = stdout(&o);
    assert!(
        md.starts_with("# probegen check: mlx5 set of 6.1.192 against the 6.12.118 source"),
        "{md}"
    );
    assert!(md.contains("**Drift: "), "{md}");

    let o = probegen(&[
        "check",
        "--kernel-src",
        &k612,
        "--against",
        &against,
        "--format",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v = json_of(&o);
    assert_eq!(v["drift"], true);
    assert_eq!(v["old"], json!({"kernel": "6.1.192", "vendor": "mlx5"}));
    assert_eq!(v["new"], json!({"kernel": "6.12.118", "vendor": "mlx5"}));

    // What the binaries say changed between the two Debian kernels: gcc inlined
    // create_raw_packet_qp_tir into its caller in 6.12, and stopped inlining
    // create_rss_raw_qp_tir.
    let changed: BTreeSet<(String, String, String, String)> = v["changed"]
        .as_array()
        .expect("changed")
        .iter()
        .map(|c| {
            let f = |k: &str| c[k].as_str().unwrap_or_default().to_string();
            (f("function"), f("what"), f("old"), f("new"))
        })
        .collect();
    for want in [
        ("create_raw_packet_qp_tir", "attach", "fexit", "inlined"),
        ("create_rss_raw_qp_tir", "attach", "inlined", "fexit"),
    ] {
        let want = (
            want.0.to_string(),
            want.1.to_string(),
            want.2.to_string(),
            want.3.to_string(),
        );
        assert!(changed.contains(&want), "{want:?} not in {changed:?}");
    }
    // 6.1's trampolines take at most 6 arguments: the 7-argument MR ops become attachable in
    // 6.12.
    assert!(
        changed.contains(&(
            "mlx5_ib_rereg_user_mr".to_string(),
            "attach".to_string(),
            "too-many-args".to_string(),
            "fexit".to_string()
        )),
        "{changed:?}"
    );
    // alloc_implicit_mr_null_mkey: the implicit-ODP null mkey, new in 6.12's odp.c.
    let added = functions(&v["added"]);
    assert!(
        added.iter().any(|a| a == "alloc_implicit_mr_null_mkey"),
        "alloc_implicit_mr_null_mkey not added: {added:?}"
    );

    // The report is the comparison of the checked-in 6.1 set with the set generated now from
    // 6.12: same additions, same removals, same changes.
    let now = read(&fresh("6.12", "mlx5"));
    let old = read(&checked_in("6.1", "mlx5"));
    let pure = maintain::drift(&old, &now, None);
    assert_eq!(
        added,
        pure.added
            .iter()
            .map(|p| p.function.clone())
            .collect::<Vec<_>>()
    );
    assert_eq!(
        functions(&v["removed"]),
        pure.removed
            .iter()
            .map(|r| r.probe.function.clone())
            .collect::<Vec<_>>()
    );
    assert_eq!(
        v["changed"],
        serde_json::to_value(&pure.changed).expect("json")
    );
    // Every removed probe says what became of it.
    for r in v["removed"].as_array().expect("removed") {
        assert!(
            ["excluded", "unreachable", "gone"].contains(&r["now"].as_str().unwrap_or("")),
            "{r}"
        );
    }
}

#[test]
fn check_6_12_against_its_checked_in_set_exits_0() {
    let k612 = s(&common::kernel_dir("6.12"));
    let against = s(&checked_in("6.12", "mlx5"));
    let o = probegen(&["check", "--kernel-src", &k612, "--against", &against]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "generated/linux-6.12/mlx5 is stale (scripts/regenerate.sh):\n{}{}",
        stdout(&o),
        stderr(&o)
    );
}

#[test]
fn check_6_12_against_itself_exits_0() {
    for vendor in ["mlx5", "rxe"] {
        let k612 = s(&common::kernel_dir("6.12"));
        let against = s(&fresh("6.12", vendor));
        let o = probegen(&["check", "--kernel-src", &k612, "--against", &against]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{vendor}: {}{}",
            stdout(&o),
            stderr(&o)
        );
        assert!(stdout(&o).contains("**No drift**"), "{}", stdout(&o));
        let o = probegen(&[
            "check",
            "--kernel-src",
            &k612,
            "--against",
            &against,
            "--format",
            "json",
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let v = json_of(&o);
        assert_eq!(v["drift"], false);
        for k in ["added", "removed", "renamed", "changed"] {
            assert_eq!(v[k], json!([]), "{vendor}: {k}");
        }
    }
}

fn port(to: &str) -> Value {
    let k612 = s(&common::kernel_dir("6.12"));
    let o = probegen(&[
        "port",
        "--kernel-src",
        &k612,
        "--from",
        "mlx5",
        "--to",
        to,
        "--format",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let md = probegen(&["port", "--kernel-src", &k612, "--from", "mlx5", "--to", to]);
    println!("{}", stdout(&md));
    json_of(&o)
}

fn mappings(v: &Value) -> BTreeSet<(String, String, String)> {
    v["mappings"]
        .as_array()
        .expect("mappings")
        .iter()
        .map(|m| {
            let f = |k: &str| m[k].as_str().unwrap_or_default().to_string();
            (f("member"), f("from"), f("to"))
        })
        .collect()
}

fn has(set: &BTreeSet<(String, String, String)>, m: &str, from: &str, to: &str) -> bool {
    set.contains(&(m.to_string(), from.to_string(), to.to_string()))
}

/// `port`'s two sets are the sets `generate` writes for those vendors (one selection path).
#[test]
fn port_sets_on_6_12_are_the_sets_generate_writes() {
    let opts = pipeline::PortOptions {
        kernel_src: common::kernel_dir("6.12"),
        from: "mlx5".into(),
        to: "bnxt_re".into(),
        ..Default::default()
    };
    let (from, to) = pipeline::port_sets(&opts, &mut |_| {}).expect("port sets");
    assert_eq!(from, read(&fresh("6.12", "mlx5")));
    assert_eq!(to, read(&fresh("6.12", "bnxt_re")));
}

#[test]
fn port_mlx5_to_bnxt_re_on_6_12() {
    let v = port("bnxt_re");
    assert_eq!(
        (v["from"].as_str(), v["to"].as_str()),
        (Some("mlx5"), Some("bnxt_re"))
    );
    let m = mappings(&v);
    for (member, from, to) in [
        ("create_qp", "mlx5_ib_create_qp", "bnxt_re_create_qp"),
        ("modify_qp", "mlx5_ib_modify_qp", "bnxt_re_modify_qp"),
        ("alloc_pd", "mlx5_ib_alloc_pd", "bnxt_re_alloc_pd"),
        ("create_cq", "mlx5_ib_create_cq", "bnxt_re_create_cq"),
        ("resize_cq", "mlx5_ib_resize_cq", "bnxt_re_resize_cq"),
        ("reg_user_mr", "mlx5_ib_reg_user_mr", "bnxt_re_reg_user_mr"),
        (
            "reg_user_mr_dmabuf",
            "mlx5_ib_reg_user_mr_dmabuf",
            "bnxt_re_reg_user_mr_dmabuf",
        ),
    ] {
        assert!(
            has(&m, member, from, to),
            "{member}: {from} -> {to} not in {m:?}"
        );
    }
    // One target per member: bnxt_re registers one ops table.
    let members: BTreeSet<&String> = m.iter().map(|x| &x.0).collect();
    assert_eq!(members.len(), m.len(), "{m:?}");
    let unmapped = v["unmapped"].as_array().expect("unmapped");
    let not_impl: BTreeSet<&str> = unmapped
        .iter()
        .filter(|u| u["reason"] == "member-not-implemented")
        .filter_map(|u| u["member"].as_str())
        .collect();
    // bnxt_re (main.c, bnxt_re_dev_ops) has no rereg_user_mr, modify_cq or reg_dm_mr.
    for member in ["rereg_user_mr", "modify_cq", "reg_dm_mr"] {
        assert!(not_impl.contains(member), "{member} not in {not_impl:?}");
    }
    // mlx5's firmware-command issuers have no counterpart; bnxt_re's own issuers are offered.
    let qpc = unmapped
        .iter()
        .find(|u| u["from"] == "mlx5_qpc_create_qp")
        .expect("mlx5_qpc_create_qp unmapped");
    assert_eq!(qpc["reason"], "vendor-internal");
    let cands: Vec<&str> = qpc["candidates"]
        .as_array()
        .expect("candidates")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(cands.contains(&"bnxt_qplib_create_qp"), "{cands:?}");
    assert!(
        cands.iter().all(|c| c.starts_with("bnxt_qplib_")),
        "{cands:?}"
    );
    // Core probes are shared as they are.
    let core = functions(&v["core"]);
    for f in [
        "ib_uverbs_create_qp",
        "ib_uverbs_modify_qp",
        "_ib_modify_qp",
        "ib_uverbs_reg_mr",
    ] {
        assert!(core.iter().any(|c| c == f), "{f} not in core {core:?}");
    }
    assert!(core.iter().all(|c| !c.starts_with("mlx5")), "{core:?}");
}

#[test]
fn port_mlx5_to_irdma_maps_modify_qp_twice() {
    let v = port("irdma");
    let m = mappings(&v);
    // irdma registers .modify_qp in irdma_iw_dev_ops and irdma_roce_dev_ops.
    assert!(
        has(&m, "modify_qp", "mlx5_ib_modify_qp", "irdma_modify_qp"),
        "{m:?}"
    );
    assert!(
        has(&m, "modify_qp", "mlx5_ib_modify_qp", "irdma_modify_qp_roce"),
        "{m:?}"
    );
    assert!(
        has(&m, "create_qp", "mlx5_ib_create_qp", "irdma_create_qp"),
        "{m:?}"
    );
    assert!(
        has(
            &m,
            "rereg_user_mr",
            "mlx5_ib_rereg_user_mr",
            "irdma_rereg_user_mr"
        ),
        "{m:?}"
    );
    let mr = v["unmapped"]
        .as_array()
        .expect("unmapped")
        .iter()
        .find(|u| u["from"] == "mlx5_ib_create_mkey")
        .expect("mlx5_ib_create_mkey unmapped");
    // An MR firmware command: irdma's MR registration command is the candidate.
    assert_eq!(mr["candidates"], json!(["irdma_hwreg_mr"]));
}

/// The verb -> handler map recovered from a manifest is the kernel's own, read from the
/// DECLARE_UVERBS_WRITE and DECLARE_UVERBS_NAMED_METHOD tables.
#[test]
fn verb_routes_from_manifests_match_the_kernel_tables() {
    let rules = heuristics::Rules::builtin().expect("rules");
    let dirs = rules.vendor("mlx5").expect("mlx5").dirs.clone();
    for ver in ["6.12", "6.1"] {
        let tree = common::load(&common::kernel_dir(ver));
        let g = CallGraph::build(&tree, &rules.scope_of(&dirs));
        let from_graph = maintain::routes(&g);
        let from_manifest = maintain::routes_in_manifest(&read(&fresh(ver, "mlx5")));
        assert_eq!(from_graph, from_manifest, "{ver}");
        let handler = |verb: &str| {
            from_graph
                .iter()
                .find(|r| r.verb == verb)
                .map(|r| (r.transport, r.handler.clone().unwrap_or_default()))
        };
        let want = [
            (
                "ibv_create_qp",
                Transport::Ioctl,
                "ib_uverbs_handler_UVERBS_METHOD_QP_CREATE",
            ),
            ("ibv_modify_qp", Transport::Write, "ib_uverbs_modify_qp"),
            ("ibv_reg_mr", Transport::Write, "ib_uverbs_reg_mr"),
            (
                "ibv_reg_dmabuf_mr",
                Transport::Ioctl,
                "ib_uverbs_handler_UVERBS_METHOD_REG_DMABUF_MR",
            ),
            ("ibv_alloc_pd", Transport::Write, "ib_uverbs_alloc_pd"),
            (
                "ibv_dealloc_pd",
                Transport::Ioctl,
                "uverbs_destroy_def_handler",
            ),
            (
                "ibv_create_cq",
                Transport::Ioctl,
                "ib_uverbs_handler_UVERBS_METHOD_CQ_CREATE",
            ),
            (
                "ibv_destroy_qp",
                Transport::Ioctl,
                "ib_uverbs_handler_UVERBS_METHOD_QP_DESTROY",
            ),
            (
                "ibv_query_gid",
                Transport::Ioctl,
                "ib_uverbs_handler_UVERBS_METHOD_QUERY_GID_ENTRY",
            ),
            (
                "ibv_query_port",
                Transport::Ioctl,
                "ib_uverbs_handler_UVERBS_METHOD_QUERY_PORT",
            ),
        ];
        for (verb, t, h) in want {
            assert_eq!(handler(verb), Some((t, h.to_string())), "{ver} {verb}");
        }
        // Every verb of the table has a handler in both kernels.
        let missing: Vec<&str> = from_graph
            .iter()
            .filter(|r| r.handler.is_none())
            .map(|r| r.verb.as_str())
            .collect();
        assert!(missing.is_empty(), "{ver}: no handler for {missing:?}");
    }
}

fn verb<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["verbs"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["verb"] == name))
        .unwrap_or_else(|| panic!("{name} not in the diff"))
}

#[test]
fn diff_6_1_to_6_12_mlx5() {
    let old = checked_in("6.1", "mlx5");
    let new = fresh("6.12", "mlx5");
    let md = probegen(&["diff", &s(&old), &s(&new)]);
    assert_eq!(md.status.code(), Some(0), "{}", stderr(&md));
    println!("{}", stdout(&md));
    for section in [
        "# Probe set diff: mlx5 6.1.192 → mlx5 6.12.118",
        "## Coverage by object and layer",
        "## Userspace verbs",
        "| `ibv_create_qp` | ioctl `UVERBS_METHOD_QP_CREATE` | `ib_uverbs_handler_UVERBS_METHOD_QP_CREATE` | ✅",
    ] {
        assert!(stdout(&md).contains(section), "`{section}` missing");
    }
    let o = probegen(&["diff", &s(&old), &s(&new), "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json_of(&o);
    let (om, nm) = (read(&old), read(&new));
    assert_eq!(
        v["probes"],
        json!({"old": om.probes.len(), "new": nm.probes.len()})
    );
    // object x layer: the counts add up to each set's probes and match its stats.
    for (k, m) in [("old", &om), ("new", &nm)] {
        let rows = v["objects"].as_array().expect("objects");
        let sum: u64 = rows.iter().filter_map(|r| r[k].as_u64()).sum();
        assert_eq!(sum as usize, m.probes.len(), "{k}");
        let core: u64 = rows
            .iter()
            .filter(|r| r["layer"] == "core")
            .filter_map(|r| r[k].as_u64())
            .sum();
        assert_eq!(core as usize, m.stats.core, "{k}");
    }
    // Added and removed: exactly the keys present in one set only, each with its rule.
    let keys = |m: &Manifest| -> BTreeSet<(String, String)> {
        m.probes
            .iter()
            .map(|p| (p.module.clone(), p.function.clone()))
            .collect()
    };
    let (ok, nk) = (keys(&om), keys(&nm));
    let names = |x: &Value| -> BTreeSet<(String, String)> {
        x.as_array()
            .map(|a| {
                a.iter()
                    .map(|p| {
                        let p = if p.get("probe").is_some() {
                            &p["probe"]
                        } else {
                            p
                        };
                        (
                            p["module"].as_str().unwrap_or_default().to_string(),
                            p["function"].as_str().unwrap_or_default().to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let renamed_to: BTreeSet<(String, String)> = v["renamed"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|r| {
                    (
                        r["to"]["module"].as_str().unwrap_or_default().to_string(),
                        r["to"]["function"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let moved: BTreeSet<(String, String)> = v["changed"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|c| c["what"] == "module")
                .map(|c| {
                    (
                        c["module"].as_str().unwrap_or_default().to_string(),
                        c["function"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let added: BTreeSet<_> = names(&v["added"])
        .union(&renamed_to)
        .chain(moved.iter())
        .cloned()
        .collect();
    assert_eq!(added, nk.difference(&ok).cloned().collect::<BTreeSet<_>>());
    for p in v["added"].as_array().expect("added") {
        assert!(p["rule"].is_string(), "{p}");
    }
    for r in v["removed"].as_array().expect("removed") {
        assert!(r["rule"].is_string() && r["now"].is_string(), "{r}");
    }

    // Per verb: the handler, whether it is probed, and the probes below it.
    let qp = verb(&v, "ibv_create_qp");
    assert_eq!(qp["new"]["transport"], "ioctl");
    assert_eq!(qp["new"]["id"], "UVERBS_METHOD_QP_CREATE");
    for side in ["old", "new"] {
        assert_eq!(qp[side]["covered"], true, "{side}");
        let below = qp[side]["below"].as_array().expect("below");
        assert!(
            below.iter().any(|b| b == "mlx5_ib_create_qp (mlx5_ib)"),
            "{side}: {below:?}"
        );
    }
    for (name, id, handler) in [
        (
            "ibv_modify_qp",
            "IB_USER_VERBS_CMD_MODIFY_QP",
            "ib_uverbs_modify_qp",
        ),
        ("ibv_reg_mr", "IB_USER_VERBS_CMD_REG_MR", "ib_uverbs_reg_mr"),
    ] {
        let x = verb(&v, name);
        assert_eq!(
            (
                &x["new"]["transport"],
                &x["new"]["id"],
                &x["new"]["handler"]
            ),
            (&json!("write"), &json!(id), &json!(handler)),
            "{name}"
        );
        assert_eq!(x["new"]["covered"], true, "{name}");
    }
    for (name, rule) in [
        ("ibv_dealloc_pd", "cleanup"),
        ("ibv_destroy_qp", "cleanup"),
        ("ibv_query_port", "read-only"),
        ("ibv_query_gid", "read-only"),
    ] {
        let x = verb(&v, name);
        assert_eq!(x["new"]["covered"], false, "{name}");
        assert_eq!(x["new"]["verdict"], "excluded", "{name}");
        assert_eq!(x["new"]["rule"], rule, "{name}");
    }
    assert_eq!(
        verb(&v, "ibv_dealloc_pd")["new"]["handler"],
        "uverbs_destroy_def_handler"
    );
}

/// The failure log in the shape of the paper's Table 2 against the checked-in 6.12 mlx5 set.
#[test]
fn coverage_of_the_table2_log_on_the_6_12_mlx5_set() {
    let manifest = s(&checked_in("6.12", "mlx5"));
    let csv = s(&common::fixture("failures").join("table2.csv"));
    let o = probegen(&["coverage", "--manifest", &manifest, "--failures", &csv]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    println!("{}", stdout(&o));
    assert!(stdout(&o).contains("**73.0% covered**"), "{}", stdout(&o));
    let o = probegen(&[
        "coverage",
        "--manifest",
        &manifest,
        "--failures",
        &csv,
        "--format",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json_of(&o);
    assert_eq!(v["covered_share"], 0.73);
    assert_eq!(
        v["uncovered"],
        json!({"cleanup": 0.21, "read-only": 0.03, "not-focus": 0.02})
    );
    assert_eq!(v["unknown_verbs"], json!(["ibv_frobnicate_qp"]));
    assert_eq!(v["unknown_share"], 0.01);
    assert_eq!(v["rows"], 18);
    assert_eq!(v["total_weight"], 100.0);
}

/// A log with the data plane (NCCL's completion errors by status, async events) against the
/// 6.12 sets: Soft-RoCE's completions pass the kernel (rxe_cq_post sees every status), mlx5's
/// do not (the provider writes them: `nic-only`); the async events are the verbs core's on both.
#[test]
fn coverage_of_a_data_plane_log_on_the_6_12_rxe_and_mlx5_sets() {
    let csv = s(&common::fixture("failures").join("nccl-dataplane.csv"));
    let report = |vendor: &str| {
        let manifest = s(&checked_in("6.12", vendor));
        let o = probegen(&[
            "coverage",
            "--manifest",
            &manifest,
            "--failures",
            &csv,
            "--format",
            "json",
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        json_of(&o)
    };
    let rxe = report("rxe");
    println!("rxe: {rxe}");
    assert_eq!(rxe["data_plane_share"], 0.7);
    assert_eq!(rxe["data_plane_covered_share"], 0.7);
    assert_eq!(rxe["covered_share"], 1.0);
    let retry = rxe["verbs"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["verb"] == "ibv_poll_cq: IB_WC_RETRY_EXC_ERR")
        .expect("the retry row");
    assert_eq!(
        (&retry["rule"], &retry["handler"]),
        (&json!("data-plane"), &json!("rxe_cq_post"))
    );
    let mlx5 = report("mlx5");
    println!("mlx5: {mlx5}");
    assert_eq!(mlx5["data_plane_share"], 0.7);
    // only the two async events pass mlx5's kernel side
    assert_eq!(mlx5["data_plane_covered_share"], 0.1);
    assert_eq!(mlx5["uncovered"]["nic-only"], 0.6);
    assert_eq!(mlx5["covered_share"], 0.4);
    let md = stdout(&probegen(&[
        "coverage",
        "--manifest",
        &s(&checked_in("6.12", "mlx5")),
        "--failures",
        &csv,
    ]));
    assert!(
        md.contains("The data plane (`ibv_poll_cq` statuses, `ibv_get_async_event` events) is 70.0% of the log; 10.0% is covered"),
        "{md}"
    );
}
