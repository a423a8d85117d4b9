//! Report v3 on a real study folder: the third round's article study under
//! docs/results/data, re-reported without running anything. The provenance header is read from
//! the data, every need has a sentence (or says why it was not measured), a policy the node did
//! not offer is named with its reason, outcomes read as words, and the page has its anchors.

use std::path::{Path, PathBuf};

use coload_cohort_schema::study::{Entry, Index, Outcome};
use coload_report::study_report::{About, write};

fn article() -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .join("docs/results/data/2026-12-01-round3/article")
}

/// A copy of the article study (its index and cohort summaries) in a temporary folder.
fn copy_of_article() -> (tempfile::TempDir, Index) {
    let tmp = tempfile::tempdir().unwrap();
    let src = article();
    let index: Index = coload_cohort_schema::read_document(&src.join("index.json")).unwrap();
    for e in &index.cohorts {
        let from = src.join("cohorts").join(&e.name).join("summary.json");
        let to = tmp.path().join("cohorts").join(&e.name);
        std::fs::create_dir_all(&to).unwrap();
        std::fs::copy(from, to.join("summary.json")).unwrap();
    }
    (tmp, index)
}

fn entry(name: &str, policy: &str, mode: &str, outcome: Outcome, reason: &str) -> Entry {
    Entry {
        name: name.into(),
        policy: policy.into(),
        mode: mode.into(),
        workers: "train=7".into(),
        repeat: 1,
        baseline: false,
        outcome,
        reason: Some(reason.into()),
        exit_code: None,
        lanes: None,
        duration_s: None,
        in_windows_s: None,
        experiment: None,
        run: None,
        failed_dirs: Vec::new(),
        capacity: None,
        isolation: None,
    }
}

fn report(dir: &Path, index: &Index) -> (String, String) {
    let about = About {
        title: "coload study: article".into(),
        description: "the article's matrix".into(),
        node: index.node.clone(),
    };
    let written = write(dir, &about, index).unwrap();
    assert!(written.warnings.is_empty(), "{:?}", written.warnings);
    let report = written.dir.unwrap();
    (
        std::fs::read_to_string(report.join("report.html")).unwrap(),
        std::fs::read_to_string(report.join("comparison.md")).unwrap(),
    )
}

