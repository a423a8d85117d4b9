//! `index.json`: every cohort of the plan with its outcome, rewritten after each cohort so
//! that a study stopped at any point says how far it got; and the same as a table for people.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// Version of the `index.json` document.
pub(crate) const INDEX_VERSION: u32 = 1;

/// `index.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Index {
    /// Always [`INDEX_VERSION`].
    pub(crate) schema_version: u32,
    /// The plan's name.
    pub(crate) plan: String,
    /// Where the plan came from (a built-in name or a path); its text is `plan.toml` beside.
    pub(crate) plan_source: String,
    /// The node, in words (GPUs, MPS).
    pub(crate) node: String,
    /// GPU indices used as lanes (empty on a CPU node).
    pub(crate) lanes: Vec<u32>,
    /// Every cohort of the plan, in the order the study runs them.
    pub(crate) cohorts: Vec<Entry>,
}

/// One cohort of the plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Entry {
    /// Folder name under `cohorts/`.
    pub(crate) name: String,
    /// The policy's name.
    pub(crate) policy: String,
    /// Its sharing mode.
    pub(crate) mode: String,
    /// The mix, as `--workers` takes it.
    pub(crate) workers: String,
    /// 1-based repeat of its shape.
    pub(crate) repeat: u32,
    /// A solo baseline of the comparison.
    pub(crate) baseline: bool,
    /// What became of it.
    pub(crate) outcome: Outcome,
    /// Why (for every outcome but `complete` and `already_complete`).
    pub(crate) reason: Option<String>,
    /// bench-cohort's exit code, where it ran.
    pub(crate) exit_code: Option<i32>,
    /// GPUs it ran on (`0`, `0,1`, `cpu`), where it ran.
    pub(crate) lanes: Option<String>,
    /// Wall time of its bench-cohort process, seconds, where it ran in this run.
    pub(crate) duration_s: Option<f64>,
    /// Its experiment id, where it completed.
    pub(crate) experiment: Option<String>,
    /// Folders of its failed runs (`cohorts/<name>.failed-<k>`), relative to the study.
    pub(crate) failed_dirs: Vec<String>,
    /// A capacity cohort's answer in words, where its search ended (`capacity 848.5 requests/s
    /// at p99 <= 25 ms (stop: probes_exhausted, 4 probes)`); its folder's `capacity.json` has
    /// the figures. Absent for other cohorts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) capacity: Option<String>,
}

/// What became of a cohort.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Outcome {
    /// Ran in this run and was summarized.
    Complete,
    /// A valid summary from an earlier run: skipped.
    AlreadyComplete,
    /// Ran in this run and failed; set aside as `<name>.failed-<k>`.
    Failed,
    /// Failed in an earlier run; not run again (`--retry-failed` would).
    FailedEarlier,
    /// The node does not offer what it needs (GPUs, MPS, MIG).
    NotOffered,
    /// Not started: interrupted, or out of time budget. The next run starts it.
    NotRun,
    /// Started and interrupted; set aside as `<name>.interrupted-<k>`, run again next time.
    Interrupted,
}

impl Outcome {
    /// The name used in `index.json` and the table.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Outcome::Complete => "complete",
            Outcome::AlreadyComplete => "already_complete",
            Outcome::Failed => "failed",
            Outcome::FailedEarlier => "failed_earlier",
            Outcome::NotOffered => "not_offered",
            Outcome::NotRun => "not_run",
            Outcome::Interrupted => "interrupted",
        }
    }

    /// Whether the cohort has a valid summary.
    pub(crate) fn has_summary(self) -> bool {
        matches!(self, Outcome::Complete | Outcome::AlreadyComplete)
    }
}

impl Index {
    /// The table printed at the end of a study: one row per cohort, aligned.
    pub(crate) fn table(&self) -> String {
        let header = ["cohort", "workers", "lanes", "outcome", "seconds", "note"];
        let rows: Vec<[String; 6]> = self
            .cohorts
            .iter()
            .map(|e| {
                let note = match (&e.reason, e.failed_dirs.last()) {
                    (Some(r), Some(d)) => format!("{r} [kept: {d}]"),
                    (Some(r), None) => r.clone(),
                    (None, _) => e
                        .experiment
                        .clone()
                        .or_else(|| e.capacity.clone())
                        .unwrap_or_default(),
                };
                [
                    e.name.clone(),
                    e.workers.clone(),
                    e.lanes.clone().unwrap_or_else(|| "-".to_owned()),
                    e.outcome.as_str().to_owned(),
                    e.duration_s
                        .map_or_else(|| "-".to_owned(), |s| format!("{s:.0}")),
                    note,
                ]
            })
            .collect();
        let mut widths = header.map(str::len);
        for r in &rows {
            for (w, c) in widths.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let mut s = String::new();
            for (i, (c, w)) in cells.iter().zip(widths).enumerate() {
                if i + 1 == cells.len() {
                    s.push_str(c);
                } else if i == 4 {
                    let _ = write!(s, "{c:>w$}  ");
                } else {
                    let _ = write!(s, "{c:<w$}  ");
                }
            }
            s.trim_end().to_owned()
        };
        let mut out = line(&header.map(str::to_owned));
        out.push('\n');
        for r in &rows {
            out.push_str(&line(r));
            out.push('\n');
        }
        let count = |o: Outcome| self.cohorts.iter().filter(|e| e.outcome == o).count();
        let _ = writeln!(
            out,
            "{} cohorts: {} complete ({} from earlier runs), {} failed ({} earlier), {} not \
             offered, {} not run, {} interrupted",
            self.cohorts.len(),
            count(Outcome::Complete) + count(Outcome::AlreadyComplete),
            count(Outcome::AlreadyComplete),
            count(Outcome::Failed) + count(Outcome::FailedEarlier),
            count(Outcome::FailedEarlier),
            count(Outcome::NotOffered),
            count(Outcome::NotRun),
            count(Outcome::Interrupted),
        );
        out
    }
}
