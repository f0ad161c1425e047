//! The error exits of one function body, from its tree-sitter syntax: each way the function
//! returns an error, the errno constant when the code writes one, and what decides it (the
//! [`SiteShape`]). Pure syntax, one body at a time; the callee a shape names is resolved
//! across the call graph later (codegen), where the rules and the probes are known.
//!
//! An exit is one of:
//! - an `if` whose branch ends in `return <error>` or `goto <label>` where the label's path
//!   returns an error (`err1: return -EINVAL;`, `out: return ret;` with `ret = -EINVAL` in the
//!   branch or the latest assignment of `ret` before the `if`);
//! - a `return <error>` in a `switch` case (a value outside the cases handled);
//! - a `return <error>` outside any condition, before the body's first label (an unsupported
//!   operation, or a tail call whose error is the callee's).
//!
//! An `<error>` is `-ECONST`, `ERR_PTR(-ECONST)`, a variable, `ERR_PTR(var)`, `PTR_ERR(x)`,
//! `ERR_CAST(x)` or a call; a variable is followed to its latest assignment before the exit
//! (a constant or a call; the `if`'s `return` or `goto`). In a pointer function a variable
//! returned as it is counts only after a `goto` where it holds an `ERR_PTR(-ECONST)` (`attr =
//! ERR_PTR(-ENODATA)` as the initial value, `goto done` before a lookup's result replaces it,
//! `done: return attr;`): otherwise it is the success. An exit that yields neither a constant
//! nor a call is not listed.
//!
//! A constant exit whose condition tests, negated, an entry of a table indexed by a key the
//! caller passed (a parameter used as a value in the subscript:
//! `!is_gid_entry_valid(table->data_vec[index])`, `!tbl[qpn & mask]`, `tbl[index] == NULL`) is a lookup that found nothing
//! ([`SiteShape::Lookup`]): the caller named something that is not there.

use crate::children::FieldChild;
use std::collections::BTreeMap;

use tree_sitter::Node;

use crate::cfields::Assignment;
use crate::model::{ErrorSite, SiteShape};

/// Longest `check` text kept (the condition as written, whitespace collapsed).
const MAX_CHECK_CHARS: usize = 96;

/// Errno constants that say "out of something" (the author's own word for exhaustion).
const EXHAUSTION: [&str; 6] = ["ENOMEM", "ENOSPC", "ENOBUFS", "EMFILE", "ENFILE", "EDQUOT"];

/// Wrappers around a condition or a value that do not change what it tests.
const TRANSPARENT_CALLS: [&str; 8] = [
    "unlikely",
    "likely",
    "WARN_ON",
    "WARN_ON_ONCE",
    "IS_ERR",
    "IS_ERR_OR_NULL",
    "PTR_ERR",
    "ERR_CAST",
];

/// The node's text: a slice of the (already valid UTF-8) source, no re-validation
/// (`Node::utf8_text` checks every byte of a body again).
fn text<'a>(n: Node, src: &'a str) -> &'a str {
    src.get(n.start_byte()..n.end_byte()).unwrap_or("")
}

fn line(n: Node) -> usize {
    n.start_position().row + 1
}

/// What an error value is, before resolution.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Value {
    Const(String),
    Var(String),
    Call(String),
}

/// One assignment of a local: `v = -ECONST` or `v = f(...)` (also `T *v = f(...)`); `value`
/// is `None` for anything else (`v = ERR_CAST(p->field)`, `v = &x->attr`).
struct Assign<'t> {
    var: String,
    value: Option<Value>,
    byte: usize,
    node: Node<'t>,
}

/// What an error exit needs from a body, collected node by node during the one walk of the
/// body that also finds its calls ([`crate::cparse`]), then decided by [`BodyExits::sites`].
pub(crate) struct BodyExits<'t> {
    labels: BTreeMap<String, Label<'t>>,
    assigns: Vec<Assign<'t>>,
    ifs: Vec<Node<'t>>,
    /// Each return, and whether it is in a `switch` case when no `if`, `else` or label holds
    /// it on the way up to the body (`None`: one does, it is no plain return).
    returns: Vec<(Node<'t>, Option<bool>)>,
    /// Start byte of the first label: returns after it are the error epilogue.
    first_label: usize,
    /// The function returns a pointer.
    ptr: bool,
    /// Variables the body tests with `IS_ERR`/`IS_ERR_OR_NULL`: they may hold an ERR_PTR,
    /// so a pointer function returning one as it is passes the error on.
    err_ptrs: Vec<String>,
    /// The function's parameter names: what the caller supplied.
    params: Vec<String>,
}

