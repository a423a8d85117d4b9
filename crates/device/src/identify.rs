//! Which device the worker actually uses, as NVML names it.
//!
//! CUDA numbers devices among those `CUDA_VISIBLE_DEVICES` leaves visible; NVML numbers every
//! GPU the process can see, in PCI bus order, and names MIG devices only through their parent.
//! This module maps the CUDA ordinal the workload uses (`cuda:N`) to the NVML handle behind it:
//!
//! - `CUDA_VISIBLE_DEVICES` set: its entries in order (`3`, `GPU-<uuid or unique prefix>`,
//!   `MIG-<uuid>`, `MIG-GPU-<uuid>/<gi>/<ci>`), stopping at the first entry that names no
//!   device, as CUDA does ([`crate::visible::resolve_like_cuda`], against the node's
//!   [`Topology`]). A MIG-enabled GPU named by index or `GPU-` UUID contributes its MIG devices.
//! - Otherwise every GPU NVML sees (a container runtime has already narrowed that set to
//!   `NVIDIA_VISIBLE_DEVICES`); when `NVIDIA_VISIBLE_DEVICES` lists UUIDs they narrow it again,
//!   so `MIG-...` values pick their MIG device. `all`, indices and `none`/`void` do not narrow
//!   (host indices mean nothing inside the container).
//! - Ordinal N is the N-th device of that list. Where the list was built by position rather
//!   than UUID and CUDA's default order (fastest first) could differ from NVML's PCI order (GPUs
//!   of different models, or several MIG devices), the report carries a
//!   `device_mapping_ambiguous` warning: set `CUDA_DEVICE_ORDER=PCI_BUS_ID` or pass UUIDs.

use coload_cohort_schema::{DeviceInfo, DeviceKind, WorkerWarning};

use crate::mig::MigProfile;
use crate::nvml::{GpuFacts, MigFacts, NvmlSource, NvmlTarget, RealNvml};
use crate::topology::Topology;
use crate::visible::{self, ResolvedDevice};

/// The environment variables that decide which devices CUDA sees, read once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VisibleEnv {
    /// `CUDA_VISIBLE_DEVICES`.
    pub cuda_visible_devices: Option<String>,
    /// `NVIDIA_VISIBLE_DEVICES` (set by the NVIDIA container runtime / device plugin).
    pub nvidia_visible_devices: Option<String>,
    /// `CUDA_DEVICE_ORDER` (`FASTEST_FIRST` by default, or `PCI_BUS_ID`).
    pub cuda_device_order: Option<String>,
}

impl VisibleEnv {
    /// Reads the three variables from this process's environment.
    #[must_use]
    pub fn from_process() -> Self {
        VisibleEnv {
            cuda_visible_devices: std::env::var("CUDA_VISIBLE_DEVICES").ok(),
            nvidia_visible_devices: std::env::var("NVIDIA_VISIBLE_DEVICES").ok(),
            cuda_device_order: std::env::var("CUDA_DEVICE_ORDER").ok(),
        }
    }

    /// What `worker.json` records as `visible_devices`: `CUDA_VISIBLE_DEVICES`, or
    /// `NVIDIA_VISIBLE_DEVICES` when the former is unset, verbatim.
    #[must_use]
    pub fn verbatim(&self) -> Option<String> {
        self.cuda_visible_devices
            .clone()
            .or_else(|| self.nvidia_visible_devices.clone())
    }

    fn pci_order(&self) -> bool {
        self.cuda_device_order.as_deref() == Some("PCI_BUS_ID")
    }
}

/// What [`identify`] found: the device, the warnings to put in `worker.json`, and the NVML
/// handle to sample telemetry from.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceReport {
    /// The device, for `worker.json` (`libtorch_version` / `cudnn_version` left for the
    /// workload to fill).
    pub info: DeviceInfo,
    /// Named warnings (`nvml_unavailable`, `device_unresolved`, `device_mapping_ambiguous`, ...).
    pub warnings: Vec<WorkerWarning>,
    /// The NVML handle behind the CUDA ordinal, when it was resolved.
    pub target: Option<NvmlTarget>,
    /// The MIG GPU instance id of that device, when it is a MIG device and NVML told it
    /// (per-instance GPM sampling addresses it).
    pub gpu_instance_id: Option<u32>,
}

