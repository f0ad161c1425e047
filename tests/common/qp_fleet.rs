//! The data plane's fleet scenario (issue 34 item 5), shared by the 18.16 server tests and the
//! 26.9 (chdb) test in tests/fleet_clickhouse_qp.rs: the collector's own pipeline, on the
//! checked-in rxe 6.12 set (its data-plane probes and status names), makes each host's
//! snapshot of data-plane records; each record's peer comes from the collector's join with
//! the kernel's `qp_errors` entries (`KernelTotals::qp`, as the live source reads them); the
//! ClickHouse sink sends them (spool, frame, sender).
//!
//! * `qp-01`, `qp-02`, `qp-03` (job 7001): one QP each dies of IB_WC_RETRY_EXC_ERR towards the
//!   same remote GID [`SHARED_GID`] (then moved to error: IB_QPS_ERR); `qp-01` also has a
//!   control-path failure; `qp-03` has a second QP moved to error 2 s after its RTR (RoCE v2);
//! * `qp-04` (job 7002): four QPs die of IB_WC_RETRY_EXC_ERR, each towards another GID;
//! * `qp-05` (job 7003): two QPs with RoCE v1 GIDs fatal within 0.5 and 1.5 s of RTR, one
//!   IB_WC_LOC_LEN_ERR (status code 1, not EPERM) with no peer known, one
//!   IB_WC_REM_ACCESS_ERR towards [`SHARED_GID`]; and a port error event from no process.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use collector::{
    AttachKind, ChainClock, GidType, PgRecord, Pipeline, PipelineConfig, ProbeTable, ProcInfo,
    QpError, QpErrors, QpPeer,
};
use sink_clickhouse::{ClickhouseSink, Endpoint, SinkOptions};

/// The remote GID three hosts lose QPs towards.
pub(crate) const SHARED_GID: &str = "::ffff:10.0.9.9";

/// The `qp_errors` rows the scenario sends.
pub(crate) const QP_ROWS: u64 = 16;

