//! Runs the cohort(s): spawn one bench-worker per replica, watch them, stop the rest when one
//! fails, then summarize.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use coload_cohort_schema::{
    AbortRecord, Mode, SCHEMA_VERSION, Workload, exit, files, read_worker_report,
};

use crate::cli::Args;
use crate::mix;
use crate::mps::MpsDaemon;

/// How often the launcher looks at its workers.
const POLL: Duration = Duration::from_millis(50);

/// Runs every repeat and returns the exit code: complete only if every cohort completed.
pub(crate) fn run(args: &Args) -> anyhow::Result<u8> {
    let mix = match (&args.workers, args.count, &args.workload) {
        (Some(spec), _, _) => mix::parse_mix(spec).map_err(anyhow::Error::msg)?,
        (None, Some(n), Some(w)) => {
            let w: Workload = w.parse().map_err(anyhow::Error::msg)?;
            if n == 0 {
                bail!("--count must be at least 1");
            }
            vec![w; n as usize]
        }
        _ => bail!(
            "say which workers to run: --workers infer=1,train=6, or --count N --workload train|infer"
        ),
    };
    args.serve.check(&mix)?;
    if !args.visible_devices.is_empty() && args.visible_devices.len() != mix.len() {
        bail!(
            "--visible-devices lists {} devices for {} workers; give one per worker",
            args.visible_devices.len(),
            mix.len()
        );
    }
    let worker_bin = match &args.worker_bin {
        Some(p) => p.clone(),
        None => std::env::current_exe()
            .context("cannot locate this executable")?
            .with_file_name("bench-worker"),
    };
    if !worker_bin.exists() {
        bail!(
            "bench-worker not found at {} (build it, or pass --worker-bin)",
            worker_bin.display()
        );
    }
    fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create --out {}", args.out.display()))?;

    let interrupted = Arc::new(AtomicBool::new(false));
    {
        let flag = Arc::clone(&interrupted);
        ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst))
            .context("cannot install the Ctrl-C handler")?;
    }

    if args.serve.find_capacity {
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

fn experiment_id(mode: Mode, mix: &[Workload]) -> String {
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
    format!("{mode}-{}-{stamp}-{}", mix::label(mix), &short[..8])
}

struct Worker {
    replica: u32,
    child: Child,
    status: Option<ExitStatus>,
}

/// Runs one cohort into `dir` (serve workers at `rate` when given, else at --rate); returns its
/// exit code and experiment id.
pub(crate) fn run_one(
    args: &Args,
    mix: &[Workload],
    worker_bin: &Path,
    dir: &Path,
    interrupted: &AtomicBool,
    rate: Option<f64>,
) -> anyhow::Result<(u8, String)> {
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let experiment = experiment_id(args.mode, mix);
    let sync = dir.join("sync");
    fs::create_dir_all(&sync).with_context(|| format!("cannot create {}", sync.display()))?;
    let count = mix.len() as u32;
    if !args.quiet {
        eprintln!(
            "cohort {experiment}: {count} workers ({}), mode {}, into {}",
            mix::label(mix),
            args.mode,
            dir.display()
        );
    }
    let mut mps = if args.mode == Mode::Mps {
        Some(MpsDaemon::start(&dir.join("mps"))?)
    } else {
        None
    };

    let mut workers = Vec::with_capacity(mix.len());
    for (replica, workload) in mix.iter().enumerate() {
        let replica = replica as u32;
        let out = dir.join(format!("worker-{replica}"));
        fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
        let log = File::create(out.join("log"))
            .with_context(|| format!("cannot create {}", out.join("log").display()))?;
        let mut cmd = Command::new(worker_bin);
        cmd.args(["--experiment", &experiment])
            .args(["--replica", &replica.to_string()])
            .args(["--count", &count.to_string()])
            .args(["--workload", workload.as_str()])
            .args(["--mode", args.mode.as_str()])
            .arg("--sync-dir")
            .arg(&sync)
            .arg("--out")
            .arg(&out)
            .args(["--window-s", &args.window_s.to_string()])
            .args(["--warmup-batches", &args.warmup_batches.to_string()])
            .args(["--start-lead-s", &args.start_lead_s.to_string()])
            .args(["--join-timeout-s", &args.join_timeout_s.to_string()])
            .args(["--device", &args.device])
            .args(["--batch-size", &args.batch_size.to_string()])
            .args(["--image-size", &args.image_size.to_string()])
            .args(["--seed", &args.seed.to_string()])
            .env_remove("JOB_COMPLETION_INDEX")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        if args.strict {
            cmd.arg("--strict-device");
        }
        if *workload == Workload::Serve {
            cmd.args(args.serve.worker_args(rate));
        }
        if let Some(dev) = args.visible_devices.get(replica as usize) {
            cmd.env("CUDA_VISIBLE_DEVICES", dev);
        }
        if let Some(daemon) = &mps {
            for (k, v) in daemon.client_env() {
                cmd.env(k, v);
            }
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("cannot start {}", worker_bin.display()))?;
        workers.push(Worker {
            replica,
            child,
            status: None,
        });
    }

    let failed = watch(&mut workers, args, &sync, &experiment, interrupted);
    if let Some(daemon) = mps.as_mut() {
        daemon.stop()?;
    }

    if let Some(first) = failed {
        report_failure(dir, &workers, first);
        return Ok((exit::INCOMPLETE_COHORT, experiment));
    }
    if !args.quiet {
        eprintln!("cohort {experiment}: all {count} workers complete; summarizing");
    }
    Ok((summarize(args, dir, count)?, experiment))
}

/// Waits for every worker. On the first failure (or Ctrl-C), publishes `abort.json` so workers
/// still at the barrier fail cleanly (and write their reports), gives the rest a grace period,
/// then kills what is left. Returns the first failed replica, if any.
fn watch(
    workers: &mut [Worker],
    args: &Args,
    sync: &Path,
    experiment: &str,
    interrupted: &AtomicBool,
) -> Option<u32> {
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
        let stop_reason = if interrupted.load(Ordering::SeqCst) {
            Some((u32::MAX, "the launcher was interrupted".to_owned()))
        } else {
            first_failure.map(|r| {
                let code = workers
                    .iter()
                    .find(|w| w.replica == r)
                    .and_then(|w| w.status)
                    .and_then(|s| s.code())
                    .unwrap_or(-1);
                (
                    r,
                    format!("replica {r} exited with {code} ({})", exit_name(code)),
                )
            })
        };
        if let (Some((by, reason)), None) = (stop_reason, kill_at) {
            publish_abort(sync, experiment, by, &reason);
            // Workers at the barrier see the abort within a second; one inside its window
            // needs at most the window to finish and write.
            let grace = Duration::from_secs_f64(args.window_s + args.start_lead_s + 30.0);
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
    u8::try_from(code).map_or("killed", exit::name)
}

fn publish_abort(sync: &Path, experiment: &str, by_replica: u32, reason: &str) {
    let dir = sync.join(experiment);
    let record = AbortRecord {
        schema_version: SCHEMA_VERSION,
        experiment: experiment.to_owned(),
        kind: "peer_failed".to_owned(),
        reason: reason.to_owned(),
        by_replica,
        published_unix_ns: time::OffsetDateTime::now_utc().unix_timestamp_nanos() as u64,
    };
    // Exclusive create: the first abort wins, and an existing start is left alone (workers
    // already past the barrier are timing and will finish on their own).
    if dir.join("start.json").exists() {
        return;
    }
    if let Ok(mut f) = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(dir.join("abort.json"))
    {
        let _ = serde_json::to_writer_pretty(&mut f, &record);
        let _ = f.write_all(b"\n");
        let _ = f.sync_all();
    }
}

fn report_failure(dir: &Path, workers: &[Worker], first: u32) {
    eprintln!(
        "error: the cohort failed (replica {first} first); it is incomplete and was not summarized"
    );
    for w in workers {
        let code = w.status.and_then(|s| s.code());
        let report = read_worker_report(
            &dir.join(format!("worker-{}", w.replica))
                .join(files::WORKER_REPORT),
        );
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
            dir.join(format!("worker-{}", w.replica))
                .join("log")
                .display()
        );
    }
}

fn summarize(args: &Args, dir: &Path, count: u32) -> anyhow::Result<u8> {
    let dirs: Vec<PathBuf> = (0..count)
        .map(|i| dir.join(format!("worker-{i}")))
        .collect();
    let options = coload_analysis::Options {
        strict: args.strict,
        slo_ms: args.serve.slo_ms,
        slo_quantile: args.serve.slo_quantile,
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
