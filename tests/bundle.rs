//! Issue 23 items 1 and 2: `probegen bundle` is deterministic and names every checked-in set;
//! `collect --bundle` picks the set of the running release (else the newest of its series) for
//! the loaded vendor driver, says when none applies and stays up (exit 2 only with --strict),
//! and skips a damaged set with one line naming the file.
//!
//! The selection runs through `--replay` (no BPF needed): the chosen manifest is the one the
//! replay's records are read against. `--kernel-release` and `--sys-root` (hidden, for tests)
//! stand in for `uname -r` and `/sys/module`.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::servers::{http_get, metrics_address, spawn_collector, Guard};

use sha2::{Digest, Sha256};

fn repo(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(p)
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pg-bundle-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("tmp dir");
    d
}

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_probegen"))
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn sha(bytes: &[u8]) -> String {
    let mut s = String::from("sha256:");
    for b in Sha256::digest(bytes) {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Every file under `dir`, relative, sorted, with its bytes.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).expect("rel").display().to_string();
                out.push((rel, std::fs::read(&p).expect("read")));
            }
        }
    }
    out.sort();
    out
}

/// Per kernel, the union set of every pair of its vendors (`linux-6.12/mlx5+rxe`) for
/// `singles` (`linux-<ver>/<vendor>`).
fn unions_of(singles: &[String]) -> Vec<String> {
    let mut want = Vec::new();
    for (i, x) in singles.iter().enumerate() {
        for y in &singles[i + 1..] {
            let (kx, vx) = x.split_once('/').expect("linux-<ver>/<vendor>");
            let (ky, vy) = y.split_once('/').expect("linux-<ver>/<vendor>");
            if kx == ky {
                let mut v = [vx, vy];
                v.sort_unstable();
                want.push(format!("{kx}/{}", v.join("+")));
            }
        }
    }
    want
}

/// An index entry's flavor is its kernel directory's (`linux-6.12-cloud`), else amd64.
fn assert_flavor_of_its_directory(s: &serde_json::Value) {
    let series = s["series"].as_str().expect("series");
    let kernel_dir = s["dir"].as_str().and_then(|d| d.split('/').next());
    let flavor = kernel_dir
        .and_then(|k| k.strip_prefix(&format!("linux-{series}-")))
        .unwrap_or("amd64");
    assert_eq!(s["flavor"].as_str(), Some(flavor), "{s}");
}

/// `bundle --list` prints the index: a header, then each set's series, flavor and kernel.
fn assert_list_prints_the_index(bundle: &Path, sets: usize) {
    let o = bin()
        .arg("bundle")
        .arg("--list")
        .arg(bundle)
        .output()
        .expect("run");
    assert!(o.status.success(), "{}", stderr(&o));
    let listed = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(listed.lines().count(), sets + 1, "{listed}");
    assert!(
        listed.contains("linux-6.12-cloud/mlx5\tmlx5\t6.12\tcloud\t6.12."),
        "{listed}"
    );
    assert!(
        listed.contains("linux-5.10/rxe\trxe\t5.10\tamd64\t5.10."),
        "{listed}"
    );
}

