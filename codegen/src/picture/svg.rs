//! One view as SVG: laid out by layout-rs (a layered, Graphviz-style layout in pure Rust,
//! pinned in Cargo.lock, so the same set gives the same page on every machine and the
//! generator starts no process), drawn by a backend of ours that gives every node its hover
//! title and classes the page's stylesheet colours.

use std::fmt::Write as _;

use analyzer::EdgeKind;
use layout::core::base::Orientation;
use layout::core::format::{ClipHandle, RenderBackend};
use layout::core::geometry::{get_size_for_str, pad_shape_scalar, Point};
use layout::core::style::{LineStyleKind, StyleAttr};
use layout::std_shapes::shapes::{Arrow, Element, ShapeKind};
use layout::topo::layout::VisualGraph;
use manifest::escape_html as esc;
use manifest::Layer;

use super::view::{Mark, Node, NodeKind, View};

const FONT_SIZE: usize = 14;

/// The CSS classes of a node: what it is, its layer or rule.
fn node_class(n: &Node) -> String {
    let mut class = match &n.kind {
        NodeKind::Handler => "fn handler".into(),
        NodeKind::Probe { layer, attach, .. } => {
            let layer = match layer {
                Layer::Core => "core",
                Layer::Vendor => "vendor",
            };
            if attach.has_program() {
                format!("fn probe {layer}")
            } else {
                format!("fn probe {layer} stand-in")
            }
        }
        NodeKind::Dropped(rule) => format!("fn dropped rule-{rule}"),
        NodeKind::Other => "fn other".into(),
        NodeKind::Collapsed { .. } => "fn collapsed".into(),
        NodeKind::Removed => "fn removed".into(),
    };
    for m in &n.marks {
        class.push_str(match m {
            Mark::Added => " added",
            Mark::Moved => " moved",
        });
    }
    if !n.stands_for.is_empty() {
        class.push_str(" holds-inlined");
    }
    class
}

fn edge_class(kind: EdgeKind) -> String {
    format!("edge {}", kind.as_str())
}

/// `view` as an `<svg>` element fitted to the page's width, at 70% of its size at least.
pub(crate) fn render(view: &View) -> String {
    let mut vg = VisualGraph::new(Orientation::TopToBottom);
    // layout-rs checks its graph after each step (a cycle search from every edge, panicking
    // on a bug of its own): a fifth of a picture's layout, and nothing a user's graph can
    // fail (the layout makes a DAG of any graph first).
    vg.dag.set_validate(false);
    let handles: Vec<_> = view
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let size = pad_shape_scalar(get_size_for_str(&n.name, FONT_SIZE), 10.0);
            let el = Element::create_with_properties(
                ShapeKind::new_box(&n.name),
                StyleAttr::simple(),
                Orientation::LeftToRight,
                size,
                format!("n{i}"),
            );
            vg.add_node(el)
        })
        .collect();
    for (i, e) in view.edges.iter().enumerate() {
        let line_style = if e.kind == EdgeKind::Inline {
            LineStyleKind::Dashed
        } else {
            LineStyleKind::Normal
        };
        let arrow = Arrow {
            line_style,
            properties: Some(format!("e{i}")),
            ..Arrow::default()
        };
        vg.add_edge(arrow, handles[e.from], handles[e.to]);
    }
    let mut out = Backend {
        view,
        body: String::new(),
        max: Point::zero(),
    };
    vg.do_it(false, false, false, &mut out);
    out.finish()
}

/// Writes what layout-rs draws, looking up each element's node or edge by its property.
struct Backend<'a> {
    view: &'a View,
    body: String,
    max: Point,
}

