//! A study with `serve-llm` cohorts reports TTFT and TPOT p99 against the offered rate
//! per policy, the capacity at the objective, and the KV cache each worker held. The data are
//! CPU captures (`fixtures/serve-llm-study`: `gpt2-tiny`, 32 + 16 tokens, at most 8 running): a
//! fixed-rate cohort alone (exclusive) and beside a decode worker (timeslice), and a capacity
//! search of the latter at TTFT p99 <= 200 ms and TPOT p99 <= 20 ms that passed at 10 and 20
//! requests/s.

use std::path::{Path, PathBuf};

use coload_cohort_schema::study::Index;
use coload_report::study_report::{About, write};

fn fixture() -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("fixtures/serve-llm-study")
}

/// Copies `from` into `to`, recursively.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

#[test]
fn a_serve_llm_study_reports_ttft_and_tpot_against_the_rate_per_policy() {
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&fixture(), tmp.path());
    let index: Index = coload_cohort_schema::read_document(&tmp.path().join("index.json")).unwrap();
    let about = About {
        title: "coload study: serve-llm".into(),
        description: "serve-llm on the CPU".into(),
        node: index.node.clone(),
    };
    let written = write(tmp.path(), &about, &index).unwrap();
    assert!(written.warnings.is_empty(), "{:?}", written.warnings);
    let dir = written.dir.unwrap();
    let md = std::fs::read_to_string(dir.join("comparison.md")).unwrap();
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    // The provenance names the LLM's sequences and tokens, not an image size.
    assert!(
        html.contains("<dt>workload</dt><dd>gpt2-tiny, batch 8, prompt 32 + 16 generated tokens, fp32, eager</dd>"),
        "{}",
        &html[html.find("<dt>workload").unwrap_or(0)..][..200]
    );
    assert!(md.contains("### LLM serving (serve-llm workers)"), "{md}");
    assert!(html.contains("LLM serving (serve-llm workers)"));
    let table: Vec<&str> = md
        .lines()
        .skip_while(|l| !l.starts_with("### LLM serving"))
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .collect();
    // The header, its rule, then one row per cohort: two fixed-rate cohorts and two probes,
    // by policy and offered rate (the first probe offered 5.7500021/s, the fixed-rate
    // timeslice cohort 5.7500023/s).
    assert_eq!(table.len(), 2 + 4, "{table:#?}");
    assert!(table[0].contains("TTFT p99 ms") && table[0].contains("KV cache MiB"));
    let rows = &table[2..];
    // exclusive alone: 5.75 requests/s offered (23 in 4 s), TTFT p99 2.096 ms, TPOT p99 0.355
    // ms, 92 tokens/s, every request within both objectives, a cache of 8 x 64 positions x 2
    // layers x (keys + values) x 64 wide x 4 bytes = 0.5 MiB.
    for (row, cells) in rows.iter().zip([
        &[
            "exclusive (exclusive)",
            "5.75",
            "2.096",
            "0.355",
            "92.00",
            "0.50",
            "| - |",
        ][..],
        &[
            "timeslice (timeslice)",
            "probe-1-10",
            "5.75",
            "1.997",
            "0.262",
            "at least 20 requests/s at TTFT p99 <= 200 ms and TPOT p99 <= 20 ms",
        ],
        &[
            "timeslice (timeslice)",
            "5.75",
            "0.989",
            "0.362",
            "0.50",
            "| - |",
        ],
        &[
            "timeslice (timeslice)",
            "probe-2-20",
            "13.50",
            "0.945",
            "0.394",
            "216.00",
        ],
    ]) {
        for cell in cells {
            assert!(row.contains(cell), "{cell} not in {row}");
        }
        assert!(
            row.contains("100.0 % within TTFT p99 <= 200 ms and TPOT p99 <= 20 ms (met)"),
            "{row}"
        );
    }
    // The capacity search reads with its LLM objective, not as a request latency, and each
    // probe with the slowest serve-llm worker's TTFT and TPOT at the quantile.
    assert!(
        html.contains("TTFT p99 &lt;= 200 ms and TPOT p99 &lt;= 20 ms"),
        "the capacity's objective"
    );
    // The load curve plots the probes' time to first token (a serve-llm search has no request
    // latency), one dot per probe.
    let curve = &html[html
        .find("aria-label=\"TTFT against offered load")
        .expect("a TTFT load curve")..];
    let curve = &curve[..curve.find("</svg>").unwrap()];
    assert!(
        curve.contains("10 requests/s, TTFT p99 2 ms, meets the objective"),
        "{curve}"
    );
    assert!(curve.contains("20 requests/s, TTFT p99 0.95 ms"), "{curve}");
    assert!(
        html.contains("10: TTFT 2 ms, TPOT 0.26 ms (pass); 20: TTFT 0.95 ms, TPOT 0.39 ms (pass)"),
        "{}",
        &html[html.find("probes in the order run").unwrap_or(0)..][..600]
    );
}

/// A fixed-rate window too short for the early-stopping test, whose quantiles were within both
/// objectives, is not a miss: the row says the test needed more requests than it held. A
/// quantile outside its objective is a miss.
#[test]
fn a_window_too_short_to_show_the_quantile_is_not_called_a_miss() {
    let row_of = |edit: &dyn Fn(&mut serde_json::Value)| {
        let tmp = tempfile::tempdir().unwrap();
        copy_dir(&fixture(), tmp.path());
        let path = tmp
            .path()
            .join("cohorts/exclusive-serve-llm1-r1/summary.json");
        let mut s: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for w in s["workers"].as_array_mut().unwrap() {
            if !w["serve_llm"].is_null() {
                edit(&mut w["serve_llm"]["slo"]);
            }
        }
        std::fs::write(&path, serde_json::to_string(&s).unwrap()).unwrap();
        let index: Index =
            coload_cohort_schema::read_document(&tmp.path().join("index.json")).unwrap();
        let about = About {
            title: "coload study: serve-llm".into(),
            description: "serve-llm on the CPU".into(),
            node: index.node.clone(),
        };
        let dir = write(tmp.path(), &about, &index).unwrap().dir.unwrap();
        let md = std::fs::read_to_string(dir.join("comparison.md")).unwrap();
        md.lines()
            .skip_while(|l| !l.starts_with("### LLM serving"))
            .find(|l| l.starts_with("| exclusive (exclusive)"))
            .unwrap()
            .to_owned()
    };
    let short = row_of(&|slo| {
        slo["early_stopping_pass"] = false.into();
        slo["early_stopping_requests_needed"] = 459.into();
        slo["meets"] = false.into();
    });
    assert!(
        short.contains(
            "(within at the quantile, but too few requests to show it: 23, the early-stopping \
             test needs 459)"
        ),
        "{short}"
    );
    let missed = row_of(&|slo| {
        slo["ttft_met"] = false.into();
        slo["meets"] = false.into();
    });
    assert!(missed.contains("(missed)"), "{missed}");
    let met = row_of(&|_| {});
    assert!(met.contains("(met)"), "{met}");
}
