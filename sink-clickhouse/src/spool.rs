//! The on-disk queue of batches not yet in ClickHouse: every batch is written here first
//! (a synced file per batch, `<seq>.batch`), the sender thread sends the oldest and removes it
//! once every table took it. So a server that is down costs disk, not memory, and a restart
//! resumes where the last run stopped, in order.
//!
//! The directory is this collector's alone ([`PrivateDir`]: owned, not writable by others,
//! no link followed) and locked for the run (`lock`, `flock`: a second collector on it exits
//! naming the first's pid).
//!
//! Bounded by bytes, exactly: a new batch first makes room by removing the oldest batches not
//! being sent (counted: `dropped`); a batch that cannot fit (larger than the limit, or the
//! room is held by batches being sent) is not spooled ([`Unspooled`]). The tables a batch's
//! rows are in are remembered in its name (`<seq>-t<mask>.batch`), so a retry sends only the
//! rest. A batch that is not what was spooled (torn, cut, changed, not a regular file) or
//! whose rows ClickHouse refuses is set aside in `quarantine/` (the newest
//! [`QUARANTINE_KEEP`] kept for a person) and counted, never resent.
//!
//! Sequence numbers continue across runs (`next-seq`), kept below 2^63: one past it is a
//! corrupt state, refused at open, never wrapped.

use std::collections::VecDeque;
use std::fs::File;
use std::io::Read;
use std::sync::Arc;

use crate::fsdir::PrivateDir;
use crate::log::note;
use crate::rows::parse_head;

const SUFFIX: &str = ".batch";
const NEXT_SEQ: &str = "next-seq";
const LOCK: &str = "lock";
const QUARANTINE: &str = "quarantine";
/// Quarantined entries kept; older ones are removed (each was counted when set aside).
pub(crate) const QUARANTINE_KEEP: usize = 32;
/// Sequence numbers stay below 2^63 (`next-seq` past it is not a count: a corrupt state).
pub(crate) const SEQ_LIMIT: u64 = 1 << 63;
/// Every table took the batch (bit i for `schema::TABLES[i]`: a table keeps its bit across
/// versions, so a name written before `baselines` was added means the same tables now; a
/// batch of that version has no `baselines` rows, taken without a request).
pub(crate) const ALL_TABLES: u8 = (1 << crate::schema::TABLES.len()) - 1;

/// One spooled batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry {
    pub seq: u64,
    pub bytes: u64,
    /// rows of the `records` table in it (as its header says; 0 when unknown)
    pub records: u64,
    /// the tables that took it: bit i for `schema::TABLES[i]`
    pub taken: u8,
    /// the mask in its file's name (what a restart will know)
    on_disk: u8,
}

impl Entry {
    pub(crate) fn file(&self) -> String {
        name(self.seq, self.on_disk)
    }

    /// Records ClickHouse does not hold yet (lost if the batch goes now).
    fn records_not_sent(&self) -> u64 {
        if self.taken & 1 == 0 {
            self.records
        } else {
            0
        }
    }
}

/// Why a snapshot's batch did not reach the spool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unspooled {
    /// larger than the whole spool limit
    TooLarge { bytes: u64, limit: u64 },
    /// the room is held by the batches being sent
    NoRoom { bytes: u64, in_flight: u64 },
    /// the write failed (disk full, I/O error)
    Write(String),
}

impl std::fmt::Display for Unspooled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unspooled::TooLarge { bytes, limit } => write!(
                f,
                "its batch ({bytes} bytes) is larger than the spool limit ({limit} bytes; \
                 raise --clickhouse-spool-bytes)"
            ),
            Unspooled::NoRoom { bytes, in_flight } => write!(
                f,
                "no room for its batch ({bytes} bytes) while {in_flight} bytes are being sent"
            ),
            Unspooled::Write(e) => write!(f, "{e}"),
        }
    }
}

