//! heuristics: pure selection of probes from the call graph. Graph in, verdicts out, no I/O:
//! the rules arrive as text (the built-in `rules.yaml` or a user's copy) and are parsed here.

pub mod focus_ops;
pub mod rules;
pub mod select;

// The verdicts speak the manifest's vocabulary: codegen writes them into the manifest as they are.
pub use manifest::{FocusKind, Layer, Object, Rule};
pub use rules::{Rules, RulesError, Vendor};
pub use select::{
    nearest_attachable, select, select_with, ManifestLimits, SelectError, Selection, Verdict,
};
