//! The snapshot and the values it serialises (records, counters, the invariant), the status
//! a sink reports back and the run's totals for the exposition.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::ser::{SerializeMap, SerializeSeq, SerializeStruct};
use serde::{Serialize, Serializer};

use crate::baseline::BaselineOut;
use crate::chains::ChainsOut;
use crate::decode::comm_str;
use crate::errno::errno_label;
use crate::job::ProcInfo;
use crate::kernel_state::{AttachStatus, KernelTotals};
use crate::owner::Owner;
use crate::ports::{PortCounterKey, PortCounterOut};
use crate::probes::ProbeTable;
use crate::record::PgRecord;
use crate::shared::SharedPart;

/// A record kept for the snapshot.
#[derive(Debug, Clone)]
pub struct Rec {
    pub raw: PgRecord,
    pub proc_info: Option<Arc<ProcInfo>>,
    /// A data-plane record's QP peer, from its QP's `qp_errors` entry (joined when the
    /// window's snapshot is made).
    pub peer: Option<crate::QpPeer>,
}

/// Each data-plane record with its QP's peer, from the QP's `qp_errors` entry (same probe,
/// QP number and owner pid): the record was made with the entry, so the entry holds the peer
/// the QP had at that error unless the table evicted it since.
pub fn with_peers(mut recs: Vec<Rec>, qp: Option<&crate::QpErrors>) -> Vec<Rec> {
    let Some(qp) = qp.filter(|q| q.qps.iter().any(|e| e.peer.is_some())) else {
        return recs;
    };
    for r in &mut recs {
        let (probe, pid) = (r.raw.probe_id, r.raw.pid);
        let Some(&qpn) = r.raw.args.first().filter(|_| r.raw.nargs >= 1) else {
            continue;
        };
        r.peer = qp
            .qps
            .binary_search_by_key(&(probe, qpn as u32, pid), |e| (e.probe, e.qpn, e.pid))
            .ok()
            .and_then(|i| qp.qps[i].peer.clone());
    }
    recs
}

/// One per-host snapshot (one JSON object, one JSONL line).
#[derive(Debug, Serialize)]
pub struct Snapshot {
    pub host: String,
    pub kernel: String,
    pub manifest_hash: String,
    /// 0, 1, 2, ... within this run
    pub snapshot: u64,
    /// the last snapshot of the run (written on SIGINT/SIGTERM, --duration or end of replay)
    #[serde(rename = "final")]
    pub is_final: bool,
    pub window: Window,
    /// What the agent itself costs (live runs; in the line's head, which is written every
    /// window, so an idle window's cached rest stays valid)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentCost>,
    /// With `collect --bundle`: the bundle's set, how it matched this kernel and its probes
    /// attached per layer (in the line's head, written every window)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub set: Option<crate::running_set::SetOut>,
    pub records: RecordsOut,
    /// failure chains completed in this window (their records may be in earlier windows)
    pub chains: ChainsOut,
    pub counters: SharedPart<Vec<CounterOut>>,
    /// the RDMA ports' error counters that moved or reset in this window (none: left out)
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub port_counters: Vec<PortCounterOut>,
    pub drops: Drops,
    pub seq_gaps: u64,
    pub attached: SharedPart<Vec<AttachStatus>>,
    pub errors: Errors,
    pub invariant: Invariant,
    /// The data plane's per-QP table: each QP's first error (a record) and the count of the
    /// rest; absent while no QP has had one
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qp_errors: Option<crate::QpErrors>,
    /// With `collect --provider-probes`: the error completions only a user-space provider
    /// library saw (per QP the first and a count), the libraries and the stage's accounting
    #[serde(skip_serializing_if = "Option::is_none")]
    pub providers: Option<crate::ProvidersOut>,
    /// With `collect --baseline`: the success shapes per handler, the expected failures and
    /// the trace records' counts
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<BaselineOut>,
    /// The state of the sinks that have one (a spool) after this snapshot was queued, each
    /// in the line under its sink's name
    #[serde(flatten, serialize_with = "sinks_by_name")]
    pub sinks: Vec<SinkStatus>,
    /// Nothing happened in this window: no record, no chain, no counter moved, no decode
    /// error, and it is not the final snapshot (its line need not be synced on its own)
    #[serde(skip)]
    pub idle: bool,
    /// the run's cumulative counters (for the exposition; not in the line)
    #[serde(skip)]
    pub totals: Totals,
}

