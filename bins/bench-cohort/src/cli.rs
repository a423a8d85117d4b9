//! The command line: `bench-cohort [run] FLAGS` (one cohort) and `bench-cohort study PLAN`.
//!
//! `bench-cohort --workers ... --out ...` (one cohort) stays the default command: the run flags
//! are flattened into [`Cli`] as an `Option`, and clap refuses them next to a subcommand
//! (`args_conflicts_with_subcommands`), so `bench-cohort study PLAN --out DIR` and the old
//! command line both parse. `bench-cohort run ...` is the same as the bare form.

use clap::{Parser, Subcommand};
use coload_cluster::{ClusterArgs, RenderArgs};
use coload_launch::LaunchArgs;
use coload_study::StudyArgs;

/// Run a cohort of bench-worker processes on this node with a fresh experiment id and a private
/// barrier directory, then print the cohort's summary. Example:
/// `bench-cohort --workers infer=1,train=6 --mode timeslice --out runs/mixed`; a serve worker
/// beside six trainers: `--workers serve=1,train=6 --rate 500 --slo-ms 10`; its capacity at that
/// objective: `--workers serve=1,train=6 --find-capacity --slo-ms 10 --slo-quantile 0.99`.
/// A whole study (many cohorts, then the comparison and report.html):
/// `bench-cohort study article --out runs/study`
#[derive(Debug, Parser)]
#[command(
    name = "bench-cohort",
    version,
    about,
    max_term_width = 100,
    args_override_self = true,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Option<Command>,
    /// One cohort (the default command).
    #[command(flatten)]
    pub(crate) run: Option<LaunchArgs>,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run one cohort (the same as giving its flags without a subcommand).
    Run(Box<Run>),
    /// Run a study plan (a TOML file, or a built-in one: `article`, `quick`, `frontier --mix
    /// serve=1,train=6 --slo-ms 10`, ...): every cohort, in an interleaved order, resumable,
    /// then the comparison and report.html; on this node, or on a Kubernetes cluster (--backend
    /// kubernetes), or written out as manifests (--emit DIR).
    Study(Box<Study>),
    /// Render one cohort as a Kubernetes Indexed Job or as Polyaxon operations.
    Render(Box<RenderArgs>),
}

/// A study, and where its cohorts run.
#[derive(Debug, clap::Args)]
pub(crate) struct Study {
    #[command(flatten)]
    pub(crate) study: StudyArgs,
    #[command(flatten)]
    pub(crate) cluster: ClusterArgs,
}

/// Run one cohort of bench-worker processes on this node.
#[derive(Debug, Parser)]
#[command(
    name = "bench-cohort",
    version,
    about,
    max_term_width = 100,
    args_override_self = true
)]
pub(crate) struct Run {
    #[command(flatten)]
    pub(crate) launch: LaunchArgs,
}
