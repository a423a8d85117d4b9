//! The verdict: what a comparison says about each sharing policy, shape by shape, and the few
//! sentences at the top of the report that name the policy meeting each need and the one that
//! does not, with the numbers.
//!
//! A *policy* is what a cohort was run under: its mode, or the study's policy name for it
//! (`mps-plugin` and `mps-unlimited` are both mode `mps`). A *shape* is a workload mix and one
//! of its groups (`7 train`; `1 infer + 6 train: infer`). Each cell of the verdict is one policy
//! on one shape, averaged over its repeated cohorts (one value per cohort first, then the mean),
//! with the baselines' own cohorts left out (they are 1 by definition).
//!
//! The thresholds the sentences use are named here with their reasons:
//! - [`GAIN`]: sharing *adds* throughput when the group's aggregate is at least 1.10x one worker
//!   alone; below that it only divides the GPU (repeats of one shape spread by a few percent).
//! - [`TAIL_OK`]: a policy *protects* a worker's tail when its p99 stays within 2x its solo p99.
//! - [`ALONE_OK`]: a worker alone under a sharing policy (one Pod on a shared node) runs *as
//!   fast as alone* when it keeps at least 0.90x its solo rate.
//!
//! One definition of p99 against solo, used by every table, chart and sentence: **p99 ÷ solo
//! is the group's p99 (every batch of its workers pooled; the mean over repeated cohorts)
//! divided by the solo worker's p99** (for one worker, its own p99 over the solo's). So the
//! "p99 ms" column divided by the solo's p99 is the "p99 ÷ solo" column.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use coload_cohort_schema::{CohortComparison, Comparison, Mode, Workload};

use super::ReportContext;
use super::svg::num;

/// Aggregate against one worker alone from which sharing counts as adding throughput (the
/// stopping rule of repeated shapes keeps its intervals clear of the same figure).
pub(crate) const GAIN: f64 = coload_analysis::ratio::GAIN;
/// p99 against solo up to which a policy counts as protecting the tail.
pub(crate) const TAIL_OK: f64 = 2.0;
/// Rate against solo from which one worker alone under a sharing policy counts as unhindered:
/// repeats of one shape spread by a few percent, so 0.90x is a cost nobody would notice and
/// the plugin's 1/7 share (about 0.3x) is far below it.
pub(crate) const ALONE_OK: f64 = 0.90;
/// See [`coload_analysis::ratio::ALONE_TOLERANCE`].
pub(crate) const ALONE_TOLERANCE: f64 = coload_analysis::ratio::ALONE_TOLERANCE;

/// Colours per mode: the first policy of a mode gets the first, a second policy of the same mode
/// (another MPS share) the next. Chosen to stay apart for the common colour-vision deficiencies.
pub(crate) fn mode_colors(mode: Mode) -> &'static [&'static str] {
    match mode {
        Mode::Exclusive => &["#5b6770", "#9aa5ad"],
        Mode::Timeslice => &["#d95f02", "#f4a261", "#8c3b00"],
        Mode::Mps => &["#1f6fb4", "#62a8e5", "#0b3d6b"],
        Mode::Mig => &["#2a9d4b", "#7cc78f"],
        Mode::MigTimeslice => &["#7b4fa8", "#b597d6"],
    }
}

/// A policy as the report shows it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Policy {
    pub(crate) label: String,
    pub(crate) mode: Mode,
    pub(crate) color: &'static str,
}

/// A workload mix and one of its groups.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Shape {
    /// Mixed cohorts after homogeneous ones.
    pub(crate) mixed: bool,
    /// The group this row is about.
    pub(crate) group: Workload,
    /// Workers in the cohort.
    pub(crate) count: u32,
    /// The whole mix.
    pub(crate) mix: BTreeMap<Workload, u32>,
}

impl Shape {
    /// `7 train`, or `1 infer + 6 train: infer`.
    pub(crate) fn label(&self) -> String {
        if self.mixed {
            // The smaller group first: `1 infer + 6 train`.
            let mut parts: Vec<(&u32, &Workload)> = self.mix.iter().map(|(w, n)| (n, w)).collect();
            parts.sort();
            let mix: Vec<String> = parts.iter().map(|(n, w)| format!("{n} {w}")).collect();
            format!("{}: {}", mix.join(" + "), self.group)
        } else {
            format!("{} {}", self.count, self.group)
        }
    }

    /// A short label for a chart's axis, on two lines for a mix: `7 train`, `6 train\n+1 infer`
    /// (the group measured, then who shares with it).
    pub(crate) fn short(&self) -> String {
        if self.mixed {
            let own = self.mix.get(&self.group).copied().unwrap_or(self.count);
            let others: Vec<String> = self
                .mix
                .iter()
                .filter(|(w, _)| **w != self.group)
                .map(|(w, n)| format!("+{n} {w}"))
                .collect();
            format!("{own} {}\n{}", self.group, others.join(" "))
        } else {
            self.label()
        }
    }
}

/// One policy on one shape.
#[derive(Debug, Clone)]
pub(crate) struct Cell {
    pub(crate) shape: Shape,
    /// Index into [`Verdict::policies`].
    pub(crate) policy: usize,
    /// Cohorts behind it.
    pub(crate) cohorts: usize,
    /// Mean per-worker samples/s.
    pub(crate) rate: f64,
    /// Mean per-worker rate against solo.
    pub(crate) rate_vs_solo: Option<f64>,
    /// The per-worker rate over the solo's on the cohorts' one card, with its 95 % interval
    /// over the cell's cohorts and the card's baseline runs; `None` without a baseline block
    /// (older comparisons) or across cards.
    pub(crate) rate_vs_solo_ci: Option<coload_cohort_schema::RatioInterval>,
    /// Mean of the group's pooled p99, ms (for a serve group at a fixed rate, the request p99
    /// of the slowest serve worker: see `request`).
    pub(crate) p99_ms: f64,
    /// `p99_ms` over the solo's p99 (the one definition, see the module's doc).
    pub(crate) p99_vs_solo: Option<f64>,
    /// The solo's p99 on the card of every cohort of the cell, ms; `None` when they ran on
    /// different cards or their card has no baseline (no ratio crosses cards).
    pub(crate) solo_p99_ms: Option<f64>,
    /// The 95 % interval of the group's p99 over the repeated cohorts (n > 1).
    pub(crate) p99_ci: Option<(f64, f64)>,
    /// The 95 % interval of the aggregate over the repeated cohorts (n > 1).
    pub(crate) aggregate_ci: Option<(f64, f64)>,
    /// Mean samples per device joule of the group, where every cohort recorded energy.
    pub(crate) samples_per_joule: Option<f64>,
    /// The solo runs' samples per device joule on the cell's own card (the mean over its
    /// baseline block), where every cohort of the cell ran on one card with such a block.
    pub(crate) solo_samples_per_joule: Option<f64>,
    /// A serve group at a fixed rate: `p99_ms` is the request latency, and this its
    /// objective's attainment.
    pub(crate) request: Option<RequestCell>,

