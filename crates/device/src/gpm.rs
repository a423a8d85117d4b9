//! NVML GPM (GPU Performance Monitoring, Hopper and later) through raw NVML calls.
//!
//! nvml-wrapper 0.11 wraps none of the GPM calls, so they go through `nvml-wrapper-sys`'s
//! `NvmlLib` (the same `libnvidia-ml.so.1` that nvml-wrapper loaded): `nvmlGpmQueryDeviceSupport`,
//! `nvmlGpmSampleAlloc` / `nvmlGpmSampleFree` (owned here by [`GpmSampleBuf`], freed on drop),
//! `nvmlGpmSampleGet` (device-wide) or `nvmlGpmMigSampleGet` (one MIG GPU instance, addressed by
//! the parent GPU and the instance id), and `nvmlGpmMetricsGet`, which turns two samples into
//! rates over the time between them. A [`GpmStream`] keeps the last sample of one target and a
//! spare buffer, so each reading costs two NVML calls and no allocation.
//!
//! Only the telemetry thread calls these (see [`crate::TelemetrySampler`]); the timed window's
//! thread never does.

use std::sync::Arc;

use coload_cohort_schema::{ActivityScope, BYTES_PER_MIB, GpmValues};
use nvml_wrapper_sys::bindings::{
    NVML_GPM_METRICS_GET_VERSION, NVML_GPM_SUPPORT_VERSION, NvmlLib, nvmlDevice_t,
    nvmlGpmMetricId_t_NVML_GPM_METRIC_ANY_TENSOR_UTIL,
    nvmlGpmMetricId_t_NVML_GPM_METRIC_DRAM_BW_UTIL, nvmlGpmMetricId_t_NVML_GPM_METRIC_FP16_UTIL,
    nvmlGpmMetricId_t_NVML_GPM_METRIC_FP32_UTIL, nvmlGpmMetricId_t_NVML_GPM_METRIC_FP64_UTIL,
    nvmlGpmMetricId_t_NVML_GPM_METRIC_GRAPHICS_UTIL,
    nvmlGpmMetricId_t_NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC,
    nvmlGpmMetricId_t_NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC,
    nvmlGpmMetricId_t_NVML_GPM_METRIC_PCIE_RX_PER_SEC,
    nvmlGpmMetricId_t_NVML_GPM_METRIC_PCIE_TX_PER_SEC,
    nvmlGpmMetricId_t_NVML_GPM_METRIC_SM_OCCUPANCY, nvmlGpmMetricId_t_NVML_GPM_METRIC_SM_UTIL,
    nvmlGpmMetricsGet_t, nvmlGpmSample_t, nvmlGpmSupport_t, nvmlReturn_enum_NVML_SUCCESS,
    nvmlReturn_t,
};

use crate::error::{NvmlCode, NvmlError, raw_error};

/// Where GPM samples: the whole physical GPU, or one MIG GPU instance of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GpmTarget {
    /// NVML index of the physical GPU (the MIG parent).
    pub gpu_index: u32,
    /// `None`: device-wide; `Some(id)`: the MIG GPU instance with that id.
    pub gpu_instance_id: Option<u32>,
}

impl GpmTarget {
    /// Device-wide or MIG instance.
    #[must_use]
    pub fn scope(&self) -> ActivityScope {
        if self.gpu_instance_id.is_some() {
            ActivityScope::Mig
        } else {
            ActivityScope::Device
        }
    }
}

