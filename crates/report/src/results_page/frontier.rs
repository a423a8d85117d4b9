//! The page's first screens: the like-for-like studies (`2026-12-02-frontier/*` and
//! `2026-12-02-share-sweep`), each run on one card in one run, every ratio over the exclusive
//! solos of that same card with its 95 % interval (`coload_analysis::ratio::ratio_of_means`:
//! the cohorts' noise and the solos' together).
//!
//! The older rounds divided some cohorts by solos of another card; nothing here does: a cohort
//! whose card has no solo reads [`NOT_COMPARED`] instead of a ratio.

use std::collections::BTreeMap;
use std::path::Path;

use coload_analysis::ratio::ratio_of_means;
use coload_cohort_schema::{Comparison, DeclaredShare, Mode, RatioInterval, SharePolicy, Workload};

use super::decision::{Need, decision_table};
use super::{PageError, Study, table};
use crate::CapacityRow;
use crate::svg::{num, rate};
use crate::verdict::ratio;

pub(crate) const FRONTIER: &str = "2026-12-02-frontier";
pub(crate) const SHARE_SWEEP: &str = "2026-12-02-share-sweep";

/// What a ratio reads where the cohort's card has no solo of its own.
pub(crate) const NOT_COMPARED: &str = "no same-card solo";

/// The policies of the frontier and share-sweep plans, in the page's order.
const POLICIES: [&str; 6] = [
    "exclusive",
    "timeslice",
    "mps-replicas-2",
    "mps-replicas-4",
    "mps-replicas-7",
    "mps-unlimited",
];

/// The policies of the decision-rows plan.
const DECISION_POLICIES: [&str; 3] = ["timeslice", "mps-plugin", "mps-unlimited"];

const TRAIN: Workload = Workload::Train;
const INFER: Workload = Workload::Infer;

/// A card's UUID as a reader tells cards apart (`GPU-b77eb585`).
fn card(uuid: &str) -> String {
    coload_analysis::short_card(uuid).to_owned()
}

/// A ratio with its interval: `1.80x [1.69 to 1.91]`; one run on each side has none.
pub(crate) fn ratio_ci(r: Option<&RatioInterval>) -> String {
    match r {
        None => NOT_COMPARED.to_owned(),
        // The analysis crate's words for a ratio, as the study report and the decision table
        // write it.
        Some(r) if r.low.is_some() && r.high.is_some() => coload_analysis::frontier::ratio_words(r),
        Some(r) => format!("{}x (one run each side: no interval)", ratio(r.ratio)),
    }
}

/// A share as its policy promises it: `14 % of the threads` (MPS's active thread percentage),
/// or why there is no figure.
fn promise(mode: Mode, share: Option<&DeclaredShare>) -> String {
    match (mode, share) {
        (Mode::Mps, Some(s)) if s.policy != SharePolicy::Unlimited => {
            s.active_thread_percentage.map_or_else(
                || "no thread limit recorded".to_owned(),
                |p| format!("{p} % of the threads"),
            )
        }
        (Mode::Mps, _) => "every SM (no limit)".to_owned(),
        (Mode::Timeslice, _) => "every SM, in turns".to_owned(),
        (Mode::Exclusive, _) => "the whole card".to_owned(),
        (other, _) => other.to_string(),
    }
}

/// The solo runs of `workload` on `uuid`, from the comparison's baseline block of that card:
/// (samples/s, p99 ms, samples per device joule) per run.
struct Solo {
    rates: Vec<f64>,
    p99s: Vec<f64>,
    per_joule: Vec<f64>,
}

fn solo_on(c: &Comparison, workload: Workload, uuid: &str, run: Option<u32>) -> Option<Solo> {
    // A block is a card in one run of the study (where runs were recorded).
    let block = c
        .baseline_blocks
        .iter()
        .find(|b| b.workload == workload && b.card.as_deref() == Some(uuid) && b.run == run)?;
    let groups: Vec<_> = c
        .cohorts
        .iter()
        .filter(|k| block.experiments.contains(&k.experiment))
        .filter_map(|k| k.groups.get(&workload))
        .collect();
    Some(Solo {
        rates: groups.iter().map(|g| g.aggregate_samples_per_s).collect(),
        p99s: groups.iter().map(|g| g.p99_ms).collect(),
        per_joule: groups
            .iter()
            .filter_map(|g| g.samples_per_device_joule)
            .collect(),
    })
}

