//! Summarizing one cohort: validation, the common interval, per-worker and per-group figures.

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::path::PathBuf;

use coload_cohort_schema::{
    CohortSummary, CommonInterval, DecodeSummary, GroupSummary, MinMeanMax, Mode, SCHEMA_VERSION,
    Status, SummaryWarning, WorkerSummary, Workload, files,
};

use crate::colocation::{Placement, colocation};
use crate::error::{AnalysisError, CohortProblem, IntervalCut};
use crate::inputs::{WorkerInput, discover, read_reports};
use crate::interval::{MIN_OVERLAP_FRACTION, Span, common_interval, cuts, overlap_fraction};
use crate::scan::{PhaseDurations, Scan, scan_all};
use crate::serve::{ServeScan, Slo, scan_requests, serve_summary};
use crate::serve_llm::{LlmScan, LlmShape, LlmSlo, scan_llm_requests, serve_llm_summary};
use crate::stats::{self, P90, P99, P999};

/// Nanoseconds per second.
const NS_PER_S: f64 = 1e9;

/// Limits of the method that hold for every cohort, printed with every report.
pub const CAVEATS: [&str; 3] = [
    "device-wide figures (utilization, power, clocks, GPM activity, energy and samples per \
     joule) describe the whole GPU: under time-slicing and MPS they cannot be attributed to one \
     Pod",
    "this workload measures throughput and latency only: it measures neither MIG fault \
     containment nor security isolation",
    "p99 here is the execution latency of one batch on the device, not the latency of a \
     request (no queueing, batching or network)",
];

/// Added to the caveats of a cohort with a serve worker.
pub const SERVE_CAVEAT: &str = "serve workers: a request's latency runs from its scheduled \
     (open-loop) arrival to its batch's completion; requests still queued or running at the end \
     of the common interval count as SLO misses and rank above every completed request in the \
     percentiles";

/// Added to the caveats of a cohort with a `serve-llm` worker.
pub const SERVE_LLM_CAVEAT: &str = "serve-llm workers: TTFT runs from a request's scheduled \
     (open-loop) arrival to its first token, TPOT is (last - first token) / (output - 1) over \
     completed requests; requests not completed by the end of the common interval count as SLO \
     misses, so attainment and goodput are lower bounds near the interval's end";

/// The quantile an SLO is judged at when none is given: p99.
pub const DEFAULT_SLO_QUANTILE: f64 = 0.99;

/// How to summarize.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Refuse a cohort whose placement does not fit its declared mode (otherwise a warning).
    pub strict: bool,
    /// Threads to read `batches.jsonl` files with; `None` uses every available core.
    pub threads: Option<NonZeroUsize>,
    /// Judge serve workers' requests against this latency objective, milliseconds (overrides
    /// the `slo_ms` a serve worker recorded). Refused when the cohort has no serve worker.
    pub slo_ms: Option<f64>,
    /// The quantile that must meet the objective ([`DEFAULT_SLO_QUANTILE`] when `None`).
    pub slo_quantile: Option<f64>,
    /// Judge `serve-llm` workers' time to first token against this objective, milliseconds
    /// (overrides the one they recorded; with `tpot_slo_ms`). Refused without such a worker.
    pub ttft_slo_ms: Option<f64>,
    /// Judge `serve-llm` workers' time per output token against this objective, milliseconds.
    pub tpot_slo_ms: Option<f64>,
}

/// Checks the SLO options: a positive objective, a quantile in (0, 1) of at most three
/// decimals (percentiles are computed in parts per thousand).
fn check_slo(options: &Options) -> Result<(), AnalysisError> {
    for (value, flag) in [
        (options.slo_ms, "--slo-ms"),
        (options.ttft_slo_ms, "--ttft-slo-ms"),
        (options.tpot_slo_ms, "--tpot-slo-ms"),
    ] {
        if let Some(ms) = value
            && !(ms.is_finite() && ms > 0.0)
        {
            return Err(AnalysisError::Slo(format!(
                "{flag} must be a positive number of milliseconds, got {ms}"
            )));
        }
    }
    if let Some(q) = options.slo_quantile {
        let permille = q * 1000.0;
        if !(q > 0.0 && q < 1.0) || (permille - permille.round()).abs() > 1e-9 {
            return Err(AnalysisError::Slo(format!(
                "--slo-quantile must be between 0 and 1 with at most three decimals (0.99, \
                 0.999), got {q}"
            )));
        }
    }
    Ok(())
}

