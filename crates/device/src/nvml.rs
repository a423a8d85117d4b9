//! The NVML seam: what this crate asks NVML, as a trait, and the real implementation.
//!
//! Everything above this module (identification, the allocation check, the telemetry sampler)
//! talks to an [`NvmlSource`], so that tests run against [`crate::FakeNvml`] (including a fake
//! MIG device) on machines without a GPU. [`RealNvml`] wraps `nvml-wrapper`, which loads
//! `libnvidia-ml.so.1` at run time: a binary built with this crate still starts where the
//! library is absent, and [`RealNvml::open`] then returns [`DeviceError::NvmlUnavailable`].

use std::sync::Arc;

use coload_cohort_schema::{GpmValues, TelemetrySample};
use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::{Clock, ComputeMode, TemperatureSensor};
use nvml_wrapper::error::NvmlError as WrapperError;
use nvml_wrapper_sys::bindings::{
    NvmlLib, nvmlDevice_t, nvmlReturn_enum_NVML_ERROR_NOT_FOUND, nvmlReturn_enum_NVML_SUCCESS,
    nvmlReturn_t,
};

use crate::error::{DeviceError, NvmlCode, NvmlError, raw_error};
use crate::gpm::{GpmStream, GpmTarget};

/// The NVML library name on Linux (the versioned name: the unversioned `.so` is a development
/// symlink that driver-only hosts and containers usually lack).
const NVML_LIBRARY: &str = "libnvidia-ml.so.1";

/// A physical GPU as NVML enumerates it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuFacts {
    /// NVML index (PCI bus order within what this process can see).
    pub index: u32,
    /// `GPU-...`.
    pub uuid: String,
    /// Marketing name (`NVIDIA H200`).
    pub name: String,
    /// PCI bus id (`00000000:19:00.0`).
    pub pci_bus_id: Option<String>,
    /// Whether MIG mode is currently enabled (`None`: the GPU does not support MIG).
    pub mig_mode: Option<bool>,
    /// Total device memory, bytes.
    pub memory_total_bytes: Option<u64>,
    /// Compute mode (`default`, `exclusive_process`, `prohibited`, `exclusive_thread`).
    pub compute_mode: Option<String>,
}

/// A MIG device (a compute instance of a GPU instance) of a MIG-enabled GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigFacts {
    /// Index of the MIG device within its parent GPU (`nvmlDeviceGetMigDeviceHandleByIndex`).
    pub index: u32,
    /// `MIG-...`.
    pub uuid: String,
    /// The MIG device's name (`NVIDIA H100 80GB HBM3 MIG 1g.10gb`).
    pub name: Option<String>,
    /// The profile parsed from the name (`1g.10gb`).
    pub profile: Option<String>,
    /// Memory of the MIG instance, bytes.
    pub memory_total_bytes: Option<u64>,
    /// The MIG GPU instance id (`nvmlDeviceGetGpuInstanceId`), which per-instance GPM sampling
    /// addresses. Compute instances of one GPU instance share it (and its memory).
    pub gpu_instance_id: Option<u32>,
    /// The compute instance id within that GPU instance (`nvmlDeviceGetComputeInstanceId`).
    pub compute_instance_id: Option<u32>,
}

/// The device a worker uses, as NVML addresses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NvmlTarget {
    /// NVML index of the physical GPU (the MIG parent when on a MIG device). Telemetry samples
    /// this GPU: device-wide figures.
    pub gpu_index: u32,
    /// Index of the MIG device within that GPU, when the worker runs on one.
    pub mig_index: Option<u32>,
}

