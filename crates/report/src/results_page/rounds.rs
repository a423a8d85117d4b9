//! The rounds of ResNet18 cohorts: the decision table, the article's matrix per policy, the
//! capacity searches, memory isolation, the GPM "why", and the archived first rounds.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use coload_cohort_schema::study::{Entry, Index, Outcome};
use coload_cohort_schema::{CapacityReport, CohortSummary, Comparison, Workload};

use super::{PageError, Study, bold_if, dates, day, read, read_value, sorted_glob, table};
use crate::svg::num;
use crate::verdict::{Cell, ratio};
use crate::{CapacityRow, IsolationRow, number};

const ROUND2: &str = "2026-11-30-round2";
const ROUND3: &str = "2026-12-01-round3";
const ROUND4: &str = "2026-12-01-round4";

/// The sharing policies the rounds compare, in the page's column order.
pub(crate) const POLICIES: [&str; 3] = ["timeslice", "mps-plugin", "mps-unlimited"];

/// A policy as the page names it.
pub(crate) fn policy_words(policy: &str) -> &str {
    match policy {
        "timeslice" => "time-slicing",
        "mps-plugin" => "MPS, plugin replicas 7",
        "mps-unlimited" => "MPS, unlimited",
        "mig" => "MIG",
        other => other,
    }
}

const TRAIN: Workload = Workload::Train;
const INFER: Workload = Workload::Infer;

/// A row of a shape table: its label, the mix, the group it is about, and whether it shows the
/// group's aggregate (else its p99).
type ShapeRow = (&'static str, &'static [(Workload, u32)], Workload, bool);

const ARTICLE_ROWS: [ShapeRow; 11] = [
    ("1 trainer alone, rate", &[(TRAIN, 1)], TRAIN, true),
    ("1 inference worker alone, rate", &[(INFER, 1)], INFER, true),
    ("2 trainers, aggregate", &[(TRAIN, 2)], TRAIN, true),
    ("4 trainers, aggregate", &[(TRAIN, 4)], TRAIN, true),
    ("7 trainers, aggregate", &[(TRAIN, 7)], TRAIN, true),
    ("7 trainers, group p99", &[(TRAIN, 7)], TRAIN, false),
    ("4 inference workers, aggregate", &[(INFER, 4)], INFER, true),
    ("7 inference workers, aggregate", &[(INFER, 7)], INFER, true),
    (
        "1 infer + 6 train: inference p99",
        &[(INFER, 1), (TRAIN, 6)],
        INFER,
        false,
    ),
    (
        "1 infer + 6 train: inference rate",
        &[(INFER, 1), (TRAIN, 6)],
        INFER,
        true,
    ),
    (
        "1 infer + 6 train: the six trainers",
        &[(INFER, 1), (TRAIN, 6)],
        TRAIN,
        true,
    ),
];

/// A figure with its interval: `3,857 [3,816 to 3,897]`.
fn with_ci(v: f64, ci: Option<(f64, f64)>) -> String {
    ci.map_or_else(
        || num(v),
        |(l, h)| format!("{} [{} to {}]", num(v), num(l), num(h)),
    )
}

/// A ratio against solo as the page writes it (`1.04x`), or why there is none: its cohorts ran
/// on a card without their own solo (no ratio crosses cards).
fn times(v: Option<f64>) -> String {
    v.map_or_else(|| NOT_COMPARED.to_owned(), |r| format!("{}x", ratio(r)))
}

/// What a cell without a ratio against solo says.
const NOT_COMPARED: &str = "no same-card solo";

/// The policy whose value is best (highest, or lowest with `high` false), among those with one.
fn best<'a>(
    values: impl IntoIterator<Item = (&'a str, Option<f64>)>,
    high: bool,
) -> Option<&'a str> {
    let mut top: Option<(&str, f64)> = None;
    for (p, v) in values {
        let Some(v) = v else { continue };
        let better = top.is_none_or(|(_, t)| if high { v > t } else { v < t });
        if better {
            top = Some((p, v));
        }
    }
    top.map(|(p, _)| p)
}

/// A mix as the index writes its workers: `infer=1,train=6`.
fn workers_words(mix: &[(Workload, u32)]) -> String {
    let mut parts: Vec<String> = mix.iter().map(|(w, n)| format!("{w}={n}")).collect();
    parts.sort();
    parts.join(",")
}

fn done(e: &Entry) -> bool {
    e.outcome.has_summary()
}

fn failed(e: &Entry) -> bool {
    matches!(e.outcome, Outcome::Failed | Outcome::FailedEarlier)
}

/// A study's index read for the cells that have no figure: which cohorts the plan holds for a
/// policy and shape, and what became of them.
struct Plan<'a> {
    cohorts: &'a [Entry],
}

