//! The LLM rounds: decode alone and under an MPS share against plain PyTorch (a folder of
//! cohorts per configuration), and the `llm` study, shown with its report's own tables.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use coload_analysis::ratio::{ALONE_TOLERANCE, RatioWords, ratio_of_means, ratio_words};
use coload_cohort_schema::study::{Index, Outcome};
use coload_cohort_schema::{CohortSummary, DecodeSummary, LatencyMs, RatioInterval};

use super::frontier::ratio_ci;
use super::{PageError, Study, day, read, read_value, sorted_glob, table};
use crate::number;
use crate::svg::num;
use crate::verdict::ratio;

const LLM: &str = "2026-12-01-llm";
const PRESETS: [&str; 2] = ["gpt2-small", "tinyllama-1.1b"];
const BATCHES: [u32; 3] = [1, 8, 32];
/// The plan whose newest study folder the `llm` section shows.
const LLM_PLAN: &str = "llm";

/// A decode cohort folder's summary and its decode worker's figures, where it has both.
fn decode_of(folder: &Path) -> Result<Option<(CohortSummary, DecodeSummary)>, PageError> {
    let path = folder.join("summary.json");
    if !path.is_file() {
        return Ok(None);
    }
    let s: CohortSummary = read(&path)?;
    let d = s.workers.iter().find_map(|w| w.decode.clone());
    Ok(d.map(|d| (s, d)))
}

fn pick(l: Option<&LatencyMs>, f: fn(&LatencyMs) -> f64) -> Option<f64> {
    l.map(f)
}

fn ms(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), num)
}

fn p50(d: &DecodeSummary) -> Option<f64> {
    pick(d.tpot_ms.as_ref(), |l| l.p50)
}

fn p99(d: &DecodeSummary) -> Option<f64> {
    pick(d.tpot_ms.as_ref(), |l| l.p99)
}

fn prefill50(d: &DecodeSummary) -> Option<f64> {
    pick(d.prefill_ms.as_ref(), |l| l.p50)
}

fn div(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => ratio(a / b),
        _ => "-".to_owned(),
    }
}

fn solo_table(root: &Path) -> Result<String, PageError> {
    let mut rows = Vec::new();
    for model in PRESETS {
        for b in BATCHES {
            let eager = decode_of(&root.join("solo").join(format!("{model}-b{b}-eager")))?;
            let graph = decode_of(&root.join("solo").join(format!("{model}-b{b}-cuda-graph")))?;
            let (Some((_, e)), Some((_, g))) = (eager, graph) else {
                continue;
            };
            rows.push(vec![
                model.to_owned(),
                b.to_string(),
                num(e.tokens_per_s),
                num(g.tokens_per_s),
                ratio(g.tokens_per_s / e.tokens_per_s),
                format!("{} / {}", ms(p50(&e)), ms(p99(&e))),
                format!("{} / {}", ms(p50(&g)), ms(p99(&g))),
                ms(prefill50(&g)),
            ]);
        }
    }
    Ok(table(
        &[
            "preset",
            "batch",
            "tokens/s eager",
            "tokens/s CUDA graph",
            "graph ÷ eager",
            "TPOT p50 / p99 ms, eager",
            "TPOT p50 / p99 ms, graph",
            "prefill p50 ms",
        ],
        rows,
    ))
}

/// (model, execution, alone, under the MPS share) at batch 8.
fn share_rows(
    root: &Path,
) -> Result<Vec<(&'static str, &'static str, DecodeSummary, DecodeSummary)>, PageError> {
    let mut out = Vec::new();
    for model in PRESETS {
        for execution in ["cuda-graph", "eager"] {
            let name = format!("{model}-b8-{execution}");
            let alone = decode_of(&root.join("solo").join(&name))?;
            let shared = decode_of(&root.join("mps").join(&name))?;
            if let (Some((_, a)), Some((_, s))) = (alone, shared) {
                out.push((model, execution, a, s));
            }
        }
    }
    Ok(out)
}

fn share_table(rows: &[(&str, &str, DecodeSummary, DecodeSummary)]) -> String {
    let rows = rows
        .iter()
        .map(|(model, execution, a, s)| {
            vec![
                (*model).to_owned(),
                (*execution).to_owned(),
                format!("{} → {}", ms(p50(a)), ms(p50(s))),
                div(p50(s), p50(a)),
                format!("{} → {}", ms(prefill50(a)), ms(prefill50(s))),
                div(prefill50(s), prefill50(a)),
            ]
        })
        .collect();
    table(
        &[
            "preset",
            "execution",
            "TPOT p50 ms, alone → MPS share",
            "TPOT × alone",
            "prefill p50 ms, alone → MPS share",
            "prefill × alone",
        ],
        rows,
    )
}

