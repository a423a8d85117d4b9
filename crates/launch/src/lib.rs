//! Run one coload cohort on this node, as a library.
//!
//! [`run`] takes a [`LaunchArgs`] (a [`coload_spec::CohortSpec`] and where it runs: the output
//! folder, repeats, the devices per worker, the worker executable) and does what `bench-cohort`
//! does: a fresh experiment id and a private barrier folder per cohort, one `bench-worker`
//! process per replica (hogs first), the private MPS daemon with the declared share when the
//! mode is `mps`, a watch that stops every worker when one fails (no orphans), and the summary.
//! A cohort that fails leaves a typed [`coload_cohort_schema::CohortFailure`] in `failure.json`
//! beside its workers, so that nobody parses a log to learn why. `--find-capacity` runs the
//! capacity search ([`search`]), one cohort per probe.
//!
//! What a launcher says goes through a [`Console`] (progress for people, the summary as the
//! result), and Ctrl-C is the caller's: it passes the flag its handler sets. The binary
//! `bench-cohort` is these calls and nothing else.
//!
//! # Example
//!
//! ```no_run
//! use std::sync::atomic::AtomicBool;
//! use clap::Parser;
//! use coload_launch::{LaunchArgs, StdConsole, run};
//!
//! #[derive(Parser)]
//! struct Cli {
//!     #[command(flatten)]
//!     launch: LaunchArgs,
//! }
//! let cli = Cli::parse_from([
//!     "tool", "--workers", "train=2", "--mode", "timeslice", "--out", "runs/ts2",
//! ]);
//! let code = run(&cli.launch, &StdConsole, &AtomicBool::new(false))?;
//! # Ok::<(), coload_launch::LauncherError>(())
//! ```

mod args;
mod capacity;
mod cohort;
mod console;
mod end;
mod error;
mod launch;
mod mps;
mod parent;
pub mod search;
mod serve;
mod share;

pub use args::LaunchArgs;
pub use cohort::{INTERRUPTED, experiment_id};
pub use console::{Console, QuietConsole, StdConsole};
pub use end::{WorkerEnd, failure_record, summary_options};
pub use error::LauncherError;
pub use launch::run;
pub use mps::{CONTROL as MPS_CONTROL, MpsError};
pub use parent::die_with_parent;
pub use share::ShareError;
