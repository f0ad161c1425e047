//! One snapshot as one batch: `JSONEachRow` bodies for the tables of [`super::schema`], framed
//! in one byte string (the spool file's content).
//!
//! Frame (v6): one header line that says what the batch must contain, then the bodies:
//! `probegen-batch/v6 <seq> records=<rows>:<bytes> chains=.. counters=.. snapshots=..
//! baselines=.. port_counters=.. qp_errors=.. fnv=<hex>` (`fnv`: FNV-1a 64 of everything after
//! the header line). A batch torn, cut at a part boundary or with one byte flipped does not
//! match its header: it is quarantined, never sent in part. Batches of earlier versions (in a
//! host's spool across a package upgrade) are still read whole: v5 (the same header without
//! `qp_errors=`), v4 (without `port_counters=` either), v3 (as v4; its success shapes and the
//! chains' bifurcation columns were in return order: [`return_order_set_aside`] leaves them
//! out, never merged with shapes in call order), v2 (the same header without `baselines=`
//! either) and v1 (`probegen-batch/v1 <seq>\n`, then per table `<name> <bytes>\n<body>`, the
//! first four tables), with no rows for the tables their version lacked.
//!
//! Times: `time_ns` is wall-clock ns. A record's `ts_ns` is the kernel's CLOCK_MONOTONIC, so
//! its wall time is `ts_ns` + (window end - "now" on the records' clock): live, "now" is this
//! host's CLOCK_MONOTONIC; replay, the newest record of the snapshot (the clock the chains use).

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

use serde::Serialize;

use collector::{
    comm_str, errno_label, monotonic_ns, AttachKind, ChainClock, DataPlaneClass, GidType, ProcInfo,
    Snapshot,
};

use crate::schema::{Table, TABLES};

pub(crate) const BATCH_MAGIC: &str = "probegen-batch/v6";
/// v5: every table but `qp_errors`
const BATCH_MAGIC_V5: &str = "probegen-batch/v5";
/// v4: every table but `port_counters`
const BATCH_MAGIC_V4: &str = "probegen-batch/v4";
/// v3: the tables of v4, shapes and bifurcations in return order
const BATCH_MAGIC_V3: &str = "probegen-batch/v3";
const BATCH_MAGIC_V2: &str = "probegen-batch/v2";
const BATCH_MAGIC_V1: &str = "probegen-batch/v1";
/// The tables of a v1 or v2 batch (every table but `baselines`), in [`TABLES`] order.
const TABLES_BEFORE_V3: usize = 4;
/// The tables of a v3 or v4 batch (every table but `port_counters` and `qp_errors`).
const TABLES_BEFORE_V5: usize = 5;
/// The tables of a v5 batch (every table but `qp_errors`).
const TABLES_BEFORE_V6: usize = 6;

/// One value per table of [`TABLES`].
pub(crate) type PerTable<T> = [T; TABLES.len()];

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
        Some(i) => job_of(i.job_id(), &i.job),
        None => Job {
            job_id: "",
            job_keys: Vec::new(),
            job_values: Vec::new(),
        },
    }
}

/// The job columns from its id and its allow-listed variables.
fn job_of<'a>(
    id: Option<&'a str>,
    vars: &'a std::collections::BTreeMap<String, String>,
) -> Job<'a> {
    Job {
        job_id: id.unwrap_or(""),
        job_keys: vars.keys().map(String::as_str).collect(),
        job_values: vars.values().map(String::as_str).collect(),
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
struct QpErrorRow<'a> {
    idx: u32,
    probe: u32,
    function: &'a str,
    module: &'a str,
    class: &'static str,
    status: String,
    qpn: u32,
    port: u32,
    pid: u32,
    comm: std::borrow::Cow<'a, str>,
    cgroup: &'a str,
    #[serde(flatten)]
    job: Job<'a>,
    peer_qpn: u32,
    peer_gid: &'a str,
    peer_gid_type: &'static str,
    qp_type: &'a str,
    since_rtr_ns: u64,
    ts_ns: u64,
}

#[derive(Serialize)]
struct ChainRow<'a> {
    idx: u32,
    owner: collector::Owner,
    owner_reason: &'a str,
    owner_site: &'a str,
    owner_candidates: Vec<collector::Owner>,
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
    #[serde(flatten)]
    note: NoteCols<'a>,
}

/// A chain's note from the baseline as columns (0 and empty without one).
#[derive(Serialize, Default)]
struct NoteCols<'a> {
    expected: u8,
    expected_why: &'a str,
    bifurcation_after: &'a str,
    bifurcation_baseline_next: &'a str,
    bifurcation_share: f64,
    bifurcation_this_next: &'a str,
    bifurcation_shape: &'a str,
    bifurcation_baseline_next_layer: &'static str,
    bifurcation_this_next_layer: &'static str,
}

impl<'a> NoteCols<'a> {
    fn of(note: Option<&'a collector::ChainNote>) -> Self {
        let Some(n) = note else {
            return NoteCols::default();
        };
        let mut cols = NoteCols {
            expected: u8::from(n.expected),
            expected_why: &n.expected_why,
            ..NoteCols::default()
        };
        if let Ok(b) = &n.bifurcation {
            cols.bifurcation_after = &b.after;
            cols.bifurcation_baseline_next = b.baseline_next.as_deref().unwrap_or("");
            cols.bifurcation_share = b.share;
            cols.bifurcation_this_next = b.this_next.as_deref().unwrap_or("");
            cols.bifurcation_shape = &b.shape;
            cols.bifurcation_baseline_next_layer = b.baseline_next_layer.map_or("", |l| l.as_str());
            cols.bifurcation_this_next_layer = b.this_next_layer.map_or("", |l| l.as_str());
        }
        cols
    }
}

#[derive(Serialize)]
struct BaselineRow<'a> {
    handler: &'a str,
    handler_probe: u32,
    shape: &'a str,
    functions: &'a [String],
    count: u64,
    successes: u64,
    other: u64,
    share: f64,
    p50_ns: u64,
    p90_ns: u64,
    p99_ns: u64,
    /// always [`collector::LOG2_BUCKETS`] long: arrays of one length add up element-wise
    duration_log2: Vec<u64>,
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

