//! What one cohort's summary says for people: a plain-text report for a terminal
//! ([`render_table`]) and a Markdown [`Document`] ([`render_markdown`]).

use std::fmt::Write as _;

use coload_cohort_schema::{CohortSummary, LatencyMs, Workload};

use super::decode::{DECODE_NOTE, decode_table};
use super::document::{Document, Table, f2, f3, gib, group_label, mix};
use super::markdown::markdown;
use super::serve::{SERVE_NOTE, overload_lines, serve_table};
use super::serve_llm::{SERVE_LLM_NOTE, llm_overload_lines, serve_llm_table};
use super::text::columns;

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

/// The summary's tables: workers, groups, devices, and the share each worker saw (when any
/// recorded one).
struct Tables {
    workers: Table,
    groups: Table,
    devices: Table,
    share: Option<Table>,
}

/// What each worker's CUDA runtime reported against the declared share.
fn share_table(s: &CohortSummary) -> Option<Table> {
    if s.workers.iter().all(|w| w.share.is_none()) {
        return None;
    }
    let mut t = Table::new(&[
        "replica",
        "declared",
        "free at start GiB",
        "total GiB",
        "SMs",
        "physical SMs",
    ]);
    for w in &s.workers {
        let share = w.share.as_ref();
        let observed = share.and_then(|x| x.observed.as_ref());
        let count = |n: Option<u32>| n.map_or_else(|| "-".to_owned(), |n| n.to_string());
        t.row(vec![
            w.replica.to_string(),
            share.and_then(|x| x.declared.as_ref()).map_or_else(
                || "-".to_owned(),
                coload_cohort_schema::DeclaredShare::describe,
            ),
            gib(observed.map(|o| o.memory_free_bytes)),
            gib(observed.map(|o| o.memory_total_bytes)),
            count(observed.and_then(|o| o.sm_count)),
            count(observed.and_then(|o| o.physical_sm_count)),
        ]);
    }
    Some(t)
}

fn tables(s: &CohortSummary) -> Tables {
    let mut header = vec![
        "replica",
        "workload",
        "model",
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
            w.model.clone().unwrap_or_else(|| "-".to_owned()),
            w.batches.to_string(),
            w.samples.to_string(),
            f2(w.samples_per_s),
            f3(w.overlap_fraction),
        ];
        if w.workload == Workload::Hog {
            // A hog's "batches" are hold intervals: no latency to show.
            cells.extend(std::iter::repeat_n("-".to_owned(), LATENCY_HEADER.len()));
        } else {
            cells.extend(latency_cells(&w.latency_ms));
        }
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
            group_label(*workload, g.model.as_deref()),
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
            gib(d.headroom_bytes),
        ]);
    }
    Tables {
        workers,
        groups,
        devices,
        share: share_table(s),
    }
}

fn share_line(s: &CohortSummary) -> Option<String> {
    s.share
        .as_ref()
        .map(|d| format!("MPS share: {}", d.describe()))
}

/// `model resnet18, eager`, or per group in a mixed cohort that declared one model per
/// workload: `models train resnet50, infer resnet18, cuda-graph`.
pub(crate) fn model_line(s: &CohortSummary) -> String {
    let models: std::collections::BTreeSet<&str> = s
        .groups
        .values()
        .filter_map(|g| g.model.as_deref())
        .collect();
    let execution = s.config.execution;
    if models.len() > 1 {
        let per_group: Vec<String> = s
            .groups
            .iter()
            .filter_map(|(w, g)| Some(format!("{w} {}", g.model.as_deref()?)))
            .collect();
        format!("models {}, {execution}", per_group.join(", "))
    } else {
        let model = models
            .into_iter()
            .next()
            .map_or_else(|| s.config.model_label(), str::to_owned);
        format!("model {model}, {execution}")
    }
}

