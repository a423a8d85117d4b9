//! The MPS share a cohort's private daemon applies, computed as NVIDIA's device plugin does
//!.
//!
//! The plugin's MPS daemon (k8s-device-plugin, `cmd/mps-control-daemon/mps/daemon.go`), with
//! `replicas: N`, sends after `nvidia-cuda-mps-control -d`, one per device of its resource,
//! `set_default_device_pinned_mem_limit <index> <total/N/1024/1024>M`, then
//! `set_default_active_thread_percentage <100/N>` (integer division throughout, the device's
//! total memory from NVML). This module computes the same commands for the GPUs the cohort uses;
//! [`crate::mps`] sends them and reads them back.
//!
//! The plugin also sets the GPU's compute mode to EXCLUSIVE_PROCESS. coload never changes a GPU
//! setting, and needs not: in EXCLUSIVE_PROCESS only one process may hold a context on the GPU,
//! and with MPS that process is the MPS server, so every CUDA process must go through MPS. A
//! cohort whose workers are all clients of the private daemon (the launcher gives each its pipe
//! directory) already has every process on the GPU going through one MPS server; the compute
//! mode would only keep out processes that are not part of the cohort, and the allocation
//! check's `not_an_mps_client` and `gpu_shared` say when such processes were there.

use coload_cohort_schema::{DeclaredShare, DeviceChoice, MIB};
use coload_device::{NvmlSource, Topology, visible};
use coload_spec::WorkerFlags;

/// Why the share could not be planned.
#[derive(Debug, thiserror::Error)]
pub enum ShareError {
    /// The per-device memory share needs the device's memory, from NVML.
    #[error(
        "--mps-replicas {replicas} gives each client 1/{replicas} of GPU {index}'s memory, but its \
         memory is not known here ({reason}); give the limit explicitly with --mps-threads P \
         --mps-memory SIZE"
    )]
    TotalUnknown {
        /// N.
        replicas: u32,
        /// The GPU.
        index: u32,
        /// Why NVML could not say.
        reason: String,
    },
    /// A device entry names no GPU NVML knows.
    #[error(
        "device `{entry}` (from {source_name}) is no GPU index or GPU UUID NVML knows{reason}; \
         --mode mps needs the GPU indices to limit"
    )]
    UnknownDevice {
        /// The entry.
        entry: String,
        /// Where it came from.
        source_name: &'static str,
        /// What NVML said, if anything.
        reason: String,
    },
    /// MPS shares whole GPUs.
    #[error(
        "device `{entry}` is a MIG device: MPS shares whole GPUs here (the device plugin does not \
         apply MPS to MIG devices); use --mode mig or mig-timeslice"
    )]
    MigDevice {
        /// The entry.
        entry: String,
    },
}

/// The memory limit of one device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DeviceLimit {
    /// The device's index, as the daemon (which sees every GPU) numbers it.
    pub(crate) index: u32,
    /// The limit, whole MiB.
    pub(crate) limit_mib: u64,
}

/// What the private daemon is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MpsPlan {
    /// The share as declared (memory for the first device).
    pub(crate) declared: DeclaredShare,
    /// `set_default_active_thread_percentage`, when limited.
    pub(crate) active_thread_percentage: Option<u32>,
    /// `set_default_device_pinned_mem_limit`, one per device the cohort uses.
    pub(crate) limits: Vec<DeviceLimit>,
}

impl MpsPlan {
    /// The control commands, in the device plugin's order: each device's memory limit, then
    /// the thread percentage. Empty for an unlimited share.
    pub(crate) fn commands(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .limits
            .iter()
            .map(|l| {
                format!(
                    "set_default_device_pinned_mem_limit {} {}M",
                    l.index, l.limit_mib
                )
            })
            .collect();
        if let Some(p) = self.active_thread_percentage {
            out.push(format!("set_default_active_thread_percentage {p}"));
        }
        out
    }
}

