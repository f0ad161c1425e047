//! The collection loops (live and replay) and their outputs (JSONL sink, metrics).

use std::cell::RefCell;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use libbpf_rs::MapCore;

use crate::chains::ChainClock;
use crate::clickhouse::{ClickhouseSink, SinkOptions, SinkStatus};
use crate::metrics::{self, MetricsInput};
use crate::pipeline::{KernelTotals, Pipeline, PipelineConfig, Snapshot};
use crate::probes::ProbeTable;
use crate::procinfo::ProcCache;
use crate::replay::{self, Event, Header, Recorder, REPLAY_SCHEMA};
use crate::sink::JsonlSink;

#[derive(Debug, Clone)]
pub struct Options {
    pub manifest: PathBuf,
    /// compiled probes.bpf.o (live)
    pub object: Option<PathBuf>,
    /// replay file instead of BPF
    pub replay: Option<PathBuf>,
    /// replay without counters: records per window (0: one window)
    pub replay_window: usize,
    pub interval: Duration,
    /// ring buffer drain period while records keep coming
    pub drain: Duration,
    /// longest sleep while idle: records are submitted without a wake-up until the ring holds
    /// `wakeup_threshold` bytes (a burst wakes the collector at once), so an idle collector
    /// sleeps this long between checks instead of waking every `drain`
    pub idle_wait: Duration,
    /// JSONL path, `-` for stdout
    pub out: PathBuf,
    pub rotate_bytes: u64,
    pub rotate_keep: usize,
    pub metrics: Option<SocketAddr>,
    pub strict: bool,
    pub duration: Option<Duration>,
    pub ringbuf_bytes: Option<u32>,
    pub batch_cap: usize,
    pub job_vars: Vec<String>,
    /// write a replay file of what was read (live)
    pub record: Option<PathBuf>,
    /// keep serving metrics this long after a replay ended (or until a signal)
    pub linger: Option<Duration>,
    /// /proc for job correlation (None: off; the default for replay)
    pub proc_root: Option<PathBuf>,
    /// also send every snapshot to ClickHouse (through the spool)
    pub clickhouse: Option<crate::clickhouse::Endpoint>,
    /// the spool directory (default: next to `out`)
    pub clickhouse_spool: Option<PathBuf>,
    pub clickhouse_spool_bytes: u64,
    /// at exit, how long to keep sending what is spooled
    pub clickhouse_flush: Duration,
    /// the host name the snapshots carry (default: this host's, or the recording's)
    pub host: Option<String>,
    /// replay: pause this long after each window (a recording played out over time)
    pub replay_pace: Option<Duration>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            manifest: PathBuf::new(),
            object: None,
            replay: None,
            replay_window: 0,
            interval: Duration::from_secs(5),
            drain: Duration::from_millis(10),
            idle_wait: Duration::from_millis(250),
            out: PathBuf::from("probegen-snapshots.jsonl"),
            rotate_bytes: 64 << 20,
            rotate_keep: 5,
            metrics: None,
            strict: false,
            duration: None,
            ringbuf_bytes: Some(4 << 20),
            batch_cap: 10_000,
            job_vars: crate::procinfo::DEFAULT_JOB_VARS
                .iter()
                .map(|s| s.to_string())
                .collect(),
            record: None,
            linger: None,
            proc_root: Some(PathBuf::from("/proc")),
            clickhouse: None,
            clickhouse_spool: None,
            clickhouse_spool_bytes: 256 << 20,
            clickhouse_flush: Duration::from_secs(5),
            host: None,
            replay_pace: None,
        }
    }
}

/// What a run did (printed by the command, checked by tests).
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub snapshots: u64,
    pub received: u64,
    pub dropped_kernel: u64,
    pub dropped_userspace: u64,
    pub failures: u64,
    pub sink_errors: u64,
    pub invariant_ok: bool,
    pub attached: usize,
    pub probes: usize,
    pub signal: Option<i32>,
    /// the ClickHouse sink at exit (with `--clickhouse`)
    pub clickhouse: Option<crate::clickhouse::SinkStatus>,
    /// the spool's largest size this run: (bytes, batches)
    pub spool_peak: Option<(u64, usize)>,
}

// ------------------------------------------------------------------ signals ---

static STOP: AtomicBool = AtomicBool::new(false);
static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNAL.store(sig, Ordering::SeqCst);
    STOP.store(true, Ordering::SeqCst);
}

