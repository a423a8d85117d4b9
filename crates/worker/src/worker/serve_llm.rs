//! The `serve-llm` worker's life after the preflight: the built-in LLM behind the
//! continuous batcher (with `--execution cuda-graph`, one decode graph captured per batch-size
//! bucket), warmed at every batch size up to 32 (then powers of two and `--max-batch`; with
//! graphs, at each bucket), the barrier, the LLM serve window (`coload_timing::run_llm_serve`)
//! on the real clock, and its records.
//!
//! Everything the window records lives in the scheduler's [`LlmServeBuffer`], sized before the
//! start from the planned requests; `batches.jsonl` (the iterations) and `llm_requests.jsonl`
//! (one line per request) are made from it after the end. Nothing but the runner and the step
//! runs in this thread between the two.

use std::time::Duration;

use coload_cohort_schema::{
    BarrierTiming, BatchRecord, Execution, LLM_LENGTHS_FIXED, LlmConfig, LlmRequestLine,
    LlmServeWindowInfo, Phase, ServeLlmConfig, Stage, WindowInfo, Workload,
};
use coload_timing::{
    Clock, IterationKind, LlmRequestRecord, LlmServeBuffer, MonotonicClock, TimingError,
    llm_request_records, run_llm_serve,
};
use coload_workload::{LlmError, LlmPreset, LlmServeOptions, LlmServeStep, WorkloadError};

use super::{Cx, Measure, Run, Start, check_lateness};
use crate::args::WorkerArgs;
use crate::error::WorkerError;
use crate::load::llm_failure;
use crate::progress::Progress;
use crate::serve_args::LlmServePlan;

/// What a `serve-llm` window leaves to write: the scheduler's records and the requests they
/// index.
#[derive(Debug)]
pub(super) struct LlmRecords {
    pub(super) buffer: LlmServeBuffer,
    pub(super) plan: LlmServePlan,
    pub(super) start_unix_ns: u64,
}

impl LlmRecords {
    /// One `llm_requests.jsonl` line per request, in arrival order (after the window).
    pub(super) fn lines(&self) -> impl Iterator<Item = LlmRequestLine> + '_ {
        let requests = &self.plan.requests;
        let at = move |ns: u64| self.start_unix_ns + ns;
        llm_request_records(&self.buffer, requests)
            .into_iter()
            .map(move |r: LlmRequestRecord| LlmRequestLine {
                index: u64::from(r.index),
                arrival_unix_ns: at(r.arrival_ns),
                prompt_tokens: r.prompt_tokens,
                output_tokens: r.output_tokens,
                admitted_unix_ns: r.admitted_ns.map(at),
                first_token_unix_ns: r.first_token_ns.map(at),
                last_token_unix_ns: r.last_token_ns.map(at),
                tokens_generated: r.tokens_generated,
                completed: r.completed,
                token_unix_ns: self
                    .buffer
                    .token_times_ns(requests, r.index as usize)
                    .iter()
                    .map(|&t| at(t))
                    .collect(),
            })
    }
}

/// The iterations that ended inside the window as `batches.jsonl` records: samples are the
/// tokens each generated (one per sequence, prefill or decode).
pub(super) fn iteration_records(
    buffer: &LlmServeBuffer,
    window_ns: u64,
    start_unix_ns: u64,
) -> Vec<BatchRecord> {
    buffer
        .iterations()
        .iter()
        .filter(|i| i.end_ns <= window_ns)
        .enumerate()
        .map(|(index, i)| BatchRecord {
            index: index as u64,
            start_unix_ns: start_unix_ns + i.start_ns,
            end_unix_ns: start_unix_ns + i.end_ns,
            samples: i.sequences,
            phase: Some(match i.kind {
                IterationKind::Prefill => Phase::Prefill,
                IterationKind::Decode => Phase::Decode,
            }),
            sequences: Some(i.sequences),
            kv_reserved_tokens: Some(i.kv_reserved_tokens),
        })
        .collect()
}

/// Decode steps warmed at each batch size: `--warmup-batches` (at least one), as far as the
/// longest output and the context allow (each warmup sequence starts at a prompt's length, the
/// longest at most).
pub(super) fn warmup_decodes(warmup_batches: u32, plan: &LlmServePlan) -> u32 {
    let c = &plan.config;
    warmup_batches
        .max(1)
        .min(longest_output(c).saturating_sub(1))
        .min(c.context_tokens.saturating_sub(longest_prompt(c)))
}

