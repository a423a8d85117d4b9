//! `bench-cohort study PLAN --backend kubernetes`: the same study, its cohorts as Indexed Jobs.
//!
//! The plan maps each policy to a node and a resource key (`node = "gpu-ts-1"`, `resource =
//! "nvidia.com/gpu"` on its `[[policy]]`). Before anything is created, every policy is checked:
//! it has a node and a known key that fits its mode, and the node, read from the cluster
//! (`kubectl get node NAME -o json`: labels and allocatable), advertises that key with room for
//! the policy's largest cohort (and a MIG resource for a MIG policy). Then the study runs as on
//! one node ([`coload_study::run_with`]): each node is a lane, so cohorts on different nodes run
//! at the same time; per cohort the backend creates the Job, waits for it with a deadline,
//! collects the workers' folders from the claim mounted here (`--volume-dir`), and summarizes
//! them as `bench-cohort` does, or writes `failure.json` naming the replica that failed first.
//!
//! Resume: a cohort whose `summary.json` reads is skipped as always; and a Job the study created
//! in an earlier run (recorded in `<out>/cluster/<cohort>.json`) that still exists is collected
//! (or waited for), not created again.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use coload_cohort_schema::{
    CohortFailure, FailureKind, Mode, SCHEMA_VERSION, WorkerOutcome, exit, files,
    read_worker_report,
};
use coload_launch::Console;
use coload_spec::{CohortSpec, Seconds};
use coload_study::{Ended, Job, Launcher, Offer, Placement, Plan, Running, StudyArgs, Target};
use serde::{Deserialize, Serialize};

use crate::collect;
use crate::error::ClusterError;
use crate::kubectl::{JobState, Kubectl, NodeOffer, PodState};
use crate::kubernetes::{DEFAULT_IMAGE, Site, fresh_experiment, render_job};
use crate::polyaxon::render_operations;
use crate::resource::ResourceKey;
use crate::stage::RESULTS_DIR;

/// Where a study's cohorts run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Backend {
    /// This node (`bench-cohort run` per cohort).
    #[default]
    Local,
    /// A Kubernetes cluster: one Indexed Job per cohort on the policy's node.
    Kubernetes,
    /// Polyaxon: operations and a launch script per cohort (with --emit).
    Polyaxon,
}

/// The cluster backends' flags of `bench-cohort study`.
#[derive(Debug, Clone, clap::Args)]
pub struct ClusterArgs {
    /// Where the cohorts run: local (this node), kubernetes (an Indexed Job per cohort on each
    /// policy's `node`, through kubectl) or polyaxon (with --emit: operations and launch.sh)
    #[arg(long, value_enum, default_value_t = Backend::Local)]
    pub backend: Backend,

    /// The kubectl to use (default: kubectl on PATH)
    #[arg(long, value_name = "PATH")]
    pub kubectl: Option<PathBuf>,

    /// Where the gpu-benchmark-sync claim is mounted on this machine: staged files are copied
    /// there and the workers' folders collected from it (coload-results/<experiment>/)
    #[arg(long, value_name = "DIR")]
    pub volume_dir: Option<PathBuf>,

    /// The worker image (deploy/docker/Dockerfile, pushed where the cluster pulls from)
    #[arg(long, default_value = DEFAULT_IMAGE)]
    pub image: String,

    /// The namespace of the Jobs and the claim (default: kubectl's current one)
    #[arg(long)]
    pub namespace: Option<String>,

    /// Give up on a Job (and delete it) after this many seconds (default: its
    /// activeDeadlineSeconds and a minute)
    #[arg(long)]
    pub job_timeout_s: Option<Seconds>,

    /// Run policy POLICY on node NODE, over the plan's `node` (repeat per policy), e.g.
    /// --node timeslice=gpu-ts-1
    #[arg(long = "node", value_name = "POLICY=NODE")]
    pub nodes: Vec<String>,

    /// Request KEY for policy POLICY, over the plan's `resource` (repeat per policy), e.g.
    /// --resource mig=nvidia.com/mig-1g.18gb
    #[arg(long = "resource", value_name = "POLICY=KEY")]
    pub resources: Vec<String>,
}