#[derive(Debug)]
pub(crate) struct Spool {
    dir: Arc<PrivateDir>,
    /// held for the run: the `flock` on `lock`
    _lock: File,
    quarantine: Option<PrivateDir>,
    limit_bytes: u64,
    /// oldest first
    queue: VecDeque<Entry>,
    bytes: u64,
    next_seq: u64,
    /// the batches the sender is sending (never dropped)
    in_flight: Vec<u64>,
    /// batches dropped past the limit, this run
    pub dropped: u64,
    /// batches set aside in the quarantine, this run
    pub quarantined: u64,
    /// snapshots that never reached the spool, this run
    pub unspooled: u64,
    /// records of dropped, quarantined and unspooled batches, this run
    pub lost_records: u64,
    /// largest size reached, this run
    pub peak_bytes: u64,
    pub peak_batches: usize,
}

fn name(seq: u64, taken: u8) -> String {
    if taken == 0 {
        format!("{seq:020}{SUFFIX}")
    } else {
        format!("{seq:020}-t{taken:x}{SUFFIX}")
    }
}

/// (seq, taken) of a batch file's name; `None`: not a name this spool writes.
fn parse_name(n: &str) -> Option<(u64, u8)> {
    let stem = n.strip_suffix(SUFFIX)?;
    let (seq, taken) = match stem.split_once("-t") {
        Some((s, t)) => (
            s,
            u8::from_str_radix(t, 16)
                .ok()
                .filter(|&t| t & !ALL_TABLES == 0)?,
        ),
        None => (stem, 0),
    };
    if seq.len() != 20 || !seq.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((seq.parse().ok()?, taken))
}

/// The stored `next-seq`: none, or a number below [`SEQ_LIMIT`]; else a corrupt state.
fn stored_next_seq(dir: &PrivateDir) -> Result<u64, String> {
    let file = dir.path().join(NEXT_SEQ);
    let text = match dir.read(NEXT_SEQ, 64) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(format!("spool {}: {e}", file.display())),
    };
    let n = std::str::from_utf8(&text)
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .ok_or_else(|| {
            format!(
                "spool {}: not a batch number: a corrupt spool state (remove the file to \
                 number batches from the last one spooled)",
                file.display()
            )
        })?;
    if n >= SEQ_LIMIT {
        return Err(format!(
            "spool {}: {n} is past 2^63: a corrupt spool state, not a count (remove the file \
             to number batches from the last one spooled)",
            file.display()
        ));
    }
    Ok(n)
}

/// What a file named like a batch holds, from its header: an index entry, or why it is not
/// a batch of this spool (with the records its header claims, when it has one).
fn index(dir: &PrivateDir, file: &str) -> Result<Entry, (String, u64)> {
    let (seq, taken) = parse_name(file).ok_or(("not a batch file name".to_string(), 0))?;
    if seq >= SEQ_LIMIT {
        return Err(("a batch number past 2^63".into(), 0));
    }
    let (f, len) = dir.open_regular(file).map_err(|e| (e.to_string(), 0))?;
    let mut start = Vec::with_capacity(512);
    f.take(512)
        .read_to_end(&mut start)
        .map_err(|e| (e.to_string(), 0))?;
    let head = parse_head(&start).map_err(|e| (e.to_string(), 0))?;
    let records = if taken & 1 == 0 { head.rows[0] } else { 0 };
    if head.seq != seq {
        return Err((format!("its header names batch {}", head.seq), 0));
    }
    if let Some(want) = head.len.filter(|&w| w != len) {
        return Err((
            format!("{len} bytes where its header says {want} (torn or cut)"),
            records,
        ));
    }
    Ok(Entry {
        seq,
        bytes: len,
        records: head.rows[0],
        taken,
        on_disk: taken,
    })
}

