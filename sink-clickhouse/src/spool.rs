//! The on-disk queue of batches not yet in ClickHouse: every batch is written here first
//! (fsync'ed file per batch, `<seq>.batch`), the sender thread sends the oldest and removes it
//! once ClickHouse took it. So a server that is down costs disk, not memory, and a restart
//! resumes where the last run stopped, in order.
//!
//! Bounded by bytes: past the limit the oldest batches are removed and counted (`dropped`),
//! never the one being sent. Sequence numbers continue across runs (`next-seq` file), so the
//! key (host, boot id, seq) of a new run's batches never collides with a spooled one.

use std::collections::VecDeque;
use std::io::Write;
use std::path::{Path, PathBuf};

const SUFFIX: &str = ".batch";
const NEXT_SEQ: &str = "next-seq";

#[derive(Debug)]
pub(crate) struct Spool {
    dir: PathBuf,
    limit_bytes: u64,
    /// (seq, bytes), oldest first
    queue: VecDeque<(u64, u64)>,
    bytes: u64,
    next_seq: u64,
    /// the batches the sender is sending (never dropped)
    in_flight: Vec<u64>,
    /// batches dropped past the limit, this run
    pub dropped: u64,
    /// largest size reached, this run
    pub peak_bytes: u64,
    pub peak_batches: usize,
}

fn name(seq: u64) -> String {
    format!("{seq:020}{SUFFIX}")
}

