//! Prometheus text exposition (format 0.0.4) of the cumulative counters, served by a tiny
//! HTTP server (`GET /metrics`, [`server`]: one poll loop, a deadline per connection, so a slow
//! client never delays a scrape). The text is rendered when scraped, from the state of the
//! last snapshot (or of the start): an idle collector that nobody scrapes renders nothing.
//!
//! Metrics, labelled `function` and `module` (the probe):
//! `probegen_calls_total`, `probegen_failures_total`, `probegen_errno_total{errno="EFAULT"}`,
//! `probegen_data_plane_errors_total{status="IB_WC_RETRY_EXC_ERR",owner="network"}`
//! (data-plane probes; `owner` from the status, empty for a flush), unlabelled
//! `probegen_qp_death_jobs_total` (jobs whose QPs died here, each once),
//! `probegen_probe_attached` (1/0), `probegen_records_total` (kept in snapshots),
//! `probegen_userspace_drops_total`, `probegen_runs_missed_total` (runs the kernel skipped); unlabelled: `probegen_ring_drops_total` (kernel ring
//! buffer full), `probegen_decode_errors_total`, `probegen_seq_gaps_total`,
//! `probegen_sink_errors_total`, `probegen_snapshots_total`; per sink that has a state (the
//! ClickHouse spool, any sink the embedder adds) `probegen_sink_*{sink="NAME"}` ([`sinks`]);
//! `probegen_chains_total{owner,module,origin,errno}`
//! and `probegen_kernel_info{kernel}` (the tickets by spread);
//! `probegen_port_counter_total{device,port,counter}`, each RDMA port error counter's value
//! as the NIC reports it (a driver reload drops it: Prometheus sees the reset). Every counter of something lost has an alert
//! in `deploy/prometheus/probegen-rules.yml` (`tests/hostile_metrics.rs` holds it).
//!
//! A `collector::Sink` that the embedder adds (`--metrics`); it reads the snapshot and its
//! run totals, so the run writes it after the JSONL line (`Sink::exposes`).

mod label;
mod server;
mod sinks;
mod waiting;

pub use collector::{RunningSet, SetMatch};
pub use waiting::NoSet;

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use label::esc;
use server::Server;

use collector::{
    errno_label, AgentCost, AttachStatus, BaselineOut, KernelTotals, Owner, PortCounterKey,
    ProbeTable, SharedPart, Sink, SinkError, SinkStatus, Snapshot, TraceCounts,
};

/// Everything the exposition shows.
struct MetricsInput<'a> {
    pub table: &'a ProbeTable,
    pub kernel: &'a KernelTotals,
    pub received: &'a [u64],
    pub dropped_userspace: &'a [u64],
    pub attached: &'a [AttachStatus],
    pub sink_errors: u64,
    /// samples that could not be decoded, this run
    pub decode_errors: u64,
    /// records missing from the per-CPU sequence numbers, this run
    pub seq_gaps: u64,
    pub snapshots: u64,
    /// chains reported so far, per (owner, origin probe id, origin errno)
    pub chains: &'a std::collections::BTreeMap<(Owner, u32, u32, bool), u64>,
    /// the sinks that have a state (the ClickHouse spool)
    pub sinks: &'a [SinkStatus],
    /// jobs whose QPs died on this host, this run ([`QpDeathJobs`])
    pub qp_death_jobs: u64,
    /// end of the last snapshot's window (0: none yet)
    pub last_snapshot_unix_ns: u64,
    /// what the agent costs (live)
    pub agent: Option<AgentCost>,
    /// the host's kernel release (empty: no snapshot yet)
    pub release: &'a str,
    /// with `--baseline`: the last snapshot's
    pub baseline: Option<&'a BaselineMetrics>,
    /// the RDMA ports' error counters as last read (live)
    pub ports: &'a [(PortCounterKey, u64)],
    /// `--provider-probes`: the provider stage's part of the last snapshot
    pub providers: Option<&'a collector::ProvidersOut>,
}

/// What the exposition shows of the baseline: per handler its distinct success shapes and
/// traced successes (never a label per shape or path: the count of shapes is bounded, their
/// names are not a label), the trace ring's counts, the jobs whose handler mix differs.
#[derive(Debug, Clone, Default, PartialEq)]
struct BaselineMetrics {
    /// (handler function, shapes, successes)
    handlers: Vec<(String, usize, u64)>,
    records: TraceCounts,
    jobs_differing: usize,
}

impl BaselineMetrics {
    fn of(b: &BaselineOut) -> Self {
        BaselineMetrics {
            handlers: b
                .handlers
                .iter()
                .map(|h| (h.function.clone(), h.shapes.len(), h.successes))
                .collect(),
            records: b.records,
            jobs_differing: b.jobs.iter().filter(|j| !j.differs.is_empty()).count(),
        }
    }
}

