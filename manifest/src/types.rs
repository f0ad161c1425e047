//! The manifest: the probe set as data (`manifest.yaml`), written by `generate`, read by the
//! collector, `check`, `port`, `diff` and `coverage`. Its JSON Schema is generated from these
//! types (`probegen schema`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::errno::Errno;
use crate::vocab::{
    Attach, DataPlaneClass, DataPlaneVia, Derivation, FocusKind, GapKind, Layer, Object, Relation,
    ReturnKind, Rule, SiteClass,
};

pub const SCHEMA_ID: &str = "probegen/v1";

/// `kind` of every data-plane probe.
pub const DATA_PLANE_KIND: &str = "data_plane";

/// What a manifest file is, in errors (`expected a probegen manifest.yaml`).
pub const MANIFEST_WHAT: &str = "a probegen manifest.yaml";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Always `probegen/v1`.
    pub schema: String,
    pub kernel: KernelInfo,
    pub vendor: String,
    pub entries: Vec<String>,
    /// What the analysis could not read or evaluate (absent when the input was complete): a
    /// set written with `--allow-degraded` may lack probes the real kernel has.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub degraded: Vec<Degraded>,
    /// The `ib_device_ops` members R4 treats as focus, derived from the analysed tree's
    /// `struct ib_device_ops` (and the rules' focus_ops overrides), by member name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub focus_ops: Vec<FocusOp>,
    /// Kept functions, sorted by (function, module).
    pub probes: Vec<Probe>,
    /// Every other reachable function, sorted by (function, module, file).
    pub excluded: Vec<Excluded>,
    /// Data-plane probes (`kind: data_plane`): entry programs with an in-kernel filter where
    /// a QP's death is seen, derived from the call graph; ids continue after `probes`. Absent
    /// in sets written before they existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub data_plane: Vec<DataPlaneProbe>,
    pub stats: Stats,
}

/// One data-plane probe: a function where an error event or an error completion passes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DataPlaneProbe {
    /// Index in the BPF object's tables, after every control-path probe.
    pub id: u32,
    /// Always `data_plane`: what tells these probes from the control path's in a listing.
    pub kind: String,
    /// `async_event`, `completion`, `qp_error`, or `peer` (no record: where a QP's peer is
    /// kept for its later errors).
    pub class: DataPlaneClass,
    pub function: String,
    pub module: String,
    pub file: String,
    pub line: usize,
    /// `core` or `vendor`.
    pub layer: Layer,
    /// The attach verdict of the function (`fexit` means an entry program attaches as well:
    /// same symbol, BTF and ftrace site).
    pub attach: Attach,
    /// The argument (from 0) the filter and the record read: the `struct ib_event *` of an
    /// event callback, the completion entry of a completion function, the QP of qp_error;
    /// absent when the function is probed for every call (a vendor's event handler).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arg: Option<usize>,
    /// What makes a record, by name (`IB_EVENT_QP_FATAL`, `IB_WC_RETRY_EXC_ERR`, `IB_QPS_ERR`):
    /// a record's code is the position in this list plus one; empty: every call makes a
    /// record, code 0. The program compares against the running kernel's values of these
    /// enumerators (CO-RE), so the list is exact on any kernel that has them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
    /// A `peer` probe's attribute-mask argument (from 0): the peer is read only when the
    /// mask says the call sets the QP's state (to the state in `errors`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mask_arg: Option<usize>,
    /// The function found by the analysis when this probe is its nearest attachable caller
    /// (the derived one is inlined or static without BTF).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub derived: Option<String>,
    /// The argument whose object's creator a record belongs to (the CQ of a completion
    /// function, the QP of qp_error): a provider posts completions from whatever task runs
    /// its work, not from the job's. Absent: the event's own object, or the current task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<DataPlaneOwner>,
    /// What chose it, first the deciding fact.
    pub evidence: Vec<DataPlaneEvidence>,
}

