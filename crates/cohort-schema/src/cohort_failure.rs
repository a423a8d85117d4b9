//! `failure.json`: why a cohort a launcher ran gave no summary, in a form a program reads.
//!
//! A launcher (`coload-launch`, and so `bench-cohort`) writes it into the cohort's folder when
//! the cohort fails: the first failure's kind and replica, its message, the exit code, and
//! every worker's outcome. A study reads it to say why a cohort failed; nobody parses a log.

use serde::{Deserialize, Serialize};

use crate::FailureKind;

/// `failure.json` beside a failed cohort's `worker-<i>/` folders.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CohortFailure {
    /// Always [`crate::SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The cohort's experiment id.
    pub experiment: String,
    /// What failed first: a worker's own `failure.kind`, or the launcher's
    /// (`spawn_failed`, `worker_exited`, `summary_refused`, `launcher_stopped`).
    pub kind: FailureKind,
    /// The replica that failed first, where one did.
    pub replica: Option<u32>,
    /// What went wrong, in words (the worker's message, or the summarizer's refusal).
    pub message: String,
    /// The exit code the launcher ended with for this cohort.
    pub exit_code: u8,
    /// Every worker that was started, in replica order.
    #[serde(default)]
    pub workers: Vec<WorkerOutcome>,
}

/// One worker of a failed cohort.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerOutcome {
    /// Its replica id.
    pub replica: u32,
    /// Its process exit code (`None`: killed by a signal, or never started).
    pub exit_code: Option<i32>,
    /// Its failure kind where its `worker.json` says it failed (`None`: it completed, or wrote
    /// no `worker.json`).
    pub kind: Option<FailureKind>,
    /// Its outcome in words: `complete`, `failed in window: ... (out_of_memory)`, `exited with
    /// 127 without a worker.json`.
    pub outcome: String,
}

impl CohortFailure {
    /// The failure in a few words for a table: `replica 3: out_of_memory` or `summary_refused`.
    #[must_use]
    pub fn short(&self) -> String {
        match self.replica {
            Some(r) => format!("replica {r}: {}", self.kind),
            None => self.kind.to_string(),
        }
    }
}