/// A label of the body: its statement, the named statements that follow it (as many as
/// [`first_return`] reads), and the first return on its path once a `goto` asked (every `goto`
/// of a label reaches the same one). The statements are kept from the walk's list of the
/// parent's children: `Node::next_named_sibling` searches the parent's children from the
/// first at each step, which in a long function was a fifth of the error sites' time.
struct Label<'t> {
    stmt: Node<'t>,
    following: Vec<Node<'t>>,
    first_return: std::cell::OnceCell<Option<Node<'t>>>,
}

/// How many statements, the label's own first, [`first_return`] looks at.
const LABEL_REACH: usize = 16;

/// The node kinds and fields the collection compares, as tree-sitter-c's ids, looked up once
/// (it sees every node of every int or pointer body).
struct SiteIds {
    labeled_statement: u16,
    if_statement: u16,
    return_statement: u16,
    init_declarator: u16,
    identifier: u16,
    field_expression: u16,
    field_label: u16,
    field_field: u16,
    field_arguments: u16,
}

fn site_ids() -> &'static SiteIds {
    static IDS: std::sync::OnceLock<SiteIds> = std::sync::OnceLock::new();
    IDS.get_or_init(|| {
        let lang: tree_sitter::Language = tree_sitter_c::LANGUAGE.into();
        let kind = |k: &str| lang.id_for_node_kind(k, true);
        // The grammar is compiled in: a missing field is a build error, not an input error.
        let field = |f: &str| {
            lang.field_id_for_name(f)
                .expect("tree-sitter-c has the field")
                .get()
        };
        SiteIds {
            labeled_statement: kind("labeled_statement"),
            if_statement: kind("if_statement"),
            return_statement: kind("return_statement"),
            init_declarator: kind("init_declarator"),
            identifier: kind("identifier"),
            field_expression: kind("field_expression"),
            field_label: field("label"),
            field_field: field("field"),
            field_arguments: field("arguments"),
        }
    })
}

/// The kinds [`BodyExits::note`] reads: the walk calls it only for these.
pub(crate) fn noted_kinds() -> [u16; 4] {
    let ids = site_ids();
    // assignments and calls come through [`BodyExits::note_assignment`] and
    // [`BodyExits::note_call`], with the fields the walk already looked up
    [
        ids.labeled_statement,
        ids.if_statement,
        ids.return_statement,
        ids.init_declarator,
    ]
}

impl<'t> BodyExits<'t> {
    /// `ptr`: the function returns a pointer, so a bare `return var;` is a success (its errors
    /// go through `ERR_PTR`/`ERR_CAST`).
    pub(crate) fn new(ptr: bool) -> Self {
        Self {
            labels: BTreeMap::new(),
            assigns: Vec::new(),
            ifs: Vec::new(),
            returns: Vec::new(),
            first_label: usize::MAX,
            ptr,
            err_ptrs: Vec::new(),
            params: Vec::new(),
        }
    }

    /// The function's parameter names (a subscript by one of them is a lookup by the
    /// caller's key).
    pub(crate) fn set_params(&mut self, params: impl IntoIterator<Item = String>) {
        self.params = params.into_iter().collect();
    }