fn sync_dir(dir: &Path) {
    // a rename is durable once the directory is; best effort where that is not supported
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

fn write_atomic(dir: &Path, file: &str, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = dir.join(format!(".{file}.tmp"));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_data()?;
    drop(f);
    std::fs::rename(&tmp, dir.join(file))
}

impl Spool {
    /// Opens (creates) the spool directory and indexes the batches a previous run left.
    pub(crate) fn open(dir: &Path, limit_bytes: u64) -> Result<Self, String> {
        let err = |e: std::io::Error| format!("spool {}: {e}", dir.display());
        std::fs::create_dir_all(dir).map_err(err)?;
        let mut found = Vec::new();
        for e in std::fs::read_dir(dir).map_err(err)? {
            let e = e.map_err(err)?;
            let n = e.file_name().to_string_lossy().into_owned();
            if n.starts_with('.') && n.ends_with(".tmp") {
                // a write interrupted by a crash: never renamed, never acknowledged
                let _ = std::fs::remove_file(e.path());
                continue;
            }
            if let Some(seq) = n.strip_suffix(SUFFIX).and_then(|s| s.parse::<u64>().ok()) {
                let len = e.metadata().map(|m| m.len()).unwrap_or(0);
                found.push((seq, len));
            }
        }
        found.sort_unstable();
        let stored: u64 = std::fs::read_to_string(dir.join(NEXT_SEQ))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        let next_seq = stored.max(found.last().map_or(0, |&(s, _)| s + 1));
        let bytes = found.iter().map(|&(_, b)| b).sum();
        let n = found.len();
        Ok(Spool {
            dir: dir.to_path_buf(),
            limit_bytes,
            queue: found.into(),
            bytes,
            next_seq,
            in_flight: Vec::new(),
            dropped: 0,
            peak_bytes: bytes,
            peak_batches: n,
        })
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The sequence number the next batch gets (persisted: a restart continues after it).
    pub(crate) fn take_seq(&mut self) -> Result<u64, String> {
        let seq = self.next_seq;
        self.next_seq += 1;
        write_atomic(
            &self.dir,
            NEXT_SEQ,
            format!("{}\n", self.next_seq).as_bytes(),
        )
        .map_err(|e| format!("spool {}: {e}", self.dir.display()))?;
        Ok(seq)
    }

    /// Appends batch `seq` (durable when this returns), then drops the oldest batches past
    /// the limit; returns how many were dropped.
    pub(crate) fn push(&mut self, seq: u64, bytes: &[u8]) -> Result<u64, String> {
        write_atomic(&self.dir, &name(seq), bytes)
            .map_err(|e| format!("spool {}: {e}", self.dir.display()))?;
        sync_dir(&self.dir);
        self.queue.push_back((seq, bytes.len() as u64));
        self.bytes += bytes.len() as u64;
        let mut dropped = 0;
        while self.bytes > self.limit_bytes {
            // the oldest that is not being sent (and never the one just written)
            let Some(i) = self
                .queue
                .iter()
                .position(|&(s, _)| !self.in_flight.contains(&s) && s != seq)
            else {
                break;
            };
            if let Some((s, b)) = self.queue.remove(i) {
                let _ = std::fs::remove_file(self.dir.join(name(s)));
                self.bytes -= b;
                dropped += 1;
            }
        }
        self.dropped += dropped;
        self.peak_bytes = self.peak_bytes.max(self.bytes);
        self.peak_batches = self.peak_batches.max(self.queue.len());
        Ok(dropped)
    }

    /// The oldest batch, marked in flight (not dropped until [`Spool::done`] or
    /// [`Spool::release`]).
    #[cfg(test)]
    pub(crate) fn oldest(&mut self) -> Option<(u64, PathBuf)> {
        self.next_up_to(1, u64::MAX).into_iter().next()
    }

    /// The oldest batches, at most `n` of them and `bytes` in all (at least one), marked in
    /// flight: a backlog is sent with one insert per table for many batches.
    pub(crate) fn next_up_to(&mut self, n: usize, bytes: u64) -> Vec<(u64, PathBuf)> {
        let mut out = Vec::new();
        let mut total = 0;
        for &(seq, b) in self.queue.iter().take(n.max(1)) {
            if !out.is_empty() && total + b > bytes {
                break;
            }
            total += b;
            out.push((seq, self.dir.join(name(seq))));
        }
        self.in_flight = out.iter().map(|&(s, _)| s).collect();
        out
    }

    /// Batch `seq` is in ClickHouse: remove it.
    pub(crate) fn done(&mut self, seq: u64) {
        if let Some(i) = self.queue.iter().position(|&(s, _)| s == seq) {
            if let Some((_, b)) = self.queue.remove(i) {
                self.bytes -= b;
            }
        }
        let _ = std::fs::remove_file(self.dir.join(name(seq)));
        sync_dir(&self.dir);
        self.in_flight.retain(|&s| s != seq);
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

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("pg-spool-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn in_order_across_a_restart() {
        let d = dir("restart");
        let mut s = Spool::open(&d, 1 << 20).expect("open");
        for i in 0..3 {
            let seq = s.take_seq().expect("seq");
            assert_eq!(seq, i);
            s.push(seq, format!("batch {i}").as_bytes()).expect("push");
        }
        let (seq, path) = s.oldest().expect("front");
        assert_eq!(seq, 0);
        assert_eq!(std::fs::read(&path).expect("read"), b"batch 0");
        s.done(seq);
        // an interrupted write of an earlier run is discarded
        std::fs::write(d.join(".00000000000000000009.batch.tmp"), b"half").expect("tmp");
        drop(s);
        let mut s = Spool::open(&d, 1 << 20).expect("reopen");
        assert_eq!((s.batches(), s.bytes()), (2, 14));
        assert_eq!(s.oldest().map(|(q, _)| q), Some(1));
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
    fn oldest_dropped_past_the_limit_but_not_the_one_in_flight() {
        let d = dir("limit");
        let mut s = Spool::open(&d, 25).expect("open");
        let push = |s: &mut Spool| {
            let q = s.take_seq().expect("seq");
            s.push(q, &[b'x'; 10]).expect("push")
        };
        assert_eq!(push(&mut s), 0);
        assert_eq!(push(&mut s), 0);
        assert_eq!(s.oldest().map(|(q, _)| q), Some(0)); // 0 in flight
        assert_eq!(push(&mut s), 1); // 30 > 25: batch 1 goes, 0 is being sent
        assert_eq!(s.dropped, 1);
        s.done(0);
        assert_eq!(s.oldest().map(|(q, _)| q), Some(2));
        assert_eq!((s.batches(), s.bytes(), s.peak_bytes), (1, 10, 20));
        s.release();
        // a backlog goes out several batches at a time, bounded by count and bytes
        for _ in 0..3 {
            let q = s.take_seq().expect("seq");
            s.push(q, &[b'y'; 4]).expect("push");
        }
        let seqs = |v: Vec<(u64, PathBuf)>| v.into_iter().map(|(q, _)| q).collect::<Vec<_>>();
        assert_eq!(seqs(s.next_up_to(8, 18)), [2, 3, 4]);
        assert_eq!(seqs(s.next_up_to(2, 1000)), [2, 3]);
        assert_eq!(seqs(s.next_up_to(8, 1)), [2], "at least one");
        let _ = std::fs::remove_dir_all(&d);
    }
}
