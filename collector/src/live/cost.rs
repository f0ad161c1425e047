//! What the agent costs, from the kernel's accounting of this process: CPU time of all its
//! threads (`getrusage`), resident memory (`/proc/self/statm`), and its programs' run time
//! and runs (`bpf_prog_info`), which the kernel counts only while `kernel.bpf_stats_enabled`
//! is 1 (the counting itself costs two clock reads per program run: an operator's choice).

use std::os::fd::{AsFd, AsRawFd};

use wire::AgentCost;

/// CPU time and resident memory of this process; `None` when unreadable.
pub(crate) fn process() -> Option<AgentCost> {
    // SAFETY: ru is a valid rusage for the kernel to fill.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return None;
    }
    let ns = |t: libc::timeval| {
        u64::try_from(t.tv_sec).unwrap_or(0) * 1_000_000_000
            + u64::try_from(t.tv_usec).unwrap_or(0) * 1_000
    };
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    Some(AgentCost {
        cpu_ns: ns(ru.ru_utime) + ns(ru.ru_stime),
        rss_bytes: rss_from_statm(&statm, page_size())?,
        bpf_run_ns: None,
        bpf_runs: None,
    })
}

fn page_size() -> u64 {
    // SAFETY: no arguments.
    u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096)
}

/// Resident bytes from `/proc/self/statm` (its second field, in pages).
fn rss_from_statm(statm: &str, page: u64) -> Option<u64> {
    statm
        .split_whitespace()
        .nth(1)?
        .parse::<u64>()
        .ok()
        .map(|p| p * page)
}

/// Whether the kernel counts programs' run time (`kernel.bpf_stats_enabled`).
pub(crate) fn bpf_stats_enabled() -> bool {
    std::fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled").is_ok_and(|s| s.trim() == "1")
}

/// (run time in ns, runs) of the loaded programs of `obj`.
pub(crate) fn bpf_run(obj: &libbpf_rs::Object) -> (u64, u64) {
    let (mut ns, mut runs) = (0u64, 0u64);
    for (_, info) in prog_infos(obj) {
        ns = ns.wrapping_add(info.run_time_ns);
        runs = runs.wrapping_add(info.run_cnt);
    }
    (ns, runs)
}

/// Adds to `into` the runs the kernel skipped of `obj`'s programs that see a probe's return
/// or data-plane event (`pg_<id>`, `pg_<id>_bs`, `pg_<id>_ret`), by probe id. Counted by the
/// kernel whatever `bpf_stats_enabled` says; a kernel before 5.12 reports 0.
pub(crate) fn missed_runs(
    obj: &libbpf_rs::Object,
    into: &mut std::collections::BTreeMap<u32, u64>,
) {
    for (name, info) in prog_infos(obj) {
        if let Some(id) = sees_return(&name) {
            if info.recursion_misses > 0 {
                *into.entry(id).or_default() += info.recursion_misses;
            }
        }
    }
}

/// The probe id of a program that sees its probe's return (or a data-plane event), from the
/// names codegen gives them; `None` for entry programs (baseline entries, kprobe argument
/// savers), whose skipped runs lose no failure.
fn sees_return(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("pg_")?;
    let (id, suffix) = match rest.find('_') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    matches!(suffix, "" | "_bs" | "_ret")
        .then(|| id.parse().ok())
        .flatten()
}

/// (name, `bpf_prog_info`) of each loaded program of `obj`.
fn prog_infos(
    obj: &libbpf_rs::Object,
) -> impl Iterator<Item = (String, libbpf_rs::libbpf_sys::bpf_prog_info)> + '_ {
    obj.progs().filter(|p| p.autoload()).filter_map(|p| {
        let fd = p.as_fd().as_raw_fd();
        if fd < 0 {
            return None; // not loaded
        }
        // SAFETY: info is a zeroed bpf_prog_info of the size passed; the fd is open.
        let mut info: libbpf_rs::libbpf_sys::bpf_prog_info = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of_val(&info) as u32;
        // SAFETY: as above.
        let rc = unsafe { libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(fd, &mut info, &mut len) };
        (rc == 0).then(|| (p.name().to_string_lossy().into_owned(), info))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_costs_something() {
        let c = process().expect("getrusage and statm");
        assert!(c.rss_bytes > 0);
        assert_eq!(rss_from_statm("100 25 3 1 0 20 0\n", 4096), Some(25 * 4096));
        assert_eq!(rss_from_statm("100\n", 4096), None);
        // burn a little CPU: the figure moves
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(process().expect("again").cpu_ns > c.cpu_ns);
    }

    #[test]
    fn the_programs_that_see_a_return() {
        assert_eq!(sees_return("pg_12"), Some(12));
        assert_eq!(sees_return("pg_7_bs"), Some(7));
        assert_eq!(sees_return("pg_36_ret"), Some(36));
        assert_eq!(sees_return("pg_14_bl"), None);
        assert_eq!(sees_return("pg_37_entry"), None);
        assert_eq!(sees_return("pg_x"), None);
        assert_eq!(sees_return("other_1"), None);
    }
}