impl Plan<'_> {
    fn entries(&self, policy: &str, workers: &str, tag: &str) -> Vec<&Entry> {
        self.cohorts
            .iter()
            .filter(|e| e.policy == policy && e.workers == workers && e.name.contains(tag))
            .collect()
    }

    /// How many of them (repeats) the node offered.
    fn offered(&self, policy: &str, workers: &str) -> usize {
        self.entries(policy, workers, "")
            .iter()
            .filter(|e| e.outcome != Outcome::NotOffered)
            .count()
    }

    /// Words for a cell without a figure, or `None` where the plan has no such cohort (or one
    /// that left its figures).
    fn missing(&self, policy: &str, workers: &str, tag: &str) -> Option<String> {
        let found = self.entries(policy, workers, tag);
        if found.is_empty() || found.iter().any(|e| done(e)) {
            return None;
        }
        if found.iter().all(|e| e.outcome == Outcome::NotOffered) {
            return Some(format!(
                "not offered ({})",
                short_reason(found[0].reason.as_deref())
            ));
        }
        if found.iter().any(|e| e.outcome == Outcome::NotRun) {
            return Some("not run yet".to_owned());
        }
        Some("failed (its `failure.json` says why)".to_owned())
    }
}

/// The first clause of an index's reason.
fn short_reason(reason: Option<&str>) -> &str {
    let r = reason.unwrap_or("no reason recorded");
    r.split("; ").next().unwrap_or(r)
}

/// One row per shape, one column per policy.
fn shape_table(study: &Study, rows: &[ShapeRow], columns: &[&str], plan: Option<&Plan>) -> String {
    let mut out = Vec::new();
    for (label, mix, group, aggregate) in rows {
        let cells: Vec<(&str, Option<&Cell>)> = columns
            .iter()
            .map(|p| (*p, study.cell(mix, *group, p)))
            .collect();
        if cells.iter().all(|(_, c)| c.is_none()) {
            continue;
        }
        let present = cells.iter().filter(|(_, c)| c.is_some()).count();
        let top = best(
            cells.iter().map(|(p, c)| {
                (
                    *p,
                    c.map(|c| if *aggregate { c.aggregate } else { c.p99_ms }),
                )
            }),
            *aggregate,
        );
        let mut line = vec![(*label).to_owned()];
        for (p, c) in &cells {
            let Some(c) = c else {
                line.push(
                    plan.and_then(|plan| plan.missing(p, &workers_words(mix), ""))
                        .unwrap_or_default(),
                );
                continue;
            };
            let text = if *aggregate {
                format!(
                    "{} ({})",
                    with_ci(c.aggregate, c.aggregate_ci),
                    times(c.aggregate_vs_solo)
                )
            } else {
                format!(
                    "{} ms ({}{})",
                    with_ci(c.p99_ms, c.p99_ci),
                    times(c.p99_vs_solo),
                    if c.p99_vs_solo.is_some() { " solo" } else { "" }
                )
            };
            line.push(bold_if(text, Some(*p) == top && present > 1));
        }
        out.push(line);
    }
    let header: Vec<&str> = std::iter::once("shape")
        .chain(columns.iter().map(|p| policy_words(p)))
        .collect();
    table(&header, out)
}

/// Capacity searches by policy.
type Searches = BTreeMap<String, CapacityRow>;

/// The searches of a folder named solo, timeslice6, mps-plugin6, mps-unlimited6.
fn capacity_folder(folder: &Path) -> Result<Searches, PageError> {
    let mut out = Searches::new();
    for (name, policy) in [
        ("solo", "exclusive"),
        ("timeslice6", "timeslice"),
        ("mps-plugin6", "mps-plugin"),
        ("mps-unlimited6", "mps-unlimited"),
    ] {
        let dir = folder.join(name);
        let path = dir.join(coload_cohort_schema::files::CAPACITY);
        if path.is_file() {
            let r: CapacityReport = read(&path)?;
            out.insert(
                policy.to_owned(),
                crate::study_report::capacity_row(&dir, "", policy, "", &r),
            );
        }
    }
    Ok(out)
}

/// A study's searches at one objective (`10ms`): its cohorts `*-capacity-<objective>-r<n>`.
fn capacity_cohorts(study: &Study, objective: &str) -> Searches {
    let tag = format!("-capacity-{objective}-r");
    study
        .assembled
        .context
        .capacity
        .iter()
        .filter(|r| r.name.contains(&tag))
        .map(|r| (r.policy.clone(), r.clone()))
        .collect()
}