/// The one card every cohort of `c` ran on, or every card named (`GPU-a, GPU-b`).
pub(crate) fn cards_of(c: &Comparison) -> String {
    let mut cards: Vec<String> = c
        .cohorts
        .iter()
        .flat_map(|k| k.cards.iter().map(|u| card(u)))
        .collect();
    cards.sort();
    cards.dedup();
    if cards.is_empty() {
        "no card recorded".to_owned()
    } else {
        cards.join(", ")
    }
}

/// The trainers beside a capacity search's endpoint: at the highest rate that passed, or,
/// where none passed, at the lowest rate whose probe completed.
pub(crate) struct Beside {
    /// The probe's rate, requests/s, and whether it passed.
    pub(crate) rate: f64,
    pub(crate) passed: bool,
    /// The trainers' aggregate samples/s there.
    pub(crate) samples_per_s: f64,
    /// Over the same card's solo trainer runs; `None` without a solo on that card.
    pub(crate) vs_solo: Option<RatioInterval>,
    /// The card the probe ran on.
    pub(crate) card: Option<String>,
    /// The MPS share or policy of the probe.
    pub(crate) mode: Mode,
    pub(crate) share: Option<DeclaredShare>,
}

/// The trainers beside `search`'s endpoint, as the study's decision table has them
/// (`coload_analysis::frontier`: the probe at the capacity, or the lowest-rate one where none
/// passed, over the same card's solo trainers): the page restates no rule of its own.
fn beside(study: &Study, search: &CapacityRow) -> Result<Option<Beside>, PageError> {
    let Some(decision) = study.comparison().decision.as_ref() else {
        return Err(PageError::data(
            &study.path,
            "no decision table: the study has no capacity search beside trainers".to_owned(),
        ));
    };
    let Some(p) = decision.points.iter().find(|p| p.policy == search.policy) else {
        return Ok(None);
    };
    let Some(samples_per_s) = p.train_samples_per_s else {
        return Ok(None);
    };
    Ok(Some(Beside {
        rate: p.probe_rate_per_s,
        passed: p.probe_passed,
        samples_per_s,
        vs_solo: p.train_vs_solo,
        card: p.card.clone(),
        mode: p.mode,
        share: p.share,
    }))
}

/// A policy as the page names it, with its share where the data record one.
fn policy_words(policy: &str, b: Option<&Beside>) -> String {
    let base = match policy {
        "exclusive" => "endpoint alone (exclusive)".to_owned(),
        "timeslice" => "time-slicing".to_owned(),
        "mps-unlimited" => "MPS, unlimited".to_owned(),
        other => other.replace("mps-replicas-", "MPS, replicas "),
    };
    match b {
        // The share as the study report and the decision table word it.
        Some(b) if b.mode == Mode::Mps => {
            coload_analysis::frontier::policy_words(b.mode, b.share.as_ref())
        }
        _ => base,
    }
}

/// One frontier: per policy, the capacity at the objective and the trainers beside it.
pub(crate) struct Frontier {
    pub(crate) objective: String,
    pub(crate) rows: Vec<(String, CapacityRow, Option<Beside>)>,
    pub(crate) cards: String,
}

fn frontier(study: &Study) -> Result<Frontier, PageError> {
    let mut rows = Vec::new();
    for policy in POLICIES {
        let Some(search) = study
            .assembled
            .context
            .capacity
            .iter()
            .find(|r| r.policy == policy)
        else {
            continue;
        };
        let b = if policy == "exclusive" {
            None
        } else {
            beside(study, search)?
        };
        rows.push((policy.to_owned(), search.clone(), b));
    }
    let objective = rows
        .first()
        .map_or_else(|| "-".to_owned(), |(_, r, _)| r.objective.clone());
    Ok(Frontier {
        objective,
        rows,
        cards: cards_of(study.comparison()),
    })
}

