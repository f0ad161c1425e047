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
//! Loss is counted, never silent ([`SpoolStatus`]): a batch dropped past the spool limit, one
//! set aside in the spool's quarantine (not what was spooled, or rows ClickHouse refuses while
//! it takes the others), a snapshot the spool could not take (disk full, larger than the
//! limit). A request has one deadline (`--clickhouse-timeout`, answer included) and a stop
//! cuts it short at the final flush's end.
//!
//! Idempotency: rows are keyed by (host, boot id, run id, batch sequence, position) in
//! `ReplacingMergeTree` tables ([`schema`]); a batch resent after a timeout whose insert did
//! in fact succeed collapses on merge (`FINAL` gives exact counts before).

mod credentials;
mod error;
mod fsdir;
mod http;
mod log;
mod rows;
mod schema;
mod sender;
mod spool;
mod status;
mod version;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use collector::{ChainClock, Sink, SinkError, SinkStatus, Snapshot};

pub use credentials::{read_password, PASSWORD_CREDENTIAL};
pub use error::ClickhouseError;
pub use http::Endpoint;
use log::note;
use rows::{BatchKey, PidJobs};
pub use schema::{ddl, statements, upgrade, SchemaOptions};
use sender::{send_loop, Queue, State};
use spool::Spool;
pub use status::{SpoolStatus, PEAK_BATCHES, PEAK_BYTES, SINK_NAME};
pub use version::ServerVersion;

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
    /// an idle window (nothing happened) becomes a `snapshots` row only this long after the
    /// last row (`--clickhouse-heartbeat`; zero: every window)
    pub heartbeat: Duration,
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

pub struct ClickhouseSink {
    queue: Arc<Queue>,
    sender: Option<JoinHandle<()>>,
    boot_id: String,
    run_id: u64,
    clock: ChainClock,
    jobs: PidJobs,
    heartbeat: Duration,
    /// what the last `snapshots` row covered up to (its window's end, unix ns) and the
    /// spool's drop count it carried
    last_row: Option<(u64, u64)>,
    /// the start of the first window no row covers yet (idle windows skipped since)
    uncovered_since: Option<u64>,
    /// the spool's limit, shown with its status
    spool_limit_bytes: u64,
}

impl ClickhouseSink {
    /// Opens the spool (batches of an earlier run are sent first) and starts the sender.
    pub fn start(o: SinkOptions) -> Result<Self, ClickhouseError> {
        let spool =
            Spool::open(&o.spool_dir, o.spool_limit_bytes).map_err(ClickhouseError::Spool)?;
        if spool.batches() > 0 {
            eprintln!(
                "probegen collect: clickhouse: {} batches ({} bytes) left in {} by an earlier run: sending them first",
                spool.batches(),
                spool.bytes(),
                o.spool_dir.display()
            );
        }
        let mut state = State {
            spool,
            status: SpoolStatus::default(),
            stop: false,
            flush_until: None,
            last_error: None,
            unspooled_streak: 0,
        };
        state.sync_status();
        let queue = Arc::new(Queue {
            state: Mutex::new(state),
            wake: Condvar::new(),
        });
        let q2 = queue.clone();
        let (endpoint, min_b, max_b) = (o.endpoint.clone(), o.min_backoff, o.max_backoff);
        let sender = std::thread::Builder::new()
            .name("probegen-clickhouse".into())
            .spawn(move || send_loop(&q2, &endpoint, min_b, max_b))
            .map_err(ClickhouseError::Thread)?;
        Ok(ClickhouseSink {
            queue,
            sender: Some(sender),
            boot_id: o.boot_id,
            run_id: collector::unix_ns(std::time::SystemTime::now()),
            clock: o.clock,
            jobs: PidJobs::default(),
            heartbeat: o.heartbeat,
            last_row: None,
            uncovered_since: None,
            spool_limit_bytes: o.spool_limit_bytes,
        })
    }

