//! The rules file (`heuristics/rules.yaml`): vendors, the lists each rule reads, overrides.

use std::collections::BTreeMap;

use analyzer::SourceLayout;
use analyzer::VendorScope;
use manifest::{Object, SiteClass};
use serde::Deserialize;

/// The rules shipped with probegen.
pub const BUILTIN_RULES: &str = include_str!("../rules.yaml");

#[derive(Debug, thiserror::Error)]
pub enum RulesError {
    #[error("{origin}:{line}:{column}: {message}")]
    Syntax {
        origin: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{origin}: {message}")]
    Invalid { origin: String, message: String },
    #[error("{origin}:{line}: `{key}: {value}`: expected at most {MAX_DEPTH_LIMIT} (a bound on how far a walk goes through the call graph)")]
    DepthOutOfRange {
        origin: String,
        /// The line of the key, 0 when it is not written as a block key.
        line: usize,
        key: &'static str,
        value: usize,
    },
}

/// The largest depth limit accepted. The walks bounded by these limits grow with the number
/// of call paths (the can-fail search exponentially), and the limits the built-in rules need
/// are 8 and less: a larger value is a mistake, not a wish.
pub const MAX_DEPTH_LIMIT: usize = 16;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Vendor {
    /// The vendor's key in `vendors:` (filled in by the loader): a `&Vendor` is a name already
    /// checked against the rules, so the selection takes one and cannot meet an unknown name.
    #[serde(skip)]
    pub name: String,
    /// Source directories (prefixes relative to the kernel root).
    pub dirs: Vec<String>,
    pub modules: Vec<String>,
    pub prefixes: Vec<String>,
    /// Functions that hand a command to the hardware; a vendor function calling one directly
    /// commands the hardware.
    #[serde(default)]
    pub hardware_commands: Vec<String>,
    /// Vendor functions that play the hardware's role themselves (Soft-RoCE).
    #[serde(default)]
    pub hardware_functions: Vec<String>,
}

/// The kernel source the analyzer reads (`source:`); with every vendor's `dirs`, all the
/// directories scanned (see [`Rules::source_layout`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceRule {
    /// The Kbuild root (`drivers/infiniband/`).
    pub kbuild_top: String,
    /// The subsystem's header directories (`include/rdma/`, ...).
    pub include_dirs: Vec<String>,
    /// Directory prefixes of vendor drivers (`drivers/infiniband/hw/`, ...).
    pub driver_dirs: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GenericRule {
    pub files: Vec<String>,
    pub tokens: Vec<String>,
    pub prefixes: Vec<String>,
    pub accessor_prefixes: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Override {
    pub function: String,
    /// Restrict to one module when the name is defined in several.
    #[serde(default)]
    pub module: Option<String>,
    pub reason: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Overrides {
    #[serde(default)]
    pub include: Vec<Override>,
    #[serde(default)]
    pub exclude: Vec<Override>,
}

/// A focus member added to (or removed from) what the ops struct derives, with why.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemberOverride {
    pub member: String,
    /// The object an included member works on (QP, MR, PD, CQ); unused for excludes.
    #[serde(default)]
    pub object: Option<String>,
    pub reason: String,
}

/// R4 focus members of `struct ib_device_ops`: derived from the struct's declaration in the
/// analysed tree (see `focus_ops.rs`), then these overrides.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FocusOpsRule {
    /// Struct name -> focus object: `ib_qp: QP`.
    pub objects: BTreeMap<String, String>,
    #[serde(default)]
    pub include: Vec<MemberOverride>,
    #[serde(default)]
    pub exclude: Vec<MemberOverride>,
}

/// A call that registers a callback passed as one of its arguments (`INIT_IB_EVENT_HANDLER`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Registration {
    pub callee: String,
    /// The argument (from 0) that is the callback.
    pub argument: usize,
    pub reason: String,
}

