//! Man pages and shell completions for coload's binaries, generated from their clap definitions.
//!
//! Users of Rust command-line tools expect `man bench-worker` and tab completion. Rather than
//! keep hand-written pages that drift from the flags, each binary answers a hidden
//! `--generate <KIND>` by printing one artifact, built from the same clap command that parses its
//! arguments, on stdout (ripgrep's `--generate` is the precedent). `just completions` and
//! `scripts/dist.sh` call it for the three binaries; the dist tarball ships the results.
//!
//! The flag is hidden: it is answered before clap sees the command line, appears in no help,
//! and must be the only argument (`bench-worker --generate man`). [`parse`] is the entry point
//! a binary's `main` calls instead of `Parser::parse`.
//!
//! # Example
//!
//! ```
//! use clap::{CommandFactory, Parser};
//! use coload_spec::generate::{Artifact, requested, write};
//!
//! /// A tool.
//! #[derive(Parser)]
//! #[command(name = "tool", version)]
//! struct Args {
//!     /// How many.
//!     #[arg(long)]
//!     count: u32,
//! }
//!
//! let argv = ["tool", "--generate", "complete-bash"];
//! let artifact = requested(&argv).expect("asked for").expect("a known kind");
//! assert_eq!(artifact, Artifact::CompleteBash);
//! let mut page = Vec::new();
//! write(artifact, &mut Args::command(), &mut page).unwrap();
//! assert!(String::from_utf8(page).unwrap().contains("--count"));
//! ```

use std::ffi::OsString;
use std::io::{self, Write};
use std::process::ExitCode;

use clap::{Arg, Command, Parser, ValueEnum, value_parser};
use clap_complete::Shell;

/// The hidden flag every coload binary answers.
pub const FLAG: &str = "--generate";

/// What `--generate` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Artifact {
    /// A roff man page (section 1).
    Man,
    /// A bash completion script.
    CompleteBash,
    /// A zsh completion function.
    CompleteZsh,
    /// A fish completion script.
    CompleteFish,
}

/// The artifact `--generate` asks for, if the command line is `BIN --generate KIND` (or
/// `--generate=KIND`); `None` when the first argument is anything else, so that normal parsing
/// goes ahead. An unknown kind or extra arguments are a clap error naming the possible values.
pub fn requested<I, T>(argv: I) -> Option<Result<Artifact, clap::Error>>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let argv: Vec<OsString> = argv.into_iter().map(Into::into).collect();
    let first = argv.get(1)?.to_str()?;
    if first != FLAG && !first.starts_with("--generate=") {
        return None;
    }
    let name = argv
        .first()
        .and_then(|a| a.to_str())
        .unwrap_or("coload")
        .to_owned();
    let command = Command::new("generate")
        .bin_name(name)
        .about("Print a man page or a shell completion script generated from this command's flags")
        .arg(
            Arg::new("generate")
                .long("generate")
                .value_name("KIND")
                .required(true)
                .value_parser(value_parser!(Artifact)),
        );
    Some(command.try_get_matches_from(argv).map(|matches| {
        *matches
            .get_one::<Artifact>("generate")
            .expect("required by the parser")
    }))
}

/// Writes `artifact` for `command` to `out`.
pub fn write(artifact: Artifact, command: &mut Command, out: &mut dyn Write) -> io::Result<()> {
    let shell = match artifact {
        Artifact::Man => return clap_mangen::Man::new(command.clone()).render(out),
        Artifact::CompleteBash => Shell::Bash,
        Artifact::CompleteZsh => Shell::Zsh,
        Artifact::CompleteFish => Shell::Fish,
    };
    // clap_complete panics when its writer fails (a closed pipe): render in memory first.
    let mut script = Vec::new();
    let name = command.get_name().to_owned();
    clap_complete::generate(shell, command, name, &mut script);
    out.write_all(&script)
}

/// What a hidden `--generate` did in place of parsing arguments to run.
#[derive(Debug)]
pub struct Generated {
    artifact: Artifact,
    written: io::Result<()>,
}

