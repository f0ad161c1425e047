//! The baseline in the fleet store (issue 25 items 3 and 6) on real servers: Debian bookworm's
//! `clickhouse-server` 18.16 started by the test, and ClickHouse 26.9 in process (chdb, see
//! tests/fleet_clickhouse_current.rs). The scenario is tests/common/baselines.rs: snapshots
//! with a baseline and chain notes through the real sink.
//!
//! * 18.16: a fleet whose tables an earlier version made (`chains` without the baseline's
//!   columns, no `baselines`) is upgraded with `schema --clickhouse --upgrade`; a batch the
//!   earlier version left in a host's spool (a v2 frame, four tables) is sent whole; then
//!   the fleet's baseline (deploy/clickhouse/baselines.sql) and the fleet questions, which
//!   leave the expected chain out; the same through the `--cluster` and `--buffer` tables of
//!   an earlier version, upgraded (every `chains` table gets the columns);
//! * 26.9: the same on the current DDL, and `--upgrade` twice (IF NOT EXISTS) changes nothing.
//!
//! Without the servers the tests fail naming what to install; they never skip.

mod common;

use std::time::{Duration, SystemTime};

use common::baselines;
use common::chdb::{chdb_answers, schema, tsv};
use common::fake_clickhouse::FakeClickHouse;
use common::replays::frame_v2;
use common::servers::{fleet_question, fleet_question_with, ClickHouse, Guard};
use sink_clickhouse::{statements, ClickhouseSink, Endpoint, SinkOptions};

/// The columns `chains` gained with the baseline.
const NOTE_COLUMNS: [&str; 9] = [
    "expected",
    "expected_why",
    "bifurcation_after",
    "bifurcation_baseline_next",
    "bifurcation_share",
    "bifurcation_this_next",
    "bifurcation_shape",
    "bifurcation_baseline_next_layer",
    "bifurcation_this_next_layer",
];

/// The columns the call order added (issue 36): the layer of the bifurcation's next functions.
const LAYER_COLUMNS: [&str; 2] = [
    "bifurcation_baseline_next_layer",
    "bifurcation_this_next_layer",
];

