//! The ClickHouse sink against Debian bookworm's real `clickhouse-server` (18.16), started by
//! each test on loopback with its own config, data directory, ports and password:
//!
//! * a replay of the guest recording: rows == records, chains with their owner;
//! * the server stopped mid-run while the collector keeps producing, then restarted: every
//!   record arrives exactly once and the spool empties;
//! * SIGTERM while the server is down: the spool persists, the next start sends it.
//!
//! Without `clickhouse-server` (installed by `scripts/install-deps.sh`) the tests fail; they
//! never skip. `PROBEGEN_KEEP_TEST_DIRS=1` keeps the directories (logs, JSONL, spool).

// A test reads as one scenario from setup to assertions; the 80-line limit is for the code.
#![allow(clippy::too_many_lines)]

mod common;

use std::time::{Duration, Instant};

use common::fleet_scenario::{self, manifest, path, wait_exit};
use common::replays::{jsonl_records, spooled, write_storm};
use common::servers::{
    data, fleet_question, fleet_question_with, spawn_collector, ClickHouse, Guard,
};

/// The `snapshots` rows of `host` stand for the JSONL's snapshots: one row per window with
/// something in it (records, chains, counters) or the run's first and final window, idle
/// windows folded into the next row (heartbeat 60 s, longer than these runs), so that the
/// rows' windows add up to the JSONL's to the nanosecond and carry all its records.
fn snapshot_rows_cover(ch: &ClickHouse, host: &str, snaps: &[serde_json::Value]) {
    let got = ch
        .query(&format!(
            "SELECT count(), sum(time_ns - window_start_ns), sum(records) \
             FROM probegen.snapshots FINAL WHERE host = '{host}'"
        ))
        .expect("snapshots");
    let w = |s: &serde_json::Value, k: &str| s["window"][k].as_u64().expect("window ns");
    let busy = snaps
        .iter()
        .filter(|s| {
            s["final"] == true
                || s["snapshot"] == 0
                || s["records"].as_array().is_some_and(|r| !r.is_empty())
                || s["chains"].as_array().is_some_and(|c| !c.is_empty())
        })
        .count();
    let covered: u64 = snaps
        .iter()
        .map(|s| w(s, "end_unix_ns") - w(s, "start_unix_ns"))
        .sum();
    let records: usize = snaps
        .iter()
        .map(|s| s["records"].as_array().map_or(0, Vec::len))
        .sum();
    let got: Vec<u64> = got
        .split_whitespace()
        .map(|v| v.parse().expect("number"))
        .collect();
    eprintln!(
        "{host}: {} snapshots rows for {} JSONL snapshots ({busy} not idle)",
        got[0],
        snaps.len()
    );
    assert!(
        got[0] >= busy as u64 && got[0] <= snaps.len() as u64,
        "{got:?}"
    );
    assert_eq!(got[1..], [covered, records as u64]);
}

/// The collector's closing ClickHouse line: (sent records, spool batches left, peak batches,
/// peak bytes, send errors).
fn clickhouse_line(lines: &[String]) -> (u64, u64, u64, u64, u64) {
    let l = lines
        .iter()
        .find(|l| l.starts_with("probegen collect: clickhouse: sent "))
        .unwrap_or_else(|| panic!("no clickhouse summary line in {lines:#?}"));
    let nums: Vec<u64> = l
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .filter_map(|s| s.parse().ok())
        .collect();
    // sent B batches, R records; spool N batches (Y bytes) left, peak P batches (Q bytes),
    // dropped D; send errors E
    assert_eq!(nums.len(), 8, "{l}");
    (nums[1], nums[2], nums[4], nums[5], nums[7])
}