/// The cohort's mode, with the time-slice interval it declared (`timeslice, time slice short`).
pub(crate) fn mode_text(s: &CohortSummary) -> String {
    match s.config.timeslice_interval {
        Some(interval) => format!("{}, time slice {interval}", s.mode),
        None => s.mode.to_string(),
    }
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
    let t = tables(s);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "experiment {} · mode {} · {} workers ({}) · {} · common interval {:.3} s",
        s.experiment,
        mode_text(s),
        s.count,
        mix(&s.workload_mix),
        model_line(s),
        s.common_interval.seconds
    );
    let _ = writeln!(out, "{}", placement_line(s));
    if let Some(line) = share_line(s) {
        let _ = writeln!(out, "{line}");
    }
    out.push('\n');
    out.push_str(&columns(&t.workers));
    if let Some(serve) = serve_table(s) {
        out.push_str("\nrequests (serve workers):\n");
        out.push_str(&columns(&serve));
        let _ = writeln!(out, "{SERVE_NOTE}");
        for line in overload_lines(s) {
            let _ = writeln!(out, "{line}");
        }
    }
    if let Some(decode) = decode_table(s) {
        out.push_str("\ntokens (decode workers):\n");
        out.push_str(&columns(&decode));
        let _ = writeln!(out, "{DECODE_NOTE}");
    }
    if let Some(llm) = serve_llm_table(s) {
        out.push_str("\nrequests (serve-llm workers):\n");
        out.push_str(&columns(&llm));
        let _ = writeln!(out, "{SERVE_LLM_NOTE}");
        for line in llm_overload_lines(s) {
            let _ = writeln!(out, "{line}");
        }
    }
    out.push('\n');
    out.push_str(&columns(&t.groups));
    if !s.colocation.devices.is_empty() {
        out.push('\n');
        out.push_str(&columns(&t.devices));
    }
    if let Some(share) = &t.share {
        out.push('\n');
        out.push_str(&columns(share));
    }
    if let Some(isolation) = &s.isolation {
        out.push('\n');
        out.push_str(&super::isolation::render_isolation_table(
            std::slice::from_ref(isolation),
        ));
    }
    if let Some((gpm, energy)) = super::why::summary_activity(s) {
        out.push_str("\nGPU activity (NVML GPM, device-wide unless scope mig):\n");
        if let Some(t) = gpm {
            out.push_str(&columns(&t));
        }
        if let Some(e) = energy {
            let _ = writeln!(out, "{e}");
        }
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
    // The header's experiment id and model names come from recorded files.
    coload_cohort_schema::text::escaped_lines(&out).into_owned()
}

/// The summary's document: the cohort, its placement, workers, groups, device memory, warnings
/// and caveats.
fn document(s: &CohortSummary) -> Document {
    let t = tables(s);
    let mut doc = Document::default();
    doc.heading(1, format!("Cohort `{}`", s.experiment));
    doc.para(format!(
        "Mode **{}**, {} workers ({}), {}, common interval {:.3} s.",
        mode_text(s),
        s.count,
        mix(&s.workload_mix),
        model_line(s),
        s.common_interval.seconds
    ));
    doc.para(placement_line(s));
    if let Some(line) = share_line(s) {
        doc.para(line);
    }
    doc.heading(2, "Workers");
    doc.table(t.workers);
    if let Some(serve) = serve_table(s) {
        doc.heading(2, "Requests (serve workers)");
        doc.table(serve);
        doc.para(format!("{SERVE_NOTE}."));
        let lines = overload_lines(s);
        if !lines.is_empty() {
            doc.list(lines);
        }
    }
    if let Some(decode) = decode_table(s) {
        doc.heading(2, "Tokens (decode workers)");
        doc.table(decode);
        doc.para(format!("{DECODE_NOTE}."));
    }
    if let Some(llm) = serve_llm_table(s) {
        doc.heading(2, "Requests (serve-llm workers)");
        doc.table(llm);
        doc.para(format!("{SERVE_LLM_NOTE}."));
        let lines = llm_overload_lines(s);
        if !lines.is_empty() {
            doc.list(lines);
        }
    }
    doc.heading(2, "Groups");
    doc.para("Training and inference are never added together.");
    doc.table(t.groups);
    if !s.colocation.devices.is_empty() {
        doc.heading(2, "Device memory");
        doc.table(t.devices);
    }
    if let Some(share) = t.share {
        doc.heading(2, "Share each worker saw");
        doc.para(
            "Free and total memory as cudaMemGetInfo reported them before the worker allocated \
             anything, and the SM count the runtime reported: under an MPS share, the limits \
             applied.",
        );
        doc.table(share);
    }
    if let Some(isolation) = &s.isolation {
        super::isolation::section(&mut doc, 2, isolation);
    }
    if let Some((gpm, energy)) = super::why::summary_activity(s) {
        doc.heading(2, "GPU activity");
        doc.para("NVML GPM over the common interval, device-wide unless scope `mig`.");
        if let Some(t) = gpm {
            doc.table(t);
        }
        if let Some(e) = energy {
            doc.para(e);
        }
    }
    doc.warnings_and_caveats(
        s.warnings
            .iter()
            .map(|w| format!("`{}`: {}", w.kind, w.message))
            .collect(),
        &s.caveats,
    );
    doc
}

/// The summary as a Markdown document.
#[must_use]
pub fn render_markdown(s: &CohortSummary) -> String {
    markdown(&document(s))
}
