//! Running the queue: cohorts start in the plan's (interleaved) order on free lanes (GPUs), as
//! many at a time as there are lanes.
//!
//! Rules, in the order they are applied to the next cohort in the queue:
//! 1. A cohort that needs more lanes than are free (two real cards, or any cohort while every
//!    lane is busy) waits, and nothing behind it starts: order is kept and a two-GPU cohort is
//!    never starved by one-GPU cohorts slipping past it.
//! 2. A baseline (a solo marked `baseline = true`, the reference every ratio divides by) runs
//!    alone on the host: it waits until nothing runs, nothing behind it passes it, and nothing
//!    starts beside it. Eager workers are launch-bound, so a neighbour's CPU load slows them: on
//!    a 2-GPU H200 host a ResNet18 solo beside seven time-sliced trainers on the other GPU ran
//!    11 % slower than alone, which would have inflated every ratio against it.
//! 3. A cohort that holds the host (MPS: its daemon sees every GPU) waits while another such
//!    cohort runs; cohorts behind it may start meanwhile.
//! 4. A time budget, when given: a cohort that would not end within it is not started, nor is
//!    anything after it; they are left for the next run of the study.
//!
//! A job pinned to a lane (a baseline's copy for one card, `Job::lane`) is offered that lane
//! only: while it is busy the job waits as rule 1 says, and nothing behind it passes it.
//!
//! The processes are behind [`Launcher`], so the rules are tested without workers; what a lane
//! is and where a cohort fits is behind [`Offer`], so the same rules run a study on this node's
//! GPUs or on the nodes of a cluster (`coload-cluster`, where each node is a lane).

use std::path::Path;
use std::time::{Duration, Instant};

use crate::node::{Offer, Placement};
use crate::plan::Job;

/// How a cohort ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ended {
    /// Its exit code (bench-cohort's, or the cluster backend's equivalent); `None` when a
    /// signal ended it.
    pub code: Option<i32>,
}

/// A started cohort. When it ends, its folder holds `summary.json` (exit 0) or the
/// `failure.json` that says why.
pub trait Running {
    /// `Some` once it has ended.
    fn poll(&mut self) -> Option<Ended>;
    /// Asks it to stop (it is interrupted, finishes its workers' reports and exits).
    fn interrupt(&mut self);
}

/// Starts cohorts.
pub trait Launcher {
    /// The handle of a started cohort.
    type Run: Running;
    /// Starts `job` at `placement`, its folder `dir` (`cohorts/<name>/`).
    fn start(&mut self, job: &Job, placement: &Placement, dir: &Path)
    -> std::io::Result<Self::Run>;

    /// What an earlier run of `job`, stopped before it ended, left that this launcher picks up
    /// instead of running it again (a cluster's Job still there), in words; `None`: nothing, the
    /// cohort runs again.
    fn resumes(&mut self, _job: &Job) -> Option<String> {
        None
    }
}

/// What the scheduler reports as it goes.
pub(crate) trait Events {
    /// `job` started at `placement`.
    fn started(&mut self, job: &Job, placement: &Placement);
    /// `job` ended after `elapsed`.
    fn ended(&mut self, job: &Job, placement: &Placement, result: &RunResult, elapsed: Duration);
    /// Called about every poll: lets a progress bar tick.
    fn tick(&mut self) {}
    /// Why `job` need not run at all (its shape's earlier repeats settled what it would
    /// measure), asked just before it would start; `None`: run it.
    fn settled(&mut self, _job: &Job) -> Option<String> {
        None
    }
}

/// The outcome of one queued cohort.
#[derive(Debug)]
pub(crate) enum RunResult {
    /// It ran and exited.
    Exited(Ended),
    /// It could not be started.
    StartFailed(String),
    /// Not started: the study was interrupted or its time budget ran out.
    NotRun(String),
    /// Not started and not needed: its shape is settled (the reason says how).
    Settled(String),
}

/// The scheduler's view of time: seconds a cohort is expected to take.
pub(crate) trait Estimate {
    /// The seconds `job` is expected to take.
    fn seconds(&self, job: &Job) -> f64;
    /// The most seconds `job` may take (a capacity search's whole budget of probes): what the
    /// time budget counts.
    fn at_most(&self, job: &Job) -> f64 {
        self.seconds(job)
    }
}

