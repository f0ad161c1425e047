//! The call graph the kernel executes from the uverbs entry points.
//!
//! Resolution follows C and the kernel's dispatch, in this order:
//! - function-like macros expand to what their bodies call (`uobj_get_obj_read` ->
//!   `rdma_lookup_get_uobject`, `mlx5_cmd_exec_inout` -> `mlx5_cmd_exec`); a macro that calls
//!   nothing defined in the tree (`MLX5_SET`) yields no edge;
//! - a name resolves to the static definition in the calling file, else a global definition
//!   (same module first), else a header `static inline`;
//! - `x->ops.member(...)` resolves to every function assigned to `.member` in a
//!   `struct ib_device_ops` initializer, within the vendor scope;
//! - `method_elm->handler(...)` (ib_uverbs_write, the INVOKE_WRITE method) reaches every
//!   `DECLARE_UVERBS_WRITE(_EX)` handler; a call through a local `handler` pointer loaded from
//!   `method_elm->handler` (ib_uverbs_run_method) reaches every `UVERBS_HANDLER()` method.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;
use petgraph::Direction;
use serde::Serialize;

use crate::model::{CallTarget, FileFacts, RetKind};
use crate::source::SourceTree;

pub type FnId = usize;

/// Entry points of the uverbs character device.
pub const DEFAULT_ENTRIES: &[&str] = &["ib_uverbs_ioctl", "ib_uverbs_write"];

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EdgeKind {
    Direct,
    Macro,
    Inline,
    UapiMethod,
    WriteCommand,
    OpsTable,
}

impl EdgeKind {
    pub const ALL: [EdgeKind; 6] = [
        EdgeKind::Direct,
        EdgeKind::Macro,
        EdgeKind::Inline,
        EdgeKind::UapiMethod,
        EdgeKind::WriteCommand,
        EdgeKind::OpsTable,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EdgeKind::Direct => "direct",
            EdgeKind::Macro => "macro",
            EdgeKind::Inline => "inline",
            EdgeKind::UapiMethod => "uapi-method",
            EdgeKind::WriteCommand => "write-command",
            EdgeKind::OpsTable => "ops-table",
        }
    }
}

/// One call site.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CallEdge {
    pub kind: EdgeKind,
    pub file: String,
    pub line: usize,
    /// The macro expanded, the ops member, or the write command / method id.
    pub via: Option<String>,
}

/// A function definition, with the facts the heuristics reason about.
#[derive(Debug, Clone, Serialize)]
pub struct FnNode {
    pub name: String,
    pub file: String,
    pub line: usize,
    /// Kernel module the file is linked into; `None` for header inlines.
    pub module: Option<String>,
    pub is_static: bool,
    pub is_inline: bool,
    pub ret: RetKind,
    pub ret_type: String,
    pub nparams: usize,
    pub params: Vec<crate::model::Param>,
    /// Fields stored through a pointer in the body.
    pub field_writes: Vec<String>,
    /// Called names defined outside the analysed tree (`mlx5_cmd_exec`, `kzalloc`, ...).
    pub external_calls: Vec<String>,
    /// `ib_device_ops` members this body calls.
    pub ops_calls: Vec<String>,
    /// Indirect calls the analysis cannot resolve (`obj->type_class->alloc_begin`).
    pub unresolved_indirect: Vec<String>,
    /// The body produces or propagates an error code.
    pub returns_error: bool,
    /// False for functions of files the config does not build (parsed on request).
    pub built: bool,
    /// NULL is an ordinary return, errors come back as ERR_PTR.
    pub null_ok: bool,
}

impl FnNode {
    pub fn in_header(&self) -> bool {
        self.file.ends_with(".h")
    }
}

/// Which driver directories' functions may appear in the graph.
#[derive(Debug, Clone)]
pub struct VendorScope {
    /// Directory prefixes that hold vendor drivers (`drivers/infiniband/hw/`, ...).
    pub driver_dirs: Vec<String>,
    /// When set, only functions under these prefixes survive among the driver dirs.
    pub allowed: Option<Vec<String>>,
}

impl Default for VendorScope {
    fn default() -> Self {
        Self {
            driver_dirs: vec![
                "drivers/infiniband/hw/".into(),
                "drivers/infiniband/sw/".into(),
                "include/linux/mlx5/".into(),
            ],
            allowed: None,
        }
    }
}

impl VendorScope {
    pub fn only(dirs: &[String]) -> Self {
        Self {
            allowed: Some(dirs.to_vec()),
            ..Self::default()
        }
    }