/// `data_plane:`: the structure the data-plane passes look for (see rules.yaml).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataPlaneRule {
    /// Struct fields that hold an object's event callback.
    pub event_handler_fields: Vec<String>,
    /// Calls that register an event callback passed as an argument.
    #[serde(default)]
    pub event_handler_registrations: Vec<Registration>,
    /// The struct an event callback receives (`ib_event`).
    pub event_struct: String,
    /// Its field that holds the event type (`event`).
    pub event_type_field: String,
    /// The event types that say something died: the in-kernel filter.
    pub error_events: Vec<String>,
    /// Struct fields that hold a CQ's completion callback.
    pub completion_callback_fields: Vec<String>,
    /// The field a work completion's status is stored in (`status`).
    pub completion_status_field: String,
    /// The completion statuses other than success.
    pub error_statuses: Vec<String>,
    /// The field of a QP's state and the error state stored into it.
    pub qp_state_field: String,
    pub qp_error_state: String,
    /// Where a QP's peer is kept for its later errors; absent: no peer probe.
    #[serde(default)]
    pub peer: Option<PeerRule>,
}

/// `data_plane: peer:`: the core function that hands a QP's new attributes to the driver's
/// dispatch, read on a successful transition to `state`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerRule {
    /// The QP (`ib_qp`) and its attributes (`ib_qp_attr`) the function takes.
    pub qp_struct: String,
    pub attr_struct: String,
    /// The ops member a callee dispatches (`modify_qp`).
    pub dispatch_member: String,
    /// The state whose transition sets the peer (`IB_QPS_RTR`).
    pub state: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rules {
    pub source: SourceRule,
    pub vendors: BTreeMap<String, Vendor>,
    pub focus_ops: FocusOpsRule,
    pub object_tokens: BTreeMap<String, String>,
    pub update_tokens: Vec<String>,
    pub generic: GenericRule,
    pub cleanup_tokens: Vec<String>,
    pub read_only_tokens: Vec<String>,
    pub allocation_calls: Vec<String>,
    /// Calls that charge a limit (the rdma cgroup, locked memory): an error returned from one
    /// is a resource site (`error_sites`).
    #[serde(default)]
    pub charge_calls: Vec<String>,
    /// Name prefixes of calls that change state outside the subsystem (pinning user pages):
    /// evidence like an allocation.
    #[serde(default)]
    pub state_changing_prefixes: Vec<String>,
    /// R1: calls below a read-only-named function searched for a state change.
    pub evidence_depth: usize,
    /// Calls below a function searched for an error it returns.
    pub failure_depth: usize,
    /// R4 helpers: calls below the nearest kept core function.
    pub helper_depth: usize,
    /// R4 hardware: calls through vendor-internal functions below a kept vendor function.
    pub vendor_walk_depth: usize,
    /// Header inlines and macros followed looking for a focus ops call.
    pub inline_ops_depth: usize,
    /// Rounds of R3/R1 inheritance from the callers.
    pub inherit_rounds: usize,
    /// A probe's `calls` in the manifest: probes below it through unprobed functions.
    pub calls_depth: usize,
    /// A probe that cannot attach: its nearest attachable caller or callee, this many calls away.
    pub suggest_hops: usize,
    /// `check`: below the former callers of a probe gone from the set, how far to look for the
    /// function that now does its job.
    pub replacement_depth: usize,
    /// The data-plane passes' structure; absent: no data-plane probes.
    #[serde(default)]
    pub data_plane: Option<DataPlaneRule>,
    /// Calls below a function that sets an error completion status, searched for the
    /// completion function.
    #[serde(default)]
    pub completion_depth: usize,
    #[serde(default)]
    pub overrides: Overrides,
}

/// The verbs object a rules value names (`QP`). The loader admits only [`Object::VERBS`], so
/// `Other` stands for an absent value (an excluded member has none).
pub(crate) fn object_named(name: &str) -> Object {
    Object::parse(name)
        .ok()
        .filter(|o| Object::VERBS.contains(o))
        .unwrap_or(Object::Other)
}

impl Rules {
    pub fn builtin() -> Result<Self, RulesError> {
        Self::parse(BUILTIN_RULES, "heuristics/rules.yaml")
    }

    /// Parse rules text; `origin` names the file in errors (file:line:column and the field).
    pub fn parse(text: &str, origin: &str) -> Result<Self, RulesError> {
        let mut rules: Rules = serde_yaml::from_str(text).map_err(|e| {
            let (line, column) = e.location().map_or((0, 0), |l| (l.line(), l.column()));
            RulesError::Syntax {
                origin: origin.to_string(),
                line,
                column,
                message: e.to_string(),
            }
        })?;
        for (name, v) in &mut rules.vendors {
            v.name.clone_from(name);
        }
        rules.validate(origin)?;
        rules.validate_depth_limits(text, origin)?;
        Ok(rules)
    }

