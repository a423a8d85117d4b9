//! Repeats to a precision against fixed repeats: one plan run twice on one card, set side by
//! side from the two study folders (`2026-12-02-precision/{fixed,precision}`): per shape, how
//! many repeats ran, the ratio with its interval, the words the interval allows, and why the
//! shape stopped; per run, the cohorts it ran and its wall time.

use std::collections::BTreeMap;
use std::path::Path;

use coload_analysis::ratio::{ALONE_TOLERANCE, RatioWords, ratio_words};
use coload_cohort_schema::study::{Outcome, shape_of};
use coload_cohort_schema::{RatioInterval, RepeatGroup, Workload};

use super::frontier::ratio_ci;
use super::{PageError, Study, table};

/// The folder of the two runs, under the page's data folder.
const PRECISION: &str = "2026-12-02-precision";

/// The aggregate of a shape against one worker alone, in the words its interval allows.
fn words(r: &RatioInterval) -> &'static str {
    match ratio_words(r, ALONE_TOLERANCE) {
        RatioWords::Above => "more than one alone",
        RatioWords::Below => "less than one alone",
        RatioWords::AsFastAs => "as much as one alone",
        RatioWords::NotSettled => "not told apart from one alone",
    }
}

/// Every repeated shape of a study that is not a baseline: its label and the training group's
/// aggregate over the same card's solo runs (the card with the most of its cohorts).
fn shapes(study: &Study) -> Vec<(&RepeatGroup, String, RatioInterval)> {
    study
        .comparison()
        .repeats
        .iter()
        .filter(|g| !is_baseline(study, g))
        .filter_map(|g| {
            let stats = g.groups.get(&Workload::Train)?;
            let r = stats
                .vs_solo
                .iter()
                .max_by_key(|c| c.aggregate_vs_solo.n_numerator)?
                .aggregate_vs_solo;
            let label = format!(
                "{}, {} trainers",
                coload_analysis::frontier::policy_words(g.mode, g.share.as_ref()),
                g.count
            );
            Some((g, label, r))
        })
        .collect()
}

fn is_baseline(study: &Study, g: &RepeatGroup) -> bool {
    study.index.cohorts.iter().any(|e| {
        e.baseline
            && e.experiment
                .as_ref()
                .is_some_and(|x| g.experiments.contains(x))
    })
}

/// How the shape of `g` ended, from its entries' outcomes in the study's index: settled after
/// the repeats it ran (the rest marked not needed), or every repeat planned run.
fn why_stopped(study: &Study, g: &RepeatGroup) -> String {
    let Some(first) = study.index.cohorts.iter().find(|e| {
        e.experiment
            .as_ref()
            .is_some_and(|x| g.experiments.contains(x))
    }) else {
        return "-".to_owned();
    };
    let shape = shape_of(&first.name, first.repeat);
    let entries: Vec<_> = study
        .index
        .cohorts
        .iter()
        .filter(|e| shape_of(&e.name, e.repeat) == shape)
        .collect();
    let ran = entries.iter().filter(|e| e.outcome.has_summary()).count();
    if entries.iter().any(|e| e.outcome == Outcome::Settled) {
        format!("settled after {ran} of {} repeats", entries.len())
    } else {
        format!("every repeat planned ({})", entries.len())
    }
}

/// The run's cohorts and wall time: `12 cohorts in 186 s`.
fn run_words(study: &Study) -> String {
    let ran = study
        .index
        .cohorts
        .iter()
        .filter(|e| e.outcome.has_summary())
        .count();
    let wall: f64 = study.index.runs.iter().map(|r| r.wall_s).sum();
    format!(
        "{ran} cohorts in {} s",
        coload_analysis::figures::thousands(wall)
    )
}

pub(crate) fn figures(
    data: &Path,
    values: &mut BTreeMap<&'static str, String>,
) -> Result<(), PageError> {
    let root = data.join(PRECISION);
    let fixed = Study::open(&root.join("fixed"))?;
    let precise = Study::open(&root.join("precision"))?;
    let settled: BTreeMap<String, (RatioInterval, String)> = shapes(&precise)
        .into_iter()
        .map(|(g, label, r)| (label, (r, why_stopped(&precise, g))))
        .collect();
    let mut rows = Vec::new();
    for (_, label, r) in shapes(&fixed) {
        let mut row = vec![
            label.clone(),
            r.n_numerator.to_string(),
            ratio_ci(Some(&r)),
            words(&r).to_owned(),
        ];
        match settled.get(&label) {
            Some((s, why)) => {
                row.extend([
                    s.n_numerator.to_string(),
                    ratio_ci(Some(s)),
                    words(s).to_owned(),
                    why.clone(),
                ]);
            }
            None => row.extend([
                "-".to_owned(),
                "not run".to_owned(),
                "-".to_owned(),
                "-".to_owned(),
            ]),
        }
        rows.push(row);
    }
    values.extend([
        (
            "repeats_table",
            table(
                &[
                    "shape",
                    "fixed: repeats",
                    "aggregate ÷ solo [95 %]",
                    "words",
                    "to a precision: repeats",
                    "aggregate ÷ solo [95 %]",
                    "words",
                    "why it stopped",
                ],
                rows,
            ),
        ),
        (
            "repeats_runs",
            format!(
                "fixed: {}; to a precision: {}",
                run_words(&fixed),
                run_words(&precise)
            ),
        ),
        (
            "repeats_card",
            super::frontier::cards_of(fixed.comparison()),
        ),
    ]);
    Ok(())
}
