//! Real cohorts captured on NVIDIA H200s (`fixtures/h200`), so that the analysis is
//! always tested on what a GPU actually wrote and not only on the synthetic cohorts of
//! `fixtures.rs`. Each cohort's summary is pinned by an insta JSON snapshot, and the figures that
//! matter are asserted against the numbers written here and against the `summary.json` that
//! `bench-cohort` wrote at capture time (kept as `expected-summary.json`).

use std::path::{Path, PathBuf};

use coload_analysis::{AnalysisError, Options, summarize_dirs};
use coload_cohort_schema::{CohortSummary, Workload, exit};

/// How far a rate may drift from the one recorded at capture time, in samples/s.
const RATE_TOLERANCE: f64 = 0.01;

/// The protocol every capture ran under: 45 s windows, which the common interval must nearly
/// fill (workers start within microseconds of each other).
const WINDOW_S: f64 = 45.0;

fn h200() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/h200")
}

fn summarize(name: &str) -> Result<CohortSummary, AnalysisError> {
    summarize_dirs(&[h200().join(name)], &Options::default())
}

fn ok(name: &str) -> CohortSummary {
    summarize(name).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// What `bench-cohort` recorded at capture time.
fn expected(name: &str) -> serde_json::Value {
    let path = h200().join(name).join("expected-summary.json");
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

macro_rules! assert_near {
    ($a:expr, $b:expr, $tol:expr) => {{
        let (a, b, tol): (f64, f64, f64) = ($a, $b, $tol);
        assert!(
            (a - b).abs() <= tol,
            "{} = {a}, expected {b} +- {tol}",
            stringify!($a)
        );
    }};
}

/// The checks every real cohort must pass: its shape, one physical GPU holding every replica,
/// near-complete overlap, and per-worker rates equal to the ones written at capture time and to
/// `rates` (the same figures, written down here so that losing `expected-summary.json` cannot
/// make this pass).
fn check_real(s: &CohortSummary, name: &str, gpu_uuid: &str, rates: &[(Workload, f64)]) {
    let count = u32::try_from(rates.len()).expect("a handful of workers");
    assert_eq!(s.count, count, "{name}: count");
    assert_eq!(s.workers.len(), rates.len(), "{name}: workers");
    let workloads: Vec<Workload> = s.workers.iter().map(|w| w.workload).collect();
    let declared: Vec<Workload> = rates.iter().map(|(w, _)| *w).collect();
    assert_eq!(workloads, declared, "{name}: workloads in replica order");
    for workload in [Workload::Train, Workload::Infer] {
        let n = u32::try_from(declared.iter().filter(|w| **w == workload).count()).unwrap();
        assert_eq!(
            s.workload_mix.get(&workload).copied().unwrap_or(0),
            n,
            "{name}: {workload:?} in workload_mix"
        );
    }

    // Every worker saw the same physical GPU, and the summary says the placement fits the mode.
    assert_eq!(s.colocation.fits_mode, Some(true), "{name}: fits_mode");
    assert_eq!(
        s.colocation.physical_gpus,
        [gpu_uuid],
        "{name}: physical GPUs"
    );
    assert!(s.colocation.mig_devices.is_empty(), "{name}: no MIG");
    assert_eq!(s.colocation.devices.len(), 1, "{name}: devices");
    let replicas: Vec<u32> = (0..count).collect();
    assert_eq!(s.colocation.devices[0].device, gpu_uuid);
    assert_eq!(s.colocation.devices[0].replicas, replicas, "{name}");

    assert_near!(s.common_interval.seconds, WINDOW_S, 0.001);

    let recorded = expected(name);
    let recorded_workers = recorded["workers"].as_array().expect("workers");
    assert_eq!(
        recorded_workers.len(),
        rates.len(),
        "{name}: expected-summary"
    );
    for ((w, (_, rate)), e) in s.workers.iter().zip(rates).zip(recorded_workers) {
        assert_eq!(
            w.gpu_uuid.as_deref(),
            Some(gpu_uuid),
            "{name}: replica {} GPU",
            w.replica
        );
        assert!(w.mig_uuid.is_none(), "{name}: replica {} MIG", w.replica);
        assert!(
            w.overlap_fraction >= 0.99,
            "{name}: replica {} overlap {}",
            w.replica,
            w.overlap_fraction
        );
        assert_near!(w.samples_per_s, *rate, RATE_TOLERANCE);
        let at_capture = e["samples_per_s"].as_f64().expect("samples_per_s");
        assert_near!(w.samples_per_s, at_capture, RATE_TOLERANCE);
        assert_eq!(
            Some(w.batches),
            e["batches"].as_u64(),
            "{name}: replica {} batches",
            w.replica
        );
        // Every batch is a full batch of 32 and the rate is the kept samples over the interval.
        assert_eq!(w.samples, w.batches * 32);
        #[expect(
            clippy::cast_precision_loss,
            reason = "sample counts are far below 2^52"
        )]
        let by_hand = w.samples as f64 / s.common_interval.seconds;
        assert_near!(w.samples_per_s, by_hand, 1e-9);
    }
}

#[test]
fn exclusive_solo_train_is_pinned() {
    let name = "exclusive-solo-train";
    let s = ok(name);
    check_real(
        &s,
        name,
        "GPU-9a8ed216-3854-e861-579d-9a1df0118bfc",
        &[(Workload::Train, 3632.356)],
    );
    let w = &s.workers[0];
    // 5108 batches of 32 in 45 s, none dropped: a solo worker defines the common interval.
    assert_eq!((w.batches, w.batches_recorded), (5108, 5108));
    assert_near!(w.latency_ms.p50, 8.809, 0.001);
    assert_near!(w.latency_ms.p99, 9.888, 0.001);
    // More than 1000 batches: every percentile is measured, so no few_batches warning.
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    insta::assert_json_snapshot!("exclusive_solo_train_summary", s);
}

