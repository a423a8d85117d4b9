//! bench-worker end to end on the CPU with the real libtorch and tiny shapes: a cohort that
//! completes, and the barrier failures each ending with the right exit code and a failed
//! worker.json.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use std::io::BufRead;

use coload_cohort_schema::{
    FailureKind, Stage, Status, WorkerReport, exit, read_batches, read_worker_report,
};

mod common;

use common::finish;

const WORKER: &str = env!("CARGO_BIN_EXE_bench-worker");

/// The tests run one at a time: each starts up to three libtorch processes, and a 2-core CI
/// machine running several cohorts at once can take longer to load them than a join timeout.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

struct Cohort {
    root: tempfile::TempDir,
    experiment: String,
}

impl Cohort {
    fn new(experiment: &str) -> Self {
        Cohort {
            root: tempfile::tempdir().unwrap(),
            experiment: experiment.to_owned(),
        }
    }

    fn sync(&self) -> PathBuf {
        self.root.path().join("sync")
    }

    fn out(&self, name: &str) -> PathBuf {
        self.root.path().join(name)
    }

    /// A worker with tiny shapes; `extra` overrides or adds flags.
    fn spawn(&self, replica: u32, count: u32, workload: &str, out: &str, extra: &[&str]) -> Child {
        self.spawn_env(replica, count, workload, out, extra, &[])
    }

