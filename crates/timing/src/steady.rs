//! The warmup before the barrier: at least the batches asked for, then on until the step time
//! stops falling, within a bound of batches and of time.
//!
//! A fixed warmup count does not always reach steady state: on an H200 the first eager GPT-2
//! decode run of a process was 30 % slower than the second with the same count. So the warmup
//! watches its own step times and stops when they no longer fall.
//!
//! **The rule** ([`SteadyRule`], applied batch by batch by [`SteadyJudge`]). Batches are
//! grouped into *blocks* of `block_batches` (a decode worker: one whole cycle, a prefill and
//! its decode steps, whose steps differ by design; every other worker: one batch), and a
//! block's time is the sum of its batches'. After every whole block, once at least
//! `min_batches` ran (`--warmup-batches` rounded up to whole blocks) and at least two windows
//! of `window_blocks` blocks:
//!
//! - **steady** when the median block time of the last window is no more than
//!   [`IMPROVEMENT`] below the median of the window before it (the time stopped falling);
//! - else **max batches** once `max_batches` ran;
//! - else **max time** once [`MAX_TIME`] has passed since the warmup began.
//!
//! `window_blocks` is half the blocks asked for (at least 1, at most [`MAX_WINDOW_BLOCKS`]),
//! so a load that is already steady after the count asked for stops exactly there: the rule
//! then costs nothing. Noise cannot hold a steady load for long: on a flat sequence each
//! judgement finds "no improvement" about half the time. Medians keep a stray slow batch (a
//! page fault, a preempted thread) from deciding either way.
//!
//! Nothing here runs inside the timed window: the judge allocates and sorts freely.

use std::time::{Duration, Instant};

use coload_cohort_schema::{WarmupReport, WarmupStop};

use crate::runner::WarmupStats;
use crate::step::Step;

/// The least fall, as a fraction of the earlier window's median, that still counts as
/// "falling". 2 %: a slow first run was 30 % off, and on a quiet card two windows of the same
/// steady load differ by well under 1 %, so 2 % separates a load still warming from noise.
pub const IMPROVEMENT: f64 = 0.02;

/// The largest window, in blocks: a long warmup (thousands of batches asked for) still judges
/// on the latest few dozen blocks, which is what "has it stopped falling" is about.
pub const MAX_WINDOW_BLOCKS: u32 = 32;

/// How many times the batches asked for (or the two windows the rule needs, when more) the
/// warmup may run at most.
pub const MAX_FACTOR: u32 = 10;

/// The longest a warmup goes on past what was asked for: long enough for clocks, allocator
/// pools and autotuning to settle, short against the barrier's join timeout (600 s by default)
/// that the peers wait on.
pub const MAX_TIME: Duration = Duration::from_secs(60);

/// The warmup's bounds and judging window, in batches and blocks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SteadyRule {
    /// Batches per block (at least 1).
    pub block_batches: u32,
    /// Blocks that always run: the batches asked for, rounded up to whole blocks.
    pub min_blocks: u32,
    /// Blocks in each of the two windows the rule compares (at least 1).
    pub window_blocks: u32,
    /// The most blocks that run.
    pub max_blocks: u32,
    /// The longest the warmup goes on once `min_blocks` ran.
    pub max_time: Duration,
    /// The least fall that counts as falling, a fraction of the earlier median.
    pub improvement: f64,
}

impl SteadyRule {
    /// The rule for a worker asked for `warmup_batches` batches, in blocks of `block_batches`
    /// (0 counts as 1). With `warmup_batches` 0 no block runs at all: no warmup was asked for.
    #[must_use]
    pub fn for_warmup(warmup_batches: u32, block_batches: u32) -> Self {
        let block_batches = block_batches.max(1);
        let min_blocks = warmup_batches.div_ceil(block_batches);
        let window_blocks = (min_blocks / 2).clamp(1, MAX_WINDOW_BLOCKS);
        let max_blocks = if min_blocks == 0 {
            0
        } else {
            min_blocks
                .max(2 * window_blocks)
                .saturating_mul(MAX_FACTOR)
                .min(u32::MAX / block_batches)
        };
        SteadyRule {
            block_batches,
            min_blocks,
            window_blocks,
            max_blocks,
            max_time: MAX_TIME,
            improvement: IMPROVEMENT,
        }
    }

