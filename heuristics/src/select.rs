//! The selection: one verdict, with its rule, evidence and call path, for every function
//! reachable from the entries.
//!
//! Order of the rules for one function:
//!   override -> vendor-gate -> R3 cleanup -> R2 generic -> R1 read-only -> R4 focus -> not-focus.
//! R4 works on evidence from the graph:
//! - a uverbs handler whose command creates or updates a QP/MR/PD/CQ;
//! - a body that calls a focus `ib_device_ops` member (directly or through a header inline);
//! - a vendor function assigned to a focus member in an ops table;
//! - a vendor function that commands the hardware, below a kept vendor function;
//! - a core function that can fail, called by a kept function (up to `helper_depth` below it).
//!
//! Functions not kept whose every caller is on a cleanup (read-only) path inherit R3 (R1).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use analyzer::graph::{CallGraph, EdgeKind, FnId, FnNode};
use analyzer::RetKind;
use serde::Serialize;

use crate::focus_ops::{FocusOps, FocusOpsError};
use crate::rules::Rules;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    /// R1
    ReadOnly,
    /// R2
    Generic,
    /// R3
    Cleanup,
    /// R4
    Focus,
    VendorGate,
    NotFocus,
    Override,
}

impl Rule {
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::ReadOnly => "read-only",
            Rule::Generic => "generic",
            Rule::Cleanup => "cleanup",
            Rule::Focus => "focus",
            Rule::VendorGate => "vendor-gate",
            Rule::NotFocus => "not-focus",
            Rule::Override => "override",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Object {
    QP,
    MR,
    PD,
    CQ,
    #[serde(rename = "other")]
    Other,
}

impl Object {
    pub(crate) fn parse(s: &str) -> Object {
        match s {
            "QP" => Object::QP,
            "MR" => Object::MR,
            "PD" => Object::PD,
            "CQ" => Object::CQ,
            _ => Object::Other,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Object::QP => "QP",
            Object::MR => "MR",
            Object::PD => "PD",
            Object::CQ => "CQ",
            Object::Other => "other",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Layer {
    Core,
    Vendor,
}

/// Why R4 kept a function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FocusKind {
    Handler,
    OpsCaller,
    OpsImpl,
    Hardware,
    Helper,
}

#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    pub id: FnId,
    pub keep: bool,
    pub rule: Rule,
    pub focus: Option<FocusKind>,
    pub object: Object,
    pub layer: Layer,
    pub evidence: String,
    /// Entry ... function, shortest.
    pub path: Vec<FnId>,
}

#[derive(Debug, Clone)]
pub struct Selection {
    pub vendor: String,
    pub entries: Vec<FnId>,
    /// The focus `ib_device_ops` members derived from the tree's struct declaration.
    pub focus_ops: FocusOps,
    /// One per reachable function, sorted by (name, file).
    pub verdicts: Vec<Verdict>,
}

impl Selection {
    pub fn kept(&self) -> impl Iterator<Item = &Verdict> {
        self.verdicts.iter().filter(|v| v.keep)
    }

    pub fn excluded(&self) -> impl Iterator<Item = &Verdict> {
        self.verdicts.iter().filter(|v| !v.keep)
    }

    pub fn verdict_of(&self, id: FnId) -> Option<&Verdict> {
        self.verdicts.iter().find(|v| v.id == id)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SelectError {
    #[error("unknown vendor `{0}`: known vendors are {1}")]
    UnknownVendor(String, String),
    #[error(transparent)]
    FocusOps(#[from] FocusOpsError),
}

fn tokens(name: &str) -> Vec<String> {
    name.split('_')
        .filter(|t| !t.is_empty())
        .map(|t| t.to_ascii_lowercase())
        .collect()
}

struct Ctx<'a> {
    g: &'a CallGraph,
    rules: &'a Rules,
    vendor: &'a str,
    focus: &'a FocusOps,
    reach: BTreeMap<FnId, Option<(FnId, analyzer::graph::CallEdge)>>,
    /// Functions the binary inlined into their callers (from BTF and symbols).
    inlined: &'a dyn Fn(FnId) -> bool,
}

impl Ctx<'_> {
    fn node(&self, id: FnId) -> &FnNode {
        self.g.node(id)
    }

    /// A wrapper does not count as a call level: a header `static inline` (7.x reaches the
    /// pinning function through five `ib_umem_get_*` inlines) or a function the binary
    /// inlined. Depth limits count real calls.
    fn is_wrapper(&self, id: FnId) -> bool {
        let n = self.node(id);
        (n.in_header() && n.is_inline) || (self.inlined)(id)
    }

    /// A call that changes state: an allocation or a state-changing call (pinning pages).
    fn state_changing_call<'n>(&self, n: &'n FnNode) -> Option<&'n String> {
        n.external_calls
            .iter()
            .find(|c| self.rules.is_state_changing_call(c))
    }

