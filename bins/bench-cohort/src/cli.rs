//! Command-line flags: the launcher's own, plus the worker flags it passes on to every worker
//! ([`WorkerFlags`], one definition shared with `bench-worker`), and the `study` subcommand.
//!
//! `bench-cohort --workers ... --out ...` (one cohort) stays the default command: the run flags
//! are flattened into [`Cli`] as an `Option`, and clap refuses them next to a subcommand
//! (`args_conflicts_with_subcommands`), so `bench-cohort study PLAN --out DIR` and the old
//! command line both parse. `bench-cohort run ...` is the same as the bare form.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use coload_cohort_schema::cli::{ServeFlags, WorkerFlags};
use coload_cohort_schema::{DeviceChoice, Mode, Workload};

use crate::mix::Mix;
use crate::serve::CapacityArgs;

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
    pub(crate) run: Option<Args>,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run one cohort (the same as giving its flags without a subcommand).
    Run(Box<Args>),
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
    /// Workload mix in replica order, e.g. `infer=1,train=6` or `serve=1,train=6` (replica 0
    /// infers or serves, 1-6 train), or `hog=1,train=6`: the hog takes device memory first, and
    /// the others start once it holds it
    #[arg(long, value_parser = Mix::parse, conflicts_with_all = ["count", "workload"])]
    pub(crate) workers: Option<Mix>,

    /// Number of workers of one workload (with --workload)
    #[arg(long, requires = "workload", value_parser = clap::value_parser!(u32).range(1..=256))]
    pub(crate) count: Option<u32>,

    /// The workload of every worker (with --count): train, infer or serve
    #[arg(long, requires = "count")]
    pub(crate) workload: Option<Workload>,

    /// The flags every worker gets (--mode mps also starts a private MPS control daemon for
    /// the cohort, sets the share given by --mps-replicas, --mps-unlimited or --mps-threads and
    /// --mps-memory on it before any worker starts, and stops it afterwards).
    #[command(flatten)]
    pub(crate) flags: WorkerFlags,

    /// Output folder: worker-<i>/ per worker (artifacts and log), sync/, summary.json
    #[arg(long)]
    pub(crate) out: PathBuf,

    /// Run K cohorts one after another, each with a fresh experiment id, into <out>/rep-<k>/
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub(crate) repeat: u32,

    /// Pin worker i to the i-th entry (sets CUDA_VISIBLE_DEVICES), e.g. MIG-a,MIG-b,MIG-c, or
    /// 0,1,...,6 for an exclusive cohort on seven GPUs (required there: one GPU per worker)
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

    /// The serve workers' flags (given to serve workers only).
    #[command(flatten)]
    pub(crate) serve: ServeFlags,

    /// The SLO's quantile and the capacity search.
    #[command(flatten)]
    pub(crate) capacity: CapacityArgs,
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
        crate::serve::check(&self.serve, &self.capacity, mix.workloads())?;
        if self.capacity.find_capacity {
            crate::capacity::search(self)?;
        }
        if let Some(model) = &self.flags.model {
            // A per-workload declaration must name a model for every workload of the mix (a hog
            // runs none).
            for w in mix.workloads().iter().filter(|w| **w != Workload::Hog) {
                model.model_for(*w)?;
            }
        }
        if !self.visible_devices.is_empty() && self.visible_devices.len() != mix.len() {
            return Err(format!(
                "--visible-devices lists {} devices for {} workers; give one per worker",
                self.visible_devices.len(),
                mix.len()
            ));
        }
        self.validate_exclusive(&mix)?;
        self.validate_hog(&mix)?;
        Ok(mix)
    }

    /// An exclusive cohort of several workers needs one distinct GPU each (issue 12): without
    /// --visible-devices every worker would land on the same one, and the summary refuses that.
    fn validate_exclusive(&self, mix: &Mix) -> Result<(), String> {
        if self.flags.mode != Mode::Exclusive || mix.len() < 2 {
            return Ok(());
        }
        if self.visible_devices.is_empty() {
            return Err(format!(
                "--mode exclusive with {n} workers needs one GPU each: list them with \
                 --visible-devices (e.g. {example})",
                n = mix.len(),
                example = (0..mix.len())
                    .map(|i| i.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for d in &self.visible_devices {
            if !seen.insert(d.trim()) {
                return Err(format!(
                    "--mode exclusive gives each worker its own GPU, but --visible-devices lists \
                     `{d}` twice"
                ));
            }
        }
        Ok(())
    }

    /// The hog takes device memory (issue 12): it needs a GPU, and --hog-bytes needs a hog.
    fn validate_hog(&self, mix: &Mix) -> Result<(), String> {
        let hogs = mix
            .workloads()
            .iter()
            .filter(|w| **w == Workload::Hog)
            .count();
        if hogs == 0 {
            if self.flags.hog_bytes.is_some() {
                return Err(
                    "--hog-bytes sizes the hog workload, but the mix has none (e.g. --workers \
                     hog=1,train=6)"
                        .to_owned(),
                );
            }
            return Ok(());
        }
        if self.flags.device == DeviceChoice::Cpu {
            return Err(
                "the hog workload takes device memory to test a GPU sharing mode; --device cpu \
                 has none to take (leave --device at auto, or give cuda:N)"
                    .to_owned(),
            );
        }
        if hogs == mix.len() {
            return Err(
                "the mix is only hogs: a hog shows what it takes from the other workers, so add \
                 some (e.g. --workers hog=1,train=6)"
                    .to_owned(),
            );
        }
        Ok(())
    }
}
