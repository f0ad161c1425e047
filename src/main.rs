//! probegen: the command line. Parses the arguments, makes one call into the `pipeline` crate
//! per command (`collect` and `schema`: the `collector` crate) and prints.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use args::{Format, SourceArgs};

mod alloc;
mod args;
mod cmd_bundle;
mod cmd_collect;
mod cmd_fleet;
mod cmd_maintain;
mod cmd_providers;
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
        /// Entry functions (default: ib_uverbs_ioctl and ib_uverbs_write)
        #[arg(long = "entry", value_name = "NAME")]
        entries: Vec<String>,
        /// Write the shared probegen.bpf.h once into DIR instead of beside each set's
        /// probes.bpf.c (compile the sets with -I DIR)
        #[arg(long, value_name = "DIR")]
        header_dir: Option<PathBuf>,
    },
    /// Verdict, rule, evidence and call path of one function
    Explain {
        #[command(flatten)]
        src: SourceArgs,
        function: String,
    },
    /// Print the manifest's JSON Schema (--clickhouse: the fleet tables' DDL)
    Schema(cmd_fleet::SchemaArgs),
    /// Load a probe set, attach it, write a snapshot of failures every --interval
    Collect(Box<cmd_collect::CollectArgs>),
    /// Compile every checked-in set into a bundle for hosts: objects, manifests, index.json
    Bundle {
        /// The sets: linux-<ver>/<vendor>/{manifest.yaml,probes.bpf.c} under it
        #[arg(long, value_name = "DIR", default_value = "generated")]
        sets: PathBuf,
        /// The bundle directory (replaced when it holds a bundle)
        #[arg(long, value_name = "DIR", required_unless_present = "list")]
        out: Option<PathBuf>,
        /// Print the index of the bundle in DIR instead: each set's series, flavor and kernel
        #[arg(long, value_name = "DIR", conflicts_with = "out")]
        list: Option<PathBuf>,
    },
    /// What the rules name: --source-dirs prints the kernel source directories they read
    Rules {
        /// One directory a line: the Kbuild root, then the include and vendor directories
        #[arg(long, required = true)]
        source_dirs: bool,
        /// A rules file instead of the built-in rules
        #[arg(long, value_name = "FILE")]
        rules: Option<PathBuf>,
    },
    /// Shortest call path between two functions, one hop per line; exit 1 when none
    Path {
        #[command(flatten)]
        src: SourceArgs,
        #[arg(long)]
        from: String,
        #[arg(long)]
        to: String,
    },
    /// Regenerate and compare with a checked-in manifest: exit 0 no drift, 1 drift, 2 error
    Check {
        #[command(flatten)]
        src: SourceArgs,
        /// The manifest to check (generated/<ver>/<vendor>/manifest.yaml)
        #[arg(long, value_name = "MANIFEST")]
        against: PathBuf,
        #[arg(long, value_enum, default_value_t = cmd_maintain::ReportFormat::Markdown)]
        format: cmd_maintain::ReportFormat,
        /// Also write the regenerated set as pictures with the drift drawn on them
        #[arg(long, value_name = "FILE.html")]
        html: Option<PathBuf>,
    },
    /// Map one vendor's probes to another's through the ib_device_ops members they fill
    Port {
        #[arg(long, value_name = "DIR")]
        kernel_src: PathBuf,
        #[arg(long, value_name = "FILE")]
        kconfig: Option<PathBuf>,
        /// Source vendor (mlx5, ...)
        #[arg(long)]
        from: String,
        /// Target vendor (bnxt_re, irdma, ...)
        #[arg(long)]
        to: String,
        #[arg(long, value_name = "FILE")]
        rules: Option<PathBuf>,
        #[arg(long, value_enum, default_value_t = cmd_maintain::ReportFormat::Markdown)]
        format: cmd_maintain::ReportFormat,
    },
    /// Coverage diff of two manifests: probes, object x layer, userspace verbs
    Diff {
        old: PathBuf,
        new: PathBuf,
        #[arg(long, value_enum, default_value_t = cmd_maintain::ReportFormat::Markdown)]
        format: cmd_maintain::ReportFormat,
        /// Also write NEW as pictures with the change drawn on them
        #[arg(long, value_name = "FILE.html")]
        html: Option<PathBuf>,
    },
    /// User-space provider libraries: their error-completion function per build-id
    Providers {
        #[command(subcommand)]
        command: cmd_providers::ProvidersCommand,
    },
    /// Covered share of a failure log (CSV verb,errno,weight) by a probe set
    Coverage {
        #[arg(long, value_name = "MANIFEST")]
        manifest: PathBuf,
        #[arg(long, value_name = "FILE.csv")]
        failures: PathBuf,
        #[arg(long, value_enum, default_value_t = cmd_maintain::ReportFormat::Markdown)]
        format: cmd_maintain::ReportFormat,
        /// Skip malformed rows (reported on stderr) instead of failing
        #[arg(long)]
        lenient: bool,
        /// Also write the shares by rule and by verb as bar charts
        #[arg(long, value_name = "FILE.html")]
        html: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    install_allocator_and_panic_hook();
    // `collect --config FILE`: the file's keys become flags (the command line wins)
    let args = match probegen_agent::expand_config(std::env::args_os().collect()) {
        Ok(args) => args,
        Err(e) => return exit(Err::<ExitCode, _>(e)),
    };
    let command = Cli::parse_from(args).command;
    // every command but the always-on collector: see alloc.rs
    if !matches!(command, Command::Collect(_)) {
        alloc::use_mimalloc();
    }
    run(command)
}

