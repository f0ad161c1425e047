//! analyzer: kernel RDMA sources -> facts and the call graph the kernel executes.
//!
//! Inside: `source` finds files and reads the config and Kbuild, `preproc` evaluates `#if`
//! against the config, `cparse` extracts per-file facts with tree-sitter-c (cached per file by
//! `facts_cache`), and `graph` resolves names, macros, uverbs tables and `ib_device_ops`
//! dispatch into a typed petgraph call graph; `btf` and `traceability` read the binaries for
//! attach verdicts. Outside, only what this file re-exports.

// The modules are private; this file is the crate's one face (`pub use` below).
mod btf;
mod cfields;
mod children;
mod completeness;
mod cparse;
mod error;
mod errsites;
mod facts_cache;
mod graph;
mod kbuild;
mod kconfig;
mod layout;
mod limits;
mod missing;
mod model;
mod opsdecl;
mod preproc;
mod source;
mod timings;
mod traceability;
mod tree_heap;
mod valuerefs;

// The tree: files, config, Kbuild, the per-file facts cache.
pub use error::{AnalyzerError, Warning};
pub use facts_cache::{CacheLocation, CacheStats, DEFAULT_MAX_BYTES as DEFAULT_FACTS_CACHE_BYTES};
pub use kbuild::BuildMap;
pub use kconfig::{ConfigValue, KernelConfig};
pub use layout::SourceLayout;
pub use limits::MAX_NESTING;
pub use source::{LoadOptions, SourceTree};
pub use timings::LoadTimings;
pub use tree_heap::install as use_mimalloc_for_trees;

// The C front end, one file at a time (what the facts cache stores; the fuzz target's input).
pub use cparse::{extract, new_parser};
pub use model::{
    CallSite, CallTarget, ErrorSite, FileFacts, FunctionDef, MacroDef, OpsTable, Param, RefSite,
    RetKind, SiteShape, UapiMethod, ValueRef, WriteCommand,
};
pub use opsdecl::{ops_struct_members, struct_pointee, OpsMemberDecl};
pub use preproc::{blank_type_bodies, preprocess, Preprocessed};

// The call graph.
pub use graph::{
    CallEdge, CallGraph, Dispatch, EdgeKind, FnId, FnNode, GraphStats, OpsTableInfo, UnknownEntry,
    VendorScope, DEFAULT_ENTRIES,
};

// What the input lost.
pub use completeness::{
    file_gaps, module_gaps, summary as degradation_summary, Degradation, DegradedKind,
};
pub use missing::{why_missing, why_missing_file};

// The binaries: BTF, ELF symbols and attach verdicts.
pub use btf::{Attach as BtfAttach, BaseBtf, BinaryCounts, BtfError, BtfSignature, ModuleBinary};
pub use traceability::{AttachVerdict, Binaries};