    /// One node of the body (`k`: its kind id, one of [`noted_kinds`]), in the walk's
    /// left-to-right postorder (every node once). The lists are sorted by [`Self::sites`]; of
    /// two labels of one name the first left in postorder is kept (the one the former
    /// right-to-left preorder pass saw last). `in_case`, asked of a return only: whether it is
    /// in a `switch` case, `None` when an `if`, `else` or label holds it (from the walk's
    /// path: `Node::parent` searches down from the root). `following`: the nodes after `n`
    /// among its parent's children.
    pub(crate) fn note(
        &mut self,
        n: Node<'t>,
        k: u16,
        src: &str,
        in_case: impl FnOnce() -> Option<bool>,
        following: &[Node<'t>],
    ) {
        let ids = site_ids();
        if k == ids.labeled_statement {
            if let Some(l) = n.field(ids.field_label) {
                self.labels
                    .entry(text(l, src).to_string())
                    .or_insert_with(|| Label {
                        stmt: n,
                        following: following
                            .iter()
                            .filter(|x| x.is_named())
                            .take(LABEL_REACH - 1)
                            .copied()
                            .collect(),
                        first_return: std::cell::OnceCell::new(),
                    });
                self.first_label = self.first_label.min(n.start_byte());
            }
        } else if k == ids.if_statement {
            self.ifs.push(n);
        } else if k == ids.return_statement {
            self.returns.push((n, in_case()));
        } else if k == ids.init_declarator {
            note_init(n, src, &mut self.assigns);
        }
    }

    /// An assignment of the body (the walk looked up its fields once for every reader): `v =
    /// value` of a local or parameter `v`.
    pub(crate) fn note_assignment(&mut self, a: &Assignment<'t>, src: &str) {
        if !a.plain {
            return;
        }
        let (Some(l), Some(r)) = (a.left, a.right) else {
            return;
        };
        if crate::cfields::kind(l) != "identifier" {
            return;
        }
        self.assigns.push(Assign {
            var: text(l, src).to_string(),
            value: value_of(r, src),
            byte: a.node.start_byte(),
            node: a.node,
        });
    }

    /// A call of the body (`f`: its function, which the walk looked up): `IS_ERR(v)` /
    /// `IS_ERR_OR_NULL(v)` says `v` may hold an ERR_PTR.
    pub(crate) fn note_call(&mut self, n: Node<'t>, f: Node<'t>, src: &str) {
        let ids = site_ids();
        // What `call_name` reads: the function's name, or a called field's.
        let name = if f.kind_id() == ids.identifier {
            Some(f)
        } else if f.kind_id() == ids.field_expression {
            f.field(ids.field_field)
        } else {
            None
        };
        if !name.is_some_and(|f| matches!(text(f, src), "IS_ERR" | "IS_ERR_OR_NULL")) {
            return;
        }
        let arg = n
            .field(ids.field_arguments)
            .and_then(|a| a.named_child(0))
            .map(unwrap_expr);
        if let Some(a) = arg.filter(|a| a.kind_id() == ids.identifier) {
            self.err_ptrs.push(text(a, src).to_string());
        }
    }

    /// The error sites of the body, sorted by line, one per (line, errno, shape).
    pub(crate) fn sites(mut self, src: &str) -> Vec<ErrorSite> {
        self.assigns.sort_by_key(|a| a.byte);
        self.ifs.sort_by_key(|n| n.start_byte());
        self.returns.sort_by_key(|(n, _)| n.start_byte());
        let b = &self;
        let mut out: Vec<ErrorSite> = Vec::new();
        for &i in &b.ifs {
            if_sites(i, b, src, &mut out);
        }
        for &(r, in_case) in &b.returns {
            if let Some(s) = in_case.and_then(|in_case| plain_return_site(r, in_case, b, src)) {
                out.push(s);
            }
        }
        out.sort_by(|a, b| (a.line, &a.errno, &a.shape).cmp(&(b.line, &b.errno, &b.shape)));
        out.dedup_by(|a, b| a.line == b.line && a.errno == b.errno && a.shape == b.shape);
        out
    }
}

fn note_init<'t>(n: Node<'t>, src: &str, out: &mut Vec<Assign<'t>>) {
    let (Some(mut d), Some(v)) = (
        n.field(crate::cfields::fields().declarator),
        n.field(crate::cfields::fields().value),
    ) else {
        return;
    };
    while crate::cfields::kind(d) == "pointer_declarator" {
        match d.field(crate::cfields::fields().declarator) {
            Some(x) => d = x,
            None => return,
        }
    }
    if crate::cfields::kind(d) != "identifier" {
        return;
    }
    out.push(Assign {
        var: text(d, src).to_string(),
        value: value_of(v, src),
        byte: n.start_byte(),
        node: n,
    });
}

/// Strip parentheses, casts and the transparent wrappers.
fn unwrap_expr(mut n: Node) -> Node {
    loop {
        match crate::cfields::kind(n) {
            "parenthesized_expression" => match n.named_child(0) {
                Some(c) => n = c,
                None => return n,
            },
            "cast_expression" => match n.field(crate::cfields::fields().value) {
                Some(c) => n = c,
                None => return n,
            },
            _ => return n,
        }
    }
}

/// The called name of a call expression: `f` of `f(...)`, the member of a dispatch through
/// a function pointer field (`alloc_pd` of `dev->ops.alloc_pd(...)`).
fn call_name<'a>(n: Node, src: &'a str) -> Option<&'a str> {
    if crate::cfields::kind(n) != "call_expression" {
        return None;
    }
    let f = n.field(crate::cfields::fields().function)?;
    match crate::cfields::kind(f) {
        "identifier" => Some(text(f, src)),
        "field_expression" => Some(text(f.field(crate::cfields::fields().field)?, src)),
        _ => None,
    }
}

/// The first argument of a call.
fn first_arg(n: Node) -> Option<Node> {
    n.field(crate::cfields::fields().arguments)?.named_child(0)
}

/// `-ECONST`: the constant's name.
fn negated_errno<'a>(n: Node, src: &'a str) -> Option<&'a str> {
    let n = unwrap_expr(n);
    if crate::cfields::kind(n) != "unary_expression"
        || n.field(crate::cfields::fields().operator)
            .map(|o| text(o, src))
            != Some("-")
    {
        return None;
    }
    let a = unwrap_expr(n.field(crate::cfields::fields().argument)?);
    let t = text(a, src);
    (crate::cfields::kind(a) == "identifier" && is_errno_name(t)).then_some(t)
}

fn is_errno_name(t: &str) -> bool {
    t.len() > 2
        && t.starts_with('E')
        && t.bytes()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_')
}

