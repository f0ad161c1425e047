//! Helpers shared by the integration tests: fixture and real-kernel locations, loading,
//! and small graph queries.
#![allow(dead_code)]

pub(crate) mod baselines;
pub(crate) mod chdb;
pub(crate) mod fake_clickhouse;
pub(crate) mod fleet_scenario;
pub(crate) mod qp_fleet;
pub(crate) mod replays;
pub(crate) mod servers;
pub(crate) mod spread;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use analyzer::CallEdge;
use analyzer::{CallGraph, EdgeKind, FnId, VendorScope};
use analyzer::{LoadOptions, SourceTree};

/// `kernel-fixtures/<name>` in this repository.
pub(crate) fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("kernel-fixtures")
        .join(name)
}

/// Directory of a real kernel tree fetched by `scripts/fetch-kernel.sh <version>`:
/// `$PROBEGEN_KERNEL_6_12` (dots become underscores), else `$PROBEGEN_CACHE/linux-<v>`, else
/// `$HOME/.cache/probegen/linux-<v>`. Panics (the test fails, it is never skipped) when the
/// tree is missing, naming the command that fetches it.
pub(crate) fn kernel_dir(version: &str) -> PathBuf {
    // `6.12-cloud` (a flavor's tree): PROBEGEN_KERNEL_6_12_CLOUD
    let var = format!(
        "PROBEGEN_KERNEL_{}",
        version.replace(['.', '-'], "_").to_uppercase()
    );
    let dir = match std::env::var_os(&var).filter(|v| !v.is_empty()) {
        Some(v) => PathBuf::from(v),
        None => {
            let cache = std::env::var_os("PROBEGEN_CACHE")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .or_else(|| {
                    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/probegen"))
                })
                .unwrap_or_else(|| PathBuf::from(".cache/probegen"));
            cache.join(format!("linux-{version}"))
        }
    };
    assert!(
        dir.join("drivers/infiniband/core").is_dir() && dir.join(".config").is_file(),
        "real kernel {version} tree not found at {} (from ${var} / $PROBEGEN_CACHE / \
         $HOME/.cache/probegen): run `scripts/fetch-kernel.sh {version}` first",
        dir.display()
    );
    dir
}

/// The built-in rules: the directories every load reads and the driver directories a vendor
/// scope filters come from them.
pub(crate) fn rules() -> heuristics::Rules {
    heuristics::Rules::builtin().expect("built-in rules")
}

/// Load options that read the built-in rules' directories.
pub(crate) fn load_options() -> LoadOptions {
    LoadOptions::new(rules().source_layout())
}

/// The graph scope that keeps only the vendor drivers under `allowed`.
pub(crate) fn scope_of(allowed: &[String]) -> VendorScope {
    rules().scope_of(allowed)
}

pub(crate) fn load(dir: &Path) -> SourceTree {
    load_with(dir, &load_options())
}

pub(crate) fn load_with(dir: &Path, opts: &LoadOptions) -> SourceTree {
    SourceTree::load(dir, opts).unwrap_or_else(|e| panic!("loading {}: {e}", dir.display()))
}

/// Load a fixture and build its graph with `scope`.
pub(crate) fn fixture_graph(name: &str, scope: &VendorScope) -> (SourceTree, CallGraph) {
    let tree = load(&fixture(name));
    let graph = CallGraph::build(&tree, scope);
    (tree, graph)
}

/// The only definition of `name`; panics when there are none or several.
pub(crate) fn one(g: &CallGraph, name: &str) -> FnId {
    let ids = g.find(name);
    assert_eq!(
        ids.len(),
        1,
        "expected exactly one definition of `{name}`, found {:?}",
        ids.iter()
            .map(|&i| format!("{}:{}", g.node(i).file, g.node(i).line))
            .collect::<Vec<_>>()
    );
    ids[0]
}

/// The definition of `name` in `file`.
pub(crate) fn in_file(g: &CallGraph, name: &str, file: &str) -> FnId {
    g.find(name)
        .iter()
        .copied()
        .find(|&i| g.node(i).file == file)
        .unwrap_or_else(|| panic!("no definition of `{name}` in {file}"))
}

/// The edge `from -> to`; panics when absent.
pub(crate) fn edge(g: &CallGraph, from: FnId, to: FnId) -> &CallEdge {
    g.callees(from)
        .into_iter()
        .find(|(t, _)| *t == to)
        .map(|(_, e)| e)
        .unwrap_or_else(|| {
            panic!(
                "no edge {} -> {}; callees: {}",
                g.node(from).name,
                g.node(to).name,
                callee_names(g, from).join(", ")
            )
        })
}

pub(crate) fn has_edge(g: &CallGraph, from: FnId, to: FnId) -> bool {
    g.callees(from).iter().any(|(t, _)| *t == to)
}

pub(crate) fn callee_names(g: &CallGraph, id: FnId) -> Vec<String> {
    g.callees(id)
        .iter()
        .map(|(t, e)| format!("{}[{}]", g.node(*t).name, e.kind.as_str()))
        .collect()
}

pub(crate) type Reach = BTreeMap<FnId, Option<(FnId, CallEdge)>>;

