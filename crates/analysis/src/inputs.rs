//! Finding the worker folders among the paths given, and reading their `worker.json`.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use coload_cohort_schema::{SchemaError, WorkerReport, files};

use crate::error::{AnalysisError, CohortProblem};

/// The prefix of worker folder names that `bench-cohort` and the download scripts use.
const WORKER_DIR_PREFIX: &str = "worker-";

/// Expands the paths given into worker folders.
///
/// A path is a worker folder when it holds `worker.json` (a path to a `worker.json` file means
/// its folder). Otherwise it is a parent: its sub-folders named `worker-*` or holding
/// `worker.json` are the workers, sorted by name. A parent with neither is taken as a worker
/// folder whose report is missing, so that the cohort is refused rather than silently smaller.
pub fn discover(paths: &[PathBuf]) -> Result<Vec<PathBuf>, AnalysisError> {
    if paths.is_empty() {
        return Err(AnalysisError::NoInputs);
    }
    let mut out: Vec<PathBuf> = Vec::new();
    let mut seen = BTreeSet::new();
    let mut push = |p: PathBuf, out: &mut Vec<PathBuf>| {
        if seen.insert(p.clone()) {
            out.push(p);
        }
    };
    for path in paths {
        if path.is_file() && path.file_name().is_some_and(|n| n == files::WORKER_REPORT) {
            let dir = path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            push(dir.to_owned(), &mut out);
            continue;
        }
        if !path.is_dir() {
            return Err(AnalysisError::BadInput {
                path: path.clone(),
                message: if path.exists() {
                    "not a folder (give worker folders or a folder holding them)".into()
                } else {
                    "no such folder".into()
                },
            });
        }
        if path.join(files::WORKER_REPORT).exists() {
            push(path.clone(), &mut out);
            continue;
        }
        let children = worker_children(path)?;
        if children.is_empty() {
            push(path.clone(), &mut out);
        } else {
            for c in children {
                push(c, &mut out);
            }
        }
    }
    Ok(out)
}

fn worker_children(dir: &Path) -> Result<Vec<PathBuf>, AnalysisError> {
    let entries = fs::read_dir(dir).map_err(|e| AnalysisError::BadInput {
        path: dir.to_owned(),
        message: format!("cannot list: {e}"),
    })?;
    let mut children: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(WORKER_DIR_PREFIX))
                || p.join(files::WORKER_REPORT).is_file()
        })
        .collect();
    // Natural order, so that worker-10 comes after worker-9.
    children.sort_by_key(|p| natural_key(p));
    Ok(children)
}

fn natural_key(p: &Path) -> (String, u64, String) {
    let name = p
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let digits: String = name
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let stem = name[..name.len() - digits.len()].to_owned();
    (stem, digits.parse().unwrap_or(0), name)
}

/// Parses the text of a `worker.json`, checking its schema version first, naming `path` in
/// errors. Never panics, whatever the bytes.
pub fn parse_worker_report(path: &Path, bytes: &[u8]) -> Result<WorkerReport, SchemaError> {
    coload_cohort_schema::parse_document(path, bytes)
}

/// One worker folder and its report.
#[derive(Debug)]
pub(crate) struct WorkerInput {
    pub(crate) dir: PathBuf,
    pub(crate) report: WorkerReport,
}

/// Reads every folder's `worker.json`. Folders without one are collected as problems (a missing
/// `batches.jsonl` is found later, with the identity rules); a malformed document or an unknown
/// schema version is an error at once.
pub(crate) fn read_reports(
    dirs: &[PathBuf],
) -> Result<(Vec<WorkerInput>, Vec<CohortProblem>), AnalysisError> {
    let mut inputs = Vec::new();
    let mut problems = Vec::new();
    for dir in dirs {
        let report_path = dir.join(files::WORKER_REPORT);
        if !report_path.is_file() {
            problems.push(CohortProblem::MissingReport { dir: dir.clone() });
            continue;
        }
        let bytes = fs::read(&report_path).map_err(|source| SchemaError::Io {
            path: report_path.clone(),
            source,
        })?;
        let report = parse_worker_report(&report_path, &bytes)?;
        inputs.push(WorkerInput {
            dir: dir.clone(),
            report,
        });
    }
    Ok((inputs, problems))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn natural_order() {
        let mut v: Vec<PathBuf> = ["worker-10", "worker-9", "worker-1"]
            .iter()
            .map(PathBuf::from)
            .collect();
        v.sort_by_key(|p| natural_key(p));
        assert_eq!(
            v,
            ["worker-1", "worker-9", "worker-10"]
                .iter()
                .map(PathBuf::from)
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn garbage_reports_are_errors_not_panics() {
        let p = Path::new("w/worker.json");
        for bytes in [
            &b""[..],
            b"\xff\xfe",
            b"[]",
            b"{\"schema_version\":1}",
            b"{}",
        ] {
            assert!(parse_worker_report(p, bytes).is_err());
        }
        let e = parse_worker_report(p, b"{\"schema_version\":7}").unwrap_err();
        assert!(e.to_string().contains("schema_version 7"), "{e}");
    }

    #[test]
    fn missing_paths_are_invalid_input() {
        let e = discover(&[PathBuf::from("/nonexistent/coload")]).unwrap_err();
        assert_eq!(e.to_string(), "/nonexistent/coload: no such folder");
        assert!(matches!(discover(&[]), Err(AnalysisError::NoInputs)));
    }
}
