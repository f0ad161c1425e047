//! The agent's one error type.

/// Why a command of the agent fails (printed as one line; exit 2).
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// Flags that are out of range or do not parse.
    #[error("{0}")]
    Usage(String),
    /// The collector cannot start, or ended early.
    #[error(transparent)]
    Collect(#[from] collector::CollectError),
    /// The bundle cannot be read, or the host's kernel not told.
    #[error(transparent)]
    Bundle(#[from] bundle::BundleError),
}
