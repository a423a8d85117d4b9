//! bench-cohort: run a whole cohort of bench-worker processes on this machine, then summarize.

#![expect(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a command-line tool: the summary goes to stdout, progress and errors to stderr"
)]

mod capacity;
mod cli;
mod cohort;
mod error;
mod mix;
mod mps;
mod serve;
mod share;

use std::process::ExitCode;

fn main() -> ExitCode {
    // Parses like `Args::parse()`, and answers the hidden `--generate` (man page, completions).
    let args: cli::Args = match coload_cohort_schema::generate::parse(std::convert::identity) {
        Ok(args) => args,
        Err(generated) => return generated.finish(),
    };
    match cohort::run(&args) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("error: {}", error::chain(&err));
            ExitCode::from(err.exit_code())
        }
    }
}
