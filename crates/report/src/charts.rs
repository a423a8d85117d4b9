//! The report's charts, drawn with [`super::svg`]:
//!
//! - [`per_worker`]: per-worker rate against solo and p99 against solo, by shape and policy, as
//!   one grouped chart of two panels (the verdict's first chart);
//! - [`scaling`]: aggregate throughput against worker count, one line per policy, a panel per
//!   workload;
//! - [`capacity`]: requests per second each policy sustains at the objective (when measured);
//! - [`load_curve`]: request latency at the objective's quantile against offered load, each
//!   policy's capacity probes joined in rate order, fixed-rate serve cohorts as points, the
//!   objective as a dashed line (one chart per objective);
//! - [`percentiles`]: a cohort's batch latency by percentile on a log tail axis (50, 90, 99,
//!   99.9, 99.99 %, as HdrHistogram plots it), one line per worker, with the solo worker's line
//!   for reference.

use std::collections::BTreeMap;

use coload_cohort_schema::{CohortComparison, Comparison, Mode, Workload};

use super::svg::{Panel, Scale, Svg, log_ticks, nice_ticks, num, tick};
use super::verdict::{Policy, Verdict, objectives};

/// Width of a chart of the verdict (two sit side by side on a wide screen), pixels.
const WIDE: f64 = 600.0;

fn legend(svg: &mut Svg, policies: &[&Policy], x0: f64, y: f64, line: bool) {
    let mut x = x0;
    for p in policies {
        x = svg.legend_item(x, y, p.color, line, &p.label);
    }
}

/// Per worker against solo, by shape and policy: rate (higher is better) above, p99 (lower is
/// better, log scale) below. `None` when no cell has a ratio (no baselines).
#[expect(
    clippy::too_many_lines,
    reason = "one chart, drawn top to bottom: legend, two panels, bars, axis"
)]
pub(crate) fn per_worker(v: &Verdict) -> Option<String> {
    let cells: Vec<_> = v
        .cells
        .iter()
        .filter(|c| c.rate_vs_solo.is_some() || c.p99_vs_solo.is_some())
        .collect();
    if cells.is_empty() {
        return None;
    }
    let mut shapes: Vec<_> = cells.iter().map(|c| c.shape.clone()).collect();
    shapes.dedup();
    let used: Vec<usize> = {
        let mut u: Vec<usize> = cells.iter().map(|c| c.policy).collect();
        u.sort_unstable();
        u.dedup();
        u
    };
    let mut svg = Svg::new(WIDE, 460.0);
    legend(
        &mut svg,
        &used.iter().map(|i| &v.policies[*i]).collect::<Vec<_>>(),
        70.0,
        18.0,
        false,
    );
    let slots = shapes.len() as f64;
    let rate_hi = cells
        .iter()
        .filter_map(|c| c.rate_vs_solo)
        .fold(1.0f64, f64::max)
        * 1.08;
    let p99: Vec<f64> = cells.iter().filter_map(|c| c.p99_vs_solo).collect();
    let p99_lo = p99.iter().copied().fold(1.0f64, f64::min).min(1.0) * 0.8;
    let p99_hi = p99.iter().copied().fold(1.0f64, f64::max) * 1.3;
    let top = Panel {
        left: 70.0,
        top: 36.0,
        right: WIDE - 40.0,
        bottom: 196.0,
        x: Scale::Linear { lo: 0.0, hi: slots },
        y: Scale::Linear {
            lo: 0.0,
            hi: rate_hi,
        },
    };
    let bottom = Panel {
        top: 236.0,
        bottom: 396.0,
        y: Scale::Log {
            lo: p99_lo,
            hi: p99_hi,
        },
        ..top
    };
    top.y_axis(&mut svg, &nice_ticks(0.0, rate_hi, 4), &tick, "rate ÷ solo");
    svg.text(
        top.left,
        top.top - 4.0,
        "start",
        "panel-title",
        "samples/s per worker ÷ solo (higher is better)",
    );
    top.reference(&mut svg, 1.0, "solo");
    let ticks = log_ticks(p99_lo, p99_hi);
    bottom.y_axis(&mut svg, &ticks, &tick, "p99 ÷ solo (log)");
    svg.text(
        bottom.left,
        bottom.top - 4.0,
        "start",
        "panel-title",
        "group p99 batch latency ÷ solo p99 (lower is better)",
    );
    bottom.reference(&mut svg, 1.0, "solo");
    let slot = (top.right - top.left) / slots;
    for (i, shape) in shapes.iter().enumerate() {
        let here: Vec<_> = cells.iter().filter(|c| &c.shape == shape).collect();
        let bar = (slot * 0.8 / here.len().max(1) as f64).min(26.0);
        let x0 = top.px(i as f64 + 0.5) - bar * here.len() as f64 / 2.0;
        for (k, c) in here.iter().enumerate() {
            let p = &v.policies[c.policy];
            let x = x0 + bar * k as f64;
            let cohorts = if c.cohorts == 1 {
                String::new()
            } else {
                format!(", mean of {} cohorts", c.cohorts)
            };
            if let Some(r) = c.rate_vs_solo {
                let y = top.py(r);
                svg.rect(
                    x + 1.0,
                    y,
                    bar - 2.0,
                    top.bottom - y,
                    p.color,
                    &format!(
                        "{} {}: {} samples/s per worker = {}× solo{cohorts}",
                        shape.label(),
                        p.label,
                        num(c.rate),
                        num(r)
                    ),
                );
            }
            if let Some(r) = c.p99_vs_solo {
                let y = bottom.py(r);
                let y1 = bottom.py(p99_lo);
                svg.rect(
                    x + 1.0,
                    y,
                    bar - 2.0,
                    y1 - y,
                    p.color,
                    &format!(
                        "{} {}: p99 {} ms = {}× solo{cohorts}",
                        shape.label(),
                        p.label,
                        num(c.p99_ms),
                        num(r)
                    ),
                );
            }
        }
    }
    let labels: Vec<(f64, String)> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| (i as f64 + 0.5, s.short()))
        .collect();
    bottom.x_axis(
        &mut svg,
        &labels,
        "workers in the cohort (the group measured)",
    );
    Some(svg.finish("per-worker rate and p99 against solo, by shape and policy"))
}

