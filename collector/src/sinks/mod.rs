//! Where snapshots go: a [`Sink`] takes a finished [`Snapshot`] and says how it went. The
//! JSONL file and the Prometheus exposition are sinks here; a sink that ships snapshots off
//! the host (the ClickHouse spool, crate `sink-clickhouse`) implements the same trait in its
//! own crate and is handed to the run ([`crate::Hooks::sinks`]). Sinks see the wire types
//! only, never the pipeline. A sink error is counted by the run loop and reported, never
//! fatal.

pub(crate) mod jsonl;
pub(crate) mod prometheus;
pub(crate) mod sink;

pub use sink::{Sink, SinkError, SinkReport};
