//! The synthetic cohorts of `fixtures/` against the answers in `fixtures/README.md`, computed by
//! hand here; insta snapshots pin the JSON, table and Markdown renderings.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use coload_analysis::interval::CutSide;
use coload_analysis::{
    AnalysisError, CohortProblem, Options, compare, isolation_dirs, summarize_dirs,
};
use coload_cohort_schema::{
    CohortSummary, FailureKind, HogStop, IsolationOutcome, Stage, Status, Workload, exit,
};
use coload_report::{
    render_comparison_markdown, render_isolation_markdown, render_markdown, render_table,
};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

fn summarize(name: &str) -> Result<CohortSummary, AnalysisError> {
    summarize_dirs(&[fixtures().join(name)], &Options::default())
}

fn ok(name: &str) -> CohortSummary {
    summarize(name).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The error message with the fixtures folder's absolute path removed, for stable snapshots.
fn err(name: &str) -> (u8, String) {
    let e = summarize(name).expect_err(name);
    let root = format!("{}/", fixtures().display());
    (e.exit_code(), e.to_string().replace(&root, ""))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

macro_rules! assert_close {
    ($a:expr, $b:expr) => {{
        let (a, b): (f64, f64) = ($a, $b);
        assert!(close(a, b), "{} = {a}, expected {b}", stringify!($a));
    }};
}

#[test]
fn solo_train_by_hand() {
    let s = ok("solo-train");
    assert_eq!((s.count, s.workers.len()), (1, 1));
    let w = &s.workers[0];
    // Ten batches of 100, 200, ..., 1000 ms, 32 samples each, in a 10 s window.
    assert_eq!((w.batches, w.samples, w.batches_recorded), (10, 320, 10));
    assert_close!(s.common_interval.seconds, 10.0);
    assert_close!(w.samples_per_s, 32.0);
    assert_close!(w.overlap_fraction, 1.0);
    let l = w.latency_ms;
    // Nearest rank: p50 -> 5th, p90 -> 9th, p99 -> ceil(9.9) = 10th, p99.9 -> 10th.
    assert_close!(l.p50, 500.0);
    assert_close!(l.p90, 900.0);
    assert_close!(l.p99, 1000.0);
    assert_close!(l.p999, 1000.0);
    assert_close!(l.mean, 550.0);
    // Deviations of +-50, 150, 250, 350, 450 ms, twice each: 825000 ms^2 over 9.
    assert_close!(l.stddev, (825_000.0f64 / 9.0).sqrt());
    assert_close!(l.min, 100.0);
    assert_close!(l.max, 1000.0);
    assert_eq!(w.latency_cdf_ms.len(), 101);
    let g = &s.groups[&Workload::Train];
    assert_close!(g.jain_fairness, 1.0);
    assert_eq!(s.colocation.fits_mode, Some(true));
    // p99 and p99.9 need 100 and 1000 batches; p90 needs 10, which there are.
    assert_eq!(s.warnings.len(), 1);
    assert!(
        s.warnings[0]
            .message
            .contains("p99 needs 100, p99.9 needs 1000")
    );
    assert!(!s.warnings[0].message.contains("p90"));
}

#[test]
fn solo_infer_by_hand() {
    let s = ok("solo-infer");
    let w = &s.workers[0];
    // 200 pairs of 20 ms + 30 ms fill the 10 s window exactly.
    assert_eq!((w.batches, w.samples), (400, 12_800));
    assert_close!(w.samples_per_s, 1280.0);
    // Ranks 200, 360, 396, 400 of 200 x 20 ms then 200 x 30 ms.
    let l = w.latency_ms;
    assert_close!(l.p50, 20.0);
    assert_close!(l.p90, 30.0);
    assert_close!(l.p99, 30.0);
    assert_close!(l.p999, 30.0);
    assert_close!(l.mean, 25.0);
    assert_close!(l.stddev, (400.0f64 * 25.0 / 399.0).sqrt());
}

#[test]
fn homogeneous_four_by_hand() {
    let s = ok("homogeneous-4-train");
    // Replica r starts 100 r ms late with batches of 400 + 100 r ms: the common interval is
    // [300 ms, 10 s], 9.7 s.
    assert_close!(s.common_interval.seconds, 9.7);
    assert_eq!(
        s.common_interval.end_unix_ns - s.common_interval.start_unix_ns,
        9_700_000_000
    );
    let kept: Vec<u64> = s.workers.iter().map(|w| w.batches).collect();
    let recorded: Vec<u64> = s.workers.iter().map(|w| w.batches_recorded).collect();
    // Replica 0's first batch [0, 400 ms] starts before 300 ms; so do replica 1's [100, 600]
    // and replica 2's [200, 800]; replica 3 starts at 300 ms exactly.
    assert_eq!(recorded, [25, 19, 16, 13]);
    assert_eq!(kept, [24, 18, 15, 13]);
    for (w, k) in s.workers.iter().zip(&kept) {
        assert_close!(w.samples_per_s, (*k * 32) as f64 / 9.7);
    }
    let overlaps: Vec<f64> = s.workers.iter().map(|w| w.overlap_fraction).collect();
    for (o, own) in overlaps.iter().zip([10.0, 9.9, 9.8, 9.7]) {
        assert_close!(*o, 9.7 / own);
    }
    let g = &s.groups[&Workload::Train];
    assert_close!(g.aggregate_samples_per_s, 2240.0 / 9.7);
    // (24 + 18 + 15 + 13)^2 / (4 (24^2 + 18^2 + 15^2 + 13^2)) = 4900 / 5176.
    assert_close!(g.jain_fairness, 4900.0 / 5176.0);
    assert_close!(g.per_worker_samples_per_s.min, 416.0 / 9.7);
    assert_close!(g.per_worker_samples_per_s.max, 768.0 / 9.7);
    // Pooled: 24 x 400, 18 x 500, 15 x 600, 13 x 700 ms (70 values); ranks 35, 63, 70, 70.
    assert_close!(g.latency_ms.p50, 500.0);
    assert_close!(g.latency_ms.p90, 700.0);
    assert_close!(g.latency_ms.p99, 700.0);
    assert_close!(
        g.latency_ms.mean,
        (24.0 * 400.0 + 18.0 * 500.0 + 15.0 * 600.0 + 13.0 * 700.0) / 70.0
    );
    // Four 3 GiB peaks on one 80 GiB GPU.
    let d = &s.colocation.devices[0];
    assert_eq!(d.replicas, [0, 1, 2, 3]);
    assert_eq!(d.peak_sum_bytes, Some(12 << 30));
    assert_eq!(d.headroom_bytes, Some(68 << 30));
}

#[test]
fn mixed_never_adds_training_and_inference() {
    let s = ok("mixed-1infer-6train");
    assert_eq!(s.workload_mix[&Workload::Infer], 1);
    assert_eq!(s.workload_mix[&Workload::Train], 6);
    let infer = &s.groups[&Workload::Infer];
    let train = &s.groups[&Workload::Train];
    assert_eq!((infer.workers, train.workers), (1, 6));
    // Inference: 100 pairs of 40 + 60 ms, 6400 samples in 10 s.
    assert_close!(infer.aggregate_samples_per_s, 640.0);
    assert_close!(infer.latency_ms.p50, 40.0);
    assert_close!(infer.latency_ms.p90, 60.0);
    assert_close!(infer.latency_ms.stddev, (200.0f64 * 100.0 / 199.0).sqrt());
    // Training: batches of 420 .. 520 ms give 23, 22, 21, 20, 20, 19 batches of 32 samples.
    let counts = [23.0, 22.0, 21.0, 20.0, 20.0, 19.0];
    for (w, n) in s.workers[1..].iter().zip(counts) {
        assert_close!(w.samples_per_s, n * 3.2);
    }
    assert_close!(train.aggregate_samples_per_s, 400.0);
    assert_close!(train.per_worker_samples_per_s.mean, 400.0 / 6.0);
    // 125^2 / (6 (23^2 + 22^2 + 21^2 + 20^2 + 20^2 + 19^2)) = 15625 / 15690.
    assert_close!(train.jain_fairness, 15_625.0 / 15_690.0);
    // One GPU holds 1 + 6 x 2 GiB of peaks.
    assert_eq!(s.colocation.devices[0].peak_sum_bytes, Some(13 << 30));
    assert_eq!(s.caveats.len(), 3);
}

#[test]
fn every_invalid_cohort_is_refused_with_its_reason() {
    let cases = [
        (
            "invalid/missing-report",
            exit::INCOMPLETE_COHORT,
            "worker-1: no worker.json",
        ),
        (
            "invalid/schema-version",
            exit::INVALID_INPUT,
            "schema_version 99 is not supported",
        ),
        (
            "invalid/experiment-differs",
            exit::INCOMPLETE_COHORT,
            "`other` (invalid/experiment-differs/worker-1)",
        ),
        (
            "invalid/replicas",
            exit::INCOMPLETE_COHORT,
            "missing 1, 2; replica 0 appears in",
        ),
        (
            "invalid/config-differs",
            exit::INCOMPLETE_COHORT,
            "batch_size 64 != 32",
        ),
        (
            "invalid/failed-worker",
            exit::INCOMPLETE_COHORT,
            "failed at stage window (out_of_memory): CUDA out of memory",
        ),
        (
            "invalid/low-overlap",
            exit::INCOMPLETE_COHORT,
            "replica 0 0.700, replica 1 1.000",
        ),
        (
            "invalid/late-no-batches",
            exit::INCOMPLETE_COHORT,
            "cut short by replica 1 (invalid/late-no-batches/worker-1): late by 2.200 s",
        ),
        (
            "invalid/no-batches",
            exit::INCOMPLETE_COHORT,
            "replica 0 has no batch entirely inside",
        ),
        (
            "invalid/bad-line",
            exit::INVALID_INPUT,
            "worker-1/batches.jsonl:3: invalid type",
        ),
        (
            "invalid/truncated-batches",
            exit::INCOMPLETE_COHORT,
            "has 15 records but worker.json says window.batches = 20",
        ),
    ];
    for (name, code, text) in cases {
        let (c, msg) = err(name);
        assert_eq!(c, code, "{name}: {msg}");
        assert!(msg.contains(text), "{name}: {msg}");
    }
}

/// Replica 1 was paused until 2.2 s after the start and timed nothing; replica 0 was on
/// time. The refusal must name replica 1 as the worker that cut the common interval short, with
/// its lateness and its batch count, not replica 0 (whose overlap is the one below 0.80).
#[test]
fn low_overlap_names_the_late_replica_not_its_victim() {
    let (code, msg) = err("invalid/late-no-batches");
    assert_eq!(code, exit::INCOMPLETE_COHORT, "{msg}");
    assert!(
        msg.contains(
            "cut short by replica 1 (invalid/late-no-batches/worker-1): \
             late by 2.200 s"
        ),
        "{msg}"
    );
    assert!(msg.contains("0 batches in its window"), "{msg}");
    // The typed problem carries the same facts.
    let e = summarize("invalid/late-no-batches").unwrap_err();
    let [CohortProblem::LowOverlap { cuts, .. }] = e.problems() else {
        panic!("not one LowOverlap: {e}");
    };
    let [cut] = cuts.as_slice() else {
        panic!("not one cut: {cuts:?}")
    };
    assert_eq!(
        (cut.replica, cut.side, cut.against_replica),
        (1, CutSide::LateStart, 0)
    );
    assert_eq!(cut.by_ns, 2_200_000_000);
    assert_eq!(cut.lateness_ns, Some(2_200_000_000));
    assert_eq!(cut.batches, 0);
}

/// Windows that share no time (clocks that disagree by more than a window) are refused naming
/// both ends: the worker that started last and the one that ended first.
#[test]
fn disjoint_windows_name_the_late_start_and_the_early_end() {
    let dir = tempfile::tempdir().unwrap();
    for r in 0..2 {
        let from = fixtures().join(format!("invalid/low-overlap/worker-{r}"));
        let to = dir.path().join(format!("worker-{r}"));
        std::fs::create_dir(&to).unwrap();
        for f in ["worker.json", "batches.jsonl"] {
            std::fs::copy(from.join(f), to.join(f)).unwrap();
        }
    }
    // Replica 1's clock runs 20 s ahead: its window lies after replica 0's, without lateness.
    let path = dir.path().join("worker-1/worker.json");
    let mut report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for field in ["start_unix_ns", "end_unix_ns"] {
        let v = report["window"][field].as_u64().unwrap();
        report["window"][field] = serde_json::json!(v + 20_000_000_000);
    }
    report["barrier"] = serde_json::Value::Null;
    std::fs::write(&path, report.to_string()).unwrap();
    // The batch records are checked only after the overlap rule, which refuses first.
    let e = summarize_dirs(&[dir.path().to_owned()], &Options::default()).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("the windows share no time"), "{msg}");
    assert!(
        msg.contains("replica 1 (") && msg.contains("late by 23.000 s against replica 0's start"),
        "{msg}"
    );
    assert!(
        msg.contains("replica 0 (") && msg.contains("ended early by 20.000 s"),
        "{msg}"
    );
    assert!(msg.contains("replica 0 0.000, replica 1 0.000"), "{msg}");
    let [
        CohortProblem::LowOverlap {
            common_interval_ns,
            cuts,
            ..
        },
    ] = e.problems()
    else {
        panic!("not one LowOverlap: {e}");
    };
    assert_eq!(*common_interval_ns, None);
    let sides: Vec<(u32, CutSide)> = cuts.iter().map(|c| (c.replica, c.side)).collect();
    assert_eq!(sides, [(1, CutSide::LateStart), (0, CutSide::EarlyEnd)]);
}

#[test]
fn invalid_messages_snapshot() {
    let mut all = String::new();
    let mut names: Vec<String> = std::fs::read_dir(fixtures().join("invalid"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    for n in names {
        let (code, msg) = err(&format!("invalid/{n}"));
        writeln!(all, "## {n} (exit {code})\n{msg}\n").unwrap();
    }
    insta::assert_snapshot!(all);
}

#[test]
fn placement_mismatch_warns_or_refuses() {
    let s = ok("placement-mismatch");
    assert_eq!(s.colocation.fits_mode, Some(false));
    assert_eq!(s.warnings[0].kind, "placement_mismatch");
    let strict = Options {
        strict: true,
        ..Options::default()
    };
    let e = summarize_dirs(&[fixtures().join("placement-mismatch")], &strict).unwrap_err();
    assert_eq!(e.exit_code(), exit::ALLOCATION_MISMATCH);
}

/// "Seven real cards" is one worker per physical GPU; an exclusive cohort whose
/// workers shared a GPU is refused whatever the strictness, naming the GPU and the replicas.
#[test]
fn exclusive_needs_a_gpu_per_worker_and_sharing_one_is_refused() {
    let s = ok("exclusive-2gpu");
    assert_eq!(s.colocation.fits_mode, Some(true));
    assert_eq!(s.colocation.physical_gpus.len(), 2);
    let (code, msg) = err("exclusive-shared");
    assert_eq!(code, exit::ALLOCATION_MISMATCH);
    assert_eq!(
        msg,
        "mode exclusive declares one GPU per worker, but workers shared a physical GPU (mode \
         exclusive expects one physical GPU per worker, no MIG; seen 2 workers on 1 physical GPU \
         (GPU-44444440-two: replicas 0, 1), no MIG instance); the cohort is no baseline and was \
         not summarized: give each worker its own GPU (bench-cohort --visible-devices 0,1,...)"
    );
}

/// Under plugin-style MPS the hog stops at its share and the trainers run. The hog is
/// summarized (its hold intervals, 0 samples) but in no group, and the share is shown.
#[test]
fn a_contained_hog_is_summarized_apart_from_the_groups() {
    let s = ok("hog-mps");
    assert_eq!(s.workload_mix[&Workload::Hog], 1);
    assert_eq!(
        s.groups.keys().copied().collect::<Vec<_>>(),
        [Workload::Train],
        "a hog is in no group"
    );
    assert_eq!(s.groups[&Workload::Train].workers, 2);
    let hog = &s.workers[0];
    assert_eq!(
        (hog.workload, hog.samples, hog.batches),
        (Workload::Hog, 0, 10)
    );
    assert_eq!(hog.hog.as_ref().unwrap().granted_bytes, 20480 << 20);
    assert!(
        s.warnings
            .iter()
            .all(|w| w.kind != "few_batches" || !w.message.starts_with("replica 0")),
        "{:?}",
        s.warnings
    );
    let share = s.share.unwrap();
    assert_eq!(share.active_thread_percentage, Some(14));
    assert_eq!(
        s.workers[1]
            .share
            .as_ref()
            .unwrap()
            .observed
            .unwrap()
            .sm_count,
        Some(18)
    );
    let iso = s.isolation.as_ref().unwrap();
    assert_eq!(iso.outcome, IsolationOutcome::Contained);
    insta::assert_snapshot!("hog_mps_markdown", render_markdown(&s));
    assert_eq!(isolation_dirs(&[fixtures().join("hog-mps")]).unwrap(), *iso);
}

/// Under time-slicing the hog takes the memory and the trainers fail: the cohort is
/// refused, and its isolation result names each trainer, the allocation and the error.
#[test]
fn a_hog_under_time_slicing_is_not_contained_and_the_cohort_is_refused() {
    let (code, msg) = err("hog-timeslice");
    assert_eq!(code, exit::INCOMPLETE_COHORT);
    assert!(
        msg.contains("replica 1 failed at stage warmup (out_of_memory)"),
        "{msg}"
    );
    let r = isolation_dirs(&[fixtures().join("hog-timeslice")]).unwrap();
    assert_eq!(r.outcome, IsolationOutcome::NotContained);
    assert_eq!(
        r.workers[0].hog.as_ref().unwrap().stopped_by,
        HogStop::Refused
    );
    for w in &r.workers[1..] {
        assert_eq!(w.status, Status::Failed);
        assert_eq!(
            (w.stage, w.kind.clone()),
            (Some(Stage::Warmup), Some(FailureKind::OutOfMemory))
        );
        assert_eq!(w.refused_allocation.as_deref(), Some("20.00 MiB"));
    }
    assert!(
        r.explanation.starts_with(
            "the hog (replica 0) held 139.20 GiB (CUDA refused it more); 2 of the 2 other workers \
         failed with out_of_memory: replica 1 (train) ran out of device memory in warmup asking \
         for 20.00 MiB, 0.29 GiB free when it started"
        ),
        "{}",
        r.explanation
    );
    let both = [r, isolation_dirs(&[fixtures().join("hog-mps")]).unwrap()];
    insta::assert_snapshot!("isolation_markdown", render_isolation_markdown(&both));
    // A cohort without a hog has no isolation result.
    let e = isolation_dirs(&[fixtures().join("solo-train")]).unwrap_err();
    assert_eq!(e.exit_code(), exit::INVALID_INPUT);
    assert!(
        e.to_string().contains("no hog worker in this cohort"),
        "{e}"
    );
}

#[test]
fn worker_folders_can_be_given_one_by_one() {
    let dirs: Vec<PathBuf> = (0..4)
        .map(|r| fixtures().join(format!("homogeneous-4-train/worker-{r}")))
        .collect();
    let one_by_one = summarize_dirs(&dirs, &Options::default()).unwrap();
    assert_eq!(one_by_one, ok("homogeneous-4-train"));
    // Leaving one out is a missing replica, never a smaller cohort.
    let e = summarize_dirs(&dirs[..3], &Options::default()).unwrap_err();
    assert!(e.to_string().contains("missing 3"), "{e}");
}

#[test]
fn one_thread_and_two_give_the_same_summary() {
    let one = Options {
        threads: std::num::NonZeroUsize::new(1),
        ..Options::default()
    };
    let a = summarize_dirs(&[fixtures().join("mixed-1infer-6train")], &one).unwrap();
    assert_eq!(a, ok("mixed-1infer-6train"));
}

#[test]
fn summary_renderings() {
    let s = ok("mixed-1infer-6train");
    insta::assert_json_snapshot!("mixed_summary_json", s);
    insta::assert_snapshot!("mixed_table", render_table(&s));
    insta::assert_snapshot!("mixed_markdown", render_markdown(&s));
    insta::assert_snapshot!(
        "homogeneous_table",
        render_table(&ok("homogeneous-4-train"))
    );
}

#[test]
fn summary_json_round_trips() {
    let s = ok("homogeneous-4-train");
    let text = serde_json::to_string(&s).unwrap();
    let back: CohortSummary = serde_json::from_str(&text).unwrap();
    assert_eq!(back, s);
}

#[test]
fn compare_repeats_and_baselines_by_hand() {
    let cohorts: Vec<CohortSummary> = ["repeat-a", "repeat-b", "repeat-c", "mixed-1infer-6train"]
        .iter()
        .map(|n| ok(n))
        .collect();
    let baselines = [ok("solo-train"), ok("solo-infer")];
    let cmp = compare(&cohorts, &baselines).unwrap();
    assert_close!(cmp.baselines[&Workload::Train].samples_per_s, 32.0);
    // repeat-a: two workers of 20 x 500 ms batches: 64 samples/s each against 32 solo.
    let first = &cmp.cohorts[0].groups[&Workload::Train];
    assert_close!(first.aggregate_samples_per_s, 128.0);
    assert_close!(first.aggregate_vs_solo.unwrap(), 4.0);
    assert_close!(first.per_worker[0].rate_vs_solo.unwrap(), 2.0);
    // p99 500 ms against the solo p99 of 1000 ms.
    assert_close!(first.per_worker[0].p99_vs_solo.unwrap(), 0.5);
    // Repeats: the three repeat cohorts form one shape, the mixed cohort another.
    assert_eq!(cmp.repeats.len(), 2);
    assert_eq!(
        cmp.repeats[0].experiments,
        ["repeat-a", "repeat-b", "repeat-c"]
    );
    let rep = &cmp.repeats[0].groups[&Workload::Train];
    // Aggregates 128, 160, 102.4: mean 130.1333.., s from the deviations, t(0.975, 2).
    let v = [128.0, 160.0, 102.4];
    let mean = v.iter().sum::<f64>() / 3.0;
    let sd = (v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / 2.0).sqrt();
    let half = 4.302_652_729_749_464 * sd / 3f64.sqrt();
    let e = rep.aggregate_samples_per_s;
    assert_eq!(e.n, 3);
    assert_close!(e.mean, mean);
    assert_close!(e.stddev, sd);
    assert!((e.ci95_low.unwrap() - (mean - half)).abs() < 1e-6);
    assert!((e.ci95_high.unwrap() - (mean + half)).abs() < 1e-6);
    assert_close!(rep.per_worker_samples_per_s.mean, mean / 2.0);
    assert_eq!(rep.cohorts.len(), 3);
    // The mixed cohort alone: n = 1, no interval.
    let m = &cmp.repeats[1].groups[&Workload::Train].aggregate_samples_per_s;
    assert_eq!((m.n, m.ci95_low), (1, None));
    insta::assert_snapshot!("comparison_markdown", render_comparison_markdown(&cmp));
}

#[test]
fn compare_refuses_bad_baselines() {
    let mixed = ok("mixed-1infer-6train");
    let e = compare(std::slice::from_ref(&mixed), std::slice::from_ref(&mixed)).unwrap_err();
    assert!(e.to_string().contains("has 7 workers"), "{e}");
    assert_eq!(e.exit_code(), exit::INVALID_INPUT);
    let solo = ok("solo-train");
    let e = compare(std::slice::from_ref(&mixed), &[solo.clone(), solo.clone()]).unwrap_err();
    assert!(e.to_string().contains("given twice"), "{e}");
    // Repeats of a baseline on one card run one configuration.
    let mut other = solo.clone();
    other.experiment = "solo-train-b".to_owned();
    other.config.batch_size *= 2;
    let e = compare(std::slice::from_ref(&mixed), &[solo, other]).unwrap_err();
    assert!(
        e.to_string().contains("on one card differ in batch_size"),
        "{e}"
    );
    let no_base = compare(std::slice::from_ref(&mixed), &[]).unwrap();
    assert_eq!(no_base.warnings.len(), 2);
    assert!(
        no_base.cohorts[0].groups[&Workload::Train]
            .aggregate_vs_solo
            .is_none()
    );
}

/// `s` moved to `card`, every rate scaled by `factor` (a faster or slower card, or another run).
fn on_card(mut s: CohortSummary, experiment: &str, card: &str, factor: f64) -> CohortSummary {
    experiment.clone_into(&mut s.experiment);
    s.colocation.physical_gpus = vec![card.to_owned()];
    for w in &mut s.workers {
        w.gpu_uuid = Some(card.to_owned());
        w.samples_per_s *= factor;
    }
    for g in s.groups.values_mut() {
        g.aggregate_samples_per_s *= factor;
        g.per_worker_samples_per_s.mean *= factor;
    }
    s
}

#[test]
fn every_ratio_divides_by_its_own_cards_baseline_and_none_crosses_cards() {
    // Card B is 12 % faster than card A at everything; the cohort halves each worker's rate on
    // both. Solo runs repeat with a few percent of noise.
    const A: &str = "GPU-aaaaaaaa-0000";
    const B: &str = "GPU-bbbbbbbb-0000";
    const C: &str = "GPU-cccccccc-0000";
    let solo = ok("solo-train");
    let pair = ok("repeat-a"); // two trainers at 2x the fixture's solo rate each
    let solo_rate = solo.workers[0].samples_per_s;
    let baselines = [
        on_card(solo.clone(), "solo-a1", A, 0.98),
        on_card(solo.clone(), "solo-a2", A, 1.02),
        on_card(solo.clone(), "solo-a3", A, 1.00),
        on_card(solo.clone(), "solo-b1", B, 1.12 * 0.99),
        on_card(solo.clone(), "solo-b2", B, 1.12 * 1.01),
    ];
    // repeat-a's workers run at twice the fixture's solo: scale them to half of each card's.
    let half = 0.5 * solo_rate / pair.workers[0].samples_per_s;
    let cohorts = [
        on_card(pair.clone(), "pair-a", A, half),
        on_card(pair.clone(), "pair-b", B, half * 1.12),
        on_card(pair, "pair-c", C, half),
    ];
    let cmp = compare(&cohorts, &baselines).unwrap();
    for k in &cmp.cohorts[..2] {
        let g = &k.groups[&Workload::Train];
        for w in &g.per_worker {
            assert!(
                (w.rate_vs_solo.unwrap() - 0.5).abs() < 1e-9,
                "{}: {:?} against its own card's solo, not another's",
                k.experiment,
                w.rate_vs_solo
            );
            let ci = w.rate_vs_solo_ci.unwrap();
            assert!(ci.low.unwrap() < 0.5 && 0.5 < ci.high.unwrap());
        }
        assert!((g.aggregate_vs_solo.unwrap() - 1.0).abs() < 1e-9);
        assert_eq!(
            g.aggregate_vs_solo_ci.unwrap().n_denominator,
            if k.experiment == "pair-a" { 3 } else { 2 }
        );
    }
    assert_eq!(cmp.cohorts[0].cards, [A]);
    // Card C has no baseline: no ratio, and a warning that names the cards and their spread.
    let c = &cmp.cohorts[2].groups[&Workload::Train];
    assert!(c.aggregate_vs_solo.is_none() && c.per_worker.iter().all(|w| w.rate_vs_solo.is_none()));
    let cross: Vec<&str> = cmp
        .warnings
        .iter()
        .filter(|w| w.kind == "cross_card")
        .map(|w| w.message.as_str())
        .collect();
    assert_eq!(cross.len(), 1, "{:?}", cmp.warnings);
    assert!(
        cross[0].contains("GPU-cccccccc")
            && cross[0].contains("GPU-aaaaaaaa")
            && cross[0].contains("12 %"),
        "{}",
        cross[0]
    );
    // Both blocks are listed, each with its own runs.
    assert_eq!(cmp.baseline_blocks.len(), 2);
    assert_eq!(
        cmp.baseline_blocks[0].experiments,
        ["solo-a1", "solo-a2", "solo-a3"]
    );
    // The repeated shape's ratio is kept card by card, never pooled across cards.
    let rep = &cmp.repeats[0].groups[&Workload::Train];
    assert_eq!(rep.vs_solo.len(), 2);
    for r in &rep.vs_solo {
        assert!((r.per_worker_vs_solo.ratio - 0.5).abs() < 1e-9, "{r:?}");
    }
}