    /// Every depth limit, by its key in the rules file.
    pub fn depth_limits(&self) -> [(&'static str, usize); 10] {
        [
            ("evidence_depth", self.evidence_depth),
            ("failure_depth", self.failure_depth),
            ("helper_depth", self.helper_depth),
            ("vendor_walk_depth", self.vendor_walk_depth),
            ("inline_ops_depth", self.inline_ops_depth),
            ("inherit_rounds", self.inherit_rounds),
            ("calls_depth", self.calls_depth),
            ("suggest_hops", self.suggest_hops),
            ("replacement_depth", self.replacement_depth),
            ("completion_depth", self.completion_depth),
        ]
    }

    fn validate_depth_limits(&self, text: &str, origin: &str) -> Result<(), RulesError> {
        match self
            .depth_limits()
            .into_iter()
            .find(|&(_, value)| value > MAX_DEPTH_LIMIT)
        {
            Some((key, value)) => Err(RulesError::DepthOutOfRange {
                origin: origin.to_string(),
                line: line_of_top_level_key(text, key),
                key,
                value,
            }),
            None => Ok(()),
        }
    }

    fn validate(&self, origin: &str) -> Result<(), RulesError> {
        let bad = |message: String| RulesError::Invalid {
            origin: origin.to_string(),
            message,
        };
        let included = self
            .focus_ops
            .include
            .iter()
            .map(|o| (&o.member, o.object.as_ref().unwrap_or(&o.member)));
        for (member, obj) in self
            .focus_ops
            .objects
            .iter()
            .chain(self.object_tokens.iter())
            .chain(included)
        {
            if object_named(obj) == Object::Other {
                let verbs: Vec<&str> = Object::VERBS.iter().map(|o| o.as_str()).collect();
                return Err(bad(format!(
                    "`{member}: {obj}`: expected one of {}",
                    verbs.join(", ")
                )));
            }
        }
        for (name, v) in &self.vendors {
            if v.dirs.is_empty() || v.prefixes.is_empty() {
                return Err(bad(format!(
                    "vendor `{name}`: expected non-empty `dirs` and `prefixes`"
                )));
            }
        }
        let src = &self.source;
        let named_dirs = std::iter::once(&src.kbuild_top)
            .chain(&src.include_dirs)
            .chain(&src.driver_dirs)
            .chain(self.vendors.values().flat_map(|v| &v.dirs));
        for dir in named_dirs {
            if !is_tree_relative_dir(dir) {
                return Err(bad(format!(
                    "directory `{dir}`: expected a path relative to the kernel root (`include/rdma/`), without `..`"
                )));
            }
        }
        for o in self.focus_ops.include.iter().chain(&self.focus_ops.exclude) {
            if o.reason.trim().is_empty() {
                return Err(bad(format!(
                    "focus_ops override of `{}`: expected a non-empty `reason`",
                    o.member
                )));
            }
        }
        if let Some(dp) = &self.data_plane {
            for r in &dp.event_handler_registrations {
                if r.reason.trim().is_empty() {
                    return Err(bad(format!(
                        "data_plane registration `{}`: expected a non-empty `reason`",
                        r.callee
                    )));
                }
            }
        }
        for o in self.overrides.include.iter().chain(&self.overrides.exclude) {
            if o.reason.trim().is_empty() {
                return Err(bad(format!(
                    "override of `{}`: expected a non-empty `reason`",
                    o.function
                )));
            }
        }
        Ok(())
    }

    /// Every directory the analyzer reads: `source.kbuild_top`, then `source.include_dirs`,
    /// then each vendor's `dirs` outside the Kbuild root (`include/linux/mlx5/`), by vendor name.
    pub fn source_layout(&self) -> SourceLayout {
        let includes: Vec<String> = self
            .source
            .include_dirs
            .iter()
            .chain(self.vendors.values().flat_map(|v| &v.dirs))
            .cloned()
            .collect();
        SourceLayout::new(&self.source.kbuild_top, &includes)
    }

    /// Every directory prefix of a vendor driver: `source.driver_dirs` and each vendor's `dirs`.
    pub fn driver_dirs(&self) -> Vec<String> {
        let mut dirs = self.source.driver_dirs.clone();
        for d in self.vendors.values().flat_map(|v| &v.dirs) {
            if !dirs.contains(d) {
                dirs.push(d.clone());
            }
        }
        dirs
    }

    /// The graph scope that keeps only the drivers under `allowed` (a vendor's `dirs`).
    pub fn scope_of(&self, allowed: &[String]) -> VendorScope {
        VendorScope::only(&self.driver_dirs(), allowed)
    }

    pub fn vendor(&self, name: &str) -> Option<&Vendor> {
        self.vendors.get(name)
    }

    pub fn vendor_names(&self) -> Vec<String> {
        self.vendors.keys().cloned().collect()
    }

    /// A call that pins user memory (`pin_user_pages_fast`, `get_user_pages_remote`).
    pub fn is_pinning_call(&self, call: &str) -> bool {
        self.state_changing_prefixes
            .iter()
            .any(|p| call.starts_with(p.as_str()))
    }

    /// The site class of an error returned by `call`, a function outside the analysed tree
    /// (or a hardware command of `vendor`), with why in words; `None` when the rules do not
    /// know it.
    pub fn callee_site_class(
        &self,
        vendor: &Vendor,
        call: &str,
    ) -> Option<(SiteClass, &'static str)> {
        if vendor.hardware_commands.iter().any(|c| c == call) {
            return Some((
                SiteClass::Hardware,
                "a hardware command returned an error status",
            ));
        }
        if self.is_pinning_call(call) {
            return Some((
                SiteClass::Request,
                "the caller's memory could not be pinned (unmapped, misaligned or read-only)",
            ));
        }
        if self.charge_calls.iter().any(|c| c == call) {
            return Some((SiteClass::Resources, "a charge against a limit was refused"));
        }
        if self.allocation_calls.iter().any(|c| c == call) {
            return Some((SiteClass::Resources, "an allocation failed"));
        }
        None
    }

    /// A call that changes state: an allocation or pinning user memory.
    pub fn is_state_changing_call(&self, call: &str) -> bool {
        self.allocation_calls.iter().any(|a| a == call) || self.is_pinning_call(call)
    }

    /// The vendor whose directories hold `file`, if any.
    pub fn vendor_of_file(&self, file: &str) -> Option<&str> {
        self.vendors
            .iter()
            .find(|(_, v)| v.dirs.iter().any(|d| file.starts_with(d.as_str())))
            .map(|(n, _)| n.as_str())
    }
}

/// A directory named relative to the kernel root that stays inside it: the analyzer joins it
/// to the root and the fetch script extracts it from the source tarball.
fn is_tree_relative_dir(dir: &str) -> bool {
    let trimmed = dir.trim_end_matches('/');
    !trimmed.is_empty()
        && !dir.starts_with('/')
        && trimmed
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..")
}

/// The 1-based line where `key:` starts a line (a top-level block key), 0 when none does
/// (a flow mapping: serde has no positions for values it accepted).
fn line_of_top_level_key(text: &str, key: &str) -> usize {
    text.lines()
        .position(|l| {
            l.strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with(':'))
        })
        .map_or(0, |i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_rules_parse() {
        let r = Rules::builtin().expect("builtin rules");
        assert_eq!(
            r.focus_ops.objects.get("ib_qp").map(String::as_str),
            Some("QP")
        );
        assert!(r.vendor("mlx5").is_some() && r.vendor("rxe").is_some());
    }

    #[test]
    fn syntax_errors_name_line_and_column() {
        let err = Rules::parse("vendors: {}\nfocus_ops: [\n", "my.yaml").unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("my.yaml:"), "{msg}");
        let text = BUILTIN_RULES.replace("evidence_depth: 2", "evidence_depth: two");
        let msg = Rules::parse(&text, "r.yaml").unwrap_err().to_string();
        assert!(
            msg.contains("r.yaml:") && msg.contains("evidence_depth"),
            "{msg}"
        );
    }

