//! `probegen collect`: the host agent's `collect` (crate `probegen-agent`, the same flags and
//! code as the `probegen-agent` binary).

use std::process::ExitCode;

pub(crate) use probegen_agent::CollectArgs;

pub(crate) fn collect(a: &CollectArgs) -> Result<ExitCode, String> {
    probegen_agent::collect(a).map_err(|e| e.to_string())
}