pub(crate) fn reach_from(g: &CallGraph, entries: &[&str]) -> Reach {
    let names: Vec<String> = entries.iter().map(|s| s.to_string()).collect();
    let ids = g.entries(&names).unwrap_or_else(|n| panic!("{n}"));
    g.reach(&ids)
}

/// One hop of a path: the function reached and the edge that reached it.
#[derive(Debug, Clone)]
pub(crate) struct Hop {
    pub name: String,
    pub file: String,
    pub module: Option<String>,
    pub edge: Option<CallEdge>,
}

/// BFS path in `reach` to the definition `to` (the id), as names and edges.
pub(crate) fn path_to(g: &CallGraph, reach: &Reach, to: FnId) -> Option<Vec<Hop>> {
    let p = CallGraph::path_in(reach, to)?;
    Some(
        p.into_iter()
            .map(|(id, edge)| {
                let n = g.node(id);
                Hop {
                    name: n.name.clone(),
                    file: n.file.clone(),
                    module: n.module.clone(),
                    edge,
                }
            })
            .collect(),
    )
}

/// Shortest path to any definition of `to` reachable in `reach`.
pub(crate) fn path_to_name(g: &CallGraph, reach: &Reach, to: &str) -> Option<Vec<Hop>> {
    g.find(to)
        .iter()
        .filter_map(|&t| path_to(g, reach, t))
        .min_by_key(Vec::len)
}

pub(crate) fn render(path: &[Hop]) -> String {
    path.iter()
        .map(|h| match &h.edge {
            None => format!("{} ({})", h.name, h.file),
            Some(e) => format!(
                "-> {} ({}) [{}{} at {}:{}]",
                h.name,
                h.file,
                e.kind.as_str(),
                e.via
                    .as_deref()
                    .map(|v| format!(" {v}"))
                    .unwrap_or_default(),
                e.file,
                e.line
            ),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The hop reaching `name` on `path`; panics with the rendered path when absent.
pub(crate) fn hop<'p>(path: &'p [Hop], name: &str) -> &'p Hop {
    path.iter()
        .find(|h| h.name == name)
        .unwrap_or_else(|| panic!("`{name}` not on the path:\n{}", render(path)))
}

pub(crate) fn kind_of(h: &Hop) -> Option<EdgeKind> {
    h.edge.as_ref().map(|e| e.kind)
}

/// 1-based line of the first line of `file` (relative to `root`) containing `needle`, so
/// fixture assertions follow the fixture text instead of hard-coded numbers.
pub(crate) fn line_of(root: &Path, file: &str, needle: &str) -> usize {
    let text = std::fs::read_to_string(root.join(file))
        .unwrap_or_else(|e| panic!("{}: {e}", root.join(file).display()));
    text.lines()
        .position(|l| l.contains(needle))
        .map(|i| i + 1)
        .unwrap_or_else(|| panic!("`{needle}` not in {file}"))
}

/// Copy a directory tree (fixtures into temp dirs for tests that add files).
pub(crate) fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create temp dir");
    for entry in std::fs::read_dir(from).expect("read fixture dir") {
        let entry = entry.expect("dir entry");
        let dest = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), &dest).expect("copy fixture file");
        }
    }
}

/// A fresh temp directory for this test process and `tag`.
pub(crate) fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("probegen-test-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create temp dir");
    dir
}

/// Run the `probegen` binary built for these tests.
pub(crate) fn probegen(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_probegen"))
        .args(args)
        .output()
        .expect("run probegen")
}

pub(crate) fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub(crate) fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A probe set generated now from the real `ver` tree with `probegen generate`, once per test
/// process (tests in one binary share it); its output directory.
pub(crate) fn generated_set(ver: &str, vendor: &str) -> PathBuf {
    let extra: &[&str] = if not_built().contains(&(ver, vendor)) {
        &["--not-built"]
    } else {
        &[]
    };
    generated_set_with(ver, vendor, extra)
}

/// One line of `generated/sets.txt`: (kernel, vendor, not built by the config) per vendor.
fn read_sets_file() -> Vec<(&'static str, &'static str, bool)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("generated/sets.txt");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (the list of checked-in sets)", path.display()));
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut words = line.split_whitespace();
        let (Some(kernel), Some(vendors)) = (words.next(), words.next()) else {
            panic!(
                "{}:{}: expected `KERNEL VENDORS [not-built=VENDORS]`",
                path.display(),
                n + 1
            );
        };
        let not_built: Vec<&str> = match words.next() {
            Some(w) => w
                .strip_prefix("not-built=")
                .unwrap_or_else(|| {
                    panic!(
                        "{}:{}: `{w}`: expected not-built=VENDORS",
                        path.display(),
                        n + 1
                    )
                })
                .split(',')
                .collect(),
            None => Vec::new(),
        };
        let kernel: &'static str = Box::leak(kernel.to_string().into_boxed_str());
        for v in vendors.split(',') {
            let built = !not_built.contains(&v);
            out.push((kernel, &*Box::leak(v.to_string().into_boxed_str()), !built));
        }
    }
    out
}

