//! The plan an open-loop worker's flags make (`coload_spec::ServeFlags`: `--rate`,
//! `--arrivals`, `--arrivals-file`, `--max-batch`, `--max-queue-delay-ms`, `--slo-ms`; for
//! `serve-llm` `--kv-budget-tokens`, `--ttft-slo-ms`, `--tpot-slo-ms`, the LLM's token
//! counts and their maxima): the arrival schedule, every request's lengths and the batching
//! policy, built and checked before anything else runs.

use std::path::Path;
use std::time::Duration;

use coload_cohort_schema::{
    FCFS_PREFILL_FIRST, LLM_LENGTHS_FILE, LLM_LENGTHS_FIXED, LLM_LENGTHS_UNIFORM, ServeConfig,
    ServeLlmConfig, Workload,
};
use coload_spec::{Arrivals, llm_context_tokens};
use coload_timing::{
    ArrivalKind, ArrivalSchedule, LengthRange, LlmRequests, LlmServePolicy, LlmTrace, ServePolicy,
};

use crate::args::WorkerArgs;
use crate::error::ArgsError;

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
pub(crate) fn open_loop(args: &WorkerArgs) -> Result<Option<OpenLoop>, ArgsError> {
    Ok(match args.place.workload {
        Workload::Serve => plan(args)?.map(OpenLoop::Serve),
        Workload::ServeLlm => Some(OpenLoop::Llm(llm_plan(args)?)),
        _ => None,
    })
}

/// The text of `--arrivals-file`: a regular file of at most `MAX_TRACE_BYTES`.
fn read_trace(path: &Path) -> Result<String, ArgsError> {
    coload_cohort_schema::read_text(path, coload_cohort_schema::MAX_TRACE_BYTES).map_err(|e| {
        ArgsError::said(
            "--arrivals-file",
            format!("cannot read --arrivals-file: {e}"),
        )
    })
}

/// The flag whose arrivals a schedule's error is about.
fn arrivals_flag(args: &WorkerArgs) -> &'static str {
    if args.serve.arrivals_file.is_some() {
        "--arrivals-file"
    } else {
        "--rate"
    }
}

/// The arrivals `--arrivals-file` or `--rate` and `--arrivals` describe over the window.
fn schedule(args: &WorkerArgs) -> Result<ArrivalSchedule, ArgsError> {
    let s = &args.serve;
    let window_ns = args.flags.window_s.as_nanos();
    match (&s.arrivals_file, s.rate) {
        (Some(path), _) => ArrivalSchedule::from_offsets_text(
            &path.display().to_string(),
            &read_trace(path)?,
            window_ns,
        ),
        (None, Some(rate)) => match s.arrivals {
            Arrivals::Poisson => ArrivalSchedule::poisson(rate, args.flags.seed, window_ns),
            Arrivals::Uniform => ArrivalSchedule::uniform(rate, window_ns),
        },
        (None, None) => {
            return Err(ArgsError::said(
                "--rate",
                format!(
                    "--workload {} needs --rate R (requests per second) or --arrivals-file FILE",
                    args.place.workload
                ),
            ));
        }
    }
    .map_err(|e| ArgsError::said(arrivals_flag(args), e))
}

