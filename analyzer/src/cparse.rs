//! tree-sitter-c extraction of the facts of one (preprocessed) file.

use crate::children::FieldChild;
use std::collections::BTreeSet;

use std::time::Duration;

use tree_sitter::{Node, Parser};

use crate::cfields::{Assignment, Locals};
use crate::error::Warning;
use crate::errsites::BodyExits;
use crate::model::{
    CallSite, CallTarget, FileFacts, FunctionDef, MacroDef, OpsTable, RetKind, UapiMethod,
    ValueRef, WriteCommand,
};
use crate::timings::ExtractTimes;
use crate::tree_heap::FileHeap;

/// Most ERROR ranges reported per file; the count is still exact.
const MAX_ERROR_WARNINGS_PER_FILE: usize = 5;

pub fn new_parser() -> Parser {
    let mut parser = Parser::new();
    // The grammar is compiled in; a version mismatch is a build error, not an input error.
    parser
        .set_language(&tree_sitter_c::LANGUAGE.into())
        .expect("tree-sitter-c grammar matches the tree-sitter runtime");
    parser
}

/// Longest a file's parse may take. tree-sitter's error recovery can go quadratic on
/// pathological text (20,000 `->ops.` in a parameter list: 17 s for 209 KB, with few parser
/// operations, so an operation count does not bound it). Real files parse at about 5 MB/s (the
/// 14 MB of the 6.12 tree in 3 s); the limit, 1 s plus 10 ms per KB, is a 100-fold margin.
/// A file that hits it is reported as degraded (`parse-errors`), never silently dropped.
fn parse_time_limit(len: usize) -> std::time::Duration {
    std::time::Duration::from_millis(1000 + len as u64 / 100)
}

/// Parse `text` (already preprocessed) and extract its facts.
pub fn extract(parser: &mut Parser, path: &str, text: &str) -> FileFacts {
    extract_timed(parser, path, text, &mut ExtractTimes::default(), None)
}

/// [`extract`], adding what its phases took to `times`.
pub(crate) fn extract_timed(
    parser: &mut Parser,
    path: &str,
    text: &str,
    times: &mut ExtractTimes,
    heap: Option<&FileHeap>,
) -> FileFacts {
    let mut facts = FileFacts {
        path: path.to_string(),
        ..FileFacts::default()
    };
    let src = text;
    let bytes = text.as_bytes();
    let t0 = std::time::Instant::now();
    // Checked by tree-sitter every ~100 parser operations (milliseconds apart at worst).
    let limit = parse_time_limit(bytes.len());
    let mut progress = |_: &tree_sitter::ParseState| t0.elapsed() > limit;
    let parsed = parser.parse_with_options(
        &mut |i, _| bytes.get(i..).unwrap_or(&[]),
        None,
        Some(tree_sitter::ParseOptions::new().progress_callback(&mut progress)),
    );
    times.parse += t0.elapsed();
    let Some(tree) = parsed else {
        parser.reset();
        facts.warnings.push(Warning {
            file: path.into(),
            line: 0,
            message: format!(
                "tree-sitter gave up after {limit:?} (pathological text): nothing in the file was read"
            ),
        });
        facts.parse_errors += 1;
        facts.parse_abandoned = true;
        return facts;
    };
    let t1 = std::time::Instant::now();
    let root = tree.root_node();
    collect_errors(root, path, &mut facts);
    let mut sites_time = std::time::Duration::ZERO;
    walk_top(root, src, &mut facts, &mut sites_time);
    if path.ends_with(".c") {
        scan_uverbs_declarations(text, &mut facts);
    }
    // In a file's heap the tree goes with the heap, all at once; else node by node.
    match heap {
        Some(heap) => heap.abandon(tree),
        None => drop(tree),
    }
    times.error_sites += sites_time;
    times.facts += t1.elapsed().saturating_sub(sites_time);
    facts
}

/// The node kinds and fields the body walk compares, as tree-sitter-c's ids, looked up once:
/// `Node::kind` costs a strlen and a UTF-8 check, and `child_by_field_name` a linear search
/// of the field names, on every one of the millions of nodes of a tree.
struct BodyIds {
    call_expression: u16,
    assignment_expression: u16,
    initializer_pair: u16,
    identifier: u16,
    parameter_declaration: u16,
    /// Kinds whose `declarator` field may be the declared identifier.
    declares: [u16; 4],
    /// Kinds whose children the walk need not visit: literals, whose parts (quotes, contents,
    /// escapes) are never a call, a store, a declaration or an exit.
    opaque: [u16; 3],
    field_function: u16,
    field_declarator: u16,
    /// By kind id: [`SCANNED`] when the walk collects something from a node of that kind,
    /// [`EXITS`] when the error sites do. Most nodes (identifiers, punctuation, expressions
    /// that hold the interesting ones) are neither, and cost one lookup.
    interest: Vec<u8>,
    /// The kind ids of the ancestors a return's context reads ([`ReturnContext`]), by name.
    ctx: Vec<u8>,
    /// By kind id: the punctuation or keyword such a node always opens with and closes with
    /// (`compound_statement`: `{` and `}`), which the walk steps over without visiting (see
    /// [`Delimiters`]).
    delimiters: Vec<Delimiters>,
}

/// A kind's first and last child when they are tokens the walk never reads: a step from one
/// visible node to the next costs tree-sitter hundreds of instructions (it climbs out of and
/// into hidden nodes), and a `;`, a `{`, a `}` or an `if` are a fifth of a body's nodes.
#[derive(Clone, Copy, Default)]
struct Delimiters {
    /// The token the node's text starts with (`if`), skipped by going to the first child that
    /// ends past it.
    lead: &'static [u8],
    /// The byte the node's text ends with when its last child is that one-byte token (`;`),
    /// which the walk then treats as not there.
    trail: Option<u8>,
}

/// [`BodyIds::interest`]: the facts walk reads this kind.
const SCANNED: u8 = 1;
/// [`BodyIds::interest`]: the error sites read this kind.
const EXITS: u8 = 2;
/// [`BodyIds::interest`]: an expression whose subtree holds nothing either reads when its text
/// has no call's `(`, no assignment's `=`, no `{` and it has no error: no call, assignment,
/// initializer, declaration, statement or `IS_ERR` test can be written without one of them (a
/// statement expression `({ ... })` and an initializer list have their braces), so the walk
/// need not visit its children (see [`plain_text`] for which `(` and `=` count).
const PLAIN_EXPR: u8 = 4;
/// Kinds besides the expressions that hold nothing either reads when their text has no call's
/// `(`, no assignment's `=`, no `{` and no error: a statement of one expression (a statement
/// expression has its braces), a return (itself noted, from its fields), a jump, a type named
/// without a body (a local's `struct ib_qp`).
const PLAIN_NON_EXPRESSIONS: &[&str] = &[
    "expression_statement",
    "return_statement",
    "goto_statement",
    "break_statement",
    "continue_statement",
    "struct_specifier",
    "union_specifier",
    "enum_specifier",
    "type_descriptor",
];
/// [`BodyIds::interest`]: a call or an argument list, which writes one call's `(` of its own:
/// with no other, no assignment's `=`, no `{` and no error, nothing below it is read (the call
/// itself is, from its own fields).
const ONE_PAREN: u8 = 8;
/// [`BodyIds::interest`]: a parenthesized expression or a cast, which opens with a `(` of its
/// own: past it, no call's `(`, no assignment's `=`, no `{`.
const LEADING_PAREN: u8 = 16;
/// [`BodyIds::interest`]: an assignment, which writes one `=` of its own (read, with what it
/// stores, from its fields): with no other, no call's `(` and no `{`, nothing below it is read.
const ONE_ASSIGN: u8 = 32;

/// [`BodyIds::ctx`]: `if_statement`, `else_clause`, `labeled_statement` (a return there is no
/// plain return), `case_statement`, `compound_statement`, `function_definition`.
const CTX_BRANCH: u8 = 1;
const CTX_CASE: u8 = 2;
const CTX_BLOCK: u8 = 3;
const CTX_FUNCTION: u8 = 4;

