//! The plan an open-loop worker's flags make (`coload_spec::ServeFlags`: `--rate`,
//! `--arrivals`, `--arrivals-file`, `--max-batch`, `--max-queue-delay-ms`, `--slo-ms`; for
//! `serve-llm` `--kv-budget-tokens`, `--ttft-slo-ms`, `--tpot-slo-ms` and the LLM's token
//! counts): the arrival schedule and the batching policy, built and checked before anything
//! else runs.

use std::time::Duration;

use coload_cohort_schema::{FCFS_PREFILL_FIRST, ServeConfig, ServeLlmConfig, Workload};
use coload_spec::{Arrivals, llm_context_tokens};
use coload_timing::{ArrivalKind, ArrivalSchedule, LlmRequests, LlmServePolicy, ServePolicy};

use crate::cli::Args;

/// What an open-loop worker will do in its window, decided before it starts.
#[derive(Debug)]
pub(crate) enum OpenLoop {
    /// A `serve` worker's requests and batcher.
    Serve(ServePlan),
    /// A `serve-llm` worker's requests and continuous batcher.
    Llm(LlmServePlan),
}

/// What a serve worker will do in its window, decided before it starts.
#[derive(Debug)]
pub(crate) struct ServePlan {
    pub(crate) schedule: ArrivalSchedule,
    pub(crate) policy: ServePolicy,
    pub(crate) config: ServeConfig,
}

/// What a `serve-llm` worker will do in its window, decided before it starts: every request's
/// arrival and lengths, checked against the policy (`LlmServePolicy::check`).
#[derive(Debug)]
pub(crate) struct LlmServePlan {
    pub(crate) schedule: ArrivalSchedule,
    pub(crate) requests: LlmRequests,
    pub(crate) policy: LlmServePolicy,
    pub(crate) config: ServeLlmConfig,
}

/// Builds the plan of an open-loop worker (`None` for the other workloads), or says which flag
/// is wrong and what to do.
pub(crate) fn open_loop(args: &Args) -> Result<Option<OpenLoop>, String> {
    Ok(match args.place.workload {
        Workload::Serve => plan(args)?.map(OpenLoop::Serve),
        Workload::ServeLlm => Some(OpenLoop::Llm(llm_plan(args)?)),
        _ => None,
    })
}

/// The arrivals `--arrivals-file` or `--rate` and `--arrivals` describe over the window.
fn schedule(args: &Args) -> Result<ArrivalSchedule, String> {
    let s = &args.serve;
    let window_ns = args.flags.window_s.as_nanos();
    match (&s.arrivals_file, s.rate) {
        (Some(path), _) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read --arrivals-file {}: {e}", path.display()))?;
            ArrivalSchedule::from_offsets_text(&path.display().to_string(), &text, window_ns)
        }
        (None, Some(rate)) => match s.arrivals {
            Arrivals::Poisson => ArrivalSchedule::poisson(rate, args.flags.seed, window_ns),
            Arrivals::Uniform => ArrivalSchedule::uniform(rate, window_ns),
        },
        (None, None) => {
            return Err(format!(
                "--workload {} needs --rate R (requests per second) or --arrivals-file FILE",
                args.place.workload
            ));
        }
    }
    .map_err(|e| e.to_string())
}

/// The plan of a `serve-llm` worker: every request of `--prompt-tokens` and `--output-tokens`
/// at the schedule's arrivals, under `--max-batch` and the KV budget.
fn llm_plan(args: &Args) -> Result<LlmServePlan, String> {
    let s = &args.serve;
    let f = &args.flags;
    let model = f.model_for(Workload::ServeLlm).map_err(|e| e.to_string())?;
    let context_tokens = llm_context_tokens(&model)
        .ok_or_else(|| format!("--model: {model} is not a built-in LLM"))?;
    let kv_budget_tokens = s.kv_budget_tokens_for(f).map_err(|e| e.to_string())?;
    let (prompt_tokens, output_tokens) = f.llm_tokens();
    let schedule = schedule(args)?;
    let requests = LlmRequests::fixed(&schedule, prompt_tokens, output_tokens)
        .map_err(|e| format!("--rate: {e}"))?;
    let policy = LlmServePolicy::new(s.max_batch, kv_budget_tokens, context_tokens)
        .map_err(|e| format!("--max-batch: {e}"))?;
    policy
        .check(&requests)
        .map_err(|e| format!("--prompt-tokens: {e}"))?;
    let config = ServeLlmConfig {
        rate_per_s: s.rate.unwrap_or_else(|| schedule.realized_rate_per_s()),
        arrivals: schedule.kind().as_str().to_owned(),
        arrivals_file: s.arrivals_file.as_ref().map(|p| p.display().to_string()),
        seed: f.seed,
        prompt_tokens,
        output_tokens,
        max_batch: s.max_batch,
        kv_budget_tokens,
        context_tokens,
        policy: FCFS_PREFILL_FIRST.to_owned(),
        ttft_slo_ms: s.ttft_slo_ms,
        tpot_slo_ms: s.tpot_slo_ms,
    };
    Ok(LlmServePlan {
        schedule,
        requests,
        policy,
        config,
    })
}

/// Builds the plan of a serve worker (`None` for the other workloads), or says which flag is
/// wrong and what to do.
fn plan(args: &Args) -> Result<Option<ServePlan>, String> {
    // The flags were checked against the workload by `Args::validate` (coload_spec's rules:
    // serve flags for serve workers only, eager only, the numbers' ranges).
    let s = &args.serve;
    if args.place.workload != Workload::Serve {
        return Ok(None);
    }
    let policy = ServePolicy::new(
        s.max_batch,
        // Checked by coload_spec (finite, >= 0); a value too large for a Duration is refused.
        Duration::try_from_secs_f64(s.max_queue_delay_ms / 1e3)
            .map_err(|e| format!("--max-queue-delay-ms {}: {e}", s.max_queue_delay_ms))?,
    )
    .map_err(|e| e.to_string())?;
    let schedule = schedule(args)?;
    let config = ServeConfig {
        rate_per_s: s.rate.unwrap_or_else(|| schedule.realized_rate_per_s()),
        arrivals: schedule.kind().as_str().to_owned(),
        arrivals_file: s.arrivals_file.as_ref().map(|p| p.display().to_string()),
        max_batch: s.max_batch,
        max_queue_delay_ms: s.max_queue_delay_ms,
        padded_sizes: policy.sizes().to_vec(),
        slo_ms: s.slo_ms,
    };
    debug_assert!(schedule.kind() != ArrivalKind::File || s.arrivals_file.is_some());
    Ok(Some(ServePlan {
        schedule,
        policy,
        config,
    }))
}
