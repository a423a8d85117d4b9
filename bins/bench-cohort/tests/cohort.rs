//! bench-cohort end to end: a real 2-worker CPU cohort through the real bench-worker, and the
//! failure path (one worker fails: the others are told through abort.json and the cohort is
//! reported incomplete) with a stand-in worker at the process seam.

use std::path::{Path, PathBuf};
use std::process::Command;

use coload_cohort_schema::{AbortRecord, FailureKind, Workload, exit, read_document};

mod common;

use common::{COHORT, worker_bin};

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
        // The launcher sets each worker's threads itself: this one's is ignored.
        .env("OMP_NUM_THREADS", "64")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(table.contains("2 workers (1 train, 1 infer)"), "{table}");
    // Each co-located CPU worker gets its share of the cores, at least one thread.
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let share = u32::try_from((cores / 2).max(1)).unwrap();
    for i in 0..2 {
        let report = coload_cohort_schema::read_worker_report(
            &out.join(format!("worker-{i}")).join("worker.json"),
        )
        .unwrap();
        assert_eq!(
            report.runtime.and_then(|r| r.torch_threads),
            Some(share),
            "worker {i} on {cores} cores"
        );
    }
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

/// The stand-in MPS control program: logs what it is sent and answers the get_*
/// queries from what was set.
fn fake_mps_dir() -> PathBuf {
    // The stand-in MPS control daemon lives with the launcher, whose unit tests use it too.
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../crates/launch/tests/fake-mps")
}

fn path_with(dir: &Path) -> std::ffi::OsString {
    let mut paths = vec![dir.to_owned()];
    paths.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(paths).unwrap()
}

/// With --mode mps the launcher sends the share to its private daemon after `-d` and
/// before any worker starts, reads it back, and every worker records the share it was declared
/// and its CUDA_MPS_* environment; the summary shows the share.
#[test]
fn an_mps_cohort_sends_the_share_to_its_daemon_and_the_workers_record_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let output = Command::new(COHORT)
        .args(["--count", "1", "--workload", "train", "--mode", "mps"])
        .args([
            "--mps-threads",
            "50",
            "--mps-memory",
            "1GiB",
            "--device",
            "cpu",
        ])
        .args(["--batch-size", "2", "--image-size", "32", "--window-s", "2"])
        .args(["--warmup-batches", "1", "--start-lead-s", "2"])
        .arg("--worker-bin")
        .arg(worker_bin())
        .arg("--out")
        .arg(&out)
        .env("PATH", path_with(&fake_mps_dir()))
        .env_remove("CUDA_VISIBLE_DEVICES")
        .env("OMP_NUM_THREADS", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("MPS share: explicit: 50 % of the threads, 1024 MiB of memory per client"),
        "{stderr}"
    );
    let log = std::fs::read_to_string(out.join("mps/control.log")).unwrap();
    assert_eq!(
        log.lines().collect::<Vec<_>>(),
        [
            "-d",
            "set_default_device_pinned_mem_limit 0 1024M",
            "set_default_active_thread_percentage 50",
            "get_default_device_pinned_mem_limit 0",
            "get_default_active_thread_percentage",
            "quit",
        ]
    );
    let report =
        coload_cohort_schema::read_worker_report(&out.join("worker-0/worker.json")).unwrap();
    let share = report.share.unwrap();
    assert_eq!(
        share.declared,
        Some(coload_cohort_schema::DeclaredShare::explicit(50, 1 << 30))
    );
    assert_eq!(
        share
            .mps_environment
            .get("CUDA_MPS_PIPE_DIRECTORY")
            .map(PathBuf::from),
        Some(out.join("mps/pipe"))
    );
    let summary: coload_cohort_schema::CohortSummary =
        read_document(&out.join("summary.json")).unwrap();
    assert_eq!(summary.share.unwrap().active_thread_percentage, Some(50));
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(
        table.contains("MPS share: explicit: 50 % of the threads"),
        "{table}"
    );
}

