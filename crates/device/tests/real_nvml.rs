//! The real NVML on a GPU host (feature `gpu`; run on the H200 host). Without the feature this
//! file holds no test, so a machine without a GPU never counts these as passes.
//!
//! Each test asserts what a GPU host must show: NVML's facts present and in range, `identify`
//! agreeing with NVML field by field, telemetry within physical bounds, and the allocation check
//! agreeing with what NVML lists (this file used to print what it should assert).
#![cfg(feature = "gpu")]

use std::time::{Duration, Instant};

use coload_cohort_schema::{DeviceKind, GPM_METRIC_NAMES, Mode, TelemetrySample};
use coload_device::{
    ActivityOptions, GpmTarget, GpuFacts, MigTarget, NvmlSource, NvmlTarget, RealNvml,
    SharingFacts, TelemetrySampler, check_allocation, host_snapshot, identify, mps_client,
    other_compute_processes, scheduler_identity,
};

const GIB: u64 = 1 << 30;

/// Sane physical bounds for one sample of a data-centre GPU: generous, but a unit or scale
/// mistake (milliwatts for watts, kHz for MHz, bytes for MiB) falls outside them.
fn assert_sane_sample(s: &TelemetrySample, gpu: &GpuFacts) {
    let power = s.power_w.expect("power");
    assert!((5.0..=2000.0).contains(&power), "power {power} W");
    let clock = s.sm_clock_mhz.expect("sm clock");
    assert!((50..=4000).contains(&clock), "sm clock {clock} MHz");
    let temp = s.temperature_c.expect("temperature");
    assert!((5..=110).contains(&temp), "temperature {temp} C");
    let used = s.memory_used_bytes.expect("memory used");
    let total = gpu.memory_total_bytes.unwrap();
    assert!(used <= total, "memory used {used} > total {total}");
    for (name, pct) in [("gpu", s.gpu_util_pct), ("memory", s.memory_util_pct)] {
        assert!(pct.is_some_and(|p| p <= 100), "{name} utilization {pct:?}");
    }
    assert!(s.throttle_reasons.is_some());
}

#[test]
fn nvml_lists_every_gpu_with_its_facts() {
    let nvml = RealNvml::open().expect("NVML must load on a GPU host");
    let count = nvml.gpu_count().unwrap();
    assert!(count >= 1);
    assert!(nvml.driver_version().is_some_and(|v| v.contains('.')));
    let cuda = nvml.cuda_driver_version().unwrap();
    let major: u32 = cuda.split('.').next().unwrap().parse().unwrap();
    assert!(major >= 12, "CUDA driver API {cuda}");
    let mut uuids = Vec::new();
    for i in 0..count {
        let gpu = nvml.gpu(i).unwrap();
        assert_eq!(gpu.index, i);
        assert!(gpu.uuid.starts_with("GPU-"), "{gpu:?}");
        assert!(gpu.name.starts_with("NVIDIA"), "{gpu:?}");
        assert!(gpu.memory_total_bytes.unwrap() > 8 * GIB, "{gpu:?}");
        // `00000000:19:00.0`: domain, bus, device, function.
        let bus = gpu.pci_bus_id.as_deref().unwrap();
        assert_eq!(bus.split([':', '.']).count(), 4, "{bus}");
        let mode = gpu.compute_mode.as_deref().unwrap();
        assert!(
            [
                "default",
                "exclusive_process",
                "prohibited",
                "exclusive_thread"
            ]
            .contains(&mode),
            "{mode}"
        );
        let migs = nvml.mig_devices(i).unwrap();
        if gpu.mig_mode == Some(true) {
            for m in &migs {
                assert!(m.uuid.starts_with("MIG-"), "{m:?}");
                assert!(m.profile.is_some(), "{m:?}");
                assert!(m.memory_total_bytes.unwrap() < gpu.memory_total_bytes.unwrap());
            }
        } else {
            assert!(migs.is_empty(), "MIG off, yet {migs:?}");
        }
        uuids.push(gpu.uuid);
    }
    uuids.sort();
    uuids.dedup();
    assert_eq!(uuids.len(), count as usize, "duplicate GPU UUIDs");
}

