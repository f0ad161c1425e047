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

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use rayon::prelude::*;
// The name indexes are hashed per call site (about 100,000 lookups per build): Fx, not SipHash.
// Nothing iterates them, so their order never reaches an output.
use rustc_hash::FxHashMap as HashMap;

use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;
use petgraph::Direction;
use serde::Serialize;

use crate::model::{CallSite, CallTarget, FileFacts, FunctionDef, RetKind};
use crate::opsdecl::OpsMemberDecl;
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
    /// Each way the body returns an error (syntax; callees not yet resolved).
    pub error_sites: Vec<crate::model::ErrorSite>,
    /// False for functions of files the config does not build (parsed on request).
    pub built: bool,
    /// NULL is an ordinary return, errors come back as ERR_PTR.
    pub null_ok: bool,
    /// Names the body stores into fields or passes to calls (callbacks, constants).
    pub value_refs: Vec<crate::model::ValueRef>,
}

impl FnNode {
    pub fn in_header(&self) -> bool {
        self.file.ends_with(".h")
    }
}

/// Which driver directories' functions may appear in the graph. The default admits every
/// function; [`VendorScope::only`] keeps one vendor's part of the driver directories.
#[derive(Debug, Clone, Default)]
pub struct VendorScope {
    /// Directory prefixes that hold vendor drivers (`drivers/infiniband/hw/`,
    /// `include/linux/mlx5/`, ...), named by the caller's rules.
    pub driver_dirs: Vec<String>,
    /// When set, only functions under these prefixes survive among the driver dirs.
    pub allowed: Option<Vec<String>>,
}

impl VendorScope {
    /// Of the functions under `driver_dirs`, only those under `allowed`; every other function.
    pub fn only(driver_dirs: &[String], allowed: &[String]) -> Self {
        Self {
            driver_dirs: driver_dirs.to_vec(),
            allowed: Some(allowed.to_vec()),
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

/// The call graph of one source tree within one vendor scope, built by [`CallGraph::build`]
/// and read through its methods.
pub struct CallGraph {
    nodes: Vec<FnNode>,
    graph: DiGraph<FnId, CallEdge>,
    by_name: HashMap<String, Vec<FnId>>,
    ops_tables: Vec<OpsTableInfo>,
    write_commands: Vec<Dispatch>,
    uapi_methods: Vec<Dispatch>,
    stats: GraphStats,
    scope: VendorScope,
    /// `struct ib_device_ops` as declared in this tree: (header, members). `None` when no
    /// header defines it.
    ops_struct: Option<(String, Vec<OpsMemberDecl>)>,
}

/// Macro expansion deeper than this is cut. Kernel macros nest a few levels; names already
/// being expanded stop cycles, so the bound only guards against pathological chains.
const MACRO_EXPANSION_DEPTH: usize = 8;

struct Resolver<'a> {
    nodes: &'a [FnNode],
    by_name: &'a HashMap<String, Vec<FnId>>,
    /// header macros by name (first by path), and per-file macros.
    header_macros: HashMap<&'a str, &'a [String]>,
    file_macros: HashMap<(&'a str, &'a str), &'a [String]>,
}

/// What one function-like macro expands to.
#[derive(Default)]
struct MacroExpansion<'a> {
    /// Names already expanded (stops cycles and repeats).
    visiting: BTreeSet<&'a str>,
    /// Functions defined in the tree that the expansion calls.
    targets: Vec<FnId>,
    /// Called names defined nowhere in the tree.
    externals: Vec<String>,
}

impl<'a> Resolver<'a> {
    /// Index the macros of every file: a header macro is found by name from any file (the
    /// first header in path order wins), a `.c` macro only from its own file.
    fn new(
        tree: &'a SourceTree,
        nodes: &'a [FnNode],
        by_name: &'a HashMap<String, Vec<FnId>>,
    ) -> Self {
        let mut header_macros: HashMap<&str, &[String]> = HashMap::default();
        let mut file_macros: HashMap<(&str, &str), &[String]> = HashMap::default();
        for file in &tree.files {
            for m in &file.macros {
                if file.is_header() {
                    header_macros.entry(m.name.as_str()).or_insert(&m.calls);
                } else {
                    file_macros.insert((file.path.as_str(), m.name.as_str()), &m.calls);
                }
            }
        }
        Self {
            nodes,
            by_name,
            header_macros,
            file_macros,
        }
    }
}

impl<'a> Resolver<'a> {
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