    /// The batches that always run.
    #[must_use]
    pub fn min_batches(&self) -> u32 {
        self.min_blocks.saturating_mul(self.block_batches)
    }

    /// The most batches that run.
    #[must_use]
    pub fn max_batches(&self) -> u32 {
        self.max_blocks.saturating_mul(self.block_batches)
    }
}

/// Applies a [`SteadyRule`] to step times as they come.
#[derive(Debug, Clone)]
pub struct SteadyJudge {
    rule: SteadyRule,
    blocks: Vec<Duration>,
    in_block: Duration,
    batches_in_block: u32,
    batches: u32,
    medians: Option<(Duration, Duration)>,
}

impl SteadyJudge {
    /// A judge that has seen nothing yet.
    #[must_use]
    pub fn new(rule: SteadyRule) -> Self {
        SteadyJudge {
            rule,
            blocks: Vec::new(),
            in_block: Duration::ZERO,
            batches_in_block: 0,
            batches: 0,
            medians: None,
        }
    }

    /// Why the warmup stops before its first batch, if it does: when no batch was asked for.
    #[must_use]
    pub fn stop_before_start(&self) -> Option<WarmupStop> {
        (self.rule.min_blocks == 0).then_some(WarmupStop::NoneAsked)
    }

    /// Takes one batch's time and the time since the warmup began; says why to stop after
    /// this batch, or `None` to run another.
    pub fn observe(&mut self, batch: Duration, elapsed: Duration) -> Option<WarmupStop> {
        self.batches = self.batches.saturating_add(1);
        self.in_block += batch;
        self.batches_in_block += 1;
        if self.batches_in_block < self.rule.block_batches {
            return None;
        }
        self.blocks.push(self.in_block);
        self.in_block = Duration::ZERO;
        self.batches_in_block = 0;
        let done = u32::try_from(self.blocks.len()).unwrap_or(u32::MAX);
        if done < self.rule.min_blocks {
            return None;
        }
        let k = self.rule.window_blocks as usize;
        if self.blocks.len() >= 2 * k {
            let n = self.blocks.len();
            let previous = median(&self.blocks[n - 2 * k..n - k]);
            let last = median(&self.blocks[n - k..]);
            self.medians = Some((previous, last));
            if last.as_secs_f64() >= previous.as_secs_f64() * (1.0 - self.rule.improvement) {
                return Some(WarmupStop::Steady);
            }
        }
        if done >= self.rule.max_blocks {
            return Some(WarmupStop::MaxBatches);
        }
        (elapsed >= self.rule.max_time).then_some(WarmupStop::MaxTime)
    }

    /// Batches seen so far.
    #[must_use]
    pub fn batches(&self) -> u32 {
        self.batches
    }

    /// The medians of the last judgement: (the earlier window's, the last window's).
    #[must_use]
    pub fn medians(&self) -> Option<(Duration, Duration)> {
        self.medians
    }

    /// What `worker.json` records of a warmup that stopped for `stop` after `elapsed`.
    #[must_use]
    pub fn report(&self, stop: WarmupStop, elapsed: Duration) -> WarmupReport {
        let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        WarmupReport {
            batches: self.batches,
            min_batches: self.rule.min_batches(),
            max_batches: self.rule.max_batches(),
            block_batches: self.rule.block_batches,
            window_blocks: self.rule.window_blocks,
            stop,
            elapsed_ns: ns(elapsed),
            previous_median_ns: self.medians.map(|(p, _)| ns(p)),
            last_median_ns: self.medians.map(|(_, l)| ns(l)),
        }
    }
}

/// The median of a non-empty slice (the upper one of an even count, as [`WarmupStats`]'s).
fn median(xs: &[Duration]) -> Duration {
    let mut sorted = xs.to_vec();
    sorted.sort_unstable();
    sorted[sorted.len() / 2]
}

