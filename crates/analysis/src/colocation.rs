//! Co-location evidence: which physical GPUs and MIG instances the workers actually used, whether
//! that fits the declared mode, and the memory each shared device had to hold.
//!
//! The rules, per declared mode:
//! - `exclusive`: one worker per physical GPU, no MIG instance.
//! - `timeslice` and `mps`: every worker on one physical GPU, no MIG instance.
//! - `mig`: one parent GPU, every worker on its own MIG instance.
//! - `mig-timeslice`: one parent GPU, every worker on a MIG instance, and fewer instances than
//!   workers (several workers share an instance).
//!
//! Memory is reported per device (the MIG instance for a worker on one, else the physical GPU)
//! as the sum of the peaks of the workers on it against the device's memory: a Kubernetes
//! allocation count is not a memory quota, so time-sliced workers can exhaust each other's memory.

use std::collections::BTreeMap;

use coload_cohort_schema::{Colocation, DeviceInfo, DeviceKind, DeviceMemory, Mode};

/// What the colocation check needs from one worker.
#[derive(Debug, Clone)]
pub(crate) struct Placement<'a> {
    pub(crate) replica: u32,
    pub(crate) device: Option<&'a DeviceInfo>,
    pub(crate) peak_device_bytes: Option<u64>,
}

fn gpu_of<'a>(p: &Placement<'a>) -> Option<&'a str> {
    p.device
        .filter(|d| d.kind == DeviceKind::Cuda)
        .and_then(|d| d.gpu_uuid.as_deref())
}

fn mig_of<'a>(p: &Placement<'a>) -> Option<&'a str> {
    p.device
        .filter(|d| d.kind == DeviceKind::Cuda)
        .and_then(|d| d.mig_uuid.as_deref())
}

fn by_device<'a>(
    workers: &[Placement<'a>],
    key: impl Fn(&Placement<'a>) -> Option<&'a str>,
) -> BTreeMap<&'a str, Vec<u32>> {
    let mut map: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    for w in workers {
        if let Some(k) = key(w) {
            map.entry(k).or_default().push(w.replica);
        }
    }
    map
}

