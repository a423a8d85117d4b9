//! Resuming a study: what an earlier run left in `cohorts/` for each cohort of the plan.
//!
//! - `cohorts/<name>/summary.json` that reads as a summary of *this* cohort (its mode, worker
//!   count, mix and window match the plan): complete, skipped.
//! - `cohorts/<name>.failed-<k>/`: the cohort failed in run k; kept as it was, reported, and run
//!   again only with `--retry-failed` (into a fresh `cohorts/<name>/`).
//! - `cohorts/<name>/` without a valid summary (a run that was interrupted or killed): set aside
//!   as `<name>.interrupted-<k>/` and run again.
//! - a summary of another cohort in that folder (another plan or window): refused, so that a
//!   study never mixes two protocols.
//!
//! A capacity cohort (`find_capacity = true`) leaves no `summary.json` of its own: its folder
//! holds `capacity.json` and one `probe-<k>-<rate>/` cohort folder per probe. It is complete
//! when `capacity.json` reads, records a search that ended (any stop but `probe_failed`, which
//! is also what the file says while the search is still running), and matches the plan: mode,
//! mix, objective and quantile, and the window of its probes. One that does not match is
//! refused as above; one whose search did not end is run again like an interrupted cohort.

use std::path::{Path, PathBuf};

use coload_cohort_schema::{CapacityReport, CohortSummary, Mode, Workload};
use serde::{Deserialize, Serialize};

use crate::plan::Job;
use coload_spec::Mix;

/// What an earlier run left for one cohort.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Found {
    /// A valid summary: nothing to run.
    Complete {
        /// Its experiment id.
        experiment: String,
    },
    /// A capacity search that ended and matches the plan: nothing to run.
    CapacityComplete {
        /// Its answer in words (`848.5 requests/s at p99 <= 25 ms; stop: converged`).
        answer: String,
    },
    /// A hog cohort whose other workers ran out of memory beside the hog, with its
    /// `isolation.json` saying so: the measurement is done, nothing to run.
    IsolationComplete {
        /// Its experiment id.
        experiment: String,
        /// The answer in words.
        answer: String,
        /// The folders set aside as failed by a run that did not know this (the newest holds
        /// the `isolation.json`), for the report to find it; empty when it is in the cohort's
        /// own folder.
        dirs: Vec<PathBuf>,
    },
    /// Failed before; the folders it left and the last failure's record.
    Failed {
        dirs: Vec<PathBuf>,
        last: Option<FailureRecord>,
    },
    /// A folder without a valid summary (interrupted or killed).
    Partial,
    /// Nothing yet.
    New,
}

/// Written as `study-failure.json` into a failed cohort's folder when it is set aside.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct FailureRecord {
    /// bench-cohort's exit code (`None` when it was killed by a signal).
    pub(crate) exit_code: Option<i32>,
    /// What went wrong, from its log (the `error:` lines).
    pub(crate) reason: String,
}

/// The file a failed cohort's folder holds its [`FailureRecord`] in.
pub(crate) const FAILURE_FILE: &str = "study-failure.json";

/// How a recorded cohort differs from what the plan asks (mode, mix, window, objective).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Mismatch(String);

/// Why an earlier run's folder cannot be resumed.
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    /// The folder holds another cohort's results: they are never overwritten.
    #[error(
        "{} holds {what} that is not this plan's `{cohort}` ({why}); give the study another \
         --out, or move that folder away",
        .dir.display()
    )]
    NotThisPlans {
        /// The folder.
        dir: PathBuf,
        /// `a cohort` or `a capacity search`.
        what: &'static str,
        /// The plan's cohort.
        cohort: String,
        /// How it differs.
        why: Mismatch,
    },
}