impl Generated {
    /// Reports a failed write on stderr and returns the exit code for `main` to end with: 0
    /// when the artifact was written (or the reader closed the pipe, `| head`: its choice, not
    /// an error), 1 otherwise.
    #[must_use]
    #[expect(
        clippy::print_stderr,
        reason = "the one message of the step that runs in place of a binary's own main"
    )]
    pub fn finish(self) -> ExitCode {
        match self.written {
            Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
                eprintln!(
                    "error: writing the generated {:?} to stdout: {e}",
                    self.artifact
                );
                ExitCode::FAILURE
            }
            _ => ExitCode::SUCCESS,
        }
    }
}

/// Parses this process's command line into `P` as `P::parse()` does, after `adjust` has set
/// what the derive cannot (a version string assembled at build time, say). A command line that
/// is `--generate KIND` is answered instead: the artifact goes to stdout and `Err` says how
/// that went ([`Generated::finish`] gives `main` its exit code; an unknown kind exits 2, as clap
/// does for any usage error). Like `P::parse()`, clap ends the process on `--help`, `--version`
/// and usage errors.
pub fn parse<P: Parser>(adjust: impl FnOnce(Command) -> Command) -> Result<P, Generated> {
    let argv: Vec<OsString> = std::env::args_os().collect();
    let mut command = adjust(P::command());
    match requested(&argv) {
        Some(Ok(artifact)) => {
            let mut stdout = io::stdout().lock();
            let written = write(artifact, &mut command, &mut stdout).and_then(|()| stdout.flush());
            return Err(Generated { artifact, written });
        }
        Some(Err(err)) => err.exit(),
        None => {}
    }
    let mut matches = command.clone().get_matches_from(argv);
    Ok(P::from_arg_matches_mut(&mut matches).unwrap_or_else(|err| err.format(&mut command).exit()))
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser, Subcommand};

    use super::{Artifact, requested, write};

    /// Sample tool: says hello.
    #[derive(Debug, Parser)]
    #[command(name = "sample", version)]
    struct Sample {
        /// Whom to greet.
        #[arg(long, value_name = "NAME")]
        greet: String,
        #[command(subcommand)]
        command: Option<Sub>,
    }

    #[derive(Debug, Subcommand)]
    enum Sub {
        /// Compare things.
        Compare,
    }

    fn generated(artifact: Artifact) -> String {
        let mut out = Vec::new();
        write(artifact, &mut Sample::command(), &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn only_a_leading_generate_flag_is_answered() {
        assert_eq!(
            requested(["sample", "--generate", "man"]).unwrap().unwrap(),
            Artifact::Man
        );
        assert_eq!(
            requested(["sample", "--generate=complete-fish"])
                .unwrap()
                .unwrap(),
            Artifact::CompleteFish
        );
        assert!(requested(["sample", "--greet", "x"]).is_none());
        assert!(requested(["sample"]).is_none());
        // A later --generate is an ordinary (unknown) argument for the binary's own parser.
        assert!(requested(["sample", "--greet", "x", "--generate", "man"]).is_none());
    }

    #[test]
    fn unknown_kinds_and_extra_arguments_are_usage_errors() {
        let err = requested(["sample", "--generate", "complete-tcsh"])
            .unwrap()
            .unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::InvalidValue);
        assert!(err.to_string().contains("complete-bash"), "{err}");
        let err = requested(["sample", "--generate", "man", "--greet", "x"])
            .unwrap()
            .unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::UnknownArgument);
    }

    #[test]
    fn man_page_names_the_command_its_flags_and_subcommands() {
        let page = generated(Artifact::Man);
        assert!(page.contains(".TH sample 1"), "{page}");
        assert!(page.contains("Whom to greet"), "{page}");
        assert!(page.contains("compare"), "{page}");
    }

    #[test]
    fn completions_know_the_flags() {
        assert!(generated(Artifact::CompleteBash).contains("--greet"));
        assert!(generated(Artifact::CompleteZsh).contains("#compdef sample"));
        let fish = generated(Artifact::CompleteFish);
        assert!(fish.contains("-l greet -d 'Whom to greet'"), "{fish}");
    }
}
