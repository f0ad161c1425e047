//! The names a probe's BPF program gets: the generator writes them into `probes.bpf.c`, the
//! collector looks them up in the loaded object. One definition for both.

use crate::types::Probe;
use crate::vocab::Attach;

/// The program name of probe `id` (`pg_<id>`).
pub fn program_name(id: u32) -> String {
    format!("pg_{id}")
}

/// The ELF section of an fexit program on `function`.
pub fn fexit_section(function: &str) -> String {
    format!("fexit/{function}")
}

/// The ELF section of the kretprobe fallback on a clone symbol.
pub fn kretprobe_section(symbol: &str) -> String {
    format!("kretprobe/{symbol}")
}

impl Probe {
    /// The probe's program name (see [`program_name`]).
    pub fn program_name(&self) -> String {
        program_name(self.id)
    }

    /// The ELF section of the probe's program: `fexit/<function>`, or `kretprobe/<clone>` for
    /// a clone-only function; `None` when the probe has no program (or a clone-only probe
    /// lacks its symbol, which validation refuses).
    pub fn section(&self) -> Option<String> {
        match self.attach {
            Attach::Fexit => Some(fexit_section(&self.function)),
            Attach::CloneOnly => self.attach_symbol.as_deref().map(kretprobe_section),
            _ => None,
        }
    }
}