    #[test]
    fn depth_limit_out_of_range_names_file_line_and_key() {
        let text = BUILTIN_RULES.replace("vendor_walk_depth: 8", "vendor_walk_depth: 80");
        assert_ne!(text, BUILTIN_RULES, "vendor_walk_depth found");
        let msg = Rules::parse(&text, "r.yaml").unwrap_err().to_string();
        let line = 1 + BUILTIN_RULES
            .lines()
            .position(|l| l.starts_with("vendor_walk_depth:"))
            .expect("key line");
        assert!(
            msg.starts_with(&format!(
                "r.yaml:{line}: `vendor_walk_depth: 80`: expected at most"
            )),
            "{msg}"
        );
        assert_eq!(msg.lines().count(), 1, "{msg}");
    }

    #[test]
    fn limits_moved_from_code_are_validated_like_the_others() {
        for (from, to) in [
            ("calls_depth: 8", "calls_depth: 99"),
            ("suggest_hops: 3", "suggest_hops: 17"),
            ("replacement_depth: 12", "replacement_depth: 40"),
        ] {
            let text = BUILTIN_RULES.replace(from, to);
            assert_ne!(text, BUILTIN_RULES, "{from} found");
            let key = from.split(':').next().unwrap_or_default();
            let line = 1 + BUILTIN_RULES
                .lines()
                .position(|l| l.starts_with(from))
                .expect("key line");
            let msg = Rules::parse(&text, "r.yaml").unwrap_err().to_string();
            assert!(
                msg.starts_with(&format!("r.yaml:{line}: `{to}`")),
                "{key}: {msg}"
            );
            assert_eq!(msg.lines().count(), 1, "{msg}");
        }
        let r = Rules::builtin().expect("builtin rules");
        assert_eq!(
            (r.calls_depth, r.suggest_hops, r.replacement_depth),
            (8, 3, 12)
        );
    }

