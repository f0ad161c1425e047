//! Ingestion that scales (issue 26): what a host sends to ClickHouse is proportional to what
//! happened. Against a fake ClickHouse on loopback that counts every request:
//!
//! * idle windows send no INSERT: only a `snapshots` heartbeat row at
//!   `--clickhouse-heartbeat`, whose window covers the idle ones (the rows' windows still add
//!   up to the time reported, which `early_warning.sql` divides by); `0s` restores a row per
//!   window;
//! * the server's release decides the INSERT: plain on 18.16, and a version the sender cannot
//!   read means plain INSERTs with one warning (26.x's `async_insert` is in
//!   tests/fleet_clickhouse_current.rs).

mod common;

use std::path::Path;
use std::time::Duration;

use common::fake_clickhouse::FakeClickHouse;
use common::fleet_scenario::{manifest, path, wait_exit};
use common::replays::jsonl_records;
use common::servers::{data, spawn_collector, Guard};

/// The guest recording followed by `idle` windows in which nothing happens (its last
/// `counters` line again: the kernel's totals did not move).
fn with_idle_tail(dest: &Path, idle: usize) {
    let text = std::fs::read_to_string(data("rxe-6.12.replay.jsonl")).expect("guest recording");
    let last = text
        .lines()
        .rfind(|l| l.starts_with("{\"counters\""))
        .expect("a counters line")
        .to_string();
    let mut out = text.trim_end().to_string();
    out.push('\n');
    for _ in 0..idle {
        out.push_str(&last);
        out.push('\n');
    }
    std::fs::write(dest, out).expect("write replay");
}

/// Runs the collector on `replay` against `fake` with `extra` flags; its stderr lines and
/// JSONL snapshots.
fn collect(
    g: &mut Guard,
    fake: &FakeClickHouse,
    tag: &str,
    replay: &Path,
    extra: &[&str],
) -> (Vec<String>, Vec<serde_json::Value>) {
    let out = g.dir.join(format!("{tag}.jsonl"));
    let url = fake.url();
    let (m, r, o) = (manifest(), path(replay), path(&out));
    let mut args = vec![
        "--manifest",
        &*m,
        "--replay",
        &*r,
        "--out",
        &*o,
        "--host",
        tag,
        "--replay-pace",
        "100ms",
        "--clickhouse",
        &*url,
        "--clickhouse-flush",
        "30s",
    ];
    args.extend_from_slice(extra);
    let (i, rx) = spawn_collector(g, tag, &args);
    let lines = wait_exit(g, i, &rx, Duration::from_secs(120));
    (lines, jsonl_records(&out).1)
}

/// Rows of `host` the fake took per table: (records, chains, counters, snapshots) and the
/// insert requests per table.
fn taken(fake: &FakeClickHouse, host: &str) -> ([usize; 4], [usize; 4]) {
    let (mut rows, mut requests) = ([0; 4], [0; 4]);
    let mark = format!("\"host\":\"{host}\"");
    for r in fake.inserts() {
        let body = String::from_utf8_lossy(&r.body);
        if !body.contains(&mark) {
            continue;
        }
        let t = ["records", "chains", "counters", "snapshots"]
            .iter()
            .position(|t| Some(*t) == r.table.as_deref())
            .expect("a fleet table");
        rows[t] += r.rows();
        requests[t] += 1;
    }
    (rows, requests)
}

/// The windows' nanoseconds the `snapshots` rows of `host` cover, and the JSONL's.
fn covered(fake: &FakeClickHouse, host: &str, snaps: &[serde_json::Value]) -> (u64, u64) {
    let mark = format!("\"host\":\"{host}\"");
    let mut rows = 0;
    for r in fake.inserts() {
        if r.table.as_deref() != Some("snapshots") {
            continue;
        }
        for l in String::from_utf8_lossy(&r.body).lines() {
            if l.contains(&mark) {
                let v: serde_json::Value = serde_json::from_str(l).expect("row");
                rows += v["time_ns"].as_u64().expect("time_ns")
                    - v["window_start_ns"].as_u64().expect("window_start_ns");
            }
        }
    }
    let w = |s: &serde_json::Value, k: &str| s["window"][k].as_u64().expect("window ns");
    let jsonl = snaps
        .iter()
        .map(|s| w(s, "end_unix_ns") - w(s, "start_unix_ns"))
        .sum();
    (rows, jsonl)
}

