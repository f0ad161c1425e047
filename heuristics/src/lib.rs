//! heuristics: pure selection of probes from the call graph. Graph in, verdicts out, no I/O:
//! the rules arrive as text (the built-in `rules.yaml` or a user's copy) and are parsed here.

pub mod focus_ops;
pub mod rules;
pub mod select;

pub use rules::{Rules, RulesError, Vendor};
pub use select::{
    nearest_attachable, select, select_with, FocusKind, Layer, Object, Rule, SelectError,
    Selection, Verdict,
};
