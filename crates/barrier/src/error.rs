//! Every way the barrier can fail, each with a [`FailureKind`] (and through it an exit code).

use std::path::PathBuf;
use std::time::Duration;

use coload_cohort_schema::{AbortRecord, FailureKind};

/// Why the barrier did not give this worker a start.
///
/// Every variant has a [`FailureKind`] ([`Self::kind`]), which gives its exit code
/// ([`Self::exit_code`]); the message names the bad value and says what to do.
#[derive(Debug, thiserror::Error)]
pub enum BarrierError {
    /// The experiment id is not a safe directory name; nothing was touched.
    #[error("invalid experiment id {id:?}: {reason}")]
    InvalidExperiment {
        /// The id as given.
        id: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The options contradict each other or the record does not match them.
    #[error("{message}")]
    InvalidOptions {
        /// What is wrong.
        message: String,
    },
    /// The shared directory failed the preflight.
    #[error("{message}")]
    Preflight {
        /// The path that failed.
        path: PathBuf,
        /// The operation, the errno and what to do.
        message: String,
    },
    /// The experiment directory holds the outcome of an earlier run.
    #[error(
        "{} already exists: this experiment id was used by an earlier run, or its cohort has \
         already started without this worker; launch every cohort under a fresh experiment id",
        path.display()
    )]
    StaleExperiment {
        /// The `start.json` or `abort.json` found.
        path: PathBuf,
    },
    /// The shared directory failed after the preflight.
    #[error("{message}")]
    Io {
        /// The path that failed.
        path: PathBuf,
        /// The operation, the errno and what to do.
        message: String,
    },
    /// The join timeout fired before the cohort was complete (or before the leader decided).
    #[error("{message}")]
    Timeout {
        /// Replicas with no ready record when it fired.
        missing: Vec<u32>,
        /// `replica 3 never arrived at the barrier within 600 s (missing: 3, 5)`.
        message: String,
    },
    /// The workers declared different configurations.
    #[error("{message}")]
    ConfigMismatch {
        /// `replica 4: batch_size 64 != 32`, one clause per differing replica.
        message: String,
    },
    /// A second process claimed a replica that already has a ready record.
    #[error(
        "replica {replica} is claimed twice: incarnation {existing} published ready.{replica}.json \
         first and incarnation {ours} tried again; give every worker its own replica id and every \
         cohort a fresh experiment id"
    )]
    DuplicateReplica {
        /// The replica id.
        replica: u32,
        /// The incarnation of the ready record already there (`unknown` if unreadable).
        existing: String,
        /// This process's incarnation.
        ours: String,
    },
    /// Two replicas carry the same incarnation.
    #[error("{message}")]
    DuplicateIncarnation {
        /// Which replicas share which incarnation.
        message: String,
    },
    /// A ready record names a replica outside `0..count`.
    #[error("{message}")]
    ReplicaOutOfRange {
        /// Which file and which count.
        message: String,
    },
    /// A record in the shared directory is not a valid document of its kind.
    #[error("{message}")]
    InvalidRecord {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// This worker saw the start with less than the late margin left (or after it).
    #[error(
        "replica {replica} saw the start too late: {when}, and the margin is {margin} s; the \
         cohort runs without it (was the worker paused, or is the shared directory slow to show \
         new files? raise the start lead or mount with lookupcache=positive)",
        when = format_left(*left_ns),
        margin = seconds(u64::try_from(margin.as_nanos()).unwrap_or(u64::MAX))
    )]
    Late {
        /// This worker's replica.
        replica: u32,
        /// Time left before the start when it was seen, nanoseconds (negative: already past).
        left_ns: i64,
        /// The late margin.
        margin: Duration,
    },
    /// The start does not list this worker's incarnation.
    #[error(
        "replica {replica} (incarnation {incarnation}) is not in the start's accepted list: the \
         leader admitted {admitted} for this replica; this process was not part of the cohort"
    )]
    NotAdmitted {
        /// This worker's replica.
        replica: u32,
        /// This worker's incarnation.
        incarnation: String,
        /// The incarnation the leader admitted for the replica (`nobody` if none).
        admitted: String,
    },
    /// Another worker (or the launcher) published `abort.json`.
    #[error("the cohort was aborted by {} ({}): {}", record.publisher(), record.kind, record.reason)]
    Aborted {
        /// The abort as published.
        record: Box<AbortRecord>,
    },
    /// The API was called out of order.
    #[error("barrier misuse: {message}")]
    Misuse {
        /// What was called out of order.
        message: String,
    },
}