impl Snapshot {
    /// The snapshot as one JSON line (with the trailing newline).
    pub fn to_line(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(
            8192 + self.counters.len() * 160 + self.records.len() * 300 + self.chains.len() * 400,
        );
        if let Err(e) = serde_json::to_writer(&mut v, self) {
            v = format!("{{\"error\":\"snapshot not serialisable: {e}\"}}").into_bytes();
        }
        v.push(b'\n');
        v
    }
}

/// The agent's own cost so far: its CPU time (all threads) and resident memory, from the
/// kernel's accounting of this process; and, where `kernel.bpf_stats_enabled` is on, its
/// programs' run time and runs (`bpf_prog_info`, the programs of detached modules included).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AgentCost {
    pub cpu_ns: u64,
    pub rss_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bpf_run_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bpf_runs: Option<u64>,
}

#[derive(Debug, Serialize)]
pub struct Window {
    pub start: String,
    pub end: String,
    pub start_unix_ns: u64,
    pub end_unix_ns: u64,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct CounterOut {
    pub probe: u32,
    pub function: String,
    pub module: String,
    pub calls: u64,
    pub failures: u64,
    pub errno: BTreeMap<String, u64>,
    /// records of this probe kept in this window's `records`
    pub received: u64,
    /// records of this probe read from the ring but not kept (batch cap)
    pub dropped_userspace: u64,
    /// runs of this probe's exit program the kernel skipped (see `Drops::missed`); absent
    /// when none
    #[serde(skip_serializing_if = "is_zero")]
    pub missed: u64,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Drops {
    pub kernel: u64,
    pub userspace: u64,
    /// Runs of the probes' exit programs the kernel skipped this window (`recursion_misses`:
    /// the program was already running on that CPU, a task preempted inside it). Each is a
    /// return never seen, so a failure neither counted nor recorded: outside the invariant,
    /// which compares what was counted, and stated here so that the loss is not silent.
    pub missed: u64,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Errors {
    /// samples of the wrong size, unknown probe id or CPU, this window
    pub decode: u64,
    /// sink write errors so far
    pub sink: u64,
}

/// The records of a window, serialised with the probe table (no copies of names per record).
#[derive(Debug)]
pub struct RecordsOut {
    pub recs: Vec<Rec>,
    pub table: Arc<ProbeTable>,
}

impl RecordsOut {
    pub fn len(&self) -> usize {
        self.recs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.recs.is_empty()
    }
}

struct Hex(u64);

impl Serialize for Hex {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // `0x` + lowercase hex without leading zeros, formatted without the fmt machinery
        const D: &[u8; 16] = b"0123456789abcdef";
        let mut buf = [0u8; 18];
        let mut i = buf.len();
        let mut v = self.0;
        loop {
            i -= 1;
            buf[i] = D[(v & 15) as usize];
            v >>= 4;
            if v == 0 {
                break;
            }
        }
        i -= 2;
        buf[i] = b'0';
        buf[i + 1] = b'x';
        s.serialize_str(std::str::from_utf8(&buf[i..]).unwrap_or("0x?"))
    }
}

/// Recorded arguments: `{"addr": "0x...", "size": "0x..."}` when the manifest names them,
/// else a list.
struct Args<'a>(&'a [u64], &'a [String]);

impl Serialize for Args<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if !self.0.is_empty() && self.1.len() == self.0.len() {
            let mut map = s.serialize_map(Some(self.0.len()))?;
            for (name, &a) in self.1.iter().zip(self.0) {
                map.serialize_entry(name, &Hex(a))?;
            }
            return map.end();
        }
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for &a in self.0 {
            seq.serialize_element(&Hex(a))?;
        }
        seq.end()
    }
}

static NO_JOB: BTreeMap<String, String> = BTreeMap::new();

