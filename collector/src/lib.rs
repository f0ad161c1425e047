//! Runtime collector: loads a probe set's BPF object, attaches it per its manifest, drains the
//! failure records continuously and writes one per-host snapshot per interval.
//!
//! The pure pipeline (decode, batch, counters, snapshot, invariant, sinks, exposition) has no
//! BPF in it and is fed either by the live loader ([`live`], libbpf-rs) or by a replay file
//! ([`replay`]); both go through [`pipeline::Pipeline`] and [`run`].
//!
//! Record layout: [`record`] re-exports the `manifest` crate's `PgRecord`, the one Rust mirror
//! of the C `struct pg_record` (checked against the shared field table there).

pub mod chains;
pub mod clickhouse;
pub mod decode;
pub mod errno;
pub mod live;
pub mod metrics;
pub mod owner;
pub mod pipeline;
pub mod probes;
pub mod procinfo;
pub mod record;
pub mod replay;
pub mod run;
pub mod sink;
pub mod timefmt;

pub use pipeline::{check_invariant, Invariant, KernelTotals, Pipeline};
pub use record::{PgErrnoKey, PgRecord, RECORD_SIZE};