/// The plan of a `serve-llm` worker: requests at the schedule's arrivals, under `--max-batch`
/// and the KV budget, each of the lengths its trace line gives, or drawn from
/// `--prompt-tokens`..`--prompt-tokens-max` and `--output-tokens`..`--output-tokens-max` with
/// the seed, or fixed at `--prompt-tokens` and `--output-tokens`: every one decided here,
/// before the window.
fn llm_plan(args: &WorkerArgs) -> Result<LlmServePlan, ArgsError> {
    let s = &args.serve;
    let f = &args.flags;
    let model = f.model_for(Workload::ServeLlm)?;
    let context_tokens = llm_context_tokens(&model)
        .ok_or_else(|| ArgsError::value("--model", format!("{model} is not a built-in LLM")))?;
    let kv_budget_tokens = s.kv_budget_tokens_for(f)?;
    let lengths = s.llm_lengths(f)?;
    let policy = LlmServePolicy::new(s.max_batch, kv_budget_tokens, context_tokens)
        .map_err(|e| ArgsError::value("--max-batch", e))?;
    let (schedule, traced) = match &s.arrivals_file {
        Some(path) => llm_trace(args, path, &policy)?,
        None => (schedule(args)?, None),
    };
    let (requests, kind) = match traced {
        Some(requests) => (requests, LLM_LENGTHS_FILE),
        None if lengths.is_drawn() => {
            let range =
                |min, max, flag| LengthRange::new(min, max).map_err(|e| ArgsError::said(flag, e));
            let requests = LlmRequests::uniform(
                &schedule,
                range(
                    lengths.prompt_tokens,
                    lengths.prompt_tokens_max,
                    "--prompt-tokens-max",
                )?,
                range(
                    lengths.output_tokens,
                    lengths.output_tokens_max,
                    "--output-tokens-max",
                )?,
                f.seed,
            )
            .map_err(|e| ArgsError::value("--rate", e))?;
            (requests, LLM_LENGTHS_UNIFORM)
        }
        None => {
            let requests =
                LlmRequests::fixed(&schedule, lengths.prompt_tokens, lengths.output_tokens)
                    .map_err(|e| ArgsError::value("--rate", e))?;
            (requests, LLM_LENGTHS_FIXED)
        }
    };
    // The trace's requests were checked line by line; the flags' longest request by the spec,
    // and here again request by request.
    policy
        .check(&requests)
        .map_err(|e| ArgsError::value("--prompt-tokens", e))?;
    let ((prompt_tokens, prompt_tokens_max), (output_tokens, output_tokens_max)) = match kind {
        LLM_LENGTHS_FILE => {
            let (p, o) = (requests.prompt_range(), requests.output_range());
            let ends = |r: Option<LengthRange>| r.map_or((0, None), |r| (r.min(), Some(r.max())));
            (ends(p), ends(o))
        }
        LLM_LENGTHS_UNIFORM => (
            (lengths.prompt_tokens, Some(lengths.prompt_tokens_max)),
            (lengths.output_tokens, Some(lengths.output_tokens_max)),
        ),
        _ => ((lengths.prompt_tokens, None), (lengths.output_tokens, None)),
    };
    let config = ServeLlmConfig {
        rate_per_s: s.rate.unwrap_or_else(|| schedule.realized_rate_per_s()),
        arrivals: schedule.kind().as_str().to_owned(),
        arrivals_file: s.arrivals_file.as_ref().map(|p| p.display().to_string()),
        seed: f.seed,
        prompt_tokens,
        output_tokens,
        lengths: kind.to_owned(),
        prompt_tokens_max,
        output_tokens_max,
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

/// The arrivals of a `serve-llm` worker's `--arrivals-file`, and its requests when the file
/// gives their lengths (then no length is drawn, and a `--*-tokens-max` is refused).
fn llm_trace(
    args: &WorkerArgs,
    path: &Path,
    policy: &LlmServePolicy,
) -> Result<(ArrivalSchedule, Option<LlmRequests>), ArgsError> {
    let s = &args.serve;
    let name = path.display().to_string();
    let trace = LlmTrace::from_text(&name, &read_trace(path)?, args.flags.window_s.as_nanos())
        .map_err(|e| ArgsError::said("--arrivals-file", e))?;
    let requests = trace
        .requests(policy)
        .map_err(|e| ArgsError::said("--arrivals-file", e))?;
    if requests.is_some()
        && let Some(flag) = [
            (s.prompt_tokens_max.is_some(), "--prompt-tokens-max"),
            (s.output_tokens_max.is_some(), "--output-tokens-max"),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag))
    {
        return Err(ArgsError::value(
            flag,
            format!(
                "--arrivals-file {name} gives every request its prompt and output tokens, so \
                 nothing is drawn; leave {flag} out, or the file's length columns"
            ),
        ));
    }
    Ok((trace.schedule().clone(), requests))
}

/// Builds the plan of a serve worker (`None` for the other workloads), or says which flag is
/// wrong and what to do.
fn plan(args: &WorkerArgs) -> Result<Option<ServePlan>, ArgsError> {
    // The flags were checked against the workload by `WorkerArgs::validate` (coload_spec's rules:
    // serve flags for serve workers only, eager only, the numbers' ranges).
    let s = &args.serve;
    if args.place.workload != Workload::Serve {
        return Ok(None);
    }
    let policy = ServePolicy::new(
        s.max_batch,
        // Checked by coload_spec (finite, >= 0); a value too large for a Duration is refused.
        Duration::try_from_secs_f64(s.max_queue_delay_ms / 1e3).map_err(|e| {
            ArgsError::said(
                "--max-queue-delay-ms",
                format!("--max-queue-delay-ms {}: {e}", s.max_queue_delay_ms),
            )
        })?,
    )
    .map_err(|e| ArgsError::said("--max-batch", e))?;
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

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn args(extra: &[&str]) -> WorkerArgs {
        let mut argv = vec![
            "bench-worker",
            "--experiment",
            "e",
            "--replica",
            "0",
            "--count",
            "1",
            "--workload",
            "serve-llm",
            "--mode",
            "timeslice",
            "--out",
            "o",
            "--device",
            "cpu",
            "--model",
            "gpt2-tiny",
            "--prompt-tokens",
            "4",
            "--output-tokens",
            "2",
            "--window-s",
            "10",
        ];
        argv.extend_from_slice(extra);
        let parsed = WorkerArgs::try_parse_from(argv).unwrap();
        parsed.validate().unwrap();
        parsed
    }

    fn lengths(plan: &LlmServePlan) -> Vec<(u32, u32)> {
        plan.requests
            .requests()
            .iter()
            .map(|r| (r.prompt_tokens, r.output_tokens))
            .collect()
    }

    /// The lengths follow from the flags and the seed: the same plan twice, another with
    /// another seed, and the same lengths request by request at another rate.
    #[test]
    fn drawn_lengths_are_planned_from_the_seed() {
        let drawn = ["--prompt-tokens-max", "40", "--output-tokens-max", "20"];
        let at = |rate: &str, seed: &str| {
            let mut extra = vec!["--rate", rate, "--seed", seed];
            extra.extend_from_slice(&drawn);
            llm_plan(&args(&extra)).unwrap()
        };
        let a = at("20", "5");
        assert_eq!(lengths(&a), lengths(&at("20", "5")));
        assert_eq!(a.requests, at("20", "5").requests);
        assert_ne!(lengths(&a), lengths(&at("20", "6")));
        let faster = at("40", "5");
        assert_eq!(lengths(&a)[..], lengths(&faster)[..a.requests.len()]);
        assert!(a.requests.len() > 100);
        let p = a.requests.prompt_range().unwrap();
        let o = a.requests.output_range().unwrap();
        assert!(p.min() >= 4 && p.max() <= 40 && p.min() < p.max(), "{p:?}");
        assert!(o.min() >= 2 && o.max() <= 20 && o.min() < o.max(), "{o:?}");
        let c = &a.config;
        assert_eq!(c.lengths, LLM_LENGTHS_UNIFORM);
        assert_eq!(
            (
                c.prompt_tokens,
                c.prompt_tokens_max,
                c.output_tokens,
                c.output_tokens_max
            ),
            (4, Some(40), 2, Some(20))
        );
        // Without the maxima: fixed, as before.
        let fixed = llm_plan(&args(&["--rate", "20", "--seed", "5"])).unwrap();
        assert!(lengths(&fixed).iter().all(|&l| l == (4, 2)));
        assert_eq!(fixed.config.lengths, LLM_LENGTHS_FIXED);
        assert_eq!(fixed.config.prompt_tokens_max, None);
    }

    #[test]
    fn a_trace_gives_its_lengths_or_leaves_them_to_the_flags() {
        let dir = tempfile::tempdir().unwrap();
        let with = dir.path().join("with.txt");
        std::fs::write(&with, "0 10 3\n0.5 30 7\n1 5 1\n20 9 9\n").unwrap();
        let path = with.display().to_string();
        let plan = llm_plan(&args(&["--arrivals-file", &path])).unwrap();
        assert_eq!(lengths(&plan), [(10, 3), (30, 7), (5, 1)]);
        let c = &plan.config;
        assert_eq!(c.lengths, LLM_LENGTHS_FILE);
        assert_eq!(
            (
                c.prompt_tokens,
                c.prompt_tokens_max,
                c.output_tokens,
                c.output_tokens_max
            ),
            (5, Some(30), 1, Some(7))
        );
        assert_eq!(c.arrivals, "file");
        let without = dir.path().join("without.txt");
        std::fs::write(&without, "0\n0.5\n").unwrap();
        let path = without.display().to_string();
        let plan = llm_plan(&args(&["--arrivals-file", &path])).unwrap();
        assert_eq!(lengths(&plan), [(4, 2), (4, 2)]);
        assert_eq!(plan.config.lengths, LLM_LENGTHS_FIXED);
        // A trace without lengths takes drawn ones too.
        let plan = llm_plan(&args(&[
            "--arrivals-file",
            &path,
            "--prompt-tokens-max",
            "9",
        ]))
        .unwrap();
        assert_eq!(plan.config.lengths, LLM_LENGTHS_UNIFORM);
        assert!(
            lengths(&plan)
                .iter()
                .all(|&(p, o)| (4..=9).contains(&p) && o == 2)
        );
    }
}
