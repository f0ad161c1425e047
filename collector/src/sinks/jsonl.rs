//! JSON Lines sink: append-only, one snapshot per line, rotated by size (`FILE` -> `FILE.1`
//! -> ... -> `FILE.<keep>`, the oldest removed). `-` writes to stdout (no rotation, no fsync).
//!
//! Durability: a line is written (`write(2)`: readers see it at once, and a crash of the
//! collector loses nothing) and then synced (`fdatasync`) when it carries anything
//! ([`JsonlFile::write`]: records, chains, counters that moved, the final snapshot). A line of a
//! window in which nothing happened ([`JsonlFile::write_idle`]) is not synced on its own: the
//! next synced line syncs it too, and so does an idle line once the oldest line not synced is
//! [`IDLE_SYNC_EVERY`] old, and a rotation. So a crash of the machine (power, kernel) can lose
//! at most the idle lines of the last [`IDLE_SYNC_EVERY`] and one `--interval`, never a line
//! that counted something (and the lines after a lost one are lost too: one file, in order).
//!
//! Errors never stop collection: a write returns the error for the caller to count and
//! report; a failed file is closed and reopened at the next write. What a failed write left
//! (part of a line: the disk filled up) is cut off again (`ftruncate` to the size before it),
//! so the file holds whole lines only and the next line that fits starts on its own. A file
//! found at an open not ending in `\n` (the collector was killed mid-line, or the cut failed)
//! is fenced: a `\n` is appended, so the fragment is one unreadable line and no good line is
//! glued to it; the run reports it once ([`JsonlFile::take_fenced`]).
//!
//! Files are opened and locked as `outfile.rs` says: never through a link, never a FIFO, one
//! collector per output (`FILE.lock`, taken before the first open and held for the run). A
//! refusal at the start ends the run (exit 2); [`JsonlFile::reopen`] (SIGHUP) opens the name
//! anew at the next write, so after logrotate's `mv FILE FILE.1` the next line starts a new
//! `FILE`.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::sink::{Sink, SinkError};
use wire::{OutputKind, SinkStatus, Snapshot};

use crate::sinks::line::LineCache;

/// At most this long between a sync and the next one while lines that changed nothing are
/// written.
pub(crate) const IDLE_SYNC_EVERY: Duration = Duration::from_secs(30);

/// When a line reaches the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SyncWhen {
    /// synced (`fdatasync`) before the write returns
    Now,
    /// a line of a window in which nothing happened: synced later (see the module's doc)
    Later,
}

