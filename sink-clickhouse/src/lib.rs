//! The fleet sink: every snapshot as one batch into ClickHouse (`--clickhouse URL`), through
//! an on-disk spool so that nothing is lost while the server is down.
//!
//! Data flow (one way): the collection loop hands a finished [`Snapshot`] to
//! [`ClickhouseSink::enqueue`], which turns it into one batch ([`rows`]) and writes it to the
//! spool ([`spool`], durable before `enqueue` returns). A sender thread sends spooled batches
//! oldest first over HTTP ([`http`]), one `INSERT ... FORMAT JSONEachRow` per table, and
//! removes a batch once every table took it; a failure leaves it first in line and the thread
//! retries with a backoff. The collection loop never waits for the network.
//!
//! Idempotency: rows are keyed by (host, boot id, run id, batch sequence, position) in
//! `ReplacingMergeTree` tables ([`schema`]); a batch resent after a timeout whose insert did
//! in fact succeed collapses on merge (`FINAL` gives exact counts before).

mod credentials;
mod http;
mod rows;
mod schema;
mod spool;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use collector::{ChainClock, Sink, SinkError, SinkReport, SinkStatus, Snapshot};

pub use credentials::{read_password, PASSWORD_CREDENTIAL};
pub use http::Endpoint;
use rows::{BatchKey, PidJobs};
pub use schema::{ddl, statements, SchemaOptions};
use spool::Spool;

#[derive(Debug, Clone)]
pub struct SinkOptions {
    pub endpoint: Endpoint,
    pub spool_dir: PathBuf,
    pub spool_limit_bytes: u64,
    /// host of the rows when the snapshot's is empty
    pub boot_id: String,
    /// the records' clock (live: this host's monotonic clock)
    pub clock: ChainClock,
    /// first retry delay; doubles up to `max_backoff`
    pub min_backoff: Duration,
    pub max_backoff: Duration,
}

/// The spool directory next to a JSONL output: `FILE.jsonl` -> `FILE.jsonl.clickhouse-spool`
/// (stdout: `probegen-clickhouse-spool` in the working directory).
pub fn default_spool_dir(out: &Path) -> PathBuf {
    if out.as_os_str() == "-" {
        return PathBuf::from("probegen-clickhouse-spool");
    }
    let mut s = out.as_os_str().to_os_string();
    s.push(".clickhouse-spool");
    PathBuf::from(s)
}

/// This boot's id (`/proc/sys/kernel/random/boot_id`), empty when unreadable.
pub fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

struct State {
    spool: Spool,
    status: SinkStatus,
    stop: bool,
    /// after `stop`: give up sending at this instant
    flush_until: Option<Instant>,
    last_error: Option<String>,
}

struct Queue {
    state: Mutex<State>,
    wake: Condvar,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

pub struct ClickhouseSink {
    queue: Arc<Queue>,
    sender: Option<JoinHandle<()>>,
    boot_id: String,
    run_id: u64,
    clock: ChainClock,
    jobs: PidJobs,
}

impl ClickhouseSink {
    /// Opens the spool (batches of an earlier run are sent first) and starts the sender.
    pub fn start(o: SinkOptions) -> Result<Self, String> {
        let spool = Spool::open(&o.spool_dir, o.spool_limit_bytes)?;
        if spool.batches() > 0 {
            eprintln!(
                "probegen collect: clickhouse: {} batches ({} bytes) left in {} by an earlier run: sending them first",
                spool.batches(),
                spool.bytes(),
                o.spool_dir.display()
            );
        }
        let status = SinkStatus {
            spool_batches: spool.batches() as u64,
            spool_bytes: spool.bytes(),
            ..Default::default()
        };
        let queue = Arc::new(Queue {
            state: Mutex::new(State {
                spool,
                status,
                stop: false,
                flush_until: None,
                last_error: None,
            }),
            wake: Condvar::new(),
        });
        let q2 = queue.clone();
        let (endpoint, min_b, max_b) = (o.endpoint.clone(), o.min_backoff, o.max_backoff);
        let sender = std::thread::Builder::new()
            .name("probegen-clickhouse".into())
            .spawn(move || send_loop(&q2, &endpoint, min_b, max_b))
            .map_err(|e| format!("clickhouse sender thread: {e}"))?;
        Ok(ClickhouseSink {
            queue,
            sender: Some(sender),
            boot_id: o.boot_id,
            run_id: collector::unix_ns(std::time::SystemTime::now()),
            clock: o.clock,
            jobs: PidJobs::default(),
        })
    }

