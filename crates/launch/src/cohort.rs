//! Runs the cohort(s): spawn one bench-worker per replica, watch them, stop the rest when one
//! fails (or cannot even be started), then summarize.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use coload_barrier::AbortOutcome;
use coload_cohort_schema::{CohortFailure, FailureKind, Mode, Workload, exit, files};
use coload_spec::{Mix, WorkerPlace, error_chain as chain, to_argv};
use coload_timing::Clock;

use crate::args::LaunchArgs;
use crate::console::Console;
use crate::end::WorkerEnd;
use crate::error::LauncherError;
use crate::mps::MpsDaemon;

/// How often the launcher looks at its workers.
const POLL: Duration = Duration::from_millis(50);

/// Exit code after Ctrl-C (128 + SIGINT).
pub const INTERRUPTED: u8 = 130;

/// What every step of a launch needs.
pub(crate) struct Cx<'a> {
    pub(crate) args: &'a LaunchArgs,
    pub(crate) console: &'a dyn Console,
    pub(crate) interrupted: &'a AtomicBool,
    pub(crate) worker_bin: PathBuf,
    /// Intra-op threads per worker on the CPU (`OMP_NUM_THREADS`), `None` on a GPU.
    pub(crate) cpu_threads: Option<u32>,
}

pub(crate) fn create_dir(path: &Path) -> Result<(), LauncherError> {
    fs::create_dir_all(path).map_err(|source| LauncherError::Output {
        path: path.to_owned(),
        source,
    })
}

/// A fresh experiment id for a cohort of `mix` under `mode`: `<mode>-<mix>-<UTC stamp>-<8 hex>`,
/// at most 63 characters of `[a-z0-9-]`, so that the one id also serves as a Kubernetes label
/// value and Job name (coload-cluster uses it too). The mix part is cut to fit; the random end
/// keeps two cohorts apart.
#[must_use]
pub fn experiment_id(mode: Mode, mix: &Mix) -> String {
    let now = time::OffsetDateTime::now_utc();
    let stamp = format!(
        "{:04}{:02}{:02}t{:02}{:02}{:02}",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second()
    );
    let short = uuid::Uuid::new_v4().simple().to_string();
    let mode = mode.to_string();
    let fixed = mode.len() + stamp.len() + 8 + 3;
    let mut label = mix.label();
    label.truncate(63usize.saturating_sub(fixed));
    let label = label.trim_end_matches('-');
    format!("{mode}-{label}-{stamp}-{}", &short[..8])
}

/// A started worker process.
#[derive(Debug)]
struct Worker {
    replica: u32,
    child: Child,
    status: Option<ExitStatus>,
}

/// Why the launcher stops a cohort that has not finished.
#[derive(Debug, Clone)]
struct Stop {
    kind: FailureKind,
    reason: String,
}

