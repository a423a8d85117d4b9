//! `bench-cohort study` end to end: the built-in `quick` plan with real CPU workers (its report
//! renders, a second run resumes without running anything), a capacity search as a cohort of a
//! plan (complete without a summary of its own, in the report, skipped on resume), failed
//! cohorts kept and re-run only when asked (a stand-in worker that fails, at the process seam),
//! and bad plans refused with their line.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use coload_cohort_schema::{FailureKind, exit};

mod common;

use common::{COHORT, worker_bin};

/// Runs `bench-cohort study ...` as a node without GPU (an empty `nvidia-smi -L` listing), so
/// the test is the same on a GPU machine.
fn study(dir: &Path, args: &[&str], worker: &Path) -> Output {
    let listing = dir.join("no-gpu.txt");
    std::fs::write(&listing, "").unwrap();
    Command::new(COHORT)
        .arg("study")
        .args(args)
        .arg("--node-listing")
        .arg(&listing)
        .arg("--worker-bin")
        .arg(worker)
        .env("OMP_NUM_THREADS", "1")
        .output()
        .unwrap()
}

fn index(out: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(out.join("index.json")).unwrap()).unwrap()
}

fn outcomes(index: &serde_json::Value) -> Vec<(String, String)> {
    index["cohorts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_owned(),
                c["outcome"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn study_quick_runs_on_the_cpu_renders_its_report_and_resumes() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("quick");
    let o = study(
        tmp.path(),
        &["quick", "--out", out.to_str().unwrap()],
        &worker_bin(),
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let idx = index(&out);
    let got = outcomes(&idx);
    let complete: Vec<&str> = got
        .iter()
        .filter(|(_, o)| o == "complete")
        .map(|(n, _)| n.as_str())
        .collect();
    // Interleaved: both solos, each shape's first repeat, the second repeats, and the solos
    // again (a baseline brackets the cohorts it normalises).
    assert_eq!(
        complete,
        [
            "exclusive-train1-r1",
            "exclusive-infer1-r1",
            "timeslice-train2-r1",
            "timeslice-infer1-train1-r1",
            "timeslice-train2-r2",
            "timeslice-infer1-train1-r2",
            "exclusive-train1-r2",
            "exclusive-infer1-r2",
        ]
    );
    // MPS is not offered without a GPU, and says so.
    let mps: Vec<&serde_json::Value> = idx["cohorts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["policy"] == "mps")
        .collect();
    assert_eq!(mps.len(), 4);
    for c in mps {
        assert_eq!(c["outcome"], "not_offered");
        assert!(c["reason"].as_str().unwrap().contains("needs a GPU"));
    }
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(
        table.contains("12 cohorts: 8 complete (0 from earlier runs), 0 failed"),
        "{table}"
    );
    for name in &complete {
        assert!(
            out.join("cohorts")
                .join(name)
                .join("summary.json")
                .is_file()
        );
        assert!(out.join("cohorts").join(name).join("cohort.log").is_file());
    }
    assert!(out.join("plan.toml").is_file());
    let html = std::fs::read_to_string(out.join("report/report.html")).unwrap();
    assert!(html.contains("<title>coload study: quick</title>"));
    let verdict = html.find(">Verdict</h2>").expect("a verdict section");
    let first_details = html.find("<details>").expect("folded cohorts");
    let first_svg = html.find("<svg").expect("charts");
    assert!(verdict < first_svg && first_svg < first_details);
    assert!(html.contains("Inference p99 beside others"), "{html}");
    // Folded: each of the 8 cohorts, the 4 shapes of repeats, and the list of the study's 12
    // cohorts (report v3 folds every table of more than 8 rows).
    assert_eq!(
        html.matches("<details>").count(),
        8 + 4 + 1,
        "8 cohorts, 4 shapes of repeats and the cohort list"
    );
    let md = std::fs::read_to_string(out.join("report/comparison.md")).unwrap();
    assert!(
        md.contains("## Verdict") && md.contains("not offered"),
        "{md}"
    );

    // Again: everything is complete, nothing runs.
    let begin = std::time::Instant::now();
    let o = study(
        tmp.path(),
        &["quick", "--out", out.to_str().unwrap()],
        &worker_bin(),
    );
    assert_eq!(o.status.code(), Some(0));
    assert!(begin.elapsed().as_secs() < 20, "{:?}", begin.elapsed());
    let again = outcomes(&index(&out));
    assert_eq!(
        again
            .iter()
            .filter(|(_, o)| o == "already_complete")
            .count(),
        8,
        "{again:?}"
    );
    lost_cohort_runs_in_a_block_of_its_own_run(tmp.path(), &out);
}

/// A cohort of the complete quick study in `out` lost (its folder gone): the third run runs it
/// in a block of its own run, with the trainer's solo re-run before and after it; the first
/// run's solos stay in theirs.
fn lost_cohort_runs_in_a_block_of_its_own_run(tmp: &Path, out: &Path) {
    std::fs::remove_dir_all(out.join("cohorts/timeslice-train2-r2")).unwrap();
    let o = study(
        tmp,
        &["quick", "--out", out.to_str().unwrap()],
        &worker_bin(),
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let idx = index(out);
    let ran: Vec<(String, u64)> = idx["cohorts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["outcome"] == "complete")
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_owned(),
                c["run"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        ran,
        [
            ("exclusive-train1-run3-r1".to_owned(), 3),
            ("timeslice-train2-r2".to_owned(), 3),
            ("exclusive-train1-run3-r2".to_owned(), 3),
        ]
    );
    let comparison: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report/comparison.json")).unwrap())
            .unwrap();
    let blocks: Vec<(String, Option<u64>, usize)> = comparison["baseline_blocks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["workload"].as_str().unwrap().to_owned(),
                b["run"].as_u64(),
                b["experiments"].as_array().unwrap().len(),
            )
        })
        .collect();
    assert_eq!(
        blocks,
        [
            ("train".to_owned(), Some(1), 2),
            ("train".to_owned(), Some(3), 2),
            ("infer".to_owned(), Some(1), 2),
        ]
    );
}

/// A fixed-rate serve cohort and a capacity search of at most two probes, on the CPU with tiny
/// shapes. The objective (the median within 1 s) is lenient so that a loaded host still
/// completes the search; whether a probe passes does not matter here, only that the study
/// treats the search as one complete cohort.
const SERVE_PLAN: &str = r#"
name = "serve"
[flags]
window_s = 2
warmup_batches = 1
start_lead_s = 2
batch_size = 2
image_size = 32
join_timeout_s = 120
[[policy]]
name = "timeslice"
mode = "timeslice"
[[cohort]]
workers = "serve=1"
flags = { rate = 15, slo_ms = 1000, slo_quantile = 0.5 }
[[cohort]]
workers = "serve=1"
name = "capacity"
flags = { find_capacity = true, rate = 15, rate_max = 30, max_probes = 2, slo_ms = 1000, slo_quantile = 0.5 }
"#;

#[test]
fn a_capacity_search_in_a_plan_completes_shows_in_the_report_and_resumes() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = tmp.path().join("serve.toml");
    std::fs::write(&plan, SERVE_PLAN).unwrap();
    let out = tmp.path().join("s");
    let args = [plan.to_str().unwrap(), "--out", out.to_str().unwrap()];
    let o = study(tmp.path(), &args, &worker_bin());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let idx = index(&out);
    assert_eq!(
        outcomes(&idx),
        [
            ("timeslice-serve1-r1".to_owned(), "complete".to_owned()),
            ("timeslice-capacity-r1".to_owned(), "complete".to_owned()),
        ],
        "{idx}"
    );
    let entry = &idx["cohorts"][1];
    let answer = entry["capacity"].as_str().expect("the search's answer");
    assert!(
        answer.contains("requests/s at p50 <= 1,000 ms (stop: "),
        "{answer}"
    );
    assert!(entry["reason"].is_null(), "{entry}");
    // The search's folder: capacity.json and a cohort per probe, no summary of its own.
    let dir = out.join("cohorts/timeslice-capacity-r1");
    assert!(!dir.join("summary.json").exists());
    let capacity: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("capacity.json")).unwrap()).unwrap();
    let probes = capacity["probes"].as_array().unwrap();
    assert!((1..=2).contains(&probes.len()), "{capacity}");
    for p in probes {
        let name = Path::new(p["dir"].as_str().unwrap()).file_name().unwrap();
        assert!(dir.join(name).join("summary.json").is_file(), "{p}");
    }
    // The comparison holds the fixed-rate cohort only: the probes are not cohorts of a shape.
    let comparison: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report/comparison.json")).unwrap())
            .unwrap();
    assert_eq!(comparison["cohorts"].as_array().unwrap().len(), 1);
    // The report shows the capacity, the load curve with the probes and the fixed-rate cohort,
    // and the table.
    let html = std::fs::read_to_string(out.join("report/report.html")).unwrap();
    assert!(html.contains("capacity at p50 &lt;= 1,000 ms"), "{html}");
    assert!(html.contains(
        "aria-label=\"request latency against offered load, objective p50 &lt;= 1,000 ms\""
    ));
    assert!(html.contains(">objective p50 &lt;= 1,000 ms · "));
    assert!(
        html.contains("<title>timeslice: 15 requests/s, p50 "),
        "{html}"
    );
    assert!(html.contains("<title>timeslice (fixed rate, timeslice-serve1-"));
    assert!(html.contains("<h3>Capacity at the objective</h3>"));
    assert!(html.contains("Serving capacity at the objective (p50 &lt;= 1,000 ms):"));
    let before = std::fs::read(dir.join("capacity.json")).unwrap();

    // Again: both complete, nothing runs, the search is left as it was.
    let begin = std::time::Instant::now();
    let o = study(tmp.path(), &args, &worker_bin());
    assert_eq!(o.status.code(), Some(0));
    assert!(begin.elapsed().as_secs() < 20, "{:?}", begin.elapsed());
    let idx = index(&out);
    assert!(
        outcomes(&idx).iter().all(|(_, o)| o == "already_complete"),
        "{idx}"
    );
    assert_eq!(idx["cohorts"][1]["capacity"].as_str(), Some(answer));
    assert_eq!(std::fs::read(dir.join("capacity.json")).unwrap(), before);
    assert!(
        !out.join("cohorts/timeslice-capacity-r1.interrupted-1")
            .exists()
    );
    assert!(
        std::fs::read_to_string(out.join("report/report.html"))
            .unwrap()
            .contains("capacity at p50 &lt;= 1,000 ms")
    );
}

/// The frontier plan from one command on the CPU, with real workers: the endpoint alone and
/// beside a trainer under time-slicing (the searches shrunk to two probes), the solo trainer
/// bracketing them, and every policy a CPU node lacks listed with its reason. About a minute on
/// two cores.
#[test]
fn study_frontier_for_a_mix_runs_on_the_cpu() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("frontier");
    let args = [
        "frontier",
        "--mix",
        "serve=1,train=1",
        "--slo-ms",
        "1000",
        "--out",
        out.to_str().unwrap(),
        "--no-progress-bar",
    ];
    let o = study(tmp.path(), &args, &worker_bin());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let idx = index(&out);
    let got = outcomes(&idx);
    let outcome = |name: &str| {
        got.iter()
            .find(|(n, _)| n == name)
            .map_or_else(|| panic!("{name} missing: {got:?}"), |(_, o)| o.as_str())
    };
    for name in [
        "exclusive-train1-r1",
        "exclusive-train1-r2",
        "exclusive-train1-r3",
        "exclusive-serve1-capacity-r1",
        "timeslice-serve1-train1-capacity-r1",
    ] {
        assert_eq!(outcome(name), "complete", "{idx}");
    }
    for policy in [
        "mps-replicas-2",
        "mps-replicas-4",
        "mps-replicas-7",
        "mps-unlimited",
        "mig",
    ] {
        let name = format!("{policy}-serve1-train1-capacity-r1");
        assert_eq!(outcome(&name), "not_offered", "{idx}");
    }
    assert_eq!(got.len(), 10, "{got:?}");
    // The solos open and close the study.
    assert_eq!(got.first().unwrap().0, "exclusive-train1-r1");
    assert_eq!(got.last().unwrap().0, "exclusive-train1-r3");
    let search = idx["cohorts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "timeslice-serve1-train1-capacity-r1")
        .unwrap();
    assert!(
        search["capacity"]
            .as_str()
            .is_some_and(|a| a.contains("at p50 <= 1,000 ms")),
        "{search}"
    );
    // The folder records the plan made for this mix; the report is written.
    let plan = std::fs::read_to_string(out.join("plan.toml")).unwrap();
    assert!(
        plan.contains("--mix serve=1,train=1 --slo-ms 1000"),
        "{plan}"
    );
    assert!(out.join("report/report.html").is_file());
    // Another mix in the same folder is another plan: refused.
    let mut other = args;
    other[2] = "serve=1,train=2";
    let o = study(tmp.path(), &other, &worker_bin());
    assert_eq!(o.status.code(), Some(i32::from(exit::INVALID_INPUT)));
    // A mix without an endpoint is refused before anything runs.
    let o = study(
        tmp.path(),
        &[
            "frontier",
            "--mix",
            "train=4",
            "--out",
            tmp.path().join("x").to_str().unwrap(),
        ],
        &worker_bin(),
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(i32::from(exit::INVALID_INPUT)),
        "{stderr}"
    );
    assert!(
        stderr.contains("exactly one serve or serve-llm worker"),
        "{stderr}"
    );
    assert!(!tmp.path().join("x").exists());
}

/// A stand-in bench-worker that fails at once with the workload code (20).
fn failing_worker(dir: &Path) -> PathBuf {
    let fake = dir.join("failing-worker");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho \"out of memory (stand-in)\" >&2\nexit 20\n",
    )
    .unwrap();
    let mut perms = std::fs::metadata(&fake).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&fake, perms).unwrap();
    fake
}

