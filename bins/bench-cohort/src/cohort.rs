//! Runs the cohort(s): spawn one bench-worker per replica, watch them, stop the rest when one
//! fails (or cannot even be started), then summarize.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use coload_barrier::AbortOutcome;
use coload_cohort_schema::cli::{WorkerPlace, to_argv};
use coload_cohort_schema::{FailureKind, Mode, Workload, exit, files, read_worker_report};
use coload_timing::Clock;

use crate::cli::Args;
use crate::error::{LauncherError, chain};
use crate::mix::Mix;
use crate::mps::MpsDaemon;

/// How often the launcher looks at its workers.
const POLL: Duration = Duration::from_millis(50);

/// Runs every repeat and returns the exit code: complete only if every cohort completed.
pub(crate) fn run(args: &Args) -> Result<u8, LauncherError> {
    let mix = args.validate().map_err(LauncherError::Usage)?;
    let worker_bin = match &args.worker_bin {
        Some(p) => p.clone(),
        None => std::env::current_exe()
            .map_err(|source| LauncherError::Output {
                path: "the current executable".into(),
                source,
            })?
            .with_file_name("bench-worker"),
    };
    if !worker_bin.exists() {
        return Err(LauncherError::WorkerMissing(worker_bin));
    }
    create_dir(&args.out)?;

    let interrupted = Arc::new(AtomicBool::new(false));
    {
        let flag = Arc::clone(&interrupted);
        ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst))?;
    }
    if args.capacity.find_capacity {
        return crate::capacity::run(args, &mix, &worker_bin, &interrupted);
    }
    let mut code = exit::COMPLETE;
    for k in 1..=args.repeat {
        let dir = if args.repeat == 1 {
            args.out.clone()
        } else {
            args.out.join(format!("rep-{k}"))
        };
        let (result, _) = run_one(args, &mix, &worker_bin, &dir, &interrupted, None)?;
        if result != exit::COMPLETE && code == exit::COMPLETE {
            code = result;
        }
        if interrupted.load(Ordering::SeqCst) {
            eprintln!("interrupted; stopped after cohort {k} of {}", args.repeat);
            return Ok(130);
        }
    }
    Ok(code)
}

fn create_dir(path: &Path) -> Result<(), LauncherError> {
    fs::create_dir_all(path).map_err(|source| LauncherError::Output {
        path: path.to_owned(),
        source,
    })
}

fn experiment_id(mode: Mode, mix: &Mix) -> String {
    let now = time::OffsetDateTime::now_utc();
    let stamp = format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second()
    );
    let short = uuid::Uuid::new_v4().simple().to_string();
    format!("{mode}-{}-{stamp}-{}", mix.label(), &short[..8])
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
pub(crate) fn run_one(
    args: &Args,
    mix: &Mix,
    worker_bin: &Path,
    dir: &Path,
    interrupted: &AtomicBool,
    rate: Option<f64>,
) -> Result<(u8, String), LauncherError> {
    create_dir(dir)?;
    let experiment = experiment_id(args.flags.mode, mix);
    let sync = dir.join("sync");
    create_dir(&sync)?;
    let count = mix.len() as u32;
    if !args.quiet {
        eprintln!(
            "cohort {experiment}: {count} workers ({}), mode {}, into {}",
            mix.label(),
            args.flags.mode,
            dir.display()
        );
    }
    let mut mps = match crate::share::plan_cohort(&args.flags, &args.visible_devices, mix.len())? {
        Some(plan) => {
            let daemon = MpsDaemon::start(&dir.join("mps"), &plan)?;
            if !args.quiet {
                eprintln!(
                    "MPS share: {}; applied and read back (see {})",
                    plan.declared.describe(),
                    dir.join("mps").join("control.txt").display()
                );
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
        commands.push(worker_command(
            args,
            worker_bin,
            &place,
            mps.as_ref(),
            rate,
        )?);
    }
    let hogs: Vec<u32> = (0u32..)
        .zip(mix.workloads())
        .filter(|(_, w)| **w == Workload::Hog)
        .map(|(r, _)| r)
        .collect();
    let (mut workers, spawn_error, stop) =
        start_cohort(&mut commands, &hogs, dir, args, interrupted);
    let grace = Duration::from_secs_f64(args.flags.window_s + args.flags.start_lead_s + 30.0);
    let failed = watch(
        &mut workers,
        grace,
        &sync,
        &experiment,
        interrupted,
        stop.as_ref(),
    );
    if let Some(daemon) = mps.as_mut() {
        daemon.stop()?;
    }
    let isolation = if hogs.is_empty() {
        None
    } else {
        write_isolation(dir, args.quiet)
    };

    if let Some((replica, source)) = spawn_error {
        report_failure(dir, &workers, None);
        return Err(LauncherError::Spawn {
            replica,
            started: workers.len(),
            bin: worker_bin.to_owned(),
            source,
        });
    }
    if failed.is_some() || workers.len() < mix.len() {
        // A hog that never held its memory stops the cohort before the others start.
        report_failure(dir, &workers, failed);
        if let Some(stop) = &stop {
            eprintln!("  the cohort was stopped: {}", stop.reason);
        }
        if let Some(text) = isolation {
            print!("{text}");
        }
        return Ok((exit::INCOMPLETE_COHORT, experiment));
    }
    if !args.quiet {
        eprintln!("cohort {experiment}: all {count} workers complete; summarizing");
    }
    Ok((summarize(args, dir, count)?, experiment))
}

/// The command line of one worker: its place in the cohort, the flags every worker gets, and
/// a serve worker's serve flags (at `rate`, a capacity probe's, when given).
fn worker_command(
    args: &Args,
    worker_bin: &Path,
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
    let mut flags = args.flags.clone();
    flags.strict_device |= args.strict;
    let mut cmd = Command::new(worker_bin);
    cmd.args(to_argv(place)?).args(to_argv(&flags)?);
    if place.workload == Workload::Serve {
        cmd.args(to_argv(&crate::serve::for_worker(&args.serve, rate))?);
    }
    cmd.env_remove("JOB_COMPLETION_INDEX")
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err);
    if let Some(dev) = args.visible_devices.get(place.replica as usize) {
        cmd.env("CUDA_VISIBLE_DEVICES", dev);
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
    args: &Args,
    interrupted: &AtomicBool,
) -> (Vec<Worker>, Option<(u32, std::io::Error)>, Option<Stop>) {
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
        let timeout = Duration::from_secs_f64(args.flags.join_timeout_s);
        if let Err(reason) = await_holding(&mut workers, dir, timeout, interrupted, args.quiet) {
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

/// Waits until every started hog has published `hold.json` in its folder (issue 12). Fails,
/// with the reason, when a hog exits first, on Ctrl-C, or after `timeout`.
fn await_holding(
    hogs: &mut [Worker],
    dir: &Path,
    timeout: Duration,
    interrupted: &AtomicBool,
    quiet: bool,
) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
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
                eprintln!("the hog holds its memory; starting the other workers");
            }
            return Ok(());
        }
        if interrupted.load(Ordering::SeqCst) {
            return Err("the launcher was interrupted".to_owned());
        }
        if Instant::now() >= deadline {
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
fn write_isolation(dir: &Path, quiet: bool) -> Option<String> {
    let result = match coload_analysis::isolation_dirs(&[dir.to_owned()]) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("warning: no isolation result: {e}");
            return None;
        }
    };
    let path = dir.join(files::ISOLATION);
    if let Err(e) = coload_cohort_schema::write_json_atomic(&path, &result) {
        eprintln!("warning: cannot write {}: {e}", path.display());
    } else if !quiet {
        eprintln!(
            "memory isolation: {} (wrote {})",
            result.outcome.as_str(),
            path.display()
        );
    }
    Some(coload_analysis::render_isolation_table(
        std::slice::from_ref(&result),
    ))
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
    interrupted: &AtomicBool,
    stop: Option<&Stop>,
) -> Option<u32> {
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
                Ok(AbortOutcome::AlreadyStarted) => eprintln!(
                    "{}; the cohort had already started, so the other workers finish their windows",
                    stop.reason
                ),
                Ok(_) => {}
                Err(e) => eprintln!("warning: cannot abort the cohort: {}", chain(&e)),
            }
            // Workers at the barrier see the abort within a second; one inside its window
            // needs at most the window to finish and write.
            kill_at = Some(Instant::now() + grace);
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
        _ => u8::try_from(code).map_or("killed", exit::name),
    }
}

