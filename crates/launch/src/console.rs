//! Where a launcher or a study says what it does.

/// The two streams a launcher writes: progress for people (standard error, one line at a
/// time) and its result (the summary table, standard output). A library never prints; the
/// binary passes [`StdConsole`], an embedding tool its own logger.
pub trait Console: Sync {
    /// One line of progress, a warning or an error (no trailing newline).
    fn progress(&self, line: &str);
    /// Result text, written as given (it carries its own newlines).
    fn output(&self, text: &str);
}

use coload_cohort_schema::text::escaped_lines;

/// Progress to standard error, results to standard output (control characters escaped).
#[derive(Debug, Clone, Copy, Default)]
pub struct StdConsole;

#[expect(
    clippy::print_stderr,
    reason = "the console a command-line tool hands the library: its one place that prints"
)]
impl Console for StdConsole {
    fn progress(&self, line: &str) {
        // A line may quote a recorded file (a failure's message, an experiment id): shown
        // escaped, never acted on by the terminal.
        eprintln!("{}", escaped_lines(line));
    }

    fn output(&self, text: &str) {
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        // A closed pipe (`| head`) is not an error of the cohort.
        let _ = out.write_all(escaped_lines(text).as_bytes());
        let _ = out.flush();
    }
}

/// Drops everything (tests, and tools that read the files instead).
#[derive(Debug, Clone, Copy, Default)]
pub struct QuietConsole;

impl Console for QuietConsole {
    fn progress(&self, _line: &str) {}
    fn output(&self, _text: &str) {}
}