/// Aggregate samples/s against worker count, one line per policy and a panel per workload
/// (homogeneous cohorts). `None` without any.
#[expect(
    clippy::too_many_lines,
    reason = "one chart, drawn top to bottom: gathering, legend, a panel per workload"
)]
pub(crate) fn scaling(c: &Comparison, v: &Verdict, ctx: &super::ReportContext) -> Option<String> {
    // workload -> policy -> count -> aggregates.
    let mut data: BTreeMap<Workload, BTreeMap<usize, BTreeMap<u32, Vec<f64>>>> = BTreeMap::new();
    for k in c.cohorts.iter().filter(|k| k.workload_mix.len() == 1) {
        let label = super::verdict::policy_label(ctx, k);
        let Some(pi) = v.policies.iter().position(|p| p.label == label) else {
            continue;
        };
        for (w, g) in &k.groups {
            data.entry(*w)
                .or_default()
                .entry(pi)
                .or_default()
                .entry(g.workers)
                .or_default()
                .push(g.aggregate_samples_per_s);
        }
    }
    if data.is_empty() {
        return None;
    }
    let mut svg = Svg::new(WIDE, 460.0);
    let mut used: Vec<usize> = data.values().flat_map(|m| m.keys().copied()).collect();
    used.sort_unstable();
    used.dedup();
    legend(
        &mut svg,
        &used.iter().map(|i| &v.policies[*i]).collect::<Vec<_>>(),
        70.0,
        18.0,
        true,
    );
    let panels = data.len() as f64;
    // Each panel keeps 70 px on its left for tick labels and the axis title, and 66 px on its
    // right for the reference line's label.
    let width = (WIDE - 70.0 - 66.0 - (panels - 1.0) * 136.0) / panels;
    for (i, (workload, by_policy)) in data.iter().enumerate() {
        let max_n = by_policy
            .values()
            .flat_map(|m| m.keys())
            .copied()
            .max()
            .unwrap_or(1);
        let solo = v.solo.get(workload).map(|s| s.0);
        let hi = by_policy
            .values()
            .flat_map(|m| m.values().flatten())
            .copied()
            .chain(solo)
            .fold(0.0f64, f64::max)
            .max(1.0)
            * 1.12;
        let left = 70.0 + i as f64 * (width + 136.0);
        let p = Panel {
            left,
            top: 56.0,
            right: left + width,
            bottom: 396.0,
            x: Scale::Linear {
                lo: 0.5,
                hi: f64::from(max_n) + 0.5,
            },
            y: Scale::Linear { lo: 0.0, hi },
        };
        p.y_axis(
            &mut svg,
            &nice_ticks(0.0, hi, 5),
            &tick,
            &format!("{workload} samples/s, all workers"),
        );
        svg.text(left, 46.0, "start", "panel-title", workload.as_str());
        if let Some(s) = solo {
            p.reference(&mut svg, s, "one alone");
        }
        let mut counts: Vec<u32> = by_policy.values().flat_map(|m| m.keys().copied()).collect();
        counts.sort_unstable();
        counts.dedup();
        p.x_axis(
            &mut svg,
            &counts
                .iter()
                .map(|n| (f64::from(*n), n.to_string()))
                .collect::<Vec<_>>(),
            &format!("{workload} workers"),
        );
        for (pi, by_count) in by_policy {
            let pol = &v.policies[*pi];
            let means: Vec<(f64, f64)> = by_count
                .iter()
                .map(|(n, vals)| (f64::from(*n), vals.iter().sum::<f64>() / vals.len() as f64))
                .collect();
            let across = pol.mode == Mode::Exclusive;
            svg.path(
                &means
                    .iter()
                    .map(|(x, y)| (p.px(*x), p.py(*y)))
                    .collect::<Vec<_>>(),
                pol.color,
                across,
                &format!(
                    "{}{}",
                    pol.label,
                    if across { " (one GPU per worker)" } else { "" }
                ),
            );
            for (n, vals) in by_count {
                for val in vals {
                    svg.dot(
                        p.px(f64::from(*n)),
                        p.py(*val),
                        3.5,
                        pol.color,
                        false,
                        &format!("{} {n} {workload}: {} samples/s", pol.label, num(*val)),
                    );
                }
            }
        }
    }
    Some(svg.finish("aggregate throughput against worker count, one line per policy"))
}

