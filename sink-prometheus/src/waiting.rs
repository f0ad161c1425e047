//! `/metrics` before a set runs, and which set runs once one does.
//!
//! With `--bundle` the agent may wait for a set (no vendor driver loaded yet, or none for this
//! kernel's series) and stays up, rechecking. The fleet must see such a host as a host without
//! probes, not as a dead target: the port is bound at start and serves why no set runs
//! (`probegen_set_running 0`, `probegen_no_set{reason}`). It is served from the agent's own
//! thread while it waits: a server thread started then would keep the capabilities the attach
//! needs after the agent drops them (capabilities are per thread). Once a set is chosen, the
//! same socket goes to the sink's thread (`WaitingMetrics::into_sink`, in the crate's face): no
//! scrape finds the port closed between the two.

use std::fmt::Write as _;

use crate::label::esc;

/// Why no set of the bundle runs on this host now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoSet {
    /// none of the bundle's vendor drivers is loaded (the NIC's driver not loaded yet)
    NoDriverLoaded,
    /// a vendor driver is loaded, but the bundle has no set of this kernel's series for it
    NoSetForKernel,
}

impl NoSet {
    fn label(self) -> &'static str {
        match self {
            NoSet::NoDriverLoaded => "no_driver_loaded",
            NoSet::NoSetForKernel => "no_set_for_kernel",
        }
    }
}

/// The set that runs: its bundle directory and how it was matched ("exact", "series").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningSet {
    pub dir: String,
    pub matched: &'static str,
}

/// The page while no set runs.
pub(crate) fn render_waiting(why: NoSet, kernel: &str) -> String {
    let mut o = String::new();
    render_running_gauge(&mut o, 0);
    let _ = writeln!(
        o,
        "# HELP probegen_no_set Why no probe set runs on this host (1 for the reason; the agent rechecks every interval).\n\
         # TYPE probegen_no_set gauge\n\
         probegen_no_set{{reason=\"{}\",kernel=\"{}\"}} 1",
        why.label(),
        esc(kernel)
    );
    o
}

fn render_running_gauge(o: &mut String, v: u8) {
    let _ = writeln!(
        o,
        "# HELP probegen_set_running 1 while a probe set of the bundle is attached on this host, 0 while the agent waits for one.\n\
         # TYPE probegen_set_running gauge\n\
         probegen_set_running {v}"
    );
}

/// Appended to the page of a run chosen from a bundle.
pub(crate) fn render_running(o: &mut String, set: &RunningSet) {
    render_running_gauge(o, 1);
    let _ = writeln!(
        o,
        "# HELP probegen_set_info The bundle's set this host runs (match: exact release or the newest of its series).\n\
         # TYPE probegen_set_info gauge\n\
         probegen_set_info{{set=\"{}\",match=\"{}\"}} 1",
        esc(&set.dir),
        set.matched
    );
}
