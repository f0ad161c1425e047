//! The agent's one error type.

/// Why a command of the agent fails (printed as one line; exit 2).
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// Flags that are out of range or do not parse.
    #[error("{0}")]
    Usage(String),
    /// A flag's value does not parse.
    #[error(transparent)]
    Flag(#[from] crate::flags::FlagError),
    /// The ClickHouse sink's options (URL, password, schema) are refused.
    #[error(transparent)]
    Clickhouse(#[from] sink_clickhouse::ClickhouseError),
    /// The collector cannot start, or ended early.
    #[error(transparent)]
    Collect(#[from] collector::CollectError),
    /// The bundle cannot be read, or the host's kernel not told.
    #[error(transparent)]
    Bundle(#[from] bundle::BundleError),
}
