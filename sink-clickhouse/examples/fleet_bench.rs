//! What the ClickHouse sink costs the collector (no cargo bench; run by
//! `benches/fleet_clickhouse.sh`, which starts the server):
//!
//!   cargo run --release -p sink-clickhouse --example fleet_bench -- URL [WINDOWS] [OUTAGE_WINDOWS]
//!
//! The workload is 10 000 records/s with the default 5 s interval: windows of 50 000
//! synthetic records (the batch cap raised to the window, so every record is kept, written
//! and sent: the worst case), played as fast as the machine goes. CPU is this process's
//! (user + system, all threads: the sender's too), from getrusage.
//!
//! 1. JSONL only, WINDOWS windows (default 12: one minute of records);
//! 2. the same plus `--clickhouse URL` (a live server), until ClickHouse has every batch;
//!    prints both CPU times, their ratio, and the added CPU as a share of one core at
//!    10k records/s (added CPU seconds / the windows' 5 s each);
//! 3. an outage: the sink pointed at a closed port for OUTAGE_WINDOWS windows (default 120:
//!    ten minutes of records): RSS after the first window, after 10, and at the end (the
//!    spool is on disk), the spool's size and the batches dropped past its limit.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use collector::{
    encode, ChainClock, JsonlSink, PgRecord, Pipeline, PipelineConfig, ProbeTable, Sink,
    RECORD_SIZE,
};
use sink_clickhouse::{ClickhouseSink, Endpoint, SinkOptions};

const PER_WINDOW: usize = 50_000;
const WINDOW_S: f64 = 5.0;

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

