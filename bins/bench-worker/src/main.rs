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
mod version;
mod worker;

use std::process::ExitCode;

fn main() -> ExitCode {
    // Parses like `Args::parse()`, with the build's version facts and the hidden `--generate`.
    let args: cli::Args = match coload_spec::generate::parse(version::apply) {
        Ok(args) => args,
        Err(generated) => return generated.finish(),
    };
    if let Err(message) = args.validate() {
        eprintln!("error: {message}");
        return ExitCode::from(coload_cohort_schema::exit::INVALID_INPUT);
    }
    let serve = match serve_args::open_loop(&args) {
        Ok(plan) => plan,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(coload_cohort_schema::exit::INVALID_INPUT);
        }
    };
    ExitCode::from(worker::execute(&args, serve))
}