/// The batch of `snap` (rows in every table), with its header.
pub(crate) fn batch(
    key: &BatchKey<'_>,
    snap: &Snapshot,
    clock: ChainClock,
    spool_dropped: u64,
    covered_from: u64,
    jobs: &mut PidJobs,
) -> Vec<u8> {
    jobs.learn(snap);
    let wall = WallClock::new(snap, clock);
    let mut bodies: PerTable<Vec<u8>> = Default::default();
    bodies[0].reserve(snap.records.len() * 420);
    record_rows(&mut bodies[0], key, snap, &wall);
    chain_rows(&mut bodies[1], key, snap, &wall, jobs);
    counter_rows(&mut bodies[2], key, snap);
    snapshot_row(&mut bodies[3], key, snap, spool_dropped, covered_from);
    baseline_rows(&mut bodies[4], key, snap);
    port_counter_rows(&mut bodies[5], key, snap);
    qp_error_rows(&mut bodies[6], key, snap, &wall);
    frame(key.seq, &bodies)
}

/// FNV-1a 64: any one changed byte changes it (each step is a bijection of the state).
pub(crate) fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The v6 frame of the tables' bodies (in [`TABLES`] order).
pub(crate) fn frame(seq: u64, bodies: &PerTable<Vec<u8>>) -> Vec<u8> {
    frame_as(BATCH_MAGIC, seq, &TABLES, bodies)
}

/// A frame with `magic`'s header naming `tables` (a prefix of [`TABLES`]).
fn frame_as(magic: &str, seq: u64, tables: &[&Table], bodies: &[Vec<u8>]) -> Vec<u8> {
    let len: usize = bodies.iter().map(Vec::len).sum();
    let mut out = Vec::with_capacity(160 + len);
    let _ = write!(out, "{magic} {seq}");
    let mut sum = 0xcbf2_9ce4_8422_2325u64;
    for (t, b) in tables.iter().zip(bodies) {
        let rows = b.iter().filter(|&&c| c == b'\n').count();
        let _ = write!(out, " {}={rows}:{}", t.name, b.len());
        sum = b.iter().fold(sum, |h, &c| {
            (h ^ u64::from(c)).wrapping_mul(0x0000_0100_0000_01b3)
        });
    }
    let _ = writeln!(out, " fnv={sum:016x}");
    for b in bodies {
        out.extend_from_slice(b);
    }
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
                    // a data-plane record's code names a status or an event, not an errno
                    errno_name: p
                        .and_then(|p| p.data_plane_status(raw.err))
                        .map_or_else(|| errno_label(raw.err as u32), std::borrow::Cow::Owned),
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

/// The name of a GID type as the snapshot writes it (`roce-v2`).
fn gid_type_name(t: GidType) -> &'static str {
    match t {
        GidType::Ib => "ib",
        GidType::RoceV1 => "roce-v1",
        GidType::RoceV2 => "roce-v2",
        GidType::Unknown => "unknown",
    }
}

/// A row per data-plane record of a QP or a port (the `peer` class never records; a record of
/// it, or of a probe the table lacks, is no row), `idx` its place in `records`.
fn qp_error_rows(body: &mut Vec<u8>, key: &BatchKey<'_>, snap: &Snapshot, wall: &WallClock) {
    provider_rows(body, key, snap, wall);
    let table = &snap.records.table;
    for (idx, r) in snap.records.recs.iter().enumerate() {
        let raw = &r.raw;
        let Some(p) = table.get(raw.probe_id) else {
            continue;
        };
        let AttachKind::Fentry { class, .. } = &p.kind else {
            continue;
        };
        if *class == DataPlaneClass::Peer {
            continue;
        }
        let Some(status) = p.data_plane_status(raw.err) else {
            continue;
        };
        let nargs = (raw.nargs as usize).min(raw.args.len());
        let arg = |i: usize| raw.args[..nargs].get(i).map_or(0, |&a| a as u32);
        let peer = r.peer.as_ref();
        let info = r.proc_info.as_deref();
        push_row(
            body,
            &Row {
                key,
                time_ns: wall.at(raw.ts_ns),
                row: QpErrorRow {
                    idx: idx as u32,
                    probe: raw.probe_id,
                    function: &p.function,
                    module: &p.module,
                    class: class.as_str(),
                    status,
                    qpn: arg(0),
                    port: arg(1),
                    pid: raw.pid,
                    comm: comm_str(&raw.comm),
                    cgroup: info.map_or("", |i| i.cgroup.as_str()),
                    job: job(info),
                    peer_qpn: peer.map_or(0, |p| p.qpn),
                    peer_gid: peer.and_then(|p| p.gid.as_deref()).unwrap_or(""),
                    peer_gid_type: peer.map_or("", |p| gid_type_name(p.gid_type)),
                    qp_type: peer.map_or("", |p| p.qp_type.as_str()),
                    since_rtr_ns: peer.map_or(0, |p| p.since_rtr_ns),
                    ts_ns: raw.ts_ns,
                },
            },
        );
    }
}