/// One row per policy with a search; `missing(policy)` words a policy without one.
fn capacity_table(searches: &Searches, missing: &dyn Fn(&str) -> Option<String>) -> String {
    let mut rows = Vec::new();
    for policy in std::iter::once("exclusive").chain(POLICIES) {
        let beside = if policy == "exclusive" {
            "nothing"
        } else {
            "6 trainers"
        };
        let label = format!("{}, beside {beside}", policy_words(policy));
        match searches.get(policy) {
            Some(r) => rows.push(vec![
                label,
                r.capacity_words(),
                crate::comparison::bracket_words(r),
                r.stop.clone(),
                crate::comparison::probes_words(r),
            ]),
            None => {
                if let Some(words) = missing(policy) {
                    rows.push(vec![
                        label,
                        words,
                        String::new(),
                        String::new(),
                        String::new(),
                    ]);
                }
            }
        }
    }
    table(
        &[
            "policy",
            "capacity, requests/s",
            "bracket [passed, failed)",
            "stop",
            "probes (requests/s: p99)",
        ],
        rows,
    )
}

/// An isolation result in words: `not contained: the hog got 139.2 GiB; 6 of 6 others ran out
/// of memory` (the report's note).
fn isolation_words(r: &IsolationRow) -> String {
    format!("{}: {}", r.outcome.replace('_', " "), r.note)
}

fn isolation_of<'a>(study: &'a Study, policy: &str) -> Option<&'a IsolationRow> {
    study
        .assembled
        .context
        .isolation
        .iter()
        .rev()
        .find(|r| r.policy == policy)
}

/// The hog cohorts per policy in one line.
fn isolation_line(study: &Study, plan: Option<&Plan>) -> String {
    let mut out = Vec::new();
    for p in POLICIES.into_iter().chain(["mig"]) {
        let words = isolation_of(study, p).map(isolation_words).or_else(|| {
            plan.filter(|_| p != "mig")
                .and_then(|plan| plan.missing(p, "hog=1,train=6", ""))
        });
        if let Some(words) = words {
            out.push(format!("{}: {words}", policy_words(p)));
        }
    }
    if out.is_empty() {
        "not run".to_owned()
    } else {
        out.join("; ")
    }
}

/// Where the decision table's figures come from.
struct Decision<'a> {
    study: &'a Study,
    plan: Option<Plan<'a>>,
    columns: Vec<&'a str>,
    cap10: Searches,
    cap25: Searches,
    /// The study whose hog cohorts answer the isolation row.
    isolation: &'a Study,
    /// A need measured by another round: its words (` (round 2)`).
    source: BTreeMap<&'static str, &'static str>,
}

