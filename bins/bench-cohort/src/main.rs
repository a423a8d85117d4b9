//! bench-cohort: run a whole cohort of bench-worker processes on this machine, then summarize.

mod cli;
mod cohort;
mod mix;
mod mps;

use std::process::ExitCode;

fn main() -> ExitCode {
    // Parses like `Args::parse()`, and answers the hidden `--generate` (man page, completions).
    let args: cli::Args = coload_cohort_schema::generate::parse(std::convert::identity);
    match cohort::run(&args) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(coload_cohort_schema::exit::INVALID_INPUT)
        }
    }
}
