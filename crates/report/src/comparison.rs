//! What the comparison says (`comparison.md`, `report.html`), as one [`Document`] that leads
//! with the verdict:
//!
//! 1. the title and the study's notes;
//! 2. **Verdict**: which policy meets each need and which does not, with the numbers; the
//!    per-worker chart (rate and p99 against solo by shape and policy) beside the scaling chart
//!    (aggregate throughput against worker count); capacity at the objective and memory
//!    isolation when the study measured them; the same figures as a table;
//! 3. below, folded: each cohort (its tables and its latency-by-percentile plot), the
//!    baselines, the "why" table, the repeats with their confidence intervals, every cohort of
//!    the study with its outcome (failures are listed, never dropped), warnings and caveats.

use coload_cohort_schema::{CohortComparison, Comparison, Workload};

use super::ReportContext;
use super::charts;
use super::document::{Document, Figure, Table, group_label, mix};
use super::svg::{num, rate};
use super::verdict::{self, Verdict};

/// What the ratios mean, said once under the verdict.
const RATIO_NOTE: &str = "How to read the figures: rate ÷ solo = a worker's samples/s over \
     the same workload's solo samples/s (below 1 is a slowdown). p99 = the 99th-percentile batch \
     latency of the group, every batch of its workers pooled; p99 ÷ solo = that p99 over the solo \
     worker's p99 (above 1 is a slowdown), the one definition used in every table, chart and \
     sentence. For a serve group at a fixed rate, p99 is its request latency (arrival to \
     completion), with no solo ratio. aggregate ÷ solo = all workers of the group together over \
     one worker alone. Each figure is the mean over the shape's repeated cohorts, with the 95 % \
     Student-t interval of that mean where there are several; training and inference are never \
     added together.";

/// The comparison as a document, with the study's `ctx` (title, notes, policy names, outcomes,
/// and the capacity and isolation results when measured).
pub(crate) fn document(c: &Comparison, ctx: &ReportContext) -> Document {
    let v = verdict::verdict(c, ctx);
    let mut doc = Document::default();
    doc.heading(
        1,
        if ctx.title.is_empty() {
            "coload comparison"
        } else {
            &ctx.title
        },
    );
    for n in &ctx.notes {
        doc.para(n.clone());
    }
    doc.facts(ctx.provenance.clone());
    // The decision opens the report, on its first screen: what to pick for the study's mix.
    if let Some(d) = &c.decision {
        super::decision::section(d, &mut doc);
    }
    doc.contents();
    verdict_section(c, ctx, &v, &mut doc);
    // A study of one worker alone under shares: what each delivers against its promise.
    let fidelity = coload_analysis::fidelity::share_fidelity(c);
    if !fidelity.is_empty() {
        super::decision::fidelity_section(&fidelity, &mut doc);
    }
    // Capacity searches alone leave the comparison empty: no cohort sections, baselines or
    // repeats to show, only the study's cohorts and the caveats.
    if !c.cohorts.is_empty() {
        compared(c, ctx, &v, &mut doc);
    }
    if !ctx.cohorts.is_empty() {
        doc.heading(2, "Every cohort of the study");
        let mut t = Table::new(&[
            "cohort",
            "policy",
            "workers",
            "outcome",
            "experiment or answer",
        ]);
        for k in &ctx.cohorts {
            t.row(vec![
                k.name.clone(),
                k.policy.clone(),
                k.workers.clone(),
                k.outcome.clone(),
                k.note.clone(),
            ]);
        }
        doc.table_folded("Every cohort with its outcome", t);
    }
    doc.warnings_and_caveats(
        c.warnings
            .iter()
            .map(|w| format!("{}: {}", w.kind, w.message))
            .collect(),
        &c.caveats,
    );
    doc
}

