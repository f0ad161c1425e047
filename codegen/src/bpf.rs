//! The BPF side of a probe set: `probes.bpf.c` (one small observe-only program per attachable
//! probe, emitting a fixed-size record on failure) and `record.rs` (the same record layout for
//! the collector). Both come from askama templates in `codegen/templates/` and are byte-for-byte
//! deterministic: everything is taken from the manifest in its order, nothing from the clock or
//! a hash map.
//!
//! Design choices documented in the generated C:
//! * `struct pg_record` keeps the field order of the issue; it has no padding holes (every
//!   field sits at a multiple of its alignment, 96 bytes in all, see [`RECORD_FIELDS`]).
//! * `errnos` is a `BPF_MAP_TYPE_PERCPU_HASH` keyed by `{probe_id, errno}` (4096 entries): it
//!   keeps exact errnos 1..4095, including the kernel-internal ones above 511 (ERESTARTSYS,
//!   ENOTSUPP = 524) that a small per-probe array would fold away, and costs memory only per
//!   pair, not per probe × errno. `failures` stays the authoritative count: if the hash ever
//!   fills, the per-probe sum falls short of it and the difference shows the loss.
//! * int functions fail when the return value, sign-extended from `ret_size` bytes, is
//!   negative (positive values are counts in several kernel functions); pointers fail on
//!   IS_ERR or NULL (errno 0); bool and void functions only count calls.
//! * clone-only functions get a `kretprobe/<clone symbol>` fallback that cannot read arguments
//!   at return, so it records none.

use askama::Template;

use crate::manifest::{Manifest, Probe};

/// Ring buffer size the C file declares (the loader may resize it before load).
pub const RINGBUF_BYTES: usize = 256 * 1024;
/// Largest errno the programs keep apart (the kernel's MAX_ERRNO).
pub const MAX_ERRNO: u32 = 4095;
/// Arguments a record holds.
pub const RECORD_ARGS: usize = 4;
/// Entries of the `errnos` per-CPU hash.
pub const ERRNO_ENTRIES: usize = 4096;
/// `bpf_get_func_arg` reaches at most this many arguments (MAX_BPF_FUNC_ARGS).
const MAX_FUNC_ARGS: usize = 12;

/// One field of the shared record: name, C type, C array suffix, Rust type, size in bytes.
pub struct RecordField {
    pub name: &'static str,
    pub c_type: &'static str,
    pub c_suffix: &'static str,
    pub rust_type: &'static str,
    pub size: usize,
}

const fn field(
    name: &'static str,
    c_type: &'static str,
    c_suffix: &'static str,
    rust_type: &'static str,
    size: usize,
) -> RecordField {
    RecordField {
        name,
        c_type,
        c_suffix,
        rust_type,
        size,
    }
}

/// The record, in order. Offsets: seq 0, ts_ns 8, probe_id 16, err 20, pid 24, tid 28,
/// cgroup_id 32, cpu 40, nargs 44, args 48, comm 80; 96 bytes, no padding.
pub const RECORD_FIELDS: &[RecordField] = &[
    field("seq", "__u64", "", "u64", 8),
    field("ts_ns", "__u64", "", "u64", 8),
    field("probe_id", "__u32", "", "u32", 4),
    field("err", "__s32", "", "i32", 4),
    field("pid", "__u32", "", "u32", 4),
    field("tid", "__u32", "", "u32", 4),
    field("cgroup_id", "__u64", "", "u64", 8),
    field("cpu", "__u32", "", "u32", 4),
    field("nargs", "__u32", "", "u32", 4),
    field("args", "__u64", "[4]", "[u64; 4]", 8 * RECORD_ARGS),
    field("comm", "char", "[16]", "[u8; 16]", 16),
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

/// What a program does with the return value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RetKind {
    /// Sign-extend through this C cast, fail when negative.
    Int(&'static str),
    /// Fail on IS_ERR or NULL.
    Ptr,
    /// Count calls only (bool, void).
    None,
}

struct Program {
    id: u32,
    function: String,
    module: String,
    /// `fexit/<function>` or `kretprobe/<clone symbol>`.
    section: String,
    fexit: bool,
    /// One-line description for the comment above the program.
    comment: String,
    /// `int`, `ptr` or `none`.
    kind: &'static str,
    /// For `int`: the C cast that sign-extends the raw return value.
    cast: &'static str,
    /// Bit i set: record argument i.
    argmask: String,
    /// The recorded argument positions, for the comment (`-` when none).
    arglist: String,
    /// Other modules with a probe of the same function name (a bare name is ambiguous).
    also_in: String,
    /// For `ptr`: the failure test, `PG_PTR_FAILED` (IS_ERR or NULL) or `PG_IS_ERR` when the
    /// manifest says NULL is an ordinary return.
    ptr_check: &'static str,
}

#[derive(Template)]
#[template(path = "probes.bpf.c", escape = "none")]
struct BpfTemplate {
    kernel: String,
    config: String,
    vendor: String,
    refresh: String,
    nprobes: usize,
    record_size: usize,
    /// (declaration, comment with the offset)
    record_fields: Vec<(String, String)>,
    programs: Vec<Program>,
    nfexit: usize,
    nclone: usize,
    nskipped: usize,
}

#[derive(Template)]
#[template(path = "record.rs", escape = "none")]
struct RecordTemplate {
    kernel: String,
    vendor: String,
    refresh: String,
    record_size: usize,
    /// (name, Rust type, comment with the offset)
    record_fields: Vec<(&'static str, &'static str, String)>,
    /// (id, function literal, module literal)
    probes: Vec<(u32, String, String)>,
}

fn invalid(msg: String) -> askama::Error {
    askama::Error::Custom(msg.into())
}

/// Text safe inside a C block comment / Rust line comment: one line, no comment terminator.
fn comment_text(s: &str) -> String {
    s.replace("*/", "* /").replace(['\n', '\r'], " ")
}

/// Symbols go into section names and string literals: keep them to C identifier characters
/// (plus `.` for compiler clones such as `rxe_foo.isra.0`).
fn check_symbol(what: &str, s: &str, p: &Probe) -> Result<(), askama::Error> {
    let ok = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        && !s.starts_with(|c: char| c.is_ascii_digit() || c == '.');
    if ok {
        Ok(())
    } else {
        Err(invalid(format!(
            "probe {} ({}): {what} `{s}` is not a kernel symbol name",
            p.id, p.function
        )))
    }
}

fn sign_extend_cast(ret_size: u32) -> &'static str {
    match ret_size {
        1 => "(signed char)",
        2 => "(short)",
        8 => "(long)",
        // 4, and an unknown size: sign-extending from 32 bits is right for every errno.
        _ => "(int)",
    }
}