/// `probegen_baseline_*` (with `--baseline`).
fn render_baseline(o: &mut String, b: &BaselineMetrics) {
    let _ = writeln!(
        o,
        "# HELP probegen_baseline_shapes Distinct success paths of a handler in the baseline.\n\
         # TYPE probegen_baseline_shapes gauge"
    );
    for (f, n, _) in &b.handlers {
        let _ = writeln!(o, "probegen_baseline_shapes{{handler=\"{}\"}} {n}", esc(f));
    }
    let _ = writeln!(
        o,
        "# HELP probegen_baseline_successes_total Traced successful calls of a handler kept in the baseline.\n\
         # TYPE probegen_baseline_successes_total counter"
    );
    for (f, _, n) in &b.handlers {
        let _ = writeln!(
            o,
            "probegen_baseline_successes_total{{handler=\"{}\"}} {n}",
            esc(f)
        );
    }
    let r = &b.records;
    for (name, help, v) in [
        (
            "probegen_baseline_traces_produced_total",
            "Call traces the kernel produced (the baseline ring).",
            r.produced,
        ),
        (
            "probegen_baseline_traces_received_total",
            "Call traces the agent read.",
            r.received,
        ),
        (
            "probegen_baseline_traces_dropped_total",
            "Call traces the baseline ring had no room for (samples: never a failure record).",
            r.dropped,
        ),
    ] {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}");
    }
    let _ = writeln!(
        o,
        "# HELP probegen_baseline_jobs_differing Jobs whose main handler of a verb is no other job's.\n\
         # TYPE probegen_baseline_jobs_differing gauge\nprobegen_baseline_jobs_differing {}",
        b.jobs_differing
    );
}

fn render(m: &MetricsInput<'_>) -> String {
    let mut o = String::with_capacity(256 + m.table.probes.len() * 400);
    let labels: Vec<String> = m
        .table
        .probes
        .iter()
        .map(|p| {
            format!(
                "function=\"{}\",module=\"{}\"",
                esc(&p.function),
                esc(&p.module)
            )
        })
        .collect();
    render_per_probe(&mut o, m, &labels);
    render_errnos(&mut o, m, &labels);
    render_attached(&mut o, m, &labels);
    for (name, help, v) in [
        (
            "probegen_ring_drops_total",
            "Failure records the kernel could not put into the ring buffer.",
            m.kernel.drops,
        ),
        (
            "probegen_decode_errors_total",
            "Ring buffer samples that could not be decoded (wrong size, unknown probe or CPU).",
            m.decode_errors,
        ),
        (
            "probegen_seq_gaps_total",
            "Records missing from the per-CPU sequence numbers.",
            m.seq_gaps,
        ),
        (
            "probegen_sink_errors_total",
            "Snapshot sink write errors (JSONL, spool).",
            m.sink_errors,
        ),
        (
            "probegen_snapshots_total",
            "Snapshots written.",
            m.snapshots,
        ),
        (
            "probegen_qp_death_jobs_total",
            "Jobs whose QPs died on this host (each counted once).",
            m.qp_death_jobs,
        ),
    ] {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}");
    }
    render_chains(&mut o, m);
    let _ = writeln!(
        o,
        "# HELP probegen_last_snapshot_timestamp_seconds End of the last snapshot's window.\n\
         # TYPE probegen_last_snapshot_timestamp_seconds gauge\n\
         probegen_last_snapshot_timestamp_seconds {}.{:03}",
        m.last_snapshot_unix_ns / 1_000_000_000,
        m.last_snapshot_unix_ns % 1_000_000_000 / 1_000_000
    );
    sinks::render_sinks(&mut o, m.sinks);
    if let Some(a) = &m.agent {
        render_cost(&mut o, a);
    }
    if let Some(b) = m.baseline {
        render_baseline(&mut o, b);
    }
    render_ports(&mut o, m.ports);
    if let Some(p) = m.providers {
        render_providers(&mut o, p);
    }
    o
}

/// `--provider-probes`: the error completions only a user-space provider sees, by status;
/// those the uprobe's ring had no room for; the libraries found, by what was done with them.
fn render_providers(o: &mut String, p: &collector::ProvidersOut) {
    let _ = writeln!(
        o,
        "# HELP probegen_provider_error_completions_total Error completions a user-space provider library saw (libmlx5), by the status it reports to the job.\n\
         # TYPE probegen_provider_error_completions_total counter"
    );
    let provider = collector::MLX5_PROVIDER;
    for (status, v) in &p.by_status {
        let _ = writeln!(
            o,
            "probegen_provider_error_completions_total{{provider=\"{provider}\",status=\"{status}\"}} {v}"
        );
    }
    let _ = writeln!(
        o,
        "# HELP probegen_provider_error_completions_dropped_total Error completions the provider uprobe's ring had no room for.\n\
         # TYPE probegen_provider_error_completions_dropped_total counter\n\
         probegen_provider_error_completions_dropped_total {}",
        p.dropped
    );
    let _ = writeln!(
        o,
        "# HELP probegen_provider_libraries Provider libraries the host's processes map, by what the agent does with each (unresolved: a build the provider table does not name, never probed).\n\
         # TYPE probegen_provider_libraries gauge"
    );
    for state in ["probed", "unresolved", "detached", "failed"] {
        let n = p
            .libraries
            .iter()
            .filter(|l| l.state.as_str() == state)
            .count();
        let _ = writeln!(o, "probegen_provider_libraries{{state=\"{state}\"}} {n}");
    }
}