    /// Mean aggregate samples/s of the group.
    pub(crate) aggregate: f64,
    /// Mean aggregate against solo.
    pub(crate) aggregate_vs_solo: Option<f64>,
    /// The cohort spans one GPU per worker (exclusive with several workers).
    pub(crate) across_gpus: bool,
}

/// A serve group's requests at a fixed rate (from the study's serve points).
#[derive(Debug, Clone)]
pub(crate) struct RequestCell {
    /// Mean offered load per serve worker, requests/s.
    pub(crate) offered_per_s: f64,
    /// The objective and the lowest attainment, where one was given.
    pub(crate) slo: Option<super::ServeSlo>,
}

/// The verdict of a comparison.
#[derive(Debug, Clone)]
pub(crate) struct Verdict {
    pub(crate) policies: Vec<Policy>,
    /// Sorted by shape, then policy.
    pub(crate) cells: Vec<Cell>,
    /// Solo samples/s and p99 ms per workload.
    pub(crate) solo: BTreeMap<Workload, (f64, f64)>,
    /// Solo samples per device joule per workload, where the baseline recorded energy.
    pub(crate) solo_samples_per_joule: BTreeMap<Workload, f64>,
    /// Needs and what the data say about them.
    pub(crate) sentences: Vec<(String, String)>,
}

/// The policy label of a cohort: the study's name for it, else its mode, with its MPS share when
/// it declared one (`mps (replicas 7)`), so that two shares never pool into one policy.
pub(crate) fn policy_label(ctx: &ReportContext, c: &CohortComparison) -> String {
    ctx.policies
        .get(&c.experiment)
        .cloned()
        .unwrap_or_else(|| match (&c.share, &c.mig_profile) {
            (Some(s), _) => format!("{} ({})", c.mode, s.label()),
            (None, Some(p)) => format!("{} ({p})", c.mode),
            (None, None) => c.mode.to_string(),
        })
}

