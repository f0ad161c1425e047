//! Deterministic mutation test (issue 13): a few hundred seeded mutations of the C front end's
//! inputs (sources, Makefile, .config), the rules file, a manifest and a replay file, each run
//! through the real binary under an address-space limit and a time limit. Every run must end
//! with exit 0 or 2: never a crash (signal, exit 101/134), never unbounded memory (the limit
//! turns that into an abort) or time. Longer, coverage-guided runs: `fuzz/` (cargo fuzz).
//!
//! A failing case is written to the temp directory named in the message, with its seed.

mod common;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Address space a case may use: the fixture runs need ~100 MB.
const MAX_BYTES: u64 = 1 << 30;
/// Wall time a case may take: the fixture runs take ~50 ms.
const MAX_TIME: Duration = Duration::from_secs(15);

/// xorshift64*: small, seeded, the same sequence on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Fragments that stress the recursive descents, the scanners and the decoders.
const TOKENS: &[&str] = &[
    "(",
    ")",
    "{",
    "}",
    "[",
    "]",
    "\"",
    "'",
    "/*",
    "*/",
    "\\\n",
    "#if ",
    "#if 0\n",
    "#endif\n",
    "#else\n",
    "#define X(",
    "DECLARE_UVERBS_NAMED_METHOD((",
    "DECLARE_UVERBS_WRITE(",
    "UVERBS_HANDLER(",
    "->ops.",
    "!",
    "?",
    ":",
    ",",
    ";",
    "\n",
    "\u{feff}",
    "\u{fffd}",
    "\0",
    "\x01",
    "-",
    "1e400",
    "NaN",
    "- ",
    ": ",
    "&a ",
    "*a ",
    "!!int ",
    "%YAML 1.2\n",
    "---\n",
    "obj-$(CONFIG_",
    "CONFIG_INFINIBAND=",
    "{\"rec\":\"",
    "{\"counters\":{",
];

fn mutate(rng: &mut Rng, input: &[u8]) -> Vec<u8> {
    let mut b = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(b.len() + 1);
        match rng.below(8) {
            0 if !b.is_empty() => {
                let i = rng.below(b.len());
                b[i] = rng.next() as u8;
            }
            1 => {
                let n = 1 + rng.below(64);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                b.splice(at..at, bytes);
            }
            2 => {
                let end = (at + rng.below(256)).min(b.len());
                b.drain(at..end);
            }
            3 => {
                let end = (at + rng.below(512)).min(b.len());
                let chunk = b[at..end].to_vec();
                b.splice(at..at, chunk);
            }
            4 => b.truncate(at),
            5 => {
                // A token repeated up to 20,000 times: deep nesting, long lines.
                let t = TOKENS[rng.below(TOKENS.len())];
                let reps = [1, 2, 10, 300, 20_000][rng.below(5)];
                let s = t.repeat(reps);
                b.splice(at..at, s.into_bytes());
            }
            _ => {
                let t = TOKENS[rng.below(TOKENS.len())];
                b.splice(at..at, t.bytes());
            }
        }
    }
    b
}

/// Run the binary on one case; panic with the case saved when it crashes or runs away.
fn run_case(args: &[String], case: &str, saved: &[(PathBuf, Vec<u8>)]) -> i32 {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_probegen"));
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: only setrlimit (async-signal-safe) runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: MAX_BYTES,
                rlim_max: MAX_BYTES,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().expect("spawn probegen");
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break Some(s);
        }
        if t0.elapsed() > MAX_TIME {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let code = status.and_then(|s| s.code());
    if !matches!(code, Some(0 | 2)) {
        let keep = std::env::temp_dir().join(format!("probegen-fuzz-failure-{case}"));
        let _ = std::fs::create_dir_all(&keep);
        for (p, bytes) in saved {
            let name = p.file_name().map(|n| n.to_owned()).unwrap_or_default();
            let _ = std::fs::write(keep.join(name), bytes);
        }
        panic!(
            "case {case}: probegen {args:?} ended with {:?} after {:?} (expected exit 0 or 2); input kept in {}",
            status,
            t0.elapsed(),
            keep.display()
        );
    }
    code.unwrap_or(-1)
}

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// Counts of exit 0 and exit 2 (both must occur: the mutations reach the error paths and do
/// not all break the input beyond recognition).
#[derive(Default, Debug)]
struct Tally {
    ok: usize,
    error: usize,
}

impl Tally {
    fn add(&mut self, code: i32) {
        if code == 0 {
            self.ok += 1;
        } else {
            self.error += 1;
        }
    }
}

