//! `report.html`: the probe set as pictures, for reviewers. One call graph per uverbs handler
//! that leads to a probe, from the handler down to the vendor driver: probes filled by layer,
//! dropped functions grey with their rule on hover and in the legend, inlined targets dashed
//! with the probed caller that stands in for them marked, edge kinds styled. Collapsed to the
//! kept paths; a reviewer expands the full graph (an HTML `<details>`, no script).
//!
//! Self-contained (inline SVG and CSS, nothing fetched), deterministic (same manifest, same
//! bytes), bounded: a handler too large to lay out is listed with its counts instead.

mod svg;
mod view;

use std::fmt::Write as _;

use analyzer::{CallGraph, EdgeKind};
use manifest::Manifest;
use rayon::prelude::*;

use manifest::escape_html as esc;
pub use view::{ChangeMarks, RemovedProbe};
use view::{HandlerView, MAX_COLLAPSED, MAX_FULL};

const STYLE: &str = r#"
body { font-family: sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 2em; }
.legend span { display: inline-block; margin: 0 1em 0.3em 0; }
.legend i { display: inline-block; width: 1.4em; height: 0.9em; border: 1px solid #444;
  vertical-align: middle; margin-right: 0.3em; border-radius: 3px; }
svg text { font-size: 14px; text-anchor: middle; fill: #111; }
.fn rect { stroke: #444; stroke-width: 1; fill: #fff; }
.fn.handler rect { fill: #f7f7f7; stroke-width: 2; }
.fn.probe.core rect, i.core { fill: #9ecae1; background: #9ecae1; }
.fn.probe.vendor rect, i.vendor { fill: #fdae6b; background: #fdae6b; }
.fn.probe.stand-in rect { stroke-dasharray: 5 3; fill-opacity: 0.45; }
i.stand-in { border-style: dashed; opacity: 0.6; }
.fn.holds-inlined rect { stroke-width: 3; }
.fn.dropped rect, i.dropped { fill: #e4e4e4; background: #e4e4e4; }
.fn.dropped text, .fn.collapsed text { fill: #666; }
.fn.collapsed rect { fill: #f2f2f2; stroke-dasharray: 2 2; }
.fn.other rect { fill: #fff; stroke: #aaa; }
path.edge { fill: none; stroke: #555; stroke-width: 1.2; }
marker path { fill: #555; }
path.edge.ops-table { stroke: #6a3d9a; stroke-width: 1.8; }
path.edge.uapi-method { stroke: #e6550d; stroke-width: 1.8; }
path.edge.write-command { stroke: #31a354; stroke-width: 1.8; }
path.edge.macro { stroke: #999; }
path.edge.dashed { stroke-dasharray: 5 4; }
div.graph { overflow-x: auto; border: 1px solid #eee; }
.fn.added rect { stroke: #2ca02c; stroke-width: 4; }
.fn.removed rect, i.removed { fill: #fbb4b4; background: #fbb4b4; stroke: #d62728; stroke-width: 3; }
.fn.moved rect { stroke: #9467bd; stroke-width: 4; stroke-dasharray: 8 3; }
i.added { border: 3px solid #2ca02c; } i.moved { border: 3px dashed #9467bd; }
path.edge.successor { stroke: #d62728; stroke-width: 2.5; stroke-dasharray: 2 4; }
details { margin: 0.5em 0 1.5em; } summary { cursor: pointer; color: #2a5db0; }
table { border-collapse: collapse; } td, th { padding: 0.15em 0.6em; text-align: left; }
"#;

/// The verb a handler serves, as a reviewer names it (`ib_uverbs_modify_qp` -> `modify_qp`,
/// `ib_uverbs_handler_UVERBS_METHOD_QP_CREATE` -> `QP_CREATE`).
fn verb(handler: &str) -> &str {
    handler
        .split_once("_METHOD_")
        .map(|(_, v)| v)
        .or_else(|| handler.strip_prefix("ib_uverbs_"))
        .unwrap_or(handler)
}

fn count(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

fn legend(m: &Manifest) -> String {
    let mut s = String::from(
        "<p class=\"legend\"><span><i class=\"core\"></i>probe, verbs core</span>\
         <span><i class=\"vendor\"></i>probe, vendor driver</span>\
         <span><i class=\"core stand-in\"></i>probe target inlined or untraceable (dashed): \
         its probed caller has a thick border</span>\
         <span><i class=\"dropped\"></i>dropped (hover: rule and evidence)</span></p>\
         <p class=\"legend\">edges: <span style=\"color:#555\">direct call</span>\
         <span style=\"color:#6a3d9a\">ops table</span>\
         <span style=\"color:#e6550d\">uapi method</span>\
         <span style=\"color:#31a354\">write command</span>\
         <span style=\"color:#999\">macro</span><span>dashed: inline</span></p>\n",
    );
    s.push_str("<table><tr><th>rule</th><th>dropped</th></tr>");
    for (rule, n) in &m.stats.excluded {
        let _ = write!(s, "<tr><td>{rule}</td><td>{n}</td></tr>");
    }
    s.push_str("</table>\n");
    s
}

fn section(h: &HandlerView) -> String {
    let mut s = format!(
        "<section id=\"{0}\"><h2>{1} <small>({0}: {2}, {3} below it)</small></h2>\n",
        esc(&h.handler),
        esc(verb(&h.handler)),
        count(h.probes, "probe"),
        count(h.functions, "function")
    );
    match &h.collapsed {
        Some(v) => s.push_str(&svg::render(v)),
        None => {
            let _ = write!(
                s,
                "<p>{} functions on the kept paths: more than {MAX_COLLAPSED}, not drawn.</p>",
                h.functions
            );
        }
    }
    match &h.full {
        Some(v) => {
            let _ = write!(
                s,
                "\n<details><summary>expand: all {} functions below {}</summary>\n{}</details>",
                h.functions,
                esc(&h.handler),
                svg::render(v)
            );
        }
        None => {
            let _ = write!(
                s,
                "\n<p>all {} functions: more than {MAX_FULL} to lay out; the manifest lists them.</p>",
                h.functions
            );
        }
    }
    s.push_str("</section>\n");
    s
}

/// The whole page for `m`, with the edge kinds of `g`.
pub(crate) fn render_html(m: &Manifest, g: &CallGraph, refresh: &str) -> String {
    page(m, None, &|a, b| view::graph_edge_kind(g, a, b), refresh)
}

/// The page of `new` with what changed since an older set drawn on it: added probes green,
/// removed ones red at their old place with their fate, module moves purple, a removed probe's
/// successor an arrow. Edge kinds come from `graph` when the caller has the new tree's (check),
/// else every edge is drawn as a call (diff: manifests only).
pub fn render_change_html(
    new: &Manifest,
    marks: &ChangeMarks,
    graph: Option<&CallGraph>,
    refresh: &str,
) -> String {
    match graph {
        Some(g) => page(
            new,
            Some(marks),
            &|a, b| view::graph_edge_kind(g, a, b),
            refresh,
        ),
        None => page(new, Some(marks), &|_, _| EdgeKind::Direct, refresh),
    }
}

fn change_legend(c: &ChangeMarks) -> String {
    format!(
        "<p class=\"legend change\"><span><i class=\"core added\"></i>added: {}</span>\
         <span><i class=\"removed\"></i>removed: {} (hover: its fate)</span>\
         <span><i class=\"core moved\"></i>module moved: {}</span>\
         <span style=\"color:#d62728\">dotted red arrow: removed -> its successor ({})</span></p>\n",
        c.added.len(),
        c.removed.len(),
        c.moved.len(),
        c.renamed.len()
    )
}

fn page(
    m: &Manifest,
    change: Option<&ChangeMarks>,
    edge_kinds: &view::EdgeKinds<'_>,
    refresh: &str,
) -> String {
    let mut views = view::handler_views(m, change, edge_kinds);
    // by verb as a reviewer reads them (create_qp beside QP_CREATE), then by handler
    views.sort_by(|a, b| {
        let key = |h: &HandlerView| (verb(&h.handler).to_lowercase(), h.handler.clone());
        key(a).cmp(&key(b))
    });
    let mut s = format!(
        "<!DOCTYPE html>\n<!-- Generated by probegen. DO NOT EDIT: {} -->\n<html lang=\"en\"><head>\
         <meta charset=\"utf-8\"><title>probegen: {} on {}</title><style>{STYLE}</style></head><body>\n\
         <h1>{} probe set on {}: {} probes ({} attachable), {} functions dropped</h1>\n",
        esc(refresh),
        esc(&m.vendor),
        esc(&m.kernel.version),
        esc(&m.vendor),
        esc(&m.kernel.version),
        m.stats.probes,
        m.stats.attachable,
        m.excluded.len(),
    );
    if let Some(c) = change {
        s.push_str(&change_legend(c));
    }
    s.push_str(&legend(m));
    s.push_str("<p>");
    for h in &views {
        let _ = write!(
            s,
            "<a href=\"#{}\">{}</a> ({}) &nbsp; ",
            esc(&h.handler),
            esc(verb(&h.handler)),
            h.probes
        );
    }
    s.push_str("</p>\n");
    // Each section's layout is independent and most of a set's rendering time (the crossing
    // reduction): drawn on the pool's threads, joined in the page's order.
    let sections: Vec<String> = views.par_iter().map(section).collect();
    for section in sections {
        s.push_str(&section);
    }
    s.push_str(&data_plane_section(m));
    s.push_str("</body></html>\n");
    s
}

/// The data-plane probes as a table: class, function, what the filter passes, why.
fn data_plane_section(m: &Manifest) -> String {
    if m.data_plane.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "<section id=\"data-plane\"><h2>Data plane <small>(entry programs, in-kernel filter)</small></h2>\n\
         <table><tr><th>id</th><th>class</th><th>function</th><th>module</th><th>attach</th><th>records</th><th>evidence</th></tr>\n",
    );
    for d in &m.data_plane {
        let records = if d.errors.is_empty() {
            "every call".to_string()
        } else {
            d.errors.join(", ")
        };
        let evidence: Vec<String> = d
            .evidence
            .iter()
            .map(|e| format!("{}:{}: {}", e.file, e.line, e.detail))
            .collect();
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            d.id,
            d.class,
            esc(&d.function),
            esc(&d.module),
            d.attach,
            esc(&records),
            esc(&evidence.join("; "))
        );
    }
    s.push_str("</table></section>\n");
    s
}

#[cfg(test)]
mod tests {
    use analyzer::EdgeKind;
    use manifest::{Excluded, Rule};

    use super::*;

    /// The checked-in 6.12 rxe manifest.
    fn rxe() -> Manifest {
        let text = include_str!("../../../generated/linux-6.12/rxe/manifest.yaml");
        serde_yaml::from_str(text).expect("manifest")
    }

    /// The page with every edge a direct call but `ib_uverbs_write`'s (write commands).
    fn render(m: &Manifest) -> String {
        page(
            m,
            None,
            &|a, _| {
                if a == "ib_uverbs_write" {
                    EdgeKind::WriteCommand
                } else {
                    EdgeKind::Direct
                }
            },
            "probegen generate",
        )
    }

    #[test]
    fn every_probe_and_rule_is_on_the_page_and_the_page_is_the_same_twice() {
        let m = rxe();
        let page = render(&m);
        assert_eq!(page, render(&m));
        for p in &m.probes {
            assert!(
                page.contains(&format!("data-fn=\"{}\"", p.function)),
                "{} missing",
                p.function
            );
        }
        for rule in m.stats.excluded.keys() {
            assert!(page.contains(&format!("<td>{rule}</td>")), "{rule}");
        }
        // self-contained: nothing fetched, no script
        for banned in ["<script", "http://", "https://", "src="] {
            let hits: Vec<_> = page.match_indices(banned).collect();
            let ok = banned == "http://"
                && hits
                    .iter()
                    .all(|(i, _)| page[*i..].starts_with("http://www.w3.org/2000/svg"));
            assert!(hits.is_empty() || ok, "{banned} in the page");
        }
    }

    #[test]
    fn a_set_too_large_to_lay_out_still_gets_a_page_with_its_counts() {
        let mut m = rxe();
        let handler = m.probes[0].path[..2].to_vec();
        // 10,000 dropped functions below one handler, half in one long chain
        for i in 0..10_000 {
            let mut path = handler.clone();
            if i % 2 == 0 {
                path.extend((0..i / 2).step_by(1000).map(|k| format!("deep_{k}")));
            }
            path.push(format!("big_{i}"));
            m.excluded.push(Excluded {
                function: format!("big_{i}"),
                module: "ib_core".into(),
                file: "drivers/infiniband/core/big.c".into(),
                line: i,
                rule: Rule::NotFocus,
                evidence: "synthetic".into(),
                path,
            });
        }
        let page = render(&m);
        assert!(
            page.contains("more than 160 to lay out"),
            "no count for the big handler"
        );
        assert!(page.contains("dropped functions below"));
    }
}
