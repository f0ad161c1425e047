//! Real client: Debian's `prometheus` server scrapes `probegen collect --replay ... --metrics`
//! on loopback every second, and `probegen_failures_total` read back through the Prometheus
//! HTTP API (`/api/v1/query`) must equal the replay's kernel failure counters, per probe.
//!
//! The replay is the guest recording `collector/tests/data/rxe-6.12.replay.jsonl`; the expected
//! values come from its last `counters` line (cumulative kernel totals) and the manifest's
//! probe ids. The collector keeps serving after the replay with `--linger`. Both processes are
//! killed on every path (a Drop guard). Without the `prometheus` binary (Debian package
//! `prometheus`, installed by `scripts/install-deps.sh`) the test fails; it never skips.

// A test reads as one scenario from setup to assertions; the 80-line limit is for the code.
#![allow(clippy::too_many_lines)]

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::Value;

use common::servers::{
    data, metrics_address, prom_query as query, prometheus_bin, sample_value, spawn_collector,
    start_prometheus, tail, Guard,
};

const JOB: &str = "probegen";

/// Per probe (function, module): the failures of the replay's last `counters` line.
fn expected_failures() -> BTreeMap<(String, String), u64> {
    let manifest: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(data("rxe-6.12.manifest.yaml")).expect("manifest"),
    )
    .expect("manifest yaml");
    let mut by_id = BTreeMap::new();
    for p in manifest["probes"].as_sequence().expect("probes") {
        let id = p["id"].as_u64().expect("id");
        let f = p["function"].as_str().expect("function").to_string();
        let m = p["module"].as_str().expect("module").to_string();
        by_id.insert(id, (f, m));
    }
    let replay = std::fs::read_to_string(data("rxe-6.12.replay.jsonl")).expect("replay");
    let last: Value = replay
        .lines()
        .rfind(|l| l.starts_with("{\"counters\""))
        .map(|l| serde_json::from_str(l).expect("counters line"))
        .expect("the replay has counters lines");
    let mut want = BTreeMap::new();
    for (id, n) in last["counters"]["failures"].as_object().expect("failures") {
        let id: u64 = id.parse().expect("probe id");
        let key = by_id
            .get(&id)
            .unwrap_or_else(|| panic!("probe {id} of the replay is not in the manifest"))
            .clone();
        assert!(
            want.insert(key.clone(), n.as_u64().expect("count"))
                .is_none(),
            "two probes labelled {key:?}"
        );
    }
    want
}

fn snapshots_expected() -> u64 {
    let replay = std::fs::read_to_string(data("rxe-6.12.replay.jsonl")).expect("replay");
    replay
        .lines()
        .filter(|l| l.starts_with("{\"counters\""))
        .count() as u64
        + 1
}

#[test]
fn prometheus_scrapes_failures_total() {
    prometheus_bin();
    let want = expected_failures();
    assert!(
        want.values().any(|&n| n > 0),
        "the replay has no failures: nothing to check"
    );
    let want_snapshots = snapshots_expected();

    let mut g = Guard::new("pg-prometheus");
    let dir = g.dir.clone();

    // 1. the collector on the replay, serving /metrics on an ephemeral loopback port and
    //    lingering after the replay (killed by the guard long before the linger ends)
    let (_, rx) = spawn_collector(
        &mut g,
        "probegen collect",
        &[
            "--manifest",
            &data("rxe-6.12.manifest.yaml").display().to_string(),
            "--replay",
            &data("rxe-6.12.replay.jsonl").display().to_string(),
            "--out",
            &dir.join("snapshots.jsonl").display().to_string(),
            "--metrics",
            "127.0.0.1:0",
            "--linger",
            "300s",
        ],
    );
    let target = metrics_address(&rx);
    assert!(target.ip().is_loopback(), "{target}");

    // 2. Prometheus on loopback, scraping the collector every second
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: {JOB}\n    static_configs:\n      - targets: ['{target}']\n"
        ),
    )
    .expect("write prometheus.yml");
    let log = dir.join("prometheus.log");
    let prom = start_prometheus(&mut g, &config);

    // 3. wait for a scrape taken after the replay's final snapshot: then the counters are final
    let t0 = Instant::now();
    loop {
        let last = match query(prom, &format!("probegen_snapshots_total{{job=\"{JOB}\"}}")) {
            Ok(v) if v.len() == 1 && sample_value(&v[0]) == want_snapshots as f64 => break,
            Ok(v) => format!("{v:?}"),
            Err(e) => e,
        };
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no scrape with probegen_snapshots_total {want_snapshots} in 60 s; last answer: \
             {last}; up: {:?}; prometheus log:\n{}",
            query(prom, &format!("up{{job=\"{JOB}\"}}")),
            tail(&log)
        );
        std::thread::sleep(Duration::from_millis(250));
    }

    // 4. probegen_failures_total through the HTTP API, per probe
    let series = query(prom, &format!("probegen_failures_total{{job=\"{JOB}\"}}"))
        .expect("query probegen_failures_total");
    let mut got = BTreeMap::new();
    for s in &series {
        let m = &s["metric"];
        assert_eq!(m["instance"], target.to_string(), "{s}");
        let key = (
            m["function"].as_str().expect("function label").to_string(),
            m["module"].as_str().expect("module label").to_string(),
        );
        let v = sample_value(s);
        assert!(v >= 0.0 && v.fract() == 0.0, "{s}");
        assert!(got.insert(key.clone(), v as u64).is_none(), "{key:?} twice");
    }
    assert_eq!(
        got, want,
        "probegen_failures_total in Prometheus vs the replay"
    );
    let total: u64 = got.values().sum();
    eprintln!(
        "prometheus {prom} scraped {target}: {} series of probegen_failures_total, {total} \
         failures in all, equal to the replay",
        got.len()
    );
    assert!(
        g.exited(0).is_none(),
        "the collector exited while lingering"
    );
}
