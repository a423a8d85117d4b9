//! One cohort through Kubernetes Dynamic Resource Allocation: the claim that sets the cohort's
//! sharing, and the Indexed Job whose Pods name it.
//!
//! NVIDIA's DRA driver (`kubernetes-sigs/dra-driver-nvidia-gpu`) configures sharing per claim,
//! where the device plugin configures it per node. A cohort is exactly the unit DRA shares:
//!
//! - `timeslice`: one `ResourceClaim` for one GPU (`deviceClassName: gpu.nvidia.com`) with the
//!   driver's opaque `GpuConfig`, `sharing: {strategy: TimeSlicing, timeSlicingConfig:
//!   {interval}}` (the cohort's `--timeslice-interval`, `Default` when none is declared); every
//!   Pod names that claim, so every worker gets the same GPU.
//! - `mps`: the same with `strategy: MPS` and `mpsConfig` from the cohort's declared share:
//!   `defaultActiveThreadPercentage` = `--mps-threads`, `defaultPinnedDeviceMemoryLimit` =
//!   `--mps-memory` (the limits apply to every client of the claim, as the worker's share check
//!   expects of each worker); `--mps-unlimited` sets none. `--mps-replicas N` is the device
//!   plugin's share (a fraction of a memory size known only on the node) and is refused here.
//! - `exclusive`: a `ResourceClaimTemplate`, from which each Pod gets a claim, and so a GPU, of
//!   its own.
//! - `mig`: one `ResourceClaim` for N MIG devices (`deviceClassName: mig.nvidia.com`, a CEL
//!   selector on `device.attributes['gpu.nvidia.com'].profile`) constrained to one parent GPU
//!   (`matchAttribute: gpu.nvidia.com/parentUUID`). An Indexed Job has one Pod template, so
//!   every Pod names the whole claim and sees the N devices; replica i runs on the i-th
//!   (`--device cuda:<i>`), and the summarizer's co-location check shows whether they were
//!   distinct GPU instances of one parent.
//! - `mig-timeslice`: one `ResourceClaim` for one MIG device of the profile, shared by every
//!   Pod (the GPU's own time-slicing; `GpuConfig` applies to full GPUs, so no interval).
//!
//! `resource.k8s.io/v1` nests a request's class under `exactly` (v1beta1 put it on the
//! request). A claim has at most [`MAX_CLAIM_CONSUMERS`] consumers, so a sharing cohort of more
//! Pods is refused before anything is created. Nothing here has run on a real cluster: the
//! manifests are validated against the Kubernetes API schemas, and the study's seam test runs
//! them against a stand-in kubectl (docs/deploy.md).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use coload_cohort_schema::{ByteSize, Mode, TimesliceInterval};
use coload_device::MigProfile;
use coload_spec::{CohortSpec, Sharing};
use coload_study::Plan;
use serde_json::{Value, json};

use crate::error::ClusterError;
use crate::kubernetes::{PodClaim, RenderedJob, Site, job_name, render_job_with};
use crate::resource::ResourceKey;
use crate::yaml;

/// The DRA driver's name, which its opaque configuration is addressed to.
pub const DRIVER: &str = "gpu.nvidia.com";
/// The driver's DeviceClass of full GPUs.
pub const GPU_CLASS: &str = "gpu.nvidia.com";
/// The driver's DeviceClass of MIG devices.
pub const MIG_CLASS: &str = "mig.nvidia.com";
/// The API of the driver's opaque `GpuConfig`.
pub const CONFIG_API: &str = "resource.nvidia.com/v1beta1";
/// The device attribute naming a MIG device's parent GPU.
pub const PARENT_ATTRIBUTE: &str = "gpu.nvidia.com/parentUUID";
/// The most Pods that may name one claim (Kubernetes' limit on `status.reservedFor`).
pub const MAX_CLAIM_CONSUMERS: u32 = 256;
/// The API of claims and claim templates.
pub const RESOURCE_API: &str = "resource.k8s.io/v1";

/// The claim's name in the Pod (`spec.resourceClaims[].name`, `resources.claims[].name`).
const POD_CLAIM: &str = "gpu";

/// What a DRA cohort needs beyond its [`Site`]: the MIG profile of a `mig` or `mig-timeslice`
/// cohort.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DraSite {
    /// The MIG profile (`1g.18gb`) its devices are selected by.
    pub mig_profile: Option<String>,
}

