//! The good-trace baseline (`collect --baseline`): success traces of the uverbs handlers in,
//! per handler the distinct success shapes out, and for every failure chain where it left the
//! success path (the bifurcation) and whether its failure is expected.
//!
//! The collector's pipeline calls it through one trait, [`TraceBaseline`]:
//! * `ingest` decodes one trace record (`struct pg_trace`, the `baseline` ring):
//!   a success goes into the [`store`], a failing call's path is kept a while for its chain.
//! * `annotate` gives each chain of a window its [`ChainNote`]: the chain's handler
//!   is its outermost probe when that is a handler; its path is the call's own trace (matched
//!   by thread, handler and time) or else the chain's failing functions; aligned with the
//!   handler's shapes in [`align`]; judged in [`expected`].
//! * `render` is the snapshot's `baseline` member; `save` keeps the state file.
//!
//! It stands on `wire` (the probe table, the chains, the snapshot's baseline types) and on
//! nothing of the collector, which depends on it (the config it loads with, [`Baseline::new`]).

mod align;
mod expected;
mod jobs;
mod persist;
mod store;
mod trace;

use std::collections::{BTreeSet, VecDeque};
use std::time::Duration;

use wire::{comm_str, errno_label, ProbeTable};
use wire::{
    BaselineOut, Bifurcation, ChainNote, ChainView, ExemplarOut, ExpectedOut, HandlerOut,
    HandlerSummary, ShapeOut, StateView, TraceCounts,
};

pub use expected::{BaselineError, Pinned};
use trace::{token, Trace};

/// What the collector's pipeline calls, and all it calls: traces in, a note per chain, the
/// snapshot's member, the state file.
pub trait TraceBaseline: Send {
    /// One record of the `baseline` ring (`table` names its steps).
    fn ingest(&mut self, table: &ProbeTable, trace: &[u8]);
    /// The kernel's counts of trace records (cumulative), read behind the fence.
    fn set_kernel_counts(&mut self, counts: TraceCounts);
    /// The note of one chain (and its failure learned for the next ones).
    fn annotate(&mut self, chain: &ChainView<'_>) -> ChainNote;
    /// The snapshot's `baseline` member.
    fn render(&self, table: &ProbeTable) -> BaselineOut;
    /// Writes the state file when due (or `is_final`): the line to print when it failed.
    fn save(&mut self, table: &ProbeTable, is_final: bool) -> Option<String>;
}

impl TraceBaseline for Baseline {
    fn ingest(&mut self, table: &ProbeTable, trace: &[u8]) {
        Baseline::ingest(self, table, trace);
    }
    fn set_kernel_counts(&mut self, counts: TraceCounts) {
        Baseline::set_kernel_counts(self, counts);
    }
    fn annotate(&mut self, chain: &ChainView<'_>) -> ChainNote {
        Baseline::annotate(self, chain)
    }
    fn render(&self, table: &ProbeTable) -> BaselineOut {
        self.out(table)
    }
    fn save(&mut self, table: &ProbeTable, is_final: bool) -> Option<String> {
        Baseline::save(self, table, is_final)
    }
}

/// What `collect --baseline` asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct BaselineConfig {
    /// trace one call in `sample` of each handler (1: every call)
    pub sample: u32,
    /// traces per handler per `interval` at most (0: no bound)
    pub budget: u32,
    pub interval: Duration,
    /// a success slower than this is not kept
    pub max: Duration,
    /// failure patterns pinned as expected
    pub pinned: Vec<Pinned>,
    /// size of the `baseline` ring in bytes (a power of two, at least a page; default 256 KiB)
    pub ring_bytes: Option<u32>,
    /// where the baseline is kept across restarts (`None`: not kept)
    pub state: Option<std::path::PathBuf>,
    /// the state file's bound in bytes
    pub state_bytes: u64,
    /// the state is written at most this often (and at the end of the run)
    pub save_every: Duration,
    /// how a handler's traced call begins and ends
    pub entry: EntryChoice,
}

/// How a handler's traced call begins and ends (`--baseline-entry`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum EntryChoice {
    /// fsession where the kernel's BTF has it (7.0+), fentry beside the fexit elsewhere
    #[default]
    Auto,
    /// fentry beside the fexit on every kernel (an operator's pin: a kernel whose fsession
    /// misbehaves, or a cost comparison on the same kernel)
    Fentry,
}

