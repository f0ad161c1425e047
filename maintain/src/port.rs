//! Porting a probe set from one vendor driver to another through `struct ib_device_ops`: the
//! core calls a member (`ops.create_qp`), each driver fills it with its own function
//! (`.create_qp = mlx5_ib_create_qp` in mlx5, `bnxt_re_create_qp` in bnxt_re), so a vendor
//! probe that fills a member maps to whatever fills the same member in the target (several
//! functions when the target registers several tables: irdma's iWARP and RoCE `modify_qp`).
//!
//! Pure: the call graph (its `ops_tables`, built with both vendors in scope) and the two probe
//! sets (as [`SetProbe`]s, the manifest's fields) in, a [`Port`] out.

use std::collections::BTreeSet;

use analyzer::CallGraph;
use askama::Template;
use serde::Serialize;

use crate::markdown::{code_list, or_dash};
use heuristics::Vendor;
use manifest::{FocusKind, Layer, Object};

/// A probe of a set, as the manifest describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetProbe {
    pub function: String,
    pub module: String,
    pub file: String,
    pub layer: Layer,
    pub object: Object,
    /// R4 evidence: `ops-impl`, `hardware`, `handler`, ...
    pub focus: Option<FocusKind>,
}

/// One vendor's side of a port.
#[derive(Debug, Clone, Copy)]
pub struct Side<'a> {
    pub name: &'a str,
    pub vendor: &'a Vendor,
    pub set: &'a [SetProbe],
}

