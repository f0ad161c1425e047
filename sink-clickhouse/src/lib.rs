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
//! Loss is counted, never silent ([`SinkStatus`]): a batch dropped past the spool limit, one
//! set aside in the spool's quarantine (not what was spooled, or rows ClickHouse refuses while
//! it takes the others), a snapshot the spool could not take (disk full, larger than the
//! limit). A request has one deadline (`--clickhouse-timeout`, answer included) and a stop
//! cuts it short at the final flush's end.
//!
//! Idempotency: rows are keyed by (host, boot id, run id, batch sequence, position) in
//! `ReplacingMergeTree` tables ([`schema`]); a batch resent after a timeout whose insert did
//! in fact succeed collapses on merge (`FINAL` gives exact counts before).

mod fsdir;
mod http;
mod log;
mod rows;
mod schema;
mod spool;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use collector::{ChainClock, Sink, SinkError, SinkReport, SinkStatus, Snapshot};

pub use http::Endpoint;
use http::SendError;
use log::note;
use rows::{BatchKey, PidJobs};
pub use schema::{ddl, statements, SchemaOptions};
use spool::{Entry, Spool, ALL_TABLES};

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
    /// snapshots not spooled in a row (one line per streak)
    unspooled_streak: u64,
}

impl State {
    /// The status fields the spool counts.
    fn sync_status(&mut self) {
        let (sp, st) = (&self.spool, &mut self.status);
        st.spool_dropped = sp.dropped;
        st.spool_batches = sp.batches() as u64;
        st.spool_bytes = sp.bytes();
        st.quarantined_batches = sp.quarantined;
        st.unspooled_batches = sp.unspooled;
        st.lost_records = sp.lost_records;
    }
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
        let mut state = State {
            spool,
            status: SinkStatus::default(),
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

    /// Spools `snap` as one batch and wakes the sender. Returns the status after it: a
    /// snapshot the spool cannot take is counted there (`unspooled_batches`), with one line
    /// per streak, not per snapshot.
    pub fn enqueue(&mut self, snap: &Snapshot) -> Result<SinkStatus, String> {
        let mut st = self.queue.lock();
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
                let batch = rows::batch(&key, snap, self.clock, dropped, &mut self.jobs);
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

/// Batches sent together at most (a backlog after an outage): one insert per table for all
/// of them, since ClickHouse makes one part per insert. Bytes: also at most half the spool
/// limit, so that a new batch finds room beside the ones being sent.
const MAX_BATCHES_PER_SEND: usize = 64;
const MAX_BYTES_PER_SEND: u64 = 16 << 20;

/// What one round of sending left to count.
#[derive(Default)]
struct Round {
    /// failed requests
    errors: u64,
    last: Option<SendError>,
}

impl Round {
    fn failed(&mut self, e: SendError) {
        self.errors += 1;
        self.last = Some(e);
    }
}

/// A batch of the round: its entry and its bytes.
struct Loaded {
    entry: Entry,
    bytes: Vec<u8>,
}

/// Reads and checks the group's batches; one that is not what was spooled is set aside.
fn load(queue: &Queue, group: &[Entry]) -> Vec<Loaded> {
    let (dir, cap) = {
        let st = queue.lock();
        (st.spool.reader(), st.spool.limit_bytes())
    };
    let mut out = Vec::with_capacity(group.len());
    for e in group {
        let checked = dir
            .read(&e.file(), cap)
            .map_err(|err| (err.kind(), err.to_string()))
            .and_then(|b| match rows::parse_batch(&b, e.seq) {
                Ok(_) => Ok(b),
                Err(bad) => Err((std::io::ErrorKind::InvalidData, bad.to_string())),
            });
        match checked {
            Ok(bytes) => out.push(Loaded { entry: *e, bytes }),
            // dropped past the limit between listing and reading: nothing to send
            Err((std::io::ErrorKind::NotFound, _)) => {}
            Err((_, why)) => queue.lock().spool.set_aside(e.seq, &why),
        }
    }
    out
}

/// Table `t` took the rows of `batches`: remembered; a batch every table took is done.
fn took(queue: &Queue, t: usize, batches: &[(usize, u64)], loaded: &mut [Loaded]) {
    let mut st = queue.lock();
    for &(i, rows) in batches {
        let seq = loaded[i].entry.seq;
        if let Some(e) = st.spool.took(seq, 1 << t) {
            loaded[i].entry = e;
            if t == 0 {
                st.status.sent_records += rows;
            }
            if e.taken == ALL_TABLES {
                st.spool.done(seq);
                st.status.sent_batches += 1;
            }
        }
    }
}

/// Sends the group: per table, the rows of every batch that table has not taken yet in one
/// insert, tables in order. A table that refuses (a missing table) does not hold the others;
/// no answer (server down) ends the round. Rows ClickHouse refuses as malformed are sent
/// batch by batch: a batch refused while others are taken is set aside, since the server
/// shows it takes good rows; all refused is the table's or the server's problem, retried.
fn send_group(
    queue: &Queue,
    endpoint: &Endpoint,
    group: &[Entry],
    stop_at: &dyn Fn() -> Option<Instant>,
) -> Round {
    let mut loaded = load(queue, group);
    let mut round = Round::default();
    for (t, table) in schema::TABLES.iter().enumerate() {
        // (index, rows, body) of the batches this table needs
        let mut need: Vec<(usize, u64)> = Vec::new();
        let mut empty: Vec<(usize, u64)> = Vec::new();
        let mut bodies: Vec<Vec<u8>> = Vec::new();
        for (i, l) in loaded.iter().enumerate() {
            if l.entry.taken & (1 << t) != 0 {
                continue;
            }
            let Ok(parts) = rows::parse_batch(&l.bytes, l.entry.seq) else {
                continue;
            };
            let (body, rows) = parts[t];
            if rows == 0 {
                empty.push((i, 0));
            } else {
                need.push((i, rows));
                bodies.push(body.to_vec());
            }
        }
        took(queue, t, &empty, &mut loaded);
        if need.is_empty() {
            continue;
        }
        let q = format!(
            "INSERT INTO {}.{} FORMAT JSONEachRow",
            endpoint.database, table.name
        );
        match endpoint.insert(&q, &bodies.concat(), stop_at) {
            Ok(()) => took(queue, t, &need, &mut loaded),
            Err(SendError::BadData { .. }) if need.len() > 1 => {
                round.errors += 1;
                if !one_by_one(
                    queue,
                    endpoint,
                    &q,
                    t,
                    &need,
                    &bodies,
                    &mut loaded,
                    stop_at,
                    &mut round,
                ) {
                    return round;
                }
            }
            Err(e @ (SendError::BadData { .. } | SendError::Refused { .. })) => round.failed(e),
            Err(e) => {
                round.failed(e);
                return round;
            }
        }
    }
    round
}

/// The batches of a refused insert one at a time (see [`send_group`]); false when the round
/// must end (no answer, or every batch refused).
#[allow(clippy::too_many_arguments)]
fn one_by_one(
    queue: &Queue,
    endpoint: &Endpoint,
    q: &str,
    t: usize,
    need: &[(usize, u64)],
    bodies: &[Vec<u8>],
    loaded: &mut [Loaded],
    stop_at: &dyn Fn() -> Option<Instant>,
    round: &mut Round,
) -> bool {
    let mut refused = Vec::new();
    let mut took_any = false;
    for (&(i, rows), body) in need.iter().zip(bodies) {
        match endpoint.insert(q, body, stop_at) {
            Ok(()) => {
                took(queue, t, &[(i, rows)], loaded);
                took_any = true;
            }
            Err(e @ SendError::BadData { .. }) => refused.push((i, e)),
            Err(e) => {
                round.failed(e);
                return false;
            }
        }
    }
    if !took_any {
        if let Some((_, e)) = refused.pop() {
            round.failed(e);
        }
        return false;
    }
    let mut st = queue.lock();
    for (i, e) in refused {
        let table = schema::TABLES[t].name;
        st.spool.set_aside(
            loaded[i].entry.seq,
            &format!("ClickHouse refuses its `{table}` rows ({e})"),
        );
    }
    true
}

fn send_loop(queue: &Queue, endpoint: &Endpoint, min_backoff: Duration, max_backoff: Duration) {
    let mut backoff = min_backoff;
    let mut failing = false;
    let stop_at = || queue.lock().flush_until;
    loop {
        let group = {
            let mut st = queue.lock();
            loop {
                let past_flush = st.flush_until.is_some_and(|t| Instant::now() >= t);
                if st.stop && (st.spool.batches() == 0 || past_flush) {
                    return;
                }
                let bytes = MAX_BYTES_PER_SEND.min(st.spool.limit_bytes() / 2);
                let n = st.spool.next_up_to(MAX_BATCHES_PER_SEND, bytes);
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
        let round = send_group(queue, endpoint, &group, &stop_at);
        let mut st = queue.lock();
        st.spool.release();
        st.status.send_errors += round.errors;
        st.sync_status();
        let Some(e) = round.last else {
            if failing {
                note(format_args!(
                    "sending again ({} batches spooled)",
                    st.spool.batches()
                ));
            }
            failing = false;
            backoff = min_backoff;
            continue;
        };
        if !failing {
            note(format_args!(
                "{e}: spooling in {} and retrying",
                st.spool.dir().display()
            ));
        }
        failing = true;
        st.last_error = Some(e.to_string());
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
