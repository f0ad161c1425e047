//! A node's children listed at once, from the parse tree's own arrays (csrc/visible_children.c):
//! the body walk's way down a tree. A tree cursor's step to the next sibling costs ~700
//! instructions (it climbs out of and back into the hidden repetition nodes between two
//! statements); the listing costs tens per child, and the list is then indexed.

use tree_sitter::{ffi, Node};

extern "C" {
    /// Writes `node`'s visible children to `out`, the first `cap` of them; returns how many it
    /// wrote, or `u32::MAX` when its hidden nodes nest deeper than the listing goes.
    fn probegen_visible_children(node: ffi::TSNode, out: *mut ffi::TSNode, cap: u32) -> u32;
    /// The child `ts_node_child_by_field_id(node, field)` gives; its id is null for none.
    /// `too_deep` is set when hidden nodes nest deeper than the search goes.
    fn probegen_child_by_field(node: ffi::TSNode, field: u16, too_deep: *mut bool) -> ffi::TSNode;
}

/// A node's child by field id: what `Node::child_by_field_id` gives, computing no node on the
/// way but the one it returns (tree-sitter's makes a node of every child it passes and finds a
/// hidden child's first visible one by a search from its start: ~400 instructions a lookup,
/// and the walks look up hundreds of thousands).
pub(crate) trait FieldChild<'t> {
    fn field(&self, id: u16) -> Option<Node<'t>>;
}

impl<'t> FieldChild<'t> for Node<'t> {
    fn field(&self, id: u16) -> Option<Node<'t>> {
        let mut too_deep = false;
        // SAFETY: a node of a live tree in, a node of the same tree (or a null one) out.
        let raw = unsafe { probegen_child_by_field((*self).into_raw(), id, &mut too_deep) };
        if too_deep {
            return self.child_by_field_id(id);
        }
        if raw.id.is_null() {
            return None;
        }
        // SAFETY: a node of `self`'s tree, which lives for 't.
        Some(unsafe { Node::from_raw(raw) })
    }
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

/// A preorder walk of a node's descendants down lists of children, where the caller says which
/// nodes to go down into (`descend`, right after `next` gave the node).
pub(crate) struct Preorder<'t> {
    /// The children of the node and of each node gone down into, each list after its parent's.
    nodes: Vec<Node<'t>>,
    /// Per list: where it starts in `nodes`, the next to visit, where it ends.
    lists: Vec<[usize; 3]>,
}

impl<'t> Preorder<'t> {
    /// The walk of `n`'s children (and of what it is told to go down into).
    pub(crate) fn below(n: Node<'t>) -> Self {
        let mut nodes = Vec::with_capacity(64);
        let count = push_children(n, &mut nodes);
        Preorder {
            nodes,
            lists: vec![[0, 0, count]],
        }
    }

    /// The next node, in source order.
    pub(crate) fn next(&mut self) -> Option<Node<'t>> {
        loop {
            let list = self.lists.last_mut()?;
            let [base, next, end] = *list;
            if let Some(&n) = self.nodes.get(next).filter(|_| next < end) {
                list[1] += 1;
                return Some(n);
            }
            self.nodes.truncate(base);
            self.lists.pop();
        }
    }

    /// How deep the last node `next` gave is: 1 for a child of the walk's node.
    pub(crate) fn depth(&self) -> usize {
        self.lists.len()
    }

    /// Visit `n`'s children next (`n`: the node `next` gave last).
    pub(crate) fn descend(&mut self, n: Node<'t>) {
        let base = self.nodes.len();
        let count = push_children(n, &mut self.nodes);
        self.lists.push([base, base, base + count]);
    }
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

    /// Every field of every node is the child `Node::child_by_field_id` gives (or none where
    /// it gives none), over the checked-in kernel fixtures (or the tree under
    /// PROBEGEN_FIELDS_TREE) and files with errors, K&R definitions and comments.
    #[test]
    fn the_field_is_child_by_field_id() {
        let dir = std::env::var_os("PROBEGEN_FIELDS_TREE").map_or_else(
            || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernel-fixtures"),
            std::path::PathBuf::from,
        );
        let mut files = Vec::new();
        let mut dirs = vec![dir];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d)
                .expect("the fixtures are readable")
                .flatten()
            {
                let p = e.path();
                if p.is_dir() {
                    dirs.push(p);
                } else if p.extension().is_some_and(|x| x == "c" || x == "h") {
                    let bytes = std::fs::read(&p).expect("readable");
                    files.push(String::from_utf8_lossy(&bytes).into_owned());
                }
            }
        }
        assert!(files.len() > 10, "{} fixture files", files.len());
        // what error recovery made of two kernel functions (hfi1's hfi.h, mthca_cmd.c), a K&R
        // definition (an aliased hidden declarator that passes its fields up), comments
        files.push(
            "int g( { ) ) ;; struct s x = { .a = 1, [2] = 3 }; int f(void) { a = /* c */ b; }\n\
             u32 h(int t)\n{\n\tif (t == 1)\n\t\tx |=\n#ifndef A\n\t\t\tB |\n#endif\n\
             \t\t\tC;\n\telse if (t != 2)\n\t\tx |= D;\n\treturn x;\n}\n\
             void w(void)\n{\n\t__raw_writel((__force u32) cpu_to_be32(p >> 32), ptr + o[0]);\n}\n\
             int kr(a, b) int a; char *b; { return f /* c */ (a, b); }\n"
                .into(),
        );
        let mut p = crate::cparse::new_parser();
        let fields = u16::try_from(p.language().expect("set").field_count()).expect("few");
        let (mut found, mut nodes) = (0usize, 0usize);
        for code in &files {
            let tree = p.parse(code, None).expect("parsed");
            let mut stack = vec![tree.root_node()];
            while let Some(n) = stack.pop() {
                for id in 0..=fields + 1 {
                    let (a, b) = (n.field(id), n.child_by_field_id(id));
                    assert_eq!(
                        a.map(|x| (x.id(), x.kind_id(), x.start_position())),
                        b.map(|x| (x.id(), x.kind_id(), x.start_position())),
                        "field {:?} of {} at {}",
                        n.language().field_name_for_id(id),
                        n.kind(),
                        n.start_byte()
                    );
                    found += usize::from(b.is_some());
                }
                nodes += 1;
                let mut c = n.walk();
                stack.extend(n.children(&mut c));
            }
        }
        assert!(
            nodes > 5_000 && found > 2_000,
            "{nodes} nodes, {found} fields"
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