/// The rows of `rows` at the objective `(slo_ms, quantile)`.
fn at_objective(rows: &[super::CapacityRow], (slo, q): (f64, f64)) -> Vec<&super::CapacityRow> {
    rows.iter()
        .filter(|r| (r.slo_ms - slo).abs() < 1e-9 && (r.quantile - q).abs() < 1e-9)
        .collect()
}

fn policy_color<'a>(v: &'a Verdict, policy: &str) -> &'a str {
    v.policies
        .iter()
        .find(|q| q.label == policy)
        .map_or("#888", |q| q.color)
}

/// Requests per second each policy sustains at the objective, one chart per objective. Empty
/// without capacity rows.
pub(crate) fn capacity(v: &Verdict, rows: &[super::CapacityRow]) -> Vec<String> {
    objectives(rows)
        .into_iter()
        .map(|o| capacity_at(v, &at_objective(rows, o)))
        .collect()
}

fn capacity_at(v: &Verdict, rows: &[&super::CapacityRow]) -> String {
    let h = 60.0 + 30.0 * rows.len() as f64 + 40.0;
    let mut svg = Svg::new(WIDE, h);
    // The axis reaches a failing bound too, for a search that passed nothing (its label sits
    // at 0: `below 25`).
    let hi = rows
        .iter()
        .filter_map(|r| r.capacity_per_s.or(r.failed_above_per_s))
        .fold(1.0f64, f64::max)
        * 1.25;
    let p = Panel {
        left: 140.0,
        top: 30.0,
        right: WIDE - 20.0,
        bottom: h - 44.0,
        x: Scale::Linear { lo: 0.0, hi },
        y: Scale::Linear {
            lo: 0.0,
            hi: rows.len() as f64,
        },
    };
    svg.text(
        p.left,
        18.0,
        "start",
        "panel-title",
        &format!("capacity at {}", rows[0].objective),
    );
    let ticks: Vec<(f64, String)> = nice_ticks(0.0, hi, 5)
        .into_iter()
        .map(|t| (t, num(t)))
        .collect();
    for (t, _) in &ticks {
        svg.line((p.px(*t), p.top), (p.px(*t), p.bottom), "grid");
    }
    p.x_axis(
        &mut svg,
        &ticks,
        "requests/s per serve worker sustained at the objective",
    );
    let labels = search_labels(rows);
    for (i, (r, label)) in rows.iter().zip(&labels).enumerate() {
        let color = policy_color(v, &r.policy);
        let y = p.py(rows.len() as f64 - i as f64 - 0.5);
        svg.text(p.left - 8.0, y + 4.0, "end", "tick", label);
        let value = r.capacity_per_s.unwrap_or(0.0);
        let words = r.capacity_words();
        svg.rect(
            p.left,
            y - 9.0,
            p.px(value) - p.left,
            18.0,
            color,
            &format!("{label}: {words} requests/s ({}; stop: {})", r.note, r.stop),
        );
        svg.text(p.px(value) + 6.0, y + 4.0, "start", "tick", &words);
    }
    svg.finish(&format!(
        "serving capacity at {}, per policy",
        rows[0].objective
    ))
}

