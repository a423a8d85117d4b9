//! bench-cohort with a serve worker on the CPU: a cohort beside a trainer, the capacity search,
//! and the serve flags it refuses.

use std::path::Path;
use std::process::{Command, Output};

use coload_cohort_schema::{CapacityReport, CohortSummary, Workload, exit, read_document};

mod common;

use common::{COHORT, worker_bin};

fn cohort(out: &Path, extra: &[&str]) -> Output {
    Command::new(COHORT)
        .args(["--mode", "timeslice", "--device", "cpu"])
        .args(["--batch-size", "2", "--image-size", "32", "--window-s", "2"])
        .args([
            "--warmup-batches",
            "1",
            "--start-lead-s",
            "2",
            "--join-timeout-s",
            "120",
        ])
        .arg("--worker-bin")
        .arg(worker_bin())
        .arg("--out")
        .arg(out)
        .args(extra)
        .env("OMP_NUM_THREADS", "1")
        .output()
        .unwrap()
}

#[test]
fn a_serve_worker_beside_a_trainer_is_summarized_with_its_slo() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let o = cohort(
        &out,
        &[
            "--workers",
            "serve=1,train=1",
            "--rate",
            "30",
            "--max-batch",
            "8",
            "--slo-ms",
            "1000",
        ],
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(table.contains("requests (serve workers)"), "{table}");
    let summary: CohortSummary = read_document(&out.join("summary.json")).unwrap();
    assert!(summary.experiment.starts_with("timeslice-serve1-train1-"));
    assert_eq!(summary.workers[0].workload, Workload::Serve);
    let serve = summary.workers[0].serve.as_ref().unwrap();
    assert!(serve.requests >= 40, "{}", serve.requests);
    assert!((serve.slo.unwrap().slo_ms - 1000.0).abs() < 1e-9);
    assert!(out.join("worker-0/requests.jsonl").exists());
    let log = std::fs::read_to_string(out.join("worker-0/log")).unwrap();
    assert!(
        log.contains("--max-batch") || log.contains("max batch 8"),
        "{log}"
    );
}

#[test]
fn the_capacity_search_probes_fresh_cohorts_and_keeps_every_probe() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("capacity");
    // A lenient objective (the median within 1 s) that a tiny CPU model meets at 15 and 30
    // requests/s on an idle machine: bracketing doubles to the maximum rate and stops there. On
    // a loaded CI host it may miss at 15 and bisect downwards instead; either way the search's
    // bookkeeping must hold, which is what this test checks.
    let o = cohort(
        &out,
        &[
            "--workers",
            "serve=1,train=1",
            "--find-capacity",
            "--slo-ms",
            "1000",
            "--slo-quantile",
            "0.5",
            "--rate",
            "15",
            "--rate-max",
            "30",
            "--max-probes",
            "3",
        ],
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let report: CapacityReport = read_document(&out.join("capacity.json")).unwrap();
    assert!(
        (2..=3).contains(&report.probes.len()),
        "a bracket needs two probes and the limit is three: {report:?}"
    );
    let rates: Vec<f64> = report.probes.iter().map(|p| p.rate_per_s).collect();
    assert!(
        (rates[0] - 15.0).abs() < 1e-9,
        "the search starts at --rate: {rates:?}"
    );
    assert!(rates.iter().all(|r| (1.0..=30.0).contains(r)), "{rates:?}");
    // Every probe is a fresh, complete cohort with its verdict kept.
    let mut experiments: Vec<&str> = report
        .probes
        .iter()
        .map(|p| p.experiment.as_str())
        .collect();
    experiments.dedup();
    assert_eq!(experiments.len(), report.probes.len());
    for p in &report.probes {
        assert!(p.passed.is_some(), "{p:?}");
        assert!(Path::new(&p.dir).join("summary.json").exists());
        assert!(p.serve[0].offered_per_s > 0.0);
    }
    // The answer follows from the probes: the highest rate that passed, the lowest that failed.
    let passed = |ok: bool| report.probes.iter().filter(move |p| p.passed == Some(ok));
    let best = passed(true)
        .map(|p| p.rate_per_s)
        .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.max(r))));
    assert_eq!(report.capacity_per_s, best, "{report:?}");
    let worst = passed(false)
        .map(|p| p.rate_per_s)
        .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.min(r))));
    assert_eq!(report.failed_above_per_s, worst, "{report:?}");
    if worst.is_none() {
        assert_eq!(report.stop, coload_cohort_schema::StopReason::MaxRatePasses);
        assert_eq!(rates, [15.0, 30.0]);
    }
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("capacity at p50 <= 1000 ms"), "{text}");
}

#[test]
fn serve_flags_are_checked_against_the_mix() {
    let dir = tempfile::tempdir().unwrap();
    for (extra, needle) in [
        (
            vec!["--workers", "train=1", "--slo-ms", "10"],
            "--slo-ms needs a serve worker in the cohort",
        ),
        (
            vec!["--workers", "train=1", "--rate", "10"],
            "--rate needs a serve or serve-llm worker",
        ),
        (vec!["--workers", "serve=1"], "give --rate R"),
        (
            vec![
                "--workers",
                "serve=1",
                "--find-capacity",
                "--slo-ms",
                "10",
                "--rate-min",
                "50",
                "--rate",
                "10",
            ],
            "--rate-min <= --rate <= --rate-max",
        ),
    ] {
        let o = cohort(&dir.path().join("x"), &extra);
        assert_eq!(
            o.status.code(),
            Some(i32::from(exit::INVALID_INPUT)),
            "{extra:?}"
        );
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(stderr.contains(needle), "{extra:?}: {stderr}");
    }
}