/// The NVML metric ids coload asks for, in `GPM_METRIC_NAMES` order, with the factor from
/// NVML's unit to coload's (MiB/s to bytes/s for PCIe and NVLink, percent stays percent).
const METRICS: [(u32, f64); 12] = [
    (nvmlGpmMetricId_t_NVML_GPM_METRIC_GRAPHICS_UTIL, 1.0),
    (nvmlGpmMetricId_t_NVML_GPM_METRIC_SM_UTIL, 1.0),
    (nvmlGpmMetricId_t_NVML_GPM_METRIC_SM_OCCUPANCY, 1.0),
    (nvmlGpmMetricId_t_NVML_GPM_METRIC_ANY_TENSOR_UTIL, 1.0),
    (nvmlGpmMetricId_t_NVML_GPM_METRIC_DRAM_BW_UTIL, 1.0),
    (nvmlGpmMetricId_t_NVML_GPM_METRIC_FP32_UTIL, 1.0),
    (nvmlGpmMetricId_t_NVML_GPM_METRIC_FP16_UTIL, 1.0),
    (nvmlGpmMetricId_t_NVML_GPM_METRIC_FP64_UTIL, 1.0),
    (
        nvmlGpmMetricId_t_NVML_GPM_METRIC_PCIE_RX_PER_SEC,
        BYTES_PER_MIB,
    ),
    (
        nvmlGpmMetricId_t_NVML_GPM_METRIC_PCIE_TX_PER_SEC,
        BYTES_PER_MIB,
    ),
    (
        nvmlGpmMetricId_t_NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC,
        BYTES_PER_MIB,
    ),
    (
        nvmlGpmMetricId_t_NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC,
        BYTES_PER_MIB,
    ),
];

/// NVML's return code as an error, with a hint where the cause is usually the host's setup.
pub(crate) fn describe_rc(call: &str, rc: nvmlReturn_t) -> NvmlError {
    let error = raw_error(call, rc);
    let hint = match rc {
        nvml_wrapper_sys::bindings::nvmlReturn_enum_NVML_ERROR_NO_PERMISSION => {
            " (the driver may restrict performance counters to administrators: \
             NVreg_RestrictProfilingToAdminUsers)"
        }
        nvml_wrapper_sys::bindings::nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED => {
            " (GPM needs a Hopper or later GPU and driver)"
        }
        _ => "",
    };
    NvmlError::new(call, error.code(), format!("{}{hint}", error.message()))
}

/// A symbol of the loaded library, or why GPM cannot work without it.
fn symbol<'a, T, E: std::fmt::Display>(
    found: &'a Result<T, E>,
    name: &str,
) -> Result<&'a T, NvmlError> {
    found.as_ref().map_err(|e| {
        NvmlError::new(
            name,
            Some(NvmlCode::FunctionNotFound),
            format!("this driver's NVML has no such call (driver too old for GPM): {e}"),
        )
    })
}

/// One GPM sample buffer, allocated by `nvmlGpmSampleAlloc` and freed by `nvmlGpmSampleFree` on
/// drop. It holds the library so that the free call outlives nothing it needs.
pub(crate) struct GpmSampleBuf {
    lib: Arc<NvmlLib>,
    handle: nvmlGpmSample_t,
}

#[expect(
    unsafe_code,
    reason = "an NVML sample handle is an opaque heap object owned by this value alone"
)]
// SAFETY: the handle is only used through `&mut self` or by value (never shared), and NVML's API
// is thread-safe, so moving the owner to another thread is sound.
unsafe impl Send for GpmSampleBuf {}

impl GpmSampleBuf {
    fn alloc(lib: &Arc<NvmlLib>) -> Result<Self, NvmlError> {
        let alloc = symbol(&lib.nvmlGpmSampleAlloc, "nvmlGpmSampleAlloc")?;
        // Both must exist before a buffer is made that would have to be freed.
        symbol(&lib.nvmlGpmSampleFree, "nvmlGpmSampleFree")?;
        let mut handle: nvmlGpmSample_t = std::ptr::null_mut();
        #[expect(unsafe_code, reason = "NVML C call the wrapper does not expose")]
        // SAFETY: `handle` is a valid out pointer for the duration of the call; NVML is
        // initialized (the caller holds the `Nvml` that initialized it).
        let rc = unsafe { alloc(&raw mut handle) };
        if rc != nvmlReturn_enum_NVML_SUCCESS || handle.is_null() {
            return Err(describe_rc("nvmlGpmSampleAlloc", rc));
        }
        Ok(GpmSampleBuf {
            lib: Arc::clone(lib),
            handle,
        })
    }
}

impl Drop for GpmSampleBuf {
    fn drop(&mut self) {
        if let Ok(free) = self.lib.nvmlGpmSampleFree.as_ref() {
            #[expect(unsafe_code, reason = "NVML C call the wrapper does not expose")]
            // SAFETY: `handle` came from nvmlGpmSampleAlloc, is freed exactly once (here), and
            // the library stays loaded through `self.lib`.
            let _ = unsafe { free(self.handle) };
        }
    }
}

