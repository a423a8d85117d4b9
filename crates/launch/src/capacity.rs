//! `--find-capacity`: one full cohort per probe rate, bracketing then bisecting
//! (`coload_analysis::capacity`), every probe kept in `capacity.json`.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use coload_analysis::capacity::{CapacitySearch, StopReason, find_capacity};
use coload_cohort_schema::{
    CapacityProbe, CapacityProbeWorker, CapacityReport, CohortSummary, SCHEMA_VERSION, Workload,
    exit, read_document, write_json_atomic,
};
use coload_spec::DEFAULT_SLO_QUANTILE;

use crate::args::LaunchArgs;
use crate::cohort::{Cx, INTERRUPTED, run_one};
use crate::error::LauncherError;
use coload_spec::{Mix, error_chain as chain};

/// Why a probe stopped the search.
struct ProbeFailed(u8);

/// The search `--find-capacity` asks for and its objective (ms). The numbers were checked by
/// [`coload_spec::CohortSpec::validate`], at the door (a study plan with a bad search is refused
/// at its line, before anything runs); the search checks them once more as it starts.
fn search(args: &LaunchArgs) -> Result<(CapacitySearch, f64), LauncherError> {
    let (s, c) = (&args.spec.serve, &args.spec.capacity);
    let Some(slo_ms) = s.slo_ms else {
        return Err(LauncherError::Usage(
            "--find-capacity needs --slo-ms".into(),
        ));
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
    Ok((search, slo_ms))
}

/// Runs the search and returns the exit code: complete when every probe's cohort completed.
pub(crate) fn run(cx: &Cx<'_>, mix: &Mix) -> Result<u8, LauncherError> {
    let (args, console, interrupted) = (cx.args, cx.console, cx.interrupted);
    let c = &args.spec.capacity;
    let (search, slo_ms) = search(args)?;
    let quantile = c.slo_quantile.unwrap_or(DEFAULT_SLO_QUANTILE);
    let mut workload_mix: BTreeMap<Workload, u32> = BTreeMap::new();
    for w in mix.workloads() {
        *workload_mix.entry(*w).or_default() += 1;
    }
    let mut report = CapacityReport {
        schema_version: SCHEMA_VERSION,
        mode: args.spec.flags.mode,
        workload_mix,
        slo_ms,
        quantile,
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
            "capacity probe {k}: {rate} requests/s per serve worker into {}",
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
        let (passed, serve) = serve_verdicts(&summary);
        probe.serve = serve;
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

/// Whether every serve worker of a probe met the objective, and each one's figures.
fn serve_verdicts(summary: &CohortSummary) -> (bool, Vec<CapacityProbeWorker>) {
    let mut passed = true;
    let mut out = Vec::new();
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
    (passed, out)
}

/// The search for people: the verdict, then one line per probe.
fn render(r: &CapacityReport) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let q = r.quantile * 100.0;
    let verdict = match (r.capacity_per_s, r.failed_above_per_s) {
        (Some(c), Some(f)) => format!("{c} requests/s per serve worker (passes; {f} fails)"),
        (Some(c), None) => format!("at least {c} requests/s per serve worker (no probe failed)"),
        (None, Some(f)) => format!("below {f} requests/s (no probe passed)"),
        (None, None) => "unknown (no probe completed)".to_owned(),
    };
    let _ = writeln!(
        out,
        "capacity at p{q} <= {} ms, mode {}: {verdict}; stop: {}",
        r.slo_ms, r.mode, r.stop
    );
    for p in &r.probes {
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
