//! The serve side of a cohort: the shared serve flags (`coload_cohort_schema::cli::ServeFlags`)
//! passed on to its serve workers, and the launcher's own flags for the summary's SLO and the
//! capacity search (`--find-capacity`).

use coload_cohort_schema::Workload;
use coload_cohort_schema::cli::ServeFlags;

/// The launcher's serve flags: how the summary judges the SLO, and the capacity search.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct CapacityArgs {
    /// The quantile that must meet --slo-ms (default 0.99)
    #[arg(long, value_name = "Q")]
    pub(crate) slo_quantile: Option<f64>,

    /// Search the highest --rate at which every serve worker meets --slo-ms at --slo-quantile,
    /// one full cohort per probe (each with a fresh experiment id, in <out>/probe-<k>-<rate>/);
    /// writes <out>/capacity.json
    #[arg(long, requires = "slo_ms")]
    pub(crate) find_capacity: bool,

    /// Capacity search: never probe below this rate
    #[arg(long, default_value_t = 1.0, value_name = "PER_S")]
    pub(crate) rate_min: f64,

    /// Capacity search: never probe above this rate
    #[arg(long, default_value_t = 100_000.0, value_name = "PER_S")]
    pub(crate) rate_max: f64,

    /// Capacity search: the most cohorts to run
    #[arg(long, default_value_t = 12)]
    pub(crate) max_probes: u32,

    /// Capacity search: stop when the bracket is within this fraction (0.05: 5 %)
    #[arg(long, default_value_t = 0.05)]
    pub(crate) capacity_tolerance: f64,
}

/// Checks the serve flags against the mix: serve flags need a serve worker, a serve worker
/// needs a rate (or a trace, or a search).
pub(crate) fn check(
    serve: &ServeFlags,
    capacity: &CapacityArgs,
    mix: &[Workload],
) -> Result<(), String> {
    let serving = mix.contains(&Workload::Serve);
    if !serving {
        for (given, flag) in [
            (serve.rate.is_some(), "--rate"),
            (serve.arrivals_file.is_some(), "--arrivals-file"),
            (serve.slo_ms.is_some(), "--slo-ms"),
            (capacity.find_capacity, "--find-capacity"),
        ] {
            if given {
                return Err(format!(
                    "{flag} needs a serve worker in the cohort (e.g. --workers serve=1,train=6)"
                ));
            }
        }
        return Ok(());
    }
    if capacity.find_capacity && serve.arrivals_file.is_some() {
        return Err(
            "--find-capacity varies --rate; it cannot search a fixed --arrivals-file trace".into(),
        );
    }
    if serve.rate.is_none() && serve.arrivals_file.is_none() && !capacity.find_capacity {
        return Err(
            "the cohort has serve workers: give --rate R (requests per second each), \
             --arrivals-file FILE, or --find-capacity with --slo-ms"
                .into(),
        );
    }
    Ok(())
}

/// The serve flags a serve worker gets: the cohort's, at `rate` (a capacity probe's) when given.
pub(crate) fn for_worker(serve: &ServeFlags, rate: Option<f64>) -> ServeFlags {
    let mut flags = serve.clone();
    if flags.arrivals_file.is_none()
        && let Some(rate) = rate
    {
        flags.rate = Some(rate);
    }
    flags
}
