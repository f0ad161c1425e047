//! Which functions and edges each picture holds, from the manifest alone plus the graph's
//! edge kinds.
//!
//! Every probe and every excluded function carries its path from a uverbs entry (the
//! analyzer's breadth-first parent chain), so each function has one parent and the union of
//! the paths below one uverbs handler is a tree. One picture per handler: the collapsed view
//! holds the paths down to the probes (the kept paths) and, per function on them, one
//! summary node for its dropped children that lead to no probe; the full view holds every
//! function of the handler, when there are few enough to lay out.

use std::collections::{BTreeMap, BTreeSet};

use analyzer::{CallGraph, EdgeKind};
use manifest::{Attach, Layer, Manifest, Rule};

/// Most functions a full view lays out; a larger handler shows its collapsed view only, with
/// the count (layout time grows fast past a few hundred nodes).
pub(crate) const MAX_FULL: usize = 160;
/// Most functions a collapsed view lays out; past it the handler is listed, not drawn.
pub(crate) const MAX_COLLAPSED: usize = 200;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NodeKind {
    /// the uverbs handler the picture starts from, when it is not a probe itself
    Handler,
    Probe {
        layer: Layer,
        attach: Attach,
        /// the probed caller that stands in for an inlined or untraceable target
        instead: Option<String>,
    },
    Dropped(Rule),
    /// a function on a path that the manifest does not list (outside the set's scope)
    Other,
    /// `count` dropped children of one function, none of them leading to a probe
    Collapsed {
        count: usize,
        by_rule: BTreeMap<Rule, usize>,
    },
}

#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub name: String,
    pub kind: NodeKind,
    /// what hovering shows: module, file:line, rule and its evidence
    pub title: String,
    /// the inlined or untraceable targets whose failures this probe's program sees
    pub stands_for: Vec<String>,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Edge {
    pub from: usize,
    pub to: usize,
    pub kind: EdgeKind,
}

#[derive(Debug, Default)]
pub(crate) struct View {
    pub nodes: Vec<Node>,
    pub edges: Vec<Edge>,
}

/// One uverbs handler's pictures.
pub(crate) struct HandlerView {
    pub handler: String,
    pub probes: usize,
    pub functions: usize,
    pub collapsed: Option<View>,
    pub full: Option<View>,
}

/// What the manifest says of one function.
struct Fact<'a> {
    kind: NodeKind,
    title: String,
    path: &'a [String],
}

fn facts(m: &Manifest) -> BTreeMap<&str, Fact<'_>> {
    let mut out = BTreeMap::new();
    for e in &m.excluded {
        out.insert(
            e.function.as_str(),
            Fact {
                kind: NodeKind::Dropped(e.rule),
                title: format!(
                    "{} ({}) {}:{}\ndropped: {}: {}",
                    e.function, e.module, e.file, e.line, e.rule, e.evidence
                ),
                path: &e.path,
            },
        );
    }
    for p in &m.probes {
        let instead = p.suggest.as_ref().map(|s| s.function.clone());
        let mut title = format!(
            "{} ({}) {}:{}\nprobe {}: {} layer, {}{}: {}\nattach: {}",
            p.function,
            p.module,
            p.file,
            p.line,
            p.id,
            p.layer,
            p.rule,
            p.focus.map(|f| format!(" ({f})")).unwrap_or_default(),
            p.evidence,
            p.attach
        );
        if let Some(i) = &instead {
            title.push_str(&format!(", probed at its caller {i}"));
        }
        out.insert(
            p.function.as_str(),
            Fact {
                kind: NodeKind::Probe {
                    layer: p.layer,
                    attach: p.attach,
                    instead,
                },
                title,
                path: &p.path,
            },
        );
    }
    out
}

/// The kind of the call edge from a caller to a callee, by name.
pub(crate) type EdgeKinds<'g> = dyn Fn(&str, &str) -> EdgeKind + 'g;

/// The kind of `g`'s edge from `caller` to `callee` (a direct call when the graph has none
/// by those names: the path came from it, so that is only a renamed static).
pub(crate) fn graph_edge_kind(g: &CallGraph, caller: &str, callee: &str) -> EdgeKind {
    g.find(caller)
        .iter()
        .flat_map(|&id| g.callees(id))
        .find(|(c, _)| g.node(*c).name == callee)
        .map_or(EdgeKind::Direct, |(_, e)| e.kind)
}

