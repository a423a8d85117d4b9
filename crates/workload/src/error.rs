//! The errors of this crate.

use std::path::PathBuf;

use coload_cohort_schema::FailureKind;

/// Why a TorchScript file (`--model-file`) cannot be used. Each is found while the step is
/// built, before the worker reaches the barrier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ModelFileProblem {
    /// No file at that path.
    Missing,
    /// The file exists but cannot be read.
    Unreadable,
    /// libtorch cannot load it as a TorchScript module (a state dict, a pickle, any other file).
    NotTorchScript,
    /// Its forward refuses an input of `--input-shape`.
    InputShape,
    /// Its forward does not return one `[batch, num_classes]` tensor of logits.
    OutputShape,
    /// It has no parameter that requires a gradient, so there is nothing to train.
    NoParameters,
}

impl ModelFileProblem {
    /// The failure's name for `worker.json`'s `failure.kind`.
    #[must_use]
    pub fn kind(self) -> FailureKind {
        match self {
            ModelFileProblem::Missing => FailureKind::ModelFileMissing,
            ModelFileProblem::Unreadable => FailureKind::ModelFileUnreadable,
            ModelFileProblem::NotTorchScript => FailureKind::ModelFileNotTorchscript,
            ModelFileProblem::InputShape => FailureKind::ModelFileInputShape,
            ModelFileProblem::OutputShape => FailureKind::ModelFileOutputShape,
            ModelFileProblem::NoParameters => FailureKind::ModelFileNoParameters,
        }
    }
}

/// What went wrong building or running the workload.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadError {
    /// The device ran out of memory (CUDA out of memory, or a host allocation failed on CPU).
    #[error("out of memory: {0}")]
    OutOfMemory(String),
    /// Any other libtorch error, with libtorch's message.
    #[error("libtorch error: {0}")]
    Libtorch(String),
    /// A CUDA device was asked for but libtorch cannot use CUDA here.
    #[error("cuda unavailable: {0}")]
    CudaUnavailable(String),
    /// An option the workload cannot honour (a bad device string, a zero batch, ...).
    #[error("invalid option: {0}")]
    InvalidOption(String),
    /// A TorchScript file that cannot be used; `message` carries libtorch's where it had one.
    #[error("model file {}: {message}", path.display())]
    ModelFile {
        /// The file as given.
        path: PathBuf,
        /// What is wrong with it.
        problem: ModelFileProblem,
        /// What to do, and libtorch's message.
        message: String,
    },
    /// The step cannot be captured in (or replayed from) a CUDA graph: an operation that
    /// synchronizes with the host, a shape that changes, or a libtorch built without CUDA graphs.
    #[error("cuda graph: {0}")]
    CudaGraph(String),
}

impl WorkloadError {
    /// The failure's name for `worker.json`'s `failure.kind` (and through it the exit code).
    #[must_use]
    pub fn kind(&self) -> FailureKind {
        match self {
            WorkloadError::OutOfMemory(_) => FailureKind::OutOfMemory,
            WorkloadError::Libtorch(_) => FailureKind::LibtorchError,
            WorkloadError::CudaUnavailable(_) => FailureKind::CudaUnavailable,
            WorkloadError::InvalidOption(_) => FailureKind::InvalidOption,
            WorkloadError::ModelFile { problem, .. } => problem.kind(),
            WorkloadError::CudaGraph(_) => FailureKind::CudaGraph,
        }
    }

    /// Whether the device (or host) ran out of memory.
    #[must_use]
    pub fn is_out_of_memory(&self) -> bool {
        matches!(self, WorkloadError::OutOfMemory(_))
    }

