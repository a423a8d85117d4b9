//! A scripted [`NvmlSource`] for tests: whole GPUs, MIG-enabled GPUs with MIG devices, compute
//! processes and telemetry, GPM (supported, unsupported, per MIG instance) and energy counters,
//! without a driver.

use std::collections::HashMap;

use coload_cohort_schema::{BYTES_PER_MIB, GpmValues, TelemetrySample};

use crate::error::DeviceError;
use crate::gpm::GpmTarget;
use crate::nvml::{ComputeProcess, GpuFacts, MigFacts, NvmlSource, NvmlTarget};

/// Why the fake's GPM is unsupported until a test scripts it.
const GPM_NOT_SCRIPTED: &str = "fake nvml: GPM not scripted (use with_gpm)";

/// The fake's energy counter at its first reading, millijoules.
pub(crate) const FAKE_ENERGY_START_MJ: u64 = 1_000_000;

/// What the fake's energy counter adds per reading, millijoules (35 J: 350 W at 10 Hz).
pub(crate) const FAKE_ENERGY_STEP_MJ: u64 = 35_000;

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
    activity: FakeActivity,
}

/// The fake's GPM and energy script and counters.
#[derive(Debug, Clone, Default)]
struct FakeActivity {
    /// Device-wide GPM: `None` until scripted (then unsupported with [`GPM_NOT_SCRIPTED`]).
    gpm_device: Option<Result<(), String>>,
    /// Per-MIG-instance GPM: `None` follows the device-wide script.
    gpm_mig: Option<Result<(), String>>,
    /// Targets begun, in order.
    gpm_begun: Vec<GpmTarget>,
    /// GPM readings returned so far.
    gpm_reads: u64,
    /// Whether MIG devices have their own energy counter.
    mig_energy: bool,
    /// Energy readings so far, per target.
    energy_reads: HashMap<NvmlTarget, u64>,
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
            // Distinct from the MIG index, as on real GPUs (a 1g instance of an H100 is GPU
            // instance 7 to 14), so that a test catches one used for the other.
            gpu_instance_id: Some(7 + list.len() as u32),
        });
        self
    }

    /// Sets the compute mode of the last GPU added.
    #[must_use]
    pub fn with_compute_mode(mut self, mode: &str) -> Self {
        self.last_gpu().compute_mode = Some(mode.to_owned());
        self
    }

    /// Makes GPM supported device-wide and per MIG instance (a Hopper GPU on a recent driver).
    /// Readings are deterministic: SM occupancy cycles 24, 25, 26 %; a MIG instance reads half
    /// the device's figures; NVLink is never answered (a PCIe card).
    #[must_use]
    pub fn with_gpm(mut self) -> Self {
        self.activity.gpm_device = Some(Ok(()));
        self
    }

    /// Makes GPM unsupported everywhere, for `reason` (a pre-Hopper GPU, an old driver, no
    /// permission).
    #[must_use]
    pub fn with_gpm_unsupported(mut self, reason: &str) -> Self {
        self.activity.gpm_device = Some(Err(reason.to_owned()));
        self
    }

    /// Makes per-MIG-instance GPM fail with `reason` while device-wide GPM follows its script.
    #[must_use]
    pub fn with_mig_gpm_unsupported(mut self, reason: &str) -> Self {
        self.activity.gpm_mig = Some(Err(reason.to_owned()));
        self
    }

    /// Gives MIG devices an energy counter of their own (by default only whole GPUs have one,
    /// as with the drivers seen so far).
    #[must_use]
    pub fn with_mig_energy(mut self) -> Self {
        self.activity.mig_energy = true;
        self
    }

    /// The GPM targets begun so far, in order.
    #[must_use]
    pub fn gpm_begun(&self) -> &[GpmTarget] {
        &self.activity.gpm_begun
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

impl FakeNvml {
    fn gpm_script(&self, target: GpmTarget) -> Result<(), String> {
        if target.gpu_index as usize >= self.gpus.len() {
            return Err(format!("fake nvml: no gpu {}", target.gpu_index));
        }
        let device = self
            .activity
            .gpm_device
            .clone()
            .unwrap_or_else(|| Err(GPM_NOT_SCRIPTED.to_owned()));
        let Some(id) = target.gpu_instance_id else {
            return device;
        };
        let known = self
            .migs
            .get(&target.gpu_index)
            .is_some_and(|l| l.iter().any(|m| m.gpu_instance_id == Some(id)));
        if !known {
            return Err(format!(
                "fake nvml: gpu {} has no GPU instance {id}",
                target.gpu_index
            ));
        }
        self.activity.gpm_mig.clone().unwrap_or(device)
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
            ..TelemetrySample::default()
        }
    }

    fn energy_mj(&mut self, target: NvmlTarget) -> Result<u64, String> {
        if target.gpu_index as usize >= self.gpus.len() {
            return Err(format!("fake nvml: no gpu {}", target.gpu_index));
        }
        if let Some(m) = target.mig_index {
            let exists = self
                .migs
                .get(&target.gpu_index)
                .is_some_and(|l| l.iter().any(|f| f.index == m));
            if !exists {
                return Err(format!("fake nvml: no mig device {m}"));
            }
            if !self.activity.mig_energy {
                return Err(
                    "the requested operation is not available on the target device \
                            (fake nvml: no per-MIG energy counter)"
                        .to_owned(),
                );
            }
        }
        let reads = self.activity.energy_reads.entry(target).or_default();
        let value = FAKE_ENERGY_START_MJ + FAKE_ENERGY_STEP_MJ * *reads;
        *reads += 1;
        Ok(value)
    }

    fn gpm_begin(&mut self, target: GpmTarget) -> Result<(), String> {
        self.gpm_script(target)?;
        self.activity.gpm_begun.retain(|t| *t != target);
        self.activity.gpm_begun.push(target);
        Ok(())
    }

    fn gpm_next(&mut self, target: GpmTarget) -> Result<GpmValues, String> {
        self.gpm_script(target)?;
        if !self.activity.gpm_begun.contains(&target) {
            return Err("gpm_next before gpm_begin succeeded for this target".to_owned());
        }
        let n = self.activity.gpm_reads;
        self.activity.gpm_reads += 1;
        let share = if target.gpu_instance_id.is_some() {
            0.5
        } else {
            1.0
        };
        Ok(GpmValues {
            graphics_util_pct: Some(82.0 * share),
            sm_util_pct: Some(56.0 * share),
            sm_occupancy_pct: Some((24.0 + (n % 3) as f64) * share),
            any_tensor_util_pct: Some(7.5 * share),
            dram_bw_util_pct: Some(18.0 * share),
            fp32_util_pct: Some(30.0 * share),
            fp16_util_pct: Some(0.5 * share),
            fp64_util_pct: Some(0.0),
            pcie_rx_bytes_per_s: Some(4.0 * BYTES_PER_MIB * share),
            pcie_tx_bytes_per_s: Some(2.0 * BYTES_PER_MIB * share),
            nvlink_rx_bytes_per_s: None,
            nvlink_tx_bytes_per_s: None,
        })
    }
}
