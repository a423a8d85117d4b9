//! Co-location evidence: which physical GPUs and MIG GPU instances the workers actually used,
//! whether that fits the declared mode, and the memory each shared device had to hold.
//!
//! MIG as NVIDIA documents it (MIG User Guide, "Concepts"): a GPU instance (GI) owns memory
//! slices, caches and copy engines; its compute slices may be split into several compute
//! instances (CIs), each a MIG device (`MIG-...` UUID, CUDA device) of its own, which share the
//! GI's memory and memory bandwidth. Isolation is per GI, so the unit here is the GI: its parent
//! GPU UUID and GI id (`device.mig_gpu_instance_id`). A worker record without a GI id (written
//! before coload recorded it) counts its MIG device as its own GI, as before.
//!
//! The rules, per declared mode:
//! - `exclusive`: one worker per physical GPU, no MIG instance.
//! - `timeslice` and `mps`: every worker on one physical GPU, no MIG instance.
//! - `mig`: one parent GPU, every worker on its own MIG GPU instance: two workers on compute
//!   instances of one GPU instance share its memory and do not fit (named as such).
//! - `mig-timeslice`: one parent GPU, every worker on a MIG device, and fewer MIG devices than
//!   workers (several workers time-share a device); a cohort of one worker fits (it is the solo
//!   baseline of the mode).
//! - For both MIG modes, every worker on the same MIG profile: a cohort of mixed profiles
//!   (`1g.10gb` beside `3g.40gb`) gives its workers unequal slices, so it does not fit (and is
//!   refused under `--strict`, like every mismatch).
//!
//! Memory is reported per device (the GPU instance for workers on MIG, else the physical GPU)
//! as the sum of the peaks of the workers on it against the device's memory: a Kubernetes
//! allocation count is not a memory quota, so time-sliced workers can exhaust each other's
//! memory, and compute instances of one GI draw on the GI's one memory.

use std::collections::{BTreeMap, BTreeSet};

use coload_cohort_schema::{Colocation, DeviceInfo, DeviceKind, DeviceMemory, Mode};

/// What the colocation check needs from one worker.
#[derive(Debug, Clone)]
pub(crate) struct Placement<'a> {
    pub(crate) replica: u32,
    pub(crate) device: Option<&'a DeviceInfo>,
    pub(crate) peak_device_bytes: Option<u64>,
}

/// The MIG GPU instance a worker's device belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum InstanceKey<'a> {
    /// Parent GPU UUID and GPU instance id.
    Gi(&'a str, u32),
    /// A MIG device whose GPU instance id was not recorded: its own instance.
    Mig(&'a str),
}

/// The GPU instance of a CUDA device on MIG, `None` off MIG.
pub(crate) fn instance_of(d: &DeviceInfo) -> Option<InstanceKey<'_>> {
    if d.kind != DeviceKind::Cuda {
        return None;
    }
    let mig = d.mig_uuid.as_deref()?;
    Some(match (d.gpu_uuid.as_deref(), d.mig_gpu_instance_id) {
        (Some(gpu), Some(gi)) => InstanceKey::Gi(gpu, gi),
        _ => InstanceKey::Mig(mig),
    })
}

/// The GPU instances of `devices` (indexed like them), each with a label and its members.
///
/// The label is the MIG UUID when one MIG device stands for the instance (as before GPU
/// instances were recorded), else `<gpu uuid> GPU instance <id> (<mig uuid>, ...)`.
pub(crate) fn gpu_instances<'a>(
    devices: &[Option<&'a DeviceInfo>],
) -> BTreeMap<InstanceKey<'a>, GpuInstance<'a>> {
    let mut map: BTreeMap<InstanceKey<'a>, GpuInstance<'a>> = BTreeMap::new();
    for (i, d) in devices.iter().enumerate() {
        let Some(d) = d else { continue };
        let (Some(key), Some(mig)) = (instance_of(d), d.mig_uuid.as_deref()) else {
            continue;
        };
        let entry = map.entry(key).or_insert_with(|| GpuInstance {
            label: String::new(),
            members: Vec::new(),
            migs: BTreeSet::new(),
        });
        entry.members.push(i);
        entry.migs.insert(mig);
    }
    for (key, instance) in &mut map {
        instance.label = match (key, instance.migs.len()) {
            (InstanceKey::Gi(gpu, gi), n) if n > 1 => {
                let migs: Vec<&str> = instance.migs.iter().copied().collect();
                format!("{gpu} GPU instance {gi} ({})", migs.join(", "))
            }
            _ => instance
                .migs
                .iter()
                .next()
                .map_or_else(String::new, |m| (*m).to_owned()),
        };
    }
    map
}

