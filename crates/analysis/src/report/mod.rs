//! Reports for people, laid out the way hyperfine's `src/export/` separates formats.
//!
//! - [`document`]: the document model (headings, paragraphs, tables, lists, figures), with no
//!   output format in it.
//! - What each report says, as a document: [`comparison`] (`comparison.md`, `report.html`) and
//!   [`summary`] (one cohort, for a terminal or as Markdown), [`isolation`] (hog cohorts).
//! - One module per output: [`markdown`], [`html`] (a self-contained page) and [`text`]
//!   (aligned columns for a terminal).
//! - [`verdict`]: what the comparison says per policy and shape, and the sentences that lead
//!   the report; [`charts`] draws it (and each cohort's latency by percentile) with the SVG
//!   primitives of [`svg`], inlined by the HTML page.
//! - [`why`]: the GPU-activity and energy tables (issue 15) both reports include.
//!
//! A new report builds a new [`document::Document`] and gets every output; the outputs never
//! decide content.

mod charts;
mod comparison;
mod document;
mod html;
mod isolation;
mod markdown;
mod serve;
mod summary;
mod svg;
mod text;
mod verdict;
mod why;

use std::collections::BTreeMap;
use std::path::Path;

use coload_cohort_schema::{Comparison, Mode, write_json_atomic};

use crate::error::AnalysisError;

pub use isolation::{render_isolation_markdown, render_isolation_table};
pub use summary::{render_markdown, render_table};

/// What a study knows beyond the comparison, for its report: a title and notes, the name of the
/// policy each cohort ran under, every cohort of the plan with its outcome, and results that
/// other kinds of cohorts produce (capacity at an objective, memory isolation), shown in the
/// verdict when present. Everything is optional: [`ReportContext::default`] gives the plain
/// comparison report.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReportContext {
    /// The page's title (default: `coload comparison`).
    pub title: String,
    /// Lines under the title (the plan, the node).
    pub notes: Vec<String>,
    /// Policy name per experiment id; a cohort not listed is labelled by its mode. Two
    /// policies of one mode (two MPS shares) are told apart only through this.
    pub policies: BTreeMap<String, String>,
    /// Every cohort of the study, failed and skipped ones too.
    pub cohorts: Vec<ContextCohort>,
    /// Requests per second sustained at an objective, per policy (serve cohorts).
    pub capacity: Vec<CapacityRow>,
    /// Whether the other workers kept running beside one that takes all memory, per policy.
    pub isolation: Vec<IsolationRow>,
}

/// One cohort of a study, as its index records it.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextCohort {
    /// Its folder name.
    pub name: String,
    /// Its policy.
    pub policy: String,
    /// Its workload mix (`infer=1,train=6`).
    pub workers: String,
    /// `complete`, `failed`, `not_offered`, ...
    pub outcome: String,
    /// Its experiment id, where it completed (names its section in the report).
    pub experiment: Option<String>,
    /// Why, or its experiment id.
    pub note: String,
}

/// A policy's serving capacity at an objective.
#[derive(Debug, Clone, PartialEq)]
pub struct CapacityRow {
    /// The policy.
    pub policy: String,
    /// Its mode (for the colour).
    pub mode: Mode,
    /// The objective, in words (`p99 <= 10 ms`).
    pub objective: String,
    /// Requests per second sustained while meeting it; `None` when no rate met it.
    pub capacity_per_s: Option<f64>,
    /// What else to know (the mix beside the server, the search's resolution).
    pub note: String,
}

/// A policy's memory-isolation result.
#[derive(Debug, Clone, PartialEq)]
pub struct IsolationRow {
    /// The policy.
    pub policy: String,
    /// Its mode.
    pub mode: Mode,
    /// Whether the other workers completed beside the hog.
    pub isolated: bool,
    /// The result's own word for it.
    pub outcome: String,
    /// The figures behind it (`2 of 6 out of memory`).
    pub note: String,
}

/// The comparison as Markdown (`comparison.md`).
#[must_use]
pub fn render_comparison_markdown(c: &Comparison) -> String {
    render_comparison_markdown_with(c, &ReportContext::default())
}

/// The comparison as Markdown, with a study's context.
#[must_use]
pub fn render_comparison_markdown_with(c: &Comparison, ctx: &ReportContext) -> String {
    markdown::markdown(&comparison::document(c, ctx))
}

/// The comparison as one self-contained HTML page (`report.html`): the verdict first (the
/// findings, per-worker rate and p99 against solo by shape and policy, aggregate throughput
/// against worker count), then each cohort folded with its latency-by-percentile plot, and the
/// tables of `comparison.md`.
#[must_use]
pub fn render_report_html(c: &Comparison) -> String {
    render_report_html_with(c, &ReportContext::default())
}

/// The report page, with a study's context.
#[must_use]
pub fn render_report_html_with(c: &Comparison, ctx: &ReportContext) -> String {
    let title = if ctx.title.is_empty() {
        "coload comparison"
    } else {
        &ctx.title
    };
    html::page(title, &comparison::document(c, ctx))
}

/// Writes `comparison.json`, `comparison.md` and `report.html` into `dir` (created if needed).
pub fn write_report(dir: &Path, c: &Comparison) -> Result<(), AnalysisError> {
    write_report_with(dir, c, &ReportContext::default())
}

/// [`write_report`] with a study's context.
pub fn write_report_with(
    dir: &Path,
    c: &Comparison,
    ctx: &ReportContext,
) -> Result<(), AnalysisError> {
    let werr = |path: &Path, source| AnalysisError::Write {
        path: path.to_owned(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(|e| werr(dir, e))?;
    write_json_atomic(&dir.join("comparison.json"), c)?;
    let md = dir.join("comparison.md");
    std::fs::write(&md, render_comparison_markdown_with(c, ctx)).map_err(|e| werr(&md, e))?;
    let html = dir.join("report.html");
    std::fs::write(&html, render_report_html_with(c, ctx)).map_err(|e| werr(&html, e))?;
    Ok(())
}
