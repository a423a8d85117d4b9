//! A baseline block is a card in one run of the study. A study interrupted and resumed on the
//! same card whose card ran 12 % faster in the second run (a card drifts between runs): every
//! cohort records the run it ran in, the resumed run re-runs the trainer's solo in its own
//! block (at its start and its end), and each ratio is the one within its own run, never one
//! against the other run's solos or both runs' pooled. A third run that finds everything
//! complete keeps the re-runs and their run.
//!
//! The cohorts are run by a stand-in launcher that writes the summaries bench-cohort would
//! (the synthetic fixtures: a solo trainer, and a pair at 1.5 times the solo in aggregate),
//! every rate scaled by its run's factor.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use clap::Parser;
use coload_cohort_schema::study::{Index, Outcome};
use coload_cohort_schema::{CohortSummary, Workload};
use coload_launch::QuietConsole;
use coload_study::{Ended, Job, Launcher, Offer, Placement, Plan, Running, Target};

mod support;

use support::{Cli, OneGpu};

struct Done;

impl Running for Done {
    fn poll(&mut self) -> Option<Ended> {
        Some(Ended { code: Some(0) })
    }

    fn interrupt(&mut self) {}
}

fn fixture(name: &str) -> CohortSummary {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(name);
    coload_analysis::summarize_dirs(&[dir], &coload_analysis::Options::default()).unwrap()
}

/// Two GPUs: a cohort takes the first free one it is offered.
struct TwoGpus;

impl Offer for TwoGpus {
    fn is_cpu(&self) -> bool {
        false
    }

    fn place(&self, _job: &Job, free: &[u32]) -> Result<Placement, String> {
        let lane = *free.iter().find(|l| **l < 2).ok_or("busy")?;
        Ok(Placement {
            gpus: vec![lane],
            visible: Some(lane.to_string()),
            per_worker: Vec::new(),
            host_exclusive: false,
            mig_profile: None,
        })
    }
}

/// The card of lane `lane`.
fn card(lane: u32) -> String {
    format!("GPU-aaaaaaaa-000{lane}")
}

/// Writes each cohort's summary on its lane's card ([`card`]) with every rate times `factor`
/// and its lane's `lane_factor`, and stops the study (`stop`) once `stop_after` cohorts have
/// started.
struct StandIn<'a> {
    factor: f64,
    lane_factor: [f64; 2],
    started: AtomicU32,
    stop_after: u32,
    stop: &'a AtomicBool,
}

impl Launcher for StandIn<'_> {
    type Run = Done;

    fn start(&mut self, job: &Job, at: &Placement, dir: &Path) -> std::io::Result<Done> {
        std::fs::create_dir_all(dir)?;
        let lane = at.gpus[0];
        let card = card(lane);
        let run_factor = self.factor * self.lane_factor[lane as usize];
        // The solo at 32 samples/s times the run's factor; the pair (aggregate 4 times the
        // fixture's solo) at 1.5 times it.
        let (mut s, factor) = if job.baseline {
            (fixture("solo-train"), run_factor)
        } else {
            (fixture("repeat-a"), run_factor * 1.5 / 4.0)
        };
        s.experiment.clone_from(&job.name);
        s.mode = job.mode;
        s.config.window_s = job.spec.flags.window_s.get();
        // Every rate scaled, the common interval shortened to match: a summary is checked on
        // reading (samples over seconds).
        s.common_interval.seconds /= factor;
        for w in &mut s.workers {
            w.samples_per_s *= factor;
            w.gpu_uuid = Some(card.clone());
        }
        for g in s.groups.values_mut() {
            g.aggregate_samples_per_s *= factor;
            g.per_worker_samples_per_s.mean *= factor;
        }
        s.colocation.physical_gpus = vec![card];
        std::fs::write(dir.join("summary.json"), serde_json::to_vec(&s)?)?;
        if self.started.fetch_add(1, Ordering::SeqCst) + 1 >= self.stop_after {
            self.stop.store(true, Ordering::SeqCst);
        }
        Ok(Done)
    }
}

