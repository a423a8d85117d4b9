//! The binary end to end over the fixtures: exit codes, files written, output formats.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use coload_cohort_schema::{CohortSummary, Comparison, exit};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bench-summarize"))
        .args(args)
        .current_dir(fixtures())
        .output()
        .expect("runs bench-summarize")
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exited")
}

#[test]
fn summarizes_to_file_and_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("summary.json");
    let o = run(&["homogeneous-4-train", "--out", out.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
    let s: CohortSummary = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(s.experiment, "homog-4");
    let table = String::from_utf8(o.stdout).unwrap();
    assert!(
        table.starts_with("experiment homog-4 · mode timeslice"),
        "{table}"
    );

    let o = run(&["summarize", "homogeneous-4-train", "--format", "json"]);
    let printed: CohortSummary = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(printed, s);
    let o = run(&["homogeneous-4-train", "--format", "markdown"]);
    assert!(
        String::from_utf8(o.stdout)
            .unwrap()
            .starts_with("# Cohort `homog-4`")
    );
}

#[test]
fn exit_codes_name_the_failure() {
    let o = run(&["invalid/failed-worker"]);
    assert_eq!(code(&o), i32::from(exit::INCOMPLETE_COHORT));
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(err.starts_with("error: the cohort is incomplete"), "{err}");
    assert!(err.contains("invalid/failed-worker/worker-1: replica 1 failed at stage window"));
    assert!(o.stdout.is_empty());

    assert_eq!(
        code(&run(&["invalid/bad-line"])),
        i32::from(exit::INVALID_INPUT)
    );
    assert_eq!(
        code(&run(&["no-such-folder"])),
        i32::from(exit::INVALID_INPUT)
    );
    assert_eq!(code(&run(&[])), i32::from(exit::INVALID_INPUT));
    assert_eq!(code(&run(&["placement-mismatch"])), 0);
    assert_eq!(
        code(&run(&["placement-mismatch", "--strict"])),
        i32::from(exit::ALLOCATION_MISMATCH)
    );
}

#[test]
fn refused_cohort_writes_no_summary() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("summary.json");
    let o = run(&["invalid/low-overlap", "--out", out.to_str().unwrap()]);
    assert_eq!(code(&o), i32::from(exit::INCOMPLETE_COHORT));
    assert!(!out.exists());
}

#[test]
fn compare_writes_json_markdown_and_a_self_contained_page() {
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("a.json");
    assert_eq!(
        code(&run(&["repeat-a", "--out", summary.to_str().unwrap()])),
        0
    );
    let report = dir.path().join("report");
    let o = run(&[
        "compare",
        summary.to_str().unwrap(),
        "repeat-b",
        "repeat-c",
        "mixed-1infer-6train",
        "--baseline",
        "solo-train",
        "solo-infer",
        "--out",
        report.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
    let c: Comparison =
        serde_json::from_slice(&std::fs::read(report.join("comparison.json")).unwrap()).unwrap();
    assert_eq!(c.cohorts.len(), 4);
    assert_eq!(
        c.repeats[0].experiments,
        ["repeat-a", "repeat-b", "repeat-c"]
    );
    let md = std::fs::read_to_string(report.join("comparison.md")).unwrap();
    assert_eq!(md, String::from_utf8(o.stdout).unwrap());
    let html = std::fs::read_to_string(report.join("report.html")).unwrap();
    // The verdict's two charts (per worker against solo, aggregate against worker count),
    // then one latency-by-percentile plot per cohort, each folded under <details>.
    assert_eq!(html.matches("<svg").count(), 2 + 4);
    assert_eq!(html.matches("<details>").count(), 4 + c.repeats.len());
    let verdict = html.find(">Verdict</h2>").unwrap();
    assert!(verdict < html.find("<svg").unwrap());
    assert!(html.find("<svg").unwrap() < html.find("<details>").unwrap());
    // Nothing loaded from elsewhere: no scripts, stylesheets, images or links by URL.
    for needle in ["src=", "<script", "<link", "@import", "url("] {
        assert!(!html.contains(needle), "report.html contains {needle}");
    }
    // Links only within the page (the table of contents' anchors).
    assert_eq!(
        html.matches("href=").count(),
        html.matches("href=\"#").count(),
        "a link out of the page"
    );
}

#[test]
fn no_libtorch_in_the_dependency_tree() {
    // bench-summarize runs on laptops without libtorch: `cargo tree` must show no tch.
    let o = Command::new(env!("CARGO"))
        .args([
            "tree",
            "-p",
            "bench-summarize",
            "-e",
            "normal,build",
            "--prefix",
            "none",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("runs cargo tree");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let tree = String::from_utf8(o.stdout).unwrap();
    assert!(tree.contains("coload-analysis"), "{tree}");
    let tch: Vec<&str> = tree
        .lines()
        .filter(|l| l.starts_with("tch ") || l.starts_with("torch-sys "))
        .collect();
    assert!(tch.is_empty(), "{tch:?}");
}

/// One isolation result per hog cohort, failed cohorts included, side by side; a
/// cohort without a hog is refused with the reason.
#[test]
fn isolation_reads_hog_cohorts_whatever_their_status() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("isolation.json");
    let o = run(&[
        "isolation",
        "hog-timeslice",
        "hog-mps",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
    let results: Vec<coload_cohort_schema::IsolationResult> =
        serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let outcomes: Vec<&str> = results.iter().map(|r| r.outcome.as_str()).collect();
    assert_eq!(outcomes, ["not_contained", "contained"]);
    let table = String::from_utf8(o.stdout).unwrap();
    assert!(table.starts_with("cohort "), "{table}");
    assert!(table.contains("hog-timeslice  timeslice"), "{table}");
    // The written file reads back as an input.
    let single = dir.path().join("one.json");
    std::fs::write(&single, serde_json::to_vec(&results[1]).unwrap()).unwrap();
    let o = run(&[
        "isolation",
        single.to_str().unwrap(),
        "--format",
        "markdown",
    ]);
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        String::from_utf8(o.stdout)
            .unwrap()
            .starts_with("# Memory isolation")
    );

    let o = run(&["isolation", "solo-train"]);
    assert_eq!(code(&o), i32::from(exit::INVALID_INPUT));
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(err.contains("no hog worker in this cohort"), "{err}");
}
