//! Human-readable renderings of a [`CohortSummary`]: a plain-text table and Markdown.

use std::fmt::Write as _;

use coload_cohort_schema::{CohortSummary, LatencyMs};

/// Bytes per GiB, for memory figures people read.
const BYTES_PER_GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// A table of right-aligned cells (the first column left-aligned).
pub(crate) struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub(crate) fn new(header: &[&str]) -> Self {
        Table {
            header: header.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    pub(crate) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    fn widths(&self) -> Vec<usize> {
        let mut w: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate() {
                if let Some(x) = w.get_mut(i) {
                    *x = (*x).max(c.chars().count());
                }
            }
        }
        w
    }

    pub(crate) fn plain(&self) -> String {
        let w = self.widths();
        let line = |cells: &[String]| {
            let s: Vec<String> = cells
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let width = w.get(i).copied().unwrap_or(0);
                    if i == 0 {
                        format!("{c:<width$}")
                    } else {
                        format!("{c:>width$}")
                    }
                })
                .collect();
            s.join("  ").trim_end().to_owned()
        };
        let mut out = line(&self.header);
        out.push('\n');
        for r in &self.rows {
            out.push_str(&line(r));
            out.push('\n');
        }
        out
    }

    pub(crate) fn html(&self) -> String {
        let mut out = String::from("<table>\n<thead><tr>");
        for h in &self.header {
            let _ = write!(out, "<th>{}</th>", escape_html(h));
        }
        out.push_str("</tr></thead>\n<tbody>\n");
        for r in &self.rows {
            out.push_str("<tr>");
            for c in r {
                let _ = write!(out, "<td>{}</td>", escape_html(c));
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</tbody>\n</table>\n");
        out
    }

    pub(crate) fn markdown(&self) -> String {
        let mut out = format!("| {} |\n", self.header.join(" | "));
        let sep: Vec<&str> = (0..self.header.len())
            .map(|i| if i == 0 { "---" } else { "---:" })
            .collect();
        let _ = writeln!(out, "| {} |", sep.join(" | "));
        for r in &self.rows {
            let _ = writeln!(out, "| {} |", r.join(" | "));
        }
        out
    }
}

/// Escapes text for HTML element content and attribute values.
pub(crate) fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(ch),
        }
    }
    out
}

pub(crate) fn f2(x: f64) -> String {
    format!("{x:.2}")
}

pub(crate) fn f3(x: f64) -> String {
    format!("{x:.3}")
}

fn gib(bytes: Option<u64>) -> String {
    bytes.map_or_else(
        || "-".to_owned(),
        |b| format!("{:.2}", b as f64 / BYTES_PER_GIB),
    )
}

fn gib_signed(bytes: Option<i64>) -> String {
    bytes.map_or_else(
        || "-".to_owned(),
        |b| format!("{:.2}", b as f64 / BYTES_PER_GIB),
    )
}

fn latency_cells(l: &LatencyMs) -> Vec<String> {
    [l.p50, l.p90, l.p99, l.p999, l.mean, l.stddev, l.max]
        .into_iter()
        .map(f3)
        .collect()
}

const LATENCY_HEADER: [&str; 7] = [
    "p50 ms",
    "p90 ms",
    "p99 ms",
    "p99.9 ms",
    "mean ms",
    "stddev ms",
    "max ms",
];

fn tables(s: &CohortSummary) -> (Table, Table, Table) {
    let mut header = vec![
        "replica",
        "workload",
        "batches",
        "samples",
        "samples/s",
        "overlap",
    ];
    header.extend(LATENCY_HEADER);
    header.push("peak GiB");
    let mut workers = Table::new(&header);
    for w in &s.workers {
        let mut cells = vec![
            w.replica.to_string(),
            w.workload.to_string(),
            w.batches.to_string(),
            w.samples.to_string(),
            f2(w.samples_per_s),
            f3(w.overlap_fraction),
        ];
        cells.extend(latency_cells(&w.latency_ms));
        cells.push(gib(w.peak_device_bytes));
        workers.row(cells);
    }

    let mut header = vec![
        "group",
        "workers",
        "aggregate samples/s",
        "min samples/s",
        "mean samples/s",
        "max samples/s",
        "jain",
    ];
    header.extend(LATENCY_HEADER);
    let mut groups = Table::new(&header);
    for (workload, g) in &s.groups {
        let mut cells = vec![
            workload.to_string(),
            g.workers.to_string(),
            f2(g.aggregate_samples_per_s),
            f2(g.per_worker_samples_per_s.min),
            f2(g.per_worker_samples_per_s.mean),
            f2(g.per_worker_samples_per_s.max),
            format!("{:.4}", g.jain_fairness),
        ];
        cells.extend(latency_cells(&g.latency_ms));
        groups.row(cells);
    }

    let mut devices = Table::new(&[
        "device",
        "replicas",
        "memory GiB",
        "peak sum GiB",
        "headroom GiB",
    ]);
    for d in &s.colocation.devices {
        let ids: Vec<String> = d.replicas.iter().map(ToString::to_string).collect();
        devices.row(vec![
            d.device.clone(),
            ids.join(","),
            gib(d.memory_total_bytes),
            gib(d.peak_sum_bytes),
            gib_signed(d.headroom_bytes),
        ]);
    }
    (workers, groups, devices)
}

fn opt_ms(x: Option<f64>) -> String {
    x.map_or_else(|| "-".to_owned(), f3)
}

