//! The memory-isolation result of a cohort that holds a hog worker.
//!
//! A hog takes device memory before the other workers build their models (the launcher starts
//! it first and waits for its `hold.json`). What happens next is the result:
//!
//! - **not contained**: another worker ran out of device memory while the hog held its memory.
//!   Time-slicing gives every tenant the whole device's memory with no per-tenant limit, so a
//!   hog that takes it all leaves the others none.
//! - **contained**: CUDA refused the hog more than some limit (it stopped by refusal, not at its
//!   own target), and every other worker completed its window. An MPS pinned memory limit per
//!   client, as the device plugin sets it, does this.
//! - **inconclusive**: neither could be shown: the hog got all it asked for without meeting a
//!   limit (which shows only that the rest left room), it failed before it held anything, a
//!   worker's report is missing, or workers failed for reasons other than memory.
//!
//! It is read from the workers' `worker.json` files whatever their status: a refused cohort (the
//! time-sliced case) still has a result. What it cannot show: MIG's memory isolation is
//! architectural (each slice has its own memory) and is not measured here, and nothing here
//! tests fault isolation or security.

use std::path::PathBuf;

use coload_cohort_schema::{
    FailureKind, HogReport, HogStop, IsolationOutcome, IsolationResult, Mode, SCHEMA_VERSION,
    Status, TenantOutcome, WorkerReport, Workload,
};

use crate::error::AnalysisError;
use crate::inputs::{discover, read_reports};

/// Bytes per GiB, for the explanation.
const GIB: f64 = (1u64 << 30) as f64;

/// Reads the cohort in `paths` (worker folders, or a folder holding them) and returns its
/// isolation result. Failed workers are read, not refused: their failures are the result.
/// Refuses a cohort without a hog worker, or with workers of several experiments.
pub fn isolation_dirs(paths: &[PathBuf]) -> Result<IsolationResult, AnalysisError> {
    let dirs = discover(paths)?;
    let (inputs, problems) = read_reports(&dirs)?;
    let missing = problems.len();
    let reports: Vec<&WorkerReport> = inputs.iter().map(|w| &w.report).collect();
    let mut experiments: Vec<&str> = reports.iter().map(|r| r.experiment.as_str()).collect();
    experiments.sort_unstable();
    experiments.dedup();
    if experiments.len() > 1 {
        return Err(AnalysisError::BadInput {
            path: paths.first().cloned().unwrap_or_default(),
            message: format!(
                "the workers belong to {} experiments ({}); give one cohort's folders",
                experiments.len(),
                experiments.join(", ")
            ),
        });
    }
    if !reports.iter().any(|r| r.config.workload == Workload::Hog) {
        if missing > 0 {
            // The hog may be among the workers that wrote nothing: say that, not "no hog".
            return Err(AnalysisError::Cohort(problems));
        }
        return Err(AnalysisError::NoHog {
            path: paths.first().cloned().unwrap_or_default(),
        });
    }
    Ok(isolation(&reports, missing))
}

/// The allocation a CUDA out-of-memory message says was refused (`20.00 MiB` of "Tried to
/// allocate 20.00 MiB."), when it says.
fn refused_allocation(message: &str) -> Option<String> {
    const MARK: &str = "Tried to allocate ";
    let rest = &message[message.find(MARK)? + MARK.len()..];
    // "20.00 MiB. GPU 0 has ...": the number and its unit, without the sentence's full stop.
    let mut words = rest.split_whitespace();
    let number = words.next()?;
    let unit = words.next()?.trim_end_matches(['.', ',', ';']);
    number
        .parse::<f64>()
        .ok()
        .map(|_| format!("{number} {unit}"))
}

fn tenant(r: &WorkerReport) -> TenantOutcome {
    let message = r.failure.as_ref().map(|f| f.message.clone());
    TenantOutcome {
        replica: r.replica,
        workload: r.config.workload,
        status: r.status,
        stage: r.failure.as_ref().map(|f| f.stage),
        kind: r.failure.as_ref().map(|f| f.kind.clone()),
        refused_allocation: message.as_deref().and_then(refused_allocation),
        message,
        memory_free_at_start_bytes: r
            .share
            .as_ref()
            .and_then(|s| s.observed.as_ref())
            .map(|o| o.memory_free_bytes),
        peak_device_bytes: r.memory.map(|m| m.peak_device_bytes),
        hog: r.hog.clone(),
    }
}

