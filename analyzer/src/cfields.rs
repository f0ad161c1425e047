//! A leaf the C walks share (`cparse`'s facts walk, `errsites`' exits, `valuerefs`):
//! tree-sitter-c's field ids and kind names, and what the facts walk reads once for the other
//! readers of a body (its locals, an assignment's parts).

use crate::children::FieldChild;
use tree_sitter::Node;

/// tree-sitter-c's field ids, looked up once: `child_by_field_name` searches the grammar's
/// field names (a string compare per name) on every call, and the walks call it per node.
pub(crate) struct FieldIds {
    pub alternative: u16,
    pub argument: u16,
    pub arguments: u16,
    pub body: u16,
    pub condition: u16,
    pub consequence: u16,
    pub declarator: u16,
    pub designator: u16,
    pub field: u16,
    pub function: u16,
    pub index: u16,
    pub left: u16,
    pub name: u16,
    pub operator: u16,
    pub parameters: u16,
    pub path: u16,
    pub right: u16,
    pub r#type: u16,
    pub value: u16,
    pub label: u16,
}

pub(crate) fn fields() -> &'static FieldIds {
    static IDS: std::sync::OnceLock<FieldIds> = std::sync::OnceLock::new();
    IDS.get_or_init(|| {
        let lang: tree_sitter::Language = tree_sitter_c::LANGUAGE.into();
        // The grammar is compiled in: a missing field is a build error, not an input error.
        let field = |f: &str| {
            lang.field_id_for_name(f)
                .expect("tree-sitter-c has the field")
                .get()
        };
        FieldIds {
            alternative: field("alternative"),
            argument: field("argument"),
            arguments: field("arguments"),
            body: field("body"),
            condition: field("condition"),
            consequence: field("consequence"),
            declarator: field("declarator"),
            designator: field("designator"),
            field: field("field"),
            function: field("function"),
            index: field("index"),
            left: field("left"),
            name: field("name"),
            operator: field("operator"),
            parameters: field("parameters"),
            path: field("path"),
            right: field("right"),
            r#type: field("type"),
            value: field("value"),
            label: field("label"),
        }
    })
}

/// `Node::kind` without its cost per call (a `strlen` and a UTF-8 check of the name): the
/// names by kind id, looked up once. The same name: `Node::kind` is the name of the node's
/// kind id (an alias's included); an id outside the table (`ERROR`) asks tree-sitter.
pub(crate) fn kind(n: tree_sitter::Node) -> &'static str {
    static NAMES: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    let names = NAMES.get_or_init(|| {
        let lang: tree_sitter::Language = tree_sitter_c::LANGUAGE.into();
        (0..lang.node_kind_count())
            .map(|id| {
                u16::try_from(id)
                    .ok()
                    .and_then(|id| lang.node_kind_for_id(id))
                    .unwrap_or("")
            })
            .collect()
    });
    match names.get(usize::from(n.kind_id())) {
        Some(k) if !k.is_empty() => k,
        _ => n.kind(),
    }
}

/// The names a body declares (parameters and locals), borrowed from the file's text: a hash
/// set, looked up for every call and stored name, and filled without an allocation per name.
pub(crate) type Locals<'s> = rustc_hash::FxHashSet<&'s str>;

/// An assignment's operator, left and right side, looked up once for its three readers: the
/// written field, the stored name (`valuerefs`) and the error sites' assignments
/// (`errsites::BodyExits`); each lookup by field walks the node's children in tree-sitter.
#[derive(Clone, Copy)]
pub(crate) struct Assignment<'t> {
    pub node: Node<'t>,
    /// `=`, not `|=` and friends (they compute, they install nothing).
    pub plain: bool,
    pub left: Option<Node<'t>>,
    pub right: Option<Node<'t>>,
}

impl<'t> Assignment<'t> {
    pub(crate) fn of(node: Node<'t>, src: &str) -> Self {
        let f = fields();
        Self {
            node,
            plain: node.field(f.operator).map(|o| text(o, src)) == Some("="),
            left: node.field(f.left),
            right: node.field(f.right),
        }
    }
}

/// The node's text: a slice of the (already valid UTF-8) source, no re-validation
/// (`Node::utf8_text` checks every byte of a body again).
pub(crate) fn text<'a>(n: Node, src: &'a str) -> &'a str {
    src.get(n.start_byte()..n.end_byte()).unwrap_or("")
}