/// The policies of `c`, coloured, in mode order then first appearance.
pub(crate) fn policies(c: &Comparison, ctx: &ReportContext) -> Vec<Policy> {
    let mut found: Vec<(Mode, String)> = Vec::new();
    for k in &c.cohorts {
        let label = policy_label(ctx, k);
        if !found.iter().any(|(_, l)| *l == label) {
            found.push((k.mode, label));
        }
    }
    for r in &ctx.capacity {
        if !found.iter().any(|(_, l)| *l == r.policy) {
            found.push((r.mode, r.policy.clone()));
        }
    }
    for r in &ctx.serve_points {
        if !found.iter().any(|(_, l)| *l == r.policy) {
            found.push((r.mode, r.policy.clone()));
        }
    }
    for r in &ctx.isolation {
        if !found.iter().any(|(_, l)| *l == r.policy) {
            found.push((r.mode, r.policy.clone()));
        }
    }
    found.sort_by_key(|(m, _)| Mode::ALL.iter().position(|x| x == m));
    let mut used: BTreeMap<Mode, usize> = BTreeMap::new();
    found
        .into_iter()
        .map(|(mode, label)| {
            let k = used.entry(mode).or_insert(0);
            let colors = mode_colors(mode);
            let color = colors[*k % colors.len()];
            *k += 1;
            Policy { label, mode, color }
        })
        .collect()
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

fn mean_opt(v: &[Option<f64>]) -> Option<f64> {
    let some: Vec<f64> = v.iter().flatten().copied().collect();
    (some.len() == v.len() && !some.is_empty()).then(|| mean(&some))
}

/// The verdict of `c` with the study's `ctx`.
#[expect(
    clippy::too_many_lines,
    reason = "one pass: per-cohort values, then cells with their intervals, then the sentences"
)]
pub(crate) fn verdict(c: &Comparison, ctx: &ReportContext) -> Verdict {
    let policies = policies(c, ctx);
    let index = |label: &str| policies.iter().position(|p| p.label == label).unwrap_or(0);
    // Every baseline run, repeats and other cards' included: each is 1 by definition.
    let baseline_experiments: Vec<&str> = c
        .baselines
        .values()
        .map(|b| b.experiment.as_str())
        .chain(
            c.baseline_blocks
                .iter()
                .flat_map(|b| b.experiments.iter().map(String::as_str)),
        )
        .collect();
    // (shape, policy) -> per cohort values.
    let mut by: BTreeMap<(Shape, usize), Vec<PerCohort>> = BTreeMap::new();
    for k in &c.cohorts {
        if baseline_experiments.contains(&k.experiment.as_str()) {
            continue;
        }
        let mixed = k.workload_mix.len() > 1;
        for (workload, g) in &k.groups {
            let shape = Shape {
                mixed,
                group: *workload,
                count: k.count,
                mix: k.workload_mix.clone(),
            };
            let per: Vec<Option<f64>> = g.per_worker.iter().map(|w| w.rate_vs_solo).collect();
            let rates: Vec<f64> = g.per_worker.iter().map(|w| w.samples_per_s).collect();
            // A fixed-rate serve group is judged by its requests, not its batches.
            let point = (*workload == Workload::Serve)
                .then(|| {
                    ctx.serve_points
                        .iter()
                        .find(|p| p.experiment == k.experiment)
                })
                .flatten();
            let p99_ms = point.and_then(|p| p.latency_at(0.99)).unwrap_or(g.p99_ms);
            by.entry((shape, index(&policy_label(ctx, k))))
                .or_default()
                .push(PerCohort {
                    experiment: k.experiment.clone(),
                    solo_p99_ms: own_solo(c, k, *workload).map(|(_, p99)| p99),
                    block: own_block(c, k, *workload),
                    rate: mean(&rates),
                    rate_vs_solo: mean_opt(&per),
                    p99_ms,
                    aggregate: g.aggregate_samples_per_s,
                    aggregate_vs_solo: g.aggregate_vs_solo,
                    samples_per_joule: g.samples_per_device_joule,
                    request: point.map(|p| RequestCell {
                        offered_per_s: p.offered_per_s,
                        slo: p.slo.clone(),
                    }),
                    across_gpus: k.mode == Mode::Exclusive && k.count > 1,
                });
        }
    }
    let solo: BTreeMap<Workload, (f64, f64)> = c
        .baselines
        .iter()
        .map(|(w, b)| (*w, (b.samples_per_s, b.p99_ms)))
        .collect();
    let cells: Vec<Cell> = by
        .into_iter()
        .map(|((shape, policy), v)| {
            let p99_ms = mean(&v.iter().map(|p| p.p99_ms).collect::<Vec<_>>());
            let experiments: Vec<String> = v.iter().map(|p| p.experiment.clone()).collect();
            let stats = repeat_stats(c, &experiments, shape.group);
            let request = v.first().and_then(|p| p.request.clone());
            // One block for the whole cell, or no ratio.
            let solo_p99_ms = v
                .first()
                .and_then(|p| p.solo_p99_ms)
                .filter(|s| *s > 0.0 && v.iter().all(|p| p.solo_p99_ms == Some(*s)));
            let block = v
                .first()
                .and_then(|p| p.block)
                .filter(|b| v.iter().all(|p| p.block == Some(*b)));
            let rate_vs_solo_ci = block.and_then(|b| {
                let rates: Vec<f64> = v.iter().map(|p| p.rate).collect();
                let (m, sd) = coload_analysis::stats::mean_stddev(&rates)?;
                let s = &b.samples_per_s;
                coload_analysis::ratio::ratio_of_estimates(
                    (m, sd, v.len() as u32),
                    (s.mean, s.stddev, s.n),
                )
            });
            let solo_samples_per_joule = block.and_then(|b| {
                let j: Vec<Option<f64>> = c
                    .cohorts
                    .iter()
                    .filter(|k| b.experiments.contains(&k.experiment))
                    .map(|k| k.groups.get(&b.workload)?.samples_per_device_joule)
                    .collect();
                mean_opt(&j)
            });
            Cell {
                cohorts: v.len(),
                rate_vs_solo_ci,
                solo_samples_per_joule,
                rate: mean(&v.iter().map(|p| p.rate).collect::<Vec<_>>()),
                rate_vs_solo: mean_opt(&v.iter().map(|p| p.rate_vs_solo).collect::<Vec<_>>()),
                p99_ms,
                // Requests have no solo batch to compare with.
                p99_vs_solo: solo_p99_ms
                    .filter(|_| request.is_none())
                    .map(|s| p99_ms / s),
                solo_p99_ms,
                p99_ci: stats
                    .filter(|_| request.is_none())
                    .and_then(|s| ci(&s.p99_ms)),
                aggregate_ci: stats.and_then(|s| ci(&s.aggregate_samples_per_s)),
                aggregate: mean(&v.iter().map(|p| p.aggregate).collect::<Vec<_>>()),
                aggregate_vs_solo: mean_opt(
                    &v.iter().map(|p| p.aggregate_vs_solo).collect::<Vec<_>>(),
                ),
                samples_per_joule: mean_opt(
                    &v.iter().map(|p| p.samples_per_joule).collect::<Vec<_>>(),
                ),
                across_gpus: v.iter().any(|p| p.across_gpus),
                request,
                shape,
                policy,
            }
        })
        .collect();
    let solo_samples_per_joule = c
        .baselines
        .iter()
        .filter_map(|(w, b)| {
            c.cohorts
                .iter()
                .find(|k| k.experiment == b.experiment)
                .and_then(|k| k.groups.get(w))
                .and_then(|g| g.samples_per_device_joule)
                .map(|j| (*w, j))
        })
        .collect();
    let mut v = Verdict {
        policies,
        cells,
        solo,
        solo_samples_per_joule,
        sentences: Vec::new(),
    };
    v.sentences = sentences(&v, ctx);
    v
}

/// The solo rate and p99 of `workload` on the card `k` ran on: its baseline block's means
/// (comparisons written before blocks: the one baseline). `None` for a cohort across cards or
/// on a card without that workload's baseline.
fn own_solo(c: &Comparison, k: &CohortComparison, workload: Workload) -> Option<(f64, f64)> {
    if c.baseline_blocks.is_empty() {
        return c
            .baselines
            .get(&workload)
            .map(|b| (b.samples_per_s, b.p99_ms));
    }
    own_block(c, k, workload).map(|b| (b.samples_per_s.mean, b.p99_ms.mean))
}

/// The baseline block of `workload` on the one card `k` ran on, in the run of the study it ran
/// in.
fn own_block<'c>(
    c: &'c Comparison,
    k: &CohortComparison,
    workload: Workload,
) -> Option<&'c coload_cohort_schema::BaselineBlock> {
    let card = match k.cards.as_slice() {
        [] => None,
        [one] => Some(one.as_str()),
        _ => return None,
    };
    c.baseline_blocks
        .iter()
        .find(|b| b.workload == workload && b.card.as_deref() == card && b.run == k.run)
}

struct PerCohort<'c> {
    experiment: String,
    solo_p99_ms: Option<f64>,
    block: Option<&'c coload_cohort_schema::BaselineBlock>,
    rate: f64,
    rate_vs_solo: Option<f64>,
    p99_ms: f64,
    aggregate: f64,
    aggregate_vs_solo: Option<f64>,
    samples_per_joule: Option<f64>,
    request: Option<RequestCell>,
    across_gpus: bool,
}