impl Default for BaselineConfig {
    fn default() -> Self {
        BaselineConfig {
            sample: 1,
            budget: 1000,
            interval: Duration::from_secs(5),
            max: Duration::from_millis(50),
            pinned: Vec::new(),
            ring_bytes: None,
            state: None,
            state_bytes: 4 << 20,
            save_every: Duration::from_secs(60),
            entry: EntryChoice::Auto,
        }
    }
}

/// A token's name: `function`, or `function [ERRNO]` for a step that failed.
fn token_name(table: &ProbeTable, t: u32) -> String {
    let f = table.get(t >> 12).map_or("?", |p| p.function.as_str());
    match t & 0xfff {
        0 => f.to_string(),
        0xfff => format!("{f} [failed]"),
        e => format!("{f} [{}]", errno_label(e)),
    }
}

/// A token's layer: the verbs core or the driver (the manifest's `layer` of its probe).
fn layer(table: &ProbeTable, t: u32) -> Option<manifest::Layer> {
    table.get(t >> 12).map(|p| p.layer)
}

/// Failing calls' traces kept for their chains (a chain closes a gap after its records).
const FAILING_KEPT: usize = 4096;
/// A failing call's trace ends this long at most after its handler's failure record.
const MATCH_NS: u64 = 5_000_000;

/// The baseline of one run.
pub struct Baseline {
    cfg: BaselineConfig,
    /// how the kernel traces (the attach status's word), or why it cannot
    mechanism: String,
    handlers: BTreeSet<u32>,
    store: store::Store,
    failing: VecDeque<Trace>,
    expected: expected::Expected,
    counts: TraceCounts,
    jobs: jobs::Jobs,
    /// learned something since the state was last written; when it was
    dirty: bool,
    saved: Option<std::time::Instant>,
}

impl Baseline {
    pub fn new(cfg: BaselineConfig, handlers: BTreeSet<u32>, mechanism: String) -> Self {
        let expected = expected::Expected {
            pinned: cfg.pinned.clone(),
            ..Default::default()
        };
        Baseline {
            cfg,
            mechanism,
            handlers,
            store: store::Store::default(),
            failing: VecDeque::new(),
            expected,
            // nothing produced, nothing received: holds until the kernel's counts say
            // otherwise (and stays so where the baseline is unavailable: no counts are read)
            counts: TraceCounts {
                holds: true,
                ..TraceCounts::default()
            },
            jobs: jobs::Jobs::default(),
            dirty: false,
            saved: None,
        }
    }

    /// Reads the state file (`--baseline-state`): the line to print when one was restored
    /// or set aside.
    pub fn restore(&mut self, table: &ProbeTable) -> Option<String> {
        let path = self.cfg.state.clone()?;
        match persist::load(&path, &table.manifest_hash) {
            Ok(None) => None,
            Ok(Some(st)) => {
                // an earlier version's shapes: in call order before anything is merged in
                let (store, reordered) = if st.return_order {
                    let shapes: usize = st.store.handlers.values().map(|h| h.shapes.len()).sum();
                    let (s, merged) = st.store.into_call_order(&|a, b| table.relation.calls(a, b));
                    (s, Some((shapes, merged)))
                } else {
                    (st.store, None)
                };
                self.store = store;
                self.expected.patterns = st.expected.patterns;
                self.expected.seen = st.expected.seen;
                // written back in call order at the next save
                self.dirty |= reordered.is_some();
                let n: u64 = self.store.handlers.values().map(|h| h.successes).sum();
                Some(format!(
                    "baseline state {}: restored {} handlers, {n} successes, {} failure patterns{}",
                    path.display(),
                    self.store.handlers.len(),
                    self.expected.patterns.len(),
                    reordered.map_or_else(String::new, |(shapes, merged)| format!(
                        " (an earlier version's file: its {shapes} shapes put in call order with \
                         the manifest's call graph, {merged} merged into one they equal)"
                    ))
                ))
            }
            Err(line) => Some(line),
        }
    }

