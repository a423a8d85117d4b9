//! Cohort validation, statistics, comparisons and reports for coload.
//!
//! `bench-summarize` is a thin command line over this crate; another tool (`bench-cohort`, a
//! notebook exporter) can call the same functions. Nothing here links libtorch or needs a GPU.
//!
//! - [`summarize_dirs`]: reads a cohort's worker folders, refuses it with every problem named
//!   when it is incomplete or inconsistent ([`AnalysisError`], with [`AnalysisError::exit_code`]),
//!   and returns a [`CohortSummary`] (the `summary.json` document).
//! - [`render_table`], [`render_markdown`]: the summary for people.
//! - [`isolation_dirs`]: the memory-isolation result of a cohort that holds a hog worker (who
//!   failed, at what allocation, with what error), read from its workers whatever their status.
//! - [`compare`]: several summaries against solo baselines and against each other, with
//!   [`write_report`] writing `comparison.json`, `comparison.md` and a self-contained
//!   `report.html`.
//! - [`stats`] and [`interval`]: the statistical rules (nearest-rank percentiles, Jain fairness,
//!   Student-t intervals, the common interval and overlap), public so they can be tested and
//!   reused on their own.
//!
//! # Example
//!
//! ```no_run
//! use std::path::PathBuf;
//!
//! use coload_analysis::{Options, render_table, summarize_dirs};
//!
//! let dirs = vec![PathBuf::from("downloaded")]; // holds worker-0 .. worker-6
//! match summarize_dirs(&dirs, &Options::default()) {
//!     Ok(summary) => print!("{}", render_table(&summary)),
//!     Err(err) => {
//!         eprintln!("error: {err}");
//!         std::process::exit(i32::from(err.exit_code()));
//!     }
//! }
//! ```
//!
//! The statistics on their own:
//!
//! ```
//! use coload_analysis::stats::{P99, percentile};
//!
//! let sorted: Vec<u64> = (1..=200).collect();
//! assert_eq!(percentile(&sorted, P99), Some(198)); // ceil(0.99 * 200) = 198th smallest
//! ```

mod activity;
pub mod capacity;
mod colocation;
mod compare;
mod error;
pub mod histogram;
mod inputs;
pub mod interval;
mod isolation;
mod report;
mod scan;
mod serve;
mod serve_llm;
pub mod stats;
pub mod study_report;
mod summarize;

pub use coload_cohort_schema::{CohortSummary, Comparison};
pub use compare::{CompareInput, MIN_BASELINE_PER_S, check_figures, compare, load_compare_input};
pub use error::{AnalysisError, CohortProblem, IntervalCut};
pub use inputs::{discover, parse_worker_report};
pub use isolation::isolation_dirs;
pub use report::{
    CapacityPoint, CapacityRow, ContextCohort, IsolationRow, LlmServeRow, ReportContext,
    ServePoint, ServeSlo, llm_objective_words, objective_words, quantile_words,
    render_comparison_markdown, render_comparison_markdown_with, render_isolation_markdown,
    render_isolation_table, render_markdown, render_report_html, render_report_html_with,
    render_table, write_report, write_report_with,
};
pub use serve::{
    BACKLOG_BATCHES, BACKLOG_FRACTION, EARLY_STOPPING_CONFIDENCE, GROWTH_FLOOR_NS, GROWTH_RATIO,
    early_stopping_min_met, early_stopping_odds, request_latency_at,
};
pub use serve_llm::llm_latency_at;
pub use summarize::{
    CAVEATS, DEFAULT_SLO_QUANTILE, HOST_PRESSURE_PCT, Options, SERVE_CAVEAT, SERVE_LLM_CAVEAT,
    summarize_dirs,
};
