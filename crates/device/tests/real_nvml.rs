//! The real NVML on a GPU host (feature `gpu`; run on the H200 host with `--nocapture` to see
//! what it reports). Without the feature this file holds no test, so a machine without a GPU
//! never counts these as passes.
#![cfg(feature = "gpu")]

use std::time::{Duration, Instant};

use coload_cohort_schema::{DeviceKind, GPM_METRIC_NAMES, Mode};
use coload_device::{
    ActivityOptions, GpmTarget, MigTarget, NvmlSource, NvmlTarget, RealNvml, SharingFacts,
    TelemetrySampler, check_allocation, host_snapshot, identify, mps_client,
    other_compute_processes, scheduler_identity,
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

/// GPM and the energy counter through the raw NVML calls (issue 15). On a Hopper GPU GPM must be
/// supported; elsewhere the reason is printed. Run on the H200 host with `--nocapture` and read
/// the per-reading cost it prints.
#[test]
fn the_real_nvml_reads_gpm_and_energy() {
    let mut nvml = RealNvml::open().expect("NVML must load on a GPU host");
    let gpu = nvml.gpu(0).unwrap();
    let device = NvmlTarget {
        gpu_index: 0,
        mig_index: None,
    };
    let e0 = nvml
        .energy_mj(device)
        .expect("a Volta or later GPU has an energy counter");
    let target = GpmTarget {
        gpu_index: 0,
        gpu_instance_id: None,
    };
    match nvml.gpm_begin(target) {
        Ok(()) => {
            std::thread::sleep(Duration::from_secs(1));
            let v = nvml.gpm_next(target).unwrap();
            println!(
                "gpm reading over 1 s: {}",
                serde_json::to_string(&v).unwrap()
            );
            for (name, value) in v.fields() {
                if name.ends_with("_pct") {
                    let x = *value.unwrap_or_else(|| panic!("{name} not answered"));
                    assert!((0.0..=100.0).contains(&x), "{name} = {x}");
                }
            }
            let n = 100;
            let t0 = Instant::now();
            for _ in 0..n {
                nvml.gpm_next(target).unwrap();
            }
            println!(
                "one gpm reading (sample + {} metrics) takes {:?}",
                GPM_METRIC_NAMES.len(),
                t0.elapsed() / n
            );
        }
        Err(reason) => {
            println!("gpm unsupported on {}: {reason}", gpu.name);
            assert!(
                !(gpu.name.contains("H100") || gpu.name.contains("H200")),
                "a Hopper GPU must support GPM: {reason}"
            );
        }
    }
    let e1 = nvml.energy_mj(device).unwrap();
    println!("energy counter {e0} -> {e1} mJ");
    assert!(e1 >= e0);
    let t0 = Instant::now();
    for _ in 0..100 {
        nvml.energy_mj(device).unwrap();
    }
    println!("one energy reading takes {:?}", t0.elapsed() / 100);

    // The sampler as the worker runs it: telemetry at 10 Hz with energy, GPM every second.
    let report = identify(DeviceKind::Cuda, Some(0));
    let options = ActivityOptions::for_duration(Some(1.0), 10.0, MigTarget::from_report(&report));
    let sampler = TelemetrySampler::start_with_activity(
        Box::new(RealNvml::open().unwrap()),
        report.target.unwrap().gpu_index,
        Some(10.0),
        100,
        options,
        || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        },
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(3200));
    let out = sampler.stop_all();
    let (start, end) = (
        out.samples[0].t_unix_ns,
        out.samples.last().unwrap().t_unix_ns,
    );
    println!(
        "sampler gpm: {}",
        serde_json::to_string(&out.activity.gpm_report(start, end)).unwrap()
    );
    println!(
        "sampler energy: {}",
        serde_json::to_string(&out.activity.energy_report(&out.samples, start, end)).unwrap()
    );
    assert!(out.samples.iter().all(|s| s.energy_mj.is_some()));
}
