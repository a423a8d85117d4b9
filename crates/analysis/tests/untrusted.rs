//! Recorded files are untrusted input: a `summary.json` whose figures disagree with what they
//! are computed from, a baseline no ratio can divide by, a report that declares a huge cohort,
//! and control characters in recorded names are refused or shown escaped, never believed.

use std::path::{Path, PathBuf};

use coload_analysis::{Options, compare, load_compare_input, summarize_dirs};
use coload_cohort_schema::CohortSummary;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(name)
}

/// A copy of a fixture cohort's workers with its summary.json beside them, as a launcher
/// leaves a cohort folder.
fn cohort_folder(name: &str, tmp: &Path) -> (PathBuf, CohortSummary) {
    let dir = tmp.join(name);
    std::fs::create_dir(&dir).unwrap();
    let mut workers = Vec::new();
    for entry in std::fs::read_dir(fixture(name)).unwrap() {
        let entry = entry.unwrap();
        let to = dir.join(entry.file_name());
        std::fs::create_dir(&to).unwrap();
        for f in std::fs::read_dir(entry.path()).unwrap() {
            let f = f.unwrap();
            std::fs::copy(f.path(), to.join(f.file_name())).unwrap();
        }
        workers.push(to);
    }
    workers.sort();
    let summary = summarize_dirs(&workers, &Options::default()).unwrap();
    (dir, summary)
}

fn write(path: &Path, s: &CohortSummary) {
    std::fs::write(path, serde_json::to_vec(s).unwrap()).unwrap();
}

/// A rate multiplied by 100 in summary.json was reported on resume as "30.6x solo".
#[test]
fn a_forged_rate_is_refused_naming_the_field() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, good) = cohort_folder("homogeneous-4-train", tmp.path());
    let path = dir.join("summary.json");
    write(&path, &good);
    load_compare_input(&path, &Options::default()).unwrap();

    let mut forged = good.clone();
    forged.workers[1].samples_per_s *= 100.0;
    write(&path, &forged);
    let e = load_compare_input(&path, &Options::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("workers[1].samples_per_s is"), "{e}");

    // Samples forged to match: the batch records beside the file still disagree.
    forged.workers[1].samples *= 100;
    write(&path, &forged);
    let e = load_compare_input(&path, &Options::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("workers[1].samples is"), "{e}");
    assert!(e.contains("batch records"), "{e}");

    // Committed data keep the reports and drop the batch records: such a summary is checked on
    // its own figures, not refused for records that are not there.
    write(&path, &good);
    for entry in std::fs::read_dir(&dir).unwrap() {
        let batches = entry.unwrap().path().join("batches.jsonl");
        if batches.exists() {
            std::fs::remove_file(batches).unwrap();
        }
    }
    load_compare_input(&path, &Options::default()).unwrap();
}

/// `compare` printed "9,223,372,036,854,775,807x" against a baseline of 5e-324 samples/s.
#[test]
fn a_baseline_no_ratio_can_divide_by_is_refused() {
    let cohort = summarize_dirs(&[fixture("homogeneous-4-train")], &Options::default()).unwrap();
    let solo = summarize_dirs(&[fixture("solo-train")], &Options::default()).unwrap();
    compare(std::slice::from_ref(&cohort), std::slice::from_ref(&solo)).unwrap();
    for bad in [0.0, -5.0, 5e-324, f64::NAN, f64::INFINITY] {
        let mut base = solo.clone();
        base.workers[0].samples_per_s = bad;
        let e = compare(std::slice::from_ref(&cohort), &[base])
            .unwrap_err()
            .to_string();
        assert!(e.contains("workers[0].samples_per_s must be"), "{bad}: {e}");
    }
}

/// A worker.json that declares 10^8 replicas beside four folders is refused with ranges, in
/// bounded memory and time.
#[test]
fn a_forged_count_is_refused_with_ranges() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _) = cohort_folder("homogeneous-4-train", tmp.path());
    let mut workers = Vec::new();
    for i in 0..4 {
        let w = dir.join(format!("worker-{i}"));
        let path = w.join("worker.json");
        let mut v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        v["config"]["count"] = serde_json::json!(100_000_000u32);
        std::fs::write(&path, v.to_string()).unwrap();
        workers.push(w);
    }
    let started = std::time::Instant::now();
    let e = summarize_dirs(&workers, &Options::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("missing 4 to 99999999"), "{e}");
    assert!(started.elapsed().as_secs() < 5, "{:?}", started.elapsed());
}