    pub fn admits(&self, file: &str) -> bool {
        let Some(allowed) = &self.allowed else {
            return true;
        };
        if !self
            .driver_dirs
            .iter()
            .any(|d| file.starts_with(d.as_str()))
        {
            return true;
        }
        allowed.iter().any(|a| file.starts_with(a.as_str()))
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct GraphStats {
    pub files: usize,
    pub functions: usize,
    pub edges: usize,
    pub edges_by_kind: BTreeMap<String, usize>,
    pub parse_errors: usize,
    pub ops_tables: usize,
    pub write_commands: usize,
    pub uapi_methods: usize,
    pub unresolved_indirect_calls: usize,
}

/// A registered `struct ib_device_ops` initializer.
#[derive(Debug, Clone, Serialize)]
pub struct OpsTableInfo {
    pub name: String,
    pub file: String,
    pub line: usize,
    /// member -> function (resolved when defined in the tree)
    pub members: Vec<(String, String, Option<FnId>)>,
}

/// A write command or ioctl method and the handler it dispatches to.
#[derive(Debug, Clone, Serialize)]
pub struct Dispatch {
    pub id: String,
    pub handler: String,
    pub handler_id: Option<FnId>,
    pub file: String,
    pub line: usize,
}

pub struct CallGraph {
    pub nodes: Vec<FnNode>,
    pub graph: DiGraph<FnId, CallEdge>,
    by_name: HashMap<String, Vec<FnId>>,
    pub ops_tables: Vec<OpsTableInfo>,
    pub write_commands: Vec<Dispatch>,
    pub uapi_methods: Vec<Dispatch>,
    pub stats: GraphStats,
    pub scope: VendorScope,
    /// `struct ib_device_ops` as declared in this tree: (header, members). `None` when no
    /// header defines it.
    pub ops_struct: Option<(String, Vec<crate::opsdecl::OpsMemberDecl>)>,
}

struct Resolver<'a> {
    nodes: &'a [FnNode],
    by_name: &'a HashMap<String, Vec<FnId>>,
    /// header macros by name (first by path), and per-file macros.
    header_macros: HashMap<&'a str, &'a [String]>,
    file_macros: HashMap<(&'a str, &'a str), &'a [String]>,
}

impl Resolver<'_> {
    fn function(&self, from_file: &str, from_module: Option<&str>, name: &str) -> Option<FnId> {
        let cands = self.by_name.get(name)?;
        if let Some(&id) = cands.iter().find(|&&id| self.nodes[id].file == from_file) {
            return Some(id);
        }
        let globals = cands
            .iter()
            .copied()
            .filter(|&id| !self.nodes[id].is_static && !self.nodes[id].in_header());
        let mut first_global = None;
        for id in globals {
            if from_module.is_some() && self.nodes[id].module.as_deref() == from_module {
                return Some(id);
            }
            first_global.get_or_insert(id);
        }
        if first_global.is_some() {
            return first_global;
        }
        cands.iter().copied().find(|&id| self.nodes[id].in_header())
    }

    fn macro_calls(&self, from_file: &str, name: &str) -> Option<&[String]> {
        self.file_macros
            .get(&(from_file, name))
            .or_else(|| self.header_macros.get(name))
            .copied()
    }
}

