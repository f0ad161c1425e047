//! The fleet's baseline scenario (issue 25 items 3 and 6), shared by the 18.16 server test and
//! the 26.9 (chdb) test in tests/fleet_clickhouse_baselines.rs: the collector's own pipeline
//! makes the snapshots and the ClickHouse sink sends them (spool, frame, sender), with a
//! baseline and chain notes set as `collect --baseline` sets them (the baseline is traced
//! live only: a replay has none).
//!
//! * host `bl-01`: two collector runs, the second restored from the first's state file (its
//!   counts go on from the first's); each run sends a first snapshot and a final one that
//!   has grown;
//! * host `bl-02`: one run;
//! * every host's final snapshot has two chains: the reg_mr EFAULT (origin ib_umem_get) the
//!   baseline learned as expected, and a create_qp EINVAL (origin rxe_qp_chk_init) that is
//!   new, with where it left the success path.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use collector::{
    BaselineOut, Bifurcation, ChainClock, ChainNote, HandlerOut, PgRecord, Pipeline,
    PipelineConfig, ProbeTable, ShapeOut, TraceCounts, LOG2_BUCKETS,
};
use sink_clickhouse::{ClickhouseSink, Endpoint, SinkOptions};

/// The main success shape of ib_uverbs_reg_mr, and a rare slow one.
pub(crate) const MAIN: &str = "5a5a5a5a5a5a";
pub(crate) const SLOW: &str = "b0b0b0b0b0b0";
pub(crate) const EXPECTED_WHY: &str = "seen in 5 processes, all went on to succeed";

/// One host's baseline: `main` successes of [`MAIN`], all in log2 bucket `bucket`, and
/// `slow` of [`SLOW`] in bucket 20 (about 1 ms).
fn baseline(main: u64, bucket: usize, slow: u64) -> BaselineOut {
    let shape = |id: &str, count: u64, b: usize| {
        let mut hist = vec![0; b + 1];
        hist[b] = count;
        ShapeOut {
            shape: id.into(),
            functions: vec![
                "ib_umem_get".into(),
                "rxe_reg_user_mr".into(),
                "ib_uverbs_reg_mr".into(),
            ],
            count,
            share: count as f64 / (main + slow) as f64,
            p50_ns: 1 << b,
            p90_ns: 1 << b,
            p99_ns: 1 << b,
            duration_log2: hist,
            exemplars: vec![],
        }
    };
    let mut shapes = vec![shape(MAIN, main, bucket)];
    if slow > 0 {
        shapes.push(shape(SLOW, slow, 20));
    }
    BaselineOut {
        mechanism: "fentry+fexit, task storage".into(),
        sample: 1,
        budget: 0,
        max_ns: 0,
        records: TraceCounts::default(),
        handlers: vec![HandlerOut {
            probe: 0,
            function: "ib_uverbs_reg_mr".into(),
            successes: main + slow,
            other: 0,
            noise: vec![],
            shapes,
        }],
        expected: vec![],
        jobs: vec![],
        jobs_other: 0,
    }
}

fn rec(probe: u32, err: i32, ts_ns: u64, seq: u64, pid: u32) -> PgRecord {
    PgRecord {
        seq,
        ts_ns,
        probe_id: probe,
        err,
        pid,
        tid: pid,
        cgroup_id: 1,
        nargs: 1,
        args: [0x1000, 0, 0, 0],
        comm: *b"verbs_app\0\0\0\0\0\0\0",
        ..PgRecord::default()
    }
}

/// The baseline's note of a chain, by its origin: the EFAULT is expected, the EINVAL new.
fn note(origin: &str) -> ChainNote {
    if origin == "ib_umem_get" {
        return ChainNote {
            bifurcation: Err("no traced call"),
            expected: true,
            expected_why: EXPECTED_WHY.into(),
        };
    }
    ChainNote {
        bifurcation: Ok(Bifurcation {
            after: "ib_uverbs_create_qp".into(),
            baseline_next: Some("rxe_create_qp".into()),
            baseline_next_layer: Some(manifest::Layer::Vendor),
            share: 0.97,
            this_next: Some("rxe_qp_chk_init".into()),
            this_next_layer: Some(manifest::Layer::Vendor),
            shape: "c0ffeec0ffee".into(),
            path: "failures",
            functions: vec![],
            common: 1,
        }),
        expected: false,
        expected_why: "new: never seen before".into(),
    }
}

