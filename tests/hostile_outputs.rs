//! Issue 21, the collector's own outputs and what it reads from processes (rows 4, 5, 6, 10,
//! 14): `probegen collect --replay` against a hostile or unlucky world, each test counting
//! snapshots: lines readable + snapshots counted lost == snapshots written, and no byte
//! outside the test's own directory touched. Run as root (CI and the dev machine): row 6
//! mounts a small tmpfs and fails loudly when it cannot.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::replays::write_storm;
use common::servers::{data, spawn_collector, Guard};
use serde_json::Value;

/// Records per copy of the guest recording (`write_storm`'s unit).
const GUEST_RECORDS: usize = 26;
const PID_AT: usize = 24;

fn manifest() -> String {
    data("rxe-6.12.manifest.yaml").display().to_string()
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// A storm replay of `copies` copies of the guest records, each record's pid set to `pid`
/// when given.
fn storm(dir: &Path, copies: usize, pid: Option<u32>) -> PathBuf {
    let p = dir.join(format!("storm-{copies}.jsonl"));
    write_storm(&p, copies);
    if let Some(pid) = pid {
        let text = std::fs::read_to_string(&p).expect("storm");
        let mut out = String::new();
        for l in text.lines() {
            match l
                .strip_prefix("{\"rec\":\"")
                .and_then(|r| r.strip_suffix("\"}"))
            {
                Some(hex) => {
                    let mut h = hex.to_string();
                    let le: String = pid
                        .to_le_bytes()
                        .iter()
                        .map(|b| format!("{b:02x}"))
                        .collect();
                    h.replace_range(PID_AT * 2..PID_AT * 2 + 8, &le);
                    out.push_str(&format!("{{\"rec\":\"{h}\"}}\n"));
                }
                None => out.push_str(&format!("{l}\n")),
            }
        }
        std::fs::write(&p, out).expect("storm with pid");
    }
    p
}

/// The lines of `files`: the snapshots that parse, and the count of lines that do not.
fn read_lines(files: &[&Path]) -> (Vec<Value>, usize) {
    let (mut good, mut bad) = (Vec::new(), 0);
    for f in files {
        let bytes = std::fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        for l in bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            match serde_json::from_slice::<Value>(l) {
                Ok(v) => good.push(v),
                Err(_) => bad += 1,
            }
        }
    }
    (good, bad)
}

/// `(snapshots, sink errors)` from the collector's summary line.
fn summary(stderr: &str) -> (u64, u64) {
    let line = stderr
        .lines()
        .find(|l| l.contains(" snapshots; "))
        .unwrap_or_else(|| panic!("no summary line: {stderr}"));
    let num_before = |tag: &str| -> u64 {
        let at = line.find(tag).unwrap_or_else(|| panic!("{tag}: {line}"));
        line[..at]
            .rsplit(' ')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{tag}: {line}"))
    };
    let errors = line
        .split("sink errors ")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("sink errors: {line}"));
    (num_before(" snapshots;"), errors)
}

/// The snapshot numbers the collector said it did not write.
fn lost(stderr: &str) -> BTreeSet<u64> {
    stderr
        .lines()
        .filter(|l| l.contains(" not written: "))
        .filter_map(|l| l.split("snapshot ").nth(1)?.split(' ').next()?.parse().ok())
        .collect()
}

fn numbers(snaps: &[Value]) -> Vec<u64> {
    snaps
        .iter()
        .map(|v| v["snapshot"].as_u64().expect("snapshot number"))
        .collect()
}

fn collect(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_probegen"))
        .arg("collect")
        .args(args)
        .output()
        .expect("run probegen collect")
}

/// Lines received so far, waiting at most `within` for one containing `needle`.
fn wait_for(rx: &mpsc::Receiver<String>, seen: &mut Vec<String>, needle: &str, within: Duration) {
    let deadline = Instant::now() + within;
    while !seen.iter().any(|l| l.contains(needle)) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) => seen.push(l),
            Err(_) => panic!("no `{needle}` within {within:?}: {seen:#?}"),
        }
    }
}

