//! Collector throughput and memory benchmark (no cargo bench): decode + snapshot of synthetic
//! ring-buffer records through the real pipeline, on one core, and RSS across a 10x burst.
//!
//!   cargo run --release -p collector --example collector_bench [-- RECORDS [RAW_OUT.bin]]
//!
//! Phase 1 (throughput): RECORDS records (default 4M) in windows of 100k, every window
//! serialised to JSON (the batch cap is raised to the window so every record is decoded,
//! kept and serialised). Phase 2 (burst): the default batch cap (10k), one window of B
//! records, then one of 10*B; RSS (VmRSS) after each, and the ratio.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use collector::{encode, PgRecord, Pipeline, PipelineConfig, ProbeTable, RECORD_SIZE};

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

fn table() -> Arc<ProbeTable> {
    let names: Vec<(u32, String)> = (0..40).map(|i| (i, format!("probe_fn_{i}"))).collect();
    let triples: Vec<(u32, &str, &str)> = names
        .iter()
        .map(|(i, n)| {
            (
                *i,
                n.as_str(),
                if i % 2 == 0 { "ib_uverbs" } else { "rdma_rxe" },
            )
        })
        .collect();
    Arc::new(ProbeTable::from_triples(&triples))
}

/// `n` encoded records, 2 CPUs, 40 probes, a few errnos and pids.
fn records(n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * RECORD_SIZE);
    let mut seq = [0u64; 2];
    for i in 0..n {
        let cpu = (i % 2) as u32;
        let mut r = PgRecord {
            seq: seq[cpu as usize],
            ts_ns: 1_000_000 + i as u64,
            probe_id: (i % 40) as u32,
            err: [14, 22, 12, 524][i % 4],
            pid: 1000 + (i % 64) as u32,
            tid: 1000 + (i % 64) as u32,
            cgroup_id: 1,
            cpu,
            nargs: 3,
            args: [
                0xffff_8880_060b_a000,
                0x7fcd_42c1_e000 + i as u64,
                0x100000,
                0,
            ],
            ..PgRecord::default()
        };
        r.comm[..10].copy_from_slice(b"verbs_fail");
        seq[cpu as usize] += 1;
        out.extend_from_slice(&encode(&r));
    }
    out
}

fn pipeline(cap: usize) -> Pipeline {
    Pipeline::new(
        table(),
        PipelineConfig {
            batch_cap: cap,
            host: "bench".into(),
            kernel: "k".into(),
            seq_from_zero: true,
            derive_counters: true,
        },
    )
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(4_000_000);
    let window = 100_000;

    // phase 1: throughput
    let data = records(window);
    let mut p = pipeline(window);
    let mut bytes_out = 0usize;
    let mut total = 0usize;
    let t0 = Instant::now();
    while total < n {
        for rec in data.chunks_exact(RECORD_SIZE) {
            p.ingest(rec);
        }
        total += window;
        let k = std::sync::Arc::new(p.derived());
        let s = p.snapshot(&k, SystemTime::now(), false);
        bytes_out += s.to_line().len();
    }
    let dt = t0.elapsed().as_secs_f64();
    println!(
        "throughput: {total} records decoded + kept + serialised in {:.3} s on one core = {:.2} M records/s ({:.1} MB JSON, {:.0} B/record)",
        dt,
        total as f64 / dt / 1e6,
        bytes_out as f64 / 1e6,
        bytes_out as f64 / total as f64
    );
    // decode + accounting only (the batch cap at 0: every record counted, none kept)
    let mut p = pipeline(0);
    let t0 = Instant::now();
    for _ in 0..(n / window) {
        for rec in data.chunks_exact(RECORD_SIZE) {
            p.ingest(rec);
        }
    }
    let dt = t0.elapsed().as_secs_f64();
    println!(
        "decode + accounting only: {:.1} M records/s",
        (n / window * window) as f64 / dt / 1e6
    );

    // phase 2: RSS across a 10x burst, default cap; the input is one reused 100k-record buffer
    let mut p = pipeline(10_000);
    let feed = |p: &mut Pipeline, n: usize| {
        let mut left = n;
        while left > 0 {
            for rec in data.chunks_exact(RECORD_SIZE).take(left) {
                p.ingest(rec);
            }
            left = left.saturating_sub(window);
        }
        let k = std::sync::Arc::new(p.derived());
        p.snapshot(&k, SystemTime::now(), false).to_line().len()
    };
    let burst = 200_000;
    feed(&mut p, burst);
    let rss0 = rss_kib();
    for _ in 0..5 {
        feed(&mut p, burst);
    }
    let rss1 = rss_kib();
    let t0 = Instant::now();
    for _ in 0..5 {
        feed(&mut p, burst * 10);
    }
    let dt = t0.elapsed().as_secs_f64();
    let rss10 = rss_kib();
    println!(
        "rss: after warm-up {rss0} KiB, after 5 windows of {burst} records {rss1} KiB, after 5 windows of {} records (10x) {rss10} KiB: ratio 10x/1x = {:.3} ({:.1} M records/s with the 10k cap)",
        burst * 10,
        rss10 as f64 / rss1.max(1) as f64,
        (5 * burst * 10) as f64 / dt / 1e6
    );
    if let Some(path) = std::env::args().nth(2) {
        // raw replay file of RECORDS records for the CLI benchmark
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path).expect("create"));
        let mut left = n;
        while left > 0 {
            let k = left.min(window);
            std::io::Write::write_all(&mut f, &data[..k * RECORD_SIZE]).expect("write");
            left -= k;
        }
        println!("wrote {n} raw records to {path}");
    }
}
