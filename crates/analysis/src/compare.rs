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
    ActivityScope, Baseline, BaselineBlock, CardRatio, CohortComparison, CohortSummary, Comparison,
    Estimate, GpmStats, GroupComparison, GroupSummary, MeanMax, RepeatGroup, RepeatPoint,
    RepeatStats, SCHEMA_VERSION, SummaryWarning, WorkerComparison, WorkerSummary, Workload,
    check_version, files,
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
    // Only a cohort whose records are all there can be summarized again: committed data keep
    // the reports and drop the batch records to save room.
    let whole = |d: &std::path::PathBuf| {
        d.join(files::WORKER_REPORT).is_file() && d.join(files::BATCHES).is_file()
    };
    if dirs.is_empty() || !dirs.iter().all(whole) {
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

/// Compares `cohorts` with each other and with the solo `baselines`, all of one run: every
/// card's solos are one block ([`compare_in_runs`] with no runs recorded).
pub fn compare(
    cohorts: &[CohortSummary],
    baselines: &[CohortSummary],
) -> Result<Comparison, AnalysisError> {
    compare_in_runs(cohorts, baselines, &BTreeMap::new())
}

/// Compares `cohorts` with each other and with the solo `baselines`; `runs` names the run of
/// the study each cohort and baseline ran in, by experiment id (one absent: runs not recorded).
///
/// Baselines are blocks: every solo run of a workload on one card in one run of the study (its
/// repeats; one set per card and run). Each ratio divides by the block of the cohort's own card
/// and run, with a 95% interval that carries the block's run-to-run noise ([`crate::ratio`]): a
/// card drifts between a study's runs (one resumed after a pause, or on another node, may find
/// its card faster or slower), so solos of another run are no reference. A cohort whose card
/// has no baseline of its workload gets no ratio, and a `cross_card` warning names the cards and
/// the spread between the baselines' cards, because H200s differ by 10 to 14 % from one card to
/// the next; one whose card has baselines of other runs only gets none either (`cross_run`).
pub fn compare_in_runs(
    cohorts: &[CohortSummary],
    baselines: &[CohortSummary],
    runs: &BTreeMap<String, u32>,
) -> Result<Comparison, AnalysisError> {
    let run_of = |c: &CohortSummary| runs.get(&c.experiment).copied();
    if cohorts.is_empty() {
        return Err(AnalysisError::Compare(
            "nothing to compare: give summary.json files or cohort folders".into(),
        ));
    }
    let mut warnings = Vec::new();
    let mut blocks: Blocks<'_> = BTreeMap::new();
    let mut first: BTreeMap<Workload, Baseline> = BTreeMap::new();
    for b in baselines {
        let worker = baseline_worker(b)?;
        if blocks
            .values()
            .flatten()
            .any(|other| other.experiment == b.experiment)
        {
            return Err(AnalysisError::Compare(format!(
                "baseline `{}` is given twice: each run counts once",
                b.experiment
            )));
        }
        let key = (worker.workload, worker.gpu_uuid.clone(), run_of(b));
        if let Some(other) = blocks.get(&key).and_then(|v| v.first()) {
            let diffs = b.config.differences(&other.config);
            if !diffs.is_empty() || other.workers[0].model != worker.model {
                return Err(AnalysisError::Compare(format!(
                    "{} baselines `{}` and `{}` on one card differ in {}: repeats of a baseline \
                     run the same configuration",
                    worker.workload,
                    other.experiment,
                    b.experiment,
                    if diffs.is_empty() {
                        "model".to_owned()
                    } else {
                        diffs
                            .iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join(", ")
                    }
                )));
            }
        }
        blocks.entry(key).or_default().push(b);
        first.entry(worker.workload).or_insert_with(|| Baseline {
            experiment: b.experiment.clone(),
            mode: b.mode,
            model: worker.model.clone(),
            execution: b.config.execution,
            samples_per_s: worker.samples_per_s,
            p99_ms: worker.latency_ms.p99,
            card: worker.gpu_uuid.clone(),
        });
    }
    let blocks: BTreeMap<BlockKey, Block<'_>> = blocks
        .into_iter()
        .map(|(k, runs)| (k, Block::new(runs)))
        .collect();

    let out_cohorts = cohorts
        .iter()
        .map(|c| compare_cohort(c, run_of(c), &blocks, &mut warnings))
        .collect();

    Ok(Comparison {
        schema_version: SCHEMA_VERSION,
        baselines: first,
        baseline_blocks: blocks
            .iter()
            .map(|((workload, card, run), b)| BaselineBlock {
                workload: *workload,
                card: card.clone(),
                run: *run,
                experiments: b.runs.iter().map(|r| r.experiment.clone()).collect(),
                samples_per_s: b.rates_estimate,
                p99_ms: b.p99_estimate,
            })
            .collect(),
        cohorts: out_cohorts,
        repeats: repeats(cohorts, &run_of, &blocks),
        warnings,
        caveats: CAVEATS.iter().map(|c| (*c).to_owned()).collect(),
        decision: None,
    })
}

/// The one worker of baseline `b`, whose rate and p99 every ratio divides by; `Err` when `b` is
/// no solo or its figures are nothing to divide by.
fn baseline_worker(b: &CohortSummary) -> Result<&WorkerSummary, AnalysisError> {
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
    Ok(worker)
}

/// A baseline block's key: the workload, the card (`None` without a GPU identity) and the run of
/// the study (`None` where runs were not recorded).
type BlockKey = (Workload, Option<String>, Option<u32>);
type Blocks<'a> = BTreeMap<BlockKey, Vec<&'a CohortSummary>>;

/// The solo runs of one workload on one card in one run of the study.
struct Block<'a> {
    runs: Vec<&'a CohortSummary>,
    rates: Vec<f64>,
    rates_estimate: Estimate,
    p99_estimate: Estimate,
}

