//! Why a bundle cannot be written, read or chosen from: one line each (the CLI and the agent
//! print it and exit 2).

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// A file or directory could not be read, written or listed.
    #[error("{}: {source}", .path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// An input is not what a bundle needs (the line names the file and what was expected).
    #[error("{0}")]
    Invalid(String),
    /// A set's manifest is not one (its line names the file:line).
    #[error(transparent)]
    Manifest(#[from] manifest::ManifestError),
    /// A set's file could not be read within its bound.
    #[error(transparent)]
    Input(#[from] manifest::InputError),
    /// The compile step passed in (or the union's C) failed for a set.
    #[error("{0}")]
    Compile(String),
}

impl BundleError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| BundleError::Io { path, source }
    }
}
