//! The live ring buffer as a source: drain continuously, read the kernel's counters every
//! `--interval` (a window), and at the end detach, drain and read them once more.
//!
//! Below the wake-up threshold a record wakes the collector only when it is the first one
//! pending (see `probegen.bpf.h`). So while records keep coming the source sleeps `--drain`
//! without polling (a poll would end at every first record, a wake-up per record) and then
//! consumes; idle, it sleeps in the poll until the next window, the deadline or `--idle-wait`,
//! whichever comes first, and the first record ends the sleep at once: an idle collector wakes
//! once per window, not every `--idle-wait`.

use std::cell::RefCell;
use std::fs::File;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use libbpf_rs::{MapCore, RingBuffer, RingBufferBuilder};

use super::{Source, Step};
use crate::error::CollectError;
use crate::kernel_state::KernelTotals;
use crate::live::Loaded;
use crate::pipeline::Pipeline;
use crate::probes::ProbeTable;
use crate::replay::{Header, Recorder};

/// Ring-buffer samples taken by the consume callback, handed to the pipeline after it.
#[derive(Default)]
struct Samples {
    bytes: Vec<u8>,
    /// end offset of each sample in `bytes`
    ends: Vec<usize>,
}

/// When the loop wakes and when it stops.
pub struct Timing {
    pub interval: Duration,
    pub drain: Duration,
    pub idle_wait: Duration,
    pub duration: Option<Duration>,
}

pub struct LiveSource {
    // dropped before `loaded`: the ring buffer maps the object's `events` map
    ring: RingBuffer<'static>,
    samples: Rc<RefCell<Samples>>,
    loaded: Loaded,
    table: std::sync::Arc<ProbeTable>,
    recorder: Option<Recorder<File>>,
    record_errors: u64,
    timing: Timing,
    deadline: Option<Instant>,
    next_window: Instant,
    /// the last drain read records: drain again after `drain`, not `idle_wait`
    busy: bool,
    /// the counters of the last window
    last_k: KernelTotals,
    /// the last full counter read found `failures` as the read before it
    failures_settled: bool,
}

impl LiveSource {
    /// Drains `loaded`'s `events` ring buffer; `record` also writes what is read (and the
    /// counters of each window) as a replay file with `header`.
    pub fn new(
        loaded: Loaded,
        table: std::sync::Arc<ProbeTable>,
        timing: Timing,
        record: Option<(PathBuf, Header)>,
    ) -> Result<Self, CollectError> {
        let recorder = match record {
            Some((p, header)) => Some(
                File::create(&p)
                    .and_then(|f| Recorder::new(f, &header))
                    .map_err(|source| CollectError::File {
                        what: Some("--record"),
                        path: p,
                        source,
                    })?,
            ),
            None => None,
        };
        let samples = Rc::new(RefCell::new(Samples::default()));
        let ring = ring_buffer(&loaded, samples.clone())?;
        let start = Instant::now();
        Ok(LiveSource {
            ring,
            samples,
            loaded,
            table,
            recorder,
            record_errors: 0,
            deadline: timing.duration.map(|d| start + d),
            next_window: start + timing.interval,
            timing,
            busy: false,
            last_k: KernelTotals::default(),
            failures_settled: false,
        })
    }

    /// How long the next idle poll may sleep.
    fn idle_wait(&self) -> Duration {
        let now = Instant::now();
        let mut w = self
            .timing
            .idle_wait
            .max(self.timing.drain)
            .min(self.next_window.saturating_duration_since(now));
        if let Some(d) = self.deadline {
            w = w.min(d.saturating_duration_since(now));
        }
        w.max(Duration::from_millis(1))
    }

    /// Time left until the next window closes.
    fn until_window(&self) -> Duration {
        self.next_window.saturating_duration_since(Instant::now())
    }

    /// Consumes what the ring holds into `pipe` (and the recording); returns the samples read.
    fn drain(&mut self, pipe: &mut Pipeline) -> usize {
        if let Err(e) = self.ring.consume() {
            if e.kind() != libbpf_rs::ErrorKind::Interrupted {
                eprintln!("probegen collect: ring buffer consume: {e}");
            }
        }
        let mut s = self.samples.borrow_mut();
        let mut start = 0;
        for &end in &s.ends {
            let sample = &s.bytes[start..end];
            pipe.ingest(sample);
            if let Some(r) = &mut self.recorder {
                if r.record(sample).is_err() {
                    self.record_errors += 1;
                }
            }
            start = end;
        }
        let n = s.ends.len();
        s.bytes.clear();
        s.ends.clear();
        n
    }

