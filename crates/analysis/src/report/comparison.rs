//! What the comparison says (`comparison.md`, `report.html`): its [`Document`] and its figures.

use coload_cohort_schema::{Comparison, Workload};

use super::document::{Document, Figure, Table, f2, f3, group_label, mix, opt};
use super::plots::{aggregate_svg, cdf_svg, rate_svg};

/// The comparison's text: baselines, every cohort against them, repeats, warnings and caveats.
pub(crate) fn document(c: &Comparison) -> Document {
    let mut doc = Document::default();
    doc.heading(1, "coload comparison");
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
                f2(b.samples_per_s),
                f3(b.p99_ms),
            ]);
        }
        doc.table(t);
    }
    doc.heading(2, "Cohorts");
    doc.para(
        "rate vs solo = samples/s / solo samples/s (below 1 is a slowdown); p99 vs solo = p99 / \
         solo p99 (above 1 is a slowdown); aggregate vs solo above 1 means the co-located \
         workers together did more than one worker alone. Training and inference are never \
         added together.",
    );
    cohorts(c, &mut doc);
    // The "why" view (issue 15): GPM activity and energy beside rate and tail, when recorded.
    if let Some(t) = super::why::comparison_why(c) {
        doc.heading(2, "Why: GPU activity and energy");
        doc.para(super::why::WHY_NOTE);
        doc.table(t);
    }
    doc.heading(2, "Repeats");
    doc.para(
        "Cohorts of one shape (mode, count, workload mix, configuration). Each estimate takes \
         one value per cohort: mean, sample standard deviation and the 95% Student-t confidence \
         interval of the mean (none for a single cohort).",
    );
    repeats(c, &mut doc);
    doc.warnings_and_caveats(
        c.warnings
            .iter()
            .map(|w| format!("{}: {}", w.kind, w.message))
            .collect(),
        &c.caveats,
    );
    doc
}

/// Per cohort: its groups against solo, then its workers against solo.
fn cohorts(c: &Comparison, doc: &mut Document) {
    for cohort in &c.cohorts {
        doc.heading(
            3,
            format!(
                "{}: mode {}, {} workers ({}), {}, common interval {:.3} s",
                cohort.experiment,
                cohort.mode,
                cohort.count,
                mix(&cohort.workload_mix),
                cohort.execution,
                cohort.common_s
            ),
        );
        let mut g = Table::new(&[
            "group",
            "workers",
            "aggregate samples/s",
            "aggregate vs solo",
            "jain",
            "p99 ms",
        ]);
        let mut w = Table::new(&[
            "replica",
            "workload",
            "samples/s",
            "rate vs solo",
            "p99 ms",
            "p99 vs solo",
        ]);
        for (workload, grp) in &cohort.groups {
            g.row(vec![
                group_label(*workload, grp.model.as_deref()),
                grp.workers.to_string(),
                f2(grp.aggregate_samples_per_s),
                opt(grp.aggregate_vs_solo, 3),
                format!("{:.4}", grp.jain_fairness),
                f3(grp.p99_ms),
            ]);
            for pw in &grp.per_worker {
                w.row(vec![
                    pw.replica.to_string(),
                    workload.to_string(),
                    f2(pw.samples_per_s),
                    opt(pw.rate_vs_solo, 3),
                    f3(pw.p99_ms),
                    opt(pw.p99_vs_solo, 3),
                ]);
            }
        }
        doc.table(g);
        doc.table(w);
    }
}

/// Per shape of repeated cohorts: the estimates, then each cohort's values behind them.
fn repeats(c: &Comparison, doc: &mut Document) {
    for r in &c.repeats {
        doc.heading(
            3,
            format!(
                "mode {}, {} workers ({}), {}: {} cohort{}",
                r.mode,
                r.count,
                mix(&r.workload_mix),
                r.execution,
                r.experiments.len(),
                if r.experiments.len() == 1 { "" } else { "s" }
            ),
        );
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
                    (Some(l), Some(h)) => format!("[{l:.3}, {h:.3}]"),
                    _ => "-".into(),
                };
                t.row(vec![
                    group_label(*workload, r.models.get(workload).map(String::as_str)),
                    name.into(),
                    e.n.to_string(),
                    f3(e.mean),
                    f3(e.stddev),
                    ci,
                ]);
            }
            for p in &s.cohorts {
                pts.row(vec![
                    p.experiment.clone(),
                    workload.to_string(),
                    f2(p.aggregate_samples_per_s),
                    f2(p.per_worker_samples_per_s),
                    f3(p.p99_ms),
                ]);
            }
        }
        doc.table(t);
        doc.table(pts);
    }
}

/// The comparison's plots: per cohort the latency CDF of each worker and each worker's rate
/// against solo; per workload present, the aggregate rate against worker count per mode.
pub(crate) fn figures(c: &Comparison) -> Vec<Figure> {
    let mut out = Vec::new();
    for cohort in &c.cohorts {
        out.push(Figure {
            svg: cdf_svg(cohort),
            caption: format!("Latency CDF per worker, cohort {}", cohort.experiment),
        });
        out.push(Figure {
            svg: rate_svg(cohort),
            caption: format!(
                "Per-worker rate against solo, cohort {} (1 = as fast as alone)",
                cohort.experiment
            ),
        });
    }
    for workload in [Workload::Train, Workload::Infer, Workload::Serve] {
        if c.cohorts.iter().any(|k| k.groups.contains_key(&workload)) {
            out.push(Figure {
                svg: aggregate_svg(c, workload),
                caption: format!("Aggregate {workload} samples/s against worker count, per mode"),
            });
        }
    }
    out
}
