//! Replay files for the fleet tests, made from the guest recording's records (real kernel
//! bytes): a failure storm (the recording's records repeated, renumbered and shifted in time)
//! and a fake /proc giving the recording's processes a job.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::Path;

use super::servers::data;

/// Offsets in the record, from its Rust mirror (checked against `manifest::RECORD_FIELDS`).
const SEQ: usize = std::mem::offset_of!(manifest::PgRecord, seq);
const TS: usize = std::mem::offset_of!(manifest::PgRecord, ts_ns);
const PID: usize = std::mem::offset_of!(manifest::PgRecord, pid);
const CPU: usize = std::mem::offset_of!(manifest::PgRecord, cpu);

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// The guest recording's header line and records (bytes).
pub(crate) fn guest_records() -> (String, Vec<Vec<u8>>) {
    let text = std::fs::read_to_string(data("rxe-6.12.replay.jsonl")).expect("guest recording");
    let mut lines = text.lines();
    let header = lines.next().expect("header").to_string();
    let recs = lines
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            Some(unhex(v["rec"].as_str()?))
        })
        .collect();
    (header, recs)
}

/// Writes a replay of the guest records repeated `copies` times, each copy 1 s after the
/// previous one (so no chain spans two copies), with per-CPU sequence numbers continuing.
/// No counters lines: the collector derives them (`--replay-window` cuts the windows).
/// Returns the number of records.
pub(crate) fn write_storm(path: &Path, copies: usize) -> usize {
    let (header, recs) = guest_records();
    let mut out = String::with_capacity(copies * recs.len() * 210 + header.len() + 1);
    out.push_str(&header);
    out.push('\n');
    let mut next_seq = std::collections::HashMap::<u32, u64>::new();
    for c in 0..copies {
        for r in &recs {
            let mut r = r.clone();
            let cpu = u32::from_le_bytes(r[CPU..CPU + 4].try_into().expect("cpu"));
            let seq = next_seq.entry(cpu).or_insert(0);
            r[SEQ..SEQ + 8].copy_from_slice(&seq.to_le_bytes());
            *seq += 1;
            let ts = u64::from_le_bytes(r[TS..TS + 8].try_into().expect("ts"));
            let ts = ts + c as u64 * 1_000_000_000;
            r[TS..TS + 8].copy_from_slice(&ts.to_le_bytes());
            out.push_str(&format!("{{\"rec\":\"{}\"}}\n", hex(&r)));
        }
    }
    std::fs::write(path, out).expect("write storm replay");
    copies * recs.len()
}

/// A /proc with `<pid>/environ` (`SLURM_JOB_ID=<job>`) and `<pid>/cgroup` for every process
/// of the guest recording (`--proc-root`).
pub(crate) fn write_proc_root(dir: &Path, job: &str) {
    let (_, recs) = guest_records();
    let pids: BTreeSet<u32> = recs
        .iter()
        .map(|r| u32::from_le_bytes(r[PID..PID + 4].try_into().expect("pid")))
        .collect();
    for pid in pids {
        let p = dir.join(pid.to_string());
        std::fs::create_dir_all(&p).expect("mkdir proc");
        std::fs::write(
            p.join("environ"),
            format!("PATH=/usr/bin\0SLURM_JOB_ID={job}\0RANK=0\0"),
        )
        .expect("environ");
        std::fs::write(p.join("cgroup"), format!("0::/slurm/job{job}\n")).expect("cgroup");
        std::fs::write(p.join("comm"), "verbs_fail\n").expect("comm");
    }
}

/// Records in a JSONL output (every snapshot's `records`), and the snapshots.
pub(crate) fn jsonl_records(path: &Path) -> (usize, Vec<serde_json::Value>) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let snaps: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("snapshot json"))
        .collect();
    let n = snaps
        .iter()
        .map(|s| s["records"].as_array().map_or(0, Vec::len))
        .sum();
    (n, snaps)
}

/// Batch files left in a spool directory.
pub(crate) fn spooled(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().ends_with(".batch"))
                .count()
        })
        .unwrap_or(0)
}

/// Offset of the probe id in the record.
const PROBE: usize = 16;

/// One of the guest recording's failing calls: each of its two processes fails `reg_mr`
/// (4 records, origin `ib_umem_get` EFAULT), `create_qp` (4, `rxe_qp_chk_init` EINVAL) and
/// `modify_qp` (5, `rxe_qp_from_attr` EINVAL), in that order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Call {
    RegMr,
    CreateQp,
    ModifyQp,
}

impl Call {
    /// The call the `i`-th record of a process belongs to.
    fn of(i: usize) -> Call {
        match i {
            0..=3 => Call::RegMr,
            4..=7 => Call::CreateQp,
            _ => Call::ModifyQp,
        }
    }
}