/// MuxServe's claim against the graph-captured runs: decode's slowdown against prefill's.
fn share_verdict(rows: &[(&str, &str, DecodeSummary, DecodeSummary)]) -> String {
    let parts: Vec<String> = rows
        .iter()
        .filter(|r| r.1 == "cuda-graph")
        .map(|(m, _, a, s)| {
            format!(
                "{m}: a decode step {}x as long, a prefill {}x",
                div(p50(s), p50(a)),
                div(prefill50(s), prefill50(a))
            )
        })
        .collect();
    if parts.is_empty() {
        "not measured".to_owned()
    } else {
        parts.join("; ")
    }
}

/// One preset, batch and execution of the newest same-run comparison against PyTorch
/// (`scripts/perf/decode-compare.sh`): both sides' tokens/s over the repeats of one device call.
struct SameRun {
    model: &'static str,
    batch: u32,
    execution: &'static str,
    folder: String,
    card: String,
    ours: Vec<f64>,
    theirs: Vec<f64>,
}

impl SameRun {
    fn ratio(&self) -> Option<RatioInterval> {
        ratio_of_means(&self.ours, &self.theirs)
    }
}

/// The card a comparison's folder names in its `card.csv` (nvidia-smi's first data row).
fn card_of(folder: &Path) -> Result<String, PageError> {
    let path = folder.join("card.csv");
    let text = std::fs::read_to_string(&path).map_err(|e| PageError::data(&path, e))?;
    text.lines()
        .nth(1)
        .and_then(|row| row.split(',').nth(1))
        .map(|uuid| coload_analysis::short_card(uuid.trim()).to_owned())
        .ok_or_else(|| PageError::data(&path, "names no card"))
}

/// Each side's tokens/s over the repeats of configuration `name` (`<model>-b<B>-<execution>`)
/// in one comparison's folder: coload's from each cohort's `summary.json`, PyTorch's from each
/// reference's JSON (an empty file is a run that did not finish).
fn same_run_sides(folder: &Path, name: &str) -> Result<(Vec<f64>, Vec<f64>), PageError> {
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for repeat in 1..=9 {
        let run = format!("{name}-r{repeat}");
        if let Some((_, d)) = decode_of(&folder.join("coload").join(&run))? {
            ours.push(d.tokens_per_s);
        }
        let path = folder.join("pytorch").join(format!("{run}.json"));
        if std::fs::metadata(&path).is_ok_and(|m| m.len() > 0) {
            let value = read_value(&path)?;
            let rate = value["tokens_per_s"]
                .as_f64()
                .ok_or_else(|| PageError::data(&path, "no tokens_per_s"))?;
            theirs.push(rate);
        }
    }
    Ok((ours, theirs))
}

/// Every preset, batch and execution of the newest comparison folder (`*-decode*` with both
/// sides' runs) that measured it: the two sides of each row ran in one device call on one card.
fn same_run_cells(data: &Path) -> Result<Vec<SameRun>, PageError> {
    let mut folders: Vec<PathBuf> = std::fs::read_dir(data)
        .map_err(|e| PageError::data(data, e))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().contains("-decode"))
                && p.join("coload").is_dir()
                && p.join("pytorch").is_dir()
        })
        .collect();
    // Folders are named `<date>-decode[-<time>-<what>]`: the newest sorts last.
    folders.sort();
    folders.reverse();
    let mut out = Vec::new();
    for model in PRESETS {
        for batch in BATCHES {
            for execution in ["graph", "eager"] {
                let name = format!("{model}-b{batch}-{execution}");
                for folder in &folders {
                    let (ours, theirs) = same_run_sides(folder, &name)?;
                    if ours.is_empty() || theirs.is_empty() {
                        continue;
                    }
                    out.push(SameRun {
                        model,
                        batch,
                        execution,
                        folder: folder
                            .file_name()
                            .map(|n| n.to_string_lossy().into_owned())
                            .unwrap_or_default(),
                        card: card_of(folder)?,
                        ours,
                        theirs,
                    });
                    break;
                }
            }
        }
    }
    Ok(out)
}

