//! A hog cohort whose other workers run out of memory beside the hog has measured what it is
//! for (memory isolation: not contained). The study counts it complete with the answer in its
//! index entry, keeps its folder where it is, and ends with exit 0, instead of calling the
//! cohort failed and the study incomplete on every run under time-slicing (seen on the H200 in
//! round 4). A cohort that fails otherwise is still a failure.
//!
//! The cohorts are run by a stand-in launcher that writes what bench-cohort leaves: the H200's
//! `isolation.json` and exit 30 for the hog cohort, a `failure.json`-less exit 30 for the other.
//!
//! The same stand-in shows that run and cohort times survive a resume, and that a resumed
//! run's estimate learns the setup time from the cohorts earlier runs timed.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use clap::Parser;
use coload_cohort_schema::study::{Index, Outcome};
use coload_launch::QuietConsole;
use coload_study::{Ended, Job, Launcher, Placement, Plan, Running, Target};

mod support;

use support::{Cli, OneGpu};

struct Done(i32);

impl Running for Done {
    fn poll(&mut self) -> Option<Ended> {
        Some(Ended { code: Some(self.0) })
    }

    fn interrupt(&mut self) {}
}

/// Exit 30 for every cohort; the hog cohort's folder also gets the H200's `isolation.json`.
struct StandIn {
    isolation: PathBuf,
}

impl Launcher for StandIn {
    type Run = Done;

    fn start(&mut self, job: &Job, _at: &Placement, dir: &Path) -> std::io::Result<Done> {
        std::fs::create_dir_all(dir)?;
        if job.holds_a_hog() {
            std::fs::copy(&self.isolation, dir.join("isolation.json"))?;
        }
        Ok(Done(30))
    }
}

/// The stand-in GPU and launcher every study here runs on.
fn target() -> Target<'static, StandIn> {
    Target {
        offer: &OneGpu,
        lanes: vec![0],
        cpu: false,
        describe: "one stand-in GPU".into(),
        launcher: StandIn {
            isolation: Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/data/isolation-not-contained.json"),
        },
    }
}

fn study(out: &Path, plan: &Plan) -> (u8, Index) {
    let args = Cli::parse_from([
        "study",
        "plan.toml",
        "--out",
        out.to_str().unwrap(),
        "--no-progress-bar",
    ])
    .study;
    let code = coload_study::run_with(
        &args,
        plan,
        target(),
        &QuietConsole,
        &AtomicBool::new(false),
    )
    .unwrap();
    let index: Index =
        serde_json::from_slice(&std::fs::read(out.join("index.json")).unwrap()).unwrap();
    (code, index)
}

#[test]
fn others_out_of_memory_beside_a_hog_is_a_measurement_not_a_failure() {
    let tmp = tempfile::tempdir().unwrap();
    let hog_only = Plan::parse(
        "plan.toml",
        "[flags]\nwindow_s = 5\n[[policy]]\nname = \"timeslice\"\nmode = \"timeslice\"\n\
         [[cohort]]\nworkers = \"hog=1,train=6\"\n",
    )
    .unwrap();
    let out = tmp.path().join("hog");
    let (code, index) = study(&out, &hog_only);
    let e = &index.cohorts[0];
    assert_eq!(e.outcome, Outcome::Complete, "{e:?}");
    assert_eq!(code, 0);
    assert!(
        e.isolation.as_deref().is_some_and(
            |a| a == "not contained: the hog got 139.2 GiB; 6 of 6 others ran out of memory"
        ),
        "{e:?}"
    );
    assert!(
        e.experiment
            .as_deref()
            .is_some_and(|x| x.starts_with("timeslice-hog1"))
    );
    assert!(
        out.join("cohorts")
            .join(&e.name)
            .join("isolation.json")
            .is_file()
    );
    // Resumed: complete from the earlier run, nothing run again.
    let (code, index) = study(&out, &hog_only);
    assert_eq!(code, 0);
    assert_eq!(index.cohorts[0].outcome, Outcome::AlreadyComplete);
    assert!(index.cohorts[0].isolation.is_some());

    // A cohort without a hog that exits 30 is a failure, set aside.
    let plain = Plan::parse(
        "plan.toml",
        "[flags]\nwindow_s = 5\n[[policy]]\nname = \"timeslice\"\nmode = \"timeslice\"\n\
         [[cohort]]\nworkers = \"train=7\"\n",
    )
    .unwrap();
    let out = tmp.path().join("plain");
    let (code, index) = study(&out, &plain);
    assert_eq!(index.cohorts[0].outcome, Outcome::Failed);
    assert!(index.cohorts[0].isolation.is_none());
    assert_ne!(code, 0);
}

