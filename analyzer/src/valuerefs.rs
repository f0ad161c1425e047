//! Names a body stores into fields or passes to calls (`FunctionDef::value_refs`): the
//! callbacks it installs (`attr.event_handler = ib_uverbs_qp_event_handler`,
//! `INIT_IB_EVENT_HANDLER(&h, dev, ib_uverbs_event_handler)`) and the constants it sets
//! (`event.event = IB_EVENT_QP_FATAL`, `qp->attr.qp_state = IB_QPS_ERR`). Which fields and
//! calls matter is the rules' business (heuristics): the facts keep every one, so a cached
//! file never depends on the rules.

use crate::children::FieldChild;
use tree_sitter::Node;

use crate::cfields::{fields, text, Assignment, Locals};
use crate::model::{RefSite, ValueRef};

fn line(n: Node) -> usize {
    n.start_position().row + 1
}

/// A bare identifier that is not a local: a function, a global or a constant.
fn outside_name<'a>(n: Node, src: &'a str, locals: &Locals) -> Option<&'a str> {
    let mut v = n;
    // `&f` and `(f)` name f as well
    while matches!(
        crate::cfields::kind(v),
        "parenthesized_expression" | "pointer_expression"
    ) {
        if crate::cfields::kind(v) == "pointer_expression"
            && v.field(fields().operator).map(|o| text(o, src)) != Some("&")
        {
            return None;
        }
        v = v.field(fields().argument).or_else(|| v.named_child(0))?;
    }
    let name = text(v, src);
    (crate::cfields::kind(v) == "identifier" && !locals.contains(name)).then_some(name)
}

/// The keywords that start an expression (`sizeof(*qp)`, `true`): where an argument may
/// stand tree-sitter-c reads them as keywords, never as a name. Not the type keywords: in
/// `min_t(int, a, b)` a type is no expression, and tree-sitter takes `int` for a name there.
const EXPRESSION_KEYWORDS: [&str; 3] = ["sizeof", "true", "false"];

/// Whether `text` (a call's arguments) may hold an argument [`of_call`] keeps: a word with a
/// lower-case letter that is not an expression's keyword, not a callee (before a `(`), not a
/// local and not a field (not after `.` or `->` on its line), outside numbers, comments,
/// string and character literals. In doubt (a literal or comment
/// left open) yes: an argument missed would be a fact lost, a needless look only costs time.
fn may_name_outside(text: &str, locals: &Locals) -> bool {
    let b = text.as_bytes();
    let is_word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        // comments, where a quote opens nothing
        if c == b'/' && b.get(i + 1) == Some(&b'*') {
            match text.get(i + 2..).and_then(|rest| rest.find("*/")) {
                Some(end) => i += 2 + end + 2,
                None => return true,
            }
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            match text.get(i..).and_then(|rest| rest.find('\n')) {
                Some(end) => i += end,
                None => return false,
            }
            continue;
        }
        if c.is_ascii_digit() {
            // a number's letters (`0x1f`, `10ul`) are no name
            while b.get(i).copied().is_some_and(is_word) {
                i += 1;
            }
            continue;
        }
        if c == b'"' || c == b'\'' {
            // to the closing quote, past escapes
            let mut j = i + 1;
            loop {
                match b.get(j) {
                    None => return true,
                    Some(b'\\') => j += 2,
                    Some(&q) if q == c => break,
                    Some(_) => j += 1,
                }
            }
            i = j + 1;
            continue;
        }
        if !(c.is_ascii_alphabetic() || c == b'_') {
            i += 1;
            continue;
        }
        let start = i;
        while b.get(i).copied().is_some_and(is_word) {
            i += 1;
        }
        let word = &text[start..i];
        if !word.bytes().any(|c| c.is_ascii_lowercase()) || EXPRESSION_KEYWORDS.contains(&word) {
            continue;
        }
        // a word before `(` is a callee (`be32_to_cpu(x)`): the argument is the call
        let next = b[i..].iter().find(|c| !c.is_ascii_whitespace());
        if next == Some(&b'(') || locals.contains(word) {
            continue;
        }
        let before = b[..start].iter().rposition(|&c| c != b' ' && c != b'\t');
        let field = match before {
            Some(k) => b[k] == b'.' || (b[k] == b'>' && k > 0 && b[k - 1] == b'-'),
            None => false,
        };
        if !field {
            return true;
        }
    }
    false
}

/// `a->f = x` / `a.f = x`: (field, through a pointer).
fn stored_field(left: Node, src: &str) -> Option<(String, bool)> {
    if crate::cfields::kind(left) != "field_expression" {
        return None;
    }
    let field = text(left.field(fields().field)?, src).to_string();
    // through a pointer when any `->` leads to the field (`qp->attr.qp_state`)
    let through_pointer = text(left, src).contains("->");
    Some((field, through_pointer))
}

/// The value refs of an assignment (`=` only: `|=` and friends compute, they install nothing).
pub(crate) fn of_assignment(a: &Assignment, src: &str, locals: &Locals, out: &mut Vec<ValueRef>) {
    if !a.plain {
        return;
    }
    let (Some(left), Some(right)) = (a.left, a.right) else {
        return;
    };
    let (Some((field, through_pointer)), Some(name)) =
        (stored_field(left, src), outside_name(right, src, locals))
    else {
        return;
    };
    out.push(ValueRef {
        site: RefSite::Field {
            field,
            through_pointer,
        },
        name: name.to_string(),
        line: line(a.node),
    });
}

