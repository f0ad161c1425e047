//! The success-trace record (`struct pg_trace` in `probegen.bpf.h`), the layout the baseline
//! programs write into the `baseline` ring buffer and the collector reads: one sampled call of
//! a uverbs handler with the probed functions that returned during it, in return order. Like
//! the failure record it is rendered from one field table ([`TRACE_FIELDS`]) and mirrored by
//! [`PgTrace`], checked against the same table by a test; no padding.

use crate::record::RecordField;

/// Steps (probed functions returning inside the traced call) a trace holds; more are counted
/// in `lost`. At most 43 probes are reachable from one handler in the largest set.
pub const TRACE_STEPS: usize = 48;

/// Default size of the `baseline` ring buffer in bytes (about 390 traces).
pub const TRACE_RINGBUF_BYTES: usize = 256 * 1024;

const fn field(
    name: &'static str,
    (c_type, c_suffix): (&'static str, &'static str),
    rust_type: &'static str,
    size: usize,
    meaning: &'static str,
) -> RecordField {
    RecordField {
        name,
        c_type,
        c_suffix,
        rust_type,
        size,
        meaning,
    }
}

/// The trace record, in order; 656 bytes, no padding.
pub const TRACE_FIELDS: &[RecordField] = &[
    field(
        "seq",
        ("__u64", ""),
        "u64",
        8,
        "per-CPU trace sequence number (bl_seq)",
    ),
    field("ts_ns", ("__u64", ""), "u64", 8, "the handler's return"),
    field("start_ns", ("__u64", ""), "u64", 8, "the handler's entry"),
    field(
        "cgroup_id",
        ("__u64", ""),
        "u64",
        8,
        "bpf_get_current_cgroup_id()",
    ),
    field(
        "handler",
        ("__u32", ""),
        "u32",
        4,
        "probe id of the uverbs handler",
    ),
    field(
        "err",
        ("__s32", ""),
        "i32",
        4,
        "the handler's errno, 0 when none",
    ),
    field(
        "failed",
        ("__u32", ""),
        "u32",
        4,
        "1: the call failed (its path, not a success)",
    ),
    field("pid", ("__u32", ""), "u32", 4, "thread group id"),
    field("tid", ("__u32", ""), "u32", 4, "thread id"),
    field(
        "cpu",
        ("__u32", ""),
        "u32",
        4,
        "CPU that ended the call (the seq domain)",
    ),
    field("nsteps", ("__u32", ""), "u32", 4, "steps recorded"),
    field(
        "lost",
        ("__u32", ""),
        "u32",
        4,
        "steps past TRACE_STEPS, not recorded",
    ),
    field(
        "step_probe",
        ("__u32", "[48]"),
        "[u32; 48]",
        4 * TRACE_STEPS,
        "probe id of each step, in return order",
    ),
    field(
        "step_err",
        ("__s32", "[48]"),
        "[i32; 48]",
        4 * TRACE_STEPS,
        "errno of each step, -1 failed without one, 0 succeeded",
    ),
    field(
        "step_end_ns",
        ("__u32", "[48]"),
        "[u32; 48]",
        4 * TRACE_STEPS,
        "each step's return, ns after the handler's entry (saturated)",
    ),
    field(
        "comm",
        ("char", "[16]"),
        "[u8; 16]",
        16,
        "bpf_get_current_comm()",
    ),
];

/// Size of the trace record in bytes.
pub const fn trace_size() -> usize {
    let mut i = 0;
    let mut n = 0;
    while i < TRACE_FIELDS.len() {
        n += TRACE_FIELDS[i].size;
        i += 1;
    }
    n
}

/// `+offset: meaning` of each field of [`TRACE_FIELDS`], for the comments of the C struct.
pub fn trace_field_comments() -> Vec<String> {
    let mut off = 0;
    TRACE_FIELDS
        .iter()
        .map(|f| {
            let s = format!("+{off}: {}", f.meaning);
            off += f.size;
            s
        })
        .collect()
}