/// Runs `queue` (jobs in order, by index) on `lanes` of `node`. `stop` is polled: when it
/// returns true, nothing more starts and the running cohorts are interrupted.
#[expect(
    clippy::too_many_arguments,
    clippy::too_many_lines,
    reason = "the scheduler's whole state and its rules in one loop, read top to bottom; every \
              argument is a seam the tests replace"
)]
pub(crate) fn run<L: Launcher>(
    queue: &[&Job],
    node: &dyn Offer,
    cohorts: &Path,
    lanes: &[u32],
    launcher: &mut L,
    events: &mut dyn Events,
    estimate: &dyn Estimate,
    budget: Option<Duration>,
    stop: &dyn Fn() -> bool,
    poll: Duration,
) -> Vec<(usize, RunResult, Option<Placement>)> {
    let begin = Instant::now();
    let mut results: Vec<(usize, RunResult, Option<Placement>)> = Vec::new();
    let mut pending: Vec<usize> = (0..queue.len()).collect();
    // On a CPU node there is one lane, the CPU, held by one cohort at a time.
    let cpu = node.is_cpu();
    let mut free: Vec<u32> = if cpu { vec![u32::MAX] } else { lanes.to_vec() };
    let mut running: Vec<(usize, L::Run, Placement, Instant)> = Vec::new();
    let mut stopping: Option<String> = None;
    loop {
        if stopping.is_none() && stop() {
            stopping = Some("the study was interrupted".to_owned());
            for (_, run, _, _) in &mut running {
                run.interrupt();
            }
        }
        if stopping.is_none() {
            let mut i = 0;
            while i < pending.len() {
                if running.iter().any(|(index, ..)| queue[*index].baseline) {
                    // Rule 2: a baseline just started; nothing beside it.
                    break;
                }
                let job = queue[pending[i]];
                if let Some(why) = events.settled(job) {
                    let index = pending.remove(i);
                    results.push((index, RunResult::Settled(why), None));
                    continue;
                }
                if job.baseline && !running.is_empty() {
                    // Rule 2: a baseline waits for the host to empty, and keeps the order.
                    break;
                }
                let placed = if cpu {
                    if free.is_empty() {
                        Err(crate::node::NotOffered::NoLanes.to_string())
                    } else {
                        node.place(job, &[])
                    }
                } else if job.on_lanes(lanes).is_empty() {
                    // Pinned to a lane the study does not run on: it never fits here.
                    let index = pending.remove(i);
                    let why = format!(
                        "pinned to lane {} and the study runs on lanes {lanes:?}",
                        job.lane.unwrap_or_default()
                    );
                    results.push((index, RunResult::NotRun(why), None));
                    continue;
                } else {
                    // A pinned job is offered its own lane only: while that is busy it waits
                    // like a cohort short of lanes (rule 1).
                    node.place(job, &job.on_lanes(&free))
                };
                let placement = match placed {
                    Ok(p) => p,
                    Err(why) if running.is_empty() => {
                        // Every lane is free and it still does not fit: it never will here.
                        // (The study leaves such cohorts out beforehand; this keeps the loop
                        // from waiting forever if one slips through.)
                        let index = pending.remove(i);
                        results.push((index, RunResult::NotRun(why), None));
                        continue;
                    }
                    // Rule 1: not enough free lanes; keep the order.
                    Err(_) => break,
                };
                let host_busy = running.iter().any(|(_, _, p, _)| p.host_exclusive);
                if placement.host_exclusive && host_busy {
                    // Rule 3.
                    i += 1;
                    continue;
                }
                if let Some(budget) = budget {
                    let need = begin.elapsed().as_secs_f64() + estimate.at_most(job);
                    if need > budget.as_secs_f64() {
                        // Rule 4.
                        stopping = Some(format!(
                            "the time budget ({:.0} s) would run out before it ends (about \
                             {:.0} s from the study's start)",
                            budget.as_secs_f64(),
                            need
                        ));
                        break;
                    }
                }
                let index = pending.remove(i);
                let held: Vec<u32> = if cpu {
                    vec![u32::MAX]
                } else {
                    placement.gpus.clone()
                };
                free.retain(|l| !held.contains(l));
                events.started(job, &placement);
                match launcher.start(job, &placement, &cohorts.join(&job.name)) {
                    Ok(run) => running.push((index, run, placement, Instant::now())),
                    Err(e) => {
                        free.extend(held);
                        free.sort_unstable();
                        let result = RunResult::StartFailed(e.to_string());
                        events.ended(job, &placement, &result, Duration::ZERO);
                        results.push((index, result, Some(placement)));
                    }
                }
            }
        }
        let mut k = 0;
        while k < running.len() {
            if let Some(ended) = running[k].1.poll() {
                let (index, _, placement, started) = running.remove(k);
                if cpu {
                    free.push(u32::MAX);
                } else {
                    free.extend(&placement.gpus);
                    free.sort_unstable();
                }
                let result = RunResult::Exited(ended);
                events.ended(queue[index], &placement, &result, started.elapsed());
                results.push((index, result, Some(placement)));
            } else {
                k += 1;
            }
        }
        if running.is_empty() && (pending.is_empty() || stopping.is_some()) {
            break;
        }
        events.tick();
        std::thread::sleep(poll);
    }
    let why = stopping.unwrap_or_default();
    for index in pending {
        results.push((index, RunResult::NotRun(why.clone()), None));
    }
    results
}