fn cpu_s() -> f64 {
    // SAFETY: getrusage fills one struct we own.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// An rxe-like table: reg_mr handler -> driver -> pinning, and a create_qp path.
fn table() -> Arc<ProbeTable> {
    let t = ProbeTable::from_triples(&[
        (0, "ib_uverbs_reg_mr", "ib_uverbs"),
        (1, "rxe_reg_user_mr", "rdma_rxe"),
        (2, "ib_umem_get", "ib_uverbs"),
        (3, "ib_uverbs_create_qp", "ib_uverbs"),
        (4, "rxe_create_qp", "rdma_rxe"),
        (5, "rxe_qp_chk_init", "rdma_rxe"),
    ])
    .with_focus(0, manifest::FocusKind::Handler)
    .with_focus(3, manifest::FocusKind::Handler)
    .with_pins_user_memory(2)
    .with_calls(6, &[(0, 1), (1, 2), (3, 4), (4, 5)]);
    Arc::new(t)
}

/// Window `w`'s records: chains of three (innermost first) from 64 threads.
fn window(w: usize, seq: &mut u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(PER_WINDOW * RECORD_SIZE);
    for i in 0..PER_WINDOW {
        let chain = i / 3;
        let (probe, err) = match (chain % 2, i % 3) {
            (0, k) => (2 - k as u32, 14),
            (_, k) => (5 - k as u32, 22),
        };
        let tid = 1000 + (chain % 64) as u32;
        let mut r = PgRecord {
            seq: *seq,
            ts_ns: (w * PER_WINDOW + i) as u64 * 100_000,
            probe_id: probe,
            err,
            pid: tid,
            tid,
            cgroup_id: 1,
            cpu: 0,
            nargs: 2,
            args: [0x7fcd_42c1_e000 + i as u64, 0x100000, 0, 0],
            ..PgRecord::default()
        };
        r.comm[..7].copy_from_slice(b"trainer");
        *seq += 1;
        out.extend_from_slice(&encode(&r));
    }
    out
}

struct Phase {
    cpu: f64,
    wall: f64,
    rss: Vec<u64>,
    sent_records: u64,
    spool_bytes: u64,
    dropped: u64,
}

fn run(windows: usize, sink: Option<SinkOptions>, dir: &std::path::Path, flush: Duration) -> Phase {
    let mut pipe = Pipeline::new(
        table(),
        PipelineConfig {
            batch_cap: PER_WINDOW,
            host: "bench".into(),
            kernel: "bench".into(),
            seq_from_zero: true,
            derive_counters: true,
        },
    );
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::create_dir_all(dir);
    let mut jsonl = JsonlSink::new(&dir.join("snapshots.jsonl"), 64 << 20, 2);
    let mut ch = sink.map(|o| ClickhouseSink::start(o).expect("clickhouse sink"));
    let mut seq = 0;
    let inputs: Vec<Vec<u8>> = (0..windows.min(2)).map(|w| window(w, &mut seq)).collect();
    let (cpu0, t0) = (cpu_s(), Instant::now());
    let mut rss = Vec::new();
    for w in 0..windows {
        // two distinct windows alternate: the generator is not what is measured
        for rec in inputs[w % inputs.len()].chunks_exact(RECORD_SIZE) {
            pipe.ingest(rec);
        }
        let k = std::sync::Arc::new(pipe.derived());
        let mut s = pipe.snapshot(&k, SystemTime::now(), w + 1 == windows);
        if let Some(c) = &mut ch {
            s.sinks = vec![c.enqueue(&s).expect("spool").sink_status(0)];
        }
        jsonl.write(&s).expect("jsonl");
        rss.push(rss_kib());
    }
    let (sent_records, spool_bytes, dropped) = match ch {
        Some(mut c) => {
            let st = c.finish(flush);
            (st.sent_records, st.spool_bytes, st.spool_dropped)
        }
        None => (0, 0, 0),
    };
    Phase {
        cpu: cpu_s() - cpu0,
        wall: t0.elapsed().as_secs_f64(),
        rss,
        sent_records,
        spool_bytes,
        dropped,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(url) = args.first() else {
        eprintln!("usage: fleet_bench URL [WINDOWS] [OUTAGE_WINDOWS]");
        std::process::exit(2);
    };
    let num = |i: usize, d: usize| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let (windows, outage_windows) = (num(1, 12), num(2, 120));
    let endpoint = Endpoint::parse(url, Duration::from_secs(30)).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let dir = std::env::temp_dir().join(format!("pg-fleet-bench-{}", std::process::id()));
    let opts = |endpoint: Endpoint, tag: &str, limit: u64| SinkOptions {
        endpoint,
        spool_dir: dir.join(tag).join("spool"),
        spool_limit_bytes: limit,
        boot_id: "bench".into(),
        clock: ChainClock::LastRecord,
        min_backoff: Duration::from_millis(250),
        max_backoff: Duration::from_secs(5),
        heartbeat: Duration::from_secs(300),
    };
    let records = (windows * PER_WINDOW) as f64;
    println!(
        "workload: {windows} windows of {PER_WINDOW} records (10k records/s, 5 s interval), every record kept"
    );

    let a = run(windows, None, &dir.join("jsonl"), Duration::ZERO);
    println!(
        "1. JSONL only:        cpu {:.2} s, wall {:.2} s, {:.0} records/s",
        a.cpu,
        a.wall,
        records / a.wall
    );
    let b = run(
        windows,
        Some(opts(endpoint.clone(), "live", 1 << 30)),
        &dir.join("live"),
        Duration::from_secs(300),
    );
    println!(
        "2. JSONL + ClickHouse: cpu {:.2} s, wall {:.2} s, {} of {} records sent",
        b.cpu, b.wall, b.sent_records, records as u64
    );
    let added = (b.cpu - a.cpu).max(0.0);
    println!(
        "   cpu ratio {:.3}; added cpu at 10k records/s: {:.2}% of one core (limit 5%)",
        b.cpu / a.cpu,
        100.0 * added / (windows as f64 * WINDOW_S)
    );

    outage(outage_windows, &|e| opts(e, "outage", 256 << 20), &dir);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Part 3: the sink against a port nothing listens on for `outage_windows` windows: RSS and
/// spool stay bounded.
fn outage(outage_windows: usize, opts: &dyn Fn(Endpoint) -> SinkOptions, dir: &std::path::Path) {
    // nothing listens on this port: bind, read it, close
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("port");
    let down =
        Endpoint::parse(&format!("http://127.0.0.1:{port}"), Duration::from_secs(2)).expect("url");
    let c = run(
        outage_windows,
        Some(opts(down)),
        &dir.join("outage"),
        Duration::ZERO,
    );
    let at = |i: usize| c.rss.get(i).copied().unwrap_or(0);
    let last = c.rss.last().copied().unwrap_or(0);
    let n = c.rss.len();
    println!(
        "   RSS KiB at 25/50/75% of the outage: {} {} {}; max {}",
        at(n / 4),
        at(n / 2),
        at(3 * n / 4),
        c.rss.iter().max().copied().unwrap_or(0)
    );
    println!(
        "3. outage, {outage_windows} windows ({:.0} min of records): RSS {} KiB after 1, {} KiB after 10, {} KiB at the end (ratio end/first {:.2}); spool {} MiB on disk, {} batches dropped past 256 MiB",
        outage_windows as f64 * WINDOW_S / 60.0,
        at(0),
        at(9.min(c.rss.len().saturating_sub(1))),
        last,
        last as f64 / at(0).max(1) as f64,
        c.spool_bytes >> 20,
        c.dropped
    );
}