/// Why a summary is not `job`'s.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SummaryProblem {
    /// It does not read.
    #[error(transparent)]
    Unreadable(#[from] coload_analysis::AnalysisError),
    /// It is another cohort's.
    #[error(transparent)]
    Mismatch(#[from] Mismatch),
}

/// Reads what an earlier run left for `job` under `cohorts`. `Err` is a summary of another
/// cohort in `job`'s folder.
pub(crate) fn inspect(cohorts: &Path, job: &Job) -> Result<Found, ResumeError> {
    let dir = cohorts.join(&job.name);
    let summary = dir.join("summary.json");
    let capacity = dir.join(CAPACITY_FILE);
    if job.finds_capacity() && capacity.is_file() {
        match capacity_of(&dir, job) {
            Ok(r) => {
                return Ok(Found::CapacityComplete {
                    answer: capacity_answer(&r),
                });
            }
            Err(CapacityProblem::Mismatch(why)) => {
                return Err(ResumeError::NotThisPlans {
                    dir,
                    what: "a capacity search",
                    cohort: job.name.clone(),
                    why,
                });
            }
            // A search that never ended is what an interrupted run leaves: run it again.
            Err(CapacityProblem::Unfinished(_) | CapacityProblem::Unreadable(_)) => {
                return Ok(Found::Partial);
            }
        }
    }
    if !job.finds_capacity() && summary.is_file() {
        match read_summary(&summary) {
            Ok(s) => {
                check_matches(&s, job).map_err(|why| ResumeError::NotThisPlans {
                    dir: dir.clone(),
                    what: "a cohort",
                    cohort: job.name.clone(),
                    why,
                })?;
                return Ok(Found::Complete {
                    experiment: s.experiment,
                });
            }
            // An unreadable summary is what a killed run leaves: run the cohort again.
            Err(_) => return Ok(Found::Partial),
        }
    }
    let failed = set_aside_dirs(cohorts, &job.name, "failed");
    if job.holds_a_hog() {
        if let Some((experiment, answer)) = isolation_measured(&dir, job) {
            return Ok(Found::IsolationComplete {
                experiment,
                answer,
                dirs: Vec::new(),
            });
        }
        // An earlier run (before hog cohorts counted as measured) set it aside as failed.
        if let Some((experiment, answer)) = failed.last().and_then(|d| isolation_measured(d, job)) {
            return Ok(Found::IsolationComplete {
                experiment,
                answer,
                dirs: failed,
            });
        }
    }
    if !failed.is_empty() {
        let last = failed.last().and_then(|d| {
            std::fs::read(d.join(FAILURE_FILE))
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
        });
        return Ok(Found::Failed { dirs: failed, last });
    }
    if dir.exists() {
        return Ok(Found::Partial);
    }
    Ok(Found::New)
}

/// A hog cohort folder's `isolation.json` when it shows the others running out of memory beside
/// the hog under the job's mode (`not_contained`): its experiment and the answer in words. A
/// contained or inconclusive result, or one of another mode, is `None`: such a cohort completes
/// with a summary, or failed for another reason.
pub(crate) fn isolation_measured(dir: &Path, job: &Job) -> Option<(String, String)> {
    use coload_cohort_schema::{IsolationOutcome, IsolationResult};
    let r: IsolationResult =
        coload_cohort_schema::read_document(&dir.join(coload_cohort_schema::files::ISOLATION))
            .ok()?;
    if r.outcome != IsolationOutcome::NotContained || r.mode != job.mode {
        return None;
    }
    let answer = format!(
        "not contained: {}",
        coload_report::study_report::isolation_note(&r)
    );
    Some((r.experiment, answer))
}

fn read_summary(path: &Path) -> Result<CohortSummary, coload_analysis::AnalysisError> {
    coload_analysis::load_compare_input(path, &coload_analysis::Options::default()).map(|(s, _)| s)
}

/// Reads `path` as a summary of `job`.
pub(crate) fn summary_of(path: &Path, job: &Job) -> Result<CohortSummary, SummaryProblem> {
    let s = read_summary(path)?;
    check_matches(&s, job)?;
    Ok(s)
}

/// The file a capacity cohort's answer is in.
pub(crate) const CAPACITY_FILE: &str = "capacity.json";

/// Why a capacity cohort's folder does not hold a finished search of this cohort.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum CapacityProblem {
    /// No `capacity.json`, or one that does not read.
    Unreadable(String),
    /// The search did not end (`stop` is still `probe_failed`): a probe's cohort failed, or the
    /// run was stopped; the probes it recorded.
    Unfinished(usize),
    /// A search of another cohort (mode, mix, objective or window).
    Mismatch(Mismatch),
}

