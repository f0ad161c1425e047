//! The BPF side of a probe set: `probes.bpf.c` (one small observe-only program per attachable
//! probe, emitting a fixed-size record on failure) and `probegen.bpf.h`, the part every set
//! shares (record, maps, helpers; libbpf-tools style), which each set includes. Both come from
//! askama templates in `codegen/templates/` and are byte-for-byte deterministic: everything is
//! taken from the manifest in its order, nothing from the clock or a hash map.
//!
//! Design choices documented in the generated C:
//! * `struct pg_record` keeps the field order of the issue; it has no padding holes (every
//!   field sits at a multiple of its alignment, 96 bytes in all, see
//!   [`manifest::RECORD_FIELDS`]).
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
//! * every fexit probe (verbs core and vendor) also gets a `?kprobe`/`?kretprobe` pair on the function
//!   (autoload off; [`manifest::Probe::kprobe_fallback`]) for a module built without `.BTF`:
//!   the entry saves the recorded arguments per task in `saved_args`, the return fills the
//!   same record from them and PT_REGS_RC, sign-extended as fexit does.

use askama::Template;
use manifest::{field_comments, record_size, ERRNO_ENTRIES, MAX_ERRNO, RECORD_ARGS, RECORD_FIELDS};
use manifest::{Attach, Manifest, Probe, ReturnKind};

/// The shared header's file name, as every `probes.bpf.c` includes it.
pub const HEADER_NAME: &str = "probegen.bpf.h";
/// `bpf_get_func_arg` reaches at most this many arguments (MAX_BPF_FUNC_ARGS).
const MAX_FUNC_ARGS: usize = 12;

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
    /// `pg_<id>` ([`manifest::naming`]).
    name: String,
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
    /// The kprobe fallback's (entry program, its section): the entry only when arguments are
    /// recorded (name empty otherwise).
    fallback_entry: (String, String),
    /// The kretprobe fallback's (program, section); name empty without a fallback.
    fallback_ret: (String, String),
    /// 1 when the fallback has an entry program saving arguments (C has no `true`).
    saves: u8,
    /// A uverbs handler's baseline entry (program, section); name empty for other probes.
    baseline_entry: (String, String),
    /// A uverbs handler's baseline session (program, section), for kernels with fsession;
    /// name empty for other probes and for handlers whose arguments are recorded (the
    /// session reads its return value from the context, not through the helpers).
    baseline_session: (String, String),
    /// The context slot of the return value in an fsession exit: one u64 per argument.
    ret_slot: usize,
}

/// One data-plane entry program (`fentry/<function>`).
struct DataPlaneProgram {
    id: u32,
    name: String,
    section: String,
    comment: String,
    /// `event`, `completion`, `qp_error` or `every` (a vendor handler: every call).
    kind: &'static str,
    arg: usize,
    /// (position, enumerator) of the manifest's `errors`.
    errors: Vec<(usize, String)>,
    /// The C test of `code` for events that name a QP (`code == 2 || ...`), a port.
    qp_codes: String,
    port_codes: String,
    /// The C test of `code` for events that name a CQ (its creator owns the record).
    cq_codes: String,
    /// The C expression of the record's owner (`struct task_struct *`, "0": the current
    /// task) and, for qp_error, of the QP number ("0" without an owner argument).
    owner: String,
    qp_num: String,
    /// For `peer`: the QP argument as C, the attribute mask's position, the state.
    qp: String,
    mask_arg: usize,
    state: String,
    /// For `every`: the recorded scalar arguments.
    argmask: String,
}

fn code_test(errors: &[String], pick: impl Fn(&str) -> bool) -> String {
    errors
        .iter()
        .enumerate()
        .filter(|(_, e)| pick(e))
        .map(|(i, _)| format!("code == {}", i + 1))
        .collect::<Vec<_>>()
        .join(" || ")
}

