//! Command-line flags.

use std::path::PathBuf;

use clap::Parser;
use coload_cohort_schema::Mode;

/// Run a cohort of bench-worker processes on this node with a fresh experiment id and a private
/// barrier directory, then print the cohort's summary. Example:
/// `bench-cohort --workers infer=1,train=6 --mode timeslice --out runs/mixed`; a serve worker
/// beside six trainers: `--workers serve=1,train=6 --rate 500 --slo-ms 10`; its capacity at that
/// objective: `--workers serve=1,train=6 --find-capacity --slo-ms 10 --slo-quantile 0.99`
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
    /// infers or serves, 1-6 train)
    #[arg(long, conflicts_with_all = ["count", "workload"])]
    pub(crate) workers: Option<String>,

    /// Number of workers of one workload (with --workload)
    #[arg(long, requires = "workload")]
    pub(crate) count: Option<u32>,

    /// The workload of every worker (with --count): train, infer or serve
    #[arg(long, requires = "count")]
    pub(crate) workload: Option<String>,

    /// How the workers share the GPU: exclusive, mig, timeslice, mig-timeslice or mps
    /// (mps starts a private MPS control daemon for the cohort and stops it afterwards)
    #[arg(long, value_parser = parse_mode)]
    pub(crate) mode: Mode,

    /// Output folder: worker-<i>/ per worker (artifacts and log), sync/, summary.json
    #[arg(long)]
    pub(crate) out: PathBuf,

    /// Run K cohorts one after another, each with a fresh experiment id, into <out>/rep-<k>/
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub(crate) repeat: u32,

    /// Device passed to every worker: auto, cpu or cuda:N
    #[arg(long, default_value = "auto")]
    pub(crate) device: String,

    /// Pin worker i to the i-th entry (sets CUDA_VISIBLE_DEVICES), e.g. MIG-a,MIG-b,MIG-c
    #[arg(long, value_delimiter = ',')]
    pub(crate) visible_devices: Vec<String>,

    /// Length of each worker's timed window, seconds
    #[arg(long, default_value_t = 45.0)]
    pub(crate) window_s: f64,

    /// Untimed batches per worker before the barrier
    #[arg(long, default_value_t = 20)]
    pub(crate) warmup_batches: u32,

    /// Time from the leader's decision to the common start, seconds
    #[arg(long, default_value_t = 5.0)]
    pub(crate) start_lead_s: f64,

    /// Seconds a worker waits at the barrier for the others
    #[arg(long, default_value_t = 600.0)]
    pub(crate) join_timeout_s: f64,

    /// Images per batch
    #[arg(long, default_value_t = 32)]
    pub(crate) batch_size: u32,

    /// Height and width of the synthetic images
    #[arg(long, default_value_t = 224)]
    pub(crate) image_size: u32,

    /// Seed for weights and inputs
    #[arg(long, default_value_t = 0)]
    pub(crate) seed: u64,

    /// Fail workers whose device does not match --mode, and fail the summary on co-location
    /// mismatches
    #[arg(long)]
    pub(crate) strict: bool,

    /// The bench-worker executable (default: next to this one)
    #[arg(long)]
    pub(crate) worker_bin: Option<PathBuf>,

    /// Only print the summary and errors
    #[arg(long, short)]
    pub(crate) quiet: bool,

    #[command(flatten)]
    pub(crate) serve: crate::serve::ServeArgs,
}

fn parse_mode(s: &str) -> Result<Mode, String> {
    s.parse()
}