/// The repeat statistics of `group` over the repeated cohorts that hold `experiments`.
fn repeat_stats<'c>(
    c: &'c Comparison,
    experiments: &[String],
    group: Workload,
) -> Option<&'c coload_cohort_schema::RepeatStats> {
    c.repeats
        .iter()
        .find(|r| experiments.iter().any(|e| r.experiments.contains(e)))
        .and_then(|r| r.groups.get(&group))
}

/// A 95 % interval, where the estimate has one (n > 1).
fn ci(e: &coload_cohort_schema::Estimate) -> Option<(f64, f64)> {
    match (e.n > 1, e.ci95_low, e.ci95_high) {
        (true, Some(l), Some(h)) => Some((l, h)),
        _ => None,
    }
}

/// `6,201 (95 % CI 6,196 to 6,205)`, or the figure alone without an interval.
pub(crate) fn with_ci(v: f64, ci: Option<(f64, f64)>, unit: &str) -> String {
    ci.map_or_else(
        || format!("{}{unit}", num(v)),
        |(l, h)| format!("{}{unit}, 95 % CI {} to {}", num(v), num(l), num(h)),
    )
}

fn x(v: f64) -> String {
    format!("{}×", ratio(v))
}

/// A threshold as the text names it: `2×`, `1.1×`.
fn threshold(v: f64) -> String {
    format!("{}×", num(v))
}

/// A ratio to two decimals below 10 (`0.95`, `1.00`, `7.72`), as [`num`] writes it above.
pub(crate) fn ratio(v: f64) -> String {
    if v.abs() < 10.0 {
        format!("{v:.2}")
    } else {
        num(v)
    }
}

/// `a, b and c`.
fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// The sentences: one per need the data can answer.
fn sentences(v: &Verdict, ctx: &ReportContext) -> Vec<(String, String)> {
    let mut out = Vec::new();
    // The needs in the order a platform engineer asks them; a need the data cannot answer
    // says so, and why, rather than vanishing.
    for part in [
        throughput,
        not_full,
        real_cards,
        tail_beside_others,
        capacity,
        fixed_rate,
        isolation,
        energy,
        not_measured,
    ] {
        part(v, ctx, &mut out);
    }
    if out.is_empty() {
        out.push((
            "Not enough to judge:".to_owned(),
            "a verdict needs solo baselines and shared cohorts of the same workload; see the \
             tables below."
                .to_owned(),
        ));
    }
    out
}

/// What a workload's rate counts: generated tokens for `decode`, samples otherwise.
fn rate_unit(workload: Workload) -> &'static str {
    if workload == Workload::Decode {
        " tokens/s"
    } else {
        " samples/s"
    }
}

/// Throughput on one device, per workload: the policies that add some and those that only share it out.
#[expect(
    clippy::too_many_lines,
    reason = "one need per workload: the cells at the largest shape, then the sentence's cases"
)]
fn throughput(v: &Verdict, _ctx: &ReportContext, out: &mut Vec<(String, String)>) {
    let name = |c: &Cell| v.policies[c.policy].label.clone();
    for workload in [Workload::Train, Workload::Infer, Workload::Decode] {
        let unit = rate_unit(workload);
        if !v.solo.contains_key(&workload) {
            continue;
        }
        // Throughput on one GPU: the largest homogeneous shape that policies share one GPU in.
        let shared: Vec<&Cell> = v
            .cells
            .iter()
            .filter(|c| !c.shape.mixed && c.shape.group == workload && !c.across_gpus)
            .filter(|c| c.shape.count > 1)
            .collect();
        let Some(n) = shared.iter().map(|c| c.shape.count).max() else {
            continue;
        };
        let need = format!(
            "{} throughput, card full ({n} {workload} workers on one device):",
            cap(workload.as_str())
        );
        let (mut at_n, uncompared): (Vec<&Cell>, Vec<&Cell>) = shared
            .into_iter()
            .filter(|c| c.shape.count == n)
            .partition(|c| c.aggregate_vs_solo.is_some());
        let uncompared: Vec<String> = uncompared.iter().map(|c| name(c)).collect();
        if at_n.is_empty() {
            out.push((need, not_compared(&uncompared)));
            continue;
        }
        at_n.sort_by(|a, b| {
            b.aggregate_vs_solo
                .unwrap_or(0.0)
                .total_cmp(&a.aggregate_vs_solo.unwrap_or(0.0))
        });
        let describe = |c: &Cell| {
            format!(
                "{} {} together ({}; each worker {} solo)",
                name(c),
                x(c.aggregate_vs_solo.unwrap_or(0.0)),
                with_ci(c.aggregate, c.aggregate_ci, unit),
                x(c.rate_vs_solo.unwrap_or(0.0))
            )
        };
        let gains: Vec<String> = at_n
            .iter()
            .filter(|c| c.aggregate_vs_solo.unwrap_or(0.0) >= GAIN)
            .map(|c| describe(c))
            .collect();
        // Those that only share it out: their total says it; each worker's share follows.
        let flat: Vec<String> = at_n
            .iter()
            .filter(|c| c.aggregate_vs_solo.unwrap_or(0.0) < GAIN)
            .map(|c| {
                format!(
                    "{} {} ({})",
                    name(c),
                    x(c.aggregate_vs_solo.unwrap_or(0.0)),
                    with_ci(c.aggregate, c.aggregate_ci, unit)
                )
            })
            .collect();
        let flat_names: Vec<String> = at_n
            .iter()
            .filter(|c| c.aggregate_vs_solo.unwrap_or(0.0) < GAIN)
            .map(|c| name(c))
            .collect();
        let mut text = match (gains.is_empty(), flat.is_empty()) {
            (false, true) => format!(
                "{} adds throughput over one worker alone: {}.",
                if gains.len() == 1 {
                    "the policy measured"
                } else {
                    "every policy measured"
                },
                and_list(&gains)
            ),
            (false, false) => format!(
                "use {}; {} only {} it out: {}.",
                and_list(&gains),
                and_list(&flat_names),
                if flat_names.len() == 1 {
                    "shares"
                } else {
                    "share"
                },
                and_list(&flat)
            ),
            (true, _) => format!(
                "no policy measured adds throughput over one worker alone (that takes {}); {} \
                 only {} it out: {}.",
                threshold(GAIN),
                and_list(&flat_names),
                if flat_names.len() == 1 {
                    "shares"
                } else {
                    "share"
                },
                and_list(&flat)
            ),
        };
        if !uncompared.is_empty() {
            text.push(' ');
            text.push_str(&cap(&not_compared(&uncompared)));
        }
        out.push((need, text));
    }
}

