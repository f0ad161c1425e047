//! What the provider stage (`collect --provider-probes`) adds to a snapshot: the error
//! completions only a user-space provider library sees (libmlx5's `dump_cqe`), per QP the first
//! with its job and peer and a count of the rest, the libraries found and what was done with
//! each, and the stage's own exact accounting.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::kernel_state::QpPeer;

/// The snapshot's `providers` part: cumulative over the run, so any one line says it all.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ProvidersOut {
    /// Every provider library the host's processes mapped, and whether it is probed.
    pub libraries: Vec<ProviderLibrary>,
    /// Per (QP number, process): the first error completion and the count of all.
    pub qps: Vec<ProviderQpError>,
    /// Error completions the uprobe saw; each was read from the ring (`received`) or did not
    /// fit in it (`dropped`): `seen == received + dropped`.
    pub seen: u64,
    pub received: u64,
    pub dropped: u64,
    /// The error completions received, by the status the provider reports (every one, the
    /// first of a QP and its repeats alike; the run's sum, for a counter).
    pub by_status: BTreeMap<&'static str, u64>,
    /// QPs whose entry was dropped to keep the table at `capacity` (a flood of dying QPs):
    /// their next error makes a new entry.
    pub evicted: u64,
    pub capacity: u64,
}

impl LibraryState {
    /// The state's name, as the snapshot writes it.
    pub fn as_str(&self) -> &'static str {
        match self {
            LibraryState::Probed { .. } => "probed",
            LibraryState::Unresolved => "unresolved",
            LibraryState::Detached { .. } => "detached",
            LibraryState::Failed { .. } => "failed",
        }
    }
}

impl ProvidersOut {
    /// The accounting holds: every error completion seen was received or counted dropped.
    pub fn holds(&self) -> bool {
        self.seen == self.received + self.dropped
    }
}

/// One provider library file and the stage's decision about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProviderLibrary {
    pub path: String,
    /// Absent: the file could not be read or carries no build-id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub build_id: Option<String>,
    pub state: LibraryState,
    /// How many processes mapped it at the last scan.
    pub processes: usize,
}

/// What the stage did with a library.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum LibraryState {
    /// A uprobe at `offset` of the build the provider table names.
    Probed {
        provider: String,
        rdma_core: String,
        function: String,
        offset: u64,
    },
    /// A build the table does not name: never probed blind.
    Unresolved,
    /// Probed, then its file changed under the running jobs (another build-id at the path, or
    /// gone): detached, never a uprobe on bytes it was not resolved for.
    Detached { why: String },
    /// Resolved, but the kernel refused the uprobe.
    Failed { why: String },
}

/// The first error completion of one QP of one process, and how many it had.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProviderQpError {
    pub provider: String,
    pub qpn: u32,
    pub pid: u32,
    pub comm: String,
    /// The completion status the provider reports to the job (`IBV_WC_LOC_PROT_ERR`), from the
    /// CQE's syndrome as the provider maps it.
    pub status: &'static str,
    pub syndrome: u8,
    /// The NIC's own reason, for the vendor's support.
    pub vendor_syndrome: u8,
    /// `requester` (a work request this QP posted) or `responder` (one its peer posted).
    pub side: &'static str,
    /// bpf_ktime_get_ns() of the first (the records' clock).
    pub first_ts_ns: u64,
    /// The snapshot whose window made the entry (a fleet sink's row is written once, then).
    pub snapshot: u64,
    pub count: u64,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cgroup: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub job: BTreeMap<String, String>,
    /// The QP's peer as the kernel set it at RTR (the control path's peer probe), when the set
    /// has one and the QP went through RTR while the agent ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer: Option<QpPeer>,
}

impl ProviderQpError {
    /// The entry's job id, as a record's (`crate::ProcInfo::job_id`).
    pub fn job_id(&self) -> Option<&str> {
        crate::job::job_id_of(&self.job)
    }
}

/// The provider whose error completions the stage records (libmlx5's `dump_cqe`).
pub const MLX5_PROVIDER: &str = "mlx5";
/// Its library and error-completion function, as a fleet row names them.
pub const MLX5_LIBRARY: &str = "libmlx5";
pub const MLX5_FUNCTION: &str = "dump_cqe";

/// The `ibv_wc_status` mlx5's poll reports for an error CQE's syndrome (rdma-core
/// `providers/mlx5/cq.c`, `mlx5_handle_error_cqe`); an unknown syndrome is a general error.
pub fn mlx5_status(syndrome: u8) -> &'static str {
    match syndrome {
        0x01 => "IBV_WC_LOC_LEN_ERR",
        0x02 => "IBV_WC_LOC_QP_OP_ERR",
        0x04 => "IBV_WC_LOC_PROT_ERR",
        0x05 => "IBV_WC_WR_FLUSH_ERR",
        0x06 => "IBV_WC_MW_BIND_ERR",
        0x10 => "IBV_WC_BAD_RESP_ERR",
        0x11 => "IBV_WC_LOC_ACCESS_ERR",
        0x12 => "IBV_WC_REM_INV_REQ_ERR",
        0x13 => "IBV_WC_REM_ACCESS_ERR",
        0x14 => "IBV_WC_REM_OP_ERR",
        0x15 => "IBV_WC_RETRY_EXC_ERR",
        0x16 => "IBV_WC_RNR_RETRY_EXC_ERR",
        0x22 => "IBV_WC_REM_ABORT_ERR",
        _ => "IBV_WC_GENERAL_ERR",
    }
}

/// The side of an mlx5 error CQE from its opcode (`op_own >> 4`): 0xD requester, 0xE responder.
pub fn mlx5_side(opcode: u8) -> &'static str {
    match opcode {
        0xd => "requester",
        0xe => "responder",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_syndromes_are_the_providers_statuses() {
        assert_eq!(mlx5_status(0x04), "IBV_WC_LOC_PROT_ERR");
        assert_eq!(mlx5_status(0x13), "IBV_WC_REM_ACCESS_ERR");
        assert_eq!(mlx5_status(0x16), "IBV_WC_RNR_RETRY_EXC_ERR");
        assert_eq!(mlx5_status(0x7f), "IBV_WC_GENERAL_ERR");
        assert_eq!(mlx5_side(0xd), "requester");
        assert_eq!(mlx5_side(0xe), "responder");
        assert_eq!(mlx5_side(0x0), "unknown");
    }

    #[test]
    fn a_library_state_reads_as_one_tagged_object() {
        let lib = ProviderLibrary {
            path: "/usr/lib/x86_64-linux-gnu/libmlx5.so.1.24.44.0".into(),
            build_id: Some("800c".into()),
            state: LibraryState::Probed {
                provider: "mlx5".into(),
                rdma_core: "44.0".into(),
                function: "dump_cqe".into(),
                offset: 40992,
            },
            processes: 2,
        };
        let v = serde_json::to_value(&lib).expect("serialises");
        assert_eq!(v["state"]["state"], "probed");
        assert_eq!(v["state"]["offset"], 40992);
        let out = ProvidersOut {
            seen: 3,
            received: 2,
            dropped: 1,
            ..ProvidersOut::default()
        };
        assert!(out.holds());
    }
}
