//! Drivers that come and go. Every window the source looks at each module its probes live in:
//! one that appeared (udev loaded a driver after the agent started) or came back under a new
//! instance (unloaded and loaded again) gets its programs loaded and attached. A running
//! agent's fexit programs and links hold references on their modules, so `modprobe -r`
//! would fail: the package's `modprobe.d` rule first runs `probegen-agent release MODULE`,
//! which asks through the control socket ([`Control`]) that the module's probes be detached
//! and their programs closed, and waits for the answer. The module is then held detached
//! until it is gone (or loaded again), or for [`RELEASE_HOLD`] should it stay (the removal
//! failed: the probes come back).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::loader::Loaded;
use wire::ProbeTable;

use crate::error::CollectError;
use crate::warning::Warning;

/// How long a released module that is still loaded stays detached.
pub(crate) const RELEASE_HOLD: Duration = Duration::from_secs(30);

/// The loaded instance of `module`: the inode of `/sys/module/<module>` (a new directory each
/// time the module loads), once its init is done (`initstate` live; a built-in module has
/// none). `None`: not loaded, or still loading.
fn instance(sys_module: &Path, module: &str) -> Option<u64> {
    let dir = sys_module.join(module);
    let meta = std::fs::metadata(&dir).ok()?;
    match std::fs::read_to_string(dir.join("initstate")) {
        Ok(s) if s.trim() != "live" => None,
        _ => Some(meta.ino()),
    }
}

#[derive(Default)]
struct Watched {
    /// the instance the last attach was tried on (successful or not)
    tried: Option<u64>,
    /// released at this instant while this instance was loaded
    released: Option<(Option<u64>, Instant)>,
}

/// What the source knows of each module of the probe set.
pub(crate) struct ModuleWatch {
    sys_module: PathBuf,
    modules: BTreeMap<String, Watched>,
}

impl ModuleWatch {
    /// Every module of `table`, as `loaded` found them at the start.
    pub(crate) fn new(table: &ProbeTable) -> Self {
        let sys_module = PathBuf::from("/sys/module");
        let modules = table
            .probes
            .iter()
            .map(|p| {
                let w = Watched {
                    tried: instance(&sys_module, &p.module),
                    released: None,
                };
                (p.module.clone(), w)
            })
            .collect();
        ModuleWatch {
            sys_module,
            modules,
        }
    }

    /// Attaches the modules that appeared or came back since the last look; `true` when the
    /// attach status changed. Each step is a warning line.
    pub(crate) fn follow(
        &mut self,
        loaded: &mut Loaded,
        table: &ProbeTable,
        warnings: &mut Vec<Warning>,
    ) -> bool {
        let mut changed = false;
        for (module, w) in &mut self.modules {
            // the common case, the instance tried before still there: one stat, no read
            let ino = std::fs::metadata(self.sys_module.join(module)).map(|m| m.ino());
            if w.released.is_none() && ino.ok() == w.tried && w.tried.is_some() {
                continue;
            }
            let now = instance(&self.sys_module, module);
            if let Some((at, since)) = w.released {
                if now.is_some() && now == at && since.elapsed() < RELEASE_HOLD {
                    continue;
                }
                w.released = None;
                // gone, back, or still there after the hold: try whatever is loaded now
                w.tried = None;
            }
            if now.is_none() || now == w.tried || loaded.holds(module) {
                w.tried = w.tried.filter(|_| now.is_some());
                continue;
            }
            w.tried = now;
            changed = true;
            let step = match loaded.attach_module(table, module) {
                Ok((attached, probes)) => format!("attached {attached}/{probes} probes"),
                Err(e) => format!("not attached: {e}"),
            };
            warnings.append(&mut loaded.warnings);
            warnings.push(Warning::Module {
                module: module.clone(),
                step,
            });
        }
        changed
    }

    /// Detaches `module`'s probes for its unloading; the answer to the requester.
    pub(crate) fn release(
        &mut self,
        loaded: &mut Loaded,
        module: &str,
        warnings: &mut Vec<Warning>,
    ) -> String {
        let Some(w) = self.modules.get_mut(module) else {
            return format!("ok {module} 0 (no probe of this set is in it)");
        };
        let at = instance(&self.sys_module, module);
        w.released = Some((at, Instant::now()));
        let n = loaded.detach_module(
            module,
            &format!("detached: module {module} released for unloading (modprobe -r)"),
        );
        warnings.push(Warning::Module {
            module: module.to_string(),
            step: format!(
                "released: {n} probes detached, their programs closed (back when it loads again, or in {} s if it stays)",
                RELEASE_HOLD.as_secs()
            ),
        });
        format!("ok {module} {n}")
    }
}

/// The control socket: a Unix stream socket, mode 0600, of the agent's user (in the unit's
/// `RuntimeDirectory=`, itself 0700), that takes one line, `release MODULE`, from root or
/// the agent's own user (checked with `SO_PEERCRED`) and answers one line.
pub(crate) struct Control {
    listener: UnixListener,
    path: PathBuf,
}

