//! Data-plane probes: where a queue pair's death passes through the kernel, found from the
//! structure of the code (rules.yaml `data_plane:`), never from a list of names.
//!
//! Four named passes, each graph in, picks out:
//! - [`installed_event_handlers`]: the event callbacks that functions reachable from the
//!   entries install into the objects user space owns, kept when they call the queue the
//!   callbacks share (the function that hands events to user space);
//! - [`vendor_event_raisers`]: vendor functions that call an object's event callback with an
//!   error event they set themselves;
//! - [`completion_functions`]: vendor functions that call a CQ's completion callback below a
//!   function that sets an error completion status (the kernel decides the status);
//! - [`qp_error_functions`]: vendor functions that store the error state into a QP they were
//!   handed;
//! - [`peer_sources`]: core functions that hand a QP's new attributes to the driver's
//!   `modify_qp` dispatch (where the peer a QP's later errors name is kept).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use analyzer::{CallGraph, FnId, FnNode, RefSite};
use manifest::{DataPlaneClass, DataPlaneVia};

use crate::rules::{DataPlaneRule, PeerRule, Rules, Vendor};

/// One fact that chose a data-plane function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataPlaneFact {
    pub via: DataPlaneVia,
    pub file: String,
    pub line: usize,
    pub detail: String,
}

/// A function the data-plane passes chose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataPlanePick {
    pub id: FnId,
    pub class: DataPlaneClass,
    /// The argument the filter reads (the event, the completion entry, the QP); `None`: every
    /// call is recorded.
    pub arg: Option<usize>,
    /// What makes a record, by name: the event types (async_event), the completion statuses
    /// (completion), the state stored (qp_error), the state that sets the peer (peer);
    /// empty: every call.
    pub errors: Vec<String>,
    /// A peer pick's attribute-mask argument.
    pub mask_arg: Option<usize>,
    pub evidence: Vec<DataPlaneFact>,
}

/// Every data-plane function of the graph, sorted by (class, name, file); empty when the rules
/// have no `data_plane:` section.
pub(crate) fn data_plane(
    g: &CallGraph,
    rules: &Rules,
    vendor: &Vendor,
    reach: &BTreeMap<FnId, Option<(FnId, analyzer::CallEdge)>>,
) -> Vec<DataPlanePick> {
    let Some(dp) = &rules.data_plane else {
        return Vec::new();
    };
    let vendor_fn = |n: &FnNode| vendor.dirs.iter().any(|d| n.file.starts_with(d.as_str()));
    let mut picks = installed_event_handlers(g, dp, reach);
    picks.extend(vendor_event_raisers(g, dp, &vendor_fn));
    let completions = completion_functions(g, dp, rules.completion_depth, &vendor_fn);
    let completion_ids: BTreeSet<FnId> = completions.iter().map(|p| p.id).collect();
    // A completion function may raise CQ_ERR as well (rxe_cq_post on overflow): it is one
    // probe, of the completion class, whose filter sees the status.
    picks.retain(|p| !completion_ids.contains(&p.id));
    picks.extend(completions);
    picks.extend(qp_error_functions(g, dp, &vendor_fn));
    if let Some(peer) = &dp.peer {
        picks.extend(peer_sources(g, peer, &vendor_fn));
    }
    picks.sort_by(|a, b| {
        let (na, nb) = (g.node(a.id), g.node(b.id));
        (a.class, &na.name, &na.file).cmp(&(b.class, &nb.name, &nb.file))
    });
    picks.dedup_by_key(|p| p.id);
    picks
}

/// The parameter whose declared type points to `struct <name>`.
fn param_of_struct(n: &FnNode, name: &str) -> Option<usize> {
    let want = format!("struct {name} *");
    n.params.iter().position(|p| p.ty == want)
}

/// `base->field` of an indirect call the graph could not follow: the field.
fn called_fields(n: &FnNode) -> impl Iterator<Item = &str> {
    n.unresolved_indirect
        .iter()
        .filter_map(|c| c.rsplit_once("->").map(|(_, f)| f))
}

/// Every function a reachable function installs as an event callback, with where (the first
/// installation, in reach order).
fn installations(
    g: &CallGraph,
    dp: &DataPlaneRule,
    reach: &BTreeMap<FnId, Option<(FnId, analyzer::CallEdge)>>,
) -> BTreeMap<FnId, DataPlaneFact> {
    let mut installed: BTreeMap<FnId, DataPlaneFact> = BTreeMap::new();
    for &installer in reach.keys() {
        let n = g.node(installer);
        for r in &n.value_refs {
            let how = match &r.site {
                RefSite::Field { field, .. } if dp.event_handler_fields.contains(field) => {
                    format!("`{}` stores it into `.{field}`", n.name)
                }
                RefSite::Argument { callee, index } => {
                    let Some(reg) = dp
                        .event_handler_registrations
                        .iter()
                        .find(|reg| &reg.callee == callee && reg.argument == *index)
                    else {
                        continue;
                    };
                    format!("`{}` registers it with `{}`", n.name, reg.callee)
                }
                RefSite::Field { .. } => continue,
            };
            for &h in g.find(&r.name) {
                installed.entry(h).or_insert_with(|| DataPlaneFact {
                    via: DataPlaneVia::Installed,
                    file: n.file.clone(),
                    line: r.line,
                    detail: how.clone(),
                });
            }
        }
    }
    installed
}

