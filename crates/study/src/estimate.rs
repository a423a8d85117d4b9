//! How long a study will take: the dry run's estimate, the progress bar's weights and the time
//! budget's rule all ask here.
//!
//! A cohort costs its timed span (`WorkerFlags::timed_span`: the start lead and the window) plus
//! the setup outside it (process start, libtorch and CUDA load, warmup, barrier, writing and the
//! summary). A capacity search costs that once per probe, each probe a full cohort. The setup is
//! modelled from what the H200 studies of 2026-12-02 took (`docs/results/data/2026-12-02-frontier`
//! and `2026-12-02-share-sweep`: each cohort's `duration_s` against its timed span):
//!
//! - about 3 s for a cohort of one worker, and a third of a second more for each further worker
//!   (one trainer 13.1 to 13.7 s for a 10 s span, seven workers 14.5 to 15.9 s);
//! - about 3 s more per probe for a vision serve worker (the endpoint alone 18 s a probe of a
//!   12 s span); a serve-llm probe costs what any cohort of its size does;
//! - once per study, the first cohort's cold start (libtorch and CUDA from a cold page cache:
//!   23 to 28 s against 13 s for the same solo later);
//! - once per MPS share (`mps_replicas`), its first cohort starts about 6 s slower (every share's
//!   first trainer, 18 to 20 s against 12 s later in the same study).
//!
//! A capacity search ends at its budget (`max_probes`) unless it runs into a rate bound first (a
//! search that starts at its lowest rate and fails there is done after one probe), so it is
//! expected to take halfway between the fewest probes it could take and its budget; the time
//! budget's rule counts the budget, the most it may take. With these the estimate of every one
//! of those studies is within 5 % of its measured wall time (the tests check 20 %), where a flat
//! 25 s a cohort and every probe of every budget gave twice the wall time.
//!
//! The built-in `quick` plan, small cohorts of one or two workers with short windows, is held to
//! the same model by the one run of it on an H200 whose record is committed (round 4's check,
//! `2026-12-01-round4/round4-check.log`, with `--window-s 5`): 124 s estimated, 133 s measured
//! (-7 %). Its setup figures agree with the model's terms (a solo inference worker 2 s beyond its
//! span, a trainer 3.5 to 4 s, the first cohort 25 s); no term over-estimates it. A dry run
//! without the `--window-s` the run is given estimates the plan's own 10 s windows: 206 s for
//! the twelve cohorts, about 60 s more than the same cohorts with 5 s windows.
//!
//! The node's own cohorts then correct the model: the mean of what each measured cohort took
//! beyond the model is added to every cohort's setup, from this run's cohorts and, on resume,
//! from those of earlier runs.

use std::cell::Cell;
use std::collections::BTreeSet;
use std::time::Duration;

use coload_cohort_schema::Workload;

use crate::node::Offer;
use crate::plan::Job;
use crate::schedule::Estimate;

/// Seconds outside the timed span, by what a cohort holds (see the module's documentation for
/// where each figure comes from).
#[derive(Debug, Clone, Copy, PartialEq)]
#[expect(
    clippy::struct_field_names,
    reason = "every field is seconds, named with its unit as the house style asks"
)]
pub(crate) struct SetupModel {
    /// A cohort of one worker (or one probe of a search).
    pub per_cohort_s: f64,
    /// Each worker beyond the first.
    pub per_extra_worker_s: f64,
    /// A cohort (a probe) holding a vision `serve` worker.
    pub serve_s: f64,
    /// The study's first cohort: libtorch and CUDA from a cold cache.
    pub cold_start_s: f64,
    /// The first cohort under each MPS share (`mps_replicas`).
    pub new_mps_share_s: f64,
}

/// On a GPU node: measured on an H200 (module documentation).
pub(crate) const GPU_SETUP: SetupModel = SetupModel {
    per_cohort_s: 3.0,
    per_extra_worker_s: 0.35,
    serve_s: 3.0,
    cold_start_s: 11.0,
    new_mps_share_s: 6.0,
};

/// On a CPU node: the workers share two to a few cores, and loading libtorch dominates; one flat
/// figure, corrected by the node's own cohorts as they end.
pub(crate) const CPU_SETUP: SetupModel = SetupModel {
    per_cohort_s: 8.0,
    per_extra_worker_s: 0.0,
    serve_s: 0.0,
    cold_start_s: 0.0,
    new_mps_share_s: 0.0,
};