struct RecOut<'a>(&'a Rec, &'a ProbeTable);

impl Serialize for RecOut<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let r = &self.0.raw;
        let p = self.1.get(r.probe_id);
        let err = r.err as u32;
        let info = self.0.proc_info.as_deref();
        let nargs = (r.nargs as usize).min(r.args.len());
        let mut st = s.serialize_struct("Record", 15)?;
        st.serialize_field("probe", &r.probe_id)?;
        st.serialize_field("function", p.map_or("", |p| p.function.as_str()))?;
        st.serialize_field("module", p.map_or("", |p| p.module.as_str()))?;
        st.serialize_field("errno", &err)?;
        match p.and_then(|p| p.data_plane_status(r.err).map(|s| (p, s))) {
            // a data-plane record: the code names an event or a completion status
            Some((p, status)) => {
                st.serialize_field("errno_name", &status)?;
                if let crate::probes::AttachKind::Fentry { class, .. } = &p.kind {
                    st.serialize_field("data_plane", class.as_str())?;
                }
                // who gets the ticket for a QP's death: from its status (a flush or the
                // error state follows the QP's first error, which names it)
                if let Some((owner, why)) = crate::qp_owner(&status) {
                    st.serialize_field("owner", &owner)?;
                    st.serialize_field("owner_reason", why)?;
                }
            }
            None => st.serialize_field("errno_name", &errno_label(err))?,
        }
        st.serialize_field("pid", &r.pid)?;
        st.serialize_field("tid", &r.tid)?;
        st.serialize_field("comm", &comm_str(&r.comm))?;
        st.serialize_field("cgroup", info.map_or("", |i| i.cgroup.as_str()))?;
        st.serialize_field("cgroup_id", &r.cgroup_id)?;
        st.serialize_field("job", info.map_or(&NO_JOB, |i| &i.job))?;
        let names = p.map_or(&[][..], |p| p.arg_names.as_slice());
        st.serialize_field("args", &Args(&r.args[..nargs], names))?;
        if let Some(peer) = &self.0.peer {
            st.serialize_field("peer", peer)?;
        }
        st.serialize_field("ts_ns", &r.ts_ns)?;
        st.serialize_field("cpu", &r.cpu)?;
        st.serialize_field("seq", &r.seq)?;
        st.end()
    }
}

impl Serialize for RecordsOut {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.recs.len()))?;
        for r in &self.recs {
            seq.serialize_element(&RecOut(r, &self.table))?;
        }
        seq.end()
    }
}

/// The accounting invariant over the run so far (cumulative).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Invariant {
    /// received + dropped == failures (see the module doc for the per-probe form)
    pub ok: bool,
    /// The counters and the records were read to agree exactly: the final snapshot
    /// (programs detached, ring drained), or a live window read behind its fence with no
    /// failure half counted (`in_flight` 0). A replay without counters is not exact.
    pub exact: bool,
    /// Failing programs half counted while a live window read the counters (its fence did
    /// not close in time): `ok` then allows that many on either side, claiming no loss and
    /// hiding none beyond them.
    #[serde(skip_serializing_if = "is_zero")]
    pub in_flight: u64,
    pub failures: u64,
    pub received: u64,
    pub dropped_kernel: u64,
    pub dropped_userspace: u64,
    /// failures - received - dropped_userspace, summed (must equal dropped_kernel)
    pub unaccounted: i64,
    /// probes whose records exceed their failures, or that miss records while the kernel
    /// dropped fewer than missing
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mismatches: Vec<InvariantProbe>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct InvariantProbe {
    pub probe: u32,
    pub function: String,
    pub module: String,
    pub failures: u64,
    pub received: u64,
    pub dropped_userspace: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// A sink's state as the snapshot's line and the exposition show it, filled by the sink
/// ([`crate::Sink::status`]): the counters every sink that delivers somewhere has, and what
/// only this sink has (a spool's size) as named metrics. The line carries it as an object
/// under the sink's name (`"clickhouse":{"sent_batches":..,..}`); the exposition as
/// `probegen_sink_<metric>{sink="NAME"}`. The collector names no sink: a new one fills this
/// and appears in both.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SinkStatus {
    /// the sink's name ([`crate::Sink::name`]): its key in the line, its `sink` label
    pub sink: String,
    /// batches (snapshots) the destination took, this run
    pub sent_batches: u64,
    /// records in those batches
    pub sent_records: u64,
    /// failed delivery attempts, this run
    pub send_errors: u64,
    /// records the destination will never hold (dropped, set aside, never queued), this run,
    /// as far as they could be counted
    pub lost_records: u64,
    /// what only this sink has, in the order it shows them
    pub metrics: Vec<SinkMetric>,
}

