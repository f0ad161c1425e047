//! heuristics: pure selection of probes from the call graph. Graph in, verdicts out, no I/O:
//! the rules arrive as text (the built-in `rules.yaml` or a user's copy) and are parsed here.

// The modules are private; this file is the crate's one face (`pub use` below).
mod dataplane;
mod focus_ops;
mod rules;
mod select;

// The verdicts speak the manifest's vocabulary: codegen writes them into the manifest as they are.
pub use dataplane::{DataPlaneFact, DataPlanePick};
pub use focus_ops::{Derivation, FocusMember, FocusOps, FocusOpsError};
pub use manifest::{DataPlaneClass, DataPlaneVia, FocusKind, Layer, Object, Rule};
pub use rules::{
    DataPlaneRule, FocusOpsRule, GenericRule, MemberOverride, Override, Overrides, Registration,
    Rules, RulesError, Vendor, BUILTIN_RULES, MAX_DEPTH_LIMIT,
};
pub use select::{
    nearest_attachable, select, select_with, ManifestLimits, SelectError, Selection, Verdict,
};
