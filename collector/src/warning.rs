//! What the collector warns about while it runs: the embedder prints it (the run hands each
//! one to [`crate::Hooks::event`] as [`crate::Event::Warning`]); the library prints nothing.
//! A leaf: the sources build these without knowing the run loop.

use std::fmt;

/// One warning of a run, displayed as the line a person reads (without the program's prefix).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Warning {
    /// Probes whose target the running kernel lacks, not loaded (`module:function` each).
    ProbesSkipped { reason: String, probes: Vec<String> },
    /// A loaded program the kernel refused to attach.
    ProbeNotAttached {
        probe: u32,
        module: String,
        function: String,
        reason: String,
    },
    /// A module without BTF: its probes attach by their kprobe/kretprobe fallback.
    KprobeFallback { module: String, probes: Vec<String> },
    /// Compiler clones resolved by name on this kernel: (`module:function`, the symbols its
    /// program attaches at instead of the manifest's).
    ClonesResolved(Vec<(String, String)>),
    /// An object built with an older `probegen.bpf.h`: the idle shortcut is off.
    NoActivityMap,
    /// The ring buffer could not be read (`what`: consume or poll).
    RingBuffer { what: &'static str, error: String },
    /// The per-CPU counter maps could not be read this window.
    Counters(String),
    /// A replay recorded against another manifest than the one it is replayed with.
    ReplayManifest { recorded: String, replayed: String },
    /// The run's sequence accounting at its end (live).
    Sequence {
        taken: u64,
        read: u64,
        kernel_drops: u64,
    },
    /// `--record` lost lines.
    RecordWriteErrors(u64),
    /// A module of the probe set came, went or was released (`step` says which).
    Module { module: String, step: String },
    /// A request on the control socket that was refused.
    Control(String),
    /// The output's last line was cut short (a crash mid-line): fenced with a `\n` at `offset`.
    OutputFenced {
        path: std::path::PathBuf,
        offset: u64,
    },
    /// `--baseline`: how calls are traced, or `baseline unavailable: <why>` (the failure path
    /// keeps working without it)
    Baseline(String),
    /// A line of a stage of the run (`providers: ...`).
    Stage(String),
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::ProbesSkipped { reason, probes } => write!(
                f,
                "skipping {} probe(s): {reason}: {}",
                probes.len(),
                probes.join(", ")
            ),
            Warning::ProbeNotAttached {
                probe,
                module,
                function,
                reason,
            } => write!(f, "probe {probe} {module}:{function} not attached: {reason}"),
            Warning::Module { module, step } => write!(f, "module {module}: {step}"),
            Warning::Control(e) => write!(f, "control socket: {e}"),
            Warning::KprobeFallback { module, probes } => write!(
                f,
                "{module} has no BTF (no /sys/kernel/btf/{module}): {} probe(s) by kprobe/kretprobe instead of fexit: {}",
                probes.len(),
                probes.join(", ")
            ),
            Warning::ClonesResolved(v) => {
                let each: Vec<String> = v.iter().map(|(p, s)| format!("{p} at {s}")).collect();
                write!(
                    f,
                    "{} probe(s) at compiler clones this build names otherwise (resolved by name): {}",
                    v.len(),
                    each.join(", ")
                )
            }
            Warning::NoActivityMap => f.write_str(
                "the object has no mmapable `activity` map (an older probegen.bpf.h): the counters are read every window",
            ),
            Warning::RingBuffer { what, error } => write!(f, "ring buffer {what}: {error}"),
            Warning::Counters(e) => write!(f, "reading counters: {e}"),
            Warning::ReplayManifest { recorded, replayed } => write!(
                f,
                "warning: replay recorded with manifest {recorded}, replayed with {replayed}"
            ),
            Warning::Sequence {
                taken,
                read,
                kernel_drops,
            } => write!(
                f,
                "sequence numbers taken {taken}, records read {read}, kernel drops {kernel_drops}"
            ),
            Warning::RecordWriteErrors(n) => write!(f, "--record: {n} write errors"),
            Warning::OutputFenced { path, offset } => write!(
                f,
                "{}: its last line was cut short (a crash mid-line?): fenced with a newline at byte {offset}, so it is one unreadable line and the next lines stand alone",
                path.display()
            ),
            Warning::Baseline(what) => f.write_str(what),
            Warning::Stage(line) => f.write_str(line),
        }
    }
}
