//! Where snapshots go: the JSONL sink, the Prometheus exposition and (with `--clickhouse`)
//! the ClickHouse spool. A sink error is counted and reported, never fatal.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::chains::ChainClock;
use crate::clickhouse::{ClickhouseSink, SinkOptions, SinkStatus};
use crate::error::CollectError;
use crate::kernel_state::KernelTotals;
use crate::metrics::{self, MetricsState, MetricsUpdate, Page};
use crate::options::Options;
use crate::pipeline::{Pipeline, Snapshot};
use crate::sink::{JsonlSink, SyncWhen};
use crate::snapshot_line::LineCache;

pub struct Outputs {
    sink: JsonlSink,
    metrics: Option<metrics::Shared>,
    /// snapshots written (or attempted) so far
    pub snapshots: u64,
    clickhouse: Option<ClickhouseSink>,
    clickhouse_status: Option<SinkStatus>,
    last_snapshot_unix_ns: u64,
    /// the JSON of the parts the last line shares with the next (idle windows: most of it)
    line_cache: LineCache,
}

impl Outputs {
    pub fn new(
        opts: &Options,
        clock: ChainClock,
    ) -> Result<(Self, Option<SocketAddr>), CollectError> {
        let clickhouse = match &opts.clickhouse {
            Some(endpoint) => Some(
                ClickhouseSink::start(SinkOptions {
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
                })
                .map_err(CollectError::Clickhouse)?,
            ),
            None => None,
        };
        let mut bound = None;
        let metrics = match opts.metrics {
            Some(addr) => {
                let shared: metrics::Shared = Arc::new(Mutex::new(Page::Text(String::new())));
                bound = Some(
                    metrics::serve(addr, shared.clone())
                        .map_err(|source| CollectError::Metrics { addr, source })?,
                );
                Some(shared)
            }
            None => None,
        };
        Ok((
            Outputs {
                sink: JsonlSink::new(&opts.out, opts.rotate_bytes, opts.rotate_keep),
                line_cache: LineCache::default(),
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
    pub fn finish(&mut self, flush: Duration) -> (Option<SinkStatus>, Option<(u64, usize)>) {
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

    /// Whether `--metrics` serves an exposition.
    pub fn serves_metrics(&self) -> bool {
        self.metrics.is_some()
    }

    /// Updates what the exposition shows (also before the first snapshot, for
    /// `probe_attached`); it is rendered when scraped.
    pub fn update_metrics(&self, pipe: &Pipeline, k: &Arc<KernelTotals>) {
        if let Some(m) = &self.metrics {
            let input = MetricsUpdate {
                table: pipe.table(),
                kernel: k,
                received: pipe.received_totals(),
                dropped_userspace: pipe.dropped_totals(),
                attached: pipe.attached_shared(),
                sink_errors: pipe.sink_errors,
                snapshots: self.snapshots,
                chains: pipe.chain_totals(),
                clickhouse: self
                    .clickhouse
                    .as_ref()
                    .map(|c| c.status())
                    .or_else(|| self.clickhouse_status.clone()),
                last_snapshot_unix_ns: self.last_snapshot_unix_ns,
            };
            if let Ok(mut page) = m.lock() {
                match &mut *page {
                    Page::State(s) => s.update(&input),
                    other => {
                        let mut s = MetricsState::default();
                        s.update(&input);
                        *other = Page::State(Box::new(s));
                    }
                }
            }
        }
    }

    /// Writes a snapshot; a sink error is counted and reported, never fatal. Its failure
    /// chains are logged on stderr, one line each (at most [`MAX_CHAIN_LINES`] per snapshot).
    pub fn emit(&mut self, pipe: &mut Pipeline, snap: &mut Snapshot, k: &Arc<KernelTotals>) {
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
        crate::timings::mark("log+clickhouse");
        let parts = self.line_cache.parts(snap);
        crate::timings::mark("line");
        // a window in which nothing happened is synced later (see sink.rs)
        let sync = if snap.idle {
            SyncWhen::Later
        } else {
            SyncWhen::Now
        };
        let written = self.sink.write_parts(&parts, sync);
        if let Err(e) = written {
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
        crate::timings::mark("sink");
        self.snapshots += 1;
        self.update_metrics(pipe, k);
        crate::timings::mark("metrics");
    }
}

/// Chains logged on stderr per snapshot (all of them are in the snapshot).
pub const MAX_CHAIN_LINES: usize = 32;