/// A row per QP the provider stage (`--provider-probes`) made an entry for in this window
/// (its first error completion, class `provider`; its count is in the snapshot line), `idx`
/// after the records' so the key stays unique; `probe` is none of the set's (`u32::MAX`).
fn provider_rows(body: &mut Vec<u8>, key: &BatchKey<'_>, snap: &Snapshot, wall: &WallClock) {
    let Some(p) = &snap.providers else {
        return;
    };
    let made = p.qps.iter().filter(|e| e.snapshot == snap.snapshot);
    for (i, e) in made.enumerate() {
        let peer = e.peer.as_ref();
        push_row(
            body,
            &Row {
                key,
                time_ns: wall.at(e.first_ts_ns),
                row: QpErrorRow {
                    idx: (snap.records.len() + i) as u32,
                    probe: u32::MAX,
                    function: collector::MLX5_FUNCTION,
                    module: collector::MLX5_LIBRARY,
                    class: "provider",
                    status: e.status.to_string(),
                    qpn: e.qpn,
                    port: 0,
                    pid: e.pid,
                    comm: std::borrow::Cow::Borrowed(&e.comm),
                    cgroup: &e.cgroup,
                    job: job_of(e.job_id(), &e.job),
                    peer_qpn: peer.map_or(0, |p| p.qpn),
                    peer_gid: peer.and_then(|p| p.gid.as_deref()).unwrap_or(""),
                    peer_gid_type: peer.map_or("", |p| gid_type_name(p.gid_type)),
                    qp_type: peer.map_or("", |p| p.qp_type.as_str()),
                    since_rtr_ns: peer.map_or(0, |p| p.since_rtr_ns),
                    ts_ns: e.first_ts_ns,
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
                    owner_reason: c.decision.reason(),
                    owner_site: c.decision.site(),
                    owner_candidates: c.decision.candidates.iter().map(|x| x.owner).collect(),
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
                    note: NoteCols::of(c.note),
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

#[derive(Serialize)]
struct PortCounterRow<'a> {
    device: &'a str,
    port: u32,
    counter: &'a str,
    delta: u64,
    total: u64,
    reset: &'a str,
}

/// A row per port error counter that moved or reset in the window.
fn port_counter_rows(body: &mut Vec<u8>, key: &BatchKey<'_>, snap: &Snapshot) {
    for c in &snap.port_counters {
        let row = PortCounterRow {
            device: &c.device,
            port: c.port,
            counter: &c.counter,
            delta: c.delta,
            total: c.total.unwrap_or(0),
            reset: c.reset.map_or("", collector::CounterReset::as_str),
        };
        let time_ns = snap.window.end_unix_ns;
        push_row(body, &Row { key, time_ns, row });
    }
}

/// With the baseline on: a row per (handler, success shape), the run's baseline so far.
fn baseline_rows(body: &mut Vec<u8>, key: &BatchKey<'_>, snap: &Snapshot) {
    let Some(b) = &snap.baseline else {
        return;
    };
    let end = snap.window.end_unix_ns;
    for h in &b.handlers {
        for s in &h.shapes {
            let mut hist = s.duration_log2.clone();
            // a longer one (a state file not ours) keeps its counts in the last bucket
            // (saturating: counts read from a file are not trusted to add up)
            let past = hist
                .iter()
                .skip(collector::LOG2_BUCKETS)
                .fold(0u64, |a, &c| a.saturating_add(c));
            hist.resize(collector::LOG2_BUCKETS, 0);
            let last = &mut hist[collector::LOG2_BUCKETS - 1];
            *last = last.saturating_add(past);
            push_row(
                body,
                &Row {
                    key,
                    time_ns: end,
                    row: BaselineRow {
                        handler: &h.function,
                        handler_probe: h.probe,
                        shape: &s.shape,
                        functions: &s.functions,
                        count: s.count,
                        successes: h.successes,
                        other: h.other,
                        share: s.share,
                        p50_ns: s.p50_ns,
                        p90_ns: s.p90_ns,
                        p99_ns: s.p99_ns,
                        duration_log2: hist,
                    },
                },
            );
        }
    }
}

/// The batch's `snapshots` row; `covered_from`: the start of the first window since the last
/// row (idle windows skipped before it are this row's too).
fn snapshot_row(
    body: &mut Vec<u8>,
    key: &BatchKey<'_>,
    snap: &Snapshot,
    spool_dropped: u64,
    covered_from: u64,
) {
    let end = snap.window.end_unix_ns;
    push_row(
        body,
        &Row {
            key,
            time_ns: end,
            row: SnapshotRow {
                is_final: u8::from(snap.is_final),
                window_start_ns: covered_from,
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

/// What a batch's header says it contains (read without the bodies: the spool's index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BatchHead {
    pub seq: u64,
    /// rows per table, in [`TABLES`] order (0 for a table the batch's version lacks)
    pub rows: PerTable<u64>,
    /// the file's whole length (v2, v3; v1: unknown until read)
    pub len: Option<u64>,
}

/// Why a batch read back is not what was spooled. Never quotes the file: it may not be ours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BadBatch {
    NoHeader,
    BadHeader,
    /// the header's sequence number is not the file name's
    OtherSeq(u64),
    /// shorter or longer than the header says (torn, cut, appended to)
    Length {
        want: u64,
        got: u64,
    },
    Checksum,
    /// a table's rows are not whole or not as many as the header says
    Rows(&'static str),
}

impl std::fmt::Display for BadBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BadBatch::NoHeader => write!(f, "no batch header line"),
            BadBatch::BadHeader => write!(f, "not a probegen batch header"),
            BadBatch::OtherSeq(s) => write!(f, "its header names batch {s}"),
            BadBatch::Length { want, got } => {
                write!(f, "{got} bytes where its header says {want} (torn or cut)")
            }
            BadBatch::Checksum => write!(f, "checksum mismatch (the bytes changed on disk)"),
            BadBatch::Rows(t) => write!(f, "the `{t}` part is not whole rows as its header says"),
        }
    }
}

/// A v2 to v5 header: the header's line after the magic (`rest`), the number of tables its
/// version names (the first of [`TABLES`]); with each table's body length and the checksum.
fn parse_counted_head(
    magic: &str,
    rest: &str,
    tables: usize,
) -> Option<(BatchHead, PerTable<u64>, u64)> {
    let mut it = rest.split(' ');
    let seq = it.next()?.parse().ok()?;
    let (mut rows, mut bytes) = (PerTable::<u64>::default(), PerTable::<u64>::default());
    for (i, t) in TABLES.iter().take(tables).enumerate() {
        let (r, b) = it
            .next()?
            .strip_prefix(t.name)?
            .strip_prefix('=')?
            .split_once(':')?;
        rows[i] = r.parse().ok()?;
        bytes[i] = b.parse().ok()?;
    }
    let sum = u64::from_str_radix(it.next()?.strip_prefix("fnv=")?, 16).ok()?;
    if it.next().is_some() {
        return None;
    }
    let body: u64 = bytes.iter().try_fold(0u64, |a, &b| a.checked_add(b))?;
    let head = BatchHead {
        seq,
        rows,
        len: Some(body.checked_add(rest.len() as u64 + magic.len() as u64 + 2)?),
    };
    Some((head, bytes, sum))
}

/// The magic and table count of a v2 to v6 header line, and the line after the magic.
fn counted_version(line: &str) -> Option<(&'static str, usize, &str)> {
    [
        (BATCH_MAGIC, TABLES.len()),
        (BATCH_MAGIC_V5, TABLES_BEFORE_V6),
        (BATCH_MAGIC_V4, TABLES_BEFORE_V5),
        (BATCH_MAGIC_V3, TABLES_BEFORE_V5),
        (BATCH_MAGIC_V2, TABLES_BEFORE_V3),
    ]
    .into_iter()
    .find_map(|(magic, n)| {
        let rest = line.strip_prefix(magic)?.strip_prefix(' ')?;
        Some((magic, n, rest))
    })
}

/// The header of a batch from its first bytes (at least the first line).
pub(crate) fn parse_head(start: &[u8]) -> Result<BatchHead, BadBatch> {
    let nl = start
        .iter()
        .position(|&c| c == b'\n')
        .ok_or(BadBatch::NoHeader)?;
    let line = std::str::from_utf8(&start[..nl]).map_err(|_| BadBatch::BadHeader)?;
    if let Some((magic, n, rest)) = counted_version(line) {
        return parse_counted_head(magic, rest, n)
            .map(|h| h.0)
            .ok_or(BadBatch::BadHeader);
    }
    let seq = line
        .strip_prefix(BATCH_MAGIC_V1)
        .and_then(|r| r.trim().parse().ok())
        .ok_or(BadBatch::BadHeader)?;
    Ok(BatchHead {
        seq,
        rows: PerTable::default(),
        len: None,
    })
}

fn rows_in(body: &[u8]) -> u64 {
    body.iter().filter(|&&c| c == b'\n').count() as u64
}

/// One table's body and its row count, per table of [`TABLES`].
pub(crate) type Parts<'a> = PerTable<(&'a [u8], u64)>;

/// A batch read back and checked against its header: the tables' bodies (whole rows, in
/// [`TABLES`] order; empty for a table the batch's version lacks) and their row counts.
pub(crate) fn parse_batch(bytes: &[u8], seq: u64) -> Result<Parts<'_>, BadBatch> {
    let nl = bytes
        .iter()
        .position(|&c| c == b'\n')
        .ok_or(BadBatch::NoHeader)?;
    let line = std::str::from_utf8(&bytes[..nl]).map_err(|_| BadBatch::BadHeader)?;
    if let Some((magic, n, rest)) = counted_version(line) {
        let (head, lens, sum) = parse_counted_head(magic, rest, n).ok_or(BadBatch::BadHeader)?;
        return counted_parts(bytes, nl + 1, seq, n, (head, lens, sum));
    }
    let head = parse_head(bytes)?;
    if head.seq != seq {
        return Err(BadBatch::OtherSeq(head.seq));
    }
    v1_parts(bytes, nl + 1)
}

/// The parts of a v2 to v6 batch whose header (`n` tables) ends at `at`.
fn counted_parts(
    bytes: &[u8],
    mut at: usize,
    seq: u64,
    n: usize,
    (head, lens, sum): (BatchHead, PerTable<u64>, u64),
) -> Result<Parts<'_>, BadBatch> {
    if head.seq != seq {
        return Err(BadBatch::OtherSeq(head.seq));
    }
    let want = head.len.unwrap_or(0);
    if want != bytes.len() as u64 {
        return Err(BadBatch::Length {
            want,
            got: bytes.len() as u64,
        });
    }
    if fnv1a64(&bytes[at..]) != sum {
        return Err(BadBatch::Checksum);
    }
    let mut out: Parts<'_> = [(&[], 0); TABLES.len()];
    for (i, t) in TABLES.iter().take(n).enumerate() {
        let body = &bytes[at..at + lens[i] as usize];
        if rows_in(body) != head.rows[i] || body.last().is_some_and(|&c| c != b'\n') {
            return Err(BadBatch::Rows(t.name));
        }
        out[i] = (body, head.rows[i]);
        at += lens[i] as usize;
    }
    Ok(out)
}

/// The parts of a v1 batch whose header line ends at `at`: every table's part but
/// `baselines`, in order, whole rows, nothing after.
fn v1_parts(bytes: &[u8], mut at: usize) -> Result<Parts<'_>, BadBatch> {
    let mut out: Parts<'_> = [(&[], 0); TABLES.len()];
    for (i, t) in TABLES.iter().take(TABLES_BEFORE_V3).enumerate() {
        let rest = &bytes[at..];
        let pnl = rest
            .iter()
            .position(|&c| c == b'\n')
            .ok_or(BadBatch::Rows(t.name))?;
        let len = std::str::from_utf8(&rest[..pnl])
            .ok()
            .and_then(|h| {
                h.strip_prefix(t.name)?
                    .strip_prefix(' ')?
                    .parse::<usize>()
                    .ok()
            })
            .ok_or(BadBatch::Rows(t.name))?;
        let body = rest
            .get(pnl + 1..pnl + 1 + len)
            .ok_or(BadBatch::Rows(t.name))?;
        if body.last().is_some_and(|&c| c != b'\n') {
            return Err(BadBatch::Rows(t.name));
        }
        out[i] = (body, rows_in(body));
        at += pnl + 1 + len;
    }
    if at != bytes.len() {
        return Err(BadBatch::Length {
            want: at as u64,
            got: bytes.len() as u64,
        });
    }
    Ok(out)
}

