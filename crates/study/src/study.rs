//! `bench-cohort study PLAN --out DIR`: a whole study on one node in one command.
//!
//! The plan ([`plan`]) lists cohorts by policy and mix with their repeats; the node ([`node`])
//! decides which of them it offers and on which GPUs; earlier runs of the same study are read
//! back ([`resume`]) so that complete cohorts are skipped and failed ones kept; the queue runs on
//! the lanes ([`schedule`]), each cohort as a `bench-cohort` process of its own (the same code
//! path as running it by hand, its log beside its artifacts); [`index`] records every cohort's
//! outcome after each one ends; at the end the complete cohorts are compared against the solo
//! baselines and the report is written.
//!
//! Layout of `DIR`: `plan.toml` (the plan's text), `index.json`, `cohorts/<name>/` per cohort
//! (bench-cohort's folder plus `cohort.log`), `cohorts/<name>.failed-<k>/` for failed runs,
//! `report/` (`comparison.json`, `comparison.md`, `report.html`).

use std::fmt::Write as _;
use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use coload_cohort_schema::study::{Entry, INDEX_VERSION, Index, Outcome, Run};
use coload_cohort_schema::{CohortFailure, exit, files};
use coload_launch::{Console, INTERRUPTED};
use coload_spec::Seconds;

use crate::estimate::{Estimator, expected_wall_s};
use crate::node::{Node, Offer, Placement};
use crate::plan::{Job, Plan, PlanError};
use crate::resume::{FAILURE_FILE, FailureRecord, Found};
use crate::schedule::{Estimate, Events, Launcher, RunResult};
use crate::{folder, progress, resume, schedule};

/// Exit code of a study that stopped before its end because of `--time-budget-s`: run the same
/// command again to go on (sysexits' EX_TEMPFAIL).
pub const STUDY_UNFINISHED: u8 = 75;

#[expect(
    clippy::struct_excessive_bools,
    reason = "independent command-line switches, as clap derives them"
)]
/// Run a study plan. Examples: `bench-cohort study quick --out runs/quick`,
/// `bench-cohort study article --out runs/article`, `bench-cohort study my-plan.toml --out DIR`.
#[derive(Debug, clap::Args)]
pub struct StudyArgs {
    /// The plan: built in (`quick`, `article`, `decision`, `llm`, `mig-check`, `frontier`), or a
    /// TOML plan file (docs/study.md)
    #[arg(value_name = "PLAN")]
    pub plan: String,

    /// Study folder: index.json, cohorts/<name>/ per cohort, report/ (report.html). Run the
    /// same command again to resume: complete cohorts are skipped
    #[arg(long, required_unless_present = "emit")]
    pub out: Option<PathBuf>,

    /// With a cluster backend (--backend kubernetes or polyaxon): write every cohort's manifests
    /// into this new folder and run nothing (for review or GitOps)
    #[arg(long, value_name = "DIR")]
    pub emit: Option<PathBuf>,

    /// Run again the cohorts that failed in an earlier run (their folders are kept, renamed
    /// <name>.failed-<k>)
    #[arg(long)]
    pub retry_failed: bool,

    /// GPU indices to use as lanes, e.g. 0,1 (default: the plan's `lanes`, else every GPU, or
    /// the indices in CUDA_VISIBLE_DEVICES)
    #[arg(long, value_delimiter = ',')]
    pub gpus: Vec<u32>,

    /// Every cohort's window, seconds, instead of the plan's (a rehearsal; a study folder holds
    /// one window length, so use another --out)
    #[arg(long)]
    pub window_s: Option<Seconds>,

    /// Start no cohort that would not end within this many seconds; the rest are left for the
    /// next run of the same command (exit 75)
    #[arg(long)]
    pub time_budget_s: Option<Seconds>,

    /// Print the cohorts in order, where each would run and the expected duration; run nothing
    #[arg(long)]
    pub dry_run: bool,

    /// The bench-worker executable (default: next to this one)
    #[arg(long)]
    pub worker_bin: Option<PathBuf>,

    /// Plain progress lines even on a terminal
    #[arg(long)]
    pub no_progress_bar: bool,

    /// Describe the node from this saved `nvidia-smi -L` output instead of asking the machine
    /// (to plan for another node with --dry-run)
    #[arg(long, value_name = "FILE")]
    pub node_listing: Option<PathBuf>,

    /// With --node-listing: that node's `nvidia-smi --query-gpu=index,uuid,mig.mode.current
    /// --format=csv` output, for its GPUs' MIG mode (a GPU in MIG mode without instances looks
    /// like a plain GPU in the listing)
    #[arg(long, value_name = "FILE", requires = "node_listing")]
    pub node_query: Option<PathBuf>,

    /// With --node-listing: that node has nvidia-cuda-mps-control
    #[arg(long, requires = "node_listing")]
    pub node_mps: bool,

    /// The built-in `frontier` plan's mix: one serve or serve-llm endpoint beside train and
    /// infer workers, e.g. serve=1,train=6 (default serve=1,train=6)
    #[arg(long, value_name = "MIX")]
    pub mix: Option<String>,

    /// The `frontier` plan's objective for a serve endpoint: request p99 at most this, ms
    /// (default 10)
    #[arg(long, value_name = "MS")]
    pub slo_ms: Option<f64>,

    /// The `frontier` plan's objective for a serve-llm endpoint: time to first token p99 at most
    /// this, ms (with --tpot-slo-ms)
    #[arg(long, value_name = "MS")]
    pub ttft_slo_ms: Option<f64>,

    /// The `frontier` plan's objective for a serve-llm endpoint: time per output token p99 at
    /// most this, ms (with --ttft-slo-ms)
    #[arg(long, value_name = "MS")]
    pub tpot_slo_ms: Option<f64>,

