//! The Kubernetes backend end to end, without a cluster: `bench-cohort study --backend
//! kubernetes` against a stand-in for kubectl (deploy/tests/stubs/kubectl-standin) that runs
//! each rendered Pod's real container command as a local process, with JOB_COMPLETION_INDEX set
//! and the claim's mount path mapped to a temporary folder.
//!
//! This is the seam test: it shows that the manifests the backend renders run the real workers,
//! that the backend waits, collects, summarizes, resumes and reports failures as the study on
//! one node does. It cannot show scheduling, image pulls, admission or the device plugin's
//! allocation (docs/deploy.md).
//!
//! Needs: bench-worker built in the same target folder (`cargo build -p bench-worker`), and
//! the deploy validators' Python (`scripts/provision-tools.sh`, which CI runs) for PyYAML.
//! Without them the tests fail, saying so: they are never skipped.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use clap::Parser;
use coload_cluster::{ClusterArgs, ClusterError, run_study};
use coload_cohort_schema::study::{Index, Outcome};
use coload_launch::QuietConsole;
use coload_study::StudyArgs;

#[derive(Debug, Parser)]
struct Cli {
    #[command(flatten)]
    study: StudyArgs,
    #[command(flatten)]
    cluster: ClusterArgs,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The Python with PyYAML that CI installs with the validators.
fn python() -> PathBuf {
    let p = root().join(".venv-tools/bin/python");
    assert!(
        p.exists(),
        "{} is missing: run scripts/provision-tools.sh (CI does) before this test",
        p.display()
    );
    p
}

/// The folder holding bench-worker (built in this target folder).
fn worker_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap().to_owned();
    assert!(
        dir.join("bench-worker").exists(),
        "bench-worker is not built in {}: run `cargo build -p bench-worker` with the same \
         CARGO_TARGET_DIR first",
        dir.display()
    );
    dir
}

/// A temporary cluster: the stand-in's state, the claim's folder, and a `kubectl` that runs
/// the stand-in with them (and with `fail_index`'s Pod failing).
struct Cluster {
    tmp: tempfile::TempDir,
}

impl Cluster {
    fn new(fail_index: Option<u32>) -> Cluster {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join("state");
        std::fs::create_dir_all(state.join("nodes")).unwrap();
        std::fs::create_dir_all(tmp.path().join("volume")).unwrap();
        let fail =
            fail_index.map_or_else(String::new, |i| format!("export STANDIN_FAIL_INDEX={i}\n"));
        let script = format!(
            "#!/bin/sh\nexport STANDIN_STATE='{}' STANDIN_VOLUME='{}' STANDIN_PATH='{}'\n{fail}exec '{}' '{}' \"$@\"\n",
            state.display(),
            tmp.path().join("volume").display(),
            worker_dir().display(),
            python().display(),
            root().join("deploy/tests/stubs/kubectl-standin").display(),
        );
        let kubectl = tmp.path().join("kubectl");
        std::fs::write(&kubectl, script).unwrap();
        std::fs::set_permissions(&kubectl, std::fs::Permissions::from_mode(0o755)).unwrap();
        Cluster { tmp }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.tmp.path().join(p)
    }

