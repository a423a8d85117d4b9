//! The decision for one mix (a serving endpoint beside trainers) from a study's capacity
//! searches: one [`FrontierPoint`] per policy and share, the Pareto frontier of serving
//! capacity against the trainers' throughput ([`pareto`]), and the [`DecisionTable`] a study's
//! report opens with ([`decision`]).
//!
//! **A point** is one capacity search of the mix. Its capacity is the search's bracket
//! `[passed, failed)` at the objective. Its training figure comes from one probe: the highest
//! rate that passed (the endpoint at its capacity), or, when none passed, the lowest-rate probe
//! (said so in the point: `probe_passed` is false). The trainers' aggregate samples/s in that
//! probe is divided by the exclusive solo trainers of the *same card* with
//! [`crate::ratio::ratio_of_means`], so the interval carries the solos' run-to-run noise; a
//! card without its own solo gets no ratio, as in [`crate::compare`].
//!
//! **The frontier**: a point is on it unless another point has capacity >= and training >=
//! with one strictly greater (ties are kept). Capacity is the bracket's passed bound (none
//! passed: 0), training the ratio's point estimate.
//!
//! **The pick rule** ([`PICK_RULE`]): each need takes the point with the best figure for it;
//! any other point the best one does not beat is picked with it, because the data cannot tell
//! them apart. For capacity a point is beaten when its whole bracket lies at or below the best
//! one's passed bound; for a ratio, when its interval lies wholly below the best one's.

use std::collections::BTreeMap;

use coload_cohort_schema::{
    CapacityReport, CohortSummary, DecisionRow, DecisionTable, DeclaredShare, FrontierPoint, Mode,
    RatioInterval, SharePolicy, Workload,
};

use crate::ratio::ratio_of_means;

/// How every row of the decision table picks, as the report states it.
pub const PICK_RULE: &str = "each need takes the point with the best figure for it; a point the \
    best one does not beat (its capacity bracket reaches above the best one's passed rate, or its \
    95 % interval overlaps the best one's) is picked with it, since the data cannot tell them apart";

/// One capacity search of a study, with its probes' summaries.
#[derive(Debug, Clone)]
pub struct Search {
    /// The study's policy name (`mps-replicas-4`).
    pub policy: String,
    /// The search's `capacity.json`.
    pub report: CapacityReport,
    /// The probes' `summary.json`s, matched to `report.probes` by experiment id (a probe
    /// without one is skipped).
    pub probes: Vec<CohortSummary>,
    /// The run of the study that ran the search (1-based), where recorded: its probes' trainers
    /// divide by the solos of their card in that run.
    pub run: Option<u32>,
}

/// The policy and share in a user's words: `a whole GPU each`, `time-slicing`, `MPS, 4
/// replicas (25 % of the threads each)`, `MPS, no per-client limit`, `MIG`.
#[must_use]
pub fn policy_words(mode: Mode, share: Option<&DeclaredShare>) -> String {
    match mode {
        Mode::Exclusive => "a whole GPU each".to_owned(),
        Mode::Timeslice => "time-slicing".to_owned(),
        Mode::Mig => "MIG slices".to_owned(),
        Mode::MigTimeslice => "time-slicing on MIG slices".to_owned(),
        Mode::Mps => {
            let threads = share
                .and_then(|s| s.active_thread_percentage)
                .map(|p| format!("{p} % of the threads each"));
            match (
                share.map(|s| s.policy),
                share.and_then(|s| s.replicas),
                threads,
            ) {
                (Some(SharePolicy::Replicas), Some(r), Some(t)) => {
                    format!("MPS, {r} replicas ({t})")
                }
                (Some(SharePolicy::Replicas), Some(r), None) => format!("MPS, {r} replicas"),
                (Some(SharePolicy::Explicit), _, Some(t)) => format!("MPS, {t}"),
                _ => "MPS, no per-client limit".to_owned(),
            }
        }
    }
}