fn body_ids() -> &'static BodyIds {
    static IDS: std::sync::OnceLock<BodyIds> = std::sync::OnceLock::new();
    IDS.get_or_init(|| {
        let lang: tree_sitter::Language = tree_sitter_c::LANGUAGE.into();
        let kind = |k: &str| lang.id_for_node_kind(k, true);
        // The grammar is compiled in: a missing field is a build error, not an input error.
        let field = |f: &str| {
            lang.field_id_for_name(f)
                .expect("tree-sitter-c has the field")
                .get()
        };
        let ids = BodyIds {
            call_expression: kind("call_expression"),
            assignment_expression: kind("assignment_expression"),
            initializer_pair: kind("initializer_pair"),
            identifier: kind("identifier"),
            parameter_declaration: kind("parameter_declaration"),
            declares: [
                kind("parameter_declaration"),
                kind("declaration"),
                kind("init_declarator"),
                kind("pointer_declarator"),
            ],
            opaque: [
                kind("string_literal"),
                kind("concatenated_string"),
                kind("char_literal"),
            ],
            field_function: field("function"),
            field_declarator: field("declarator"),
            interest: Vec::new(),
            ctx: Vec::new(),
            delimiters: Vec::new(),
        };
        let (interest, ctx) = kind_tables(&lang, &ids);
        let delimiters = (0..lang.node_kind_count())
            .map(|id| {
                let name = u16::try_from(id)
                    .ok()
                    .and_then(|id| lang.node_kind_for_id(id));
                delimiters_of(name.unwrap_or(""))
            })
            .collect();
        BodyIds {
            interest,
            ctx,
            delimiters,
            ..ids
        }
    })
}

/// [`BodyIds::delimiters`] of one kind, by name (as the grammar writes its rule).
fn delimiters_of(kind: &str) -> Delimiters {
    let (lead, trail): (&'static [u8], Option<u8>) = match kind {
        "compound_statement" | "initializer_list" => (b"{", Some(b'}')),
        "argument_list" | "parenthesized_expression" => (b"(", Some(b')')),
        "return_statement" => (b"return", Some(b';')),
        "if_statement" => (b"if", None),
        "switch_statement" => (b"switch", None),
        "while_statement" => (b"while", None),
        "for_statement" => (b"for", None),
        "expression_statement" | "declaration" | "goto_statement" => (b"", Some(b';')),
        _ => (b"", None),
    };
    Delimiters { lead, trail }
}

/// [`BodyIds::interest`] and [`BodyIds::ctx`], by kind id.
fn kind_tables(lang: &tree_sitter::Language, ids: &BodyIds) -> (Vec<u8>, Vec<u8>) {
    let count = lang.node_kind_count();
    let name = |id: usize| {
        u16::try_from(id)
            .ok()
            .and_then(|id| lang.node_kind_for_id(id))
    };
    let mut interest = vec![0u8; count];
    for k in [
        ids.call_expression,
        ids.assignment_expression,
        ids.initializer_pair,
    ]
    .into_iter()
    .chain(ids.declares)
    {
        if let Some(x) = interest.get_mut(usize::from(k)) {
            *x |= SCANNED;
        }
    }
    for k in crate::errsites::noted_kinds() {
        if let Some(x) = interest.get_mut(usize::from(k)) {
            *x |= EXITS;
        }
    }
    // By name, as `Node::kind` compares them: an alias shares its name with another id.
    for (id, x) in interest.iter_mut().enumerate() {
        let name = name(id).unwrap_or("");
        *x |= match name {
            "call_expression" | "argument_list" => ONE_PAREN,
            "parenthesized_expression" | "cast_expression" => LEADING_PAREN,
            "assignment_expression" => ONE_ASSIGN,
            _ if name.ends_with("_expression") || PLAIN_NON_EXPRESSIONS.contains(&name) => {
                PLAIN_EXPR
            }
            _ => 0,
        };
    }
    let ctx = (0..count)
        .map(|id| match name(id) {
            Some("if_statement" | "else_clause" | "labeled_statement") => CTX_BRANCH,
            Some("case_statement") => CTX_CASE,
            Some("compound_statement") => CTX_BLOCK,
            Some("function_definition") => CTX_FUNCTION,
            _ => 0,
        })
        .collect();
    (interest, ctx)
}

/// The node's text: a slice of the (already valid UTF-8) source, no re-validation
/// (`Node::utf8_text` checks every byte of a body again).
fn text<'a>(n: Node, src: &'a str) -> &'a str {
    src.get(n.start_byte()..n.end_byte()).unwrap_or("")
}

fn line(n: Node) -> usize {
    n.start_position().row + 1
}

fn collect_errors(root: Node, path: &str, facts: &mut FileFacts) {
    if !root.has_error() {
        return;
    }
    let mut stack = vec![root];
    while let Some(n) = stack.pop() {
        if n.is_error() || n.is_missing() {
            facts.parse_errors += 1;
            facts.error_bytes += n.end_byte().saturating_sub(n.start_byte());
            if facts.parse_errors <= MAX_ERROR_WARNINGS_PER_FILE {
                let what = if n.is_missing() {
                    "missing token"
                } else {
                    "unparsed range"
                };
                facts.warnings.push(Warning {
                    file: path.into(),
                    line: line(n),
                    message: format!("{what} (lines {}-{})", line(n), n.end_position().row + 1),
                });
            }
            continue;
        }
        if n.has_error() {
            let mut c = n.walk();
            stack.extend(n.children(&mut c));
        }
    }
}

/// Visit top-level items; descends into preprocessor blocks and ERROR nodes because kernel
/// macros at file scope (`DECLARE_UVERBS_NAMED_METHOD(...)`) sometimes swallow the functions
/// after them into an error range. Iterative, down the lists of children (`crate::children`),
/// in source order: damaged input can nest ERROR nodes as deep as it nests brackets.
fn walk_top(root: Node, src: &str, facts: &mut FileFacts, sites_time: &mut Duration) {
    let mut walk = crate::children::Preorder::below(root);
    while let Some(child) = walk.next() {
        let mut descend = false;
        match crate::cfields::kind(child) {
            "function_definition" => {
                if let Some(f) = function_def(child, src, sites_time) {
                    facts.functions.push(f);
                }
            }
            "preproc_function_def" => {
                if let Some(m) = macro_def(child, src) {
                    facts.macros.push(m);
                }
            }
            "preproc_def" => {
                let name = child
                    .field(crate::cfields::fields().name)
                    .map(|n| text(n, src));
                if name == Some("UVERBS_MODULE_NAME") {
                    if let Some(v) = child.field(crate::cfields::fields().value) {
                        facts.uverbs_module_name = Some(text(v, src).trim().to_string());
                    }
                }
            }
            "preproc_include" => {
                if let Some(p) = child.field(crate::cfields::fields().path) {
                    if crate::cfields::kind(p) == "string_literal" {
                        let t = text(p, src).trim_matches('"');
                        facts.local_includes.push(t.to_string());
                    }
                }
            }
            "declaration" => {
                if let Some(t) = ops_table(child, src) {
                    facts.ops_tables.push(t);
                }
            }
            "ERROR"
            | "preproc_if"
            | "preproc_ifdef"
            | "preproc_else"
            | "preproc_elif"
            | "linkage_specification"
            | "declaration_list" => descend = true,
            _ => {}
        }
        if descend {
            walk.descend(child);
        }
    }
}

/// The name a function declarator chain declares, and what the chain says on the way.
struct DeclaredName<'t> {
    name: String,
    /// The method id of a `UVERBS_HANDLER(X)` definition.
    handler_id: Option<String>,
    /// The function returns a pointer.
    pointer: bool,
    /// The outermost function declarator: the one with the parameters.
    fn_declarator: Node<'t>,
}

