//! The report of a study, assembled from its folder: the complete cohorts compared against
//! the solo baselines, the capacity searches' load curves, the hog cohorts' memory isolation,
//! and every cohort's outcome (`coload_cohort_schema::study::Index`).
//!
//! `coload-study` calls [`write`] at the end of every run; another tool can call it on any
//! study folder, as the report needs only what the folder holds.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use coload_cohort_schema::CohortSummary;
use coload_cohort_schema::study::{Entry, Index, Outcome};

use crate::AnalysisError;

/// What the report says about the study as a whole.
#[derive(Debug, Clone)]
pub struct About {
    /// The page's title.
    pub title: String,
    /// What the plan is for, one line.
    pub description: String,
    /// The node, in words.
    pub node: String,
}

/// What [`write`] did.
#[derive(Debug, Default)]
pub struct Written {
    /// The report folder, where one was written (none before any cohort completed).
    pub dir: Option<PathBuf>,
    /// Files that could not be read, and why (the report is written without them).
    pub warnings: Vec<String>,
}

/// The folders a cohort left: its own, then its failed runs, newest first.
fn cohort_dirs(out: &Path, e: &Entry) -> Vec<std::path::PathBuf> {
    let mut dirs = vec![out.join("cohorts").join(&e.name)];
    dirs.extend(e.failed_dirs.iter().rev().map(|d| out.join(d)));
    dirs
}

/// Memory isolation per policy (issue 12): the `isolation.json` a hog cohort leaves, whether or
/// not the cohort completed (under time-slicing the trainers fail: that is the result).
fn isolation_rows(
    out: &Path,
    index: &Index,
    warnings: &mut Vec<String>,
) -> Vec<crate::IsolationRow> {
    use coload_cohort_schema::{IsolationOutcome, IsolationResult};
    let mut rows = Vec::new();
    for e in &index.cohorts {
        let found = cohort_dirs(out, e)
            .into_iter()
            .map(|d| d.join("isolation.json"))
            .find(|p| p.is_file());
        let Some(path) = found else { continue };
        match coload_cohort_schema::read_document::<IsolationResult>(&path) {
            Ok(r) => rows.push(crate::IsolationRow {
                policy: e.policy.clone(),
                mode: r.mode,
                isolated: r.outcome == IsolationOutcome::Contained,
                outcome: r.outcome.as_str().to_owned(),
                note: isolation_note(&r),
            }),
            Err(err) => warnings.push(format!("{}: {err}", path.display())),
        }
    }
    rows
}

/// The figures behind an isolation result, in a few words: `the hog took 139.3 GiB; 6 of 6
/// others ran out of memory` (`isolation.json` keeps the whole explanation).
fn isolation_note(r: &coload_cohort_schema::IsolationResult) -> String {
    use coload_cohort_schema::{FailureKind, Status, Workload};
    let held = r
        .workers
        .iter()
        .find_map(|w| w.hog.as_ref())
        .map(|h| h.granted_bytes as f64 / f64::from(1u32 << 30));
    let others: Vec<_> = r
        .workers
        .iter()
        .filter(|w| w.workload != Workload::Hog)
        .collect();
    let oom = others
        .iter()
        .filter(|w| w.kind == Some(FailureKind::OutOfMemory))
        .count();
    let complete = others
        .iter()
        .filter(|w| w.status == Status::Complete)
        .count();
    let hog = held.map_or_else(
        || "the hog held nothing".to_owned(),
        |g| format!("the hog got {g:.1} GiB"),
    );
    if oom > 0 {
        format!("{hog}; {oom} of {} others ran out of memory", others.len())
    } else {
        format!("{hog}; {complete} of {} others completed", others.len())
    }
}