/// What the verdict says of policies whose cohorts have no solo baseline on their own card: no
/// ratio crosses cards, since H200s differ by 10 to 14 % from one card to the next.
fn not_compared(policies: &[String]) -> String {
    format!(
        "not compared: {} ran on a card without its own solo baseline (a ratio never crosses \
         cards; see the warnings).",
        and_list(policies)
    )
}

/// The inference tail beside other workers (the mixed shapes): who keeps it within [`TAIL_OK`].
fn tail_beside_others(v: &Verdict, _ctx: &ReportContext, out: &mut Vec<(String, String)>) {
    let name = |c: &Cell| v.policies[c.policy].label.clone();
    // A latency-sensitive worker beside others: the mixed shapes' inference group.
    let all: Vec<&Cell> = v
        .cells
        .iter()
        .filter(|c| c.shape.mixed && c.shape.group == Workload::Infer && c.request.is_none())
        .collect();
    let first = all
        .iter()
        .copied()
        .find(|c| c.p99_vs_solo.is_some())
        .or_else(|| {
            all.first()
                .copied()
                .filter(|_| v.solo.contains_key(&Workload::Infer))
        });
    if let Some(first) = first {
        let mix = first.shape.label();
        let mix = mix.split(':').next().unwrap_or_default().to_owned();
        let (mut tails, uncompared): (Vec<&Cell>, Vec<&Cell>) = all
            .into_iter()
            .filter(|c| c.shape.mix == first.shape.mix)
            .partition(|c| c.p99_vs_solo.is_some());
        let uncompared: Vec<String> = uncompared.iter().map(|c| name(c)).collect();
        let need = format!("Inference p99 beside others ({mix}):");
        if tails.is_empty() {
            out.push((need, not_compared(&uncompared)));
            return;
        }
        tails.sort_by(|a, b| {
            a.p99_vs_solo
                .unwrap_or(f64::MAX)
                .total_cmp(&b.p99_vs_solo.unwrap_or(f64::MAX))
        });
        let describe = |c: &Cell| {
            format!(
                "{} {} solo ({}{})",
                name(c),
                x(c.p99_vs_solo.unwrap_or(0.0)),
                with_ci(c.p99_ms, c.p99_ci, " ms"),
                c.solo_p99_ms
                    .map_or_else(String::new, |s| format!("; solo {} ms", num(s)))
            )
        };
        let ok: Vec<&Cell> = tails
            .iter()
            .copied()
            .filter(|c| c.p99_vs_solo.unwrap_or(f64::MAX) <= TAIL_OK)
            .collect();
        let bad: Vec<&Cell> = tails
            .iter()
            .copied()
            .filter(|c| c.p99_vs_solo.unwrap_or(f64::MAX) > TAIL_OK)
            .collect();
        let mut text = if ok.is_empty() {
            format!(
                "no policy measured keeps it within {} solo: {}.",
                threshold(TAIL_OK),
                and_list(&bad.iter().map(|c| describe(c)).collect::<Vec<_>>())
            )
        } else if bad.is_empty() {
            format!(
                "every policy measured keeps it within {} solo: {}.",
                threshold(TAIL_OK),
                and_list(&ok.iter().map(|c| describe(c)).collect::<Vec<_>>())
            )
        } else {
            format!(
                "{} keeps it within {} solo ({}); {} does not ({}).",
                and_list(&ok.iter().map(|c| name(c)).collect::<Vec<_>>()),
                threshold(TAIL_OK),
                and_list(&ok.iter().map(|c| describe(c)).collect::<Vec<_>>()),
                and_list(&bad.iter().map(|c| name(c)).collect::<Vec<_>>()),
                and_list(&bad.iter().map(|c| describe(c)).collect::<Vec<_>>())
            )
        };
        if !uncompared.is_empty() {
            text.push(' ');
            text.push_str(&cap(&not_compared(&uncompared)));
        }
        out.push((need, text));
    }
}

/// N real cards (exclusive across GPUs) against the same shape on one card.
fn real_cards(v: &Verdict, _ctx: &ReportContext, out: &mut Vec<(String, String)>) {
    let name = |c: &Cell| v.policies[c.policy].label.clone();
    // Real cards against one card: exclusive across GPUs beside the same shape on one GPU.
    for across in v.cells.iter().filter(|c| c.across_gpus && !c.shape.mixed) {
        let on_one: Vec<String> = v
            .cells
            .iter()
            .filter(|c| c.shape == across.shape && !c.across_gpus)
            .filter_map(|c| c.rate_vs_solo.map(|r| format!("{} {}", name(c), x(r))))
            .collect();
        let Some(r) = across.rate_vs_solo else {
            continue;
        };
        out.push((
            format!(
                "{} real cards or one card ({}):",
                across.shape.count,
                across.shape.label()
            ),
            format!(
                "on {} GPUs ({}) each worker keeps {} its solo rate{}.",
                across.shape.count,
                name(across),
                x(r),
                if on_one.is_empty() {
                    String::new()
                } else {
                    format!("; sharing one GPU it gets {}", and_list(&on_one))
                }
            ),
        ));
    }
}

