//! Where snapshots go: a [`Sink`] takes a finished [`Snapshot`] and says how it went. The
//! JSONL file is the sink here; the others implement the same trait in their own crates and
//! are handed to the run ([`crate::Hooks::sinks`]): the ClickHouse spool (`sink-clickhouse`)
//! and the Prometheus exposition (`sink-prometheus`). Sinks see the wire types
//! only, never the pipeline. A sink error is counted by the run loop and reported, never
//! fatal.

pub(crate) mod jsonl;
pub(crate) mod line;
pub(crate) mod sink;

pub use sink::{Sink, SinkError};
