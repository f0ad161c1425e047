//! The maintenance workflows (`check`, `port`, `diff`, `coverage`) on a small two-vendor tree
//! built from the `ops-table-two-vendors` fixture, on the CSV fixtures in
//! `kernel-fixtures/failures/`, and their bad-input handling. The real-kernel runs are in
//! `tests/maintain_real.rs`.

// A test reads as one scenario from setup to assertions; the 80-line limit is for the code.
#![allow(clippy::too_many_lines)]

mod common;

use common::{append, probegen, stderr, stdout, write};

use std::path::{Path, PathBuf};

use manifest::Manifest;

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// The two-vendor fixture with both uverbs entries, a CQ verb only mlx5 implements (through a
/// firmware command), and a bnxt_re firmware command.
fn two_vendor_tree(tag: &str) -> PathBuf {
    let dir = common::temp_dir(tag);
    common::copy_dir(&common::fixture("ops-table-two-vendors"), &dir);
    let core = dir.join("drivers/infiniband/core");
    append(
        &core.join("uverbs_main.c"),
        "\nlong ib_uverbs_write(struct file *filp, const char *buf, unsigned long count,\n\
         \t\t     long long *pos)\n{\n\
         \treturn ib_create_cq_user(filp->private_data, filp->attr, NULL);\n}\n",
    );
    append(
        &core.join("verbs.c"),
        "\nint ib_create_cq_user(struct ib_device *dev, struct ib_cq_init_attr *attr,\n\
         \t\t      struct ib_udata *udata)\n{\n\
         \treturn dev->ops.create_cq(dev->cq, attr, udata);\n}\n",
    );
    append(
        &dir.join("drivers/infiniband/hw/mlx5/qp.c"),
        "\nstatic int mlx5_fw_create_cq(struct ib_cq *cq)\n{\n\
         \treturn mlx5_cmd_exec(cq->mdev, cq, 16, cq, 16);\n}\n\n\
         int mlx5_ib_create_cq(struct ib_cq *cq, const struct ib_cq_init_attr *attr,\n\
         \t\t      struct ib_udata *udata)\n{\n\
         \treturn mlx5_fw_create_cq(cq);\n}\n\n\
         static const struct ib_device_ops mlx5_ib_dev_cq_ops = {\n\
         \t.create_cq = mlx5_ib_create_cq,\n};\n",
    );
    write(
        &dir.join("drivers/infiniband/hw/bnxt_re/ib_verbs.c"),
        "// SPDX-License-Identifier: MIT\n\
         int bnxt_re_create_qp(struct ib_qp *ib_qp, struct ib_qp_init_attr *qp_init_attr,\n\
         \t\t      struct ib_udata *udata)\n{\n\
         \treturn bnxt_qplib_create_qp(ib_qp);\n}\n\n\
         int bnxt_qplib_create_qp(struct ib_qp *ib_qp)\n{\n\
         \treturn bnxt_qplib_rcfw_send_message(ib_qp->rcfw, ib_qp);\n}\n\n\
         int bnxt_re_alloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)\n{\n\
         \treturn ibpd ? 0 : -12;\n}\n",
    );
    dir
}

fn generate(tree: &Path, vendor: &str, out: &Path) -> Manifest {
    let o = probegen(&[
        "generate",
        "--kernel-src",
        &s(tree),
        "--vendor",
        vendor,
        "--out",
        &s(out),
    ]);
    assert_eq!(o.status.code(), Some(0), "generate: {}", stderr(&o));
    let path = out.join("manifest.yaml");
    let text = std::fs::read_to_string(&path).expect("read manifest");
    Manifest::from_yaml(&text, &s(&path)).expect("parse manifest")
}

