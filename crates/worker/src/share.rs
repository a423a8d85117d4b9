//! What the worker records about its share of the GPU before it allocates anything:
//! the declared MPS share, its `CUDA_MPS_*` environment, and the free memory and SM count the
//! CUDA runtime reports. Recorded before the workload is built, so that a worker whose build
//! then runs out of memory (a hog took it) still says how much was free when it started.

use coload_cohort_schema::{DeviceKind, Mode, ObservedShare, ShareReport};
use coload_spec::WorkerFlags;

/// The share section for `worker.json`, or `None` for a CPU worker outside mode `mps` (nothing
/// to say there).
pub(crate) fn observe(flags: &WorkerFlags) -> Option<ShareReport> {
    // A device the workload cannot use is refused by the workload's own build, with its own
    // message; here it only means there is nothing to ask.
    let ordinal = coload_workload::cuda_ordinal(flags.device).ok().flatten();
    let mut report = ShareReport {
        declared: None,
        mps_environment: coload_device::mps_environment(),
        observed: None,
        observed_error: None,
    };
    let Some(index) = ordinal else {
        if flags.mode != Mode::Mps {
            return None;
        }
        report.declared = flags.declared_share(None);
        return Some(report);
    };
    // NVML's total, as the device plugin reads it, for the replicas arithmetic; and the model
    // name, for its physical SM count.
    let device = coload_device::identify(DeviceKind::Cuda, Some(index));
    report.declared = flags.declared_share(device.info.memory_total_bytes);
    match coload_workload::probe_device(index) {
        Ok(facts) => {
            report.observed = Some(ObservedShare {
                memory_free_bytes: facts.memory_free_bytes,
                memory_total_bytes: facts.memory_total_bytes,
                sm_count: facts.sm_count,
                physical_sm_count: device
                    .info
                    .gpu_name
                    .as_deref()
                    .and_then(coload_device::physical_sm_count),
            });
        }
        Err(e) => report.observed_error = Some(e.to_string()),
    }
    Some(report)
}

/// One line for the log: what the runtime reported against the share.
pub(crate) fn describe(report: &ShareReport) -> String {
    let declared = report
        .declared
        .as_ref()
        .map(|d| format!("declared {}; ", d.describe()))
        .unwrap_or_default();
    match (&report.observed, &report.observed_error) {
        (Some(o), _) => format!(
            "{declared}the runtime reports {} MiB free of {} MiB, {} SMs{}",
            o.memory_free_bytes >> 20,
            o.memory_total_bytes >> 20,
            o.sm_count.map_or_else(|| "?".to_owned(), |n| n.to_string()),
            o.physical_sm_count
                .map(|p| format!(" (of {p})"))
                .unwrap_or_default()
        ),
        (None, Some(e)) => format!("{declared}the runtime could not be asked: {e}"),
        (None, None) => format!("{declared}no CUDA device"),
    }
}