    fn record_counters(&mut self, k: &KernelTotals) {
        if let Some(r) = &mut self.recorder {
            if r.counters(k).is_err() {
                self.record_errors += 1;
            }
        }
    }

    /// The window's counters. `drops` and `errnos` only move after `failures` (the programs
    /// count a failure first), so while `failures` stands still they are taken from the last
    /// read instead of walking the maps again: an idle window reads two arrays. Only when the
    /// last full read already saw `failures` unchanged (`failures_settled`): a failure counted
    /// just before a full read could otherwise have its errno land just after it, and that
    /// would need a program to stall across a whole window. The final read is always full.
    fn read_window_counters(&mut self) -> Result<KernelTotals, CollectError> {
        let mut k = self.loaded.read_calls_failures(&self.table)?;
        let unchanged = k.failures == self.last_k.failures;
        if unchanged && self.failures_settled {
            k.drops = self.last_k.drops;
            k.drops_by_probe.clone_from(&self.last_k.drops_by_probe);
            k.errnos.clone_from(&self.last_k.errnos);
        } else {
            self.loaded.read_failure_details(&self.table, &mut k)?;
            self.failures_settled = unchanged;
        }
        Ok(k)
    }

    /// The window's counters (drained once more after reading them), or `None` when they
    /// cannot be read (logged; the window stays open).
    fn close_window(&mut self, pipe: &mut Pipeline, now: Instant) -> Option<KernelTotals> {
        let k = match self.read_window_counters() {
            Ok(k) => {
                self.drain(pipe);
                self.record_counters(&k);
                self.last_k = k.clone();
                Some(k)
            }
            Err(e) => {
                eprintln!("probegen collect: reading counters: {e}");
                None
            }
        };
        self.next_window += self.timing.interval;
        if self.next_window <= now {
            self.next_window = now + self.timing.interval;
        }
        k
    }
}

fn ring_buffer(
    loaded: &Loaded,
    samples: Rc<RefCell<Samples>>,
) -> Result<RingBuffer<'static>, CollectError> {
    let events = loaded
        .obj
        .maps()
        .find(|m| m.name() == "events")
        .ok_or_else(|| CollectError::NoMap("events".into()))?;
    let libbpf = |source| CollectError::Libbpf {
        what: "ring buffer".into(),
        source,
    };
    let mut b = RingBufferBuilder::new();
    b.add(&events, move |data: &[u8]| {
        if let Ok(mut s) = samples.try_borrow_mut() {
            s.bytes.extend_from_slice(data);
            let end = s.bytes.len();
            s.ends.push(end);
        }
        0
    })
    .map_err(libbpf)?;
    b.build().map_err(libbpf)
}

impl Source for LiveSource {
    fn next(&mut self, pipe: &mut Pipeline) -> Result<Step, CollectError> {
        if self.busy {
            // records keep coming: consume on the drain timer, past the wake-ups
            std::thread::sleep(self.timing.drain.min(self.until_window()));
        } else if let Err(e) = self.ring.poll(self.idle_wait()) {
            // the first record (or a signal) ends the sleep
            if e.kind() != libbpf_rs::ErrorKind::Interrupted {
                eprintln!("probegen collect: ring buffer poll: {e}");
            }
        }
        self.busy = self.drain(pipe) > 0;
        let now = Instant::now();
        if self.deadline.is_some_and(|d| now >= d) {
            return Ok(Step::End);
        }
        if now < self.next_window {
            return Ok(Step::Continue);
        }
        Ok(match self.close_window(pipe, now) {
            Some(k) => Step::Window(k),
            None => Step::Continue,
        })
    }

    fn finish(&mut self, pipe: &mut Pipeline) -> KernelTotals {
        self.loaded.detach();
        self.drain(pipe);
        let k = self.loaded.read_counters(&self.table).unwrap_or_else(|e| {
            eprintln!("probegen collect: reading counters: {e}");
            self.last_k.clone()
        });
        self.record_counters(&k);
        k
    }

    fn report(&self, pipe: &Pipeline, k: &KernelTotals) {
        if let Ok(seq) = self.loaded.seq_next() {
            let taken: u64 = seq.iter().sum();
            let seen: u64 = pipe.received_totals().iter().sum::<u64>()
                + pipe.dropped_totals().iter().sum::<u64>();
            eprintln!(
                "probegen collect: sequence numbers taken {taken}, records read {seen}, kernel drops {}",
                k.drops
            );
        }
        if self.record_errors > 0 {
            eprintln!(
                "probegen collect: --record: {} write errors",
                self.record_errors
            );
        }
    }
}
