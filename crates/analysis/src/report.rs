//! The comparison for people: `comparison.md`, and `report.html` with SVG plots drawn by
//! plotters' SVG backend and inlined, so the page opens offline with no external asset.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use coload_cohort_schema::{CohortComparison, Comparison, Mode, Workload, write_json_atomic};
use plotters::prelude::*;

use crate::error::AnalysisError;
use crate::render::{Table, escape_html, f2, f3};

/// Size of every plot, pixels.
const PLOT_SIZE: (u32, u32) = (720, 380);

fn opt(x: Option<f64>, digits: usize) -> String {
    x.map_or_else(|| "-".to_owned(), |v| format!("{v:.digits$}"))
}

fn mix(m: &BTreeMap<Workload, u32>) -> String {
    m.iter()
        .map(|(w, n)| format!("{n} {w}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One titled block of the report: a heading level, a title, tables and paragraphs.
enum Block {
    Heading(usize, String),
    Para(String),
    Table(Table),
    List(Vec<String>),
}

fn cohort_blocks(c: &Comparison, out: &mut Vec<Block>) {
    for cohort in &c.cohorts {
        out.push(Block::Heading(
            3,
            format!(
                "{}: mode {}, {} workers ({}), common interval {:.3} s",
                cohort.experiment,
                cohort.mode,
                cohort.count,
                mix(&cohort.workload_mix),
                cohort.common_s
            ),
        ));
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
                workload.to_string(),
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
        out.push(Block::Table(g));
        out.push(Block::Table(w));
    }
}

fn blocks(c: &Comparison) -> Vec<Block> {
    let mut out = vec![Block::Heading(1, "coload comparison".into())];
    out.push(Block::Heading(2, "Baselines".into()));
    if c.baselines.is_empty() {
        out.push(Block::Para(
            "No solo baseline given: no ratios against solo.".into(),
        ));
    } else {
        let mut t = Table::new(&["workload", "experiment", "mode", "samples/s", "p99 ms"]);
        for (w, b) in &c.baselines {
            t.row(vec![
                w.to_string(),
                b.experiment.clone(),
                b.mode.to_string(),
                f2(b.samples_per_s),
                f3(b.p99_ms),
            ]);
        }
        out.push(Block::Table(t));
    }
    out.push(Block::Heading(2, "Cohorts".into()));
    out.push(Block::Para(
        "rate vs solo = samples/s / solo samples/s (below 1 is a slowdown); p99 vs solo = p99 / \
         solo p99 (above 1 is a slowdown); aggregate vs solo above 1 means the co-located \
         workers together did more than one worker alone. Training and inference are never \
         added together."
            .into(),
    ));
    cohort_blocks(c, &mut out);
    out.push(Block::Heading(2, "Repeats".into()));
    out.push(Block::Para(
        "Cohorts of one shape (mode, count, workload mix, configuration). Each estimate takes \
         one value per cohort: mean, sample standard deviation and the 95% Student-t confidence \
         interval of the mean (none for a single cohort)."
            .into(),
    ));
    for r in &c.repeats {
        out.push(Block::Heading(
            3,
            format!(
                "mode {}, {} workers ({}): {} cohort{}",
                r.mode,
                r.count,
                mix(&r.workload_mix),
                r.experiments.len(),
                if r.experiments.len() == 1 { "" } else { "s" }
            ),
        ));
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
                    workload.to_string(),
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
        out.push(Block::Table(t));
        out.push(Block::Table(pts));
    }
    if !c.warnings.is_empty() {
        out.push(Block::Heading(2, "Warnings".into()));
        out.push(Block::List(
            c.warnings
                .iter()
                .map(|w| format!("{}: {}", w.kind, w.message))
                .collect(),
        ));
    }
    out.push(Block::Heading(2, "Caveats".into()));
    out.push(Block::List(c.caveats.clone()));
    out
}

/// The comparison as Markdown (`comparison.md`).
#[must_use]
pub fn render_comparison_markdown(c: &Comparison) -> String {
    let mut out = String::new();
    for b in blocks(c) {
        match b {
            Block::Heading(level, text) => {
                let _ = writeln!(out, "{} {text}\n", "#".repeat(level));
            }
            Block::Para(text) => {
                let _ = writeln!(out, "{text}\n");
            }
            Block::Table(t) => {
                out.push_str(&t.markdown());
                out.push('\n');
            }
            Block::List(items) => {
                for i in items {
                    let _ = writeln!(out, "- {i}");
                }
                out.push('\n');
            }
        }
    }
    out.truncate(out.trim_end().len());
    out.push('\n');
    out
}

const STYLE: &str = "body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;\
color:#222}table{border-collapse:collapse;margin:.5em 0 1.5em}th,td{border:1px solid #ccc;\
padding:.2em .6em;text-align:right}th:first-child,td:first-child{text-align:left}\
th{background:#f3f3f3}figure{margin:1em 0}figcaption{font-size:.9em;color:#555}";

/// The comparison as one self-contained HTML page (`report.html`): the tables of
/// `comparison.md` and inline SVG plots (latency CDF per worker and per-worker rate against solo
/// for each cohort, aggregate rate against worker count per mode).
#[must_use]
pub fn render_report_html(c: &Comparison) -> String {
    let mut out = String::from(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>coload comparison</title>\n<style>",
    );
    out.push_str(STYLE);
    out.push_str("</style>\n</head>\n<body>\n");
    for b in blocks(c) {
        match b {
            Block::Heading(level, text) => {
                let _ = writeln!(out, "<h{level}>{}</h{level}>", escape_html(&text));
            }
            Block::Para(text) => {
                let _ = writeln!(out, "<p>{}</p>", escape_html(&text));
            }
            Block::Table(t) => out.push_str(&t.html()),
            Block::List(items) => {
                out.push_str("<ul>\n");
                for i in items {
                    let _ = writeln!(out, "<li>{}</li>", escape_html(&i));
                }
                out.push_str("</ul>\n");
            }
        }
    }
    out.push_str("<h2>Plots</h2>\n");
    for cohort in &c.cohorts {
        figure(
            &mut out,
            &cdf_svg(cohort),
            &format!("Latency CDF per worker, cohort {}", cohort.experiment),
        );
        figure(
            &mut out,
            &rate_svg(cohort),
            &format!(
                "Per-worker rate against solo, cohort {} (1 = as fast as alone)",
                cohort.experiment
            ),
        );
    }
    for workload in [Workload::Train, Workload::Infer, Workload::Serve] {
        if c.cohorts.iter().any(|k| k.groups.contains_key(&workload)) {
            figure(
                &mut out,
                &aggregate_svg(c, workload),
                &format!("Aggregate {workload} samples/s against worker count, per mode"),
            );
        }
    }
    out.push_str("</body>\n</html>\n");
    out
}

fn figure(out: &mut String, svg: &str, caption: &str) {
    let _ = writeln!(
        out,
        "<figure>\n{svg}\n<figcaption>{}</figcaption>\n</figure>",
        escape_html(caption)
    );
}

/// Draws with `draw` into an SVG string; a drawing failure becomes a short note in place of
/// the plot rather than a panic or a missing report.
fn svg(
    draw: impl FnOnce(&DrawingArea<SVGBackend<'_>, plotters::coord::Shift>) -> Result<(), String>,
) -> String {
    let mut buf = String::new();
    let result = {
        let root = SVGBackend::with_string(&mut buf, PLOT_SIZE).into_drawing_area();
        root.fill(&WHITE)
            .map_err(|e| e.to_string())
            .and_then(|()| draw(&root))
            .and_then(|()| root.present().map_err(|e| e.to_string()))
    };
    match result {
        Ok(()) => buf,
        Err(e) => format!("<p>(plot not drawn: {})</p>", escape_html(&e)),
    }
}

fn workload_color(w: Workload) -> RGBColor {
    match w {
        Workload::Train => RGBColor(31, 119, 180),
        Workload::Infer => RGBColor(255, 127, 14),
        Workload::Serve => RGBColor(44, 160, 44),
    }
}

fn cdf_svg(c: &CohortComparison) -> String {
    svg(|root| {
        let max_ms = c
            .groups
            .values()
            .flat_map(|g| &g.per_worker)
            .filter_map(|w| w.latency_cdf_ms.last())
            .copied()
            .fold(0.0f64, f64::max);
        let x_max = if max_ms > 0.0 { max_ms * 1.05 } else { 1.0 };
        let mut chart = ChartBuilder::on(root)
            .caption(format!("latency CDF, {}", c.experiment), ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(0f64..x_max, 0f64..1.0f64)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc("batch latency, ms")
            .y_desc("fraction of batches")
            .draw()
            .map_err(|e| e.to_string())?;
        let mut i = 0usize;
        for (workload, g) in &c.groups {
            for w in &g.per_worker {
                let color = Palette99::pick(i).to_rgba();
                i += 1;
                let points = w
                    .latency_cdf_ms
                    .iter()
                    .enumerate()
                    .map(|(k, ms)| (*ms, k as f64 / 100.0));
                chart
                    .draw_series(LineSeries::new(points, color.stroke_width(2)))
                    .map_err(|e| e.to_string())?
                    .label(format!("replica {} ({workload})", w.replica))
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
            }
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(|e| e.to_string())
    })
}

fn rate_svg(c: &CohortComparison) -> String {
    svg(|root| {
        let bars: Vec<(u32, Workload, f64)> = c
            .groups
            .iter()
            .flat_map(|(workload, g)| {
                g.per_worker
                    .iter()
                    .map(|w| (w.replica, *workload, w.rate_vs_solo.unwrap_or(0.0)))
            })
            .collect();
        let n = bars.iter().map(|b| b.0 + 1).max().unwrap_or(1);
        let y_max = bars.iter().map(|b| b.2).fold(1.0f64, f64::max) * 1.1;
        let mut chart = ChartBuilder::on(root)
            .caption(
                format!("samples/s against solo, {}", c.experiment),
                ("sans-serif", 16),
            )
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(-0.5f64..(f64::from(n) - 0.5), 0f64..y_max)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n as usize)
            .x_label_formatter(&|x| format!("{}", x.round() as i64))
            .x_desc("replica")
            .y_desc("rate / solo rate")
            .draw()
            .map_err(|e| e.to_string())?;
        chart
            .draw_series(bars.iter().map(|(r, w, v)| {
                let x = f64::from(*r);
                Rectangle::new(
                    [(x - 0.35, 0.0), (x + 0.35, *v)],
                    workload_color(*w).filled(),
                )
            }))
            .map_err(|e| e.to_string())?;
        chart
            .draw_series(LineSeries::new(
                [(-0.5, 1.0), (f64::from(n) - 0.5, 1.0)],
                BLACK.stroke_width(1),
            ))
            .map_err(|e| e.to_string())?
            .label("solo = 1")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLACK));
        // One legend entry per workload colour (the bars themselves are drawn above).
        for workload in c.groups.keys() {
            let color = workload_color(*workload);
            chart
                .draw_series(std::iter::empty::<Rectangle<(f64, f64)>>())
                .map_err(|e| e.to_string())?
                .label(workload.as_str())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(|e| e.to_string())?;
        Ok(())
    })
}

fn aggregate_svg(c: &Comparison, workload: Workload) -> String {
    svg(|root| {
        // Per mode: every homogeneous cohort of this workload as a point at its worker count,
        // and a line through the mean at each count. Mixed cohorts are left out: their groups
        // share the GPU with the other workload, so they are not points on this curve (they
        // are in the per-cohort plots and tables).
        let mut by_mode: BTreeMap<Mode, BTreeMap<u32, Vec<f64>>> = BTreeMap::new();
        for k in &c.cohorts {
            let homogeneous = k.workload_mix.len() == 1 && k.workload_mix.contains_key(&workload);
            if let (true, Some(g)) = (homogeneous, k.groups.get(&workload)) {
                by_mode
                    .entry(k.mode)
                    .or_default()
                    .entry(g.workers)
                    .or_default()
                    .push(g.aggregate_samples_per_s);
            }
        }
        let solo = c.baselines.get(&workload).map(|b| b.samples_per_s);
        let max_count = by_mode
            .values()
            .flat_map(|m| m.keys())
            .copied()
            .max()
            .unwrap_or(1);
        let y_max = by_mode
            .values()
            .flat_map(|m| m.values().flatten())
            .copied()
            .chain(solo)
            .fold(0.0f64, f64::max);
        let y_max = if y_max > 0.0 { y_max * 1.15 } else { 1.0 };
        let mut chart = ChartBuilder::on(root)
            .caption(
                format!("aggregate {workload} samples/s by worker count (homogeneous cohorts)"),
                ("sans-serif", 16),
            )
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.5f64..(f64::from(max_count) + 0.5), 0f64..y_max)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_labels(max_count as usize)
            .x_label_formatter(&|x| format!("{}", x.round() as i64))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .x_desc(format!("{workload} workers in the cohort"))
            .y_desc("aggregate samples/s")
            .draw()
            .map_err(|e| e.to_string())?;
        if let Some(solo) = solo {
            chart
                .draw_series(DashedLineSeries::new(
                    [(0.5, solo), (f64::from(max_count) + 0.5, solo)],
                    6,
                    4,
                    BLACK.stroke_width(1),
                ))
                .map_err(|e| e.to_string())?
                .label("one worker alone (baseline)")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLACK));
        }
        for (i, (mode, counts)) in by_mode.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let means: Vec<(f64, f64)> = counts
                .iter()
                .map(|(n, v)| (f64::from(*n), v.iter().sum::<f64>() / v.len() as f64))
                .collect();
            chart
                .draw_series(LineSeries::new(means, color.stroke_width(2)))
                .map_err(|e| e.to_string())?
                .label(mode.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
            chart
                .draw_series(counts.iter().flat_map(|(n, v)| {
                    v.iter()
                        .map(move |y| Circle::new((f64::from(*n), *y), 4, color.filled()))
                }))
                .map_err(|e| e.to_string())?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(|e| e.to_string())
    })
}

/// Writes `comparison.json`, `comparison.md` and `report.html` into `dir` (created if needed).
pub fn write_report(dir: &Path, c: &Comparison) -> Result<(), AnalysisError> {
    let werr = |path: &Path, source| AnalysisError::Write {
        path: path.to_owned(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(|e| werr(dir, e))?;
    write_json_atomic(&dir.join("comparison.json"), c)?;
    let md = dir.join("comparison.md");
    std::fs::write(&md, render_comparison_markdown(c)).map_err(|e| werr(&md, e))?;
    let html = dir.join("report.html");
    std::fs::write(&html, render_report_html(c)).map_err(|e| werr(&html, e))?;
    Ok(())
}