const PLAN: &str = "[flags]\nwindow_s = 10\n\
    [[policy]]\nname = \"exclusive\"\nmode = \"exclusive\"\n\
    [[policy]]\nname = \"timeslice\"\nmode = \"timeslice\"\n\
    [[cohort]]\nworkers = \"train=1\"\npolicies = [\"exclusive\"]\nbaseline = true\nrepeats = 2\n\
    [[cohort]]\nworkers = \"train=2\"\npolicies = [\"timeslice\"]\nrepeats = 4\n";

/// One run of the study in `out` with rates times `factor`, stopped after `stop_after`
/// cohorts started.
fn run(out: &Path, factor: f64, stop_after: u32) -> Index {
    run_on(out, factor, stop_after, &OneGpu, vec![0])
}

/// [`run`] on `lanes` of `offer`, card 1 (where there is one) 20 % faster than card 0.
fn run_on(out: &Path, factor: f64, stop_after: u32, offer: &dyn Offer, lanes: Vec<u32>) -> Index {
    let plan = Plan::parse("plan.toml", PLAN).unwrap();
    let args = Cli::parse_from([
        "study",
        "plan.toml",
        "--out",
        out.to_str().unwrap(),
        "--no-progress-bar",
    ])
    .study;
    let stop = AtomicBool::new(false);
    let target = Target {
        offer,
        lanes,
        cpu: false,
        describe: "stand-in GPUs".into(),
        launcher: StandIn {
            factor,
            lane_factor: [1.0, 1.2],
            started: AtomicU32::new(0),
            stop_after,
            stop: &stop,
        },
    };
    coload_study::run_with(&args, &plan, target, &QuietConsole, &stop).unwrap();
    serde_json::from_slice(&std::fs::read(out.join("index.json")).unwrap()).unwrap()
}

fn assembled(out: &Path, index: &Index) -> coload_report::study_report::Assembled {
    let about = coload_report::study_report::About {
        title: "t".into(),
        description: "t".into(),
        node: "n".into(),
    };
    coload_report::study_report::assemble(out, &about, index).unwrap()
}

fn comparison(out: &Path, index: &Index) -> coload_cohort_schema::Comparison {
    assembled(out, index).comparison
}

fn runs_of(index: &Index) -> Vec<(&str, Outcome, Option<u32>)> {
    index
        .cohorts
        .iter()
        .map(|e| (e.name.as_str(), e.outcome, e.run))
        .collect()
}

/// Each pair's aggregate over its own block's solo is the 1.5 planted within its run.
fn check_within_run_ratios(c: &coload_cohort_schema::Comparison) {
    let pairs: Vec<_> = c
        .cohorts
        .iter()
        .filter(|k| k.experiment.starts_with("timeslice"))
        .collect();
    assert_eq!(pairs.len(), 4);
    for k in pairs {
        let ratio = k.groups[&Workload::Train].aggregate_vs_solo.unwrap();
        assert!(
            (ratio - 1.5).abs() < 1e-9,
            "{} (run {:?}): {ratio} where its own run's solos give 1.5",
            k.experiment,
            k.run
        );
    }
    // The repeated shape: one ratio per block, each the within-run 1.5.
    let shape = c
        .repeats
        .iter()
        .find(|g| g.mode == coload_cohort_schema::Mode::Timeslice)
        .unwrap();
    let blocks = &shape.groups[&Workload::Train].vs_solo;
    assert_eq!(
        blocks.iter().map(|b| b.run).collect::<Vec<_>>(),
        [Some(1), Some(2)]
    );
    for b in blocks {
        assert!((b.aggregate_vs_solo.ratio - 1.5).abs() < 1e-9, "{b:?}");
    }
}

