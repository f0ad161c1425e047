//! What crosses between the runtime's stages: the probe table a set's manifest gives, the
//! failure record as decoded, the owner of a chain, and [`Snapshot`] with every type it
//! serialises, the status a sink reports back ([`SinkStatus`]) and the run's cumulative
//! counters an exposition shows ([`Totals`]). The collector builds these values, the baseline
//! notes them and the sinks read them; this crate imports none of them, so each stands on it
//! without seeing how the others work.
//!
//! The face is this file's `pub use` list; every module is private.

mod baseline;
mod chains;
mod decode;
mod errno;
mod job;
mod kernel_state;
mod outfile;
mod owner;
mod ports;
mod probes;
mod providers;
mod qp_owner;
mod record;
mod relation;
mod running_set;
mod shared;
mod sites;
mod snapshot;
mod timefmt;

pub use baseline::{
    BaselineOut, Bifurcation, ChainNote, ExemplarOut, ExpectedOut, HandlerOut, HandlerSummary,
    JobMixOut, ShapeOut, StateView, TraceCounts, VerbMixOut, LOG2_BUCKETS,
};
pub use chains::{monotonic_ns, ChainClock, ChainView, Chains, ChainsOut, Link};
pub use decode::{comm_str, decode, encode, hex, unhex, DecodeError};
pub use errno::{errno_label, errno_name};
pub use job::{job_id_of, ProcInfo, JOB_ID_VARS};
pub use kernel_state::{AttachStatus, GidType, KernelTotals, Mechanism, QpError, QpErrors, QpPeer};
pub use outfile::{is_device, is_refused, lock_output, open_output, suffixed, OutputKind};
pub use qp_owner::qp_owner;
// who gets the ticket for a chain whose origin is this probe (tests and tools ask it too)
pub use owner::{decide_for as owner_by_layer, Owner};
pub use ports::{
    is_port_error_counter, CounterReset, PortCounterKey, PortCounterOut, PortCounters, PortReading,
    PORT_ERROR_COUNTERS,
};
pub use probes::{AttachKind, ProbeInfo, ProbeTable, TableError};
pub use providers::{
    mlx5_side, mlx5_status, LibraryState, ProviderLibrary, ProviderQpError, ProvidersOut,
    MLX5_FUNCTION, MLX5_LIBRARY, MLX5_PROVIDER,
};
pub use record::{PgErrnoKey, PgRecord, RECORD_SIZE};
pub use relation::CallRelation;
pub use running_set::{AttachedByLayer, LayerAttached, RunningSet, SetMatch, SetOut};
pub use shared::SharedPart;
pub use sites::{decide as owner_of, owner_of_class, Candidate, OwnerDecision, NO_SITE_DATA};
pub use snapshot::{
    with_peers, AgentCost, CounterOut, Drops, Errors, Invariant, InvariantProbe, MetricKind, Rec,
    RecordsOut, SinkMetric, SinkStatus, Snapshot, Totals, Window, SNAPSHOT_KEYS,
};
pub use timefmt::{rfc3339, unix_ns};
