//! The data plane in the fleet store (issue 34 item 5) on real servers: Debian bookworm's
//! `clickhouse-server` 18.16 started by the test, and ClickHouse 26.9 in process (chdb, see
//! tests/fleet_clickhouse_current.rs). The scenario is tests/common/qp_fleet.rs: data-plane
//! records with their QP's peer, made by the collector's pipeline, through the real sink.
//!
//! * 18.16: a fleet whose tables the previous version made (no `qp_errors`) is upgraded with
//!   `schema --clickhouse --upgrade` (18.16: its first ALTER stops with Code 44, the fleet has
//!   those columns, then the CREATE statements, all IF NOT EXISTS); a batch the previous
//!   version left in a host's spool (a v5 frame, six tables) is sent whole; then the records'
//!   status names, the `qp_errors` rows and the three fleet questions; the same through the
//!   `--cluster` and `--buffer` tables;
//! * 26.9: the same on the current DDL, `--upgrade` twice changing nothing.
//!
//! Without the servers the tests fail naming what to install; they never skip.

mod common;

use std::time::{Duration, SystemTime};

use common::chdb::{chdb_answers, schema, tsv};
use common::fake_clickhouse::FakeClickHouse;
use common::qp_fleet;
use common::replays::frame_v5;
use common::servers::{fleet_question, fleet_question_with, ClickHouse, Guard};
use sink_clickhouse::{statements, ClickhouseSink, Endpoint, SinkOptions};

/// The previous version's tables of `schema --clickhouse FLAGS` (no `qp_errors`), upgraded as
/// the upgrade's header says for 18.16: the ALTERs stop at the first (Code 44: the fleet has
/// its columns), then the CREATE statements.
fn upgraded(ch: &ClickHouse, flags: &[&str]) {
    let old: Vec<String> = statements(&schema(flags))
        .into_iter()
        .filter(|st| !st.contains(".qp_errors"))
        .collect();
    assert!(old.iter().any(|s| s.contains(".port_counters")));
    for st in &old {
        ch.query(st).unwrap_or_else(|e| panic!("{st}\n-> {e}"));
    }
    let upgrade = statements(&schema(&[flags, &["--upgrade"]].concat()));
    let first = upgrade.first().expect("statements");
    assert!(first.starts_with("ALTER TABLE"), "{first}");
    let stop = ch.query(first).expect_err("the fleet has these columns");
    assert!(stop.contains("Code: 44"), "{stop}");
    for st in upgrade.iter().filter(|s| !s.starts_with("ALTER")) {
        ch.query(st).unwrap_or_else(|e| panic!("{st}\n-> {e}"));
    }
    let n = ch.count(
        "SELECT count() FROM system.tables WHERE database = 'probegen' AND name LIKE 'qp_errors%'",
    );
    let want = 1 + u64::from(flags.contains(&"--cluster")) + u64::from(flags.contains(&"--buffer"));
    assert_eq!(n, want, "the upgrade created every qp_errors table");
}

/// A batch as the previous version framed it (v5: no `qp_errors`) for host `old-05`: one
/// record, one snapshot row, one port counter.
fn v5_batch(seq: u64) -> Vec<u8> {
    let now = collector::unix_ns(SystemTime::now());
    let key = serde_json::json!({
        "host": "old-05", "boot_id": "boot-old", "run_id": 1, "seq": seq,
        "kernel": "6.12.117+deb12-amd64", "manifest_hash": "", "snapshot": 0, "time_ns": now,
    });
    let row = |extra: serde_json::Value| {
        let mut r = key.clone();
        if let (Some(r), Some(e)) = (r.as_object_mut(), extra.as_object()) {
            r.extend(e.clone());
        }
        format!("{r}\n")
    };
    let bodies = [
        row(serde_json::json!({"idx": 0, "function": "ib_umem_get", "errno": 14})),
        String::new(),
        String::new(),
        row(
            serde_json::json!({"is_final": 1, "window_start_ns": now - 1_000_000_000, "records": 1}),
        ),
        String::new(),
        row(serde_json::json!({"device": "rxe0", "port": 1, "counter": "send_err", "delta": 1})),
    ];
    frame_v5(seq, &bodies.map(String::into_bytes))
}

fn sink_options(endpoint: &Endpoint, spool: &std::path::Path) -> SinkOptions {
    SinkOptions {
        endpoint: endpoint.clone(),
        spool_dir: spool.to_path_buf(),
        spool_limit_bytes: 1 << 20,
        boot_id: "boot-old".into(),
        clock: collector::ChainClock::LastRecord,
        min_backoff: Duration::from_millis(100),
        max_backoff: Duration::from_secs(1),
        heartbeat: Duration::ZERO,
    }
}

/// The records of qp-05 name their status, not an errno (code 1 is IB_WC_LOC_LEN_ERR).
const QP_05_RECORDS: [&str; 5] = [
    "2\tIB_EVENT_QP_FATAL",
    "2\tIB_EVENT_QP_FATAL",
    "1\tIB_WC_LOC_LEN_ERR",
    "10\tIB_WC_REM_ACCESS_ERR",
    "7\tIB_EVENT_PORT_ERR",
];