    /// Writes the state file when something was learned and `save_every` has passed (or at
    /// the end): the line to print when it could not be written.
    pub(crate) fn save(&mut self, table: &ProbeTable, is_final: bool) -> Option<String> {
        let path = self.cfg.state.clone()?;
        let due = self
            .saved
            .is_none_or(|t| t.elapsed() >= self.cfg.save_every);
        if !self.dirty || !(due || is_final) {
            return None;
        }
        let mut st = persist::State {
            manifest_hash: table.manifest_hash.clone(),
            functions: table
                .probes
                .iter()
                .map(|p| (p.id, p.function.clone()))
                .collect(),
            store: self.store.clone(),
            expected: self.expected.clone(),
            return_order: false,
        };
        self.saved = Some(std::time::Instant::now());
        self.dirty = false;
        persist::encode(&mut st, self.cfg.state_bytes)
            .and_then(|b| persist::write(&path, &b).map_err(|e| e.to_string()))
            .err()
            .map(|e| format!("baseline state {}: not written: {e}", path.display()))
    }

    /// One record of the `baseline` ring, its steps put in call order with `table`'s call
    /// graph.
    pub(crate) fn ingest(&mut self, table: &ProbeTable, sample: &[u8]) {
        let Some(t) = Trace::decode(sample) else {
            self.counts.decode_errors += 1;
            return;
        };
        let t = t.into_call_order(&|a, b| table.relation.calls(a, b));
        self.counts.received += 1;
        self.dirty = true;
        self.jobs.add(t.cgroup_id, t.handler, &comm_str(&t.comm));
        if t.failed {
            if self.failing.len() >= FAILING_KEPT {
                self.failing.pop_front();
            }
            self.failing.push_back(t);
        } else {
            self.expected.success(t.handler, t.pid, t.ts_ns);
            self.store.add(&t);
        }
    }

    /// The kernel's counts of trace records (cumulative), read behind the fence.
    pub(crate) fn set_kernel_counts(&mut self, k: TraceCounts) {
        self.counts.produced = k.produced;
        self.counts.dropped = k.dropped;
        self.counts.budget_skipped = k.budget_skipped;
        self.counts.slow = k.slow;
        self.counts.in_flight = k.in_flight;
        self.counts.holds = self.counts.received + self.counts.dropped == self.counts.produced;
    }

    /// The note of one chain (and its failure learned for the next ones).
    pub(crate) fn annotate(&mut self, c: &ChainView<'_>) -> ChainNote {
        let (Some(origin), Some(outer)) = (c.origin(), c.outermost()) else {
            return ChainNote {
                bifurcation: Err("an empty chain"),
                expected: false,
                expected_why: String::new(),
            };
        };
        let name = |id: u32| c.table.get(id).map_or("?", |p| p.function.as_str());
        let core = c
            .table
            .get(origin.probe)
            .is_some_and(|p| p.layer == manifest::Layer::Core);
        let handler = outer.probe;
        let key = (handler, origin.probe, origin.err);
        let names = (name(handler), name(origin.probe));
        if self.handlers.is_empty() {
            // no handler traced on this host ("baseline unavailable: <why>": 5.10, handlers
            // attached by kprobe): no shape to compare, nothing learned; pinned or
            // kernel-normal only
            let v = self.expected.judge(key, names, core, false);
            return ChainNote {
                bifurcation: Err("baseline unavailable"),
                expected: v.expected,
                expected_why: v.why,
            };
        }
        if !self.handlers.contains(&handler) {
            // the handler did not fail (or is not probed): pinned or kernel-normal only, not
            // learned (no success of a handler to learn from)
            let v = self.expected.judge(key, names, core, false);
            return ChainNote {
                bifurcation: Err("no handler probe in the chain"),
                expected: v.expected,
                expected_why: v.why,
            };
        }
        let own = self.failing.iter().position(|t| {
            t.tid == outer.tid
                && t.handler == handler
                && t.ts_ns.wrapping_sub(outer.ts_ns) < MATCH_NS
        });
        let (path, kind) = match own.and_then(|i| self.failing.remove(i)) {
            Some(t) => (t.path(), "traced"),
            // the chain's links, innermost first, each called by the next: reversed, they are
            // in call order, and only the innermost (the origin) failed on its own
            None => {
                let inner = c.links.iter().filter(|l| l.probe != handler);
                let origin = inner.clone().next().map(|l| l.probe);
                let path = inner
                    .rev()
                    .map(|l| match Some(l.probe) == origin {
                        true => token(
                            l.probe,
                            i32::try_from(l.err).ok().filter(|&e| e > 0).unwrap_or(-1),
                        ),
                        false => token(l.probe, 0),
                    })
                    .collect();
                (path, "failures")
            }
        };
        let bifurcation = self.bifurcation(c.table, handler, &path, kind);
        // the outermost link is the handler's own failure record: it failed
        let v = self.expected.judge(key, names, core, true);
        self.expected.failure(key, outer.pid, outer.ts_ns);
        self.dirty = true;
        ChainNote {
            bifurcation,
            expected: v.expected,
            expected_why: v.why,
        }
    }

