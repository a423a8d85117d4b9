//! A scripted [`NvmlSource`] for tests: whole GPUs, MIG-enabled GPUs with MIG devices, compute
//! processes and telemetry, GPM (supported, unsupported, per MIG instance) and energy counters,
//! without a driver.

use std::collections::HashMap;

use coload_cohort_schema::{BYTES_PER_MIB, GpmValues, TelemetrySample};

use crate::error::{NvmlCode, NvmlError};
use crate::gpm::GpmTarget;
use crate::nvml::{ComputeProcess, GpuFacts, MigFacts, NvmlSource, NvmlTarget};

/// Why the fake's GPM is unsupported until a test scripts it.
fn gpm_not_scripted() -> NvmlError {
    NvmlError::new(
        "nvmlGpmQueryDeviceSupport",
        Some(NvmlCode::NotSupported),
        "fake nvml: GPM not scripted (use with_gpm)",
    )
}

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
    /// Per GPU, its MIG device indices in order: a device, or the error NVML gives for that
    /// index.
    migs: HashMap<u32, Vec<Result<MigFacts, NvmlCode>>>,
    /// GPUs whose MIG enumeration fails as a whole, with the code.
    mig_failures: HashMap<u32, NvmlCode>,
    processes: HashMap<NvmlTarget, Vec<ComputeProcess>>,
    samples_taken: u64,
    activity: FakeActivity,
}

/// The fake's GPM and energy script and counters.
#[derive(Debug, Clone, Default)]
struct FakeActivity {
    /// Device-wide GPM: `None` until scripted (then unsupported with [`GPM_NOT_SCRIPTED`]).
    gpm_device: Option<Result<(), NvmlError>>,
    /// Per-MIG-instance GPM: `None` follows the device-wide script.
    gpm_mig: Option<Result<(), NvmlError>>,
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

    /// Adds a MIG device with `profile` to the last GPU added, enabling MIG mode on it: its own
    /// GPU instance (ids 7, 8, ... in the order added, as a 1g instance of an H100 is GPU
    /// instance 7 to 14, so that a test catches the index used for the id) with compute
    /// instance 0.
    #[must_use]
    pub fn with_mig(self, profile: &str, uuid: &str) -> Self {
        let gi = 7 + self.mig_slots_of_last() as u32;
        self.with_mig_instance(profile, uuid, gi, 0)
    }

    /// Adds a MIG device with `profile` to the last GPU added, enabling MIG mode on it, as
    /// compute instance `compute_instance_id` of GPU instance `gpu_instance_id` (several
    /// devices with one GPU instance id are compute instances sharing it).
    #[must_use]
    pub fn with_mig_instance(
        mut self,
        profile: &str,
        uuid: &str,
        gpu_instance_id: u32,
        compute_instance_id: u32,
    ) -> Self {
        let gpu = self.last_gpu();
        gpu.mig_mode = Some(true);
        let (gpu_index, gpu_name) = (gpu.index, gpu.name.clone());
        let list = self.migs.entry(gpu_index).or_default();
        let gib = crate::MigProfile::parse(profile).map_or(10, |p| u64::from(p.memory_gb));
        list.push(Ok(MigFacts {
            index: list.len() as u32,
            uuid: uuid.to_owned(),
            name: Some(format!("{gpu_name} MIG {profile}")),
            profile: Some(profile.to_owned()),
            memory_total_bytes: Some(gib << 30),
            gpu_instance_id: Some(gpu_instance_id),
            compute_instance_id: Some(compute_instance_id),
        }));
        self
    }

    /// Makes the next MIG device index of the last GPU added answer `code` instead of a device
    /// (`NVML_ERROR_NO_PERMISSION` for a device this process may not see, say).
    #[must_use]
    pub fn with_mig_index_error(mut self, code: NvmlCode) -> Self {
        let gpu = self.last_gpu();
        gpu.mig_mode = Some(true);
        let gpu_index = gpu.index;
        self.migs.entry(gpu_index).or_default().push(Err(code));
        self
    }

    /// Makes the MIG enumeration of the last GPU added fail as a whole with `code`
    /// (`nvmlDeviceGetMaxMigDeviceCount` answers it).
    #[must_use]
    pub fn with_mig_enumeration_error(mut self, code: NvmlCode) -> Self {
        let gpu = self.last_gpu();
        gpu.mig_mode = Some(true);
        let gpu_index = gpu.index;
        self.mig_failures.insert(gpu_index, code);
        self
    }