/// The common interval and every worker's overlap with it; refuses a cohort whose overlap is
/// below [`MIN_OVERLAP_FRACTION`], naming the worker that cut the interval short.
fn common_and_overlaps(inputs: &[WorkerInput]) -> Result<(Span, Vec<(u32, f64)>), AnalysisError> {
    // Every input is complete with a non-empty window here.
    let spans: Vec<Span> = inputs.iter().map(span_of).collect();
    let common = common_interval(&spans);
    let overlaps: Vec<(u32, f64)> = inputs
        .iter()
        .zip(&spans)
        .map(|(w, s)| (w.report.replica, overlap_fraction(*s, common)))
        .collect();
    match common.filter(|_| overlaps.iter().all(|(_, o)| *o >= MIN_OVERLAP_FRACTION)) {
        Some(common) => Ok((common, overlaps)),
        None => Err(AnalysisError::Cohort(vec![CohortProblem::LowOverlap {
            overlaps,
            minimum: MIN_OVERLAP_FRACTION,
            common_interval_ns: common.map(Span::len_ns),
            cuts: interval_cuts(inputs, &spans),
        }])),
    }
}

/// Summarizes the cohort in `paths` (worker folders, or folders holding `worker-*` folders).
///
/// Refuses, with every problem named, a cohort that is incomplete or inconsistent: see
/// [`CohortProblem`] for the rules, and [`AnalysisError::exit_code`] for the exit codes.
pub fn summarize_dirs(
    paths: &[PathBuf],
    options: &Options,
) -> Result<CohortSummary, AnalysisError> {
    check_slo(options)?;
    let dirs = discover(paths)?;
    let (mut inputs, mut problems) = read_reports(&dirs)?;
    // Stable: duplicated replicas keep the order they were given in.
    inputs.sort_by_key(|w| w.report.replica);
    check_identity(&inputs, &mut problems);
    let Some(reference) = inputs.first() else {
        return Err(AnalysisError::Cohort(problems));
    };
    if !problems.is_empty() {
        return Err(AnalysisError::Cohort(problems));
    }
    check_slo_has_serve(options, &inputs)?;
    let (common, overlaps) = common_and_overlaps(&inputs)?;

    let jobs: Vec<(PathBuf, u64)> = inputs
        .iter()
        .map(|w| {
            let declared = w.report.window.map_or(0, |x| x.batches);
            (w.dir.join(files::BATCHES), declared)
        })
        .collect();
    let threads = options
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN));
    let mut worker_scans = Vec::with_capacity(jobs.len());
    for result in scan_all(&jobs, common, threads) {
        worker_scans.push(result?);
    }
    check_scans(&inputs, &worker_scans)?;
    let serve_scans = scan_serve_workers(&inputs, common, options, threads)?;
    let llm_scans = scan_serve_llm_workers(&inputs, common, options)?;

    let common_s = common.len_ns() as f64 / NS_PER_S;
    let workers = worker_summaries(
        &inputs,
        &worker_scans,
        &overlaps,
        (&serve_scans, &llm_scans),
        common_s,
    );
    let mut groups = group_summaries(&workers, &worker_scans);
    let activity = crate::activity::cohort_activity(&inputs, common);
    if let Some(energy) = &activity.energy {
        set_samples_per_joule(&mut groups, &workers, energy.joules);
    }
    let placements: Vec<Placement<'_>> = inputs
        .iter()
        .map(|w| Placement {
            replica: w.report.replica,
            device: w.report.device.as_ref(),
            peak_device_bytes: w.report.memory.map(|m| m.peak_device_bytes),
        })
        .collect();
    let mode = reference.report.config.mode;
    let colocation = colocation(mode, &placements);
    refuse_shared_exclusive(mode, &colocation)?;
    if options.strict && colocation.fits_mode == Some(false) {
        return Err(AnalysisError::Placement {
            mode,
            explanation: colocation.explanation,
        });
    }
    let mut workload_mix: BTreeMap<Workload, u32> = BTreeMap::new();
    for w in &workers {
        *workload_mix.entry(w.workload).or_default() += 1;
    }
    let mut summary = CohortSummary {
        schema_version: SCHEMA_VERSION,
        experiment: reference.report.experiment.clone(),
        mode,
        count: reference.report.config.count,
        config: reference.report.config.clone(),
        workload_mix,
        common_interval: CommonInterval {
            start_unix_ns: common.start_unix_ns,
            end_unix_ns: common.end_unix_ns,
            seconds: common_s,
        },
        colocation,
        workers,
        groups,
        warnings: Vec::new(),
        caveats: CAVEATS.iter().map(|c| (*c).to_owned()).collect(),
        share: inputs
            .iter()
            .find_map(|w| w.report.share.as_ref().and_then(|s| s.declared)),
        isolation: hog_isolation(&inputs),
        gpm: activity.gpm,
        energy: activity.energy,
    };
    if serve_scans.iter().any(Option::is_some) {
        summary.caveats.push(SERVE_CAVEAT.to_owned());
    }
    if llm_scans.iter().any(Option::is_some) {
        summary.caveats.push(SERVE_LLM_CAVEAT.to_owned());
    }
    summary.warnings = warnings(&summary, &inputs);
    summary.warnings.extend(activity.warnings);
    Ok(summary)
}

