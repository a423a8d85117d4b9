//! bench-worker: one coload worker (one per Pod). See `bench-worker --help`. The worker is
//! `coload-worker`; this is its glue.

mod version;

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;

use coload_worker::{Console, WorkerArgs};

/// Progress to standard error.
struct Stderr;

impl Console for Stderr {
    fn write(&self, text: &str) {
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(text.as_bytes());
        let _ = err.flush();
    }

    fn is_terminal(&self) -> bool {
        std::io::stderr().is_terminal()
    }
}

fn main() -> ExitCode {
    // Parses like `WorkerArgs::parse()`, with the build's version facts and the hidden
    // `--generate`.
    let args: WorkerArgs = match coload_spec::generate::parse(version::apply) {
        Ok(args) => args,
        Err(generated) => return generated.finish(),
    };
    ExitCode::from(coload_worker::run(&args, version::SHORT, Arc::new(Stderr)))
}
