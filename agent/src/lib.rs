//! The host agent's command line, shared by `probegen collect` / `probegen schema` and the
//! small `probegen-agent` binary (no analyzer, no C parser): the `collect` flags, the
//! ClickHouse sink they open, the events of a run printed on stderr, and `schema`; the choice
//! of a bundle's set for the running host (`collect --bundle`, the `bundle` crate's), and
//! `collect --config FILE`.

mod baseline;
mod caps;
mod choose;
mod collect;
mod config;
mod error;
mod flags;
mod fleet;
mod host;
mod providers;
mod release;

pub use baseline::{baseline_show, BaselineArgs, BaselineShowArgs};
pub use collect::{collect, options, CollectArgs, Sinks};
pub use config::expand_config;
pub use error::AgentError;
pub use flags::{parse_duration, parse_listen, FlagError};
pub use fleet::{report, schema, Fleet, FleetArgs, SchemaArgs};
pub use providers::ProviderArgs;
pub use release::{release, ReleaseArgs, DEFAULT_CONTROL};