#[test]
fn the_article_study_reads_with_its_provenance_and_every_need() {
    let (tmp, index) = copy_of_article();
    let (html, md) = report(tmp.path(), &index);
    // Provenance, from the summaries: nothing typed.
    for fact in [
        "<dt>workload</dt><dd>resnet18, batch 32 of 3x224x224, fp32, eager</dd>",
        "<dt>protocol</dt><dd>20 s window, 20 warmup batches, 5 s start lead</dd>",
        "<dt>dates</dt><dd>2026-12-01 00:45 to 00:58 UTC",
        "<dt>GPUs</dt><dd>2 physical GPUs (GPU-694b5e84…, GPU-dd673790…), 140 GiB each",
        // The round-3 index predates runs in the index and run numbers on its cohorts.
        "<dt>cards and runs</dt><dd>2 cards; the study",
        "index predates runs, so each card",
        "mps-plugin: device-plugin replicas 7: 14 % of the threads",
        "<dt>coload</dt><dd>this report: 0.1.0 (git ",
        "driver, CUDA version and hosts not kept with these data (summaries only)",
    ] {
        assert!(html.contains(fact), "{fact}");
    }
    // A table of contents whose links land on the sections.
    assert!(html.contains("<a href=\"#verdict\">Verdict</a>"));
    assert!(html.contains("<h2 id=\"verdict\">Verdict</h2>"));
    assert!(html.contains("<h2 id=\"every-cohort-of-the-study\">"));
    assert!(md.contains("[Every cohort of the study](#every-cohort-of-the-study)"));
    // Every need, in the verdict, before the first cohort.
    let verdict =
        &html[html.find("<h2 id=\"verdict\">").unwrap()..html.find("<h2 id=\"cohorts\">").unwrap()];
    for need in [
        // Like for like: the MPS cohorts ran on a card without its own solo, so they are named
        // as not compared instead of divided by another card's solo (1.54x before).
        "Train throughput, card full (7 train workers on one device):</strong> no policy measured adds throughput over one worker alone (that takes 1.1×); timeslice only shares it out: timeslice 0.95× (3,835 samples/s, 95 % CI 3,803 to 3,866). Not compared: mps-plugin and mps-unlimited ran on a card without its own solo baseline",
        // One solo run and one run alone: no interval, so no "as fast as".
        "Train throughput, card not full (one train worker alone):</strong> for mps-unlimited and mps-plugin one run and one solo give no interval (mps-unlimited 0.98× and mps-plugin 0.29×). Not compared: timeslice ran on a card without its own solo baseline",
        "Inference p99 beside others (1 infer + 6 train):</strong> not compared: timeslice, mps-plugin and mps-unlimited ran on a card without its own solo baseline",
        "Serving capacity at an objective:</strong> not measured: no capacity search in these data",
        "Memory isolation against a worker that takes all memory:</strong> not measured",
        // The MPS cohorts' card has no solo: no solo's joules are set beside them (9.35 before,
        // from another card).
        "Energy per sample (train, 7 on one device):</strong> training samples per device joule: mps-plugin 9.60, timeslice 9.01 and mps-unlimited 8.84; no same-card solo to set them against; one trainer alone under timeslice 9.46, mps-plugin 5.27 and mps-unlimited 9.25.",
        "Not measured here:</strong> MIG: no MIG cohort in these data",
    ] {
        assert!(verdict.contains(need), "{need}\n{verdict}");
    }
    // One definition of p99 ÷ solo: the table's p99 over the solo's p99 is its ratio column.
    // (12.2 ms over the infer solo's 2.06 ms on the card both ran on.)
    assert!(
        md.contains("| 7 infer | mps-plugin | 1 | 2,734 | 0.17 | 12.2 | 5.93 |"),
        "{md}"
    );
    // A shape whose cohorts ran on a card without that solo gets no ratio at all.
    assert!(
        md.contains(
            "| 1 infer + 6 train: infer | timeslice | 3 | 2,193 | - | 15.9 [15.8 to 15.9] | - |"
        ),
        "{md}"
    );
    // Outcomes in words; figures not to two decimals.
    assert!(html.contains("<td class=\"t\">complete (earlier run)</td>"));
    assert!(!html.contains("already_complete"));
    assert!(!html.contains("4017.60"));
}

#[test]
fn a_policy_the_node_did_not_offer_is_named_with_its_reason_and_failures_read_as_words() {
    let (tmp, mut index) = copy_of_article();
    index.cohorts.push(entry(
        "mig-train7-r1",
        "mig",
        "mig",
        Outcome::NotOffered,
        "mode mig needs 7 MIG instance(s) on one GPU; nvidia-smi -L lists 0 on the lanes (MIG is set up by the node's owner)",
    ));
    index.cohorts.push(entry(
        "mig-infer7-r1",
        "mig",
        "mig",
        Outcome::NotOffered,
        "mode mig needs 7 MIG instance(s) on one GPU",
    ));
    index.cohorts.push(entry(
        "timeslice-hog1-train6-r1",
        "timeslice",
        "timeslice",
        Outcome::Failed,
        "replica 3: out_of_memory: failed in warmup: CUDA out of memory",
    ));
    let (html, _) = report(tmp.path(), &index);
    assert!(
        html.contains("<strong>Not measured here:</strong> mig: not measured: mode mig needs 7 MIG instance(s) on one GPU; nvidia-smi -L lists 0 on the lanes (MIG is set up by the node&#39;s owner) (2 cohorts not offered)."),
        "{}",
        &html[html.find("Not measured here").unwrap_or(0)..][..400]
    );
    assert!(html.contains("failed: replica 3 out of memory: failed in warmup: CUDA out of memory"));
    assert!(html.contains("<dt>cohorts</dt><dd>42 planned: 39 complete, 1 failed, 2 not offered by this node, 0 not run yet"));
}