/// Runs `job` as a `bench-cohort` process of its own (`bin`), its stdout and stderr into
/// `<dir>/cohort.log`.
#[derive(Debug)]
pub(crate) struct ProcessLauncher {
    /// The bench-cohort executable.
    pub(crate) bin: std::path::PathBuf,
    /// The bench-worker executable, passed on.
    pub(crate) worker_bin: std::path::PathBuf,
}

/// A running `bench-cohort` process.
#[derive(Debug)]
pub(crate) struct Process(std::process::Child);

impl Running for Process {
    fn poll(&mut self) -> Option<Ended> {
        match self.0.try_wait() {
            Ok(Some(status)) => Some(Ended {
                code: status.code(),
            }),
            Ok(None) => None,
            Err(_) => Some(Ended { code: None }),
        }
    }

    fn interrupt(&mut self) {
        // SIGINT, as Ctrl-C sends it: bench-cohort aborts its cohort through the barrier and
        // its workers write their reports. (A terminal's Ctrl-C reaches it directly too; a
        // second SIGINT changes nothing.)
        let _ = std::process::Command::new("kill")
            .args(["-INT", &self.0.id().to_string()])
            .status();
    }
}

impl Launcher for ProcessLauncher {
    type Run = Process;

    fn start(&mut self, job: &Job, placement: &Placement, dir: &Path) -> std::io::Result<Process> {
        std::fs::create_dir_all(dir)?;
        let log = std::fs::File::create(dir.join("cohort.log"))?;
        let log_err = log.try_clone()?;
        let argv = crate::plan::cohort_argv(job, dir)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        let mut cmd = std::process::Command::new(&self.bin);
        // A study killed outright takes its cohorts (and they their workers) with it.
        coload_launch::die_with_parent(&mut cmd);
        cmd.args(&argv[1..])
            .arg("--worker-bin")
            .arg(&self.worker_bin)
            .stdin(std::process::Stdio::null())
            .stdout(log)
            .stderr(log_err);
        if !placement.per_worker.is_empty() {
            cmd.arg("--visible-devices")
                .arg(placement.per_worker.join(","));
        }
        match &placement.visible {
            Some(v) => {
                cmd.env("CUDA_VISIBLE_DEVICES", v);
            }
            None => {
                cmd.env_remove("CUDA_VISIBLE_DEVICES");
            }
        }
        cmd.spawn().map(Process)
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use super::*;
    use crate::node::Node;
    use crate::plan::Plan;

    /// A stand-in cohort that ends after `ticks` polls with `code`.
    struct Fake {
        ticks: u32,
        code: i32,
        name: String,
        log: Rc<RefCell<Vec<String>>>,
    }

    impl Running for Fake {
        fn poll(&mut self) -> Option<Ended> {
            if self.ticks == 0 {
                self.log.borrow_mut().push(format!("end {}", self.name));
                return Some(Ended {
                    code: Some(self.code),
                });
            }
            self.ticks -= 1;
            None
        }
        fn interrupt(&mut self) {
            self.ticks = 0;
            self.code = 130;
        }
    }

    struct FakeLauncher {
        log: Rc<RefCell<Vec<String>>>,
        ticks: fn(&Job) -> u32,
    }

    impl Launcher for FakeLauncher {
        type Run = Fake;
        fn start(&mut self, job: &Job, p: &Placement, _: &Path) -> std::io::Result<Fake> {
            self.log
                .borrow_mut()
                .push(format!("start {} on {}", job.name, p.label()));
            Ok(Fake {
                ticks: (self.ticks)(job),
                code: i32::from(job.name.contains("fail")) * 30,
                name: job.name.clone(),
                log: Rc::clone(&self.log),
            })
        }
    }

    struct NoEvents;
    impl Events for NoEvents {
        fn started(&mut self, _: &Job, _: &Placement) {}
        fn ended(&mut self, _: &Job, _: &Placement, _: &RunResult, _: Duration) {}
    }

    struct Fixed(f64);
    impl Estimate for Fixed {
        fn seconds(&self, _: &Job) -> f64 {
            self.0
        }
    }

    const PLAN: &str = r#"
[[policy]]
name = "exclusive"
mode = "exclusive"
[[policy]]
name = "timeslice"
mode = "timeslice"
[[policy]]
name = "mps"
mode = "mps"
flags = { mps_unlimited = true }
[[cohort]]
workers = "train=1"
policies = ["exclusive"]
baseline = true
[[cohort]]
workers = "train=4"
policies = ["mps", "timeslice"]
[[cohort]]
workers = "train=2"
policies = ["mps", "exclusive", "timeslice"]
"#;

    fn two_gpus() -> Node {
        Node::from_listing(
            "GPU 0: NVIDIA H200 (UUID: GPU-a)\nGPU 1: NVIDIA H200 (UUID: GPU-b)\n",
            None,
            true,
        )
        .unwrap()
    }

    fn schedule(node: &Node, lanes: &[u32], ticks: fn(&Job) -> u32) -> Vec<String> {
        schedule_plan(PLAN, node, lanes, ticks)
    }

    fn schedule_plan(
        text: &str,
        node: &Node,
        lanes: &[u32],
        ticks: fn(&Job) -> u32,
    ) -> Vec<String> {
        let plan = Plan::parse("t", text).unwrap();
        schedule_jobs(&plan.jobs(node.is_cpu()), node, lanes, ticks)
    }

    fn schedule_jobs(
        jobs: &[Job],
        node: &Node,
        lanes: &[u32],
        ticks: fn(&Job) -> u32,
    ) -> Vec<String> {
        let queue: Vec<&Job> = jobs.iter().collect();
        let log = Rc::new(RefCell::new(Vec::new()));
        let mut launcher = FakeLauncher {
            log: Rc::clone(&log),
            ticks,
        };
        let results = run(
            &queue,
            node,
            Path::new("cohorts"),
            lanes,
            &mut launcher,
            &mut NoEvents,
            &Fixed(1.0),
            None,
            &|| false,
            Duration::ZERO,
        );
        assert_eq!(results.len(), jobs.len());
        log.borrow().clone()
    }

    #[test]
    fn one_lane_runs_the_queue_in_order_one_at_a_time() {
        let log = schedule(
            &Node::from_listing("GPU 0: NVIDIA H200 (UUID: GPU-a)\n", None, true).unwrap(),
            &[0],
            |_| 1,
        );
        assert_eq!(
            log,
            [
                "start exclusive-train1-r1 on 0",
                "end exclusive-train1-r1",
                "start mps-train4-r1 on 0",
                "end mps-train4-r1",
                "start timeslice-train4-r1 on 0",
                "end timeslice-train4-r1",
                "start mps-train2-r1 on 0",
                "end mps-train2-r1",
                // exclusive-train2 needs two GPUs: it is passed over, never waited for.
                "start timeslice-train2-r1 on 0",
                "end timeslice-train2-r1",
            ]
        );
    }

    #[test]
    fn two_lanes_run_side_by_side_but_one_mps_cohort_at_a_time() {
        // The baseline runs alone (rule 2). Then mps-train4 runs long: the time-sliced cohort
        // behind it passes mps-train2, which waits for it (rule 3) but does not stop the queue.
        let log = schedule(&two_gpus(), &[0, 1], |j| {
            if j.name == "mps-train4-r1" { 6 } else { 1 }
        });
        assert_eq!(
            log,
            [
                "start exclusive-train1-r1 on 0",
                "end exclusive-train1-r1",
                "start mps-train4-r1 on 0",
                "start timeslice-train4-r1 on 1",
                "end timeslice-train4-r1",
                // mps-train2 waits for the MPS cohort; exclusive-train2 needs both lanes, so
                // nothing passes it (rule 1).
                "end mps-train4-r1",
                "start mps-train2-r1 on 0",
                "end mps-train2-r1",
                "start exclusive-train2-r1 on 0,1",
                "end exclusive-train2-r1",
                "start timeslice-train2-r1 on 0",
                "end timeslice-train2-r1",
            ]
        );
    }

    #[test]
    fn a_baseline_runs_alone_on_the_host() {
        // The baseline's second run comes between the rounds: it waits for the long first
        // cohort to end, the cohort behind it does not pass it, and nothing starts beside it
        // although a lane is free.
        let plan = r#"
[[policy]]
name = "exclusive"
mode = "exclusive"
[[policy]]
name = "timeslice"
mode = "timeslice"
[[cohort]]
workers = "train=4"
policies = ["timeslice"]
repeats = 2
[[cohort]]
workers = "train=1"
policies = ["exclusive"]
baseline = true
repeats = 3
[[cohort]]
workers = "train=2"
policies = ["timeslice"]
repeats = 2
"#;
        let log = schedule_plan(plan, &two_gpus(), &[0, 1], |j| {
            if j.name == "timeslice-train4-r1" {
                3
            } else {
                1
            }
        });
        assert_eq!(
            log,
            [
                "start exclusive-train1-r1 on 0",
                "end exclusive-train1-r1",
                "start timeslice-train4-r1 on 0",
                "start timeslice-train2-r1 on 1",
                "end timeslice-train2-r1",
                "end timeslice-train4-r1",
                "start exclusive-train1-r2 on 0",
                "end exclusive-train1-r2",
                "start timeslice-train4-r2 on 0",
                "start timeslice-train2-r2 on 1",
                "end timeslice-train4-r2",
                "end timeslice-train2-r2",
                "start exclusive-train1-r3 on 0",
                "end exclusive-train1-r3",
            ]
        );
    }

    #[test]
    fn a_pinned_job_runs_on_its_lane_only_and_waits_for_it_in_order() {
        let plan = r#"
[[policy]]
name = "timeslice"
mode = "timeslice"
[[cohort]]
workers = "train=1"
policies = ["timeslice"]
[[cohort]]
workers = "train=4"
policies = ["timeslice"]
[[cohort]]
workers = "train=2"
policies = ["timeslice"]
[[cohort]]
workers = "train=3"
policies = ["timeslice"]
"#;
        let mut jobs = Plan::parse("t", plan).unwrap().jobs(false);
        // train1 pinned to lane 1 takes it although lane 0 is free; train2 pinned to lane 0
        // waits for the long train4 there, and train3 behind it does not pass it although
        // lane 1 is free again.
        jobs[0].lane = Some(1);
        jobs[2].lane = Some(0);
        let log = schedule_jobs(&jobs, &two_gpus(), &[0, 1], |j| {
            if j.name == "timeslice-train4-r1" {
                3
            } else {
                1
            }
        });
        assert_eq!(
            log,
            [
                "start timeslice-train1-r1 on 1",
                "start timeslice-train4-r1 on 0",
                "end timeslice-train1-r1",
                "end timeslice-train4-r1",
                "start timeslice-train2-r1 on 0",
                "start timeslice-train3-r1 on 1",
                "end timeslice-train2-r1",
                "end timeslice-train3-r1",
            ]
        );
        // Pinned to a lane the study does not run on: never started, the rest runs.
        let mut off = Plan::parse("t", plan).unwrap().jobs(false);
        off[1].lane = Some(1);
        let log = schedule_jobs(&off, &two_gpus(), &[0], |_| 1);
        assert!(log.iter().all(|l| !l.contains("train4")), "{log:?}");
        assert_eq!(log.len(), 6);
    }

    #[test]
    fn on_two_lanes_each_lane_runs_its_own_baselines() {
        // The plan's baseline repeats as one pinned copy per lane (block::per_lane): each copy
        // runs on its own lane, alone on the host, in the baseline's slot, lane 0's first.
        let plan = r#"
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
repeats = 2
[[cohort]]
workers = "train=2"
policies = ["timeslice"]
repeats = 2
"#;
        let node = two_gpus();
        let jobs = crate::block::per_lane(
            Plan::parse("t", plan).unwrap().jobs(false),
            &node,
            &[0, 1],
            false,
        );
        let log = schedule_jobs(&jobs, &node, &[0, 1], |j| {
            if j.name == "timeslice-train2-r1" {
                3
            } else {
                1
            }
        });
        assert_eq!(
            log,
            [
                "start exclusive-train1-lane0-r1 on 0",
                "end exclusive-train1-lane0-r1",
                "start exclusive-train1-lane1-r1 on 1",
                "end exclusive-train1-lane1-r1",
                "start timeslice-train2-r1 on 0",
                "start timeslice-train2-r2 on 1",
                "end timeslice-train2-r2",
                "end timeslice-train2-r1",
                "start exclusive-train1-lane0-r2 on 0",
                "end exclusive-train1-lane0-r2",
                "start exclusive-train1-lane1-r2 on 1",
                "end exclusive-train1-lane1-r2",
            ]
        );
    }

    #[test]
    fn a_time_budget_leaves_the_rest_for_the_next_run() {
        let plan = Plan::parse("t", PLAN).unwrap();
        let jobs = plan.jobs(false);
        let queue: Vec<&Job> = jobs.iter().collect();
        let log = Rc::new(RefCell::new(Vec::new()));
        let mut launcher = FakeLauncher {
            log: Rc::clone(&log),
            ticks: |_| 0,
        };
        let node = Node::from_listing("GPU 0: X (UUID: GPU-a)\n", None, true).unwrap();
        let results = run(
            &queue,
            &node,
            Path::new("cohorts"),
            &[0],
            &mut launcher,
            &mut NoEvents,
            &Fixed(10.0),
            Some(Duration::from_secs(5)),
            &|| false,
            Duration::ZERO,
        );
        assert!(log.borrow().is_empty());
        assert!(
            results.iter().all(
                |(_, r, _)| matches!(r, RunResult::NotRun(why) if why.contains("time budget"))
            )
        );
    }

    #[test]
    fn an_interrupt_stops_the_queue_and_the_running_cohort() {
        let plan = Plan::parse("t", PLAN).unwrap();
        let jobs = plan.jobs(false);
        let queue: Vec<&Job> = jobs.iter().collect();
        let log = Rc::new(RefCell::new(Vec::new()));
        let mut launcher = FakeLauncher {
            log: Rc::clone(&log),
            ticks: |_| 1000,
        };
        let node = Node::from_listing("GPU 0: X (UUID: GPU-a)\n", None, true).unwrap();
        let polls = std::cell::Cell::new(0);
        let results = run(
            &queue,
            &node,
            Path::new("cohorts"),
            &[0],
            &mut launcher,
            &mut NoEvents,
            &Fixed(1.0),
            None,
            &|| {
                polls.set(polls.get() + 1);
                polls.get() > 3
            },
            Duration::ZERO,
        );
        assert_eq!(
            *log.borrow(),
            ["start exclusive-train1-r1 on 0", "end exclusive-train1-r1"]
        );
        assert!(matches!(
            results[0].1,
            RunResult::Exited(Ended { code: Some(130) })
        ));
        assert!(
            results[1..].iter().all(
                |(_, r, _)| matches!(r, RunResult::NotRun(why) if why.contains("interrupted"))
            )
        );
    }
}