/// Serving capacity per policy (issue 13): the `capacity.json` a complete `find_capacity`
/// cohort leaves, with each probe's latency at the objective's quantile (the slowest serve
/// worker's: the verdict needs every one to meet it).
fn capacity_rows(out: &Path, index: &Index, warnings: &mut Vec<String>) -> Vec<crate::CapacityRow> {
    use coload_cohort_schema::CapacityReport;
    let mut rows = Vec::new();
    for e in index.cohorts.iter().filter(|e| e.outcome.has_summary()) {
        let dir = out.join("cohorts").join(&e.name);
        let path = dir.join(coload_cohort_schema::files::CAPACITY);
        if !path.is_file() {
            continue;
        }
        match coload_cohort_schema::read_document::<CapacityReport>(&path) {
            Ok(r) => rows.push(crate::CapacityRow {
                policy: e.policy.clone(),
                mode: r.mode,
                objective: crate::objective_words(r.slo_ms, r.quantile),
                slo_ms: r.slo_ms,
                quantile: r.quantile,
                capacity_per_s: r.capacity_per_s,
                failed_above_per_s: r.failed_above_per_s,
                stop: r.stop.to_string(),
                probes: r
                    .probes
                    .iter()
                    .map(|p| capacity_point(&dir, p, r.quantile))
                    .collect(),
                note: e.workers.clone(),
            }),
            Err(err) => warnings.push(format!("{}: {err}", path.display())),
        }
    }
    rows
}

/// One probe as the load curve shows it. `capacity.json` keeps each serve worker's p99; for
/// another quantile the probe's own `summary.json` (in the cohort's folder, under the probe
/// folder's name) is read.
fn capacity_point(
    dir: &Path,
    p: &coload_cohort_schema::CapacityProbe,
    quantile: f64,
) -> crate::CapacityPoint {
    let at_p99 = (quantile - 0.99).abs() < 1e-9;
    let latency_ms = if p.serve.is_empty() {
        None
    } else if at_p99 {
        p.serve
            .iter()
            .map(|w| w.p99_ms)
            .collect::<Option<Vec<f64>>>()
            .map(|v| v.into_iter().fold(0.0, f64::max))
    } else {
        Path::new(&p.dir)
            .file_name()
            .and_then(|name| {
                coload_cohort_schema::read_document::<CohortSummary>(
                    &dir.join(name).join("summary.json"),
                )
                .ok()
            })
            .and_then(|s| serve_latency(&s, quantile))
    };
    crate::CapacityPoint {
        rate_per_s: p.rate_per_s,
        latency_ms,
        passed: p.passed,
        overloaded: p.serve.iter().any(|w| w.overloaded),
    }
}

/// The slowest serve worker's request latency at `quantile`, where every serve worker has one.
fn serve_latency(s: &CohortSummary, quantile: f64) -> Option<f64> {
    let v: Option<Vec<f64>> = s
        .workers
        .iter()
        .filter_map(|w| w.serve.as_ref())
        .map(|v| crate::request_latency_at(&v.latency_ms, quantile))
        .collect();
    v.filter(|v| !v.is_empty())
        .map(|v| v.into_iter().fold(0.0, f64::max))
}

/// A complete fixed-rate serve cohort as a point of the load curve: the serve workers' mean
/// offered load and the slowest one's latency at each quantile the summary keeps.
fn serve_point(s: &CohortSummary, policy: &str) -> Option<crate::ServePoint> {
    let serve: Vec<&coload_cohort_schema::ServeSummary> =
        s.workers.iter().filter_map(|w| w.serve.as_ref()).collect();
    if serve.is_empty() {
        return None;
    }
    Some(crate::ServePoint {
        policy: policy.to_owned(),
        mode: s.mode,
        experiment: s.experiment.clone(),
        offered_per_s: serve.iter().map(|v| v.offered_per_s).sum::<f64>() / serve.len() as f64,
        latency_ms: [0.5, 0.9, 0.99, 0.999]
            .into_iter()
            .filter_map(|q| serve_latency(s, q).map(|ms| (q, ms)))
            .collect(),
        overloaded: serve.iter().any(|v| v.overloaded),
    })
}

