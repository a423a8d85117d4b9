//! Reports for people from what `coload-analysis` computes: one cohort's summary (a terminal
//! table, Markdown), a comparison (`comparison.md`, a self-contained `report.html` with SVG
//! charts), a hog cohort's memory isolation, and a study's report ([`study_report`]). The
//! rules (validation, statistics, comparisons) stay in `coload-analysis`; this crate decides
//! only how their results read. Laid out the way hyperfine's `src/export/` separates formats:
//!
//! - `document`: the document model (headings, paragraphs, tables, lists, figures), with no
//!   output format in it.
//! - What each report says, as a document: `comparison` (`comparison.md`, `report.html`) and
//!   `summary` (one cohort, for a terminal or as Markdown), `isolation` (hog cohorts).
//! - One module per output: `markdown`, `html` (a self-contained page) and `text`
//!   (aligned columns for a terminal).
//! - `verdict`: what the comparison says per policy and shape, and the sentences that lead
//!   the report; `charts` draws it (and each cohort's latency by percentile) with the SVG
//!   primitives of `svg`, inlined by the HTML page.
//! - `why`: the GPU-activity and energy tables both reports include.
//! - [`study_report`]: a study folder's report, assembled from its index and cohorts.
//! - [`results_page`]: the repository's `docs/results.md`, from its recorded studies with the
//!   same cells, words and rounding as their reports.
//!
//! A new report builds a new `document::Document` and gets every output; the outputs never
//! decide content.

mod charts;
mod comparison;
mod decision;
mod decode;
mod document;
mod html;
mod isolation;
mod markdown;
mod provenance;
pub mod results_page;
mod serve;
mod serve_llm;
pub mod study_report;
mod summary;
mod svg;
mod text;
mod verdict;
mod why;

use std::collections::BTreeMap;
use std::path::Path;

use coload_analysis::AnalysisError;
use coload_cohort_schema::{Comparison, Mode, write_json_atomic};

pub use decision::decision_markdown;
pub use isolation::{render_isolation_markdown, render_isolation_table};
pub(crate) use provenance::{number, utc_span};
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
    /// Fixed-rate serve cohorts of the study: points on the chart of request latency against
    /// offered load, beside the capacity searches' probes.
    pub serve_points: Vec<ServePoint>,
    /// Whether the other workers kept running beside one that takes all memory, per policy.
    pub isolation: Vec<IsolationRow>,
    /// Cohorts with `serve-llm` workers (fixed-rate ones and capacity probes): TTFT and TPOT
    /// against the offered rate per policy, and the KV cache each worker held.
    pub llm_serve: Vec<LlmServeRow>,
    /// The provenance header under the title, read from the data (never typed): `(what,
    /// value)` rows such as `("model", "resnet18, batch 32 of 3x224x224, fp32, eager")`.
    pub provenance: Vec<(String, String)>,
    /// Policies the study planned but did not measure on its node, each with the reason
    /// (`("mig", "mode mig needs 7 MIG instance(s) ...")`): named in the verdict.
    pub not_measured: Vec<(String, String)>,
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

/// A policy's serving capacity at an objective: the answer of one capacity search
/// (`capacity.json`) and its probes.
#[derive(Debug, Clone, PartialEq)]
pub struct CapacityRow {
    /// The cohort's folder name in its study (empty outside a study).
    pub name: String,
    /// The policy.
    pub policy: String,
    /// Its mode (for the colour).
    pub mode: Mode,
    /// The objective, in words (`p99 <= 10 ms`).
    pub objective: String,
    /// The objective, milliseconds.
    pub slo_ms: f64,
    /// The quantile that must meet it (0.99).
    pub quantile: f64,
    /// The highest rate that passed below every rate that failed, requests per second per
    /// serve worker; `None` when no rate met it.
    pub capacity_per_s: Option<f64>,
    /// The lowest rate that failed above it; `None` when none failed. The capacity lies in
    /// `[capacity_per_s, failed_above_per_s)`.
    pub failed_above_per_s: Option<f64>,
    /// Why the search stopped: `converged`, `probes_exhausted`, `max_rate_passes`,
    /// `min_rate_fails`, `probe_failed`.
    pub stop: String,
    /// Every probe, in the order the search ran them.
    pub probes: Vec<CapacityPoint>,
    /// What else to know (the mix beside the server).
    pub note: String,
}

impl CapacityRow {
    /// The answer in words, as the search's stop allows it: `850 to 1,000` (the bracket
    /// `[passed, failed)` to the significant figures its width allows: a search that passed
    /// 848.5 and failed 1,009 knows the capacity to two figures, not to a tenth), `at least
    /// 16,000` (the highest rate allowed passed, or no probe failed), `below 25` (the lowest
    /// rate allowed failed, or no probe passed), `unknown` (no probe completed).
    #[must_use]
    pub fn capacity_words(&self) -> String {
        coload_analysis::figures::capacity_words(self.capacity_per_s, self.failed_above_per_s)
    }
}

