//! DRA manifests against the Kubernetes API: every ResourceClaim, ResourceClaimTemplate and
//! Job that `render_cohort` writes passes `kubernetes-validate --strict` for Kubernetes 1.34
//! (DRA's `resource.k8s.io/v1` is on by default from there) and for the newest version the
//! validator knows; the validator is shown awake on broken copies. And the argument fidelity of
//! `fidelity.rs`, under DRA: each Pod's command parses back into the spec.
//!
//! Needs the deploy validators (`scripts/provision-tools.sh`, which CI runs); without them the
//! test fails, saying so.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use clap::Parser;
use coload_cluster::dra::{ClaimKind, DraSite, RenderedCohort, render_cohort};
use coload_cluster::{ResourceKey, Site, kubernetes};
use coload_cohort_schema::{ByteSize, DeviceChoice, Mode, TimesliceInterval};
use coload_spec::{CohortSpec, Mix, ServeFlags, WorkerFlags, WorkerPlace};

/// The Kubernetes versions the manifests must validate for: DRA's v1 API's first release, and
/// the newest the validator knows (its default).
const VERSIONS: [&str; 2] = ["1.34.0", "1.37.0"];

fn tools() -> PathBuf {
    let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv-tools/bin");
    assert!(
        bin.join("kubernetes-validate").exists(),
        "{} is missing: run scripts/provision-tools.sh (CI does) before this test",
        bin.join("kubernetes-validate").display()
    );
    bin
}