    /// Stop repeating a shape once its aggregate against solo is settled: its 95 % interval
    /// narrower than this relative width (0.02: 2 %), or clear of every threshold of the
    /// verdict. Replaces the plan's `precision` on every shape that repeats (not baselines,
    /// capacity searches or memory hogs)
    #[arg(long, value_name = "WIDTH")]
    pub precision: Option<f64>,

    /// With --precision: the most repeats of each such shape (default: the plan's `repeats`)
    #[arg(long, value_name = "N", requires = "precision")]
    pub max_repeats: Option<u32>,
}

impl StudyArgs {
    /// The plan these arguments name: a built-in or a file, the `frontier` plan made for
    /// `--mix` and its objective, with `--precision` and `--max-repeats` laid over it. Every
    /// backend loads its plan here.
    pub fn load_plan(&self) -> Result<Plan, StudyError> {
        let frontier_flags = self.mix.is_some()
            || self.slo_ms.is_some()
            || self.ttft_slo_ms.is_some()
            || self.tpot_slo_ms.is_some();
        let plan = if self.plan == crate::frontier::NAME && frontier_flags {
            let mix = self.mix.as_deref().unwrap_or(crate::frontier::DEFAULT_MIX);
            let parsed = coload_spec::Mix::parse(mix)
                .map_err(|e| StudyError::Usage(format!("--mix {mix}: {e}")))?;
            let objective = crate::frontier::objective(
                &parsed,
                self.slo_ms,
                self.ttft_slo_ms,
                self.tpot_slo_ms,
            )
            .map_err(StudyError::Usage)?;
            let text = crate::frontier::plan_text(mix, objective).map_err(StudyError::Usage)?;
            Plan::parse(crate::frontier::NAME, &text)?
        } else if frontier_flags {
            return Err(StudyError::Usage(format!(
                "--mix, --slo-ms, --ttft-slo-ms and --tpot-slo-ms make the built-in `frontier` \
                 plan (bench-cohort study frontier --mix serve=1,train=6 --slo-ms 10); plan `{}` \
                 has cohorts of its own",
                self.plan
            )));
        } else {
            Plan::load(&self.plan)?
        };
        Ok(match self.precision {
            Some(p) => plan.with_precision(p, self.max_repeats)?,
            None => plan,
        })
    }

    /// The plan's cohorts (`Plan::jobs`) with what these arguments override: `--window-s` over
    /// every cohort's window. Every backend takes its jobs from here.
    #[must_use]
    pub fn jobs(&self, plan: &Plan, cpu: bool) -> Vec<Job> {
        let mut jobs = plan.jobs(cpu);
        if let Some(w) = self.window_s {
            for j in &mut jobs {
                j.spec.flags.window_s = w;
            }
        }
        jobs
    }
}

/// Why a study could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum StudyError {
    /// The plan is bad.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The command line or the node does not fit the plan.
    #[error("{0}")]
    Usage(String),
    /// The study folder holds another study's cohort.
    #[error(transparent)]
    Resume(#[from] crate::resume::ResumeError),
    /// A file of the study could not be read or written.
    #[error("{what} {}", .path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The index or the report could not be written.
    #[error("cannot write {}", .0.display())]
    Write(PathBuf, #[source] Box<dyn std::error::Error + Send + Sync>),
}

impl StudyError {
    /// The process exit code.
    #[must_use]
    pub fn exit_code(&self) -> u8 {
        match self {
            StudyError::Plan(_) | StudyError::Usage(_) | StudyError::Resume(_) => {
                exit::INVALID_INPUT
            }
            StudyError::Io { .. } | StudyError::Write(..) => exit::WRITE_FAILED,
        }
    }
}

/// A cohort of the plan and what is known of it.
#[derive(Debug)]
struct Item {
    job: Job,
    entry: Entry,
    /// To run in this run.
    queued: bool,
    /// Started by the run before this one and picked up by the launcher (a cluster's Job still
    /// there), not run again: it belongs to that run's block.
    picked_up: bool,
}

fn relative(out: &Path, p: &Path) -> String {
    p.strip_prefix(out).unwrap_or(p).display().to_string()
}

/// Where a study's cohorts run, for [`run_with`]: the lanes, what fits on them, what starts a
/// cohort, and a line saying what all that is (for the index and the report).
#[derive(Debug)]
pub struct Target<'a, L> {
    /// Which lanes a cohort needs, or why it cannot run here.
    pub offer: &'a dyn Offer,
    /// Every lane.
    pub lanes: Vec<u32>,
    /// The cohorts run on the CPU (the plan's `[cpu]` flags apply).
    pub cpu: bool,
    /// What runs the cohorts, in one line: this node's GPUs, or the cluster's nodes.
    pub describe: String,
    /// Starts a cohort.
    pub launcher: L,
}

impl std::fmt::Debug for dyn Offer + '_ {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Offer")
    }
}

/// Runs the study on this node; returns the exit code.
pub fn run(
    args: &StudyArgs,
    console: &dyn Console,
    interrupted: &AtomicBool,
) -> Result<u8, StudyError> {
    let plan = args.load_plan()?;
    if args.emit.is_some() {
        return Err(StudyError::Usage(
            "--emit writes a cluster backend's manifests: give --backend kubernetes or polyaxon"
                .into(),
        ));
    }
    let read = |path: &PathBuf| {
        std::fs::read_to_string(path).map_err(|source| StudyError::Io {
            what: "cannot read",
            path: path.clone(),
            source,
        })
    };
    let node = match &args.node_listing {
        Some(path) => {
            let listing = read(path)?;
            let query = args.node_query.as_ref().map(read).transpose()?;
            Node::from_listing(&listing, query.as_deref(), args.node_mps)
                .map_err(|e| StudyError::Usage(format!("--node-listing: {e}")))?
        }
        None => Node::detect(),
    };
    let cpu = node.is_cpu();
    if cpu && plan.needs_gpu {
        return Err(StudyError::Usage(format!(
            "plan `{}` measures GPU sharing and this node has no GPU (nvidia-smi lists none); \
             run `bench-cohort study quick` to try the tool on the CPU",
            plan.name
        )));
    }
    let wanted = if !args.gpus.is_empty() {
        Some(args.gpus.clone())
    } else if let Some(l) = &plan.lanes {
        Some(l.clone())
    } else {
        visible_indices()
    };
    let lanes = node.lanes(wanted.as_deref()).map_err(StudyError::Usage)?;
    let worker_bin = match &args.worker_bin {
        Some(p) => p.clone(),
        None => sibling("bench-worker")?,
    };
    if !args.dry_run && !worker_bin.exists() {
        return Err(StudyError::Usage(format!(
            "bench-worker not found at {} (build it, or pass --worker-bin)",
            worker_bin.display()
        )));
    }
    let launcher = schedule::ProcessLauncher {
        bin: sibling("bench-cohort")?,
        worker_bin,
    };
    let node_line = node.describe();
    let target = Target {
        offer: &node,
        lanes,
        cpu,
        describe: node_line,
        launcher,
    };
    run_with(args, &plan, target, console, interrupted)
}

