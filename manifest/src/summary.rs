//! A probe as a reviewer reads it in a report (`check`, `diff`): the one summary of a
//! [`Probe`], for every crate that lists probes.

use serde::Serialize;

use crate::types::Probe;
use crate::vocab::{Attach, FocusKind, Layer, Object, Rule};

/// The fields of a probe a reviewer needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProbeSummary {
    pub function: String,
    pub module: String,
    pub file: String,
    pub line: usize,
    pub layer: Layer,
    pub object: Object,
    pub rule: Rule,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub focus: Option<FocusKind>,
    pub attach: Attach,
}

impl From<&Probe> for ProbeSummary {
    fn from(p: &Probe) -> Self {
        Self {
            function: p.function.clone(),
            module: p.module.clone(),
            file: p.file.clone(),
            line: p.line,
            layer: p.layer,
            object: p.object,
            rule: p.rule,
            focus: p.focus,
            attach: p.attach,
        }
    }
}

impl ProbeSummary {
    /// `focus (ops-impl)`, `override`.
    pub fn rule_text(&self) -> String {
        match &self.focus {
            Some(f) => format!("{} ({f})", self.rule),
            None => self.rule.to_string(),
        }
    }
}