/// The chains' columns a v3 batch filled in return order (the steps compared, the shape named).
const RETURN_ORDER_COLUMNS: [&str; 5] = [
    "bifurcation_after",
    "bifurcation_baseline_next",
    "bifurcation_share",
    "bifurcation_this_next",
    "bifurcation_shape",
];

/// A v3 batch (an earlier version's, in the spool across a package upgrade) as a v4 one whose
/// parts say nothing in return order: its `baselines` rows (success shapes, their steps in
/// return order: summed with shapes in call order they would be other shapes of the same
/// calls) are left out and its chains' bifurcation columns emptied, the rest as it was. With
/// the line that says so; `None` for any other batch (a v3 one that does not read is left to
/// [`parse_batch`] to refuse).
pub(crate) fn return_order_set_aside(bytes: &[u8], seq: u64) -> Option<(Vec<u8>, String)> {
    if !bytes.starts_with(BATCH_MAGIC_V3.as_bytes()) {
        return None;
    }
    let parts = parse_batch(bytes, seq).ok()?;
    let mut bodies: PerTable<Vec<u8>> = Default::default();
    for (i, (body, _)) in parts.iter().enumerate() {
        bodies[i] = body.to_vec();
    }
    let shapes = parts[4].1;
    bodies[4].clear();
    let mut chains = Vec::with_capacity(bodies[1].len());
    let mut emptied = 0u64;
    for line in bodies[1].split_inclusive(|&c| c == b'\n') {
        match serde_json::from_slice::<serde_json::Value>(line) {
            Ok(serde_json::Value::Object(mut row)) => {
                if row.get("bifurcation_shape").is_some_and(|v| v != "") {
                    emptied += 1;
                }
                for c in RETURN_ORDER_COLUMNS {
                    if row.contains_key(c) {
                        let empty = if c == "bifurcation_share" {
                            serde_json::json!(0.0)
                        } else {
                            serde_json::json!("")
                        };
                        row.insert(c.to_string(), empty);
                    }
                }
                push_row(&mut chains, &row);
            }
            // not ours to judge: sent as it was (ClickHouse refuses it, the batch is set aside)
            _ => chains.extend_from_slice(line),
        }
    }
    bodies[1] = chains;
    let line = format!(
        "batch {seq}: written by an earlier version (frame v3, success shapes in return \
         order): its {shapes} baselines rows are not sent and {emptied} chains' bifurcation \
         columns are left empty (the collector's batches since carry them in call order)"
    );
    Some((frame(seq, &bodies), line))
}