/// A bar's label per search: its policy, and where a policy has several searches, what tells
/// its search apart: the part of its cohort name the policy's other searches lack
/// (`exclusive-serve-llm1-capacity-eager-r1` beside `exclusive-serve-llm1-capacity-r1`:
/// `exclusive eager`), or its place among them outside a study (`timeslice #2`).
pub(crate) fn search_labels(rows: &[&super::CapacityRow]) -> Vec<String> {
    let stem = |r: &super::CapacityRow| -> String {
        let name = r
            .name
            .strip_prefix(&format!("{}-", r.policy))
            .unwrap_or(&r.name);
        match name.rsplit_once("-r") {
            Some((head, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
                head.to_owned()
            }
            _ => name.to_owned(),
        }
    };
    rows.iter()
        .map(|r| {
            let same: Vec<&&super::CapacityRow> =
                rows.iter().filter(|o| o.policy == r.policy).collect();
            if same.len() < 2 {
                return r.policy.clone();
            }
            if r.name.is_empty() {
                let k = same.iter().position(|o| std::ptr::eq(**o, *r)).unwrap_or(0);
                return format!("{} #{}", r.policy, k + 1);
            }
            // Words of this search's stem that are in no other search's of the policy.
            let others: Vec<String> = same
                .iter()
                .filter(|o| !std::ptr::eq(***o, *r))
                .map(|o| stem(o))
                .collect();
            let own = stem(r);
            let extra: Vec<&str> = own
                .split('-')
                .filter(|w| !others.iter().all(|o| o.split('-').any(|x| x == *w)))
                .collect();
            if extra.is_empty() {
                r.policy.clone()
            } else {
                format!("{} {}", r.policy, extra.join(" "))
            }
        })
        .collect()
}

/// Tick values of a log axis, thinned to 1 and 5 times powers of ten when 1, 2 and 5 would
/// crowd it.
fn sparse_log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let all = log_ticks(lo, hi);
    if all.len() <= 8 {
        return all;
    }
    all.into_iter()
        .filter(|t| {
            let m = t / 10f64.powf(t.log10().floor());
            (m - 1.0).abs() < 1e-6 || (m - 5.0).abs() < 1e-6
        })
        .collect()
}

/// The largest 1, 2 or 5 times a power of ten at or below `v` (positive), so that a log axis
/// starts on a tick.
fn log_floor(v: f64) -> f64 {
    let p = 10f64.powf(v.log10().floor());
    [5.0, 2.0, 1.0]
        .into_iter()
        .map(|m| m * p)
        .find(|t| *t <= v * (1.0 + 1e-9))
        .unwrap_or(p)
}

/// From what latency span the load curve's y axis is logarithmic.
const LOG_Y_SPAN: f64 = 10.0;

/// What a probe's point on the load curve is: its request latency at the quantile, or, on a
/// chart of `serve-llm` searches (`ttft`: no probe has a request latency), its TTFT there, the
/// objective the search's `slo_ms` carries (the TPOT is in the capacity table). One measure per
/// chart: a probe without a request latency in a search with serve workers is not drawn.
fn probe_ms(p: &super::CapacityPoint, ttft: bool) -> Option<f64> {
    if ttft {
        p.llm_ms.map(|(ttft, _)| ttft)
    } else {
        p.latency_ms
    }
}

/// Request latency at the objective's quantile against offered load, one chart per objective:
/// each policy's capacity probes joined in rate order (filled: the probe met the objective;
/// hollow: it missed), fixed-rate serve cohorts as squares, and the objective as a dashed line.
/// Empty without capacity rows.
pub(crate) fn load_curve(
    v: &Verdict,
    rows: &[super::CapacityRow],
    points: &[super::ServePoint],
) -> Vec<String> {
    objectives(rows)
        .into_iter()
        .map(|o| load_curve_at(v, &at_objective(rows, o), points, o))
        .collect()
}

