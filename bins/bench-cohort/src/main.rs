//! bench-cohort: run a whole cohort of bench-worker processes on this machine, then summarize.

#![expect(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a command-line tool: the summary goes to stdout, progress and errors to stderr"
)]

mod cli;
mod cohort;
mod error;
mod mix;
mod mps;
mod study;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let result = match cli.command {
        Some(cli::Command::Study(args)) => return study::main(&args),
        Some(cli::Command::Run(args)) => cohort::run(&args),
        None => match cli.run {
            Some(args) => cohort::run(&args),
            None => Err(error::LauncherError::Usage(
                "say what to run: a cohort (--workers infer=1,train=6 --mode timeslice --out DIR) \
                 or a study (study quick --out DIR); see --help"
                    .to_owned(),
            )),
        },
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("error: {}", error::chain(&err));
            ExitCode::from(err.exit_code())
        }
    }
}
