//! Progress: a bar with the ETA on a terminal (indicatif), plain timestamped lines otherwise
//! (a log file, CI, a device call's output).
//!
//! The bar counts expected seconds rather than cohorts, because a 7-worker cohort takes longer
//! than a solo; its ETA is indicatif's, from the rate so far.

use std::time::Duration;

use coload_launch::Console;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::node::Placement;
use crate::plan::Job;
use crate::schedule::{Events, RunResult};

/// Reports the study's progress: the bar on a terminal's stderr, else lines on the console.
pub(crate) struct Progress<'a> {
    console: &'a dyn Console,
    bar: Option<ProgressBar>,
    total: usize,
    done: usize,
    running: Vec<String>,
    /// Expected seconds per cohort name, to advance the bar by.
    weights: Vec<(String, u64)>,
}

impl<'a> Progress<'a> {
    /// A bar when `bar` (stderr is a terminal and it was not turned off), else plain lines on
    /// `console`. `weights`: each cohort to run with its expected seconds.
    pub(crate) fn new(bar: bool, weights: Vec<(String, u64)>, console: &'a dyn Console) -> Self {
        let total_s: u64 = weights.iter().map(|(_, w)| w).sum();
        let bar = bar.then(|| {
            let b = ProgressBar::with_draw_target(Some(total_s), ProgressDrawTarget::stderr());
            b.set_style(
                ProgressStyle::with_template(
                    "{elapsed_precise} [{bar:30}] {percent:>3}% ETA {eta_precise}  {msg}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            b.enable_steady_tick(Duration::from_millis(500));
            b
        });
        Progress {
            console,
            bar,
            total: weights.len(),
            done: 0,
            running: Vec::new(),
            weights,
        }
    }

    /// A line above the bar (or on stderr).
    pub(crate) fn line(&self, text: &str) {
        match &self.bar {
            Some(b) => b.println(text),
            None => self.console.progress(&format!("{} {text}", clock())),
        }
    }

    /// Removes the bar.
    pub(crate) fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }

    fn message(&self) {
        if let Some(b) = &self.bar {
            b.set_message(format!(
                "{}/{} done; running: {}",
                self.done,
                self.total,
                self.running.join(", ")
            ));
        }
    }
}

impl Events for Progress<'_> {
    fn started(&mut self, job: &Job, placement: &Placement) {
        self.running.push(job.name.clone());
        if self.bar.is_none() {
            self.line(&format!(
                "[{}/{}] start {} on {}",
                self.done + self.running.len(),
                self.total,
                job.name,
                placement.label()
            ));
        }
        self.message();
    }

    fn ended(&mut self, job: &Job, placement: &Placement, result: &RunResult, elapsed: Duration) {
        self.running.retain(|n| n != &job.name);
        self.done += 1;
        let what = match result {
            RunResult::Exited(e) if e.code == Some(0) => "complete".to_owned(),
            RunResult::Exited(e) => match e.code {
                Some(c) => format!(
                    "FAILED (exit {c}, {})",
                    coload_cohort_schema::exit::describe(c)
                ),
                None => "FAILED (killed by a signal)".to_owned(),
            },
            RunResult::StartFailed(e) => format!("FAILED to start: {e}"),
            RunResult::NotRun(why) => format!("not run: {why}"),
            RunResult::Settled(why) => format!("not needed: {why}"),
        };
        self.line(&format!(
            "[{}/{}] {} on {}: {what} in {:.0} s",
            self.done,
            self.total,
            job.name,
            placement.label(),
            elapsed.as_secs_f64()
        ));
        if let Some(b) = &self.bar {
            let w = self
                .weights
                .iter()
                .find(|(n, _)| n == &job.name)
                .map_or(0, |(_, w)| *w);
            b.inc(w);
        }
        self.message();
    }

    fn tick(&mut self) {}
}

/// `HH:MM:SS` UTC, for plain lines.
fn clock() -> String {
    let now = time::OffsetDateTime::now_utc();
    format!("{:02}:{:02}:{:02}", now.hour(), now.minute(), now.second())
}