/// Runs untimed batches before the barrier until `rule` says stop, calling
/// `on_batch(batches_done, duration)` after each (for progress output; the warmup is not
/// timed, so the callback may print). Stops at the first error.
pub fn warmup_until_steady<S: Step>(
    step: &mut S,
    rule: SteadyRule,
    mut on_batch: impl FnMut(u32, Duration),
) -> Result<(WarmupStats, WarmupReport), S::Error> {
    let begin = Instant::now();
    let mut judge = SteadyJudge::new(rule);
    let mut durations = Vec::with_capacity(rule.min_batches() as usize);
    let why = match judge.stop_before_start() {
        Some(why) => why,
        None => loop {
            let t0 = Instant::now();
            step.step()?;
            let d = t0.elapsed();
            durations.push(d);
            on_batch(judge.batches() + 1, d);
            if let Some(why) = judge.observe(d, begin.elapsed()) {
                break why;
            }
        },
    };
    let total = begin.elapsed();
    let stats = WarmupStats::of(judge.batches(), total, &mut durations);
    Ok((stats, judge.report(why, total)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::step::MockStep;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    /// Feeds `times` (microseconds, one per batch) to a judge, with the elapsed time their
    /// running sum; returns (batches run, why it stopped), or `None` if it never stopped.
    fn judge(rule: SteadyRule, times: impl IntoIterator<Item = u64>) -> Option<(u32, WarmupStop)> {
        let mut j = SteadyJudge::new(rule);
        if let Some(stop) = j.stop_before_start() {
            return Some((0, stop));
        }
        let mut elapsed = Duration::ZERO;
        for t in times {
            elapsed += us(t);
            if let Some(stop) = j.observe(us(t), elapsed) {
                return Some((j.batches(), stop));
            }
        }
        None
    }

    /// A deterministic noise in [-1, 1): a linear congruential generator.
    fn noise(seed: u64) -> impl Iterator<Item = f64> {
        let mut x = seed;
        std::iter::repeat_with(move || {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (x >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        })
    }

    #[test]
    fn the_rule_scales_with_the_warmup_asked_for() {
        let r = SteadyRule::for_warmup(20, 1);
        assert_eq!((r.min_blocks, r.window_blocks, r.max_blocks), (20, 10, 200));
        assert_eq!((r.min_batches(), r.max_batches()), (20, 200));
        // Decode: 256 iterations in cycles of 128 are two blocks, judged one against one.
        let r = SteadyRule::for_warmup(256, 128);
        assert_eq!((r.min_blocks, r.window_blocks, r.max_blocks), (2, 1, 20));
        // One block asked for still needs two to judge, so it may run two.
        let r = SteadyRule::for_warmup(3, 5);
        assert_eq!(
            (r.min_batches(), r.window_blocks, r.max_batches()),
            (5, 1, 100)
        );
        let r = SteadyRule::for_warmup(100_000, 1);
        assert_eq!(
            (r.window_blocks, r.max_batches()),
            (MAX_WINDOW_BLOCKS, 1_000_000)
        );
        // A block of 0 batches counts as 1; no batch asked for is no warmup.
        assert_eq!(SteadyRule::for_warmup(4, 0).block_batches, 1);
        let none = SteadyRule::for_warmup(0, 8);
        assert_eq!((none.min_blocks, none.max_blocks), (0, 0));
        assert_eq!(judge(none, [1, 2, 3]), Some((0, WarmupStop::NoneAsked)));
    }

    #[test]
    fn a_flat_load_stops_exactly_at_the_count_asked_for() {
        let rule = SteadyRule::for_warmup(20, 1);
        assert_eq!(
            judge(rule, std::iter::repeat(1000)),
            Some((20, WarmupStop::Steady))
        );
    }

    #[test]
    fn falling_then_flat_stops_once_both_windows_are_flat() {
        // 20 asked for (windows of 10): 40 batches falling 3 % each, from 2 ms, then flat.
        let rule = SteadyRule::for_warmup(20, 1);
        let falling = (0..40).map(|i| (2000.0 * 0.97f64.powi(i)) as u64);
        let flat_us = (2000.0 * 0.97f64.powi(40)) as u64;
        let times = falling.chain(std::iter::repeat(flat_us));
        let (batches, stop) = judge(rule, times).unwrap();
        assert_eq!(stop, WarmupStop::Steady);
        // Not before the fall ended, and no later than two windows into the flat part: the
        // last window's median is flat once 6 flat batches are in it, the earlier one's once
        // it holds 6 too.
        assert!((41..=60).contains(&batches), "stopped after {batches}");
    }

    #[test]
    fn noisy_flat_stops_soon_after_the_count_asked_for() {
        // +-10 % noise around 5 ms on every batch, well above the 2 % threshold.
        let rule = SteadyRule::for_warmup(20, 1);
        for seed in 0..50 {
            let times = noise(seed).map(|n| (5000.0 * (1.0 + 0.1 * n)) as u64);
            let (batches, stop) = judge(rule, times).unwrap();
            assert_eq!(stop, WarmupStop::Steady, "seed {seed}");
            assert!(batches <= 40, "seed {seed}: stopped after {batches}");
        }
    }

    #[test]
    fn a_load_that_never_settles_is_bounded_by_batches_and_by_time() {
        // Falls 5 % every batch forever: never steady.
        let rule = SteadyRule::for_warmup(20, 1);
        // From 1 s a batch: 20 s in all, inside the time bound.
        let geometric = (0..).map(|i| (1e6 * 0.95f64.powi(i)).max(1.0) as u64);
        assert_eq!(judge(rule, geometric), Some((200, WarmupStop::MaxBatches)));
        // From about 8 s a batch, falling by more than 2 % a window: the 60 s bound passes during
        // the 20 asked for, which still all run, and stops it right after them.
        let slow = (1..).map(|i: u64| 800_000_000 / (100 + 5 * i));
        assert_eq!(judge(rule, slow), Some((20, WarmupStop::MaxTime)));
    }

    #[test]
    fn decode_blocks_are_whole_cycles() {
        // Cycles of 4 (a slow prefill, three decodes); 10 asked for: 3 cycles, windows of 1.
        let rule = SteadyRule::for_warmup(10, 4);
        let cycle = [900u64, 100, 100, 100];
        let (batches, stop) = judge(rule, cycle.into_iter().cycle()).unwrap();
        assert_eq!((batches, stop), (12, WarmupStop::Steady));
        // A first cycle 30 % slower than the rest is one the rule waits out.
        let slow_first = [1560u64, 130, 130, 130]
            .into_iter()
            .chain(cycle.into_iter().cycle());
        assert_eq!(judge(rule, slow_first), Some((12, WarmupStop::Steady)));
        // Cycles that keep getting faster stop at a cycle's end, bounded.
        let mut j = SteadyJudge::new(rule);
        let mut n = 0u32;
        let stop = loop {
            n += 1;
            let t = us(u64::from(1_000_000 / n));
            if let Some(stop) = j.observe(t, Duration::ZERO) {
                break stop;
            }
        };
        assert_eq!(stop, WarmupStop::MaxBatches);
        assert_eq!(j.batches() % 4, 0);
        assert_eq!(j.batches(), rule.max_batches());
    }

    #[test]
    fn the_warmup_runs_the_steps_and_reports_why_it_stopped() {
        let mut step = MockStep::new(us(200), 4);
        let mut seen = 0;
        let (stats, report) =
            warmup_until_steady(&mut step, SteadyRule::for_warmup(6, 1), |i, _| seen = i).unwrap();
        assert_eq!(step.calls(), u64::from(stats.batches));
        assert_eq!(seen, stats.batches);
        assert!(stats.batches >= 6, "never below the count asked for");
        assert_eq!(report.batches, stats.batches);
        assert_eq!(report.min_batches, 6);
        assert!(report.previous_median_ns.is_some() && report.last_median_ns.is_some());
        assert!(stats.fastest >= us(200));
        // None asked for: no step runs.
        let mut idle = MockStep::new(us(200), 4);
        let (stats, report) =
            warmup_until_steady(&mut idle, SteadyRule::for_warmup(0, 1), |_, _| {}).unwrap();
        assert_eq!((idle.calls(), stats.batches), (0, 0));
        assert_eq!(report.stop, WarmupStop::NoneAsked);
        // A failing step stops the warmup with its error.
        let mut failing = MockStep::new(us(10), 1).failing_at(2);
        assert!(
            warmup_until_steady(&mut failing, SteadyRule::for_warmup(5, 1), |_, _| {}).is_err()
        );
        assert_eq!(failing.calls(), 3);
    }
}
