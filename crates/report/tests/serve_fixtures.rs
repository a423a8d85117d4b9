//! The serve fixtures (`fixtures/serve-*`, written by `fixtures/generate.py`) against answers
//! computed by hand in `fixtures/README.md`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use coload_analysis::{AnalysisError, Options, SERVE_CAVEAT, summarize_dirs};
use coload_cohort_schema::{ServeSummary, Workload, exit};
use coload_report::render_table;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

fn serve_of(name: &str, options: &Options) -> ServeSummary {
    let s = summarize_dirs(&[fixtures().join(name)], options).unwrap();
    s.workers
        .iter()
        .find(|w| w.workload == Workload::Serve)
        .and_then(|w| w.serve.clone())
        .expect("a serve worker")
}

fn slo(ms: f64, quantile: f64) -> Options {
    Options {
        slo_ms: Some(ms),
        slo_quantile: Some(quantile),
        ..Options::default()
    }
}

#[test]
fn serve_mixed_by_hand() {
    let summary = summarize_dirs(&[fixtures().join("serve-mixed")], &Options::default()).unwrap();
    assert_eq!(summary.workload_mix[&Workload::Serve], 1);
    assert_eq!(summary.workload_mix[&Workload::Train], 1);
    assert_eq!(
        summary.caveats.last().map(String::as_str),
        Some(SERVE_CAVEAT)
    );
    let trainer = &summary.workers[1];
    assert!(trainer.serve.is_none());
    let server = &summary.workers[0];
    // 1000 requests in 900 batches, all inside the 10 s window.
    assert_eq!((server.batches, server.samples), (900, 1000));
    let s = server.serve.as_ref().unwrap();
    assert_eq!((s.requests, s.completed, s.not_completed), (1000, 1000, 0));
    assert_eq!(s.not_completed_max_age_ms, None);
    assert_eq!((s.offered_per_s, s.completed_per_s), (100.0, 100.0));
    // Per cycle: 4 ms x 7, 12, 15, 7. Sorted: 4 (ranks 1-700), 7 (701-800), 12 (801-900),
    // 15 (901-1000).
    let l = s.latency_ms;
    assert_eq!(
        (l.p50, l.p90, l.p99, l.p999, l.max),
        (Some(4.0), Some(12.0), Some(15.0), Some(15.0), Some(15.0))
    );
    assert!((l.mean.unwrap() - 6.2).abs() < 1e-9);
    // Queueing: 0 for eight, 10 (the request at 72 ms), 2 (at 80 ms).
    let queue = s.queueing_ms;
    assert_eq!(
        (queue.p50, queue.p90, queue.p99, queue.max),
        (Some(0.0), Some(2.0), Some(10.0), Some(10.0))
    );
    // Service: 4 x 7, 12, 5, 5.
    let service = s.service_ms;
    assert_eq!(
        (service.p50, service.p90, service.p99, service.max),
        (Some(4.0), Some(5.0), Some(12.0), Some(12.0))
    );
    assert_eq!(s.batches, 900);
    assert_eq!(s.batch_size_histogram, BTreeMap::from([(1, 800), (2, 100)]));
    assert_eq!(
        s.padded_size_histogram,
        BTreeMap::from([(1, 800), (2, 100)])
    );
    assert!((s.mean_batch_size - 1000.0 / 900.0).abs() < 1e-12);
    // The worker's own SLO, 10 ms at p99: 4 ms x 7 and 7 ms meet it, 800 of 1000.
    let slo = s.slo.unwrap();
    assert_eq!(
        (slo.slo_ms, slo.quantile, slo.met, slo.attainment),
        (10.0, 0.99, 800, 0.8)
    );
    assert!(!slo.meets);
    assert!(!s.overloaded && !s.percentiles_are_lower_bounds);
}

#[test]
fn serve_mixed_slo_overrides() {
    // 15 ms at p99: every request meets it, and 1000 >= the 459 LoadGen needs without a miss.
    let a = serve_of("serve-mixed", &slo(15.0, 0.99)).slo.unwrap();
    assert_eq!(
        (a.met, a.percentile_met, a.early_stopping_pass, a.meets),
        (1000, true, true, true)
    );
    assert_eq!(a.early_stopping_requests_needed, 459);
    // 12 ms at p90: 900 of 1000 meet it, exactly the ceil(0.9 * 1000) needed; but with 100
    // misses LoadGen's test needs 1146 met (1246 requests): not confident, so not met.
    let a = serve_of("serve-mixed", &slo(12.0, 0.9)).slo.unwrap();
    assert_eq!(
        (a.met, a.percentile_met, a.early_stopping_pass, a.meets),
        (900, true, false, false)
    );
    assert_eq!(a.early_stopping_requests_needed, 1246);
    // 11.999 ms at p90: 800, not enough.
    let a = serve_of("serve-mixed", &slo(11.999, 0.9)).slo.unwrap();
    assert_eq!((a.met, a.percentile_met), (800, false));
}

