//! Job correlation: the cgroup path and an allow-list of environment variables of a failing
//! process, read from `/proc/<pid>/{cgroup,environ}` once per process and cached.
//!
//! The cache is keyed by pid and remembers the `comm` it saw: a record whose `comm` differs
//! (the pid was reused, or the process exec'ed) reads /proc again. A process that has already
//! exited leaves `cgroup` and `job` empty; that is cached too, so a burst from a dead pid costs
//! one failed open. The cache is bounded: at `cap` entries it is cleared.
//!
//! What a process puts in its environment is its own, so what is read is bounded: at most
//! [`ENVIRON_READ_MAX`] bytes of `environ`, at most [`JOB_VARS_MAX`] names on the allow-list,
//! each value at most [`JOB_VALUE_MAX`] bytes, a longer one cut and marked
//! `…[truncated N bytes]` (N: the bytes cut). A record then carries a few KB of job at most,
//! however large the environment (a 128 KiB `RANK` once made every record of its process
//! 128 KiB).
//!
//! For a process that has exited, the cgroup path is still found from the record's cgroup id:
//! on cgroup v2 the id is the inode number of the cgroup's directory, so the collector indexes
//! the cgroup tree (`/sys/fs/cgroup`) by inode, rescanning at most once per second on a miss.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use wire::ProcInfo;

/// Default allow-list of job variables.
pub(crate) const DEFAULT_JOB_VARS: &[&str] = &[
    "SLURM_JOB_ID",
    "TORCHELASTIC_RUN_ID",
    "RANK",
    "LOCAL_RANK",
    "JOB_ID",
];

/// Longest job value kept, in bytes (cut at a character boundary, then marked).
pub const JOB_VALUE_MAX: usize = 256;
/// Names on the allow-list at most (the flag refuses more; the cache keeps the first).
pub const JOB_VARS_MAX: usize = 32;
/// Bytes of `/proc/<pid>/environ` read at most: the kernel bounds one string (128 KiB), not
/// the block (a quarter of the stack limit, or more); a variable past it is not seen.
pub(crate) const ENVIRON_READ_MAX: u64 = 1 << 20;

pub struct ProcCache {
    /// `/proc`, or another root in tests; `None` disables lookups (replay of foreign records).
    root: Option<PathBuf>,
    allow: Vec<String>,
    map: HashMap<u32, ([u8; 16], Arc<ProcInfo>)>,
    cap: usize,
    /// /proc/<pid>/environ reads so far (tests check "once per process").
    pub reads: u64,
    cgroups: Option<CgroupIndex>,
}

/// cgroup v2 id (directory inode) -> path below the cgroup root (`/probegen-job42`).
struct CgroupIndex {
    root: PathBuf,
    by_id: HashMap<u64, String>,
    last_scan: Option<std::time::Instant>,
}

/// Directories indexed at most, and how deep: a bound on the cost of one rescan.
const CGROUP_SCAN_MAX: usize = 100_000;
const CGROUP_SCAN_DEPTH: usize = 16;

impl CgroupIndex {
    fn path(&mut self, id: u64) -> Option<String> {
        if let Some(p) = self.by_id.get(&id) {
            return Some(p.clone());
        }
        let due = self
            .last_scan
            .is_none_or(|t| t.elapsed() >= std::time::Duration::from_secs(1));
        if !due {
            return None;
        }
        self.last_scan = Some(std::time::Instant::now());
        self.by_id.clear();
        let mut stack = vec![(self.root.clone(), String::new(), 0usize)];
        while let Some((dir, rel, depth)) = stack.pop() {
            if self.by_id.len() >= CGROUP_SCAN_MAX {
                break;
            }
            if let Ok(meta) = std::fs::metadata(&dir) {
                use std::os::unix::fs::MetadataExt;
                let shown = if rel.is_empty() {
                    "/".to_string()
                } else {
                    rel.clone()
                };
                self.by_id.insert(meta.ino(), shown);
            }
            if depth >= CGROUP_SCAN_DEPTH {
                continue;
            }
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    let name = e.file_name().to_string_lossy().into_owned();
                    stack.push((e.path(), format!("{rel}/{name}"), depth + 1));
                }
            }
        }
        self.by_id.get(&id).cloned()
    }
}