fn data_plane_program(d: &manifest::DataPlaneProbe) -> Result<DataPlaneProgram, askama::Error> {
    use manifest::DataPlaneClass as C;
    if !d
        .function
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        return Err(invalid(format!(
            "data-plane probe {}: function `{}` is not a C identifier",
            d.id, d.function
        )));
    }
    let kind = match (d.class, d.arg) {
        (_, None) => "every",
        (C::AsyncEvent, Some(_)) => "event",
        (C::Completion, Some(_)) => "completion",
        (C::QpError, Some(_)) => "qp_error",
        (C::Peer, Some(_)) => "peer",
    };
    // the kernel's union `element` holds the QP for QP events, the port for port events
    let qp_codes = code_test(&d.errors, |e| e.contains("_QP_") || e.contains("PATH_MIG"));
    let port_codes = code_test(&d.errors, |e| e.contains("PORT"));
    let cq_codes = code_test(&d.errors, |e| e.contains("_CQ_"));
    let (owner, qp_num) = owner_expr(d)?;
    let evidence = d.evidence.first().map_or(String::new(), |e| {
        format!("; {}:{}: {}", e.file, e.line, comment_text(&e.detail))
    });
    Ok(DataPlaneProgram {
        id: d.id,
        name: manifest::program_name(d.id),
        section: manifest::data_plane_section(d.class, &d.function),
        comment: format!(
            "{} {}:{} ({}:{}){evidence}",
            d.class, d.module, d.function, d.file, d.line
        ),
        kind,
        arg: d.arg.unwrap_or(0),
        errors: d.errors.iter().cloned().enumerate().collect(),
        qp_codes,
        port_codes,
        cq_codes,
        qp: peer_qp(d)?,
        mask_arg: d.mask_arg.unwrap_or(0),
        state: d.errors.first().cloned().unwrap_or_default(),
        owner,
        qp_num,
        argmask: "0x0".into(),
    })
}

/// The object of a data-plane owner argument as C (`(struct rxe_cq *)ctx[0]`), checked to be
/// a C identifier.
fn owner_object(
    d: &manifest::DataPlaneProbe,
) -> Result<Option<(String, &manifest::DataPlaneOwner)>, askama::Error> {
    let Some(o) = &d.owner else {
        return Ok(None);
    };
    if o.ty.is_empty() || !o.ty.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(invalid(format!(
            "data-plane probe {}: owner type `{}` is not a C identifier",
            d.id, o.ty
        )));
    }
    Ok(Some((format!("(struct {} *)ctx[{}]", o.ty, o.arg), o)))
}

/// A peer program's QP argument as C (`(struct ib_qp *)ctx[0]`): the core's own struct, whose
/// fields the header declares; "" for other classes.
fn peer_qp(d: &manifest::DataPlaneProbe) -> Result<String, askama::Error> {
    if d.class != manifest::DataPlaneClass::Peer {
        return Ok(String::new());
    }
    match owner_object(d)? {
        Some((obj, o)) if o.ty == o.object.core().0 && o.object == manifest::OwnerObject::Qp => {
            if d.mask_arg.is_none() || d.errors.len() != 1 {
                return Err(invalid(format!(
                    "data-plane probe {}: a peer probe needs `mask_arg` and one state in `errors`",
                    d.id
                )));
            }
            Ok(obj)
        }
        _ => Err(invalid(format!(
            "data-plane probe {}: a peer probe's owner must be the core's `struct ib_qp`",
            d.id
        ))),
    }
}

/// (owner, QP number) of a completion or qp_error program, as C expressions.
fn owner_expr(d: &manifest::DataPlaneProbe) -> Result<(String, String), askama::Error> {
    let Some((obj, o)) = owner_object(d)? else {
        return Ok(("0".into(), "0".into()));
    };
    let (core, member) = o.object.core();
    if o.ty == core {
        let qpn = match o.object {
            manifest::OwnerObject::Qp => format!("BPF_CORE_READ({obj}, qp_num)"),
            manifest::OwnerObject::Cq => "0".into(),
        };
        return Ok((format!("BPF_CORE_READ({obj}, res.task)"), qpn));
    }
    let qpn = match o.object {
        manifest::OwnerObject::Qp => format!("BPF_CORE_READ({obj}, {member}.qp_num)"),
        manifest::OwnerObject::Cq => "0".into(),
    };
    Ok((format!("PG_OWNER({obj}, {member})"), qpn))
}

