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

use coload_cohort_schema::{CohortFailure, FailureKind, Mode, exit, files, read_worker_report};
use coload_launch::{Console, WorkerEnd};
use coload_spec::{CohortSpec, Seconds, Sharing};
use coload_study::{Ended, Job, Launcher, Offer, Placement, Plan, Running, StudyArgs, Target};
use serde::{Deserialize, Serialize};

use crate::collect;
use crate::dra::{DraSite, render_cohort};
use crate::error::ClusterError;
use crate::kubectl::{JobState, Kubectl, NodeOffer, PodState};
use crate::kubernetes::{DEFAULT_IMAGE, Site, fresh_experiment, job_deadline, render_job};
use crate::polyaxon::render_operations;
use crate::resource::ResourceKey;
use crate::stage::RESULTS_DIR;

/// How long the study watches a Job past its `activeDeadlineSeconds` before it gives up on it
/// itself: the Job's own deadline ends it first, and the watch then reads why.
const WATCH_MARGIN: Duration = Duration::from_secs(60);

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

    /// Keep the Jobs (and their Pods) the study has collected, instead of deleting them once
    /// their workers' folders are copied (Kubernetes still deletes them after
    /// --ttl-after-finished-s)
    #[arg(long)]
    pub keep_jobs: bool,

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
            (self.keep_jobs, "--keep-jobs"),
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
        let given = keys.get(&p.name).or(p.resource.as_ref());
        if p.sharing == Sharing::Dra
            && let Some(key) = given
        {
            return Err(err(
                p.line,
                format!(
                    "policy `{}` has sharing = \"dra\" and resource `{key}`: a resource key is \
                     the device plugin's; under DRA the Pods name a claim (MIG: mig_profile = \
                     \"1g.18gb\")",
                    p.name
                ),
            ));
        }
        let text = match (given, emit) {
            // Under DRA the Pods request no resource key; `nvidia.com/gpu` stands for none and
            // fits every mode's check.
            (None, _) if p.sharing == Sharing::Dra => "nvidia.com/gpu".to_owned(),
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
        // A DRA driver publishes its devices in ResourceSlices, not in the node's allocatable:
        // the scheduler finds them when the claim is allocated.
        if p.sharing == Sharing::Dra {
            continue;
        }
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
    let plan = args.load_plan()?;
    let sites = sites(&plan, cluster, args.emit.is_some(), console)?;
    crate::dra::check_plan(&plan, &sites, cluster.backend == Backend::Polyaxon)?;
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
            .filter_map(|p| sites.get(&p.name).map(|s| match p.sharing {
                Sharing::Dra => format!("{} on node {} (dra)", p.name, s.node),
                Sharing::DevicePlugin => format!("{} on node {} ({})", p.name, s.node, s.resource),
            }))
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
            dra: crate::dra::dra_sites(&plan),
            sites,
            volume,
            state: out.join("cluster"),
            timeout: cluster.job_timeout_s,
            keep_jobs: cluster.keep_jobs,
            console,
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
    let jobs = args.jobs(plan, false);
    std::fs::create_dir_all(dir).map_err(|source| ClusterError::Io {
        what: "cannot create",
        path: dir.to_owned(),
        source,
    })?;
    let mut written = 0usize;
    let dra = crate::dra::dra_sites(plan);
    for job in &jobs {
        if let Err(why) = crate::kubernetes::refuse_hog(&job.mix) {
            console.progress(&format!("warning: {} left out: {why}", job.name));
            continue;
        }
        let site = &sites[&job.policy];
        let experiment = fresh_experiment(&job.spec, &job.mix);
        match backend {
            Backend::Kubernetes => {
                let yaml = match dra.get(&job.policy) {
                    Some(d) => render_cohort(&job.spec, site, d, &experiment)?.yaml,
                    None => render_job(&job.spec, site, &experiment)?.yaml,
                };
                write_new(&dir.join(format!("{}.yaml", job.name)), yaml.as_bytes())?;
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
        crate::kubernetes::refuse_hog(&job.mix).map_err(|e| e.to_string())?;
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
    /// A DRA cohort's claim (or template), created before the Job and deleted after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    claim: Option<ClaimRecord>,
}

/// A claim the study created: `kubectl delete <resource> <name>` deletes it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct ClaimRecord {
    /// `resourceclaim` or `resourceclaimtemplate`.
    resource: String,
    name: String,
}

struct ClusterLauncher<'a> {
    kubectl: Kubectl,
    sites: BTreeMap<String, Site>,
    /// The policies whose cohorts run through DRA claims.
    dra: BTreeMap<String, DraSite>,
    volume: PathBuf,
    state: PathBuf,
    timeout: Option<Seconds>,
    keep_jobs: bool,
    console: &'a dyn Console,
}

impl ClusterLauncher<'_> {
    /// The Job an earlier run of the study created for `job`, as it recorded it.
    fn earlier(&self, job: &Job) -> Option<JobRecord> {
        std::fs::read(self.state.join(format!("{}.json", job.name)))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
    }
}