/// `.f = x` in an initializer list (a local's or a compound literal's: not through a pointer).
pub(crate) fn of_initializer_pair(n: Node, src: &str, locals: &Locals, out: &mut Vec<ValueRef>) {
    // the first designator (`.a.b = x`: `.a`)
    let Some(designator) = n.field(fields().designator) else {
        return;
    };
    let Some(value) = n.field(fields().value) else {
        return;
    };
    let field = text(designator, src).trim_start_matches('.').trim();
    if field.is_empty()
        || !field
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        return;
    }
    if let Some(name) = outside_name(value, src, locals) {
        out.push(ValueRef {
            site: RefSite::Field {
                field: field.to_string(),
                through_pointer: false,
            },
            name: name.to_string(),
            line: line(n),
        });
    }
}

/// The arguments of a call by name that name something outside the body. Only names with a
/// lower-case letter (functions, by the kernel's style): constants passed as arguments are
/// too many to keep and no rule reads them.
pub(crate) fn of_call(
    call: Node,
    function: Node,
    src: &str,
    locals: &Locals,
    out: &mut Vec<ValueRef>,
) {
    // the callee node as the walk found it: a field lookup walks the call's children again
    if crate::cfields::kind(function) != "identifier" {
        return;
    }
    let callee = text(function, src);
    // Most calls pass locals, fields, constants: their argument list's text (what follows
    // the callee) says so without a look at its nodes.
    let after_callee = src.get(function.end_byte()..call.end_byte()).unwrap_or("");
    if may_name_outside(after_callee, locals) {
        of_arguments(call, callee, src, locals, out);
    }
}

/// [`of_call`]'s look at each argument node.
fn of_arguments(call: Node, callee: &str, src: &str, locals: &Locals, out: &mut Vec<ValueRef>) {
    let Some(args) = call.field(fields().arguments) else {
        return;
    };
    // The list's children at once (`crate::children`; `named_child(i)` walks the list from
    // its start for each `i`). The index counts the named children, as `named_child` does.
    let mut listed = Vec::new();
    crate::children::push_children(args, &mut listed);
    let mut named = 0;
    for a in listed {
        if !a.is_named() {
            continue;
        }
        let index = named;
        named += 1;
        let Some(name) = outside_name(a, src, locals) else {
            continue;
        };
        if name.bytes().any(|b| b.is_ascii_lowercase()) {
            out.push(ValueRef {
                site: RefSite::Argument {
                    callee: callee.to_string(),
                    index,
                },
                name: name.to_string(),
                line: line(a),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every call by name in `src`'s first function: what `of_call` keeps with the text's
    /// filter, and what a look at every argument keeps.
    fn with_and_without_filter(src: &str) -> (Vec<ValueRef>, Vec<ValueRef>) {
        let tree = crate::cparse::new_parser()
            .parse(src, None)
            .expect("parsed");
        let mut locals = Locals::default();
        for l in ["qp", "attr", "ret", "i"] {
            locals.insert(l);
        }
        let (mut filtered, mut all) = (Vec::new(), Vec::new());
        let mut stack = vec![tree.root_node()];
        while let Some(n) = stack.pop() {
            let mut c = n.walk();
            stack.extend(n.children(&mut c));
            if crate::cfields::kind(n) != "call_expression" {
                continue;
            }
            let Some(f) = n.field(fields().function) else {
                continue;
            };
            of_call(n, f, src, &locals, &mut filtered);
            if crate::cfields::kind(f) == "identifier" {
                of_arguments(n, text(f, src), src, &locals, &mut all);
            }
        }
        filtered.sort();
        all.sort();
        (filtered, all)
    }

    #[test]
    fn the_text_filter_keeps_every_argument_a_look_at_the_nodes_keeps() {
        let calls = [
            "a(qp, attr)",
            "a(qp->dev, &attr.cb, ret)",
            "a(handler)",
            "a(&handler)",
            "a((handler))",
            "a(qp, GFP_KERNEL, 0x1fab, 10ul)",
            "a(\"%s handler\", ret)",
            "a('\\'', handler)",
            "a(/* don't */ qp, /* won't */ handler)",
            "a(qp // a comment ends with a dot.\n\t, handler)",
            "a(qp.\n\thandler)",
            "a(qp\n\t->handler, x)",
            "a(b(qp), c(handler))",
            "a(\"unterminated, handler)",
            "a(qp, /* open, handler)",
            "a(sizeof(*qp), (unsigned int)ret, true, handler)",
            "a(be32_to_cpu (ret), to_dev(qp)->cb, handler)",
            "a(false, typeof_handler, sizeof_cb)",
            "min_t(int, ret, qp)",
            "a(unsigned, qp)",
            "a(long, qp)",
        ];
        let mut kept = 0;
        for call in calls {
            let src = format!("void f(void)\n{{\n\t{call};\n}}\n");
            let (filtered, all) = with_and_without_filter(&src);
            assert_eq!(filtered, all, "{call}");
            kept += all.len();
        }
        assert!(
            kept >= 8,
            "the cases keep arguments, so the comparison can fail: {kept}"
        );
        // and the filter does skip: locals, fields and constants only
        let locals: Locals = ["qp", "attr"].into_iter().collect();
        assert!(!may_name_outside(
            "(qp->dev, &attr.cb, GFP_KERNEL, 10ul, \"handler\")",
            &locals
        ));
        assert!(may_name_outside("(qp, handler)", &locals));
    }
}