/// Every worker's figures, with its request-level ones where it serves.
fn worker_summaries(
    inputs: &[WorkerInput],
    scans: &[Scan],
    overlaps: &[(u32, f64)],
    (serve_scans, llm_scans): (&[Option<ServeResult>], &[Option<LlmResult>]),
    common_s: f64,
) -> Vec<WorkerSummary> {
    inputs
        .iter()
        .zip(scans)
        .zip(overlaps)
        .zip(serve_scans)
        .zip(llm_scans)
        .map(|((((w, scan), (_, overlap)), serve), llm)| {
            let mut summary = worker_summary(w, scan, *overlap, common_s);
            summary.serve = serve
                .as_ref()
                .map(|(scan, max_batch, slo)| serve_summary(scan, common_s, *max_batch, *slo));
            summary.serve_llm = llm
                .as_ref()
                .map(|(scan, shape, slo)| serve_llm_summary(scan, common_s, *shape, *slo));
            summary
        })
        .collect()
}

/// An exclusive cohort whose workers shared a physical GPU is no baseline: refused whatever the
/// strictness.
fn refuse_shared_exclusive(
    mode: Mode,
    colocation: &coload_cohort_schema::Colocation,
) -> Result<(), AnalysisError> {
    if mode == Mode::Exclusive && colocation.devices.iter().any(|d| d.replicas.len() > 1) {
        return Err(AnalysisError::SharedExclusive {
            explanation: colocation.explanation.clone(),
        });
    }
    Ok(())
}

/// The isolation result of a cohort that holds a hog.
fn hog_isolation(inputs: &[WorkerInput]) -> Option<coload_cohort_schema::IsolationResult> {
    inputs
        .iter()
        .any(|w| w.report.config.workload == Workload::Hog)
        .then(|| {
            let reports: Vec<_> = inputs.iter().map(|w| &w.report).collect();
            crate::isolation::isolation(&reports, 0)
        })
}

/// Each group's kept samples over the cohort's device-wide joules.
fn set_samples_per_joule(
    groups: &mut BTreeMap<Workload, GroupSummary>,
    workers: &[WorkerSummary],
    joules: f64,
) {
    if joules <= 0.0 {
        return;
    }
    for (workload, g) in groups.iter_mut() {
        let samples: u64 = workers
            .iter()
            .filter(|w| w.workload == *workload)
            .map(|w| w.samples)
            .sum();
        g.samples_per_device_joule = Some(samples as f64 / joules);
    }
}

