//! Comparing cohorts: against solo baselines of the same workload, and across repeats of one
//! shape. Every cohort, group and baseline carries its model and execution, so a ratio between
//! different models or executions is flagged (`baseline_config`) and repeats of one shape never
//! mix them.
//!
//! - Slowdown per worker: `rate_vs_solo = samples/s / solo samples/s` (below 1 is slower) and
//!   `p99_vs_solo = p99 / solo p99` (above 1 is slower).
//! - Sharing gain per group: `aggregate_vs_solo = aggregate samples/s / solo samples/s`; above
//!   1 the co-located workers together did more than one worker alone.
//! - Repeats: cohorts with the same mode, count, workload mix and configuration (by
//!   `WorkerConfig::differences`, the project's one comparison rule) form a group; each quantity
//!   is estimated from one value per cohort (mean, sample stddev, 95% Student-t interval; see
//!   [`crate::stats`]) and the individual cohorts are listed too.

use std::collections::BTreeMap;
use std::path::Path;

use coload_cohort_schema::{
    ActivityScope, Baseline, CohortComparison, CohortSummary, Comparison, GpmStats,
    GroupComparison, MeanMax, RepeatGroup, RepeatPoint, RepeatStats, SCHEMA_VERSION,
    SummaryWarning, WorkerComparison, Workload, check_version, files,
};

use crate::error::AnalysisError;
use crate::stats;
use crate::summarize::{CAVEATS, Options, summarize_dirs, warn};

/// Configuration fields a baseline may differ in from the cohort it is compared with: a solo
/// baseline has, by definition, its own mode and count. The model is compared group by group
/// instead (a mixed cohort may run one model per workload, and its `config` is replica 0's).
const BASELINE_FREE_FIELDS: [&str; 5] = [
    "mode",
    "count",
    "model",
    "parameter_count",
    "model_by_workload",
];

/// The slowest baseline a comparison divides by, samples/s: one sample in a thousand seconds,
/// far below any real worker, far above a rate that makes a ratio overflow.
pub const MIN_BASELINE_PER_S: f64 = 1e-3;

/// Where a compared cohort came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareInput {
    /// A `summary.json` written earlier.
    SummaryFile,
    /// A cohort folder, summarized now.
    CohortFolder,
}

/// Loads one input of a comparison: a `summary.json` file, or a cohort folder (summarized with
/// `options`). Returns the summary and what the input was.
pub fn load_compare_input(
    path: &Path,
    options: &Options,
) -> Result<(CohortSummary, CompareInput), AnalysisError> {
    if path.is_file() {
        let bytes = std::fs::read(path).map_err(|source| {
            AnalysisError::Schema(coload_cohort_schema::SchemaError::Io {
                path: path.to_owned(),
                source,
            })
        })?;
        let invalid = |message: String| coload_cohort_schema::SchemaError::Invalid {
            path: path.to_owned(),
            message,
        };
        let value: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| invalid(e.to_string()))?;
        check_version(path, &value)?;
        let summary = serde_json::from_value(value).map_err(|e| invalid(e.to_string()))?;
        check_figures(path, &summary)?;
        return Ok((summary, CompareInput::SummaryFile));
    }
    let summary = summarize_dirs(&[path.to_owned()], options)?;
    Ok((summary, CompareInput::CohortFolder))
}

