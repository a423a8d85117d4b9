//! The serve flags of a cohort: passed on to its serve workers, used by the summary's SLO, and
//! by the capacity search (`--find-capacity`).

use std::path::PathBuf;

use anyhow::bail;
use coload_cohort_schema::Workload;

/// Serve workers' flags, and the capacity search.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ServeArgs {
    /// serve workers: offered load, requests per second each (the start rate with
    /// --find-capacity)
    #[arg(long, value_name = "PER_S")]
    pub(crate) rate: Option<f64>,

    /// serve workers: arrival pattern, poisson or uniform
    #[arg(long, default_value = "poisson")]
    pub(crate) arrivals: String,

    /// serve workers: replay this trace of arrival offsets instead of --rate
    #[arg(long, value_name = "FILE", conflicts_with = "rate")]
    pub(crate) arrivals_file: Option<PathBuf>,

    /// serve workers: the most requests in one batch
    #[arg(long, default_value_t = 32)]
    pub(crate) max_batch: u32,

    /// serve workers: how long the oldest waiting request may wait for more, ms
    #[arg(long, default_value_t = 0.0, value_name = "MS")]
    pub(crate) max_queue_delay_ms: f64,

    /// The latency objective, ms: recorded by serve workers and judged in the summary
    /// (refused without a serve worker)
    #[arg(long, value_name = "MS")]
    pub(crate) slo_ms: Option<f64>,

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

impl ServeArgs {
    /// Checks the flags against the mix: serve flags need a serve worker, a serve worker needs
    /// a rate (or a trace, or a search).
    pub(crate) fn check(&self, mix: &[Workload]) -> anyhow::Result<()> {
        let serving = mix.contains(&Workload::Serve);
        if !serving {
            for (given, flag) in [
                (self.rate.is_some(), "--rate"),
                (self.arrivals_file.is_some(), "--arrivals-file"),
                (self.slo_ms.is_some(), "--slo-ms"),
                (self.find_capacity, "--find-capacity"),
            ] {
                if given {
                    bail!(
                        "{flag} needs a serve worker in the cohort (e.g. --workers serve=1,train=6)"
                    );
                }
            }
            return Ok(());
        }
        if self.find_capacity && self.arrivals_file.is_some() {
            bail!("--find-capacity varies --rate; it cannot search a fixed --arrivals-file trace");
        }
        if self.rate.is_none() && self.arrivals_file.is_none() && !self.find_capacity {
            bail!(
                "the cohort has serve workers: give --rate R (requests per second each), \
                 --arrivals-file FILE, or --find-capacity with --slo-ms"
            );
        }
        Ok(())
    }

    /// The flags a serve worker gets, at `rate` (the search's probe rate) or --rate.
    pub(crate) fn worker_args(&self, rate: Option<f64>) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(file) = &self.arrivals_file {
            out.push("--arrivals-file".to_owned());
            out.push(file.display().to_string());
        } else if let Some(r) = rate.or(self.rate) {
            out.extend(["--rate".to_owned(), r.to_string()]);
            out.extend(["--arrivals".to_owned(), self.arrivals.clone()]);
        }
        out.extend(["--max-batch".to_owned(), self.max_batch.to_string()]);
        out.extend([
            "--max-queue-delay-ms".to_owned(),
            self.max_queue_delay_ms.to_string(),
        ]);
        if let Some(slo) = self.slo_ms {
            out.extend(["--slo-ms".to_owned(), slo.to_string()]);
        }
        out
    }
}