/// An SLO judges request latency: a cohort without a serve worker has none to judge.
fn check_slo_has_serve(options: &Options, inputs: &[WorkerInput]) -> Result<(), AnalysisError> {
    let Some(reference) = inputs.first() else {
        return Ok(());
    };
    let has_llm = inputs
        .iter()
        .any(|w| w.report.config.workload == Workload::ServeLlm);
    for (given, flag) in [
        (options.ttft_slo_ms.is_some(), "--ttft-slo-ms"),
        (options.tpot_slo_ms.is_some(), "--tpot-slo-ms"),
    ] {
        if given && !has_llm {
            return Err(AnalysisError::Slo(format!(
                "{flag} judges serve-llm requests, but cohort {} has no serve-llm worker; leave \
                 {flag} out",
                reference.report.experiment
            )));
        }
    }
    if options.slo_ms.is_some() && !inputs.iter().any(is_serve) {
        return Err(AnalysisError::Slo(format!(
            "--slo-ms judges request latency, but cohort {} has no serve worker (workloads: {}); \
             run one with --workers serve=1,... or leave --slo-ms out",
            reference.report.experiment,
            inputs
                .iter()
                .map(|w| w.report.config.workload.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Ok(())
}

fn is_serve(w: &WorkerInput) -> bool {
    w.report.config.workload == Workload::Serve
}

/// One serve worker's scan, its max batch and the objective it is judged by.
type ServeResult = (ServeScan, u32, Option<Slo>);

/// Streams every serve worker's `requests.jsonl` (one thread each, up to `threads`), and checks
/// it against the worker's report. `None` for the other workers.
fn scan_serve_workers(
    inputs: &[WorkerInput],
    common: Span,
    options: &Options,
    threads: NonZeroUsize,
) -> Result<Vec<Option<ServeResult>>, AnalysisError> {
    let quantile = options.slo_quantile.unwrap_or(DEFAULT_SLO_QUANTILE);
    let mut problems = Vec::new();
    let mut jobs: Vec<(usize, PathBuf, u32, Option<Slo>)> = Vec::new();
    for (i, w) in inputs.iter().enumerate().filter(|(_, w)| is_serve(w)) {
        let bad = |message: String| CohortProblem::BadServe {
            dir: w.dir.clone(),
            replica: w.report.replica,
            message,
        };
        let Some(config) = &w.report.config.serve else {
            problems.push(bad("its config has no serve section".into()));
            continue;
        };
        let path = w.dir.join(files::REQUESTS);
        if !path.is_file() {
            problems.push(bad(format!("no {}", files::REQUESTS)));
            continue;
        }
        let slo = options
            .slo_ms
            .or(config.slo_ms)
            .map(|ms| Slo { ms, quantile });
        jobs.push((i, path, config.max_batch, slo));
    }
    if !problems.is_empty() {
        return Err(AnalysisError::Cohort(problems));
    }
    let mut out: Vec<Option<ServeResult>> = inputs.iter().map(|_| None).collect();
    for chunk in jobs.chunks(threads.get().max(1)) {
        let results: Vec<Result<ServeScan, coload_cohort_schema::SchemaError>> =
            std::thread::scope(|s| {
                let handles: Vec<_> = chunk
                    .iter()
                    .map(|(_, path, _, slo)| {
                        s.spawn(move || scan_requests(path, common, slo.map(Slo::ns)))
                    })
                    .collect();
                handles
                    .into_iter()
                    .zip(chunk)
                    .map(|(h, (_, path, _, _))| {
                        h.join().unwrap_or_else(|_| {
                            Err(coload_cohort_schema::SchemaError::Io {
                                path: path.clone(),
                                source: std::io::Error::other("scan thread panicked"),
                            })
                        })
                    })
                    .collect()
            });
        for (result, (i, _, max_batch, slo)) in results.into_iter().zip(chunk) {
            out[*i] = Some((result?, *max_batch, *slo));
        }
    }
    for (w, result) in inputs.iter().zip(&out) {
        let (Some((scan, _, _)), Some(info)) = (result, w.report.serve) else {
            if result.is_some() {
                problems.push(CohortProblem::BadServe {
                    dir: w.dir.clone(),
                    replica: w.report.replica,
                    message: "worker.json has no serve section".into(),
                });
            }
            continue;
        };
        if scan.file_requests != info.requests || scan.file_batches != info.batches_dispatched {
            problems.push(CohortProblem::BadServe {
                dir: w.dir.clone(),
                replica: w.report.replica,
                message: format!(
                    "{} lists {} requests in {} batches but worker.json says serve.requests = \
                     {} and serve.batches_dispatched = {} (a truncated or mixed-up file)",
                    files::REQUESTS,
                    scan.file_requests,
                    scan.file_batches,
                    info.requests,
                    info.batches_dispatched
                ),
            });
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(AnalysisError::Cohort(problems))
    }
}

/// One `serve-llm` worker's scan, its shape and the objectives it is judged by.
type LlmResult = (LlmScan, LlmShape, Option<LlmSlo>);

/// Reads every `serve-llm` worker's `llm_requests.jsonl` and checks it against the worker's
/// report. `None` for the other workers. The objectives are the summarizer's where given, else
/// the worker's; both are needed for an SLO.
fn scan_serve_llm_workers(
    inputs: &[WorkerInput],
    common: Span,
    options: &Options,
) -> Result<Vec<Option<LlmResult>>, AnalysisError> {
    let quantile = options.slo_quantile.unwrap_or(DEFAULT_SLO_QUANTILE);
    let mut problems = Vec::new();
    let mut out = Vec::with_capacity(inputs.len());
    for w in inputs {
        if w.report.config.workload != Workload::ServeLlm {
            out.push(None);
            continue;
        }
        let bad = |message: String| CohortProblem::BadServe {
            dir: w.dir.clone(),
            replica: w.report.replica,
            message,
        };
        let (Some(config), Some(info)) = (&w.report.config.serve_llm, w.report.serve_llm) else {
            problems.push(bad(
                "a serve-llm worker without config.serve_llm or serve_llm in worker.json".into(),
            ));
            out.push(None);
            continue;
        };
        let path = w.dir.join(files::LLM_REQUESTS);
        if !path.is_file() {
            problems.push(bad(format!("no {}", files::LLM_REQUESTS)));
            out.push(None);
            continue;
        }
        let slo = match (
            options.ttft_slo_ms.or(config.ttft_slo_ms),
            options.tpot_slo_ms.or(config.tpot_slo_ms),
        ) {
            (Some(ttft_ms), Some(tpot_ms)) => Some(LlmSlo {
                ttft_ms,
                tpot_ms,
                quantile,
            }),
            _ => None,
        };
        let scan = scan_llm_requests(&path, common, slo)?;
        if scan.file_requests != info.requests {
            problems.push(bad(format!(
                "{} lists {} requests but worker.json says serve_llm.requests = {} (a truncated \
                 or mixed-up file)",
                files::LLM_REQUESTS,
                scan.file_requests,
                info.requests
            )));
        }
        let shape = LlmShape {
            prompt_tokens: config.prompt_tokens,
            output_tokens: config.output_tokens,
            max_batch: config.max_batch,
            kv_budget_tokens: config.kv_budget_tokens,
            kv_cache_bytes: w.report.config.llm.as_ref().and_then(|l| l.kv_cache_bytes),
            kv_reserved_tokens_max: Some(info.kv_reserved_tokens_max),
        };
        out.push(Some((scan, shape, slo)));
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(AnalysisError::Cohort(problems))
    }
}

/// Every worker's file must hold what its report declares, and some batch inside the interval.
fn check_scans(inputs: &[WorkerInput], scans: &[Scan]) -> Result<(), AnalysisError> {
    let mut problems = Vec::new();
    for (w, scan) in inputs.iter().zip(scans) {
        let declared = w.report.window.map_or(0, |x| x.batches);
        if scan.recorded_batches != declared {
            problems.push(CohortProblem::RecordMismatch {
                dir: w.dir.clone(),
                replica: w.report.replica,
                lines: scan.recorded_batches,
                declared,
            });
        } else if scan.sorted_durations_ns.is_empty() {
            problems.push(CohortProblem::NoBatches {
                dir: w.dir.clone(),
                replica: w.report.replica,
                recorded: scan.recorded_batches,
            });
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(AnalysisError::Cohort(problems))
    }
}

/// The workers that cut the common interval short, with what they recorded about it.
fn interval_cuts(inputs: &[WorkerInput], spans: &[Span]) -> Vec<IntervalCut> {
    cuts(spans)
        .into_iter()
        .map(|c| {
            let r = &inputs[c.index].report;
            IntervalCut {
                dir: inputs[c.index].dir.clone(),
                replica: r.replica,
                side: c.side,
                against_replica: inputs[c.against].report.replica,
                by_ns: c.by_ns,
                lateness_ns: r.barrier.and_then(|b| b.lateness_ns),
                batches: r.window.map_or(0, |x| x.batches),
            }
        })
        .collect()
}

fn span_of(w: &WorkerInput) -> Span {
    w.report.window.map_or(
        Span {
            start_unix_ns: 0,
            end_unix_ns: 0,
        },
        |x| Span {
            start_unix_ns: x.start_unix_ns,
            end_unix_ns: x.end_unix_ns,
        },
    )
}

/// The identity rules: status, experiment, replica ids, configuration, window, files.
fn check_identity(inputs: &[WorkerInput], problems: &mut Vec<CohortProblem>) {
    for w in inputs {
        let r = &w.report;
        if r.status == Status::Failed {
            problems.push(CohortProblem::Failed {
                dir: w.dir.clone(),
                replica: r.replica,
                stage: r.failure.as_ref().map(|f| f.stage),
                kind: r.failure.as_ref().map(|f| f.kind.clone()),
                message: r.failure.as_ref().map(|f| f.message.clone()),
            });
            continue;
        }
        match r.window {
            None => problems.push(CohortProblem::BadWindow {
                dir: w.dir.clone(),
                replica: r.replica,
                message: "status complete but no window recorded".into(),
            }),
            Some(x) if x.end_unix_ns <= x.start_unix_ns => {
                problems.push(CohortProblem::BadWindow {
                    dir: w.dir.clone(),
                    replica: r.replica,
                    message: format!(
                        "window ends at {} ns, not after its start at {} ns",
                        x.end_unix_ns, x.start_unix_ns
                    ),
                });
            }
            Some(_) => {}
        }
        if !w.dir.join(files::BATCHES).is_file() {
            problems.push(CohortProblem::MissingBatches { dir: w.dir.clone() });
        }
    }

    let mut experiments: BTreeMap<&str, Vec<PathBuf>> = BTreeMap::new();
    for w in inputs {
        experiments
            .entry(&w.report.experiment)
            .or_default()
            .push(w.dir.clone());
    }
    if experiments.len() > 1 {
        problems.push(CohortProblem::ExperimentsDiffer {
            experiments: experiments
                .into_iter()
                .map(|(e, d)| (e.to_owned(), d))
                .collect(),
        });
    }

    let Some(reference) = inputs.first() else {
        return;
    };
    let count = reference.report.config.count;
    let mut holders: BTreeMap<u32, Vec<PathBuf>> = BTreeMap::new();
    for w in inputs {
        holders
            .entry(w.report.replica)
            .or_default()
            .push(w.dir.clone());
    }
    let missing = missing_ranges(count, holders.keys().copied());
    let duplicated: Vec<(u32, Vec<PathBuf>)> = holders
        .iter()
        .filter(|(_, d)| d.len() > 1)
        .map(|(id, d)| (*id, d.clone()))
        .collect();
    let outside: Vec<(u32, PathBuf)> = holders
        .iter()
        .filter(|(id, _)| **id >= count)
        .flat_map(|(id, d)| d.iter().map(|p| (*id, p.clone())))
        .collect();
    if !missing.is_empty() || !duplicated.is_empty() || !outside.is_empty() {
        problems.push(CohortProblem::Replicas {
            count,
            missing,
            duplicated,
            outside,
        });
    }

    for w in &inputs[1..] {
        let differences = w.report.config.differences(&reference.report.config);
        if !differences.is_empty() {
            problems.push(CohortProblem::ConfigDiffers {
                dir: w.dir.clone(),
                replica: w.report.replica,
                reference_replica: reference.report.replica,
                differences,
            });
        }
    }
}

fn worker_summary(w: &WorkerInput, scan: &Scan, overlap: f64, common_s: f64) -> WorkerSummary {
    let r = &w.report;
    let device = r.device.as_ref();
    let latency = stats::latency_ms(&[&scan.sorted_durations_ns]);
    WorkerSummary {
        replica: r.replica,
        workload: r.config.workload,
        // A hog runs no model.
        model: (r.config.workload != Workload::Hog).then(|| r.config.model_label()),
        batches: scan.sorted_durations_ns.len() as u64,
        samples: scan.kept_samples,
        batches_recorded: scan.recorded_batches,
        samples_per_s: scan.kept_samples as f64 / common_s,
        overlap_fraction: overlap,
        // Never empty here: a worker without kept batches was refused above.
        latency_ms: latency.unwrap_or(ZERO_LATENCY),
        latency_cdf_ms: stats::cdf_ms(&scan.sorted_durations_ns),
        gpu_uuid: device.and_then(|d| d.gpu_uuid.clone()),
        mig_uuid: device.and_then(|d| d.mig_uuid.clone()),
        peak_device_bytes: r.memory.map(|m| m.peak_device_bytes),
        lateness_ns: r.barrier.and_then(|b| b.lateness_ns),
        share: r.share.clone(),
        hog: r.hog.clone(),
        serve: None,
        decode: decode_summary(w, scan, common_s),
        serve_llm: None,
    }
}

/// A decode worker's figures by phase: tokens/s, prefill latency and time per
/// output token, nearest-rank as every other latency here.
fn decode_summary(w: &WorkerInput, scan: &Scan, common_s: f64) -> Option<DecodeSummary> {
    if w.report.config.workload != Workload::Decode {
        return None;
    }
    let llm = w.report.config.llm.as_ref()?;
    let empty = PhaseDurations::default();
    let phases = scan.phases.as_ref().unwrap_or(&empty);
    Some(DecodeSummary {
        batch_size: llm.batch_size,
        prompt_tokens: llm.prompt_tokens,
        output_tokens: llm.output_tokens,
        tokens_per_s: scan.kept_samples as f64 / common_s,
        prefills: phases.prefill_ns.len() as u64,
        decode_steps: phases.decode_ns.len() as u64,
        prefill_ms: stats::latency_ms(&[&phases.prefill_ns]),
        tpot_ms: stats::latency_ms(&[&phases.decode_ns]),
        kv_cache_bytes: llm.kv_cache_bytes,
        decode_read_bytes: llm.decode_read_bytes,
    })
}

const ZERO_LATENCY: coload_cohort_schema::LatencyMs = coload_cohort_schema::LatencyMs {
    p50: 0.0,
    p90: 0.0,
    p99: 0.0,
    p999: 0.0,
    p9999: None,
    mean: 0.0,
    stddev: 0.0,
    min: 0.0,
    max: 0.0,
};

/// One group per workload. Training and inference rates are never added together: a training
/// sample (forward, backward, step) and an inference sample are different units of work. Each
/// group is labelled with its model: the configuration check lets the workloads of a mixed
/// cohort run different models only as declared, and never the workers of one workload. A hog
/// is in no group: it computes nothing, and its "batches" are hold intervals.
fn group_summaries(workers: &[WorkerSummary], scans: &[Scan]) -> BTreeMap<Workload, GroupSummary> {
    let mut out = BTreeMap::new();
    let workloads: std::collections::BTreeSet<Workload> = workers
        .iter()
        .map(|w| w.workload)
        .filter(|w| *w != Workload::Hog)
        .collect();
    for workload in workloads {
        let members: Vec<(&WorkerSummary, &Scan)> = workers
            .iter()
            .zip(scans)
            .filter(|(w, _)| w.workload == workload)
            .collect();
        let rates: Vec<f64> = members.iter().map(|(w, _)| w.samples_per_s).collect();
        let parts: Vec<&[u64]> = members
            .iter()
            .map(|(_, s)| s.sorted_durations_ns.as_slice())
            .collect();
        let (mean, _) = stats::mean_stddev(&rates).unwrap_or((0.0, 0.0));
        out.insert(
            workload,
            GroupSummary {
                model: members.first().and_then(|(w, _)| w.model.clone()),
                workers: members.len() as u32,
                aggregate_samples_per_s: rates.iter().sum(),
                per_worker_samples_per_s: MinMeanMax {
                    min: rates.iter().copied().fold(f64::INFINITY, f64::min),
                    mean,
                    max: rates.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                },
                jain_fairness: stats::jain_fairness(&rates),
                latency_ms: stats::latency_ms(&parts).unwrap_or(ZERO_LATENCY),
                samples_per_device_joule: None,
            },
        );
    }
    out
}

/// CPU pressure (PSI `cpu some avg10`, percent) above which a worker's host counts as contended
/// during its window. PSI is the share of the last 10 s in which some runnable task waited for a
/// CPU. A ResNet18 worker at batch 32 is bound by issuing kernels, so a worker waiting for a CPU
/// measures the host as much as the GPU. On the H200 runs (docs/results.md) quiet hosts read
/// 0-1 % and a host saturated by another cohort 28-99 %.
pub const HOST_PRESSURE_PCT: f64 = 10.0;

/// Why a worker's host looks contended during its window, if it does: CPU pressure above
/// [`HOST_PRESSURE_PCT`] or a load average above the CPUs the worker may use, at either end.
fn host_contention(report: &coload_cohort_schema::WorkerReport) -> Option<String> {
    let host = report.host.as_ref()?;
    let psi = [host.psi_cpu_some_avg10_start, host.psi_cpu_some_avg10_end]
        .into_iter()
        .flatten()
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    let load = [host.loadavg_start, host.loadavg_end]
        .into_iter()
        .flatten()
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    let pressured = psi.is_some_and(|p| p > HOST_PRESSURE_PCT);
    let overloaded = matches!((load, host.cpus_allowed), (Some(l), Some(n)) if l > f64::from(n));
    if !pressured && !overloaded {
        return None;
    }
    let psi_text = psi.map_or_else(|| "unknown".to_owned(), |p| format!("{p:.1} %"));
    let load_text = load.map_or_else(|| "unknown".to_owned(), |l| format!("{l:.1}"));
    let cpus_text = host
        .cpus_allowed
        .map_or_else(|| "an unknown number of".to_owned(), |n| n.to_string());
    let on_cpu = report
        .device
        .as_ref()
        .is_some_and(|d| d.kind == coload_cohort_schema::DeviceKind::Cpu);
    let meaning = if on_cpu {
        "the workers ran on these CPUs, so the figures describe the shared CPU"
    } else {
        "a launch-bound GPU worker then measures the host as much as the GPU: re-run on a quiet host"
    };
    Some(format!(
        "replica {}: its host was CPU-contended during the window (CPU pressure up to {psi_text}, \
         load up to {load_text} on {cpus_text} CPUs); {meaning}",
        report.replica
    ))
}

/// A named warning of a summary or a comparison.
pub(crate) fn warn(kind: &str, message: String) -> SummaryWarning {
    SummaryWarning {
        kind: kind.to_owned(),
        message,
    }
}

fn warnings(s: &CohortSummary, inputs: &[WorkerInput]) -> Vec<SummaryWarning> {
    let mut out = Vec::new();
    match s.colocation.fits_mode {
        Some(true) => {}
        Some(false) => out.push(warn("placement_mismatch", s.colocation.explanation.clone())),
        None => out.push(warn("placement_unknown", s.colocation.explanation.clone())),
    }
    for w in s.workers.iter().filter(|w| w.workload != Workload::Hog) {
        let short: Vec<String> = [(P90, "p90"), (P99, "p99"), (P999, "p99.9")]
            .iter()
            .filter(|(p, _)| w.batches < stats::min_count_for(*p))
            .map(|(p, name)| format!("{name} needs {}", stats::min_count_for(*p)))
            .collect();
        if !short.is_empty() {
            out.push(warn(
                "few_batches",
                format!(
                    "replica {}: {} batches in the common interval ({}): below that a \
                     percentile is only the slowest batch seen",
                    w.replica,
                    w.batches,
                    short.join(", ")
                ),
            ));
        }
    }
    for w in &s.workers {
        let Some(v) = &w.serve_llm else { continue };
        let needed = stats::min_count_for(P99);
        if v.requests < needed {
            out.push(warn(
                "few_requests",
                format!(
                    "replica {}: {} serve-llm requests in the common interval (p99 needs \
                     {needed}): its TTFT p99 is its slowest request's, or null",
                    w.replica, v.requests
                ),
            ));
        }
    }
    for d in &s.colocation.devices {
        if let (Some(h), Some(sum), Some(total)) =
            (d.headroom_bytes, d.peak_sum_bytes, d.memory_total_bytes)
            && h < 0
        {
            let ids: Vec<String> = d.replicas.iter().map(ToString::to_string).collect();
            out.push(warn(
                "memory_overcommit",
                format!(
                    "{}: the peak memory of replicas {} sums to {sum} bytes, more than its \
                     {total} bytes",
                    d.device,
                    ids.join(", ")
                ),
            ));
        }
    }
    for w in inputs {
        if let Some(message) = host_contention(&w.report) {
            out.push(warn("host_contention", message));
        }
    }
    for w in inputs {
        for ww in &w.report.warnings {
            out.push(warn(
                "worker_warning",
                format!("replica {}: {}: {}", w.report.replica, ww.kind, ww.message),
            ));
        }
    }
    out
}

/// The ids in `0..count` that `held` (ascending) lacks, as inclusive ranges: linear in the
/// folders given, whatever count a (forged) report declares.
fn missing_ranges(count: u32, held: impl Iterator<Item = u32>) -> Vec<(u32, u32)> {
    let mut missing = Vec::new();
    let mut next = 0u32;
    for id in held.take_while(|id| *id < count) {
        if id > next {
            missing.push((next, id - 1));
        }
        next = id + 1;
    }
    if next < count {
        missing.push((next, count - 1));
    }
    missing
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report that declares 10^8 replicas beside three folders costs three ranges, not a
    /// list of 10^8 ids.
    #[test]
    fn missing_replicas_are_ranges() {
        assert_eq!(
            missing_ranges(100_000_000, [0, 2, 3, 7].into_iter()),
            vec![(1, 1), (4, 6), (8, 99_999_999)]
        );
        assert_eq!(missing_ranges(3, [0, 1, 2, 5].into_iter()), vec![]);
        assert_eq!(missing_ranges(2, std::iter::empty()), vec![(0, 1)]);
    }
}
