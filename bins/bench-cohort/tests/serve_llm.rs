//! A `serve-llm` cohort on the CPU end to end, through the real bench-worker with the
//! tiny GPT-2 preset: the mix parser takes `serve-llm`, its flags reach the worker (and only
//! it), every iteration and every request is recorded, and the summary has TTFT, TPOT and the
//! SLO; the capacity search judges TTFT and TPOT together; bad flags are refused at the door.

use std::path::Path;
use std::process::{Command, Output};

use coload_cohort_schema::{
    CapacityReport, CohortSummary, DecodeAttention, Execution, LlmRequestLine, LlmRequestReader,
    Phase, Stage, StopReason, Workload, exit, files, read_batches, read_document,
    read_worker_report,
};

mod common;

use common::{COHORT, worker_bin};

/// A time-sliced CPU cohort of short requests (16 + 8 tokens, at most 4 running) into `out`;
/// the model and the rest are the caller's.
fn command(out: &Path) -> Command {
    let mut c = Command::new(COHORT);
    c.args(["--mode", "timeslice", "--device", "cpu"])
        .args([
            "--prompt-tokens",
            "16",
            "--output-tokens",
            "8",
            "--max-batch",
            "4",
        ])
        .args(["--start-lead-s", "2", "--join-timeout-s", "120"])
        .arg("--worker-bin")
        .arg(worker_bin())
        .arg("--out")
        .arg(out);
    c
}

