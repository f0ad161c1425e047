//! What a snapshot is on the wire: [`Snapshot`] and every type it serialises, with the
//! status a sink reports back ([`SinkStatus`]) and the run's cumulative counters an exposition
//! shows ([`Totals`]). The pipeline builds these values and the sinks read them; this module
//! imports neither (its only imports are the leaves: the probe table, the record, the errno
//! names), so a sink crate can depend on it without seeing how a snapshot is made.

pub(crate) mod baseline;
pub(crate) mod chains;
pub(crate) mod line;
pub(crate) mod shared;
pub(crate) mod snapshot;

pub use baseline::{
    BaselineOut, Bifurcation, ChainNote, ExemplarOut, ExpectedOut, HandlerOut, HandlerSummary,
    JobMixOut, ShapeOut, StateView, TraceCounts, VerbMixOut,
};
pub use chains::{ChainClock, ChainView, ChainsOut, Link};
pub use shared::SharedPart;
pub use snapshot::{
    AgentCost, CounterOut, Drops, Errors, Invariant, InvariantProbe, MetricKind, Rec, RecordsOut,
    SinkMetric, SinkStatus, Snapshot, Totals, Window, SNAPSHOT_KEYS,
};
