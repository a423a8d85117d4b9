//! `--find-capacity`: one full cohort per probe rate, bracketing then bisecting
//! (`crate::search`), every probe kept in `capacity.json`.
//!
//! A probe passes when every serve worker meets `--slo-ms` (its SLO verdict) and every
//! `serve-llm` worker its TTFT and TPOT objectives at once (the TTFT and the TPOT at
//! `--slo-quantile` within `--ttft-slo-ms` and `--tpot-slo-ms`, and not overloaded): the
//! slowest open-loop worker decides.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use crate::search::{CapacitySearch, StopReason, find_capacity};
use coload_cohort_schema::{
    CapacityProbe, CapacityProbeLlmWorker, CapacityProbeWorker, CapacityReport, CohortSummary,
    SCHEMA_VERSION, Workload, exit, read_document, write_json_atomic,
};
use coload_spec::DEFAULT_SLO_QUANTILE;

use crate::args::LaunchArgs;
use crate::cohort::{Cx, INTERRUPTED, run_one};
use crate::error::LauncherError;
use coload_spec::{Mix, error_chain as chain};

/// Why a probe stopped the search.
struct ProbeFailed(u8);

/// The objectives of a search, milliseconds: the serve workers' and the `serve-llm` workers'.
#[derive(Debug, Clone, Copy)]
#[expect(
    clippy::struct_field_names,
    reason = "the fields are named as capacity.json's, which they fill"
)]
struct Objectives {
    /// `capacity.json`'s `slo_ms`: the serve workers' objective, or without serve workers the
    /// `serve-llm` workers' TTFT objective.
    slo_ms: f64,
    ttft_slo_ms: Option<f64>,
    tpot_slo_ms: Option<f64>,
}

/// The search `--find-capacity` asks for and its objectives. The numbers were checked by
/// [`coload_spec::CohortSpec::validate`], at the door (a study plan with a bad search is refused
/// at its line, before anything runs); the search checks them once more as it starts.
fn search(args: &LaunchArgs, mix: &Mix) -> Result<(CapacitySearch, Objectives), LauncherError> {
    let (s, c) = (&args.spec.serve, &args.spec.capacity);
    let has_serve = mix.workloads().contains(&Workload::Serve);
    let has_llm = mix.workloads().contains(&Workload::ServeLlm);
    let llm = match (s.ttft_slo_ms, s.tpot_slo_ms) {
        (Some(ttft), Some(tpot)) if has_llm => Some((ttft, tpot)),
        _ if has_llm => {
            return Err(LauncherError::Usage(
                "--find-capacity needs --ttft-slo-ms and --tpot-slo-ms for the serve-llm workers"
                    .into(),
            ));
        }
        _ => None,
    };
    let slo_ms = match (s.slo_ms, llm) {
        (Some(ms), _) if has_serve => ms,
        (None, _) if has_serve => {
            return Err(LauncherError::Usage(
                "--find-capacity needs --slo-ms for the serve workers".into(),
            ));
        }
        (_, Some((ttft, _))) => ttft,
        _ => {
            return Err(LauncherError::Usage(
                "--find-capacity needs a serve or serve-llm worker".into(),
            ));
        }
    };
    let objectives = Objectives {
        slo_ms,
        ttft_slo_ms: llm.map(|l| l.0),
        tpot_slo_ms: llm.map(|l| l.1),
    };
    let search = CapacitySearch {
        start_per_s: c.start_per_s(s.rate),
        min_per_s: c.rate_min,
        max_per_s: c.rate_max,
        max_probes: c.max_probes,
        tolerance: c.capacity_tolerance,
    };
    search
        .validate()
        .map_err(|e| LauncherError::Usage(e.to_string()))?;
    Ok((search, objectives))
}