/// The argument of a data-plane function that holds a verbs object (a CQ or a QP) whose
/// creator owns the record (`rdma_restrack_entry.task` of the embedded `ib_cq` / `ib_qp`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DataPlaneOwner {
    /// Its position, from 0.
    pub arg: usize,
    /// The struct it points to (`rxe_cq`, or the core's own `ib_cq`).
    pub ty: String,
    /// `cq` or `qp`: which core object it is or embeds.
    pub object: OwnerObject,
}

/// The verbs object a data-plane owner is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OwnerObject {
    Cq,
    Qp,
}

impl OwnerObject {
    /// The core's struct (`ib_cq`) and the member a driver's struct embeds it as (`ibcq`,
    /// the drivers' convention: rxe, mlx5, bnxt_re, irdma).
    pub fn core(self) -> (&'static str, &'static str) {
        match self {
            Self::Cq => ("ib_cq", "ibcq"),
            Self::Qp => ("ib_qp", "ibqp"),
        }
    }
}

/// One fact that chose a data-plane probe, with where it is in the source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DataPlaneEvidence {
    /// `installed`, `raised`, `completes` or `qp-state`.
    pub via: DataPlaneVia,
    pub file: String,
    pub line: usize,
    /// The fact in words (`create_qp stores it into .event_handler`).
    pub detail: String,
}