fn cohort(out: &Path, extra: &[&str]) -> Output {
    command(out)
        .args(["--model", "gpt2-tiny", "--warmup-batches", "2"])
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn a_serve_llm_cohort_on_the_cpu_records_every_request_and_summarizes_ttft_and_tpot() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let o = cohort(
        &out,
        &[
            "--workers",
            "serve-llm=1",
            "--rate",
            "20",
            "--window-s",
            "3",
            "--ttft-slo-ms",
            "2000",
            "--tpot-slo-ms",
            "500",
        ],
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(table.contains("1 workers (1 serve-llm)"), "{table}");
    assert!(table.contains("requests (serve-llm workers):"), "{table}");
    assert!(table.contains("TTFT p50/p99 ms"), "{table}");

    let w = out.join("worker-0");
    let report = read_worker_report(&w.join(files::WORKER_REPORT)).unwrap();
    assert_eq!(report.config.workload, Workload::ServeLlm);
    let config = report.config.serve_llm.as_ref().expect("config.serve_llm");
    assert_eq!(
        (config.prompt_tokens, config.output_tokens, config.max_batch),
        (16, 8, 4)
    );
    // The default budget: --max-batch times gpt2-tiny's context of 64.
    assert_eq!((config.kv_budget_tokens, config.context_tokens), (256, 64));
    assert_eq!(config.policy, "fcfs_prefill_first");
    assert_eq!(
        (config.ttft_slo_ms, config.tpot_slo_ms),
        (Some(2000.0), Some(500.0))
    );
    let llm = report.config.llm.as_ref().expect("config.llm");
    // 2 layers x (keys + values) x 4 slots x 64 positions x 64 wide x 4 bytes.
    assert_eq!(llm.kv_cache_bytes, Some(2 * 2 * 4 * 64 * 64 * 4));
    assert_eq!(llm.decode_attention, Some(DecodeAttention::Sdpa));
    let counts = report.serve_llm.expect("worker.json serve_llm");
    assert_eq!(
        counts.requests,
        counts.completed + counts.unfinished + counts.not_admitted
    );
    assert!(counts.completed >= 20, "{counts:?}");
    assert!(counts.kv_reserved_tokens_max >= 24 && counts.kv_reserved_tokens_max <= 96);

    // batches.jsonl: the iterations inside the window, each with its phase and occupancy.
    let batches = read_batches(&w.join(files::BATCHES)).unwrap();
    assert_eq!(batches.len() as u64, counts.iterations_in_window);
    assert_eq!(
        batches.iter().map(|b| u64::from(b.samples)).sum::<u64>(),
        counts.tokens_in_window
    );
    let prefills = batches
        .iter()
        .filter(|b| b.phase == Some(Phase::Prefill))
        .count();
    assert!(prefills > 0 && prefills < batches.len());
    for b in &batches {
        assert_eq!(b.sequences, Some(b.samples), "{b:?}");
        assert!(b.kv_reserved_tokens.is_some_and(|k| k >= 24), "{b:?}");
    }
    // llm_requests.jsonl: one line per request, as worker.json counts them.
    let lines: Vec<LlmRequestLine> = LlmRequestReader::open(&w.join(files::LLM_REQUESTS))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(lines.len() as u64, counts.requests);
    assert_eq!(
        lines.iter().filter(|l| l.completed).count() as u64,
        counts.completed
    );

    check_summary(&out, llm.kv_cache_bytes);
}

/// The cohort's `summary.json`: the serve-llm worker's request figures, its SLO against the
/// objectives it recorded, and the caveat and warning a short window earns.
fn check_summary(out: &Path, kv_cache_bytes: Option<u64>) {
    let summary: CohortSummary = read_document(&out.join(files::SUMMARY)).unwrap();
    let s = summary.workers[0]
        .serve_llm
        .as_ref()
        .expect("serve_llm summary");
    assert!(summary.workers[0].decode.is_none());
    assert!(s.requests > 0 && s.completed > 0);
    let (ttft, tpot) = (s.ttft_ms, s.tpot_ms);
    // Seed 0 at 20/s schedules the last of 42 requests 2.4 ms before the end; on a busy host
    // it may get no first token by then, and the p99 (its rank) is rightly null. The p90 is
    // observed.
    assert!(ttft.p50.unwrap() > 0.0 && ttft.p50 <= ttft.p90, "{ttft:?}");
    assert!(
        ttft.p99.is_none_or(|p99| ttft.p90.unwrap() <= p99),
        "{ttft:?}"
    );
    assert!(tpot.p50.unwrap() > 0.0 && tpot.p50 <= tpot.p99, "{tpot:?}");
    assert!(s.itl_ms.p50.unwrap() > 0.0);
    assert!(s.output_tokens_per_s > 0.0);
    assert_eq!(s.kv_cache_bytes, kv_cache_bytes);
    let slo = s.slo.expect("the objectives the worker recorded");
    assert_eq!(
        (slo.ttft_slo_ms, slo.tpot_slo_ms, slo.quantile),
        (2000.0, 500.0, 0.99)
    );
    assert!(slo.met <= s.completed && slo.attainment > 0.0);
    assert!(
        summary
            .caveats
            .iter()
            .any(|c| c.starts_with("serve-llm workers"))
    );
    // About 60 requests in 3 s: too few for a p99, and the summary says so.
    assert!(s.requests < 100);
    assert!(
        summary
            .warnings
            .iter()
            .any(|w| w.kind == "few_requests" && w.message.contains("p99 needs 100")),
        "{:?}",
        summary.warnings
    );
}

#[test]
fn the_capacity_search_judges_ttft_and_tpot_together() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("capacity");
    // A TPOT objective no model meets (1 ns) beside a lenient TTFT: every probe fails on its
    // TPOT, so the search halves from --rate to --rate-min and stops there, in two probes.
    let o = cohort(
        &out,
        &[
            "--workers",
            "serve-llm=1",
            "--window-s",
            "1.5",
            "--find-capacity",
            "--ttft-slo-ms",
            "5000",
            "--tpot-slo-ms",
            "0.000001",
            "--slo-quantile",
            "0.5",
            "--rate",
            "8",
            "--rate-min",
            "4",
            "--max-probes",
            "3",
        ],
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let report: CapacityReport = read_document(&out.join(files::CAPACITY)).unwrap();
    assert_eq!(report.stop, StopReason::MinRateFails, "{report:?}");
    assert_eq!(report.capacity_per_s, None);
    assert_eq!(
        (report.ttft_slo_ms, report.tpot_slo_ms, report.slo_ms),
        (Some(5000.0), Some(0.000_001), 5000.0)
    );
    let rates: Vec<f64> = report.probes.iter().map(|p| p.rate_per_s).collect();
    assert_eq!(rates, [8.0, 4.0]);
    for p in &report.probes {
        assert_eq!(p.passed, Some(false), "{p:?}");
        assert!(p.serve.is_empty());
        let w = &p.serve_llm[0];
        assert!(w.ttft_met && !w.tpot_met, "{w:?}");
        assert!(w.tpot_ms.is_some_and(|t| t > 0.0) && w.offered_per_s > 0.0);
    }
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("capacity at TTFT p50 <= 5000 ms and TPOT p50 <= 0.000001 ms"),
        "{text}"
    );
}

