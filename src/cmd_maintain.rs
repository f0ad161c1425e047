//! The maintenance workflows: `check` (kernel upgrade), `port` (another vendor), `diff`
//! (coverage diff for a review) and `coverage` (against a failure log). One call into the
//! `pipeline` crate each, then the report in the chosen format.

use std::path::Path;
use std::process::ExitCode;

use clap::ValueEnum;

use crate::args::SourceArgs;
use crate::commands::{emit, print_json, print_notice, CmdResult};

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
pub(crate) enum ReportFormat {
    Markdown,
    Json,
}

/// `probegen check`: exit 0 no drift, 1 drift.
/// Writes a page for `--html FILE`.
fn write_html(path: Option<&Path>, page: &str) -> Result<(), pipeline::Error> {
    match path {
        Some(p) => pipeline::write_page(p, page),
        None => Ok(()),
    }
}

pub(crate) fn check(
    src: &SourceArgs,
    against: &Path,
    format: ReportFormat,
    html: Option<&Path>,
) -> CmdResult {
    let report = pipeline::check(&src.options(), against, &mut print_notice)?;
    write_html(html, &report.html)?;
    match format {
        ReportFormat::Markdown => emit(&report.markdown()?)?,
        ReportFormat::Json => print_json(&report.json()?)?,
    }
    Ok(if report.drifted() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// `probegen port`: both vendors' sets from one source tree, mapped through ib_device_ops.
pub(crate) fn port(a: &pipeline::PortOptions, format: ReportFormat) -> CmdResult {
    let p = pipeline::port(a, &mut print_notice)?;
    match format {
        ReportFormat::Markdown => emit(&p.to_markdown()?)?,
        ReportFormat::Json => print_json(&serde_json::to_value(&p)?)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// `probegen diff OLD NEW`.
pub(crate) fn diff(old: &Path, new: &Path, format: ReportFormat, html: Option<&Path>) -> CmdResult {
    let (d, page) = pipeline::diff(old, new)?;
    write_html(html, &page)?;
    match format {
        ReportFormat::Markdown => emit(&maintain::diff_markdown(&d)?)?,
        ReportFormat::Json => print_json(&serde_json::to_value(&d)?)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// `probegen coverage --manifest M --failures CSV`.
pub(crate) fn coverage(
    manifest: &Path,
    failures: &Path,
    format: ReportFormat,
    lenient: bool,
    html: Option<&Path>,
) -> CmdResult {
    let c = pipeline::coverage(manifest, failures, lenient, &mut print_notice)?;
    write_html(html, &maintain::coverage_html(&c))?;
    match format {
        ReportFormat::Markdown => emit(&maintain::coverage_markdown(&c)?)?,
        ReportFormat::Json => print_json(&serde_json::to_value(&c)?)?,
    }
    Ok(ExitCode::SUCCESS)
}