fn program(p: &Probe, m: &Manifest) -> Result<Program, askama::Error> {
    check_symbol("function", &p.function, p)?;
    let fexit = p.attach == "fexit";
    let section = if fexit {
        format!("fexit/{}", p.function)
    } else {
        let sym = p.attach_symbol.as_deref().ok_or_else(|| {
            invalid(format!(
                "probe {} ({}): clone-only without attach_symbol",
                p.id, p.function
            ))
        })?;
        check_symbol("attach_symbol", sym, p)?;
        format!("kretprobe/{sym}")
    };
    let kind = match p.returns.as_str() {
        "int" => RetKind::Int(sign_extend_cast(p.ret_size)),
        "ptr" => RetKind::Ptr,
        "bool" | "void" => RetKind::None,
        other => {
            return Err(invalid(format!(
                "probe {} ({}): unknown return kind `{other}`",
                p.id, p.function
            )))
        }
    };
    // Arguments: the manifest's list (its scalar parameters); none for a kretprobe
    // (argument registers are clobbered by the time the function returns).
    let mut positions: Vec<usize> = if !fexit {
        Vec::new()
    } else {
        p.args.iter().map(|a| a.index).collect()
    };
    positions.sort_unstable();
    positions.dedup();
    if let Some(&bad) = positions.iter().find(|&&i| i >= MAX_FUNC_ARGS) {
        return Err(invalid(format!(
            "probe {} ({}): argument {bad} is beyond the {MAX_FUNC_ARGS} bpf_get_func_arg reaches",
            p.id, p.function
        )));
    }
    positions.truncate(RECORD_ARGS);
    let mask: u32 = positions.iter().map(|&i| 1u32 << i).sum();
    let arglist = if positions.is_empty() {
        "-".to_string()
    } else {
        positions
            .iter()
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let returns = match kind {
        RetKind::Int(_) => format!("int, {} bytes", p.ret_size),
        RetKind::Ptr => "ptr".to_string(),
        RetKind::None => format!("{}, calls only", p.returns),
    };
    Ok(Program {
        id: p.id,
        function: p.function.clone(),
        module: comment_text(&p.module),
        section,
        fexit,
        comment: comment_text(&format!(
            "{}:{} ({}; {}:{})",
            p.module, p.function, returns, p.file, p.line
        )),
        ptr_check: if p.null_ok {
            "PG_IS_ERR"
        } else {
            "PG_PTR_FAILED"
        },
        kind: match kind {
            RetKind::Int(_) => "int",
            RetKind::Ptr => "ptr",
            RetKind::None => "none",
        },
        cast: match kind {
            RetKind::Int(c) => c,
            _ => "",
        },
        argmask: format!("{mask:#x}"),
        arglist,
        also_in: m
            .probes
            .iter()
            .filter(|q| q.function == p.function && q.module != p.module)
            .map(|q| comment_text(&q.module))
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// Size of the per-probe tables: one past the largest probe id (ids are positions in
/// `probes`), at least 1.
fn nprobes(m: &Manifest) -> usize {
    m.probes
        .iter()
        .map(|p| p.id as usize + 1)
        .max()
        .unwrap_or(0)
        .max(m.probes.len())
        .max(1)
}

/// `probes.bpf.c` for the manifest's attachable probes. `refresh_command` goes into the header
/// comment (`cargo run --release -- generate ...`).
pub fn render_bpf(m: &Manifest, refresh_command: &str) -> Result<String, askama::Error> {
    let programs = m
        .attachable()
        .map(|p| program(p, m))
        .collect::<Result<Vec<_>, _>>()?;
    let nfexit = programs.iter().filter(|p| p.fexit).count();
    let record_fields = RECORD_FIELDS
        .iter()
        .zip(field_comments())
        .map(|(f, what)| (format!("{} {}{};", f.c_type, f.name, f.c_suffix), what))
        .collect();
    BpfTemplate {
        kernel: comment_text(&m.kernel.version),
        config: comment_text(&m.kernel.config),
        vendor: comment_text(&m.vendor),
        refresh: comment_text(refresh_command),
        nprobes: nprobes(m),
        record_size: record_size(),
        record_fields,
        nfexit,
        nclone: programs.len() - nfexit,
        nskipped: m.probes.len() - programs.len(),
        programs,
    }
    .render()
}

/// `+offset: meaning` of each field of [`RECORD_FIELDS`].
fn field_comments() -> Vec<String> {
    let mut off = 0;
    RECORD_FIELDS
        .iter()
        .map(|f| {
            let s = format!("+{off}: {}", field_meaning(f.name));
            off += f.size;
            s
        })
        .collect()
}

fn field_meaning(name: &str) -> &'static str {
    match name {
        "seq" => "per-CPU sequence number; gaps are drops",
        "ts_ns" => "bpf_ktime_get_ns()",
        "probe_id" => "Probe.id in the manifest",
        "err" => "positive errno 1..4095, 0 when the failure carries none",
        "pid" => "thread group id",
        "tid" => "thread id",
        "cgroup_id" => "bpf_get_current_cgroup_id()",
        "cpu" => "CPU that ran the program (the seq domain)",
        "nargs" => "arguments recorded in args[]",
        "args" => "recorded arguments, by ascending position",
        "comm" => "bpf_get_current_comm()",
        _ => "",
    }
}

/// `record.rs`: the record layout and the probe table for the collector.
pub fn render_record(m: &Manifest, refresh_command: &str) -> Result<String, askama::Error> {
    let mut probes = Vec::new();
    for p in m.attachable() {
        check_symbol("function", &p.function, p)?;
        probes.push((p.id, format!("{:?}", p.function), format!("{:?}", p.module)));
    }
    RecordTemplate {
        kernel: comment_text(&m.kernel.version),
        vendor: comment_text(&m.vendor),
        refresh: comment_text(refresh_command),
        record_size: record_size(),
        record_fields: RECORD_FIELDS
            .iter()
            .zip(field_comments())
            .map(|(f, what)| (f.name, f.rust_type, what))
            .collect(),
        probes,
    }
    .render()
}

/// The record layout alone (no probe table), for the collector, which serves every probe set:
/// `collector/src/record.rs` is this text, checked in and compared by a staleness test.
pub fn render_record_layout() -> String {
    let mut s = String::from(
        "// Generated by probegen (codegen::bpf::render_record_layout) from RECORD_FIELDS.\n\
         // DO NOT EDIT: the collector's staleness test prints the fresh text when it differs.\n\
         //\n\
         // The layout of `struct pg_record` and `struct pg_errno_key` in every probes.bpf.c; the\n\
         // same for all probe sets (the probe table comes from the manifest at run time).\n\n\
         /// One failure record from the `events` ring buffer; mirrors `struct pg_record` field by field\n\
         /// (naturally aligned, no padding). `err` is a positive errno, 0 when the failure carries none;\n\
         /// `seq` counts per CPU, gaps are records dropped in the kernel.\n\
         #[repr(C)]\n\
         #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]\n\
         pub struct PgRecord {\n",
    );
    for (f, what) in RECORD_FIELDS.iter().zip(field_comments()) {
        s.push_str(&format!(
            "    /// {what}\n    pub {}: {},\n",
            f.name, f.rust_type
        ));
    }
    s.push_str(&format!(
        "}}\n\n/// Size of a record in bytes.\npub const RECORD_SIZE: usize = {};\n\n\
         const _: () = assert!(std::mem::size_of::<PgRecord>() == RECORD_SIZE);\n\n\
         /// Key of the `errnos` per-CPU hash (`struct pg_errno_key`).\n\
         #[repr(C)]\n\
         #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]\n\
         pub struct PgErrnoKey {{\n    pub probe_id: u32,\n    pub err: u32,\n}}\n\n\
         /// Default size of the `events` ring buffer in bytes.\n\
         pub const RINGBUF_BYTES: usize = {};\n",
        record_size(),
        RINGBUF_BYTES
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn casts() {
        assert_eq!(sign_extend_cast(4), "(int)");
        assert_eq!(sign_extend_cast(8), "(long)");
        assert_eq!(sign_extend_cast(0), "(int)");
    }
}
