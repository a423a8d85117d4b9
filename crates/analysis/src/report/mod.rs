//! Reports for people, laid out the way hyperfine's `src/export/` separates formats.
//!
//! - [`document`]: the document model (headings, paragraphs, tables, lists, figures), with no
//!   output format in it.
//! - What each report says, as a document: [`comparison`] (`comparison.md`, `report.html`) and
//!   [`summary`] (one cohort, for a terminal or as Markdown), [`isolation`] (hog cohorts).
//! - One module per output: [`markdown`], [`html`] (a self-contained page) and [`text`]
//!   (aligned columns for a terminal).
//! - [`plots`]: the comparison's SVG charts (plotters), inlined by the HTML page.
//! - [`why`]: the GPU-activity and energy tables (issue 15) both reports include.
//!
//! A new report builds a new [`document::Document`] and gets every output; the outputs never
//! decide content.

mod comparison;
mod document;
mod html;
mod isolation;
mod markdown;
mod plots;
mod serve;
mod summary;
mod text;
mod why;

use std::path::Path;

use coload_cohort_schema::{Comparison, write_json_atomic};

use crate::error::AnalysisError;

pub use isolation::{render_isolation_markdown, render_isolation_table};
pub use summary::{render_markdown, render_table};

/// The comparison as Markdown (`comparison.md`).
#[must_use]
pub fn render_comparison_markdown(c: &Comparison) -> String {
    markdown::markdown(&comparison::document(c))
}

/// The comparison as one self-contained HTML page (`report.html`): the tables of
/// `comparison.md` and inline SVG plots (latency CDF per worker and per-worker rate against solo
/// for each cohort, aggregate rate against worker count per mode).
#[must_use]
pub fn render_report_html(c: &Comparison) -> String {
    html::page(
        "coload comparison",
        &comparison::document(c),
        &comparison::figures(c),
    )
}

/// Writes `comparison.json`, `comparison.md` and `report.html` into `dir` (created if needed).
pub fn write_report(dir: &Path, c: &Comparison) -> Result<(), AnalysisError> {
    let werr = |path: &Path, source| AnalysisError::Write {
        path: path.to_owned(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(|e| werr(dir, e))?;
    write_json_atomic(&dir.join("comparison.json"), c)?;
    let md = dir.join("comparison.md");
    std::fs::write(&md, render_comparison_markdown(c)).map_err(|e| werr(&md, e))?;
    let html = dir.join("report.html");
    std::fs::write(&html, render_report_html(c)).map_err(|e| werr(&html, e))?;
    Ok(())
}
