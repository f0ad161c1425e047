//! One trace record (`struct pg_trace`) decoded, its steps put in call order, and its steps as
//! the alignment sees them.
//!
//! The kernel appends a step when a probed function returns (its fexit): the record lists them
//! in return order, callees before their callers. Only the handler has an entry program (its
//! fentry or fsession), so the order in which the inner functions were entered is recovered
//! from their exits and the manifest's call graph ([`nest`]): a function that returns adopts
//! as its callees the functions that returned just before it and that it calls (directly or
//! through unprobed functions); siblings keep their return order, which is their call order.
//! Where the exits alone do not tell nesting from a sibling called first (`A` returned, then
//! `B`, and `B` calls `A`), nesting wins: the same rule on every host of one manifest, so
//! shapes still add up across the fleet.

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
    /// (probe id, errno or -1 or 0, return ns after the entry): in return order as decoded,
    /// in call order (outermost first) after [`Trace::into_call_order`]
    pub steps: Vec<(u32, i32, u32)>,
    /// each step's nesting depth below the handler (0: called by the handler itself), set by
    /// [`Trace::into_call_order`]; empty in return order (and in a state file of version 1)
    #[serde(default)]
    pub depth: Vec<u8>,
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
            depth: Vec::new(),
        })
    }

    /// The same trace with its steps in call order (`calls(a, b)`: probe `a` calls probe `b`,
    /// the manifest's call graph) and their depths.
    pub(crate) fn into_call_order(mut self, calls: &dyn Fn(u32, u32) -> bool) -> Self {
        let probes: Vec<u32> = self.steps.iter().map(|s| s.0).collect();
        let (order, depth) = nest(&probes, calls);
        self.steps = order.iter().map(|&i| self.steps[i]).collect();
        self.depth = depth;
        self
    }

    /// Its steps as tokens (probe id and outcome, see [`token`]), in call order: a failing
    /// step is marked only where the failure was born, i.e. none of its callees failed (a
    /// caller that returns its callee's error fails because of it: marking it would end the
    /// shared prefix at the outermost function instead of where the call went wrong).
    pub(crate) fn path(&self) -> Vec<u32> {
        let n = self.steps.len();
        (0..n)
            .map(|i| {
                let (probe, err, _) = self.steps[i];
                let d = self.depth.get(i).copied().unwrap_or(0);
                let inner_failed = self.steps[i + 1..]
                    .iter()
                    .zip(self.depth.get(i + 1..).unwrap_or(&[]))
                    .take_while(|(_, &dd)| dd > d)
                    .any(|(s, _)| s.1 != 0);
                token(probe, if inner_failed { 0 } else { err })
            })
            .collect()
    }
}

/// The call order of steps given in return order (`probes`, each step's probe id): the
/// permutation (indices into `probes`, outermost first, a caller before its callees) and each
/// step's depth in that order. See the module doc for the rule.
pub(crate) fn nest(probes: &[u32], calls: &dyn Fn(u32, u32) -> bool) -> (Vec<usize>, Vec<u8>) {
    let n = probes.len();
    // callees of each step (earlier indices: they returned first), in return order
    let mut callees: Vec<Vec<usize>> = vec![Vec::new(); n];
    // steps that have not been adopted by a caller yet, in return order
    let mut open: Vec<usize> = Vec::with_capacity(n);
    for (i, &p) in probes.iter().enumerate() {
        let mut adopted = Vec::new();
        while let Some(&top) = open.last() {
            if !calls(p, probes[top]) {
                break;
            }
            adopted.push(top);
            open.pop();
        }
        adopted.reverse();
        callees[i] = adopted;
        open.push(i);
    }
    let mut order = Vec::with_capacity(n);
    let mut depth = Vec::with_capacity(n);
    // preorder, siblings in return order (= call order)
    let mut stack: Vec<(usize, u8)> = open.iter().rev().map(|&i| (i, 0)).collect();
    while let Some((i, d)) = stack.pop() {
        order.push(i);
        depth.push(d);
        stack.extend(callees[i].iter().rev().map(|&c| (c, d.saturating_add(1))));
    }
    (order, depth)
}

