//! Today's ClickHouse: the DDL of `probegen schema --clickhouse` and every shipped fleet
//! question (`deploy/clickhouse/*.sql`) on ClickHouse 26.9, the engine of `chdb-core` from PyPI
//! run in process (`scripts/install-chdb.sh` installs it in a venv under the cache;
//! `$PROBEGEN_CHDB_PYTHON` names another python with it).
//!
//! The data is what the collectors really send: the fleet questions' scenario
//! (tests/common/fleet_scenario.rs, the one tests/fleet_clickhouse.rs runs on 18.16) sends to
//! a fake ClickHouse on loopback that says it is 26.9 and keeps every INSERT's body; the bodies
//! are loaded into chdb as the same `INSERT ... FORMAT JSONEachRow`, and the questions must
//! give the answers 18.16 gives. The fake also shows the sender used asynchronous inserts
//! for a server that has them.
//!
//! Without the venv the test fails naming the script; it never skips.

mod common;

use std::path::Path;

use common::chdb::{chdb_answers, schema, tsv};
use common::fake_clickhouse::FakeClickHouse;
use common::fleet_scenario;
use common::servers::Guard;
use common::spread;

#[test]
fn current_clickhouse_loads_the_schema_and_answers_every_question() {
    let mut g = Guard::new("pg-fleet-ch-current");
    let fake = FakeClickHouse::start("26.9.2.1");
    fleet_scenario::run(&mut g, &fake.url());
    let inserts = fake.inserts();
    assert!(!inserts.is_empty(), "the collectors sent nothing");
    // the server said 26.9: every insert asks for an asynchronous insert, acknowledged once
    // written; no insert carries an empty body
    for r in &inserts {
        assert!(
            r.path.ends_with("&async_insert=1&wait_for_async_insert=1"),
            "{}",
            r.path
        );
        assert!(r.rows() > 0, "an empty insert: {}", r.path);
    }
    let current = schema(&["--server-version", "26.9"]);
    assert_ne!(
        current,
        schema(&[]),
        "a current server gets its own types and codecs"
    );
    let answers = chdb_answers(&g.dir, &current, &inserts);
    // every shipped question runs, and gives the 18.16 answers on the same workload
    let shipped: Vec<String> =
        std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/clickhouse"))
            .expect("deploy/clickhouse")
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter_map(|n| n.strip_suffix(".sql").map(str::to_string))
            .collect();
    for q in &shipped {
        assert!(
            answers.join(format!("{q}.tsv")).is_file(),
            "{q}.sql not run"
        );
    }
    let asked = std::cell::RefCell::new(Vec::new());
    fleet_scenario::check(&|name| {
        asked.borrow_mut().push(name.to_string());
        let rows = tsv(&answers.join(format!("{name}.tsv")));
        eprintln!("26.9 {name}.sql: {} rows", rows.len());
        rows
    });
    let mut asked = asked.into_inner();
    asked.sort();
    let mut shipped = shipped;
    shipped.sort();
    assert_eq!(
        asked, shipped,
        "every shipped question is held to an answer"
    );
    let counts = tsv(&answers.join("counts.tsv"));
    let sent: usize = inserts
        .iter()
        .filter(|r| r.table.as_deref() == Some("records"))
        .map(common::fake_clickhouse::Request::rows)
        .sum();
    assert_eq!(counts[0], ["records".to_string(), sent.to_string()]);
    eprintln!(
        "26.9 rows under FINAL: {counts:?}; parts: {:?}",
        tsv(&answers.join("parts.tsv"))
    );
}

/// Tickets by spread (issue 24 item 3) on 26.9: the 18.16 test's fleet
/// (tests/common/spread.rs), the same tickets.
#[test]
fn current_clickhouse_tickets_by_spread() {
    let mut g = Guard::new("pg-fleet-ch-current-spread");
    let fake = FakeClickHouse::start("26.9.2.1");
    spread::run(&mut g, &fake.url());
    let current = schema(&["--server-version", "26.9"]);
    let answers = chdb_answers(&g.dir, &current, &fake.inserts());
    spread::check(&tsv(&answers.join("tickets.tsv")));
}