/// Runs the study on `target` (this node, or a cluster backend's nodes); returns the exit code.
/// The contract is the same wherever the cohorts run: the plan's interleaved order, resume
/// (complete cohorts are skipped, failed ones kept), the index after every cohort, a failed
/// cohort's reason from its `failure.json`, and the report.
#[expect(
    clippy::too_many_lines,
    reason = "the study's steps in order: plan, resume, run, index, report"
)]
pub fn run_with<L: Launcher>(
    args: &StudyArgs,
    plan: &Plan,
    target: Target<'_, L>,
    console: &dyn Console,
    interrupted: &AtomicBool,
) -> Result<u8, StudyError> {
    let Target {
        offer: node,
        lanes,
        cpu,
        describe: node_line,
        mut launcher,
    } = target;
    let out = args
        .out
        .as_deref()
        .ok_or_else(|| StudyError::Usage("--out is required to run a study".into()))?;
    let jobs = args.jobs(plan, cpu);
    // One study at a time in a folder, held until this run and every process it started end;
    // and one plan per folder, checked before anything in it is set aside.
    let _lock = if args.dry_run {
        None
    } else {
        Some(folder::lock(out)?)
    };
    folder::check_plan(out, plan)?;
    let cohorts_dir = out.join("cohorts");
    // What earlier runs recorded: their wall times, the times of the cohorts they completed and
    // the run each ran in.
    let earlier = previous_index(out, &plan.name, console);
    // This run's number: its place in the index's runs, recorded on every cohort it runs.
    let this_run = earlier.as_ref().map_or(1, |e| {
        u32::try_from(e.runs.len()).unwrap_or(u32::MAX - 1) + 1
    });
    // With several lanes, a baseline copy for each card its workload's cohorts may land on;
    // except in a study whose earlier runs ran the plan's baselines under their own names (one
    // begun on one lane, or before baselines ran per lane): it keeps them, so its index and
    // its blocks stay as they were.
    let unsplit = earlier.as_ref().is_some_and(|e| {
        e.cohorts.iter().any(|c| {
            c.baseline
                && matches!(
                    c.outcome,
                    Outcome::Complete
                        | Outcome::AlreadyComplete
                        | Outcome::Failed
                        | Outcome::FailedEarlier
                        | Outcome::Interrupted
                )
                && jobs.iter().any(|j| j.baseline && j.name == c.name)
        })
    });
    let jobs = if unsplit {
        jobs
    } else {
        crate::block::per_lane(jobs, node, &lanes, cpu)
    };

    // What the node offers and what earlier runs left.
    let in_plan: std::collections::HashSet<&str> = jobs.iter().map(|j| j.name.as_str()).collect();
    let mut items: Vec<Item> = Vec::new();
    for job in with_earlier_reruns(&jobs, &in_plan, earlier.as_ref()) {
        let mut e = job.entry();
        let mut queued = false;
        let mut picked_up = false;
        let rerun = !in_plan.contains(job.name.as_str());
        // A repeat an earlier run found unnecessary stays so while a precision is still asked:
        // the repeats that settled its shape are unchanged.
        let settled_earlier = earlier
            .as_ref()
            .filter(|_| job.precision.is_some())
            .and_then(|i| {
                i.cohorts
                    .iter()
                    .find(|c| c.name == job.name && c.outcome == Outcome::Settled)
            });
        match node.place(&job, &job.on_lanes(&lanes)) {
            Err(why) => {
                e.outcome = Outcome::NotOffered;
                e.reason = Some(why);
            }
            Ok(_) if settled_earlier.is_some() => {
                e.outcome = Outcome::Settled;
                e.reason = settled_earlier.and_then(|c| c.reason.clone());
            }
            // An earlier run's re-run of a baseline belongs to that run's block: kept where
            // complete, never run again in another run.
            Ok(_) if rerun => match resume::inspect(&cohorts_dir, &job)? {
                Found::Complete { experiment } => {
                    e.outcome = Outcome::AlreadyComplete;
                    e.experiment = Some(experiment);
                }
                _ => continue,
            },
            Ok(_) => match resume::inspect(&cohorts_dir, &job)? {
                Found::Complete { experiment } => {
                    e.outcome = Outcome::AlreadyComplete;
                    e.experiment = Some(experiment);
                }
                Found::CapacityComplete { answer } => {
                    e.outcome = Outcome::AlreadyComplete;
                    e.capacity = Some(answer);
                }
                Found::IsolationComplete {
                    experiment,
                    answer,
                    dirs,
                } => {
                    e.outcome = Outcome::AlreadyComplete;
                    e.experiment = Some(experiment);
                    e.isolation = Some(answer);
                    e.failed_dirs = dirs.iter().map(|d| relative(out, d)).collect();
                }
                Found::Failed { dirs, last } => {
                    e.failed_dirs = dirs.iter().map(|d| relative(out, d)).collect();
                    if args.retry_failed {
                        queued = true;
                    } else {
                        e.outcome = Outcome::FailedEarlier;
                        e.exit_code = last.as_ref().and_then(|l| l.exit_code);
                        e.reason = Some(format!(
                            "{} (run again with --retry-failed)",
                            last.map_or_else(|| "failed earlier".to_owned(), |l| l.reason)
                        ));
                    }
                }
                Found::Partial => {
                    if !args.dry_run {
                        let to = resume::set_aside(&cohorts_dir, &job.name, "interrupted")
                            .map_err(|source| StudyError::Io {
                                what: "cannot set aside the unfinished folder",
                                path: cohorts_dir.join(&job.name),
                                source,
                            })?;
                        let resumes = launcher.resumes(&job);
                        picked_up = resumes.is_some();
                        let then = resumes.unwrap_or_else(|| "run again".to_owned());
                        console.progress(&format!(
                            "{}: an earlier run left it unfinished; kept as {} and {then}",
                            job.name,
                            relative(out, &to)
                        ));
                    }
                    queued = true;
                }
                Found::New => queued = true,
            },
        }
        items.push(Item {
            job,
            entry: e,
            queued,
            picked_up,
        });
    }

    if let Some(earlier) = &earlier {
        for i in &mut items {
            carry_times(&mut i.entry, earlier);
        }
    }
    // The baselines this run's block needs that earlier runs measured in theirs.
    let planned: Vec<crate::block::Planned<'_>> = items
        .iter()
        .map(|i| crate::block::Planned {
            job: &i.job,
            // A cohort picked up from the run before ran in that run's block.
            queued: i.queued && !i.picked_up,
            complete_earlier: i.entry.outcome == Outcome::AlreadyComplete,
        })
        .collect();
    let reruns = crate::block::reruns(&planned, this_run);
    for (at, job) in reruns.into_iter().rev() {
        let entry = job.entry();
        items.insert(
            at,
            Item {
                job,
                entry,
                queued: true,
                picked_up: false,
            },
        );
    }

    let estimator = Estimator::new(cpu);
    // The cohorts earlier runs completed and timed teach the estimate their setup before this
    // run has measured any: a resumed slice plans its first cohorts with the node's own figure.
    for i in &items {
        if let (Outcome::AlreadyComplete, Some(elapsed), Some(in_windows)) =
            (i.entry.outcome, i.entry.duration_s, i.entry.in_windows_s)
        {
            // A cohort whose windows never ran (a hog's trainers out of memory) took no setup
            // that a measured cohort would.
            let window = i.job.spec.flags.window_s.get();
            let cohorts = (in_windows / window).round() as u32;
            if let (true, Ok(elapsed)) = (cohorts > 0, Duration::try_from_secs_f64(elapsed)) {
                estimator.observe(&i.job, cohorts, elapsed, false);
            }
        }
    }
    let lanes_line = if cpu {
        "the CPU, one cohort at a time".to_owned()
    } else {
        format!("{lanes:?}")
    };
    console.progress(&format!(
        "study `{}` ({}): {} cohorts planned; runs on: {node_line}; lanes: {lanes_line}",
        plan.name,
        plan.description.as_deref().unwrap_or(&plan.source),
        items.len()
    ));
    if args.dry_run {
        console.output(&dry_run(&items, node, &lanes, &estimator));
        return Ok(exit::COMPLETE);
    }

    create_dir(&cohorts_dir)?;
    folder::write_plan(out, plan)?;
    let mut index = Index {
        schema_version: INDEX_VERSION,
        plan: plan.name.clone(),
        plan_source: plan.source.clone(),
        node: node_line.clone(),
        lanes: lanes.clone(),
        cohorts: items.iter().map(|i| i.entry.clone()).collect(),
        runs: earlier.map(|e| e.runs).unwrap_or_default(),
    };
    let started = Instant::now();
    index.runs.push(Run {
        started_unix_ns: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
        wall_s: 0.0,
        time_budget_s: args.time_budget_s.map(Seconds::get),
        cohorts_run: 0,
        coload: build(),
    });
    write_index(out, &index)?;

    let queue: Vec<&Job> = items.iter().filter(|i| i.queued).map(|i| &i.job).collect();
    let weights = queue
        .iter()
        .map(|j| (j.name.clone(), estimator.seconds(j).round() as u64))
        .collect();
    let bar = !args.no_progress_bar && std::io::stderr().is_terminal();
    let mut events = StudyEvents {
        progress: progress::Progress::new(bar, weights, console),
        out,
        cohorts: &cohorts_dir,
        index: &mut index,
        estimator: &estimator,
        started,
        interrupted,
        write_error: None,
        any_ended: false,
        run: this_run,
        picked_up: items
            .iter()
            .filter(|i| i.picked_up)
            .map(|i| i.job.name.clone())
            .collect(),
    };
    events.progress.line(&format!(
        "{} to run ({} already complete, {} failed earlier, {} not offered); expected about {}",
        queue.len(),
        items
            .iter()
            .filter(|i| i.entry.outcome == Outcome::AlreadyComplete)
            .count(),
        items
            .iter()
            .filter(|i| i.entry.outcome == Outcome::FailedEarlier)
            .count(),
        items
            .iter()
            .filter(|i| i.entry.outcome == Outcome::NotOffered)
            .count(),
        minutes(expected_wall_s(&queue, node, &lanes, &estimator))
    ));
    let budget = args.time_budget_s.map(Seconds::duration);
    let results = schedule::run(
        &queue,
        node,
        &cohorts_dir,
        &lanes,
        &mut launcher,
        &mut events,
        &estimator,
        budget,
        &|| interrupted.load(Ordering::SeqCst),
        Duration::from_millis(100),
    );
    events.progress.finish();
    if let Some(e) = events.write_error.take() {
        return Err(e);
    }
    for (i, result, _) in &results {
        let (outcome, why) = match result {
            RunResult::NotRun(why) => (Outcome::NotRun, why),
            RunResult::Settled(why) => (Outcome::Settled, why),
            _ => continue,
        };
        let name = &queue[*i].name;
        if let Some(e) = index.cohorts.iter_mut().find(|e| &e.name == name) {
            e.outcome = outcome;
            e.reason = Some(why.clone());
        }
    }
    // Why each shape that repeats to a precision stopped where it did. A repeat it did not
    // need says so as `settled`; the last planned repeat, when it ran, says whether the shape
    // settled with it or ran its most repeats still open.
    for i in &items {
        let job = &i.job;
        let last = items
            .iter()
            .filter(|o| {
                crate::settle::shape_of(&o.job.name, o.job.repeat)
                    == crate::settle::shape_of(&job.name, job.repeat)
            })
            .map(|o| o.job.repeat)
            .max();
        if job.precision.is_none() || last != Some(job.repeat) {
            continue;
        }
        let complete = index
            .cohorts
            .iter()
            .any(|e| e.name == job.name && e.outcome == Outcome::Complete);
        if let (true, Some(why)) = (complete, crate::settle::stopped(job, &cohorts_dir, &index)) {
            console.progress(&format!("{}: {why}", job.name));
            if let Some(e) = index.cohorts.iter_mut().find(|e| e.name == job.name) {
                e.reason = Some(why);
            }
        }
    }
    if let Some(run) = index.runs.last_mut() {
        run.wall_s = started.elapsed().as_secs_f64();
    }
    write_index(out, &index)?;
    console.output(&format!("{}\n", crate::table::table(&index)));
    console.progress(&format!("wrote {}", out.join("index.json").display()));

    report(out, plan, &node_line, &index, console)?;

    let has = |o: Outcome| index.cohorts.iter().any(|e| e.outcome == o);
    Ok(
        if interrupted.load(Ordering::SeqCst) || has(Outcome::Interrupted) {
            INTERRUPTED
        } else if has(Outcome::Failed) || has(Outcome::FailedEarlier) {
            exit::INCOMPLETE_COHORT
        } else if has(Outcome::NotRun) {
            STUDY_UNFINISHED
        } else {
            exit::COMPLETE
        },
    )
}