/// One MIG GPU instance the workers used.
#[derive(Debug, Clone)]
pub(crate) struct GpuInstance<'a> {
    /// How reports name it.
    pub(crate) label: String,
    /// Indices of its workers, in the order given.
    pub(crate) members: Vec<usize>,
    /// The MIG devices (compute instances) of it the workers used.
    pub(crate) migs: BTreeSet<&'a str>,
}

fn cuda<'a>(p: &Placement<'a>) -> Option<&'a DeviceInfo> {
    p.device.filter(|d| d.kind == DeviceKind::Cuda)
}

fn gpu_of<'a>(p: &Placement<'a>) -> Option<&'a str> {
    cuda(p).and_then(|d| d.gpu_uuid.as_deref())
}

fn mig_of<'a>(p: &Placement<'a>) -> Option<&'a str> {
    cuda(p).and_then(|d| d.mig_uuid.as_deref())
}

fn profile_of<'a>(p: &Placement<'a>) -> Option<&'a str> {
    cuda(p)
        .filter(|d| d.mig_uuid.is_some())
        .and_then(|d| d.mig_profile.as_deref())
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

fn replicas(ids: &[u32]) -> String {
    let ids: Vec<String> = ids.iter().map(ToString::to_string).collect();
    let noun = if ids.len() == 1 {
        "replica"
    } else {
        "replicas"
    };
    format!("{noun} {}", ids.join(", "))
}

fn describe(map: &BTreeMap<&str, Vec<u32>>) -> String {
    map.iter()
        .map(|(dev, ids)| format!("{dev}: {}", replicas(ids)))
        .collect::<Vec<_>>()
        .join("; ")
}

/// A count with its noun: "1 cohort", "2 cohorts" (the reports' wording too).
#[must_use]
pub fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The GPU instances holding several of the workers' compute instances, in words (empty when
/// none does).
fn shared_instances(
    workers: &[Placement<'_>],
    instances: &BTreeMap<InstanceKey<'_>, GpuInstance<'_>>,
) -> String {
    let shared: Vec<String> = instances
        .iter()
        .filter_map(|(key, g)| match key {
            // A key of one MIG device (no GPU instance id recorded) holds that device alone.
            InstanceKey::Gi(gpu, gi) if g.migs.len() > 1 => Some((*gpu, *gi, g)),
            _ => None,
        })
        .map(|(gpu, gi, g)| {
            let devices: Vec<String> = g
                .migs
                .iter()
                .map(|m| {
                    let ids: Vec<u32> = g
                        .members
                        .iter()
                        .map(|&i| &workers[i])
                        .filter(|w| mig_of(w) == Some(*m))
                        .map(|w| w.replica)
                        .collect();
                    format!("{m} ({})", replicas(&ids))
                })
                .collect();
            format!("GPU instance {gi} of {gpu}: {}", devices.join(", "))
        })
        .collect();
    if shared.is_empty() {
        String::new()
    } else {
        format!(
            "; compute instances sharing one GPU instance (its memory and bandwidth): {}",
            shared.join("; ")
        )
    }
}

/// Builds the colocation evidence for `workers` (sorted by replica) under `mode`.
pub(crate) fn colocation(mode: Mode, workers: &[Placement<'_>]) -> Colocation {
    let gpus = by_device(workers, gpu_of);
    let migs = by_device(workers, mig_of);
    let profiles = by_device(workers, profile_of);
    let devices: Vec<Option<&DeviceInfo>> = workers.iter().map(|w| w.device).collect();
    let instances = gpu_instances(&devices);
    let n = workers.len();
    let unknown: Vec<String> = workers
        .iter()
        .filter(|w| gpu_of(w).is_none())
        .map(|w| w.replica.to_string())
        .collect();
    let seen = format!(
        "{} on {} ({}){}{}",
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
        },
        shared_instances(workers, &instances),
    );
    let on_mig = workers.iter().filter(|w| mig_of(w).is_some()).count();
    let mig_mode = matches!(mode, Mode::Mig | Mode::MigTimeslice);
    let mixed_profiles = mig_mode && profiles.len() > 1;
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
                gpus.len() == 1 && on_mig == n && instances.len() == n,
                "one parent GPU, each worker on its own MIG instance",
            ),
            // One worker alone is the mode's solo baseline: nothing to share with.
            Mode::MigTimeslice => (
                gpus.len() == 1 && on_mig == n && (n == 1 || migs.len() < n),
                "one parent GPU, every worker on a MIG instance shared with others",
            ),
        };
        (Some(f && !mixed_profiles), e)
    } else {
        (None, "")
    };
    let profile_note = if mixed_profiles {
        format!(
            "; the workers' MIG profiles differ ({}), so they ran on unequal slices",
            describe(&profiles)
        )
    } else {
        String::new()
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
        Some(false) => format!("mode {mode} expects {expected}; seen {seen}{profile_note}"),
    };
    let mig_profiles: BTreeSet<String> = workers
        .iter()
        .filter_map(|w| cuda(w).filter(|d| d.mig_uuid.is_some()))
        .filter_map(|d| {
            d.mig_gpu_instance_profile
                .clone()
                .or_else(|| d.mig_profile.clone())
        })
        .collect();
    Colocation {
        physical_gpus: gpus.keys().map(|s| (*s).to_owned()).collect(),
        mig_devices: migs.keys().map(|s| (*s).to_owned()).collect(),
        mig_profiles: mig_profiles.into_iter().collect(),
        fits_mode: fits,
        explanation,
        devices: device_memory(workers, &instances),
    }
}