fn drain(rx: &mpsc::Receiver<String>, seen: &mut Vec<String>) -> String {
    while let Ok(l) = rx.recv_timeout(Duration::from_secs(5)) {
        seen.push(l);
    }
    seen.join("\n")
}

fn wait_until(what: &str, within: Duration, mut ok: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !ok() {
        assert!(t0.elapsed() < within, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn line_count(p: &Path) -> usize {
    std::fs::read(p).map_or(0, |b| b.iter().filter(|&&c| c == b'\n').count())
}

fn signal(pid: u32, sig: &str) {
    let st = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("kill");
    assert!(st.success(), "kill {sig} {pid}");
}

/// Row 4: a process with a 128 KiB `RANK` (the kernel's largest environment string), its
/// records replayed with `--proc-root /proc`: every record carries the value cut to 256 bytes
/// and marked, the lines stay small, and every record is in a line or counted as dropped.
#[test]
fn row_4_a_huge_job_value_is_cut_and_marked() {
    let g = Guard::new("pg-row4");
    let rank = "7".repeat(131_000);
    let mut proc_ = Command::new("sleep")
        .arg("60")
        .env_clear()
        .env("RANK", &rank)
        .env("SLURM_JOB_ID", "77")
        .spawn()
        .expect("spawn sleep with a huge RANK");
    let copies = 10;
    let replay = storm(&g.dir, copies, Some(proc_.id()));
    let out = g.dir.join("s.jsonl");
    let window = GUEST_RECORDS.to_string();
    let o = collect(&[
        "--manifest",
        &manifest(),
        "--replay",
        &s(&replay),
        "--replay-window",
        &window,
        "--proc-root",
        "/proc",
        "--out",
        &s(&out),
    ]);
    let _ = proc_.kill();
    let _ = proc_.wait();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let (snaps, bad) = read_lines(&[&out]);
    let (written, errors) = summary(&err);
    assert_eq!((bad, errors, snaps.len() as u64), (0, 0, written), "{err}");
    let recs: Vec<&Value> = snaps
        .iter()
        .flat_map(|v| v["records"].as_array().into_iter().flatten())
        .collect();
    let dropped: u64 = snaps
        .iter()
        .map(|v| v["drops"]["userspace"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(recs.len() as u64 + dropped, (copies * GUEST_RECORDS) as u64);
    let text = std::fs::read_to_string(&out).expect("out");
    let longest = text.lines().map(str::len).max().unwrap_or(0);
    eprintln!(
        "row 4: {} records, {} bytes in {} lines, the longest {longest} bytes",
        recs.len(),
        text.len(),
        snaps.len()
    );
    let cut = format!(
        "{}…[truncated {} bytes]",
        &rank[..collector::JOB_VALUE_MAX],
        rank.len() - collector::JOB_VALUE_MAX
    );
    for r in &recs {
        assert_eq!(r["job"]["RANK"].as_str(), Some(cut.as_str()));
        assert_eq!(r["job"]["SLURM_JOB_ID"], "77");
    }
    // a line holds 26 records: with the value cut, a few hundred bytes more per record
    assert!(longest < 64 << 10, "the longest line: {longest} bytes");
    assert!(text.len() < 1 << 20, "the file: {} bytes", text.len());
    // the allow-list is bounded too: 33 names are refused before anything is read
    let names: Vec<String> = (0..=collector::JOB_VARS_MAX)
        .map(|i| format!("V{i}"))
        .collect();
    let o = collect(&[
        "--manifest",
        &manifest(),
        "--replay",
        &s(&replay),
        "--job-vars",
        &names.join(","),
        "--out",
        &s(&g.dir.join("vars.jsonl")),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.code() == Some(2) && err.contains("--job-vars: 33 names"),
        "{err}"
    );
}

/// `collect --out OUT` (the guest replay) exits 2 at once, with one line naming OUT and
/// `why`, and collects nothing.
fn refused_at_once(out: &Path, why: &str) {
    let guest = data("rxe-6.12.replay.jsonl");
    let mut child = Command::new(env!("CARGO_BIN_EXE_probegen"))
        .args(["collect", "--manifest", &manifest(), "--replay", &s(&guest)])
        .arg("--out")
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if t0.elapsed() > Duration::from_secs(10) {
            // a stop must still win: SIGTERM, then the test fails
            signal(child.id(), "-TERM");
            std::thread::sleep(Duration::from_secs(2));
            let _ = child.kill();
            let _ = child.wait();
            panic!("--out {}: still running after 10 s", out.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let o = child.wait_with_output().expect("output");
    let err = String::from_utf8_lossy(&o.stderr);
    eprintln!(
        "row 5: {} -> {status} in {:?}: {err}",
        out.display(),
        t0.elapsed()
    );
    assert_eq!(status.code(), Some(2), "{err}");
    let line = err
        .lines()
        .find(|l| l.contains("--out"))
        .unwrap_or_default();
    assert!(line.contains(&s(out)) && line.contains(why), "{err}");
    assert!(!err.contains(" snapshots; "), "nothing collected: {err}");
}

/// Row 5: `--out` a symbolic link (to a stand-in `/etc/passwd`, and a dangling one), a hard
/// link, a FIFO: one line naming the file and why, exit 2 at once, nothing written anywhere;
/// a rotation past a planted `FILE.2` link moves the link, never writes through it.
#[test]
fn row_5_out_is_never_a_link_or_a_fifo() {
    let g = Guard::new("pg-row5");
    let passwd = g.dir.join("passwd");
    let original = b"root:x:0:0:root:/root:/bin/bash\n".repeat(20);
    std::fs::write(&passwd, &original).expect("stand-in passwd");
    let link = g.dir.join("link.jsonl");
    std::os::unix::fs::symlink(&passwd, &link).expect("symlink");
    let dangling = g.dir.join("dangling.jsonl");
    let never = g.dir.join("never-created");
    std::os::unix::fs::symlink(&never, &dangling).expect("symlink");
    let hard = g.dir.join("hard.jsonl");
    std::fs::hard_link(&passwd, &hard).expect("hard link");
    // a file another user made first (a 1777 directory): theirs to read and cut, not ours
    let foreign = g.dir.join("foreign.jsonl");
    std::fs::write(&foreign, b"").expect("foreign");
    let c = std::ffi::CString::new(s(&foreign)).expect("path");
    // SAFETY: a valid C string; 65534 is `nobody`.
    let rc = unsafe { libc::chown(c.as_ptr(), 65534, 65534) };
    assert_eq!(
        rc,
        0,
        "chown nobody {}: needs root (CI and the dev machine run as root)",
        s(&foreign)
    );
    let fifo = g.dir.join("fifo.jsonl");
    let st = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(st.success(), "mkfifo");
    for (out, why) in [
        (&link, "symbolic link"),
        (&dangling, "symbolic link"),
        (&hard, "hard links"),
        (&foreign, "owned by uid 65534"),
        (&fifo, "FIFO"),
    ] {
        refused_at_once(out, why);
    }
    assert_eq!(std::fs::read(&passwd).expect("passwd"), original);
    assert!(!never.exists(), "the dangling link's target was created");
    assert_eq!(std::fs::metadata(&foreign).expect("foreign").len(), 0);

    // rotation: FILE.2 planted as a link to the stand-in; rename moves the link itself
    let out = g.dir.join("rot.jsonl");
    std::os::unix::fs::symlink(&passwd, g.dir.join("rot.jsonl.2")).expect("symlink");
    let o = collect(&[
        "--manifest",
        &manifest(),
        "--replay",
        &s(&storm(&g.dir, 4, None)),
        "--replay-window",
        "26",
        "--out",
        &s(&out),
        "--rotate-bytes",
        "20000",
        "--rotate-keep",
        "9",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(std::fs::read(&passwd).expect("passwd"), original);
    let files: Vec<PathBuf> = std::iter::once(out.clone())
        .chain((1..=9).map(|i| g.dir.join(format!("rot.jsonl.{i}"))))
        .filter(|p| p.is_file() && !p.is_symlink())
        .collect();
    let (snaps, bad) = read_lines(&files.iter().map(PathBuf::as_path).collect::<Vec<_>>());
    let (written, errors) = summary(&err);
    assert!(files.len() > 2, "rotated: {files:?}");
    assert_eq!((bad, errors, snaps.len() as u64), (0, 0, written), "{err}");
}

/// Unmounts on drop (any path, a failed assertion included).
struct Mount(PathBuf);

impl Mount {
    fn tmpfs(dir: &Path, size: &str) -> Self {
        std::fs::create_dir_all(dir).expect("mkdir mount point");
        let o = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output()
            .expect("run mount");
        assert!(
            o.status.success(),
            "mount -t tmpfs -o size={size} {}: {} (row 6 needs root: CI and the dev machine run as root)",
            dir.display(),
            String::from_utf8_lossy(&o.stderr)
        );
        Mount(dir.to_path_buf())
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Row 6, a full disk: `--out` on a 256 KiB tmpfs, a filler file taking half of it. Lines
/// are written until the disk is full; the snapshots that do not fit are counted as sink
/// errors and leave nothing behind (no fragment for the next line to be glued to); once the
/// filler is removed, lines are written whole again. Every line parses, and lines + counted
/// lost == snapshots.
#[test]
fn row_6_a_full_disk_leaves_whole_lines_only() {
    let mut g = Guard::new("pg-row6-full");
    let mnt = g.dir.join("mnt");
    let _m = Mount::tmpfs(&mnt, "256k");
    let filler = mnt.join("filler");
    std::fs::write(&filler, vec![0u8; 128 << 10]).expect("filler");
    let out = mnt.join("s.jsonl");
    let replay = storm(&g.dir, 60, None);
    let (_, rx) = spawn_collector(
        &mut g,
        "collector",
        &[
            "--manifest",
            &manifest(),
            "--replay",
            &s(&replay),
            "--replay-window",
            "26",
            "--replay-pace",
            "40ms",
            "--out",
            &s(&out),
        ],
    );
    let mut seen = Vec::new();
    wait_for(&rx, &mut seen, " not written: ", Duration::from_secs(30));
    // a few more failures, then room again
    let errors_now = |seen: &[String]| seen.iter().filter(|l| l.contains(" not written: ")).count();
    while errors_now(&seen) < 3 {
        seen.push(
            rx.recv_timeout(Duration::from_secs(30))
                .expect("more lines"),
        );
    }
    std::fs::remove_file(&filler).expect("rm filler");
    let err = drain(&rx, &mut seen);
    let (written, errors) = summary(&err);
    let lost = lost(&err);
    let (snaps, bad) = read_lines(&[&out]);
    let nums = numbers(&snaps);
    eprintln!(
        "row 6 (full disk): {written} snapshots, {} lines readable, {bad} unreadable, {errors} counted lost",
        snaps.len()
    );
    assert_eq!(bad, 0, "unreadable lines");
    assert_eq!(
        snaps.len() as u64 + errors,
        written,
        "lines + lost == snapshots"
    );
    assert_eq!(lost.len() as u64, errors);
    let all: BTreeSet<u64> = nums.iter().copied().chain(lost.iter().copied()).collect();
    assert_eq!(
        all,
        (0..written).collect::<BTreeSet<u64>>(),
        "each snapshot once"
    );
    let first_lost = *lost.first().expect("a snapshot lost");
    assert!(
        nums.iter().any(|&n| n > first_lost),
        "lines written whole again once there is room: {nums:?}"
    );
    assert_eq!(std::fs::read(&out).expect("out").last(), Some(&b'\n'));
}

/// Row 6, a kill mid-line: a collector writing lines of several MB is killed with SIGKILL,
/// then restarted on the same `--out`. The fragment it left (made by the test when the kill
/// fell between two lines) is one unreadable line; every other line parses, the restart's
/// snapshots all of them, and the log says once that the file was fenced.
#[test]
fn row_6_a_kill_mid_line_costs_one_unreadable_line() {
    let g = Guard::new("pg-row6-kill");
    let out = g.dir.join("s.jsonl");
    let big = storm(&g.dir, 400, None);
    let window = (200 * GUEST_RECORDS).to_string();
    // a kill lands mid-line about one time in three: a few tries
    let mut torn_by_kill = false;
    for attempt in 1..=6 {
        let _ = std::fs::remove_file(&out);
        let mut child = Command::new(env!("CARGO_BIN_EXE_probegen"))
            .args(["collect", "--manifest", &manifest(), "--replay", &s(&big)])
            .args(["--replay-window", &window, "--batch-cap", "100000"])
            .args(["--replay-pace", "300ms", "--out", &s(&out)])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        wait_until("a first line", Duration::from_secs(60), || {
            line_count(&out) >= 1
        });
        // the second line (1.4 MB) starts: kill at once
        let len_at_first = std::fs::metadata(&out).map_or(0, |m| m.len());
        let t0 = Instant::now();
        while std::fs::metadata(&out).map_or(0, |m| m.len()) == len_at_first {
            assert!(t0.elapsed() < Duration::from_secs(60), "no second line");
            std::hint::spin_loop();
        }
        let _ = child.kill();
        let _ = child.wait();
        torn_by_kill = std::fs::read(&out).expect("out").last() != Some(&b'\n');
        eprintln!("row 6 (kill): attempt {attempt}: torn {torn_by_kill}");
        if torn_by_kill {
            break;
        }
    }
    let mut bytes = std::fs::read(&out).expect("out");
    if !torn_by_kill {
        // every kill fell between two lines: leave what a kill mid-line leaves
        let first = bytes.iter().position(|&b| b == b'\n').expect("a line") + 1;
        bytes.extend_from_within(..first / 2);
        std::fs::write(&out, &bytes).expect("fragment");
    }
    let whole_before = bytes.iter().filter(|&&b| b == b'\n').count();
    let o = collect(&[
        "--manifest",
        &manifest(),
        "--replay",
        &s(&data("rxe-6.12.replay.jsonl")),
        "--out",
        &s(&out),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let (written, errors) = summary(&err);
    let (snaps, bad) = read_lines(&[&out]);
    eprintln!(
        "row 6 (kill): torn by the kill: {torn_by_kill}; {whole_before} lines before, restart wrote {written}; {} readable, {bad} unreadable",
        snaps.len()
    );
    assert_eq!(errors, 0, "{err}");
    assert_eq!(bad, 1, "the fragment is one unreadable line");
    assert_eq!(snaps.len(), whole_before + written as usize);
    let restart: Vec<u64> = numbers(&snaps[whole_before..]);
    assert_eq!(
        restart,
        (0..written).collect::<Vec<u64>>(),
        "the restart's snapshots"
    );
    assert_eq!(err.matches("cut short").count(), 1, "said once: {err}");
}

/// Row 10: a second collector on the same `--out` (after the first one rotated it) exits 2
/// at once with one line naming the file; the first one's lines are all there, nobody
/// else's; once the first is gone, the output can be taken again.
#[test]
fn row_10_one_collector_per_out() {
    let mut g = Guard::new("pg-row10");
    let out = g.dir.join("s.jsonl");
    let replay = storm(&g.dir, 40, None);
    let args = [
        "--manifest",
        &manifest(),
        "--replay",
        &s(&replay),
        "--replay-window",
        "26",
        "--replay-pace",
        "100ms",
        "--out",
        &s(&out),
        "--rotate-bytes",
        "30000",
        "--rotate-keep",
        "50",
    ];
    let (a, rx) = spawn_collector(&mut g, "first", &args);
    wait_until("a rotation", Duration::from_secs(30), || {
        g.dir.join("s.jsonl.1").is_file()
    });
    let second = collect(&args);
    let err2 = String::from_utf8_lossy(&second.stderr);
    eprintln!("row 10: the second collector: {} {err2}", second.status);
    assert_eq!(second.status.code(), Some(2), "{err2}");
    assert!(
        err2.lines().count() == 1 && err2.contains(&s(&out)) && err2.contains("another collector"),
        "{err2}"
    );
    let st = g.terminate(a, Duration::from_secs(20));
    assert!(st.success(), "{st}");
    let mut seen = Vec::new();
    let err = drain(&rx, &mut seen);
    let (written, errors) = summary(&err);
    let files: Vec<PathBuf> = std::iter::once(out.clone())
        .chain((1..=50).map(|i| g.dir.join(format!("s.jsonl.{i}"))))
        .filter(|p| p.is_file())
        .collect();
    let (snaps, bad) = read_lines(&files.iter().map(PathBuf::as_path).collect::<Vec<_>>());
    let nums: BTreeSet<u64> = numbers(&snaps).into_iter().collect();
    assert_eq!((bad, errors), (0, 0));
    assert_eq!(
        snaps.len() as u64,
        written,
        "the first collector's lines only"
    );
    assert_eq!(nums, (0..written).collect::<BTreeSet<u64>>());
    // the lock went with the first collector
    let third = collect(&[
        "--manifest",
        &manifest(),
        "--replay",
        &s(&data("rxe-6.12.replay.jsonl")),
        "--out",
        &s(&out),
    ]);
    assert!(
        third.status.success(),
        "{}",
        String::from_utf8_lossy(&third.stderr)
    );
}

/// Row 14: logrotate's way: `mv FILE FILE.old`, SIGHUP; the next snapshots go to a new
/// FILE, the run goes on, and SIGTERM writes the final snapshot (rc 0). Each snapshot is in
/// exactly one of the two files.
#[test]
fn row_14_sighup_reopens_the_output() {
    let mut g = Guard::new("pg-row14");
    let out = g.dir.join("s.jsonl");
    let old = g.dir.join("s.jsonl.old");
    let replay = storm(&g.dir, 100, None);
    let (a, rx) = spawn_collector(
        &mut g,
        "collector",
        &[
            "--manifest",
            &manifest(),
            "--replay",
            &s(&replay),
            "--replay-window",
            "26",
            "--replay-pace",
            "50ms",
            "--out",
            &s(&out),
        ],
    );
    wait_until("two lines", Duration::from_secs(30), || {
        line_count(&out) >= 2
    });
    std::fs::rename(&out, &old).expect("mv FILE FILE.old");
    let pid = g.children[a].1.id();
    signal(pid, "-HUP");
    wait_until("a new FILE with lines", Duration::from_secs(30), || {
        let exited = g.exited(a);
        assert!(exited.is_none(), "SIGHUP ended the collector: {exited:?}");
        line_count(&out) >= 2
    });
    assert!(
        g.exited(a).is_none(),
        "the collector keeps running after SIGHUP"
    );
    let st = g.terminate(a, Duration::from_secs(20));
    let mut seen = Vec::new();
    let err = drain(&rx, &mut seen);
    eprintln!("row 14: exit {st}");
    assert_eq!(st.code(), Some(0), "{err}");
    let (written, errors) = summary(&err);
    let (before, bad_before) = read_lines(&[&old]);
    let (after, bad_after) = read_lines(&[&out]);
    eprintln!(
        "row 14: {written} snapshots: {} in FILE.old, {} in the new FILE",
        before.len(),
        after.len()
    );
    assert_eq!((bad_before, bad_after, errors), (0, 0, 0));
    assert_eq!((before.len() + after.len()) as u64, written);
    let mut all = numbers(&before);
    all.extend(numbers(&after));
    assert_eq!(
        all,
        (0..written).collect::<Vec<u64>>(),
        "each snapshot once, in order"
    );
    assert_eq!(after.last().expect("final")["final"], true);
}