/// Runs one cohort into `dir` (serve workers at `rate` when given, else at --rate); returns its
/// exit code and experiment id.
#[expect(
    clippy::too_many_lines,
    reason = "one cohort's steps in order: MPS, commands, start, watch, failure or summary"
)]
pub(crate) fn run_one(
    cx: &Cx<'_>,
    mix: &Mix,
    dir: &Path,
    rate: Option<f64>,
) -> Result<(u8, String), LauncherError> {
    let (args, console) = (cx.args, cx.console);
    let worker_bin = cx.worker_bin.as_path();
    create_dir(dir)?;
    let experiment = experiment_id(args.spec.flags.mode, mix);
    let sync = dir.join("sync");
    create_dir(&sync)?;
    let count = mix.len() as u32;
    if !args.quiet {
        console.progress(&format!(
            "cohort {experiment}: {count} workers ({}), mode {}, into {}",
            mix.label(),
            args.spec.flags.mode,
            dir.display()
        ));
    }
    let mut mps =
        match crate::share::plan_cohort(&args.spec.flags, &args.visible_devices, mix.len())? {
            Some(plan) => {
                let daemon = MpsDaemon::start(&dir.join("mps"), &plan)?;
                if !args.quiet {
                    console.progress(&format!(
                        "MPS share: {}; applied and read back (see {})",
                        plan.declared.describe(),
                        dir.join("mps").join("control.txt").display()
                    ));
                }
                Some(daemon)
            }
            None => None,
        };

    // Everything that can go wrong before a process exists is checked for every worker first.
    let mut commands = Vec::with_capacity(mix.len());
    for (replica, workload) in (0u32..).zip(mix.workloads()) {
        let place = WorkerPlace {
            experiment: experiment.clone(),
            replica,
            count,
            workload: *workload,
            sync_dir: sync.clone(),
            out: dir.join(format!("worker-{replica}")),
        };
        commands.push(worker_command(cx, &place, mps.as_ref(), rate)?);
    }
    let hogs: Vec<u32> = (0u32..)
        .zip(mix.workloads())
        .filter(|(_, w)| **w == Workload::Hog)
        .map(|(r, _)| r)
        .collect();
    let (mut workers, spawn_error, stop) = start_cohort(&mut commands, &hogs, dir, cx);
    let failed = watch(
        &mut workers,
        // A worker inside its window finishes it and writes its artifacts before it is killed.
        args.spec.flags.finish_within(),
        &sync,
        &experiment,
        cx,
        stop.as_ref(),
    );
    if let Some(daemon) = mps.as_mut() {
        daemon.stop()?;
    }
    let isolation = if hogs.is_empty() {
        None
    } else {
        write_isolation(dir, args.quiet, console)
    };

    if let Some((replica, source)) = spawn_error {
        let message = format!("replica {replica} could not be started: {source}");
        report_failure(dir, &experiment, &workers, None, console);
        write_failure(
            dir,
            &CohortFailure {
                kind: FailureKind::SpawnFailed,
                replica: Some(replica),
                message,
                exit_code: exit::INCOMPLETE_COHORT,
                ..failure_record(dir, &experiment, &workers)
            },
            console,
        );
        return Err(LauncherError::Spawn {
            replica,
            started: workers.len(),
            bin: worker_bin.to_owned(),
            source,
        });
    }
    if failed.is_some() || workers.len() < mix.len() {
        // A hog that never held its memory stops the cohort before the others start.
        let mut record = report_failure(dir, &experiment, &workers, failed, console);
        if let Some(stop) = &stop {
            console.progress(&format!("  the cohort was stopped: {}", stop.reason));
            if failed.is_none() {
                record.kind = stop.kind.clone();
                record.message.clone_from(&stop.reason);
            }
        }
        write_failure(dir, &record, console);
        if let Some(text) = isolation {
            console.output(&text);
        }
        return Ok((exit::INCOMPLETE_COHORT, experiment));
    }
    if !args.quiet {
        console.progress(&format!(
            "cohort {experiment}: all {count} workers complete; summarizing"
        ));
    }
    Ok((summarize(cx, dir, &experiment, &workers)?, experiment))
}

/// The command line of one worker: its place in the cohort, the flags every worker gets, and
/// a serve worker's serve flags (at `rate`, a capacity probe's, when given).
fn worker_command(
    cx: &Cx<'_>,
    place: &WorkerPlace,
    mps: Option<&MpsDaemon>,
    rate: Option<f64>,
) -> Result<Command, LauncherError> {
    create_dir(&place.out)?;
    let log_path = place.out.join("log");
    let output = |source| LauncherError::Output {
        path: log_path.clone(),
        source,
    };
    let log = File::create(&log_path).map_err(output)?;
    let log_err = log.try_clone().map_err(output)?;
    let args = cx.args;
    let mut flags = args.spec.flags.clone();
    flags.strict_device |= args.spec.strict;
    let mut cmd = Command::new(&cx.worker_bin);
    crate::parent::die_with_parent(&mut cmd);
    cmd.args(to_argv(place)?).args(to_argv(&flags)?);
    if let Some(serve) = crate::serve::for_worker(&args.spec.serve, place.workload, rate) {
        cmd.args(to_argv(&serve)?);
    }
    cmd.env_remove("JOB_COMPLETION_INDEX")
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err);
    if let Some(dev) = args.visible_devices.get(place.replica as usize) {
        cmd.env("CUDA_VISIBLE_DEVICES", dev);
    }
    if let Some(n) = cx.cpu_threads {
        // libtorch sizes its intra-op pool from OMP_NUM_THREADS; a passive wait makes a thread
        // that runs out of work sleep instead of spinning on a core a peer needs.
        cmd.env("OMP_NUM_THREADS", n.to_string())
            .env("MKL_NUM_THREADS", n.to_string())
            .env("OMP_WAIT_POLICY", "PASSIVE");
    }
    if let Some(daemon) = mps {
        for (k, v) in daemon.client_env() {
            cmd.env(k, v);
        }
    }
    Ok(cmd)
}