/// Memory per device: per GPU instance for workers on MIG (its compute instances share its
/// memory, so the instance counts once), per physical GPU otherwise.
fn device_memory(
    workers: &[Placement<'_>],
    instances: &BTreeMap<InstanceKey<'_>, GpuInstance<'_>>,
) -> Vec<DeviceMemory> {
    let mut map: BTreeMap<String, Vec<&Placement<'_>>> = BTreeMap::new();
    for g in instances.values() {
        map.entry(g.label.clone())
            .or_default()
            .extend(g.members.iter().map(|&i| &workers[i]));
    }
    for w in workers.iter().filter(|w| mig_of(w).is_none()) {
        if let Some(gpu) = gpu_of(w) {
            map.entry(gpu.to_owned()).or_default().push(w);
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
                device,
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

    /// Workers identified on the recorded topology `fixture` of `fixtures/mig/`, one per
    /// `CUDA_VISIBLE_DEVICES` value, through a FakeNvml built from its listing (the identity a
    /// worker on that node records).
    fn on_fixture(fixture: &str, visible: &[&str]) -> Vec<DeviceInfo> {
        use coload_device::{FakeNvml, Topology, VisibleEnv, identify_with};
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/mig")
            .join(fixture);
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
        let node = Topology::from_listing(&read("nvidia-smi-L.txt"))
            .unwrap()
            .with_query_csv(&read("query-gpu.csv"))
            .unwrap();
        let nvml = FakeNvml::from_topology(&node);
        visible
            .iter()
            .map(|v| {
                let env = VisibleEnv {
                    cuda_visible_devices: Some((*v).to_owned()),
                    ..VisibleEnv::default()
                };
                let r = identify_with(Some(&nvml), &env, DeviceKind::Cuda, Some(0));
                assert!(r.target.is_some(), "{fixture}: {v}: {:?}", r.warnings);
                r.info
            })
            .collect()
    }

    /// The MIG UUIDs of GPU `gpu` of `fixture`, in listing order.
    fn migs(fixture: &str, gpu: usize) -> Vec<String> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/mig");
        let text = std::fs::read_to_string(dir.join(fixture).join("nvidia-smi-L.txt")).unwrap();
        let node = coload_device::Topology::from_listing(&text).unwrap();
        node.gpus[gpu].migs.iter().map(|m| m.uuid.clone()).collect()
    }

    const GIB: u64 = 1 << 30;

    #[test]
    fn a100_seven_1g_workers_fit_mig_with_one_memory_entry_each() {
        let m = migs("a100-80gb-7x1g", 0);
        let refs: Vec<&str> = m.iter().map(String::as_str).collect();
        let devs = on_fixture("a100-80gb-7x1g", &refs);
        let c = colocation(Mode::Mig, &place(&devs, Some(4 * GIB)));
        assert_eq!(c.fits_mode, Some(true), "{}", c.explanation);
        assert_eq!(c.devices.len(), 7);
        assert!(c.devices.iter().all(|d| d.headroom_bytes == Some(6 << 30)));
        // Seven workers on seven devices share none: not mig-timeslice.
        assert_eq!(
            colocation(Mode::MigTimeslice, &place(&devs, None)).fits_mode,
            Some(false)
        );
    }

    #[test]
    fn mig_needs_distinct_gpu_instances_not_distinct_mig_devices() {
        let fixture = "h100-ci-split-1c3g";
        let m = migs(fixture, 0);
        // Three workers on the three compute instances of one 3g.40gb GPU instance.
        let devs = on_fixture(fixture, &[&m[0], &m[1], &m[2]]);
        assert_eq!(devs[2].mig_gpu_instance_id, Some(1));
        let c = colocation(Mode::Mig, &place(&devs, Some(15 * GIB)));
        assert_eq!(c.fits_mode, Some(false), "{}", c.explanation);
        assert_eq!(c.mig_devices.len(), 3);
        assert!(
            c.explanation.contains(
                "compute instances sharing one GPU instance (its memory and bandwidth): \
                 GPU instance 1 of GPU-49c4c6cd"
            ),
            "{}",
            c.explanation
        );
        assert!(
            c.explanation.contains(&format!("{} (replica 1)", m[1])),
            "{}",
            c.explanation
        );
        // Their memory is the GPU instance's, counted once: 3 x 15 GiB in 40 GiB.
        assert_eq!(c.devices.len(), 1, "{:?}", c.devices);
        let d = &c.devices[0];
        assert_eq!(d.replicas, [0, 1, 2]);
        assert!(d.device.contains("GPU instance 1"), "{}", d.device);
        assert_eq!(d.memory_total_bytes, Some(40 * GIB));
        assert_eq!(d.headroom_bytes, Some(-(5 * GIB as i64)));

        // Two workers on two GPU instances of one profile fit.
        let devs = on_fixture(fixture, &[&m[3], &m[3]]);
        assert_eq!(
            colocation(Mode::MigTimeslice, &place(&devs, None)).fits_mode,
            Some(true)
        );

        // Records from before GPU instance ids were kept: each MIG device is its own instance.
        let mut old = on_fixture(fixture, &[&m[0], &m[1]]);
        for d in &mut old {
            d.mig_gpu_instance_id = None;
        }
        let c = colocation(Mode::Mig, &place(&old, None));
        assert_eq!(c.fits_mode, Some(true), "{}", c.explanation);
        assert_eq!(c.devices.len(), 2);
    }

    #[test]
    fn mig_timeslice_accepts_a_one_worker_cohort() {
        let m = migs("h200-7x1g18gb", 0);
        let one = on_fixture("h200-7x1g18gb", &[&m[0]]);
        let c = colocation(Mode::MigTimeslice, &place(&one, None));
        assert_eq!(c.fits_mode, Some(true), "{}", c.explanation);
        let shared = on_fixture("h200-7x1g18gb", &[&m[0], &m[0], &m[1]]);
        assert_eq!(
            colocation(Mode::MigTimeslice, &place(&shared, None)).fits_mode,
            Some(true)
        );
        let apart = on_fixture("h200-7x1g18gb", &[&m[0], &m[1]]);
        assert_eq!(
            colocation(Mode::MigTimeslice, &place(&apart, None)).fits_mode,
            Some(false)
        );
        // Mode mig with one worker was always fine.
        assert_eq!(
            colocation(Mode::Mig, &place(&one, None)).fits_mode,
            Some(true)
        );
    }

    #[test]
    fn a_cohort_of_mixed_mig_profiles_does_not_fit() {
        let fixture = "h100-mixed-3g-2g-1g";
        let m = migs(fixture, 0);
        let devs = on_fixture(fixture, &[&m[0], &m[2]]);
        let c = colocation(Mode::Mig, &place(&devs, None));
        assert_eq!(c.fits_mode, Some(false), "{}", c.explanation);
        assert!(
            c.explanation.ends_with(
                "; the workers' MIG profiles differ (1g.10gb: replica 1; 3g.40gb: replica 0), \
                 so they ran on unequal slices"
            ),
            "{}",
            c.explanation
        );
        // The media extensions make another profile too.
        let me = on_fixture(fixture, &[&m[2], &m[3]]);
        assert_eq!(
            colocation(Mode::Mig, &place(&me, None)).fits_mode,
            Some(false)
        );
        let c = colocation(
            Mode::MigTimeslice,
            &place(&on_fixture(fixture, &[&m[1], &m[1], &m[2]]), None),
        );
        assert_eq!(c.fits_mode, Some(false), "{}", c.explanation);
        assert!(
            c.explanation.contains("2g.20gb: replicas 0, 1"),
            "{}",
            c.explanation
        );
    }

    #[test]
    fn pre_r470_instances_and_a_node_of_eight_gpus() {
        let gpu = "GPU-0f61b04e-e424-8456-26cf-648dc69fdd2c";
        let devs = on_fixture(
            "a100-40gb-pre-r470",
            &[&format!("MIG-{gpu}/1/0"), &format!("MIG-{gpu}/2/0")],
        );
        let c = colocation(Mode::Mig, &place(&devs, None));
        assert_eq!(c.fits_mode, Some(true), "{}", c.explanation);
        assert_eq!(devs[1].mig_gpu_instance_id, Some(2));

        // Two workers of a mig cohort on two GPUs of the node: not one parent GPU.
        let node = "h200-node-8x7x1g";
        let (a, b) = (migs(node, 0), migs(node, 7));
        let devs = on_fixture(node, &[&a[0], &b[6]]);
        let c = colocation(Mode::Mig, &place(&devs, None));
        assert_eq!(c.fits_mode, Some(false));
        assert_eq!(c.physical_gpus.len(), 2);
    }
}
