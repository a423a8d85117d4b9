//! Study plans: the TOML format, the built-in plans, and their expansion into an ordered list of
//! cohorts.
//!
//! A plan names *policies* (a sharing mode with the flags that make it what it is, such as an
//! MPS share) and *cohorts* (a workload mix, the policies to run it under, repeats). Expanding
//! it gives one [`Job`] per cohort, policy and repeat, in the order the study runs them:
//! repeats interleaved across shapes (every shape's first repeat, then every shape's second, ...)
//! so that drift over the hours of a study spreads over the shapes instead of piling onto the
//! last one.
//!
//! Every flag a plan sets is checked before anything runs by parsing the command line the study
//! will give `bench-cohort` for each cohort with the same clap parser, so a plan error is found
//! at once, with the line of the plan it came from, rather than an hour into the study.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;

use coload_cohort_schema::{DeviceChoice, Mode, Workload};
use coload_spec::{CohortSpec, Mix, Sharing};
use serde::Deserialize;
use toml::Spanned;

/// The built-in plans: name, what it is, and its TOML text.
pub const BUILTIN: [(&str, &str, &str); 6] = [
    (
        "article",
        "the article's matrix: solos, 1/2/4/7 homogeneous and 1 inference + 6 training per mode",
        include_str!("../plans/article.toml"),
    ),
    (
        "quick",
        "a few minutes: solos, 2 trainers and a mixed pair (small shapes on a CPU node)",
        include_str!("../plans/quick.toml"),
    ),
    (
        "decision",
        "every need in one study: the article's matrix, capacity at 10 and 25 ms, a memory hog, energy",
        include_str!("../plans/decision.toml"),
    ),
    (
        "llm",
        "the LLM pattern: decode alone and together, decode under an MPS share, a serve-llm endpoint's capacity beside trainers, a KV cache above the MPS share",
        include_str!("../plans/llm.toml"),
    ),
    (
        "mig-check",
        "the first run on a MIG node: every MIG path in a few minutes",
        include_str!("../plans/mig-check.toml"),
    ),
    (
        "frontier",
        "which policy and MPS share for a mix: an endpoint's capacity alone and beside the others under every policy (--mix serve=1,train=6 --slo-ms 10)",
        include_str!("../plans/frontier.toml"),
    ),
];

/// Why a plan was refused: the line (1-based) where known, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanError {
    /// The plan's name or path, for the message.
    pub source: String,
    /// 1-based line of the offending value or table, where known.
    pub line: Option<usize>,
    /// What is wrong and what to do.
    pub message: String,
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "plan {}, line {line}: {}", self.source, self.message),
            None => write!(f, "plan {}: {}", self.source, self.message),
        }
    }
}

impl std::error::Error for PlanError {}

/// Flags a plan sets, at the top (`[flags]`, `[cpu]`), on a policy or on a cohort
/// (`flags = { ... }`): keys of [`CohortSpec`] (the `bench-cohort` flag of the same name with
/// `_` for `-`: `window_s` is `--window-s`), each laid over the cohort's spec in turn
/// ([`coload_spec::plan::overlay`]). There is no list of them here: a flag of the spec is a
/// plan key, and a key that is not one is refused at its line.
pub(crate) type FlagTable = BTreeMap<Spanned<String>, Spanned<toml::Value>>;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanFile {
    /// A name for the study (the report's title).
    name: Option<String>,
    /// What the plan is for, one line.
    description: Option<String>,
    /// Refuse to run on a node without a GPU.
    #[serde(default)]
    needs_gpu: bool,
    /// Repeats of every cohort that does not say.
    repeats: Option<Spanned<u32>>,
    /// GPU indices to use as lanes (cohorts on different lanes run at the same time); default:
    /// every GPU the node shows.
    lanes: Option<Spanned<Vec<u32>>>,
    /// Flags every cohort gets.
    #[serde(default)]
    flags: FlagTable,
    /// Flags laid over everything else on a node without a GPU (small shapes).
    #[serde(default)]
    cpu: FlagTable,
    #[serde(default, rename = "policy")]
    policies: Vec<Spanned<PolicyFile>>,
    #[serde(default, rename = "cohort")]
    cohorts: Vec<Spanned<CohortFile>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    name: String,
    mode: Mode,
    /// `mig` / `mig-timeslice`: the MIG profile to place the cohort on (`1g.18gb`); default:
    /// the profile of which the GPU has the most instances.
    mig_profile: Option<Spanned<String>>,
    /// A cluster backend's node for this policy (its `kubernetes.io/hostname`); ignored here.
    node: Option<String>,
    /// A cluster backend's resource key for this policy (`nvidia.com/gpu`, ...); ignored here.
    resource: Option<String>,
    /// How a cluster gives this policy's cohorts their GPUs: `device-plugin` (the default) or
    /// `dra` (a claim per cohort); ignored here.
    #[serde(default)]
    sharing: Sharing,
    #[serde(default)]
    flags: FlagTable,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CohortFile {
    /// The workload mix, as `--workers` takes it: `infer=1,train=6`.
    workers: Spanned<String>,
    /// Policies to run it under (default: every policy of the plan).
    policies: Option<Spanned<Vec<String>>>,
    repeats: Option<Spanned<u32>>,
    /// A solo cohort whose worker is the reference rate of its workload.
    #[serde(default)]
    baseline: bool,
    /// Stop repeating once the shape's ratio against solo is settled: its 95 % interval
    /// narrower than this relative width, or clear of every threshold the verdict uses;
    /// `repeats` is then the most.
    precision: Option<Spanned<f64>>,
    /// The folder name's middle part (default: the mix, `infer1-train6`).
    name: Option<Spanned<String>>,
    #[serde(default)]
    flags: FlagTable,
    /// This cohort's flags on a node without a GPU, laid over the plan's `[cpu]` (a capacity
    /// search's rates and an LLM's sizes, which the plan's `[cpu]` cannot carry: they would
    /// reach cohorts without such a worker).
    #[serde(default)]
    cpu: FlagTable,
}

/// A sharing policy of the plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// Its name (it names folders).
    pub name: String,
    /// Its sharing mode.
    pub mode: Mode,
    /// The MIG profile its cohorts are placed on, where it names one.
    pub mig_profile: Option<String>,
    /// The cluster node prepared for it (`node = "gpu-ts-1"`), for a cluster backend; the
    /// local backend ignores it.
    pub node: Option<String>,
    /// The resource key each worker requests there (`resource = "nvidia.com/gpu"`), for a
    /// cluster backend; the local backend ignores it.
    pub resource: Option<String>,
    /// How a cluster backend gives its cohorts their GPUs (`sharing = "dra"`: a claim per
    /// cohort); the local backend ignores it.
    pub sharing: Sharing,
    /// The plan line of its `[[policy]]`, for messages.
    pub line: usize,
    flags: FlagTable,
}

/// A parsed, checked plan.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Where it came from (a built-in name or a path).
    pub source: String,
    pub name: String,
    pub description: Option<String>,
    pub needs_gpu: bool,
    pub lanes: Option<Vec<u32>>,
    pub policies: Vec<Policy>,
    /// Every cohort to run on a GPU node, in the study's order ([`Plan::jobs`]).
    gpu_jobs: Vec<Job>,
    /// The same on a node without a GPU (the `[cpu]` flags laid on top).
    cpu_jobs: Vec<Job>,
    /// The plan's text, copied into the study folder.
    pub text: String,
    /// What the jobs are expanded from, kept to expand them again with other repeats
    /// ([`Plan::with_precision`]).
    shapes: Vec<Shape>,
    flags: FlagTable,
    cpu: FlagTable,
}

/// A cohort of the plan under one policy, with its repeats.
#[derive(Debug, Clone)]
struct Shape {
    base_name: String,
    policy: usize,
    mix: Mix,
    workers: String,
    repeats: u32,
    baseline: bool,
    precision: Option<f64>,
    flags: FlagTable,
    cpu: FlagTable,
    line: usize,
}