impl Spool {
    /// Opens (creates) the spool directory, locks it, and indexes the batches a previous run
    /// left (a file that is not one is set aside and counted).
    pub(crate) fn open(dir: &std::path::Path, limit_bytes: u64) -> Result<Self, String> {
        let d = PrivateDir::open(dir)?;
        // before anything else: a second collector must not touch the first's files
        let lock = d.lock(LOCK)?;
        let stored = stored_next_seq(&d)?;
        let names = d
            .names()
            .map_err(|e| format!("spool {}: {e}", dir.display()))?;
        let mut s = Spool {
            dir: Arc::new(d),
            _lock: lock,
            quarantine: None,
            limit_bytes,
            queue: VecDeque::new(),
            bytes: 0,
            next_seq: 0,
            in_flight: Vec::new(),
            dropped: 0,
            quarantined: 0,
            unspooled: 0,
            lost_records: 0,
            peak_bytes: 0,
            peak_batches: 0,
        };
        let mut found = Vec::new();
        let mut batch_names: Vec<String> = Vec::new();
        for n in names {
            if n.starts_with('.') && n.ends_with(".tmp") {
                // a write interrupted by a crash: never renamed, never acknowledged
                let _ = s.dir.remove(&n);
            } else if n.ends_with(SUFFIX) {
                batch_names.push(n);
            }
        }
        batch_names.sort_unstable();
        for n in batch_names {
            match index(&s.dir, &n) {
                Ok(e) => found.push(e),
                Err((why, records)) => s.set_aside_file(&n, &why, records),
            }
        }
        found.sort_unstable_by_key(|e| e.seq);
        for w in 1..found.len() {
            if found[w].seq == found[w - 1].seq {
                // two files for one batch (renamed by hand?): keep the first
                let e = found[w];
                s.set_aside_file(&e.file(), "a second file for this batch", 0);
            }
        }
        found.dedup_by_key(|e| e.seq);
        s.next_seq = stored.max(found.last().map_or(0, |e| e.seq + 1));
        s.bytes = found.iter().map(|e| e.bytes).sum();
        s.queue = found.into();
        // a smaller limit than the last run's: the oldest go now (the limit holds always)
        while s.bytes > limit_bytes {
            let Some(e) = s.queue.pop_front() else { break };
            s.drop_entry(e);
        }
        s.peak_bytes = s.bytes;
        s.peak_batches = s.queue.len();
        Ok(s)
    }

    pub(crate) fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    pub(crate) fn limit_bytes(&self) -> u64 {
        self.limit_bytes
    }

    /// The directory, for reading batches without holding the sink's lock.
    pub(crate) fn reader(&self) -> Arc<PrivateDir> {
        self.dir.clone()
    }

    /// The sequence number the next batch gets (persisted: a restart continues after it).
    pub(crate) fn take_seq(&mut self) -> Result<u64, String> {
        let seq = self.next_seq;
        if seq + 1 >= SEQ_LIMIT {
            return Err(format!(
                "spool {}: batch numbers used up",
                self.dir().display()
            ));
        }
        self.dir
            .write_atomic(NEXT_SEQ, format!("{}\n", seq + 1).as_bytes())
            .map_err(|e| format!("spool {}: {NEXT_SEQ}: {e}", self.dir().display()))?;
        self.next_seq = seq + 1;
        Ok(seq)
    }

    /// Counts a snapshot that did not reach the spool.
    pub(crate) fn count_unspooled(&mut self, records: u64) {
        self.unspooled += 1;
        self.lost_records += records;
    }

    fn drop_entry(&mut self, e: Entry) {
        let _ = self.dir.remove(&e.file());
        self.bytes -= e.bytes;
        self.dropped += 1;
        self.lost_records += e.records_not_sent();
    }

    /// Appends batch `seq` (`records` record rows; durable when this returns) after making
    /// room: the oldest batches not being sent are removed until it fits. Returns how many
    /// were removed; a batch that cannot fit is not written.
    pub(crate) fn push(&mut self, seq: u64, bytes: &[u8], records: u64) -> Result<u64, Unspooled> {
        let len = bytes.len() as u64;
        if len > self.limit_bytes {
            return Err(Unspooled::TooLarge {
                bytes: len,
                limit: self.limit_bytes,
            });
        }
        let in_flight: u64 = self
            .queue
            .iter()
            .filter(|e| self.in_flight.contains(&e.seq))
            .map(|e| e.bytes)
            .sum();
        if in_flight + len > self.limit_bytes {
            return Err(Unspooled::NoRoom {
                bytes: len,
                in_flight,
            });
        }
        let mut dropped = 0;
        while self.bytes + len > self.limit_bytes {
            let Some(i) = self
                .queue
                .iter()
                .position(|e| !self.in_flight.contains(&e.seq))
            else {
                break;
            };
            if let Some(e) = self.queue.remove(i) {
                self.drop_entry(e);
                dropped += 1;
            }
        }
        let e = Entry {
            seq,
            bytes: len,
            records,
            taken: 0,
            on_disk: 0,
        };
        self.dir
            .write_atomic(&e.file(), bytes)
            .map_err(|err| Unspooled::Write(format!("spool {}: {err}", self.dir().display())))?;
        self.dir.sync();
        self.queue.push_back(e);
        self.bytes += len;
        self.peak_bytes = self.peak_bytes.max(self.bytes);
        self.peak_batches = self.peak_batches.max(self.queue.len());
        Ok(dropped)
    }

