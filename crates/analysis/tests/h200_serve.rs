//! A real serve cohort captured on an NVIDIA H200: one serve worker at 848.5 Poisson
//! requests/s beside six ResNet18 trainers under MPS as the device plugin configures it at
//! `replicas: 7`, the highest rate that met p99 <= 10 ms in the capacity search of 2026-12-01
//! (`docs/results/data/2026-12-01-round3/capacity-10ms/mps-plugin6`, probe 4). The summary the
//! analysis makes of its records must be the one `bench-cohort` wrote at capture time
//! (`expected-summary.json`) and the figures written here, so that the request path is tested on
//! what a GPU wrote and not only on the synthetic `fixtures/serve-*`.

use std::path::{Path, PathBuf};

use coload_analysis::{Options, summarize_dirs};
use coload_cohort_schema::{Mode, SharePolicy, Workload};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/h200/serve-mps-plugin-6train")
}

fn expected() -> serde_json::Value {
    let path = fixture().join("expected-summary.json");
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

#[test]
fn a_real_serve_cohort_summarizes_as_it_did_at_capture() {
    let options = Options {
        slo_ms: Some(10.0),
        slo_quantile: Some(0.99),
        ..Options::default()
    };
    let s = summarize_dirs(&[fixture()], &options).unwrap();
    assert_eq!(s.mode, Mode::Mps);
    let share = s.share.expect("the declared MPS share");
    assert_eq!(share.policy, SharePolicy::Replicas);
    assert_eq!(share.replicas, Some(7));
    assert_eq!(share.active_thread_percentage, Some(14));
    assert_eq!(s.workload_mix[&Workload::Serve], 1);
    assert_eq!(s.workload_mix[&Workload::Train], 6);
    assert!((s.common_interval.seconds - 10.0).abs() < 1e-3);

    let server = &s.workers[0];
    assert_eq!(server.workload, Workload::Serve);
    // What the server's own shim saw under the share: 18 of the H200's 132 SMs.
    let observed = server
        .share
        .as_ref()
        .and_then(|r| r.observed.as_ref())
        .unwrap();
    assert_eq!(
        (observed.sm_count, observed.physical_sm_count),
        (Some(18), Some(132))
    );

    let serve = server.serve.as_ref().expect("the serve summary");
    let want = &expected()["workers"][0]["serve"];
    assert_eq!(serve.requests, 8428);
    assert_eq!(serve.completed, 8427);
    assert_eq!(serve.not_completed, 1);
    assert_eq!(serve.requests, want["requests"].as_u64().unwrap());
    assert_eq!(serve.batches, 3456);
    // Request latency (completion minus scheduled arrival), queueing and service, in ms.
    for (got, key, figure) in [
        (serve.latency_ms.p50, "latency_ms", 4.472_736),
        (serve.latency_ms.p99, "latency_ms", 8.699_613),
        (serve.queueing_ms.p99, "queueing_ms", 4.214_553),
        (serve.service_ms.p99, "service_ms", 5.023_966),
    ] {
        let got = got.expect("a percentile");
        assert!((got - figure).abs() < 1e-6, "{key}: {got} against {figure}");
    }
    assert!(
        (serve.latency_ms.p99.unwrap() - want["latency_ms"]["p99"].as_f64().unwrap()).abs() < 1e-9,
        "p99 as recorded at capture"
    );
    assert!(!serve.overloaded);
    let slo = serve.slo.as_ref().expect("an objective was given");
    assert_eq!(slo.met, 8408);
    assert!(slo.meets && slo.percentile_met && slo.early_stopping_pass);

    // The six trainers ran at 892-909 samples/s each (their 14 % share each), recorded as such.
    for (w, want) in s.workers[1..]
        .iter()
        .zip(&expected()["workers"].as_array().unwrap()[1..])
    {
        assert_eq!(w.workload, Workload::Train);
        let rate = want["samples_per_s"].as_f64().unwrap();
        assert!(
            (w.samples_per_s - rate).abs() < 0.01,
            "replica {}",
            w.replica
        );
        assert!(
            (890.0..=910.0).contains(&w.samples_per_s),
            "replica {}",
            w.replica
        );
    }
}
