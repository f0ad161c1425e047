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

use collector::{AttachedByLayer, RunningSet};

use crate::label::esc;

/// Why no set of the bundle runs on this host now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoSet {
    /// none of the bundle's vendor drivers is loaded (the NIC's driver not loaded yet)
    NoDriverLoaded,
    /// a vendor driver is loaded, but the bundle has no set for it of any series
    NoSetForKernel,
    /// a vendor driver is loaded, the bundle has no set of this kernel's series for it, and
    /// `nearest-set = false` keeps the nearest series' set off
    NoExactSet,
    /// the kernel release string is not `X.Y[.Z]...` (nor is /proc/version's): no series
    UnknownRelease,
    /// no `/sys/kernel/btf/vmlinux` (no fexit or fentry program can attach) and no probe of
    /// the chosen set can take the kprobe path (none has one, or kallsyms is unreadable)
    NoKernelBtf,
}

impl NoSet {
    /// The value of `probegen_no_set{reason}`.
    pub fn label(self) -> &'static str {
        match self {
            NoSet::NoDriverLoaded => "no_driver_loaded",
            NoSet::NoSetForKernel => "no_set_for_kernel",
            NoSet::NoExactSet => "no_exact_set",
            NoSet::UnknownRelease => "unknown_release",
            NoSet::NoKernelBtf => "no_kernel_btf",
        }
    }
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

/// Appended to the page of a run chosen from a bundle: the set, how it matched, and its
/// probes attached per layer (a nearest series' set attaches those this kernel has).
pub(crate) fn render_running(o: &mut String, set: &RunningSet, by_layer: &AttachedByLayer) {
    render_running_gauge(o, 1);
    let _ = writeln!(
        o,
        "# HELP probegen_set_info The bundle's set this host runs (match: exact release, the newest of its series, or the nearest series' set).\n\
         # TYPE probegen_set_info gauge\n\
         probegen_set_info{{set=\"{}\",match=\"{}\"}} 1",
        esc(&set.dir),
        set.matched.label()
    );
    let _ = writeln!(
        o,
        "# HELP probegen_set_probes The running set's probes per layer (core, vendor, data_plane).\n\
         # TYPE probegen_set_probes gauge"
    );
    for (layer, l) in by_layer.layers() {
        let _ = writeln!(o, "probegen_set_probes{{layer=\"{layer}\"}} {}", l.probes);
    }
    let _ = writeln!(
        o,
        "# HELP probegen_set_probes_attached The running set's probes attached now, per layer.\n\
         # TYPE probegen_set_probes_attached gauge"
    );
    for (layer, l) in by_layer.layers() {
        let _ = writeln!(
            o,
            "probegen_set_probes_attached{{layer=\"{layer}\"}} {}",
            l.attached
        );
    }
}