/// The ports' error counters as the NIC counts them: the hardware's value, not the run's
/// sum, so an agent restart is no reset and a driver reload (the value drops) is one.
fn render_ports(o: &mut String, ports: &[(PortCounterKey, u64)]) {
    if ports.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "# HELP probegen_port_counter_total An RDMA port's error counter (hw_counters/, counters/) as the device reports it.\n\
         # TYPE probegen_port_counter_total counter"
    );
    for ((device, port, counter), v) in ports {
        let _ = writeln!(
            o,
            "probegen_port_counter_total{{device=\"{}\",port=\"{port}\",counter=\"{}\"}} {v}",
            esc(device),
            esc(counter)
        );
    }
}

/// The agent's own cost: CPU, memory, and (with `kernel.bpf_stats_enabled`) its programs'.
fn render_cost(o: &mut String, a: &AgentCost) {
    let secs = |ns: u64| format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000);
    let mut series = vec![
        (
            "probegen_agent_cpu_seconds_total",
            "counter",
            "CPU time of the agent, all threads, user and system.",
            secs(a.cpu_ns),
        ),
        (
            "probegen_agent_resident_memory_bytes",
            "gauge",
            "Resident memory of the agent (the ring buffer and maps are charged to its cgroup, not here).",
            a.rss_bytes.to_string(),
        ),
    ];
    if let (Some(ns), Some(runs)) = (a.bpf_run_ns, a.bpf_runs) {
        series.push((
            "probegen_bpf_run_seconds_total",
            "counter",
            "Run time of the agent's BPF programs (kernel.bpf_stats_enabled).",
            secs(ns),
        ));
        series.push((
            "probegen_bpf_runs_total",
            "counter",
            "Runs of the agent's BPF programs (kernel.bpf_stats_enabled).",
            runs.to_string(),
        ));
    }
    for (name, kind, help, v) in series {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}");
    }
}

/// The per-probe counters, one series per probe (`labels` in probe order).
fn render_per_probe(o: &mut String, m: &MetricsInput<'_>, labels: &[String]) {
    let per_probe = |o: &mut String, name: &str, help: &str, get: &dyn Fn(u32) -> u64| {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} counter");
        for (p, l) in m.table.probes.iter().zip(labels) {
            let _ = writeln!(o, "{name}{{{l}}} {}", get(p.id));
        }
    };
    let at = |v: &[u64], id: u32| v.get(id as usize).copied().unwrap_or(0);
    per_probe(
        o,
        "probegen_calls_total",
        "Calls of the probed function.",
        &|id| m.kernel.calls.get(&id).copied().unwrap_or(0),
    );
    per_probe(
        o,
        "probegen_failures_total",
        "Failed returns of the probed function.",
        &|id| m.kernel.failures.get(&id).copied().unwrap_or(0),
    );
    per_probe(
        o,
        "probegen_records_total",
        "Failure records received and kept in snapshots.",
        &|id| at(m.received, id),
    );
    per_probe(
        o,
        "probegen_userspace_drops_total",
        "Failure records dropped by the collector (batch cap).",
        &|id| at(m.dropped_userspace, id),
    );
    per_probe(
        o,
        "probegen_runs_missed_total",
        "Returns the kernel did not run the probe's program for (it was already running on that CPU): failures neither counted nor recorded.",
        &|id| m.kernel.missed.get(&id).copied().unwrap_or(0),
    );
}

fn render_errnos(o: &mut String, m: &MetricsInput<'_>, labels: &[String]) {
    let _ = writeln!(
        o,
        "# HELP probegen_errno_total Failures by errno.\n# TYPE probegen_errno_total counter"
    );
    // a data-plane probe's codes are statuses, not errnos: probegen_data_plane_errors_total
    for (p, l) in m.table.probes.iter().zip(labels) {
        if p.data_plane_status(0).is_some() {
            continue;
        }
        // several kernel errnos may share a label only if unnamed; sum them
        let mut by_label: std::collections::BTreeMap<String, u64> = Default::default();
        for (&(_, err), &v) in m.kernel.errnos.range((p.id, 0)..=(p.id, u32::MAX)) {
            *by_label.entry(errno_label(err).into_owned()).or_default() += v;
        }
        for (e, v) in by_label {
            let _ = writeln!(o, "probegen_errno_total{{{l},errno=\"{}\"}} {v}", esc(&e));
        }
    }
    render_data_plane(o, m, labels);
}

/// Data-plane errors by status (`IB_WC_RETRY_EXC_ERR`, `IB_EVENT_CQ_ERR`): each QP's first
/// error at a probe, the one that is recorded; the rest of a dying QP's errors are that
/// probe's `probegen_calls_total - probegen_failures_total` (counted per QP, not recorded).
fn render_data_plane(o: &mut String, m: &MetricsInput<'_>, labels: &[String]) {
    let mut header = false;
    for (p, l) in m.table.probes.iter().zip(labels) {
        if p.data_plane_status(0).is_none() {
            continue;
        }
        if !header {
            let _ = writeln!(
                o,
                "# HELP probegen_data_plane_errors_total Data-plane errors by status (per QP the first).\n# TYPE probegen_data_plane_errors_total counter"
            );
            header = true;
        }
        for (&(_, code), &v) in m.kernel.errnos.range((p.id, 0)..=(p.id, u32::MAX)) {
            let status = p.data_plane_status(code as i32).unwrap_or_default();
            // who gets the ticket (wire::qp_owner); a flush or the error state follows the
            // QP's first error: empty
            let owner = collector::qp_owner(&status).map_or("", |(o, _)| o.as_str());
            let _ = writeln!(
                o,
                "probegen_data_plane_errors_total{{{l},status=\"{}\",owner=\"{owner}\"}} {v}",
                esc(&status)
            );
        }
    }
}

