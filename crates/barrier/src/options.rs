//! What a worker tells the barrier, and the experiment-id rule.

use std::path::PathBuf;
use std::time::Duration;

use crate::error::BarrierError;

/// Default join timeout: how long a worker waits, from its own ready record, for the start.
pub const DEFAULT_JOIN_TIMEOUT: Duration = Duration::from_secs(600);
/// Default lead: the start is this far after the leader saw the last ready record.
pub const DEFAULT_START_LEAD: Duration = Duration::from_secs(5);
/// Default late margin: a worker that sees the start with less than this left is late.
pub const DEFAULT_LATE_MARGIN: Duration = Duration::from_millis(500);

/// Longest experiment id: it is a directory name on file systems whose limit is 255 bytes.
const MAX_EXPERIMENT_LEN: usize = 128;

/// Where and as whom a worker joins the rendezvous.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BarrierOptions {
    /// The shared directory (`/mnt/benchmark-sync`); must already exist (it is the mount).
    pub sync_dir: PathBuf,
    /// The cohort's experiment id, a fresh one per cohort (`[A-Za-z0-9._-]{1,128}`).
    pub experiment: String,
    /// This worker's replica id, `0..count`; replica 0 leads.
    pub replica: u32,
    /// Workers in the cohort.
    pub count: u32,
    /// How long to wait for the start, counted from this worker's own ready record.
    pub join_timeout: Duration,
    /// Time between the leader's decision and the start (the leader's own option counts).
    pub start_lead: Duration,
    /// A worker seeing the start with less than this left is late and fails.
    pub late_margin: Duration,
}

impl BarrierOptions {
    /// Options with the default timeout (600 s), lead (5 s) and margin (0.5 s).
    #[must_use]
    pub fn new(
        sync_dir: impl Into<PathBuf>,
        experiment: impl Into<String>,
        replica: u32,
        count: u32,
    ) -> Self {
        BarrierOptions {
            sync_dir: sync_dir.into(),
            experiment: experiment.into(),
            replica,
            count,
            join_timeout: DEFAULT_JOIN_TIMEOUT,
            start_lead: DEFAULT_START_LEAD,
            late_margin: DEFAULT_LATE_MARGIN,
        }
    }

    /// Checks everything that can be checked without touching the file system.
    pub fn validate(&self) -> Result<(), BarrierError> {
        validate_experiment_id(&self.experiment)?;
        let invalid = |message: String| Err(BarrierError::InvalidOptions { message });
        if self.count == 0 {
            return invalid("count 0: a cohort needs at least one worker".to_owned());
        }
        if self.replica >= self.count {
            return invalid(format!(
                "replica {} is outside the cohort: replicas are 0..{} for count {}",
                self.replica,
                self.count - 1,
                self.count
            ));
        }
        if self.start_lead <= self.late_margin {
            return invalid(format!(
                "start lead {} s must exceed the late margin {} s, or every worker would be late",
                self.start_lead.as_secs_f64(),
                self.late_margin.as_secs_f64()
            ));
        }
        if self.join_timeout.is_zero() {
            return invalid("join timeout 0 s: give the cohort time to gather".to_owned());
        }
        Ok(())
    }
}

/// Checks that `id` is a safe experiment id: 1 to 128 characters of `A-Z a-z 0-9 . _ -`, and not
/// `.` or `..`. The id becomes a directory name under the shared directory, so anything that
/// could climb out of it or name something else is refused before the file system is touched.
pub fn validate_experiment_id(id: &str) -> Result<(), BarrierError> {
    let reason = if id.is_empty() {
        Some("it is empty".to_owned())
    } else if id.len() > MAX_EXPERIMENT_LEN {
        Some(format!(
            "it is {} characters long, the limit is {MAX_EXPERIMENT_LEN}",
            id.len()
        ))
    } else if id == "." || id == ".." {
        Some("it names a directory itself".to_owned())
    } else {
        id.chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
            .map(|c| format!("{c:?} is not allowed (use A-Z, a-z, 0-9, '.', '_' and '-')"))
    };
    match reason {
        None => Ok(()),
        Some(reason) => Err(BarrierError::InvalidExperiment {
            id: id.to_owned(),
            reason,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(id: &str) -> String {
        validate_experiment_id(id).unwrap_err().to_string()
    }

    #[test]
    fn good_ids_pass() {
        for id in ["a", "exp-2024.06.01_ts7", "A.B-c_d", ".hidden", "x..y"] {
            assert!(validate_experiment_id(id).is_ok(), "{id}");
        }
        assert!(validate_experiment_id(&"x".repeat(128)).is_ok());
    }

    #[test]
    fn bad_ids_are_named() {
        assert_eq!(reason(""), "invalid experiment id \"\": it is empty");
        assert_eq!(
            reason("../x"),
            "invalid experiment id \"../x\": '/' is not allowed (use A-Z, a-z, 0-9, '.', '_' and '-')"
        );
        assert!(reason("a/b").contains("'/' is not allowed"));
        assert!(reason("..").contains("names a directory itself"));
        assert!(reason(".").contains("names a directory itself"));
        assert!(reason(&"x".repeat(200)).contains("200 characters long, the limit is 128"));
        assert!(reason("a b").contains("' ' is not allowed"));
        assert!(reason("é").contains("'é' is not allowed"));
        assert!(reason("a\0b").contains("'\\0' is not allowed"));
    }

    #[test]
    fn options_are_checked() {
        let ok = BarrierOptions::new("/tmp", "e", 2, 3);
        assert!(ok.validate().is_ok());
        let e = BarrierOptions::new("/tmp", "e", 3, 3)
            .validate()
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "replica 3 is outside the cohort: replicas are 0..2 for count 3"
        );
        assert!(BarrierOptions::new("/tmp", "e", 0, 0).validate().is_err());
        let mut o = BarrierOptions::new("/tmp", "e", 0, 1);
        o.start_lead = Duration::from_millis(500);
        assert!(
            o.validate()
                .unwrap_err()
                .to_string()
                .contains("must exceed the late margin")
        );
    }
}
