//! bench-cohort: run a whole cohort of bench-worker processes on this machine, then summarize;
//! or a whole study; or render a cohort for a cluster. The work is `coload-launch`,
//! `coload-study` and `coload-cluster`; this is their glue.

mod cli;

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::Parser;
use coload_cohort_schema::exit;
use coload_launch::{Console as _, StdConsole};
use coload_spec::error_chain;

/// The errors of both commands, mapped to exit codes in one place.
#[derive(Debug, thiserror::Error)]
enum Error {
    #[error(transparent)]
    Launch(#[from] coload_launch::LauncherError),
    #[error(transparent)]
    Study(#[from] coload_study::StudyError),
    #[error(transparent)]
    Cluster(#[from] coload_cluster::ClusterError),
    #[error("cannot install the Ctrl-C handler")]
    Signals(#[from] ctrlc::Error),
}

impl Error {
    fn exit_code(&self) -> u8 {
        match self {
            Error::Launch(e) => e.exit_code(),
            Error::Study(e) => e.exit_code(),
            Error::Cluster(e) => e.exit_code(),
            Error::Signals(_) => exit::INTERNAL,
        }
    }
}

fn main() -> ExitCode {
    // Parses like `Cli::parse()`, and answers the hidden `--generate` (man page, completions).
    let cli: cli::Cli = match coload_spec::generate::parse(std::convert::identity) {
        Ok(cli) => cli,
        Err(generated) => return generated.finish(),
    };
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            StdConsole.progress(&format!("error: {}", error_chain(&err)));
            ExitCode::from(err.exit_code())
        }
    }
}

fn run(cli: cli::Cli) -> Result<u8, Error> {
    let interrupted = Arc::new(AtomicBool::new(false));
    // A render or a dry run starts nothing that must be stopped in order: SIGTERM and SIGINT
    // keep their default there and end it at once (a handler that only sets a flag let a
    // render hash /dev/zero for minutes). Whatever starts workers stops them in order instead.
    let starts_workers = match &cli.command {
        Some(cli::Command::Render(_)) => false,
        Some(cli::Command::Study(s)) => !s.study.dry_run && s.study.emit.is_none(),
        _ => true,
    };
    if starts_workers {
        let flag = Arc::clone(&interrupted);
        ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst))?;
    }
    Ok(match cli.command {
        Some(cli::Command::Study(s)) => match s.cluster.backend {
            coload_cluster::Backend::Local => {
                s.cluster.check_local()?;
                coload_study::run(&s.study, &StdConsole, &interrupted)?
            }
            _ => coload_cluster::run_study(&s.study, &s.cluster, &StdConsole, &interrupted)?,
        },
        Some(cli::Command::Render(args)) => coload_cluster::render(&args, &StdConsole)?,
        Some(cli::Command::Run(run)) => coload_launch::run(&run.launch, &StdConsole, &interrupted)?,
        // The bare form. clap's `Option` flatten does not always say whether the run flags were
        // given (it tracks only some of them), so they are parsed again on their own: the same
        // flags, the same errors as before subcommands existed.
        None => {
            let launch = match cli.run {
                Some(l) => l,
                None => cli::Run::parse().launch,
            };
            coload_launch::run(&launch, &StdConsole, &interrupted)?
        }
    })
}