/// The drivers' structs the owners embed core objects in: (struct, core struct, member), each
/// once, sorted.
fn owner_structs(m: &Manifest) -> Vec<(String, String, String)> {
    let mut out: Vec<(String, String, String)> = m
        .data_plane
        .iter()
        .filter(|d| d.attach == Attach::Fexit)
        .filter_map(|d| d.owner.as_ref())
        .filter(|o| o.ty != o.object.core().0)
        .map(|o| {
            let (core, member) = o.object.core();
            (o.ty.clone(), core.to_string(), member.to_string())
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The enumerators of `class`'s probes, first seen first.
fn enumerators(m: &Manifest, class: manifest::DataPlaneClass, first: &[&str]) -> String {
    let mut out: Vec<String> = first.iter().map(|s| s.to_string()).collect();
    for d in m
        .data_plane
        .iter()
        .filter(|d| d.class == class && d.arg.is_some())
    {
        for e in &d.errors {
            if !out.contains(e) {
                out.push(e.clone());
            }
        }
    }
    if out.is_empty() {
        // the type must exist for the header's `struct ib_event`; nothing compares with it
        out.push(format!("PG_{}_NONE", class.as_str().to_ascii_uppercase()));
    }
    out.join(", ")
}

#[derive(Template)]
#[template(path = "probes.bpf.c", escape = "none")]
struct BpfTemplate {
    data_plane: Vec<DataPlaneProgram>,
    owner_structs: Vec<(String, String, String)>,
    event_names: String,
    status_names: String,
    state_names: String,
    kernel: String,
    config: String,
    vendor: String,
    refresh: String,
    nprobes: usize,
    programs: Vec<Program>,
    nfexit: usize,
    nclone: usize,
    nskipped: usize,
    nfallback: usize,
    nbaseline: usize,
    nsession: usize,
}

#[derive(Template)]
#[template(path = "probegen.bpf.h", escape = "none")]
struct HeaderTemplate {
    record_size: usize,
    /// (declaration, comment with the offset)
    record_fields: Vec<(String, String)>,
    max_errno: u32,
    errno_entries: usize,
    record_args: usize,
    max_func_args: usize,
    trace_size: usize,
    trace_steps: usize,
    /// (declaration, comment with the offset) of `struct pg_trace`
    trace_fields: Vec<(String, String)>,
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

/// The section of a probe's program, its symbols checked: `fexit/<function>` or
/// `kretprobe/<clone symbol>` ([`manifest::naming`]).
fn section_of(p: &Probe) -> Result<String, askama::Error> {
    check_symbol("function", &p.function, p)?;
    if p.attach == Attach::CloneOnly {
        let sym = p.attach_symbol.as_deref().ok_or_else(|| {
            invalid(format!(
                "probe {} ({}): clone-only without attach_symbol",
                p.id, p.function
            ))
        })?;
        check_symbol("attach_symbol", sym, p)?;
    }
    p.section().ok_or_else(|| {
        invalid(format!(
            "probe {} ({}): attach `{}` has no program",
            p.id, p.function, p.attach
        ))
    })
}

fn ret_kind(p: &Probe) -> RetKind {
    match p.returns {
        ReturnKind::Int => RetKind::Int(sign_extend_cast(p.ret_size)),
        ReturnKind::Ptr => RetKind::Ptr,
        ReturnKind::Bool | ReturnKind::Void => RetKind::None,
    }
}

/// The argument positions a program records, ascending, at most [`RECORD_ARGS`]: the
/// manifest's list (its scalar parameters); none for a kretprobe (argument registers are
/// clobbered by the time the function returns).
fn recorded_args(p: &Probe, fexit: bool) -> Result<Vec<usize>, askama::Error> {
    let mut positions: Vec<usize> = if fexit {
        p.args.iter().map(|a| a.index).collect()
    } else {
        Vec::new()
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
    Ok(positions)
}

fn program(
    p: &Probe,
    m: &Manifest,
    handlers: &std::collections::BTreeSet<u32>,
) -> Result<Program, askama::Error> {
    let section = section_of(p)?;
    // a no-btf probe's program has the fexit body too (and the kprobe pair the loader takes)
    let fexit = matches!(p.attach, Attach::Fexit | Attach::NoBtf);
    let kind = ret_kind(p);
    let positions = recorded_args(p, fexit)?;
    let mask: u32 = positions.iter().map(|&i| 1u32 << i).sum();
    let arglist = if positions.is_empty() {
        "-".to_string()
    } else {
        let list: Vec<String> = positions.iter().map(|i| i.to_string()).collect();
        list.join(",")
    };
    let returns = match kind {
        RetKind::Int(_) => format!("int, {} bytes", p.ret_size),
        RetKind::Ptr => "ptr".to_string(),
        RetKind::None => format!("{}, calls only", p.returns),
    };
    let fallback = p.kprobe_fallback();
    let also_in: Vec<String> = m
        .probes
        .iter()
        .filter(|q| q.function == p.function && q.module != p.module)
        .map(|q| comment_text(&q.module))
        .collect();
    Ok(Program {
        id: p.id,
        name: p.program_name(),
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
        also_in: also_in.join(", "),
        fallback_entry: fallback
            .iter()
            .find(|(n, _)| n.ends_with("_entry"))
            .cloned()
            .unwrap_or_default(),
        saves: u8::from(fallback.len() == 2),
        baseline_entry: baseline_entry(p, handlers),
        baseline_session: baseline_session(p, handlers, mask),
        ret_slot: p.nargs,
        fallback_ret: fallback
            .iter()
            .find(|(n, _)| n.ends_with("_ret"))
            .cloned()
            .unwrap_or_default(),
    })
}

/// A uverbs handler's baseline entry program and its section (`?fentry/<function>`).
fn baseline_entry(p: &Probe, handlers: &std::collections::BTreeSet<u32>) -> (String, String) {
    if handlers.contains(&p.id) {
        (
            manifest::baseline_entry_name(p.id),
            manifest::baseline_entry_section(&p.function),
        )
    } else {
        Default::default()
    }
}

/// A uverbs handler's baseline session program and its section (`?fsession/<function>`).
/// Only for a handler that records no arguments: the helpers that read them are not checked
/// on fsession, while the return value is read from the context slot the kernel's selftests
/// read.
fn baseline_session(
    p: &Probe,
    handlers: &std::collections::BTreeSet<u32>,
    argmask: u32,
) -> (String, String) {
    if handlers.contains(&p.id) && argmask == 0 && ret_kind(p) != RetKind::None {
        (
            manifest::baseline_session_name(p.id),
            manifest::baseline_session_section(&p.function),
        )
    } else {
        Default::default()
    }
}

/// Size of the per-probe tables: one past the largest probe id (ids are positions in
/// `probes`), at least 1.
fn nprobes(m: &Manifest) -> usize {
    m.probes
        .iter()
        .map(|p| p.id)
        .chain(m.data_plane.iter().map(|d| d.id))
        .map(|id| id as usize + 1)
        .max()
        .unwrap_or(0)
        .max(m.probes.len())
        .max(1)
}

/// `probes.bpf.c` for the manifest's attachable probes; it includes [`HEADER_NAME`].
/// `refresh_command` goes into the header comment (`cargo run --release -- generate ...`).
pub fn render_bpf(m: &Manifest, refresh_command: &str) -> Result<String, askama::Error> {
    let handlers = manifest::baseline_handlers(m);
    let programs = m
        .attachable()
        .map(|p| program(p, m, &handlers))
        .collect::<Result<Vec<_>, _>>()?;
    let nfexit = programs.iter().filter(|p| p.fexit).count();
    let data_plane = m
        .data_plane
        .iter()
        .filter(|d| d.attach == Attach::Fexit)
        .map(data_plane_program)
        .collect::<Result<Vec<_>, _>>()?;
    let has_completion = data_plane.iter().any(|d| d.kind == "completion");
    BpfTemplate {
        owner_structs: owner_structs(m),
        event_names: enumerators(m, manifest::DataPlaneClass::AsyncEvent, &[]),
        state_names: enumerators(m, manifest::DataPlaneClass::Peer, &[]),
        status_names: if has_completion {
            enumerators(m, manifest::DataPlaneClass::Completion, &["IB_WC_SUCCESS"])
        } else {
            String::new()
        },
        data_plane,
        kernel: comment_text(&m.kernel.version),
        config: comment_text(&m.kernel.config),
        vendor: comment_text(&m.vendor),
        refresh: comment_text(refresh_command),
        nprobes: nprobes(m),
        nfexit,
        nclone: programs.len() - nfexit,
        nskipped: m.probes.len() - programs.len(),
        nfallback: programs
            .iter()
            .filter(|p| !p.fallback_ret.0.is_empty())
            .count(),
        nbaseline: programs
            .iter()
            .filter(|p| !p.baseline_entry.0.is_empty())
            .count(),
        nsession: programs
            .iter()
            .filter(|p| !p.baseline_session.0.is_empty())
            .count(),
        programs,
    }
    .render()
}

/// `probegen.bpf.h`: the record (from [`RECORD_FIELDS`]), the maps, the failure predicates
/// and the shared exit path, the same for every set.
pub fn render_header() -> Result<String, askama::Error> {
    let record_fields = RECORD_FIELDS
        .iter()
        .zip(field_comments())
        .map(|(f, what)| (format!("{} {}{};", f.c_type, f.name, f.c_suffix), what))
        .collect();
    HeaderTemplate {
        record_size: record_size(),
        record_fields,
        max_errno: MAX_ERRNO,
        errno_entries: ERRNO_ENTRIES,
        record_args: RECORD_ARGS,
        max_func_args: MAX_FUNC_ARGS,
        trace_size: manifest::TRACE_SIZE,
        trace_steps: manifest::TRACE_STEPS,
        trace_fields: manifest::TRACE_FIELDS
            .iter()
            .zip(manifest::trace_field_comments())
            .map(|(f, what)| (format!("{} {}{};", f.c_type, f.name, f.c_suffix), what))
            .collect(),
    }
    .render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_ring_buffer_is_the_default_size() {
        // The header writes the size as `256 * 1024`, the default the loader knows.
        assert_eq!(manifest::RINGBUF_BYTES, 256 * 1024);
        let h = render_header().expect("header");
        assert!(h.contains("__uint(max_entries, 256 * 1024);"));
    }

    #[test]
    fn casts() {
        assert_eq!(sign_extend_cast(4), "(int)");
        assert_eq!(sign_extend_cast(8), "(long)");
        assert_eq!(sign_extend_cast(0), "(int)");
    }
}
