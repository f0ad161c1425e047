//! The agent's provider stage in the qemu testbed (`scripts/e2e-providers.sh`, ignored in a
//! plain `cargo test`): `probegen-agent collect --provider-probes` on Debian's stock kernel
//! found the library a job mapped, probed bookworm's build at the table's offset, recorded the
//! job's three error completions of one QP as one entry counted three times with its job and
//! the peer the kernel kept at the QP's RTR, and named a copy whose build-id no table lists
//! without probing it (its call left no entry); a library replaced under a running job (a new
//! file renamed over it) has its probe detached and the new build named, never probed.
//!
//! Environment (set by the script): PROBEGEN_E2E_OUT (the guest's /out), PROBEGEN_E2E_LIBRARY
//! and PROBEGEN_E2E_UNKNOWN (the two libraries' paths in the guest), PROBEGEN_E2E_UNKNOWN_QPN.
//! The job's QP, its peer and its process: the `VD provider` line of job.log.

use std::path::PathBuf;

use serde_json::Value;

fn env(name: &str) -> String {
    std::env::var(name)
        .unwrap_or_else(|_| panic!("{name} is not set: run scripts/e2e-providers.sh"))
}

fn hex(name: &str) -> u64 {
    let v = env(name);
    u64::from_str_radix(v.trim_start_matches("0x"), 16).unwrap_or_else(|_| panic!("{name}={v}"))
}

#[test]
#[ignore = "needs the qemu testbed's output: scripts/e2e-providers.sh"]
fn the_agent_probes_the_jobs_provider_and_names_the_unknown_build() {
    let out = PathBuf::from(env("PROBEGEN_E2E_OUT"));
    let (library, unknown) = (env("PROBEGEN_E2E_LIBRARY"), env("PROBEGEN_E2E_UNKNOWN"));
    let unknown_qpn = hex("PROBEGEN_E2E_UNKNOWN_QPN");
    let vd = vd_line(&out);
    let text = std::fs::read_to_string(out.join("snapshots.jsonl")).expect("snapshots.jsonl");
    let snaps: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a snapshot line"))
        .collect();
    let last = snaps.last().expect("at least one snapshot");
    assert_eq!(last["final"], true, "the last snapshot is the final one");
    let p = &last["providers"];
    println!("providers: {p}");
    libraries(&snaps, &library, &unknown);
    // the job's QP: one entry, three completions, its status and reason, its job
    let qps = p["qps"].as_array().expect("qps");
    let entry = qps
        .iter()
        .find(|q| q["qpn"].as_u64() == Some(vd.qpn))
        .unwrap_or_else(|| panic!("no entry for QP {:#x}: {qps:?}", vd.qpn));
    assert_eq!(entry["count"], 3, "three completions, one entry");
    assert_eq!(entry["status"], "IBV_WC_LOC_PROT_ERR");
    assert_eq!(
        (
            entry["syndrome"].as_u64(),
            entry["vendor_syndrome"].as_u64()
        ),
        (Some(4), Some(0x99))
    );
    assert_eq!(entry["side"], "requester");
    assert_eq!(entry["comm"], "verbs_dataplane");
    assert_eq!(entry["job"]["SLURM_JOB_ID"], "prov-77", "the job: {entry}");
    assert_eq!(entry["pid"].as_u64(), Some(vd.pid), "the calling process");
    // the peer the kernel kept at the QP's RTR (the set's peer probe)
    let peer = &entry["peer"];
    assert_eq!(
        peer["qpn"].as_u64(),
        Some(vd.peer),
        "the peer's QP number: {entry}"
    );
    assert_eq!(
        peer["gid"].as_str(),
        Some(vd.gid.as_str()),
        "the peer's GID: {entry}"
    );
    assert_eq!(peer["gid_type"], "roce-v2", "{entry}");
    assert_eq!(peer["qp_type"], "RC", "{entry}");
    // the unknown build's call was never probed: no entry
    assert!(
        qps.iter().all(|q| q["qpn"].as_u64() != Some(unknown_qpn)),
        "the unresolved library was probed: {qps:?}"
    );
    // the accounting, exact at the end
    let (seen, received, dropped) = (
        p["seen"].as_u64(),
        p["received"].as_u64(),
        p["dropped"].as_u64(),
    );
    assert_eq!(
        seen,
        Some(received.unwrap_or(0) + dropped.unwrap_or(0)),
        "seen == received + dropped: {p}"
    );
    assert!(
        seen >= Some(3),
        "the job's three completions were seen: {p}"
    );
    assert_eq!(p["by_status"]["IBV_WC_LOC_PROT_ERR"].as_u64(), received);
    agent_lines(&out, &library, &unknown);
    replaced(&out, qps);
    println!(
        "provider stage: QP {:#x} count {} status {} job {} peer {}; seen {seen:?} = received {received:?} + dropped {dropped:?}",
        vd.qpn,
        entry["count"], entry["status"], entry["job"], entry["peer"]
    );
}