fn describe(map: &BTreeMap<&str, Vec<u32>>) -> String {
    map.iter()
        .map(|(dev, replicas)| {
            let ids: Vec<String> = replicas.iter().map(ToString::to_string).collect();
            let noun = if replicas.len() == 1 {
                "replica"
            } else {
                "replicas"
            };
            format!("{dev}: {noun} {}", ids.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Builds the colocation evidence for `workers` (sorted by replica) under `mode`.
pub(crate) fn colocation(mode: Mode, workers: &[Placement<'_>]) -> Colocation {
    let gpus = by_device(workers, gpu_of);
    let migs = by_device(workers, mig_of);
    let n = workers.len();
    let unknown: Vec<String> = workers
        .iter()
        .filter(|w| gpu_of(w).is_none())
        .map(|w| w.replica.to_string())
        .collect();
    let seen = format!(
        "{} on {} ({}){}",
        plural(n, "worker", "workers"),
        plural(gpus.len(), "physical GPU", "physical GPUs"),
        describe(&gpus),
        if migs.is_empty() {
            ", no MIG instance".to_owned()
        } else {
            format!(
                ", {} ({})",
                plural(migs.len(), "MIG instance", "MIG instances"),
                describe(&migs)
            )
        }
    );
    let on_mig = workers.iter().filter(|w| mig_of(w).is_some()).count();
    let (fits, expected) = if unknown.is_empty() {
        let (f, e) = match mode {
            Mode::Exclusive => (
                migs.is_empty() && gpus.len() == n,
                "one physical GPU per worker, no MIG",
            ),
            Mode::Timeslice => (
                migs.is_empty() && gpus.len() == 1,
                "every worker on one physical GPU, no MIG",
            ),
            Mode::Mps => (
                migs.is_empty() && gpus.len() == 1,
                "every worker on one physical GPU (one MPS server), no MIG",
            ),
            Mode::Mig => (
                gpus.len() == 1 && on_mig == n && migs.len() == n,
                "one parent GPU, each worker on its own MIG instance",
            ),
            Mode::MigTimeslice => (
                gpus.len() == 1 && on_mig == n && migs.len() < n,
                "one parent GPU, every worker on a MIG instance shared with others",
            ),
        };
        (Some(f), e)
    } else {
        (None, "")
    };
    let explanation = match fits {
        None if unknown.len() == n => "no GPU identity recorded (a CPU run, or NVML absent): \
                                       the placement cannot be checked"
            .to_owned(),
        None => format!(
            "replica {} recorded no GPU identity: the placement cannot be checked",
            unknown.join(", ")
        ),
        Some(true) => format!("fits {mode} ({expected}): {seen}"),
        Some(false) => format!("mode {mode} expects {expected}; seen {seen}"),
    };
    Colocation {
        physical_gpus: gpus.keys().map(|s| (*s).to_owned()).collect(),
        mig_devices: migs.keys().map(|s| (*s).to_owned()).collect(),
        fits_mode: fits,
        explanation,
        devices: device_memory(workers),
    }
}

fn device_memory(workers: &[Placement<'_>]) -> Vec<DeviceMemory> {
    let mut map: BTreeMap<&str, Vec<&Placement<'_>>> = BTreeMap::new();
    for w in workers {
        if let Some(key) = mig_of(w).or_else(|| gpu_of(w)) {
            map.entry(key).or_default().push(w);
        }
    }
    map.into_iter()
        .map(|(device, ws)| {
            let memory_total_bytes = ws
                .iter()
                .find_map(|w| w.device.and_then(|d| d.memory_total_bytes));
            let peak_sum_bytes = ws
                .iter()
                .map(|w| w.peak_device_bytes)
                .try_fold(0u64, |acc, p| p.map(|p| acc.saturating_add(p)));
            let headroom_bytes = match (memory_total_bytes, peak_sum_bytes) {
                (Some(t), Some(s)) => Some(
                    i64::try_from(i128::from(t) - i128::from(s)).unwrap_or(if t >= s {
                        i64::MAX
                    } else {
                        i64::MIN
                    }),
                ),
                _ => None,
            };
            DeviceMemory {
                device: device.to_owned(),
                replicas: ws.iter().map(|w| w.replica).collect(),
                memory_total_bytes,
                peak_sum_bytes,
                headroom_bytes,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(uuid: &str, mig: Option<&str>, total: u64) -> DeviceInfo {
        let mut d = DeviceInfo::cpu();
        d.kind = DeviceKind::Cuda;
        d.gpu_uuid = Some(uuid.into());
        d.mig_uuid = mig.map(Into::into);
        d.memory_total_bytes = Some(total);
        d
    }

    fn place(devs: &[DeviceInfo], peak: Option<u64>) -> Vec<Placement<'_>> {
        devs.iter()
            .enumerate()
            .map(|(i, d)| Placement {
                replica: i as u32,
                device: Some(d),
                peak_device_bytes: peak,
            })
            .collect()
    }

    #[test]
    fn timeslice_on_one_gpu_fits_and_sums_memory() {
        let devs = vec![gpu("GPU-a", None, 100); 3];
        let c = colocation(Mode::Timeslice, &place(&devs, Some(40)));
        assert_eq!(c.fits_mode, Some(true));
        assert_eq!(c.physical_gpus, ["GPU-a"]);
        assert_eq!(c.devices.len(), 1);
        assert_eq!(c.devices[0].peak_sum_bytes, Some(120));
        assert_eq!(c.devices[0].headroom_bytes, Some(-20));
        // The same placement is wrong for exclusive and for MIG.
        assert_eq!(
            colocation(Mode::Exclusive, &place(&devs, None)).fits_mode,
            Some(false)
        );
        let mig = colocation(Mode::Mig, &place(&devs, None));
        assert_eq!(mig.fits_mode, Some(false));
        assert_eq!(
            mig.explanation,
            "mode mig expects one parent GPU, each worker on its own MIG instance; \
             seen 3 workers on 1 physical GPU (GPU-a: replicas 0, 1, 2), no MIG instance"
        );
        assert_eq!(mig.devices[0].peak_sum_bytes, None);
    }

    #[test]
    fn mig_rules() {
        let distinct = [
            gpu("GPU-a", Some("MIG-1"), 10),
            gpu("GPU-a", Some("MIG-2"), 10),
        ];
        assert_eq!(
            colocation(Mode::Mig, &place(&distinct, Some(3))).fits_mode,
            Some(true)
        );
        assert_eq!(
            colocation(Mode::MigTimeslice, &place(&distinct, None)).fits_mode,
            Some(false)
        );
        let shared = [
            gpu("GPU-a", Some("MIG-1"), 10),
            gpu("GPU-a", Some("MIG-1"), 10),
        ];
        let c = colocation(Mode::MigTimeslice, &place(&shared, Some(3)));
        assert_eq!(c.fits_mode, Some(true));
        assert_eq!(c.devices[0].device, "MIG-1");
        assert_eq!(c.devices[0].headroom_bytes, Some(4));
    }

    #[test]
    fn exclusive_needs_one_gpu_each() {
        let devs = [gpu("GPU-a", None, 1), gpu("GPU-b", None, 1)];
        assert_eq!(
            colocation(Mode::Exclusive, &place(&devs, None)).fits_mode,
            Some(true)
        );
        assert_eq!(
            colocation(Mode::Timeslice, &place(&devs, None)).fits_mode,
            Some(false)
        );
    }

    #[test]
    fn cpu_cannot_be_checked() {
        let devs = [DeviceInfo::cpu()];
        let c = colocation(Mode::Exclusive, &place(&devs, None));
        assert_eq!(c.fits_mode, None);
        assert!(c.devices.is_empty());
        assert!(c.explanation.starts_with("no GPU identity recorded"));
    }
}