    /// Spools `snap` as one batch and wakes the sender. Returns the status after it.
    pub fn enqueue(&mut self, snap: &Snapshot) -> Result<SinkStatus, String> {
        let mut st = self.queue.lock();
        let seq = st.spool.take_seq()?;
        let key = BatchKey {
            host: &snap.host,
            boot_id: &self.boot_id,
            run_id: self.run_id,
            seq,
            kernel: &snap.kernel,
            manifest_hash: &snap.manifest_hash,
            snapshot: snap.snapshot,
        };
        let batch = rows::batch(
            &key,
            snap,
            self.clock,
            st.status.spool_dropped,
            &mut self.jobs,
        );
        let dropped = st.spool.push(seq, &batch)?;
        if dropped > 0 {
            eprintln!(
                "probegen collect: clickhouse: spool past its limit: dropped the {dropped} oldest batches"
            );
        }
        st.status.spool_dropped = st.spool.dropped;
        st.status.spool_batches = st.spool.batches() as u64;
        st.status.spool_bytes = st.spool.bytes();
        let status = st.status.clone();
        drop(st);
        self.queue.wake.notify_all();
        Ok(status)
    }

    pub fn status(&self) -> SinkStatus {
        self.queue.lock().status.clone()
    }

    /// Largest spool size this run: (bytes, batches).
    pub fn spool_peak(&self) -> (u64, usize) {
        let st = self.queue.lock();
        (st.spool.peak_bytes, st.spool.peak_batches)
    }

    /// Sends what is spooled for at most `flush`, then stops the sender; what is left stays
    /// in the spool for the next run. Returns the final status.
    pub fn finish(&mut self, flush: Duration) -> SinkStatus {
        {
            let mut st = self.queue.lock();
            st.stop = true;
            st.flush_until = Some(Instant::now() + flush);
        }
        self.queue.wake.notify_all();
        if let Some(h) = self.sender.take() {
            let _ = h.join();
        }
        let st = self.queue.lock();
        if st.spool.batches() > 0 {
            eprintln!(
                "probegen collect: clickhouse: {} batches ({} bytes) kept in {} for the next run{}",
                st.spool.batches(),
                st.spool.bytes(),
                st.spool.dir().display(),
                st.last_error
                    .as_deref()
                    .map(|e| format!(" (last error: {e})"))
                    .unwrap_or_default()
            );
        }
        st.status.clone()
    }
}

impl Sink for ClickhouseSink {
    fn name(&self) -> &str {
        "clickhouse"
    }

    fn write(&mut self, snap: &Snapshot) -> Result<Option<SinkStatus>, SinkError> {
        self.enqueue(snap).map(Some).map_err(SinkError::Spool)
    }

    fn status(&self) -> Option<SinkStatus> {
        Some(ClickhouseSink::status(self))
    }