fn function_def(node: Node, src: &str, sites_time: &mut Duration) -> Option<FunctionDef> {
    let declarator = node.field(crate::cfields::fields().declarator)?;
    let body = node.field(crate::cfields::fields().body)?;
    let (is_static, is_inline) = specifiers(node, src);
    let ret_type = node
        .field(crate::cfields::fields().r#type)
        .map(|t| text(t, src).trim().to_string())
        .unwrap_or_default();
    let declared = declared_name(declarator, src)?;
    let outer_fn = declared.fn_declarator;
    let ret = ret_kind(declared.pointer, &ret_type);
    let mut locals = Locals::default();
    let (nparams, params) = parameters(outer_fn, src, &mut locals);
    // every int or pointer body: one without an error constant may still pass a callee's on
    let mut exits = matches!(ret, RetKind::Int | RetKind::Ptr)
        .then(|| crate::errsites::BodyExits::new(ret == RetKind::Ptr));
    let (calls, field_writes, value_refs) = body_calls(locals, body, src, exits.as_mut());
    let marks = BodyMarks::of(text(body, src));
    let t0 = std::time::Instant::now();
    let error_sites = exits.map(|e| e.sites(src)).unwrap_or_default();
    *sites_time += t0.elapsed();
    Some(FunctionDef {
        name: declared.name,
        uverbs_handler_id: declared.handler_id,
        line: line(node),
        end_line: node.end_position().row + 1,
        is_static,
        is_inline,
        ret,
        ret_type: if declared.pointer {
            format!("{ret_type} *")
        } else {
            ret_type
        },
        nparams,
        params,
        calls,
        field_writes,
        reads_method_handler: marks.reads_method_handler,
        returns_error: marks.error_code,
        error_sites,
        null_ok: marks.returns_null && marks.err_test,
        value_refs,
    })
}

/// `static` and `inline` among a definition's specifiers.
fn specifiers(node: Node, src: &str) -> (bool, bool) {
    let mut is_static = false;
    let mut is_inline = false;
    let mut cursor = node.walk();
    for c in node.children(&mut cursor) {
        if matches!(
            crate::cfields::kind(c),
            "storage_class_specifier" | "function_specifier"
        ) {
            match text(c, src) {
                "static" => is_static = true,
                "inline" | "__inline" | "__inline__" => is_inline = true,
                _ => {}
            }
        }
    }
    (is_static, is_inline)
}

/// Walk the declarator chain down to the name, noting pointer levels on the way. `None` for
/// a declarator that does not declare a function.
fn declared_name<'t>(declarator: Node<'t>, src: &str) -> Option<DeclaredName<'t>> {
    let mut pointer = false;
    let mut d = declarator;
    let mut outer_fn: Option<Node> = None;
    let (name, handler_id) = loop {
        match crate::cfields::kind(d) {
            "pointer_declarator" => {
                if outer_fn.is_none() {
                    pointer = true;
                }
                d = d.field(crate::cfields::fields().declarator)?;
            }
            "function_declarator" => {
                let inner = d.field(crate::cfields::fields().declarator)?;
                if outer_fn.is_none() {
                    outer_fn = Some(d);
                    d = inner;
                } else {
                    // `UVERBS_HANDLER(X)(args)`: the inner "function declarator" is the
                    // token-pasting macro; its single "parameter" is the method id.
                    let macro_name = text(inner, src);
                    let params = d.field(crate::cfields::fields().parameters)?;
                    let id = text(params, src)
                        .trim_matches(|c| c == '(' || c == ')')
                        .trim()
                        .to_string();
                    if macro_name == "UVERBS_HANDLER" {
                        break ("UVERBS_HANDLER".to_string(), Some(id));
                    }
                    break (format!("{macro_name}({id})"), None);
                }
            }
            "parenthesized_declarator" | "attributed_declarator" => {
                let mut c = d.walk();
                let next = d.named_children(&mut c).next()?;
                d = next;
            }
            "identifier" => break (text(d, src).to_string(), None),
            _ => return None,
        }
    };
    Some(DeclaredName {
        name,
        handler_id,
        pointer,
        fn_declarator: outer_fn?,
    })
}

fn ret_kind(pointer: bool, ret_type: &str) -> RetKind {
    if pointer {
        return RetKind::Ptr;
    }
    match ret_type {
        "void" => RetKind::Void,
        "bool" | "_Bool" => RetKind::Bool,
        _ => RetKind::Int,
    }
}

/// The calls of a body, the fields it writes through pointers and the names it stores or
/// passes; parameters (`locals` holds their names) and locals are told apart from functions.
fn body_calls<'t, 's>(
    mut locals: Locals<'s>,
    body: Node<'t>,
    src: &'s str,
    exits: Option<&mut BodyExits<'t>>,
) -> (Vec<CallSite>, Vec<String>, Vec<ValueRef>) {
    let mut exits = exits;
    if let Some(e) = exits.as_deref_mut() {
        e.set_params(locals.iter().map(|p| p.to_string()));
    }
    let scan = scan_body(body, src, &mut locals, exits);
    let mut calls: Vec<CallSite> = scan
        .calls
        .iter()
        .filter_map(|&(_, f, line)| {
            Some(CallSite {
                target: call_target(f, src, &locals)?,
                line,
            })
        })
        .collect();
    calls.sort_by_key(|c| c.line);
    let mut refs = Vec::new();
    for store in &scan.stores {
        match *store {
            Store::Assignment(a) => crate::valuerefs::of_assignment(&a, src, &locals, &mut refs),
            Store::InitializerPair(n) => {
                crate::valuerefs::of_initializer_pair(n, src, &locals, &mut refs)
            }
        }
    }
    for &(call, function, _) in &scan.calls {
        crate::valuerefs::of_call(call, function, src, &locals, &mut refs);
    }
    refs.sort();
    refs.dedup();
    (calls, scan.field_writes.into_iter().collect(), refs)
}

/// A store of a body, for its `value_refs` once every local is known.
enum Store<'t> {
    Assignment(Assignment<'t>),
    InitializerPair(Node<'t>),
}

/// What one walk of a body finds: call sites (call node, callee node, line) and fields
/// written via `->`. The call node is kept: `Node::parent` searches down from the root.
struct BodyScan<'t> {
    calls: Vec<(Node<'t>, Node<'t>, usize)>,
    field_writes: BTreeSet<String>,
    /// Assignments and initializer pairs, for `value_refs` once every local is known.
    stores: Vec<Store<'t>>,
}

/// One preorder walk of a body down the lists of children (`crate::children`: a cursor's step
/// costs tree-sitter hundreds of instructions). Declared names go into `locals`; calls are
/// listed in the order a right-to-left preorder visits them, the reverse of the left-to-right
/// postorder collected here, which is the order the call sites have always had within one
/// line. What the error sites read (`exits`, for int and pointer bodies) is noted in the same
/// postorder: no second walk of the body.
fn scan_body<'t, 's>(
    body: Node<'t>,
    src: &'s str,
    locals: &mut Locals<'s>,
    mut exits: Option<&mut BodyExits<'t>>,
) -> BodyScan<'t> {
    // sized for most bodies at once: growing them was a tenth of the walk
    let mut scan = BodyScan {
        calls: Vec::with_capacity(32),
        field_writes: BTreeSet::new(),
        stores: Vec::with_capacity(16),
    };
    let ids = body_ids();
    // The children of every node the walk is in, each list after its parent's.
    let mut nodes: Vec<Node<'t>> = Vec::with_capacity(256);
    let mut frames: Vec<Frame<'t>> = Vec::with_capacity(64);
    // The kind ids of the nodes the walk went down from (the body first): a return's
    // ancestors, without `Node::parent`.
    let mut ancestors: Vec<u16> = Vec::with_capacity(64);
    let mut n = body;
    loop {
        let children = n.child_count();
        let kind = n.kind_id();
        let interest = ids.interest.get(usize::from(kind)).copied().unwrap_or(0);
        if children > 0
            && !ids.opaque.contains(&kind)
            && !(interest & PLAIN != 0 && plain_expression(n, src, interest))
        {
            if let Some(mut frame) = enter(n, kind, ids, src, &mut nodes) {
                if let Some(&first) = nodes.get(frame.next) {
                    frame.next += 1;
                    frames.push(frame);
                    ancestors.push(kind);
                    n = first;
                    continue;
                }
                nodes.truncate(frame.base);
            }
        }
        // Leaving `n` and every ancestor whose last child this was: postorder, where each
        // node is seen once and its kind read once (what is collected is a set or sorted
        // later, so the order of the visit does not matter but for the calls).
        let (mut done, mut kind) = (n, kind);
        loop {
            let following = frames
                .last()
                .and_then(|f| nodes.get(f.next..f.all_end))
                .unwrap_or(&[]);
            let at = Visited {
                node: done,
                kind,
                ancestors: &ancestors,
                following,
            };
            collect(at, src, ids, &mut scan, locals, exits.as_deref_mut());
            let Some(frame) = frames.last_mut() else {
                scan.calls.reverse();
                return scan;
            };
            if let Some(&next) = nodes.get(frame.next).filter(|_| frame.next < frame.end) {
                frame.next += 1;
                n = next;
                break;
            }
            let Some(frame) = frames.pop() else {
                scan.calls.reverse();
                return scan;
            };
            nodes.truncate(frame.base);
            ancestors.pop();
            (done, kind) = (frame.parent, frame.kind);
        }
    }
}

/// A node of a body as the walk leaves it: its kind, the kinds of the nodes above it, and the
/// nodes after it among its parent's children.
struct Visited<'a, 't> {
    node: Node<'t>,
    kind: u16,
    ancestors: &'a [u16],
    following: &'a [Node<'t>],
}

