//! The stages of a live run beside the BPF source: each window, a stage adds its part to the
//! snapshot before the sinks see it. The embedder adds them through [`crate::Hooks::stages`]
//! (the agent: the port counters, `stage-ports`; the provider uprobes, `stage-providers`), so
//! a new stage is a crate of its own and the collector does not grow.

use wire::{QpPeer, Snapshot};

/// A QP's peer as the kernel kept it at the QP's last RTR (the control path's peer probe),
/// looked up by QP number and owner process; `at_ns` (the records' clock) dates the answer's
/// `since_rtr_ns`.
pub trait PeerLookup {
    fn peer(&self, qpn: u32, pid: u32, at_ns: u64) -> Option<QpPeer>;
}

/// No peers (replay, a set without a peer probe).
impl PeerLookup for () {
    fn peer(&self, _qpn: u32, _pid: u32, _at_ns: u64) -> Option<QpPeer> {
        None
    }
}

/// One stage of a live run.
pub trait Stage {
    /// Adds this window's part to `s` (the final snapshot too): a part that changed makes the
    /// window not idle. Returns what the operator should read, one line each, opening with
    /// the stage's name (the run hands them to the embedder as warnings).
    fn window(&mut self, s: &mut Snapshot, peers: &dyn PeerLookup) -> Vec<String>;
}
