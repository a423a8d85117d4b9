//! A scripted [`NvmlSource`] for tests: whole GPUs, MIG-enabled GPUs with MIG devices, compute
//! processes and telemetry, without a driver.

use std::collections::HashMap;

use coload_cohort_schema::TelemetrySample;

use crate::error::DeviceError;
use crate::nvml::{ComputeProcess, GpuFacts, MigFacts, NvmlSource, NvmlTarget};

/// A fake NVML. Build it with [`FakeNvml::new`] and the `with_*` methods.
///
/// ```
/// use coload_device::{FakeNvml, NvmlSource};
///
/// let nvml = FakeNvml::new().with_gpu("GPU-aaaa", "NVIDIA H200").with_mig("1g.18gb", "MIG-bbbb");
/// assert_eq!(nvml.gpu_count().unwrap(), 1);
/// assert_eq!(nvml.mig_devices(0).unwrap()[0].profile.as_deref(), Some("1g.18gb"));
/// ```
#[derive(Debug, Clone, Default)]
pub struct FakeNvml {
    gpus: Vec<GpuFacts>,
    migs: HashMap<u32, Vec<MigFacts>>,
    processes: HashMap<NvmlTarget, Vec<ComputeProcess>>,
    samples_taken: u64,
}

impl FakeNvml {
    /// A fake with no GPU.
    #[must_use]
    pub fn new() -> Self {
        FakeNvml::default()
    }

    /// Adds a whole GPU with MIG disabled (80 GiB, compute mode default).
    #[must_use]
    pub fn with_gpu(mut self, uuid: &str, name: &str) -> Self {
        let index = self.gpus.len() as u32;
        self.gpus.push(GpuFacts {
            index,
            uuid: uuid.to_owned(),
            name: name.to_owned(),
            pci_bus_id: Some(format!("00000000:{:02X}:00.0", 0x19 + index)),
            mig_mode: Some(false),
            memory_total_bytes: Some(80 << 30),
            compute_mode: Some("default".to_owned()),
        });
        self
    }

    /// Enables MIG mode on the last GPU added, without creating any MIG device: what NVML shows
    /// after `nvidia-smi -mig 1` and before any GPU instance is created. CUDA then sees no
    /// device on that GPU.
    #[must_use]
    pub fn with_mig_enabled(mut self) -> Self {
        self.last_gpu().mig_mode = Some(true);
        self
    }

    /// Adds a MIG device with `profile` to the last GPU added, enabling MIG mode on it.
    #[must_use]
    pub fn with_mig(mut self, profile: &str, uuid: &str) -> Self {
        let gpu = self.last_gpu();
        gpu.mig_mode = Some(true);
        let (gpu_index, gpu_name) = (gpu.index, gpu.name.clone());
        let list = self.migs.entry(gpu_index).or_default();
        let gib: u64 = profile
            .rsplit_once('.')
            .and_then(|(_, m)| m.trim_end_matches("gb").parse().ok())
            .unwrap_or(10);
        list.push(MigFacts {
            index: list.len() as u32,
            uuid: uuid.to_owned(),
            name: Some(format!("{gpu_name} MIG {profile}")),
            profile: Some(profile.to_owned()),
            memory_total_bytes: Some(gib << 30),
        });
        self
    }

    /// Sets the compute mode of the last GPU added.
    #[must_use]
    pub fn with_compute_mode(mut self, mode: &str) -> Self {
        self.last_gpu().compute_mode = Some(mode.to_owned());
        self
    }

    fn last_gpu(&mut self) -> &mut GpuFacts {
        self.gpus
            .last_mut()
            .expect("add a gpu (with_gpu) before what belongs to it")
    }

    /// Lists compute processes on a target.
    #[must_use]
    pub fn with_processes(mut self, target: NvmlTarget, pids: &[u32]) -> Self {
        self.processes.insert(
            target,
            pids.iter()
                .map(|&pid| ComputeProcess {
                    pid,
                    used_memory_bytes: Some(1 << 30),
                })
                .collect(),
        );
        self
    }
}

fn missing(what: String) -> DeviceError {
    DeviceError::Nvml {
        query: what,
        message: "not found (fake nvml)".into(),
    }
}

impl NvmlSource for FakeNvml {
    fn driver_version(&self) -> Option<String> {
        Some("580.159.04".into())
    }

    fn cuda_driver_version(&self) -> Option<String> {
        Some("13.0".into())
    }

    fn gpu_count(&self) -> Result<u32, DeviceError> {
        Ok(self.gpus.len() as u32)
    }

    fn gpu(&self, index: u32) -> Result<GpuFacts, DeviceError> {
        self.gpus
            .get(index as usize)
            .cloned()
            .ok_or_else(|| missing(format!("device_by_index({index})")))
    }

    fn mig_devices(&self, gpu_index: u32) -> Result<Vec<MigFacts>, DeviceError> {
        Ok(self.migs.get(&gpu_index).cloned().unwrap_or_default())
    }

    fn compute_processes(&self, target: NvmlTarget) -> Result<Vec<ComputeProcess>, DeviceError> {
        Ok(self.processes.get(&target).cloned().unwrap_or_default())
    }

    fn sample(&mut self, gpu_index: u32, t_unix_ns: u64) -> TelemetrySample {
        let n = self.samples_taken;
        self.samples_taken += 1;
        if gpu_index as usize >= self.gpus.len() {
            return TelemetrySample {
                t_unix_ns,
                ..TelemetrySample::default()
            };
        }
        // A deterministic ramp: power 100, 110, 120, ... W; clock dips every third sample.
        TelemetrySample {
            t_unix_ns,
            power_w: Some(100.0 + 10.0 * (n % 5) as f64),
            sm_clock_mhz: Some(if n % 3 == 2 { 1500 } else { 1980 }),
            temperature_c: Some(40 + (n % 4) as u32),
            memory_used_bytes: Some((4 + n % 2) << 30),
            gpu_util_pct: Some(90),
            memory_util_pct: Some(40),
            // SW power cap on every fourth sample.
            throttle_reasons: Some(if n % 4 == 3 { 0x4 } else { 0 }),
        }
    }
}