/// The plan for `flags` on `devices` (NVML indices), with each device's total memory from
/// `total_bytes`. `None` outside mode `mps`.
pub(crate) fn plan(
    flags: &WorkerFlags,
    devices: &[u32],
    total_bytes: &dyn Fn(u32) -> Result<u64, String>,
) -> Result<Option<MpsPlan>, ShareError> {
    let Some(first) = flags.declared_share(None) else {
        return Ok(None);
    };
    let mut limits = Vec::with_capacity(devices.len());
    let mut declared = first;
    for (i, &index) in devices.iter().enumerate() {
        // A share of N replicas depends on each GPU's total memory (the device plugin's
        // total/N); the worker's own rule says what it is, GPU by GPU.
        let limit_bytes = match flags.mps_replicas {
            Some(replicas) => {
                let total = total_bytes(index).map_err(|reason| ShareError::TotalUnknown {
                    replicas,
                    index,
                    reason,
                })?;
                let share = flags.declared_share(Some(total)).unwrap_or(first);
                if i == 0 {
                    declared = share;
                }
                share.pinned_memory_limit_bytes
            }
            None => first.pinned_memory_limit_bytes,
        };
        if let Some(bytes) = limit_bytes {
            limits.push(DeviceLimit {
                index,
                limit_mib: bytes / MIB,
            });
        }
    }
    Ok(Some(MpsPlan {
        declared,
        active_thread_percentage: declared.active_thread_percentage.filter(|p| *p < 100),
        limits,
    }))
}