#[test]
fn serve_llm_flags_are_refused_naming_the_flag() {
    for (args, flag, says) in [
        (
            &["--prompt-tokens", "0"][..],
            "--prompt-tokens",
            "at least 1 token",
        ),
        (
            &["--output-tokens", "0"],
            "--output-tokens",
            "at least 1 token",
        ),
        (&["--prompt-tokens=-3"], "--prompt-tokens", "-3"),
        (
            &["--prompt-tokens", "60", "--output-tokens", "8"],
            "--prompt-tokens",
            "needs 68 positions, but gpt2-tiny has a context of 64",
        ),
        (
            &["--kv-budget-tokens", "23"],
            "--kv-budget-tokens",
            "cannot hold one request",
        ),
        (&["--slo-ms", "10"], "--slo-ms", "needs a serve worker"),
        // Lengths drawn from a range (the base flags are 16 and 8 here).
        (
            &["--prompt-tokens-max", "12"],
            "--prompt-tokens-max",
            "--prompt-tokens-max 12 is below --prompt-tokens 16",
        ),
        (
            &["--prompt-tokens-max", "40", "--output-tokens-max", "30"],
            "--prompt-tokens-max",
            "needs 70 positions, but gpt2-tiny has a context of 64",
        ),
        (
            &["--output-tokens-max", "40", "--kv-budget-tokens", "50"],
            "--kv-budget-tokens",
            "cannot hold the longest request: it reserves --prompt-tokens 16 plus \
             --output-tokens-max 40 = 56 tokens",
        ),
    ] {
        let o = cohort(
            &tempfile::tempdir().unwrap().path().join("run"),
            &[&["--workers", "serve-llm=1", "--rate", "5"][..], args].concat(),
        );
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(flag) && stderr.contains(says),
            "{args:?}: {stderr}"
        );
    }
    // The LLM serving flags without a serve-llm worker.
    for flag in [
        "--ttft-slo-ms",
        "--prompt-tokens-max",
        "--output-tokens-max",
    ] {
        let o = cohort(
            &tempfile::tempdir().unwrap().path().join("run"),
            &["--workers", "decode=1", flag, "100"],
        );
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains(&format!("{flag} needs a serve-llm worker")),
            "{stderr}"
        );
    }
}

/// `--execution cuda-graph` passes the door for serve-llm (one graph per decode batch-size
/// bucket) and reaches the worker, which records it in `worker.json` and refuses it on the CPU
/// before the barrier, as train, infer and decode workers do.
#[test]
fn a_serve_llm_cuda_graph_on_the_cpu_is_refused_by_the_worker() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let o = cohort(
        &out,
        &[
            "--workers",
            "serve-llm=1",
            "--rate",
            "5",
            "--execution",
            "cuda-graph",
        ],
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(i32::from(exit::INCOMPLETE_COHORT)),
        "{stderr}"
    );
    assert!(
        stderr.contains("replica 0: failed in warmup")
            && stderr.contains("--execution cuda-graph needs a CUDA device")
            && stderr.contains("(invalid_option)"),
        "{stderr}"
    );
    let report = read_worker_report(&out.join("worker-0").join(files::WORKER_REPORT)).unwrap();
    assert_eq!(report.config.workload, Workload::ServeLlm);
    assert_eq!(report.config.execution, Execution::CudaGraph);
    let failure = report.failure.expect("a failure");
    assert_eq!(failure.stage, Stage::Warmup);
    assert!(
        failure.message.contains("needs a CUDA device"),
        "{}",
        failure.message
    );
}

/// `--execution` per workload reaches each worker as its own: the endpoint's CUDA graph (refused
/// on the CPU in its warmup) beside an eager trainer, both recording the declaration.
#[test]
fn a_per_workload_execution_reaches_each_worker_as_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let o = command(&out)
        .args(["--workers", "serve-llm=1,train=1", "--rate", "5"])
        .args(["--model", "serve-llm=gpt2-tiny,train=resnet18"])
        .args(["--execution", "serve-llm=cuda-graph,train=eager"])
        .args([
            "--batch-size",
            "2",
            "--image-size",
            "32",
            "--warmup-batches",
            "1",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(i32::from(exit::INCOMPLETE_COHORT)),
        "{stderr}"
    );
    assert!(
        stderr.contains("--execution cuda-graph needs a CUDA device"),
        "{stderr}"
    );
    let declared: std::collections::BTreeMap<Workload, Execution> = [
        (Workload::ServeLlm, Execution::CudaGraph),
        (Workload::Train, Execution::Eager),
    ]
    .into();
    for (replica, workload, execution) in [
        (0, Workload::ServeLlm, Execution::CudaGraph),
        (1, Workload::Train, Execution::Eager),
    ] {
        let worker = out.join(format!("worker-{replica}"));
        let report = read_worker_report(&worker.join(files::WORKER_REPORT)).unwrap();
        assert_eq!(report.config.workload, workload);
        assert_eq!(report.config.execution, execution, "replica {replica}");
        assert_eq!(
            report.config.execution_by_workload.as_ref(),
            Some(&declared)
        );
    }
}