fn report_failure(dir: &Path, workers: &[Worker], first: Option<u32>) {
    match first {
        Some(first) => eprintln!(
            "error: the cohort failed (replica {first} first); it is incomplete and was not summarized"
        ),
        None => eprintln!("error: the cohort could not be started whole; it was not summarized"),
    }
    for w in workers {
        let worker_dir = dir.join(format!("worker-{}", w.replica));
        let code = w.status.and_then(|s| s.code());
        let report = read_worker_report(&worker_dir.join(files::WORKER_REPORT));
        let reason = match (&report, code) {
            (Ok(r), _) => match &r.failure {
                Some(f) => format!("failed in {}: {} ({})", f.stage, f.message, f.kind),
                None => "complete".to_owned(),
            },
            (Err(_), Some(c)) => {
                format!("exited with {c} ({}) without a worker.json", exit_name(c))
            }
            (Err(_), None) => "killed without a worker.json".to_owned(),
        };
        eprintln!(
            "  replica {}: {reason}  [log: {}]",
            w.replica,
            worker_dir.join("log").display()
        );
    }
}

fn summarize(args: &Args, dir: &Path, count: u32) -> Result<u8, LauncherError> {
    let dirs: Vec<PathBuf> = (0..count)
        .map(|i| dir.join(format!("worker-{i}")))
        .collect();
    let options = coload_analysis::Options {
        strict: args.strict,
        slo_ms: args.serve.slo_ms,
        slo_quantile: args.capacity.slo_quantile,
        ..coload_analysis::Options::default()
    };
    match coload_analysis::summarize_dirs(&dirs, &options) {
        Ok(summary) => {
            let path = dir.join("summary.json");
            coload_cohort_schema::write_json_atomic(&path, &summary)?;
            println!("{}", coload_analysis::render_table(&summary));
            if !args.quiet {
                eprintln!("wrote {}", path.display());
            }
            Ok(exit::COMPLETE)
        }
        Err(e) => {
            eprintln!("error: {e}");
            Ok(e.exit_code())
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

    /// Issue 11: when worker k cannot be started, workers 0..k-1 used to wait at the barrier
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
        let stop = Some(Stop {
            kind: FailureKind::LauncherStopped,
            reason: format!("replica {replica} could not be started: {e}"),
        });
        let first = watch(
            &mut workers,
            Duration::from_secs(30),
            &sync,
            experiment,
            &never,
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
