//! The host agent's command line, shared by `probegen collect` / `probegen schema` and the
//! small `probegen-agent` binary (no analyzer, no C parser): the `collect` flags, the
//! ClickHouse sink they open, the events of a run printed on stderr, and `schema`.

mod collect;
mod error;
mod flags;
mod fleet;

pub use collect::{collect, options, CollectArgs, Sinks};
pub use error::AgentError;
pub use flags::{parse_duration, parse_listen};
pub use fleet::{report, schema, Fleet, FleetArgs, SchemaArgs};