/// SIGINT/SIGTERM set the stop flag (no SA_RESTART: a blocked poll returns at once).
pub fn install_signal_handlers() {
    // SAFETY: sigaction with a handler that only stores to atomics (async-signal-safe).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        sa.sa_flags = 0;
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
        libc::sigaction(libc::SIGTERM, &sa, std::ptr::null_mut());
    }
}

pub fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// Asks the running loop to stop, as a signal would (tests, embedding).
pub fn request_stop() {
    STOP.store(true, Ordering::SeqCst);
}

// ------------------------------------------------------------------ outputs ---

pub struct Outputs {
    sink: JsonlSink,
    metrics: Option<metrics::Shared>,
    snapshots: u64,
    clickhouse: Option<ClickhouseSink>,
    clickhouse_status: Option<SinkStatus>,
    last_snapshot_unix_ns: u64,
}

impl Outputs {
    pub fn new(opts: &Options, clock: ChainClock) -> Result<(Self, Option<SocketAddr>), String> {
        let clickhouse = match &opts.clickhouse {
            Some(endpoint) => Some(ClickhouseSink::start(SinkOptions {
                endpoint: endpoint.clone(),
                spool_dir: opts
                    .clickhouse_spool
                    .clone()
                    .unwrap_or_else(|| crate::clickhouse::default_spool_dir(&opts.out)),
                spool_limit_bytes: opts.clickhouse_spool_bytes,
                boot_id: crate::clickhouse::boot_id(),
                clock,
                min_backoff: Duration::from_millis(250),
                max_backoff: Duration::from_secs(5),
            })?),
            None => None,
        };
        let mut bound = None;
        let metrics = match opts.metrics {
            Some(addr) => {
                let shared: metrics::Shared = Arc::new(Mutex::new(String::new()));
                bound = Some(
                    metrics::serve(addr, shared.clone())
                        .map_err(|e| format!("--metrics {addr}: {e}"))?,
                );
                Some(shared)
            }
            None => None,
        };
        Ok((
            Outputs {
                sink: JsonlSink::new(&opts.out, opts.rotate_bytes, opts.rotate_keep),
                metrics,
                snapshots: 0,
                clickhouse_status: clickhouse.as_ref().map(|c| c.status()),
                clickhouse,
                last_snapshot_unix_ns: 0,
            },
            bound,
        ))
    }

    /// Stops the ClickHouse sender after at most `flush` of sending what is spooled.
    fn finish(&mut self, flush: Duration) -> (Option<SinkStatus>, Option<(u64, usize)>) {
        match self.clickhouse.take() {
            Some(c) => {
                let peak = c.spool_peak();
                let st = c.finish(flush);
                self.clickhouse_status = Some(st.clone());
                (Some(st), Some(peak))
            }
            None => (None, None),
        }
    }

    /// Renders the exposition (also before the first snapshot, for `probe_attached`).
    pub fn update_metrics(&self, pipe: &Pipeline, k: &KernelTotals) {
        if let Some(m) = &self.metrics {
            let text = metrics::render(&MetricsInput {
                table: pipe.table(),
                kernel: k,
                received: pipe.received_totals(),
                dropped_userspace: pipe.dropped_totals(),
                attached: pipe.attached(),
                sink_errors: pipe.sink_errors,
                snapshots: self.snapshots,
                chains: pipe.chain_totals(),
                clickhouse: self
                    .clickhouse
                    .as_ref()
                    .map(|c| c.status())
                    .or_else(|| self.clickhouse_status.clone()),
                last_snapshot_unix_ns: self.last_snapshot_unix_ns,
            });
            if let Ok(mut t) = m.lock() {
                *t = text;
            }
        }
    }

    /// Writes a snapshot; a sink error is counted and reported, never fatal. Its failure
    /// chains are logged on stderr, one line each (at most [`MAX_CHAIN_LINES`] per snapshot).
    pub fn emit(&mut self, pipe: &mut Pipeline, snap: &mut Snapshot, k: &KernelTotals) {
        for c in snap.chains.iter().take(MAX_CHAIN_LINES) {
            eprintln!("probegen collect: chain {}", c.log_line());
        }
        if snap.chains.len() > MAX_CHAIN_LINES {
            eprintln!(
                "probegen collect: ... and {} more chains in snapshot {}",
                snap.chains.len() - MAX_CHAIN_LINES,
                snap.snapshot
            );
        }
        if let Some(c) = &mut self.clickhouse {
            // spooled (durable) before the JSONL line: its status names this snapshot's batch
            match c.enqueue(snap) {
                Ok(st) => snap.clickhouse = Some(st),
                Err(e) => {
                    pipe.sink_errors += 1;
                    eprintln!(
                        "probegen collect: clickhouse: snapshot {} not spooled: {e}",
                        snap.snapshot
                    );
                    snap.clickhouse = Some(c.status());
                }
            }
        }
        self.last_snapshot_unix_ns = snap.window.end_unix_ns;
        let line = snap.to_line();
        if let Err(e) = self.sink.write(&line) {
            pipe.sink_errors += 1;
            eprintln!(
                "probegen collect: sink {}: snapshot {} not written: {e} (sink errors: {})",
                self.sink
                    .path()
                    .map_or("stdout".into(), |p| p.display().to_string()),
                snap.snapshot,
                pipe.sink_errors
            );
        }
        self.snapshots += 1;
        self.update_metrics(pipe, k);
    }
}

