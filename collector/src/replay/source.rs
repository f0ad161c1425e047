//! A replay file as a source: its records go through the pipeline as they were recorded; a
//! `counters` line closes a window, and without any, every `--replay-window` records do (with
//! counters derived from the records).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::file::{is_raw_name, Event, Reader};
use wire::KernelTotals;

use crate::error::CollectError;
use crate::pipeline::Pipeline;
use crate::procinfo::ProcCache;
use crate::source::{Source, Step};
use crate::warning::Warning;

pub(crate) struct ReplaySource {
    path: PathBuf,
    reader: Reader<File>,
    /// the host the snapshots name (else the recording's)
    host: Option<String>,
    manifest_hash: String,
    /// records per window without counters (0: one window)
    window: usize,
    pace: Option<Duration>,
    linger: Option<Duration>,
    since_window: usize,
    /// the last `counters` line (none: counters are derived from the records)
    last: Option<KernelTotals>,
    /// what the run has not yet reported
    warnings: Vec<Warning>,
    procs: ProcCache,
}

/// How a replay is played out.
pub(crate) struct ReplayOptions {
    pub host: Option<String>,
    pub window: usize,
    pub pace: Option<Duration>,
    pub linger: Option<Duration>,
    /// the processes of the records (`--proc-root`: a recorded job's; disabled by default)
    pub procs: ProcCache,
}

impl ReplaySource {
    pub(crate) fn open(
        path: &Path,
        manifest_hash: String,
        o: ReplayOptions,
    ) -> Result<Self, CollectError> {
        let input = File::open(path).map_err(|source| CollectError::File {
            what: None,
            path: path.to_path_buf(),
            source,
        })?;
        Ok(ReplaySource {
            path: path.to_path_buf(),
            reader: Reader::new(input, is_raw_name(path)),
            host: o.host,
            manifest_hash,
            window: o.window,
            pace: o.pace,
            linger: o.linger,
            procs: o.procs,
            since_window: 0,
            last: None,
            warnings: Vec::new(),
        })
    }
}

impl Source for ReplaySource {
    fn next(&mut self, pipe: &mut Pipeline) -> Result<Step, CollectError> {
        let event = self
            .reader
            .next_event()
            .map_err(|source| CollectError::Replay {
                path: self.path.clone(),
                source,
            })?;
        Ok(match event {
            None => Step::End,
            Some(Event::Header(h)) => {
                pipe.set_origin(self.host.as_deref().unwrap_or(&h.host), &h.kernel);
                if !h.manifest_hash.is_empty() && h.manifest_hash != self.manifest_hash {
                    self.warnings.push(Warning::ReplayManifest {
                        recorded: h.manifest_hash.clone(),
                        replayed: self.manifest_hash.clone(),
                    });
                }
                Step::Continue
            }
            Some(Event::Record(b)) => {
                let procs = &mut self.procs;
                pipe.ingest_with(b, |r| procs.lookup(r.pid, &r.comm, r.cgroup_id));
                self.since_window += 1;
                if self.last.is_none() && self.window > 0 && self.since_window >= self.window {
                    self.since_window = 0;
                    Step::Window(Arc::new(pipe.derived()))
                } else {
                    Step::Continue
                }
            }
            Some(Event::Counters(k)) => {
                self.last = Some(k.clone());
                self.since_window = 0;
                Step::Window(Arc::new(k))
            }
        })
    }

    fn window_written(&mut self) {
        sleep_unless_stopped(self.pace, Duration::from_millis(20));
    }

    fn finish(&mut self, pipe: &mut Pipeline) -> Arc<KernelTotals> {
        Arc::new(self.last.clone().unwrap_or_else(|| pipe.derived()))
    }

    fn take_warnings(&mut self) -> Vec<Warning> {
        std::mem::take(&mut self.warnings)
    }

    fn linger(&self) -> Option<Duration> {
        self.linger
    }
}

/// Sleeps `d` in steps of at most `step`, so a signal ends it at once.
pub(crate) fn sleep_unless_stopped(d: Option<Duration>, step: Duration) {
    let Some(d) = d else { return };
    let until = Instant::now() + d;
    while Instant::now() < until && !crate::stop::stop_requested() {
        std::thread::sleep(until.saturating_duration_since(Instant::now()).min(step));
    }
}
