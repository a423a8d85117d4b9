//! Every way the barrier can fail, each with its exit code and a stable `snake_case` kind.

use std::path::PathBuf;

use coload_cohort_schema::exit;

/// Abort kinds that carry their own exit code. A worker that sees `abort.json` with one of these
/// kinds exits with the same code as the worker that found the problem, so a launcher reading
/// any one Pod's exit code learns what went wrong with the cohort.
const ABORT_KINDS: [(&str, u8); 3] = [
    (kind::CONFIG_MISMATCH, exit::CONFIG_MISMATCH),
    (kind::DUPLICATE_REPLICA, exit::DUPLICATE_REPLICA),
    (kind::BARRIER_TIMEOUT, exit::BARRIER_TIMEOUT),
];

/// The stable `snake_case` names of the failures ([`BarrierError::kind`], `Failure.kind` in
/// `worker.json`, `kind` in `abort.json`).
pub mod kind {
    /// The experiment id is not a safe directory name.
    pub const INVALID_EXPERIMENT: &str = "invalid_experiment";
    /// The options contradict each other (replica outside the cohort, lead shorter than margin).
    pub const INVALID_OPTIONS: &str = "invalid_options";
    /// The shared directory is missing, read-only, full or not ours to write.
    pub const PREFLIGHT_FAILED: &str = "preflight_failed";
    /// The experiment directory already holds a `start.json` or an `abort.json`.
    pub const STALE_EXPERIMENT: &str = "stale_experiment";
    /// The shared directory failed after the preflight.
    pub const BARRIER_IO: &str = "barrier_io";
    /// A replica never arrived within the join timeout.
    pub const BARRIER_TIMEOUT: &str = "barrier_timeout";
    /// Two workers declared different configurations.
    pub const CONFIG_MISMATCH: &str = "config_mismatch";
    /// Two processes claimed the same replica id.
    pub const DUPLICATE_REPLICA: &str = "duplicate_replica";
    /// Two replicas carry the same incarnation.
    pub const DUPLICATE_INCARNATION: &str = "duplicate_incarnation";
    /// A `ready.<n>.json` names a replica outside `0..count`.
    pub const REPLICA_OUT_OF_RANGE: &str = "replica_out_of_range";
    /// A record in the shared directory is not a valid document.
    pub const INVALID_RECORD: &str = "invalid_record";
    /// The worker saw the start with less than the late margin left.
    pub const LATE_START: &str = "late_start";
    /// The start does not list this worker's incarnation.
    pub const NOT_ADMITTED: &str = "not_admitted";
    /// Another worker aborted the cohort for a reason without a code of its own.
    pub const BARRIER_ABORTED: &str = "barrier_aborted";
    /// The API was called out of order (a bug in the caller).
    pub const BARRIER_MISUSE: &str = "barrier_misuse";
}

/// Why the barrier did not give this worker a start.
///
/// Every variant maps to an exit code of [`coload_cohort_schema::exit`] ([`Self::exit_code`]) and
/// to a stable name ([`Self::kind`]); the message names the bad value and says what to do.
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
        "replica {replica} saw the start too late: {when}, and the margin is {margin_s} s; the \
         cohort runs without it (was the worker paused, or is the shared directory slow to show \
         new files? raise the start lead or mount with lookupcache=positive)",
        when = format_left(*left_ns)
    )]
    Late {
        /// This worker's replica.
        replica: u32,
        /// Time left before the start when it was seen, nanoseconds (negative: already past).
        left_ns: i64,
        /// The margin, seconds.
        margin_s: String,
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
    /// Another worker published `abort.json`.
    #[error("the cohort was aborted by replica {by_replica} ({kind}): {reason}")]
    Aborted {
        /// The abort's kind as written in `abort.json`.
        kind: String,
        /// The replica that aborted.
        by_replica: u32,
        /// Its reason.
        reason: String,
    },
    /// The API was called out of order.
    #[error("barrier misuse: {message}")]
    Misuse {
        /// What was called out of order.
        message: String,
    },
}

impl BarrierError {
    /// The process exit code for this failure, from [`coload_cohort_schema::exit`].
    #[must_use]
    pub fn exit_code(&self) -> u8 {
        match self {
            BarrierError::InvalidExperiment { .. } | BarrierError::InvalidOptions { .. } => {
                exit::INVALID_INPUT
            }
            BarrierError::Preflight { .. } | BarrierError::StaleExperiment { .. } => {
                exit::PREFLIGHT_FAILED
            }
            BarrierError::Io { .. } | BarrierError::Misuse { .. } => exit::INTERNAL,
            BarrierError::Timeout { .. } => exit::BARRIER_TIMEOUT,
            BarrierError::ConfigMismatch { .. } => exit::CONFIG_MISMATCH,
            BarrierError::DuplicateReplica { .. } => exit::DUPLICATE_REPLICA,
            BarrierError::DuplicateIncarnation { .. }
            | BarrierError::ReplicaOutOfRange { .. }
            | BarrierError::InvalidRecord { .. } => exit::BARRIER_ABORTED,
            BarrierError::Late { .. } | BarrierError::NotAdmitted { .. } => exit::LATE_START,
            BarrierError::Aborted { kind, .. } => exit_code_for_abort_kind(kind),
        }
    }