    fn macro_calls(&self, from_file: &str, name: &str) -> Option<&'a [String]> {
        self.file_macros
            .get(&(from_file, name))
            .or_else(|| self.header_macros.get(name))
            .copied()
    }

    /// What a macro body's calls reach, expanding the macros among them.
    fn expand_macro(
        &self,
        file: &str,
        module: Option<&str>,
        body: &'a [String],
    ) -> MacroExpansion<'a> {
        let mut out = MacroExpansion::default();
        self.expand_into(file, module, body, 0, &mut out);
        out
    }

    fn expand_into(
        &self,
        file: &str,
        module: Option<&str>,
        body_calls: &'a [String],
        depth: usize,
        out: &mut MacroExpansion<'a>,
    ) {
        if depth > MACRO_EXPANSION_DEPTH {
            return;
        }
        for c in body_calls {
            if !out.visiting.insert(c.as_str()) {
                continue;
            }
            if let Some(inner) = self.macro_calls(file, c) {
                self.expand_into(file, module, inner, depth + 1, out);
            } else if let Some(t) = self.function(file, module, c) {
                out.targets.push(t);
            } else if looks_like_function(c) {
                out.externals.push(c.clone());
            }
        }
    }
}

/// Pass 1 output: every function definition in scope, where each came from, and the index by
/// name.
struct NodePass {
    nodes: Vec<FnNode>,
    /// (file index, function index in the file) of each node, for the edge pass.
    origin: Vec<(usize, usize)>,
    by_name: HashMap<String, Vec<FnId>>,
}

/// Pass 1, nodes. Reads the function definitions of the files `scope` admits and produces one
/// [`FnNode`] per definition (its call facts are left empty for the edge pass), in file and
/// definition order. A `UVERBS_HANDLER(X)` definition whose name the loader could not resolve
/// is left out: it has no callable name.
fn collect_nodes(tree: &SourceTree, scope: &VendorScope) -> NodePass {
    // Per file in parallel (the nodes copy every definition's facts), joined in file order.
    let per_file: Vec<Vec<(FnNode, (usize, usize))>> = tree
        .files
        .par_iter()
        .enumerate()
        .filter(|(_, file)| scope.admits(&file.path))
        .map(|(fi, file)| {
            let module = tree.build.module_or_unbuilt(&file.path).map(str::to_string);
            let built = file.is_header() || tree.build.module_of(&file.path).is_some();
            file.functions
                .iter()
                .enumerate()
                .filter(|(_, f)| !(f.uverbs_handler_id.is_some() && f.name == "UVERBS_HANDLER"))
                .map(|(i, f)| (fn_node(&file.path, module.clone(), built, f), (fi, i)))
                .collect()
        })
        .collect();
    let (nodes, origin): (Vec<FnNode>, Vec<(usize, usize)>) =
        per_file.into_iter().flatten().unzip();
    let mut by_name: HashMap<String, Vec<FnId>> = HashMap::default();
    for (id, n) in nodes.iter().enumerate() {
        by_name.entry(n.name.clone()).or_default().push(id);
    }
    NodePass {
        nodes,
        origin,
        by_name,
    }
}

fn fn_node(file: &str, module: Option<String>, built: bool, f: &FunctionDef) -> FnNode {
    FnNode {
        name: f.name.clone(),
        file: file.to_string(),
        line: f.line,
        module,
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
        error_sites: f.error_sites.clone(),
        built,
        null_ok: f.null_ok,
        value_refs: f.value_refs.clone(),
    }
}

/// Pass 2 output: the tables the kernel dispatches through.
#[derive(Default)]
struct DispatchTables {
    ops_tables: Vec<OpsTableInfo>,
    /// ops member -> the in-scope functions assigned to it, in file order.
    ops_by_member: BTreeMap<String, Vec<FnId>>,
    write_commands: Vec<Dispatch>,
    uapi_methods: Vec<Dispatch>,
}

