//! The good-trace baseline end to end: the snapshots `collect --baseline` wrote in the
//! Soft-RoCE qemu testbed (`scripts/e2e-baseline.sh SERIES`, workload
//! `tests/e2e/verbs_baseline.c`, hook `scripts/e2e/baseline-hook.sh`). Ignored in a plain
//! `cargo test`: it needs the run's outputs (`PROBEGEN_E2E_OUT`), and a missing one fails.
//!
//! What it holds the run to (issue 25's proof):
//! * the baseline is on and says how it traces: fsession on the handlers where the kernel has
//!   it (7.2; each handler's attach status says `fsession`), fentry+fexit with task storage
//!   elsewhere (6.12, 6.1);
//! * the handlers that succeeded many times have success shapes;
//! * the failing reg_mr (EFAULT, deep in ib_umem_get) and the failing modify_qp (EINVAL, the
//!   state check) name where they left the success path: the last shared function, the
//!   success path's next step with its share, the call's own next step, the shape compared;
//!   at different places;
//! * the benign create_qp failure, repeated in five jobs that then succeed, is learned as
//!   expected; the new failures are not;
//! * pinned with `--baseline-entry fentry`, the burst collector traces by fentry+fexit on 7.2
//!   too, and says why fsession is not used;
//! * received + dropped == produced for the trace records in every snapshot, and a burst of
//!   successes that overflows the trace ring drops no failure record;
//! * shapes and bifurcations in call order (issue 36): every shape lists callers before their
//!   callees (the manifest's call graph); the reg_mr the verbs core rejects (an iova whose page
//!   offset is not its start address's: EINVAL in ib_uverbs_reg_mr) left after the handler,
//!   where the successes entered the driver's `rxe_reg_user_mr` and it entered nothing; the
//!   create_qp the driver rejects left after a driver function.

use serde_json::Value;
use std::path::{Path, PathBuf};

fn out_dir() -> PathBuf {
    PathBuf::from(
        std::env::var("PROBEGEN_E2E_OUT")
            .expect("PROBEGEN_E2E_OUT (set by scripts/e2e-baseline.sh)"),
    )
}

fn lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e} (did scripts/e2e-baseline.sh run?)", path.display()));
    text.lines()
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("{}:{}: not JSON: {e}", path.display(), i + 1))
        })
        .collect()
}

fn chains(snaps: &[Value]) -> Vec<&Value> {
    snaps
        .iter()
        .flat_map(|s| s["chains"].as_array().into_iter().flatten())
        .collect()
}

/// The outermost function of a chain (its handler).
fn handler(c: &Value) -> &str {
    c["functions"][0].as_str().unwrap_or("")
}

fn trace_counts_hold(name: &str, snaps: &[Value]) -> Value {
    let mut last = Value::Null;
    for (i, s) in snaps.iter().enumerate() {
        let r = &s["baseline"]["records"];
        assert!(
            r.is_object(),
            "{name} snapshot {i}: no baseline.records: {s}"
        );
        let (p, rcv, d) = (
            r["produced"].as_u64(),
            r["received"].as_u64(),
            r["dropped"].as_u64(),
        );
        let in_flight = r["in_flight"].as_u64().unwrap_or(0);
        assert!(
            r["holds"] == true || in_flight > 0,
            "{name} snapshot {i}: trace records received {rcv:?} + dropped {d:?} != produced {p:?}"
        );
        last = r.clone();
    }
    last
}

