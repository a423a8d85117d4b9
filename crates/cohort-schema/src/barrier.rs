//! The barrier's records in `<sync_dir>/<experiment>/`.

use serde::{Deserialize, Serialize};

use crate::config::WorkerConfig;
use crate::failure::FailureKind;
use crate::worker::DeviceInfo;

/// `ready.<replica>.json`: a worker has warmed up and waits for the start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadyRecord {
    /// Always [`crate::SCHEMA_VERSION`] when written by this crate.
    pub schema_version: u32,
    /// The cohort's experiment id.
    pub experiment: String,
    /// The replica this worker claims.
    pub replica: u32,
    /// A fresh UUID per worker process: two processes claiming one replica differ here.
    pub incarnation: String,
    /// The declared configuration.
    pub config: WorkerConfig,
    /// Host name of the worker.
    pub hostname: String,
    /// Node name, where known.
    pub node_name: Option<String>,
    /// Process id of the worker.
    pub pid: u32,
    /// The device the worker uses, where known.
    pub device: Option<DeviceInfo>,
    /// When the record was published, unix nanoseconds (the worker's clock).
    pub ready_unix_ns: u64,
}

/// One worker the leader accepted into the cohort.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcceptedWorker {
    /// Replica id.
    pub replica: u32,
    /// The incarnation that published the ready record.
    pub incarnation: String,
}

/// `start.json`: the leader's decision; published once, never overwritten.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartRecord {
    /// Always [`crate::SCHEMA_VERSION`] when written by this crate.
    pub schema_version: u32,
    /// The cohort's experiment id.
    pub experiment: String,
    /// Number of workers.
    pub count: u32,
    /// The common start instant, unix nanoseconds (the leader's clock).
    pub start_unix_ns: u64,
    /// When the leader published this record.
    pub published_unix_ns: u64,
    /// The incarnations admitted, one per replica.
    pub accepted: Vec<AcceptedWorker>,
}

/// `abort.json`: the cohort cannot run; every worker that sees it fails with this reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AbortRecord {
    /// Always [`crate::SCHEMA_VERSION`] when written by this crate.
    pub schema_version: u32,
    /// The cohort's experiment id.
    pub experiment: String,
    /// Why, by name (`config_mismatch`, `duplicate_replica`, `peer_failed`, ...).
    pub kind: FailureKind,
    /// The human-readable reason.
    pub reason: String,
    /// The replica that published the abort, or [`AbortRecord::LAUNCHER`].
    pub by_replica: u32,
    /// When it was published.
    pub published_unix_ns: u64,
}

impl AbortRecord {
    /// `by_replica` of an abort published by a launcher (`bench-cohort`) rather than a worker.
    pub const LAUNCHER: u32 = u32::MAX;

    /// Who published it, for messages: `replica 3` or `the launcher`.
    #[must_use]
    pub fn publisher(&self) -> String {
        if self.by_replica == Self::LAUNCHER {
            "the launcher".to_owned()
        } else {
            format!("replica {}", self.by_replica)
        }
    }
}