/// What this crate asks NVML. Implemented by [`RealNvml`] and, for tests, [`crate::FakeNvml`].
///
/// `Send` so that the telemetry sampler can own one on its own thread. Every failure is an
/// [`NvmlError`] naming the call and, where NVML returned one, its code.
pub trait NvmlSource: Send {
    /// The driver version (`580.159.04`).
    fn driver_version(&self) -> Option<String>;
    /// The CUDA driver API version (`13.0`).
    fn cuda_driver_version(&self) -> Option<String>;
    /// How many physical GPUs NVML sees.
    fn gpu_count(&self) -> Result<u32, NvmlError>;
    /// Facts about physical GPU `index`.
    fn gpu(&self, index: u32) -> Result<GpuFacts, NvmlError>;
    /// How many MIG device indices GPU `gpu_index` has (`nvmlDeviceGetMaxMigDeviceCount`); an
    /// index below it may still hold no device.
    fn max_mig_devices(&self, gpu_index: u32) -> Result<u32, NvmlError>;
    /// The MIG device at `mig_index` of GPU `gpu_index` (`nvmlDeviceGetMigDeviceHandleByIndex`
    /// and its queries); `Ok(None)` where that index holds no device (`NVML_ERROR_NOT_FOUND`).
    fn mig_device(&self, gpu_index: u32, mig_index: u32) -> Result<Option<MigFacts>, NvmlError>;
    /// The MIG devices of physical GPU `gpu_index`, in index order; empty when MIG is off. An
    /// index NVML refuses with `NVML_ERROR_INVALID_ARGUMENT` or `NVML_ERROR_NO_PERMISSION` is
    /// skipped (see [`enumerate_mig_devices`], which also says which were).
    fn mig_devices(&self, gpu_index: u32) -> Result<Vec<MigFacts>, NvmlError> {
        enumerate_mig_devices(self, gpu_index).map(|e| e.devices)
    }
    /// Process ids of the compute processes (CUDA contexts) on the target (on the MIG device
    /// itself for a MIG target). Ids are in the host's PID namespace.
    fn compute_processes(&self, target: NvmlTarget) -> Result<Vec<ComputeProcess>, NvmlError>;
    /// One device-wide telemetry sample of physical GPU `gpu_index`; fields NVML does not answer
    /// stay `None`.
    fn sample(&mut self, gpu_index: u32, t_unix_ns: u64) -> TelemetrySample;

    /// NVML's total energy counter of the target (the physical GPU, or a MIG device where the
    /// driver offers one), millijoules since the driver loaded; `Err` says why not.
    fn energy_mj(&mut self, target: NvmlTarget) -> Result<u64, NvmlError> {
        let _ = target;
        Err(NvmlError::new(
            "nvmlDeviceGetTotalEnergyConsumption",
            Some(NvmlCode::NotSupported),
            "this NVML source has no energy counter",
        ))
    }

    /// Starts GPM sampling of `target`: checks support and takes the first sample. `Err` says
    /// why GPM cannot be sampled there (a fact to record, not a failure of the worker).
    fn gpm_begin(&mut self, target: GpmTarget) -> Result<(), NvmlError> {
        let _ = target;
        Err(NvmlError::new(
            "nvmlGpmQueryDeviceSupport",
            Some(NvmlCode::NotSupported),
            "this NVML source does not implement GPM",
        ))
    }

    /// Takes the next GPM sample of a target started with [`NvmlSource::gpm_begin`] and returns
    /// the metrics since the previous one. On `Err` the previous sample stays the reference.
    fn gpm_next(&mut self, target: GpmTarget) -> Result<GpmValues, NvmlError> {
        let _ = target;
        Err(NvmlError::new(
            "nvmlGpmSampleGet",
            Some(NvmlCode::NotSupported),
            "this NVML source does not implement GPM",
        ))
    }
}

/// The MIG devices of one GPU and the indices that were skipped.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MigEnumeration {
    /// The MIG devices found, in index order.
    pub devices: Vec<MigFacts>,
    /// Indices NVML refused with `NVML_ERROR_INVALID_ARGUMENT` or `NVML_ERROR_NO_PERMISSION`,
    /// with the error: skipped, not fatal.
    pub skipped: Vec<(u32, NvmlError)>,
}

