//! One trace record (`struct pg_trace`) decoded, and its steps as the alignment sees them.

use manifest::{PgTrace, TRACE_SIZE, TRACE_STEPS};
use serde::{Deserialize, Serialize};

/// One decoded trace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Trace {
    pub handler: u32,
    pub failed: bool,
    pub err: u32,
    pub pid: u32,
    pub tid: u32,
    pub cgroup_id: u64,
    pub ts_ns: u64,
    pub duration_ns: u64,
    /// (probe id, errno or -1 or 0, return ns after the entry), in return order
    pub steps: Vec<(u32, i32, u32)>,
    pub lost: u32,
    pub comm: [u8; 16],
}

impl Trace {
    /// A trace record's bytes, or `None` when they are not one.
    pub(crate) fn decode(sample: &[u8]) -> Option<Self> {
        let raw = sample.get(..TRACE_SIZE)?;
        // SAFETY: PgTrace is repr(C) of integers and byte arrays, TRACE_SIZE bytes, any bit
        // pattern valid; read unaligned from a slice that long.
        let r: PgTrace = unsafe { std::ptr::read_unaligned(raw.as_ptr().cast()) };
        let n = (r.nsteps as usize).min(TRACE_STEPS);
        Some(Trace {
            handler: r.handler,
            failed: r.failed != 0,
            err: r.err.unsigned_abs(),
            pid: r.pid,
            tid: r.tid,
            cgroup_id: r.cgroup_id,
            ts_ns: r.ts_ns,
            duration_ns: r.ts_ns.saturating_sub(r.start_ns),
            steps: (0..n)
                .map(|i| (r.step_probe[i], r.step_err[i], r.step_end_ns[i]))
                .collect(),
            lost: r.lost,
            comm: r.comm,
        })
    }

    /// Its steps as tokens (probe id and outcome, see [`token`]).
    pub(crate) fn path(&self) -> Vec<u32> {
        self.steps.iter().map(|s| token(s.0, s.1)).collect()
    }
}

/// A step as the alignment sees it: the probe id and how it returned (the errno, 4095 for a
/// failure without one, 0 for success), so a call that went through the same functions as the
/// successes but had one of them fail leaves their path at that function.
pub(crate) fn token(probe: u32, err: i32) -> u32 {
    let e = if err < 0 {
        0xfff
    } else {
        (err as u32).min(0xfff)
    };
    (probe << 12) | e
}