/// `CUDA_VISIBLE_DEVICES` as GPU indices, when it is a list of them.
fn visible_indices() -> Option<Vec<u32>> {
    let v = std::env::var("CUDA_VISIBLE_DEVICES").ok()?;
    v.split(',')
        .map(|s| s.trim().parse().ok())
        .collect::<Option<Vec<u32>>>()
        .filter(|l| !l.is_empty())
}

fn sibling(name: &str) -> Result<PathBuf, StudyError> {
    std::env::current_exe()
        .map(|p| p.with_file_name(name))
        .map_err(|source| StudyError::Io {
            what: "cannot find",
            path: PathBuf::from("the current executable"),
            source,
        })
}

fn create_dir(path: &Path) -> Result<(), StudyError> {
    std::fs::create_dir_all(path).map_err(|source| StudyError::Io {
        what: "cannot create",
        path: path.to_owned(),
        source,
    })
}

/// The build running this study: `0.1.0 (git 94b322903b28)`.
fn build() -> String {
    format!(
        "{} (git {})",
        env!("CARGO_PKG_VERSION"),
        option_env!("COLOAD_GIT_REVISION").unwrap_or("revision not recorded in this build")
    )
}

/// The index an earlier run of this study left in `out`, if any. One that cannot be read, or
/// that belongs to another plan, is ignored with a line saying so: its cohorts are still found
/// from their folders, only the times it recorded are lost.
fn previous_index(out: &Path, plan: &str, console: &dyn Console) -> Option<Index> {
    let path = out.join("index.json");
    if !path.is_file() {
        return None;
    }
    match coload_cohort_schema::read_document::<Index>(&path) {
        Ok(i) if i.plan == plan => Some(i),
        Ok(i) => {
            console.progress(&format!(
                "{}: written by plan `{}`, not `{plan}`: its run times are not carried over",
                path.display(),
                i.plan
            ));
            None
        }
        Err(e) => {
            console.progress(&format!(
                "{}: {e}: earlier runs' times are not carried over",
                path.display()
            ));
            None
        }
    }
}

