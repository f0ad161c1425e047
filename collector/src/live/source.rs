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
use std::collections::BTreeMap;
use std::fs::File;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use libbpf_rs::{MapCore, RingBuffer, RingBufferBuilder};

use super::loader::Loaded;
use super::modules::{answer, Control, ModuleWatch};
use wire::{KernelTotals, ProbeTable};

use crate::error::CollectError;
use crate::live::activity::{Activity, Failing};
use crate::pipeline::Pipeline;
use crate::procinfo::ProcCache;
use crate::replay::{Header, Recorder};
use crate::source::{Source, Step};
use crate::warning::Warning;

/// Ring-buffer samples taken by the consume callback, handed to the pipeline after it.
#[derive(Default)]
struct Samples {
    bytes: Vec<u8>,
    /// end offset of each sample in `bytes`
    ends: Vec<usize>,
}

impl Samples {
    fn push(&mut self, sample: &[u8]) {
        self.bytes.extend_from_slice(sample);
        self.ends.push(self.bytes.len());
    }
}

/// A record taken at or after its CPU's `fence` (the seq each CPU had taken at a fenced
/// read). A sample that does not decode is never held: the pipeline counts it.
fn beyond(sample: &[u8], fence: &[u64]) -> bool {
    wire::decode(sample).is_ok_and(|r| {
        let (cpu, seq) = (r.cpu, r.seq);
        fence.get(cpu as usize).is_some_and(|&f| seq >= f)
    })
}

/// When the loop wakes and when it stops.
pub(crate) struct Timing {
    pub interval: Duration,
    pub drain: Duration,
    pub idle_wait: Duration,
    pub duration: Option<Duration>,
}

pub(crate) struct LiveSource {
    // dropped before `loaded`: the ring buffer maps the object's `events` map
    ring: RingBuffer<'static>,
    samples: Rc<RefCell<Samples>>,
    loaded: Loaded,
    table: std::sync::Arc<ProbeTable>,
    recorder: Option<Recorder<File>>,
    record_errors: u64,
    /// the records' processes: their cgroup and job, from this host's `/proc` (the pipeline
    /// reads no file)
    procs: ProcCache,
    timing: Timing,
    deadline: Option<Instant>,
    next_window: Instant,
    /// the last drain read records: drain again after `drain`, not `idle_wait`
    busy: bool,
    /// the counters of the last window and which maps the next window may skip
    reads: WindowReads,
    /// the programs' `activity` mapped (when the object has it)
    activity: Option<Activity>,
    /// what went wrong since the run last took them (the run reports them)
    warnings: Vec<Warning>,
    /// records the last window's fence held back (ingested first by the next drain)
    held: Samples,
    /// the modules of the set, followed every window (drivers that come and go)
    modules: ModuleWatch,
    /// `--control`: release requests (`modprobe -r` through the package's modprobe.d rule)
    control: Option<Control>,
    /// `--baseline`: the trace ring (its own fence, its own held traces)
    traces: Option<super::trace::TraceRing>,
}

/// The kernel's counter maps as a window reads them, in the order the programs count: a
/// call, then its failure, then the failure's errno and drop, then the program's end in
/// `activity` (`pg_exit` in probegen.bpf.h).
trait CounterMaps {
    /// Programs ended so far (`activity`, read from memory), or `None` when the object has no
    /// such map.
    fn ended(&self) -> Option<u64>;
    /// `calls` by probe id.
    fn calls(&self) -> Result<Vec<u64>, CollectError>;
    /// `failures` read now, with `calls` read just before (no `drops`, no `errnos`).
    fn calls_failures(&self, calls: &[u64]) -> Result<KernelTotals, CollectError>;
    /// Adds `drops` and `errnos` to `k`.
    fn failure_details(&self, k: &mut KernelTotals) -> Result<(), CollectError>;
    /// Failing programs that entered / ended their failure counting so far (`activity`), or
    /// `None` when the object's slots do not carry them.
    fn failing(&self, which: Failing) -> Option<u64>;
    /// `seq` of each CPU: the sequence number its next record will take.
    fn seq_next(&self) -> Result<Vec<u64>, CollectError>;
}

/// A loaded object's maps with the probe table that keys them, and its `activity` mapped.
struct LoadedMaps<'a>(&'a Loaded, &'a ProbeTable, Option<&'a Activity>);

