//! analyzer: kernel RDMA sources -> facts and the call graph the kernel executes.
//!
//! Pipeline: [`source`] finds files and reads the config and Kbuild, [`preproc`] evaluates
//! `#if` against the config, [`cparse`] extracts per-file facts with tree-sitter-c, and
//! [`graph`] resolves names, macros, uverbs tables and `ib_device_ops` dispatch into a typed
//! petgraph call graph.

pub mod btf;
pub mod completeness;
pub mod cparse;
pub mod error;
pub mod facts_cache;
pub mod graph;
pub mod kbuild;
pub mod kconfig;
pub mod layout;
pub mod limits;
pub mod missing;
pub mod model;
pub mod opsdecl;
pub mod preproc;
pub mod source;
pub mod traceability;

pub use error::{AnalyzerError, Warning};
pub use graph::{CallGraph, EdgeKind, FnId, FnNode, VendorScope};
pub use model::RetKind;