fn render_attached(o: &mut String, m: &MetricsInput<'_>, labels: &[String]) {
    let _ = writeln!(
        o,
        "# HELP probegen_probe_attached 1 when the probe's program is attached.\n# TYPE probegen_probe_attached gauge"
    );
    for (p, l) in m.table.probes.iter().zip(labels) {
        let a = m.attached.iter().any(|a| a.probe == p.id && a.attached);
        let _ = writeln!(o, "probegen_probe_attached{{{l}}} {}", u8::from(a));
    }
}

/// `probegen_chains_total{owner,module,origin,errno,expected}`: failure chains by who gets the
/// ticket, the origin's module and function, the origin's errno and whether the baseline found
/// the failure expected (`false` without `--baseline`; one series per distinct label set; the
/// module says whose code a regression is in: `deploy/prometheus/probegen-tickets.yml`). The
/// alert rules leave `expected="true"` out.
/// `probegen_kernel_info{kernel}` (1): the host's kernel release, which the ticket rules join on.
fn render_chains(o: &mut String, m: &MetricsInput<'_>) {
    if !m.release.is_empty() {
        let _ = writeln!(
            o,
            "# HELP probegen_kernel_info The host's kernel release (1).\n\
             # TYPE probegen_kernel_info gauge\nprobegen_kernel_info{{kernel=\"{}\"}} 1",
            esc(m.release)
        );
    }
    let _ = writeln!(
        o,
        "# HELP probegen_chains_total Failure chains (failed syscalls) by owner, origin module and function, and errno.\n\
         # TYPE probegen_chains_total counter"
    );
    let mut by_label: std::collections::BTreeMap<
        (Owner, &str, &str, std::borrow::Cow<'static, str>, bool),
        u64,
    > = Default::default();
    for (&(owner, probe, err, expected), &n) in m.chains {
        let (module, origin) = m
            .table
            .get(probe)
            .map_or(("?", "?"), |p| (p.module.as_str(), p.function.as_str()));
        *by_label
            .entry((owner, module, origin, errno_label(err), expected))
            .or_default() += n;
    }
    for ((owner, module, origin, errno, expected), n) in by_label {
        let _ = writeln!(
            o,
            "probegen_chains_total{{owner=\"{owner}\",module=\"{}\",origin=\"{}\",errno=\"{}\",expected=\"{expected}\"}} {n}",
            esc(module),
            esc(origin),
            esc(&errno)
        );
    }
}

/// What the exposition shows, owned: the server thread renders it when scraped, so an idle
/// collector nobody scrapes renders nothing.
#[derive(Debug, Clone, Default)]
struct MetricsState {
    pub table: Arc<ProbeTable>,
    pub kernel: Arc<KernelTotals>,
    pub received: Vec<u64>,
    pub dropped_userspace: Vec<u64>,
    pub attached: SharedPart<Vec<AttachStatus>>,
    pub sink_errors: u64,
    /// summed over the snapshots' windows (the snapshot carries the window's)
    pub decode_errors: u64,
    pub seq_gaps: u64,
    pub snapshots: u64,
    pub chains: Arc<std::collections::BTreeMap<(Owner, u32, u32, bool), u64>>,
    pub sinks: Vec<SinkStatus>,
    pub last_snapshot_unix_ns: u64,
    pub agent: Option<AgentCost>,
    pub release: String,
    /// the bundle's set this run was chosen from (`--bundle`)
    pub set: Option<RunningSet>,
    pub baseline: Option<BaselineMetrics>,
    pub ports: Arc<Vec<(PortCounterKey, u64)>>,
    pub providers: Option<collector::ProvidersOut>,
    pub qp_jobs: QpDeathJobs,
}

/// The jobs whose QPs died on this host during the run (a data-plane record of a QP, with its
/// owner's job: its id, `wire::JOB_ID_VARS` as ClickHouse's `job_id`, else its cgroup; a
/// rank is not a job): a host whose QPs die across jobs is the host's problem (its NIC, port
/// or link), not one job's configuration. Counted once per job; the set that remembers them is bounded ([`QP_JOBS_REMEMBERED`]): past it, it
/// starts over and a job seen again counts again (an over-count, never a missed job).
#[derive(Debug, Clone, Default)]
struct QpDeathJobs {
    seen: std::collections::BTreeSet<String>,
    total: u64,
}

/// Jobs the QP-death count remembers.
const QP_JOBS_REMEMBERED: usize = 4096;

impl QpDeathJobs {
    fn observe(&mut self, s: &Snapshot) {
        for r in &s.records.recs {
            let is_qp = s
                .records
                .table
                .get(r.raw.probe_id)
                .and_then(|p| p.data_plane_status(r.raw.err))
                .is_some()
                && r.raw.nargs >= 1
                && r.raw.args[0] != 0;
            let Some(info) = r.proc_info.as_deref().filter(|_| is_qp) else {
                continue;
            };
            // the job's id (as ClickHouse's `job_id`: a rank is not a job), else its cgroup
            let job = info.job_id().unwrap_or(&info.cgroup);
            if job.is_empty() {
                continue;
            }
            self.count(job);
        }
        self.observe_providers(s);
    }

    /// A job whose QP died: counted once (the set that remembers them is bounded).
    fn count(&mut self, job: &str) {
        if self.seen.len() >= QP_JOBS_REMEMBERED {
            self.seen.clear();
        }
        if self.seen.insert(job.to_string()) {
            self.total += 1;
        }
    }

    /// The QPs the provider stage saw die in this window (`--provider-probes`: on mlx5 the
    /// kernel never sees an error completion), their jobs counted the same way.
    fn observe_providers(&mut self, s: &Snapshot) {
        let Some(p) = &s.providers else {
            return;
        };
        for e in p.qps.iter().filter(|e| e.snapshot == s.snapshot) {
            let job = e.job_id().unwrap_or(&e.cgroup);
            if job.is_empty() {
                continue;
            }
            self.count(job);
        }
    }
}

impl MetricsState {
    /// Takes over `s`'s values and totals, reusing this state's allocations (an idle window
    /// changes the snapshot count and time; the lists are shared, not copied).
    pub(crate) fn update(&mut self, s: &Snapshot) {
        if !Arc::ptr_eq(&self.table, &s.records.table) {
            self.table = s.records.table.clone();
        }
        let t = &s.totals;
        self.kernel = t.kernel.clone();
        self.received.clone_from(&t.received);
        self.dropped_userspace.clone_from(&t.dropped_userspace);
        self.attached = s.attached.clone();
        self.sink_errors = t.sink_errors;
        // every snapshot reaches the exposition once: the windows' sums are the run's
        self.decode_errors += s.errors.decode;
        self.seq_gaps += s.seq_gaps;
        self.snapshots = t.snapshots;
        self.chains = t.chains.clone();
        self.sinks.clone_from(&t.sinks);
        self.last_snapshot_unix_ns = s.window.end_unix_ns;
        self.agent.clone_from(&s.agent);
        if self.release != s.kernel {
            self.release.clone_from(&s.kernel);
        }
        self.baseline = s.baseline.as_ref().map(BaselineMetrics::of);
        self.ports = t.ports.clone();
        self.providers.clone_from(&s.providers);
        self.qp_jobs.observe(s);
    }

    pub(crate) fn input(&self) -> MetricsInput<'_> {
        MetricsInput {
            table: &self.table,
            kernel: &self.kernel,
            received: &self.received,
            dropped_userspace: &self.dropped_userspace,
            attached: &self.attached,
            sink_errors: self.sink_errors,
            decode_errors: self.decode_errors,
            seq_gaps: self.seq_gaps,
            snapshots: self.snapshots,
            chains: &self.chains,
            sinks: &self.sinks,
            last_snapshot_unix_ns: self.last_snapshot_unix_ns,
            agent: self.agent.clone(),
            release: &self.release,
            baseline: self.baseline.as_ref(),
            ports: &self.ports,
            providers: self.providers.as_ref(),
            qp_death_jobs: self.qp_jobs.total,
        }
    }
}

