//! The stage's one error: what stops it from starting, as the agent's one line.

#[derive(Debug, thiserror::Error)]
pub enum StageError {
    #[error("--provider-table {path}: {error}")]
    Table { path: String, error: String },
    #[error("--provider-object {object}: {what}: {error}")]
    Bpf {
        object: String,
        what: String,
        error: String,
    },
}
