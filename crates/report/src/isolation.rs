//! What a hog cohort's isolation result says for people: one overview row per
//! cohort (so that several modes read side by side), then each cohort's workers: who failed, at
//! what allocation, with what error.

use std::fmt::Write as _;

use coload_cohort_schema::{IsolationResult, Status, TenantOutcome};

use super::document::{Document, Table, gib};
use super::markdown::markdown;
use super::text::columns;

fn share_text(r: &IsolationResult) -> String {
    r.share.as_ref().map_or_else(
        || "-".to_owned(),
        coload_cohort_schema::DeclaredShare::describe,
    )
}

fn overview(results: &[IsolationResult]) -> Table {
    let mut t = Table::new(&[
        "cohort",
        "mode",
        "share",
        "outcome",
        "hog held GiB",
        "others complete",
        "others out of memory",
    ]);
    for r in results {
        let held: u64 = r
            .workers
            .iter()
            .filter_map(|w| w.hog.as_ref())
            .map(|h| h.granted_bytes)
            .sum();
        let others: Vec<&TenantOutcome> = r
            .workers
            .iter()
            .filter(|w| w.workload != coload_cohort_schema::Workload::Hog)
            .collect();
        let complete = others
            .iter()
            .filter(|w| w.status == Status::Complete)
            .count();
        let oom = others
            .iter()
            .filter(|w| w.kind == Some(coload_cohort_schema::FailureKind::OutOfMemory))
            .count();
        t.row(vec![
            r.experiment.clone(),
            r.mode.to_string(),
            share_text(r),
            r.outcome.as_str().to_owned(),
            gib(Some(held)),
            format!("{complete}/{}", others.len()),
            format!("{oom}/{}", others.len()),
        ]);
    }
    t
}

fn workers(r: &IsolationResult) -> Table {
    let mut t = Table::new(&[
        "replica",
        "workload",
        "status",
        "stage",
        "kind",
        "free at start GiB",
        "refused",
        "held GiB",
        "peak GiB",
    ]);
    for w in &r.workers {
        t.row(vec![
            w.replica.to_string(),
            w.workload.to_string(),
            format!("{:?}", w.status).to_lowercase(),
            w.stage.map_or_else(|| "-".to_owned(), |s| s.to_string()),
            w.kind
                .as_ref()
                .map_or_else(|| "-".to_owned(), ToString::to_string),
            gib(w.memory_free_at_start_bytes),
            w.refused_allocation
                .clone()
                .unwrap_or_else(|| "-".to_owned()),
            gib(w.hog.as_ref().map(|h| h.granted_bytes)),
            gib(w.peak_device_bytes),
        ]);
    }
    t
}

fn messages(r: &IsolationResult) -> Vec<String> {
    r.workers
        .iter()
        .filter_map(|w| {
            w.message
                .as_ref()
                .map(|m| format!("replica {} ({}): {m}", w.replica, w.workload))
        })
        .collect()
}

/// Appends one cohort's result to `doc` under a heading of `level`.
pub(crate) fn section(doc: &mut Document, level: usize, r: &IsolationResult) {
    doc.heading(level, format!("Memory isolation: {}", r.outcome.as_str()));
    let share = r.share.as_ref().map_or_else(
        || "none declared".to_owned(),
        coload_cohort_schema::DeclaredShare::describe,
    );
    let mut explanation = r.explanation.clone();
    if let Some(first) = explanation.get(..1) {
        explanation.replace_range(..1, &first.to_uppercase());
    }
    doc.para(format!(
        "Mode **{}**, share: {share}. {explanation}.",
        r.mode
    ));
    doc.table(workers(r));
    let m = messages(r);
    if !m.is_empty() {
        doc.list(m);
    }
}

fn document(results: &[IsolationResult]) -> Document {
    let mut doc = Document::default();
    doc.heading(1, "Memory isolation");
    doc.para(
        "A hog worker took device memory before the others built their models. Not contained: \
         another worker ran out of device memory. Contained: CUDA stopped the hog at a limit \
         and every other worker completed. MIG's memory isolation is architectural and is not \
         measured here.",
    );
    doc.table(overview(results));
    for r in results {
        section(&mut doc, 2, r);
    }
    doc
}

/// The isolation results as Markdown: an overview row per cohort, then each cohort's workers.
#[must_use]
pub fn render_isolation_markdown(results: &[IsolationResult]) -> String {
    markdown(&document(results))
}

/// The isolation results as plain text for a terminal.
#[must_use]
pub fn render_isolation_table(results: &[IsolationResult]) -> String {
    let mut out = columns(&overview(results));
    for r in results {
        let _ = writeln!(
            out,
            "\n{} · mode {} · {}: {}",
            r.experiment,
            r.mode,
            r.outcome.as_str(),
            r.explanation
        );
        out.push_str(&columns(&workers(r)));
        for m in messages(r) {
            let _ = writeln!(out, "  - {m}");
        }
    }
    out
}
