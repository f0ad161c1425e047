//! `collect`: the runtime collector (crate `collector`) with its flags, the same in
//! `probegen collect` and `probegen-agent collect`; the run's events printed on stderr.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use collector::{ChainClock, CollectError, Event, Hooks, Options, Sink};

use crate::flags::{parse_duration, parse_listen};
use crate::fleet::{Fleet, FleetArgs};
use crate::AgentError;
use sink_prometheus::{PrometheusSink, RunningSet, WaitingMetrics};

#[derive(clap::Args, Clone)]
pub struct CollectArgs {
    /// Settings from FILE (`key = value` lines, keys as the long flags: interval, out,
    /// bundle, clickhouse, job-vars, ...); a flag on the command line wins over its line
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The probe set's manifest.yaml
    #[arg(long, value_name = "FILE", required_unless_present = "bundle")]
    pub manifest: Option<PathBuf>,
    /// The compiled probes.bpf.o (live collection)
    #[arg(long, value_name = "FILE", conflicts_with = "replay")]
    pub object: Option<PathBuf>,
    /// Pick the set from a bundle (`probegen bundle`): the one built for the running kernel
    /// release (else the newest of its series) and the loaded RDMA vendor driver; with no
    /// such set, one line and a recheck every --interval (exit 2 only with --strict)
    #[arg(long, value_name = "DIR", conflicts_with_all = ["manifest", "object"])]
    pub bundle: Option<PathBuf>,
    /// Without a set of the running kernel's series, run the nearest series' set (each probe
    /// checked against this kernel's BTF and kallsyms, those that match attached); `false`:
    /// only sets of the series, else none (`probegen_no_set{reason="no_exact_set"}`)
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub nearest_set: bool,
    /// Tests: this kernel release instead of `uname -r` (and /proc/version)
    #[arg(long, value_name = "RELEASE", hide = true, requires = "bundle")]
    pub kernel_release: Option<String>,
    /// Tests: where /sys/module/<driver>, /sys/kernel/btf/vmlinux, /proc/kallsyms and
    /// /proc/sys/kernel/kptr_restrict are looked up (default /)
    #[arg(long, value_name = "DIR", hide = true, default_value = "/")]
    pub sys_root: PathBuf,
    /// Feed recorded records through the pipeline instead of BPF (JSONL from --record, or
    /// raw concatenated records when the name ends in .bin/.raw)
    #[arg(long, value_name = "FILE")]
    pub replay: Option<PathBuf>,
    /// Replay without counters: one snapshot per N records (default: one at the end)
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub replay_window: usize,
    /// Snapshot interval
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub interval: std::time::Duration,
    /// Ring buffer drain period while records keep coming (the probes do not wake the
    /// collector per record)
    #[arg(long, default_value = "10ms", value_parser = parse_duration)]
    pub drain: std::time::Duration,
    /// Longest sleep while no record arrives (the first record wakes the collector at once;
    /// the next snapshot bounds the sleep too)
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub idle_wait: std::time::Duration,
    /// JSON Lines output (`-`: stdout)
    #[arg(
        long,
        value_name = "FILE.jsonl",
        default_value = "probegen-snapshots.jsonl"
    )]
    pub out: PathBuf,
    /// Rotate the JSONL file past this size in bytes (0: never)
    #[arg(long, value_name = "BYTES", default_value_t = 64 << 20)]
    pub rotate_bytes: u64,
    /// Rotated files kept (FILE.1 .. FILE.N)
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub rotate_keep: usize,
    /// Serve Prometheus metrics on ADDR:PORT (PORT alone binds 127.0.0.1)
    #[arg(long, value_name = "127.0.0.1:PORT")]
    pub metrics: Option<String>,
    /// Fail instead of skipping probes whose target the running kernel lacks
    #[arg(long)]
    pub strict: bool,
    /// Stop after this long (final snapshot, exit 0)
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<std::time::Duration>,
    /// Ring buffer size in bytes (power of two; default 4 MiB)
    #[arg(long, value_name = "N", default_value_t = 4 << 20)]
    pub ringbuf_bytes: u32,
    /// Records kept per snapshot; past it they are counted as userspace drops
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub batch_cap: usize,
    /// Environment variables reported as `job` (comma-separated, at most 32; a value longer
    /// than 256 bytes is cut and marked `…[truncated N bytes]`)
    #[arg(
        long,
        value_name = "A,B",
        value_delimiter = ',',
        default_value = "SLURM_JOB_ID,TORCHELASTIC_RUN_ID,RANK,LOCAL_RANK,JOB_ID"
    )]
    pub job_vars: Vec<String>,
    /// Also write what was read as a replay file (live)
    #[arg(long, value_name = "FILE.jsonl")]
    pub record: Option<PathBuf>,
    /// After a replay, keep serving --metrics this long (or until SIGINT/SIGTERM)
    #[arg(long, value_parser = parse_duration)]
    pub linger: Option<std::time::Duration>,
    /// Where to read /proc/<pid>/{environ,cgroup} (default /proc live, off for replay)
    #[arg(long, value_name = "DIR")]
    pub proc_root: Option<PathBuf>,
    /// Listen on this Unix socket (mode 0600) for `probegen-agent release MODULE`: a driver's
    /// probes are detached before it unloads (the package's modprobe.d rule)
    #[arg(long, value_name = "SOCKET")]
    pub control: Option<PathBuf>,
    /// Set by `--bundle`'s choice (no flag): the set and how it matched
    #[arg(skip)]
    pub set: Option<RunningSet>,
    #[command(flatten)]
    pub fleet: FleetArgs,
    #[command(flatten)]
    pub baseline: crate::baseline::BaselineArgs,
    #[command(flatten)]
    pub providers: crate::providers::ProviderArgs,
}

