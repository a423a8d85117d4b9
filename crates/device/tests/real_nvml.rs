//! The real NVML on a GPU host (feature `gpu`; run on the H200 host with `--nocapture` to see
//! what it reports). Without the feature this file holds no test, so a machine without a GPU
//! never counts these as passes.
#![cfg(feature = "gpu")]

use std::time::Duration;

use coload_cohort_schema::{DeviceKind, Mode};
use coload_device::{
    NvmlSource, RealNvml, SharingFacts, TelemetrySampler, check_allocation, host_snapshot,
    identify, mps_client, other_compute_processes, scheduler_identity,
};

#[test]
fn the_real_nvml_identifies_and_samples_gpu_0() {
    let nvml = RealNvml::open().expect("NVML must load on a GPU host");
    let count = nvml.gpu_count().unwrap();
    assert!(count >= 1);
    for i in 0..count {
        println!("nvml gpu {i}: {:?}", nvml.gpu(i).unwrap());
        println!(
            "nvml gpu {i} mig devices: {:?}",
            nvml.mig_devices(i).unwrap()
        );
    }

    let report = identify(DeviceKind::Cuda, Some(0));
    println!(
        "identify(cuda:0): {}",
        serde_json::to_string_pretty(&report.info).unwrap()
    );
    println!("identify warnings: {:?}", report.warnings);
    println!("nvml target: {:?}", report.target);
    let info = &report.info;
    assert!(info.gpu_uuid.as_deref().unwrap().starts_with("GPU-"));
    assert!(!info.gpu_name.as_deref().unwrap().is_empty());
    assert!(info.memory_total_bytes.unwrap() > 1 << 30);
    assert!(info.driver_version.is_some() && info.cuda_version.is_some());
    assert!(info.pci_bus_id.is_some() && info.compute_mode.is_some());

    let t0 = std::time::Instant::now();
    let mut probe = RealNvml::open().unwrap();
    let s = probe.sample(report.target.unwrap().gpu_index, 0);
    println!("one sample took {:?}: {s:?}", t0.elapsed());
    assert!(s.power_w.is_some() && s.sm_clock_mhz.is_some() && s.temperature_c.is_some());

    let running = TelemetrySampler::start(&report, 10.0, 100).unwrap();
    std::thread::sleep(Duration::from_millis(1050));
    let (samples, summary) = running.stop();
    println!(
        "telemetry summary over {} samples: {}",
        samples.len(),
        serde_json::to_string(&summary).unwrap()
    );
    assert!((8..=12).contains(&samples.len()), "{}", samples.len());

    let others = other_compute_processes(&report, false);
    println!(
        "other compute processes: {others:?}; mps client: {}",
        mps_client()
    );
    let sharing = SharingFacts {
        other_compute_processes: others,
        mps_client: mps_client(),
    };
    println!(
        "check exclusive: {:?}",
        check_allocation(Mode::Exclusive, info, &sharing, false).unwrap()
    );
    println!(
        "check mig: {:?}",
        check_allocation(Mode::Mig, info, &sharing, false).unwrap()
    );
    println!("host: {:?}", host_snapshot());
    println!("identity: {:?}", scheduler_identity(None));
}
