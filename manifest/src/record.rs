//! The failure record, the one layout the BPF programs write and the collector reads. The C
//! side (`struct pg_record` in `probegen.bpf.h`) is rendered from [`RECORD_FIELDS`]; the Rust
//! side is [`PgRecord`], checked against the same table by a test. Every field sits at a
//! multiple of its alignment, so there is no padding: 96 bytes in all.

/// Arguments a record holds.
pub const RECORD_ARGS: usize = 4;
/// Largest errno the programs keep apart (the kernel's MAX_ERRNO).
pub const MAX_ERRNO: u32 = 4095;
/// Entries of the `errnos` per-CPU hash.
pub const ERRNO_ENTRIES: usize = 4096;
/// Default size of the `events` ring buffer in bytes (the loader may resize it before load).
pub const RINGBUF_BYTES: usize = 256 * 1024;

/// One field of the shared record: name, C type, C array suffix, Rust type, size in bytes, and
/// what it holds.
pub struct RecordField {
    pub name: &'static str,
    pub c_type: &'static str,
    pub c_suffix: &'static str,
    pub rust_type: &'static str,
    pub size: usize,
    pub meaning: &'static str,
}

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

/// The record, in order. Offsets: seq 0, ts_ns 8, probe_id 16, err 20, pid 24, tid 28,
/// cgroup_id 32, cpu 40, nargs 44, args 48, comm 80; 96 bytes, no padding.
pub const RECORD_FIELDS: &[RecordField] = &[
    field(
        "seq",
        ("__u64", ""),
        "u64",
        8,
        "per-CPU sequence number; gaps are drops",
    ),
    field("ts_ns", ("__u64", ""), "u64", 8, "bpf_ktime_get_ns()"),
    field(
        "probe_id",
        ("__u32", ""),
        "u32",
        4,
        "Probe.id in the manifest",
    ),
    field(
        "err",
        ("__s32", ""),
        "i32",
        4,
        "positive errno 1..4095, 0 when the failure carries none",
    ),
    field("pid", ("__u32", ""), "u32", 4, "thread group id"),
    field("tid", ("__u32", ""), "u32", 4, "thread id"),
    field(
        "cgroup_id",
        ("__u64", ""),
        "u64",
        8,
        "bpf_get_current_cgroup_id()",
    ),
    field(
        "cpu",
        ("__u32", ""),
        "u32",
        4,
        "CPU that ran the program (the seq domain)",
    ),
    field(
        "nargs",
        ("__u32", ""),
        "u32",
        4,
        "arguments recorded in args[]",
    ),
    field(
        "args",
        ("__u64", "[4]"),
        "[u64; 4]",
        8 * RECORD_ARGS,
        "recorded arguments, by ascending position",
    ),
    field(
        "comm",
        ("char", "[16]"),
        "[u8; 16]",
        16,
        "bpf_get_current_comm()",
    ),
];

/// Size of the record in bytes.
pub const fn record_size() -> usize {
    let mut i = 0;
    let mut n = 0;
    while i < RECORD_FIELDS.len() {
        n += RECORD_FIELDS[i].size;
        i += 1;
    }
    n
}

/// Size of a record in bytes.
pub const RECORD_SIZE: usize = record_size();

/// `+offset: meaning` of each field of [`RECORD_FIELDS`], for the comments of the C struct.
pub fn field_comments() -> Vec<String> {
    let mut off = 0;
    RECORD_FIELDS
        .iter()
        .map(|f| {
            let s = format!("+{off}: {}", f.meaning);
            off += f.size;
            s
        })
        .collect()
}

/// One failure record from the `events` ring buffer; mirrors `struct pg_record` field by field
/// (naturally aligned, no padding). `err` is a positive errno, 0 when the failure carries none;
/// `seq` counts per CPU, gaps are records dropped in the kernel.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PgRecord {
    /// +0: per-CPU sequence number; gaps are drops
    pub seq: u64,
    /// +8: bpf_ktime_get_ns()
    pub ts_ns: u64,
    /// +16: Probe.id in the manifest
    pub probe_id: u32,
    /// +20: positive errno 1..4095, 0 when the failure carries none
    pub err: i32,
    /// +24: thread group id
    pub pid: u32,
    /// +28: thread id
    pub tid: u32,
    /// +32: bpf_get_current_cgroup_id()
    pub cgroup_id: u64,
    /// +40: CPU that ran the program (the seq domain)
    pub cpu: u32,
    /// +44: arguments recorded in args[]
    pub nargs: u32,
    /// +48: recorded arguments, by ascending position
    pub args: [u64; 4],
    /// +80: bpf_get_current_comm()
    pub comm: [u8; 16],
}

const _: () = assert!(std::mem::size_of::<PgRecord>() == RECORD_SIZE);

/// Key of the `errnos` per-CPU hash (`struct pg_errno_key`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PgErrnoKey {
    pub probe_id: u32,
    pub err: u32,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::offset_of;

    #[test]
    fn record_has_no_padding() {
        // Each field starts at a multiple of its alignment.
        let mut off = 0;
        for f in RECORD_FIELDS {
            let align = match f.c_type {
                "__u64" | "__s64" => 8,
                "__u32" | "__s32" => 4,
                _ => 1,
            };
            assert_eq!(off % align, 0, "{} at {off}", f.name);
            off += f.size;
        }
        assert_eq!(off, 96);
        assert_eq!(record_size() % 8, 0);
    }

    /// The Rust mirror has the fields of the table, at the table's offsets.
    #[test]
    fn pg_record_matches_the_field_table() {
        let offsets = [
            ("seq", offset_of!(PgRecord, seq)),
            ("ts_ns", offset_of!(PgRecord, ts_ns)),
            ("probe_id", offset_of!(PgRecord, probe_id)),
            ("err", offset_of!(PgRecord, err)),
            ("pid", offset_of!(PgRecord, pid)),
            ("tid", offset_of!(PgRecord, tid)),
            ("cgroup_id", offset_of!(PgRecord, cgroup_id)),
            ("cpu", offset_of!(PgRecord, cpu)),
            ("nargs", offset_of!(PgRecord, nargs)),
            ("args", offset_of!(PgRecord, args)),
            ("comm", offset_of!(PgRecord, comm)),
        ];
        assert_eq!(offsets.len(), RECORD_FIELDS.len());
        let mut off = 0;
        for (f, (name, o)) in RECORD_FIELDS.iter().zip(offsets) {
            assert_eq!(f.name, name);
            assert_eq!(o, off, "{name}");
            off += f.size;
        }
        assert_eq!(std::mem::size_of::<PgRecord>(), RECORD_SIZE);
        // The doc comments of the mirror are the table's `+offset: meaning`.
        let src = include_str!("record.rs");
        for c in field_comments() {
            assert!(src.contains(&format!("/// {c}\n")), "{c}");
        }
    }
}