/// One cohort to run: a shape's repeat.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// Folder name under `cohorts/`: `<policy>-<mix>-r<k>`.
    pub name: String,
    /// The policy's name.
    pub policy: String,
    /// The policy's sharing mode.
    pub mode: Mode,
    /// The mix as `--workers` takes it.
    pub workers: String,
    /// Number of workers.
    pub count: u32,
    /// The MIG profile its policy places it on, where it names one.
    pub mig_profile: Option<String>,
    /// The workload of every replica.
    pub mix: Mix,
    /// 1-based repeat.
    pub repeat: u32,
    /// A solo that is its workload's reference.
    pub baseline: bool,
    /// Repeats of its shape stop once its ratio against solo is settled to this relative
    /// interval width (or its verdict cannot change); `None`: every repeat runs.
    pub precision: Option<f64>,
    /// What the cohort is: the plan's flags, then the policy's, then the cohort's, then the
    /// CPU overrides on a CPU node, laid over the defaults of its mix and mode.
    pub spec: CohortSpec,
    /// The plan line of the cohort, for messages.
    pub line: usize,
    /// The one lane it must run on, where it is pinned: a baseline's copy for one card of a
    /// study on several lanes (`block::per_lane`); `None`: any free lane where it fits.
    pub lane: Option<u32>,
}

impl Job {
    /// The lanes of `free` it may take: all of them, or only its pinned lane where that is
    /// among them.
    #[must_use]
    pub fn on_lanes(&self, free: &[u32]) -> Vec<u32> {
        match self.lane {
            Some(lane) => free.iter().copied().filter(|l| *l == lane).collect(),
            None => free.to_vec(),
        }
    }

    /// Its entry in the study's index before anything ran: not run yet.
    pub(crate) fn entry(&self) -> coload_cohort_schema::study::Entry {
        coload_cohort_schema::study::Entry {
            name: self.name.clone(),
            policy: self.policy.clone(),
            mode: self.mode.to_string(),
            workers: self.workers.clone(),
            repeat: self.repeat,
            baseline: self.baseline,
            outcome: coload_cohort_schema::study::Outcome::NotRun,
            reason: None,
            exit_code: None,
            lanes: None,
            duration_s: None,
            in_windows_s: None,
            experiment: None,
            run: None,
            failed_dirs: Vec::new(),
            capacity: None,
            isolation: None,
        }
    }
    /// Whether the job is a capacity search (`find_capacity = true`): one cohort per probe,
    /// `capacity.json` instead of a summary of its own.
    #[must_use]
    pub fn finds_capacity(&self) -> bool {
        self.spec.capacity.find_capacity
    }

    /// Whether the job runs a memory hog: a cohort that measures memory isolation, whose other
    /// workers running out of memory is a result, not a failure of the study.
    #[must_use]
    pub fn holds_a_hog(&self) -> bool {
        self.mix
            .workloads()
            .contains(&coload_cohort_schema::Workload::Hog)
    }
}

/// Where a plan's lines start, found once, so that naming the line of each of its cohorts costs
/// a binary search, not a scan of the text (which made the check quadratic in the plan).
struct Lines(Vec<usize>);

impl Lines {
    fn new(text: &str) -> Lines {
        Lines(
            text.bytes()
                .enumerate()
                .filter(|(_, b)| *b == b'\n')
                .map(|(i, _)| i)
                .collect(),
        )
    }

    /// The 1-based line holding byte `offset`.
    fn of(&self, offset: usize) -> usize {
        self.0.partition_point(|&newline| newline < offset) + 1
    }
}

/// The most repeats of one cohort (the article's protocol takes three).
pub const MAX_REPEATS: u32 = 1000;
/// The most cohorts one plan expands to (every shape under every policy, every repeat).
pub const MAX_COHORTS: usize = 100_000;