/// Starts the workers: the hogs first, then, once every hog holds its memory, the others (issue
/// 12: the hog always allocates before they build their models). Returns the started workers,
/// the spawn error if one could not be started, and why the cohort must stop, if it must.
fn start_cohort(
    commands: &mut [Command],
    hogs: &[u32],
    dir: &Path,
    cx: &Cx<'_>,
) -> (Vec<Worker>, Option<(u32, std::io::Error)>, Option<Stop>) {
    let args = cx.args;
    let rest: Vec<u32> = (0u32..)
        .take(commands.len())
        .filter(|r| !hogs.contains(r))
        .collect();
    let mut spawn = |replicas: &[u32]| {
        start_all(
            replicas
                .iter()
                .map(|r| (*r, commands[*r as usize].spawn()))
                .collect::<Vec<_>>(),
        )
    };
    let (mut workers, mut spawn_error) = spawn(hogs);
    let mut stop = None;
    if spawn_error.is_none() && !hogs.is_empty() {
        let timeout = args.spec.flags.join_timeout_s.duration();
        if let Err(reason) = await_holding(&mut workers, dir, timeout, cx) {
            stop = Some(Stop {
                kind: FailureKind::LauncherStopped,
                reason,
            });
        }
    }
    if spawn_error.is_none() && stop.is_none() {
        let (more, error) = spawn(&rest);
        workers.extend(more);
        spawn_error = error;
    }
    if let Some((replica, e)) = &spawn_error {
        stop = Some(Stop {
            kind: FailureKind::LauncherStopped,
            reason: format!("replica {replica} could not be started: {e}"),
        });
    }
    (workers, spawn_error, stop)
}

/// Waits until every started hog has published `hold.json` in its folder. Fails,
/// with the reason, when a hog exits first, on Ctrl-C, or after `timeout`.
fn await_holding(
    hogs: &mut [Worker],
    dir: &Path,
    timeout: Duration,
    cx: &Cx<'_>,
) -> Result<(), String> {
    let (interrupted, quiet) = (cx.interrupted, cx.args.quiet);
    let deadline = Instant::now().checked_add(timeout);
    loop {
        let mut waiting = Vec::new();
        for w in hogs.iter_mut() {
            let marker = dir.join(format!("worker-{}", w.replica)).join(files::HOLD);
            if marker.is_file() {
                continue;
            }
            // The status is cached by the child and seen again by `watch`.
            if let Ok(Some(status)) = w.child.try_wait() {
                let code = status.code().unwrap_or(-1);
                return Err(format!(
                    "the hog (replica {}) exited with {code} ({}) before it held its memory",
                    w.replica,
                    exit_name(code)
                ));
            }
            waiting.push(w.replica);
        }
        if waiting.is_empty() {
            if !quiet {
                cx.console
                    .progress("the hog holds its memory; starting the other workers");
            }
            return Ok(());
        }
        if interrupted.load(Ordering::SeqCst) {
            return Err("the launcher was interrupted".to_owned());
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(format!(
                "the hog (replica {}) did not hold its memory within {} s",
                waiting[0],
                timeout.as_secs_f64()
            ));
        }
        std::thread::sleep(POLL);
    }
}