#[test]
fn bundle_is_byte_identical_and_its_index_names_every_set() {
    let t = tmp("twice");
    let (a, b) = (t.join("a"), t.join("b"));
    // the second run names its output relative to its working directory, as the package
    // build does: the union sets compile elsewhere and must still find it
    for (out, cwd) in [(a.clone(), None), (PathBuf::from("b"), Some(&t))] {
        let mut cmd = bin();
        if let Some(cwd) = cwd {
            cmd.current_dir(cwd);
        }
        let o = cmd
            .args(["bundle", "--sets"])
            .arg(repo("generated"))
            .arg("--out")
            .arg(&out)
            .output()
            .expect("run");
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let (fa, fb) = (files(&a), files(&b));
    assert_eq!(fa.len(), fb.len());
    for ((na, ba), (nb, bb)) in fa.iter().zip(&fb) {
        assert_eq!(na, nb);
        assert!(ba == bb, "{na} differs between two bundle runs");
    }
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(a.join("index.json")).expect("index")).expect("json");
    let named: Vec<&str> = index["sets"]
        .as_array()
        .expect("sets")
        .iter()
        .filter_map(|s| s["dir"].as_str())
        .collect();
    let mut want = Vec::new();
    for k in std::fs::read_dir(repo("generated")).expect("generated") {
        let k = k.expect("entry").path();
        for v in std::fs::read_dir(&k).into_iter().flatten() {
            let v = v.expect("entry").path();
            if v.join("manifest.yaml").is_file() {
                want.push(
                    v.strip_prefix(repo("generated"))
                        .expect("rel")
                        .display()
                        .to_string(),
                );
            }
        }
    }
    want.extend(unions_of(&want));
    want.sort();
    assert_eq!(
        named, want,
        "the index names every checked-in set and each pair's union"
    );
    for s in index["sets"].as_array().expect("sets") {
        let dir = a.join(s["dir"].as_str().expect("dir"));
        let m = std::fs::read(dir.join("manifest.yaml")).expect("manifest");
        assert_eq!(s["manifest_sha256"].as_str(), Some(sha(&m).as_str()));
        let series = s["series"].as_str().expect("series");
        assert_flavor_of_its_directory(s);
        assert!(s["kernel"]
            .as_str()
            .expect("kernel")
            .starts_with(&format!("{series}.")));
        // the object carries BTF and no path of this checkout
        let obj = std::fs::read(dir.join("probes.bpf.o")).expect("object");
        let root = env!("CARGO_MANIFEST_DIR").as_bytes();
        assert!(
            !obj.windows(root.len()).any(|w| w == root),
            "{}",
            dir.display()
        );
        assert!(obj.windows(5).any(|w| w == b".BTF\0"), "{}", dir.display());
        // nor of the scratch directory a union's C was rendered in
        let scratch = t.display().to_string();
        assert!(
            !obj.windows(scratch.len()).any(|w| w == scratch.as_bytes()),
            "{}",
            dir.display()
        );
    }
    assert_list_prints_the_index(&a, named.len());
    std::fs::remove_dir_all(&t).ok();
}

/// A bundle of two rxe sets (6.12.117: the replay's manifest; 6.12.40: the generated 6.1
/// manifest standing in) and a mlx5 set of 7.2, with a sys root where `loaded` are loaded.
fn small_bundle(t: &Path, loaded: &[&str]) -> (PathBuf, PathBuf) {
    let b = t.join("bundle");
    let sets = [
        (
            "linux-6.12/rxe",
            "rxe",
            "6.12.117",
            "rdma_rxe",
            repo("collector/tests/data/rxe-6.12.manifest.yaml"),
        ),
        (
            "linux-6.12.40/rxe",
            "rxe",
            "6.12.40",
            "rdma_rxe",
            repo("generated/linux-6.1/rxe/manifest.yaml"),
        ),
        (
            "linux-7.2/mlx5",
            "mlx5",
            "7.2.13",
            "mlx5_ib",
            repo("generated/linux-7.2/mlx5/manifest.yaml"),
        ),
    ];
    let mut index = Vec::new();
    for (dir, vendor, kernel, module, manifest) in sets {
        let d = b.join(dir);
        std::fs::create_dir_all(&d).expect("set dir");
        let m = std::fs::read(&manifest).expect("manifest");
        std::fs::write(d.join("manifest.yaml"), &m).expect("write");
        let obj = format!("object of {dir}");
        std::fs::write(d.join("probes.bpf.o"), &obj).expect("write");
        let series: Vec<&str> = kernel.split('.').take(2).collect();
        index.push(serde_json::json!({
            "dir": dir, "vendor": vendor, "kernel": kernel, "series": series.join("."),
            "driver_modules": [module], "manifest_sha256": sha(&m),
            "object_sha256": sha(obj.as_bytes()),
        }));
    }
    let index = serde_json::json!({"schema": "probegen-bundle/v1", "sets": index});
    std::fs::write(b.join("index.json"), index.to_string()).expect("index");
    let root = t.join("root");
    for m in loaded {
        std::fs::create_dir_all(root.join("sys/module").join(m)).expect("module");
    }
    std::fs::create_dir_all(root.join("sys/module")).expect("sys");
    (b, root)
}