/// The sections about the compared cohorts: each cohort folded, the baselines, the "why"
/// table and the repeats.
fn compared(c: &Comparison, ctx: &ReportContext, v: &Verdict, doc: &mut Document) {
    doc.heading(2, "Cohorts");
    doc.para(
        "One folded section per cohort: its groups and workers against solo, and each worker's \
         batch latency by percentile (the tail axis is logarithmic: 90, 99, 99.9 % are equally \
         spaced; a line ends at the slowest batch, at its own rank 1 - 1/n).",
    );
    cohorts(c, ctx, v, doc);
    doc.heading(2, "Baselines");
    if c.baselines.is_empty() {
        doc.para("No solo baseline given: no ratios against solo.");
    } else {
        let mut t = Table::new(&["workload", "experiment", "mode", "samples/s", "p99 ms"]);
        for (w, b) in &c.baselines {
            t.row(vec![
                format!("{}, {}", group_label(*w, b.model.as_deref()), b.execution),
                b.experiment.clone(),
                b.mode.to_string(),
                num(b.samples_per_s),
                num(b.p99_ms),
            ]);
        }
        doc.table(t);
    }
    // The "why" view: GPM activity and energy beside rate and tail, when recorded.
    if let Some(t) = super::why::comparison_why(c, ctx) {
        doc.heading(2, "Why: GPU activity and energy");
        doc.para(super::why::WHY_NOTE);
        doc.table_folded("GPU activity and energy per cohort and group", t);
    }
    doc.heading(2, "Repeats");
    doc.para(
        "Cohorts of one shape (mode, count, workload mix, configuration). Each estimate takes \
         one value per cohort: mean, sample standard deviation and the 95% Student-t confidence \
         interval of the mean (none for a single cohort).",
    );
    repeats(c, doc);
}

