//! Real client: Debian's `prometheus` server scrapes `probegen collect --replay ... --metrics`
//! on loopback every second, and `probegen_failures_total` read back through the Prometheus
//! HTTP API (`/api/v1/query`) must equal the replay's kernel failure counters, per probe.
//!
//! The replay is the guest recording `collector/tests/data/rxe-6.12.replay.jsonl`; the expected
//! values come from its last `counters` line (cumulative kernel totals) and the manifest's
//! probe ids. The collector keeps serving after the replay with `--linger`. Both processes are
//! killed on every path (a Drop guard). Without the `prometheus` binary (Debian package
//! `prometheus`, installed by `scripts/install-deps.sh`) the test fails; it never skips.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

const JOB: &str = "probegen";

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("collector/tests/data")
        .join(name)
}

/// The children and the temporary directory; killed, reaped and removed on drop (any path,
/// including a failed assertion).
struct Guard {
    dir: PathBuf,
    children: Vec<(&'static str, Child)>,
}

impl Guard {
    fn add(&mut self, name: &'static str, c: Child) -> usize {
        self.children.push((name, c));
        self.children.len() - 1
    }

    /// Kills and reaps one child (a prometheus that did not come up), keeping the others.
    fn kill(&mut self, i: usize) {
        let (_, mut c) = self.children.remove(i);
        let _ = c.kill();
        let _ = c.wait();
    }

    fn exited(&mut self, i: usize) -> Option<std::process::ExitStatus> {
        self.children[i].1.try_wait().ok().flatten()
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        for (_, c) in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `$PROBEGEN_PROMETHEUS`, else `prometheus` on `$PATH`, else `/usr/bin/prometheus`.
/// Panics (never skips) naming the script that installs it.
fn prometheus_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("PROBEGEN_PROMETHEUS").filter(|v| !v.is_empty()) {
        let p = PathBuf::from(p);
        assert!(
            p.is_file(),
            "$PROBEGEN_PROMETHEUS={} is not a file (the Debian package `prometheus` is installed \
             by `bash scripts/install-deps.sh`)",
            p.display()
        );
        return p;
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin")])
        .map(|d| d.join("prometheus"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "the `prometheus` server binary was not found on $PATH or in /usr/bin: install \
                 the Debian package `prometheus` with `bash scripts/install-deps.sh` (as root), \
                 or point $PROBEGEN_PROMETHEUS at it"
            )
        })
}

/// Per probe (function, module): the failures of the replay's last `counters` line.
fn expected_failures() -> BTreeMap<(String, String), u64> {
    let manifest: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(data("rxe-6.12.manifest.yaml")).expect("manifest"),
    )
    .expect("manifest yaml");
    let mut by_id = BTreeMap::new();
    for p in manifest["probes"].as_sequence().expect("probes") {
        let id = p["id"].as_u64().expect("id");
        let f = p["function"].as_str().expect("function").to_string();
        let m = p["module"].as_str().expect("module").to_string();
        by_id.insert(id, (f, m));
    }
    let replay = std::fs::read_to_string(data("rxe-6.12.replay.jsonl")).expect("replay");
    let last: Value = replay
        .lines()
        .rfind(|l| l.starts_with("{\"counters\""))
        .map(|l| serde_json::from_str(l).expect("counters line"))
        .expect("the replay has counters lines");
    let mut want = BTreeMap::new();
    for (id, n) in last["counters"]["failures"].as_object().expect("failures") {
        let id: u64 = id.parse().expect("probe id");
        let key = by_id
            .get(&id)
            .unwrap_or_else(|| panic!("probe {id} of the replay is not in the manifest"))
            .clone();
        assert!(
            want.insert(key.clone(), n.as_u64().expect("count"))
                .is_none(),
            "two probes labelled {key:?}"
        );
    }
    want
}

fn snapshots_expected() -> u64 {
    let replay = std::fs::read_to_string(data("rxe-6.12.replay.jsonl")).expect("replay");
    replay
        .lines()
        .filter(|l| l.starts_with("{\"counters\""))
        .count() as u64
        + 1
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind 127.0.0.1:0")
        .port()
}

/// Percent-encoding of a query parameter value.
fn urlencode(s: &str) -> String {
    let mut o = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            o.push(b as char);
        } else {
            o.push_str(&format!("%{b:02X}"));
        }
    }
    o
}

/// A minimal HTTP/1.0 GET (no chunked encoding in the reply): status and body.
fn http_get(addr: SocketAddr, path: &str) -> Result<(u16, String), String> {
    let mut c = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
        .map_err(|e| format!("connect {addr}: {e}"))?;
    c.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    c.set_write_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    write!(
        c,
        "GET {path} HTTP/1.0\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| format!("send: {e}"))?;
    let mut raw = Vec::new();
    c.read_to_end(&mut raw).map_err(|e| format!("read: {e}"))?;
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("no header end in {raw:?}"))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line in {head:?}"))?;
    Ok((status, body.to_string()))
}