    fn bifurcation(
        &self,
        table: &ProbeTable,
        handler: u32,
        path: &[u32],
        kind: &'static str,
    ) -> Result<Bifurcation, &'static str> {
        let h = self.store.handlers.get(&handler).ok_or("no baseline yet")?;
        let ranked = h.ranked();
        let s = align::split(&ranked, path).ok_or("no baseline yet")?;
        let name = |t: u32| token_name(table, t);
        Ok(Bifurcation {
            after: s.after.map_or_else(
                || {
                    table
                        .get(handler)
                        .map_or("?", |p| p.function.as_str())
                        .to_string()
                },
                name,
            ),
            baseline_next: s.baseline_next.map(name),
            baseline_next_layer: s.baseline_next.and_then(|t| layer(table, t)),
            share: s.share,
            this_next: s.this_next.map(name),
            this_next_layer: s.this_next.and_then(|t| layer(table, t)),
            shape: store::shape_id(ranked[s.shape].0),
            path: kind,
            functions: path.iter().map(|&p| name(p)).collect(),
            common: s.common,
        })
    }

    /// The snapshot's `baseline` member.
    pub(crate) fn out(&self, table: &ProbeTable) -> BaselineOut {
        let name = |id: u32| {
            table
                .get(id)
                .map_or_else(|| "?".to_string(), |p| p.function.clone())
        };
        let handlers = self
            .store
            .handlers
            .iter()
            .map(|(&id, h)| {
                let ranked = h.ranked();
                HandlerOut {
                    probe: id,
                    function: name(id),
                    successes: h.successes,
                    other: h.other,
                    noise: align::noise(&ranked)
                        .into_iter()
                        .map(|t| token_name(table, t))
                        .collect(),
                    shapes: ranked
                        .iter()
                        .filter_map(|&(p, _)| h.shapes.get(p).map(|s| (p, s)))
                        .map(|(p, s)| shape_out(p, s, h.successes, &|t| token_name(table, t)))
                        .collect(),
                }
            })
            .collect();
        let expected = expected_table(&self.expected, &name);
        BaselineOut {
            mechanism: self.mechanism.clone(),
            sample: self.cfg.sample,
            budget: self.cfg.budget,
            max_ns: u64::try_from(self.cfg.max.as_nanos()).unwrap_or(u64::MAX),
            records: self.counts,
            handlers,
            expected,
            jobs: self.jobs.out(&name),
            jobs_other: self.jobs.other,
        }
    }
}

/// The learned table, each pattern judged (pins applied).
fn expected_table(e: &expected::Expected, name: &dyn Fn(u32) -> String) -> Vec<ExpectedOut> {
    e.patterns
        .iter()
        .map(|(&key, p)| {
            let v = e.judge(key, (&name(key.0), &name(key.1)), false, true);
            ExpectedOut {
                handler: name(key.0),
                origin: name(key.1),
                errno_name: errno_label(key.2).into_owned(),
                processes: p.failed.len() as u64,
                recovered: p.recovered.len() as u64,
                increase: v.increase,
                expected: v.expected,
                why: v.why,
            }
        })
        .collect()
}