/// How long a failed Job's Pods may take to go after `delete job`, before a retry gives up.
const DELETE_WAIT: Duration = Duration::from_secs(120);

fn other(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

impl Launcher for ClusterLauncher<'_> {
    type Run = ClusterRun;

    fn resumes(&mut self, job: &Job) -> Option<String> {
        let record = self.earlier(job)?;
        match self.kubectl.job(&record.job) {
            Ok(Some(JobState::Running | JobState::Complete)) => Some(format!(
                "its Job {} (experiment {}) is still on the cluster: collected, not run again",
                record.job, record.experiment
            )),
            _ => None,
        }
    }

    #[expect(
        clippy::too_many_lines,
        reason = "one cohort's start in order: an earlier Job collected, retried or its claim \
                  freed, then the claim and the Job created, each step logged"
    )]
    fn start(&mut self, job: &Job, _: &Placement, dir: &Path) -> std::io::Result<ClusterRun> {
        std::fs::create_dir_all(dir)?;
        std::fs::create_dir_all(&self.state)?;
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("cohort.log"))?;
        let record_path = self.state.join(format!("{}.json", job.name));
        let earlier = self.earlier(job);
        let deadline_s = self.timeout.map_or_else(
            || (job_deadline(&job.spec) + WATCH_MARGIN).as_secs_f64(),
            Seconds::get,
        );
        let keep_jobs = self.keep_jobs;
        let run = |record: JobRecord, log| ClusterRun {
            kubectl: self.kubectl.clone(),
            record,
            dir: dir.to_owned(),
            volume: self.volume.clone(),
            spec: job.spec.clone(),
            deadline: later(deadline_s),
            schedule_timeout_s: job.spec.cluster.schedule_timeout_s.get(),
            started: Instant::now(),
            last_poll: None,
            kubectl_errors: 0,
            interrupted: false,
            keep_jobs,
            ended: BTreeMap::new(),
            scheduled: std::collections::BTreeSet::new(),
            failed_at: None,
            log,
        };
        if let Some(record) = &earlier {
            match self.kubectl.job(&record.job).map_err(other)? {
                Some(JobState::Failed(why)) => {
                    // A failed Job stays in the API until it is deleted (or its TTL runs out):
                    // collecting it again would repeat its failure, so a retry removes it and
                    // its Pods first, then creates a fresh Job with a fresh experiment id.
                    writeln!(
                        log,
                        "job {} of experiment {} failed in an earlier run ({why}): deleting it \
                         and its Pods, then creating a fresh one",
                        record.job, record.experiment
                    )?;
                    delete_and_wait(&self.kubectl, &record.job).map_err(other)?;
                }
                Some(_) => {
                    // The study said so on the console (`resumes`).
                    writeln!(
                        log,
                        "job {} of experiment {} was created by an earlier run and is still on \
                         the cluster: collecting it, not creating it again",
                        record.job, record.experiment
                    )?;
                    return Ok(run(record.clone(), log));
                }
                None => {}
            }
        }
        // A claim an earlier run created for a Job that never came to be holds a GPU: free it.
        if let Some(claim) = earlier.and_then(|r| r.claim) {
            self.kubectl
                .delete_and_wait(&claim.resource, &claim.name)
                .map_err(other)?;
            writeln!(
                log,
                "deleted {} {}, left by an earlier run without its Job",
                claim.resource, claim.name
            )?;
        }
        let site = self
            .sites
            .get(&job.policy)
            .ok_or_else(|| other(format!("policy `{}` has no node", job.policy)))?;
        let experiment = fresh_experiment(&job.spec, &job.mix);
        let (rendered, claim) = match self.dra.get(&job.policy) {
            Some(d) => {
                let c = render_cohort(&job.spec, site, d, &experiment).map_err(other)?;
                (c.job, Some(c.claim))
            }
            None => (
                render_job(&job.spec, site, &experiment).map_err(other)?,
                None,
            ),
        };
        for s in &rendered.staged {
            s.copy_to(&self.volume).map_err(other)?;
        }
        let manifest = dir.join("job.yaml");
        crate::study::write_new(&manifest, rendered.yaml.as_bytes()).map_err(other)?;
        let record = JobRecord {
            experiment,
            job: rendered.name.clone(),
            count: rendered.count,
            claim: claim.as_ref().map(|c| ClaimRecord {
                resource: c.kind.resource().to_owned(),
                name: c.name.clone(),
            }),
        };
        coload_cohort_schema::write_json_atomic(&record_path, &record).map_err(other)?;
        if let Some(c) = &claim {
            let path = dir.join("claim.yaml");
            crate::study::write_new(&path, c.yaml.as_bytes()).map_err(other)?;
            self.kubectl.create(&path).map_err(other)?;
            writeln!(log, "created {} {}", c.kind.kind(), c.name)?;
        }
        let warnings = self.kubectl.create(&manifest).map_err(other)?;
        writeln!(
            log,
            "created job {} (experiment {}) on node {} requesting {}",
            record.job, record.experiment, site.node, site.resource
        )?;
        // The server's warnings (a namespace's Pod Security level the Pods would violate, a
        // deprecated field) come with a successful create; they often say why the Pods never
        // appear, so they are kept and shown.
        for w in &warnings {
            writeln!(log, "kubectl create: {w}")?;
            self.console
                .progress(&format!("{}: kubectl create: {w}", job.name));
        }
        Ok(run(record, log))
    }
}