/// Expected seconds per cohort: the model's, corrected by what the node's cohorts took.
#[derive(Debug)]
pub(crate) struct Estimator {
    model: SetupModel,
    /// Sum and count of (measured setup - modelled setup) per cohort or probe.
    correction: Cell<(f64, u32)>,
}

/// The probes a search may run at most: its `max_probes` (one for a cohort that is no search).
pub(crate) fn most_probes(job: &Job) -> u32 {
    if job.finds_capacity() {
        job.spec.capacity.max_probes.max(1)
    } else {
        1
    }
}

/// The fewest probes a search can take: straight down to its lowest rate (every probe fails),
/// straight up to its highest (every probe passes), or a bracket bisected to the tolerance,
/// whichever is fewest, within its budget. The search ([`coload_launch::search`]) halves or
/// doubles the rate while bracketing and then halves the bracket's logarithm.
pub(crate) fn fewest_probes(job: &Job) -> u32 {
    let most = most_probes(job);
    if !job.finds_capacity() {
        return most;
    }
    let c = &job.spec.capacity;
    let start = c.start_per_s(job.spec.serve.rate);
    // Bounded: a rate is at most 1e6 times another (both checked by the spec), 64 steps is plenty.
    let steps =
        |mut rate: f64, bound: f64, step: fn(f64, f64) -> f64, done: fn(f64, f64) -> bool| {
            let mut n = 0u32;
            while !done(rate, bound) && n < 64 {
                rate = step(rate, bound);
                n += 1;
            }
            n
        };
    let down = 1 + steps(start, c.rate_min, |r, b| (r / 2.0).max(b), |r, b| r <= b);
    let up = 1 + steps(start, c.rate_max, |r, b| (r * 2.0).min(b), |r, b| r >= b);
    let tolerance = c.capacity_tolerance.max(1e-6);
    let bisections = (std::f64::consts::LN_2 / tolerance.ln_1p())
        .log2()
        .ceil()
        .max(0.0);
    let converge = 2 + bisections.min(64.0) as u32;
    down.min(up).min(converge).min(most)
}

/// The probes a search is expected to take: halfway between the fewest and its budget.
pub(crate) fn expected_probes(job: &Job) -> f64 {
    f64::midpoint(f64::from(fewest_probes(job)), f64::from(most_probes(job)))
}

impl Estimator {
    pub(crate) fn new(cpu: bool) -> Estimator {
        Estimator::with(if cpu { CPU_SETUP } else { GPU_SETUP })
    }

    pub(crate) fn with(model: SetupModel) -> Estimator {
        Estimator {
            model,
            correction: Cell::new((0.0, 0)),
        }
    }

    /// The model's setup of one cohort (or probe) of `job`, before any correction.
    fn modelled_setup_s(&self, job: &Job) -> f64 {
        let m = &self.model;
        let extra = job.count.saturating_sub(1);
        let serve = job.mix.workloads().contains(&Workload::Serve);
        m.per_cohort_s
            + m.per_extra_worker_s * f64::from(extra)
            + if serve { m.serve_s } else { 0.0 }
    }

    /// Setup of one cohort (or probe) of `job`: the model's and the node's mean correction.
    pub(crate) fn setup_s(&self, job: &Job) -> f64 {
        let (sum, n) = self.correction.get();
        let mean = if n == 0 { 0.0 } else { sum / f64::from(n) };
        (self.modelled_setup_s(job) + mean).max(0.0)
    }

    /// How many measured cohorts correct the model.
    #[cfg(test)]
    pub(crate) fn measured(&self) -> u32 {
        self.correction.get().1
    }