/// The "baseline unavailable" line of a load where no handler got its baseline entry: what
/// this kernel lacks (task storage, 5.11+; BTF of the modules whose probes attached by kprobe,
/// which has no baseline entry: both on 5.10), else an object without baseline entries or no
/// handler attached.
pub fn unavailable(task_storage: bool, attached: &[wire::AttachStatus]) -> String {
    let kprobed: BTreeSet<&str> = attached
        .iter()
        .filter(|s| s.attached && s.mechanism == Some(wire::Mechanism::Kprobe))
        .map(|s| s.module.as_str())
        .collect();
    let mut lacks = Vec::new();
    if !task_storage {
        lacks.push("no task storage (BPF_MAP_TYPE_TASK_STORAGE, 5.11+) for the traces".into());
    }
    if !kprobed.is_empty() {
        let modules: Vec<&str> = kprobed.into_iter().collect();
        lacks.push(format!(
            "{} without BTF, so the handlers attach by kprobe and the baseline's fentry/fsession entries cannot",
            modules.join(", ")
        ));
    }
    if lacks.is_empty() {
        return "baseline unavailable: no baseline entry loaded for an attached handler (an object compiled from an older probegen.bpf.h, or no handler attached)".into();
    }
    format!(
        "baseline unavailable: this kernel has {}; the failure path runs without it",
        lacks.join(" and ")
    )
}

/// What a state file's bytes hold, with `pinned` applied to its table (any probe set).
pub fn state_view(bytes: &[u8], pinned: Vec<Pinned>) -> Result<StateView, BaselineError> {
    let mut st = persist::decode(bytes, None).map_err(|a| match a {
        persist::Aside::Damaged(why) | persist::Aside::OtherSet(why) => BaselineError::State(why),
    })?;
    st.expected.pinned = pinned;
    let f = |id: u32| {
        st.functions
            .get(&id)
            .cloned()
            .unwrap_or_else(|| format!("probe {id}"))
    };
    Ok(StateView {
        manifest_hash: st.manifest_hash.clone(),
        return_order: st.return_order,
        handlers: st
            .store
            .handlers
            .iter()
            .map(|(&id, h)| HandlerSummary {
                function: f(id),
                successes: h.successes,
                shapes: h.shapes.len(),
                other: h.other,
            })
            .collect(),
        expected: expected_table(&st.expected, &f),
    })
}

