//! Names a body stores into fields or passes to calls (`FunctionDef::value_refs`): the
//! callbacks it installs (`attr.event_handler = ib_uverbs_qp_event_handler`,
//! `INIT_IB_EVENT_HANDLER(&h, dev, ib_uverbs_event_handler)`) and the constants it sets
//! (`event.event = IB_EVENT_QP_FATAL`, `qp->attr.qp_state = IB_QPS_ERR`). Which fields and
//! calls matter is the rules' business (heuristics): the facts keep every one, so a cached
//! file never depends on the rules.

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
            && v.child_by_field_id(fields().operator).map(|o| text(o, src)) != Some("&")
        {
            return None;
        }
        v = v
            .child_by_field_id(fields().argument)
            .or_else(|| v.named_child(0))?;
    }
    let name = text(v, src);
    (crate::cfields::kind(v) == "identifier" && !locals.contains(name)).then_some(name)
}

/// `a->f = x` / `a.f = x`: (field, through a pointer).
fn stored_field(left: Node, src: &str) -> Option<(String, bool)> {
    if crate::cfields::kind(left) != "field_expression" {
        return None;
    }
    let field = text(left.child_by_field_id(fields().field)?, src).to_string();
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
    let Some(designator) = n.child_by_field_id(fields().designator) else {
        return;
    };
    let Some(value) = n.child_by_field_id(fields().value) else {
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
    let Some(args) = call.child_by_field_id(fields().arguments) else {
        return;
    };
    // One cursor over the list, stopping at its last child: a sibling step that finds none
    // costs tree-sitter twice one that does, and `named_child(i)` walks the list from its
    // start for each `i`. The index counts the named children, as `named_child` does.
    let mut cursor = args.walk();
    let mut left = args.child_count();
    let mut named = 0;
    let mut at = cursor.goto_first_child();
    while at {
        let a = cursor.node();
        left -= 1;
        at = left > 0 && cursor.goto_next_sibling();
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
