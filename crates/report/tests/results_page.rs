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

/// `data` with the folder `study` copied (to edit) and everything else linked.
fn data_with_copy_of(tmp: &Path, study: &str) -> PathBuf {
    let src = repo().join("docs/results/data");
    let data = tmp.join("results/data");
    std::fs::create_dir_all(&data).unwrap();
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        if e.file_name() == study {
            copy_dir(&e.path(), &data.join(e.file_name()));
        } else {
            std::os::unix::fs::symlink(e.path(), data.join(e.file_name())).unwrap();
        }
    }
    std::os::unix::fs::symlink(
        repo().join("docs/results/comparison.json"),
        tmp.join("results/comparison.json"),
    )
    .unwrap();
    data
}

#[test]
fn trainers_on_a_card_without_its_own_solo_get_no_ratio() {
    // The frontier's trainers are divided by the solo runs of their own card only: move one
    // probe's workers to another card and its row must say so instead of crossing cards.
    let tmp = tempfile::tempdir().unwrap();
    let data = data_with_copy_of(tmp.path(), "2026-12-02-frontier");
    let path = data.join(
        "2026-12-02-frontier/frontier-serve/cohorts/mps-replicas-7-serve1-train6-capacity-10ms-r1/probe-2-800/summary.json",
    );
    let text = std::fs::read_to_string(&path).unwrap();
    let other = text.replace("GPU-b77eb585-2d37", "GPU-0ther000-2d37");
    assert_ne!(other, text, "the probe records its card");
    std::fs::write(&path, other).unwrap();

    let page = render(&data).unwrap();
    let row = |page: &str| {
        page.lines()
            .find(|l| l.starts_with("| MPS, 7 replicas") && l.contains(" at 800 requests/s"))
            .map(str::to_owned)
            .unwrap()
    };
    let moved = row(&page);
    assert!(
        moved.contains("| no same-card solo |") && moved.contains("GPU-0ther000"),
        "{moved}"
    );
    let committed = render(&repo().join("docs/results/data")).unwrap();
    assert!(row(&committed).contains("x ["), "{}", row(&committed));
}

#[test]
fn the_page_before_its_archive_fits_about_four_screens() {
    // About 45 lines of text a screen at 1400 px: a table row is a line, a paragraph line of
    // Markdown wraps at about 150 characters, and the folded archive (itself holding folded
    // tables, so it ends at the last `</details>`) is not on screen.
    let page = std::fs::read_to_string(repo().join("docs/results.md")).unwrap();
    let (open, folded) = page.split_once("<details>").unwrap();
    let rest = folded.rsplit_once("</details>").unwrap().1;
    let lines: usize = open
        .lines()
        .chain(rest.lines())
        .filter(|l| !l.trim().is_empty() && !l.starts_with("<!--") && !l.starts_with("     "))
        .map(|l| {
            if l.starts_with('|') {
                1
            } else {
                l.len().div_ceil(150)
            }
        })
        .sum();
    assert!(
        lines <= 4 * 45,
        "{lines} lines before and after the archive"
    );
    assert!(
        open.contains("## Which policy for serve=1,train=6")
            && open.contains("## Share fidelity")
            && folded.contains("Fourth round"),
        "the answers lead and the rounds are folded"
    );
}

#[test]
fn rows_divide_by_the_solos_of_their_own_run_only() {
    // A block is a card in one run: give the decision rows' solos run 1 and every other cohort
    // run 2 (the same card), and no row may divide by those solos any more.
    let tmp = tempfile::tempdir().unwrap();
    let data = data_with_copy_of(tmp.path(), "2026-12-02-frontier");
    let path = data.join("2026-12-02-frontier/decision-rows/index.json");
    let mut index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for e in index["cohorts"].as_array_mut().unwrap() {
        let run = if e["baseline"].as_bool().unwrap() {
            1
        } else {
            2
        };
        e["run"] = serde_json::json!(run);
    }
    std::fs::write(&path, serde_json::to_string_pretty(&index).unwrap()).unwrap();

    let row = |page: &str| {
        page.lines()
            .find(|l| l.starts_with("| time-slicing |") && l.contains("samples/J"))
            .map(str::to_owned)
            .unwrap()
    };
    let committed = render(&repo().join("docs/results/data")).unwrap();
    assert!(row(&committed).contains("x ["), "{}", row(&committed));
    let split = row(&render(&data).unwrap());
    assert!(!split.contains("x ["), "{split}");
}