/// The baseline's mechanism, trace counts and success shapes; the shape ids.
fn check_shapes(ver: &str, snaps: &[Value]) -> Vec<String> {
    assert!(snaps.len() >= 3, "{ver}: only {} snapshots", snaps.len());
    let last = snaps.last().expect("a snapshot");
    let b = &last["baseline"];
    let mech = b["mechanism"].as_str().unwrap_or("");
    println!("{ver}: baseline mechanism: {mech}");
    // fsession came with 7.0: the kernel's own BTF decides, the attach status records it
    let session = ver.split('.').next().and_then(|m| m.parse::<u32>().ok()) >= Some(7);
    let att = last["attached"].as_array().expect("attached");
    let in_session: Vec<&str> = att
        .iter()
        .filter(|a| a["mechanism"] == "fsession" && a["attached"] == true)
        .filter_map(|a| a["function"].as_str())
        .collect();
    println!("{ver}: handlers attached by fsession: {}", in_session.len());
    if session {
        assert!(
            mech.contains(": fsession on the handlers") && !mech.contains("not used"),
            "{ver}: mechanism `{mech}`"
        );
        assert!(
            in_session.contains(&"ib_uverbs_reg_mr") && in_session.len() >= 10,
            "{ver}: handlers in fsession {in_session:?}"
        );
    } else {
        assert!(
            mech.contains(": fentry+fexit, task storage"),
            "{ver}: mechanism `{mech}`"
        );
        assert!(in_session.is_empty(), "{ver}: fsession on {in_session:?}");
    }

    // the trace records: every snapshot exact, the final one with everything received
    let r = trace_counts_hold("baseline", snaps);
    println!("{ver}: trace records {r}");
    assert!(
        r["produced"].as_u64().unwrap_or(0) >= 180,
        "{ver}: too few traces {r}"
    );
    assert_eq!(r["holds"], true, "{ver}: final trace counts {r}");

    // success shapes of the verbs the workload made succeed 60 times
    let handlers = b["handlers"].as_array().expect("baseline.handlers");
    let by_name = |f: &str| handlers.iter().find(|h| h["function"] == f);
    let reg = by_name("ib_uverbs_reg_mr").expect("ib_uverbs_reg_mr has a baseline");
    assert!(reg["successes"].as_u64().unwrap_or(0) >= 60, "{reg}");
    let shapes: Vec<&str> = handlers
        .iter()
        .flat_map(|h| h["shapes"].as_array().into_iter().flatten())
        .filter_map(|s| s["shape"].as_str())
        .collect();
    for h in handlers {
        println!(
            "{ver}: {} successes {} shapes {} noise {}",
            h["function"],
            h["successes"],
            h["shapes"].as_array().map_or(0, Vec::len),
            h["noise"]
        );
    }

    shapes.iter().map(|s| s.to_string()).collect()
}

/// The failing reg_mr and modify_qp name where they left the success path, at different places.
fn check_bifurcations(ver: &str, all: &[&Value], shapes: &[String]) {
    // the failing calls' bifurcations: the workload's (the testbed's own verbs_fail step makes
    // the same failures before it, while the collector runs)
    let workload = |c: &&Value| c["comm"] == "verbs_baseline";
    let find = |h: &str, errno: &str| {
        all.iter()
            .copied()
            .filter(workload)
            .find(|c| handler(c) == h && c["errno_name"] == errno)
            .unwrap_or_else(|| panic!("{ver}: no chain of {h} with {errno}"))
    };
    let reg_fail = find("ib_uverbs_reg_mr", "EFAULT");
    let modify = all
        .iter()
        .copied()
        .filter(workload)
        .find(|c| handler(c).contains("modify_qp") && c["errno_name"] == "EINVAL")
        .unwrap_or_else(|| panic!("{ver}: no modify_qp EINVAL chain"));
    let mut places = Vec::new();
    for c in [reg_fail, modify] {
        let bf = &c["bifurcation"];
        println!(
            "{ver}: {} -> bifurcation {bf} expected {} ({})",
            c["summary"], c["expected"], c["expected_why"]
        );
        assert!(bf.is_object(), "{ver}: {}: bifurcation {bf}", c["summary"]);
        assert_eq!(bf["path"], "traced", "{ver}: the call's own path: {bf}");
        let after = bf["after"].as_str().expect("after");
        let next = bf["baseline_next"].as_str().expect("baseline_next");
        let share = bf["share"].as_f64().expect("share");
        assert!(share > 0.0 && share <= 1.0, "{bf}");
        assert!(!after.is_empty() && !next.is_empty(), "{bf}");
        assert_ne!(bf["baseline_next"], bf["this_next"], "{bf}");
        assert!(
            shapes.iter().any(|s| bf["shape"] == s.as_str()),
            "{ver}: shape {bf} not in the baseline"
        );
        assert_eq!(
            c["expected"], false,
            "{ver}: a new failure is not expected: {c}"
        );
        places.push((bf["after"].clone(), bf["this_next"].clone()));
    }
    assert_ne!(places[0], places[1], "{ver}: two failures, one bifurcation");
    // reg_mr left the path where a probed function failed with EFAULT
    let this_next = reg_fail["bifurcation"]["this_next"].as_str().unwrap_or("");
    assert!(
        this_next.contains("[EFAULT]"),
        "{ver}: reg_mr's own next step `{this_next}`"
    );
}

