//! The recorded MIG topologies of `fixtures/mig/` (see its README for the source of each and the
//! answer each must give): parsed from their saved `nvidia-smi -L` listing and `--query-gpu`
//! csv, resolved with `coload_device::visible`, and replayed through a `FakeNvml` built from the
//! listing so that identification and enumeration see the same node (issues 21 and 25).

use std::path::Path;

use coload_cohort_schema::DeviceKind;
use coload_device::visible::{self, ResolveError};
use coload_device::{
    EnumerationWarning, FakeNvml, NvmlCode, NvmlSource, NvmlTarget, Topology, VisibleEnv,
    identify_with,
};

fn read(fixture: &str, file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/mig")
        .join(fixture)
        .join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The fixture's listing with the csv's MIG modes.
fn node(fixture: &str) -> Topology {
    Topology::from_listing(&read(fixture, "nvidia-smi-L.txt"))
        .and_then(|t| t.with_query_csv(&read(fixture, "query-gpu.csv")))
        .unwrap_or_else(|e| panic!("{fixture}: {e}"))
}

fn uuids(devices: &[visible::ResolvedDevice<'_>]) -> Vec<String> {
    devices.iter().map(|d| d.uuid().to_owned()).collect()
}

fn cvd(list: &str) -> VisibleEnv {
    VisibleEnv {
        cuda_visible_devices: Some(list.to_owned()),
        ..VisibleEnv::default()
    }
}

#[test]
fn a100_80gb_offers_seven_1g_10gb_devices_each_its_own_gpu_instance() {
    let t = node("a100-80gb-7x1g");
    let all = visible::all_devices(&t);
    assert_eq!(all.len(), 7);
    assert!(
        all.iter()
            .all(|d| d.mig.unwrap().profile.as_deref() == Some("1g.10gb"))
    );
    // The whole GPU by index, and by a unique prefix of its UUID, stands for its seven devices.
    assert_eq!(visible::resolve(&t, "0").unwrap().len(), 7);
    assert_eq!(
        visible::resolve(&t, &t.gpus[0].facts.uuid[..12])
            .unwrap()
            .len(),
        7
    );

    let nvml = FakeNvml::from_topology(&t);
    let fourth = &t.gpus[0].migs[3].uuid;
    let r = identify_with(Some(&nvml), &cvd(fourth), DeviceKind::Cuda, Some(0));
    assert_eq!(r.info.mig_uuid.as_deref(), Some(fourth.as_str()));
    assert_eq!(r.info.gpu_name.as_deref(), Some("NVIDIA A100-SXM4-80GB"));
    assert_eq!(r.info.mig_gpu_instance_profile.as_deref(), Some("1g.10gb"));
    assert_eq!(r.info.memory_total_bytes, Some(10 << 30));
    // Seven distinct GPU instances.
    let gis: std::collections::BTreeSet<_> = nvml
        .mig_devices(0)
        .unwrap()
        .iter()
        .map(|m| m.gpu_instance_id)
        .collect();
    assert_eq!(gis.len(), 7);
}

#[test]
fn h100_mixed_layout_keeps_every_profile_and_the_media_extension() {
    let t = node("h100-mixed-3g-2g-1g");
    let profiles: Vec<&str> = t.gpus[0]
        .migs
        .iter()
        .map(|m| m.profile.as_deref().unwrap())
        .collect();
    assert_eq!(profiles, ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb+me"]);
    let nvml = FakeNvml::from_topology(&t);
    let me = &t.gpus[0].migs[3].uuid;
    let r = identify_with(Some(&nvml), &cvd(me), DeviceKind::Cuda, Some(0));
    assert_eq!(r.info.mig_profile.as_deref(), Some("1g.10gb+me"));
    assert_eq!(
        r.info.mig_gpu_instance_profile.as_deref(),
        Some("1g.10gb+me")
    );
    let big = &t.gpus[0].migs[0].uuid;
    let r = identify_with(Some(&nvml), &cvd(big), DeviceKind::Cuda, Some(0));
    assert_eq!(r.info.memory_total_bytes, Some(40 << 30));
}

#[test]
fn h200_1g_18gb_devices_resolve_by_uuid_in_the_order_given() {
    let t = node("h200-7x1g18gb");
    let m = &t.gpus[0].migs;
    let list = format!("{},{}", m[5].uuid, m[2].uuid);
    let d = visible::resolve(&t, &list).unwrap();
    assert_eq!(uuids(&d), [m[5].uuid.clone(), m[2].uuid.clone()]);
    assert!(d.iter().all(|d| !d.by_position));
    let nvml = FakeNvml::from_topology(&t);
    let r = identify_with(Some(&nvml), &cvd(&list), DeviceKind::Cuda, Some(1));
    assert_eq!(
        r.target,
        Some(NvmlTarget {
            gpu_index: 0,
            mig_index: Some(2)
        })
    );
    assert_eq!(r.info.memory_total_bytes, Some(18 << 30));
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
}

#[test]
fn compute_instances_of_one_gpu_instance_share_its_id() {
    let t = node("h100-ci-split-1c3g");
    // `nvidia-smi -L` of a current driver names no instance ids ...
    assert!(t.gpus[0].migs.iter().all(|m| m.gpu_instance_id.is_none()));
    // ... so the fake lays them out as NVML lists them: three 1c CIs of one 3g GI, then a GI
    // of its own.
    let nvml = FakeNvml::from_topology(&t);
    let ids: Vec<(Option<u32>, Option<u32>)> = nvml
        .mig_devices(0)
        .unwrap()
        .iter()
        .map(|m| (m.gpu_instance_id, m.compute_instance_id))
        .collect();
    assert_eq!(
        ids,
        [
            (Some(1), Some(0)),
            (Some(1), Some(1)),
            (Some(1), Some(2)),
            (Some(2), Some(0))
        ]
    );
    let second = &t.gpus[0].migs[1].uuid;
    let r = identify_with(Some(&nvml), &cvd(second), DeviceKind::Cuda, Some(0));
    assert_eq!(r.info.mig_profile.as_deref(), Some("1c.3g.40gb"));
    assert_eq!(r.info.mig_gpu_instance_profile.as_deref(), Some("3g.40gb"));
    assert_eq!(r.info.mig_gpu_instance_id, Some(1));
    assert_eq!(r.info.mig_compute_instance_id, Some(1));
    // The GI's memory, not a third of it: the CIs share it.
    assert_eq!(r.info.memory_total_bytes, Some(40 << 30));
}

#[test]
fn pre_r470_names_give_instance_ids_and_resolve_both_ways() {
    let t = node("a100-40gb-pre-r470");
    let gpu = &t.gpus[0].facts.uuid;
    assert_eq!(t.gpus[0].facts.name, "A100-SXM4-40GB");
    let ids: Vec<(Option<u32>, Option<u32>)> = t.gpus[0]
        .migs
        .iter()
        .map(|m| (m.gpu_instance_id, m.compute_instance_id))
        .collect();
    assert_eq!(ids, [(Some(1), Some(0)), (Some(2), Some(0))]);
    let legacy = format!("MIG-{gpu}/2/0");
    assert_eq!(
        uuids(&visible::resolve(&t, &legacy).unwrap()),
        [legacy.as_str()]
    );
    assert!(matches!(
        visible::resolve(&t, &format!("MIG-{gpu}/3/0")),
        Err(ResolveError::Unknown { .. })
    ));
    // A fake of that node keeps the ids, so identification records them.
    let nvml = FakeNvml::from_topology(&t);
    let r = identify_with(Some(&nvml), &cvd(&legacy), DeviceKind::Cuda, Some(0));
    assert_eq!(r.info.mig_uuid.as_deref(), Some(legacy.as_str()));
    assert_eq!(r.info.mig_gpu_instance_id, Some(2));
    assert_eq!(r.info.mig_compute_instance_id, Some(0));
    assert_eq!(r.gpu_instance_id, Some(2));
}

#[test]
fn a_mig_gpu_without_instances_offers_nothing_once_the_csv_says_mig_is_on() {
    let listing =
        Topology::from_listing(&read("h100-mig-no-instances", "nvidia-smi-L.txt")).unwrap();
    // The listing alone cannot tell: both GPUs look whole.
    assert_eq!(listing.gpus[0].facts.mig_mode, None);
    assert_eq!(visible::all_devices(&listing).len(), 2);

    let t = node("h100-mig-no-instances");
    assert_eq!(t.gpus[0].facts.mig_mode, Some(true));
    assert_eq!(t.gpus[1].facts.mig_mode, Some(false));
    assert_eq!(visible::resolve(&t, "0").unwrap(), []);
    let all = visible::all_devices(&t);
    assert_eq!(uuids(&all), [t.gpus[1].facts.uuid.clone()]);

    let nvml = FakeNvml::from_topology(&t);
    let r = identify_with(Some(&nvml), &cvd("0"), DeviceKind::Cuda, Some(0));
    assert!(r.target.is_none());
    assert!(
        r.warnings[0].message.contains("among the 0 device(s)"),
        "{:?}",
        r.warnings
    );
    let r = identify_with(Some(&nvml), &cvd("0,1"), DeviceKind::Cuda, Some(0));
    assert_eq!(r.info.gpu_uuid.as_ref(), Some(&t.gpus[1].facts.uuid));
}

#[test]
fn an_eight_gpu_node_resolves_all_fifty_six_devices() {
    let t = node("h200-node-8x7x1g");
    assert_eq!(t.gpus.len(), 8);
    assert_eq!(visible::all_devices(&t).len(), 56);
    let third = visible::resolve(&t, "3").unwrap();
    assert_eq!(third.len(), 7);
    assert!(third.iter().all(|d| d.gpu.index == 3));
    // Every GPU UUID starts with `GPU-`: as a prefix it is ambiguous, naming all eight.
    match visible::resolve(&t, "GPU-") {
        Err(ResolveError::AmbiguousPrefix { matches, .. }) => assert_eq!(matches.len(), 8),
        other => panic!("{other:?}"),
    }
    // Round trip through a fake: the same topology comes back.
    let nvml = FakeNvml::from_topology(&t);
    let again = Topology::from_nvml(&nvml).unwrap();
    assert_eq!(visible::all_devices(&again).len(), 56);
    assert!(again.warnings.is_empty());
}

#[test]
fn one_refused_mig_index_or_one_broken_gpu_leaves_the_rest_of_the_node() {
    let t = node("h200-node-8x7x1g");
    let nvml = FakeNvml::from_topology(&t)
        .with_mig_index_error_at(2, 4, NvmlCode::NoPermission)
        .with_mig_index_error_at(5, 0, NvmlCode::InvalidArgument)
        .with_mig_enumeration_error_at(6, NvmlCode::Unknown);
    let again = Topology::from_nvml(&nvml).unwrap();
    let counts: Vec<usize> = again.gpus.iter().map(|g| g.migs.len()).collect();
    assert_eq!(counts, [7, 7, 6, 7, 7, 6, 0, 7]);
    assert!(matches!(
        again.warnings.as_slice(),
        [
            EnumerationWarning::MigIndexSkipped {
                gpu_index: 2,
                mig_index: 4,
                ..
            },
            EnumerationWarning::MigIndexSkipped {
                gpu_index: 5,
                mig_index: 0,
                ..
            },
            EnumerationWarning::MigUnreadable { gpu_index: 6, .. },
        ]
    ));
    // A worker on GPU 7 is still identified, with the node's troubles as warnings.
    let last = &t.gpus[7].migs[6].uuid;
    let r = identify_with(Some(&nvml), &cvd(last), DeviceKind::Cuda, Some(0));
    assert_eq!(r.info.mig_uuid.as_ref(), Some(last));
    let kinds: Vec<&str> = r.warnings.iter().map(|w| w.kind.as_str()).collect();
    assert_eq!(kinds, ["device_enumeration"; 3]);
    // The skipped device itself is unknown to this process.
    let skipped = &t.gpus[2].migs[4].uuid;
    let r = identify_with(Some(&nvml), &cvd(skipped), DeviceKind::Cuda, Some(0));
    assert!(r.target.is_none());
}

#[test]
fn every_fixture_has_both_files_and_they_agree() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/mig");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        // `k8s-nodes/` holds Kubernetes node objects for the cluster backend, not listings.
        if entry.file_type().unwrap().is_dir() && name != "k8s-nodes" {
            let t = node(&name);
            assert!(!t.gpus.is_empty(), "{name}");
            seen += 1;
        }
    }
    assert_eq!(seen, 7);
}
