//! The ClickHouse sink in a hostile or unlucky world (issue 21): a spool directory another
//! user made first, a server that trickles, answers without end or not ClickHouse's, a 401,
//! batches torn or changed on disk, two collectors on one spool, a full disk, a table that
//! fails for good, a limit and a sequence number at their edges. One test per row of the
//! issue's table (`row_<N>_...`), each counting: records in the JSONL == rows that arrived
//! (a fake server's count, or the real clickhouse-server's under FINAL) + what the sink
//! counted as lost, and the spool accounts for every batch.
//!
//! Fake servers are threads on 127.0.0.1 in the test; the real server is Debian's 18.16
//! (tests/common/servers.rs). Runs as root (CI does): the tests that need another user chown
//! to `nobody` and fail loudly otherwise.

// A test reads as one scenario from setup to assertions; the 80-line limit is for the code.
#![allow(clippy::too_many_lines)]

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use common::replays::{frame_v2, jsonl_records, write_storm};
use common::servers::{data, free_port, spawn_collector, ClickHouse, Guard};
use serde_json::Value;

fn manifest() -> String {
    data("rxe-6.12.manifest.yaml").display().to_string()
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions
    unsafe { libc::geteuid() == 0 }
}

/// A URL where nothing listens: every send fails at connect, batches stay spooled.
fn closed_url() -> String {
    format!("http://127.0.0.1:{}/", free_port())
}