const ONE_COHORT: &str = r#"
name = "one"
[flags]
window_s = 2
start_lead_s = 1
join_timeout_s = 20
[[policy]]
name = "timeslice"
mode = "timeslice"
[[cohort]]
workers = "train=2"
"#;

#[test]
fn a_failed_cohort_is_kept_reported_and_run_again_only_when_asked() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = tmp.path().join("one.toml");
    std::fs::write(&plan, ONE_COHORT).unwrap();
    let out = tmp.path().join("s");
    let fake = failing_worker(tmp.path());
    let args = [plan.to_str().unwrap(), "--out", out.to_str().unwrap()];
    let cohorts = out.join("cohorts");

    let o = study(tmp.path(), &args, &fake);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(i32::from(exit::INCOMPLETE_COHORT)),
        "{stderr}"
    );
    let idx = index(&out);
    let c = &idx["cohorts"][0];
    assert_eq!(c["outcome"], "failed");
    assert_eq!(c["exit_code"], 30);
    assert_eq!(c["failed_dirs"][0], "cohorts/timeslice-train2-r1.failed-1");
    // The reason is the launcher's typed failure.json (kind and replica), not a line of a log:
    // the stand-in's stderr says "out of memory", which only its log holds.
    let reason = c["reason"].as_str().unwrap();
    // Both stand-ins fail at once; whichever the launcher saw first is named.
    assert!(
        reason.starts_with("replica 0: worker_exited: exited with 20 (workload_failed)")
            || reason.starts_with("replica 1: worker_exited: exited with 20 (workload_failed)"),
        "{c}"
    );
    assert!(!reason.contains("out of memory"), "{c}");
    let kept = cohorts.join("timeslice-train2-r1.failed-1");
    let failure: coload_cohort_schema::CohortFailure =
        coload_cohort_schema::read_document(&kept.join("failure.json")).unwrap();
    assert_eq!(failure.kind, FailureKind::WorkerExited);
    assert!(matches!(failure.replica, Some(0 | 1)), "{failure:?}");
    assert_eq!(failure.exit_code, exit::INCOMPLETE_COHORT);
    assert_eq!(failure.workers.len(), 2);
    assert!(kept.join("cohort.log").is_file());
    assert!(kept.join("study-failure.json").is_file());
    assert!(kept.join("worker-1").join("log").is_file());
    assert!(!cohorts.join("timeslice-train2-r1").exists());
    // No cohort complete: no report, and it says so.
    assert!(!out.join("report").exists());

    // Again without --retry-failed: reported, not run.
    let o = study(tmp.path(), &args, &fake);
    assert_eq!(o.status.code(), Some(i32::from(exit::INCOMPLETE_COHORT)));
    let c = &index(&out)["cohorts"][0];
    assert_eq!(c["outcome"], "failed_earlier");
    assert!(
        c["reason"].as_str().unwrap().contains("--retry-failed"),
        "{c}"
    );
    assert!(!cohorts.join("timeslice-train2-r1.failed-2").exists());
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(
        table.contains("[kept: cohorts/timeslice-train2-r1.failed-1]"),
        "{table}"
    );

    // With --retry-failed: run again, and its failure kept beside the first.
    let mut retry = args.to_vec();
    retry.push("--retry-failed");
    let o = study(tmp.path(), &retry, &fake);
    assert_eq!(o.status.code(), Some(i32::from(exit::INCOMPLETE_COHORT)));
    assert!(cohorts.join("timeslice-train2-r1.failed-1").is_dir());
    assert!(cohorts.join("timeslice-train2-r1.failed-2").is_dir());
    let c = &index(&out)["cohorts"][0];
    assert_eq!(c["outcome"], "failed");
    assert_eq!(c["failed_dirs"].as_array().unwrap().len(), 2);
}

