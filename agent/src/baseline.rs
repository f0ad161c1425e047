//! `collect --baseline` and its settings: success traces of the uverbs handlers, the baseline
//! of success shapes, each chain's bifurcation and the expected failures (crate `collector`).

use std::time::Duration;

use baseline::{BaselineConfig, EntryChoice, Pinned};

use crate::flags::parse_duration;
use crate::AgentError;

#[derive(clap::Args, Clone, Debug)]
pub struct BaselineArgs {
    /// Trace a sample of the uverbs handlers' calls (the probed functions each entered, their
    /// errnos and times): the success shapes per handler, and for every failure chain where
    /// it left them and whether its failure is expected
    #[arg(long)]
    pub baseline: bool,
    /// Trace one call in N of each handler (1: every call)
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub baseline_sample: u32,
    /// Traces per handler per --interval at most (0: no bound)
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub baseline_budget: u32,
    /// A success slower than this is not kept in the baseline
    #[arg(long, default_value = "50ms", value_parser = parse_duration)]
    pub baseline_max: Duration,
    /// A failure pinned as expected: HANDLER:ORIGIN:ERRNO (function names, errno name or
    /// number); repeat or separate with commas
    #[arg(long, value_name = "HANDLER:ORIGIN:ERRNO", value_delimiter = ',')]
    pub baseline_expected: Vec<String>,
    /// A failure pinned as not expected whatever the baseline learned: HANDLER:ORIGIN:ERRNO;
    /// repeat or separate with commas
    #[arg(long, value_name = "HANDLER:ORIGIN:ERRNO", value_delimiter = ',')]
    pub baseline_not_expected: Vec<String>,
    /// Keep the baseline across restarts in FILE (written by rename every minute and at the
    /// end; a damaged file or one of another probe set is renamed aside and rebuilt)
    #[arg(long, value_name = "FILE")]
    pub baseline_state: Option<std::path::PathBuf>,
    /// The state file's bound in bytes (durations, exemplars, then rare shapes are dropped
    /// to fit)
    #[arg(long, value_name = "N", default_value_t = 4 << 20)]
    pub baseline_state_bytes: u64,
    /// Size of the baseline's own ring buffer in bytes (power of two, at least 4096; traces
    /// are 656 bytes; default 256 KiB)
    #[arg(long, value_name = "N")]
    pub baseline_ringbuf_bytes: Option<u32>,
    /// How a handler's traced call begins and ends: auto (fsession where the kernel has it,
    /// 7.0+; fentry beside the fexit elsewhere) or fentry (on every kernel)
    #[arg(long, value_enum, default_value_t = BaselineEntry::Auto)]
    pub baseline_entry: BaselineEntry,
}

/// `--baseline-entry`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BaselineEntry {
    Auto,
    Fentry,
}

impl BaselineArgs {
    /// The collector's baseline settings (`None` without `--baseline`).
    pub fn resolve(&self, interval: Duration) -> Result<Option<BaselineConfig>, AgentError> {
        if !self.baseline {
            return Ok(None);
        }
        if self.baseline_sample == 0 {
            return Err(AgentError::Usage(
                "--baseline-sample must be at least 1 (1: every call)".into(),
            ));
        }
        let pinned = pins(&self.baseline_expected, &self.baseline_not_expected)?;
        if self.baseline_state_bytes < 4096 {
            return Err(AgentError::Usage(format!(
                "--baseline-state-bytes {}: must be at least 4096",
                self.baseline_state_bytes
            )));
        }
        if let Some(n) = self.baseline_ringbuf_bytes {
            if !n.is_power_of_two() || n < 4096 {
                return Err(AgentError::Usage(format!(
                    "--baseline-ringbuf-bytes {n}: must be a power of two of at least 4096"
                )));
            }
        }
        Ok(Some(BaselineConfig {
            ring_bytes: self.baseline_ringbuf_bytes,
            sample: self.baseline_sample,
            budget: self.baseline_budget,
            interval,
            max: self.baseline_max,
            pinned,
            state: self.baseline_state.clone(),
            state_bytes: self.baseline_state_bytes,
            entry: match self.baseline_entry {
                BaselineEntry::Auto => EntryChoice::Auto,
                BaselineEntry::Fentry => EntryChoice::Fentry,
            },
            ..BaselineConfig::default()
        }))
    }
}