    /// A fake with the GPUs and MIG devices of `topology` (a saved `nvidia-smi -L` listing,
    /// say), in its order and with its UUIDs and names.
    ///
    /// A listing from driver R470 on does not give GPU and compute instance ids; where they are
    /// unknown they are made up per GPU, in listing order, the way NVML lists MIG devices (the
    /// compute instances of one GPU instance one after another): a device whose profile names
    /// a partial compute instance (`1c.3g.40gb`) joins the GPU instance of the device before it
    /// when that one has the same GPU instance profile and the compute slices still fit;
    /// every other device gets a GPU instance of its own. A MIG device without a memory size
    /// gets its profile's (`1g.10gb`: 10 GiB).
    #[must_use]
    pub fn from_topology(topology: &crate::Topology) -> Self {
        let mut fake = FakeNvml::new();
        for g in &topology.gpus {
            let index = fake.gpus.len() as u32;
            fake.gpus.push(GpuFacts {
                index,
                ..g.facts.clone()
            });
            // (GI profile, compute slices used so far, GI id) of the GI being filled.
            let mut open: Option<(String, u32, u32)> = None;
            let mut next_gi = 1;
            let mut slots = Vec::with_capacity(g.migs.len());
            for m in &g.migs {
                let profile = m.profile.as_deref().and_then(crate::MigProfile::parse);
                let (gi, ci) = if let (Some(gi), Some(ci)) =
                    (m.gpu_instance_id, m.compute_instance_id)
                {
                    (gi, ci)
                } else {
                    let partial = profile.as_ref().filter(|p| p.is_partial_compute_instance());
                    let joined = match (partial, open.as_mut()) {
                        (Some(p), Some((gi_profile, used, gi)))
                            if *gi_profile == p.gpu_instance_profile()
                                && *used + p.compute_slices.unwrap_or(0) <= p.gpu_slices =>
                        {
                            let ci = *used;
                            *used += p.compute_slices.unwrap_or(0);
                            Some((*gi, ci))
                        }
                        _ => None,
                    };
                    joined.unwrap_or_else(|| {
                        let gi = next_gi;
                        next_gi += 1;
                        open = partial
                            .map(|p| (p.gpu_instance_profile(), p.compute_slices.unwrap_or(0), gi));
                        (gi, 0)
                    })
                };
                slots.push(Ok(MigFacts {
                    gpu_instance_id: Some(gi),
                    compute_instance_id: Some(ci),
                    memory_total_bytes: m
                        .memory_total_bytes
                        .or_else(|| profile.as_ref().map(|p| u64::from(p.memory_gb) << 30)),
                    ..m.clone()
                }));
            }
            if !slots.is_empty() {
                fake.migs.insert(index, slots);
            }
        }
        fake
    }

    /// Makes MIG device index `mig_index` of GPU `gpu_index` answer `code` instead of its device
    /// (on a fake built with [`FakeNvml::from_topology`], say). Nothing changes where the GPU
    /// has no such index.
    #[must_use]
    pub fn with_mig_index_error_at(
        mut self,
        gpu_index: u32,
        mig_index: u32,
        code: NvmlCode,
    ) -> Self {
        if let Some(slot) = self.migs.get_mut(&gpu_index).and_then(|l| {
            l.iter_mut().enumerate().find_map(|(position, slot)| {
                let at = slot.as_ref().map_or(position as u32, |m| m.index);
                (at == mig_index).then_some(slot)
            })
        }) {
            *slot = Err(code);
        }
        self
    }

    /// Makes the MIG enumeration of GPU `gpu_index` fail as a whole with `code`.
    #[must_use]
    pub fn with_mig_enumeration_error_at(mut self, gpu_index: u32, code: NvmlCode) -> Self {
        self.mig_failures.insert(gpu_index, code);
        self
    }

    fn mig_slots_of_last(&self) -> usize {
        self.gpus
            .last()
            .and_then(|g| self.migs.get(&g.index))
            .map_or(0, Vec::len)
    }

