//! Rendering of every output file of a probe set.

use std::collections::{BTreeMap, BTreeSet};

use analyzer::{CallGraph, FnId};
use askama::Template;
use heuristics::{FocusKind, Selection};
use manifest::{Attach, Excluded, Manifest, Rule};

#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("manifest serialisation: {0}")]
    Yaml(#[from] serde_yaml::Error),
    #[error("template: {0}")]
    Template(#[from] askama::Error),
}

/// Excluded functions listed per rule in the report (the manifest has them all).
const EXAMPLES_PER_RULE: usize = 15;

pub(crate) struct ShrinkRow {
    pub handler: String,
    pub object: String,
    pub reachable: usize,
    pub traceable: usize,
    pub kept: usize,
    /// The same three counts within the verbs core (drivers/infiniband/core, include/rdma).
    pub core_reachable: usize,
    pub core_traceable: usize,
    pub core_kept: usize,
}

pub(crate) struct Unattachable {
    pub function: String,
    pub module: String,
    pub attach: String,
    pub instead: String,
}

pub(crate) struct ExcludedGroup<'a> {
    pub rule: String,
    pub total: usize,
    pub items: Vec<&'a Excluded>,
}

#[derive(Template)]
#[template(path = "report.md", escape = "none")]
struct ReportTemplate<'a> {
    m: &'a Manifest,
    refresh: &'a str,
    shrink: Vec<ShrinkRow>,
    unattachable: Vec<Unattachable>,
    excluded: Vec<ExcludedGroup<'a>>,
    examples_per_rule: usize,
    focus_header: &'a str,
    /// Module probes whose `fexit` verdict assumes the module has BTF, and their modules.
    btf_assumed: (usize, String),
    /// The arguments the kprobe fallback cannot read, `function (arg, arg)` each.
    kprobe_unread: String,
    /// A data-plane probe is `no-btf` (its module has no BTF where the set was made).
    data_plane_no_btf: bool,
}

/// Inputs besides the manifest that the renderers need.
pub struct RenderContext<'a> {
    pub graph: &'a CallGraph,
    pub selection: &'a Selection,
    /// Whether fexit can attach to a function on the real binary.
    pub attachable: &'a (dyn Fn(FnId) -> bool + Sync),
    /// The command that regenerates these files (printed in their headers).
    pub refresh: String,
}

/// (file name, contents) of every output, in a fixed order. The four are independent and
/// most of a set's time after its selection (the manifest's YAML and the pictures' layout
/// above all): rendered on the pool's threads, so a set takes the longest of them, not the sum.
pub fn render_all(m: &Manifest, cx: &RenderContext) -> Result<Vec<(String, String)>, RenderError> {
    let ((yaml, html), (md, bpf)) = rayon::join(
        || {
            rayon::join(
                || m.to_yaml(),
                || crate::picture::render_html(m, cx.graph, &cx.refresh),
            )
        },
        || {
            rayon::join(
                || render_report(m, cx),
                || crate::bpf::render_bpf(m, &cx.refresh),
            )
        },
    );
    Ok(vec![
        ("manifest.yaml".to_string(), yaml?),
        ("report.md".to_string(), md?),
        ("report.html".to_string(), html),
        ("probes.bpf.c".to_string(), bpf?),
    ])
}

pub fn render_report(m: &Manifest, cx: &RenderContext) -> Result<String, RenderError> {
    let g = cx.graph;
    let kept: BTreeSet<FnId> = cx.selection.kept().map(|v| v.id).collect();
    let mut shrink = Vec::new();
    for v in cx.selection.kept() {
        let is_handler = g
            .write_commands()
            .iter()
            .chain(g.uapi_methods().iter())
            .any(|d| d.handler_id == Some(v.id));
        if !is_handler || !matches!(v.focus, Some(FocusKind::Handler | FocusKind::OpsCaller)) {
            continue;
        }
        let below = g.reach(&[v.id]);
        let core: Vec<FnId> = below
            .keys()
            .copied()
            .filter(|&f| {
                let file = &g.node(f).file;
                file.starts_with("drivers/infiniband/core/") || file.starts_with("include/rdma/")
            })
            .collect();
        shrink.push(ShrinkRow {
            handler: g.node(v.id).name.clone(),
            object: v.object.as_str().to_string(),
            reachable: below.len(),
            traceable: below.keys().filter(|&&f| (cx.attachable)(f)).count(),
            kept: below.keys().filter(|f| kept.contains(f)).count(),
            core_reachable: core.len(),
            core_traceable: core.iter().filter(|&&f| (cx.attachable)(f)).count(),
            core_kept: core.iter().filter(|f| kept.contains(f)).count(),
        });
    }
    shrink.sort_by(|a, b| a.handler.cmp(&b.handler));
    let unattachable = m
        .probes
        .iter()
        .filter(|p| p.attach != Attach::Fexit)
        .map(|p| Unattachable {
            function: p.function.clone(),
            module: p.module.clone(),
            attach: match (&p.attach_symbol, p.attach) {
                (Some(s), _) => format!("{} (`{s}`: kretprobe fallback)", p.attach),
                (None, Attach::NoBtf) => {
                    format!("{} (kprobe/kretprobe: the module has no BTF)", p.attach)
                }
                (None, _) => p.attach.to_string(),
            },
            instead: p
                .suggest
                .as_ref()
                .map(|s| format!("{} `{}` ({})", s.relation, s.function, s.module))
                .unwrap_or_else(|| "-".into()),
        })
        .collect();
    let mut groups: BTreeMap<Rule, Vec<&Excluded>> = BTreeMap::new();
    for e in &m.excluded {
        groups.entry(e.rule).or_default().push(e);
    }
    let excluded = groups
        .into_iter()
        .map(|(rule, items)| ExcludedGroup {
            rule: rule.to_string(),
            total: items.len(),
            items: items.into_iter().take(EXAMPLES_PER_RULE).collect(),
        })
        .collect();
    Ok(ReportTemplate {
        m,
        refresh: &cx.refresh,
        shrink,
        unattachable,
        excluded,
        examples_per_rule: EXAMPLES_PER_RULE,
        focus_header: &cx.selection.focus_ops.header,
        btf_assumed: btf_assumed(m),
        kprobe_unread: kprobe_unread(m),
        data_plane_no_btf: data_plane_no_btf(m),
    }
    .render()?)
}

/// Whether a data-plane probe's module had no BTF (it has no kprobe path: not attached there).
fn data_plane_no_btf(m: &Manifest) -> bool {
    m.data_plane
        .iter()
        .any(|d| d.attach == manifest::Attach::NoBtf)
}

/// The arguments past the sixth that the kprobe fallback records as 0, `` `function` (a, b) ``
/// per probe, in probe order.
fn kprobe_unread(m: &Manifest) -> String {
    m.probes
        .iter()
        .filter_map(|p| {
            let unread = p.kprobe_unread_args();
            (!unread.is_empty()).then(|| format!("`{}` ({})", p.function, unread.join(", ")))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// How many probes have a kprobe fallback (their fexit verdict assumes the module's BTF), and
/// their modules, sorted.
fn btf_assumed(m: &Manifest) -> (usize, String) {
    let with: Vec<&manifest::Probe> = m
        .probes
        .iter()
        .filter(|p| p.has_kprobe_fallback())
        .collect();
    let modules: std::collections::BTreeSet<&str> =
        with.iter().map(|p| p.module.as_str()).collect();
    (
        with.len(),
        modules.into_iter().collect::<Vec<_>>().join(", "),
    )
}
