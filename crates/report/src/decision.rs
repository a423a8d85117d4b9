//! The decision table a study's report opens with, and the frontier chart under it: for the
//! study's mix, the pick per need (`coload_analysis::frontier` decides; this module only says
//! it) and serving capacity against the co-located trainers' throughput, one point per policy
//! and share.

use coload_analysis::fidelity::SharePoint;
use coload_cohort_schema::{DecisionTable, FrontierPoint, Workload};

use super::document::{Document, Figure, Table};
use super::svg::{Panel, Scale, Svg, nice_ticks, tick};

/// The decision section: the table, the pick rule, the frontier chart.
pub(crate) fn section(d: &DecisionTable, doc: &mut Document) {
    doc.heading(2, format!("Decision for {} at {}", d.mix, d.objective));
    doc.table(table(d));
    doc.para(format!(
        "How each row picks: {}. Cards: {}.",
        d.rule,
        coload_analysis::frontier::cards_note(d.tenants)
    ));
    if let Some(svg) = frontier_chart(d) {
        doc.figures(vec![Figure {
            svg,
            caption: caption(d),
        }]);
    }
}

fn table(d: &DecisionTable) -> Table {
    let cards = format!("cards for {} tenants", d.tenants);
    let mut t = Table::new(&["need", "pick", "what you get", "what you give up", &cards]);
    for r in &d.rows {
        t.row(vec![
            r.need.clone(),
            r.pick.clone().unwrap_or_else(|| "-".to_owned()),
            r.get.clone(),
            if r.give_up.is_empty() {
                "-".to_owned()
            } else {
                r.give_up.clone()
            },
            if r.cards.is_empty() {
                "-".to_owned()
            } else {
                r.cards.clone()
            },
        ]);
    }
    t
}

/// The decision table as Markdown (its heading, the table and the pick rule), for a page built
/// from a study's data (the repository's results page) to show the report's own words.
#[must_use]
pub fn decision_markdown(d: &DecisionTable) -> String {
    let mut doc = Document::default();
    doc.heading(2, format!("Decision for {} at {}", d.mix, d.objective));
    doc.table(table(d));
    doc.para(format!("How each row picks: {}.", d.rule));
    super::markdown::markdown(&doc)
}

fn caption(d: &DecisionTable) -> String {
    let alone = d
        .points
        .iter()
        .find(|p| p.train_vs_solo.is_none() && p.mode == coload_cohort_schema::Mode::Exclusive)
        .map(|p| {
            format!(
                " The endpoint alone on a whole GPU (not drawn) serves {} requests/s.",
                coload_analysis::frontier::bracket_words(
                    p.capacity_passed_per_s,
                    p.capacity_failed_per_s
                )
            )
        })
        .unwrap_or_default();
    format!(
        "The frontier for {}: serving capacity at {} (the bar is the search's bracket [passed, \
         failed); a hollow mark passed no rate) against the {} trainers' aggregate samples/s \
         over one exclusive solo trainer of the same card (the whisker is its 95 % interval). \
         Points on the frontier are joined.{alone}",
        d.mix,
        d.objective,
        d.mix
            .split(',')
            .find_map(|p| p.strip_prefix("train="))
            .unwrap_or("co-located")
    )
}

/// The points the chart draws: those with a training figure (beside the endpoint).
fn drawn(d: &DecisionTable) -> Vec<&FrontierPoint> {
    d.points
        .iter()
        .filter(|p| p.train_vs_solo.is_some())
        .collect()
}