#[expect(
    clippy::too_many_lines,
    reason = "one chart, drawn top to bottom: ranges, legend, axes, objective, curves, points"
)]
fn load_curve_at(
    v: &Verdict,
    rows: &[&super::CapacityRow],
    points: &[super::ServePoint],
    (slo, q): (f64, f64),
) -> String {
    let objective = &rows[0].objective;
    let quantile = super::quantile_words(q);
    // Fixed-rate cohorts that measured this quantile.
    let fixed: Vec<(&super::ServePoint, f64)> = points
        .iter()
        .filter_map(|p| p.latency_at(q).map(|ms| (p, ms)))
        .filter(|(p, ms)| p.offered_per_s > 0.0 && *ms > 0.0)
        .collect();
    // A chart of `serve-llm` searches only plots time to first token.
    let ttft = rows
        .iter()
        .flat_map(|r| r.probes.iter())
        .all(|p| p.latency_ms.is_none())
        && rows
            .iter()
            .flat_map(|r| r.probes.iter())
            .any(|p| p.llm_ms.is_some());
    let probe_pts = || {
        rows.iter()
            .flat_map(|r| r.probes.iter())
            .filter_map(|p| probe_ms(p, ttft).map(|ms| (p.rate_per_s, ms)))
            .filter(|(r, ms)| *r > 0.0 && *ms > 0.0)
    };
    let measure = if ttft { "TTFT" } else { "request latency" };
    let xs: Vec<f64> = probe_pts()
        .map(|p| p.0)
        .chain(fixed.iter().map(|(p, _)| p.offered_per_s))
        .collect();
    let ys: Vec<f64> = probe_pts()
        .map(|p| p.1)
        .chain(fixed.iter().map(|(_, ms)| *ms))
        .chain([slo])
        .collect();
    let (x_min, x_max) = (
        xs.iter().copied().fold(f64::INFINITY, f64::min),
        xs.iter().copied().fold(0.0f64, f64::max),
    );
    let (x_lo, x_hi) = if xs.is_empty() {
        (1.0, 10.0)
    } else {
        (x_min / 1.5, x_max * 1.5)
    };
    let (y_min, y_max) = (
        ys.iter().copied().fold(f64::INFINITY, f64::min),
        ys.iter().copied().fold(0.0f64, f64::max),
    );
    let log_y = y_max / y_min > LOG_Y_SPAN;
    let y = if log_y {
        Scale::Log {
            lo: log_floor(y_min / 1.3),
            hi: y_max * 1.4,
        }
    } else {
        Scale::Linear {
            lo: 0.0,
            hi: y_max * 1.15,
        }
    };
    let (width, height) = (WIDE, 420.0);
    let mut svg = Svg::new(width, height);
    let p = Panel {
        left: 70.0,
        top: 62.0,
        // Room on the right for the objective's value.
        right: width - 48.0,
        bottom: height - 50.0,
        x: Scale::Log { lo: x_lo, hi: x_hi },
        y,
    };
    let mut used: Vec<&Policy> = Vec::new();
    for label in rows
        .iter()
        .map(|r| r.policy.as_str())
        .chain(fixed.iter().map(|(f, _)| f.policy.as_str()))
    {
        if let Some(pol) = v.policies.iter().find(|x| x.label == label)
            && !used.contains(&pol)
        {
            used.push(pol);
        }
    }
    legend(&mut svg, &used, 70.0, 18.0, true);
    svg.line((70.0, 34.0), (88.0, 34.0), "ref");
    svg.text(
        92.0,
        38.0,
        "start",
        "legend",
        &format!(
            "objective {objective} · ● met · ○ missed{}",
            if fixed.is_empty() {
                ""
            } else {
                " · ■ fixed-rate cohort"
            }
        ),
    );
    let y_ticks = match y {
        Scale::Log { lo, hi } => sparse_log_ticks(lo, hi),
        Scale::Linear { lo, hi } => nice_ticks(lo, hi, 5),
    };
    p.y_axis(
        &mut svg,
        &y_ticks,
        &tick,
        &format!(
            "{measure} {quantile}, ms{}",
            if log_y { " (log)" } else { "" }
        ),
    );
    let x_ticks: Vec<(f64, String)> = sparse_log_ticks(x_lo, x_hi)
        .into_iter()
        .map(|t| (t, tick(t)))
        .collect();
    for (t, _) in &x_ticks {
        svg.line((p.px(*t), p.top), (p.px(*t), p.bottom), "grid");
    }
    p.x_axis(
        &mut svg,
        &x_ticks,
        "offered load, requests/s per serve worker (log)",
    );
    // The objective: a dashed line, its value just outside the panel's right end where no
    // probe can cover it, its words in the legend.
    p.reference(&mut svg, slo, &format!("{} ms", super::svg::rate(slo)));
    for r in rows {
        let color = policy_color(v, &r.policy);
        let mut pts: Vec<(f64, f64, &super::CapacityPoint)> = r
            .probes
            .iter()
            .filter_map(|pr| probe_ms(pr, ttft).map(|ms| (pr.rate_per_s, ms, pr)))
            .filter(|(rate, ms, _)| *rate > 0.0 && *ms > 0.0)
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        svg.path(
            &pts.iter()
                .map(|(x, y, _)| (p.px(*x), p.py(*y)))
                .collect::<Vec<_>>(),
            color,
            false,
            &format!(
                "{}: capacity {} requests/s at {objective}",
                r.policy,
                r.capacity_words()
            ),
        );
        for (rate, ms, pr) in &pts {
            let verdict = match pr.passed {
                Some(true) => "meets the objective",
                Some(false) => "misses the objective",
                None => "cohort did not complete",
            };
            svg.dot(
                p.px(*rate),
                p.py(*ms),
                4.0,
                color,
                pr.passed != Some(true),
                &format!(
                    "{}: {} requests/s, {}{quantile} {} ms, {verdict}{}",
                    r.policy,
                    super::svg::rate(*rate),
                    if ttft { "TTFT " } else { "" },
                    num(*ms),
                    if pr.overloaded {
                        " (overloaded: a lower bound)"
                    } else {
                        ""
                    }
                ),
            );
        }
    }
    for (f, ms) in &fixed {
        let color = policy_color(v, &f.policy);
        let meets = *ms <= slo && !f.overloaded;
        svg.square(
            p.px(f.offered_per_s),
            p.py(*ms),
            8.0,
            color,
            !meets,
            &format!(
                "{} (fixed rate, {}): {} requests/s offered, {quantile} {} ms{}",
                f.policy,
                f.experiment,
                num(f.offered_per_s),
                num(*ms),
                if f.overloaded { ", overloaded" } else { "" }
            ),
        );
    }
    svg.finish(&format!(
        "{measure} against offered load, objective {objective}"
    ))
}