impl ClusterArgs {
    /// With the local backend, refuses the flags that only a cluster backend reads.
    pub fn check_local(&self) -> Result<(), ClusterError> {
        let given = [
            (self.kubectl.is_some(), "--kubectl"),
            (self.volume_dir.is_some(), "--volume-dir"),
            (self.namespace.is_some(), "--namespace"),
            (self.job_timeout_s.is_some(), "--job-timeout-s"),
            (!self.nodes.is_empty(), "--node"),
            (!self.resources.is_empty(), "--resource"),
            (self.image != DEFAULT_IMAGE, "--image"),
        ];
        match given.iter().find(|(g, _)| *g) {
            Some((_, flag)) => Err(ClusterError::Usage(format!(
                "{flag} is for a cluster backend; add --backend kubernetes (or polyaxon)"
            ))),
            None => Ok(()),
        }
    }
}

/// `POLICY=VALUE` pairs, each policy once and known to the plan.
fn pairs(
    plan: &Plan,
    flag: &str,
    given: &[String],
) -> Result<BTreeMap<String, String>, ClusterError> {
    let mut out = BTreeMap::new();
    for g in given {
        let Some((policy, value)) = g.split_once('=') else {
            return Err(ClusterError::Usage(format!(
                "{flag} `{g}`: write POLICY=VALUE (e.g. {flag} timeslice=...)"
            )));
        };
        if !plan.policies.iter().any(|p| p.name == policy) {
            return Err(ClusterError::Usage(format!(
                "{flag} `{g}`: plan `{}` has no policy `{policy}`",
                plan.name
            )));
        }
        if out.insert(policy.to_owned(), value.to_owned()).is_some() {
            return Err(ClusterError::Usage(format!(
                "{flag} names policy `{policy}` twice"
            )));
        }
    }
    Ok(out)
}

/// Each policy's site: the plan's `node` and `resource`, or the command line's over them. A MIG
/// policy without a key requests its `mig_profile`'s mixed-strategy resource, or is refused.
/// With `emit`, a policy without a node gets the placeholder `node-for-<policy>` (with a
/// warning) and a non-MIG one without a key `nvidia.com/gpu`; to run, both are required.
fn sites(
    plan: &Plan,
    cluster: &ClusterArgs,
    emit: bool,
    console: &dyn Console,
) -> Result<BTreeMap<String, Site>, ClusterError> {
    let err = |line: usize, message: String| ClusterError::Plan {
        plan: plan.source.clone(),
        message: format!("line {line}: {message}"),
    };
    let nodes = pairs(plan, "--node", &cluster.nodes)?;
    let keys = pairs(plan, "--resource", &cluster.resources)?;
    let mut out = BTreeMap::new();
    for p in &plan.policies {
        let node = match (nodes.get(&p.name).or(p.node.as_ref()), emit) {
            (Some(n), _) => n.clone(),
            (None, true) => {
                let placeholder = format!(
                    "node-for-{}",
                    p.name
                        .to_ascii_lowercase()
                        .replace(|c: char| !(c.is_ascii_alphanumeric() || c == '.'), "-")
                );
                console.progress(&format!(
                    "warning: policy `{}` has no node; its manifests say `{placeholder}` (give \
                     --node {}=NODE or `node` in the plan)",
                    p.name, p.name
                ));
                placeholder
            }
            (None, false) => {
                return Err(err(
                    p.line,
                    format!(
                        "policy `{}` has no `node`: a cluster backend runs each policy on the \
                         node prepared for it (node = \"gpu-ts-1\" in the plan, or --node {}=NODE)",
                        p.name, p.name
                    ),
                ));
            }
        };
        let mig = matches!(p.mode, Mode::Mig | Mode::MigTimeslice);
        let text = match (keys.get(&p.name).or(p.resource.as_ref()), emit) {
            (Some(k), _) => k.clone(),
            // A MIG policy's key is never guessed: nvidia.com/gpu is a whole GPU under the mixed
            // strategy, and which MIG resource to request depends on the node's layout.
            (None, _) if mig => match &p.mig_profile {
                Some(profile) => ResourceKey::for_mig_profile(profile)
                    .map_err(|e| err(p.line, format!("policy `{}`: {e}", p.name)))?
                    .to_string(),
                None => {
                    return Err(err(
                        p.line,
                        format!(
                            "policy `{}` is {} and names no `resource` or `mig_profile`: say \
                             which MIG resource each worker requests (resource = \
                             \"nvidia.com/mig-1g.18gb\" under the mixed strategy, \
                             \"nvidia.com/gpu\" under single; or --resource {}=KEY)",
                            p.name, p.mode, p.name
                        ),
                    ));
                }
            },
            (None, true) => "nvidia.com/gpu".to_owned(),
            (None, false) => {
                return Err(err(
                    p.line,
                    format!(
                        "policy `{}` has no `resource`: say what each worker requests \
                         (resource = \"nvidia.com/gpu\" in the plan, or --resource {}=KEY)",
                        p.name, p.name
                    ),
                ));
            }
        };
        let resource = ResourceKey::parse(&text)
            .map_err(|e| err(p.line, format!("policy `{}`: {e}", p.name)))?;
        resource
            .check_mode(p.mode)
            .map_err(|e| err(p.line, format!("policy `{}`: {e}", p.name)))?;
        let site = Site {
            node,
            resource,
            image: cluster.image.clone(),
            namespace: cluster.namespace.clone(),
        };
        site.validate()
            .map_err(|e| err(p.line, format!("policy `{}`: {e}", p.name)))?;
        out.insert(p.name.clone(), site);
    }
    Ok(out)
}

