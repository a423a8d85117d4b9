//! The allocation contract: does the device the worker got match the sharing mode it declared?
//!
//! Each rule below produces a named warning; with strict checking any warning becomes
//! [`DeviceError::AllocationMismatch`] (exit code `allocation_mismatch`, 21).
//!
//! | warning | when |
//! | --- | --- |
//! | `no_gpu` | the worker runs on the CPU (every mode declares a GPU allocation) |
//! | `allocation_unverified` | a CUDA device NVML could not identify (no NVML, unresolved) |
//! | `not_a_mig_device` | mode `mig` / `mig-timeslice` on a whole GPU |
//! | `unexpected_mig_device` | mode `exclusive` / `timeslice` / `mps` on a MIG device |
//! | `gpu_shared` | mode `exclusive` while other compute processes use the same device |
//! | `compute_mode_exclusive` | a sharing mode on a GPU in `exclusive_process` compute mode |
//! | `compute_prohibited` | the GPU's compute mode is `prohibited` |
//! | `not_an_mps_client` | mode `mps` but no MPS server is reachable |
//! | `unexpected_mps_client` | another mode while the process is an MPS client |
//!
//! The MPS share a worker declares (`--mps-replicas`, `--mps-unlimited`, `--mps-threads` and
//! `--mps-memory`) is checked against what the CUDA runtime reported by [`crate::check_share`]
//! (module `share`): `mps_memory_limit_not_applied`, `mps_memory_below_share`,
//! `mps_threads_not_applied`, `mps_threads_below_share`, `mps_threads_limited` and
//! `mps_share_unverified`, under the same strict rule.
//!
//! Strict checking treats `allocation_unverified` as a failure too: strict means the allocation
//! was shown to match, not merely not shown to differ.

use coload_cohort_schema::{DeviceInfo, DeviceKind, Mode, WorkerWarning};

use crate::error::DeviceError;
use crate::identify::{DeviceReport, warning};
use crate::nvml::{NvmlSource, NvmlTarget, RealNvml};

/// What the worker observed about sharing, beyond its [`DeviceInfo`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SharingFacts {
    /// Compute processes other than this one on the worker's device (the MIG device itself for
    /// a MIG worker), or `None` when NVML could not tell.
    pub other_compute_processes: Option<u32>,
    /// Whether this process is a CUDA MPS client (see [`crate::mps_client`]).
    pub mps_client: bool,
}

/// Counts the other compute processes on the report's device through the real NVML.
///
/// `own_context` says whether this process already holds a CUDA context there (after the
/// workload's warmup it does). NVML lists host PIDs; inside a container this process's PID
/// differs, so when `own_context` is set and this PID is not in the list, one entry is taken to
/// be this process.
#[must_use]
pub fn other_compute_processes(report: &DeviceReport, own_context: bool) -> Option<u32> {
    let target = report.target?;
    let nvml = RealNvml::open().ok()?;
    other_compute_processes_with(&nvml, target, std::process::id(), own_context)
}

/// [`other_compute_processes`] against any NVML source.
#[must_use]
pub fn other_compute_processes_with(
    source: &dyn NvmlSource,
    target: NvmlTarget,
    own_pid: u32,
    own_context: bool,
) -> Option<u32> {
    let list = source.compute_processes(target).ok()?;
    let total = list.len() as u32;
    let own = u32::from(list.iter().any(|p| p.pid == own_pid) || (own_context && total > 0));
    Some(total - own)
}

/// Checks the declared mode against the device. Returns the warnings to record, or, when
/// `strict` and any rule fired, [`DeviceError::AllocationMismatch`] carrying them all.
pub fn check_allocation(
    mode: Mode,
    info: &DeviceInfo,
    sharing: &SharingFacts,
    strict: bool,
) -> Result<Vec<WorkerWarning>, DeviceError> {
    let warnings = allocation_warnings(mode, info, sharing);
    if strict && !warnings.is_empty() {
        return Err(DeviceError::AllocationMismatch {
            mode: mode.to_string(),
            warnings,
        });
    }
    Ok(warnings)
}