    /// The MIG devices of GPU `gpu_index` that exist (not the scripted errors).
    fn migs_of(&self, gpu_index: u32) -> impl Iterator<Item = &MigFacts> {
        self.migs
            .get(&gpu_index)
            .into_iter()
            .flatten()
            .filter_map(|m| m.as_ref().ok())
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
    pub fn with_gpm_unsupported(mut self, reason: NvmlError) -> Self {
        self.activity.gpm_device = Some(Err(reason));
        self
    }

    /// Makes per-MIG-instance GPM fail with `reason` while device-wide GPM follows its script.
    #[must_use]
    pub fn with_mig_gpm_unsupported(mut self, reason: NvmlError) -> Self {
        self.activity.gpm_mig = Some(Err(reason));
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

fn missing(call: String) -> NvmlError {
    NvmlError::new(call, Some(NvmlCode::NotFound), "not found (fake nvml)")
}

impl FakeNvml {
    fn no_gpu(&self, gpu_index: u32, call: &str) -> Result<(), NvmlError> {
        if (gpu_index as usize) < self.gpus.len() {
            Ok(())
        } else {
            Err(NvmlError::new(
                call,
                Some(NvmlCode::InvalidArgument),
                format!("fake nvml: no gpu {gpu_index}"),
            ))
        }
    }

    fn gpm_script(&self, target: GpmTarget) -> Result<(), NvmlError> {
        self.no_gpu(target.gpu_index, "nvmlGpmQueryDeviceSupport")?;
        let device = self
            .activity
            .gpm_device
            .clone()
            .unwrap_or_else(|| Err(gpm_not_scripted()));
        let Some(id) = target.gpu_instance_id else {
            return device;
        };
        let known = self
            .migs_of(target.gpu_index)
            .any(|m| m.gpu_instance_id == Some(id));
        if !known {
            return Err(NvmlError::new(
                "nvmlGpmMigSampleGet",
                Some(NvmlCode::InvalidArgument),
                format!(
                    "fake nvml: gpu {} has no GPU instance {id}",
                    target.gpu_index
                ),
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

    fn gpu_count(&self) -> Result<u32, NvmlError> {
        Ok(self.gpus.len() as u32)
    }

    fn gpu(&self, index: u32) -> Result<GpuFacts, NvmlError> {
        self.gpus
            .get(index as usize)
            .cloned()
            .ok_or_else(|| missing(format!("nvmlDeviceGetHandleByIndex({index})")))
    }

    fn max_mig_devices(&self, gpu_index: u32) -> Result<u32, NvmlError> {
        let call = format!("nvmlDeviceGetMaxMigDeviceCount(gpu {gpu_index})");
        self.no_gpu(gpu_index, &call)?;
        if let Some(code) = self.mig_failures.get(&gpu_index) {
            return Err(NvmlError::new(
                call,
                Some(*code),
                "fake nvml: scripted failure",
            ));
        }
        if self.gpus[gpu_index as usize].mig_mode != Some(true) {
            return Ok(0);
        }
        // NVML answers the GPU's maximum (7 on an A100 or H100), more than the devices made.
        let made = self.migs.get(&gpu_index).map_or(0, |l| {
            l.iter()
                .enumerate()
                .map(|(position, slot)| slot.as_ref().map_or(position as u32, |m| m.index) + 1)
                .max()
                .unwrap_or(0)
        });
        Ok(made.max(7))
    }

    fn mig_device(&self, gpu_index: u32, mig_index: u32) -> Result<Option<MigFacts>, NvmlError> {
        let call = format!("nvmlDeviceGetMigDeviceHandleByIndex(gpu {gpu_index}, {mig_index})");
        self.no_gpu(gpu_index, &call)?;
        let slot = self.migs.get(&gpu_index).and_then(|l| {
            l.iter().enumerate().find_map(|(position, slot)| {
                let at = slot.as_ref().map_or(position as u32, |m| m.index);
                (at == mig_index).then_some(slot)
            })
        });
        match slot {
            None => Ok(None),
            Some(Ok(m)) => Ok(Some(m.clone())),
            Some(Err(code)) => Err(NvmlError::new(
                call,
                Some(*code),
                "fake nvml: scripted failure",
            )),
        }
    }

    fn compute_processes(&self, target: NvmlTarget) -> Result<Vec<ComputeProcess>, NvmlError> {
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

    fn energy_mj(&mut self, target: NvmlTarget) -> Result<u64, NvmlError> {
        const CALL: &str = "nvmlDeviceGetTotalEnergyConsumption";
        self.no_gpu(target.gpu_index, CALL)?;
        if let Some(m) = target.mig_index {
            if !self.migs_of(target.gpu_index).any(|f| f.index == m) {
                return Err(NvmlError::new(
                    CALL,
                    Some(NvmlCode::NotFound),
                    format!("fake nvml: no mig device {m}"),
                ));
            }
            if !self.activity.mig_energy {
                return Err(NvmlError::new(
                    CALL,
                    Some(NvmlCode::NotSupported),
                    "the requested operation is not available on the target device \
                     (fake nvml: no per-MIG energy counter)",
                ));
            }
        }
        let reads = self.activity.energy_reads.entry(target).or_default();
        let value = FAKE_ENERGY_START_MJ + FAKE_ENERGY_STEP_MJ * *reads;
        *reads += 1;
        Ok(value)
    }

    fn gpm_begin(&mut self, target: GpmTarget) -> Result<(), NvmlError> {
        self.gpm_script(target)?;
        self.activity.gpm_begun.retain(|t| *t != target);
        self.activity.gpm_begun.push(target);
        Ok(())
    }

    fn gpm_next(&mut self, target: GpmTarget) -> Result<GpmValues, NvmlError> {
        self.gpm_script(target)?;
        if !self.activity.gpm_begun.contains(&target) {
            return Err(NvmlError::new(
                "nvmlGpmSampleGet",
                None,
                "gpm_next before gpm_begin succeeded for this target",
            ));
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
