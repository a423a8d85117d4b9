//! The decode worker: its step built from the flags, warmed up with whole cycles until the
//! cycle time stops falling, and its records tagged with their phase after the window.
//!
//! The window runner records no phase (the window allocates nothing and writes nothing but the
//! preallocated records). The step restarts its cycle right before the window, so batch `i`
//! of the window is iteration `i mod G` of a cycle, and `DecodeCycle::phase` says afterwards
//! which phase each record was.

use coload_cohort_schema::{BatchRecord, LlmConfig, Phase};
use coload_timing::{DecodeCycle, IterationKind, SteadyRule};
use coload_workload::{DecodeOptions, DecodeStep, LlmPreset, WorkloadError};

use crate::args::WorkerArgs;
use crate::load::llm_failure;

/// Builds the decode step the flags describe: the preset `--model` names for decode workers
/// (default `gpt2-small`), `--batch-size` sequences of `--prompt-tokens`, generating
/// `--output-tokens` each; `--precision` or bf16 on CUDA and fp32 on the CPU.
pub(super) fn build(args: &WorkerArgs) -> Result<DecodeStep, WorkloadError> {
    let f = &args.flags;
    let name = f
        .model_for(args.place.workload)
        .map_err(|e| WorkloadError::InvalidOption(e.to_string()))?;
    let model: LlmPreset = name.parse().map_err(llm_failure)?;
    let (prompt_tokens, output_tokens) = f.llm_tokens();
    let options = DecodeOptions {
        model,
        device: f.device,
        batch_size: f.batch_size,
        prompt_tokens,
        generate_tokens: output_tokens,
        precision: f.precision,
        seed: f.seed,
        execution: args.execution(),
        attention: None,
    };
    DecodeStep::new(&options).map_err(llm_failure)
}

/// What `worker.json`'s `config.llm` records of a built step.
pub(super) fn llm_config(step: &DecodeStep) -> LlmConfig {
    let options = step.options();
    let model = step.model();
    LlmConfig {
        model: options.model.as_str().to_owned(),
        batch_size: options.batch_size,
        prompt_tokens: options.prompt_tokens,
        output_tokens: options.generate_tokens,
        precision: model.placement().precision,
        context_tokens: model.config().context,
        kv_cache_bytes: Some(model.cache_bytes()),
        decode_read_bytes: step.decode_read_bytes(),
        decode_attention: Some(model.decode_attention()),
    }
}

/// The progress line that says what a decode step must read.
pub(super) fn describe_reads(bytes: u64) -> String {
    format!(
        "a decode step must read {:.1} MB (weights and the KV cache, mean over a cycle)",
        bytes as f64 / 1e6
    )
}

/// The warmup's rule: at least `--warmup-batches` rounded up to whole cycles (a prefill and
/// every decode position is then warm), none when none were asked for, judged on whole cycles
/// (a cycle's iterations differ by design: a prefill, then decode steps over a growing cache).
pub(super) fn warmup_rule(warmup_batches: u32, cycle: DecodeCycle) -> SteadyRule {
    SteadyRule::for_warmup(warmup_batches, cycle.generate_tokens())
}

/// The window's decode steps beside what they must read: the median decode step (nearest
/// rank, as the summary's TPOT p50) and the read rate it implies, `read_bytes` over that
/// median. Over a card's copy bandwidth the same bytes are the step's read floor, so the rate
/// against that bandwidth is the floor against the step. `None` without a decode record.
pub(super) fn describe_decode_steps(records: &[BatchRecord], read_bytes: u64) -> Option<String> {
    let mut steps_ns: Vec<u64> = records
        .iter()
        .filter(|r| r.phase == Some(Phase::Decode))
        .map(|r| r.end_unix_ns.saturating_sub(r.start_unix_ns))
        .collect();
    if steps_ns.is_empty() {
        return None;
    }
    steps_ns.sort_unstable();
    // Nearest rank: the ceil(n / 2)-th smallest.
    let median_ns = steps_ns[steps_ns.len().div_ceil(2) - 1].max(1);
    Some(format!(
        "decode steps: median {:.3} ms over {}; each must read {:.1} MB, read at {:.1} GB/s",
        median_ns as f64 / 1e6,
        steps_ns.len(),
        read_bytes as f64 / 1e6,
        read_bytes as f64 / median_ns as f64
    ))
}

/// Tags every record of a window that began at a cycle's start with its phase.
pub(super) fn tag_phases(records: &mut [BatchRecord], cycle: DecodeCycle) {
    for r in records {
        r.phase = Some(match cycle.phase(r.index).0 {
            IterationKind::Prefill => Phase::Prefill,
            IterationKind::Decode => Phase::Decode,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warmup_covers_whole_cycles() {
        let cycle = DecodeCycle::new(8, 5, 64).unwrap();
        let min = |w| warmup_rule(w, cycle).min_batches();
        assert_eq!(min(0), 0);
        assert_eq!(min(1), 5);
        assert_eq!(min(5), 5);
        assert_eq!(min(20), 20);
        assert_eq!(min(21), 25);
        // It judges whole cycles, and stops on one's end.
        let rule = warmup_rule(20, cycle);
        assert_eq!(rule.block_batches, 5);
        assert_eq!(rule.max_batches() % 5, 0);
    }

    #[test]
    fn the_decode_line_takes_the_median_decode_step() {
        let record = |index: u64, ms: u64, phase| BatchRecord {
            index,
            start_unix_ns: 0,
            end_unix_ns: ms * 1_000_000,
            samples: 4,
            phase: Some(phase),
            sequences: None,
            kv_reserved_tokens: None,
        };
        // A slow prefill, then decode steps of 4, 1, 2 and 3 ms: the nearest-rank median of
        // four is the second smallest, 2 ms; 500 MB in 2 ms is 250 GB/s.
        let records = [
            record(0, 90, Phase::Prefill),
            record(1, 4, Phase::Decode),
            record(2, 1, Phase::Decode),
            record(3, 2, Phase::Decode),
            record(4, 3, Phase::Decode),
        ];
        let line = describe_decode_steps(&records, 500_000_000).unwrap();
        assert_eq!(
            line,
            "decode steps: median 2.000 ms over 4; each must read 500.0 MB, read at 250.0 GB/s"
        );
        assert_eq!(describe_decode_steps(&records[..1], 1), None);
    }

    #[test]
    fn records_are_tagged_by_their_place_in_the_cycle() {
        let cycle = DecodeCycle::new(8, 3, 64).unwrap();
        let mut records: Vec<BatchRecord> = (0..7)
            .map(|i| BatchRecord {
                index: i,
                start_unix_ns: i * 10,
                end_unix_ns: i * 10 + 5,
                samples: 4,
                phase: None,
                sequences: None,
                kv_reserved_tokens: None,
            })
            .collect();
        tag_phases(&mut records, cycle);
        let phases: Vec<&str> = records
            .iter()
            .map(|r| r.phase.map_or("none", Phase::as_str))
            .collect();
        assert_eq!(
            phases,
            [
                "prefill", "decode", "decode", "prefill", "decode", "decode", "prefill"
            ]
        );
    }
}