    /// Spools `snap` as one batch and wakes the sender. Returns the status after it: a
    /// snapshot the spool cannot take is counted there (`unspooled_batches`), with one line
    /// per streak, not per snapshot.
    ///
    /// An idle window (no record, chain, counter, loss or decode error; not the final one) is
    /// not a batch unless the heartbeat is due: the next row's `window_start_ns` is then the
    /// first uncovered window's start, so the rows' windows still add up to the time reported.
    pub fn enqueue(&mut self, snap: &Snapshot) -> Result<SpoolStatus, ClickhouseError> {
        let mut st = self.queue.lock();
        let end = snap.window.end_unix_ns;
        let quiet = snap.idle
            && self.last_row.is_some_and(|(last_end, dropped)| {
                dropped == st.status.spool_dropped
                    && end.saturating_sub(last_end) < self.heartbeat.as_nanos() as u64
            });
        if quiet {
            self.uncovered_since
                .get_or_insert(snap.window.start_unix_ns);
            return Ok(st.status.clone());
        }
        let covered_from = self
            .uncovered_since
            .take()
            .unwrap_or(snap.window.start_unix_ns);
        self.last_row = Some((end, st.status.spool_dropped));
        let records = snap.records.len() as u64;
        let spooled = match st.spool.take_seq() {
            Ok(seq) => {
                let key = BatchKey {
                    host: &snap.host,
                    boot_id: &self.boot_id,
                    run_id: self.run_id,
                    seq,
                    kernel: &snap.kernel,
                    manifest_hash: &snap.manifest_hash,
                    snapshot: snap.snapshot,
                };
                let dropped = st.status.spool_dropped;
                let batch = rows::batch(
                    &key,
                    snap,
                    self.clock,
                    dropped,
                    covered_from,
                    &mut self.jobs,
                );
                st.spool.push(seq, &batch, records)
            }
            Err(e) => Err(spool::Unspooled::Write(e)),
        };
        match spooled {
            Ok(dropped) => {
                if dropped > 0 {
                    note(format_args!(
                        "spool past its limit: dropped the {dropped} oldest batches"
                    ));
                }
                if st.unspooled_streak > 0 {
                    note(format_args!(
                        "spooling again ({} snapshots were not spooled)",
                        st.unspooled_streak
                    ));
                    st.unspooled_streak = 0;
                }
            }
            Err(why) => {
                st.spool.count_unspooled(records);
                if st.unspooled_streak == 0 {
                    note(format_args!(
                        "snapshot {} not spooled: {why}; its {records} records will not reach                          ClickHouse (counted as unspooled; one line until spooling works again)",
                        snap.snapshot
                    ));
                }
                st.unspooled_streak += 1;
            }
        }
        st.sync_status();
        let status = st.status.clone();
        drop(st);
        self.queue.wake.notify_all();
        Ok(status)
    }

    pub fn status(&self) -> SpoolStatus {
        self.queue.lock().status.clone()
    }

    /// Largest spool size this run: (bytes, batches).
    pub fn spool_peak(&self) -> (u64, usize) {
        let st = self.queue.lock();
        (st.spool.peak_bytes, st.spool.peak_batches)
    }

    /// Sends what is spooled for at most `flush`, then stops the sender; what is left stays
    /// in the spool for the next run. Returns the final status.
    pub fn finish(&mut self, flush: Duration) -> SpoolStatus {
        {
            let mut st = self.queue.lock();
            st.stop = true;
            st.flush_until = Some(Instant::now() + flush);
        }
        self.queue.wake.notify_all();
        if let Some(h) = self.sender.take() {
            // a stop wins: the sender's requests end at the flush's end; past it and a second
            // more, the process goes on without it (the spool's files are whole either way)
            let until = Instant::now() + flush + Duration::from_secs(1);
            while !h.is_finished() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(10));
            }
            if h.is_finished() {
                let _ = h.join();
            } else {
                note(format_args!("the sender did not stop in time: left behind"));
            }
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
        SINK_NAME
    }

    fn write(&mut self, snap: &Snapshot) -> Result<Option<SinkStatus>, SinkError> {
        let limit = self.spool_limit_bytes;
        self.enqueue(snap)
            .map(|s| Some(s.sink_status(limit)))
            .map_err(|e| SinkError::Spool(Box::new(e)))
    }

    fn status(&self) -> Option<SinkStatus> {
        Some(ClickhouseSink::status(self).sink_status(self.spool_limit_bytes))
    }

    fn finish(&mut self, flush: Duration) -> Option<SinkStatus> {
        let peak = self.spool_peak();
        let done = ClickhouseSink::finish(self, flush).sink_status(self.spool_limit_bytes);
        Some(status::with_peak(done, peak))
    }
}

impl Drop for ClickhouseSink {
    fn drop(&mut self) {
        if let Some(h) = self.sender.take() {
            {
                let mut st = self.queue.lock();
                st.stop = true;
                st.flush_until = Some(Instant::now());
            }
            self.queue.wake.notify_all();
            let _ = h.join();
        }
    }
}