impl Decision<'_> {
    fn missing(&self, p: &str, workers: &str, tag: &str) -> String {
        self.plan
            .as_ref()
            .and_then(|plan| plan.missing(p, workers, tag))
            .unwrap_or_default()
    }

    /// `; 1 of 3 repeats` while the plan has repeats of the shape still to run.
    fn repeats(&self, c: &Cell, p: &str, workers: &str) -> String {
        let planned = self
            .plan
            .as_ref()
            .map_or(0, |plan| plan.offered(p, workers));
        if c.cohorts < planned {
            format!("; {} of {planned} repeats", c.cohorts)
        } else {
            String::new()
        }
    }

    /// One need: a cell per policy, the best in bold.
    fn row(
        &self,
        label: String,
        mix: &[(Workload, u32)],
        value: &dyn Fn(&Cell) -> Option<f64>,
        words: &dyn Fn(&Cell, &str) -> String,
        high: bool,
        extra: String,
    ) -> Vec<String> {
        let cells: Vec<(&str, Option<&Cell>)> = self
            .columns
            .iter()
            .map(|p| (*p, self.study.cell(mix, mix_group(mix), p)))
            .collect();
        let top = best(cells.iter().map(|(p, c)| (*p, c.and_then(value))), high);
        let mut line = vec![label];
        for (p, c) in &cells {
            line.push(match c {
                Some(c) => bold_if(words(c, p), Some(*p) == top),
                None => self.missing(p, &workers_words(mix), ""),
            });
        }
        line.push(extra);
        line
    }

    #[expect(
        clippy::too_many_lines,
        reason = "one row per need, in the order the table reads"
    )]
    fn table(&self) -> String {
        let train7: &[(Workload, u32)] = &[(TRAIN, 7)];
        let tail: &[(Workload, u32)] = &[(INFER, 1), (TRAIN, 6)];
        let mut rows = Vec::new();
        rows.push(self.row(
            "7 trainers on one card, total against one solo [95 % CI of the total]".to_owned(),
            train7,
            &|c| Some(c.aggregate),
            &|c, p| {
                format!(
                    "{} ({}{})",
                    times(c.aggregate_vs_solo),
                    with_ci(c.aggregate, c.aggregate_ci),
                    self.repeats(c, p, "train=7")
                )
            },
            true,
            String::new(),
        ));
        rows.push(self.row(
            "one trainer alone under the policy (card not full), against solo".to_owned(),
            &[(TRAIN, 1)],
            &|c| c.rate_vs_solo,
            &|c, _| times(c.rate_vs_solo),
            true,
            String::new(),
        ));
        let cards = self.study.cell(&[(TRAIN, 2)], TRAIN, "exclusive");
        let not_two = self.missing("exclusive", "train=2", "");
        let extra = match cards {
            Some(c) => format!("{} on two cards", times(c.aggregate_vs_solo)),
            None if !not_two.is_empty() => format!("on two cards: {not_two}"),
            None => String::new(),
        };
        rows.push(self.row(
            "two trainers, total against one solo".to_owned(),
            &[(TRAIN, 2)],
            &|c| Some(c.aggregate),
            &|c, _| times(c.aggregate_vs_solo),
            true,
            extra,
        ));
        let solo_infer = self.study.solo(INFER).map_or(0.0, |s| s.1);
        rows.push(self.row(
            format!(
                "inference p99 beside 6 trainers (solo {} ms) [95 % CI]",
                num(solo_infer)
            ),
            tail,
            &|c| Some(c.p99_ms),
            &|c, p| {
                format!(
                    "{} ms ({}{})",
                    with_ci(c.p99_ms, c.p99_ci),
                    times(c.p99_vs_solo),
                    self.repeats(c, p, "infer=1,train=6")
                )
            },
            false,
            String::new(),
        ));
        for (objective, searches, tag, source) in [
            ("p99 <= 10 ms", &self.cap10, "capacity-10ms", "cap10"),
            ("p99 <= 25 ms", &self.cap25, "capacity-25ms", "cap25"),
        ] {
            let key = |r: &CapacityRow| r.capacity_per_s.unwrap_or(0.0);
            let top = best(
                self.columns.iter().map(|p| (*p, searches.get(*p).map(key))),
                true,
            );
            let mut line = vec![format!(
                "requests/s at {objective}{} beside 6 trainers",
                self.source.get(source).copied().unwrap_or("")
            )];
            for p in &self.columns {
                line.push(match searches.get(*p) {
                    Some(r) => bold_if(r.capacity_words(), Some(*p) == top && key(r) > 0.0),
                    None => self.missing(p, "serve=1,train=6", tag),
                });
            }
            let not_solo = self.missing("exclusive", "serve=1", tag);
            line.push(match searches.get("exclusive") {
                Some(r) => format!("alone: {}", r.capacity_words()),
                None if !not_solo.is_empty() => format!("alone: {not_solo}"),
                None => String::new(),
            });
            rows.push(line);
        }
        let mut line = vec![format!(
            "a memory hog beside 6 trainers{}",
            self.source.get("isolation").copied().unwrap_or("")
        )];
        for p in &self.columns {
            let m = self.missing(p, "hog=1,train=6", "");
            line.push(isolation_of(self.isolation, p).map_or_else(
                || {
                    if m.is_empty() {
                        "not run".to_owned()
                    } else {
                        m
                    }
                },
                |r| bold_if(isolation_words(r), r.isolated),
            ));
        }
        line.push(String::new());
        rows.push(line);
        let alone = self
            .study
            .verdict
            .solo_samples_per_joule
            .get(&TRAIN)
            .map(|j| format!("one alone: {}", num(*j)))
            .unwrap_or_default();
        rows.push(self.row(
            "training samples per device joule, 7 trainers".to_owned(),
            train7,
            &|c| c.samples_per_joule,
            &|c, _| c.samples_per_joule.map_or_else(|| "-".to_owned(), num),
            true,
            alone,
        ));
        let header: Vec<&str> = std::iter::once("need")
            .chain(self.columns.iter().map(|p| policy_words(p)))
            .chain(["exclusive"])
            .collect();
        table(&header, rows)
    }
}

/// The group a decision row is about: the mix's only workload, or inference in a mix.
fn mix_group(mix: &[(Workload, u32)]) -> Workload {
    if mix.len() > 1 { INFER } else { mix[0].0 }
}

/// The policies of the decision table: MIG too where the node offered a MIG cohort.
fn decision_columns(index: &Index) -> Vec<&'static str> {
    let mut columns = POLICIES.to_vec();
    if index
        .cohorts
        .iter()
        .any(|e| e.policy == "mig" && e.outcome != Outcome::NotOffered)
    {
        columns.push("mig");
    }
    columns
}

/// MIG, named when the study did not measure it: the index's reason.
fn decision_mig(index: &Index) -> String {
    let mig: Vec<&Entry> = index.cohorts.iter().filter(|e| e.policy == "mig").collect();
    if mig.is_empty() {
        return "MIG is not in the plan of this study".to_owned();
    }
    let left: Vec<&&Entry> = mig
        .iter()
        .filter(|e| e.outcome == Outcome::NotOffered)
        .collect();
    if left.len() < mig.len() {
        return format!(
            "MIG: {} of the plan's {} MIG cohorts offered on this node (the MIG column)",
            mig.len() - left.len(),
            mig.len()
        );
    }
    let why: std::collections::BTreeSet<&str> = left
        .iter()
        .map(|e| {
            let r = e.reason.as_deref().unwrap_or("no reason recorded");
            r.split_once("; ").map_or(r, |(_, rest)| rest)
        })
        .collect();
    format!(
        "MIG is not measured: the node offered none of the plan's {} MIG cohorts; the index's \
         reason: {}",
        mig.len(),
        why.into_iter().collect::<Vec<_>>().join("; ")
    )
}

