//! Rendering of every output file of a probe set.

use analyzer::graph::CallGraph;
use heuristics::Selection;

use crate::manifest::Manifest;

#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("manifest serialisation: {0}")]
    Yaml(#[from] serde_yaml::Error),
    #[error("template: {0}")]
    Template(#[from] askama::Error),
}

/// (file name, contents) of every output, in a fixed order.
pub fn render_all(
    m: &Manifest,
    _g: &CallGraph,
    _sel: &Selection,
) -> Result<Vec<(String, String)>, RenderError> {
    let out = vec![("manifest.yaml".to_string(), m.to_yaml()?)];
    Ok(out)
}