/// The plan's `jobs` with the re-runs of baselines that earlier runs added to their blocks
/// (`block`), each where the earlier index lists it (before the plan's cohort that followed it
/// there): each is found again from its folder.
fn with_earlier_reruns(
    jobs: &[Job],
    in_plan: &std::collections::HashSet<&str>,
    earlier: Option<&Index>,
) -> Vec<Job> {
    let Some(earlier) = earlier else {
        return jobs.to_vec();
    };
    let in_plan = |name: &str| in_plan.contains(name);
    // (the plan's cohort it came before, or none: last; the re-run)
    let mut reruns: Vec<(Option<&str>, Job)> = Vec::new();
    for (k, e) in earlier.cohorts.iter().enumerate() {
        if in_plan(&e.name) {
            continue;
        }
        if let Some((job, _)) = crate::block::parse_rerun(&e.name, jobs) {
            let next = earlier.cohorts[k + 1..]
                .iter()
                .map(|o| o.name.as_str())
                .find(|n| in_plan(n));
            reruns.push((next, job));
        }
    }
    let mut out = Vec::with_capacity(jobs.len() + reruns.len());
    for j in jobs {
        out.extend(
            reruns
                .iter()
                .filter(|(next, _)| *next == Some(j.name.as_str()))
                .map(|(_, r)| r.clone()),
        );
        out.push(j.clone());
    }
    out.extend(
        reruns
            .iter()
            .filter(|(next, _)| next.is_none())
            .map(|(_, r)| r.clone()),
    );
    out
}

