//! `probegen collect` on the host, without BPF: replay of records recorded live in the qemu
//! guest (collector/tests/data/rxe-6.12.replay.jsonl, written by `--record` during
//! scripts/e2e-collect.sh 6.12), sinks, metrics over HTTP, signals, object refusal.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn data(name: &str) -> PathBuf {
    repo().join("collector/tests/data").join(name)
}

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_probegen"))
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pg-collect-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("mkdir");
    d
}

fn snapshots(p: &Path) -> Vec<Value> {
    std::fs::read_to_string(p)
        .expect("snapshots")
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect()
}

fn replay(extra: &[&str], out: &Path) -> (std::process::Output, Vec<Value>) {
    replay_under(&data("rxe-6.12.manifest.yaml"), extra, out)
}

/// The guest recording replayed under `manifest`.
fn replay_under(manifest: &Path, extra: &[&str], out: &Path) -> (std::process::Output, Vec<Value>) {
    let o = bin()
        .args(["collect", "--manifest"])
        .arg(manifest)
        .arg("--replay")
        .arg(data("rxe-6.12.replay.jsonl"))
        .arg("--out")
        .arg(out)
        .args(extra)
        .output()
        .expect("run probegen");
    let s = if out.is_file() {
        snapshots(out)
    } else {
        Vec::new()
    };
    (o, s)
}

