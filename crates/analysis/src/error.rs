//! The typed errors of the analysis, each with the process exit code it maps to.

use std::fmt;
use std::path::PathBuf;

use coload_cohort_schema::{ConfigDifference, FailureKind, Mode, SchemaError, Stage, exit};

use crate::interval::CutSide;

/// Why a cohort could not be summarized or compared.
#[derive(Debug, thiserror::Error)]
pub enum AnalysisError {
    /// Nothing to read.
    #[error("no input: give worker folders, or a folder holding worker-* folders")]
    NoInputs,
    /// A path given on the command line is not usable.
    #[error("{path}: {message}")]
    BadInput {
        /// The path.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// A document or a line of `batches.jsonl` is malformed or of an unknown schema version.
    #[error(transparent)]
    Schema(#[from] SchemaError),
    /// The cohort is incomplete or inconsistent; every problem found is listed.
    #[error("{}", ProblemList(.0))]
    Cohort(Vec<CohortProblem>),
    /// `--strict`: the devices the workers saw do not fit the declared mode.
    #[error("placement does not fit mode {mode}: {explanation} (strict checking)")]
    Placement {
        /// The declared mode.
        mode: Mode,
        /// What was seen instead.
        explanation: String,
    },
    /// Mode `exclusive` declares a GPU per worker, yet workers shared one: every figure would
    /// describe sharing, not the baseline. Refused whether or not checking is strict.
    #[error(
        "mode exclusive declares one GPU per worker, but workers shared a physical GPU ({explanation}); \
         the cohort is no baseline and was not summarized: give each worker its own GPU \
         (bench-cohort --visible-devices 0,1,...)"
    )]
    SharedExclusive {
        /// What the co-location check saw.
        explanation: String,
    },
    /// An isolation result was asked for a cohort without a hog worker.
    #[error(
        "{path}: no hog worker in this cohort; the isolation result needs one (bench-cohort \
         --workers hog=1,train=6)"
    )]
    NoHog {
        /// The cohort given.
        path: PathBuf,
    },
    /// The inputs of a comparison do not fit together (two baselines of one workload, a
    /// baseline that is not a solo cohort).
    #[error("{0}")]
    Compare(String),
    /// A latency objective that cannot be judged: not a positive number, a quantile outside
    /// (0, 1), or a cohort without a serve worker.
    #[error("{0}")]
    Slo(String),
    /// An output could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
}

impl AnalysisError {
    /// The process exit code for this error (see `coload_cohort_schema::exit`).
    #[must_use]
    pub fn exit_code(&self) -> u8 {
        match self {
            AnalysisError::NoInputs
            | AnalysisError::BadInput { .. }
            | AnalysisError::Schema(_)
            | AnalysisError::Compare(_)
            | AnalysisError::NoHog { .. }
            | AnalysisError::Slo(_) => exit::INVALID_INPUT,
            AnalysisError::Cohort(_) => exit::INCOMPLETE_COHORT,
            AnalysisError::Placement { .. } | AnalysisError::SharedExclusive { .. } => {
                exit::ALLOCATION_MISMATCH
            }
            AnalysisError::Write { .. } => exit::INTERNAL,
        }
    }

    /// The cohort problems, when this is [`AnalysisError::Cohort`].
    #[must_use]
    pub fn problems(&self) -> &[CohortProblem] {
        match self {
            AnalysisError::Cohort(p) => p,
            _ => &[],
        }
    }
}

struct ProblemList<'a>(&'a [CohortProblem]);

impl fmt::Display for ProblemList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.len();
        write!(
            f,
            "the cohort is incomplete or inconsistent and was not summarized ({n} problem{}):",
            if n == 1 { "" } else { "s" }
        )?;
        for p in self.0 {
            write!(f, "\n  - {p}")?;
        }
        Ok(())
    }
}

