//! Progress lines for people (and log collectors) on stderr, one per phase.
//!
//! Nothing here is ever called between the start and the end of the timed window.

use std::io::{IsTerminal, Write};

use crate::cli::LogFormat;

/// Writes phase lines to stderr.
#[derive(Debug)]
pub(crate) struct Progress {
    format: LogFormat,
    quiet: bool,
    replica: u32,
    terminal: bool,
}

impl Progress {
    pub(crate) fn new(format: LogFormat, quiet: bool, replica: u32) -> Self {
        Progress {
            format,
            quiet,
            replica,
            terminal: std::io::stderr().is_terminal() && format == LogFormat::Text,
        }
    }

    /// One line for a phase: `phase` is a stable word (`preflight`, `warmup`, ...).
    pub(crate) fn phase(&self, phase: &str, message: &str) {
        if self.quiet {
            return;
        }
        self.emit("info", phase, message);
    }

    /// An error line; printed even with `--quiet`.
    pub(crate) fn error(&self, phase: &str, message: &str) {
        self.emit("error", phase, message);
    }

    fn emit(&self, level: &str, phase: &str, message: &str) {
        let mut err = std::io::stderr().lock();
        let _ = match self.format {
            LogFormat::Text => {
                let clear = if self.terminal { "\r\x1b[2K" } else { "" };
                let tag = if level == "error" { "error: " } else { "" };
                writeln!(
                    err,
                    "{clear}[replica {}] {phase}: {tag}{message}",
                    self.replica
                )
            }
            LogFormat::Json => {
                let line = serde_json::json!({
                    "t_unix_ns": unix_ns_now(),
                    "level": level,
                    "replica": self.replica,
                    "phase": phase,
                    "message": message,
                });
                writeln!(err, "{line}")
            }
        };
    }

    /// A live counter on the same line, only when stderr is a terminal (never in the window).
    pub(crate) fn live(&self, message: &str) {
        if self.quiet || !self.terminal {
            return;
        }
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K[replica {}] {message}", self.replica);
        let _ = err.flush();
    }
}

fn unix_ns_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}
