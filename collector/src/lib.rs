//! Runtime collector: loads a probe set's BPF object, attaches it per its manifest, drains the
//! failure records continuously and writes one per-host snapshot per interval.
//!
//! The face is this file's `pub use` list; every module is private. Roles, one folder or file
//! each, and the one way they depend on each other:
//!
//! * [`wire`](Snapshot): the snapshot and what it serialises, the sink status, the run totals.
//!   It imports only the leaves (the probe table, the record, errno names, the `Owner` type).
//! * processing (`pipeline`, `chains`, `owner`, `procinfo`, `decode`): records in, a
//!   [`Snapshot`] per window out; builds wire values, never sees a sink.
//! * sources (`live/`: the BPF loader and the ring buffer; `replay/`: the replay file format
//!   and the replay source), behind the one `Source` trait that feeds the pipeline.
//! * `sinks/`: the [`Sink`] trait and the JSONL file. A sink sees wire types only; the
//!   ClickHouse spool (`sink-clickhouse`) and the Prometheus exposition (`sink-prometheus`)
//!   implement the same trait in their own crates and come in through [`Hooks::sinks`].
//! * `outfile`: a leaf for the files the collector writes (the JSONL, its lock, `--record`):
//!   opened as its own, never through a link or into a FIFO; the sinks and sources use it.
//! * `run/`: the loop over a source, the sinks in order, the error count, the [`Event`]s the
//!   embedder prints ([`Hooks`]); the library prints no chain line and no sink error.
//!
//! So: wire <- processing <- sources <- run, and sinks <- run; a sink imports wire, never
//! the pipeline (`collector_imports_point_one_way` in `tests/module_graph.rs` holds it).
//!
//! Record layout: the `manifest` crate's `PgRecord`, the one Rust mirror of the C
//! `struct pg_record` (checked against the shared field table there).

mod baseline;
mod chains;
mod decode;
mod errno;
mod error;
mod kernel_state;
mod live;
mod outfile;
mod owner;
mod pipeline;
mod probes;
mod procinfo;
mod record;
mod relation;
mod replay;
mod run;
mod sinks;
mod sites;
mod source;
mod stop;
mod timefmt;
mod timings;
mod warning;
mod wire;

pub use baseline::{
    state_view as baseline_state_view, BaselineConfig, EntryChoice, Pinned, LOG2_BUCKETS,
};
pub use decode::{comm_str, encode};
pub use errno::errno_label;
pub use error::{CollectError, ReplayError};
pub use kernel_state::{AttachStatus, KernelTotals, Mechanism};
// who gets the ticket for a chain whose origin is this probe (tests and tools ask it too)
pub use owner::{decide_for as owner_by_layer, Owner};
pub use pipeline::{Pipeline, PipelineConfig};
pub use probes::{ProbeInfo, ProbeTable};
pub use procinfo::{ProcCache, ProcInfo, JOB_VALUE_MAX, JOB_VARS_MAX};
pub use record::{PgErrnoKey, PgRecord, RECORD_SIZE};
pub use replay::read as read_replay;
pub use run::outputs::MAX_CHAIN_LINES;
pub use run::{run, Event, Hooks, Options, Summary};
pub use sinks::jsonl::JsonlSink;
pub use sinks::{Sink, SinkError};
pub use sites::{decide as owner_of, owner_of_class, Candidate, OwnerDecision, NO_SITE_DATA};
pub use stop::request_stop;
pub use timefmt::unix_ns;
pub use warning::Warning;
pub use wire::chains::monotonic_ns;
pub use wire::{
    AgentCost, ChainClock, ChainView, ChainsOut, CounterOut, Drops, Errors, Invariant,
    InvariantProbe, Link, MetricKind, Rec, RecordsOut, SharedPart, SinkMetric, SinkStatus,
    Snapshot, Totals, Window, SNAPSHOT_KEYS,
};
pub use wire::{
    BaselineOut, Bifurcation, ChainNote, ExemplarOut, ExpectedOut, HandlerOut, HandlerSummary,
    JobMixOut, ShapeOut, StateView, TraceCounts, VerbMixOut,
};