/// The longest prompt of the plan's requests, tokens.
fn longest_prompt(c: &ServeLlmConfig) -> u32 {
    c.prompt_tokens_max.unwrap_or(c.prompt_tokens)
}

/// The longest output of the plan's requests, tokens.
fn longest_output(c: &ServeLlmConfig) -> u32 {
    c.output_tokens_max.unwrap_or(c.output_tokens)
}

/// The warmup's prompts: the shortest and the longest of the requests (one where they are the
/// same), so both ends of the window's prefill shapes have run before it.
fn warmup_prompts(c: &ServeLlmConfig) -> Vec<u32> {
    let mut prompts = vec![c.prompt_tokens, longest_prompt(c)];
    prompts.dedup();
    prompts
}

/// The requests' lengths for the log: `32 + 16`, or the ranges and where they came from.
fn lengths_text(c: &ServeLlmConfig) -> String {
    let range = |min: u32, max: u32| {
        if min == max {
            min.to_string()
        } else {
            format!("{min}-{max}")
        }
    };
    let text = format!(
        "{} + {}",
        range(c.prompt_tokens, longest_prompt(c)),
        range(c.output_tokens, longest_output(c))
    );
    if c.lengths == LLM_LENGTHS_FIXED {
        text
    } else {
        format!("{text} ({})", c.lengths)
    }
}

/// A failed window's typed cause as the worker's (the step's own failure keeps its kind).
fn window_error(e: TimingError<LlmError>) -> TimingError<WorkloadError> {
    match e {
        TimingError::Step { batches, source } => TimingError::Step {
            batches,
            source: llm_failure(source),
        },
        TimingError::CapacityExhausted { capacity } => TimingError::CapacityExhausted { capacity },
        TimingError::Cancelled { batches } => TimingError::Cancelled { batches },
    }
}

/// A `serve-llm` worker's load: the LLM behind the continuous batcher, and its plan.
#[derive(Debug)]
pub(super) struct ServeLlm(pub(super) LlmServePlan);

impl Measure for ServeLlm {
    type Warm = LlmServeStep;

    fn build_and_warm(&self, run: &mut Run, cx: &Cx<'_>) -> Result<LlmServeStep, WorkerError> {
        run.build_and_warm_serve_llm(&self.0, cx.args, cx.clock, cx.progress)
    }

    fn window(
        self,
        step: LlmServeStep,
        run: &mut Run,
        start: Start,
        cx: &Cx<'_>,
    ) -> Result<(), WorkerError> {
        run.serve_llm_window(
            step,
            self.0,
            start.unix_ns,
            start.late_margin,
            cx.args,
            cx.clock,
            cx.progress,
        )
    }
}

