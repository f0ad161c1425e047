//! codegen: the probe set as files. Manifest (serde_yaml, types in the `manifest` crate), report
//! (askama), BPF C (askama: `probes.bpf.c` per set and the shared `probegen.bpf.h`), all written
//! atomically and byte-for-byte deterministic.

// The modules are private; this file is the crate's one face (`pub use` below).
mod attach;
mod bpf;
mod build;
mod dataplane;
mod output;
mod picture;
mod report;
mod sites;

pub use bpf::{render_bpf, render_header, HEADER_NAME};
pub use build::{build_manifest, degraded as degraded_entry, error_sites_of, validate, Mismatch};
pub use output::{write_atomic, write_set_atomic, OutputError};
pub use picture::{render_change_html, ChangeMarks, RemovedProbe};
pub use report::{render_all, render_report, RenderContext, RenderError};