/// Bookworm's library probed at the table's offset (while the job mapped it), the copy with
/// an unknown build-id named and left alone.
fn libraries(snaps: &[Value], library: &str, unknown: &str) {
    let all: Vec<Value> = snaps
        .iter()
        .flat_map(|s| {
            s["providers"]["libraries"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .collect();
    let probed = all
        .iter()
        .find(|l| l["path"] == library && l["state"]["state"] == "probed")
        .unwrap_or_else(|| panic!("{library} never probed: {all:?}"));
    assert_eq!(probed["state"]["offset"], 40992, "bookworm's offset");
    assert_eq!(
        probed["build_id"],
        "800c6ca768baceb592682738a03643f11379cbdd"
    );
    let named = all
        .iter()
        .find(|l| l["path"] == unknown)
        .unwrap_or_else(|| panic!("{unknown} never named: {all:?}"));
    assert_eq!(named["state"]["state"], "unresolved");
    assert_eq!(
        named["build_id"],
        "800c6ca768baceb592682738a03643f11379cbff"
    );
}

/// The agent's log names both libraries with their build-ids.
fn agent_lines(out: &std::path::Path, library: &str, unknown: &str) {
    let log = std::fs::read_to_string(out.join("collect.log")).expect("collect.log");
    assert!(
        log.lines()
            .any(|l| l.contains(library) && l.contains("uprobe on dump_cqe at file offset 0xa020")),
        "no probe line for {library}:\n{log}"
    );
    assert!(
        log.lines().any(|l| l.contains(unknown)
            && l.contains("800c6ca768baceb592682738a03643f11379cbff")
            && l.contains("not probed")),
        "no line naming the unknown build:\n{log}"
    );
}

/// The job's `VD provider qpn=0x.. status=.. count=3 pid=P peer=0x.. gid=G` line.
struct Vd {
    qpn: u64,
    pid: u64,
    peer: u64,
    gid: String,
}

fn vd_line(out: &std::path::Path) -> Vd {
    let log = std::fs::read_to_string(out.join("job.log")).expect("job.log");
    let line = log
        .lines()
        .find(|l| l.starts_with("VD provider "))
        .unwrap_or_else(|| panic!("no VD provider line in job.log:\n{log}"));
    let kv: std::collections::BTreeMap<&str, &str> =
        line.split(' ').filter_map(|w| w.split_once('=')).collect();
    let num = |k: &str| -> u64 {
        let v = kv.get(k).unwrap_or_else(|| panic!("{k} missing: {line}"));
        match v.strip_prefix("0x") {
            Some(h) => u64::from_str_radix(h, 16),
            None => v.parse(),
        }
        .unwrap_or_else(|_| panic!("{k}={v}: {line}"))
    };
    Vd {
        qpn: num("qpn"),
        pid: num("pid"),
        peer: num("peer"),
        gid: kv.get("gid").unwrap_or(&"").to_string(),
    }
}

/// The library replaced under a running job: one line naming the path and both build-ids, the
/// probe detached; neither the old job's later call nor the new build's is recorded.
fn replaced(out: &std::path::Path, qps: &[Value]) {
    let path = std::fs::read_to_string(out.join("replaced.txt")).expect("replaced.txt");
    let path = path.trim();
    let log = std::fs::read_to_string(out.join("collect.log")).expect("collect.log");
    assert!(
        log.lines()
            .any(|l| l.contains(path) && l.contains("uprobe on dump_cqe at file offset 0xa020")),
        "the library to replace was never probed:\n{log}"
    );
    let want = format!(
        "provider {path}: its file changed under the running jobs (build-id \
         800c6ca768baceb592682738a03643f11379cbdd -> 800c6ca768baceb592682738a03643f11379cbff), detached"
    );
    assert!(
        log.lines().any(|l| l.ends_with(&want)),
        "no line '{want}':\n{log}"
    );
    for qpn in [0x111111u64, 0x222222] {
        assert!(
            qps.iter().all(|q| q["qpn"].as_u64() != Some(qpn)),
            "QP {qpn:#x} of the replaced library was recorded: {qps:?}"
        );
    }
}
