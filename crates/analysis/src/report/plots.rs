//! The comparison's plots, drawn by plotters' SVG backend into strings that the HTML page
//! inlines: the latency CDF of every worker of a cohort, every worker's rate against solo, and
//! the aggregate rate against worker count per mode.

use std::collections::BTreeMap;

use coload_cohort_schema::{CohortComparison, Comparison, Mode, Workload};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use super::html::escape_html;

/// Size of every plot, pixels.
const PLOT_SIZE: (u32, u32) = (720, 380);

/// Every chart here: SVG, with floating-point axes.
type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

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

/// Draws the legend of `chart` at `position`, in the one style of every plot.
fn legend<'a, 'b: 'a>(
    chart: &mut Chart<'a, 'b>,
    position: SeriesLabelPosition,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())
}

fn workload_color(w: Workload) -> RGBColor {
    match w {
        Workload::Train => RGBColor(31, 119, 180),
        Workload::Infer => RGBColor(255, 127, 14),
        Workload::Hog => RGBColor(127, 127, 127),
        Workload::Serve => RGBColor(44, 160, 44),
    }
}

/// The latency CDF of every worker of a cohort, one line each.
pub(crate) fn cdf_svg(c: &CohortComparison) -> String {
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
        legend(&mut chart, SeriesLabelPosition::UpperLeft)
    })
}

/// Every worker's rate against solo, one bar each, with the solo line at 1.
pub(crate) fn rate_svg(c: &CohortComparison) -> String {
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
        legend(&mut chart, SeriesLabelPosition::UpperRight)
    })
}

/// The aggregate rate of `workload` against worker count, one line per mode.
pub(crate) fn aggregate_svg(c: &Comparison, workload: Workload) -> String {
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
        legend(&mut chart, SeriesLabelPosition::LowerRight)
    })
}
