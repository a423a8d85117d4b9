//! The report of a study, assembled from its folder: the complete cohorts compared against
//! the solo baselines, the capacity searches' load curves, the hog cohorts' memory isolation,
//! and every cohort's outcome (`coload_cohort_schema::study::Index`).
//!
//! `coload-study` calls [`write`](fn@write) at the end of every run; another tool can call it on any
//! study folder, as the report needs only what the folder holds.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use coload_analysis::{AnalysisError, plural};
use coload_cohort_schema::CohortSummary;
use coload_cohort_schema::study::{Entry, Index, Outcome};

/// What the report says about the study as a whole.
#[derive(Debug, Clone)]
pub struct About {
    /// The page's title.
    pub title: String,
    /// What the plan is for, one line.
    pub description: String,
    /// The node, in words.
    pub node: String,
}

/// What [`write`](fn@write) did.
#[derive(Debug, Default)]
pub struct Written {
    /// The report folder, where one was written (none before any cohort completed).
    pub dir: Option<PathBuf>,
    /// Files that could not be read, and why (the report is written without them).
    pub warnings: Vec<String>,
}

/// The folders a cohort left: its own, then its failed runs, newest first.
fn cohort_dirs(out: &Path, e: &Entry) -> Vec<std::path::PathBuf> {
    let mut dirs = vec![out.join("cohorts").join(&e.name)];
    dirs.extend(e.failed_dirs.iter().rev().map(|d| out.join(d)));
    dirs
}

/// Memory isolation per policy: the `isolation.json` a hog cohort leaves, whether or
/// not the cohort completed (under time-slicing the trainers fail: that is the result).
fn isolation_rows(
    out: &Path,
    index: &Index,
    warnings: &mut Vec<String>,
) -> Vec<crate::IsolationRow> {
    use coload_cohort_schema::{IsolationOutcome, IsolationResult};
    let mut rows = Vec::new();
    for e in &index.cohorts {
        let found = cohort_dirs(out, e)
            .into_iter()
            .map(|d| d.join("isolation.json"))
            .find(|p| p.is_file());
        let Some(path) = found else { continue };
        match coload_cohort_schema::read_document::<IsolationResult>(&path) {
            Ok(r) => rows.push(crate::IsolationRow {
                policy: e.policy.clone(),
                mode: r.mode,
                isolated: r.outcome == IsolationOutcome::Contained,
                outcome: r.outcome.as_str().to_owned(),
                note: isolation_note(&r),
            }),
            Err(err) => warnings.push(format!("{}: {err}", path.display())),
        }
    }
    rows
}

/// The figures behind an isolation result, in a few words: `the hog took 139.3 GiB; 6 of 6
/// others ran out of memory` (`isolation.json` keeps the whole explanation). The study's index
/// gives a measured hog cohort the same words.
#[must_use]
pub fn isolation_note(r: &coload_cohort_schema::IsolationResult) -> String {
    use coload_cohort_schema::{FailureKind, Status, Workload};
    let held = r
        .workers
        .iter()
        .find_map(|w| w.hog.as_ref())
        .map(|h| h.granted_bytes as f64 / f64::from(1u32 << 30));
    let others: Vec<_> = r
        .workers
        .iter()
        .filter(|w| w.workload != Workload::Hog)
        .collect();
    let oom = others
        .iter()
        .filter(|w| w.kind == Some(FailureKind::OutOfMemory))
        .count();
    let complete = others
        .iter()
        .filter(|w| w.status == Status::Complete)
        .count();
    let hog = held.map_or_else(
        || "the hog held nothing".to_owned(),
        |g| format!("the hog got {g:.1} GiB"),
    );
    if oom > 0 {
        format!("{hog}; {oom} of {} others ran out of memory", others.len())
    } else {
        format!("{hog}; {complete} of {} others completed", others.len())
    }
}

/// Serving capacity per policy: the `capacity.json` a complete `find_capacity`
/// cohort leaves, with each probe's latency at the objective's quantile (the slowest serve
/// worker's: the verdict needs every one to meet it).
fn capacity_rows(out: &Path, index: &Index, warnings: &mut Vec<String>) -> Vec<crate::CapacityRow> {
    use coload_cohort_schema::CapacityReport;
    let mut rows = Vec::new();
    for e in index.cohorts.iter().filter(|e| e.outcome.has_summary()) {
        let dir = out.join("cohorts").join(&e.name);
        let path = dir.join(coload_cohort_schema::files::CAPACITY);
        if !path.is_file() {
            continue;
        }
        match coload_cohort_schema::read_document::<CapacityReport>(&path) {
            Ok(r) => rows.push(capacity_row(&dir, &e.name, &e.policy, &e.workers, &r)),
            Err(err) => warnings.push(format!("{}: {err}", path.display())),
        }
    }
    rows
}

/// One search as the report shows it, from its `capacity.json` (`r`) in `dir`.
pub(crate) fn capacity_row(
    dir: &Path,
    name: &str,
    policy: &str,
    workers: &str,
    r: &coload_cohort_schema::CapacityReport,
) -> crate::CapacityRow {
    crate::CapacityRow {
        name: name.to_owned(),
        policy: policy.to_owned(),
        mode: r.mode,
        objective: capacity_objective(r),
        slo_ms: r.slo_ms,
        quantile: r.quantile,
        capacity_per_s: r.capacity_per_s,
        failed_above_per_s: r.failed_above_per_s,
        stop: r.stop.to_string(),
        probes: r
            .probes
            .iter()
            .map(|p| capacity_point(dir, p, r.quantile))
            .collect(),
        note: workers.to_owned(),
    }
}

