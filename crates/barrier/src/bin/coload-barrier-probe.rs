//! coload-barrier-probe: one barrier participant without a workload.
//!
//! Runs preflight -> publish ready -> await start -> sleep until the start, prints one JSON line
//! with the outcome and exits with the barrier's exit code. The integration tests spawn it as
//! real processes; it also checks a shared volume by hand before a real cohort:
//!
//! ```sh
//! coload-barrier-probe --sync-dir /mnt/benchmark-sync --experiment probe-$(date +%s) \
//!     --replica 0 --count 1
//! ```

#![expect(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a probe prints its outcome line and errors"
)]

use std::process::ExitCode;
use std::time::Duration;

use coload_barrier::{Barrier, BarrierError, BarrierOptions};
use coload_cohort_schema::{Mode, StartRecord, WorkerConfig, Workload, exit};
use coload_timing::{Clock, sleep_until};
use serde_json::json;

const USAGE: &str = "usage: coload-barrier-probe --sync-dir DIR --experiment ID --replica N --count N \
[--join-timeout-ms MS] [--lead-ms MS] [--margin-ms MS] [--batch-size N] [--pause-before-await-ms MS]";

const FLAGS: [&str; 9] = [
    "--sync-dir",
    "--experiment",
    "--replica",
    "--count",
    "--join-timeout-ms",
    "--lead-ms",
    "--margin-ms",
    "--batch-size",
    "--pause-before-await-ms",
];

/// The command line.
struct Args {
    options: BarrierOptions,
    batch_size: u32,
    pause_before_await: Duration,
}

fn parse_args() -> Result<Args, String> {
    let mut sync_dir = None;
    let mut experiment = None;
    let mut replica = None;
    let mut count = None;
    let mut join_ms = None;
    let mut lead_ms = None;
    let mut margin_ms = None;
    let mut batch_size = 32;
    let mut pause_ms = 0;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if !FLAGS.contains(&flag.as_str()) {
            return Err(format!("unknown flag {flag}; {USAGE}"));
        }
        let value = args
            .next()
            .ok_or_else(|| format!("{flag} needs a value; {USAGE}"))?;
        let number = |v: &str| {
            v.parse::<u64>()
                .map_err(|_| format!("{flag} {v:?} is not a non-negative integer"))
        };
        match flag.as_str() {
            "--sync-dir" => sync_dir = Some(value),
            "--experiment" => experiment = Some(value),
            "--replica" => replica = Some(number(&value)?),
            "--count" => count = Some(number(&value)?),
            "--join-timeout-ms" => join_ms = Some(number(&value)?),
            "--lead-ms" => lead_ms = Some(number(&value)?),
            "--margin-ms" => margin_ms = Some(number(&value)?),
            "--batch-size" => batch_size = number(&value)?,
            "--pause-before-await-ms" => pause_ms = number(&value)?,
            _ => return Err(format!("unknown flag {flag}; {USAGE}")),
        }
    }
    let need =
        |v: Option<String>, name: &str| v.ok_or_else(|| format!("{name} is required; {USAGE}"));
    let small =
        |v: u64, name: &str| u32::try_from(v).map_err(|_| format!("{name} {v} is too large"));
    let mut options = BarrierOptions::new(
        need(sync_dir, "--sync-dir")?,
        need(experiment, "--experiment")?,
        small(replica.ok_or("--replica is required")?, "--replica")?,
        small(count.ok_or("--count is required")?, "--count")?,
    );
    if let Some(ms) = join_ms {
        options.join_timeout = Duration::from_millis(ms);
    }
    if let Some(ms) = lead_ms {
        options.start_lead = Duration::from_millis(ms);
    }
    if let Some(ms) = margin_ms {
        options.late_margin = Duration::from_millis(ms);
    }
    Ok(Args {
        options,
        batch_size: small(batch_size, "--batch-size")?,
        pause_before_await: Duration::from_millis(pause_ms),
    })
}

/// What happened, for the JSON line.
#[derive(Default)]
struct Trace {
    incarnation: Option<String>,
    clock_offset_ns: Option<i64>,
    ready_unix_ns: Option<u64>,
    returned_unix_ns: Option<u64>,
    woke_unix_ns: Option<u64>,
    start: Option<StartRecord>,
}

fn run(args: &Args, clock: &Clock, trace: &mut Trace) -> Result<(), BarrierError> {
    let (mut barrier, preflight) = Barrier::preflight(args.options.clone(), clock)?;
    trace.incarnation = Some(barrier.incarnation().to_owned());
    trace.clock_offset_ns = Some(preflight.clock_offset_ns);
    let config = WorkerConfig {
        batch_size: args.batch_size,
        warmup_batches: 0,
        window_s: 1.0,
        start_lead_s: args.options.start_lead.as_secs_f64(),
        ..WorkerConfig::article(Mode::Timeslice, Workload::Train, args.options.count)
    };
    let record = barrier.ready_record(config, clock);
    trace.ready_unix_ns = Some(record.ready_unix_ns);
    barrier.publish_ready(&record, clock)?;
    std::thread::sleep(args.pause_before_await);
    let start = barrier.await_start(clock)?;
    trace.returned_unix_ns = Some(clock.now_unix_ns());
    sleep_until(clock.to_instant(start.start_unix_ns));
    trace.woke_unix_ns = Some(clock.now_unix_ns());
    trace.start = Some(start);
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(exit::INVALID_INPUT);
        }
    };
    let clock = Clock::anchor();
    let mut trace = Trace::default();
    let outcome = run(&args, &clock, &mut trace);
    let (status, code, kind, message) = match &outcome {
        Ok(()) => ("started", exit::COMPLETE, None, None),
        Err(e) => ("failed", e.exit_code(), Some(e.kind()), Some(e.to_string())),
    };
    let line = json!({
        "replica": args.options.replica,
        "status": status,
        "exit_code": code,
        "kind": kind,
        "message": message,
        "incarnation": trace.incarnation,
        "clock_offset_ns": trace.clock_offset_ns,
        "ready_unix_ns": trace.ready_unix_ns,
        "start_unix_ns": trace.start.as_ref().map(|s| s.start_unix_ns),
        "published_unix_ns": trace.start.as_ref().map(|s| s.published_unix_ns),
        "returned_unix_ns": trace.returned_unix_ns,
        "woke_unix_ns": trace.woke_unix_ns,
    });
    println!("{line}");
    if let Some(message) = message {
        eprintln!("error: {message}");
    }
    ExitCode::from(code)
}