/// `seconds` from now (a day when that cannot be said).
fn later(seconds: f64) -> Instant {
    Duration::try_from_secs_f64(seconds)
        .ok()
        .and_then(|d| Instant::now().checked_add(d))
        .unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400))
}

/// Deletes a Job and waits until it and its Pods are gone (the API server deletes the Pods
/// after the Job, asynchronously), so that a fresh Job never runs beside the old one's Pods.
fn delete_and_wait(kubectl: &Kubectl, job: &str) -> Result<(), ClusterError> {
    kubectl.delete_job(job)?;
    let until = Instant::now() + DELETE_WAIT;
    loop {
        let pods = kubectl.pods(job)?;
        if pods.is_empty() && kubectl.job(job)?.is_none() {
            return Ok(());
        }
        if Instant::now() > until {
            return Err(ClusterError::Kubectl {
                verb: format!("delete job {job}"),
                message: format!(
                    "{} Pod(s) of the deleted Job are still there after {} s; delete them \
                     (kubectl delete pods -l batch.kubernetes.io/job-name={job}) and run again",
                    pods.len(),
                    DELETE_WAIT.as_secs()
                ),
            });
        }
        std::thread::sleep(POLL);
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
    /// `--schedule-timeout-s`: how long a replica's Pod may stay unscheduled or uncreated.
    schedule_timeout_s: f64,
    /// When the study created (or picked up) the Job.
    started: Instant,
    last_poll: Option<Instant>,
    kubectl_errors: u32,
    interrupted: bool,
    keep_jobs: bool,
    /// Each replica's Pod as it was seen when it ended: after FailJob the controller deletes
    /// the other Pods, and their exit codes with them, so they are read while they are there.
    ended: BTreeMap<u32, PodState>,
    /// The replicas whose Pod has been scheduled.
    scheduled: std::collections::BTreeSet<u32>,
    /// When the Job was first seen failed.
    failed_at: Option<Instant>,
    log: std::fs::File,
}

/// How often the Job's state is asked for.
const POLL: Duration = Duration::from_secs(1);
/// How long the other Pods of a failed Job may take to stop (Kubernetes' default grace period
/// and a little more) before what they left is collected.
const PEER_GRACE: Duration = Duration::from_secs(35);
/// kubectl failures in a row before the cohort is given up.
const MAX_KUBECTL_ERRORS: u32 = 10;

impl Running for ClusterRun {
    fn poll(&mut self) -> Option<Ended> {
        let ended = self.poll_job()?;
        Some(self.release_claim(ended))
    }

    fn interrupt(&mut self) {
        self.interrupted = true;
    }
}

impl ClusterRun {
    /// Deletes a DRA cohort's claim once its Job has ended, and waits until it is gone, so that
    /// the next cohort's claim on the node (perhaps another sharing mode) finds the GPU free.
    /// The cohort's outcome stands either way (its results are written); a claim that cannot
    /// be deleted is named in the cohort's log, and the next claim on its GPU waits for it.
    fn release_claim(&mut self, ended: Ended) -> Ended {
        if let Some(claim) = &self.record.claim {
            let line = match self.kubectl.delete_and_wait(&claim.resource, &claim.name) {
                Ok(()) => format!("deleted {} {}", claim.resource, claim.name),
                Err(e) => format!(
                    "warning: cannot delete {} {} ({e}); delete it (kubectl delete {} {}) before \
                     the node runs another cohort",
                    claim.resource, claim.name, claim.resource, claim.name
                ),
            };
            let _ = writeln!(self.log, "{line}");
        }
        ended
    }

    fn poll_job(&mut self) -> Option<Ended> {
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
        let state = self.kubectl.job(&self.record.job);
        let running = matches!(state, Ok(Some(_))) && self.watch_pods();
        match state {
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
                if self.scheduled.len() < self.record.count as usize
                    && self.started.elapsed().as_secs_f64() > self.schedule_timeout_s
                    && let Some(cause) = self.not_started(false)
                {
                    let _ = self.kubectl.delete_job(&self.record.job);
                    return Some(self.fail_not_started(&cause));
                }
                if Instant::now() > self.deadline {
                    let _ = self.kubectl.delete_job(&self.record.job);
                    Some(self.fail("the Job did not finish in time; it was deleted"))
                } else {
                    None
                }
            }
            Ok(Some(JobState::Complete)) => {
                let ended = self.complete();
                self.clean_up();
                Some(ended)
            }
            Ok(Some(JobState::Failed(why))) => {
                // After FailJob the controller stops the other Pods, and their workers write
                // their worker.json as they stop: wait for them (a Pod's grace period) so that
                // what is collected is whole and their exit codes are read.
                let since = *self.failed_at.get_or_insert_with(Instant::now);
                if running && since.elapsed() < PEER_GRACE {
                    return None;
                }
                // Peers that timed out at the barrier waiting for a Pod that never ran are not
                // the cause: the Pod that never ran is.
                let ended = match self.not_started(true) {
                    Some(cause) => self.fail_not_started(&cause),
                    None => self.fail(&format!("the Job failed ({why})")),
                };
                self.clean_up();
                Some(ended)
            }
        }
    }
}

