//! The collection loop: one loop over a [`Source`] (the live ring buffer or a replay file),
//! a snapshot to the sinks ([`outputs`]) at every window the source closes, and the final
//! snapshot when the source ends or a signal stops the run. What the operator may want to
//! see is handed to the embedder as an [`Event`]; the library prints none of it.

pub(crate) mod hooks;
pub(crate) mod options;
pub(crate) mod outputs;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use wire::{KernelTotals, ProbeTable};

use crate::chains::ChainClock;
use crate::error::CollectError;
use crate::live::{LiveSource, Timing};
use crate::pipeline::{Pipeline, PipelineConfig};
use crate::procinfo::ProcCache;
use crate::replay::{sleep_unless_stopped, Header, ReplayOptions, ReplaySource, REPLAY_SCHEMA};
use crate::sinks::jsonl::JsonlSink;
use crate::source::{Source, Step};
use crate::stage::Stage;
use crate::stop::{self, install_signal_handlers, stop_requested};
pub use hooks::{Event, Hooks};
pub use options::Options;
use outputs::Outputs;

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
    /// the final state of each sink that has one (a spool), in the sinks' order
    pub sinks: Vec<wire::SinkStatus>,
}

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
    Summary {
        sinks: outputs.finish(flush),
        snapshots: outputs.snapshots,
        received: pipe.received_totals().iter().sum(),
        dropped_kernel: k.drops,
        dropped_userspace: pipe.dropped_totals().iter().sum(),
        failures: k.failures.values().sum(),
        sink_errors: outputs.errors,
        invariant_ok: inv_ok,
        attached: pipe.attached().iter().filter(|a| a.attached).count(),
        probes: pipe.table().probes.len(),
        signal: stop::signal(),
    }
}

/// Runs `probegen collect` with `opts` (live when `object` is set, else replay).
pub fn run(opts: &Options, hooks: &mut dyn Hooks) -> Result<Summary, CollectError> {
    let text = manifest::read_text(
        &opts.manifest,
        manifest::MAX_MANIFEST_BYTES,
        manifest::MANIFEST_WHAT,
    )
    .map_err(manifest::ManifestError::from)?;
    let table = Arc::new(
        ProbeTable::from_manifest_text(&text, &opts.manifest.display().to_string())
            .map_err(|e| CollectError::Manifest(e.0))?,
    );
    install_signal_handlers();
    match (&opts.replay, &opts.object) {
        (Some(_), Some(_)) => Err(CollectError::Usage(
            "--replay and --object exclude each other",
        )),
        (Some(file), None) => run_replay(opts, table, file, start_jsonl(opts)?, hooks),
        (None, Some(obj)) => run_live(opts, table, obj, start_jsonl(opts)?, hooks),
        (None, None) => Err(CollectError::Usage("give --object (live) or --replay FILE")),
    }
}

/// The JSONL sink, its file checked and locked before anything is collected: a file the
/// collector may not write, or another collector's, ends the run here (outfile.rs).
fn start_jsonl(opts: &Options) -> Result<JsonlSink, CollectError> {
    let mut jsonl = JsonlSink::new(&opts.out, opts.rotate_bytes, opts.rotate_keep);
    jsonl.file.start().map_err(|source| CollectError::File {
        what: Some("--out"),
        path: opts.out.clone(),
        source,
    })?;
    Ok(jsonl)
}

