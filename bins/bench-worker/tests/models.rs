//! bench-worker with other models than ResNet18, on the CPU with the real libtorch: a mixed
//! cohort that declares one model per workload, a cohort whose workers disagree on the model,
//! a TorchScript worker, and the refusals that must come before the barrier (a file that
//! cannot be used, a CUDA graph on the CPU, an unknown model).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use coload_cohort_schema::{Execution, Stage, Status, WorkerReport, Workload, exit};

#[path = "../../../crates/workload/tests/support/mod.rs"]
mod support;

const WORKER: &str = env!("CARGO_BIN_EXE_bench-worker");

/// One libtorch cohort at a time (see tests/cohort.rs).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Runs workers `(replica, workload, extra flags)` of one cohort to the end.
fn cohort(root: &Path, experiment: &str, workers: &[(u32, &str, Vec<String>)]) -> Vec<Output> {
    let sync = root.join("sync");
    std::fs::create_dir_all(&sync).unwrap();
    let count = workers.len().to_string();
    let children: Vec<_> = workers
        .iter()
        .map(|(replica, workload, extra)| {
            Command::new(WORKER)
                .args(["--experiment", experiment])
                .args(["--replica", &replica.to_string()])
                .args(["--count", &count])
                .args(["--workload", workload, "--mode", "timeslice"])
                .arg("--sync-dir")
                .arg(&sync)
                .arg("--out")
                .arg(root.join(format!("w{replica}")))
                .args(["--device", "cpu", "--batch-size", "2", "--image-size", "32"])
                // Three warmup batches: the first is several times slower than the rest, and the
                // batch buffer is sized from the fastest (a tiny model outran a one-batch estimate).
                .args(["--window-s", "1.5", "--warmup-batches", "3"])
                .args(["--start-lead-s", "2", "--join-timeout-s", "150"])
                .args(["--log-format", "json", "--telemetry-hz", "0"])
                .args(extra)
                .env("OMP_NUM_THREADS", "1")
                .env_remove("JOB_COMPLETION_INDEX")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect()
}

fn report(root: &Path, replica: u32) -> WorkerReport {
    coload_cohort_schema::read_worker_report(&root.join(format!("w{replica}/worker.json"))).unwrap()
}

fn args(flags: &[&str]) -> Vec<String> {
    flags.iter().map(|s| (*s).to_owned()).collect()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_mixed_cohort_runs_one_model_per_workload_and_records_it() {
    let _serial = serial();
    let root = tempfile::tempdir().unwrap();
    let declared = args(&["--model", "train=mobilenet_v2,infer=squeezenet1_1"]);
    let outputs = cohort(
        root.path(),
        "per-workload-models",
        &[(0, "infer", declared.clone()), (1, "train", declared)],
    );
    for (i, o) in outputs.iter().enumerate() {
        assert_eq!(o.status.code(), Some(0), "replica {i}: {}", stderr(o));
    }
    let (infer, train) = (report(root.path(), 0), report(root.path(), 1));
    assert_eq!(infer.config.model, "squeezenet1_1");
    assert_eq!(infer.config.parameter_count, Some(1_235_496));
    assert_eq!(train.config.model, "mobilenet_v2");
    assert_eq!(train.config.parameter_count, Some(3_504_872));
    let map = train.config.model_by_workload.clone().unwrap();
    assert_eq!(map[&Workload::Train], "mobilenet_v2");
    assert_eq!(infer.config.model_by_workload, Some(map));
    assert_eq!(train.config.execution, Execution::Eager);

    let dirs: Vec<PathBuf> = ["w0", "w1"].iter().map(|d| root.path().join(d)).collect();
    let summary =
        coload_analysis::summarize_dirs(&dirs, &coload_analysis::Options::default()).unwrap();
    let model_of = |w: Workload| summary.groups[&w].model.clone();
    assert_eq!(model_of(Workload::Train).as_deref(), Some("mobilenet_v2"));
    assert_eq!(model_of(Workload::Infer).as_deref(), Some("squeezenet1_1"));
}

#[test]
fn workers_that_disagree_on_the_model_fail_naming_the_field() {
    let _serial = serial();
    let root = tempfile::tempdir().unwrap();
    let outputs = cohort(
        root.path(),
        "model-mismatch",
        &[
            (0, "train", args(&["--model", "resnet18"])),
            (1, "train", args(&["--model", "squeezenet1_1"])),
        ],
    );
    for (i, o) in outputs.iter().enumerate() {
        assert_eq!(
            o.status.code(),
            Some(i32::from(exit::CONFIG_MISMATCH)),
            "replica {i}: {}",
            stderr(o)
        );
        let f = report(root.path(), i as u32).failure.unwrap();
        assert_eq!(f.kind, coload_cohort_schema::FailureKind::ConfigMismatch);
        assert!(
            f.message.contains("model squeezenet1_1 != resnet18"),
            "{}",
            f.message
        );
    }
}

/// A worker that must fail while building its step: a failed report at stage warmup with the
/// kind, and no ready record (it never reached the barrier).
fn fails_before_the_barrier(extra: &[&str], workload: &str, kind: &str) -> WorkerReport {
    let root = tempfile::tempdir().unwrap();
    let outputs = cohort(root.path(), "refused", &[(0, workload, args(extra))]);
    // The exit code is the kind's: a bad option or model file is bad input (2), a model that
    // cannot be captured a workload failure (20).
    let expected: coload_cohort_schema::FailureKind =
        serde_json::from_value(serde_json::Value::String(kind.to_owned())).unwrap();
    assert_eq!(
        outputs[0].status.code(),
        Some(i32::from(expected.exit_code())),
        "{}",
        stderr(&outputs[0])
    );
    let r = report(root.path(), 0);
    assert_eq!(r.status, Status::Failed);
    let f = r.failure.clone().unwrap();
    assert_eq!(
        (f.stage, f.kind.as_str()),
        (Stage::Warmup, kind),
        "{}",
        f.message
    );
    assert!(
        !root.path().join("sync/refused/ready.0.json").exists(),
        "a refused worker never publishes ready"
    );
    assert!(r.barrier.unwrap().ready_unix_ns.is_none());
    r
}

#[test]
fn a_cuda_graph_on_the_cpu_is_refused_before_the_barrier() {
    let _serial = serial();
    let r = fails_before_the_barrier(&["--execution", "cuda-graph"], "train", "invalid_option");
    assert!(r.failure.unwrap().message.contains("needs a CUDA device"));
    assert_eq!(r.config.execution, Execution::CudaGraph);
}

#[test]
fn a_missing_model_file_is_refused_before_the_barrier() {
    let _serial = serial();
    let r = fails_before_the_barrier(
        &[
            "--model-file",
            "/nonexistent/model.pt",
            "--input-shape",
            "3,32,32",
            "--num-classes",
            "10",
        ],
        "infer",
        "model_file_missing",
    );
    assert!(r.failure.unwrap().message.contains("/nonexistent/model.pt"));
    assert_eq!(r.config.model, "torchscript");
}

#[test]
fn a_torchscript_worker_records_the_files_digest() {
    let _serial = serial();
    let Some(m) = support::modules() else { return };
    let root = tempfile::tempdir().unwrap();
    let file = m.path("small.pt").display().to_string();
    let flags = args(&[
        "--model-file",
        &file,
        "--input-shape",
        "1,12,12",
        "--num-classes",
        "10",
        // This module's first batch is slow and the next are sub-millisecond: warm up enough
        // for the fastest warmup batch to size the window's record buffer.
        "--warmup-batches",
        "10",
    ]);
    let outputs = cohort(
        root.path(),
        "torchscript",
        &[(0, "train", flags.clone()), (1, "infer", flags)],
    );
    for (i, o) in outputs.iter().enumerate() {
        assert_eq!(o.status.code(), Some(0), "replica {i}: {}", stderr(o));
    }
    let (sha, params) = m.facts("small.pt");
    for replica in [0, 1] {
        let r = report(root.path(), replica);
        assert_eq!(r.config.model, "torchscript");
        assert_eq!(r.config.image_size, 12);
        assert_eq!(r.config.parameter_count, Some(params));
        let f = r.config.model_file.unwrap();
        assert_eq!(
            (f.sha256.as_str(), f.input_shape, f.num_classes),
            (sha, [1, 12, 12], 10)
        );
        assert!(r.window.unwrap().batches > 0);
    }
}

#[test]
fn unknown_models_and_incomplete_model_flags_are_refused_at_once() {
    let _serial = serial();
    let root = tempfile::tempdir().unwrap();
    for (flags, says) in [
        (vec!["--model", "resnet-50"], "unknown model `resnet-50`"),
        (
            vec!["--model", "train=resnet50,infer=resnt18"],
            "unknown model `resnt18`",
        ),
        (vec!["--model", "infer=resnet18"], "no model for train"),
        (
            vec!["--model", "densenet121"],
            "densenet121 cannot take 32x32",
        ),
        (vec!["--model-file", "m.pt"], "--input-shape"),
        (
            vec![
                "--model-file",
                "m.pt",
                "--input-shape",
                "3,32",
                "--num-classes",
                "10",
            ],
            "C,H,W",
        ),
        (vec!["--execution", "graph"], "cuda-graph"),
    ] {
        let outputs = cohort(
            root.path(),
            "bad-model-flags",
            &[(0, "train", args(&flags))],
        );
        let code = outputs[0].status.code();
        assert!(
            code == Some(i32::from(exit::INVALID_INPUT)),
            "{flags:?}: {code:?}"
        );
        assert!(
            stderr(&outputs[0]).contains(says),
            "{flags:?}: {}",
            stderr(&outputs[0])
        );
        assert!(!root.path().join("w0/worker.json").exists(), "{flags:?}");
    }
}
