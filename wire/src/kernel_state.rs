//! What an input source (the live loader, a replay file) tells the processing stage about
//! the kernel side: the cumulative counters and the attach outcome of each probe. Sources and
//! the pipeline both depend on this module; sources do not import the pipeline.

use std::collections::BTreeMap;

use serde::Serialize;

/// Cumulative kernel counters, summed over CPUs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelTotals {
    pub calls: BTreeMap<u32, u64>,
    pub failures: BTreeMap<u32, u64>,
    /// (probe id, errno) -> failures
    pub errnos: BTreeMap<(u32, u32), u64>,
    /// records the ring buffer could not take
    pub drops: u64,
    /// the same per probe id (empty for recordings that only carry the total)
    pub drops_by_probe: BTreeMap<u32, u64>,
    /// Read behind a fence (live, an object with `failing`/`failed` in `activity`): these
    /// counters cover exactly the records with a seq below the one each CPU had taken at the
    /// read, and later records wait for the next window.
    pub fenced: bool,
    /// Failing programs half counted while the maps were read (the fence never closed): the
    /// counters and the records may differ by at most this many, a loss or not.
    pub in_flight: u64,
    /// Runs of a probe's exit (or data-plane entry) programs that the kernel skipped, by
    /// probe id (`recursion_misses` of `bpf_prog_info`, 5.12+): the program was already
    /// running on that CPU (a task preempted inside it, on a preemptible kernel), so a return
    /// went unseen and uncounted. Failures the invariant cannot see; reported beside it. Live
    /// runs only (a recording carries none).
    pub missed: BTreeMap<u32, u64>,
}

impl KernelTotals {
    /// Sum of one key's per-CPU u64 values (one `Vec<u8>` per CPU, as libbpf returns them).
    /// A value that is not 8 bytes long counts as 0.
    pub fn sum_percpu(values: &[Vec<u8>]) -> u64 {
        values
            .iter()
            .map(|v| {
                <[u8; 8]>::try_from(v.as_slice())
                    .map(u64::from_ne_bytes)
                    .unwrap_or(0)
            })
            .fold(0u64, u64::wrapping_add)
    }
}

/// Attach outcome of one probe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AttachStatus {
    pub probe: u32,
    pub function: String,
    pub module: String,
    pub attached: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// How the probe attaches (or was meant to); absent in older outputs and before a load.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mechanism: Option<Mechanism>,
    /// The symbols it attached at on this kernel when they are not the manifest's: a compiler
    /// clone resolved by name (`f.constprop.1` for the set's `f.constprop.0`, or the plain
    /// `f`); empty otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub symbols: Vec<String>,
}

/// How a probe's programs attach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mechanism {
    /// `fexit` on the function, resolved in its module's (or vmlinux's) BTF.
    Fexit,
    /// The kprobe/kretprobe fallback: the module has no BTF.
    Kprobe,
    /// `kretprobe` on the compiler clone of a clone-only function.
    KretprobeClone,
    /// `fsession` on a uverbs handler with the baseline on (7.0+): one program at its entry
    /// (the baseline's sampling) and its exit (the failure probe).
    Fsession,
    /// `fentry` on a data-plane function (manifest `data_plane`): its in-kernel filter records
    /// only error events and error completions.
    Fentry,
}
