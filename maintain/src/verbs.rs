//! Userspace verbs -> uverbs write command or ioctl method -> kernel handler.
//!
//! The only hand-written part is [`VERBS`]: which command or method rdma-core 44's libibverbs
//! issues for each verb on a kernel that has the ioctl interface (`execute_ioctl_fallback`
//! only falls back to `write(2)` when the kernel lacks the method). The handler each command
//! or method lands in comes from the kernel's own tables: [`routes`] reads
//! `DECLARE_UVERBS_WRITE(_EX)` and `DECLARE_UVERBS_NAMED_METHOD(_DESTROY)` from the call
//! graph; [`routes_in_manifest`] recovers the same answer from a manifest alone through the
//! kernel's naming of those handlers (`IB_USER_VERBS_CMD_REG_MR` -> `ib_uverbs_reg_mr`,
//! `UVERBS_METHOD_QP_CREATE` -> `ib_uverbs_handler_UVERBS_METHOD_QP_CREATE`, a `_DESTROY`
//! method without its own handler -> `uverbs_destroy_def_handler`); the tests check both agree
//! on the real 6.12 and 6.1 trees.
//!
//! A write command reaches the same handler whether libibverbs uses `write(2)` or the
//! `UVERBS_METHOD_INVOKE_WRITE` ioctl.

use std::collections::{BTreeMap, BTreeSet};

use analyzer::CallGraph;
use serde::Serialize;

use manifest::{FocusKind, Manifest, Rule};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// `write(2)` on the uverbs device: `DECLARE_UVERBS_WRITE(_EX)` commands.
    Write,
    /// `ioctl(RDMA_VERBS_IOCTL)`: `DECLARE_UVERBS_NAMED_METHOD` methods.
    Ioctl,
}

impl Transport {
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Write => "write",
            Transport::Ioctl => "ioctl",
        }
    }
}

/// One userspace verb and what libibverbs (rdma-core 44) sends the kernel for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerbDef {
    pub verb: &'static str,
    pub transport: Transport,
    /// Write command (`IB_USER_VERBS_CMD_*`) or ioctl method (`UVERBS_METHOD_*`).
    pub id: &'static str,
}

const fn w(verb: &'static str, id: &'static str) -> VerbDef {
    VerbDef {
        verb,
        transport: Transport::Write,
        id,
    }
}

const fn i(verb: &'static str, id: &'static str) -> VerbDef {
    VerbDef {
        verb,
        transport: Transport::Ioctl,
        id,
    }
}

