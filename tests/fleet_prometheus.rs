//! The shipped Prometheus rules and examples (`deploy/prometheus/`):
//!
//! * `promtool test rules` on their unit tests, `promtool check config` on the example
//!   prometheus.yml, `amtool` on the Alertmanager example: every owner reaches its receiver;
//! * Debian's real `prometheus` with the shipped rules scrapes two collectors on loopback
//!   (replays: a healthy host, and a host in a failure storm) and the early-warning alert is
//!   read back firing, for the storm host only, through the HTTP API.
//!
//! A missing `prometheus`, `promtool` or `amtool` (Debian packages `prometheus` and
//! `prometheus-alertmanager`, installed by `scripts/install-deps.sh`) fails the tests.

// A test reads as one scenario from setup to assertions; the 80-line limit is for the code.
#![allow(clippy::too_many_lines)]

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::replays::write_storm;
use common::servers::{
    data, http_get, metrics_address, prom_query, server_bin, spawn_collector, start_prometheus,
    tail, Guard,
};

fn deploy(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy/prometheus")
        .join(name)
}

fn run(bin: &Path, args: &[&str]) -> (bool, String) {
    let o = Command::new(bin)
        .args(args)
        .current_dir(deploy(""))
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.success(), text)
}

#[test]
fn promtool_unit_tests_and_example_configs() {
    let promtool = server_bin("promtool", "PROBEGEN_PROMTOOL", "/usr/bin", "prometheus");
    let (ok, out) = run(&promtool, &["test", "rules", "probegen-rules.test.yml"]);
    assert!(ok && out.contains("SUCCESS"), "promtool test rules:\n{out}");
    let (ok, out) = run(&promtool, &["check", "rules", "probegen-rules.yml"]);
    assert!(ok && out.contains("SUCCESS: 24 rules found"), "{out}");
    // tickets by spread (issue 24): a kernel regression, one host's failure
    let (ok, out) = run(&promtool, &["test", "rules", "probegen-tickets.test.yml"]);
    assert!(ok && out.contains("SUCCESS"), "promtool test rules:\n{out}");
    let (ok, out) = run(&promtool, &["check", "rules", "probegen-tickets.yml"]);
    assert!(ok && out.contains("SUCCESS: 5 rules found"), "{out}");
    let (ok, out) = run(&promtool, &["check", "config", "prometheus.yml"]);
    assert!(ok, "promtool check config:\n{out}");

    let amtool = server_bin(
        "amtool",
        "PROBEGEN_AMTOOL",
        "/usr/bin",
        "prometheus-alertmanager",
    );
    let (ok, out) = run(&amtool, &["check-config", "alertmanager.yml"]);
    assert!(ok, "amtool check-config:\n{out}");
    // `amtool config routes test LABELS...`: the receiver an alert with LABELS reaches
    let route = |labels: &[&str]| {
        let mut args = vec!["config", "routes", "test", "--config.file=alertmanager.yml"];
        args.extend(labels);
        let (ok, out) = run(&amtool, &args);
        assert!(ok, "{out}");
        let receiver = out
            .lines()
            .find(|l| !l.starts_with("Warning"))
            .map(str::trim);
        (receiver.map(str::to_string), out)
    };
    for (owner, receiver) in [
        ("application", "ml-platform"),
        ("verbs-core", "kernel-rdma"),
        ("vendor-driver", "nic-vendor"),
        ("device-firmware", "hardware-ops"),
        ("resources", "capacity"),
        ("probegen", "probegen-operators"),
        // a port's retries exceeded again and again (ProbegenPortRetryExceeded)
        ("network", "network-ops"),
    ] {
        let (got, out) = route(&[&format!("owner={owner}")]);
        assert_eq!(got.as_deref(), Some(receiver), "owner={owner}: {out}");
    }
    // a ticket goes where its owner label says, whatever its kind
    for (labels, receiver) in [
        (["ticket=regression", "owner=vendor-driver"], "nic-vendor"),
        (["ticket=regression", "owner=verbs-core"], "kernel-rdma"),
        (["ticket=host", "owner=device-firmware"], "hardware-ops"),
        (["ticket=host", "owner=resources"], "capacity"),
    ] {
        let (got, out) = route(&labels);
        assert_eq!(got.as_deref(), Some(receiver), "{labels:?}: {out}");
    }
    // every owner the collector can give has a route (the enum's names)
    let am = std::fs::read_to_string(deploy("alertmanager.yml")).expect("alertmanager.yml");
    for o in collector::Owner::ALL {
        assert!(am.contains(&format!("owner=\"{o}\"")), "no route for {o}");
    }
}