impl Plan {
    /// Resolves `plan`: a built-in name, or a path to a TOML file.
    pub fn load(plan: &str) -> Result<Plan, PlanError> {
        if let Some((name, _, text)) = BUILTIN.iter().find(|(n, _, _)| *n == plan) {
            return Plan::parse(name, text);
        }
        let path = std::path::Path::new(plan);
        let toml_ext = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("toml"));
        if !path.exists() && !plan.contains('/') && !toml_ext {
            let names: Vec<&str> = BUILTIN.iter().map(|(n, _, _)| *n).collect();
            return Err(PlanError {
                source: plan.to_owned(),
                line: None,
                message: format!(
                    "no built-in plan `{plan}` and no such file (built-in plans: {}; or give a \
                     path to a TOML plan)",
                    names.join(", ")
                ),
            });
        }
        let text = std::fs::read_to_string(path).map_err(|e| PlanError {
            source: plan.to_owned(),
            line: None,
            message: format!("cannot read it: {e}"),
        })?;
        Plan::parse(plan, &text)
    }

    /// Parses and checks a plan's TOML text; `source` names it in messages.
    #[expect(
        clippy::too_many_lines,
        reason = "the plan is read and checked top to bottom, each error with the span it names"
    )]
    pub fn parse(source: &str, text: &str) -> Result<Plan, PlanError> {
        let lines = Lines::new(text);
        let err = |span: Option<Range<usize>>, message: String| PlanError {
            source: source.to_owned(),
            line: span.map(|s| lines.of(s.start)),
            message,
        };
        let file: PlanFile = toml::from_str(text).map_err(|e| {
            // toml's message carries its own rendering of the line; the first sentence is
            // what is wrong, and the span gives the line.
            err(e.span(), e.message().trim().to_owned())
        })?;
        let default_repeats = match &file.repeats {
            Some(r) if !(1..=MAX_REPEATS).contains(r.get_ref()) => {
                return Err(err(
                    Some(r.span()),
                    format!("`repeats` must be between 1 and {MAX_REPEATS}"),
                ));
            }
            Some(r) => *r.get_ref(),
            None => 1,
        };
        if let Some(lanes) = &file.lanes
            && lanes.get_ref().is_empty()
        {
            return Err(err(
                Some(lanes.span()),
                "`lanes` is empty: list GPU indices (e.g. [0, 1]) or leave it out for every GPU"
                    .into(),
            ));
        }
        let mut policies: Vec<Policy> = Vec::new();
        for p in &file.policies {
            let span = p.span();
            let line = lines.of(span.start);
            let p = p.get_ref();
            if policies.iter().any(|q| q.name == p.name) {
                return Err(err(
                    Some(span),
                    format!("policy `{}` is defined twice", p.name),
                ));
            }
            check_name("policy", &p.name).map_err(|m| err(Some(span.clone()), m))?;
            if let Some(profile) = &p.mig_profile {
                if !matches!(p.mode, Mode::Mig | Mode::MigTimeslice) {
                    return Err(err(
                        Some(profile.span()),
                        format!(
                            "`mig_profile` places MIG cohorts, but policy `{}` has mode {}",
                            p.name, p.mode
                        ),
                    ));
                }
                if coload_device::MigProfile::parse(profile.get_ref()).is_none() {
                    return Err(err(
                        Some(profile.span()),
                        format!(
                            "`mig_profile = \"{}\"` is no MIG profile (e.g. 1g.18gb, 3g.40gb, \
                             1g.10gb+me)",
                            profile.get_ref().escape_debug()
                        ),
                    ));
                }
            }
            policies.push(Policy {
                name: p.name.clone(),
                mode: p.mode,
                mig_profile: p
                    .mig_profile
                    .as_ref()
                    .and_then(|m| coload_device::MigProfile::parse(m.get_ref()))
                    .map(|m| m.gpu_instance_profile()),
                node: p.node.clone(),
                resource: p.resource.clone(),
                sharing: p.sharing,
                line,
                flags: p.flags.clone(),
            });
        }
        if policies.is_empty() {
            return Err(err(
                None,
                "no `[[policy]]`: name at least one (e.g. name = \"timeslice\", mode = \
                 \"timeslice\")"
                    .into(),
            ));
        }
        if file.cohorts.is_empty() {
            return Err(err(
                None,
                "no `[[cohort]]`: list at least one (e.g. workers = \"train=4\")".into(),
            ));
        }
        let mut shapes = Vec::new();
        for c in &file.cohorts {
            let line = lines.of(c.span().start);
            let c = c.get_ref();
            let mix = Mix::parse(c.workers.get_ref()).map_err(|m| {
                err(
                    Some(c.workers.span()),
                    format!(
                        "field `workers`: {}",
                        m.to_string().replace("--workers", "`workers`")
                    ),
                )
            })?;
            let repeats = match &c.repeats {
                Some(r) if !(1..=MAX_REPEATS).contains(r.get_ref()) => {
                    return Err(err(
                        Some(r.span()),
                        format!("`repeats` must be between 1 and {MAX_REPEATS}"),
                    ));
                }
                Some(r) => *r.get_ref(),
                None => default_repeats,
            };
            let chosen: Vec<usize> = match &c.policies {
                None => (0..policies.len()).collect(),
                Some(names) => {
                    if names.get_ref().is_empty() {
                        return Err(err(
                            Some(names.span()),
                            "field `policies` is empty: name at least one, or leave it out for \
                             every policy"
                                .into(),
                        ));
                    }
                    let mut idx = Vec::new();
                    for n in names.get_ref() {
                        let i = policies.iter().position(|p| &p.name == n).ok_or_else(|| {
                            let known: Vec<&str> =
                                policies.iter().map(|p| p.name.as_str()).collect();
                            err(
                                Some(names.span()),
                                format!(
                                    "field `policies` names `{n}`, which is not a policy of \
                                     this plan ({})",
                                    known.join(", ")
                                ),
                            )
                        })?;
                        idx.push(i);
                    }
                    idx
                }
            };
            if c.baseline && (mix.len() != 1 || chosen.len() != 1) {
                return Err(err(
                    Some(c.workers.span()),
                    format!(
                        "field `baseline`: a baseline is one worker under one policy; this \
                         cohort has {} worker(s) under {} policies",
                        mix.len(),
                        chosen.len()
                    ),
                ));
            }
            let precision = match &c.precision {
                None => None,
                Some(p) => {
                    let v = *p.get_ref();
                    let why = if !(v.is_finite() && v > 0.0 && v < 1.0) {
                        Some(format!(
                            "field `precision` is {v}: a relative interval width between 0 and 1 \
                             (0.05: the 95 % interval within 5 % of the ratio)"
                        ))
                    } else if c.baseline {
                        Some(
                            "field `precision`: a baseline is what ratios divide by; its repeats \
                             bracket the study and all run"
                                .to_owned(),
                        )
                    } else if repeats < 3 {
                        Some(format!(
                            "field `precision` with `repeats = {repeats}`: repeats are the most a \
                             shape may run and two always run, so precision needs at least 3"
                        ))
                    } else {
                        None
                    };
                    if let Some(why) = why {
                        return Err(err(Some(p.span()), why));
                    }
                    Some(v)
                }
            };
            let base_name = match &c.name {
                Some(name) => {
                    check_name("cohort", name.get_ref()).map_err(|m| err(Some(name.span()), m))?;
                    name.get_ref().clone()
                }
                None => mix.label(),
            };
            for i in chosen {
                shapes.push(Shape {
                    base_name: base_name.clone(),
                    policy: i,
                    mix: mix.clone(),
                    workers: c.workers.get_ref().clone(),
                    repeats,
                    baseline: c.baseline,
                    precision,
                    flags: c.flags.clone(),
                    cpu: c.cpu.clone(),
                    line,
                });
            }
        }
        let plan = Plan {
            source: source.to_owned(),
            name: file.name.unwrap_or_else(|| source.to_owned()),
            description: file.description,
            needs_gpu: file.needs_gpu,
            lanes: file.lanes.map(Spanned::into_inner),
            policies,
            gpu_jobs: Vec::new(),
            cpu_jobs: Vec::new(),
            text: text.to_owned(),
            shapes,
            flags: file.flags,
            cpu: file.cpu,
        };
        plan.expanded(&err)
    }

    /// The plan with its jobs expanded from its shapes, and checked whole.
    fn expanded(
        mut self,
        err: &dyn Fn(Option<Range<usize>>, String) -> PlanError,
    ) -> Result<Plan, PlanError> {
        let cohorts: u64 = self.shapes.iter().map(|s| u64::from(s.repeats)).sum();
        if cohorts > MAX_COHORTS as u64 {
            return Err(err(
                None,
                format!(
                    "the plan expands to {cohorts} cohorts (every cohort under each of its \
                     policies, every repeat), more than the {MAX_COHORTS} one study runs; split \
                     it into several plans"
                ),
            ));
        }
        let layers = Layers {
            plan: &self.flags,
            cpu: &self.cpu,
            policies: &self.policies,
        };
        self.gpu_jobs = expand(&self.shapes, &layers, false).map_err(|(l, m)| err(Some(l), m))?;
        self.cpu_jobs = expand(&self.shapes, &layers, true).map_err(|(l, m)| err(Some(l), m))?;
        self.check(err)?;
        Ok(self)
    }

    /// The plan with a precision given on the command line (`--precision`, `--max-repeats`):
    /// every shape whose repeats can settle (not a baseline, a capacity search or a memory hog:
    /// the comparison of repeats divides a summary's rates by the baseline's) stops repeating
    /// once settled to `precision`, running at most `max_repeats` times (default: the plan's
    /// repeats of the shape). What the plan said of precision is replaced.
    pub fn with_precision(
        &self,
        precision: f64,
        max_repeats: Option<u32>,
    ) -> Result<Plan, PlanError> {
        let err = |line: Option<usize>, message: String| PlanError {
            source: self.source.clone(),
            line,
            message,
        };
        if !(precision.is_finite() && precision > 0.0 && precision < 1.0) {
            return Err(err(
                None,
                format!(
                    "--precision {precision}: a relative interval width between 0 and 1 (0.02: \
                     the 95 % interval within 2 % of the ratio)"
                ),
            ));
        }
        if let Some(n) = max_repeats
            && !(3..=MAX_REPEATS).contains(&n)
        {
            return Err(err(
                None,
                format!(
                    "--max-repeats {n}: between 3 and {MAX_REPEATS} (two repeats always run, \
                     so a precision needs room for a third)"
                ),
            ));
        }
        let mut plan = self.clone();
        let mut settles = 0;
        for shape in &mut plan.shapes {
            let job = self
                .gpu_jobs
                .iter()
                .find(|j| j.line == shape.line && j.policy == self.policies[shape.policy].name);
            let repeatable =
                !shape.baseline && job.is_some_and(|j| !j.finds_capacity() && !j.holds_a_hog());
            if !repeatable {
                continue;
            }
            let repeats = max_repeats.unwrap_or(shape.repeats);
            if repeats < 3 {
                return Err(err(
                    Some(shape.line),
                    format!(
                        "--precision: cohort `{}` under `{}` runs {} time(s) in the plan, and a \
                         precision stops repeats after the second: give --max-repeats 3 or more",
                        shape.workers, self.policies[shape.policy].name, shape.repeats
                    ),
                ));
            }
            shape.repeats = repeats;
            shape.precision = Some(precision);
            settles += 1;
        }
        if settles == 0 {
            return Err(err(
                None,
                "--precision: no cohort of this plan repeats to a precision (its cohorts are \
                 baselines, capacity searches or memory hogs, whose repeats are not compared \
                 against solo)"
                    .to_owned(),
            ));
        }
        let lines = Lines::new(&plan.text);
        let span_err = |span: Option<Range<usize>>, message: String| PlanError {
            source: self.source.clone(),
            line: span.map(|s| lines.of(s.start)),
            message,
        };
        plan.expanded(&span_err)
    }

    /// Checks what only the whole plan shows: unique folder names, one baseline per workload,
    /// that every cohort's spec is valid where it would run (on a GPU node and on a CPU node),
    /// and that every cohort runs the model and execution of its workloads' baselines (a study
    /// compares against one baseline per workload, so a ratio to another model's solo would
    /// compare models, not policies).
    fn check(
        &self,
        err: &dyn Fn(Option<Range<usize>>, String) -> PlanError,
    ) -> Result<(), PlanError> {
        let line_err = |line: usize, message: String| PlanError {
            line: Some(line),
            ..err(None, message)
        };
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        let mut baselines: BTreeMap<String, usize> = BTreeMap::new();
        // Per workload: what its baseline runs (and the baseline's line); per cohort and
        // workload: what it runs.
        let mut baseline_runs: BTreeMap<Workload, (String, usize)> = BTreeMap::new();
        let mut cohort_runs: Vec<(usize, String, Workload, String)> = Vec::new();
        for cpu in [false, true] {
            for job in self.jobs(cpu) {
                // What a CPU node does not offer is listed as such there, never run: its flags
                // need no check for the CPU (a plan that needs a GPU is refused on one whole).
                if cpu
                    && (self.needs_gpu
                        || !matches!(job.mode, Mode::Timeslice | Mode::Exclusive)
                        || job.workers.split(',').any(|w| w.trim().starts_with("hog=")))
                {
                    continue;
                }
                if !cpu {
                    if job.name.len() > MAX_NAME_BYTES {
                        return Err(line_err(
                            job.line,
                            format!(
                                "cohort folder name `{}` is {} bytes, more than a folder name \
                                 may be ({MAX_NAME_BYTES}); give the cohort or its policy a \
                                 shorter `name`",
                                job.name,
                                job.name.len()
                            ),
                        ));
                    }
                    if let Some(first) = seen.insert(job.name.clone(), job.line) {
                        return Err(line_err(
                            job.line,
                            format!(
                                "cohort `{}` would be run twice (also from line {first}); give \
                                 one of them a `name`",
                                job.name
                            ),
                        ));
                    }
                    if job.baseline
                        && job.repeat == 1
                        && let Some(first) = baselines.insert(job.workers.clone(), job.line)
                    {
                        return Err(line_err(
                            job.line,
                            format!(
                                "a second `{}` baseline (the first is on line {first}): one \
                                 baseline per workload",
                                job.workers
                            ),
                        ));
                    }
                }
                // The launcher's own checks too (devices per worker): exclusive across several
                // GPUs gets one GPU per worker from the study when it places the cohort
                // (Node::place), so it is checked with such a list.
                let n = job.count as usize;
                let launch = coload_launch::LaunchArgs {
                    spec: job.spec.clone(),
                    out: "/study/cohort".into(),
                    repeat: 1,
                    visible_devices: if matches!(job.mode, Mode::Exclusive | Mode::Mig) && n > 1
                        || matches!(job.mode, Mode::Mig | Mode::MigTimeslice)
                    {
                        (0..n).map(|i| i.to_string()).collect()
                    } else {
                        Vec::new()
                    },
                    worker_bin: None,
                    quiet: true,
                    cpu_threads: None,
                };
                launch.validate().map_err(|m| {
                    line_err(
                        job.line,
                        format!(
                            "cohort `{}`{}: {m}",
                            job.name,
                            if cpu { " on a CPU node" } else { "" }
                        ),
                    )
                })?;
                if !cpu {
                    for &w in job.mix.workloads() {
                        let runs = what_it_runs(&job.spec.flags, w);
                        if job.baseline {
                            baseline_runs.entry(w).or_insert((runs, job.line));
                        } else {
                            cohort_runs.push((job.line, job.name.clone(), w, runs));
                        }
                    }
                }
            }
        }
        one_model_per_workload(&baseline_runs, cohort_runs).map_err(|(l, m)| line_err(l, m))
    }

    /// Every cohort to run, in the study's order: the shapes' first repeats in plan order,
    /// then their second repeats, and so on. `cpu`: with the plan's `[cpu]` flags on top and
    /// `--device cpu`.
    #[must_use]
    pub fn jobs(&self, cpu: bool) -> Vec<Job> {
        if cpu {
            self.cpu_jobs.clone()
        } else {
            self.gpu_jobs.clone()
        }
    }
}