/// Capacity at the objective, when a serve study measured it: one sentence per objective.
fn capacity(_v: &Verdict, ctx: &ReportContext, out: &mut Vec<(String, String)>) {
    if ctx.capacity.is_empty() {
        // A study whose serving cohorts have not run yet says so, not where else to look.
        let serving_pending = ctx.cohorts.iter().any(|c| {
            (c.outcome.starts_with("not run") || c.outcome.starts_with("interrupted"))
                && c.workers.split(',').any(|w| w.starts_with("serve"))
        });
        out.push((
            "Serving capacity at an objective:".to_owned(),
            if serving_pending {
                "not run yet: the plan's serving cohorts are among those not run yet (below)."
                    .to_owned()
            } else {
                "not measured: no capacity search in these data (the `decision` plan runs them)."
                    .to_owned()
            },
        ));
    }
    for (slo, q) in objectives(&ctx.capacity) {
        let at: Vec<&super::CapacityRow> = ctx
            .capacity
            .iter()
            .filter(|r| (r.slo_ms - slo).abs() < 1e-9 && (r.quantile - q).abs() < 1e-9)
            .collect();
        // The server alone on a whole GPU is the reference, not a policy that competes.
        let (alone, rows): (Vec<&super::CapacityRow>, Vec<&super::CapacityRow>) =
            at.into_iter().partition(|r| r.mode == Mode::Exclusive);
        let searches = alone.len() + rows.len();
        let alone = best_per_policy(alone);
        let mut rows = best_per_policy(rows);
        rows.sort_by(|a, b| {
            let (ka, kb) = (capacity_key(a), capacity_key(b));
            kb.0.cmp(&ka.0).then(kb.1.total_cmp(&ka.1))
        });
        let Some(objective) = rows.first().or(alone.first()).map(|r| r.objective.clone()) else {
            continue;
        };
        let text: Vec<String> = rows
            .iter()
            .map(|r| format!("{} {}", r.policy, r.capacity_words()))
            .collect();
        let lead = match rows.first() {
            Some(r) if r.capacity_per_s.is_some() => format!("{} sustains the most", r.policy),
            Some(_) => "no policy measured meets it at any rate probed".to_owned(),
            None => "no shared search".to_owned(),
        };
        let beside = rows.first().map(|r| r.note.clone()).unwrap_or_default();
        let mut sentence = if rows.is_empty() {
            String::new()
        } else {
            format!("{lead} ({beside}): {} requests/s", and_list(&text))
        };
        if let Some(a) = alone.first() {
            let _ = write!(
                sentence,
                "{}{} alone: {} requests/s",
                if sentence.is_empty() { "" } else { "; " },
                a.policy,
                a.capacity_words()
            );
        }
        if rows.len() + alone.len() < searches {
            sentence.push_str(
                "; a policy searched more than once is given by its best-informed search (the \
                 highest rate that passed, else the lowest that failed; every search is in the \
                 capacity table)",
            );
        }
        out.push((
            format!("Serving capacity at the objective ({objective}):"),
            format!("{sentence}."),
        ));
    }
}

/// Most first; a search that passed nothing ranks by its failing bound, below any pass.
fn capacity_key(r: &super::CapacityRow) -> (u8, f64) {
    r.capacity_per_s
        .map_or((0, r.failed_above_per_s.unwrap_or(0.0)), |c| (1, c))
}

/// One search per policy and mix, the best-informed of those that ran (a study may search a
/// policy twice: at the plan's floor, then below it with longer probes): the one with the
/// highest rate that passed; when none passed, the lowest rate that failed. Brackets of
/// different searches are not merged: they may differ in more than their probes (one endpoint
/// eager, one graph-captured).
fn best_per_policy(rows: Vec<&super::CapacityRow>) -> Vec<&super::CapacityRow> {
    let mut best: Vec<&super::CapacityRow> = Vec::new();
    for r in rows {
        match best
            .iter_mut()
            .find(|b| b.policy == r.policy && b.note == r.note)
        {
            Some(b) => {
                let better = match (r.capacity_per_s, b.capacity_per_s) {
                    (Some(rc), Some(bc)) => rc > bc,
                    (Some(_), None) => true,
                    (None, Some(_)) => false,
                    // Neither passed: the lower failing rate knows more.
                    (None, None) => {
                        r.failed_above_per_s.unwrap_or(f64::INFINITY)
                            < b.failed_above_per_s.unwrap_or(f64::INFINITY)
                    }
                };
                if better {
                    *b = r;
                }
            }
            None => best.push(r),
        }
    }
    best
}

/// Requests at a fixed rate, when the study ran serve cohorts with an objective: per mix, who
/// met it, with the request p99 and the share of requests within the objective.
fn fixed_rate(v: &Verdict, _ctx: &ReportContext, out: &mut Vec<(String, String)>) {
    let name = |c: &Cell| v.policies[c.policy].label.clone();
    let cells: Vec<(&Cell, &super::ServeSlo)> = v
        .cells
        .iter()
        .filter_map(|c| {
            c.request
                .as_ref()
                .and_then(|r| r.slo.as_ref())
                .map(|s| (c, s))
        })
        .collect();
    let mut mixes: Vec<String> = cells.iter().map(|(c, _)| c.shape.label()).collect();
    mixes.dedup();
    for mix in mixes {
        let here: Vec<&(&Cell, &super::ServeSlo)> = cells
            .iter()
            .filter(|(c, _)| c.shape.label() == mix)
            .collect();
        let Some((first, slo)) = here.first() else {
            continue;
        };
        let describe = |(c, s): &&(&Cell, &super::ServeSlo)| {
            format!(
                "{} (request p99 {} ms, {} % within)",
                name(c),
                num(c.p99_ms),
                num(s.attainment * 100.0)
            )
        };
        let met: Vec<String> = here.iter().filter(|(_, s)| s.meets).map(describe).collect();
        let missed: Vec<String> = here
            .iter()
            .filter(|(_, s)| !s.meets)
            .map(describe)
            .collect();
        let offered = first.request.as_ref().map_or(0.0, |r| r.offered_per_s);
        let text = match (met.is_empty(), missed.is_empty()) {
            (false, true) => format!("every policy measured meets it: {}.", and_list(&met)),
            (true, _) => format!("no policy measured meets it: {}.", and_list(&missed)),
            (false, false) => format!(
                "{} {} it; {} {} not.",
                and_list(&met),
                if met.len() == 1 { "meets" } else { "meet" },
                and_list(&missed),
                if missed.len() == 1 { "does" } else { "do" }
            ),
        };
        out.push((
            format!(
                "Serving at a fixed rate ({mix}, about {} requests/s, {}):",
                num(offered),
                slo.objective
            ),
            text,
        ));
    }
}

