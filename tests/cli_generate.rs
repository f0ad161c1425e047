//! `probegen generate` as a user runs it: overrides, bad rules files, and a snapshot of the
//! manifest and report of the two-vendor fixture.

mod common;

use std::path::{Path, PathBuf};

use common::probegen;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("probegen-cli-gen-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("mkdir");
    d
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// `generate --vendor mlx5` on the two-vendor fixture with a user's rules file.
fn generate_with_rules(rules: &Path, out: &Path) -> std::process::Output {
    let fixture = common::fixture("ops-table-two-vendors");
    probegen(&[
        "generate",
        "--kernel-src",
        s(&fixture),
        "--vendor",
        "mlx5",
        "--entry",
        "ib_uverbs_ioctl",
        "--rules",
        s(rules),
        "--out",
        s(out),
    ])
}

/// A malformed rules file: one line naming file:line:column, exit 2, and the files a previous
/// run wrote are left as they were.
#[test]
fn malformed_rules_file_is_exit_2_and_keeps_previous_output() {
    let dir = tmp("bad-rules");
    let out = dir.join("out");
    std::fs::create_dir_all(&out).expect("mkdir");
    std::fs::write(out.join("manifest.yaml"), "previous run\n").expect("write");
    let rules = dir.join("bad.yaml");
    let text = heuristics::BUILTIN_RULES.replace("helper_depth: 2", "helper_depth: [2");
    std::fs::write(&rules, text).expect("write");
    let o = generate_with_rules(&rules, &out);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    let prefix = format!("probegen: {}:", rules.display());
    assert!(err.starts_with(&prefix), "{err}");
    let loc: Vec<&str> = err[prefix.len()..].splitn(3, ':').collect();
    assert!(
        loc[0].parse::<usize>().is_ok_and(|l| l > 1),
        "line number in {err}"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("manifest.yaml")).expect("read"),
        "previous run\n"
    );
    // A limit moved from code into the rules (calls_depth): out of range, one line with
    // file:line, exit 2.
    std::fs::write(
        &rules,
        heuristics::BUILTIN_RULES.replace("calls_depth: 8", "calls_depth: 800"),
    )
    .expect("write");
    let o = generate_with_rules(&rules, &out);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    let line = 1 + heuristics::BUILTIN_RULES
        .lines()
        .position(|l| l.starts_with("calls_depth:"))
        .expect("calls_depth line");
    assert!(
        err.starts_with(&format!("{prefix}{line}: `calls_depth: 800`")),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    // A rule that names an unknown object: the field and what is expected.
    std::fs::write(
        &rules,
        heuristics::BUILTIN_RULES.replace("ib_pd: PD", "ib_pd: PDX"),
    )
    .expect("write");
    let o = generate_with_rules(&rules, &out);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("ib_pd: PDX") && err.contains("expected one of"),
        "{err}"
    );
}

/// Overrides in a user's rules file win over the rules, and say so with their reason.
#[test]
fn overrides_show_as_rule_override_with_the_reason() {
    let dir = tmp("overrides");
    let rules = dir.join("rules.yaml");
    let text = heuristics::BUILTIN_RULES.replace(
        "overrides:\n  include: []\n  exclude: []",
        "overrides:\n  include:\n    - {function: ib_send_one, reason: \"post path matters to us\"}\n  exclude:\n    - {function: ib_create_qp_user, reason: \"too hot\"}",
    );
    assert_ne!(text, heuristics::BUILTIN_RULES, "override block found");
    std::fs::write(&rules, text).expect("write");
    let out = dir.join("out");
    let o = generate_with_rules(&rules, &out);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(out.join("manifest.yaml")).expect("read");
    let m = manifest::Manifest::from_yaml(&text, "manifest.yaml").expect("parse");
    let send = m
        .probes
        .iter()
        .find(|p| p.function == "ib_send_one")
        .expect("included");
    assert_eq!(send.rule.as_str(), "override");
    assert!(send.evidence.contains("post path matters to us"));
    let qp = m
        .excluded
        .iter()
        .find(|e| e.function == "ib_create_qp_user")
        .expect("excluded");
    assert_eq!(qp.rule.as_str(), "override");
    assert!(qp.evidence.contains("too hot"));
}

/// Snapshot of the whole probe set of the two-vendor fixture: ops dispatch, vendor gate,
/// evidence and paths, as a reviewer reads them.
#[test]
fn two_vendor_fixture_probe_set_snapshot() {
    let out = tmp("snapshot").join("out");
    let fixture = common::fixture("ops-table-two-vendors");
    let o = probegen(&[
        "generate",
        "--kernel-src",
        s(&fixture),
        "--vendor",
        "mlx5",
        "--entry",
        "ib_uverbs_ioctl",
        "--out",
        s(&out),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let manifest = std::fs::read_to_string(out.join("manifest.yaml")).expect("read");
    insta::assert_snapshot!("ops_table_two_vendors_mlx5_manifest", manifest);
    let report = std::fs::read_to_string(out.join("report.md")).expect("read");
    insta::assert_snapshot!("ops_table_two_vendors_mlx5_report", report);
}

/// A tree whose headers do not define `struct ib_device_ops`: the focus members cannot be
/// derived, so generate says so and exits 2 instead of writing an empty set.
#[test]
fn a_tree_without_the_ops_struct_is_an_error_not_an_empty_set() {
    let dir = common::temp_dir("no-ops-struct");
    common::copy_dir(&common::fixture("ops-table-two-vendors"), &dir);
    let header = dir.join("include/rdma/ib_verbs.h");
    let text = std::fs::read_to_string(&header).expect("read header");
    let start = text
        .find("struct ib_device_ops {")
        .expect("struct in fixture");
    let end = start + text[start..].find("};").expect("end of struct") + 2;
    std::fs::write(&header, format!("{}{}", &text[..start], &text[end..])).expect("write");
    let out = dir.join("out");
    let o = probegen(&[
        "generate",
        "--kernel-src",
        s(&dir),
        "--vendor",
        "mlx5",
        "--entry",
        "ib_uverbs_ioctl",
        "--out",
        s(&out),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("struct ib_device_ops"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!out.join("manifest.yaml").exists());
}

/// A depth limit out of range in a rules file: one line naming file:line and the key, exit 2,
/// nothing written.
#[test]
fn depth_limit_out_of_range_is_exit_2_with_file_and_line() {
    let dir = tmp("bad-depth");
    let rules = dir.join("rules.yaml");
    let text = heuristics::BUILTIN_RULES.replace("inherit_rounds: 4", "inherit_rounds: 400");
    assert_ne!(text, heuristics::BUILTIN_RULES, "inherit_rounds found");
    let line = 1 + text
        .lines()
        .position(|l| l.starts_with("inherit_rounds:"))
        .expect("key line");
    std::fs::write(&rules, text).expect("write");
    let out = dir.join("out");
    let o = generate_with_rules(&rules, &out);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    let prefix = format!(
        "probegen: {}:{line}: `inherit_rounds: 400`",
        rules.display()
    );
    assert!(err.starts_with(&prefix), "{err}");
    assert!(!out.join("manifest.yaml").exists());
}
