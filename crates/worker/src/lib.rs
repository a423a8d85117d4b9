//! One coload worker's life, as a library: typed arguments ([`WorkerArgs`]), the preflight of
//! the shared folder, building and warming up the load, the barrier, the timed window and the
//! artifacts (`worker.json`, `batches.jsonl`, and the rest of `coload_cohort_schema::files`).
//!
//! [`run`] is what `bench-worker` does; the binary is its parse, its version line and its exit
//! code. Another tool can run a worker in-process the same way, with its own [`Console`] for
//! the progress lines (a library never prints).
//!
//! # Example
//!
//! ```no_run
//! use std::sync::Arc;
//! use clap::Parser;
//! use coload_worker::{QuietConsole, WorkerArgs, run};
//!
//! let args = WorkerArgs::parse_from([
//!     "bench-worker", "--experiment", "e1", "--replica", "0", "--count", "1",
//!     "--workload", "infer", "--mode", "exclusive", "--device", "cpu",
//!     "--sync-dir", "sync", "--out", "runs/w0",
//! ]);
//! let exit_code: u8 = run(&args, "my-tool 1.0", Arc::new(QuietConsole));
//! ```

mod args;
mod error;
mod hog;
mod load;
mod progress;
mod serve_args;
mod share;
mod termination;
mod worker;

use std::sync::Arc;

pub use args::{LogFormat, WorkerArgs};
pub use error::ArgsError;
pub use progress::{Console, QuietConsole};

/// Checks the arguments, then runs the worker to its end; returns the process exit code
/// (`coload_cohort_schema::exit`). `build` is recorded in `worker.json` as the coload build
/// that ran.
pub fn run(args: &WorkerArgs, build: &str, console: Arc<dyn Console>) -> u8 {
    let progress =
        progress::Progress::new(args.log_format, args.quiet, args.place.replica, console);
    let serve = match args.validate().and_then(|()| serve_args::open_loop(args)) {
        Ok(plan) => plan,
        Err(e) => {
            progress.raw(&format!("error: {}", error::chain(&e)));
            return e.exit_code();
        }
    };
    worker::execute(args, serve, build, &progress)
}