/// Serving capacity (x, requests/s) against the trainers' throughput over one solo trainer
/// (y), one point per policy and share, the frontier joined; `None` with nothing to draw.
#[must_use]
pub(crate) fn frontier_chart(d: &DecisionTable) -> Option<String> {
    let points = drawn(d);
    if points.is_empty() {
        return None;
    }
    let (width, height) = (700.0, 380.0);
    let x_hi = points
        .iter()
        .filter_map(|p| p.capacity_failed_per_s.or(p.capacity_passed_per_s))
        .fold(1.0f64, f64::max)
        * 1.1;
    let y_hi = points
        .iter()
        .filter_map(|p| p.train_vs_solo.map(|r| r.high.unwrap_or(r.ratio)))
        .fold(1.0f64, f64::max)
        * 1.15;
    let p = Panel {
        left: 70.0,
        top: 30.0,
        right: width - 200.0,
        bottom: height - 50.0,
        x: Scale::Linear { lo: 0.0, hi: x_hi },
        y: Scale::Linear { lo: 0.0, hi: y_hi },
    };
    let mut svg = Svg::new(width, height);
    svg.text(
        p.left,
        18.0,
        "start",
        "panel-title",
        &format!("serving against training: {}", d.mix),
    );
    let x_ticks: Vec<(f64, String)> = nice_ticks(0.0, x_hi, 5)
        .into_iter()
        .map(|t| (t, tick(t)))
        .collect();
    for (t, _) in &x_ticks {
        svg.line((p.px(*t), p.top), (p.px(*t), p.bottom), "grid");
    }
    p.y_axis(
        &mut svg,
        &nice_ticks(0.0, y_hi, 5),
        &|v| format!("{}x", tick(v)),
        "trainers' samples/s over one solo trainer",
    );
    p.x_axis(
        &mut svg,
        &x_ticks,
        &format!("requests/s sustained at {}", d.objective),
    );
    let at = |q: &FrontierPoint| {
        (
            p.px(q.capacity_passed_per_s.unwrap_or(0.0)),
            p.py(q.train_vs_solo.map_or(0.0, |r| r.ratio)),
        )
    };
    frontier_line(&mut svg, &points, &at);
    let mut modes: Vec<coload_cohort_schema::Mode> = Vec::new();
    for q in &points {
        let seen = modes.iter().filter(|m| **m == q.mode).count();
        modes.push(q.mode);
        let palette = super::verdict::mode_colors(q.mode);
        let color = palette[seen % palette.len()];
        let (cx, cy) = at(q);
        let Some(ratio) = q.train_vs_solo else {
            continue;
        };
        let bracket = coload_analysis::frontier::bracket_words(
            q.capacity_passed_per_s,
            q.capacity_failed_per_s,
        );
        let title = format!(
            "{}: {bracket} requests/s at {}; trainers {}",
            q.label,
            d.objective,
            coload_analysis::frontier::ratio_words(&ratio)
        );
        // The bracket as a bar from the passed to the failed rate.
        let lo = p.px(q.capacity_passed_per_s.unwrap_or(0.0));
        let hi = p.px(q.capacity_failed_per_s.unwrap_or(x_hi));
        svg.rect(lo, cy - 1.5, hi - lo, 3.0, color, &title);
        if let (Some(low), Some(high)) = (ratio.low, ratio.high) {
            svg.path(&[(cx, p.py(low)), (cx, p.py(high))], color, false, &title);
        }
        svg.dot(
            cx,
            cy,
            5.0,
            color,
            q.capacity_passed_per_s.is_none(),
            &title,
        );
    }
    // Labels to the right of the plot area, top to bottom.
    let mut marks: Vec<((f64, f64), String)> =
        points.iter().map(|q| (at(q), q.label.clone())).collect();
    marks.sort_by(|a, b| a.0.1.total_cmp(&b.0.1));
    labels(&mut svg, &p, &marks);
    Some(svg.finish(&format!(
        "serving capacity against the trainers' throughput for {}",
        d.mix
    )))
}

/// Each point's label to the right of the plot area, joined to its point (`marks`: pixel
/// position and label) by a thin line, stacked top to bottom so that no two overlap.
fn labels(svg: &mut Svg, panel: &Panel, marks: &[((f64, f64), String)]) {
    let mut used_y = f64::NEG_INFINITY;
    for ((x, y), label) in marks {
        let ly = y.max(used_y + 15.0);
        used_y = ly;
        svg.line((x + 6.0, *y), (panel.right + 8.0, ly - 4.0), "grid");
        // The thread share in short (`MPS, 2 replicas (50 %)`): the table says it in full.
        let short = label.replace(" of the threads each", "");
        svg.text(panel.right + 12.0, ly, "start", "tick", &short);
    }
}

