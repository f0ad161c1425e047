//! The pure pipeline: ring-buffer samples in, one snapshot per window out.
//!
//! * [`Pipeline::ingest`] decodes a sample, tracks the per-CPU sequence numbers, and keeps the
//!   record in a batch bounded by `batch_cap`; past the cap the record is only counted
//!   (`drops.userspace`, per probe). [`Pipeline::ingest_with`] keeps it with its process's
//!   cgroup and job variables, which the source resolves (live: `/proc`): the pipeline reads
//!   no file.
//! * [`Pipeline::snapshot`] takes the kernel's cumulative counters ([`KernelTotals`], per-CPU
//!   values already summed), turns them into per-window deltas, and assembles the [`Snapshot`].
//! * [`check_invariant`]: for every probe, records received + dropped (kernel + userspace) ==
//!   failures counted by the kernel. The kernel's `drops` counter is per CPU, not per probe, so
//!   per probe the check is `received + dropped_userspace <= failures`, and the shortfalls summed
//!   over all probes must equal the kernel drops exactly (with no kernel drops this is the exact
//!   per-probe equality).
//! * The snapshot's `chains`: the kept records grouped per thread and syscall, ordered by call
//!   depth ([`crate::chains`]); a chain that may still grow is reported in a later snapshot.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use wire::{
    decode, errno_label, rfc3339, unix_ns, AttachStatus, CounterOut, Drops, Errors, Invariant,
    InvariantProbe, KernelTotals, Owner, PgRecord, ProbeTable, ProcInfo, Rec, RecordsOut,
    SharedPart, Snapshot, Totals, Window,
};

use crate::chains::{ChainBuilder, ChainClock, ChainsOut};

/// A monotonic counter's growth; a counter that went backwards (object reloaded) restarts.
#[inline]
pub(crate) fn counter_delta(prev: u64, cur: u64) -> u64 {
    if cur >= prev {
        cur - prev
    } else {
        cur
    }
}

/// Per-CPU sequence tracking. Records of one CPU may arrive slightly out of order (fexit
/// programs run with migration, not preemption, disabled), so gaps are counted as
/// `(highest - lowest + 1) - seen`, not by comparing neighbours.
#[derive(Debug, Clone, Default)]
struct SeqTracker {
    cpus: Vec<CpuSeq>,
    /// The kernel's numbering starts at 0 (live: the object was loaded by us).
    from_zero: bool,
}

#[derive(Debug, Clone, Copy, Default)]
struct CpuSeq {
    lo: u64,
    hi: u64,
    seen: u64,
}

/// CPUs beyond this are not tracked (and counted as decode errors).
const MAX_CPUS: usize = 1 << 14;

impl SeqTracker {
    #[inline]
    fn see(&mut self, cpu: u32, seq: u64) -> bool {
        let cpu = cpu as usize;
        if cpu >= MAX_CPUS {
            return false;
        }
        if cpu >= self.cpus.len() {
            self.cpus.resize(cpu + 1, CpuSeq::default());
        }
        let c = &mut self.cpus[cpu];
        if c.seen == 0 {
            c.lo = if self.from_zero { 0 } else { seq };
            c.hi = seq;
        } else {
            c.lo = c.lo.min(seq);
            c.hi = c.hi.max(seq);
        }
        c.seen += 1;
        true
    }

    fn gaps(&self) -> u64 {
        self.cpus
            .iter()
            .filter(|c| c.seen > 0)
            .map(|c| (c.hi - c.lo + 1).saturating_sub(c.seen))
            .sum()
    }
}

#[derive(Debug, Clone)]
pub struct PipelineConfig {
    /// Records kept per window; past it they are counted as userspace drops.
    pub batch_cap: usize,
    pub host: String,
    pub kernel: String,
    /// Sequence numbers start at 0 (live); replay starts from the first one seen.
    pub seq_from_zero: bool,
    /// Count calls/failures/errnos from the records themselves (replay without counters).
    pub derive_counters: bool,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig {
            batch_cap: 10_000,
            host: String::new(),
            kernel: String::new(),
            seq_from_zero: true,
            derive_counters: false,
        }
    }
}

pub struct Pipeline {
    table: Arc<ProbeTable>,
    cfg: PipelineConfig,
    batch: Vec<Rec>,
    chains: ChainBuilder,
    /// per probe id: this window / cumulative
    win_received: Vec<u64>,
    win_dropped: Vec<u64>,
    tot_received: Vec<u64>,
    tot_dropped: Vec<u64>,
    win_decode_errors: u64,
    tot_decode_errors: u64,
    seq: SeqTracker,
    seq_gaps_prev: u64,
    /// the kernel's counters at the last window (an idle source hands the same ones on)
    prev: Arc<KernelTotals>,
    /// Counters derived from the records (replay without counters): failures per probe id and
    /// per (probe id, errno). Vectors and a hash map: this is on the per-record path.
    derived_failures: Vec<u64>,
    derived_errnos: std::collections::HashMap<(u32, u32), u64>,
    window_start: SystemTime,
    attached: SharedPart<Vec<AttachStatus>>,
    /// the counters of a quiet window (every delta zero), built at the first one
    quiet_counters: Option<SharedPart<Vec<CounterOut>>>,
    /// the last snapshot's invariant (a quiet window's is the same)
    last_invariant: Option<(bool, Invariant)>,
    snapshots: u64,
    /// chains reported so far (occurrences), per (owner, origin probe id, origin errno)
    chain_totals: Arc<BTreeMap<(Owner, u32, u32, bool), u64>>,
    /// `--baseline`: success shapes, bifurcations, expected failures
    baseline: Option<Box<dyn baseline::TraceBaseline>>,
    /// the bundle's set this run was chosen from (each snapshot's `set`)
    set: Option<wire::RunningSet>,
}