fn frontier_table(f: &Frontier) -> String {
    let rows = f
        .rows
        .iter()
        .map(|(policy, search, b)| {
            let (trainers, vs, card_text) = match b {
                None => ("none beside it".to_owned(), String::new(), f.cards.clone()),
                Some(b) => (
                    format!(
                        "{} samples/s at {} requests/s{}",
                        num(b.samples_per_s),
                        rate(b.rate),
                        if b.passed { "" } else { " (failed)" }
                    ),
                    ratio_ci(b.vs_solo.as_ref()),
                    b.card.as_deref().map_or_else(|| "-".to_owned(), card),
                ),
            };
            vec![
                policy_words(policy, b.as_ref()),
                format!(
                    "{} {}",
                    search.capacity_words(),
                    crate::comparison::bracket_words(search)
                ),
                trainers,
                vs,
                card_text,
            ]
        })
        .collect();
    table(
        &[
            "policy",
            "capacity, requests/s [passed, failed)",
            "trainers together, at the highest rate passed",
            "÷ one same-card solo [95 %]",
            "card",
        ],
        rows,
    )
}

/// The cohorts of `policy` (the study's policy names) on `mix`.
fn cells<'a>(
    study: &'a Study,
    policy: &str,
    mix: &[(Workload, u32)],
) -> Vec<&'a coload_cohort_schema::CohortComparison> {
    let mix: BTreeMap<Workload, u32> = mix.iter().copied().collect();
    study
        .comparison()
        .cohorts
        .iter()
        .filter(|k| k.workload_mix == mix)
        .filter(|k| {
            study
                .assembled
                .context
                .policies
                .get(&k.experiment)
                .map(String::as_str)
                == Some(policy)
        })
        .collect()
}

/// The one card of `cohorts`, where they share one.
/// The one baseline block (card, run of the study) every cohort of `cohorts` ran in, or `None`
/// for cohorts of several cards or runs (runs not recorded count as one).
fn one_block(cohorts: &[&coload_cohort_schema::CohortComparison]) -> Option<(String, Option<u32>)> {
    let mut blocks: Vec<(&String, Option<u32>)> = cohorts
        .iter()
        .flat_map(|k| k.cards.iter().map(|c| (c, k.run)))
        .collect();
    blocks.sort_unstable();
    blocks.dedup();
    match blocks.as_slice() {
        [(card, run)] => Some(((*card).clone(), *run)),
        _ => None,
    }
}

fn one_card(cohorts: &[&coload_cohort_schema::CohortComparison]) -> Option<String> {
    let mut cards: Vec<&String> = cohorts.iter().flat_map(|k| k.cards.iter()).collect();
    cards.sort();
    cards.dedup();
    match cards.as_slice() {
        [one] => Some((*one).clone()),
        _ => None,
    }
}

/// What a group of `cohorts` measured against the same card's solo of `solo_workload`:
/// `pick(group)` on each cohort over `of_solo(solo)`.
fn against_solo(
    study: &Study,
    cohorts: &[&coload_cohort_schema::CohortComparison],
    group: Workload,
    pick: impl Fn(&coload_cohort_schema::GroupComparison) -> Option<f64>,
    of_solo: impl Fn(&Solo) -> &[f64],
) -> (Vec<f64>, Option<RatioInterval>) {
    let values: Vec<f64> = cohorts
        .iter()
        .filter_map(|k| k.groups.get(&group))
        .filter_map(&pick)
        .collect();
    let r = one_block(cohorts)
        .and_then(|(u, run)| solo_on(study.comparison(), group, &u, run))
        .and_then(|solo| ratio_of_means(&values, of_solo(&solo)));
    (values, r)
}

fn mean(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        None
    } else {
        Some(v.iter().sum::<f64>() / v.len() as f64)
    }
}

