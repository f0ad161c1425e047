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

/// The job variables that name a job, first set wins (a rank's `RANK`, `LOCAL_RANK` are not
/// a job: eight ranks of one job are one job).
pub const JOB_ID_VARS: [&str; 3] = ["SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "JOB_ID"];

impl ProcInfo {
    /// The job's id: the first of [`JOB_ID_VARS`] that is set, `None` without one.
    pub fn job_id(&self) -> Option<&str> {
        job_id_of(&self.job)
    }
}

/// The job's id among allow-listed variables: the first of [`JOB_ID_VARS`] that is set (a
/// record's process, a provider stage's entry).
pub fn job_id_of(vars: &BTreeMap<String, String>) -> Option<&str> {
    JOB_ID_VARS
        .iter()
        .find_map(|v| vars.get(*v).map(String::as_str))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_job_id_is_the_first_id_variable_not_a_rank() {
        let info = |vars: &[(&str, &str)]| ProcInfo {
            job: vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..ProcInfo::default()
        };
        assert_eq!(
            info(&[("RANK", "3"), ("SLURM_JOB_ID", "77"), ("JOB_ID", "x")]).job_id(),
            Some("77")
        );
        assert_eq!(
            info(&[("JOB_ID", "x"), ("LOCAL_RANK", "1")]).job_id(),
            Some("x")
        );
        assert_eq!(info(&[("RANK", "3")]).job_id(), None);
    }
}