/// The longest folder name most file systems take (ext4, XFS, NFS: 255 bytes).
const MAX_NAME_BYTES: usize = 255;

/// A plan's cohort or policy name names folders: the rules of an experiment id (letters,
/// digits, `.`, `_`, `-`; no `..`), so no name reaches outside the study's folder or makes
/// nested ones.
fn check_name(what: &str, name: &str) -> Result<(), String> {
    coload_barrier::validate_experiment_id(name).map_err(|e| {
        format!(
            "{what} name `{}`: {e} (it names folders)",
            name.escape_debug()
        )
    })
}

/// The flag tables a job's spec is laid from.
struct Layers<'a> {
    plan: &'a FlagTable,
    cpu: &'a FlagTable,
    policies: &'a [Policy],
}

/// Every shape's repeats as jobs, interleaved: every shape's first repeat in plan order, then
/// every shape's second, and so on. A baseline's repeats bracket the rest instead: its first
/// before the first round, its last after the last round, the others spread evenly between
/// (`baseline_slots`), so each ratio's baseline runs both before and after the cohorts it
/// normalises and a card's drift over the study shows in the baseline's own spread. A flag that
/// does not fit the spec is the error, with the span of its key.
fn expand(
    shapes: &[Shape],
    layers: &Layers<'_>,
    cpu: bool,
) -> Result<Vec<Job>, (Range<usize>, String)> {
    let rounds = shapes
        .iter()
        .filter(|s| !s.baseline)
        .map(|s| s.repeats)
        .max()
        .unwrap_or(0);
    // A shape repeated to a precision can first stop before its third round, and only against
    // two runs of its baseline: one run alone borrows the cohorts' spread with one degree of
    // freedom, too wide an interval to settle anything. So a plan with a precision runs its
    // baselines' second run after the second round at the latest.
    let settles = shapes.iter().any(|s| !s.baseline && s.precision.is_some());
    // (slot, repeat, shape): slot k runs before round k + 1 (slot `rounds`: after the last).
    let mut order: Vec<(u32, u32, usize)> = Vec::new();
    for (i, s) in shapes.iter().enumerate() {
        if s.baseline {
            let mut slots = baseline_slots(s.repeats, rounds);
            if settles && slots.len() >= 3 {
                slots[1] = slots[1].min(2);
            }
            for (k, slot) in slots.into_iter().enumerate() {
                order.push((2 * slot, k as u32 + 1, i));
            }
        } else {
            order.extend((1..=s.repeats).map(|k| (2 * k - 1, k, i)));
        }
    }
    // Stable: within a slot or round, plan order.
    order.sort_by_key(|(slot, _, _)| *slot);
    let mut out = Vec::new();
    for (_, k, i) in order {
        let s = &shapes[i];
        let policy = &layers.policies[s.policy];
        let mut spec = CohortSpec::new(&s.mix, policy.mode);
        let mut tables = vec![layers.plan, &policy.flags, &s.flags];
        if cpu {
            tables.push(layers.cpu);
            tables.push(&s.cpu);
            spec.flags.device = DeviceChoice::Cpu;
        }
        for table in tables {
            for (key, value) in table {
                coload_spec::plan::overlay(&mut spec, key.get_ref(), value.get_ref())
                    .map_err(|e| (key.span(), format!("flag {e}")))?;
            }
        }
        out.push(Job {
            name: format!("{}-{}-r{k}", policy.name, s.base_name),
            policy: policy.name.clone(),
            mode: policy.mode,
            workers: s.workers.clone(),
            count: s.mix.len() as u32,
            mig_profile: policy.mig_profile.clone(),
            mix: s.mix.clone(),
            repeat: k,
            baseline: s.baseline,
            precision: s.precision,
            spec,
            line: s.line,
            lane: None,
        });
    }
    Ok(out)
}

/// Where a baseline's `repeats` runs go among `rounds` rounds of the other cohorts: slot `k`
/// runs before round `k + 1`, slot `rounds` after the last. The first run opens the study, the
/// last (with two or more) closes it, the rest are spread evenly between, rounded to the nearer
/// slot.
pub(crate) fn baseline_slots(repeats: u32, rounds: u32) -> Vec<u32> {
    match repeats {
        0 => Vec::new(),
        1 => vec![0],
        n => (0..n)
            .map(|j| {
                let (num, den) = (u64::from(j) * u64::from(rounds), u64::from(n - 1));
                ((num + den / 2) / den) as u32
            })
            .collect(),
    }
}

