//! Does a node keep a MIG cohort on one parent GPU?
//!
//! The NVIDIA device plugin hands a Pod any free device of the resource it asks for, with no
//! affinity to a parent GPU. On a node of eight GPUs partitioned alike (a mig-parted layout with
//! `devices: all`), seven Pods asking for `nvidia.com/mig-1g.10gb` may get slices of seven
//! different GPUs: seven exclusive GPUs, not one shared GPU. So before anything is created the
//! backend reads the node's labels (GPU Feature Discovery's, and the MIG manager's) and refuses
//! a MIG policy on a node where its cohort could spread:
//!
//! - `mig` (one MIG device per worker): the node's devices of the requested profile must all be
//!   on one GPU. It accepts a node that holds one GPU (`nvidia.com/gpu.count=1` under the mixed
//!   strategy), or one in a single-GPU layout of `deploy/k8s/device-plugin/mig-parted-config.yaml`
//!   (`nvidia.com/mig.config=<gpu>-gpu0-...`, MIG on GPU 0 alone, applied:
//!   `nvidia.com/mig.config.state=success`). It refuses a node with more devices of the profile
//!   than one GPU can hold, and a node that time-slices the devices (two workers could share one).
//! - `mig-timeslice` (every worker on one MIG device): the node must hold exactly one device of
//!   the requested resource.
//!
//! Under the single strategy `nvidia.com/gpu.count` counts MIG devices, not GPUs, and the
//! strategy needs every GPU of the node in MIG mode with one profile, so no single-GPU layout
//! fits it: a single-strategy MIG node must hold one GPU (docs/deploy.md). The check can then
//! only refuse a node whose device count exceeds one GPU's.
//!
//! Label names and meanings: NVIDIA/k8s-device-plugin `internal/lm/mig-strategy.go` and
//! `internal/lm/resource.go` (`<resource>.count`, `<resource>.replicas`, `<resource>.product`;
//! under the single strategy the MIG labeller writes them for `nvidia.com/gpu`, and the product
//! ends in `-MIG-<profile>`, or `-MIG-INVALID` when the node breaks the strategy's rules).

use coload_cohort_schema::Mode;
use coload_device::MigProfile;

use crate::kubectl::NodeOffer;
use crate::resource::{ResourceKey, is_gpu_key};

/// The MIG strategy label (GPU Feature Discovery).
const STRATEGY: &str = "nvidia.com/mig.strategy";
/// The node's GPUs (mixed strategy) or MIG devices (single strategy).
const GPU_COUNT: &str = "nvidia.com/gpu.count";
/// The single strategy's product, `<model>-MIG-<profile>`.
const GPU_PRODUCT: &str = "nvidia.com/gpu.product";
/// The MIG manager's layout label, and its state.
const MIG_CONFIG: &str = "nvidia.com/mig.config";
const MIG_CONFIG_STATE: &str = "nvidia.com/mig.config.state";
/// What names a layout that puts MIG devices on GPU 0 alone (checked in deploy/tests).
pub(crate) const SINGLE_GPU_LAYOUT: &str = "-gpu0-";

/// The most GPU instances of a profile one GPU holds, from its compute slices (MIG User Guide,
/// "Supported MIG Profiles": 7 of a 1g profile, 3 of 2g, 2 of 3g, 1 of 4g and larger). An upper
/// bound: the 1g profiles with twice the memory (`1g.20gb`) fit 4 times.
fn most_per_gpu(profile: Option<&MigProfile>) -> u64 {
    match profile.map(|p| p.gpu_slices) {
        Some(1) | None => 7,
        Some(2) => 3,
        Some(3) => 2,
        Some(_) => 1,
    }
}

fn label_u64(offer: &NodeOffer, key: &str) -> Option<u64> {
    offer.labels.get(key).and_then(|v| v.trim().parse().ok())
}