/// Runs the search and returns the exit code: complete when every probe's cohort completed.
pub(crate) fn run(cx: &Cx<'_>, mix: &Mix) -> Result<u8, LauncherError> {
    let (args, console, interrupted) = (cx.args, cx.console, cx.interrupted);
    let c = &args.spec.capacity;
    let (search, objectives) = search(args, mix)?;
    let quantile = c.slo_quantile.unwrap_or(DEFAULT_SLO_QUANTILE);
    let mut workload_mix: BTreeMap<Workload, u32> = BTreeMap::new();
    for w in mix.workloads() {
        *workload_mix.entry(*w).or_default() += 1;
    }
    let mut report = CapacityReport {
        schema_version: SCHEMA_VERSION,
        mode: args.spec.flags.mode,
        workload_mix,
        slo_ms: objectives.slo_ms,
        quantile,
        ttft_slo_ms: objectives.ttft_slo_ms,
        tpot_slo_ms: objectives.tpot_slo_ms,
        capacity_per_s: None,
        failed_above_per_s: None,
        stop: StopReason::ProbeFailed,
        tolerance: search.tolerance,
        max_probes: search.max_probes,
        probes: Vec::new(),
    };
    let path = args.out.join("capacity.json");
    let outcome = find_capacity(&search, |rate| {
        let k = report.probes.len() + 1;
        let dir = args.out.join(format!("probe-{k}-{rate}"));
        console.progress(&format!(
            "capacity probe {k}: {rate} requests/s per open-loop worker into {}",
            dir.display()
        ));
        let (code, experiment) = run_one(cx, mix, &dir, Some(rate)).map_err(|e| {
            console.progress(&format!("error: {}", chain(&e)));
            ProbeFailed(e.exit_code())
        })?;
        let mut probe = CapacityProbe {
            rate_per_s: rate,
            experiment,
            dir: dir.display().to_string(),
            passed: None,
            serve: Vec::new(),
            serve_llm: Vec::new(),
        };
        let summary: Option<CohortSummary> = (code == exit::COMPLETE)
            .then(|| read_document(&dir.join("summary.json")).ok())
            .flatten();
        let Some(summary) = summary else {
            report.probes.push(probe);
            let _ = write_json_atomic(&path, &report);
            return Err(ProbeFailed(if code == exit::COMPLETE {
                exit::INTERNAL
            } else {
                code
            }));
        };
        let (passed, serve, serve_llm) = serve_verdicts(&summary, quantile);
        probe.serve = serve;
        probe.serve_llm = serve_llm;
        probe.passed = Some(passed);
        console.progress(&format!(
            "capacity probe {k}: {rate} requests/s {}",
            if passed {
                "meets the objective"
            } else {
                "misses the objective"
            }
        ));
        report.probes.push(probe);
        let _ = write_json_atomic(&path, &report);
        if interrupted.load(Ordering::SeqCst) {
            return Err(ProbeFailed(INTERRUPTED));
        }
        Ok(passed)
    });
    let code = match outcome {
        Ok(result) => {
            report.capacity_per_s = result.capacity_per_s;
            report.failed_above_per_s = result.failed_above_per_s;
            report.stop = result.stop;
            exit::COMPLETE
        }
        Err(ProbeFailed(code)) => code,
    };
    write_json_atomic(&path, &report)?;
    console.output(&render(&report));
    console.progress(&format!("wrote {}", path.display()));
    Ok(code)
}

