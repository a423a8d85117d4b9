//! A whole coload study on one node, as a library: `bench-cohort study PLAN --out DIR`.
//!
//! The plan ([`Plan`]) lists cohorts by policy and mix with their repeats, each a typed
//! [`coload_spec::CohortSpec`] laid from the plan's flag tables; the node decides which of them
//! it offers and on which GPUs; earlier runs of the same study are read back so that complete
//! cohorts are skipped and failed ones kept; the queue runs on the lanes, each cohort as a
//! `bench-cohort run` process of its own (the same code path as running it by hand, its log
//! beside its artifacts); the index (`coload_cohort_schema::study::Index`) records every
//! cohort's outcome after each one ends, a failed one's reason from its `failure.json`; at the
//! end the complete cohorts are compared against the solo baselines and the report is written
//! ([`coload_report::study_report`]).
//!
//! Where the cohorts run is a [`Target`]: this node ([`run`]), or a cluster backend's nodes
//! ([`run_with`], with an [`Offer`] of lanes and a [`Launcher`]; `coload-cluster` implements
//! both for Kubernetes), under the same contract.
//!
//! Layout of `DIR`: `plan.toml` (the plan's text), `index.json`, `cohorts/<name>/` per cohort
//! (bench-cohort's folder plus `cohort.log`), `cohorts/<name>.failed-<k>/` for failed runs,
//! `report/` (`comparison.json`, `comparison.md`, `report.html`).

mod block;
mod estimate;
mod folder;
pub mod frontier;
mod node;
mod plan;
mod progress;
mod resume;
mod schedule;
mod settle;
mod study;
mod table;

pub use node::{NotOffered, Offer, Placement};
pub use plan::{BUILTIN, Job, MAX_COHORTS, MAX_REPEATS, Plan, PlanError, Policy};
pub use schedule::{Ended, Launcher, Running};
pub use study::{STUDY_UNFINISHED, StudyArgs, StudyError, Target, run, run_with};