    /// [`Cohort::spawn`] with extra environment variables.
    fn spawn_env(
        &self,
        replica: u32,
        count: u32,
        workload: &str,
        out: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Child {
        std::fs::create_dir_all(self.sync()).unwrap();
        Command::new(WORKER)
            .envs(env.iter().copied())
            .args(["--experiment", &self.experiment])
            .args(["--replica", &replica.to_string()])
            .args(["--count", &count.to_string()])
            .args(["--workload", workload])
            .args(["--mode", "timeslice"])
            .arg("--sync-dir")
            .arg(self.sync())
            .arg("--out")
            .arg(self.out(out))
            .args(["--device", "cpu", "--batch-size", "2", "--image-size", "32"])
            .args([
                "--window-s",
                "2",
                "--warmup-batches",
                "1",
                "--start-lead-s",
                "2",
            ])
            .args(["--join-timeout-s", "150", "--log-format", "json"])
            .args(extra)
            // One intra-op thread per worker: several workers share this machine's cores.
            .env("OMP_NUM_THREADS", "1")
            .env_remove("JOB_COMPLETION_INDEX")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }
}

fn report(dir: &Path) -> WorkerReport {
    read_worker_report(&dir.join("worker.json")).unwrap()
}

fn wait_for(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_three_worker_mixed_cohort_completes_and_summarizes() {
    let _serial = serial();
    let c = Cohort::new("three-workers");
    let children = vec![
        c.spawn(0, 3, "infer", "w0", &[]),
        c.spawn(1, 3, "train", "w1", &[]),
        c.spawn(2, 3, "train", "w2", &[]),
    ];
    let results: Vec<_> = children.into_iter().map(finish).collect();
    for (i, (status, stderr)) in results.iter().enumerate() {
        assert_eq!(status.code(), Some(0), "replica {i}: {stderr}");
    }
    let mut starts = Vec::new();
    for (i, dir) in ["w0", "w1", "w2"].iter().enumerate() {
        let dir = c.out(dir);
        let r = report(&dir);
        assert_eq!(r.status, Status::Complete);
        assert_eq!(r.replica, i as u32);
        assert!(r.failure.is_none());
        // The build that ran it, as `--version` prints it on one line.
        let build = r.coload.as_deref().unwrap_or_default();
        assert!(
            build.starts_with(concat!(env!("CARGO_PKG_VERSION"), " (git "))
                && build.contains("libtorch"),
            "{build}"
        );
        let window = r.window.unwrap();
        let batches = read_batches(&dir.join("batches.jsonl")).unwrap();
        assert!(!batches.is_empty());
        assert_eq!(batches.len() as u64, window.batches);
        assert!(batches.iter().all(|b| b.samples == 2));
        assert!(batches.last().unwrap().end_unix_ns <= window.end_unix_ns);
        let barrier = r.barrier.unwrap();
        starts.push(barrier.scheduled_start_unix_ns.unwrap());
        assert!(barrier.lateness_ns.unwrap() >= 0);
        assert_eq!(
            r.device.unwrap().kind,
            coload_cohort_schema::DeviceKind::Cpu
        );
        let runtime = r.runtime.unwrap();
        if i == 0 {
            assert!(runtime.inference_guard.is_some());
        }
        // A CPU worker has no NVML device: no GPU activity or energy, and no file for them.
        assert!(r.gpm.is_none() && r.energy.is_none());
        assert!(!dir.join("gpm.jsonl").exists());
    }
    assert!(starts.windows(2).all(|w| w[0] == w[1]), "{starts:?}");

    let dirs: Vec<PathBuf> = ["w0", "w1", "w2"].iter().map(|d| c.out(d)).collect();
    let summary =
        coload_analysis::summarize_dirs(&dirs, &coload_analysis::Options::default()).unwrap();
    assert_eq!(summary.count, 3);
    assert_eq!(summary.workers.len(), 3);
    assert!(summary.workers.iter().all(|w| w.samples_per_s > 0.0));
}

#[test]
fn a_missing_peer_times_out_and_names_it() {
    let _serial = serial();
    let c = Cohort::new("missing-peer");
    let (status, stderr) = finish(c.spawn(0, 2, "train", "w0", &["--join-timeout-s", "3"]));
    assert_eq!(
        status.code(),
        Some(i32::from(exit::BARRIER_TIMEOUT)),
        "{stderr}"
    );
    let r = report(&c.out("w0"));
    assert_eq!(r.status, Status::Failed);
    let f = r.failure.unwrap();
    assert_eq!(f.stage, Stage::Barrier);
    assert_eq!(f.kind, FailureKind::BarrierTimeout);
    assert!(f.message.contains("missing: 1"), "{}", f.message);
    // What was known before the failure is kept.
    assert!(r.device.is_some());
    assert!(r.barrier.unwrap().ready_unix_ns.is_some());
}

#[test]
fn a_config_mismatch_fails_every_worker_naming_the_field() {
    let _serial = serial();
    let c = Cohort::new("mismatch");
    let a = c.spawn(0, 2, "train", "w0", &[]);
    let b = c.spawn(1, 2, "train", "w1", &["--batch-size", "3"]);
    for (dir, child) in [("w0", a), ("w1", b)] {
        let (status, stderr) = finish(child);
        assert_eq!(
            status.code(),
            Some(i32::from(exit::CONFIG_MISMATCH)),
            "{dir}: {stderr}"
        );
        let f = report(&c.out(dir)).failure.unwrap();
        assert_eq!(f.kind, FailureKind::ConfigMismatch);
        assert!(f.message.contains("batch_size 3 != 2"), "{}", f.message);
    }
}

#[test]
fn a_duplicate_replica_aborts_the_cohort() {
    let _serial = serial();
    let c = Cohort::new("duplicate");
    let first = c.spawn(1, 2, "train", "w1a", &[]);
    wait_for(&c.sync().join("duplicate").join("ready.1.json"));
    let second = c.spawn(1, 2, "train", "w1b", &[]);
    let (status, stderr) = finish(second);
    assert_eq!(
        status.code(),
        Some(i32::from(exit::DUPLICATE_REPLICA)),
        "{stderr}"
    );
    let f = report(&c.out("w1b")).failure.unwrap();
    assert_eq!(f.kind, FailureKind::DuplicateReplica);
    assert!(f.message.contains("replica 1"), "{}", f.message);
    // The first claimant sees the abort and fails the same way; the leader, arriving late,
    // refuses the aborted experiment.
    let (status, _) = finish(first);
    assert_eq!(status.code(), Some(i32::from(exit::DUPLICATE_REPLICA)));
    let (status, _) = finish(c.spawn(0, 2, "train", "w0", &[]));
    assert_ne!(status.code(), Some(0));
    assert_eq!(report(&c.out("w0")).status, Status::Failed);
}

#[test]
fn an_existing_report_is_never_overwritten() {
    let _serial = serial();
    let c = Cohort::new("overwrite");
    let out = c.out("w0");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("worker.json"), "keep me").unwrap();
    let (status, stderr) = finish(c.spawn(0, 1, "infer", "w0", &[]));
    assert_eq!(status.code(), Some(i32::from(exit::INVALID_INPUT)));
    assert!(stderr.contains("already exists"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(out.join("worker.json")).unwrap(),
        "keep me"
    );
}

#[test]
fn bad_arguments_are_refused_before_anything_runs() {
    let _serial = serial();
    let c = Cohort::new("bad-args");
    let (status, stderr) = finish(c.spawn(3, 2, "train", "w0", &[]));
    assert_eq!(status.code(), Some(i32::from(exit::INVALID_INPUT)));
    assert!(stderr.contains("--replica 3 is outside 0..2"), "{stderr}");
    assert!(!c.out("w0").join("worker.json").exists());
    let (status, stderr) = finish(c.spawn(0, 1, "train", "w0", &["--window-s=-1"]));
    assert_eq!(status.code(), Some(i32::from(exit::INVALID_INPUT)));
    assert!(stderr.contains("--window-s"), "{stderr}");
    let (status, stderr) = finish(c.spawn(0, 1, "train", "w0", &["--gpm-interval-s=0.01"]));
    assert_eq!(status.code(), Some(i32::from(exit::INVALID_INPUT)));
    assert!(
        stderr.contains("--gpm-interval-s must be 0 (off) or between 0.1 and 3600"),
        "{stderr}"
    );
}

fn terminate(child: &Child) {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
}

#[test]
fn a_terminated_worker_at_the_barrier_still_writes_its_report() {
    let _serial = serial();
    let c = Cohort::new("terminated-barrier");
    let child = c.spawn(0, 2, "train", "w0", &[]);
    wait_for(&c.sync().join("terminated-barrier").join("ready.0.json"));
    let sent_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    terminate(&child);
    let (status, stderr) = finish(child);
    assert_eq!(status.code(), Some(i32::from(exit::TERMINATED)), "{stderr}");
    let r = report(&c.out("w0"));
    assert_eq!(r.status, Status::Failed);
    let f = r.failure.unwrap();
    assert_eq!((f.stage, f.kind), (Stage::Barrier, FailureKind::Terminated));
    assert!(
        f.at_unix_ns.is_some_and(|at| at >= sent_ns),
        "{:?}",
        f.at_unix_ns
    );
    assert!(r.device.is_some(), "what was known at the barrier is kept");
    assert!(r.barrier.unwrap().ready_unix_ns.is_some());
}

#[test]
fn a_terminated_worker_in_the_window_keeps_its_batches() {
    let _serial = serial();
    let c = Cohort::new("terminated-window");
    let child = c.spawn(
        0,
        1,
        "infer",
        "w0",
        &["--window-s", "120", "--start-lead-s", "1"],
    );
    let start_path = c.sync().join("terminated-window").join("start.json");
    wait_for(&start_path);
    let start: coload_cohort_schema::StartRecord =
        coload_cohort_schema::read_document(&start_path).unwrap();
    // Into the window by a second, then stop the worker.
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    std::thread::sleep(Duration::from_nanos(
        (start.start_unix_ns + 1_000_000_000).saturating_sub(now_ns),
    ));
    let sent_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    terminate(&child);
    let (status, stderr) = finish(child);
    assert_eq!(status.code(), Some(i32::from(exit::TERMINATED)), "{stderr}");
    let dir = c.out("w0");
    let r = report(&dir);
    let f = r.failure.unwrap();
    assert_eq!((f.stage, f.kind), (Stage::Window, FailureKind::Terminated));
    let batches = read_batches(&dir.join("batches.jsonl")).unwrap();
    assert!(!batches.is_empty());
    assert_eq!(batches.len() as u64, r.window.unwrap().batches);
    assert!(
        f.at_unix_ns.is_some_and(|at| at >= sent_ns),
        "{:?}",
        f.at_unix_ns
    );
}

/// A worker waiting for the start notices a signal only when its window begins; its failure
/// carries the time the signal came (a cluster backend orders replicas' failures by it).
#[test]
fn a_worker_stopped_before_its_window_records_when_the_signal_came() {
    let _serial = serial();
    let c = Cohort::new("terminated-lead");
    let child = c.spawn(
        0,
        1,
        "infer",
        "w0",
        &["--window-s", "5", "--start-lead-s", "3"],
    );
    let start_path = c.sync().join("terminated-lead").join("start.json");
    wait_for(&start_path);
    let start: coload_cohort_schema::StartRecord =
        coload_cohort_schema::read_document(&start_path).unwrap();
    let sent_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    terminate(&child);
    let (status, stderr) = finish(child);
    assert_eq!(status.code(), Some(i32::from(exit::TERMINATED)), "{stderr}");
    let f = report(&c.out("w0")).failure.unwrap();
    assert_eq!(f.kind, FailureKind::Terminated);
    let at = f.at_unix_ns.expect("a failure carries its time");
    assert!(
        sent_ns <= at && at < start.start_unix_ns,
        "{sent_ns} <= {at} < {}",
        start.start_unix_ns
    );
}

fn signal(child: &Child, signal: nix::sys::signal::Signal) {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    nix::sys::signal::kill(pid, signal).unwrap();
}

/// A worker that had read the start and was then paused until after it used to run
/// a shortened window, write `status: complete` and exit 0. It must fail as a late start, keep
/// its lateness and what it measured, and the summarizer must name it.
#[test]
fn a_worker_paused_past_the_start_fails_as_late() {
    use nix::sys::signal::Signal;
    let _serial = serial();
    let c = Cohort::new("paused");
    let on_time = c.spawn(
        0,
        2,
        "infer",
        "w0",
        &["--window-s", "4", "--start-lead-s", "3"],
    );
    let mut paused = c.spawn(
        1,
        2,
        "infer",
        "w1",
        &["--window-s", "4", "--start-lead-s", "3"],
    );
    // Wait until replica 1 says it has the start (its JSON progress line), then freeze it
    // before the start instant and thaw it 1.5 s after.
    let mut lines = std::io::BufReader::new(paused.stderr.take().unwrap()).lines();
    let start_path = c.sync().join("paused").join("start.json");
    loop {
        let line = lines
            .next()
            .expect("replica 1 ended before the start")
            .unwrap();
        if line.contains("workers ready; start at") {
            break;
        }
    }
    signal(&paused, Signal::SIGSTOP);
    let start: coload_cohort_schema::StartRecord =
        coload_cohort_schema::read_document(&start_path).unwrap();
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    assert!(
        now_ns < start.start_unix_ns,
        "replica 1 was frozen too late to test this"
    );
    std::thread::sleep(Duration::from_nanos(
        (start.start_unix_ns + 1_500_000_000).saturating_sub(now_ns),
    ));
    signal(&paused, Signal::SIGCONT);
    std::thread::spawn(move || lines.for_each(drop));

    let (status, _) = finish(paused);
    assert_eq!(status.code(), Some(i32::from(exit::LATE_START)));
    let r = report(&c.out("w1"));
    assert_eq!(r.status, Status::Failed);
    let f = r.failure.unwrap();
    assert_eq!((f.stage, &f.kind), (Stage::Window, &FailureKind::LateStart));
    assert!(f.message.contains("late margin"), "{}", f.message);
    let lateness = r.barrier.unwrap().lateness_ns.unwrap();
    assert!(lateness >= 1_400_000_000, "{lateness}");
    // What it measured in its late window is kept.
    let window = r.window.unwrap();
    let batches = read_batches(&c.out("w1").join("batches.jsonl")).unwrap();
    assert_eq!(batches.len() as u64, window.batches);

    let (status, stderr) = finish(on_time);
    assert_eq!(status.code(), Some(0), "{stderr}");

    let dirs = [c.out("w0"), c.out("w1")];
    let err = coload_analysis::summarize_dirs(&dirs, &coload_analysis::Options::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("replica 1"), "{err}");
    assert!(err.contains("late_start"), "{err}");
    assert!(!err.contains("replica 0"), "{err}");
}

/// A hog on the CPU refuses with the reason (there is no device memory to take), its
/// report says where, and its peer is stopped through the barrier instead of waiting. Under
/// `--mode mps` both record the declared share and their `CUDA_MPS_*` environment.
#[test]
fn a_hog_on_the_cpu_refuses_and_mps_workers_record_their_share() {
    let _serial = serial();
    let c = Cohort::new("hog-on-cpu");
    let mps = [
        "--mode",
        "mps",
        "--mps-replicas",
        "7",
        "--hog-bytes",
        "1GiB",
    ];
    let env = [("CUDA_MPS_PIPE_DIRECTORY", "/nonexistent/mps-pipe")];
    let spawn = |replica, workload, out| c.spawn_env(replica, 2, workload, out, &mps, &env);
    // The trainer first, past its preflight: a hog that fails at once would otherwise abort the
    // experiment before the trainer's preflight, which then refuses a used experiment id.
    let train = spawn(1, "train", "train");
    wait_for(&c.sync().join("hog-on-cpu"));
    std::thread::sleep(Duration::from_millis(500));
    let hog = spawn(0, "hog", "hog");
    let (status, stderr) = finish(hog);
    assert_eq!(
        status.code(),
        Some(i32::from(exit::INVALID_INPUT)),
        "{stderr}"
    );
    let r = report(&c.out("hog"));
    let failure = r.failure.unwrap();
    assert_eq!(
        (failure.stage, failure.kind),
        (Stage::Warmup, FailureKind::InvalidOption)
    );
    assert!(
        failure
            .message
            .contains("on the CPU (--device cpu) there is no device memory to take"),
        "{}",
        failure.message
    );
    assert!(!c.out("hog").join("hold.json").exists());
    let share = r.share.expect("an mps worker records its share");
    let declared = share.declared.unwrap();
    assert_eq!(declared.replicas, Some(7));
    assert_eq!(declared.active_thread_percentage, Some(14));
    // No GPU, so no device total to divide and nothing observed.
    assert_eq!(declared.pinned_memory_limit_bytes, None);
    assert!(share.observed.is_none());
    assert_eq!(
        share
            .mps_environment
            .get("CUDA_MPS_PIPE_DIRECTORY")
            .map(String::as_str),
        Some("/nonexistent/mps-pipe")
    );

    let (status, stderr) = finish(train);
    assert_eq!(
        status.code(),
        Some(i32::from(exit::BARRIER_ABORTED)),
        "{stderr}"
    );
    let r = report(&c.out("train"));
    assert_eq!(r.failure.unwrap().kind, FailureKind::PeerFailed);
    assert_eq!(
        r.share.unwrap().declared.unwrap().active_thread_percentage,
        Some(14)
    );
}

/// `--mode mps` without a share is refused before anything runs, naming the choices.
#[test]
fn mode_mps_without_a_share_is_refused() {
    let c = Cohort::new("mps-no-share");
    let (status, stderr) = finish(c.spawn(0, 1, "train", "w0", &["--mode", "mps"]));
    assert_eq!(status.code(), Some(i32::from(exit::INVALID_INPUT)));
    assert!(
        stderr.contains("--mode mps needs the share each MPS client runs under: --mps-replicas N"),
        "{stderr}"
    );
    assert!(!c.out("w0").join("worker.json").exists());
}
