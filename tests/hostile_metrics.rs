//! Issue 21, rows 9, 11 and 12: the exposition and its alerts, and the ClickHouse password,
//! against a hostile or unlucky world.
//!
//! * row 9: slow clients (a byte every 1.5 s, idle floods, an oversized request) never delay a
//!   scrape of `probegen collect --metrics`, ours or Debian's real `prometheus`, and the server
//!   closes them within its deadline;
//! * row 11: no message built from a malformed `--clickhouse` URL shows its password, a URL
//!   password and `$PROBEGEN_CLICKHOUSE_PASSWORD` are refused, a password file open to others
//!   is refused; with a password file (and with a systemd credential) rows reach a real
//!   `clickhouse-server` whose user has a password, and the running agent's argv and
//!   environment do not hold it;
//! * row 12: every `*_total` counter of something lost that the exposition prints is read by an
//!   alert rule, every metric the rules read is printed, and every alert has a promtool test.
//!
//! Missing `prometheus` or `clickhouse-server` fail the tests (never skip).

// A test reads as one scenario from setup to assertions; the 80-line limit is for the code.
#![allow(clippy::too_many_lines)]

mod common;

use std::collections::BTreeSet;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::replays::{jsonl_records, write_storm};
use common::servers::{
    data, free_port, metrics_address, prom_query, sample_value, spawn_collector, start_prometheus,
    tail, ClickHouse, Guard,
};

fn manifest() -> String {
    data("rxe-6.12.manifest.yaml").display().to_string()
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

fn deploy(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy/prometheus")
        .join(name)
}

/// One `GET /metrics` with a 3 s limit on every step: how long it took and the body.
fn scrape(addr: SocketAddr) -> Result<(Duration, String), String> {
    let t0 = Instant::now();
    let mut c = TcpStream::connect_timeout(&addr, Duration::from_secs(3))
        .map_err(|e| format!("connect: {e}"))?;
    c.set_read_timeout(Some(Duration::from_secs(3)))
        .and_then(|()| c.set_write_timeout(Some(Duration::from_secs(3))))
        .map_err(|e| e.to_string())?;
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .map_err(|e| format!("send: {e}"))?;
    let mut raw = Vec::new();
    c.read_to_end(&mut raw)
        .map_err(|e| format!("read after {:.1} s: {e}", t0.elapsed().as_secs_f64()))?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let Some(("HTTP/1.1 200 OK", rest)) = text.split_once("\r\n") else {
        return Err(format!("not a 200: {text:?}"));
    };
    let body = rest.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    Ok((t0.elapsed(), body.to_string()))
}

/// Three scrapes 300 ms apart, each answered in full within `within`; their times.
fn three_scrapes(addr: SocketAddr, within: Duration, what: &str) -> Vec<Duration> {
    let mut times = Vec::new();
    for i in 0..3 {
        let (took, body) = scrape(addr).unwrap_or_else(|e| panic!("{what}: scrape {i}: {e}"));
        assert!(
            took < within,
            "{what}: scrape {i} took {took:?} (limit {within:?})"
        );
        assert!(body.contains("probegen_snapshots_total "), "{what}: {body}");
        times.push(took);
        std::thread::sleep(Duration::from_millis(300));
    }
    times
}

/// Clients that trickle a request, one byte every 1.5 s, and reconnect when the server
/// closes them, until stopped. Each returns how long each of its connections lived.
struct Lorises {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<Vec<Duration>>>,
}

impl Lorises {
    fn start(addr: SocketAddr, n: usize) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..n)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut lived = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        if let Some(d) = trickle_until_closed(addr, &stop) {
                            lived.push(d);
                        }
                    }
                    lived
                })
            })
            .collect();
        Lorises { stop, threads }
    }

    /// Stops them; every closed connection's lifetime.
    fn stop(self) -> Vec<Duration> {
        self.stop.store(true, Ordering::Relaxed);
        self.threads
            .into_iter()
            .flat_map(|t| t.join().expect("loris thread"))
            .collect()
    }
}

