//! A probe's `error_sites`: the analyzer's error exits of its body (syntax, per function)
//! resolved across the call graph. An exit decided by a callee becomes that callee's own
//! sites when the callee has no program (its failures are only ever seen as this probe's),
//! a `propagated` site naming the probe when it has one, the rules' class for a hardware
//! command, a pinning, a charge or an allocation, and a check of the request when the callee
//! is a predicate (`rdma_is_port_valid`, `capable`) whose answer this body turns into an errno.
//! A lookup by a key the caller passed that found nothing is a check of the request too, with
//! the key (`key: index`): the caller named an entry that is not there.

use std::collections::{BTreeMap, BTreeSet};

use analyzer::{CallGraph, EdgeKind, FnId, SiteShape};
use heuristics::Selection;
use manifest::{Errno, ErrorSite, SiteClass};

/// Most sites listed per probe (the deepest expansions are dropped first: a walk in source
/// order stops here).
const MAX_SITES: usize = 64;

/// Errno constants that say exhaustion, for a predicate outside the tree (`if
/// (!kmalloc_array(...)) return -ENOMEM`).
const EXHAUSTION: [&str; 6] = ["ENOMEM", "ENOSPC", "ENOBUFS", "EMFILE", "ENFILE", "EDQUOT"];

/// What the walk needs besides the function it is in.
pub(crate) struct SiteCtx<'a> {
    pub g: &'a CallGraph,
    pub sel: &'a Selection,
    /// Kept functions with a program, and their probe ids.
    pub probed: &'a BTreeMap<FnId, u32>,
    /// How many unprobed callees down a check is looked for (the rules' `calls_depth`).
    pub depth: usize,
}

/// The error sites of probe `id`, in source order (callees' sites where their call is).
pub(crate) fn error_sites(cx: &SiteCtx, id: FnId) -> Vec<ErrorSite> {
    let mut out = Vec::new();
    let mut seen = BTreeSet::from([id]);
    walk(cx, id, &[], None, &mut seen, &mut out);
    let mut unique = BTreeSet::new();
    out.retain(|s| unique.insert(s.clone()));
    out
}

/// Adds `site` unless it is listed already: the cap counts distinct sites (a callee's sites
/// reached twice would otherwise push a later function's out).
fn push_unique(out: &mut Vec<ErrorSite>, site: ErrorSite) {
    if !out.contains(&site) {
        out.push(site);
    }
}

/// The errno a site's constant names (`None` for none, or a name the table lacks).
fn errno_of(name: Option<&str>) -> Option<Errno> {
    name.and_then(Errno::from_name)
}

fn walk(
    cx: &SiteCtx,
    f: FnId,
    via: &[String],
    outer: Option<Errno>,
    seen: &mut BTreeSet<FnId>,
    out: &mut Vec<ErrorSite>,
) {
    let n = cx.g.node(f);
    for s in &n.error_sites {
        if out.len() >= MAX_SITES {
            return;
        }
        let errno = outer.or_else(|| errno_of(s.errno.as_deref()));
        let site = |class: SiteClass| ErrorSite {
            errno,
            class,
            file: n.file.clone(),
            line: s.line,
            check: s.check.clone(),
            key: match &s.shape {
                SiteShape::Lookup(k) => Some(k.clone()),
                _ => None,
            },
            via: via.to_vec(),
            callee: None,
            callee_probe: None,
        };
        let class = match &s.shape {
            SiteShape::Request | SiteShape::Lookup(_) => SiteClass::Request,
            SiteShape::Resources => SiteClass::Resources,
            SiteShape::State => SiteClass::State,
            SiteShape::Unconditional => SiteClass::Unconditional,
            SiteShape::Callee(c) => {
                let cs = CalleeSite {
                    f,
                    name: c,
                    errno,
                    via,
                };
                callee_site(cx, &cs, site(SiteClass::Propagated), seen, out);
                continue;
            }
        };
        push_unique(out, site(class));
    }
}

/// One exit decided by callee `name` of `f`.
struct CalleeSite<'a> {
    f: FnId,
    name: &'a str,
    /// The constant the exit returns (this site's, or an outer one's).
    errno: Option<Errno>,
    via: &'a [String],
}

/// The functions `f`'s call of `name` reaches: a direct or inline call of a function of that
/// name; else every function a macro of that name calls; else the implementations of an
/// `ib_device_ops` member of that name.
fn callees_named(cx: &SiteCtx, f: FnId, name: &str) -> Vec<FnId> {
    let edges = cx.g.callees(f);
    let pick = |keep: &dyn Fn(FnId, &analyzer::CallEdge) -> bool| -> Vec<FnId> {
        edges
            .iter()
            .filter(|(c, e)| keep(*c, e))
            .map(|(c, _)| *c)
            .collect()
    };
    let via = |e: &analyzer::CallEdge| e.via.as_deref() == Some(name);
    let direct = pick(&|c, e| {
        matches!(e.kind, EdgeKind::Direct | EdgeKind::Inline) && cx.g.node(c).name == name
    });
    if let Some(&d) = direct.first() {
        return vec![d];
    }
    let via_macro = pick(&|_, e| e.kind == EdgeKind::Macro && via(e));
    if !via_macro.is_empty() {
        return via_macro;
    }
    pick(&|_, e| e.kind == EdgeKind::OpsTable && via(e))
}

/// A class for a check this body makes on a predicate's answer: exhaustion when its errno
/// says so, else the request.
fn predicate_class(errno: Option<Errno>) -> SiteClass {
    match errno {
        Some(e) if EXHAUSTION.contains(&e.name()) => SiteClass::Resources,
        Some(_) => SiteClass::Request,
        None => SiteClass::Propagated,
    }
}

fn callee_site(
    cx: &SiteCtx,
    cs: &CalleeSite,
    mut site: ErrorSite,
    seen: &mut BTreeSet<FnId>,
    out: &mut Vec<ErrorSite>,
) {
    site.callee = Some(cs.name.to_string());
    if let Some((class, _)) = cx.sel.callee_classes.get(cs.name) {
        site.class = *class;
        push_unique(out, site);
        return;
    }
    let targets = callees_named(cx, cs.f, cs.name);
    if let Some(p) = targets.iter().find_map(|c| cx.probed.get(c)) {
        site.callee_probe = Some(*p);
        push_unique(out, site);
        return;
    }
    let deeper: Vec<FnId> = targets
        .into_iter()
        .filter(|c| !cx.g.node(*c).error_sites.is_empty())
        .collect();
    if deeper.is_empty() {
        // Outside the analysed tree, or a predicate (`rdma_is_port_valid`): a check this
        // body turns into its errno, or an error passed on as it came.
        site.class = predicate_class(cs.errno);
        push_unique(out, site);
        return;
    }
    if cs.via.len() + 1 >= cx.depth || deeper.iter().any(|c| seen.contains(c)) {
        push_unique(out, site);
        return;
    }
    let mut via = cs.via.to_vec();
    via.push(cs.name.to_string());
    for c in deeper {
        seen.insert(c);
        walk(cx, c, &via, cs.errno, seen, out);
        seen.remove(&c);
    }
}