#[test]
fn port_maps_ops_members_and_lists_the_rest() {
    let tree = two_vendor_tree("port");
    let src = s(&tree);
    let args = [
        "port",
        "--kernel-src",
        &src,
        "--from",
        "mlx5",
        "--to",
        "bnxt_re",
    ];
    let o = probegen(&[&args[..], &["--format", "json"]].concat());
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("JSON");
    assert_eq!(
        v["mappings"],
        serde_json::json!([
            {"member": "alloc_pd", "from": "mlx5_ib_alloc_pd", "to": "bnxt_re_alloc_pd", "to_in_set": true},
            {"member": "create_qp", "from": "mlx5_ib_create_qp", "to": "bnxt_re_create_qp", "to_in_set": true},
        ])
    );
    assert_eq!(
        v["unmapped"],
        serde_json::json!([
            {"from": "mlx5_ib_create_cq", "module": "mlx5_ib", "object": "CQ", "focus": "ops-impl",
             "reason": "member-not-implemented", "member": "create_cq",
             "candidates": ["bnxt_qplib_create_qp"]},
            {"from": "mlx5_fw_create_cq", "module": "mlx5_ib", "object": "CQ", "focus": "hardware",
             "reason": "vendor-internal", "candidates": ["bnxt_qplib_create_qp"]},
        ])
    );
    let core: Vec<&str> = v["core"]
        .as_array()
        .expect("core array")
        .iter()
        .filter_map(|c| c["function"].as_str())
        .collect();
    assert_eq!(
        core,
        ["ib_alloc_pd_user", "ib_create_cq_user", "ib_create_qp_user"]
    );
    // bnxt_re has no create_cq: its set does not reach ib_create_cq_user's driver side, but the
    // core function is reachable and kept for both.
    assert!(v["core"].as_array().is_some_and(|c| c
        .iter()
        .all(|x| x["in_target_set"] == serde_json::json!(true))));

    let o = probegen(&args);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    insta::assert_snapshot!(stdout(&o), @r"
    # Porting the mlx5 probe set to bnxt_re

    2 mapping(s) through `ib_device_ops`, 1 member(s) bnxt_re does not implement, 1 vendor-internal probe(s) without a counterpart, 3 core probe(s) shared.

    ## Mapped through ib_device_ops

    | member | mlx5 | bnxt_re | in the bnxt_re set |
    |---|---|---|---|
    | `.alloc_pd` | `mlx5_ib_alloc_pd` | `bnxt_re_alloc_pd` | yes |
    | `.create_qp` | `mlx5_ib_create_qp` | `bnxt_re_create_qp` | yes |

    ## Members bnxt_re does not implement

    - `.create_cq` (`mlx5_ib_create_cq`)

    ## Vendor-internal probes without a counterpart

    | mlx5 | object | kept as | bnxt_re candidates |
    |---|---|---|---|
    | `mlx5_fw_create_cq` | CQ | hardware | `bnxt_qplib_create_qp` |

    ## Core probes, shared as they are

    - `ib_alloc_pd_user` (ib_core)
    - `ib_create_cq_user` (ib_core)
    - `ib_create_qp_user` (ib_core)
    ");
}

#[test]
fn check_exits_0_on_its_own_set_and_1_on_each_kind_of_drift() {
    let tree = two_vendor_tree("check");
    let out = tree.join("out");
    let m = generate(&tree, "mlx5", &out);
    let against = out.join("manifest.yaml");
    let src = s(&tree);
    let o = probegen(&["check", "--kernel-src", &src, "--against", &s(&against)]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("**No drift**"), "{}", stdout(&o));

    // An older set: a probe under another name, one with a different signature and attach
    // verdict, one in another file, one the new source no longer has.
    let mut old = m.clone();
    for p in &mut old.probes {
        match p.function.as_str() {
            "mlx5_fw_create_cq" => p.function = "mlx5_create_cq_cmd".into(),
            "mlx5_ib_create_qp" => {
                p.nargs = 2;
                p.attach = manifest::Attach::Inlined;
            }
            "ib_create_qp_user" => p.file = "drivers/infiniband/core/core_verbs.c".into(),
            _ => {}
        }
    }
    let mut gone = old.probes[0].clone();
    gone.function = "ib_old_verb".into();
    // Ids are unique in a manifest (check refuses duplicates).
    gone.id = old.probes.iter().map(|p| p.id).max().unwrap_or(0) + 1;
    gone.calls.clear();
    gone.file = "drivers/infiniband/core/old.c".into();
    old.probes.push(gone);
    old.probes.retain(|p| p.function != "ib_create_cq_user");
    old.kernel.version = "6.0.1".into();
    let old_path = tree.join("old.yaml");
    write(&old_path, &old.to_yaml().expect("yaml"));
    let o = probegen(&["check", "--kernel-src", &src, "--against", &s(&old_path)]);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    let md = stdout(&o).replace(&s(&old_path), "OLD");
    insta::assert_snapshot!(md, @r"
    # probegen check: mlx5 set of 6.0.1 against the unknown source

    Checked `OLD`.

    **Drift: 6 items to review** (1 added, 1 removed, 1 renamed, 3 changed).

    ## Added probes (1)

    | function | module | file | object | layer | rule | attach |
    |---|---|---|---|---|---|---|
    | `ib_create_cq_user` | ib_core | drivers/infiniband/core/verbs.c:31 | CQ | core | focus (ops-caller) | fexit |

    ## Removed probes (1)

    | function | module | file | was | now |
    |---|---|---|---|---|
    | `ib_old_verb` | ib_core | drivers/infiniband/core/old.c | focus (ops-caller) | gone from the source |

    ## Renamed targets (1)

    | old | new | module | file | object | layer | why |
    |---|---|---|---|---|---|---|
    | `mlx5_create_cq_cmd` | `mlx5_fw_create_cq` | mlx5_ib | drivers/infiniband/hw/mlx5/qp.c | CQ | vendor | successor: former caller `mlx5_ib_create_cq` reaches it in drivers/infiniband/hw/mlx5/qp.c (1 call down); calls `mlx5_cmd_exec` |

    ## Changed probes (3)

    | function | module | what | old | new |
    |---|---|---|---|---|
    | `ib_create_qp_user` | ib_core | file | drivers/infiniband/core/core_verbs.c | drivers/infiniband/core/verbs.c |
    | `mlx5_ib_create_qp` | mlx5_ib | nargs | 2 | 3 |
    | `mlx5_ib_create_qp` | mlx5_ib | attach | inlined | fexit |

    ## Rules drift

    Rules names this tree lacks that the set did not use (rules upkeep): `attach_mcast` (focus-override), `iw_get_qp` (focus-override), `mlx5_cmd_do` (hardware-command), `mlx5_cmd_exec_cb` (hardware-command), `mlx5_core_access_reg` (hardware-command), `mlx5_core_alloc_pd` (hardware-command), `mlx5_core_create_cq` (hardware-command), `mlx5_core_create_mkey` (hardware-command), `mlx5_core_create_psv` (hardware-command), `mlx5_core_create_rq` (hardware-command), `mlx5_core_create_tis` (hardware-command), `mlx5_core_modify_cq` (hardware-command), `mlx5_core_modify_rq` (hardware-command), `mlx5_core_modify_sq` (hardware-command), `mlx5_core_modify_tis` (hardware-command), `include/linux/mlx5/` (vendor-dir)
    ");

    let o = probegen(&[
        "check",
        "--kernel-src",
        &src,
        "--vendor",
        "mlx5",
        "--against",
        &s(&old_path),
        "--format",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("JSON");
    assert_eq!(v["drift"], true);
    assert_eq!(v["removed"][0]["now"], "gone");
    assert_eq!(v["renamed"][0]["to"]["function"], "mlx5_fw_create_cq");
    assert_eq!(v["changed"].as_array().map(Vec::len), Some(3));

    // diff of the same two manifests: the same probe changes, and coverage per object x layer.
    let o = probegen(&["diff", &s(&old_path), &s(&against), "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let d: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("JSON");
    assert_eq!(d["added"], v["added"]);
    // The same renames; check also says why (the successor it found through the graph).
    let pairs = |x: &serde_json::Value| -> Vec<(serde_json::Value, serde_json::Value)> {
        x.as_array()
            .map(|a| {
                a.iter()
                    .map(|r| (r["from"].clone(), r["to"].clone()))
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(pairs(&d["renamed"]), pairs(&v["renamed"]));
    assert_eq!(pairs(&d["renamed"]).len(), 1);
    // Manifests alone cannot tell a function gone from the source from an unreachable one.
    assert_eq!(d["removed"][0]["now"], "absent");
    assert_eq!(
        d["probes"],
        serde_json::json!({"old": m.probes.len(), "new": m.probes.len()})
    );
    let cq_core = d["objects"]
        .as_array()
        .and_then(|a| {
            a.iter()
                .find(|o| o["object"] == "CQ" && o["layer"] == "core")
        })
        .cloned();
    assert_eq!(
        cq_core,
        Some(serde_json::json!({"object": "CQ", "layer": "core", "old": 0, "new": 1}))
    );
}

fn real_manifest() -> String {
    s(&Path::new(env!("CARGO_MANIFEST_DIR")).join("generated/linux-6.12/mlx5/manifest.yaml"))
}

fn failures(name: &str) -> String {
    s(&common::fixture("failures").join(name))
}

#[test]
fn coverage_rejects_malformed_rows_naming_their_lines() {
    let csv = failures("malformed.csv");
    let o = probegen(&[
        "coverage",
        "--manifest",
        &real_manifest(),
        "--failures",
        &csv,
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    assert!(stdout(&o).is_empty());
    let err = stderr(&o).replace(&csv, "CSV");
    insta::assert_snapshot!(err, @r"
    probegen: CSV:3: expected 3 fields `verb,errno,weight`, found 2
    probegen: CSV:4: errno `not-an-errno`: expected a number (-22) or a name (EINVAL)
    probegen: CSV:5: weight `lots`: expected a non-negative number
    probegen: CSV: 3 malformed row(s); fix them or pass --lenient to skip them
    ");
}

#[test]
fn coverage_lenient_skips_malformed_rows_and_reports_them() {
    let csv = failures("malformed.csv");
    let o = probegen(&[
        "coverage",
        "--manifest",
        &real_manifest(),
        "--failures",
        &csv,
        "--lenient",
        "--format",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stderr(&o).lines().count(), 3, "{}", stderr(&o));
    assert!(stderr(&o).contains(&format!("{csv}:5: weight `lots`")));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("JSON");
    let lines: Vec<u64> = v["skipped"]
        .as_array()
        .expect("skipped")
        .iter()
        .filter_map(|x| x["line"].as_u64())
        .collect();
    assert_eq!(lines, [3, 4, 5]);
    // ibv_create_qp (5, probed) and ibv_query_port (2, read-only) remain.
    assert_eq!(v["rows"], 2);
    assert_eq!(v["covered_share"], 0.714286);
    assert_eq!(v["uncovered"], serde_json::json!({"read-only": 0.285714}));
    assert_eq!(v["unknown_verbs"], serde_json::json!([]));
}

/// Bad input: exit 2 and exactly one line on stderr, naming the file (and line when there is
/// one) and what was expected.
#[test]
fn bad_input_is_one_line_naming_the_file_and_exit_2() {
    let dir = common::temp_dir("maintain-bad");
    let bad_yaml = dir.join("bad.yaml");
    write(
        &bad_yaml,
        "schema: probegen/v1\nkernel: {version: x, config: y}\nvendor: mlx5\nentries: []\n\
         probes:\n- id: zero\n",
    );
    let other_schema = dir.join("v0.yaml");
    write(
        &other_schema,
        &std::fs::read_to_string(real_manifest())
            .expect("read manifest")
            .replacen("schema: probegen/v1", "schema: probegen/v0", 1),
    );
    let missing = s(&dir.join("missing.yaml"));
    let empty_csv = dir.join("empty.csv");
    write(&empty_csv, "# nothing yet\nverb,errno,weight\n");
    let real = real_manifest();
    let csv = failures("table2.csv");
    let fixture = s(&common::fixture("ops-table-two-vendors"));
    let cases: Vec<(Vec<String>, Vec<String>)> = vec![
        (
            vec!["diff".into(), missing.clone(), real.clone()],
            vec![format!("{missing}: No such file")],
        ),
        (
            vec!["diff".into(), s(&bad_yaml), real.clone()],
            vec![
                format!("{}:6:7: probes[0].id", s(&bad_yaml)),
                "expected u32".into(),
            ],
        ),
        (
            vec!["diff".into(), real.clone(), s(&other_schema)],
            vec![format!(
                "{}: schema `probegen/v0`: expected `probegen/v1`",
                s(&other_schema)
            )],
        ),
        (
            vec!["diff".into(), csv.clone(), real.clone()],
            vec![
                format!("{csv}:5:1: invalid type"),
                "expected struct Manifest".into(),
            ],
        ),
        (
            vec![
                "coverage".into(),
                "--manifest".into(),
                real.clone(),
                "--failures".into(),
                missing.clone(),
            ],
            vec![format!("{missing}: No such file")],
        ),
        (
            vec![
                "coverage".into(),
                "--manifest".into(),
                real.clone(),
                "--failures".into(),
                s(&empty_csv),
            ],
            vec![format!(
                "{}: no failure rows: expected lines `verb,errno,weight`",
                s(&empty_csv)
            )],
        ),
        (
            vec![
                "check".into(),
                "--kernel-src".into(),
                fixture.clone(),
                "--vendor".into(),
                "bnxt_re".into(),
                "--against".into(),
                real.clone(),
            ],
            vec![format!(
                "--vendor bnxt_re, but {real} is the mlx5 probe set: expected --vendor mlx5"
            )],
        ),
        (
            vec![
                "check".into(),
                "--kernel-src".into(),
                s(&dir.join("no-tree")),
                "--against".into(),
                real.clone(),
            ],
            vec!["no-tree".into(), "expected".into()],
        ),
        (
            vec![
                "port".into(),
                "--kernel-src".into(),
                fixture.clone(),
                "--from".into(),
                "mlx5".into(),
                "--to".into(),
                "nope".into(),
            ],
            vec!["unknown --to `nope`: known vendors are".into()],
        ),
        (
            vec![
                "port".into(),
                "--kernel-src".into(),
                fixture.clone(),
                "--from".into(),
                "mlx5".into(),
                "--to".into(),
                "mlx5".into(),
            ],
            vec!["--from and --to are both `mlx5`: expected two different vendors".into()],
        ),
    ];
    for (args, needles) in cases {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = probegen(&a);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{a:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{a:?}: not one line: {err}");
        assert!(err.starts_with("probegen: "), "{a:?}: {err}");
        for n in needles {
            assert!(err.contains(&n), "{a:?}: `{n}` not in: {err}");
        }
    }
}

/// `port` selects through the pipeline's selection, so its two sets are the sets `generate`
/// writes for those vendors (a second path could disagree: no inlined-wrapper handling, no
/// facts cache).
#[test]
fn port_sets_are_the_sets_generate_writes() {
    let tree = two_vendor_tree("port-sets");
    let out = common::temp_dir("port-sets-out");
    let opts = pipeline::PortOptions {
        kernel_src: tree.clone(),
        from: "mlx5".into(),
        to: "bnxt_re".into(),
        ..Default::default()
    };
    let (from, to) = pipeline::port_sets(&opts, &mut |_| {}).expect("port sets");
    assert_eq!(from, generate(&tree, "mlx5", &out.join("mlx5")));
    assert_eq!(to, generate(&tree, "bnxt_re", &out.join("bnxt_re")));
}
