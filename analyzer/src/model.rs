//! Facts extracted from one source file, before any cross-file resolution.

use serde::{Deserialize, Serialize};

/// How a function returns, as far as a fexit probe cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RetKind {
    Int,
    Ptr,
    Bool,
    Void,
}

impl RetKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RetKind::Int => "int",
            RetKind::Ptr => "ptr",
            RetKind::Bool => "bool",
            RetKind::Void => "void",
        }
    }
}

/// What a call expression calls, syntactically.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CallTarget {
    /// `foo(...)`: a function, a function-like macro, or something outside the analysed tree.
    Named(String),
    /// `x->ops.member(...)` / `x.ops.member(...)`: dispatch through `struct ib_device_ops`.
    Ops(String),
    /// `base->field(...)`: another struct-field function pointer.
    Field { base: String, field: String },
    /// `handler(...)` where `handler` is a local variable or parameter.
    LocalPointer(String),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CallSite {
    pub target: CallTarget,
    pub line: usize,
}

/// One parameter of a function definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Param {
    pub name: String,
    /// An integer-like value (not a pointer, array or struct by value): worth recording on
    /// failure (`attr_mask`, access flags, a length).
    pub scalar: bool,
    /// The declared type, whitespace collapsed, with a `*` per pointer level
    /// (`struct ib_event *`): which argument holds the object a data-plane probe reads.
    #[serde(default)]
    pub ty: String,
}

/// Where a body stores or passes a name that is not one of its locals (`value_refs`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum RefSite {
    /// `a->f = name`, `a.f = name`, or `.f = name` in an initializer list. `through_pointer`:
    /// the stored-to object is reached through a pointer (`qp->attr.qp_state`), so the store
    /// changes an object the function was handed, not a local it prepares.
    Field {
        field: String,
        through_pointer: bool,
    },
    /// `callee(..., name, ...)`: the argument at `index` (from 0) of a call by name.
    Argument { callee: String, index: usize },
}

/// One name stored into a field or passed to a call: a function installed as a callback
/// (`attr.event_handler = ib_uverbs_qp_event_handler`, `INIT_IB_EVENT_HANDLER(.., f)`) or a
/// constant set (`event.event = IB_EVENT_QP_FATAL`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ValueRef {
    pub site: RefSite,
    pub name: String,
    pub line: usize,
}

/// One function definition.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FunctionDef {
    pub name: String,
    /// Set for `UVERBS_HANDLER(X)` definitions; `name` is fixed up once the file's
    /// `UVERBS_MODULE_NAME` is known.
    pub uverbs_handler_id: Option<String>,
    pub line: usize,
    pub end_line: usize,
    pub is_static: bool,
    pub is_inline: bool,
    pub ret_type: String,
    pub ret: RetKind,
    pub nparams: usize,
    pub params: Vec<Param>,
    pub calls: Vec<CallSite>,
    /// Fields assigned through a pointer in the body (`qp->state = ...`), sorted, unique.
    pub field_writes: Vec<String>,
    /// The body reads `method_elm->handler`: marks the uverbs dispatchers.
    pub reads_method_handler: bool,
    /// The body produces or propagates an error code: `-EINVAL`, `ERR_PTR(`, `PTR_ERR(`,
    /// `ERR_CAST(`. A helper without it cannot be the origin of an errno.
    pub returns_error: bool,
    /// Each way the body returns an error (`errsites`), sorted by line; empty for void and
    /// bool functions.
    #[serde(default)]
    pub error_sites: Vec<ErrorSite>,
    /// A pointer-returning body that both returns `NULL` and uses the ERR_PTR family: errors
    /// come back as ERR_PTR, NULL is an ordinary "none" (`rdma_lag_get_ah_roce_slave`).
    pub null_ok: bool,
    /// Names stored into fields or passed to calls (not locals), in source order: callbacks
    /// installed and constants set (`cparse::value_refs`).
    #[serde(default)]
    pub value_refs: Vec<ValueRef>,
}

/// What decides one error exit of a body, as its syntax shows (`errsites`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum SiteShape {
    /// A check of what the caller asked for: a comparison with a limit, a mask, a missing
    /// argument, a value outside a switch's cases.
    Request,
    /// The error constant says exhaustion (`-ENOMEM`, `-ENOSPC`, ...).
    Resources,
    /// The condition tests a state (`cur_state`, `qp->state`).
    State,
    /// The result of this call decides: its own checks, or a predicate it answers.
    Callee(String),
    /// An error returned without a condition (an unsupported operation).
    Unconditional,
    /// A lookup by a key the caller supplied found nothing: the condition tests, negated, a
    /// table entry indexed by a parameter (`!is_gid_entry_valid(table->data_vec[index])`,
    /// `!tbl[qpn & mask]`). Holds the key as written (`index`).
    Lookup(String),
}

/// One error exit of a function body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorSite {
    /// The line of the check (the `if`), or of the `return`.
    pub line: usize,
    /// The errno constant the code writes (`EINVAL`); `None`: the callee's, whatever it was.
    pub errno: Option<String>,
    pub shape: SiteShape,
    /// The condition as written (empty for a return without one).
    pub check: String,
}

/// `#define NAME(params) body`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MacroDef {
    pub name: String,
    pub line: usize,
    /// Identifiers in the body that are followed by `(`: what the macro may call.
    pub calls: Vec<String>,
}

/// One designated initializer of `struct ib_device_ops`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OpsTable {
    pub name: String,
    pub line: usize,
    /// (member, function name, line)
    pub members: Vec<(String, String, usize)>,
}

/// `DECLARE_UVERBS_WRITE(_EX)(cmd, func, ...)`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WriteCommand {
    pub command: String,
    pub handler: String,
    pub extended: bool,
    pub line: usize,
}

/// `DECLARE_UVERBS_NAMED_METHOD(id, ...)` (handler `UVERBS_HANDLER(id)`) or its `_DESTROY`
/// form (handler `uverbs_destroy_def_handler`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UapiMethod {
    pub id: String,
    pub destroy: bool,
    pub line: usize,
}

/// Everything one file contributes.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct FileFacts {
    /// Path relative to the source root, with `/`.
    pub path: String,
    pub functions: Vec<FunctionDef>,
    pub macros: Vec<MacroDef>,
    pub ops_tables: Vec<OpsTable>,
    /// The members of `struct ib_device_ops` when this header defines it.
    pub ops_struct: Option<Vec<crate::opsdecl::OpsMemberDecl>>,
    pub write_commands: Vec<WriteCommand>,
    pub uapi_methods: Vec<UapiMethod>,
    /// `#define UVERBS_MODULE_NAME x` in this file.
    pub uverbs_module_name: Option<String>,
    /// `#include "local.h"` names.
    pub local_includes: Vec<String>,
    pub parse_errors: usize,
    /// Bytes of the file inside tree-sitter ERROR ranges (outermost ones).
    pub error_bytes: usize,
    /// tree-sitter gave up on the file (its parse budget ran out): no fact was extracted.
    pub parse_abandoned: bool,
    pub warnings: Vec<crate::error::Warning>,
}

impl FileFacts {
    pub fn is_header(&self) -> bool {
        self.path.ends_with(".h")
    }
}
