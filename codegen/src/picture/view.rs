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
use manifest::{Attach, FocusKind, Layer, Manifest, Rule};

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
    /// a probe of the older set that this one lost (at its old place), with its fate
    Removed,
}

/// What a change picture draws on a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mark {
    /// a probe the older set did not have
    Added,
    /// a probe whose module changed
    Moved,
}

/// What changed between an older set and this one, as the change pictures draw it.
#[derive(Debug, Clone, Default)]
pub struct ChangeMarks {
    /// functions probed now and not before
    pub added: BTreeSet<String>,
    /// probes of the older set this one lost, each at its old place with its fate
    pub removed: Vec<RemovedProbe>,
    /// (old function, new function): a removed probe and the one that succeeds it
    pub renamed: Vec<(String, String)>,
    /// (function, old module, new module)
    pub moved: Vec<(String, String, String)>,
}

#[derive(Debug, Clone)]
pub struct RemovedProbe {
    pub function: String,
    pub module: String,
    /// what became of it (`excluded by generic: ...`, `gone from the source`)
    pub fate: String,
    /// its path in the older set
    pub path: Vec<String>,
}

#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub name: String,
    pub kind: NodeKind,
    /// what hovering shows: module, file:line, rule and its evidence
    pub title: String,
    /// the inlined or untraceable targets whose failures this probe's program sees
    pub stands_for: Vec<String>,
    pub marks: Vec<Mark>,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Edge {
    pub from: usize,
    pub to: usize,
    pub kind: EdgeKind,
    /// from a removed probe to its successor (not a call)
    pub successor: bool,
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

fn facts<'a>(m: &'a Manifest, change: Option<&'a ChangeMarks>) -> BTreeMap<&'a str, Fact<'a>> {
    let mut out = BTreeMap::new();
    for r in change.map_or(&[][..], |c| &c.removed[..]) {
        out.insert(
            r.function.as_str(),
            Fact {
                kind: NodeKind::Removed,
                title: format!("{} ({}): removed: {}", r.function, r.module, r.fate),
                path: &r.path,
            },
        );
    }
    for e in &m.excluded {
        // a removed probe now excluded is drawn as removed (its fate says by which rule)
        if out.contains_key(e.function.as_str()) {
            continue;
        }
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
/// `ib_uverbs_handler_UVERBS_METHOD_QP_CREATE`), else the first probe kept as a handler
/// (without the graph's edge kinds: `diff`), else the one after the entry.
fn handler_of<'p>(
    g: &EdgeKinds<'_>,
    path: &'p [String],
    handlers: &BTreeSet<&str>,
) -> Option<&'p str> {
    for w in path.windows(2) {
        if matches!(
            g(&w[0], &w[1]),
            EdgeKind::WriteCommand | EdgeKind::UapiMethod
        ) {
            return Some(&w[1]);
        }
    }
    path.iter()
        .skip(1)
        .find(|f| handlers.contains(f.as_str()))
        .or(path.get(1))
        .or(path.first())
        .map(String::as_str)
}

/// The pictures of every handler below which the set has a probe, by handler name.
pub(crate) fn handler_views(
    m: &Manifest,
    change: Option<&ChangeMarks>,
    g: &EdgeKinds<'_>,
) -> Vec<HandlerView> {
    let facts = facts(m, change);
    let handlers: BTreeSet<&str> = m
        .probes
        .iter()
        .filter(|p| p.focus == Some(FocusKind::Handler))
        .map(|p| p.function.as_str())
        .collect();
    // handler -> every function below it
    let mut groups: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    // the graph is asked once per edge: the handler search and both views of a handler
    // meet the same edges
    let known = std::cell::RefCell::new(BTreeMap::new());
    let memo = |a: &str, b: &str| {
        let key = (a.to_string(), b.to_string());
        if let Some(&k) = known.borrow().get(&key) {
            return k;
        }
        let k = g(a, b);
        known.borrow_mut().insert(key, k);
        k
    };
    let g: &EdgeKinds<'_> = &memo;
    for (name, f) in &facts {
        if let Some(h) = handler_of(g, f.path, &handlers) {
            groups.entry(h).or_default().insert(name);
        }
    }
    let mut out = Vec::new();
    for (handler, members) in groups {
        let probes: Vec<&str> = members
            .iter()
            .copied()
            .filter(|n| matches!(facts[n].kind, NodeKind::Probe { .. } | NodeKind::Removed))
            .collect();
        if probes.is_empty() {
            continue;
        }
        let tree = Tree::new(handler, &members, &facts);
        let kept: BTreeSet<&str> = probes.iter().flat_map(|p| tree.up_from(p)).collect();
        let draw = |shown: &BTreeSet<&str>, summarize: bool| {
            let mut v = tree.view(g, &facts, shown, summarize);
            if let Some(c) = change {
                mark_changes(&mut v, c);
            }
            v
        };
        let collapsed = (kept.len() <= MAX_COLLAPSED).then(|| draw(&kept, true));
        let full = (tree.parent.len() < MAX_FULL).then(|| draw(&tree.all(), false));
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

/// Marks added and moved probes, and draws each removed probe's successor.
fn mark_changes(v: &mut View, c: &ChangeMarks) {
    let index: BTreeMap<String, usize> = v
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.clone(), i))
        .collect();
    for n in &mut v.nodes {
        if !matches!(n.kind, NodeKind::Probe { .. }) {
            continue;
        }
        if c.added.contains(&n.name) {
            n.marks.push(Mark::Added);
            n.title.push_str("\nadded: not probed in the older set");
        }
        if let Some((_, old, new)) = c.moved.iter().find(|(f, _, _)| *f == n.name) {
            n.marks.push(Mark::Moved);
            n.title.push_str(&format!("\nmoved: {old} -> {new}"));
        }
    }
    for (from, to) in &c.renamed {
        if let (Some(&a), Some(&b)) = (index.get(from), index.get(to)) {
            v.nodes[a].title.push_str(&format!("\nsucceeded by {to}"));
            v.edges.push(Edge {
                from: a,
                to: b,
                kind: EdgeKind::Direct,
                successor: true,
            });
        }
    }
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
                marks: Vec::new(),
            });
        }
        mark_stand_ins(&mut v);
        for (&child, &parent) in &self.parent {
            if let (Some(&from), Some(&to)) = (index.get(parent), index.get(child)) {
                v.edges.push(Edge {
                    from,
                    to,
                    kind: g(parent, child),
                    successor: false,
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
                marks: Vec::new(),
            });
            v.edges.push(Edge {
                from: index[parent],
                to,
                kind: EdgeKind::Direct,
                successor: false,
            });
        }
    }
}
