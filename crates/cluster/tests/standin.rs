//! The Kubernetes backend end to end, without a cluster: `bench-cohort study --backend
//! kubernetes` against a stand-in for kubectl (deploy/tests/stubs/kubectl-standin) that runs
//! each rendered Pod's real container command as a local process, with JOB_COMPLETION_INDEX set
//! and the claim's mount path mapped to a temporary folder.
//!
//! This is the seam test: it shows that the manifests the backend renders run the real workers,
//! that the backend waits, collects, summarizes, resumes and reports failures as the study on
//! one node does, and how it meets what a real API server does that a node does not (the
//! stand-in copies it: namespaces, asynchronous Pods, Pending Pods with FailedScheduling, Pod
//! Security admission, peers deleted after FailJob, finish times in whole seconds). It cannot
//! show image pulls or the device plugin's allocation (docs/deploy.md).
//!
//! Needs: bench-worker built in the same target folder (`cargo build -p bench-worker`), and
//! the deploy validators' Python (`scripts/provision-tools.sh`, which CI runs) for PyYAML.
//! Without them the tests fail, saying so: they are never skipped.

use std::fmt::Write as _;
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
/// the stand-in with them (and with the stand-in's variables in `state/env`, which a test may
/// change between runs).
struct Cluster {
    tmp: tempfile::TempDir,
    /// One test's clusters at a time: each runs real CPU workers, and studies of several tests
    /// side by side on a loaded two-core machine started a worker past the late margin. A test
    /// that makes a second cluster already holds the lock.
    _serial: Option<std::sync::MutexGuard<'static, ()>>,
}

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