/// The device plugin's share needs each GPU's memory. Without NVML the launcher
/// refuses, naming the way out; with NVML (a GPU host) it plans the plugin's commands.
#[test]
fn replicas_need_the_gpus_memory() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let output = Command::new(COHORT)
        .args(["--count", "1", "--workload", "train", "--mode", "mps"])
        .args(["--mps-replicas", "7", "--device", "cpu"])
        .arg("--worker-bin")
        .arg(COHORT)
        .arg("--out")
        .arg(&out)
        .env("PATH", path_with(&fake_mps_dir()))
        .env_remove("CUDA_VISIBLE_DEVICES")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    if coload_device::RealNvml::open().is_ok() {
        let log = std::fs::read_to_string(out.join("mps/control.log")).unwrap();
        assert!(
            log.contains("set_default_active_thread_percentage 14"),
            "{log}"
        );
        return;
    }
    assert_eq!(
        output.status.code(),
        Some(i32::from(exit::PREFLIGHT_FAILED)),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "error: --mode mps: --mps-replicas 7 gives each client 1/7 of GPU 0's memory, but its \
             memory is not known here (nvml is unavailable"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("give the limit explicitly with --mps-threads P --mps-memory SIZE"),
        "{stderr}"
    );
    assert!(
        !out.join("mps/control.log").exists(),
        "no daemon was started"
    );
}

/// A stand-in worker for the hog's ordering: a hog publishes hold.json after a second (or exits
/// at once with `HOG_FAILS`); every other worker notes whether the hog held its memory when it
/// started.
const FAKE_HOG_WORKER: &str = r#"#!/bin/sh
while [ $# -gt 0 ]; do
  case "$1" in
    --workload) workload=$2; shift ;;
    --out) out=$2; shift ;;
  esac
  shift
done
if [ "$workload" = hog ]; then
  [ -z "${HOG_FAILS:-}" ] || exit 20
  sleep 1
  echo '{}' >"$out/hold.json"
  sleep 1
  exit 0
fi
if [ -f "$(dirname "$out")/worker-0/hold.json" ]; then echo "started after the hold"; else echo "started before the hold"; fi
"#;

fn fake_hog_worker(dir: &Path) -> PathBuf {
    let fake = dir.join("fake-worker");
    std::fs::write(&fake, FAKE_HOG_WORKER).unwrap();
    let mut perms = std::fs::metadata(&fake).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&fake, perms).unwrap();
    fake
}

/// The hog allocates before the others warm up: they are started only once it holds
/// its memory; a hog that fails first stops the cohort before they start.
#[test]
fn the_hog_holds_its_memory_before_the_others_start() {
    let dir = tempfile::tempdir().unwrap();
    let fake = fake_hog_worker(dir.path());
    let run = |out: &Path, hog_fails: bool| {
        let mut cmd = Command::new(COHORT);
        cmd.args(["--workers", "hog=1,train=2", "--mode", "timeslice"])
            .arg("--worker-bin")
            .arg(&fake)
            .arg("--out")
            .arg(out);
        if hog_fails {
            cmd.env("HOG_FAILS", "1");
        }
        cmd.output().unwrap()
    };
    let out = dir.path().join("ordered");
    let o = run(&out, false);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("the hog holds its memory; starting the other workers"),
        "{stderr}"
    );
    for r in [1, 2] {
        assert_eq!(
            std::fs::read_to_string(out.join(format!("worker-{r}/log"))).unwrap(),
            "started after the hold\n"
        );
    }

    let out = dir.path().join("hog-fails");
    let o = run(&out, true);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(i32::from(exit::INCOMPLETE_COHORT)),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "the hog (replica 0) exited with 20 (workload_failed) before it held its memory"
        ) || stderr.contains("replica 0: exited with 20"),
        "{stderr}"
    );
    for r in [1, 2] {
        let log = std::fs::read_to_string(out.join(format!("worker-{r}/log"))).unwrap();
        assert!(log.is_empty(), "replica {r} was started: {log}");
    }
}