/// A search's objective in words: the serve workers' latency, or the `serve-llm` workers' TTFT
/// and TPOT, or both.
fn capacity_objective(r: &coload_cohort_schema::CapacityReport) -> String {
    let serve = r
        .workload_mix
        .contains_key(&coload_cohort_schema::Workload::Serve);
    match (r.ttft_slo_ms, r.tpot_slo_ms) {
        (Some(ttft), Some(tpot)) => {
            let llm = crate::llm_objective_words(ttft, tpot, r.quantile);
            if serve {
                format!("{} and {llm}", crate::objective_words(r.slo_ms, r.quantile))
            } else {
                llm
            }
        }
        _ => crate::objective_words(r.slo_ms, r.quantile),
    }
}

/// A cohort with `serve-llm` workers as a row of the LLM serving table: their mean
/// offered rate, the slowest one's TTFT and TPOT p99, their tokens/s and KV caches.
fn llm_serve_row(
    s: &CohortSummary,
    policy: &str,
    cohort: String,
    capacity: Option<String>,
) -> Option<crate::LlmServeRow> {
    let llm: Vec<&coload_cohort_schema::ServeLlmSummary> = s
        .workers
        .iter()
        .filter_map(|w| w.serve_llm.as_ref())
        .collect();
    if llm.is_empty() {
        return None;
    }
    let slowest = |pick: fn(&coload_cohort_schema::ServeLlmSummary) -> Option<f64>| {
        llm.iter()
            .map(|v| pick(v))
            .collect::<Option<Vec<f64>>>()
            .map(|v| v.into_iter().fold(0.0, f64::max))
    };
    let slos: Vec<&coload_cohort_schema::LlmSloAttainment> =
        llm.iter().filter_map(|v| v.slo.as_ref()).collect();
    let slo = slos.first().map(|first| {
        format!(
            "{:.1} % within {}{}",
            slos.iter().map(|a| a.attainment).fold(1.0, f64::min) * 100.0,
            crate::llm_objective_words(first.ttft_slo_ms, first.tpot_slo_ms, first.quantile),
            slo_outcome(&llm, &slos)
        )
    });
    Some(crate::LlmServeRow {
        policy: policy.to_owned(),
        mode: s.mode,
        cohort,
        offered_per_s: llm.iter().map(|v| v.offered_per_s).sum::<f64>() / llm.len() as f64,
        ttft_p99_ms: slowest(|v| v.ttft_ms.p99),
        tpot_p99_ms: slowest(|v| v.tpot_ms.p99),
        output_tokens_per_s: llm.iter().map(|v| v.output_tokens_per_s).sum(),
        slo,
        overloaded: llm.iter().any(|v| v.overloaded),
        kv_cache_bytes: llm.iter().map(|v| v.kv_cache_bytes).collect(),
        capacity,
    })
}

/// How a cohort's `serve-llm` workers came out against their objectives: ` (met)`; ` (within
/// at the quantile, but too few requests to show it: ...)` when every quantile was within its
/// objective and no worker was
/// overloaded but the early-stopping test needed more requests than the window held (a short
/// fixed-rate window: not a miss, and not a claim either); else ` (missed)`.
fn slo_outcome(
    llm: &[&coload_cohort_schema::ServeLlmSummary],
    slos: &[&coload_cohort_schema::LlmSloAttainment],
) -> String {
    if slos.len() != llm.len() {
        return " (missed)".to_owned();
    }
    if slos.iter().all(|a| a.meets) {
        return " (met)".to_owned();
    }
    let within = slos.iter().all(|a| a.ttft_met && a.tpot_met) && !llm.iter().any(|v| v.overloaded);
    if within {
        let held = llm.iter().map(|v| v.requests).min().unwrap_or(0);
        let needed = slos
            .iter()
            .filter_map(|a| a.early_stopping_requests_needed)
            .max();
        return match needed {
            Some(n) => format!(
                " (within at the quantile, but too few requests to show it: {held}, the \
                 early-stopping test needs {n})"
            ),
            None => " (within at the quantile, but too few requests to show it)".to_owned(),
        };
    }
    " (missed)".to_owned()
}

/// Every capacity probe with `serve-llm` workers as a row of the LLM serving table, with its
/// search's capacity (from the probe's own `summary.json`, in the search's folder).
fn llm_probe_rows(
    out: &Path,
    index: &Index,
    capacity: &[crate::CapacityRow],
) -> Vec<crate::LlmServeRow> {
    let mut rows = Vec::new();
    for r in capacity {
        let dir = out.join("cohorts").join(&r.name);
        let Some(e) = index.cohorts.iter().find(|e| e.name == r.name) else {
            continue;
        };
        let words = format!("{} requests/s at {}", r.capacity_words(), r.objective);
        for (k, p) in r.probes.iter().enumerate() {
            let name = format!("probe-{}-{}", k + 1, p.rate_per_s);
            let Ok(s) = coload_cohort_schema::read_document::<CohortSummary>(
                &dir.join(&name).join("summary.json"),
            ) else {
                continue;
            };
            rows.extend(llm_serve_row(
                &s,
                &e.policy,
                format!("{} {name}", r.name),
                Some(words.clone()),
            ));
        }
    }
    rows
}