/// What the body walk and the error sites read from one node, in postorder.
fn collect<'t, 's>(
    at: Visited<'_, 't>,
    src: &'s str,
    ids: &BodyIds,
    scan: &mut BodyScan<'t>,
    locals: &mut Locals<'s>,
    mut exits: Option<&mut BodyExits<'t>>,
) {
    let (done, kind) = (at.node, at.kind);
    let interest = ids.interest.get(usize::from(kind)).copied().unwrap_or(0);
    if interest & SCANNED != 0 {
        if kind == ids.call_expression {
            if let Some(f) = done.field(ids.field_function) {
                scan.calls.push((done, f, line(done)));
                if let Some(e) = exits.as_deref_mut() {
                    e.note_call(done, f, src);
                }
            }
        } else if kind == ids.assignment_expression {
            let a = Assignment::of(done, src);
            if let Some(field) = written_field(&a, src) {
                scan.field_writes.insert(field.to_string());
            }
            if let Some(e) = exits.as_deref_mut() {
                e.note_assignment(&a, src);
            }
            scan.stores.push(Store::Assignment(a));
        } else if kind == ids.initializer_pair {
            scan.stores.push(Store::InitializerPair(done));
        } else if ids.declares.contains(&kind) {
            note_declared_name(done, src, locals);
        }
    }
    if interest & EXITS != 0 {
        if let Some(e) = exits {
            let ancestors = at.ancestors;
            e.note(
                done,
                kind,
                src,
                || return_context(ancestors, ids),
                at.following,
            );
        }
    }
}

/// A node the body walk went down into: its children are `nodes[base..all_end]`, of which it
/// visits `next..end` (its leading and trailing delimiters left out).
struct Frame<'t> {
    parent: Node<'t>,
    kind: u16,
    base: usize,
    next: usize,
    end: usize,
    all_end: usize,
}

/// Lists `n`'s children after the others in `nodes` and says which to visit: all but its
/// leading delimiter (the children that end before the token it opens with) and its trailing
/// one. `None` (nothing listed) when there is no child but those (`{}`, `return;`). The
/// delimiters are taken from the text, which an error could leave without them (then every
/// child is visited).
fn enter<'t>(
    n: Node<'t>,
    kind: u16,
    ids: &BodyIds,
    src: &str,
    nodes: &mut Vec<Node<'t>>,
) -> Option<Frame<'t>> {
    let d = ids
        .delimiters
        .get(usize::from(kind))
        .copied()
        .unwrap_or_default();
    let (start, end) = (n.start_byte(), n.end_byte());
    let text = src.as_bytes().get(start..end).unwrap_or(&[]);
    let clean = (d.trail.is_some() || !d.lead.is_empty()) && !n.has_error();
    let trail = usize::from(clean && d.trail.is_some() && text.last().copied() == d.trail);
    let lead = clean && !d.lead.is_empty() && text.starts_with(d.lead);
    let base = nodes.len();
    let children = crate::children::push_children(n, nodes);
    let listed = nodes.get(base..).unwrap_or(&[]);
    let first = if lead {
        listed
            .iter()
            .position(|c| c.end_byte() > start + d.lead.len())
    } else {
        Some(0)
    };
    match first.filter(|&first| first + trail < children) {
        Some(first) => Some(Frame {
            parent: n,
            kind,
            base,
            next: base + first,
            end: base + children - trail,
            all_end: base + children,
        }),
        None => {
            nodes.truncate(base);
            None
        }
    }
}

/// The kinds [`plain_expression`] is asked about.
const PLAIN: u8 = PLAIN_EXPR | ONE_PAREN | LEADING_PAREN | ONE_ASSIGN;

/// A node of a [`PLAIN`] kind (`interest`: its bits) that holds nothing the walk reads: no error,
/// and in its text no `{` and no call's `(` or assignment's `=` beyond its own.
fn plain_expression(n: Node, src: &str, interest: u8) -> bool {
    if n.has_error() {
        return false;
    }
    let (start, end) = (n.start_byte(), n.end_byte());
    let (start, calls, assigns) = if interest & LEADING_PAREN != 0 {
        (start + 1, 0, 0)
    } else {
        (
            start,
            usize::from(interest & ONE_PAREN != 0),
            usize::from(interest & ONE_ASSIGN != 0),
        )
    };
    plain_text(src.as_bytes(), start, end, calls, assigns)
}

/// Whether `src[start..end]` has no `{`, at most `calls` call's `(` and at most `assigns`
/// assignment's `=`. A `(` is a call's unless what comes before it (spaces skipped, looking
/// back before `start` too) is an operator, a `(`, a `,` or `sizeof`: a cast or a grouping
/// opens no call. A `=` is an assignment's unless it is part of `==`, `!=`, `<=` or `>=`
/// (`<<=` and `>>=` assign). Either is counted when in doubt (a comment before a `(`, a `=` in
/// a character literal), which costs a visit, never a missed call.
fn plain_text(src: &[u8], start: usize, end: usize, calls: usize, assigns: usize) -> bool {
    let Some(t) = src.get(start..end) else {
        return false;
    };
    let (mut calls, mut assigns) = (calls, assigns);
    let mut i = 0;
    while let Some(&b) = t.get(i) {
        match b {
            b'{' => return false,
            b'=' if t.get(i + 1) == Some(&b'=') => i += 1,
            b'=' if !compares(t, i) => {
                if assigns == 0 {
                    return false;
                }
                assigns -= 1;
            }
            b'(' if opens_call(src, start + i) => {
                if calls == 0 {
                    return false;
                }
                calls -= 1;
            }
            _ => {}
        }
        i += 1;
    }
    true
}

/// Whether the `=` at `t[i]` ends a comparison, `!=`, `<=` or `>=` (`==` is skipped by its
/// first `=`), rather than an assignment (`<<=` and `>>=` assign).
fn compares(t: &[u8], i: usize) -> bool {
    let before = |k: usize| i.checked_sub(k).and_then(|j| t.get(j)).copied();
    match before(1) {
        Some(b'!') => true,
        Some(c @ (b'<' | b'>')) => before(2) != Some(c),
        _ => false,
    }
}

/// Whether the `(` at `src[at]` may open a call's arguments: what precedes it (spaces skipped)
/// ends an identifier other than `sizeof`, a `)`, a `]`, or is a `/` (a comment's end: in
/// doubt, a call).
fn opens_call(src: &[u8], at: usize) -> bool {
    let head = src.get(..at).unwrap_or(&[]);
    let Some(last) = head.iter().rposition(|b| !b.is_ascii_whitespace()) else {
        return false;
    };
    match head.get(last) {
        Some(b')' | b']' | b'/') => true,
        Some(&c) if c.is_ascii_alphanumeric() || c == b'_' => {
            let word_start = head
                .get(..=last)
                .and_then(|w| {
                    w.iter()
                        .rposition(|b| !(b.is_ascii_alphanumeric() || *b == b'_'))
                })
                .map_or(0, |p| p + 1);
            head.get(word_start..=last) != Some(b"sizeof".as_slice())
        }
        _ => false,
    }
}

/// Whether a return whose ancestors up to the body are `ancestors` (kind ids, the body first)
/// is in a `switch` case; `None` when an `if`, an `else` or a label holds it, or the body is
/// not the function's block. The nearest ancestor first, up to the function's block (a
/// nested function's, or the body: the walk's first node, whose parent is the definition).
fn return_context(ancestors: &[u16], ids: &BodyIds) -> Option<bool> {
    let ctx = |k: u16| ids.ctx.get(usize::from(k)).copied().unwrap_or(0);
    let mut in_case = false;
    for (i, &k) in ancestors.iter().enumerate().rev() {
        match ctx(k) {
            CTX_BRANCH => return None,
            CTX_CASE => in_case = true,
            CTX_BLOCK
                if i == 0
                    || ancestors
                        .get(i - 1)
                        .is_some_and(|&p| ctx(p) == CTX_FUNCTION) =>
            {
                return Some(in_case)
            }
            _ => {}
        }
    }
    None
}

/// `x->field = ...`: the field.
fn written_field<'a>(assignment: &Assignment, src: &'a str) -> Option<&'a str> {
    let l = assignment.left?;
    if crate::cfields::kind(l) == "field_expression" && text_of_op(l, src) == "->" {
        return Some(text(l.field(crate::cfields::fields().field)?, src));
    }
    None
}

/// What a body's text says, found in one pass of memmem scans instead of a `contains` (and a
/// byte loop for `-EXXX`) per question: every definition's body is read, so this is part of
/// each cold parse's per-file work.
#[derive(Debug, Default, PartialEq, Eq)]
struct BodyMarks {
    /// `-EXXX` (an errno constant) or the ERR_PTR family: `ERR_PTR(`, `PTR_ERR(`, `ERR_CAST(`,
    /// `PTR_ERR_OR_ZERO(`.
    error_code: bool,
    /// An error-pointer test or conversion: `ERR_PTR(`, `IS_ERR(`, `ERR_CAST(`, `PTR_ERR(`.
    err_test: bool,
    /// `return NULL`.
    returns_null: bool,
    /// `method_elm->handler`.
    reads_method_handler: bool,
}

