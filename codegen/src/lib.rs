//! codegen: the probe set as files. Manifest (serde_yaml), report (askama), BPF C and the
//! Rust record type (askama), all written atomically and byte-for-byte deterministic.

pub mod bpf;
pub mod build;
pub mod compare;
pub mod coverage;
pub mod manifest;
pub mod output;
pub mod validate;
pub mod verbs;

pub use build::build_manifest;
pub use manifest::{json_schema, Manifest};
pub mod report;

pub use report::render_all;