/// An unfinished study's verdict says which cohorts it has not run yet, by mix with their
/// policies; a finished one says nothing of the kind (the article test above).
#[test]
fn an_unfinished_study_names_what_it_has_not_run_yet() {
    let (tmp, mut index) = copy_of_article();
    for (name, policy) in [
        ("timeslice-train7-r4", "timeslice"),
        ("mps-plugin-train7-r4", "mps-plugin"),
    ] {
        index.cohorts.push(entry(
            name,
            policy,
            "timeslice",
            Outcome::NotRun,
            "the time budget (340 s) would run out before it ends",
        ));
    }
    let mut hog = entry(
        "mps-unlimited-hog1-train6-r1",
        "mps-unlimited",
        "mps",
        Outcome::Interrupted,
        "interrupted",
    );
    hog.workers = "hog=1,train=6".into();
    index.cohorts.push(hog);
    let (html, md) = report(tmp.path(), &index);
    let line = "Not run yet:</strong> 3 cohorts of the plan: train=7 x2 (timeslice, mps-plugin); \
                hog=1,train=6 (mps-unlimited). Run the study again to resume them";
    assert!(
        html.contains(line),
        "{}",
        &html[html.find("Not run yet").unwrap_or(0)..][..300]
    );
    assert!(md.contains("**Not run yet:** 3 cohorts of the plan"));
}

/// Copies every file of `from` into `to`, folders included.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

#[test]
fn fixed_rate_serve_cohorts_are_judged_by_their_requests_and_the_hog_by_its_peers() {
    // The second round's study: serve cohorts at 300 requests/s judged at p99 <= 25 ms, and a
    // hog beside six trainers under time-slicing (failed twice) and plugin MPS.
    let src = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .join("docs/results/data/2026-11-30-round2/study");
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(&src.join("cohorts"), &tmp.path().join("cohorts"));
    let index: Index = coload_cohort_schema::read_document(&src.join("index.json")).unwrap();
    let (html, md) = report(tmp.path(), &index);
    // The shape table shows the request p99 (28.7 ms), not the batch p99 (14.9 ms).
    assert!(
        md.contains("| 1 serve + 6 train: serve | timeslice | 1 | ")
            && md.contains("| 28.7 (requests) |"),
        "{md}"
    );
    assert!(md.contains(
        "| 1 serve + 6 train: serve | timeslice | 300 | 28.7 | p99 <= 25 ms | 85.6 % | no |"
    ));
    assert!(html.contains(
        "mps-plugin (request p99 5.32 ms, 99.9 % within) and mps-unlimited (request p99 20.7 ms, 99.8 % within) meet it; timeslice (request p99 28.7 ms, 85.6 % within) does not."
    ));
    assert!(html.contains(
        "<strong>Memory isolation against a worker that takes all memory:</strong> mps-plugin (the hog got 19.9 GiB; 6 of 6 others completed) kept the others running; timeslice (the hog got 139.2 GiB; 6 of 6 others ran out of memory) did not."
    ));
}