/// `collect` over a storm replay: `windows` windows of the guest recording's 26 records,
/// `pace` apart, to `out`, with `extra` flags.
fn storm_args(g: &Guard, windows: usize, pace: &str, out: &Path, extra: &[&str]) -> Vec<String> {
    let storm = g.dir.join(format!("storm-{windows}.jsonl"));
    if !storm.exists() {
        write_storm(&storm, windows);
    }
    let mut a: Vec<String> = [
        "--manifest",
        &manifest(),
        "--replay",
        &path(&storm),
        "--replay-window",
        "26",
        "--replay-pace",
        pace,
        "--out",
        &path(out),
        "--host",
        "gpu-hostile",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

fn spawn(g: &mut Guard, name: &str, args: &[String]) -> (usize, mpsc::Receiver<String>) {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    spawn_collector(g, name, &args)
}

/// Waits for child `i` to exit (at most `within`): its exit code and stderr lines.
fn wait_exit(
    g: &mut Guard,
    i: usize,
    rx: &mpsc::Receiver<String>,
    within: Duration,
) -> (Option<i32>, Vec<String>) {
    let t0 = Instant::now();
    let mut lines = Vec::new();
    loop {
        lines.extend(rx.try_iter());
        if let Some(st) = g.exited(i) {
            std::thread::sleep(Duration::from_millis(100));
            lines.extend(rx.try_iter());
            return (st.code(), lines);
        }
        assert!(t0.elapsed() < within, "collector still running: {lines:#?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What a collector run left: its exit code and stderr lines, the last snapshot's `clickhouse`
/// status, and the JSONL's records and snapshots.
struct Ended {
    code: Option<i32>,
    lines: Vec<String>,
    st: Value,
    records: usize,
    snaps: Vec<Value>,
}

/// Runs the collector with `args` (writing `out`) to its end, at most `within`.
fn run_to_end(g: &mut Guard, name: &str, args: &[String], out: &Path, within: Duration) -> Ended {
    let (i, rx) = spawn(g, name, args);
    let (code, lines) = wait_exit(g, i, &rx, within);
    let st = last_status(out);
    let (records, snaps) = jsonl_records(out);
    Ended {
        code,
        lines,
        st,
        records,
        snaps,
    }
}

/// Storm arguments against a closed port (nothing is ever sent) with a spool at `spool` and,
/// when given, its limit in bytes.
fn closed_spool_args(
    g: &Guard,
    windows: usize,
    out: &Path,
    spool: &Path,
    limit: Option<&str>,
) -> Vec<String> {
    let url = closed_url();
    let spool = path(spool);
    let mut extra = vec![
        "--clickhouse",
        &url,
        "--clickhouse-flush",
        "0s",
        "--clickhouse-spool",
        &spool,
    ];
    if let Some(l) = limit {
        extra.extend(["--clickhouse-spool-bytes", l]);
    }
    storm_args(g, windows, "0s", out, &extra)
}

/// The `clickhouse` status of the JSONL's last snapshot.
fn last_status(out: &Path) -> Value {
    let (_, snaps) = jsonl_records(out);
    snaps
        .last()
        .map(|s| s["clickhouse"].clone())
        .unwrap_or_else(|| panic!("no snapshot in {}", out.display()))
}

fn n(v: &Value, k: &str) -> u64 {
    v[k].as_u64()
        .unwrap_or_else(|| panic!("no `{k}` in the clickhouse status {v}"))
}

/// The records rows a batch file holds, as its header says (v2), or as its `records` part
/// has them (v1, the format before issue 21, so that the old code's spool can be measured).
fn batch_records(file: &Path) -> u64 {
    let b = std::fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let nl = b.iter().position(|&c| c == b'\n').expect("header line");
    let head = String::from_utf8_lossy(&b[..nl]).into_owned();
    if head.starts_with("probegen-batch/v1 ") {
        let rest = &b[nl + 1..];
        let pnl = rest.iter().position(|&c| c == b'\n').expect("part header");
        let len: usize = String::from_utf8_lossy(&rest[..pnl])
            .strip_prefix("records ")
            .and_then(|l| l.parse().ok())
            .expect("records part");
        let body = &rest[pnl + 1..(pnl + 1 + len).min(rest.len())];
        return body.iter().filter(|&&c| c == b'\n').count() as u64;
    }
    head.split(' ')
        .find_map(|f| f.strip_prefix("records="))
        .and_then(|r| r.split(':').next()?.parse().ok())
        .unwrap_or_else(|| panic!("{}: header {head:?}", file.display()))
}

/// The batch files of a spool, oldest first.
fn batch_files(spool: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(spool)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.to_string_lossy().ends_with(".batch"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Records in the spool's batch files.
fn spooled_records(spool: &Path) -> u64 {
    batch_files(spool).iter().map(|f| batch_records(f)).sum()
}

// ------------------------------------------------------------------ fake servers ---

/// Serves every connection on a thread with `handler`; the address.
fn serve(handler: impl Fn(TcpStream) + Send + Sync + 'static) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    let handler = Arc::new(handler);
    std::thread::spawn(move || {
        for c in l.incoming().map_while(Result::ok) {
            let h = handler.clone();
            std::thread::spawn(move || h(c));
        }
    });
    addr
}

/// Reads a request's head (up to the blank line); the request line.
fn read_head(c: &mut TcpStream) -> (String, usize) {
    let _ = c.set_read_timeout(Some(Duration::from_secs(10)));
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match c.read(&mut b) {
            Ok(1) => head.push(b[0]),
            _ => break,
        }
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let len = text
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    (text.lines().next().unwrap_or("").to_string(), len)
}

/// Lets the client send its body (`Expect: 100-continue`), as ClickHouse does.
fn go_on(c: &mut TcpStream) {
    let _ = c.write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
}

/// The table of an insert's request line.
fn table_of(request_line: &str) -> String {
    request_line
        .split("INSERT%20INTO%20")
        .nth(1)
        .and_then(|r| r.split("%20").next())
        .map(|t| t.rsplit('.').next().unwrap_or(t).to_string())
        .unwrap_or_default()
}

const CH_OK: &str = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-ClickHouse-Server-Display-Name: fake\r\nConnection: close\r\n\r\n";

/// A fake ClickHouse that takes every insert but those into `refuse` (404, code 60), and
/// counts the rows it took per table and the requests.
fn fake_clickhouse(
    refuse: &'static [&'static str],
) -> (SocketAddr, Arc<Mutex<BTreeMap<String, u64>>>) {
    let rows = Arc::new(Mutex::new(BTreeMap::new()));
    let r2 = rows.clone();
    let addr = serve(move |mut c| {
        let (line, len) = read_head(&mut c);
        go_on(&mut c);
        let mut body = vec![0u8; len];
        if c.read_exact(&mut body).is_err() {
            return;
        }
        let table = table_of(&line);
        if refuse.contains(&table.as_str()) {
            let msg = format!("Code: 60, e.displayText() = DB::Exception: Table probegen.{table} doesn't exist.\n");
            let _ = write!(
                c,
                "HTTP/1.1 404 Not Found\r\nContent-Length: {}\r\nX-ClickHouse-Server-Display-Name: fake\r\nConnection: close\r\n\r\n{msg}",
                msg.len()
            );
            return;
        }
        let lines = body.iter().filter(|&&b| b == b'\n').count() as u64;
        *r2.lock().expect("rows").entry(table).or_insert(0) += lines;
        let _ = c.write_all(CH_OK.as_bytes());
    });
    (addr, rows)
}

// ------------------------------------------------------------------------- rows ---

/// Row 1: a spool directory another user made first (under a 1777 directory) is refused,
/// so what it planted (`.next-seq.tmp` -> a root file, a batch -> a root-only file) is never
/// followed; in the agent's own spool, a planted link is set aside, never read or printed.
#[test]
fn row_1_spool_directory_of_another_user_is_refused() {
    assert!(
        is_root(),
        "this test needs euid 0 (to chown to nobody): run it as root"
    );
    let mut g = Guard::new("pg-hostile-1");
    let shared = g.dir.join("shared");
    std::fs::create_dir(&shared).expect("mkdir");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).expect("1777");
    let victim = g.dir.join("victim");
    std::fs::write(&victim, "precious\n").expect("victim");
    let secret = g.dir.join("secret");
    std::fs::write(&secret, "SECRET-LINE-42\n").expect("secret");
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).expect("600");
    let out = shared.join("out.jsonl");
    let spool = shared.join("out.jsonl.clickhouse-spool");
    let plant = |spool: &Path| {
        std::fs::create_dir_all(spool).expect("spool");
        std::os::unix::fs::symlink(&victim, spool.join(".next-seq.tmp")).expect("link");
        std::os::unix::fs::symlink(&secret, spool.join("00000000000000000000.batch"))
            .expect("link");
    };
    plant(&spool);
    std::fs::set_permissions(&spool, std::fs::Permissions::from_mode(0o777)).expect("777");
    let chown = |p: &Path| {
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).expect("c path");
        // SAFETY: a valid C string
        assert_eq!(
            unsafe { libc::lchown(c.as_ptr(), 65534, 65534) },
            0,
            "chown"
        );
    };
    for p in [
        &spool,
        &spool.join(".next-seq.tmp"),
        &spool.join("00000000000000000000.batch"),
    ] {
        chown(p);
    }
    let url = closed_url();
    let run = |g: &mut Guard, name: &str| {
        let args = storm_args(
            g,
            3,
            "0s",
            &out,
            &["--clickhouse", &url, "--clickhouse-flush", "0s"],
        );
        let (i, rx) = spawn(g, name, &args);
        wait_exit(g, i, &rx, Duration::from_secs(30))
    };
    // owned by another user: refused, one line, exit 2
    let (code, lines) = run(&mut g, "owned by nobody");
    eprintln!("another user's spool: exit {code:?}: {lines:?}");
    assert_eq!(code, Some(2), "{lines:#?}");
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(lines[0].contains("owned by uid 65534"), "{lines:#?}");
    // ours but writable by others: refused too
    std::fs::remove_dir_all(&spool).expect("rm");
    plant(&spool);
    std::fs::set_permissions(&spool, std::fs::Permissions::from_mode(0o777)).expect("777");
    let (code, lines) = run(&mut g, "mode 777");
    assert_eq!(code, Some(2), "{lines:#?}");
    assert!(
        lines[0].contains("writable by group or others"),
        "{lines:#?}"
    );
    // ours, 0700, with a link planted: set aside (counted), never followed
    std::fs::set_permissions(&spool, std::fs::Permissions::from_mode(0o700)).expect("700");
    let (code, lines) = run(&mut g, "own spool");
    assert_eq!(code, Some(0), "{lines:#?}");
    let all = lines.join("\n");
    assert!(
        !all.contains("SECRET-LINE"),
        "a file's content in the log: {all}"
    );
    assert_eq!(
        std::fs::read_to_string(&victim).expect("victim"),
        "precious\n"
    );
    assert_eq!(
        std::fs::read_to_string(&secret).expect("secret"),
        "SECRET-LINE-42\n"
    );
    let st = last_status(&out);
    let (records, snaps) = jsonl_records(&out);
    eprintln!(
        "own spool: {records} records in {} snapshots; status {st}",
        snaps.len()
    );
    assert_eq!(n(&st, "quarantined_batches"), 1, "the planted link: {all}");
    assert!(
        std::fs::symlink_metadata(spool.join("quarantine/00000000000000000000.batch"))
            .is_ok_and(|m| m.file_type().is_symlink())
    );
    // every snapshot's batch is spooled (nothing could be sent), nothing else lost
    assert_eq!(batch_files(&spool).len(), snaps.len());
    assert_eq!(spooled_records(&spool), records as u64);
    assert_eq!(n(&st, "lost_records"), 0);
    let mode = std::fs::metadata(&spool)
        .expect("spool")
        .permissions()
        .mode();
    assert_eq!(mode & 0o077, 0, "{mode:o}");
}

/// Row 2: a server that answers one byte a second (under `--clickhouse-timeout`, 2 s) no
/// longer stalls the sender (each request ends by its deadline, counted as a send error),
/// and SIGTERM stops the collector within the flush bound (1 s) and a second.
#[test]
fn row_2_trickling_server_neither_stalls_the_sender_nor_the_stop() {
    let mut g = Guard::new("pg-hostile-2");
    let addr = serve(|mut c| {
        let _ = read_head(&mut c);
        for b in b"HTTP/1.1 200 OK\r\nX-ClickHouse-Server-Display-Name: slow\r\n\r\n"
            .iter()
            .cycle()
        {
            if c.write_all(&[*b]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    });
    let out = g.dir.join("out.jsonl");
    let spool = g.dir.join("spool");
    let args = storm_args(
        &g,
        200,
        "200ms",
        &out,
        &[
            "--clickhouse",
            &format!("http://{addr}/"),
            "--clickhouse-timeout",
            "2s",
            "--clickhouse-flush",
            "1s",
            "--clickhouse-spool",
            &path(&spool),
        ],
    );
    let (i, rx) = spawn(&mut g, "collect", &args);
    std::thread::sleep(Duration::from_secs(6));
    let t0 = Instant::now();
    let st = g.terminate(i, Duration::from_secs(10));
    let took = t0.elapsed();
    let lines: Vec<String> = rx.try_iter().collect();
    let status = last_status(&out);
    let (records, snaps) = jsonl_records(&out);
    eprintln!(
        "trickle: stopped in {:.2} s ({st}); {records} records in {} snapshots; status {status}",
        took.as_secs_f64(),
        snaps.len()
    );
    assert!(st.success(), "{st}: {lines:#?}");
    assert!(
        took < Duration::from_millis(2500),
        "SIGTERM took {took:?}: {lines:#?}"
    );
    assert!(
        n(&status, "send_errors") >= 1,
        "each request ends by its deadline: {status}"
    );
    assert_eq!(n(&status, "sent_batches"), 0);
    // nothing was taken as inserted: every snapshot's batch is still spooled
    assert_eq!(batch_files(&spool).len(), snaps.len());
    assert_eq!(spooled_records(&spool), records as u64);
}

/// Row 3: one batch with a flipped byte, a directory named like a batch and a batch whose
/// rows ClickHouse refuses no longer block the queue: the first two are quarantined when
/// read, the third when the server refuses it alone while it takes the others; everything
/// else arrives (rows under FINAL == JSONL records - the lost ones counted).
#[test]
fn row_3_one_bad_batch_does_not_block_the_queue() {
    let mut g = Guard::new("pg-hostile-3");
    let ch = ClickHouse::start(&mut g);
    ch.create_tables(&[]);
    let spool = g.dir.join("spool");
    let out1 = g.dir.join("run1.jsonl");
    // run 1: the server unreachable, every batch stays spooled
    let args = closed_spool_args(&g, 6, &out1, &spool, None);
    let (i, rx) = spawn(&mut g, "run 1", &args);
    let (code, lines) = wait_exit(&mut g, i, &rx, Duration::from_secs(60));
    assert_eq!(code, Some(0), "{lines:#?}");
    let (records1, _) = jsonl_records(&out1);
    let files = batch_files(&spool);
    assert!(files.len() >= 4, "{files:?}");
    // one flipped byte in the second batch's rows
    let flipped = &files[1];
    let flipped_records = batch_records(flipped);
    let mut b = std::fs::read(flipped).expect("read");
    let at = b.len() - 40;
    b[at] ^= 0x01;
    std::fs::write(flipped, &b).expect("write");
    // a directory named like a batch (after the others)
    std::fs::create_dir(spool.join("00000000000000000500.batch")).expect("mkdir");
    // a well-formed batch (its header and checksum right) whose row ClickHouse refuses
    let bad_rows = [
        b"{\"host\":\"gpu-hostile\",\"seq\":\"not a number\"}\n".to_vec(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
    ];
    let seq_bad = 400u64;
    std::fs::write(
        spool.join(format!("{seq_bad:020}.batch")),
        frame_v2(seq_bad, &bad_rows),
    )
    .expect("bad batch");
    // run 2: the server up
    let out2 = g.dir.join("run2.jsonl");
    let args = storm_args(
        &g,
        6,
        "100ms",
        &out2,
        &[
            "--clickhouse",
            &ch.url(),
            "--clickhouse-flush",
            "60s",
            "--clickhouse-spool",
            &path(&spool),
        ],
    );
    let (i, rx) = spawn(&mut g, "run 2", &args);
    let (code, lines) = wait_exit(&mut g, i, &rx, Duration::from_secs(90));
    assert_eq!(code, Some(0), "{lines:#?}");
    let (records2, _) = jsonl_records(&out2);
    let st = last_status(&out2);
    let rows = ch.count("SELECT count() FROM probegen.records FINAL WHERE host = 'gpu-hostile'");
    let quarantine: Vec<String> = std::fs::read_dir(spool.join("quarantine"))
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    eprintln!(
        "bad batches: run 1 {records1} + run 2 {records2} records; ClickHouse {rows} rows; \
         flipped batch {flipped_records} records; quarantine {quarantine:?}; status {st}"
    );
    assert_eq!(n(&st, "quarantined_batches"), 3, "{lines:#?}");
    // the flipped batch's records and the refused batch's one row
    assert_eq!(n(&st, "lost_records"), flipped_records + 1);
    assert_eq!(rows, records1 as u64 + records2 as u64 - flipped_records);
    assert_eq!(batch_files(&spool).len(), 0, "the queue drained");
    assert_eq!(quarantine.len(), 3, "{quarantine:?}");
    for why in [
        "checksum mismatch",
        "not a regular file",
        "ClickHouse refuses its `records` rows",
    ] {
        assert!(
            lines.iter().any(|l| l.contains(why)),
            "no `{why}` line: {lines:#?}"
        );
    }
}

/// Row 7a: an answer without end is cut at a small cap (an error, counted), not read into
/// memory: the collector's peak RSS stays small.
#[test]
fn row_7_endless_answer_is_bounded() {
    let mut g = Guard::new("pg-hostile-7a");
    let addr = serve(|mut c| {
        let _ = read_head(&mut c);
        let _ = c.write_all(b"HTTP/1.1 200 OK\r\nX-ClickHouse-Server-Display-Name: x\r\n\r\n");
        let chunk = vec![b'a'; 1 << 20];
        // 200 MiB at most, so that the old code's read does not take the test machine down
        for _ in 0..200 {
            if c.write_all(&chunk).is_err() {
                return;
            }
        }
    });
    let out = g.dir.join("out.jsonl");
    let spool = g.dir.join("spool");
    let args = storm_args(
        &g,
        8,
        "250ms",
        &out,
        &[
            "--clickhouse",
            &format!("http://{addr}/"),
            "--clickhouse-timeout",
            "3s",
            "--clickhouse-flush",
            "1s",
            "--clickhouse-spool",
            &path(&spool),
        ],
    );
    let (i, rx) = spawn(&mut g, "collect", &args);
    let pid = g.children[i].1.id();
    let mut hwm_kb = 0u64;
    let t0 = Instant::now();
    while g.exited(i).is_none() && t0.elapsed() < Duration::from_secs(30) {
        if let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
            if let Some(v) = s
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            {
                hwm_kb = hwm_kb.max(v);
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let (code, lines) = wait_exit(&mut g, i, &rx, Duration::from_secs(30));
    let st = last_status(&out);
    let (records, snaps) = jsonl_records(&out);
    eprintln!("endless answer: peak RSS {hwm_kb} kB; {records} records; status {st}");
    assert_eq!(code, Some(0), "{lines:#?}");
    assert!(hwm_kb < 64 * 1024, "peak RSS {hwm_kb} kB");
    assert!(n(&st, "send_errors") >= 1, "{st}");
    assert_eq!(n(&st, "sent_batches"), 0);
    assert_eq!(batch_files(&spool).len(), snaps.len());
    assert_eq!(spooled_records(&spool), records as u64);
    assert!(
        lines
            .iter()
            .any(|l| l.contains("an answer longer than 64 KiB")),
        "{lines:#?}"
    );
}

/// Row 7b: a 200 that is not ClickHouse's (an HTML page, no X-ClickHouse headers) is not
/// taken as inserted: every batch stays spooled, each try a send error.
#[test]
fn row_7_html_200_is_not_an_insert() {
    let mut g = Guard::new("pg-hostile-7b");
    let addr = serve(|mut c| {
        let (_, len) = read_head(&mut c);
        go_on(&mut c);
        let mut body = vec![0u8; len];
        let _ = c.read_exact(&mut body);
        let page = "<html><body>Welcome to nginx!</body></html>\n";
        let _ = write!(
            c,
            "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
            page.len()
        );
    });
    let out = g.dir.join("out.jsonl");
    let spool = g.dir.join("spool");
    let args = storm_args(
        &g,
        10,
        "100ms",
        &out,
        &[
            "--clickhouse",
            &format!("http://{addr}/"),
            "--clickhouse-flush",
            "1s",
            "--clickhouse-spool",
            &path(&spool),
        ],
    );
    let Ended {
        code,
        lines,
        st,
        records,
        snaps,
    } = run_to_end(&mut g, "collect", &args, &out, Duration::from_secs(30));
    eprintln!(
        "html 200: {records} records in {} snapshots; status {st}",
        snaps.len()
    );
    assert_eq!(code, Some(0), "{lines:#?}");
    assert_eq!((n(&st, "sent_batches"), n(&st, "sent_records")), (0, 0));
    assert!(n(&st, "send_errors") >= 1);
    assert_eq!(batch_files(&spool).len(), snaps.len());
    assert_eq!(spooled_records(&spool), records as u64);
    assert!(
        lines.iter().any(|l| l.contains("not a ClickHouse answer")),
        "{lines:#?}"
    );
}

/// Row 7c: a 401 answered before the body was read is reported as what it is (with
/// ClickHouse's reason, never the password), not as a reset connection, and counted.
#[test]
fn row_7_401_is_an_authentication_failure() {
    let mut g = Guard::new("pg-hostile-7c");
    let addr = serve(|mut c| {
        let _ = read_head(&mut c);
        let msg = "Code: 193, e.displayText() = DB::Exception: Wrong password for user default, e.what() = DB::Exception\n";
        let _ = write!(
            c,
            "HTTP/1.1 401 Unauthorized\r\nX-ClickHouse-Server-Display-Name: fake\r\nWWW-Authenticate: Basic realm=\"ClickHouse server HTTP API\"\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{msg}",
            msg.len()
        );
        // close with the body unread (the peer gets a reset)
    });
    let out = g.dir.join("out.jsonl");
    let spool = g.dir.join("spool");
    // big windows: a body larger than the socket buffers
    let storm = g.dir.join("storm.jsonl");
    write_storm(&storm, 300);
    let url = format!("http://default@{addr}/");
    // the password as a host keeps it: a file of mode 0600 (never in argv or the environment)
    let password_file = g.dir.join("clickhouse-password");
    std::fs::write(&password_file, "hunter2-secret\n").expect("password file");
    std::fs::set_permissions(
        &password_file,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .expect("chmod");
    let args: Vec<String> = [
        "--clickhouse-password-file",
        &path(&password_file),
        "--manifest",
        &manifest(),
        "--replay",
        &path(&storm),
        "--replay-window",
        "2600",
        "--out",
        &path(&out),
        "--clickhouse",
        &url,
        "--clickhouse-flush",
        "1s",
        "--clickhouse-spool",
        &path(&spool),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let Ended {
        code,
        lines,
        st,
        records,
        snaps,
    } = run_to_end(&mut g, "collect", &args, &out, Duration::from_secs(60));
    eprintln!(
        "401: {records} records in {} snapshots; status {st}; {lines:#?}",
        snaps.len()
    );
    assert_eq!(code, Some(0), "{lines:#?}");
    let all = lines.join("\n");
    assert!(
        !all.contains("hunter2-secret"),
        "the password in the log: {all}"
    );
    assert!(!all.contains("reset by peer"), "{all}");
    assert!(
        all.contains("authentication failed (HTTP 401): Code: 193"),
        "{all}"
    );
    // the sink's own last line: the last snapshot's status can predate the first send (its
    // window closed before the 1 s flush on a loaded machine)
    let send_errors = lines.iter().find_map(|l| {
        l.split_once("clickhouse: sent 0 batches")?
            .1
            .rsplit_once("send errors ")?
            .1
            .parse::<u64>()
            .ok()
    });
    assert!(send_errors.is_some_and(|e| e >= 1), "{lines:#?}");
    assert_eq!(n(&st, "sent_batches"), 0);
    assert_eq!(spooled_records(&spool), records as u64);
}

/// Row 8: batches cut mid-record and at a part boundary are quarantined and counted (one
/// line naming each file), not skipped as sent: rows the server took == JSONL records - the
/// records counted lost.
#[test]
fn row_8_cut_batches_are_quarantined_and_counted() {
    let mut g = Guard::new("pg-hostile-8");
    let spool = g.dir.join("spool");
    let out1 = g.dir.join("run1.jsonl");
    let args = closed_spool_args(&g, 5, &out1, &spool, None);
    let (i, rx) = spawn(&mut g, "run 1", &args);
    let (code, lines) = wait_exit(&mut g, i, &rx, Duration::from_secs(60));
    assert_eq!(code, Some(0), "{lines:#?}");
    let (records1, _) = jsonl_records(&out1);
    let files = batch_files(&spool);
    assert!(files.len() >= 3, "{files:?}");
    // cut mid-record
    let (a, b) = (&files[0], &files[1]);
    let (a_records, b_records) = (batch_records(a), batch_records(b));
    let bytes = std::fs::read(a).expect("a");
    std::fs::write(a, &bytes[..bytes.len() - 200]).expect("cut a");
    // cut at the boundary before the snapshots part (the other parts whole)
    let bytes = std::fs::read(b).expect("b");
    let head =
        String::from_utf8_lossy(&bytes[..bytes.iter().position(|&c| c == b'\n').expect("nl")])
            .into_owned();
    let snap_bytes: usize = head
        .split(' ')
        .find_map(|f| f.strip_prefix("snapshots="))
        .and_then(|v| v.split(':').nth(1)?.parse().ok())
        .expect("snapshots part");
    std::fs::write(b, &bytes[..bytes.len() - snap_bytes]).expect("cut b");
    let (addr, rows) = fake_clickhouse(&[]);
    let out2 = g.dir.join("run2.jsonl");
    let args = storm_args(
        &g,
        5,
        "50ms",
        &out2,
        &[
            "--clickhouse",
            &format!("http://{addr}/"),
            "--clickhouse-flush",
            "30s",
            "--clickhouse-spool",
            &path(&spool),
        ],
    );
    let (i, rx) = spawn(&mut g, "run 2", &args);
    let (code, lines) = wait_exit(&mut g, i, &rx, Duration::from_secs(60));
    assert_eq!(code, Some(0), "{lines:#?}");
    let (records2, snaps2) = jsonl_records(&out2);
    let st = last_status(&out2);
    let got = rows.lock().expect("rows").clone();
    eprintln!(
        "cut batches: run 1 {records1} + run 2 {records2} records; cut {a_records} + {b_records}; \
         the server took {got:?}; status {st}"
    );
    assert_eq!(n(&st, "quarantined_batches"), 2, "{lines:#?}");
    assert_eq!(n(&st, "lost_records"), a_records + b_records);
    assert_eq!(
        got.get("records").copied().unwrap_or(0),
        (records1 + records2) as u64 - a_records - b_records
    );
    // one snapshots row per batch that arrived: run 1's less the two cut, and run 2's
    assert_eq!(
        got.get("snapshots").copied().unwrap_or(0),
        (files.len() - 2 + snaps2.len()) as u64
    );
    for f in [a, b] {
        let name = f.file_name().expect("name").to_string_lossy().into_owned();
        assert_eq!(
            lines
                .iter()
                .filter(|l| l.contains(&name) && l.contains("torn or cut"))
                .count(),
            1,
            "{name}: {lines:#?}"
        );
    }
    assert_eq!(batch_files(&spool).len(), 0);
}

/// Row 10: a second collector on a spool in use exits 2 at once with one line naming the
/// spool and the first one's pid; the first one's batches are all its own.
#[test]
fn row_10_second_collector_on_one_spool_exits_2() {
    let mut g = Guard::new("pg-hostile-10");
    let spool = g.dir.join("spool");
    let url = closed_url();
    let out1 = g.dir.join("one.jsonl");
    let args = storm_args(
        &g,
        100,
        "100ms",
        &out1,
        &[
            "--clickhouse",
            &url,
            "--clickhouse-flush",
            "0s",
            "--clickhouse-spool",
            &path(&spool),
        ],
    );
    let (i, rx1) = spawn(&mut g, "first", &args);
    let pid = g.children[i].1.id();
    std::thread::sleep(Duration::from_millis(1000));
    let out2 = g.dir.join("two.jsonl");
    let args = storm_args(
        &g,
        100,
        "100ms",
        &out2,
        &[
            "--clickhouse",
            &url,
            "--clickhouse-flush",
            "0s",
            "--clickhouse-spool",
            &path(&spool),
        ],
    );
    let (j, rx2) = spawn(&mut g, "second", &args);
    let (code, lines) = wait_exit(&mut g, j, &rx2, Duration::from_secs(10));
    eprintln!("second collector: exit {code:?}: {lines:?}");
    assert_eq!(code, Some(2), "{lines:#?}");
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(
        lines[0].contains(&path(&spool)) && lines[0].contains(&format!("pid {pid}")),
        "{lines:#?}"
    );
    let st = g.terminate(i, Duration::from_secs(10));
    let lines1: Vec<String> = rx1.try_iter().collect();
    assert!(st.success(), "{lines1:#?}");
    let (records, snaps) = jsonl_records(&out1);
    assert_eq!(batch_files(&spool).len(), snaps.len());
    assert_eq!(spooled_records(&spool), records as u64);
}

/// Row 12: with the spool on a full disk, every snapshot that did not reach the spool is
/// counted (unspooled, its records lost), one line per streak, no temporary file left:
/// JSONL records == records in the spool + lost.
#[test]
fn row_12_full_disk_is_counted_not_silent() {
    assert!(is_root(), "this test mounts a tmpfs: run it as root");
    let mut g = Guard::new("pg-hostile-12");
    let disk = g.dir.join("small");
    std::fs::create_dir(&disk).expect("mkdir");
    let st = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=96k", "tmpfs", &path(&disk)])
        .status()
        .expect("mount");
    assert!(st.success(), "mount tmpfs");
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(disk.clone());
    let spool = disk.join("spool");
    let out = g.dir.join("out.jsonl");
    let args = closed_spool_args(&g, 30, &out, &spool, None);
    let Ended {
        code,
        lines,
        st,
        records,
        snaps,
    } = run_to_end(&mut g, "collect", &args, &out, Duration::from_secs(60));
    assert_eq!(code, Some(0), "{lines:#?}");
    let spooled = batch_files(&spool).len() as u64;
    let leftovers: Vec<String> = std::fs::read_dir(&spool)
        .expect("spool")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    eprintln!(
        "full disk: {records} records in {} snapshots; {spooled} batches spooled; status {st}",
        snaps.len()
    );
    assert!(n(&st, "unspooled_batches") > 0, "the disk filled: {st}");
    assert_eq!(spooled + n(&st, "unspooled_batches"), snaps.len() as u64);
    assert_eq!(
        spooled_records(&spool) + n(&st, "lost_records"),
        records as u64
    );
    assert!(leftovers.is_empty(), "{leftovers:?}");
    assert_eq!(
        lines.iter().filter(|l| l.contains("not spooled: ")).count(),
        1,
        "one line per streak: {lines:#?}"
    );
}

/// Row 14: the spool limit holds exactly (peak <= limit; what went is counted), a table
/// failing for good does not make the others' rows be sent again at every retry, and a
/// next-seq at the u64 maximum is refused at start instead of wrapping.
#[test]
fn row_14_limits_hold_at_their_edges() {
    let mut g = Guard::new("pg-hostile-14");
    // (a) the limit, exactly: every batch is ~25 KB, the limit 60,000 B
    let spool = g.dir.join("spool-a");
    let out = g.dir.join("a.jsonl");
    let args = closed_spool_args(&g, 12, &out, &spool, Some("60000"));
    let Ended {
        code,
        lines,
        st,
        records,
        snaps,
    } = run_to_end(&mut g, "limit", &args, &out, Duration::from_secs(60));
    assert_eq!(code, Some(0), "{lines:#?}");
    let peak: u64 = lines
        .iter()
        .find_map(|l| {
            l.split("peak ")
                .nth(1)?
                .split('(')
                .nth(1)?
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no peak in {lines:#?}"));
    let max_in_snapshots = snaps
        .iter()
        .filter_map(|s| s["clickhouse"]["spool_bytes"].as_u64())
        .max()
        .unwrap_or(0);
    eprintln!("limit: peak {peak} B (snapshots saw {max_in_snapshots}); status {st}");
    assert!(peak <= 60_000 && max_in_snapshots <= 60_000, "{lines:#?}");
    assert!(n(&st, "spool_dropped") > 0);
    assert_eq!(
        spooled_records(&spool) + n(&st, "lost_records"),
        records as u64
    );
    assert_eq!(
        batch_files(&spool).len() as u64 + n(&st, "spool_dropped") + n(&st, "unspooled_batches"),
        snaps.len() as u64
    );

    // (a') a batch larger than the whole limit is not spooled: counted, said once
    let spool = g.dir.join("spool-a2");
    let out = g.dir.join("a2.jsonl");
    let args = closed_spool_args(&g, 4, &out, &spool, Some("10000"));
    let Ended {
        code,
        lines,
        st,
        records,
        snaps,
    } = run_to_end(&mut g, "oversize", &args, &out, Duration::from_secs(60));
    assert_eq!(code, Some(0), "{lines:#?}");
    eprintln!(
        "oversize: {records} records in {} snapshots; status {st}",
        snaps.len()
    );
    assert_eq!(n(&st, "unspooled_batches"), 4, "{st}");
    assert_eq!(n(&st, "lost_records"), records as u64);
    assert_eq!(
        batch_files(&spool).len() as u64 + n(&st, "unspooled_batches"),
        snaps.len() as u64
    );
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.contains("larger than the spool limit"))
            .count(),
        1,
        "{lines:#?}"
    );

    // (b) a table failing for good: the other tables' rows arrive once
    let (addr, rows) = fake_clickhouse(&["chains"]);
    let spool = g.dir.join("spool-b");
    let out = g.dir.join("b.jsonl");
    let args = storm_args(
        &g,
        10,
        "100ms",
        &out,
        &[
            "--clickhouse",
            &format!("http://{addr}/"),
            "--clickhouse-flush",
            "2s",
            "--clickhouse-spool",
            &path(&spool),
        ],
    );
    let Ended {
        code,
        lines,
        st,
        records,
        snaps,
    } = run_to_end(&mut g, "table", &args, &out, Duration::from_secs(60));
    assert_eq!(code, Some(0), "{lines:#?}");
    let got = rows.lock().expect("rows").clone();
    eprintln!(
        "a table failing: {records} records in {} snapshots; the server took {got:?}; status {st}",
        snaps.len()
    );
    assert!(n(&st, "send_errors") >= 3, "retried: {st}");
    assert_eq!(
        got.get("records").copied().unwrap_or(0),
        records as u64,
        "each record once"
    );
    assert_eq!(
        got.get("snapshots").copied().unwrap_or(0),
        snaps.len() as u64
    );
    // the batches wait for `chains` only, and say so in their names: records, counters,
    // snapshots and (no rows, taken without a request) baselines, port_counters and qp_errors
    // took them
    let files = batch_files(&spool);
    assert!(!files.is_empty());
    for f in &files {
        assert!(f.to_string_lossy().ends_with("-t7d.batch"), "{f:?}");
    }

    // (c) next-seq at the u64 maximum: refused at start, one line, exit 2
    let spool = g.dir.join("spool-c");
    std::fs::create_dir(&spool).expect("mkdir");
    std::fs::write(spool.join("next-seq"), format!("{}\n", u64::MAX)).expect("next-seq");
    let out = g.dir.join("c.jsonl");
    let args = storm_args(
        &g,
        2,
        "0s",
        &out,
        &[
            "--clickhouse",
            &closed_url(),
            "--clickhouse-spool",
            &path(&spool),
        ],
    );
    let (i, rx) = spawn(&mut g, "next-seq", &args);
    let (code, lines) = wait_exit(&mut g, i, &rx, Duration::from_secs(30));
    assert_eq!(code, Some(2), "{lines:#?}");
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(lines[0].contains("past 2^63"), "{lines:#?}");
    assert_eq!(batch_files(&spool).len(), 0);
}