    /// The oldest batch, marked in flight (not dropped until [`Spool::done`] or
    /// [`Spool::release`]).
    #[cfg(test)]
    pub(crate) fn oldest(&mut self) -> Option<Entry> {
        self.next_up_to(1, u64::MAX).into_iter().next()
    }

    /// The oldest batches, at most `n` of them and `bytes` in all (at least one), marked in
    /// flight: a backlog is sent with one insert per table for many batches.
    pub(crate) fn next_up_to(&mut self, n: usize, bytes: u64) -> Vec<Entry> {
        let mut out = Vec::new();
        let mut total = 0;
        for e in self.queue.iter().take(n.max(1)) {
            if !out.is_empty() && total + e.bytes > bytes {
                break;
            }
            total += e.bytes;
            out.push(*e);
        }
        self.in_flight = out.iter().map(|e| e.seq).collect();
        out
    }

    /// Table bit `table` took batch `seq`: remembered in its name (a retry, a restart skip
    /// it). Returns the entry now; `None` when it is no longer spooled.
    pub(crate) fn took(&mut self, seq: u64, table: u8) -> Option<Entry> {
        let e = self.queue.iter_mut().find(|e| e.seq == seq)?;
        e.taken |= table;
        // a complete batch is removed next: no rename for it
        if e.taken != ALL_TABLES && e.taken != e.on_disk {
            let new = name(e.seq, e.taken);
            // a failed rename keeps the old name: a restart resends those rows (they collapse)
            if self.dir.rename(&e.file(), &new).is_ok() {
                e.on_disk = e.taken;
            }
        }
        Some(*e)
    }

    /// Batch `seq` is in ClickHouse: remove it.
    pub(crate) fn done(&mut self, seq: u64) {
        if let Some(i) = self.queue.iter().position(|e| e.seq == seq) {
            if let Some(e) = self.queue.remove(i) {
                self.bytes -= e.bytes;
                let _ = self.dir.remove(&e.file());
                self.dir.sync();
            }
        }
        self.in_flight.retain(|&s| s != seq);
    }

    /// Sets batch `seq` aside (unreadable, not what was spooled, refused for good): counted,
    /// with one line naming the file and why.
    pub(crate) fn set_aside(&mut self, seq: u64, why: &str) {
        let Some(i) = self.queue.iter().position(|e| e.seq == seq) else {
            return;
        };
        let Some(e) = self.queue.remove(i) else {
            return;
        };
        self.bytes -= e.bytes;
        self.in_flight.retain(|&s| s != seq);
        self.set_aside_file(&e.file(), why, e.records_not_sent());
    }

    fn quarantine_dir(&mut self) -> Result<&PrivateDir, String> {
        if self.quarantine.is_none() {
            self.quarantine = Some(self.dir.sub(QUARANTINE)?);
        }
        self.quarantine
            .as_ref()
            .ok_or_else(|| "no quarantine".to_string())
    }

    fn set_aside_file(&mut self, file: &str, why: &str, records: u64) {
        let dir = self.dir.clone();
        let fate = match self.quarantine_dir().and_then(|q| {
            if let Ok(mut old) = q.names() {
                old.sort_unstable();
                for n in &old[..old.len().saturating_sub(QUARANTINE_KEEP - 1)] {
                    let _ = q.remove(n);
                }
            }
            dir.rename_to(file, q, file)
                .map(|()| q.path().display().to_string())
                .map_err(|e| e.to_string())
        }) {
            Ok(q) => format!("moved to {q}"),
            Err(e) => match dir.remove(file) {
                Ok(()) => format!("removed (no quarantine: {e})"),
                Err(e2) => format!("left in place (no quarantine: {e}; remove: {e2})"),
            },
        };
        dir.sync();
        self.quarantined += 1;
        self.lost_records += records;
        note(format_args!(
            "{}/{file}: {why}: {fate}; {records} records will not reach ClickHouse",
            dir.path().display()
        ));
    }

