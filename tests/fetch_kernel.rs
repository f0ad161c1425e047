//! `scripts/fetch-kernel.sh` on what a user may type: the list of available kernels, and
//! unknown series, versions and flavors (one line listing what is available, exit 2). Uses
//! the script's own apt lists under the cache (fetched on first use).

use std::path::Path;
use std::process::{Command, Output};

mod common;

fn fetch(args: &[&str]) -> Output {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/fetch-kernel.sh");
    // The script asks this build's probegen for the rules' source directories (without it,
    // `cargo run` inside a running `cargo test`).
    Command::new("bash")
        .arg(script)
        .args(args)
        .env("PROBEGEN_BIN", env!("CARGO_BIN_EXE_probegen"))
        .output()
        .expect("bash runs")
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn list_marks_the_default_version_of_each_series() {
    let o = fetch(&["--list"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    // every series of the checked-in sets (generated/sets.txt: 5.10 to 7.3)
    let mut all: Vec<&str> = common::checked_in_kernels()
        .iter()
        .map(|k| k.split('-').next().unwrap_or(k))
        .collect();
    all.sort_unstable();
    all.dedup();
    assert!(all.contains(&"5.10") && all.contains(&"7.3"), "{all:?}");
    for &series in &all {
        let marked: Vec<&str> = out
            .lines()
            .filter(|l| l.starts_with('*') && l.split_whitespace().nth(1) == Some(series))
            .collect();
        assert_eq!(marked.len(), 1, "one default for {series}:\n{out}");
    }
    // every version line names the flavors Debian built of it: the series' defaults
    // have the generic, cloud and realtime ones
    for l in out.lines().filter(|l| l.starts_with('*')) {
        let series = l.split_whitespace().nth(1).unwrap_or("");
        if all.contains(&series) {
            assert!(l.ends_with("flavors: amd64 cloud rt"), "{l}");
        }
    }
    assert!(
        out.lines().all(|l| l.contains("flavors: ")),
        "a version line without flavors:\n{out}"
    );
    // bookworm's own 6.12 (a `~deb12u` build) wins over trixie's newer or equal one on a
    // Debian 12 machine, whichever point release the mirror holds today
    assert!(
        out.lines().any(|l| l.starts_with('*')
            && l.split_whitespace().nth(1) == Some("6.12")
            && l.contains("~deb12u")
            && l.contains("bookworm")),
        "{out}"
    );
}

#[test]
fn unknown_series_version_and_flavor_list_what_exists() {
    let o = fetch(&["9.9"]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    let e = err(&o);
    assert!(
        e.contains("unknown kernel series 9.9") && e.contains("7.2"),
        "{e}"
    );
    assert_eq!(e.lines().count(), 1, "{e}");

    let o = fetch(&["7.2.99-1"]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(err(&o).contains("7.2.13-1"), "{}", err(&o));

    // an unknown flavor: the flavors Debian built of that version, one line, exit 2
    let o = fetch(&["--flavor", "gaming", "7.2"]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    let e = err(&o);
    assert!(
        e.contains("unknown flavor 'gaming' of 7.2 (7.2.13-1)")
            && e.contains("available flavors are amd64 cloud rt"),
        "{e}"
    );
    assert_eq!(e.lines().count(), 1, "{e}");
    // a name that cannot be a flavor is refused before any apt work
    let o = fetch(&["--flavor", "../x", "6.12"]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(err(&o).contains("unknown flavor '../x'"), "{}", err(&o));

    let o = fetch(&["seven"]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
}

/// The script extracts the directories the analyzer reads, from the rules' one parser (no
/// second list, no second parser): `probegen rules --source-dirs` prints the Kbuild root, the
/// include directories and every vendor's outside it, in that order, and the script adds the
/// top Makefile.
#[test]
fn source_dirs_are_the_rules_directories() {
    let o = fetch(&["--source-dirs"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let printed: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    let rules = heuristics::Rules::builtin().expect("built-in rules");
    let mut expected: Vec<String> = rules
        .source_layout()
        .scan_dirs()
        .map(str::to_string)
        .collect();
    expected.push("Makefile".into());
    assert_eq!(printed, expected);
    assert!(
        printed.iter().any(|d| d == "include/linux/mlx4"),
        "{printed:?}"
    );
    // a rules file is read by the same parser: a malformed one is one line and exit 2
    let bad = std::env::temp_dir().join(format!("pg-bad-rules-{}.yaml", std::process::id()));
    std::fs::write(&bad, "source: [\n").expect("write");
    let o = Command::new(env!("CARGO_BIN_EXE_probegen"))
        .args(["rules", "--source-dirs", "--rules"])
        .arg(&bad)
        .output()
        .expect("run probegen");
    let _ = std::fs::remove_file(&bad);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert_eq!(err(&o).lines().count(), 1, "{}", err(&o));
}

/// Every flavor fetches and every vendor its config builds gets a set: Debian's cloud flavor
/// builds mlx5 and mlx4 (and the cloud NICs' drivers), not Soft-RoCE, so the fetch requires no
/// particular driver and unpacks every module under drivers/infiniband; `generate --vendor all`
/// then writes the mlx5 and mlx4 sets with their modules' BTF (no `module-missing`) and says
/// which vendors it skipped.
#[test]
fn the_cloud_flavor_fetches_and_generates_every_vendor_its_config_builds() {
    let tree = common::kernel_dir("6.12-cloud");
    let modules = tree.join("modules");
    for m in ["ib_core", "ib_uverbs", "mlx5_ib", "mlx5_core", "mlx4_ib"] {
        assert!(
            modules.join(format!("{m}.ko")).is_file(),
            "{m}.ko in {}",
            modules.display()
        );
    }
    let missing = std::fs::read_to_string(modules.join("MISSING")).expect("modules/MISSING");
    assert!(missing.lines().any(|l| l == "rdma_rxe"), "{missing}");
    let out = std::env::temp_dir().join(format!("pg-cloud-sets-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let o = Command::new(env!("CARGO_BIN_EXE_probegen"))
        .args(["generate", "--vendor", "all", "--kernel-src"])
        .arg(&tree)
        .arg("--out")
        .arg(&out)
        .output()
        .expect("run probegen");
    let stderr = err(&o);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stderr.contains("rxe: not built by this config, skipped (--vendor all)"),
        "{stderr}"
    );
    for vendor in ["mlx5", "mlx4"] {
        let text = std::fs::read_to_string(out.join(vendor).join("manifest.yaml"))
            .unwrap_or_else(|e| panic!("{vendor} set: {e}\n{stderr}"));
        let m = manifest::Manifest::from_yaml(&text, vendor).expect("manifest");
        assert!(m.degraded.is_empty(), "{vendor}: {:?}", m.degraded);
        let vendor_probes: Vec<_> = m
            .probes
            .iter()
            .filter(|p| p.layer == manifest::Layer::Vendor)
            .collect();
        assert!(
            vendor_probes.len() >= 5,
            "{vendor}: {} vendor probes",
            vendor_probes.len()
        );
        // every vendor probe's module was unpacked (its attach verdict is the binary's)
        for p in vendor_probes.iter().filter(|p| p.module != "inline") {
            assert!(
                modules.join(format!("{}.ko", p.module)).is_file(),
                "{vendor}: {} in {}",
                p.function,
                p.module
            );
        }
        assert!(
            m.stats.attachable > 20,
            "{vendor}: {} attachable",
            m.stats.attachable
        );
    }
    let _ = std::fs::remove_dir_all(&out);
}