/// The `bench-cohort` command line (after the program name) that runs `job` into `out`: the
/// spec rendered by its own renderer (`--name=value`, so that a negative value is not read as a
/// flag of its own), the output folder, `--quiet`. The study adds `--worker-bin` and, where the
/// placement needs it, `--visible-devices`.
pub(crate) fn cohort_argv(
    job: &Job,
    out: &std::path::Path,
) -> Result<Vec<String>, coload_spec::RenderError> {
    let mut argv = vec![
        "bench-cohort".to_owned(),
        "run".to_owned(),
        "--out".to_owned(),
        out.display().to_string(),
        "--quiet".to_owned(),
    ];
    argv.extend(coload_spec::to_argv_joined(&job.spec)?);
    Ok(argv)
}

/// Every cohort runs what its workloads' baselines run; else the first that does not, as its line
/// and the message.
fn one_model_per_workload(
    baselines: &BTreeMap<Workload, (String, usize)>,
    cohorts: Vec<(usize, String, Workload, String)>,
) -> Result<(), (usize, String)> {
    for (line, name, workload, runs) in cohorts {
        if let Some((base, base_line)) = baselines.get(&workload)
            && *base != runs
        {
            return Err((
                line,
                format!(
                    "cohort `{name}` runs {runs} for its {workload} workers, but the {workload} \
                     baseline (line {base_line}) runs {base}: a study compares every cohort \
                     against one baseline per workload, so it holds one model and execution; put \
                     this cohort in a study of its own (docs/study.md)"
                ),
            ));
        }
    }
    Ok(())
}

/// What a worker of `workload` runs under `flags`, in words: `model resnet50, eager` or
/// `model file m.pt, cuda-graph`.
fn what_it_runs(flags: &coload_spec::WorkerFlags, workload: Workload) -> String {
    let model = flags.model_file.as_ref().map_or_else(
        || {
            let declared = flags.model_declaration();
            format!(
                "model {}",
                declared.model_for(workload).unwrap_or("(none declared)")
            )
        },
        |path| format!("model file {}", path.display()),
    );
    let execution = flags
        .execution_for(workload)
        .map_or_else(|_| flags.execution.to_string(), |e| e.to_string());
    format!("{model}, {execution}")
}

#[cfg(test)]
mod tests {
    use coload_cohort_schema::{Execution, ExecutionDeclaration};
    use coload_spec::Seconds;

    use super::*;

    const GOOD: &str = r#"
name = "t"
repeats = 1
[flags]
window_s = 20
[cpu]
window_s = 2
image_size = 32

[[policy]]
name = "exclusive"
mode = "exclusive"
[[policy]]
name = "timeslice"
mode = "timeslice"
[[policy]]
name = "mps"
mode = "mps"
flags = { window_s = 30, mps_unlimited = true }

[[cohort]]
workers = "train=1"
policies = ["exclusive"]
baseline = true

[[cohort]]
workers = "train=4"
policies = ["timeslice", "mps"]

[[cohort]]
workers = "train=7"
policies = ["timeslice", "mps"]
repeats = 3

[[cohort]]
workers = "infer=1,train=6"
repeats = 2
flags = { window_s = 40 }
"#;

    fn names(jobs: &[Job]) -> Vec<&str> {
        jobs.iter().map(|j| j.name.as_str()).collect()
    }

    #[test]
    fn a_good_plan_expands_with_repeats_interleaved_across_shapes() {
        let plan = Plan::parse("good.toml", GOOD).unwrap();
        let jobs = plan.jobs(false);
        assert_eq!(
            names(&jobs),
            [
                "exclusive-train1-r1",
                "timeslice-train4-r1",
                "mps-train4-r1",
                "timeslice-train7-r1",
                "mps-train7-r1",
                "exclusive-infer1-train6-r1",
                "timeslice-infer1-train6-r1",
                "mps-infer1-train6-r1",
                // Round 2: only the shapes with a second repeat, in plan order.
                "timeslice-train7-r2",
                "mps-train7-r2",
                "exclusive-infer1-train6-r2",
                "timeslice-infer1-train6-r2",
                "mps-infer1-train6-r2",
                "timeslice-train7-r3",
                "mps-train7-r3",
            ]
        );
        // No two runs of one shape are next to each other.
        for w in jobs.windows(2) {
            assert_ne!(
                (w[0].policy.as_str(), w[0].workers.as_str()),
                (w[1].policy.as_str(), w[1].workers.as_str())
            );
        }
        let j = |n: &str| jobs.iter().find(|j| j.name == n).unwrap().clone();
        assert!(j("exclusive-train1-r1").baseline);
        assert_eq!(j("mps-train7-r2").count, 7);
        // Flags: plan, then policy, then cohort.
        assert_eq!(
            j("timeslice-train4-r1").spec.flags.window_s,
            Seconds::whole(20)
        );
        assert_eq!(j("mps-train4-r1").spec.flags.window_s, Seconds::whole(30));
        assert_eq!(
            j("mps-infer1-train6-r1").spec.flags.window_s,
            Seconds::whole(40)
        );
        // On a CPU node the [cpu] flags win.
        let cpu = plan.jobs(true);
        assert_eq!(cpu[6].spec.flags.window_s, Seconds::whole(2));
        assert_eq!(cpu[6].spec.flags.image_size, 32);
    }

    #[test]
    fn the_built_in_plans_parse() {
        for (name, _, text) in BUILTIN {
            let plan = Plan::parse(name, text).unwrap_or_else(|e| panic!("{e}"));
            assert!(!plan.jobs(false).is_empty(), "{name}");
        }
        let article = Plan::load("article").unwrap();
        let jobs = article.jobs(false);
        // The mixed and 7-trainer shapes run three times under every sharing policy.
        for policy in ["timeslice", "mps-plugin", "mps-unlimited"] {
            for mix in ["train7", "infer1-train6"] {
                assert!(
                    jobs.iter().any(|j| j.name == format!("{policy}-{mix}-r3")),
                    "{policy}-{mix}-r3 missing"
                );
            }
        }
        // Two baselines, three runs each: the first, the middle and the last of the study.
        assert_eq!(jobs.iter().filter(|j| j.baseline).count(), 6);
        assert!(jobs.first().is_some_and(|j| j.baseline));
        assert!(jobs.last().is_some_and(|j| j.baseline));
        assert!(
            jobs.iter()
                .all(|j| j.spec.flags.window_s == Seconds::whole(45))
        );
    }

