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

use std::collections::BTreeMap;

use coload_cohort_schema::{CohortComparison, Comparison, Mode, Workload};

use super::ReportContext;
use super::svg::num;

/// Aggregate against one worker alone from which sharing counts as adding throughput.
pub(crate) const GAIN: f64 = 1.10;
/// p99 against solo up to which a policy counts as protecting the tail.
pub(crate) const TAIL_OK: f64 = 2.0;

/// Colours per mode: the first policy of a mode gets the first, a second policy of the same mode
/// (another MPS share) the next. Chosen to stay apart for the common colour-vision deficiencies.
fn mode_colors(mode: Mode) -> &'static [&'static str] {
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
    /// Mean of the group's pooled p99, ms.
    pub(crate) p99_ms: f64,
    /// Mean per-worker p99 against solo.
    pub(crate) p99_vs_solo: Option<f64>,
    /// Mean aggregate samples/s of the group.
    pub(crate) aggregate: f64,
    /// Mean aggregate against solo.
    pub(crate) aggregate_vs_solo: Option<f64>,
    /// Mean Jain fairness.
    pub(crate) jain: f64,
    /// The cohort spans one GPU per worker (exclusive with several workers).
    pub(crate) across_gpus: bool,
}

/// The verdict of a comparison.
#[derive(Debug, Clone)]
pub(crate) struct Verdict {
    pub(crate) policies: Vec<Policy>,
    /// Sorted by shape, then policy.
    pub(crate) cells: Vec<Cell>,
    /// Solo samples/s and p99 ms per workload.
    pub(crate) solo: BTreeMap<Workload, (f64, f64)>,
    /// Needs and what the data say about them.
    pub(crate) sentences: Vec<(String, String)>,
}