/// The verdict: the findings, the charts, memory isolation when measured, and the figures as
/// a table.
fn verdict_section(c: &Comparison, ctx: &ReportContext, v: &Verdict, doc: &mut Document) {
    doc.heading(2, "Verdict");
    doc.findings(v.sentences.clone());
    let mut figs = Vec::new();
    if let Some(svg) = charts::per_worker(v) {
        let mut mixes: Vec<String> = v
            .cells
            .iter()
            .filter(|c| c.shape.mixed)
            .map(|c| {
                c.shape
                    .label()
                    .split(':')
                    .next()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect();
        mixes.dedup();
        figs.push(Figure {
            svg,
            caption: format!(
                "Each worker against running alone, by shape (x) and policy (colour); the dashed \
                 line is solo. Hover a bar for its figures.{}",
                if mixes.is_empty() {
                    String::new()
                } else {
                    format!(" mix = {}.", mixes.join("; "))
                }
            ),
        });
    }
    if let Some(svg) = charts::scaling(c, v, ctx) {
        figs.push(Figure {
            svg,
            caption: "All workers of a homogeneous cohort together, by worker count and policy; \
                      dots are cohorts, lines their means, the dashed line one worker alone. \
                      Exclusive with several workers means one GPU each."
                .into(),
        });
    }
    doc.figures(figs);
    if !v.cells.is_empty() {
        doc.para(RATIO_NOTE);
        doc.table_folded(
            "The figures by shape and policy, with 95 % intervals",
            verdict_table(v),
        );
    }
    // Capacity at the objective and the load curve behind it side by side, one pair per
    // objective, in a row of their own so that they stay together.
    let bars = charts::capacity(v, &ctx.capacity);
    let curves = charts::load_curve(v, &ctx.capacity, &ctx.serve_points);
    for (bar, curve) in bars.into_iter().zip(curves) {
        doc.figures(vec![
            Figure {
                svg: bar,
                caption: "Requests per second per serve worker each policy sustains while \
                          meeting the objective: the highest rate a probe passed below every \
                          rate that failed (\"at least\": no probe failed; \"below\": none \
                          passed)."
                    .into(),
            },
            Figure {
                svg: curve,
                caption: format!(
                    "{LOAD_CURVE_NOTE}{}",
                    if ctx.serve_points.is_empty() {
                        ""
                    } else {
                        LOAD_CURVE_FIXED_NOTE
                    }
                ),
            },
        ]);
    }
    if !ctx.capacity.is_empty() {
        doc.heading(3, "Capacity at the objective");
        doc.table_folded(
            "Every capacity search and its probes",
            capacity_table(&ctx.capacity),
        );
    }
    if let Some(t) = fixed_rate_table(v) {
        doc.heading(3, "Requests at a fixed rate");
        doc.table(t);
    }
    llm_and_isolation(ctx, doc);
}

/// The LLM serving table and memory isolation, when the study measured them.
fn llm_and_isolation(ctx: &ReportContext, doc: &mut Document) {
    if !ctx.llm_serve.is_empty() {
        doc.heading(3, "LLM serving (serve-llm workers)");
        doc.para(LLM_SERVE_NOTE);
        doc.table(super::serve_llm::llm_serve_table(&ctx.llm_serve));
    }
    if !ctx.isolation.is_empty() {
        let mut t = Table::new(&["policy", "mode", "outcome", "others kept running", "note"]);
        for r in &ctx.isolation {
            t.row(vec![
                r.policy.clone(),
                r.mode.to_string(),
                r.outcome.clone(),
                if r.isolated { "yes" } else { "no" }.to_owned(),
                r.note.clone(),
            ]);
        }
        doc.heading(3, "Memory isolation");
        doc.table(t);
    }
}

/// What the LLM serving table says.
const LLM_SERVE_NOTE: &str = "Each cohort with serve-llm workers, fixed-rate or a capacity \
     search's probe: the slowest worker's time to first token (from the scheduled arrival) and \
     time per output token at p99 against the requests offered per second per worker, with the \
     KV cache each worker held (preallocated for --max-batch sequences of the whole context) and \
     its search's capacity at the objective. - = the p99 falls on a request without a first \
     token by the end.";

/// Fixed-rate serve cohorts: request latency and the objective's attainment (the batch p99 of
/// a serve worker says nothing about its requests' wait). `None` without any.
fn fixed_rate_table(v: &Verdict) -> Option<Table> {
    let cells: Vec<_> = v.cells.iter().filter(|c| c.request.is_some()).collect();
    if cells.is_empty() {
        return None;
    }
    let mut t = Table::new(&[
        "shape",
        "policy",
        "offered requests/s",
        "request p99 ms",
        "objective",
        "requests within it",
        "met",
    ]);
    for c in cells {
        let Some(r) = &c.request else { continue };
        t.row(vec![
            c.shape.label(),
            v.policies[c.policy].label.clone(),
            num(r.offered_per_s),
            num(c.p99_ms),
            r.slo
                .as_ref()
                .map_or_else(|| "-".to_owned(), |s| s.objective.clone()),
            r.slo.as_ref().map_or_else(
                || "-".to_owned(),
                |s| format!("{} %", num(s.attainment * 100.0)),
            ),
            r.slo.as_ref().map_or_else(
                || "-".to_owned(),
                |s| if s.meets { "yes" } else { "no" }.to_owned(),
            ),
        ]);
    }
    Some(t)
}

/// What the load curve shows, under it.
const LOAD_CURVE_NOTE: &str = "Request latency at the objective's quantile against the load \
     offered to each serve worker, per policy (for searches of serve-llm endpoints, their time \
     to first token; the TPOT is in the capacity table): the capacity search's probes joined in \
     rate order (filled: the probe met the objective; hollow: it missed, which can happen under \
     the line when too few requests ran for LoadGen's early-stopping test, when the other \
     objective was missed, or when the server is overloaded). Hover a point for its figures.";

/// Added under the load curve when the study has fixed-rate serve cohorts.
const LOAD_CURVE_FIXED_NOTE: &str = " Squares are the study's fixed-rate serve cohorts, at \
     their measured offered load.";

/// Per capacity search: its answer, the bracket it stopped on, and every probe.
pub(crate) fn capacity_table(rows: &[super::CapacityRow]) -> Table {
    // In a study, the search's cohort tells apart two searches of one policy and mix (one
    // endpoint eager and one graph-captured, or a second search below the first's floor).
    let named = rows.iter().any(|r| !r.name.is_empty());
    let mut columns = vec!["policy"];
    if named {
        columns.push("search");
    }
    columns.extend([
        "workers",
        "objective",
        "capacity, requests/s",
        "bracket [passed, failed), requests/s",
        "stop",
        "probes in the order run, requests/s: latency at the quantile",
    ]);
    let mut t = Table::new(&columns);
    for r in rows {
        let mut row = vec![r.policy.clone()];
        if named {
            row.push(r.name.clone());
        }
        row.extend([
            r.note.clone(),
            r.objective.clone(),
            r.capacity_words(),
            bracket_words(r),
            r.stop.clone(),
            probes_words(r),
        ]);
        t.row(row);
    }
    t
}

/// A search's bracket: `[848.5, 1,009)`, `[0, 25)`, `[16,000, ∞)`.
pub(crate) fn bracket_words(r: &super::CapacityRow) -> String {
    format!(
        "[{}, {})",
        r.capacity_per_s.map_or_else(|| "0".to_owned(), rate),
        r.failed_above_per_s.map_or_else(|| "∞".to_owned(), rate)
    )
}

/// Every probe of a search in the order run: `300: 5.30 ms (pass); 4,800: - (fail, overloaded)`.
pub(crate) fn probes_words(r: &super::CapacityRow) -> String {
    let probes: Vec<String> = r
        .probes
        .iter()
        .map(|p| {
            let verdict = match p.passed {
                Some(true) => "pass",
                Some(false) => "fail",
                None => "cohort failed",
            };
            let mut latency: Vec<String> = p
                .latency_ms
                .map(|ms| format!("{} ms", num(ms)))
                .into_iter()
                .collect();
            if let Some((ttft, tpot)) = p.llm_ms {
                latency.push(format!("TTFT {} ms, TPOT {} ms", num(ttft), num(tpot)));
            }
            format!(
                "{}: {} ({verdict}{})",
                rate(p.rate_per_s),
                if latency.is_empty() {
                    "-".to_owned()
                } else {
                    latency.join("; ")
                },
                if p.overloaded { ", overloaded" } else { "" }
            )
        })
        .collect();
    probes.join("; ")
}

/// The verdict's figures as a table: one row per shape and policy.
pub(crate) fn verdict_table(v: &Verdict) -> Table {
    let mut t = Table::new(&[
        "shape",
        "policy",
        "cohorts",
        "per-worker samples/s",
        "rate ÷ solo",
        "p99 ms",
        "p99 ÷ solo",
        "aggregate samples/s",
        "aggregate ÷ solo",
        "samples/J",
    ]);
    let ratio = |r: Option<f64>| r.map_or_else(|| "-".to_owned(), verdict::ratio);
    for c in &v.cells {
        let p = &v.policies[c.policy];
        t.row(vec![
            c.shape.label(),
            if c.across_gpus {
                format!("{} ({} GPUs)", p.label, c.shape.count)
            } else {
                p.label.clone()
            },
            c.cohorts.to_string(),
            num(c.rate),
            ratio(c.rate_vs_solo),
            format!(
                "{}{}",
                interval(c.p99_ms, c.p99_ci),
                if c.request.is_some() {
                    " (requests)"
                } else {
                    ""
                }
            ),
            ratio(c.p99_vs_solo),
            interval(c.aggregate, c.aggregate_ci),
            ratio(c.aggregate_vs_solo),
            ratio(c.samples_per_joule),
        ]);
    }
    t
}

/// `3,835 [3,803, 3,866]`: a mean and its 95 % interval, where there is one.
fn interval(v: f64, ci: Option<(f64, f64)>) -> String {
    ci.map_or_else(
        || num(v),
        |(l, h)| format!("{} [{} to {}]", num(v), num(l), num(h)),
    )
}

/// One line that says what a cohort did: `7 train, per worker 0.15× solo, p99 5.9× solo`.
fn cohort_line(k: &CohortComparison) -> String {
    let mut parts = Vec::new();
    for (w, g) in &k.groups {
        let n = g.per_worker.len().max(1) as f64;
        let rate: Option<f64> = g
            .per_worker
            .iter()
            .map(|p| p.rate_vs_solo)
            .sum::<Option<f64>>()
            .map(|s| s / n);
        // The one definition: the group's pooled p99 over the solo's.
        let p99: Option<f64> = g
            .per_worker
            .first()
            .and_then(|p| p.p99_vs_solo.map(|r| p.p99_ms / r))
            .filter(|solo| *solo > 0.0)
            .map(|solo| g.p99_ms / solo);
        parts.push(match (rate, p99) {
            (Some(r), Some(p)) => format!("{w} {}× solo, p99 {}×", num(r), num(p)),
            _ => format!(
                "{w} {} samples/s per worker",
                num(g.aggregate_samples_per_s / n)
            ),
        });
    }
    parts.join("; ")
}

/// Per cohort, folded: its groups and workers against solo and its percentile plot.
fn cohorts(c: &Comparison, ctx: &ReportContext, v: &Verdict, doc: &mut Document) {
    // The baselines' own cohorts, for the grey reference lines.
    let solo: Vec<(Workload, &CohortComparison)> = c
        .baselines
        .iter()
        .filter_map(|(w, b)| {
            c.cohorts
                .iter()
                .find(|k| k.experiment == b.experiment)
                .map(|k| (*w, k))
        })
        .collect();
    for cohort in &c.cohorts {
        let label = verdict::policy_label(ctx, cohort);
        let color = v
            .policies
            .iter()
            .find(|p| p.label == label)
            .map_or("#555", |p| p.color);
        let mut inner = Document::default();
        inner.para(format!(
            "Experiment {}: mode {}, {} ({}), {}, common interval {:.3} s.",
            cohort.experiment,
            cohort.mode,
            workers(cohort.count),
            mix(&cohort.workload_mix),
            cohort.execution,
            cohort.common_s
        ));
        let mut g = Table::new(&[
            "group",
            "workers",
            "aggregate samples/s",
            "aggregate ÷ solo",
            "Jain",
            "p99 ms",
        ]);
        let mut w = Table::new(&[
            "replica",
            "workload",
            "samples/s",
            "rate ÷ solo",
            "p50 ms",
            "p99 ms",
            "p99.9 ms",
            "p99 ÷ solo",
        ]);
        for (workload, grp) in &cohort.groups {
            let figure = |x: Option<f64>| x.map_or_else(|| "-".to_owned(), num);
            g.row(vec![
                group_label(*workload, grp.model.as_deref()),
                grp.workers.to_string(),
                num(grp.aggregate_samples_per_s),
                figure(grp.aggregate_vs_solo),
                format!("{:.4}", grp.jain_fairness),
                num(grp.p99_ms),
            ]);
            for pw in &grp.per_worker {
                w.row(vec![
                    pw.replica.to_string(),
                    workload.to_string(),
                    num(pw.samples_per_s),
                    figure(pw.rate_vs_solo),
                    figure(pw.latency_ms.map(|l| l.p50)),
                    num(pw.p99_ms),
                    figure(pw.latency_ms.map(|l| l.p999)),
                    figure(pw.p99_vs_solo),
                ]);
            }
        }
        inner.table(g);
        inner.table_folded("Each worker", w);
        inner.figures(vec![Figure {
            svg: charts::percentiles(cohort, color, &solo),
            caption: format!(
                "Batch latency by percentile, cohort {}: one line per worker.",
                cohort.experiment
            ),
        }]);
        let name = ctx
            .cohorts
            .iter()
            .find(|k| k.experiment.as_deref() == Some(cohort.experiment.as_str()))
            .map_or(cohort.experiment.as_str(), |k| k.name.as_str());
        doc.details(
            format!(
                "{label} · {} · {} · {name}",
                mix(&cohort.workload_mix),
                cohort_line(cohort)
            ),
            inner,
        );
    }
}

/// `1 worker`, `7 workers`.
fn workers(n: u32) -> String {
    format!("{n} worker{}", if n == 1 { "" } else { "s" })
}

/// Per shape of repeated cohorts: the estimates, then each cohort's values behind them.
fn repeats(c: &Comparison, doc: &mut Document) {
    for r in &c.repeats {
        let mut inner = Document::default();
        let mut t = Table::new(&["group", "quantity", "n", "mean", "stddev", "95% CI"]);
        let mut pts = Table::new(&[
            "experiment",
            "group",
            "aggregate samples/s",
            "per-worker samples/s",
            "p99 ms",
        ]);
        for (workload, s) in &r.groups {
            for (name, e) in [
                ("aggregate samples/s", &s.aggregate_samples_per_s),
                ("per-worker samples/s", &s.per_worker_samples_per_s),
                ("p99 ms", &s.p99_ms),
            ] {
                let ci = match (e.ci95_low, e.ci95_high) {
                    (Some(l), Some(h)) => format!("[{} to {}]", num(l), num(h)),
                    _ => "-".into(),
                };
                t.row(vec![
                    group_label(*workload, r.models.get(workload).map(String::as_str)),
                    name.into(),
                    e.n.to_string(),
                    num(e.mean),
                    num(e.stddev),
                    ci,
                ]);
            }
            for p in &s.cohorts {
                pts.row(vec![
                    p.experiment.clone(),
                    workload.to_string(),
                    num(p.aggregate_samples_per_s),
                    num(p.per_worker_samples_per_s),
                    num(p.p99_ms),
                ]);
            }
        }
        inner.table(t);
        inner.table(pts);
        doc.details(
            format!(
                "mode {}{}, {} ({}), {}: {} cohort{}",
                r.mode,
                r.share
                    .map(|s| format!(" ({})", s.describe()))
                    .unwrap_or_default(),
                workers(r.count),
                mix(&r.workload_mix),
                r.execution,
                r.experiments.len(),
                if r.experiments.len() == 1 { "" } else { "s" }
            ),
            inner,
        );
    }
}