impl CallGraph {
    pub fn build(tree: &SourceTree, scope: &VendorScope) -> Self {
        let mut nodes: Vec<FnNode> = Vec::new();
        // (file index, function index) of each node, for the edge pass.
        let mut origin: Vec<(usize, usize)> = Vec::new();
        for (fi, file) in tree.files.iter().enumerate() {
            if !scope.admits(&file.path) {
                continue;
            }
            let module = tree.build.module_or_unbuilt(&file.path).map(str::to_string);
            let built = file.is_header() || tree.build.module_of(&file.path).is_some();
            for (i, f) in file.functions.iter().enumerate() {
                if f.uverbs_handler_id.is_some() && f.name == "UVERBS_HANDLER" {
                    continue;
                }
                nodes.push(FnNode {
                    name: f.name.clone(),
                    file: file.path.clone(),
                    line: f.line,
                    module: module.clone(),
                    is_static: f.is_static,
                    is_inline: f.is_inline,
                    ret: f.ret,
                    ret_type: f.ret_type.clone(),
                    nparams: f.nparams,
                    params: f.params.clone(),
                    field_writes: f.field_writes.clone(),
                    external_calls: Vec::new(),
                    ops_calls: Vec::new(),
                    unresolved_indirect: Vec::new(),
                    returns_error: f.returns_error,
                    built,
                    null_ok: f.null_ok,
                });
                origin.push((fi, i));
            }
        }
        let mut by_name: HashMap<String, Vec<FnId>> = HashMap::new();
        for (id, n) in nodes.iter().enumerate() {
            by_name.entry(n.name.clone()).or_default().push(id);
        }
        let mut header_macros: HashMap<&str, &[String]> = HashMap::new();
        let mut file_macros: HashMap<(&str, &str), &[String]> = HashMap::new();
        for file in &tree.files {
            for m in &file.macros {
                if file.is_header() {
                    header_macros.entry(m.name.as_str()).or_insert(&m.calls);
                } else {
                    file_macros.insert((file.path.as_str(), m.name.as_str()), &m.calls);
                }
            }
        }
        let resolver = Resolver {
            nodes: &nodes,
            by_name: &by_name,
            header_macros,
            file_macros,
        };

        // Tables: ops initializers, write commands, uapi methods.
        let mut ops_tables = Vec::new();
        let mut ops_by_member: BTreeMap<String, Vec<(FnId, String, usize)>> = BTreeMap::new();
        let mut write_commands = Vec::new();
        let mut uapi_methods = Vec::new();
        for file in &tree.files {
            let module = tree.build.module_or_unbuilt(&file.path);
            // Only files declaring methods need the prefix (the sibling fallback scans nodes).
            let uverbs_name = if file.uapi_methods.is_empty() {
                None
            } else {
                handler_module_name(file, &nodes)
            };
            for t in &file.ops_tables {
                let mut members = Vec::new();
                for (member, func, _line) in &t.members {
                    let id = resolver
                        .function(&file.path, module, func)
                        .filter(|&id| scope.admits(&nodes[id].file));
                    if let Some(id) = id {
                        ops_by_member.entry(member.clone()).or_default().push((
                            id,
                            file.path.clone(),
                            t.line,
                        ));
                    }
                    members.push((member.clone(), func.clone(), id));
                }
                if scope.admits(&file.path) {
                    ops_tables.push(OpsTableInfo {
                        name: t.name.clone(),
                        file: file.path.clone(),
                        line: t.line,
                        members,
                    });
                }
            }
            for w in &file.write_commands {
                write_commands.push(Dispatch {
                    id: w.command.clone(),
                    handler: w.handler.clone(),
                    handler_id: resolver.function(&file.path, module, &w.handler),
                    file: file.path.clone(),
                    line: w.line,
                });
            }
            if !scope.admits(&file.path) {
                continue;
            }
            for m in &file.uapi_methods {
                let handler = if m.destroy {
                    "uverbs_destroy_def_handler".to_string()
                } else {
                    match &uverbs_name {
                        Some(prefix) => format!("{prefix}_handler_{}", m.id),
                        None => format!("UVERBS_HANDLER({})", m.id),
                    }
                };
                uapi_methods.push(Dispatch {
                    id: m.id.clone(),
                    handler_id: resolver.function(&file.path, module, &handler),
                    handler,
                    file: file.path.clone(),
                    line: m.line,
                });
            }
        }

        // Edges.
        let mut graph: DiGraph<FnId, CallEdge> =
            DiGraph::with_capacity(nodes.len(), nodes.len() * 4);
        for id in 0..nodes.len() {
            graph.add_node(id);
        }
        let mut extra: Vec<(Vec<String>, Vec<String>, Vec<String>)> =
            vec![Default::default(); nodes.len()];
        for (caller, &(fi, i)) in origin.iter().enumerate() {
            let file = &tree.files[fi];
            let func = &file.functions[i];
            let module = nodes[caller].module.as_deref();
            let mut seen: BTreeSet<FnId> = BTreeSet::new();
            let mut add = |graph: &mut DiGraph<FnId, CallEdge>, to: FnId, edge: CallEdge| {
                if to != caller && seen.insert(to) {
                    graph.add_edge(NodeIndex::new(caller), NodeIndex::new(to), edge);
                }
            };
            let (externals, ops_calls, unresolved) = &mut extra[caller];
            for call in &func.calls {
                match &call.target {
                    CallTarget::Named(name) => {
                        if let Some(body) = resolver.macro_calls(&file.path, name) {
                            let mut targets = Vec::new();
                            let mut ext = Vec::new();
                            expand_macro(
                                &resolver,
                                &file.path,
                                module,
                                body,
                                0,
                                &mut BTreeSet::new(),
                                &mut targets,
                                &mut ext,
                            );
                            for t in targets {
                                if scope.admits(&nodes[t].file) {
                                    add(
                                        &mut graph,
                                        t,
                                        CallEdge {
                                            kind: EdgeKind::Macro,
                                            file: file.path.clone(),
                                            line: call.line,
                                            via: Some(name.clone()),
                                        },
                                    );
                                }
                            }
                            externals.extend(ext);
                        } else if let Some(t) = resolver.function(&file.path, module, name) {
                            let kind = if nodes[t].in_header() {
                                EdgeKind::Inline
                            } else {
                                EdgeKind::Direct
                            };
                            if scope.admits(&nodes[t].file) {
                                add(
                                    &mut graph,
                                    t,
                                    CallEdge {
                                        kind,
                                        file: file.path.clone(),
                                        line: call.line,
                                        via: None,
                                    },
                                );
                            }
                        } else {
                            externals.push(name.clone());
                        }
                    }
                    CallTarget::Ops(member) => {
                        ops_calls.push(member.clone());
                        for (t, _, _) in ops_by_member.get(member).into_iter().flatten() {
                            add(
                                &mut graph,
                                *t,
                                CallEdge {
                                    kind: EdgeKind::OpsTable,
                                    file: file.path.clone(),
                                    line: call.line,
                                    via: Some(member.clone()),
                                },
                            );
                        }
                    }
                    CallTarget::Field { base, field }
                        if field == "handler" && base.ends_with("method_elm") =>
                    {
                        for w in &write_commands {
                            if let Some(t) = w.handler_id {
                                add(
                                    &mut graph,
                                    t,
                                    CallEdge {
                                        kind: EdgeKind::WriteCommand,
                                        file: file.path.clone(),
                                        line: call.line,
                                        via: Some(w.id.clone()),
                                    },
                                );
                            }
                        }
                    }
                    CallTarget::LocalPointer(_) if func.reads_method_handler => {
                        for m in &uapi_methods {
                            if let Some(t) = m.handler_id {
                                add(
                                    &mut graph,
                                    t,
                                    CallEdge {
                                        kind: EdgeKind::UapiMethod,
                                        file: file.path.clone(),
                                        line: call.line,
                                        via: Some(m.id.clone()),
                                    },
                                );
                            }
                        }
                    }
                    CallTarget::Field { base, field } => {
                        unresolved.push(format!("{base}->{field}"));
                    }
                    CallTarget::LocalPointer(var) => unresolved.push(var.clone()),
                }
            }
        }
        for (id, (ext, ops, unres)) in extra.into_iter().enumerate() {
            let n = &mut nodes[id];
            n.external_calls = dedup(ext);
            n.ops_calls = dedup(ops);
            n.unresolved_indirect = dedup(unres);
        }

        let mut stats = GraphStats {
            files: tree.files.iter().filter(|f| scope.admits(&f.path)).count(),
            functions: nodes.len(),
            edges: graph.edge_count(),
            parse_errors: tree.parse_errors(),
            ops_tables: ops_tables.len(),
            write_commands: write_commands.len(),
            uapi_methods: uapi_methods.len(),
            unresolved_indirect_calls: nodes.iter().map(|n| n.unresolved_indirect.len()).sum(),
            ..GraphStats::default()
        };
        for k in EdgeKind::ALL {
            stats.edges_by_kind.insert(k.as_str().to_string(), 0);
        }
        for e in graph.edge_weights() {
            *stats
                .edges_by_kind
                .entry(e.kind.as_str().to_string())
                .or_default() += 1;
        }
        // The first header (in path order) that defines the struct: include/rdma/ib_verbs.h.
        let ops_struct = tree
            .files
            .iter()
            .find_map(|f| Some((f.path.clone(), f.ops_struct.clone()?)));
        Self {
            nodes,
            graph,
            by_name,
            ops_tables,
            write_commands,
            uapi_methods,
            stats,
            scope: scope.clone(),
            ops_struct,
        }
    }

