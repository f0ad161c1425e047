//! maintain: what keeps a probe set right after it is generated. `check` (a kernel upgrade:
//! drift of the set and of the rules, successors of probes gone from the source), `port`
//! (another vendor's set through `ib_device_ops`), `diff` (coverage diff for a review) and
//! `coverage` (against a failure log). Pure: manifests, graphs and rules in, reports out; the
//! CLI reads the inputs (one rules parse per run) and prints. Markdown comes from askama
//! templates in `maintain/templates/`, as the generator's report does.

pub mod check;
pub mod compare;
pub mod coverage;
mod markdown;
pub mod port;
pub mod verbs;