/// Runs the collector as the flags say; the summary and the events go to stderr.
pub fn collect(a: &CollectArgs) -> Result<ExitCode, AgentError> {
    let mut a = a.clone();
    let mut waiting = None;
    let mut running = None;
    if let Some(dir) = &a.bundle {
        // bound before the wait: a host waiting for a set is seen as one, not as a dead target
        if let Some(addr) = a.metrics.as_deref() {
            let addr = parse_listen(addr)?;
            let m = WaitingMetrics::bind(addr)
                .map_err(|source| collector::CollectError::Metrics { addr, source })?;
            eprintln!("probegen collect: metrics on http://{}/metrics", m.addr());
            waiting = Some(m);
        }
        let query = crate::choose::BundleQuery {
            dir,
            kernel_release: a.kernel_release.as_deref(),
            sys_root: &a.sys_root,
            fallback: if a.nearest_set {
                bundle::Fallback::Nearest
            } else {
                bundle::Fallback::SeriesOnly
            },
            strict: a.strict,
            live: a.replay.is_none(),
            interval: a.interval,
            duration: a.duration,
        };
        match crate::choose::choose(&query, waiting.as_mut())? {
            Some(set) => {
                a.manifest = Some(set.manifest);
                // a replay takes the chosen manifest and no object
                a.object = a.replay.is_none().then_some(set.object);
                a.set = Some(set.running.clone());
                running = Some(set.running);
            }
            None => return Ok(ExitCode::SUCCESS),
        }
    }
    let a = &a;
    let (opts, sinks) = options(a)?;
    let mut keep = None;
    let live = opts.object.is_some() && opts.replay.is_none();
    let providers = live
        .then(|| {
            let proc_root = opts.proc_root.clone().unwrap_or_else(|| "/proc".into());
            a.providers.options(proc_root, &opts.job_vars)
        })
        .flatten();
    if live {
        // the provider stage reads other users' /proc/<pid>/maps and libraries, as the job
        // variables do
        let job_vars =
            (!opts.job_vars.is_empty() && opts.proc_root.is_some()) || providers.is_some();
        if let Some(line) = crate::caps::check_this_process(job_vars).map_err(AgentError::Usage)? {
            eprintln!("probegen collect: {line}");
        }
        // a port bound for the wait is bound: nothing to keep for it
        let low_port = waiting.is_none() && sinks.metrics.is_some_and(|m| m.port() < 1024);
        keep = Some(crate::caps::keep_after_attach(job_vars, low_port));
    }
    let mut hooks = Printer {
        sinks,
        out: &a.out,
        keep,
        live,
        providers,
        metrics: waiting.zip(running),
    };
    let s = collector::run(&opts, &mut hooks)?;
    eprintln!(
        "probegen collect: {} snapshots; {}/{} probes attached; failures {}, records {}, dropped kernel {} userspace {}; invariant {}; sink errors {}{}",
        s.snapshots,
        s.attached,
        s.probes,
        s.failures,
        s.received,
        s.dropped_kernel,
        s.dropped_userspace,
        if s.invariant_ok { "ok" } else { "VIOLATED" },
        s.sink_errors,
        s.signal.map(|n| format!("; stopped by signal {n}")).unwrap_or_default()
    );
    crate::fleet::report(&s);
    Ok(ExitCode::SUCCESS)
}

/// The sinks the agent adds to a run: ClickHouse (`--clickhouse`), the exposition
/// (`--metrics`).
pub struct Sinks {
    pub fleet: Fleet,
    pub metrics: Option<SocketAddr>,
}