    /// The LLM plan: decode alone and together per policy, a serve-llm capacity search at
    /// TTFT and TPOT objectives alone (graph-captured and eager) and beside six trainers, and
    /// the KV cache above the plugin's MPS share; every cohort's spec passes the spec's checks.
    #[test]
    fn the_llm_plan_covers_decode_serving_and_the_cache_per_policy() {
        let jobs = Plan::load("llm").unwrap().jobs(false);
        // The decode baseline twice: before and after the rest.
        assert_eq!(jobs.len(), 20);
        for j in &jobs {
            j.spec
                .validate()
                .unwrap_or_else(|e| panic!("{}: {e}", j.name));
        }
        for policy in ["timeslice", "mps-plugin", "mps-unlimited"] {
            for name in [
                "decode1-r1",
                "decode4-r1",
                "decode7-r1",
                "serve-llm1-train6-capacity-r1",
            ] {
                assert!(
                    jobs.iter().any(|j| j.name == format!("{policy}-{name}")),
                    "{policy}-{name} missing"
                );
            }
        }
        let search = jobs
            .iter()
            .find(|j| j.name == "mps-plugin-serve-llm1-train6-capacity-r1")
            .unwrap();
        assert!(search.finds_capacity());
        assert_eq!(
            (search.spec.serve.ttft_slo_ms, search.spec.serve.tpot_slo_ms),
            (Some(500.0), Some(50.0))
        );
        let cache = jobs
            .iter()
            .find(|j| j.name == "mps-plugin-serve-llm1-train6-kv640-r1")
            .unwrap();
        assert_eq!(cache.spec.serve.max_batch, 640);
        assert!(!cache.finds_capacity());
        // Serving engines capture their decode: every serve-llm cohort replays graphs, but one
        // search alone runs eager beside the graph one, so the report has both.
        let serving: Vec<&Job> = jobs
            .iter()
            .filter(|j| j.name.contains("serve-llm"))
            .collect();
        assert_eq!(serving.len(), 9);
        for j in &serving {
            let eager = j.name == "exclusive-serve-llm1-capacity-eager-r1";
            let expected = if eager {
                Execution::Eager
            } else {
                Execution::CudaGraph
            };
            assert_eq!(
                j.spec.flags.execution_for(Workload::ServeLlm).unwrap(),
                expected,
                "{}",
                j.name
            );
            // Trainers beside the endpoint run as PyTorch users run them: eager.
            if j.workers.contains("train") {
                assert_eq!(
                    j.spec.flags.execution_for(Workload::Train).unwrap(),
                    Execution::Eager,
                    "{}",
                    j.name
                );
            }
        }
        let eager = jobs
            .iter()
            .find(|j| j.name == "exclusive-serve-llm1-capacity-eager-r1")
            .unwrap();
        let graph = jobs
            .iter()
            .find(|j| j.name == "exclusive-serve-llm1-capacity-r1")
            .unwrap();
        assert!(eager.finds_capacity() && graph.finds_capacity());
        // The same search but for the execution.
        let mut same = eager.spec.clone();
        same.flags.execution = ExecutionDeclaration::One(Execution::CudaGraph);
        assert_eq!(same, graph.spec);
        let decode = jobs
            .iter()
            .find(|j| j.name == "exclusive-decode1-r1")
            .unwrap();
        assert!(decode.baseline);
        assert_eq!(
            decode.spec.flags.execution,
            ExecutionDeclaration::One(Execution::CudaGraph)
        );
    }

    /// Below the first searches' floor of 16/s, the LLM plan has a second search where
    /// time-slicing and unlimited MPS failed it, whose probes are long enough at its own floor
    /// for LoadGen's early-stopping test at p99 (459 requests without a miss).
    #[test]
    fn the_llm_plan_searches_below_the_floor_with_windows_long_enough() {
        let jobs = Plan::load("llm").unwrap().jobs(false);
        for policy in ["timeslice", "mps-unlimited"] {
            let name = format!("{policy}-serve-llm1-train6-capacity-64s-r1");
            let low = jobs
                .iter()
                .find(|j| j.name == name)
                .expect("the search below the floor");
            assert!(low.finds_capacity());
            let c = &low.spec.capacity;
            let first = jobs
                .iter()
                .find(|j| j.name == format!("{policy}-serve-llm1-train6-capacity-r1"))
                .unwrap();
            assert!(
                c.rate_max <= first.spec.capacity.rate_min,
                "{name} searches below the first search's floor"
            );
            assert!(
                c.rate_min * low.spec.flags.window_s.get() >= 459.0,
                "{name}: {} s at {}/s",
                low.spec.flags.window_s.get(),
                c.rate_min
            );
        }
    }

    #[test]
    fn the_decision_plan_covers_every_need_per_policy() {
        let jobs = Plan::load("decision").unwrap().jobs(false);
        assert_eq!(jobs.iter().filter(|j| j.baseline).count(), 6);
        // The article's 45 s windows, but 20 s for a capacity search's probes.
        for j in &jobs {
            let window = if j.finds_capacity() { 20 } else { 45 };
            assert_eq!(j.spec.flags.window_s, Seconds::whole(window), "{}", j.name);
        }
        for policy in ["timeslice", "mps-plugin", "mps-unlimited", "mig"] {
            for name in [
                "train7-r3",
                "infer1-train6-r3",
                "hog1-train6-r1",
                "serve1-train6-capacity-10ms-r1",
                "serve1-train6-capacity-25ms-r1",
            ] {
                assert!(
                    jobs.iter().any(|j| j.name == format!("{policy}-{name}")),
                    "{policy}-{name} missing"
                );
            }
        }
        assert!(jobs.iter().any(|j| j.name == "exclusive-train2-r1"));
        assert!(
            jobs.iter()
                .any(|j| j.name == "exclusive-serve1-capacity-25ms-r1")
        );
    }

    fn refused(text: &str) -> PlanError {
        Plan::parse("bad.toml", text).unwrap_err()
    }

    const HEAD: &str = "[[policy]]\nname = \"timeslice\"\nmode = \"timeslice\"\n";

    #[test]
    fn baseline_repeats_bracket_the_cohorts_they_normalise() {
        assert_eq!(baseline_slots(1, 3), [0]);
        assert_eq!(baseline_slots(2, 3), [0, 3]);
        assert_eq!(baseline_slots(3, 3), [0, 2, 3]);
        assert_eq!(baseline_slots(3, 4), [0, 2, 4]);
        assert_eq!(baseline_slots(3, 1), [0, 1, 1]);
        let plan = Plan::parse(
            "test",
            r#"
name = "t"
description = "d"
[[policy]]
name = "exclusive"
mode = "exclusive"
[[policy]]
name = "timeslice"
mode = "timeslice"
[[cohort]]
workers = "train=1"
policies = ["exclusive"]
baseline = true
repeats = 3
[[cohort]]
workers = "train=2"
policies = ["timeslice"]
repeats = 2
[[cohort]]
workers = "train=4"
policies = ["timeslice"]
repeats = 2
"#,
        )
        .unwrap();
        let jobs = plan.jobs(false);
        assert_eq!(
            names(&jobs),
            [
                "exclusive-train1-r1",
                "timeslice-train2-r1",
                "timeslice-train4-r1",
                "exclusive-train1-r2",
                "timeslice-train2-r2",
                "timeslice-train4-r2",
                "exclusive-train1-r3",
            ]
        );
    }