/// One probe as the load curve shows it. `capacity.json` keeps each serve worker's p99; for
/// another quantile the probe's own `summary.json` (in the cohort's folder, under the probe
/// folder's name) is read.
fn capacity_point(
    dir: &Path,
    p: &coload_cohort_schema::CapacityProbe,
    quantile: f64,
) -> crate::CapacityPoint {
    let at_p99 = (quantile - 0.99).abs() < 1e-9;
    let latency_ms = if p.serve.is_empty() {
        None
    } else if at_p99 {
        p.serve
            .iter()
            .map(|w| w.p99_ms)
            .collect::<Option<Vec<f64>>>()
            .map(|v| v.into_iter().fold(0.0, f64::max))
    } else {
        Path::new(&p.dir)
            .file_name()
            .and_then(|name| {
                coload_cohort_schema::read_document::<CohortSummary>(
                    &dir.join(name).join("summary.json"),
                )
                .ok()
            })
            .and_then(|s| serve_latency(&s, quantile))
    };
    let slowest = |f: fn(&coload_cohort_schema::CapacityProbeLlmWorker) -> Option<f64>| {
        p.serve_llm
            .iter()
            .map(f)
            .collect::<Option<Vec<f64>>>()
            .map(|v| v.into_iter().fold(0.0, f64::max))
    };
    let llm_ms = if p.serve_llm.is_empty() {
        None
    } else {
        slowest(|w| w.ttft_ms).zip(slowest(|w| w.tpot_ms))
    };
    crate::CapacityPoint {
        rate_per_s: p.rate_per_s,
        latency_ms,
        passed: p.passed,
        llm_ms,
        overloaded: p.serve.iter().any(|w| w.overloaded)
            || p.serve_llm.iter().any(|w| w.overloaded),
    }
}

/// The slowest serve worker's request latency at `quantile`, where every serve worker has one.
fn serve_latency(s: &CohortSummary, quantile: f64) -> Option<f64> {
    let v: Option<Vec<f64>> = s
        .workers
        .iter()
        .filter_map(|w| w.serve.as_ref())
        .map(|v| coload_analysis::request_latency_at(&v.latency_ms, quantile))
        .collect();
    v.filter(|v| !v.is_empty())
        .map(|v| v.into_iter().fold(0.0, f64::max))
}

/// A complete fixed-rate serve cohort as a point of the load curve: the serve workers' mean
/// offered load and the slowest one's latency at each quantile the summary keeps.
fn serve_point(s: &CohortSummary, policy: &str) -> Option<crate::ServePoint> {
    let serve: Vec<&coload_cohort_schema::ServeSummary> =
        s.workers.iter().filter_map(|w| w.serve.as_ref()).collect();
    if serve.is_empty() {
        return None;
    }
    Some(crate::ServePoint {
        policy: policy.to_owned(),
        mode: s.mode,
        experiment: s.experiment.clone(),
        offered_per_s: serve.iter().map(|v| v.offered_per_s).sum::<f64>() / serve.len() as f64,
        latency_ms: [0.5, 0.9, 0.99, 0.999]
            .into_iter()
            .filter_map(|q| serve_latency(s, q).map(|ms| (q, ms)))
            .collect(),
        overloaded: serve.iter().any(|v| v.overloaded),
        slo: serve_slo(&serve),
    })
}

/// The objective a fixed-rate serve cohort was judged at, the lowest attainment among its
/// serve workers and whether every one met it; `None` without an objective.
fn serve_slo(serve: &[&coload_cohort_schema::ServeSummary]) -> Option<crate::ServeSlo> {
    let slos: Vec<&coload_cohort_schema::SloAttainment> =
        serve.iter().filter_map(|v| v.slo.as_ref()).collect();
    let first = slos.first()?;
    Some(crate::ServeSlo {
        objective: crate::objective_words(first.slo_ms, first.quantile),
        attainment: slos.iter().map(|s| s.attainment).fold(1.0, f64::min),
        meets: slos.len() == serve.len() && slos.iter().all(|s| s.meets),
    })
}

/// An outcome as people read it: `complete`, `complete (earlier run)`, `failed: replica 3 out
/// of memory: ...`, `not offered: ...`.
fn outcome_words(e: &Entry) -> String {
    let why = e.reason.as_deref().map(reason_words).unwrap_or_default();
    let with = |head: &str| {
        if why.is_empty() {
            head.to_owned()
        } else {
            format!("{head}: {why}")
        }
    };
    // A hog cohort whose others ran out of memory: the measurement, not a failure.
    let isolation = if e.isolation.is_some() {
        ": the others ran out of memory beside the hog (isolation not contained)"
    } else {
        ""
    };
    match e.outcome {
        Outcome::Complete => format!("complete{isolation}"),
        Outcome::AlreadyComplete => format!("complete (earlier run){isolation}"),
        Outcome::Failed => with("failed"),
        Outcome::FailedEarlier => with("failed (earlier run)"),
        Outcome::NotOffered => with("not offered"),
        Outcome::NotRun => "not run yet".to_owned(),
        Outcome::Interrupted => "interrupted (runs again next time)".to_owned(),
        Outcome::Settled => with("not needed"),
    }
}

