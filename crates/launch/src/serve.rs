//! The open-loop side of a cohort: the serve flags (`coload_spec::ServeFlags`) passed on to its
//! serve and serve-llm workers, each its own ([`ServeFlags::for_workload`]), at a capacity
//! probe's rate where the search sets one.

use coload_cohort_schema::Workload;
use coload_spec::ServeFlags;

/// The serve flags a worker of `workload` gets (`None`: it takes none): the cohort's, at `rate`
/// (a capacity probe's) when given.
pub(crate) fn for_worker(
    serve: &ServeFlags,
    workload: Workload,
    rate: Option<f64>,
) -> Option<ServeFlags> {
    let mut flags = serve.for_workload(workload)?;
    if flags.arrivals_file.is_none()
        && let Some(rate) = rate
    {
        flags.rate = Some(rate);
    }
    Some(flags)
}