    #[test]
    fn bad_plans_are_refused_naming_the_line_and_field() {
        // A misspelt field: toml names it and the line.
        let e = refused(&format!(
            "{HEAD}\n[[cohort]]\nworkers = \"train=2\"\nrepeat = 3\n"
        ));
        assert_eq!(e.line, Some(7), "{e}");
        assert!(e.message.contains("unknown field `repeat`"), "{e}");
        // A bad value for a typed field.
        let e = refused(
            "[[policy]]\nname = \"x\"\nmode = \"slices\"\n[[cohort]]\nworkers = \"train=1\"\n",
        );
        assert_eq!(e.line, Some(3), "{e}");
        assert!(e.message.contains("slices"), "{e}");
        // A bad mix: the workers field is named.
        let e = refused(&format!("{HEAD}[[cohort]]\nworkers = \"train=0\"\n"));
        assert_eq!(e.line, Some(5), "{e}");
        assert!(e.message.contains("field `workers`"), "{e}");
        assert!(e.message.contains("0 train workers"), "{e}");
        // An unknown policy.
        let e = refused(&format!(
            "{HEAD}[[cohort]]\nworkers = \"train=2\"\npolicies = [\"mig\"]\n"
        ));
        assert_eq!(e.line, Some(6), "{e}");
        assert!(e.message.contains("names `mig`"), "{e}");
        // A value the spec refuses: the line of its key, and the key.
        let e = refused(&format!(
            "{HEAD}\n[[cohort]]\nworkers = \"train=2\"\nflags = {{ window_s = -1 }}\n"
        ));
        assert_eq!(e.line, Some(7), "{e}");
        assert!(
            e.message
                .contains("flag `window_s`: -1 is not a positive number of seconds"),
            "{e}"
        );
        // A key that is no flag of the spec.
        let e = refused(&format!(
            "{HEAD}[[cohort]]\nworkers = \"train=2\"\nflags = {{ windows = 3 }}\n"
        ));
        assert_eq!(e.line, Some(6), "{e}");
        assert!(e.message.contains("`windows` is not a flag"), "{e}");
        // Serve with CUDA graphs: refused at the plan check, naming the cohort's line, not in
        // every worker an hour into the study.
        let e = refused(&format!(
            "{HEAD}[[cohort]]\nworkers = \"serve=1,train=2\"\n\
             flags = {{ rate = 100, execution = \"cuda-graph\" }}\n"
        ));
        assert_eq!(e.line, Some(4), "{e}");
        assert!(e.message.contains("serve runs eager only"), "{e}");
        let e = refused(&format!(
            "{HEAD}[[cohort]]\nworkers = \"train=2\"\nflags = {{ precision = \"fp8\" }}\n"
        ));
        assert!(e.message.contains("fp8"), "{e}");
        // Two cohorts that would share a folder.
        let e = refused(&format!(
            "{HEAD}[[cohort]]\nworkers = \"train=2\"\n[[cohort]]\nworkers = \"train=2\"\n"
        ));
        assert_eq!(e.line, Some(6), "{e}");
        assert!(e.message.contains("run twice (also from line 4)"), "{e}");
        // A baseline of several workers.
        let e = refused(&format!(
            "{HEAD}[[cohort]]\nworkers = \"train=2\"\nbaseline = true\n"
        ));
        assert!(e.message.contains("field `baseline`"), "{e}");
        // A cohort of another model or execution than its workload's baseline: the ratio would
        // compare models.
        let e = refused(&format!(
            "[[policy]]\nname = \"exclusive\"\nmode = \"exclusive\"\n{HEAD}[[cohort]]\n\
             workers = \"train=1\"\npolicies = [\"exclusive\"]\nbaseline = true\n[[cohort]]\n\
             workers = \"train=2\"\npolicies = [\"timeslice\"]\nflags = {{ model = \"resnet50\" }}\n"
        ));
        assert_eq!(e.line, Some(11), "{e}");
        assert!(
            e.message
                .contains("runs model resnet50, eager for its train workers")
                && e.message
                    .contains("baseline (line 7) runs model resnet18, eager"),
            "{e}"
        );
        let e = refused(&format!(
            "[[policy]]\nname = \"exclusive\"\nmode = \"exclusive\"\n{HEAD}[[cohort]]\n\
             workers = \"train=1\"\npolicies = [\"exclusive\"]\nbaseline = true\n[[cohort]]\n\
             workers = \"train=2\"\npolicies = [\"timeslice\"]\nflags = {{ execution = \"cuda-graph\" }}\n"
        ));
        assert!(
            e.message.contains("cuda-graph for its train workers"),
            "{e}"
        );
        // The same model throughout is a plan.
        assert!(
            Plan::parse(
                "good.toml",
                &format!(
                    "[flags]\nmodel = \"resnet50\"\n[[policy]]\nname = \"exclusive\"\nmode = \
                     \"exclusive\"\n{HEAD}[[cohort]]\nworkers = \"train=1\"\npolicies = \
                     [\"exclusive\"]\nbaseline = true\n[[cohort]]\nworkers = \"train=2\"\n\
                     policies = [\"timeslice\"]\n"
                )
            )
            .is_ok()
        );
        // Nothing to run.
        assert!(refused(HEAD).message.contains("no `[[cohort]]`"));
        // Not TOML at all.
        let e = refused("[[policy]\n");
        assert_eq!(e.line, Some(1), "{e}");
        assert!(e.to_string().starts_with("plan bad.toml, line 1: "), "{e}");
    }

    #[test]
    fn a_plan_sets_the_batcher_and_the_arrivals() {
        let plan = Plan::parse(
            "serve.toml",
            &format!(
                "{HEAD}[[cohort]]\nworkers = \"serve=1,train=2\"\nflags = {{ rate = 250, \
                 arrivals = \"uniform\", max_batch = 8, max_queue_delay_ms = 2.5 }}\n"
            ),
        )
        .unwrap();
        let job = &plan.jobs(false)[0];
        assert_eq!(job.spec.serve.max_batch, 8);
        assert!((job.spec.serve.max_queue_delay_ms - 2.5).abs() < 1e-12);
        assert_eq!(job.spec.serve.arrivals, coload_spec::Arrivals::Uniform);
        let argv = cohort_argv(job, std::path::Path::new("/o")).unwrap();
        for flag in [
            "--max-batch=8",
            "--max-queue-delay-ms=2.5",
            "--arrivals=uniform",
        ] {
            assert!(argv.iter().any(|a| a == flag), "{flag} not in {argv:?}");
        }
    }

    /// A name becomes a folder under the study's `cohorts/`; one that could reach
    /// outside it, or make nested folders, is refused at its line.
    #[test]
    fn names_are_checked_like_experiment_ids() {
        let long = "n".repeat(300);
        for bad in [
            "../../../../../victim",
            "evil<script>alert(2)</script>",
            "a/b",
            "..",
            "bell\\u0007",
            "nul\\u0000",
            "tab\there",
            long.as_str(),
        ] {
            let e = refused(&format!(
                "{HEAD}[[cohort]]\nworkers = \"train=2\"\nname = \"{bad}\"\n"
            ));
            assert_eq!(e.line, Some(6), "{bad}: {e}");
            assert!(e.message.contains("cohort name"), "{bad}: {e}");
            let e = refused(&format!(
                "[[policy]]\nname = \"{bad}\"\nmode = \"timeslice\"\n\
                 [[cohort]]\nworkers = \"train=2\"\n"
            ));
            assert_eq!(e.line, Some(1), "{bad}: {e}");
            assert!(e.message.contains("policy name"), "{bad}: {e}");
        }
        // A long policy and cohort name that are fine alone but make too long a folder.
        let (p, c) = ("p".repeat(128), "c".repeat(128));
        let e = refused(&format!(
            "[[policy]]\nname = \"{p}\"\nmode = \"timeslice\"\n\
             [[cohort]]\nworkers = \"train=2\"\nname = \"{c}\"\n"
        ));
        assert!(e.message.contains("more than a folder name may be"), "{e}");
    }