/// What an error value expression is: a constant, a variable, a call (through `ERR_PTR`,
/// `PTR_ERR`, `ERR_CAST`); `None` for anything else (0, NULL, an expression).
fn value_of(n: Node, src: &str) -> Option<Value> {
    let n = unwrap_expr(n);
    if let Some(e) = negated_errno(n, src) {
        return Some(Value::Const(e.to_string()));
    }
    match crate::cfields::kind(n) {
        "identifier" => {
            let t = text(n, src);
            (!matches!(t, "NULL" | "true" | "false")).then(|| Value::Var(t.to_string()))
        }
        // `ret ? ERR_PTR(ret) : umem`: the error arm
        "conditional_expression" => [
            crate::cfields::fields().consequence,
            crate::cfields::fields().alternative,
        ]
        .into_iter()
        .filter_map(|f| n.field(f))
        .find_map(|a| {
            value_of(a, src).filter(|v| !matches!(v, Value::Var(_)) || is_err_wrapped(a, src))
        }),
        "call_expression" => {
            let name = call_name(n, src)?;
            if matches!(name, "ERR_PTR" | "PTR_ERR" | "ERR_CAST") {
                return value_of(first_arg(n)?, src);
            }
            Some(Value::Call(name.to_string()))
        }
        _ => None,
    }
}

/// The error value a `return` statement returns (`None`: a success, or not an error). In a
/// pointer function a variable returned as it is and never tested with `IS_ERR` is the
/// success, unless the return is reached by a `goto` at byte `goto_at` where the variable
/// holds an `ERR_PTR(-ECONST)` (an initial error value the success path replaces after the
/// jump).
fn returned(r: Node, b: &BodyExits, src: &str, goto_at: Option<usize>) -> Option<Value> {
    let e = r.named_child(0)?;
    let bare = unwrap_expr(e);
    if b.ptr
        && crate::cfields::kind(bare) == "identifier"
        && !b.err_ptrs.iter().any(|v| v == text(bare, src))
    {
        return held_at(b, text(bare, src), goto_at?);
    }
    value_of(e, src)
}

/// `ERR_PTR(x)`, `ERR_CAST(x)`, `PTR_ERR(x)`: a variable that is an error there.
fn is_err_wrapped(n: Node, src: &str) -> bool {
    matches!(
        call_name(unwrap_expr(n), src),
        Some("ERR_PTR" | "PTR_ERR" | "ERR_CAST")
    )
}

/// What `var` holds at byte `before`: its latest assignment there, followed through
/// `ret = pinned` copies (a constant or a call).
fn latest(b: &BodyExits, var: &str, before: usize) -> Option<Value> {
    let mut var = var.to_string();
    let mut before = before;
    for _ in 0..4 {
        let (a, value) = b
            .assigns
            .iter()
            .rev()
            .filter(|a| a.byte < before && a.var == var)
            .find_map(|a| a.value.as_ref().map(|v| (a, v)))?;
        match value {
            Value::Var(v) => {
                var = v.clone();
                before = a.byte;
            }
            other => return Some(other.clone()),
        }
    }
    None
}

/// The error constant `var` surely holds at byte `at`: its latest assignment before `at` on
/// every path there (not one inside a branch that `at` is outside of: `if (!p) { ret =
/// ERR_PTR(-ENOMEM); goto out; }` says nothing of a later `goto out`), when that is an
/// `ERR_PTR(-ECONST)`; `None` when it is anything else (`ERR_CAST(p->attach)`, a pointer).
fn held_at(b: &BodyExits, var: &str, at: usize) -> Option<Value> {
    let a = b
        .assigns
        .iter()
        .rev()
        .find(|a| a.byte < at && a.var == var && on_every_path_to(a.node, at))?;
    match &a.value {
        Some(c @ Value::Const(_)) => Some(c.clone()),
        _ => None,
    }
}

/// Every block, branch, loop and case around `n` also holds byte `at`.
fn on_every_path_to(n: Node, at: usize) -> bool {
    let mut p = n.parent();
    while let Some(x) = p {
        match crate::cfields::kind(x) {
            "function_definition" => return true,
            "compound_statement"
            | "if_statement"
            | "else_clause"
            | "for_statement"
            | "while_statement"
            | "do_statement"
            | "case_statement"
            | "switch_statement"
            | "conditional_expression"
                if !(x.start_byte() <= at && at < x.end_byte()) =>
            {
                return false;
            }
            _ => {}
        }
        p = x.parent();
    }
    true
}

/// The last statement of a branch (the branch itself when it is not a block).
fn last_statement(n: Node) -> Option<Node> {
    if crate::cfields::kind(n) != "compound_statement" {
        return Some(n);
    }
    let mut c = n.walk();
    let last = n
        .named_children(&mut c)
        .filter(|s| crate::cfields::kind(*s) != "comment")
        .last();
    last
}