    /// The dry run's words for the setup it counted: the model, and the node's correction.
    pub(crate) fn describe(&self) -> String {
        let m = &self.model;
        let (sum, n) = self.correction.get();
        let model = format!(
            "setup outside each window: {:.0} s a cohort, {:.2} s more a further worker, {:.0} s \
             more a serve worker, {:.0} s once for the first cohort, {:.0} s once for each MPS \
             share; a capacity search halfway between its fewest probes and max_probes",
            m.per_cohort_s, m.per_extra_worker_s, m.serve_s, m.cold_start_s, m.new_mps_share_s
        );
        if n == 0 {
            format!("{model}; no cohort of this node measured yet")
        } else {
            format!(
                "{model}; corrected by {:+.1} s a cohort, as {n} cohort{} of earlier runs took it",
                sum / f64::from(n),
                if n == 1 { "" } else { "s" }
            )
        }
    }

    /// Learns from a job that ran `cohorts` cohorts (probes) in `elapsed`; `first`: it was the
    /// first cohort of its run, whose cold start the model counts apart.
    pub(crate) fn observe(&self, job: &Job, cohorts: u32, elapsed: Duration, first: bool) {
        let timed = job.spec.flags.timed_span().as_secs_f64();
        let once = if first { self.model.cold_start_s } else { 0.0 };
        let per_cohort = (elapsed.as_secs_f64() - once) / f64::from(cohorts.max(1));
        let off = (per_cohort - timed) - self.modelled_setup_s(job);
        let (sum, n) = self.correction.get();
        self.correction.set((sum + off, n + 1));
    }

    /// Seconds a queue's cohorts pay once: the first's cold start, and each MPS share's first
    /// cohort; `seen` holds the shares met so far.
    fn once_s(&self, job: &Job, first: bool, seen: &mut BTreeSet<u32>) -> f64 {
        let cold = if first { self.model.cold_start_s } else { 0.0 };
        let share = match job.spec.flags.mps_replicas {
            Some(r) if job.mode == coload_cohort_schema::Mode::Mps && seen.insert(r) => {
                self.model.new_mps_share_s
            }
            _ => 0.0,
        };
        cold + share
    }

    fn cohort_s(&self, job: &Job, probes: f64) -> f64 {
        probes * (job.spec.flags.timed_span().as_secs_f64() + self.setup_s(job))
    }
}

impl Estimate for Estimator {
    /// A capacity search counts its expected probes ([`expected_probes`]).
    fn seconds(&self, job: &Job) -> f64 {
        self.cohort_s(job, expected_probes(job))
    }

    /// A capacity search counts its whole budget: the time budget starts nothing that might
    /// not end within it.
    fn at_most(&self, job: &Job) -> f64 {
        self.cohort_s(job, f64::from(most_probes(job)))
    }
}

/// Wall seconds for `queue` on `lanes`: greedy list scheduling of the estimates, with MPS
/// cohorts one at a time and multi-GPU cohorts holding their lanes (the scheduler's rules,
/// approximately), plus what the queue pays once (the first cohort's cold start, each MPS
/// share's first cohort).
pub(crate) fn expected_wall_s(
    queue: &[&Job],
    node: &dyn Offer,
    lanes: &[u32],
    est: &Estimator,
) -> f64 {
    let n = lanes.len().max(1);
    let mut lane_free = vec![0.0f64; n];
    let mut host_free = 0.0f64;
    let mut shares = BTreeSet::new();
    for (i, job) in queue.iter().enumerate() {
        let p = node.place(job, &job.on_lanes(lanes)).ok();
        let k = p.as_ref().map_or(1, |p| p.gpus.len().max(1)).min(n);
        let host = p.as_ref().is_some_and(|p| p.host_exclusive);
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|a, b| lane_free[*a].total_cmp(&lane_free[*b]));
        let held = &order[..k];
        let mut start = held.iter().map(|i| lane_free[*i]).fold(0.0, f64::max);
        if host {
            start = start.max(host_free);
        }
        let end = start + est.seconds(job) + est.once_s(job, i == 0, &mut shares);
        for i in held {
            lane_free[*i] = end;
        }
        if host {
            host_free = end;
        }
    }
    lane_free.into_iter().fold(0.0, f64::max)
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests")]
mod tests {
    use std::path::{Path, PathBuf};

    use coload_cohort_schema::study::{Index, Outcome};
    use coload_spec::Seconds;

    use super::*;
    use crate::node::Node;
    use crate::plan::Plan;

    fn data(dir: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../docs/results/data")
            .join(dir)
    }