/// Compares the complete cohorts of the study in `out` against its solo baselines and writes
/// `out/report/` (`comparison.json`, `comparison.md`, `report.html`).
pub fn write(out: &Path, about: &About, index: &Index) -> Result<Written, AnalysisError> {
    let mut warnings = Vec::new();
    // A capacity cohort's probes are cohorts at rates the search chose, not repeats of one
    // shape: they stay out of the comparison and show on the load curve instead.
    let mut summaries: Vec<(CohortSummary, &Entry)> = Vec::new();
    for e in index
        .cohorts
        .iter()
        .filter(|e| e.outcome.has_summary() && e.capacity.is_none())
    {
        let path = out.join("cohorts").join(&e.name).join("summary.json");
        match crate::load_compare_input(&path, &crate::Options::default()) {
            Ok((s, _)) => summaries.push((s, e)),
            Err(err) => warnings.push(format!("{}: {err}", path.display())),
        }
    }
    let capacity = capacity_rows(out, index, &mut warnings);
    if summaries.is_empty() && capacity.is_empty() {
        return Ok(Written {
            dir: None,
            warnings,
        });
    }
    // One baseline per workload: the first complete solo the plan marks as one.
    let mut baselines: BTreeMap<coload_cohort_schema::Workload, CohortSummary> = BTreeMap::new();
    for (s, e) in &summaries {
        if let (true, Some(w)) = (e.baseline, s.workers.first()) {
            baselines.entry(w.workload).or_insert_with(|| s.clone());
        }
    }
    let cohorts: Vec<CohortSummary> = summaries.iter().map(|(s, _)| s.clone()).collect();
    let baselines: Vec<CohortSummary> = baselines.into_values().collect();
    let comparison = if cohorts.is_empty() {
        // Only capacity searches: the report is their charts and table.
        coload_cohort_schema::Comparison {
            schema_version: coload_cohort_schema::SCHEMA_VERSION,
            baselines: BTreeMap::new(),
            cohorts: Vec::new(),
            repeats: Vec::new(),
            warnings: Vec::new(),
            caveats: Vec::new(),
        }
    } else {
        match crate::compare(&cohorts, &baselines) {
            Ok(c) => c,
            Err(e) => {
                warnings.push(format!("no comparison: {e}"));
                return Ok(Written {
                    dir: None,
                    warnings,
                });
            }
        }
    };
    let counts = |o: Outcome| index.cohorts.iter().filter(|e| e.outcome == o).count();
    let context = crate::ReportContext {
        title: about.title.clone(),
        notes: vec![
            format!("{}. Node: {}.", about.description, about.node),
            format!(
                "{} cohorts planned: {} complete, {} failed, {} not offered by this node, {} not \
                 run yet. Every cohort is listed with its outcome at the end of this page.",
                index.cohorts.len(),
                counts(Outcome::Complete) + counts(Outcome::AlreadyComplete),
                counts(Outcome::Failed) + counts(Outcome::FailedEarlier),
                counts(Outcome::NotOffered),
                counts(Outcome::NotRun) + counts(Outcome::Interrupted)
            ),
        ],
        policies: summaries
            .iter()
            .map(|(s, e)| (s.experiment.clone(), e.policy.clone()))
            .collect(),
        cohorts: index
            .cohorts
            .iter()
            .map(|e| crate::ContextCohort {
                name: e.name.clone(),
                policy: e.policy.clone(),
                workers: e.workers.clone(),
                outcome: e.outcome.as_str().to_owned(),
                experiment: e.experiment.clone(),
                note: match (&e.reason, &e.experiment, &e.capacity) {
                    (Some(r), _, _) => r.clone(),
                    (None, Some(x), _) => x.clone(),
                    (None, None, Some(c)) => c.clone(),
                    (None, None, None) => String::new(),
                },
            })
            .collect(),
        capacity,
        serve_points: summaries
            .iter()
            .filter_map(|(s, e)| serve_point(s, &e.policy))
            .collect(),
        isolation: isolation_rows(out, index, &mut warnings),
    };
    let dir = out.join("report");
    crate::write_report_with(&dir, &comparison, &context)?;
    Ok(Written {
        dir: Some(dir),
        warnings,
    })
}