/// `kubernetes-validate --strict` of `files` for `version`: its success and what it said.
fn validate(version: &str, files: &[PathBuf]) -> (bool, String) {
    let out = Command::new(tools().join("kubernetes-validate"))
        .args(["--strict", "--quiet", "-k", version])
        .args(files)
        .output()
        .unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn site() -> Site {
    Site {
        node: "gpu-dra-1".into(),
        resource: ResourceKey::parse("nvidia.com/gpu").unwrap(),
        image: kubernetes::DEFAULT_IMAGE.into(),
        namespace: Some("bench".into()),
    }
}

/// One cohort per DRA form: exclusive (a template), time-slicing with and without an interval,
/// MPS with a share and unlimited, MIG on one parent, a time-sliced MIG device.
fn cohorts() -> Vec<(String, RenderedCohort)> {
    let mig = DraSite {
        mig_profile: Some("1g.18gb".into()),
    };
    let mut out = Vec::new();
    for (label, workers, mode, dra) in [
        ("exclusive", "train=2", Mode::Exclusive, DraSite::default()),
        (
            "timeslice",
            "infer=1,train=6",
            Mode::Timeslice,
            DraSite::default(),
        ),
        (
            "timeslice-long",
            "serve=1,train=2",
            Mode::Timeslice,
            DraSite::default(),
        ),
        ("mps", "train=4", Mode::Mps, DraSite::default()),
        (
            "mps-unlimited",
            "infer=1,train=2",
            Mode::Mps,
            DraSite::default(),
        ),
        ("mig", "infer=1,train=6", Mode::Mig, mig.clone()),
        ("mig-timeslice", "train=3", Mode::MigTimeslice, mig.clone()),
    ] {
        let mut spec = CohortSpec::new(&Mix::parse(workers).unwrap(), mode);
        match label {
            "timeslice-long" => {
                spec.flags.timeslice_interval = Some(TimesliceInterval::Long);
                spec.serve.rate = Some(100.0);
            }
            "mps" => {
                spec.flags.mps_threads = Some(25);
                spec.flags.mps_memory = Some(ByteSize(35 << 30));
            }
            "mps-unlimited" => spec.flags.mps_unlimited = true,
            _ => {}
        }
        let experiment = kubernetes::fresh_experiment(&spec, &spec.mix().unwrap());
        let c = render_cohort(&spec, &site(), &dra, &experiment).unwrap();
        out.push((label.to_owned(), c));
    }
    out
}

#[test]
fn every_claim_template_and_job_validates_strictly() {
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for (label, c) in cohorts() {
        for (what, text) in [("claim", &c.claim.yaml), ("job", &c.job.yaml)] {
            let path = dir.path().join(format!("{label}-{what}.yaml"));
            std::fs::write(&path, text).unwrap();
            files.push(path);
        }
        // The stream `render kubernetes --sharing dra` prints holds both.
        let path = dir.path().join(format!("{label}-stream.yaml"));
        std::fs::write(&path, &c.yaml).unwrap();
        files.push(path);
        // Pods of a sharing cohort name one claim; an exclusive cohort's Pods a template each.
        let pod = &c.job.manifest["spec"]["template"]["spec"];
        let entry = &pod["resourceClaims"][0];
        assert_eq!(
            pod["resourceClaims"].as_array().unwrap().len(),
            1,
            "{label}"
        );
        let key = match c.claim.kind {
            ClaimKind::Claim => "resourceClaimName",
            ClaimKind::Template => "resourceClaimTemplateName",
        };
        assert_eq!(entry[key], c.claim.name, "{label}");
        assert_eq!(
            c.claim.kind == ClaimKind::Template,
            label == "exclusive",
            "{label}"
        );
    }
    for version in VERSIONS {
        let (ok, said) = validate(version, &files);
        assert!(ok, "kubernetes {version}: {said}");
    }
    // The validator is awake: the v1beta1 form (the class on the request, not under
    // `exactly`) and an unknown field fail it.
    let (_, c) = &cohorts()[1];
    let mut v1beta1 = c.claim.manifest.clone();
    v1beta1["spec"]["devices"]["requests"][0] =
        serde_json::json!({ "name": "gpu", "deviceClassName": "gpu.nvidia.com" });
    let mut unknown = c.claim.manifest.clone();
    unknown["spec"]["devices"]["config"][0]["opaque"]["drivr"] = "gpu.nvidia.com".into();
    for (label, broken) in [("v1beta1 request", v1beta1), ("unknown field", unknown)] {
        // JSON is YAML: the validator reads it as it reads the rendered file.
        let path = dir.path().join("broken.yaml");
        std::fs::write(&path, broken.to_string()).unwrap();
        for version in VERSIONS {
            let (ok, said) = validate(version, std::slice::from_ref(&path));
            assert!(!ok, "{label} passed kubernetes {version}: {said}");
        }
    }
}

/// bench-worker's parser, as bins/bench-worker/src/cli.rs declares it.
#[derive(Debug, Parser)]
#[command(name = "bench-worker", args_override_self = true)]
struct WorkerArgs {
    #[command(flatten)]
    place: WorkerPlace,
    #[command(flatten)]
    flags: WorkerFlags,
    #[command(flatten)]
    serve: ServeFlags,
    #[arg(long, env = "NODE_NAME")]
    node_name: Option<String>,
    #[arg(long, default_value = "text")]
    log_format: String,
}

/// Each Pod's container command, run with its index and a `bench-worker` that prints its argv,
/// parses back into the spec: the same flags (a MIG replica i with `--device cuda:<i>`, the
/// i-th device of the claim), replica i of N, the workload, the declared share.
#[test]
fn every_dra_pod_parses_back_into_the_spec() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let fake = bin.join("bench-worker");
    std::fs::write(&fake, "#!/bin/sh\nprintf '%s\\0' \"$@\"\n").unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    for (label, c) in cohorts() {
        let container = &c.job.manifest["spec"]["template"]["spec"]["containers"][0];
        let mut argv: Vec<String> = container["command"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_owned())
            .collect();
        argv.extend(
            container["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap().to_owned()),
        );
        let count = c.job.count as usize;
        let experiment = &c.job.experiment;
        let spec_mode = match label.as_str() {
            "exclusive" => Mode::Exclusive,
            "mig" => Mode::Mig,
            "mig-timeslice" => Mode::MigTimeslice,
            l if l.starts_with("mps") => Mode::Mps,
            _ => Mode::Timeslice,
        };
        for i in 0..count {
            let out = Command::new(&argv[0])
                .args(&argv[1..])
                .env("JOB_COMPLETION_INDEX", i.to_string())
                .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
                .output()
                .unwrap();
            assert!(out.status.success(), "{label} pod {i}");
            let mut words: Vec<OsString> = vec!["bench-worker".into()];
            words.extend(
                out.stdout
                    .split(|b| *b == 0)
                    .filter(|w| !w.is_empty())
                    .map(|w| OsString::from(String::from_utf8(w.to_vec()).unwrap())),
            );
            let parsed = WorkerArgs::try_parse_from(&words).unwrap();
            assert_eq!(parsed.flags.mode, spec_mode, "{label}");
            assert_eq!(parsed.place.replica as usize, i, "{label}");
            assert_eq!(parsed.place.count as usize, count, "{label}");
            assert_eq!(&parsed.place.experiment, experiment, "{label}");
            let want_device = if spec_mode == Mode::Mig {
                DeviceChoice::Cuda(i)
            } else {
                DeviceChoice::Auto
            };
            assert_eq!(parsed.flags.device, want_device, "{label} pod {i}");
            match label.as_str() {
                "mps" => {
                    assert_eq!(parsed.flags.mps_threads, Some(25));
                    assert_eq!(parsed.flags.mps_memory, Some(ByteSize(35 << 30)));
                    // What the claim sets is what the worker declares and checks.
                    let share = parsed.flags.declared_share(None).unwrap();
                    let cfg = &c.claim.manifest["spec"]["devices"]["config"][0]["opaque"]["parameters"]
                        ["sharing"]["mpsConfig"];
                    assert_eq!(cfg["defaultActiveThreadPercentage"], 25);
                    assert_eq!(cfg["defaultPinnedDeviceMemoryLimit"], "35Gi");
                    assert_eq!(
                        serde_json::to_value(share).unwrap(),
                        serde_json::to_value(coload_cohort_schema::DeclaredShare::explicit(
                            25,
                            35 << 30
                        ))
                        .unwrap()
                    );
                }
                "mps-unlimited" => assert!(parsed.flags.mps_unlimited),
                "timeslice-long" => assert_eq!(
                    parsed.flags.timeslice_interval,
                    Some(TimesliceInterval::Long)
                ),
                _ => {}
            }
        }
    }
}