#[test]
fn a_resumed_run_divides_by_its_own_runs_solos_on_the_same_card() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("study");
    // Run 1: the opening solo and two rounds, then interrupted.
    let first = run(&out, 1.0, 3);
    assert_eq!(
        runs_of(&first),
        [
            ("exclusive-train1-r1", Outcome::Complete, Some(1)),
            ("timeslice-train2-r1", Outcome::Complete, Some(1)),
            ("timeslice-train2-r2", Outcome::Complete, Some(1)),
            ("timeslice-train2-r3", Outcome::NotRun, None),
            ("timeslice-train2-r4", Outcome::NotRun, None),
            ("exclusive-train1-r2", Outcome::NotRun, None),
        ]
    );
    // Run 2, the same card 12 % faster: the trainer's solo re-run before its first round and
    // after its last, beside the plan's closing solo.
    let second = run(&out, 1.12, u32::MAX);
    assert_eq!(
        runs_of(&second),
        [
            ("exclusive-train1-r1", Outcome::AlreadyComplete, Some(1)),
            ("timeslice-train2-r1", Outcome::AlreadyComplete, Some(1)),
            ("timeslice-train2-r2", Outcome::AlreadyComplete, Some(1)),
            ("exclusive-train1-run2-r1", Outcome::Complete, Some(2)),
            ("timeslice-train2-r3", Outcome::Complete, Some(2)),
            ("timeslice-train2-r4", Outcome::Complete, Some(2)),
            ("exclusive-train1-r2", Outcome::Complete, Some(2)),
            ("exclusive-train1-run2-r2", Outcome::Complete, Some(2)),
        ]
    );
    assert_eq!(second.runs.len(), 2);
    let c = comparison(&out, &second);
    check_within_run_ratios(&c);
    let blocks: Vec<(Option<u32>, usize)> = c
        .baseline_blocks
        .iter()
        .map(|b| (b.run, b.experiments.len()))
        .collect();
    assert_eq!(blocks, [(Some(1), 1), (Some(2), 3)]);
    // The provenance says how many cards and runs the blocks span.
    let provenance = assembled(&out, &second).context.provenance;
    assert!(
        provenance.iter().any(|(k, v)| k == "cards and runs"
            && v == "1 card, 2 runs: each ratio divides by the solos of its own card in its own run"),
        "{provenance:?}"
    );

    // Run 3 finds everything complete: the re-runs stay in the index with their run, and the
    // ratios do not change.
    let third = run(&out, 0.5, u32::MAX);
    assert_eq!(third.runs.len(), 3);
    assert_eq!(third.runs[2].cohorts_run, 0);
    let kept: Vec<_> = runs_of(&third)
        .into_iter()
        .map(|(n, _, r)| (n, r))
        .collect();
    let before: Vec<_> = runs_of(&second)
        .into_iter()
        .map(|(n, _, r)| (n, r))
        .collect();
    assert_eq!(kept, before);
    assert!(
        third
            .cohorts
            .iter()
            .all(|e| e.outcome == Outcome::AlreadyComplete)
    );
    check_within_run_ratios(&comparison(&out, &third));
}

/// A study repeated to a precision and run again with nothing left: the repeats its first run
/// found unnecessary stay so (the repeats that settled their shape are unchanged), and the new
/// run starts nothing, not even its own block's solos.
#[test]
fn repeats_found_unnecessary_stay_so_when_the_study_runs_again() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("study");
    let text = PLAN.replace("repeats = 2\n", "repeats = 3\n");
    let plan = Plan::parse("plan.toml", &text).unwrap();
    let go = || {
        let args = Cli::parse_from([
            "study",
            "plan.toml",
            "--out",
            out.to_str().unwrap(),
            "--no-progress-bar",
            "--precision",
            "0.05",
            "--max-repeats",
            "4",
        ])
        .study;
        let plan = plan.with_precision(0.05, Some(4)).unwrap();
        let stop = AtomicBool::new(false);
        let started = AtomicU32::new(0);
        let target = Target {
            offer: &OneGpu,
            lanes: vec![0],
            cpu: false,
            describe: "one stand-in GPU".into(),
            launcher: StandIn {
                factor: 1.0,
                lane_factor: [1.0, 1.0],
                started,
                stop_after: u32::MAX,
                stop: &stop,
            },
        };
        coload_study::run_with(&args, &plan, target, &QuietConsole, &stop).unwrap();
        let index: Index =
            serde_json::from_slice(&std::fs::read(out.join("index.json")).unwrap()).unwrap();
        index
    };
    let first = go();
    let settled = |i: &Index| -> Vec<String> {
        i.cohorts
            .iter()
            .filter(|e| e.outcome == Outcome::Settled)
            .map(|e| e.name.clone())
            .collect()
    };
    // Identical repeats: the shape is settled after two, its third and fourth not needed.
    assert_eq!(
        settled(&first),
        ["timeslice-train2-r3", "timeslice-train2-r4"]
    );
    let second = go();
    assert_eq!(settled(&second), settled(&first));
    assert_eq!(second.runs.len(), 2);
    assert_eq!(second.runs[1].cohorts_run, 0, "{:?}", runs_of(&second));
    assert_eq!(second.cohorts.len(), first.cohorts.len());
}

