//! The capabilities a live run needs, checked before anything loads: a missing one is one
//! line naming it (exit 2) instead of libbpf's "No such process" on the first module probe.
//! Environment correlation without its two capabilities degrades to the cgroup, said once.
//! Once attached, the agent keeps only what it still needs ([`keep_after_attach`]) and drops
//! the rest from its effective, permitted, inheritable and ambient sets (before any sink
//! starts a thread: every thread then has the reduced sets).

/// Capability numbers (linux/capability.h).
const CAP_DAC_READ_SEARCH: u32 = 2;
const CAP_NET_BIND_SERVICE: u32 = 10;
const CAP_SYS_PTRACE: u32 = 19;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// The effective capability set from `/proc/self/status` text (`CapEff:` in hex).
fn effective(status: &str) -> Option<u64> {
    let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
    u64::from_str_radix(hex.trim(), 16).ok()
}

fn has(set: u64, cap: u32) -> bool {
    set & (1u64 << cap) != 0
}

/// What a live run lacks in `set`: `Err` names the missing capabilities and why.
/// CAP_SYS_ADMIN is needed for libbpf's module BTF lookup (`BPF_BTF_GET_FD_BY_ID`) and stands
/// in for CAP_BPF and CAP_PERFMON (the kernel's `bpf_capable`, `perfmon_capable`).
fn check_live(set: u64) -> Result<(), String> {
    if has(set, CAP_SYS_ADMIN) {
        return Ok(());
    }
    let mut missing = Vec::new();
    if !has(set, CAP_BPF) {
        missing.push("CAP_BPF (load the programs)");
    }
    if !has(set, CAP_PERFMON) {
        missing.push("CAP_PERFMON (attach them)");
    }
    missing.push("CAP_SYS_ADMIN (libbpf's module BTF lookup, BPF_BTF_GET_FD_BY_ID)");
    Err(format!(
        "missing capability {}: expected CAP_BPF CAP_PERFMON CAP_SYS_ADMIN (the packaged unit's)",
        missing.join(", ")
    ))
}

/// Whether `set` reads other users' `/proc/<pid>/environ`.
fn reads_environ(set: u64) -> bool {
    has(set, CAP_DAC_READ_SEARCH) && has(set, CAP_SYS_PTRACE)
}

/// Checks this process's capabilities for a live run; `Ok(Some(line))`: job variables will be
/// read for this user's processes only (the line says so). Unreadable status: no check.
pub(crate) fn check_this_process(job_vars: bool) -> Result<Option<String>, String> {
    let Some(set) = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| effective(&s))
    else {
        return Ok(None);
    };
    check_live(set)?;
    Ok((job_vars && !reads_environ(set)).then(|| {
        "job-vars: without CAP_DAC_READ_SEARCH and CAP_SYS_PTRACE other users' /proc/<pid>/environ is unreadable: their records carry the cgroup only".to_string()
    }))
}

/// Names of the capabilities (linux/capability.h), by number.
const NAMES: &[&str] = &[
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "SETPCAP",
    "LINUX_IMMUTABLE",
    "NET_BIND_SERVICE",
    "NET_BROADCAST",
    "NET_ADMIN",
    "NET_RAW",
    "IPC_LOCK",
    "IPC_OWNER",
    "SYS_MODULE",
    "SYS_RAWIO",
    "SYS_CHROOT",
    "SYS_PTRACE",
    "SYS_PACCT",
    "SYS_ADMIN",
    "SYS_BOOT",
    "SYS_NICE",
    "SYS_RESOURCE",
    "SYS_TIME",
    "SYS_TTY_CONFIG",
    "MKNOD",
    "LEASE",
    "AUDIT_WRITE",
    "AUDIT_CONTROL",
    "SETFCAP",
    "MAC_OVERRIDE",
    "MAC_ADMIN",
    "SYSLOG",
    "WAKE_ALARM",
    "BLOCK_SUSPEND",
    "AUDIT_READ",
    "PERFMON",
    "BPF",
    "CHECKPOINT_RESTORE",
];

