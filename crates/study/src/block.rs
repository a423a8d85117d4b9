//! A run's baseline block: every ratio divides by solos of the same card in the same run of the
//! study, because a card drifts between runs (a study resumed after a pause, or on another
//! node, may find its card faster or slower). A fresh run's plan already brackets its cohorts
//! with their baselines (first, between the rounds, last). A resumed run whose cohorts need a
//! workload whose baselines ran in an earlier run re-runs those baselines in its own block, as
//! the fresh schedule places them: the first before its first round, the last after its last,
//! the others spread between ([`crate::plan`]'s `baseline_slots`), as many as the plan runs of
//! that baseline and at least two.
//!
//! A re-run is a cohort of its own, `<shape>-run<k>-r<j>` (`exclusive-train1-run2-r1`: the
//! first re-run of `exclusive-train1` in run 2), with the plan's baseline spec; a later run
//! finds it complete by that name and keeps it in its index, so the run that measured it keeps
//! its block.
//!
//! A block is also one card: a study on several lanes (GPUs of this node) places its cohorts
//! on whichever lane is free, so each card that may run a workload's cohorts runs that
//! workload's baseline too ([`per_lane`]). Each of the plan's baseline repeats becomes one job
//! per such lane, pinned to it (`Job::lane`) and named `<shape>-lane<l>-r<j>`
//! (`exclusive-train1-lane1-r2`: the second repeat of `exclusive-train1` on lane 1); the copies
//! take the repeat's slot one after the other, lane by lane, each alone on the host. A study
//! on one lane, or whose workload can run on one lane only, keeps the plan's names. A resumed
//! run re-runs a lane's copy as above, pinned to the same lane
//! (`exclusive-train1-lane1-run2-r1`).

use std::collections::BTreeSet;

use coload_cohort_schema::Workload;

use crate::node::Offer;
use crate::plan::{Job, baseline_slots};
use crate::settle::shape_of;

/// A cohort of the plan as the run about to start sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Planned<'a> {
    /// The cohort.
    pub(crate) job: &'a Job,
    /// It runs in this run.
    pub(crate) queued: bool,
    /// An earlier run completed it.
    pub(crate) complete_earlier: bool,
}

/// The plan's shape of a baseline: `exclusive-train1` of `exclusive-train1-r2` and of its
/// re-run `exclusive-train1-run2-r1`.
fn plan_shape(job: &Job) -> &str {
    let shape = shape_of(&job.name, job.repeat);
    match shape.rsplit_once("-run") {
        Some((plan, run)) if !run.is_empty() && run.bytes().all(|b| b.is_ascii_digit()) => plan,
        _ => shape,
    }
}

/// Baseline `base` (any repeat of its shape, or a re-run of it) as its `k`-th re-run in run
/// `run`.
pub(crate) fn rerun(base: &Job, run: u32, k: u32) -> Job {
    let mut job = base.clone();
    job.name = format!("{}-run{run}-r{k}", plan_shape(base));
    job.repeat = k;
    job
}

/// The re-run a cohort name stands for, of one of the plan's baseline `jobs`: the job and the
/// run that added it. `None` for any other name.
pub(crate) fn parse_rerun(name: &str, jobs: &[Job]) -> Option<(Job, u32)> {
    let (rest, k) = name.rsplit_once("-r")?;
    let k: u32 = k.parse().ok()?;
    let (shape, run) = rest.rsplit_once("-run")?;
    let run: u32 = run.parse().ok()?;
    let base = jobs.iter().find(|j| j.baseline && plan_shape(j) == shape)?;
    let job = rerun(base, run, k);
    (job.name == name).then_some((job, run))
}

/// `jobs` with each baseline repeat as one copy per lane that may run its workload's cohorts,
/// pinned there, in its place, lane by lane (see the module's text). A baseline stays as it is
/// on a CPU node, on one lane, or where fewer than two lanes both take the baseline and may
/// take a cohort of its workload. A cohort may take a lane where it fits alone, and any lane
/// where it needs several (which ones it gets depends on what is free).
pub(crate) fn per_lane(jobs: Vec<Job>, node: &dyn Offer, lanes: &[u32], cpu: bool) -> Vec<Job> {
    if cpu || lanes.len() < 2 {
        return jobs;
    }
    let fits = |job: &Job, lane: u32| node.place(job, &[lane]).is_ok();
    let may_take = |job: &Job, lane: u32| {
        fits(job, lane) || node.place(job, lanes).is_ok_and(|p| p.gpus.len() > 1)
    };
    let mut out = Vec::with_capacity(jobs.len());
    for job in &jobs {
        let workload = workload_of(job).filter(|_| job.baseline && job.lane.is_none());
        let Some(workload) = workload else {
            out.push(job.clone());
            continue;
        };
        let cohorts: Vec<&Job> = jobs
            .iter()
            .filter(|c| !c.baseline && c.mix.workloads().contains(&workload))
            .collect();
        let on: Vec<u32> = lanes
            .iter()
            .copied()
            .filter(|&l| fits(job, l) && cohorts.iter().any(|c| may_take(c, l)))
            .collect();
        if on.len() < 2 {
            out.push(job.clone());
            continue;
        }
        let shape = shape_of(&job.name, job.repeat);
        for lane in on {
            let mut copy = job.clone();
            copy.name = format!("{shape}-lane{lane}-r{}", job.repeat);
            copy.lane = Some(lane);
            out.push(copy);
        }
    }
    out
}