fn collect(t: &Path, b: &Path, root: &Path, release: &str, extra: &[&str]) -> Output {
    bin()
        .args(["collect", "--bundle"])
        .arg(b)
        .arg("--sys-root")
        .arg(root)
        .args(["--kernel-release", release, "--replay"])
        .arg(repo("collector/tests/data/rxe-6.12.replay.jsonl"))
        .arg("--out")
        .arg(t.join("out.jsonl"))
        .args(extra)
        .output()
        .expect("run")
}

#[test]
fn collect_bundle_picks_the_exact_release_for_the_loaded_driver() {
    let t = tmp("exact");
    let (b, root) = small_bundle(&t, &["rdma_rxe"]);
    let o = collect(&t, &b, &root, "6.12.117+deb12-amd64", &[]);
    let e = stderr(&o);
    assert!(o.status.success(), "{e}");
    assert!(
        e.contains("kernel 6.12.117 (6.12.117+deb12-amd64): set linux-6.12/rxe for rdma_rxe (built for this release"),
        "{e}"
    );
    let out = std::fs::read_to_string(t.join("out.jsonl")).expect("snapshots");
    assert!(
        out.lines().count() >= 1,
        "the replay ran against the chosen manifest"
    );
    std::fs::remove_dir_all(&t).ok();
}

#[test]
fn collect_bundle_takes_the_newest_of_the_series_for_another_point_release() {
    let t = tmp("series");
    let (b, root) = small_bundle(&t, &["rdma_rxe"]);
    let o = collect(&t, &b, &root, "6.12.130+deb12-amd64", &[]);
    let e = stderr(&o);
    assert!(o.status.success(), "{e}");
    assert!(
        e.contains("set linux-6.12/rxe for rdma_rxe (the newest of this series"),
        "{e}"
    );
    std::fs::remove_dir_all(&t).ok();
}

#[test]
fn collect_bundle_with_no_set_stays_up_and_exits_2_only_when_strict() {
    let t = tmp("none");
    let (b, root) = small_bundle(&t, &["rdma_rxe"]);
    // another series: one line, rechecked every interval, exit 0 when --duration ends
    let started = std::time::Instant::now();
    let o = collect(
        &t,
        &b,
        &root,
        "6.13.2-amd64",
        &[
            "--interval",
            "200ms",
            "--duration",
            "1s",
            "--nearest-set=false",
        ],
    );
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{e}");
    assert!(started.elapsed() >= std::time::Duration::from_millis(900));
    assert_eq!(
        e.matches("no set of this series for the loaded driver rxe (rdma_rxe)")
            .count(),
        1,
        "said once, not per recheck: {e}"
    );
    assert!(e.contains("no set attached within --duration"), "{e}");
    assert!(!t.join("out.jsonl").exists());
    let o = collect(
        &t,
        &b,
        &root,
        "6.13.2-amd64",
        &["--strict", "--nearest-set=false"],
    );
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.contains("kernel 6.13.2 (6.13.2-amd64): no set of this series for the loaded driver rxe (rdma_rxe)"), "{e}");
    // no vendor driver of the bundle loaded at all
    let (b, root) = small_bundle(&tmp("nodriver"), &[]);
    let o = collect(&t, &b, &root, "6.12.117", &["--strict"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("no driver of its usable sets loaded (mlx5_ib, rdma_rxe)"),
        "{e}"
    );
    std::fs::remove_dir_all(&t).ok();
}