impl std::fmt::Display for CapacityProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CapacityProblem::Unreadable(why) => f.write_str(why),
            CapacityProblem::Mismatch(why) => write!(f, "{why}"),
            CapacityProblem::Unfinished(n) => {
                write!(f, "the search stopped after {n} probe(s) without an answer")
            }
        }
    }
}

/// Reads `dir/capacity.json` as the finished capacity search of `job`.
pub(crate) fn capacity_of(dir: &Path, job: &Job) -> Result<CapacityReport, CapacityProblem> {
    let path = dir.join(CAPACITY_FILE);
    let r: CapacityReport = coload_cohort_schema::read_document(&path)
        .map_err(|e| CapacityProblem::Unreadable(format!("{}: {e}", path.display())))?;
    check_capacity_matches(dir, &r, job).map_err(CapacityProblem::Mismatch)?;
    if r.stop == coload_cohort_schema::StopReason::ProbeFailed {
        return Err(CapacityProblem::Unfinished(r.probes.len()));
    }
    Ok(r)
}

/// A finished search in words, for the index: `848.5 requests/s at p99 <= 25 ms (stop:
/// converged, 4 probes)`.
pub(crate) fn capacity_answer(r: &CapacityReport) -> String {
    let words = match (r.capacity_per_s, r.failed_above_per_s) {
        (Some(c), Some(_)) => format!("{c}"),
        (Some(c), None) => format!("at least {c}"),
        (None, Some(f)) => format!("below {f}"),
        (None, None) => "unknown".to_owned(),
    };
    let mut objective = Vec::new();
    if !r.probes.iter().all(|p| p.serve.is_empty()) || r.ttft_slo_ms.is_none() {
        objective.push(coload_report::objective_words(r.slo_ms, r.quantile));
    }
    if let (Some(ttft), Some(tpot)) = (r.ttft_slo_ms, r.tpot_slo_ms) {
        objective.push(coload_report::llm_objective_words(ttft, tpot, r.quantile));
    }
    format!(
        "capacity {words} requests/s at {} (stop: {}, {} probes)",
        objective.join(" and "),
        r.stop,
        r.probes.len()
    )
}

/// `Err` says how a capacity search differs from what the plan asks of `job`: its mode, mix,
/// objective and quantile, and the window of its first probe whose summary reads.
fn check_capacity_matches(dir: &Path, r: &CapacityReport, job: &Job) -> Result<(), Mismatch> {
    check_shape(r.mode, &r.workload_mix, job)?;
    let has_serve = job.mix.workloads().contains(&Workload::Serve);
    if let Some(slo) = job.spec.serve.slo_ms
        && has_serve
        && (r.slo_ms - slo).abs() > 1e-9
    {
        return Err(Mismatch(format!(
            "an objective of {} ms where the plan says {slo} ms",
            r.slo_ms
        )));
    }
    // A serve-llm search: its TTFT and TPOT objectives (a search written before these objectives had
    // none, and no serve-llm worker either).
    for (what, recorded, planned) in [
        ("TTFT", r.ttft_slo_ms, job.spec.serve.ttft_slo_ms),
        ("TPOT", r.tpot_slo_ms, job.spec.serve.tpot_slo_ms),
    ] {
        if let (Some(planned), true) = (planned, job.mix.workloads().contains(&Workload::ServeLlm))
            && recorded.is_none_or(|x| (x - planned).abs() > 1e-9)
        {
            return Err(Mismatch(format!(
                "a {what} objective of {} where the plan says {planned} ms",
                recorded.map_or_else(|| "none".to_owned(), |x| format!("{x} ms"))
            )));
        }
    }
    let quantile = job
        .spec
        .capacity
        .slo_quantile
        .unwrap_or(coload_spec::DEFAULT_SLO_QUANTILE);
    if (r.quantile - quantile).abs() > 1e-9 {
        return Err(Mismatch(format!(
            "quantile {} where the plan says {quantile}",
            r.quantile
        )));
    }
    {
        let w = job.spec.flags.window_s.get();
        let probe = r.probes.iter().find_map(|p| {
            let name = Path::new(&p.dir).file_name()?;
            read_summary(&dir.join(name).join("summary.json")).ok()
        });
        if let Some(s) = probe
            && (s.config.window_s - w).abs() > 1e-9
        {
            return Err(Mismatch(format!(
                "probes with a {} s window where the plan says {w} s",
                s.config.window_s
            )));
        }
    }
    Ok(())
}

