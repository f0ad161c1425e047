//! The `probegen` binary: output shapes and exit codes, on the small fixtures.

mod common;

use common::{probegen, stderr, stdout};

use std::process::Output;

use common::fixture;

fn fixture_arg(name: &str) -> String {
    fixture(name).to_string_lossy().into_owned()
}

#[test]
fn graph_json_has_integer_counts() {
    let src = fixture_arg("write-table-trampoline");
    let o = probegen(&["graph", "--kernel-src", &src, "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("stdout is JSON");
    for key in ["files", "functions", "edges", "reachable"] {
        assert!(v[key].is_u64(), "`{key}` is not an integer: {}", v[key]);
    }
    // The fixture: 7 files, 9 functions, everything reachable from the two entries.
    assert_eq!(v["files"], 7);
    assert_eq!(v["functions"], 9);
    assert_eq!(v["reachable"], 9);
    assert_eq!(v["write_commands"], 3);
    assert_eq!(v["edges_by_kind"]["write-command"], 6);
    assert_eq!(
        v["edges"].as_u64(),
        Some(
            v["edges_by_kind"]
                .as_object()
                .expect("edges_by_kind object")
                .values()
                .map(|n| n.as_u64().expect("integer"))
                .sum()
        )
    );
    assert_eq!(
        v["entries"],
        serde_json::json!(["ib_uverbs_ioctl", "ib_uverbs_write"])
    );
    assert_eq!(v["reachable_by_module"]["ib_core"], 1);

    // Text output of the same run names the counts too.
    let o = probegen(&["graph", "--kernel-src", &src]);
    assert_eq!(o.status.code(), Some(0));
    let text = stdout(&o);
    assert!(text.contains("functions   9"), "{text}");
    assert!(text.contains("reachable   9 from ib_uverbs_ioctl, ib_uverbs_write"));
}

#[test]
fn graph_with_entry_and_vendor() {
    let src = fixture_arg("ops-table-two-vendors");
    let o = probegen(&[
        "graph",
        "--kernel-src",
        &src,
        "--entry",
        "ib_uverbs_ioctl",
        "--vendor",
        "bnxt_re",
        "--format",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("JSON");
    assert_eq!(v["vendor"], "bnxt_re");
    assert_eq!(v["functions"], 10);
    assert_eq!(v["ops_tables"], 1);
    assert!(v["reachable_by_module"].get("mlx5_ib").is_none(), "{v}");
    assert!(v["reachable_by_module"]["bnxt_re"].as_u64() >= Some(2));
}

/// Exactly one non-empty line on stderr, starting with `probegen:`.
fn one_error_line(o: &Output) -> String {
    let err = stderr(o);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "stderr: {err}");
    assert!(lines[0].starts_with("probegen: "), "{err}");
    lines[0].to_string()
}

#[test]
fn missing_kernel_src_is_exit_2_with_one_line() {
    let missing = fixture("no-such-tree");
    let o = probegen(&["graph", "--kernel-src", &missing.to_string_lossy()]);
    assert_eq!(o.status.code(), Some(2));
    let line = one_error_line(&o);
    assert!(line.contains("no-such-tree"), "{line}");
    assert!(stdout(&o).is_empty());
    // A directory that is not a kernel tree, for `path` as well.
    let o = probegen(&[
        "path",
        "--kernel-src",
        &fixture("").to_string_lossy(),
        "--from",
        "a",
        "--to",
        "b",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(one_error_line(&o).contains("drivers/infiniband/core"));
}

#[test]
fn unknown_vendor_is_exit_2() {
    let src = fixture_arg("write-table-trampoline");
    let o = probegen(&["graph", "--kernel-src", &src, "--vendor", "nosuchnic"]);
    assert_eq!(o.status.code(), Some(2));
    let line = one_error_line(&o);
    assert!(
        line.contains("nosuchnic") && line.contains("mlx5"),
        "{line}"
    );
}

#[test]
fn unknown_entry_is_exit_2() {
    let src = fixture_arg("write-table-trampoline");
    let o = probegen(&["graph", "--kernel-src", &src, "--entry", "no_such_fn"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(one_error_line(&o).contains("no_such_fn"));
    let o = probegen(&[
        "path",
        "--kernel-src",
        &src,
        "--from",
        "no_such_fn",
        "--to",
        "ib_uverbs_alloc_pd",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(one_error_line(&o).contains("no_such_fn"));
}

#[test]
fn path_without_a_path_is_exit_1() {
    // Handlers do not call back into the entry.
    let src = fixture_arg("write-table-trampoline");
    let o = probegen(&[
        "path",
        "--kernel-src",
        &src,
        "--from",
        "ib_uverbs_alloc_pd",
        "--to",
        "ib_uverbs_ioctl",
    ]);
    assert_eq!(o.status.code(), Some(1), "stderr: {}", stderr(&o));
    assert!(stdout(&o).contains("no path"), "{}", stdout(&o));
}

#[test]
fn path_prints_edge_kinds_and_call_sites() {
    let src = fixture_arg("kconfig-stub");
    let o = probegen(&[
        "path",
        "--kernel-src",
        &src,
        "--from",
        "ib_uverbs_modify_qp",
        "--to",
        "mlx5_ib_modify_qp",
    ]);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 6, "{out}");
    assert!(lines[0]
        .starts_with("ib_uverbs_modify_qp (ib_uverbs) drivers/infiniband/core/uverbs_cmd.c:"));
    let root = fixture("kconfig-stub");
    let stub_call = common::line_of(
        &root,
        "drivers/infiniband/core/verbs.c",
        "ret = ib_security_modify_qp(",
    );
    let ops_call = common::line_of(
        &root,
        "drivers/infiniband/core/core_priv.h",
        "ops.modify_qp(",
    );
    assert!(
        lines[4].contains(&format!(
            "-> ib_security_modify_qp (inline) [inline at drivers/infiniband/core/verbs.c:{stub_call}]"
        )),
        "{out}"
    );
    assert!(
        lines[5].contains(&format!(
            "-> mlx5_ib_modify_qp (mlx5_ib) [ops-table modify_qp at drivers/infiniband/core/core_priv.h:{ops_call}]"
        )),
        "{out}"
    );
    for l in &lines[1..] {
        assert!(l.trim_start().starts_with("-> "), "{l}");
        assert!(l.contains(" at drivers/infiniband/"), "{l}");
    }

    // --kconfig switches the stub for security.c.
    let on = root.join("security-on.config");
    let o = probegen(&[
        "path",
        "--kernel-src",
        &src,
        "--kconfig",
        &on.to_string_lossy(),
        "--from",
        "ib_uverbs_modify_qp",
        "--to",
        "mlx5_ib_modify_qp",
    ]);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains(
            "-> ib_security_modify_qp (ib_core) [direct at drivers/infiniband/core/verbs.c:"
        ),
        "{out}"
    );
    assert!(
        out.contains("[ops-table modify_qp at drivers/infiniband/core/security.c:"),
        "{out}"
    );
}

#[test]
fn graph_warnings_flag_prints_file_line() {
    let src = fixture_arg("bad-input");
    let o = probegen(&[
        "graph",
        "--kernel-src",
        &src,
        "--entry",
        "ib_uverbs_ioctl",
        "--warnings",
    ]);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    let err = stderr(&o);
    let line = common::line_of(
        &fixture("bad-input"),
        "drivers/infiniband/core/broken.c",
        "return x * ;",
    );
    assert!(
        err.lines().any(|l| l.starts_with(&format!(
            "warning: drivers/infiniband/core/broken.c:{line}: "
        ))),
        "{err}"
    );
}