impl Control {
    /// Binds `path`. A socket of this user left by an earlier run is replaced; anything else
    /// there (a file, a link, another user's socket) is refused.
    pub(crate) fn bind(path: &Path) -> Result<Self, CollectError> {
        let err = |reason: String| {
            CollectError::Option(format!("--control {}: {reason}", path.display()))
        };
        if let Ok(m) = std::fs::symlink_metadata(path) {
            use std::os::unix::fs::FileTypeExt;
            // SAFETY: no arguments, cannot fail.
            let me = unsafe { libc::geteuid() };
            if !m.file_type().is_socket() || m.uid() != me {
                return Err(err(
                    "exists and is not this user's socket (refused: remove it)".into(),
                ));
            }
            std::fs::remove_file(path).map_err(|e| err(e.to_string()))?;
        }
        let listener = UnixListener::bind(path).map_err(|e| err(e.to_string()))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| err(e.to_string()))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| err(e.to_string()))?;
        Ok(Control {
            listener,
            path: path.to_path_buf(),
        })
    }

    /// The listening socket's descriptor (the source's poll wakes on a connection).
    pub(crate) fn fd(&self) -> i32 {
        use std::os::fd::AsRawFd;
        self.listener.as_raw_fd()
    }

    /// The pending requests: each `release MODULE` with its connection, to be answered.
    pub(crate) fn pending(&self) -> Vec<(UnixStream, Result<String, String>)> {
        let mut out = Vec::new();
        while let Ok((mut s, _)) = self.listener.accept() {
            let req = read_request(&mut s);
            out.push((s, req));
        }
        out
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The uid of the peer of `s`.
fn peer_uid(s: &UnixStream) -> Option<u32> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred {
        pid: 0,
        uid: u32::MAX,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: cred and len describe a ucred the kernel fills.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            std::ptr::addr_of_mut!(cred).cast(),
            &mut len,
        )
    };
    (rc == 0).then_some(cred.uid)
}

/// One request line (at most 128 bytes, within 200 ms): the module of `release MODULE`.
fn read_request(s: &mut UnixStream) -> Result<String, String> {
    // SAFETY: no arguments, cannot fail.
    let me = unsafe { libc::geteuid() };
    match peer_uid(s) {
        Some(uid) if uid == 0 || uid == me => {}
        uid => {
            return Err(format!(
                "refused: peer uid {uid:?} is neither root nor the agent's"
            ))
        }
    }
    let _ = s.set_nonblocking(false);
    let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
    let mut buf = [0u8; 128];
    let mut n = 0;
    while n < buf.len() && !buf[..n].contains(&b'\n') {
        match s.read(&mut buf[n..]) {
            Ok(0) | Err(_) => break,
            Ok(k) => n += k,
        }
    }
    let line = String::from_utf8_lossy(&buf[..n]);
    let module = line
        .trim_end_matches('\n')
        .strip_prefix("release ")
        .unwrap_or("");
    let valid = !module.is_empty()
        && module.len() <= 64
        && module
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if valid {
        // modprobe treats - and _ alike; /sys/module has _
        Ok(module.replace('-', "_"))
    } else {
        Err(format!(
            "expected `release MODULE`, got {:?}",
            line.trim_end()
        ))
    }
}

/// Answers a request (best effort: the requester may have given up).
pub(crate) fn answer(mut s: UnixStream, text: &str) {
    let _ = s.set_write_timeout(Some(Duration::from_millis(200)));
    let _ = s.write_all(format!("{text}\n").as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_names_one_module_and_only_root_or_the_agent_may_ask() {
        let dir = std::env::temp_dir().join(format!("pg-control-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("control");
        // something that is not our socket is refused
        std::fs::write(&path, b"x").expect("file");
        assert!(Control::bind(&path).is_err());
        std::fs::remove_file(&path).expect("rm");
        let c = Control::bind(&path).expect("bind");
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        for (line, want) in [
            ("release rdma-rxe\n", Ok("rdma_rxe".to_string())),
            ("release ../x\n", Err(())),
            ("detach mlx5_ib\n", Err(())),
        ] {
            let mut s = UnixStream::connect(&path).expect("connect");
            s.write_all(line.as_bytes()).expect("write");
            let got = c.pending();
            assert_eq!(got.len(), 1);
            assert_eq!(got[0].1.clone().map_err(|_| ()), want, "{line}");
        }
        // a second agent's bind replaces a socket of ours left behind
        drop(c);
        assert!(!path.exists(), "the socket is removed at the end");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_instance_is_live_or_built_in() {
        let dir = std::env::temp_dir().join(format!("pg-sysmod-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("builtin")).expect("dir");
        std::fs::create_dir_all(dir.join("coming")).expect("dir");
        std::fs::create_dir_all(dir.join("live")).expect("dir");
        std::fs::write(dir.join("coming/initstate"), "coming\n").expect("w");
        std::fs::write(dir.join("live/initstate"), "live\n").expect("w");
        assert!(instance(&dir, "builtin").is_some());
        assert!(instance(&dir, "live").is_some());
        assert_eq!(instance(&dir, "coming"), None);
        assert_eq!(instance(&dir, "absent"), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