/// A shape of the plan: the cohort's name without its policy and repeat, and its workers.
type ShapeKey = (String, String);
/// A shape's entries per policy, in the plan's order.
type PerPolicy<'a> = Vec<(String, Vec<&'a Entry>)>;

/// Per shape the plan repeats: how many repeats have left figures, per policy.
fn repeats_words(index: &Index) -> String {
    // (stem, workers) -> [(policy, entries)], in the plan's order.
    let mut shapes: Vec<(ShapeKey, PerPolicy)> = Vec::new();
    for e in index
        .cohorts
        .iter()
        .filter(|e| e.outcome != Outcome::NotOffered)
    {
        let stem = e
            .name
            .strip_prefix(&format!("{}-", e.policy))
            .unwrap_or(&e.name);
        let stem = match stem.rsplit_once("-r") {
            Some((head, k)) if !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()) => head,
            _ => stem,
        };
        let key = (stem.to_owned(), e.workers.clone());
        let i = shapes
            .iter()
            .position(|(k, _)| *k == key)
            .unwrap_or_else(|| {
                shapes.push((key, Vec::new()));
                shapes.len() - 1
            });
        let per = &mut shapes[i].1;
        match per.iter_mut().find(|(p, _)| *p == e.policy) {
            Some((_, v)) => v.push(e),
            None => per.push((e.policy.clone(), vec![e])),
        }
    }
    let mut out = Vec::new();
    for ((_, workers), per) in &shapes {
        let planned = per.iter().map(|(_, v)| v.len()).max().unwrap_or(0);
        if planned < 2 {
            continue;
        }
        let counts: Vec<(&str, usize)> = per
            .iter()
            .map(|(p, v)| (p.as_str(), v.iter().filter(|e| done(e)).count()))
            .collect();
        if counts.iter().all(|(_, n)| *n == counts[0].1) {
            out.push(format!(
                "`{workers}`, {} of {planned} under each policy",
                counts[0].1
            ));
        } else {
            let each: Vec<String> = counts
                .iter()
                .map(|(p, n)| format!("{} {n}", policy_words(p)))
                .collect();
            out.push(format!("`{workers}`, {} of {planned}", each.join(", ")));
        }
    }
    if out.is_empty() {
        "none".to_owned()
    } else {
        out.join("; ")
    }
}

/// How far the decision study has come, from its index.
fn decision_progress(index: &Index) -> String {
    let offered: Vec<&Entry> = index
        .cohorts
        .iter()
        .filter(|e| e.outcome != Outcome::NotOffered)
        .collect();
    let complete = offered.iter().filter(|e| done(e)).count();
    let hogs = offered
        .iter()
        .filter(|e| failed(e) && e.workers.starts_with("hog="))
        .count();
    let mut words = format!("{complete} of {} offered cohorts complete", offered.len());
    if hogs > 0 {
        let _ = write!(
            words,
            ", {} whose trainers ran out of memory beside the hog (the measurement; recorded as \
             failed by the build that ran them)",
            coload_analysis::plural(hogs, "hog cohort", "hog cohorts")
        );
    }
    let rest = offered.len() - complete - hogs;
    if rest > 0 {
        let _ = write!(words, ", {rest} not run yet");
    }
    words
}

/// The exclusive solo references: `train 3,726 samples/s (p99 9.98 ms), infer ...`.
fn solo_words(study: &Study) -> String {
    let out: Vec<String> = [TRAIN, INFER]
        .into_iter()
        .filter_map(|w| {
            study
                .solo(w)
                .map(|(rate, p99)| format!("{w} {} samples/s (p99 {} ms)", num(rate), num(p99)))
        })
        .collect();
    if out.is_empty() {
        "none".to_owned()
    } else {
        out.join(", ")
    }
}

/// The study's workload and protocol, as its report's provenance words them.
fn protocol(study: &Study) -> String {
    format!(
        "{}; {}",
        study.provenance("workload"),
        study.provenance("protocol")
    )
}

