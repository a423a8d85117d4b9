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

use std::path::{Path, PathBuf};

use coload_cohort_schema::{CohortSummary, Workload};
use serde::{Deserialize, Serialize};

use super::plan::Job;
use crate::mix::Mix;

/// What an earlier run left for one cohort.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Found {
    /// A valid summary: nothing to run.
    Complete {
        /// Its experiment id.
        experiment: String,
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

/// Reads what an earlier run left for `job` under `cohorts`. `Err` is a summary of another
/// cohort in `job`'s folder.
pub(crate) fn inspect(cohorts: &Path, job: &Job) -> Result<Found, String> {
    let dir = cohorts.join(&job.name);
    let summary = dir.join("summary.json");
    if summary.is_file() {
        match read_summary(&summary) {
            Ok(s) => {
                check_matches(&s, job).map_err(|why| {
                    format!(
                        "{} holds a cohort that is not this plan's `{}` ({why}); give the study \
                         another --out, or move that folder away",
                        dir.display(),
                        job.name
                    )
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

fn read_summary(path: &Path) -> Result<CohortSummary, String> {
    coload_analysis::load_compare_input(path, &coload_analysis::Options::default())
        .map(|(s, _)| s)
        .map_err(|e| e.to_string())
}

/// Reads `path` as a summary of `job`.
pub(crate) fn summary_of(path: &Path, job: &Job) -> Result<CohortSummary, String> {
    let s = read_summary(path)?;
    check_matches(&s, job)?;
    Ok(s)
}

/// `Err` says how a summary differs from what the plan asks of `job`.
fn check_matches(s: &CohortSummary, job: &Job) -> Result<(), String> {
    if s.mode != job.mode {
        return Err(format!("mode {} where the plan says {}", s.mode, job.mode));
    }
    let want = mix_counts(&job.workers);
    if s.workload_mix != want {
        let show = |m: &std::collections::BTreeMap<Workload, u32>| {
            m.iter()
                .map(|(w, n)| format!("{w}={n}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        return Err(format!(
            "workers {} where the plan says {}",
            show(&s.workload_mix),
            job.workers
        ));
    }
    if let Some(w) = job.flag_f64("window-s")
        && (s.config.window_s - w).abs() > 1e-9
    {
        return Err(format!(
            "a {} s window where the plan says {w} s",
            s.config.window_s
        ));
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
    use crate::study::plan::Plan;

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
        assert_eq!(inspect(tmp.path(), &j), Ok(Found::New));
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
        assert!(e.contains("a 15 s window where the plan says 45 s"), "{e}");
        write_summary(&dir, "mps", &[("infer", 1), ("train", 6)], 45.0);
        assert!(inspect(tmp.path(), &j).unwrap_err().contains("mode mps"));
        write_summary(&dir, "timeslice", &[("train", 7)], 45.0);
        let e = inspect(tmp.path(), &j).unwrap_err();
        assert!(
            e.contains("workers train=7 where the plan says infer=1,train=6"),
            "{e}"
        );
    }

    #[test]
    fn a_folder_without_a_valid_summary_is_partial() {
        let tmp = tempfile::tempdir().unwrap();
        let j = job();
        let dir = tmp.path().join(&j.name);
        std::fs::create_dir_all(dir.join("worker-0")).unwrap();
        assert_eq!(inspect(tmp.path(), &j), Ok(Found::Partial));
        std::fs::write(dir.join("summary.json"), "{\"schema_version\": 1").unwrap();
        assert_eq!(inspect(tmp.path(), &j), Ok(Found::Partial));
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
}