pub(crate) fn warning(kind: &str, message: impl Into<String>) -> WorkerWarning {
    WorkerWarning {
        kind: kind.to_owned(),
        message: message.into(),
    }
}

/// Identifies the device the worker uses, through the real NVML.
///
/// `cuda_index` is the CUDA ordinal the workload runs on (`cuda:N`). A CPU device gets
/// [`DeviceInfo::cpu`] with `visible_devices` filled. Never fails: what cannot be found is left
/// `None` with a named warning (`nvml_unavailable` where NVML is absent).
#[must_use]
pub fn identify(kind: DeviceKind, cuda_index: Option<usize>) -> DeviceReport {
    let env = VisibleEnv::from_process();
    match kind {
        DeviceKind::Cpu => identify_with(None, &env, kind, cuda_index),
        DeviceKind::Cuda => match RealNvml::open() {
            Ok(nvml) => identify_with(Some(&nvml), &env, kind, cuda_index),
            Err(err) => {
                let mut report = identify_with(None, &env, kind, cuda_index);
                report.warnings.push(warning(
                    "nvml_unavailable",
                    format!("{err}; device identity and telemetry are unknown"),
                ));
                report
            }
        },
    }
}

/// [`identify`] against any NVML source and environment (`None`: no NVML).
#[must_use]
pub fn identify_with(
    source: Option<&dyn NvmlSource>,
    env: &VisibleEnv,
    kind: DeviceKind,
    cuda_index: Option<usize>,
) -> DeviceReport {
    let mut info = DeviceInfo::cpu();
    info.visible_devices = env.verbatim();
    let mut report = DeviceReport {
        info,
        warnings: Vec::new(),
        target: None,
        gpu_instance_id: None,
    };
    if kind == DeviceKind::Cpu {
        return report;
    }
    report.info.kind = DeviceKind::Cuda;
    let Some(source) = source else {
        return report;
    };
    report.info.driver_version = source.driver_version();
    report.info.cuda_version = source.cuda_driver_version();
    let ordinal = cuda_index.unwrap_or(0);

    let topology = match Topology::from_nvml(source) {
        Ok(t) => t,
        Err(e) => {
            report.warnings.push(warning(
                "device_unresolved",
                format!("the GPUs could not be enumerated: {e}"),
            ));
            return report;
        }
    };
    report.warnings.extend(
        topology
            .warnings
            .iter()
            .map(|w| warning("device_enumeration", w.to_string())),
    );
    let list = candidates(&topology, env);
    report.warnings.extend(list.warnings);
    let Some(chosen) = list.devices.get(ordinal) else {
        report.warnings.push(warning(
            "device_unresolved",
            format!(
                "cuda:{ordinal} is not among the {} device(s) NVML maps from visible devices {:?}",
                list.devices.len(),
                env.verbatim().unwrap_or_else(|| "(unset)".into())
            ),
        ));
        return report;
    };
    if list.devices.iter().any(|d| d.by_position) && ambiguous(env, &list.devices) {
        report.warnings.push(warning(
            "device_mapping_ambiguous",
            format!(
                "cuda:{ordinal} was mapped to {} by position; CUDA may order these devices \
                 differently (set CUDA_DEVICE_ORDER=PCI_BUS_ID or name devices by UUID)",
                chosen.uuid()
            ),
        ));
    }
    fill(&mut report.info, chosen.gpu, chosen.mig);
    report.target = Some(chosen.target());
    report.gpu_instance_id = chosen.mig.and_then(|m| m.gpu_instance_id);
    report
}