/// The page the server thread serves.
#[derive(Debug)]
enum Page {
    /// a fixed text (tests)
    Text(String),
    /// rendered from the state at each request
    State(Box<MetricsState>),
}

impl Page {
    fn body(&self) -> String {
        match self {
            Page::Text(t) => t.clone(),
            Page::State(s) => {
                let mut o = render(&s.input());
                if let Some(set) = &s.set {
                    let by_layer = collector::AttachedByLayer::of(&s.table, &s.attached);
                    waiting::render_running(&mut o, set, &by_layer);
                }
                o
            }
        }
    }
}

/// The page shared with the server thread.
type PageHandle = Arc<Mutex<Page>>;

/// Binds and serves in a background thread ([`server`]); returns the bound address.
fn serve(addr: SocketAddr, page: PageHandle) -> std::io::Result<SocketAddr> {
    server::serve(
        addr,
        Box::new(move || page.lock().map(|p| p.body()).unwrap_or_default()),
    )
}

/// The Prometheus sink: each snapshot updates the page the server thread renders when
/// scraped.
pub struct PrometheusSink {
    page: PageHandle,
    addr: SocketAddr,
}

impl PrometheusSink {
    /// Binds `addr` and serves `/metrics` from a background thread.
    pub fn serve(addr: SocketAddr) -> std::io::Result<Self> {
        let page: PageHandle = Arc::new(Mutex::new(Page::Text(String::new())));
        let addr = serve(addr, page.clone())?;
        Ok(PrometheusSink { page, addr })
    }

    /// The bound address (an ephemeral port resolved).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    fn set(&self, f: impl FnOnce(&mut MetricsState)) {
        if let Ok(mut page) = self.page.lock() {
            match &mut *page {
                Page::State(s) => f(s),
                other => {
                    let mut s = MetricsState::default();
                    f(&mut s);
                    *other = Page::State(Box::new(s));
                }
            }
        }
    }
}

impl Sink for PrometheusSink {
    fn name(&self) -> &str {
        "metrics"
    }

    fn write(&mut self, snap: &Snapshot) -> Result<Option<SinkStatus>, SinkError> {
        self.set(|s| s.update(snap));
        Ok(None)
    }

    /// Before the first snapshot: the probes and whether each is attached, all else zero.
    fn start(
        &mut self,
        table: &Arc<ProbeTable>,
        attached: &SharedPart<Vec<AttachStatus>>,
        sinks: &[SinkStatus],
    ) {
        self.set(|s| {
            s.table = table.clone();
            s.attached = attached.clone();
            s.sinks = sinks.to_vec();
        });
    }