impl CounterMaps for LoadedMaps<'_> {
    fn ended(&self) -> Option<u64> {
        self.2.map(Activity::ended)
    }

    fn calls(&self) -> Result<Vec<u64>, CollectError> {
        self.0.read_calls(self.1)
    }

    fn calls_failures(&self, calls: &[u64]) -> Result<KernelTotals, CollectError> {
        self.0.read_failures_with(self.1, calls)
    }

    fn failure_details(&self, k: &mut KernelTotals) -> Result<(), CollectError> {
        self.0.read_failure_details(self.1, k)
    }

    fn failing(&self, which: Failing) -> Option<u64> {
        self.2.and_then(|a| a.failing_failed(which))
    }

    fn seq_next(&self) -> Result<Vec<u64>, CollectError> {
        self.0.seq_next()
    }
}

/// What the last window read, and so which maps the next one may skip.
///
/// While the programs' `activity` (read from memory, no syscall) is the sum read just before
/// the last read of the maps, no program has ended since that read: whatever was counted
/// after it belongs to a program still running, whose end will move the sum. So an idle
/// window reads no map at all and hands on the last counters as they are, the same allocation
/// (the pipeline, the recording and the exposition then know them unchanged without a look).
/// A program running across a read (its call counted, its failure not yet) moves the sum when
/// it ends, and the next window reads the maps again. A call is counted in the window in which
/// its program ends (microseconds after the call is counted), or in the one before; so, as
/// before, in the window of the call or the next, unless a program stalls across a window.
///
/// Without `activity` (an older object): while `calls` stands still nothing else moved (a call
/// is counted first), so an idle window reads one array. Either way, while `failures` stands
/// still `drops` and `errnos` are taken from the last read instead of walking the maps again.
/// These two shortcuts (the first only without `activity`: with it, a sum that moved while
/// `calls` stood still is a program that counted its call before the last read and ended
/// after it) only once the read before already saw its counters unchanged
/// (`counters_settled`, `failures_settled`): a call counted just before a read could otherwise
/// have its failure or errno land just after it, and that would need a program to stall across
/// a whole window. The final read is always full.
///
/// Behind a fence (an object whose `activity` slots count `failing` and `failed`, see
/// `pg_exit` in probegen.bpf.h): `failed` is read first, then the maps and each CPU's `seq`,
/// then `failing`. When the two are equal no failure was half counted during the read, so the
/// counters cover exactly the records whose seq lies below the one read for their CPU (all
/// of them already in the ring), and a record at or above it belongs to the next window.
/// Otherwise the read is tried again a few times, microseconds apart (a failure is counted
/// in microseconds); a program stalled across all of them is carried as `in_flight`.
#[derive(Default)]
struct WindowReads {
    /// the counters of the last window
    last_k: Arc<KernelTotals>,
    /// `activity` read just before the last read of the maps
    ended_at_read: Option<u64>,
    /// `calls` by probe id at the last read
    last_calls: Vec<u64>,
    /// the last read of `failures` found them as the read before it
    failures_settled: bool,
    /// the last read of every counter found them all as the read before it
    counters_settled: bool,
    /// behind a fence: each CPU's `seq` at the last read (records at or above it wait)
    fence: Option<Vec<u64>>,
}

/// Reads of a fenced window before its half-counted failures are carried as in flight, the
/// first `FENCE_FIRST_WAIT` after the first read, each wait twice the one before (about 5 ms
/// in all).
const FENCE_READS: u32 = 8;
const FENCE_FIRST_WAIT: Duration = Duration::from_micros(20);

impl WindowReads {
    /// This window's counters (kept as the last window's); on an error nothing changes.
    fn read(&mut self, maps: &impl CounterMaps) -> Result<Arc<KernelTotals>, CollectError> {
        let ended = maps.ended();
        if ended.is_some() && ended == self.ended_at_read {
            return Ok(self.last_k.clone());
        }
        if maps.failing(Failing::Entered).is_some() {
            return self.read_fenced(maps, ended);
        }
        let calls = maps.calls()?;
        // with `activity`, a sum that moved is a program that ended: its counting is read
        if ended.is_none() && self.counters_settled && calls == self.last_calls {
            return Ok(self.last_k.clone());
        }
        let mut k = maps.calls_failures(&calls)?;
        let unchanged = k.failures == self.last_k.failures;
        let details_settled = unchanged && self.failures_settled;
        if details_settled {
            k.drops = self.last_k.drops;
            k.drops_by_probe.clone_from(&self.last_k.drops_by_probe);
            k.errnos.clone_from(&self.last_k.errnos);
        } else {
            maps.failure_details(&mut k)?;
        }
        self.failures_settled = unchanged;
        self.counters_settled = k == *self.last_k;
        self.ended_at_read = ended;
        self.last_calls = calls;
        self.last_k = Arc::new(k);
        Ok(self.last_k.clone())
    }

