//! Command-line flags: the cohort protocol's flags (shared with `bench-cohort`, which passes
//! them on), plus this worker's own output settings.

use clap::{Parser, ValueEnum};
use coload_cohort_schema::cli::{WorkerFlags, WorkerPlace};

/// Run one coload worker: warm up, meet the cohort at the barrier, time a window of ResNet18
/// batches, and write worker.json, batches.jsonl, telemetry.jsonl and gpm.jsonl into --out.
#[derive(Debug, Parser)]
#[command(
    name = "bench-worker",
    version,
    about,
    max_term_width = 100,
    args_override_self = true
)]
pub(crate) struct Args {
    /// Which worker of which cohort this is, and where its files go.
    #[command(flatten)]
    pub(crate) place: WorkerPlace,

    /// What every worker of the cohort measures, and how.
    #[command(flatten)]
    pub(crate) flags: WorkerFlags,

    /// Kubernetes node name, recorded in worker.json (default: $NODE_NAME)
    #[arg(long, env = "NODE_NAME")]
    pub(crate) node_name: Option<String>,

    /// Print only errors
    #[arg(long, short)]
    pub(crate) quiet: bool,

    /// Progress format on stderr: text for people, json (one object per line) for log collectors
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub(crate) log_format: LogFormat,
}

/// Progress output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LogFormat {
    /// One readable line per phase.
    Text,
    /// One JSON object per line.
    Json,
}

impl Args {
    /// Checks what clap cannot: ranges and relations between flags.
    pub(crate) fn validate(&self) -> Result<(), String> {
        self.place.validate()?;
        self.flags.validate()?;
        coload_barrier::validate_experiment_id(&self.place.experiment).map_err(|e| e.to_string())
    }
}