fn allocation_warnings(
    mode: Mode,
    info: &DeviceInfo,
    sharing: &SharingFacts,
) -> Vec<WorkerWarning> {
    let mut out = Vec::new();
    if info.kind == DeviceKind::Cpu {
        out.push(warning(
            "no_gpu",
            format!("mode `{mode}` declares a GPU allocation but the worker runs on the CPU"),
        ));
        return out;
    }
    let Some(gpu) = info.gpu_uuid.as_deref() else {
        out.push(warning(
            "allocation_unverified",
            format!("mode `{mode}` cannot be checked: NVML did not identify the CUDA device"),
        ));
        return out;
    };
    let on_mig = info.mig_uuid.is_some();
    match mode {
        Mode::Mig | Mode::MigTimeslice if !on_mig => out.push(warning(
            "not_a_mig_device",
            format!(
                "mode `{mode}` but the worker runs on the whole GPU {gpu} (MIG mode {})",
                match info.mig_mode {
                    Some(true) => "enabled",
                    Some(false) => "disabled",
                    None => "unsupported",
                }
            ),
        )),
        Mode::Exclusive | Mode::Timeslice | Mode::Mps if on_mig => out.push(warning(
            "unexpected_mig_device",
            format!(
                "mode `{mode}` but the worker runs on MIG device {} ({}) of {gpu}",
                info.mig_uuid.as_deref().unwrap_or("?"),
                info.mig_profile.as_deref().unwrap_or("unknown profile")
            ),
        )),
        _ => {}
    }
    if mode == Mode::Exclusive
        && let Some(n) = sharing.other_compute_processes.filter(|&n| n > 0)
    {
        out.push(warning(
            "gpu_shared",
            format!("mode `exclusive` but {n} other compute process(es) use {gpu}"),
        ));
    }
    match info.compute_mode.as_deref() {
        Some("exclusive_process" | "exclusive_thread")
            if matches!(mode, Mode::Timeslice | Mode::MigTimeslice) =>
        {
            out.push(warning(
                "compute_mode_exclusive",
                format!(
                    "mode `{mode}` but {gpu} is in exclusive compute mode: only one process \
                     can use it at a time"
                ),
            ));
        }
        Some("prohibited") => out.push(warning(
            "compute_prohibited",
            format!("{gpu} is in compute mode `prohibited`: no CUDA context can use it"),
        )),
        _ => {}
    }
    if mode == Mode::Mps && !sharing.mps_client {
        out.push(warning(
            "not_an_mps_client",
            format!(
                "mode `mps` but no MPS server is reachable (no control socket or pipe in {})",
                std::env::var("CUDA_MPS_PIPE_DIRECTORY")
                    .ok()
                    .filter(|d| !d.is_empty())
                    .unwrap_or_else(|| crate::DEFAULT_MPS_PIPE_DIRECTORY.to_owned())
            ),
        ));
    } else if mode != Mode::Mps && sharing.mps_client {
        out.push(warning(
            "unexpected_mps_client",
            format!("mode `{mode}` but the process is a client of an MPS server"),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FakeNvml;
    use crate::identify::{VisibleEnv, identify_with};
    use coload_cohort_schema::exit;

    fn device(nvml: &FakeNvml, cvd: &str) -> DeviceInfo {
        let env = VisibleEnv {
            cuda_visible_devices: Some(cvd.into()),
            ..VisibleEnv::default()
        };
        identify_with(Some(nvml), &env, DeviceKind::Cuda, Some(0)).info
    }

    fn whole() -> DeviceInfo {
        device(&FakeNvml::new().with_gpu("GPU-aaaa", "NVIDIA H200"), "0")
    }

    fn mig() -> DeviceInfo {
        let nvml = FakeNvml::new()
            .with_gpu("GPU-aaaa", "NVIDIA H200")
            .with_mig("1g.18gb", "MIG-1111");
        device(&nvml, "MIG-1111")
    }

    fn kinds(w: &[WorkerWarning]) -> Vec<&str> {
        w.iter().map(|w| w.kind.as_str()).collect::<Vec<_>>()
    }

    const ALONE: SharingFacts = SharingFacts {
        other_compute_processes: Some(0),
        mps_client: false,
    };

    #[test]
    fn matching_allocations_produce_no_warning() {
        for (mode, info) in [
            (Mode::Exclusive, whole()),
            (Mode::Timeslice, whole()),
            (Mode::Mig, mig()),
            (Mode::MigTimeslice, mig()),
        ] {
            assert_eq!(
                check_allocation(mode, &info, &ALONE, true).unwrap(),
                Vec::<WorkerWarning>::new(),
                "{mode}"
            );
        }
        let mps = SharingFacts {
            mps_client: true,
            ..ALONE
        };
        assert!(
            check_allocation(Mode::Mps, &whole(), &mps, true)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn mig_mode_on_a_whole_gpu_is_named() {
        let w = check_allocation(Mode::Mig, &whole(), &ALONE, false).unwrap();
        assert_eq!(kinds(&w), ["not_a_mig_device"]);
        assert!(w[0].message.contains("GPU-aaaa") && w[0].message.contains("disabled"));
    }

    #[test]
    fn exclusive_on_a_mig_device_or_shared_is_named() {
        let w = check_allocation(Mode::Exclusive, &mig(), &ALONE, false).unwrap();
        assert_eq!(kinds(&w), ["unexpected_mig_device"]);
        assert!(w[0].message.contains("1g.18gb"));

        let shared = SharingFacts {
            other_compute_processes: Some(2),
            mps_client: false,
        };
        let w = check_allocation(Mode::Exclusive, &whole(), &shared, false).unwrap();
        assert_eq!(kinds(&w), ["gpu_shared"]);
        assert!(w[0].message.contains("2 other"));
        // Sharing is the point of time-slicing.
        assert!(
            check_allocation(Mode::Timeslice, &whole(), &shared, false)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn strict_checking_turns_warnings_into_the_allocation_mismatch_error() {
        let err = check_allocation(Mode::Mig, &whole(), &ALONE, true).unwrap_err();
        assert_eq!(err.exit_code(), exit::ALLOCATION_MISMATCH);
        assert_eq!(
            err.kind(),
            coload_cohort_schema::FailureKind::AllocationMismatch
        );
        assert!(err.to_string().contains("not_a_mig_device"), "{err}");
    }

    #[test]
    fn cpu_and_unidentified_devices_are_named() {
        let w = check_allocation(Mode::Timeslice, &DeviceInfo::cpu(), &ALONE, false).unwrap();
        assert_eq!(kinds(&w), ["no_gpu"]);
        let mut unknown = DeviceInfo::cpu();
        unknown.kind = DeviceKind::Cuda;
        let w = check_allocation(Mode::Exclusive, &unknown, &ALONE, false).unwrap();
        assert_eq!(kinds(&w), ["allocation_unverified"]);
        assert!(check_allocation(Mode::Exclusive, &unknown, &ALONE, true).is_err());
    }

    #[test]
    fn compute_modes_and_mps_are_checked() {
        let nvml = FakeNvml::new()
            .with_gpu("GPU-aaaa", "NVIDIA H200")
            .with_compute_mode("exclusive_process");
        let info = device(&nvml, "0");
        let w = check_allocation(Mode::Timeslice, &info, &ALONE, false).unwrap();
        assert_eq!(kinds(&w), ["compute_mode_exclusive"]);

        let w = check_allocation(Mode::Mps, &whole(), &ALONE, false).unwrap();
        assert_eq!(kinds(&w), ["not_an_mps_client"]);
        let client = SharingFacts {
            mps_client: true,
            ..ALONE
        };
        let w = check_allocation(Mode::Timeslice, &whole(), &client, false).unwrap();
        assert_eq!(kinds(&w), ["unexpected_mps_client"]);
    }

    #[test]
    fn other_processes_exclude_this_one_even_across_pid_namespaces() {
        let t = NvmlTarget {
            gpu_index: 0,
            mig_index: None,
        };
        let nvml = FakeNvml::new()
            .with_gpu("GPU-aaaa", "NVIDIA H200")
            .with_processes(t, &[100, 200, 300]);
        assert_eq!(other_compute_processes_with(&nvml, t, 200, false), Some(2));
        assert_eq!(other_compute_processes_with(&nvml, t, 7, true), Some(2));
        assert_eq!(other_compute_processes_with(&nvml, t, 7, false), Some(3));
        let empty = FakeNvml::new().with_gpu("GPU-aaaa", "NVIDIA H200");
        assert_eq!(other_compute_processes_with(&empty, t, 7, true), Some(0));
    }
}