    /// The user-memory pinning call a body makes (`pin_user_pages_fast`), if any.
    fn pins_user_memory<'n>(&self, n: &'n FnNode) -> Option<&'n String> {
        n.external_calls
            .iter()
            .find(|c| self.rules.is_pinning_call(c))
    }

    /// A hardware command of the selected vendor called by `id` (defined or external).
    fn hardware_call(&self, id: FnId) -> Option<String> {
        let v = self.rules.vendor(self.vendor)?;
        let n = self.node(id);
        let defined: Vec<&String> = self
            .g
            .callees(id)
            .into_iter()
            .map(|(c, _)| &self.node(c).name)
            .collect();
        n.external_calls
            .iter()
            .chain(defined)
            .find(|c| v.hardware_commands.contains(c))
            .cloned()
    }

    fn layer(&self, id: FnId) -> Layer {
        if self.rules.vendor_of_file(&self.node(id).file).is_some() {
            Layer::Vendor
        } else {
            Layer::Core
        }
    }

    fn object_from_name(&self, name: &str) -> Option<Object> {
        tokens(name)
            .iter()
            .find_map(|t| self.rules.object_tokens.get(t))
            .map(|o| Object::parse(o))
    }

    fn override_of(&self, id: FnId) -> Option<(bool, String)> {
        let n = self.node(id);
        let matches = |o: &crate::rules::Override| {
            o.function == n.name
                && o.module
                    .as_ref()
                    .is_none_or(|m| Some(m) == n.module.as_ref())
        };
        if let Some(o) = self.rules.overrides.include.iter().find(|o| matches(o)) {
            return Some((true, format!("override include: {}", o.reason)));
        }
        if let Some(o) = self.rules.overrides.exclude.iter().find(|o| matches(o)) {
            return Some((false, format!("override exclude: {}", o.reason)));
        }
        None
    }

    fn vendor_gate(&self, id: FnId) -> Option<String> {
        let file = &self.node(id).file;
        match self.rules.vendor_of_file(file) {
            Some(v) if v != self.vendor => Some(format!(
                "{v} driver code ({file}), vendor is {}",
                self.vendor
            )),
            _ => None,
        }
    }

    fn cleanup_name(&self, id: FnId) -> Option<String> {
        let n = self.node(id);
        tokens(&n.name)
            .into_iter()
            .find(|t| self.rules.cleanup_tokens.contains(t))
            .map(|t| format!("name says cleanup/refcount (`{t}`)"))
    }

    fn generic(&self, id: FnId) -> Option<String> {
        let n = self.node(id);
        let r = &self.rules.generic;
        if r.files.iter().any(|f| f == &n.file) {
            return Some(format!("subsystem plumbing in {}", n.file));
        }
        if n.in_header() && !self.effective_focus_ops(id).iter().any(|_| true) {
            return Some(format!("header inline helper in {}", n.file));
        }
        if let Some(p) = r.prefixes.iter().find(|p| n.name.starts_with(p.as_str())) {
            return Some(format!("generic internal (`{p}*`)"));
        }
        if n.ret == RetKind::Ptr
            && n.nparams == 1
            && r.accessor_prefixes
                .iter()
                .any(|p| n.name.starts_with(p.as_str()))
        {
            return Some("container_of accessor".into());
        }
        if let Some(t) = tokens(&n.name).into_iter().find(|t| r.tokens.contains(t)) {
            return Some(format!("generic internal (`{t}`)"));
        }
        None
    }

    /// Evidence that a function changes state within `evidence_depth` calls (wrappers not
    /// counted): an allocation, pinning user pages, a focus ops call. A hardware command
    /// alone is not: firmware has query commands too (`mlx5_ib_query_port` issues one).
    fn mutation_evidence(&self, id: FnId) -> Option<String> {
        let mut queue = VecDeque::from([(id, 0usize)]);
        let mut seen = BTreeSet::from([id]);
        while let Some((f, depth)) = queue.pop_front() {
            let n = self.node(f);
            if let Some(a) = self.state_changing_call(n) {
                return Some(format!("{} changes state (`{a}`)", n.name));
            }
            if let Some(m) = self.effective_focus_ops(f).first() {
                return Some(format!("{} calls ops.{m}", n.name));
            }
            for (c, e) in self.g.callees(f) {
                // Dispatch into a driver through a non-focus member (ops.query_port) is not
                // this function's state change: what the driver allocates to answer a query
                // stays the driver's. Focus members are evidence of their own (above).
                if e.kind == EdgeKind::OpsTable {
                    continue;
                }
                let d = if self.is_wrapper(c) { depth } else { depth + 1 };
                if d <= self.rules.evidence_depth && seen.insert(c) {
                    queue.push_back((c, d));
                }
            }
        }
        None
    }

    fn read_only(&self, id: FnId) -> Option<String> {
        let n = self.node(id);
        let why = if n.ret == RetKind::Bool {
            "predicate (returns bool)".to_string()
        } else {
            let t = tokens(&n.name)
                .into_iter()
                .find(|t| self.rules.read_only_tokens.contains(t))?;
            format!("name says query/lookup (`{t}`)")
        };
        let ev = self.mutation_evidence(id);
        match ev {
            Some(_) => None,
            None => Some(format!("{why}, no allocation or state-changing op below")),
        }
    }

    /// Focus ops members called by the body or by header inlines it calls.
    fn effective_focus_ops(&self, id: FnId) -> Vec<String> {
        let mut out = BTreeSet::new();
        let mut stack = vec![(id, 0usize)];
        let mut seen = BTreeSet::new();
        while let Some((f, d)) = stack.pop() {
            if !seen.insert(f) {
                continue;
            }
            for m in &self.node(f).ops_calls {
                if self.focus.contains(m) {
                    out.insert(m.clone());
                }
            }
            if d < 3 {
                for (c, e) in self.g.callees(f) {
                    if matches!(e.kind, EdgeKind::Inline)
                        || (e.kind == EdgeKind::Macro && self.node(c).in_header())
                    {
                        stack.push((c, d + 1));
                    }
                }
            }
        }
        out.into_iter().collect()
    }

    /// Whether a function can return an error: it returns int or a pointer, and its body
    /// produces an error code or returns what a callee that can fail returned (within `depth`
    /// calls: `ib_modify_qp_with_udata` returns `_ib_modify_qp`'s -EINVAL).
    fn can_fail(&self, id: FnId, depth: usize) -> bool {
        let n = self.node(id);
        if !matches!(n.ret, RetKind::Int | RetKind::Ptr) {
            return false;
        }
        n.returns_error
            || (depth > 0
                && self
                    .g
                    .callees(id)
                    .into_iter()
                    .any(|(c, _)| self.can_fail(c, depth - 1)))
    }

    fn hardware(&self, id: FnId) -> Option<String> {
        let n = self.node(id);
        let v = self.rules.vendor(self.vendor)?;
        if self.layer(id) != Layer::Vendor {
            return None;
        }
        if v.hardware_functions.contains(&n.name) {
            return Some(format!(
                "{} does the hardware's work (listed for {})",
                n.name, self.vendor
            ));
        }
        // The command primitive may live outside the tree (mlx5_core.ko) or in it
        // (bnxt_qplib_rcfw_send_message, irdma_handle_cqp_op).
        self.hardware_call(id)
            .map(|c| format!("commands the hardware: calls {c}"))
    }
}