impl<'a> Block<'a> {
    fn new(runs: Vec<&'a CohortSummary>) -> Self {
        let rates: Vec<f64> = runs.iter().map(|r| r.workers[0].samples_per_s).collect();
        let p99s: Vec<f64> = runs.iter().map(|r| r.workers[0].latency_ms.p99).collect();
        let zero = Estimate {
            n: 0,
            mean: 0.0,
            stddev: 0.0,
            ci95_low: None,
            ci95_high: None,
        };
        Block {
            rates_estimate: stats::estimate_nonnegative(&rates).unwrap_or(zero),
            p99_estimate: stats::estimate_nonnegative(&p99s).unwrap_or(zero),
            runs,
            rates,
        }
    }

    fn rate(&self) -> f64 {
        self.rates_estimate.mean
    }

    fn p99(&self) -> f64 {
        self.p99_estimate.mean
    }
}

/// How far apart the baselines of `workload` are between cards: the fastest card's mean solo
/// rate over the slowest's, minus one (a card's rate: the mean of its runs' blocks); `None`
/// with fewer than two cards.
fn between_card_spread(blocks: &BTreeMap<BlockKey, Block<'_>>, workload: Workload) -> Option<f64> {
    let mut by_card: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for ((w, card, _), b) in blocks {
        if let (true, Some(card), true) = (*w == workload, card, b.rate() > 0.0) {
            by_card.entry(card.as_str()).or_default().push(b.rate());
        }
    }
    let means: Vec<f64> = by_card
        .values()
        .map(|v| v.iter().sum::<f64>() / v.len() as f64)
        .collect();
    let (lo, hi) = means.iter().fold((f64::INFINITY, 0.0_f64), |(lo, hi), m| {
        (lo.min(*m), hi.max(*m))
    });
    (means.len() >= 2).then(|| hi / lo - 1.0)
}

/// A card's UUID cut to what a reader tells apart (`GPU-3c0feb05`).
#[must_use]
pub fn short_card(card: &str) -> &str {
    card.get(..12).unwrap_or(card)
}