/// Cards `tenants` Pods take under a policy, as the device plugin places them: one each
/// (exclusive), all on one card (time-slicing, unlimited MPS), `ceil(N/R)` for MPS replicas
/// `R`, `ceil(N/7)` for MIG 1g slices.
#[must_use]
pub fn cards_for(mode: Mode, share: Option<&DeclaredShare>, tenants: u32) -> u32 {
    let per_card = match mode {
        Mode::Exclusive => 1,
        Mode::Timeslice => tenants.max(1),
        Mode::Mig | Mode::MigTimeslice => 7,
        Mode::Mps => match share {
            Some(s) if s.policy == SharePolicy::Replicas => s.replicas.unwrap_or(1).max(1),
            _ => tenants.max(1),
        },
    };
    tenants.div_ceil(per_card)
}

/// The cards column in words: `1 card`, `4 cards (ceil(7/2))`, `7 cards (one each)`.
fn cards_words(p: &FrontierPoint, tenants: u32) -> String {
    let n = p.cards;
    let each = if n == 1 { "card" } else { "cards" };
    match (p.mode, p.share.and_then(|s| s.replicas)) {
        (Mode::Exclusive, _) => format!("{n} {each} (one each)"),
        (Mode::Mps, Some(r)) if p.share.is_some_and(|s| s.policy == SharePolicy::Replicas) => {
            format!("{n} {each} (ceil({tenants}/{r}))")
        }
        _ => format!("{n} {each}"),
    }
}

/// What the cards column means, for the sentence under the table.
#[must_use]
pub fn cards_note(tenants: u32) -> String {
    format!(
        "for the mix's {tenants} tenants as the device plugin places them (MPS at R \
         replicas: ceil({tenants}/R)); every point was measured with all {tenants} on one card, \
         so a card that holds fewer gets at least what is shown"
    )
}

/// Marks each point's `on_frontier`: a point is on the frontier unless another has at least
/// its capacity and at least its training with one strictly greater (ties kept). Capacity is
/// the passed bound (none passed: 0); a point without a training ratio counts as training 0.
pub fn pareto(points: &mut [FrontierPoint]) {
    let key = |p: &FrontierPoint| {
        (
            p.capacity_passed_per_s.unwrap_or(0.0),
            p.train_vs_solo.map_or(0.0, |r| r.ratio),
        )
    };
    let keys: Vec<(f64, f64)> = points.iter().map(key).collect();
    for (i, p) in points.iter_mut().enumerate() {
        let (c, t) = keys[i];
        p.on_frontier = !keys
            .iter()
            .enumerate()
            .any(|(j, &(oc, ot))| j != i && oc >= c && ot >= t && (oc > c || ot > t));
    }
}

/// A rate in requests/s to three significant figures, by the one rule every page uses
/// ([`crate::figures::significant`]): `565.7` reads `566`, `11310` reads `11,300`.
fn rate(v: f64) -> String {
    crate::figures::significant(v, 3)
}

/// A capacity bracket in words, by the one rule every page uses
/// ([`crate::figures::capacity_words`]): `800 to 1,100`, `at least 16,000`, `below 50`.
#[must_use]
pub fn bracket_words(passed: Option<f64>, failed: Option<f64>) -> String {
    crate::figures::capacity_words(passed, failed)
}

/// A ratio with its interval: `1.80x [1.62 to 2.00]`, or `1.80x (no interval)`.
#[must_use]
pub fn ratio_words(r: &RatioInterval) -> String {
    match (r.low, r.high) {
        (Some(l), Some(h)) => format!("{:.2}x [{l:.2} to {h:.2}]", r.ratio),
        _ => format!("{:.2}x (no interval)", r.ratio),
    }
}

/// The search's objective in words: `p99 <= 10 ms`, `TTFT p99 <= 500 ms and TPOT p99 <= 50 ms`.
fn objective_words(r: &CapacityReport) -> String {
    let q = format!("{:.3}", r.quantile * 100.0);
    let q = format!("p{}", q.trim_end_matches('0').trim_end_matches('.'));
    let serve = r.workload_mix.contains_key(&Workload::Serve);
    let llm = match (r.ttft_slo_ms, r.tpot_slo_ms) {
        (Some(t), Some(p)) => Some(format!("TTFT {q} <= {t} ms and TPOT {q} <= {p} ms")),
        _ => None,
    };
    match (serve, llm) {
        (true, Some(l)) => format!("{q} <= {} ms and {l}", r.slo_ms),
        (false, Some(l)) => l,
        (_, None) => format!("{q} <= {} ms", r.slo_ms),
    }
}