/// A claim or a claim template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimKind {
    /// One `ResourceClaim` every Pod of the cohort names: they share its devices.
    Claim,
    /// One `ResourceClaimTemplate`: each Pod gets a claim, and a device, of its own.
    Template,
}

impl ClaimKind {
    /// The manifest's `kind`.
    #[must_use]
    pub fn kind(self) -> &'static str {
        match self {
            ClaimKind::Claim => "ResourceClaim",
            ClaimKind::Template => "ResourceClaimTemplate",
        }
    }

    /// The resource as kubectl names it (`kubectl delete resourceclaim NAME`).
    #[must_use]
    pub fn resource(self) -> &'static str {
        match self {
            ClaimKind::Claim => "resourceclaim",
            ClaimKind::Template => "resourceclaimtemplate",
        }
    }
}

/// A rendered claim (or template).
#[derive(Debug, Clone)]
pub struct RenderedClaim {
    /// A claim or a template.
    pub kind: ClaimKind,
    /// `metadata.name`.
    pub name: String,
    /// The manifest as data.
    pub manifest: Value,
    /// The manifest as YAML, with a header saying what it is.
    pub yaml: String,
}

/// A DRA cohort: its claim and its Job.
#[derive(Debug, Clone)]
pub struct RenderedCohort {
    /// Created first, deleted after the Job has ended.
    pub claim: RenderedClaim,
    /// The Indexed Job whose Pods name the claim.
    pub job: RenderedJob,
    /// Both, as one YAML stream (the claim first), for `kubectl create -f`.
    pub yaml: String,
}

/// The MIG profile of a DRA MIG cohort, or why it has none. A compute-instance profile whose
/// compute instance takes part of its GPU instance is refused, as under the device plugin: the
/// driver selects GPU instances.
fn mig_profile(mode: Mode, dra: &DraSite) -> Result<Option<MigProfile>, String> {
    if !matches!(mode, Mode::Mig | Mode::MigTimeslice) {
        return match &dra.mig_profile {
            Some(p) => Err(format!(
                "a MIG profile (`{p}`) selects MIG devices, but the mode is {mode}"
            )),
            None => Ok(None),
        };
    }
    let Some(text) = &dra.mig_profile else {
        return Err(format!(
            "mode {mode} under dra selects MIG devices by profile: name it (mig_profile = \
             \"1g.18gb\" on the plan's policy, or --mig-profile 1g.18gb)"
        ));
    };
    let profile = MigProfile::parse(text).ok_or_else(|| {
        format!(
            "`{}` is no MIG profile (e.g. 1g.18gb, 3g.40gb, 1g.10gb+me)",
            text.escape_debug()
        )
    })?;
    if profile.is_partial_compute_instance() {
        return Err(format!(
            "MIG profile `{text}` is a compute instance of a `{}` GPU instance; the driver \
             allocates GPU instances: name the GPU instance's profile",
            profile.gpu_instance_profile()
        ));
    }
    Ok(Some(profile))
}

/// Checks what a cohort of `count` Pods asks of a DRA claim, before anything is created: at
/// most [`MAX_CLAIM_CONSUMERS`] Pods on one claim, an MPS share the claim can set, a MIG
/// profile for a MIG mode, no interval for a time-sliced MIG device.
pub fn check_cohort(spec: &CohortSpec, count: u32, dra: &DraSite) -> Result<(), String> {
    let mode = spec.flags.mode;
    mig_profile(mode, dra)?;
    if mode != Mode::Exclusive && count > MAX_CLAIM_CONSUMERS {
        return Err(format!(
            "a {mode} cohort of {count} workers would put {count} Pods on one ResourceClaim; a \
             claim has at most {MAX_CLAIM_CONSUMERS} consumers: split the cohort"
        ));
    }
    if mode == Mode::Mps && spec.flags.mps_replicas.is_some() {
        return Err(
            "--mps-replicas N is the device plugin's MPS share (1/N of a memory size known only \
             on the node); a DRA claim sets each client's limits itself: give --mps-threads P \
             --mps-memory SIZE (its defaultActiveThreadPercentage and \
             defaultPinnedDeviceMemoryLimit) or --mps-unlimited"
                .into(),
        );
    }
    if mode == Mode::MigTimeslice
        && let Some(interval) = spec.flags.timeslice_interval
    {
        return Err(format!(
            "--timeslice-interval {interval}: the driver's GpuConfig sets an interval on full \
             GPUs (gpu.nvidia.com), not on a MIG device; leave it out for mig-timeslice"
        ));
    }
    Ok(())
}

