//! The [`Sink`] trait: what every destination of snapshots implements.

use std::time::Duration;

pub use crate::error::SinkError;
use crate::wire::{SinkStatus, Snapshot};

/// One destination of snapshots.
pub trait Sink {
    /// How the sink is named in an error line (`clickhouse`, `sink FILE`).
    fn name(&self) -> &str;

    /// Writes (or queues) `snap`. A sink whose state the snapshot carries (a spool) returns
    /// it: `Ok(Some(status))` after `snap` was queued.
    fn write(&mut self, snap: &Snapshot) -> Result<Option<SinkStatus>, SinkError>;

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
