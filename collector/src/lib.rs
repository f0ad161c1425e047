//! Runtime collector: loads a probe set's BPF object, attaches it per its manifest, drains the
//! failure records continuously and writes one per-host snapshot per interval.
//!
//! The face is this file's `pub use` list; every module is private. Roles, one folder or file
//! each, and the one way they depend on each other:
//!
//! * [`wire`](Snapshot): the snapshot and what it serialises, the sink status, the run totals.
//!   It imports only the leaves (the probe table, the record, errno names, the `Owner` type).
//! * processing (`pipeline`, `chains`, `owner`, `procinfo`, `decode`): records in, a
//!   [`Snapshot`] per window out; builds wire values, never sees a sink.
//! * sources (`live/`: the BPF loader and the ring buffer; `replay/`: the replay file format
//!   and the replay source), behind the one `Source` trait that feeds the pipeline.
//! * `sinks/`: the [`Sink`] trait and the JSONL file. A sink sees wire types only; the
//!   ClickHouse spool (`sink-clickhouse`) and the Prometheus exposition (`sink-prometheus`)
//!   implement the same trait in their own crates and come in through [`Hooks::sinks`].
//! * `run/`: the loop over a source, the sinks in order, the error count, the [`Event`]s the
//!   embedder prints ([`Hooks`]); the library prints no chain line and no sink error.
//!
//! So: wire <- processing <- sources <- run, and sinks <- run; a sink imports wire, never
//! the pipeline (`module_imports_point_one_way` below holds it).
//!
//! Record layout: the `manifest` crate's `PgRecord`, the one Rust mirror of the C
//! `struct pg_record` (checked against the shared field table there).

mod chains;
mod decode;
mod errno;
mod error;
mod kernel_state;
mod live;
mod owner;
mod pipeline;
mod probes;
mod procinfo;
mod record;
mod relation;
mod replay;
mod run;
mod sinks;
mod source;
mod stop;
mod timefmt;
mod timings;
mod wire;

