//! The binary over the real H200 captures of `fixtures/h200`: a real cohort is
//! summarized with the rates recorded at capture time, and a real failed cohort is refused.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use coload_cohort_schema::{CohortSummary, exit};

fn h200() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/h200")
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bench-summarize"))
        .args(args)
        .current_dir(h200())
        .output()
        .expect("runs bench-summarize")
}

#[test]
fn real_mps_cohort_is_summarized_as_at_capture() {
    let o = run(&["mps-train4", "--format", "json"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let s: CohortSummary = serde_json::from_slice(&o.stdout).expect("a summary on stdout");
    let at_capture: CohortSummary = serde_json::from_slice(
        &std::fs::read(h200().join("mps-train4/expected-summary.json")).unwrap(),
    )
    .expect("expected-summary.json is a summary");
    assert_eq!(s.experiment, "mps-train4-20261130T025623-7487ba67");
    assert_eq!(s.workers.len(), 4);
    for (w, e) in s.workers.iter().zip(&at_capture.workers) {
        assert!(
            (w.samples_per_s - e.samples_per_s).abs() <= 0.01,
            "replica {}: {} vs {} at capture",
            w.replica,
            w.samples_per_s,
            e.samples_per_s
        );
    }
}

#[test]
fn real_failed_cohort_exits_30_naming_worker_json() {
    // Seven MPS workers fell back to the CPU and were killed by the launcher's timeout during
    // warmup: each left a log and no worker.json.
    let o = run(&["failed-cpu-fallback"]);
    assert_eq!(o.status.code(), Some(i32::from(exit::INCOMPLETE_COHORT)));
    assert_eq!(exit::INCOMPLETE_COHORT, 30);
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(err.starts_with("error: the cohort is incomplete"), "{err}");
    assert!(err.contains("(7 problems)"), "{err}");
    for replica in 0..7 {
        assert!(
            err.contains(&format!(
                "failed-cpu-fallback/worker-{replica}: no worker.json"
            )),
            "{err}"
        );
    }
    assert!(o.stdout.is_empty());
}
