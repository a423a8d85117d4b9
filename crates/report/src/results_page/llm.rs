//! The LLM rounds: decode alone and under an MPS share against plain PyTorch (a folder of
//! cohorts per configuration), and the `llm` study, shown with its report's own tables.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use coload_cohort_schema::study::{Index, Outcome};
use coload_cohort_schema::{CohortSummary, DecodeSummary, LatencyMs};

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

/// A PyTorch reference run beside coload's eager decode of the same preset and batch.
struct Pair {
    model: &'static str,
    batch: u32,
    ours: DecodeSummary,
    reference: serde_json::Value,
    folder: PathBuf,
}

/// Every preset and batch with both: the reference from the newest `*-llm-pytorch` folder of
/// the data that has it (a rerun), else from the decode round's own `pytorch/`.
fn pytorch_pairs(root: &Path) -> Result<Vec<Pair>, PageError> {
    let data = root.parent().unwrap_or(root);
    let mut reruns: Vec<PathBuf> = std::fs::read_dir(data)
        .map_err(|e| PageError::data(data, e))?
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with("-llm-pytorch"))
        .map(|e| e.path())
        .collect();
    reruns.sort();
    reruns.reverse();
    reruns.push(root.to_owned());
    let mut out = Vec::new();
    for model in PRESETS {
        for batch in BATCHES {
            let Some((_, ours)) =
                decode_of(&root.join("solo").join(format!("{model}-b{batch}-eager")))?
            else {
                continue;
            };
            let found = reruns.iter().find_map(|folder| {
                let path = folder
                    .join("pytorch")
                    .join(format!("{model}-b{batch}.json"));
                let size = std::fs::metadata(&path).map_or(0, |m| m.len());
                (size > 0).then(|| (folder.clone(), path))
            });
            if let Some((folder, path)) = found {
                out.push(Pair {
                    model,
                    batch,
                    ours,
                    reference: read_value(&path)?,
                    folder,
                });
            }
        }
    }
    Ok(out)
}

fn warmed_a_cycle(reference: &serde_json::Value) -> bool {
    match (
        reference["warmup_iterations"].as_f64(),
        reference["output_tokens"].as_f64(),
    ) {
        (Some(warm), Some(out)) => warm >= out,
        _ => false,
    }
}

fn pytorch_table(pairs: &[Pair]) -> String {
    let rows = pairs
        .iter()
        .map(|p| {
            let r = &p.reference;
            let theirs = r["tokens_per_s"].as_f64();
            vec![
                p.model.to_owned(),
                p.batch.to_string(),
                num(p.ours.tokens_per_s),
                ms(theirs),
                format!("{}x", div(Some(p.ours.tokens_per_s), theirs)),
                format!("{} / {}", ms(p50(&p.ours)), ms(p99(&p.ours))),
                format!(
                    "{} / {}",
                    ms(r["tpot_p50_ms"].as_f64()),
                    ms(r["tpot_p99_ms"].as_f64())
                ),
                if warmed_a_cycle(r) {
                    "yes".to_owned()
                } else {
                    "no (its first cycle is in the window)".to_owned()
                },
            ]
        })
        .collect();
    table(
        &[
            "preset",
            "batch",
            "coload eager tokens/s",
            "PyTorch eager tokens/s",
            "coload ÷ PyTorch",
            "coload TPOT p50 / p99 ms",
            "PyTorch TPOT p50 / p99 ms",
            "PyTorch warmed a whole cycle",
        ],
        rows,
    )
}

/// What the side-by-side says: where the references come from, whether they warmed a whole
/// cycle, and the range of coload's tokens/s against PyTorch's.
fn pytorch_words(pairs: &[Pair]) -> String {
    if pairs.is_empty() {
        return "No PyTorch reference run is in the data yet.".to_owned();
    }
    let folders: std::collections::BTreeSet<String> = pairs
        .iter()
        .map(|p| {
            let name = p
                .folder
                .file_name()
                .map(|n| n.to_string_lossy().into_owned());
            format!("`docs/results/data/{}/pytorch/`", name.unwrap_or_default())
        })
        .collect();
    let cold = pairs
        .iter()
        .filter(|p| !warmed_a_cycle(&p.reference))
        .count();
    let ratios: Vec<f64> = pairs
        .iter()
        .filter_map(|p| {
            p.reference["tokens_per_s"]
                .as_f64()
                .map(|t| p.ours.tokens_per_s / t)
        })
        .collect();
    let mut text = format!(
        "The references: {}. ",
        folders.into_iter().collect::<Vec<_>>().join(", ")
    );
    if cold > 0 {
        let _ = write!(
            text,
            "Not yet a fair comparison of throughput: {cold} of {} PyTorch runs warmed fewer \
             iterations than one cycle, so their window holds the first steps at each new KV \
             length; their tokens/s include those steps, and the p50 columns compare like with \
             like. `scripts/gpu/pytorch-decode.sh` runs them again with two whole cycles of \
             warmup (the script's default).",
            pairs.len()
        );
    } else {
        let lo = ratios.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let _ = write!(
            text,
            "Every PyTorch run warmed at least a whole cycle before its window: coload's eager \
             worker makes {}x to {}x PyTorch eager's tokens/s ({}).",
            ratio(lo),
            ratio(hi),
            if lo >= 1.0 {
                "no slower at any batch"
            } else {
                "slower at some batch"
            }
        );
    }
    let missing: Vec<&str> = PRESETS
        .into_iter()
        .filter(|m| !pairs.iter().any(|p| p.model == *m))
        .collect();
    if !missing.is_empty() {
        let _ = write!(text, " Not run yet: {}.", missing.join(", "));
    }
    text
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
    let pairs = pytorch_pairs(&root)?;
    values.extend([
        ("llm_day", day(&summaries)),
        ("llm_protocol", protocol(&root)?),
        ("llm_solo_table", solo_table(&root)?),
        ("llm_share_table", share_table(&share)),
        ("llm_share_verdict", share_verdict(&share)),
        ("llm_pytorch_table", pytorch_table(&pairs)),
        ("llm_pytorch_words", pytorch_words(&pairs)),
        ("llm_study", llm_study(data)?),
    ]);
    Ok(())
}