/// The DRA site of each policy with `sharing = "dra"` (policy name -> its MIG profile).
#[must_use]
pub fn dra_sites(plan: &Plan) -> BTreeMap<String, DraSite> {
    plan.policies
        .iter()
        .filter(|p| p.sharing == Sharing::Dra)
        .map(|p| {
            (
                p.name.clone(),
                DraSite {
                    mig_profile: p.mig_profile.clone(),
                },
            )
        })
        .collect()
}

/// Checks a plan's DRA policies before anything is created, every problem one per line: each
/// cohort as [`check_cohort`] does, and each node's policies together. A node whose GPU
/// serves a DRA MIG policy and a DRA MPS policy in turn would need the driver's `DynamicMIG`
/// (to change MIG mode between claims) with `MPSSupport`, which the driver refuses; time-slicing
/// and MPS take turns on one GPU (never at once: a cohort of one mode per node at a time, and
/// `--timeslice-interval` is refused under mps). Polyaxon operations request resource keys only.
pub fn check_plan(
    plan: &Plan,
    sites: &BTreeMap<String, Site>,
    polyaxon: bool,
) -> Result<(), ClusterError> {
    let dra = dra_sites(plan);
    let mut problems = Vec::new();
    for p in plan.policies.iter().filter(|p| dra.contains_key(&p.name)) {
        if polyaxon {
            problems.push(format!(
                "line {}: policy `{}` has sharing = \"dra\", but Polyaxon operations request \
                 the device plugin's resource keys; run it with --backend kubernetes",
                p.line, p.name
            ));
        }
    }
    for job in plan.jobs(false) {
        if let Some(d) = dra.get(&job.policy)
            && let Err(why) = check_cohort(&job.spec, job.count, d)
        {
            problems.push(format!("line {}: cohort `{}`: {why}", job.line, job.name));
        }
    }
    let mut by_node: BTreeMap<&str, Vec<&coload_study::Policy>> = BTreeMap::new();
    for p in plan.policies.iter().filter(|p| dra.contains_key(&p.name)) {
        if let Some(site) = sites.get(&p.name) {
            by_node.entry(site.node.as_str()).or_default().push(p);
        }
    }
    for (node, policies) in by_node {
        let mig = policies
            .iter()
            .find(|p| matches!(p.mode, Mode::Mig | Mode::MigTimeslice));
        let mps = policies.iter().find(|p| p.mode == Mode::Mps);
        if let (Some(mig), Some(mps)) = (mig, mps) {
            problems.push(format!(
                "line {}: policies `{}` ({}) and `{}` (mps) share node `{node}` under dra: its \
                 GPU would switch MIG mode between claims only with the driver's DynamicMIG \
                 gate, which cannot be combined with MPSSupport (MPS under DynamicMIG); give the \
                 MIG policy a node of its own",
                mps.line, mig.name, mig.mode, mps.name
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ClusterError::Plan {
            plan: plan.source.clone(),
            message: format!(
                "the plan asks DRA for what it cannot give (nothing was created):\n  {}",
                problems.join("\n  ")
            ),
        })
    }
}

/// A memory limit as a Kubernetes quantity: `20Gi`, `512Mi`, or bytes.
fn quantity(size: ByteSize) -> String {
    let bytes = size.bytes();
    let mib = 1u64 << 20;
    let gib = 1u64 << 30;
    if bytes.is_multiple_of(gib) {
        format!("{}Gi", bytes / gib)
    } else if bytes.is_multiple_of(mib) {
        format!("{}Mi", bytes / mib)
    } else {
        bytes.to_string()
    }
}

/// The driver's opaque `GpuConfig` for a sharing mode, and a few words saying what it sets.
fn gpu_config(spec: &CohortSpec) -> Option<(Value, String)> {
    let sharing = match spec.flags.mode {
        Mode::Timeslice => {
            let interval = spec
                .flags
                .timeslice_interval
                .unwrap_or(TimesliceInterval::Default);
            json!({
                "strategy": "TimeSlicing",
                "timeSlicingConfig": { "interval": interval.driver_name() },
            })
        }
        Mode::Mps => match (spec.flags.mps_threads, spec.flags.mps_memory) {
            (Some(p), Some(m)) => json!({
                "strategy": "MPS",
                "mpsConfig": {
                    "defaultActiveThreadPercentage": p,
                    "defaultPinnedDeviceMemoryLimit": quantity(m),
                },
            }),
            _ => json!({ "strategy": "MPS" }),
        },
        Mode::Exclusive | Mode::Mig | Mode::MigTimeslice => return None,
    };
    let words = match spec.flags.mode {
        Mode::Timeslice => format!(
            "time-slicing, interval {}",
            sharing["timeSlicingConfig"]["interval"]
                .as_str()
                .unwrap_or_default()
        ),
        _ => match sharing.get("mpsConfig") {
            Some(c) => format!(
                "MPS, {}% of the threads and {} pinned memory per client",
                c["defaultActiveThreadPercentage"],
                c["defaultPinnedDeviceMemoryLimit"]
                    .as_str()
                    .unwrap_or_default()
            ),
            None => "MPS, no per-client limit".to_owned(),
        },
    };
    let config = json!({
        "requests": [POD_CLAIM],
        "opaque": {
            "driver": DRIVER,
            "parameters": { "apiVersion": CONFIG_API, "kind": "GpuConfig", "sharing": sharing },
        },
    });
    Some((config, words))
}

/// A MIG claim's `spec.devices` and what it asks for: N devices of the profile on one parent
/// GPU for `mig`, one device shared for `mig-timeslice`.
fn mig_devices(spec: &CohortSpec, count: u32, profile: &MigProfile) -> (Value, String) {
    let name = profile.gpu_instance_profile();
    let n = if spec.flags.mode == Mode::Mig {
        count
    } else {
        1
    };
    let expression = format!("device.attributes['{DRIVER}'].profile == '{name}'");
    let mut devices = json!({
        "requests": [{
            "name": POD_CLAIM,
            "exactly": {
                "deviceClassName": MIG_CLASS,
                "selectors": [{ "cel": { "expression": expression } }],
                "allocationMode": "ExactCount",
                "count": n,
            },
        }],
    });
    let words = if n > 1 {
        devices["constraints"] =
            json!([{ "requests": [POD_CLAIM], "matchAttribute": PARENT_ATTRIBUTE }]);
        format!("{n} MIG devices {name} of one parent GPU, replica i on the i-th")
    } else {
        format!("one MIG device {name}, shared")
    };
    (devices, words)
}

/// A full-GPU claim's `spec.devices` and what it asks for: one GPU, with the sharing
/// configuration of a sharing mode.
fn gpu_devices(spec: &CohortSpec) -> (Value, String) {
    let mut devices = json!({
        "requests": [{ "name": POD_CLAIM, "exactly": { "deviceClassName": GPU_CLASS } }],
    });
    let words = match gpu_config(spec) {
        Some((config, words)) => {
            devices["config"] = json!([config]);
            format!("one GPU, shared: {words}")
        }
        None => "one GPU per Pod".to_owned(),
    };
    (devices, words)
}

/// Renders `spec` as a DRA claim (or template) and the Indexed Job whose Pods name it, at
/// `site` (its node, image and namespace; its resource key is the device plugin's and is not
/// used) with `experiment`.
pub fn render_cohort(
    spec: &CohortSpec,
    site: &Site,
    dra: &DraSite,
    experiment: &str,
) -> Result<RenderedCohort, ClusterError> {
    let mix = spec.validate()?;
    let count = mix.len() as u32;
    check_cohort(spec, count, dra).map_err(ClusterError::Usage)?;
    let profile = mig_profile(spec.flags.mode, dra).map_err(ClusterError::Usage)?;
    let kind = if spec.flags.mode == Mode::Exclusive {
        ClaimKind::Template
    } else {
        ClaimKind::Claim
    };
    let job = job_name(experiment);
    let name = format!("{job}-{POD_CLAIM}");
    // A profile is there for the MIG modes only.
    let (devices, words) = profile
        .as_ref()
        .map_or_else(|| gpu_devices(spec), |p| mig_devices(spec, count, p));
    let labels = json!({
        "app.kubernetes.io/name": "coload",
        "coload/experiment": experiment,
    });
    let mut metadata = json!({ "name": name, "labels": labels });
    if let Some(ns) = &site.namespace {
        metadata["namespace"] = json!(ns);
    }
    let manifest = match kind {
        ClaimKind::Claim => json!({
            "apiVersion": RESOURCE_API,
            "kind": kind.kind(),
            "metadata": metadata,
            "spec": { "devices": devices },
        }),
        ClaimKind::Template => json!({
            "apiVersion": RESOURCE_API,
            "kind": kind.kind(),
            "metadata": metadata,
            "spec": {
                "metadata": { "labels": labels },
                "spec": { "devices": devices },
            },
        }),
    };
    let (pod_entry, describe) = match kind {
        ClaimKind::Claim => (
            json!({ "name": POD_CLAIM, "resourceClaimName": name }),
            format!("the ResourceClaim {name} ({words})"),
        ),
        ClaimKind::Template => (
            json!({ "name": POD_CLAIM, "resourceClaimTemplateName": name }),
            format!("a claim each from the ResourceClaimTemplate {name} ({words})"),
        ),
    };
    let pod_claim = PodClaim {
        name: POD_CLAIM,
        pod_entry,
        describe,
        device_per_index: spec.flags.mode == Mode::Mig,
    };
    // The resource key of the site is the device plugin's; under DRA the Pods request none, and
    // `nvidia.com/gpu` fits every mode's check.
    let site = Site {
        resource: ResourceKey::parse("nvidia.com/gpu")?,
        ..site.clone()
    };
    let job = render_job_with(spec, &site, experiment, Some(&pod_claim))?;
    let mut header = format!(
        "coload cohort {experiment}: the {} its {count} Pod(s) name ({words}).\n\
         Rendered by `bench-cohort render kubernetes --sharing dra` from the cohort spec; \
         create it\nbefore the Job {}, delete it after the Job has ended. NVIDIA's DRA driver \
         (driver {DRIVER})\nconfigures the sharing.",
        kind.kind(),
        job.name
    );
    if kind == ClaimKind::Claim {
        let _ = write!(
            header,
            " At most {MAX_CLAIM_CONSUMERS} Pods may name one claim."
        );
    }
    let claim_yaml = yaml::document(&header, &manifest);
    let yaml = format!("{claim_yaml}---\n{}", job.yaml);
    Ok(RenderedCohort {
        claim: RenderedClaim {
            kind,
            name,
            manifest,
            yaml: claim_yaml,
        },
        job,
        yaml,
    })
}

#[cfg(test)]
mod tests {
    use coload_cohort_schema::Workload;
    use coload_spec::Mix;

    use super::*;
    use crate::kubernetes::DEFAULT_IMAGE;

    fn site() -> Site {
        Site {
            node: "gpu-dra-1".into(),
            resource: ResourceKey::parse("nvidia.com/gpu").unwrap(),
            image: DEFAULT_IMAGE.into(),
            namespace: Some("bench".into()),
        }
    }

    fn spec(workers: &str, mode: Mode) -> CohortSpec {
        CohortSpec::new(&Mix::parse(workers).unwrap(), mode)
    }

    fn pod(c: &RenderedCohort) -> &Value {
        &c.job.manifest["spec"]["template"]["spec"]
    }

    #[test]
    fn a_time_sliced_cohort_names_one_claim_with_its_interval() {
        let mut s = spec("infer=1,train=6", Mode::Timeslice);
        s.flags.timeslice_interval = Some(TimesliceInterval::Long);
        let c = render_cohort(&s, &site(), &DraSite::default(), "e-1").unwrap();
        assert_eq!(c.claim.kind, ClaimKind::Claim);
        let m = &c.claim.manifest;
        assert_eq!(m["apiVersion"], "resource.k8s.io/v1");
        assert_eq!(m["metadata"]["namespace"], "bench");
        let request = &m["spec"]["devices"]["requests"][0];
        assert_eq!(request["exactly"]["deviceClassName"], "gpu.nvidia.com");
        let config = &m["spec"]["devices"]["config"][0];
        assert_eq!(config["requests"], json!(["gpu"]));
        assert_eq!(config["opaque"]["driver"], "gpu.nvidia.com");
        let p = &config["opaque"]["parameters"];
        assert_eq!(p["kind"], "GpuConfig");
        assert_eq!(p["sharing"]["strategy"], "TimeSlicing");
        assert_eq!(p["sharing"]["timeSlicingConfig"]["interval"], "Long");
        let pod = pod(&c);
        assert_eq!(
            pod["resourceClaims"],
            json!([{ "name": "gpu", "resourceClaimName": c.claim.name }])
        );
        let container = &pod["containers"][0];
        assert_eq!(container["resources"]["claims"], json!([{ "name": "gpu" }]));
        // No device-plugin key is requested.
        let requests = container["resources"]["requests"].as_object().unwrap();
        assert!(
            requests.keys().all(|k| !k.starts_with("nvidia.com/")),
            "{requests:?}"
        );
        assert!(c.yaml.starts_with("# coload cohort e-1: the ResourceClaim"));
        assert!(c.yaml.contains("\n---\n"));
        // Without an interval the claim says Default.
        let s = spec("train=2", Mode::Timeslice);
        let c = render_cohort(&s, &site(), &DraSite::default(), "e-1").unwrap();
        let p = &c.claim.manifest["spec"]["devices"]["config"][0]["opaque"]["parameters"];
        assert_eq!(p["sharing"]["timeSlicingConfig"]["interval"], "Default");
    }

    #[test]
    fn an_mps_claim_carries_the_declared_share() {
        let mut s = spec("train=4", Mode::Mps);
        s.flags.mps_threads = Some(25);
        s.flags.mps_memory = Some(ByteSize(20 << 30));
        let c = render_cohort(&s, &site(), &DraSite::default(), "e-1").unwrap();
        let p = &c.claim.manifest["spec"]["devices"]["config"][0]["opaque"]["parameters"];
        assert_eq!(p["sharing"]["strategy"], "MPS");
        assert_eq!(
            p["sharing"]["mpsConfig"]["defaultActiveThreadPercentage"],
            25
        );
        assert_eq!(
            p["sharing"]["mpsConfig"]["defaultPinnedDeviceMemoryLimit"],
            "20Gi"
        );
        // The workers declare the same share, so their share check compares CUDA's view with
        // what the claim set.
        let args = c.job.manifest["spec"]["template"]["spec"]["containers"][0]["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
            .join(" ");
        assert!(
            args.contains("--mps-memory 20GiB --mps-threads 25"),
            "{args}"
        );
        let mut s = spec("train=4", Mode::Mps);
        s.flags.mps_unlimited = true;
        let c = render_cohort(&s, &site(), &DraSite::default(), "e-1").unwrap();
        let p = &c.claim.manifest["spec"]["devices"]["config"][0]["opaque"]["parameters"];
        assert_eq!(p["sharing"], json!({ "strategy": "MPS" }));
        let mut s = spec("train=4", Mode::Mps);
        s.flags.mps_replicas = Some(4);
        let e = render_cohort(&s, &site(), &DraSite::default(), "e-1")
            .unwrap_err()
            .to_string();
        assert!(e.contains("--mps-replicas N is the device plugin's"), "{e}");
        assert_eq!(quantity(ByteSize(1536 << 20)), "1536Mi");
        assert_eq!(quantity(ByteSize(1_000_000_123)), "1000000123");
    }

    #[test]
    fn an_exclusive_cohort_gets_one_device_per_pod() {
        let s = spec("train=3", Mode::Exclusive);
        let c = render_cohort(&s, &site(), &DraSite::default(), "e-1").unwrap();
        assert_eq!(c.claim.kind, ClaimKind::Template);
        let m = &c.claim.manifest;
        assert_eq!(m["kind"], "ResourceClaimTemplate");
        let request = &m["spec"]["spec"]["devices"]["requests"][0];
        assert_eq!(
            request["exactly"],
            json!({ "deviceClassName": "gpu.nvidia.com" })
        );
        assert!(m["spec"]["spec"]["devices"].get("config").is_none());
        assert_eq!(
            pod(&c)["resourceClaims"],
            json!([{ "name": "gpu", "resourceClaimTemplateName": c.claim.name }])
        );
    }

    #[test]
    fn a_mig_cohort_selects_its_profile_on_one_parent() {
        let s = spec("infer=1,train=2", Mode::Mig);
        let dra = DraSite {
            mig_profile: Some("1g.10gb+me".into()),
        };
        let c = render_cohort(&s, &site(), &dra, "e-1").unwrap();
        let d = &c.claim.manifest["spec"]["devices"];
        let exactly = &d["requests"][0]["exactly"];
        assert_eq!(exactly["deviceClassName"], "mig.nvidia.com");
        assert_eq!(exactly["count"], 3);
        assert_eq!(
            exactly["selectors"][0]["cel"]["expression"],
            "device.attributes['gpu.nvidia.com'].profile == '1g.10gb+me'"
        );
        assert_eq!(
            d["constraints"],
            json!([{ "requests": ["gpu"], "matchAttribute": "gpu.nvidia.com/parentUUID" }])
        );
        let script = pod(&c)["containers"][0]["command"][2].as_str().unwrap();
        assert!(script.contains("'--device' 'cuda:2'"), "{script}");
        // mig-timeslice: one MIG device, shared, no interval.
        let s = spec("train=3", Mode::MigTimeslice);
        let c = render_cohort(&s, &site(), &dra, "e-1").unwrap();
        let d = &c.claim.manifest["spec"]["devices"];
        assert_eq!(d["requests"][0]["exactly"]["count"], 1);
        assert!(d.get("constraints").is_none());
        let mut s = spec("train=3", Mode::MigTimeslice);
        s.flags.timeslice_interval = Some(TimesliceInterval::Short);
        let e = render_cohort(&s, &site(), &dra, "e-1")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not on a MIG device"), "{e}");
        let e = render_cohort(
            &spec("train=2", Mode::Mig),
            &site(),
            &DraSite::default(),
            "e-1",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("selects MIG devices by profile"), "{e}");
        let e = render_cohort(&spec("train=2", Mode::Timeslice), &site(), &dra, "e-1")
            .unwrap_err()
            .to_string();
        assert!(e.contains("but the mode is timeslice"), "{e}");
    }

    #[test]
    fn mps_beside_a_mig_policy_on_one_dra_node_is_refused() {
        let text = |mig_node: &str| {
            format!(
                "[[policy]]\nname = \"mig\"\nmode = \"mig\"\nsharing = \"dra\"\n\
                 mig_profile = \"1g.18gb\"\nnode = \"{mig_node}\"\n\
                 [[policy]]\nname = \"mps\"\nmode = \"mps\"\nsharing = \"dra\"\nnode = \"n1\"\n\
                 flags = {{ mps_unlimited = true }}\n\
                 [[policy]]\nname = \"ts\"\nmode = \"timeslice\"\nsharing = \"dra\"\n\
                 node = \"n1\"\n[[cohort]]\nworkers = \"train=2\"\n"
            )
        };
        let sites_of = |plan: &Plan| -> BTreeMap<String, Site> {
            plan.policies
                .iter()
                .map(|p| {
                    let mut s = site();
                    s.node.clone_from(p.node.as_ref().unwrap());
                    (p.name.clone(), s)
                })
                .collect()
        };
        let plan = Plan::parse("t", &text("n1")).unwrap();
        let e = check_plan(&plan, &sites_of(&plan), false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("nothing was created"), "{e}");
        assert!(
            e.contains("policies `mig` (mig) and `mps` (mps) share node `n1`"),
            "{e}"
        );
        assert!(e.contains("MPS under DynamicMIG"), "{e}");
        // MIG on a node of its own; MPS and time-slicing take turns on the other.
        let plan = Plan::parse("t", &text("n2")).unwrap();
        assert!(check_plan(&plan, &sites_of(&plan), false).is_ok());
        let e = check_plan(&plan, &sites_of(&plan), true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("Polyaxon operations request"), "{e}");
        // A cohort the claim cannot take is named with its line.
        let plan = Plan::parse(
            "t",
            &text("n2").replace("mps_unlimited = true", "mps_replicas = 4"),
        )
        .unwrap();
        let e = check_plan(&plan, &sites_of(&plan), false)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cohort `mps-train2-r1`: --mps-replicas N"),
            "{e}"
        );
    }

    /// `--workers` stops at 256 workers today; the claim's limit is checked on the count all
    /// the same, so a larger mix would still be refused here.
    #[test]
    fn more_pods_than_a_claim_takes_are_refused() {
        let s = spec("train=256", Mode::Timeslice);
        assert_eq!(s.mix().unwrap().workloads()[255], Workload::Train);
        assert!(check_cohort(&s, 256, &DraSite::default()).is_ok());
        let e = check_cohort(&s, 257, &DraSite::default()).unwrap_err();
        assert!(e.contains("at most 256 consumers"), "{e}");
        // Each exclusive Pod has its own claim.
        let s = spec("train=2", Mode::Exclusive);
        assert!(check_cohort(&s, 257, &DraSite::default()).is_ok());
    }
}
