//! manifest: the contract between the generator and the runtime. The manifest's types (read
//! and written as `manifest.yaml`), its JSON Schema, the value vocabulary as enums, the
//! failure record's layout and the BPF program and section names. Both sides depend on this
//! crate and on nothing of each other; it depends on no workspace crate and parses no C.

pub mod input;
pub mod naming;
pub mod record;
mod types;
mod validate;
pub mod vocab;

pub use types::{
    json_schema, Degraded, Excluded, FocusOp, KernelInfo, Manifest, Probe, ProbeArg, Stats,
    Suggestion, MANIFEST_WHAT, SCHEMA_ID,
};
pub use validate::{validate, MAX_PROBE_ID};
pub use vocab::{
    Attach, Derivation, FocusKind, GapKind, Layer, Object, Relation, ReturnKind, Rule,
};