#[test]
fn a_decision_study_answers_all_six_needs_on_its_first_screen() {
    // The decision plan's kinds of cohorts, from the recorded rounds: the article matrix, the
    // capacity searches at 10 ms (round 3) and 25 ms (round 2), the round-2 hog cohorts, and
    // MIG as a node without MIG instances reports it.
    let data = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("docs/results/data");
    let (tmp, mut index) = copy_of_article();
    for (objective, from) in [
        ("10ms", "2026-12-01-round3/capacity-10ms"),
        ("25ms", "2026-11-30-round2/capacity"),
    ] {
        for (folder, policy, mode, workers) in [
            ("solo", "exclusive", "exclusive", "serve=1"),
            ("timeslice6", "timeslice", "timeslice", "serve=1,train=6"),
            ("mps-plugin6", "mps-plugin", "mps", "serve=1,train=6"),
            ("mps-unlimited6", "mps-unlimited", "mps", "serve=1,train=6"),
        ] {
            let name = format!("{policy}-capacity-{objective}-r1");
            copy_tree(
                &data.join(from).join(folder),
                &tmp.path().join("cohorts").join(&name),
            );
            let mut e = entry(&name, policy, mode, Outcome::AlreadyComplete, "");
            e.reason = None;
            e.workers = workers.into();
            e.capacity = Some("capacity".into());
            index.cohorts.push(e);
        }
    }
    let hogs = data.join("2026-11-30-round2/study/cohorts");
    copy_tree(
        &hogs.join("mps-plugin-hog1-train6-r1"),
        &tmp.path().join("cohorts/mps-plugin-hog1-train6-r1"),
    );
    let mut e = entry(
        "mps-plugin-hog1-train6-r1",
        "mps-plugin",
        "mps",
        Outcome::AlreadyComplete,
        "",
    );
    e.reason = None;
    index.cohorts.push(e);
    copy_tree(
        &hogs.join("timeslice-hog1-train6-r1.failed-1"),
        &tmp.path().join("cohorts/timeslice-hog1-train6-r1.failed-1"),
    );
    let mut e = entry(
        "timeslice-hog1-train6-r1",
        "timeslice",
        "timeslice",
        Outcome::FailedEarlier,
        "replica 1: out_of_memory: failed in warmup",
    );
    e.failed_dirs = vec!["cohorts/timeslice-hog1-train6-r1.failed-1".into()];
    index.cohorts.push(e);
    index.cohorts.push(entry(
        "mig-train7-r1",
        "mig",
        "mig",
        Outcome::NotOffered,
        "mode mig needs 7 MIG instance(s) on one GPU",
    ));
    // Exclusive ran alone above: two exclusive trainers on a one-GPU node lose one cohort, and
    // the verdict does not call the policy unmeasured.
    index.cohorts.push(entry(
        "exclusive-train2-r1",
        "exclusive",
        "exclusive",
        Outcome::NotOffered,
        "exclusive with 2 workers needs 2 GPUs, one per worker; this node has 1 out of MIG mode (GPU 0)",
    ));
    let (html, _) = report(tmp.path(), &index);
    let verdict = &html[html.find("<ul class=\"findings\">").unwrap()..html.find("</ul>").unwrap()];
    for need in [
        "Train throughput, card full (7 train workers on one device):</strong> no policy measured adds throughput",
        "Train throughput, card not full (one train worker alone):</strong>",
        "Inference p99 beside others (1 infer + 6 train):</strong>",
        "Serving capacity at the objective (p99 &lt;= 10 ms):</strong> mps-plugin sustains the most (serve=1,train=6): mps-plugin 850 to 1,000, timeslice below 25 and mps-unlimited below 25 requests/s; exclusive alone: 11,000 to 16,000 requests/s.",
        "Serving capacity at the objective (p99 &lt;= 25 ms):</strong> mps-plugin sustains the most (serve=1,train=6): mps-plugin at least 2,400,",
        "Memory isolation against a worker that takes all memory:</strong> mps-plugin (the hog got 19.9 GiB; 6 of 6 others completed) kept the others running; timeslice (the hog got 139.2 GiB;",
        "Energy per sample (train, 7 on one device):</strong> training samples per device joule: mps-plugin 9.60",
        "Not measured here:</strong> mig: not measured: mode mig needs 7 MIG instance(s) on one GPU (1 cohort not offered); exclusive: 1 cohort not offered: exclusive with 2 workers needs 2 GPUs, one per worker; this node has 1 out of MIG mode (GPU 0).",
    ] {
        assert!(verdict.contains(need), "{need}\n{verdict}");
    }
    assert!(!verdict.contains("not measured: no"), "{verdict}");
}