/// The isolation result of a hog cohort, written beside the workers; returns it as text for
/// the terminal (or `None` when it could not be made, which is said on stderr).
fn write_isolation(dir: &Path, quiet: bool, console: &dyn Console) -> Option<String> {
    let result = match coload_analysis::isolation_dirs(&[dir.to_owned()]) {
        Ok(r) => r,
        Err(e) => {
            console.progress(&format!("warning: no isolation result: {e}"));
            return None;
        }
    };
    let path = dir.join(files::ISOLATION);
    if let Err(e) = coload_cohort_schema::write_json_atomic(&path, &result) {
        console.progress(&format!("warning: cannot write {}: {e}", path.display()));
    } else if !quiet {
        console.progress(&format!(
            "memory isolation: {} (wrote {})",
            result.outcome.as_str(),
            path.display()
        ));
    }
    Some(coload_report::render_isolation_table(std::slice::from_ref(
        &result,
    )))
}

/// Starts workers in the order given until one cannot be started; the rest are not attempted.
/// Returns the started workers and, if one failed, its replica and the error.
fn start_all(
    spawns: impl IntoIterator<Item = (u32, std::io::Result<Child>)>,
) -> (Vec<Worker>, Option<(u32, std::io::Error)>) {
    let mut workers = Vec::new();
    for (replica, spawned) in spawns {
        match spawned {
            Ok(child) => workers.push(Worker {
                replica,
                child,
                status: None,
            }),
            Err(e) => return (workers, Some((replica, e))),
        }
    }
    (workers, None)
}

/// Waits for every worker. On the first failure, on Ctrl-C, or when `stop` says so from the
/// start, aborts the experiment through the barrier so that workers still at the barrier fail
/// cleanly (and write their reports), gives the rest `grace`, then kills what is left. Returns
/// the first replica that failed, if any.
fn watch(
    workers: &mut [Worker],
    grace: Duration,
    sync: &Path,
    experiment: &str,
    cx: &Cx<'_>,
    stop: Option<&Stop>,
) -> Option<u32> {
    let (interrupted, console) = (cx.interrupted, cx.console);
    let clock = Clock::anchor();
    let mut first_failure: Option<u32> = None;
    let mut kill_at: Option<Instant> = None;
    loop {
        let mut running = 0;
        for w in workers.iter_mut() {
            if w.status.is_some() {
                continue;
            }
            match w.child.try_wait() {
                Ok(Some(status)) => {
                    w.status = Some(status);
                    if !status.success() && first_failure.is_none() {
                        first_failure = Some(w.replica);
                    }
                }
                Ok(None) => running += 1,
                Err(_) => {
                    let _ = w.child.kill();
                }
            }
        }
        if running == 0 {
            return first_failure;
        }
        let reason = if interrupted.load(Ordering::SeqCst) {
            Some(Stop {
                kind: FailureKind::LauncherStopped,
                reason: "the launcher was interrupted".to_owned(),
            })
        } else if let Some(r) = first_failure {
            let code = workers
                .iter()
                .find(|w| w.replica == r)
                .and_then(|w| w.status)
                .and_then(|s| s.code())
                .unwrap_or(-1);
            Some(Stop {
                kind: FailureKind::PeerFailed,
                reason: format!("replica {r} exited with {code} ({})", exit_name(code)),
            })
        } else {
            stop.cloned()
        };
        if let (Some(stop), None) = (reason, kill_at) {
            match coload_barrier::abort_experiment(
                sync,
                experiment,
                stop.kind,
                &stop.reason,
                &clock,
            ) {
                Ok(AbortOutcome::AlreadyStarted) => console.progress(&format!(
                    "{}; the cohort had already started, so the other workers finish their windows",
                    stop.reason
                )),
                Ok(_) => {}
                Err(e) => {
                    console.progress(&format!("warning: cannot abort the cohort: {}", chain(&e)));
                }
            }
            // Workers at the barrier see the abort within a second; one inside its window
            // needs at most the window to finish and write.
            kill_at = Instant::now().checked_add(grace);
        }
        if kill_at.is_some_and(|t| Instant::now() >= t) {
            for w in workers.iter_mut().filter(|w| w.status.is_none()) {
                let _ = w.child.kill();
            }
        }
        std::thread::sleep(POLL);
    }
}