/// GPM sampling of one target: the last sample taken and a spare buffer for the next.
pub(crate) struct GpmStream {
    pub(crate) target: GpmTarget,
    previous: GpmSampleBuf,
    spare: GpmSampleBuf,
}

impl std::fmt::Debug for GpmStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpmStream")
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

/// Whether `parent` supports GPM (`nvmlGpmQueryDeviceSupport`).
fn check_support(lib: &NvmlLib, parent: nvmlDevice_t) -> Result<(), NvmlError> {
    let query = symbol(&lib.nvmlGpmQueryDeviceSupport, "nvmlGpmQueryDeviceSupport")?;
    let mut support = nvmlGpmSupport_t {
        version: NVML_GPM_SUPPORT_VERSION,
        isSupportedDevice: 0,
    };
    #[expect(unsafe_code, reason = "NVML C call the wrapper does not expose")]
    // SAFETY: `parent` is a valid device handle of the initialized NVML; `support` is a valid,
    // versioned in/out struct for the duration of the call.
    let rc = unsafe { query(parent, &raw mut support) };
    if rc != nvmlReturn_enum_NVML_SUCCESS {
        return Err(describe_rc("nvmlGpmQueryDeviceSupport", rc));
    }
    if support.isSupportedDevice == 0 {
        return Err(NvmlError::new(
            "nvmlGpmQueryDeviceSupport",
            Some(NvmlCode::NotSupported),
            "this GPU does not support GPM (it needs Hopper or later)",
        ));
    }
    Ok(())
}

/// Takes a sample of `target` into `buf`.
fn take_sample(
    lib: &NvmlLib,
    parent: nvmlDevice_t,
    target: GpmTarget,
    buf: &mut GpmSampleBuf,
) -> Result<(), NvmlError> {
    let rc = match target.gpu_instance_id {
        None => {
            let get = symbol(&lib.nvmlGpmSampleGet, "nvmlGpmSampleGet")?;
            #[expect(unsafe_code, reason = "NVML C call the wrapper does not expose")]
            // SAFETY: `parent` is a valid device handle; `buf.handle` is a live sample buffer
            // owned exclusively through `&mut buf`.
            unsafe {
                get(parent, buf.handle)
            }
        }
        Some(id) => {
            let get = symbol(&lib.nvmlGpmMigSampleGet, "nvmlGpmMigSampleGet")?;
            #[expect(unsafe_code, reason = "NVML C call the wrapper does not expose")]
            // SAFETY: as above; `id` is a plain integer NVML validates itself.
            unsafe {
                get(parent, id, buf.handle)
            }
        }
    };
    if rc == nvmlReturn_enum_NVML_SUCCESS {
        Ok(())
    } else {
        let call = if target.gpu_instance_id.is_some() {
            "nvmlGpmMigSampleGet"
        } else {
            "nvmlGpmSampleGet"
        };
        Err(describe_rc(call, rc))
    }
}

/// The metrics between `first` and `second` (`nvmlGpmMetricsGet`). A metric NVML does not answer
/// (NVLink on a GPU without links, say) is `None`.
fn metrics_between(
    lib: &NvmlLib,
    first: &GpmSampleBuf,
    second: &GpmSampleBuf,
) -> Result<GpmValues, NvmlError> {
    let get = symbol(&lib.nvmlGpmMetricsGet, "nvmlGpmMetricsGet")?;
    #[expect(unsafe_code, reason = "zero-initializing a plain C struct")]
    // SAFETY: nvmlGpmMetricsGet_t holds integers, doubles and raw pointers only, for all of
    // which all-zero bytes are a valid value (null pointers, zero counts).
    let mut request: nvmlGpmMetricsGet_t = unsafe { std::mem::zeroed() };
    request.version = NVML_GPM_METRICS_GET_VERSION;
    request.numMetrics = METRICS.len() as u32;
    request.sample1 = first.handle;
    request.sample2 = second.handle;
    for (slot, (id, _)) in request.metrics.iter_mut().zip(METRICS) {
        slot.metricId = id;
    }
    #[expect(unsafe_code, reason = "NVML C call the wrapper does not expose")]
    // SAFETY: `request` is a valid, versioned struct (NVML_GPM_METRICS_GET_VERSION 1 pairs with
    // the 98-entry array of these bindings) whose samples are live buffers; NVML reads
    // `numMetrics` entries and writes results into them; the name pointers it writes point into
    // NVML's static storage and are not kept.
    let rc = unsafe { get(&raw mut request) };
    if rc != nvmlReturn_enum_NVML_SUCCESS {
        return Err(describe_rc("nvmlGpmMetricsGet", rc));
    }
    Ok(GpmValues::from_fn(|i| {
        let m = &request.metrics[i];
        let (_, factor) = METRICS[i];
        (m.nvmlReturn == nvmlReturn_enum_NVML_SUCCESS && m.value.is_finite())
            .then_some(m.value * factor)
    }))
}