/// The mix in the study's words: `serve=1,train=6`.
fn mix_words(mix: &BTreeMap<Workload, u32>) -> String {
    let mut parts: Vec<String> = mix.iter().map(|(w, n)| format!("{w}={n}")).collect();
    parts.sort();
    parts.join(",")
}

/// The solos of a study with the run each ran in, by experiment id (none where runs were not
/// recorded): the baseline blocks a search's trainers divide by.
#[derive(Debug, Clone, Copy)]
pub struct Solos<'a> {
    /// The exclusive solo runs.
    pub summaries: &'a [CohortSummary],
    /// Their runs of the study, by experiment id.
    pub runs: &'a BTreeMap<String, u32>,
}

/// The solo trainers of one card in one run of the study (its block): their samples/s and
/// samples per joule.
fn solo_block<'a>(
    solos: Solos<'a>,
    card: Option<&'a str>,
    run: Option<u32>,
) -> impl Iterator<Item = &'a CohortSummary> + 'a {
    solos.summaries.iter().filter(move |s| {
        matches!(s.workers.as_slice(), [w] if w.workload == Workload::Train
            && w.gpu_uuid.as_deref() == card)
            && solos.runs.get(&s.experiment).copied() == run
    })
}

/// One point from a search of the mix: `None` when no probe has a summary.
fn point(search: &Search, solos: Solos<'_>, tenants: u32) -> Option<FrontierPoint> {
    let r = &search.report;
    let summary_of = |experiment: &str| search.probes.iter().find(|s| s.experiment == experiment);
    let passing = r
        .probes
        .iter()
        .filter(|p| p.passed == Some(true))
        .filter_map(|p| summary_of(&p.experiment).map(|s| (p, s)))
        .max_by(|a, b| a.0.rate_per_s.total_cmp(&b.0.rate_per_s));
    let (probe, summary) = match passing {
        Some(found) => found,
        None => r
            .probes
            .iter()
            .filter_map(|p| summary_of(&p.experiment).map(|s| (p, s)))
            .min_by(|a, b| a.0.rate_per_s.total_cmp(&b.0.rate_per_s))?,
    };
    let train = summary.groups.get(&Workload::Train);
    let card = summary
        .workers
        .iter()
        .find(|w| w.workload == Workload::Train)
        .and_then(|w| w.gpu_uuid.as_deref());
    let solo_rates: Vec<f64> = solo_block(solos, card, search.run)
        .map(|s| s.workers[0].samples_per_s)
        .collect();
    let solo_j: Vec<f64> = solo_block(solos, card, search.run)
        .filter_map(|s| s.groups.get(&Workload::Train)?.samples_per_device_joule)
        .collect();
    let share = summary.share.or_else(|| {
        summary
            .workers
            .iter()
            .find_map(|w| w.share.as_ref().and_then(|s| s.declared))
    });
    let (memory_limit_bytes, threads_pct) = match (r.mode, share) {
        (Mode::Mps, Some(s)) => (s.pinned_memory_limit_bytes, s.active_thread_percentage),
        _ => (None, None),
    };
    Some(FrontierPoint {
        policy: search.policy.clone(),
        label: policy_words(r.mode, share.as_ref()),
        mode: r.mode,
        share,
        capacity_passed_per_s: r.capacity_per_s,
        capacity_failed_per_s: r.failed_above_per_s,
        probe_rate_per_s: probe.rate_per_s,
        probe_passed: probe.passed == Some(true),
        card: card.map(str::to_owned),
        serve_tokens_per_s: {
            let llm: Vec<f64> = summary
                .workers
                .iter()
                .filter_map(|w| w.serve_llm.as_ref().map(|v| v.output_tokens_per_s))
                .collect();
            (!llm.is_empty()).then(|| llm.iter().sum())
        },
        train_samples_per_s: train.map(|g| g.aggregate_samples_per_s),
        train_vs_solo: train
            .and_then(|g| ratio_of_means(&[g.aggregate_samples_per_s], &solo_rates)),
        train_samples_per_j: train.and_then(|g| g.samples_per_device_joule),
        solo_samples_per_j: (!solo_j.is_empty())
            .then(|| solo_j.iter().sum::<f64>() / solo_j.len() as f64),
        memory_limit_bytes,
        threads_pct,
        cards: cards_for(r.mode, share.as_ref(), tenants),
        on_frontier: false,
    })
}