    /// The read behind a fence (see the type's doc).
    fn read_fenced(
        &mut self,
        maps: &impl CounterMaps,
        ended: Option<u64>,
    ) -> Result<Arc<KernelTotals>, CollectError> {
        let mut wait = FENCE_FIRST_WAIT;
        let mut reads = 0;
        loop {
            let done = maps.failing(Failing::Ended).unwrap_or(0);
            let calls = maps.calls()?;
            let mut k = maps.calls_failures(&calls)?;
            // nothing failed since a read that was exact: its drops and errnos still hold
            let last = &self.last_k;
            if last.fenced && last.in_flight == 0 && k.failures == last.failures {
                k.drops = last.drops;
                k.drops_by_probe.clone_from(&last.drops_by_probe);
                k.errnos.clone_from(&last.errnos);
            } else {
                maps.failure_details(&mut k)?;
            }
            let fence = maps.seq_next()?;
            let entered = maps.failing(Failing::Entered).unwrap_or(0);
            let in_flight = entered.wrapping_sub(done);
            reads += 1;
            if in_flight == 0 || reads >= FENCE_READS {
                k.fenced = true;
                k.in_flight = in_flight;
                self.fence = Some(fence);
                self.ended_at_read = ended;
                self.last_calls = calls;
                self.last_k = Arc::new(k);
                return Ok(self.last_k.clone());
            }
            std::thread::sleep(wait);
            wait *= 2;
        }
    }
}

