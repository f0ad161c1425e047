//! Host-side check of `scripts/e2e-sets.sh SERIES [SET_DIR...]`: on the stock kernel, with every
//! vendor driver module loaded, each set's collector run attached every probe its manifest calls
//! attachable (a probe the manifest says cannot attach is not in the object). Ignored in a plain
//! `cargo test`: it needs the guest's outputs (target/e2e-sets/<ver>/sets/<name>/).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn env_dir(var: &str) -> PathBuf {
    PathBuf::from(
        std::env::var(var).unwrap_or_else(|_| panic!("${var} not set (run scripts/e2e-sets.sh)")),
    )
}

/// One set: `attached N/M` and the problems found.
fn check_set(ver: &str, name: &str, stage: &Path, out: &Path) -> (String, Vec<String>) {
    let m = manifest::Manifest::from_yaml(&read(&stage.join("manifest.yaml")), name)
        .expect("staged manifest");
    // the control path's programs and the data plane's entry programs
    let attachable: BTreeMap<u32, String> = m
        .attachable()
        .map(|p| (p.id, format!("{}:{}", p.module, p.function)))
        .chain(
            m.data_plane
                .iter()
                .filter(|d| d.attach == manifest::Attach::Fexit)
                .map(|d| (d.id, format!("{}:{} (data plane)", d.module, d.function))),
        )
        .collect();
    let mut problems = Vec::new();
    let log = std::fs::read_to_string(out.join("collect.log")).unwrap_or_default();
    let rc = std::fs::read_to_string(out.join("collect.rc")).unwrap_or_default();
    if rc.trim() != "0" {
        // a program the verifier refused fails the whole load: its log is the collector's
        let tail: Vec<&str> = log.lines().rev().take(20).collect();
        problems.push(format!(
            "{name}: collector exit `{}` (want 0); collect.log ends:\n  {}",
            rc.trim(),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n  ")
        ));
        return (
            format!("{ver} {name}: attached 0/{}", attachable.len()),
            problems,
        );
    }
    let snaps = read(&out.join("snapshots.jsonl"));
    let Some(last) = snaps.lines().last() else {
        problems.push(format!("{name}: no snapshot"));
        return (
            format!("{ver} {name}: attached 0/{}", attachable.len()),
            problems,
        );
    };
    let last: Value = serde_json::from_str(last).expect("snapshot line is JSON");
    let mut attached = 0usize;
    let mut listed = 0usize;
    for a in last["attached"].as_array().into_iter().flatten() {
        let id = a["probe"].as_u64().and_then(|i| u32::try_from(i).ok());
        let Some(target) = id.and_then(|i| attachable.get(&i)) else {
            problems.push(format!(
                "{name}: attach status of a probe the manifest calls not attachable: {a}"
            ));
            continue;
        };
        listed += 1;
        if a["attached"] == true {
            attached += 1;
        } else {
            problems.push(format!(
                "{name}: probe {} {target} not attached: {}",
                a["probe"], a["reason"]
            ));
        }
    }
    if listed != attachable.len() {
        problems.push(format!(
            "{name}: the collector lists {listed} probes, the manifest has {} attachable",
            attachable.len()
        ));
    }
    (
        format!("{ver} {name}: attached {attached}/{}", attachable.len()),
        problems,
    )
}

#[test]
#[ignore = "needs the qemu guest's outputs: run scripts/e2e-sets.sh"]
fn e2e_sets_attach() {
    let ver = std::env::var("PROBEGEN_E2E_SERIES").expect("$PROBEGEN_E2E_SERIES");
    let out = env_dir("PROBEGEN_E2E_SETS_OUT");
    let stage = env_dir("PROBEGEN_E2E_SETS_STAGE");
    let mut names: Vec<String> = std::fs::read_dir(stage.join("sets"))
        .unwrap_or_else(|e| panic!("{}: {e}", stage.join("sets").display()))
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(!names.is_empty(), "no staged sets in {}", stage.display());
    let console = std::fs::read_to_string(out.join("console.log")).unwrap_or_default();
    let mut problems = Vec::new();
    match console
        .lines()
        .find(|l| l.starts_with("TB_STEP vendor_modules "))
    {
        Some(l) if l.starts_with("TB_STEP vendor_modules PASS") => println!("{ver}: {l}"),
        Some(l) => problems.push(l.to_string()),
        None => problems.push("no vendor_modules step in console.log".into()),
    }
    for name in &names {
        let (line, p) = check_set(
            &ver,
            name,
            &stage.join("sets").join(name),
            &out.join("sets").join(name),
        );
        println!("{line}");
        problems.extend(p);
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// What a user may type: a directory that is not a probe set, two sets of one name, a series
/// that is not one. One line naming the input, exit 2, before anything is built or booted.
#[test]
fn bad_set_directories_are_named_before_any_boot() {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let run = |args: &[&str]| {
        let o = std::process::Command::new("bash")
            .arg(repo.join("scripts/e2e-sets.sh"))
            .args(args)
            .output()
            .expect("bash runs");
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let empty = std::env::temp_dir().join(format!("pg-sets-empty-{}", std::process::id()));
    std::fs::create_dir_all(&empty).expect("mkdir");
    let empty_s = empty.to_string_lossy().into_owned();
    let (rc, e) = run(&["6.12", &empty_s]);
    assert_eq!(rc, Some(2), "{e}");
    assert!(e.contains(&format!("{empty_s}: no manifest.yaml")), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");

    let (rc, e) = run(&[
        "6.12",
        "generated/linux-6.12/rxe",
        "generated/linux-6.1/rxe",
    ]);
    assert_eq!(rc, Some(2), "{e}");
    assert!(e.contains("a second set named 'rxe'"), "{e}");

    let (rc, e) = run(&["six"]);
    assert_eq!(rc, Some(2), "{e}");
    assert!(e.contains("usage"), "{e}");
    let _ = std::fs::remove_dir_all(&empty);
}