/// `6,165 samples/s: 1.80x [1.69 to 1.91]`.
fn figure(values: &[f64], unit: &str, r: Option<&RatioInterval>) -> String {
    mean(values).map_or_else(
        || "not measured".to_owned(),
        |m| format!("{} {unit}: {}", num(m), ratio_ci(r)),
    )
}

/// The decision rows: per policy, the card full, the inference tail beside training and the
/// energy, each against the same card's solos.
pub(crate) struct DecisionRow {
    pub(crate) policy: String,
    pub(crate) full: (Vec<f64>, Option<RatioInterval>),
    pub(crate) per_worker: (Vec<f64>, Option<RatioInterval>),
    pub(crate) tail: (Vec<f64>, Option<RatioInterval>),
    pub(crate) beside: (Vec<f64>, Option<RatioInterval>),
    pub(crate) energy: (Vec<f64>, Option<RatioInterval>),
    pub(crate) card: Option<String>,
    /// The cards column, as the device plugin would place the shape's tenants.
    pub(crate) cards: String,
}

fn decision_rows(study: &Study) -> Vec<DecisionRow> {
    let full_mix = [(TRAIN, 7)];
    let mixed = [(INFER, 1), (TRAIN, 6)];
    DECISION_POLICIES
        .iter()
        .map(|p| {
            let full = cells(study, p, &full_mix);
            let mix = cells(study, p, &mixed);
            let mut all = full.clone();
            all.extend(mix.iter().copied());
            DecisionRow {
                policy: (*p).to_owned(),
                full: against_solo(
                    study,
                    &full,
                    TRAIN,
                    |g| Some(g.aggregate_samples_per_s),
                    |s| &s.rates,
                ),
                per_worker: against_solo(
                    study,
                    &full,
                    TRAIN,
                    |g| Some(g.aggregate_samples_per_s / f64::from(g.workers.max(1))),
                    |s| &s.rates,
                ),
                tail: against_solo(study, &mix, INFER, |g| Some(g.p99_ms), |s| &s.p99s),
                beside: against_solo(
                    study,
                    &mix,
                    TRAIN,
                    |g| Some(g.aggregate_samples_per_s),
                    |s| &s.rates,
                ),
                energy: against_solo(
                    study,
                    &full,
                    TRAIN,
                    |g| g.samples_per_device_joule,
                    |s| &s.per_joule,
                ),
                card: one_card(&all),
                cards: full.first().map_or_else(
                    || "-".to_owned(),
                    |k| {
                        let tenants = full_mix.iter().map(|(_, n)| n).sum();
                        let n =
                            coload_analysis::frontier::cards_for(k.mode, k.share.as_ref(), tenants);
                        format!(
                            "{n} {} for {tenants}",
                            if n == 1 { "card" } else { "cards" }
                        )
                    },
                ),
            }
        })
        .collect()
}

fn rows_policy_words(policy: &str) -> &str {
    match policy {
        "timeslice" => "time-slicing",
        "mps-plugin" => "MPS, plugin replicas 7",
        "mps-unlimited" => "MPS, unlimited",
        other => other,
    }
}

fn decision_rows_table(rows: &[DecisionRow]) -> String {
    table(
        &[
            "policy",
            "card full: 7 trainers, aggregate ÷ solo [95 %]",
            "inference p99 beside 6 trainers ÷ solo [95 %]",
            "those 6 trainers ÷ solo [95 %]",
            "energy: 7 trainers' samples/J ÷ solo's [95 %]",
            "card",
        ],
        rows.iter()
            .map(|r| {
                vec![
                    rows_policy_words(&r.policy).to_owned(),
                    figure(&r.full.0, "samples/s", r.full.1.as_ref()),
                    figure(&r.tail.0, "ms", r.tail.1.as_ref()),
                    figure(&r.beside.0, "samples/s", r.beside.1.as_ref()),
                    figure(&r.energy.0, "samples/J", r.energy.1.as_ref()),
                    r.card
                        .as_deref()
                        .map_or_else(|| "several cards".to_owned(), card),
                ]
            })
            .collect(),
    )
}

