//! The baseline as a snapshot carries it (`baseline` in the line, with `collect --baseline`)
//! and the note each chain gets from it (`bifurcation`, `expected`, `expected_why`). Built by
//! the `baseline` crate; plain values with owned names, so a sink reads
//! them without the probe table.

use serde::Serialize;

/// Buckets of a shape's `duration_log2` at most: bucket `i` holds durations in
/// [2^i, 2^(i+1)) ns, bucket 0 also 0 ns, the last one everything from 2^39 ns (9 minutes) up.
pub const LOG2_BUCKETS: usize = 40;

/// The `baseline` member of a snapshot.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct BaselineOut {
    /// how the calls are traced in this kernel (`fentry+fexit, task storage`), or why not
    pub mechanism: String,
    /// one call in `sample` of each handler is traced
    pub sample: u32,
    /// traces per handler per interval at most (0: no bound)
    pub budget: u32,
    /// a success slower than this is not kept
    pub max_ns: u64,
    /// the trace records, counted as the failure records are
    pub records: TraceCounts,
    /// per handler with traces: its success shapes
    pub handlers: Vec<HandlerOut>,
    /// per (handler, origin, errno) failure pattern seen: whether it is expected, and why
    pub expected: Vec<ExpectedOut>,
    /// per job (cgroup): which handler each verb's traced calls went through
    pub jobs: Vec<JobMixOut>,
    /// traced calls of jobs past the bound on jobs
    pub jobs_other: u64,
}

/// One job's handler mix.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct JobMixOut {
    pub cgroup_id: u64,
    /// the first traced caller's command
    pub comm: String,
    pub verbs: Vec<VerbMixOut>,
    /// verbs whose main handler here is no other job's (at least two others used the verb)
    pub differs: Vec<String>,
}

/// A verb's traced calls in one job, per handler.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct VerbMixOut {
    pub verb: String,
    pub handlers: std::collections::BTreeMap<String, u64>,
}

/// The trace records since the run started: `received + dropped == produced` holds at every
/// fenced read (`holds`), `in_flight` traces were half counted when it was read.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct TraceCounts {
    pub produced: u64,
    pub received: u64,
    pub dropped: u64,
    /// sampled calls the per-handler budget refused
    pub budget_skipped: u64,
    /// successes slower than `max_ns` (not kept)
    pub slow: u64,
    /// traces that did not decode
    pub decode_errors: u64,
    pub in_flight: u64,
    pub holds: bool,
}

/// One handler's baseline.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct HandlerOut {
    pub probe: u32,
    pub function: String,
    /// successful traced calls
    pub successes: u64,
    /// successes whose shape was not kept (past the bound on shapes)
    pub other: u64,
    /// probe functions whose presence differs between success shapes (left out of alignment)
    pub noise: Vec<String>,
    pub shapes: Vec<ShapeOut>,
}

/// One distinct success path: the probed functions the call entered, in call order (a caller
/// before its callees; the handler itself is not listed: it comes first).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ShapeOut {
    /// a hash of the probe ids (what a chain's `bifurcation.shape` names)
    pub shape: String,
    pub functions: Vec<String>,
    pub count: u64,
    /// of the handler's successes
    pub share: f64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    /// every success's duration since the run (or its state file) started, in log2 buckets:
    /// element `i` counts durations in [2^i, 2^(i+1)) ns (0 ns in the first, everything from
    /// 2^39 ns in the 40th and last); trailing empty buckets left out. Counts add up across
    /// hosts, so a fleet's quantiles come from the sum.
    pub duration_log2: Vec<u64>,
    pub exemplars: Vec<ExemplarOut>,
}

/// One traced success, as it ran.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ExemplarOut {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub cgroup_id: u64,
    pub duration_ns: u64,
    /// each step's return, ns after the handler's entry (the steps in the shape's order)
    pub step_end_ns: Vec<u32>,
}

/// A failure pattern and whether it is normal.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ExpectedOut {
    pub handler: String,
    pub origin: String,
    pub errno_name: String,
    /// processes it failed in / of those, processes that went on to succeed with the handler
    pub processes: u64,
    pub recovered: u64,
    /// Liblit's Increase: P(never succeeded | this failure) - P(never succeeded | the handler)
    pub increase: f64,
    pub expected: bool,
    pub why: String,
}

/// Where a failing call left the success path, both in call order: the functions entered, a
/// failing one marked (`f [EFAULT]`) where its failure was born (no callee of it failed).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Bifurcation {
    /// the last function the call entered as the shape did, after the same ones (the handler
    /// when none)
    pub after: String,
    /// the function the shape entered next (null: the shape ended there)
    pub baseline_next: Option<String>,
    /// its layer: `core` (the verbs core) or `vendor` (the driver); null with no next
    pub baseline_next_layer: Option<manifest::Layer>,
    /// of the handler's traced successes, those that entered `baseline_next` right after the
    /// same steps
    pub share: f64,
    /// the function this call entered instead, or the same one failing where the shape's
    /// succeeded (null: it entered nothing more)
    pub this_next: Option<String>,
    /// its layer, as `baseline_next_layer`
    pub this_next_layer: Option<manifest::Layer>,
    /// the success shape compared with (its `shape` in the snapshot's baseline)
    pub shape: String,
    /// `traced` (the call's own trace) or `failures` (only the chain's failing functions)
    pub path: &'static str,
    /// the call's path (call order) and how many of its steps the shape shares (LCS)
    pub functions: Vec<String>,
    pub common: usize,
}

/// What the baseline says about one chain.
#[derive(Debug, Clone, PartialEq)]
pub struct ChainNote {
    /// `Err`: why there is none (`no baseline yet`, no handler in the chain)
    pub bifurcation: Result<Bifurcation, &'static str>,
    pub expected: bool,
    pub expected_why: String,
}

/// What a baseline state file holds (`probegen-agent baseline show`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StateView {
    pub manifest_hash: String,
    /// a file of an earlier version (1): its shapes are in return order (the collector puts
    /// them in call order with its manifest's call graph when it loads the file)
    pub return_order: bool,
    pub handlers: Vec<HandlerSummary>,
    /// the learned table with the pins given applied
    pub expected: Vec<ExpectedOut>,
}

/// One handler's baseline in a state file.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct HandlerSummary {
    pub function: String,
    pub successes: u64,
    pub shapes: usize,
    pub other: u64,
}