#[global_allocator]
static ALLOCATOR: alloc::Switching = alloc::Switching;

/// mimalloc for tree-sitter, and a panic that prints one line and exits 2.
fn install_allocator_and_panic_hook() {
    // tree-sitter allocates a node per token and frees whole trees after each file: under
    // glibc's malloc that churn (consolidation, free lists) was about a tenth of a cold `graph`.
    // Each file's parser and tree in a heap of their own, destroyed whole; the rest of the
    // process allocates from mimalloc too, but for the collector (alloc.rs).
    // SAFETY: first thing in main, before any tree-sitter allocation (the function's contract).
    unsafe {
        pipeline::use_mimalloc_for_trees();
    }
    set_panic_hook();
}

/// One subcommand, its exit code.
fn run(command: Command) -> ExitCode {
    match command {
        Command::Graph {
            src,
            entries,
            format,
            warnings,
        } => exit(commands::graph(&src, &entries, format, warnings)),
        Command::Path { src, from, to } => exit(commands::path(&src, &from, &to)),
        Command::Generate {
            src,
            out,
            entries,
            header_dir,
        } => exit(commands::generate(
            &src,
            &out,
            &entries,
            header_dir.as_deref(),
        )),
        Command::Explain { src, function } => exit(commands::explain(&src, &function)),
        Command::Check {
            src,
            against,
            format,
            html,
        } => exit(cmd_maintain::check(&src, &against, format, html.as_deref())),
        Command::Port {
            kernel_src,
            kconfig,
            from,
            to,
            rules,
            format,
        } => exit(cmd_maintain::port(
            &pipeline::PortOptions {
                kernel_src,
                kconfig,
                from,
                to,
                rules,
            },
            format,
        )),
        Command::Diff {
            old,
            new,
            format,
            html,
        } => exit(cmd_maintain::diff(&old, &new, format, html.as_deref())),
        Command::Coverage {
            manifest,
            failures,
            format,
            lenient,
            html,
        } => exit(cmd_maintain::coverage(
            &manifest,
            &failures,
            format,
            lenient,
            html.as_deref(),
        )),
        Command::Collect(args) => exit(cmd_collect::collect(&args)),
        Command::Schema(args) => exit(cmd_fleet::schema(&args)),
        Command::Bundle {
            list: Some(dir), ..
        } => exit(cmd_bundle::list(&dir)),
        Command::Bundle { sets, out, .. } => match out {
            Some(out) => exit(cmd_bundle::bundle(&sets, &out)),
            None => exit(Err("bundle: --out DIR or --list DIR")),
        },
        Command::Providers { command } => exit(cmd_providers::run(&command)),
        Command::Rules { source_dirs, rules } => {
            exit(commands::rules(source_dirs, rules.as_deref()))
        }
    }
}

/// Last resort: a bug must not print a backtrace page or exit 101; one line and exit 2.
fn set_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let what = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        eprintln!("probegen: internal error{at}: {}", what.replace('\n', " "));
        std::process::exit(2);
    }));
}

/// A command's exit code; a failure is one line on stderr and exit 2.
fn exit(result: Result<ExitCode, impl std::fmt::Display>) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("probegen: {e}");
            ExitCode::from(2)
        }
    }
}