/// The uverbs handler a path goes through: the first function reached by a dispatch edge
/// (a write command or a uapi method: `ib_uverbs_modify_qp`,
/// `ib_uverbs_handler_UVERBS_METHOD_QP_CREATE`), else the one after the entry. `dispatch`
/// caches the graph's answer per edge.
fn handler_of<'p>(
    g: &EdgeKinds<'_>,
    path: &'p [String],
    dispatch: &mut BTreeMap<(&'p str, &'p str), bool>,
) -> Option<&'p str> {
    for w in path.windows(2) {
        let key = (w[0].as_str(), w[1].as_str());
        let is_dispatch = *dispatch.entry(key).or_insert_with(|| {
            matches!(
                g(key.0, key.1),
                EdgeKind::WriteCommand | EdgeKind::UapiMethod
            )
        });
        if is_dispatch {
            return Some(key.1);
        }
    }
    path.get(1).or(path.first()).map(String::as_str)
}

/// The pictures of every handler below which the set has a probe, by handler name.
pub(crate) fn handler_views(m: &Manifest, g: &EdgeKinds<'_>) -> Vec<HandlerView> {
    let facts = facts(m);
    // handler -> every function below it
    let mut groups: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut dispatch = BTreeMap::new();
    for (name, f) in &facts {
        if let Some(h) = handler_of(g, f.path, &mut dispatch) {
            groups.entry(h).or_default().insert(name);
        }
    }
    let mut out = Vec::new();
    for (handler, members) in groups {
        let probes: Vec<&str> = members
            .iter()
            .copied()
            .filter(|n| matches!(facts[n].kind, NodeKind::Probe { .. }))
            .collect();
        if probes.is_empty() {
            continue;
        }
        let tree = Tree::new(handler, &members, &facts);
        let kept: BTreeSet<&str> = probes.iter().flat_map(|p| tree.up_from(p)).collect();
        let collapsed = (kept.len() <= MAX_COLLAPSED).then(|| tree.view(g, &facts, &kept, true));
        let full = (tree.parent.len() < MAX_FULL).then(|| tree.view(g, &facts, &tree.all(), false));
        out.push(HandlerView {
            handler: handler.to_string(),
            probes: probes.len(),
            functions: tree.parent.len() + 1,
            collapsed,
            full,
        });
    }
    out
}

/// Marks each probed caller with the inlined targets it stands in for.
fn mark_stand_ins(v: &mut View) {
    let pairs: Vec<(String, String)> = v
        .nodes
        .iter()
        .filter_map(|n| match &n.kind {
            NodeKind::Probe {
                instead: Some(c), ..
            } => Some((c.clone(), n.name.clone())),
            _ => None,
        })
        .collect();
    for (caller, target) in pairs {
        if let Some(n) = v.nodes.iter_mut().find(|n| n.name == caller) {
            n.title
                .push_str(&format!("\nstands in for the inlined {target}"));
            n.stands_for.push(target);
        }
    }
}

/// The functions below one handler as a tree: each one's parent on its path.
struct Tree<'a> {
    root: &'a str,
    parent: BTreeMap<&'a str, &'a str>,
}

impl<'a> Tree<'a> {
    fn new(
        root: &'a str,
        members: &BTreeSet<&'a str>,
        facts: &'a BTreeMap<&str, Fact<'_>>,
    ) -> Self {
        let mut parent = BTreeMap::new();
        for name in members {
            let path = facts[name].path;
            // from the handler down: each element's parent is the one before it
            let start = path.iter().position(|p| p == root).unwrap_or(0);
            for w in path[start..].windows(2) {
                parent.entry(w[1].as_str()).or_insert(w[0].as_str());
            }
        }
        parent.remove(root);
        Tree { root, parent }
    }