/// Walks the MIG device indices of GPU `gpu_index` as NVIDIA's go-nvlib does
/// (`VisitMigDevices`): every index below `nvmlDeviceGetMaxMigDeviceCount`, an index without a
/// device (`NVML_ERROR_NOT_FOUND`) passed over, and one refused with
/// `NVML_ERROR_INVALID_ARGUMENT` or `NVML_ERROR_NO_PERMISSION` skipped and recorded, so that one
/// bad index does not hide the GPU's other devices. Any other error fails the GPU.
pub fn enumerate_mig_devices<S: NvmlSource + ?Sized>(
    source: &S,
    gpu_index: u32,
) -> Result<MigEnumeration, NvmlError> {
    let max = source.max_mig_devices(gpu_index)?;
    let mut out = MigEnumeration::default();
    for index in 0..max {
        match source.mig_device(gpu_index, index) {
            Ok(Some(m)) => out.devices.push(m),
            Ok(None) => {}
            Err(e) if e.skips_mig_index() => out.skipped.push((index, e)),
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// One compute process NVML lists on a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ComputeProcess {
    /// Process id (host PID namespace).
    pub pid: u32,
    /// Device memory it uses, bytes, when NVML knows.
    pub used_memory_bytes: Option<u64>,
}

/// The real NVML, loaded at run time.
pub struct RealNvml {
    /// Running GPM streams. Declared before `nvml` so that their sample buffers are freed before
    /// NVML shuts down (fields drop in declaration order).
    gpm: Vec<GpmStream>,
    nvml: Nvml,
    /// A second handle on the same library for the MIG and GPM calls nvml-wrapper 0.11 does not
    /// wrap (`dlopen` of an already loaded library only bumps its reference count). Shared with
    /// the GPM sample buffers, which need it to free themselves.
    raw: Option<Arc<NvmlLib>>,
}

impl std::fmt::Debug for RealNvml {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RealNvml")
            .field("raw_mig_calls", &self.raw.is_some())
            .field("gpm_streams", &self.gpm)
            .finish_non_exhaustive()
    }
}

/// An error of the wrapped call `call`, keeping NVML's code where the wrapper says it.
fn wrapped(call: impl Into<String>, err: &WrapperError) -> NvmlError {
    let code = match err {
        WrapperError::Uninitialized => Some(NvmlCode::Uninitialized),
        WrapperError::InvalidArg => Some(NvmlCode::InvalidArgument),
        WrapperError::NotSupported => Some(NvmlCode::NotSupported),
        WrapperError::NoPermission => Some(NvmlCode::NoPermission),
        WrapperError::NotFound => Some(NvmlCode::NotFound),
        WrapperError::FunctionNotFound => Some(NvmlCode::FunctionNotFound),
        WrapperError::GpuLost => Some(NvmlCode::GpuIsLost),
        WrapperError::Unknown => Some(NvmlCode::Unknown),
        WrapperError::UnexpectedVariant(rc) => Some(NvmlCode::from_raw(*rc)),
        _ => None,
    };
    NvmlError::new(call, code, err.to_string())
}

/// A symbol of the raw library the driver's NVML lacks (too old a driver).
pub(crate) fn missing_symbol(call: &str, err: &impl std::fmt::Display) -> NvmlError {
    NvmlError::new(
        call,
        Some(NvmlCode::FunctionNotFound),
        format!("this driver's nvml has no such call ({err})"),
    )
}

fn raw_not_loaded(call: &str) -> NvmlError {
    NvmlError::new(
        call,
        None,
        "the raw nvml library did not load, so this call cannot be made",
    )
}

fn compute_mode_name(mode: ComputeMode) -> &'static str {
    match mode {
        ComputeMode::Default => "default",
        ComputeMode::ExclusiveThread => "exclusive_thread",
        ComputeMode::Prohibited => "prohibited",
        ComputeMode::ExclusiveProcess => "exclusive_process",
    }
}

/// The MIG profile in a MIG device's name: `NVIDIA A100-SXM4-40GB MIG 1g.5gb` -> `1g.5gb`.
#[must_use]
pub fn mig_profile_from_name(name: &str) -> Option<String> {
    let (_, rest) = name.rsplit_once(" MIG ")?;
    let profile = rest.split_whitespace().next()?;
    profile.contains('g').then(|| profile.to_owned())
}