/// A failure that only follows another's (the cohort was stopped because of it).
fn is_consequence(kind: &FailureKind) -> bool {
    matches!(
        kind,
        FailureKind::PeerFailed
            | FailureKind::BarrierAborted
            | FailureKind::LauncherStopped
            | FailureKind::Terminated
    )
}

fn gib(bytes: u64) -> String {
    format!("{:.2} GiB", bytes as f64 / GIB)
}

fn describe_oom(w: &TenantOutcome) -> String {
    let at = w
        .refused_allocation
        .as_ref()
        .map(|a| format!(" asking for {a}"))
        .unwrap_or_default();
    let free = w
        .memory_free_at_start_bytes
        .map(|b| format!(", {} free when it started", gib(b)))
        .unwrap_or_default();
    format!(
        "replica {} ({}) ran out of device memory in {}{at}{free}",
        w.replica,
        w.workload,
        w.stage.map_or("?", coload_cohort_schema::Stage::as_str)
    )
}

fn describe_hogs(held: &[(u32, &HogReport)]) -> String {
    held.iter()
        .map(|(replica, r)| {
            let how = match r.stopped_by {
                HogStop::Refused => "CUDA refused it more",
                HogStop::TargetReached => "all it asked for",
            };
            format!(
                "the hog (replica {replica}) held {} ({how})",
                gib(r.granted_bytes)
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The outcome and its explanation, from the hogs and the other workers.
fn judge(
    hogs: &[&TenantOutcome],
    others: &[&TenantOutcome],
    missing: usize,
) -> (IsolationOutcome, String) {
    let held: Vec<(u32, &HogReport)> = hogs
        .iter()
        .filter_map(|h| h.hog.as_ref().map(|r| (h.replica, r)))
        .collect();
    let hog_text = describe_hogs(&held);
    let all_held = !hogs.is_empty() && held.len() == hogs.len();
    let oom: Vec<&&TenantOutcome> = others
        .iter()
        .filter(|w| w.kind == Some(FailureKind::OutOfMemory))
        .collect();
    let other_failures: Vec<String> = others
        .iter()
        .filter(|w| w.status == Status::Failed)
        .filter(|w| w.kind != Some(FailureKind::OutOfMemory))
        .filter(|w| !w.kind.as_ref().is_some_and(is_consequence))
        .map(|w| {
            format!(
                "replica {} ({}) failed in {} with {}",
                w.replica,
                w.workload,
                w.stage.map_or("?", coload_cohort_schema::Stage::as_str),
                w.kind.as_ref().map_or("?", FailureKind::as_str)
            )
        })
        .collect();
    let complete = others
        .iter()
        .filter(|w| w.status == Status::Complete)
        .count();
    let n = others.len();
    if all_held && !oom.is_empty() {
        let named: Vec<String> = oom.iter().map(|w| describe_oom(w)).collect();
        return (
            IsolationOutcome::NotContained,
            format!(
                "{hog_text}; {} of the {n} other workers failed with out_of_memory: {}",
                oom.len(),
                named.join("; ")
            ),
        );
    }
    let inconclusive = |why: String| (IsolationOutcome::Inconclusive, why);
    if missing > 0 {
        return inconclusive(format!(
            "{missing} worker report(s) are missing, so the cohort cannot be judged"
        ));
    }
    if !all_held {
        let why: Vec<String> = hogs
            .iter()
            .filter(|h| h.hog.is_none())
            .map(|h| {
                format!(
                    "the hog (replica {}) holds nothing: {}",
                    h.replica,
                    h.message
                        .as_deref()
                        .unwrap_or("it failed before it allocated")
                )
            })
            .collect();
        return inconclusive(why.join("; "));
    }
    if !other_failures.is_empty() {
        return inconclusive(format!(
            "{hog_text}; other workers failed for reasons other than memory: {}",
            other_failures.join("; ")
        ));
    }
    if complete < n {
        return inconclusive(format!(
            "{hog_text}; {complete} of the {n} other workers completed"
        ));
    }
    if held.iter().all(|(_, r)| r.stopped_by == HogStop::Refused) {
        return (
            IsolationOutcome::Contained,
            format!(
                "{hog_text}, and all {n} other workers completed their windows: the hog met a \
                 limit that kept the others' memory from it"
            ),
        );
    }
    inconclusive(format!(
        "{hog_text}, and all {n} other workers completed: the hog met no limit, so this shows \
         only that what it took left room for the others"
    ))
}

/// The isolation result of the workers in `reports` (one cohort, at least one hog), `missing`
/// of whose reports are absent.
pub(crate) fn isolation(reports: &[&WorkerReport], missing: usize) -> IsolationResult {
    let mut workers: Vec<TenantOutcome> = reports.iter().map(|r| tenant(r)).collect();
    workers.sort_by_key(|w| (w.workload != Workload::Hog, w.replica));
    let reference = reports.first();
    let (hogs, others): (Vec<&TenantOutcome>, Vec<&TenantOutcome>) =
        workers.iter().partition(|w| w.workload == Workload::Hog);
    let (outcome, explanation) = judge(&hogs, &others, missing);
    IsolationResult {
        schema_version: SCHEMA_VERSION,
        experiment: reference.map_or_else(String::new, |r| r.experiment.clone()),
        mode: reference.map_or(Mode::Timeslice, |r| r.config.mode),
        share: reports
            .iter()
            .find_map(|r| r.share.as_ref().and_then(|s| s.declared)),
        outcome,
        explanation,
        workers,
    }
}

#[cfg(test)]
mod tests {
    use coload_cohort_schema::{
        Failure, Identity, ObservedShare, ShareReport, Stage, WorkerConfig,
    };

    use super::*;

    fn worker(replica: u32, workload: Workload, mode: Mode) -> WorkerReport {
        WorkerReport {
            schema_version: SCHEMA_VERSION,
            experiment: "hog".into(),
            replica,
            status: Status::Complete,
            failure: None,
            config: WorkerConfig::article(mode, workload, 3),
            identity: Identity::default(),
            device: None,
            runtime: None,
            barrier: None,
            window: None,
            memory: None,
            host: None,
            telemetry: None,
            gpm: None,
            energy: None,
            warnings: Vec::new(),
            share: None,
            hog: None,
            serve: None,
            serve_llm: None,
            coload: None,
        }
    }

    fn hog(mode: Mode, granted: u64, stopped_by: HogStop) -> WorkerReport {
        let mut r = worker(0, Workload::Hog, mode);
        r.hog = Some(HogReport {
            target_bytes: None,
            step_bytes: 1 << 30,
            min_step_bytes: 64 << 20,
            granted_bytes: granted,
            allocations: 3,
            stopped_by,
            refusal: Some("CUDA out of memory. Tried to allocate 64.00 MiB. GPU 0 ...".into()),
            memory_free_after_bytes: Some(0),
            holding_since_unix_ns: 1,
            hold_interval_s: 1.0,
        });
        r
    }

    fn oom(replica: u32, mode: Mode) -> WorkerReport {
        let mut r = worker(replica, Workload::Train, mode);
        r.status = Status::Failed;
        r.failure = Some(Failure {
            stage: Stage::Warmup,
            kind: FailureKind::OutOfMemory,
            message: "out of memory: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has \
                      a total capacity of 139.81 GiB of which 12.00 MiB is free."
                .into(),
            at_unix_ns: None,
        });
        r.share = Some(ShareReport {
            observed: Some(ObservedShare {
                memory_free_bytes: 300 << 20,
                memory_total_bytes: 140 << 30,
                sm_count: Some(132),
                physical_sm_count: Some(132),
            }),
            ..ShareReport::default()
        });
        r
    }

    #[test]
    fn trainers_out_of_memory_under_time_slicing_are_not_contained_and_named() {
        let h = hog(Mode::Timeslice, 139 << 30, HogStop::Refused);
        let a = oom(1, Mode::Timeslice);
        let b = oom(2, Mode::Timeslice);
        let r = isolation(&[&a, &h, &b], 0);
        assert_eq!(r.outcome, IsolationOutcome::NotContained);
        assert_eq!(
            r.explanation,
            "the hog (replica 0) held 139.00 GiB (CUDA refused it more); 2 of the 2 other workers \
             failed with out_of_memory: replica 1 (train) ran out of device memory in warmup \
             asking for 20.00 MiB, 0.29 GiB free when it started; replica 2 (train) ran out of \
             device memory in warmup asking for 20.00 MiB, 0.29 GiB free when it started"
        );
        assert_eq!(r.workers[0].workload, Workload::Hog, "the hog comes first");
        assert_eq!(
            r.workers[1].refused_allocation.as_deref(),
            Some("20.00 MiB")
        );
        assert_eq!(r.workers[1].memory_free_at_start_bytes, Some(300 << 20));
    }

    #[test]
    fn a_hog_stopped_at_its_share_while_the_others_run_is_contained() {
        let mut h = hog(Mode::Mps, 20 << 30, HogStop::Refused);
        h.share = Some(ShareReport {
            declared: Some(coload_measure::plugin_share(7, Some(143_771 << 20))),
            ..ShareReport::default()
        });
        let a = worker(1, Workload::Train, Mode::Mps);
        let r = isolation(&[&h, &a], 0);
        assert_eq!(r.outcome, IsolationOutcome::Contained);
        assert!(
            r.explanation
                .contains("held 20.00 GiB (CUDA refused it more), and all 1 other")
        );
        assert_eq!(r.share.unwrap().active_thread_percentage, Some(14));
    }

    #[test]
    fn what_shows_neither_is_inconclusive_and_says_why() {
        // The hog got its whole target: no limit was met.
        let h = hog(Mode::Mps, 4 << 30, HogStop::TargetReached);
        let a = worker(1, Workload::Train, Mode::Mps);
        let r = isolation(&[&h, &a], 0);
        assert_eq!(r.outcome, IsolationOutcome::Inconclusive);
        assert!(r.explanation.contains("met no limit"), "{}", r.explanation);
        // The hog failed before it held anything (its peers were stopped after it).
        let mut h = worker(0, Workload::Hog, Mode::Timeslice);
        h.status = Status::Failed;
        h.failure = Some(Failure {
            stage: Stage::Warmup,
            kind: FailureKind::InvalidOption,
            message: "on the CPU there is no device memory to take".into(),
            at_unix_ns: None,
        });
        let mut a = worker(1, Workload::Train, Mode::Timeslice);
        a.status = Status::Failed;
        a.failure = Some(Failure {
            stage: Stage::Barrier,
            kind: FailureKind::PeerFailed,
            message: "replica 0 failed".into(),
            at_unix_ns: None,
        });
        let r = isolation(&[&h, &a], 0);
        assert_eq!(r.outcome, IsolationOutcome::Inconclusive);
        assert_eq!(
            r.explanation,
            "the hog (replica 0) holds nothing: on the CPU there is no device memory to take"
        );
        // A missing report.
        let h = hog(Mode::Timeslice, 1 << 30, HogStop::Refused);
        let r = isolation(&[&h], 2);
        assert_eq!(r.outcome, IsolationOutcome::Inconclusive);
        assert!(r.explanation.starts_with("2 worker report(s) are missing"));
    }

    #[test]
    fn refused_allocations_are_read_from_cudas_message() {
        assert_eq!(
            refused_allocation("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has"),
            Some("2.00 GiB".to_owned())
        );
        assert_eq!(
            refused_allocation("CUDA out of memory. Tried to allocate 512.00 MiB."),
            Some("512.00 MiB".to_owned())
        );
        assert_eq!(refused_allocation("CUDA error: out of memory"), None);
    }
}
