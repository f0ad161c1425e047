//! The provider stage of `collect --provider-probes`: mlx5, bnxt_re and irdma write
//! completions straight into the job's memory, so an error completion is seen only by the
//! user-space provider library. Each scan lists the provider libraries the host's processes
//! mapped (`providers::loaded_providers`), and the provider table (`generated/providers.yaml`,
//! shipped) says for each build-id where its error-completion function is; one uprobe per
//! resolved library (`providers/bpf/mlx5_cqe.bpf.c`) records each error completion. Each window
//! the records become the snapshot's `providers` part: per QP the first, with its job and the
//! peer the kernel kept at RTR, and a count of the rest.
//!
//! Flow: `scan` (libraries -> plan -> attach, detach) -> `probe` (the object, its ring and
//! counters) -> `qps` (records -> bounded per-QP table) -> the snapshot. A library the table
//! does not name is never probed blind; one whose file changes under a running job is
//! detached; each is one line naming the path and the build-id.

mod error;
mod probe;
mod qps;
mod scan;
mod stage;

pub use error::StageError;
pub use stage::{ProviderStage, ProviderStageOptions};
