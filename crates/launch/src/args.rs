//! [`LaunchArgs`]: a cohort spec and where it runs on this node.

use std::path::PathBuf;

use coload_cohort_schema::Mode;
use coload_spec::{CohortSpec, Mix};

use crate::error::LauncherError;

/// Run one cohort of bench-worker processes on this node.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct LaunchArgs {
    /// What the cohort is.
    #[command(flatten)]
    pub spec: CohortSpec,

    /// Output folder: worker-<i>/ per worker (artifacts and log), sync/, summary.json. It must
    /// not hold an earlier cohort's results (they are never overwritten)
    #[arg(long)]
    pub out: PathBuf,

    /// Run K cohorts one after another, each with a fresh experiment id, into <out>/rep-<k>/
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeat: u32,

    /// Pin worker i to the i-th entry (sets CUDA_VISIBLE_DEVICES), e.g. MIG-a,MIG-b,MIG-c, or
    /// 0,1,...,6 for an exclusive cohort on seven GPUs (required there: one GPU per worker)
    #[arg(long, value_delimiter = ',')]
    pub visible_devices: Vec<String>,

    /// The bench-worker executable (default: next to this one)
    #[arg(long)]
    pub worker_bin: Option<PathBuf>,

    /// Only print the summary and errors
    #[arg(long, short)]
    pub quiet: bool,

    /// CPU threads each worker's libtorch may use (intra-op), when the cohort runs on the CPU;
    /// default: this host's cores shared out among the workers, at least 1 each
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub cpu_threads: Option<u32>,
}

impl LaunchArgs {
    /// Checks the spec and the placement; returns the mix.
    pub fn validate(&self) -> Result<Mix, LauncherError> {
        let mix = self.spec.validate()?;
        let n = mix.len();
        if !self.visible_devices.is_empty() && self.visible_devices.len() != n {
            return Err(LauncherError::Usage(format!(
                "--visible-devices lists {} devices for {n} workers; give one per worker",
                self.visible_devices.len(),
            )));
        }
        if self.spec.capacity.find_capacity && self.repeat != 1 {
            return Err(LauncherError::Usage(
                "--find-capacity runs its own sequence of cohorts; leave --repeat out".into(),
            ));
        }
        match self.spec.flags.mode {
            Mode::Exclusive if n >= 2 => self.validate_exclusive(n)?,
            Mode::Mig | Mode::MigTimeslice if self.visible_devices.is_empty() => {
                // On a MIG-enabled GPU, CUDA enumerates MIG devices only, and which of them a
                // worker gets is the placement the cohort measures: it must be said.
                return Err(LauncherError::Usage(format!(
                    "--mode {} needs --visible-devices: the MIG device of each worker (e.g. \
                     MIG-<uuid>,...; `nvidia-smi -L` lists them), or let `bench-cohort study` \
                     place the cohort",
                    self.spec.flags.mode
                )));
            }
            _ => {}
        }
        Ok(mix)
    }

    /// An exclusive cohort of several workers needs one distinct GPU each: without
    /// --visible-devices every worker would land on the same one, and the summary refuses that.
    fn validate_exclusive(&self, n: usize) -> Result<(), LauncherError> {
        if self.visible_devices.is_empty() {
            return Err(LauncherError::Usage(format!(
                "--mode exclusive with {n} workers needs one GPU each: list them with \
                 --visible-devices (e.g. {example})",
                example = (0..n).map(|i| i.to_string()).collect::<Vec<_>>().join(",")
            )));
        }
        let mut seen = std::collections::BTreeSet::new();
        for d in &self.visible_devices {
            if !seen.insert(d.trim()) {
                return Err(LauncherError::Usage(format!(
                    "--mode exclusive gives each worker its own GPU, but --visible-devices lists \
                     `{d}` twice"
                )));
            }
        }
        Ok(())
    }
}
