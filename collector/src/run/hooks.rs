//! What the embedder of a run provides ([`Hooks`]: extra sinks, what to do with events) and
//! the [`Event`]s a run reports instead of printing them.

use wire::{ChainClock, ChainView, Invariant};

use crate::error::CollectError;
use crate::sinks::{Sink, SinkError};
use crate::stage::Stage;
use crate::warning::Warning;

/// What the embedder of a run provides: the sinks besides JSONL (ClickHouse, Prometheus), and what to
/// do with the run's events (the command prints them on stderr).
pub trait Hooks {
    /// The sinks to add, opened once the run knows the records' clock (live: this host's
    /// monotonic clock; replay: the newest record's).
    fn sinks(&mut self, _clock: ChainClock) -> Result<Vec<Box<dyn Sink>>, CollectError> {
        Ok(Vec::new())
    }

    /// The stages that add their part to each snapshot (the agent's: the port counters, the
    /// provider uprobes, live only), opened once the probe set is loaded and the sinks are.
    fn stages(&mut self) -> Result<Vec<Box<dyn Stage>>, CollectError> {
        Ok(Vec::new())
    }

    /// Something the operator may want to see.
    fn event(&mut self, _event: Event<'_>) {}
}

/// No extra sink, no output (tests, benchmarks).
impl Hooks for () {}

/// What happened during a run, for the embedder to show.
#[derive(Debug)]
pub enum Event<'a> {
    /// Live: the programs that attached, of the manifest's probes (and per layer), and how
    /// long it took.
    Attached {
        attached: usize,
        probes: usize,
        by_layer: wire::AttachedByLayer,
        millis: f64,
    },
    /// A failure chain of a snapshot (at most [`super::outputs::MAX_CHAIN_LINES`] per snapshot).
    Chain(ChainView<'a>),
    /// The chains of a snapshot past the first [`super::outputs::MAX_CHAIN_LINES`].
    MoreChains { more: usize, snapshot: u64 },
    /// A sink did not take a snapshot (`errors`: sink errors so far).
    SinkFailed {
        sink: &'a str,
        snapshot: u64,
        error: &'a SinkError,
        errors: u64,
    },
    /// The final snapshot's accounting does not add up.
    InvariantViolated(&'a Invariant),
    /// Something went wrong that the run goes on from (a probe not attached, a map not read).
    Warning(&'a Warning),
}