/// The error a branch exits with: its return's value, or the return its goto reaches.
fn branch_exit(branch: Node, b: &BodyExits, src: &str) -> Option<Value> {
    let s = last_statement(branch)?;
    let v = match crate::cfields::kind(s) {
        "return_statement" => returned(s, b, src, None)?,
        "goto_statement" => label_exit(
            text(s.field(crate::cfields::fields().label)?, src),
            b,
            src,
            s.start_byte(),
        )?,
        _ => return None,
    };
    Some(match v {
        Value::Var(var) => latest(b, &var, s.start_byte())?,
        other => other,
    })
}

/// The value the first return on the label's path returns, reached by a `goto` at byte `at`.
fn label_exit(label: &str, b: &BodyExits, src: &str, at: usize) -> Option<Value> {
    let l = b.labels.get(label)?;
    let stmt = (*l.first_return.get_or_init(|| first_return(l)))?;
    returned(stmt, b, src, Some(at))
}

/// The first return among the label's statement and the named statements that follow it.
fn first_return<'t>(l: &Label<'t>) -> Option<Node<'t>> {
    for &n in std::iter::once(&l.stmt).chain(&l.following) {
        let stmt = if crate::cfields::kind(n) == "labeled_statement" {
            let mut c = n.walk();
            let inner = n
                .named_children(&mut c)
                .filter(|x| crate::cfields::kind(*x) != "statement_identifier")
                .last();
            inner?
        } else {
            n
        };
        if crate::cfields::kind(stmt) == "return_statement" {
            return Some(stmt);
        }
    }
    None
}

/// The sites of one `if`: its branch and its `else` branch.
fn if_sites(i: Node, b: &BodyExits, src: &str, out: &mut Vec<ErrorSite>) {
    let Some(cond) = i.field(crate::cfields::fields().condition) else {
        return;
    };
    let branches = [
        i.field(crate::cfields::fields().consequence),
        i.field(crate::cfields::fields().alternative)
            .and_then(|e| e.named_child(0)),
    ];
    for branch in branches.into_iter().flatten() {
        if crate::cfields::kind(branch) == "if_statement" {
            continue;
        }
        let Some(exit) = branch_exit(branch, b, src) else {
            continue;
        };
        let (errno, shape) = match exit {
            Value::Const(e) => {
                let shape = classify(cond, Some(&e), b, src);
                (Some(e), shape)
            }
            Value::Call(f) => (None, SiteShape::Callee(f)),
            Value::Var(_) => continue,
        };
        out.push(ErrorSite {
            line: line(i),
            errno,
            shape,
            check: check_text(cond, src),
        });
    }
}

/// What decides an exit whose error is the constant `errno`, from its condition: a state
/// test, a lookup by the caller's key that found nothing, a call's result (the callee's
/// checks, or a predicate), an exhaustion constant, else a check of the request.
fn classify(cond: Node, errno: Option<&str>, b: &BodyExits, src: &str) -> SiteShape {
    if mentions_state(text(cond, src)) {
        return SiteShape::State;
    }
    if let Some(key) = lookup_key(cond, b, src) {
        return SiteShape::Lookup(key);
    }
    if let Some(f) = tested_call(cond, b, src) {
        return SiteShape::Callee(f);
    }
    if errno.is_some_and(|e| EXHAUSTION.contains(&e)) {
        return SiteShape::Resources;
    }
    SiteShape::Request
}

/// The caller's key of a lookup the condition finds empty: the condition is a negation (`!x`,
/// `x == NULL`, `x == 0`) of a table entry indexed by a parameter (`tbl[index]`,
/// `tbl[qpn & mask]`), or of a predicate on one (`!is_gid_entry_valid(table->data_vec[index])`);
/// the key is the subscript's index as written.
fn lookup_key(cond: Node, b: &BodyExits, src: &str) -> Option<String> {
    let f = crate::cfields::fields();
    let n = unwrap_expr(cond);
    let tested = match crate::cfields::kind(n) {
        "unary_expression" if n.field(f.operator).map(|o| text(o, src)) == Some("!") => {
            unwrap_expr(n.field(f.argument)?)
        }
        "binary_expression"
            if n.field(f.operator).map(|o| text(o, src)) == Some("==")
                && matches!(
                    n.field(f.right).map(|r| text(unwrap_expr(r), src)),
                    Some("NULL" | "0")
                ) =>
        {
            unwrap_expr(n.field(f.left)?)
        }
        _ => return None,
    };
    // the entry itself, or the arguments of a predicate on it (not an error test: `!IS_ERR(x)`
    // says the opposite)
    let operands: Vec<Node> = match crate::cfields::kind(tested) {
        "call_expression" => {
            if call_name(tested, src).is_some_and(|c| TRANSPARENT_CALLS.contains(&c)) {
                return None;
            }
            let args = tested.field(f.arguments)?;
            let mut c = args.walk();
            let v: Vec<Node> = args.named_children(&mut c).collect();
            v
        }
        _ => vec![tested],
    };
    operands
        .into_iter()
        .find_map(|o| keyed_subscript(unwrap_expr(o), b, src))
}

