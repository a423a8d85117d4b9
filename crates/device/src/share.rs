//! The MPS share contract: does what the CUDA runtime reported match the share the worker
//! declared?
//!
//! Under an MPS pinned device memory limit, `cudaMemGetInfo` reports at most the limit as free
//! while its total stays the device's size (seen on the H200: 19.9 GiB free of 139.8 GiB under a
//! 20 GiB limit), and under an active thread percentage the runtime reports fewer SMs (a T4's 40
//! SMs read as 4 at 10 %, k8s-device-plugin issue 679). So a worker that asks the runtime before
//! it allocates anything can tell which share it really runs under, and one whose declared
//! share was not applied (a node configured with another `replicas`, a daemon without limits)
//! says so. The rules, each a named warning (an error under strict checking, like the other
//! allocation warnings):
//!
//! | warning | when |
//! | --- | --- |
//! | `mps_share_unverified` | a share is declared on a CUDA device but the runtime could not be asked, or a thread limit is declared on a GPU whose physical SM count is not known here |
//! | `mps_memory_limit_not_applied` | free memory above the declared limit (plus [`MEMORY_SLACK_BYTES`]) |
//! | `mps_memory_below_share` | free memory below [`MEMORY_FLOOR_FRACTION`] of the declared limit: a smaller limit, or a full device |
//! | `mps_threads_not_applied` | more SMs than the declared percentage of the physical count allows |
//! | `mps_threads_below_share` | fewer SMs than the declared percentage gives |
//! | `mps_threads_limited` | a share without a thread limit, yet fewer SMs than the GPU has |
//!
//! Memory is checked against the limit itself, which needs no knowledge of the GPU. Threads are
//! checked against the physical SM count of the GPU model ([`physical_sm_count`], from NVIDIA's
//! data sheets), since the runtime, asked through MPS, only reports the limited count.

use std::collections::BTreeMap;

use coload_cohort_schema::{DeclaredShare, DeviceKind, ShareReport, WorkerWarning};

use crate::error::DeviceError;
use crate::identify::warning;

/// Free memory may exceed the declared limit by this much before the limit counts as not
/// applied: MPS enforces the limit in whole MiB, and `cudaMemGetInfo` rounds.
pub const MEMORY_SLACK_BYTES: u64 = 64 << 20;

/// Free memory below this fraction of the declared limit means the worker got less than its
/// share. The CUDA context takes a little of the limit (0.1 GiB of 20 GiB on the H200), so the
/// floor leaves room for that.
pub const MEMORY_FLOOR_FRACTION: f64 = 0.9;

/// SMs may differ from `physical * percentage / 100` by this many (or 10 %, whichever is more):
/// MPS provisions SMs in whole TPCs (two SMs each), and rounds.
pub const SM_SLACK: f64 = 2.0;

/// Every `CUDA_MPS_*` variable of this process's environment.
#[must_use]
pub fn mps_environment() -> BTreeMap<String, String> {
    mps_environment_from(
        std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))),
    )
}

/// The `CUDA_MPS_*` entries of `vars`.
pub fn mps_environment_from(
    vars: impl IntoIterator<Item = (String, String)>,
) -> BTreeMap<String, String> {
    vars.into_iter()
        .filter(|(k, _)| k.starts_with("CUDA_MPS_"))
        .collect()
}

/// The physical SM count of a data-center GPU model, from its NVML name; `None` for a model not
/// in the table. Longer names are matched first (`A100` before `A10`).
#[must_use]
pub fn physical_sm_count(gpu_name: &str) -> Option<u32> {
    // (name fragment, SMs), most specific first. Sources: NVIDIA's data sheets and
    // architecture white papers (Hopper: 132 SMs on SXM5 and NVL boards, 114 on PCIe).
    const TABLE: [(&str, u32); 15] = [
        ("GH200", 132),
        ("H200", 132),
        ("H100 PCIe", 114),
        ("H100", 132),
        ("H800", 132),
        ("B200", 148),
        ("A100", 108),
        ("A800", 108),
        ("A30", 56),
        ("A10", 72),
        ("L40S", 142),
        ("L40", 142),
        ("L4", 58),
        ("T4", 40),
        ("V100", 80),
    ];
    TABLE
        .iter()
        .find(|(fragment, _)| gpu_name.contains(fragment))
        .map(|(_, sms)| *sms)
}

/// Checks what the runtime reported (`report.observed`) against the declared share
/// (`report.declared`). Returns the warnings to record, or, when `strict` and any rule fired,
/// [`DeviceError::AllocationMismatch`] carrying them all. Nothing is checked without a declared
/// share, or on the CPU (the allocation check's `no_gpu` already says so).
pub fn check_share(
    report: &ShareReport,
    kind: DeviceKind,
    strict: bool,
) -> Result<Vec<WorkerWarning>, DeviceError> {
    let warnings = share_warnings(report, kind);
    if strict && !warnings.is_empty() {
        return Err(DeviceError::AllocationMismatch {
            mode: "mps".to_owned(),
            warnings,
        });
    }
    Ok(warnings)
}