/// Why a replica's Pod never ran: its kind, the replica, and the cluster's words.
#[derive(Debug)]
struct NotStarted {
    kind: FailureKind,
    replica: u32,
    message: String,
}

impl ClusterRun {
    /// Reads the Job's Pods: which are scheduled, and each one's end as soon as it has one;
    /// whether one is still running.
    fn watch_pods(&mut self) -> bool {
        let Ok(pods) = self.kubectl.pods(&self.record.job) else {
            return false;
        };
        let running = pods.iter().any(|p| p.scheduled && p.exit_code.is_none());
        for p in pods {
            if p.scheduled {
                self.scheduled.insert(p.index);
            }
            if p.exit_code.is_some() {
                self.scheduled.insert(p.index);
                self.ended.entry(p.index).or_insert(p);
            }
        }
        running
    }

    /// The first replica whose Pod has not been scheduled, and why, from the Pod's
    /// `PodScheduled` condition (the scheduler's words) or the Job's events (the controller's
    /// `FailedCreate`: an admission refusal, a quota); `None` when every Pod was scheduled.
    /// With `evidence`, only a replica the scheduler or the controller said no to counts: after
    /// FailJob the controller deletes Pods that were merely slow to be placed.
    fn not_started(&mut self, evidence: bool) -> Option<NotStarted> {
        self.watch_pods();
        let pods = self.kubectl.pods(&self.record.job).unwrap_or_default();
        let replica = (0..self.record.count).find(|i| !self.scheduled.contains(i))?;
        let waited = self.started.elapsed().as_secs();
        if let Some(p) = pods.iter().find(|p| p.index == replica) {
            if evidence && p.unschedulable.is_none() {
                return None;
            }
            let why = p
                .unschedulable
                .clone()
                .unwrap_or_else(|| "Pending, and the scheduler has not said why".to_owned());
            return Some(NotStarted {
                kind: FailureKind::PodNotScheduled,
                replica,
                message: format!(
                    "its Pod {} was not scheduled within {waited} s: {why}",
                    p.name
                ),
            });
        }
        let events = self.kubectl.events(&self.record.job).unwrap_or_default();
        let refused = events.iter().rev().find(|e| e.reason == "FailedCreate");
        if evidence && refused.is_none() {
            return None;
        }
        let why = refused.map_or_else(
            || "the Job controller created no Pod for it, and no event says why".to_owned(),
            |e| format!("{}: {}", e.reason, e.message),
        );
        Some(NotStarted {
            kind: FailureKind::PodNotAdmitted,
            replica,
            message: format!("its Pod was not created within {waited} s: {why}"),
        })
    }

