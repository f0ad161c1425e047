//! The host agent stays small: what runs on every host is read by every platform team that
//! deploys it. The collector keeps loading, reading and accounting; a stage with a role of its
//! own (the `baseline`, the `bundle`, a sink) is a crate with one face, so the collector has a
//! budget of code lines (non-blank, non-comment, outside `#[cfg(test)]` modules) that a new
//! stage cannot grow in silence.
//!
//! `cargo test --release --test agent_size -- --nocapture` prints the count per file of the
//! collector and per crate of the runtime.

use std::path::{Path, PathBuf};

/// The collector's code lines at most: a role that needs more is a crate of its own.
const COLLECTOR_CODE_LINES_BUDGET: usize = 5_000;

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

/// The crates every host runs (the collector's stages, its sinks, the agent), by directory.
const RUNTIME_CRATES: &[&str] = &[
    "wire",
    "baseline",
    "bundle",
    "collector",
    "sink-clickhouse",
    "sink-prometheus",
    "agent",
];

/// Code lines of every `.rs` file under `src`, by file, sorted.
fn counts(src: &Path) -> Vec<(PathBuf, usize)> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    files
        .into_iter()
        .map(|f| {
            let text =
                std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            let n = code_lines(&text);
            (f, n)
        })
        .collect()
}

#[test]
fn runtime_crates_counted() {
    let ws = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut total = 0;
    for krate in RUNTIME_CRATES {
        let files = counts(&ws.join(krate).join("src"));
        assert!(!files.is_empty(), "{krate}/src has no Rust file");
        let n: usize = files.iter().map(|(_, n)| n).sum();
        println!("{n:5} {krate}");
        total += n;
    }
    println!("{total:5} the runtime");
}

#[test]
fn the_collector_stays_within_its_budget() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("collector/src");
    let files = counts(&src);
    assert!(files.len() > 20, "the collector's files read: {files:?}");
    let mut total = 0;
    for (f, n) in &files {
        println!("{n:5} {}", f.strip_prefix(&src).unwrap_or(f).display());
        total += n;
    }
    println!("{total:5} collector/src (budget {COLLECTOR_CODE_LINES_BUDGET})");
    assert!(
        total <= COLLECTOR_CODE_LINES_BUDGET,
        "the collector has {total} code lines, over its budget of {COLLECTOR_CODE_LINES_BUDGET}: \
         move a stage or a sink into its own crate"
    );
}