impl Backend<'_> {
    fn grow(&mut self, p: Point) {
        self.max.x = self.max.x.max(p.x);
        self.max.y = self.max.y.max(p.y);
    }

    fn finish(self) -> String {
        let (w, h) = (self.max.x + 10.0, self.max.y + 10.0);
        // shrunk to the page's width, but never below 70% (labels stay readable): wider
        // graphs scroll sideways in their box
        let shrunk = w * 0.7;
        format!(
            "<div class=\"graph\"><svg xmlns=\"http://www.w3.org/2000/svg\" \
             viewBox=\"0 0 {w:.0} {h:.0}\" \
             style=\"width:max(100%,{shrunk:.0}px);max-width:{w:.0}px;height:auto\">\n\
             <defs><marker id=\"head\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" \
             markerWidth=\"7\" markerHeight=\"7\" orient=\"auto\">\
             <path d=\"M0,0 L10,5 L0,10 z\"/></marker></defs>\n{}</svg></div>",
            self.body
        )
    }

    /// The node or edge index a property names (`n3`, `e7`).
    fn index(properties: &Option<String>, prefix: char) -> Option<usize> {
        properties.as_deref()?.strip_prefix(prefix)?.parse().ok()
    }
}

impl RenderBackend for Backend<'_> {
    fn draw_rect(
        &mut self,
        xy: Point,
        size: Point,
        _look: &StyleAttr,
        properties: Option<String>,
        _clip: Option<ClipHandle>,
    ) {
        self.grow(xy.add(size));
        let Some(n) = Self::index(&properties, 'n').and_then(|i| self.view.nodes.get(i)) else {
            return;
        };
        let _ = write!(
            self.body,
            "<g class=\"{}\" data-fn=\"{}\"><title>{}</title>\
             <rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" rx=\"4\"/>",
            node_class(n),
            esc(&n.name),
            esc(&n.title),
            xy.x,
            xy.y,
            size.x,
            size.y
        );
        let _ = writeln!(
            self.body,
            "<text x=\"{:.1}\" y=\"{:.1}\">{}</text></g>",
            xy.x + size.x / 2.0,
            xy.y + size.y / 2.0 + 5.0,
            esc(&n.name)
        );
    }

    fn draw_line(
        &mut self,
        start: Point,
        stop: Point,
        _look: &StyleAttr,
        _properties: Option<String>,
    ) {
        self.grow(start);
        self.grow(stop);
    }

    fn draw_circle(
        &mut self,
        xy: Point,
        size: Point,
        _look: &StyleAttr,
        _properties: Option<String>,
    ) {
        self.grow(xy.add(size));
    }

    // labels are written with their box (draw_rect), where the title is known
    fn draw_text(&mut self, _xy: Point, _text: &str, _look: &StyleAttr) {}

    fn draw_arrow(
        &mut self,
        path: &[(Point, Point)],
        dashed: bool,
        _head: (bool, bool),
        _look: &StyleAttr,
        properties: Option<String>,
        _text: &str,
    ) {
        let (Some(first), Some(second)) = (path.first(), path.get(1)) else {
            return;
        };
        for p in path {
            self.grow(p.0);
            self.grow(p.1);
        }
        let class = Self::index(&properties, 'e')
            .and_then(|i| self.view.edges.get(i))
            .map_or_else(
                || "edge".to_string(),
                |e| {
                    if e.successor {
                        "edge successor".to_string()
                    } else {
                        edge_class(e.kind)
                    }
                },
            );
        let mut d = format!(
            "M {:.1} {:.1} C {:.1} {:.1}, {:.1} {:.1}, {:.1} {:.1}",
            first.0.x,
            first.0.y,
            first.1.x,
            first.1.y,
            second.0.x,
            second.0.y,
            second.1.x,
            second.1.y
        );
        for p in &path[2..] {
            let _ = write!(d, " S {:.1} {:.1}, {:.1} {:.1}", p.0.x, p.0.y, p.1.x, p.1.y);
        }
        let dash = if dashed { " dashed" } else { "" };
        let _ = writeln!(
            self.body,
            "<path class=\"{class}{dash}\" d=\"{d}\" marker-end=\"url(#head)\"/>"
        );
    }

    fn create_clip(&mut self, _xy: Point, _size: Point, _rounded_px: usize) -> ClipHandle {
        0
    }
}