/// Select the probe set for `vendor` from everything reachable from `entries`, without
/// knowledge of the binaries (only header inlines count as wrappers).
pub fn select(
    g: &CallGraph,
    rules: &Rules,
    vendor: &str,
    entries: &[FnId],
) -> Result<Selection, SelectError> {
    select_with(g, rules, vendor, entries, &|_| false)
}

/// [`select`] where `inlined` says which functions the binary inlined into their callers:
/// those are wrappers that do not count toward the depth limits.
pub fn select_with(
    g: &CallGraph,
    rules: &Rules,
    vendor: &str,
    entries: &[FnId],
    inlined: &dyn Fn(FnId) -> bool,
) -> Result<Selection, SelectError> {
    if rules.vendor(vendor).is_none() {
        return Err(SelectError::UnknownVendor(
            vendor.to_string(),
            rules.vendor_names().join(", "),
        ));
    }
    let focus = FocusOps::derive(g, rules)?;
    let ctx = Ctx {
        g,
        rules,
        vendor,
        focus: &focus,
        reach: g.reach(entries),
        inlined,
    };
    let reachable: Vec<FnId> = ctx.reach.keys().copied().collect();

    // Pass 1: per-function drop rules and seeds.
    let mut decided: BTreeMap<FnId, (bool, Rule, Option<FocusKind>, Object, String)> =
        BTreeMap::new();
    let handlers: BTreeSet<FnId> = g
        .write_commands
        .iter()
        .chain(g.uapi_methods.iter())
        .filter_map(|d| d.handler_id)
        .collect();
    // Core functions reachable without passing through driver code. A core verb reached only
    // from inside a driver (mlx5 allocating its own PD/CQ on first use) is the driver's internal
    // business: its failure surfaces in the driver op, which is probed.
    let core_reach = core_reachable(&ctx, entries);
    let mut seeds: Vec<(FnId, usize)> = Vec::new();
    for &id in &reachable {
        let n = ctx.node(id);
        if let Some((keep, why)) = ctx.override_of(id) {
            let obj = ctx.object_from_name(&n.name).unwrap_or(Object::Other);
            decided.insert(id, (keep, Rule::Override, None, obj, why));
            if keep {
                seeds.push((id, 0));
            }
            continue;
        }
        let drop = ctx
            .vendor_gate(id)
            .map(|e| (Rule::VendorGate, e))
            .or_else(|| ctx.cleanup_name(id).map(|e| (Rule::Cleanup, e)))
            .or_else(|| ctx.generic(id).map(|e| (Rule::Generic, e)))
            .or_else(|| ctx.read_only(id).map(|e| (Rule::ReadOnly, e)));
        if let Some((rule, e)) = drop {
            decided.insert(id, (false, rule, None, Object::Other, e));
            continue;
        }
        let ops = ctx.effective_focus_ops(id);
        let name_obj = ctx.object_from_name(&n.name);
        let toks = tokens(&n.name);
        let updates = toks.iter().find(|t| rules.update_tokens.contains(t));
        let via_driver_only = ctx.layer(id) == Layer::Core && !core_reach.contains(&id);
        let seed = if via_driver_only {
            None
        } else if let Some(m) = ops.first() {
            let obj = focus.object(m).unwrap_or(Object::Other);
            let via = if n.ops_calls.contains(m) {
                String::new()
            } else {
                " through a header inline".into()
            };
            Some((FocusKind::OpsCaller, obj, format!("calls ops.{m}{via}")))
        } else if handlers.contains(&id) && updates.is_some() && name_obj.is_some() {
            let obj = name_obj.unwrap_or(Object::Other);
            Some((
                FocusKind::Handler,
                obj,
                format!(
                    "uverbs handler: {} {}",
                    updates.map_or("", String::as_str),
                    obj.as_str()
                ),
            ))
        } else if ctx.layer(id) == Layer::Vendor {
            // Called through a focus member from the core's own paths, not only from inside
            // a driver.
            g.callers(id)
                .iter()
                .find_map(|(caller, e)| {
                    let m = e.via.as_ref()?;
                    (e.kind == EdgeKind::OpsTable
                        && focus.contains(m)
                        && core_reach.contains(caller))
                    .then(|| m.clone())
                })
                .map(|m| {
                    let obj = focus.object(&m).unwrap_or(Object::Other);
                    (
                        FocusKind::OpsImpl,
                        obj,
                        format!("implements ib_device_ops.{m}"),
                    )
                })
        } else {
            None
        };
        if let Some((kind, obj, e)) = seed {
            decided.insert(id, (true, Rule::Focus, Some(kind), obj, e));
            seeds.push((id, 0));
        }
    }

    // Pass 2: walk down from kept functions: helpers in the core, hardware commands in the
    // vendor layer (through vendor-internal functions, which are not kept themselves).
    // Queue entries: (function, depth below the nearest kept function, object, whether the
    // function is kept or a wrapper reached from a kept one through wrappers only).
    let mut queue: VecDeque<(FnId, usize, Object, bool)> = seeds
        .iter()
        .map(|&(id, d)| (id, d, decided.get(&id).map_or(Object::Other, |v| v.3), true))
        .collect();
    // Vendor-internal walk depth (calls below a kept vendor function).
    const VENDOR_WALK: usize = 8;
    let mut walked: BTreeSet<(FnId, usize, bool)> = BTreeSet::new();
    while let Some((id, depth, obj, anchored)) = queue.pop_front() {
        if !walked.insert((id, depth, anchored)) {
            continue;
        }
        let kept_here = anchored || decided.get(&id).is_some_and(|v| v.0);
        for (c, _) in g.callees(id) {
            if !ctx.reach.contains_key(&c) {
                continue;
            }
            // A header inline wrapper is transparent: walk through it at the same depth,
            // whatever its own verdict (it cannot be probed).
            if ctx.layer(c) == Layer::Core && ctx.node(c).in_header() && ctx.is_wrapper(c) {
                queue.push_back((c, depth, obj, kept_here));
                continue;
            }
            // Already decided: kept ones have their own walk queued, dropped ones stop here.
            if decided.contains_key(&c) {
                continue;
            }
            let cn = ctx.node(c);
            // The object a function works on: its own name says it best (ib_umem_get: MR,
            // bnxt_qplib_create_cq: CQ); otherwise the kept function it serves.
            let obj = ctx.object_from_name(&cn.name).unwrap_or(obj);
            if let Some(e) = ctx.hardware(c) {
                decided.insert(c, (true, Rule::Focus, Some(FocusKind::Hardware), obj, e));
                queue.push_back((c, 0, obj, true));
                continue;
            }
            // A function the binary inlined does not count as a level below.
            let below = if ctx.is_wrapper(c) { depth } else { depth + 1 };
            match ctx.layer(c) {
                Layer::Core => {
                    let can_fail = ctx.can_fail(c, rules.failure_depth);
                    // The function that pins user memory is a failure layer of its own
                    // (EFAULT, ENOMEM on ibv_reg_mr): kept below a kept chain at any depth.
                    let pins = ctx.pins_user_memory(cn);
                    let within = depth < rules.helper_depth || pins.is_some();
                    if kept_here && can_fail && within && !cn.in_header() {
                        let e = match pins {
                            Some(p) if depth >= rules.helper_depth => format!(
                                "pins user memory (`{p}`) below kept {}, returns {}",
                                ctx.node(id).name,
                                cn.ret.as_str()
                            ),
                            _ => format!(
                                "helper of kept {} ({} below it), returns {}",
                                ctx.node(id).name,
                                depth + 1,
                                cn.ret.as_str()
                            ),
                        };
                        decided.insert(c, (true, Rule::Focus, Some(FocusKind::Helper), obj, e));
                        queue.push_back((c, below, obj, true));
                    }
                }
                Layer::Vendor => {
                    if depth < VENDOR_WALK && ctx.layer(id) == Layer::Vendor {
                        // Not kept; walk through it towards the hardware command.
                        queue.push_back((c, depth + 1, obj, false));
                    }
                }
            }
        }
    }

    // Pass 3: paths whose every caller is cleanup (read-only) inherit that rule.
    let order: Vec<FnId> = bfs_order(&ctx);
    for _ in 0..4 {
        let mut changed = false;
        for &id in &order {
            if decided.contains_key(&id) {
                continue;
            }
            let callers: Vec<FnId> = g
                .callers(id)
                .iter()
                .map(|(c, _)| *c)
                .filter(|c| ctx.reach.contains_key(c))
                .collect();
            if callers.is_empty() {
                continue;
            }
            for rule in [Rule::Cleanup, Rule::ReadOnly] {
                if callers
                    .iter()
                    .all(|c| decided.get(c).is_some_and(|v| !v.0 && v.1 == rule))
                {
                    let e = format!(
                        "only reached from {} paths (e.g. {})",
                        rule.as_str(),
                        ctx.node(callers[0]).name
                    );
                    decided.insert(id, (false, rule, None, Object::Other, e));
                    changed = true;
                    break;
                }
            }
        }
        if !changed {
            break;
        }
    }

    let mut verdicts = Vec::with_capacity(reachable.len());
    for &id in &reachable {
        let path: Vec<FnId> = CallGraph::path_in(&ctx.reach, id)
            .map(|p| p.into_iter().map(|(f, _)| f).collect())
            .unwrap_or_default();
        let (keep, rule, focus, object, evidence) = decided.remove(&id).unwrap_or_else(|| {
            let e = not_focus_evidence(&ctx, id);
            (false, Rule::NotFocus, None, Object::Other, e)
        });
        verdicts.push(Verdict {
            id,
            keep,
            rule,
            focus,
            object,
            layer: ctx.layer(id),
            evidence,
            path,
        });
    }
    verdicts.sort_by(|a, b| {
        let (x, y) = (g.node(a.id), g.node(b.id));
        (x.name.as_str(), x.file.as_str()).cmp(&(y.name.as_str(), y.file.as_str()))
    });
    Ok(Selection {
        vendor: vendor.to_string(),
        entries: entries.to_vec(),
        focus_ops: focus,
        verdicts,
    })
}

