//! The workload on a real CUDA GPU (feature `gpu`; run on the H200 host with `--nocapture` to see
//! the timings). Without the feature this file holds no test, so a machine without a GPU never
//! counts these as passes.
#![cfg(feature = "gpu")]

use std::time::{Duration, Instant};

use coload_cohort_schema::{DeviceKind, MemorySource, Precision, Workload};
use coload_timing::Step;
use coload_workload::{DeviceChoice, InferenceGuard, ResNetStep, WorkloadOptions};

fn options(workload: Workload, precision: Precision) -> WorkloadOptions {
    WorkloadOptions {
        workload,
        device: DeviceChoice::Cuda(0),
        batch_size: 32,
        image_size: 224,
        precision,
        seed: 0,
        ..WorkloadOptions::default()
    }
}

/// Median step time after `warmup` steps, over `n` steps.
fn median_step(step: &mut ResNetStep, warmup: usize, n: usize) -> Duration {
    for _ in 0..warmup {
        step.step().unwrap();
    }
    let mut times: Vec<Duration> = (0..n)
        .map(|_| {
            let t = Instant::now();
            assert_eq!(step.step().unwrap(), 32);
            t.elapsed()
        })
        .collect();
    times.sort();
    times[n / 2]
}

#[test]
fn cuda_is_available_and_auto_picks_it() {
    assert!(tch::Cuda::is_available(), "libtorch_cuda.so must be loaded");
    let mut o = options(Workload::Infer, Precision::Fp32);
    o.device = DeviceChoice::Auto;
    o.batch_size = 2;
    o.image_size = 64;
    let step = ResNetStep::new(&o).unwrap();
    let info = step.info();
    println!("workload info: {info:?}");
    assert_eq!(info.device_kind, DeviceKind::Cuda);
    assert_eq!(info.cuda_index, Some(0));
    assert!(info.cuda_version.is_some() && info.cudnn_version.is_some());
    assert!(info.cudnn_benchmark);
}

#[test]
fn train_and_infer_run_and_report_peak_memory() {
    for (workload, precision) in [
        (Workload::Train, Precision::Fp32),
        (Workload::Infer, Precision::Fp32),
        (Workload::Train, Precision::Bf16),
        (Workload::Infer, Precision::Bf16),
    ] {
        let mut step = ResNetStep::new(&options(workload, precision)).unwrap();
        let median = median_step(&mut step, 15, 40);
        let peak = step.peak_memory().unwrap();
        assert_eq!(peak.source, MemorySource::CachingAllocator);
        assert!(peak.peak_device_bytes > 50 << 20);
        if workload == Workload::Train {
            assert!(step.last_loss().unwrap().unwrap().is_finite());
        } else {
            let probe = step.probe_inference().unwrap();
            assert!(!probe.requires_grad && probe.is_inference);
        }
        println!(
            "{workload} {precision} b32 224: median {:.3} ms/batch, peak reserved {} bytes",
            median.as_secs_f64() * 1e3,
            peak.peak_device_bytes
        );
    }
}

#[test]
fn inference_mode_against_no_grad() {
    let o = options(Workload::Infer, Precision::Fp32);
    let mut im = ResNetStep::with_guard(&o, InferenceGuard::InferenceMode).unwrap();
    let mut ng = ResNetStep::with_guard(&o, InferenceGuard::NoGrad).unwrap();
    let (a, b) = (median_step(&mut im, 15, 60), median_step(&mut ng, 15, 60));
    println!(
        "infer fp32 b32: inference_mode {:.3} ms, no_grad {:.3} ms",
        a.as_secs_f64() * 1e3,
        b.as_secs_f64() * 1e3
    );
}

#[test]
fn cuda_out_of_memory_in_a_step_is_a_typed_error() {
    // 8192 images of 224x224 need far more activation memory than any GPU has.
    let mut o = options(Workload::Train, Precision::Fp32);
    o.batch_size = 8192;
    let result = ResNetStep::new(&o).and_then(|mut s| s.step());
    let err = result.unwrap_err();
    println!("oom error: {err}");
    assert!(err.is_out_of_memory(), "{err:?}");
    assert_eq!(err.kind(), "out_of_memory");
}

#[test]
fn cuda_7_is_refused_with_a_typed_error() {
    let mut o = options(Workload::Infer, Precision::Fp32);
    o.device = DeviceChoice::Cuda(7);
    let err = ResNetStep::new(&o).unwrap_err();
    assert_eq!(err.kind(), "invalid_option");
}