/// Keeps the times an earlier run recorded for a cohort this run does not run again (complete
/// or failed earlier), so that the study's index adds up to its whole wall time. Only from the
/// same completed run: a cohort whose experiment differs from the earlier entry's keeps none.
fn carry_times(e: &mut Entry, earlier: &Index) {
    if !matches!(e.outcome, Outcome::AlreadyComplete | Outcome::FailedEarlier) {
        return;
    }
    let Some(old) = earlier.cohorts.iter().find(|o| o.name == e.name) else {
        return;
    };
    if e.experiment.is_some() && old.experiment.is_some() && e.experiment != old.experiment {
        return;
    }
    e.duration_s = old.duration_s;
    e.in_windows_s = old.in_windows_s;
    e.run = old.run;
    if e.lanes.is_none() {
        e.lanes.clone_from(&old.lanes);
    }
}

fn write_index(out: &Path, index: &Index) -> Result<(), StudyError> {
    let path = out.join("index.json");
    coload_cohort_schema::write_json_atomic(&path, index)
        .map_err(|e| StudyError::Write(path, Box::new(e)))
}

fn minutes(s: f64) -> String {
    format!("{:.0} min ({:.0} s)", s / 60.0, s)
}

fn dry_run(items: &[Item], node: &dyn Offer, lanes: &[u32], est: &Estimator) -> String {
    let mut out = String::from("order  cohort  workers  where  state  expected s\n");
    let mut k = 0;
    for i in items {
        let (state, place) = if i.queued {
            k += 1;
            let p = node
                .place(&i.job, &i.job.on_lanes(lanes))
                .map(|p| placement_words(&p));
            ("to run".to_owned(), p.unwrap_or_default())
        } else {
            (
                format!(
                    "{}{}",
                    i.entry.outcome.as_str(),
                    i.entry
                        .reason
                        .as_ref()
                        .map_or_else(String::new, |r| format!(": {r}"))
                ),
                "-".to_owned(),
            )
        };
        let _ = writeln!(
            out,
            "{:>5}  {}  {}  {}  {}  {:.0}",
            if i.queued {
                k.to_string()
            } else {
                "-".to_owned()
            },
            i.job.name,
            i.job.workers,
            place,
            state,
            if i.queued { est.seconds(&i.job) } else { 0.0 }
        );
    }
    let queue: Vec<&Job> = items.iter().filter(|i| i.queued).map(|i| &i.job).collect();
    // The windows the estimate counts: a run given another --window-s than its dry run takes
    // another time (quick's twelve cohorts about a minute less with 5 s windows than with its
    // own 10 s).
    let mut windows: Vec<f64> = queue.iter().map(|j| j.spec.flags.window_s.get()).collect();
    windows.sort_by(f64::total_cmp);
    windows.dedup();
    let windows = windows
        .iter()
        .map(|w| format!("{w}"))
        .collect::<Vec<_>>()
        .join(", ");
    // Repeats asked to a precision stop once their shape is settled, never before the second:
    // the study takes between the queue without them and the whole queue.
    let fewest: Vec<&Job> = queue
        .iter()
        .filter(|j| j.precision.is_none() || j.repeat <= coload_analysis::ratio::MIN_REPEATS)
        .copied()
        .collect();
    let expected = if fewest.len() < queue.len() {
        format!(
            "{} if every shape repeated to a precision settles after its second repeat, at most \
             {}",
            minutes(expected_wall_s(&fewest, node, lanes, est)),
            minutes(expected_wall_s(&queue, node, lanes, est))
        )
    } else {
        minutes(expected_wall_s(&queue, node, lanes, est))
    };
    let _ = writeln!(
        out,
        "{} cohorts to run, expected about {expected} on {} lane(s) with windows of {windows} s \
         ({})",
        queue.len(),
        lanes.len().max(1),
        est.describe()
    );
    out
}

fn placement_words(p: &Placement) -> String {
    if let Some(profile) = &p.mig_profile {
        return format!(
            "gpu {} MIG {profile}: {} (per worker)",
            p.label(),
            p.per_worker.join(",")
        );
    }
    if p.per_worker.is_empty() {
        format!("gpu {}", p.label())
    } else {
        format!("gpus {} (one per worker)", p.per_worker.join(","))
    }
}

/// Classifies each cohort as it ends, sets failed ones aside, and rewrites the index.
struct StudyEvents<'a> {
    progress: progress::Progress<'a>,
    out: &'a Path,
    cohorts: &'a Path,
    index: &'a mut Index,
    estimator: &'a Estimator,
    /// When this run started: its wall time goes into the index after every cohort.
    started: Instant,
    interrupted: &'a AtomicBool,
    write_error: Option<StudyError>,
    /// A cohort of this run has ended: the next carries no cold start.
    any_ended: bool,
    /// This run's number (1-based), recorded on every cohort it runs.
    run: u32,
    /// Cohorts the run before started and this one picks up: recorded with that run.
    picked_up: std::collections::BTreeSet<String>,
}