/// One data-plane record: the probe's function, its status, QP, port, and the peer kept at
/// the QP's RTR (GID, type, seconds from RTR to the error).
#[derive(Clone)]
struct Death {
    function: &'static str,
    status: &'static str,
    qpn: u32,
    port: u32,
    peer: Option<(&'static str, GidType, f64)>,
}

const fn death(
    function: &'static str,
    status: &'static str,
    qpn: u32,
    peer: Option<(&'static str, GidType, f64)>,
) -> Death {
    Death {
        function,
        status,
        qpn,
        port: 1,
        peer,
    }
}

const CQ: &str = "rxe_cq_post";
const QP_ERR: &str = "rxe_qp_error";
const QP_EVENT: &str = "ib_uverbs_qp_event_handler";
const DEV_EVENT: &str = "ib_uverbs_event_handler";
const RETRY: &str = "IB_WC_RETRY_EXC_ERR";

/// The checked-in rxe 6.12 set's probe table (its data-plane probes included).
pub(crate) fn table() -> ProbeTable {
    let path = super::checked_in_set("6.12", "rxe").join("manifest.yaml");
    let text = std::fs::read_to_string(&path).expect("rxe 6.12 manifest");
    ProbeTable::from_manifest_text(&text, "rxe 6.12").expect("probe table")
}

/// (probe id, code) of `status` at the data-plane probe of `function`.
fn code(t: &ProbeTable, function: &str, status: &str) -> (u32, i32) {
    let p = t
        .probes
        .iter()
        .find(|p| p.function == function && matches!(p.kind, AttachKind::Fentry { .. }))
        .unwrap_or_else(|| panic!("no data-plane probe {function}"));
    let AttachKind::Fentry { errors, .. } = &p.kind else {
        unreachable!()
    };
    let i = errors
        .iter()
        .position(|e| e == status)
        .unwrap_or_else(|| panic!("{function} has no {status}"));
    (p.id, i as i32 + 1)
}

/// The kernel's `qp_errors` entry of `d`'s record (the collector reads them with the counters).
fn entry(d: &Death, probe: u32, owner: u32, ts_ns: u64) -> QpError {
    QpError {
        probe,
        function: d.function.into(),
        qpn: d.qpn,
        pid: owner,
        status: d.status.into(),
        first_ts_ns: ts_ns,
        count: 1,
        peer: d.peer.map(|(gid, gid_type, since_s)| QpPeer {
            qpn: 0x7000 + d.qpn,
            gid: Some(gid.to_string()),
            gid_type,
            qp_type: "RC".into(),
            since_rtr_ns: (since_s * 1e9) as u64,
        }),
    }
}

/// One host's collector run: its deaths (owner `pid`, of job `job`; the port event has
/// none) and control-path failures, one final snapshot through the sink.
fn run(endpoint: &Endpoint, spool: &Path, host: &str, job: &str, pid: u32, deaths: &[Death]) {
    let table = table();
    let mut p = Pipeline::new(
        Arc::new(table.clone()),
        PipelineConfig {
            derive_counters: true,
            seq_from_zero: false,
            ..Default::default()
        },
    );
    p.set_origin(host, "6.12.117+deb12-amd64");
    let info = Arc::new(ProcInfo {
        cgroup: format!("/system.slice/slurmstepd.scope/job_{job}"),
        job: [("SLURM_JOB_ID".to_string(), job.to_string())].into(),
        exited: false,
    });
    let mut qps = Vec::new();
    let mut seq = 0;
    let base = 5_000_000_000_000u64;
    if host == "qp-01" {
        // a control-path failure beside them: its errno stays an errno
        let umem = table
            .probes
            .iter()
            .find(|p| p.function == "ib_umem_get")
            .expect("ib_umem_get");
        let r = PgRecord {
            seq,
            ts_ns: base,
            probe_id: umem.id,
            err: 14,
            pid,
            tid: pid,
            nargs: 0,
            comm: *b"trainer\0\0\0\0\0\0\0\0\0",
            ..PgRecord::default()
        };
        p.ingest_with(&collector::encode(&r), |_| Some(info.clone()));
        seq += 1;
    }
    for d in deaths {
        let (probe, err) = code(&table, d.function, d.status);
        // the port event comes from no process
        let owner = if d.qpn == 0 { 0 } else { pid };
        let ts_ns = base + seq * 1_000_000;
        let r = PgRecord {
            seq,
            ts_ns,
            probe_id: probe,
            err,
            pid: owner,
            tid: owner,
            nargs: 2,
            args: [u64::from(d.qpn), u64::from(d.port), 0, 0],
            comm: *b"trainer\0\0\0\0\0\0\0\0\0",
            ..PgRecord::default()
        };
        p.ingest_with(&collector::encode(&r), |r| {
            (r.pid != 0).then(|| info.clone())
        });
        seq += 1;
        // the kernel's entry for the QP's first error at this probe, with its peer
        qps.push(entry(d, probe, owner, ts_ns));
    }
    qps.sort_by_key(|e| (e.probe, e.qpn, e.pid));
    let mut k = p.derived();
    k.qp = Some(QpErrors {
        firsts: qps.len() as u64,
        qps,
        ..QpErrors::default()
    });
    let snap = p.snapshot(&Arc::new(k), SystemTime::now(), true);
    let joined = snap
        .records
        .recs
        .iter()
        .filter(|r| r.peer.is_some())
        .count();
    let want = deaths.iter().filter(|d| d.peer.is_some()).count();
    assert_eq!(joined, want, "{host}: every peer joined to its record");
    enqueue(endpoint, spool, host, &snap);
}

/// `snap` through the ClickHouse sink of `host`, every batch sent.
fn enqueue(endpoint: &Endpoint, spool: &Path, host: &str, snap: &collector::Snapshot) {
    let mut sink = ClickhouseSink::start(SinkOptions {
        endpoint: endpoint.clone(),
        spool_dir: spool.to_path_buf(),
        spool_limit_bytes: 64 << 20,
        boot_id: format!("boot-{host}"),
        clock: ChainClock::LastRecord,
        min_backoff: Duration::from_millis(100),
        max_backoff: Duration::from_secs(1),
        heartbeat: Duration::ZERO,
    })
    .expect("sink");
    sink.enqueue(snap).expect("enqueue");
    let st = sink.finish(Duration::from_secs(30));
    assert_eq!(
        (st.sent_batches, st.spool_batches, st.quarantined_batches),
        (1, 0, 0),
        "{host}: every batch sent: {st:?}"
    );
}

/// The scenario (see the module doc) sent to `endpoint`; spools under `dir`.
pub(crate) fn send(endpoint: &Endpoint, dir: &Path) {
    let shared = |qpn: u32| {
        let peer = Some((SHARED_GID, GidType::RoceV2, 1200.0));
        [
            death(CQ, RETRY, qpn, peer),
            death(QP_ERR, "IB_QPS_ERR", qpn, peer),
        ]
    };
    let hosts: [(&str, &str, u32, Vec<Death>); 5] = [
        ("qp-01", "7001", 101, shared(0x101).into()),
        ("qp-02", "7001", 102, shared(0x201).into()),
        (
            "qp-03",
            "7001",
            103,
            [
                shared(0x301).into(),
                vec![death(
                    QP_ERR,
                    "IB_QPS_ERR",
                    0x302,
                    Some(("::ffff:10.0.3.77", GidType::RoceV2, 2.0)),
                )],
            ]
            .concat(),
        ),
        (
            "qp-04",
            "7002",
            104,
            (1..=4)
                .map(|i| {
                    let gid: &'static str = [
                        "",
                        "::ffff:10.0.4.1",
                        "::ffff:10.0.4.2",
                        "::ffff:10.0.4.3",
                        "::ffff:10.0.4.4",
                    ][i as usize];
                    death(CQ, RETRY, 0x400 + i, Some((gid, GidType::RoceV2, 400.0)))
                })
                .collect(),
        ),
        (
            "qp-05",
            "7003",
            105,
            vec![
                death(
                    QP_EVENT,
                    "IB_EVENT_QP_FATAL",
                    0x501,
                    Some(("fe80::1:1", GidType::RoceV1, 0.5)),
                ),
                death(
                    QP_EVENT,
                    "IB_EVENT_QP_FATAL",
                    0x502,
                    Some(("fe80::1:2", GidType::RoceV1, 1.5)),
                ),
                death(CQ, "IB_WC_LOC_LEN_ERR", 0x503, None),
                death(
                    CQ,
                    "IB_WC_REM_ACCESS_ERR",
                    0x504,
                    Some((SHARED_GID, GidType::RoceV2, 3600.0)),
                ),
                death(DEV_EVENT, "IB_EVENT_PORT_ERR", 0, None),
            ],
        ),
    ];
    for (host, job, pid, deaths) in &hosts {
        run(
            endpoint,
            &dir.join(format!("spool-{host}")),
            host,
            job,
            *pid,
            deaths,
        );
    }
}

fn rows(want: &[&[&str]]) -> Vec<Vec<String>> {
    want.iter()
        .map(|r| r.iter().map(|s| s.to_string()).collect())
        .collect()
}

/// The answers every server must give on [`send`]'s data; `ask(name)` runs
/// `deploy/clickhouse/<name>.sql` and returns its TSV rows.
pub(crate) fn check(ask: &dyn Fn(&str) -> Vec<Vec<String>>) {
    // retry exceeded by (host, remote GID): the GID three hosts lose QPs towards is the
    // remote side; the host that loses QPs towards four GIDs is the host side
    let pairs = ask("qp_peer_pairs");
    let got: Vec<Vec<String>> = pairs.iter().map(|r| r[..6].to_vec()).collect();
    let remote = "remote side: link, switch or peer host";
    let host_side = "host side: its NIC or link";
    assert_eq!(
        got,
        rows(&[
            &["qp-01", SHARED_GID, "1", "3", "1", remote],
            &["qp-02", SHARED_GID, "1", "3", "1", remote],
            &["qp-03", SHARED_GID, "1", "3", "1", remote],
            &["qp-04", "::ffff:10.0.4.1", "1", "1", "4", host_side],
            &["qp-04", "::ffff:10.0.4.2", "1", "1", "4", host_side],
            &["qp-04", "::ffff:10.0.4.3", "1", "1", "4", host_side],
            &["qp-04", "::ffff:10.0.4.4", "1", "1", "4", host_side],
        ]),
        "{pairs:?}"
    );
    // per job: hosts, QPs (the port event is none), records, statuses, hosts
    let jobs = ask("qp_job_losses");
    assert_eq!(
        jobs,
        rows(&[
            &[
                "7001",
                "3",
                "4",
                "7",
                "['IB_QPS_ERR','IB_WC_RETRY_EXC_ERR']",
                "['qp-01','qp-02','qp-03']"
            ],
            &[
                "7002",
                "1",
                "4",
                "4",
                "['IB_WC_RETRY_EXC_ERR']",
                "['qp-04']"
            ],
            &[
                "7003",
                "1",
                "4",
                "4",
                "['IB_EVENT_QP_FATAL','IB_WC_LOC_LEN_ERR','IB_WC_REM_ACCESS_ERR']",
                "['qp-05']"
            ],
        ])
    );
    // QPs dead within 10 s of RTR: qp-03's RoCE v2 QP, qp-05's two RoCE v1 QPs
    let early = ask("qp_early_deaths");
    assert_eq!(
        early,
        rows(&[
            &[
                "qp-03",
                "roce-v2",
                "IB_QPS_ERR",
                "1",
                "2000",
                "['::ffff:10.0.3.77']"
            ],
            &[
                "qp-05",
                "roce-v1",
                "IB_EVENT_QP_FATAL",
                "2",
                "1000",
                "['fe80::1:1','fe80::1:2']"
            ],
        ])
    );
}
