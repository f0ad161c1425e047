//! probegen: thin glue over the pipeline crates (analyzer -> heuristics -> codegen).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

mod commands;

#[derive(Parser)]
#[command(
    name = "probegen",
    version,
    about = "Kernel RDMA sources -> always-on fexit probe set"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

/// Options every source-reading command shares.
#[derive(clap::Args, Clone)]
pub struct SourceArgs {
    /// Kernel source directory (the output of scripts/fetch-kernel.sh)
    #[arg(long, value_name = "DIR")]
    pub kernel_src: PathBuf,
    /// Use this .config instead of DIR/.config
    #[arg(long, value_name = "FILE")]
    pub kconfig: Option<PathBuf>,
    /// Keep only this vendor's driver (mlx5, bnxt_re, irdma, rxe, ...)
    #[arg(long)]
    pub vendor: Option<String>,
}

#[derive(Subcommand)]
enum Command {
    /// Counts of files, functions, edges by kind, and functions reachable from the entries
    Graph {
        #[command(flatten)]
        src: SourceArgs,
        /// Entry functions (default: ib_uverbs_ioctl and ib_uverbs_write)
        #[arg(long = "entry", value_name = "NAME")]
        entries: Vec<String>,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Also print every parse warning (file:line)
        #[arg(long)]
        warnings: bool,
    },
    /// Select the probe set and write manifest.yaml and report.md (atomically) into --out
    Generate {
        #[command(flatten)]
        src: SourceArgs,
        /// Output directory
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// Rules file (default: the built-in heuristics/rules.yaml)
        #[arg(long, value_name = "FILE")]
        rules: Option<PathBuf>,
    },
    /// Verdict, rule, evidence and call path of one function
    Explain {
        #[command(flatten)]
        src: SourceArgs,
        #[arg(long, value_name = "FILE")]
        rules: Option<PathBuf>,
        function: String,
    },
    /// Print the manifest's JSON Schema
    Schema,
    /// Shortest call path between two functions, one hop per line; exit 1 when none
    Path {
        #[command(flatten)]
        src: SourceArgs,
        #[arg(long)]
        from: String,
        #[arg(long)]
        to: String,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Graph {
            src,
            entries,
            format,
            warnings,
        } => commands::graph(&src, &entries, format, warnings),
        Command::Path { src, from, to } => commands::path(&src, &from, &to),
        Command::Generate { src, out, rules } => commands::generate(&src, &out, rules.as_deref()),
        Command::Explain {
            src,
            rules,
            function,
        } => commands::explain(&src, rules.as_deref(), &function),
        Command::Schema => {
            print!("{}", codegen::json_schema());
            Ok(ExitCode::SUCCESS)
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("probegen: {e}");
            ExitCode::from(2)
        }
    }
}
