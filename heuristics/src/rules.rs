//! The rules file: vendors and the name/evidence lists each rule uses.

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
    #[serde(default)]
    pub hardware_commands: Vec<String>,
    #[serde(default)]
    pub hardware_functions: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Rules {
    pub vendors: BTreeMap<String, Vendor>,
}

impl Rules {
    pub fn builtin() -> Result<Self, RulesError> {
        Self::parse(BUILTIN_RULES, "heuristics/rules.yaml")
    }

    /// Parse rules text; `origin` names the file in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, RulesError> {
        serde_yaml::from_str(text).map_err(|e| {
            let (line, column) = e.location().map_or((0, 0), |l| (l.line(), l.column()));
            RulesError::Syntax {
                origin: origin.to_string(),
                line,
                column,
                message: e.to_string(),
            }
        })
    }

    pub fn vendor(&self, name: &str) -> Option<&Vendor> {
        self.vendors.get(name)
    }

    pub fn vendor_names(&self) -> Vec<String> {
        self.vendors.keys().cloned().collect()
    }
}
