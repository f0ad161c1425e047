//! maintain: what keeps a probe set right after it is generated. `check` (a kernel upgrade:
//! drift of the set and of the rules, successors of probes gone from the source), `port`
//! (another vendor's set through `ib_device_ops`), `diff` (coverage diff for a review) and
//! `coverage` (against a failure log). Pure: manifests, graphs and rules in, reports out; the
//! CLI reads the inputs (one rules parse per run) and prints. Markdown comes from askama
//! templates in `maintain/templates/`, as the generator's report does.

// The modules are private; this file is the crate's one face (`pub use` below).
mod chart;
mod check;
mod compare;
mod coverage;
mod markdown;
mod port;
mod verbs;

pub use chart::coverage_html;
pub use check::{rules_drift, set_of, successor};
pub use compare::{
    apply_successors, check_markdown, coverage_diff, diff_markdown, drift, rules_drift_markdown,
    Change, ChangeKind, Counts, CoverageDiff, DataPlaneChange, Drift, Fate, FileMove, MissingName,
    ObjectLayer, Removed, Renamed, RulesDrift, RulesNames, SetId, VerbDiff,
};
// the manifest's, named here too for the reports' users
pub use coverage::{
    coverage, coverage_markdown, parse_failures, total_weight, CoverageReport, FailureRow,
    InfiniteWeight, Malformed, VerbWeight,
};
pub use manifest::ProbeSummary;
pub use port::{port, CoreProbe, Mapping, Port, SetProbe, Side, Unmapped, UnmappedReason};
pub use verbs::{
    lookup as verb, routes, routes_in_manifest, status as verb_status, statuses as verb_statuses,
    HandlerVerdict, Route, Transport, VerbDef, VerbStatus, REPORTED_VERBS, VERBS,
};