/// The solos the decision rows divide by, in words: `train 3,427 samples/s [...], ...`.
fn solo_words(study: &Study, full: bool) -> String {
    let c = study.comparison();
    let mut parts = Vec::new();
    for b in &c.baseline_blocks {
        let Some(uuid) = b.card.as_deref() else {
            continue;
        };
        let Some(solo) = solo_on(c, b.workload, uuid, b.run) else {
            continue;
        };
        let ci = |e: &coload_cohort_schema::Estimate, unit: &str| match (e.ci95_low, e.ci95_high) {
            (Some(l), Some(h)) => format!("{} {unit} [{} to {}]", num(e.mean), num(l), num(h)),
            _ => format!("{} {unit}", num(e.mean)),
        };
        let joule = mean(&solo.per_joule)
            .map(|j| format!(", {} samples/J", num(j)))
            .unwrap_or_default();
        let more = if full {
            format!(", p99 {}{joule}", ci(&b.p99_ms, "ms"))
        } else {
            String::new()
        };
        parts.push(format!(
            "{} on {}, {} runs: {}{more}",
            b.workload,
            card(uuid),
            b.experiments.len(),
            ci(&b.samples_per_s, "samples/s"),
        ));
    }
    if parts.is_empty() {
        "none recorded".to_owned()
    } else {
        parts.join("; ")
    }
}

/// Share fidelity: each workload alone under each policy, delivered against promised.
fn share_table(study: &Study) -> String {
    let mut rows = Vec::new();
    for policy in POLICIES.iter().filter(|p| **p != "exclusive") {
        let mut line: Vec<String> = Vec::new();
        let mut promised: Option<String> = None;
        let mut cohorts_all = Vec::new();
        for w in [TRAIN, INFER] {
            let cohorts = cells(study, policy, &[(w, 1)]);
            if let Some(k) = cohorts.first() {
                promised.get_or_insert_with(|| promise(k.mode, k.share.as_ref()));
            }
            let (values, r) = against_solo(
                study,
                &cohorts,
                w,
                |g| Some(g.aggregate_samples_per_s),
                |s| &s.rates,
            );
            let pct = cohorts
                .first()
                .and_then(|k| k.share.as_ref())
                .and_then(|s| s.active_thread_percentage);
            let of_promise = match (pct, r.as_ref()) {
                (Some(p), Some(r)) => coload_analysis::fidelity::of_promise(r, f64::from(p))
                    .map(|scaled| format!("; {} of its promise", ratio_ci(Some(&scaled))))
                    .unwrap_or_default(),
                _ => String::new(),
            };
            line.push(format!(
                "{}{of_promise}",
                figure(&values, "samples/s", r.as_ref())
            ));
            cohorts_all.extend(cohorts);
        }
        if cohorts_all.is_empty() {
            continue;
        }
        let mut row = vec![
            policy_words(policy, None),
            promised.unwrap_or_else(|| "-".to_owned()),
        ];
        row.extend(line);
        row.push(
            one_card(&cohorts_all)
                .as_deref()
                .map_or_else(|| "several cards".to_owned(), card),
        );
        rows.push(row);
    }
    table(
        &[
            "policy",
            "promises",
            "one trainer alone gets: samples/s, ÷ solo [95 %]",
            "one inference worker alone gets: samples/s, ÷ solo [95 %]",
            "card",
        ],
        rows,
    )
}