/// One trace from the `baseline` ring buffer; mirrors `struct pg_trace` field by field.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PgTrace {
    /// +0: per-CPU trace sequence number (bl_seq)
    pub seq: u64,
    /// +8: the handler's return
    pub ts_ns: u64,
    /// +16: the handler's entry
    pub start_ns: u64,
    /// +24: bpf_get_current_cgroup_id()
    pub cgroup_id: u64,
    /// +32: probe id of the uverbs handler
    pub handler: u32,
    /// +36: the handler's errno, 0 when none
    pub err: i32,
    /// +40: 1: the call failed (its path, not a success)
    pub failed: u32,
    /// +44: thread group id
    pub pid: u32,
    /// +48: thread id
    pub tid: u32,
    /// +52: CPU that ended the call (the seq domain)
    pub cpu: u32,
    /// +56: steps recorded
    pub nsteps: u32,
    /// +60: steps past TRACE_STEPS, not recorded
    pub lost: u32,
    /// +64: probe id of each step, in return order
    pub step_probe: [u32; 48],
    /// +256: errno of each step, -1 failed without one, 0 succeeded
    pub step_err: [i32; 48],
    /// +448: each step's return, ns after the handler's entry (saturated)
    pub step_end_ns: [u32; 48],
    /// +640: bpf_get_current_comm()
    pub comm: [u8; 16],
}

impl Default for PgTrace {
    fn default() -> Self {
        PgTrace {
            seq: 0,
            ts_ns: 0,
            start_ns: 0,
            cgroup_id: 0,
            handler: 0,
            err: 0,
            failed: 0,
            pid: 0,
            tid: 0,
            cpu: 0,
            nsteps: 0,
            lost: 0,
            step_probe: [0; TRACE_STEPS],
            step_err: [0; TRACE_STEPS],
            step_end_ns: [0; TRACE_STEPS],
            comm: [0; 16],
        }
    }
}

/// Size of a trace record in bytes.
pub const TRACE_SIZE: usize = trace_size();

const _: () = assert!(std::mem::size_of::<PgTrace>() == TRACE_SIZE);

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::offset_of;

    /// The Rust mirror has the fields of the table, at the table's offsets, no padding.
    #[test]
    fn pg_trace_matches_the_field_table() {
        let offsets = [
            ("seq", offset_of!(PgTrace, seq)),
            ("ts_ns", offset_of!(PgTrace, ts_ns)),
            ("start_ns", offset_of!(PgTrace, start_ns)),
            ("cgroup_id", offset_of!(PgTrace, cgroup_id)),
            ("handler", offset_of!(PgTrace, handler)),
            ("err", offset_of!(PgTrace, err)),
            ("failed", offset_of!(PgTrace, failed)),
            ("pid", offset_of!(PgTrace, pid)),
            ("tid", offset_of!(PgTrace, tid)),
            ("cpu", offset_of!(PgTrace, cpu)),
            ("nsteps", offset_of!(PgTrace, nsteps)),
            ("lost", offset_of!(PgTrace, lost)),
            ("step_probe", offset_of!(PgTrace, step_probe)),
            ("step_err", offset_of!(PgTrace, step_err)),
            ("step_end_ns", offset_of!(PgTrace, step_end_ns)),
            ("comm", offset_of!(PgTrace, comm)),
        ];
        assert_eq!(offsets.len(), TRACE_FIELDS.len());
        let mut off = 0;
        for (f, (name, o)) in TRACE_FIELDS.iter().zip(offsets) {
            assert_eq!(f.name, name);
            assert_eq!(o, off, "{name}");
            let align = if f.c_type == "__u64" { 8 } else { 4 };
            assert_eq!(off % align, 0, "{name} at {off}");
            off += f.size;
        }
        assert_eq!(off, 656);
        assert_eq!(std::mem::size_of::<PgTrace>(), TRACE_SIZE);
        // the arrays are TRACE_STEPS long in C too
        for f in TRACE_FIELDS.iter().filter(|f| f.name.starts_with("step_")) {
            assert_eq!(f.c_suffix, format!("[{TRACE_STEPS}]"));
        }
        let src = include_str!("trace.rs");
        for c in trace_field_comments() {
            assert!(src.contains(&format!("/// {c}\n")), "{c}");
        }
    }
}