/// The verbs probegen knows, in rdma-core 44's choice of interface. Aliases (`_ex` forms,
/// `ibv_reg_mr_iova`) share their base verb's command.
pub const VERBS: &[VerbDef] = &[
    // Device and port.
    i("ibv_open_device", "UVERBS_METHOD_GET_CONTEXT"),
    w("ibv_query_device", "IB_USER_VERBS_CMD_QUERY_DEVICE"),
    w("ibv_query_device_ex", "IB_USER_VERBS_EX_CMD_QUERY_DEVICE"),
    i("ibv_query_port", "UVERBS_METHOD_QUERY_PORT"),
    i("ibv_query_gid", "UVERBS_METHOD_QUERY_GID_ENTRY"),
    i("ibv_query_gid_ex", "UVERBS_METHOD_QUERY_GID_ENTRY"),
    i("ibv_query_gid_table", "UVERBS_METHOD_QUERY_GID_TABLE"),
    w(
        "ibv_create_comp_channel",
        "IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL",
    ),
    // PD.
    w("ibv_alloc_pd", "IB_USER_VERBS_CMD_ALLOC_PD"),
    i("ibv_dealloc_pd", "UVERBS_METHOD_PD_DESTROY"),
    // MR and MW.
    w("ibv_reg_mr", "IB_USER_VERBS_CMD_REG_MR"),
    w("ibv_reg_mr_iova", "IB_USER_VERBS_CMD_REG_MR"),
    w("ibv_reg_mr_iova2", "IB_USER_VERBS_CMD_REG_MR"),
    i("ibv_reg_dmabuf_mr", "UVERBS_METHOD_REG_DMABUF_MR"),
    w("ibv_rereg_mr", "IB_USER_VERBS_CMD_REREG_MR"),
    i("ibv_dereg_mr", "UVERBS_METHOD_MR_DESTROY"),
    i("ibv_alloc_dm", "UVERBS_METHOD_DM_ALLOC"),
    i("ibv_reg_dm_mr", "UVERBS_METHOD_DM_MR_REG"),
    i("ibv_advise_mr", "UVERBS_METHOD_ADVISE_MR"),
    w("ibv_alloc_mw", "IB_USER_VERBS_CMD_ALLOC_MW"),
    i("ibv_dealloc_mw", "UVERBS_METHOD_MW_DESTROY"),
    // CQ.
    i("ibv_create_cq", "UVERBS_METHOD_CQ_CREATE"),
    i("ibv_create_cq_ex", "UVERBS_METHOD_CQ_CREATE"),
    w("ibv_resize_cq", "IB_USER_VERBS_CMD_RESIZE_CQ"),
    w("ibv_modify_cq", "IB_USER_VERBS_EX_CMD_MODIFY_CQ"),
    i("ibv_destroy_cq", "UVERBS_METHOD_CQ_DESTROY"),
    // QP.
    i("ibv_create_qp", "UVERBS_METHOD_QP_CREATE"),
    i("ibv_create_qp_ex", "UVERBS_METHOD_QP_CREATE"),
    w("ibv_modify_qp", "IB_USER_VERBS_CMD_MODIFY_QP"),
    w("ibv_modify_qp_rate_limit", "IB_USER_VERBS_EX_CMD_MODIFY_QP"),
    w("ibv_query_qp", "IB_USER_VERBS_CMD_QUERY_QP"),
    i("ibv_destroy_qp", "UVERBS_METHOD_QP_DESTROY"),
    w("ibv_open_qp", "IB_USER_VERBS_CMD_OPEN_QP"),
    w("ibv_attach_mcast", "IB_USER_VERBS_CMD_ATTACH_MCAST"),
    w("ibv_detach_mcast", "IB_USER_VERBS_CMD_DETACH_MCAST"),
    // SRQ, WQ, XRC.
    i("ibv_create_srq", "UVERBS_METHOD_SRQ_CREATE"),
    i("ibv_create_srq_ex", "UVERBS_METHOD_SRQ_CREATE"),
    w("ibv_modify_srq", "IB_USER_VERBS_CMD_MODIFY_SRQ"),
    w("ibv_query_srq", "IB_USER_VERBS_CMD_QUERY_SRQ"),
    i("ibv_destroy_srq", "UVERBS_METHOD_SRQ_DESTROY"),
    i("ibv_create_wq", "UVERBS_METHOD_WQ_CREATE"),
    w("ibv_modify_wq", "IB_USER_VERBS_EX_CMD_MODIFY_WQ"),
    i("ibv_destroy_wq", "UVERBS_METHOD_WQ_DESTROY"),
    w("ibv_open_xrcd", "IB_USER_VERBS_CMD_OPEN_XRCD"),
    i("ibv_close_xrcd", "UVERBS_METHOD_XRCD_DESTROY"),
    // AH, flows, counters.
    w("ibv_create_ah", "IB_USER_VERBS_CMD_CREATE_AH"),
    i("ibv_destroy_ah", "UVERBS_METHOD_AH_DESTROY"),
    w("ibv_create_flow", "IB_USER_VERBS_EX_CMD_CREATE_FLOW"),
    i("ibv_destroy_flow", "UVERBS_METHOD_FLOW_DESTROY"),
    i("ibv_create_counters", "UVERBS_METHOD_COUNTERS_CREATE"),
    i("ibv_read_counters", "UVERBS_METHOD_COUNTERS_READ"),
];

/// The verbs `diff` reports on, in this order (the control path first).
pub const REPORTED_VERBS: &[&str] = &[
    "ibv_create_qp",
    "ibv_modify_qp",
    "ibv_destroy_qp",
    "ibv_reg_mr",
    "ibv_reg_dmabuf_mr",
    "ibv_rereg_mr",
    "ibv_dereg_mr",
    "ibv_alloc_pd",
    "ibv_dealloc_pd",
    "ibv_create_cq",
    "ibv_resize_cq",
    "ibv_modify_cq",
    "ibv_destroy_cq",
    "ibv_create_srq",
    "ibv_create_ah",
    "ibv_alloc_mw",
    "ibv_open_device",
    "ibv_query_device",
    "ibv_query_port",
    "ibv_query_gid",
    "ibv_query_qp",
];