/// The points of a study's mix: what [`decision`] tabulates and the frontier chart draws.
#[derive(Debug, Clone)]
pub struct Frontier {
    /// The mix (`serve=1,train=6`): the one with the most capacity searches beside trainers.
    pub mix: BTreeMap<Workload, u32>,
    /// One point per search of the mix, the frontier marked.
    pub points: Vec<FrontierPoint>,
    /// The endpoint alone on a whole GPU (an exclusive search without trainers), the
    /// reference; its trainers would run on cards of their own.
    pub alone: Option<FrontierPoint>,
}

/// The [`Frontier`] of the study's searches against its exclusive solo trainers (`solos`);
/// `None` without a search beside trainers.
#[must_use]
pub fn frontier_points(searches: &[Search], solos: Solos<'_>) -> Option<Frontier> {
    let beside = |r: &CapacityReport| {
        r.workload_mix.contains_key(&Workload::Train)
            && (r.workload_mix.contains_key(&Workload::Serve)
                || r.workload_mix.contains_key(&Workload::ServeLlm))
    };
    let mut by_mix: BTreeMap<Vec<(Workload, u32)>, Vec<&Search>> = BTreeMap::new();
    for s in searches.iter().filter(|s| beside(&s.report)) {
        let key = s
            .report
            .workload_mix
            .iter()
            .map(|(w, n)| (*w, *n))
            .collect();
        by_mix.entry(key).or_default().push(s);
    }
    let (_, mine) = by_mix.into_iter().max_by_key(|(_, v)| v.len())?;
    let mix = mine[0].report.workload_mix.clone();
    let tenants: u32 = mix.values().sum();
    let mut points: Vec<FrontierPoint> = mine
        .iter()
        .filter_map(|s| point(s, solos, tenants))
        .collect();
    if points.is_empty() {
        return None;
    }
    pareto(&mut points);
    // The endpoint alone: the same serving workloads, no trainers.
    let served: Vec<Workload> = mix
        .keys()
        .copied()
        .filter(|w| *w != Workload::Train)
        .collect();
    let alone = searches
        .iter()
        .filter(|s| {
            s.report.mode == Mode::Exclusive
                && !s.report.workload_mix.contains_key(&Workload::Train)
                && s.report.workload_mix.keys().copied().collect::<Vec<_>>() == served
        })
        .find_map(|s| point(s, solos, tenants));
    Some(Frontier { mix, points, alone })
}

/// The decision table for the study's mix, from its capacity searches and its exclusive solo
/// trainers (`solos`); `None` when the study has no search beside trainers.
#[must_use]
pub fn decision(searches: &[Search], solos: Solos<'_>) -> Option<DecisionTable> {
    let Frontier { mix, points, alone } = frontier_points(searches, solos)?;
    let tenants: u32 = mix.values().sum();
    let trainers = mix.get(&Workload::Train).copied().unwrap_or(0);
    let objective = searches
        .iter()
        .find(|s| s.report.workload_mix == mix)
        .map(|s| objective_words(&s.report))
        .unwrap_or_default();
    let rows = vec![
        serve_row(&points, alone.as_ref(), &objective, (trainers, tenants)),
        train_row(&points, &objective, trainers, tenants),
        DecisionRow {
            need: "inference tail beside training".to_owned(),
            pick: None,
            policies: Vec::new(),
            get: "not measured: no fixed-rate inference cohort beside trainers in this study"
                .to_owned(),
            give_up: String::new(),
            cards: String::new(),
        },
        memory_row(&points, tenants),
        energy_row(&points, tenants),
    ];
    Some(DecisionTable {
        mix: mix_words(&mix),
        tenants,
        objective,
        rule: PICK_RULE.to_owned(),
        points: points.into_iter().chain(alone).collect(),
        rows,
    })
}