/// `/api/v1/query?query=Q`: the result vector of a successful instant query.
fn query(prom: SocketAddr, q: &str) -> Result<Vec<Value>, String> {
    let (status, body) = http_get(prom, &format!("/api/v1/query?query={}", urlencode(q)))?;
    if status != 200 {
        return Err(format!("HTTP {status}: {body}"));
    }
    let v: Value = serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
    if v["status"] != "success" || v["data"]["resultType"] != "vector" {
        return Err(format!("unexpected reply {body}"));
    }
    Ok(v["data"]["result"].as_array().cloned().unwrap_or_default())
}

fn sample_value(s: &Value) -> f64 {
    s["value"][1]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no sample value in {s}"))
}

fn tail(p: &Path) -> String {
    let s = std::fs::read_to_string(p).unwrap_or_default();
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

#[test]
fn prometheus_scrapes_failures_total() {
    let prometheus = prometheus_bin();
    let want = expected_failures();
    assert!(
        want.values().any(|&n| n > 0),
        "the replay has no failures: nothing to check"
    );
    let want_snapshots = snapshots_expected();

    let dir = std::env::temp_dir().join(format!("pg-prometheus-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("mkdir");
    let mut g = Guard {
        dir: dir.clone(),
        children: Vec::new(),
    };

    // 1. the collector on the replay, serving /metrics on an ephemeral loopback port and
    //    lingering after the replay (killed by the guard long before the linger ends)
    let mut child = Command::new(env!("CARGO_BIN_EXE_probegen"))
        .args(["collect", "--manifest"])
        .arg(data("rxe-6.12.manifest.yaml"))
        .arg("--replay")
        .arg(data("rxe-6.12.replay.jsonl"))
        .arg("--out")
        .arg(dir.join("snapshots.jsonl"))
        .args(["--metrics", "127.0.0.1:0", "--linger", "300s"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn probegen collect");
    let stderr = child.stderr.take().expect("stderr");
    g.add("probegen collect", child);
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for l in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    let target: SocketAddr = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "no metrics address from the collector in 30 s: {seen:?}"
        );
        match rx.recv_timeout(left) {
            Ok(l) => {
                if let Some(a) = l
                    .strip_prefix("probegen collect: metrics on http://")
                    .and_then(|r| r.strip_suffix("/metrics"))
                {
                    break a.parse().expect("metrics address");
                }
                seen.push(l);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                panic!("the collector exited before serving metrics: {seen:?}")
            }
        }
    };
    assert!(target.ip().is_loopback(), "{target}");

    // 2. Prometheus on loopback, scraping the collector every second
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: {JOB}\n    static_configs:\n      - targets: ['{target}']\n"
        ),
    )
    .expect("write prometheus.yml");
    let log = dir.join("prometheus.log");
    let mut prom = None;
    for attempt in 0..3 {
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let tsdb = dir.join(format!("tsdb-{attempt}"));
        let c = Command::new(&prometheus)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", tsdb.display()))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--log.level=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("prometheus.log"))
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", prometheus.display()));
        let i = g.add("prometheus", c);
        let t0 = Instant::now();
        let ready = loop {
            if matches!(http_get(addr, "/-/ready"), Ok((200, _))) {
                break true;
            }
            if g.exited(i).is_some() || t0.elapsed() > Duration::from_secs(30) {
                break false;
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        if ready {
            prom = Some(addr);
            break;
        }
        eprintln!(
            "prometheus on {addr} not ready (attempt {}): {}",
            attempt + 1,
            tail(&log)
        );
        g.kill(i);
    }
    let prom = prom.unwrap_or_else(|| {
        panic!(
            "prometheus did not become ready in 3 attempts; last log:\n{}",
            tail(&log)
        )
    });

    // 3. wait for a scrape taken after the replay's final snapshot: then the counters are final
    let t0 = Instant::now();
    loop {
        let last = match query(prom, &format!("probegen_snapshots_total{{job=\"{JOB}\"}}")) {
            Ok(v) if v.len() == 1 && sample_value(&v[0]) == want_snapshots as f64 => break,
            Ok(v) => format!("{v:?}"),
            Err(e) => e,
        };
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no scrape with probegen_snapshots_total {want_snapshots} in 60 s; last answer: \
             {last}; up: {:?}; prometheus log:\n{}",
            query(prom, &format!("up{{job=\"{JOB}\"}}")),
            tail(&log)
        );
        std::thread::sleep(Duration::from_millis(250));
    }

    // 4. probegen_failures_total through the HTTP API, per probe
    let series = query(prom, &format!("probegen_failures_total{{job=\"{JOB}\"}}"))
        .expect("query probegen_failures_total");
    let mut got = BTreeMap::new();
    for s in &series {
        let m = &s["metric"];
        assert_eq!(m["instance"], target.to_string(), "{s}");
        let key = (
            m["function"].as_str().expect("function label").to_string(),
            m["module"].as_str().expect("module label").to_string(),
        );
        let v = sample_value(s);
        assert!(v >= 0.0 && v.fract() == 0.0, "{s}");
        assert!(got.insert(key.clone(), v as u64).is_none(), "{key:?} twice");
    }
    assert_eq!(
        got, want,
        "probegen_failures_total in Prometheus vs the replay"
    );
    let total: u64 = got.values().sum();
    eprintln!(
        "prometheus {prom} scraped {target}: {} series of probegen_failures_total, {total} \
         failures in all, equal to the replay",
        got.len()
    );
    assert!(
        g.exited(0).is_none(),
        "the collector exited while lingering"
    );
}