/// Checks each policy against its node's offer: the key advertised with room for the largest
/// cohort, and a MIG resource for a MIG policy. Every problem, one per line.
pub fn check_offers(
    plan: &Plan,
    sites: &BTreeMap<String, Site>,
    offers: &BTreeMap<String, NodeOffer>,
) -> Result<(), ClusterError> {
    let mut problems = Vec::new();
    let jobs = plan.jobs(false);
    for p in &plan.policies {
        let Some(site) = sites.get(&p.name) else {
            continue;
        };
        let Some(offer) = offers.get(&site.node) else {
            problems.push(format!(
                "line {}: policy `{}`: node `{}` was not read from the cluster",
                p.line, p.name, site.node
            ));
            continue;
        };
        let key = site.resource.as_str();
        let need = jobs
            .iter()
            .filter(|j| j.policy == p.name)
            .map(|j| u64::from(j.count))
            .max()
            .unwrap_or(0);
        if matches!(p.mode, Mode::Mig | Mode::MigTimeslice)
            && offer.mig_keys().is_empty()
            && !offer.mig_single()
        {
            problems.push(format!(
                "line {}: policy `{}` is {}, but node `{}` advertises no MIG resource (no \
                 nvidia.com/mig-* in its allocatable, no nvidia.com/mig.strategy=single label); \
                 label it with a MIG layout first (docs/deploy.md)",
                p.line, p.name, p.mode, offer.name
            ));
            continue;
        }
        if matches!(p.mode, Mode::Mig | Mode::MigTimeslice)
            && let Err(why) = crate::mig_node::check(p.mode, &site.resource, offer)
        {
            problems.push(format!("line {}: policy `{}`: {why}", p.line, p.name));
            continue;
        }
        let have = offer.units(key);
        if have == 0 {
            problems.push(format!(
                "line {}: policy `{}` requests {key}, which node `{}` does not advertise \
                 (allocatable: {})",
                p.line,
                p.name,
                offer.name,
                offer
                    .allocatable
                    .keys()
                    .filter(|k| k.contains("nvidia.com/"))
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        } else if have < need {
            problems.push(format!(
                "line {}: policy `{}` has a cohort of {need} workers, but node `{}` allocates \
                 {have} {key}: the workers must all run at once",
                p.line, p.name, offer.name
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ClusterError::Plan {
            plan: plan.source.clone(),
            message: format!(
                "the cluster does not offer what the plan asks (nothing was created):\n  {}",
                problems.join("\n  ")
            ),
        })
    }
}

/// Runs (or, with `--emit`, writes) a study on a cluster backend; returns the exit code.
pub fn run_study(
    args: &StudyArgs,
    cluster: &ClusterArgs,
    console: &dyn Console,
    interrupted: &AtomicBool,
) -> Result<u8, ClusterError> {
    if cluster.backend == Backend::Local {
        return Err(ClusterError::Usage(
            "internal: the local backend is coload_study::run".into(),
        ));
    }
    if !args.gpus.is_empty() || args.node_listing.is_some() || args.worker_bin.is_some() {
        return Err(ClusterError::Usage(
            "--gpus, --node-listing and --worker-bin describe this node; a cluster backend runs \
             each policy on its plan `node`"
                .into(),
        ));
    }
    let plan = Plan::load(&args.plan).map_err(coload_study::StudyError::from)?;
    let sites = sites(&plan, cluster, args.emit.is_some(), console)?;
    if let Some(dir) = &args.emit {
        return emit(&plan, args, cluster.backend, &sites, dir, console);
    }
    if cluster.backend == Backend::Polyaxon {
        return Err(ClusterError::Usage(
            "the polyaxon backend writes operations and a launch script: add --emit DIR".into(),
        ));
    }
    let volume = cluster.volume_dir.clone().ok_or_else(|| {
        ClusterError::Usage(
            "--backend kubernetes needs --volume-dir: where the gpu-benchmark-sync claim is \
             mounted here, to stage files and collect the workers' folders"
                .into(),
        )
    })?;
    if !volume.is_dir() {
        return Err(ClusterError::Usage(format!(
            "--volume-dir {} is not a folder",
            volume.display()
        )));
    }
    let kubectl = Kubectl {
        program: cluster
            .kubectl
            .clone()
            .unwrap_or_else(|| PathBuf::from("kubectl")),
        namespace: cluster.namespace.clone(),
    };
    let mut nodes: Vec<String> = sites.values().map(|s| s.node.clone()).collect();
    nodes.sort();
    nodes.dedup();
    let mut offers = BTreeMap::new();
    for n in &nodes {
        offers.insert(n.clone(), kubectl.node(n)?);
    }
    check_offers(&plan, &sites, &offers)?;
    let out = args
        .out
        .clone()
        .ok_or_else(|| ClusterError::Usage("--out is required to run a study".into()))?;
    let lanes: BTreeMap<String, u32> = plan
        .policies
        .iter()
        .filter_map(|p| {
            let node = &sites.get(&p.name)?.node;
            let lane = nodes.iter().position(|n| n == node)? as u32;
            Some((p.name.clone(), lane))
        })
        .collect();
    let offer = ClusterOffer { lanes };
    let describe = format!(
        "kubernetes: {}",
        plan.policies
            .iter()
            .filter_map(|p| sites
                .get(&p.name)
                .map(|s| format!("{} on node {} ({})", p.name, s.node, s.resource)))
            .collect::<Vec<_>>()
            .join("; ")
    );
    let target = Target {
        offer: &offer,
        lanes: (0..nodes.len() as u32).collect(),
        cpu: false,
        describe,
        launcher: ClusterLauncher {
            kubectl,
            sites,
            volume,
            state: out.join("cluster"),
            timeout: cluster.job_timeout_s,
        },
    };
    Ok(coload_study::run_with(
        args,
        &plan,
        target,
        console,
        interrupted,
    )?)
}

/// `--emit DIR`: every cohort's manifests, nothing created.
fn emit(
    plan: &Plan,
    args: &StudyArgs,
    backend: Backend,
    sites: &BTreeMap<String, Site>,
    dir: &Path,
    console: &dyn Console,
) -> Result<u8, ClusterError> {
    let mut jobs = plan.jobs(false);
    if let Some(w) = args.window_s {
        for j in &mut jobs {
            j.spec.flags.window_s = w;
        }
    }
    std::fs::create_dir_all(dir).map_err(|source| ClusterError::Io {
        what: "cannot create",
        path: dir.to_owned(),
        source,
    })?;
    let mut written = 0usize;
    for job in &jobs {
        let site = &sites[&job.policy];
        let experiment = fresh_experiment(&job.spec, &job.mix);
        match backend {
            Backend::Kubernetes => {
                let r = render_job(&job.spec, site, &experiment)?;
                write_new(&dir.join(format!("{}.yaml", job.name)), r.yaml.as_bytes())?;
                written += 1;
            }
            Backend::Polyaxon => {
                let r = render_operations(&job.spec, site, &experiment)?;
                let sub = dir.join(&job.name);
                create_new_dir(&sub)?;
                for (name, text) in &r.operations {
                    write_new(&sub.join(name), text.as_bytes())?;
                    written += 1;
                }
                write_new(&sub.join("launch.sh"), r.launch_script.as_bytes())?;
            }
            Backend::Local => {}
        }
    }
    console.progress(&format!(
        "wrote {written} manifest(s) for {} cohort(s) of plan `{}` into {} (nothing was created \
         on a cluster; each cohort has a fresh experiment id)",
        jobs.len(),
        plan.name,
        dir.display()
    ));
    Ok(exit::COMPLETE)
}

/// Writes a new file; an existing one is never overwritten.
pub(crate) fn write_new(path: &Path, bytes: &[u8]) -> Result<(), ClusterError> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|source| {
            if source.kind() == std::io::ErrorKind::AlreadyExists {
                ClusterError::Exists(path.to_owned())
            } else {
                ClusterError::Io {
                    what: "cannot write",
                    path: path.to_owned(),
                    source,
                }
            }
        })?;
    f.write_all(bytes).map_err(|source| ClusterError::Io {
        what: "cannot write",
        path: path.to_owned(),
        source,
    })
}

fn create_new_dir(path: &Path) -> Result<(), ClusterError> {
    std::fs::create_dir(path).map_err(|source| {
        if source.kind() == std::io::ErrorKind::AlreadyExists {
            ClusterError::Exists(path.to_owned())
        } else {
            ClusterError::Io {
                what: "cannot create",
                path: path.to_owned(),
                source,
            }
        }
    })
}

/// Each node is a lane; a cohort holds its policy's node while it runs.
#[derive(Debug)]
struct ClusterOffer {
    /// Policy name -> lane (node number).
    lanes: BTreeMap<String, u32>,
}

impl Offer for ClusterOffer {
    fn is_cpu(&self) -> bool {
        false
    }

    fn place(&self, job: &Job, free: &[u32]) -> Result<Placement, String> {
        let lane = *self
            .lanes
            .get(&job.policy)
            .ok_or_else(|| format!("policy `{}` has no node", job.policy))?;
        if free.contains(&lane) {
            Ok(Placement {
                gpus: vec![lane],
                visible: None,
                per_worker: Vec::new(),
                host_exclusive: false,
                mig_profile: None,
            })
        } else {
            Err("its node is busy".into())
        }
    }
}

/// What the study records of a Job it created: `<out>/cluster/<cohort>.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct JobRecord {
    experiment: String,
    job: String,
    count: u32,
}

#[derive(Debug)]
struct ClusterLauncher {
    kubectl: Kubectl,
    sites: BTreeMap<String, Site>,
    volume: PathBuf,
    state: PathBuf,
    timeout: Option<Seconds>,
}

fn other(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

impl Launcher for ClusterLauncher {
    type Run = ClusterRun;

    fn start(&mut self, job: &Job, _: &Placement, dir: &Path) -> std::io::Result<ClusterRun> {
        std::fs::create_dir_all(dir)?;
        std::fs::create_dir_all(&self.state)?;
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("cohort.log"))?;
        let record_path = self.state.join(format!("{}.json", job.name));
        let earlier: Option<JobRecord> = std::fs::read(&record_path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        let deadline_s = self.timeout.map_or_else(
            || {
                job.spec.flags.join_timeout_s.get()
                    + job.spec.flags.start_lead_s.get()
                    + job.spec.flags.window_s.get()
                    + 960.0
            },
            Seconds::get,
        );
        let run = |record: JobRecord, log| ClusterRun {
            kubectl: self.kubectl.clone(),
            record,
            dir: dir.to_owned(),
            volume: self.volume.clone(),
            spec: job.spec.clone(),
            deadline: Duration::try_from_secs_f64(deadline_s)
                .ok()
                .and_then(|d| Instant::now().checked_add(d))
                .unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400)),
            last_poll: None,
            kubectl_errors: 0,
            interrupted: false,
            log,
        };
        if let Some(record) = earlier
            && self.kubectl.job(&record.job).map_err(other)?.is_some()
        {
            writeln!(
                log,
                "job {} of experiment {} was created by an earlier run: collecting it, not \
                 creating it again",
                record.job, record.experiment
            )?;
            return Ok(run(record, log));
        }
        let site = self
            .sites
            .get(&job.policy)
            .ok_or_else(|| other(format!("policy `{}` has no node", job.policy)))?;
        let experiment = fresh_experiment(&job.spec, &job.mix);
        let rendered = render_job(&job.spec, site, &experiment).map_err(other)?;
        for s in &rendered.staged {
            s.copy_to(&self.volume).map_err(other)?;
        }
        let manifest = dir.join("job.yaml");
        crate::study::write_new(&manifest, rendered.yaml.as_bytes()).map_err(other)?;
        let record = JobRecord {
            experiment,
            job: rendered.name.clone(),
            count: rendered.count,
        };
        coload_cohort_schema::write_json_atomic(&record_path, &record).map_err(other)?;
        self.kubectl.create(&manifest).map_err(other)?;
        writeln!(
            log,
            "created job {} (experiment {}) on node {} requesting {}",
            record.job, record.experiment, site.node, site.resource
        )?;
        Ok(run(record, log))
    }
}

