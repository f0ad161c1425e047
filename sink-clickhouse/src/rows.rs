//! One snapshot as one batch: `JSONEachRow` bodies for the tables of [`super::schema`], framed
//! in one byte string (the spool file's content).
//!
//! Frame: `probegen-batch/v1 <seq>\n`, then per table `<name> <bytes>\n<body>`.
//!
//! Times: `time_ns` is wall-clock ns. A record's `ts_ns` is the kernel's CLOCK_MONOTONIC, so
//! its wall time is `ts_ns` + (window end - "now" on the records' clock): live, "now" is this
//! host's CLOCK_MONOTONIC; replay, the newest record of the snapshot (the clock the chains use).

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

use serde::Serialize;

use collector::{comm_str, errno_label, monotonic_ns, ChainClock, ProcInfo, Snapshot};

use crate::schema::{CHAINS, COUNTERS, RECORDS, SNAPSHOTS};

pub(crate) const BATCH_MAGIC: &str = "probegen-batch/v1";

/// The job variables that name a job, first set wins (`job_id` column).
pub(crate) const JOB_ID_VARS: [&str; 3] = ["SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "JOB_ID"];

/// What identifies the batch's rows.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct BatchKey<'a> {
    pub host: &'a str,
    pub boot_id: &'a str,
    /// the collector run that made the batch (its start, unix ns): batch sequences restart
    /// when a collector on the same host and boot uses another spool
    pub run_id: u64,
    pub seq: u64,
    pub kernel: &'a str,
    pub manifest_hash: &'a str,
    pub snapshot: u64,
}

#[derive(Serialize)]
struct Row<'a, T: Serialize> {
    #[serde(flatten)]
    key: &'a BatchKey<'a>,
    time_ns: u64,
    #[serde(flatten)]
    row: T,
}

#[derive(Serialize)]
struct Job<'a> {
    job_id: &'a str,
    job_keys: Vec<&'a str>,
    job_values: Vec<&'a str>,
}

fn job(info: Option<&ProcInfo>) -> Job<'_> {
    match info {
        Some(i) => Job {
            job_id: JOB_ID_VARS
                .iter()
                .find_map(|v| i.job.get(*v).map(String::as_str))
                .unwrap_or(""),
            job_keys: i.job.keys().map(String::as_str).collect(),
            job_values: i.job.values().map(String::as_str).collect(),
        },
        None => Job {
            job_id: "",
            job_keys: Vec::new(),
            job_values: Vec::new(),
        },
    }
}

#[derive(Serialize)]
struct RecordRow<'a> {
    idx: u32,
    probe: u32,
    function: &'a str,
    module: &'a str,
    errno: u32,
    errno_name: std::borrow::Cow<'static, str>,
    pid: u32,
    tid: u32,
    comm: std::borrow::Cow<'a, str>,
    cgroup: &'a str,
    cgroup_id: u64,
    #[serde(flatten)]
    job: Job<'a>,
    args: &'a [u64],
    ts_ns: u64,
    cpu: u32,
    rec_seq: u64,
}

#[derive(Serialize)]
struct ChainRow<'a> {
    idx: u32,
    owner: collector::Owner,
    errno: u32,
    errno_name: std::borrow::Cow<'static, str>,
    pid: u32,
    tid: u32,
    comm: std::borrow::Cow<'a, str>,
    origin_function: &'a str,
    origin_module: &'a str,
    origin_probe: u32,
    origin_errno: u32,
    origin_errno_name: std::borrow::Cow<'static, str>,
    functions: Vec<&'a str>,
    modules: Vec<&'a str>,
    link_probes: Vec<u32>,
    link_errnos: Vec<u32>,
    start_ns: u64,
    end_ns: u64,
    count: u32,
    last_end_ns: u64,
    summary: String,
    #[serde(flatten)]
    job: Job<'a>,
}

#[derive(Serialize)]
struct CounterRow<'a> {
    probe: u32,
    function: &'a str,
    module: &'a str,
    calls: u64,
    failures: u64,
    errno_names: Vec<&'a str>,
    errno_counts: Vec<u64>,
    received: u64,
    dropped_userspace: u64,
}

#[derive(Serialize)]
struct SnapshotRow {
    is_final: u8,
    window_start_ns: u64,
    records: u32,
    chains: u32,
    drops_kernel: u64,
    drops_userspace: u64,
    seq_gaps: u64,
    decode_errors: u64,
    spool_dropped: u64,
    invariant_ok: u8,
}