/// The definition of a verb: `ibv_create_qp`, also written `create_qp` or in capitals.
pub fn lookup(verb: &str) -> Option<&'static VerbDef> {
    let v = verb.trim().to_ascii_lowercase();
    let full = if v.starts_with("ibv_") {
        v
    } else {
        format!("ibv_{v}")
    };
    VERBS.iter().find(|d| d.verb == full)
}

/// A verb and the kernel handler its command or method lands in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Route {
    pub verb: String,
    pub transport: Transport,
    pub id: String,
    /// `None` when this kernel has no such command or method.
    pub handler: Option<String>,
}

/// Routes of every verb in [`VERBS`], from the kernel's dispatch tables.
pub fn routes(g: &CallGraph) -> Vec<Route> {
    VERBS
        .iter()
        .map(|d| {
            let table = match d.transport {
                Transport::Write => g.write_commands(),
                Transport::Ioctl => g.uapi_methods(),
            };
            Route {
                verb: d.verb.to_string(),
                transport: d.transport,
                id: d.id.to_string(),
                handler: table
                    .iter()
                    .find(|x| x.id == d.id)
                    .map(|x| x.handler.clone()),
            }
        })
        .collect()
}

/// The handler the kernel's naming gives a command or method, or for a `_DESTROY` method the
/// generic destroy handler, whichever `known` (the manifest's functions) contains.
fn conventional_handler(d: &VerbDef, known: &BTreeSet<&str>) -> Option<String> {
    let name = match d.transport {
        Transport::Write => {
            if let Some(rest) = d.id.strip_prefix("IB_USER_VERBS_EX_CMD_") {
                format!("ib_uverbs_ex_{}", rest.to_ascii_lowercase())
            } else {
                let rest = d.id.strip_prefix("IB_USER_VERBS_CMD_")?;
                format!("ib_uverbs_{}", rest.to_ascii_lowercase())
            }
        }
        Transport::Ioctl => format!("ib_uverbs_handler_{}", d.id),
    };
    if known.contains(name.as_str()) {
        return Some(name);
    }
    (d.transport == Transport::Ioctl
        && d.id.ends_with("_DESTROY")
        && known.contains("uverbs_destroy_def_handler"))
    .then(|| "uverbs_destroy_def_handler".to_string())
}

/// Routes of every verb in [`VERBS`], recovered from a manifest (its probes and excluded
/// functions: everything reachable from the uverbs entries).
pub fn routes_in_manifest(m: &Manifest) -> Vec<Route> {
    let known: BTreeSet<&str> = m
        .probes
        .iter()
        .map(|p| p.function.as_str())
        .chain(m.excluded.iter().map(|e| e.function.as_str()))
        .collect();
    VERBS
        .iter()
        .map(|d| Route {
            verb: d.verb.to_string(),
            transport: d.transport,
            id: d.id.to_string(),
            handler: conventional_handler(d, &known),
        })
        .collect()
}

/// What the probe set does with a handler.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "kebab-case")]
pub enum HandlerVerdict {
    /// The handler is a probe.
    Probed {
        rule: Rule,
        #[serde(skip_serializing_if = "Option::is_none")]
        focus: Option<FocusKind>,
    },
    /// Reachable, dropped by `rule`.
    Excluded { rule: Rule, evidence: String },
    /// Not reachable in this kernel (no such command or method, or not built).
    Unreachable,
}

impl HandlerVerdict {
    /// The rule name: `focus`, `cleanup`, ..., or `unreachable`.
    pub fn rule(&self) -> &'static str {
        match self {
            HandlerVerdict::Probed { rule, .. } | HandlerVerdict::Excluded { rule, .. } => {
                rule.as_str()
            }
            HandlerVerdict::Unreachable => "unreachable",
        }
    }

    pub fn short(&self) -> String {
        match self {
            HandlerVerdict::Probed { rule, focus } => match focus {
                Some(f) => format!("probed ({rule}: {f})"),
                None => format!("probed ({rule})"),
            },
            HandlerVerdict::Excluded { rule, .. } => format!("excluded ({rule})"),
            HandlerVerdict::Unreachable => "unreachable".to_string(),
        }
    }
}