/// One reason a cohort cannot be summarized as a whole.
#[derive(Debug, Clone, PartialEq)]
pub enum CohortProblem {
    /// A worker folder has no `worker.json`.
    MissingReport {
        /// The folder.
        dir: PathBuf,
    },
    /// A worker folder has no `batches.jsonl`.
    MissingBatches {
        /// The folder.
        dir: PathBuf,
    },
    /// A worker reported `status: failed`.
    Failed {
        /// The folder.
        dir: PathBuf,
        /// Its replica.
        replica: u32,
        /// Where it failed, when it said.
        stage: Option<Stage>,
        /// The failure's kind, when it said.
        kind: Option<FailureKind>,
        /// The failure's message, when it said.
        message: Option<String>,
    },
    /// The workers name different experiments.
    ExperimentsDiffer {
        /// Each experiment with the folders that name it.
        experiments: Vec<(String, Vec<PathBuf>)>,
    },
    /// Replica ids are not exactly `0..count`, once each.
    Replicas {
        /// The declared count (the reference worker's).
        count: u32,
        /// Ids in `0..count` that no folder holds, as inclusive ranges (`(3, 3)` is id 3).
        missing: Vec<(u32, u32)>,
        /// Ids held by several folders.
        duplicated: Vec<(u32, Vec<PathBuf>)>,
        /// Ids outside `0..count`.
        outside: Vec<(u32, PathBuf)>,
    },
    /// A worker's configuration differs from the reference worker's.
    ConfigDiffers {
        /// The folder.
        dir: PathBuf,
        /// Its replica.
        replica: u32,
        /// The reference replica.
        reference_replica: u32,
        /// The fields that differ.
        differences: Vec<ConfigDifference>,
    },
    /// A complete worker without a usable window.
    BadWindow {
        /// The folder.
        dir: PathBuf,
        /// Its replica.
        replica: u32,
        /// What is wrong.
        message: String,
    },
    /// Some worker has less than the minimum overlap with the common interval, or the windows
    /// share no time at all.
    LowOverlap {
        /// Every worker's overlap fraction, by replica.
        overlaps: Vec<(u32, f64)>,
        /// The threshold.
        minimum: f64,
        /// The common interval's length, nanoseconds; `None` when the windows share no time.
        common_interval_ns: Option<u64>,
        /// The workers that cut the common interval short: the cause, where the workers below
        /// the threshold are the ones that suffered it.
        cuts: Vec<IntervalCut>,
    },
    /// A worker has no batch entirely inside the common interval.
    NoBatches {
        /// The folder.
        dir: PathBuf,
        /// Its replica.
        replica: u32,
        /// Batches it recorded in its whole window.
        recorded: u64,
    },
    /// `batches.jsonl` and `worker.json` disagree on what was recorded (a truncated file).
    RecordMismatch {
        /// The folder.
        dir: PathBuf,
        /// Its replica.
        replica: u32,
        /// Lines in `batches.jsonl`.
        lines: u64,
        /// `window.batches` in `worker.json`.
        declared: u64,
    },
    /// A serve worker's request records are missing or disagree with its report.
    BadServe {
        /// The folder.
        dir: PathBuf,
        /// Its replica.
        replica: u32,
        /// What is wrong.
        message: String,
    },
}

/// A worker that cut the common interval short (it started last or ended first), named when a
/// cohort is refused for overlap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntervalCut {
    /// Its folder.
    pub dir: PathBuf,
    /// Its replica.
    pub replica: u32,
    /// Whether it started late or ended early.
    pub side: CutSide,
    /// The replica it is measured against: the earliest start, or the latest end.
    pub against_replica: u32,
    /// How much later its window started, or earlier it ended, than `against_replica`'s,
    /// nanoseconds.
    pub by_ns: u64,
    /// Its lateness against the scheduled start (`barrier.lateness_ns`), when it recorded one.
    pub lateness_ns: Option<i64>,
    /// Batches it recorded in its whole window (`window.batches`).
    pub batches: u64,
}

/// Nanoseconds as seconds with three decimals.
fn seconds(ns: f64) -> String {
    format!("{:.3} s", ns / 1e9)
}

impl fmt::Display for IntervalCut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "replica {} ({}): ", self.replica, self.dir.display())?;
        let by = seconds(self.by_ns as f64);
        let against = self.against_replica;
        match (self.side, self.lateness_ns) {
            (CutSide::LateStart, Some(late)) => write!(
                f,
                "late by {} against the scheduled start (its window began {by} after replica \
                 {against}'s)",
                seconds(late as f64)
            )?,
            (CutSide::LateStart, None) => {
                write!(
                    f,
                    "late by {by} against replica {against}'s start (no barrier lateness recorded)"
                )?;
            }
            (CutSide::EarlyEnd, _) => write!(
                f,
                "ended early by {by} (its window ended before replica {against}'s)"
            )?,
        }
        write!(f, ", {} batches in its window", self.batches)
    }
}