/// A launcher's reason with its failure kind in words: `replica 3: out_of_memory: failed in
/// window` reads `replica 3 out of memory: failed in window`.
fn reason_words(reason: &str) -> String {
    let mut parts = reason.splitn(3, ": ");
    match (parts.next(), parts.next(), parts.next()) {
        (Some(who), Some(kind), rest)
            if who.starts_with("replica ")
                && !kind.is_empty()
                && kind.chars().all(|c| c.is_ascii_lowercase() || c == '_') =>
        {
            let head = format!("{who} {}", kind.replace('_', " "));
            rest.map_or(head.clone(), |r| format!("{head}: {r}"))
        }
        _ => reason.to_owned(),
    }
}

/// The workers' own records where the study folder kept them (`cohorts/<name>/worker-<i>/
/// worker.json`): the GPUs' names, driver and CUDA versions, MIG mode and hosts, which
/// `summary.json` does not carry. A folder of summaries alone gives none.
fn worker_records(out: &Path, index: &Index) -> Vec<coload_cohort_schema::WorkerReport> {
    let mut found = Vec::new();
    for e in index.cohorts.iter().filter(|e| e.outcome.has_summary()) {
        let Ok(dir) = std::fs::read_dir(out.join("cohorts").join(&e.name)) else {
            continue;
        };
        for d in dir.flatten() {
            let path = d.path().join("worker.json");
            if let Ok(w) =
                coload_cohort_schema::read_document::<coload_cohort_schema::WorkerReport>(&path)
            {
                found.push(w);
            }
        }
    }
    found
}

/// Every capacity search of the study with its probes' summaries, for the decision table
/// (`coload_analysis::frontier`).
fn searches(out: &Path, index: &Index) -> Vec<coload_analysis::frontier::Search> {
    let mut found = Vec::new();
    for e in index
        .cohorts
        .iter()
        .filter(|e| e.outcome.has_summary() && e.capacity.is_some())
    {
        let dir = out.join("cohorts").join(&e.name);
        // Unreadable files are already named among the warnings by `capacity_rows`.
        let Ok(report) = coload_cohort_schema::read_document::<coload_cohort_schema::CapacityReport>(
            &dir.join(coload_cohort_schema::files::CAPACITY),
        ) else {
            continue;
        };
        let probes = report
            .probes
            .iter()
            .filter_map(|p| {
                let name = Path::new(&p.dir).file_name()?;
                coload_cohort_schema::read_document::<CohortSummary>(
                    &dir.join(name).join("summary.json"),
                )
                .ok()
            })
            .collect();
        found.push(coload_analysis::frontier::Search {
            policy: e.policy.clone(),
            report,
            probes,
            run: e.run,
        });
    }
    found
}

/// The summaries of the capacity searches' probes (`cohorts/<name>/probe-*/summary.json`), for
/// the provenance (their dates, GPUs and configuration).
fn probe_summaries(out: &Path, index: &Index) -> Vec<CohortSummary> {
    let mut found = Vec::new();
    for e in index.cohorts.iter().filter(|e| e.capacity.is_some()) {
        let Ok(dir) = std::fs::read_dir(out.join("cohorts").join(&e.name)) else {
            continue;
        };
        for d in dir.flatten() {
            if d.file_name().to_string_lossy().starts_with("probe-")
                && let Ok(s) = coload_cohort_schema::read_document::<CohortSummary>(
                    &d.path().join("summary.json"),
                )
            {
                found.push(s);
            }
        }
    }
    found
}

/// Distinct values in first-seen order, joined with `; `.
fn distinct(values: impl IntoIterator<Item = String>) -> String {
    let mut seen: Vec<String> = Vec::new();
    for v in values {
        if !seen.contains(&v) {
            seen.push(v);
        }
    }
    seen.join("; ")
}

