//! Errors the analyzer reports to the user: each names the file (and line when known).

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum AnalyzerError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}: not a kernel source tree: expected {1}")]
    NotKernelTree(PathBuf, &'static str),
    #[error("unknown entry function `{0}`: no definition of that name in the built sources")]
    UnknownEntry(String),
    #[error("unknown function `{0}`")]
    UnknownFunction(String),
    #[error("{file}:{line}: {message}")]
    Syntax {
        file: String,
        line: usize,
        message: String,
    },
}

impl AnalyzerError {
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        Self::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// A problem that does not stop the analysis (parse error range, lossy decode, unreadable file).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Warning {
    pub file: String,
    pub line: usize,
    pub message: String,
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.message)
    }
}
