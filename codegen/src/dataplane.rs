//! The selection's data-plane picks as manifest entries: the attach verdict of each, and for
//! a function the binary cannot attach to (inlined, static without BTF) its nearest
//! attachable caller in the same module, which sees every call of it.

use std::collections::{BTreeSet, VecDeque};

use analyzer::{AttachVerdict, Binaries, CallGraph, FnId};
use heuristics::{DataPlanePick, Selection};
use manifest::{
    Attach, DataPlaneClass, DataPlaneEvidence, DataPlaneOwner, DataPlaneProbe, DataPlaneVia, Layer,
    OwnerObject, DATA_PLANE_KIND,
};

use crate::attach::{attach as attach_verdict, attach_of, module_name};

/// The nearest caller (breadth-first, in the same module, up to `hops` calls up) that an
/// entry program attaches to by name, with the path's call site.
fn attachable_caller(
    g: &CallGraph,
    bins: Option<&Binaries>,
    id: FnId,
    hops: usize,
) -> Option<(FnId, String, usize)> {
    let module = g.node(id).module.clone();
    let mut seen = BTreeSet::from([id]);
    let mut queue = VecDeque::from([(id, 0usize)]);
    while let Some((f, d)) = queue.pop_front() {
        if d == hops {
            continue;
        }
        for (c, e) in g.callers(f) {
            if g.node(c).module != module || !seen.insert(c) {
                continue;
            }
            if matches!(attach_of(g, bins, c), AttachVerdict::Fexit) {
                return Some((c, e.file.clone(), e.line));
            }
            queue.push_back((c, d + 1));
        }
    }
    None
}

/// One manifest entry per data-plane pick (ids from `first_id`, in the selection's order);
/// a pick lifted onto a caller another pick already is, is that one.
pub(crate) fn data_plane_probes(
    g: &CallGraph,
    sel: &Selection,
    bins: Option<&Binaries>,
    first_id: u32,
) -> Vec<DataPlaneProbe> {
    let mut out: Vec<DataPlaneProbe> = Vec::new();
    let mut taken: BTreeSet<FnId> = BTreeSet::new();
    for pick in &sel.data_plane {
        let verdict = attach_of(g, bins, pick.id);
        // only a probe of every call moves to a caller: a filter reads the function's own
        // argument, which its caller does not have (and a caller on a hot path would record
        // every call: rxe_completer above 6.1's complete_ack)
        let (at, derived, lift) = if matches!(verdict, AttachVerdict::Fexit) || pick.arg.is_some() {
            (pick.id, None, None)
        } else {
            match attachable_caller(g, bins, pick.id, sel.manifest_limits.suggest_hops) {
                Some((c, file, line)) => {
                    (c, Some(g.node(pick.id).name.clone()), Some((file, line)))
                }
                None => (pick.id, None, None),
            }
        };
        if !taken.insert(at) {
            continue;
        }
        out.push(entry(
            g,
            bins,
            pick,
            at,
            derived,
            lift,
            first_id + out.len() as u32,
        ));
    }
    out
}

fn entry(
    g: &CallGraph,
    bins: Option<&Binaries>,
    pick: &DataPlanePick,
    at: FnId,
    derived: Option<String>,
    lift: Option<(String, usize)>,
    id: u32,
) -> DataPlaneProbe {
    let n = g.node(at);
    let mut evidence: Vec<DataPlaneEvidence> = pick
        .evidence
        .iter()
        .map(|f| DataPlaneEvidence {
            via: f.via,
            file: f.file.clone(),
            line: f.line,
            detail: f.detail.clone(),
        })
        .collect();
    if let (Some(d), Some((file, line))) = (&derived, lift) {
        evidence.push(DataPlaneEvidence {
            via: evidence.first().map_or(DataPlaneVia::Raised, |e| e.via),
            file,
            line,
            detail: format!(
                "`{d}` has no entry the binary attaches to: probed at `{}`, its nearest attachable caller",
                n.name
            ),
        });
    }
    // an installed callback is the verbs core's; every other pass looks in the vendor's code
    let layer = match pick.evidence.first().map(|e| e.via) {
        Some(DataPlaneVia::Installed | DataPlaneVia::Dispatches) => Layer::Core,
        _ => Layer::Vendor,
    };
    DataPlaneProbe {
        id,
        kind: DATA_PLANE_KIND.to_string(),
        class: pick.class,
        function: n.name.clone(),
        module: module_name(g, at),
        file: n.file.clone(),
        line: n.line,
        layer,
        attach: attach_verdict(&attach_of(g, bins, at)),
        // a caller probed for a callee reads nothing of the callee's arguments
        arg: if derived.is_some() { None } else { pick.arg },
        errors: if derived.is_some() {
            Vec::new()
        } else {
            pick.errors.clone()
        },
        mask_arg: pick.mask_arg,
        owner: if derived.is_some() {
            None
        } else {
            owner(&n.params, pick)
        },
        derived,
        evidence,
    }
}

/// The argument whose object's creator owns a record: a completion function's CQ (the
/// parameter `struct <x>_cq *`), qp_error's QP (its own argument, `struct <x>_qp *`), the
/// QP whose peer a peer probe keeps (its errors look the peer up by the same owner). Events
/// carry their object in the event itself.
fn owner(params: &[analyzer::Param], pick: &DataPlanePick) -> Option<DataPlaneOwner> {
    let (object, suffix) = match pick.class {
        DataPlaneClass::Completion => (OwnerObject::Cq, "_cq"),
        DataPlaneClass::QpError | DataPlaneClass::Peer => (OwnerObject::Qp, "_qp"),
        DataPlaneClass::AsyncEvent => return None,
    };
    let struct_of = |ty: &str| {
        let name = ty.strip_prefix("struct ")?.strip_suffix(" *")?;
        (name.ends_with(suffix) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
            .then(|| name.to_string())
    };
    params
        .iter()
        .enumerate()
        .find_map(|(arg, p)| struct_of(&p.ty).map(|ty| DataPlaneOwner { arg, ty, object }))
}

/// Whether a data-plane probe has an entry program.
#[allow(dead_code)]
pub(crate) fn has_program(p: &DataPlaneProbe) -> bool {
    p.attach == Attach::Fexit
}