/// The benign create_qp failure is learned expected; the table says so.
fn check_expected(ver: &str, all: &[&Value], b: &Value) {
    // the benign create_qp failure: expected once learned from three processes that recovered
    let benign: Vec<&Value> = all
        .iter()
        .copied()
        .filter(|c| {
            let h = handler(c).to_lowercase();
            (h.contains("create_qp") || h.contains("qp_create")) && c["errno_name"] == "EINVAL"
        })
        .collect();
    assert!(
        benign.len() >= 5,
        "{ver}: {} create_qp EINVAL chains",
        benign.len()
    );
    assert_eq!(
        benign[0]["expected"], false,
        "{ver}: the first one is not learned yet"
    );
    let learned = benign
        .iter()
        .find(|c| c["expected"] == true)
        .expect("a learned create_qp failure");
    println!("{ver}: learned: {}", learned["expected_why"]);
    assert!(
        learned["expected_why"]
            .as_str()
            .unwrap_or("")
            .starts_with("learned"),
        "{learned}"
    );
    let table = b["expected"].as_array().expect("baseline.expected");
    assert!(
        table
            .iter()
            .any(|e| e["expected"] == true && e["handler"] == handler(learned)),
        "{table:?}"
    );
}

/// A burst of successes overflows the trace ring and drops no failure record.
fn check_burst(ver: &str, dir: &Path) {
    // the burst: traces overflow their 4 KiB ring, failure records are all there
    let burst = lines(&dir.join("burst.jsonl"));
    let r = trace_counts_hold("burst", &burst);
    println!("{ver}: burst trace records {r}");
    assert!(
        r["dropped"].as_u64().unwrap_or(0) > 0,
        "{ver}: the burst did not overflow the trace ring: {r}"
    );
    let fin = burst.last().expect("burst snapshot");
    // the burst collector is pinned to fentry+fexit (`--baseline-entry fentry`): on a kernel
    // with fsession it says why fsession is not used, and traces all the same
    let mech = fin["baseline"]["mechanism"].as_str().unwrap_or("");
    println!("{ver}: burst mechanism: {mech}");
    assert!(
        mech.contains(": fentry+fexit, task storage"),
        "{ver}: burst mechanism `{mech}`"
    );
    let session = ver.split('.').next().and_then(|m| m.parse::<u32>().ok()) >= Some(7);
    assert_eq!(
        mech.contains("(fsession not used: --baseline-entry fentry)"),
        session,
        "{ver}: burst mechanism `{mech}`"
    );
    assert_eq!(fin["final"], true);
    let inv = &fin["invariant"];
    assert_eq!(inv["ok"], true, "{ver}: failure invariant {inv}");
    let kernel_drops: u64 = burst
        .iter()
        .map(|s| s["drops"]["kernel"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(
        kernel_drops, 0,
        "{ver}: a failure record was dropped during the burst"
    );
    let efault: u64 = std::fs::read_to_string(dir.join("vb-burst.log"))
        .expect("vb-burst.log")
        .lines()
        .filter_map(|l| {
            l.split(" efault=")
                .nth(1)?
                .split(' ')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum();
    let reg_efault: u64 = burst
        .iter()
        .flat_map(|s| s["records"].as_array().into_iter().flatten())
        .filter(|r| r["function"] == "ib_uverbs_reg_mr" && r["errno_name"] == "EFAULT")
        .count() as u64;
    // a return the kernel did not run the probe for (its program already running on that
    // CPU: a task preempted inside it, which 7.x's lazy preemption allows) is reported as
    // missed, never silent
    let reg_missed: u64 = burst
        .iter()
        .flat_map(|s| s["counters"].as_array().into_iter().flatten())
        .filter(|c| c["function"] == "ib_uverbs_reg_mr")
        .map(|c| c["missed"].as_u64().unwrap_or(0))
        .sum();
    let missed: u64 = burst
        .iter()
        .map(|s| {
            s["drops"]["missed"]
                .as_u64()
                .expect("drops.missed in every snapshot")
        })
        .sum();
    println!(
        "{ver}: burst: {efault} failing reg_mr, {reg_efault} records of them, \
         {reg_missed} runs of its probe skipped by the kernel ({missed} of all probes)"
    );
    assert_eq!(
        efault,
        4 * 3,
        "{ver}: the workload's failing calls (4 x 150 calls, every 50th)"
    );
    assert!(
        reg_missed <= missed,
        "{ver}: per-probe missed {reg_missed} > total {missed}"
    );
    assert!(
        reg_efault <= efault && efault - reg_efault <= reg_missed,
        "{ver}: every failure record of the burst arrived, or its return was reported missed: \
         {reg_efault} of {efault} records, {reg_missed} missed"
    );
}

/// The first run's baseline kept in its state file: `baseline show` prints the snapshot's
/// shapes and table; a pin not expected overrides the learned verdict; the burst collector
/// restarted from the file and went on from its counts.
fn check_state(ver: &str, dir: &Path, last: &Value) {
    let b = &last["baseline"];
    let show: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("show.json")).expect("show.json (baseline show)"),
    )
    .unwrap_or_else(|e| panic!("{ver}: show.json: {e}"));
    assert_eq!(show["manifest_hash"], last["manifest_hash"], "{show}");
    let successes = |v: &Value, f: &str| {
        v["handlers"]
            .as_array()
            .and_then(|hs| hs.iter().find(|h| h["function"] == f))
            .and_then(|h| h["successes"].as_u64())
            .unwrap_or(0)
    };
    let reg = successes(b, "ib_uverbs_reg_mr");
    assert_eq!(successes(&show, "ib_uverbs_reg_mr"), reg, "{show}");
    let key = |e: &Value| format!("{}:{}:{}", e["handler"], e["origin"], e["errno_name"]);
    let table = |v: &Value| -> Vec<(String, Value)> {
        v["expected"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| (key(e), e["expected"].clone()))
            .collect()
    };
    assert_eq!(
        table(&show),
        table(b),
        "{ver}: the kept table is the snapshot's"
    );
    println!(
        "{ver}: state file: {} reg_mr successes, {} patterns",
        reg,
        table(&show).len()
    );
    check_pin(ver, dir, &show);
    // the restart
    let log = std::fs::read_to_string(dir.join("burst.log")).expect("burst.log");
    let restored = log
        .lines()
        .find(|l| l.contains("baseline state") && l.contains("restored"))
        .unwrap_or_else(|| panic!("{ver}: the burst collector restored nothing:\n{log}"));
    println!("{ver}: {restored}");
    let burst = lines(&dir.join("burst.jsonl"));
    let first = successes(&burst[0]["baseline"], "ib_uverbs_reg_mr");
    assert!(
        first >= reg,
        "{ver}: after the restart {first} reg_mr successes, before {reg}"
    );
}

/// A pin not expected overrides the learned verdict (`baseline show` on the host, same file).
fn check_pin(ver: &str, dir: &Path, show: &Value) {
    let key = |e: &Value| format!("{}:{}:{}", e["handler"], e["origin"], e["errno_name"]);
    // pinned not expected on the host, from the same file
    let learned = show["expected"]
        .as_array()
        .and_then(|t| t.iter().find(|e| e["expected"] == true))
        .unwrap_or_else(|| panic!("{ver}: no learned expected pattern in {show}"));
    let pin = format!(
        "{}:{}:{}",
        learned["handler"].as_str().unwrap_or(""),
        learned["origin"].as_str().unwrap_or(""),
        learned["errno_name"].as_str().unwrap_or("")
    );
    let agent = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/probegen-agent");
    let out = std::process::Command::new(&agent)
        .args([
            "baseline",
            "show",
            "--json",
            "--baseline-not-expected",
            &pin,
            "--state",
        ])
        .arg(dir.join("baseline.state.first"))
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e} (scripts/e2e-baseline.sh builds it)",
                agent.display()
            )
        });
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pinned: Value = serde_json::from_slice(&out.stdout).expect("show --json");
    let e = pinned["expected"]
        .as_array()
        .and_then(|t| t.iter().find(|e| key(e) == key(learned)))
        .expect("the pinned pattern");
    assert_eq!(e["expected"], false, "{e}");
    assert_eq!(e["why"], "pinned not expected in the configuration", "{e}");
}