/// Each run of a study is recorded in its index, and a cohort's times stay with it when a later
/// run finds it complete or failed earlier: the study's wall time and its part inside windows
/// add up across resumed runs, instead of only the last run's cohorts keeping theirs.
#[test]
fn run_and_cohort_times_survive_a_resume() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = Plan::parse(
        "plan.toml",
        "[flags]\nwindow_s = 5\n[[policy]]\nname = \"timeslice\"\nmode = \"timeslice\"\n\
         [[cohort]]\nworkers = \"hog=1,train=6\"\n[[cohort]]\nworkers = \"train=7\"\n",
    )
    .unwrap();
    let out = tmp.path().join("study");
    let (_, first) = study(&out, &plan);
    assert_eq!(first.runs.len(), 1, "{:?}", first.runs);
    assert_eq!(first.runs[0].cohorts_run, 2);
    assert!(first.runs[0].wall_s > 0.0);
    assert!(first.runs[0].coload.starts_with(env!("CARGO_PKG_VERSION")));
    let hog = &first.cohorts[0];
    let failed = &first.cohorts[1];
    assert_eq!(hog.outcome, Outcome::Complete);
    assert_eq!(failed.outcome, Outcome::Failed);
    assert!(hog.duration_s.is_some() && failed.duration_s.is_some());
    // The trainers ran out of memory before their window: no time inside one.
    assert_eq!(hog.in_windows_s, Some(0.0));
    assert_eq!(failed.in_windows_s, None);

    let (_, second) = study(&out, &plan);
    assert_eq!(second.runs.len(), 2);
    assert_eq!(second.runs[0], first.runs[0]);
    assert_eq!(second.runs[1].cohorts_run, 0);
    assert_eq!(second.cohorts[0].outcome, Outcome::AlreadyComplete);
    assert_eq!(second.cohorts[1].outcome, Outcome::FailedEarlier);
    for (now, then) in second.cohorts.iter().zip(&first.cohorts) {
        assert_eq!(now.duration_s, then.duration_s, "{}", now.name);
        assert_eq!(now.in_windows_s, then.in_windows_s, "{}", now.name);
        assert_eq!(now.lanes, then.lanes, "{}", now.name);
    }
    assert!((second.wall_s() - first.runs[0].wall_s - second.runs[1].wall_s).abs() < 1e-9);

    // An index that does not read is not fatal: the cohorts are found from their folders, and
    // only the times it held are lost.
    std::fs::write(out.join("index.json"), "{ not json").unwrap();
    let (_, third) = study(&out, &plan);
    assert_eq!(third.runs.len(), 1);
    assert_eq!(third.cohorts[0].outcome, Outcome::AlreadyComplete);
    assert_eq!(third.cohorts[0].duration_s, None);
}

/// A console that keeps what a study prints as its result (the dry run's table).
#[derive(Default)]
struct Recording(std::sync::Mutex<String>);

impl coload_launch::Console for Recording {
    fn progress(&self, _line: &str) {}

    fn output(&self, text: &str) {
        self.0.lock().unwrap().push_str(text);
    }
}

