//! Repeats that stop when the verdict is settled: before a repeat of a shape whose plan line
//! asks for a `precision`, its complete repeats so far are compared with the study's baseline
//! runs on their card in their run (the one comparison rule,
//! `coload_analysis::compare_in_runs`), and the repeat is not run when every group's aggregate
//! against solo is settled by
//! [`coload_analysis::ratio::stop_rule`]: its 95 % interval narrower than the precision, or
//! clear of every threshold the verdict uses. A study thus reaches the same words in fewer
//! cohorts; `repeats` stays the most a shape runs.

use std::path::Path;

use coload_analysis::ratio::{RatioInterval, StopReason, VERDICT_THRESHOLDS, stop_rule};
use coload_cohort_schema::CohortSummary;
use coload_cohort_schema::study::Index;

use crate::plan::Job;

/// Why `job` need not run: its shape's complete repeats already settle every group's ratio
/// against solo. `None` when it must run (no precision asked, fewer than two repeats done, no
/// baseline on their card, or a ratio still open).
pub(crate) fn settled(job: &Job, cohorts: &Path, index: &Index) -> Option<String> {
    let s = standing(job, cohorts, index, false, u32::MAX)?;
    s.reasons.iter().all(|(why, _)| why.stops()).then(|| {
        format!(
            "its shape is settled after {} repeats: {}",
            s.done,
            words(&s.reasons)
        )
    })
}

/// Why the shape of `job`, its last planned repeat, stopped there: every group settled by
/// that repeat, or its most repeats ran with a ratio still open. `None` without a precision or
/// without a comparison (no baseline on the card).
pub(crate) fn stopped(job: &Job, cohorts: &Path, index: &Index) -> Option<String> {
    let s = standing(job, cohorts, index, true, job.repeat)?;
    Some(
        if s.reasons
            .iter()
            .any(|(why, _)| *why == StopReason::MaxRepeats)
        {
            format!(
                "its shape ran its most repeats ({}) without settling: {}",
                s.done,
                words(&s.reasons)
            )
        } else {
            format!(
                "its shape is settled after {} repeats: {}",
                s.done,
                words(&s.reasons)
            )
        },
    )
}

/// A shape's complete repeats compared with the baselines: how many, and per group the stop
/// rule's answer with its words.
struct Standing {
    done: u32,
    reasons: Vec<(StopReason, String)>,
}

fn words(reasons: &[(StopReason, String)]) -> String {
    reasons
        .iter()
        .map(|(_, w)| w.as_str())
        .collect::<Vec<_>>()
        .join("; ")
}

/// Where the shape of `job` stands: its complete repeats (with `job`'s own when `with_job`)
/// against the study's baseline runs on their card, judged with at most `max_repeats`.
fn standing(
    job: &Job,
    cohorts: &Path,
    index: &Index,
    with_job: bool,
    max_repeats: u32,
) -> Option<Standing> {
    let precision = job.precision?;
    let summary = |name: &str| {
        coload_analysis::load_compare_input(
            &cohorts.join(name).join("summary.json"),
            &coload_analysis::Options::default(),
        )
        .ok()
        .map(|(s, _)| s)
    };
    let shape: Vec<CohortSummary> = index
        .cohorts
        .iter()
        .filter(|e| {
            (with_job || e.name != job.name)
                && shape_of(&e.name, e.repeat) == shape_of(&job.name, job.repeat)
        })
        .filter(|e| e.outcome.has_summary())
        .filter_map(|e| summary(&e.name))
        .collect();
    let done = u32::try_from(shape.len()).ok()?;
    let baselines: Vec<CohortSummary> = index
        .cohorts
        .iter()
        .filter(|e| e.baseline && e.outcome.has_summary())
        .filter_map(|e| summary(&e.name))
        .collect();
    let comparison =
        coload_analysis::compare_in_runs(&shape, &baselines, &index.run_of_experiments()).ok()?;
    let [group] = comparison.repeats.as_slice() else {
        return None;
    };
    let mut reasons = Vec::new();
    for (workload, stats) in &group.groups {
        // The card with the most of the shape's cohorts.
        let r: &RatioInterval = &stats
            .vs_solo
            .iter()
            .max_by_key(|c| c.aggregate_vs_solo.n_numerator)?
            .aggregate_vs_solo;
        let why = stop_rule(Some(r), done, precision, &VERDICT_THRESHOLDS, max_repeats);
        let how = match why {
            StopReason::Precise => format!("within the precision asked ({precision})"),
            StopReason::Settled => "clear of every threshold of the verdict".to_owned(),
            StopReason::MaxRepeats | StopReason::Continue => format!(
                "wider than the precision asked ({precision}) and across a threshold of the \
                 verdict"
            ),
        };
        reasons.push((
            why,
            format!(
                "{workload} aggregate ÷ solo {:.3} (95 % CI {:.3} to {:.3}) {how}",
                r.ratio, r.low?, r.high?,
            ),
        ));
    }
    (!reasons.is_empty()).then_some(Standing { done, reasons })
}