    /// `f` and every function above it up to the handler.
    fn up_from(&self, mut f: &'a str) -> Vec<&'a str> {
        let mut out = vec![f];
        while let Some(&p) = self.parent.get(f) {
            if out.len() > self.parent.len() {
                break; // never loops: one parent each, but a malformed path must not hang
            }
            out.push(p);
            f = p;
        }
        out
    }

    /// How many functions each subtree holds (the function included), children before
    /// parents: one pass per depth, never recursing (a deep path must not overflow the stack).
    fn subtree_sizes(&self) -> BTreeMap<&'a str, usize> {
        let depth = |n: &'a str| self.up_from(n).len();
        let mut by_depth: Vec<(usize, &'a str)> =
            self.parent.keys().map(|&n| (depth(n), n)).collect();
        by_depth.sort_unstable_by(|a, b| b.cmp(a));
        let mut sizes: BTreeMap<&'a str, usize> = BTreeMap::new();
        for (_, n) in by_depth {
            let own = *sizes.entry(n).or_insert(0) + 1;
            sizes.insert(n, own);
            if let Some(&p) = self.parent.get(n) {
                *sizes.entry(p).or_insert(0) += own;
            }
        }
        sizes
    }

    fn all(&self) -> BTreeSet<&'a str> {
        self.parent.keys().copied().chain([self.root]).collect()
    }

    /// The view of `shown` (closed upwards), and with `summarize`, one collapsed node per
    /// shown function for its children not shown.
    fn view(
        &self,
        g: &EdgeKinds<'_>,
        facts: &BTreeMap<&str, Fact<'_>>,
        shown: &BTreeSet<&'a str>,
        summarize: bool,
    ) -> View {
        let mut v = View::default();
        let mut index = BTreeMap::new();
        let mut order: Vec<&str> = vec![self.root];
        order.extend(shown.iter().copied().filter(|&n| n != self.root));
        for name in order {
            let (kind, title) = match facts.get(name) {
                Some(f) => (f.kind.clone(), f.title.clone()),
                None if name == self.root => (NodeKind::Handler, format!("{name}: uverbs handler")),
                None => (
                    NodeKind::Other,
                    format!("{name}: on the path, outside the set's scope"),
                ),
            };
            index.insert(name, v.nodes.len());
            v.nodes.push(Node {
                name: name.to_string(),
                kind,
                title,
                stands_for: Vec::new(),
            });
        }
        mark_stand_ins(&mut v);
        for (&child, &parent) in &self.parent {
            if let (Some(&from), Some(&to)) = (index.get(parent), index.get(child)) {
                v.edges.push(Edge {
                    from,
                    to,
                    kind: g(parent, child),
                });
            }
        }
        if summarize {
            self.summarize(&mut v, &index, facts);
        }
        v
    }

    /// One collapsed node per shown function for its children not shown (and all below).
    fn summarize(
        &self,
        v: &mut View,
        index: &BTreeMap<&'a str, usize>,
        facts: &BTreeMap<&str, Fact<'_>>,
    ) {
        let sizes = self.subtree_sizes();
        let mut hidden: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (&child, &parent) in &self.parent {
            if index.contains_key(parent) && !index.contains_key(child) {
                hidden.entry(parent).or_default().push(child);
            }
        }
        for (parent, children) in hidden {
            let mut by_rule = BTreeMap::new();
            for c in &children {
                if let Some(Fact {
                    kind: NodeKind::Dropped(r),
                    ..
                }) = facts.get(c)
                {
                    *by_rule.entry(*r).or_insert(0) += 1;
                }
            }
            // everything below the hidden children is hidden with them
            let below: usize = children
                .iter()
                .map(|c| sizes.get(c).copied().unwrap_or(1))
                .sum();
            let names: Vec<&str> = children.iter().take(12).copied().collect();
            let rules: Vec<String> = by_rule.iter().map(|(r, n)| format!("{r} {n}")).collect();
            let title = format!(
                "{below} dropped functions below {parent}, none leading to a probe \
                 (its children by rule: {}): {}{}",
                rules.join(", "),
                names.join(", "),
                if children.len() > names.len() {
                    ", ..."
                } else {
                    ""
                }
            );
            let to = v.nodes.len();
            v.nodes.push(Node {
                name: format!("+{below} dropped"),
                kind: NodeKind::Collapsed {
                    count: below,
                    by_rule,
                },
                title,
                stands_for: Vec::new(),
            });
            v.edges.push(Edge {
                from: index[parent],
                to,
                kind: EdgeKind::Direct,
            });
        }
    }
}