/// Memory isolation against a hog, when a study measured it.
fn isolation(_v: &Verdict, ctx: &ReportContext, out: &mut Vec<(String, String)>) {
    if ctx.isolation.is_empty() {
        out.push((
            "Memory isolation against a worker that takes all memory:".to_owned(),
            "not measured: no hog cohort in these data (the `decision` plan runs them).".to_owned(),
        ));
    } else {
        let held: Vec<String> = ctx
            .isolation
            .iter()
            .filter(|r| r.isolated)
            .map(|r| format!("{} ({})", r.policy, r.note))
            .collect();
        let broke: Vec<String> = ctx
            .isolation
            .iter()
            .filter(|r| !r.isolated)
            .map(|r| format!("{} ({})", r.policy, r.note))
            .collect();
        let text = match (held.is_empty(), broke.is_empty()) {
            (false, false) => format!(
                "{} kept the others running; {} did not.",
                and_list(&held),
                and_list(&broke)
            ),
            (false, true) => format!(
                "every policy measured kept the others running: {}.",
                and_list(&held)
            ),
            (true, _) => format!(
                "no policy measured kept the others running: {}.",
                and_list(&broke)
            ),
        };
        out.push((
            "Memory isolation against a worker that takes all memory:".to_owned(),
            text,
        ));
    }
}

/// The card not full: one worker alone under each sharing policy (one Pod on a shared node),
/// against its solo on a whole GPU.
#[expect(
    clippy::too_many_lines,
    reason = "one need per workload: the cells alone, then one clause per verdict word"
)]
fn not_full(v: &Verdict, _ctx: &ReportContext, out: &mut Vec<(String, String)>) {
    use coload_analysis::ratio::{RatioWords, ratio_words};
    let name = |c: &Cell| v.policies[c.policy].label.clone();
    for workload in [Workload::Train, Workload::Infer, Workload::Decode] {
        let unit = rate_unit(workload);
        if !v.solo.contains_key(&workload) {
            continue;
        }
        let (mut alone, uncompared): (Vec<&Cell>, Vec<&Cell>) = v
            .cells
            .iter()
            .filter(|c| !c.shape.mixed && c.shape.group == workload && c.shape.count == 1)
            .partition(|c| c.rate_vs_solo.is_some());
        let uncompared: Vec<String> = uncompared.iter().map(|c| name(c)).collect();
        let need = format!(
            "{} throughput, card not full (one {workload} worker alone):",
            cap(workload.as_str())
        );
        if alone.is_empty() {
            if !uncompared.is_empty() {
                out.push((need, not_compared(&uncompared)));
            }
            continue;
        }
        alone.sort_by(|a, b| {
            b.rate_vs_solo
                .unwrap_or(0.0)
                .total_cmp(&a.rate_vs_solo.unwrap_or(0.0))
        });
        // With a baseline block the interval decides the words; an older comparison (one solo
        // run, no interval) keeps the fixed threshold.
        let words = |c: &Cell| match c.rate_vs_solo_ci {
            Some(ci) => ratio_words(&ci, ALONE_TOLERANCE),
            None if c.rate_vs_solo.unwrap_or(0.0) >= ALONE_OK => RatioWords::AsFastAs,
            None => RatioWords::Below,
        };
        let interval = |c: &Cell| {
            c.rate_vs_solo_ci
                .and_then(|ci| Some(format!(", 95 % CI {} to {}", x(ci.low?), x(ci.high?))))
                .unwrap_or_default()
        };
        let short = |c: &Cell| {
            format!(
                "{} {}{}",
                name(c),
                x(c.rate_vs_solo.unwrap_or(0.0)),
                interval(c)
            )
        };
        let long = |c: &Cell| {
            format!(
                "{} {} ({}{unit}{})",
                name(c),
                x(c.rate_vs_solo.unwrap_or(0.0)),
                num(c.rate),
                interval(c)
            )
        };
        let of = |w: RatioWords| -> Vec<&Cell> {
            alone.iter().copied().filter(|c| words(c) == w).collect()
        };
        let (ok, capped, open, faster) = (
            of(RatioWords::AsFastAs),
            of(RatioWords::Below),
            of(RatioWords::NotSettled),
            of(RatioWords::Above),
        );
        let names = |cells: &[&Cell]| and_list(&cells.iter().map(|c| name(c)).collect::<Vec<_>>());
        let verb = |cells: &[&Cell], one: &str, many: &str| {
            if cells.len() == 1 { one } else { many }.to_owned()
        };
        let mut parts = Vec::new();
        if !ok.is_empty() {
            parts.push(format!(
                "{} {} it as fast as a whole GPU ({})",
                names(&ok),
                verb(&ok, "runs", "run"),
                and_list(&ok.iter().map(|c| short(c)).collect::<Vec<_>>())
            ));
        }
        if !faster.is_empty() {
            parts.push(format!(
                "{} {} it faster than its solo ({})",
                names(&faster),
                verb(&faster, "runs", "run"),
                and_list(&faster.iter().map(|c| short(c)).collect::<Vec<_>>())
            ));
        }
        if !capped.is_empty() {
            parts.push(format!(
                "{} {} it: {}",
                names(&capped),
                verb(&capped, "caps", "cap"),
                and_list(&capped.iter().map(|c| long(c)).collect::<Vec<_>>())
            ));
        }
        let (unsettled, single): (Vec<&Cell>, Vec<&Cell>) = open
            .into_iter()
            .partition(|c| c.rate_vs_solo_ci.is_some_and(|ci| ci.low.is_some()));
        if !unsettled.is_empty() {
            parts.push(format!(
                "for {} the runs do not settle it within {:.0} % of solo ({})",
                names(&unsettled),
                ALONE_TOLERANCE * 100.0,
                and_list(&unsettled.iter().map(|c| short(c)).collect::<Vec<_>>())
            ));
        }
        if !single.is_empty() {
            parts.push(format!(
                "for {} one run and one solo give no interval ({})",
                names(&single),
                and_list(&single.iter().map(|c| short(c)).collect::<Vec<_>>())
            ));
        }
        let mut text = parts.join("; ");
        text.push('.');
        if !uncompared.is_empty() {
            text.push(' ');
            text.push_str(&cap(&not_compared(&uncompared)));
        }
        out.push((need, text));
    }
}

