//! The repository's results page (`docs/results.md`), rendered from the recorded data under
//! `docs/results/data/` with the report's own rules: the verdict's cells (one policy on one
//! shape, the mean over its repeats with its 95 % interval), the capacity words and brackets,
//! the isolation and wall-time words, and the report's rounding (`svg::num`,
//! `verdict::ratio`). Each study folder is read by [`crate::study_report::assemble`],
//! as its `report.html` is, so the page and the report cannot disagree.
//!
//! The page leads with the like-for-like studies (`frontier`: each on one card in one run,
//! every ratio over that card's own solos with its interval) and their decision table
//! (`decision`, a stand-in for the analysis crate's), and folds every earlier round (`rounds`,
//! `llm`) into one archive.
//!
//! The words around the figures are a template ([`TEMPLATE`], `results.md.tmpl` beside this
//! file) with `{{name}}` placeholders; [`check_template`] refuses a template that types a
//! figure itself.

mod decision;
mod frontier;
mod llm;
mod repeats;
mod rounds;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use coload_cohort_schema::study::Index;
use coload_cohort_schema::{CohortSummary, Comparison, Workload};
use serde::de::DeserializeOwned;

use crate::study_report::{About, Assembled, assemble};
use crate::verdict::{Cell, Verdict, verdict};

/// The words of the page, with a `{{name}}` wherever a figure goes.
pub const TEMPLATE: &str = include_str!("results.md.tmpl");

/// Why the page could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    /// A file of the data is missing or does not read as its type.
    #[error("{path}: {message}")]
    Data {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// The template types figures by hand (one line per figure, naming its line).
    #[error("{}", .0.join("\n"))]
    TypedFigures(Vec<String>),
    /// The template names a figure the renderer does not compute.
    #[error("the template names figures the renderer does not compute: {}", .0.join(", "))]
    Unknown(Vec<String>),
}

impl PageError {
    fn data(path: &Path, message: impl std::fmt::Display) -> Self {
        PageError::Data {
            path: path.to_owned(),
            message: message.to_string(),
        }
    }
}

/// Reads one JSON document of a known type.
fn read<T: DeserializeOwned>(path: &Path) -> Result<T, PageError> {
    coload_cohort_schema::read_document(path).map_err(|e| PageError::data(path, e))
}

/// Reads one JSON document of no schema type (a tool's output: `overhead.json`, a PyTorch
/// reference run).
fn read_value(path: &Path) -> Result<serde_json::Value, PageError> {
    let text = std::fs::read_to_string(path).map_err(|e| PageError::data(path, e))?;
    serde_json::from_str(&text).map_err(|e| PageError::data(path, e))
}

/// The page rendered from `data` (the folder holding each round's data) and [`TEMPLATE`].
pub fn render(data: &Path) -> Result<String, PageError> {
    render_with(TEMPLATE, data)
}

/// The page rendered from `data` and a `template` of one's own.
pub fn render_with(template: &str, data: &Path) -> Result<String, PageError> {
    let problems = check_template(template);
    if !problems.is_empty() {
        return Err(PageError::TypedFigures(problems));
    }
    let values = figures(data)?;
    fill(template, &values)
}

/// Every `{{name}}` of `template` replaced by its value.
fn fill(template: &str, values: &BTreeMap<&str, String>) -> Result<String, PageError> {
    let mut out = String::with_capacity(template.len() * 2);
    let mut unknown = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            out.push_str(&rest[start..]);
            rest = "";
            break;
        };
        let name = &after[..end];
        match values.get(name) {
            Some(v) => out.push_str(v),
            None => unknown.push(name.to_owned()),
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    if unknown.is_empty() {
        Ok(out)
    } else {
        unknown.sort();
        unknown.dedup();
        Err(PageError::Unknown(unknown))
    }
}

