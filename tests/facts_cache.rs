//! The per-file facts cache (issue 14): reuse, invalidation on a changed file and on a changed
//! `.config` symbol, damaged entries, concurrent runs, the size bound, `--no-cache`, and output
//! that is byte-identical with and without the cache.
//!
//! Every run gets its own cache directory through `$PROBEGEN_CACHE`; `graph` prints what the
//! cache did on stderr (`facts cache: N reused, M parsed, D damaged entries rebuilt, ...`).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{kernel_dir, stderr, stdout, temp_dir};

/// `probegen ARGS` with its facts cache under `cache` (and a bound in MB when given).
fn run(cache: &Path, bound_mb: Option<u64>, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_probegen"));
    cmd.args(args).env("PROBEGEN_CACHE", cache);
    match bound_mb {
        Some(mb) => cmd.env("PROBEGEN_FACTS_CACHE_MB", mb.to_string()),
        None => cmd.env_remove("PROBEGEN_FACTS_CACHE_MB"),
    };
    cmd.output().expect("run probegen")
}

#[derive(Debug, PartialEq, Eq)]
struct Stats {
    reused: usize,
    parsed: usize,
    damaged: usize,
    evicted: usize,
}

/// The counts of the `facts cache:` line of a `graph` run that succeeded.
fn stats(o: &Output) -> Stats {
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(o));
    let err = stderr(o);
    let line = err
        .lines()
        .find_map(|l| l.strip_prefix("facts cache: "))
        .unwrap_or_else(|| panic!("no `facts cache:` line in stderr: {err}"));
    let n = |what: &str| -> usize {
        line.split(", ")
            .find_map(|p| p.strip_suffix(what))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no `{what}` count in `{line}`"))
    };
    Stats {
        reused: n(" reused"),
        parsed: n(" parsed"),
        damaged: n(" damaged entries rebuilt"),
        evicted: n(" evicted"),
    }
}

/// Every file in the facts directory of `cache` (packs and temporary files), sorted.
fn facts_files(cache: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(cache.join("facts"))
        .expect("facts dir")
        .flatten()
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

fn is_pack(p: &Path) -> bool {
    p.extension().is_some_and(|e| e == "pack")
}

/// One pack, split at its documented layout (analyzer/src/facts_cache.rs):
/// `probegen-facts-pack 3 <records> <index bytes> <xxh3-128>\n`, index lines
/// `<key> <offset> <length> <xxh3-128>`, then the payloads.
struct PackFile {
    index: Vec<[String; 4]>,
    payloads: Vec<u8>,
}

impl PackFile {
    fn read(path: &Path) -> Self {
        let bytes = std::fs::read(path).expect("read pack");
        let nl = bytes.iter().position(|b| *b == b'\n').expect("header line");
        let header = std::str::from_utf8(&bytes[..nl]).expect("utf-8 header");
        let fields: Vec<&str> = header.split(' ').collect();
        assert_eq!(fields[..2], ["probegen-facts-pack", "3"], "{header}");
        let index_len: usize = fields[3].parse().expect("index length");
        let index = std::str::from_utf8(&bytes[nl + 1..nl + 1 + index_len]).expect("utf-8 index");
        let index: Vec<[String; 4]> = index
            .lines()
            .map(|l| {
                let f: Vec<String> = l.split(' ').map(String::from).collect();
                f.try_into().expect("four index fields")
            })
            .collect();
        assert_eq!(index.len().to_string(), fields[2], "{header}");
        Self {
            index,
            payloads: bytes[nl + 1 + index_len..].to_vec(),
        }
    }

    /// The pack with its header's record count and index checksum made to match again.
    fn write(&self, path: &Path) {
        let index: String = self.index.iter().map(|f| f.join(" ") + "\n").collect();
        let sum = format!("{:032x}", xxhash_rust::xxh3::xxh3_128(index.as_bytes()));
        let mut bytes = format!(
            "probegen-facts-pack 3 {} {} {sum}\n{index}",
            self.index.len(),
            index.len()
        )
        .into_bytes();
        bytes.extend_from_slice(&self.payloads);
        std::fs::write(path, bytes).expect("write pack");
    }

    fn offset(&self, i: usize) -> usize {
        self.index[i][1].parse().expect("offset")
    }
}

/// The entries the packs under `cache` hold.
fn records(cache: &Path) -> usize {
    facts_files(cache)
        .iter()
        .filter(|p| is_pack(p))
        .map(|p| PackFile::read(p).index.len())
        .sum()
}

fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let meta = e.metadata().expect("metadata");
        total += if meta.is_dir() {
            dir_bytes(&e.path())
        } else {
            meta.len()
        };
    }
    total
}

