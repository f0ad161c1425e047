//! The kernel-upgrade job's report, checked after `scripts/test-all.sh` ran the job 6.12 -> 7.2
//! on the rxe set (ignored in a plain `cargo test`: it needs the job's output).
//! `PROBEGEN_KERNEL_UPGRADE_REPORT` names the report's directory (`target/kernel-upgrade/7.2`).

use std::path::{Path, PathBuf};

fn report_dir() -> PathBuf {
    let dir = std::env::var("PROBEGEN_KERNEL_UPGRADE_REPORT")
        .expect("PROBEGEN_KERNEL_UPGRADE_REPORT (set by scripts/test-all.sh)");
    Path::new(env!("CARGO_MANIFEST_DIR")).join(dir)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn assert_has(text: &str, path: &Path, needle: &str) {
    assert!(
        text.contains(needle),
        "{} lacks `{needle}`:\n{text}",
        path.display()
    );
}

#[test]
#[ignore = "needs target/kernel-upgrade/7.2 from scripts/kernel-upgrade.sh (scripts/test-all.sh)"]
fn the_7_2_upgrade_report_has_the_rules_drift_the_boot_and_each_owner() {
    let dir = report_dir();
    let md_path = dir.join("report.md");
    let md = read(&md_path);
    // `check` against 7.2: the focus member renamed upstream is named with its successors
    assert_has(
        &md,
        &md_path,
        "| focus-member | `resize_cq` | `resize_user_cq`",
    );
    // the stock 7.2 kernel booted with the regenerated rxe set, the induced failures caught
    assert_has(
        &md,
        &md_path,
        "| boot the stock kernel, rxe set attached, induced failures | passed |",
    );
    // 7.2 pins user memory in __ib_umem_get_va: its EFAULT is still the application's ticket
    assert_has(
        &md,
        &md_path,
        "| owner of each induced failure | each to its owner: create_qp_absurd application, \
         modify_qp_reset_rts application, reg_mr_unmapped application |",
    );
    // ... and the pictures beside it: the 7.2 set with the drift drawn on it
    assert_has(&md, &md_path, "The set as pictures");
    let html_path = dir.join("report.html");
    let html = read(&html_path);
    assert_has(&html, &html_path, "class=\"fn removed\"");
}