/// A figure typed into the template instead of computed: a decimal, a thousands group, or a
/// number with a unit or a multiplier. Names such as ResNet18, H200, p99 or fp32 are not
/// figures, nor is anything in code (`` `...` ``), a link target, an indented or fenced line,
/// or "95 %", the confidence level of every interval (a method, not a result).
#[must_use]
pub fn check_template(template: &str) -> Vec<String> {
    static FIGURE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"(?:^|[^\w.-])(\d+\.\d+|\d{1,3}(?:,\d{3})+|\d+\s?(?:x|×|%|ms|s|GiB|MiB|W|J|samples/s|requests/s)(?:$|[^\w]))",
        )
        .expect("a valid pattern")
    });
    static CODE: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"`[^`]*`").expect("a valid pattern"));
    static LINK: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"\]\([^)]*\)").expect("a valid pattern"));
    static PLACEHOLDER: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"\{\{[a-z0-9_]+\}\}").expect("a valid pattern")
    });
    let mut problems = Vec::new();
    for (n, line) in template.lines().enumerate() {
        if line.starts_with("    ") || line.starts_with("```") {
            continue;
        }
        let bare = PLACEHOLDER.replace_all(line, "");
        let bare = CODE.replace_all(&bare, "");
        let bare = LINK.replace_all(&bare, "]");
        let bare = bare.replace("95 %", "");
        for m in FIGURE.captures_iter(&bare) {
            let figure = m[1].trim_end_matches(|c: char| !c.is_alphanumeric() && c != '%');
            problems.push(format!(
                "template line {}: `{figure}` is a figure typed by hand; compute it",
                n + 1
            ));
        }
    }
    problems
}

/// A study folder as its report reads it, with the verdict's cells.
pub(crate) struct Study {
    pub(crate) path: PathBuf,
    pub(crate) index: Index,
    pub(crate) assembled: Assembled,
    pub(crate) verdict: Verdict,
}

impl Study {
    pub(crate) fn open(path: &Path) -> Result<Self, PageError> {
        let index: Index = read(&path.join("index.json"))?;
        let about = About {
            title: format!("coload study: {}", index.plan),
            description: String::new(),
            node: index.node.clone(),
        };
        let assembled = assemble(path, &about, &index).map_err(|warnings| {
            PageError::data(
                path,
                format!("nothing to compare ({})", warnings.join("; ")),
            )
        })?;
        let verdict = verdict(&assembled.comparison, &assembled.context);
        Ok(Study {
            path: path.to_owned(),
            index,
            assembled,
            verdict,
        })
    }

    pub(crate) fn comparison(&self) -> &Comparison {
        &self.assembled.comparison
    }

    /// The verdict's cell of `policy` on the shape `mix` (workers per workload), group `group`.
    pub(crate) fn cell(
        &self,
        mix: &[(Workload, u32)],
        group: Workload,
        policy: &str,
    ) -> Option<&Cell> {
        let mix: BTreeMap<Workload, u32> = mix.iter().copied().collect();
        self.verdict.cells.iter().find(|c| {
            c.shape.mix == mix
                && c.shape.group == group
                && self.verdict.policies[c.policy].label == policy
        })
    }

    /// The solo baseline's samples/s and p99 ms of `workload`.
    pub(crate) fn solo(&self, workload: Workload) -> Option<(f64, f64)> {
        self.verdict.solo.get(&workload).copied()
    }

    /// Every complete cohort's `summary.json`, and with `probes` its capacity probes' too.
    pub(crate) fn summaries(&self, probes: bool) -> Result<Vec<CohortSummary>, PageError> {
        let mut out = Vec::new();
        for e in self
            .index
            .cohorts
            .iter()
            .filter(|e| e.outcome.has_summary())
        {
            let dir = self.path.join("cohorts").join(&e.name);
            let path = dir.join("summary.json");
            if path.is_file() {
                out.push(read(&path)?);
            }
            if probes {
                for p in sorted_glob(&dir, "probe-", "summary.json") {
                    out.push(read(&p)?);
                }
            }
        }
        Ok(out)
    }