/// One line of a percentile plot: its label, dashed or not, its colour, its points.
type Line<'a> = (String, bool, &'a str, Vec<(f64, f64)>);

/// x of percentile `p` (0 to 1) on the tail axis: `-log10(1 - p)`.
fn tail_x(p: f64) -> f64 {
    -(1.0 - p).max(1e-9).log10()
}

/// The points of one worker's percentile line: from the CDF (0 to 99 %), then p99.9 and p99.99
/// where its batch count supports them, then the slowest batch at its own rank `1 - 1/n`.
fn tail_points(
    cdf: &[f64],
    latency: Option<&coload_cohort_schema::LatencyMs>,
    batches: Option<u64>,
) -> Vec<(f64, f64)> {
    let mut pts: Vec<(f64, f64)> = cdf
        .iter()
        .enumerate()
        .take(100)
        .map(|(k, ms)| (tail_x(k as f64 / 100.0), *ms))
        .collect();
    if let (Some(l), Some(n)) = (latency, batches) {
        if n >= 1000 {
            pts.push((3.0, l.p999));
        }
        if let (true, Some(p)) = (n >= 10_000, l.p9999) {
            pts.push((4.0, p));
        }
        let x_max = (n as f64).log10();
        if x_max > pts.last().map_or(0.0, |p| p.0) + 1e-9 {
            pts.push((x_max.min(5.0), l.max));
        }
    } else if let Some(max) = cdf.get(100) {
        pts.push((2.3, *max));
    }
    pts
}