/// A Job the study waits for.
#[derive(Debug)]
pub(crate) struct ClusterRun {
    kubectl: Kubectl,
    record: JobRecord,
    dir: PathBuf,
    volume: PathBuf,
    spec: CohortSpec,
    deadline: Instant,
    last_poll: Option<Instant>,
    kubectl_errors: u32,
    interrupted: bool,
    log: std::fs::File,
}

/// How often the Job's state is asked for.
const POLL: Duration = Duration::from_secs(1);
/// kubectl failures in a row before the cohort is given up.
const MAX_KUBECTL_ERRORS: u32 = 10;

impl Running for ClusterRun {
    fn poll(&mut self) -> Option<Ended> {
        if self.interrupted {
            let _ = self.kubectl.delete_job(&self.record.job);
            return Some(Ended {
                code: Some(i32::from(coload_launch::INTERRUPTED)),
            });
        }
        if self.last_poll.is_some_and(|t| t.elapsed() < POLL) {
            return None;
        }
        self.last_poll = Some(Instant::now());
        match self.kubectl.job(&self.record.job) {
            Err(e) => {
                self.kubectl_errors += 1;
                let _ = writeln!(self.log, "warning: {e}");
                (self.kubectl_errors >= MAX_KUBECTL_ERRORS).then(|| {
                    self.fail(&format!(
                        "kubectl failed {MAX_KUBECTL_ERRORS} times in a row: {e}"
                    ))
                })
            }
            Ok(None) => Some(self.fail("the Job is gone (deleted outside the study?)")),
            Ok(Some(JobState::Running)) => {
                self.kubectl_errors = 0;
                if Instant::now() > self.deadline {
                    let _ = self.kubectl.delete_job(&self.record.job);
                    Some(self.fail("the Job did not finish in time; it was deleted"))
                } else {
                    None
                }
            }
            Ok(Some(JobState::Complete)) => Some(self.complete()),
            Ok(Some(JobState::Failed(why))) => Some(self.fail(&format!("the Job failed ({why})"))),
        }
    }