/// The tables of `ddl` as the previous version made them: no `baselines` (local,
/// Distributed, Buffer), every `chains` table without the baseline's columns.
fn before_baseline(ddl: &str) -> Vec<String> {
    statements(ddl)
        .into_iter()
        .filter(|st| !st.contains(".baselines"))
        .map(|st| {
            st.lines()
                .filter(|l| {
                    let name = l.trim_start().split(' ').next().unwrap_or("");
                    !(l.starts_with("    ") && NOTE_COLUMNS.contains(&name))
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect()
}

/// Makes the previous version's tables of `schema --clickhouse FLAGS`, upgrades them with
/// `--upgrade FLAGS`; the upgrade's statements.
fn upgraded(ch: &ClickHouse, flags: &[&str]) -> Vec<String> {
    let old = before_baseline(&schema(flags));
    assert!(
        old.iter().any(|s| s.contains(".chains")) && !old.iter().any(|s| s.contains("expected"))
    );
    for st in old {
        ch.query(&st).unwrap_or_else(|e| panic!("{st}\n-> {e}"));
    }
    let upgrade = statements(&schema(&[flags, &["--upgrade"]].concat()));
    for st in &upgrade {
        ch.query(st).unwrap_or_else(|e| panic!("{st}\n-> {e}"));
    }
    upgrade
}

/// The tables of the version before the call order (the baseline's note without the layer
/// columns) upgraded on 18.16, which has no `IF NOT EXISTS`: the newest ALTER (the layers)
/// goes in, the next one (the note, there already) stops the run with Code 44 as the
/// upgrade's header says, and the table has every column.
fn upgrade_from_the_return_order_version(ch: &ClickHouse) {
    let flags = ["--database", "probegen_v3"];
    for st in statements(&schema(&flags)) {
        let old: Vec<&str> = st
            .lines()
            .filter(|l| {
                let name = l.trim_start().split(' ').next().unwrap_or("");
                !(l.starts_with("    ") && LAYER_COLUMNS.contains(&name))
            })
            .collect();
        ch.query(&old.join("\n"))
            .unwrap_or_else(|e| panic!("{st}\n-> {e}"));
    }
    let upgrade = statements(&schema(&[&flags[..], &["--upgrade"]].concat()));
    let (first, second) = (&upgrade[0], &upgrade[1]);
    assert!(first.contains("bifurcation_this_next_layer"), "{first}");
    ch.query(first)
        .unwrap_or_else(|e| panic!("{first}\n-> {e}"));
    let stop = ch.query(second).expect_err("the note's columns are there");
    assert!(stop.contains("Code: 44"), "{stop}");
    let cols = ch
        .query("SELECT name FROM system.columns WHERE database = 'probegen_v3' AND table = 'chains' AND name LIKE 'bifurcation_%'")
        .expect("columns");
    assert_eq!(cols.lines().count(), 7, "{cols}");
}

/// A batch as the previous version framed it (v2: records, chains, counters, snapshots; no
/// baselines) for host `old-01`: one record, one snapshot row.
fn v2_batch(seq: u64) -> Vec<u8> {
    let now = collector::unix_ns(SystemTime::now());
    let key = serde_json::json!({
        "host": "old-01", "boot_id": "boot-old", "run_id": 1, "seq": seq,
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
    ];
    frame_v2(seq, &bodies.map(String::into_bytes))
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

#[test]
fn baselines_on_an_upgraded_18_16_fleet() {
    let mut g = Guard::new("pg-fleet-ch-baselines");
    let ch = ClickHouse::start(&mut g);
    // the tables of the previous version, upgraded
    let upgrade = upgraded(&ch, &[]);
    let cols = ch
        .query("SELECT name FROM system.columns WHERE database = 'probegen' AND table = 'chains' AND name LIKE 'bifurcation_%' ORDER BY name")
        .expect("columns");
    assert_eq!(cols.lines().count(), 7, "{cols}");
    // run once, as the upgrade says: a second ALTER fails, naming the column
    let alter = upgrade
        .iter()
        .find(|s| s.starts_with("ALTER TABLE probegen.chains\n"))
        .expect("ALTER");
    let again = ch.query(alter).expect_err("18.16 has no IF NOT EXISTS");
    assert!(again.contains("Code: 44"), "{again}");
    upgrade_from_the_return_order_version(&ch);

    let endpoint = Endpoint::parse(&ch.url(), Duration::from_secs(10))
        .expect("url")
        .with_password(ch.password.clone());
    // a batch of the previous version left in a host's spool: sent whole after the upgrade
    let spool = g.dir.join("spool-old");
    drop(ClickhouseSink::start(sink_options(&endpoint, &spool)).expect("make the spool"));
    std::fs::write(spool.join("00000000000000000000.batch"), v2_batch(0)).expect("v2 batch");
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
    for t in ["records", "snapshots"] {
        assert_eq!(
            ch.count(&format!(
                "SELECT count() FROM probegen.{t} FINAL WHERE host = 'old-01'"
            )),
            1,
            "{t}"
        );
    }

    baselines::send(&endpoint, &g.dir);
    // the ports' error counters, in the table the upgrade's DDL added
    let ports = ch
        .query(
            "SELECT host, device, port, counter, delta, total, reset \
             FROM probegen.port_counters FINAL ORDER BY host",
        )
        .expect("port_counters");
    assert_eq!(ports.lines().collect::<Vec<_>>(), baselines::PORT_ROWS);
    // the notes as columns: the expected chain and the new one with its bifurcation
    let chains = ch
        .query(
            "SELECT origin_function, expected, expected_why, bifurcation_after, \
             bifurcation_baseline_next, bifurcation_share, bifurcation_this_next, \
             bifurcation_shape, bifurcation_baseline_next_layer, bifurcation_this_next_layer \
             FROM probegen.chains FINAL WHERE host = 'bl-02' ORDER BY origin_function",
        )
        .expect("chains");
    assert_eq!(
        chains.lines().collect::<Vec<_>>(),
        [
            format!("ib_umem_get\t1\t{}\t\t\t0\t\t\t\t", baselines::EXPECTED_WHY),
            "rxe_qp_chk_init\t0\tnew: never seen before\tib_uverbs_create_qp\trxe_create_qp\t0.97\trxe_qp_chk_init\tc0ffeec0ffee\tvendor\tvendor".into(),
        ]
    );
    baselines::check_baselines(&fleet_question(&ch, "baselines", ""));
    baselines::check_questions(&|name| fleet_question(&ch, name, ""));
    // the questions' comment holds: without `AND expected = 0` the expected chain is back
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy/clickhouse/fleet_top_origins.sql");
    let sql = std::fs::read_to_string(file).expect("sql");
    assert!(sql.contains(" AND expected = 0"));
    let all = ch
        .query(&sql.replace(" AND expected = 0", ""))
        .expect("fleet_top_origins with expected chains");
    let origins: Vec<&str> = all.lines().filter_map(|l| l.split('\t').nth(2)).collect();
    assert_eq!(origins, ["ib_umem_get", "rxe_qp_chk_init"], "{all}");
}

/// The `--cluster` and `--buffer` DDL of an earlier version, upgraded: the collectors insert
/// into the Buffer tables in front of the Distributed ones (a one-shard cluster of the same
/// server), and the questions, asked of the Distributed tables, give the same answers.
#[test]
fn baselines_through_upgraded_cluster_and_buffer_tables_on_18_16() {
    let mut g = Guard::new("pg-fleet-ch-baselines-cluster");
    let ch = ClickHouse::start(&mut g);
    let upgrade = upgraded(&ch, &["--cluster", "probegen_test", "--buffer"]);
    let alters: Vec<&str> = upgrade
        .iter()
        .filter_map(|s| s.strip_prefix("ALTER TABLE probegen."))
        .filter_map(|s| s.lines().next())
        .collect();
    // one ALTER per version that added columns (the layers, then the note), per table
    assert_eq!(
        alters,
        ["chains_local", "chains", "chains_buffer"].repeat(2)
    );
    let mut endpoint = Endpoint::parse(&ch.url(), Duration::from_secs(10))
        .expect("url")
        .with_password(ch.password.clone());
    endpoint.buffered = true;
    baselines::send(&endpoint, &g.dir);
    // flush the buffers, then wait for the Distributed tables' asynchronous inserts: 9
    // baselines rows (3 + 4 + 2 shapes over the batches), 6 chains
    for t in ["records", "chains", "counters", "snapshots", "baselines"] {
        ch.query(&format!("OPTIMIZE TABLE probegen.{t}_buffer"))
            .unwrap_or_else(|e| panic!("flush {t}_buffer: {e}"));
    }
    let t0 = std::time::Instant::now();
    let local = |t: &str| ch.count(&format!("SELECT count() FROM probegen.{t}_local FINAL"));
    while (local("baselines"), local("chains")) != (9, 6) {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{} baselines, {} chains rows in the local tables",
            local("baselines"),
            local("chains")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let ask = |name: &str| fleet_question_with(&ch, name, "", "&distributed_product_mode=local");
    baselines::check_baselines(&ask("baselines"));
    baselines::check_questions(&ask);
}

#[test]
fn baselines_on_current_clickhouse() {
    let g = Guard::new("pg-fleet-ch-baselines-current");
    let fake = FakeClickHouse::start("26.9.2.1");
    let endpoint = Endpoint::parse(&fake.url(), Duration::from_secs(10)).expect("url");
    baselines::send(&endpoint, &g.dir);
    let inserts = fake.inserts();
    assert!(
        inserts
            .iter()
            .any(|r| r.table.as_deref() == Some("baselines")),
        "no baselines insert"
    );
    // the upgrade twice over the current DDL: IF NOT EXISTS, nothing changes, nothing fails
    let upgrade = schema(&["--server-version", "26.9", "--upgrade"]);
    assert!(upgrade.contains("ADD COLUMN IF NOT EXISTS expected "));
    let ddl = format!(
        "{}\n{upgrade}\n{upgrade}",
        schema(&["--server-version", "26.9"])
    );
    let answers = chdb_answers(&g.dir, &ddl, &inserts);
    let counts = tsv(&answers.join("counts.tsv"));
    assert!(
        counts.contains(&vec!["port_counters".to_string(), "3".to_string()]),
        "{counts:?}"
    );
    baselines::check_baselines(&tsv(&answers.join("baselines.tsv")));
    baselines::check_questions(&|name| tsv(&answers.join(format!("{name}.tsv"))));
}