/// One verb in one probe set.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VerbStatus {
    pub verb: String,
    pub transport: Transport,
    pub id: String,
    pub handler: Option<String>,
    #[serde(flatten)]
    pub verdict: HandlerVerdict,
    /// Probes on the path below the handler (`function (module)`), in probe order: those
    /// whose call path passes through it and, transitively, the probes they call.
    pub below: Vec<String>,
    /// The handler itself is probed: every failure of the verb is observed.
    pub covered: bool,
}

/// The status of every verb in [`VERBS`] in a probe set.
pub fn statuses(m: &Manifest) -> Vec<VerbStatus> {
    routes_in_manifest(m)
        .into_iter()
        .map(|r| status_of(m, r))
        .collect()
}

/// The status of one verb (`None` for a verb not in [`VERBS`]).
pub fn status(m: &Manifest, verb: &str) -> Option<VerbStatus> {
    let d = lookup(verb)?;
    routes_in_manifest(m)
        .into_iter()
        .find(|r| r.verb == d.verb)
        .map(|r| status_of(m, r))
}

fn status_of(m: &Manifest, r: Route) -> VerbStatus {
    let (verdict, below) = match &r.handler {
        None => (HandlerVerdict::Unreachable, Vec::new()),
        Some(h) => {
            let verdict = if let Some(p) = m.probes.iter().find(|p| &p.function == h) {
                HandlerVerdict::Probed {
                    rule: p.rule,
                    focus: p.focus,
                }
            } else if let Some(e) = m.excluded.iter().find(|e| &e.function == h) {
                HandlerVerdict::Excluded {
                    rule: e.rule,
                    evidence: e.evidence.clone(),
                }
            } else {
                HandlerVerdict::Unreachable
            };
            (verdict, probes_below(m, h))
        }
    };
    VerbStatus {
        covered: matches!(verdict, HandlerVerdict::Probed { .. }),
        verb: r.verb,
        transport: r.transport,
        id: r.id,
        handler: r.handler,
        verdict,
        below,
    }
}