/// Checks the figures a `summary.json` states against what they are computed from: each
/// worker's rate against its samples over the common interval, and, when the cohort's worker
/// folders lie beside the file (`worker-<replica>/`, as a launcher leaves them), every worker's
/// batches, samples and rate against its batch records summarized again. A file that disagrees
/// is refused naming the field.
pub fn check_figures(path: &Path, s: &CohortSummary) -> Result<(), AnalysisError> {
    let invalid = |message: String| {
        AnalysisError::Schema(coload_cohort_schema::SchemaError::Invalid {
            path: path.to_owned(),
            message,
        })
    };
    let seconds = s.common_interval.seconds;
    if !(seconds.is_finite() && seconds > 0.0) {
        return Err(invalid(format!(
            "common_interval.seconds must be a positive number of seconds, got {seconds}"
        )));
    }
    let agree = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0);
    for (i, w) in s.workers.iter().enumerate() {
        let rate = w.samples as f64 / seconds;
        if !(w.samples_per_s.is_finite() && agree(w.samples_per_s, rate)) {
            return Err(invalid(format!(
                "workers[{i}].samples_per_s is {}, but its {} samples over the common interval of \
                 {seconds} s give {rate}",
                w.samples_per_s, w.samples
            )));
        }
    }
    let Some(dir) = path.parent() else {
        return Ok(());
    };
    let dirs: Vec<std::path::PathBuf> = s
        .workers
        .iter()
        .map(|w| dir.join(format!("worker-{}", w.replica)))
        .collect();
    if dirs.is_empty() || !dirs.iter().all(|d| d.join(files::WORKER_REPORT).is_file()) {
        return Ok(());
    }
    let fresh = summarize_dirs(&dirs, &Options::default())?;
    for (i, w) in s.workers.iter().enumerate() {
        let Some(f) = fresh.workers.iter().find(|f| f.replica == w.replica) else {
            return Err(invalid(format!(
                "workers[{i}] is replica {}, which its folder does not hold",
                w.replica
            )));
        };
        for (field, stated, recorded) in [
            ("batches", w.batches as f64, f.batches as f64),
            ("samples", w.samples as f64, f.samples as f64),
            ("samples_per_s", w.samples_per_s, f.samples_per_s),
        ] {
            if !agree(stated, recorded) {
                return Err(invalid(format!(
                    "workers[{i}].{field} is {stated}, but the batch records in {} give \
                     {recorded}",
                    dirs[i].display()
                )));
            }
        }
    }
    Ok(())
}

/// Compares `cohorts` with each other and with the solo `baselines` (at most one per workload).
pub fn compare(
    cohorts: &[CohortSummary],
    baselines: &[CohortSummary],
) -> Result<Comparison, AnalysisError> {
    if cohorts.is_empty() {
        return Err(AnalysisError::Compare(
            "nothing to compare: give summary.json files or cohort folders".into(),
        ));
    }
    let mut warnings = Vec::new();
    let mut base: Baselines<'_> = BTreeMap::new();
    for b in baselines {
        let [worker] = b.workers.as_slice() else {
            return Err(AnalysisError::Compare(format!(
                "baseline `{}` has {} workers; a baseline is a solo cohort of one worker",
                b.experiment,
                b.workers.len()
            )));
        };
        // Every ratio divides by the baseline: a rate of 0, below 0, or too small to divide
        // by is no baseline.
        if !(worker.samples_per_s.is_finite() && worker.samples_per_s >= MIN_BASELINE_PER_S) {
            return Err(AnalysisError::Compare(format!(
                "baseline `{}`: workers[0].samples_per_s must be a finite rate of at least \
                 {MIN_BASELINE_PER_S} samples/s, got {}",
                b.experiment, worker.samples_per_s
            )));
        }
        if !(worker.latency_ms.p99.is_finite() && worker.latency_ms.p99 > 0.0) {
            return Err(AnalysisError::Compare(format!(
                "baseline `{}`: workers[0].latency_ms.p99 must be a positive number of ms, got {}",
                b.experiment, worker.latency_ms.p99
            )));
        }
        if let Some((other, _)) = base.get(&worker.workload) {
            return Err(AnalysisError::Compare(format!(
                "two {} baselines (`{}` and `{}`): give one per workload",
                worker.workload, other.experiment, b.experiment
            )));
        }
        base.insert(
            worker.workload,
            (
                Baseline {
                    experiment: b.experiment.clone(),
                    mode: b.mode,
                    model: worker.model.clone(),
                    execution: b.config.execution,
                    samples_per_s: worker.samples_per_s,
                    p99_ms: worker.latency_ms.p99,
                },
                b,
            ),
        );
    }

    let out_cohorts = cohorts
        .iter()
        .map(|c| compare_cohort(c, &base, &mut warnings))
        .collect();

    Ok(Comparison {
        schema_version: SCHEMA_VERSION,
        baselines: base.into_iter().map(|(w, (b, _))| (w, b)).collect(),
        cohorts: out_cohorts,
        repeats: repeats(cohorts),
        warnings,
        caveats: CAVEATS.iter().map(|c| (*c).to_owned()).collect(),
    })
}

