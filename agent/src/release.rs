//! `probegen-agent release MODULE`: run by the package's `modprobe.d` rule before a driver
//! module unloads. It asks the running agent, through its control socket, to detach the
//! module's probes and close their programs (each holds a reference on the module), and
//! waits for the answer, at most `--timeout`. No agent listening (not running, or stopped):
//! nothing holds the module, exit 0 at once, so the removal is never blocked by the agent.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::flags::parse_duration;
use crate::AgentError;

/// The package's control socket (the unit's `RuntimeDirectory=probegen`).
pub const DEFAULT_CONTROL: &str = "/run/probegen/control";

#[derive(clap::Args, Clone)]
pub struct ReleaseArgs {
    /// The driver module whose probes are detached (as modprobe names it)
    #[arg(value_name = "MODULE")]
    pub module: String,
    /// The agent's control socket
    #[arg(long, value_name = "SOCKET", default_value = DEFAULT_CONTROL)]
    pub control: PathBuf,
    /// Longest wait for the agent's answer
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub timeout: Duration,
}

/// Asks the agent on `a.control` to release `a.module`; prints its answer. Exit 0 when the
/// probes are detached or no agent listens, 1 when the agent did not answer in time or
/// refused (the removal then fails as it would have: the module is busy).
pub fn release(a: &ReleaseArgs) -> Result<ExitCode, AgentError> {
    let valid = !a.module.is_empty()
        && a.module.len() <= 64
        && a.module
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !valid {
        return Err(AgentError::Usage(format!(
            "release `{}`: expected a module name ([A-Za-z0-9_-], at most 64)",
            a.module
        )));
    }
    let mut s = match UnixStream::connect(&a.control) {
        Ok(s) => s,
        Err(e) => {
            use std::io::ErrorKind::{ConnectionRefused, NotFound};
            if matches!(e.kind(), NotFound | ConnectionRefused) {
                eprintln!(
                    "probegen-agent release: no agent on {} ({e}): nothing to release",
                    a.control.display()
                );
                return Ok(ExitCode::SUCCESS);
            }
            eprintln!("probegen-agent release: {}: {e}", a.control.display());
            return Ok(ExitCode::from(1));
        }
    };
    let t = Some(a.timeout.max(Duration::from_millis(1)));
    let _ = s.set_read_timeout(t);
    let _ = s.set_write_timeout(t);
    let mut answer = String::new();
    let sent = s.write_all(format!("release {}\n", a.module).as_bytes());
    let read = sent.and_then(|()| (&mut s).take(4096).read_to_string(&mut answer));
    let answer = answer.trim();
    match read {
        Ok(_) if answer.starts_with("ok ") => {
            eprintln!("probegen-agent release: {answer}");
            Ok(ExitCode::SUCCESS)
        }
        Ok(_) => {
            eprintln!(
                "probegen-agent release {}: the agent answered {answer:?}",
                a.module
            );
            Ok(ExitCode::from(1))
        }
        Err(e) => {
            eprintln!(
                "probegen-agent release {}: no answer within {:?} ({e})",
                a.module, a.timeout
            );
            Ok(ExitCode::from(1))
        }
    }
}
