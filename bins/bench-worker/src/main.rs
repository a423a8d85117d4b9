//! bench-worker (not yet implemented: see the issues).

fn main() -> std::process::ExitCode {
    eprintln!("error: bench-worker is not implemented yet");
    std::process::ExitCode::from(coload_cohort_schema::exit::INTERNAL)
}
