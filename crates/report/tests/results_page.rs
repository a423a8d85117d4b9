//! The repository's results page (`docs/results.md`): rendered from the recorded data under
//! `docs/results/data`, byte for byte the committed page, and built from the same rules as a
//! study's `report.html` (a capacity's rounding, here), so that changing a rule in one place
//! changes both.

use std::path::{Path, PathBuf};

use coload_cohort_schema::study::Index;
use coload_report::results_page::{TEMPLATE, check_template, first_difference, render};
use coload_report::study_report::{About, write};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        let kind = e.file_type().unwrap();
        if kind.is_symlink() {
            // The MPS daemons' pipe folders recorded with the probes: nothing to read.
            continue;
        }
        if kind.is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

#[test]
fn the_committed_page_is_what_the_data_give() {
    let page = render(&repo().join("docs/results/data")).unwrap();
    let committed = std::fs::read_to_string(repo().join("docs/results.md")).unwrap();
    assert_eq!(
        first_difference(&committed, &page),
        None,
        "docs/results.md is stale: run `cargo run -p bench-summarize -- results-page`"
    );
    assert!(check_template(TEMPLATE).is_empty());
}

#[test]
fn a_hand_edited_figure_is_found_at_its_line() {
    let committed = std::fs::read_to_string(repo().join("docs/results.md")).unwrap();
    let edited = committed.replacen("850 to 1,000", "900 to 1,000", 1);
    assert_ne!(edited, committed, "the page names the MPS share's capacity");
    let line = committed
        .lines()
        .position(|l| l.contains("850 to 1,000"))
        .unwrap();
    let d = first_difference(&edited, &committed).unwrap();
    assert!(d.starts_with(&format!("line {}:", line + 1)), "{d}");
}

#[test]
fn one_rounding_rule_serves_the_report_and_the_page() {
    // A bracket whose ends are halves at the figures it resolves: [12.5, 14.5) is known to two
    // figures, and the report rounds halves away from zero (13 to 15; rounding halves to even
    // would write 12 to 14).
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("results/data");
    copy_dir(&repo().join("docs/results/data"), &data);
    std::fs::copy(
        repo().join("docs/results/comparison.json"),
        tmp.path().join("results/comparison.json"),
    )
    .unwrap();
    let study = data.join("2026-12-01-round4/decision");
    let path = study.join("cohorts/mps-plugin-serve1-train6-capacity-10ms-r1/capacity.json");
    let mut capacity: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    capacity["capacity_per_s"] = serde_json::json!(12.5);
    capacity["failed_above_per_s"] = serde_json::json!(14.5);
    std::fs::write(&path, serde_json::to_string(&capacity).unwrap()).unwrap();

    let page = render(&data).unwrap();
    let row = page
        .lines()
        .find(|l| l.starts_with("| requests/s at p99 <= 10 ms beside 6 trainers"))
        .unwrap();

    let index: Index =
        serde_json::from_str(&std::fs::read_to_string(study.join("index.json")).unwrap()).unwrap();
    let about = About {
        title: "decision".to_owned(),
        description: String::new(),
        node: index.node.clone(),
    };
    write(&study, &about, &index).unwrap();
    let html = std::fs::read_to_string(study.join("report/report.html")).unwrap();
    assert!(
        row.contains("| **13 to 15** |") && html.contains("13 to 15"),
        "the page's row: {row}; report.html says 13 to 15: {}, 12 to 14: {}",
        html.contains("13 to 15"),
        html.contains("12 to 14")
    );
    assert!(!html.contains("12 to 14") && !page.contains("12 to 14"));
}

#[test]
fn a_missing_study_is_named_by_its_file() {
    let tmp = tempfile::tempdir().unwrap();
    let err = render(tmp.path()).unwrap_err().to_string();
    assert!(
        err.contains("2026-12-01-round3") && err.contains("index.json"),
        "{err}"
    );
}