type Baselines<'a> = BTreeMap<Workload, (Baseline, &'a CohortSummary)>;

fn compare_cohort(
    c: &CohortSummary,
    base: &Baselines<'_>,
    warnings: &mut Vec<SummaryWarning>,
) -> CohortComparison {
    let mut groups = BTreeMap::new();
    for (workload, g) in &c.groups {
        let solo = base.get(workload);
        if let Some((b, bs)) = solo {
            let mut diffs: Vec<String> = c
                .config
                .differences(&bs.config)
                .iter()
                .filter(|d| !BASELINE_FREE_FIELDS.contains(&d.field))
                .map(ToString::to_string)
                .collect();
            if let (Some(group), Some(base)) = (&g.model, &b.model)
                && group != base
            {
                diffs.insert(0, format!("model {group} != {base}"));
            }
            if !diffs.is_empty() {
                warnings.push(warn(
                    "baseline_config",
                    format!(
                        "cohort `{}` and its {workload} baseline `{}` differ in {}: the \
                         ratios compare different work",
                        c.experiment,
                        b.experiment,
                        diffs.join(", ")
                    ),
                ));
            }
        } else {
            warnings.push(warn(
                "no_baseline",
                format!(
                    "cohort `{}`: no {workload} baseline, so no ratios against solo",
                    c.experiment
                ),
            ));
        }
        let solo = solo.map(|(b, _)| b);
        let per_worker = c
            .workers
            .iter()
            .filter(|w| w.workload == *workload)
            .map(|w| WorkerComparison {
                replica: w.replica,
                samples_per_s: w.samples_per_s,
                p99_ms: w.latency_ms.p99,
                rate_vs_solo: solo.map(|b| ratio(w.samples_per_s, b.samples_per_s)),
                p99_vs_solo: solo.map(|b| ratio(w.latency_ms.p99, b.p99_ms)),
                latency_cdf_ms: w.latency_cdf_ms.clone(),
                latency_ms: Some(w.latency_ms),
                batches: Some(w.batches),
            })
            .collect();
        groups.insert(
            *workload,
            GroupComparison {
                model: g.model.clone(),
                workers: g.workers,
                aggregate_samples_per_s: g.aggregate_samples_per_s,
                aggregate_vs_solo: solo.map(|b| ratio(g.aggregate_samples_per_s, b.samples_per_s)),
                jain_fairness: g.jain_fairness,
                p99_ms: g.latency_ms.p99,
                samples_per_device_joule: g.samples_per_device_joule,
                per_worker,
            },
        );
    }
    CohortComparison {
        experiment: c.experiment.clone(),
        mode: c.mode,
        share: c.share,
        mig_profile: mig_profile(c),
        count: c.count,
        execution: c.config.execution,
        workload_mix: c.workload_mix.clone(),
        common_s: c.common_interval.seconds,
        groups,
        gpm: device_gpm(c),
        joules: c.energy.as_ref().map(|e| e.joules),
    }
}

