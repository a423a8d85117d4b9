//! bench-cohort end to end: a real 2-worker CPU cohort through the real bench-worker, and the
//! failure path (one worker fails: the others are told through abort.json and the cohort is
//! reported incomplete) with a stand-in worker at the process seam.

use std::path::{Path, PathBuf};
use std::process::Command;

use coload_cohort_schema::{AbortRecord, FailureKind, Workload, exit, read_document};

const COHORT: &str = env!("CARGO_BIN_EXE_bench-cohort");

/// The real bench-worker, built next to bench-cohort by `cargo test --workspace`.
fn worker_bin() -> PathBuf {
    let p = Path::new(COHORT).with_file_name("bench-worker");
    assert!(
        p.exists(),
        "{} is missing: build it first (cargo build -p bench-worker, or cargo test --workspace)",
        p.display()
    );
    p
}

#[test]
fn a_real_cpu_cohort_completes_and_is_summarized() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let output = Command::new(COHORT)
        .args([
            "--workers",
            "infer=1,train=1",
            "--mode",
            "timeslice",
            "--device",
            "cpu",
        ])
        .args(["--batch-size", "2", "--image-size", "32", "--window-s", "2"])
        .args([
            "--warmup-batches",
            "1",
            "--start-lead-s",
            "2",
            "--join-timeout-s",
            "120",
        ])
        // One model per workload, passed through to every worker.
        .args(["--model", "train=squeezenet1_1,infer=resnet18"])
        .args(["--execution", "eager"])
        .arg("--worker-bin")
        .arg(worker_bin())
        .arg("--out")
        .arg(&out)
        .env("OMP_NUM_THREADS", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(table.contains("2 workers (1 train, 1 infer)"), "{table}");
    let summary: coload_cohort_schema::CohortSummary =
        read_document(&out.join("summary.json")).unwrap();
    assert_eq!(summary.count, 2);
    assert!(summary.experiment.starts_with("timeslice-infer1-train1-"));
    let model = |w| summary.groups[&w].model.as_deref();
    assert_eq!(model(Workload::Train), Some("squeezenet1_1"));
    assert_eq!(model(Workload::Infer), Some("resnet18"));
    assert!(
        table.contains("models train squeezenet1_1, infer resnet18, eager"),
        "{table}"
    );
    for i in 0..2 {
        let w = out.join(format!("worker-{i}"));
        assert!(w.join("worker.json").exists());
        assert!(w.join("batches.jsonl").exists());
        assert!(
            std::fs::read_to_string(w.join("log"))
                .unwrap()
                .contains("window: done")
        );
    }
}

#[test]
fn a_failing_worker_stops_the_cohort_and_names_it() {
    let dir = tempfile::tempdir().unwrap();
    // A stand-in worker: replica 1 fails at once with the workload code; the others wait at
    // the "barrier" until abort.json appears, as bench-worker does, and exit with its code.
    let fake = dir.path().join("fake-worker");
    std::fs::write(
        &fake,
        r#"#!/bin/sh
while [ $# -gt 0 ]; do
  case "$1" in
    --replica) replica=$2; shift ;;
    --experiment) experiment=$2; shift ;;
    --sync-dir) sync=$2; shift ;;
  esac
  shift
done
mkdir -p "$sync/$experiment"
if [ "$replica" = 1 ]; then echo "replica 1: out of memory" >&2; exit 20; fi
i=0
while [ $i -lt 200 ]; do
  if [ -f "$sync/$experiment/abort.json" ]; then echo "aborted" >&2; exit 15; fi
  sleep 0.05; i=$((i + 1))
done
exit 0
"#,
    )
    .unwrap();
    let mut perms = std::fs::metadata(&fake).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&fake, perms).unwrap();

    let out = dir.path().join("run");
    let output = Command::new(COHORT)
        .args(["--count", "3", "--workload", "train", "--mode", "timeslice"])
        .arg("--worker-bin")
        .arg(&fake)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(i32::from(exit::INCOMPLETE_COHORT)),
        "{stderr}"
    );
    assert!(
        stderr.contains("the cohort failed (replica 1 first)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("replica 1: exited with 20 (workload_failed)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("replica 0: exited with 15 (barrier_aborted)"),
        "{stderr}"
    );
    assert!(!out.join("summary.json").exists());
    let sync = out.join("sync");
    let experiment = std::fs::read_dir(&sync)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let abort: AbortRecord = read_document(&experiment.join("abort.json")).unwrap();
    assert_eq!(abort.kind, FailureKind::PeerFailed);
    assert_eq!(abort.by_replica, AbortRecord::LAUNCHER);
    assert!(
        abort.reason.contains("replica 1 exited with 20"),
        "{}",
        abort.reason
    );
    assert_eq!(
        std::fs::read_to_string(out.join("worker-1").join("log")).unwrap(),
        "replica 1: out of memory\n"
    );
}

#[test]
fn bad_arguments_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        Command::new(COHORT)
            .args(args)
            .arg("--out")
            .arg(dir.path().join("x"))
            .args(["--worker-bin", COHORT])
            .output()
            .unwrap()
    };
    let o = run(&["--workers", "train=0", "--mode", "timeslice"]);
    assert_eq!(o.status.code(), Some(i32::from(exit::INVALID_INPUT)));
    assert!(String::from_utf8_lossy(&o.stderr).contains("0 train workers"));
    let o = run(&[
        "--workers",
        "train=2",
        "--mode",
        "timeslice",
        "--visible-devices",
        "a",
    ]);
    assert_eq!(o.status.code(), Some(i32::from(exit::INVALID_INPUT)));
    assert!(String::from_utf8_lossy(&o.stderr).contains("lists 1 devices for 2 workers"));
    let o = run(&["--mode", "timeslice"]);
    assert_eq!(o.status.code(), Some(i32::from(exit::INVALID_INPUT)));
    assert!(String::from_utf8_lossy(&o.stderr).contains("say which workers to run"));
    let o = run(&[
        "--workers",
        "infer=1,train=1",
        "--mode",
        "timeslice",
        "--model",
        "train=resnet50",
    ]);
    assert_eq!(o.status.code(), Some(i32::from(exit::INVALID_INPUT)));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no model for infer"));
    let o = run(&[
        "--count",
        "1",
        "--workload",
        "train",
        "--mode",
        "mps",
        "--execution",
        "x",
    ]);
    assert_eq!(o.status.code(), Some(i32::from(exit::INVALID_INPUT)));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cuda-graph"));
}