/// A quantile as a percentile's name: `p99`, `p99.9`, `p50`.
#[must_use]
pub fn quantile_words(quantile: f64) -> String {
    let pct = format!("{:.3}", quantile * 100.0);
    format!("p{}", pct.trim_end_matches('0').trim_end_matches('.'))
}

/// An objective in words: `p99 <= 10 ms`.
#[must_use]
pub fn objective_words(slo_ms: f64, quantile: f64) -> String {
    format!("{} <= {} ms", quantile_words(quantile), svg::rate(slo_ms))
}

/// One cohort with `serve-llm` workers, as the report's LLM serving table shows it: the
/// slowest worker's TTFT and TPOT p99 at the offered rate.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmServeRow {
    /// Its policy.
    pub policy: String,
    /// Its mode.
    pub mode: Mode,
    /// The cohort (a fixed-rate cohort's experiment id, or `<search> probe <k>`).
    pub cohort: String,
    /// Requests offered per second per `serve-llm` worker (their mean).
    pub offered_per_s: f64,
    /// The slowest worker's TTFT p99, milliseconds (`None`: it falls on a request without a
    /// first token).
    pub ttft_p99_ms: Option<f64>,
    /// The slowest worker's TPOT p99, milliseconds.
    pub tpot_p99_ms: Option<f64>,
    /// Output tokens per second, summed over the `serve-llm` workers.
    pub output_tokens_per_s: f64,
    /// The lowest SLO attainment among them and the objectives, where judged.
    pub slo: Option<String>,
    /// Whether a worker was overloaded.
    pub overloaded: bool,
    /// Each worker's preallocated KV cache, bytes (where recorded).
    pub kv_cache_bytes: Vec<Option<u64>>,
    /// The search's capacity at its objective, for a probe of one.
    pub capacity: Option<String>,
}

/// The objective of an LLM capacity search or SLO: `TTFT p99 <= 500 ms and TPOT p99 <= 50 ms`.
#[must_use]
pub fn llm_objective_words(ttft_ms: f64, tpot_ms: f64, quantile: f64) -> String {
    let q = quantile_words(quantile);
    format!(
        "TTFT {q} <= {} ms and TPOT {q} <= {} ms",
        svg::rate(ttft_ms),
        svg::rate(tpot_ms)
    )
}

/// One probe of a capacity search: the rate it offered and what the serve workers saw.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CapacityPoint {
    /// The rate asked of each serve worker, requests per second.
    pub rate_per_s: f64,
    /// The request latency at the objective's quantile, milliseconds: the slowest serve
    /// worker's (the verdict needs every one to meet it); `None` when the cohort did not
    /// complete or the quantile falls on an unfinished request.
    pub latency_ms: Option<f64>,
    /// Whether every serve worker met the objective; `None` when the cohort did not complete.
    pub passed: Option<bool>,
    /// The slowest `serve-llm` worker's TTFT and TPOT at the objective's quantile,
    /// milliseconds, in a search with serve-llm workers (`None` elsewhere, or where a worker
    /// has no such figure).
    pub llm_ms: Option<(f64, f64)>,
    /// Whether a serve worker was judged overloaded (its latencies are lower bounds).
    pub overloaded: bool,
}

/// A fixed-rate serve cohort of the study, as a point of request latency against offered load.
#[derive(Debug, Clone, PartialEq)]
pub struct ServePoint {
    /// The policy.
    pub policy: String,
    /// Its mode (for the colour).
    pub mode: Mode,
    /// Its experiment id.
    pub experiment: String,
    /// The load offered to each serve worker, requests per second (measured over the common
    /// interval; the mean over serve workers).
    pub offered_per_s: f64,
    /// Request latency by quantile (`(0.99, ms)`): the slowest serve worker's at p50, p90, p99
    /// and p99.9, where measured.
    pub latency_ms: Vec<(f64, f64)>,
    /// Whether a serve worker was judged overloaded.
    pub overloaded: bool,
    /// The objective the cohort was judged at and the lowest attainment among its serve
    /// workers (the fraction of requests within it), where an objective was given.
    pub slo: Option<ServeSlo>,
}

/// A fixed-rate serve cohort's objective and how well it was met.
#[derive(Debug, Clone, PartialEq)]
pub struct ServeSlo {
    /// The objective, in words (`p99 <= 25 ms`).
    pub objective: String,
    /// The lowest attainment among the serve workers: requests within the objective's
    /// latency over requests, 0 to 1.
    pub attainment: f64,
    /// Whether every serve worker met the objective (its quantile within the latency, and
    /// LoadGen's early-stopping test passed).
    pub meets: bool,
}

impl ServePoint {
    /// The latency at `quantile`, where measured.
    #[must_use]
    pub fn latency_at(&self, quantile: f64) -> Option<f64> {
        self.latency_ms
            .iter()
            .find(|(q, _)| (q - quantile).abs() < 1e-9)
            .map(|(_, ms)| *ms)
    }
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