    /// All definitions of a name (several for static clashes such as `create_qp`).
    pub fn find(&self, name: &str) -> &[FnId] {
        self.by_name.get(name).map_or(&[], Vec::as_slice)
    }

    pub fn node(&self, id: FnId) -> &FnNode {
        &self.nodes[id]
    }

    /// Callees with their call sites, in call-site order.
    pub fn callees(&self, id: FnId) -> Vec<(FnId, &CallEdge)> {
        let mut v: Vec<(FnId, &CallEdge)> = self
            .graph
            .edges_directed(NodeIndex::new(id), Direction::Outgoing)
            .map(|e| (e.target().index(), e.weight()))
            .collect();
        v.sort_by_key(|(t, e)| (e.line, *t));
        v
    }

    pub fn callers(&self, id: FnId) -> Vec<(FnId, &CallEdge)> {
        let mut v: Vec<(FnId, &CallEdge)> = self
            .graph
            .edges_directed(NodeIndex::new(id), Direction::Incoming)
            .map(|e| (e.source().index(), e.weight()))
            .collect();
        v.sort_by_key(|(s, e)| (*s, e.line));
        v
    }

    /// Breadth-first search from `entries`: for every reachable function, the edge it was
    /// first reached by (`None` for the entries). BFS gives shortest paths; ties are broken by
    /// call-site order, so the result is deterministic.
    pub fn reach(&self, entries: &[FnId]) -> BTreeMap<FnId, Option<(FnId, CallEdge)>> {
        let mut parent: BTreeMap<FnId, Option<(FnId, CallEdge)>> = BTreeMap::new();
        let mut queue = VecDeque::new();
        for &e in entries {
            if parent.insert(e, None).is_none() {
                queue.push_back(e);
            }
        }
        while let Some(n) = queue.pop_front() {
            for (t, edge) in self.callees(n) {
                if let std::collections::btree_map::Entry::Vacant(slot) = parent.entry(t) {
                    slot.insert(Some((n, edge.clone())));
                    queue.push_back(t);
                }
            }
        }
        parent
    }

