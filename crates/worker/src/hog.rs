//! The hog worker's own steps: take the memory before anything else, and say so in
//! `hold.json` so that a launcher can start the other workers only once the hog holds it.

use coload_cohort_schema::{HoldMarker, SCHEMA_VERSION, files, write_json_atomic};
use coload_timing::Clock;
use coload_workload::{Hog, HogOptions, WorkloadError};

use crate::args::WorkerArgs;
use crate::error::WorkerError;

/// Takes the memory `--hog-bytes` asks for (or all CUDA grants) on the worker's device.
pub(crate) fn allocate(args: &WorkerArgs, clock: &Clock) -> Result<Hog, WorkloadError> {
    let target = args
        .flags
        .hog_bytes
        .map(coload_cohort_schema::ByteSize::bytes);
    Hog::allocate(&HogOptions::new(args.flags.device, target), || {
        clock.now_unix_ns()
    })
}

/// Writes `hold.json` into `--out` (atomically): the hog holds its memory now.
pub(crate) fn publish_hold(args: &WorkerArgs, hog: &Hog) -> Result<(), WorkerError> {
    let marker = HoldMarker {
        schema_version: SCHEMA_VERSION,
        experiment: args.place.experiment.clone(),
        replica: args.place.replica,
        hog: hog.report().clone(),
    };
    write_json_atomic(&args.place.out.join(files::HOLD), &marker)
        .map_err(|e| WorkerError::Output(format!("cannot publish the hog's hold.json: {e}")))
}

/// The hog's state in words, for the log.
pub(crate) fn describe(hog: &Hog) -> String {
    let r = hog.report();
    let gib = |b: u64| b as f64 / f64::from(1u32 << 30);
    let target = r.target_bytes.map_or_else(
        || "all CUDA grants".to_owned(),
        |t| format!("{:.2} GiB", gib(t)),
    );
    let why = match (&r.stopped_by, &r.refusal) {
        (coload_cohort_schema::HogStop::TargetReached, _) => "reached its target".to_owned(),
        (coload_cohort_schema::HogStop::Refused, Some(m)) => format!("CUDA refused more: {m}"),
        (coload_cohort_schema::HogStop::Refused, None) => "CUDA refused more".to_owned(),
    };
    format!(
        "holding {:.2} GiB in {} allocations (asked for {target}; {why})",
        gib(r.granted_bytes),
        r.allocations
    )
}