    fn interrupt(&mut self) {
        self.interrupted = true;
    }
}

impl ClusterRun {
    fn worker_dirs(&self) -> Vec<PathBuf> {
        (0..self.record.count)
            .map(|i| self.dir.join(format!("worker-{i}")))
            .collect()
    }

    /// Copies each worker's folder from the claim into the cohort's folder: regular folders and
    /// files only, no link followed, sizes capped (`collect`), and what was left out in the log.
    fn collect(&mut self) -> Vec<u32> {
        let results = self.volume.join(RESULTS_DIR);
        let from = results.join(&self.record.experiment);
        let above = collect::real_dir(&results).and_then(|()| collect::real_dir(&from));
        let mut missing = Vec::new();
        for i in 0..self.record.count {
            let src = from.join(format!("worker-{i}"));
            let dst = self.dir.join(format!("worker-{i}"));
            if let Err(why) = above.clone().and_then(|()| collect::real_dir(&src)) {
                let _ = writeln!(self.log, "warning: not collected: {why}");
                missing.push(i);
                continue;
            }
            match collect::copy_worker(&src, &dst, collect::Caps::default()) {
                Ok(skipped) => {
                    for s in skipped {
                        let _ = writeln!(self.log, "warning: not collected: {s}");
                    }
                }
                Err(e) => {
                    let _ = writeln!(self.log, "warning: cannot collect {}: {e}", src.display());
                    missing.push(i);
                }
            }
        }
        missing
    }

