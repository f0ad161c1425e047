//! pipeline: one call per command. Each command of the CLI (`graph`, `path`, `generate`,
//! `explain`, `check`, `port`, `diff`, `coverage`) is one function here that runs the data flow
//! manifest -> analyzer -> heuristics -> codegen / maintain from its options: the rules
//! (parsed once), the vendors (checked against them in one place), the tree (through the facts
//! cache), the graph, the selection, the manifest and the files. Every command that selects
//! does it through the same function, so `check`, `explain` and `port` see the sets
//! `generate` writes. The CLI parses arguments, calls one function and prints what it returns
//! and the [`Notice`]s it is given; failures are one [`Error`] each.

mod degraded;
mod error;
mod generate;
mod maintenance;
mod notice;
mod queries;
mod render;
mod selection;
mod source;

/// For the binary, first thing: tree-sitter allocates from mimalloc and a heap per file.
pub use analyzer::use_mimalloc_for_trees;
pub use degraded::degraded_markdown;
pub use error::Error;
pub use generate::generate;
pub use maintenance::{
    check, coverage, diff, port, port_sets, read_manifest, write_page, CheckReport, PortOptions,
};
pub use notice::Notice;
pub use queries::{explain, graph, path, Explanation, GraphSummary};
pub use render::render_bpf;
pub use selection::{manifest_of, select, select_vendors, EachSelection, Finish, Selected, Take};
pub use source::{load_rules, source_dirs, Loaded, SourceOptions};
