//! The closed-loop `decode` workload's cycle: the LLM analogue of `infer`.
//!
//! A batch of B sequences prefills P prompt tokens (producing each sequence's first output
//! token), then decodes one token at a time with the KV cache until each has G output tokens,
//! then starts again from an empty cache. Each of those G iterations is one
//! [`crate::Step::step`] call, timed to completed device work by the ordinary window runner
//! ([`crate::run_window`]); `samples` is the tokens the iteration generated (B for a prefill and
//! for a decode alike), so a worker's samples/s is its generated tokens/s.
//!
//! The runner records no phase: a step whose cycle restarts right before the window (the
//! workload's `DecodeStep::restart`) makes batch `i` of the window iteration `i mod G` of a
//! cycle, and [`DecodeCycle::phase`] says which phase that is, so `batches.jsonl` can carry the
//! phase and the cache position of every record (see docs/llm.md).

use crate::error::LlmServeError;
use crate::llm_serve::IterationKind;

/// One cycle of the closed-loop decode workload: a prefill of `prompt_tokens`, then decodes
/// until `generate_tokens` tokens are out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DecodeCycle {
    prompt_tokens: u32,
    generate_tokens: u32,
}

impl DecodeCycle {
    /// A cycle of `prompt_tokens` and `generate_tokens` (both at least 1) on a model of
    /// `context_tokens` positions: the cache holds `prompt + generate - 1` of them at the end
    /// (the last token is produced, never fed back).
    pub fn new(
        prompt_tokens: u32,
        generate_tokens: u32,
        context_tokens: u32,
    ) -> Result<Self, LlmServeError> {
        if prompt_tokens == 0 || generate_tokens == 0 {
            return Err(LlmServeError::ZeroTokens {
                request: 0,
                prompt_tokens,
                output_tokens: generate_tokens,
            });
        }
        if u64::from(prompt_tokens) + u64::from(generate_tokens) - 1 > u64::from(context_tokens) {
            return Err(LlmServeError::LongerThanContext {
                request: 0,
                prompt_tokens,
                output_tokens: generate_tokens,
                context_tokens,
            });
        }
        Ok(DecodeCycle {
            prompt_tokens,
            generate_tokens,
        })
    }

    /// Prompt length, tokens.
    #[must_use]
    pub fn prompt_tokens(&self) -> u32 {
        self.prompt_tokens
    }

    /// Tokens generated per sequence and cycle (iterations per cycle).
    #[must_use]
    pub fn generate_tokens(&self) -> u32 {
        self.generate_tokens
    }

    /// Positions the cache holds at the end of a cycle.
    #[must_use]
    pub fn cache_positions(&self) -> u32 {
        self.prompt_tokens + self.generate_tokens - 1
    }

    /// Iteration `index` of a run that began at a cycle's start: its phase and the number of
    /// positions each sequence's cache holds when it begins (0 for a prefill).
    #[must_use]
    pub fn phase(&self, index: u64) -> (IterationKind, u32) {
        let k = (index % u64::from(self.generate_tokens)) as u32;
        if k == 0 {
            (IterationKind::Prefill, 0)
        } else {
            (IterationKind::Decode, self.prompt_tokens + k - 1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_repeat_every_generate_tokens_iterations() {
        let c = DecodeCycle::new(4, 3, 6).unwrap();
        let phases: Vec<_> = (0..7).map(|i| c.phase(i)).collect();
        assert_eq!(
            phases,
            [
                (IterationKind::Prefill, 0),
                (IterationKind::Decode, 4),
                (IterationKind::Decode, 5),
                (IterationKind::Prefill, 0),
                (IterationKind::Decode, 4),
                (IterationKind::Decode, 5),
                (IterationKind::Prefill, 0),
            ]
        );
        assert_eq!(c.cache_positions(), 6);
        let one = DecodeCycle::new(4, 1, 4).unwrap();
        assert!((0..3).all(|i| one.phase(i) == (IterationKind::Prefill, 0)));
    }

    #[test]
    fn empty_and_oversized_cycles_are_refused() {
        assert!(matches!(
            DecodeCycle::new(0, 3, 8),
            Err(LlmServeError::ZeroTokens { .. })
        ));
        assert!(matches!(
            DecodeCycle::new(3, 0, 8),
            Err(LlmServeError::ZeroTokens { .. })
        ));
        let e = DecodeCycle::new(6, 4, 8).unwrap_err();
        assert!(e.to_string().contains("context of 8"), "{e}");
        assert!(DecodeCycle::new(5, 4, 8).is_ok());
    }
}
