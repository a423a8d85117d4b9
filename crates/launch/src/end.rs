//! The end of a cohort, whichever backend ran it (this node's processes, a cluster's Pods): the
//! summary's options from the spec, and the `failure.json` record read from the workers'
//! folders.

use std::path::Path;

use coload_cohort_schema::{
    CohortFailure, FailureKind, SCHEMA_VERSION, WorkerOutcome, exit, files, read_worker_report,
};
use coload_spec::CohortSpec;

/// How one worker ended, as the backend that ran it saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerEnd {
    /// Its replica.
    pub replica: u32,
    /// Its exit code, where it exited (a process, a Pod's container); `None` when it was killed
    /// or never seen to finish.
    pub exit_code: Option<i32>,
}

/// The options a cohort of `spec` is summarized with: its strictness and every objective its
/// serve and serve-llm workers are judged by.
#[must_use]
pub fn summary_options(spec: &CohortSpec) -> coload_analysis::Options {
    coload_analysis::Options {
        strict: spec.strict,
        slo_ms: spec.serve.slo_ms,
        slo_quantile: spec.capacity.slo_quantile,
        ttft_slo_ms: spec.serve.ttft_slo_ms,
        tpot_slo_ms: spec.serve.tpot_slo_ms,
        ..coload_analysis::Options::default()
    }
}

/// The failure record with every worker's outcome read from its folder (`<dir>/worker-<i>`);
/// the kind, replica and message are the backend's (`launcher_stopped`, "the cohort did not
/// complete") until the caller says otherwise. `no_report` says, in the backend's words, how a
/// worker that left no `worker.json` ended, from its exit code.
pub fn failure_record(
    dir: &Path,
    experiment: &str,
    ends: &[WorkerEnd],
    no_report: &dyn Fn(Option<i32>) -> String,
) -> CohortFailure {
    let workers = ends
        .iter()
        .map(|end| {
            let path = dir
                .join(format!("worker-{}", end.replica))
                .join(files::WORKER_REPORT);
            let (kind, outcome) = match read_worker_report(&path) {
                Ok(r) => match &r.failure {
                    Some(f) => (
                        Some(f.kind.clone()),
                        format!("failed in {}: {} ({})", f.stage, f.message, f.kind),
                    ),
                    None => (None, "complete".to_owned()),
                },
                Err(_) => (Some(FailureKind::WorkerExited), no_report(end.exit_code)),
            };
            WorkerOutcome {
                replica: end.replica,
                exit_code: end.exit_code,
                kind,
                outcome,
            }
        })
        .collect();
    CohortFailure {
        schema_version: SCHEMA_VERSION,
        experiment: experiment.to_owned(),
        kind: FailureKind::LauncherStopped,
        replica: None,
        message: "the cohort did not complete".to_owned(),
        exit_code: exit::INCOMPLETE_COHORT,
        workers,
    }
}

#[cfg(test)]
mod tests {
    use coload_cohort_schema::Mode;
    use coload_spec::Mix;

    use super::*;

    /// Every objective of the spec reaches the summary, whichever backend summarizes.
    #[test]
    fn the_summary_is_judged_by_every_objective_of_the_spec() {
        let mut spec =
            CohortSpec::new(&Mix::parse("serve-llm=1,train=2").unwrap(), Mode::Timeslice);
        spec.strict = true;
        spec.serve.slo_ms = Some(12.0);
        spec.serve.ttft_slo_ms = Some(500.0);
        spec.serve.tpot_slo_ms = Some(50.0);
        spec.capacity.slo_quantile = Some(0.95);
        let o = summary_options(&spec);
        assert!(o.strict);
        assert_eq!(o.slo_ms, Some(12.0));
        assert_eq!(o.ttft_slo_ms, Some(500.0));
        assert_eq!(o.tpot_slo_ms, Some(50.0));
        assert_eq!(o.slo_quantile, Some(0.95));
    }

    /// A worker's own report says how it ended; one without a report is said in the backend's
    /// words.
    #[test]
    fn outcomes_come_from_the_reports_then_the_backends_words() {
        let dir = tempfile::tempdir().unwrap();
        let ends = [
            WorkerEnd {
                replica: 0,
                exit_code: Some(20),
            },
            WorkerEnd {
                replica: 1,
                exit_code: None,
            },
        ];
        let record = failure_record(dir.path(), "e1", &ends, &|code| match code {
            Some(c) => format!("its Pod exited with {c}"),
            None => "no finished Pod".to_owned(),
        });
        assert_eq!(record.experiment, "e1");
        assert_eq!(record.kind, FailureKind::LauncherStopped);
        assert_eq!(record.exit_code, exit::INCOMPLETE_COHORT);
        let outcomes: Vec<(u32, Option<i32>, &str)> = record
            .workers
            .iter()
            .map(|w| (w.replica, w.exit_code, w.outcome.as_str()))
            .collect();
        assert_eq!(
            outcomes,
            [
                (0, Some(20), "its Pod exited with 20"),
                (1, None, "no finished Pod")
            ]
        );
        assert!(
            record
                .workers
                .iter()
                .all(|w| w.kind == Some(FailureKind::WorkerExited))
        );
    }
}