/// The requests of a worker's `llm_requests.jsonl`.
fn request_lines(worker: &Path) -> Vec<LlmRequestLine> {
    LlmRequestReader::open(&worker.join(files::LLM_REQUESTS))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// Lengths drawn from `--prompt-tokens`..`--prompt-tokens-max` and
/// `--output-tokens`..`--output-tokens-max`: recorded request by request, inside the ranges and
/// not all the same; each request's TPOT by its own output length.
#[test]
fn a_cohort_with_drawn_lengths_records_each_request_s_own() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("drawn");
    let o = cohort(
        &out,
        &[
            "--workers",
            "serve-llm=1",
            "--rate",
            "15",
            "--window-s",
            "2",
            "--prompt-tokens-max",
            "40",
            "--output-tokens-max",
            "16",
        ],
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let w = out.join("worker-0");
    let report = read_worker_report(&w.join(files::WORKER_REPORT)).unwrap();
    let c = report.config.serve_llm.as_ref().unwrap();
    assert_eq!(c.lengths, "uniform");
    assert_eq!(
        (
            c.prompt_tokens,
            c.prompt_tokens_max,
            c.output_tokens,
            c.output_tokens_max
        ),
        (16, Some(40), 8, Some(16))
    );
    let lines = request_lines(&w);
    assert!(lines.len() >= 10, "{}", lines.len());
    assert!(
        lines
            .iter()
            .all(|l| (16..=40).contains(&l.prompt_tokens) && (8..=16).contains(&l.output_tokens))
    );
    let distinct = |f: fn(&LlmRequestLine) -> u32| {
        let mut v: Vec<u32> = lines.iter().map(f).collect();
        v.sort_unstable();
        v.dedup();
        v.len()
    };
    assert!(distinct(|l| l.prompt_tokens) > 3 && distinct(|l| l.output_tokens) > 3);
    // A completed request generated exactly its own output length.
    for l in lines.iter().filter(|l| l.completed) {
        assert_eq!(l.token_unix_ns.len(), l.output_tokens as usize, "{l:?}");
        assert_eq!(l.tokens_generated, l.output_tokens, "{l:?}");
    }
    let summary: CohortSummary = read_document(&out.join(files::SUMMARY)).unwrap();
    let s = summary.workers[0].serve_llm.as_ref().unwrap();
    assert!(s.completed > 0 && s.tpot_ms.p50.is_some(), "{s:?}");
}

/// A trace whose lines carry prompt and output tokens: every request of `llm_requests.jsonl`
/// has the lengths of its line, in order.
#[test]
fn a_cohort_replaying_a_trace_with_lengths_serves_the_trace_s_requests() {
    let dir = tempfile::tempdir().unwrap();
    // 35 arrivals 50 ms apart with lengths that vary line by line; the last five fall past
    // the 1.5 s window and are left out.
    let trace: Vec<(f64, u32, u32)> = (0..35u32)
        .map(|i| (f64::from(i) * 0.05, 4 + (i * 7) % 40, 1 + (i * 5) % 12))
        .collect();
    let text: String = std::iter::once("# offset_s prompt_tokens output_tokens\n".to_owned())
        .chain(trace.iter().map(|(t, p, o)| format!("{t:.3} {p} {o}\n")))
        .collect();
    let file = dir.path().join("trace.txt");
    std::fs::write(&file, text).unwrap();
    let out = dir.path().join("trace");
    let o = cohort(
        &out,
        &[
            "--workers",
            "serve-llm=1",
            "--arrivals-file",
            file.to_str().unwrap(),
            "--window-s",
            "1.5",
        ],
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let w = out.join("worker-0");
    let lines = request_lines(&w);
    let expected: Vec<(u32, u32)> = trace
        .iter()
        .filter(|(t, _, _)| *t < 1.5)
        .map(|&(_, p, o)| (p, o))
        .collect();
    assert_eq!(expected.len(), 30);
    let got: Vec<(u32, u32)> = lines
        .iter()
        .map(|l| (l.prompt_tokens, l.output_tokens))
        .collect();
    assert_eq!(got, expected);
    let report = read_worker_report(&w.join(files::WORKER_REPORT)).unwrap();
    let c = report.config.serve_llm.as_ref().unwrap();
    assert_eq!((c.lengths.as_str(), c.arrivals.as_str()), ("file", "file"));
    assert_eq!(
        (
            c.prompt_tokens,
            c.prompt_tokens_max,
            c.output_tokens,
            c.output_tokens_max
        ),
        (4, Some(43), 1, Some(12))
    );
}
