//! The arguments several commands share (their own file, so the command files that read
//! them do not import `main.rs`).

use std::path::PathBuf;

use clap::ValueEnum;

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub(crate) enum Format {
    Text,
    Json,
}

/// Options every source-reading command shares.
#[derive(clap::Args, Clone)]
pub(crate) struct SourceArgs {
    /// Kernel source directory (the output of scripts/fetch-kernel.sh)
    #[arg(long, value_name = "DIR")]
    pub kernel_src: PathBuf,
    /// Use this .config instead of DIR/.config
    #[arg(long, value_name = "FILE")]
    pub kconfig: Option<PathBuf>,
    /// Keep only this vendor's driver (mlx5, bnxt_re, irdma, rxe, ...; or one a --rules file adds)
    #[arg(long)]
    pub vendor: Option<String>,
    /// Write the set even when the input is degraded (unreadable or damaged files, a .config
    /// or modules missing); the manifest and report then list what was lost
    #[arg(long)]
    pub allow_degraded: bool,
    /// The vendor's driver is expected to be missing or not built by the config: write its
    /// set (vendor probes `not-built`) instead of failing
    #[arg(long)]
    pub not_built: bool,
    /// Selection rules (a copy of heuristics/rules.yaml); also the source of the vendors
    #[arg(long, value_name = "FILE")]
    pub rules: Option<PathBuf>,
    /// Binaries for attach verdicts instead of DIR/vmlinux and DIR/modules: a directory with
    /// vmlinux and the RDMA modules (*.ko, or modules/*.ko)
    #[arg(long, value_name = "DIR")]
    pub btf: Option<PathBuf>,
    /// Parse every file instead of reusing the per-file facts cache
    /// ($PROBEGEN_CACHE/facts, default ~/.cache/probegen/facts; bound: $PROBEGEN_FACTS_CACHE_MB, 512)
    #[arg(long)]
    pub no_cache: bool,
}
