//! The [`Sink`] trait: what every destination of snapshots implements.

use std::sync::Arc;
use std::time::Duration;

pub use crate::error::SinkError;
use wire::{AttachStatus, ProbeTable, SharedPart, SinkStatus, Snapshot};

/// One destination of snapshots.
pub trait Sink {
    /// How the sink is named in an error line (`clickhouse`, `sink FILE`).
    fn name(&self) -> &str;

    /// Writes (or queues) `snap`. A sink whose state the snapshot carries (a spool) returns
    /// it: `Ok(Some(status))` after `snap` was queued.
    fn write(&mut self, snap: &Snapshot) -> Result<Option<SinkStatus>, SinkError>;

    /// Before the first snapshot (live, once attached): the probes and their attach status,
    /// and the state of the sinks the snapshot carries (an exposition shows them at once).
    fn start(
        &mut self,
        _table: &Arc<ProbeTable>,
        _attached: &SharedPart<Vec<AttachStatus>>,
        _fleet: Option<SinkStatus>,
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

    /// At the end of the run: finish what is queued within `flush`; the final state.
    fn finish(&mut self, _flush: Duration) -> Option<SinkReport> {
        None
    }
}

/// A sink's state at the end of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SinkReport {
    pub status: SinkStatus,
    /// the spool's largest size this run: (bytes, batches)
    pub peak: (u64, usize),
}
