//! The fleet questions' scenario, shared by the 18.16 server test (tests/fleet_clickhouse.rs)
//! and the current-release test (tests/fleet_clickhouse_current.rs), so that both answer on
//! the same workload and are held to the same answers.
#![allow(dead_code)]

use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::replays::write_proc_root;
use super::replays::write_storm;
use super::servers::{data, spawn_collector, Guard};

pub(crate) fn manifest() -> String {
    data("rxe-6.12.manifest.yaml").display().to_string()
}

pub(crate) fn path(p: &Path) -> String {
    p.display().to_string()
}

/// Waits for the collector to exit by itself; its stderr lines.
pub(crate) fn wait_exit(
    g: &mut Guard,
    i: usize,
    rx: &mpsc::Receiver<String>,
    within: Duration,
) -> Vec<String> {
    let t0 = Instant::now();
    let mut lines = Vec::new();
    loop {
        while let Ok(l) = rx.try_recv() {
            lines.push(l);
        }
        if let Some(st) = g.exited(i) {
            // the reader thread may still hold the last lines
            std::thread::sleep(Duration::from_millis(100));
            lines.extend(rx.try_iter());
            assert!(st.success(), "collector failed ({st}): {lines:#?}");
            return lines;
        }
        assert!(t0.elapsed() < within, "collector still running: {lines:#?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The job whose records `job_records.sql` is asked for.
pub(crate) const JOB: &str = "302";

/// Five hosts send to `url` (see the comments): three healthy, one in a failure storm, one
/// in a crash loop. Returns once every collector has exited.
pub(crate) fn run(g: &mut Guard, url: &str) {
    let storm = g.dir.join("storm.jsonl");
    write_storm(&storm, 100);
    let guest = path(&data("rxe-6.12.replay.jsonl"));
    let collect = |g: &mut Guard, host: &str, job: &str, replay: &str, extra: &[&str]| {
        let proc_root = g.dir.join(format!("proc-{job}"));
        write_proc_root(&proc_root, job);
        let out = path(&g.dir.join(format!("{host}-{job}.jsonl")));
        let pr = path(&proc_root);
        let mut args = vec![
            "--manifest",
            &*manifest(),
            "--replay",
            replay,
            "--host",
            host,
            "--proc-root",
            &pr,
            "--out",
            &out,
            "--clickhouse",
            url,
            "--clickhouse-flush",
            "60s",
        ]
        .into_iter()
        .map(str::to_string)
        .collect::<Vec<_>>();
        args.extend(extra.iter().map(|s| s.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        spawn_collector(g, host, &args)
    };
    // three healthy hosts (one job each, the recording over ~5 s), one host in a failure
    // storm (the recording 100 times over ~5 s), all at once
    let mut running = Vec::new();
    for (host, job) in [("gpu-01", "101"), ("gpu-02", "102"), ("gpu-03", "103")] {
        running.push(collect(g, host, job, &guest, &["--replay-pace", "1s"]));
    }
    let storm_s = path(&storm);
    running.push(collect(
        g,
        "gpu-04",
        "200",
        &storm_s,
        &["--replay-window", "26", "--replay-pace", "50ms"],
    ));
    // a host whose three consecutive jobs fail the same way at start
    for job in ["301", "302", "303"] {
        let (i, rx) = collect(g, "gpu-05", job, &guest, &["--replay-pace", "300ms"]);
        wait_exit(g, i, &rx, Duration::from_secs(120));
    }
    for (i, rx) in running {
        wait_exit(g, i, &rx, Duration::from_secs(120));
    }
}

/// The answers every server must give on [`run`]'s data; `ask(name)` runs
/// `deploy/clickhouse/<name>.sql` (`job_records` for [`JOB`]) and returns its TSV rows.
// One scenario's assertions read top to bottom; the 80-line limit is for the code.
#[allow(clippy::too_many_lines)]
pub(crate) fn check(ask: &dyn Fn(&str) -> Vec<Vec<String>>) {
    let n = |s: &str| {
        s.parse::<u64>()
            .unwrap_or_else(|_| panic!("not a number: {s}"))
    };

    // top origins over the fleet: each of the recording's three origins, 2 chains per
    // replay (two processes), 200 in the storm; 5 hosts, 7 jobs
    let top = ask("fleet_top_origins");
    let mut got: Vec<(String, String, String, u64, u64, u64)> = top
        .iter()
        .map(|r| {
            (
                r[0].clone(),
                r[2].clone(),
                r[3].clone(),
                n(&r[4]),
                n(&r[5]),
                n(&r[6]),
            )
        })
        .collect();
    got.sort();
    let want = |o: &str, f: &str, e: &str| {
        (
            o.to_string(),
            f.to_string(),
            e.to_string(),
            2 * 6 + 200,
            5,
            7,
        )
    };
    assert_eq!(
        got,
        [
            want("application", "ib_umem_get", "EFAULT"),
            want("vendor-driver", "rxe_qp_chk_init", "EINVAL"),
            want("vendor-driver", "rxe_qp_from_attr", "EINVAL"),
        ]
    );
    // per job: the storm's job has 200 of each, a healthy job 2
    let per_job = ask("job_top_origins");
    assert_eq!(per_job.len(), 7 * 3);
    for r in &per_job {
        let want = if r[0] == "200" { 200 } else { 2 };
        assert_eq!(n(&r[4]), want, "{r:?}");
    }
    // early warning: only the storm host, for each origin
    let warn = ask("early_warning");
    let hosts: Vec<(&str, &str)> = warn
        .iter()
        .map(|r| (r[0].as_str(), r[2].as_str()))
        .collect();
    assert_eq!(
        hosts,
        [
            ("gpu-04", "ib_umem_get"),
            ("gpu-04", "rxe_qp_chk_init"),
            ("gpu-04", "rxe_qp_from_attr")
        ]
    );
    for r in &warn {
        assert!(r[6].parse::<f64>().is_ok_and(|x| x >= 10.0), "{r:?}");
    }
    // crash loop: gpu-05's three jobs all start with the reg_mr EFAULT
    let loops = ask("crash_loop");
    assert_eq!(
        loops,
        [vec![
            "gpu-05".to_string(),
            "ib_umem_get EFAULT".into(),
            "3".into(),
            "['301','302','303']".into()
        ]]
    );
    // tickets by spread: every origin on 5 hosts in 7 jobs, on the recording's one kernel
    // with no change: a fleet ticket, to the site's owner (this set has no site data)
    let tickets = ask("tickets");
    assert_eq!(tickets.len(), 3, "{tickets:?}");
    for r in &tickets {
        assert_eq!(
            (r[0].as_str(), r[1].as_str(), &r[8..12]),
            (
                "fleet",
                r[2].as_str(),
                &["7", "5", "['6.12.117+deb12-amd64']", "0"].map(String::from)[..]
            ),
            "{r:?}"
        );
    }
    // a replay has no baseline (it is traced live): the fleet's baseline is empty
    assert_eq!(ask("baselines"), Vec::<Vec<String>>::new());
    // the recording has no data-plane record: no QP lost (tests/fleet_clickhouse_qp.rs asks
    // these of a fleet that has)
    for q in ["qp_peer_pairs", "qp_job_losses", "qp_early_deaths"] {
        assert_eq!(ask(q), Vec::<Vec<String>>::new(), "{q}");
    }
    // the records of one job, each with its chain's owner
    let recs = ask("job_records");
    assert_eq!(recs.len(), 26);
    for r in &recs {
        assert_eq!(r[1], "gpu-05");
        let want = match r[6].as_str() {
            "ib_umem_get" | "rxe_mr_init_user" | "rxe_reg_user_mr" | "ib_uverbs_reg_mr" => {
                "application"
            }
            _ => "vendor-driver",
        };
        assert_eq!(r[8], want, "{r:?}");
    }
}