    #[test]
    fn the_plan_files_in_scripts_gpu_parse() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/gpu");
        let mut n = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                let plan = Plan::load(path.to_str().unwrap()).unwrap_or_else(|e| panic!("{e}"));
                assert!(!plan.jobs(false).is_empty());
                n += 1;
            }
        }
        assert!(n >= 1, "no plan in {dir}");
    }

    /// `--precision` and `--max-repeats` from the command line: every shape that repeats
    /// against solo takes them, baselines and capacity searches keep theirs, and values that
    /// cannot work are refused naming the flag.
    #[test]
    fn a_precision_from_the_command_line_replaces_the_plans() {
        let quick = Plan::load("quick").unwrap();
        let plan = quick.with_precision(0.02, Some(5)).unwrap();
        let jobs = plan.jobs(false);
        for shape in ["timeslice-train2", "mps-infer1-train1"] {
            let repeats: Vec<&Job> = jobs
                .iter()
                .filter(|j| j.name.starts_with(&format!("{shape}-r")))
                .collect();
            assert_eq!(repeats.len(), 5, "{shape}: {:?}", names(&jobs));
            assert!(repeats.iter().all(|j| j.precision == Some(0.02)));
        }
        // The baselines still bracket the study, twice, with no precision of their own.
        let baselines: Vec<&Job> = jobs.iter().filter(|j| j.baseline).collect();
        assert_eq!(baselines.len(), 4);
        // With three runs of a baseline, its second comes after the second round, the first
        // point where a shape can stop, and not in the middle of the most rounds.
        let small = Plan::parse(
            "test",
            &format!(
                "name = \"t\"\ndescription = \"d\"\n{HEAD}[[policy]]\nname = \"exclusive\"\n\
                 mode = \"exclusive\"\n[[cohort]]\nworkers = \"train=1\"\n\
                 policies = [\"exclusive\"]\nbaseline = true\nrepeats = 3\n[[cohort]]\n\
                 workers = \"train=2\"\npolicies = [\"timeslice\"]\nrepeats = 3\n"
            ),
        )
        .unwrap();
        let order =
            |plan: &Plan| -> Vec<String> { plan.jobs(false).into_iter().map(|j| j.name).collect() };
        let settling = order(&small.with_precision(0.05, Some(6)).unwrap());
        assert_eq!(
            settling,
            [
                "exclusive-train1-r1",
                "timeslice-train2-r1",
                "timeslice-train2-r2",
                "exclusive-train1-r2",
                "timeslice-train2-r3",
                "timeslice-train2-r4",
                "timeslice-train2-r5",
                "timeslice-train2-r6",
                "exclusive-train1-r3",
            ]
        );
        assert!(baselines.iter().all(|j| j.precision.is_none()));
        assert!(jobs.first().unwrap().baseline && jobs.last().unwrap().baseline);
        // On a CPU node too.
        assert!(
            plan.jobs(true)
                .iter()
                .any(|j| j.name == "timeslice-train2-r5" && j.precision == Some(0.02))
        );
        // quick repeats its shapes twice: a precision needs room for a third.
        let e = quick.with_precision(0.02, None).unwrap_err().to_string();
        assert!(e.contains("give --max-repeats 3 or more"), "{e}");
        for (p, n, words) in [
            (0.0, Some(4), "--precision 0"),
            (1.5, Some(4), "between 0 and 1"),
            (f64::NAN, Some(4), "--precision NaN"),
            (0.02, Some(2), "--max-repeats 2"),
            (0.02, Some(MAX_REPEATS + 1), "--max-repeats 1001"),
        ] {
            let e = quick.with_precision(p, n).unwrap_err().to_string();
            assert!(e.contains(words), "{p} {n:?}: {e}");
        }
        // A plan of capacity searches and baselines has nothing to settle.
        let e = Plan::load("frontier")
            .unwrap()
            .with_precision(0.02, Some(4))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no cohort of this plan repeats to a precision"),
            "{e}"
        );
    }

    #[test]
    fn unknown_built_in_names_are_listed() {
        let e = Plan::load("articel").unwrap_err();
        assert!(
            e.message
                .contains("built-in plans: article, quick, decision, llm, mig-check, frontier"),
            "{e}"
        );
    }

    #[test]
    fn the_argv_parses_back_into_the_plans_values() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(subcommand)]
            run: Sub,
        }
        #[derive(clap::Subcommand)]
        enum Sub {
            Run(Box<Run>),
        }
        #[derive(clap::Args)]
        struct Run {
            #[command(flatten)]
            launch: coload_launch::LaunchArgs,
        }
        let plan = Plan::parse("good.toml", GOOD).unwrap();
        let job = plan
            .jobs(true)
            .into_iter()
            .find(|j| j.name == "mps-train7-r2")
            .unwrap();
        let argv = cohort_argv(&job, std::path::Path::new("/o")).unwrap();
        let Sub::Run(parsed) = <Cli as clap::Parser>::try_parse_from(&argv).unwrap().run;
        let parsed = parsed.launch;
        // The whole spec comes back, not only the values the plan set.
        assert_eq!(parsed.spec, job.spec);
        assert_eq!(parsed.spec.flags.mode, Mode::Mps);
        assert!((parsed.spec.flags.window_s.get() - 2.0).abs() < 1e-12);
        assert_eq!(parsed.spec.flags.image_size, 32);
        assert_eq!(parsed.spec.mix().unwrap().len(), 7);
        assert_eq!(parsed.out, std::path::Path::new("/o"));
        assert!(parsed.quiet);
    }

    #[test]
    fn a_policy_may_name_its_cluster_node_and_resource_key() {
        let plan = Plan::parse(
            "t",
            "[[policy]]\nname = \"ts\"\nmode = \"timeslice\"\nnode = \"gpu-ts-1\"\n\
             resource = \"nvidia.com/gpu.shared\"\n[[policy]]\nname = \"ex\"\nmode = \
             \"exclusive\"\n[[cohort]]\nworkers = \"train=2\"\npolicies = [\"ts\"]\n",
        )
        .unwrap();
        let ts = &plan.policies[0];
        assert_eq!(ts.node.as_deref(), Some("gpu-ts-1"));
        assert_eq!(ts.resource.as_deref(), Some("nvidia.com/gpu.shared"));
        assert_eq!(ts.line, 1);
        assert_eq!(plan.policies[1].node, None);
        assert_eq!(ts.sharing, Sharing::DevicePlugin);
        let plan = Plan::parse(
            "t",
            "[[policy]]\nname = \"ts\"\nmode = \"timeslice\"\nsharing = \"dra\"\n\
             flags = { timeslice_interval = \"short\" }\n[[cohort]]\nworkers = \"train=2\"\n",
        )
        .unwrap();
        assert_eq!(plan.policies[0].sharing, Sharing::Dra);
        let job = &plan.jobs(false)[0];
        assert_eq!(
            job.spec.flags.timeslice_interval,
            Some(coload_cohort_schema::TimesliceInterval::Short)
        );
        let e = Plan::parse(
            "t",
            "[[policy]]\nname = \"ts\"\nmode = \"timeslice\"\nsharing = \"drA\"\n\
             [[cohort]]\nworkers = \"train=1\"\n",
        )
        .unwrap_err();
        assert!(e.message.contains("drA") && e.line == Some(4), "{e}");
        // A typo is still refused at its line.
        let e = Plan::parse(
            "t",
            "[[policy]]\nname = \"ts\"\nmode = \"timeslice\"\nnodes = \"x\"\n[[cohort]]\n\
             workers = \"train=1\"\n",
        )
        .unwrap_err();
        assert!(e.message.contains("nodes"), "{e}");
    }
}

#[cfg(test)]
mod bounds {
    use std::fmt::Write as _;

    use super::*;

    fn many(cohorts: usize) -> String {
        let mut text =
            String::from("name = \"many\"\n[[policy]]\nname = \"ts\"\nmode = \"timeslice\"\n");
        for i in 0..cohorts {
            let _ = writeln!(text, "[[cohort]]\nname = \"c{i}\"\nworkers = \"train=1\"");
        }
        text
    }

    /// The check names each cohort's line by a binary search: 100k cohorts take seconds, where
    /// scanning the text for each took 776 s. Linear: ten times the cohorts, about ten times
    /// the time (allowed 25, for a loaded machine).
    #[test]
    fn the_plan_check_is_linear_in_the_plan() {
        let time = |n: usize| {
            let text = many(n);
            let started = std::time::Instant::now();
            let plan = Plan::parse("many.toml", &text).unwrap();
            assert_eq!(plan.jobs(false).len(), n);
            started.elapsed()
        };
        let small = time(10_000);
        let large = time(100_000);
        assert!(
            large < small * 25,
            "10k cohorts: {small:?}, 100k cohorts: {large:?}"
        );
    }

    /// Rules clap enforced only on the command line are refused at the plan's line too.
    #[test]
    fn clap_ranges_are_refused_at_their_line() {
        for (flags, flag) in [
            ("mps_replicas = 0", "--mps-replicas"),
            ("mps_replicas = 101", "--mps-replicas"),
            (
                "num_classes = 0, model_file = \"m.pt\", input_shape = \"3,8,8\"",
                "--num-classes",
            ),
            ("input_shape = \"3,8,8\"", "--input-shape"),
            ("warmup_batches = 4294967295", "--warmup-batches"),
        ] {
            let mode = if flags.starts_with("mps") {
                "mps"
            } else {
                "timeslice"
            };
            let text = format!(
                "name = \"p\"\n[[policy]]\nname = \"p1\"\nmode = \"{mode}\"\n\
                 [[cohort]]\nworkers = \"train=1\"\nflags = {{ {flags} }}\n"
            );
            let e = Plan::parse("p.toml", &text).unwrap_err().to_string();
            assert!(
                e.contains("plan p.toml, line ") && e.contains(flag),
                "{flags}: {e}"
            );
        }
    }

    #[test]
    fn repeats_and_cohorts_have_maxima() {
        let text = "name = \"r\"\n[[policy]]\nname = \"ts\"\nmode = \"timeslice\"\n\
                    [[cohort]]\nworkers = \"train=1\"\nrepeats = 4294967295\n";
        let e = Plan::parse("r.toml", text).unwrap_err().to_string();
        assert!(
            e.contains("line 7") && e.contains("between 1 and 1000"),
            "{e}"
        );
        let text = format!("repeats = 1000\n{}", many(101));
        let e = Plan::parse("m.toml", &text).unwrap_err().to_string();
        assert!(e.contains("expands to 101000 cohorts"), "{e}");
    }
}