fn compare_cohort(
    c: &CohortSummary,
    run: Option<u32>,
    blocks: &BTreeMap<BlockKey, Block<'_>>,
    warnings: &mut Vec<SummaryWarning>,
) -> CohortComparison {
    let mut groups = BTreeMap::new();
    for (workload, g) in &c.groups {
        let members: Vec<&WorkerSummary> = c
            .workers
            .iter()
            .filter(|w| w.workload == *workload)
            .collect();
        let mut cards: Vec<Option<String>> = members.iter().map(|w| w.gpu_uuid.clone()).collect();
        cards.sort();
        cards.dedup();
        let own: Vec<Option<&Block<'_>>> = cards
            .iter()
            .map(|card| blocks.get(&(*workload, card.clone(), run)))
            .collect();
        block_warnings(c, g, (*workload, run), &cards, &own, blocks, warnings);
        let block_of = |w: &WorkerSummary| {
            blocks
                .get(&(*workload, w.gpu_uuid.clone(), run))
                .filter(|b| b.rate() > 0.0)
        };
        let per_worker = members
            .iter()
            .map(|w| {
                let block = block_of(w);
                WorkerComparison {
                    replica: w.replica,
                    samples_per_s: w.samples_per_s,
                    p99_ms: w.latency_ms.p99,
                    rate_vs_solo: block.map(|b| ratio(w.samples_per_s, b.rate())),
                    rate_vs_solo_ci: block
                        .and_then(|b| crate::ratio::ratio_of_means(&[w.samples_per_s], &b.rates)),
                    p99_vs_solo: block.map(|b| ratio(w.latency_ms.p99, b.p99())),
                    card: w.gpu_uuid.clone(),
                    latency_cdf_ms: w.latency_cdf_ms.clone(),
                    latency_ms: Some(w.latency_ms),
                    batches: Some(w.batches),
                }
            })
            .collect();
        // One worker alone on each member's own card: the mean of their blocks' solo rates (one
        // block for every shared cohort).
        let solo_rate = members
            .iter()
            .map(|w| block_of(w).map(Block::rate))
            .collect::<Option<Vec<f64>>>()
            .filter(|v| !v.is_empty())
            .map(|v| v.iter().sum::<f64>() / v.len() as f64);
        let one_block = match own.as_slice() {
            [Some(b)] => Some(*b),
            _ => None,
        };
        groups.insert(
            *workload,
            GroupComparison {
                model: g.model.clone(),
                workers: g.workers,
                aggregate_samples_per_s: g.aggregate_samples_per_s,
                aggregate_vs_solo: solo_rate.map(|s| ratio(g.aggregate_samples_per_s, s)),
                aggregate_vs_solo_ci: one_block.and_then(|b| {
                    crate::ratio::ratio_of_means(&[g.aggregate_samples_per_s], &b.rates)
                }),
                jain_fairness: g.jain_fairness,
                p99_ms: g.latency_ms.p99,
                p99_vs_solo: one_block
                    .filter(|b| b.p99() > 0.0)
                    .map(|b| g.latency_ms.p99 / b.p99()),
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
        cards: c.colocation.physical_gpus.clone(),
        run,
        common_s: c.common_interval.seconds,
        groups,
        gpm: device_gpm(c),
        joules: c.energy.as_ref().map(|e| e.joules),
    }
}

/// What a reader must know about a group's baselines: none at all, none on its own card
/// (`cross_card`, with the spread between the cards that have them), none of its own run on
/// its card (`cross_run`), or one of another configuration.
fn block_warnings(
    c: &CohortSummary,
    g: &GroupSummary,
    (workload, run): (Workload, Option<u32>),
    cards: &[Option<String>],
    own: &[Option<&Block<'_>>],
    blocks: &BTreeMap<BlockKey, Block<'_>>,
    warnings: &mut Vec<SummaryWarning>,
) {
    let of_workload = || blocks.iter().filter(|((w, _, _), _)| *w == workload);
    // Cards with baselines of this workload, but none of this cohort's run.
    let other_runs: Vec<(&Option<String>, Option<u32>)> = cards
        .iter()
        .zip(own)
        .filter(|(_, b)| b.is_none())
        .filter_map(|(card, _)| {
            of_workload()
                .find(|((_, k, _), _)| k == card)
                .map(|((_, _, r), _)| (card, *r))
        })
        .collect();
    if of_workload().next().is_none() {
        warnings.push(warn(
            "no_baseline",
            format!(
                "cohort `{}`: no {workload} baseline, so no ratios against solo",
                c.experiment
            ),
        ));
    } else if let Some((card, theirs)) = other_runs.first() {
        warnings.push(warn(
            "cross_run",
            format!(
                "cohort `{}` ran in {} on {}; that card's {workload} baselines ran in {} only: \
                 no ratio against solo across runs, between which a card drifts",
                c.experiment,
                run_words(run),
                card_words(card.as_deref()),
                run_words(*theirs)
            ),
        ));
    } else if own.iter().any(Option::is_none) {
        let theirs: Vec<String> = of_workload()
            .map(|((_, card, _), _)| card_words(card.as_deref()))
            .collect();
        let ours: Vec<String> = cards.iter().map(|k| card_words(k.as_deref())).collect();
        let spread = between_card_spread(blocks, workload)
            .map(|s| {
                format!(
                    "; the baselines' cards differ by {:.0} % here",
                    (s * 100.0).round()
                )
            })
            .unwrap_or_default();
        warnings.push(warn(
            "cross_card",
            format!(
                "cohort `{}` ran on {}; its {workload} baselines ran on {}: no ratio against \
                     solo across cards, which differ by more than some effects{spread}",
                c.experiment,
                ours.join(", "),
                theirs.join(", ")
            ),
        ));
    }
    for b in own.iter().flatten() {
        let base = b.runs[0];
        let mut diffs: Vec<String> = c
            .config
            .differences(&base.config)
            .iter()
            .filter(|d| !BASELINE_FREE_FIELDS.contains(&d.field))
            .map(ToString::to_string)
            .collect();
        if let (Some(group), Some(model)) = (&g.model, &base.workers[0].model)
            && group != model
        {
            diffs.insert(0, format!("model {group} != {model}"));
        }
        if !diffs.is_empty() {
            warnings.push(warn(
                "baseline_config",
                format!(
                    "cohort `{}` and its {workload} baseline `{}` differ in {}: the \
                         ratios compare different work",
                    c.experiment,
                    base.experiment,
                    diffs.join(", ")
                ),
            ));
        }
    }
}

/// A run of the study as a sentence names it: `run 2`, or "a run not recorded".
fn run_words(run: Option<u32>) -> String {
    run.map_or_else(|| "a run not recorded".to_owned(), |r| format!("run {r}"))
}

/// A card as a sentence names it: its short UUID, or "no GPU identity".
fn card_words(card: Option<&str>) -> String {
    card.map_or_else(
        || "no GPU identity".to_owned(),
        |c| short_card(c).to_owned(),
    )
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

fn repeats(
    cohorts: &[CohortSummary],
    run_of: &dyn Fn(&CohortSummary) -> Option<u32>,
    blocks: &BTreeMap<BlockKey, Block<'_>>,
) -> Vec<RepeatGroup> {
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
                            vs_solo: card_ratios(&members, *workload, run_of, blocks),
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

/// A repeated shape's group against solo, block by block: its cohorts on one card in one run (a
/// cohort on one card only) over that card's baseline runs of the same run of the study.
fn card_ratios(
    members: &[&CohortSummary],
    workload: Workload,
    run_of: &dyn Fn(&CohortSummary) -> Option<u32>,
    blocks: &BTreeMap<BlockKey, Block<'_>>,
) -> Vec<CardRatio> {
    let mut by_card: BTreeMap<(Option<String>, Option<u32>), Vec<&CohortSummary>> = BTreeMap::new();
    for c in members {
        let mut cards = c
            .workers
            .iter()
            .filter(|w| w.workload == workload)
            .map(|w| w.gpu_uuid.clone());
        let Some(card) = cards.next() else { continue };
        if cards.all(|k| k == card) {
            by_card.entry((card, run_of(c))).or_default().push(c);
        }
    }
    by_card
        .into_iter()
        .filter_map(|((card, run), cs)| {
            let block = blocks.get(&(workload, card.clone(), run))?;
            let groups: Vec<&GroupSummary> =
                cs.iter().filter_map(|c| c.groups.get(&workload)).collect();
            let aggregate: Vec<f64> = groups.iter().map(|g| g.aggregate_samples_per_s).collect();
            let per_worker: Vec<f64> = groups
                .iter()
                .map(|g| g.per_worker_samples_per_s.mean)
                .collect();
            Some(CardRatio {
                aggregate_vs_solo: crate::ratio::ratio_of_means(&aggregate, &block.rates)?,
                per_worker_vs_solo: crate::ratio::ratio_of_means(&per_worker, &block.rates)?,
                card,
                run,
            })
        })
        .collect()
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    fn fixture(name: &str) -> CohortSummary {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures")
            .join(name);
        summarize_dirs(&[dir], &Options::default()).unwrap()
    }

    /// `s` as experiment `name` on `card`.
    fn on(mut s: CohortSummary, name: &str, card: &str) -> CohortSummary {
        name.clone_into(&mut s.experiment);
        for w in &mut s.workers {
            w.gpu_uuid = Some(card.to_owned());
        }
        s.colocation.physical_gpus = vec![card.to_owned()];
        s
    }

    /// Without runs recorded every card's solos are one block, as before runs were numbered;
    /// with them, a cohort whose card has solos of another run only gets no ratio and a
    /// `cross_run` warning, and one of the solos' run gets its ratio.
    #[test]
    fn a_cohort_divides_by_the_solos_of_its_own_run_only() {
        let solo = on(fixture("solo-train"), "solo-1", "GPU-a");
        let pair = on(fixture("repeat-a"), "pair-2", "GPU-a");
        let cohorts = [solo.clone(), pair.clone()];
        let plain = compare(&cohorts, std::slice::from_ref(&solo)).unwrap();
        let unrecorded =
            compare_in_runs(&cohorts, std::slice::from_ref(&solo), &BTreeMap::new()).unwrap();
        assert_eq!(plain, unrecorded);
        let aggregate = |c: &Comparison| c.cohorts[1].groups[&Workload::Train].aggregate_vs_solo;
        assert!((aggregate(&plain).unwrap() - 4.0).abs() < 1e-9);

        let runs: BTreeMap<String, u32> = [("solo-1".to_owned(), 1), ("pair-2".to_owned(), 2)]
            .into_iter()
            .collect();
        let split = compare_in_runs(&cohorts, std::slice::from_ref(&solo), &runs).unwrap();
        assert_eq!(aggregate(&split), None);
        assert_eq!(split.cohorts[1].run, Some(2));
        let w = split
            .warnings
            .iter()
            .find(|w| w.kind == "cross_run")
            .unwrap();
        assert!(
            w.message
                .contains("ran in run 2 on GPU-a; that card's train baselines ran in run 1"),
            "{}",
            w.message
        );
        assert!(!split.warnings.iter().any(|w| w.kind == "cross_card"));

        let same: BTreeMap<String, u32> = [("solo-1".to_owned(), 2), ("pair-2".to_owned(), 2)]
            .into_iter()
            .collect();
        let one_run = compare_in_runs(&cohorts, std::slice::from_ref(&solo), &same).unwrap();
        assert!((aggregate(&one_run).unwrap() - 4.0).abs() < 1e-9);
        assert_eq!(one_run.baseline_blocks[0].run, Some(2));
    }
}