pub use decode::{comm_str, encode};
pub use errno::errno_label;
pub use error::CollectError;
pub use kernel_state::{AttachStatus, KernelTotals};
// who gets the ticket for a chain whose origin is this probe (tests and tools ask it too)
pub use owner::{decide_for as owner_of, Owner};
pub use pipeline::{Pipeline, PipelineConfig};
pub use probes::{ProbeInfo, ProbeTable};
pub use procinfo::{ProcCache, ProcInfo};
pub use record::{PgErrnoKey, PgRecord, RECORD_SIZE};
pub use replay::{read as read_replay, ReplayError};
pub use run::outputs::MAX_CHAIN_LINES;
pub use run::{run, Event, Hooks, Options, Summary};
pub use sinks::jsonl::JsonlSink;
pub use sinks::{Sink, SinkError, SinkReport};
pub use stop::request_stop;
pub use timefmt::unix_ns;
pub use wire::chains::monotonic_ns;
pub use wire::{
    ChainClock, ChainView, ChainsOut, CounterOut, Drops, Errors, Invariant, InvariantProbe, Link,
    Rec, RecordsOut, SharedPart, SinkStatus, Snapshot, Totals, Window,
};

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::{Path, PathBuf};

    /// Every `.rs` file of this crate's `src`, as a path relative to it.
    fn files(dir: &Path, rel: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let (path, name) = (e.path(), PathBuf::from(e.file_name()));
            if path.is_dir() {
                files(&path, &rel.join(&name), out);
            } else if path.extension().is_some_and(|x| x == "rs") {
                out.push(rel.join(name));
            }
        }
    }

    /// The module of `file` as a list of names (`wire/mod.rs` and `wire.rs`: `[wire]`).
    fn module_of(file: &Path) -> Vec<String> {
        let mut parts: Vec<String> = file
            .iter()
            .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
            .collect();
        if parts.last().is_some_and(|l| l == "mod" || l == "lib") {
            parts.pop();
        }
        parts
    }

    /// The file a module path names: the deepest prefix of `path` that is a module.
    fn resolve(path: &[String], modules: &BTreeMap<Vec<String>, PathBuf>) -> Option<PathBuf> {
        (1..=path.len())
            .rev()
            .find_map(|n| modules.get(&path[..n]).cloned())
    }

    /// The files each file imports (`crate::` and `super::` paths, outside its test module
    /// and its comments).
    fn imports(src: &Path) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
        let mut all = Vec::new();
        files(src, Path::new(""), &mut all);
        let modules: BTreeMap<Vec<String>, PathBuf> =
            all.iter().map(|f| (module_of(f), f.clone())).collect();
        let mut graph = BTreeMap::new();
        for f in &all {
            let text = std::fs::read_to_string(src.join(f)).unwrap_or_default();
            let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
            let code = code
                .split("#[cfg(test)]\npub(crate) mod tests")
                .next()
                .unwrap_or("");
            let here = module_of(f);
            // a file's own module for `super::`: `a/b.rs` and `a/b/mod.rs` are both in `a`
            let parent: Vec<String> = here[..here.len().saturating_sub(1)].to_vec();
            let mut to = BTreeSet::new();
            for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
                for (prefix, base) in [("crate::", Vec::new()), ("super::", parent.clone())] {
                    for (i, _) in line.match_indices(prefix) {
                        let rest = &line[i + prefix.len()..];
                        let mut path = base.clone();
                        path.extend(
                            rest.split("::")
                                .map(|s| {
                                    s.chars()
                                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                                        .collect::<String>()
                                })
                                .take_while(|s| !s.is_empty()),
                        );
                        if let Some(target) = resolve(&path, &modules).filter(|t| t != f) {
                            to.insert(target);
                        }
                    }
                }
            }
            graph.insert(f.clone(), to);
        }
        graph
    }

    /// A file on a circle of imports, if any.
    fn circle(graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Option<Vec<PathBuf>> {
        fn visit(
            f: &PathBuf,
            graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>,
            stack: &mut Vec<PathBuf>,
            done: &mut BTreeSet<PathBuf>,
        ) -> Option<Vec<PathBuf>> {
            if let Some(i) = stack.iter().position(|s| s == f) {
                return Some(stack[i..].to_vec());
            }
            if !done.insert(f.clone()) {
                return None;
            }
            stack.push(f.clone());
            for t in graph.get(f).into_iter().flatten() {
                if let Some(c) = visit(t, graph, stack, done) {
                    return Some(c);
                }
            }
            stack.pop();
            None
        }
        let mut done = BTreeSet::new();
        graph
            .keys()
            .find_map(|f| visit(f, graph, &mut Vec::new(), &mut done))
    }

    /// The files of this crate import each other without a circle, and one way: the wire
    /// types import no processing, source, sink or run module; a sink imports the wire types,
    /// never the processing stage (pipeline, chains, owner) or a source; the sources do not
    /// import the run loop.
    #[test]
    fn module_imports_point_one_way() {
        let graph = imports(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
        assert!(graph.len() > 20, "{graph:?}");
        assert_eq!(circle(&graph), None, "a circle of imports");
        let under =
            |f: &Path, dir: &str| f.starts_with(dir) || f == Path::new(&format!("{dir}.rs"));
        let rules: &[(&str, &[&str])] = &[
            (
                "wire",
                &[
                    "pipeline", "chains", "run", "sinks", "live", "replay", "source",
                ],
            ),
            (
                "sinks",
                &[
                    "pipeline", "chains", "owner", "run", "live", "replay", "source",
                ],
            ),
            ("live", &["run"]),
            ("replay", &["run", "live"]),
            ("source", &["run"]),
        ];
        for (from, forbidden) in rules {
            for (f, to) in graph.iter().filter(|(f, _)| under(f, from)) {
                for t in to {
                    assert!(
                        !forbidden.iter().any(|x| under(t, x)),
                        "{} imports {}",
                        f.display(),
                        t.display()
                    );
                }
            }
        }
    }
}
