//! The [`Sink`] trait: what every destination of snapshots implements.

use std::sync::Arc;
use std::time::Duration;

pub use crate::error::SinkError;
use wire::{AttachStatus, ProbeTable, SharedPart, SinkStatus, Snapshot};

/// One destination of snapshots. The run knows a sink only through this trait: what the
/// sink has to show (sent, lost, a spool's size) it says in a [`SinkStatus`], which the
/// snapshot's line and the exposition carry under its name, so a new sink is added by the
/// embedder ([`crate::Hooks::sinks`]) without a change here.
pub trait Sink {
    /// How the sink is named in an error line, in the snapshot's line and as the exposition's
    /// `sink` label (`clickhouse`, `sink FILE`); not one of [`crate::SNAPSHOT_KEYS`].
    fn name(&self) -> &str;

    /// Writes (or queues) `snap`. A sink that has a state to show returns it:
    /// `Ok(Some(status))` after `snap` was queued.
    fn write(&mut self, snap: &Snapshot) -> Result<Option<SinkStatus>, SinkError>;

    /// Before the first snapshot (live, once attached): the probes and their attach status,
    /// and the state of the sinks that have one (an exposition shows them at once).
    fn start(
        &mut self,
        _table: &Arc<ProbeTable>,
        _attached: &SharedPart<Vec<AttachStatus>>,
        _sinks: &[SinkStatus],
    ) {
    }

    /// An exposition: it shows the snapshot's run totals, so it is written after the other
    /// sinks (the totals then count their errors), and a replay keeps serving it `--linger`.
    fn exposes(&self) -> bool {
        false
    }

    /// The sink's state now (`None`: a sink that has none to show).
    fn status(&self) -> Option<SinkStatus> {
        None
    }

    /// At the end of the run: finish what is queued within `flush`; the final state (with
    /// what only the end knows, a spool's peak, among its metrics).
    fn finish(&mut self, _flush: Duration) -> Option<SinkStatus> {
        None
    }
}