/// The points the best one (by `better`) does not beat (by `beats`), the best first.
fn picks<'a>(
    candidates: &[&'a FrontierPoint],
    better: impl Fn(&FrontierPoint, &FrontierPoint) -> std::cmp::Ordering,
    beats: impl Fn(&FrontierPoint, &FrontierPoint) -> bool,
) -> Vec<&'a FrontierPoint> {
    let Some(best) = candidates.iter().copied().max_by(|a, b| better(a, b)) else {
        return Vec::new();
    };
    let mut out = vec![best];
    out.extend(
        candidates
            .iter()
            .copied()
            .filter(|p| !std::ptr::eq(*p, best) && !beats(best, p)),
    );
    out
}

/// The pick in words: the best point's label, and the points the data cannot tell from it:
/// `MPS, 4 replicas (...) (not told apart from: MPS, 7 replicas (...))`.
fn pick_words(picked: &[&FrontierPoint]) -> Option<String> {
    let (best, rest) = picked.split_first()?;
    if rest.is_empty() {
        return Some(best.label.clone());
    }
    Some(format!(
        "{}; as good as far as the data tell: {}",
        best.label,
        rest.iter()
            .map(|p| short_label(p))
            .collect::<Vec<_>>()
            .join("; ")
    ))
}

/// A label without the share's detail (`MPS, 4 replicas`), for a list of ties.
fn short_label(p: &FrontierPoint) -> &str {
    p.label.split(" (").next().unwrap_or(&p.label)
}

/// What the endpoint got at a point, in words; an LLM endpoint's output tokens/s at the probe
/// the trainers are read from beside it.
fn capacity_get(p: &FrontierPoint, objective: &str) -> String {
    let tokens = p.serve_tokens_per_s.map_or_else(String::new, |t| {
        format!(
            " ({} output tokens/s at {} requests/s)",
            rate(t),
            rate(p.probe_rate_per_s)
        )
    });
    format!(
        "{} requests/s at {objective}{tokens}",
        bracket_words(p.capacity_passed_per_s, p.capacity_failed_per_s)
    )
}

/// The trainers at a point, in words: `the 6 trainers 1.53x [1.17 to 2.00] one solo
/// trainer (5,370 samples/s)`, and the probe when it failed.
fn train_get(p: &FrontierPoint, trainers: u32) -> String {
    let probe = if p.probe_passed {
        String::new()
    } else {
        format!(
            ", beside the lowest rate probed ({} requests/s, failed)",
            rate(p.probe_rate_per_s)
        )
    };
    match (&p.train_vs_solo, p.train_samples_per_s) {
        (Some(r), Some(s)) => format!(
            "the {trainers} trainers {} one solo trainer ({} samples/s){probe}",
            ratio_words(r),
            rate(s)
        ),
        (None, Some(s)) => format!(
            "the {trainers} trainers {} samples/s{probe} (no solo trainer on this card)",
            rate(s)
        ),
        _ => "no trainer figure".to_owned(),
    }
}

fn by_capacity(a: &FrontierPoint, b: &FrontierPoint) -> std::cmp::Ordering {
    a.capacity_passed_per_s
        .unwrap_or(0.0)
        .total_cmp(&b.capacity_passed_per_s.unwrap_or(0.0))
        .then_with(|| by_training(a, b))
}

fn by_training(a: &FrontierPoint, b: &FrontierPoint) -> std::cmp::Ordering {
    let t = |p: &FrontierPoint| p.train_vs_solo.map_or(0.0, |r| r.ratio);
    t(a).total_cmp(&t(b))
}

/// `best` beats `p` on capacity when `p`'s whole bracket lies at or below `best`'s passed rate.
fn beats_on_capacity(best: &FrontierPoint, p: &FrontierPoint) -> bool {
    match (best.capacity_passed_per_s, p.capacity_failed_per_s) {
        (Some(b), Some(f)) => f <= b,
        (Some(_), None) => p.capacity_passed_per_s.is_none(),
        (None, _) => false,
    }
}

/// `best` beats `p` on training when `p`'s interval lies wholly below `best`'s (without
/// intervals, when its ratio is lower).
fn beats_on_training(best: &FrontierPoint, p: &FrontierPoint) -> bool {
    match (best.train_vs_solo, p.train_vs_solo) {
        (Some(b), Some(o)) => match (b.low, o.high) {
            (Some(low), Some(high)) => high < low,
            _ => o.ratio < b.ratio,
        },
        (Some(_), None) => true,
        _ => false,
    }
}