    /// Path from an entry to `to` in a BFS tree from [`CallGraph::reach`]: (function, edge
    /// that reached it).
    pub fn path_in(
        tree: &BTreeMap<FnId, Option<(FnId, CallEdge)>>,
        to: FnId,
    ) -> Option<Vec<(FnId, Option<CallEdge>)>> {
        let mut out = Vec::new();
        let mut cur = to;
        loop {
            let p = tree.get(&cur)?;
            match p {
                None => {
                    out.push((cur, None));
                    break;
                }
                Some((prev, edge)) => {
                    out.push((cur, Some(edge.clone())));
                    cur = *prev;
                }
            }
            if out.len() > tree.len() {
                return None;
            }
        }
        out.reverse();
        Some(out)
    }

    /// Entry ids for names; unknown names are returned as errors.
    pub fn entries(&self, names: &[String]) -> Result<Vec<FnId>, String> {
        let mut ids = Vec::new();
        for n in names {
            let found = self.find(n);
            if found.is_empty() {
                return Err(n.clone());
            }
            ids.extend_from_slice(found);
        }
        Ok(ids)
    }
}

fn handler_module_name(file: &FileFacts, nodes: &[FnNode]) -> Option<String> {
    // The handler names were already resolved by the source loader; recover the prefix from
    // any handler defined in this file, else from the file's own define.
    file.functions
        .iter()
        .find_map(|f| {
            let id = f.uverbs_handler_id.as_ref()?;
            f.name
                .strip_suffix(&format!("_handler_{id}"))
                .map(str::to_string)
        })
        .or_else(|| file.uverbs_module_name.clone())
        .or_else(|| {
            // Method declared in a file without handlers of its own (rare): fall back to a
            // sibling file's handler prefix in the same directory.
            let dir = file.path.rsplit_once('/')?.0;
            nodes.iter().find_map(|n| {
                if n.file.rsplit_once('/')?.0 != dir {
                    return None;
                }
                n.name.split_once("_handler_").map(|(p, _)| p.to_string())
            })
        })
}

#[allow(clippy::too_many_arguments)]
fn expand_macro(
    r: &Resolver,
    file: &str,
    module: Option<&str>,
    body_calls: &[String],
    depth: usize,
    visiting: &mut BTreeSet<String>,
    out: &mut Vec<FnId>,
    externals: &mut Vec<String>,
) {
    if depth > 8 {
        return;
    }
    for c in body_calls {
        if !visiting.insert(c.clone()) {
            continue;
        }
        if let Some(inner) = r.macro_calls(file, c) {
            expand_macro(r, file, module, inner, depth + 1, visiting, out, externals);
        } else if let Some(t) = r.function(file, module, c) {
            out.push(t);
        } else if looks_like_function(c) {
            externals.push(c.clone());
        }
    }
}

fn looks_like_function(name: &str) -> bool {
    const KEYWORDS: &[&str] = &[
        "sizeof",
        "typeof",
        "__typeof__",
        "if",
        "while",
        "for",
        "switch",
        "return",
        "do",
        "__builtin_constant_p",
        "__builtin_expect",
        "offsetof",
        "_Generic",
        "__same_type",
    ];
    name.chars().any(|c| c.is_ascii_lowercase()) && !KEYWORDS.contains(&name)
}

fn dedup(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v.dedup();
    v
}