/// The loop over `source`: a snapshot per window it closes, then the final one (with the
/// counters the source ends with). A source error ends the loop like a signal, and is
/// returned once the final snapshot is written.
fn collect(
    source: &mut dyn Source,
    pipe: &mut Pipeline,
    outputs: &mut Outputs,
    hooks: &mut dyn Hooks,
    flush: Duration,
) -> Result<Summary, CollectError> {
    // the embedder's stages (the agent adds none to a replay: the host it runs on is not the
    // one recorded)
    let mut stages = hooks.stages()?;
    let mut ended = Ok(());
    while !stop_requested() {
        let step = source.next(pipe);
        report_warnings(source, hooks);
        match step {
            Ok(Step::Continue) => {}
            Ok(Step::Window(k)) => {
                crate::timings::mark("source");
                let mut s = pipe.snapshot(&k, SystemTime::now(), false);
                s.agent = source.cost();
                run_stages(&mut stages, &mut s, &*source, hooks);
                crate::timings::mark("snapshot");
                outputs.emit(&mut s, hooks);
                let window = s.snapshot;
                drop(s);
                if let Some(w) = pipe.save_baseline(false) {
                    hooks.event(Event::Warning(&w));
                }
                crate::timings::mark("free");
                crate::timings::report(window);
                source.window_written();
            }
            Ok(Step::End) => break,
            Err(e) => {
                ended = Err(e);
                break;
            }
        }
    }
    let k = source.finish(pipe);
    report_warnings(source, hooks);
    let mut s = pipe.snapshot(&k, SystemTime::now(), true);
    s.agent = source.cost();
    run_stages(&mut stages, &mut s, &*source, hooks);
    let ok = s.invariant.ok;
    if !ok {
        hooks.event(Event::InvariantViolated(&s.invariant));
    }
    outputs.emit(&mut s, hooks);
    drop(s);
    if let Some(w) = pipe.save_baseline(true) {
        hooks.event(Event::Warning(&w));
    }
    source.report(pipe, &k);
    report_warnings(source, hooks);
    if !outputs.expositions.is_empty() {
        sleep_unless_stopped(source.linger(), Duration::from_millis(50));
    }
    let sum = summary(pipe, &k, outputs, ok, flush);
    ended.map(|()| sum)
}

/// Each stage's part of the window's snapshot, and the lines the stages have for the operator.
fn run_stages(
    stages: &mut [Box<dyn Stage>],
    s: &mut wire::Snapshot,
    source: &dyn Source,
    hooks: &mut dyn Hooks,
) {
    for line in stages
        .iter_mut()
        .flat_map(|st| st.window(s, source.peers()))
    {
        hooks.event(Event::Warning(&crate::warning::Warning::Stage(line)));
    }
}

/// Hands what the source warned about to the hooks (nothing to take on most turns: no
/// allocation).
fn report_warnings(source: &mut dyn Source, hooks: &mut dyn Hooks) {
    for w in source.take_warnings() {
        hooks.event(Event::Warning(&w));
    }
}

fn proc_cache(opts: &Options, cgroup_root: Option<PathBuf>) -> ProcCache {
    match &opts.proc_root {
        Some(r) => {
            let c = ProcCache::new(Some(r.clone()), opts.job_vars.clone(), 4096);
            match cgroup_root {
                Some(cg) => c.with_cgroup_root(cg),
                None => c,
            }
        }
        None => ProcCache::disabled(),
    }
}

fn open_outputs(
    jsonl: JsonlSink,
    clock: ChainClock,
    hooks: &mut dyn Hooks,
) -> Result<Outputs, CollectError> {
    let sinks = hooks.sinks(clock)?;
    if let Some(s) = sinks
        .iter()
        .find(|s| wire::SNAPSHOT_KEYS.contains(&s.name()))
    {
        return Err(CollectError::SinkName(s.name().to_string()));
    }
    let (expositions, fleet) = sinks.into_iter().partition(|s| s.exposes());
    Ok(Outputs {
        fleet,
        jsonl,
        expositions,
        snapshots: 0,
        errors: 0,
    })
}

fn run_replay(
    opts: &Options,
    table: Arc<ProbeTable>,
    file: &Path,
    jsonl: JsonlSink,
    hooks: &mut dyn Hooks,
) -> Result<Summary, CollectError> {
    let mut source = ReplaySource::open(
        file,
        table.manifest_hash.clone(),
        ReplayOptions {
            host: opts.host.clone(),
            window: opts.replay_window,
            pace: opts.replay_pace,
            linger: opts.linger,
            procs: proc_cache(opts, None),
        },
    )?;
    let mut pipe = Pipeline::new(
        table,
        PipelineConfig {
            batch_cap: opts.batch_cap,
            host: opts.host.clone().unwrap_or_else(host_name),
            kernel: kernel_release(),
            seq_from_zero: false,
            derive_counters: true,
        },
    );
    pipe.set_attached(Vec::new());
    pipe.set_running_set(opts.set.clone());
    let mut outputs = open_outputs(jsonl, ChainClock::LastRecord, hooks)?;
    pipe.start_window(SystemTime::now());
    collect(&mut source, &mut pipe, &mut outputs, hooks, opts.sink_flush)
}