    /// A provenance line of the study's report (`workload`, `protocol`).
    pub(crate) fn provenance(&self, what: &str) -> String {
        self.assembled
            .context
            .provenance
            .iter()
            .find(|(w, _)| w == what)
            .map_or_else(|| "-".to_owned(), |(_, v)| v.clone())
    }
}

/// `dir/<prefix>*/<file>`, sorted by folder name.
pub(crate) fn sorted_glob(dir: &Path, prefix: &str, file: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .map(|e| e.path().join(file))
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    found
}

/// A pipe table of the page.
pub(crate) fn table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut t = crate::document::Table::new(header);
    for r in rows {
        t.row(r);
    }
    crate::markdown::table(&t).trim_end().to_owned()
}

/// `**text**` where `yes`.
pub(crate) fn bold_if(text: String, yes: bool) -> String {
    if yes { format!("**{text}**") } else { text }
}

/// The UTC day (or first and last days) of the summaries' common intervals: `2026-12-01`.
pub(crate) fn day(summaries: &[CohortSummary]) -> String {
    let days: std::collections::BTreeSet<String> = summaries
        .iter()
        .map(|s| crate::provenance::utc_day(s.common_interval.start_unix_ns))
        .collect();
    match (days.first(), days.last()) {
        (Some(a), Some(b)) if a == b => a.clone(),
        (Some(a), Some(b)) => format!("{a} to {b}"),
        _ => "-".to_owned(),
    }
}

/// The span of the summaries' common intervals: `2026-12-01 00:45 to 00:58 UTC`.
pub(crate) fn dates(summaries: &[CohortSummary]) -> String {
    let start = summaries
        .iter()
        .map(|s| s.common_interval.start_unix_ns)
        .min();
    let end = summaries
        .iter()
        .map(|s| s.common_interval.end_unix_ns)
        .max();
    match (start, end) {
        (Some(a), Some(b)) => crate::utc_span(a, b),
        _ => "-".to_owned(),
    }
}

/// Where `committed` and `rendered` first differ, in words naming the line and both texts;
/// `None` when they are the same.
#[must_use]
pub fn first_difference(committed: &str, rendered: &str) -> Option<String> {
    if committed == rendered {
        return None;
    }
    let a: Vec<&str> = committed.lines().collect();
    let b: Vec<&str> = rendered.lines().collect();
    let n = a
        .iter()
        .zip(&b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()));
    let line = |v: &[&str]| {
        v.get(n)
            .map_or_else(|| "(no line: the end)".to_owned(), |l| (*l).to_owned())
    };
    Some(format!(
        "line {}:\n- committed: {}\n+ from the data: {}",
        n + 1,
        line(&a),
        line(&b)
    ))
}

/// Every figure of the page, by its placeholder's name.
fn figures(data: &Path) -> Result<BTreeMap<&'static str, String>, PageError> {
    let mut values = BTreeMap::new();
    rounds::figures(data, &mut values)?;
    llm::figures(data, &mut values)?;
    frontier::figures(data, &mut values)?;
    repeats::figures(data, &mut values)?;
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typed_figure_is_named_with_its_line() {
        let problems = check_template("ok {{x}} and `1.5 ms` in code\nthe rate is 3,857 today\n");
        assert_eq!(
            problems,
            vec!["template line 2: `3,857` is a figure typed by hand; compute it".to_owned()]
        );
        assert!(check_template("ResNet18 on an H200 at p99, 95 % CI\n").is_empty());
        assert_eq!(check_template("took 12 ms\n").len(), 1);
    }

    #[test]
    fn every_placeholder_must_be_known() {
        let values = BTreeMap::from([("a", "1".to_owned())]);
        assert_eq!(fill("x {{a}} y", &values).unwrap(), "x 1 y");
        let err = fill("{{a}} {{b}}", &values).unwrap_err();
        assert!(err.to_string().contains(": b"), "{err}");
    }
}
