//! A fleet against one ClickHouse, time compressed (run by `benches/fleet_scale.sh`, which
//! starts the server):
//!
//!   cargo run --release -p sink-clickhouse --example fleet_scale -- URL HOSTS SECONDS SPEEDUP SERVER_PID
//!
//! HOSTS simulated hosts, each its own collector pipeline and `ClickhouseSink` (the real sink:
//! spool, sender thread, heartbeat, version probe), distinct host, boot and run ids and jobs.
//! Every host closes a 5 s window every 5/SPEEDUP s of real time; a window is an incident
//! (200 failure records, the paper's incident snapshot) with probability 1/200, else idle (a
//! heartbeat row every 300 simulated seconds). Samples the server each second: parts per
//! partition (peak), merges running (peak), its CPU and RSS (/proc/SERVER_PID). Prints
//! INSERTs/s (ClickHouse's own `InsertQuery` event count), errors, and the extrapolation to
//! 10,000 hosts in real time: INSERTs per simulated host-second x 10,000.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use collector::{encode, ChainClock, PgRecord, Pipeline, PipelineConfig, ProbeTable, RECORD_SIZE};
use sink_clickhouse::{ClickhouseSink, Endpoint, SinkOptions};

const WINDOW_S: u64 = 5;
const INCIDENT_RECORDS: usize = 200;
/// one window in this many is an incident
const INCIDENT_EVERY: u64 = 200;

fn table() -> Arc<ProbeTable> {
    Arc::new(
        ProbeTable::from_triples(&[
            (0, "ib_uverbs_reg_mr", "ib_uverbs"),
            (1, "rxe_reg_user_mr", "rdma_rxe"),
            (2, "ib_umem_get", "ib_uverbs"),
        ])
        .with_focus(0, manifest::FocusKind::Handler)
        .with_pins_user_memory(2)
        .with_calls(3, &[(0, 1), (1, 2)]),
    )
}