    #[test]
    fn every_depth_limit_is_in_range_in_the_builtin_rules() {
        let r = Rules::builtin().expect("builtin rules");
        for (key, value) in r.depth_limits() {
            assert!(value <= MAX_DEPTH_LIMIT, "{key}: {value}");
            assert!(
                line_of_top_level_key(BUILTIN_RULES, key) > 0,
                "{key} is a block key"
            );
        }
    }

    #[test]
    fn source_layout_names_every_vendor_include_dir() {
        let r = Rules::builtin().expect("builtin rules");
        let layout = r.source_layout();
        assert_eq!(layout.kbuild_top, "drivers/infiniband");
        for dir in [
            "include/rdma",
            "include/uapi/rdma",
            "include/linux/mlx5",
            "include/linux/mlx4",
        ] {
            assert!(
                layout.include_dirs.iter().any(|d| d == dir),
                "{dir}: {layout:?}"
            );
        }
        let drivers = r.driver_dirs();
        assert!(
            drivers.iter().any(|d| d == "include/linux/mlx4/"),
            "{drivers:?}"
        );
        assert!(
            drivers.iter().any(|d| d == "drivers/infiniband/hw/"),
            "{drivers:?}"
        );
    }

    #[test]
    fn a_directory_outside_the_tree_is_rejected() {
        let text =
            BUILTIN_RULES.replace("include_dirs: [include/rdma/,", "include_dirs: [../rdma/,");
        assert_ne!(text, BUILTIN_RULES);
        let msg = Rules::parse(&text, "r.yaml").unwrap_err().to_string();
        assert!(msg.contains("`../rdma/`"), "{msg}");
    }

    #[test]
    fn the_data_plane_structure_is_data_with_its_reasons() {
        let r = Rules::builtin().expect("builtin rules");
        let dp = r.data_plane.as_ref().expect("data_plane section");
        assert!(dp.event_handler_fields.iter().any(|f| f == "event_handler"));
        assert!(dp.error_events.iter().any(|e| e == "IB_EVENT_QP_FATAL"));
        assert!(dp.error_statuses.iter().all(|s| s != "IB_WC_SUCCESS"));
        assert!(r.completion_depth > 0 && r.completion_depth <= MAX_DEPTH_LIMIT);
        let blank = blank_first_quoted_reason(BUILTIN_RULES);
        let msg = Rules::parse(&blank, "r.yaml").unwrap_err().to_string();
        assert!(
            msg.contains("INIT_IB_EVENT_HANDLER") && msg.contains("reason"),
            "{msg}"
        );
    }

    /// The rules with the first quoted reason (the registration's) emptied.
    fn blank_first_quoted_reason(text: &str) -> String {
        let start = text.find("reason: \"").expect("a reason");
        let end = start + text[start..].find("\"}").expect("its end");
        format!("{}reason: \"  {}", &text[..start], &text[end..])
    }

    #[test]
    fn unknown_object_is_rejected() {
        let text = BUILTIN_RULES.replace("ib_qp: QP", "ib_qp: QQ");
        let msg = Rules::parse(&text, "r.yaml").unwrap_err().to_string();
        assert!(
            msg.contains("ib_qp: QQ") && msg.contains("expected one of"),
            "{msg}"
        );
    }
}
