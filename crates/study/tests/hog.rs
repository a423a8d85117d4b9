//! A hog cohort whose other workers run out of memory beside the hog has measured what it is
//! for (memory isolation: not contained). The study counts it complete with the answer in its
//! index entry, keeps its folder where it is, and ends with exit 0, instead of calling the
//! cohort failed and the study incomplete on every run under time-slicing (seen on the H200 in
//! round 4). A cohort that fails otherwise is still a failure.
//!
//! The cohorts are run by a stand-in launcher that writes what bench-cohort leaves: the H200's
//! `isolation.json` and exit 30 for the hog cohort, a `failure.json`-less exit 30 for the other.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use clap::Parser;
use coload_cohort_schema::study::{Index, Outcome};
use coload_launch::QuietConsole;
use coload_study::{Ended, Job, Launcher, Offer, Placement, Plan, Running, StudyArgs, Target};

#[derive(Debug, Parser)]
struct Cli {
    #[command(flatten)]
    study: StudyArgs,
}

/// One GPU that takes every cohort.
struct OneGpu;

impl Offer for OneGpu {
    fn is_cpu(&self) -> bool {
        false
    }

    fn place(&self, _job: &Job, free: &[u32]) -> Result<Placement, String> {
        if !free.contains(&0) {
            return Err("busy".into());
        }
        Ok(Placement {
            gpus: vec![0],
            visible: Some("0".into()),
            per_worker: Vec::new(),
            host_exclusive: false,
            mig_profile: None,
        })
    }
}

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

fn study(out: &Path, plan: &Plan) -> (u8, Index) {
    let args = Cli::parse_from([
        "study",
        "plan.toml",
        "--out",
        out.to_str().unwrap(),
        "--no-progress-bar",
    ])
    .study;
    let target = Target {
        offer: &OneGpu,
        lanes: vec![0],
        cpu: false,
        describe: "one stand-in GPU".into(),
        launcher: StandIn {
            isolation: Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/data/isolation-not-contained.json"),
        },
    };
    let code = coload_study::run_with(&args, plan, target, &QuietConsole, &AtomicBool::new(false))
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