/// The index of `x[key]` (through `->`/`.` of it and `&`) when `key` names a parameter.
fn keyed_subscript(mut n: Node, b: &BodyExits, src: &str) -> Option<String> {
    let f = crate::cfields::fields();
    loop {
        match crate::cfields::kind(n) {
            "field_expression" => n = unwrap_expr(n.field(f.argument)?),
            "pointer_expression" => n = unwrap_expr(n.field(f.argument)?),
            "subscript_expression" => {
                let index = n.field(f.index)?;
                return names_a_param(index, b, src).then(|| {
                    let t = text(unwrap_expr(index), src);
                    t.split_whitespace().collect::<Vec<_>>().join(" ")
                });
            }
            _ => return None,
        }
    }
}

/// The expression uses one of the function's parameters as a value (`index`, `qpn & mask`),
/// not through a field of it (`attr->idx`, `dev->cur`: what a structure holds, the caller's
/// or the object's, the syntax cannot tell).
fn names_a_param(n: Node, b: &BodyExits, src: &str) -> bool {
    if crate::cfields::kind(n) == "identifier" {
        return b.params.iter().any(|p| p == text(n, src));
    }
    if matches!(
        crate::cfields::kind(n),
        "field_expression" | "field_identifier"
    ) {
        return false;
    }
    let mut c = n.walk();
    let found = n.named_children(&mut c).any(|x| names_a_param(x, b, src));
    found
}

/// A condition that mentions a state (`cur_state`, `attr->qp_state`, `qp->state`).
fn mentions_state(cond: &str) -> bool {
    cond.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .any(|t| t.to_ascii_lowercase().split('_').any(|p| p == "state"))
}

/// The call whose result the condition tests: `f(...)`, `!f(...)`, `ret` (from `ret = f()`),
/// `IS_ERR(x)`, `ret < 0`, through the transparent wrappers.
fn tested_call(cond: Node, b: &BodyExits, src: &str) -> Option<String> {
    let mut n = unwrap_expr(cond);
    loop {
        match crate::cfields::kind(n) {
            "unary_expression"
                if n.field(crate::cfields::fields().operator)
                    .map(|o| text(o, src))
                    == Some("!") =>
            {
                n = unwrap_expr(n.field(crate::cfields::fields().argument)?);
            }
            "binary_expression" => {
                let op = n
                    .field(crate::cfields::fields().operator)
                    .map(|o| text(o, src))?;
                let r = unwrap_expr(n.field(crate::cfields::fields().right)?);
                let zero = matches!(text(r, src), "0" | "NULL");
                if !(zero && matches!(op, "<" | "!=" | "==")) {
                    return None;
                }
                n = unwrap_expr(n.field(crate::cfields::fields().left)?);
            }
            "assignment_expression" => n = unwrap_expr(n.field(crate::cfields::fields().right)?),
            "call_expression" => {
                let name = call_name(n, src)?;
                if TRANSPARENT_CALLS.contains(&name) {
                    n = unwrap_expr(first_arg(n)?);
                    continue;
                }
                return Some(name.to_string());
            }
            "identifier" => {
                return match latest(b, text(n, src), cond.start_byte())? {
                    Value::Call(f) => Some(f),
                    _ => None,
                };
            }
            _ => return None,
        }
    }
}

/// A `return <error>` not in an `if` branch: in a switch case (`in_case`: a value outside the
/// cases, the request), or unconditional before the first label.
fn plain_return_site(r: Node, in_case: bool, b: &BodyExits, src: &str) -> Option<ErrorSite> {
    if !in_case && r.start_byte() > b.first_label {
        return None;
    }
    let v = match returned(r, b, src, None)? {
        Value::Var(var) => latest(b, &var, r.start_byte())?,
        v => v,
    };
    let (errno, shape) = match v {
        Value::Const(e) if in_case => (Some(e), SiteShape::Request),
        Value::Const(e) => (Some(e), SiteShape::Unconditional),
        Value::Call(f) => (None, SiteShape::Callee(f)),
        Value::Var(_) => return None,
    };
    Some(ErrorSite {
        line: line(r),
        errno,
        shape,
        check: String::new(),
    })
}