/// Checks that a cohort of `mode` requesting `key` stays on one parent GPU of `offer` (and, for
/// `mig-timeslice`, on one MIG device). The node already advertises a MIG resource.
pub(crate) fn check(mode: Mode, key: &ResourceKey, offer: &NodeOffer) -> Result<(), String> {
    let node = &offer.name;
    let base = key.unshared();
    let (profile, devices, gpus) = holdings(key, offer)?;
    let profile_text = profile
        .as_ref()
        .map_or_else(|| "MIG".to_owned(), MigProfile::gpu_instance_profile);
    let replicas = label_u64(offer, &format!("{base}.replicas")).unwrap_or(1);
    match mode {
        Mode::Mig => {
            if replicas > 1 || key.is_shared() {
                return Err(format!(
                    "node `{node}` time-slices {base} ({replicas} replicas per device): two \
                     workers of a mig cohort could get one device; use a node whose MIG devices \
                     are not shared, or mode mig-timeslice"
                ));
            }
            let most = most_per_gpu(profile.as_ref());
            if let Some(n) = devices
                && n > most
            {
                return Err(format!(
                    "node `{node}` holds {n} {profile_text} devices, more than one GPU can hold \
                     ({most}): they are on several GPUs, and the device plugin may give the \
                     cohort's Pods devices of different GPUs; use a one-GPU node or a single-GPU \
                     layout (`<gpu>-gpu0-...` in mig-parted-config.yaml, docs/deploy.md)"
                ));
            }
            if is_gpu_key(key) {
                // Single strategy: nothing on the node counts its GPUs (see the module doc).
                return Ok(());
            }
            match gpus {
                Some(1) => Ok(()),
                Some(g) => single_gpu_layout(offer).map_err(|why| {
                    format!(
                        "node `{node}` holds {g} GPUs ({GPU_COUNT}) and {why}: the device plugin \
                         may give the cohort's Pods {profile_text} devices of different GPUs; \
                         use a one-GPU node or a single-GPU layout (`<gpu>-gpu0-...` in \
                         mig-parted-config.yaml, docs/deploy.md)"
                    )
                }),
                None => Err(format!(
                    "node `{node}` has no {GPU_COUNT} label (GPU Feature Discovery), so nothing \
                     says its {profile_text} devices are on one GPU; deploy GPU Feature \
                     Discovery (the GPU Operator does) or use a node whose labels say so"
                )),
            }
        }
        Mode::MigTimeslice => match devices {
            Some(1) => Ok(()),
            Some(n) => Err(format!(
                "node `{node}` holds {n} devices of {base}, and a mig-timeslice cohort shares \
                 one: the device plugin may spread its Pods over them (on several GPUs, too); \
                 use a layout with exactly one such device on the node (`<gpu>-gpu0-hybrid` in \
                 mig-parted-config.yaml, docs/deploy.md)"
            )),
            None => Err(format!(
                "node `{node}` does not say how many devices of {base} it holds (no {base}.count \
                 label); a mig-timeslice cohort must share exactly one"
            )),
        },
        Mode::Exclusive | Mode::Timeslice | Mode::Mps => Ok(()),
    }
}

/// What the node holds for `key`: the MIG profile, how many devices of it, and how many GPUs
/// (mixed strategy only). Refuses a key that is no MIG device under the node's strategy.
type Holdings = (Option<MigProfile>, Option<u64>, Option<u64>);

