//! The host agent stays small: what runs on every host is read by every platform team that
//! deploys it, so the collector crate has a budget of code lines (non-blank, non-comment,
//! outside `#[cfg(test)]` modules). The sinks live in their own crates (`sink-clickhouse`,
//! `sink-prometheus`) and the flags in `agent/`; a feature that needs more room goes there or
//! earns a larger budget in review, not in silence.
//!
//! `cargo test --release --test agent_size -- --nocapture` prints the count per file.

use std::path::{Path, PathBuf};

/// Issue 20's target: 5,738 lines before the split, 4,500 at most after it. Issue 21 added
/// ~220 for files no one else can stand in for (`outfile.rs`: no link, no FIFO, one collector
/// per output), torn lines fenced and cut back, SIGHUP reopening the output, bounded job
/// values, and ~120 for the live window's fence (every snapshot's invariant exact, or its
/// failures in flight carried): 4,700. Issue 22 added ~75 for driver modules without BTF
/// (DKMS, vendor OFED builds): their probes attach by the kprobe/kretprobe fallback, with the
/// mechanism in the attach status and a log line naming the module: 4,780. Issue 23 added
/// ~280 for the host's own check before a load (`live/btf.rs`: each fexit probe's prototype
/// read from /sys/kernel/btf, a set of another point release never loaded blind) and the
/// compiler clones resolved by name (`live/loader.rs`), and 226 for drivers that come and go
/// (one object per module sharing the maps, the module watch and the control socket that
/// releases one before `modprobe -r`, in `live/modules.rs`; nothing else can detach a module's
/// programs while the agent runs) and the agent's own cost in the snapshot (`live/cost.rs`).
/// Issue 25 added ~1,085 for the good-trace baseline (`collect --baseline`), a role with no
/// other home (it reads the pipeline's chains and the live object's maps): the trace ring with
/// its own fenced counts (`live/trace.rs`, ~195), the success-shape store, the LCS alignment
/// with noise subtraction and the expected-error rules (`baseline/`, ~640 with the chain
/// notes), the wire types (~80) and the loader, source and pipeline hooks. Issue 24 added
/// ~195 for the owner from the origin's error sites (`sites.rs`: matching, ranking, the cited
/// site, the reason in words, the older-set fallback) and moved the ~150 lines of errno tables
/// into `manifest` (the sites' errno constants are typed there): 6,750. Issue 25's second
/// round added ~423 (6,730 measured before, 7,153 after): the baseline kept across restarts
/// (`baseline/persist.rs`, 154: the checksummed file by rename (its temporary opened through `outfile`), the bound, the set-aside of a
/// damaged or other-set file; the store's serde), the per-job handler mix (`baseline/jobs.rs`,
/// 106), the state's restore/save and `baseline show`'s view (`baseline/mod.rs`, ~75), pins not
/// expected, the wire types of jobs and the state view (~30), the run's save and restore lines
/// and the chain totals by verdict (~25); none of it can live in a sink (it is the
/// processing stage's state): 7,170. Issue 25's third round added 117 (7,170 to 7,287) for
/// fsession on kernels that have it (`live/entries.rs`: the session picked in place of the
/// handler's fexit and fentry, attached as its failure probe too, the fallback to fentry when
/// an object refuses it; `live/btf.rs`: `BPF_TRACE_FSESSION` read off the kernel's BTF;
/// the loader's retry; the attach outputs in one struct, the shared maps in one step). Issue
/// 25's fleet store added 12: every success's duration in log2 buckets per shape
/// (`baseline/store.rs`, kept in the state file), on the wire as `duration_log2` with the
/// bucket count in the face, and the chains' notes settable by a sink's tests; only the store
/// sees every duration, and the fleet's quantiles need counts that hosts can add up
/// (`baselines` in ClickHouse); 7,299 measured. The pin `--baseline-entry fentry`
/// (`EntryChoice`, said in the mechanism) 6 more, the BTF kinds moved to `manifest` (7,305
/// measured): 7,310. Issue 36's call order 135 more (`baseline/`: a trace's exits nested
/// into call order by the manifest's call graph, a failure marked where it was born, a
/// version-1 state file's shapes re-keyed and merged; the next function's layer on the
/// wire): the shapes of one call must not depend on the order its functions returned in
/// (7,444 measured; these lines leave the collector with the baseline crate): 7,445.
const COLLECTOR_CODE_LINES_BUDGET: usize = 7_445;

/// Code lines of one rustfmt-formatted file: a line is a comment when it starts with `//` or
/// lies in a `/* */` block; a `#[cfg(test)]` module is skipped from its `mod` line to its
/// closing brace (braces counted per line: rustfmt puts them where this finds them).
fn code_lines(text: &str) -> usize {
    let (mut n, mut depth) = (0usize, 0i64);
    let mut skip_until: Option<i64> = None;
    let (mut in_block, mut cfg_test) = (false, false);
    for line in text.lines() {
        let s = line.trim();
        let braces = line.matches('{').count() as i64 - line.matches('}').count() as i64;
        if let Some(level) = skip_until {
            depth += braces;
            if depth <= level {
                skip_until = None;
            }
            continue;
        }
        if in_block {
            in_block = !s.contains("*/");
            continue;
        }
        if s.starts_with("/*") {
            in_block = !s.contains("*/");
            continue;
        }
        if s == "#[cfg(test)]" {
            cfg_test = true;
            continue;
        }
        let is_mod = s
            .trim_start_matches("pub(crate) ")
            .trim_start_matches("pub ");
        if cfg_test && is_mod.starts_with("mod ") && s.ends_with('{') {
            skip_until = Some(depth);
            depth += braces;
            cfg_test = false;
            continue;
        }
        if cfg_test {
            n += 1; // the attribute of an item that is not a test module counts
        }
        cfg_test = false;
        depth += braces;
        if !s.is_empty() && !s.starts_with("//") {
            n += 1;
        }
    }
    n
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn the_counter_skips_comments_blank_lines_and_test_modules() {
    let text = "//! doc\nuse a;\n\n/* block\n still */\nfn f() {\n    // c\n    g();\n}\n\
                #[cfg(test)]\nfn helper() {}\n#[cfg(test)]\nmod tests {\n    fn t() {\n    }\n}\nstruct S;\n";
    // use a; fn f() {; g(); }; #[cfg(test)] + fn helper() {}; struct S;
    assert_eq!(code_lines(text), 7);
}

#[test]
fn the_collector_stays_within_its_budget() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("collector/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    assert!(files.len() > 20, "the collector's files read: {files:?}");
    let mut total = 0;
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let n = code_lines(&text);
        println!("{n:5} {}", f.strip_prefix(&src).unwrap_or(f).display());
        total += n;
    }
    println!("{total:5} collector/src (budget {COLLECTOR_CODE_LINES_BUDGET})");
    assert!(
        total <= COLLECTOR_CODE_LINES_BUDGET,
        "the collector has {total} code lines, over its budget of {COLLECTOR_CODE_LINES_BUDGET}: \
         move a sink or a role into its own crate, or raise the budget in review"
    );
}