/// The cohort's device-wide GPM in one figure per metric: the mean over its physical GPUs of
/// each metric's mean, and the largest maximum (one GPU for every shared cohort; several only
/// for exclusive cohorts across cards).
fn device_gpm(c: &CohortSummary) -> Option<GpmStats> {
    let devices: Vec<&GpmStats> = c
        .gpm
        .iter()
        .filter(|d| d.scope == ActivityScope::Device && d.samples > 0)
        .map(|d| &d.metrics)
        .collect();
    if devices.is_empty() {
        return None;
    }
    Some(GpmStats::from_fn(|i| {
        let values: Vec<&MeanMax> = devices.iter().filter_map(|d| d.fields()[i].1).collect();
        (!values.is_empty()).then(|| MeanMax {
            mean: values.iter().map(|v| v.mean).sum::<f64>() / values.len() as f64,
            max: values
                .iter()
                .map(|v| v.max)
                .fold(f64::NEG_INFINITY, f64::max),
        })
    }))
}

/// `a / b`, with a zero baseline giving 0 rather than infinity (a solo run with no throughput
/// is not a reference; its ratio is meaningless and must not look huge).
fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { 0.0 }
}

/// A MIG cohort's profile: the one its workers' GPU instances share, or `mixed: a, b`.
fn mig_profile(c: &CohortSummary) -> Option<String> {
    match c.colocation.mig_profiles.as_slice() {
        [] => None,
        [one] => Some(one.clone()),
        many => Some(format!("mixed: {}", many.join(", "))),
    }
}

/// Same mode, MPS share, MIG profile, count, workload mix, configuration (execution included) and model per
/// group. The share matters as much as the mode: plugin-style MPS and unlimited MPS are different
/// policies (a `replicas: 7` client alone runs at about a quarter of an unlimited one).
fn same_shape(a: &CohortSummary, b: &CohortSummary) -> bool {
    a.mode == b.mode
        && a.share == b.share
        && mig_profile(a) == mig_profile(b)
        && a.count == b.count
        && a.workload_mix == b.workload_mix
        && a.config.differences(&b.config).is_empty()
        && group_models(a) == group_models(b)
}

/// The model of each workload group, where known.
fn group_models(c: &CohortSummary) -> BTreeMap<Workload, String> {
    c.groups
        .iter()
        .filter_map(|(w, g)| Some((*w, g.model.clone()?)))
        .collect()
}

fn repeats(cohorts: &[CohortSummary]) -> Vec<RepeatGroup> {
    let mut shapes: Vec<Vec<&CohortSummary>> = Vec::new();
    for c in cohorts {
        match shapes.iter_mut().find(|s| same_shape(s[0], c)) {
            Some(s) => s.push(c),
            None => shapes.push(vec![c]),
        }
    }
    shapes
        .into_iter()
        .map(|members| {
            let first = members[0];
            let mut groups = BTreeMap::new();
            for workload in first.groups.keys() {
                let points: Vec<RepeatPoint> = members
                    .iter()
                    .filter_map(|c| {
                        let g = c.groups.get(workload)?;
                        Some(RepeatPoint {
                            experiment: c.experiment.clone(),
                            aggregate_samples_per_s: g.aggregate_samples_per_s,
                            per_worker_samples_per_s: g.per_worker_samples_per_s.mean,
                            p99_ms: g.latency_ms.p99,
                        })
                    })
                    .collect();
                let est = |f: fn(&RepeatPoint) -> f64| {
                    let v: Vec<f64> = points.iter().map(f).collect();
                    // Rates and latencies: an interval never reaches below zero.
                    stats::estimate_nonnegative(&v)
                };
                if let (Some(a), Some(p), Some(l)) = (
                    est(|p| p.aggregate_samples_per_s),
                    est(|p| p.per_worker_samples_per_s),
                    est(|p| p.p99_ms),
                ) {
                    groups.insert(
                        *workload,
                        RepeatStats {
                            aggregate_samples_per_s: a,
                            per_worker_samples_per_s: p,
                            p99_ms: l,
                            cohorts: points,
                        },
                    );
                }
            }
            RepeatGroup {
                mode: first.mode,
                share: first.share,
                mig_profile: mig_profile(first),
                count: first.count,
                execution: first.config.execution,
                models: group_models(first),
                workload_mix: first.workload_mix.clone(),
                experiments: members.iter().map(|c| c.experiment.clone()).collect(),
                groups,
            }
        })
        .collect()
}