fn dry_run(out: &Path, plan: &Plan) -> String {
    let args = Cli::parse_from([
        "study",
        "plan.toml",
        "--out",
        out.to_str().unwrap(),
        "--no-progress-bar",
        "--dry-run",
    ])
    .study;
    let console = Recording::default();
    coload_study::run_with(&args, plan, target(), &console, &AtomicBool::new(false)).unwrap();
    console.0.into_inner().unwrap()
}

/// A resumed slice plans its first cohorts with the setup its node took, not the model alone:
/// the cohort an earlier run timed (60 s for a 10 s window, 5 s lead: 45 s of setup, where the
/// model gives seven workers 5.1 s) corrects it by the difference.
#[test]
fn a_resumed_dry_run_estimates_with_the_setup_earlier_runs_measured() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = Plan::parse(
        "plan.toml",
        "[flags]\nwindow_s = 10\n[[policy]]\nname = \"timeslice\"\nmode = \"timeslice\"\n\
         [[cohort]]\nworkers = \"hog=1,train=6\"\n[[cohort]]\nworkers = \"train=7\"\n",
    )
    .unwrap();
    let out = tmp.path().join("study");
    let fresh = dry_run(&out, &plan);
    assert!(
        fresh.contains("on 1 lane(s) with windows of 10 s (")
            && fresh.contains("setup outside each window: 3 s a cohort")
            && fresh.contains("no cohort of this node measured yet"),
        "{fresh}"
    );
    // The hog cohort completes (its isolation.json answers); give it the times a GPU run records.
    let (_, mut first) = study(&out, &plan);
    assert_eq!(first.cohorts[0].outcome, Outcome::Complete);
    first.cohorts[0].duration_s = Some(60.0);
    first.cohorts[0].in_windows_s = Some(10.0);
    std::fs::write(
        out.join("index.json"),
        serde_json::to_vec_pretty(&first).unwrap(),
    )
    .unwrap();
    let resumed = dry_run(&out, &plan);
    assert!(
        resumed.contains("corrected by +39.9 s a cohort, as 1 cohort of earlier runs took it"),
        "{resumed}"
    );
}

/// Repeats asked to a precision may stop after the second: the dry run gives the time with
/// every such shape settled that early and the time with every repeat run, the fewest first.
#[test]
fn a_dry_run_to_a_precision_gives_the_fewest_and_the_most_time() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = Plan::parse(
        "plan.toml",
        "[flags]\nwindow_s = 10\n[[policy]]\nname = \"exclusive\"\nmode = \"exclusive\"\n\
         [[policy]]\nname = \"timeslice\"\nmode = \"timeslice\"\n\
         [[cohort]]\nworkers = \"train=1\"\npolicies = [\"exclusive\"]\nbaseline = true\n\
         repeats = 3\n[[cohort]]\nworkers = \"train=7\"\npolicies = [\"timeslice\"]\n\
         repeats = 6\n",
    )
    .unwrap();
    let fixed = dry_run(&tmp.path().join("a"), &plan);
    assert!(
        !fixed.contains("settles after its second repeat"),
        "{fixed}"
    );
    let precise = dry_run(
        &tmp.path().join("b"),
        &plan.with_precision(0.05, Some(6)).unwrap(),
    );
    let seconds = |text: &str, after: &str| -> f64 {
        let rest = &text[text.find(after).unwrap() + after.len()..];
        let open = rest.find('(').unwrap();
        let close = rest.find(" s)").unwrap();
        rest[open + 1..close].parse().unwrap()
    };
    let (fewest, most) = (
        seconds(&precise, "expected about "),
        seconds(&precise, "settles after its second repeat, at most "),
    );
    // Five cohorts at the fewest (three solos, two repeats), nine at the most (three solos, six
    // repeats): the most is the fixed plan's whole queue.
    assert!(fewest < most, "{precise}");
    assert!(
        (most - seconds(&fixed, "expected about ")).abs() < 1.0,
        "{precise}\n{fixed}"
    );
}