impl GpmStream {
    /// Checks support, allocates the two buffers and takes the first sample.
    pub(crate) fn begin(
        lib: &Arc<NvmlLib>,
        parent: nvmlDevice_t,
        target: GpmTarget,
    ) -> Result<Self, NvmlError> {
        check_support(lib, parent)?;
        let mut previous = GpmSampleBuf::alloc(lib)?;
        let spare = GpmSampleBuf::alloc(lib)?;
        take_sample(lib, parent, target, &mut previous)?;
        Ok(GpmStream {
            target,
            previous,
            spare,
        })
    }

    /// Takes the next sample and returns the metrics since the previous one, which it then
    /// replaces. On any failure the previous sample stays, so the next reading spans the gap.
    pub(crate) fn next(&mut self, parent: nvmlDevice_t) -> Result<GpmValues, NvmlError> {
        let lib = Arc::clone(&self.previous.lib);
        take_sample(&lib, parent, self.target, &mut self.spare)?;
        let values = metrics_between(&lib, &self.previous, &self.spare)?;
        std::mem::swap(&mut self.previous, &mut self.spare);
        Ok(values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_ids_follow_the_schema_order_and_units() {
        // The schema's names and NVML's ids must line up one to one: a swapped pair would put
        // DRAM bandwidth under SM occupancy without any other test noticing.
        let expected = [
            ("graphics_util_pct", 1),
            ("sm_util_pct", 2),
            ("sm_occupancy_pct", 3),
            ("any_tensor_util_pct", 5),
            ("dram_bw_util_pct", 10),
            ("fp32_util_pct", 12),
            ("fp16_util_pct", 13),
            ("fp64_util_pct", 11),
            ("pcie_rx_bytes_per_s", 21),
            ("pcie_tx_bytes_per_s", 20),
            ("nvlink_rx_bytes_per_s", 60),
            ("nvlink_tx_bytes_per_s", 61),
        ];
        for (i, (name, id)) in expected.iter().enumerate() {
            assert_eq!(coload_cohort_schema::GPM_METRIC_NAMES[i], *name);
            assert_eq!(METRICS[i].0, *id, "{name}");
            let bytes = name.ends_with("_bytes_per_s");
            let factor = if bytes { BYTES_PER_MIB } else { 1.0 };
            assert!((METRICS[i].1 - factor).abs() < f64::EPSILON, "{name}");
        }
    }

    #[test]
    fn return_codes_read_as_words_with_a_hint() {
        let error = describe_rc(
            "nvmlGpmSampleGet",
            nvml_wrapper_sys::bindings::nvmlReturn_enum_NVML_ERROR_NO_PERMISSION,
        );
        assert_eq!(error.code(), Some(NvmlCode::NoPermission));
        assert_eq!(error.call(), "nvmlGpmSampleGet");
        let text = error.to_string();
        assert!(text.starts_with("nvmlGpmSampleGet: the current user does not have permission"));
        assert!(
            text.contains("NVreg_RestrictProfilingToAdminUsers"),
            "{text}"
        );
        let text = describe_rc(
            "nvmlGpmQueryDeviceSupport",
            nvml_wrapper_sys::bindings::nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED,
        )
        .to_string();
        assert!(text.contains("Hopper"), "{text}");
    }

    #[test]
    fn targets_name_their_scope() {
        let device = GpmTarget {
            gpu_index: 0,
            gpu_instance_id: None,
        };
        let mig = GpmTarget {
            gpu_index: 0,
            gpu_instance_id: Some(7),
        };
        assert_eq!(device.scope(), ActivityScope::Device);
        assert_eq!(mig.scope(), ActivityScope::Mig);
    }
}