#[test]
fn serve_overloaded_by_hand() {
    let s = serve_of("serve-overloaded", &Options::default());
    // Request i arrives at 10 i ms and completes at 20 i + 20 ms: 500 complete, 500 queued.
    assert_eq!((s.requests, s.completed, s.not_completed), (1000, 500, 500));
    assert_eq!((s.offered_per_s, s.completed_per_s), (100.0, 50.0));
    // The oldest unfinished request (i = 500) arrived at 5 s: 5000 ms old at the end.
    assert_eq!(s.not_completed_max_age_ms, Some(5000.0));
    // Latency 10 i + 20 ms; p50 is rank 500 of 1000: i = 499, 5010 ms. Ranks above 500 fall
    // on unfinished requests: null.
    let l = s.latency_ms;
    assert_eq!(
        (l.p50, l.p90, l.p99, l.p999),
        (Some(5010.0), None, None, None)
    );
    assert_eq!(l.max, Some(5010.0));
    assert!((l.mean.unwrap() - 2515.0).abs() < 1e-9);
    // Queueing 10 i ms over the 500 completed: ranks 250, 450, 495, 500.
    let queue = s.queueing_ms;
    assert_eq!(
        (queue.p50, queue.p90, queue.p99, queue.p999),
        (Some(2490.0), Some(4490.0), Some(4940.0), Some(4990.0))
    );
    assert_eq!(s.service_ms.p50, Some(20.0));
    assert!(s.overloaded && s.percentiles_are_lower_bounds);
    assert_eq!(s.overload_reasons.len(), 1, "{:?}", s.overload_reasons);
    assert_eq!(
        s.overload_reasons[0],
        "500 of 1000 requests (50.0 %) were still queued or running at the end (allowed: 10): \
         the completed rate 50.0/s fell short of the offered 100.0/s"
    );
    let a = s.slo.unwrap();
    assert_eq!((a.met, a.attainment, a.meets), (0, 0.0, false));
    // Overloaded: even an objective every completed request meets is not met.
    let a = serve_of("serve-overloaded", &slo(10_000.0, 0.5))
        .slo
        .unwrap();
    assert_eq!((a.met, a.meets), (500, false));
}

#[test]
fn the_table_shows_the_serve_figures() {
    let summary =
        summarize_dirs(&[fixtures().join("serve-overloaded")], &Options::default()).unwrap();
    let text = render_table(&summary);
    assert!(text.contains("requests"), "{text}");
    assert!(text.contains("OVERLOADED"), "{text}");
    assert!(text.contains("5010.000"), "{text}");
}

#[test]
fn an_slo_without_a_serve_worker_is_refused() {
    let e = summarize_dirs(&[fixtures().join("solo-train")], &slo(10.0, 0.99)).unwrap_err();
    assert!(matches!(e, AnalysisError::Slo(_)));
    assert_eq!(e.exit_code(), exit::INVALID_INPUT);
    assert_eq!(
        e.to_string(),
        "--slo-ms judges request latency, but cohort solo-train has no serve worker \
         (workloads: train); run one with --workers serve=1,... or leave --slo-ms out"
    );
}

#[test]
fn bad_slo_values_are_refused() {
    for (ms, q, needle) in [
        (
            0.0,
            0.99,
            "--slo-ms must be a positive number of milliseconds, got 0",
        ),
        (-5.0, 0.99, "got -5"),
        (f64::NAN, 0.99, "got NaN"),
        (10.0, 1.0, "--slo-quantile must be between 0 and 1"),
        (10.0, 0.0, "got 0"),
        (10.0, 0.9995, "at most three decimals"),
    ] {
        let e = summarize_dirs(&[fixtures().join("serve-mixed")], &slo(ms, q)).unwrap_err();
        assert_eq!(e.exit_code(), exit::INVALID_INPUT);
        assert!(e.to_string().contains(needle), "{e}");
    }
}

#[test]
fn a_truncated_requests_file_is_refused() {
    let e = summarize_dirs(
        &[fixtures().join("invalid/serve-truncated-requests")],
        &Options::default(),
    )
    .unwrap_err();
    assert_eq!(e.exit_code(), exit::INCOMPLETE_COHORT);
    let text = e.to_string();
    assert!(
        text.contains(
            "serve replica 0: requests.jsonl lists 999 requests in 999 batches but worker.json \
             says serve.requests = 1000 and serve.batches_dispatched = 1000"
        ),
        "{text}"
    );
}
