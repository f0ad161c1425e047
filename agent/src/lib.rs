//! The host agent's command line, shared by `probegen collect` / `probegen schema` and the
//! small `probegen-agent` binary (no analyzer, no C parser): the `collect` flags, the
//! ClickHouse sink they open, the events of a run printed on stderr, and `schema`.

mod collect;
mod flags;
mod fleet;

pub use collect::{collect, options, CollectArgs, Sinks};
pub use flags::{parse_duration, parse_listen};
pub use fleet::{report, schema, Fleet, FleetArgs, SchemaArgs};

/// Why a command of the agent fails (printed as one line; exit 2).
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// Flags that are out of range or do not parse.
    #[error("{0}")]
    Usage(String),
    /// The collector cannot start, or ended early.
    #[error(transparent)]
    Collect(#[from] collector::CollectError),
}