#[test]
fn idle_windows_send_no_insert_only_heartbeats() {
    let mut g = Guard::new("pg-fleet-ingest-idle");
    let replay = g.dir.join("idle.jsonl");
    const IDLE: usize = 40;
    with_idle_tail(&replay, IDLE);
    let fake = FakeClickHouse::start("18.16.1");

    // 40 idle windows of 100 ms (4 s) after the recording, heartbeat 1 s
    let (_, snaps) = collect(
        &mut g,
        &fake,
        "idle-hb",
        &replay,
        &["--clickhouse-heartbeat", "1s"],
    );
    let (rows, requests) = taken(&fake, "idle-hb");
    let (records, _) = jsonl_records(&g.dir.join("idle-hb.jsonl"));
    let w = |s: &serde_json::Value, k: &str| s["window"][k].as_u64().expect("window ns");
    // a window with something in it, the first and the final one are rows; the others idle
    let (busy, idle): (Vec<&serde_json::Value>, Vec<&serde_json::Value>) =
        snaps.iter().partition(|s| {
            s["final"] == true
                || s["snapshot"] == 0
                || s["records"].as_array().is_some_and(|r| !r.is_empty())
                || s["chains"].as_array().is_some_and(|c| !c.is_empty())
        });
    let busy = busy.len();
    let idle_s = idle
        .iter()
        .map(|s| w(s, "end_unix_ns") - w(s, "start_unix_ns"))
        .sum::<u64>() as f64
        / 1e9;
    eprintln!(
        "heartbeat 1s: {} windows ({busy} with something in them, the first or the final; {} \
         idle over {idle_s:.1} s): rows {rows:?}, insert requests {requests:?}",
        snaps.len(),
        idle.len()
    );
    assert!(idle.len() >= IDLE);
    assert_eq!(rows[0], records, "every record once");
    // the idle windows made no records/chains/counters insert, and a snapshots row only as
    // a heartbeat: about one per second of idle time (the first after a full second)
    let beats = rows[3] - busy;
    assert!(
        (idle_s as usize).saturating_sub(1) <= beats && beats <= idle_s as usize + 1,
        "{beats} heartbeats in {idle_s:.1} s of idle windows"
    );
    assert!(requests[3] <= rows[3] && requests.iter().sum::<usize>() <= 4 * busy + beats);
    let (cov_rows, cov_jsonl) = covered(&fake, "idle-hb", &snaps);
    assert_eq!(
        cov_rows, cov_jsonl,
        "the rows' windows add up to the time reported"
    );
    // 18.16 has no async_insert: plain INSERTs
    assert!(fake
        .inserts()
        .iter()
        .all(|r| !r.path.contains("async_insert")));
    assert!(fake.all().iter().any(|r| r.path.contains("version")));

    // heartbeat 0s: one snapshots row per window, as before
    let (_, snaps0) = collect(
        &mut g,
        &fake,
        "idle-0",
        &replay,
        &["--clickhouse-heartbeat", "0s"],
    );
    let (rows0, _) = taken(&fake, "idle-0");
    eprintln!("heartbeat 0s: {} windows: rows {rows0:?}", snaps0.len());
    assert_eq!(rows0[3], snaps0.len());
    assert_eq!(rows0[..3], rows[..3]);
}

#[test]
fn an_unreadable_server_version_means_plain_inserts_and_one_warning() {
    let mut g = Guard::new("pg-fleet-ingest-version");
    let fake = FakeClickHouse::start("<html>proxy</html>");
    let (lines, _) = collect(
        &mut g,
        &fake,
        "odd-version",
        &data("rxe-6.12.replay.jsonl"),
        &[],
    );
    let warned: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("is not MAJOR.MINOR: plain INSERTs"))
        .collect();
    assert_eq!(warned.len(), 1, "{lines:#?}");
    let inserts = fake.inserts();
    assert!(!inserts.is_empty());
    assert!(inserts.iter().all(|r| !r.path.contains("async_insert")));
    let (rows, _) = taken(&fake, "odd-version");
    let (records, _) = jsonl_records(&g.dir.join("odd-version.jsonl"));
    assert_eq!(rows[0], records);
}

/// Schema drift (issue 26, bad input): Debian's 18.16 whose `chains` table lacks a column the
/// rows carry refuses every batch's chains. The collector names the table and the column,
/// keeps those batches spooled (nothing quarantined, nothing lost: the refusal is the
/// table's, not a batch's), and the other tables take their rows.
#[test]
fn a_table_missing_a_column_is_named_and_its_rows_stay_spooled() {
    let mut g = Guard::new("pg-fleet-ingest-drift");
    let ch = common::servers::ClickHouse::start(&mut g);
    ch.create_tables(&[]);
    ch.query("ALTER TABLE probegen.chains DROP COLUMN owner")
        .expect("drop column");
    let out = g.dir.join("drift.jsonl");
    let spool = g.dir.join("spool");
    let (m, r, o, sp, url) = (
        manifest(),
        path(&data("rxe-6.12.replay.jsonl")),
        path(&out),
        path(&spool),
        ch.url(),
    );
    let (i, rx) = spawn_collector(
        &mut g,
        "drift",
        &[
            "--manifest",
            &m,
            "--replay",
            &r,
            "--out",
            &o,
            "--host",
            "drift",
            "--clickhouse",
            &url,
            "--clickhouse-spool",
            &sp,
            "--clickhouse-flush",
            "2s",
        ],
    );
    let lines = wait_exit(&mut g, i, &rx, Duration::from_secs(60));
    let (records, snaps) = jsonl_records(&out);
    let said: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("table `chains`") && l.contains("owner"))
        .collect();
    eprintln!("drift: {said:?}");
    assert!(!said.is_empty(), "{lines:#?}");
    let last = snaps.last().expect("snapshots");
    let st = &last["clickhouse"];
    assert_eq!(
        (
            st["quarantined_batches"].as_u64(),
            st["lost_records"].as_u64()
        ),
        (Some(0), Some(0)),
        "{st}"
    );
    assert!(
        common::replays::spooled(&spool) > 0,
        "the batches with chains wait in the spool"
    );
    assert_eq!(
        ch.count("SELECT count() FROM probegen.records FINAL WHERE host = 'drift'"),
        records as u64
    );
    assert_eq!(
        ch.count("SELECT count() FROM probegen.chains WHERE host = 'drift'"),
        0
    );
}