fn exit_name(code: i32) -> &'static str {
    match code {
        // The shell's and the loader's code for "cannot run it": most often libtorch not found.
        127 => {
            "not started: a library or the executable was not found; is libtorch on LD_LIBRARY_PATH?"
        }
        _ => exit::describe(code),
    }
}

/// Says on the console why the cohort failed and what each worker did; returns the record for
/// `failure.json`.
fn report_failure(
    dir: &Path,
    experiment: &str,
    workers: &[Worker],
    first: Option<u32>,
    console: &dyn Console,
) -> CohortFailure {
    match first {
        Some(first) => console.progress(&format!(
            "error: the cohort failed (replica {first} first); it is incomplete and was not \
             summarized"
        )),
        None => {
            console.progress("error: the cohort could not be started whole; it was not summarized");
        }
    }
    let mut record = failure_record(dir, experiment, workers);
    for w in &record.workers {
        console.progress(&format!(
            "  replica {}: {}  [log: {}]",
            w.replica,
            w.outcome,
            dir.join(format!("worker-{}", w.replica))
                .join("log")
                .display()
        ));
    }
    let chosen = first
        .and_then(|r| record.workers.iter().find(|w| w.replica == r))
        .or_else(|| record.workers.iter().find(|w| w.outcome != "complete"));
    if let Some(w) = chosen {
        record.replica = Some(w.replica);
        record.kind = w.kind.clone().unwrap_or(FailureKind::WorkerExited);
        record.message = w.outcome.clone();
    }
    // A worker that failed because a peer aborted names the peer's kind; the first failure is
    // the one that says why.
    record
}

/// The failure record of this node's workers (`crate::end::failure_record`), saying how a
/// worker process that left no `worker.json` ended.
fn failure_record(dir: &Path, experiment: &str, workers: &[Worker]) -> CohortFailure {
    let ends: Vec<WorkerEnd> = workers
        .iter()
        .map(|w| WorkerEnd {
            replica: w.replica,
            exit_code: w.status.and_then(|s| s.code()),
        })
        .collect();
    crate::end::failure_record(dir, experiment, &ends, &|code| match code {
        Some(c) => format!("exited with {c} ({}) without a worker.json", exit_name(c)),
        None => "killed without a worker.json".to_owned(),
    })
}

/// Writes `failure.json`; a cohort that failed and cannot say why on disk still said it on the
/// console.
fn write_failure(dir: &Path, record: &CohortFailure, console: &dyn Console) {
    let path = dir.join(files::COHORT_FAILURE);
    if let Err(e) = coload_cohort_schema::write_json_atomic(&path, record) {
        console.progress(&format!("warning: cannot write {}: {e}", path.display()));
    }
}

fn summarize(
    cx: &Cx<'_>,
    dir: &Path,
    experiment: &str,
    workers: &[Worker],
) -> Result<u8, LauncherError> {
    let (args, console) = (cx.args, cx.console);
    let dirs: Vec<PathBuf> = workers
        .iter()
        .map(|w| dir.join(format!("worker-{}", w.replica)))
        .collect();
    match coload_analysis::summarize_dirs(&dirs, &crate::end::summary_options(&args.spec)) {
        Ok(summary) => {
            let path = dir.join(files::SUMMARY);
            coload_cohort_schema::write_json_atomic(&path, &summary)?;
            console.output(&format!("{}\n", coload_report::render_table(&summary)));
            if !args.quiet {
                console.progress(&format!("wrote {}", path.display()));
            }
            Ok(exit::COMPLETE)
        }
        Err(e) => {
            console.progress(&format!("error: {e}"));
            let code = e.exit_code();
            write_failure(
                dir,
                &CohortFailure {
                    kind: FailureKind::SummaryRefused,
                    replica: None,
                    message: e.to_string(),
                    exit_code: code,
                    ..failure_record(dir, experiment, workers)
                },
                console,
            );
            Ok(code)
        }
    }
}