    /// Classifies a libtorch message: allocation failures become [`WorkloadError::OutOfMemory`].
    pub(crate) fn from_libtorch(message: impl Into<String>) -> Self {
        let message = clean_message(&message.into());
        let lower = message.to_ascii_lowercase();
        // cuBLAS and cuDNN report a full device as their own status when creating a handle
        // (`CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate(handle)`): what a worker sees
        // when another tenant holds the GPU's memory (a hog).
        if lower.contains("out of memory")
            || lower.contains("can't allocate memory")
            || lower.contains("not enough memory")
            || lower.contains("status_alloc_failed")
        {
            WorkloadError::OutOfMemory(message)
        } else {
            WorkloadError::Libtorch(message)
        }
    }
}

impl From<tch::TchError> for WorkloadError {
    fn from(err: tch::TchError) -> Self {
        match err {
            tch::TchError::Torch(message) => WorkloadError::from_libtorch(message),
            other => WorkloadError::from_libtorch(other.to_string()),
        }
    }
}

/// What the built-in LLM refuses: configurations that cannot make a transformer,
/// inputs of the wrong shape, prompts longer than the context, and libtorch's own failures.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LlmError {
    /// A model configuration that cannot be built (a zero size, heads that do not divide the
    /// width, ...).
    #[error("invalid LLM configuration: {0}")]
    Config(String),
    /// A count of tokens or sequences that must be at least 1.
    #[error("{what} must be at least 1, got {got}")]
    ZeroCount {
        /// What was counted (`prompt tokens`, `batch size`, ...).
        what: &'static str,
        /// The count given.
        got: i64,
    },
    /// A prompt (with the tokens to generate after it) longer than the model's context.
    #[error(
        "a prompt of {prompt_tokens} tokens followed by {generate_tokens} generated tokens needs \
         {} positions, more than the model's context of {context_tokens}; shorten the prompt \
         or the generation",
        (*prompt_tokens + *generate_tokens).saturating_sub(1)
    )]
    PromptTooLong {
        /// Prompt length, tokens.
        prompt_tokens: i64,
        /// Tokens to generate (the first comes from the prefill; 0 for a prefill alone).
        generate_tokens: i64,
        /// The model's context, tokens.
        context_tokens: i64,
    },
    /// A serve step asked for a prompt longer than the longest it was built for.
    #[error(
        "a prompt of {prompt_tokens} tokens is longer than the {max_prompt_tokens} this serve \
         step was built for; build it with the longest prompt of the window"
    )]
    PromptLongerThanBuilt {
        /// Prompt length asked for, tokens.
        prompt_tokens: i64,
        /// The longest the step holds, tokens.
        max_prompt_tokens: i64,
    },
    /// A sequence whose cache is full: one more decode step would write past the context.
    #[error(
        "sequence slot {slot} already holds {positions} positions, the model's whole context; \
         reset the cache (a new prefill) before decoding further"
    )]
    ContextFull {
        /// The cache slot.
        slot: usize,
        /// Positions it holds.
        positions: i64,
    },
    /// A decode step for a sequence slot that was never prefilled since the last reset.
    #[error("sequence slot {slot} has no prompt yet; prefill it before decoding")]
    NotPrefilled {
        /// The cache slot.
        slot: usize,
    },
    /// A tensor of the wrong shape.
    #[error("{what} must have shape {expected}, got {got:?}")]
    Shape {
        /// What the tensor is.
        what: &'static str,
        /// The shape it needs, in words.
        expected: String,
        /// The shape it has.
        got: Vec<i64>,
    },
    /// Sequence slots beyond the ones the cache was allocated for.
    #[error("sequence slots {first}..{end} do not exist: the KV cache holds {slots} sequences")]
    Slots {
        /// First slot asked for.
        first: i64,
        /// One past the last.
        end: i64,
        /// Slots allocated.
        slots: i64,
    },
    /// libtorch, the device or the CUDA graph failed.
    #[error(transparent)]
    Workload(#[from] WorkloadError),
}

impl LlmError {
    /// The failure's name for `worker.json`'s `failure.kind`: the workload's own for libtorch
    /// and device failures, `invalid_option` for everything the caller can fix.
    #[must_use]
    pub fn kind(&self) -> FailureKind {
        match self {
            LlmError::Workload(e) => e.kind(),
            _ => FailureKind::InvalidOption,
        }
    }
}