/// The needs of the decision table: serving beside training from each frontier study's own
/// decision table (`coload_analysis::frontier`, the rule the study report uses), the rest from
/// the decision rows.
fn needs(
    frontiers: &[(&str, Option<&coload_cohort_schema::DecisionTable>, &str)],
    rows: &[DecisionRow],
) -> Vec<Need> {
    let mut out = Vec::new();
    for (what, table, card) in frontiers {
        let Some(t) = table else { continue };
        let Some(r) = t.rows.first().filter(|r| r.pick.is_some()) else {
            continue;
        };
        out.push(Need {
            what: format!(
                "serve a {what} at {} beside {}",
                t.objective,
                trainers_words(t)
            ),
            pick: r.pick.clone().unwrap_or_default(),
            get: r.get.clone(),
            give: r.give_up.clone(),
            cards: format!("{} for {}", r.cards, t.tenants),
            card: Some((*card).to_owned()),
        });
    }
    let top = |key: &dyn Fn(&DecisionRow) -> Option<f64>, high: bool| {
        rows.iter()
            .filter_map(|r| key(r).map(|v| (r, v)))
            .max_by(|a, b| {
                if high {
                    a.1.total_cmp(&b.1)
                } else {
                    b.1.total_cmp(&a.1)
                }
            })
            .map(|(r, _)| r)
    };
    if let Some(r) = top(&|r| r.full.1.as_ref().map(|x| x.ratio), true) {
        out.push(Need {
            what: "training throughput, card full".to_owned(),
            pick: rows_policy_words(&r.policy).to_owned(),
            get: format!(
                "7 trainers together at {} of one solo",
                ratio_ci(r.full.1.as_ref())
            ),
            give: format!(
                "each trainer at {} of solo",
                ratio_ci(r.per_worker.1.as_ref())
            ),
            cards: r.cards.clone(),
            card: r.card.clone(),
        });
    }
    if let Some(r) = top(&|r| r.tail.1.as_ref().map(|x| x.ratio), false) {
        out.push(Need {
            what: "inference tail beside training".to_owned(),
            pick: rows_policy_words(&r.policy).to_owned(),
            get: format!("inference p99 at {} of solo", ratio_ci(r.tail.1.as_ref())),
            give: format!(
                "6 trainers at {} of one solo",
                ratio_ci(r.beside.1.as_ref())
            ),
            cards: r.cards.clone(),
            card: r.card.clone(),
        });
    }
    if let Some(r) = top(&|r| r.energy.1.as_ref().map(|x| x.ratio), true) {
        out.push(Need {
            what: "energy per training sample".to_owned(),
            pick: rows_policy_words(&r.policy).to_owned(),
            get: format!("samples/J at {} of solo", ratio_ci(r.energy.1.as_ref())),
            give: format!(
                "each trainer at {} of solo",
                ratio_ci(r.per_worker.1.as_ref())
            ),
            cards: r.cards.clone(),
            card: r.card.clone(),
        });
    }
    out
}

/// The trainers of a decision table's mix: `6 trainers`.
fn trainers_words(t: &coload_cohort_schema::DecisionTable) -> String {
    let n = t.tenants.saturating_sub(1);
    format!("{n} trainer{}", if n == 1 { "" } else { "s" })
}

/// The day or days the studies ran, from their dates.
fn lead_day(studies: &[&Study]) -> Result<String, PageError> {
    let mut all = Vec::new();
    for s in studies {
        all.extend(s.summaries(false)?);
    }
    Ok(super::day(&all))
}

