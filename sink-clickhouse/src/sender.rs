//! The sender thread: spooled batches, oldest first, into ClickHouse.
//!
//! One round takes the oldest batches (a backlog: up to [`MAX_BATCHES_PER_SEND`]), reads and
//! checks them (a batch that is not what was spooled is set aside), then per table sends the
//! rows of every batch that table has not taken yet in one insert, tables in insert order
//! (`snapshots` last). A table
//! that refuses (a missing table) does not hold the others; no answer (the server down) ends
//! the round. Rows ClickHouse refuses as malformed are sent batch by batch: a batch refused
//! while the others are taken is set aside (the server shows it takes good rows); all refused
//! is the table's or the server's problem, retried with a backoff like an outage.

use std::ops::Range;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::http::{Endpoint, SendError};
use crate::log::note;
use crate::rows;
use crate::schema::{self, BUFFER_SUFFIX};
use crate::spool::{Entry, Spool, ALL_TABLES};
use crate::status::SpoolStatus;
use crate::version::{InsertMode, ServerVersion};

/// Batches sent together at most (a backlog after an outage): one insert per table for all
/// of them, since ClickHouse makes one part per insert. Bytes: also at most half the spool
/// limit, so that a new batch finds room beside the ones being sent.
const MAX_BATCHES_PER_SEND: usize = 64;
const MAX_BYTES_PER_SEND: u64 = 16 << 20;
/// How long after a failed `SELECT version()` (no answer, refused) the sender asks again; it
/// inserts plainly meanwhile.
const VERSION_RETRY: Duration = Duration::from_secs(60);

pub(crate) struct State {
    pub(crate) spool: Spool,
    pub(crate) status: SpoolStatus,
    pub(crate) stop: bool,
    /// after `stop`: give up sending at this instant
    pub(crate) flush_until: Option<Instant>,
    pub(crate) last_error: Option<String>,
    /// snapshots not spooled in a row (one line per streak)
    pub(crate) unspooled_streak: u64,
}

impl State {
    /// The status fields the spool counts.
    pub(crate) fn sync_status(&mut self) {
        let (sp, st) = (&self.spool, &mut self.status);
        st.spool_dropped = sp.dropped;
        st.spool_batches = sp.batches() as u64;
        st.spool_bytes = sp.bytes();
        st.quarantined_batches = sp.quarantined;
        st.unspooled_batches = sp.unspooled;
        st.lost_records = sp.lost_records;
    }
}

pub(crate) struct Queue {
    pub(crate) state: Mutex<State>,
    pub(crate) wake: Condvar,
}

impl Queue {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What one round of sending left to count.
#[derive(Default)]
struct Round {
    /// failed requests
    errors: u64,
    /// the last failure, as said: a refusal names its table (ClickHouse's own text names the
    /// column, e.g. a column the table lacks: schema drift)
    last: Option<String>,
}

impl Round {
    fn failed(&mut self, table: &str, e: SendError) {
        self.errors += 1;
        self.last = Some(match e {
            SendError::BadData { .. } | SendError::Refused { .. } => {
                format!("table `{table}`: {e}")
            }
            _ => e.to_string(),
        });
    }
}

/// A batch of the round: its entry, its bytes, and per table the range of its rows in them
/// and their count (checked once, when read).
struct Loaded {
    entry: Entry,
    bytes: Vec<u8>,
    parts: rows::PerTable<(Range<usize>, u64)>,
}

impl Loaded {
    fn rows(&self, t: usize) -> &[u8] {
        &self.bytes[self.parts[t].0.clone()]
    }
}

/// The batch of `bytes`, checked; a part's range in them. An earlier version's parts in
/// return order are left out first, said in one line ([`rows::return_order_set_aside`]).
fn check(entry: Entry, bytes: Vec<u8>) -> Result<Loaded, String> {
    let bytes = match rows::return_order_set_aside(&bytes, entry.seq) {
        Some((v4, line)) => {
            note(format_args!("{line}"));
            v4
        }
        None => bytes,
    };
    let base = bytes.as_ptr() as usize;
    let parts = rows::parse_batch(&bytes, entry.seq)
        .map_err(|bad| bad.to_string())?
        .map(|(body, rows)| {
            // a table the batch's version lacks has an empty body that is not in `bytes`
            // (a static empty slice): any empty range reads it
            let at = (body.as_ptr() as usize)
                .checked_sub(base)
                .filter(|&at| at + body.len() <= bytes.len())
                .unwrap_or(0);
            (at..at + body.len(), rows)
        });
    Ok(Loaded {
        entry,
        bytes,
        parts,
    })
}

/// The sender's side of one round: the queue, the server, the stop's deadline.
struct Sender<'a> {
    queue: &'a Queue,
    endpoint: &'a Endpoint,
    stop_at: &'a dyn Fn() -> Option<Instant>,
    mode: InsertMode,
}