/// (function, module) of every probe id of a manifest.
fn probe_names(manifest: &Path) -> std::collections::HashMap<u32, (String, String)> {
    let text = std::fs::read_to_string(manifest).expect("manifest");
    let v: serde_yaml::Value = serde_yaml::from_str(&text).expect("manifest yaml");
    let probes = v["probes"].as_sequence().expect("probes");
    probes
        .iter()
        .map(|p| {
            let s = |k: &str| p[k].as_str().expect("probe field").to_string();
            let id = p["id"].as_u64().expect("probe id");
            (u32::try_from(id).expect("id"), (s("function"), s("module")))
        })
        .collect()
}

/// Writes a replay of the guest recording's `calls` (both processes), its probe ids mapped
/// by (function, module) onto `manifest`'s, under a header naming `kernel` (and no manifest
/// hash: the set is another than the recording's). An empty `calls` is a host that reports
/// and fails nothing. Returns the number of records.
pub(crate) fn write_calls(path: &Path, kernel: &str, calls: &[Call], manifest: &Path) -> usize {
    let (_, recs) = guest_records();
    let old = probe_names(&data("rxe-6.12.manifest.yaml"));
    let new: std::collections::HashMap<(String, String), u32> = probe_names(manifest)
        .into_iter()
        .map(|(id, name)| (name, id))
        .collect();
    let mut out = format!(
        "{{\"replay\":\"probegen/v1\",\"host\":\"(none)\",\"kernel\":\"{kernel}\",\"manifest_hash\":\"\"}}\n"
    );
    let mut nth = std::collections::HashMap::<u32, usize>::new();
    let mut next_seq = std::collections::HashMap::<u32, u64>::new();
    let mut n = 0;
    for r in &recs {
        let pid = u32::from_le_bytes(r[PID..PID + 4].try_into().expect("pid"));
        let i = nth.entry(pid).or_insert(0);
        let call = Call::of(*i);
        *i += 1;
        if !calls.contains(&call) {
            continue;
        }
        let mut r = r.clone();
        let probe = u32::from_le_bytes(r[PROBE..PROBE + 4].try_into().expect("probe"));
        let name = &old[&probe];
        let id = *new
            .get(name)
            .unwrap_or_else(|| panic!("{name:?} not in {}", manifest.display()));
        r[PROBE..PROBE + 4].copy_from_slice(&id.to_le_bytes());
        let cpu = u32::from_le_bytes(r[CPU..CPU + 4].try_into().expect("cpu"));
        let seq = next_seq.entry(cpu).or_insert(0);
        r[SEQ..SEQ + 8].copy_from_slice(&seq.to_le_bytes());
        *seq += 1;
        out.push_str(&format!("{{\"rec\":\"{}\"}}\n", hex(&r)));
        n += 1;
    }
    std::fs::write(path, out).expect("write replay");
    n
}

/// FNV-1a 64, as the batch header's checksum.
pub(crate) fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A batch file as the previous version framed it (v2): the bodies of its four tables
/// (records, chains, counters, snapshots; no baselines).
pub(crate) fn frame_v2(seq: u64, bodies: &[Vec<u8>; 4]) -> Vec<u8> {
    let mut head = format!("probegen-batch/v2 {seq}");
    for (t, b) in ["records", "chains", "counters", "snapshots"]
        .iter()
        .zip(bodies)
    {
        let rows = b.iter().filter(|&&c| c == b'\n').count();
        head.push_str(&format!(" {t}={rows}:{}", b.len()));
    }
    let all = bodies.concat();
    head.push_str(&format!(" fnv={:016x}\n", fnv1a64(&all)));
    let mut out = head.into_bytes();
    out.extend_from_slice(&all);
    out
}

/// A batch file as the previous version framed it (v5): the bodies of its six tables (every
/// table but `qp_errors`).
pub(crate) fn frame_v5(seq: u64, bodies: &[Vec<u8>; 6]) -> Vec<u8> {
    let mut head = format!("probegen-batch/v5 {seq}");
    for (t, b) in [
        "records",
        "chains",
        "counters",
        "snapshots",
        "baselines",
        "port_counters",
    ]
    .iter()
    .zip(bodies)
    {
        let rows = b.iter().filter(|&&c| c == b'\n').count();
        head.push_str(&format!(" {t}={rows}:{}", b.len()));
    }
    let all = bodies.concat();
    head.push_str(&format!(" fnv={:016x}\n", fnv1a64(&all)));
    let mut out = head.into_bytes();
    out.extend_from_slice(&all);
    out
}