/// Jobs of the pids seen in records, for the chains (a chain's records may have been in an
/// earlier snapshot). Bounded: cleared past `CAP` pids.
#[derive(Default)]
pub(crate) struct PidJobs {
    map: HashMap<u32, Arc<ProcInfo>>,
}

impl PidJobs {
    const CAP: usize = 16_384;

    fn learn(&mut self, snap: &Snapshot) {
        if self.map.len() > Self::CAP {
            self.map.clear();
        }
        for r in &snap.records.recs {
            if let Some(i) = &r.proc_info {
                self.map.insert(r.raw.pid, i.clone());
            }
        }
    }
}

fn frame(out: &mut Vec<u8>, table: &str, body: &[u8]) {
    let _ = writeln!(out, "{table} {}", body.len());
    out.extend_from_slice(body);
}

fn push_row<T: Serialize>(body: &mut Vec<u8>, row: &T) {
    // serialising plain structs of strings and integers cannot fail
    if serde_json::to_writer(&mut *body, row).is_ok() {
        body.push(b'\n');
    }
}

/// Wall-clock ns of a record time (`ts_ns` on the records' clock), see the module doc.
struct WallClock {
    end: u64,
    now_on_record_clock: Option<u64>,
}

impl WallClock {
    fn new(snap: &Snapshot, clock: ChainClock) -> Self {
        let now_on_record_clock = match clock {
            ChainClock::Monotonic => monotonic_ns(),
            ChainClock::LastRecord => snap
                .records
                .recs
                .iter()
                .map(|r| r.raw.ts_ns)
                .chain(
                    snap.chains
                        .iter()
                        .filter_map(|c| c.outermost().map(|l| l.ts_ns)),
                )
                .max(),
        };
        WallClock {
            end: snap.window.end_unix_ns,
            now_on_record_clock,
        }
    }

    fn at(&self, ts: u64) -> u64 {
        match self.now_on_record_clock {
            Some(now) => (i128::from(self.end) - i128::from(now) + i128::from(ts))
                .clamp(0, u64::MAX as i128) as u64,
            None => self.end,
        }
    }
}

/// The batch of `snap` (rows in every table), and the number of record rows.
pub(crate) fn batch(
    key: &BatchKey<'_>,
    snap: &Snapshot,
    clock: ChainClock,
    spool_dropped: u64,
    jobs: &mut PidJobs,
) -> Vec<u8> {
    jobs.learn(snap);
    let wall = WallClock::new(snap, clock);
    let mut out = Vec::with_capacity(256 + snap.records.len() * 420 + snap.chains.len() * 600);
    let _ = writeln!(out, "{BATCH_MAGIC} {}", key.seq);
    let mut body = Vec::with_capacity(snap.records.len() * 400);
    record_rows(&mut body, key, snap, &wall);
    frame(&mut out, RECORDS.name, &body);
    body.clear();
    chain_rows(&mut body, key, snap, &wall, jobs);
    frame(&mut out, CHAINS.name, &body);
    body.clear();
    counter_rows(&mut body, key, snap);
    frame(&mut out, COUNTERS.name, &body);
    body.clear();
    snapshot_row(&mut body, key, snap, spool_dropped);
    frame(&mut out, SNAPSHOTS.name, &body);
    out
}

fn record_rows(body: &mut Vec<u8>, key: &BatchKey<'_>, snap: &Snapshot, wall: &WallClock) {
    let table = &snap.records.table;
    for (idx, r) in snap.records.recs.iter().enumerate() {
        let raw = &r.raw;
        let p = table.get(raw.probe_id);
        let nargs = (raw.nargs as usize).min(raw.args.len());
        push_row(
            body,
            &Row {
                key,
                time_ns: wall.at(raw.ts_ns),
                row: RecordRow {
                    idx: idx as u32,
                    probe: raw.probe_id,
                    function: p.map_or("", |p| p.function.as_str()),
                    module: p.map_or("", |p| p.module.as_str()),
                    errno: raw.err as u32,
                    errno_name: errno_label(raw.err as u32),
                    pid: raw.pid,
                    tid: raw.tid,
                    comm: comm_str(&raw.comm),
                    cgroup: r.proc_info.as_deref().map_or("", |i| i.cgroup.as_str()),
                    cgroup_id: raw.cgroup_id,
                    job: job(r.proc_info.as_deref()),
                    args: &raw.args[..nargs],
                    ts_ns: raw.ts_ns,
                    cpu: raw.cpu,
                    rec_seq: raw.seq,
                },
            },
        );
    }
}

