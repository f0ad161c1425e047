//! A node's children listed at once, from the parse tree's own arrays (csrc/visible_children.c):
//! the body walk's way down a tree. A tree cursor's step to the next sibling costs ~700
//! instructions (it climbs out of and back into the hidden repetition nodes between two
//! statements); the listing costs tens per child, and the list is then indexed.

use tree_sitter::{ffi, Node};

extern "C" {
    /// Writes up to `cap` of `node`'s visible children to `out`; returns how many it has, or
    /// `u32::MAX` when its hidden nodes nest deeper than the listing goes.
    fn probegen_visible_children(node: ffi::TSNode, out: *mut ffi::TSNode, cap: u32) -> u32;
}

/// Appends `n`'s children (`n.child(i)` for each `i`, in order) to `out`; returns how many.
pub(crate) fn push_children<'t>(n: Node<'t>, out: &mut Vec<Node<'t>>) -> usize {
    let count = n.child_count();
    if count == 0 {
        return 0;
    }
    out.reserve(count);
    let spare = out.spare_capacity_mut();
    let cap = u32::try_from(spare.len()).unwrap_or(u32::MAX);
    // SAFETY: `Node` is `repr(transparent)` over `TSNode` (its other field is a PhantomData),
    // the listing writes at most `cap` nodes into the spare capacity, and every node it writes
    // points into `n`'s tree, which outlives 't as `n` does.
    let listed = unsafe { probegen_visible_children(n.into_raw(), spare.as_mut_ptr().cast(), cap) };
    if usize::try_from(listed).is_ok_and(|l| l == count) {
        // SAFETY: the first `count` (<= cap) spare slots were written above.
        unsafe { out.set_len(out.len() + count) };
        return count;
    }
    // Hidden nodes nested too deep for the listing (or a count that disagrees): the public
    // API, which gives the same nodes one cursor step at a time.
    let mut cursor = n.walk();
    let before = out.len();
    out.extend(n.children(&mut cursor));
    out.len() - before
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every node's listing is what `Node::child` gives, node for node (the same ids, kinds,
    /// byte ranges and positions), over a file with comments, macros, aliases, errors and the
    /// long statement lists whose repetitions tree-sitter nests in hidden nodes.
    #[test]
    fn the_listing_is_what_node_child_gives() {
        let mut code = String::from(
            "#include <linux/x.h>\n#define F(x) ((x) + 1)\nstruct ops o = { .a = f, .b = g, };\n\
             static int f(int a, char *b) /* c */\n{\n\tint r = 0; // c\n\tif (a) goto out;\n\
             \tswitch (a) { case 1: r = F(a); break; default: ; }\n\tr = ({ int t = a; t; });\n\
             out:\n\treturn r ? -EINVAL : b[0];\n}\nint g( { ) ) ;;\n",
        );
        for i in 0..300 {
            code.push_str(&format!("void h{i}(void) {{ a{i}(); b = c{i} + {i}; }}\n"));
        }
        code.push_str("int k(void)\n{\n");
        for i in 0..2000 {
            code.push_str(&format!("\tx{i} = y(z{i}, \"s\\n\", 'c');\n"));
        }
        code.push_str("}\n");
        let mut p = crate::cparse::new_parser();
        let tree = p.parse(&code, None).expect("parsed");
        let mut stack = vec![tree.root_node()];
        let (mut nodes, mut listed) = (0usize, Vec::new());
        while let Some(n) = stack.pop() {
            listed.clear();
            let count = push_children(n, &mut listed);
            let by_child: Vec<Node> = (0..n.child_count()).filter_map(|i| n.child(i)).collect();
            assert_eq!(count, by_child.len(), "{} at {}", n.kind(), n.start_byte());
            for (a, b) in listed.iter().zip(&by_child) {
                assert_eq!(
                    (
                        a.id(),
                        a.kind_id(),
                        a.byte_range(),
                        a.start_position(),
                        a.is_named()
                    ),
                    (
                        b.id(),
                        b.kind_id(),
                        b.byte_range(),
                        b.start_position(),
                        b.is_named()
                    ),
                    "child of {} at {}",
                    n.kind(),
                    n.start_byte()
                );
            }
            nodes += count;
            stack.extend(by_child);
        }
        assert!(nodes > 30_000, "{nodes} nodes listed");
        assert!(
            tree.root_node().has_error(),
            "the file has an error to recover from"
        );
    }

    /// Appending keeps what the vector held.
    #[test]
    fn the_listing_appends() {
        let mut p = crate::cparse::new_parser();
        let tree = p.parse("int a; int b; int c;", None).expect("parsed");
        let root = tree.root_node();
        let mut out = vec![root];
        assert_eq!(push_children(root, &mut out), 3);
        assert_eq!(out.len(), 4);
        assert_eq!(out[0].id(), root.id());
        assert_eq!(out[3].id(), root.child(2).expect("third").id());
    }
}