#[test]
fn c_front_end_survives_mutations() {
    let tree = common::temp_dir("fuzz-c");
    common::copy_dir(&common::fixture("ops-table-two-vendors"), &tree);
    // The fixture's entry file carries the text of the real uverbs_cmd.c: the front end sees
    // real kernel C (macros, uverbs tables) in every case.
    let real = read(&common::kernel_dir("6.12").join("drivers/infiniband/core/uverbs_cmd.c"));
    let main = tree.join("drivers/infiniband/core/uverbs_main.c");
    let mut base_main = read(&main);
    base_main.extend_from_slice(&real);
    let targets: Vec<(PathBuf, Vec<u8>)> = [
        "drivers/infiniband/core/uverbs_main.c",
        "drivers/infiniband/core/uverbs_main.c",
        "include/rdma/ib_verbs.h",
        "drivers/infiniband/core/Makefile",
        ".config",
    ]
    .iter()
    .map(|rel| {
        let p = tree.join(rel);
        let bytes = if p == main {
            base_main.clone()
        } else {
            read(&p)
        };
        (p, bytes)
    })
    .collect();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut tally = Tally::default();
    let args: Vec<String> = [
        "graph",
        "--kernel-src",
        &s(&tree),
        "--entry",
        "ib_uverbs_ioctl",
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    for case in 0..150 {
        for (p, bytes) in &targets {
            std::fs::write(p, bytes).expect("restore");
        }
        let (p, bytes) = &targets[rng.below(targets.len())];
        let m = mutate(&mut rng, bytes);
        std::fs::write(p, &m).expect("write");
        tally.add(run_case(&args, &format!("c-{case}"), &[(p.clone(), m)]));
    }
    assert!(tally.ok > 0 && tally.error > 0, "{tally:?}");
}

#[test]
fn rules_file_survives_mutations() {
    let dir = common::temp_dir("fuzz-rules");
    let tree = dir.join("tree");
    common::copy_dir(&common::fixture("ops-table-two-vendors"), &tree);
    let base = read(&repo("heuristics/rules.yaml"));
    let rules = dir.join("rules.yaml");
    let mut rng = Rng(0xd1b5_4a32_d192_ed03);
    let mut tally = Tally::default();
    for case in 0..80 {
        let m = mutate(&mut rng, &base);
        std::fs::write(&rules, &m).expect("write");
        let args: Vec<String> = [
            "generate",
            "--kernel-src",
            &s(&tree),
            "--vendor",
            "mlx5",
            "--entry",
            "ib_uverbs_ioctl",
            "--allow-degraded",
            "--rules",
            &s(&rules),
            "--out",
            &s(&dir.join("out")),
        ]
        .iter()
        .map(|a| a.to_string())
        .collect();
        tally.add(run_case(
            &args,
            &format!("rules-{case}"),
            &[(rules.clone(), m)],
        ));
    }
    assert!(tally.ok > 0 && tally.error > 0, "{tally:?}");
}

#[test]
fn manifest_survives_mutations() {
    let dir = common::temp_dir("fuzz-manifest");
    let good = repo("generated/linux-6.12/rxe/manifest.yaml");
    let base = read(&good);
    let path = dir.join("manifest.yaml");
    let csv = dir.join("f.csv");
    std::fs::write(&csv, "create_qp,EINVAL,1\nreg_mr,-12,2.5\n").expect("write");
    let mut rng = Rng(0x94d0_49bb_1331_11eb);
    let mut tally = Tally::default();
    for case in 0..80 {
        let m = mutate(&mut rng, &base);
        std::fs::write(&path, &m).expect("write");
        let args: Vec<String> = if case % 2 == 0 {
            vec!["diff".into(), s(&good), s(&path)]
        } else {
            vec![
                "coverage".into(),
                "--manifest".into(),
                s(&path),
                "--failures".into(),
                s(&csv),
            ]
        };
        tally.add(run_case(
            &args,
            &format!("manifest-{case}"),
            &[(path.clone(), m)],
        ));
    }
    assert!(tally.ok > 0 && tally.error > 0, "{tally:?}");
}

#[test]
fn replay_reader_survives_mutations() {
    let dir = common::temp_dir("fuzz-replay");
    let manifest = repo("collector/tests/data/rxe-6.12.manifest.yaml");
    let base = read(&repo("collector/tests/data/rxe-6.12.replay.jsonl"));
    let path = dir.join("replay.jsonl");
    let mut rng = Rng(0xbf58_476d_1ce4_e5b9);
    let mut tally = Tally::default();
    for case in 0..80 {
        let m = mutate(&mut rng, &base);
        std::fs::write(&path, &m).expect("write");
        let args: Vec<String> = vec![
            "collect".into(),
            "--manifest".into(),
            s(&manifest),
            "--replay".into(),
            s(&path),
            "--out".into(),
            s(&dir.join("out.jsonl")),
        ];
        tally.add(run_case(
            &args,
            &format!("replay-{case}"),
            &[(path.clone(), m)],
        ));
    }
    assert!(tally.ok > 0 && tally.error > 0, "{tally:?}");
}