fn chain_rows(
    body: &mut Vec<u8>,
    key: &BatchKey<'_>,
    snap: &Snapshot,
    wall: &WallClock,
    jobs: &PidJobs,
) {
    for (idx, c) in snap.chains.iter().enumerate() {
        let (Some(origin), Some(outer)) = (c.origin(), c.outermost()) else {
            continue;
        };
        let (of, om) = c.names_of(origin);
        let rev = c.links.iter().rev();
        push_row(
            body,
            &Row {
                key,
                time_ns: wall.at(outer.ts_ns),
                row: ChainRow {
                    idx: idx as u32,
                    owner: c.owner,
                    errno: outer.err,
                    errno_name: errno_label(outer.err),
                    pid: outer.pid,
                    tid: outer.tid,
                    comm: comm_str(&outer.comm),
                    origin_function: of,
                    origin_module: om,
                    origin_probe: origin.probe,
                    origin_errno: origin.err,
                    origin_errno_name: errno_label(origin.err),
                    functions: rev.clone().map(|l| c.names_of(l).0).collect(),
                    modules: rev.clone().map(|l| c.names_of(l).1).collect(),
                    link_probes: rev.clone().map(|l| l.probe).collect(),
                    link_errnos: rev.map(|l| l.err).collect(),
                    start_ns: origin.ts_ns,
                    end_ns: outer.ts_ns,
                    count: c.count,
                    last_end_ns: c.last_end_ns,
                    summary: c.summary(),
                    job: job(jobs.map.get(&outer.pid).map(|i| &**i)),
                },
            },
        );
    }
}

fn counter_rows(body: &mut Vec<u8>, key: &BatchKey<'_>, snap: &Snapshot) {
    let end = snap.window.end_unix_ns;
    for c in snap.counters.iter() {
        if c.calls == 0 && c.failures == 0 && c.received == 0 && c.dropped_userspace == 0 {
            continue;
        }
        push_row(
            body,
            &Row {
                key,
                time_ns: end,
                row: CounterRow {
                    probe: c.probe,
                    function: &c.function,
                    module: &c.module,
                    calls: c.calls,
                    failures: c.failures,
                    errno_names: c.errno.keys().map(String::as_str).collect(),
                    errno_counts: c.errno.values().copied().collect(),
                    received: c.received,
                    dropped_userspace: c.dropped_userspace,
                },
            },
        );
    }
}

fn snapshot_row(body: &mut Vec<u8>, key: &BatchKey<'_>, snap: &Snapshot, spool_dropped: u64) {
    let end = snap.window.end_unix_ns;
    push_row(
        body,
        &Row {
            key,
            time_ns: end,
            row: SnapshotRow {
                is_final: u8::from(snap.is_final),
                window_start_ns: snap.window.start_unix_ns,
                records: snap.records.len() as u32,
                chains: snap.chains.len() as u32,
                drops_kernel: snap.drops.kernel,
                drops_userspace: snap.drops.userspace,
                seq_gaps: snap.seq_gaps,
                decode_errors: snap.errors.decode,
                spool_dropped,
                invariant_ok: u8::from(snap.invariant.ok),
            },
        },
    );
}

/// A batch read back: its sequence number and its (table, JSONEachRow body) parts.
pub(crate) type ParsedBatch<'a> = (u64, Vec<(String, &'a [u8])>);

/// The parts of a batch.
pub(crate) fn parse_batch(bytes: &[u8]) -> Result<ParsedBatch<'_>, String> {
    let line = |b: &[u8]| -> Option<(String, usize)> {
        let nl = b.iter().position(|&c| c == b'\n')?;
        Some((String::from_utf8_lossy(&b[..nl]).into_owned(), nl + 1))
    };
    let (head, mut at) = line(bytes).ok_or("no batch header")?;
    let seq = head
        .strip_prefix(BATCH_MAGIC)
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| format!("bad batch header `{head}`"))?;
    let mut parts = Vec::new();
    while at < bytes.len() {
        let (h, n) = line(&bytes[at..]).ok_or("truncated part header")?;
        let (name, len) = h
            .split_once(' ')
            .and_then(|(t, l)| Some((t.to_string(), l.parse::<usize>().ok()?)))
            .ok_or_else(|| format!("bad part header `{h}`"))?;
        at += n;
        let body = bytes.get(at..at + len).ok_or("truncated part body")?;
        parts.push((name, body));
        at += len;
    }
    Ok((seq, parts))
}