/// The words a row's interval allows.
fn against_pytorch(r: Option<&RatioInterval>) -> &'static str {
    match r.map(|r| ratio_words(r, ALONE_TOLERANCE)) {
        Some(RatioWords::Above) => "faster than PyTorch",
        Some(RatioWords::Below) => "slower than PyTorch",
        Some(RatioWords::AsFastAs) => "as fast as PyTorch",
        Some(RatioWords::NotSettled) | None => "not told apart",
    }
}

fn runs(n: usize) -> String {
    if n == 1 {
        "1 run".to_owned()
    } else {
        format!("{n} runs")
    }
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

fn pytorch_table(cells: &[SameRun]) -> String {
    let rows = cells
        .iter()
        .map(|c| {
            let r = c.ratio();
            vec![
                c.model.to_owned(),
                c.batch.to_string(),
                c.execution.to_owned(),
                format!("{} ({})", num(mean(&c.ours)), runs(c.ours.len())),
                format!("{} ({})", num(mean(&c.theirs)), runs(c.theirs.len())),
                ratio_ci(r.as_ref()),
                against_pytorch(r.as_ref()).to_owned(),
                format!("`{}/` ({})", c.folder, c.card),
            ]
        })
        .collect();
    table(
        &[
            "preset",
            "batch",
            "execution",
            "coload tokens/s (mean)",
            "PyTorch tokens/s (mean)",
            "coload ÷ PyTorch [95 %]",
            "in words",
            "data (card)",
        ],
        rows,
    )
}

/// Presets in row order, each with its batches.
type PresetBatches = Vec<(&'static str, Vec<String>)>;

/// `1`, `1 and 8`, `1, 8 and 32`.
fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// What the same-run rows say, per execution: the words each row's interval allows, the presets
/// and batches under each (`at every preset and batch` where one set of words holds them all).
fn pytorch_words(cells: &[SameRun]) -> String {
    if cells.is_empty() {
        return "No same-run comparison against PyTorch is in the data yet.".to_owned();
    }
    let mut parts = Vec::new();
    for (execution, label) in [("graph", "Graph-captured"), ("eager", "Eager")] {
        let rows: Vec<&SameRun> = cells.iter().filter(|c| c.execution == execution).collect();
        if rows.is_empty() {
            continue;
        }
        // Words in the order they first appear, each with its presets' batches in row order.
        let mut by_words: Vec<(&'static str, PresetBatches)> = Vec::new();
        for c in &rows {
            let words = against_pytorch(c.ratio().as_ref());
            let at = if let Some(i) = by_words.iter().position(|(w, _)| *w == words) {
                i
            } else {
                by_words.push((words, Vec::new()));
                by_words.len() - 1
            };
            let models = &mut by_words[at].1;
            match models.iter_mut().find(|(m, _)| *m == c.model) {
                Some((_, batches)) => batches.push(c.batch.to_string()),
                None => models.push((c.model, vec![c.batch.to_string()])),
            }
        }
        let said = if let [(words, _)] = by_words.as_slice() {
            format!(
                "{words} at every preset and batch measured ({} rows)",
                rows.len()
            )
        } else {
            by_words
                .iter()
                .map(|(words, models)| {
                    let at: Vec<String> = models
                        .iter()
                        .map(|(m, b)| format!("{m} at batch {}", and_list(b)))
                        .collect();
                    format!("{words}, {}", and_list(&at))
                })
                .collect::<Vec<_>>()
                .join("; ")
        };
        parts.push(format!("{label} decode: {said}."));
    }
    parts.join(" ")
}

fn protocol(root: &Path) -> Result<String, PageError> {
    let Some(first) = sorted_glob(&root.join("solo"), "", "summary.json")
        .into_iter()
        .next()
    else {
        return Ok("-".to_owned());
    };
    let s: CohortSummary = read(&first)?;
    let c = &s.config;
    Ok(match &c.llm {
        Some(llm) => format!(
            "prompt {} tokens, {} generated per cycle, {}, {} warmup iterations, {} s windows, \
             one cohort per configuration",
            llm.prompt_tokens,
            llm.output_tokens,
            llm.precision,
            c.warmup_batches,
            number(c.window_s)
        ),
        None => "-".to_owned(),
    })
}

/// The newest study folder of the `llm` plan under `data` (`<round>/<study>/index.json`, newest
/// by the round's folder name, which starts with its date).
fn find_llm_study(data: &Path) -> Result<Option<PathBuf>, PageError> {
    let mut found = Vec::new();
    let mut rounds: Vec<PathBuf> = std::fs::read_dir(data)
        .map_err(|e| PageError::data(data, e))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    rounds.sort();
    for round in rounds {
        for index in sorted_glob(&round, "", "index.json") {
            let i: Index = read(&index)?;
            if i.plan == LLM_PLAN {
                found.push(index.parent().map(Path::to_owned).unwrap_or_default());
            }
        }
    }
    Ok(found.pop())
}

/// The `llm` study's section: where and how far it ran, its report's verdict, its figures by
/// shape and policy, its capacity searches and its fixed-rate endpoints.
#[expect(
    clippy::too_many_lines,
    reason = "the section in reading order: status, verdict, figures, searches, endpoints"
)]
fn llm_study(data: &Path) -> Result<String, PageError> {
    let Some(path) = find_llm_study(data)? else {
        return Ok(format!(
            "The `{LLM_PLAN}` study has not been run on the H200 yet: there is no study folder \
             of plan `{LLM_PLAN}` under `docs/results/data/`."
        ));
    };
    let study = Study::open(&path)?;
    let rel = path.strip_prefix(data).unwrap_or(&path);
    let where_ = format!("docs/results/data/{}", rel.to_string_lossy());
    let offered: Vec<_> = study
        .index
        .cohorts
        .iter()
        .filter(|e| e.outcome != Outcome::NotOffered)
        .collect();
    let complete = offered.iter().filter(|e| e.outcome.has_summary()).count();
    let failed: Vec<&str> = offered
        .iter()
        .filter(|e| matches!(e.outcome, Outcome::Failed | Outcome::FailedEarlier))
        .map(|e| e.name.as_str())
        .collect();
    let mut status = format!(
        "`bench-cohort study {LLM_PLAN}` ran {} (folder `{where_}/`, its report \
         `{where_}/report/report.html`; node: {}): {complete} of {} offered cohorts complete",
        day(&study.summaries(true)?),
        study.index.node,
        offered.len()
    );
    if !failed.is_empty() {
        let _ = write!(status, ", {} failed ({})", failed.len(), failed.join(", "));
    }
    let rest = offered.len() - complete - failed.len();
    if rest > 0 {
        let _ = write!(status, ", {rest} not run yet");
    }
    status.push('.');
    let mut out = vec![status];
    let findings: Vec<String> = study
        .verdict
        .sentences
        .iter()
        .map(|(lead, text)| format!("- **{lead}** {text}"))
        .collect();
    if !findings.is_empty() {
        out.push(format!(
            "The study's verdict, as its report words it:\n\n{}",
            findings.join("\n")
        ));
    }
    let md = |t: &crate::document::Table| crate::markdown::table(t).trim_end().to_owned();
    out.push(format!(
        "### By shape and policy\n\nEach policy on each shape, the mean over its repeats \
         (decode workers: tokens per second as samples/s, a decode step's time as the latency; \
         an LLM endpoint beside trainers: its requests):\n\n{}",
        md(&crate::comparison::verdict_table(&study.verdict))
    ));
    let ctx = &study.assembled.context;
    if !ctx.capacity.is_empty() {
        out.push(format!(
            "### The endpoint's capacity, alone and beside trainers\n\nEvery capacity search \
             of the study, with each probe's TTFT and TPOT at the objective's quantile (a \
             probe passes when the endpoint meets both and is not overloaded; `-` where a \
             figure falls on a request that got no first token):\n\n{}",
            md(&crate::comparison::capacity_table(&ctx.capacity))
        ));
    }
    let fixed: Vec<crate::LlmServeRow> = ctx
        .llm_serve
        .iter()
        .filter(|r| r.capacity.is_none())
        .cloned()
        .collect();
    let failures: Vec<String> = study
        .index
        .cohorts
        .iter()
        .filter(|e| matches!(e.outcome, Outcome::Failed | Outcome::FailedEarlier))
        .map(|e| {
            // The reason's first sentence: the worker's own error follows, in failure.json.
            let reason = e.reason.as_deref().unwrap_or("no reason recorded");
            let first = reason.lines().next().unwrap_or(reason);
            let first = first.split_once(". ").map_or(first, |(head, _)| head);
            format!("- `{}` failed: {first}", e.name)
        })
        .collect();
    if !fixed.is_empty() || !failures.is_empty() {
        let mut text = "### Endpoints at a fixed rate\n\nThe endpoint at a fixed rate with room \
                        for more sequences than in the capacity searches (`max_batch`), beside \
                        the same workers: its KV cache is allocated whole before the window, so \
                        it fits beside them under the policy's memory limit, or the cohort fails."
            .to_owned();
        if !fixed.is_empty() {
            let _ = write!(
                text,
                "\n\n{}",
                md(&crate::serve_llm::llm_serve_table(&fixed))
            );
        }
        if !failures.is_empty() {
            let _ = write!(text, "\n\n{}", failures.join("\n"));
        }
        out.push(text);
    }
    Ok(out.join("\n\n"))
}

/// The figures of the LLM rounds.
pub(crate) fn figures(
    data: &Path,
    values: &mut BTreeMap<&'static str, String>,
) -> Result<(), PageError> {
    let root = data.join(LLM);
    let summaries: Vec<CohortSummary> = ["solo", "mps"]
        .iter()
        .flat_map(|d| sorted_glob(&root.join(d), "", "summary.json"))
        .map(|p| read(&p))
        .collect::<Result<_, _>>()?;
    let share = share_rows(&root)?;
    let same_run = same_run_cells(data)?;
    values.extend([
        ("llm_day", day(&summaries)),
        ("llm_protocol", protocol(&root)?),
        ("llm_solo_table", solo_table(&root)?),
        ("llm_share_table", share_table(&share)),
        ("llm_share_verdict", share_verdict(&share)),
        ("llm_pytorch_table", pytorch_table(&same_run)),
        ("llm_pytorch_words", pytorch_words(&same_run)),
        ("llm_study", llm_study(data)?),
    ]);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/results/data")
    }

    #[test]
    fn each_row_against_pytorch_is_the_newest_run_that_measured_it_both_sides_from_one_folder() {
        let cells = same_run_cells(&data()).unwrap();
        // Every preset, batch and execution once.
        assert_eq!(cells.len(), PRESETS.len() * BATCHES.len() * 2);
        for c in &cells {
            let folder = data().join(&c.folder);
            // The newest folder holding both sides of the row: no later folder measured it.
            let later: Vec<String> = std::fs::read_dir(data())
                .unwrap()
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains("-decode") && n.as_str() > c.folder.as_str())
                .collect();
            let name = format!("{}-b{}-{}", c.model, c.batch, c.execution);
            for l in later {
                let (o, t) = same_run_sides(&data().join(&l), &name).unwrap();
                assert!(
                    o.is_empty() || t.is_empty(),
                    "{name}: {l} is newer than {}",
                    c.folder
                );
            }
            // Both sides' values are that folder's, and its card the one it names.
            assert_eq!(
                same_run_sides(&folder, &name).unwrap(),
                (c.ours.clone(), c.theirs.clone())
            );
            assert_eq!(c.card, card_of(&folder).unwrap());
        }
        let gpt2 = cells
            .iter()
            .find(|c| c.model == "gpt2-small" && c.batch == 8 && c.execution == "graph")
            .unwrap();
        assert_eq!(gpt2.folder, "2026-12-02-decode-1928-gpt2");
        assert_eq!((gpt2.ours.len(), gpt2.theirs.len()), (3, 3));
    }

    #[test]
    fn the_words_follow_each_rows_interval() {
        let cell = |ours: Vec<f64>, theirs: Vec<f64>| SameRun {
            model: "gpt2-small",
            batch: 8,
            execution: "graph",
            folder: "f".into(),
            card: "GPU-x".into(),
            ours,
            theirs,
        };
        let faster = cell(vec![110.0, 111.0, 109.0], vec![100.0, 101.0, 99.0]);
        let tied = cell(vec![130.0, 90.0], vec![100.0, 101.0]);
        assert_eq!(
            against_pytorch(faster.ratio().as_ref()),
            "faster than PyTorch"
        );
        assert_eq!(against_pytorch(tied.ratio().as_ref()), "not told apart");
        let words = pytorch_words(&[faster, tied]);
        assert_eq!(
            words,
            "Graph-captured decode: faster than PyTorch, gpt2-small at batch 8; not told apart, \
             gpt2-small at batch 8."
        );
    }
}