#[test]
fn replay_rows_equal_records() {
    let mut g = Guard::new("pg-fleet-ch-replay");
    let ch = ClickHouse::start(&mut g);
    ch.create_tables(&[]);
    let out = g.dir.join("snapshots.jsonl");
    let (i, rx) = spawn_collector(
        &mut g,
        "collect",
        &[
            "--manifest",
            &manifest(),
            "--replay",
            &path(&data("rxe-6.12.replay.jsonl")),
            "--out",
            &path(&out),
            "--host",
            "gpu-replay",
            "--clickhouse",
            &ch.url(),
        ],
    );
    let lines = wait_exit(&mut g, i, &rx, Duration::from_secs(60));
    let (records, snaps) = jsonl_records(&out);
    assert!(records > 0, "the recording has records");
    let q = |s: &str| ch.count(s);
    let rows = q("SELECT count() FROM probegen.records FINAL WHERE host = 'gpu-replay'");
    let raw = q("SELECT count() FROM probegen.records WHERE host = 'gpu-replay'");
    eprintln!(
        "replay: {records} records in the JSONL, {rows} rows in ClickHouse ({raw} before FINAL)"
    );
    assert_eq!(rows, records as u64);
    assert_eq!(raw, records as u64, "no batch sent twice without a failure");
    snapshot_rows_cover(&ch, "gpu-replay", &snaps);
    // every chain of the JSONL, with its owner
    let mut want: Vec<String> = snaps
        .iter()
        .flat_map(|s| s["chains"].as_array().cloned().unwrap_or_default())
        .map(|c| {
            format!(
                "{}\t{}\t{}",
                c["owner"].as_str().expect("owner"),
                c["origin"]["function"].as_str().expect("origin"),
                c["count"]
            )
        })
        .collect();
    want.sort();
    let got = ch
        .query(
            "SELECT owner, origin_function, count FROM probegen.chains FINAL \
             WHERE host = 'gpu-replay' ORDER BY owner, origin_function, count",
        )
        .expect("chains");
    assert_eq!(got.lines().collect::<Vec<_>>(), want);
    assert!(
        want.iter()
            .any(|c| c.starts_with("application\tib_umem_get")),
        "{want:?}"
    );
    assert!(
        want.iter().any(|c| c.starts_with("vendor-driver\t")),
        "{want:?}"
    );
    // the records' wall time is now-ish: the day partition is today's
    assert_eq!(
        q("SELECT count() FROM probegen.records FINAL WHERE host = 'gpu-replay' AND toDate(time) >= yesterday()"),
        records as u64
    );
    let (sent, left, ..) = clickhouse_line(&lines);
    assert_eq!((sent, left), (records as u64, 0));
    assert_eq!(spooled(&g.dir.join("snapshots.jsonl.clickhouse-spool")), 0);
}

#[test]
fn server_stopped_mid_run_every_record_once() {
    let mut g = Guard::new("pg-fleet-ch-outage");
    let mut ch = ClickHouse::start(&mut g);
    ch.create_tables(&[]);
    let storm = g.dir.join("storm.jsonl");
    let produced = write_storm(&storm, 60);
    let out = g.dir.join("snapshots.jsonl");
    // 60 windows of 26 records, one every 150 ms: 9 s of production
    let (i, rx) = spawn_collector(
        &mut g,
        "collect",
        &[
            "--manifest",
            &manifest(),
            "--replay",
            &path(&storm),
            "--replay-window",
            "26",
            "--replay-pace",
            "150ms",
            "--out",
            &path(&out),
            "--host",
            "gpu-outage",
            "--clickhouse",
            &ch.url(),
            "--clickhouse-timeout",
            "2s",
            "--clickhouse-flush",
            "60s",
        ],
    );
    let count = |ch: &ClickHouse| {
        ch.count("SELECT count() FROM probegen.records FINAL WHERE host = 'gpu-outage'")
    };
    // let some batches arrive, then stop the server while the collector goes on
    let t0 = Instant::now();
    while count(&ch) == 0 {
        assert!(t0.elapsed() < Duration::from_secs(30), "no rows arrived");
        std::thread::sleep(Duration::from_millis(100));
    }
    let before = count(&ch);
    ch.stop(&mut g);
    let stopped_at = Instant::now();
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        g.exited(i).is_none(),
        "the collector must still be producing"
    );
    ch.restart(&mut g);
    eprintln!(
        "outage: {before} rows before the stop, server down {:.1} s",
        stopped_at.elapsed().as_secs_f64()
    );
    let lines = wait_exit(&mut g, i, &rx, Duration::from_secs(120));
    let (records, snaps) = jsonl_records(&out);
    assert_eq!(records, produced);
    let rows = count(&ch);
    let keys = ch.count(
        "SELECT uniqExact(boot_id, run_id, seq, idx) FROM probegen.records WHERE host = 'gpu-outage'",
    );
    let raw = ch.count("SELECT count() FROM probegen.records WHERE host = 'gpu-outage'");
    let (sent, left, peak_batches, peak_bytes, errors) = clickhouse_line(&lines);
    // the snapshots written while the server was down saw batches pile up
    let max_spooled = snaps
        .iter()
        .filter_map(|s| s["clickhouse"]["spool_batches"].as_u64())
        .max()
        .unwrap_or(0);
    eprintln!(
        "outage: produced {produced} records, JSONL {records}, ClickHouse {rows} rows \
         ({keys} distinct keys, {raw} before FINAL), sent {sent}; spool peak {peak_batches} \
         batches ({peak_bytes} bytes), {max_spooled} in a snapshot, {left} left; {errors} \
         failed sends"
    );
    assert_eq!(rows, records as u64, "every record exactly once");
    assert_eq!(keys, records as u64);
    assert!(errors > 0, "the outage was seen: {lines:#?}");
    assert!(max_spooled >= 2, "batches were spooled during the outage");
    assert_eq!(left, 0);
    assert_eq!(spooled(&g.dir.join("snapshots.jsonl.clickhouse-spool")), 0);
    assert_eq!(
        ch.count("SELECT count() FROM probegen.snapshots FINAL WHERE host = 'gpu-outage'"),
        snaps.len() as u64
    );
}