#[test]
fn where_the_study_kept_the_workers_records_the_header_names_driver_cuda_hosts_and_mig_mode() {
    // Two recorded H200 cohorts laid out as a study keeps them: cohorts/<name>/summary.json
    // beside worker-<i>/worker.json.
    let fixtures = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("fixtures/h200");
    let tmp = tempfile::tempdir().unwrap();
    let mut cohorts = Vec::new();
    for (name, fixture, policy, mode, workers, baseline) in [
        (
            "exclusive-train1-r1",
            "exclusive-solo-train",
            "exclusive",
            "exclusive",
            "train=1",
            true,
        ),
        (
            "mps-train4-r1",
            "mps-train4",
            "mps-unlimited",
            "mps",
            "train=4",
            false,
        ),
    ] {
        let dir = tmp.path().join("cohorts").join(name);
        copy_tree(&fixtures.join(fixture), &dir);
        std::fs::rename(dir.join("expected-summary.json"), dir.join("summary.json")).unwrap();
        // The trainers of the shared cohort name the build that ran them; the solo, recorded
        // before builds were, does not.
        if name == "mps-train4-r1" {
            for i in 0..4 {
                let path = dir.join(format!("worker-{i}/worker.json"));
                let mut v: serde_json::Value =
                    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
                v["coload"] = "0.1.0 (git 0123456789ab, libtorch 2.11.0+cu130)".into();
                std::fs::write(&path, v.to_string()).unwrap();
            }
        }
        let summary: coload_cohort_schema::CohortSummary =
            coload_cohort_schema::read_document(&dir.join("summary.json")).unwrap();
        let mut e = entry(name, policy, mode, Outcome::Complete, "");
        e.reason = None;
        e.workers = workers.into();
        e.baseline = baseline;
        e.experiment = Some(summary.experiment);
        cohorts.push(e);
    }
    let index = Index {
        schema_version: coload_cohort_schema::study::INDEX_VERSION,
        plan: "fixtures".into(),
        plan_source: "fixtures".into(),
        node: "1 GPU(s) (GPU 0: NVIDIA H200), MPS available".into(),
        lanes: vec![0],
        cohorts,
        runs: vec![run(1_796_083_200_000_000_000, 600.0)],
    };
    let (html, _) = report(tmp.path(), &index);
    // The run is recorded, the cohorts' times are not (fixtures from an older build).
    assert!(
        html.contains(
            "<dt>wall time</dt><dd>600 s in the 1 run that recorded times, 2026-12-01 00:00 to \
             00:10 UTC; no cohort&#39;s times were recorded (2 cohorts ran with builds that kept \
             none)</dd>"
        ),
        "{}",
        &html[html.find("<dt>node").unwrap_or(0)..][..600]
    );
    assert!(
        html.contains("NVIDIA H200; driver 580.159.04, CUDA 13.0</dd>"),
        "{html}"
    );
    assert!(html.contains("<dt>hosts</dt><dd>vm</dd>"));
    assert!(
        html.contains(
            "<dt>coload</dt><dd>workers ran 0.1.0 (git 0123456789ab, libtorch 2.11.0+cu130) (4 \
             workers); 1 worker record from before builds were recorded; this report: 0.1.0"
        ),
        "{}",
        &html[html.find("<dt>coload").unwrap_or(0)..][..300]
    );
    // The plan had no MIG policy and the workers say MIG mode was off: the verdict says both.
    assert!(html.contains(
        "<strong>Not measured here:</strong> MIG: not measured: the plan has no MIG policy and MIG mode is disabled on this node&#39;s GPUs."
    ));
}

fn timed(name: &str, outcome: Outcome, duration: Option<f64>, windows: Option<f64>) -> Entry {
    let mut e = entry(name, "timeslice", "timeslice", outcome, "");
    e.duration_s = duration;
    e.in_windows_s = windows;
    e
}

fn run(started_unix_ns: u64, wall_s: f64) -> coload_cohort_schema::study::Run {
    coload_cohort_schema::study::Run {
        started_unix_ns,
        wall_s,
        time_budget_s: Some(540.0),
        cohorts_run: 1,
        coload: "0.1.0 (git test)".into(),
    }
}