/// One collector run of `host` through the sink to `endpoint`: a first snapshot with the
/// baseline `first`, then the final one with the chains and the baseline `last`.
fn run(endpoint: &Endpoint, spool: &Path, host: &str, first: BaselineOut, last: BaselineOut) {
    let table = ProbeTable::from_triples(&[
        (0, "ib_uverbs_reg_mr", "ib_uverbs"),
        (1, "ib_umem_get", "ib_uverbs"),
        (2, "ib_uverbs_create_qp", "ib_uverbs"),
        (3, "rxe_qp_chk_init", "rdma_rxe"),
    ])
    .with_calls(4, &[(0, 1), (2, 3)]);
    let mut p = Pipeline::new(
        Arc::new(table),
        PipelineConfig {
            derive_counters: true,
            seq_from_zero: false,
            ..Default::default()
        },
    );
    p.set_origin(host, "6.12.117+deb12-amd64");
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
    let k = Arc::new(p.derived());
    let mut snap = p.snapshot(&k, SystemTime::now(), false);
    snap.baseline = Some(first);
    sink.enqueue(&snap).expect("enqueue");
    for r in [
        rec(1, 14, 1_000, 0, 7),
        rec(0, 14, 2_000, 1, 7),
        rec(3, 22, 3_000, 2, 8),
        rec(2, 22, 4_000, 3, 8),
    ] {
        p.ingest(&collector::encode(&r));
    }
    let k = Arc::new(p.derived());
    let mut snap = p.snapshot(&k, SystemTime::now(), true);
    let notes: Vec<ChainNote> = snap
        .chains
        .iter()
        .map(|c| note(c.origin().map_or("", |o| c.names_of(o).0)))
        .collect();
    assert_eq!(notes.len(), 2, "two chains in the final snapshot");
    snap.chains.set_notes(notes);
    snap.baseline = Some(last);
    // the NIC's count of requesters that gave up, this window (the port_counters table)
    snap.port_counters = vec![collector::PortCounterOut {
        device: "mlx5_0".into(),
        port: 1,
        counter: "req_transport_retries_exceeded".into(),
        delta: 2,
        total: Some(9),
        reset: None,
    }];
    sink.enqueue(&snap).expect("enqueue");
    let st = sink.finish(Duration::from_secs(30));
    assert_eq!(
        (st.sent_batches, st.spool_batches, st.quarantined_batches),
        (2, 0, 0),
        "{host}: every batch sent: {st:?}"
    );
}

/// The `port_counters` rows the scenario sends: one per collector run, `host device port
/// counter delta total reset`, by host.
pub(crate) const PORT_ROWS: [&str; 3] = [
    "bl-01\tmlx5_0\t1\treq_transport_retries_exceeded\t2\t9\t",
    "bl-01\tmlx5_0\t1\treq_transport_retries_exceeded\t2\t9\t",
    "bl-02\tmlx5_0\t1\treq_transport_retries_exceeded\t2\t9\t",
];

/// The scenario (see the module doc) sent to `endpoint`; spools under `dir`.
pub(crate) fn send(endpoint: &Endpoint, dir: &Path) {
    for (spool, host, first, last) in [
        // bl-01's first run: 10 then 12 main calls in [2^10, 2^11) ns
        (
            "spool-01a",
            "bl-01",
            baseline(10, 10, 0),
            baseline(12, 10, 1),
        ),
        // its second run goes on from the state file: 12 + 3 main calls, the slow one
        (
            "spool-01b",
            "bl-01",
            baseline(13, 10, 1),
            baseline(15, 10, 2),
        ),
        // bl-02: 5 main calls in [2^12, 2^13) ns
        ("spool-02", "bl-02", baseline(4, 12, 0), baseline(5, 12, 0)),
    ] {
        run(endpoint, &dir.join(spool), host, first, last);
    }
}

/// The fleet's baseline: bl-01's latest batch (15 main, 2 slow) plus bl-02's (5 main), each
/// host once (summing every run's latest batch would count bl-01's first run's 12 again);
/// quantiles from the merged buckets: of 20 main calls 15 in bucket 10, 5 in bucket 12.
pub(crate) fn check_baselines(rows: &[Vec<String>]) {
    let want: Vec<Vec<String>> = [
        [
            "ib_uverbs_reg_mr",
            MAIN,
            "['ib_umem_get','rxe_reg_user_mr','ib_uverbs_reg_mr']",
            "2",
            "20",
            "0.9091",
            "2048",
            "8192",
            "8192",
        ],
        [
            "ib_uverbs_reg_mr",
            SLOW,
            "['ib_umem_get','rxe_reg_user_mr','ib_uverbs_reg_mr']",
            "1",
            "2",
            "0.0909",
            "2097152",
            "2097152",
            "2097152",
        ],
    ]
    .iter()
    .map(|r| r.iter().map(|s| s.to_string()).collect())
    .collect();
    let got: Vec<Vec<String>> = rows.iter().map(|r| r[..9].to_vec()).collect();
    assert_eq!(got, want);
    // each host's own median: bl-01's 2^10, bl-02's 2^12 (median of two: their mean)
    assert_eq!(rows[0][9], ((1024 + 4096) / 2).to_string());
    assert_eq!(LOG2_BUCKETS, 40);
}

/// The fleet questions leave the expected chain out and keep the new one: its origin on both
/// hosts (one chain per run: 3), to the vendor driver.
pub(crate) fn check_questions(ask: &dyn Fn(&str) -> Vec<Vec<String>>) {
    let top = ask("fleet_top_origins");
    let got: Vec<&[String]> = top.iter().map(|r| &r[..7]).collect();
    assert_eq!(
        got,
        [&[
            "vendor-driver",
            "rdma_rxe",
            "rxe_qp_chk_init",
            "EINVAL",
            "3",
            "2",
            "1"
        ]
        .map(String::from)[..]]
    );
    let tickets = ask("tickets");
    let origins: Vec<&str> = tickets.iter().map(|r| r[4].as_str()).collect();
    assert_eq!(origins, ["rxe_qp_chk_init"], "{tickets:?}");
}