/// The provenance header: what ran, how, when, where and under which share, read from the
/// summaries (every compared cohort and every capacity probe) and, where kept, the workers'
/// records. Nothing here is typed by hand.
///
/// The workload row: a vision model's batch of images (`resnet18, batch 32 of 3x224x224, fp32,
/// eager`), an LLM's sequences and tokens (`gpt2-small, batch 8, prompt 512 + 128 generated
/// tokens, bf16, cuda-graph`), and both for a mix of the two.
fn workload_words(c: &coload_cohort_schema::WorkerConfig) -> String {
    // One execution per workload, where the cohort declared so: each its own.
    let execution = |w: Option<coload_cohort_schema::Workload>| match (&c.execution_by_workload, w)
    {
        (Some(m), Some(w)) => m
            .get(&w)
            .map_or_else(|| c.execution.to_string(), ToString::to_string),
        (Some(m), None) => {
            coload_cohort_schema::ExecutionDeclaration::PerWorkload(m.clone()).to_string()
        }
        (None, _) => c.execution.to_string(),
    };
    let vision = |model: &str, w: Option<coload_cohort_schema::Workload>| {
        // The layout is named only when it is not the default, so that contiguous studies
        // read as they always have.
        let layout = if c.memory_format.is_contiguous() {
            String::new()
        } else {
            format!(" {}", c.memory_format)
        };
        format!(
            "{model}, batch {} of 3x{size}x{size}, {}{layout}, {}",
            c.batch_size,
            c.precision,
            execution(w),
            size = c.image_size
        )
    };
    let llm = |model: &str, w: Option<coload_cohort_schema::Workload>| match &c.llm {
        Some(l) => format!(
            "{model}, batch {}, prompt {} + {} generated tokens, {}, {}",
            l.batch_size,
            l.prompt_tokens,
            l.output_tokens,
            l.precision,
            execution(w)
        ),
        None => model.to_owned(),
    };
    match &c.model_by_workload {
        Some(m) => m
            .iter()
            .map(|(w, name)| {
                if w.is_llm() {
                    format!("{w} {}", llm(name, Some(*w)))
                } else {
                    format!("{w} {}", vision(name, Some(*w)))
                }
            })
            .collect::<Vec<_>>()
            .join("; "),
        None if c.llm.is_some() => llm(&c.model, None),
        None => vision(&c.model, None),
    }
}
#[expect(
    clippy::too_many_lines,
    reason = "one row per fact, top to bottom: build, workload, protocol, dates, GPUs, hosts, shares"
)]
fn provenance(
    summaries: &[(CohortSummary, &Entry)],
    probes: &[CohortSummary],
    workers: &[coload_cohort_schema::WorkerReport],
) -> Vec<(String, String)> {
    let all: Vec<(&CohortSummary, Option<&str>)> = summaries
        .iter()
        .map(|(s, e)| (s, Some(e.policy.as_str())))
        .chain(probes.iter().map(|s| (s, None)))
        .collect();
    let this_build = format!(
        "{} (git {})",
        env!("CARGO_PKG_VERSION"),
        option_env!("COLOAD_GIT_REVISION").unwrap_or("revision not recorded in this build")
    );
    // The builds that ran the workers, as their records name them, with how many workers each.
    let mut builds: Vec<(&str, usize)> = Vec::new();
    for b in workers.iter().filter_map(|w| w.coload.as_deref()) {
        match builds.iter_mut().find(|(x, _)| *x == b) {
            Some((_, n)) => *n += 1,
            None => builds.push((b, 1)),
        }
    }
    let ran = if builds.is_empty() {
        String::new()
    } else {
        let list: Vec<String> = builds
            .iter()
            .map(|(b, n)| format!("{b} ({n} worker{})", if *n == 1 { "" } else { "s" }))
            .collect();
        let unnamed = workers.iter().filter(|w| w.coload.is_none()).count();
        let older = if unnamed > 0 {
            format!(
                "; {unnamed} worker record{} from before builds were recorded",
                if unnamed == 1 { "" } else { "s" }
            )
        } else {
            String::new()
        };
        format!("workers ran {}{older}; ", list.join(", "))
    };
    let mut rows = vec![(
        "coload".to_owned(),
        format!("{ran}this report: {this_build}"),
    )];
    if all.is_empty() {
        return rows;
    }
    rows.push((
        "workload".to_owned(),
        distinct(all.iter().map(|(s, _)| workload_words(&s.config))),
    ));
    rows.push((
        "protocol".to_owned(),
        distinct(all.iter().map(|(s, _)| {
            let c = &s.config;
            format!(
                "{} s window, {} warmup batches, {} s start lead",
                crate::number(c.window_s),
                c.warmup_batches,
                crate::number(c.start_lead_s)
            )
        })),
    ));
    let start = all
        .iter()
        .map(|(s, _)| s.common_interval.start_unix_ns)
        .min()
        .unwrap_or(0);
    let end = all
        .iter()
        .map(|(s, _)| s.common_interval.end_unix_ns)
        .max()
        .unwrap_or(0);
    rows.push((
        "dates".to_owned(),
        format!(
            "{} (the first and last cohorts' common intervals)",
            crate::utc_span(start, end)
        ),
    ));
    let mut gpus: Vec<String> = Vec::new();
    let mut memory: Vec<u64> = Vec::new();
    for (s, _) in &all {
        for d in &s.colocation.devices {
            if !gpus.contains(&d.device) {
                gpus.push(d.device.clone());
                memory.push(d.memory_total_bytes.unwrap_or(0));
            }
        }
    }
    let names = distinct(
        workers
            .iter()
            .filter_map(|w| w.device.as_ref().and_then(|d| d.gpu_name.clone())),
    );
    let drivers = distinct(workers.iter().filter_map(|w| {
        w.device.as_ref().map(|d| {
            format!(
                "driver {}, CUDA {}",
                d.driver_version.as_deref().unwrap_or("unknown"),
                d.cuda_version.as_deref().unwrap_or("unknown")
            )
        })
    }));
    let gib = memory.iter().copied().max().unwrap_or(0) as f64 / f64::from(1u32 << 30);
    if gpus.is_empty() {
        // A CPU study: no GPU to describe.
        rows.push((
            "GPUs".to_owned(),
            "none: the workers ran on the CPU".to_owned(),
        ));
    } else {
        rows.push((
            "GPUs".to_owned(),
            format!(
                "{} physical GPU{} ({}), {} GiB each; {}; {}",
                gpus.len(),
                if gpus.len() == 1 { "" } else { "s" },
                gpus.iter()
                    .map(|g| g.chars().take(12).collect::<String>() + "…")
                    .collect::<Vec<_>>()
                    .join(", "),
                crate::number(gib),
                if names.is_empty() {
                    "names in the node line".to_owned()
                } else {
                    names
                },
                if drivers.is_empty() {
                    "driver, CUDA version and hosts not kept with these data (summaries only)"
                        .to_owned()
                } else {
                    drivers
                }
            ),
        ));
    }
    let hosts = distinct(workers.iter().map(|w| w.identity.hostname.clone()));
    if !hosts.is_empty() {
        rows.push(("hosts".to_owned(), hosts));
    }
    // The compared cohorts name their policy; a capacity probe's summary does not, and its
    // search's policy is among them.
    let shares = distinct(all.iter().filter_map(|(s, policy)| {
        s.share
            .as_ref()
            .zip(*policy)
            .map(|(sh, p)| format!("{p}: {}", sh.describe()))
    }));
    if !shares.is_empty() {
        rows.push(("MPS share".to_owned(), shares));
    }
    rows
}

