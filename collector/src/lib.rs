//! Runtime collector: loads a probe set's BPF object, attaches it per its manifest, drains the
//! failure records continuously and writes one per-host snapshot per interval.
//!
//! The face is this file's `pub use` list; every module is private. Roles, one folder or file
//! each, and the one way they depend on each other:
//!
//! * the `wire` crate: the probe table, the record, the owner, the snapshot and what it
//!   serialises; the `baseline` crate: the trace pipeline the pipeline calls through one
//!   trait (`baseline::TraceBaseline`). Both stand below the collector, never on it.
//! * processing (`pipeline`, `chains`, `procinfo`): records in, a [`Snapshot`] per window
//!   out; builds wire values, never sees a sink.
//! * sources (`live/`: the BPF loader and the ring buffer; `replay/`: the replay file format
//!   and the replay source), behind the one `Source` trait that feeds the pipeline.
//! * `sinks/`: the [`Sink`] trait and the JSONL file. A sink sees wire types only; the
//!   ClickHouse spool (`sink-clickhouse`) and the Prometheus exposition (`sink-prometheus`)
//!   implement the same trait in their own crates and come in through [`Hooks::sinks`].
//! * stages beside the source (`stage.rs`: the [`Stage`] trait): the port counters
//!   (`stage-ports`) and the provider uprobes (`stage-providers`) each in their own crate on
//!   `wire`'s types, added by the embedder through [`Hooks::stages`], given the QPs' peers.
//! * `run/`: the loop over a source, the sinks in order, the error count, the [`Event`]s the
//!   embedder prints ([`Hooks`]); the library prints no chain line and no sink error.
//!
//! So: processing <- sources <- run, and sinks <- run; a sink imports wire, never
//! the pipeline (`collector_imports_point_one_way` in `tests/module_graph.rs` holds it).
//!
//! Record layout: the `manifest` crate's `PgRecord`, the one Rust mirror of the C
//! `struct pg_record` (checked against the shared field table there).

mod chains;
mod error;
mod live;
mod pipeline;
mod procinfo;
mod replay;
mod run;
mod sinks;
mod source;
mod stage;
mod stop;
mod timings;
mod warning;

pub use error::CollectError;
pub use error::ReplayError;
pub use pipeline::{Pipeline, PipelineConfig};
pub use procinfo::{ProcCache, JOB_VALUE_MAX, JOB_VARS_MAX};
pub use replay::read as read_replay;
pub use run::outputs::MAX_CHAIN_LINES;
pub use run::{run, Event, Hooks, Options, Summary};
pub use sinks::jsonl::JsonlSink;
pub use sinks::{Sink, SinkError};
pub use stage::{PeerLookup, Stage};
pub use stop::request_stop;
pub use warning::Warning;
// The stages below the collector, under the names its users have always had.
pub use wire::{
    comm_str, encode, errno_label, monotonic_ns, owner_by_layer, owner_of, owner_of_class, unix_ns,
    AttachStatus, Candidate, KernelTotals, Mechanism, Owner, OwnerDecision, PgErrnoKey, PgRecord,
    ProbeInfo, ProbeTable, ProcInfo, NO_SITE_DATA, RECORD_SIZE,
};
pub use wire::{
    AgentCost, ChainClock, ChainView, ChainsOut, CounterOut, Drops, Errors, Invariant,
    InvariantProbe, Link, MetricKind, Rec, RecordsOut, SharedPart, SinkMetric, SinkStatus,
    Snapshot, Totals, Window, SNAPSHOT_KEYS,
};
// the data plane: a probe's kind and class, the per-QP table
pub use manifest::DataPlaneClass;
pub use wire::{qp_owner, AttachKind, GidType, QpError, QpErrors, QpPeer};
pub use wire::{AttachedByLayer, LayerAttached, RunningSet, SetMatch, SetOut};
pub use wire::{
    BaselineOut, Bifurcation, ChainNote, ExemplarOut, ExpectedOut, HandlerOut, HandlerSummary,
    JobMixOut, ShapeOut, StateView, TraceCounts, VerbMixOut, LOG2_BUCKETS,
};
pub use wire::{CounterReset, PortCounterKey, PortCounterOut, PORT_ERROR_COUNTERS};
pub use wire::{ProviderQpError, ProvidersOut, MLX5_FUNCTION, MLX5_LIBRARY, MLX5_PROVIDER};
