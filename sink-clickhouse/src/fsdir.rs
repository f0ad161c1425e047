//! The spool's directory as a handle: created 0700, used only when this user owns it and no
//! one else can write in it, every file reached through the directory's descriptor with
//! `O_NOFOLLOW` (a name swapped for a symbolic link is refused, never followed), new files
//! made with `O_EXCL` then renamed, only regular files read. The agent runs as root next to
//! an output another user may name first (`OUT.jsonl.clickhouse-spool` under a 1777
//! directory): a directory it does not own is refused, not used.

use std::ffi::CString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

#[derive(Debug)]
pub(crate) struct PrivateDir {
    fd: OwnedFd,
    path: PathBuf,
}

fn cname(name: &str) -> std::io::Result<CString> {
    CString::new(name).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))
}

fn check(rc: libc::c_int) -> std::io::Result<libc::c_int> {
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// Refuses a directory another user owns or can write in (one line naming it and why).
fn refuse_shared(path: &Path, m: &std::fs::Metadata) -> Result<(), String> {
    // SAFETY: geteuid has no preconditions and cannot fail
    let me = unsafe { libc::geteuid() };
    if m.uid() != me {
        return Err(format!(
            "spool {}: owned by uid {}, not this user (uid {me}): refusing it (its owner could \
             plant files the agent would read or overwrite); remove it or name another \
             with --clickhouse-spool",
            path.display(),
            m.uid()
        ));
    }
    if m.mode() & 0o022 != 0 {
        return Err(format!(
            "spool {}: writable by group or others (mode {:o}): refusing it; `chmod go-w` it \
             or name another with --clickhouse-spool",
            path.display(),
            m.mode() & 0o7777
        ));
    }
    Ok(())
}

impl PrivateDir {
    /// Creates `path` (0700; its parents as the umask says) or opens the existing one, and
    /// checks it: a directory (not a link to one), owned by this user, not writable by others.
    pub(crate) fn open(path: &Path) -> Result<Self, String> {
        let err = |e: std::io::Error| format!("spool {}: {e}", path.display());
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(err)?;
        }
        match std::fs::DirBuilder::new().mode(0o700).create(path) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(err(e)),
            _ => {}
        }
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| format!("spool {}: a NUL in the path", path.display()))?;
        // SAFETY: a valid C string; the descriptor is owned below
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        let fd = check(fd).map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) || e.raw_os_error() == Some(libc::ENOTDIR) {
                format!(
                    "spool {}: not a directory (a symbolic link or a file): refusing it",
                    path.display()
                )
            } else {
                err(e)
            }
        })?;
        // SAFETY: fd was just opened and is owned by nobody else
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let m = File::from(fd.try_clone().map_err(err)?)
            .metadata()
            .map_err(err)?;
        refuse_shared(path, &m)?;
        Ok(PrivateDir {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// The subdirectory `name`, created 0700 when missing, checked like the spool.
    pub(crate) fn sub(&self, name: &str) -> Result<Self, String> {
        let path = self.path.join(name);
        let err = |e: std::io::Error| format!("spool {}: {e}", path.display());
        let c = cname(name).map_err(err)?;
        // SAFETY: valid descriptor and C string
        match check(unsafe { libc::mkdirat(self.fd.as_raw_fd(), c.as_ptr(), 0o700) }) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(err(e)),
            _ => {}
        }
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        let fd = self.openat(name, flags, 0).map_err(err)?;
        let m = File::from(fd.try_clone().map_err(err)?)
            .metadata()
            .map_err(err)?;
        refuse_shared(&path, &m)?;
        Ok(PrivateDir { fd, path })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn openat(
        &self,
        name: &str,
        flags: libc::c_int,
        mode: libc::mode_t,
    ) -> std::io::Result<OwnedFd> {
        let c = cname(name)?;
        // SAFETY: valid descriptor and C string; the result is owned below
        let fd = check(unsafe {
            libc::openat(
                self.fd.as_raw_fd(),
                c.as_ptr(),
                flags | libc::O_CLOEXEC | libc::O_NOFOLLOW,
                libc::c_uint::from(mode),
            )
        })?;
        // SAFETY: just opened, owned by nobody else
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// Opens `name` for reading: a regular file (a link, a directory, a FIFO is refused;
    /// `O_NONBLOCK` so that a FIFO never blocks the open). Its size with it.
    pub(crate) fn open_regular(&self, name: &str) -> std::io::Result<(File, u64)> {
        let f = File::from(self.openat(name, libc::O_RDONLY | libc::O_NONBLOCK, 0)?);
        let m = f.metadata()?;
        if !m.file_type().is_file() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "not a regular file",
            ));
        }
        Ok((f, m.len()))
    }

    /// Reads the whole of `name` (a regular file of at most `cap` bytes).
    pub(crate) fn read(&self, name: &str, cap: u64) -> std::io::Result<Vec<u8>> {
        let (f, len) = self.open_regular(name)?;
        if len > cap {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{len} bytes, more than the spool limit ({cap})"),
            ));
        }
        let mut out = Vec::with_capacity(len as usize);
        f.take(cap).read_to_end(&mut out)?;
        Ok(out)
    }

    /// Writes `name` whole or not at all: a new temporary file (`O_EXCL`: never one that
    /// exists), synced, renamed over `name`. A failed write leaves no temporary file.
    pub(crate) fn write_atomic(&self, name: &str, bytes: &[u8]) -> std::io::Result<()> {
        let tmp = format!(".{name}.tmp");
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL;
        let fd = match self.openat(&tmp, flags, 0o600) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                // left by a crash of this run's own process (the directory is ours alone)
                self.remove(&tmp)?;
                self.openat(&tmp, flags, 0o600)?
            }
            r => r?,
        };
        let mut f = File::from(fd);
        let written = f
            .write_all(bytes)
            .and_then(|()| f.sync_data())
            .and_then(|()| self.rename(&tmp, name));
        if written.is_err() {
            let _ = self.remove(&tmp);
        }
        written
    }

    pub(crate) fn rename(&self, from: &str, to: &str) -> std::io::Result<()> {
        self.rename_to(from, self, to)
    }

    /// Moves `from` here to `to` in `other` (a file or a directory).
    pub(crate) fn rename_to(
        &self,
        from: &str,
        other: &PrivateDir,
        to: &str,
    ) -> std::io::Result<()> {
        let (f, t) = (cname(from)?, cname(to)?);
        // SAFETY: valid descriptors and C strings
        check(unsafe {
            libc::renameat(
                self.fd.as_raw_fd(),
                f.as_ptr(),
                other.fd.as_raw_fd(),
                t.as_ptr(),
            )
        })
        .map(|_| ())
    }

    /// Removes the file (or link, FIFO) `name`; a directory with what is in it.
    pub(crate) fn remove(&self, name: &str) -> std::io::Result<()> {
        let c = cname(name)?;
        // SAFETY: valid descriptor and C string
        match check(unsafe { libc::unlinkat(self.fd.as_raw_fd(), c.as_ptr(), 0) }) {
            Err(e) if e.raw_os_error() == Some(libc::EISDIR) => {
                // std's remove_dir_all never follows links inside the tree
                std::fs::remove_dir_all(self.path.join(name))
            }
            r => r.map(|_| ()),
        }
    }

    /// The names in the directory.
    pub(crate) fn names(&self) -> std::io::Result<Vec<String>> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(&self.path)? {
            out.push(e?.file_name().to_string_lossy().into_owned());
        }
        Ok(out)
    }

    /// Makes renames and removals durable (best effort where unsupported).
    pub(crate) fn sync(&self) {
        // SAFETY: valid descriptor
        let _ = unsafe { libc::fsync(self.fd.as_raw_fd()) };
    }

    /// Takes the exclusive lock on `name` for as long as the returned file lives, and writes
    /// this process's id in it; a lock held elsewhere is an error naming its holder.
    pub(crate) fn lock(&self, name: &str) -> Result<File, String> {
        let err = |e: std::io::Error| format!("spool {}: lock: {e}", self.path.display());
        let fd = self
            .openat(name, libc::O_RDWR | libc::O_CREAT, 0o600)
            .map_err(err)?;
        let mut f = File::from(fd);
        if !f.metadata().map_err(err)?.file_type().is_file() {
            return Err(format!(
                "spool {}: `{name}` is not a regular file",
                self.path.display()
            ));
        }
        // SAFETY: valid descriptor
        if let Err(e) = check(unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) })
        {
            if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(err(e));
            }
            let mut pid = String::new();
            let _ = (&f).take(32).read_to_string(&mut pid);
            let pid = pid.trim().parse::<u32>().ok();
            return Err(format!(
                "spool {} is in use by another collector{}: one spool (and one --out) per \
                 collector",
                self.path.display(),
                pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
            ));
        }
        f.set_len(0)
            .and_then(|()| writeln!(f, "{}", std::process::id()))
            .map_err(err)?;
        Ok(f)
    }
}
