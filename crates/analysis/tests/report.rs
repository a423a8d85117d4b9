//! Report v2 (issue 16): the verdict generated from real H200 comparisons (the cohorts behind
//! docs/results.md), each branch of its sentences, the sections that appear only when their
//! data exist (capacity at an objective, memory isolation), and the page's structure.

use std::path::Path;

use coload_analysis::{
    CapacityRow, ContextCohort, IsolationRow, ReportContext, compare, load_compare_input,
    render_comparison_markdown, render_comparison_markdown_with, render_report_html_with,
};
use coload_cohort_schema::{CohortSummary, Comparison, Mode, Workload};

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn summary(name: &str) -> CohortSummary {
    let path = root()
        .join("docs/results/data")
        .join(name)
        .join("summary.json");
    load_compare_input(&path, &coload_analysis::Options::default())
        .unwrap()
        .0
}

/// The H200 study of docs/results.md: every cohort against the exclusive solos.
fn results() -> Comparison {
    let names = [
        "exclusive-solo-train",
        "exclusive-solo-infer",
        "timeslice-train4",
        "timeslice-train7-r1",
        "timeslice-train7-r2",
        "timeslice-train7-r3",
        "mps-train4",
        "mps-train7",
        "mps-train7-r2",
        "timeslice-infer4",
        "timeslice-infer7",
        "timeslice-mixed-r1",
        "timeslice-mixed-r2",
        "timeslice-mixed-r3",
        "mps-mixed",
        "mps-mixed-r2",
    ];
    let cohorts: Vec<CohortSummary> = names.iter().map(|n| summary(n)).collect();
    compare(&cohorts, &cohorts[..2]).unwrap()
}

/// The Markdown between `## Verdict` and `## Cohorts`.
fn verdict_md(md: &str) -> &str {
    let start = md.find("## Verdict").unwrap();
    let end = md.find("## Cohorts").unwrap();
    &md[start..end]
}

#[test]
fn the_verdict_of_the_h200_study_names_the_policy_for_each_need() {
    let md = render_comparison_markdown(&results());
    let v = verdict_md(&md);
    insta::assert_snapshot!("h200_verdict", v);
    // The numbers docs/results.md states, read off the generated text.
    assert!(
        v.contains("**Train throughput, 7 train workers sharing one device:** use mps 1.52× together (5,512 samples/s; each worker 0.22× solo); timeslice only shares it out: timeslice 1.06× together (3,851 samples/s"),
        "{v}"
    );
    assert!(
        v.contains("no policy measured keeps it within 2× solo: mps 7.58× solo (15.8 ms against 2.09 ms) and timeslice 7.61× solo (15.9 ms against 2.09 ms)"),
        "{v}"
    );
    // The baselines' own cohorts are not shapes of the verdict.
    assert!(!v.contains("| 1 train | exclusive"), "{v}");
}

/// The results with the MPS mixed cohorts' inference tail moved to `p99_vs_solo`.
fn with_mps_infer_tail(mut c: Comparison, p99_vs_solo: f64) -> Comparison {
    for k in c.cohorts.iter_mut().filter(|k| k.mode == Mode::Mps) {
        if let Some(g) = k.groups.get_mut(&Workload::Infer) {
            for w in &mut g.per_worker {
                w.p99_vs_solo = Some(p99_vs_solo);
                w.p99_ms = p99_vs_solo * 2.087;
            }
            g.p99_ms = p99_vs_solo * 2.087;
        }
    }
    c
}

#[test]
fn the_tail_sentence_names_the_policy_that_keeps_it_and_the_one_that_does_not() {
    let md = render_comparison_markdown(&with_mps_infer_tail(results(), 1.5));
    let v = verdict_md(&md);
    assert!(
        v.contains("**Inference p99 beside others (1 infer + 6 train):** mps keeps it within 2× solo (mps 1.5× solo (3.13 ms against 2.09 ms)); timeslice does not (timeslice 7.61× solo"),
        "{v}"
    );
    let md = render_comparison_markdown(&with_mps_infer_tail(results(), 2.0));
    assert!(
        verdict_md(&md).contains("mps keeps it within 2× solo"),
        "the threshold is inclusive"
    );
}