impl Run {
    pub(super) fn build_and_warm_serve_llm(
        &mut self,
        plan: &LlmServePlan,
        args: &WorkerArgs,
        clock: &Clock,
        progress: &Progress,
    ) -> Result<LlmServeStep, WorkerError> {
        let in_warmup = |source| WorkerError::Workload {
            stage: Stage::Warmup,
            source,
        };
        let build_start = clock.now_unix_ns();
        let f = &args.flags;
        // The MPS share and what the runtime reports, before anything is allocated.
        self.report.share = crate::share::observe(f);
        let name = f
            .model_for(Workload::ServeLlm)
            .map_err(|e| in_warmup(WorkloadError::InvalidOption(e.to_string())))?;
        let model: LlmPreset = name.parse().map_err(|e| in_warmup(llm_failure(e)))?;
        let c = &plan.config;
        let options = LlmServeOptions {
            model,
            device: f.device,
            max_batch: c.max_batch,
            max_prompt_tokens: longest_prompt(c),
            precision: f.precision,
            seed: f.seed,
            execution: args.execution(),
        };
        let mut step = LlmServeStep::for_preset(&options).map_err(|e| in_warmup(llm_failure(e)))?;
        let info = step.info();
        let llm = step.model();
        let precision = llm.placement().precision;
        self.report.config.parameter_count = Some(info.parameter_count);
        self.report.config.precision = precision;
        self.report.config.llm = Some(LlmConfig {
            model: model.as_str().to_owned(),
            batch_size: c.max_batch,
            prompt_tokens: c.prompt_tokens,
            output_tokens: c.output_tokens,
            precision,
            context_tokens: llm.config().context,
            kv_cache_bytes: Some(llm.cache_bytes()),
            decode_read_bytes: None,
            decode_attention: Some(llm.decode_attention()),
        });
        self.record_device(args, &info, build_start, clock, progress)?;
        let decodes = warmup_decodes(f.warmup_batches, plan);
        let medians = step
            .warm_up(&warmup_prompts(c), decodes)
            .map_err(|e| in_warmup(llm_failure(e)))?;
        let sizes: Vec<String> = medians
            .iter()
            .map(|(b, d)| format!("{b}: {:.2} ms", d.as_secs_f64() * 1e3))
            .collect();
        let batches = match step.execution() {
            Execution::CudaGraph => format!(
                "batch-size bucket's CUDA graph ({} graphs for up to {})",
                step.bucket_sizes().len(),
                c.max_batch
            ),
            Execution::Eager => format!("batch up to {}", c.max_batch),
        };
        progress.phase(
            "warmup",
            &format!(
                "done: a prefill and {decodes} decode steps at each {batches} (median decode \
                 {}); {} requests scheduled ({} arrivals, {:.1}/s) of {} tokens, KV budget {} \
                 tokens, cache {:.1} MiB",
                if sizes.is_empty() {
                    "none".to_owned()
                } else {
                    sizes.join(", ")
                },
                plan.requests.len(),
                plan.schedule.kind(),
                plan.schedule.realized_rate_per_s(),
                lengths_text(c),
                c.kv_budget_tokens,
                step.model().cache_bytes() as f64 / f64::from(1u32 << 20)
            ),
        );
        Ok(step)
    }

    #[expect(
        clippy::too_many_arguments,
        reason = "the window's inputs, each used once"
    )]
    pub(super) fn serve_llm_window(
        &mut self,
        mut step: LlmServeStep,
        plan: LlmServePlan,
        start_unix_ns: u64,
        late_margin: Duration,
        args: &WorkerArgs,
        clock: &Clock,
        progress: &Progress,
    ) -> Result<(), WorkerError> {
        let host_start = coload_device::host_snapshot();
        let sampler = self.start_sampler(args, clock, progress);
        let mut buffer = LlmServeBuffer::new(&plan.requests, &plan.policy);
        let serve_clock = MonotonicClock::new(clock.to_instant(start_unix_ns));

        // The LLM serve window: nothing else happens in this thread until it returns.
        self.termination.enter_window();
        let outcome = run_llm_serve(
            &mut step,
            &serve_clock,
            &plan.requests,
            &plan.policy,
            &mut buffer,
            &self.termination.cancel,
        );
        self.termination.leave_window();

        let window_ns = plan.requests.window_ns();
        let actual_start_unix_ns = start_unix_ns + outcome.actual_start_ns;
        self.after_window(
            sampler,
            &host_start,
            actual_start_unix_ns,
            start_unix_ns + window_ns,
        );
        self.report.memory = step.peak_memory();
        self.batches = iteration_records(&buffer, window_ns, start_unix_ns);
        let timing = self
            .report
            .barrier
            .get_or_insert_with(BarrierTiming::default);
        timing.actual_start_unix_ns = Some(actual_start_unix_ns);
        timing.lateness_ns = Some(outcome.actual_start_ns as i64);
        self.report.window = Some(WindowInfo {
            start_unix_ns: actual_start_unix_ns,
            end_unix_ns: start_unix_ns + window_ns,
            batches: outcome.iterations_in_window,
            samples: outcome.tokens_in_window,
        });
        self.report.serve_llm = Some(LlmServeWindowInfo {
            requests: outcome.requests,
            completed: outcome.requests_completed,
            unfinished: outcome.requests_unfinished,
            not_admitted: outcome.requests_not_admitted,
            tokens_in_window: outcome.tokens_in_window,
            iterations_in_window: outcome.iterations_in_window,
            kv_reserved_tokens_max: buffer
                .iterations()
                .iter()
                .map(|i| i.kv_reserved_tokens)
                .max()
                .unwrap_or(0),
        });
        let latency = latency_line(&llm_request_records(&buffer, &plan.requests));
        self.llm_records = Some(LlmRecords {
            buffer,
            plan,
            start_unix_ns,
        });
        if let Some(error) = outcome.error {
            return Err(WorkerError::Window(window_error(error)));
        }
        check_lateness(
            outcome.actual_start_ns as i64,
            late_margin,
            outcome.iterations_in_window as usize,
        )?;
        if outcome.iterations_in_window == 0 {
            return Err(WorkerError::EmptyWindow {
                window_s: args.flags.window_s.get(),
            });
        }
        progress.phase(
            "window",
            &format!(
                "done: {} requests, {} completed, {} unfinished and {} not admitted at the end; \
                 {} tokens in {} iterations ({:.1} tokens/s); {latency}",
                outcome.requests,
                outcome.requests_completed,
                outcome.requests_unfinished,
                outcome.requests_not_admitted,
                outcome.tokens_in_window,
                outcome.iterations_in_window,
                outcome.tokens_in_window as f64 / args.flags.window_s.get()
            ),
        );
        Ok(())
    }
}

