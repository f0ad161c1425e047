//! The probe table the collector works with: the manifest's attachable probes (those with a
//! program in probes.bpf.c), indexed by probe id, plus the manifest's hash.

use manifest::{Attach, FocusKind, Layer, Manifest, Probe, ReturnKind};
use sha2::{Digest, Sha256};

use crate::relation::CallRelation;

/// How a program attaches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttachKind {
    /// `fexit/<function>`, resolved in `<module>`'s BTF.
    Fexit,
    /// `kretprobe/<symbol>`: the fallback for clone-only functions.
    Kretprobe(String),
    /// `fentry/<function>`: a data-plane probe (manifest `data_plane`), its record's `err`
    /// a code into `errors`.
    Fentry {
        class: manifest::DataPlaneClass,
        errors: Vec<String>,
    },
}

#[derive(Debug, Clone)]
pub struct ProbeInfo {
    pub id: u32,
    pub function: String,
    pub module: String,
    pub kind: AttachKind,
    /// Arguments of the function (BTF), 0 when unknown.
    pub nargs: usize,
    /// The manifest's `returns` and `ret_size`: the prototype the program was built for,
    /// checked against the running kernel's BTF before it is loaded.
    pub returns: ReturnKind,
    pub ret_size: u32,
    /// Names of the arguments the probe records, in record order (the manifest's `args`,
    /// ascending position); empty when the manifest names none.
    pub arg_names: Vec<String>,
    /// The manifest's `layer` (owner decision).
    pub layer: Layer,
    /// The manifest's R4 focus evidence; `None` for an override (owner decision).
    pub focus: Option<FocusKind>,
    /// The manifest's `pins_user_memory`: the body pins user memory (owner decision).
    pub pins_user_memory: bool,
    /// The manifest's `error_sites` (owner decision); `None` for a set written before them.
    pub error_sites: Option<Vec<manifest::ErrorSite>>,
    /// The kprobe/kretprobe fallback programs for a module without BTF, (name, section)
    /// ([`manifest::Probe::kprobe_fallback`]); empty when the probe has none.
    pub fallback: Vec<(String, String)>,
    /// The recorded arguments that fallback cannot read (past the sixth, on the stack; they
    /// record 0), by name ([`manifest::Probe::kprobe_unread_args`]).
    pub kprobe_unread: Vec<String>,
}

impl ProbeInfo {
    /// The BPF program name codegen gives this probe.
    pub fn program_name(&self) -> String {
        manifest::program_name(self.id)
    }

    /// The probe as the kprobe-fallback warning names it: its function, and the arguments
    /// that path cannot read, never silent.
    pub fn kprobe_label(&self) -> String {
        if self.kprobe_unread.is_empty() {
            return self.function.clone();
        }
        format!(
            "{} (arguments past the sixth not read: {})",
            self.function,
            self.kprobe_unread.join(", ")
        )
    }

    /// The ELF section codegen gives this probe's program.
    pub fn section(&self) -> String {
        match &self.kind {
            AttachKind::Fexit => manifest::fexit_section(&self.function),
            AttachKind::Kretprobe(sym) => manifest::kretprobe_section(sym),
            AttachKind::Fentry { class, .. } => {
                manifest::data_plane_section(*class, &self.function)
            }
        }
    }

    /// For a data-plane probe, the name of a record's code (`IB_EVENT_QP_FATAL`): the
    /// manifest's `errors` at code - 1; `None` for other probes.
    pub fn data_plane_status(&self, code: i32) -> Option<String> {
        let AttachKind::Fentry { errors, .. } = &self.kind else {
            return None;
        };
        Some(
            match usize::try_from(code).ok().and_then(|c| c.checked_sub(1)) {
                Some(i) if i < errors.len() => errors[i].clone(),
                _ if errors.is_empty() => "call".to_string(),
                _ => format!("other ({code})"),
            },
        )
    }

    /// `module:function` (the target libbpf >= 1.3 resolves in that module's BTF).
    pub fn target(&self) -> String {
        format!("{}:{}", self.module, self.function)
    }
}

#[derive(Debug, Clone, Default)]
pub struct ProbeTable {
    /// Attachable probes in manifest order.
    pub probes: Vec<ProbeInfo>,
    /// probe id -> index in `probes`.
    index: Vec<Option<u32>>,
    /// `sha256:<hex>` of the manifest file's bytes.
    pub manifest_hash: String,
    /// Kernel version the manifest was generated for.
    pub kernel: String,
    pub vendor: String,
    /// Transitive caller -> callee relation among the manifest's probes (failure chains).
    pub relation: CallRelation,
}

/// Why a manifest gives no probe table: one line naming the manifest's problem.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TableError(pub String);

/// Ids above this are refused (the BPF tables are sized by the largest id).
const MAX_PROBE_ID: u32 = manifest::MAX_PROBE_ID;