fn holdings(key: &ResourceKey, offer: &NodeOffer) -> Result<Holdings, String> {
    let node = &offer.name;
    let strategy = offer.labels.get(STRATEGY).map(String::as_str);
    let base = key.unshared();
    Ok(if is_gpu_key(key) {
        if strategy != Some("single") {
            return Err(format!(
                "requests {key}, which is a MIG device only under the single MIG strategy, but \
                 node `{node}` has {STRATEGY}={}: there {key} is a whole GPU; request \
                 nvidia.com/mig-<profile>",
                strategy.unwrap_or("(none)")
            ));
        }
        let product = offer.labels.get(GPU_PRODUCT).map_or("", String::as_str);
        if product.contains("-MIG-INVALID") {
            return Err(format!(
                "node `{node}` breaks the single MIG strategy ({GPU_PRODUCT}={product}: GPUs with \
                 MIG on and off, several profiles, or a MIG GPU without instances)"
            ));
        }
        let profile = product
            .rsplit_once("-MIG-")
            .map(|(_, p)| p.trim_end_matches("-SHARED"))
            .and_then(MigProfile::parse);
        // Under the single strategy the count label counts MIG devices, not GPUs.
        (profile, label_u64(offer, GPU_COUNT), None)
    } else {
        if let Some(s) = strategy
            && s != "mixed"
        {
            return Err(format!(
                "requests {key}, a resource of the mixed MIG strategy, but node `{node}` has \
                 {STRATEGY}={s}"
            ));
        }
        let devices = label_u64(offer, &format!("{base}.count")).or_else(|| {
            let replicas = label_u64(offer, &format!("{base}.replicas"))
                .unwrap_or(1)
                .max(1);
            let units = offer.units(base).max(offer.units(key.as_str()));
            (units > 0).then_some(units / replicas)
        });
        (key.mig_profile(), devices, label_u64(offer, GPU_COUNT))
    })
}