/// The handler mix per job: the five benign jobs (own cgroups) with their create_qp calls.
fn check_jobs(ver: &str, b: &Value) {
    let jobs = b["jobs"].as_array().expect("baseline.jobs");
    for j in jobs {
        println!(
            "{ver}: job cgroup {} {}: {} differs {}",
            j["cgroup_id"], j["comm"], j["verbs"], j["differs"]
        );
    }
    let with_qp = jobs
        .iter()
        .filter(|j| {
            j["verbs"]
                .as_array()
                .is_some_and(|v| v.iter().any(|v| v["verb"] == "create_qp"))
        })
        .count();
    assert!(with_qp >= 5, "{ver}: {with_qp} jobs with create_qp");
}

/// The probe table of the run's manifest (its call graph).
fn table() -> collector::ProbeTable {
    let path = std::env::var("PROBEGEN_E2E_MANIFEST")
        .expect("PROBEGEN_E2E_MANIFEST (set by scripts/e2e-baseline.sh)");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    collector::ProbeTable::from_manifest_text(&text, &path)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Every shape lists a caller before its callees: no function is called (directly or
/// through unprobed functions) by one listed after it, unless the two call each other.
fn check_call_order(ver: &str, b: &Value) {
    let t = table();
    let ids = |f: &str| -> Vec<u32> {
        let f = f.split(" [").next().unwrap_or(f);
        t.probes
            .iter()
            .filter(|p| p.function == f)
            .map(|p| p.id)
            .collect()
    };
    let calls = |a: &str, b: &str| {
        ids(a)
            .iter()
            .any(|&x| ids(b).iter().any(|&y| t.relation.calls(x, y)))
    };
    let mut checked = 0;
    for h in b["handlers"].as_array().expect("baseline.handlers") {
        for s in h["shapes"].as_array().into_iter().flatten() {
            let f: Vec<&str> = s["functions"]
                .as_array()
                .expect("functions")
                .iter()
                .filter_map(Value::as_str)
                .collect();
            for (i, a) in f.iter().enumerate() {
                for later in &f[i + 1..] {
                    assert!(
                        !calls(later, a) || calls(a, later),
                        "{ver}: {}: shape {} lists {a} before its caller {later}: {f:?}",
                        h["function"],
                        s["shape"]
                    );
                }
            }
            checked += 1;
        }
    }
    let reg = b["handlers"]
        .as_array()
        .and_then(|hs| hs.iter().find(|h| h["function"] == "ib_uverbs_reg_mr"))
        .expect("reg_mr's baseline");
    let main = &reg["shapes"][0]["functions"];
    println!("{ver}: {checked} shapes in call order; reg_mr's most common: {main}");
    assert_eq!(main[0], "rxe_reg_user_mr", "{ver}: {main}");
}

/// The reg_mr the verbs core rejects, the create_qp the driver rejects: where they left.
fn check_rejections(ver: &str, all: &[&Value], snap: &Value) {
    let core = all
        .iter()
        .copied()
        .find(|c| handler(c) == "ib_uverbs_reg_mr" && c["errno_name"] == "EINVAL")
        .unwrap_or_else(|| panic!("{ver}: no ib_uverbs_reg_mr EINVAL chain (misaligned iova)"));
    let bf = &core["bifurcation"];
    println!("{ver}: {} -> bifurcation {bf}", core["summary"]);
    assert_eq!(
        core["functions"],
        serde_json::json!(["ib_uverbs_reg_mr"]),
        "{core}"
    );
    assert_eq!(bf["path"], "traced", "{ver}: {bf}");
    assert_eq!(bf["after"], "ib_uverbs_reg_mr", "{ver}: {bf}");
    assert_eq!(bf["baseline_next"], "rxe_reg_user_mr", "{ver}: {bf}");
    assert_eq!(bf["baseline_next_layer"], "vendor", "{ver}: {bf}");
    assert!(bf["this_next"].is_null(), "{ver}: {bf}");
    assert!(bf["this_next_layer"].is_null(), "{ver}: {bf}");
    // the create_qp past the device's capabilities: rejected in the driver
    let driver = all
        .iter()
        .copied()
        .find(|c| {
            let h = handler(c).to_lowercase();
            (h.contains("create_qp") || h.contains("qp_create"))
                && c["errno_name"] == "EINVAL"
                && c["bifurcation"].is_object()
        })
        .unwrap_or_else(|| panic!("{ver}: no create_qp EINVAL chain with a bifurcation"));
    let bf = &driver["bifurcation"];
    println!("{ver}: {} -> bifurcation {bf}", driver["summary"]);
    let after = bf["after"].as_str().unwrap_or("");
    let module = snap["attached"]
        .as_array()
        .and_then(|a| a.iter().find(|p| p["function"] == after))
        .map_or(Value::Null, |p| p["module"].clone());
    assert_eq!(
        module, "rdma_rxe",
        "{ver}: the last common function `{after}` is the driver's: {bf}"
    );
    assert_eq!(bf["path"], "traced", "{ver}: {bf}");
    assert_eq!(bf["baseline_next_layer"], "vendor", "{ver}: {bf}");
    assert!(
        bf["this_next"]
            .as_str()
            .is_some_and(|n| n.ends_with("[EINVAL]")),
        "{ver}: {bf}"
    );
}

fn check(ver: &str) {
    let dir = out_dir();
    let snaps = lines(&dir.join("baseline.jsonl"));
    let shapes = check_shapes(ver, &snaps);
    let all = chains(&snaps);
    check_bifurcations(ver, &all, &shapes);
    let b = &snaps.last().expect("a snapshot")["baseline"];
    check_call_order(ver, b);
    check_rejections(ver, &all, snaps.last().expect("a snapshot"));
    check_expected(ver, &all, b);
    check_jobs(ver, b);
    check_burst(ver, &dir);
    check_state(ver, &dir, snaps.last().expect("a snapshot"));
}

#[test]
#[ignore = "needs the outputs of scripts/e2e-baseline.sh <series>"]
fn e2e_baseline_series() {
    let ver = std::env::var("PROBEGEN_E2E_SERIES")
        .expect("PROBEGEN_E2E_SERIES (set by scripts/e2e-baseline.sh)");
    check(&ver);
}