impl Events for StudyEvents<'_> {
    fn started(&mut self, job: &Job, placement: &Placement) {
        self.progress.started(job, placement);
    }

    fn settled(&mut self, job: &Job) -> Option<String> {
        let why = crate::settle::settled(job, self.cohorts, self.index)?;
        self.progress
            .line(&format!("{}: not needed: {why}", job.name));
        Some(why)
    }

    #[expect(
        clippy::too_many_lines,
        reason = "one arm per way a cohort ends, each setting its outcome, answer and times"
    )]
    fn ended(&mut self, job: &Job, placement: &Placement, result: &RunResult, elapsed: Duration) {
        self.progress.ended(job, placement, result, elapsed);
        let first = self.first_to_end();
        let dir = self.cohorts.join(&job.name);
        let Some(e) = self.index.cohorts.iter_mut().find(|e| e.name == job.name) else {
            return;
        };
        e.lanes = Some(placement.label());
        e.run = if self.picked_up.contains(&job.name) {
            self.run.checked_sub(1).filter(|r| *r > 0)
        } else {
            Some(self.run)
        };
        e.duration_s = Some(elapsed.as_secs_f64());
        e.in_windows_s = None;
        e.reason = None;
        let window = job.spec.flags.window_s.get();
        let (outcome, code, reason) = match result {
            RunResult::Exited(ended) => {
                let code = ended.code;
                let interrupted =
                    self.interrupted.load(Ordering::SeqCst) || code == Some(i32::from(INTERRUPTED));
                let measured_isolation = job
                    .holds_a_hog()
                    .then(|| resume::isolation_measured(&dir, job))
                    .flatten();
                match (code, interrupted) {
                    (Some(0), _) if job.finds_capacity() => match resume::capacity_of(&dir, job) {
                        Ok(r) => {
                            self.estimator.observe(
                                job,
                                r.probes.len().try_into().unwrap_or(1),
                                elapsed,
                                first,
                            );
                            e.capacity = Some(resume::capacity_answer(&r));
                            e.in_windows_s = Some(window * r.probes.len() as f64);
                            (Outcome::Complete, code, None)
                        }
                        Err(why) => (
                            Outcome::Failed,
                            code,
                            Some(format!("exit 0 but no finished capacity.json: {why}")),
                        ),
                    },
                    (Some(0), _) => match resume::summary_of(&dir.join("summary.json"), job) {
                        Ok(s) => {
                            self.estimator.observe(job, 1, elapsed, first);
                            e.experiment = Some(s.experiment);
                            e.in_windows_s = Some(window);
                            (Outcome::Complete, code, None)
                        }
                        Err(why) => (
                            Outcome::Failed,
                            code,
                            Some(format!("exit 0 but no valid summary.json: {why}")),
                        ),
                    },
                    (_, true) => (Outcome::Interrupted, code, Some("interrupted".to_owned())),
                    // Beside a hog, the others running out of memory is the measurement.
                    (Some(_), false) if measured_isolation.is_some() => {
                        let (experiment, answer) = measured_isolation.unwrap_or_default();
                        e.experiment = Some(experiment);
                        e.isolation = Some(answer);
                        // The others ran out of memory before their window: none ran.
                        e.in_windows_s = Some(0.0);
                        (Outcome::Complete, code, None)
                    }
                    (Some(c), false) => {
                        let exit_words = || format!("exit {c} ({})", exit::describe(c));
                        let why = match job.finds_capacity().then(|| probe_failure(&dir)) {
                            Some(Some((probe, probe_dir))) => match cohort_failure(&probe_dir) {
                                Some(f) => format!("{probe}: {f}"),
                                None => format!("{probe}: {}", exit_words()),
                            },
                            _ => cohort_failure(&dir).unwrap_or_else(exit_words),
                        };
                        (Outcome::Failed, code, Some(why))
                    }
                    (None, false) => (Outcome::Failed, None, Some("killed by a signal".to_owned())),
                }
            }
            RunResult::StartFailed(why) => (
                Outcome::Failed,
                None,
                Some(format!("could not start: {why}")),
            ),
            RunResult::NotRun(why) => (Outcome::NotRun, None, Some(why.clone())),
            RunResult::Settled(why) => (Outcome::Settled, None, Some(why.clone())),
        };
        e.outcome = outcome;
        e.exit_code = code;
        e.reason.clone_from(&reason);
        let kind = match outcome {
            Outcome::Failed => Some("failed"),
            Outcome::Interrupted => Some("interrupted"),
            _ => None,
        };
        if let (Some(kind), true) = (kind, dir.exists()) {
            let record = FailureRecord {
                exit_code: code,
                reason: reason.unwrap_or_default(),
            };
            if let Some(to) = self.set_aside(job, &dir, kind, &record)
                && outcome == Outcome::Failed
                && let Some(e) = self.index.cohorts.iter_mut().find(|e| e.name == job.name)
            {
                e.failed_dirs.push(to);
            }
        }
        self.count_run(result);
        if let Err(err) = write_index(self.out, self.index) {
            self.write_error.get_or_insert(err);
        }
    }

    fn tick(&mut self) {
        self.progress.tick();
    }
}

impl StudyEvents<'_> {
    /// Whether the cohort ending now is the first of this run to end (the one that paid the
    /// cold start the estimate counts apart, whether it completed or not).
    fn first_to_end(&mut self) -> bool {
        !std::mem::replace(&mut self.any_ended, true)
    }

    /// This run's wall time so far and its cohorts, in the index.
    fn count_run(&mut self, result: &RunResult) {
        if let Some(run) = self.index.runs.last_mut() {
            run.wall_s = self.started.elapsed().as_secs_f64();
            if !matches!(result, RunResult::NotRun(_)) {
                run.cohorts_run += 1;
            }
        }
    }

    /// Writes `record` into the ended cohort's folder `dir` and renames the folder
    /// `<name>.<kind>-<k>`; returns the new name relative to the study.
    fn set_aside(
        &mut self,
        job: &Job,
        dir: &Path,
        kind: &str,
        record: &FailureRecord,
    ) -> Option<String> {
        if let Ok(bytes) = serde_json::to_vec_pretty(record) {
            let _ = std::fs::write(dir.join(FAILURE_FILE), bytes);
        }
        match resume::set_aside(self.cohorts, &job.name, kind) {
            Ok(to) => {
                let to = relative(self.out, &to);
                self.progress.line(&format!("  kept as {to}"));
                Some(to)
            }
            Err(err) => {
                self.progress.line(&format!(
                    "  warning: cannot rename {}: {err}",
                    dir.display()
                ));
                None
            }
        }
    }
}

