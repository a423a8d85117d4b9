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