impl ProcCache {
    pub fn new(root: Option<PathBuf>, mut allow: Vec<String>, cap: usize) -> Self {
        allow.truncate(JOB_VARS_MAX);
        ProcCache {
            root,
            allow,
            map: HashMap::new(),
            cap: cap.max(1),
            reads: 0,
            cgroups: None,
        }
    }

    /// Resolve the cgroup of processes that already exited from the record's cgroup id, by
    /// indexing the cgroup v2 tree mounted at `root` (`/sys/fs/cgroup`).
    pub fn with_cgroup_root(mut self, root: PathBuf) -> Self {
        self.cgroups = Some(CgroupIndex {
            root,
            by_id: HashMap::new(),
            last_scan: None,
        });
        self
    }

    pub fn disabled() -> Self {
        Self::new(None, Vec::new(), 1)
    }

    pub fn enabled(&self) -> bool {
        self.root.is_some()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Info for the process `pid` whose record carried `comm`.
    pub fn lookup(&mut self, pid: u32, comm: &[u8; 16], cgroup_id: u64) -> Option<Arc<ProcInfo>> {
        let root = self.root.as_ref()?;
        if let Some((c, info)) = self.map.get(&pid) {
            if c == comm {
                return Some(info.clone());
            }
        }
        let dir = root.join(pid.to_string());
        self.reads += 1;
        let info = Arc::new(match read_environ(&dir.join("environ")) {
            Ok(env) => ProcInfo {
                // A process that exits between the two reads (or a zombie, whose cgroup file
                // is empty) still has the record's cgroup id.
                cgroup: std::fs::read_to_string(dir.join("cgroup"))
                    .map(|s| cgroup_path(&s))
                    .ok()
                    .filter(|p| !p.is_empty())
                    .or_else(|| self.cgroups.as_mut().and_then(|c| c.path(cgroup_id)))
                    .unwrap_or_default(),
                job: job_vars(&env, &self.allow),
                exited: false,
            },
            Err(_) => ProcInfo {
                exited: true,
                cgroup: self
                    .cgroups
                    .as_mut()
                    .and_then(|c| c.path(cgroup_id))
                    .unwrap_or_default(),
                ..Default::default()
            },
        });
        if self.map.len() >= self.cap {
            self.map.clear();
        }
        self.map.insert(pid, (*comm, info.clone()));
        Some(info)
    }
}

/// The cgroup path from /proc/<pid>/cgroup: the unified (`0::`) line, else the first line's.
pub(crate) fn cgroup_path(text: &str) -> String {
    let mut first = None;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(_), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        if id == "0" {
            return path.to_string();
        }
        first.get_or_insert(path);
    }
    first.unwrap_or_default().to_string()
}

/// The first [`ENVIRON_READ_MAX`] bytes of an `environ` file; a variable the limit cuts is
/// left out whole.
fn read_environ(path: &std::path::Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut env = Vec::new();
    std::fs::File::open(path)?
        .take(ENVIRON_READ_MAX)
        .read_to_end(&mut env)?;
    if env.len() as u64 == ENVIRON_READ_MAX {
        let whole = env.iter().rposition(|&b| b == 0).map_or(0, |i| i + 1);
        env.truncate(whole);
    }
    Ok(env)
}

/// `value` as text, at most [`JOB_VALUE_MAX`] bytes of it and the mark of what was cut.
fn bounded_value(value: &[u8]) -> String {
    let text = String::from_utf8_lossy(value);
    if text.len() <= JOB_VALUE_MAX {
        return text.into_owned();
    }
    let mut cut = JOB_VALUE_MAX;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…[truncated {} bytes]", &text[..cut], text.len() - cut)
}