/// Pass 2, dispatch tables. Reads every file's `struct ib_device_ops` initializers,
/// `DECLARE_UVERBS_WRITE` commands and ioctl method declarations, and resolves each function
/// they name against the nodes of pass 1. Produces the tables the edge pass dispatches
/// through: write commands from every file (the core declares them); ops tables and methods
/// from the files in scope, ops members only when the function assigned is in scope.
fn collect_dispatch_tables(
    tree: &SourceTree,
    scope: &VendorScope,
    resolver: &Resolver,
) -> DispatchTables {
    let mut tables = DispatchTables::default();
    for file in &tree.files {
        let module = tree.build.module_or_unbuilt(&file.path);
        tables.add_ops_tables(file, module, scope, resolver);
        tables.add_write_commands(file, module, resolver);
        if scope.admits(&file.path) {
            tables.add_uapi_methods(file, module, resolver);
        }
    }
    tables
}

impl DispatchTables {
    fn add_ops_tables(
        &mut self,
        file: &FileFacts,
        module: Option<&str>,
        scope: &VendorScope,
        resolver: &Resolver,
    ) {
        for t in &file.ops_tables {
            let mut members = Vec::new();
            for (member, func, _line) in &t.members {
                let id = resolver
                    .function(&file.path, module, func)
                    .filter(|&id| scope.admits(&resolver.nodes[id].file));
                if let Some(id) = id {
                    self.ops_by_member
                        .entry(member.clone())
                        .or_default()
                        .push(id);
                }
                members.push((member.clone(), func.clone(), id));
            }
            if scope.admits(&file.path) {
                self.ops_tables.push(OpsTableInfo {
                    name: t.name.clone(),
                    file: file.path.clone(),
                    line: t.line,
                    members,
                });
            }
        }
    }

    fn add_write_commands(&mut self, file: &FileFacts, module: Option<&str>, resolver: &Resolver) {
        for w in &file.write_commands {
            self.write_commands.push(Dispatch {
                id: w.command.clone(),
                handler: w.handler.clone(),
                handler_id: resolver.function(&file.path, module, &w.handler),
                file: file.path.clone(),
                line: w.line,
            });
        }
    }

    /// Methods name their handler by the `UVERBS_HANDLER(id)` convention, or the shared
    /// destroy handler.
    fn add_uapi_methods(&mut self, file: &FileFacts, module: Option<&str>, resolver: &Resolver) {
        // Only files declaring methods need the prefix (the sibling fallback scans nodes).
        let uverbs_name = if file.uapi_methods.is_empty() {
            None
        } else {
            handler_module_name(file, resolver.nodes)
        };
        for m in &file.uapi_methods {
            let handler = if m.destroy {
                "uverbs_destroy_def_handler".to_string()
            } else {
                match &uverbs_name {
                    Some(prefix) => format!("{prefix}_handler_{}", m.id),
                    None => format!("UVERBS_HANDLER({})", m.id),
                }
            };
            self.uapi_methods.push(Dispatch {
                id: m.id.clone(),
                handler_id: resolver.function(&file.path, module, &handler),
                handler,
                file: file.path.clone(),
                line: m.line,
            });
        }
    }
}

/// What a body calls that is not an edge of the graph.
#[derive(Default)]
struct CallFacts {
    external_calls: Vec<String>,
    ops_calls: Vec<String>,
    unresolved_indirect: Vec<String>,
}

/// One caller's outgoing edges, in call-site order: the first edge to a callee wins.
struct CallerEdges<'g> {
    caller: FnId,
    file: &'g str,
    seen: BTreeSet<FnId>,
    edges: Vec<(FnId, CallEdge)>,
    facts: CallFacts,
}

impl CallerEdges<'_> {
    fn add(&mut self, to: FnId, kind: EdgeKind, line: usize, via: Option<String>) {
        if to != self.caller && self.seen.insert(to) {
            let edge = CallEdge {
                kind,
                file: self.file.to_string(),
                line,
                via,
            };
            self.edges.push((to, edge));
        }
    }

    /// An edge to every handler of a dispatch table, labelled with its command or method id.
    fn dispatch(&mut self, table: &[Dispatch], kind: EdgeKind, line: usize) {
        for d in table {
            if let Some(t) = d.handler_id {
                self.add(t, kind, line, Some(d.id.clone()));
            }
        }
    }
}

/// Pass 3 context: the resolution of call sites to callees.
struct EdgePass<'a> {
    scope: &'a VendorScope,
    resolver: &'a Resolver<'a>,
    tables: &'a DispatchTables,
}