/// Pass: event callbacks installed by reachable functions, kept when they call the queue.
fn installed_event_handlers(
    g: &CallGraph,
    dp: &DataPlaneRule,
    reach: &BTreeMap<FnId, Option<(FnId, analyzer::CallEdge)>>,
) -> Vec<DataPlanePick> {
    let installed = installations(g, dp, reach);
    // the queue: a callee two or more installed callbacks share
    let mut callers_of: BTreeMap<FnId, usize> = BTreeMap::new();
    for &h in installed.keys() {
        for (c, _) in g.callees(h) {
            *callers_of.entry(c).or_default() += 1;
        }
    }
    let shared: BTreeSet<FnId> = callers_of
        .into_iter()
        .filter(|&(_, n)| n >= 2)
        .map(|(c, _)| c)
        .collect();
    // the queueing step goes one call further (6.12: uverbs_uobj_event -> ib_uverbs_async_handler,
    // which the device's callback calls directly)
    let mut queues = shared.clone();
    for &q in &shared {
        queues.extend(g.callees(q).into_iter().map(|(c, _)| c));
    }
    let mut out = Vec::new();
    for (h, fact) in installed {
        let Some((q, edge)) = g.callees(h).into_iter().find(|(c, _)| queues.contains(c)) else {
            continue;
        };
        let node = g.node(h);
        let Some(arg) = param_of_struct(node, &dp.event_struct) else {
            continue;
        };
        let queue = DataPlaneFact {
            via: DataPlaneVia::Installed,
            file: edge.file.clone(),
            line: edge.line,
            detail: format!(
                "queues the event for user space through `{}` (a callee the installed callbacks share)",
                g.node(q).name
            ),
        };
        out.push(DataPlanePick {
            id: h,
            class: DataPlaneClass::AsyncEvent,
            arg: Some(arg),
            errors: dp.error_events.clone(),
            mask_arg: None,
            evidence: vec![fact, queue],
        });
    }
    out
}

/// The first store of one of `values` into `field` in a body: (line, value).
fn sets<'n>(n: &'n FnNode, field: &str, values: &[String]) -> Option<(usize, &'n str)> {
    n.value_refs.iter().find_map(|r| match &r.site {
        RefSite::Field { field: f, .. } if f == field && values.contains(&r.name) => {
            Some((r.line, r.name.as_str()))
        }
        _ => None,
    })
}

/// Pass: vendor functions that raise an error event through an object's event callback.
fn vendor_event_raisers(
    g: &CallGraph,
    dp: &DataPlaneRule,
    vendor_fn: &dyn Fn(&FnNode) -> bool,
) -> Vec<DataPlanePick> {
    let mut out = Vec::new();
    for (id, n) in g.nodes().iter().enumerate() {
        if !n.built || !vendor_fn(n) {
            continue;
        }
        let Some(field) = called_fields(n).find(|f| dp.event_handler_fields.iter().any(|e| e == f))
        else {
            continue;
        };
        let Some((line, event)) = sets(n, &dp.event_type_field, &dp.error_events) else {
            continue;
        };
        out.push(DataPlanePick {
            id,
            class: DataPlaneClass::AsyncEvent,
            arg: None,
            errors: Vec::new(),
            mask_arg: None,
            evidence: vec![DataPlaneFact {
                via: DataPlaneVia::Raised,
                file: n.file.clone(),
                line,
                detail: format!(
                    "sets `.{}` to `{event}` and calls the object's `.{field}`",
                    dp.event_type_field
                ),
            }],
        });
    }
    out
}

