//! Process exit codes shared by the binaries, so that a launcher, a Kubernetes
//! `podFailurePolicy` or a shell script can tell failures apart without parsing messages.
//!
//! Codes 1 and 2 keep their usual meaning (an unexpected error, a bad command line). The rest are
//! coload's own and stable across releases.

/// The cohort or command completed.
pub const COMPLETE: u8 = 0;
/// An unexpected internal error (a bug, or an I/O failure with no better code).
pub const INTERNAL: u8 = 1;
/// Bad input: arguments, a malformed artifact, an unknown schema version.
pub const INVALID_INPUT: u8 = 2;
/// The shared directory failed its preflight (read-only, no space, permission, missing mount).
pub const PREFLIGHT_FAILED: u8 = 10;
/// A peer never arrived at the barrier within the join timeout.
pub const BARRIER_TIMEOUT: u8 = 11;
/// Workers declared different configurations.
pub const CONFIG_MISMATCH: u8 = 12;
/// The worker saw the start too late to begin on time (or was not admitted).
pub const LATE_START: u8 = 13;
/// Two processes claimed the same replica id.
pub const DUPLICATE_REPLICA: u8 = 14;
/// The cohort was aborted for another reason named in `abort.json`.
pub const BARRIER_ABORTED: u8 = 15;
/// The workload failed (libtorch error, CUDA out of memory, ...).
pub const WORKLOAD_FAILED: u8 = 20;
/// The device does not match the declared mode and strict checking was asked for.
pub const ALLOCATION_MISMATCH: u8 = 21;
/// The worker could not write its artifacts.
pub const WRITE_FAILED: u8 = 22;
/// The cohort is incomplete or inconsistent: a worker missing or failed, replicas missing or
/// duplicated, configurations that differ, or too little overlap.
pub const INCOMPLETE_COHORT: u8 = 30;

/// The worker was stopped by SIGTERM or SIGINT (a deleted Pod, a drained node, Ctrl-C); its
/// report says in which stage. 128 + 15, as a shell reports a SIGTERM death.
pub const TERMINATED: u8 = 143;

/// Every named code with its name, for documentation and tests.
pub const ALL: [(&str, u8); 14] = [
    ("complete", COMPLETE),
    ("internal", INTERNAL),
    ("invalid_input", INVALID_INPUT),
    ("preflight_failed", PREFLIGHT_FAILED),
    ("barrier_timeout", BARRIER_TIMEOUT),
    ("config_mismatch", CONFIG_MISMATCH),
    ("late_start", LATE_START),
    ("duplicate_replica", DUPLICATE_REPLICA),
    ("barrier_aborted", BARRIER_ABORTED),
    ("workload_failed", WORKLOAD_FAILED),
    ("allocation_mismatch", ALLOCATION_MISMATCH),
    ("write_failed", WRITE_FAILED),
    ("incomplete_cohort", INCOMPLETE_COHORT),
    ("terminated", TERMINATED),
];

/// The name of a code, for messages (`exit 11 (barrier_timeout)`).
#[must_use]
pub fn name(code: u8) -> &'static str {
    ALL.iter()
        .find(|(_, c)| *c == code)
        .map_or("unknown", |(n, _)| n)
}

/// A process's exit code in words for messages: its name, or the signal that killed it. A
/// shell, `bench-cohort` and the kubelet report a death by signal n as 128 + n, so 137 is
/// SIGKILL (the OOM killer, a deleted Pod past its grace period), 130 SIGINT and 143 SIGTERM
/// (which a worker that catches it exits with on purpose: `terminated`).
#[must_use]
pub fn describe(code: i32) -> &'static str {
    match code {
        130 => "SIGINT",
        137 => "SIGKILL",
        143 => "terminated: SIGTERM",
        _ => u8::try_from(code).map_or("unknown", name),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn codes_are_distinct() {
        let mut codes: Vec<u8> = super::ALL.iter().map(|(_, c)| *c).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), 14);
        assert_eq!(super::name(11), "barrier_timeout");
        assert_eq!(super::name(99), "unknown");
    }

    #[test]
    fn signals_are_named() {
        assert_eq!(super::describe(137), "SIGKILL");
        assert_eq!(super::describe(130), "SIGINT");
        assert_eq!(super::describe(143), "terminated: SIGTERM");
        assert_eq!(super::describe(11), "barrier_timeout");
        assert_eq!(super::describe(-1), "unknown");
        assert_eq!(super::describe(99), "unknown");
    }
}