/// The study's wall time and the part of it inside measurement windows (the baseline
/// for making studies faster), from the runs and cohort times the index recorded:
/// `2,510 s in 6 runs; 2,050 s of it inside measurement windows (82 % of one lane's time)`.
/// Cohorts run by a build that kept no times are counted and named, never guessed.
#[must_use]
pub fn wall_time(index: &Index) -> Option<String> {
    use crate::number;
    let ran: Vec<&Entry> = index
        .cohorts
        .iter()
        .filter(|e| {
            e.outcome.has_summary() || matches!(e.outcome, Outcome::Failed | Outcome::FailedEarlier)
        })
        .collect();
    // A failed cohort measured nothing: no time inside a window, whatever its build recorded.
    // A complete one with a duration but no windows is an older build's record: not counted.
    let failed = |e: &Entry| matches!(e.outcome, Outcome::Failed | Outcome::FailedEarlier);
    let windows_of = |e: &Entry| {
        if failed(e) { Some(0.0) } else { e.in_windows_s }
    };
    let timed: Vec<&Entry> = ran
        .iter()
        .copied()
        .filter(|e| e.duration_s.is_some() && windows_of(e).is_some())
        .collect();
    if index.runs.is_empty() && timed.is_empty() {
        return None;
    }
    let wall = index.wall_s();
    let windows: f64 = timed.iter().filter_map(|e| windows_of(e)).sum();
    let cohorts_wall: f64 = timed.iter().filter_map(|e| e.duration_s).sum();
    let lanes = index.lanes.len().max(1);
    let lane_words = if lanes == 1 {
        "one lane's".to_owned()
    } else {
        format!("{lanes} lanes'")
    };
    let pct = |part: f64, whole: f64| {
        if whole > 0.0 {
            format!("{:.0} %", 100.0 * part / whole)
        } else {
            "-".to_owned()
        }
    };
    let runs = index.runs.len();
    let first = index.runs.iter().map(|r| r.started_unix_ns).min();
    let last = index
        .runs
        .iter()
        .map(|r| r.started_unix_ns + (r.wall_s.max(0.0) * 1e9) as u64)
        .max();
    let span = match (first, last) {
        (Some(a), Some(b)) => format!(", {}", crate::utc_span(a, b)),
        _ => String::new(),
    };
    if timed.len() == ran.len() && runs > 0 {
        return Some(format!(
            "{} s in {}{span}; {} s of it inside measurement windows ({} of {lane_words} time; \
             the cohorts' own processes took {} s)",
            number(wall.round()),
            plural(runs, "run", "runs"),
            number(windows.round()),
            pct(windows, wall * lanes as f64),
            number(cohorts_wall.round()),
        ));
    }
    let untimed = ran.len() - timed.len();
    let recorded = if runs > 0 {
        format!(
            "{} s in the {} that recorded times{span}; ",
            number(wall.round()),
            plural(runs, "run", "runs")
        )
    } else {
        String::new()
    };
    if timed.is_empty() {
        return Some(format!(
            "{recorded}no cohort's times were recorded ({} ran with builds that kept none)",
            plural(untimed, "cohort", "cohorts")
        ));
    }
    Some(format!(
        "{recorded}the {} with recorded times took {} s, {} of it inside measurement windows; \
         {} ran in earlier runs whose builds kept no times",
        plural(timed.len(), "cohort", "cohorts"),
        number(cohorts_wall.round()),
        pct(windows, cohorts_wall),
        plural(untimed, "other", "others"),
    ))
}

