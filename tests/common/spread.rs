//! Tickets by spread (issue 24 item 3, `deploy/clickhouse/tickets.sql`): a fleet in which one
//! failure is seen in one job only (on two hosts), one on one host across three jobs, and
//! one on three hosts that all changed kernel before it started, while a fourth host stays
//! on the old kernel without it. Real collectors replay the guest recording's calls with
//! the checked-in 6.12 rxe set (error sites, so every chain has its deciding site) and send
//! to ClickHouse; shared by the 18.16 test (tests/fleet_clickhouse.rs) and the 26.9 one
//! (tests/fleet_clickhouse_current.rs), held to the same answers.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::fleet_scenario::{path, wait_exit};
use super::replays::{write_calls, write_proc_root, Call};
use super::servers::{spawn_collector, Guard};

/// The kernel every host ran first, and the one three of them changed to.
pub(crate) const OLD_KERNEL: &str = "6.12.117+deb12-amd64";
pub(crate) const NEW_KERNEL: &str = "6.12.118+deb12-amd64";

/// The set the hosts run: the checked-in 6.12 rxe set, with its error sites.
pub(crate) fn manifest() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("generated/linux-6.12/rxe/manifest.yaml")
}

/// One collector run: `host` runs `job` on `kernel`, failing `calls`.
struct Run {
    host: &'static str,
    job: &'static str,
    kernel: &'static str,
    calls: &'static [Call],
}

const fn run_of(
    host: &'static str,
    job: &'static str,
    kernel: &'static str,
    calls: &'static [Call],
) -> Run {
    Run {
        host,
        job,
        kernel,
        calls,
    }
}

/// First the old kernel everywhere: job 500 fails reg_mr on two hosts; host h-dev fails
/// create_qp in job 601; h-up-1..3 and h-stay report and fail nothing.
const FIRST: [Run; 7] = [
    run_of("h-job-1", "500", OLD_KERNEL, &[Call::RegMr]),
    run_of("h-job-2", "500", OLD_KERNEL, &[Call::RegMr]),
    run_of("h-dev", "601", OLD_KERNEL, &[Call::CreateQp]),
    run_of("h-up-1", "700", OLD_KERNEL, &[]),
    run_of("h-up-2", "700", OLD_KERNEL, &[]),
    run_of("h-up-3", "700", OLD_KERNEL, &[]),
    run_of("h-stay", "800", OLD_KERNEL, &[]),
];

/// Then h-dev's next two jobs fail create_qp again; h-up-1..3 run the new kernel, and each
/// one's job fails modify_qp; h-stay, still on the old kernel, fails nothing.
const THEN: [Run; 6] = [
    run_of("h-dev", "602", OLD_KERNEL, &[Call::CreateQp]),
    run_of("h-up-1", "711", NEW_KERNEL, &[Call::ModifyQp]),
    run_of("h-up-2", "712", NEW_KERNEL, &[Call::ModifyQp]),
    run_of("h-up-3", "713", NEW_KERNEL, &[Call::ModifyQp]),
    run_of("h-stay", "801", OLD_KERNEL, &[]),
    run_of("h-dev", "603", OLD_KERNEL, &[Call::CreateQp]),
];

fn start(
    g: &mut Guard,
    url: &str,
    r: &Run,
    n: usize,
) -> (usize, std::sync::mpsc::Receiver<String>) {
    let replay = g.dir.join(format!("{}-{n}.replay.jsonl", r.host));
    write_calls(&replay, r.kernel, r.calls, &manifest());
    // one /proc per run: two hosts of one job started together must not share it (the
    // second run's rewrite of `environ` truncates it while the first collector reads it)
    let proc_root = g.dir.join(format!("proc-{}-{n}", r.job));
    write_proc_root(&proc_root, r.job);
    let out = g.dir.join(format!("{}-{n}.jsonl", r.host));
    let args = [
        "--manifest",
        &path(&manifest()),
        "--replay",
        &path(&replay),
        "--host",
        r.host,
        "--proc-root",
        &path(&proc_root),
        "--out",
        &path(&out),
        "--clickhouse",
        url,
        "--clickhouse-flush",
        "60s",
    ];
    spawn_collector(g, &format!("{}-{n}", r.host), &args)
}

/// The fleet of the module comment sends to `url`; returns once every collector has exited.
/// The runs of [`THEN`] start after every run of [`FIRST`] has exited (a host's kernel
/// change is a later boot), h-dev's three jobs one after the other.
pub(crate) fn run(g: &mut Guard, url: &str) {
    let mut n = 0;
    for phase in [&FIRST[..], &THEN[..5]] {
        let mut running = Vec::new();
        for r in phase {
            n += 1;
            running.push(start(g, url, r, n));
        }
        for (i, rx) in running {
            wait_exit(g, i, &rx, Duration::from_secs(120));
        }
    }
    let (i, rx) = start(g, url, &THEN[5], n + 1);
    wait_exit(g, i, &rx, Duration::from_secs(120));
}

/// (ticket, ticket owner, site owner, errno, chains, jobs, hosts, kernels, hosts changed,
/// changed from) of a `tickets.sql` row.
type Want<'r> = (
    &'r str,
    &'r str,
    &'r str,
    &'r str,
    &'r str,
    &'r str,
    &'r str,
    String,
    &'r str,
    &'r str,
);

fn want(r: &[String]) -> Want<'_> {
    (
        &r[0],
        &r[1],
        &r[2],
        &r[5],
        &r[7],
        &r[8],
        &r[9],
        r[10].clone(),
        &r[11],
        &r[12],
    )
}

/// The tickets every server must give on [`run`]'s data: `rows` is `tickets.sql`'s TSV.
pub(crate) fn check(rows: &[Vec<String>]) {
    for r in rows {
        eprintln!("ticket: {}", r.join(" | "));
    }
    assert_eq!(rows.len(), 3, "three failures, three tickets: {rows:#?}");
    let find = |f: &str| {
        rows.iter()
            .find(|r| r[4] == f)
            .unwrap_or_else(|| panic!("no ticket for {f}: {rows:#?}"))
    };
    // two processes per run, one chain each
    let old = format!("['{OLD_KERNEL}']");
    let new = format!("['{NEW_KERNEL}']");
    let job = find("ib_umem_get");
    assert_eq!(
        want(job),
        (
            "job",
            "application",
            "application",
            "EFAULT",
            "4",
            "1",
            "2",
            old.clone(),
            "0",
            "[]"
        )
    );
    let host = find("rxe_qp_chk_init");
    assert_eq!(
        want(host),
        (
            "host",
            "device-firmware",
            "application",
            "EINVAL",
            "6",
            "3",
            "1",
            old,
            "0",
            "[]"
        )
    );
    let regression = find("rxe_qp_from_attr");
    assert_eq!(
        want(regression),
        (
            "regression",
            "vendor-driver",
            "application",
            "EINVAL",
            "6",
            "3",
            "3",
            new,
            "3",
            &*format!("['{OLD_KERNEL}']")
        )
    );
    assert_eq!(regression[3], "rdma_rxe");
    for r in rows {
        // the deciding site, from the set's error sites; first seen no later than last
        assert!(r[6].contains(".c:"), "no site: {r:?}");
        assert!(r[13] <= r[14], "{r:?}");
    }
}
