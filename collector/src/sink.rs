//! JSON Lines sink: append-only, one snapshot per line, `fsync` (fdatasync) after each
//! snapshot, rotated by size (`FILE` -> `FILE.1` -> ... -> `FILE.<keep>`, the oldest removed).
//! `-` writes to stdout (no rotation, no fsync).
//!
//! Errors never stop collection: [`JsonlSink::write`] returns the error for the caller to count
//! and report; a failed file is closed and reopened at the next write.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

pub struct JsonlSink {
    path: Option<PathBuf>,
    max_bytes: u64,
    keep: usize,
    file: Option<File>,
    size: u64,
    pub rotations: u64,
}

impl JsonlSink {
    /// `path` `-` is stdout. `max_bytes` 0 disables rotation.
    pub fn new(path: &Path, max_bytes: u64, keep: usize) -> Self {
        JsonlSink {
            path: (path != Path::new("-")).then(|| path.to_path_buf()),
            max_bytes,
            keep: keep.max(1),
            file: None,
            size: 0,
            rotations: 0,
        }
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    fn open(path: &Path) -> io::Result<(File, u64)> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let f = OpenOptions::new().create(true).append(true).open(path)?;
        let size = f.metadata().map(|m| m.len()).unwrap_or(0);
        Ok((f, size))
    }

    fn rotate(&mut self, path: &Path) -> io::Result<()> {
        self.file = None;
        let numbered = |i: usize| {
            let mut s = path.as_os_str().to_owned();
            s.push(format!(".{i}"));
            PathBuf::from(s)
        };
        let _ = std::fs::remove_file(numbered(self.keep));
        for i in (1..self.keep).rev() {
            let from = numbered(i);
            if from.exists() {
                std::fs::rename(&from, numbered(i + 1))?;
            }
        }
        std::fs::rename(path, numbered(1))?;
        self.rotations += 1;
        Ok(())
    }

    /// Appends one line (which must end in `\n`) and syncs it to disk.
    pub fn write(&mut self, line: &[u8]) -> io::Result<()> {
        let Some(path) = self.path.clone() else {
            let mut out = io::stdout().lock();
            out.write_all(line)?;
            return out.flush();
        };
        if self.file.is_none() {
            let (f, size) = Self::open(&path)?;
            self.file = Some(f);
            self.size = size;
        }
        if self.max_bytes > 0 && self.size > 0 && self.size + line.len() as u64 > self.max_bytes {
            self.rotate(&path)?;
            let (f, size) = Self::open(&path)?;
            self.file = Some(f);
            self.size = size;
        }
        let res = match self.file.as_mut() {
            Some(f) => f.write_all(line).and_then(|_| f.sync_data()),
            None => Err(io::Error::other("sink not open")),
        };
        match res {
            Ok(()) => {
                self.size += line.len() as u64;
                Ok(())
            }
            Err(e) => {
                // reopen next time (the file may have been removed, the disk freed)
                self.file = None;
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let mut s = JsonlSink::new(&p, 100, 2);
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
        let mut s = JsonlSink::new(Path::new("/dev/full"), 0, 1);
        assert!(s.write(b"{}\n").is_err());
        assert!(s.write(b"{}\n").is_err());
        // a path under a regular file cannot be created
        let d = dir("err");
        let f = d.join("file");
        std::fs::write(&f, b"").expect("w");
        let mut s = JsonlSink::new(&f.join("x.jsonl"), 0, 1);
        assert!(s.write(b"{}\n").is_err());
        // the path becomes writable: the sink recovers
        let p = d.join("later.jsonl");
        let mut s = JsonlSink::new(&p, 0, 1);
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
        let mut s = JsonlSink::new(&p, 0, 1);
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
        let mut s = JsonlSink::new(&q, 0, 1);
        s.write(b"{}\n").expect_err("no directory");
        std::fs::remove_file(&sub).expect("rm");
        s.write(b"{}\n")
            .expect("the directory is created and the file opened");
        assert_eq!(std::fs::read(&q).expect("r"), b"{}\n");
        let _ = std::fs::remove_dir_all(&d);
    }
}
