//! probegen-agent: the host side of probegen alone (`collect`, `schema`), without the
//! analyzer and its C parser: what a host needs to run a probe set.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "probegen-agent",
    version,
    about = "Runs a probegen probe set on this host (the collector and its sinks)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the manifest's JSON Schema (--clickhouse: the fleet tables' DDL)
    Schema(probegen_agent::SchemaArgs),
    /// Load a probe set, attach it, write a snapshot of failures every --interval
    Collect(Box<probegen_agent::CollectArgs>),
    /// Ask the running agent to detach a driver module's probes before it unloads (the
    /// package's modprobe.d rule runs it before `modprobe -r --ignore-remove MODULE`)
    Release(probegen_agent::ReleaseArgs),
    /// The baseline a `collect --baseline --baseline-state FILE` keeps
    #[command(subcommand)]
    Baseline(BaselineCommand),
}

#[derive(Subcommand)]
enum BaselineCommand {
    /// Print a state file's success shapes per handler and its learned expected-error table
    /// (with the pins given applied)
    Show(probegen_agent::BaselineShowArgs),
}

fn main() -> ExitCode {
    let args = match probegen_agent::expand_config(std::env::args_os().collect()) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("probegen-agent: {e}");
            return ExitCode::from(2);
        }
    };
    let result = match Cli::parse_from(args).command {
        Command::Collect(args) => probegen_agent::collect(&args),
        Command::Schema(args) => probegen_agent::schema(&args),
        Command::Release(args) => probegen_agent::release(&args),
        Command::Baseline(BaselineCommand::Show(args)) => probegen_agent::baseline_show(&args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("probegen-agent: {e}");
            ExitCode::from(2)
        }
    }
}