/// The one workload of a baseline (a solo).
fn workload_of(job: &Job) -> Option<Workload> {
    match job.mix.workloads() {
        [w] => Some(*w),
        _ => None,
    }
}

/// The baselines run `run` re-runs into its own block, each with its place: before the cohort
/// at that index of `plan` (`plan.len()`: after the last). A baseline is re-run when a cohort
/// queued in this run holds its workload and an earlier run completed one of its repeats (that
/// repeat is of another block); the plan's own repeats still to run stay where they are.
pub(crate) fn reruns(plan: &[Planned<'_>], run: u32) -> Vec<(usize, Job)> {
    let queued: Vec<(usize, &Job)> = plan
        .iter()
        .enumerate()
        .filter(|(_, p)| p.queued && !p.job.baseline)
        .map(|(i, p)| (i, p.job))
        .collect();
    let needed: BTreeSet<Workload> = queued
        .iter()
        .flat_map(|(_, j)| j.mix.workloads().iter().copied())
        .collect();
    // The rounds of this run: where each of its repeat numbers first appears, in order.
    let mut rounds: Vec<usize> = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, j) in &queued {
        if seen.insert(j.repeat) {
            rounds.push(*i);
        }
    }
    let mut shapes: Vec<(&str, &Job, u32)> = Vec::new();
    for p in plan.iter().filter(|p| p.job.baseline) {
        let shape = plan_shape(p.job);
        match shapes.iter_mut().find(|(s, _, _)| *s == shape) {
            Some((_, _, n)) => *n = (*n).max(p.job.repeat),
            None => shapes.push((shape, p.job, p.job.repeat)),
        }
    }
    let mut out = Vec::new();
    for (shape, base, repeats) in shapes {
        let earlier = plan
            .iter()
            .any(|p| p.complete_earlier && p.job.baseline && plan_shape(p.job) == shape);
        let wanted = workload_of(base).is_some_and(|w| needed.contains(&w));
        if !(earlier && wanted) {
            continue;
        }
        let slots = baseline_slots(repeats.max(2), rounds.len() as u32);
        for (k, slot) in slots.into_iter().enumerate() {
            let at = rounds.get(slot as usize).copied().unwrap_or(plan.len());
            out.push((at, rerun(base, run, k as u32 + 1)));
        }
    }
    // Stable: at one place, the baselines in plan order and each one's re-runs in order.
    out.sort_by_key(|(at, _)| *at);
    out
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;
    use crate::plan::Plan;

    const PLAN: &str = r#"
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
workers = "infer=1"
policies = ["exclusive"]
baseline = true
repeats = 2
[[cohort]]
workers = "train=2"
policies = ["timeslice"]
repeats = 4
"#;

    /// The plan's order with the names done in earlier runs; the rest queued.
    fn order(jobs: &[Job], done: &[&str], run: u32) -> Vec<String> {
        let planned: Vec<Planned<'_>> = jobs
            .iter()
            .map(|j| Planned {
                job: j,
                queued: !done.contains(&j.name.as_str()),
                complete_earlier: done.contains(&j.name.as_str()),
            })
            .collect();
        let extra = reruns(&planned, run);
        let mut out = Vec::new();
        for (i, p) in planned.iter().enumerate() {
            out.extend(
                extra
                    .iter()
                    .filter(|(at, _)| *at == i)
                    .map(|(_, j)| j.name.clone()),
            );
            if p.queued {
                out.push(p.job.name.clone());
            }
        }
        out.extend(
            extra
                .iter()
                .filter(|(at, _)| *at == planned.len())
                .map(|(_, j)| j.name.clone()),
        );
        out
    }

    #[test]
    fn a_fresh_run_adds_nothing() {
        let jobs = Plan::parse("t", PLAN).unwrap().jobs(false);
        let fresh = order(&jobs, &[], 1);
        assert_eq!(
            fresh,
            jobs.iter().map(|j| j.name.clone()).collect::<Vec<_>>()
        );
    }

    /// Run 1 ran the opening solos and two rounds; run 2 runs the last two rounds with the
    /// trainer's solo re-run at its start, between and at its end (three, as the plan runs it),
    /// before the plan's own closing solo. The inference solo, whose workload no queued cohort
    /// holds, is not re-run.
    #[test]
    fn a_resumed_run_brackets_its_rounds_with_its_own_solos() {
        let jobs = Plan::parse("t", PLAN).unwrap().jobs(false);
        let done = [
            "exclusive-train1-r1",
            "exclusive-infer1-r1",
            "timeslice-train2-r1",
            "timeslice-train2-r2",
            "exclusive-train1-r2",
        ];
        assert_eq!(
            order(&jobs, &done, 2),
            [
                "exclusive-train1-run2-r1",
                "timeslice-train2-r3",
                "exclusive-train1-run2-r2",
                "timeslice-train2-r4",
                "exclusive-train1-r3",
                "exclusive-infer1-r2",
                "exclusive-train1-run2-r3",
            ]
        );
        // Nothing but baselines left: no cohort needs a block of this run.
        let all_but_last: Vec<&str> = jobs
            .iter()
            .map(|j| j.name.as_str())
            .filter(|n| *n != "exclusive-train1-r3")
            .collect();
        assert_eq!(order(&jobs, &all_but_last, 2), ["exclusive-train1-r3"]);
    }

    fn two_gpus() -> crate::node::Node {
        crate::node::Node::from_listing(
            "GPU 0: NVIDIA H200 (UUID: GPU-a)\nGPU 1: NVIDIA H200 (UUID: GPU-b)\n",
            None,
            true,
        )
        .unwrap()
    }

    /// On two lanes each of the trainer's solos runs once per lane, pinned, in its slot; the
    /// inference solo, whose workload no cohort holds, stays as the plan has it. On one lane
    /// (or the CPU) nothing changes.
    #[test]
    fn two_lanes_run_each_baseline_on_each_lane() {
        let jobs = Plan::parse("t", PLAN).unwrap().jobs(false);
        let node = two_gpus();
        let split = per_lane(jobs.clone(), &node, &[0, 1], false);
        let named: Vec<(&str, Option<u32>)> =
            split.iter().map(|j| (j.name.as_str(), j.lane)).collect();
        assert_eq!(
            named,
            [
                ("exclusive-train1-lane0-r1", Some(0)),
                ("exclusive-train1-lane1-r1", Some(1)),
                ("exclusive-infer1-r1", None),
                ("timeslice-train2-r1", None),
                ("timeslice-train2-r2", None),
                ("exclusive-train1-lane0-r2", Some(0)),
                ("exclusive-train1-lane1-r2", Some(1)),
                ("timeslice-train2-r3", None),
                ("timeslice-train2-r4", None),
                ("exclusive-train1-lane0-r3", Some(0)),
                ("exclusive-train1-lane1-r3", Some(1)),
                ("exclusive-infer1-r2", None),
            ]
        );
        assert!(split.iter().filter(|j| j.lane.is_some()).all(|j| j.baseline
            && j.spec == jobs[0].spec
            && j.repeat == j.name.rsplit_once("-r").unwrap().1.parse::<u32>().unwrap()));
        assert_eq!(per_lane(jobs.clone(), &node, &[1], false), jobs);
        assert_eq!(per_lane(jobs.clone(), &node, &[0, 1], true), jobs);
        // A lane's copy re-run by a resumed run keeps its lane and is found again by its name.
        let copy = &split[1];
        let again = rerun(copy, 2, 1);
        assert_eq!(
            (again.name.as_str(), again.lane),
            ("exclusive-train1-lane1-run2-r1", Some(1))
        );
        let (found, run) = parse_rerun(&again.name, &split).unwrap();
        assert_eq!((found, run), (again, 2));
    }

    #[test]
    fn a_rerun_is_found_again_by_its_name() {
        let jobs = Plan::parse("t", PLAN).unwrap().jobs(false);
        let (job, run) = parse_rerun("exclusive-train1-run3-r2", &jobs).unwrap();
        assert_eq!(
            (job.name.as_str(), job.repeat, run),
            ("exclusive-train1-run3-r2", 2, 3)
        );
        assert!(job.baseline);
        assert_eq!(job.spec, jobs[0].spec);
        for other in [
            "exclusive-train1-r2",
            "timeslice-train2-run2-r1",
            "exclusive-train1-run-r1",
            "exclusive-train1-run2-rx",
            "nothing",
        ] {
            assert!(parse_rerun(other, &jobs).is_none(), "{other}");
        }
    }
}
