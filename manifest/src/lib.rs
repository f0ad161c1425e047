//! manifest: the contract between the generator and the runtime. The manifest's types (read
//! and written as `manifest.yaml`), its JSON Schema, the value vocabulary as enums, the
//! failure record's layout and the BPF program and section names. Both sides depend on this
//! crate and on nothing of each other; it depends on no workspace crate and parses no C.

// The modules are private; this file is the crate's one face (`pub use` below).
pub mod btf_kind;
mod errno;
mod html;
mod input;
mod naming;
mod record;
mod summary;
mod trace;
mod types;
mod union;
mod validate;
mod vocab;
mod yaml;

pub use errno::{errno_name, errno_number, Errno};
pub use html::escape_html;
pub use input::{
    check_text, check_yaml_nesting, read_bounded, read_text, InputError, MAX_CSV_BYTES,
    MAX_MANIFEST_BYTES, MAX_RULES_BYTES, MAX_YAML_FLOW_DEPTH,
};
pub use naming::{
    baseline_entry_name, baseline_entry_section, baseline_handlers, baseline_session_name,
    baseline_session_section, data_plane_section, fexit_section, kprobe_entry_name,
    kretprobe_return_name, kretprobe_section, program_name,
};
pub use record::{
    field_comments, record_size, PgErrnoKey, PgRecord, RecordField, ERRNO_ENTRIES, MAX_ERRNO,
    RECORD_ARGS, RECORD_FIELDS, RECORD_SIZE, RINGBUF_BYTES,
};
pub use summary::ProbeSummary;
pub use trace::{
    trace_field_comments, trace_size, PgTrace, TRACE_FIELDS, TRACE_RINGBUF_BYTES, TRACE_SIZE,
    TRACE_STEPS,
};
pub use types::{
    json_schema, DataPlaneEvidence, DataPlaneOwner, DataPlaneProbe, Degraded, ErrorSite, Excluded,
    FocusOp, KernelInfo, Manifest, OwnerObject, Probe, ProbeArg, Stats, Suggestion,
    DATA_PLANE_KIND, MANIFEST_WHAT, SCHEMA_ID,
};
pub use union::union;
pub use validate::{validate, ManifestError, MAX_PROBE_ID};
pub use vocab::{
    Attach, DataPlaneClass, DataPlaneVia, Derivation, FocusKind, GapKind, Layer, Object, Relation,
    ReturnKind, Rule, SiteClass, UnknownValue,
};