/// The collector's options from the flags, and the sinks' (kept apart: the collector knows
/// neither ClickHouse nor Prometheus).
pub fn options(a: &CollectArgs) -> Result<(Options, Sinks), AgentError> {
    let metrics = a.metrics.as_deref().map(parse_listen).transpose()?;
    if a.interval.is_zero() {
        return Err(AgentError::Usage("--interval must be positive".into()));
    }
    if a.job_vars.len() > collector::JOB_VARS_MAX {
        return Err(AgentError::Usage(format!(
            "--job-vars: {} names: expected at most {}",
            a.job_vars.len(),
            collector::JOB_VARS_MAX
        )));
    }
    let fleet = a.fleet.resolve()?;
    let manifest = a
        .manifest
        .clone()
        .ok_or_else(|| AgentError::Usage("--manifest or --bundle is needed".into()))?;
    let opts = Options {
        manifest,
        object: a.object.clone(),
        replay: a.replay.clone(),
        replay_window: a.replay_window,
        interval: a.interval,
        drain: a.drain.max(std::time::Duration::from_millis(1)),
        idle_wait: a.idle_wait,
        out: a.out.clone(),
        rotate_bytes: a.rotate_bytes,
        rotate_keep: a.rotate_keep,
        strict: a.strict,
        duration: a.duration,
        ringbuf_bytes: Some(a.ringbuf_bytes),
        batch_cap: a.batch_cap,
        job_vars: a
            .job_vars
            .iter()
            .filter(|v| !v.is_empty())
            .cloned()
            .collect(),
        record: a.record.clone(),
        linger: a.linger,
        proc_root: match (&a.proc_root, &a.replay) {
            (Some(p), _) => Some(p.clone()),
            (None, Some(_)) => None,
            (None, None) => Some(PathBuf::from("/proc")),
        },
        sink_flush: a.fleet.clickhouse_flush,
        host: a.fleet.host.clone(),
        replay_pace: a.fleet.replay_pace,
        control: a.control.clone(),
        baseline: a.baseline.resolve(a.interval)?,
        set: a.set.clone(),
    };
    Ok((opts, Sinks { fleet, metrics }))
}

/// The run's hooks for the command: the ClickHouse sink when asked for, every event as one
/// line on stderr.
struct Printer<'a> {
    sinks: Sinks,
    out: &'a std::path::Path,
    /// live: the capabilities kept once attached (the rest are dropped before the sinks start
    /// their threads)
    keep: Option<u64>,
    /// `--metrics` bound while the bundle's set was chosen, and that set
    metrics: Option<(WaitingMetrics, RunningSet)>,
    /// a live run (else a replay)
    live: bool,
    /// `--provider-probes` (live)
    providers: Option<stage_providers::ProviderStageOptions>,
}

impl Hooks for Printer<'_> {
    fn sinks(&mut self, clock: ChainClock) -> Result<Vec<Box<dyn Sink>>, CollectError> {
        // live, called once attached: what is no longer needed goes now
        match self.keep.take().map(crate::caps::drop_all_but) {
            Some(Ok(Some(line))) => eprintln!("probegen collect: {line}"),
            Some(Err(e)) => eprintln!("probegen collect: capabilities not dropped: {e}"),
            _ => {}
        }
        let mut sinks: Vec<Box<dyn Sink>> = self
            .sinks
            .fleet
            .open(self.out, clock)?
            .into_iter()
            .collect();
        if let Some(addr) = self.sinks.metrics {
            let m = match self.metrics.take() {
                // the socket the wait served, now from the sink's thread
                Some((waiting, set)) => waiting.into_sink(set),
                None => PrometheusSink::serve(addr).inspect(|m| {
                    eprintln!("probegen collect: metrics on http://{}/metrics", m.addr());
                }),
            }
            .map_err(|source| CollectError::Metrics { addr, source })?;
            sinks.push(Box::new(m));
        }
        Ok(sinks)
    }

    /// Live: the RDMA ports' error counters, and with `--provider-probes` the provider stage
    /// (a replay: none, the host it runs on is not the one recorded).
    fn stages(&mut self) -> Result<Vec<Box<dyn collector::Stage>>, CollectError> {
        if !self.live {
            return Ok(Vec::new());
        }
        let ports = stage_ports::PortStage::new(stage_ports::SYSFS_INFINIBAND.into());
        let mut stages: Vec<Box<dyn collector::Stage>> = vec![Box::new(ports)];
        if let Some(o) = self.providers.take() {
            stages.push(crate::providers::start(&o)?);
        }
        Ok(stages)
    }

    fn event(&mut self, event: Event<'_>) {
        print_event(&event);
    }
}

fn print_event(event: &Event<'_>) {
    match event {
        Event::Attached {
            attached,
            probes,
            by_layer,
            millis,
        } => eprintln!(
            "probegen collect: attached {attached}/{probes} programs ({by_layer}) in {millis:.1} ms"
        ),
        Event::Chain(c) => eprintln!("probegen collect: chain {}", c.log_line()),
        Event::Warning(w) => eprintln!("probegen collect: {w}"),
        Event::MoreChains { more, snapshot } => {
            eprintln!("probegen collect: ... and {more} more chains in snapshot {snapshot}")
        }
        Event::SinkFailed {
            sink,
            snapshot,
            error,
            errors,
        } => eprintln!(
            "probegen collect: {sink}: snapshot {snapshot} not {}: {error} (sink errors: {errors})",
            error.verb()
        ),
        Event::InvariantViolated(inv) => eprintln!(
            "probegen collect: invariant violated: {}",
            serde_json::to_string(inv).unwrap_or_default()
        ),
    }
}
