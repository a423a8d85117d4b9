//! A study's `index.json`: every cohort of the plan with its outcome, rewritten after each
//! cohort so that a study stopped at any point says how far it got.

use serde::{Deserialize, Serialize};

/// Version of the `index.json` document.
pub const INDEX_VERSION: u32 = 1;

/// `index.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Index {
    /// Always [`INDEX_VERSION`].
    pub schema_version: u32,
    /// The plan's name.
    pub plan: String,
    /// Where the plan came from (a built-in name or a path); its text is `plan.toml` beside.
    pub plan_source: String,
    /// The node, in words (GPUs, MPS).
    pub node: String,
    /// GPU indices used as lanes (empty on a CPU node).
    pub lanes: Vec<u32>,
    /// Every cohort of the plan, in the order the study runs them.
    pub cohorts: Vec<Entry>,
    /// Every run of the study so far, oldest first: a study stopped by `--time-budget-s` or
    /// interrupted and resumed takes several. Their wall times add up to the study's. Absent
    /// from indexes written before runs were recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<Run>,
}

/// One run of a study: one `bench-cohort study` process, from its start to its last index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// When it started, nanoseconds since the Unix epoch.
    pub started_unix_ns: u64,
    /// Its wall time so far, seconds (the index is rewritten after every cohort).
    pub wall_s: f64,
    /// Its `--time-budget-s`, where one was given.
    pub time_budget_s: Option<f64>,
    /// Cohorts it started (a capacity search counts once).
    pub cohorts_run: u32,
    /// The build that ran it: `0.1.0 (git 94b322903b28)`.
    pub coload: String,
}

impl Index {
    /// The run each cohort with a summary ran in, by experiment id (cohorts of indexes written
    /// before runs were numbered have none): what a comparison's baseline blocks are keyed by,
    /// with the card.
    #[must_use]
    pub fn run_of_experiments(&self) -> std::collections::BTreeMap<String, u32> {
        self.cohorts
            .iter()
            .filter_map(|e| Some((e.experiment.clone()?, e.run?)))
            .collect()
    }

    /// The study's wall time: every run's, added.
    #[must_use]
    pub fn wall_s(&self) -> f64 {
        self.runs.iter().map(|r| r.wall_s).sum()
    }
}

/// A cohort's folder name without its repeat (`timeslice-train2` of `timeslice-train2-r3`):
/// the shape its repeats share, as the study names them.
#[must_use]
pub fn shape_of(name: &str, repeat: u32) -> &str {
    name.strip_suffix(&format!("-r{repeat}")).unwrap_or(name)
}

/// One cohort of the plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Folder name under `cohorts/`.
    pub name: String,
    /// The policy's name.
    pub policy: String,
    /// Its sharing mode.
    pub mode: String,
    /// The mix, as `--workers` takes it.
    pub workers: String,
    /// 1-based repeat of its shape.
    pub repeat: u32,
    /// A solo baseline of the comparison.
    pub baseline: bool,
    /// What became of it.
    pub outcome: Outcome,
    /// Why (for every outcome but `complete` and `already_complete`).
    pub reason: Option<String>,
    /// bench-cohort's exit code, where it ran.
    pub exit_code: Option<i32>,
    /// GPUs it ran on (`0`, `0,1`, `cpu`), where it ran.
    pub lanes: Option<String>,
    /// Wall time of its bench-cohort process, seconds, where it ran: in this run, or in the
    /// earlier run that completed it (kept across runs since runs were recorded).
    pub duration_s: Option<f64>,
    /// Seconds of that wall time inside measurement windows: the window, times the cohorts it
    /// ran (a capacity search runs one per probe). Where it completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_windows_s: Option<f64>,
    /// Its experiment id, where it completed.
    pub experiment: Option<String>,
    /// The run of the study that ran it (1-based: its place in [`Index::runs`]), where it ran
    /// in a run that numbered its cohorts; kept when a later run finds it complete. A ratio
    /// divides by the baselines of its own block: the same card in the same run. Absent from
    /// indexes written before runs were numbered (each card then counts as one run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<u32>,
    /// Folders of its failed runs (`cohorts/<name>.failed-<k>`), relative to the study.
    pub failed_dirs: Vec<String>,
    /// A capacity cohort's answer in words, where its search ended (`capacity 848.5 requests/s
    /// at p99 <= 25 ms (stop: probes_exhausted, 4 probes)`); its folder's `capacity.json` has
    /// the figures. Absent for other cohorts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<String>,
    /// A hog cohort's memory-isolation answer in words, where the others running out of memory
    /// beside the hog was the measurement (`not contained: the hog held 139.25 GiB; 6 of the 6
    /// other workers failed with out_of_memory ...`): the cohort is complete though it has no
    /// `summary.json`; its folder's `isolation.json` has the figures. Absent for other cohorts,
    /// and for a hog cohort that completed with a summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<String>,
}

/// What became of a cohort.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
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
    /// Not needed: the shape's earlier repeats already settled its ratio against solo (the
    /// plan's `precision`); the reason says how.
    Settled,
}

impl Outcome {
    /// The name used in `index.json` and the table.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Complete => "complete",
            Outcome::AlreadyComplete => "already_complete",
            Outcome::Failed => "failed",
            Outcome::FailedEarlier => "failed_earlier",
            Outcome::NotOffered => "not_offered",
            Outcome::NotRun => "not_run",
            Outcome::Interrupted => "interrupted",
            Outcome::Settled => "settled",
        }
    }

    /// Whether the cohort has a valid summary.
    #[must_use]
    pub fn has_summary(self) -> bool {
        matches!(self, Outcome::Complete | Outcome::AlreadyComplete)
    }
}
