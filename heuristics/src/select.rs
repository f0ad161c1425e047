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
//!
//! The passes, in order: seed (overrides, drop rules and R4 evidence of each function on its
//! own) -> walk down (helpers and hardware commands below every kept function) -> inherit
//! (R3/R1 from the callers). Every depth limit they use is in `rules.yaml`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use analyzer::RetKind;
use analyzer::{CallGraph, EdgeKind, FnId, FnNode};
use manifest::{FocusKind, Layer, Object, Relation, Rule, SiteClass};
use serde::Serialize;

use crate::focus_ops::{FocusOps, FocusOpsError};
use crate::rules::{object_named, Rules, Vendor};

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
    /// The rules' limits of what the manifest records about the kept functions.
    pub manifest_limits: ManifestLimits,
    /// Reachable functions whose own body calls a user-memory pinning function (the rules'
    /// `state_changing_prefixes`): the graph fact the manifest's `pins_user_memory` is
    /// derived from (codegen adds what a probe reaches through unprobed callees).
    pub pins_user_memory: BTreeSet<FnId>,
    /// The callees error sites of reachable functions name that the rules classify (hardware
    /// commands, pinning, charges, allocations): name -> (class, why).
    pub callee_classes: BTreeMap<String, (SiteClass, &'static str)>,
    /// The data-plane functions (rules `data_plane:`), by class and name.
    pub data_plane: Vec<crate::dataplane::DataPlanePick>,
}

