//! `collect --baseline` and its settings: success traces of the uverbs handlers, the baseline
//! of success shapes, each chain's bifurcation and the expected failures (crate `collector`).

use std::time::Duration;

use collector::{BaselineConfig, Pinned};

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
    /// Size of the baseline's own ring buffer in bytes (power of two, at least 4096; traces
    /// are 656 bytes; default 256 KiB)
    #[arg(long, value_name = "N")]
    pub baseline_ringbuf_bytes: Option<u32>,
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
        let pinned = self
            .baseline_expected
            .iter()
            .filter(|s| !s.is_empty())
            .map(|s| Pinned::parse(s).map_err(AgentError::Usage))
            .collect::<Result<Vec<_>, _>>()?;
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
        }))
    }
}