    fn complete(&mut self) -> Ended {
        let missing = self.collect();
        if !missing.is_empty() {
            return self.fail(&format!(
                "the Job completed but replica(s) {missing:?} left no folder on the claim"
            ));
        }
        let options = coload_analysis::Options {
            strict: self.spec.strict,
            slo_ms: self.spec.serve.slo_ms,
            slo_quantile: self.spec.capacity.slo_quantile,
            ..coload_analysis::Options::default()
        };
        match coload_analysis::summarize_dirs(&self.worker_dirs(), &options) {
            Ok(summary) => {
                let path = self.dir.join(files::SUMMARY);
                if let Err(e) = coload_cohort_schema::write_json_atomic(&path, &summary) {
                    return self.fail(&format!("cannot write {}: {e}", path.display()));
                }
                let _ = writeln!(self.log, "{}", coload_analysis::render_table(&summary));
                Ended { code: Some(0) }
            }
            Err(e) => {
                let code = e.exit_code();
                let mut record = self.failure_record(&[]);
                record.kind = FailureKind::SummaryRefused;
                record.replica = None;
                record.message = e.to_string();
                record.exit_code = code;
                self.write_failure(&record);
                Ended {
                    code: Some(i32::from(code)),
                }
            }
        }
    }

    /// Collects what there is and writes `failure.json` naming the replica that failed first.
    fn fail(&mut self, why: &str) -> Ended {
        let _ = self.collect();
        let pods = self.kubectl.pods(&self.record.job).unwrap_or_default();
        let mut record = self.failure_record(&pods);
        // The replica whose Pod failed first; else one whose worker.json says it failed; else
        // one that left nothing.
        let mut failed: Vec<&PodState> = pods
            .iter()
            .filter(|p| p.exit_code.is_some_and(|c| c != 0))
            .collect();
        failed.sort_by(|a, b| {
            a.finished_at
                .cmp(&b.finished_at)
                .then(a.index.cmp(&b.index))
        });
        let first = failed.first().map(|p| p.index).or_else(|| {
            record
                .workers
                .iter()
                .find(|w| w.kind.is_some())
                .map(|w| w.replica)
        });
        if let Some(w) = first.and_then(|r| record.workers.iter().find(|w| w.replica == r)) {
            record.replica = Some(w.replica);
            record.kind = w.kind.clone().unwrap_or(FailureKind::WorkerExited);
            record.message = format!("{}; {why}", w.outcome);
        } else {
            why.clone_into(&mut record.message);
        }
        let _ = writeln!(self.log, "error: {}: {}", record.short(), record.message);
        self.write_failure(&record);
        Ended {
            code: Some(i32::from(exit::INCOMPLETE_COHORT)),
        }
    }

