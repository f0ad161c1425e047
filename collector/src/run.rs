//! The collection loop: one loop over a [`Source`] (the live ring buffer or a replay file),
//! a snapshot to the [`Outputs`] at every window the source closes, and the final snapshot
//! when the source ends or a signal stops the run.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::chains::ChainClock;
use crate::error::CollectError;
use crate::kernel_state::KernelTotals;
pub use crate::options::Options;
pub use crate::outputs::{Outputs, MAX_CHAIN_LINES};
use crate::pipeline::{Pipeline, PipelineConfig};
use crate::probes::ProbeTable;
use crate::procinfo::ProcCache;
use crate::replay::{Header, REPLAY_SCHEMA};
use crate::source::live::{LiveSource, Timing};
use crate::source::replay::{sleep_unless_stopped, ReplayOptions, ReplaySource};
use crate::source::{Source, Step};
pub use crate::stop::{install_signal_handlers, request_stop, stop_requested};

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
        signal: crate::stop::signal(),
    }
}

/// Runs `probegen collect` with `opts` (live when `object` is set, else replay).
pub fn run(opts: &Options) -> Result<Summary, CollectError> {
    let text = manifest::read_text(
        &opts.manifest,
        manifest::MAX_MANIFEST_BYTES,
        manifest::MANIFEST_WHAT,
    )
    .map_err(CollectError::Manifest)?;
    let table = Arc::new(ProbeTable::from_manifest_text(
        &text,
        &opts.manifest.display().to_string(),
    )?);
    install_signal_handlers();
    match (&opts.replay, &opts.object) {
        (Some(_), Some(_)) => Err(CollectError::Usage(
            "--replay and --object exclude each other",
        )),
        (Some(file), None) => run_replay(opts, table, file),
        (None, Some(obj)) => run_live(opts, table, obj),
        (None, None) => Err(CollectError::Usage("give --object (live) or --replay FILE")),
    }
}

/// The loop over `source`: a snapshot per window it closes, then the final one (with the
/// counters the source ends with). A source error ends the loop like a signal, and is
/// returned once the final snapshot is written.
fn collect(
    source: &mut dyn Source,
    pipe: &mut Pipeline,
    outputs: &mut Outputs,
    flush: Duration,
) -> Result<Summary, CollectError> {
    let mut ended = Ok(());
    while !stop_requested() {
        match source.next(pipe) {
            Ok(Step::Continue) => {}
            Ok(Step::Window(k)) => {
                crate::timings::mark("source");
                let mut s = pipe.snapshot(&k, SystemTime::now(), false);
                crate::timings::mark("snapshot");
                outputs.emit(pipe, &mut s, &k);
                let window = s.snapshot;
                drop(s);
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
    let mut s = pipe.snapshot(&k, SystemTime::now(), true);
    let ok = s.invariant.ok;
    if !ok {
        eprintln!(
            "probegen collect: invariant violated: {}",
            serde_json::to_string(&s.invariant).unwrap_or_default()
        );
    }
    outputs.emit(pipe, &mut s, &k);
    drop(s);
    source.report(pipe, &k);
    if outputs.serves_metrics() {
        sleep_unless_stopped(source.linger(), Duration::from_millis(50));
    }
    let sum = summary(pipe, &k, outputs, ok, flush);
    ended.map(|()| sum)
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

fn open_outputs(opts: &Options, clock: ChainClock) -> Result<Outputs, CollectError> {
    let (outputs, bound) = Outputs::new(opts, clock)?;
    if let Some(a) = bound {
        eprintln!("probegen collect: metrics on http://{a}/metrics");
    }
    Ok(outputs)
}

fn run_replay(
    opts: &Options,
    table: Arc<ProbeTable>,
    file: &Path,
) -> Result<Summary, CollectError> {
    let mut source = ReplaySource::open(
        file,
        table.manifest_hash.clone(),
        ReplayOptions {
            host: opts.host.clone(),
            window: opts.replay_window,
            pace: opts.replay_pace,
            linger: opts.linger,
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
        proc_cache(opts, None),
    );
    pipe.set_attached(Vec::new());
    let mut outputs = open_outputs(opts, ChainClock::LastRecord)?;
    pipe.start_window(SystemTime::now());
    collect(&mut source, &mut pipe, &mut outputs, opts.clickhouse_flush)
}

fn run_live(
    opts: &Options,
    table: Arc<ProbeTable>,
    object: &Path,
) -> Result<Summary, CollectError> {
    let t0 = Instant::now();
    let loaded = crate::live::load(
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
        proc_cache(opts, Some(PathBuf::from("/sys/fs/cgroup"))),
    );
    pipe.set_attached(loaded.attached.clone());
    // the records' clock is this kernel's CLOCK_MONOTONIC: an open chain is complete once its
    // gap has passed
    pipe.set_chain_rule(crate::chains::DEFAULT_GAP_NS, ChainClock::Monotonic);
    let timing = Timing {
        interval: opts.interval,
        drain: opts.drain,
        idle_wait: opts.idle_wait,
        duration: opts.duration,
    };
    let mut source = LiveSource::new(loaded, table, timing, record)?;
    let mut outputs = open_outputs(opts, ChainClock::Monotonic)?;
    outputs.update_metrics(&pipe, &Arc::default());
    pipe.start_window(SystemTime::now());
    collect(&mut source, &mut pipe, &mut outputs, opts.clickhouse_flush)
}
