//! A built-in decoder-only transformer for LLM workloads: GPT-2 and Llama-style
//! models with random weights, a preallocated KV cache, and the closed-loop `decode` step.
//!
//! - [`LlmPreset`] / [`LlmConfig`]: `gpt2-small`, `tinyllama-1.1b` and two tiny models for the
//!   CPU; [`LlmConfig::param_count`] from the sizes alone.
//! - [`LlmModel`]: [`LlmModel::prefill`] (`[B, P]` tokens -> the last position's logits) and
//!   [`LlmModel::decode_step`] (`[B, 1]` -> logits) over a KV cache allocated once, with
//!   per-sequence positions; [`LlmModel::forward_full`] is the cache-free reference.
//! - [`DecodeStep`]: prefill, then greedy decoding to G tokens, then again; one iteration per
//!   [`coload_timing::Step::step`], eager or one CUDA-graph replay per decode iteration.
//! - [`LlmServeStep`]: the model behind `coload_timing::run_llm_serve`'s continuous batcher
//!   ([`coload_timing::IterationStep`]), running sequences kept compact in the cache's slots.
//!
//! See docs/llm.md for the method and the records proposed for the worker.

mod config;
mod decode;
mod model;
mod serve;

pub use coload_cohort_schema::DecodeAttention;
pub use config::{LlmArchitecture, LlmConfig, LlmPreset};
pub use decode::{DecodeOptions, DecodeStep};
pub use model::{LlmModel, LlmPlacement};
pub use serve::{LlmServeOptions, LlmServeStep, PROMPT_SHIFTS, decode_buckets, warmup_batches};