    fn finish(&mut self, flush: Duration) -> Option<SinkReport> {
        let peak = self.spool_peak();
        Some(SinkReport {
            status: ClickhouseSink::finish(self, flush),
            peak,
        })
    }
}

impl Drop for ClickhouseSink {
    fn drop(&mut self) {
        if let Some(h) = self.sender.take() {
            self.queue.lock().stop = true;
            self.queue.lock().flush_until = Some(Instant::now());
            self.queue.wake.notify_all();
            let _ = h.join();
        }
    }
}

/// Batches sent together at most (a backlog after an outage): one insert per table for all
/// of them, since ClickHouse makes one part per insert.
const MAX_BATCHES_PER_SEND: usize = 64;
const MAX_BYTES_PER_SEND: u64 = 16 << 20;

/// Sends batch files: per table, the parts of all of them in one insert, tables in order.
fn send_batches(endpoint: &Endpoint, paths: &[PathBuf]) -> Result<u64, String> {
    let mut files = Vec::with_capacity(paths.len());
    for path in paths {
        match std::fs::read(path) {
            Ok(b) => files.push((path, b)),
            // dropped past the limit between listing and reading: nothing to send
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("{}: {e}", path.display())),
        }
    }
    let mut bodies: Vec<Vec<u8>> = vec![Vec::new(); schema::TABLES.len()];
    for (path, bytes) in &files {
        let parts = match rows::parse_batch(bytes) {
            Ok((_, p)) => p,
            Err(e) => {
                // a corrupt batch would block the queue forever: report and skip it
                eprintln!(
                    "probegen collect: clickhouse: {}: {e}: skipped",
                    path.display()
                );
                continue;
            }
        };
        for (table, body) in parts {
            match schema::TABLES.iter().position(|t| t.name == table) {
                Some(i) => bodies[i].extend_from_slice(body),
                None => eprintln!(
                    "probegen collect: clickhouse: {}: unknown table `{table}` skipped",
                    path.display()
                ),
            }
        }
    }
    let mut records = 0;
    for (t, body) in schema::TABLES.iter().zip(&bodies) {
        if body.is_empty() {
            continue;
        }
        let q = format!(
            "INSERT INTO {}.{} FORMAT JSONEachRow",
            endpoint.database, t.name
        );
        endpoint.post(&q, body)?;
        if t.name == schema::RECORDS.name {
            records += body.iter().filter(|&&b| b == b'\n').count() as u64;
        }
    }
    Ok(records)
}

fn send_loop(queue: &Queue, endpoint: &Endpoint, min_backoff: Duration, max_backoff: Duration) {
    let mut backoff = min_backoff;
    let mut failing = false;
    loop {
        let next = {
            let mut st = queue.lock();
            loop {
                let past_flush = st.flush_until.is_some_and(|t| Instant::now() >= t);
                if st.stop && (st.spool.batches() == 0 || past_flush) {
                    return;
                }
                let n = st
                    .spool
                    .next_up_to(MAX_BATCHES_PER_SEND, MAX_BYTES_PER_SEND);
                if !n.is_empty() {
                    break n;
                }
                st = queue
                    .wake
                    .wait_timeout(st, Duration::from_secs(1))
                    .map(|(g, _)| g)
                    .unwrap_or_else(|e| e.into_inner().0);
            }
        };
        let paths: Vec<PathBuf> = next.iter().map(|(_, p)| p.clone()).collect();
        let res = send_batches(endpoint, &paths);
        let mut st = queue.lock();
        match res {
            Ok(records) => {
                for &(seq, _) in &next {
                    st.spool.done(seq);
                }
                st.status.sent_batches += next.len() as u64;
                st.status.sent_records += records;
                st.status.spool_batches = st.spool.batches() as u64;
                st.status.spool_bytes = st.spool.bytes();
                if failing {
                    eprintln!(
                        "probegen collect: clickhouse: sending again ({} batches spooled)",
                        st.spool.batches()
                    );
                }
                failing = false;
                backoff = min_backoff;
            }
            Err(e) => {
                st.spool.release();
                st.status.send_errors += 1;
                if !failing {
                    eprintln!(
                        "probegen collect: clickhouse: {e}: spooling in {} and retrying",
                        st.spool.dir().display()
                    );
                }
                failing = true;
                st.last_error = Some(e);
                let wait = match st.flush_until {
                    Some(t) => backoff.min(t.saturating_duration_since(Instant::now())),
                    None => backoff,
                };
                // woken early only by stop (a new batch does not make the server come back)
                let deadline = Instant::now() + wait;
                while Instant::now() < deadline {
                    let left = deadline.saturating_duration_since(Instant::now());
                    st = queue
                        .wake
                        .wait_timeout(st, left)
                        .map(|(g, _)| g)
                        .unwrap_or_else(|e| e.into_inner().0);
                    if st.stop && st.flush_until.is_some_and(|t| Instant::now() >= t) {
                        break;
                    }
                }
                backoff = (backoff * 2).min(max_backoff);
            }
        }
    }
}