/// A batch framed as v3 (shapes in return order), for the tests of reading a spool across an
/// upgrade.
#[cfg(test)]
pub(crate) fn frame_v3(seq: u64, bodies: &[Vec<u8>; TABLES_BEFORE_V5]) -> Vec<u8> {
    frame_as(BATCH_MAGIC_V3, seq, &TABLES[..TABLES_BEFORE_V5], bodies)
}

/// A batch framed as the previous version (v5: every table but `qp_errors`) did, for the
/// tests of reading a spool across an upgrade.
#[cfg(test)]
pub(crate) fn frame_v5(seq: u64, bodies: &[Vec<u8>; TABLES_BEFORE_V6]) -> Vec<u8> {
    frame_as(BATCH_MAGIC_V5, seq, &TABLES[..TABLES_BEFORE_V6], bodies)
}

/// A batch framed as an earlier version (v4: every table but `port_counters` and
/// `qp_errors`) did, for the tests of reading a spool across an upgrade.
#[cfg(test)]
pub(crate) fn frame_v4(seq: u64, bodies: &[Vec<u8>; TABLES_BEFORE_V5]) -> Vec<u8> {
    frame_as(BATCH_MAGIC_V4, seq, &TABLES[..TABLES_BEFORE_V5], bodies)
}

/// A batch framed as the previous version (v2: every table but `baselines`) did, for the
/// tests of reading a spool across an upgrade.
#[cfg(test)]
pub(crate) fn frame_v2(seq: u64, bodies: &[Vec<u8>; TABLES_BEFORE_V3]) -> Vec<u8> {
    frame_as(BATCH_MAGIC_V2, seq, &TABLES[..TABLES_BEFORE_V3], bodies)
}

