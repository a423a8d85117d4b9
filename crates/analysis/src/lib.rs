//! Cohort validation, statistics and comparisons for coload.
//!
//! `bench-summarize` is a thin command line over this crate and `coload-report`, which renders
//! what this crate computes for people; another tool (`bench-cohort`, a notebook exporter) can
//! call the same functions. Nothing here links libtorch or needs a GPU.
//!
//! - [`summarize_dirs`]: reads a cohort's worker folders, refuses it with every problem named
//!   when it is incomplete or inconsistent ([`AnalysisError`], with [`AnalysisError::exit_code`]),
//!   and returns a [`CohortSummary`] (the `summary.json` document).
//! - [`isolation_dirs`]: the memory-isolation result of a cohort that holds a hog worker (who
//!   failed, at what allocation, with what error), read from its workers whatever their status.
//! - [`compare`]: several summaries against solo baselines and against each other (the
//!   `comparison.json` document; `coload-report` writes it with `comparison.md` and
//!   `report.html`).
//! - [`stats`] and [`interval`]: the statistical rules (nearest-rank percentiles, Jain fairness,
//!   Student-t intervals, the common interval and overlap), public so they can be tested and
//!   reused on their own.
//!
//! # Example
//!
//! ```no_run
//! use std::path::PathBuf;
//!
//! use coload_analysis::{Options, summarize_dirs};
//!
//! let dirs = vec![PathBuf::from("downloaded")]; // holds worker-0 .. worker-6
//! match summarize_dirs(&dirs, &Options::default()) {
//!     Ok(summary) => println!("{} workers", summary.workers.len()),
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
mod colocation;
mod compare;
mod error;
pub mod fidelity;
pub mod figures;
pub mod frontier;
pub mod histogram;
mod inputs;
pub mod interval;
mod isolation;
pub mod ratio;
mod scan;
mod serve;
mod serve_llm;
pub mod stats;
mod summarize;

pub use coload_cohort_schema::{CohortSummary, Comparison};
pub use colocation::plural;
pub use compare::{
    CompareInput, MIN_BASELINE_PER_S, check_figures, compare, compare_in_runs, load_compare_input,
    short_card,
};
pub use error::{AnalysisError, CohortProblem, IntervalCut};
pub use inputs::{discover, parse_worker_report};
pub use isolation::isolation_dirs;
pub use serve::{
    BACKLOG_BATCHES, BACKLOG_FRACTION, EARLY_STOPPING_CONFIDENCE, GROWTH_FLOOR_NS, GROWTH_RATIO,
    early_stopping_min_met, early_stopping_odds, request_latency_at,
};
pub use serve_llm::llm_latency_at;
pub use summarize::{
    CAVEATS, DEFAULT_SLO_QUANTILE, HOST_PRESSURE_PCT, Options, SERVE_CAVEAT, SERVE_LLM_CAVEAT,
    summarize_dirs,
};