impl RealNvml {
    /// Loads `libnvidia-ml.so.1` and initializes NVML.
    pub fn open() -> Result<Self, DeviceError> {
        let nvml = Nvml::init().map_err(|e| {
            DeviceError::NvmlUnavailable(wrapped(format!("nvmlInit ({NVML_LIBRARY})"), &e))
        })?;
        #[expect(
            unsafe_code,
            reason = "loading NVML's C symbols for the MIG enumeration"
        )]
        // SAFETY: loading the same NVML library nvml-wrapper just loaded and initialized; its
        // initializers have already run once in this process and are idempotent.
        let raw = unsafe { NvmlLib::new(NVML_LIBRARY) }.ok().map(Arc::new);
        Ok(RealNvml {
            gpm: Vec::new(),
            nvml,
            raw,
        })
    }

    /// The raw handle of physical GPU `index`, valid while NVML stays initialized.
    fn gpu_handle(&self, index: u32) -> Result<nvmlDevice_t, NvmlError> {
        let gpu = self
            .nvml
            .device_by_index(index)
            .map_err(|e| wrapped(format!("nvmlDeviceGetHandleByIndex({index})"), &e))?;
        #[expect(unsafe_code, reason = "raw handle of a wrapped device")]
        // SAFETY: NVML device handles stay valid until NVML shuts down, which only happens when
        // `self.nvml` drops; the handle is used by calls made through `self`.
        let handle = unsafe { gpu.handle() };
        Ok(handle)
    }

    fn raw(&self, call: &str) -> Result<&NvmlLib, NvmlError> {
        self.raw.as_deref().ok_or_else(|| raw_not_loaded(call))
    }

    fn mig_handle(
        &self,
        gpu_index: u32,
        parent: nvmlDevice_t,
        index: u32,
    ) -> Result<Option<nvmlDevice_t>, NvmlError> {
        const CALL: &str = "nvmlDeviceGetMigDeviceHandleByIndex";
        let get = self
            .raw(CALL)?
            .nvmlDeviceGetMigDeviceHandleByIndex
            .as_ref()
            .map_err(|e| missing_symbol(CALL, e))?;
        let mut handle: nvmlDevice_t = std::ptr::null_mut();
        #[expect(unsafe_code, reason = "NVML C call the wrapper does not expose")]
        // SAFETY: `parent` is a valid handle from this initialized NVML; `handle` is a valid out
        // pointer for the duration of the call.
        let rc = unsafe { get(parent, index, &raw mut handle) };
        if rc == nvmlReturn_enum_NVML_SUCCESS {
            Ok(Some(handle))
        } else if rc == nvmlReturn_enum_NVML_ERROR_NOT_FOUND {
            Ok(None)
        } else {
            Err(raw_error(format!("{CALL}(gpu {gpu_index}, {index})"), rc))
        }
    }

    /// A MIG id of a MIG device handle through `get` (`nvmlDeviceGetGpuInstanceId` or
    /// `nvmlDeviceGetComputeInstanceId`).
    fn mig_id(
        get: Option<&unsafe extern "C" fn(nvmlDevice_t, *mut u32) -> nvmlReturn_t>,
        mig: nvmlDevice_t,
    ) -> Option<u32> {
        let get = get?;
        let mut id: u32 = 0;
        #[expect(unsafe_code, reason = "NVML C call the wrapper does not expose")]
        // SAFETY: `mig` is a valid MIG device handle of the initialized NVML; `id` is a valid out
        // pointer for the duration of the call.
        let rc = unsafe { get(mig, &raw mut id) };
        (rc == nvmlReturn_enum_NVML_SUCCESS).then_some(id)
    }

    fn with_target<T>(
        &self,
        target: NvmlTarget,
        call: &str,
        f: impl FnOnce(&nvml_wrapper::Device<'_>) -> Result<T, WrapperError>,
    ) -> Result<T, NvmlError> {
        let gpu = self.nvml.device_by_index(target.gpu_index).map_err(|e| {
            wrapped(
                format!("nvmlDeviceGetHandleByIndex({})", target.gpu_index),
                &e,
            )
        })?;
        let Some(mig) = target.mig_index else {
            return f(&gpu).map_err(|e| wrapped(call, &e));
        };
        #[expect(unsafe_code, reason = "raw handle of a wrapped device")]
        // SAFETY: the handle belongs to `gpu`, which lives through this function.
        let parent = unsafe { gpu.handle() };
        let handle = self
            .mig_handle(target.gpu_index, parent, mig)?
            .ok_or_else(|| {
                NvmlError::new(
                    format!(
                        "nvmlDeviceGetMigDeviceHandleByIndex(gpu {}, {mig})",
                        target.gpu_index
                    ),
                    Some(NvmlCode::NotFound),
                    "no such mig device",
                )
            })?;
        #[expect(unsafe_code, reason = "wrapping a MIG handle NVML returned")]
        // SAFETY: `handle` is a valid MIG device handle from this NVML instance, which outlives
        // the wrapper built here.
        let device = unsafe { nvml_wrapper::Device::new(handle, &self.nvml) };
        f(&device).map_err(|e| wrapped(call, &e))
    }
}