/// Allow-listed `NAME=value` pairs of a NUL-separated environment block, each value bounded
/// ([`bounded_value`]).
pub(crate) fn job_vars(environ: &[u8], allow: &[String]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for kv in environ.split(|&b| b == 0) {
        let Some(eq) = kv.iter().position(|&b| b == b'=') else {
            continue;
        };
        let name = &kv[..eq];
        if let Some(a) = allow.iter().find(|a| a.as_bytes() == name) {
            out.insert(a.clone(), bounded_value(&kv[eq + 1..]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allow() -> Vec<String> {
        DEFAULT_JOB_VARS.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parses_cgroup_and_env() {
        assert_eq!(
            cgroup_path("0::/system.slice/slurmstepd.scope/job_42\n"),
            "/system.slice/slurmstepd.scope/job_42"
        );
        assert_eq!(
            cgroup_path("12:pids:/user.slice\n1:name=systemd:/x\n0::/unified\n"),
            "/unified"
        );
        assert_eq!(cgroup_path("12:pids:/user.slice\n"), "/user.slice");
        assert_eq!(cgroup_path(""), "");
        let env = b"PATH=/bin\0SLURM_JOB_ID=42\0RANK=3\0RANKX=9\0=bad\0noeq\0LOCAL_RANK=\0";
        let j = job_vars(env, &allow());
        assert_eq!(j.len(), 3);
        assert_eq!(j["SLURM_JOB_ID"], "42");
        assert_eq!(j["RANK"], "3");
        assert_eq!(j["LOCAL_RANK"], "");
    }

    /// Row 4 of issue 21: a 128 KiB value is cut to JOB_VALUE_MAX bytes and marked; a
    /// multi-byte character is not split; an environ past ENVIRON_READ_MAX is read only so far.
    #[test]
    fn job_values_are_bounded_and_marked() {
        let rank = "7".repeat(131_066);
        let env = format!("RANK={rank}\0JOB_ID={}\0", "é".repeat(200));
        let j = job_vars(env.as_bytes(), &allow());
        let cut = 131_066 - JOB_VALUE_MAX;
        assert_eq!(
            j["RANK"],
            format!("{}…[truncated {cut} bytes]", &rank[..JOB_VALUE_MAX])
        );
        assert_eq!(
            j["JOB_ID"],
            format!("{}…[truncated 144 bytes]", "é".repeat(128))
        );
        assert_eq!(job_vars(b"RANK=3\0", &allow())["RANK"], "3");
        let root = std::env::temp_dir().join(format!("pg-environ-{}", std::process::id()));
        std::fs::create_dir_all(root.join("9")).expect("mkdir");
        let mut big = b"RANK=1\0".to_vec();
        big.resize(ENVIRON_READ_MAX as usize - 3, b'x');
        big.extend_from_slice(b"\0SLURM_JOB_ID=42\0");
        std::fs::write(root.join("9/environ"), &big).expect("w");
        let mut c = ProcCache::new(Some(root.clone()), allow(), 4);
        let info = c.lookup(9, &[0; 16], 0).expect("info");
        assert_eq!(info.job.len(), 1, "{:?}", info.job.keys());
        assert_eq!(info.job["RANK"], "1");
        let many: Vec<String> = (0..100).map(|i| format!("V{i}")).collect();
        assert_eq!(ProcCache::new(None, many, 1).allow.len(), JOB_VARS_MAX);
        let _ = std::fs::remove_dir_all(&root);
    }

    fn fake_proc() -> (PathBuf, std::path::PathBuf) {
        let root = std::env::temp_dir().join(format!(
            "pg-proc-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&root);
        let p = root.join("4242");
        std::fs::create_dir_all(&p).expect("mkdir");
        std::fs::write(p.join("environ"), b"SLURM_JOB_ID=77\0HOME=/root\0").expect("w");
        std::fs::write(p.join("cgroup"), "0::/slurm/job_77\n").expect("w");
        (root, p)
    }

    #[test]
    fn reads_once_per_process_and_exited_is_empty() {
        let (root, p) = fake_proc();
        let mut c = ProcCache::new(Some(root.clone()), allow(), 16);
        let comm = *b"verbs_fail\0\0\0\0\0\0";
        let a = c.lookup(4242, &comm, 0).expect("info");
        assert_eq!(a.job["SLURM_JOB_ID"], "77");
        assert_eq!(a.cgroup, "/slurm/job_77");
        // the process exits: the cached value stays, no second read
        std::fs::remove_dir_all(&p).expect("rm");
        for _ in 0..100 {
            assert_eq!(c.lookup(4242, &comm, 0), Some(a.clone()));
        }
        assert_eq!(c.reads, 1);
        // an unknown (exited) pid: empty job, not an error, cached
        let e = c.lookup(999, &comm, 0).expect("info");
        assert!(e.exited && e.job.is_empty() && e.cgroup.is_empty());
        c.lookup(999, &comm, 0);
        assert_eq!(c.reads, 2);
        // another comm under the same pid: read again
        c.lookup(4242, b"other\0\0\0\0\0\0\0\0\0\0\0", 0);
        assert_eq!(c.reads, 3);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn exited_process_gets_its_cgroup_from_the_cgroup_id() {
        use std::os::unix::fs::MetadataExt;
        let root = std::env::temp_dir().join(format!("pg-cgroups-{}", std::process::id()));
        let job = root.join("slurm").join("job_42");
        std::fs::create_dir_all(&job).expect("mkdir");
        let id = std::fs::metadata(&job).expect("stat").ino();
        let mut c = ProcCache::new(Some(PathBuf::from("/nonexistent-proc")), allow(), 8)
            .with_cgroup_root(root.clone());
        let info = c.lookup(777, &[0; 16], id).expect("info");
        assert!(info.exited);
        assert_eq!(info.cgroup, "/slurm/job_42");
        assert!(info.job.is_empty());
        // An unknown id (or a rescan within a second): empty, not an error.
        assert_eq!(c.lookup(778, &[0; 16], u64::MAX).expect("info").cgroup, "");
        let _ = std::fs::remove_dir_all(&root);
    }

    /// A process whose environ was read but whose cgroup file was gone (it exited between the
    /// two reads) or empty takes its cgroup from the record's cgroup id (the 6.1 e2e run saw
    /// every record of a short-lived process without a cgroup path).
    #[test]
    fn cgroup_file_gone_after_environ_uses_the_cgroup_id() {
        use std::os::unix::fs::MetadataExt;
        let base = std::env::temp_dir().join(format!("pg-cgroup-gone-{}", std::process::id()));
        let (proc_root, cg_root) = (base.join("proc"), base.join("cgroup"));
        let job = cg_root.join("probegen-job42");
        std::fs::create_dir_all(&job).expect("mkdir");
        let id = std::fs::metadata(&job).expect("stat").ino();
        for (pid, cgroup) in [(501, None), (502, Some(""))] {
            let dir = proc_root.join(pid.to_string());
            std::fs::create_dir_all(&dir).expect("mkdir");
            std::fs::write(dir.join("environ"), b"RANK=3\0").expect("write");
            if let Some(text) = cgroup {
                std::fs::write(dir.join("cgroup"), text).expect("write");
            }
        }
        let mut c = ProcCache::new(Some(proc_root), allow(), 8).with_cgroup_root(cg_root);
        for pid in [501, 502] {
            let info = c.lookup(pid, &[0; 16], id).expect("info");
            assert!(!info.exited, "{pid}");
            assert_eq!(info.cgroup, "/probegen-job42", "{pid}");
        }
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn bounded() {
        let mut c = ProcCache::new(Some(PathBuf::from("/nonexistent-proc")), allow(), 8);
        for pid in 0..1000 {
            c.lookup(pid, &[0; 16], 0);
            assert!(c.len() <= 8);
        }
        assert!(ProcCache::disabled().lookup(1, &[0; 16], 0).is_none());
    }
}
