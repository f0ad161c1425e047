//! The names a probe's BPF program gets: the generator writes them into `probes.bpf.c`, the
//! collector looks them up in the loaded object. One definition for both.

use crate::types::Probe;
use crate::vocab::{Attach, Layer};

/// The program name of probe `id` (`pg_<id>`).
pub fn program_name(id: u32) -> String {
    format!("pg_{id}")
}

/// The ELF section of an fexit program on `function`.
pub fn fexit_section(function: &str) -> String {
    format!("fexit/{function}")
}

/// The ELF section of a data-plane program on `function`: an entry program with its filter,
/// but for `peer`, which reads the call's outcome (the peer is kept only once the driver
/// accepted the new attributes).
pub fn data_plane_section(class: crate::DataPlaneClass, function: &str) -> String {
    match class {
        crate::DataPlaneClass::Peer => fexit_section(function),
        _ => format!("fentry/{function}"),
    }
}

/// The ELF section of the kretprobe fallback on a clone symbol.
pub fn kretprobe_section(symbol: &str) -> String {
    format!("kretprobe/{symbol}")
}

/// The kprobe (entry) program of probe `id`'s fallback for a module without BTF: it saves the
/// recorded arguments for the return program.
pub fn kprobe_entry_name(id: u32) -> String {
    format!("pg_{id}_entry")
}

/// The kretprobe (return) program of probe `id`'s fallback for a module without BTF.
pub fn kretprobe_return_name(id: u32) -> String {
    format!("pg_{id}_ret")
}

/// The arguments a kprobe reads from registers on x86-64 (the rest are on the stack).
const KPROBE_REGISTER_ARGS: usize = 6;

impl Probe {
    /// Whether the probe's object carries a kprobe/kretprobe pair beside its fexit program:
    /// every fexit probe, of every layer. A module without `.BTF` cannot take fexit: vendor
    /// modules of out-of-tree builds (DKMS, vendor OFED), and every module of a kernel built
    /// without module BTF (Debian's 5.10), verbs core included; the fallback keeps each layer.
    pub fn has_kprobe_fallback(&self) -> bool {
        matches!(self.attach, Attach::Fexit | Attach::NoBtf)
    }

    /// The recorded arguments the kprobe fallback cannot read, by name: past the sixth, which
    /// x86-64 passes on the stack (`pg_regs_arg` reads registers only; they record 0). Empty
    /// without a fallback.
    pub fn kprobe_unread_args(&self) -> Vec<&str> {
        if !self.has_kprobe_fallback() {
            return Vec::new();
        }
        let mut past: Vec<_> = self
            .args
            .iter()
            .filter(|a| a.index >= KPROBE_REGISTER_ARGS)
            .collect();
        past.sort_by_key(|a| a.index);
        past.into_iter().map(|a| a.name.as_str()).collect()
    }

    /// The fallback pair as (program name, section): the entry program only when the probe
    /// records arguments. Empty without a fallback. `?` makes libbpf not load them unless the
    /// loader picks them (autoload off).
    pub fn kprobe_fallback(&self) -> Vec<(String, String)> {
        if !self.has_kprobe_fallback() {
            return Vec::new();
        }
        let mut v = Vec::new();
        if !self.args.is_empty() {
            v.push((
                kprobe_entry_name(self.id),
                format!("?kprobe/{}", self.function),
            ));
        }
        v.push((
            kretprobe_return_name(self.id),
            format!("?{}", kretprobe_section(&self.function)),
        ));
        v
    }

    /// The probe's program name (see [`program_name`]).
    pub fn program_name(&self) -> String {
        program_name(self.id)
    }

    /// The ELF section of the probe's program: `fexit/<function>`, or `kretprobe/<clone>` for
    /// a clone-only function; `None` when the probe has no program (or a clone-only probe
    /// lacks its symbol, which validation refuses).
    pub fn section(&self) -> Option<String> {
        match self.attach {
            // no-btf: the fexit program is there for a host whose module has BTF after all (a
            // rebuilt module); without it the loader takes the kprobe pair
            Attach::Fexit | Attach::NoBtf => Some(fexit_section(&self.function)),
            Attach::CloneOnly => self.attach_symbol.as_deref().map(kretprobe_section),
            _ => None,
        }
    }
}

/// The baseline entry program of a handler probe `id` (`pg_<id>_bl`): an fentry that decides
/// whether this call is traced (one in N, within a per-interval budget) and starts its trace.
pub fn baseline_entry_name(id: u32) -> String {
    format!("pg_{id}_bl")
}

/// The ELF section of a handler's baseline entry program, `?fentry/<function>`: `?` keeps it
/// unloaded unless the collector runs with the baseline on.
pub fn baseline_entry_section(function: &str) -> String {
    format!("?fentry/{function}")
}

/// The baseline session program of a handler probe `id` (`pg_<id>_bs`): on a kernel with
/// fsession (7.0+) the collector loads it in place of the handler's fexit and its baseline
/// entry; one program runs at the handler's entry (the sampling decision, kept in the call's
/// session cookie) and at its exit (the failure probe, and the end of a trace this call opened).
pub fn baseline_session_name(id: u32) -> String {
    format!("pg_{id}_bs")
}

/// The ELF section of a handler's baseline session program, `?fsession/<function>` (autoload
/// off: kernels before 7.0 have no fsession).
pub fn baseline_session_section(function: &str) -> String {
    format!("?fsession/{function}")
}

/// The uverbs handlers of a manifest, by probe id: fexit probes of the core layer that no
/// other probe calls (the roots of the probe call relation; each is dispatched from a uverbs
/// entry, `ib_uverbs_write` or a method of `ib_uverbs_ioctl`). Each gets a baseline entry
/// program: a traced call starts there and ends at the handler's fexit.
pub fn baseline_handlers(m: &crate::types::Manifest) -> std::collections::BTreeSet<u32> {
    let called: std::collections::BTreeSet<u32> = m
        .probes
        .iter()
        .flat_map(|p| p.calls.iter().copied())
        .collect();
    m.probes
        .iter()
        .filter(|p| p.attach == Attach::Fexit && p.layer == Layer::Core && !called.contains(&p.id))
        .map(|p| p.id)
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::types::Manifest;
    use crate::vocab::Attach;

    const BNXT_7_2: &str = include_str!("../../generated/linux-7.2/bnxt_re/manifest.yaml");

    #[test]
    fn kprobe_fallback_names_the_arguments_past_the_sixth() {
        let m = Manifest::from_yaml(BNXT_7_2, "m.yaml").expect("valid");
        let unread: Vec<(&str, Vec<&str>)> = m
            .probes
            .iter()
            .map(|p| (p.function.as_str(), p.kprobe_unread_args()))
            .filter(|(_, a)| !a.is_empty())
            .collect();
        // bnxt_qplib_add_sgid(sgid_tbl, gid, smac, vlan_id, update, index, is_ugid, stats_ctx_id)
        assert_eq!(
            unread,
            [("bnxt_qplib_add_sgid", vec!["is_ugid", "stats_ctx_id"])]
        );
        // no fallback (a clone-only probe goes by kretprobe, reading no argument): none named
        let mut p = m
            .probes
            .iter()
            .find(|p| p.function == "bnxt_qplib_add_sgid")
            .expect("the probe")
            .clone();
        p.attach = Attach::CloneOnly;
        assert!(p.kprobe_unread_args().is_empty());
    }
}