/// The serve workers' request figures, when the cohort has any.
fn serve_table(s: &CohortSummary) -> Option<Table> {
    let mut t = Table::new(&[
        "replica",
        "requests",
        "offered/s",
        "completed/s",
        "not done",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "p99.9 ms",
        "max ms",
        "queue p99 ms",
        "service p99 ms",
        "mean batch",
        "SLO",
        "verdict",
    ]);
    let mut any = false;
    for w in &s.workers {
        let Some(v) = &w.serve else { continue };
        any = true;
        let slo = v.slo.map_or_else(
            || "-".to_owned(),
            |a| {
                let verdict = if a.meets {
                    "met".to_owned()
                } else if !a.percentile_met {
                    "missed".to_owned()
                } else if v.overloaded {
                    "missed: overloaded".to_owned()
                } else {
                    format!(
                        "not shown: needs {} requests",
                        a.early_stopping_requests_needed
                    )
                };
                format!(
                    "{} ms at p{}: {:.2} % ({verdict})",
                    a.slo_ms,
                    a.quantile * 100.0,
                    a.attainment * 100.0,
                )
            },
        );
        t.row(vec![
            w.replica.to_string(),
            v.requests.to_string(),
            f2(v.offered_per_s),
            f2(v.completed_per_s),
            v.not_completed.to_string(),
            opt_ms(v.latency_ms.p50),
            opt_ms(v.latency_ms.p90),
            opt_ms(v.latency_ms.p99),
            opt_ms(v.latency_ms.p999),
            opt_ms(v.latency_ms.max),
            opt_ms(v.queueing_ms.p99),
            opt_ms(v.service_ms.p99),
            f2(v.mean_batch_size),
            slo,
            if v.overloaded {
                "OVERLOADED (percentiles are lower bounds)".to_owned()
            } else {
                "ok".to_owned()
            },
        ]);
    }
    any.then_some(t)
}

/// Why each overloaded serve worker is judged so.
fn overload_lines(s: &CohortSummary) -> Vec<String> {
    s.workers
        .iter()
        .filter_map(|w| w.serve.as_ref().map(|v| (w.replica, v)))
        .flat_map(|(r, v)| {
            v.overload_reasons
                .iter()
                .map(move |reason| format!("replica {r} overloaded: {reason}"))
        })
        .collect()
}

/// What the request columns mean, printed under the table.
const SERVE_NOTE: &str = "request latency = completion - scheduled arrival (queueing + \
     service); - = the percentile falls on a request still queued or running at the end";

fn mix(s: &CohortSummary) -> String {
    s.workload_mix
        .iter()
        .map(|(w, n)| format!("{n} {w}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn placement_line(s: &CohortSummary) -> String {
    let flag = if s.colocation.fits_mode == Some(false) {
        "MISMATCH: "
    } else {
        ""
    };
    format!("placement: {flag}{}", s.colocation.explanation)
}

/// The summary as a plain-text report for a terminal: a header, the workers, the groups, the
/// devices, the warnings and the caveats.
#[must_use]
pub fn render_table(s: &CohortSummary) -> String {
    let (workers, groups, devices) = tables(s);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "experiment {} · mode {} · {} workers ({}) · common interval {:.3} s",
        s.experiment,
        s.mode,
        s.count,
        mix(s),
        s.common_interval.seconds
    );
    let _ = writeln!(out, "{}", placement_line(s));
    out.push('\n');
    out.push_str(&workers.plain());
    if let Some(serve) = serve_table(s) {
        out.push_str("\nrequests (serve workers):\n");
        out.push_str(&serve.plain());
        let _ = writeln!(out, "{SERVE_NOTE}");
        for line in overload_lines(s) {
            let _ = writeln!(out, "{line}");
        }
    }
    out.push('\n');
    out.push_str(&groups.plain());
    if !s.colocation.devices.is_empty() {
        out.push('\n');
        out.push_str(&devices.plain());
    }
    if !s.warnings.is_empty() {
        out.push_str("\nwarnings:\n");
        for w in &s.warnings {
            let _ = writeln!(out, "  - [{}] {}", w.kind, w.message);
        }
    }
    out.push_str("\ncaveats:\n");
    for c in &s.caveats {
        let _ = writeln!(out, "  - {c}");
    }
    out
}

/// The summary as a Markdown document.
#[must_use]
pub fn render_markdown(s: &CohortSummary) -> String {
    let (workers, groups, devices) = tables(s);
    let mut out = String::new();
    let _ = writeln!(out, "# Cohort `{}`\n", s.experiment);
    let _ = writeln!(
        out,
        "Mode **{}**, {} workers ({}), common interval {:.3} s.\n",
        s.mode,
        s.count,
        mix(s),
        s.common_interval.seconds
    );
    let _ = writeln!(out, "{}\n", placement_line(s));
    out.push_str("## Workers\n\n");
    out.push_str(&workers.markdown());
    if let Some(serve) = serve_table(s) {
        out.push_str("\n## Requests (serve workers)\n\n");
        out.push_str(&serve.markdown());
        let _ = writeln!(out, "\n{SERVE_NOTE}.");
        for line in overload_lines(s) {
            let _ = writeln!(out, "\n- {line}");
        }
    }
    out.push_str("\n## Groups\n\nTraining and inference are never added together.\n\n");
    out.push_str(&groups.markdown());
    if !s.colocation.devices.is_empty() {
        out.push_str("\n## Device memory\n\n");
        out.push_str(&devices.markdown());
    }
    if !s.warnings.is_empty() {
        out.push_str("\n## Warnings\n\n");
        for w in &s.warnings {
            let _ = writeln!(out, "- `{}`: {}", w.kind, w.message);
        }
    }
    out.push_str("\n## Caveats\n\n");
    for c in &s.caveats {
        let _ = writeln!(out, "- {c}");
    }
    out
}