/// The provenance's `cards and runs` row: how many cards and runs of the study its compared
/// cohorts used, the two things a baseline block is (each ratio divides by the solos of its own
/// card in its own run). Cohorts of an index written before runs were numbered count the
/// study's runs and say that each card's solos were taken as one block. `None` without a
/// compared cohort.
fn blocks(summaries: &[(CohortSummary, &Entry)], index: &Index) -> Option<(String, String)> {
    if summaries.is_empty() {
        return None;
    }
    let mut cards: Vec<&str> = summaries
        .iter()
        .flat_map(|(s, _)| s.colocation.physical_gpus.iter().map(String::as_str))
        .collect();
    cards.sort_unstable();
    cards.dedup();
    let card_words = if cards.is_empty() {
        "no card (CPU workers)".to_owned()
    } else {
        plural(cards.len(), "card", "cards")
    };
    let mut runs: Vec<u32> = summaries.iter().filter_map(|(_, e)| e.run).collect();
    runs.sort_unstable();
    runs.dedup();
    let unnumbered = summaries.iter().any(|(_, e)| e.run.is_none());
    Some((
        "cards and runs".to_owned(),
        if unnumbered && index.runs.is_empty() {
            format!(
                "{card_words}; the study's index predates runs, so each card's solos are one \
                 baseline block"
            )
        } else if unnumbered {
            format!(
                "{card_words}, {} of the study; its cohorts predate run numbers, so each card's \
                 solos are one baseline block",
                plural(index.runs.len(), "run", "runs")
            )
        } else {
            format!(
                "{card_words}, {}: each ratio divides by the solos of its own card in its own run",
                plural(runs.len(), "run", "runs")
            )
        },
    ))
}

/// The policies the plan named that this node did not offer, each with the first reason given;
/// MIG also when the workers' records say MIG mode was off and the plan had no MIG policy.
fn not_measured(
    index: &Index,
    workers: &[coload_cohort_schema::WorkerReport],
) -> Vec<(String, String)> {
    let mig_off = !workers.is_empty()
        && workers
            .iter()
            .all(|w| w.device.as_ref().is_some_and(|d| d.mig_mode == Some(false)));
    let mut out: Vec<(String, String)> = Vec::new();
    for e in index
        .cohorts
        .iter()
        .filter(|e| e.outcome == Outcome::NotOffered)
    {
        if out.iter().any(|(p, _)| *p == e.policy) {
            continue;
        }
        let mut why = e.reason.clone().unwrap_or_else(|| "not offered".to_owned());
        if mig_off && e.mode.starts_with("mig") && !why.contains("MIG mode disabled") {
            why.push_str("; MIG mode is disabled on this node's GPUs");
        }
        let n = index
            .cohorts
            .iter()
            .filter(|k| k.policy == e.policy && k.outcome == Outcome::NotOffered)
            .count();
        let cohorts = plural(n, "cohort", "cohorts");
        // A policy measured elsewhere in the study (exclusive alone, say) lost only these
        // cohorts: the words say so instead of "not measured".
        let measured_elsewhere = index
            .cohorts
            .iter()
            .any(|k| k.policy == e.policy && k.outcome != Outcome::NotOffered);
        out.push((
            e.policy.clone(),
            if measured_elsewhere {
                format!("{cohorts} not offered: {why}")
            } else {
                format!("not measured: {why} ({cohorts} not offered)")
            },
        ));
    }
    let plan_has_mig = index.cohorts.iter().any(|e| e.mode.starts_with("mig"));
    if !plan_has_mig && mig_off {
        out.push((
            "MIG".to_owned(),
            "not measured: the plan has no MIG policy and MIG mode is disabled on this node's GPUs"
                .to_owned(),
        ));
    }
    out
}

/// Compares the complete cohorts of the study in `out` against its solo baselines and writes
/// `out/report/` (`comparison.json`, `comparison.md`, `report.html`).
pub fn write(out: &Path, about: &About, index: &Index) -> Result<Written, AnalysisError> {
    let Assembled {
        comparison,
        context,
        warnings,
    } = match assemble(out, about, index) {
        Ok(a) => a,
        Err(warnings) => {
            return Ok(Written {
                dir: None,
                warnings,
            });
        }
    };
    let dir = out.join("report");
    crate::write_report_with(&dir, &comparison, &context)?;
    Ok(Written {
        dir: Some(dir),
        warnings,
    })
}

/// A study folder as its report reads it: the comparison of its complete cohorts and everything
/// else the report shows ([`crate::ReportContext`]). Another page built from a study (the
/// repository's `docs/results.md`) starts here, so that it shows the report's figures.
#[derive(Debug, Clone)]
pub struct Assembled {
    /// The complete cohorts against the solo baselines (`comparison.json`).
    pub comparison: coload_cohort_schema::Comparison,
    /// The study's context: policies, capacity searches, isolation, LLM serving, provenance.
    pub context: crate::ReportContext,
    /// Files that could not be read, and why.
    pub warnings: Vec<String>,
}