/// The NVML indices of the GPUs the cohort's workers use, sorted and distinct.
///
/// Worker i sees `visible[i]` when `--visible-devices` is given, else the launcher's own
/// `CUDA_VISIBLE_DEVICES` (or every GPU); within that, it runs on the ordinal `--device` names
/// (`cuda:N`, or 0). Numeric entries are taken as indices (CUDA numbers GPUs in PCI bus order
/// on hosts of one GPU model, as NVML does); `GPU-` UUIDs are looked up in NVML.
pub(crate) fn cohort_devices(
    visible: &[String],
    count: usize,
    launcher_visible: Option<&str>,
    device: DeviceChoice,
    nvml: &dyn Fn() -> Result<Box<dyn NvmlSource>, String>,
) -> Result<Vec<u32>, ShareError> {
    let ordinal = match device {
        DeviceChoice::Cuda(n) => n,
        DeviceChoice::Auto | DeviceChoice::Cpu => 0,
    };
    let mut entries: Vec<(String, &'static str)> = Vec::with_capacity(count);
    for i in 0..count {
        let (list, source_name) = match (visible.get(i), launcher_visible) {
            (Some(v), _) => (v.as_str(), "--visible-devices"),
            (None, Some(v)) => (v, "CUDA_VISIBLE_DEVICES"),
            (None, None) => {
                entries.push((ordinal.to_string(), "--device"));
                continue;
            }
        };
        let entry = list
            .split(',')
            .map(str::trim)
            .nth(ordinal)
            .unwrap_or_default()
            .to_owned();
        if entry.is_empty() {
            return Err(ShareError::UnknownDevice {
                entry: list.to_owned(),
                source_name,
                reason: format!(" (it lists no device at ordinal {ordinal})"),
            });
        }
        entries.push((entry, source_name));
    }
    // UUIDs and prefixes are resolved by coload-device's one resolver, against the node's
    // topology from NVML (read once, when an entry needs it): the same rules as the worker's
    // identity (a prefix only if unique; a MIG device is no GPU to share).
    let mut topology: Option<Topology> = None;
    let mut out = Vec::with_capacity(entries.len());
    for (entry, source_name) in entries {
        match visible::VisibleEntry::parse(&entry) {
            Ok(visible::VisibleEntry::Index(index)) => {
                out.push(index);
                continue;
            }
            // MPS does not run on MIG devices (the device plugin does not offer it there).
            Ok(visible::VisibleEntry::MigUuid(_) | visible::VisibleEntry::LegacyMig { .. }) => {
                return Err(ShareError::MigDevice { entry });
            }
            _ => {}
        }
        let unknown = |reason: String| ShareError::UnknownDevice {
            entry: entry.clone(),
            source_name,
            reason,
        };
        if topology.is_none() {
            let source = nvml().map_err(|e| unknown(format!(" (NVML: {e})")))?;
            let t = Topology::from_nvml(source.as_ref())
                .map_err(|e| unknown(format!(" (NVML: {e})")))?;
            topology = Some(t);
        }
        let Some(topology) = topology.as_ref() else {
            continue;
        };
        let found = visible::resolve_entry(topology, &entry).map_err(|e| match e {
            visible::ResolveError::Unknown { .. } => unknown(String::new()),
            other => unknown(format!(" ({other})")),
        })?;
        match found.as_slice() {
            [device] if device.mig.is_none() => out.push(device.gpu.index),
            _ => return Err(ShareError::MigDevice { entry }),
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// The plan for a cohort of `count` workers on this host: its devices from `visible` (or this
/// process's `CUDA_VISIBLE_DEVICES`) and `--device`, each device's memory from NVML.
pub(crate) fn plan_cohort(
    flags: &WorkerFlags,
    visible: &[String],
    count: usize,
) -> Result<Option<MpsPlan>, ShareError> {
    if flags.declared_share(None).is_none() {
        return Ok(None);
    }
    let open = || -> Result<Box<dyn NvmlSource>, String> {
        coload_device::RealNvml::open()
            .map(|n| Box::new(n) as Box<dyn NvmlSource>)
            .map_err(|e| e.to_string())
    };
    let launcher_visible = std::env::var("CUDA_VISIBLE_DEVICES").ok();
    let devices = cohort_devices(
        visible,
        count,
        launcher_visible.as_deref(),
        flags.device,
        &open,
    )?;
    let nvml = std::cell::OnceCell::new();
    let total = |index: u32| -> Result<u64, String> {
        let source = nvml.get_or_init(open).as_ref().map_err(Clone::clone)?;
        let gpu = source.gpu(index).map_err(|e| e.to_string())?;
        gpu.memory_total_bytes
            .ok_or_else(|| format!("NVML reports no memory size for GPU {index}"))
    };
    plan(flags, &devices, &total)
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use coload_device::FakeNvml;

    use super::*;

    #[derive(Debug, Parser)]
    struct Flags {
        #[command(flatten)]
        flags: WorkerFlags,
    }

    fn flags(args: &[&str]) -> WorkerFlags {
        let mut full = vec!["x"];
        full.extend_from_slice(args);
        Flags::try_parse_from(full).unwrap().flags
    }

    const H200: u64 = 143_771 * MIB;

    #[expect(clippy::unnecessary_wraps, reason = "the shape plan() takes")]
    fn h200(_: u32) -> Result<u64, String> {
        Ok(H200)
    }

    #[test]
    fn replicas_seven_on_an_h200_sends_the_plugins_commands() {
        let f = flags(&["--mode", "mps", "--mps-replicas", "7"]);
        let p = plan(&f, &[0], &h200).unwrap().unwrap();
        assert_eq!(
            p.commands(),
            [
                "set_default_device_pinned_mem_limit 0 20538M",
                "set_default_active_thread_percentage 14",
            ]
        );
        // One limit per device the cohort uses, each from that device's memory.
        let totals = |i: u32| Ok(if i == 3 { 80 * 1024 * MIB } else { H200 });
        let p = plan(&f, &[1, 3], &totals).unwrap().unwrap();
        assert_eq!(
            p.commands(),
            [
                "set_default_device_pinned_mem_limit 1 20538M",
                "set_default_device_pinned_mem_limit 3 11702M",
                "set_default_active_thread_percentage 14",
            ]
        );
    }

    /// What the daemon is told per GPU is what a worker on that GPU declares
    /// (`WorkerFlags::declared_share` with the GPU's total), for every share and every total.
    #[test]
    fn each_gpus_limit_is_the_workers_declared_share() {
        let totals = [H200, 80 * 1024 * MIB, 40 * 1024 * MIB];
        let total = |i: u32| Ok(totals[i as usize]);
        for share in [
            &["--mps-replicas", "7"][..],
            &["--mps-replicas", "3"],
            &["--mps-threads", "30", "--mps-memory", "9GiB"],
        ] {
            let mut args = vec!["--mode", "mps"];
            args.extend_from_slice(share);
            let f = flags(&args);
            let p = plan(&f, &[0, 1, 2], &total).unwrap().unwrap();
            assert_eq!(p.declared, f.declared_share(Some(totals[0])).unwrap());
            let limits: Vec<(u32, u64)> = p.limits.iter().map(|l| (l.index, l.limit_mib)).collect();
            let declared: Vec<(u32, u64)> = (0..3u32)
                .filter_map(|i| {
                    let d = f.declared_share(Some(totals[i as usize])).unwrap();
                    d.pinned_memory_limit_bytes.map(|b| (i, b / MIB))
                })
                .collect();
            assert_eq!(limits, declared, "{share:?}");
        }
    }

    #[test]
    fn explicit_and_unlimited_shares() {
        let f = flags(&[
            "--mode",
            "mps",
            "--mps-threads",
            "50",
            "--mps-memory",
            "20GiB",
        ]);
        let p = plan(&f, &[0, 1], &h200).unwrap().unwrap();
        assert_eq!(
            p.commands(),
            [
                "set_default_device_pinned_mem_limit 0 20480M",
                "set_default_device_pinned_mem_limit 1 20480M",
                "set_default_active_thread_percentage 50",
            ]
        );
        let f = flags(&["--mode", "mps", "--mps-unlimited"]);
        let p = plan(&f, &[0], &h200).unwrap().unwrap();
        assert!(p.commands().is_empty());
        // replicas 1 is the whole GPU: its memory limit, and no thread limit.
        let f = flags(&["--mode", "mps", "--mps-replicas", "1"]);
        let p = plan(&f, &[0], &h200).unwrap().unwrap();
        assert_eq!(
            p.commands(),
            ["set_default_device_pinned_mem_limit 0 143771M"]
        );
        assert_eq!(
            plan(&flags(&["--mode", "timeslice"]), &[0], &h200).unwrap(),
            None
        );
    }

    #[test]
    fn an_unknown_total_is_refused_with_the_way_out() {
        let f = flags(&["--mode", "mps", "--mps-replicas", "7"]);
        let none = |_: u32| Err("nvml is unavailable: libnvidia-ml.so.1 not found".to_owned());
        let e = plan(&f, &[0], &none).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--mps-replicas 7 gives each client 1/7 of GPU 0's memory, but its memory is not \
             known here (nvml is unavailable: libnvidia-ml.so.1 not found); give the limit \
             explicitly with --mps-threads P --mps-memory SIZE"
        );
    }

    #[expect(clippy::unnecessary_wraps, reason = "the shape cohort_devices() takes")]
    fn fake() -> Result<Box<dyn NvmlSource>, String> {
        Ok(Box::new(
            FakeNvml::new()
                .with_gpu("GPU-aaaa-0000", "NVIDIA H200")
                .with_gpu("GPU-bbbb-1111", "NVIDIA H200"),
        ))
    }

    fn no_nvml() -> Result<Box<dyn NvmlSource>, String> {
        Err("not loaded".to_owned())
    }

    #[test]
    fn the_devices_the_cohort_uses() {
        let v = |s: &[&str]| s.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
        // One GPU per worker, by index or UUID.
        assert_eq!(
            cohort_devices(&v(&["1", "0", "1"]), 3, None, DeviceChoice::Auto, &no_nvml).unwrap(),
            [0, 1]
        );
        assert_eq!(
            cohort_devices(&v(&["GPU-bbbb"]), 1, None, DeviceChoice::Auto, &fake).unwrap(),
            [1]
        );
        // The launcher's own CUDA_VISIBLE_DEVICES, and the ordinal of --device.
        assert_eq!(
            cohort_devices(&[], 2, Some("3,5"), DeviceChoice::Cuda(1), &no_nvml).unwrap(),
            [5]
        );
        assert_eq!(
            cohort_devices(&[], 7, None, DeviceChoice::Auto, &no_nvml).unwrap(),
            [0]
        );
        let e = cohort_devices(&v(&["MIG-1234"]), 1, None, DeviceChoice::Auto, &fake).unwrap_err();
        assert!(e.to_string().contains("is a MIG device"), "{e}");
        let e = cohort_devices(&v(&["GPU-zzzz"]), 1, None, DeviceChoice::Auto, &fake).unwrap_err();
        assert_eq!(
            e.to_string(),
            "device `GPU-zzzz` (from --visible-devices) is no GPU index or GPU UUID NVML knows; \
             --mode mps needs the GPU indices to limit"
        );
        let e = cohort_devices(&[], 1, Some("0"), DeviceChoice::Cuda(2), &no_nvml).unwrap_err();
        assert!(
            e.to_string().contains("lists no device at ordinal 2"),
            "{e}"
        );
        // A prefix of two GPUs' UUIDs is refused, as CUDA and the worker's identity refuse it
        // (this launcher once took the first match).
        let e = cohort_devices(&v(&["GPU-"]), 1, None, DeviceChoice::Auto, &fake).unwrap_err();
        assert!(e.to_string().contains("starts the UUIDs of 2 GPUs"), "{e}");
    }
}