/// The completed requests' TTFT and TPOT medians and p99, for the log (after the window).
fn latency_line(records: &[LlmRequestRecord]) -> String {
    let mut ttft: Vec<u64> = records
        .iter()
        .filter_map(LlmRequestRecord::ttft_ns)
        .collect();
    let mut tpot: Vec<f64> = records
        .iter()
        .filter_map(LlmRequestRecord::tpot_ns)
        .collect();
    if ttft.is_empty() {
        return "no request had its first token".to_owned();
    }
    ttft.sort_unstable();
    tpot.sort_unstable_by(f64::total_cmp);
    let rank = |q: f64, n: usize| ((q * n as f64).ceil() as usize).clamp(1, n) - 1;
    let ms = |ns: f64| ns / 1e6;
    let tpot_text = if tpot.is_empty() {
        "no TPOT (no completed request of two tokens or more)".to_owned()
    } else {
        format!(
            "TPOT p50 {:.3} ms, p99 {:.3} ms",
            ms(tpot[rank(0.5, tpot.len())]),
            ms(tpot[rank(0.99, tpot.len())])
        )
    };
    format!(
        "TTFT p50 {:.3} ms, p99 {:.3} ms; {tpot_text} (requests seen by the worker; \
         bench-summarize counts the rest)",
        ms(ttft[rank(0.5, ttft.len())] as f64),
        ms(ttft[rank(0.99, ttft.len())] as f64)
    )
}

#[cfg(test)]
mod tests {
    use coload_timing::{
        ArrivalSchedule, LlmRequests, LlmServePolicy, MockIterationStep, SimulatedClock,
    };
    use std::sync::atomic::AtomicBool;

    use super::*;

    const MS: u64 = 1_000_000;

    /// Two requests 10 ms apart of 2 + 3 tokens, a prefill of 4 ms and a decode of 2 ms, one
    /// sequence at a time, over a 30 ms window starting at unix 1000 ms.
    fn run() -> LlmRecords {
        let schedule = ArrivalSchedule::from_offsets_text("t", "0\n0.010\n", 30 * MS).unwrap();
        let requests = LlmRequests::fixed(&schedule, 2, 3).unwrap();
        let policy = LlmServePolicy::new(1, 5, 64).unwrap();
        let clock = SimulatedClock::new();
        let mut step = MockIterationStep::fixed(Duration::from_millis(4), Duration::from_millis(2))
            .simulated(&clock);
        let mut buffer = LlmServeBuffer::new(&requests, &policy);
        let out = run_llm_serve(
            &mut step,
            &clock,
            &requests,
            &policy,
            &mut buffer,
            &AtomicBool::new(false),
        );
        assert!(out.error.is_none());
        let config = coload_cohort_schema::ServeLlmConfig {
            rate_per_s: 2.0 / 0.03,
            arrivals: "file".into(),
            arrivals_file: Some("t".into()),
            seed: 0,
            prompt_tokens: 2,
            output_tokens: 3,
            lengths: LLM_LENGTHS_FIXED.into(),
            prompt_tokens_max: None,
            output_tokens_max: None,
            max_batch: 1,
            kv_budget_tokens: 5,
            context_tokens: 64,
            policy: coload_cohort_schema::FCFS_PREFILL_FIRST.into(),
            ttft_slo_ms: None,
            tpot_slo_ms: None,
        };
        LlmRecords {
            buffer,
            plan: LlmServePlan {
                schedule,
                requests,
                policy,
                config,
            },
            start_unix_ns: 1000 * MS,
        }
    }