impl Sender<'_> {
    /// Reads and checks the group's batches; one that is not what was spooled is set aside.
    fn load(&self, group: &[Entry]) -> Vec<Loaded> {
        let (dir, cap) = {
            let st = self.queue.lock();
            (st.spool.reader(), st.spool.limit_bytes())
        };
        let mut out = Vec::with_capacity(group.len());
        for e in group {
            match dir.read(&e.file(), cap) {
                Ok(bytes) => match check(*e, bytes) {
                    Ok(l) => out.push(l),
                    Err(why) => self.queue.lock().spool.set_aside(e.seq, &why),
                },
                // dropped past the limit between listing and reading: nothing to send
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                Err(err) => self.queue.lock().spool.set_aside(e.seq, &err.to_string()),
            }
        }
        out
    }

    /// Table `t` took the rows of `batches` (indices in `loaded`): remembered; a batch every
    /// table took is done.
    fn took(&self, t: usize, batches: &[usize], loaded: &mut [Loaded]) {
        let mut st = self.queue.lock();
        for &i in batches {
            let seq = loaded[i].entry.seq;
            if let Some(e) = st.spool.took(seq, 1 << t) {
                loaded[i].entry = e;
                if t == 0 {
                    st.status.sent_records += loaded[i].parts[0].1;
                }
                if e.taken == ALL_TABLES {
                    st.spool.done(seq);
                    st.status.sent_batches += 1;
                }
            }
        }
    }

    /// One round over `group` (see the module doc).
    fn round(&self, group: &[Entry]) -> Round {
        let mut loaded = self.load(group);
        let mut round = Round::default();
        for t in schema::INSERT_ORDER {
            let table = schema::TABLES[t];
            let pending = |l: &Loaded| l.entry.taken & (1 << t) == 0;
            // an empty part is taken without a request
            let (empty, need): (Vec<usize>, Vec<usize>) = (0..loaded.len())
                .filter(|&i| pending(&loaded[i]))
                .partition(|&i| loaded[i].parts[t].1 == 0);
            self.took(t, &empty, &mut loaded);
            if need.is_empty() {
                continue;
            }
            let q = format!(
                "INSERT INTO {}.{}{} FORMAT JSONEachRow",
                self.endpoint.database,
                table.name,
                if self.endpoint.buffered {
                    BUFFER_SUFFIX
                } else {
                    ""
                }
            );
            let body: Vec<u8> = need
                .iter()
                .flat_map(|&i| loaded[i].rows(t))
                .copied()
                .collect();
            match self.endpoint.insert(&q, &body, self.mode, self.stop_at) {
                Ok(()) => self.took(t, &need, &mut loaded),
                Err(SendError::BadData { .. }) if need.len() > 1 => {
                    round.errors += 1;
                    if !self.one_by_one(&q, t, &need, &mut loaded, &mut round) {
                        return round;
                    }
                }
                Err(e @ (SendError::BadData { .. } | SendError::Refused { .. })) => {
                    round.failed(table.name, e);
                }
                Err(e) => {
                    round.failed(table.name, e);
                    return round;
                }
            }
        }
        round
    }

    /// Table `t`'s rows of the batches `need`, one batch at a time (see the module doc); false
    /// when the round must end (no answer, or every batch refused).
    fn one_by_one(
        &self,
        q: &str,
        t: usize,
        need: &[usize],
        loaded: &mut [Loaded],
        round: &mut Round,
    ) -> bool {
        let mut refused = Vec::new();
        let mut took_any = false;
        for &i in need {
            match self
                .endpoint
                .insert(q, loaded[i].rows(t), self.mode, self.stop_at)
            {
                Ok(()) => {
                    self.took(t, &[i], loaded);
                    took_any = true;
                }
                Err(e @ SendError::BadData { .. }) => refused.push((i, e)),
                Err(e) => {
                    round.failed(schema::TABLES[t].name, e);
                    return false;
                }
            }
        }
        let table = schema::TABLES[t].name;
        if !took_any {
            if let Some((_, e)) = refused.pop() {
                round.failed(table, e);
            }
            return false;
        }
        let mut st = self.queue.lock();
        for (i, e) in refused {
            let why = format!("ClickHouse refuses its `{table}` rows ({e})");
            st.spool.set_aside(loaded[i].entry.seq, &why);
        }
        true
    }
}