#[cfg(test)]
// A test reads as one scenario from setup to assertions; the 80-line limit is for the code.
#[allow(clippy::too_many_lines)]
mod tests {
    use super::*;
    use collector::{KernelTotals, PgRecord, Pipeline, PipelineConfig, ProbeTable};
    use serde_json::json;
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
            nargs: 1,
            args: [0x1000, 0, 0, 0],
            comm: *b"verbs_fail\0\0\0\0\0\0",
            ..PgRecord::default()
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
        );
        for r in [rec(1, 14, 1_000, 0), rec(0, 14, 2_000, 1)] {
            p.ingest(&collector::encode(&r));
        }
        let k = std::sync::Arc::new(p.derived());
        let end = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let mut snap = p.snapshot(&k, end, true);
        snap.baseline = Some(test_baseline());
        snap.port_counters = vec![
            collector::PortCounterOut {
                device: "rxe0".into(),
                port: 1,
                counter: "retry_exceeded_err".into(),
                delta: 1,
                total: Some(4),
                reset: None,
            },
            collector::PortCounterOut {
                device: "rxe0".into(),
                port: 1,
                counter: "send_err".into(),
                delta: 0,
                total: None,
                reset: Some(collector::CounterReset::Absent),
            },
        ];
        snap.chains.set_notes(vec![collector::ChainNote {
            bifurcation: Ok(collector::Bifurcation {
                after: "ib_uverbs_reg_mr".into(),
                baseline_next: Some("rxe_reg_user_mr".into()),
                baseline_next_layer: Some(manifest::Layer::Vendor),
                share: 0.75,
                this_next: None,
                this_next_layer: None,
                shape: "0123456789ab".into(),
                path: "failures",
                functions: vec![],
                common: 1,
            }),
            expected: true,
            expected_why: "seen in 5 processes, all recovered".into(),
        }]);
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
            snap.window.start_unix_ns,
            &mut PidJobs::default(),
        );
        let parts = parse_batch(&b, 42).expect("parse");
        assert_eq!(parse_batch(&b, 41), Err(BadBatch::OtherSeq(42)));
        let head = parse_head(&b).expect("head");
        assert_eq!(
            (head.rows, head.len),
            ([2, 1, 2, 1, 2, 2, 0], Some(b.len() as u64))
        );
        let mut rows_per_table = Vec::new();
        for ((body, rows), t) in parts.iter().zip(super::super::schema::TABLES) {
            let name = t.name;
            assert_eq!(*rows as usize, body.iter().filter(|&&c| c == b'\n').count());
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
        // two records, one chain of two, two counters rows (derived), one snapshot row, two
        // baseline shapes, two port counters (a rise, a reset)
        assert_eq!(rows_per_table, [2, 1, 2, 1, 2, 2, 0]);
        let ports: Vec<serde_json::Value> = std::str::from_utf8(parts[5].0)
            .expect("utf8")
            .lines()
            .map(|l| serde_json::from_str(l).expect("port row"))
            .collect();
        let brief = |v: &serde_json::Value| {
            (
                v["counter"].clone(),
                v["delta"].clone(),
                v["total"].clone(),
                v["reset"].clone(),
            )
        };
        assert_eq!(
            brief(&ports[0]),
            (json!("retry_exceeded_err"), json!(1), json!(4), json!(""))
        );
        assert_eq!(
            brief(&ports[1]),
            (json!("send_err"), json!(0), json!(0), json!("absent"))
        );
        // the same batch as the previous version framed it (v4: no port_counters): read whole
        let v4 = frame_v4(42, &std::array::from_fn(|i| parts[i].0.to_vec()));
        let back = parse_batch(&v4, 42).expect("v4");
        assert_eq!(back.map(|p| p.1), [2, 1, 2, 1, 2, 0, 0]);
        assert_eq!(parse_head(&v4).map(|h| h.rows), Ok([2, 1, 2, 1, 2, 0, 0]));
        assert!(
            return_order_set_aside(&v4, 42).is_none(),
            "a v4 batch goes as it is"
        );
        let chain: serde_json::Value =
            serde_json::from_str(std::str::from_utf8(parts[1].0).expect("utf8").trim())
                .expect("chain row");
        assert_eq!(chain["owner"], "application");
        // a table without site data: the owner says why it is the layer's guess
        assert_eq!(chain["owner_reason"], collector::NO_SITE_DATA);
        assert_eq!(
            chain["owner_candidates"],
            serde_json::json!(["application"])
        );
        assert_eq!(
            chain["functions"],
            serde_json::json!(["ib_uverbs_reg_mr", "ib_umem_get"])
        );
        // the baseline's note: a missing next step is an empty string
        assert_eq!(
            [
                &chain["expected"],
                &chain["bifurcation_after"],
                &chain["bifurcation_baseline_next"],
                &chain["bifurcation_share"],
                &chain["bifurcation_this_next"],
                &chain["bifurcation_shape"],
            ],
            [
                &serde_json::json!(1),
                &serde_json::json!("ib_uverbs_reg_mr"),
                &serde_json::json!("rxe_reg_user_mr"),
                &serde_json::json!(0.75),
                &serde_json::json!(""),
                &serde_json::json!("0123456789ab"),
            ]
        );
        assert_eq!(
            [
                &chain["bifurcation_baseline_next_layer"],
                &chain["bifurcation_this_next_layer"]
            ],
            [&serde_json::json!("vendor"), &serde_json::json!("")]
        );
        // the same batch as an earlier version framed it (v3: its shapes and bifurcations in
        // return order): read, those parts left out, never sent beside the call order's
        let v3 = frame_v3(42, &std::array::from_fn(|i| parts[i].0.to_vec()));
        assert!(
            return_order_set_aside(&b, 42).is_none(),
            "a v4 batch goes as it is"
        );
        assert!(return_order_set_aside(&v3[..v3.len() - 1], 42).is_none());
        let (v4, line) = return_order_set_aside(&v3, 42).expect("a v3 batch");
        assert!(
            line.contains("its 2 baselines rows are not sent and 1 chains' bifurcation columns"),
            "{line}"
        );
        let back = parse_batch(&v4, 42).expect("framed as v4");
        assert_eq!(back.map(|p| p.1), [2, 1, 2, 1, 0, 0, 0]);
        for t in [0, 2, 3] {
            assert_eq!(back[t].0, parts[t].0, "{}", TABLES[t].name);
        }
        let old: serde_json::Value = serde_json::from_slice(back[1].0).expect("chain row");
        for c in RETURN_ORDER_COLUMNS {
            assert!(old[c] == "" || old[c] == 0.0, "{c}: {old}");
        }
        assert_eq!(
            (&old["expected"], &old["functions"], &old["seq"]),
            (&chain["expected"], &chain["functions"], &chain["seq"])
        );
        let shapes: Vec<serde_json::Value> = std::str::from_utf8(parts[4].0)
            .expect("utf8")
            .lines()
            .map(|l| serde_json::from_str(l).expect("baseline row"))
            .collect();
        assert_eq!(
            (
                &shapes[1]["handler"],
                &shapes[1]["count"],
                &shapes[1]["successes"]
            ),
            (
                &serde_json::json!("ib_uverbs_reg_mr"),
                &serde_json::json!(1),
                &serde_json::json!(5)
            )
        );
        // fixed length; the counts past the last bucket of a longer array are in the last
        let hist = |i: usize| {
            shapes[i]["duration_log2"]
                .as_array()
                .expect("array")
                .clone()
        };
        assert_eq!(hist(0).len(), collector::LOG2_BUCKETS);
        assert_eq!(
            (&hist(0)[10], &hist(0)[11]),
            (&serde_json::json!(3), &serde_json::json!(1))
        );
        assert_eq!(hist(1)[collector::LOG2_BUCKETS - 1], 3);
        // the newest record maps to the window end; the older one 1 us before
        assert_eq!(chain["time_ns"], 1_700_000_000_000_000_000u64);
        let first: serde_json::Value = serde_json::from_str(
            std::str::from_utf8(parts[0].0)
                .expect("utf8")
                .lines()
                .next()
                .expect("row"),
        )
        .expect("record row");
        assert_eq!(first["time_ns"], 1_700_000_000_000_000_000u64 - 1_000);
        let snap_row: serde_json::Value =
            serde_json::from_str(std::str::from_utf8(parts[3].0).expect("utf8").trim())
                .expect("row");
        assert_eq!(
            (
                snap_row["records"].as_u64(),
                snap_row["spool_dropped"].as_u64()
            ),
            (Some(2), Some(3))
        );
        let _ = KernelTotals::default();
        assert_eq!(parse_batch(b"nope\n", 42), Err(BadBatch::BadHeader));
        assert!(matches!(
            parse_batch(&b[..b.len() - 3], 42),
            Err(BadBatch::Length { .. })
        ));
        // one flipped byte anywhere after the header
        for at in [
            b.iter().position(|&c| c == b'\n').expect("nl") + 5,
            b.len() - 2,
        ] {
            let mut f = b.clone();
            f[at] ^= 0x20;
            assert_eq!(parse_batch(&f, 42), Err(BadBatch::Checksum), "byte {at}");
        }
    }

    /// A table with one control-path probe and data-plane probes of every class.
    /// `snap` as batch `seq` of host h, boot b, run 7 (a replay's clock, no chain earlier).
    fn replayed_batch(snap: &Snapshot, seq: u64) -> Vec<u8> {
        let key = BatchKey {
            host: "h",
            boot_id: "b",
            run_id: 7,
            seq,
            kernel: "k",
            manifest_hash: "m",
            snapshot: 0,
        };
        batch(
            &key,
            snap,
            ChainClock::LastRecord,
            0,
            snap.window.start_unix_ns,
            &mut PidJobs::default(),
        )
    }

    /// A replay pipeline of [`data_plane_table`] (counters derived from the records).
    fn data_plane_pipeline() -> Pipeline {
        Pipeline::new(
            Arc::new(data_plane_table()),
            PipelineConfig {
                derive_counters: true,
                seq_from_zero: false,
                ..Default::default()
            },
        )
    }

    fn data_plane_table() -> ProbeTable {
        let mut t = ProbeTable::from_triples(&[
            (0, "ib_uverbs_reg_mr", "ib_uverbs"),
            (1, "rxe_cq_post", "rdma_rxe"),
            (2, "ib_uverbs_event_handler", "ib_uverbs"),
            (3, "_ib_modify_qp", "ib_core"),
        ]);
        let kinds = [
            (
                collector::DataPlaneClass::Completion,
                vec!["IB_WC_LOC_LEN_ERR", "IB_WC_RETRY_EXC_ERR"],
            ),
            (
                collector::DataPlaneClass::AsyncEvent,
                vec!["IB_EVENT_QP_FATAL", "IB_EVENT_PORT_ERR"],
            ),
            (collector::DataPlaneClass::Peer, vec!["IB_QPS_RTR"]),
        ];
        for (p, (class, errors)) in t.probes[1..].iter_mut().zip(kinds) {
            p.kind = collector::AttachKind::Fentry {
                class,
                errors: errors.into_iter().map(str::to_string).collect(),
            };
        }
        t
    }

    /// The provider stage's QPs (`--provider-probes`): a `qp_errors` row for each entry made in
    /// this snapshot's window (class `provider`, the library's function, the job and peer of
    /// the entry), none for one an earlier window made (its row was written then).
    #[test]
    fn provider_entries_of_the_window_fill_qp_errors_once() {
        let mut p = data_plane_pipeline();
        p.ingest_with(&collector::encode(&rec(0, 1, 1_000, 0)), |_| None);
        let k = p.derived();
        let end = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let mut snap = p.snapshot(&Arc::new(k), end, true);
        let entry = |qpn: u32, snapshot: u64| collector::ProviderQpError {
            provider: "mlx5".into(),
            qpn,
            pid: 42,
            comm: "trainer".into(),
            status: "IBV_WC_REM_ACCESS_ERR",
            syndrome: 0x13,
            vendor_syndrome: 0x88,
            side: "requester",
            first_ts_ns: 20_000,
            snapshot,
            count: 9,
            cgroup: "/slurm/job_77".into(),
            job: [("SLURM_JOB_ID".to_string(), "77".to_string())].into(),
            peer: Some(collector::QpPeer {
                qpn: 0x31,
                gid: Some("::ffff:10.0.0.9".into()),
                gid_type: collector::GidType::RoceV2,
                qp_type: "RC".into(),
                since_rtr_ns: 1_000,
            }),
        };
        snap.providers = Some(collector::ProvidersOut {
            qps: vec![entry(0x30, snap.snapshot), entry(0x40, snap.snapshot + 7)],
            ..Default::default()
        });
        let b = replayed_batch(&snap, 4);
        let parts = parse_batch(&b, 4).expect("parse");
        let qp: Vec<serde_json::Value> = std::str::from_utf8(parts[6].0)
            .expect("utf8")
            .lines()
            .map(|l| serde_json::from_str(l).expect("row"))
            .collect();
        assert_eq!(qp.len(), 1, "{qp:?}");
        let r = &qp[0];
        let got: Vec<&serde_json::Value> = [
            "idx", "probe", "function", "module", "class", "status", "qpn", "pid", "comm",
            "job_id", "peer_qpn", "peer_gid", "ts_ns",
        ]
        .iter()
        .map(|k| &r[*k])
        .collect();
        assert_eq!(
            got,
            [
                &json!(1),
                &json!(u32::MAX),
                &json!("dump_cqe"),
                &json!("libmlx5"),
                &json!("provider"),
                &json!("IBV_WC_REM_ACCESS_ERR"),
                &json!(0x30),
                &json!(42),
                &json!("trainer"),
                &json!("77"),
                &json!(0x31),
                &json!("::ffff:10.0.0.9"),
                &json!(20_000)
            ]
        );
    }

    /// Data-plane records: their status as `errno_name` in `records` (code 1 is not EPERM),
    /// and a `qp_errors` row each, with the peer the collector's join gave the record; a v5
    /// batch (no `qp_errors`) reads whole.
    #[test]
    fn data_plane_records_name_their_status_and_fill_qp_errors() {
        let mut p = data_plane_pipeline();
        let dp = |probe: u32, err: i32, qpn: u64, port: u64, seq: u64| PgRecord {
            nargs: 2,
            args: [qpn, port, 0, 0],
            ..rec(probe, err, 10_000 + seq, seq)
        };
        let job: Arc<collector::ProcInfo> = Arc::new(collector::ProcInfo {
            cgroup: "/slurm/job_55".into(),
            job: [("SLURM_JOB_ID".to_string(), "55".to_string())].into(),
            exited: false,
        });
        for r in [
            rec(0, 1, 1_000, 0),
            // completion code 1: IB_WC_LOC_LEN_ERR, no peer known
            dp(1, 1, 0x11, 1, 1),
            // completion code 2: the retry exceeded, a peer kept at its RTR
            dp(1, 2, 0x12, 1, 2),
            // a port's error event: QP 0
            dp(2, 2, 0, 1, 3),
            // the peer class never records; one that did is no row
            dp(3, 1, 0x12, 1, 4),
        ] {
            p.ingest_with(&collector::encode(&r), |_| Some(job.clone()));
        }
        let mut k = p.derived();
        let peer = collector::QpPeer {
            qpn: 0x99,
            gid: Some("::ffff:10.0.0.2".into()),
            gid_type: collector::GidType::RoceV2,
            qp_type: "RC".into(),
            since_rtr_ns: 2_500_000_000,
        };
        k.qp = Some(collector::QpErrors {
            qps: vec![collector::QpError {
                probe: 1,
                function: "rxe_cq_post".into(),
                qpn: 0x12,
                pid: 7,
                status: "IB_WC_RETRY_EXC_ERR".into(),
                first_ts_ns: 10_002,
                count: 1,
                peer: Some(peer),
            }],
            firsts: 1,
            ..Default::default()
        });
        let end = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let snap = p.snapshot(&Arc::new(k), end, true);
        let b = replayed_batch(&snap, 3);
        let parts = parse_batch(&b, 3).expect("parse");
        let rows = |t: usize| -> Vec<serde_json::Value> {
            std::str::from_utf8(parts[t].0)
                .expect("utf8")
                .lines()
                .map(|l| serde_json::from_str(l).expect("row"))
                .collect()
        };
        let names: Vec<serde_json::Value> =
            rows(0).iter().map(|r| r["errno_name"].clone()).collect();
        assert_eq!(
            names,
            [
                "EPERM",
                "IB_WC_LOC_LEN_ERR",
                "IB_WC_RETRY_EXC_ERR",
                "IB_EVENT_PORT_ERR",
                "IB_QPS_RTR"
            ]
        );
        let qp = rows(6);
        assert_eq!(qp.len(), 3, "{qp:?}");
        let t = TABLES[6];
        for r in &qp {
            let mut got: Vec<&str> = r
                .as_object()
                .expect("object")
                .keys()
                .map(|k| k.as_str())
                .collect();
            let mut want: Vec<&str> = t.columns.iter().map(|c| c.0).collect();
            got.sort_unstable();
            want.sort_unstable();
            assert_eq!(got, want, "{r}");
        }
        let brief = |r: &serde_json::Value| {
            [
                "idx",
                "class",
                "status",
                "qpn",
                "port",
                "job_id",
                "peer_qpn",
                "peer_gid",
                "peer_gid_type",
                "qp_type",
                "since_rtr_ns",
            ]
            .map(|c| r[c].clone())
        };
        assert_eq!(
            brief(&qp[0]),
            [
                json!(1),
                json!("completion"),
                json!("IB_WC_LOC_LEN_ERR"),
                json!(0x11),
                json!(1),
                json!("55"),
                json!(0),
                json!(""),
                json!(""),
                json!(""),
                json!(0)
            ]
        );
        assert_eq!(
            brief(&qp[1]),
            [
                json!(2),
                json!("completion"),
                json!("IB_WC_RETRY_EXC_ERR"),
                json!(0x12),
                json!(1),
                json!("55"),
                json!(0x99),
                json!("::ffff:10.0.0.2"),
                json!("roce-v2"),
                json!("RC"),
                json!(2_500_000_000u64)
            ]
        );
        assert_eq!(
            (
                &qp[2]["class"],
                &qp[2]["status"],
                &qp[2]["qpn"],
                &qp[2]["port"]
            ),
            (
                &json!("async_event"),
                &json!("IB_EVENT_PORT_ERR"),
                &json!(0),
                &json!(1)
            )
        );
        // the previous version's frame (v5, no qp_errors): read whole, no rows for it
        let v5 = frame_v5(3, &std::array::from_fn(|i| parts[i].0.to_vec()));
        assert!(v5.starts_with(b"probegen-batch/v5 3 records=5:"));
        let back = parse_batch(&v5, 3).expect("v5");
        assert_eq!(back.map(|p| p.1), [5, 1, 4, 1, 0, 0, 0]);
        assert_eq!(parse_head(&v5).map(|h| h.rows), Ok([5, 1, 4, 1, 0, 0, 0]));
        for t in 0..6 {
            assert_eq!(back[t].0, parts[t].0, "{}", TABLES[t].name);
        }
        assert!(return_order_set_aside(&v5, 3).is_none(), "goes as it is");
        // a v5 header naming qp_errors is not a header
        let t = String::from_utf8(b.clone()).expect("utf8");
        let swapped = t.replacen("batch/v6", "batch/v5", 1).into_bytes();
        assert_eq!(parse_head(&swapped), Err(BadBatch::BadHeader));
    }

    /// A host's baseline: one handler, two shapes (the second with a histogram longer than
    /// the sink's, as a state file not ours could hold).
    fn test_baseline() -> collector::BaselineOut {
        let shape = |id: &str, count: u64, hist: Vec<u64>| collector::ShapeOut {
            shape: id.into(),
            functions: vec!["ib_uverbs_reg_mr".into(), "rxe_reg_user_mr".into()],
            count,
            share: count as f64 / 5.0,
            p50_ns: 1500,
            p90_ns: 2100,
            p99_ns: 2100,
            duration_log2: hist,
            exemplars: vec![],
        };
        let mut long = vec![0; collector::LOG2_BUCKETS + 2];
        long[collector::LOG2_BUCKETS - 1] = 1;
        long[collector::LOG2_BUCKETS + 1] = 2;
        collector::BaselineOut {
            mechanism: "fentry+fexit, task storage".into(),
            sample: 1,
            budget: 0,
            max_ns: 0,
            records: collector::TraceCounts::default(),
            handlers: vec![collector::HandlerOut {
                probe: 0,
                function: "ib_uverbs_reg_mr".into(),
                successes: 5,
                other: 0,
                noise: vec![],
                shapes: vec![
                    shape("aaaaaaaaaaaa", 4, [vec![0; 10], vec![3, 1]].concat()),
                    shape("bbbbbbbbbbbb", 1, long),
                ],
            }],
            expected: vec![],
            jobs: vec![],
            jobs_other: 0,
        }
    }

    #[test]
    fn v2_batches_of_the_previous_version_are_read_whole_or_refused() {
        let bodies = [
            b"{\"a\":1}\n{\"a\":2}\n".to_vec(),
            b"{}\n".to_vec(),
            Vec::new(),
            b"{}\n".to_vec(),
        ];
        let v2 = frame_v2(9, &bodies);
        assert!(v2.starts_with(b"probegen-batch/v2 9 records=2:"));
        let parts = parse_batch(&v2, 9).expect("v2");
        // every part whole, in its table's place; no baselines
        assert_eq!(parts.map(|p| p.1), [2, 1, 0, 1, 0, 0, 0]);
        assert_eq!(parts[0].0, &bodies[0][..]);
        assert_eq!(parts[3].0, b"{}\n");
        let head = parse_head(&v2).expect("head");
        assert_eq!(
            (head.rows, head.len),
            ([2, 1, 0, 1, 0, 0, 0], Some(v2.len() as u64))
        );
        // checked as a v4 batch is: cut, flipped, other seq
        assert!(matches!(
            parse_batch(&v2[..v2.len() - 1], 9),
            Err(BadBatch::Length { .. })
        ));
        let mut f = v2.clone();
        let last = f.len() - 2;
        f[last] ^= 1;
        assert_eq!(parse_batch(&f, 9), Err(BadBatch::Checksum));
        assert_eq!(parse_batch(&v2, 8), Err(BadBatch::OtherSeq(9)));
        // a v2 header naming five tables, or a v3 one naming four, is not a header
        let v3 = frame_v3(
            9,
            &[bodies.to_vec(), vec![Vec::new()]]
                .concat()
                .try_into()
                .expect("5"),
        );
        let swap = |b: &[u8], from: &str, to: &str| {
            let t = String::from_utf8(b.to_vec()).expect("utf8");
            t.replacen(from, to, 1).into_bytes()
        };
        assert_eq!(
            parse_head(&swap(&v3, "batch/v3", "batch/v2")),
            Err(BadBatch::BadHeader)
        );
        assert_eq!(
            parse_head(&swap(&v2, "batch/v2", "batch/v3")),
            Err(BadBatch::BadHeader)
        );
    }

    #[test]
    fn v1_batches_of_earlier_versions_are_read_whole_or_refused() {
        let mut v1 = b"probegen-batch/v1 7\n".to_vec();
        for (t, body) in [
            ("records", "{}\n{}\n"),
            ("chains", ""),
            ("counters", "{}\n"),
            ("snapshots", "{}\n"),
        ] {
            v1.extend_from_slice(format!("{t} {}\n{body}", body.len()).as_bytes());
        }
        let parts = parse_batch(&v1, 7).expect("v1");
        assert_eq!(parts.map(|p| p.1), [2, 0, 1, 1, 0, 0, 0]);
        assert_eq!(parse_head(&v1).map(|h| (h.seq, h.len)), Ok((7, None)));
        // cut at the part boundary before `snapshots`: refused, not sent in part
        let cut = v1.len() - "snapshots 3\n{}\n".len();
        assert_eq!(parse_batch(&v1[..cut], 7), Err(BadBatch::Rows("snapshots")));
        // cut mid-record
        assert_eq!(
            parse_batch(&v1[..v1.len() - 2], 7),
            Err(BadBatch::Rows("snapshots"))
        );
    }
}