/// The pinned patterns: not-expected pins first, so a pattern pinned both ways is not expected.
fn pins(expected: &[String], not_expected: &[String]) -> Result<Vec<Pinned>, AgentError> {
    let not = not_expected
        .iter()
        .filter(|s| !s.is_empty())
        .map(|s| Pinned::parse_not_expected(s));
    let yes = expected
        .iter()
        .filter(|s| !s.is_empty())
        .map(|s| Pinned::parse(s));
    not.chain(yes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| AgentError::Usage(e.to_string()))
}

/// `probegen-agent baseline show`: what a baseline state file holds.
#[derive(clap::Args, Clone, Debug)]
pub struct BaselineShowArgs {
    /// The state file (`baseline-state` in the config)
    #[arg(
        long,
        value_name = "FILE",
        default_value = "/var/lib/probegen/baseline.state"
    )]
    pub state: std::path::PathBuf,
    /// Pins to apply, as `collect` takes them
    #[arg(long, value_name = "HANDLER:ORIGIN:ERRNO", value_delimiter = ',')]
    pub baseline_expected: Vec<String>,
    #[arg(long, value_name = "HANDLER:ORIGIN:ERRNO", value_delimiter = ',')]
    pub baseline_not_expected: Vec<String>,
    /// One JSON object instead of the tables
    #[arg(long)]
    pub json: bool,
}

/// Prints the learned expected-error table and the shapes per handler of a state file.
pub fn baseline_show(a: &BaselineShowArgs) -> Result<std::process::ExitCode, AgentError> {
    let pinned = pins(&a.baseline_expected, &a.baseline_not_expected)?;
    let bytes = std::fs::read(&a.state)
        .map_err(|e| AgentError::Usage(format!("--state {}: {e}", a.state.display())))?;
    let view = baseline::state_view(&bytes, pinned)
        .map_err(|e| AgentError::Usage(format!("{}: {e}", a.state.display())))?;
    if a.json {
        let line = serde_json::to_string(&view)
            .map_err(|e| AgentError::Usage(format!("{}: {e}", a.state.display())))?;
        println!("{line}");
        return Ok(std::process::ExitCode::SUCCESS);
    }
    println!("manifest {}", view.manifest_hash);
    if view.return_order {
        println!(
            "written by an earlier version (format 1): its shapes are in return order; \
             `collect` puts them in call order when it loads the file with its manifest"
        );
    }
    println!("handler\tsuccesses\tshapes\tother");
    for h in &view.handlers {
        println!("{}\t{}\t{}\t{}", h.function, h.successes, h.shapes, h.other);
    }
    println!("\nhandler\torigin\terrno\tprocesses\trecovered\tincrease\texpected\twhy");
    for e in &view.expected {
        println!(
            "{}\t{}\t{}\t{}\t{}\t{:.2}\t{}\t{}",
            e.handler,
            e.origin,
            e.errno_name,
            e.processes,
            e.recovered,
            e.increase,
            e.expected,
            e.why
        );
    }
    Ok(std::process::ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser)]
    struct T {
        #[command(flatten)]
        b: BaselineArgs,
    }

    fn resolve(args: &[&str]) -> Result<Option<BaselineConfig>, AgentError> {
        let t = T::try_parse_from(std::iter::once("t").chain(args.iter().copied()))
            .expect("flags parse");
        t.b.resolve(Duration::from_secs(5))
    }

    #[test]
    fn state_and_pins_resolve() {
        let c = resolve(&[
            "--baseline",
            "--baseline-state",
            "/var/lib/probegen/baseline.state",
            "--baseline-expected",
            "h:o:ENOENT",
            "--baseline-not-expected",
            "h:o:ENOENT,h:p:12",
        ])
        .expect("valid")
        .expect("on");
        assert_eq!(
            c.state.as_deref(),
            Some(std::path::Path::new("/var/lib/probegen/baseline.state"))
        );
        assert_eq!(c.state_bytes, 4 << 20);
        // not-expected pins come first: a pattern pinned both ways is not expected
        let p: Vec<(bool, u32)> = c.pinned.iter().map(|p| (p.expected, p.errno)).collect();
        assert_eq!(p, [(false, 2), (false, 12), (true, 2)]);
        let e = resolve(&["--baseline", "--baseline-state-bytes", "100"]).expect_err("bound");
        assert!(e.to_string().contains("at least 4096"), "{e}");
        let e = resolve(&["--baseline", "--baseline-not-expected", "h:o"]).expect_err("bad pin");
        assert!(
            e.to_string().contains("--baseline-not-expected `h:o`"),
            "{e}"
        );
    }
}