impl BodyMarks {
    fn of(body: &str) -> BodyMarks {
        struct Finders {
            err: memchr::memmem::Finder<'static>,
            minus_e: memchr::memmem::Finder<'static>,
            return_null: memchr::memmem::Finder<'static>,
            method_handler: memchr::memmem::Finder<'static>,
        }
        static FINDERS: std::sync::OnceLock<Finders> = std::sync::OnceLock::new();
        let f = FINDERS.get_or_init(|| Finders {
            err: memchr::memmem::Finder::new("ERR"),
            minus_e: memchr::memmem::Finder::new("-E"),
            return_null: memchr::memmem::Finder::new("return NULL"),
            method_handler: memchr::memmem::Finder::new("method_elm->handler"),
        });
        let b = body.as_bytes();
        let mut m = BodyMarks::default();
        // every name of the ERR_PTR family holds "ERR" once; what stands around it says which
        for at in f.err.find_iter(b) {
            let (before, after) = (&b[..at], &b[at + 3..]);
            if after.starts_with(b"_PTR(") || after.starts_with(b"_CAST(") {
                (m.error_code, m.err_test) = (true, true);
            } else if before.ends_with(b"PTR_") {
                if after.starts_with(b"(") {
                    (m.error_code, m.err_test) = (true, true);
                } else if after.starts_with(b"_OR_ZERO(") {
                    m.error_code = true;
                }
            } else if before.ends_with(b"IS_") && after.starts_with(b"(") {
                m.err_test = true;
            }
            if m.error_code && m.err_test {
                break;
            }
        }
        if !m.error_code {
            m.error_code = f.minus_e.find_iter(b).any(|at| {
                b.get(at + 2).is_some_and(u8::is_ascii_uppercase)
                    && (at == 0 || !(b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_'))
            });
        }
        m.returns_null = f.return_null.find(b).is_some();
        m.reads_method_handler = f.method_handler.find(b).is_some();
        m
    }
}

/// The parameter count (`(void)`: none), the name, type and scalar-ness of each parameter, and
/// into `locals` every name the list declares (a function pointer parameter's own parameters
/// too): one walk of the list, which stays on the list's own nodes (a sibling step that finds
/// none costs tree-sitter twice one that does, so the children left are counted).
fn parameters<'s>(
    fn_decl: Node,
    src: &'s str,
    locals: &mut Locals<'s>,
) -> (usize, Vec<crate::model::Param>) {
    let Some(list) = fn_decl.field(crate::cfields::fields().parameters) else {
        return (0, Vec::new());
    };
    let ids = body_ids();
    let mut out = Vec::new();
    let (mut decls, mut first_void) = (0usize, false);
    let mut walk = crate::children::Preorder::below(list);
    while let Some(n) = walk.next() {
        let kind = n.kind_id();
        let mut below = n.child_count();
        if walk.depth() == 1 && kind == ids.parameter_declaration {
            let (param, void, local) = parameter(n, src);
            decls += 1;
            if decls == 1 {
                first_void = void;
            }
            out.extend(param);
            if plain_parameter(n, src) {
                // Its only names are the type's and the one it declares, at the end of its
                // pointer declarators (what a visit of each would find): nothing below to see.
                locals.extend(local);
                below = 0;
            } else {
                note_declared_name(n, src, locals);
            }
        } else if ids.declares.contains(&kind) {
            note_declared_name(n, src, locals);
        }
        if below > 0 {
            walk.descend(n);
        }
    }
    // `(void)` alone declares none; `void` among others is still counted.
    let count = if decls == 1 && first_void { 0 } else { decls };
    (count, out)
}

/// A parameter whose text opens no parenthesis, bracket or brace and assigns nothing, and
/// holds no error: a type and pointer declarators around one name at most (no function
/// pointer with parameters of its own, no array size).
fn plain_parameter(p: Node, src: &str) -> bool {
    !p.has_error()
        && !text(p, src)
            .bytes()
            .any(|b| matches!(b, b'(' | b'[' | b'{' | b'='))
}

/// One `parameter_declaration`: its name, scalar-ness and type (`None` for a nameless `void`),
/// whether it is `void`, and the name a local it declares: the identifier its declarator is,
/// or ends its chain of pointer declarators with (each of those declares what its own
/// declarator is when that is an identifier).
fn parameter<'s>(p: Node, src: &'s str) -> (Option<crate::model::Param>, bool, Option<&'s str>) {
    let void = text(p, src).trim() == "void";
    let ty = p.field(crate::cfields::fields().r#type);
    let ty_kind = ty.map(|t| crate::cfields::kind(t)).unwrap_or("");
    let mut stars = 0usize;
    let mut d = p.field(crate::cfields::fields().declarator);
    let mut scalar = !matches!(ty_kind, "struct_specifier" | "union_specifier");
    let mut name = String::new();
    let mut local = None;
    // every step so far from a declarator field of a pointer declarator
    let mut pointers_only = true;
    while let Some(n) = d {
        match crate::cfields::kind(n) {
            "identifier" => {
                name = text(n, src).to_string();
                local = pointers_only.then(|| text(n, src));
                break;
            }
            kind @ ("pointer_declarator"
            | "array_declarator"
            | "function_declarator"
            | "abstract_pointer_declarator") => {
                scalar = false;
                stars += usize::from(kind.contains("pointer"));
                pointers_only &= kind == "pointer_declarator";
                d = n.field(crate::cfields::fields().declarator);
            }
            _ => {
                pointers_only = false;
                let mut cc = n.walk();
                d = n.named_children(&mut cc).next();
            }
        }
    }
    if name.is_empty() && void {
        return (None, void, local);
    }
    // the type's words, one space apart, then a `*` per pointer level
    let base = ty.map(|t| text(t, src)).unwrap_or("");
    let mut ty = String::with_capacity(base.len() + 1 + stars);
    for word in base.split_whitespace() {
        if !ty.is_empty() {
            ty.push(' ');
        }
        ty.push_str(word);
    }
    if stars > 0 {
        ty.push(' ');
        ty.extend(std::iter::repeat_n('*', stars));
    }
    (Some(crate::model::Param { name, scalar, ty }), void, local)
}

/// Names declared as parameters or local variables (to tell `handler(x)` through a local
/// function pointer from a call of a function named `handler`).
#[cfg(test)]
fn collect_declared_names<'s>(node: Node, src: &'s str, out: &mut Locals<'s>) {
    let mut cursor = node.walk();
    loop {
        note_declared_name(cursor.node(), src, out);
        if cursor.goto_first_child() {
            continue;
        }
        while !cursor.goto_next_sibling() {
            if !cursor.goto_parent() || cursor.node().id() == node.id() {
                return;
            }
        }
    }
}

/// The identifier `n` declares, when it is a declaration, parameter or declarator of one.
fn note_declared_name<'s>(n: Node, src: &'s str, out: &mut Locals<'s>) {
    let ids = body_ids();
    if ids.declares.contains(&n.kind_id()) {
        if let Some(d) = n.field(ids.field_declarator) {
            if d.kind_id() == ids.identifier {
                out.insert(text(d, src));
            }
        }
    }
}

fn text_of_op<'a>(field_expr: Node, src: &'a str) -> &'a str {
    field_expr
        .field(crate::cfields::fields().operator)
        .map(|o| text(o, src))
        .unwrap_or("")
}

fn call_target(f: Node, src: &str, locals: &Locals) -> Option<CallTarget> {
    match crate::cfields::kind(f) {
        "identifier" => {
            let name = text(f, src).to_string();
            if locals.contains(name.as_str()) {
                Some(CallTarget::LocalPointer(name))
            } else {
                Some(CallTarget::Named(name))
            }
        }
        "field_expression" => {
            let field = text(f.field(crate::cfields::fields().field)?, src).to_string();
            let base = f.field(crate::cfields::fields().argument)?;
            if crate::cfields::kind(base) == "field_expression" {
                let base_field = base
                    .field(crate::cfields::fields().field)
                    .map(|x| text(x, src));
                if base_field == Some("ops") {
                    return Some(CallTarget::Ops(field));
                }
            }
            Some(CallTarget::Field {
                base: text(base, src).split_whitespace().collect::<String>(),
                field,
            })
        }
        "parenthesized_expression" => {
            // `(((f)))(x)`: unwrap iteratively, a damaged file may nest thousands deep.
            let mut inner = f;
            while crate::cfields::kind(inner) == "parenthesized_expression" {
                let mut c = inner.walk();
                inner = inner.named_children(&mut c).next()?;
            }
            call_target(inner, src, locals)
        }
        _ => None,
    }
}