/// One value only some sinks have (a spool's batches, bytes, limit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkMetric {
    /// snake_case: the key in the line; `probegen_sink_<name>` in the exposition, with
    /// `_total` for a counter
    pub name: &'static str,
    pub kind: MetricKind,
    /// the exposition's `# HELP`
    pub help: &'static str,
    pub value: u64,
}

/// How a [`SinkMetric`] moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    /// only grows during a run
    Counter,
    /// goes up and down
    Gauge,
    /// a configured value (a limit): shown by the exposition, not carried in the line, which
    /// keeps what changes
    Setting,
}

impl SinkStatus {
    /// The sink-specific metric `name`'s value.
    pub fn metric(&self, name: &str) -> Option<u64> {
        self.metrics
            .iter()
            .find(|m| m.name == name)
            .map(|m| m.value)
    }
}

/// Keys of the snapshot's own fields: a sink of that name would shadow one in the line, so
/// the run refuses it.
pub const SNAPSHOT_KEYS: &[&str] = &[
    "host",
    "kernel",
    "manifest_hash",
    "snapshot",
    "final",
    "window",
    "agent",
    "set",
    "records",
    "chains",
    "counters",
    "port_counters",
    "drops",
    "seq_gaps",
    "attached",
    "errors",
    "invariant",
    "qp_errors",
    "providers",
    "baseline",
];

impl Serialize for SinkStatus {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("sent_batches", &self.sent_batches)?;
        map.serialize_entry("sent_records", &self.sent_records)?;
        map.serialize_entry("send_errors", &self.send_errors)?;
        map.serialize_entry("lost_records", &self.lost_records)?;
        for m in &self.metrics {
            if m.kind != MetricKind::Setting {
                map.serialize_entry(m.name, &m.value)?;
            }
        }
        map.end()
    }
}

/// The sinks' statuses as members of the snapshot's object, each under its sink's name.
fn sinks_by_name<S: Serializer>(sinks: &[SinkStatus], s: S) -> Result<S::Ok, S::Error> {
    let mut map = s.serialize_map(Some(sinks.len()))?;
    for st in sinks {
        map.serialize_entry(&st.sink, st)?;
    }
    map.end()
}

/// The run's cumulative counters as of a snapshot (not serialised: the exposition shows them).
/// The run loop fills `sink_errors`, `snapshots` and `sinks` before the exposition reads them.
#[derive(Debug, Clone, Default)]
pub struct Totals {
    pub kernel: Arc<KernelTotals>,
    /// records received so far, per probe id
    pub received: Vec<u64>,
    /// records dropped in userspace so far, per probe id
    pub dropped_userspace: Vec<u64>,
    /// chains reported so far, per (owner, origin probe id, origin errno, expected by the
    /// baseline)
    pub chains: Arc<BTreeMap<(Owner, u32, u32, bool), u64>>,
    pub sink_errors: u64,
    /// snapshots written so far, this one included
    pub snapshots: u64,
    /// the sinks' statuses after this snapshot was written everywhere but the expositions
    pub sinks: Vec<SinkStatus>,
    /// every RDMA port error counter's value as last read (live runs)
    pub ports: Arc<Vec<(PortCounterKey, u64)>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_args() {
        for v in [0u64, 1, 0xabc, u64::MAX, 0x7fcd_42c1_e000] {
            assert_eq!(
                serde_json::to_string(&Hex(v)).ok(),
                Some(format!("\"{v:#x}\""))
            );
        }
    }
}