/// Probes below `handler`: the probes whose call path passes through it (or the handler's
/// own probe), closed over the probes they call.
fn probes_below(m: &Manifest, handler: &str) -> Vec<String> {
    let by_id: BTreeMap<u32, &manifest::Probe> = m.probes.iter().map(|p| (p.id, p)).collect();
    let mut seen: BTreeSet<u32> = BTreeSet::new();
    let mut stack: Vec<u32> = m
        .probes
        .iter()
        .filter(|p| p.function == handler || p.path.iter().any(|f| f == handler))
        .map(|p| p.id)
        .collect();
    while let Some(id) = stack.pop() {
        if !seen.insert(id) {
            continue;
        }
        if let Some(p) = by_id.get(&id) {
            stack.extend(p.calls.iter().copied());
        }
    }
    seen.into_iter()
        .filter_map(|id| by_id.get(&id))
        .filter(|p| p.function != handler)
        .map(|p| format!("{} ({})", p.function, p.module))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use manifest::{Excluded, KernelInfo, Probe, Stats};

    fn probe(id: u32, function: &str, path: &[&str], calls: &[u32]) -> Probe {
        Probe {
            id,
            function: function.into(),
            module: "ib_uverbs".into(),
            file: "drivers/infiniband/core/uverbs_cmd.c".into(),
            line: 1,
            layer: manifest::Layer::parse("core").expect("layer"),
            object: manifest::Object::parse("QP").expect("object"),
            rule: manifest::Rule::parse("focus").expect("rule"),
            focus: Some(manifest::FocusKind::parse("handler").expect("focus")),
            pins_user_memory: false,
            error_sites: None,
            evidence: String::new(),
            returns: manifest::ReturnKind::parse("int").expect("returns"),
            ret_size: 4,
            null_ok: false,
            nargs: 1,
            attach: manifest::Attach::parse("fexit").expect("attach"),
            attach_symbol: None,
            suggest: None,
            args: Vec::new(),
            calls: calls.to_vec(),
            path: path.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn excluded(function: &str, rule: &str) -> Excluded {
        Excluded {
            function: function.into(),
            module: "ib_uverbs".into(),
            file: "drivers/infiniband/core/uverbs_std_types.c".into(),
            line: 1,
            rule: manifest::Rule::parse(rule).expect("rule"),
            evidence: format!("{rule} evidence"),
            path: vec!["ib_uverbs_ioctl".into(), function.into()],
        }
    }

    fn manifest() -> Manifest {
        Manifest {
            data_plane: Vec::new(),
            focus_ops: Vec::new(),
            schema: manifest::SCHEMA_ID.into(),
            kernel: KernelInfo {
                version: "6.12.117".into(),
                config: ".config".into(),
            },
            vendor: "mlx5".into(),
            entries: vec!["ib_uverbs_ioctl".into(), "ib_uverbs_write".into()],
            degraded: Vec::new(),
            probes: vec![
                probe(
                    0,
                    "ib_uverbs_handler_UVERBS_METHOD_QP_CREATE",
                    &[
                        "ib_uverbs_ioctl",
                        "ib_uverbs_handler_UVERBS_METHOD_QP_CREATE",
                    ],
                    &[1],
                ),
                probe(
                    1,
                    "ib_create_qp_user",
                    &[
                        "ib_uverbs_write",
                        "ib_uverbs_create_qp",
                        "ib_create_qp_user",
                    ],
                    &[2],
                ),
                probe(
                    2,
                    "mlx5_ib_create_qp",
                    &[
                        "ib_uverbs_write",
                        "ib_uverbs_create_qp",
                        "mlx5_ib_create_qp",
                    ],
                    &[],
                ),
                probe(
                    3,
                    "ib_uverbs_modify_qp",
                    &["ib_uverbs_write", "ib_uverbs_modify_qp"],
                    &[],
                ),
            ],
            excluded: vec![
                excluded("ib_uverbs_handler_UVERBS_METHOD_QUERY_PORT", "read-only"),
                excluded("uverbs_destroy_def_handler", "cleanup"),
            ],
            stats: Stats::default(),
        }
    }

    #[test]
    fn lookup_accepts_short_and_capital_names() {
        assert_eq!(
            lookup("create_qp").map(|d| d.id),
            Some("UVERBS_METHOD_QP_CREATE")
        );
        assert_eq!(
            lookup("IBV_REG_MR").map(|d| d.transport),
            Some(Transport::Write)
        );
        assert!(lookup("ibv_frobnicate").is_none());
        let names: BTreeSet<_> = VERBS.iter().map(|d| d.verb).collect();
        assert_eq!(names.len(), VERBS.len(), "duplicate verb in VERBS");
        for v in REPORTED_VERBS {
            assert!(lookup(v).is_some(), "{v} is reported but not defined");
        }
    }

    #[test]
    fn handler_verdicts_and_probes_below() {
        let m = manifest();
        let qp = status(&m, "ibv_create_qp").expect("known verb");
        assert_eq!(
            qp.handler.as_deref(),
            Some("ib_uverbs_handler_UVERBS_METHOD_QP_CREATE")
        );
        assert!(qp.covered);
        // Through the probes it calls, not only through paths.
        assert_eq!(
            qp.below,
            vec![
                "ib_create_qp_user (ib_uverbs)",
                "mlx5_ib_create_qp (ib_uverbs)"
            ]
        );
        let port = status(&m, "ibv_query_port").expect("known verb");
        assert_eq!(port.verdict.rule(), "read-only");
        assert!(!port.covered);
        // PD_DESTROY has no handler of its own: the generic destroy handler.
        let pd = status(&m, "ibv_dealloc_pd").expect("known verb");
        assert_eq!(pd.handler.as_deref(), Some("uverbs_destroy_def_handler"));
        assert_eq!(pd.verdict.rule(), "cleanup");
        // Not in this manifest at all.
        let mr = status(&m, "ibv_reg_mr").expect("known verb");
        assert_eq!(
            (mr.handler, mr.verdict),
            (None, HandlerVerdict::Unreachable)
        );
        let modify = status(&m, "ibv_modify_qp").expect("known verb");
        assert!(modify.covered && modify.below.is_empty());
    }
}