impl ProbeTable {
    /// The table of a manifest file's text.
    pub fn from_manifest_text(text: &str, origin: &str) -> Result<Self, TableError> {
        let m = Manifest::from_yaml(text, origin).map_err(|e| TableError(e.to_string()))?;
        let mut t = Self::from_manifest(&m)?;
        t.manifest_hash = manifest_hash(text.as_bytes());
        Ok(t)
    }

    pub fn from_manifest(m: &Manifest) -> Result<Self, TableError> {
        let mut probes: Vec<ProbeInfo> = m.attachable().map(info).collect::<Result<_, _>>()?;
        for d in m.data_plane.iter().filter(|d| d.attach == Attach::Fexit) {
            probes.push(data_plane_info(d)?);
        }
        let mut t = ProbeTable {
            probes,
            index: Vec::new(),
            manifest_hash: String::new(),
            kernel: m.kernel.version.clone(),
            vendor: m.vendor.clone(),
            relation: CallRelation::from_manifest(m),
        };
        t.reindex()?;
        Ok(t)
    }

    /// A table from (id, function, module) triples, all fexit (tests, benchmarks); the layer
    /// is `core` for `ib_*` and `inline` modules, else `vendor`, without focus and without
    /// pinning user memory (see [`Self::with_focus`], [`Self::with_pins_user_memory`]).
    pub fn from_triples(triples: &[(u32, &str, &str)]) -> Self {
        let mut t = ProbeTable {
            probes: triples
                .iter()
                .map(|&(id, f, m)| ProbeInfo {
                    id,
                    function: f.to_string(),
                    module: m.to_string(),
                    kind: AttachKind::Fexit,
                    nargs: 0,
                    returns: ReturnKind::Int,
                    ret_size: 4,
                    arg_names: Vec::new(),
                    layer: if m.starts_with("ib_") || m == "inline" {
                        Layer::Core
                    } else {
                        Layer::Vendor
                    },
                    focus: None,
                    pins_user_memory: false,
                    error_sites: None,
                    fallback: Vec::new(),
                    kprobe_unread: Vec::new(),
                })
                .collect(),
            ..Default::default()
        };
        // ids in tests are small and distinct
        let _ = t.reindex();
        t
    }

    /// The same table with the call relation of direct caller -> callee `edges` among ids
    /// `0..n` (tests: ids without a table entry stand for probes without a program).
    pub fn with_calls(mut self, n: usize, edges: &[(u32, u32)]) -> Self {
        let attachable: Vec<u32> = self.probes.iter().map(|p| p.id).collect();
        self.relation = CallRelation::from_edges(n, edges, &attachable);
        self
    }

    /// The same table with `focus` set on probe `id` (tests of the owner decision).
    pub fn with_focus(mut self, id: u32, focus: FocusKind) -> Self {
        if let Some(p) = self.probes.iter_mut().find(|p| p.id == id) {
            p.focus = Some(focus);
        }
        self
    }

    /// The same table with `sites` as probe `id`'s error sites (tests of the owner decision).
    pub fn with_error_sites(mut self, id: u32, sites: Vec<manifest::ErrorSite>) -> Self {
        if let Some(p) = self.probes.iter_mut().find(|p| p.id == id) {
            p.error_sites = Some(sites);
        }
        self
    }

    /// The same table with probe `id` pinning user memory (tests of the owner decision).
    pub fn with_pins_user_memory(mut self, id: u32) -> Self {
        if let Some(p) = self.probes.iter_mut().find(|p| p.id == id) {
            p.pins_user_memory = true;
        }
        self
    }

    fn reindex(&mut self) -> Result<(), TableError> {
        let n = self.probes.iter().map(|p| p.id + 1).max().unwrap_or(0);
        self.index = vec![None; n as usize];
        for (i, p) in self.probes.iter().enumerate() {
            let slot = &mut self.index[p.id as usize];
            if slot.is_some() {
                return Err(TableError(format!(
                    "manifest: probe id {} appears twice",
                    p.id
                )));
            }
            *slot = Some(i as u32);
        }
        Ok(())
    }

    /// One past the largest probe id (size of per-id tables).
    pub fn id_limit(&self) -> usize {
        self.index.len()
    }

    #[inline]
    pub fn get(&self, id: u32) -> Option<&ProbeInfo> {
        let i = (*self.index.get(id as usize)?)?;
        self.probes.get(i as usize)
    }
}