fn sets_file() -> &'static [(&'static str, &'static str, bool)] {
    static SETS: std::sync::OnceLock<Vec<(&'static str, &'static str, bool)>> =
        std::sync::OnceLock::new();
    SETS.get_or_init(read_sets_file)
}

/// The checked-in sets (kernel, vendor) under `generated/`, as `generated/sets.txt` lists them
/// and scripts/regenerate.sh writes them; the one list every test over the checked-in sets
/// uses. A kernel is a series (`7.2`) or a series and flavor (`6.12-cloud`).
pub(crate) fn checked_in_sets() -> &'static [(&'static str, &'static str)] {
    static PAIRS: std::sync::OnceLock<Vec<(&'static str, &'static str)>> =
        std::sync::OnceLock::new();
    PAIRS.get_or_init(|| sets_file().iter().map(|&(k, v, _)| (k, v)).collect())
}

/// Checked-in sets whose vendor Debian's config does not build (`not-built=` in
/// `generated/sets.txt`): generated with `--not-built`, as scripts/regenerate.sh does, without
/// which `generate` refuses a vendor-less set.
pub(crate) fn not_built() -> &'static [(&'static str, &'static str)] {
    static PAIRS: std::sync::OnceLock<Vec<(&'static str, &'static str)>> =
        std::sync::OnceLock::new();
    PAIRS.get_or_init(|| {
        sets_file()
            .iter()
            .filter(|s| s.2)
            .map(|&(k, v, _)| (k, v))
            .collect()
    })
}

/// The kernels of the checked-in sets, in the file's order, each once.
pub(crate) fn checked_in_kernels() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for &(k, _) in checked_in_sets() {
        if !out.contains(&k) {
            out.push(k);
        }
    }
    out
}

/// The directory of a checked-in set.
pub(crate) fn checked_in_set(ver: &str, vendor: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("generated")
        .join(format!("linux-{ver}"))
        .join(vendor)
}

/// Where this test process generates fresh sets, laid out as `generated/`: the sets under
/// `linux-<ver>/<vendor>/`, the shared `probegen.bpf.h` at the root (`--header-dir`).
pub(crate) fn generated_root() -> PathBuf {
    std::env::temp_dir().join(format!("probegen-sets-{}", std::process::id()))
}

/// The staleness check of everything generated and checked in: each (checked-in file, fresh
/// text) pair must be equal byte for byte; the failure lists every stale file with the start of
/// its diff and the command that refreshes them. `None` as fresh text: the file should not
/// exist.
pub(crate) fn assert_fresh(files: &[(PathBuf, Option<Vec<u8>>)]) {
    let mut stale = Vec::new();
    for (checked_in, fresh) in files {
        let current = std::fs::read(checked_in).ok();
        if current == *fresh {
            continue;
        }
        let dir = temp_dir("fresh");
        let fresh_copy = dir.join(format!("fresh-{}", stale.len()));
        std::fs::write(&fresh_copy, fresh.as_deref().unwrap_or_default())
            .unwrap_or_else(|e| panic!("{}: {e}", fresh_copy.display()));
        let diff = std::process::Command::new("diff")
            .arg("-u")
            .arg(checked_in)
            .arg(&fresh_copy)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let diff: String = diff.lines().take(60).collect::<Vec<_>>().join("\n");
        stale.push(format!("{}\n{diff}", checked_in.display()));
    }
    assert!(
        stale.is_empty(),
        "generated/ is stale; refresh it with `scripts/regenerate.sh` and commit:\n{}",
        stale.join("\n\n")
    );
}

/// [`generated_set`] with extra `generate` arguments (`--not-built` for a vendor the config
/// does not build).
pub(crate) fn generated_set_with(ver: &str, vendor: &str, extra: &[&str]) -> PathBuf {
    use std::sync::{Mutex, OnceLock};
    static DONE: OnceLock<Mutex<BTreeMap<(String, String), PathBuf>>> = OnceLock::new();
    let done = DONE.get_or_init(|| Mutex::new(BTreeMap::new()));
    let mut done = done.lock().unwrap_or_else(|e| e.into_inner());
    let key = (ver.to_string(), vendor.to_string());
    if let Some(p) = done.get(&key) {
        return p.clone();
    }
    let root = generated_root();
    let out = root.join(format!("linux-{ver}")).join(vendor);
    let src = kernel_dir(ver);
    let (src, out_s, root_s) = (
        src.to_string_lossy(),
        out.to_string_lossy(),
        root.to_string_lossy(),
    );
    let mut args = vec![
        "generate",
        "--kernel-src",
        &src,
        "--vendor",
        vendor,
        "--out",
        &out_s,
        "--header-dir",
        &root_s,
    ];
    args.extend_from_slice(extra);
    let o = probegen(&args);
    assert!(
        o.status.success(),
        "generate {ver} {vendor}: {}",
        stderr(&o)
    );
    done.insert(key, out.clone());
    out
}

/// Write a test file (its directory created), panicking with the path on failure.
pub(crate) fn write(path: &Path, text: &str) {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
    }
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// Append to a test file.
pub(crate) fn append(path: &Path, text: &str) {
    let old = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    write(path, &(old + text));
}