fn paths(list: &[PathBuf]) -> String {
    list.iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

impl fmt::Display for CohortProblem {
    #[expect(
        clippy::too_many_lines,
        reason = "one arm per problem keeps every message of the rules in one place"
    )]
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CohortProblem::MissingReport { dir } => write!(
                f,
                "{}: no worker.json (the worker never finished, or this is not a worker folder)",
                dir.display()
            ),
            CohortProblem::MissingBatches { dir } => {
                write!(f, "{}: no batches.jsonl", dir.display())
            }
            CohortProblem::Failed {
                dir,
                replica,
                stage,
                kind,
                message,
            } => {
                write!(f, "{}: replica {replica} failed", dir.display())?;
                if let Some(stage) = stage {
                    write!(f, " at stage {stage}")?;
                }
                if let Some(kind) = kind {
                    write!(f, " ({kind})")?;
                }
                if let Some(message) = message {
                    write!(f, ": {message}")?;
                }
                Ok(())
            }
            CohortProblem::ExperimentsDiffer { experiments } => {
                f.write_str("the workers belong to different experiments:")?;
                for (i, (name, dirs)) in experiments.iter().enumerate() {
                    let sep = if i == 0 { " " } else { "; " };
                    write!(f, "{sep}`{name}` ({})", paths(dirs))?;
                }
                Ok(())
            }
            CohortProblem::Replicas {
                count,
                missing,
                duplicated,
                outside,
            } => {
                write!(
                    f,
                    "replica ids must be 0 to {}, once each (count {count}):",
                    count.saturating_sub(1)
                )?;
                let mut parts = Vec::new();
                if !missing.is_empty() {
                    let ids: Vec<String> = missing
                        .iter()
                        .map(|&(a, b)| match b - a {
                            0 => a.to_string(),
                            1 => format!("{a}, {b}"),
                            _ => format!("{a} to {b}"),
                        })
                        .collect();
                    parts.push(format!("missing {}", ids.join(", ")));
                }
                for (id, dirs) in duplicated {
                    parts.push(format!("replica {id} appears in {}", paths(dirs)));
                }
                for (id, dir) in outside {
                    parts.push(format!(
                        "replica {id} is outside 0 to {} ({})",
                        count.saturating_sub(1),
                        dir.display()
                    ));
                }
                write!(f, " {}", parts.join("; "))
            }
            CohortProblem::ConfigDiffers {
                dir,
                replica,
                reference_replica,
                differences,
            } => {
                let d: Vec<String> = differences.iter().map(ToString::to_string).collect();
                write!(
                    f,
                    "{}: replica {replica}'s config differs from replica {reference_replica}'s: {}",
                    dir.display(),
                    d.join(", ")
                )
            }
            CohortProblem::BadWindow {
                dir,
                replica,
                message,
            } => write!(f, "{}: replica {replica}: {message}", dir.display()),
            CohortProblem::LowOverlap {
                overlaps,
                minimum,
                common_interval_ns,
                cuts,
            } => {
                match common_interval_ns {
                    Some(ns) => write!(f, "the common interval ({})", seconds(*ns as f64))?,
                    None => f.write_str("the common interval (the windows share no time)")?,
                }
                let culprits: Vec<String> = cuts.iter().map(ToString::to_string).collect();
                if culprits.is_empty() {
                    f.write_str(" is too short")?;
                } else {
                    write!(f, " was cut short by {}", culprits.join("; and by "))?;
                }
                let below: Vec<String> = overlaps
                    .iter()
                    .filter(|(_, o)| *o < *minimum)
                    .map(|(r, _)| format!("replica {r}"))
                    .collect();
                let all: Vec<String> = overlaps
                    .iter()
                    .map(|(r, o)| format!("replica {r} {o:.3}"))
                    .collect();
                write!(
                    f,
                    "; every worker needs at least {minimum:.2} of its window inside it, and {} \
                     {} less (overlaps: {})",
                    below.join(", "),
                    if below.len() == 1 { "has" } else { "have" },
                    all.join(", ")
                )
            }
            CohortProblem::NoBatches {
                dir,
                replica,
                recorded,
            } => write!(
                f,
                "{}: replica {replica} has no batch entirely inside the common interval \
                 ({recorded} recorded in its window)",
                dir.display()
            ),
            CohortProblem::RecordMismatch {
                dir,
                replica,
                lines,
                declared,
            } => write!(
                f,
                "{}: replica {replica}: batches.jsonl has {lines} records but worker.json says \
                 window.batches = {declared} (a truncated or mixed-up file)",
                dir.display()
            ),
            CohortProblem::BadServe {
                dir,
                replica,
                message,
            } => write!(f, "{}: serve replica {replica}: {message}", dir.display()),
        }
    }
}