#[test]
fn sigterm_while_down_keeps_the_spool_for_the_next_start() {
    let mut g = Guard::new("pg-fleet-ch-sigterm");
    let mut ch = ClickHouse::start(&mut g);
    ch.create_tables(&[]);
    ch.stop(&mut g);
    let storm = g.dir.join("storm.jsonl");
    write_storm(&storm, 200);
    let spool = g.dir.join("spool");
    let out1 = g.dir.join("run1.jsonl");
    let (i, rx) = spawn_collector(
        &mut g,
        "collect run 1",
        &[
            "--manifest",
            &manifest(),
            "--replay",
            &path(&storm),
            "--replay-window",
            "26",
            "--replay-pace",
            "100ms",
            "--out",
            &path(&out1),
            "--host",
            "gpu-sigterm",
            "--clickhouse",
            &ch.url(),
            "--clickhouse-spool",
            &path(&spool),
            "--clickhouse-flush",
            "1s",
        ],
    );
    std::thread::sleep(Duration::from_millis(1500));
    let st = g.terminate(i, Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(100));
    let lines: Vec<String> = rx.try_iter().collect();
    assert!(st.success(), "SIGTERM: exit 0, got {st}: {lines:#?}");
    let (records1, snaps1) = jsonl_records(&out1);
    assert!(
        snaps1.last().is_some_and(|s| s["final"] == true),
        "final snapshot written"
    );
    let left = spooled(&spool);
    eprintln!(
        "sigterm: run 1 wrote {records1} records in {} snapshots; {left} batches spooled",
        snaps1.len()
    );
    assert_eq!(
        left,
        snaps1.len(),
        "every snapshot is in the spool: {lines:#?}"
    );
    assert!(records1 > 0 && records1 < 200 * 26, "stopped mid-replay");

    ch.restart(&mut g);
    let out2 = g.dir.join("run2.jsonl");
    let (i, rx) = spawn_collector(
        &mut g,
        "collect run 2",
        &[
            "--manifest",
            &manifest(),
            "--replay",
            &path(&data("rxe-6.12.replay.jsonl")),
            "--out",
            &path(&out2),
            "--host",
            "gpu-sigterm",
            "--clickhouse",
            &ch.url(),
            "--clickhouse-spool",
            &path(&spool),
            "--clickhouse-flush",
            "60s",
        ],
    );
    let lines = wait_exit(&mut g, i, &rx, Duration::from_secs(120));
    assert!(
        lines
            .iter()
            .any(|l| l.contains("left in") && l.contains("by an earlier run")),
        "{lines:#?}"
    );
    let (records2, _) = jsonl_records(&out2);
    let rows = ch.count("SELECT count() FROM probegen.records FINAL WHERE host = 'gpu-sigterm'");
    let raw = ch.count("SELECT count() FROM probegen.records WHERE host = 'gpu-sigterm'");
    eprintln!(
        "sigterm: run 1 {records1} + run 2 {records2} records; ClickHouse {rows} rows ({raw} before FINAL); spool {} left",
        spooled(&spool)
    );
    assert_eq!(rows, (records1 + records2) as u64);
    assert_eq!(spooled(&spool), 0);
    // the runs' batch numbers do not collide: the snapshots rows cover both runs' windows
    let (_, snaps2) = jsonl_records(&out2);
    snapshot_rows_cover(&ch, "gpu-sigterm", &[snaps1, snaps2].concat());
}