    /// A stable `snake_case` name for the failure, used as `Failure.kind` in `worker.json`.
    ///
    /// A worker failing because another aborted the cohort reports the abort's kind when it is
    /// one of this crate's, `barrier_aborted` otherwise.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            BarrierError::InvalidExperiment { .. } => kind::INVALID_EXPERIMENT,
            BarrierError::InvalidOptions { .. } => kind::INVALID_OPTIONS,
            BarrierError::Preflight { .. } => kind::PREFLIGHT_FAILED,
            BarrierError::StaleExperiment { .. } => kind::STALE_EXPERIMENT,
            BarrierError::Io { .. } => kind::BARRIER_IO,
            BarrierError::Timeout { .. } => kind::BARRIER_TIMEOUT,
            BarrierError::ConfigMismatch { .. } => kind::CONFIG_MISMATCH,
            BarrierError::DuplicateReplica { .. } => kind::DUPLICATE_REPLICA,
            BarrierError::DuplicateIncarnation { .. } => kind::DUPLICATE_INCARNATION,
            BarrierError::ReplicaOutOfRange { .. } => kind::REPLICA_OUT_OF_RANGE,
            BarrierError::InvalidRecord { .. } => kind::INVALID_RECORD,
            BarrierError::Late { .. } => kind::LATE_START,
            BarrierError::NotAdmitted { .. } => kind::NOT_ADMITTED,
            BarrierError::Misuse { .. } => kind::BARRIER_MISUSE,
            BarrierError::Aborted { kind: k, .. } => KNOWN_ABORT_KINDS
                .iter()
                .find(|known| **known == k.as_str())
                .copied()
                .unwrap_or(kind::BARRIER_ABORTED),
        }
    }
}

/// Kinds a worker may find in `abort.json` written by this crate.
const KNOWN_ABORT_KINDS: [&str; 6] = [
    kind::CONFIG_MISMATCH,
    kind::DUPLICATE_REPLICA,
    kind::BARRIER_TIMEOUT,
    kind::DUPLICATE_INCARNATION,
    kind::REPLICA_OUT_OF_RANGE,
    kind::INVALID_RECORD,
];

/// The exit code of a worker that sees `abort.json` of this kind: the kind's own code where it
/// has one (`config_mismatch`, `duplicate_replica`, `barrier_timeout`), `BARRIER_ABORTED`
/// otherwise.
#[must_use]
pub fn exit_code_for_abort_kind(abort_kind: &str) -> u8 {
    ABORT_KINDS
        .iter()
        .find(|(k, _)| *k == abort_kind)
        .map_or(exit::BARRIER_ABORTED, |(_, code)| *code)
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
    use super::*;

    #[test]
    fn abort_kinds_keep_their_codes() {
        assert_eq!(
            exit_code_for_abort_kind("config_mismatch"),
            exit::CONFIG_MISMATCH
        );
        assert_eq!(
            exit_code_for_abort_kind("duplicate_replica"),
            exit::DUPLICATE_REPLICA
        );
        assert_eq!(
            exit_code_for_abort_kind("barrier_timeout"),
            exit::BARRIER_TIMEOUT
        );
        assert_eq!(
            exit_code_for_abort_kind("operator_said_so"),
            exit::BARRIER_ABORTED
        );
        let e = BarrierError::Aborted {
            kind: "operator_said_so".into(),
            by_replica: 3,
            reason: "maintenance".into(),
        };
        assert_eq!(e.kind(), "barrier_aborted");
        assert_eq!(
            e.to_string(),
            "the cohort was aborted by replica 3 (operator_said_so): maintenance"
        );
        let e = BarrierError::Aborted {
            kind: "invalid_record".into(),
            by_replica: 0,
            reason: String::new(),
        };
        assert_eq!(e.kind(), "invalid_record");
        assert_eq!(e.exit_code(), exit::BARRIER_ABORTED);
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
            margin_s: "0.5".into(),
        };
        assert!(
            e.to_string()
                .starts_with("replica 2 saw the start too late: only 0.1 s before it, and the margin is 0.5 s; the cohort runs without it"),
            "{e}"
        );
        assert_eq!(e.exit_code(), exit::LATE_START);
    }
}
