//! How long a cohort takes and may take: one rule that every door which waits on a cohort
//! reads (the launcher's kill grace, the worker's telemetry capacity, the Kubernetes Job's
//! `activeDeadlineSeconds`, the cluster study's watch, the study's time estimate).
//!
//! A cohort's time is made of parts the flags set: the workers wait at most `--join-timeout-s`
//! for their peers, the leader's decision comes `--start-lead-s` before the common start, the
//! window lasts `--window-s`, and then each worker stops its sampler, writes its artifacts and
//! exits within [`FINISH_SLACK`]. A door adds only what is its own (a Pod's image pull, a
//! study's measured setup) on top.

use std::time::Duration;

use crate::flags::WorkerFlags;
use crate::seconds::Seconds;

/// What a worker may take after its window ends: stop the telemetry sampler, write
/// `batches.jsonl`, the telemetry and `worker.json`, and exit. A launcher that stopped a cohort
/// waits this long past a window before it kills what is left.
pub const FINISH_SLACK: Seconds = Seconds::whole(30);

impl WorkerFlags {
    /// From the leader's start decision to the end of the window: the start lead and the
    /// window. What a cohort is expected to spend once its workers are ready.
    #[must_use]
    pub fn timed_span(&self) -> Duration {
        self.start_lead_s.duration() + self.window_s.duration()
    }

    /// From the leader's start decision to the last worker's exit at the latest: the timed
    /// span and [`FINISH_SLACK`].
    #[must_use]
    pub fn finish_within(&self) -> Duration {
        self.timed_span() + FINISH_SLACK.duration()
    }

    /// From the workers' start to the last worker's exit at the latest, once they are built:
    /// the join timeout (the longest a worker waits for its peers) and [`Self::finish_within`].
    #[must_use]
    pub fn deadline(&self) -> Duration {
        self.join_timeout_s.duration() + self.finish_within()
    }
}

#[cfg(test)]
mod tests {
    use coload_cohort_schema::Mode;

    use crate::{CohortSpec, Mix};

    use super::*;

    #[test]
    fn the_deadline_adds_the_join_timeout_the_lead_the_window_and_the_slack() {
        let mut spec = CohortSpec::new(&Mix::parse("train=2").unwrap(), Mode::Timeslice);
        let f = &mut spec.flags;
        f.window_s = Seconds::new(45.5).unwrap();
        f.start_lead_s = Seconds::whole(5);
        f.join_timeout_s = Seconds::whole(600);
        assert_eq!(f.timed_span(), Duration::from_millis(50_500));
        assert_eq!(f.finish_within(), Duration::from_millis(80_500));
        assert_eq!(f.deadline(), Duration::from_millis(680_500));
    }
}