#[test]
fn collect_bundle_takes_the_nearest_series_set_and_says_so() {
    let t = tmp("nearest");
    let (b, root) = small_bundle(&t, &["rdma_rxe"]);
    // 6.13 has no set: 6.12's newest (one release away) runs, named as the nearest
    let o = collect(&t, &b, &root, "6.13.2-amd64", &[]);
    let e = stderr(&o);
    assert!(o.status.success(), "{e}");
    assert!(
        e.contains("kernel 6.13.2 (6.13.2-amd64): set linux-6.12/rxe for rdma_rxe (no set of this series: the nearest series' set, each probe checked against this kernel's BTF and kallsyms; match=\"nearest\""),
        "{e}"
    );
    let out = std::fs::read_to_string(t.join("out.jsonl")).expect("snapshots");
    for line in out.lines() {
        let s: serde_json::Value = serde_json::from_str(line).expect("json");
        assert_eq!(s["set"]["dir"], "linux-6.12/rxe", "{line}");
        assert_eq!(s["set"]["match"], "nearest", "{line}");
        for layer in ["core", "vendor", "data_plane"] {
            assert!(s["set"]["attached"][layer]["probes"].is_u64(), "{line}");
        }
    }
    // --strict fails rather than skips a probe: it takes no nearest set
    let o = collect(&t, &b, &root, "6.13.2-amd64", &["--strict"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(
        e.contains("kernel 6.13.2 (6.13.2-amd64): no set of this series; --strict takes no nearest set (linux-6.12/rxe)"),
        "{e}"
    );
    // a release the agent cannot read: one line, nothing attached, the service up
    let o = collect(
        &t,
        &b,
        &root,
        "banana",
        &["--interval", "200ms", "--duration", "1s"],
    );
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{e}");
    assert_eq!(
        e.matches("kernel release `banana`: expected X.Y[.Z]")
            .count(),
        1,
        "said once: {e}"
    );
    assert!(
        e.contains("no series to choose a set by: nothing attached; rechecking every 200ms"),
        "{e}"
    );
    std::fs::remove_dir_all(&t).ok();
}

#[test]
fn damaged_bundle_skips_the_set_naming_the_file() {
    let t = tmp("damaged");
    let (b, root) = small_bundle(&t, &["rdma_rxe"]);
    // the 6.12.40 set loses its object: skipped, named; the exact set still runs
    std::fs::remove_file(b.join("linux-6.12.40/rxe/probes.bpf.o")).expect("rm");
    let o = collect(&t, &b, &root, "6.12.117", &[]);
    let e = stderr(&o);
    assert!(o.status.success(), "{e}");
    let obj = b
        .join("linux-6.12.40/rxe/probes.bpf.o")
        .display()
        .to_string();
    assert!(
        e.lines()
            .any(|l| l.contains(&obj) && l.ends_with("set linux-6.12.40/rxe skipped")),
        "{e}"
    );
    let o = collect(&t, &b, &root, "6.12.117", &["--strict"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains(&obj));
    // a manifest that does not match the index's hash: skipped, never loaded
    let m = b.join("linux-6.12/rxe/manifest.yaml");
    let mut bytes = std::fs::read(&m).expect("manifest");
    bytes.extend_from_slice(b"# changed\n");
    std::fs::write(&m, bytes).expect("write");
    std::fs::remove_file(t.join("out.jsonl")).expect("the first run's snapshots");
    let o = collect(&t, &b, &root, "6.12.117", &["--duration", "0s"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{e}");
    assert!(
        e.contains(&format!("{}: sha256:", m.display()))
            && e.contains("does not match the index's sha256:"),
        "{e}"
    );
    assert!(!t.join("out.jsonl").exists(), "no set was run: {e}");
    // an index that names nothing, or is not an index: one line naming it, exit 2
    let idx = b.join("index.json");
    for text in [r#"{"schema":"probegen-bundle/v1","sets":[]}"#, "{not json"] {
        std::fs::write(&idx, text).expect("write");
        let o = collect(&t, &b, &root, "6.12.117", &[]);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{e}");
        assert_eq!(e.lines().count(), 1, "{e}");
        assert!(e.contains(&idx.display().to_string()), "{e}");
    }
    std::fs::remove_dir_all(&t).ok();
}

/// The `/metrics` page of `collect --bundle B --metrics 127.0.0.1:0 EXTRA` (replaying the
/// guest recording) once it contains `want` (or after 20 s, whatever it is then); the
/// collector is stopped by the guard, also when an assertion fails.
fn bundle_page(
    g: &mut Guard,
    b: &Path,
    root: &Path,
    release: &str,
    extra: &[&str],
    want: &str,
) -> String {
    let (b, root) = (b.to_str().expect("utf-8"), root.to_str().expect("utf-8"));
    let replay = repo("collector/tests/data/rxe-6.12.replay.jsonl");
    let out = g.dir.join("out.jsonl");
    let mut args = vec![
        "--bundle",
        b,
        "--sys-root",
        root,
        "--kernel-release",
        release,
        "--replay",
        replay.to_str().expect("utf-8"),
        "--out",
        out.to_str().expect("utf-8"),
        "--metrics",
        "127.0.0.1:0",
    ];
    args.extend(extra);
    let (i, rx) = spawn_collector(g, release, &args);
    let addr = metrics_address(&rx);
    let t0 = std::time::Instant::now();
    let page = loop {
        let (status, page) = http_get(addr, "/metrics").expect("scrape");
        assert_eq!(status, 200, "{page}");
        if page.contains(want) || t0.elapsed() > std::time::Duration::from_secs(20) {
            break page;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    g.kill(i);
    page
}

#[test]
fn collect_bundle_serves_metrics_while_no_set_runs_and_names_the_set_once_one_does() {
    let mut g = Guard::new("pg-bundle-metrics");
    let (b, root) = small_bundle(&g.dir, &["rdma_rxe"]);
    // the driver is loaded but this kernel's series has no set: the port says so while the
    // agent waits (a host without probes, not a dead target)
    // (nearest-set = false: only sets of the series)
    let waiting = ["--interval", "200ms", "--duration", "20s"];
    let exact_only = [&waiting[..], &["--nearest-set=false"]].concat();
    let want = "probegen_no_set{reason=\"no_exact_set\",kernel=\"6.13.2-amd64\"} 1\n";
    let page = bundle_page(&mut g, &b, &root, "6.13.2-amd64", &exact_only, want);
    assert!(page.contains(want), "{page}");
    assert!(page.contains("probegen_set_running 0\n"), "{page}");
    // a release the agent cannot read
    let want = "probegen_no_set{reason=\"unknown_release\",kernel=\"banana\"} 1\n";
    let page = bundle_page(&mut g, &b, &root, "banana", &waiting, want);
    assert!(page.contains(want), "{page}");
    // with the nearest series' set: named as such, its probes counted per layer
    let want = "probegen_calls_total{";
    let page = bundle_page(
        &mut g,
        &b,
        &root,
        "6.13.2-amd64",
        &["--linger", "60s"],
        want,
    );
    let set = "probegen_set_info{set=\"linux-6.12/rxe\",match=\"nearest\"} 1\n";
    assert!(page.contains(set), "{page}");
    for layer in ["core", "vendor", "data_plane"] {
        assert!(
            page.contains(&format!(
                "probegen_set_probes_attached{{layer=\"{layer}\"}} "
            )),
            "{page}"
        );
    }
    // no vendor driver of the bundle loaded at all
    let (b2, none_loaded) = small_bundle(&g.dir.join("nodriver"), &[]);
    let want = "probegen_no_set{reason=\"no_driver_loaded\",kernel=\"6.12.117\"} 1\n";
    let page = bundle_page(&mut g, &b2, &none_loaded, "6.12.117", &waiting, want);
    assert!(page.contains(want), "{page}");
    // a set applies: the run names it on the same exposition, with the probes' metrics
    let want = "probegen_calls_total{";
    let page = bundle_page(
        &mut g,
        &b,
        &root,
        "6.12.130+deb12-amd64",
        &["--linger", "60s"],
        want,
    );
    let set = "probegen_set_info{set=\"linux-6.12/rxe\",match=\"series\"} 1\n";
    assert!(page.contains(set), "{page}");
    assert!(page.contains("probegen_set_running 1\n"), "{page}");
    assert!(!page.contains("probegen_no_set"), "{page}");
    assert!(page.contains(want), "{page}");
}
