//! Command-line flags: the launcher's own, plus the worker flags it passes on to every worker
//! ([`WorkerFlags`], one definition shared with `bench-worker`), and the `study` subcommand.
//!
//! `bench-cohort --workers ... --out ...` (one cohort) stays the default command: the run flags
//! are flattened into [`Cli`] as an `Option`, and clap refuses them next to a subcommand
//! (`args_conflicts_with_subcommands`), so `bench-cohort study PLAN --out DIR` and the old
//! command line both parse. `bench-cohort run ...` is the same as the bare form.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use coload_cohort_schema::Workload;
use coload_cohort_schema::cli::WorkerFlags;

use crate::mix::Mix;

/// Run a cohort of bench-worker processes on this node with a fresh experiment id and a private
/// barrier directory, then print the cohort's summary. Example:
/// `bench-cohort --workers infer=1,train=6 --mode timeslice --out runs/mixed`.
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
    pub(crate) run: Option<Args>,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run one cohort (the same as giving its flags without a subcommand).
    Run(Args),
    /// Run a study plan (a TOML file, or the built-in `article` or `quick`): every cohort, in
    /// an interleaved order, resumable, then the comparison and report.html.
    Study(crate::study::StudyArgs),
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
pub(crate) struct Args {
    /// Workload mix in replica order, e.g. `infer=1,train=6` (replica 0 infers, 1-6 train)
    #[arg(long, value_parser = Mix::parse, conflicts_with_all = ["count", "workload"])]
    pub(crate) workers: Option<Mix>,

    /// Number of workers of one workload (with --workload)
    #[arg(long, requires = "workload", value_parser = clap::value_parser!(u32).range(1..=256))]
    pub(crate) count: Option<u32>,

    /// The workload of every worker (with --count): train or infer
    #[arg(long, requires = "count")]
    pub(crate) workload: Option<Workload>,

    /// The flags every worker gets (--mode mps also starts a private MPS control daemon for
    /// the cohort and stops it afterwards).
    #[command(flatten)]
    pub(crate) flags: WorkerFlags,

    /// Output folder: worker-<i>/ per worker (artifacts and log), sync/, summary.json
    #[arg(long)]
    pub(crate) out: PathBuf,

    /// Run K cohorts one after another, each with a fresh experiment id, into <out>/rep-<k>/
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub(crate) repeat: u32,

    /// Pin worker i to the i-th entry (sets CUDA_VISIBLE_DEVICES), e.g. MIG-a,MIG-b,MIG-c
    #[arg(long, value_delimiter = ',')]
    pub(crate) visible_devices: Vec<String>,

    /// Fail workers whose device does not match --mode (--strict-device), and fail the summary
    /// on co-location mismatches
    #[arg(long)]
    pub(crate) strict: bool,

    /// The bench-worker executable (default: next to this one)
    #[arg(long)]
    pub(crate) worker_bin: Option<PathBuf>,

    /// Only print the summary and errors
    #[arg(long, short)]
    pub(crate) quiet: bool,
}

impl Args {
    /// The workload of every replica, in replica order.
    pub(crate) fn mix(&self) -> Result<Mix, String> {
        match (&self.workers, self.count, self.workload) {
            (Some(mix), _, _) => Ok(mix.clone()),
            (None, Some(n), Some(w)) => Ok(Mix::uniform(w, n)),
            _ => Err(
                "say which workers to run: --workers infer=1,train=6, or --count N --workload train|infer"
                    .to_owned(),
            ),
        }
    }

    /// Checks what clap cannot; returns the mix.
    pub(crate) fn validate(&self) -> Result<Mix, String> {
        self.flags.validate()?;
        let mix = self.mix()?;
        if !self.visible_devices.is_empty() && self.visible_devices.len() != mix.len() {
            return Err(format!(
                "--visible-devices lists {} devices for {} workers; give one per worker",
                self.visible_devices.len(),
                mix.len()
            ));
        }
        Ok(mix)
    }
}