pub(crate) use coload_cohort_schema::study::shape_of;

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests")]
mod tests {
    use std::path::PathBuf;

    use coload_cohort_schema::study::{INDEX_VERSION, Outcome};

    use super::*;
    use crate::plan::Plan;

    fn fixture(name: &str) -> CohortSummary {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures")
            .join(name);
        coload_analysis::summarize_dirs(&[dir], &coload_analysis::Options::default()).unwrap()
    }

    /// `s` as cohort `name` with every rate scaled by `factor` (its common interval shortened,
    /// so that every rate still agrees with its samples, as a summary is checked on reading).
    fn scaled(mut s: CohortSummary, name: &str, factor: f64) -> CohortSummary {
        name.clone_into(&mut s.experiment);
        s.common_interval.seconds /= factor;
        for w in &mut s.workers {
            w.samples_per_s *= factor;
        }
        for g in s.groups.values_mut() {
            g.aggregate_samples_per_s *= factor;
            g.per_worker_samples_per_s.mean *= factor;
        }
        s
    }

    /// A study of PLAN whose baselines and the first repeats of the shape completed with the
    /// given rates against the fixture's solo (the solos at `solo` each, the pairs at `pair`
    /// each); returns the folder, the index and the jobs.
    fn study(solo: &[f64], pair: &[f64]) -> (tempfile::TempDir, Index, Vec<Job>) {
        let tmp = tempfile::tempdir().unwrap();
        let jobs = Plan::parse("t", PLAN).unwrap().jobs(false);
        let base = fixture("solo-train");
        let two = fixture("repeat-a"); // aggregate 4x the solo
        let mut index = Index {
            schema_version: INDEX_VERSION,
            plan: "t".into(),
            plan_source: "t".into(),
            node: "n".into(),
            lanes: vec![0],
            cohorts: jobs.iter().map(Job::entry).collect(),
            runs: Vec::new(),
        };
        let (mut s, mut p) = (solo.iter(), pair.iter());
        for e in &mut index.cohorts {
            let factor = if e.baseline {
                s.next().copied()
            } else {
                p.next().map(|f| f / 4.0)
            };
            let Some(factor) = factor else { continue };
            let factor = &factor;
            let summary = scaled(
                if e.baseline {
                    base.clone()
                } else {
                    two.clone()
                },
                &e.name,
                *factor,
            );
            let dir = tmp.path().join(&e.name);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(
                dir.join("summary.json"),
                serde_json::to_vec(&summary).unwrap(),
            )
            .unwrap();
            e.outcome = Outcome::Complete;
        }
        (tmp, index, jobs)
    }

