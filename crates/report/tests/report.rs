//! Report v2: the verdict generated from real H200 comparisons (the cohorts behind
//! docs/results.md), each branch of its sentences, the sections that appear only when their
//! data exist (capacity at an objective, memory isolation), and the page's structure.

use std::path::Path;

use coload_analysis::{compare, load_compare_input};
use coload_cohort_schema::{CohortSummary, Comparison, Mode, Workload};
use coload_report::{
    CapacityPoint, CapacityRow, ContextCohort, IsolationRow, ReportContext, ServePoint,
    render_comparison_markdown, render_comparison_markdown_with, render_report_html_with,
};

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

/// The H200 study of docs/results.md, every cohort against the exclusive solos, read as if it
/// had run on one card: these wording tests need ratios, and like for like the round-2 cohorts
/// (three cards) are not compared with those solos at all
/// (`the_h200_verdict_compares_no_ratio_across_cards`).
fn results() -> Comparison {
    let mut cohorts = h200_cohorts();
    for c in &mut cohorts {
        c.colocation.physical_gpus.clear();
        for w in &mut c.workers {
            w.gpu_uuid = None;
        }
    }
    compare(&cohorts, &cohorts[..2]).unwrap()
}

#[test]
fn the_h200_verdict_compares_no_ratio_across_cards() {
    let cohorts = h200_cohorts();
    let c = compare(&cohorts, &cohorts[..2]).unwrap();
    let md = render_comparison_markdown(&c);
    let v = verdict_md(&md);
    // The MPS cohorts ran on a card with no solo; the time-sliced trainers' repeats on two.
    assert!(
        v.contains("**Train throughput, card full (7 train workers on one device):** not compared: timeslice and mps ran on a card without its own solo baseline"),
        "{v}"
    );
    assert!(
        c.warnings
            .iter()
            .any(|w| w.kind == "cross_card" && w.message.contains("mps-train7")),
        "{:?}",
        c.warnings
    );
    // The one time-sliced 4-trainer cohort ran on the exclusive solo's card: it keeps its ratio.
    let t4 = c
        .cohorts
        .iter()
        .find(|k| k.experiment.starts_with("timeslice-train4"))
        .unwrap();
    assert!(t4.groups[&Workload::Train].aggregate_vs_solo_ci.is_some());
}

/// The round-2 H200 cohorts, the two exclusive solos first.
fn h200_cohorts() -> Vec<CohortSummary> {
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
    names.iter().map(|n| summary(n)).collect()
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
        v.contains("**Train throughput, card full (7 train workers on one device):** use mps 1.52× together (5,512 samples/s, 95 % CI 5,426 to 5,598; each worker 0.22× solo); timeslice only shares it out: timeslice 1.06× (3,851 samples/s, 95 % CI 3,819 to 3,882)."),
        "{v}"
    );
    assert!(
        v.contains("no policy measured keeps it within 2× solo: mps 7.58× solo (15.8 ms, 95 % CI"),
        "{v}"
    );
    // The baselines' own cohorts are not shapes of the verdict.
    assert!(!v.contains("| 1 train | exclusive"), "{v}");
}

/// The results with the MPS mixed cohorts' inference tail moved to `p99_vs_solo`.
fn with_mps_infer_tail(mut c: Comparison, p99_vs_solo: f64) -> Comparison {
    // The repeats' intervals describe the measured tails, not these.
    c.repeats.clear();
    let solo = c.baselines[&Workload::Infer].p99_ms;
    for k in c.cohorts.iter_mut().filter(|k| k.mode == Mode::Mps) {
        if let Some(g) = k.groups.get_mut(&Workload::Infer) {
            for w in &mut g.per_worker {
                w.p99_vs_solo = Some(p99_vs_solo);
                w.p99_ms = p99_vs_solo * solo;
            }
            g.p99_ms = p99_vs_solo * solo;
        }
    }
    c
}