/// Reads the study in `out` as [`write`](fn@write) does, without writing anything. `Err` holds the
/// warnings when there is nothing to compare (no complete cohort and no capacity search, or
/// the comparison was refused).
#[expect(
    clippy::too_many_lines,
    reason = "gathers every input of the report in reading order; each part is a function above"
)]
pub fn assemble(out: &Path, about: &About, index: &Index) -> Result<Assembled, Vec<String>> {
    let mut warnings = Vec::new();
    // A capacity cohort's probes are cohorts at rates the search chose, not repeats of one
    // shape: they stay out of the comparison and show on the load curve instead.
    let mut summaries: Vec<(CohortSummary, &Entry)> = Vec::new();
    for e in index
        .cohorts
        .iter()
        .filter(|e| e.outcome.has_summary() && e.capacity.is_none() && e.isolation.is_none())
    {
        let path = out.join("cohorts").join(&e.name).join("summary.json");
        match coload_analysis::load_compare_input(&path, &coload_analysis::Options::default()) {
            Ok((s, _)) => summaries.push((s, e)),
            Err(err) => warnings.push(format!("{}: {err}", path.display())),
        }
    }
    let capacity = capacity_rows(out, index, &mut warnings);
    if summaries.is_empty() && capacity.is_empty() {
        return Err(warnings);
    }
    // Every complete solo the plan marks as a baseline: `compare_in_runs` divides each cohort
    // by the runs on its own card in its own run of the study (its block).
    let baselines: Vec<CohortSummary> = summaries
        .iter()
        .filter(|(s, e)| e.baseline && s.workers.len() == 1)
        .map(|(s, _)| s.clone())
        .collect();
    let cohorts: Vec<CohortSummary> = summaries.iter().map(|(s, _)| s.clone()).collect();
    // The run of the study each cohort ran in: with its card, its baseline block.
    let runs = index.run_of_experiments();
    let comparison = if cohorts.is_empty() {
        // Only capacity searches: the report is their charts and table.
        coload_cohort_schema::Comparison {
            schema_version: coload_cohort_schema::SCHEMA_VERSION,
            baselines: BTreeMap::new(),
            baseline_blocks: Vec::new(),
            cohorts: Vec::new(),
            repeats: Vec::new(),
            warnings: Vec::new(),
            caveats: Vec::new(),
            decision: None,
        }
    } else {
        match coload_analysis::compare_in_runs(&cohorts, &baselines, &runs) {
            Ok(c) => c,
            Err(e) => {
                warnings.push(format!("no comparison: {e}"));
                return Err(warnings);
            }
        }
    };
    let mut comparison = comparison;
    comparison.decision = coload_analysis::frontier::decision(
        &searches(out, index),
        coload_analysis::frontier::Solos {
            summaries: &baselines,
            runs: &runs,
        },
    );
    let counts = |o: Outcome| index.cohorts.iter().filter(|e| e.outcome == o).count();
    let workers = worker_records(out, index);
    let probes = probe_summaries(out, index);
    let capacity_words: BTreeMap<&str, String> = index
        .cohorts
        .iter()
        .filter(|e| e.capacity.is_some())
        .filter_map(|e| {
            capacity.iter().find(|r| r.name == e.name).map(|r| {
                (
                    e.name.as_str(),
                    format!(
                        "capacity {} requests/s at {}",
                        r.capacity_words(),
                        r.objective
                    ),
                )
            })
        })
        .collect();
    let context = crate::ReportContext {
        title: about.title.clone(),
        notes: Vec::new(),
        provenance: [
            (
                "study".to_owned(),
                format!("{} ({} plan)", about.description, index.plan),
            ),
            (
                "cohorts".to_owned(),
                format!(
                    "{} planned: {} complete, {} failed, {} not offered by this node, {}{} not \
                     run yet (each with its outcome at the end of the page)",
                    index.cohorts.len(),
                    counts(Outcome::Complete) + counts(Outcome::AlreadyComplete),
                    counts(Outcome::Failed) + counts(Outcome::FailedEarlier),
                    counts(Outcome::NotOffered),
                    // Repeats a precision made unnecessary are planned, never run, and not
                    // missing: they get their own count.
                    match counts(Outcome::Settled) {
                        0 => String::new(),
                        n => format!("{n} not needed (their shape settled), "),
                    },
                    counts(Outcome::NotRun) + counts(Outcome::Interrupted)
                ),
            ),
            ("node".to_owned(), about.node.clone()),
        ]
        .into_iter()
        .chain(wall_time(index).map(|w| ("wall time".to_owned(), w)))
        .chain(provenance(&summaries, &probes, &workers))
        .chain(blocks(&summaries, index))
        .collect(),
        not_measured: not_measured(index, &workers),
        policies: summaries
            .iter()
            .map(|(s, e)| (s.experiment.clone(), e.policy.clone()))
            .collect(),
        cohorts: index
            .cohorts
            .iter()
            .map(|e| crate::ContextCohort {
                name: e.name.clone(),
                policy: e.policy.clone(),
                workers: e.workers.clone(),
                outcome: outcome_words(e),
                experiment: e.experiment.clone(),
                note: capacity_words
                    .get(e.name.as_str())
                    .cloned()
                    .or_else(|| e.experiment.clone())
                    .or_else(|| e.capacity.clone())
                    .unwrap_or_default(),
            })
            .collect(),
        llm_serve: summaries
            .iter()
            .filter_map(|(s, e)| llm_serve_row(s, &e.policy, s.experiment.clone(), None))
            .chain(llm_probe_rows(out, index, &capacity))
            .collect(),
        capacity,
        serve_points: summaries
            .iter()
            .filter_map(|(s, e)| serve_point(s, &e.policy))
            .collect(),
        isolation: isolation_rows(out, index, &mut warnings),
    };
    Ok(Assembled {
        comparison,
        context,
        warnings,
    })
}