thread_local! {
    static HOLDS_SERIAL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl Cluster {
    fn new() -> Cluster {
        let serial = (!HOLDS_SERIAL.with(std::cell::Cell::get)).then(|| {
            HOLDS_SERIAL.with(|h| h.set(true));
            SERIAL
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        });
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join("state");
        std::fs::create_dir_all(state.join("nodes")).unwrap();
        std::fs::create_dir_all(state.join("namespaces")).unwrap();
        std::fs::create_dir_all(tmp.path().join("volume")).unwrap();
        std::fs::write(state.join("env"), "").unwrap();
        let script = format!(
            "#!/bin/sh\nexport STANDIN_STATE='{}' STANDIN_VOLUME='{}' STANDIN_PATH='{}'\n. '{}'\nexec '{}' '{}' \"$@\"\n",
            state.display(),
            tmp.path().join("volume").display(),
            worker_dir().display(),
            state.join("env").display(),
            python().display(),
            root().join("deploy/tests/stubs/kubectl-standin").display(),
        );
        let kubectl = tmp.path().join("kubectl");
        std::fs::write(&kubectl, script).unwrap();
        std::fs::set_permissions(&kubectl, std::fs::Permissions::from_mode(0o755)).unwrap();
        let c = Cluster {
            tmp,
            _serial: serial,
        };
        c.namespace(
            "default",
            &serde_json::json!({ "claims": ["gpu-benchmark-sync"] }),
        );
        c
    }

    /// The stand-in's variables for the next calls (`STANDIN_FAIL=1:11`), replacing the last.
    fn env(&self, vars: &[(&str, &str)]) {
        let mut text = String::new();
        for (k, v) in vars {
            let _ = writeln!(text, "export {k}='{v}'");
        }
        std::fs::write(self.path("state/env"), text).unwrap();
    }

    /// A namespace: `labels`, the `claims` it holds, a `quota_pods`.
    fn namespace(&self, name: &str, v: &serde_json::Value) {
        std::fs::write(
            self.path(&format!("state/namespaces/{name}.json")),
            v.to_string(),
        )
        .unwrap();
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
        self.study_with(plan, &[])
    }

    fn study_with(&self, plan: &Path, extra: &[&str]) -> Result<u8, ClusterError> {
        self.study_to(plan, extra, &QuietConsole)
    }

    fn study_to(
        &self,
        plan: &Path,
        extra: &[&str],
        console: &dyn coload_launch::Console,
    ) -> Result<u8, ClusterError> {
        let mut argv: Vec<std::ffi::OsString> = vec![
            "bench-cohort".into(),
            plan.as_os_str().into(),
            "--out".into(),
            self.path("out").as_os_str().into(),
            "--backend".into(),
            "kubernetes".into(),
            "--kubectl".into(),
            self.path("kubectl").as_os_str().into(),
            "--volume-dir".into(),
            self.path("volume").as_os_str().into(),
            "--job-timeout-s".into(),
            "240".into(),
            "--no-progress-bar".into(),
        ];
        argv.extend(extra.iter().map(Into::into));
        let cli = Cli::parse_from(argv);
        run_study(&cli.study, &cli.cluster, console, &AtomicBool::new(false))
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
        std::fs::read_to_string(self.path("state/created.log"))
            .unwrap_or_default()
            .lines()
            .count()
    }

    /// What the stand-in's Job controllers logged, for a failing test's message.
    fn controller_logs(&self) -> String {
        let mut out = String::new();
        for top in ["state/jobs", "state/deleted"] {
            for ns in std::fs::read_dir(self.path(top))
                .into_iter()
                .flatten()
                .flatten()
            {
                for job in std::fs::read_dir(ns.path()).into_iter().flatten().flatten() {
                    let log = std::fs::read_to_string(job.path().join("controller.log"));
                    let _ = writeln!(
                        out,
                        "{}:\n{}",
                        job.path().display(),
                        log.unwrap_or_default()
                    );
                }
            }
        }
        out
    }

    /// Every kubectl call, one line each.
    fn calls(&self) -> String {
        std::fs::read_to_string(self.path("state/calls.log")).unwrap_or_default()
    }

    /// The one cohort of the index.
    fn only_cohort(&self) -> coload_cohort_schema::study::Entry {
        let mut index = self.index();
        assert_eq!(index.cohorts.len(), 1, "{index:#?}");
        index.cohorts.remove(0)
    }

    fn index(&self) -> Index {
        coload_cohort_schema::read_document(&self.path("out/index.json")).unwrap()
    }
}

/// A console that keeps what the study says.
#[derive(Default)]
struct Recording(std::sync::Mutex<Vec<String>>);

impl coload_launch::Console for Recording {
    fn progress(&self, line: &str) {
        self.0.lock().unwrap().push(line.to_owned());
    }

    fn output(&self, text: &str) {
        self.0.lock().unwrap().push(text.to_owned());
    }
}

/// Tiny CPU cohorts: a solo baseline on one node, and a serve+train and a two-trainer cohort
/// time-sliced on another.
const PLAN: &str = r#"
name = "standin"
[flags]
window_s = 2
warmup_batches = 1
start_lead_s = 3
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
    let c = Cluster::new();
    two_nodes(&c);
    let plan = c.plan(PLAN);
    // The Jobs are kept: one is picked up below as a study stopped before collecting it would.
    let code = c.study_with(&plan, &["--keep-jobs"]).unwrap();
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
    // --keep-jobs kept the collected Jobs; every Job carries a TTL.
    assert!(!c.calls().contains("delete job "), "{}", c.calls());
    for e in &index.cohorts {
        let job =
            std::fs::read_to_string(c.path(&format!("out/cohorts/{}/job.yaml", e.name))).unwrap();
        assert!(job.contains("ttlSecondsAfterFinished: 86400"), "{job}");
    }

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
    let said = Recording::default();
    let code = c.study_to(&plan, &["--keep-jobs"], &said).unwrap();
    let said = said.0.into_inner().unwrap().join("\n");
    assert!(
        said.contains(&format!(
            "{name}: an earlier run left it unfinished; kept as cohorts/{name}.interrupted-1 and \
             its Job coload-"
        )) && said.contains("is still on the cluster: collected, not run again"),
        "{said}"
    );
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
    let c = Cluster::new();
    c.env(&[("STANDIN_FAIL", "1:11")]);
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
    // Replica 0, stopped by the controller after FailJob, has its exit code although its Pod
    // was deleted: the backend waits for the peers to stop and reads each Pod as it ends.
    assert_eq!(failure.workers[0].exit_code, Some(143), "{failure:#?}");
}

#[test]
fn bad_plans_are_refused_before_anything_is_created() {
    let c = Cluster::new();
    two_nodes(&c);
    c.node("cpu-node-3", &[("nvidia.com/gpu", "1")], &[]);
    // 8 GPUs partitioned alike; the plugin may give a cohort slices of 8 GPUs.
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
start_lead_s = 3
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
    let c = Cluster::new();
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
    // A cohort whose summary went missing runs again (its collected Job was deleted), with a
    // claim of its own created before its Job and deleted after it; its run re-runs the
    // trainer's solo before and after it, so that it divides by solos of its own run (its
    // baseline block), each cohort with a claim of its own.
    std::fs::remove_file(c.path("out/cohorts/mps-train2-r1/summary.json")).unwrap();
    assert_eq!(c.study(&plan).unwrap(), 0);
    let again = c.events();
    assert_eq!(&again[..events.len()], &events[..]);
    assert_claim_per_cohort(&again[events.len()..], 3);
    assert_eq!(c.jobs_created(), 6);
    let ran: Vec<(String, Option<u32>)> = c
        .index()
        .cohorts
        .into_iter()
        .filter(|e| e.outcome == Outcome::Complete)
        .map(|e| (e.name, e.run))
        .collect();
    assert_eq!(
        ran,
        [
            ("exclusive-train1-run3-r1".to_owned(), Some(3)),
            ("mps-train2-r1".to_owned(), Some(3)),
            ("exclusive-train1-run3-r2".to_owned(), Some(3)),
        ]
    );
}