fn info(p: &Probe) -> Result<ProbeInfo, TableError> {
    if p.id >= MAX_PROBE_ID {
        return Err(TableError(format!("manifest: probe id {} too large", p.id)));
    }
    let kind = if matches!(p.attach, Attach::Fexit | Attach::NoBtf) {
        AttachKind::Fexit
    } else {
        AttachKind::Kretprobe(p.attach_symbol.clone().ok_or_else(|| {
            TableError(format!(
                "manifest: probe {} ({}) is clone-only without attach_symbol",
                p.id, p.function
            ))
        })?)
    };
    Ok(ProbeInfo {
        id: p.id,
        function: p.function.clone(),
        module: p.module.clone(),
        kind,
        nargs: p.nargs,
        returns: p.returns,
        ret_size: p.ret_size,
        arg_names: {
            let mut a: Vec<_> = p.args.iter().map(|a| (a.index, a.name.clone())).collect();
            a.sort();
            a.into_iter().map(|(_, n)| n).collect()
        },
        layer: p.layer,
        focus: p.focus,
        pins_user_memory: p.pins_user_memory,
        error_sites: p.error_sites.clone(),
        fallback: p.kprobe_fallback(),
        kprobe_unread: p
            .kprobe_unread_args()
            .into_iter()
            .map(String::from)
            .collect(),
    })
}

/// A data-plane probe as the loader attaches it (an entry program, no return to check).
fn data_plane_info(d: &manifest::DataPlaneProbe) -> Result<ProbeInfo, TableError> {
    if d.id >= MAX_PROBE_ID {
        return Err(TableError(format!(
            "manifest: data-plane probe id {} too large",
            d.id
        )));
    }
    Ok(ProbeInfo {
        id: d.id,
        function: d.function.clone(),
        module: d.module.clone(),
        kind: AttachKind::Fentry {
            class: d.class,
            errors: d.errors.clone(),
        },
        nargs: 0,
        returns: ReturnKind::Void,
        ret_size: 0,
        arg_names: vec!["qp_num".into(), "port".into()],
        layer: d.layer,
        focus: None,
        pins_user_memory: false,
        error_sites: None,
        fallback: Vec::new(),
        kprobe_unread: Vec::new(),
    })
}

/// `sha256:<hex>` of bytes.
pub(crate) fn manifest_hash(bytes: &[u8]) -> String {
    format!("sha256:{}", crate::decode::hex(&Sha256::digest(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: &str = include_str!("../../generated/linux-6.12/rxe/manifest.yaml");

    #[test]
    fn the_kprobe_label_names_what_that_path_cannot_read() {
        let bnxt = include_str!("../../generated/linux-7.2/bnxt_re/manifest.yaml");
        let t = ProbeTable::from_manifest_text(bnxt, "bnxt_re").expect("manifest");
        let labels: Vec<String> = t
            .probes
            .iter()
            .filter(|p| !p.kprobe_unread.is_empty())
            .map(ProbeInfo::kprobe_label)
            .collect();
        assert_eq!(
            labels,
            ["bnxt_qplib_add_sgid (arguments past the sixth not read: is_ugid, stats_ctx_id)"]
        );
        let reg = t.probes.iter().find(|p| p.function == "ib_uverbs_reg_mr");
        assert_eq!(
            reg.map(ProbeInfo::kprobe_label).as_deref(),
            Some("ib_uverbs_reg_mr")
        );
    }

    #[test]
    fn rxe_table() {
        let t = ProbeTable::from_manifest_text(M, "rxe").expect("manifest");
        assert!(t.kernel.starts_with("6.12."), "{}", t.kernel);
        assert!(t.manifest_hash.starts_with("sha256:") && t.manifest_hash.len() == 71);
        let reg = t.probes.iter().find(|p| p.function == "ib_uverbs_reg_mr");
        let reg = reg.expect("ib_uverbs_reg_mr");
        assert_eq!(t.get(reg.id).map(|p| p.module.as_str()), Some("ib_uverbs"));
        assert_eq!(reg.section(), "fexit/ib_uverbs_reg_mr");
        assert_eq!(reg.target(), "ib_uverbs:ib_uverbs_reg_mr");
        // the manifest's typed facts, as they are: the owner decision reads them
        assert_eq!(
            (reg.layer, reg.focus, reg.pins_user_memory),
            (Layer::Core, Some(FocusKind::OpsCaller), false)
        );
        let pinning: Vec<&str> = t
            .probes
            .iter()
            .filter(|p| p.pins_user_memory)
            .map(|p| p.function.as_str())
            .collect();
        assert_eq!(pinning, ["ib_umem_get"]);
        // create_qp exists in ib_core (clone-only: kretprobe) and ib_uverbs (fexit)
        let cq: Vec<_> = t
            .probes
            .iter()
            .filter(|p| p.function == "create_qp")
            .collect();
        assert_eq!(cq.len(), 2);
        assert_ne!(cq[0].module, cq[1].module);
        for p in cq {
            match &p.kind {
                AttachKind::Fexit => assert_eq!(p.section(), "fexit/create_qp"),
                AttachKind::Kretprobe(s) => assert_eq!(p.section(), format!("kretprobe/{s}")),
                AttachKind::Fentry { .. } => assert_eq!(p.section(), "fentry/create_qp"),
            }
        }
        // ids without a program are absent
        let m = Manifest::from_yaml(M, "rxe").expect("manifest");
        for p in m.probes.iter().filter(|p| !p.attach.has_program()) {
            assert!(t.get(p.id).is_none());
        }
        assert!(t.get(100_000).is_none());
    }
}
