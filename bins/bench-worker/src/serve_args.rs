//! The plan a serve worker's flags make (`coload_spec::ServeFlags`: `--rate`,
//! `--arrivals`, `--arrivals-file`, `--max-batch`, `--max-queue-delay-ms`, `--slo-ms`): the
//! arrival schedule and the batching policy, built and checked before anything else runs.

use std::time::Duration;

use coload_cohort_schema::{ServeConfig, Workload};
use coload_spec::Arrivals;
use coload_timing::{ArrivalKind, ArrivalSchedule, ServePolicy};

use crate::cli::Args;

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
    // The flags were checked against the workload by `Args::validate` (coload_spec's rules:
    // serve flags for serve workers only, eager only, the numbers' ranges).
    let s = &args.serve;
    if args.place.workload != Workload::Serve {
        return Ok(None);
    }
    let policy = ServePolicy::new(
        s.max_batch,
        // Checked by coload_spec (finite, >= 0); a value too large for a Duration is refused.
        Duration::try_from_secs_f64(s.max_queue_delay_ms / 1e3)
            .map_err(|e| format!("--max-queue-delay-ms {}: {e}", s.max_queue_delay_ms))?,
    )
    .map_err(|e| e.to_string())?;
    let window_ns = args.flags.window_s.as_nanos();
    let schedule = match (&s.arrivals_file, s.rate) {
        (Some(path), _) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read --arrivals-file {}: {e}", path.display()))?;
            ArrivalSchedule::from_offsets_text(&path.display().to_string(), &text, window_ns)
        }
        (None, Some(rate)) => match s.arrivals {
            Arrivals::Poisson => ArrivalSchedule::poisson(rate, args.flags.seed, window_ns),
            Arrivals::Uniform => ArrivalSchedule::uniform(rate, window_ns),
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
