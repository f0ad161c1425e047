//! `coverage --html`: the failure log's share by verb and by rule as bar charts (inline SVG,
//! self-contained, deterministic).

use std::fmt::Write as _;

use manifest::escape_html as esc;

use crate::coverage::CoverageReport;

const BAR: f64 = 600.0;
const LABEL: f64 = 260.0;
const ROW: f64 = 22.0;

/// One horizontal bar per (label, share, class, hover), with the share printed after it.
fn bars(rows: &[(String, f64, &str, String)]) -> String {
    let h = ROW * rows.len() as f64 + 10.0;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {w} {h}\" width=\"{w}\" height=\"{h}\">\n",
        w = LABEL + BAR + 80.0
    );
    for (i, (label, share, class, title)) in rows.iter().enumerate() {
        let y = ROW * i as f64 + 5.0;
        let _ = writeln!(
            s,
            "<g class=\"bar {class}\"><title>{}</title><text x=\"{:.0}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\
             <rect x=\"{LABEL}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{:.1}\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\">{:.1}%</text></g>",
            esc(title),
            LABEL - 8.0,
            y + 14.0,
            esc(label),
            (share * BAR).max(1.0),
            ROW - 6.0,
            LABEL + (share * BAR).max(1.0) + 6.0,
            y + 14.0,
            share * 100.0
        );
    }
    s.push_str("</svg>\n");
    s
}

/// The page for `c`.
pub fn coverage_html(c: &CoverageReport) -> String {
    let mut by_rule = vec![(
        "covered".to_string(),
        c.covered_share,
        "covered",
        "verbs whose handler is probed".to_string(),
    )];
    for (rule, share) in &c.uncovered {
        by_rule.push((
            rule.clone(),
            *share,
            "uncovered",
            format!("handler dropped by {rule}"),
        ));
    }
    if c.unknown_share > 0.0 {
        by_rule.push((
            "unknown verb".into(),
            c.unknown_share,
            "unknown",
            c.unknown_verbs.join(", "),
        ));
    }
    let by_verb: Vec<_> = c
        .verbs
        .iter()
        .map(|v| {
            let title = format!(
                "{}: {} rows, weight {}, {} ({}), {} probes below {}",
                v.verb,
                v.rows,
                v.weight,
                if v.covered { "covered" } else { "not covered" },
                v.rule,
                v.probes_below,
                v.handler.as_deref().unwrap_or("no handler")
            );
            let class = if v.covered { "covered" } else { "uncovered" };
            (v.verb.clone(), v.share, class, title)
        })
        .collect();
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>probegen coverage: {vendor} on {kernel}</title><style>\
         body {{ font-family: sans-serif; margin: 1.5em; }} svg text {{ font-size: 13px; }}\
         .bar.covered rect {{ fill: #3182bd; }} .bar.uncovered rect {{ fill: #de2d26; }}\
         .bar.unknown rect {{ fill: #bbb; }}</style></head><body>\n\
         <h1>{vendor} on {kernel}: {covered:.1}% of the failure log covered</h1>\n\
         <p>{rows} rows of {manifest}, total weight {total}.</p>\n\
         <h2>By rule</h2>\n{by_rule}<h2>By verb</h2>\n{by_verb}</body></html>\n",
        vendor = esc(&c.vendor),
        kernel = esc(&c.kernel),
        covered = c.covered_share * 100.0,
        rows = c.rows,
        manifest = esc(&c.manifest),
        total = c.total_weight,
        by_rule = bars(&by_rule),
        by_verb = bars(&by_verb),
    )
}