/// A study on two lanes: the pairs land on both cards (card 1 runs 20 % faster), and each
/// card runs the trainer's solos of its own, pinned, in the baseline's slots (first and last),
/// so every pair divides by the solos of its own card: the 1.5 planted, never a cross-card
/// ratio or none.
#[test]
fn on_two_lanes_every_ratio_divides_by_its_own_cards_solos() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("study");
    let index = run_on(&out, 1.0, u32::MAX, &TwoGpus, vec![0, 1]);
    let c = comparison(&out, &index);
    let pairs: Vec<_> = c
        .cohorts
        .iter()
        .filter(|k| k.experiment.starts_with("timeslice"))
        .collect();
    assert_eq!(pairs.len(), 4);
    for k in pairs {
        let ratio = k.groups[&Workload::Train].aggregate_vs_solo;
        assert!(
            ratio.is_some_and(|r| (r - 1.5).abs() < 1e-9),
            "{}: {ratio:?} where its own card's solos give 1.5",
            k.experiment
        );
    }
    assert!(
        c.warnings.iter().all(|w| w.kind != "cross_card"),
        "{:?}",
        c.warnings
    );
    // Each lane's solos pinned to it, in the baseline's slots.
    let placed: Vec<(&str, Outcome, Option<&str>)> = index
        .cohorts
        .iter()
        .map(|e| (e.name.as_str(), e.outcome, e.lanes.as_deref()))
        .collect();
    assert_eq!(
        placed,
        [
            ("exclusive-train1-lane0-r1", Outcome::Complete, Some("0")),
            ("exclusive-train1-lane1-r1", Outcome::Complete, Some("1")),
            ("timeslice-train2-r1", Outcome::Complete, Some("0")),
            ("timeslice-train2-r2", Outcome::Complete, Some("1")),
            ("timeslice-train2-r3", Outcome::Complete, Some("0")),
            ("timeslice-train2-r4", Outcome::Complete, Some("1")),
            ("exclusive-train1-lane0-r2", Outcome::Complete, Some("0")),
            ("exclusive-train1-lane1-r2", Outcome::Complete, Some("1")),
        ]
    );
}

/// A study begun on one lane, its solos run under the plan's names, keeps those names when it
/// is resumed on two: its index and its blocks stay as they were (no lane copies).
#[test]
fn a_study_begun_on_one_lane_keeps_its_baselines_names_on_two() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("study");
    run(&out, 1.0, 3);
    let second = run_on(&out, 1.0, u32::MAX, &TwoGpus, vec![0, 1]);
    let names: Vec<&str> = second.cohorts.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "exclusive-train1-r1",
            "timeslice-train2-r1",
            "timeslice-train2-r2",
            "exclusive-train1-run2-r1",
            "timeslice-train2-r3",
            "timeslice-train2-r4",
            "exclusive-train1-r2",
            "exclusive-train1-run2-r2",
        ]
    );
    // A fresh study on two lanes runs the copies.
    let fresh = run_on(
        &tmp.path().join("fresh"),
        1.0,
        u32::MAX,
        &TwoGpus,
        vec![0, 1],
    );
    assert!(
        fresh
            .cohorts
            .iter()
            .any(|e| e.name == "exclusive-train1-lane1-r1")
    );
}