#[test]
fn replay_of_guest_recording() {
    let d = tmp("guest");
    let out = d.join("s.jsonl");
    let (o, snaps) = replay(&[], &out);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("invariant ok"), "{err}");
    // one snapshot per recorded counters line, plus the final one
    let recorded = std::fs::read_to_string(data("rxe-6.12.replay.jsonl")).expect("r");
    let windows = recorded
        .lines()
        .filter(|l| l.starts_with("{\"counters\""))
        .count();
    assert_eq!(snaps.len(), windows + 1);
    let last = snaps.last().expect("last");
    assert_eq!(last["final"], true);
    assert_eq!(last["kernel"], "6.12.117+deb12-amd64");
    assert_eq!(last["invariant"]["ok"], true);
    let recs: Vec<&Value> = snaps
        .iter()
        .flat_map(|s| s["records"].as_array().into_iter().flatten())
        .collect();
    let failures: u64 = snaps
        .iter()
        .flat_map(|s| s["counters"].as_array().into_iter().flatten())
        .map(|c| c["failures"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(recs.len() as u64, failures);
    for f in ["ib_uverbs_reg_mr", "ib_umem_get", "rxe_reg_user_mr"] {
        assert!(
            recs.iter().any(|r| r["function"] == f
                && r["errno_name"] == "EFAULT"
                && r["comm"] == "verbs_fail"),
            "EFAULT record of {f}"
        );
    }
    let umem = recs
        .iter()
        .find(|r| r["function"] == "ib_umem_get")
        .expect("ib_umem_get");
    assert_eq!(umem["module"], "ib_uverbs");
    assert_eq!(umem["errno"], 14);
    assert!(umem["args"].as_array().is_some_and(|a| !a.is_empty()));
    // no /proc lookups in replay: job empty, not an error
    assert_eq!(umem["job"], serde_json::json!({}));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn batch_cap_counts_userspace_drops() {
    let d = tmp("cap");
    let out = d.join("s.jsonl");
    let (o, snaps) = replay(&["--batch-cap", "2"], &out);
    assert!(o.status.success());
    let kept: usize = snaps
        .iter()
        .map(|s| s["records"].as_array().map_or(0, |a| a.len()))
        .sum();
    let us: u64 = snaps
        .iter()
        .map(|s| s["drops"]["userspace"].as_u64().unwrap_or(0))
        .sum();
    assert!(snaps
        .iter()
        .all(|s| s["records"].as_array().is_some_and(|a| a.len() <= 2)));
    assert!(us > 0);
    assert_eq!(kept as u64 + us, 26, "kept {kept} + dropped {us}");
    assert_eq!(snaps.last().expect("last")["invariant"]["ok"], true);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn sink_errors_are_counted_and_collection_goes_on() {
    let (o, _) = replay(&[], Path::new("/dev/full"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("not written"), "{err}");
    assert!(
        err.contains("sink errors 4") || err.contains("sink errors "),
        "{err}"
    );
    // the sink error count appears in the following snapshots (stdout sink for a second run)
    let d = tmp("unwritable");
    let file = d.join("file");
    std::fs::write(&file, b"").expect("w");
    let (o, _) = replay(&[], &file.join("under-a-file.jsonl"));
    assert!(o.status.success());
}

#[test]
fn rotation_by_size() {
    let d = tmp("rot");
    let out = d.join("s.jsonl");
    let (o, _) = replay(&["--rotate-bytes", "20000", "--rotate-keep", "3"], &out);
    assert!(o.status.success());
    assert!(d.join("s.jsonl.1").exists());
    for f in std::fs::read_dir(&d).expect("dir") {
        let p = f.expect("entry").path();
        for l in std::fs::read_to_string(&p).expect("r").lines() {
            serde_json::from_str::<Value>(l).expect("whole JSON lines in every file");
        }
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn metrics_served_then_sigterm_exits_zero() {
    let d = tmp("metrics");
    let mut child = bin()
        .args(["collect", "--manifest"])
        .arg(data("rxe-6.12.manifest.yaml"))
        .arg("--replay")
        .arg(data("rxe-6.12.replay.jsonl"))
        .arg("--out")
        .arg(d.join("s.jsonl"))
        .args(["--metrics", "127.0.0.1:0", "--linger", "60s"])
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let addr = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| {
            l.strip_prefix("probegen collect: metrics on http://")
                .and_then(|r| r.strip_suffix("/metrics"))
                .map(str::to_string)
        })
        .expect("metrics address");
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");
    // the replay is done quickly; then the exposition holds the totals
    let t0 = Instant::now();
    let body = loop {
        let mut c = TcpStream::connect(&addr).expect("connect");
        write!(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").expect("send");
        let mut r = String::new();
        c.read_to_string(&mut r).expect("read");
        let done =
            "probegen_failures_total{function=\"ib_uverbs_reg_mr\",module=\"ib_uverbs\"} 2\n";
        if r.contains(done) || t0.elapsed() > Duration::from_secs(20) {
            break r;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(body.starts_with("HTTP/1.1 200 OK"), "{body}");
    assert!(
        body.contains(
            "probegen_failures_total{function=\"ib_uverbs_reg_mr\",module=\"ib_uverbs\"} 2\n"
        ),
        "{body}"
    );
    assert!(body.contains(
        "probegen_errno_total{function=\"ib_umem_get\",module=\"ib_uverbs\",errno=\"EFAULT\"} 2\n"
    ));
    assert!(body.contains("probegen_ring_drops_total 0\n"));
    let st = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(st.success());
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "no exit after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(
        rest.iter().any(|l| l.contains("stopped by signal 15")),
        "{rest:?}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn object_differing_from_manifest_is_refused() {
    let d = tmp("obj");
    // the 6.1 object against the 6.12 manifest: different probe tables
    let src = repo().join("generated/linux-6.1/rxe/probes.bpf.c");
    let obj = d.join("p.o");
    let st = Command::new("clang")
        .args(["-target", "bpf", "-O2", "-g", "-D__TARGET_ARCH_x86"])
        .arg("-I/usr/include/x86_64-linux-gnu")
        .arg("-I")
        .arg(repo().join("generated"))
        .arg("-c")
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .status()
        .expect("clang");
    assert!(st.success());
    let o = bin()
        .args(["collect", "--manifest"])
        .arg(data("rxe-6.12.manifest.yaml"))
        .arg("--object")
        .arg(&obj)
        .arg("--out")
        .arg(d.join("s.jsonl"))
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("differs from the manifest"), "{err}");
    assert!(err.contains("pg_"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn bad_arguments() {
    let o = bin()
        .args(["collect", "--manifest"])
        .arg(data("rxe-6.12.manifest.yaml"))
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--object"));
    let o = bin()
        .args([
            "collect",
            "--manifest",
            "/nonexistent.yaml",
            "--replay",
            "/x",
        ])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(2));
}

/// A set written before error sites (this recording's manifest has no `error_sites` key)
/// still routes every chain end to end, by the layer table, and says why: never a crash, never
/// a silent default (issue 24, bad input).
#[test]
fn an_older_set_without_site_data_routes_every_chain_and_says_why() {
    let manifest = std::fs::read_to_string(data("rxe-6.12.manifest.yaml")).expect("manifest");
    assert!(
        !manifest.contains("error_sites"),
        "the older set has no sites"
    );
    let d = tmp("older-set");
    let out = d.join("s.jsonl");
    let (o, snaps) = replay(&[], &out);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let chains: Vec<&Value> = snaps
        .iter()
        .flat_map(|s| s["chains"].as_array().into_iter().flatten())
        .collect();
    assert_eq!(chains.len(), 6);
    let mut owners = Vec::new();
    for c in &chains {
        assert_eq!(
            c["owner_reason"], "no site data: generated by an older probegen",
            "{c}"
        );
        assert_eq!(c["owner_site"], "", "{c}");
        let cands = c["owner_candidates"].as_array().expect("candidates");
        assert_eq!(cands.len(), 1, "{c}");
        assert_eq!(cands[0]["owner"], c["owner"], "{c}");
        owners.push(format!(
            "{} {}",
            c["origin"]["function"].as_str().unwrap_or("?"),
            c["owner"].as_str().unwrap_or("?")
        ));
    }
    owners.sort();
    owners.dedup();
    // the layer table: the caller's memory that could not be pinned, the driver's checks
    assert_eq!(
        owners,
        [
            "ib_umem_get application",
            "rxe_qp_chk_init vendor-driver",
            "rxe_qp_from_attr vendor-driver"
        ]
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// The chains of all snapshots as `pid summary` lines.
fn chain_lines(snaps: &[Value]) -> Vec<String> {
    snaps
        .iter()
        .flat_map(|s| s["chains"].as_array().into_iter().flatten())
        .map(|c| format!("{} {}", c["pid"], c["summary"].as_str().unwrap_or("?")))
        .collect()
}

#[test]
fn failure_chains_of_guest_recording() {
    let d = tmp("chains");
    let out = d.join("s.jsonl");
    let (o, snaps) = replay(&[], &out);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    // two verbs_fail runs (pids 277, 297), three induced failures each; this recording's
    // manifest (an older 6.12 rxe set) has no ib_create_qp_user / ib_modify_qp_with_udata
    let reg = "EFAULT origin ib_umem_get (ib_uverbs) <- rxe_mr_init_user <- rxe_reg_user_mr <- ib_uverbs_reg_mr";
    let create = "EINVAL origin rxe_qp_chk_init (rdma_rxe) <- rxe_create_qp <- create_qp <- ib_uverbs_handler_UVERBS_METHOD_QP_CREATE";
    // through the inline ib_security_modify_qp, a probe without a program
    let modify = "EINVAL origin rxe_qp_from_attr (rdma_rxe) <- rxe_modify_qp <- _ib_modify_qp <- modify_qp <- ib_uverbs_modify_qp";
    let want: Vec<String> = [277, 297]
        .iter()
        .flat_map(|pid| [reg, create, modify].map(|s| format!("{pid} {s}")))
        .collect();
    assert_eq!(chain_lines(&snaps), want);
    for (pid, s) in [(277, reg), (297, modify)] {
        let line = format!("probegen collect: chain pid={pid} tid={pid} comm=verbs_fail: {s}");
        assert!(err.lines().any(|l| l == line), "{line}\n{err}");
    }
    // every record is in exactly one chain
    let recs: usize = snaps
        .iter()
        .map(|s| s["records"].as_array().map_or(0, |a| a.len()))
        .sum();
    let linked: usize = snaps
        .iter()
        .flat_map(|s| s["chains"].as_array().into_iter().flatten())
        .map(|c| c["functions"].as_array().map_or(0, |a| a.len()))
        .sum();
    assert_eq!((recs, linked), (26, 26));
    let c = snaps
        .iter()
        .flat_map(|s| s["chains"].as_array().into_iter().flatten())
        .next()
        .expect("a chain");
    assert_eq!(c["origin"]["function"], "ib_umem_get");
    assert_eq!(c["origin"]["module"], "ib_uverbs");
    assert_eq!(c["errno"], 14);
    assert_eq!(c["comm"], "verbs_fail");
    assert_eq!(c["tid"], 277);
    assert_eq!(c["functions"][0], "ib_uverbs_reg_mr");
    assert_eq!(c["modules"][3], "ib_uverbs");

    // the same records as a raw file cut into one-record windows: open chains are held
    // across the windows, the chains are the same
    let recorded = std::fs::read_to_string(data("rxe-6.12.replay.jsonl")).expect("r");
    let mut raw = Vec::new();
    for l in recorded.lines() {
        let v: Value = serde_json::from_str(l).expect("json");
        if let Some(h) = v["rec"].as_str() {
            for i in (0..h.len()).step_by(2) {
                raw.push(u8::from_str_radix(&h[i..i + 2], 16).expect("hex"));
            }
        }
    }
    assert_eq!(raw.len(), 26 * manifest::RECORD_SIZE);
    let raw_file = d.join("records.bin");
    std::fs::write(&raw_file, &raw).expect("write");
    let out1 = d.join("w1.jsonl");
    let o = bin()
        .args(["collect", "--manifest"])
        .arg(data("rxe-6.12.manifest.yaml"))
        .arg("--replay")
        .arg(&raw_file)
        .args(["--replay-window", "1", "--out"])
        .arg(&out1)
        .output()
        .expect("run probegen");
    assert!(o.status.success());
    let snaps1 = snapshots(&out1);
    assert_eq!(snaps1.len(), 27, "one window per record plus the final one");
    assert_eq!(chain_lines(&snaps1), want);
    // each chain is reported in the window of its outermost record
    let at: Vec<u64> = snaps1
        .iter()
        .filter(|s| s["chains"].as_array().is_some_and(|a| !a.is_empty()))
        .filter_map(|s| s["snapshot"].as_u64())
        .collect();
    assert_eq!(at, [3, 7, 12, 16, 20, 25]);
    let _ = std::fs::remove_dir_all(&d);
}

/// The library warns through the run's hooks and the binary prints: a replay recorded with
/// another manifest than the one it is replayed with says so on stderr, once; the matching
/// manifest says nothing.
#[test]
fn a_replay_under_another_manifest_is_warned_about_by_the_binary() {
    let d = tmp("other-manifest");
    let same = d.join("same.jsonl");
    let (o, _) = replay(&[], &same);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("replay recorded with manifest"), "{err}");
    // the same probes, other bytes: another hash
    let text = std::fs::read_to_string(data("rxe-6.12.manifest.yaml")).expect("manifest");
    let other = d.join("manifest.yaml");
    std::fs::write(&other, format!("{text}# edited\n")).expect("write manifest");
    let (o, _) = replay_under(&other, &[], &d.join("other.jsonl"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let warnings: Vec<&str> = err
        .lines()
        .filter(|l| {
            l.starts_with("probegen collect: warning: replay recorded with manifest sha256:")
        })
        .collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(warnings[0].contains(", replayed with sha256:"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}

/// The owner tables of docs/operations.md are the code's: the site classes' owners are
/// `collector::owner_of_class` row by row, and the spread table's tickets and owners are
/// `deploy/clickhouse/tickets.sql`'s (so neither can drift into hand-written rules).
#[test]
fn the_readme_owner_tables_are_the_codes() {
    use manifest::{Layer, SiteClass};
    let readme =
        std::fs::read_to_string(repo().join("docs/operations.md")).expect("docs/operations.md");
    let cell = |key: &str| {
        let row = readme
            .lines()
            .map(str::trim_start)
            .find(|l| l.starts_with(&format!("| `{key}` |")))
            .unwrap_or_else(|| panic!("docs/operations.md has no row for `{key}`"));
        row.trim_end_matches('|')
            .rsplit('|')
            .next()
            .unwrap_or("")
            .trim()
            .to_string()
    };
    for &c in SiteClass::ALL {
        let owner = cell(&c.to_string());
        let (core, vendor) = (
            collector::owner_of_class(c, Layer::Core),
            collector::owner_of_class(c, Layer::Vendor),
        );
        if core == vendor {
            assert_eq!(owner, format!("`{core}`"), "{c}");
        } else {
            assert!(owner.contains("origin's layer"), "{c}: {owner}");
        }
    }
    let sql = std::fs::read_to_string(repo().join("deploy/clickhouse/tickets.sql")).expect("sql");
    let sql: String = sql.split_whitespace().collect::<Vec<_>>().join(" ");
    for (ticket, owners, clause) in [
        ("job", &["application"][..], "ticket = 'job', 'application'"),
        (
            "host",
            &["resources", "device-firmware"][..],
            "ticket = 'host', if(site_owner = 'resources', 'resources', 'device-firmware')",
        ),
        (
            "regression",
            &["verbs-core", "vendor-driver"][..],
            "'verbs-core', 'vendor-driver'),",
        ),
        (
            "fleet",
            &["the site's owner"][..],
            "site_owner) AS ticket_owner",
        ),
    ] {
        let owner = cell(ticket);
        for o in owners {
            assert!(owner.contains(o), "{ticket}: {owner}");
        }
        assert!(sql.contains(clause), "tickets.sql lacks {clause}");
        assert!(
            sql.contains(&format!("'{ticket}'")),
            "tickets.sql: {ticket}"
        );
    }
}