/// One slow connection: a byte of `GET /metrics ...` every 1.5 s, checking every 50 ms
/// whether the server closed it. Its lifetime when closed by the server; None when stopped
/// first.
fn trickle_until_closed(addr: SocketAddr, stop: &AtomicBool) -> Option<Duration> {
    let request = b"GET /metrics HTTP/1.1\r\nHost: slow\r\n\r\n";
    let mut c = TcpStream::connect(addr).ok()?;
    let t0 = Instant::now();
    c.set_read_timeout(Some(Duration::from_millis(50))).ok()?;
    let mut sent = 0;
    let mut next_byte = t0;
    let mut b = [0u8; 256];
    loop {
        if stop.load(Ordering::Relaxed) {
            return None;
        }
        if Instant::now() >= next_byte && sent < request.len() {
            if c.write_all(&request[sent..=sent]).is_err() {
                return Some(t0.elapsed());
            }
            sent += 1;
            next_byte += Duration::from_millis(1500);
        }
        match c.read(&mut b) {
            // closed (or answered: never, the request is never complete in time)
            Ok(_) => return Some(t0.elapsed()),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return Some(t0.elapsed()),
        }
    }
}

/// The resident memory of a process, in kB.
fn rss_kb(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// A collector replaying the guest recording and serving `--metrics` (lingering); its index,
/// the metrics address, and its stderr lines (kept: the collector dies printing to a closed
/// pipe), once it serves the first snapshot's counters.
fn serving_collector(g: &mut Guard, extra: &[&str]) -> (usize, SocketAddr, mpsc::Receiver<String>) {
    let out = path(&g.dir.join("snapshots.jsonl"));
    let mut args = vec![
        "--manifest".to_string(),
        manifest(),
        "--replay".into(),
        path(&data("rxe-6.12.replay.jsonl")),
        "--out".into(),
        out,
        "--metrics".into(),
        "127.0.0.1:0".into(),
        "--linger".into(),
        "300s".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (i, rx) = spawn_collector(g, "collect", &args);
    let addr = metrics_address(&rx);
    // served before the run starts (an empty page): wait for the counters
    let t0 = Instant::now();
    loop {
        match scrape(addr) {
            Ok((_, body)) if body.contains("probegen_snapshots_total ") => break,
            other => assert!(
                t0.elapsed() < Duration::from_secs(30),
                "no counters in 30 s: {other:?}; {:?}",
                rx.try_iter().collect::<Vec<_>>()
            ),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    (i, addr, rx)
}

#[test]
fn row_9_slow_clients_never_delay_a_scrape() {
    let mut g = Guard::new("pg-hostile-metrics-9");
    let (collector, addr, _stderr) = serving_collector(&mut g, &[]);
    let pid = g.children[collector].1.id();
    // the first answer (nothing slow yet)
    three_scrapes(addr, Duration::from_secs(2), "no slow client");
    let rss_before = rss_kb(pid);

    // Debian's prometheus scraping every second with a 1 s timeout, from now on
    let config = g.dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: probegen\n    static_configs:\n      - targets: ['{addr}']\n"
        ),
    )
    .expect("prometheus.yml");
    let prom = start_prometheus(&mut g, &config);

    // 1 slow client, then 16 (reconnecting as they are closed), each for longer than the
    // server's deadline; three scrapes meanwhile, each answered at once
    let mut lifetimes = Vec::new();
    for n in [1, 16] {
        let lorises = Lorises::start(addr, n);
        std::thread::sleep(Duration::from_millis(300));
        let times = three_scrapes(addr, Duration::from_secs(2), &format!("{n} slow clients"));
        eprintln!("{n} slow clients: scrapes took {times:?}");
        std::thread::sleep(Duration::from_millis(if n == 1 { 2500 } else { 6000 }));
        let lived = lorises.stop();
        assert!(
            !lived.is_empty(),
            "{n} slow clients: the server closed none of them"
        );
        lifetimes.extend(lived);
    }
    // the server closes a slow connection at its 2 s deadline (checked every 50 ms)
    let longest = lifetimes.iter().max().copied().unwrap_or_default();
    let shortest = lifetimes.iter().min().copied().unwrap_or_default();
    eprintln!(
        "{} slow connections closed by the server after {shortest:?} .. {longest:?}",
        lifetimes.len()
    );
    assert!(longest < Duration::from_secs(3), "{lifetimes:?}");

    // prometheus scraped through the slow clients: every scrape of the last 6 s succeeded
    let t0 = Instant::now();
    loop {
        let up = prom_query(prom, "count_over_time(up{job=\"probegen\"}[6s])");
        let min = prom_query(prom, "min_over_time(up{job=\"probegen\"}[6s])");
        if let (Ok(up), Ok(min)) = (&up, &min) {
            if up.len() == 1 && sample_value(&up[0]) >= 4.0 {
                assert_eq!(
                    sample_value(&min[0]),
                    1.0,
                    "a prometheus scrape failed while slow clients were connected; log:\n{}",
                    tail(&g.dir.join("prometheus.log"))
                );
                eprintln!(
                    "prometheus: {} scrapes in the last 6 s, all up",
                    sample_value(&up[0])
                );
                break;
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "prometheus has no 4 scrapes in 6 s: {up:?} {min:?}; log:\n{}",
            tail(&g.dir.join("prometheus.log"))
        );
        std::thread::sleep(Duration::from_millis(500));
    }

    // a flood: 200 idle connections at once; a scrape after them is answered, and all of them
    // are closed (the oldest to make room, the rest at their deadline)
    let mut idle: Vec<TcpStream> = (0..200)
        .map(|_| TcpStream::connect(addr).expect("connect"))
        .collect();
    three_scrapes(addr, Duration::from_secs(2), "200 idle connections");
    let t0 = Instant::now();
    for c in &mut idle {
        c.set_read_timeout(Some(Duration::from_secs(4)))
            .expect("timeout");
        let mut b = [0u8; 16];
        let r = c.read(&mut b);
        assert!(
            matches!(r, Ok(0))
                || r.as_ref()
                    .is_err_and(|e| e.kind() == ErrorKind::ConnectionReset),
            "an idle connection was not closed: {r:?}"
        );
    }
    assert!(t0.elapsed() < Duration::from_secs(4));
    drop(idle);

    // an oversized request: refused (431) or cut, never read to the end; the memory stays
    let mut big = TcpStream::connect(addr).expect("connect");
    big.set_write_timeout(Some(Duration::from_secs(3)))
        .expect("timeout");
    let chunk = [b'a'; 64 * 1024];
    let mut sent = 0usize;
    while sent < 64 << 20 {
        if big.write_all(&chunk).is_err() {
            break;
        }
        sent += chunk.len();
    }
    assert!(
        sent < 64 << 20,
        "the server took 64 MiB of request without closing"
    );
    three_scrapes(addr, Duration::from_secs(2), "after an oversized request");
    let rss_after = rss_kb(pid);
    eprintln!(
        "oversized request cut after {sent} bytes; collector RSS {rss_before} kB -> {rss_after} kB"
    );
    assert!(
        rss_after < rss_before + 16 * 1024,
        "RSS grew from {rss_before} kB to {rss_after} kB"
    );
    assert!(g.exited(collector).is_none(), "the collector exited");
}

// ------------------------------------------------------------------------------- row 11 ---

const MARK: &str = "pgHostileMarkS3cret";

/// `probegen collect` on the replay with `extra` and `env`; (exit code, stdout + stderr,
/// the JSONL if any). Killed after 20 s (a hang is a failure, not a wait).
fn collect_once(dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let out = dir.join("refused.jsonl");
    let _ = std::fs::remove_file(&out);
    let mut c = Command::new(env!("CARGO_BIN_EXE_probegen"));
    c.args(["collect", "--manifest", &manifest(), "--replay"])
        .arg(data("rxe-6.12.replay.jsonl"))
        .arg("--out")
        .arg(&out)
        .args(extra)
        .env_remove("CREDENTIALS_DIRECTORY")
        .env_remove("PROBEGEN_CLICKHOUSE_PASSWORD")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    let mut child = c.spawn().expect("spawn probegen");
    let t0 = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if t0.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("probegen collect {extra:?} still running after 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = child.wait_with_output().expect("output");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let jsonl = std::fs::read_to_string(&out).unwrap_or_default();
    (o.status.code(), text, jsonl)
}

#[test]
fn row_11_no_message_shows_the_password() {
    let g = Guard::new("pg-hostile-secret-11");
    let urls = [
        format!("http://u:{MARK}@127.0.0.1:99999"),
        format!("http://u:{MARK}@127.0.0.1:port"),
        format!("http://u:{MARK}@127.0.0.1:8123"),
        format!("http://u:{MARK}@ch/db"),
        format!("http://u:{MARK}@ch?x=1"),
        format!("http://u:{MARK}@ch/?database=a;b"),
        format!("https://u:{MARK}@ch"),
        format!("ftp://u:{MARK}@ch"),
        format!("u:{MARK}@ch:8123"),
        format!("http://u:{MARK}@"),
        format!("http://u:pg/{MARK}@ch"),
        format!("http://u:pg?{MARK}@ch:1"),
        format!("http://{MARK}%zz@ch"),
        format!("http://{MARK}%ff@ch"),
        format!("http://u:{MARK}@@ch:70000"),
    ];
    for url in &urls {
        let (code, text, jsonl) = collect_once(&g.dir, &["--clickhouse", url], &[]);
        assert_eq!(code, Some(2), "{url}: {text}");
        assert_eq!(text.lines().count(), 1, "{url}: {text}");
        assert!(!text.contains(MARK), "{url}: {text}");
        assert!(!jsonl.contains(MARK), "{url}: the JSONL holds the password");
    }
    let (_, text, _) = collect_once(&g.dir, &["--clickhouse", &urls[2]], &[]);
    assert!(
        text.contains("put it in --clickhouse-password-file"),
        "{text}"
    );
    eprintln!(
        "{} malformed URLs: exit 2, one line, no password; e.g. {text}",
        urls.len()
    );

    // the old environment variable: refused, named, its value never shown
    let (code, text, _) = collect_once(
        &g.dir,
        &["--clickhouse", "http://127.0.0.1:1"],
        &[("PROBEGEN_CLICKHOUSE_PASSWORD", MARK)],
    );
    assert_eq!(code, Some(2), "{text}");
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.contains("$PROBEGEN_CLICKHOUSE_PASSWORD"), "{text}");
    assert!(!text.contains(MARK), "{text}");

    // password files open to others, or not files: refused, named, never shown
    let pw = |name: &str, mode: u32| {
        let p = g.dir.join(name);
        std::fs::write(&p, format!("{MARK}\n")).expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod");
        p
    };
    let fifo = g.dir.join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo")
        .success());
    for (file, want) in [
        (pw("group-readable", 0o640), "mode 0640"),
        (pw("world-readable", 0o644), "mode 0644"),
        (fifo, "not a regular file"),
        (g.dir.clone(), "not a regular file"),
        (g.dir.join("missing"), "No such file"),
    ] {
        let (code, text, _) = collect_once(
            &g.dir,
            &[
                "--clickhouse",
                "http://127.0.0.1:1",
                "--clickhouse-password-file",
                &path(&file),
            ],
            &[],
        );
        assert_eq!(code, Some(2), "{}: {text}", file.display());
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(text.contains(&path(&file)) && text.contains(want), "{text}");
        assert!(!text.contains(MARK), "{text}");
    }
}

/// Runs a paced storm replay against `ch` for host `host`; while it runs, the agent's argv
/// and environment must not hold the password. Returns the JSONL's record count.
fn send_storm(g: &mut Guard, ch: &ClickHouse, host: &str, extra: &[&str]) -> usize {
    let storm = g.dir.join(format!("{host}.replay.jsonl"));
    write_storm(&storm, 15);
    let out = g.dir.join(format!("{host}.jsonl"));
    let url = ch.url();
    let mut args = vec![
        "--manifest".to_string(),
        manifest(),
        "--replay".into(),
        path(&storm),
        "--replay-window".into(),
        "26".into(),
        "--replay-pace".into(),
        "200ms".into(),
        "--out".into(),
        path(&out),
        "--host".into(),
        host.into(),
        "--clickhouse".into(),
        url,
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (i, rx) = spawn_collector(g, host, &args);
    let pid = g.children[i].1.id();
    // while it runs (15 windows, 200 ms apart): once rows arrive, read its argv and environment
    let t0 = Instant::now();
    let q = format!("SELECT count() FROM probegen.records FINAL WHERE host = '{host}'");
    while ch.count(&q) == 0 {
        assert!(
            g.exited(i).is_none(),
            "exited before any row: {:?}",
            rx.try_iter().collect::<Vec<_>>()
        );
        assert!(t0.elapsed() < Duration::from_secs(30), "no row in 30 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).expect("cmdline");
    let environ = std::fs::read(format!("/proc/{pid}/environ")).expect("environ");
    assert!(g.exited(i).is_none(), "read /proc after the agent exited");
    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    let environ = String::from_utf8_lossy(&environ).into_owned();
    assert!(cmdline.contains("--clickhouse"), "{cmdline}");
    assert!(
        !cmdline.contains(&ch.password),
        "argv holds the password: {cmdline}"
    );
    assert!(
        !environ.contains(&ch.password),
        "the environment holds the password"
    );
    eprintln!("{host}: argv `{cmdline}`, environment without the password");
    // then it ends by itself
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = g.exited(i) {
            break st;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "still running");
        std::thread::sleep(Duration::from_millis(50));
    };
    let lines: Vec<String> = rx.try_iter().collect();
    assert!(status.success(), "{status}: {lines:#?}");
    for l in &lines {
        assert!(!l.contains(&ch.password), "{l}");
    }
    let (records, _) = jsonl_records(&out);
    assert_eq!(ch.count(&q), records as u64, "{lines:#?}");
    records
}

#[test]
fn row_11_password_file_and_credential_reach_a_real_clickhouse() {
    let mut g = Guard::new("pg-hostile-secret-11-ch");
    let ch = ClickHouse::start(&mut g);
    ch.create_tables(&[]);
    // 1. --clickhouse-password-file, with no credential around (so the file is what works)
    let secret_dir = g.dir.join("secret");
    std::fs::create_dir_all(&secret_dir).expect("mkdir");
    let file = secret_dir.join("clickhouse-password");
    std::fs::rename(&ch.password_file, &file).expect("move the password file");
    let records = send_storm(
        &mut g,
        &ch,
        "gpu-pwfile",
        &["--clickhouse-password-file", &path(&file)],
    );
    eprintln!("password file: {records} records in the JSONL == rows in ClickHouse");
    // without it (and no credential) ClickHouse refuses the inserts: the password is needed
    let out = g.dir.join("nopw.jsonl");
    let o = Command::new(env!("CARGO_BIN_EXE_probegen"))
        .args(["collect", "--manifest", &manifest(), "--replay"])
        .arg(data("rxe-6.12.replay.jsonl"))
        .args([
            "--out",
            &path(&out),
            "--host",
            "gpu-nopw",
            "--clickhouse",
            &ch.url(),
        ])
        .args(["--clickhouse-flush", "1s"])
        .env_remove("CREDENTIALS_DIRECTORY")
        .output()
        .expect("probegen");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        ch.count("SELECT count() FROM probegen.records WHERE host = 'gpu-nopw'"),
        0
    );
    // 2. the systemd credential: $CREDENTIALS_DIRECTORY/clickhouse-password (what
    //    spawn_collector passes when the file is there), no flag
    std::fs::rename(&file, &ch.password_file).expect("move the password file back");
    std::fs::set_permissions(&ch.password_file, std::fs::Permissions::from_mode(0o400))
        .expect("chmod 400");
    let records = send_storm(&mut g, &ch, "gpu-credential", &[]);
    eprintln!("systemd credential: {records} records in the JSONL == rows in ClickHouse");
}

// ------------------------------------------------------------------------------- row 12 ---

/// Counters that count what happened, not what was lost: no alert needed.
const NOT_LOSS: &[&str] = &[
    "probegen_calls_total",
    "probegen_failures_total",
    "probegen_errno_total",
    "probegen_records_total",
    "probegen_chains_total",
    "probegen_snapshots_total",
    // what a sink delivered (`probegen_sink_*{sink}`)
    "probegen_sink_sent_batches_total",
    "probegen_sink_sent_records_total",
    // the agent's own cost (live runs)
    "probegen_agent_cpu_seconds_total",
    "probegen_bpf_run_seconds_total",
    "probegen_bpf_runs_total",
    // the baseline's success traces (`--baseline`) are a sample: a trace the baseline ring has
    // no room for never takes a failure record's place (tests/baseline_e2e.rs), and the
    // snapshot's `baseline.records` keeps received + dropped == produced
    "probegen_baseline_successes_total",
    "probegen_baseline_traces_produced_total",
    "probegen_baseline_traces_received_total",
    "probegen_baseline_traces_dropped_total",
];

/// `probegen_*` names in `text` (identifiers that start with it).
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("probegen_") {
        let before = rest[..i].chars().next_back();
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        // not the tail of a longer identifier, not a recording rule (`probegen:...`)
        if !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            names.insert(tail[..end].to_string());
        }
        rest = &tail[end..];
    }
    names
}

#[test]
fn row_12_every_loss_counter_has_an_alert() {
    // the exposition with every family present: ClickHouse on (a port nothing listens on)
    let mut g = Guard::new("pg-hostile-metrics-12");
    let dead = format!("http://127.0.0.1:{}", free_port());
    let (_, addr, _stderr) = serving_collector(
        &mut g,
        &[
            "--clickhouse",
            &dead,
            "--clickhouse-spool-bytes",
            "123456",
            "--clickhouse-timeout",
            "1s",
        ],
    );
    let t0 = Instant::now();
    let body = loop {
        let body = scrape(addr).map_or_else(|e| e, |(_, b)| b);
        if body.contains("probegen_sink_send_errors_total{sink=\"clickhouse\"}")
            && !body.contains("probegen_snapshots_total 0\n")
        {
            break body;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "{body}");
        std::thread::sleep(Duration::from_millis(200));
    };
    let counters: BTreeSet<String> = body
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .map(str::to_string)
        .collect();
    let printed: BTreeSet<String> = body
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect();
    for c in &counters {
        assert!(c.ends_with("_total"), "counter {c} without _total");
    }

    // the alert rules and the metrics each reads
    let rules: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(deploy("probegen-rules.yml")).expect("rules"),
    )
    .expect("rules yaml");
    let mut alerted = BTreeSet::new();
    let mut read_by_rules = BTreeSet::new();
    let mut alerts = Vec::new();
    for group in rules["groups"].as_sequence().expect("groups") {
        for rule in group["rules"].as_sequence().expect("rules") {
            let names = metric_names(rule["expr"].as_str().expect("expr"));
            if let Some(a) = rule["alert"].as_str() {
                alerts.push(a.to_string());
                alerted.extend(names.iter().cloned());
            }
            read_by_rules.extend(names);
        }
    }
    let losses: Vec<&String> = counters
        .iter()
        .filter(|c| !NOT_LOSS.contains(&c.as_str()))
        .collect();
    let unalerted: Vec<&&String> = losses.iter().filter(|c| !alerted.contains(**c)).collect();
    assert!(
        unalerted.is_empty(),
        "loss counters of the exposition no alert reads: {unalerted:?} (add an alert to \
         deploy/prometheus/probegen-rules.yml, or to NOT_LOSS if it counts no loss)"
    );
    // the other way: a rule reading a name the exposition never prints would never fire
    // (`probegen_no_set` is printed only while a `--bundle` agent waits for a set:
    // tests/bundle.rs scrapes it there; `probegen_port_counter_total` only by a live agent on
    // a host with RDMA ports: tests/collector_e2e.rs scrapes it in the testbed; the provider
    // stage's families only by a live agent with `--provider-probes`: sink-prometheus's
    // `the_providers_error_completions_by_status_and_the_libraries_by_state` renders them)
    let printed_elsewhere = [
        "probegen_no_set",
        "probegen_port_counter_total",
        "probegen_provider_error_completions_dropped_total",
    ];
    let unknown: Vec<&String> = read_by_rules
        .iter()
        .filter(|n| !printed.contains(*n) && !printed_elsewhere.contains(&n.as_str()))
        .collect();
    assert!(
        unknown.is_empty(),
        "rules read metrics never printed: {unknown:?}"
    );
    // and every alert has a promtool unit test
    let tests = std::fs::read_to_string(deploy("probegen-rules.test.yml")).expect("rules tests");
    let untested: Vec<&String> = alerts
        .iter()
        .filter(|a| !tests.contains(&format!("alertname: {a}\n")))
        .collect();
    assert!(
        untested.is_empty(),
        "alerts without a promtool test: {untested:?}"
    );
    // the spool alert's limit, from the agent's flag through the sink's status
    assert!(
        body.contains("probegen_sink_spool_limit_bytes{sink=\"clickhouse\"} 123456\n"),
        "{body}"
    );
    eprintln!(
        "{} loss counters, each read by an alert: {losses:?}; {} alerts, each tested",
        losses.len(),
        alerts.len()
    );
}