fn mib(bytes: u64) -> u64 {
    bytes >> 20
}

fn share_warnings(report: &ShareReport, kind: DeviceKind) -> Vec<WorkerWarning> {
    let mut out = Vec::new();
    let Some(declared) = report.declared.as_ref() else {
        return out;
    };
    if kind == DeviceKind::Cpu {
        return out;
    }
    let Some(seen) = report.observed.as_ref() else {
        out.push(warning(
            "mps_share_unverified",
            format!(
                "the declared share ({}) cannot be checked: the CUDA runtime could not be asked ({})",
                declared.describe(),
                report.observed_error.as_deref().unwrap_or("no reason given")
            ),
        ));
        return out;
    };
    if let Some(limit) = declared.pinned_memory_limit_bytes {
        if seen.memory_free_bytes > limit.saturating_add(MEMORY_SLACK_BYTES) {
            out.push(warning(
                "mps_memory_limit_not_applied",
                format!(
                    "declared {} MiB of memory per client, but the runtime reports {} MiB free \
                     of {} MiB: the limit is not applied to this worker",
                    mib(limit),
                    mib(seen.memory_free_bytes),
                    mib(seen.memory_total_bytes)
                ),
            ));
        } else if (seen.memory_free_bytes as f64) < limit as f64 * MEMORY_FLOOR_FRACTION {
            out.push(warning(
                "mps_memory_below_share",
                format!(
                    "declared {} MiB of memory per client, but the runtime reports only {} MiB \
                     free of {} MiB: a smaller limit applies, or the device is full",
                    mib(limit),
                    mib(seen.memory_free_bytes),
                    mib(seen.memory_total_bytes)
                ),
            ));
        }
    }
    check_threads(declared, seen.sm_count, seen.physical_sm_count, &mut out);
    out
}