/// The study's wall time adds its runs; the part inside windows adds the cohorts' windows (a
/// failed cohort's counts none); a cohort run by a build that kept no times is counted as such,
/// and nothing is guessed for it.
#[test]
fn wall_time_adds_runs_and_names_cohorts_without_times() {
    use coload_report::study_report::wall_time;
    let day = 1_796_083_200_000_000_000; // 2026-12-01 00:00 UTC
    let mut index = Index {
        schema_version: coload_cohort_schema::study::INDEX_VERSION,
        plan: "p".into(),
        plan_source: "p".into(),
        node: "n".into(),
        lanes: vec![0],
        cohorts: vec![
            timed("a", Outcome::AlreadyComplete, Some(55.0), Some(45.0)),
            timed("b", Outcome::Complete, Some(165.0), Some(100.0)),
            timed("c", Outcome::FailedEarlier, Some(30.0), None),
            timed("f", Outcome::AlreadyComplete, None, None),
            timed("d", Outcome::NotOffered, None, None),
            timed("e", Outcome::NotRun, None, None),
        ],
        runs: vec![run(day, 200.0), run(day + 3_600_000_000_000, 100.0)],
    };
    assert_eq!(
        wall_time(&index).unwrap(),
        "300 s in the 2 runs that recorded times, 2026-12-01 00:00 to 01:01 UTC; the 3 cohorts \
         with recorded times took 250 s, 58 % of it inside measurement windows; 1 other ran in \
         earlier runs whose builds kept no times"
    );
    // A duration without its windows is an older build's record: still not counted.
    index.cohorts[3].duration_s = Some(45.0);
    assert!(
        wall_time(&index)
            .unwrap()
            .contains("1 other ran in earlier runs")
    );
    index.cohorts[3].in_windows_s = Some(40.0);
    assert_eq!(
        wall_time(&index).unwrap(),
        "300 s in 2 runs, 2026-12-01 00:00 to 01:01 UTC; 185 s of it inside measurement windows \
         (62 % of one lane's time; the cohorts' own processes took 295 s)"
    );
    index.lanes = vec![0, 1];
    assert!(
        wall_time(&index)
            .unwrap()
            .contains("(31 % of 2 lanes' time;")
    );
    // An index from before runs and times were recorded says nothing.
    index.runs.clear();
    for e in &mut index.cohorts {
        e.duration_s = None;
    }
    assert_eq!(wall_time(&index), None);
}

/// The `llm` study's decode cohorts (H200, 2026-12-01): decode workers get throughput sentences
/// of their own, card full and not full, in tokens/s; a serve-llm capacity search the plan has
/// not run yet reads "not run yet", not a pointer to another plan.
#[test]
fn an_llm_study_reads_its_decode_throughput_in_tokens() {
    let src = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .join("docs/results/data/2026-12-01-llm-study/llm");
    let mut index: Index = coload_cohort_schema::read_document(&src.join("index.json")).unwrap();
    index.cohorts.retain(|e| e.workers.starts_with("decode="));
    let tmp = tempfile::tempdir().unwrap();
    for e in &index.cohorts {
        let to = tmp.path().join("cohorts").join(&e.name);
        std::fs::create_dir_all(&to).unwrap();
        std::fs::copy(
            src.join("cohorts").join(&e.name).join("summary.json"),
            to.join("summary.json"),
        )
        .unwrap();
    }
    let mut pending = entry(
        "exclusive-serve-llm1-capacity-r1",
        "exclusive",
        "exclusive",
        Outcome::NotRun,
        "the time budget would run out",
    );
    pending.workers = "serve-llm=1".into();
    index.cohorts.push(pending);
    let (html, _) = report(tmp.path(), &index);
    let verdict = &html[html.find("<ul class=\"findings\">").unwrap()..html.find("</ul>").unwrap()];
    for need in [
        "Decode throughput, card full (7 decode workers on one device):</strong> use mps-plugin 2.84× together (26,017 tokens/s;",
        "timeslice only shares it out: timeslice 0.95× (8,675 tokens/s)",
        "Decode throughput, card not full (one decode worker alone):</strong>",
        "one run and one solo give no interval (timeslice 1.00×, mps-unlimited 0.96× and mps-plugin 0.51×)",
        "Serving capacity at an objective:</strong> not run yet: the plan&#39;s serving cohorts are among those not run yet (below).",
    ] {
        assert!(verdict.contains(need), "{need}\n{verdict}");
    }
    assert!(!verdict.contains(
        "decode workers on one device):</strong> use mps-plugin 2.84× together (26,017 samples/s"
    ));
}

/// The `.json` files under `from` (summaries, capacity reports, worker records: not the
/// gzipped batch records) copied to `to`.
fn copy_json(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let path = entry.path();
        let target = to.join(entry.file_name());
        if path.is_dir() {
            copy_json(&path, &target);
        } else if path.extension().is_some_and(|e| e == "json") {
            std::fs::create_dir_all(to).unwrap();
            std::fs::copy(&path, &target).unwrap();
        }
    }
}