/// The frontier's points joined, from the most capacity to the most training (`at`: a point's
/// pixel position).
fn frontier_line(
    svg: &mut Svg,
    points: &[&FrontierPoint],
    at: &dyn Fn(&FrontierPoint) -> (f64, f64),
) {
    // The frontier, joined from the most capacity to the most training.
    let mut front: Vec<&&FrontierPoint> = points.iter().filter(|q| q.on_frontier).collect();
    front.sort_by(|a, b| {
        a.capacity_passed_per_s
            .unwrap_or(0.0)
            .total_cmp(&b.capacity_passed_per_s.unwrap_or(0.0))
    });
    if front.len() > 1 {
        let line: Vec<(f64, f64)> = front.iter().map(|q| at(q)).collect();
        svg.path(&line, "#9a9a9a", true, "the Pareto frontier");
    }
}

/// What each share delivers against what it promises: a chart (with the diagonal "delivered =
/// promised") and its table, for a study of one worker alone under shares.
pub(crate) fn fidelity_section(points: &[SharePoint], doc: &mut Document) {
    doc.heading(2, "What a share delivers against what it promises");
    if let Some(svg) = fidelity_chart(points) {
        doc.figures(vec![Figure {
            svg,
            caption: "One worker alone under each share: its samples/s over the same card's \
                      exclusive solo runs (the whisker is the 95 % interval) against the share of \
                      the threads promised (MPS at R replicas: 100/R %; unlimited MPS and \
                      time-slicing alone: the whole card). On the dashed diagonal a share \
                      delivers exactly what it promises; above it, more."
                .to_owned(),
        }]);
    }
    let mut t = Table::new(&[
        "worker",
        "policy and share",
        "threads promised (%)",
        "delivered (fraction of solo, 95 % interval)",
        "of its promise (delivered ÷ promised)",
    ]);
    for p in points {
        t.row(vec![
            super::document::group_label(p.workload, p.model.as_deref()),
            p.label.clone(),
            format!("{:.0}", p.promised_pct),
            coload_analysis::frontier::ratio_words(&p.delivered),
            p.of_promise().map_or_else(
                || "-".to_owned(),
                |r| coload_analysis::frontier::ratio_words(&r),
            ),
        ]);
    }
    doc.table_folded("Each share against its promise", t);
}

/// The colour of a workload's marks in the fidelity chart.
fn workload_color(w: Workload) -> &'static str {
    match w {
        Workload::Train => "#1f6fb4",
        Workload::Infer => "#d95f02",
        _ => "#5b6770",
    }
}

