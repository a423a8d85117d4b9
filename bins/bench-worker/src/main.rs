//! bench-worker: one coload worker (one per Pod). See `bench-worker --help`.

#![expect(
    clippy::print_stderr,
    reason = "a command-line tool: errors go to stderr"
)]

mod cli;
mod error;
mod hog;
mod load;
mod progress;
mod serve_args;
mod share;
mod termination;
mod worker;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = cli::Args::parse();
    if let Err(message) = args.validate() {
        eprintln!("error: {message}");
        return ExitCode::from(coload_cohort_schema::exit::INVALID_INPUT);
    }
    let serve = match serve_args::plan(&args) {
        Ok(plan) => plan,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(coload_cohort_schema::exit::INVALID_INPUT);
        }
    };
    ExitCode::from(worker::execute(&args, serve))
}