#[test]
fn timeslice_mixed_is_pinned() {
    let name = "timeslice-mixed-r1";
    let s = ok(name);
    let mut rates = vec![(Workload::Infer, 2195.912)];
    rates.extend([(Workload::Train, 548.267); 5]);
    rates.push((Workload::Train, 548.978));
    check_real(&s, name, "GPU-9a8ed216-3854-e861-579d-9a1df0118bfc", &rates);

    let infer = &s.groups[&Workload::Infer];
    let train = &s.groups[&Workload::Train];
    assert_eq!((infer.workers, train.workers), (1, 6));
    assert_near!(infer.aggregate_samples_per_s, 2195.912, RATE_TOLERANCE);
    assert_near!(train.aggregate_samples_per_s, 3290.312, RATE_TOLERANCE);
    // Time-slicing gives the six trainers equal turns: 771 or 772 batches each.
    assert!(train.jain_fairness > 0.9999, "{}", train.jain_fairness);
    assert_near!(infer.latency_ms.p50, 15.687, 0.001);
    assert_near!(infer.latency_ms.p99, 15.889, 0.001);
    assert_near!(train.latency_ms.p50, 58.253, 0.001);
    assert_near!(train.latency_ms.p99, 58.679, 0.001);
    // 771 or 772 training batches are too few for a measured p99.9: one warning per trainer.
    assert_eq!(s.warnings.len(), 6, "{:?}", s.warnings);
    insta::assert_json_snapshot!("timeslice_mixed_r1_summary", s);
}

#[test]
fn mps_train4_is_pinned() {
    let name = "mps-train4";
    let s = ok(name);
    check_real(
        &s,
        name,
        "GPU-70a5ded9-65eb-ad6c-00c7-e000a34780e8",
        &[
            (Workload::Train, 1416.533),
            (Workload::Train, 1403.733),
            (Workload::Train, 1417.244),
            (Workload::Train, 1402.311),
        ],
    );
    let train = &s.groups[&Workload::Train];
    assert_near!(train.aggregate_samples_per_s, 5639.822, RATE_TOLERANCE);
    assert_near!(train.latency_ms.p50, 22.697, 0.001);
    assert_near!(train.latency_ms.p99, 23.623, 0.001);
    assert!(train.jain_fairness > 0.9999, "{}", train.jain_fairness);
    // MPS runs the four trainers concurrently: together they beat one exclusive trainer
    // (3632 samples/s in `exclusive-solo-train`) by more than half again.
    assert!(train.aggregate_samples_per_s > 1.5 * 3632.356);
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    insta::assert_json_snapshot!("mps_train4_summary", s);
}

#[test]
fn failed_cpu_fallback_cohort_is_refused() {
    // The seven workers of a real MPS cohort were killed by the launcher's timeout while
    // warming up on the CPU: they left logs and no worker.json.
    let e = summarize("failed-cpu-fallback").expect_err("an incomplete cohort is refused");
    assert_eq!(e.exit_code(), exit::INCOMPLETE_COHORT);
    let root = format!("{}/", h200().display());
    let message = e.to_string().replace(&root, "");
    for replica in 0..7 {
        assert!(
            message.contains(&format!(
                "failed-cpu-fallback/worker-{replica}: no worker.json"
            )),
            "{message}"
        );
    }
    insta::assert_snapshot!("failed_cpu_fallback_message", message);
}

/// The real mps-train4 cohort with worker 2's host facts replaced by what the saturated host of
/// the second device call recorded (load 167 on 16 CPUs, CPU pressure 99 %): the summary must
/// say so, naming the replica, and the quiet original must not.
#[test]
fn a_contended_host_is_flagged() {
    let quiet = ok("mps-train4");
    assert!(quiet.warnings.iter().all(|w| w.kind != "host_contention"));

    let dir = tempfile::tempdir().unwrap();
    for i in 0..4 {
        let from = h200().join("mps-train4").join(format!("worker-{i}"));
        let to = dir.path().join(format!("worker-{i}"));
        std::fs::create_dir_all(&to).unwrap();
        for f in ["worker.json", "batches.jsonl"] {
            std::fs::copy(from.join(f), to.join(f)).unwrap();
        }
    }
    let path = dir.path().join("worker-2").join("worker.json");
    let mut report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    report["host"]["loadavg_end"] = serde_json::json!(167.3);
    report["host"]["psi_cpu_some_avg10_end"] = serde_json::json!(98.98);
    std::fs::write(&path, report.to_string()).unwrap();

    let s = summarize_dirs(&[dir.path().to_owned()], &Options::default()).unwrap();
    let flagged: Vec<&str> = s
        .warnings
        .iter()
        .filter(|w| w.kind == "host_contention")
        .map(|w| w.message.as_str())
        .collect();
    assert_eq!(flagged.len(), 1, "{flagged:?}");
    assert!(
        flagged[0].starts_with("replica 2: its host was CPU-contended"),
        "{}",
        flagged[0]
    );
    assert!(
        flagged[0].contains("CPU pressure up to 99.0 %"),
        "{}",
        flagged[0]
    );
    assert!(
        flagged[0].contains("load up to 167.3 on 16 CPUs"),
        "{}",
        flagged[0]
    );
}