/// Functions reachable from the entries without expanding any vendor-layer function.
fn core_reachable(ctx: &Ctx, entries: &[FnId]) -> BTreeSet<FnId> {
    let mut seen: BTreeSet<FnId> = entries.iter().copied().collect();
    let mut queue: VecDeque<FnId> = entries.iter().copied().collect();
    while let Some(f) = queue.pop_front() {
        if ctx.layer(f) == Layer::Vendor {
            continue;
        }
        for (c, _) in ctx.g.callees(f) {
            if seen.insert(c) {
                queue.push_back(c);
            }
        }
    }
    seen
}

fn bfs_order(ctx: &Ctx) -> Vec<FnId> {
    let mut v: Vec<(usize, FnId)> = ctx
        .reach
        .keys()
        .map(|&id| {
            let depth = CallGraph::path_in(&ctx.reach, id).map_or(usize::MAX, |p| p.len());
            (depth, id)
        })
        .collect();
    v.sort();
    v.into_iter().map(|(_, id)| id).collect()
}

fn not_focus_evidence(ctx: &Ctx, id: FnId) -> String {
    let n = ctx.node(id);
    match ctx.layer(id) {
        Layer::Vendor => {
            "vendor-internal: neither a focus ops implementation nor a hardware command".into()
        }
        Layer::Core => {
            if n.ret == RetKind::Void {
                "returns void: no error to observe".into()
            } else if !ctx.can_fail(id, ctx.rules.failure_depth) {
                "cannot fail: no -E..., ERR_PTR or PTR_ERR in its body or its callees'".into()
            } else {
                "not on a create/update path of a QP, MR, PD or CQ within the helper depth".into()
            }
        }
    }
}

/// The nearest function to `id` (callers first, then callees, breadth-first up to `max_hops`)
/// for which `attachable` holds: where to probe instead of an inlined or clone-only function.
pub fn nearest_attachable(
    g: &CallGraph,
    id: FnId,
    max_hops: usize,
    attachable: impl Fn(FnId) -> bool,
) -> Option<(FnId, &'static str)> {
    for (dir, label) in [(true, "caller"), (false, "callee")] {
        let mut frontier = vec![id];
        let mut seen = BTreeSet::from([id]);
        for _ in 0..max_hops {
            let mut next = Vec::new();
            for f in frontier {
                let mut around: Vec<FnId> = if dir {
                    g.callers(f).into_iter().map(|(c, _)| c).collect()
                } else {
                    g.callees(f).into_iter().map(|(c, _)| c).collect()
                };
                around.sort_by(|a, b| g.node(*a).name.cmp(&g.node(*b).name));
                for c in around {
                    if seen.insert(c) {
                        if attachable(c) {
                            return Some((c, label));
                        }
                        next.push(c);
                    }
                }
            }
            frontier = next;
        }
    }
    None
}