/// Pass: vendor functions calling a CQ's completion callback below a function that sets an
/// error completion status.
fn completion_functions(
    g: &CallGraph,
    dp: &DataPlaneRule,
    depth: usize,
    vendor_fn: &dyn Fn(&FnNode) -> bool,
) -> Vec<DataPlanePick> {
    // the CQ's callback it calls: the completion callback (6.12: rxe_cq_post signals the
    // completion itself) or the event callback (6.1: rxe_cq_post defers the signal to a
    // tasklet and raises only the CQ's overflow itself)
    let cq_callback = |n: &FnNode| -> Option<String> {
        let mut fields = called_fields(n);
        fields
            .find(|f| {
                dp.completion_callback_fields.iter().any(|c| c == f)
                    || dp.event_handler_fields.iter().any(|c| c == f)
            })
            .map(str::to_string)
    };
    let completes = |n: &FnNode| cq_callback(n).is_some();
    // function -> (the status setter above it, the status, the setter's line)
    let mut found: BTreeMap<FnId, (FnId, usize, String)> = BTreeMap::new();
    for (setter, n) in g.nodes().iter().enumerate() {
        if !n.built || !vendor_fn(n) {
            continue;
        }
        let Some((line, status)) = sets(n, &dp.completion_status_field, &dp.error_statuses) else {
            continue;
        };
        // breadth-first below the setter, within the vendor
        let mut seen = BTreeSet::from([setter]);
        let mut queue = VecDeque::from([(setter, 0usize)]);
        while let Some((f, d)) = queue.pop_front() {
            if completes(g.node(f)) {
                found
                    .entry(f)
                    .or_insert_with(|| (setter, line, status.to_string()));
            }
            if d == depth {
                continue;
            }
            for (c, _) in g.callees(f) {
                if vendor_fn(g.node(c)) && seen.insert(c) {
                    queue.push_back((c, d + 1));
                }
            }
        }
    }
    found
        .into_iter()
        .filter_map(|(id, (setter, line, status))| {
            let n = g.node(id);
            // the completion entry: the pointer argument after the CQ
            let arg = n.params.iter().skip(1).position(|p| p.ty.ends_with('*'))? + 1;
            let field = cq_callback(n).unwrap_or_default();
            let s = g.node(setter);
            Some(DataPlanePick {
                id,
                class: DataPlaneClass::Completion,
                arg: Some(arg),
                errors: dp.error_statuses.clone(),
                mask_arg: None,
                evidence: vec![DataPlaneFact {
                    via: DataPlaneVia::Completes,
                    file: s.file.clone(),
                    line,
                    detail: format!(
                        "calls the CQ's `.{field}` on the completion path: reached from `{}`, which sets `.{}` to `{status}`",
                        s.name, dp.completion_status_field
                    ),
                }],
            })
        })
        .collect()
}

/// Pass: vendor functions that store the error state into a QP they were handed.
fn qp_error_functions(
    g: &CallGraph,
    dp: &DataPlaneRule,
    vendor_fn: &dyn Fn(&FnNode) -> bool,
) -> Vec<DataPlanePick> {
    let mut out = Vec::new();
    for (id, n) in g.nodes().iter().enumerate() {
        if !n.built || !vendor_fn(n) || n.params.is_empty() {
            continue;
        }
        let hit = n.value_refs.iter().find(|r| {
            matches!(&r.site, RefSite::Field { field, through_pointer: true } if *field == dp.qp_state_field)
                && r.name == dp.qp_error_state
        });
        let Some(r) = hit else { continue };
        out.push(DataPlanePick {
            id,
            class: DataPlaneClass::QpError,
            arg: Some(0),
            errors: vec![dp.qp_error_state.clone()],
            mask_arg: None,
            evidence: vec![DataPlaneFact {
                via: DataPlaneVia::QpState,
                file: n.file.clone(),
                line: r.line,
                detail: format!(
                    "stores `{}` into `->...{}` of an object it was handed",
                    dp.qp_error_state, dp.qp_state_field
                ),
            }],
        });
    }
    out
}

/// Pass: core functions taking a QP and its new attributes that hand both to a function that
/// dispatches the driver's `modify_qp` (its own call, or a header inline's). The dispatcher
/// itself is not taken: its caller commits what the driver accepted.
fn peer_sources(
    g: &CallGraph,
    rule: &PeerRule,
    vendor_fn: &dyn Fn(&FnNode) -> bool,
) -> Vec<DataPlanePick> {
    let dispatches = |n: &FnNode| n.ops_calls.contains(&rule.dispatch_member);
    let mut out = Vec::new();
    for (id, n) in g.nodes().iter().enumerate() {
        if !n.built || vendor_fn(n) || n.in_header() {
            continue;
        }
        let (Some(_), Some(attr)) = (
            param_of_struct(n, &rule.qp_struct),
            param_of_struct(n, &rule.attr_struct),
        ) else {
            continue;
        };
        // the attribute mask: the integer right after the attributes
        let Some(mask) = n
            .params
            .get(attr + 1)
            .filter(|p| p.ty == "int")
            .map(|_| attr + 1)
        else {
            continue;
        };
        let Some((d, edge)) = g.callees(id).into_iter().find(|(c, _)| {
            let c = g.node(*c);
            dispatches(c) && param_of_struct(c, &rule.attr_struct).is_some()
        }) else {
            continue;
        };
        out.push(DataPlanePick {
            id,
            class: DataPlaneClass::Peer,
            arg: Some(attr),
            errors: vec![rule.state.clone()],
            mask_arg: Some(mask),
            evidence: vec![DataPlaneFact {
                via: DataPlaneVia::Dispatches,
                file: edge.file.clone(),
                line: edge.line,
                detail: format!(
                    "hands `struct {} *` to `{}`, which dispatches `.{}`: on a successful {} the QP's peer",
                    rule.attr_struct,
                    g.node(d).name,
                    rule.dispatch_member,
                    rule.state
                ),
            }],
        });
    }
    out
}