#[test]
fn qp_errors_on_an_upgraded_18_16_fleet() {
    let mut g = Guard::new("pg-fleet-ch-qp");
    let ch = ClickHouse::start(&mut g);
    upgraded(&ch, &[]);
    let endpoint = Endpoint::parse(&ch.url(), Duration::from_secs(10))
        .expect("url")
        .with_password(ch.password.clone());
    // a batch of the previous version left in a host's spool: sent whole after the upgrade
    let spool = g.dir.join("spool-old");
    drop(ClickhouseSink::start(sink_options(&endpoint, &spool)).expect("make the spool"));
    std::fs::write(spool.join("00000000000000000000.batch"), v5_batch(0)).expect("v5 batch");
    let mut sink = ClickhouseSink::start(sink_options(&endpoint, &spool)).expect("sink");
    let st = sink.finish(Duration::from_secs(30));
    assert_eq!(
        (
            st.sent_batches,
            st.sent_records,
            st.spool_batches,
            st.quarantined_batches
        ),
        (1, 1, 0, 0),
        "{st:?}"
    );
    for t in ["records", "snapshots", "port_counters"] {
        assert_eq!(
            ch.count(&format!(
                "SELECT count() FROM probegen.{t} FINAL WHERE host = 'old-05'"
            )),
            1,
            "{t}"
        );
    }

    qp_fleet::send(&endpoint, &g.dir);
    assert_eq!(
        ch.count("SELECT count() FROM probegen.qp_errors FINAL"),
        qp_fleet::QP_ROWS
    );
    let recs = ch
        .query("SELECT errno, errno_name FROM probegen.records FINAL WHERE host = 'qp-05' ORDER BY idx")
        .expect("records");
    assert_eq!(recs.lines().collect::<Vec<_>>(), QP_05_RECORDS);
    let umem = ch
        .query("SELECT errno_name FROM probegen.records FINAL WHERE host = 'qp-01' AND function = 'ib_umem_get'")
        .expect("records");
    assert_eq!(umem.trim(), "EFAULT");
    // a row: the record's idx, class, status, QP, port, job, peer
    let row = ch
        .query(
            "SELECT q.idx = r.idx, class, status, qpn, port, job_id, peer_qpn, peer_gid, \
             peer_gid_type, qp_type, since_rtr_ns FROM probegen.qp_errors AS q FINAL \
             ALL INNER JOIN (SELECT idx FROM probegen.records FINAL WHERE host = 'qp-01' \
             AND function = 'rxe_cq_post') AS r USING (idx) WHERE host = 'qp-01'",
        )
        .expect("qp_errors");
    assert_eq!(
        row.trim(),
        format!(
            "1\tcompletion\tIB_WC_RETRY_EXC_ERR\t257\t1\t7001\t{}\t{}\troce-v2\tRC\t1200000000000",
            0x7000 + 0x101,
            qp_fleet::SHARED_GID
        )
    );
    qp_fleet::check(&|name| fleet_question(&ch, name, ""));
}

/// The `--cluster` and `--buffer` tables of the previous version, upgraded: the collectors
/// insert into the Buffer tables in front of the Distributed ones (a one-shard cluster of
/// the same server), the questions asked of the Distributed tables.
#[test]
fn qp_errors_through_upgraded_cluster_and_buffer_tables_on_18_16() {
    let mut g = Guard::new("pg-fleet-ch-qp-cluster");
    let ch = ClickHouse::start(&mut g);
    upgraded(&ch, &["--cluster", "probegen_test", "--buffer"]);
    let mut endpoint = Endpoint::parse(&ch.url(), Duration::from_secs(10))
        .expect("url")
        .with_password(ch.password.clone());
    endpoint.buffered = true;
    qp_fleet::send(&endpoint, &g.dir);
    for t in ["records", "snapshots", "qp_errors"] {
        ch.query(&format!("OPTIMIZE TABLE probegen.{t}_buffer"))
            .unwrap_or_else(|e| panic!("flush {t}_buffer: {e}"));
    }
    let t0 = std::time::Instant::now();
    let local = || ch.count("SELECT count() FROM probegen.qp_errors_local FINAL");
    while local() != qp_fleet::QP_ROWS {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{} qp_errors rows in the local table",
            local()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    qp_fleet::check(&|name| fleet_question_with(&ch, name, "", "&distributed_product_mode=local"));
}

#[test]
fn qp_errors_on_current_clickhouse() {
    let g = Guard::new("pg-fleet-ch-qp-current");
    let fake = FakeClickHouse::start("26.9.2.1");
    let endpoint = Endpoint::parse(&fake.url(), Duration::from_secs(10)).expect("url");
    qp_fleet::send(&endpoint, &g.dir);
    let inserts = fake.inserts();
    assert!(
        inserts
            .iter()
            .any(|r| r.table.as_deref() == Some("qp_errors")),
        "no qp_errors insert"
    );
    // the upgrade twice over the current DDL: IF NOT EXISTS, nothing changes, nothing fails
    let upgrade = schema(&["--server-version", "26.9", "--upgrade"]);
    assert!(upgrade.contains("CREATE TABLE IF NOT EXISTS probegen.qp_errors\n"));
    let ddl = format!(
        "{}\n{upgrade}\n{upgrade}",
        schema(&["--server-version", "26.9"])
    );
    let answers = chdb_answers(&g.dir, &ddl, &inserts);
    let counts = tsv(&answers.join("counts.tsv"));
    assert!(
        counts.contains(&vec![
            "qp_errors".to_string(),
            qp_fleet::QP_ROWS.to_string()
        ]),
        "{counts:?}"
    );
    qp_fleet::check(&|name| tsv(&answers.join(format!("{name}.tsv"))));
}