fn macro_def(node: Node, src: &str) -> Option<MacroDef> {
    let name = text(node.field(crate::cfields::fields().name)?, src).to_string();
    let body = node
        .field(crate::cfields::fields().value)
        .map(|v| text(v, src))
        .unwrap_or("");
    Some(MacroDef {
        name,
        line: line(node),
        calls: idents_before_paren(body),
    })
}

/// Identifiers directly followed by `(` in a macro body, in order, unique.
fn idents_before_paren(body: &str) -> Vec<String> {
    let b = body.as_bytes();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_alphabetic() || b[i] == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            // `a ## b(` pastes tokens: the identifier before `(` is not a real name.
            let pasted = body[..start].trim_end().ends_with("##")
                || body[i..].trim_start().starts_with("##");
            let mut j = i;
            while j < b.len() && (b[j] == b' ' || b[j] == b'\t' || b[j] == b'\\' || b[j] == b'\n') {
                j += 1;
            }
            if !pasted && b.get(j) == Some(&b'(') {
                let id = &body[start..i];
                if !out.iter().any(|o| o == id) {
                    out.push(id.to_string());
                }
            }
        } else {
            i += 1;
        }
    }
    out
}

fn ops_table(decl: Node, src: &str) -> Option<OpsTable> {
    let ty = decl.field(crate::cfields::fields().r#type)?;
    if crate::cfields::kind(ty) != "struct_specifier" {
        return None;
    }
    if ty
        .field(crate::cfields::fields().name)
        .map(|n| text(n, src))
        != Some("ib_device_ops")
    {
        return None;
    }
    let init = decl.field(crate::cfields::fields().declarator)?;
    if crate::cfields::kind(init) != "init_declarator" {
        return None;
    }
    let name = text(init.field(crate::cfields::fields().declarator)?, src).to_string();
    let list = init.field(crate::cfields::fields().value)?;
    let mut members = Vec::new();
    let mut c = list.walk();
    for pair in list.named_children(&mut c) {
        if crate::cfields::kind(pair) != "initializer_pair" {
            continue;
        }
        let designator = pair
            .field(crate::cfields::fields().designator)
            .map(|d| text(d, src).trim_start_matches('.').trim().to_string());
        let value = pair.field(crate::cfields::fields().value);
        if let (Some(member), Some(value)) = (designator, value) {
            if crate::cfields::kind(value) == "identifier" {
                members.push((member, text(value, src).to_string(), line(pair)));
            }
        }
    }
    Some(OpsTable {
        name,
        line: line(decl),
        members,
    })
}

/// The uverbs method and write-command tables are built by file-scope macros that tree-sitter
/// cannot parse as C; their arguments are plain identifiers, so a token scan is exact. Linear in
/// the file: line numbers are counted incrementally, and an unclosed argument list ends where
/// its declaration must have ended (see [`macro_args`]), so N unclosed calls never make N scans
/// of the rest of the file.
fn scan_uverbs_declarations(text: &str, facts: &mut FileFacts) {
    // every keyword starts so: the files without it (all but uverbs' own) are read once, by
    // memmem, not four times by `str::find`
    static PREFIX: std::sync::OnceLock<memchr::memmem::Finder<'static>> =
        std::sync::OnceLock::new();
    let prefix = PREFIX.get_or_init(|| memchr::memmem::Finder::new("DECLARE_UVERBS_"));
    if prefix.find(text.as_bytes()).is_none() {
        return;
    }
    let mut unclosed = 0usize;
    for (keyword, kind) in [
        ("DECLARE_UVERBS_WRITE_EX", 1),
        ("DECLARE_UVERBS_WRITE", 0),
        ("DECLARE_UVERBS_NAMED_METHOD_DESTROY", 3),
        ("DECLARE_UVERBS_NAMED_METHOD", 2),
    ] {
        let mut from = 0;
        // (byte offset, 1-based line there): newlines before `start` counted once per pass.
        let mut counted = (0usize, 1usize);
        while let Some(pos) = text[from..].find(keyword) {
            let start = from + pos;
            from = start + keyword.len();
            let before_ok = start == 0
                || !text.as_bytes()[start - 1].is_ascii_alphanumeric()
                    && text.as_bytes()[start - 1] != b'_';
            let rest = &text[from..];
            let rest_trim = rest.trim_start();
            if !before_ok || !rest_trim.starts_with('(') {
                continue;
            }
            let line_start = text[..start].rfind('\n').map_or(0, |p| p + 1);
            if text[line_start..start].trim_start().starts_with("#define") {
                continue;
            }
            counted.1 += text[counted.0..start].matches('\n').count();
            counted.0 = start;
            let line = counted.1;
            let MacroArgs { args, closed } = macro_args(&rest_trim[1..]);
            if !closed {
                unclosed += 1;
                if unclosed > MAX_ERROR_WARNINGS_PER_FILE {
                    continue;
                }
                facts.warnings.push(Warning {
                    file: facts.path.clone(),
                    line,
                    message: format!(
                        "unclosed `{keyword}(`: its arguments end at the end of the declaration; skipped"
                    ),
                });
                continue;
            }
            match kind {
                0 | 1 if args.len() >= 2 => facts.write_commands.push(WriteCommand {
                    command: args[0].clone(),
                    handler: args[1].clone(),
                    extended: kind == 1,
                    line,
                }),
                2 | 3 if !args.is_empty() => facts.uapi_methods.push(UapiMethod {
                    id: args[0].clone(),
                    destroy: kind == 3,
                    line,
                }),
                _ => {}
            }
        }
    }
    if unclosed > MAX_ERROR_WARNINGS_PER_FILE {
        facts.warnings.push(Warning {
            file: facts.path.clone(),
            line: 0,
            message: format!(
                "{} more unclosed uverbs declarations skipped",
                unclosed - MAX_ERROR_WARNINGS_PER_FILE
            ),
        });
    }
}

/// The first two top-level arguments of a macro call, whitespace-collapsed, and whether the
/// call was closed (or its first two arguments complete).
struct MacroArgs {
    args: Vec<String>,
    closed: bool,
}

/// Longest argument kept: the arguments read are identifiers; a longer one is not.
const MAX_MACRO_ARG: usize = 4096;

/// Arguments of the macro call whose text follows its `(`. The arguments of the uverbs
/// declarations never hold `;`, a directive or another `DECLARE_UVERBS_` macro, so any of them
/// ends an unclosed call (not closed): the declaration has ended there.
fn macro_args(s: &str) -> MacroArgs {
    let mut args = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    let bytes = s.as_bytes();
    let mut line_start = false;
    for (i, c) in s.char_indices() {
        if c == '#' && line_start {
            return MacroArgs {
                args,
                closed: false,
            };
        }
        if c == '\n' {
            line_start = true;
        } else if !c.is_whitespace() {
            line_start = false;
        }
        match c {
            ';' => {
                return MacroArgs {
                    args,
                    closed: false,
                }
            }
            'D' if s[i..].starts_with("DECLARE_UVERBS_")
                && (i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_')) =>
            {
                return MacroArgs {
                    args,
                    closed: false,
                };
            }
            '(' | '{' | '[' => {
                depth += 1;
                cur.push(c);
            }
            ')' | '}' | ']' => {
                if depth == 0 {
                    args.push(cur.split_whitespace().collect::<String>());
                    return MacroArgs { args, closed: true };
                }
                depth -= 1;
                cur.push(c);
            }
            ',' if depth == 0 => {
                args.push(cur.split_whitespace().collect::<String>());
                cur.clear();
                if args.len() == 2 {
                    return MacroArgs { args, closed: true };
                }
            }
            _ if cur.len() < MAX_MACRO_ARG => cur.push(c),
            _ => {}
        }
    }
    MacroArgs {
        args,
        closed: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(src: &str) -> FileFacts {
        extract(&mut new_parser(), "t.c", src)
    }

    /// What `BodyMarks::of` replaced: a `contains` per question and a byte loop for `-EXXX`.
    fn body_marks_by_contains(body: &str) -> BodyMarks {
        let error_code = ["ERR_PTR(", "PTR_ERR(", "ERR_CAST(", "PTR_ERR_OR_ZERO("]
            .iter()
            .any(|m| body.contains(m))
            || {
                let b = body.as_bytes();
                b.windows(3).enumerate().any(|(i, w)| {
                    w[0] == b'-'
                        && w[1] == b'E'
                        && w[2].is_ascii_uppercase()
                        && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
                })
            };
        BodyMarks {
            error_code,
            err_test: ["ERR_PTR(", "IS_ERR(", "ERR_CAST(", "PTR_ERR("]
                .iter()
                .any(|m| body.contains(m)),
            returns_null: body.contains("return NULL"),
            reads_method_handler: body.contains("method_elm->handler"),
        }
    }

    #[test]
    fn body_marks_match_the_contains_they_replaced() {
        // token soup built from the pieces the scans look for, their near misses and glue
        const PIECES: [&str; 24] = [
            "ERR",
            "ERR_PTR(",
            "PTR_",
            "PTR_ERR(",
            "ERR_CAST(",
            "_OR_ZERO(",
            "IS_",
            "IS_ERR(",
            "(",
            "-",
            "E",
            "EINVAL",
            "-E",
            "x-EIO",
            "_",
            "a",
            " ",
            "\n",
            "return NULL",
            "return NUL",
            "method_elm->handler",
            "method_elm->",
            "ERRPTR(",
            "9",
        ];
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut seen = [0usize; 4];
        for _ in 0..20_000 {
            let n = (next() % 12) as usize;
            let body: String = (0..n)
                .map(|_| PIECES[(next() % PIECES.len() as u64) as usize])
                .collect();
            let got = BodyMarks::of(&body);
            assert_eq!(got, body_marks_by_contains(&body), "body {body:?}");
            for (k, on) in [
                got.error_code,
                got.err_test,
                got.returns_null,
                got.reads_method_handler,
            ]
            .into_iter()
            .enumerate()
            {
                seen[k] += usize::from(on);
            }
        }
        // each mark both set and unset in the soup, so the comparison tested both ways
        assert!(seen.iter().all(|&n| n > 100 && n < 19_900), "{seen:?}");
    }

    #[test]
    fn token_pasted_handler_definition() {
        let f = facts("static int UVERBS_HANDLER(UVERBS_METHOD_QP_CREATE)(struct uverbs_attr_bundle *attrs)\n{\n\treturn create(attrs);\n}\n");
        assert_eq!(f.functions.len(), 1);
        assert_eq!(
            f.functions[0].uverbs_handler_id.as_deref(),
            Some("UVERBS_METHOD_QP_CREATE")
        );
        assert_eq!(f.functions[0].nparams, 1);
    }

    #[test]
    fn ops_calls_local_pointers_and_field_writes() {
        let f = facts("int f(struct ib_pd *pd, int (*cb)(void))\n{\n\tint (*handler)(int);\n\tpd->device->ops.alloc_pd(pd);\n\thandler(1);\n\tcb();\n\tpd->usecnt = 1;\n\treturn g(pd);\n}\n");
        let fun = &f.functions[0];
        let t: Vec<_> = fun.calls.iter().map(|c| c.target.clone()).collect();
        assert!(t.contains(&CallTarget::Ops("alloc_pd".into())));
        assert!(t.contains(&CallTarget::LocalPointer("handler".into())));
        assert!(t.contains(&CallTarget::LocalPointer("cb".into())));
        assert!(t.contains(&CallTarget::Named("g".into())));
        assert_eq!(fun.field_writes, vec!["usecnt".to_string()]);
    }

    #[test]
    fn statement_expressions_are_walked() {
        // `(({ ... }))`: the inner parentheses hold one `(` of their own and no `=`; their
        // braces still make the walk go in (a declaration, a return).
        let f = facts("int f(int a)\n{\n\tif (({ int h; h; }))\n\t\th(1);\n\tg(({ return -EINVAL; }));\n\treturn 0;\n}\n");
        let fun = &f.functions[0];
        let t: Vec<_> = fun.calls.iter().map(|c| c.target.clone()).collect();
        assert!(t.contains(&CallTarget::LocalPointer("h".into())), "{t:?}");
        assert!(
            fun.error_sites
                .iter()
                .any(|s| s.errno.as_deref() == Some("EINVAL")),
            "{:?}",
            fun.error_sites
        );
    }

    /// The callees of `fun`, sorted: a name, or the call target's debug form.
    fn called_names(fun: &FunctionDef) -> Vec<String> {
        let mut t: Vec<String> = fun
            .calls
            .iter()
            .map(|c| match &c.target {
                CallTarget::Named(n) => n.clone(),
                other => format!("{other:?}"),
            })
            .collect();
        t.sort();
        t
    }

    #[test]
    fn casts_comparisons_and_sizeof_open_nothing_calls_and_assignments_do() {
        let plain = |t: &str, calls: usize, assigns: usize| {
            plain_text(t.as_bytes(), 0, t.len(), calls, assigns)
        };
        for t in [
            "a == b",
            "a != b",
            "a <= b",
            "a >= b",
            "(u32)x",
            "sizeof(*qp)",
            "(a & (b | c))",
        ] {
            assert!(plain(t, 0, 0), "{t}");
        }
        for t in [
            "a = b",
            "a |= b",
            "a <<= 1",
            "a >>= 1",
            "f(x)",
            "a->f (x)",
            "(*fp)(x)",
            "t[i](x)",
            "f /* c */ (x)",
            "({ x; })",
        ] {
            assert!(!plain(t, 0, 0), "{t}");
        }
        assert!(plain("f((int)x, sizeof(y))", 1, 0));
        assert!(!plain("f(g(x))", 1, 0));
        assert!(plain("x = a == b", 0, 1));
        assert!(!plain("x = y = z", 0, 1));
        // The `(` of a call found by looking back before the node: `g (x)` from `(x)`.
        let src = b"g (x)";
        assert!(!plain_text(src, 2, 5, 0, 0));
    }

    #[test]
    fn calls_and_stores_under_casts_comparisons_returns_and_assignments_are_found() {
        let f = facts(
            "int f(struct s *p)
{
	int a = (int)g1(p);
	if (p->n != g2(p))
		return (g3(p));
	p->cb = (void *)g4;
	p->x = p->y = g5(p);
	a = sizeof(*p) + g6(sizeof(p));
	return a <= g7(p) ? -EINVAL : 0;
}
",
        );
        let fun = &f.functions[0];
        let t = called_names(fun);
        assert_eq!(t, ["g1", "g2", "g3", "g5", "g6", "g7"]);
        assert_eq!(fun.field_writes, ["cb", "x", "y"]);
    }

    #[test]
    fn delimiters_are_stepped_over_and_what_they_hold_is_still_read() {
        // Empty blocks, a bare return, comments next to the delimiters.
        let f = facts("int f(int a)\n{\n\tif (a) {}\n\tif /* c */ (g1(a)) { /* c */ }\n\t{ /* c */ g2(a); }\n\twhile (g3(a)) g4(a) /* c */ ;\n\tswitch (g5(a)) { case 1: return g6(a); }\n\tfor (a = g7(); a; a--) {}\n\tif (a)\n\t\treturn;\n\treturn 0;\n}\n");
        let fun = &f.functions[0];
        let t = called_names(fun);
        assert_eq!(t, ["g1", "g2", "g3", "g4", "g5", "g6", "g7"]);
    }

    #[test]
    fn pointer_bool_and_void_returns() {
        let f = facts("static struct x *a(void) { return 0; }\nbool b(int x) { return x; }\nvoid c(int a, int b) {}\n");
        let r: Vec<_> = f
            .functions
            .iter()
            .map(|f| (f.ret, f.nparams, f.is_static))
            .collect();
        assert_eq!(
            r,
            vec![
                (RetKind::Ptr, 0, true),
                (RetKind::Bool, 1, false),
                (RetKind::Void, 2, false)
            ]
        );
    }

    #[test]
    fn parameters_scalar_or_not() {
        let f = facts("int f(struct ib_qp *qp, int attr_mask, u64 length, struct x by_value, char name[4], void (*cb)(void))\n{\n\treturn 0;\n}\n");
        let p: Vec<(String, bool)> = f.functions[0]
            .params
            .iter()
            .map(|p| (p.name.clone(), p.scalar))
            .collect();
        let want = [
            ("qp", false),
            ("attr_mask", true),
            ("length", true),
            ("by_value", false),
            ("name", false),
            ("cb", false),
        ];
        assert_eq!(
            p,
            want.iter()
                .map(|(n, s)| (n.to_string(), *s))
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn error_codes_are_evidence() {
        let f = facts("int a(void) { return -EINVAL; }\nint b(void) { return x - EXTRA; }\nvoid *c(void) { return ERR_PTR(r); }\nint d(int x) { return x + 1; }\n");
        let r: Vec<bool> = f.functions.iter().map(|f| f.returns_error).collect();
        assert_eq!(r, vec![true, false, true, false]);
    }

    #[test]
    fn macro_calls_skip_token_pasting() {
        assert_eq!(
            idents_before_paren("_uobj_get_obj_read(uobj_get_read(a, b))"),
            vec!["_uobj_get_obj_read", "uobj_get_read"]
        );
        assert!(idents_before_paren("_id ## _handler_ ## id(x)").is_empty());
    }

    #[test]
    fn unclosed_method_declarations_are_linear_and_named() {
        let one = "DECLARE_UVERBS_NAMED_METHOD((\n";
        let src = one.repeat(20_000) + "DECLARE_UVERBS_NAMED_METHOD_DESTROY(UVERBS_METHOD_X, a);\n";
        let mut f = FileFacts {
            path: "t.c".into(),
            ..FileFacts::default()
        };
        let t0 = std::time::Instant::now();
        scan_uverbs_declarations(&src, &mut f);
        assert!(t0.elapsed().as_secs() < 5, "{:?}", t0.elapsed());
        assert_eq!(f.uapi_methods.len(), 1);
        assert_eq!(f.uapi_methods[0].line, 20_001);
        assert_eq!(f.warnings.len(), MAX_ERROR_WARNINGS_PER_FILE + 1);
        assert_eq!(f.warnings[1].line, 2);
        assert!(f.warnings[5].message.starts_with("19995 more unclosed"));
    }

    #[test]
    fn pathological_error_recovery_is_cut_off_and_reported() {
        // Found by tests/fuzz_mutations.rs: tree-sitter's recovery took 17 s on this.
        let src = format!(
            "static int uverbs_response(struct uverbs_attr_bundle *attrs, {})\n{{\n}}\n",
            "->ops.".repeat(20_000)
        );
        let t0 = std::time::Instant::now();
        let f = facts(&src);
        let took = t0.elapsed();
        assert!(took < parse_time_limit(src.len()) * 3, "{took:?}");
        if took >= parse_time_limit(src.len()) {
            assert!(f.parse_abandoned && f.warnings[0].message.contains("gave up"));
        }
    }

    #[test]
    fn deeply_parenthesised_callee_does_not_overflow() {
        let body = format!("{}g{}(x)", "(".repeat(10_000), ")".repeat(10_000));
        let src = format!("int f(void)\n{{\n\treturn {body};\n}}\n");
        let f = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || facts(&src))
            .expect("spawn")
            .join()
            .expect("no overflow");
        assert_eq!(f.functions.len(), 1);
        let t: Vec<_> = f.functions[0]
            .calls
            .iter()
            .map(|c| c.target.clone())
            .collect();
        assert_eq!(t, vec![CallTarget::Named("g".into())]);
    }

    #[test]
    fn write_and_method_declarations() {
        let f = facts("DECLARE_UVERBS_OBJECT(X,\n\tDECLARE_UVERBS_WRITE(IB_USER_VERBS_CMD_REG_MR,\n\t\tib_uverbs_reg_mr, UAPI_DEF_WRITE_IO(a, b)),\n\tDECLARE_UVERBS_WRITE_EX(IB_USER_VERBS_EX_CMD_MODIFY_QP, ib_uverbs_ex_modify_qp, x));\nDECLARE_UVERBS_NAMED_METHOD(\n\tUVERBS_METHOD_QP_CREATE, UVERBS_ATTR_IDR(a));\nDECLARE_UVERBS_NAMED_METHOD_DESTROY(UVERBS_METHOD_QP_DESTROY, x);\n");
        let w: Vec<_> = f
            .write_commands
            .iter()
            .map(|w| (w.handler.as_str(), w.extended, w.line))
            .collect();
        assert_eq!(
            w,
            vec![
                ("ib_uverbs_ex_modify_qp", true, 4),
                ("ib_uverbs_reg_mr", false, 2)
            ]
        );
        let m: Vec<_> = f
            .uapi_methods
            .iter()
            .map(|m| (m.id.as_str(), m.destroy))
            .collect();
        assert_eq!(
            m,
            vec![
                ("UVERBS_METHOD_QP_DESTROY", true),
                ("UVERBS_METHOD_QP_CREATE", false)
            ]
        );
    }
}

#[cfg(test)]
mod value_ref_tests {
    use super::*;
    use crate::model::{RefSite, ValueRef};

    fn refs(src: &str) -> Vec<ValueRef> {
        let f = extract(&mut new_parser(), "t.c", src);
        f.functions[0].value_refs.clone()
    }

    fn field(field: &str, through_pointer: bool, name: &str, line: usize) -> ValueRef {
        ValueRef {
            site: RefSite::Field {
                field: field.into(),
                through_pointer,
            },
            name: name.into(),
            line,
        }
    }

    #[test]
    fn installed_callbacks_and_constants_set() {
        let r = refs("void f(struct ib_qp *qp, int x)\n{\n\tstruct ib_qp_init_attr attr = { .event_handler = h1 };\n\tattr.event_handler = h2;\n\tqp->attr.qp_state = IB_QPS_ERR;\n\tqp->n |= MASK;\n\tattr.cb = x;\n\tINIT_IB_EVENT_HANDLER(&qp->eh, qp->dev, h3);\n\tlocal_fn(qp, NOT_KEPT);\n}\n");
        let want = vec![
            field("event_handler", false, "h1", 3),
            field("event_handler", false, "h2", 4),
            field("qp_state", true, "IB_QPS_ERR", 5),
            ValueRef {
                site: RefSite::Argument {
                    callee: "INIT_IB_EVENT_HANDLER".into(),
                    index: 2,
                },
                name: "h3".into(),
                line: 8,
            },
        ];
        let mut want = want;
        want.sort();
        assert_eq!(r, want);
    }

    #[test]
    fn parameter_types_keep_their_pointer_levels() {
        let f = extract(
            &mut new_parser(),
            "t.c",
            "void f(struct ib_event *event, void *ctx, const struct x **pp, int n)\n{\n}\n",
        );
        let t: Vec<&str> = f.functions[0]
            .params
            .iter()
            .map(|p| p.ty.as_str())
            .collect();
        assert_eq!(t, vec!["struct ib_event *", "void *", "struct x **", "int"]);
    }

    #[test]
    fn parameters_declare_what_a_walk_of_the_whole_list_declares() {
        // the list's names as the former walk of every node of the list found them, against
        // the one walk that also reads each parameter
        for decl in [
            "int f(void)",
            "int f(struct ib_qp *qp, int (*cb)(struct ib_cq *cq, void *ctx), ...)",
            "static long f(const char *const *argv, unsigned long flags[4], struct { int a; } s)",
            "void f(int, char *, void (*)(int x))",
            "int f(struct ib_device *(*get)(u32 port, int *err), enum rdma_link_layer ll)",
            "int f(a, b)",
            // plain parameters, read without a visit of their nodes
            "int f(int * const p, char **argv, struct y * volatile *q, struct x *, unsigned long long v)",
            "int f(enum e x, const u32 *restrict p, void *const *const pp, union u *un, signed char c)",
            "int f(struct ib_qp *qp, int broken ,, char *s)",
        ] {
            let src = format!("{decl}\n{{\n}}\n");
            let tree = new_parser().parse(&src, None).expect("parsed");
            let def = tree.root_node().child(0).expect("a definition");
            let declarator = def
                .field(crate::cfields::fields().declarator)
                .expect("a declarator");
            let fn_decl = declared_name(declarator, &src)
                .expect("a name")
                .fn_declarator;
            let mut walked = Locals::default();
            if let Some(list) = fn_decl.field(crate::cfields::fields().parameters) {
                collect_declared_names(list, &src, &mut walked);
            }
            let mut once = Locals::default();
            let (count, params) = parameters(fn_decl, &src, &mut once);
            assert_eq!(once, walked, "{decl}");
            let f = extract(&mut new_parser(), "t.c", &src);
            assert_eq!(
                (count, &params),
                (f.functions[0].nparams, &f.functions[0].params)
            );
        }
        let mut names = Locals::default();
        let src = "int f(struct ib_qp *qp, int (*cb)(struct ib_cq *cq, void *ctx), ...)\n{\n}\n";
        let tree = new_parser().parse(src, None).expect("parsed");
        let def = tree.root_node().child(0).expect("a definition");
        let declarator = def
            .field(crate::cfields::fields().declarator)
            .expect("a declarator");
        let fn_decl = declared_name(declarator, src)
            .expect("a name")
            .fn_declarator;
        let (count, params) = parameters(fn_decl, src, &mut names);
        let mut sorted: Vec<&str> = names.into_iter().collect();
        sorted.sort_unstable();
        assert_eq!(sorted, ["cb", "cq", "ctx", "qp"]);
        assert_eq!(count, 2);
        assert_eq!(
            params[1].ty, "int *",
            "a function pointer counts its own star"
        );
    }
}