/// The next group to send; `None` once stopped and done (or past the flush's end).
fn next_group(queue: &Queue) -> Option<Vec<Entry>> {
    let mut st = queue.lock();
    loop {
        let past_flush = st.flush_until.is_some_and(|t| Instant::now() >= t);
        if st.stop && (st.spool.batches() == 0 || past_flush) {
            return None;
        }
        let bytes = MAX_BYTES_PER_SEND.min(st.spool.limit_bytes() / 2);
        let n = st.spool.next_up_to(MAX_BATCHES_PER_SEND, bytes);
        if !n.is_empty() {
            return Some(n);
        }
        st = queue
            .wake
            .wait_timeout(st, Duration::from_secs(1))
            .map(|(g, _)| g)
            .unwrap_or_else(|e| e.into_inner().0);
    }
}

/// Waits `backoff` (cut short by a stop past the flush's end).
fn back_off(queue: &Queue, mut st: MutexGuard<'_, State>, backoff: Duration) {
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
}

/// The sender thread's loop, until stopped.
pub(crate) fn send_loop(
    queue: &Queue,
    endpoint: &Endpoint,
    min_backoff: Duration,
    max_backoff: Duration,
) {
    let mut backoff = min_backoff;
    let mut failing = false;
    let stop_at = || queue.lock().flush_until;
    let mut sender = Sender {
        queue,
        endpoint,
        stop_at: &stop_at,
        mode: InsertMode::Plain,
    };
    let mut version = VersionProbe::default();
    while let Some(group) = next_group(queue) {
        sender.mode = version.mode(endpoint, &stop_at);
        let round = sender.round(&group);
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
        st.last_error = Some(e);
        back_off(queue, st, backoff);
        backoff = (backoff * 2).min(max_backoff);
    }
}

/// The server's release, asked once (`SELECT version()`) before the first insert: it decides
/// [`InsertMode`]. Unanswered, the sender inserts plainly and asks again after
/// [`VERSION_RETRY`]; an answer that is not a version is said once and means plain inserts.
#[derive(Default)]
struct VersionProbe {
    known: Option<InsertMode>,
    next_try: Option<Instant>,
}

impl VersionProbe {
    fn mode(&mut self, endpoint: &Endpoint, stop_at: &dyn Fn() -> Option<Instant>) -> InsertMode {
        if let Some(m) = self.known {
            return m;
        }
        if self.next_try.is_some_and(|t| Instant::now() < t) {
            return InsertMode::Plain;
        }
        match endpoint.server_version(stop_at) {
            Ok(text) => {
                let m = match ServerVersion::parse(&text) {
                    Some(v) => InsertMode::for_version(v),
                    None => {
                        let shown: String = text.chars().take(40).collect();
                        note(format_args!(
                            "the server's version `{shown}` is not MAJOR.MINOR: plain INSERTs \
                             (no async_insert)"
                        ));
                        InsertMode::Plain
                    }
                };
                self.known = Some(m);
                m
            }
            Err(_) => {
                // the inserts that follow meet the same trouble and report it
                self.next_try = Some(Instant::now() + VERSION_RETRY);
                InsertMode::Plain
            }
        }
    }
}