    /// Sending failed: keep them, first in line.
    pub(crate) fn release(&mut self) {
        self.in_flight.clear();
    }

    pub(crate) fn batches(&self) -> usize {
        self.queue.len()
    }

    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("pg-spool-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    /// A batch `seq` with `records` record rows of `pad` bytes each.
    fn batch(seq: u64, records: usize, pad: usize) -> Vec<u8> {
        let row = format!("{}\n", "x".repeat(pad));
        let bodies = [
            row.repeat(records),
            String::new(),
            String::new(),
            "{}\n".into(),
            String::new(),
            String::new(),
            String::new(),
        ];
        crate::rows::frame(seq, &bodies.map(String::into_bytes))
    }

    fn push(s: &mut Spool, records: usize, pad: usize) -> Result<u64, Unspooled> {
        let q = s.take_seq().expect("seq");
        s.push(q, &batch(q, records, pad), records as u64)
    }

    #[test]
    fn in_order_across_a_restart() {
        let d = dir("restart");
        let mut s = Spool::open(&d, 1 << 20).expect("open");
        for i in 0..3 {
            let seq = s.take_seq().expect("seq");
            assert_eq!(seq, i);
            s.push(seq, &batch(seq, 1, 3), 1).expect("push");
        }
        let e = s.oldest().expect("front");
        assert_eq!(e.seq, 0);
        assert_eq!(
            s.dir.read(&e.file(), 1 << 20).expect("read"),
            batch(0, 1, 3)
        );
        s.done(e.seq);
        // an interrupted write of an earlier run is discarded
        std::fs::write(d.join(".00000000000000000009.batch.tmp"), b"half").expect("tmp");
        drop(s);
        let mut s = Spool::open(&d, 1 << 20).expect("reopen");
        assert_eq!((s.batches(), s.quarantined), (2, 0));
        assert_eq!(s.oldest().map(|e| e.seq), Some(1));
        s.release();
        // numbering continues after the last run's
        assert_eq!(s.take_seq().expect("seq"), 3);
        assert!(!d.join(".00000000000000000009.batch.tmp").exists());
        // even when every batch was sent: next-seq remembers
        for q in [1, 2] {
            s.done(q);
        }
        drop(s);
        let mut s = Spool::open(&d, 1 << 20).expect("reopen");
        assert_eq!((s.batches(), s.take_seq().expect("seq")), (0, 4));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_limit_holds_exactly_and_never_drops_what_is_in_flight() {
        let d = dir("limit");
        let one = batch(0, 1, 10).len() as u64;
        let mut s = Spool::open(&d, 2 * one + one / 2).expect("open");
        assert_eq!(push(&mut s, 1, 10), Ok(0));
        assert_eq!(push(&mut s, 1, 10), Ok(0));
        assert_eq!(s.oldest().map(|e| e.seq), Some(0)); // 0 in flight
        assert_eq!(push(&mut s, 1, 10), Ok(1)); // batch 1 goes, 0 is being sent
        assert_eq!((s.dropped, s.lost_records), (1, 1));
        assert!(
            s.peak_bytes <= s.limit_bytes,
            "{} > {}",
            s.peak_bytes,
            s.limit_bytes
        );
        s.done(0);
        assert_eq!(s.oldest().map(|e| e.seq), Some(2));
        s.release();
        // larger than the limit: not spooled, nothing dropped for it
        assert!(matches!(
            push(&mut s, 10, 100),
            Err(Unspooled::TooLarge { .. })
        ));
        assert_eq!((s.batches(), s.dropped), (1, 1));
        // a backlog goes out several batches at a time, bounded by count and bytes
        for _ in 0..1 {
            push(&mut s, 1, 10).expect("push");
        }
        let seqs = |v: Vec<Entry>| v.into_iter().map(|e| e.seq).collect::<Vec<_>>();
        assert_eq!(seqs(s.next_up_to(8, 2 * one)), [2, 4]);
        assert_eq!(seqs(s.next_up_to(8, 1)), [2], "at least one");
        assert!(s.peak_bytes <= s.limit_bytes);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn tables_taken_are_remembered_across_a_restart() {
        let d = dir("taken");
        let mut s = Spool::open(&d, 1 << 20).expect("open");
        push(&mut s, 2, 4).expect("push");
        let e = s.took(0, 0b0001).expect("entry");
        assert_eq!(e.taken, 1);
        assert!(d.join("00000000000000000000-t1.batch").is_file());
        drop(s);
        let mut s = Spool::open(&d, 1 << 20).expect("reopen");
        let e = s.oldest().expect("entry");
        assert_eq!((e.seq, e.taken), (0, 1));
        // the records table took it: setting it aside loses no record
        s.set_aside(0, "test");
        assert_eq!((s.quarantined, s.lost_records, s.batches()), (1, 0, 0));
        assert!(d.join("quarantine/00000000000000000000-t1.batch").is_file());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_batch_of_the_previous_version_is_indexed_with_the_tables_it_took() {
        // spooled by v2 (no `baselines`), its records and chains taken (`-t3`), then the
        // package upgraded: the records count and the taken tables read the same
        let d = dir("upgrade");
        drop(Spool::open(&d, 1 << 20).expect("open"));
        let old = crate::rows::frame_v2(
            0,
            &[
                b"{}\n{}\n".to_vec(),
                Vec::new(),
                b"{}\n".to_vec(),
                b"{}\n".to_vec(),
            ],
        );
        std::fs::write(d.join("00000000000000000000-t3.batch"), &old).expect("write");
        let mut s = Spool::open(&d, 1 << 20).expect("reopen");
        let e = s.oldest().expect("indexed, not set aside");
        assert_eq!((e.seq, e.records, e.taken, s.quarantined), (0, 2, 0b11, 0));
        // counters, snapshots, then baselines, port_counters and qp_errors (none in it): every
        // table took it
        for t in [2, 3, 4, 5, 6] {
            s.took(0, 1 << t).expect("entry");
        }
        assert_eq!(s.took(0, 0).map(|e| e.taken), Some(ALL_TABLES));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn what_is_not_a_batch_is_set_aside_at_open_and_counted() {
        let d = dir("planted");
        let mut s = Spool::open(&d, 1 << 20).expect("open");
        push(&mut s, 3, 4).expect("push");
        push(&mut s, 2, 4).expect("push");
        drop(s);
        // a directory named like a batch, a link to a root-only file, a torn batch
        std::fs::create_dir(d.join("00000000000000000007.batch")).expect("dir");
        std::os::unix::fs::symlink("/etc/shadow", d.join("00000000000000000008.batch"))
            .expect("link");
        let torn = d.join("00000000000000000001.batch");
        let b = std::fs::read(&torn).expect("read");
        std::fs::write(&torn, &b[..b.len() - 5]).expect("cut");
        // the torn batch's 2 records are lost (its header still says how many)
        let s = Spool::open(&d, 1 << 20).expect("reopen");
        assert_eq!((s.batches(), s.quarantined, s.lost_records), (1, 3, 2));
        assert!(
            std::fs::symlink_metadata(d.join("quarantine/00000000000000000008.batch"))
                .is_ok_and(|m| m.file_type().is_symlink())
        );
        drop(s);
        // a next-seq past 2^63 is a corrupt state
        std::fs::write(d.join("next-seq"), format!("{}\n", u64::MAX)).expect("next-seq");
        let e = Spool::open(&d, 1 << 20).expect_err("refused");
        assert!(e.contains("past 2^63"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_second_spool_on_the_same_directory_is_refused() {
        let d = dir("lock");
        let s = Spool::open(&d, 1 << 20).expect("open");
        let e = Spool::open(&d, 1 << 20).expect_err("locked");
        assert!(
            e.contains("in use by another collector")
                && e.contains(&std::process::id().to_string()),
            "{e}"
        );
        drop(s);
        Spool::open(&d, 1 << 20).expect("free again");
        let _ = std::fs::remove_dir_all(&d);
    }
}