    fn job<'a>(jobs: &'a [Job], name: &str) -> &'a Job {
        jobs.iter().find(|j| j.name == name).unwrap()
    }

    #[test]
    fn a_shape_far_from_every_threshold_settles_after_two_repeats() {
        // Two trainers together at 1.5x one alone, repeats within 1 %: clear of 1.1.
        let (tmp, index, jobs) = study(&[1.0, 1.01], &[1.5, 1.51]);
        let why = settled(job(&jobs, "timeslice-train2-r3"), tmp.path(), &index).unwrap();
        assert!(why.contains("settled after 2 repeats"), "{why}");
        assert!(
            why.contains("train aggregate ÷ solo 1.4") && why.contains("clear of every threshold"),
            "{why}"
        );
        // One repeat is not enough, whatever it says.
        let (tmp, index, jobs) = study(&[1.0, 1.01], &[1.5]);
        assert_eq!(
            settled(job(&jobs, "timeslice-train2-r2"), tmp.path(), &index),
            None
        );
    }

    #[test]
    fn a_shape_near_a_threshold_runs_on() {
        // About 1.1x with a few percent of noise: the interval straddles the gain threshold.
        let (tmp, index, jobs) = study(&[1.0, 1.03], &[1.08, 1.13]);
        assert_eq!(
            settled(job(&jobs, "timeslice-train2-r3"), tmp.path(), &index),
            None
        );
        // Without a precision every repeat runs.
        let mut no_precision = job(&jobs, "timeslice-train2-r3").clone();
        no_precision.precision = None;
        let (tmp, index, _) = study(&[1.0, 1.01], &[1.5, 1.51]);
        assert_eq!(settled(&no_precision, tmp.path(), &index), None);
    }

    /// The last repeat says why its shape stopped: settled with it, or its most repeats ran
    /// with the ratio still open.
    #[test]
    fn the_last_repeat_says_why_its_shape_stopped() {
        let (tmp, index, jobs) = study(&[1.0, 1.03], &[1.08, 1.13]);
        let why = stopped(job(&jobs, "timeslice-train2-r2"), tmp.path(), &index).unwrap();
        assert!(
            why.contains("ran its most repeats (2) without settling")
                && why.contains("across a threshold"),
            "{why}"
        );
        let (tmp, index, jobs) = study(&[1.0, 1.01], &[1.5, 1.51]);
        let why = stopped(job(&jobs, "timeslice-train2-r2"), tmp.path(), &index).unwrap();
        assert!(why.contains("settled after 2 repeats"), "{why}");
        // Without a precision there is nothing to say.
        let mut no_precision = job(&jobs, "timeslice-train2-r2").clone();
        no_precision.precision = None;
        assert_eq!(stopped(&no_precision, tmp.path(), &index), None);
    }

    /// A study resumed on another card (each slice of the lent H200 may get a fresh host): the
    /// first slice ran the first solo and the first repeat on card A, the resumed slice the
    /// second repeat and the closing solo on card B, 12 % faster. The report divides each repeat
    /// by the solo of its own card, never by the other card's or by both pooled, and the
    /// repeated shape keeps one ratio per card; the stop rule reads the card with the most of
    /// the shape's repeats.
    #[test]
    fn a_study_resumed_on_another_card_compares_each_cohort_with_its_own_cards_solos() {
        const A: &str = "GPU-aaaaaaaa-0000";
        const B: &str = "GPU-bbbbbbbb-0000";
        let on_card = |s: CohortSummary, card: &str| {
            let mut s = s;
            s.colocation.physical_gpus = vec![card.to_owned()];
            for w in &mut s.workers {
                w.gpu_uuid = Some(card.to_owned());
            }
            s
        };
        let tmp = tempfile::tempdir().unwrap();
        let jobs = Plan::parse("t", PLAN).unwrap().jobs(false);
        let mut index = Index {
            schema_version: INDEX_VERSION,
            plan: "t".into(),
            plan_source: "t".into(),
            node: "n".into(),
            lanes: vec![0],
            cohorts: jobs.iter().map(Job::entry).collect(),
            runs: Vec::new(),
        };
        // (cohort, card, rate against card A's solo): the pair at 1.5x one alone on its card.
        let ran = [
            ("exclusive-train1-r1", A, 1.0),
            ("timeslice-train2-r1", A, 1.5),
            ("timeslice-train2-r2", B, 1.5 * 1.12),
            ("exclusive-train1-r2", B, 1.12),
        ];
        for (name, card, factor) in ran {
            let e = index.cohorts.iter_mut().find(|e| e.name == name).unwrap();
            let summary = if e.baseline {
                scaled(fixture("solo-train"), name, factor)
            } else {
                scaled(fixture("repeat-a"), name, factor / 4.0)
            };
            let dir = tmp.path().join("cohorts").join(name);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(
                dir.join("summary.json"),
                serde_json::to_vec(&on_card(summary, card)).unwrap(),
            )
            .unwrap();
            e.outcome = Outcome::Complete;
        }
        let about = coload_report::study_report::About {
            title: "t".into(),
            description: "t".into(),
            node: "n".into(),
        };
        let comparison = coload_report::study_report::assemble(tmp.path(), &about, &index)
            .unwrap()
            .comparison;
        for name in ["timeslice-train2-r1", "timeslice-train2-r2"] {
            let k = comparison
                .cohorts
                .iter()
                .find(|k| k.experiment == name)
                .unwrap();
            let ratio = k.groups[&coload_cohort_schema::Workload::Train]
                .aggregate_vs_solo
                .unwrap();
            assert!(
                (ratio - 1.5).abs() < 1e-6,
                "{name}: {ratio} against its own card's solo"
            );
        }
        // One block of solos per card, each of its own run.
        assert_eq!(comparison.baseline_blocks.len(), 2);
        // The repeated shape: a ratio per card, none pooled across them.
        let group = comparison
            .repeats
            .iter()
            .find(|g| g.mode == coload_cohort_schema::Mode::Timeslice)
            .unwrap();
        let per_card = &group.groups[&coload_cohort_schema::Workload::Train].vs_solo;
        assert_eq!(per_card.len(), 2);
        for r in per_card {
            assert!((r.aggregate_vs_solo.ratio - 1.5).abs() < 1e-6, "{r:?}");
        }
        // A card with one repeat and one solo has no interval: the stop rule waits.
        assert_eq!(
            settled(
                job(&jobs, "timeslice-train2-r3"),
                &tmp.path().join("cohorts"),
                &index
            ),
            None
        );
    }

    const PLAN: &str = r#"
