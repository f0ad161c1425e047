//! The run's sinks in their order: the sinks the embedder adds (a spool first: their statuses
//! go into the snapshot's line), the JSONL file, then the expositions (they show the counts
//! after this snapshot). The loop counts the sinks' errors here.

use std::time::Duration;

use super::hooks::{Event, Hooks};
use wire::{SinkStatus, Snapshot};

use crate::sinks::jsonl::JsonlSink;
use crate::sinks::Sink;
use crate::warning::Warning;

/// Chains logged on stderr per snapshot (all of them are in the snapshot).
pub const MAX_CHAIN_LINES: usize = 32;

pub(crate) struct Outputs {
    pub(crate) fleet: Vec<Box<dyn Sink>>,
    pub(crate) jsonl: JsonlSink,
    /// sinks that show the run totals (`Sink::exposes`), written last
    pub(crate) expositions: Vec<Box<dyn Sink>>,
    /// snapshots written (or attempted) so far
    pub(crate) snapshots: u64,
    /// sink errors so far
    pub(crate) errors: u64,
}

impl Outputs {
    /// The state of the sinks that have one, in their order.
    pub(crate) fn statuses(&self) -> Vec<SinkStatus> {
        self.fleet
            .iter()
            .filter_map(|s| named(&**s, s.status()))
            .collect()
    }

    /// Writes `snap` to every sink in order; an error is counted and reported, never fatal.
    pub(crate) fn emit(&mut self, snap: &mut Snapshot, hooks: &mut dyn Hooks) {
        for c in snap.chains.iter().take(MAX_CHAIN_LINES) {
            hooks.event(Event::Chain(c));
        }
        if snap.chains.len() > MAX_CHAIN_LINES {
            hooks.event(Event::MoreChains {
                more: snap.chains.len() - MAX_CHAIN_LINES,
                snapshot: snap.snapshot,
            });
        }
        snap.errors.sink = self.errors;
        let mut carried = Vec::new();
        for i in 0..self.fleet.len() {
            // spooled (durable) before the JSONL line: its status names this snapshot's batch
            let status = match self.fleet[i].write(snap) {
                Ok(st) => st,
                Err(error) => {
                    self.errors += 1;
                    Self::failed(&*self.fleet[i], snap, &error, self.errors, hooks);
                    self.fleet[i].status()
                }
            };
            carried.extend(named(&*self.fleet[i], status));
        }
        snap.sinks = carried;
        crate::timings::mark("log+clickhouse");
        if crate::stop::take_reopen() {
            self.jsonl.file.reopen();
        }
        if let Err(error) = self.jsonl.write(snap) {
            self.errors += 1;
            Self::failed(&self.jsonl, snap, &error, self.errors, hooks);
        }
        if let (Some(offset), Some(path)) = (self.jsonl.file.take_fenced(), self.jsonl.file.path())
        {
            let path = path.to_path_buf();
            hooks.event(Event::Warning(&Warning::OutputFenced { path, offset }));
        }
        crate::timings::mark("sink");
        self.snapshots += 1;
        snap.totals.sink_errors = self.errors;
        snap.totals.snapshots = self.snapshots;
        snap.totals.sinks = self.statuses();
        for i in 0..self.expositions.len() {
            if let Err(error) = self.expositions[i].write(snap) {
                self.errors += 1;
                Self::failed(&*self.expositions[i], snap, &error, self.errors, hooks);
            }
        }
        crate::timings::mark("metrics");
    }

    fn failed(
        sink: &dyn Sink,
        snap: &Snapshot,
        error: &crate::sinks::SinkError,
        errors: u64,
        hooks: &mut dyn Hooks,
    ) {
        hooks.event(Event::SinkFailed {
            sink: sink.name(),
            snapshot: snap.snapshot,
            error,
            errors,
        });
    }

    /// Ends the sinks that queue (within `flush`); the final states of those that have one.
    pub(crate) fn finish(&mut self, flush: Duration) -> Vec<SinkStatus> {
        let mut done = Vec::new();
        for s in &mut self.fleet {
            let status = s.finish(flush);
            done.extend(named(&**s, status));
        }
        done
    }
}

/// `status` under its sink's name (the line's key and the label are the name the run knows).
fn named(sink: &dyn Sink, status: Option<SinkStatus>) -> Option<SinkStatus> {
    status.map(|mut st| {
        if st.sink != sink.name() {
            st.sink = sink.name().to_string();
        }
        st
    })
}