/// The policy label of a cohort: the study's name for it, else its mode, with its MPS share when
/// it declared one (`mps (replicas 7)`), so that two shares never pool into one policy.
pub(crate) fn policy_label(ctx: &ReportContext, c: &CohortComparison) -> String {
    ctx.policies.get(&c.experiment).cloned().unwrap_or_else(|| {
        c.share.map_or_else(
            || c.mode.to_string(),
            |s| format!("{} ({})", c.mode, s.label()),
        )
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
pub(crate) fn verdict(c: &Comparison, ctx: &ReportContext) -> Verdict {
    let policies = policies(c, ctx);
    let index = |label: &str| policies.iter().position(|p| p.label == label).unwrap_or(0);
    let baseline_experiments: Vec<&str> = c
        .baselines
        .values()
        .map(|b| b.experiment.as_str())
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
            let p99: Vec<Option<f64>> = g.per_worker.iter().map(|w| w.p99_vs_solo).collect();
            let rates: Vec<f64> = g.per_worker.iter().map(|w| w.samples_per_s).collect();
            by.entry((shape, index(&policy_label(ctx, k))))
                .or_default()
                .push(PerCohort {
                    rate: mean(&rates),
                    rate_vs_solo: mean_opt(&per),
                    p99_ms: g.p99_ms,
                    p99_vs_solo: mean_opt(&p99),
                    aggregate: g.aggregate_samples_per_s,
                    aggregate_vs_solo: g.aggregate_vs_solo,
                    jain: g.jain_fairness,
                    across_gpus: k.mode == Mode::Exclusive && k.count > 1,
                });
        }
    }
    let cells: Vec<Cell> = by
        .into_iter()
        .map(|((shape, policy), v)| Cell {
            shape,
            policy,
            cohorts: v.len(),
            rate: mean(&v.iter().map(|p| p.rate).collect::<Vec<_>>()),
            rate_vs_solo: mean_opt(&v.iter().map(|p| p.rate_vs_solo).collect::<Vec<_>>()),
            p99_ms: mean(&v.iter().map(|p| p.p99_ms).collect::<Vec<_>>()),
            p99_vs_solo: mean_opt(&v.iter().map(|p| p.p99_vs_solo).collect::<Vec<_>>()),
            aggregate: mean(&v.iter().map(|p| p.aggregate).collect::<Vec<_>>()),
            aggregate_vs_solo: mean_opt(&v.iter().map(|p| p.aggregate_vs_solo).collect::<Vec<_>>()),
            jain: mean(&v.iter().map(|p| p.jain).collect::<Vec<_>>()),
            across_gpus: v.iter().any(|p| p.across_gpus),
        })
        .collect();
    let solo = c
        .baselines
        .iter()
        .map(|(w, b)| (*w, (b.samples_per_s, b.p99_ms)))
        .collect();
    let mut v = Verdict {
        policies,
        cells,
        solo,
        sentences: Vec::new(),
    };
    v.sentences = sentences(&v, ctx);
    v
}

struct PerCohort {
    rate: f64,
    rate_vs_solo: Option<f64>,
    p99_ms: f64,
    p99_vs_solo: Option<f64>,
    aggregate: f64,
    aggregate_vs_solo: Option<f64>,
    jain: f64,
    across_gpus: bool,
}

fn x(v: f64) -> String {
    format!("{}×", num(v))
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
    for part in [
        throughput,
        tail_beside_others,
        real_cards,
        capacity,
        isolation,
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

/// Throughput on one device, per workload: the policies that add some and those that only share it out.
fn throughput(v: &Verdict, _ctx: &ReportContext, out: &mut Vec<(String, String)>) {
    let name = |c: &Cell| v.policies[c.policy].label.clone();
    for workload in [Workload::Train, Workload::Infer] {
        // Throughput on one GPU: the largest homogeneous shape that policies share one GPU in.
        let shared: Vec<&Cell> = v
            .cells
            .iter()
            .filter(|c| !c.shape.mixed && c.shape.group == workload && !c.across_gpus)
            .filter(|c| c.shape.count > 1 && c.aggregate_vs_solo.is_some())
            .collect();
        let Some(n) = shared.iter().map(|c| c.shape.count).max() else {
            continue;
        };
        let mut at_n: Vec<&Cell> = shared.into_iter().filter(|c| c.shape.count == n).collect();
        at_n.sort_by(|a, b| {
            b.aggregate_vs_solo
                .unwrap_or(0.0)
                .total_cmp(&a.aggregate_vs_solo.unwrap_or(0.0))
        });
        let describe = |c: &Cell| {
            format!(
                "{} {} together ({} samples/s; each worker {} solo)",
                name(c),
                x(c.aggregate_vs_solo.unwrap_or(0.0)),
                num(c.aggregate),
                x(c.rate_vs_solo.unwrap_or(0.0))
            )
        };
        let gains: Vec<String> = at_n
            .iter()
            .filter(|c| c.aggregate_vs_solo.unwrap_or(0.0) >= GAIN)
            .map(|c| describe(c))
            .collect();
        let flat: Vec<String> = at_n
            .iter()
            .filter(|c| c.aggregate_vs_solo.unwrap_or(0.0) < GAIN)
            .map(|c| describe(c))
            .collect();
        let need = format!(
            "{} throughput, {n} {workload} workers sharing one device:",
            cap(workload.as_str())
        );
        let flat_names: Vec<String> = at_n
            .iter()
            .filter(|c| c.aggregate_vs_solo.unwrap_or(0.0) < GAIN)
            .map(|c| name(c))
            .collect();
        let text = match (gains.is_empty(), flat.is_empty()) {
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
                x(GAIN),
                and_list(&flat_names),
                if flat_names.len() == 1 {
                    "shares"
                } else {
                    "share"
                },
                and_list(&flat)
            ),
        };
        out.push((need, text));
    }
}

/// The inference tail beside other workers (the mixed shapes): who keeps it within [`TAIL_OK`].
fn tail_beside_others(v: &Verdict, _ctx: &ReportContext, out: &mut Vec<(String, String)>) {
    let name = |c: &Cell| v.policies[c.policy].label.clone();
    // A latency-sensitive worker beside others: the mixed shapes' inference group.
    let tails: Vec<&Cell> = v
        .cells
        .iter()
        .filter(|c| c.shape.mixed && c.shape.group == Workload::Infer && c.p99_vs_solo.is_some())
        .collect();
    if let Some(first) = tails.first().copied() {
        let mix = first.shape.label();
        let mix = mix.split(':').next().unwrap_or_default().to_owned();
        let mut tails: Vec<&Cell> = tails
            .into_iter()
            .filter(|c| c.shape.mix == first.shape.mix)
            .collect();
        tails.sort_by(|a, b| {
            a.p99_vs_solo
                .unwrap_or(f64::MAX)
                .total_cmp(&b.p99_vs_solo.unwrap_or(f64::MAX))
        });
        let solo_ms = v.solo.get(&Workload::Infer).map(|s| s.1);
        let describe = |c: &Cell| {
            format!(
                "{} {} solo ({} ms{})",
                name(c),
                x(c.p99_vs_solo.unwrap_or(0.0)),
                num(c.p99_ms),
                solo_ms.map_or_else(String::new, |s| format!(" against {} ms", num(s)))
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
        let need = format!("Inference p99 beside others ({mix}):");
        let text = if ok.is_empty() {
            format!(
                "no policy measured keeps it within {} solo: {}.",
                x(TAIL_OK),
                and_list(&bad.iter().map(|c| describe(c)).collect::<Vec<_>>())
            )
        } else if bad.is_empty() {
            format!(
                "every policy measured keeps it within {} solo: {}.",
                x(TAIL_OK),
                and_list(&ok.iter().map(|c| describe(c)).collect::<Vec<_>>())
            )
        } else {
            format!(
                "{} keeps it within {} solo ({}); {} does not ({}).",
                and_list(&ok.iter().map(|c| name(c)).collect::<Vec<_>>()),
                x(TAIL_OK),
                and_list(&ok.iter().map(|c| describe(c)).collect::<Vec<_>>()),
                and_list(&bad.iter().map(|c| name(c)).collect::<Vec<_>>()),
                and_list(&bad.iter().map(|c| describe(c)).collect::<Vec<_>>())
            )
        };
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
    for (slo, q) in objectives(&ctx.capacity) {
        let mut rows: Vec<&super::CapacityRow> = ctx
            .capacity
            .iter()
            .filter(|r| (r.slo_ms - slo).abs() < 1e-9 && (r.quantile - q).abs() < 1e-9)
            .collect();
        // Most first; a search that passed nothing ranks by its failing bound, below any pass.
        let key = |r: &super::CapacityRow| {
            r.capacity_per_s
                .map_or((0, r.failed_above_per_s.unwrap_or(0.0)), |c| (1, c))
        };
        rows.sort_by(|a, b| {
            let (ka, kb) = (key(a), key(b));
            kb.0.cmp(&ka.0).then(kb.1.total_cmp(&ka.1))
        });
        let text: Vec<String> = rows
            .iter()
            .map(|r| format!("{} {} requests/s", r.policy, r.capacity_words()))
            .collect();
        let lead = if rows[0].capacity_per_s.is_some() {
            format!("{} sustains the most", rows[0].policy)
        } else {
            "no policy measured meets it at any rate probed".to_owned()
        };
        out.push((
            format!("Serving capacity at the objective ({}):", rows[0].objective),
            format!("{lead}; {}.", and_list(&text)),
        ));
    }
}

/// Memory isolation against a hog, when a study measured it.
fn isolation(_v: &Verdict, ctx: &ReportContext, out: &mut Vec<(String, String)>) {
    if !ctx.isolation.is_empty() {
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