fn check_threads(
    declared: &DeclaredShare,
    sm_count: Option<u32>,
    physical: Option<u32>,
    out: &mut Vec<WorkerWarning>,
) {
    let percentage = declared.active_thread_percentage.filter(|p| *p < 100);
    let (Some(sms), Some(physical)) = (sm_count, physical) else {
        if percentage.is_some() {
            out.push(warning(
                "mps_share_unverified",
                format!(
                    "the declared {} % of the threads cannot be checked: {}",
                    percentage.unwrap_or(100),
                    if sm_count.is_none() {
                        "the runtime reported no SM count"
                    } else {
                        "the physical SM count of this GPU model is not known here"
                    }
                ),
            ));
        }
        return;
    };
    match percentage {
        None if sms < physical => out.push(warning(
            "mps_threads_limited",
            format!(
                "declared no thread limit, but the runtime reports {sms} of the GPU's {physical} \
                 SMs: an active thread percentage applies to this worker"
            ),
        )),
        None => {}
        Some(p) => {
            let expected = f64::from(physical) * f64::from(p) / 100.0;
            let slack = SM_SLACK.max(expected * 0.1);
            let seen = f64::from(sms);
            if seen > expected + slack {
                out.push(warning(
                    "mps_threads_not_applied",
                    format!(
                        "declared {p} % of the threads (about {expected:.0} of {physical} SMs), \
                         but the runtime reports {sms} SMs: the thread limit is not applied"
                    ),
                ));
            } else if seen < expected - slack {
                out.push(warning(
                    "mps_threads_below_share",
                    format!(
                        "declared {p} % of the threads (about {expected:.0} of {physical} SMs), \
                         but the runtime reports only {sms} SMs: a smaller limit applies"
                    ),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use coload_cohort_schema::{MIB, ObservedShare, exit};

    use super::*;

    const H200_NVML_TOTAL: u64 = 143_771 * MIB;
    const H200_RUNTIME_TOTAL: u64 = 150_110_011_392;

    fn report(declared: DeclaredShare, free: u64, sms: u32) -> ShareReport {
        ShareReport {
            declared: Some(declared),
            mps_environment: BTreeMap::new(),
            observed: Some(ObservedShare {
                memory_free_bytes: free,
                memory_total_bytes: H200_RUNTIME_TOTAL,
                sm_count: Some(sms),
                physical_sm_count: physical_sm_count("NVIDIA H200"),
            }),
            observed_error: None,
        }
    }

    fn kinds(r: &ShareReport) -> Vec<String> {
        check_share(r, DeviceKind::Cuda, false)
            .unwrap()
            .into_iter()
            .map(|w| w.kind)
            .collect()
    }

    fn plugin7() -> DeclaredShare {
        coload_measure::plugin_share(7, Some(H200_NVML_TOTAL))
    }

    /// What the H200 showed under 14 % and 20 GiB, for the plugin's 20538 MiB.
    #[test]
    fn the_plugins_share_as_seen_on_the_h200_matches() {
        let r = report(plugin7(), 20_400 * MIB, 18);
        assert_eq!(kinds(&r), Vec::<String>::new());
        assert!(check_share(&r, DeviceKind::Cuda, true).unwrap().is_empty());
    }

    #[test]
    fn a_limit_that_was_not_applied_is_named() {
        // Declared replicas 7, but the daemon has no limits: all memory free, all SMs.
        let r = report(plugin7(), 139 << 30, 132);
        assert_eq!(
            kinds(&r),
            ["mps_memory_limit_not_applied", "mps_threads_not_applied"]
        );
        let w = check_share(&r, DeviceKind::Cuda, false).unwrap();
        assert_eq!(
            w[0].message,
            "declared 20538 MiB of memory per client, but the runtime reports 142336 MiB free of \
             143156 MiB: the limit is not applied to this worker"
        );
        assert!(
            w[1].message.contains("about 18 of 132 SMs"),
            "{}",
            w[1].message
        );
        let e = check_share(&r, DeviceKind::Cuda, true).unwrap_err();
        assert_eq!(e.exit_code(), exit::ALLOCATION_MISMATCH);
        assert!(
            e.to_string().contains("mps_memory_limit_not_applied"),
            "{e}"
        );
    }

    #[test]
    fn a_smaller_share_than_declared_is_named() {
        // Declared replicas 7 on a node configured with replicas 10: 10 % and 14377 MiB.
        let r = report(plugin7(), 14_300 * MIB, 13);
        assert_eq!(
            kinds(&r),
            ["mps_memory_below_share", "mps_threads_below_share"]
        );
    }

    #[test]
    fn unlimited_declared_on_a_limited_daemon_is_named() {
        let r = report(DeclaredShare::unlimited(), 20_400 * MIB, 18);
        assert_eq!(kinds(&r), ["mps_threads_limited"]);
        let r = report(DeclaredShare::unlimited(), 139 << 30, 132);
        assert!(kinds(&r).is_empty());
    }

    #[test]
    fn what_cannot_be_checked_is_named_and_fails_strict() {
        let mut r = report(plugin7(), 20_400 * MIB, 18);
        r.observed = None;
        r.observed_error = Some("libcudart is not loaded".into());
        assert_eq!(kinds(&r), ["mps_share_unverified"]);
        assert!(check_share(&r, DeviceKind::Cuda, true).is_err());
        // An unknown GPU model: memory is still checked, threads are not.
        let mut r = report(plugin7(), 20_400 * MIB, 18);
        r.observed.as_mut().unwrap().physical_sm_count = None;
        let w = check_share(&r, DeviceKind::Cuda, false).unwrap();
        assert_eq!(w.len(), 1);
        assert!(w[0].message.contains("not known here"), "{}", w[0].message);
        // The CPU, and no declared share: nothing to check.
        let r = report(plugin7(), 0, 0);
        assert!(check_share(&r, DeviceKind::Cpu, true).unwrap().is_empty());
        let none = ShareReport::default();
        assert!(
            check_share(&none, DeviceKind::Cuda, true)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn physical_sm_counts_match_the_most_specific_name() {
        assert_eq!(physical_sm_count("NVIDIA H200"), Some(132));
        assert_eq!(physical_sm_count("NVIDIA H100 PCIe"), Some(114));
        assert_eq!(physical_sm_count("NVIDIA H100 80GB HBM3"), Some(132));
        assert_eq!(physical_sm_count("NVIDIA A100-SXM4-80GB"), Some(108));
        assert_eq!(physical_sm_count("NVIDIA A10"), Some(72));
        assert_eq!(physical_sm_count("NVIDIA L40S"), Some(142));
        assert_eq!(physical_sm_count("Tesla T4"), Some(40));
        assert_eq!(physical_sm_count("NVIDIA GeForce RTX 4090"), None);
    }

    #[test]
    fn only_cuda_mps_variables_are_kept() {
        let env = mps_environment_from([
            ("CUDA_MPS_PIPE_DIRECTORY".to_owned(), "/p".to_owned()),
            ("CUDA_VISIBLE_DEVICES".to_owned(), "0".to_owned()),
            (
                "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE".to_owned(),
                "14".to_owned(),
            ),
        ]);
        assert_eq!(
            env.keys().collect::<Vec<_>>(),
            [
                "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
                "CUDA_MPS_PIPE_DIRECTORY"
            ]
        );
    }
}
