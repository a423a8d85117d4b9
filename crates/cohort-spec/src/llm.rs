//! What the spec knows of the built-in LLMs: their names and contexts, so that a
//! prompt longer than the model's context is refused at the door (a flag, a plan's line)
//! rather than by every worker after it built the model. `coload-workload` holds the models
//! themselves; `bench-worker`'s tests check that the two lists agree.

/// Every built-in LLM preset with its context, tokens, in the order `--help` lists them.
pub const LLM_MODELS: [(&str, u32); 4] = [
    ("gpt2-small", 1024),
    ("tinyllama-1.1b", 2048),
    ("gpt2-tiny", 64),
    ("llama-tiny", 128),
];

/// The LLM a `decode` worker runs when `--model` names none for it.
pub const DEFAULT_LLM_MODEL: &str = "gpt2-small";

/// `--prompt-tokens` when not given.
pub const DEFAULT_PROMPT_TOKENS: u32 = 128;

/// `--output-tokens` when not given.
pub const DEFAULT_OUTPUT_TOKENS: u32 = 128;

/// The context of the built-in LLM `name`, tokens; `None` when `name` is no LLM preset.
#[must_use]
pub fn llm_context_tokens(name: &str) -> Option<u32> {
    LLM_MODELS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, context)| *context)
}

/// The preset names, for messages: `gpt2-small, tinyllama-1.1b, ...`.
pub(crate) fn llm_model_names() -> String {
    LLM_MODELS.map(|(n, _)| n).join(", ")
}