impl LiveSource {
    /// Drains `loaded`'s `events` ring buffer; `record` also writes what is read (and the
    /// counters of each window) as a replay file with `header`.
    pub(crate) fn new(
        loaded: Loaded,
        table: std::sync::Arc<ProbeTable>,
        timing: Timing,
        record: Option<(PathBuf, Header)>,
        control: Option<Control>,
        procs: ProcCache,
    ) -> Result<Self, CollectError> {
        let recorder = match record {
            Some((p, header)) => Some(
                // never through a link, never a FIFO (outfile.rs); truncated once checked
                wire::open_output(&p, true)
                    .and_then(|(f, _)| Recorder::new(f, &header))
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
        if let Some(c) = &control {
            wake_on(&ring, c.fd())?;
        }
        let activity = loaded.activity();
        let mut warnings = Vec::new();
        if activity.is_none() {
            warnings.push(Warning::NoActivityMap);
        }
        let traces = match &loaded.baseline {
            Some(Ok(_)) => Some(super::trace::TraceRing::new(&loaded)?),
            _ => None,
        };
        let start = Instant::now();
        Ok(LiveSource {
            traces,
            ring,
            samples,
            loaded,
            recorder,
            record_errors: 0,
            deadline: timing.duration.map(|d| start + d),
            next_window: start + timing.interval,
            timing,
            busy: false,
            reads: WindowReads::default(),
            activity,
            warnings,
            held: Samples::default(),
            modules: ModuleWatch::new(&table),
            table,
            control,
            procs,
        })
    }

    /// Answers the control socket's requests (each a module's release), and every window
    /// attaches the modules that came; the snapshots' attach status follows.
    fn follow_modules(&mut self, pipe: &mut Pipeline, window: bool) {
        let mut changed = false;
        for (conn, req) in self
            .control
            .as_ref()
            .map(Control::pending)
            .unwrap_or_default()
        {
            let text = match req {
                Ok(module) => {
                    changed = true;
                    self.modules
                        .release(&mut self.loaded, &module, &mut self.warnings)
                }
                Err(e) => {
                    self.warnings.push(Warning::Control(e.clone()));
                    format!("error {e}")
                }
            };
            answer(conn, &text);
        }
        if window {
            changed |= self
                .modules
                .follow(&mut self.loaded, &self.table, &mut self.warnings);
        }
        if changed {
            pipe.set_attached(self.loaded.attached.clone());
        }
    }

    /// How long the next idle poll may sleep, in whole milliseconds (the poll's unit) rounded
    /// up: a sleep cut short of the window's end would cost a second wake-up to close it.
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
        let ms = u64::try_from(w.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX);
        Duration::from_millis(ms.max(1))
    }

    /// Time left until the next window closes.
    fn until_window(&self) -> Duration {
        self.next_window.saturating_duration_since(Instant::now())
    }

    /// Consumes what the ring holds into `pipe` (and the recording), after the records the
    /// last window's fence held back; returns the samples read from the ring. With `fence`
    /// (a window just read behind it), a record at or above its CPU's seq there is held back
    /// for the next window: the counters just read do not count it yet.
    fn drain(&mut self, pipe: &mut Pipeline, fence: Option<&[u64]>) -> usize {
        if let Err(e) = self.ring.consume() {
            if e.kind() != libbpf_rs::ErrorKind::Interrupted {
                self.warnings.push(Warning::RingBuffer {
                    what: "consume",
                    error: e.to_string(),
                });
            }
        }
        let held = std::mem::take(&mut self.held);
        let mut s = self.samples.borrow_mut();
        for batch in [&held, &*s] {
            let mut start = 0;
            for &end in &batch.ends {
                let sample = &batch.bytes[start..end];
                start = end;
                if fence.is_some_and(|f| beyond(sample, f)) {
                    self.held.push(sample);
                    continue;
                }
                let procs = &mut self.procs;
                pipe.ingest_with(sample, |r| procs.lookup(r.pid, &r.comm, r.cgroup_id));
                if let Some(r) = &mut self.recorder {
                    if r.record(sample).is_err() {
                        self.record_errors += 1;
                    }
                }
            }
        }
        let n = s.ends.len();
        s.bytes.clear();
        s.ends.clear();
        n
    }

    /// The traces: without `fence` all of them; with it, the trace counters are read behind
    /// their fence first and the traces past it wait.
    fn drain_traces(&mut self, pipe: &mut Pipeline, fence: bool) {
        let Some(t) = &mut self.traces else {
            return;
        };
        if !fence {
            t.drain(pipe, None);
            return;
        }
        match super::trace::TraceRing::read(&self.loaded, self.activity.as_ref()) {
            Ok((k, seq)) => {
                t.drain(pipe, Some(&seq));
                pipe.set_trace_counts(k);
            }
            Err(e) => self.warnings.push(Warning::Counters(e.to_string())),
        }
    }

    fn record_counters(&mut self, k: &Arc<KernelTotals>) {
        if let Some(r) = &mut self.recorder {
            if r.counters(k).is_err() {
                self.record_errors += 1;
            }
        }
    }

    /// The window's counters (drained once more after reading them), or `None` when they
    /// cannot be read (logged; the window stays open).
    fn close_window(&mut self, pipe: &mut Pipeline, now: Instant) -> Option<Arc<KernelTotals>> {
        let maps = LoadedMaps(&self.loaded, &self.table, self.activity.as_ref());
        let k = match self.reads.read(&maps) {
            Ok(k) => {
                let k = with_missed(k, self.loaded.missed_runs());
                crate::timings::mark("counters");
                let fence = self.reads.fence.take();
                self.drain(pipe, fence.as_deref());
                self.reads.fence = fence;
                self.drain_traces(pipe, true);
                crate::timings::mark("drain");
                self.record_counters(&k);
                crate::timings::mark("record");
                Some(k)
            }
            Err(e) => {
                self.warnings.push(Warning::Counters(e.to_string()));
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

/// `k` with the runs the kernel skipped (`missed`): the same allocation while there are none,
/// so a quiet window stays recognisably quiet.
fn with_missed(k: Arc<KernelTotals>, missed: BTreeMap<u32, u64>) -> Arc<KernelTotals> {
    if missed == k.missed {
        return k;
    }
    let mut with = (*k).clone();
    with.missed = missed;
    Arc::new(with)
}

/// Adds `fd` to the ring buffer's epoll set, so that the idle poll ends when it is readable
/// (a control request). Its event carries ring index 0: libbpf then reads the ring once
/// more, which is harmless, and the source answers the request after the poll.
fn wake_on(ring: &RingBuffer<'static>, fd: i32) -> Result<(), CollectError> {
    let mut ev = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: 0,
    };
    // SAFETY: both descriptors are open for the call; ev is a valid epoll_event.
    let rc = unsafe { libc::epoll_ctl(ring.epoll_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) };
    if rc == 0 {
        Ok(())
    } else {
        Err(CollectError::Option(format!(
            "--control: epoll_ctl: {}",
            std::io::Error::last_os_error()
        )))
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
            s.push(data);
        }
        0
    })
    .map_err(libbpf)?;
    b.build().map_err(libbpf)
}

impl Source for LiveSource {
    fn next(&mut self, pipe: &mut Pipeline) -> Result<Step, CollectError> {
        crate::timings::mark("turn");
        if self.busy {
            // records keep coming: consume on the drain timer, past the wake-ups
            std::thread::sleep(self.timing.drain.min(self.until_window()));
        } else if let Err(e) = self.ring.poll(self.idle_wait()) {
            // the first record (or a signal) ends the sleep
            if e.kind() != libbpf_rs::ErrorKind::Interrupted {
                self.warnings.push(Warning::RingBuffer {
                    what: "poll",
                    error: e.to_string(),
                });
            }
        }
        crate::timings::mark("wait");
        self.busy = self.drain(pipe, None) > 0;
        self.drain_traces(pipe, false);
        crate::timings::mark("drain");
        let now = Instant::now();
        if self.deadline.is_some_and(|d| now >= d) {
            return Ok(Step::End);
        }
        self.follow_modules(pipe, now >= self.next_window);
        if now < self.next_window {
            return Ok(Step::Continue);
        }
        Ok(match self.close_window(pipe, now) {
            Some(k) => Step::Window(k),
            None => Step::Continue,
        })
    }

    fn finish(&mut self, pipe: &mut Pipeline) -> Arc<KernelTotals> {
        self.loaded.detach();
        // detached: every record is in the ring, and the counters read next count them all
        self.drain(pipe, None);
        self.drain_traces(pipe, false);
        self.drain_traces(pipe, true);
        let k = match self.loaded.read_counters(&self.table) {
            Ok(k) => with_missed(Arc::new(k), self.loaded.missed_runs()),
            Err(e) => {
                self.warnings.push(Warning::Counters(e.to_string()));
                self.reads.last_k.clone()
            }
        };
        self.record_counters(&k);
        // the idle windows' counters lines still buffered
        if let Some(r) = &mut self.recorder {
            if r.flush().is_err() {
                self.record_errors += 1;
            }
        }
        k
    }

    fn report(&mut self, pipe: &Pipeline, k: &KernelTotals) {
        if let Ok(seq) = self.loaded.seq_next() {
            self.warnings.push(Warning::Sequence {
                taken: seq.iter().sum(),
                read: pipe.received_totals().iter().sum::<u64>()
                    + pipe.dropped_totals().iter().sum::<u64>(),
                kernel_drops: k.drops,
            });
        }
        if self.record_errors > 0 {
            self.warnings
                .push(Warning::RecordWriteErrors(self.record_errors));
        }
    }

    fn take_warnings(&mut self) -> Vec<Warning> {
        std::mem::take(&mut self.warnings)
    }

    fn peers(&self) -> &dyn crate::stage::PeerLookup {
        &self.loaded
    }

    fn cost(&mut self) -> Option<wire::AgentCost> {
        let mut c = super::cost::process()?;
        if super::cost::bpf_stats_enabled() {
            let (ns, runs) = self.loaded.bpf_run();
            c.bpf_run_ns = Some(ns);
            c.bpf_runs = Some(runs);
        }
        Some(c)
    }
}

#[cfg(test)]
mod tests {
    use std::cell::{Cell, RefCell};
    use std::collections::BTreeMap;

    use super::*;

    /// Counter maps of one probe (id 0) whose values the test sets; counts the map reads.
    #[derive(Default)]
    struct FakeMaps {
        /// `activity` (None: an object without it)
        ended: Cell<Option<u64>>,
        calls: Cell<u64>,
        failures: Cell<u64>,
        errnos: RefCell<BTreeMap<(u32, u32), u64>>,
        /// maps read so far: calls, failures, details
        reads: Cell<(u32, u32, u32)>,
        /// `activity`'s failing programs (entered, ended): None for an object without them
        failing: Cell<Option<(u64, u64)>>,
        /// the half-counted failure ends (and its record lands) at this read of `failed`
        settles_at: Cell<Option<u32>>,
        failed_reads: Cell<u32>,
        seq: RefCell<Vec<u64>>,
    }

    impl FakeMaps {
        fn set(&self, calls: u64, failures: u64, errno_14: u64) {
            self.calls.set(calls);
            self.failures.set(failures);
            *self.errnos.borrow_mut() = [((0, 14), errno_14)].into();
        }

        /// The maps read since the last call: (calls, failures, details).
        fn take_reads(&self) -> (u32, u32, u32) {
            self.reads.replace((0, 0, 0))
        }
    }

    impl CounterMaps for FakeMaps {
        fn ended(&self) -> Option<u64> {
            self.ended.get()
        }

        fn calls(&self) -> Result<Vec<u64>, CollectError> {
            let (c, f, d) = self.reads.get();
            self.reads.set((c + 1, f, d));
            Ok(vec![self.calls.get()])
        }

        fn calls_failures(&self, calls: &[u64]) -> Result<KernelTotals, CollectError> {
            let (c, f, d) = self.reads.get();
            self.reads.set((c, f + 1, d));
            Ok(KernelTotals {
                calls: [(0, calls[0])].into(),
                failures: [(0, self.failures.get())].into(),
                ..Default::default()
            })
        }

        fn failure_details(&self, k: &mut KernelTotals) -> Result<(), CollectError> {
            let (c, f, d) = self.reads.get();
            self.reads.set((c, f, d + 1));
            k.errnos.clone_from(&self.errnos.borrow());
            Ok(())
        }

        fn failing(&self, which: Failing) -> Option<u64> {
            let (entered, ended) = self.failing.get()?;
            if which == Failing::Entered {
                return Some(entered);
            }
            let n = self.failed_reads.get() + 1;
            self.failed_reads.set(n);
            if self.settles_at.get() == Some(n) {
                // the program that was half counted ends: its failure, errno and seq land
                self.failing.set(Some((entered, entered)));
                self.set(self.calls.get(), self.failures.get() + 1, 1);
                self.seq.borrow_mut()[0] += 1;
                return Some(entered);
            }
            Some(ended)
        }

        fn seq_next(&self) -> Result<Vec<u64>, CollectError> {
            Ok(self.seq.borrow().clone())
        }
    }

    /// One probe, one failure counted and its record (seq 0 on CPU 0) taken; a second failing
    /// program half counted (entered, not ended) as the window reads.
    fn half_counted(settles_at: Option<u32>) -> FakeMaps {
        let maps = FakeMaps::default();
        maps.ended.set(Some(10));
        maps.set(2, 1, 1);
        maps.failing.set(Some((2, 1)));
        maps.settles_at.set(settles_at);
        *maps.seq.borrow_mut() = vec![1, 0];
        maps
    }

    #[test]
    fn a_fenced_read_waits_for_a_half_counted_failure_to_end() {
        let maps = half_counted(Some(3));
        let mut reads = WindowReads::default();
        let k = reads.read(&maps).expect("read");
        // read until the fence closed: on the third read of `failed`, the program ended
        assert_eq!(maps.failed_reads.get(), 3, "the third read found it ended");
        assert_eq!((k.fenced, k.in_flight, k.failures[&0]), (true, 0, 2));
        // the records below the fence are exactly the two counted
        assert_eq!(reads.fence.as_deref(), Some(&[2, 0][..]));
    }

    #[test]
    fn a_failure_stalled_across_every_read_is_carried_in_flight() {
        let maps = half_counted(None);
        let mut reads = WindowReads::default();
        let k = reads.read(&maps).expect("read");
        assert_eq!(maps.failed_reads.get(), FENCE_READS);
        assert_eq!((k.fenced, k.in_flight, k.failures[&0]), (true, 1, 1));
        // the next window, once it ended, reads exact again
        maps.settles_at.set(Some(FENCE_READS + 1));
        maps.ended.set(Some(11));
        let k = reads.read(&maps).expect("read");
        assert_eq!((k.fenced, k.in_flight, k.failures[&0]), (true, 0, 2));
    }

    #[test]
    fn records_at_or_past_their_cpus_fence_wait() {
        use crate::pipeline::tests::rec;
        let fence = [5, 2];
        assert!(!beyond(&rec(1, -22, 0, 4, 7), &fence));
        assert!(beyond(&rec(1, -22, 0, 5, 7), &fence));
        assert!(beyond(&rec(1, -22, 1, 2, 7), &fence));
        assert!(!beyond(&rec(1, -22, 1, 1, 7), &fence));
        // a CPU the fence does not know, or a sample that does not decode: never held
        assert!(!beyond(&rec(1, -22, 7, 99, 7), &fence));
        assert!(!beyond(&[0u8; 5], &fence));
    }

    #[test]
    fn an_idle_window_reads_calls_only_and_hands_on_the_same_counters() {
        let maps = FakeMaps::default();
        let mut reads = WindowReads::default();
        maps.set(5, 1, 1);
        let first = reads.read(&maps).expect("read");
        assert_eq!(maps.take_reads(), (1, 1, 1));
        // unchanged once: read in full again (a late errno would land here)
        let second = reads.read(&maps).expect("read");
        assert_eq!(maps.take_reads(), (1, 1, 1));
        assert_eq!(first, second);
        // settled: calls only, the very same counters
        let third = reads.read(&maps).expect("read");
        assert_eq!(maps.take_reads(), (1, 0, 0));
        assert!(Arc::ptr_eq(&second, &third));
        reads.read(&maps).expect("read");
        assert_eq!(maps.take_reads(), (1, 0, 0));
        // a successful call: calls and failures read, errnos taken from the last read
        maps.set(6, 1, 1);
        let k = reads.read(&maps).expect("read");
        assert_eq!(maps.take_reads(), (1, 1, 0));
        assert_eq!((k.calls[&0], k.errnos[&(0, 14)]), (6, 1));
    }

    #[test]
    fn an_errno_counted_after_its_failure_was_read_is_read_in_the_next_window() {
        let maps = FakeMaps::default();
        let mut reads = WindowReads::default();
        maps.set(5, 1, 1);
        for _ in 0..3 {
            reads.read(&maps).expect("read");
        }
        maps.take_reads();
        // a failing call: the read sees its call and failure, its errno not yet
        maps.set(6, 2, 1);
        let k = reads.read(&maps).expect("read");
        assert_eq!((k.failures[&0], k.errnos[&(0, 14)]), (2, 1));
        maps.set(6, 2, 2);
        // calls stand still, but the read before saw them move: everything is read
        let k = reads.read(&maps).expect("read");
        assert_eq!(maps.take_reads(), (2, 2, 2));
        assert_eq!(k.errnos[&(0, 14)], 2);
        // the window after found a change: calls and failures once more (failures stood still
        // twice: errnos from the last read), then calls only
        reads.read(&maps).expect("read");
        assert_eq!(maps.take_reads(), (1, 1, 0));
        let k = reads.read(&maps).expect("read");
        assert_eq!(maps.take_reads(), (1, 0, 0));
        assert_eq!(k.errnos[&(0, 14)], 2);
    }

    #[test]
    fn an_unmoved_activity_reads_no_map_and_a_moved_one_reads_them_again() {
        let maps = FakeMaps::default();
        let mut reads = WindowReads::default();
        // a failing call whose program is still running: its errno is not counted yet
        maps.ended.set(Some(10));
        maps.set(6, 2, 1);
        let first = reads.read(&maps).expect("read");
        assert_eq!(maps.take_reads(), (1, 1, 1));
        // no program ended since: no map is read, the very same counters
        let idle = reads.read(&maps).expect("read");
        assert_eq!(maps.take_reads(), (0, 0, 0));
        assert!(Arc::ptr_eq(&first, &idle));
        // the program ends (its errno counted before): everything is read again
        maps.set(6, 2, 2);
        maps.ended.set(Some(11));
        let k = reads.read(&maps).expect("read");
        assert_eq!(maps.take_reads(), (1, 1, 1));
        assert_eq!(k.errnos[&(0, 14)], 2);
        // a successful call: calls and failures (standing still twice: errnos as they were)
        maps.set(7, 2, 2);
        maps.ended.set(Some(12));
        let k = reads.read(&maps).expect("read");
        assert_eq!(maps.take_reads(), (1, 1, 0));
        assert_eq!((k.calls[&0], k.errnos[&(0, 14)]), (7, 2));
        // idle from then on: nothing read, however long
        for _ in 0..3 {
            assert!(Arc::ptr_eq(&reads.read(&maps).expect("read"), &k));
        }
        assert_eq!(maps.take_reads(), (0, 0, 0));
        // a program whose call was counted before the last read ends: calls stand still but
        // are read with failures (settled: errnos as they were), and idle again after
        maps.ended.set(Some(13));
        reads.read(&maps).expect("read");
        assert_eq!(maps.take_reads(), (1, 1, 0));
        reads.read(&maps).expect("read");
        assert_eq!(maps.take_reads(), (0, 0, 0));
    }
}
