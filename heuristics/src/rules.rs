//! The rules file (`heuristics/rules.yaml`): vendors, the lists each rule reads, overrides.

use std::collections::BTreeMap;

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
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Vendor {
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

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rules {
    pub vendors: BTreeMap<String, Vendor>,
    pub focus_ops: FocusOpsRule,
    pub object_tokens: BTreeMap<String, String>,
    pub update_tokens: Vec<String>,
    pub generic: GenericRule,
    pub cleanup_tokens: Vec<String>,
    pub read_only_tokens: Vec<String>,
    pub allocation_calls: Vec<String>,
    /// Name prefixes of calls that change state outside the subsystem (pinning user pages):
    /// evidence like an allocation.
    #[serde(default)]
    pub state_changing_prefixes: Vec<String>,
    pub evidence_depth: usize,
    pub failure_depth: usize,
    pub helper_depth: usize,
    #[serde(default)]
    pub overrides: Overrides,
}

const OBJECTS: &[&str] = &["QP", "MR", "PD", "CQ"];

impl Rules {
    pub fn builtin() -> Result<Self, RulesError> {
        Self::parse(BUILTIN_RULES, "heuristics/rules.yaml")
    }

    /// Parse rules text; `origin` names the file in errors (file:line:column and the field).
    pub fn parse(text: &str, origin: &str) -> Result<Self, RulesError> {
        let rules: Rules = serde_yaml::from_str(text).map_err(|e| {
            let (line, column) = e.location().map_or((0, 0), |l| (l.line(), l.column()));
            RulesError::Syntax {
                origin: origin.to_string(),
                line,
                column,
                message: e.to_string(),
            }
        })?;
        rules.validate(origin)?;
        Ok(rules)
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
            if !OBJECTS.contains(&obj.as_str()) {
                return Err(bad(format!(
                    "`{member}: {obj}`: expected one of {}",
                    OBJECTS.join(", ")
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
        for o in self.focus_ops.include.iter().chain(&self.focus_ops.exclude) {
            if o.reason.trim().is_empty() {
                return Err(bad(format!(
                    "focus_ops override of `{}`: expected a non-empty `reason`",
                    o.member
                )));
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
    fn unknown_object_is_rejected() {
        let text = BUILTIN_RULES.replace("ib_qp: QP", "ib_qp: QQ");
        let msg = Rules::parse(&text, "r.yaml").unwrap_err().to_string();
        assert!(
            msg.contains("ib_qp: QQ") && msg.contains("expected one of"),
            "{msg}"
        );
    }
}
