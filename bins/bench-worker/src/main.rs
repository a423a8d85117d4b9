//! bench-worker: one coload worker (one per Pod). See `bench-worker --help`.

mod cli;
mod progress;
mod termination;
mod version;
mod worker;

use std::process::ExitCode;

fn main() -> ExitCode {
    // Parses like `Args::parse()`, with the build's version facts and the hidden `--generate`.
    let args: cli::Args = coload_cohort_schema::generate::parse(version::apply);
    if let Err(message) = args.validate() {
        eprintln!("error: {message}");
        return ExitCode::from(coload_cohort_schema::exit::INVALID_INPUT);
    }
    ExitCode::from(worker::execute(&args))
}
