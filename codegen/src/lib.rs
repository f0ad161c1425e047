//! codegen: the probe set as files. Manifest (serde_yaml, types in the `manifest` crate), report
//! (askama), BPF C (askama: `probes.bpf.c` per set and the shared `probegen.bpf.h`), all written
//! atomically and byte-for-byte deterministic.

pub mod bpf;
pub mod build;
pub mod output;
pub mod report;

pub use build::build_manifest;
pub use report::render_all;
