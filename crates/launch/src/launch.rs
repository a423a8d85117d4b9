//! [`run`]: a cohort's repeats, or its capacity search, with the checks before any of them.

use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use coload_cohort_schema::{exit, files};

use crate::args::LaunchArgs;
use crate::cohort::{Cx, INTERRUPTED, create_dir, run_one};
use crate::console::Console;
use crate::error::LauncherError;

/// Runs every repeat of the cohort `args` describes and returns the exit code: complete only if
/// every cohort completed. `interrupted` is the caller's Ctrl-C flag: once set, the workers are
/// stopped through the barrier and no further cohort starts.
pub fn run(
    args: &LaunchArgs,
    console: &dyn Console,
    interrupted: &AtomicBool,
) -> Result<u8, LauncherError> {
    let mix = args.validate()?;
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
    refuse_earlier_results(&args.out)?;
    create_dir(&args.out)?;
    let cx = Cx {
        args,
        console,
        interrupted,
        worker_bin,
        cpu_threads: cpu_threads(args, mix.len()),
    };
    if args.spec.capacity.find_capacity {
        return crate::capacity::run(&cx, &mix);
    }
    let mut code = exit::COMPLETE;
    for k in 1..=args.repeat {
        let dir = if args.repeat == 1 {
            args.out.clone()
        } else {
            args.out.join(format!("rep-{k}"))
        };
        let (result, _) = run_one(&cx, &mix, &dir, None)?;
        if result != exit::COMPLETE && code == exit::COMPLETE {
            code = result;
        }
        if interrupted.load(Ordering::SeqCst) {
            console.progress(&format!(
                "interrupted; stopped after cohort {k} of {}",
                args.repeat
            ));
            return Ok(INTERRUPTED);
        }
    }
    Ok(code)
}

/// Results are never overwritten (bench-worker refuses an existing `worker.json` the same way):
/// an `--out` that already holds a cohort's files is refused, naming the first one found.
fn refuse_earlier_results(out: &Path) -> Result<(), LauncherError> {
    let Ok(entries) = fs::read_dir(out) else {
        return Ok(()); // Absent (created next), or unreadable (creating in it fails next).
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let taken = names.iter().find(|n| {
        [
            files::SUMMARY,
            files::CAPACITY,
            files::COHORT_FAILURE,
            files::ISOLATION,
            "sync",
        ]
        .contains(&n.as_str())
            || n.starts_with("worker-")
            || n.starts_with("rep-")
            || n.starts_with("probe-")
    });
    match taken {
        Some(name) => Err(LauncherError::ResultsExist(out.join(name))),
        None => Ok(()),
    }
}

/// The intra-op threads each worker's libtorch gets on the CPU: the given number, else this
/// host's cores (its affinity mask) shared out among the workers, at least one each. Left to
/// libtorch on a GPU, whose workers mostly wait for the device.
///
/// On the CPU every worker's libtorch would otherwise size its pool to the whole machine, and
/// co-located workers oversubscribe the cores: on a 2-core machine two trainers' warmup batch
/// took 2.84 s against 0.04 s alone, and their windows recorded no batch.
fn cpu_threads(args: &LaunchArgs, workers: usize) -> Option<u32> {
    if args.spec.flags.device != coload_cohort_schema::DeviceChoice::Cpu {
        return args.cpu_threads;
    }
    Some(args.cpu_threads.unwrap_or_else(|| {
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        (cores / workers.max(1)).max(1) as u32
    }))
}