#[test]
fn a_failed_pod_fails_its_dra_cohort_and_its_claim_is_deleted() {
    let c = Cluster::new();
    c.env(&[("STANDIN_FAIL", "1:11")]);
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
    let c = Cluster::new();
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

/// A plan of one cohort of two trainers on a time-sliced node, with `extra` flags.
fn one_cohort(extra_flags: &str) -> String {
    PLAN.replace(
        "[[cohort]]\nworkers = \"train=1\"\npolicies = [\"exclusive\"]\nbaseline = true\n\n\
         [[cohort]]\nworkers = \"serve=1,train=1\"\npolicies = [\"timeslice\"]\nflags = { rate = 20 }\n",
        "",
    )
    .replace("telemetry_hz = 0\n", &format!("telemetry_hz = 0\n{extra_flags}"))
}

/// A failed Job stays in the API: a retry deletes it and its Pods, then runs a fresh Job with a
/// fresh experiment id, instead of collecting the old failure again.
#[test]
fn a_retry_deletes_the_failed_job_and_runs_a_fresh_one() {
    let c = Cluster::new();
    two_nodes(&c);
    c.env(&[("STANDIN_FAIL", "1:11")]);
    let plan = c.plan(&one_cohort(""));
    let code = c.study_with(&plan, &["--keep-jobs"]).unwrap();
    assert_eq!(code, coload_cohort_schema::exit::INCOMPLETE_COHORT);
    let first = c.only_cohort();
    assert_eq!(first.outcome, Outcome::Failed, "{first:#?}");
    assert!(
        !c.calls().contains("delete job "),
        "--keep-jobs deleted a Job"
    );
    let record = c.path("out/cluster/timeslice-train2-r1.json");
    let experiment = |p: &Path| -> String {
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
        v["experiment"].as_str().unwrap().to_owned()
    };
    let failed_experiment = experiment(&record);
    c.env(&[]);
    let code = c
        .study_with(&plan, &["--keep-jobs", "--retry-failed"])
        .unwrap();
    let again = c.only_cohort();
    assert_eq!(code, 0, "{again:#?}");
    assert_eq!(again.outcome, Outcome::Complete, "{again:#?}");
    assert_eq!(c.jobs_created(), 2);
    assert_ne!(experiment(&record), failed_experiment);
    assert_eq!(c.calls().matches("delete job ").count(), 1, "{}", c.calls());
    assert_eq!(c.pods_started().len(), 4, "{:?}", c.pods_started());
}

/// A Pod the scheduler cannot place (the namespace has no claim) fails the cohort within the
/// schedule timeout as `pod_not_scheduled`, with the scheduler's message, not as a worker's
/// failure after the Job's deadline.
#[test]
fn an_unschedulable_pod_fails_the_cohort_as_not_scheduled() {
    let c = Cluster::new();
    two_nodes(&c);
    c.namespace("bench", &serde_json::json!({ "claims": [] }));
    let plan = c.plan(&one_cohort("schedule_timeout_s = 3\n"));
    let started = std::time::Instant::now();
    let code = c.study_with(&plan, &["--namespace", "bench"]).unwrap();
    assert_eq!(code, coload_cohort_schema::exit::INCOMPLETE_COHORT);
    assert!(started.elapsed().as_secs() < 60, "{:?}", started.elapsed());
    let e = c.only_cohort();
    let reason = e.reason.as_deref().unwrap_or_default();
    assert!(
        reason.starts_with("replica 0: pod_not_scheduled"),
        "{reason}"
    );
    let failure: coload_cohort_schema::CohortFailure = coload_cohort_schema::read_document(
        &c.path(&format!("out/{}/failure.json", e.failed_dirs[0])),
    )
    .unwrap();
    assert!(
        failure
            .message
            .contains("persistentvolumeclaim \"gpu-benchmark-sync\" not found"),
        "{failure:#?}"
    );
    assert!(c.pods_started().is_empty());
    assert!(
        c.calls().contains("--namespace bench create"),
        "{}",
        c.calls()
    );
}

/// The rendered Pods meet the `restricted` Pod Security Standard: a namespace that enforces it
/// runs them. A Pod the API server refuses (a quota here) fails the cohort as
/// `pod_not_admitted` with the controller's event; kubectl's warnings go to cohort.log.
#[test]
fn restricted_namespaces_run_the_pods_and_refusals_are_named() {
    let c = Cluster::new();
    two_nodes(&c);
    c.namespace(
        "restricted",
        &serde_json::json!({
            "labels": { "pod-security.kubernetes.io/enforce": "restricted" },
            "claims": ["gpu-benchmark-sync"],
        }),
    );
    let plan = c.plan(&one_cohort("schedule_timeout_s = 3\n"));
    let code = c.study_with(&plan, &["--namespace", "restricted"]).unwrap();
    let e = c.only_cohort();
    assert_eq!(code, 0, "{e:#?}");
    assert_eq!(e.outcome, Outcome::Complete);
    // The collected Job was deleted, not left for its TTL.
    assert!(
        c.calls()
            .contains("--namespace restricted delete job coload-"),
        "{}",
        c.calls()
    );

    let c = Cluster::new();
    two_nodes(&c);
    c.namespace(
        "quota",
        &serde_json::json!({ "claims": ["gpu-benchmark-sync"], "quota_pods": 1 }),
    );
    c.env(&[("STANDIN_CREATE_WARNING", "batch/v1 Job is deprecated here")]);
    let code = c.study_with(&plan, &["--namespace", "quota"]).unwrap();
    assert_eq!(code, coload_cohort_schema::exit::INCOMPLETE_COHORT);
    let e = c.only_cohort();
    let reason = e.reason.as_deref().unwrap_or_default();
    assert!(
        reason.starts_with("replica 1: pod_not_admitted"),
        "{reason}"
    );
    let dir = c.path(&format!("out/{}", e.failed_dirs[0]));
    let failure: coload_cohort_schema::CohortFailure =
        coload_cohort_schema::read_document(&dir.join("failure.json")).unwrap();
    assert!(failure.message.contains("FailedCreate"), "{failure:#?}");
    assert!(failure.message.contains("exceeded quota"), "{failure:#?}");
    let log = std::fs::read_to_string(dir.join("cohort.log")).unwrap();
    assert!(
        log.contains("kubectl create: Warning: batch/v1 Job is deprecated here"),
        "{log}"
    );
}

/// Which replica failed first comes from the workers' own nanosecond times, not from the Pods'
/// finish times (whole seconds): replica 1 is stopped 0.4 s before replica 0, within one
/// second, and is named. Without a worker's time, the same second is said as a tie; a
/// SIGKILLed container is named so.
#[test]
fn the_first_failure_is_the_workers_own_and_a_tie_is_a_tie() {
    let c = Cluster::new();
    two_nodes(&c);
    // Both are stopped in the start's lead: a worker waiting for the start notices only when
    // the window begins, so both Pods end together, but each records when its signal came.
    c.env(&[("STANDIN_TERM", "1:0.0,0:0.4")]);
    let plan = c.plan(&one_cohort("").replace("start_lead_s = 3\n", "start_lead_s = 5\n"));
    let code = c.study(&plan).unwrap();
    assert_eq!(code, coload_cohort_schema::exit::INCOMPLETE_COHORT);
    let e = c.only_cohort();
    let reason = e.reason.as_deref().unwrap_or_default();
    assert!(
        reason.starts_with("replica 1: terminated"),
        "{reason}\n{}",
        c.controller_logs()
    );

    let c = Cluster::new();
    two_nodes(&c);
    c.env(&[("STANDIN_FAIL", "0:137:0.3,1:11:0.0")]);
    let code = c.study(&plan).unwrap();
    assert_eq!(code, coload_cohort_schema::exit::INCOMPLETE_COHORT);
    let e = c.only_cohort();
    let failure: coload_cohort_schema::CohortFailure = coload_cohort_schema::read_document(
        &c.path(&format!("out/{}/failure.json", e.failed_dirs[0])),
    )
    .unwrap();
    assert_eq!(failure.replica, None, "{failure:#?}");
    assert!(
        failure.message.starts_with("a tie: replicas 0, 1"),
        "{failure:#?}"
    );
    assert!(failure.message.contains("137 (SIGKILL)"), "{failure:#?}");
    assert_eq!(failure.workers[0].exit_code, Some(137));
    assert_eq!(failure.workers[1].exit_code, Some(11));
}

/// A hog cohort is not run on a cluster (its order and its device cannot be kept): the study
/// says why and creates nothing for it.
#[test]
fn a_hog_cohort_is_not_offered_on_a_cluster() {
    let c = Cluster::new();
    two_nodes(&c);
    let plan =
        c.plan(&one_cohort("").replace("workers = \"train=2\"", "workers = \"hog=1,train=1\""));
    let _ = c.study(&plan).unwrap();
    let e = c.only_cohort();
    assert_eq!(e.outcome, Outcome::NotOffered, "{e:#?}");
    assert!(
        e.reason
            .as_deref()
            .unwrap_or_default()
            .contains("has a hog"),
        "{e:#?}"
    );
    assert_eq!(c.jobs_created(), 0);
}