impl From<tch::TchError> for LlmError {
    fn from(err: tch::TchError) -> Self {
        LlmError::Workload(WorkloadError::from(err))
    }
}

/// libtorch's message without the wrapping a tch panic adds (`called \`Result::unwrap()\` on an
/// \`Err\` value: Torch("...")`, escaped) and without the C++ backtrace libtorch appends.
fn clean_message(raw: &str) -> String {
    let mut text = raw.trim();
    let mut escaped = false;
    if let Some(rest) = text.strip_prefix("called `Result::unwrap()` on an `Err` value: ") {
        text = rest;
        if let Some(inner) = text
            .strip_prefix("Torch(\"")
            .and_then(|t| t.strip_suffix("\")"))
        {
            text = inner;
            escaped = true;
        }
    }
    let unescaped;
    if escaped {
        unescaped = text
            .replace("\\n", "\n")
            .replace("\\\"", "\"")
            .replace("\\\\", "\\");
        text = &unescaped;
    }
    let end = ["\nException raised from", "\nframe #0"]
        .iter()
        .filter_map(|marker| text.find(marker))
        .min()
        .unwrap_or(text.len());
    text[..end].trim().to_owned()
}

/// Turns a caught panic's payload into an error. tch's panicking methods unwrap a `TchError`,
/// so the payload carries libtorch's message.
pub(crate) fn from_panic(payload: &(dyn std::any::Any + Send)) -> WorkloadError {
    let text = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("libtorch panicked without a message");
    WorkloadError::from_libtorch(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_classified() {
        let oom = WorkloadError::from_libtorch(
            "CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.10 GiB total capacity)",
        );
        assert!(oom.is_out_of_memory());
        assert_eq!(oom.kind(), FailureKind::OutOfMemory);
        let cpu = WorkloadError::from_libtorch(
            "[enforce fail at alloc_cpu.cpp:118] data. DefaultCPUAllocator: can't allocate memory",
        );
        assert!(cpu.is_out_of_memory());
        let cublas = WorkloadError::from_libtorch(
            "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
        );
        assert!(cublas.is_out_of_memory());
        assert!(
            WorkloadError::from_libtorch("cuDNN error: CUDNN_STATUS_ALLOC_FAILED")
                .is_out_of_memory()
        );
        let other = WorkloadError::from_libtorch("Target 5000 is out of bounds.");
        assert_eq!(other.kind(), FailureKind::LibtorchError);
        assert!(!other.is_out_of_memory());
        assert!(other.to_string().contains("Target 5000"));
    }

    #[test]
    fn tch_panic_wrapping_and_backtraces_are_removed() {
        let raw = "called `Result::unwrap()` on an `Err` value: Torch(\"CUDA out of memory. \
                   Tried to allocate 6.12 GiB. See \\\"docs\\\"\\nException raised from malloc \
                   at CUDACachingAllocator.cpp:1574 (most recent call first):\\nframe #0: x\")";
        let e = from_panic(&raw.to_owned());
        assert_eq!(
            e,
            WorkloadError::OutOfMemory(
                "CUDA out of memory. Tried to allocate 6.12 GiB. See \"docs\"".into()
            )
        );
        let plain = WorkloadError::from_libtorch("bad shape\nException raised from conv at x.cpp");
        assert_eq!(plain, WorkloadError::Libtorch("bad shape".into()));
    }

    #[test]
    fn panic_payloads_keep_their_message() {
        let e = from_panic(&String::from("Torch(\"boom\")"));
        assert_eq!(e, WorkloadError::Libtorch("Torch(\"boom\")".into()));
        let e = from_panic(&"static boom");
        assert!(e.to_string().contains("static boom"));
        let e = from_panic(&5_u8);
        assert!(e.to_string().contains("without a message"));
    }
}