/// Whether every open-loop worker of a probe met its objectives, and each one's figures.
fn serve_verdicts(
    summary: &CohortSummary,
    quantile: f64,
) -> (bool, Vec<CapacityProbeWorker>, Vec<CapacityProbeLlmWorker>) {
    let mut passed = true;
    let mut out = Vec::new();
    let mut llm = Vec::new();
    for w in &summary.workers {
        let Some(v) = &w.serve_llm else { continue };
        let slo = v.slo;
        passed &= slo.is_some_and(|a| a.meets);
        let (ttft_ms, tpot_ms) = coload_analysis::llm_latency_at(v, quantile);
        llm.push(CapacityProbeLlmWorker {
            replica: w.replica,
            offered_per_s: v.offered_per_s,
            completed_per_s: v.completed_per_s,
            ttft_ms,
            tpot_ms,
            attainment: slo.map_or(0.0, |a| a.attainment),
            ttft_met: slo.is_some_and(|a| a.ttft_met),
            tpot_met: slo.is_some_and(|a| a.tpot_met),
            early_stopping_pass: slo.is_some_and(|a| a.early_stopping_pass),
            overloaded: v.overloaded,
        });
    }
    for w in &summary.workers {
        let Some(v) = &w.serve else { continue };
        let slo = v.slo;
        passed &= slo.is_some_and(|a| a.meets);
        out.push(CapacityProbeWorker {
            replica: w.replica,
            offered_per_s: v.offered_per_s,
            completed_per_s: v.completed_per_s,
            p99_ms: v.latency_ms.p99,
            attainment: slo.map_or(0.0, |a| a.attainment),
            percentile_met: slo.is_some_and(|a| a.percentile_met),
            early_stopping_pass: slo.is_some_and(|a| a.early_stopping_pass),
            overloaded: v.overloaded,
        });
    }
    (passed, out, llm)
}

/// The search for people: the verdict, then one line per probe.
fn render(r: &CapacityReport) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let q = r.quantile * 100.0;
    let verdict = match (r.capacity_per_s, r.failed_above_per_s) {
        (Some(c), Some(f)) => format!("{c} requests/s per open-loop worker (passes; {f} fails)"),
        (Some(c), None) => {
            format!("at least {c} requests/s per open-loop worker (no probe failed)")
        }
        (None, Some(f)) => format!("below {f} requests/s (no probe passed)"),
        (None, None) => "unknown (no probe completed)".to_owned(),
    };
    let objective = match (r.ttft_slo_ms, r.tpot_slo_ms) {
        (Some(ttft), Some(tpot)) if r.workload_mix.contains_key(&Workload::Serve) => format!(
            "p{q} <= {} ms (serve), TTFT p{q} <= {ttft} ms and TPOT p{q} <= {tpot} ms (serve-llm)",
            r.slo_ms
        ),
        (Some(ttft), Some(tpot)) => format!("TTFT p{q} <= {ttft} ms and TPOT p{q} <= {tpot} ms"),
        _ => format!("p{q} <= {} ms", r.slo_ms),
    };
    let _ = writeln!(
        out,
        "capacity at {objective}, mode {}: {verdict}; stop: {}",
        r.mode, r.stop
    );
    for p in &r.probes {
        let ms = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.3} ms"));
        let llm = p.serve_llm.iter().map(|w| {
            format!(
                "replica {}: offered {:.2}/s, completed {:.2}/s, TTFT {}, TPOT {}, within {:.3} %{}",
                w.replica,
                w.offered_per_s,
                w.completed_per_s,
                ms(w.ttft_ms),
                ms(w.tpot_ms),
                w.attainment * 100.0,
                if w.overloaded { ", overloaded" } else { "" }
            )
        });
        let serve: Vec<String> = p
            .serve
            .iter()
            .map(|w| {
                format!(
                    "replica {}: offered {:.1}/s, completed {:.1}/s, p99 {}, within {:.3} %{}",
                    w.replica,
                    w.offered_per_s,
                    w.completed_per_s,
                    w.p99_ms
                        .map_or_else(|| "-".to_owned(), |v| format!("{v:.3} ms")),
                    w.attainment * 100.0,
                    if w.overloaded { ", overloaded" } else { "" }
                )
            })
            .chain(llm)
            .collect();
        let verdict = match p.passed {
            Some(true) => "pass",
            Some(false) => "fail",
            None => "cohort failed",
        };
        let _ = writeln!(
            out,
            "  {:>10} /s  {verdict:<13} {}  [{}]",
            p.rate_per_s,
            serve.join("; "),
            p.experiment
        );
    }
    out
}
