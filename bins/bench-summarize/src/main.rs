//! bench-summarize: summarize and compare downloaded coload cohorts (no GPU, no libtorch).

#![expect(
    clippy::print_stderr,
    reason = "a command-line tool: errors and warnings go to stderr"
)]

use std::process::ExitCode;

use coload_analysis::AnalysisError;
use coload_cohort_schema::exit;

mod cli;

fn main() -> ExitCode {
    match cli::run() {
        Ok(code) => code,
        Err(err) => {
            // The error may quote a recorded file: shown escaped, never acted on by the terminal.
            eprintln!(
                "error: {}",
                coload_cohort_schema::text::escaped_lines(&format!("{err:#}"))
            );
            let code = err
                .downcast_ref::<AnalysisError>()
                .map_or(exit::INTERNAL, AnalysisError::exit_code);
            ExitCode::from(code)
        }
    }
}