/// The condition as written, whitespace collapsed, at most [`MAX_CHECK_CHARS`] characters.
fn check_text(cond: Node, src: &str) -> String {
    let t = text(unwrap_expr(cond), src);
    let mut s = t.split_whitespace().collect::<Vec<_>>().join(" ");
    if s.chars().count() > MAX_CHECK_CHARS {
        s = s.chars().take(MAX_CHECK_CHARS - 3).collect::<String>() + "...";
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sites(code: &str) -> Vec<ErrorSite> {
        let mut p = crate::cparse::new_parser();
        let f = crate::cparse::extract(&mut p, "x.c", code);
        f.functions
            .into_iter()
            .flat_map(|f| f.error_sites)
            .collect()
    }

    fn shapes(code: &str) -> Vec<(usize, Option<String>, SiteShape)> {
        sites(code)
            .into_iter()
            .map(|s| (s.line, s.errno, s.shape))
            .collect()
    }

    fn e(s: &str) -> Option<String> {
        Some(s.to_string())
    }

    /// The named nodes after a node in its parent's list of children (what a label keeps from
    /// the walk) are what `Node::next_named_sibling` gives, from every node of a body with
    /// labels, comments, empty statements, nested blocks and a label that ends the body.
    #[test]
    fn the_listed_named_siblings_are_what_next_named_sibling_finds() {
        let code = "int f(int x)\n{\n\tint r = 0;\n\tif (x)\n\t\tgoto out; /* why */\n\t;\n\
                    err: /* c */ r = -EINVAL;\n\t{ a: ; b: r++; }\n\t// done\n\
                    out:\n\tkfree(p);\n\treturn r;\nend:\n\t;\n}\n";
        let mut p = crate::cparse::new_parser();
        let tree = p.parse(code, None).expect("parsed");
        let mut parents = vec![tree.root_node()];
        let mut checked = 0;
        while let Some(parent) = parents.pop() {
            let mut listed = Vec::new();
            crate::children::push_children(parent, &mut listed);
            for (i, &here) in listed.iter().enumerate() {
                let by_list: Vec<usize> = listed[i + 1..]
                    .iter()
                    .filter(|x| x.is_named())
                    .map(|x| x.id())
                    .collect();
                let mut by_node = Vec::new();
                let mut n = here;
                while let Some(next) = n.next_named_sibling() {
                    by_node.push(next.id());
                    n = next;
                }
                assert_eq!(
                    by_list,
                    by_node,
                    "after {} at {}",
                    here.kind(),
                    here.start_byte()
                );
                checked += usize::from(!by_node.is_empty());
            }
            parents.extend(listed);
        }
        assert!(checked > 20, "{checked} nodes with a next named sibling");
    }

    /// A `goto` to a label whose return is the sixteenth statement from it (the label's own
    /// the first) reaches that return; one statement further, it is past what a label reads.
    #[test]
    fn a_label_reads_sixteen_statements() {
        let body = |fillers: usize| {
            let mut c = String::from(
                "static int f(int x)\n{\n\tif (x)\n\t\tgoto out;\n\treturn 0;\nout:\n\tx++;\n",
            );
            for _ in 0..fillers {
                c.push_str("\tx++;\n");
            }
            c.push_str("\treturn -EINVAL;\n}\n");
            c
        };
        assert_eq!(
            shapes(&body(14)),
            vec![(3, e("EINVAL"), SiteShape::Request)]
        );
        assert_eq!(shapes(&body(15)), vec![]);
    }

    #[test]
    fn a_limit_check_through_a_goto_label_is_the_request() {
        let code = "static int chk(struct dev *d, struct cap *cap)\n{\n\tif (cap->max_wr > d->attr.max_qp_wr) {\n\t\tpr(\"x\");\n\t\tgoto err1;\n\t}\n\treturn 0;\nerr1:\n\treturn -EINVAL;\n}\n";
        assert_eq!(shapes(code), vec![(3, e("EINVAL"), SiteShape::Request)]);
        assert_eq!(sites(code)[0].check, "cap->max_wr > d->attr.max_qp_wr");
    }

    #[test]
    fn a_callee_tested_with_a_constant_of_its_own_names_the_callee() {
        let code = "int f(struct a *a)\n{\n\tif (chk_cap(a))\n\t\tgoto err1;\n\tswitch (a->type) {\n\tcase 1:\n\t\tbreak;\n\tdefault:\n\t\treturn -EOPNOTSUPP;\n\t}\n\treturn 0;\nerr1:\n\treturn -EINVAL;\n}\n";
        assert_eq!(
            shapes(code),
            vec![
                (3, e("EINVAL"), SiteShape::Callee("chk_cap".into())),
                (9, e("EOPNOTSUPP"), SiteShape::Request),
            ]
        );
    }

    #[test]
    fn propagation_allocation_and_state() {
        let code = "int g(struct q *q, int cur_state, int new_state)\n{\n\tint ret;\n\tstruct x *p = kzalloc(8, 0);\n\tif (!p)\n\t\treturn -ENOMEM;\n\tret = do_cmd(q);\n\tif (ret)\n\t\treturn ret;\n\tif (!modify_ok(cur_state, new_state))\n\t\treturn -EINVAL;\n\tif (q->n > lock_limit) {\n\t\tret = -ENOMEM;\n\t\tgoto out;\n\t}\n\treturn tail(q);\nout:\n\treturn ret;\n}\n";
        assert_eq!(
            shapes(code),
            vec![
                (5, e("ENOMEM"), SiteShape::Callee("kzalloc".into())),
                (8, None, SiteShape::Callee("do_cmd".into())),
                (10, e("EINVAL"), SiteShape::State),
                (12, e("ENOMEM"), SiteShape::Resources),
                (16, None, SiteShape::Callee("tail".into())),
            ]
        );
    }

    #[test]
    fn a_lookup_by_the_caller_s_index_that_finds_nothing_is_its_own_shape() {
        // the initial value is the error, a goto skips the success that replaces it
        let code = "const struct ent *get_ent(struct tbl *t, int index)\n{\n\tconst struct ent *e = ERR_PTR(-ENODATA);\n\n\tif (index < 0 || index >= t->sz)\n\t\treturn ERR_PTR(-EINVAL);\n\tlock(t);\n\tif (!ent_valid(t->vec[index]))\n\t\tgoto done;\n\te = &t->vec[index]->attr;\ndone:\n\tunlock(t);\n\treturn e;\n}\n";
        assert_eq!(
            shapes(code),
            vec![
                (5, e("EINVAL"), SiteShape::Request),
                (8, e("ENODATA"), SiteShape::Lookup("index".into())),
            ]
        );
        assert_eq!(sites(code)[1].check, "!ent_valid(t->vec[index])");
        // a key computed from the caller's argument, an entry tested against NULL
        let code = "int use(struct dev *d, u32 qpn)\n{\n\tif (d->tbl[qpn & 0xff] == NULL)\n\t\treturn -ENOENT;\n\tif (!d->tbl[d->cur])\n\t\treturn -EINVAL;\n\tif (d->tbl[qpn])\n\t\treturn -EBUSY;\n\treturn 0;\n}\n";
        assert_eq!(
            shapes(code),
            vec![
                (3, e("ENOENT"), SiteShape::Lookup("qpn & 0xff".into())),
                // indexed by a field (the device's own state here): not told apart, a check
                (5, e("EINVAL"), SiteShape::Request),
                // the entry is there: not a lookup that found nothing
                (7, e("EBUSY"), SiteShape::Request),
            ]
        );
    }

    #[test]
    fn a_pointer_returned_as_it_is_is_the_success_unless_it_holds_an_error() {
        // the goto is taken after the variable got the success: no site
        let code = "struct m *h(struct a *a)\n{\n\tstruct m *m = ERR_PTR(-ENOMEM);\n\tm = find(a);\n\tif (!m->ok)\n\t\tgoto out;\n\tm->n++;\nout:\n\treturn m;\n}\n";
        assert_eq!(shapes(code), vec![]);
        // the value at each goto: an assignment in a branch that already jumped says nothing
        // of a later goto to the same label; one the walk cannot read stops the search
        let code = "struct u *mk(struct dev *d, int fd)\n{\n\tstruct u *ret = ERR_PTR(-EINVAL);\n\tstruct u *u;\n\tif (d->size < fd)\n\t\tgoto out;\n\tu = kzalloc(8, 0);\n\tif (!u) {\n\t\tret = ERR_PTR(-ENOMEM);\n\t\tgoto out;\n\t}\n\tif (!count_pages(u))\n\t\tgoto out_free;\n\tu->att = attach(d);\n\tif (IS_ERR(u->att)) {\n\t\tret = ERR_CAST(u->att);\n\t\tgoto out_free;\n\t}\n\treturn u;\nout_free:\n\tkfree(u);\nout:\n\tput(d);\n\treturn ret;\n}\n";
        assert_eq!(
            shapes(code),
            vec![
                (5, e("EINVAL"), SiteShape::Request),
                (8, e("ENOMEM"), SiteShape::Callee("kzalloc".into())),
                (12, e("EINVAL"), SiteShape::Callee("count_pages".into())),
            ]
        );
    }

    #[test]
    fn err_ptr_returns_and_non_errors() {
        let code = "struct m *h(struct a *a)\n{\n\tstruct m *m = lookup(a);\n\tif (IS_ERR(m))\n\t\treturn ERR_CAST(m);\n\tif (a->len == 0)\n\t\treturn ERR_PTR(-EINVAL);\n\tif (a->x)\n\t\treturn NULL;\n\treturn m;\n}\n";
        assert_eq!(
            shapes(code),
            vec![
                (4, None, SiteShape::Callee("lookup".into())),
                (6, e("EINVAL"), SiteShape::Request),
                // `m` may hold lookup's ERR_PTR (the body tests it with IS_ERR): passed on
                (10, None, SiteShape::Callee("lookup".into())),
            ]
        );
    }
}
