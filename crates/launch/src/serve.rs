//! The serve side of a cohort: the serve flags (`coload_spec::ServeFlags`) passed on to its
//! serve workers, at a capacity probe's rate where the search sets one.

use coload_spec::ServeFlags;

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
