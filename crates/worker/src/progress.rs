//! Progress lines for people (and log collectors), one per phase, through the caller's
//! [`Console`].
//!
//! Nothing here is ever called between the start and the end of the timed window.

use std::sync::Arc;

use crate::args::LogFormat;

/// Where a worker's progress goes. A library never prints: `bench-worker` hands its standard
/// error, an embedding tool its own logger (or [`QuietConsole`]).
pub trait Console: Send + Sync {
    /// Text as given (it carries its own newlines and, on a terminal, its own line clearing).
    fn write(&self, text: &str);
    /// Whether the text reaches a terminal: only then are live counters and line clearing
    /// written.
    fn is_terminal(&self) -> bool {
        false
    }
}

/// Drops everything (tests, and tools that read the artifacts instead).
#[derive(Debug, Clone, Copy, Default)]
pub struct QuietConsole;

impl Console for QuietConsole {
    fn write(&self, _text: &str) {}
}

/// Writes phase lines to the console.
#[derive(Clone)]
pub(crate) struct Progress {
    format: LogFormat,
    quiet: bool,
    replica: u32,
    terminal: bool,
    console: Arc<dyn Console>,
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress")
            .field("format", &self.format)
            .field("quiet", &self.quiet)
            .field("replica", &self.replica)
            .field("terminal", &self.terminal)
            .finish_non_exhaustive()
    }
}

impl Progress {
    pub(crate) fn new(
        format: LogFormat,
        quiet: bool,
        replica: u32,
        console: Arc<dyn Console>,
    ) -> Self {
        Progress {
            format,
            quiet,
            replica,
            terminal: console.is_terminal() && format == LogFormat::Text,
            console,
        }
    }

    /// A line outside the phases (the signal handler's), printed even with `--quiet`.
    pub(crate) fn raw(&self, line: &str) {
        self.console.write(&format!("{line}\n"));
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
        let text = match self.format {
            LogFormat::Text => {
                let clear = if self.terminal { "\r\x1b[2K" } else { "" };
                let tag = if level == "error" { "error: " } else { "" };
                format!(
                    "{clear}[replica {}] {phase}: {tag}{message}\n",
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
                format!("{line}\n")
            }
        };
        self.console.write(&text);
    }

    /// A live counter on the same line, only when stderr is a terminal (never in the window).
    pub(crate) fn live(&self, message: &str) {
        if self.quiet || !self.terminal {
            return;
        }
        self.console
            .write(&format!("\r\x1b[2K[replica {}] {message}", self.replica));
    }
}

fn unix_ns_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}