fn alerts(prom: SocketAddr) -> Vec<serde_json::Value> {
    let (status, body) = http_get(prom, "/api/v1/alerts").expect("GET /api/v1/alerts");
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("alerts json");
    v["data"]["alerts"].as_array().cloned().unwrap_or_default()
}

#[test]
fn storm_host_alert_fires_through_real_prometheus() {
    let mut g = Guard::new("pg-fleet-prometheus");
    let manifest = data("rxe-6.12.manifest.yaml").display().to_string();
    let healthy_out = g.dir.join("healthy.jsonl").display().to_string();
    let storm_out = g.dir.join("storm-out.jsonl").display().to_string();
    // healthy: the guest recording, one window a second, then it keeps serving
    let (_, rx_h) = spawn_collector(
        &mut g,
        "collect healthy",
        &[
            "--manifest",
            &manifest,
            "--replay",
            &data("rxe-6.12.replay.jsonl").display().to_string(),
            "--replay-pace",
            "1s",
            "--out",
            &healthy_out,
            "--metrics",
            "127.0.0.1:0",
            "--linger",
            "600s",
        ],
    );
    let healthy = metrics_address(&rx_h);
    // storm: the recording's failures 600 times, 26 records every 100 ms for a minute
    let storm_file = g.dir.join("storm.jsonl");
    write_storm(&storm_file, 600);
    let (_, rx_s) = spawn_collector(
        &mut g,
        "collect storm",
        &[
            "--manifest",
            &manifest,
            "--replay",
            &storm_file.display().to_string(),
            "--replay-window",
            "26",
            "--replay-pace",
            "100ms",
            "--out",
            &storm_out,
            "--metrics",
            "127.0.0.1:0",
            "--linger",
            "600s",
        ],
    );
    let storm = metrics_address(&rx_s);

    // the shipped rules, with every `for:` shortened to 5 s (the expressions are the shipped
    // ones; the durations are covered by the promtool unit tests)
    let rules = std::fs::read_to_string(deploy("probegen-rules.yml")).expect("rules");
    let shortened: String = rules
        .lines()
        .map(|l| match l.trim_start().strip_prefix("for: ") {
            Some(_) => format!("{}for: 5s", &l[..l.len() - l.trim_start().len()]),
            None => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert_eq!(
        shortened.matches("for: 5s").count(),
        rules.matches("for: ").count()
    );
    std::fs::write(g.dir.join("probegen-rules.yml"), shortened).expect("rules copy");
    // the ticket rules as shipped (no `for:`): they join the real exposition's series
    let tickets = std::fs::read_to_string(deploy("probegen-tickets.yml")).expect("tickets");
    assert!(!tickets.contains("for: "));
    std::fs::write(g.dir.join("probegen-tickets.yml"), tickets).expect("tickets copy");
    let config = g.dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
             rule_files:\n  - {}\n  - {}\n\
             scrape_configs:\n  - job_name: probegen\n    static_configs:\n      - targets: ['{healthy}', '{storm}']\n",
            g.dir.join("probegen-rules.yml").display(),
            g.dir.join("probegen-tickets.yml").display()
        ),
    )
    .expect("prometheus.yml");
    let prom = start_prometheus(&mut g, &config);

    let t0 = Instant::now();
    let firing = loop {
        let firing: Vec<serde_json::Value> = alerts(prom)
            .into_iter()
            .filter(|a| {
                a["labels"]["alertname"] == "ProbegenFailureRateOutlier" && a["state"] == "firing"
            })
            .collect();
        if !firing.is_empty() {
            break firing;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(90),
            "no ProbegenFailureRateOutlier firing in 90 s; alerts: {:#?}; rates: {:?}; hosts: {:?}; log:\n{}",
            alerts(prom),
            prom_query(prom, "probegen:chains:rate5m"),
            prom_query(prom, "probegen:fleet:hosts"),
            tail(&g.dir.join("prometheus.log"))
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    for a in &firing {
        assert_eq!(a["labels"]["instance"], storm.to_string(), "{a}");
    }
    for s in prom_query(prom, "probegen:chains:rate5m").expect("rates") {
        eprintln!(
            "rate {} {} {}: {}/s",
            s["metric"]["instance"], s["metric"]["origin"], s["metric"]["errno"], s["value"][1]
        );
    }
    let mut owners: Vec<String> = firing
        .iter()
        .map(|a| {
            format!(
                "{} {} {}",
                a["labels"]["owner"].as_str().unwrap_or(""),
                a["labels"]["origin"].as_str().unwrap_or(""),
                a["labels"]["errno"].as_str().unwrap_or("")
            )
        })
        .collect();
    owners.sort();
    owners.dedup();
    eprintln!(
        "firing after {:.1} s on {storm} (storm; healthy {healthy} silent): {owners:?}; {}",
        t0.elapsed().as_secs_f64(),
        firing[0]["annotations"]["summary"]
    );
    // the storm's origins are the recording's: the caller's bad address and the driver's
    // checks, each routed to its owner
    let known = [
        "application ib_umem_get EFAULT",
        "vendor-driver rxe_qp_chk_init EINVAL",
        "vendor-driver rxe_qp_from_attr EINVAL",
    ];
    for o in &owners {
        assert!(known.contains(&o.as_str()), "unexpected alert {o}");
    }
    // the same alert through the query API (ALERTS series)
    let series = prom_query(
        prom,
        "ALERTS{alertname=\"ProbegenFailureRateOutlier\",alertstate=\"firing\"}",
    )
    .expect("ALERTS");
    assert!(!series.is_empty());
    assert!(series
        .iter()
        .all(|s| s["metric"]["instance"] == storm.to_string()));
    // the ticket rules on the real exposition: the storm host's three failures (the healthy
    // host's counters were final before the first scrape: no increase), each with the
    // origin's module and the host's kernel (probegen_kernel_info: the recording's)
    let t0 = Instant::now();
    let failing = loop {
        let f = prom_query(prom, "probegen:ticket:failing_host").unwrap_or_default();
        if f.len() >= 3 || t0.elapsed() > Duration::from_secs(30) {
            break f;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let mut seen: Vec<String> = failing
        .iter()
        .map(|s| {
            let m = &s["metric"];
            assert_eq!(m["instance"], storm.to_string(), "{s}");
            format!(
                "{} {} {} {}",
                m["module"], m["origin"], m["errno"], m["kernel"]
            )
        })
        .collect();
    seen.sort();
    eprintln!("probegen:ticket:failing_host: {seen:#?}");
    assert_eq!(seen.len(), 3, "{failing:#?}");
    for s in &seen {
        assert!(s.ends_with("\"6.12.117+deb12-amd64\""), "{s}");
    }
    assert!(seen
        .iter()
        .any(|s| s.starts_with("\"rdma_rxe\" \"rxe_qp_chk_init\" \"EINVAL\"")));
    let hosts = prom_query(prom, "probegen:ticket:hosts").expect("ticket hosts");
    assert_eq!(hosts.len(), 3, "{hosts:#?}");
    assert!(hosts.iter().all(|s| s["value"][1] == "1"), "{hosts:#?}");
}