impl Pipeline {
    pub fn new(table: Arc<ProbeTable>, cfg: PipelineConfig) -> Self {
        let n = table.id_limit();
        let attached: Vec<AttachStatus> = table
            .probes
            .iter()
            .map(|p| AttachStatus {
                probe: p.id,
                function: p.function.clone(),
                module: p.module.clone(),
                attached: false,
                reason: Some("not loaded".into()),
                mechanism: None,
                symbols: Vec::new(),
            })
            .collect();
        Pipeline {
            seq: SeqTracker {
                cpus: Vec::new(),
                from_zero: cfg.seq_from_zero,
            },
            batch: Vec::new(),
            chains: ChainBuilder::default(),
            table,
            cfg,
            win_received: vec![0; n],
            win_dropped: vec![0; n],
            tot_received: vec![0; n],
            tot_dropped: vec![0; n],
            win_decode_errors: 0,
            tot_decode_errors: 0,
            seq_gaps_prev: 0,
            prev: Arc::default(),
            derived_failures: Vec::new(),
            derived_errnos: std::collections::HashMap::new(),
            window_start: SystemTime::now(),
            attached: SharedPart::new(attached),
            quiet_counters: None,
            last_invariant: None,
            snapshots: 0,
            chain_totals: Arc::default(),
            baseline: None,
            set: None,
        }
    }

    /// Turns the baseline on: traces come in by [`Pipeline::ingest_trace`], each chain gets
    /// its note and each snapshot the baseline.
    pub fn enable_baseline(&mut self, b: Box<dyn baseline::TraceBaseline>) {
        self.baseline = Some(b);
    }

    /// Writes the baseline's state file when due: the line to print when it failed.
    pub(crate) fn save_baseline(&mut self, is_final: bool) -> Option<crate::warning::Warning> {
        let table = self.table.clone();
        let b = self.baseline.as_mut()?;
        b.save(&table, is_final)
            .map(crate::warning::Warning::Baseline)
    }

    /// One record of the `baseline` ring (ignored with the baseline off).
    pub(crate) fn ingest_trace(&mut self, sample: &[u8]) {
        if let Some(b) = &mut self.baseline {
            b.ingest(&self.table, sample);
        }
    }

    /// The kernel's trace counters, read behind their fence.
    pub(crate) fn set_trace_counts(&mut self, k: wire::TraceCounts) {
        if let Some(b) = &mut self.baseline {
            b.set_kernel_counts(k);
        }
    }

    /// Chains reported so far (occurrences), per (owner, origin probe id, origin errno,
    /// expected by the baseline).
    pub fn chain_totals(&self) -> &BTreeMap<(Owner, u32, u32, bool), u64> {
        &self.chain_totals
    }

    pub fn table(&self) -> &Arc<ProbeTable> {
        &self.table
    }

    pub fn set_running_set(&mut self, set: Option<wire::RunningSet>) {
        self.set = set;
    }

    pub fn set_attached(&mut self, attached: Vec<AttachStatus>) {
        self.attached = SharedPart::new(attached);
    }

    pub fn attached(&self) -> &[AttachStatus] {
        &self.attached
    }

    /// The attach status as the snapshots share it.
    pub fn attached_shared(&self) -> &SharedPart<Vec<AttachStatus>> {
        &self.attached
    }

    /// Host and kernel the snapshots name (replay: those of the recording).
    pub fn set_origin(&mut self, host: &str, kernel: &str) {
        if !host.is_empty() {
            self.cfg.host = host.to_string();
        }
        if !kernel.is_empty() {
            self.cfg.kernel = kernel.to_string();
        }
    }

    /// How failure chains are delimited: the bound between two records of one chain, and the
    /// clock that says when an open chain can no longer grow (live: [`ChainClock::Monotonic`]).
    pub fn set_chain_rule(&mut self, gap_ns: u64, clock: ChainClock) {
        self.chains.gap_ns = gap_ns;
        self.chains.clock = clock;
    }

    /// Restarts the window clock (after loading, before the first drain).
    pub fn start_window(&mut self, t: SystemTime) {
        self.window_start = t;
    }