impl NvmlSource for RealNvml {
    fn driver_version(&self) -> Option<String> {
        self.nvml.sys_driver_version().ok()
    }

    fn cuda_driver_version(&self) -> Option<String> {
        let v = self.nvml.sys_cuda_driver_version().ok()?;
        Some(format!(
            "{}.{}",
            nvml_wrapper::cuda_driver_version_major(v),
            nvml_wrapper::cuda_driver_version_minor(v)
        ))
    }

    fn gpu_count(&self) -> Result<u32, NvmlError> {
        self.nvml
            .device_count()
            .map_err(|e| wrapped("nvmlDeviceGetCount", &e))
    }

    fn gpu(&self, index: u32) -> Result<GpuFacts, NvmlError> {
        let d = self
            .nvml
            .device_by_index(index)
            .map_err(|e| wrapped(format!("nvmlDeviceGetHandleByIndex({index})"), &e))?;
        let uuid = d
            .uuid()
            .map_err(|e| wrapped(format!("nvmlDeviceGetUUID(gpu {index})"), &e))?;
        Ok(GpuFacts {
            index,
            uuid,
            name: d.name().unwrap_or_default(),
            pci_bus_id: d.pci_info().ok().map(|p| p.bus_id),
            mig_mode: d.mig_mode().ok().map(|m| m.current != 0),
            memory_total_bytes: d.memory_info().ok().map(|m| m.total),
            compute_mode: d
                .compute_mode()
                .ok()
                .map(|m| compute_mode_name(m).to_owned()),
        })
    }

    fn max_mig_devices(&self, gpu_index: u32) -> Result<u32, NvmlError> {
        const CALL: &str = "nvmlDeviceGetMaxMigDeviceCount";
        let gpu = self
            .nvml
            .device_by_index(gpu_index)
            .map_err(|e| wrapped(format!("nvmlDeviceGetHandleByIndex({gpu_index})"), &e))?;
        if !gpu.mig_mode().is_ok_and(|m| m.current != 0) {
            return Ok(0);
        }
        let get = self
            .raw(CALL)?
            .nvmlDeviceGetMaxMigDeviceCount
            .as_ref()
            .map_err(|e| missing_symbol(CALL, e))?;
        #[expect(unsafe_code, reason = "raw handle of a wrapped device")]
        // SAFETY: the handle belongs to `gpu`, which lives through this function.
        let parent = unsafe { gpu.handle() };
        let mut count: u32 = 0;
        #[expect(unsafe_code, reason = "NVML C call the wrapper does not expose")]
        // SAFETY: `parent` is a valid handle from this initialized NVML; `count` is a valid out
        // pointer for the duration of the call.
        let rc = unsafe { get(parent, &raw mut count) };
        if rc == nvmlReturn_enum_NVML_SUCCESS {
            Ok(count)
        } else {
            Err(raw_error(format!("{CALL}(gpu {gpu_index})"), rc))
        }
    }

    fn mig_device(&self, gpu_index: u32, mig_index: u32) -> Result<Option<MigFacts>, NvmlError> {
        let parent = self.gpu_handle(gpu_index)?;
        let Some(handle) = self.mig_handle(gpu_index, parent, mig_index)? else {
            return Ok(None);
        };
        #[expect(unsafe_code, reason = "wrapping a MIG handle NVML returned")]
        // SAFETY: `handle` is a valid MIG device handle from this NVML instance, which
        // outlives the wrapper built here.
        let mig = unsafe { nvml_wrapper::Device::new(handle, &self.nvml) };
        let uuid = mig.uuid().map_err(|e| {
            wrapped(
                format!("nvmlDeviceGetUUID(gpu {gpu_index}, mig device {mig_index})"),
                &e,
            )
        })?;
        let name = mig.name().ok();
        let raw = self.raw.as_deref();
        let gpu_instance_id = Self::mig_id(
            raw.and_then(|r| r.nvmlDeviceGetGpuInstanceId.as_ref().ok()),
            handle,
        );
        let compute_instance_id = Self::mig_id(
            raw.and_then(|r| r.nvmlDeviceGetComputeInstanceId.as_ref().ok()),
            handle,
        );
        Ok(Some(MigFacts {
            index: mig_index,
            uuid,
            profile: name.as_deref().and_then(mig_profile_from_name),
            name,
            memory_total_bytes: mig.memory_info().ok().map(|m| m.total),
            gpu_instance_id,
            compute_instance_id,
        }))
    }