#[test]
fn bad_plans_and_nodes_are_refused_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = tmp.path().join("bad.toml");
    std::fs::write(
        &plan,
        "[[policy]]\nname = \"t\"\nmode = \"timeslice\"\n\n[[cohort]]\nworkers = \"train=2\"\nflags = { mps_replicas = 7 }\n",
    )
    .unwrap();
    let out = tmp.path().join("s");
    let o = study(
        tmp.path(),
        &[plan.to_str().unwrap(), "--out", out.to_str().unwrap()],
        &worker_bin(),
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(i32::from(exit::INVALID_INPUT)),
        "{stderr}"
    );
    assert!(
        stderr.contains("bad.toml, line 5: cohort `t-train2-r1`"),
        "{stderr}"
    );
    assert!(stderr.contains("--mps-replicas"), "{stderr}");
    assert!(!out.exists(), "nothing was created");

    // The article plan needs a GPU.
    let o = study(
        tmp.path(),
        &["article", "--out", out.to_str().unwrap()],
        &worker_bin(),
    );
    assert_eq!(o.status.code(), Some(i32::from(exit::INVALID_INPUT)));
    assert!(String::from_utf8_lossy(&o.stderr).contains("run `bench-cohort study quick`"));

    // `run` is the bare form by name.
    let o = Command::new(COHORT)
        .args([
            "run",
            "--workers",
            "train=0",
            "--mode",
            "timeslice",
            "--out",
        ])
        .arg(tmp.path().join("r"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(i32::from(exit::INVALID_INPUT)));
    assert!(String::from_utf8_lossy(&o.stderr).contains("0 train workers"));
}