/// What cannot work is refused before anything runs.
#[test]
fn hog_exclusive_and_mps_misuses_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let o = Command::new(COHORT)
            .args(args)
            .arg("--out")
            .arg(dir.path().join("x"))
            .args(["--worker-bin", COHORT])
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(i32::from(exit::INVALID_INPUT)),
            "{args:?}"
        );
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let e = run(&[
        "--workers",
        "hog=1,train=2",
        "--mode",
        "timeslice",
        "--device",
        "cpu",
    ]);
    assert!(e.contains("--device cpu has none to take"), "{e}");
    let e = run(&[
        "--workers",
        "train=2",
        "--mode",
        "timeslice",
        "--hog-bytes",
        "8GiB",
    ]);
    assert!(
        e.contains("--hog-bytes sizes the hog workload, but the mix has none"),
        "{e}"
    );
    let e = run(&["--workers", "hog=2", "--mode", "timeslice"]);
    assert!(e.contains("the mix is only hogs"), "{e}");
    let e = run(&["--count", "3", "--workload", "train", "--mode", "exclusive"]);
    assert!(
        e.contains("--mode exclusive with 3 workers needs one GPU each: list them with --visible-devices (e.g. 0,1,2)"),
        "{e}"
    );
    let e = run(&[
        "--count",
        "2",
        "--workload",
        "train",
        "--mode",
        "exclusive",
        "--visible-devices",
        "1,1",
    ]);
    assert!(e.contains("lists `1` twice"), "{e}");
    let e = run(&["--count", "2", "--workload", "train", "--mode", "mps"]);
    assert!(
        e.contains("--mode mps needs the share each MPS client runs under"),
        "{e}"
    );
    let e = run(&[
        "--count",
        "2",
        "--workload",
        "train",
        "--mode",
        "timeslice",
        "--mps-unlimited",
    ]);
    assert!(
        e.contains("--mps-unlimited declares an MPS share, but --mode is timeslice"),
        "{e}"
    );
}

/// Bad numbers end with a clear refusal and exit 2, never a panic (exit 101).
#[test]
fn bad_numbers_are_refused_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x");
    let out = out.to_str().unwrap();
    let base = ["--workers", "train=1", "--mode", "timeslice", "--out", out];
    for (extra, named) in [
        ("--window-s=0", "--window-s"),
        ("--window-s=-1", "--window-s"),
        ("--window-s=nan", "--window-s"),
        ("--window-s=1e300", "--window-s"),
        ("--start-lead-s=inf", "--start-lead-s"),
        ("--join-timeout-s=-5", "--join-timeout-s"),
    ] {
        let o = Command::new(COHORT).args(base).arg(extra).output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(
            o.status.code(),
            Some(i32::from(exit::INVALID_INPUT)),
            "{extra}: {stderr}"
        );
        assert!(stderr.contains(named), "{extra}: {stderr}");
    }
    let o = Command::new(COHORT)
        .args([
            "--workers",
            "serve=1,train=1",
            "--mode",
            "timeslice",
            "--out",
            out,
        ])
        .args(["--rate=-5", "--worker-bin", COHORT])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(i32::from(exit::INVALID_INPUT)),
        "{stderr}"
    );
    assert!(
        stderr.contains("--rate must be a positive number"),
        "{stderr}"
    );
    for budget in ["-1", "nan", "inf", "1e300", "0"] {
        let o = Command::new(COHORT)
            .args(["study", "quick", "--out", out, "--dry-run"])
            .arg(format!("--time-budget-s={budget}"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(
            o.status.code(),
            Some(i32::from(exit::INVALID_INPUT)),
            "{budget}: {stderr}"
        );
        assert!(stderr.contains("--time-budget-s"), "{budget}: {stderr}");
    }
    // Nothing was started, so nothing was written.
    assert!(!dir.path().join("x").join("index.json").exists());
}

/// Results are never overwritten. An --out that holds an earlier cohort's files is
/// refused, naming the file and pointing at a fresh folder, before any worker starts.
#[test]
fn an_out_folder_with_earlier_results_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for earlier in [
        "summary.json",
        "worker-0/worker.json",
        "failure.json",
        "rep-1/x",
    ] {
        let out = dir.path().join(earlier.replace(['/', '.'], "_"));
        let file = out.join(earlier);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, "earlier").unwrap();
        let o = Command::new(COHORT)
            .args([
                "--workers",
                "train=1",
                "--mode",
                "timeslice",
                "--device",
                "cpu",
            ])
            .arg("--out")
            .arg(&out)
            .args(["--worker-bin", COHORT])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(
            o.status.code(),
            Some(i32::from(exit::INVALID_INPUT)),
            "{stderr}"
        );
        let first = earlier.split('/').next().unwrap();
        assert!(
            stderr.contains(&format!("{first} exists"))
                && stderr.contains("never overwritten")
                && stderr.contains("fresh folder"),
            "{stderr}"
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "earlier");
        assert!(!out.join("sync").exists());
    }
}