/// A token's outcome as a step's errno (0, -1 for a failure without one, the errno).
pub(crate) fn untoken(t: u32) -> i32 {
    match t & 0xfff {
        0xfff => -1,
        e => e as i32,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The rxe reg_mr of issue 36: the handler (0) calls rxe_reg_user_mr (1), which calls
    /// rxe_mr_init_user (2), which calls ib_umem_get (3); and a sibling 4 of 1 that calls 3.
    fn calls(a: u32, b: u32) -> bool {
        matches!((a, b), (0, 1..=4) | (1, 2 | 3) | (2, 3) | (4, 3))
    }

    fn trace(steps: &[(u32, i32)]) -> Trace {
        Trace {
            steps: steps
                .iter()
                .enumerate()
                .map(|(i, &(p, e))| (p, e, 100 * (i as u32 + 1)))
                .collect(),
            ..Trace::default()
        }
    }

    fn probes(t: &Trace) -> Vec<u32> {
        t.steps.iter().map(|s| s.0).collect()
    }

    #[test]
    fn exits_innermost_first_become_callers_first() {
        // returned ib_umem_get, rxe_mr_init_user, rxe_reg_user_mr: entered the other way
        let t = trace(&[(3, 0), (2, 0), (1, 0)]).into_call_order(&calls);
        assert_eq!(probes(&t), [1, 2, 3]);
        assert_eq!(t.depth, [0, 1, 2]);
        // each step keeps its own return time
        assert_eq!(
            t.steps.iter().map(|s| s.2).collect::<Vec<_>>(),
            [300, 200, 100]
        );
        // siblings keep their order, each with its own callees: 1(2(3)) then 4(3)
        let t = trace(&[(3, 0), (2, 0), (1, 0), (3, 0), (4, 0)]).into_call_order(&calls);
        assert_eq!(probes(&t), [1, 2, 3, 4, 3]);
        assert_eq!(t.depth, [0, 1, 2, 0, 1]);
        // a function that returned before its caller was entered is no callee of that caller
        // unless the call graph says so: 3 then 4 -> 4(3) (nesting wins, the same on every
        // host); 4 then 1 -> siblings (1 does not call 4)
        assert_eq!(
            probes(&trace(&[(3, 0), (4, 0)]).into_call_order(&calls)),
            [4, 3]
        );
        assert_eq!(
            probes(&trace(&[(4, 0), (1, 0)]).into_call_order(&calls)),
            [4, 1]
        );
        // a run of callees is adopted only while each is a callee: 2 (callee of 1), then 4
        // (not), then 1: 1 cannot have called 2 without 4 inside it too, so all siblings
        assert_eq!(
            probes(&trace(&[(2, 0), (4, 0), (1, 0)]).into_call_order(&calls)),
            [2, 4, 1]
        );
        // no call graph (a manifest without `calls`): return order stays
        let flat = trace(&[(3, 0), (2, 0), (1, 0)]).into_call_order(&|_, _| false);
        assert_eq!((probes(&flat), flat.depth), (vec![3, 2, 1], vec![0, 0, 0]));
        assert!(trace(&[]).into_call_order(&calls).steps.is_empty());
    }

    #[test]
    fn a_failure_is_marked_where_it_was_born() {
        // ib_umem_get failed EFAULT and its callers returned it
        let t = trace(&[(3, 14), (2, 14), (1, 14)]).into_call_order(&calls);
        assert_eq!(t.path(), [token(1, 0), token(2, 0), token(3, 14)]);
        // a caller that failed on its own after a callee succeeded is marked
        let t = trace(&[(3, 0), (2, -1), (1, 22)]).into_call_order(&calls);
        assert_eq!(t.path(), [token(1, 0), token(2, -1), token(3, 0)]);
        // a sibling's failure is not a callee's: both marked
        let t = trace(&[(3, 12), (4, 12), (2, 22)]).into_call_order(&calls);
        assert_eq!(probes(&t), [4, 3, 2]);
        assert_eq!(t.path(), [token(4, 0), token(3, 12), token(2, 22)]);
        // in return order (no depths: a state file of version 1) every failure is marked
        let t = trace(&[(3, 14), (2, 14)]);
        assert_eq!(t.path(), [token(3, 14), token(2, 14)]);
        assert_eq!(untoken(token(3, 14)), 14);
        assert_eq!(untoken(token(3, -1)), -1);
        assert_eq!(untoken(token(3, 0)), 0);
    }

    #[test]
    fn a_record_decodes_in_return_order_and_reorders() {
        let mut r = PgTrace {
            handler: 0,
            start_ns: 1000,
            ts_ns: 5000,
            nsteps: 3,
            ..Default::default()
        };
        for (i, (p, e)) in [(3, 0), (2, 0), (1, 0)].into_iter().enumerate() {
            r.step_probe[i] = p;
            r.step_err[i] = e;
            r.step_end_ns[i] = 10 * (i as u32 + 1);
        }
        // SAFETY: PgTrace is repr(C), plain integers and arrays.
        let bytes: [u8; TRACE_SIZE] = unsafe { std::mem::transmute(r) };
        let t = Trace::decode(&bytes).expect("decodes");
        assert_eq!((probes(&t), t.duration_ns), (vec![3, 2, 1], 4000));
        let t = t.into_call_order(&calls);
        assert_eq!(t.steps, [(1, 0, 30), (2, 0, 20), (3, 0, 10)]);
        assert!(Trace::decode(&bytes[..100]).is_none());
    }
}