/// Energy per sample: the full card's shape per policy against one worker alone, where the
/// cohorts recorded the GPU's energy counter.
fn energy(v: &Verdict, _ctx: &ReportContext, out: &mut Vec<(String, String)>) {
    let name = |c: &Cell| v.policies[c.policy].label.clone();
    let workload = Workload::Train;
    let shared: Vec<&Cell> = v
        .cells
        .iter()
        .filter(|c| !c.shape.mixed && c.shape.group == workload && !c.across_gpus)
        .filter(|c| c.samples_per_joule.is_some())
        .collect();
    let Some(n) = shared.iter().map(|c| c.shape.count).max() else {
        out.push((
            "Energy per sample:".to_owned(),
            "not measured: no training cohort recorded the GPU's energy counter.".to_owned(),
        ));
        return;
    };
    let mut full: Vec<&Cell> = shared
        .iter()
        .copied()
        .filter(|c| c.shape.count == n)
        .collect();
    full.sort_by(|a, b| {
        b.samples_per_joule
            .unwrap_or(0.0)
            .total_cmp(&a.samples_per_joule.unwrap_or(0.0))
    });
    let words = |cells: &[&Cell]| {
        and_list(
            &cells
                .iter()
                .map(|c| format!("{} {}", name(c), ratio(c.samples_per_joule.unwrap_or(0.0))))
                .collect::<Vec<_>>(),
        )
    };
    let alone: Vec<&Cell> = shared
        .iter()
        .copied()
        .filter(|c| c.shape.count == 1)
        .collect();
    // The solo is the one of the cells' own card: a joule on another card is not comparable.
    let solos: Vec<Option<f64>> = full.iter().map(|c| c.solo_samples_per_joule).collect();
    let mut text = format!("training samples per device joule: {}", words(&full));
    match solos.first().copied().flatten() {
        Some(s) if solos.iter().all(|x| *x == Some(s)) => {
            let _ = write!(text, "; solo on a whole GPU of the same card {}", ratio(s));
        }
        _ if v.solo_samples_per_joule.contains_key(&workload) => {
            text.push_str("; no same-card solo to set them against");
        }
        _ => {}
    }
    if !alone.is_empty() {
        let _ = write!(text, "; one trainer alone under {}", words(&alone));
    }
    text.push('.');
    out.push((
        format!("Energy per sample (train, {n} on one device):"),
        text,
    ));
}

/// Every policy the study planned but could not measure on its node, with the reason; MIG is
/// always named, measured or not.
fn not_measured(v: &Verdict, ctx: &ReportContext, out: &mut Vec<(String, String)>) {
    let mut items: Vec<String> = ctx
        .not_measured
        .iter()
        .map(|(policy, why)| format!("{policy}: {why}"))
        .collect();
    let mig_measured = v
        .policies
        .iter()
        .any(|p| matches!(p.mode, Mode::Mig | Mode::MigTimeslice));
    let mig_named = ctx
        .not_measured
        .iter()
        .any(|(p, _)| p.to_ascii_lowercase().contains("mig"));
    if !mig_measured && !mig_named {
        items.push("MIG: no MIG cohort in these data (the plan has no MIG policy)".to_owned());
    }
    if !items.is_empty() {
        out.push((
            "Not measured here:".to_owned(),
            format!("{}.", items.join("; ")),
        ));
    }
    not_run_yet(ctx, out);
}

/// The cohorts a study has not run yet (a time budget ran out, or it was interrupted), by
/// workload mix with their policies: a reader of an unfinished study sees what the verdict
/// above does not include yet.
fn not_run_yet(ctx: &ReportContext, out: &mut Vec<(String, String)>) {
    let pending: Vec<&super::ContextCohort> = ctx
        .cohorts
        .iter()
        .filter(|c| c.outcome.starts_with("not run") || c.outcome.starts_with("interrupted"))
        .collect();
    if pending.is_empty() {
        return;
    }
    let mut mixes: Vec<(&str, usize, Vec<&str>)> = Vec::new();
    for c in &pending {
        match mixes.iter_mut().find(|(m, _, _)| *m == c.workers) {
            Some((_, n, policies)) => {
                *n += 1;
                if !policies.contains(&c.policy.as_str()) {
                    policies.push(&c.policy);
                }
            }
            None => mixes.push((&c.workers, 1, vec![&c.policy])),
        }
    }
    let groups: Vec<String> = mixes
        .iter()
        .map(|(mix, n, policies)| {
            let times = if *n > 1 {
                format!(" x{n}")
            } else {
                String::new()
            };
            format!("{mix}{times} ({})", policies.join(", "))
        })
        .collect();
    out.push((
        "Not run yet:".to_owned(),
        format!(
            "{} cohort{} of the plan: {}. Run the study again to resume them; the figures \
             above are from the cohorts complete so far.",
            pending.len(),
            if pending.len() == 1 { "" } else { "s" },
            groups.join("; ")
        ),
    ));
}

fn cap(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
        .unwrap_or_default()
}

/// The objectives of `rows` (`(slo_ms, quantile)`), in order of first appearance.
pub(crate) fn objectives(rows: &[super::CapacityRow]) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = Vec::new();
    for r in rows {
        if !out
            .iter()
            .any(|(s, q)| (s - r.slo_ms).abs() < 1e-9 && (q - r.quantile).abs() < 1e-9)
        {
            out.push((r.slo_ms, r.quantile));
        }
    }
    out
}