#[cfg(test)]
// A test reads as one scenario from setup to assertions; the 80-line limit is for the code.
#[allow(clippy::too_many_lines)]
mod tests {
    use super::*;
    use collector::{KernelTotals, PgRecord, Pipeline, PipelineConfig, ProbeTable, ProcCache};
    use std::time::{Duration, SystemTime};

    fn rec(probe: u32, err: i32, ts_ns: u64, seq: u64) -> PgRecord {
        PgRecord {
            seq,
            ts_ns,
            probe_id: probe,
            err,
            pid: 7,
            tid: 7,
            cgroup_id: 1,
            cpu: 0,
            nargs: 1,
            args: [0x1000, 0, 0, 0],
            comm: *b"verbs_fail\0\0\0\0\0\0",
        }
    }

    #[test]
    fn batch_rows_carry_exactly_the_schema_columns() {
        let t = ProbeTable::from_triples(&[
            (0, "ib_uverbs_reg_mr", "ib_uverbs"),
            (1, "ib_umem_get", "ib_uverbs"),
        ])
        .with_calls(2, &[(0, 1)])
        .with_pins_user_memory(1);
        let mut p = Pipeline::new(
            Arc::new(t),
            PipelineConfig {
                derive_counters: true,
                seq_from_zero: false,
                ..Default::default()
            },
            ProcCache::disabled(),
        );
        for r in [rec(1, 14, 1_000, 0), rec(0, 14, 2_000, 1)] {
            p.ingest(&collector::encode(&r));
        }
        let k = std::sync::Arc::new(p.derived());
        let end = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let snap = p.snapshot(&k, end, true);
        let key = BatchKey {
            host: "h",
            boot_id: "b",
            run_id: 7,
            seq: 42,
            kernel: "k",
            manifest_hash: "m",
            snapshot: 0,
        };
        let b = batch(
            &key,
            &snap,
            ChainClock::LastRecord,
            3,
            &mut PidJobs::default(),
        );
        let (seq, parts) = parse_batch(&b).expect("parse");
        assert_eq!(seq, 42);
        let names: Vec<_> = parts.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["records", "chains", "counters", "snapshots"]);
        let mut rows_per_table = Vec::new();
        for ((name, body), t) in parts.iter().zip(super::super::schema::TABLES) {
            assert_eq!(name, t.name);
            let text = std::str::from_utf8(body).expect("utf8");
            let mut n = 0;
            for line in text.lines() {
                let v: serde_json::Value = serde_json::from_str(line).expect("row json");
                let keys: Vec<&str> = v
                    .as_object()
                    .expect("object")
                    .keys()
                    .map(|k| k.as_str())
                    .collect();
                let mut want: Vec<&str> = t.columns.iter().map(|c| c.0).collect();
                let mut got = keys.clone();
                want.sort_unstable();
                got.sort_unstable();
                assert_eq!(got, want, "{name}: {line}");
                assert_eq!(v["seq"], 42);
                n += 1;
            }
            rows_per_table.push(n);
        }
        // two records, one chain of two, two counters rows (derived), one snapshot row
        assert_eq!(rows_per_table, [2, 1, 2, 1]);
        let chain: serde_json::Value =
            serde_json::from_str(std::str::from_utf8(parts[1].1).expect("utf8").trim())
                .expect("chain row");
        assert_eq!(chain["owner"], "application");
        assert_eq!(
            chain["functions"],
            serde_json::json!(["ib_uverbs_reg_mr", "ib_umem_get"])
        );
        // the newest record maps to the window end; the older one 1 us before
        assert_eq!(chain["time_ns"], 1_700_000_000_000_000_000u64);
        let first: serde_json::Value = serde_json::from_str(
            std::str::from_utf8(parts[0].1)
                .expect("utf8")
                .lines()
                .next()
                .expect("row"),
        )
        .expect("record row");
        assert_eq!(first["time_ns"], 1_700_000_000_000_000_000u64 - 1_000);
        let snap_row: serde_json::Value =
            serde_json::from_str(std::str::from_utf8(parts[3].1).expect("utf8").trim())
                .expect("row");
        assert_eq!(
            (
                snap_row["records"].as_u64(),
                snap_row["spool_dropped"].as_u64()
            ),
            (Some(2), Some(3))
        );
        let _ = KernelTotals::default();
        assert!(parse_batch(b"nope\n").is_err());
        assert!(parse_batch(&b[..b.len() - 3]).is_err());
    }
}