fn names(set: u64) -> String {
    (0..64u32)
        .filter(|&c| has(set, c))
        .map(|c| {
            NAMES
                .get(c as usize)
                .map_or_else(|| format!("CAP_{c}"), |n| format!("CAP_{n}"))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// What a running agent keeps after attach: CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN, because a
/// driver module that loads later (or comes back after `modprobe -r`) has its programs loaded
/// and attached then, which needs all three (the module's BTF lookup needs CAP_SYS_ADMIN);
/// CAP_DAC_READ_SEARCH and CAP_SYS_PTRACE only while job variables are read from other
/// users' `/proc/<pid>/environ`; CAP_NET_BIND_SERVICE only for a `--metrics` port below 1024
/// (bound after the drop). Everything else (a root run has them all) goes.
pub(crate) fn keep_after_attach(job_vars: bool, low_port: bool) -> u64 {
    let mut keep = (1u64 << CAP_BPF) | (1 << CAP_PERFMON) | (1 << CAP_SYS_ADMIN);
    if job_vars {
        keep |= (1 << CAP_DAC_READ_SEARCH) | (1 << CAP_SYS_PTRACE);
    }
    if low_port {
        keep |= 1 << CAP_NET_BIND_SERVICE;
    }
    keep
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const CAP_V3: u32 = 0x2008_0522;

/// Lowers this thread's effective, permitted and inheritable sets to `keep` (the ambient set
/// follows: a capability leaves it with its permitted bit). `Ok(Some(line))` says what was
/// dropped; `Ok(None)`: nothing to drop.
pub(crate) fn drop_all_but(keep: u64) -> Result<Option<String>, String> {
    let mut h = CapHeader {
        version: CAP_V3,
        pid: 0,
    };
    let mut d = [CapData::default(); 2];
    // SAFETY: header and two data structs, as _LINUX_CAPABILITY_VERSION_3 expects.
    if unsafe { libc::syscall(libc::SYS_capget, &mut h, d.as_mut_ptr()) } != 0 {
        return Err(format!("capget: {}", std::io::Error::last_os_error()));
    }
    let join = |lo: u32, hi: u32| u64::from(lo) | (u64::from(hi) << 32);
    let permitted = join(d[0].permitted, d[1].permitted);
    let dropped = permitted & !keep;
    if dropped == 0 {
        return Ok(None);
    }
    let kept = permitted & keep;
    for (i, part) in d.iter_mut().enumerate() {
        let k = (kept >> (32 * i)) as u32;
        part.effective &= k;
        part.permitted &= k;
        part.inheritable &= k;
    }
    // SAFETY: as above.
    if unsafe { libc::syscall(libc::SYS_capset, &mut h, d.as_ptr()) } != 0 {
        return Err(format!("capset: {}", std::io::Error::last_os_error()));
    }
    Ok(Some(format!(
        "capabilities after attach: kept {} (a driver module that loads again is attached then); dropped {}",
        names(kept),
        names(dropped)
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_from_status() {
        let unit = (1u64 << CAP_BPF) | (1 << CAP_PERFMON) | (1 << CAP_SYS_ADMIN);
        let status = format!("Name:\tx\nCapEff:\t{unit:016x}\n");
        assert_eq!(effective(&status), Some(unit));
        assert!(check_live(unit).is_ok() && !reads_environ(unit));
        let e = check_live((1 << CAP_BPF) | (1 << CAP_PERFMON)).expect_err("no SYS_ADMIN");
        assert!(e.starts_with("missing capability CAP_SYS_ADMIN"), "{e}");
        let e = check_live(0).expect_err("none");
        assert!(
            e.contains("CAP_BPF (load") && e.contains("CAP_PERFMON"),
            "{e}"
        );
        assert!(reads_environ(
            unit | (1 << CAP_DAC_READ_SEARCH) | (1 << CAP_SYS_PTRACE)
        ));
        assert_eq!(effective("Name:\tx\n"), None);
    }

    #[test]
    fn what_is_kept_after_attach() {
        let trio = keep_after_attach(false, false);
        assert_eq!(names(trio), "CAP_SYS_ADMIN CAP_PERFMON CAP_BPF");
        assert_eq!(
            names(keep_after_attach(true, true) & !trio),
            "CAP_DAC_READ_SEARCH CAP_NET_BIND_SERVICE CAP_SYS_PTRACE"
        );
        // a thread of its own: dropping all but what it holds drops nothing; dropping one it
        // holds (if any) really leaves the permitted set
        std::thread::spawn(|| {
            let status = std::fs::read_to_string("/proc/thread-self/status").expect("status");
            let prm = status
                .lines()
                .find_map(|l| l.strip_prefix("CapPrm:"))
                .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
                .expect("CapPrm");
            assert_eq!(drop_all_but(prm), Ok(None));
            if prm != 0 {
                let line = drop_all_but(prm & !(1 << prm.trailing_zeros()))
                    .expect("capset")
                    .expect("a line");
                assert!(line.contains("dropped CAP_"), "{line}");
                let after = std::fs::read_to_string("/proc/thread-self/status").expect("status");
                assert!(!after.contains(&format!("CapPrm:\t{prm:016x}")), "{after}");
            }
        })
        .join()
        .expect("thread");
    }
}
