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
mod study;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // Parses like `Cli::parse()`, and answers the hidden `--generate` (man page, completions).
    let cli: cli::Cli = match coload_cohort_schema::generate::parse(std::convert::identity) {
        Ok(cli) => cli,
        Err(generated) => return generated.finish(),
    };
    let result = match cli.command {
        Some(cli::Command::Study(args)) => return study::main(&args),
        Some(cli::Command::Run(args)) => cohort::run(&args),
        // The bare form. clap's `Option` flatten does not always say whether the run flags were
        // given (it tracks only some of them), so they are parsed again on their own: the same
        // flags, the same errors as before subcommands existed.
        None => cohort::run(&cli.run.unwrap_or_else(cli::Args::parse)),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("error: {}", error::chain(&err));
            ExitCode::from(err.exit_code())
        }
    }
}
