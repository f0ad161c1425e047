//! The example kernel-upgrade pipelines users copy (deploy/ci/) are valid YAML, run the
//! shipped job script, and name only scripts that exist.

use std::path::Path;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn example_pipelines_run_the_kernel_upgrade_job() {
    for f in [
        "deploy/ci/github-kernel-upgrade.yml",
        "deploy/ci/gitlab-kernel-upgrade.yml",
    ] {
        let path = repo().join(f);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{f}: {e}"));
        let v: serde_yaml::Value =
            serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert!(v.is_mapping(), "{f}");
        assert!(text.contains("scripts/kernel-upgrade.sh"), "{f}");
        assert!(text.contains("schedule"), "{f}: runs on a schedule");
        assert!(
            text.contains("report.html"),
            "{f}: the merge request links the pictures"
        );
        for word in text.split(|c: char| c.is_whitespace() || c == '"' || c == '$' || c == '(') {
            if let Some(script) = word.strip_prefix("scripts/") {
                let script = script.trim_end_matches([')', ';']);
                assert!(
                    repo().join("scripts").join(script).is_file(),
                    "{f} names scripts/{script}, which does not exist"
                );
            }
        }
    }
}
