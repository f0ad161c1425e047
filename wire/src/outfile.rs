//! Files the collector writes (the JSONL `--out`, each new file after a rotation or a SIGHUP,
//! its lock, `--record`), opened so that no one else's file can stand in for them. The agent
//! runs as root, often in a directory others can write to, where a name may already be taken:
//! a symbolic or hard link to `/etc/passwd`, a FIFO that blocks `open(2)` until a reader comes.
//!
//! So the open is `O_NOFOLLOW` (a link is refused, not followed) and `O_NONBLOCK` (a FIFO
//! cannot block it: a stop always wins), and what was opened is checked with `fstat` (no race
//! with the name): a regular file owned by this process's user with one name, or a character
//! device (`/dev/null`, `/dev/full`: only root makes those; kept non-blocking, so a write
//! cannot wait either). Anything else is [`Refused`]: the run does not start (exit 2), and met
//! at a later reopen, the snapshot is counted as a sink error.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Why a file is not written: it is not one the collector may write (a hostile or wrong
/// file, not a passing failure such as a full disk).
#[derive(Debug)]
pub(crate) struct Refused(String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

fn refused(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, Refused(why))
}

/// Whether `e` is a refusal ([`Refused`]) rather than a failure that may pass.
pub fn is_refused(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|r| r.is::<Refused>())
}

/// What an output turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputKind {
    /// a regular file: locked, rotated, fenced, cut back after a failed write
    File,
    /// a character device: written as it is
    Device,
}

/// `path` with `suffix` added to its name (`FILE.1`, `FILE.lock`).
pub fn suffixed(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// Whether `path` names a character device itself (not through a link).
pub fn is_device(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_char_device())
}

/// Opens `path` to append to (or, `truncate`, to write from the start once it is checked),
/// creating it and its directory; see the module's doc for what is refused.
pub fn open_output(path: &Path, truncate: bool) -> io::Result<(File, OutputKind)> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    // read too: a fence looks at the last byte (jsonl.rs)
    let f = OpenOptions::new()
        .read(true)
        .append(!truncate)
        .write(true)
        .create(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => {
                refused("a symbolic link (not followed): expected a regular file".into())
            }
            Some(libc::ENXIO) => refused("a socket or FIFO: expected a regular file".into()),
            Some(libc::EISDIR) => refused("a directory: expected a regular file".into()),
            _ => e,
        })?;
    let meta = f.metadata()?;
    let t = meta.file_type();
    if t.is_char_device() {
        return Ok((f, OutputKind::Device));
    }
    if !t.is_file() {
        let what = if t.is_fifo() {
            "a FIFO"
        } else {
            "not a regular file"
        };
        return Err(refused(format!("{what}: expected a regular file")));
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if meta.uid() != euid {
        return Err(refused(format!(
            "owned by uid {}, not by this process's uid {euid}: expected a file of its own",
            meta.uid()
        )));
    }
    if meta.nlink() != 1 {
        return Err(refused(format!(
            "{} hard links: expected a file with one name",
            meta.nlink()
        )));
    }
    // a regular file never waits on a write, but the flags should say what is meant
    // SAFETY: fcntl on a descriptor this function owns.
    unsafe {
        let fl = libc::fcntl(f.as_raw_fd(), libc::F_GETFL);
        if fl < 0 || libc::fcntl(f.as_raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    if truncate {
        f.set_len(0)?;
    }
    Ok((f, OutputKind::File))
}

/// Takes `FILE.lock` (a file of its own, see [`open_output`]) with an exclusive `flock` held
/// as long as the returned file is open: one collector per output. The lock file is not
/// rotated or renamed, so the lock outlives rotations and a logrotate `mv`. It holds the pid of
/// its holder, which the refusal names.
pub fn lock_output(path: &Path) -> io::Result<File> {
    let lock = suffixed(path, ".lock");
    let named = |e: io::Error| {
        if is_refused(&e) {
            refused(format!("lock file {}: {e}", lock.display()))
        } else {
            e
        }
    };
    let (mut f, kind) = open_output(&lock, false).map_err(named)?;
    if kind != OutputKind::File {
        return Err(named(refused("a device: expected a regular file".into())));
    }
    // SAFETY: flock on a descriptor this function owns.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(e);
        }
        let mut holder = String::new();
        let _ = (&f).take(32).read_to_string(&mut holder);
        return Err(refused(format!(
            "another collector (pid {}) writes it, holding {}: one collector per output",
            holder.trim(),
            lock.display()
        )));
    }
    f.set_len(0)?;
    f.rewind()?;
    writeln!(f, "{}", std::process::id())?;
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("pg-outfile-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("mkdir");
        d
    }

    #[test]
    fn refuses_links_fifos_and_hard_links_and_opens_files_and_devices() {
        let d = dir("refuse");
        let target = d.join("passwd");
        std::fs::write(&target, b"root:x:0:0\n").expect("w");
        let link = d.join("link.jsonl");
        std::os::unix::fs::symlink(&target, &link).expect("symlink");
        let hard = d.join("hard.jsonl");
        std::fs::hard_link(&target, &hard).expect("link");
        let fifo = d.join("fifo.jsonl");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("c");
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        for (p, why) in [
            (&link, "symbolic link"),
            (&hard, "2 hard links"),
            (&fifo, "FIFO"),
            (&d, "a directory"),
        ] {
            let e = open_output(p, true).expect_err("refused");
            assert!(is_refused(&e) && e.to_string().contains(why), "{e}");
        }
        assert_eq!(std::fs::read(&target).expect("r"), b"root:x:0:0\n");
        let (_, kind) = open_output(Path::new("/dev/null"), false).expect("device");
        assert_eq!(kind, OutputKind::Device);
        let (_, kind) = open_output(&d.join("new/s.jsonl"), false).expect("file");
        assert_eq!(kind, OutputKind::File);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn one_lock_per_output() {
        let d = dir("lock");
        let p = d.join("s.jsonl");
        let held = lock_output(&p).expect("first");
        let e = lock_output(&p).expect_err("second");
        let pid = std::process::id().to_string();
        assert!(is_refused(&e) && e.to_string().contains(&pid), "{e}");
        drop(held);
        lock_output(&p).expect("free again");
        let _ = std::fs::remove_dir_all(&d);
    }
}
