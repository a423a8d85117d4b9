//! The shared-directory rendezvous that gives a coload cohort one common start.
//!
//! N workers, possibly on different hosts, agree on one start instant through files in a shared
//! POSIX directory (a Kubernetes PersistentVolumeClaim, often NFS; a local directory on one
//! node). Each worker calls, in order:
//!
//! 1. [`Barrier::preflight`] before its warmup: validates the experiment id, creates
//!    `<sync_dir>/<experiment>/`, proves it writable with a probe file (failing fast on a
//!    read-only, full or missing volume) and measures the clock offset to the file server;
//! 2. [`Barrier::publish_ready`] after its warmup: `ready.<replica>.json`, published once by
//!    hard link so that it is never overwritten and never seen half-written;
//! 3. [`Barrier::await_start`]: replica 0 waits for every ready record, validates the cohort
//!    and publishes `start.json`; everyone waits for it (or for `abort.json`) and gets it back
//!    with at least the late margin left, then sleeps until the start.
//!
//! Every failure is a [`BarrierError`] with an exit code of [`coload_cohort_schema::exit`] and
//! a stable kind. The protocol, its guarantees and the recommended NFS mount options are in
//! `docs/methodology.md` ("Barrier").
//!
//! # Example
//!
//! A cohort of one, in a temporary directory:
//!
//! ```
//! use std::time::Duration;
//! use coload_barrier::{Barrier, BarrierOptions};
//! use coload_cohort_schema::{Mode, WorkerConfig, Workload};
//! use coload_timing::{Clock, sleep_until};
//!
//! let sync = tempfile::tempdir().unwrap();
//! let clock = Clock::anchor();
//! let mut options = BarrierOptions::new(sync.path(), "example-1", 0, 1);
//! options.start_lead = Duration::from_millis(300);
//! options.late_margin = Duration::from_millis(100);
//!
//! let (mut barrier, preflight) = Barrier::preflight(options, &clock).unwrap();
//! assert!(preflight.dir.ends_with("example-1"));
//! // ... warm up ...
//! let config = WorkerConfig {
//!     start_lead_s: 0.3,
//!     ..WorkerConfig::article(Mode::Exclusive, Workload::Train, 1)
//! };
//! let ready = barrier.ready_record(config, &clock);
//! barrier.publish_ready(&ready, &clock).unwrap();
//! let start = barrier.await_start(&clock).unwrap();
//! assert_eq!(start.accepted[0].incarnation, barrier.incarnation());
//! sleep_until(clock.to_instant(start.start_unix_ns));
//! assert!(clock.now_unix_ns() >= start.start_unix_ns);
//! ```

mod barrier;
mod dir;
mod error;
mod options;
mod poll;
mod records;

pub use barrier::{AbortOutcome, Barrier, Preflight, abort_experiment};
pub use error::BarrierError;
pub use options::{
    BarrierOptions, DEFAULT_JOIN_TIMEOUT, DEFAULT_LATE_MARGIN, DEFAULT_START_LEAD,
    validate_experiment_id,
};

/// Names of the files in `<sync_dir>/<experiment>/`.
pub mod files {
    /// The leader's decision: the start instant and the admitted incarnations.
    pub const START: &str = crate::records::START;
    /// A worker's or the launcher's decision that the cohort cannot run.
    pub const ABORT: &str = crate::records::ABORT;
    /// The claim taken before either decision is published, so that at most one of
    /// [`START`] and [`ABORT`] ever exists.
    pub const DECISION: &str = crate::records::DECISION;

    /// `ready.<replica>.json`.
    #[must_use]
    pub fn ready(replica: u32) -> String {
        crate::records::ready_name(replica)
    }
}