/// Every file under `dir` with its bytes, by relative path.
fn tree_bytes(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).expect("inside").display().to_string();
                out.push((rel, std::fs::read(&p).expect("read output")));
            }
        }
    }
    out.sort();
    out
}

/// The fixture's uverbs entry (it has no ib_uverbs_ioctl).
const STUB_ENTRY: &str = "ib_uverbs_modify_qp";

/// A copy of the kconfig-stub fixture (its core_priv.h reads CONFIG_SECURITY_INFINIBAND).
fn stub_tree(tag: &str) -> PathBuf {
    let root = temp_dir(tag).join("tree");
    common::copy_dir(&common::fixture("kconfig-stub"), &root);
    root
}

#[test]
fn real_tree_sets_are_byte_identical_without_cold_and_warm_cache() {
    let k = kernel_dir("6.12");
    let k = k.to_string_lossy();
    let base = temp_dir("cache-identical");
    let cache = base.join("cache");
    let gen = |out: &str, extra: &[&str]| {
        let out_dir = base.join(out);
        let mut args = vec![
            "generate",
            "--kernel-src",
            &k,
            "--vendor",
            "mlx5,rxe",
            "--out",
            out_dir.to_str().expect("utf-8 temp dir"),
        ];
        args.extend_from_slice(extra);
        let o = run(&cache, None, &args);
        assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
        tree_bytes(&out_dir)
    };
    let uncached = gen("uncached", &["--no-cache"]);
    assert!(
        !cache.join("facts").exists(),
        "--no-cache wrote to the cache"
    );
    let cold = gen("cold", &[]);
    let packs = facts_files(&cache);
    assert_eq!(packs.len(), 1, "one pack per cold run: {packs:?}");
    let files = records(&cache);
    assert!(files > 400, "only {files} entries after a cold run");
    let warm = gen("warm", &[]);
    assert!(uncached.len() >= 6, "{} files", uncached.len());
    assert!(uncached == cold, "the cold cache changed the output");
    assert!(uncached == warm, "the warm cache changed the output");

    // graph: everything reused, nothing parsed; the same counts as without the cache.
    let warm_graph = run(&cache, None, &["graph", "--kernel-src", &k]);
    let s = stats(&warm_graph);
    assert_eq!((s.parsed, s.damaged), (0, 0), "{s:?}");
    assert_eq!(s.reused, files, "{s:?}");
    let plain = run(&cache, None, &["graph", "--kernel-src", &k, "--no-cache"]);
    assert_eq!(stdout(&plain), stdout(&warm_graph));
    assert!(
        !stderr(&plain).contains("facts cache:"),
        "{}",
        stderr(&plain)
    );
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn a_changed_file_is_parsed_again() {
    let root = stub_tree("cache-changed-file");
    let cache = root.with_file_name("cache");
    let src = root.to_string_lossy().into_owned();
    let first = run(
        &cache,
        None,
        &["graph", "--kernel-src", &src, "--entry", STUB_ENTRY],
    );
    let s1 = stats(&first);
    assert_eq!((s1.reused, s1.damaged), (0, 0), "{s1:?}");
    assert!(s1.parsed >= 4, "{s1:?}");

    let verbs = root.join("drivers/infiniband/core/verbs.c");
    let mut text = std::fs::read_to_string(&verbs).expect("read verbs.c");
    text.push_str("\nint probegen_cache_added(int x)\n{\n\treturn x ? -22 : 0;\n}\n");
    std::fs::write(&verbs, text).expect("write verbs.c");
    let second = run(
        &cache,
        None,
        &["graph", "--kernel-src", &src, "--entry", STUB_ENTRY],
    );
    let s2 = stats(&second);
    assert_eq!(
        s2,
        Stats {
            reused: s1.parsed - 1,
            parsed: 1,
            damaged: 0,
            evicted: 0
        }
    );
    // The new function is in the graph: one more than before.
    let functions = |o: &Output| -> usize {
        stdout(o)
            .lines()
            .find_map(|l| l.strip_prefix("functions"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no functions line: {}", stdout(o)))
    };
    assert_eq!(functions(&second), functions(&first) + 1);
    let _ = std::fs::remove_dir_all(root.parent().expect("temp dir"));
}

#[test]
fn a_changed_config_symbol_reparses_exactly_the_files_that_mention_it() {
    let root = stub_tree("cache-changed-config");
    let cache = root.with_file_name("cache");
    let src = root.to_string_lossy().into_owned();
    let graph = |extra: &[&str]| {
        let mut args = vec!["graph", "--kernel-src", src.as_str(), "--entry", STUB_ENTRY];
        args.extend_from_slice(extra);
        run(&cache, None, &args)
    };
    let off = graph(&[]);
    let built = stats(&off).parsed;

    // A symbol no file mentions: nothing to parse again.
    let unrelated = root.with_file_name("unrelated.config");
    let mut text = std::fs::read_to_string(root.join(".config")).expect("read .config");
    text.push_str("CONFIG_PROBEGEN_CACHE_UNRELATED=y\n");
    std::fs::write(&unrelated, text).expect("write config");
    let u = graph(&["--kconfig", unrelated.to_str().expect("utf-8")]);
    assert_eq!(stats(&u).parsed, 0, "{}", stderr(&u));

    // CONFIG_SECURITY_INFINIBAND=y: core_priv.h (it reads the symbol) is parsed again, and
    // security.c (built now) for the first time; every other file is reused.
    let on_config = common::fixture("kconfig-stub").join("security-on.config");
    let on = graph(&["--kconfig", on_config.to_str().expect("utf-8")]);
    let s = stats(&on);
    assert_eq!(
        (s.reused, s.parsed, s.damaged),
        (built - 1, 2, 0),
        "{}",
        stderr(&on)
    );
    assert_ne!(stdout(&on), stdout(&off), "the symbol changes the graph");
    // And back: both variants stay cached.
    let again = graph(&[]);
    assert_eq!(stats(&again).parsed, 0);
    assert_eq!(stdout(&again), stdout(&off));
    let _ = std::fs::remove_dir_all(root.parent().expect("temp dir"));
}

#[test]
fn damaged_entries_are_rebuilt_never_trusted() {
    let root = stub_tree("cache-damaged");
    let cache = root.with_file_name("cache");
    let src = root.to_string_lossy().into_owned();
    let clean = run(
        &cache,
        None,
        &["graph", "--kernel-src", &src, "--entry", STUB_ENTRY],
    );
    let files = stats(&clean).parsed;
    let list = facts_files(&cache);
    assert_eq!(list.len(), 1, "{list:?}");
    let mut pack = PackFile::read(&list[0]);
    assert_eq!(pack.index.len(), files);
    assert!(files >= 4, "{files} entries");

    // Under a valid header and index: a flipped byte in record 0's payload, record 1 running
    // past the end of the file, and record 2's key pointing at record 3's whole, checksummed
    // payload (another file's facts).
    let at = pack.offset(0) + 10;
    pack.payloads[at] ^= 0x01;
    pack.index[1][2] = (pack.payloads.len() * 2).to_string();
    let (offset, len, sum) = (
        pack.index[3][1].clone(),
        pack.index[3][2].clone(),
        pack.index[3][3].clone(),
    );
    pack.index[2][1] = offset;
    pack.index[2][2] = len;
    pack.index[2][3] = sum;
    pack.write(&list[0]);

    let damaged = run(
        &cache,
        None,
        &["graph", "--kernel-src", &src, "--entry", STUB_ENTRY],
    );
    let s = stats(&damaged);
    assert_eq!(
        s,
        Stats {
            reused: files - 3,
            parsed: 3,
            damaged: 3,
            evicted: 0
        }
    );
    assert_eq!(
        stdout(&damaged),
        stdout(&clean),
        "damaged entries leaked into the output"
    );
    let after = run(
        &cache,
        None,
        &["graph", "--kernel-src", &src, "--entry", STUB_ENTRY],
    );
    assert_eq!(
        stats(&after).reused,
        files,
        "the damaged entries were rewritten"
    );
    let _ = std::fs::remove_dir_all(root.parent().expect("temp dir"));
}

#[test]
fn concurrent_runs_share_one_cache() {
    let k = kernel_dir("6.12");
    let k = k.to_string_lossy().into_owned();
    let base = temp_dir("cache-concurrent");
    let cache = base.join("cache");
    let spawn = || {
        Command::new(env!("CARGO_BIN_EXE_probegen"))
            .args(["graph", "--kernel-src", &k])
            .env("PROBEGEN_CACHE", &cache)
            .env_remove("PROBEGEN_FACTS_CACHE_MB")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn probegen")
    };
    let (a, b, c) = (spawn(), spawn(), spawn());
    let outs: Vec<Output> = [a, b, c]
        .into_iter()
        .map(|ch| ch.wait_with_output().expect("wait"))
        .collect();
    for o in &outs {
        assert_eq!(stats(o).damaged, 0, "{}", stderr(o));
        assert_eq!(stdout(o), stdout(&outs[0]));
    }
    let leftovers: Vec<PathBuf> = facts_files(&cache)
        .into_iter()
        .filter(|p| !is_pack(p))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    let after = run(&cache, None, &["graph", "--kernel-src", &k]);
    let s = stats(&after);
    assert_eq!((s.parsed, s.damaged), (0, 0), "{s:?}");
    assert_eq!(stdout(&after), stdout(&outs[0]));
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn the_cache_stays_under_its_bound() {
    let k = kernel_dir("6.12");
    let k = k.to_string_lossy().into_owned();
    let base = temp_dir("cache-bound");
    let cache = base.join("cache");
    let unbounded = run(&cache, None, &["graph", "--kernel-src", &k]);
    let full = dir_bytes(&cache.join("facts"));
    assert!(full > 2 * 1024 * 1024, "the 6.12 facts take {full} bytes");
    std::fs::remove_dir_all(&cache).expect("clear cache");

    let bounded = run(&cache, Some(1), &["graph", "--kernel-src", &k]);
    let s = stats(&bounded);
    assert!(s.evicted > 0, "{s:?}");
    let kept = dir_bytes(&cache.join("facts"));
    assert!(kept <= 1024 * 1024, "{kept} bytes kept under a 1 MB bound");
    assert_eq!(stdout(&bounded), stdout(&unbounded));

    let bad = run(
        &cache,
        None,
        &["graph", "--kernel-src", &k, "--vendor", "nope"],
    );
    assert_eq!(bad.status.code(), Some(2));
    let o = Command::new(env!("CARGO_BIN_EXE_probegen"))
        .args(["graph", "--kernel-src", &k])
        .env("PROBEGEN_CACHE", &cache)
        .env("PROBEGEN_FACTS_CACHE_MB", "lots")
        .output()
        .expect("run probegen");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("PROBEGEN_FACTS_CACHE_MB=`lots`: expected a positive number"),
        "{}",
        stderr(&o)
    );
    let _ = std::fs::remove_dir_all(&base);
}

/// A pack an older probegen wrote (another format number in its header) is removed without
/// being reported as damaged, and its files are parsed again; a pack whose header is garbage
/// is still counted as damaged.
#[test]
fn a_pack_of_another_format_is_dropped_quietly() {
    let root = stub_tree("cache-format");
    let cache = root.with_file_name("cache");
    let src = root.to_string_lossy().into_owned();
    let args = ["graph", "--kernel-src", &src, "--entry", STUB_ENTRY];
    let files = stats(&run(&cache, None, &args)).parsed;
    let list = facts_files(&cache);
    assert_eq!(list.len(), 1, "{list:?}");
    let bytes = std::fs::read(&list[0]).expect("read pack");
    // format 2 (SHA-256 keys and checksums): the one before this probegen's
    let old = [b"probegen-facts-pack 2".as_slice(), &bytes[21..]].concat();
    assert!(bytes.starts_with(b"probegen-facts-pack 3 "));
    std::fs::write(&list[0], &old).expect("write pack");

    let upgraded = run(&cache, None, &args);
    let s = stats(&upgraded);
    assert_eq!((s.reused, s.parsed, s.damaged), (0, files, 0));
    assert!(
        !stderr(&upgraded).contains("damaged packs"),
        "{}",
        stderr(&upgraded)
    );
    assert!(!list[0].exists(), "the old pack stayed");

    let list = facts_files(&cache);
    assert_eq!(list.len(), 1, "{list:?}");
    std::fs::write(&list[0], b"probegen-facts-pack x garbage\n").expect("write pack");
    let garbage = run(&cache, None, &args);
    assert_eq!(stats(&garbage).parsed, files);
    assert!(
        stderr(&garbage).contains("1 damaged packs dropped"),
        "{}",
        stderr(&garbage)
    );
    let _ = std::fs::remove_dir_all(root.parent().expect("temp dir"));
}
