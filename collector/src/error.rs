//! Why a collection cannot start or ends early: one enum, each value one clear line (the CLI
//! prints it and exits 2). Problems met while collecting (a sink write, a counter read) are
//! counted and logged instead; they never end the run.

use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    /// The manifest cannot be read or parsed.
    #[error(transparent)]
    Read(#[from] manifest::ManifestError),
    /// The manifest is not a probe set the collector can run (its probes' table).
    #[error("{0}")]
    Manifest(String),
    /// Options that exclude each other, or neither of two that are needed.
    #[error("{0}")]
    Usage(&'static str),
    /// The BPF object cannot be opened, does not match the manifest, or fails to load.
    #[error("{}: {reason}", .object.display())]
    Object { object: PathBuf, reason: String },
    /// libbpf refuses to load the object (the verifier, a missing BTF target).
    #[error("loading {}: {reason}", .object.display())]
    Load { object: PathBuf, reason: String },
    /// A value the loader refuses before opening anything (`--ringbuf-bytes`).
    #[error("{0}")]
    Option(String),
    /// `--strict`: a probe the running kernel cannot attach.
    #[error("--strict: probe {probe} {module}:{function}: {reason}")]
    Strict {
        probe: u32,
        module: String,
        function: String,
        reason: String,
    },
    /// A libbpf call on one program or map failed.
    #[error("{what}: {source}")]
    Libbpf {
        what: String,
        source: libbpf_rs::Error,
    },
    /// A map the collector reads is missing from the loaded object.
    #[error("no map `{0}`")]
    NoMap(String),
    /// A replay file that cannot be opened or read (the line is in `source`).
    #[error("replay {}: {source}", .path.display())]
    Replay { path: PathBuf, source: ReplayError },
    /// A file the collector writes or reads besides the sink (`--record`, the replay input).
    #[error("{}{}: {source}", .what.map(|w| format!("{w} ")).unwrap_or_default(), .path.display())]
    File {
        what: Option<&'static str>,
        path: PathBuf,
        source: std::io::Error,
    },
    /// The metrics server cannot bind.
    #[error("--metrics {addr}: {source}")]
    Metrics {
        addr: SocketAddr,
        source: std::io::Error,
    },
    /// A sink the embedder adds cannot start (ClickHouse: its spool directory, its sender).
    #[error("{0}")]
    Sink(SinkError),
    /// A sink the embedder adds is named like a field of the snapshot, where its status would
    /// go under its name.
    #[error("a sink may not be named `{0}`: the snapshot's line has a field of that name")]
    SinkName(String),
}

/// Why one snapshot did not reach one sink (counted; the run goes on).
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// The line could not be written (the file, the disk, stdout).
    #[error("{0}")]
    Write(#[from] std::io::Error),
    /// The snapshot could not be queued (a spool directory): the sink's own error, which the
    /// collector shows and counts without knowing its type.
    #[error("{0}")]
    Spool(Box<dyn std::error::Error + Send + Sync>),
}

impl SinkError {
    /// What did not happen to the snapshot: `written` or `spooled`.
    pub fn verb(&self) -> &'static str {
        match self {
            SinkError::Write(_) => "written",
            SinkError::Spool(_) => "spooled",
        }
    }
}

/// Why a replay file cannot be read (the CLI prefixes `replay FILE: `). Here, with the run's
/// other errors, so that this file imports no module of the collector's: the replay reader
/// uses it, never the other way.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("raw replay: {bytes} trailing bytes at offset {offset}")]
    TrailingBytes { bytes: usize, offset: u64 },
    #[error("line {line}: {reason}")]
    Line { line: usize, reason: String },
}
