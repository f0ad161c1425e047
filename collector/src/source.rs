//! Where records and counters come from: the live ring buffer ([`live::LiveSource`]) or a
//! replay file ([`replay::ReplaySource`]). [`crate::run`] drives either through one loop: ask
//! the source for the next [`Step`], write a snapshot when a window closes, and at the end
//! take the final counters from it.

use std::sync::Arc;
use std::time::Duration;

use wire::KernelTotals;

use crate::error::CollectError;
use crate::pipeline::Pipeline;
use crate::warning::Warning;

/// What the loop does after one call of [`Source::next`].
#[derive(Debug)]
pub(crate) enum Step {
    /// Records (if any) went into the pipeline; no window closes.
    Continue,
    /// A window closes with these cumulative kernel counters (shared: an idle live source
    /// hands on the last window's as they are).
    Window(Arc<KernelTotals>),
    /// The input ended (end of the replay file, `--duration` reached).
    End,
}

pub(crate) trait Source {
    /// Feeds what is available into `pipe` and says whether a window closes. An error ends
    /// the run after its final snapshot.
    fn next(&mut self, pipe: &mut Pipeline) -> Result<Step, CollectError>;

    /// After a window's snapshot was written (replay: `--replay-pace`).
    fn window_written(&mut self) {}

    /// The final counters. Live: detach, drain what is left and read them, so the accounting
    /// of the final snapshot is exact.
    fn finish(&mut self, pipe: &mut Pipeline) -> Arc<KernelTotals>;

    /// After the final snapshot: the source's own accounting on stderr.
    /// Adds the run's closing figures to the warnings (live: the sequence accounting).
    fn report(&mut self, _pipe: &Pipeline, _k: &KernelTotals) {}

    /// What went wrong since the last call, for the run to hand to its hooks (the library
    /// prints nothing).
    fn take_warnings(&mut self) -> Vec<Warning> {
        Vec::new()
    }

    /// What the agent has cost so far (live: CPU, memory, the programs' run time).
    fn cost(&mut self) -> Option<wire::AgentCost> {
        None
    }

    /// The QPs' peers as the kernel keeps them, for the run's stages (live: the set's
    /// `qp_peers` map).
    fn peers(&self) -> &dyn crate::stage::PeerLookup {
        &()
    }

    /// Keep serving metrics this long after the input ended (replay `--linger`).
    fn linger(&self) -> Option<Duration> {
        None
    }
}