#[test]
fn cluster_schema_inserts_through_distributed_tables() {
    // a one-shard cluster (`probegen_test` in the test's remote_servers) on the same server
    let mut g = Guard::new("pg-fleet-ch-cluster");
    let ch = ClickHouse::start(&mut g);
    ch.create_tables(&["--cluster", "probegen_test", "--database", "fleet"]);
    let out = g.dir.join("snapshots.jsonl");
    let url = ch.url().replace("database=probegen", "database=fleet");
    let (i, rx) = spawn_collector(
        &mut g,
        "collect",
        &[
            "--manifest",
            &manifest(),
            "--replay",
            &path(&data("rxe-6.12.replay.jsonl")),
            "--out",
            &path(&out),
            "--clickhouse",
            &url,
        ],
    );
    wait_exit(&mut g, i, &rx, Duration::from_secs(60));
    let (records, _) = jsonl_records(&out);
    // Distributed inserts are asynchronous: wait for them to reach the local table
    let t0 = Instant::now();
    loop {
        let n = ch.count("SELECT count() FROM fleet.records_local FINAL");
        if n == records as u64 {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{n} of {records} rows in fleet.records_local"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        ch.count("SELECT count() FROM fleet.records"),
        records as u64
    );
}

/// A real cluster (issue 26 item 5): two 18.16 servers on loopback, one shard each
/// (`probegen_shards` in both configs), the `--cluster` DDL on both, the fleet questions'
/// workload inserted through the `Distributed` tables of the first: every record exactly once
/// across the shards (each host's rows on one shard: sharded by host), and the questions,
/// asked of the `Distributed` tables, give the single server's answers.
#[test]
fn two_shards_every_record_once_and_the_same_answers() {
    let mut g = Guard::new("pg-fleet-ch-shards");
    let shards = ClickHouse::start_shards(&mut g, 2);
    for ch in &shards {
        ch.create_tables(&["--cluster", "probegen_shards"]);
    }
    fleet_scenario::run(&mut g, &shards[0].url());
    let mut records = 0;
    for e in std::fs::read_dir(&g.dir)
        .expect("dir")
        .map_while(Result::ok)
    {
        if e.path().extension().is_some_and(|x| x == "jsonl")
            && e.path() != g.dir.join("storm.jsonl")
        {
            records += jsonl_records(&e.path()).0 as u64;
        }
    }
    // Distributed inserts reach the shards asynchronously
    let local = |ch: &ClickHouse| ch.count("SELECT count() FROM probegen.records_local FINAL");
    let t0 = Instant::now();
    let per_shard = loop {
        let n: Vec<u64> = shards.iter().map(local).collect();
        if n.iter().sum::<u64>() >= records {
            break n;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{n:?} of {records} rows on the shards"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let keys: u64 = shards
        .iter()
        .map(|ch| {
            ch.count(
                "SELECT uniqExact(host, boot_id, run_id, seq, idx) FROM probegen.records_local",
            )
        })
        .sum();
    let hosts: Vec<u64> = shards
        .iter()
        .map(|ch| ch.count("SELECT uniqExact(host) FROM probegen.records_local"))
        .collect();
    eprintln!(
        "two shards: {records} records; rows per shard {per_shard:?}, hosts per shard {hosts:?}"
    );
    assert_eq!(
        per_shard.iter().sum::<u64>(),
        records,
        "every record exactly once"
    );
    assert_eq!(keys, records);
    assert!(
        per_shard.iter().all(|&n| n > 0),
        "both shards hold rows: {per_shard:?}"
    );
    assert_eq!(hosts.iter().sum::<u64>(), 5, "each host on one shard");
    assert_eq!(
        shards[0].count("SELECT count() FROM probegen.records FINAL"),
        records
    );
    // job_records.sql's `host IN (subquery)` on each shard's own rows (see its comment)
    fleet_scenario::check(&|name| {
        fleet_question_with(
            &shards[0],
            name,
            fleet_scenario::JOB,
            "&distributed_product_mode=local",
        )
    });
}

#[test]
fn fleet_questions_on_loaded_data() {
    let mut g = Guard::new("pg-fleet-ch-questions");
    let ch = ClickHouse::start(&mut g);
    ch.create_tables(&[]);
    fleet_scenario::run(&mut g, &ch.url());
    fleet_scenario::check(&|name| fleet_question(&ch, name, fleet_scenario::JOB));
}

/// Tickets by spread (issue 24 item 3): one job only, one host across jobs, many hosts on
/// one kernel after a change, each its ticket kind, owner and evidence.
#[test]
fn tickets_by_spread_on_loaded_data() {
    let mut g = Guard::new("pg-fleet-ch-spread");
    let ch = ClickHouse::start(&mut g);
    ch.create_tables(&[]);
    common::spread::run(&mut g, &ch.url());
    common::spread::check(&fleet_question(&ch, "tickets", ""));
}

#[test]
fn bad_fleet_arguments_are_one_line_and_exit_2() {
    let g = Guard::new("pg-fleet-ch-bad");
    let out = path(&g.dir.join("s.jsonl"));
    let guest = path(&data("rxe-6.12.replay.jsonl"));
    let m = manifest();
    let base = [
        "collect",
        "--manifest",
        &m,
        "--replay",
        &guest,
        "--out",
        &out,
    ];
    for (extra, want) in [
        (
            vec!["--clickhouse", "ftp://h"],
            "scheme `ftp`: expected http",
        ),
        (vec!["--clickhouse", "http://h:port"], "port `port`"),
        (
            vec!["--clickhouse", "http://h/?database=a;b"],
            "the database name",
        ),
        (
            vec![
                "--clickhouse",
                "http://127.0.0.1:1",
                "--clickhouse-spool",
                "/proc/nope",
            ],
            "spool /proc/nope",
        ),
        (
            vec!["--clickhouse-timeout", "0s"],
            "--clickhouse-timeout must be positive",
        ),
    ] {
        let args: Vec<&str> = base.iter().copied().chain(extra.iter().copied()).collect();
        let o = common::probegen(&args);
        let err = common::stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{extra:?}: {err}");
        assert!(err.contains(want), "{extra:?}: {err}");
    }
    let o = common::probegen(&["schema", "--clickhouse", "--database", "a;b"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(common::stderr(&o).lines().count(), 1);
}

/// Old servers without asynchronous inserts (issue 26 item 1): `schema --buffer` puts a Buffer
/// table in front of each table and `collect --clickhouse-buffer` inserts there; on Debian's
/// 18.16 every record reaches the table, once, when the buffers are flushed.
#[test]
fn buffer_tables_in_front_take_every_record_once() {
    let mut g = Guard::new("pg-fleet-ch-buffer");
    let ch = ClickHouse::start(&mut g);
    ch.create_tables(&["--buffer"]);
    let out = g.dir.join("snapshots.jsonl");
    let (i, rx) = spawn_collector(
        &mut g,
        "collect",
        &[
            "--manifest",
            &manifest(),
            "--replay",
            &path(&data("rxe-6.12.replay.jsonl")),
            "--out",
            &path(&out),
            "--host",
            "gpu-buffer",
            "--clickhouse",
            &ch.url(),
            "--clickhouse-buffer",
        ],
    );
    let lines = wait_exit(&mut g, i, &rx, Duration::from_secs(60));
    let (records, snaps) = jsonl_records(&out);
    assert!(records > 0, "the recording has records");
    let q = |s: &str| ch.count(s);
    // through the Buffer table the rows are visible at once (buffer + table) ...
    let seen = q("SELECT count() FROM probegen.records_buffer WHERE host = 'gpu-buffer'");
    // ... and in the table itself once the buffers are flushed
    for t in ["records", "chains", "counters", "snapshots"] {
        ch.query(&format!("OPTIMIZE TABLE probegen.{t}_buffer"))
            .unwrap_or_else(|e| panic!("flush {t}_buffer: {e}"));
    }
    let rows = q("SELECT count() FROM probegen.records FINAL WHERE host = 'gpu-buffer'");
    let raw = q("SELECT count() FROM probegen.records WHERE host = 'gpu-buffer'");
    eprintln!(
        "buffer: {records} records in the JSONL, {seen} seen through the Buffer table, {rows} rows in the table ({raw} before FINAL)"
    );
    assert_eq!(seen, records as u64, "{lines:#?}");
    assert_eq!((rows, raw), (records as u64, records as u64));
    snapshot_rows_cover(&ch, "gpu-buffer", &snaps);
}
