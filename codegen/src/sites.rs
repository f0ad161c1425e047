//! A probe's `error_sites`: the analyzer's error exits of its body (syntax, per function)
//! resolved across the call graph. An exit decided by a callee becomes that callee's own
//! sites when the callee has no program (its failures are only ever seen as this probe's),
//! a `propagated` site naming the probe when it has one, the rules' class for a hardware
//! command, a pinning, a charge or an allocation, and a check of the request when the callee
//! is a predicate (`rdma_is_port_valid`, `capable`) whose answer this body turns into an errno.

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
            via: via.to_vec(),
            callee: None,
            callee_probe: None,
        };
        let class = match &s.shape {
            SiteShape::Request => SiteClass::Request,
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
        out.push(site(class));
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
        out.push(site);
        return;
    }
    let callee = cx.g.callees(cs.f).into_iter().find(|(c, e)| {
        matches!(
            e.kind,
            EdgeKind::Direct | EdgeKind::Macro | EdgeKind::Inline
        ) && cx.g.node(*c).name == cs.name
    });
    let Some((c, _)) = callee else {
        // Outside the analysed tree: a predicate this body turns into its errno, or an error
        // passed on as it came.
        if let Some(e) = cs.errno {
            site.class = if EXHAUSTION.contains(&e.name()) {
                SiteClass::Resources
            } else {
                SiteClass::Request
            };
        }
        out.push(site);
        return;
    };
    if let Some(&p) = cx.probed.get(&c) {
        site.callee_probe = Some(p);
        out.push(site);
        return;
    }
    let inner = &cx.g.node(c).error_sites;
    if inner.is_empty() {
        // A predicate (`rdma_is_port_valid`): the check is this body's.
        if cs.errno.is_some() {
            site.class = SiteClass::Request;
        }
        out.push(site);
        return;
    }
    if cs.via.len() + 1 >= cx.depth || seen.contains(&c) {
        out.push(site);
        return;
    }
    let mut deeper = cs.via.to_vec();
    deeper.push(cs.name.to_string());
    seen.insert(c);
    walk(cx, c, &deeper, cs.errno, seen, out);
    seen.remove(&c);
}
