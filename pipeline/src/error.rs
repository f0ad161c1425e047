//! What stops a command: one variant per kind of failure, each displayed as the one line the
//! user sees after `probegen: ` (exit 2).

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A vendor name the rules of this run do not define. `flag` is the option that named it;
    /// `list` is the whole `--vendor a,b` value when the name came from a list.
    #[error("{}", unknown_vendor(flag, name, list.as_deref(), known))]
    UnknownVendor {
        flag: &'static str,
        name: String,
        list: Option<String>,
        known: Vec<String>,
    },
    #[error("--vendor is required (mlx5, bnxt_re, irdma, rxe, ...)")]
    VendorRequired,
    #[error("--from and --to are both `{0}`: expected two different vendors")]
    SameVendor(String),
    #[error("--vendor {given}, but {against} is the {set} probe set: expected --vendor {set}")]
    VendorMismatch {
        given: String,
        against: String,
        set: String,
    },
    #[error("--vendor {0}: no vendor's driver is built by this config")]
    NoVendorBuilt(String),
    /// The vendor's driver is missing or not built (`--not-built` writes its set anyway).
    #[error("--vendor {vendor}: {why}; pass --not-built to write its set anyway (vendor probes `not-built`)")]
    VendorNotBuilt { vendor: String, why: String },
    /// An entry function that is not in the built sources, and what lost it.
    #[error("{} `{name}` not found in {}: {why}", if *named_by_user { "--entry" } else { "default entry" }, root.display())]
    MissingEntry {
        name: String,
        root: PathBuf,
        named_by_user: bool,
        why: String,
    },
    #[error("unknown --from `{0}`: no function of that name in the built sources")]
    UnknownFrom(String),
    #[error("unknown --to `{0}`: no function of that name in the built sources (or outside the vendor scope)")]
    UnknownTo(String),
    #[error(
        "unknown function `{0}`: not defined in the built sources (or outside the vendor scope)"
    )]
    UnknownFunction(String),
    /// The input is degraded and `--allow-degraded` was not passed; `summary` is one line.
    #[error("{summary} (pass --allow-degraded to go on; the output then lists what was lost)")]
    Degraded { summary: String },
    #[error("{count} probe target(s) disagree with the binaries in {}:\n{}", kernel.display(), list.join("\n"))]
    BinaryMismatch {
        count: usize,
        kernel: PathBuf,
        list: Vec<String>,
    },
    #[error("{origin}: {count} malformed row(s); fix them or pass --lenient to skip them")]
    MalformedRows { origin: String, count: usize },
    #[error("PROBEGEN_FACTS_CACHE_MB=`{0}`: expected a positive number of megabytes")]
    CacheSize(String),
    /// An input file that breaks a bound or cannot be read or parsed: the message names
    /// `file[:line]` and what was expected (from the crate that read it).
    #[error("{0}")]
    Input(String),
    /// A manifest, or the union of two, refused (`union_set`).
    #[error(transparent)]
    Manifest(#[from] manifest::ManifestError),
    /// The union's BPF C cannot be rendered.
    #[error("{vendor}: {source}")]
    UnionRender {
        vendor: String,
        source: askama::Error,
    },
    #[error(transparent)]
    Weight(#[from] maintain::InfiniteWeight),
    #[error(transparent)]
    Analyzer(#[from] analyzer::AnalyzerError),
    #[error(transparent)]
    Binaries(#[from] analyzer::BtfError),
    #[error(transparent)]
    Rules(#[from] heuristics::RulesError),
    #[error(transparent)]
    Select(#[from] heuristics::SelectError),
    #[error(transparent)]
    Render(#[from] codegen::RenderError),
    #[error(transparent)]
    Template(#[from] askama::Error),
    #[error(transparent)]
    WriteSet(#[from] codegen::OutputError),
    /// Writing the output (the shared header, stdout).
    #[error("{0}")]
    Output(String),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

fn unknown_vendor(flag: &str, name: &str, list: Option<&str>, known: &[String]) -> String {
    let known = known.join(", ");
    match list {
        None => format!("unknown {flag} `{name}`: known vendors are {known}"),
        Some(list) => {
            format!("unknown vendor `{name}` in {flag} {list}: known vendors are {known}")
        }
    }
}