fn shape_out(
    path: &[u32],
    s: &store::Shape,
    successes: u64,
    name: &impl Fn(u32) -> String,
) -> ShapeOut {
    ShapeOut {
        shape: store::shape_id(path),
        functions: path.iter().map(|&p| name(p)).collect(),
        count: s.count,
        share: s.count as f64 / successes.max(1) as f64,
        p50_ns: s.quantile(0.5),
        p90_ns: s.quantile(0.9),
        p99_ns: s.quantile(0.99),
        duration_log2: s.hist.clone(),
        exemplars: s
            .exemplars
            .iter()
            .map(|t| ExemplarOut {
                pid: t.pid,
                tid: t.tid,
                comm: comm_str(&t.comm).to_string(),
                cgroup_id: t.cgroup_id,
                duration_ns: t.duration_ns,
                step_end_ns: t.steps.iter().map(|s| s.2).collect(),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use manifest::{Layer, PgTrace, TRACE_SIZE};
    use wire::Link;
    use wire::OwnerDecision;

    const REG: u32 = 0;
    const QP: u32 = 4;

    /// reg_mr: the handler, then the driver's rxe_reg_user_mr -> rxe_mr_init_user -> the
    /// core's ib_umem_get; create_qp: the handler, then rxe_create_qp -> rxe_qp_chk_init and
    /// rxe_qp_from_init.
    fn table() -> ProbeTable {
        ProbeTable::from_triples(&[
            (0, "ib_uverbs_reg_mr", "ib_uverbs"),
            (1, "rxe_reg_user_mr", "rdma_rxe"),
            (2, "rxe_mr_init_user", "rdma_rxe"),
            (3, "ib_umem_get", "ib_uverbs"),
            (4, "ib_uverbs_create_qp", "ib_uverbs"),
            (5, "rxe_create_qp", "rdma_rxe"),
            (6, "rxe_qp_chk_init", "rdma_rxe"),
            (7, "rxe_qp_from_init", "rdma_rxe"),
        ])
        .with_calls(8, &[(0, 1), (1, 2), (2, 3), (4, 5), (5, 6), (5, 7)])
    }

    /// A trace record: `steps` (probe, errno) in return order, as the kernel appends them.
    fn record(handler: u32, err: i32, tid: u32, ts_ns: u64, steps: &[(u32, i32)]) -> Vec<u8> {
        let mut r = PgTrace {
            handler,
            err,
            failed: u32::from(err != 0),
            pid: tid,
            tid,
            start_ns: ts_ns - 1000,
            ts_ns,
            nsteps: steps.len() as u32,
            ..Default::default()
        };
        for (i, &(p, e)) in steps.iter().enumerate() {
            r.step_probe[i] = p;
            r.step_err[i] = e;
            r.step_end_ns[i] = 10 * (i as u32 + 1);
        }
        // SAFETY: PgTrace is repr(C), plain integers and arrays.
        let bytes: [u8; TRACE_SIZE] = unsafe { std::mem::transmute(r) };
        bytes.to_vec()
    }

    fn link(probe: u32, err: u32, tid: u32, ts_ns: u64) -> Link {
        Link {
            probe,
            err,
            pid: tid,
            tid,
            ts_ns,
            comm: [0; 16],
            order: 0,
        }
    }

    fn baseline(t: &ProbeTable) -> Baseline {
        let mut b = Baseline::new(BaselineConfig::default(), [REG, QP].into(), "test".into());
        for i in 0..9u64 {
            b.ingest(t, &record(REG, 0, 1, 10_000 + i, &[(3, 0), (2, 0), (1, 0)]));
        }
        for i in 0..5u64 {
            b.ingest(t, &record(QP, 0, 1, 20_000 + i, &[(6, 0), (7, 0), (5, 0)]));
        }
        b
    }

    /// The note of the chain `links` (innermost first).
    fn note(b: &mut Baseline, t: &ProbeTable, links: &[Link]) -> Bifurcation {
        let decision = OwnerDecision { candidates: vec![] };
        let c = ChainView {
            links,
            table: t,
            count: 1,
            last_end_ns: 0,
            owner: wire::Owner::VerbsCore,
            decision: &decision,
            note: None,
        };
        b.annotate(&c).bifurcation.expect("a bifurcation")
    }

    fn triple(bf: &Bifurcation) -> (&str, Option<&str>, Option<&str>) {
        (
            bf.after.as_str(),
            bf.baseline_next.as_deref(),
            bf.this_next.as_deref(),
        )
    }

    #[test]
    fn unavailable_says_what_the_kernel_lacks() {
        let st = |module: &str, attached: bool, m: wire::Mechanism| wire::AttachStatus {
            probe: 0,
            function: "f".into(),
            module: module.into(),
            attached,
            reason: None,
            mechanism: Some(m),
            symbols: Vec::new(),
        };
        use wire::Mechanism::{Fexit, Kprobe};
        // 5.10: neither task storage nor module BTF
        let five_ten = [
            st("ib_uverbs", true, Kprobe),
            st("ib_core", true, Kprobe),
            st("rdma_rxe", false, Kprobe),
        ];
        let e = unavailable(false, &five_ten);
        assert!(
            e.starts_with("baseline unavailable: this kernel has "),
            "{e}"
        );
        assert!(
            e.contains("no task storage (BPF_MAP_TYPE_TASK_STORAGE, 5.11+)"),
            "{e}"
        );
        // the modules whose probes attached by kprobe, each once, sorted
        assert!(e.contains(" and ib_core, ib_uverbs without BTF, "), "{e}");
        assert!(!e.contains("older probegen.bpf.h"), "{e}");
        // an OFED ib_uverbs without BTF on a kernel with task storage
        let ofed = [st("ib_uverbs", true, Kprobe), st("ib_core", true, Fexit)];
        let e = unavailable(true, &ofed);
        assert!(
            e.contains("has ib_uverbs without BTF") && !e.contains("task storage"),
            "{e}"
        );
        // nothing missing on the kernel's side: the object or the table
        let e = unavailable(true, &[st("ib_uverbs", true, Fexit)]);
        assert!(e.contains("older probegen.bpf.h"), "{e}");
    }

    #[test]
    fn a_baseline_that_traces_no_handler_says_unavailable() {
        let t = table();
        let why = "baseline unavailable: this kernel has no task storage";
        let mut b = Baseline::new(BaselineConfig::default(), BTreeSet::new(), why.into());
        let decision = OwnerDecision { candidates: vec![] };
        let links = [link(3, 14, 9, 50_000), link(REG, 14, 9, 50_001)];
        let c = ChainView {
            links: &links,
            table: &t,
            count: 1,
            last_end_ns: 0,
            owner: wire::Owner::VerbsCore,
            decision: &decision,
            note: None,
        };
        // the chain's outermost probe is a handler, but none is traced here: not "no handler
        // probe in the chain"
        let n = b.annotate(&c);
        assert_eq!(n.bifurcation.unwrap_err(), "baseline unavailable");
        assert!(!n.expected, "{}", n.expected_why);
        let out = b.out(&t);
        assert_eq!(out.mechanism, why);
        assert!(out.handlers.is_empty());
        // no kernel counts read: nothing produced, nothing received, the count holds
        assert_eq!((out.records.produced, out.records.received), (0, 0));
        assert!(out.records.holds);
        // with a handler traced, a chain outside the handlers keeps its own note
        let mut b = baseline(&t);
        let n = b.annotate(&ChainView {
            links: &[link(2, 14, 9, 60_000)],
            ..c
        });
        assert_eq!(n.bifurcation.unwrap_err(), "no handler probe in the chain");
    }

    #[test]
    fn shapes_list_callers_before_callees() {
        let t = table();
        let b = baseline(&t);
        let out = b.out(&t);
        let reg = &out.handlers[0];
        assert_eq!(reg.function, "ib_uverbs_reg_mr");
        assert_eq!(
            reg.shapes[0].functions,
            ["rxe_reg_user_mr", "rxe_mr_init_user", "ib_umem_get"]
        );
        // the exemplar's return times follow the shape's order
        assert_eq!(reg.shapes[0].exemplars[0].step_end_ns, [30, 20, 10]);
        assert_eq!(
            out.handlers[1].shapes[0].functions,
            ["rxe_create_qp", "rxe_qp_chk_init", "rxe_qp_from_init"]
        );
    }

    #[test]
    fn a_call_the_core_rejects_never_reached_the_driver() {
        let t = table();
        let mut b = baseline(&t);
        // ib_uverbs_reg_mr returned EINVAL before calling the driver: no step
        b.ingest(&t, &record(REG, -22, 9, 50_000, &[]));
        let bf = note(&mut b, &t, &[link(REG, 22, 9, 50_000)]);
        assert_eq!(
            triple(&bf),
            ("ib_uverbs_reg_mr", Some("rxe_reg_user_mr"), None)
        );
        assert_eq!(
            (bf.baseline_next_layer, bf.this_next_layer),
            (Some(Layer::Vendor), None)
        );
        assert_eq!((bf.path, bf.common), ("traced", 0));
        // every reg_mr success entered the driver first
        assert!((bf.share - 1.0).abs() < 1e-9, "{}", bf.share);
    }

    #[test]
    fn a_deep_failure_leaves_where_it_was_born() {
        let t = table();
        let mut b = baseline(&t);
        // ib_umem_get failed EFAULT; its callers and the handler returned it
        b.ingest(
            &t,
            &record(REG, -14, 9, 50_000, &[(3, 14), (2, 14), (1, 14)]),
        );
        let links = [
            link(3, 14, 9, 49_000),
            link(2, 14, 9, 49_100),
            link(1, 14, 9, 49_200),
            link(REG, 14, 9, 50_000),
        ];
        let bf = note(&mut b, &t, &links);
        assert_eq!(
            triple(&bf),
            (
                "rxe_mr_init_user",
                Some("ib_umem_get"),
                Some("ib_umem_get [EFAULT]")
            )
        );
        assert_eq!(
            (bf.baseline_next_layer, bf.this_next_layer),
            (Some(Layer::Core), Some(Layer::Core))
        );
        assert_eq!(
            bf.functions,
            [
                "rxe_reg_user_mr",
                "rxe_mr_init_user",
                "ib_umem_get [EFAULT]"
            ]
        );
        assert_eq!(bf.path, "traced");
        // the same chain without its trace: its links, outermost first, say the same
        let bf = note(&mut b, &t, &links);
        assert_eq!(bf.path, "failures");
        assert_eq!(
            triple(&bf),
            (
                "rxe_mr_init_user",
                Some("ib_umem_get"),
                Some("ib_umem_get [EFAULT]")
            )
        );
    }

    #[test]
    fn a_call_the_driver_rejects_names_the_driver_function() {
        let t = table();
        let mut b = baseline(&t);
        b.ingest(&t, &record(QP, -22, 9, 50_000, &[(6, 22), (5, 22)]));
        let links = [
            link(6, 22, 9, 49_000),
            link(5, 22, 9, 49_100),
            link(QP, 22, 9, 50_000),
        ];
        let bf = note(&mut b, &t, &links);
        assert_eq!(
            triple(&bf),
            (
                "rxe_create_qp",
                Some("rxe_qp_chk_init"),
                Some("rxe_qp_chk_init [EINVAL]")
            )
        );
        assert_eq!(bf.baseline_next_layer, Some(Layer::Vendor));
        assert_eq!(bf.common, 1);
    }

    #[test]
    fn a_state_file_of_version_1_is_put_in_call_order() {
        let t = table();
        let dir = std::env::temp_dir().join(format!("pg-order-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("baseline.state");
        // an earlier version's store: shapes keyed in return order. 3 then 1 (1 called 3)
        // and 1 then 3 (siblings) are one shape in call order: 1, 3
        let mut old = store::Store::default();
        let tr = |steps: &[(u32, i32, u32)], dur| Trace {
            handler: REG,
            duration_ns: dur,
            steps: steps.to_vec(),
            ..Trace::default()
        };
        for _ in 0..4 {
            old.add(&tr(&[(3, 0, 5), (2, 0, 6), (1, 0, 7)], 100));
        }
        old.add(&tr(&[(3, 0, 5), (1, 0, 7)], 300));
        old.add(&tr(&[(1, 0, 5), (3, 0, 7)], 2000));
        old.add(&tr(&[(1, 0, 5), (3, 0, 7)], 2000));
        let mut st = persist::State {
            manifest_hash: t.manifest_hash.clone(),
            store: old,
            ..persist::State::default()
        };
        let bytes = persist::encode(&mut st, 1 << 20).expect("fits");
        let text = String::from_utf8(bytes).expect("utf8");
        let v1 = text.replacen("probegen-baseline 2 ", "probegen-baseline 1 ", 1);
        assert_ne!(v1, text);
        std::fs::write(&path, v1).expect("write");
        let mut b = Baseline::new(
            BaselineConfig {
                state: Some(path.clone()),
                ..BaselineConfig::default()
            },
            [REG].into(),
            "test".into(),
        );
        let line = b.restore(&t).expect("a line");
        assert!(
            line.contains("restored 1 handlers, 7 successes")
                && line.contains("its 3 shapes put in call order")
                && line.contains("1 merged"),
            "{line}"
        );
        let out = b.out(&t);
        let shapes = &out.handlers[0].shapes;
        let fns: Vec<Vec<&str>> = shapes
            .iter()
            .map(|s| s.functions.iter().map(String::as_str).collect())
            .collect();
        assert_eq!(
            fns,
            [
                vec!["rxe_reg_user_mr", "rxe_mr_init_user", "ib_umem_get"],
                vec!["rxe_reg_user_mr", "ib_umem_get"],
            ]
        );
        assert_eq!((shapes[0].count, shapes[1].count), (4, 3));
        // merged: the counts, buckets and durations of both
        assert_eq!(shapes[1].duration_log2.iter().sum::<u64>(), 3);
        assert_eq!(shapes[1].p90_ns, 2000);
        assert_eq!(shapes[0].exemplars[0].step_end_ns, [7, 6, 5]);
        // a new success in call order lands on the restored shape
        b.ingest(&t, &record(REG, 0, 1, 90_000, &[(3, 0), (2, 0), (1, 0)]));
        assert_eq!(b.out(&t).handlers[0].shapes[0].count, 5);
        // and the file is written back as version 2
        assert_eq!(b.save(&t, true), None);
        let back = std::fs::read(&path).expect("written");
        assert!(back.starts_with(b"probegen-baseline 2 sha256="));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
