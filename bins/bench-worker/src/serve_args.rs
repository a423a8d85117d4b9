//! The serve workload's flags (`--rate`, `--arrivals`, `--arrivals-file`, `--max-batch`,
//! `--max-queue-delay-ms`, `--slo-ms`), kept in one struct flattened into the worker's command
//! line so that a launcher can share their definition, and the plan they make: the arrival
//! schedule and the batching policy, built and checked before anything else runs.

use std::path::PathBuf;
use std::time::Duration;

use clap::ValueEnum;
use coload_cohort_schema::{ServeConfig, Workload};
use coload_timing::{ArrivalKind, ArrivalSchedule, ServePolicy};

use crate::cli::Args;

/// The serve workload's flags; ignored by the other workloads (and refused when given to them).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ServeArgs {
    /// serve: offered load, requests per second, arriving open-loop whatever the server does
    #[arg(long, value_name = "PER_S")]
    pub(crate) rate: Option<f64>,

    /// serve: arrival pattern at --rate: poisson (exponential gaps, seeded by --seed) or uniform
    #[arg(long, value_enum, default_value_t = ArrivalsArg::Poisson)]
    pub(crate) arrivals: ArrivalsArg,

    /// serve: replay a trace instead of --rate: one offset per line, seconds from the window's
    /// start, non-decreasing (`#` comments allowed)
    #[arg(long, value_name = "FILE", conflicts_with = "rate")]
    pub(crate) arrivals_file: Option<PathBuf>,

    /// serve: the most requests in one batch (batches are padded to a power of two up to it)
    #[arg(long, default_value_t = 32)]
    pub(crate) max_batch: u32,

    /// serve: how long the oldest waiting request may wait for more before its batch leaves, ms
    /// (0: take what has arrived)
    #[arg(long, default_value_t = 0.0, value_name = "MS")]
    pub(crate) max_queue_delay_ms: f64,

    /// serve: the latency objective, ms, recorded with the results for the summary's SLO
    /// attainment
    #[arg(long, value_name = "MS")]
    pub(crate) slo_ms: Option<f64>,
}

/// `--arrivals` on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ArrivalsArg {
    /// Exponential inter-arrival times (a Poisson process).
    Poisson,
    /// Evenly spaced.
    Uniform,
}

/// What a serve worker will do in its window, decided before it starts.
#[derive(Debug)]
pub(crate) struct ServePlan {
    pub(crate) schedule: ArrivalSchedule,
    pub(crate) policy: ServePolicy,
    pub(crate) config: ServeConfig,
}

/// Builds the plan of a serve worker (`None` for the other workloads), or says which flag is
/// wrong and what to do.
pub(crate) fn plan(args: &Args) -> Result<Option<ServePlan>, String> {
    let s = &args.serve;
    if args.workload != Workload::Serve {
        for (given, flag) in [
            (s.rate.is_some(), "--rate"),
            (s.arrivals_file.is_some(), "--arrivals-file"),
            (s.slo_ms.is_some(), "--slo-ms"),
        ] {
            if given {
                return Err(format!(
                    "{flag} applies to --workload serve, not {}",
                    args.workload
                ));
            }
        }
        return Ok(None);
    }
    if !(s.max_queue_delay_ms.is_finite() && s.max_queue_delay_ms >= 0.0) {
        return Err(format!(
            "--max-queue-delay-ms must be a number of milliseconds >= 0, got {}",
            s.max_queue_delay_ms
        ));
    }
    if let Some(slo) = s.slo_ms
        && !(slo.is_finite() && slo > 0.0)
    {
        return Err(format!(
            "--slo-ms must be a positive number of milliseconds, got {slo}"
        ));
    }
    let policy = ServePolicy::new(
        s.max_batch,
        Duration::from_secs_f64(s.max_queue_delay_ms / 1e3),
    )
    .map_err(|e| e.to_string())?;
    let window_ns = (args.window_s * 1e9).round() as u64;
    let schedule = match (&s.arrivals_file, s.rate) {
        (Some(path), _) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read --arrivals-file {}: {e}", path.display()))?;
            ArrivalSchedule::from_offsets_text(&path.display().to_string(), &text, window_ns)
        }
        (None, Some(rate)) => match s.arrivals {
            ArrivalsArg::Poisson => ArrivalSchedule::poisson(rate, args.seed, window_ns),
            ArrivalsArg::Uniform => ArrivalSchedule::uniform(rate, window_ns),
        },
        (None, None) => {
            return Err(
                "--workload serve needs --rate R (requests per second) or --arrivals-file FILE"
                    .into(),
            );
        }
    }
    .map_err(|e| e.to_string())?;
    let config = ServeConfig {
        rate_per_s: s.rate.unwrap_or_else(|| schedule.realized_rate_per_s()),
        arrivals: schedule.kind().as_str().to_owned(),
        arrivals_file: s.arrivals_file.as_ref().map(|p| p.display().to_string()),
        max_batch: s.max_batch,
        max_queue_delay_ms: s.max_queue_delay_ms,
        padded_sizes: policy.sizes().to_vec(),
        slo_ms: s.slo_ms,
    };
    debug_assert!(schedule.kind() != ArrivalKind::File || s.arrivals_file.is_some());
    Ok(Some(ServePlan {
        schedule,
        policy,
        config,
    }))
}