/// An incident's records: reg_mr chains (innermost first) from a few threads.
fn incident(host: usize, seq: &mut u64, ts: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(INCIDENT_RECORDS * RECORD_SIZE);
    for i in 0..INCIDENT_RECORDS {
        let tid = 1000 + (host % 7) as u32 * 10 + (i / 3 % 4) as u32;
        let mut r = PgRecord {
            seq: *seq,
            ts_ns: ts + i as u64 * 1000,
            probe_id: 2 - (i % 3) as u32,
            err: 14,
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

/// A hash for the incident draw (deterministic: the same run twice is the same workload).
fn mix(a: u64, b: u64) -> u64 {
    let mut x = a.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ b.wrapping_mul(0xc2b2_ae3d_27d4_eb4f);
    x ^= x >> 31;
    x.wrapping_mul(0x94d0_49bb_1331_11eb) >> 17
}

fn query(endpoint: &Endpoint, port_query: &str) -> String {
    // the bench's own reads go through clickhouse-client in the script; here a plain GET
    let addr = endpoint.authority.clone();
    let mut c = match std::net::TcpStream::connect(&addr) {
        Ok(c) => c,
        Err(_) => return String::new(),
    };
    use std::io::{Read, Write};
    let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
    let q: String = port_query
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    let _ = write!(
        c,
        "GET /?query={q} HTTP/1.0\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    );
    let mut s = String::new();
    let _ = c.read_to_string(&mut s);
    s.split_once("\r\n\r\n")
        .map(|(_, b)| b.trim().to_string())
        .unwrap_or_default()
}

fn num(s: &str) -> u64 {
    s.trim().parse().unwrap_or(0)
}

/// (user+system CPU seconds, RSS KiB) of a process.
fn proc_usage(pid: u32) -> (f64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, r)| r.split_whitespace().collect())
        .unwrap_or_default();
    // SAFETY: sysconf reads a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let cpu = fields
        .get(11..13)
        .map_or(0.0, |f| f.iter().map(|v| num(v) as f64).sum::<f64>() / hz);
    let rss = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0);
    (cpu, rss)
}

/// One simulated host: its pipeline, its sink, its next record sequence number.
type Host = (Pipeline, ClickhouseSink, u64);

/// `hosts` real sinks with distinct host names and boot ids, spools under `dir`.
fn start_fleet(endpoint: &Endpoint, hosts: usize, dir: &std::path::Path) -> Vec<Host> {
    (0..hosts)
        .map(|h| {
            let pipe = Pipeline::new(
                table(),
                PipelineConfig {
                    batch_cap: INCIDENT_RECORDS * 2,
                    host: format!("sim-{h:05}"),
                    kernel: "6.12.117+deb12-amd64".into(),
                    seq_from_zero: true,
                    derive_counters: true,
                },
            );
            let sink = ClickhouseSink::start(SinkOptions {
                endpoint: endpoint.clone(),
                spool_dir: dir.join(format!("spool-{h}")),
                spool_limit_bytes: 64 << 20,
                boot_id: format!("boot-{h:05}-{:x}", mix(h as u64, 7)),
                clock: ChainClock::LastRecord,
                min_backoff: Duration::from_millis(250),
                max_backoff: Duration::from_secs(5),
                heartbeat: Duration::from_secs(300),
            })
            .unwrap_or_else(|e| {
                eprintln!("sink: {e}");
                std::process::exit(2)
            });
            (pipe, sink, 0)
        })
        .collect()
}

/// Peaks of the server's state, sampled once a second.
#[derive(Default)]
struct Peaks {
    parts: u64,
    merges: u64,
    rss: u64,
}

impl Peaks {
    fn sample(&mut self, endpoint: &Endpoint, server: u32) {
        self.parts = self.parts.max(num(&query(
            endpoint,
            "SELECT max(c) FROM (SELECT count() AS c FROM system.parts WHERE active AND database = 'probegen' GROUP BY table, partition)",
        )));
        self.merges = self
            .merges
            .max(num(&query(endpoint, "SELECT count() FROM system.merges")));
        self.rss = self.rss.max(proc_usage(server).1);
    }
}

/// Window `w` of every host, ending at `end` (an incident for some): its records, its
/// snapshot into the host's sink. The incidents.
fn close_window(fleet: &mut [Host], w: u64, end: SystemTime) -> u64 {
    let mut incidents = 0;
    for (h, (pipe, sink, seq)) in fleet.iter_mut().enumerate() {
        if mix(h as u64, w).is_multiple_of(INCIDENT_EVERY) {
            incidents += 1;
            for rec in
                incident(h, seq, (w + 1) * WINDOW_S * 1_000_000_000).chunks_exact(RECORD_SIZE)
            {
                pipe.ingest(rec);
            }
        }
        let k = Arc::new(pipe.derived());
        let snap = pipe.snapshot(&k, end, false);
        if let Err(e) = sink.enqueue(&snap) {
            eprintln!("spool: {e}");
        }
    }
    incidents
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 5 {
        eprintln!("usage: fleet_scale URL HOSTS SECONDS SPEEDUP SERVER_PID");
        std::process::exit(2);
    }
    let n = |i: usize| args[i].parse::<u64>().unwrap_or(0);
    let (hosts, seconds, speedup, server) = (n(1) as usize, n(2), n(3).max(1), n(4) as u32);
    let endpoint = Endpoint::parse(&args[0], Duration::from_secs(30)).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let dir = std::env::temp_dir().join(format!("pg-fleet-scale-{}", std::process::id()));
    let mut fleet = start_fleet(&endpoint, hosts, &dir);
    let inserts0 = num(&query(
        &endpoint,
        "SELECT value FROM system.events WHERE event = 'InsertQuery'",
    ));
    let (cpu0, _) = proc_usage(server);
    let start = SystemTime::now();
    let t0 = Instant::now();
    let tick = Duration::from_secs(WINDOW_S).as_secs_f64() / speedup as f64;
    let mut peaks = Peaks::default();
    let mut incidents = 0u64;
    let mut w = 0u64;
    let mut next_sample = Instant::now();
    while t0.elapsed() < Duration::from_secs(seconds) {
        let end = start + Duration::from_secs((w + 1) * WINDOW_S);
        incidents += close_window(&mut fleet, w, end);
        w += 1;
        if Instant::now() >= next_sample {
            next_sample += Duration::from_secs(1);
            peaks.sample(&endpoint, server);
        }
        let due = Duration::from_secs_f64(tick * w as f64);
        if let Some(wait) = due.checked_sub(t0.elapsed()) {
            std::thread::sleep(wait);
        }
    }
    let wall = t0.elapsed().as_secs_f64();
    let mut errors = 0;
    let mut sent = 0;
    for (_, mut sink, _) in fleet {
        let st = sink.finish(Duration::from_secs(60));
        errors += st.send_errors + st.spool_dropped + st.lost_records;
        sent += st.sent_records;
    }
    let inserts = num(&query(
        &endpoint,
        "SELECT value FROM system.events WHERE event = 'InsertQuery'",
    ))
    .saturating_sub(inserts0);
    let (cpu1, rss) = proc_usage(server);
    let sim_host_s = (hosts as u64 * w * WINDOW_S) as f64;
    println!(
        "fleet: {hosts} hosts x {w} windows of {WINDOW_S} s ({:.1} simulated hours each) in {wall:.1} s real (x{:.0}); {incidents} incidents, {sent} records sent",
        (w * WINDOW_S) as f64 / 3600.0,
        (w * WINDOW_S) as f64 / wall
    );
    println!(
        "server: {inserts} INSERTs ({:.1}/s real), peak parts per partition {}, peak merges {}, CPU {:.1} s ({:.0}% of a core), RSS {} MiB (peak {} MiB); errors {errors}",
        inserts as f64 / wall,
        peaks.parts,
        peaks.merges,
        cpu1 - cpu0,
        100.0 * (cpu1 - cpu0) / wall,
        rss >> 10,
        peaks.rss.max(rss) >> 10
    );
    println!(
        "10,000 hosts in real time: {:.1} INSERTs/s (INSERTs per simulated host-second x 10,000; a row per table per 5 s window would be 8,000/s)",
        inserts as f64 / sim_host_s * 10_000.0
    );
    let _ = std::fs::remove_dir_all(&dir);
}