/// Chains logged on stderr per snapshot (all of them are in the snapshot).
pub const MAX_CHAIN_LINES: usize = 32;

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn summary(
    pipe: &Pipeline,
    k: &KernelTotals,
    outputs: &mut Outputs,
    inv_ok: bool,
    flush: Duration,
) -> Summary {
    let (clickhouse, spool_peak) = outputs.finish(flush);
    Summary {
        clickhouse,
        spool_peak,
        snapshots: outputs.snapshots,
        received: pipe.received_totals().iter().sum(),
        dropped_kernel: k.drops,
        dropped_userspace: pipe.dropped_totals().iter().sum(),
        failures: k.failures.values().sum(),
        sink_errors: pipe.sink_errors,
        invariant_ok: inv_ok,
        attached: pipe.attached().iter().filter(|a| a.attached).count(),
        probes: pipe.table().probes.len(),
        signal: match SIGNAL.load(Ordering::SeqCst) {
            0 => None,
            s => Some(s),
        },
    }
}

/// Runs `probegen collect` with `opts` (live when `object` is set, else replay).
pub fn run(opts: &Options) -> Result<Summary, String> {
    let text = manifest::input::read_text(
        &opts.manifest,
        manifest::input::MAX_MANIFEST_BYTES,
        manifest::MANIFEST_WHAT,
    )?;
    let table = Arc::new(ProbeTable::from_manifest_text(
        &text,
        &opts.manifest.display().to_string(),
    )?);
    install_signal_handlers();
    match (&opts.replay, &opts.object) {
        (Some(_), Some(_)) => Err("--replay and --object exclude each other".into()),
        (Some(file), None) => run_replay(opts, table, file),
        (None, Some(obj)) => run_live(opts, table, obj),
        (None, None) => Err("give --object (live) or --replay FILE".into()),
    }
}

// ------------------------------------------------------------------- replay ---

/// The replay stopped by SIGINT/SIGTERM (the reader prefixes the line number): a clean end.
fn is_interruption(e: &str) -> bool {
    e == "interrupted" || e.ends_with(": interrupted")
}

/// `--replay-pace`: sleeps between windows, in short steps so a signal stops it at once.
fn pace(d: Option<Duration>) {
    let Some(d) = d else { return };
    let until = Instant::now() + d;
    while Instant::now() < until && !stop_requested() {
        std::thread::sleep(
            until
                .saturating_duration_since(Instant::now())
                .min(Duration::from_millis(20)),
        );
    }
}