name = "t"
[[policy]]
name = "exclusive"
mode = "exclusive"
[[policy]]
name = "timeslice"
mode = "timeslice"
[[cohort]]
workers = "train=1"
policies = ["exclusive"]
baseline = true
repeats = 2
[[cohort]]
workers = "train=2"
policies = ["timeslice"]
repeats = 6
precision = 0.05
"#;

    #[test]
    fn a_precision_needs_room_to_stop_and_is_refused_on_a_baseline() {
        let refused = |extra: &str| {
            Plan::parse("t", &PLAN.replace("precision = 0.05", extra))
                .unwrap_err()
                .to_string()
        };
        assert!(refused("precision = 0").contains("between 0 and 1"));
        assert!(refused("precision = nan").contains("between 0 and 1"));
        let two = PLAN.replace("repeats = 6", "repeats = 2");
        assert!(
            Plan::parse("t", &two)
                .unwrap_err()
                .to_string()
                .contains("at least 3")
        );
        let on_baseline = PLAN.replacen("repeats = 2", "repeats = 2\nprecision = 0.05", 1);
        assert!(
            Plan::parse("t", &on_baseline)
                .unwrap_err()
                .to_string()
                .contains("a baseline is what ratios divide by")
        );
        let jobs = Plan::parse("t", PLAN).unwrap().jobs(false);
        assert!(
            jobs.iter()
                .filter(|j| !j.baseline)
                .all(|j| j.precision == Some(0.05))
        );
    }
}