#[cfg(test)]
mod tests {
    use coload_cohort_schema::{AbortRecord, read_document};

    use super::*;

    /// A stand-in worker that waits at its "barrier" until abort.json appears, as bench-worker
    /// does, and exits 15; it gives up after 60 s.
    fn waiting_worker(sync: &Path, experiment: &str) -> std::io::Result<Child> {
        let abort = sync.join(experiment).join("abort.json");
        Command::new("sh")
            .arg("-c")
            .arg(
                "i=0; while [ $i -lt 1200 ]; do [ -f \"$1\" ] && exit 15; sleep 0.05; \
                 i=$((i + 1)); done; exit 0",
            )
            .arg("sh")
            .arg(abort)
            .spawn()
    }

    /// When worker k cannot be started, workers 0..k-1 used to wait at the barrier
    /// for the whole join timeout. They are stopped through the barrier at once.
    #[test]
    fn a_worker_that_cannot_start_stops_the_ones_already_started() {
        let tmp = tempfile::tempdir().unwrap();
        let sync = tmp.path().join("sync");
        std::fs::create_dir(&sync).unwrap();
        let experiment = "spawn-fails";
        let spawns = vec![
            (0, waiting_worker(&sync, experiment)),
            (1, waiting_worker(&sync, experiment)),
            (2, Err(std::io::Error::other("no more processes"))),
            (3, waiting_worker(&sync, experiment)),
        ];
        let (mut workers, failed) = start_all(spawns);
        let (replica, e) = failed.unwrap();
        assert_eq!((replica, e.to_string().as_str()), (2, "no more processes"));
        assert_eq!(
            workers.len(),
            2,
            "the workers after the failed one are not kept"
        );

        let begin = Instant::now();
        let never = AtomicBool::new(false);
        let args = LaunchArgs {
            spec: coload_spec::CohortSpec::new(&Mix::parse("train=4").unwrap(), Mode::Timeslice),
            out: tmp.path().join("out"),
            repeat: 1,
            visible_devices: Vec::new(),
            worker_bin: None,
            quiet: true,
            cpu_threads: None,
        };
        let cx = Cx {
            args: &args,
            console: &crate::QuietConsole,
            interrupted: &never,
            worker_bin: "bench-worker".into(),
            cpu_threads: None,
        };
        let stop = Some(Stop {
            kind: FailureKind::LauncherStopped,
            reason: format!("replica {replica} could not be started: {e}"),
        });
        let first = watch(
            &mut workers,
            Duration::from_secs(30),
            &sync,
            experiment,
            &cx,
            stop.as_ref(),
        );
        assert!(
            begin.elapsed() < Duration::from_secs(20),
            "the started workers waited {:?}",
            begin.elapsed()
        );
        // Whichever of the two the watcher saw exit first (they see the abort together).
        assert!(matches!(first, Some(0 | 1)), "{first:?}");
        for w in &workers {
            assert_eq!(w.status.unwrap().code(), Some(15), "replica {}", w.replica);
        }
        let abort: AbortRecord = read_document(&sync.join(experiment).join("abort.json")).unwrap();
        assert_eq!(abort.kind, FailureKind::LauncherStopped);
        assert_eq!(abort.by_replica, AbortRecord::LAUNCHER);
        assert_eq!(
            abort.reason,
            "replica 2 could not be started: no more processes"
        );
        // The claim is taken, so no start can follow the abort.
        assert!(sync.join(experiment).join("decision.json").exists());
    }
}