/// Pass 3, edges. Reads every node's call sites (from its file's facts) and resolves each
/// through macros, names, `ib_device_ops` members and the uverbs dispatch tables of pass 2.
/// Produces the graph (one edge per caller and callee: the first call site) and, per node,
/// the calls that are not edges. Callers are resolved in parallel (they only read the passes
/// before) and their edges added in caller order, so the graph is the same on any thread count.
fn resolve_edges(
    tree: &SourceTree,
    origin: &[(usize, usize)],
    pass: &EdgePass,
) -> (DiGraph<FnId, CallEdge>, Vec<CallFacts>) {
    let callers: Vec<CallerEdges> = origin
        .par_iter()
        .enumerate()
        .map(|(caller, &(fi, i))| {
            let file = &tree.files[fi];
            let func = &file.functions[i];
            let module = pass.resolver.nodes[caller].module.as_deref();
            let mut edges = CallerEdges {
                caller,
                file: &file.path,
                seen: BTreeSet::new(),
                edges: Vec::new(),
                facts: CallFacts::default(),
            };
            for call in &func.calls {
                pass.call_site(&mut edges, module, func, call);
            }
            edges
        })
        .collect();
    let n = origin.len();
    let mut graph: DiGraph<FnId, CallEdge> = DiGraph::with_capacity(n, n * 4);
    for id in 0..n {
        graph.add_node(id);
    }
    let mut facts = Vec::with_capacity(n);
    for c in callers {
        for (to, edge) in c.edges {
            graph.add_edge(NodeIndex::new(c.caller), NodeIndex::new(to), edge);
        }
        facts.push(c.facts);
    }
    (graph, facts)
}

impl EdgePass<'_> {
    fn call_site(
        &self,
        edges: &mut CallerEdges,
        module: Option<&str>,
        func: &FunctionDef,
        call: &CallSite,
    ) {
        let line = call.line;
        match &call.target {
            CallTarget::Named(name) => self.named_call(edges, module, name, line),
            CallTarget::Ops(member) => {
                edges.facts.ops_calls.push(member.clone());
                for &t in self.tables.ops_by_member.get(member).into_iter().flatten() {
                    edges.add(t, EdgeKind::OpsTable, line, Some(member.clone()));
                }
            }
            CallTarget::Field { base, field }
                if field == "handler" && base.ends_with("method_elm") =>
            {
                edges.dispatch(&self.tables.write_commands, EdgeKind::WriteCommand, line);
            }
            CallTarget::LocalPointer(_) if func.reads_method_handler => {
                edges.dispatch(&self.tables.uapi_methods, EdgeKind::UapiMethod, line);
            }
            CallTarget::Field { base, field } => {
                edges
                    .facts
                    .unresolved_indirect
                    .push(format!("{base}->{field}"));
            }
            CallTarget::LocalPointer(var) => edges.facts.unresolved_indirect.push(var.clone()),
        }
    }

    /// `name(...)`: a macro (edges to what it expands to), a function of the tree, or an
    /// external call.
    fn named_call(&self, edges: &mut CallerEdges, module: Option<&str>, name: &str, line: usize) {
        let r = self.resolver;
        let file = edges.file;
        if let Some(body) = r.macro_calls(file, name) {
            let expansion = r.expand_macro(file, module, body);
            for t in expansion.targets {
                if self.scope.admits(&r.nodes[t].file) {
                    edges.add(t, EdgeKind::Macro, line, Some(name.to_string()));
                }
            }
            edges.facts.external_calls.extend(expansion.externals);
        } else if let Some(t) = r.function(file, module, name) {
            let kind = if r.nodes[t].in_header() {
                EdgeKind::Inline
            } else {
                EdgeKind::Direct
            };
            if self.scope.admits(&r.nodes[t].file) {
                edges.add(t, kind, line, None);
            }
        } else {
            edges.facts.external_calls.push(name.to_string());
        }
    }
}