    /// A node as `kubectl get node -o json` shows it.
    fn node(&self, name: &str, allocatable: &[(&str, &str)], labels: &[(&str, &str)]) {
        let alloc: serde_json::Map<String, serde_json::Value> = allocatable
            .iter()
            .map(|(k, v)| ((*k).to_owned(), serde_json::Value::from(*v)))
            .collect();
        let labels: serde_json::Map<String, serde_json::Value> = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), serde_json::Value::from(*v)))
            .collect();
        let v = serde_json::json!({
            "kind": "Node",
            "metadata": { "name": name, "labels": labels },
            "status": { "allocatable": alloc },
        });
        std::fs::write(
            self.path(&format!("state/nodes/{name}.json")),
            v.to_string(),
        )
        .unwrap();
    }

    fn plan(&self, text: &str) -> PathBuf {
        let p = self.path("plan.toml");
        std::fs::write(&p, text).unwrap();
        p
    }

    fn study(&self, plan: &Path) -> Result<u8, ClusterError> {
        let cli = Cli::parse_from([
            "bench-cohort".as_ref(),
            plan.as_os_str(),
            "--out".as_ref(),
            self.path("out").as_os_str(),
            "--backend".as_ref(),
            "kubernetes".as_ref(),
            "--kubectl".as_ref(),
            self.path("kubectl").as_os_str(),
            "--volume-dir".as_ref(),
            self.path("volume").as_os_str(),
            "--job-timeout-s".as_ref(),
            "240".as_ref(),
            "--no-progress-bar".as_ref(),
        ]);
        run_study(
            &cli.study,
            &cli.cluster,
            &QuietConsole,
            &AtomicBool::new(false),
        )
    }

    /// Pods started so far, one line `JOB INDEX` each.
    fn pods_started(&self) -> Vec<String> {
        std::fs::read_to_string(self.path("state/runs.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn jobs_created(&self) -> usize {
        std::fs::read_dir(self.path("state/jobs")).map_or(0, Iterator::count)
    }

    fn index(&self) -> Index {
        coload_cohort_schema::read_document(&self.path("out/index.json")).unwrap()
    }
}

/// Tiny CPU cohorts: a solo baseline on one node, and a serve+train and a two-trainer cohort
/// time-sliced on another.
const PLAN: &str = r#"
name = "standin"
[flags]
window_s = 2
warmup_batches = 1
start_lead_s = 1
batch_size = 2
image_size = 32
join_timeout_s = 60
telemetry_hz = 0
gpm_interval_s = 0

[[policy]]
name = "exclusive"
mode = "exclusive"
node = "cpu-node-1"
resource = "nvidia.com/gpu"

[[policy]]
name = "timeslice"
mode = "timeslice"
node = "cpu-node-2"
resource = "nvidia.com/gpu.shared"

[[cohort]]
workers = "train=1"
policies = ["exclusive"]
baseline = true

[[cohort]]
workers = "serve=1,train=1"
policies = ["timeslice"]
flags = { rate = 20 }

[[cohort]]
workers = "train=2"
policies = ["timeslice"]
"#;

fn two_nodes(c: &Cluster) {
    c.node("cpu-node-1", &[("cpu", "16"), ("nvidia.com/gpu", "1")], &[]);
    c.node(
        "cpu-node-2",
        &[("cpu", "16"), ("nvidia.com/gpu.shared", "7")],
        &[("nvidia.com/device-plugin.config", "timeslice-7-renamed")],
    );
}

#[test]
fn a_study_runs_collects_summarizes_reports_and_resumes() {
    let c = Cluster::new(None);
    two_nodes(&c);
    let plan = c.plan(PLAN);
    let code = c.study(&plan).unwrap();
    let index = c.index();
    assert_eq!(code, 0, "{index:#?}");
    assert_eq!(index.cohorts.len(), 3);
    for e in &index.cohorts {
        assert_eq!(e.outcome, Outcome::Complete, "{e:#?}");
        let dir = c.path(&format!("out/cohorts/{}", e.name));
        assert!(dir.join("summary.json").is_file(), "{}", e.name);
        assert!(dir.join("job.yaml").is_file(), "{}", e.name);
        assert!(dir.join("worker-0/worker.json").is_file(), "{}", e.name);
    }
    assert!(c.path("out/report/report.html").is_file());
    assert!(c.path("out/report/comparison.json").is_file());
    // One Pod per worker: 1 + 2 + 2.
    let started = c.pods_started();
    assert_eq!(started.len(), 5, "{started:?}");

    // Run again: every cohort is complete, nothing is created or started.
    let code = c.study(&plan).unwrap();
    assert_eq!(code, 0);
    assert!(
        c.index()
            .cohorts
            .iter()
            .all(|e| e.outcome == Outcome::AlreadyComplete)
    );
    assert_eq!(c.pods_started(), started);
    assert_eq!(c.jobs_created(), 3);

    // A Job that completed but was never summarized (the study was stopped after it ended) is
    // collected, not created and run again.
    let name = "timeslice-train2-r1";
    std::fs::remove_file(c.path(&format!("out/cohorts/{name}/summary.json"))).unwrap();
    let code = c.study(&plan).unwrap();
    assert_eq!(code, 0);
    let e = c
        .index()
        .cohorts
        .into_iter()
        .find(|e| e.name == name)
        .unwrap();
    assert_eq!(e.outcome, Outcome::Complete, "{e:#?}");
    assert!(
        c.path(&format!("out/cohorts/{name}/summary.json"))
            .is_file()
    );
    assert_eq!(c.pods_started(), started, "the completed Job was run again");
    assert_eq!(c.jobs_created(), 3);
}

#[test]
fn a_failed_pod_fails_the_cohort_naming_the_replica() {
    let c = Cluster::new(Some(1));
    two_nodes(&c);
    let plan = c.plan(&PLAN.replace(
        "[[cohort]]\nworkers = \"train=1\"\npolicies = [\"exclusive\"]\nbaseline = true\n\n\
         [[cohort]]\nworkers = \"serve=1,train=1\"\npolicies = [\"timeslice\"]\nflags = { rate = 20 }\n",
        "",
    ));
    let code = c.study(&plan).unwrap();
    assert_eq!(code, coload_cohort_schema::exit::INCOMPLETE_COHORT);
    let index = c.index();
    assert_eq!(index.cohorts.len(), 1, "{index:#?}");
    let e = &index.cohorts[0];
    assert_eq!(e.outcome, Outcome::Failed);
    let reason = e.reason.as_deref().unwrap_or_default();
    assert!(reason.starts_with("replica 1: worker_exited"), "{reason}");
    assert!(reason.contains("exited with 11"), "{reason}");
    assert_eq!(e.failed_dirs, ["cohorts/timeslice-train2-r1.failed-1"]);
    let failure: coload_cohort_schema::CohortFailure = coload_cohort_schema::read_document(
        &c.path("out/cohorts/timeslice-train2-r1.failed-1/failure.json"),
    )
    .unwrap();
    assert_eq!(failure.replica, Some(1));
}

#[test]
fn bad_plans_are_refused_before_anything_is_created() {
    let c = Cluster::new(None);
    two_nodes(&c);
    c.node("cpu-node-3", &[("nvidia.com/gpu", "1")], &[]);
    // Issue 25: 8 GPUs partitioned alike; the plugin may give a cohort slices of 8 GPUs.
    c.node(
        "mig-node-8",
        &[("nvidia.com/mig-1g.18gb", "56")],
        &[
            ("nvidia.com/mig.strategy", "mixed"),
            ("nvidia.com/gpu.count", "8"),
            ("nvidia.com/mig-1g.18gb.count", "56"),
            ("nvidia.com/mig.config", "h200-141gb-all-1g.18gb"),
            ("nvidia.com/mig.config.state", "success"),
        ],
    );
    let mig8 = "\n[[policy]]\nname = \"mig\"\nmode = \"mig\"\nnode = \"mig-node-8\"\n\
                resource = \"nvidia.com/mig-1g.18gb\"\n";
    let mig = "\n[[policy]]\nname = \"mig\"\nmode = \"mig\"\nnode = \"cpu-node-3\"\n\
               resource = \"nvidia.com/gpu\"\n";
    for (plan, want) in [
        (
            PLAN.replace("node = \"cpu-node-2\"\n", ""),
            "policy `timeslice` has no `node`",
        ),
        (
            PLAN.replace("nvidia.com/gpu.shared", "nvidia.com/tpu"),
            "resource key `nvidia.com/tpu` is not one the NVIDIA device plugin advertises",
        ),
        (
            PLAN.replace("[[cohort]]\nworkers = \"train=2\"", &format!("{mig}\n[[cohort]]\nworkers = \"train=2\"\npolicies = [\"timeslice\", \"mig\"]\n[[cohort]]\nworkers = \"train=3\"")),
            "policy `mig` is mig, but node `cpu-node-3` advertises no MIG resource",
        ),
        (
            PLAN.replace("[[cohort]]\nworkers = \"train=2\"", &format!("{mig8}\n[[cohort]]\nworkers = \"train=2\"\npolicies = [\"timeslice\", \"mig\"]\n[[cohort]]\nworkers = \"train=3\"")),
            "node `mig-node-8` holds 56 1g.18gb devices, more than one GPU can hold (7)",
        ),
        (
            PLAN.replace(
                "[[cohort]]\nworkers = \"train=2\"",
                "[[cohort]]\nworkers = \"train=9\"",
            ),
            "has a cohort of 9 workers, but node `cpu-node-2` allocates 7",
        ),
    ] {
        let path = c.plan(&plan);
        let err = c.study(&path).unwrap_err().to_string();
        assert!(err.contains(want), "want `{want}` in: {err}");
        assert_eq!(c.jobs_created(), 0, "{want}");
        assert!(c.pods_started().is_empty());
        assert!(!c.path("out").exists(), "the study folder was created: {want}");
    }
}

/// Every non-MIG policy on one node through DRA claims: an exclusive solo (a claim template), a
/// time-sliced pair with its interval and an MPS pair with its share (one claim each).
const DRA_PLAN: &str = r#"
name = "standin-dra"
[flags]
window_s = 2
warmup_batches = 1
start_lead_s = 1
batch_size = 2
image_size = 32
join_timeout_s = 60
telemetry_hz = 0
gpm_interval_s = 0

[[policy]]
name = "exclusive"
mode = "exclusive"
sharing = "dra"
node = "dra-node-1"

[[policy]]
name = "timeslice"
mode = "timeslice"
sharing = "dra"
node = "dra-node-1"
flags = { timeslice_interval = "short" }

[[policy]]
name = "mps"
mode = "mps"
sharing = "dra"
node = "dra-node-1"
flags = { mps_threads = 50, mps_memory = "1GiB" }

[[cohort]]
workers = "train=1"
policies = ["exclusive"]
baseline = true

[[cohort]]
workers = "train=2"
policies = ["timeslice", "mps"]
"#;

impl Cluster {
    /// The stand-in's events, one `create|end|delete KIND NAME` each, in order.
    fn events(&self) -> Vec<String> {
        std::fs::read_to_string(self.path("state/events.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn manifest(&self, cohort: &str, file: &str) -> serde_json::Value {
        let text = std::fs::read_to_string(self.path(&format!("out/cohorts/{cohort}/{file}")))
            .unwrap_or_else(|e| panic!("{cohort}/{file}: {e}"));
        // The first document of the file, through PyYAML (the manifests are YAML).
        let out = std::process::Command::new(python())
            .args([
                "-c",
                "import json, sys, yaml; print(json.dumps(yaml.safe_load(sys.stdin)))",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                use std::io::Write as _;
                child.stdin.take().unwrap().write_all(text.as_bytes())?;
                child.wait_with_output()
            })
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

/// The events of one cohort after another: its claim created, its Job created, the Job ended,
/// the claim deleted; never two cohorts' claims at once on the node.
fn assert_claim_per_cohort(events: &[String], cohorts: usize) {
    assert_eq!(events.len(), 4 * cohorts, "{events:#?}");
    for group in events.chunks(4) {
        let words: Vec<Vec<&str>> = group.iter().map(|e| e.split(' ').collect()).collect();
        let claim = words[0][2];
        let job = words[1][2];
        assert!(
            words[0][0] == "create" && words[0][1].starts_with("ResourceClaim"),
            "{group:?}"
        );
        assert_eq!(words[1][..2], ["create", "Job"], "{group:?}");
        assert_eq!(words[2], ["end", "Job", job], "{group:?}");
        assert_eq!(words[3], ["delete", words[0][1], claim], "{group:?}");
    }
}

#[test]
fn a_dra_study_runs_every_policy_on_one_node_claim_by_claim() {
    let c = Cluster::new(None);
    // A DRA node advertises its GPUs in ResourceSlices, not in its allocatable.
    c.node("dra-node-1", &[("cpu", "16")], &[]);
    let plan = c.plan(DRA_PLAN);
    let code = c.study(&plan).unwrap();
    let index = c.index();
    assert_eq!(code, 0, "{index:#?}");
    assert_eq!(index.cohorts.len(), 3);
    assert!(index.cohorts.iter().all(|e| e.outcome == Outcome::Complete));
    let events = c.events();
    assert_claim_per_cohort(&events, 3);

    // A sharing cohort's Pods name its one claim; an exclusive cohort's a template, from which
    // each Pod gets a device of its own.
    for (cohort, kind, key) in [
        ("timeslice-train2-r1", "ResourceClaim", "resourceClaimName"),
        ("mps-train2-r1", "ResourceClaim", "resourceClaimName"),
        (
            "exclusive-train1-r1",
            "ResourceClaimTemplate",
            "resourceClaimTemplateName",
        ),
    ] {
        let claim = c.manifest(cohort, "claim.yaml");
        let job = c.manifest(cohort, "job.yaml");
        assert_eq!(claim["kind"], kind, "{cohort}");
        let pod = &job["spec"]["template"]["spec"];
        let claims = pod["resourceClaims"].as_array().unwrap();
        assert_eq!(claims.len(), 1, "{cohort}");
        assert_eq!(claims[0][key], claim["metadata"]["name"], "{cohort}");
        assert_eq!(
            pod["containers"][0]["resources"]["claims"],
            serde_json::json!([{ "name": claims[0]["name"] }]),
            "{cohort}"
        );
    }
    let ts = c.manifest("timeslice-train2-r1", "claim.yaml");
    let sharing = &ts["spec"]["devices"]["config"][0]["opaque"]["parameters"]["sharing"];
    assert_eq!(sharing["timeSlicingConfig"]["interval"], "Short");
    let mps = c.manifest("mps-train2-r1", "claim.yaml");
    let sharing = &mps["spec"]["devices"]["config"][0]["opaque"]["parameters"]["sharing"];
    assert_eq!(sharing["mpsConfig"]["defaultActiveThreadPercentage"], 50);
    assert_eq!(
        sharing["mpsConfig"]["defaultPinnedDeviceMemoryLimit"],
        "1Gi"
    );

    // The interval is recorded by every worker and shown in the cohort's report.
    for i in 0..2 {
        let w = coload_cohort_schema::read_worker_report(&c.path(&format!(
            "out/cohorts/timeslice-train2-r1/worker-{i}/worker.json"
        )))
        .unwrap();
        assert_eq!(
            w.config.timeslice_interval,
            Some(coload_cohort_schema::TimesliceInterval::Short)
        );
    }
    let log =
        std::fs::read_to_string(c.path("out/cohorts/timeslice-train2-r1/cohort.log")).unwrap();
    assert!(log.contains("mode timeslice, time slice short"), "{log}");

    // Resume: the complete cohorts are neither created nor claimed again.
    assert_eq!(c.study(&plan).unwrap(), 0);
    assert_eq!(c.events(), events);
    // A Job that ended but was never summarized is collected; its claim is not created again.
    std::fs::remove_file(c.path("out/cohorts/mps-train2-r1/summary.json")).unwrap();
    assert_eq!(c.study(&plan).unwrap(), 0);
    assert_eq!(c.events(), events);
    assert_eq!(c.jobs_created(), 3);
}

#[test]
fn a_failed_pod_fails_its_dra_cohort_and_its_claim_is_deleted() {
    let c = Cluster::new(Some(1));
    c.node("dra-node-1", &[("cpu", "16")], &[]);
    let plan = c.plan(
        &DRA_PLAN
            .replace(
                "[[cohort]]\nworkers = \"train=1\"\npolicies = [\"exclusive\"]\nbaseline = true\n",
                "",
            )
            .replace(
                "policies = [\"timeslice\", \"mps\"]",
                "policies = [\"timeslice\"]",
            ),
    );
    let code = c.study(&plan).unwrap();
    assert_eq!(code, coload_cohort_schema::exit::INCOMPLETE_COHORT);
    let index = c.index();
    let e = &index.cohorts[0];
    assert_eq!(e.outcome, Outcome::Failed);
    let reason = e.reason.as_deref().unwrap_or_default();
    assert!(reason.starts_with("replica 1: worker_exited"), "{reason}");
    assert_claim_per_cohort(&c.events(), 1);
}

#[test]
fn a_dra_plan_the_driver_cannot_run_is_refused_before_anything_is_created() {
    let c = Cluster::new(None);
    c.node("dra-node-1", &[("cpu", "16")], &[]);
    let mig = "\n[[policy]]\nname = \"mig\"\nmode = \"mig\"\nsharing = \"dra\"\n\
               mig_profile = \"1g.18gb\"\nnode = \"dra-node-1\"\n\n[[cohort]]\nworkers = \"train=1\"";
    for (plan, want) in [
        (
            DRA_PLAN.replace("\n[[cohort]]\nworkers = \"train=1\"", mig),
            "policies `mig` (mig) and `mps` (mps) share node `dra-node-1` under dra",
        ),
        (
            DRA_PLAN.replace("mps_threads = 50, mps_memory = \"1GiB\"", "mps_replicas = 2"),
            "cohort `mps-train2-r1`: --mps-replicas N is the device plugin's MPS share",
        ),
        (
            DRA_PLAN.replace(
                "flags = { mps_threads = 50, mps_memory = \"1GiB\" }",
                "flags = { mps_unlimited = true, timeslice_interval = \"short\" }",
            ),
            "MPS and time-slicing cannot share one GPU at once",
        ),
        (
            DRA_PLAN.replace(
                "sharing = \"dra\"\nnode = \"dra-node-1\"\nflags = { timeslice",
                "sharing = \"dra\"\nnode = \"dra-node-1\"\nresource = \"nvidia.com/gpu\"\nflags = { timeslice",
            ),
            "a resource key is the device plugin's",
        ),
    ] {
        let path = c.plan(&plan);
        let err = c.study(&path).unwrap_err().to_string();
        assert!(err.contains(want), "want `{want}` in: {err}");
        assert!(c.events().is_empty(), "{want}: {:?}", c.events());
        assert_eq!(c.jobs_created(), 0, "{want}");
        assert!(!c.path("out").exists(), "the study folder was created: {want}");
    }
}