/// One cohort's latency by percentile, one line per worker (dashed for inference), with the
/// solo workers' lines in grey for reference.
pub(crate) fn percentiles(
    k: &CohortComparison,
    color: &str,
    solo: &[(Workload, &CohortComparison)],
) -> String {
    let (width, height) = (560.0, 300.0);
    let mut svg = Svg::new(width, height);
    let mut lines: Vec<Line<'_>> = Vec::new();
    for (workload, solo_k) in solo {
        if !k.groups.contains_key(workload) || solo_k.experiment == k.experiment {
            continue;
        }
        if let Some(sw) = solo_k
            .groups
            .get(workload)
            .and_then(|g| g.per_worker.first())
        {
            lines.push((
                format!("solo {workload}"),
                *workload == Workload::Infer,
                "#9a9a9a",
                tail_points(&sw.latency_cdf_ms, sw.latency_ms.as_ref(), sw.batches),
            ));
        }
    }
    for (workload, g) in &k.groups {
        for wk in &g.per_worker {
            lines.push((
                format!("replica {} ({workload})", wk.replica),
                *workload == Workload::Infer,
                color,
                tail_points(&wk.latency_cdf_ms, wk.latency_ms.as_ref(), wk.batches),
            ));
        }
    }
    let hi = lines
        .iter()
        .flat_map(|l| l.3.iter().map(|p| p.1))
        .fold(0.0f64, f64::max)
        .max(1e-3)
        * 1.08;
    let x_hi = lines
        .iter()
        .flat_map(|l| l.3.iter().map(|p| p.0))
        .fold(2.0f64, f64::max)
        + 0.25;
    let p = Panel {
        left: 64.0,
        top: 30.0,
        right: width - 16.0,
        bottom: height - 50.0,
        x: Scale::Linear { lo: 0.0, hi: x_hi },
        y: Scale::Linear { lo: 0.0, hi },
    };
    p.y_axis(
        &mut svg,
        &nice_ticks(0.0, hi, 4),
        &tick,
        "batch latency, ms",
    );
    let ticks: Vec<(f64, String)> = [
        (0.5, "50%"),
        (0.9, "90%"),
        (0.99, "99%"),
        (0.999, "99.9%"),
        (0.9999, "99.99%"),
        (0.99999, "99.999%"),
    ]
    .iter()
    .map(|(q, name)| (tail_x(*q), (*name).to_owned()))
    .filter(|(x, _)| *x <= x_hi)
    .collect();
    for (x, _) in &ticks {
        svg.line((p.px(*x), p.top), (p.px(*x), p.bottom), "grid");
    }
    p.x_axis(&mut svg, &ticks, "percentile (log scale of 1 / (1 - p))");
    let mut lx = p.left;
    let mut shown_solo = false;
    for (label, dash, c, pts) in &lines {
        let px: Vec<(f64, f64)> = pts.iter().map(|(x, y)| (p.px(*x), p.py(*y))).collect();
        svg.path(&px, c, *dash, label);
        if let Some(last) = pts.last() {
            svg.dot(
                p.px(last.0),
                p.py(last.1),
                2.5,
                c,
                true,
                &format!("{label}: slowest batch {} ms", num(last.1)),
            );
        }
        if label.starts_with("solo") && !shown_solo {
            shown_solo = true;
        }
    }
    lx = svg.legend_item(lx, 18.0, color, true, &k.mode.to_string());
    if k.groups.contains_key(&Workload::Infer) {
        svg.text(lx, 18.0, "start", "legend", "dashed: inference");
        lx += 140.0;
    }
    if shown_solo {
        svg.legend_item(lx, 18.0, "#9a9a9a", true, "alone (baseline)");
    }
    svg.finish(&format!("latency by percentile, cohort {}", k.experiment))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_axis_starts_on_a_tick_and_thins_its_ticks_over_many_decades() {
        assert!((log_floor(2.01) - 2.0).abs() < 1e-12);
        assert!((log_floor(4.9) - 2.0).abs() < 1e-12);
        assert!((log_floor(10.0) - 10.0).abs() < 1e-12);
        assert!((log_floor(999.0) - 500.0).abs() < 1e-9);
        assert_eq!(sparse_log_ticks(2.0, 40.0), [2.0, 5.0, 10.0, 20.0]);
        // 25 to 16,000 requests/s: 1, 2, 5 would be ten labels; 1 and 5 are six.
        assert_eq!(
            sparse_log_ticks(16.0, 24_000.0),
            [50.0, 100.0, 500.0, 1000.0, 5000.0, 10_000.0]
        );
    }
}