/// Delivered fraction of solo (y) against the threads promised (x, %), per workload, with the
/// diagonal; `None` with nothing to draw.
pub(crate) fn fidelity_chart(points: &[SharePoint]) -> Option<String> {
    if points.is_empty() {
        return None;
    }
    let (width, height) = (600.0, 360.0);
    let y_hi = points
        .iter()
        .map(|q| q.delivered.high.unwrap_or(q.delivered.ratio))
        .fold(1.0f64, f64::max)
        * 1.1;
    let p = Panel {
        left: 70.0,
        top: 30.0,
        right: width - 20.0,
        bottom: height - 50.0,
        x: Scale::Linear { lo: 0.0, hi: 105.0 },
        y: Scale::Linear { lo: 0.0, hi: y_hi },
    };
    let mut svg = Svg::new(width, height);
    svg.text(
        p.left,
        18.0,
        "start",
        "panel-title",
        "delivered against promised, one worker alone",
    );
    let x_ticks: Vec<(f64, String)> = [0.0, 14.0, 25.0, 50.0, 100.0]
        .into_iter()
        .map(|t| (t, format!("{t:.0} %")))
        .collect();
    for (t, _) in &x_ticks {
        svg.line((p.px(*t), p.top), (p.px(*t), p.bottom), "grid");
    }
    p.y_axis(
        &mut svg,
        &nice_ticks(0.0, y_hi, 5),
        &|v| format!("{}x", tick(v)),
        "samples/s over the card's solo",
    );
    p.x_axis(&mut svg, &x_ticks, "share of the threads promised");
    svg.path(
        &[(p.px(0.0), p.py(0.0)), (p.px(100.0), p.py(1.0))],
        "#9a9a9a",
        true,
        "delivered = promised",
    );
    svg.text(
        p.px(100.0) - 4.0,
        p.py(1.0) - 8.0,
        "end",
        "tick",
        "delivered = promised",
    );
    let mut workloads: Vec<Workload> = Vec::new();
    for q in points {
        if !workloads.contains(&q.workload) {
            workloads.push(q.workload);
        }
        // The workloads side by side at one promise, so that their whiskers do not cover each
        // other.
        let k = workloads.iter().position(|w| *w == q.workload).unwrap_or(0) as f64;
        let cx = p.px(q.promised_pct) + (k - 0.5) * 8.0;
        let color = workload_color(q.workload);
        let title = format!(
            "{} {}: promised {:.0} %, delivered {}",
            q.workload,
            q.label,
            q.promised_pct,
            coload_analysis::frontier::ratio_words(&q.delivered)
        );
        if let (Some(low), Some(high)) = (q.delivered.low, q.delivered.high) {
            svg.path(&[(cx, p.py(low)), (cx, p.py(high))], color, false, &title);
        }
        let hollow = q.label != "time-slicing" && q.promised_pct >= 100.0;
        svg.dot(cx, p.py(q.delivered.ratio), 4.5, color, hollow, &title);
    }
    let mut lx = p.left + 10.0;
    for w in &workloads {
        lx = svg.legend_item(lx, p.top + 12.0, workload_color(*w), false, &w.to_string());
    }
    svg.legend_item(lx, p.top + 12.0, "#9a9a9a", false, "hollow: unlimited MPS");
    Some(svg.finish("delivered fraction of solo against the share promised"))
}

#[cfg(test)]
mod tests {
    use coload_cohort_schema::{Mode, RatioInterval};

    use super::*;

    fn point(policy: &str, passed: Option<f64>, ratio: f64, on_frontier: bool) -> FrontierPoint {
        FrontierPoint {
            policy: policy.to_owned(),
            label: format!("MPS, {policy}"),
            mode: Mode::Mps,
            share: None,
            capacity_passed_per_s: passed,
            capacity_failed_per_s: Some(passed.unwrap_or(0.0) + 100.0),
            probe_rate_per_s: 50.0,
            probe_passed: passed.is_some(),
            card: None,
            serve_tokens_per_s: None,
            train_samples_per_s: Some(ratio * 3000.0),
            train_vs_solo: Some(RatioInterval {
                ratio,
                low: Some(ratio * 0.9),
                high: Some(ratio * 1.1),
                n_numerator: 1,
                n_denominator: 3,
            }),
            train_samples_per_j: None,
            solo_samples_per_j: None,
            memory_limit_bytes: None,
            threads_pct: None,
            cards: 1,
            on_frontier,
        }
    }

    #[test]
    fn the_chart_draws_every_point_and_joins_only_the_frontier() {
        let d = DecisionTable {
            mix: "serve=1,train=6".into(),
            tenants: 7,
            objective: "p99 <= 10 ms".into(),
            rule: String::new(),
            points: vec![
                point("r7", Some(800.0), 1.5, true),
                point("r2", None, 1.85, true),
                point("ts", None, 1.05, false),
            ],
            rows: Vec::new(),
        };
        let svg = frontier_chart(&d).unwrap();
        assert_eq!(svg.matches("<circle").count(), 3);
        // Two points passed nothing: hollow marks.
        assert_eq!(svg.matches("fill=\"#fff\"").count(), 2);
        // One dashed line through the two frontier points.
        let line = &svg[svg.find("stroke-dasharray").unwrap() - 200..];
        assert!(line.contains("the Pareto frontier"));
        assert_eq!(svg.matches("the Pareto frontier").count(), 1);
        let path = svg[..svg.find("stroke=\"#9a9a9a\"").unwrap()]
            .rsplit("<path d=\"")
            .next()
            .unwrap();
        assert_eq!(path.matches(" L").count(), 1, "{path}");
        for label in ["MPS, r7", "MPS, r2", "MPS, ts"] {
            assert!(svg.contains(label), "{label}");
        }
    }
}