fn run_replay(opts: &Options, table: Arc<ProbeTable>, file: &Path) -> Result<Summary, String> {
    let input = std::fs::File::open(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let procs = match &opts.proc_root {
        Some(r) => ProcCache::new(Some(r.clone()), opts.job_vars.clone(), 4096),
        None => ProcCache::disabled(),
    };
    let manifest_hash = table.manifest_hash.clone();
    let mut pipe = Pipeline::new(
        table,
        PipelineConfig {
            batch_cap: opts.batch_cap,
            host: opts.host.clone().unwrap_or_else(host_name),
            kernel: kernel_release(),
            seq_from_zero: false,
            derive_counters: true,
        },
        procs,
    );
    pipe.set_attached(Vec::new());
    let (mut outputs, bound) = Outputs::new(opts, ChainClock::LastRecord)?;
    if let Some(a) = bound {
        eprintln!("probegen collect: metrics on http://{a}/metrics");
    }
    pipe.start_window(SystemTime::now());
    let mut last: Option<KernelTotals> = None;
    let mut since_window = 0usize;
    let res = replay::read(input, replay::is_raw_name(file), |ev| {
        if stop_requested() {
            return Err("interrupted".into());
        }
        match ev {
            Event::Header(h) => {
                pipe.set_origin(opts.host.as_deref().unwrap_or(&h.host), &h.kernel);
                if !h.manifest_hash.is_empty() && h.manifest_hash != manifest_hash {
                    eprintln!(
                        "probegen collect: warning: replay recorded with manifest {}, replayed with {manifest_hash}",
                        h.manifest_hash
                    );
                }
            }
            Event::Record(b) => {
                pipe.ingest(b);
                since_window += 1;
                if last.is_none() && opts.replay_window > 0 && since_window >= opts.replay_window {
                    let k = pipe.derived();
                    let mut s = pipe.snapshot(&k, SystemTime::now(), false);
                    outputs.emit(&mut pipe, &mut s, &k);
                    since_window = 0;
                    pace(opts.replay_pace);
                }
            }
            Event::Counters(k) => {
                let mut s = pipe.snapshot(&k, SystemTime::now(), false);
                outputs.emit(&mut pipe, &mut s, &k);
                last = Some(k);
                since_window = 0;
                pace(opts.replay_pace);
            }
        }
        Ok(())
    });
    // A replay error is returned below (and printed once, by the caller).
    let k = last.unwrap_or_else(|| pipe.derived());
    let mut s = pipe.snapshot(&k, SystemTime::now(), true);
    let ok = s.invariant.ok;
    if !ok {
        eprintln!(
            "probegen collect: invariant violated: {}",
            serde_json::to_string(&s.invariant).unwrap_or_default()
        );
    }
    outputs.emit(&mut pipe, &mut s, &k);
    drop(s);
    if let Some(l) = opts.linger.filter(|_| outputs.metrics.is_some()) {
        let until = Instant::now() + l;
        while Instant::now() < until && !stop_requested() {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let sum = summary(&pipe, &k, &mut outputs, ok, opts.clickhouse_flush);
    match res {
        Err(e) if !is_interruption(&e) => Err(format!("replay {}: {e}", file.display())),
        _ => Ok(sum),
    }
}

// --------------------------------------------------------------------- live ---

struct Ingest {
    pipe: Pipeline,
    recorder: Option<Recorder<std::fs::File>>,
    record_errors: u64,
    /// Records read so far (tells a busy drain from an idle one).
    samples: u64,
}

impl Ingest {
    fn sample(&mut self, b: &[u8]) {
        self.samples += 1;
        self.pipe.ingest(b);
        if let Some(r) = &mut self.recorder {
            if r.record(b).is_err() {
                self.record_errors += 1;
            }
        }
    }
}

fn run_live(opts: &Options, table: Arc<ProbeTable>, object: &Path) -> Result<Summary, String> {
    let t0 = Instant::now();
    let mut loaded = crate::live::load(
        &table,
        object,
        &crate::live::LoadOptions {
            strict: opts.strict,
            ringbuf_bytes: opts.ringbuf_bytes,
        },
    )?;
    let n_att = loaded.attached.iter().filter(|a| a.attached).count();
    eprintln!(
        "probegen collect: attached {n_att}/{} programs in {:.1} ms",
        table.probes.len(),
        t0.elapsed().as_secs_f64() * 1e3
    );
    let procs = match &opts.proc_root {
        Some(r) => ProcCache::new(Some(r.clone()), opts.job_vars.clone(), 4096)
            .with_cgroup_root(PathBuf::from("/sys/fs/cgroup")),
        None => ProcCache::disabled(),
    };
    let host = opts.host.clone().unwrap_or_else(host_name);
    let kernel = kernel_release();
    let mut pipe = Pipeline::new(
        table.clone(),
        PipelineConfig {
            batch_cap: opts.batch_cap,
            host: host.clone(),
            kernel: kernel.clone(),
            seq_from_zero: true,
            derive_counters: false,
        },
        procs,
    );
    pipe.set_attached(loaded.attached.clone());
    // the records' clock is this kernel's CLOCK_MONOTONIC: an open chain is complete once its
    // gap has passed
    pipe.set_chain_rule(
        crate::chains::DEFAULT_GAP_NS,
        crate::chains::ChainClock::Monotonic,
    );
    let recorder = match &opts.record {
        Some(p) => Some(
            std::fs::File::create(p)
                .and_then(|f| {
                    Recorder::new(
                        f,
                        &Header {
                            replay: REPLAY_SCHEMA.into(),
                            host,
                            kernel,
                            manifest_hash: table.manifest_hash.clone(),
                        },
                    )
                })
                .map_err(|e| format!("--record {}: {e}", p.display()))?,
        ),
        None => None,
    };
    let (mut outputs, bound) = Outputs::new(opts, ChainClock::Monotonic)?;
    if let Some(a) = bound {
        eprintln!("probegen collect: metrics on http://{a}/metrics");
    }
    outputs.update_metrics(&pipe, &KernelTotals::default());
    let ingest = Rc::new(RefCell::new(Ingest {
        pipe,
        recorder,
        record_errors: 0,
        samples: 0,
    }));
    let rb = {
        let events = loaded
            .obj
            .maps()
            .find(|m| m.name() == "events")
            .ok_or("no ring buffer `events`")?;
        let mut b = libbpf_rs::RingBufferBuilder::new();
        let sink = ingest.clone();
        b.add(&events, move |data: &[u8]| {
            if let Ok(mut i) = sink.try_borrow_mut() {
                i.sample(data);
            }
            0
        })
        .map_err(|e| format!("ring buffer: {e}"))?;
        b.build().map_err(|e| format!("ring buffer: {e}"))?
    };
    let consume = |rb: &libbpf_rs::RingBuffer<'_>| {
        if let Err(e) = rb.consume() {
            if e.kind() != libbpf_rs::ErrorKind::Interrupted {
                eprintln!("probegen collect: ring buffer consume: {e}");
            }
        }
    };
    let start = Instant::now();
    ingest.borrow_mut().pipe.start_window(SystemTime::now());
    let deadline = opts.duration.map(|d| start + d);
    let mut next = start + opts.interval;
    let mut last_k = KernelTotals::default();
    let snapshot =
        |ingest: &Rc<RefCell<Ingest>>, k: &KernelTotals, outputs: &mut Outputs, is_final: bool| {
            let mut i = ingest.borrow_mut();
            let mut s = i.pipe.snapshot(k, SystemTime::now(), is_final);
            if let Some(r) = &mut i.recorder {
                if r.counters(k).is_err() {
                    i.record_errors += 1;
                }
            }
            let ok = s.invariant.ok;
            outputs.emit(&mut i.pipe, &mut s, k);
            ok
        };
    // Fast draining only while records keep coming; idle, sleep up to `idle_wait` (bounded by
    // the next snapshot and the deadline): a burst crosses the wake-up threshold and ends the
    // sleep at once.
    let mut busy = false;
    while !stop_requested() {
        let before = ingest.borrow().samples;
        let wait = if busy {
            opts.drain
        } else {
            let now = Instant::now();
            let mut w = opts
                .idle_wait
                .max(opts.drain)
                .min(next.saturating_duration_since(now));
            if let Some(d) = deadline {
                w = w.min(d.saturating_duration_since(now));
            }
            w.max(Duration::from_millis(1))
        };
        // threshold wake-ups end the poll early; NO_WAKEUP records need the consume
        if let Err(e) = rb.poll(wait) {
            if e.kind() != libbpf_rs::ErrorKind::Interrupted {
                eprintln!("probegen collect: ring buffer poll: {e}");
            }
        }
        consume(&rb);
        busy = ingest.borrow().samples > before;
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            break;
        }
        if now >= next {
            match loaded.read_counters(&table) {
                Ok(k) => {
                    consume(&rb);
                    snapshot(&ingest, &k, &mut outputs, false);
                    last_k = k;
                }
                Err(e) => eprintln!("probegen collect: reading counters: {e}"),
            }
            next += opts.interval;
            if next <= now {
                next = now + opts.interval;
            }
        }
    }
    // final: detach, drain what is left, read the counters: now the accounting is exact
    loaded.detach();
    consume(&rb);
    let k = loaded.read_counters(&table).unwrap_or_else(|e| {
        eprintln!("probegen collect: reading counters: {e}");
        last_k.clone()
    });
    let ok = snapshot(&ingest, &k, &mut outputs, true);
    let i = ingest.borrow();
    if let Ok(seq) = loaded.seq_next() {
        let taken: u64 = seq.iter().sum();
        let seen: u64 = i.pipe.received_totals().iter().sum::<u64>()
            + i.pipe.dropped_totals().iter().sum::<u64>();
        eprintln!(
            "probegen collect: sequence numbers taken {taken}, records read {seen}, kernel drops {}",
            k.drops
        );
    }
    if i.record_errors > 0 {
        eprintln!(
            "probegen collect: --record: {} write errors",
            i.record_errors
        );
    }
    let sum = summary(&i.pipe, &k, &mut outputs, ok, opts.clickhouse_flush);
    drop(i);
    drop(rb);
    Ok(sum)
}