    fn exposes(&self) -> bool {
        true
    }
}

/// `/metrics` bound, served from the caller's thread while it waits for a set.
pub struct WaitingMetrics {
    server: Server,
    page: PageHandle,
    addr: SocketAddr,
}

impl WaitingMetrics {
    /// Binds `addr`; until [`WaitingMetrics::serve_for`] a scrape waits in the backlog.
    pub fn bind(addr: SocketAddr) -> std::io::Result<Self> {
        let page: PageHandle = Arc::new(Mutex::new(Page::Text(String::new())));
        let shared = page.clone();
        let server = Server::bind(
            addr,
            Box::new(move || shared.lock().map(|p| p.body()).unwrap_or_default()),
        )?;
        let addr = server.local_addr()?;
        Ok(WaitingMetrics { server, page, addr })
    }

    /// The bound address (an ephemeral port resolved).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves the page saying why no set runs for `wait`, from this thread.
    pub fn serve_for(&mut self, why: NoSet, kernel: &str, wait: Duration) {
        if let Ok(mut page) = self.page.lock() {
            *page = Page::Text(waiting::render_waiting(why, kernel));
        }
        self.server.serve_until(Some(Instant::now() + wait));
    }

    /// The sink of the run that found a set, on the same socket, served from its own thread
    /// from now on (start it after the capabilities are dropped).
    pub fn into_sink(self, set: RunningSet) -> std::io::Result<PrometheusSink> {
        let sink = PrometheusSink {
            page: self.page,
            addr: self.addr,
        };
        sink.set(|s| s.set = Some(set));
        self.server.spawn()?;
        Ok(sink)
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpStream;

    use super::*;

    /// A ClickHouse-like sink's status: a gauge and a setting.
    fn spool_status() -> SinkStatus {
        SinkStatus {
            sink: "clickhouse".into(),
            lost_records: 6,
            metrics: vec![
                collector::SinkMetric {
                    name: "spool_batches",
                    kind: collector::MetricKind::Gauge,
                    help: "Batches waiting.",
                    value: 2,
                },
                collector::SinkMetric {
                    name: "spool_limit_bytes",
                    kind: collector::MetricKind::Setting,
                    help: "The limit.",
                    value: 1000,
                },
            ],
            ..Default::default()
        }
    }

    fn input_text() -> String {
        let mut t = ProbeTable::from_triples(&[
            (1, "ib_uverbs_reg_mr", "ib_uverbs"),
            (2, "x", "m"),
            (3, "rxe_cq_post", "rdma_rxe"),
        ]);
        // a data-plane probe: its codes name completion statuses
        t.probes[2].kind = collector::AttachKind::Fentry {
            class: collector::DataPlaneClass::Completion,
            errors: vec!["IB_WC_LOC_PROT_ERR".into(), "IB_WC_WR_FLUSH_ERR".into()],
        };
        let k = KernelTotals {
            calls: [(1, 10), (2, 3), (3, 22)].into(),
            failures: [(1, 2), (3, 2)].into(),
            errnos: [((1, 14), 1), ((1, 524), 1), ((3, 1), 1), ((3, 2), 1)].into(),
            drops: 4,
            ..KernelTotals::default()
        };
        let attached = vec![AttachStatus {
            probe: 1,
            function: "ib_uverbs_reg_mr".into(),
            module: "ib_uverbs".into(),
            attached: true,
            reason: None,
            mechanism: None,
            symbols: Vec::new(),
        }];
        render(&MetricsInput {
            table: &t,
            kernel: &k,
            received: &[0, 2, 0, 2],
            dropped_userspace: &[0, 0, 0, 0],
            attached: &attached,
            sink_errors: 0,
            decode_errors: 3,
            seq_gaps: 2,
            snapshots: 1,
            chains: &[
                ((Owner::Application, 1, 14, false), 3),
                ((Owner::VendorDriver, 2, 22, false), 1),
                ((Owner::VendorDriver, 2, 22, true), 5),
            ]
            .into(),
            sinks: &[spool_status()],
            qp_death_jobs: 3,
            last_snapshot_unix_ns: 1_700_000_000_250_000_000,
            agent: Some(AgentCost {
                cpu_ns: 1_500_000_001,
                rss_bytes: 9 << 20,
                bpf_run_ns: Some(2_000_000),
                bpf_runs: Some(40_000),
            }),
            release: "6.12.118+deb12-amd64",
            baseline: Some(&BaselineMetrics {
                handlers: vec![("ib_uverbs_reg_mr".into(), 2, 60)],
                records: TraceCounts {
                    produced: 70,
                    received: 64,
                    dropped: 6,
                    ..TraceCounts::default()
                },
                jobs_differing: 1,
            }),
            providers: None,
            ports: &[
                (
                    ("mlx5_0".into(), 1, "req_transport_retries_exceeded".into()),
                    12,
                ),
                (("rxe0".into(), 1, "retry_exceeded_err".into()), 3),
            ],
        })
    }

    #[test]
    fn the_providers_error_completions_by_status_and_the_libraries_by_state() {
        let lib = |state| wire::ProviderLibrary {
            path: "/usr/lib/x86_64-linux-gnu/libmlx5.so.1.24.44.0".into(),
            build_id: None,
            state,
            processes: 1,
        };
        let p = collector::ProvidersOut {
            libraries: vec![
                lib(wire::LibraryState::Unresolved),
                lib(wire::LibraryState::Unresolved),
            ],
            dropped: 2,
            by_status: [("IBV_WC_REM_ACCESS_ERR", 5), ("IBV_WC_LOC_PROT_ERR", 1)].into(),
            ..Default::default()
        };
        let mut o = String::new();
        render_providers(&mut o, &p);
        for want in [
            "probegen_provider_error_completions_total{provider=\"mlx5\",status=\"IBV_WC_LOC_PROT_ERR\"} 1",
            "probegen_provider_error_completions_total{provider=\"mlx5\",status=\"IBV_WC_REM_ACCESS_ERR\"} 5",
            "probegen_provider_error_completions_dropped_total 2",
            "probegen_provider_libraries{state=\"unresolved\"} 2",
            "probegen_provider_libraries{state=\"probed\"} 0",
        ] {
            assert!(o.lines().any(|l| l == want), "no `{want}` in:\n{o}");
        }
    }

    /// On mlx5 only the provider sees a QP die: its entries made in a window count their jobs
    /// (once each, an earlier window's entry not again).
    #[test]
    fn provider_qp_deaths_count_their_jobs_once() {
        let mut pipe = collector::Pipeline::new(
            Arc::new(collector::ProbeTable::default()),
            collector::PipelineConfig::default(),
        );
        let k = Arc::new(pipe.derived());
        let mut s = pipe.snapshot(&k, std::time::SystemTime::now(), false);
        let entry = |qpn: u32, job: &str, snapshot: u64| collector::ProviderQpError {
            provider: "mlx5".into(),
            qpn,
            pid: 1,
            comm: "trainer".into(),
            status: "IBV_WC_REM_ACCESS_ERR",
            syndrome: 0x13,
            vendor_syndrome: 0,
            side: "requester",
            first_ts_ns: 1,
            snapshot,
            count: 1,
            cgroup: String::new(),
            job: [("SLURM_JOB_ID".to_string(), job.to_string())].into(),
            peer: None,
        };
        s.providers = Some(collector::ProvidersOut {
            qps: vec![
                entry(1, "a", s.snapshot),
                entry(2, "a", s.snapshot),
                entry(3, "b", s.snapshot),
                entry(4, "c", s.snapshot + 1),
            ],
            ..Default::default()
        });
        let mut jobs = QpDeathJobs::default();
        jobs.observe(&s);
        jobs.observe(&s);
        assert_eq!(jobs.total, 2);
    }

    #[test]
    fn the_ports_error_counters_as_the_device_counts_them() {
        let s = input_text();
        assert!(
            s.contains("# TYPE probegen_port_counter_total counter\n"),
            "{s}"
        );
        for line in [
            "probegen_port_counter_total{device=\"mlx5_0\",port=\"1\",counter=\"req_transport_retries_exceeded\"} 12\n",
            "probegen_port_counter_total{device=\"rxe0\",port=\"1\",counter=\"retry_exceeded_err\"} 3\n",
        ] {
            assert!(s.contains(line), "{line} in {s}");
        }
        let mut none = String::new();
        render_ports(&mut none, &[]);
        assert!(none.is_empty(), "no RDMA port: no family");
    }

    #[test]
    fn the_agents_own_cost() {
        let s = input_text();
        for line in [
            "probegen_agent_cpu_seconds_total 1.500000001\n",
            "probegen_agent_resident_memory_bytes 9437184\n",
            "probegen_bpf_run_seconds_total 0.002000000\n",
            "probegen_bpf_runs_total 40000\n",
        ] {
            assert!(s.contains(line), "{line} in {s}");
        }
        let mut without = String::new();
        render_cost(
            &mut without,
            &AgentCost {
                cpu_ns: 1,
                rss_bytes: 1,
                bpf_run_ns: None,
                bpf_runs: None,
            },
        );
        assert!(!without.contains("probegen_bpf_"), "{without}");
    }

    #[test]
    fn exposition() {
        let s = input_text();
        let l = "function=\"ib_uverbs_reg_mr\",module=\"ib_uverbs\"";
        assert!(
            s.contains(&format!("probegen_calls_total{{{l}}} 10\n")),
            "{s}"
        );
        assert!(s.contains(&format!("probegen_failures_total{{{l}}} 2\n")));
        assert!(s.contains(&format!("probegen_errno_total{{{l},errno=\"EFAULT\"}} 1\n")));
        assert!(s.contains(&format!(
            "probegen_errno_total{{{l},errno=\"ENOTSUPP\"}} 1\n"
        )));
        assert!(s.contains(&format!("probegen_probe_attached{{{l}}} 1\n")));
        // data-plane probes: by status, never as errnos
        let d = "function=\"rxe_cq_post\",module=\"rdma_rxe\"";
        assert!(s.contains("# TYPE probegen_data_plane_errors_total counter\n"));
        // with the owner of the status; a flush follows the QP's first error: none
        for (status, owner) in [
            ("IB_WC_LOC_PROT_ERR", "application"),
            ("IB_WC_WR_FLUSH_ERR", ""),
        ] {
            assert!(
                s.contains(&format!(
                    "probegen_data_plane_errors_total{{{d},status=\"{status}\",owner=\"{owner}\"}} 1\n"
                )),
                "{s}"
            );
        }
        assert!(s.contains("probegen_qp_death_jobs_total 3\n"), "{s}");
        assert!(!s.contains(&format!("probegen_errno_total{{{d}")), "{s}");
        assert!(s.contains("probegen_probe_attached{function=\"x\",module=\"m\"} 0\n"));
        assert!(s.contains("probegen_ring_drops_total 4\n"));
        assert!(s.contains("# TYPE probegen_failures_total counter\n"));
        assert!(s.contains(
            "probegen_chains_total{owner=\"application\",module=\"ib_uverbs\",origin=\"ib_uverbs_reg_mr\",errno=\"EFAULT\",expected=\"false\"} 3\n"
        ));
        assert!(s.contains(
            "probegen_chains_total{owner=\"vendor-driver\",module=\"m\",origin=\"x\",errno=\"EINVAL\",expected=\"false\"} 1\n"
        ));
        assert!(s.contains(
            "probegen_chains_total{owner=\"vendor-driver\",module=\"m\",origin=\"x\",errno=\"EINVAL\",expected=\"true\"} 5\n"
        ));
        assert!(s.contains("probegen_kernel_info{kernel=\"6.12.118+deb12-amd64\"} 1\n"));
        // the baseline: shapes counted per handler, never labelled by shape or path
        assert!(s.contains("# TYPE probegen_baseline_shapes gauge\n"));
        assert!(s.contains("probegen_baseline_shapes{handler=\"ib_uverbs_reg_mr\"} 2\n"));
        assert!(s.contains("probegen_baseline_successes_total{handler=\"ib_uverbs_reg_mr\"} 60\n"));
        assert!(s.contains("probegen_baseline_traces_dropped_total 6\n"));
        assert!(s.contains("probegen_baseline_jobs_differing 1\n"));
        assert!(!s.contains("shape=") && !s.contains("path="));
        assert!(s.contains("probegen_sink_spool_batches{sink=\"clickhouse\"} 2\n"));
        assert!(s.contains("probegen_sink_lost_records_total{sink=\"clickhouse\"} 6\n"));
        assert!(s.contains("# TYPE probegen_sink_spool_limit_bytes gauge\n"));
        assert!(s.contains("probegen_sink_spool_limit_bytes{sink=\"clickhouse\"} 1000\n"));
        assert!(s.contains("probegen_decode_errors_total 3\n"));
        assert!(s.contains("probegen_seq_gaps_total 2\n"));
        assert!(s.contains("probegen_last_snapshot_timestamp_seconds 1700000000.250\n"));
        // every sample line: name{labels} value
        for line in s.lines().filter(|l| !l.starts_with('#')) {
            let (_, v) = line.rsplit_once(' ').expect("value");
            v.parse::<f64>().expect("numeric value");
        }
    }

    #[test]
    fn http_server() {
        let text: PageHandle = Arc::new(Mutex::new(Page::Text(input_text())));
        let addr = serve(SocketAddr::from(([127, 0, 0, 1], 0)), text).expect("bind");
        let get = |path: &str| {
            let mut c = TcpStream::connect(addr).expect("connect");
            write!(c, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").expect("send");
            let mut r = String::new();
            c.read_to_string(&mut r).expect("read");
            r
        };
        let r = get("/metrics");
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
        assert!(r.contains("text/plain; version=0.0.4"));
        assert!(r.contains("probegen_ring_drops_total 4"));
        assert!(get("/nope").starts_with("HTTP/1.1 404"));
    }

    mod waiting {
        use std::io::{Read, Write};
        use std::net::TcpStream;
        use std::time::Duration;

        use crate::*;

        fn scrape(addr: SocketAddr) -> std::thread::JoinHandle<String> {
            std::thread::spawn(move || {
                let mut c = TcpStream::connect(addr).expect("connect");
                c.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").expect("send");
                let mut s = String::new();
                let _ = c.read_to_string(&mut s);
                s
            })
        }

        #[test]
        fn serves_why_no_set_runs_then_the_running_set_on_the_same_port() {
            let mut w = WaitingMetrics::bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
            let addr = w.addr();
            let client = scrape(addr);
            w.serve_for(NoSet::NoSetForKernel, "6.13.4", Duration::from_millis(300));
            let page = client.join().expect("client");
            assert!(
                page.starts_with("HTTP/1.0 200") || page.starts_with("HTTP/1.1 200"),
                "{page}"
            );
            assert!(page.contains("probegen_set_running 0\n"), "{page}");
            assert!(
                page.contains(
                    "probegen_no_set{reason=\"no_set_for_kernel\",kernel=\"6.13.4\"} 1\n"
                ),
                "{page}"
            );
            let sink = w
                .into_sink(RunningSet {
                    dir: "linux-6.12/rxe".into(),
                    matched: SetMatch::Series,
                })
                .expect("sink");
            assert_eq!(sink.addr(), addr);
            let page = scrape(addr).join().expect("client");
            assert!(page.contains("probegen_set_running 1\n"), "{page}");
            assert!(
                page.contains("probegen_set_info{set=\"linux-6.12/rxe\",match=\"series\"} 1\n"),
                "{page}"
            );
            assert!(!page.contains("probegen_no_set"), "{page}");
        }
    }
}