impl Side<'_> {
    fn owns(&self, file: &str) -> bool {
        self.vendor
            .dirs
            .iter()
            .any(|d| file.starts_with(d.as_str()))
    }

    fn has(&self, function: &str) -> bool {
        self.set.iter().any(|p| p.function == function)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Mapping {
    pub member: String,
    pub from: String,
    pub to: String,
    /// The target function is a probe of the target's own set.
    pub to_in_set: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum UnmappedReason {
    /// The probe fills an `ib_device_ops` member the target leaves empty.
    MemberNotImplemented,
    /// The probe fills no member: driver-internal (a hardware-command issuer, a driver's own
    /// uverbs method, ...).
    VendorInternal,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unmapped {
    pub from: String,
    pub module: String,
    pub object: Object,
    /// Why the source set keeps it (`hardware`, `ops-impl`, `handler`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub focus: Option<FocusKind>,
    pub reason: UnmappedReason,
    /// For [`UnmappedReason::MemberNotImplemented`]: the member.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub member: Option<String>,
    /// The target set's hardware probes to use instead: those on the same object (by their
    /// verdict or their name), else all of them.
    pub candidates: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CoreProbe {
    pub function: String,
    pub module: String,
    /// The target's own set keeps it too.
    pub in_target_set: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Port {
    pub from: String,
    pub to: String,
    pub mappings: Vec<Mapping>,
    pub unmapped: Vec<Unmapped>,
    pub core: Vec<CoreProbe>,
    /// The data-plane probes of each set (derived per vendor, not mapped through ops):
    /// (vendor, function, module, class).
    pub data_plane: Vec<(String, String, String, String)>,
}

impl Port {
    /// Lists both sets' data-plane probes beside the mapping: `from`'s, then `to`'s.
    pub fn with_data_plane(mut self, from: &manifest::Manifest, to: &manifest::Manifest) -> Self {
        for (name, m) in [(&self.from, from), (&self.to, to)] {
            for d in &m.data_plane {
                self.data_plane.push((
                    name.clone(),
                    d.function.clone(),
                    d.module.clone(),
                    d.class.as_str().to_string(),
                ));
            }
        }
        self
    }
}

/// Members `function` (defined in `file`) fills in `side`'s ops tables.
fn members_of(g: &CallGraph, side: &Side, function: &str, file: &str) -> BTreeSet<String> {
    g.ops_tables()
        .iter()
        .filter(|t| side.owns(&t.file))
        .flat_map(|t| t.members.iter())
        .filter(|(_, f, id)| f == function && id.is_none_or(|id| g.node(id).file == file))
        .map(|(m, _, _)| m.clone())
        .collect()
}

/// Functions filling `member` in `side`'s ops tables.
fn fillers(g: &CallGraph, side: &Side, member: &str) -> BTreeSet<String> {
    g.ops_tables()
        .iter()
        .filter(|t| side.owns(&t.file))
        .flat_map(|t| t.members.iter())
        .filter(|(m, _, _)| m == member)
        .map(|(_, f, _)| f.clone())
        .collect()
}

fn name_has_object(function: &str, object: Object) -> bool {
    let o = object.as_str().to_ascii_lowercase();
    function.split('_').any(|t| t.eq_ignore_ascii_case(&o))
}

fn candidates(to: &Side, object: Object) -> Vec<String> {
    let hw: Vec<&SetProbe> = to
        .set
        .iter()
        .filter(|p| p.layer == Layer::Vendor && p.focus == Some(FocusKind::Hardware))
        .collect();
    let same: BTreeSet<String> = hw
        .iter()
        .filter(|p| p.object == object || name_has_object(&p.function, object))
        .map(|p| p.function.clone())
        .collect();
    if same.is_empty() {
        hw.iter()
            .map(|p| p.function.clone())
            .collect::<BTreeSet<_>>()
    } else {
        same
    }
    .into_iter()
    .collect()
}

pub fn port(g: &CallGraph, from: Side, to: Side) -> Port {
    let mut mappings = BTreeSet::new();
    let mut unmapped = Vec::new();
    let mut core = Vec::new();
    for p in from.set {
        if p.layer != Layer::Vendor {
            core.push(CoreProbe {
                function: p.function.clone(),
                module: p.module.clone(),
                in_target_set: to
                    .set
                    .iter()
                    .any(|t| t.function == p.function && t.module == p.module),
            });
            continue;
        }
        let members = members_of(g, &from, &p.function, &p.file);
        let unmapped_of = |reason, member: Option<String>| Unmapped {
            from: p.function.clone(),
            module: p.module.clone(),
            object: p.object,
            focus: p.focus,
            reason,
            member,
            candidates: candidates(&to, p.object),
        };
        if members.is_empty() {
            unmapped.push(unmapped_of(UnmappedReason::VendorInternal, None));
            continue;
        }
        for m in members {
            let targets = fillers(g, &to, &m);
            if targets.is_empty() {
                unmapped.push(unmapped_of(UnmappedReason::MemberNotImplemented, Some(m)));
                continue;
            }
            for t in targets {
                mappings.insert(Mapping {
                    member: m.clone(),
                    from: p.function.clone(),
                    to_in_set: to.has(&t),
                    to: t,
                });
            }
        }
    }
    unmapped.sort_by(|a, b| (a.reason, &a.member, &a.from).cmp(&(b.reason, &b.member, &b.from)));
    core.sort_by(|a, b| (&a.function, &a.module).cmp(&(&b.function, &b.module)));
    Port {
        from: from.name.to_string(),
        to: to.name.to_string(),
        mappings: mappings.into_iter().collect(),
        unmapped,
        core,
        data_plane: Vec::new(),
    }
}

#[derive(Template)]
#[template(path = "port.md", escape = "none")]
struct PortTemplate<'a> {
    p: &'a Port,
    /// Members the target does not implement.
    missing: Vec<&'a Unmapped>,
    /// Vendor-internal probes without a counterpart.
    internal: Vec<&'a Unmapped>,
}

impl Port {
    /// The port as a markdown report.
    pub fn to_markdown(&self) -> Result<String, askama::Error> {
        let (missing, internal) = self
            .unmapped
            .iter()
            .partition(|u| u.reason == UnmappedReason::MemberNotImplemented);
        PortTemplate {
            p: self,
            missing,
            internal,
        }
        .render()
    }
}