impl BarrierError {
    /// The process exit code for this failure: its kind's ([`FailureKind::exit_code`]).
    #[must_use]
    pub fn exit_code(&self) -> u8 {
        self.kind().exit_code()
    }

    /// A stable name for the failure, used as `failure.kind` in `worker.json` and `kind` in
    /// `abort.json`.
    ///
    /// A worker failing because another aborted the cohort reports the abort's kind, so that
    /// every worker of a cohort that failed at the barrier names the same cause.
    #[must_use]
    pub fn kind(&self) -> FailureKind {
        match self {
            BarrierError::InvalidExperiment { .. } => FailureKind::InvalidExperiment,
            BarrierError::InvalidOptions { .. } => FailureKind::InvalidOptions,
            BarrierError::Preflight { .. } => FailureKind::PreflightFailed,
            BarrierError::StaleExperiment { .. } => FailureKind::StaleExperiment,
            BarrierError::Io { .. } => FailureKind::BarrierIo,
            BarrierError::Timeout { .. } => FailureKind::BarrierTimeout,
            BarrierError::ConfigMismatch { .. } => FailureKind::ConfigMismatch,
            BarrierError::DuplicateReplica { .. } => FailureKind::DuplicateReplica,
            BarrierError::DuplicateIncarnation { .. } => FailureKind::DuplicateIncarnation,
            BarrierError::ReplicaOutOfRange { .. } => FailureKind::ReplicaOutOfRange,
            BarrierError::InvalidRecord { .. } => FailureKind::InvalidRecord,
            BarrierError::Late { .. } => FailureKind::LateStart,
            BarrierError::NotAdmitted { .. } => FailureKind::NotAdmitted,
            BarrierError::Misuse { .. } => FailureKind::BarrierMisuse,
            BarrierError::Aborted { record } => record.kind.clone(),
        }
    }
}

/// `only 0.25 s before it` or `0.4 s after it`, for the late message.
fn format_left(left_ns: i64) -> String {
    if left_ns >= 0 {
        format!("only {} s before it", seconds(left_ns.unsigned_abs()))
    } else {
        format!("{} s after it", seconds(left_ns.unsigned_abs()))
    }
}

/// Nanoseconds as seconds with millisecond precision and no trailing zeros.
pub(crate) fn seconds(ns: u64) -> String {
    let ms = ns / 1_000_000;
    let text = format!("{}.{:03}", ms / 1000, ms % 1000);
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

#[cfg(test)]
mod tests {
    use coload_cohort_schema::exit;

    use super::*;

    fn aborted(kind: FailureKind, by_replica: u32, reason: &str) -> BarrierError {
        BarrierError::Aborted {
            record: Box::new(AbortRecord {
                schema_version: 1,
                experiment: "e".into(),
                kind,
                reason: reason.into(),
                by_replica,
                published_unix_ns: 0,
            }),
        }
    }

    #[test]
    fn an_abort_passes_its_kind_and_code_on() {
        let e = aborted(FailureKind::ConfigMismatch, 0, "batch_size 64 != 32");
        assert_eq!(e.kind(), FailureKind::ConfigMismatch);
        assert_eq!(e.exit_code(), exit::CONFIG_MISMATCH);
        let e = aborted(
            FailureKind::Other("operator_said_so".into()),
            3,
            "maintenance",
        );
        assert_eq!(e.exit_code(), exit::BARRIER_ABORTED);
        assert_eq!(
            e.to_string(),
            "the cohort was aborted by replica 3 (operator_said_so): maintenance"
        );
        let e = aborted(
            FailureKind::LauncherStopped,
            AbortRecord::LAUNCHER,
            "interrupted",
        );
        assert_eq!(
            e.to_string(),
            "the cohort was aborted by the launcher (launcher_stopped): interrupted"
        );
    }

    #[test]
    fn seconds_are_short() {
        assert_eq!(seconds(600_000_000_000), "600");
        assert_eq!(seconds(2_500_000_000), "2.5");
        assert_eq!(seconds(250_000_000), "0.25");
        assert_eq!(seconds(0), "0");
        assert_eq!(format_left(-400_000_000), "0.4 s after it");
    }

    #[test]
    fn late_message_names_the_margin() {
        let e = BarrierError::Late {
            replica: 2,
            left_ns: 100_000_000,
            margin: Duration::from_millis(500),
        };
        assert!(
            e.to_string()
                .starts_with("replica 2 saw the start too late: only 0.1 s before it, and the margin is 0.5 s; the cohort runs without it"),
            "{e}"
        );
        assert_eq!(e.exit_code(), exit::LATE_START);
    }
}