    /// Counters derived from the records (with `derive_counters`).
    /// Every record is a failure of a call, so calls == failures here.
    pub fn derived(&self) -> KernelTotals {
        let per_probe: BTreeMap<u32, u64> = self
            .derived_failures
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(id, &n)| (id as u32, n))
            .collect();
        KernelTotals {
            calls: per_probe.clone(),
            failures: per_probe,
            errnos: self.derived_errnos.iter().map(|(&k, &v)| (k, v)).collect(),
            ..KernelTotals::default()
        }
    }

    /// Records received so far, per probe id.
    pub fn received_totals(&self) -> &[u64] {
        &self.tot_received
    }

    /// Records dropped in userspace so far, per probe id.
    pub fn dropped_totals(&self) -> &[u64] {
        &self.tot_dropped
    }

    pub fn decode_errors(&self) -> u64 {
        self.tot_decode_errors
    }

    /// Records currently held.
    pub fn batch_len(&self) -> usize {
        self.batch.len()
    }

    /// One ring-buffer sample, without its process's cgroup and job. Never fails: bad
    /// samples are counted.
    #[inline]
    pub fn ingest(&mut self, bytes: &[u8]) {
        self.ingest_with(bytes, |_| None);
    }

    /// One ring-buffer sample; `resolve` gives the process's cgroup and job of a record that
    /// is kept (the source's: live, this host's `/proc`; a replay, the `--proc-root` it was
    /// given). The pipeline reads no file. Never fails: bad samples are counted.
    #[inline]
    pub fn ingest_with(
        &mut self,
        bytes: &[u8],
        resolve: impl FnOnce(&PgRecord) -> Option<Arc<ProcInfo>>,
    ) {
        let rec = match decode(bytes) {
            Ok(r) => r,
            Err(_) => {
                self.win_decode_errors += 1;
                self.tot_decode_errors += 1;
                return;
            }
        };
        let id = rec.probe_id as usize;
        if self.table.get(rec.probe_id).is_none() || !self.seq.see(rec.cpu, rec.seq) {
            self.win_decode_errors += 1;
            self.tot_decode_errors += 1;
            return;
        }
        if self.cfg.derive_counters {
            if self.derived_failures.len() <= id {
                self.derived_failures.resize(id + 1, 0);
            }
            self.derived_failures[id] += 1;
            *self
                .derived_errnos
                .entry((rec.probe_id, rec.err as u32))
                .or_default() += 1;
        }
        if self.batch.len() < self.cfg.batch_cap {
            if self.batch.capacity() == 0 {
                self.batch.reserve(self.cfg.batch_cap.min(1 << 16));
            }
            let proc_info = resolve(&rec);
            self.batch.push(Rec {
                raw: rec,
                proc_info,
                peer: None,
            });
            self.win_received[id] += 1;
            self.tot_received[id] += 1;
        } else {
            self.win_dropped[id] += 1;
            self.tot_dropped[id] += 1;
        }
    }

    /// Whether this window changed nothing the counters or the invariant are made of: the
    /// kernel's counters are the last window's (the very same, or equal) and no record was
    /// read.
    fn quiet(&self, k: &Arc<KernelTotals>) -> bool {
        self.win_received.iter().all(|&n| n == 0)
            && self.win_dropped.iter().all(|&n| n == 0)
            && (Arc::ptr_eq(k, &self.prev) || **k == *self.prev)
    }

    /// This window's counters per probe: the growth of `k` since the last window. A quiet
    /// window's are all zero: one shared list for all of them.
    fn window_counters(&mut self, k: &KernelTotals, quiet: bool) -> SharedPart<Vec<CounterOut>> {
        if !quiet {
            return SharedPart::new(self.counter_deltas(k));
        }
        match &self.quiet_counters {
            Some(c) => c.clone(),
            None => {
                let c = SharedPart::new(self.counter_deltas(k));
                self.quiet_counters = Some(c.clone());
                c
            }
        }
    }

    /// The growth of `k` since the last window, per probe.
    fn counter_deltas(&self, k: &KernelTotals) -> Vec<CounterOut> {
        let mut counters = Vec::with_capacity(self.table.probes.len());
        for p in &self.table.probes {
            let get = |m: &BTreeMap<u32, u64>| m.get(&p.id).copied().unwrap_or(0);
            let mut errno = BTreeMap::new();
            for (&(id, err), &v) in k.errnos.range((p.id, 0)..=(p.id, u32::MAX)) {
                let prev = self.prev.errnos.get(&(id, err)).copied().unwrap_or(0);
                let d = counter_delta(prev, v);
                if d > 0 {
                    *errno.entry(errno_label(err).into_owned()).or_insert(0) += d;
                }
            }
            let i = p.id as usize;
            counters.push(CounterOut {
                probe: p.id,
                function: p.function.clone(),
                module: p.module.clone(),
                calls: counter_delta(get(&self.prev.calls), get(&k.calls)),
                failures: counter_delta(get(&self.prev.failures), get(&k.failures)),
                errno,
                received: self.win_received[i],
                dropped_userspace: self.win_dropped[i],
                missed: counter_delta(get(&self.prev.missed), get(&k.missed)),
            });
        }
        counters
    }

    /// The chains this window completes (all of them when `is_final`), counted per owner.
    fn take_chains(&mut self, is_final: bool) -> ChainsOut {
        for r in &self.batch {
            // a data-plane record is a QP's death, not a failed call: no chain of calls
            if self
                .table
                .get(r.raw.probe_id)
                .is_some_and(|p| p.data_plane_status(0).is_some())
            {
                continue;
            }
            self.chains.push(&r.raw);
        }
        let mut chains = ChainsOut::new(
            self.chains.take(&self.table.relation, is_final),
            self.table.clone(),
            wire::owner_of,
        );
        if chains.is_empty() {
            return chains;
        }
        if let Some(b) = &mut self.baseline {
            let notes = chains.iter().map(|c| b.annotate(&c)).collect();
            chains.set_notes(notes);
        }
        // copied only when a snapshot still holds the last totals (an idle run copies nothing)
        let totals = Arc::make_mut(&mut self.chain_totals);
        for c in chains.iter() {
            if let Some(o) = c.origin() {
                let expected = c.note.is_some_and(|n| n.expected);
                *totals
                    .entry((c.owner, o.probe, o.err, expected))
                    .or_default() += u64::from(c.count);
            }
        }
        chains
    }

    /// Closes the window at `end` with the kernel's cumulative counters `k`.
    pub fn snapshot(&mut self, k: &Arc<KernelTotals>, end: SystemTime, is_final: bool) -> Snapshot {
        let table = self.table.clone();
        let quiet = self.quiet(k);
        let counters = self.window_counters(k, quiet);
        let chains = self.take_chains(is_final);
        let gaps = self.seq.gaps();
        let invariant = match self.last_invariant.take() {
            Some((was_final, inv)) if quiet && was_final == is_final => inv,
            _ => check_invariant(&table, k, &self.tot_received, &self.tot_dropped, is_final),
        };
        self.last_invariant = Some((is_final, invariant.clone()));
        let snap = Snapshot {
            host: self.cfg.host.clone(),
            kernel: self.cfg.kernel.clone(),
            manifest_hash: table.manifest_hash.clone(),
            snapshot: self.snapshots,
            is_final,
            window: Window {
                start: rfc3339(self.window_start),
                end: rfc3339(end),
                start_unix_ns: unix_ns(self.window_start),
                end_unix_ns: unix_ns(end),
            },
            records: RecordsOut {
                // the next window's batch is allocated by its first record: an idle window
                // allocates nothing
                recs: wire::with_peers(std::mem::take(&mut self.batch), k.qp.as_ref()),
                table: table.clone(),
            },
            counters,
            // the run's port stage fills them in (live runs)
            port_counters: Vec::new(),
            drops: Drops {
                kernel: counter_delta(self.prev.drops, k.drops),
                userspace: self.win_dropped.iter().sum(),
                missed: counter_delta(self.prev.missed.values().sum(), k.missed.values().sum()),
            },
            seq_gaps: gaps.saturating_sub(self.seq_gaps_prev),
            attached: self.attached.clone(),
            errors: Errors {
                decode: self.win_decode_errors,
                // the run loop counts sink errors and fills this in
                sink: 0,
            },
            baseline: self.baseline.as_ref().map(|b| b.render(&table)),
            sinks: Vec::new(),
            agent: None,
            set: self
                .set
                .as_ref()
                .map(|r| wire::SetOut::of(r, &table, &self.attached)),
            idle: quiet
                && !is_final
                && chains.is_empty()
                && self.win_decode_errors == 0
                && gaps == self.seq_gaps_prev
                && invariant.ok,
            invariant,
            qp_errors: k.qp.clone(),
            // the run's provider stage fills it in (`--provider-probes`)
            providers: None,
            chains,
            totals: Totals {
                kernel: k.clone(),
                received: self.tot_received.clone(),
                dropped_userspace: self.tot_dropped.clone(),
                chains: self.chain_totals.clone(),
                ..Totals::default()
            },
        };
        self.seq_gaps_prev = gaps;
        self.prev = k.clone();
        self.win_received.iter_mut().for_each(|v| *v = 0);
        self.win_dropped.iter_mut().for_each(|v| *v = 0);
        self.win_decode_errors = 0;
        self.window_start = end;
        self.snapshots += 1;
        snap
    }
}