/// A frontier study recorded on one H200 (docs/results/data/2026-12-02-frontier), copied.
fn frontier_study(name: &str) -> (tempfile::TempDir, Index) {
    let src = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .join("docs/results/data/2026-12-02-frontier")
        .join(name);
    let tmp = tempfile::tempdir().unwrap();
    copy_json(&src, tmp.path());
    let index: Index = coload_cohort_schema::read_document(&src.join("index.json")).unwrap();
    (tmp, index)
}

#[test]
fn a_frontier_study_opens_with_its_decision_table_and_frontier_chart() {
    let (tmp, index) = frontier_study("frontier-serve");
    let (html, md) = report(tmp.path(), &index);
    let c: coload_cohort_schema::Comparison =
        coload_cohort_schema::read_document(&tmp.path().join("report/comparison.json")).unwrap();
    let d = c
        .decision
        .clone()
        .expect("a study with capacity searches beside trainers has a decision");
    assert_eq!(d.mix, "serve=1,train=6");
    assert_eq!(d.tenants, 7);
    let row = |need: &str| d.rows.iter().find(|r| r.need == need).unwrap();
    // By hand from capacity.json: replicas 7 passed 800 requests/s; replicas 4's bracket ends
    // at 672.7, below it; the others passed nothing.
    assert_eq!(
        row("serve at the objective beside training").policies,
        ["mps-replicas-7"]
    );
    // By hand from the probes' summaries: the six trainers beside the endpoint did the most
    // under replicas 2 (at the lowest rate probed, 50 requests/s, which failed); time-slicing's
    // interval lies below it (1.06x against 1.85x one solo trainer).
    let train = row("training throughput beside the endpoint");
    assert_eq!(train.policies[0], "mps-replicas-2");
    assert!(
        !train.policies.contains(&"timeslice".to_owned()),
        "{train:?}"
    );
    // Replicas 2 spreads 7 Pods over ceil(7/2) = 4 cards.
    assert!(train.cards.starts_with("4 cards"), "{}", train.cards);
    // Frontier: replicas 7, 4 and 2; unlimited MPS and time-slicing are dominated by replicas
    // 2 (no capacity, less training).
    let front: Vec<&str> = d
        .points
        .iter()
        .filter(|p| p.on_frontier)
        .map(|p| p.policy.as_str())
        .collect();
    assert_eq!(front.len(), 3, "{front:?}");
    for p in ["mps-replicas-2", "mps-replicas-4", "mps-replicas-7"] {
        assert!(front.contains(&p), "{front:?}");
    }
    // The table opens both pages, before the table of contents and the verdict.
    let table = html
        .find("Decision for serve=1,train=6 at p99 &lt;= 10 ms")
        .unwrap();
    assert!(table < html.find("<nav class=\"toc\"").unwrap());
    assert!(html.contains("serving capacity against the trainers"));
    assert!(md.find("## Decision for serve=1,train=6").unwrap() < md.find("## Verdict").unwrap());
    insta::assert_snapshot!(
        "frontier_serve_decision",
        coload_report::decision_markdown(&c.decision.clone().unwrap())
    );
}

#[test]
fn a_share_sweep_shows_what_each_share_delivers_against_its_promise() {
    let src = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .join("docs/results/data/2026-12-02-share-sweep");
    let tmp = tempfile::tempdir().unwrap();
    copy_json(&src.join("cohorts"), &tmp.path().join("cohorts"));
    let index: Index = coload_cohort_schema::read_document(&src.join("index.json")).unwrap();
    let (html, md) = report(tmp.path(), &index);
    let c: coload_cohort_schema::Comparison =
        coload_cohort_schema::read_document(&tmp.path().join("report/comparison.json")).unwrap();
    let points = coload_analysis::fidelity::share_fidelity(&c);
    // Two workloads under five policies.
    assert_eq!(points.len(), 10);
    // By hand from the summaries: the trainer at replicas 4 (25 % of the threads) ran at the
    // mean of its two runs over the mean of the card's three solo runs, 0.444.
    let r4 = points
        .iter()
        .find(|p| {
            p.workload == coload_cohort_schema::Workload::Train && p.label.starts_with("MPS, 4")
        })
        .unwrap();
    assert!((r4.promised_pct - 25.0).abs() < 1e-9);
    assert!(
        (r4.delivered.ratio - 0.4443).abs() < 5e-4,
        "{:?}",
        r4.delivered
    );
    assert!(r4.delivered.low.unwrap() < r4.delivered.ratio);
    assert!(md.contains("## What a share delivers against what it promises"));
    assert!(html.contains("delivered fraction of solo against the share promised"));
    assert!(html.contains("delivered = promised"));
    // No capacity search: no decision table.
    assert!(c.decision.is_none());
    assert!(!md.contains("## Decision for"));
}