#[test]
fn the_tail_sentence_names_the_policy_that_keeps_it_and_the_one_that_does_not() {
    let md = render_comparison_markdown(&with_mps_infer_tail(results(), 1.5));
    let v = verdict_md(&md);
    assert!(
        v.contains("**Inference p99 beside others (1 infer + 6 train):** mps keeps it within 2× solo (mps 1.50× solo (3.13 ms"),
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

fn probe(rate_per_s: f64, latency_ms: f64, passed: bool) -> CapacityPoint {
    CapacityPoint {
        rate_per_s,
        latency_ms: Some(latency_ms),
        passed: Some(passed),
        llm_ms: None,
        overloaded: false,
    }
}

/// Capacity searches at p99 <= 10 ms as the H200 measured them at 25 ms (round 2), scaled:
/// time-slicing passes no rate, MPS converges, one worker alone passes the highest rate.
fn capacity_rows() -> Vec<CapacityRow> {
    let row = |policy: &str, mode, capacity, failed, stop: &str, probes| CapacityRow {
        name: String::new(),
        policy: policy.into(),
        mode,
        objective: "p99 <= 10 ms".into(),
        slo_ms: 10.0,
        quantile: 0.99,
        capacity_per_s: capacity,
        failed_above_per_s: failed,
        stop: stop.into(),
        probes,
        note: "serve=1,train=6".into(),
    };
    vec![
        row(
            "timeslice",
            Mode::Timeslice,
            None,
            Some(25.0),
            "min_rate_fails",
            vec![
                probe(150.0, 28.7, false),
                probe(75.0, 28.4, false),
                probe(25.0, 26.1, false),
            ],
        ),
        row(
            "mps",
            Mode::Mps,
            Some(410.0),
            Some(600.0),
            "converged",
            vec![
                probe(300.0, 4.8, true),
                probe(600.0, 12.9, false),
                CapacityPoint {
                    overloaded: true,
                    ..probe(1200.0, 60.0, false)
                },
                probe(410.0, 8.1, true),
            ],
        ),
    ]
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
        capacity: capacity_rows(),
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
    // Without capacity searches or hog cohorts the verdict says so, and draws nothing for them.
    assert!(plain.contains("not measured: no capacity search in these data"));
    assert!(plain.contains("not measured: no hog cohort in these data"));
    assert!(!plain.contains("aria-label=\"serving capacity at"));
    assert!(!plain.contains("<h3>Memory isolation</h3>"));
    // MIG is named even when nothing says why it was not measured.
    assert!(plain.contains("MIG: no MIG cohort in these data"));
    let html = render_report_html_with(&c, &context());
    assert!(html.contains("<title>coload study: article</title>"));
    assert!(
        html.contains("capacity at p99 &lt;= 10 ms"),
        "a capacity chart"
    );
    assert!(html.contains(
        "<strong>Serving capacity at the objective (p99 &lt;= 10 ms):</strong> mps sustains the most (serve=1,train=6): mps 410 to 600 and timeslice below 25 requests/s."
    ));
    assert!(html.contains(
        "<strong>Memory isolation against a worker that takes all memory:</strong> mig (6 of 6 complete) kept the others running; mps (6 of 6 out of memory) did not."
    ));
    // The verdict's four charts (per worker, scaling, capacity, load curve) come before the
    // first folded section; the failed cohort is listed, not dropped.
    let cohorts = html.find("<h2 id=\"cohorts\">").unwrap();
    assert_eq!(html[..cohorts].matches("<svg").count(), 4);
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

/// The SVG element whose accessible name is `label`.
fn svg_labelled<'a>(html: &'a str, label: &str) -> &'a str {
    let at = html
        .find(&format!("aria-label=\"{label}\""))
        .unwrap_or_else(|| panic!("no chart `{label}`"));
    let start = html[..at].rfind("<svg").unwrap();
    let end = at + html[at..].find("</svg>").unwrap() + "</svg>".len();
    &html[start..end]
}

/// A fixed-rate serve cohort beside six trainers under time-slicing.
fn serve_point() -> ServePoint {
    ServePoint {
        policy: "timeslice".into(),
        mode: Mode::Timeslice,
        experiment: "timeslice-serve1-train6-x".into(),
        offered_per_s: 301.0,
        latency_ms: vec![(0.5, 9.0), (0.99, 31.0)],
        overloaded: false,
        slo: None,
    }
}

const LOAD_CURVE: &str = "request latency against offered load, objective p99 &lt;= 10 ms";

#[test]
fn the_load_curve_draws_each_policy_its_probes_and_the_objective() {
    let ctx = ReportContext {
        serve_points: vec![serve_point()],
        ..context()
    };
    let html = render_report_html_with(&results(), &ctx);
    let svg = svg_labelled(&html, LOAD_CURVE);
    insta::assert_snapshot!("load_curve_p99_10ms", svg);
    // The objective: a dashed line labelled with its value, and its words in the legend beside
    // a dashed swatch.
    assert_eq!(svg.matches("class=\"ref\"").count(), 2, "{svg}");
    assert!(svg.contains("class=\"ref-label\">10 ms</text>"), "{svg}");
    assert!(svg.contains(">objective p99 &lt;= 10 ms · "), "{svg}");
    // One curve per policy in the policy's colour, through its probes in rate order.
    for (color, policy) in [("#d95f02", "timeslice"), ("#1f6fb4", "mps")] {
        let curves: Vec<&str> = svg
            .lines()
            .filter(|l| l.starts_with("<path") && l.contains(&format!("stroke=\"{color}\"")))
            .collect();
        assert_eq!(curves.len(), 1, "{policy}: {svg}");
        assert!(curves[0].contains(&format!("<title>{policy}: capacity")));
        let xs: Vec<f64> = curves[0]
            .split(['M', 'L'])
            .filter_map(|p| p.trim().split(',').next()?.parse().ok())
            .collect();
        assert!(xs.windows(2).all(|w| w[0] < w[1]), "{policy}: {xs:?}");
    }
    // Passed probes filled, failed ones hollow, the fixed-rate cohort a square.
    let dots = |fill: &str| {
        svg.lines()
            .filter(|l| l.starts_with("<circle") && l.contains(&format!("fill=\"{fill}\"")))
            .count()
    };
    assert_eq!(dots("#1f6fb4"), 2, "mps passed 300 and 410");
    assert_eq!(dots("#fff"), 5, "3 timeslice and 2 mps probes failed");
    assert!(svg.contains("overloaded: a lower bound"));
    assert!(
        svg.contains("<title>timeslice (fixed rate, timeslice-serve1-train6-x): 301 requests/s")
    );
    // Units, log-scaled axes: rates from 25 to 1,200 and latencies from 4.8 to 60 ms.
    assert!(svg.contains("offered load, requests/s per serve worker (log)"));
    assert!(svg.contains("request latency p99, ms (log)"), "{svg}");
}

#[test]
fn the_load_curve_is_linear_in_latency_within_a_tenfold_range_and_one_per_objective() {
    let mut rows = capacity_rows();
    // Another objective: the same search read at 25 ms, latencies within 10x.
    rows.push(CapacityRow {
        objective: "p99 <= 25 ms".into(),
        slo_ms: 25.0,
        capacity_per_s: Some(848.5),
        failed_above_per_s: Some(1200.0),
        stop: "probes_exhausted".into(),
        probes: vec![probe(300.0, 22.1, true), probe(1200.0, 24.8, false)],
        ..rows[1].clone()
    });
    let ctx = ReportContext {
        capacity: rows,
        ..ReportContext::default()
    };
    let html = render_report_html_with(&results(), &ctx);
    let svg = svg_labelled(
        &html,
        "request latency against offered load, objective p99 &lt;= 25 ms",
    );
    assert!(svg.contains("request latency p99, ms</text>"), "{svg}");
    assert!(svg.contains(">objective p99 &lt;= 25 ms · "));
    assert!(svg.contains("class=\"ref-label\">25 ms</text>"));
    // The 10 ms chart is still there, with its own curves; each objective has its bar chart.
    assert!(!svg_labelled(&html, LOAD_CURVE).contains("848.5"));
    assert!(html.contains("aria-label=\"serving capacity at p99 &lt;= 25 ms, per policy\""));
    assert!(html.contains("aria-label=\"serving capacity at p99 &lt;= 10 ms, per policy\""));
    assert!(html.contains(
        "<strong>Serving capacity at the objective (p99 &lt;= 25 ms):</strong> mps sustains the most (serve=1,train=6): mps 850 to 1,200 requests/s."
    ));
}

#[test]
fn the_capacity_table_gives_each_search_its_answer_bracket_and_probes() {
    let mut rows = capacity_rows();
    rows.push(CapacityRow {
        policy: "exclusive".into(),
        mode: Mode::Exclusive,
        capacity_per_s: Some(16_000.0),
        failed_above_per_s: None,
        stop: "max_rate_passes".into(),
        probes: vec![probe(8000.0, 3.7, true), probe(16_000.0, 9.9, true)],
        note: "serve=1".into(),
        ..rows[0].clone()
    });
    let ctx = ReportContext {
        capacity: rows,
        ..ReportContext::default()
    };
    let md = render_comparison_markdown_with(&results(), &ctx);
    let table = &md[md
        .find("### Capacity at the objective")
        .expect("a capacity table")..];
    let table = &table[..table.find("\n\n|").map_or(table.len(), |i| {
        i + table[i + 2..]
            .find("\n\n")
            .map_or(table.len() - i, |j| j + 2)
    })];
    insta::assert_snapshot!("capacity_table", table);
    for row in [
        "| timeslice | serve=1,train=6 | p99 <= 10 ms | below 25 | [0, 25) | min_rate_fails | 150: 28.7 ms (fail); 75: 28.4 ms (fail); 25: 26.1 ms (fail) |",
        "| mps | serve=1,train=6 | p99 <= 10 ms | 410 to 600 | [410, 600) | converged | 300: 4.8 ms (pass); 600: 12.9 ms (fail); 1,200: 60.0 ms (fail, overloaded); 410: 8.1 ms (pass) |",
        "| exclusive | serve=1 | p99 <= 10 ms | at least 16,000 | [16,000, ∞) | max_rate_passes | 8,000: 3.7 ms (pass); 16,000: 9.9 ms (pass) |",
    ] {
        assert!(table.contains(row), "{row}\n{table}");
    }
    // Without capacity searches, no table and no load curve.
    let plain = render_report_html_with(&results(), &ReportContext::default());
    assert!(!plain.contains("Capacity at the objective"));
    assert!(!plain.contains("request latency against offered load"));
}

#[test]
fn a_report_of_capacity_searches_alone_shows_them_and_no_empty_sections() {
    let empty = Comparison {
        schema_version: coload_cohort_schema::SCHEMA_VERSION,
        baselines: std::collections::BTreeMap::new(),
        baseline_blocks: Vec::new(),
        cohorts: Vec::new(),
        repeats: Vec::new(),
        warnings: Vec::new(),
        caveats: Vec::new(),
        decision: None,
    };
    let ctx = ReportContext {
        capacity: capacity_rows(),
        ..ReportContext::default()
    };
    let html = render_report_html_with(&empty, &ctx);
    svg_labelled(&html, LOAD_CURVE);
    svg_labelled(&html, "serving capacity at p99 &lt;= 10 ms, per policy");
    assert!(html.contains("<h3>Capacity at the objective</h3>"));
    let md = render_comparison_markdown_with(&empty, &ctx);
    for absent in [
        "## Cohorts",
        "## Baselines",
        "## Repeats",
        "| shape | policy |",
    ] {
        assert!(!md.contains(absent), "{absent}\n{md}");
    }
}

/// A policy searched twice (at the plan's floor, then below it with longer probes) is given in
/// the verdict by its best-informed search, once; the capacity table names each search.
#[test]
fn a_policy_searched_twice_reads_once_in_the_verdict_by_its_best_search() {
    let mut rows = capacity_rows();
    for r in &mut rows {
        r.name = format!("{}-serve1-train6-capacity-r1", r.policy);
    }
    rows.push(CapacityRow {
        name: "timeslice-serve1-train6-capacity-long-r1".into(),
        capacity_per_s: Some(10.0),
        failed_above_per_s: Some(12.0),
        stop: "converged".into(),
        probes: vec![probe(10.0, 9.1, true), probe(12.0, 11.0, false)],
        ..rows[0].clone()
    });
    let ctx = ReportContext {
        capacity: rows.clone(),
        ..ReportContext::default()
    };
    let html = render_report_html_with(&results(), &ctx);
    assert!(
        html.contains(
            "mps sustains the most (serve=1,train=6): mps 410 to 600 and timeslice 10 to 12 \
             requests/s; a policy searched more than once is given by its best-informed search"
        ),
        "{}",
        &html[html.find("Serving capacity").unwrap_or(0)..][..400]
    );
    // The capacity chart tells the two time-slicing bars apart by what their names differ in.
    assert!(
        html.contains("class=\"tick\">timeslice long</text>")
            && html.contains("class=\"tick\">timeslice</text>"),
        "{}",
        &html[html.find("aria-label=\"serving capacity").unwrap_or(0)..][..200]
    );
    let md = render_comparison_markdown_with(&results(), &ctx);
    assert!(md.contains("| policy | search | workers |"), "{md}");
    assert!(
        md.contains("| timeslice | timeslice-serve1-train6-capacity-long-r1 | serve=1,train=6 |"),
        "{md}"
    );
    // Neither passed: the lower failing rate knows more (below 12 after below 25).
    rows.last_mut().unwrap().capacity_per_s = None;
    let ctx = ReportContext {
        capacity: rows,
        ..ReportContext::default()
    };
    let html = render_report_html_with(&results(), &ctx);
    assert!(
        html.contains("mps 410 to 600 and timeslice below 12 requests/s;"),
        "{}",
        &html[html.find("Serving capacity").unwrap_or(0)..][..400]
    );
}

/// One measure per load curve: in a search with serve workers, a probe whose request latency
/// fell on an unfinished request is not drawn, even when its serve-llm workers have a TTFT.
#[test]
fn the_load_curve_never_mixes_ttft_into_request_latency() {
    let mut rows = capacity_rows();
    rows[1].probes.push(CapacityPoint {
        latency_ms: None,
        llm_ms: Some((7.7, 1.0)),
        ..probe(700.0, 0.0, false)
    });
    let ctx = ReportContext {
        capacity: rows,
        ..ReportContext::default()
    };
    let html = render_report_html_with(&results(), &ctx);
    let curve = &html[html
        .find("aria-label=\"request latency against offered load")
        .expect("a request-latency load curve")..];
    let curve = &curve[..curve.find("</svg>").unwrap()];
    assert!(curve.contains("mps: 410 requests/s, p99 8.1 ms"), "{curve}");
    assert!(!curve.contains("700 requests/s"), "{curve}");
}