fn fill(info: &mut DeviceInfo, gpu: &GpuFacts, mig: Option<&MigFacts>) {
    info.gpu_uuid = Some(gpu.uuid.clone());
    info.gpu_name = Some(gpu.name.clone());
    info.mig_mode = gpu.mig_mode;
    info.pci_bus_id.clone_from(&gpu.pci_bus_id);
    info.compute_mode.clone_from(&gpu.compute_mode);
    match mig {
        Some(m) => {
            info.mig_uuid = Some(m.uuid.clone());
            info.mig_profile.clone_from(&m.profile);
            info.memory_total_bytes = m.memory_total_bytes;
            info.mig_gpu_instance_id = m.gpu_instance_id;
            info.mig_compute_instance_id = m.compute_instance_id;
            info.mig_gpu_instance_profile = m
                .profile
                .as_deref()
                .and_then(MigProfile::parse)
                .map(|p| p.gpu_instance_profile());
        }
        None => info.memory_total_bytes = gpu.memory_total_bytes,
    }
}

struct CandidateList<'t> {
    devices: Vec<ResolvedDevice<'t>>,
    warnings: Vec<WorkerWarning>,
}

fn candidates<'t>(topology: &'t Topology, env: &VisibleEnv) -> CandidateList<'t> {
    if let Some(cvd) = env.cuda_visible_devices.as_deref() {
        let resolution = visible::resolve_like_cuda(topology, cvd);
        let warnings = resolution
            .stopped
            .map(|e| {
                warning(
                    "visible_devices_truncated",
                    format!("CUDA_VISIBLE_DEVICES: {e}; CUDA ignores it and every entry after it"),
                )
            })
            .into_iter()
            .collect();
        return CandidateList {
            devices: resolution.devices,
            warnings,
        };
    }

    // The container runtime has already narrowed what NVML sees; UUIDs in
    // NVIDIA_VISIBLE_DEVICES narrow it again (indices mean the host's numbering, not ours).
    let uuids: Vec<&str> = env
        .nvidia_visible_devices
        .as_deref()
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|e| e.starts_with("GPU-") || e.starts_with("MIG-"))
        .collect();
    let by_position = uuids.len() != 1;
    let devices = visible::all_devices(topology)
        .into_iter()
        .filter(|d| uuids.is_empty() || uuids.iter().any(|u| d.uuid().starts_with(u)))
        .map(|d| ResolvedDevice { by_position, ..d })
        .collect();
    CandidateList {
        devices,
        warnings: Vec::new(),
    }
}