impl GraphStats {
    /// Counts over the finished graph (every edge kind present, zero when unused).
    fn count(
        tree: &SourceTree,
        scope: &VendorScope,
        nodes: &[FnNode],
        graph: &DiGraph<FnId, CallEdge>,
        tables: &DispatchTables,
    ) -> Self {
        let mut stats = GraphStats {
            files: tree.files.iter().filter(|f| scope.admits(&f.path)).count(),
            functions: nodes.len(),
            edges: graph.edge_count(),
            parse_errors: tree.parse_errors(),
            ops_tables: tables.ops_tables.len(),
            write_commands: tables.write_commands.len(),
            uapi_methods: tables.uapi_methods.len(),
            unresolved_indirect_calls: nodes.iter().map(|n| n.unresolved_indirect.len()).sum(),
            ..GraphStats::default()
        };
        // Every kind present, zero when unused; no string per edge.
        for k in EdgeKind::ALL {
            let n = graph.edge_weights().filter(|e| e.kind == k).count();
            stats.edges_by_kind.insert(k.as_str().to_string(), n);
        }
        stats
    }
}

impl CallGraph {
    /// Build the graph in three passes: nodes (every function definition in scope) ->
    /// dispatch tables (ops initializers, write commands, ioctl methods) -> edges (every call
    /// site resolved through those).
    pub fn build(tree: &SourceTree, scope: &VendorScope) -> Self {
        let NodePass {
            mut nodes,
            origin,
            by_name,
        } = collect_nodes(tree, scope);
        let resolver = Resolver::new(tree, &nodes, &by_name);
        let tables = collect_dispatch_tables(tree, scope, &resolver);
        let pass = EdgePass {
            scope,
            resolver: &resolver,
            tables: &tables,
        };
        let (graph, facts) = resolve_edges(tree, &origin, &pass);
        for (node, f) in nodes.iter_mut().zip(facts) {
            node.external_calls = dedup(f.external_calls);
            node.ops_calls = dedup(f.ops_calls);
            node.unresolved_indirect = dedup(f.unresolved_indirect);
        }
        let stats = GraphStats::count(tree, scope, &nodes, &graph, &tables);
        let DispatchTables {
            ops_tables,
            write_commands,
            uapi_methods,
            ..
        } = tables;
        Self {
            nodes,
            graph,
            by_name,
            ops_tables,
            write_commands,
            uapi_methods,
            stats,
            scope: scope.clone(),
            ops_struct: declared_ops_struct(tree),
        }
    }

    /// Every function, indexed by [`FnId`].
    pub fn nodes(&self) -> &[FnNode] {
        &self.nodes
    }

    /// Every call edge, in the order the edge pass added them.
    pub fn edges(&self) -> impl Iterator<Item = &CallEdge> {
        self.graph.edge_weights()
    }

    /// The registered `struct ib_device_ops` initializers in scope, in file order.
    pub fn ops_tables(&self) -> &[OpsTableInfo] {
        &self.ops_tables
    }

    /// The write commands (`DECLARE_UVERBS_WRITE`) and their handlers.
    pub fn write_commands(&self) -> &[Dispatch] {
        &self.write_commands
    }

    /// The ioctl methods in scope and their handlers.
    pub fn uapi_methods(&self) -> &[Dispatch] {
        &self.uapi_methods
    }

    pub fn stats(&self) -> &GraphStats {
        &self.stats
    }

    pub fn scope(&self) -> &VendorScope {
        &self.scope
    }

    /// `struct ib_device_ops` as declared in this tree: (header, members), `None` when no
    /// header defines it.
    pub fn ops_struct(&self) -> Option<(&str, &[OpsMemberDecl])> {
        self.ops_struct
            .as_ref()
            .map(|(h, ms)| (h.as_str(), ms.as_slice()))
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

    /// Entry ids for names; the first unknown name is the error.
    pub fn entries(&self, names: &[String]) -> Result<Vec<FnId>, UnknownEntry> {
        let mut ids = Vec::new();
        for n in names {
            let found = self.find(n);
            if found.is_empty() {
                return Err(UnknownEntry(n.clone()));
            }
            ids.extend_from_slice(found);
        }
        Ok(ids)
    }
}

/// An entry name no function of the graph has (the caller says why it matters: a default
/// entry missing from the tree, or the user's `--from`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no function `{0}` in the call graph")]
pub struct UnknownEntry(pub String);

/// The first header (in path order) that defines `struct ib_device_ops`:
/// include/rdma/ib_verbs.h.
fn declared_ops_struct(tree: &SourceTree) -> Option<(String, Vec<OpsMemberDecl>)> {
    tree.files
        .iter()
        .find_map(|f| Some((f.path.clone(), f.ops_struct.clone()?)))
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
