//! The capabilities a live run needs, checked before anything loads: a missing one is one
//! line naming it (exit 2) instead of libbpf's "No such process" on the first module probe.
//! Environment correlation without its two capabilities degrades to the cgroup, said once.

/// Capability numbers (linux/capability.h).
const CAP_DAC_READ_SEARCH: u32 = 2;
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
}