#[test]
fn identify_agrees_with_nvml_and_telemetry_is_in_range() {
    let nvml = RealNvml::open().unwrap();
    let report = identify(DeviceKind::Cuda, Some(0));
    let kinds: Vec<&str> = report.warnings.iter().map(|w| w.kind.as_str()).collect();
    assert!(
        !kinds.contains(&"nvml_unavailable") && !kinds.contains(&"device_unresolved"),
        "{:?}",
        report.warnings
    );
    let target = report.target.expect("cuda:0 resolved to an NVML device");
    let gpu = nvml.gpu(target.gpu_index).unwrap();
    let info = &report.info;
    assert_eq!(info.kind, DeviceKind::Cuda);
    assert_eq!(info.gpu_uuid.as_deref(), Some(gpu.uuid.as_str()));
    assert_eq!(info.gpu_name.as_deref(), Some(gpu.name.as_str()));
    assert_eq!(info.pci_bus_id, gpu.pci_bus_id);
    assert_eq!(info.compute_mode, gpu.compute_mode);
    assert_eq!(info.mig_mode, gpu.mig_mode);
    assert_eq!(info.driver_version, nvml.driver_version());
    assert_eq!(info.cuda_version, nvml.cuda_driver_version());
    assert_eq!(
        info.visible_devices,
        std::env::var("CUDA_VISIBLE_DEVICES")
            .or_else(|_| std::env::var("NVIDIA_VISIBLE_DEVICES"))
            .ok()
    );
    if let Some(m) = target.mig_index {
        let mig = &nvml.mig_devices(target.gpu_index).unwrap()[m as usize];
        assert_eq!(info.mig_uuid.as_deref(), Some(mig.uuid.as_str()));
        assert_eq!(info.mig_profile, mig.profile);
        assert_eq!(info.memory_total_bytes, mig.memory_total_bytes);
    } else {
        assert_eq!((&info.mig_uuid, &info.mig_profile), (&None, &None));
        assert_eq!(info.memory_total_bytes, gpu.memory_total_bytes);
    }

    let mut probe = RealNvml::open().unwrap();
    assert_sane_sample(&probe.sample(target.gpu_index, 7), &gpu);
    assert_eq!(probe.sample(target.gpu_index, 7).t_unix_ns, 7);

    let running = TelemetrySampler::start(&report, 10.0, 100).unwrap();
    std::thread::sleep(Duration::from_millis(1050));
    let (samples, summary) = running.stop();
    assert!((8..=12).contains(&samples.len()), "{}", samples.len());
    for s in &samples {
        assert_sane_sample(s, &gpu);
    }
    // The periodic samples keep the rate; the last one is the closing sample taken at the stop,
    // any time up to one period after the one before it.
    let (closing, periodic) = samples.split_last().unwrap();
    for pair in periodic.windows(2) {
        let gap_ms = (pair[1].t_unix_ns - pair[0].t_unix_ns) / 1_000_000;
        assert!(
            (50..=250).contains(&gap_ms),
            "samples {gap_ms} ms apart at 10 Hz"
        );
    }
    let last_gap_ms = (closing.t_unix_ns - periodic.last().unwrap().t_unix_ns) / 1_000_000;
    assert!(
        last_gap_ms <= 250,
        "the closing sample came {last_gap_ms} ms after the last periodic one"
    );
    let summary = summary.expect("a summary of the samples");
    assert_eq!(summary.scope, "device");
    assert_eq!(summary.samples, samples.len() as u64);
    assert_eq!(summary.rate_hz, Some(10.0));
    let power = summary.power_w.unwrap();
    assert!(power.mean <= power.max && power.max <= 2000.0, "{power:?}");
    let clock = summary.sm_clock_mhz.unwrap();
    assert!(clock.min <= clock.mean, "{clock:?}");
    let used = summary.memory_used_bytes.unwrap().max;
    assert!(used <= gpu.memory_total_bytes.unwrap() as f64);
}

#[test]
fn the_allocation_check_agrees_with_what_nvml_lists() {
    let report = identify(DeviceKind::Cuda, Some(0));
    // This process opened NVML but made no CUDA context: every listed process is another one.
    let others = other_compute_processes(&report, false).expect("NVML lists compute processes");
    let sharing = SharingFacts {
        other_compute_processes: Some(others),
        mps_client: mps_client(),
    };
    let kinds = |mode| -> Vec<String> {
        check_allocation(mode, &report.info, &sharing, false)
            .unwrap()
            .into_iter()
            .map(|w| w.kind)
            .collect()
    };
    let exclusive = kinds(Mode::Exclusive);
    assert_eq!(
        exclusive.contains(&"gpu_shared".to_owned()),
        others > 0,
        "{others} other processes: {exclusive:?}"
    );
    let on_mig = report.info.mig_uuid.is_some();
    assert_eq!(
        kinds(Mode::Mig).contains(&"not_a_mig_device".to_owned()),
        !on_mig
    );
    // Strict checking turns any warning into an error, and none into success.
    let strict = check_allocation(Mode::Exclusive, &report.info, &sharing, true);
    assert_eq!(strict.is_err(), !exclusive.is_empty());
}

#[test]
fn host_facts_and_identity_are_present() {
    let host = host_snapshot();
    let cpus = host.cpus_allowed.expect("sched_getaffinity answers");
    let online = std::thread::available_parallelism().unwrap().get() as u32;
    assert!(
        cpus >= 1 && cpus >= online,
        "{cpus} allowed, {online} usable"
    );
    assert!(host.loadavg_1m.is_some_and(|l| l >= 0.0));
    if let Some(psi) = host.psi_cpu_some_avg10 {
        assert!((0.0..=100.0).contains(&psi), "{psi}");
    }
    if let Some(quota) = host.cpu_quota {
        assert!(quota > 0.0, "{quota}");
    }
    let id = scheduler_identity(None);
    assert!(!id.hostname.is_empty());
    assert_eq!(id.pid, std::process::id());
}

/// GPM and the energy counter through the raw NVML calls. On a Hopper GPU GPM must be
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