fn serve_row(
    points: &[FrontierPoint],
    alone: Option<&FrontierPoint>,
    objective: &str,
    (trainers, tenants): (u32, u32),
) -> DecisionRow {
    let need = "serve at the objective beside training".to_owned();
    let met: Vec<&FrontierPoint> = points
        .iter()
        .filter(|p| p.capacity_passed_per_s.is_some())
        .collect();
    let picked = picks(&met, by_capacity, beats_on_capacity);
    let Some(best) = picked.first() else {
        return DecisionRow {
            need,
            pick: None,
            policies: Vec::new(),
            get: format!(
                "no policy met {objective} beside the trainers: {}",
                points
                    .iter()
                    .map(|p| format!("{} {}", p.label, capacity_get(p, objective)))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            give_up: String::new(),
            cards: String::new(),
        };
    };
    let trainers_best = points.iter().max_by(|a, b| by_training(a, b));
    let mut give_up = match trainers_best {
        Some(t) if !std::ptr::eq(t, *best) && by_training(t, best).is_gt() => format!(
            "training: {} against {} under {}",
            best.train_vs_solo
                .map_or_else(|| "no figure".to_owned(), |r| format!("{:.2}x", r.ratio)),
            t.train_vs_solo
                .map_or_else(|| "no figure".to_owned(), |r| format!("{:.2}x", r.ratio)),
            short_label(t)
        ),
        _ => "nothing on training: no other point trains faster".to_owned(),
    };
    if let Some(a) = alone {
        give_up = format!(
            "{give_up}; alone on a whole GPU the endpoint serves {} requests/s",
            bracket_words(a.capacity_passed_per_s, a.capacity_failed_per_s)
        );
    }
    DecisionRow {
        need,
        pick: pick_words(&picked),
        policies: picked.iter().map(|p| p.policy.clone()).collect(),
        get: format!(
            "{}; {}",
            capacity_get(best, objective),
            train_get(best, trainers)
        ),
        give_up,
        cards: cards_words(best, tenants),
    }
}

fn train_row(
    points: &[FrontierPoint],
    objective: &str,
    trainers: u32,
    tenants: u32,
) -> DecisionRow {
    let need = "training throughput beside the endpoint".to_owned();
    let measured: Vec<&FrontierPoint> = points
        .iter()
        .filter(|p| p.train_vs_solo.is_some())
        .collect();
    let picked = picks(&measured, by_training, beats_on_training);
    let Some(best) = picked.first() else {
        return DecisionRow {
            need,
            pick: None,
            policies: Vec::new(),
            get: "not measured: no exclusive solo trainer on the searches' card".to_owned(),
            give_up: String::new(),
            cards: String::new(),
        };
    };
    let give_up = if best.capacity_passed_per_s.is_some() {
        format!("serving: {}", capacity_get(best, objective))
    } else {
        format!(
            "serving: the endpoint misses the objective at every rate probed ({} requests/s)",
            bracket_words(best.capacity_passed_per_s, best.capacity_failed_per_s)
        )
    };
    DecisionRow {
        need,
        pick: pick_words(&picked),
        policies: picked.iter().map(|p| p.policy.clone()).collect(),
        get: train_get(best, trainers),
        give_up,
        cards: cards_words(best, tenants),
    }
}

fn memory_row(points: &[FrontierPoint], tenants: u32) -> DecisionRow {
    let need = "memory isolation".to_owned();
    let capped: Vec<&FrontierPoint> = points
        .iter()
        .filter(|p| p.memory_limit_bytes.is_some())
        .collect();
    let picked = picks(&capped, by_capacity, |best, p| {
        beats_on_capacity(best, p) || by_capacity(best, p).is_gt()
    });
    let Some(best) = picked.first() else {
        return DecisionRow {
            need,
            pick: None,
            policies: Vec::new(),
            get: "not measured: no policy of this study caps a client's memory".to_owned(),
            give_up: String::new(),
            cards: String::new(),
        };
    };
    let gib = |b: u64| b as f64 / f64::from(1u32 << 30);
    DecisionRow {
        need,
        pick: pick_words(&picked[..1]),
        policies: vec![best.policy.clone()],
        get: format!(
            "each client capped at {:.1} GiB of device memory; of the capped shares it serves \
             most ({} requests/s)",
            gib(best.memory_limit_bytes.unwrap_or(0)),
            bracket_words(best.capacity_passed_per_s, best.capacity_failed_per_s)
        ),
        give_up: "the cap is declared, not tested here (no hog cohort); a fault in one MPS \
                  client still reaches the others on its card"
            .to_owned(),
        cards: cards_words(best, tenants),
    }
}

fn energy_row(points: &[FrontierPoint], tenants: u32) -> DecisionRow {
    let need = "energy per training sample".to_owned();
    let measured: Vec<&FrontierPoint> = points
        .iter()
        .filter(|p| p.train_samples_per_j.is_some())
        .collect();
    let j = |p: &FrontierPoint| p.train_samples_per_j.unwrap_or(0.0);
    let Some(best) = measured
        .iter()
        .copied()
        .max_by(|a, b| j(a).total_cmp(&j(b)))
    else {
        return DecisionRow {
            need,
            pick: None,
            policies: Vec::new(),
            get: "not measured: no probe recorded the device's energy".to_owned(),
            give_up: String::new(),
            cards: String::new(),
        };
    };
    let solo = best
        .solo_samples_per_j
        .map_or_else(String::new, |s| format!("; one solo trainer: {s:.2}"));
    DecisionRow {
        need,
        pick: Some(best.label.clone()),
        policies: vec![best.policy.clone()],
        get: format!(
            "{:.2} training samples/J, device-wide (one probe, no interval{solo})",
            j(best)
        ),
        give_up: format!(
            "serving: {} requests/s",
            bracket_words(best.capacity_passed_per_s, best.capacity_failed_per_s)
        ),
        cards: cards_words(best, tenants),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A point as `comparison.json` records it: a bracket, a training ratio with its interval,
    /// samples per joule.
    fn pt(
        policy: &str,
        bracket: (Option<f64>, Option<f64>),
        train: (f64, f64, f64),
        samples_per_j: f64,
    ) -> FrontierPoint {
        FrontierPoint {
            policy: policy.to_owned(),
            label: policy.to_owned(),
            mode: Mode::Mps,
            share: None,
            capacity_passed_per_s: bracket.0,
            capacity_failed_per_s: bracket.1,
            probe_rate_per_s: bracket.0.unwrap_or(50.0),
            probe_passed: bracket.0.is_some(),
            card: None,
            serve_tokens_per_s: None,
            train_samples_per_s: Some(train.0 * 3000.0),
            train_vs_solo: Some(RatioInterval {
                ratio: train.0,
                low: Some(train.1),
                high: Some(train.2),
                n_numerator: 1,
                n_denominator: 3,
            }),
            train_samples_per_j: Some(samples_per_j),
            solo_samples_per_j: Some(9.0),
            memory_limit_bytes: None,
            threads_pct: None,
            cards: 1,
            on_frontier: false,
        }
    }

    fn frontier(points: &[FrontierPoint]) -> Vec<&str> {
        points
            .iter()
            .filter(|p| p.on_frontier)
            .map(|p| p.policy.as_str())
            .collect()
    }

    #[test]
    fn a_dominated_point_is_off_the_frontier_and_ties_stay_on() {
        let mut points = vec![
            pt("serves", (Some(800.0), Some(1131.0)), (1.5, 1.4, 1.6), 8.0),
            pt("trains", (None, Some(50.0)), (2.0, 1.9, 2.1), 9.0),
            // Less capacity and less training than `serves`: dominated.
            pt("worse", (Some(565.0), Some(672.0)), (1.4, 1.3, 1.5), 8.0),
            // The same capacity and training as `serves`: a tie, kept.
            pt("twin", (Some(800.0), Some(900.0)), (1.5, 1.3, 1.7), 8.0),
        ];
        pareto(&mut points);
        assert_eq!(frontier(&points), ["serves", "trains", "twin"]);
        // Equal capacity, strictly less training: dominated.
        points[3].train_vs_solo.as_mut().unwrap().ratio = 1.49;
        pareto(&mut points);
        assert_eq!(frontier(&points), ["serves", "trains"]);
    }

    #[test]
    fn the_rows_pick_what_a_hand_calculation_picks() {
        let points = vec![
            pt("r7", (Some(800.0), Some(1131.0)), (1.50, 1.40, 1.60), 8.0),
            pt("r4", (Some(565.7), Some(672.7)), (1.80, 1.70, 1.90), 8.6),
            pt("ts", (None, Some(50.0)), (1.85, 1.75, 1.95), 8.9),
        ];
        // Serving: r7 passed 800, r4's bracket ends at 672.7 <= 800, so r7 alone.
        let serve = serve_row(&points, None, "p99 <= 10 ms", (6, 7));
        assert_eq!(serve.policies, ["r7"]);
        assert!(
            serve
                .get
                .starts_with("800 to 1,100 requests/s at p99 <= 10 ms"),
            "{}",
            serve.get
        );
        // It gives up training against the best trainer, time-slicing.
        assert!(serve.give_up.contains("under ts"), "{}", serve.give_up);
        // Training: ts is best at 1.85 [1.75, 1.95]; r4's [1.70, 1.90] overlaps it (not
        // beaten), r7's [1.40, 1.60] lies below 1.75 (beaten).
        let train = train_row(&points, "p99 <= 10 ms", 6, 7);
        assert_eq!(train.policies, ["ts", "r4"]);
        assert!(train.give_up.contains("misses"), "{}", train.give_up);
        // Energy: the most samples per joule.
        assert_eq!(energy_row(&points, 7).policies, ["ts"]);
        // No point caps memory: the row says it cannot answer.
        let memory = memory_row(&points, 7);
        assert_eq!(memory.pick, None);
        assert!(memory.get.starts_with("not measured: "));
    }

    #[test]
    fn the_pick_changes_when_the_data_change() {
        let mut points = vec![
            pt("r7", (Some(800.0), Some(1131.0)), (1.50, 1.40, 1.60), 8.0),
            pt("r4", (Some(565.7), Some(672.7)), (1.80, 1.70, 1.90), 8.6),
        ];
        assert_eq!(serve_row(&points, None, "x", (6, 7)).policies, ["r7"]);
        // r4 now passes 1,000: it serves most, and r7's bracket (up to 1,131) is not beaten.
        points[1].capacity_passed_per_s = Some(1000.0);
        points[1].capacity_failed_per_s = Some(1200.0);
        assert_eq!(serve_row(&points, None, "x", (6, 7)).policies, ["r4", "r7"]);
        // Narrower: r7 failed at 900, below r4's 1,000: r4 alone.
        points[0].capacity_failed_per_s = Some(900.0);
        assert_eq!(serve_row(&points, None, "x", (6, 7)).policies, ["r4"]);
        // Nobody met the objective: no pick, and the row says so.
        for p in &mut points {
            p.capacity_passed_per_s = None;
        }
        let none = serve_row(&points, None, "x", (6, 7));
        assert_eq!(none.pick, None);
        assert!(none.get.starts_with("no policy met x"), "{}", none.get);
    }

    #[test]
    fn cards_follow_the_device_plugin() {
        let replicas = |r| DeclaredShare {
            policy: SharePolicy::Replicas,
            replicas: Some(r),
            active_thread_percentage: Some(100 / r),
            pinned_memory_limit_bytes: None,
        };
        assert_eq!(cards_for(Mode::Exclusive, None, 7), 7);
        assert_eq!(cards_for(Mode::Timeslice, None, 7), 1);
        assert_eq!(cards_for(Mode::Mps, Some(&replicas(2)), 7), 4);
        assert_eq!(cards_for(Mode::Mps, Some(&replicas(4)), 7), 2);
        assert_eq!(cards_for(Mode::Mps, Some(&replicas(7)), 7), 1);
        assert_eq!(
            cards_for(Mode::Mps, Some(&DeclaredShare::unlimited()), 7),
            1
        );
        assert_eq!(cards_for(Mode::Mig, None, 8), 2);
        assert_eq!(
            policy_words(Mode::Mps, Some(&replicas(4))),
            "MPS, 4 replicas (25 % of the threads each)"
        );
    }

    #[test]
    fn rates_read_to_three_figures() {
        assert_eq!(rate(565.7), "566");
        assert_eq!(rate(11310.0), "11,300");
        assert_eq!(rate(38.05), "38.1");
        assert_eq!(rate(1131.0), "1,130");
    }
}