#[test]
fn two_real_cards_are_set_against_one_card() {
    // Two exclusive trainers on two GPUs: each as fast as alone (the 4-trainer cohorts,
    // relabelled as two-worker shapes, stand in for the one-card side).
    let mut c = results();
    let mut across = c
        .cohorts
        .iter()
        .find(|k| k.experiment.starts_with("timeslice-train4"))
        .unwrap()
        .clone();
    across.experiment = "exclusive-train2-two-cards".into();
    across.mode = Mode::Exclusive;
    across.count = 2;
    across.workload_mix.insert(Workload::Train, 2);
    let g = across.groups.get_mut(&Workload::Train).unwrap();
    g.per_worker.truncate(2);
    g.workers = 2;
    for w in &mut g.per_worker {
        w.rate_vs_solo = Some(0.99);
    }
    let mut one_card = across.clone();
    one_card.experiment = "timeslice-train2".into();
    one_card.mode = Mode::Timeslice;
    for w in &mut one_card
        .groups
        .get_mut(&Workload::Train)
        .unwrap()
        .per_worker
    {
        w.rate_vs_solo = Some(0.5);
    }
    c.cohorts.push(across);
    c.cohorts.push(one_card);
    let md = render_comparison_markdown(&c);
    assert!(
        verdict_md(&md).contains("**2 real cards or one card (2 train):** on 2 GPUs (exclusive) each worker keeps 0.99× its solo rate; sharing one GPU it gets timeslice 0.50×."),
        "{md}"
    );
}

fn context() -> ReportContext {
    ReportContext {
        title: "coload study: article".into(),
        notes: vec!["Node: 1 GPU(s) (GPU 0: NVIDIA H200).".into()],
        cohorts: vec![ContextCohort {
            name: "mps-train7-r3".into(),
            policy: "mps".into(),
            workers: "train=7".into(),
            outcome: "failed".into(),
            experiment: None,
            note: "the cohort failed (replica 3 first) [kept: cohorts/mps-train7-r3.failed-1]"
                .into(),
        }],
        capacity: vec![
            CapacityRow {
                policy: "timeslice".into(),
                mode: Mode::Timeslice,
                objective: "p99 <= 10 ms".into(),
                capacity_per_s: Some(120.0),
                note: "beside 6 trainers".into(),
            },
            CapacityRow {
                policy: "mps".into(),
                mode: Mode::Mps,
                objective: "p99 <= 10 ms".into(),
                capacity_per_s: Some(410.0),
                note: "beside 6 trainers".into(),
            },
        ],
        isolation: vec![
            IsolationRow {
                policy: "mps".into(),
                mode: Mode::Mps,
                isolated: false,
                outcome: "not_isolated".into(),
                note: "6 of 6 out of memory".into(),
            },
            IsolationRow {
                policy: "mig".into(),
                mode: Mode::Mig,
                isolated: true,
                outcome: "isolated".into(),
                note: "6 of 6 complete".into(),
            },
        ],
        ..ReportContext::default()
    }
}

#[test]
fn capacity_and_isolation_render_only_when_measured() {
    let c = results();
    let plain = render_report_html_with(&c, &ReportContext::default());
    assert!(!plain.contains("capacity at"));
    assert!(!plain.contains("Memory isolation"));
    let html = render_report_html_with(&c, &context());
    assert!(html.contains("<title>coload study: article</title>"));
    assert!(
        html.contains("capacity at p99 &lt;= 10 ms"),
        "a capacity chart"
    );
    assert!(html.contains(
        "<strong>Serving capacity at the objective (p99 &lt;= 10 ms):</strong> mps sustains the most; mps 410 requests/s and timeslice 120 requests/s."
    ));
    assert!(html.contains(
        "<strong>Memory isolation against a worker that takes all memory:</strong> mig (6 of 6 complete) kept the others running; mps (6 of 6 out of memory) did not."
    ));
    // The verdict's three charts come before the first folded section; the failed cohort is
    // listed, not dropped.
    let first_details = html.find("<details>").unwrap();
    assert_eq!(html[..first_details].matches("<svg").count(), 3);
    assert!(html.contains("mps-train7-r3.failed-1"));
    let md = render_comparison_markdown_with(&c, &context());
    assert!(md.contains("### Memory isolation"), "{md}");
    assert!(
        md.contains("| mig | mig | isolated | yes | 6 of 6 complete |"),
        "{md}"
    );
}

#[test]
fn one_colour_per_policy_everywhere_and_a_percentile_plot_per_cohort() {
    let c = results();
    let html = render_report_html_with(&c, &ReportContext::default());
    // Time-slicing is orange and MPS blue in every chart, legends included.
    let orange = html.matches("#d95f02").count();
    let blue = html.matches("#1f6fb4").count();
    assert!(orange > 20 && blue > 10, "{orange} {blue}");
    assert!(!html.contains("#1f6fb4\"><title>timeslice"));
    // Every cohort has its latency-by-percentile plot with the tail ticks.
    assert_eq!(
        html.matches("aria-label=\"latency by percentile, cohort")
            .count(),
        c.cohorts.len()
    );
    for tick in ["50%", "90%", "99%", "99.9%", "99.99%"] {
        assert!(html.contains(&format!(">{tick}</text>")), "{tick}");
    }
    // Units on the axes.
    for unit in [
        "batch latency, ms",
        "train samples/s, all workers",
        "rate ÷ solo",
    ] {
        assert!(html.contains(unit), "{unit}");
    }
}