pub(crate) fn figures(
    data: &Path,
    values: &mut BTreeMap<&'static str, String>,
) -> Result<(), PageError> {
    let root = data.join(FRONTIER);
    let serve_study = Study::open(&root.join("frontier-serve"))?;
    let llm_study = Study::open(&root.join("frontier-llm"))?;
    let rows_study = Study::open(&root.join("decision-rows"))?;
    let sweep = Study::open(&data.join(SHARE_SWEEP))?;
    let serve = frontier(&serve_study)?;
    let llm = frontier(&llm_study)?;
    let rows = decision_rows(&rows_study);
    let lead_cards = format!(
        "`frontier-serve` on {}, `frontier-llm` on {}, `decision-rows` on {}, `share-sweep` on {}",
        serve.cards,
        llm.cards,
        cards_of(rows_study.comparison()),
        cards_of(sweep.comparison()),
    );
    values.extend([
        (
            "lead_day",
            lead_day(&[&serve_study, &llm_study, &rows_study, &sweep])?,
        ),
        ("lead_cards", lead_cards),
        // The decision table: one call site, built from the studies above (see decision.rs).
        (
            "decision_table",
            decision_table(&needs(
                &[
                    (
                        "ResNet18 endpoint",
                        serve_study.comparison().decision.as_ref(),
                        &serve.cards,
                    ),
                    (
                        "gpt2-small endpoint",
                        llm_study.comparison().decision.as_ref(),
                        &llm.cards,
                    ),
                ],
                &rows,
            )),
        ),
        ("frontier_serve_objective", serve.objective.clone()),
        ("frontier_serve_table", frontier_table(&serve)),
        ("frontier_serve_solo", solo_words(&serve_study, false)),
        ("frontier_llm_objective", llm.objective.clone()),
        ("frontier_llm_table", frontier_table(&llm)),
        ("frontier_llm_solo", solo_words(&llm_study, false)),
        ("rows_table", decision_rows_table(&rows)),
        ("rows_solo", solo_words(&rows_study, true)),
        ("share_table", share_table(&sweep)),
        ("share_solo", solo_words(&sweep, false)),
    ]);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interval(r: f64) -> RatioInterval {
        RatioInterval {
            ratio: r,
            low: Some(r * 0.9),
            high: Some(r * 1.1),
            n_numerator: 2,
            n_denominator: 3,
        }
    }

    fn row(policy: &str, full: f64, tail: f64) -> DecisionRow {
        DecisionRow {
            policy: policy.to_owned(),
            full: (vec![full], Some(interval(full))),
            per_worker: (vec![full / 7.0], Some(interval(full / 7.0))),
            tail: (vec![tail], Some(interval(tail))),
            beside: (vec![1.0], Some(interval(1.0))),
            energy: (vec![1.0], Some(interval(1.0))),
            card: Some("GPU-2074c71c-aaaa".to_owned()),
            cards: "1 card for 7".to_owned(),
        }
    }

    fn table(pick: Option<&str>) -> coload_cohort_schema::DecisionTable {
        coload_cohort_schema::DecisionTable {
            mix: "serve=1,train=6".to_owned(),
            tenants: 7,
            objective: "p99 <= 10 ms".to_owned(),
            rule: String::new(),
            points: Vec::new(),
            rows: vec![coload_cohort_schema::DecisionRow {
                need: "serve at the objective beside training".to_owned(),
                pick: pick.map(str::to_owned),
                policies: Vec::new(),
                get: "800 to 1,130 requests/s".to_owned(),
                give_up: "training: 1.53x".to_owned(),
                cards: "1 card (ceil(7/7))".to_owned(),
            }],
        }
    }

    #[test]
    fn each_need_picks_its_best_policy_and_serving_comes_from_the_study_table() {
        let serve = table(Some("MPS, 7 replicas (14 % of the threads each)"));
        let unanswered = table(None);
        let rows = [
            row("timeslice", 1.1, 6.9),
            row("mps-plugin", 1.8, 5.3),
            row("mps-unlimited", 1.6, 4.0),
        ];
        let needs = needs(
            &[
                ("ResNet18 endpoint", Some(&serve), "GPU-b77eb585"),
                ("gpt2-small endpoint", Some(&unanswered), "GPU-b77eb585"),
                ("other endpoint", None, "GPU-b77eb585"),
            ],
            &rows,
        );
        let pick = |what: &str| {
            needs
                .iter()
                .find(|n| n.what.starts_with(what))
                .map(|n| n.pick.clone())
                .unwrap()
        };
        assert_eq!(
            pick("serve a ResNet18 endpoint at p99 <= 10 ms beside 6 trainers"),
            "MPS, 7 replicas (14 % of the threads each)"
        );
        // A study whose table picks nothing, or has none, adds no row.
        assert_eq!(
            needs.iter().filter(|n| n.what.starts_with("serve")).count(),
            1
        );
        assert_eq!(pick("training throughput"), "MPS, plugin replicas 7");
        assert_eq!(pick("inference tail"), "MPS, unlimited");
    }
}
