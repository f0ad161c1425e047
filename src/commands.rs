//! Subcommand bodies: each turns its arguments into options, makes one call into the
//! `pipeline` crate and prints what comes back (notices as they happen, then the result).

use std::path::Path;
use std::process::ExitCode;

use pipeline::{Error, Notice, SourceOptions};

use crate::args::{Format, SourceArgs};

pub(crate) type CmdResult = Result<ExitCode, Error>;

impl SourceArgs {
    pub(crate) fn options(&self) -> SourceOptions {
        SourceOptions {
            kernel_src: self.kernel_src.clone(),
            kconfig: self.kconfig.clone(),
            vendor: self.vendor.clone(),
            allow_degraded: self.allow_degraded,
            not_built: self.not_built,
            rules: self.rules.clone(),
            btf: self.btf.clone(),
            no_cache: self.no_cache,
        }
    }
}

/// Print a notice as it happens: a written set on stdout, the rest on stderr.
pub(crate) fn print_notice(n: Notice) {
    match n {
        Notice::Wrote(line) => println!("{line}"),
        Notice::Warning(line) => eprintln!("probegen: warning: {line}"),
        Notice::Line(line) => eprintln!("probegen: {line}"),
        Notice::ParseWarning(w) => eprintln!("warning: {w}"),
        Notice::CacheStats(s) => eprintln!("facts cache: {s}"),
        Notice::Timing(t) => eprintln!("timings: {t}"),
    }
}

/// Write a report to stdout; a closed pipe (`| head`) is not an error.
pub(crate) fn emit(text: &str) -> Result<(), Error> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(Error::Output(format!("stdout: {e}")))
        }
        _ => Ok(()),
    }
}

pub(crate) fn print_json(v: &serde_json::Value) -> Result<(), Error> {
    emit(&(serde_json::to_string_pretty(v)? + "\n"))
}

pub(crate) fn graph(
    src: &SourceArgs,
    entries: &[String],
    format: Format,
    warnings: bool,
) -> CmdResult {
    let summary = pipeline::graph(&src.options(), entries, warnings, &mut print_notice)?;
    match format {
        Format::Json => print_json(&summary.json())?,
        Format::Text => emit(&summary.text())?,
    }
    Ok(ExitCode::SUCCESS)
}

/// Exit 1 when there is no path.
pub(crate) fn path(src: &SourceArgs, from: &str, to: &str) -> CmdResult {
    match pipeline::path(&src.options(), from, to, &mut print_notice)? {
        Some(hops) => {
            emit(&lines(&hops))?;
            Ok(ExitCode::SUCCESS)
        }
        None => {
            emit(&format!("no path from {from} to {to}\n"))?;
            Ok(ExitCode::from(1))
        }
    }
}

pub(crate) fn generate(
    src: &SourceArgs,
    out: &Path,
    entries: &[String],
    header_dir: Option<&Path>,
) -> CmdResult {
    pipeline::generate(&src.options(), out, entries, header_dir, &mut print_notice)?;
    Ok(ExitCode::SUCCESS)
}

/// Exit 1 when no definition of the function is reachable.
pub(crate) fn explain(src: &SourceArgs, function: &str) -> CmdResult {
    let e = pipeline::explain(&src.options(), function, &mut print_notice)?;
    emit(&lines(&e.lines))?;
    Ok(if e.found {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `rules --source-dirs`: the directories the analyzer reads, one a line.
pub(crate) fn rules(source_dirs: bool, rules: Option<&Path>) -> CmdResult {
    if source_dirs {
        emit(&lines(&pipeline::source_dirs(rules)?))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn lines(lines: &[String]) -> String {
    lines.iter().map(|l| format!("{l}\n")).collect()
}