    fn one_h200_with_mps() -> Node {
        Node::from_listing("GPU 0: NVIDIA H200 (UUID: GPU-b77eb585)\n", None, true).unwrap()
    }

    /// The estimate of a committed study (its `plan.toml`, every cohort queued on the node it
    /// ran on: one H200 with MPS) and its measured wall time (its `index.json`'s one run).
    fn estimate_and_wall(dir: &Path) -> (f64, f64) {
        let text = std::fs::read_to_string(dir.join("plan.toml")).unwrap();
        let plan = Plan::parse("plan.toml", &text).unwrap();
        let index: Index = coload_cohort_schema::read_document(&dir.join("index.json")).unwrap();
        assert_eq!(
            index.runs.len(),
            1,
            "{}: one run, one wall time",
            dir.display()
        );
        assert!(
            index.cohorts.iter().all(|c| c.outcome == Outcome::Complete),
            "{}: every cohort ran in that run",
            dir.display()
        );
        let jobs = plan.jobs(false);
        let queue: Vec<&Job> = jobs.iter().collect();
        let node = one_h200_with_mps();
        let est = Estimator::new(false);
        (
            expected_wall_s(&queue, &node, &[0], &est),
            index.runs[0].wall_s,
        )
    }

    /// The default model against the H200 studies of 2026-12-02, read from their committed
    /// folders, and the built-in `quick` plan as round 4 ran it: each estimate within 20 % of
    /// its measured wall time. A model that drifts (a figure changed, a search counted at its
    /// budget again) fails here.
    #[test]
    fn the_estimate_matches_the_committed_h200_studies_within_20_percent() {
        let mut lines = Vec::new();
        for dir in [
            "2026-12-02-frontier/frontier-serve",
            "2026-12-02-frontier/frontier-llm",
            "2026-12-02-frontier/decision-rows",
            "2026-12-02-share-sweep",
            "2026-12-02-spread",
        ] {
            let (estimate, wall) = estimate_and_wall(&data(dir));
            let off = estimate / wall - 1.0;
            lines.push(format!(
                "{dir}: {estimate:.0} s estimated, {wall:.0} s measured ({:+.0} %)",
                off * 100.0
            ));
            assert!(off.abs() <= 0.20, "{}", lines.join("\n"));
        }
        let (queue, wall) = quick_in_round4();
        let queue: Vec<&Job> = queue.iter().collect();
        let estimate = expected_wall_s(&queue, &one_h200_with_mps(), &[0], &Estimator::new(false));
        let off = estimate / wall - 1.0;
        lines.push(format!(
            "quick (round 4, 5 s windows): {estimate:.0} s estimated, {wall:.0} s measured \
             ({:+.0} %)",
            off * 100.0
        ));
        assert!(off.abs() <= 0.20, "{}", lines.join("\n"));
        eprintln!("{}", lines.join("\n"));
    }

    /// The built-in `quick` plan as round 4 ran it on an H200 (`round4-check.log` in
    /// `docs/results/data/2026-12-01-round4`, by `scripts/gpu/round4-check.sh` with its
    /// `--window-s 5`, the plan then without its closing solos): its cohorts in the order they
    /// started, and the wall time from the first start to the last end, s (the log's clock
    /// reads whole seconds).
    fn quick_in_round4() -> (Vec<Job>, f64) {
        let log = std::fs::read_to_string(data("2026-12-01-round4/round4-check.log")).unwrap();
        let section = log
            .split("=== quick (")
            .nth(1)
            .and_then(|s| s.split("=== quick rc=").next())
            .unwrap();
        let clock = |line: &str| -> f64 {
            let t: Vec<f64> = line[..8].split(':').map(|x| x.parse().unwrap()).collect();
            t[0] * 3600.0 + t[1] * 60.0 + t[2]
        };
        let plan = Plan::load("quick").unwrap();
        let jobs = plan.jobs(false);
        let (mut queue, mut first, mut last) = (Vec::new(), None, 0.0);
        for line in section.lines() {
            if let Some((_, rest)) = line.split_once("] start ") {
                let name = rest.split_whitespace().next().unwrap();
                let mut job = jobs.iter().find(|j| j.name == name).unwrap().clone();
                job.spec.flags.window_s = Seconds::whole(5);
                queue.push(job);
                first.get_or_insert(clock(line));
            } else if line.contains(": complete in ") {
                last = clock(line);
            }
        }
        assert_eq!(queue.len(), 10, "{section}");
        (queue, last - first.unwrap())
    }

