/// Why a timed window did not run as asked. `E` is the step's own error type
/// ([`crate::Step::Error`]), kept as it is so the caller can match on it.
#[derive(Debug, thiserror::Error)]
pub enum TimingError<E> {
    /// The step failed; the batches before it are kept.
    #[error("step failed after {batches} batches")]
    Step {
        /// Batches that completed before the failure.
        batches: usize,
        /// The step's error.
        #[source]
        source: E,
    },
    /// More batches completed than the buffer preallocated for; the window stopped early
    /// rather than allocate inside it.
    #[error(
        "the batch buffer (capacity {capacity}) filled before the window ended; \
         preallocate for more batches"
    )]
    CapacityExhausted {
        /// The buffer's capacity.
        capacity: usize,
    },
    /// The window was cancelled from outside (the worker received SIGTERM); the batches before
    /// it are kept.
    #[error("the window was cancelled after {batches} batches")]
    Cancelled {
        /// Batches that completed before the cancellation.
        batches: usize,
    },
}

/// Why a serve window's arrival schedule or batching policy cannot be used. Each message names
/// the bad value and what to do.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScheduleError {
    /// The request rate is not a positive, finite number.
    #[error("--rate must be a positive number of requests per second, got {rate_per_s}")]
    BadRate {
        /// The rate given.
        rate_per_s: f64,
    },
    /// The schedule would hold more requests than a window may.
    #[error(
        "the schedule would hold {requests} requests, more than the {max} one window may; \
         lower --rate or --window-s"
    )]
    TooManyRequests {
        /// Requests asked for (at least).
        requests: usize,
        /// The limit.
        max: usize,
    },
    /// An offsets file holds no offset at all.
    #[error(
        "{file} holds no arrival offsets; write one offset per line, in seconds from the window's start"
    )]
    EmptyOffsets {
        /// The file.
        file: String,
    },
    /// An offsets file holds offsets, none of them inside the window.
    #[error(
        "{file}: none of its {offsets} offsets falls inside the {window_s} s window; shift the \
         trace or lengthen --window-s"
    )]
    NoOffsetInWindow {
        /// The file.
        file: String,
        /// Offsets it holds.
        offsets: usize,
        /// The window, seconds.
        window_s: f64,
    },
    /// An offset is smaller than the one before it.
    #[error(
        "{file}:{line}: offset {offset_s} s comes before {previous_s} s on line {previous_line}; \
         sort the offsets (non-decreasing)"
    )]
    UnsortedOffsets {
        /// The file.
        file: String,
        /// The 1-based line of the offending offset.
        line: usize,
        /// Its value, seconds.
        offset_s: f64,
        /// The line of the offset before it.
        previous_line: usize,
        /// That offset, seconds.
        previous_s: f64,
    },
    /// A line of an offsets file is not an offset.
    #[error("{file}:{line}: {message}")]
    BadOffsetsLine {
        /// The file.
        file: String,
        /// The 1-based line.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
    /// A `serve-llm` trace's request cannot be served (longer than the model's context, more
    /// than the KV budget), or its requests together ask for more tokens than a window may
    /// record (no line then).
    #[error("{file}{}: {refusal}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    LlmTraceRefused {
        /// The file.
        file: String,
        /// The 1-based line of the refused request, where one is.
        line: Option<usize>,
        /// Why.
        refusal: LlmServeError,
    },
    /// The batching policy is not usable.
    #[error("{0}")]
    BadPolicy(String),
}

/// Why an LLM serve window's requests or scheduling policy cannot be used. Each
/// message names the bad value and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LlmServeError {
    /// A request asks for no prompt or no output token.
    #[error(
        "request {request} has {prompt_tokens} prompt and {output_tokens} output tokens; both \
         must be at least 1"
    )]
    ZeroTokens {
        /// Index of the request in arrival order.
        request: usize,
        /// Its prompt length, tokens.
        prompt_tokens: u32,
        /// Its output length, tokens.
        output_tokens: u32,
    },
    /// A request's prompt and output do not fit in the model's context.
    #[error(
        "request {request}: a prompt of {prompt_tokens} tokens and {output_tokens} output tokens \
         need {} positions, more than the model's context of {context_tokens}; shorten the \
         prompt or the output",
        u64::from(*prompt_tokens) + u64::from(*output_tokens)
    )]
    LongerThanContext {
        /// Index of the request in arrival order.
        request: usize,
        /// Its prompt length, tokens.
        prompt_tokens: u32,
        /// Its output length, tokens.
        output_tokens: u32,
        /// The model's context, tokens.
        context_tokens: u32,
    },
    /// A request alone needs more KV-cache tokens than the budget holds, so it could never be
    /// admitted.
    #[error(
        "request {request} reserves {needs_tokens} KV-cache tokens (prompt + output), more than \
         the whole budget of {budget_tokens}; raise the KV-cache budget"
    )]
    BudgetTooSmall {
        /// Index of the request in arrival order.
        request: usize,
        /// Tokens it reserves.
        needs_tokens: u64,
        /// The budget, tokens.
        budget_tokens: u64,
    },
    /// The arrivals are not in order, or one falls at or past the window's end.
    #[error(
        "request {request} arrives at {arrival_ns} ns: arrivals must be non-decreasing and \
         before the window's end ({window_ns} ns)"
    )]
    BadArrival {
        /// Index of the request.
        request: usize,
        /// Its arrival, ns from the window's start.
        arrival_ns: u64,
        /// The window, ns.
        window_ns: u64,
    },
    /// The window would record more tokens than one window may hold in memory.
    #[error(
        "the requests ask for {tokens} output tokens, more than the {max} one window may record; \
         lower the rate, the output length or the window"
    )]
    TooManyTokens {
        /// Output tokens asked for.
        tokens: u64,
        /// The limit.
        max: u64,
    },
    /// A range of lengths holds none, or starts at 0.
    #[error(
        "the length range {min}..={max} is empty or starts at 0; give a shortest length of at \
         least 1 and a longest of at least the shortest"
    )]
    BadLengthRange {
        /// The shortest length asked, tokens.
        min: u32,
        /// The longest, tokens.
        max: u32,
    },
    /// The policy's batch size or budget is not usable.
    #[error("{0}")]
    BadPolicy(String),
}
