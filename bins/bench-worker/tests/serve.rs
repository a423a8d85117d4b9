//! A serve worker end to end on the CPU with the real libtorch and tiny shapes: beside a
//! trainer, through the barrier, its requests written and summarized; and its bad arguments
//! refused before anything runs.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use coload_cohort_schema::{RequestReader, Status, Workload, exit, read_worker_report};

mod common;

use common::finish;

const WORKER: &str = env!("CARGO_BIN_EXE_bench-worker");

fn spawn(
    root: &Path,
    experiment: &str,
    replica: u32,
    count: u32,
    workload: &str,
    extra: &[&str],
) -> Child {
    let sync = root.join("sync");
    std::fs::create_dir_all(&sync).unwrap();
    Command::new(WORKER)
        .args(["--experiment", experiment])
        .args(["--replica", &replica.to_string()])
        .args(["--count", &count.to_string()])
        .args(["--workload", workload])
        .args(["--mode", "timeslice"])
        .arg("--sync-dir")
        .arg(&sync)
        .arg("--out")
        .arg(root.join(format!("worker-{replica}")))
        .args(["--device", "cpu", "--batch-size", "2", "--image-size", "32"])
        .args([
            "--window-s",
            "3",
            "--warmup-batches",
            "1",
            "--start-lead-s",
            "2",
        ])
        .args(["--join-timeout-s", "150", "--log-format", "json"])
        .args(extra)
        .env("OMP_NUM_THREADS", "1")
        .env_remove("JOB_COMPLETION_INDEX")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn a_serve_worker_beside_a_trainer_completes_and_summarizes() {
    let root = tempfile::tempdir().unwrap();
    let serve = spawn(
        root.path(),
        "serve-cpu",
        0,
        2,
        "serve",
        &[
            "--rate",
            "40",
            "--arrivals",
            "uniform",
            "--max-batch",
            "4",
            "--slo-ms",
            "500",
        ],
    );
    let train = spawn(root.path(), "serve-cpu", 1, 2, "train", &[]);
    let (status, stderr) = finish(serve);
    assert_eq!(status.code(), Some(0), "serve: {stderr}");
    assert!(stderr.contains("request latency p50"), "{stderr}");
    let (status, stderr) = finish(train);
    assert_eq!(status.code(), Some(0), "train: {stderr}");

    let dir = root.path().join("worker-0");
    let report = read_worker_report(&dir.join("worker.json")).unwrap();
    assert_eq!(report.status, Status::Complete);
    assert_eq!(report.config.workload, Workload::Serve);
    let config = report.config.serve.clone().unwrap();
    assert_eq!(
        (config.max_batch, config.padded_sizes.clone()),
        (4, vec![1, 2, 4])
    );
    assert_eq!(
        (config.arrivals.as_str(), config.slo_ms),
        ("uniform", Some(500.0))
    );
    // 40 requests/s, uniform, for 3 s: exactly 120, every one accounted for.
    let info = report.serve.unwrap();
    assert_eq!(info.requests, 120);
    assert_eq!(
        info.completed + info.in_flight_at_end + info.queued_at_end,
        info.requests
    );
    let lines: Vec<_> = RequestReader::open(&dir.join("requests.jsonl"))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let listed: usize = lines.iter().map(|l| l.arrivals_unix_ns.len()).sum();
    assert_eq!(listed, 120);
    // Arrivals are 25 ms apart from the scheduled start.
    let start = report.barrier.unwrap().scheduled_start_unix_ns.unwrap();
    assert_eq!(lines[0].arrivals_unix_ns[0], start);
    assert!(
        lines
            .iter()
            .all(|l| l.padded.is_power_of_two() || l.batch.is_none())
    );

    let dirs: Vec<PathBuf> = (0..2)
        .map(|r| root.path().join(format!("worker-{r}")))
        .collect();
    let summary =
        coload_analysis::summarize_dirs(&dirs, &coload_analysis::Options::default()).unwrap();
    let s = summary.workers[0].serve.as_ref().unwrap();
    assert!(s.requests > 100, "{}", s.requests);
    assert!(s.latency_ms.p50.unwrap() > 0.0);
    assert!((s.slo.unwrap().slo_ms - 500.0).abs() < f64::EPSILON);
    assert!(summary.workers[1].serve.is_none());
}

#[test]
fn bad_serve_arguments_are_refused_before_anything_runs() {
    let root = tempfile::tempdir().unwrap();
    let empty = root.path().join("empty.txt");
    std::fs::write(&empty, "# nothing\n").unwrap();
    let unsorted = root.path().join("unsorted.txt");
    std::fs::write(&unsorted, "0.5\n0.25\n").unwrap();
    let cases: Vec<(&str, Vec<String>, String)> = vec![
        (
            "serve",
            vec!["--rate".into(), "0".into()],
            "--rate must be a positive number".into(),
        ),
        ("serve", vec!["--rate=-3".into()], "got -3".into()),
        ("serve", vec![], "--workload serve needs --rate".into()),
        (
            "train",
            vec!["--rate".into(), "10".into()],
            "--rate applies to --workload serve and serve-llm, not train".into(),
        ),
        // The serve-llm flags at the worker's own door.
        (
            "train",
            vec!["--ttft-slo-ms".into(), "5".into()],
            "--ttft-slo-ms applies to --workload serve-llm, not train".into(),
        ),
        (
            "serve-llm",
            vec![
                "--rate".into(),
                "5".into(),
                "--model".into(),
                "gpt2-tiny".into(),
                "--prompt-tokens".into(),
                "8".into(),
                "--output-tokens".into(),
                "8".into(),
                "--kv-budget-tokens".into(),
                "10".into(),
            ],
            "--kv-budget-tokens 10 cannot hold one request".into(),
        ),
        (
            "serve-llm",
            vec![
                "--rate".into(),
                "5".into(),
                "--model".into(),
                "gpt2-tiny".into(),
                "--prompt-tokens".into(),
                "60".into(),
                "--output-tokens".into(),
                "5".into(),
            ],
            "needs 65 positions, but gpt2-tiny has a context of 64".into(),
        ),
        (
            "serve",
            vec![
                "--rate".into(),
                "10".into(),
                "--max-batch".into(),
                "0".into(),
            ],
            "--max-batch must be between 1 and 1024".into(),
        ),
        (
            "serve",
            vec!["--arrivals-file".into(), empty.display().to_string()],
            "holds no arrival offsets".into(),
        ),
        (
            "serve",
            vec!["--arrivals-file".into(), unsorted.display().to_string()],
            "unsorted.txt:2: offset 0.25 s comes before 0.5 s on line 1".into(),
        ),
        (
            "serve",
            vec![
                "--arrivals-file".into(),
                root.path().join("none.txt").display().to_string(),
            ],
            "cannot read --arrivals-file".into(),
        ),
    ];
    assert_refused(root.path(), cases);
}

/// Bounds a plan line and a flag share (the spec's validate) and inputs that are not regular
/// files: each refused at the worker's own door too.
#[test]
fn out_of_bounds_numbers_and_non_files_are_refused() {
    let root = tempfile::tempdir().unwrap();
    let cases: Vec<(&str, Vec<String>, String)> = vec![
        // A device is not a trace: refused at once, never read.
        (
            "serve",
            vec!["--arrivals-file".into(), "/dev/zero".into()],
            "not a regular file".into(),
        ),
        // A rate that schedules no request in the window ran the whole window for nothing.
        (
            "serve",
            vec!["--rate".into(), "1e-300".into()],
            "--rate 1e-300 schedules no request".into(),
        ),
        // 4294967295 warmup batches aborted the worker on a 64 GiB allocation.
        (
            "serve",
            vec![
                "--rate".into(),
                "10".into(),
                "--warmup-batches".into(),
                "4294967295".into(),
            ],
            "--warmup-batches must be at most 100000".into(),
        ),
    ];
    assert_refused(root.path(), cases);
}

/// Each case (workload, flags, what stderr says) exits 2 before anything runs.
fn assert_refused(root: &Path, cases: Vec<(&str, Vec<String>, String)>) {
    for (workload, extra, needle) in cases {
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let (status, stderr) = finish(spawn(root, "bad", 0, 1, workload, &extra));
        assert_eq!(
            status.code(),
            Some(i32::from(exit::INVALID_INPUT)),
            "{extra:?}: {stderr}"
        );
        assert!(stderr.contains(&needle), "{extra:?}: {stderr}");
        assert!(!root.join("worker-0/worker.json").exists());
    }
}

/// A trace's length columns, refused by file and line; a serve worker refuses them.
#[test]
fn bad_serve_llm_traces_are_refused_by_file_and_line() {
    let root = tempfile::tempdir().unwrap();
    // Serve-llm traces with length columns, each bad in one way.
    let trace = |name: &str, text: &str| {
        let path = root.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let one_column = trace("one.txt", "0 8 4\n0.1 8\n");
    let zero = trace("zero.txt", "0 8 4\n0.1 8 0\n");
    let word = trace("word.txt", "0 eight 4\n");
    let mixed = trace("mixed.txt", "0\n0.1 8 4\n");
    let long = trace("long.txt", "0 8 4\n# a request of 65 positions\n0.1 60 5\n");
    let over_budget = trace("budget.txt", "0 8 4\n0.1 20 10\n");
    let lengths = trace("lengths.txt", "0 8 4\n0.1 8 4\n");
    let llm = |file: &str, more: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = [
            "--model",
            "gpt2-tiny",
            "--prompt-tokens",
            "8",
            "--output-tokens",
            "8",
            "--arrivals-file",
            file,
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        v.extend(more.iter().map(|s| (*s).to_owned()));
        v
    };
    let cases: Vec<(&str, Vec<String>, String)> = vec![
        // A serve worker keeps refusing anything but the offset.
        (
            "serve",
            vec!["--arrivals-file".into(), lengths.clone()],
            "lengths.txt:1: `0 8 4` holds 3 columns; a serve trace has one offset per line".into(),
        ),
        (
            "serve-llm",
            llm(&one_column, &[]),
            "one.txt:2: `0.1 8` holds 2 columns".into(),
        ),
        (
            "serve-llm",
            llm(&zero, &[]),
            "zero.txt:2: output tokens must be at least 1 token, got 0".into(),
        ),
        (
            "serve-llm",
            llm(&word, &[]),
            "word.txt:1: `eight` is not a whole number of prompt tokens".into(),
        ),
        (
            "serve-llm",
            llm(&mixed, &[]),
            "mixed.txt:2: line 2 gives prompt and output tokens but line 1 does not".into(),
        ),
        (
            "serve-llm",
            llm(&long, &[]),
            "long.txt:3: request 1: a prompt of 60 tokens and 5 output tokens need 65 positions, \
             more than the model's context of 64"
                .into(),
        ),
        (
            "serve-llm",
            llm(&over_budget, &["--kv-budget-tokens", "20"]),
            "budget.txt:2: request 1 reserves 30 KV-cache tokens (prompt + output), more than \
             the whole budget of 20"
                .into(),
        ),
        (
            "serve-llm",
            llm(&lengths, &["--output-tokens-max", "12"]),
            "--output-tokens-max: --arrivals-file".into(),
        ),
    ];
    assert_refused(root.path(), cases);
}