/// `Err` says how a recorded mode and workload mix differ from what the plan asks of `job`.
fn check_shape(
    mode: Mode,
    mix: &std::collections::BTreeMap<Workload, u32>,
    job: &Job,
) -> Result<(), Mismatch> {
    if mode != job.mode {
        return Err(Mismatch(format!(
            "mode {mode} where the plan says {}",
            job.mode
        )));
    }
    if *mix != mix_counts(&job.workers) {
        return Err(Mismatch(format!(
            "workers {} where the plan says {}",
            show_mix(mix),
            job.workers
        )));
    }
    Ok(())
}

fn show_mix(m: &std::collections::BTreeMap<Workload, u32>) -> String {
    m.iter()
        .map(|(w, n)| format!("{w}={n}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// `Err` says how a summary differs from what the plan asks of `job`.
fn check_matches(s: &CohortSummary, job: &Job) -> Result<(), Mismatch> {
    check_shape(s.mode, &s.workload_mix, job)?;
    let w = job.spec.flags.window_s.get();
    if (s.config.window_s - w).abs() > 1e-9 {
        return Err(Mismatch(format!(
            "a {} s window where the plan says {w} s",
            s.config.window_s
        )));
    }
    Ok(())
}

fn mix_counts(workers: &str) -> std::collections::BTreeMap<Workload, u32> {
    let mut out = std::collections::BTreeMap::new();
    if let Ok(mix) = Mix::parse(workers) {
        for w in mix.workloads() {
            *out.entry(*w).or_insert(0) += 1;
        }
    }
    out
}

/// `<name>.<kind>-<k>` folders under `cohorts`, by k.
fn set_aside_dirs(cohorts: &Path, name: &str, kind: &str) -> Vec<PathBuf> {
    let prefix = format!("{name}.{kind}-");
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir(cohorts)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let file_name = e.file_name();
            let k = file_name.to_str()?.strip_prefix(&prefix)?.parse().ok()?;
            Some((k, e.path()))
        })
        .collect();
    found.sort();
    found.into_iter().map(|(_, p)| p).collect()
}

/// Renames `cohorts/<name>` to the next free `cohorts/<name>.<kind>-<k>` and returns it.
pub(crate) fn set_aside(cohorts: &Path, name: &str, kind: &str) -> std::io::Result<PathBuf> {
    let next = set_aside_dirs(cohorts, name, kind)
        .iter()
        .filter_map(|p| {
            p.file_name()?
                .to_str()?
                .rsplit_once('-')?
                .1
                .parse::<u32>()
                .ok()
        })
        .max()
        .unwrap_or(0)
        + 1;
    let to = cohorts.join(format!("{name}.{kind}-{next}"));
    std::fs::rename(cohorts.join(name), &to)?;
    Ok(to)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Plan;

    /// A real summary (the H200 solo trainer), rewritten to be `mode` with `workers`.
    fn write_summary(dir: &Path, mode: &str, mix: &[(&str, u32)], window_s: f64) {
        let fixture = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/h200/exclusive-solo-train/expected-summary.json"
        );
        let mut v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
        v["mode"] = mode.into();
        v["workload_mix"] = mix
            .iter()
            .map(|(w, n)| ((*w).to_owned(), serde_json::Value::from(*n)))
            .collect::<serde_json::Map<_, _>>()
            .into();
        v["config"]["window_s"] = window_s.into();
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("summary.json"), v.to_string()).unwrap();
    }

    fn job() -> Job {
        Plan::parse(
            "t",
            "[flags]\nwindow_s = 45\n[[policy]]\nname = \"timeslice\"\nmode = \"timeslice\"\n\
             [[cohort]]\nworkers = \"infer=1,train=6\"\n",
        )
        .unwrap()
        .jobs(false)
        .remove(0)
    }

    #[test]
    fn a_valid_summary_of_this_cohort_is_complete() {
        let tmp = tempfile::tempdir().unwrap();
        let j = job();
        assert_eq!(inspect(tmp.path(), &j).unwrap(), Found::New);
        write_summary(
            &tmp.path().join(&j.name),
            "timeslice",
            &[("infer", 1), ("train", 6)],
            45.0,
        );
        assert!(matches!(
            inspect(tmp.path(), &j),
            Ok(Found::Complete { experiment }) if experiment.starts_with("exclusive-train1")
        ));
    }

    #[test]
    fn a_summary_of_another_protocol_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let j = job();
        let dir = tmp.path().join(&j.name);
        write_summary(&dir, "timeslice", &[("infer", 1), ("train", 6)], 15.0);
        let e = inspect(tmp.path(), &j).unwrap_err();
        assert!(
            e.to_string()
                .contains("a 15 s window where the plan says 45 s"),
            "{e}"
        );
        write_summary(&dir, "mps", &[("infer", 1), ("train", 6)], 45.0);
        assert!(
            inspect(tmp.path(), &j)
                .unwrap_err()
                .to_string()
                .contains("mode mps")
        );
        write_summary(&dir, "timeslice", &[("train", 7)], 45.0);
        let e = inspect(tmp.path(), &j).unwrap_err();
        assert!(
            e.to_string()
                .contains("workers train=7 where the plan says infer=1,train=6"),
            "{e}"
        );
    }

    #[test]
    fn a_folder_without_a_valid_summary_is_partial() {
        let tmp = tempfile::tempdir().unwrap();
        let j = job();
        let dir = tmp.path().join(&j.name);
        std::fs::create_dir_all(dir.join("worker-0")).unwrap();
        assert_eq!(inspect(tmp.path(), &j).unwrap(), Found::Partial);
        std::fs::write(dir.join("summary.json"), "{\"schema_version\": 1").unwrap();
        assert_eq!(inspect(tmp.path(), &j).unwrap(), Found::Partial);
    }

    #[test]
    fn failed_runs_are_set_aside_numbered_and_found_again() {
        let tmp = tempfile::tempdir().unwrap();
        let j = job();
        for k in 1..=2 {
            let dir = tmp.path().join(&j.name);
            std::fs::create_dir_all(&dir).unwrap();
            let record = FailureRecord {
                exit_code: Some(30),
                reason: format!("attempt {k}"),
            };
            std::fs::write(dir.join(FAILURE_FILE), serde_json::to_vec(&record).unwrap()).unwrap();
            let to = set_aside(tmp.path(), &j.name, "failed").unwrap();
            assert_eq!(
                to.file_name().unwrap().to_str().unwrap(),
                format!("{}.failed-{k}", j.name)
            );
        }
        match inspect(tmp.path(), &j).unwrap() {
            Found::Failed { dirs, last } => {
                assert_eq!(dirs.len(), 2);
                assert_eq!(last.unwrap().reason, "attempt 2");
            }
            other => panic!("{other:?}"),
        }
        // A valid summary beside the failed folders (a retry that succeeded) wins.
        write_summary(
            &tmp.path().join(&j.name),
            "timeslice",
            &[("infer", 1), ("train", 6)],
            45.0,
        );
        assert!(matches!(
            inspect(tmp.path(), &j),
            Ok(Found::Complete { .. })
        ));
    }

    /// A hog cohort of the plan under time-slicing.
    fn hog_job() -> Job {
        Plan::parse(
            "t",
            "[flags]\nwindow_s = 45\n[[policy]]\nname = \"timeslice\"\nmode = \"timeslice\"\n\
             [[cohort]]\nworkers = \"hog=1,train=6\"\n",
        )
        .unwrap()
        .jobs(false)
        .remove(0)
    }

    /// The `isolation.json` of the H200's time-sliced hog cohort (round 4): every trainer ran
    /// out of memory beside the hog; `edit` changes it first.
    fn write_isolation(dir: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
        let text = include_str!("../tests/data/isolation-not-contained.json");
        let mut v: serde_json::Value = serde_json::from_str(text).unwrap();
        edit(&mut v);
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("isolation.json"), v.to_string()).unwrap();
    }

    /// Beside a hog, the others running out of memory is the measurement: a folder whose
    /// `isolation.json` says `not_contained` under the job's mode is complete, also when an
    /// earlier run set it aside as failed; a contained or inconclusive result, or one of
    /// another mode, is not.
    #[test]
    fn a_hog_cohort_whose_others_ran_out_of_memory_is_measured() {
        let tmp = tempfile::tempdir().unwrap();
        let j = hog_job();
        assert!(j.holds_a_hog() && !job().holds_a_hog());
        let dir = tmp.path().join(&j.name);
        write_isolation(&dir, |_| {});
        match inspect(tmp.path(), &j).unwrap() {
            Found::IsolationComplete {
                experiment,
                answer,
                dirs,
            } => {
                assert!(
                    experiment.starts_with("timeslice-hog1-train6"),
                    "{experiment}"
                );
                assert_eq!(
                    answer,
                    "not contained: the hog got 139.2 GiB; 6 of 6 others ran out of memory"
                );
                assert!(dirs.is_empty());
            }
            other => panic!("{other:?}"),
        }
        // Set aside as failed by an earlier run.
        let aside = set_aside(tmp.path(), &j.name, "failed").unwrap();
        match inspect(tmp.path(), &j).unwrap() {
            Found::IsolationComplete { dirs, .. } => assert_eq!(dirs, std::slice::from_ref(&aside)),
            other => panic!("{other:?}"),
        }
        // Inconclusive, or measured under another mode: a failure like any other.
        for edit in [
            |v: &mut serde_json::Value| v["outcome"] = "inconclusive".into(),
            |v: &mut serde_json::Value| v["mode"] = "mps".into(),
        ] {
            write_isolation(&aside, edit);
            assert!(matches!(
                inspect(tmp.path(), &j).unwrap(),
                Found::Failed { .. }
            ));
        }
        // A cohort without a hog never reads one.
        let plain = job();
        write_isolation(&tmp.path().join(&plain.name), |_| {});
        assert_eq!(inspect(tmp.path(), &plain).unwrap(), Found::Partial);
    }

    /// A capacity cohort of the plan: time-slicing, a server beside six trainers, p99 <= 25 ms.
    fn capacity_job(window_s: u32, slo_ms: u32) -> Job {
        Plan::parse(
            "t",
            &format!(
                "[flags]\nwindow_s = {window_s}\n[[policy]]\nname = \"timeslice\"\n\
                 mode = \"timeslice\"\n[[cohort]]\nworkers = \"serve=1,train=6\"\n\
                 flags = {{ find_capacity = true, slo_ms = {slo_ms}, rate = 150 }}\n"
            ),
        )
        .unwrap()
        .jobs(false)
        .remove(0)
    }

    /// The H200's time-slicing search (round 2) copied into `dir`: its `capacity.json` and its
    /// first probe's summary; `stop` replaces the search's stop.
    fn write_capacity(dir: &Path, stop: &str) {
        let data = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/results/data/2026-11-30-round2/capacity/timeslice6"
        );
        let data = Path::new(data);
        let mut v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(data.join("capacity.json")).unwrap()).unwrap();
        v["stop"] = stop.into();
        std::fs::create_dir_all(dir.join("probe-1-150")).unwrap();
        std::fs::write(dir.join(CAPACITY_FILE), v.to_string()).unwrap();
        std::fs::copy(
            data.join("probe-1-150/summary.json"),
            dir.join("probe-1-150/summary.json"),
        )
        .unwrap();
    }

    #[test]
    fn a_finished_capacity_search_of_this_cohort_is_complete_without_a_summary() {
        let tmp = tempfile::tempdir().unwrap();
        let j = capacity_job(10, 25);
        assert!(j.finds_capacity());
        assert_eq!(inspect(tmp.path(), &j).unwrap(), Found::New);
        write_capacity(&tmp.path().join(&j.name), "min_rate_fails");
        assert_eq!(
            inspect(tmp.path(), &j).unwrap(),
            Found::CapacityComplete {
                answer: "capacity below 25 requests/s at p99 <= 25 ms (stop: min_rate_fails, \
                         4 probes)"
                    .into()
            }
        );
    }

    #[test]
    fn an_unfinished_capacity_search_is_run_again() {
        let tmp = tempfile::tempdir().unwrap();
        let j = capacity_job(10, 25);
        let dir = tmp.path().join(&j.name);
        // What the file says while the search runs, and after a probe's cohort failed.
        write_capacity(&dir, "probe_failed");
        assert_eq!(inspect(tmp.path(), &j).unwrap(), Found::Partial);
        std::fs::write(dir.join(CAPACITY_FILE), "{\"schema_version\": 1").unwrap();
        assert_eq!(inspect(tmp.path(), &j).unwrap(), Found::Partial);
        std::fs::remove_file(dir.join(CAPACITY_FILE)).unwrap();
        assert_eq!(inspect(tmp.path(), &j).unwrap(), Found::Partial);
    }

    #[test]
    fn a_capacity_search_of_another_protocol_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let j = capacity_job(10, 10);
        write_capacity(&tmp.path().join(&j.name), "min_rate_fails");
        let e = inspect(tmp.path(), &j).unwrap_err();
        assert!(
            e.to_string()
                .contains("an objective of 25 ms where the plan says 10 ms"),
            "{e}"
        );
        let j = capacity_job(45, 25);
        let e = inspect(tmp.path(), &j).unwrap_err();
        assert!(
            e.to_string()
                .contains("probes with a 10 s window where the plan says 45 s"),
            "{e}"
        );
    }

    /// A serve-llm search of the plan (CPU captures in `fixtures/serve-llm-study`): decode and
    /// serve-llm on gpt2-tiny, TTFT p99 <= `ttft` ms and TPOT p99 <= `tpot` ms, 4 s windows.
    fn llm_capacity_job(ttft: u32, tpot: u32) -> Job {
        Plan::parse(
            "t",
            &format!(
                "[flags]\nwindow_s = 4\nmodel = \"gpt2-tiny\"\n[[policy]]\nname = \"timeslice\"\n\
                 mode = \"timeslice\"\n[[cohort]]\nworkers = \"serve-llm=1,decode=1\"\n\
                 flags = {{ find_capacity = true, ttft_slo_ms = {ttft}, tpot_slo_ms = {tpot}, \
                 rate = 10, prompt_tokens = 32, output_tokens = 16 }}\n"
            ),
        )
        .unwrap()
        .jobs(false)
        .remove(0)
    }

    /// A finished serve-llm search is complete with both objectives in its answer; one made
    /// for other TTFT or TPOT objectives is refused, naming which.
    #[test]
    fn a_serve_llm_search_is_resumed_by_its_ttft_and_tpot_objectives() {
        let tmp = tempfile::tempdir().unwrap();
        let fixture = Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/serve-llm-study/cohorts/timeslice-serve-llm1-decode1-capacity"
        ));
        let j = llm_capacity_job(200, 20);
        let dir = tmp.path().join(&j.name);
        for probe in ["", "probe-1-10", "probe-2-20"] {
            std::fs::create_dir_all(dir.join(probe)).unwrap();
        }
        std::fs::copy(fixture.join(CAPACITY_FILE), dir.join(CAPACITY_FILE)).unwrap();
        for probe in ["probe-1-10", "probe-2-20"] {
            std::fs::copy(
                fixture.join(probe).join("summary.json"),
                dir.join(probe).join("summary.json"),
            )
            .unwrap();
        }
        assert_eq!(
            inspect(tmp.path(), &j).unwrap(),
            Found::CapacityComplete {
                answer: "capacity at least 20 requests/s at TTFT p99 <= 200 ms and TPOT p99 <= \
                         20 ms (stop: max_rate_passes, 2 probes)"
                    .into()
            }
        );
        let e = inspect(tmp.path(), &llm_capacity_job(200, 50)).unwrap_err();
        assert!(
            e.to_string()
                .contains("a TPOT objective of 20 ms where the plan says 50 ms"),
            "{e}"
        );
        let e = inspect(tmp.path(), &llm_capacity_job(500, 20)).unwrap_err();
        assert!(
            e.to_string()
                .contains("a TTFT objective of 200 ms where the plan says 500 ms"),
            "{e}"
        );
    }
}