/// Writes all of `parts`, in order, with as few `writev` calls as the kernel allows.
fn write_all_parts(f: &mut File, parts: &[&[u8]]) -> io::Result<()> {
    let mut slices: Vec<io::IoSlice<'_>> = parts
        .iter()
        .filter(|p| !p.is_empty())
        .map(|p| io::IoSlice::new(p))
        .collect();
    let mut left = &mut slices[..];
    while !left.is_empty() {
        match f.write_vectored(left) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => io::IoSlice::advance_slices(&mut left, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The rotating file (or stdout) the lines go to.
pub(crate) struct JsonlFile {
    path: Option<PathBuf>,
    max_bytes: u64,
    keep: usize,
    file: Option<(File, OutputKind)>,
    /// `FILE.lock`, held from the first open to the end of the run
    lock: Option<File>,
    size: u64,
    pub rotations: u64,
    /// when the oldest line of the open file not synced yet was written (`None`: all synced)
    unsynced_since: Option<Instant>,
    /// an open found a line cut short and fenced it at this offset (not reported yet)
    fenced: Option<u64>,
}

impl JsonlFile {
    /// `path` `-` is stdout. `max_bytes` 0 disables rotation.
    pub(crate) fn new(path: &Path, max_bytes: u64, keep: usize) -> Self {
        JsonlFile {
            path: (path != Path::new("-")).then(|| path.to_path_buf()),
            max_bytes,
            keep: keep.max(1),
            file: None,
            lock: None,
            size: 0,
            rotations: 0,
            unsynced_since: None,
            fenced: None,
        }
    }

    pub(crate) fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Takes the lock (a device has none) and opens the file, fencing a line cut short.
    fn open(&mut self) -> io::Result<()> {
        let Some(path) = self.path.as_deref() else {
            return Ok(());
        };
        if self.lock.is_none() && !wire::is_device(path) {
            self.lock = Some(wire::lock_output(path)?);
        }
        let (mut f, kind) = wire::open_output(path, false)?;
        let mut size = f.metadata()?.len();
        let mut last = [0u8; 1];
        if kind == OutputKind::File && size > 0 {
            f.read_exact_at(&mut last, size - 1)?;
            if last[0] != b'\n' {
                f.write_all(b"\n")?;
                self.fenced = Some(size);
                size += 1;
            }
        }
        self.file = Some((f, kind));
        self.size = size;
        Ok(())
    }

    /// Checks (and locks) the file before the run: a refusal (a link, a FIFO, another
    /// collector's file) is returned; a failure that may pass (a full disk, a directory not
    /// there yet) is left to the first write, which counts it.
    pub(crate) fn start(&mut self) -> io::Result<()> {
        match self.open() {
            Err(e) if wire::is_refused(&e) => Err(e),
            _ => Ok(()),
        }
    }

    /// The next write opens the name anew (SIGHUP: the file may have been moved away).
    pub(crate) fn reopen(&mut self) {
        if let (Some((f, _)), Some(_)) = (self.file.take(), self.unsynced_since.take()) {
            // a failed sync loses at most idle lines (the module's doc), as a crash would
            let _ = f.sync_data();
        }
        self.size = 0;
    }

    /// Where a line cut short was fenced since the last call (reported once).
    pub(crate) fn take_fenced(&mut self) -> Option<u64> {
        self.fenced.take()
    }

    fn rotate(&mut self, path: &Path) -> io::Result<()> {
        // the idle lines not synced yet go with the file
        if let (Some((f, _)), Some(_)) = (self.file.take(), self.unsynced_since.take()) {
            f.sync_data()?;
        }
        // rename(2) and unlink(2) act on a link itself, never on what it points to; the new
        // FILE is opened as every other (outfile.rs)
        let numbered = |i: usize| wire::suffixed(path, &format!(".{i}"));
        let _ = std::fs::remove_file(numbered(self.keep));
        for i in (1..self.keep).rev() {
            let from = numbered(i);
            if std::fs::symlink_metadata(&from).is_ok() {
                std::fs::rename(&from, numbered(i + 1))?;
            }
        }
        std::fs::rename(path, numbered(1))?;
        self.rotations += 1;
        Ok(())
    }

    /// Appends one line given in parts (joined, they end in `\n`) with one `writev`.
    pub(crate) fn write_parts(&mut self, parts: &[&[u8]], sync: SyncWhen) -> io::Result<()> {
        let Some(path) = self.path.clone() else {
            let mut out = io::stdout().lock();
            for part in parts {
                out.write_all(part)?;
            }
            return out.flush();
        };
        let len: u64 = parts.iter().map(|p| p.len() as u64).sum();
        if self.file.is_none() {
            self.open()?;
        }
        let rotates = self.file.as_ref().is_some_and(|f| f.1 == OutputKind::File);
        if rotates && self.max_bytes > 0 && self.size > 0 && self.size + len > self.max_bytes {
            self.rotate(&path)?;
            self.open()?;
        }
        let now = Instant::now();
        let sync = sync == SyncWhen::Now
            || self
                .unsynced_since
                .is_some_and(|t| now.duration_since(t) >= IDLE_SYNC_EVERY);
        let Some((f, kind)) = self.file.as_mut() else {
            return Err(io::Error::other("sink not open"));
        };
        // the size before the line (not our count: the file may have been cut by another)
        let before = match kind {
            OutputKind::File => Some(f.metadata()?.len()),
            OutputKind::Device => None,
        };
        let res = write_all_parts(f, parts).and_then(|_| if sync { f.sync_data() } else { Ok(()) });
        match res {
            Ok(()) => {
                self.size += len;
                self.unsynced_since = if sync {
                    None
                } else {
                    self.unsynced_since.or(Some(now))
                };
                Ok(())
            }
            Err(e) => {
                // no part of the line stays (a later open fences what a failed cut leaves)
                if let Some(before) = before {
                    let _ = f.set_len(before);
                }
                // reopen next time (the file may have been removed, the disk freed)
                self.file = None;
                self.unsynced_since = None;
                Err(e)
            }
        }
    }
}

/// The JSONL sink: each snapshot as one line, the parts it shares with the last line
/// serialised once ([`LineCache`]), synced per the module's doc.
pub struct JsonlSink {
    pub(crate) file: JsonlFile,
    line: LineCache,
    name: String,
}

impl JsonlSink {
    /// `path` `-` is stdout. `max_bytes` 0 disables rotation.
    pub fn new(path: &Path, max_bytes: u64, keep: usize) -> Self {
        let file = JsonlFile::new(path, max_bytes, keep);
        let name = format!(
            "sink {}",
            file.path()
                .map_or("stdout".into(), |p| p.display().to_string())
        );
        JsonlSink {
            file,
            line: LineCache::default(),
            name,
        }
    }
}

impl Sink for JsonlSink {
    fn name(&self) -> &str {
        &self.name
    }

    fn write(&mut self, snap: &Snapshot) -> Result<Option<SinkStatus>, SinkError> {
        let parts = self.line.parts(snap);
        crate::timings::mark("line");
        // a window in which nothing happened is synced later (see the module's doc)
        let sync = if snap.idle {
            SyncWhen::Later
        } else {
            SyncWhen::Now
        };
        self.file.write_parts(&parts, sync)?;
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl JsonlFile {
        /// Appends one line (which must end in `\n`) and syncs it to disk.
        pub(crate) fn write(&mut self, line: &[u8]) -> io::Result<()> {
            self.write_parts(&[line], SyncWhen::Now)
        }

        /// Appends the line of a window in which nothing happened: synced only when the oldest
        /// line not synced is [`IDLE_SYNC_EVERY`] old (see the module's doc).
        pub(crate) fn write_idle(&mut self, line: &[u8]) -> io::Result<()> {
            self.write_parts(&[line], SyncWhen::Later)
        }
    }

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("pg-sink-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("mkdir");
        d
    }

    #[test]
    fn appends_and_rotates() {
        let d = dir("rot");
        let p = d.join("s.jsonl");
        std::fs::write(&p, b"{\"old\":1}\n").expect("w");
        let mut s = JsonlFile::new(&p, 100, 2);
        let line = format!("{{\"x\":\"{}\"}}\n", "a".repeat(40)).into_bytes();
        for _ in 0..7 {
            s.write(&line).expect("write");
        }
        let cur = std::fs::read_to_string(&p).expect("r");
        assert!(cur.len() <= 100 && cur.ends_with('\n'));
        assert!(d.join("s.jsonl.1").exists() && d.join("s.jsonl.2").exists());
        assert!(!d.join("s.jsonl.3").exists());
        // every file holds whole lines only
        for f in ["s.jsonl", "s.jsonl.1", "s.jsonl.2"] {
            let t = std::fs::read_to_string(d.join(f)).expect("r");
            for l in t.lines() {
                serde_json::from_str::<serde_json::Value>(l).expect("json line");
            }
        }
        assert!(s.rotations >= 2);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn errors_are_returned_and_recovered() {
        // /dev/full: open works, every write fails with ENOSPC
        let mut s = JsonlFile::new(Path::new("/dev/full"), 0, 1);
        assert!(s.write(b"{}\n").is_err());
        assert!(s.write(b"{}\n").is_err());
        // a path under a regular file cannot be created
        let d = dir("err");
        let f = d.join("file");
        std::fs::write(&f, b"").expect("w");
        let mut s = JsonlFile::new(&f.join("x.jsonl"), 0, 1);
        assert!(s.write(b"{}\n").is_err());
        // the path becomes writable: the sink recovers
        let p = d.join("later.jsonl");
        let mut s = JsonlFile::new(&p, 0, 1);
        std::fs::create_dir_all(d.join("ro")).expect("mkdir");
        s.write(b"{}\n").expect("write");
        assert_eq!(std::fs::read(&p).expect("r"), b"{}\n");
        let _ = std::fs::remove_dir_all(&d);
    }

    /// The module's promise: a failed file is closed and reopened at the next write, so the
    /// same sink writes again once the disk has room (here: the path stops being /dev/full)
    /// or its directory can be created again.
    #[test]
    fn a_failed_sink_reopens_and_writes_again() {
        let d = dir("reopen");
        // a full disk: the path is /dev/full, the open works and the write fails (ENOSPC)
        let p = d.join("s.jsonl");
        std::os::unix::fs::symlink("/dev/full", &p).expect("symlink");
        let mut s = JsonlFile::new(&p, 0, 1);
        s.write(b"{\"n\":0}\n").expect_err("the disk is full");
        // the disk has room again: the next write opens the path anew (a regular file now)
        std::fs::remove_file(&p).expect("rm symlink");
        s.write(b"{\"n\":1}\n").expect("reopened after the failure");
        s.write(b"{\"n\":2}\n").expect("and kept open");
        assert_eq!(
            std::fs::read_to_string(&p).expect("r"),
            "{\"n\":1}\n{\"n\":2}\n"
        );
        assert!(!std::fs::symlink_metadata(&p)
            .expect("stat")
            .file_type()
            .is_symlink());

        // the directory is taken by a file: the open fails until it is gone
        let sub = d.join("sub");
        std::fs::write(&sub, b"").expect("w");
        let q = sub.join("s.jsonl");
        let mut s = JsonlFile::new(&q, 0, 1);
        s.write(b"{}\n").expect_err("no directory");
        std::fs::remove_file(&sub).expect("rm");
        s.write(b"{}\n")
            .expect("the directory is created and the file opened");
        assert_eq!(std::fs::read(&q).expect("r"), b"{}\n");
        let _ = std::fs::remove_dir_all(&d);
    }

    /// Idle lines are written at once (a reader sees them) and synced with the next line that
    /// is, once the oldest of them is [`IDLE_SYNC_EVERY`] old, or before a rotation.
    #[test]
    fn idle_lines_are_written_at_once_and_synced_later() {
        let d = dir("idle");
        let p = d.join("s.jsonl");
        let mut s = JsonlFile::new(&p, 48, 3);
        s.write_idle(b"{\"n\":0}\n").expect("write");
        let first = s.unsynced_since.expect("not synced yet");
        s.write_idle(b"{\"n\":1}\n").expect("write");
        assert_eq!(std::fs::read(&p).expect("r"), b"{\"n\":0}\n{\"n\":1}\n");
        assert_eq!(
            s.unsynced_since,
            Some(first),
            "the oldest line's time is kept"
        );
        // a line that counted something syncs them all (here in parts, one writev)
        s.write_parts(&[b"{\"n\"", b"", b":2}\n"], SyncWhen::Now)
            .expect("write");
        assert_eq!(s.unsynced_since, None);
        // the oldest idle line is IDLE_SYNC_EVERY old: the next idle line syncs
        s.write_idle(b"{\"n\":3}\n").expect("write");
        s.unsynced_since = Instant::now().checked_sub(IDLE_SYNC_EVERY);
        s.write_idle(b"{\"n\":4}\n").expect("write");
        assert_eq!(s.unsynced_since, None);
        // a rotation syncs what the old file holds (n5), the new file has n6 only
        s.write_idle(b"{\"n\":5}\n").expect("write");
        assert!(s.unsynced_since.is_some());
        s.write_idle(b"{\"n\":6}\n").expect("write");
        assert_eq!(s.rotations, 1);
        assert_eq!(
            std::fs::read_to_string(d.join("s.jsonl.1")).expect("r"),
            "{\"n\":0}\n{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n{\"n\":4}\n{\"n\":5}\n"
        );
        assert!(s.unsynced_since.is_some(), "n6 waits for its sync");
        assert_eq!(std::fs::read(&p).expect("r"), b"{\"n\":6}\n");
        let _ = std::fs::remove_dir_all(&d);
    }

    /// A line cut short (a kill mid-line) is fenced at the next open and reported once; the
    /// lines after it stand alone.
    #[test]
    fn a_line_cut_short_is_fenced_once() {
        let d = dir("fence");
        let p = d.join("s.jsonl");
        std::fs::write(&p, b"{\"n\":0}\n{\"n\":1").expect("w");
        let mut s = JsonlFile::new(&p, 0, 1);
        s.start().expect("start");
        s.write(b"{\"n\":2}\n").expect("write");
        assert_eq!(s.take_fenced(), Some(14));
        assert_eq!(s.take_fenced(), None);
        s.reopen();
        s.write(b"{\"n\":3}\n").expect("write");
        assert_eq!(s.take_fenced(), None, "a whole file is not fenced");
        assert_eq!(
            std::fs::read_to_string(&p).expect("r"),
            "{\"n\":0}\n{\"n\":1\n{\"n\":2}\n{\"n\":3}\n"
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    /// SIGHUP after `mv FILE FILE.old`: the next line starts a new FILE.
    #[test]
    fn reopen_follows_the_name() {
        let d = dir("hup");
        let p = d.join("s.jsonl");
        let mut s = JsonlFile::new(&p, 0, 1);
        s.write(b"{\"n\":0}\n").expect("write");
        std::fs::rename(&p, d.join("s.jsonl.old")).expect("mv");
        s.write(b"{\"n\":1}\n").expect("write");
        s.reopen();
        s.write(b"{\"n\":2}\n").expect("write");
        let old = std::fs::read_to_string(d.join("s.jsonl.old")).expect("r");
        assert_eq!(old, "{\"n\":0}\n{\"n\":1}\n");
        assert_eq!(std::fs::read_to_string(&p).expect("r"), "{\"n\":2}\n");
        let _ = std::fs::remove_dir_all(&d);
    }
}