/// `Ok` when the node's MIG layout puts MIG devices on GPU 0 alone and was applied; else why not.
fn single_gpu_layout(offer: &NodeOffer) -> Result<(), String> {
    let Some(layout) = offer.labels.get(MIG_CONFIG) else {
        return Err(format!("no {MIG_CONFIG} label names its MIG layout"));
    };
    if !layout.contains(SINGLE_GPU_LAYOUT) {
        return Err(format!(
            "its MIG layout `{layout}` is not a single-GPU one (`<gpu>-gpu0-...`)"
        ));
    }
    match offer.labels.get(MIG_CONFIG_STATE).map(String::as_str) {
        Some("success") => Ok(()),
        state => Err(format!(
            "its single-GPU layout `{layout}` is not applied ({MIG_CONFIG_STATE}={})",
            state.unwrap_or("(none)")
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    /// A node of `fixtures/mig/k8s-nodes/` as the backend reads it.
    fn node(name: &str) -> NodeOffer {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/mig/k8s-nodes")
            .join(format!("{name}.json"));
        let text = std::fs::read_to_string(&path).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let offer = NodeOffer::from_json(v["metadata"]["name"].as_str().unwrap(), &v);
        assert!(!offer.labels.is_empty(), "{}", path.display());
        offer
    }

    fn key(k: &str) -> ResourceKey {
        ResourceKey::parse(k).unwrap()
    }

    #[test]
    fn a_one_gpu_node_keeps_a_mig_cohort_on_its_gpu() {
        let n = node("h200-1gpu-mixed-7x1g.18gb");
        assert_eq!(check(Mode::Mig, &key("nvidia.com/mig-1g.18gb"), &n), Ok(()));
        let n = node("a100-80gb-1gpu-single-7x1g.10gb");
        assert_eq!(check(Mode::Mig, &key("nvidia.com/gpu"), &n), Ok(()));
    }

    #[test]
    fn eight_gpus_partitioned_alike_are_refused() {
        let n = node("h200-8gpu-mixed-all-1g.18gb");
        let e = check(Mode::Mig, &key("nvidia.com/mig-1g.18gb"), &n).unwrap_err();
        assert!(
            e.contains("holds 56 1g.18gb devices, more than one GPU can hold (7)"),
            "{e}"
        );
        let n = node("a100-80gb-8gpu-single-all-1g.10gb");
        let e = check(Mode::Mig, &key("nvidia.com/gpu"), &n).unwrap_err();
        assert!(e.contains("holds 56 1g.10gb devices"), "{e}");
    }

    #[test]
    fn a_multi_gpu_node_needs_an_applied_single_gpu_layout() {
        // 8 GPUs, MIG on GPU 0 alone (7 x 1g.18gb), the other 7 whole.
        let mut n = node("h200-8gpu-mixed-gpu0-7x1g.18gb");
        assert_eq!(check(Mode::Mig, &key("nvidia.com/mig-1g.18gb"), &n), Ok(()));
        n.labels.insert(MIG_CONFIG_STATE.into(), "pending".into());
        let e = check(Mode::Mig, &key("nvidia.com/mig-1g.18gb"), &n).unwrap_err();
        assert!(
            e.contains("is not applied (nvidia.com/mig.config.state=pending)"),
            "{e}"
        );
        n.labels
            .insert(MIG_CONFIG.into(), "h200-141gb-all-1g.18gb".into());
        n.labels.insert(MIG_CONFIG_STATE.into(), "success".into());
        let e = check(Mode::Mig, &key("nvidia.com/mig-1g.18gb"), &n).unwrap_err();
        assert!(e.contains("holds 8 GPUs"), "{e}");
        assert!(e.contains("is not a single-GPU one"), "{e}");
        n.labels.remove(GPU_COUNT);
        let e = check(Mode::Mig, &key("nvidia.com/mig-1g.18gb"), &n).unwrap_err();
        assert!(e.contains("has no nvidia.com/gpu.count label"), "{e}");
    }

    #[test]
    fn mig_timeslice_needs_exactly_one_device() {
        let all = node("h100-8gpu-mixed-hybrid");
        let e = check(Mode::MigTimeslice, &key("nvidia.com/mig-2g.20gb"), &all).unwrap_err();
        assert!(
            e.contains("holds 8 devices of nvidia.com/mig-2g.20gb"),
            "{e}"
        );
        let gpu0 = node("h100-8gpu-mixed-gpu0-hybrid");
        assert_eq!(
            check(Mode::MigTimeslice, &key("nvidia.com/mig-2g.20gb"), &gpu0),
            Ok(())
        );
        // Its four time-sliced 1g devices are one GPU's, but shared: not for `mig`.
        let e = check(Mode::Mig, &key("nvidia.com/mig-1g.10gb"), &gpu0).unwrap_err();
        assert!(
            e.contains("time-slices nvidia.com/mig-1g.10gb (3 replicas"),
            "{e}"
        );
        let e = check(Mode::MigTimeslice, &key("nvidia.com/mig-1g.10gb"), &gpu0).unwrap_err();
        assert!(e.contains("holds 4 devices"), "{e}");
    }

    #[test]
    fn the_strategy_decides_what_nvidia_com_gpu_is() {
        let mixed = node("h200-1gpu-mixed-7x1g.18gb");
        let e = check(Mode::Mig, &key("nvidia.com/gpu"), &mixed).unwrap_err();
        assert!(e.contains("only under the single MIG strategy"), "{e}");
        let mut single = node("a100-80gb-1gpu-single-7x1g.10gb");
        let e = check(Mode::Mig, &key("nvidia.com/mig-1g.10gb"), &single).unwrap_err();
        assert!(e.contains("a resource of the mixed MIG strategy"), "{e}");
        single.labels.insert(
            GPU_PRODUCT.into(),
            "NVIDIA-A100-SXM4-80GB-MIG-INVALID".into(),
        );
        let e = check(Mode::Mig, &key("nvidia.com/gpu"), &single).unwrap_err();
        assert!(e.contains("breaks the single MIG strategy"), "{e}");
    }

    #[test]
    fn one_gpu_holds_at_most_this_many_of_a_profile() {
        let most = |p: &str| most_per_gpu(MigProfile::parse(p).as_ref());
        assert_eq!(
            [
                most("1g.10gb"),
                most("2g.20gb"),
                most("3g.40gb"),
                most("4g.40gb"),
                most("7g.80gb")
            ],
            [7, 3, 2, 1, 1]
        );
    }
}
