//! bench-cohort: run a whole cohort of bench-worker processes on this machine, then summarize.

mod capacity;
mod cli;
mod cohort;
mod mix;
mod mps;
mod serve;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = cli::Args::parse();
    match cohort::run(&args) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(coload_cohort_schema::exit::INVALID_INPUT)
        }
    }
}
