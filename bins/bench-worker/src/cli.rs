//! Command-line flags: one per experiment parameter, with the scheduler's environment as
//! fallback where Kubernetes or Polyaxon provide one.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};
use coload_cohort_schema::{Mode, Precision, Workload};
use coload_workload::DeviceChoice;

/// Run one coload worker: warm up, meet the cohort at the barrier, time a window of ResNet18
/// batches, and write worker.json, batches.jsonl and telemetry.jsonl into --out.
#[derive(Debug, Parser)]
#[command(
    name = "bench-worker",
    version,
    about,
    max_term_width = 100,
    args_override_self = true
)]
pub(crate) struct Args {
    /// Cohort id shared by every worker; fresh for every cohort ([A-Za-z0-9._-], 1-128 chars)
    #[arg(long)]
    pub(crate) experiment: String,

    /// This worker's replica id, 0..count (default: $JOB_COMPLETION_INDEX)
    #[arg(long, env = "JOB_COMPLETION_INDEX")]
    pub(crate) replica: u32,

    /// Number of workers in the cohort
    #[arg(long)]
    pub(crate) count: u32,

    /// What this worker runs: train, infer or serve (serve takes the serve flags below)
    #[arg(long, value_parser = parse_workload)]
    pub(crate) workload: Workload,

    /// How the cohort shares the GPU: exclusive, mig, timeslice, mig-timeslice or mps
    #[arg(long, value_parser = parse_mode)]
    pub(crate) mode: Mode,

    /// Shared directory for the barrier (a ReadWriteMany volume across nodes)
    #[arg(long, default_value = "/mnt/benchmark-sync")]
    pub(crate) sync_dir: PathBuf,

    /// Directory for this worker's artifacts (created; an existing worker.json is never overwritten)
    #[arg(long)]
    pub(crate) out: PathBuf,

    /// Kubernetes node name, recorded in worker.json (default: $NODE_NAME)
    #[arg(long, env = "NODE_NAME")]
    pub(crate) node_name: Option<String>,

    /// Length of the timed window, seconds
    #[arg(long, default_value_t = 45.0)]
    pub(crate) window_s: f64,

    /// Untimed batches before the barrier
    #[arg(long, default_value_t = 20)]
    pub(crate) warmup_batches: u32,

    /// Time from the leader's decision to the common start, seconds
    #[arg(long, default_value_t = 5.0)]
    pub(crate) start_lead_s: f64,

    /// Seconds to wait at the barrier for the other workers before failing
    #[arg(long, default_value_t = 600.0)]
    pub(crate) join_timeout_s: f64,

    /// Device: auto (first CUDA device, else CPU), cpu or cuda:N
    #[arg(long, default_value = "auto")]
    pub(crate) device: DeviceChoice,

    /// Images per batch
    #[arg(long, default_value_t = 32)]
    pub(crate) batch_size: u32,

    /// Height and width of the synthetic images
    #[arg(long, default_value_t = 224)]
    pub(crate) image_size: u32,

    /// Numeric precision (fp32 is the article's protocol)
    #[arg(long, value_enum, default_value_t = PrecisionArg::Fp32)]
    pub(crate) precision: PrecisionArg,

    /// Seed for weights and synthetic inputs
    #[arg(long, default_value_t = 0)]
    pub(crate) seed: u64,

    /// Fail (instead of warning) when the device does not match --mode
    #[arg(long)]
    pub(crate) strict_device: bool,

    /// Device telemetry sampling rate during the window, hertz (0 turns it off)
    #[arg(long, default_value_t = 10.0)]
    pub(crate) telemetry_hz: f64,

    /// Print only errors
    #[arg(long, short)]
    pub(crate) quiet: bool,

    /// Progress format on stderr: text for people, json (one object per line) for log collectors
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub(crate) log_format: LogFormat,

    #[command(flatten)]
    pub(crate) serve: crate::serve_args::ServeArgs,
}

/// Progress output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LogFormat {
    /// One readable line per phase.
    Text,
    /// One JSON object per line.
    Json,
}

/// Precision on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum PrecisionArg {
    /// 32-bit floats.
    Fp32,
    /// bfloat16 autocast.
    Bf16,
}

impl From<PrecisionArg> for Precision {
    fn from(p: PrecisionArg) -> Self {
        match p {
            PrecisionArg::Fp32 => Precision::Fp32,
            PrecisionArg::Bf16 => Precision::Bf16,
        }
    }
}

fn parse_mode(s: &str) -> Result<Mode, String> {
    s.parse()
}

fn parse_workload(s: &str) -> Result<Workload, String> {
    s.parse()
}

impl Args {
    /// Checks what clap cannot: ranges and relations between flags.
    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.count == 0 {
            return Err("--count must be at least 1".into());
        }
        if self.replica >= self.count {
            return Err(format!(
                "--replica {} is outside 0..{} (replica ids run from 0 to count - 1)",
                self.replica, self.count
            ));
        }
        for (name, value) in [
            ("--window-s", self.window_s),
            ("--start-lead-s", self.start_lead_s),
            ("--join-timeout-s", self.join_timeout_s),
        ] {
            if !value.is_finite() || value <= 0.0 {
                return Err(format!(
                    "{name} must be a positive number of seconds, got {value}"
                ));
            }
        }
        if !self.telemetry_hz.is_finite() || self.telemetry_hz < 0.0 || self.telemetry_hz > 1000.0 {
            return Err(format!(
                "--telemetry-hz must be between 0 and 1000, got {}",
                self.telemetry_hz
            ));
        }
        if self.batch_size == 0 || self.image_size < 32 {
            return Err(format!(
                "--batch-size must be at least 1 and --image-size at least 32 (got {} and {})",
                self.batch_size, self.image_size
            ));
        }
        coload_barrier::validate_experiment_id(&self.experiment).map_err(|e| e.to_string())?;
        Ok(())
    }
}