fn slack_of(k: &KernelTotals) -> i64 {
    i64::try_from(k.in_flight).unwrap_or(i64::MAX)
}

/// Checks received + dropped (kernel + userspace) == failures for every probe of `table`,
/// given cumulative kernel totals and cumulative per-probe-id received / userspace-dropped.
pub(crate) fn check_invariant(
    table: &ProbeTable,
    k: &KernelTotals,
    received: &[u64],
    dropped_userspace: &[u64],
    exact: bool,
) -> Invariant {
    let mut inv = Invariant {
        ok: true,
        // the final read (programs detached, ring drained), or a fenced read that found no
        // failure half counted
        exact: exact || (k.fenced && k.in_flight == 0),
        in_flight: k.in_flight,
        failures: 0,
        received: 0,
        dropped_kernel: k.drops,
        dropped_userspace: 0,
        unaccounted: 0,
        mismatches: Vec::new(),
    };
    let mut per_probe = Vec::new();
    for p in &table.probes {
        let f = k.failures.get(&p.id).copied().unwrap_or(0);
        let r = received.get(p.id as usize).copied().unwrap_or(0);
        let d = dropped_userspace.get(p.id as usize).copied().unwrap_or(0);
        inv.failures += f;
        inv.received += r;
        inv.dropped_userspace += d;
        let missing = f as i64 - (r + d) as i64;
        inv.unaccounted += missing;
        per_probe.push((p, f, r, d, missing));
    }
    let per_probe_drops = !k.drops_by_probe.is_empty();
    for (p, f, r, d, missing) in per_probe {
        // With per-probe kernel drops the check is exact for every probe; with only a total,
        // no probe may miss more than the kernel dropped in all.
        // A failing program half counted during the read (`in_flight`) may show on either
        // side: its failure counted and its record not yet taken, or its record taken and its
        // failure not yet counted. Within that, no loss is claimed and none hidden.
        let slack = slack_of(k);
        let bad = if per_probe_drops {
            (missing - k.drops_by_probe.get(&p.id).copied().unwrap_or(0) as i64).abs() > slack
        } else {
            missing < -slack || missing > k.drops as i64 + slack
        };
        if bad {
            inv.mismatches.push(InvariantProbe {
                probe: p.id,
                function: p.function.clone(),
                module: p.module.clone(),
                failures: f,
                received: r,
                dropped_userspace: d,
            });
        }
    }
    inv.ok = inv.mismatches.is_empty() && (inv.unaccounted - k.drops as i64).abs() <= slack_of(k);
    inv
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use wire::{encode, PgRecord, RECORD_SIZE};

    fn table() -> Arc<ProbeTable> {
        Arc::new(ProbeTable::from_triples(&[
            (1, "ib_uverbs_reg_mr", "ib_uverbs"),
            (3, "ib_umem_get", "ib_uverbs"),
            (4, "rxe_reg_user_mr", "rdma_rxe"),
        ]))
    }

    pub(crate) fn rec(probe: u32, err: i32, cpu: u32, seq: u64, pid: u32) -> [u8; RECORD_SIZE] {
        let mut r = PgRecord {
            seq,
            ts_ns: 1000 + seq,
            probe_id: probe,
            err,
            pid,
            tid: pid,
            cgroup_id: 1,
            cpu,
            nargs: 2,
            args: [0x10, 0x7fcd_42c1_e000, 0, 0],
            ..PgRecord::default()
        };
        r.comm[..10].copy_from_slice(b"verbs_fail");
        encode(&r)
    }

    pub(crate) fn totals(
        f: &[(u32, u64)],
        errnos: &[((u32, u32), u64)],
        drops: u64,
    ) -> KernelTotals {
        KernelTotals {
            calls: f.iter().map(|&(p, n)| (p, n * 10)).collect(),
            failures: f.iter().copied().collect(),
            errnos: errnos.iter().copied().collect(),
            drops,
            ..KernelTotals::default()
        }
    }

    pub(crate) fn pipe(cap: usize) -> Pipeline {
        Pipeline::new(
            table(),
            PipelineConfig {
                batch_cap: cap,
                host: "h".into(),
                kernel: "k".into(),
                ..Default::default()
            },
        )
    }

    #[test]
    fn recorded_arguments_carry_the_manifest_names() {
        let mut t = ProbeTable::from_triples(&[(3, "ib_umem_get", "ib_uverbs")]);
        t.probes[0].arg_names = vec!["addr".into(), "size".into()];
        let mut p = Pipeline::new(
            Arc::new(t),
            PipelineConfig {
                batch_cap: 10,
                ..Default::default()
            },
        );
        // rec() records two arguments: 0x10 and an address.
        p.ingest(&rec(3, 14, 0, 0, 288));
        let s = p.snapshot(
            &Arc::new(totals(&[(3, 1)], &[((3, 14), 1)], 0)),
            SystemTime::now(),
            true,
        );
        let v: serde_json::Value = serde_json::from_slice(&s.to_line()).expect("json");
        let args = &v["records"][0]["args"];
        assert_eq!(args["addr"], "0x10", "{args}");
        assert_eq!(args["size"], "0x7fcd42c1e000", "{args}");
    }

    #[test]
    fn window_deltas_records_and_json() {
        let mut p = pipe(100);
        p.ingest(&rec(3, 14, 0, 0, 288));
        p.ingest(&rec(4, 14, 0, 1, 288));
        p.ingest(&rec(1, 14, 1, 0, 288));
        let k1 = Arc::new(totals(
            &[(1, 1), (3, 1), (4, 1)],
            &[((1, 14), 1), ((3, 14), 1), ((4, 14), 1)],
            0,
        ));
        let s = p.snapshot(&k1, SystemTime::now(), false);
        assert_eq!(s.records.len(), 3);
        assert!(s.invariant.ok, "{:?}", s.invariant);
        let c1 = &s.counters[0];
        assert_eq!((c1.calls, c1.failures, c1.received), (10, 1, 1));
        assert_eq!(c1.errno.get("EFAULT"), Some(&1));
        let v: serde_json::Value = serde_json::from_slice(&s.to_line()).expect("json");
        for key in [
            "host",
            "kernel",
            "manifest_hash",
            "window",
            "records",
            "counters",
            "drops",
            "seq_gaps",
            "attached",
        ] {
            assert!(v.get(key).is_some(), "{key}");
        }
        let r0 = &v["records"][0];
        assert_eq!(r0["function"], "ib_umem_get");
        assert_eq!(r0["module"], "ib_uverbs");
        assert_eq!(r0["errno"], 14);
        assert_eq!(r0["errno_name"], "EFAULT");
        assert_eq!(r0["comm"], "verbs_fail");
        assert_eq!(r0["args"][1], "0x7fcd42c1e000");
        assert_eq!(r0["job"], serde_json::json!({}));
        for key in [
            "probe",
            "function",
            "module",
            "errno",
            "errno_name",
            "pid",
            "tid",
            "comm",
            "cgroup",
            "job",
            "args",
            "ts_ns",
            "cpu",
            "seq",
        ] {
            assert!(r0.get(key).is_some(), "{key}");
        }
        assert_eq!(
            v["drops"],
            serde_json::json!({"kernel": 0, "userspace": 0, "missed": 0})
        );
        // second window: only the growth
        p.ingest(&rec(1, 22, 1, 1, 300));
        let k2 = Arc::new(totals(
            &[(1, 2), (3, 1), (4, 1)],
            &[((1, 14), 1), ((1, 22), 1), ((3, 14), 1), ((4, 14), 1)],
            0,
        ));
        let s = p.snapshot(&k2, SystemTime::now(), true);
        assert_eq!(s.records.len(), 1);
        assert_eq!(s.counters[0].failures, 1);
        assert_eq!(s.counters[0].calls, 10);
        assert_eq!(
            s.counters[0].errno,
            BTreeMap::from([("EINVAL".to_string(), 1)])
        );
        assert_eq!(s.counters[1].failures, 0);
        assert!(s.counters[1].errno.is_empty());
        assert!(s.invariant.ok && s.invariant.exact);
    }

    #[test]
    fn chains_in_snapshot_across_windows() {
        // 1 ib_uverbs_reg_mr -> 4 rxe_reg_user_mr -> 3 ib_umem_get
        let t = Arc::new(
            ProbeTable::from_triples(&[
                (1, "ib_uverbs_reg_mr", "ib_uverbs"),
                (3, "ib_umem_get", "ib_uverbs"),
                (4, "rxe_reg_user_mr", "rdma_rxe"),
            ])
            .with_calls(5, &[(1, 4), (4, 3)]),
        );
        let mut p = Pipeline::new(t, PipelineConfig::default());
        p.ingest(&rec(3, 14, 0, 0, 288));
        p.ingest(&rec(4, 14, 0, 1, 288));
        // the window closes before the handler returned: no chain yet
        let k = Arc::new(totals(&[(3, 1), (4, 1)], &[((3, 14), 1), ((4, 14), 1)], 0));
        let s = p.snapshot(&k, SystemTime::now(), false);
        assert_eq!((s.records.len(), s.chains.len()), (2, 0));
        let v: serde_json::Value = serde_json::from_slice(&s.to_line()).expect("json");
        assert_eq!(v["chains"], serde_json::json!([]));
        p.ingest(&rec(1, 14, 0, 2, 288)); // ts_ns = 1000 + seq: after the first two
        let k = Arc::new(totals(
            &[(1, 1), (3, 1), (4, 1)],
            &[((1, 14), 1), ((3, 14), 1), ((4, 14), 1)],
            0,
        ));
        let s = p.snapshot(&k, SystemTime::now(), false);
        assert_eq!((s.records.len(), s.chains.len()), (1, 1));
        let v: serde_json::Value = serde_json::from_slice(&s.to_line()).expect("json");
        let c = &v["chains"][0];
        assert_eq!(
            c["functions"],
            serde_json::json!(["ib_uverbs_reg_mr", "rxe_reg_user_mr", "ib_umem_get"])
        );
        assert_eq!(
            c["origin"]["function"]
                .as_str()
                .zip(c["origin"]["module"].as_str()),
            Some(("ib_umem_get", "ib_uverbs"))
        );
        assert_eq!(
            (c["errno"].as_u64(), c["pid"].as_u64()),
            (Some(14), Some(288))
        );
        assert_eq!(c["comm"], "verbs_fail");
        assert_eq!(
            c["summary"],
            "EFAULT origin ib_umem_get (ib_uverbs) <- rxe_reg_user_mr <- ib_uverbs_reg_mr"
        );
    }

    #[test]
    fn runs_the_kernel_skipped_are_reported_per_window_and_probe() {
        let mut p = pipe(100);
        p.ingest(&rec(3, 14, 0, 0, 288));
        let mut k = totals(&[(3, 1)], &[((3, 14), 1)], 0);
        k.missed = [(3, 2)].into();
        let s = p.snapshot(&Arc::new(k.clone()), SystemTime::now(), false);
        assert_eq!(s.drops.missed, 2);
        assert_eq!(s.counters[1].missed, 2);
        // the invariant compares what was counted: the skipped runs are beside it
        assert!(s.invariant.ok);
        // the next window: only the growth; a probe without any shows none in its line
        k.missed = [(3, 5)].into();
        let s = p.snapshot(&Arc::new(k), SystemTime::now(), false);
        assert_eq!((s.drops.missed, s.counters[1].missed), (3, 3));
        let line = String::from_utf8(s.to_line()).expect("utf-8");
        assert_eq!(line.matches("\"missed\":").count(), 2, "{line}");
    }

    #[test]
    fn quiet_windows_share_their_all_zero_counters() {
        let mut p = pipe(100);
        p.ingest(&rec(3, 14, 0, 0, 288));
        let k = Arc::new(totals(&[(3, 1)], &[((3, 14), 1)], 0));
        let busy = p.snapshot(&k, SystemTime::now(), false);
        assert_eq!(busy.counters[1].failures, 1);
        // the same counters again (the live source hands on the same allocation), or equal
        // ones (a replay parses them anew): all zero, one list for every quiet window
        let equal = Arc::new(totals(&[(3, 1)], &[((3, 14), 1)], 0));
        let quiet: Vec<Snapshot> = [&k, &k, &equal]
            .into_iter()
            .map(|k| p.snapshot(k, SystemTime::now(), false))
            .collect();
        let zero = p.counter_deltas(&k);
        assert!(zero.iter().all(|c| c.calls + c.failures + c.received == 0));
        for s in &quiet {
            assert_eq!(*s.counters, zero);
            assert!(SharedPart::same(&s.counters, &quiet[0].counters));
            assert_eq!(s.invariant, busy.invariant);
        }
        // a record ends the quiet spell
        p.ingest(&rec(3, 14, 0, 1, 288));
        let k = Arc::new(totals(&[(3, 2)], &[((3, 14), 2)], 0));
        let s = p.snapshot(&k, SystemTime::now(), true);
        assert_eq!((s.counters[1].failures, s.counters[1].received), (1, 1));
        assert!(s.invariant.exact && s.invariant.ok);
    }

    #[test]
    fn only_a_window_in_which_nothing_happened_is_idle() {
        let mut p = pipe(100);
        p.ingest(&rec(3, 14, 0, 0, 288));
        let k = Arc::new(totals(&[(3, 1)], &[((3, 14), 1)], 0));
        assert!(!p.snapshot(&k, SystemTime::now(), false).idle, "a record");
        // the same counters again: idle once the record's chain is reported
        let idle: Vec<bool> = (0..3)
            .map(|_| {
                let s = p.snapshot(&k, SystemTime::now(), false);
                assert!(!s.idle || (s.records.is_empty() && s.chains.is_empty()));
                s.idle
            })
            .collect();
        assert!(idle[1] && idle[2], "{idle:?}");
        // a successful call: no record, but counters moved
        let called = Arc::new(KernelTotals {
            calls: [(3, 11)].into(),
            ..(*k).clone()
        });
        assert!(!p.snapshot(&called, SystemTime::now(), false).idle);
        assert!(p.snapshot(&called, SystemTime::now(), false).idle);
        assert!(!p.snapshot(&called, SystemTime::now(), true).idle, "final");
    }

    #[test]
    fn batch_cap_counts_userspace_drops() {
        let mut p = pipe(10);
        for i in 0..1000 {
            p.ingest(&rec(3, 14, 0, i, 1));
        }
        assert_eq!(p.batch_len(), 10);
        let k = Arc::new(totals(&[(3, 1000)], &[((3, 14), 1000)], 0));
        let s = p.snapshot(&k, SystemTime::now(), true);
        assert_eq!(s.records.len(), 10);
        assert_eq!(s.drops.userspace, 990);
        assert_eq!(s.counters[1].dropped_userspace, 990);
        assert_eq!(s.seq_gaps, 0);
        assert!(s.invariant.ok, "{:?}", s.invariant);
        assert_eq!(s.invariant.dropped_userspace, 990);
    }

    #[test]
    fn kernel_drops_and_seq_gaps() {
        let mut p = pipe(100);
        // cpu 0: seq 0,1,4 (2,3 dropped); cpu 1: 1, 0 (out of order), 2
        for (cpu, seq) in [(0, 0), (0, 1), (0, 4), (1, 1), (1, 0), (1, 2)] {
            p.ingest(&rec(1, 14, cpu, seq, 1));
        }
        let k = Arc::new(totals(&[(1, 8)], &[((1, 14), 8)], 2));
        let s = p.snapshot(&k, SystemTime::now(), true);
        assert_eq!(s.seq_gaps, 2);
        assert_eq!(s.drops.kernel, 2);
        assert!(s.invariant.ok, "{:?}", s.invariant);
        // next window: no new gaps
        let s = p.snapshot(&k, SystemTime::now(), true);
        assert_eq!((s.seq_gaps, s.drops.kernel), (0, 0));
    }

    #[test]
    fn invariant_detects_loss_and_excess() {
        let t = table();
        let ids = t.id_limit();
        let mut received = vec![0; ids];
        let dropped = vec![0; ids];
        received[1] = 5;
        // a record lost without a kernel drop: not ok
        let k = totals(&[(1, 6)], &[], 0);
        let inv = check_invariant(&t, &k, &received, &dropped, true);
        assert!(!inv.ok);
        assert_eq!(inv.unaccounted, 1);
        assert_eq!(inv.mismatches[0].function, "ib_uverbs_reg_mr");
        // ... explained by one kernel drop: ok
        let k = totals(&[(1, 6)], &[], 1);
        assert!(check_invariant(&t, &k, &received, &dropped, true).ok);
        // more records than failures: not ok, even when totals balance elsewhere
        received[3] = 2;
        let k = totals(&[(1, 7), (3, 1)], &[], 1);
        let inv = check_invariant(&t, &k, &received, &dropped, true);
        assert!(!inv.ok);
        assert!(inv.mismatches.iter().any(|m| m.probe == 3));
    }

    #[test]
    fn per_probe_kernel_drops_make_the_invariant_exact_per_probe() {
        let t = table();
        let ids = t.id_limit();
        let mut received = vec![0; ids];
        let dropped = vec![0; ids];
        received[1] = 5;
        received[3] = 1;
        // probe 1: 6 failures, 5 received, its 1 drop: ok
        let mut k = totals(&[(1, 6), (3, 1)], &[], 1);
        k.drops_by_probe = [(1, 1), (3, 0)].into_iter().collect();
        assert!(check_invariant(&t, &k, &received, &dropped, true).ok);
        // the same total, but the kernel says the drop was probe 3's: probe 1 lost a record
        // without a drop and probe 3 got a record that was dropped.
        k.drops_by_probe = [(1, 0), (3, 1)].into_iter().collect();
        let inv = check_invariant(&t, &k, &received, &dropped, true);
        assert!(!inv.ok);
        let bad: Vec<u32> = inv.mismatches.iter().map(|m| m.probe).collect();
        assert_eq!(bad, vec![1, 3]);
    }

    #[test]
    fn a_fenced_window_is_exact_and_one_in_flight_claims_no_loss() {
        let t = table();
        let ids = t.id_limit();
        let dropped = vec![0; ids];
        let mut received = vec![0; ids];
        received[1] = 2;
        // behind a closed fence: exact before the final snapshot
        let mut k = totals(&[(1, 2)], &[], 0);
        k.fenced = true;
        let inv = check_invariant(&t, &k, &received, &dropped, false);
        assert!(inv.ok && inv.exact, "{inv:?}");
        // one failing program half counted: its failure counted, its record not yet taken
        // (or the other way round) is no loss, and not exact
        k.in_flight = 1;
        for (failures, got) in [(3, 2), (2, 3), (2, 2)] {
            k.failures = [(1, failures)].into();
            received[1] = got;
            let inv = check_invariant(&t, &k, &received, &dropped, false);
            assert!(
                inv.ok && !inv.exact,
                "{failures} counted, {got} received: {inv:?}"
            );
            assert_eq!(inv.in_flight, 1);
        }
        // more than what was in flight is a loss (or a record counted nowhere)
        for got in [0, 4] {
            received[1] = got;
            let inv = check_invariant(&t, &k, &received, &dropped, false);
            assert!(!inv.ok, "2 counted, {got} received, 1 in flight: {inv:?}");
        }
        // unfenced (a replay, an older object): exact only in the final snapshot
        let k = totals(&[(1, 2)], &[], 0);
        received[1] = 2;
        assert!(!check_invariant(&t, &k, &received, &dropped, false).exact);
    }

    #[test]
    fn bad_samples_are_counted() {
        let mut p = pipe(100);
        p.ingest(&[0u8; 95]);
        p.ingest(&rec(2, 14, 0, 0, 1)); // probe 2 not in the table
        p.ingest(&rec(1, 14, 1 << 20, 0, 1)); // absurd cpu
        let s = p.snapshot(&Arc::default(), SystemTime::now(), false);
        assert_eq!(s.errors.decode, 3);
        assert!(s.records.is_empty());
    }

    #[test]
    fn counter_reset_restarts() {
        assert_eq!(counter_delta(10, 15), 5);
        assert_eq!(counter_delta(10, 3), 3);
        let v = vec![
            5u64.to_ne_bytes().to_vec(),
            7u64.to_ne_bytes().to_vec(),
            vec![1, 2],
        ];
        assert_eq!(KernelTotals::sum_percpu(&v), 12);
    }

    #[test]
    fn derived_counters() {
        let mut p = Pipeline::new(
            table(),
            PipelineConfig {
                derive_counters: true,
                seq_from_zero: false,
                ..Default::default()
            },
        );
        p.ingest(&rec(1, 14, 0, 100, 1));
        p.ingest(&rec(1, 0, 0, 101, 1));
        let k = Arc::new(p.derived());
        assert_eq!(k.failures[&1], 2);
        let s = p.snapshot(&k, SystemTime::now(), true);
        assert_eq!(s.counters[0].errno.get("none"), Some(&1));
        assert_eq!(s.seq_gaps, 0);
        assert!(s.invariant.ok);
    }

    /// The pipeline sees the baseline through `TraceBaseline` only: any implementation gets
    /// every trace and the kernel's counts, a note per chain, and its member in the snapshot.
    #[test]
    fn the_baseline_is_any_trace_baseline() {
        use wire::{BaselineOut, ChainNote, ChainView, TraceCounts};

        struct Counting {
            traces: u64,
            counts: TraceCounts,
            annotated: usize,
        }
        impl baseline::TraceBaseline for Counting {
            fn ingest(&mut self, _table: &ProbeTable, _trace: &[u8]) {
                self.traces += 1;
            }
            fn set_kernel_counts(&mut self, counts: TraceCounts) {
                self.counts = counts;
            }
            fn annotate(&mut self, _chain: &ChainView<'_>) -> ChainNote {
                self.annotated += 1;
                ChainNote {
                    bifurcation: Err("a test's"),
                    expected: true,
                    expected_why: format!("note {}", self.annotated),
                }
            }
            fn render(&self, _table: &ProbeTable) -> BaselineOut {
                BaselineOut {
                    mechanism: format!("{} traces, {} chains", self.traces, self.annotated),
                    sample: 1,
                    budget: 0,
                    max_ns: 0,
                    records: self.counts,
                    handlers: Vec::new(),
                    expected: Vec::new(),
                    jobs: Vec::new(),
                    jobs_other: 0,
                }
            }
            fn save(&mut self, _table: &ProbeTable, _is_final: bool) -> Option<String> {
                None
            }
        }
        let t = Arc::new(
            ProbeTable::from_triples(&[
                (1, "ib_uverbs_reg_mr", "ib_uverbs"),
                (3, "ib_umem_get", "ib_uverbs"),
            ])
            .with_calls(5, &[(1, 3)]),
        );
        let mut p = Pipeline::new(t, PipelineConfig::default());
        p.enable_baseline(Box::new(Counting {
            traces: 0,
            counts: TraceCounts::default(),
            annotated: 0,
        }));
        p.ingest_trace(&[0; 8]);
        p.ingest_trace(&[0; 8]);
        p.set_trace_counts(TraceCounts {
            produced: 2,
            ..TraceCounts::default()
        });
        p.ingest(&rec(3, 14, 0, 0, 288));
        p.ingest(&rec(1, 14, 0, 1, 288));
        let k = Arc::new(totals(&[(1, 1), (3, 1)], &[((1, 14), 1), ((3, 14), 1)], 0));
        let s = p.snapshot(&k, SystemTime::now(), true);
        assert_eq!(s.chains.len(), 1);
        let b = s.baseline.as_ref().expect("the baseline's member");
        assert_eq!(b.mechanism, "2 traces, 1 chains");
        assert_eq!(b.records.produced, 2);
        let notes: Vec<_> = s.chains.iter().filter_map(|c| c.note.cloned()).collect();
        assert_eq!(notes.len(), 1);
        assert_eq!(notes[0].expected_why, "note 1");
        // a chain the baseline calls expected is counted so
        assert_eq!(p.chain_totals().keys().filter(|k| k.3).count(), 1);
    }
}