/// One line per trainer-model study of a folder: its solo and seven trainers per policy.
fn models_table(folder: &Path) -> Result<String, PageError> {
    let mut names: Vec<String> = std::fs::read_dir(folder)
        .map_err(|e| PageError::data(folder, e))?
        .filter_map(Result::ok)
        .filter(|e| e.path().join("index.json").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut rows = Vec::new();
    for name in names {
        let s = Study::open(&folder.join(&name))?;
        let execution = s
            .summaries(false)?
            .first()
            .map(|x| x.config.execution.to_string())
            .unwrap_or_default();
        let cells: Vec<(&str, Option<&Cell>)> = POLICIES
            .iter()
            .map(|p| (*p, s.cell(&[(TRAIN, 7)], TRAIN, p)))
            .collect();
        if cells.iter().all(|(_, c)| c.is_none()) {
            continue;
        }
        let top = best(
            cells.iter().map(|(p, c)| (*p, c.map(|c| c.aggregate))),
            true,
        );
        let mut line = vec![
            format!("{name} ({execution})"),
            s.solo(TRAIN)
                .map_or_else(|| "-".to_owned(), |(r, _)| num(r)),
        ];
        for (p, c) in &cells {
            line.push(c.map_or_else(String::new, |c| {
                bold_if(
                    format!("{} ({})", num(c.aggregate), times(c.aggregate_vs_solo)),
                    Some(*p) == top,
                )
            }));
        }
        rows.push(line);
    }
    let header: Vec<String> = POLICIES
        .iter()
        .map(|p| format!("7 trainers, {}", policy_words(p)))
        .collect();
    let header: Vec<&str> = ["study (execution)", "its solo trainer"]
        .into_iter()
        .chain(header.iter().map(String::as_str))
        .collect();
    Ok(table(&header, rows))
}

/// Round 1's comparison: each cohort's groups against the solo.
fn round1_table(c: &Comparison) -> String {
    let base: Vec<&str> = c
        .baselines
        .values()
        .map(|b| b.experiment.as_str())
        .collect();
    let solo: BTreeMap<Workload, (f64, f64)> = c
        .baselines
        .iter()
        .map(|(w, b)| (*w, (b.samples_per_s, b.p99_ms)))
        .collect();
    let mut rows = Vec::new();
    for k in c
        .cohorts
        .iter()
        .filter(|k| !base.contains(&k.experiment.as_str()))
    {
        let mut mix: Vec<(&Workload, &u32)> = k.workload_mix.iter().collect();
        mix.sort_by_key(|(_, n)| **n);
        let mix: Vec<String> = mix.iter().map(|(w, n)| format!("{n} {w}")).collect();
        for (w, g) in &k.groups {
            let per = g.per_worker.iter().map(|p| p.samples_per_s).sum::<f64>()
                / g.per_worker.len().max(1) as f64;
            let s = solo.get(w);
            rows.push(vec![
                format!("{}: {w}", mix.join(" + ")),
                k.mode.to_string(),
                k.experiment.clone(),
                s.map_or_else(|| "-".to_owned(), |s| ratio(per / s.0)),
                s.map_or_else(
                    || "-".to_owned(),
                    |s| ratio(g.aggregate_samples_per_s / s.0),
                ),
                s.map_or_else(
                    || num(g.p99_ms),
                    |s| format!("{} ({}x)", num(g.p99_ms), ratio(g.p99_ms / s.1)),
                ),
            ]);
        }
    }
    table(
        &[
            "shape: group",
            "mode",
            "experiment",
            "per-worker rate ÷ solo",
            "aggregate ÷ solo",
            "group p99 ms (÷ solo)",
        ],
        rows,
    )
}

/// GPM's own cost: a solo trainer alternated with GPM on and off (`overhead.json`).
fn gpm_overhead(path: &Path) -> Result<String, PageError> {
    let d = read_value(path)?;
    let rates = |setting: &str| -> Vec<f64> {
        d["runs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| r["setting"] == setting)
            .filter_map(|r| r["samples_per_s"].as_f64())
            .collect()
    };
    let (on, off) = (rates("gpm-on"), rates("gpm-off"));
    if on.is_empty() || off.is_empty() {
        return Ok("-".to_owned());
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let (m_on, m_off) = (mean(&on), mean(&off));
    Ok(format!(
        "GPM on {} against off {} samples/s over {} and {} runs of {} s ({:+.1} %)",
        num(m_on),
        num(m_off),
        on.len(),
        off.len(),
        number(d["window_s"].as_f64().unwrap_or(0.0)),
        (m_on / m_off - 1.0) * 100.0
    ))
}

/// The `worker.json` files under `dir` (`<cohort>/<file>` or `<cohort>/worker-0/worker.json`).
fn worker_files(dir: &Path, nested: bool) -> Vec<std::path::PathBuf> {
    if nested {
        sorted_glob(dir, "", "worker-0/worker.json")
    } else {
        let Ok(cohorts) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        let mut out: Vec<std::path::PathBuf> = cohorts
            .filter_map(Result::ok)
            .flat_map(|c| {
                std::fs::read_dir(c.path())
                    .into_iter()
                    .flatten()
                    .filter_map(Result::ok)
                    .map(|f| f.path())
                    .filter(|p| {
                        p.file_name().is_some_and(|n| {
                            let n = n.to_string_lossy();
                            n.starts_with("worker-") && n.ends_with(".json")
                        })
                    })
            })
            .collect();
        out.sort();
        out
    }
}

/// The GPUs and software the workers' records name.
fn hardware_words(files: &[std::path::PathBuf], first_only: bool) -> Result<String, PageError> {
    let mut seen: Vec<String> = Vec::new();
    for p in files {
        if first_only && !p.to_string_lossy().ends_with("worker-0.json") {
            continue;
        }
        let v = read_value(p)?;
        let dev = &v["device"];
        let s = |k: &str| dev[k].as_str().unwrap_or("None").to_owned();
        let w = format!(
            "{}, driver {}, CUDA {}, libtorch {}, cuDNN {}",
            s("gpu_name"),
            s("driver_version"),
            s("cuda_version"),
            s("libtorch_version"),
            s("cudnn_version")
        );
        if !seen.contains(&w) {
            seen.push(w);
        }
    }
    Ok(if seen.is_empty() {
        "-".to_owned()
    } else {
        seen.join("; ")
    })
}

/// What the workers' records say about MIG on the lent hosts.
fn mig_words(files: &[std::path::PathBuf]) -> Result<String, PageError> {
    let mut modes = std::collections::BTreeSet::new();
    for p in files {
        let v = read_value(p)?;
        modes.insert(v["device"]["mig_mode"].to_string());
    }
    if modes.len() == 1 && modes.contains("false") {
        return Ok(
            "MIG mode was disabled on every lent H200 (each worker.json records \
                   `device.mig_mode: false`)"
                .to_owned(),
        );
    }
    Ok(format!(
        "MIG mode as recorded: {}",
        modes.into_iter().collect::<Vec<_>>().join(", ")
    ))
}

/// The GPU activity (NVML GPM: SM occupancy, DRAM bandwidth) and energy of every cohort of a
/// study, the report's "why" table.
fn why_table(study: &Study) -> String {
    crate::why::comparison_why(study.comparison(), &study.assembled.context).map_or_else(
        || "No cohort of the study recorded GPM or energy.".to_owned(),
        |t| crate::markdown::table(&t).trim_end().to_owned(),
    )
}

/// Mean SM occupancy and DRAM bandwidth per policy over the cohorts of one shape, in words.
fn why_words(study: &Study, mix: &[(Workload, u32)]) -> String {
    let mix: BTreeMap<Workload, u32> = mix.iter().copied().collect();
    let mut parts = Vec::new();
    for p in POLICIES {
        let gpm: Vec<(f64, f64)> = study
            .comparison()
            .cohorts
            .iter()
            .filter(|k| {
                k.workload_mix == mix
                    && study
                        .assembled
                        .context
                        .policies
                        .get(&k.experiment)
                        .map(String::as_str)
                        == Some(p)
            })
            .filter_map(|k| k.gpm.as_ref())
            .filter_map(|g| {
                g.sm_occupancy_pct
                    .as_ref()
                    .zip(g.dram_bw_util_pct.as_ref())
                    .map(|(sm, dram)| (sm.mean, dram.mean))
            })
            .collect();
        if gpm.is_empty() {
            continue;
        }
        let n = gpm.len() as f64;
        let sm = gpm.iter().map(|g| g.0).sum::<f64>() / n;
        let dram = gpm.iter().map(|g| g.1).sum::<f64>() / n;
        parts.push(format!(
            "{}: SM occupancy {} %, DRAM bandwidth {} %",
            policy_words(p),
            num(sm),
            num(dram)
        ));
    }
    if parts.is_empty() {
        "not recorded".to_owned()
    } else {
        parts.join("; ")
    }
}

/// The figures of the ResNet18 rounds.
#[expect(
    clippy::too_many_lines,
    reason = "one line per figure of the page, named as the template names it"
)]
pub(crate) fn figures(
    data: &Path,
    values: &mut BTreeMap<&'static str, String>,
) -> Result<(), PageError> {
    let article = Study::open(&data.join(ROUND3).join("article"))?;
    let round2 = Study::open(&data.join(ROUND2).join("study"))?;
    let decision = Study::open(&data.join(ROUND4).join("decision"))?;
    let index = &decision.index;
    let round3 = Decision {
        study: &article,
        plan: None,
        columns: POLICIES.to_vec(),
        cap10: capacity_folder(&data.join(ROUND3).join("capacity-10ms"))?,
        cap25: capacity_folder(&data.join(ROUND2).join("capacity"))?,
        isolation: &round2,
        source: BTreeMap::from([("cap25", " (round 2)"), ("isolation", " (round 2)")]),
    };
    let round4 = Decision {
        study: &decision,
        plan: Some(Plan {
            cohorts: &index.cohorts,
        }),
        columns: decision_columns(index),
        cap10: capacity_cohorts(&decision, "10ms"),
        cap25: capacity_cohorts(&decision, "25ms"),
        isolation: &decision,
        source: BTreeMap::new(),
    };
    let plan = Plan {
        cohorts: &index.cohorts,
    };
    let mut columns4 = round4.columns.clone();
    columns4.push("exclusive");
    let round1: Comparison = read(&data.with_file_name("comparison.json"))?;
    let round1_summaries: Vec<CohortSummary> = sorted_glob(data, "", "summary.json")
        .iter()
        .map(|p| read(p))
        .collect::<Result<_, _>>()?;
    let round1_workers = worker_files(data, false);
    let complete = article.index.cohorts.iter().filter(|e| done(e)).count();
    let solo = |s: &Study, w: Workload, i: usize| {
        s.solo(w)
            .map_or_else(|| "-".to_owned(), |v| num(if i == 0 { v.0 } else { v.1 }))
    };
    let mut v: Vec<(&'static str, String)> = vec![
        ("round4_decision_table", round4.table()),
        ("decision_dates", dates(&decision.summaries(true)?)),
        ("decision_node", index.node.clone()),
        ("decision_protocol", protocol(&decision)),
        ("decision_progress", decision_progress(index)),
        ("decision_mig", decision_mig(index)),
        ("round4_day", day(&decision.summaries(true)?)),
        (
            "round4_hardware",
            hardware_words(&worker_files(&decision.path.join("cohorts"), true), false)?,
        ),
        ("round4_solo", solo_words(&decision)),
        ("round4_repeats", repeats_words(index)),
        (
            "round4_table",
            shape_table(&decision, &ARTICLE_ROWS, &columns4, Some(&plan)),
        ),
        (
            "round4_capacity10_table",
            capacity_table(&round4.cap10, &|p| {
                plan.missing(p, serve_workers(p), "capacity-10ms")
            }),
        ),
        (
            "round4_capacity25_table",
            capacity_table(&round4.cap25, &|p| {
                plan.missing(p, serve_workers(p), "capacity-25ms")
            }),
        ),
        ("round4_isolation", isolation_line(&decision, Some(&plan))),
        (
            "round4_wall",
            crate::study_report::wall_time(index).unwrap_or_else(|| {
                "not recorded: the builds that ran it kept no run or cohort times".to_owned()
            }),
        ),
        ("round4_why_words", why_words(&decision, &[(TRAIN, 7)])),
        (
            "round4_why_mixed",
            why_words(&decision, &[(INFER, 1), (TRAIN, 6)]),
        ),
        ("round4_why_table", why_table(&decision)),
        ("round3_decision_table", round3.table()),
        ("article_protocol", protocol(&article)),
        ("article_dates", dates(&article.summaries(true)?)),
        ("article_node", article.index.node.clone()),
        (
            "article_complete",
            format!("{complete} of {}", article.index.cohorts.len()),
        ),
        ("article_table", {
            let mut columns = POLICIES.to_vec();
            columns.push("exclusive");
            shape_table(&article, &ARTICLE_ROWS, &columns, None)
        }),
        ("article_solo_train", solo(&article, TRAIN, 0)),
        ("article_solo_train_p99", solo(&article, TRAIN, 1)),
        ("article_solo_infer", solo(&article, INFER, 0)),
        ("article_solo_infer_p99", solo(&article, INFER, 1)),
        ("capacity10_table", capacity_table(&round3.cap10, &|_| None)),
        ("capacity25_table", capacity_table(&round3.cap25, &|_| None)),
        (
            "models_table",
            models_table(&data.join(ROUND3).join("models"))?,
        ),
        (
            "models_protocol",
            protocol(&Study::open(
                &data.join(ROUND3).join("models").join("resnet18"),
            )?),
        ),
        ("round2_protocol", protocol(&round2)),
        ("round2_dates", dates(&round2.summaries(true)?)),
        ("round2_table", {
            let rows: Vec<ShapeRow> = ARTICLE_ROWS
                .into_iter()
                .filter(|r| r.1 != [(TRAIN, 2)])
                .collect();
            shape_table(&round2, &rows, &POLICIES, None)
        }),
        ("round2_isolation", isolation_line(&round2, None)),
        (
            "round2_gpm_overhead",
            gpm_overhead(&data.join(ROUND2).join("gpm-overhead").join("overhead.json"))?,
        ),
        ("round1_table", round1_table(&round1)),
        ("round1_day", day(&round1_summaries)),
        ("round2_day", day(&round2.summaries(false)?)),
        ("round3_day", day(&article.summaries(false)?)),
        ("hardware", hardware_words(&round1_workers, true)?),
        ("mig", mig_words(&round1_workers)?),
    ];
    values.extend(v.drain(..));
    Ok(())
}

/// The workers of a capacity search of `policy`: alone for exclusive, else beside six trainers.
fn serve_workers(policy: &str) -> &'static str {
    if policy == "exclusive" {
        "serve=1"
    } else {
        "serve=1,train=6"
    }
}