    /// Request 0: prefill 0-4, decodes 4-6 and 6-8 (done at 8). Request 1 arrives at 10:
    /// prefill 10-14, decodes 14-16 and 16-18.
    #[test]
    fn records_carry_the_schedule_in_unix_time() {
        let r = run();
        let lines: Vec<LlmRequestLine> = r.lines().collect();
        assert_eq!(lines.len(), 2);
        let at = |ms: u64| (1000 + ms) * MS;
        assert_eq!(lines[0].arrival_unix_ns, at(0));
        assert_eq!(lines[0].token_unix_ns, [at(4), at(6), at(8)]);
        assert_eq!(lines[1].admitted_unix_ns, Some(at(10)));
        assert_eq!(lines[1].token_unix_ns, [at(14), at(16), at(18)]);
        assert!(lines.iter().all(|l| l.completed && l.tokens_generated == 3));
        let batches = iteration_records(&r.buffer, 30 * MS, r.start_unix_ns);
        let kinds: Vec<(Option<Phase>, u64, u64, Option<u64>)> = batches
            .iter()
            .map(|b| (b.phase, b.index, b.end_unix_ns, b.kv_reserved_tokens))
            .collect();
        assert_eq!(
            kinds,
            [
                (Some(Phase::Prefill), 0, at(4), Some(5)),
                (Some(Phase::Decode), 1, at(6), Some(5)),
                (Some(Phase::Decode), 2, at(8), Some(5)),
                (Some(Phase::Prefill), 3, at(14), Some(5)),
                (Some(Phase::Decode), 4, at(16), Some(5)),
                (Some(Phase::Decode), 5, at(18), Some(5)),
            ]
        );
        // A window ending at 15 ms keeps the iterations that ended by then only.
        assert_eq!(iteration_records(&r.buffer, 15 * MS, 0).len(), 4);
        // And the lines read back through the schema's reader.
        let text: String = lines
            .iter()
            .map(|l| serde_json::to_string(l).unwrap() + "\n")
            .collect();
        let back: Vec<LlmRequestLine> =
            coload_cohort_schema::LlmRequestReader::new(std::path::Path::new("x"), text.as_bytes())
                .collect::<Result<_, _>>()
                .unwrap();
        assert_eq!(back, lines);
    }

    #[test]
    fn warmup_stays_inside_the_output_and_the_context() {
        let mut plan = run().plan;
        assert_eq!(warmup_decodes(20, &plan), 2, "output 3: two decodes");
        plan.config.output_tokens = 100;
        assert_eq!(warmup_decodes(20, &plan), 20);
        assert_eq!(warmup_decodes(0, &plan), 1);
        plan.config.prompt_tokens = 60;
        assert_eq!(warmup_decodes(20, &plan), 4, "context 64 - prompt 60");
        plan.config.output_tokens = 1;
        assert_eq!(warmup_decodes(20, &plan), 0);
        // With lengths in a range, the longest request bounds the warmup.
        plan.config.lengths = "uniform".into();
        plan.config.prompt_tokens = 8;
        plan.config.prompt_tokens_max = Some(50);
        plan.config.output_tokens_max = Some(10);
        assert_eq!(
            warmup_decodes(20, &plan),
            9,
            "longest output 10: nine decodes"
        );
        plan.config.prompt_tokens_max = Some(58);
        assert_eq!(
            warmup_decodes(20, &plan),
            6,
            "context 64 - longest prompt 58"
        );
        assert_eq!(warmup_prompts(&plan.config), [8, 58]);
        assert_eq!(lengths_text(&plan.config), "8-58 + 1-10 (uniform)");
        plan.config.prompt_tokens_max = Some(8);
        assert_eq!(warmup_prompts(&plan.config), [8]);
        assert_eq!(lengths_text(&run().plan.config), "2 + 3");
    }
}