/// One gap in the input the set was generated from (`analyzer::completeness`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Degraded {
    /// `unreadable`, `undecodable`, `unbalanced-conditional`, `parse-errors`, `too-deep`,
    /// `config-missing`, `makefile-missing` or `module-missing`.
    pub kind: GapKind,
    /// The file that lost something, relative to the source directory when inside it.
    pub file: String,
    /// 1-based line; absent when the whole file is concerned.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub line: usize,
    /// What was lost and why.
    pub detail: String,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl std::fmt::Display for Degraded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line > 0 {
            write!(
                f,
                "{}:{}: {}: {}",
                self.file, self.line, self.kind, self.detail
            )
        } else {
            write!(f, "{}: {}: {}", self.file, self.kind, self.detail)
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FocusOp {
    pub member: String,
    /// `QP`, `MR`, `PD` or `CQ`.
    pub object: Object,
    /// `constructor`, `updates`, `included` or `excluded` (excluded members are not focus).
    pub derivation: Derivation,
    /// Why, in words: the update token, or the rules' reason.
    pub why: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KernelInfo {
    /// Upstream version of the analysed source (`6.12.117`).
    pub version: String,
    /// The `.config` used, as a path relative to the source directory when inside it.
    pub config: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Probe {
    /// Index of the probe in the BPF object's tables (position in `probes`).
    pub id: u32,
    pub function: String,
    /// Kernel module the function is linked into (`inline` for header inlines).
    pub module: String,
    pub file: String,
    pub line: usize,
    /// `core` or `vendor`.
    pub layer: Layer,
    /// `QP`, `MR`, `PD`, `CQ` or `other`.
    pub object: Object,
    /// `focus` or `override`.
    pub rule: Rule,
    /// What R4 evidence kept it: handler, ops-caller, ops-impl, hardware, helper.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub focus: Option<FocusKind>,
    /// The function pins user memory (`pin_user_pages*`, `get_user_pages*`: the rules'
    /// `state_changing_prefixes`): its body calls a pinning function directly, or through
    /// callees that are not probes of their own (inlined wrappers, unprobed functions), so a
    /// failure it returns may be the pinning's (an EFAULT on the caller's unmapped buffer).
    /// From the call graph, never from the name; absent (false) in sets written before it
    /// existed. The collector routes such an origin's argument errors to the application.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pins_user_memory: bool,
    pub evidence: String,
    /// `int`, `ptr`, `bool` or `void`.
    pub returns: ReturnKind,
    /// Size in bytes of the return value per BTF (4 for int: sign-extend before testing).
    pub ret_size: u32,
    /// For `ptr`: NULL is an ordinary return (the function reports errors as ERR_PTR), so
    /// only IS_ERR counts as a failure.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub null_ok: bool,
    pub nargs: usize,
    /// `fexit`, `clone-only`, `inlined`, `not-built`, `no-btf`, `no-ftrace`.
    pub attach: Attach,
    /// For clone-only: the clone symbol a kretprobe attaches to instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attach_symbol: Option<String>,
    /// For functions that cannot be attached: the nearest attachable caller or callee.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suggest: Option<Suggestion>,
    /// Up to 4 scalar arguments recorded on failure.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<ProbeArg>,
    /// Other probes this one calls, directly or through unprobed functions (for failure
    /// chains: outermost to innermost).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<u32>,
    /// entry, ..., function
    pub path: Vec<String>,
    /// Each way the function returns an error, classified from the code (its own checks and
    /// those of the unprobed callees whose errors it returns), in source order. Absent in sets
    /// written before sites existed (the collector then says so in the owner's reason);
    /// present and empty when the code shows no error exit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_sites: Option<Vec<ErrorSite>>,
}

/// One way a probed function returns an error.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct ErrorSite {
    /// The errno constant the code writes; absent: whatever the callee returned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errno: Option<Errno>,
    /// `request`, `resources`, `hardware`, `state`, `propagated` or `unconditional`.
    pub class: SiteClass,
    /// Where the check is: the probe's own file, or a callee's (see `via`).
    pub file: String,
    pub line: usize,
    /// The condition as written (whitespace collapsed; empty for a return without one).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub check: String,
    /// For a `request` site that is a lookup finding nothing: the key the caller passed, as the
    /// subscript writes it (`index` of `!is_gid_entry_valid(table->data_vec[index])`): the
    /// caller named an entry that is not there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The unprobed callees, outermost first, whose check this is (empty: the probe's own).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub via: Vec<String>,
    /// For `propagated` (and a class decided by a callee outside the analysed tree): the
    /// callee whose error is returned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callee: Option<String>,
    /// For `propagated`: the callee's probe id, when it is a probe of the set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callee_probe: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Suggestion {
    pub function: String,
    pub module: String,
    /// `caller` or `callee`.
    pub relation: Relation,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProbeArg {
    /// Argument position (0-based).
    pub index: usize,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Excluded {
    pub function: String,
    pub module: String,
    pub file: String,
    pub line: usize,
    /// `read-only`, `generic`, `cleanup`, `vendor-gate`, `not-focus` or `override`.
    pub rule: Rule,
    pub evidence: String,
    pub path: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Stats {
    pub reachable: usize,
    pub probes: usize,
    pub attachable: usize,
    /// Probes by layer.
    pub core: usize,
    pub vendor: usize,
    /// Excluded functions by rule.
    pub excluded: std::collections::BTreeMap<Rule, usize>,
    /// Probes by attach verdict.
    pub attach: std::collections::BTreeMap<Attach, usize>,
}

impl Manifest {
    /// The manifest as `manifest.yaml`: serde_yaml's bytes, written without its emitter where
    /// the document allows (see `yaml.rs`: most of a set's YAML time otherwise).
    pub fn to_yaml(&self) -> Result<String, serde_yaml::Error> {
        let value = serde_yaml::to_value(self)?;
        match crate::yaml::block_yaml(&value) {
            Some(text) => Ok(text),
            None => serde_yaml::to_string(self),
        }
    }

    /// Probes a BPF program is generated for.
    pub fn attachable(&self) -> impl Iterator<Item = &Probe> {
        self.probes.iter().filter(|p| p.attach.has_program())
    }
}

/// JSON Schema of the manifest, pretty-printed.
pub fn json_schema() -> String {
    let schema = schemars::schema_for!(Manifest);
    serde_json::to_string_pretty(&schema).unwrap_or_default() + "\n"
}