/// How far the manifest looks around a kept function (rules `calls_depth`, `suggest_hops`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ManifestLimits {
    /// A probe's `calls`: probes below it through unprobed functions, this many calls down.
    pub calls_depth: usize,
    /// A probe's `suggest`: the nearest attachable caller or callee, this many calls away.
    pub suggest_hops: usize,
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
    vendor: &'a Vendor,
    focus: &'a FocusOps,
    reach: BTreeMap<FnId, Option<(FnId, analyzer::CallEdge)>>,
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
        let v = self.vendor;
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
            .map(|o| object_named(o))
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
            Some(v) if v != self.vendor.name => Some(format!(
                "{v} driver code ({file}), vendor is {}",
                self.vendor.name
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
            if d < self.rules.inline_ops_depth {
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
        let v = self.vendor;
        if self.layer(id) != Layer::Vendor {
            return None;
        }
        if v.hardware_functions.contains(&n.name) {
            return Some(format!(
                "{} does the hardware's work (listed for {})",
                n.name, self.vendor.name
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
    vendor: &Vendor,
    entries: &[FnId],
) -> Result<Selection, SelectError> {
    select_with(g, rules, vendor, entries, &|_| false)
}

/// [`select`] where `inlined` says which functions the binary inlined into their callers:
/// those are wrappers that do not count toward the depth limits.
///
/// Three passes decide: seed (each function on its own) -> walk down (from every kept
/// function) -> inherit (from the callers); what none of them decides is not focus.
pub fn select_with(
    g: &CallGraph,
    rules: &Rules,
    vendor: &Vendor,
    entries: &[FnId],
    inlined: &dyn Fn(FnId) -> bool,
) -> Result<Selection, SelectError> {
    let focus = FocusOps::derive(g, rules)?;
    let ctx = Ctx {
        g,
        rules,
        vendor,
        focus: &focus,
        reach: g.reach(entries),
        inlined,
    };
    let (mut decided, seeds) = seed(&ctx, entries);
    walk_down(&ctx, &mut decided, &seeds);
    inherit(&ctx, &mut decided);
    let verdicts = verdicts(&ctx, decided);
    let pins_user_memory = ctx
        .reach
        .keys()
        .copied()
        .filter(|&id| ctx.pins_user_memory(ctx.node(id)).is_some())
        .collect();
    let callee_classes = callee_classes(&ctx);
    let data_plane = crate::dataplane::data_plane(g, rules, vendor, &ctx.reach);
    Ok(Selection {
        vendor: vendor.name.clone(),
        entries: entries.to_vec(),
        focus_ops: focus,
        verdicts,
        manifest_limits: ManifestLimits {
            calls_depth: rules.calls_depth,
            suggest_hops: rules.suggest_hops,
        },
        pins_user_memory,
        callee_classes,
        data_plane,
    })
}

/// The rules' class of every callee an error site of a reachable function names.
fn callee_classes(ctx: &Ctx) -> BTreeMap<String, (SiteClass, &'static str)> {
    let mut out = BTreeMap::new();
    for &id in ctx.reach.keys() {
        for s in &ctx.node(id).error_sites {
            if let analyzer::SiteShape::Callee(f) = &s.shape {
                if let Some(c) = ctx.rules.callee_site_class(ctx.vendor, f) {
                    out.insert(f.clone(), c);
                }
            }
        }
    }
    out
}

/// What a pass decided for one function; it becomes the function's [`Verdict`].
#[derive(Debug, Clone)]
struct Decision {
    keep: bool,
    rule: Rule,
    focus: Option<FocusKind>,
    object: Object,
    evidence: String,
}

impl Decision {
    fn dropped(rule: Rule, evidence: String) -> Self {
        Self {
            keep: false,
            rule,
            focus: None,
            object: Object::Other,
            evidence,
        }
    }

    fn focus(focus: FocusKind, object: Object, evidence: String) -> Self {
        Self {
            keep: true,
            rule: Rule::Focus,
            focus: Some(focus),
            object,
            evidence,
        }
    }
}

type Decisions = BTreeMap<FnId, Decision>;

/// What the R4 seeds read from the graph beyond the function itself.
struct SeedEvidence {
    /// Handlers of the write commands and ioctl methods.
    handlers: BTreeSet<FnId>,
    /// Core functions reachable without passing through driver code. A core verb reached only
    /// from inside a driver (mlx5 allocating its own PD/CQ on first use) is the driver's
    /// internal business: its failure surfaces in the driver op, which is probed.
    core_reach: BTreeSet<FnId>,
}

/// Pass 1, seed. Reads every reachable function on its own (name, body, callers) and decides
/// what needs no other decision: an override, else the drop rules in their order (vendor gate,
/// R3 cleanup, R2 generic, R1 read-only), else an R4 seed (ops caller, handler, ops
/// implementation). Produces those decisions and the kept functions, in id order, that the
/// walk starts from.
fn seed(ctx: &Ctx, entries: &[FnId]) -> (Decisions, Vec<FnId>) {
    let evidence = SeedEvidence {
        handlers: ctx
            .g
            .write_commands()
            .iter()
            .chain(ctx.g.uapi_methods().iter())
            .filter_map(|d| d.handler_id)
            .collect(),
        core_reach: core_reachable(ctx, entries),
    };
    let mut decided = Decisions::new();
    let mut seeds = Vec::new();
    for &id in ctx.reach.keys() {
        let decision = ctx
            .override_decision(id)
            .or_else(|| ctx.drop_decision(id))
            .or_else(|| ctx.focus_seed(&evidence, id));
        if let Some(d) = decision {
            if d.keep {
                seeds.push(id);
            }
            decided.insert(id, d);
        }
    }
    (decided, seeds)
}

impl Ctx<'_> {
    fn override_decision(&self, id: FnId) -> Option<Decision> {
        let (keep, evidence) = self.override_of(id)?;
        Some(Decision {
            keep,
            rule: Rule::Override,
            focus: None,
            object: self
                .object_from_name(&self.node(id).name)
                .unwrap_or(Object::Other),
            evidence,
        })
    }

    /// The drop rules, first match wins: vendor gate, R3 cleanup, R2 generic, R1 read-only.
    fn drop_decision(&self, id: FnId) -> Option<Decision> {
        self.vendor_gate(id)
            .map(|e| (Rule::VendorGate, e))
            .or_else(|| self.cleanup_name(id).map(|e| (Rule::Cleanup, e)))
            .or_else(|| self.generic(id).map(|e| (Rule::Generic, e)))
            .or_else(|| self.read_only(id).map(|e| (Rule::ReadOnly, e)))
            .map(|(rule, e)| Decision::dropped(rule, e))
    }

    /// R4 on the function's own evidence, first match wins: it calls a focus ops member, it is
    /// a handler whose name says it creates or updates an object, it implements a focus
    /// member the core calls.
    fn focus_seed(&self, ev: &SeedEvidence, id: FnId) -> Option<Decision> {
        if self.layer(id) == Layer::Core && !ev.core_reach.contains(&id) {
            return None;
        }
        self.ops_caller_seed(id)
            .or_else(|| self.handler_seed(ev, id))
            .or_else(|| self.ops_impl_seed(ev, id))
    }

    fn ops_caller_seed(&self, id: FnId) -> Option<Decision> {
        let ops = self.effective_focus_ops(id);
        let m = ops.first()?;
        let object = self.focus.object(m).unwrap_or(Object::Other);
        let via = if self.node(id).ops_calls.contains(m) {
            ""
        } else {
            " through a header inline"
        };
        let evidence = format!("calls ops.{m}{via}");
        Some(Decision::focus(FocusKind::OpsCaller, object, evidence))
    }

    fn handler_seed(&self, ev: &SeedEvidence, id: FnId) -> Option<Decision> {
        if !ev.handlers.contains(&id) {
            return None;
        }
        let name = &self.node(id).name;
        let updates = tokens(name)
            .into_iter()
            .find(|t| self.rules.update_tokens.contains(t))?;
        let object = self.object_from_name(name)?;
        let evidence = format!("uverbs handler: {updates} {}", object.as_str());
        Some(Decision::focus(FocusKind::Handler, object, evidence))
    }

    /// A vendor function called through a focus member from the core's own paths, not only
    /// from inside a driver.
    fn ops_impl_seed(&self, ev: &SeedEvidence, id: FnId) -> Option<Decision> {
        if self.layer(id) != Layer::Vendor {
            return None;
        }
        let m = self.g.callers(id).iter().find_map(|(caller, e)| {
            let m = e.via.as_ref()?;
            (e.kind == EdgeKind::OpsTable
                && self.focus.contains(m)
                && ev.core_reach.contains(caller))
            .then(|| m.clone())
        })?;
        let object = self.focus.object(&m).unwrap_or(Object::Other);
        let evidence = format!("implements ib_device_ops.{m}");
        Some(Decision::focus(FocusKind::OpsImpl, object, evidence))
    }
}

/// Where the walk down stands: a function below a kept one.
#[derive(Debug, Clone, Copy)]
struct WalkStep {
    id: FnId,
    /// Calls below the nearest kept function (wrappers not counted).
    depth: usize,
    /// The object of the kept function it serves.
    object: Object,
    /// Kept, or a wrapper reached from a kept function through wrappers only.
    anchored: bool,
}

/// Pass 2, walk down. Reads the decisions of the seed pass and walks down from every kept
/// function, breadth-first. In the core, a callee that can fail is kept as a helper within
/// `helper_depth` calls (the call that pins user memory at any depth). In the vendor layer,
/// the walk goes through vendor-internal functions, which are not kept, for up to
/// `vendor_walk_depth` calls, and keeps the function that commands the hardware. Header
/// inline wrappers are walked through at the same depth. Adds those decisions; a function
/// already decided is not decided again.
fn walk_down(ctx: &Ctx, decided: &mut Decisions, seeds: &[FnId]) {
    let mut queue: VecDeque<WalkStep> = seeds
        .iter()
        .map(|&id| WalkStep {
            id,
            depth: 0,
            object: decided.get(&id).map_or(Object::Other, |d| d.object),
            anchored: true,
        })
        .collect();
    let mut walked: BTreeSet<(FnId, usize, bool)> = BTreeSet::new();
    while let Some(step) = queue.pop_front() {
        if !walked.insert((step.id, step.depth, step.anchored)) {
            continue;
        }
        let kept_here = step.anchored || decided.get(&step.id).is_some_and(|d| d.keep);
        for (c, _) in ctx.g.callees(step.id) {
            if let Some(next) = walk_callee(ctx, decided, &step, kept_here, c) {
                queue.push_back(next);
            }
        }
    }
}

/// One callee `c` of a walked function: decide it when it is kept, and say where the walk
/// goes from it, if anywhere.
fn walk_callee(
    ctx: &Ctx,
    decided: &mut Decisions,
    from: &WalkStep,
    kept_here: bool,
    c: FnId,
) -> Option<WalkStep> {
    if !ctx.reach.contains_key(&c) {
        return None;
    }
    // A header inline wrapper is transparent: walk through it at the same depth, whatever its
    // own verdict (it cannot be probed).
    if ctx.layer(c) == Layer::Core && ctx.node(c).in_header() && ctx.is_wrapper(c) {
        return Some(WalkStep {
            id: c,
            anchored: kept_here,
            ..*from
        });
    }
    // Already decided: kept ones have their own walk queued, dropped ones stop here.
    if decided.contains_key(&c) {
        return None;
    }
    // The object a function works on: its own name says it best (ib_umem_get: MR,
    // bnxt_qplib_create_cq: CQ); otherwise the kept function it serves.
    let object = ctx
        .object_from_name(&ctx.node(c).name)
        .unwrap_or(from.object);
    if let Some(e) = ctx.hardware(c) {
        decided.insert(c, Decision::focus(FocusKind::Hardware, object, e));
        return Some(WalkStep {
            id: c,
            depth: 0,
            object,
            anchored: true,
        });
    }
    match ctx.layer(c) {
        Layer::Core => {
            let (e, on_ops_path) = match core_helper_evidence(ctx, from, kept_here, c) {
                Some(e) => (e, false),
                None => (ops_path_evidence(ctx, decided, kept_here, c)?, true),
            };
            decided.insert(c, Decision::focus(FocusKind::Helper, object, e));
            // A function the binary inlined does not count as a level below; one on the path
            // to an ops caller counts as kept on its own (its helpers are one below it).
            let depth = if on_ops_path {
                0
            } else if ctx.is_wrapper(c) {
                from.depth
            } else {
                from.depth + 1
            };
            Some(WalkStep {
                id: c,
                depth,
                object,
                anchored: true,
            })
        }
        // Not kept; walk through it towards the hardware command.
        Layer::Vendor => (from.depth < ctx.rules.vendor_walk_depth
            && ctx.layer(from.id) == Layer::Vendor)
            .then_some(WalkStep {
                id: c,
                depth: from.depth + 1,
                object,
                anchored: false,
            }),
    }
}

/// Why core function `c`, called by the walked function `from`, is kept as a helper: it can
/// fail, it is not a header inline, and it is within `helper_depth` calls below a kept chain
/// (at any depth when it pins user memory, a failure layer of its own: EFAULT, ENOMEM on
/// ibv_reg_mr). `None` when it is not.
fn core_helper_evidence(ctx: &Ctx, from: &WalkStep, kept_here: bool, c: FnId) -> Option<String> {
    let rules = ctx.rules;
    let cn = ctx.node(c);
    let can_fail = ctx.can_fail(c, rules.failure_depth);
    let pins = ctx.pins_user_memory(cn);
    let within = from.depth < rules.helper_depth || pins.is_some();
    // Below a kept vendor function the walk passes vendor-internal functions (not kept): a
    // core call there that pins user memory is still that verb's failure layer (5.10's
    // mlx5_ib_reg_user_mr -> mr_umem_get -> ib_umem_get; 6.1 calls ib_umem_get directly).
    let through_vendor = !kept_here && pins.is_some() && ctx.layer(from.id) == Layer::Vendor;
    if !((kept_here || through_vendor) && can_fail && within && !cn.in_header()) {
        return None;
    }
    let kept = &ctx.node(from.id).name;
    Some(match pins {
        Some(p) if through_vendor => format!(
            "pins user memory (`{p}`) below vendor-internal {kept}, returns {}",
            cn.ret.as_str()
        ),
        Some(p) if from.depth >= rules.helper_depth => format!(
            "pins user memory (`{p}`) below kept {kept}, returns {}",
            cn.ret.as_str()
        ),
        _ => format!(
            "helper of kept {kept} ({} below it), returns {}",
            from.depth + 1,
            cn.ret.as_str()
        ),
    })
}

/// Why core function `c`, below a kept chain but past `helper_depth`, is kept: it can fail and
/// calls a kept ops caller, so it is that verb's path to the driver. With
/// `CONFIG_SECURITY_INFINIBAND=y` (Debian's cloud flavor) `_ib_modify_qp` reaches
/// `ops.modify_qp` through the real `ib_security_modify_qp` of security.c, not the header stub
/// the other flavors inline: its own checks (`rdma_fill_sgid_attr`) stay a layer of the set.
fn ops_path_evidence(ctx: &Ctx, decided: &Decisions, kept_here: bool, c: FnId) -> Option<String> {
    let cn = ctx.node(c);
    if !kept_here || cn.in_header() || !ctx.can_fail(c, ctx.rules.failure_depth) {
        return None;
    }
    let callees = ctx.g.callees(c);
    let (callee, _) = callees.iter().find(|(x, _)| {
        ctx.layer(*x) == Layer::Core
            && decided
                .get(x)
                .is_some_and(|d| d.keep && d.focus == Some(FocusKind::OpsCaller))
    })?;
    Some(format!(
        "calls kept ops caller {} (its path to the driver), returns {}",
        ctx.node(*callee).name,
        cn.ret.as_str()
    ))
}

/// Pass 3, inherit. Reads the decisions of the passes before and, for every undecided
/// function (in breadth-first order from the entries) whose every reachable caller was dropped
/// by R3 cleanup (or every one by R1 read-only), drops it by the same rule. Repeats while a
/// round changed something, at most `inherit_rounds` times.
fn inherit(ctx: &Ctx, decided: &mut Decisions) {
    let order: Vec<FnId> = bfs_order(ctx);
    for _ in 0..ctx.rules.inherit_rounds {
        let mut changed = false;
        for &id in &order {
            if decided.contains_key(&id) {
                continue;
            }
            if let Some(d) = inherited(ctx, decided, id) {
                decided.insert(id, d);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
}

/// The rule every reachable caller of `id` was dropped by, cleanup first.
fn inherited(ctx: &Ctx, decided: &Decisions, id: FnId) -> Option<Decision> {
    let callers: Vec<FnId> = ctx
        .g
        .callers(id)
        .iter()
        .map(|(c, _)| *c)
        .filter(|c| ctx.reach.contains_key(c))
        .collect();
    let first = *callers.first()?;
    let rule = [Rule::Cleanup, Rule::ReadOnly].into_iter().find(|&rule| {
        callers
            .iter()
            .all(|c| decided.get(c).is_some_and(|d| !d.keep && d.rule == rule))
    })?;
    let evidence = format!(
        "only reached from {} paths (e.g. {})",
        rule.as_str(),
        ctx.node(first).name
    );
    Some(Decision::dropped(rule, evidence))
}

/// Every reachable function's verdict (not focus where no pass decided), with its shortest
/// path from an entry, sorted by (name, file).
fn verdicts(ctx: &Ctx, mut decided: Decisions) -> Vec<Verdict> {
    let mut verdicts = Vec::with_capacity(ctx.reach.len());
    for &id in ctx.reach.keys() {
        let path: Vec<FnId> = CallGraph::path_in(&ctx.reach, id)
            .map(|p| p.into_iter().map(|(f, _)| f).collect())
            .unwrap_or_default();
        let d = decided
            .remove(&id)
            .unwrap_or_else(|| Decision::dropped(Rule::NotFocus, not_focus_evidence(ctx, id)));
        verdicts.push(Verdict {
            id,
            keep: d.keep,
            rule: d.rule,
            focus: d.focus,
            object: d.object,
            layer: ctx.layer(id),
            evidence: d.evidence,
            path,
        });
    }
    verdicts.sort_by(|a, b| {
        let (x, y) = (ctx.node(a.id), ctx.node(b.id));
        (x.name.as_str(), x.file.as_str()).cmp(&(y.name.as_str(), y.file.as_str()))
    });
    verdicts
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
) -> Option<(FnId, Relation)> {
    for (dir, label) in [(true, Relation::Caller), (false, Relation::Callee)] {
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