    /// `failure.json` for a cohort one of whose Pods never ran.
    fn fail_not_started(&mut self, cause: &NotStarted) -> Ended {
        let _ = self.collect();
        let pods = self.pods_seen();
        let mut record = self.failure_record(&pods);
        record.kind = cause.kind.clone();
        record.replica = Some(cause.replica);
        record.message.clone_from(&cause.message);
        if let Some(w) = record
            .workers
            .iter_mut()
            .find(|w| w.replica == cause.replica)
        {
            w.kind = Some(cause.kind.clone());
            w.outcome.clone_from(&cause.message);
        }
        let _ = writeln!(self.log, "error: {}: {}", record.short(), record.message);
        self.write_failure(&record);
        Ended {
            code: Some(i32::from(exit::INCOMPLETE_COHORT)),
        }
    }

    /// Every Pod seen: those that ended as they were when they ended, the others as they are.
    fn pods_seen(&self) -> Vec<PodState> {
        let mut pods: Vec<PodState> = self.ended.values().cloned().collect();
        for p in self.kubectl.pods(&self.record.job).unwrap_or_default() {
            if !self.ended.contains_key(&p.index) {
                pods.push(p);
            }
        }
        pods
    }

    /// Deletes the collected Job (its Pods go with it), unless asked to keep it.
    fn clean_up(&mut self) {
        if self.keep_jobs {
            return;
        }
        match self.kubectl.delete_job(&self.record.job) {
            Ok(()) => {
                let _ = writeln!(self.log, "deleted job {} (collected)", self.record.job);
            }
            Err(e) => {
                let _ = writeln!(self.log, "warning: cannot delete the collected Job: {e}");
            }
        }
    }

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
        let options = coload_launch::summary_options(&self.spec);
        match coload_analysis::summarize_dirs(&self.worker_dirs(), &options) {
            Ok(summary) => {
                let path = self.dir.join(files::SUMMARY);
                if let Err(e) = coload_cohort_schema::write_json_atomic(&path, &summary) {
                    return self.fail(&format!("cannot write {}: {e}", path.display()));
                }
                let _ = writeln!(self.log, "{}", coload_report::render_table(&summary));
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

    /// Collects what there is and writes `failure.json` naming the replica that failed first
    /// ([`first_failures`]), or the replicas tied for first.
    fn fail(&mut self, why: &str) -> Ended {
        let _ = self.collect();
        let pods = self.pods_seen();
        let mut record = self.failure_record(&pods);
        let failed: Vec<Failed> = record
            .workers
            .iter()
            .filter(|w| w.kind.is_some())
            .map(|w| {
                let report = read_worker_report(
                    &self
                        .dir
                        .join(format!("worker-{}", w.replica))
                        .join(files::WORKER_REPORT),
                );
                let pod = pods.iter().find(|p| p.index == w.replica);
                Failed {
                    replica: w.replica,
                    at_unix_ns: report
                        .ok()
                        .and_then(|r| r.failure)
                        .and_then(|f| f.at_unix_ns),
                    finished_unix_s: pod
                        .and_then(|p| p.finished_at.as_deref())
                        .and_then(rfc3339_unix_s),
                    stopped: w.kind == Some(FailureKind::Terminated)
                        || w.exit_code == Some(i32::from(exit::TERMINATED)),
                }
            })
            .collect();
        let first = first_failures(&failed);
        let outcomes: BTreeMap<u32, (FailureKind, String)> = record
            .workers
            .iter()
            .map(|w| {
                let kind = w.kind.clone().unwrap_or(FailureKind::WorkerExited);
                (w.replica, (kind, w.outcome.clone()))
            })
            .collect();
        let outcome = |r: u32| outcomes.get(&r).cloned();
        match first.as_slice() {
            [] => why.clone_into(&mut record.message),
            [one] => {
                if let Some((kind, words)) = outcome(*one) {
                    record.replica = Some(*one);
                    record.kind = kind;
                    record.message = format!("{words}; {why}");
                }
            }
            tied => {
                let names = tied
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ");
                if let Some((kind, _)) = outcome(tied[0]) {
                    record.kind = kind;
                }
                let each = tied
                    .iter()
                    .filter_map(|r| outcome(*r).map(|(_, w)| format!("replica {r}: {w}")))
                    .collect::<Vec<_>>()
                    .join("; ");
                record.message = format!(
                    "a tie: replicas {names} failed within the same second as far as the cluster \
                     recorded it (a Pod's finish time has whole seconds; not every one of them \
                     wrote its own failure time), so none is named first; {each}; {why}"
                );
            }
        }
        let _ = writeln!(self.log, "error: {}: {}", record.short(), record.message);
        self.write_failure(&record);
        Ended {
            code: Some(i32::from(exit::INCOMPLETE_COHORT)),
        }
    }

    /// The failure record (`coload_launch::failure_record`), saying how a Pod that left no
    /// `worker.json` ended.
    fn failure_record(&self, pods: &[PodState]) -> CohortFailure {
        let ends: Vec<WorkerEnd> = (0..self.record.count)
            .map(|i| WorkerEnd {
                replica: i,
                exit_code: pods.iter().find(|p| p.index == i).and_then(|p| p.exit_code),
            })
            .collect();
        let mut record =
            coload_launch::failure_record(&self.dir, &self.record.experiment, &ends, &|code| {
                match code {
                    Some(c) => format!(
                        "its Pod exited with {c} ({}) without a worker.json",
                        exit::describe(c)
                    ),
                    None => "no worker.json, and no finished Pod".to_owned(),
                }
            });
        // The message is the caller's: why the cluster gave up on the Job.
        record.message = String::new();
        record
    }

    fn write_failure(&mut self, record: &CohortFailure) {
        let path = self.dir.join(files::COHORT_FAILURE);
        if let Err(e) = coload_cohort_schema::write_json_atomic(&path, record) {
            let _ = writeln!(self.log, "warning: cannot write {}: {e}", path.display());
        }
    }
}

/// A replica that failed, and when, as well as it is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Failed {
    replica: u32,
    /// When the worker recorded its failure (its `worker.json`), to the nanosecond.
    at_unix_ns: Option<u64>,
    /// When its container ended (the Pod's `finishedAt`), to the second.
    finished_unix_s: Option<i64>,
    /// It was stopped by SIGTERM (`terminated`, or exit 143 without a `worker.json`), not
    /// failing on its own.
    stopped: bool,
}

/// The replicas that failed first: one, or several tied. Two failures are ordered by the
/// workers' own nanosecond times when both wrote one; otherwise only by the second their
/// containers ended (the API server keeps no finer time), and the same second is a tie, never
/// decided by the replica number, except that a worker that was stopped (`terminated`) comes
/// after one that failed on its own: after the first failure the Job controller stops the other
/// Pods with SIGTERM. A failure with no time at all comes after every timed one.
fn first_failures(failed: &[Failed]) -> Vec<u32> {
    use std::cmp::Ordering;
    let second = |f: &Failed| {
        f.at_unix_ns
            .and_then(|ns| i64::try_from(ns / 1_000_000_000).ok())
            .or(f.finished_unix_s)
    };
    let order = |a: &Failed, b: &Failed| match (a.at_unix_ns, b.at_unix_ns) {
        (Some(x), Some(y)) => x.cmp(&y),
        _ => match (second(a), second(b)) {
            (Some(x), Some(y)) if x != y => x.cmp(&y),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            _ => a.stopped.cmp(&b.stopped),
        },
    };
    // The failures no other failure comes before.
    let mut first: Vec<u32> = failed
        .iter()
        .filter(|a| !failed.iter().any(|b| order(b, a) == Ordering::Less))
        .map(|f| f.replica)
        .collect();
    first.sort_unstable();
    first
}

/// An RFC 3339 time (`2026-12-02T09:14:05Z`) as whole Unix seconds.
fn rfc3339_unix_s(text: &str) -> Option<i64> {
    time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
        .ok()
        .map(time::OffsetDateTime::unix_timestamp)
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
            keep_jobs: false,
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
            keep_jobs: false,
            nodes: Vec::new(),
            resources: Vec::new(),
        }
    }

    /// A `mig` cohort on a node of 8 GPUs partitioned alike could get slices of 8
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

    fn failed(replica: u32, at_unix_ns: Option<u64>, finished_unix_s: Option<i64>) -> Failed {
        Failed {
            replica,
            at_unix_ns,
            finished_unix_s,
            stopped: false,
        }
    }

    #[test]
    fn the_first_failure_is_by_the_workers_times_and_a_second_is_a_tie() {
        // Both wrote their own time: 0.31 s apart within one second, replica 1 first.
        let a = failed(0, Some(1_700_000_000_710_000_000), Some(1_700_000_000));
        let b = failed(1, Some(1_700_000_000_400_000_000), Some(1_700_000_000));
        assert_eq!(first_failures(&[a, b]), [1]);
        // Only the Pods' whole seconds: the same second is a tie, whatever the indexes.
        let a = failed(0, None, Some(1_700_000_000));
        let b = failed(1, None, Some(1_700_000_000));
        assert_eq!(first_failures(&[a, b]), [0, 1]);
        // One time of each kind: seconds decide when they differ, and tie when not.
        let a = failed(0, None, Some(1_700_000_001));
        let b = failed(1, Some(1_700_000_000_900_000_000), Some(1_700_000_001));
        assert_eq!(first_failures(&[a, b]), [1]);
        let b = failed(1, Some(1_700_000_001_100_000_000), Some(1_700_000_001));
        assert_eq!(first_failures(&[a, b]), [0, 1]);
        // In one second, a worker stopped by SIGTERM (what the controller sends the others
        // after FailJob) comes after one that failed on its own.
        let stopped = Failed {
            stopped: true,
            ..failed(0, Some(1_700_000_001_400_000_000), Some(1_700_000_001))
        };
        let own = failed(1, None, Some(1_700_000_001));
        assert_eq!(first_failures(&[stopped, own]), [1]);
        // A failure with no time comes after a timed one; none at all is empty.
        let c = failed(2, None, None);
        assert_eq!(first_failures(&[c, a]), [0]);
        assert!(first_failures(&[]).is_empty());
        assert_eq!(rfc3339_unix_s("1970-01-01T00:00:10Z"), Some(10));
        assert_eq!(rfc3339_unix_s("not a time"), None);
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