/// `--baseline`: the pipeline's baseline, with the line that says how calls are traced (or
/// why they cannot be).
fn enable_baseline(
    opts: &Options,
    loaded: &crate::live::Loaded,
    pipe: &mut Pipeline,
) -> Vec<crate::warning::Warning> {
    let Some(cfg) = opts.baseline.clone() else {
        return Vec::new();
    };
    let Some(traced) = loaded.baseline.clone() else {
        return Vec::new();
    };
    let (handlers, line) = match traced {
        Ok(t) => {
            let line = format!(
                "baseline: {} handlers traced, one call in {}: {}",
                t.handlers.len(),
                cfg.sample,
                t.mechanism
            );
            (t.handlers, line)
        }
        Err(why) => (Default::default(), why),
    };
    let mut b = baseline::Baseline::new(cfg, handlers, line.clone());
    let restored = b.restore(pipe.table());
    pipe.enable_baseline(Box::new(b));
    [Some(line), restored]
        .into_iter()
        .flatten()
        .map(crate::warning::Warning::Baseline)
        .collect()
}

fn run_live(
    opts: &Options,
    table: Arc<ProbeTable>,
    object: &Path,
    jsonl: JsonlSink,
    hooks: &mut dyn Hooks,
) -> Result<Summary, CollectError> {
    let t0 = Instant::now();
    // bound first: a path it refuses stops the run before anything loads
    let control = opts
        .control
        .as_deref()
        .map(crate::live::Control::bind)
        .transpose()?;
    let mut loaded = crate::live::load(
        &table,
        object,
        &crate::live::LoadOptions {
            strict: opts.strict,
            ringbuf_bytes: opts.ringbuf_bytes,
            baseline: opts.baseline.clone(),
        },
    )?;
    for w in std::mem::take(&mut loaded.warnings) {
        hooks.event(Event::Warning(&w));
    }
    hooks.event(Event::Attached {
        attached: loaded.attached.iter().filter(|a| a.attached).count(),
        probes: table.probes.len(),
        by_layer: wire::AttachedByLayer::of(&table, &loaded.attached),
        millis: t0.elapsed().as_secs_f64() * 1e3,
    });
    let host = opts.host.clone().unwrap_or_else(host_name);
    let kernel = kernel_release();
    let record = opts.record.clone().map(|p| {
        let header = Header {
            replay: REPLAY_SCHEMA.into(),
            host: host.clone(),
            kernel: kernel.clone(),
            manifest_hash: table.manifest_hash.clone(),
        };
        (p, header)
    });
    let mut pipe = Pipeline::new(
        table.clone(),
        PipelineConfig {
            batch_cap: opts.batch_cap,
            host,
            kernel,
            seq_from_zero: true,
            derive_counters: false,
        },
    );
    pipe.set_attached(loaded.attached.clone());
    pipe.set_running_set(opts.set.clone());
    for w in enable_baseline(opts, &loaded, &mut pipe) {
        hooks.event(Event::Warning(&w));
    }
    // the records' clock is this kernel's CLOCK_MONOTONIC: an open chain is complete once its
    // gap has passed
    pipe.set_chain_rule(crate::chains::DEFAULT_GAP_NS, ChainClock::Monotonic);
    let timing = Timing {
        interval: opts.interval,
        drain: opts.drain,
        idle_wait: opts.idle_wait,
        duration: opts.duration,
    };
    let procs = proc_cache(opts, Some(PathBuf::from("/sys/fs/cgroup")));
    let mut source = LiveSource::new(loaded, table, timing, record, control, procs)?;
    let mut outputs = open_outputs(jsonl, ChainClock::Monotonic, hooks)?;
    let statuses = outputs.statuses();
    for s in outputs.fleet.iter_mut().chain(&mut outputs.expositions) {
        s.start(pipe.table(), pipe.attached_shared(), &statuses);
    }
    pipe.start_window(SystemTime::now());
    collect(&mut source, &mut pipe, &mut outputs, hooks, opts.sink_flush)
}