    fn failure_record(&self, pods: &[PodState]) -> CohortFailure {
        let workers = (0..self.record.count)
            .map(|i| {
                let pod = pods.iter().find(|p| p.index == i);
                let code = pod.and_then(|p| p.exit_code);
                let report = read_worker_report(
                    &self
                        .dir
                        .join(format!("worker-{i}"))
                        .join(files::WORKER_REPORT),
                );
                let (kind, outcome) = match (&report, code) {
                    (Ok(r), _) => match &r.failure {
                        Some(f) => (
                            Some(f.kind.clone()),
                            format!("failed in {}: {} ({})", f.stage, f.message, f.kind),
                        ),
                        None => (None, "complete".to_owned()),
                    },
                    (Err(_), Some(c)) => (
                        Some(FailureKind::WorkerExited),
                        format!(
                            "its Pod exited with {c} ({}) without a worker.json",
                            u8::try_from(c).map_or("?", exit::name)
                        ),
                    ),
                    (Err(_), None) => (
                        Some(FailureKind::WorkerExited),
                        "no worker.json, and no finished Pod".to_owned(),
                    ),
                };
                WorkerOutcome {
                    replica: i,
                    exit_code: code,
                    kind,
                    outcome,
                }
            })
            .collect();
        CohortFailure {
            schema_version: SCHEMA_VERSION,
            experiment: self.record.experiment.clone(),
            kind: FailureKind::LauncherStopped,
            replica: None,
            message: String::new(),
            exit_code: exit::INCOMPLETE_COHORT,
            workers,
        }
    }

    fn write_failure(&mut self, record: &CohortFailure) {
        let path = self.dir.join(files::COHORT_FAILURE);
        if let Err(e) = coload_cohort_schema::write_json_atomic(&path, record) {
            let _ = writeln!(self.log, "warning: cannot write {}: {e}", path.display());
        }
    }
}

/// Copies a folder of plain files and folders (links are left out); refuses to write over
/// anything.
#[cfg(test)]
mod tests {
    use super::*;

    fn offer(name: &str, alloc: &[(&str, &str)], labels: &[(&str, &str)]) -> NodeOffer {
        NodeOffer {
            name: name.into(),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
            allocatable: alloc
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
        }
    }

    const MIG_PLAN: &str = "[[policy]]\nname = \"mig\"\nmode = \"mig\"\nnode = \"n1\"\n\
                            resource = \"nvidia.com/gpu\"\n[[cohort]]\nworkers = \"train=3\"\n";

