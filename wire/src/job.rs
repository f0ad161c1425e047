//! The job a failing process belongs to, as a record carries it (the collector reads it from
//! `/proc`).

use std::collections::BTreeMap;

/// What a record is enriched with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcInfo {
    /// Cgroup path (v2 `0::` line, else the first hierarchy's), empty when unknown.
    pub cgroup: String,
    /// Allow-listed environment variables that are set.
    pub job: BTreeMap<String, String>,
    /// /proc/<pid> was gone when the first record arrived.
    pub exited: bool,
}