    fn search(rate: f64, min: f64, max: f64, probes: u32, tolerance: f64) -> Job {
        let plan = Plan::parse(
            "t",
            &format!(
                "[[policy]]\nname = \"exclusive\"\nmode = \"exclusive\"\n[[cohort]]\n\
                 workers = \"serve=1\"\nflags = {{ find_capacity = true, slo_ms = 10, rate = \
                 {rate}, rate_min = {min}, rate_max = {max}, max_probes = {probes}, \
                 capacity_tolerance = {tolerance} }}\n"
            ),
        )
        .unwrap();
        plan.jobs(false).remove(0)
    }

    /// The fewest probes follow the search's own steps: halving to the lowest rate, doubling to
    /// the highest, or bisecting a factor-2 bracket to the tolerance.
    #[test]
    fn a_search_is_expected_halfway_between_its_fewest_probes_and_its_budget() {
        // Starts at its floor: one failing probe ends it.
        let j = search(24.0, 24.0, 640.0, 2, 0.3);
        assert_eq!((fewest_probes(&j), most_probes(&j)), (1, 2));
        assert!((expected_probes(&j) - 1.5).abs() < 1e-12);
        // One halving from the floor: two.
        assert_eq!(fewest_probes(&search(32.0, 24.0, 640.0, 4, 0.3)), 2);
        // Two doublings to the ceiling (4000, 8000, 16000): three.
        assert_eq!(fewest_probes(&search(4000.0, 50.0, 16000.0, 4, 0.3)), 3);
        // Far from both bounds: a bracket of 2 bisected to 30 % takes 2 more, 4 in all; to
        // 5 %, 4 more.
        assert_eq!(fewest_probes(&search(400.0, 1.0, 100_000.0, 12, 0.3)), 4);
        assert_eq!(fewest_probes(&search(400.0, 1.0, 100_000.0, 12, 0.05)), 6);
        // Never more than the budget.
        assert_eq!(fewest_probes(&search(400.0, 1.0, 100_000.0, 3, 0.05)), 3);
        let est = Estimator::new(false);
        let j = search(24.0, 24.0, 640.0, 2, 0.3);
        assert!(est.at_most(&j) > est.seconds(&j));
    }

    /// The setup follows the model's terms, and a node's own cohorts correct it: a cohort that
    /// took 20 s beyond its span on a node the model gives 3 s moves every setup by 17 s.
    #[test]
    fn the_setup_follows_the_workers_and_learns_from_the_node() {
        let plan = Plan::load("quick").unwrap();
        let jobs = plan.jobs(false);
        let solo = jobs
            .iter()
            .find(|j| j.name == "exclusive-train1-r1")
            .unwrap();
        let pair = jobs
            .iter()
            .find(|j| j.name == "timeslice-train2-r1")
            .unwrap();
        let est = Estimator::new(false);
        assert!((est.setup_s(solo) - GPU_SETUP.per_cohort_s).abs() < 1e-9);
        assert!(
            (est.setup_s(pair) - GPU_SETUP.per_cohort_s - GPU_SETUP.per_extra_worker_s).abs()
                < 1e-9
        );
        let mut long = solo.clone();
        long.spec.flags.window_s = Seconds::whole(300);
        assert!(
            (est.seconds(&long) - (300.0 + long.spec.flags.start_lead_s.get() + 3.0)).abs() < 1e-9
        );
        est.observe(
            solo,
            1,
            solo.spec.flags.timed_span() + Duration::from_secs(20),
            false,
        );
        assert!((est.setup_s(solo) - 20.0).abs() < 1e-9);
        assert!((est.setup_s(pair) - 20.35).abs() < 1e-9);
        // The first cohort's cold start is the model's, not the node's correction.
        let est = Estimator::new(false);
        est.observe(
            solo,
            1,
            solo.spec.flags.timed_span() + Duration::from_secs(14),
            true,
        );
        assert!((est.setup_s(solo) - 3.0).abs() < 1e-9);
        assert_eq!(est.measured(), 1);
    }
}