/// Which probe of a failed capacity search did not complete, from its `capacity.json`:
/// `capacity probe 3 at 1200 requests/s did not complete (probe-3-1200)`, and that probe's
/// folder.
fn probe_failure(dir: &Path) -> Option<(String, PathBuf)> {
    let r: coload_cohort_schema::CapacityReport =
        coload_cohort_schema::read_document(&dir.join(files::CAPACITY)).ok()?;
    let (k, p) = r
        .probes
        .iter()
        .enumerate()
        .find(|(_, p)| p.passed.is_none())?;
    let name = Path::new(&p.dir)
        .file_name()
        .map_or_else(|| p.dir.clone(), |n| n.to_string_lossy().into_owned());
    Some((
        format!(
            "capacity probe {} at {} requests/s did not complete ({name})",
            k + 1,
            p.rate_per_s,
        ),
        dir.join(&name),
    ))
}

/// Why a cohort failed, from the `failure.json` its launcher wrote: `replica 3:
/// out_of_memory: failed in window: CUDA out of memory ...`.
fn cohort_failure(dir: &Path) -> Option<String> {
    let f: CohortFailure =
        coload_cohort_schema::read_document(&dir.join(files::COHORT_FAILURE)).ok()?;
    Some(if f.message.is_empty() {
        f.short()
    } else {
        format!("{}: {}", f.short(), f.message)
    })
}

/// Compares the complete cohorts against the solo baselines and writes `report/`
/// ([`coload_report::study_report`]).
fn report(
    out: &Path,
    plan: &Plan,
    node_line: &str,
    index: &Index,
    console: &dyn Console,
) -> Result<(), StudyError> {
    let about = coload_report::study_report::About {
        title: format!("coload study: {}", plan.name),
        description: plan
            .description
            .clone()
            .unwrap_or_else(|| "a coload study".to_owned()),
        node: node_line.to_owned(),
    };
    let written = coload_report::study_report::write(out, &about, index)
        .map_err(|e| StudyError::Write(out.join("report"), Box::new(e)))?;
    for w in &written.warnings {
        console.progress(&format!("warning: {w}"));
    }
    match written.dir {
        Some(dir) => console.progress(&format!(
            "wrote {0}/comparison.json, {0}/comparison.md and {0}/report.html",
            dir.display()
        )),
        None => console.progress("no complete cohort yet: no report"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_args(argv: &[&str]) -> Result<StudyArgs, clap::Error> {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            study: StudyArgs,
        }
        let mut full = vec!["study"];
        full.extend_from_slice(argv);
        <Cli as clap::Parser>::try_parse_from(full).map(|c| c.study)
    }

    /// `study frontier --mix ... --slo-ms ...` makes the plan for the mix; the flags are refused
    /// with another plan, and a bad mix or objective is refused naming it.
    #[test]
    fn the_frontier_plan_is_made_from_the_command_line() {
        let load = |argv: &[&str]| parse_args(argv).unwrap().load_plan();
        let plan = load(&[
            "frontier",
            "--out",
            "o",
            "--mix",
            "serve-llm=1,train=3",
            "--ttft-slo-ms",
            "500",
            "--tpot-slo-ms",
            "50",
        ])
        .unwrap();
        assert!(
            plan.text
                .contains("--mix serve-llm=1,train=3 --ttft-slo-ms 500 --tpot-slo-ms 50")
        );
        assert!(
            plan.jobs(false)
                .iter()
                .any(|j| j.name == "mps-replicas-7-serve-llm1-train3-capacity-r1")
        );
        // Without flags: the built-in default, serve=1,train=6 at 10 ms.
        let plan = load(&["frontier", "--out", "o"]).unwrap();
        assert_eq!(plan.text, include_str!("../plans/frontier.toml"));
        let refused = |argv: &[&str]| load(argv).unwrap_err().to_string();
        assert!(
            refused(&["quick", "--out", "o", "--mix", "serve=1,train=1"])
                .contains("make the built-in `frontier` plan")
        );
        assert!(
            refused(&["frontier", "--out", "o", "--mix", "train=4"])
                .contains("exactly one serve or serve-llm worker")
        );
        assert!(
            refused(&[
                "frontier",
                "--out",
                "o",
                "--mix",
                "serve=1,train=2",
                "--ttft-slo-ms",
                "5"
            ])
            .contains("a serve endpoint takes --slo-ms")
        );
        assert!(refused(&["frontier", "--out", "o", "--mix", "serve=1,train=0"]).contains("--mix"));
        // --precision reaches the plan; --max-repeats alone is refused by the parser.
        let plan = load(&[
            "quick",
            "--out",
            "o",
            "--precision",
            "0.02",
            "--max-repeats",
            "4",
        ])
        .unwrap();
        assert!(
            plan.jobs(true)
                .iter()
                .any(|j| j.name == "timeslice-train2-r4")
        );
        assert!(parse_args(&["quick", "--out", "o", "--max-repeats", "4"]).is_err());
    }

    /// `--window-s` is laid over every cohort of the plan, whichever backend asks for the jobs
    /// (the node's and the cluster's both take them from `StudyArgs::jobs`).
    #[test]
    fn the_window_override_reaches_every_cohort() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            study: StudyArgs,
        }
        let parse = |extra: &[&str]| {
            let mut argv = vec!["study", "quick", "--out", "runs/q"];
            argv.extend_from_slice(extra);
            <Cli as clap::Parser>::try_parse_from(argv).unwrap().study
        };
        let plan = Plan::load("quick").unwrap();
        let args = parse(&["--window-s", "3.5"]);
        for cpu in [true, false] {
            let jobs = args.jobs(&plan, cpu);
            assert!(!jobs.is_empty());
            assert!(
                jobs.iter()
                    .all(|j| j.spec.flags.window_s == Seconds::new(3.5).unwrap())
            );
        }
        // Without it, the plan's own windows.
        assert_eq!(parse(&[]).jobs(&plan, true), plan.jobs(true));
    }
}