#[test]
fn a_dry_run_plans_the_article_for_a_two_gpu_node() {
    let tmp = tempfile::tempdir().unwrap();
    let listing = tmp.path().join("two.txt");
    std::fs::write(
        &listing,
        "GPU 0: NVIDIA H200 (UUID: GPU-a)\nGPU 1: NVIDIA H200 (UUID: GPU-b)\n",
    )
    .unwrap();
    let o = Command::new(COHORT)
        .args(["study", "article", "--dry-run", "--node-mps", "--out"])
        .arg(tmp.path().join("s"))
        .arg("--node-listing")
        .arg(&listing)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("exclusive-train2-r1  train=2  gpus 0,1 (one per worker)  to run"),
        "{text}"
    );
    // Each baseline repeat once per GPU, pinned: every card that runs cohorts of a workload
    // runs its solos too.
    assert!(
        text.contains("exclusive-train1-lane1-r1  train=1  gpu 1  to run"),
        "{text}"
    );
    // 39 cohorts and the two baselines twice more (the middle and the end of the study), each
    // of the two baselines' three repeats on both GPUs: 43 + 6.
    assert!(text.contains("49 cohorts to run"), "{text}");
    assert!(!tmp.path().join("s").exists(), "a dry run writes nothing");
}

#[test]
fn the_gpu_capacity_plan_parses_and_plans_for_a_one_gpu_node_with_mps() {
    let tmp = tempfile::tempdir().unwrap();
    let listing = tmp.path().join("one.txt");
    std::fs::write(&listing, "GPU 0: NVIDIA H200 (UUID: GPU-a)\n").unwrap();
    let plan = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scripts/gpu/capacity.toml"
    );
    let dry_run = |plan: &str| {
        Command::new(COHORT)
            .args(["study", plan, "--dry-run", "--node-mps", "--out"])
            .arg(tmp.path().join("s"))
            .arg("--node-listing")
            .arg(&listing)
            .output()
            .unwrap()
    };
    let o = dry_run(plan);
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Four searches on the one GPU, each counted as the probes it is expected to take (halfway
    // between its fewest and its 5) of 10 + 2 s and the setup of its workers: the server alone
    // 4.5 probes (its fewest: a factor-2 bracket bisected to 20 %) of 12 + 6 s; beside six
    // trainers from 50 requests/s, one halving from its floor, 3.5 of 12 + 8.1 s; from 300,
    // 4.5 of them.
    for cohort in [
        "exclusive-serve1-r1  serve=1  gpu 0  to run  81",
        "timeslice-serve1-train6-r1  serve=1,train=6  gpu 0  to run  70",
        "mps-plugin-serve1-train6-r1  serve=1,train=6  gpu 0  to run  90",
        "mps-unlimited-serve1-train6-r1  serve=1,train=6  gpu 0  to run  90",
    ] {
        assert!(text.contains(cohort), "{cohort}\n{text}");
    }
    assert!(text.contains("4 cohorts to run"), "{text}");
    assert!(!tmp.path().join("s").exists(), "a dry run writes nothing");

    // A start rate outside the search's bounds is refused before anything runs, with its line.
    let bad = tmp.path().join("bad.toml");
    let text = std::fs::read_to_string(plan).unwrap();
    assert!(text.contains("flags = { rate = 50 }"));
    std::fs::write(
        &bad,
        text.replace("flags = { rate = 50 }", "flags = { rate = 10 }"),
    )
    .unwrap();
    let o = dry_run(bad.to_str().unwrap());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(i32::from(exit::INVALID_INPUT)),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "cohort `timeslice-serve1-train6-r1`: the capacity search needs --rate-min <= --rate \
             <= --rate-max, got 25 <= 10 <= 16000"
        ),
        "{stderr}"
    );
}

#[test]
fn a_capacity_search_whose_probe_fails_is_a_failed_cohort_naming_the_probe() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = tmp.path().join("serve.toml");
    std::fs::write(&plan, SERVE_PLAN).unwrap();
    let out = tmp.path().join("s");
    let fake = failing_worker(tmp.path());
    let o = study(
        tmp.path(),
        &[plan.to_str().unwrap(), "--out", out.to_str().unwrap()],
        &fake,
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(i32::from(exit::INCOMPLETE_COHORT)),
        "{stderr}"
    );
    let idx = index(&out);
    let c = &idx["cohorts"][1];
    assert_eq!(c["name"], "timeslice-capacity-r1");
    assert_eq!(c["outcome"], "failed");
    assert!(c["capacity"].is_null(), "{c}");
    let reason = c["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("capacity probe 1 at 15 requests/s did not complete (probe-1-15): "),
        "{reason}"
    );
    // Kept whole, with the search's record of the probe.
    let kept = out.join("cohorts/timeslice-capacity-r1.failed-1");
    assert!(kept.join("capacity.json").is_file());
    assert!(kept.join("probe-1-15").is_dir());
    // Nothing complete: no report.
    assert!(!out.join("report").exists());
}