/// Whether CUDA's order could differ from NVML's for this list: several MIG devices (CUDA's
/// MIG order is its own), or, unless `CUDA_DEVICE_ORDER=PCI_BUS_ID`, GPUs of different models
/// (CUDA's default puts the fastest first; identical GPUs tie and fall back to PCI order).
fn ambiguous(env: &VisibleEnv, devices: &[ResolvedDevice<'_>]) -> bool {
    if devices.len() < 2 {
        return false;
    }
    let several_migs = devices.iter().any(|d| d.mig.is_some());
    let first = &devices[0].gpu.name;
    let mixed_models = devices.iter().any(|d| d.gpu.name != *first);
    several_migs || (mixed_models && !env.pci_order())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FakeNvml;

    fn env(cvd: Option<&str>, nvd: Option<&str>) -> VisibleEnv {
        VisibleEnv {
            cuda_visible_devices: cvd.map(str::to_owned),
            nvidia_visible_devices: nvd.map(str::to_owned),
            cuda_device_order: None,
        }
    }

    fn cuda(nvml: &FakeNvml, e: &VisibleEnv, index: usize) -> DeviceReport {
        identify_with(Some(nvml), e, DeviceKind::Cuda, Some(index))
    }

    /// The kinds of the report's warnings, in order.
    fn kinds(r: &DeviceReport) -> Vec<&str> {
        r.warnings.iter().map(|w| w.kind.as_str()).collect()
    }

    /// CUDA_VISIBLE_DEVICES stopped at `entry`, which left the ordinal unresolved.
    fn assert_truncated_at(r: &DeviceReport, entry: &str) {
        assert!(r.target.is_none());
        assert_eq!(kinds(r), ["visible_devices_truncated", "device_unresolved"]);
        assert!(r.warnings[0].message.contains(entry), "{r:?}");
    }

    fn two_h200() -> FakeNvml {
        FakeNvml::new()
            .with_gpu("GPU-aaaa-1111", "NVIDIA H200")
            .with_gpu("GPU-bbbb-2222", "NVIDIA H200")
    }

    #[test]
    fn cpu_gets_the_cpu_record_with_visible_devices() {
        let r = identify_with(None, &env(Some("1"), None), DeviceKind::Cpu, None);
        assert_eq!(r.info.kind, DeviceKind::Cpu);
        assert_eq!(r.info.visible_devices.as_deref(), Some("1"));
        assert!(r.info.gpu_uuid.is_none() && r.target.is_none() && r.warnings.is_empty());
    }

    #[test]
    fn an_index_in_cuda_visible_devices_selects_that_gpu() {
        let r = cuda(&two_h200(), &env(Some("1"), Some("all")), 0);
        assert_eq!(r.info.gpu_uuid.as_deref(), Some("GPU-bbbb-2222"));
        assert_eq!(r.info.visible_devices.as_deref(), Some("1"));
        assert_eq!(
            r.target,
            Some(NvmlTarget {
                gpu_index: 1,
                mig_index: None
            })
        );
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
        assert_eq!(r.info.driver_version.as_deref(), Some("580.159.04"));
        assert_eq!(r.info.cuda_version.as_deref(), Some("13.0"));
        assert_eq!(r.info.memory_total_bytes, Some(80 << 30));
        assert_eq!(r.info.compute_mode.as_deref(), Some("default"));
        assert_eq!(r.info.mig_mode, Some(false));
        assert_eq!(r.gpu_instance_id, None);
    }

    #[test]
    fn a_uuid_prefix_selects_its_gpu_and_the_ordinal_counts_within_the_list() {
        let r = cuda(&two_h200(), &env(Some("GPU-bbbb,GPU-aaaa"), None), 1);
        assert_eq!(r.info.gpu_uuid.as_deref(), Some("GPU-aaaa-1111"));
        assert!(r.warnings.is_empty());
    }

    #[test]
    fn cuda_stops_at_the_first_unknown_entry() {
        let r = cuda(&two_h200(), &env(Some("0,GPU-nope,1"), None), 1);
        assert_truncated_at(&r, "`GPU-nope`");
    }

    #[test]
    fn a_mig_uuid_selects_the_mig_device_and_names_its_parent() {
        let nvml = FakeNvml::new()
            .with_gpu("GPU-aaaa", "NVIDIA H100 80GB HBM3")
            .with_mig("1g.10gb", "MIG-1111")
            .with_mig("1g.10gb", "MIG-2222")
            .with_mig("3g.40gb", "MIG-3333");
        let r = cuda(&nvml, &env(Some("MIG-3333"), None), 0);
        assert_eq!(r.info.gpu_uuid.as_deref(), Some("GPU-aaaa"));
        assert_eq!(r.info.mig_uuid.as_deref(), Some("MIG-3333"));
        assert_eq!(r.info.mig_profile.as_deref(), Some("3g.40gb"));
        assert_eq!(r.info.mig_mode, Some(true));
        assert_eq!(r.info.memory_total_bytes, Some(40 << 30));
        assert_eq!(
            r.target,
            Some(NvmlTarget {
                gpu_index: 0,
                mig_index: Some(2)
            })
        );
        // The third MIG device of the fake is GPU instance 9: the id, not the index.
        assert_eq!(r.gpu_instance_id, Some(9));
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    }

    #[test]
    fn the_container_runtime_mig_value_narrows_what_nvml_sees() {
        let nvml = FakeNvml::new()
            .with_gpu("GPU-aaaa", "NVIDIA H200")
            .with_mig("1g.18gb", "MIG-1111")
            .with_mig("1g.18gb", "MIG-2222");
        let r = cuda(&nvml, &env(None, Some("MIG-2222")), 0);
        assert_eq!(r.info.mig_uuid.as_deref(), Some("MIG-2222"));
        assert_eq!(r.info.visible_devices.as_deref(), Some("MIG-2222"));
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    }

    #[test]
    fn mig_devices_picked_by_position_are_flagged_as_ambiguous() {
        let nvml = FakeNvml::new()
            .with_gpu("GPU-aaaa", "NVIDIA H200")
            .with_mig("1g.18gb", "MIG-1111")
            .with_mig("2g.35gb", "MIG-2222");
        let r = cuda(&nvml, &env(None, Some("all")), 1);
        assert_eq!(r.info.mig_uuid.as_deref(), Some("MIG-2222"));
        assert_eq!(r.warnings[0].kind, "device_mapping_ambiguous");
    }

    #[test]
    fn identical_gpus_by_index_are_not_ambiguous_but_mixed_models_are() {
        let r = cuda(&two_h200(), &env(None, Some("all")), 1);
        assert_eq!(r.info.gpu_uuid.as_deref(), Some("GPU-bbbb-2222"));
        assert!(r.warnings.is_empty());

        let mixed = FakeNvml::new()
            .with_gpu("GPU-aaaa", "NVIDIA A100")
            .with_gpu("GPU-bbbb", "NVIDIA H200");
        let r = cuda(&mixed, &env(None, None), 0);
        assert_eq!(r.warnings[0].kind, "device_mapping_ambiguous");
    }

    #[test]
    fn pci_order_removes_model_ambiguity_only() {
        let mixed = FakeNvml::new()
            .with_gpu("GPU-aaaa", "NVIDIA A100")
            .with_gpu("GPU-bbbb", "NVIDIA H200");
        let topology = Topology::from_nvml(&mixed).unwrap();
        let mut e = env(None, None);
        e.cuda_device_order = Some("PCI_BUS_ID".into());
        let list = candidates(&topology, &e);
        assert!(!ambiguous(&e, &list.devices));
        assert!(ambiguous(&env(None, None), &list.devices));
    }

    #[test]
    fn an_ordinal_past_the_list_is_unresolved_not_a_panic() {
        let r = cuda(&two_h200(), &env(Some("0"), None), 7);
        assert!(r.target.is_none());
        assert_eq!(r.info.kind, DeviceKind::Cuda);
        assert_eq!(r.warnings[0].kind, "device_unresolved");
        assert!(r.warnings[0].message.contains("cuda:7"));
    }

    #[test]
    fn an_unknown_mig_uuid_truncates_the_visible_devices() {
        let nvml = FakeNvml::new()
            .with_gpu("GPU-aaaa", "NVIDIA H200")
            .with_mig("1g.18gb", "MIG-1111");
        let r = cuda(&nvml, &env(Some("MIG-9999"), None), 0);
        assert_truncated_at(&r, "`MIG-9999`");
    }

    #[test]
    fn a_mig_gpu_without_instances_offers_no_device() {
        // MIG enabled, no GPU instance created: CUDA sees nothing on this GPU, so neither its
        // index, nor its UUID, nor the container runtime's `all` may resolve to the whole GPU.
        let nvml = FakeNvml::new()
            .with_gpu("GPU-aaaa", "NVIDIA H200")
            .with_mig_enabled();
        assert_eq!(nvml.mig_devices(0).unwrap(), []);
        for e in [
            env(Some("0"), None),
            env(Some("GPU-aaaa"), None),
            env(None, Some("all")),
        ] {
            let r = cuda(&nvml, &e, 0);
            assert!(r.target.is_none(), "{e:?}: {r:?}");
            assert_eq!(r.info.gpu_uuid, None, "{e:?}");
            assert_eq!(r.info.kind, DeviceKind::Cuda);
            // The entry names a GPU NVML sees, so nothing is truncated: the list is just empty.
            assert_eq!(kinds(&r), ["device_unresolved"], "{e:?}");
            assert!(
                r.warnings[0].message.contains("among the 0 device(s)"),
                "{}",
                r.warnings[0].message
            );
        }
        // A second, whole GPU after it becomes cuda:0.
        let two = FakeNvml::new()
            .with_gpu("GPU-aaaa", "NVIDIA H200")
            .with_mig_enabled()
            .with_gpu("GPU-bbbb", "NVIDIA H200");
        let r = cuda(&two, &env(Some("0,1"), None), 0);
        assert_eq!(r.info.gpu_uuid.as_deref(), Some("GPU-bbbb"));
        assert_eq!(
            r.target,
            Some(NvmlTarget {
                gpu_index: 1,
                mig_index: None
            })
        );
    }

    #[test]
    fn a_compute_instance_records_its_gpu_instance_and_both_profiles() {
        let nvml = FakeNvml::new()
            .with_gpu("GPU-aaaa", "NVIDIA H100 80GB HBM3")
            .with_mig_instance("1c.3g.40gb", "MIG-c0", 2, 0)
            .with_mig_instance("2c.3g.40gb", "MIG-c1", 2, 1)
            .with_mig("1g.10gb+me", "MIG-me");
        let r = cuda(&nvml, &env(Some("MIG-c1"), None), 0);
        assert_eq!(r.info.gpu_uuid.as_deref(), Some("GPU-aaaa"));
        assert_eq!(r.info.mig_profile.as_deref(), Some("2c.3g.40gb"));
        assert_eq!(r.info.mig_gpu_instance_profile.as_deref(), Some("3g.40gb"));
        assert_eq!(r.info.mig_gpu_instance_id, Some(2));
        assert_eq!(r.info.mig_compute_instance_id, Some(1));
        assert_eq!(r.gpu_instance_id, Some(2));
        let r = cuda(&nvml, &env(Some("MIG-me"), None), 0);
        assert_eq!(
            r.info.mig_gpu_instance_profile.as_deref(),
            Some("1g.10gb+me")
        );
        // The pre-R470 name of the same device.
        let r = cuda(&nvml, &env(Some("MIG-GPU-aaaa/2/1"), None), 0);
        assert_eq!(r.info.mig_uuid.as_deref(), Some("MIG-c1"));
        // A whole GPU records none of it.
        let r = cuda(&two_h200(), &env(Some("0"), None), 0);
        assert_eq!(r.info.mig_gpu_instance_id, None);
        assert_eq!(r.info.mig_gpu_instance_profile, None);
    }

    #[test]
    fn a_gpu_that_cannot_be_enumerated_is_a_warning_not_the_end() {
        let nvml = FakeNvml::new()
            .with_gpu("GPU-aaaa", "NVIDIA H100 80GB HBM3")
            .with_mig_enumeration_error(crate::NvmlCode::Unknown)
            .with_gpu("GPU-bbbb", "NVIDIA H100 80GB HBM3")
            .with_mig("1g.10gb", "MIG-b0")
            .with_mig_index_error(crate::NvmlCode::NoPermission)
            .with_mig("1g.10gb", "MIG-b2");
        let r = cuda(&nvml, &env(Some("MIG-b2"), None), 0);
        assert_eq!(r.info.mig_uuid.as_deref(), Some("MIG-b2"));
        assert_eq!(
            r.target,
            Some(NvmlTarget {
                gpu_index: 1,
                mig_index: Some(2)
            })
        );
        assert_eq!(kinds(&r), ["device_enumeration", "device_enumeration"]);
        assert!(r.warnings[0].message.contains("GPU 0"), "{:?}", r.warnings);
        assert!(
            r.warnings[1].message.contains("index 1 of GPU 1"),
            "{:?}",
            r.warnings
        );
    }

    #[test]
    fn an_ambiguous_prefix_truncates_like_any_unknown_entry() {
        let r = cuda(&two_h200(), &env(Some("1,GPU-"), None), 0);
        assert_eq!(r.info.gpu_uuid.as_deref(), Some("GPU-bbbb-2222"));
        assert_eq!(kinds(&r), ["visible_devices_truncated"]);
        assert!(
            r.warnings[0]
                .message
                .contains("GPU-aaaa-1111, GPU-bbbb-2222"),
            "{:?}",
            r.warnings
        );
    }
}