#[test]
fn an_llm_frontier_keeps_both_shares_whose_brackets_tie_and_reads_tokens() {
    let (tmp, index) = frontier_study("frontier-llm");
    report(tmp.path(), &index);
    let c: coload_cohort_schema::Comparison =
        coload_cohort_schema::read_document(&tmp.path().join("report/comparison.json")).unwrap();
    let d = c.decision.unwrap();
    assert_eq!(d.mix, "serve-llm=1,train=6");
    let serve = &d.rows[0];
    // By hand from capacity.json: replicas 4 and 7 both passed 38.05 and failed 45.25 requests/s;
    // neither beats the other, and replicas 4's trainers did more (the first named).
    assert_eq!(serve.policies, ["mps-replicas-4", "mps-replicas-7"]);
    assert!(serve.get.contains("output tokens/s"), "{}", serve.get);
}

#[test]
fn energy_is_set_beside_the_solo_of_the_same_card_only() {
    // decision-rows ran every cohort and its solos on one card: the solo's joules stand beside
    // the seven trainers' (by hand: the three solo trainers' samples per device joule, mean).
    let (tmp, index) = frontier_study("decision-rows");
    let (html, _) = report(tmp.path(), &index);
    let sentence = html
        .split("Energy per sample (train, 7 on one device):</strong>")
        .nth(1)
        .and_then(|s| s.split("</li>").next())
        .unwrap();
    assert!(
        sentence.contains("; solo on a whole GPU of the same card 9.02."),
        "{sentence}"
    );
}

/// A capacity search's trainers divide by the solos of their card in the search's own run of
/// the study: the frontier study's searches marked as run 2 with their solos of run 1 get no
/// ratio against solo; with the solos in run 2 too, the ratios are the study's own.
#[test]
fn a_search_divides_by_the_solos_of_its_own_run() {
    let (tmp, mut index) = frontier_study("frontier-serve");
    let about = About {
        title: "t".into(),
        description: "t".into(),
        node: index.node.clone(),
    };
    let train_ratios = |index: &Index| -> Vec<Option<f64>> {
        let c = coload_report::study_report::assemble(tmp.path(), &about, index)
            .unwrap()
            .comparison;
        c.decision
            .unwrap()
            .points
            .iter()
            .map(|p| p.train_vs_solo.map(|r| r.ratio))
            .collect()
    };
    let recorded = train_ratios(&index);
    assert!(recorded.iter().any(Option::is_some), "{recorded:?}");
    for e in &mut index.cohorts {
        e.run = Some(if e.baseline { 1 } else { 2 });
    }
    assert!(
        train_ratios(&index).iter().all(Option::is_none),
        "{:?}",
        train_ratios(&index)
    );
    for e in &mut index.cohorts {
        e.run = Some(2);
    }
    assert_eq!(train_ratios(&index), recorded);
}

/// Repeats that a precision made unnecessary are counted as such in the report's provenance,
/// not left out of the planned total: the H200 study run to a precision skipped eight.
#[test]
fn repeats_not_needed_are_counted_in_the_provenance() {
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .join("docs/results/data/2026-12-02-precision/precision");
    let index: Index = coload_cohort_schema::read_document(&dir.join("index.json")).unwrap();
    let settled = index
        .cohorts
        .iter()
        .filter(|e| e.outcome == Outcome::Settled)
        .count();
    assert!(settled > 0);
    let about = About {
        title: "t".into(),
        description: "t".into(),
        node: index.node.clone(),
    };
    let assembled = coload_report::study_report::assemble(&dir, &about, &index).unwrap();
    let (_, cohorts) = assembled
        .context
        .provenance
        .iter()
        .find(|(k, _)| k == "cohorts")
        .unwrap();
    assert!(
        cohorts.contains(&format!("{settled} not needed (their shape settled)")),
        "{cohorts}"
    );
}