    fn check(alloc: &[(&str, &str)], labels: &[(&str, &str)]) -> Result<(), ClusterError> {
        let plan = Plan::parse("t", MIG_PLAN).unwrap();
        let cluster = ClusterArgs {
            backend: Backend::Kubernetes,
            kubectl: None,
            volume_dir: None,
            image: DEFAULT_IMAGE.into(),
            namespace: None,
            job_timeout_s: None,
            nodes: Vec::new(),
            resources: Vec::new(),
        };
        let sites = sites(&plan, &cluster, false, &coload_launch::QuietConsole).unwrap();
        let offers = [("n1".to_owned(), offer("n1", alloc, labels))].into();
        check_offers(&plan, &sites, &offers)
    }

    #[test]
    fn mig_needs_a_mig_resource_and_room_for_the_cohort() {
        // MIG single strategy: the slices are nvidia.com/gpu, and the label says so.
        assert!(
            check(
                &[("nvidia.com/gpu", "7")],
                &[("nvidia.com/mig.strategy", "single")]
            )
            .is_ok()
        );
        let e = check(&[("nvidia.com/gpu", "7")], &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("advertises no MIG resource"), "{e}");
        let e = check(
            &[("nvidia.com/gpu", "2")],
            &[("nvidia.com/mig.strategy", "single")],
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("a cohort of 3 workers, but node `n1` allocates 2"),
            "{e}"
        );
    }

    fn fixture_node(name: &str) -> NodeOffer {
        let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/mig/k8s-nodes")
            .join(format!("{name}.json"));
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        NodeOffer::from_json("n1", &v)
    }

    fn cluster_args() -> ClusterArgs {
        ClusterArgs {
            backend: Backend::Kubernetes,
            kubectl: None,
            volume_dir: None,
            image: DEFAULT_IMAGE.into(),
            namespace: None,
            job_timeout_s: None,
            nodes: Vec::new(),
            resources: Vec::new(),
        }
    }

    /// Issue 25: a `mig` cohort on a node of 8 GPUs partitioned alike could get slices of 8
    /// GPUs; it is refused before anything is created, and runs on a one-GPU node or a
    /// single-GPU layout.
    #[test]
    fn a_mig_cohort_that_could_spread_over_gpus_is_refused() {
        let plan = Plan::parse(
            "t",
            &MIG_PLAN.replace("nvidia.com/gpu", "nvidia.com/mig-1g.18gb"),
        )
        .unwrap();
        let sites = sites(&plan, &cluster_args(), false, &coload_launch::QuietConsole).unwrap();
        let run = |fixture: &str| {
            let offers = [("n1".to_owned(), fixture_node(fixture))].into();
            check_offers(&plan, &sites, &offers)
        };
        let e = run("h200-8gpu-mixed-all-1g.18gb").unwrap_err().to_string();
        assert!(e.contains("nothing was created"), "{e}");
        assert!(e.contains("holds 56 1g.18gb devices"), "{e}");
        assert!(run("h200-1gpu-mixed-7x1g.18gb").is_ok());
        assert!(run("h200-8gpu-mixed-gpu0-7x1g.18gb").is_ok());
    }

    #[test]
    fn a_mig_policy_never_gets_a_guessed_key() {
        let plan_text = MIG_PLAN.replace("resource = \"nvidia.com/gpu\"\n", "");
        let plan = Plan::parse("t", &plan_text).unwrap();
        for emit in [false, true] {
            let e = sites(&plan, &cluster_args(), emit, &coload_launch::QuietConsole)
                .unwrap_err()
                .to_string();
            assert!(e.contains("names no `resource` or `mig_profile`"), "{e}");
        }
        // The policy's profile gives the mixed strategy's key, `+` as `.`.
        let plan = Plan::parse(
            "t",
            &plan_text.replace(
                "mode = \"mig\"\n",
                "mode = \"mig\"\nmig_profile = \"1g.10gb+me\"\n",
            ),
        )
        .unwrap();
        let s = sites(&plan, &cluster_args(), true, &coload_launch::QuietConsole).unwrap();
        assert_eq!(s["mig"].resource.as_str(), "nvidia.com/mig-1g.10gb.me");
    }

    #[test]
    fn policies_on_the_command_line_must_exist_and_be_named_once() {
        let plan = Plan::parse("t", MIG_PLAN).unwrap();
        let e = pairs(&plan, "--node", &["mgi=n2".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("has no policy `mgi`"), "{e}");
        let e = pairs(&plan, "--node", &["mig=a".into(), "mig=b".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("twice"), "{e}");
        assert!(pairs(&plan, "--node", &["mig".into()]).is_err());
    }
}