    fn compute_processes(&self, target: NvmlTarget) -> Result<Vec<ComputeProcess>, NvmlError> {
        let list = self.with_target(target, "nvmlDeviceGetComputeRunningProcesses", |d| {
            d.running_compute_processes()
        })?;
        Ok(list
            .into_iter()
            .map(|p| ComputeProcess {
                pid: p.pid,
                used_memory_bytes: match p.used_gpu_memory {
                    nvml_wrapper::enums::device::UsedGpuMemory::Used(b) => Some(b),
                    nvml_wrapper::enums::device::UsedGpuMemory::Unavailable => None,
                },
            })
            .collect())
    }

    fn sample(&mut self, gpu_index: u32, t_unix_ns: u64) -> TelemetrySample {
        let mut s = TelemetrySample {
            t_unix_ns,
            ..TelemetrySample::default()
        };
        let Ok(d) = self.nvml.device_by_index(gpu_index) else {
            return s;
        };
        s.power_w = d.power_usage().ok().map(|mw| f64::from(mw) / 1000.0);
        s.sm_clock_mhz = d.clock_info(Clock::SM).ok();
        s.temperature_c = d.temperature(TemperatureSensor::Gpu).ok();
        s.memory_used_bytes = d.memory_info().ok().map(|m| m.used);
        if let Ok(u) = d.utilization_rates() {
            s.gpu_util_pct = Some(u.gpu);
            s.memory_util_pct = Some(u.memory);
        }
        s.throttle_reasons = d.current_throttle_reasons().ok().map(|r| r.bits());
        s
    }

    fn energy_mj(&mut self, target: NvmlTarget) -> Result<u64, NvmlError> {
        self.with_target(target, "nvmlDeviceGetTotalEnergyConsumption", |d| {
            d.total_energy_consumption()
        })
    }

    fn gpm_begin(&mut self, target: GpmTarget) -> Result<(), NvmlError> {
        let raw = self
            .raw
            .clone()
            .ok_or_else(|| raw_not_loaded("nvmlGpmQueryDeviceSupport"))?;
        let parent = self.gpu_handle(target.gpu_index)?;
        let stream = GpmStream::begin(&raw, parent, target)?;
        self.gpm.retain(|s| s.target != target);
        self.gpm.push(stream);
        Ok(())
    }

    fn gpm_next(&mut self, target: GpmTarget) -> Result<GpmValues, NvmlError> {
        let parent = self.gpu_handle(target.gpu_index)?;
        let stream = self
            .gpm
            .iter_mut()
            .find(|s| s.target == target)
            .ok_or_else(|| {
                NvmlError::new(
                    "nvmlGpmSampleGet",
                    None,
                    "gpm_next before gpm_begin succeeded for this target",
                )
            })?;
        stream.next(parent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mig_profiles_come_from_the_device_name() {
        assert_eq!(
            mig_profile_from_name("NVIDIA A100-SXM4-40GB MIG 1g.5gb").as_deref(),
            Some("1g.5gb")
        );
        assert_eq!(
            mig_profile_from_name("NVIDIA H100 80GB HBM3 MIG 3g.40gb").as_deref(),
            Some("3g.40gb")
        );
        assert_eq!(
            mig_profile_from_name("NVIDIA H200 MIG 1c.2g.35gb").as_deref(),
            Some("1c.2g.35gb")
        );
        assert_eq!(mig_profile_from_name("NVIDIA H200"), None);
    }

    #[test]
    fn nvml_absence_is_an_error_not_a_crash() {
        // On a machine without the driver this must be NvmlUnavailable; with one it must work.
        match RealNvml::open() {
            Ok(n) => assert!(n.gpu_count().is_ok()),
            Err(e) => assert_eq!(e.kind(), coload_cohort_schema::FailureKind::NvmlUnavailable),
        }
    }
}
