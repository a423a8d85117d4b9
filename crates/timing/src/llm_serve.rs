//! The LLM serve window: open-loop requests of a prompt and an output length,
//! continuous (iteration-level) batching over a KV-cache token budget, and per-request TTFT,
//! TPOT and inter-token latencies measured from the *scheduled* arrival.
//!
//! # Scheduling policy
//!
//! Iteration-level batching as Orca (Yu et al., OSDI 2022) introduced and vLLM (Kwon et al.,
//! SOSP 2023) runs by default in its V0 engine: the batch is re-formed at every iteration, so a
//! request joins as soon as there is room and leaves as soon as its last token is out, instead
//! of waiting for the whole batch. Before every iteration the scheduler
//!
//! 1. admits waiting requests in arrival order (FCFS, no overtaking: a head that does not fit
//!    blocks the ones behind it, as vLLM's FCFS queue does) while fewer than `max_batch`
//!    requests run and the KV-cache budget holds their reservation. A request reserves
//!    `prompt + output` tokens of cache when it is admitted and frees them when it completes;
//!    since the reservation covers the longest it can grow, a running request is never
//!    preempted or swapped (vLLM preempts instead; coload wants a schedule whose every step is
//!    known, and a budget check refuses up front a request that could never fit);
//! 2. if it admitted any, runs a **prefill iteration** over the newly admitted requests only:
//!    each processes its whole prompt and produces its first output token (its TTFT ends here);
//! 3. otherwise runs a **decode iteration** over every running request: each produces one more
//!    token;
//! 4. with nothing to run, waits for the next arrival.
//!
//! This is vLLM V0's default, *prefill-prioritizing* schedule, chosen over chunked prefill
//! (Sarathi-Serve, Agrawal et al., OSDI 2024; the default of vLLM V1) because its iterations are
//! pure: each is one prefill or one decode, so a recorded iteration time is the cost of one kind
//! of device work and the inter-token stall a prefill inflicts on the running requests is
//! visible as it is (the interference this project measures), rather than spread by a chunking
//! budget that would itself need tuning per GPU share. Chunked prefill is a later policy behind
//! the same [`IterationStep`] seam.
//!
//! # What is measured
//!
//! For each request: when it was admitted, and when each of its output tokens was complete (the
//! step returned, after a device synchronize). From these: TTFT = first token - scheduled
//! arrival (queueing included: no coordinated omission, a stall shows in every request that
//! arrived during it), TPOT = (last token - first token) / (output - 1), the inter-token
//! latencies, and end-to-end latency = last token - scheduled arrival. A request is *completed*
//! when its last token was out by the window's end. The iteration running across the end is run
//! to completion (the device stays loaded for the peers) and recorded past the end.
//!
//! Between the start and the end the runner reads the clock, compares integers and writes into
//! memory sized before the start: one slot per output token of every scheduled request and one
//! iteration record per possible iteration (a prefill admits at least one request and a decode
//! produces at least one token, so there are at most `requests + tokens` of them). No I/O,
//! logging, locking or allocation.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::arrivals::ArrivalSchedule;
use crate::error::{LlmServeError, TimingError};
use crate::serve_clock::{ServeClock, SimulatedClock};

/// The most output tokens one window may schedule: 128 Mi (1 GiB of token times). A real window
/// needs far fewer (20 requests/s of 256 tokens for 45 s is 230 400).
pub const MAX_WINDOW_TOKENS: u64 = 1 << 27;

/// The largest `max_batch` accepted (running sequences at once).
pub const MAX_RUNNING_LIMIT: u32 = 4096;

/// One request: when it is scheduled to arrive, how long its prompt is and how many tokens it
/// asks for (the first comes out of its prefill).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LlmRequest {
    /// Scheduled arrival, nanoseconds from the window's start.
    pub arrival_ns: u64,
    /// Prompt length, tokens.
    pub prompt_tokens: u32,
    /// Output length, tokens (at least 1).
    pub output_tokens: u32,
}

impl LlmRequest {
    /// KV-cache tokens the request reserves while it runs: prompt + output.
    #[must_use]
    pub fn reserved_tokens(self) -> u64 {
        u64::from(self.prompt_tokens) + u64::from(self.output_tokens)
    }
}

/// The requests of one window, in arrival order, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LlmRequests {
    requests: Vec<LlmRequest>,
    /// `token_offsets[r]` is where request `r`'s token times start in the flat token array.
    token_offsets: Vec<usize>,
    window_ns: u64,
}

impl LlmRequests {
    /// Requests at `schedule`'s arrivals, every one with the same prompt and output length.
    pub fn fixed(
        schedule: &ArrivalSchedule,
        prompt_tokens: u32,
        output_tokens: u32,
    ) -> Result<Self, LlmServeError> {
        let requests = schedule
            .offsets_ns()
            .iter()
            .map(|&arrival_ns| LlmRequest {
                arrival_ns,
                prompt_tokens,
                output_tokens,
            })
            .collect();
        Self::new(requests, schedule.window_ns())
    }

    /// `requests` over a window of `window_ns`: arrivals non-decreasing and before the end,
    /// every prompt and output at least one token, all outputs together at most
    /// [`MAX_WINDOW_TOKENS`].
    pub fn new(requests: Vec<LlmRequest>, window_ns: u64) -> Result<Self, LlmServeError> {
        let mut previous = 0;
        let mut token_offsets = Vec::with_capacity(requests.len() + 1);
        let mut tokens: u64 = 0;
        for (i, r) in requests.iter().enumerate() {
            if r.prompt_tokens == 0 || r.output_tokens == 0 {
                return Err(LlmServeError::ZeroTokens {
                    request: i,
                    prompt_tokens: r.prompt_tokens,
                    output_tokens: r.output_tokens,
                });
            }
            if r.arrival_ns < previous || r.arrival_ns >= window_ns {
                return Err(LlmServeError::BadArrival {
                    request: i,
                    arrival_ns: r.arrival_ns,
                    window_ns,
                });
            }
            previous = r.arrival_ns;
            token_offsets.push(tokens as usize);
            tokens += u64::from(r.output_tokens);
            if tokens > MAX_WINDOW_TOKENS {
                return Err(LlmServeError::TooManyTokens {
                    tokens,
                    max: MAX_WINDOW_TOKENS,
                });
            }
        }
        token_offsets.push(tokens as usize);
        Ok(LlmRequests {
            requests,
            token_offsets,
            window_ns,
        })
    }

    /// The requests, in arrival order.
    #[must_use]
    pub fn requests(&self) -> &[LlmRequest] {
        &self.requests
    }

    /// How many.
    #[must_use]
    pub fn len(&self) -> usize {
        self.requests.len()
    }

    /// Whether there are none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }

    /// The window, nanoseconds.
    #[must_use]
    pub fn window_ns(&self) -> u64 {
        self.window_ns
    }

    /// Output tokens asked for by all requests together.
    #[must_use]
    pub fn total_output_tokens(&self) -> usize {
        self.token_offsets.last().copied().unwrap_or(0)
    }
}

/// How many sequences may run at once, how many KV-cache tokens they may reserve together, and
/// the model's context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LlmServePolicy {
    max_batch: u32,
    kv_budget_tokens: u64,
    context_tokens: u32,
}

impl LlmServePolicy {
    /// At most `max_batch` running sequences (the KV cache's slots), reserving at most
    /// `kv_budget_tokens` together, on a model of `context_tokens` positions.
    pub fn new(
        max_batch: u32,
        kv_budget_tokens: u64,
        context_tokens: u32,
    ) -> Result<Self, LlmServeError> {
        if max_batch == 0 || max_batch > MAX_RUNNING_LIMIT {
            return Err(LlmServeError::BadPolicy(format!(
                "the maximum batch must be between 1 and {MAX_RUNNING_LIMIT} sequences, got \
                 {max_batch}"
            )));
        }
        if kv_budget_tokens == 0 || context_tokens == 0 {
            return Err(LlmServeError::BadPolicy(format!(
                "the KV-cache budget ({kv_budget_tokens} tokens) and the context \
                 ({context_tokens} tokens) must be at least 1"
            )));
        }
        Ok(LlmServePolicy {
            max_batch,
            kv_budget_tokens,
            context_tokens,
        })
    }

    /// The most sequences running at once.
    #[must_use]
    pub fn max_batch(&self) -> u32 {
        self.max_batch
    }

    /// The KV-cache budget, tokens.
    #[must_use]
    pub fn kv_budget_tokens(&self) -> u64 {
        self.kv_budget_tokens
    }

    /// The model's context, tokens.
    #[must_use]
    pub fn context_tokens(&self) -> u32 {
        self.context_tokens
    }

    /// Refuses requests this policy could never serve: longer than the context, or reserving
    /// more than the whole budget.
    pub fn check(&self, requests: &LlmRequests) -> Result<(), LlmServeError> {
        for (i, r) in requests.requests().iter().enumerate() {
            if r.reserved_tokens() > u64::from(self.context_tokens) {
                return Err(LlmServeError::LongerThanContext {
                    request: i,
                    prompt_tokens: r.prompt_tokens,
                    output_tokens: r.output_tokens,
                    context_tokens: self.context_tokens,
                });
            }
            if r.reserved_tokens() > self.kv_budget_tokens {
                return Err(LlmServeError::BudgetTooSmall {
                    request: i,
                    needs_tokens: r.reserved_tokens(),
                    budget_tokens: self.kv_budget_tokens,
                });
            }
        }
        Ok(())
    }
}

/// One iteration of device work over several sequences, returning only when the device is done.
///
/// Sequences live in KV-cache slots `0..max_batch`; the scheduler gives each admitted request a
/// free slot and keeps it until the request completes. Like [`crate::Step`], implementations
/// end with a device synchronize and must not allocate, log or lock: the runner calls them
/// inside the window.
pub trait IterationStep {
    /// What a failed iteration reports.
    type Error: std::error::Error + Send + Sync + 'static;

    /// A prefill: slot `slots[i]` starts a new sequence with a prompt of `prompt_tokens[i]`
    /// tokens and produces its first output token.
    fn prefill(&mut self, slots: &[u32], prompt_tokens: &[u32]) -> Result<(), Self::Error>;

    /// A decode: every slot in `slots` produces its next token.
    fn decode(&mut self, slots: &[u32]) -> Result<(), Self::Error>;
}

impl<S: IterationStep + ?Sized> IterationStep for &mut S {
    type Error = S::Error;

    fn prefill(&mut self, slots: &[u32], prompt_tokens: &[u32]) -> Result<(), Self::Error> {
        (**self).prefill(slots, prompt_tokens)
    }

    fn decode(&mut self, slots: &[u32]) -> Result<(), Self::Error> {
        (**self).decode(slots)
    }
}

/// How a [`MockIterationStep`] spends its service time.
#[derive(Debug, Clone)]
enum MockTime {
    Sleep,
    Spin,
    Simulated(SimulatedClock),
}

/// An iteration step of known service time, for tests and benches: a prefill takes
/// `prefill_base + prefill_per_token * (sum of prompts)`, a decode `decode_base +
/// decode_per_sequence * sequences`.
///
/// It sleeps, spins or advances a [`SimulatedClock`]; it can stall once (to test coordinated
/// omission) or fail from a given call on. Calls are numbered from 0 across both kinds.
#[derive(Debug, Clone)]
pub struct MockIterationStep {
    prefill_base_ns: u64,
    prefill_per_token_ns: u64,
    decode_base_ns: u64,
    decode_per_sequence_ns: u64,
    time: MockTime,
    stall: Option<(u64, u64)>,
    fail_at: Option<u64>,
    calls: u64,
}

/// The error a [`MockIterationStep`] reports when told to fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("mock iteration failed at call {0}")]
pub struct MockIterationFailure(pub u64);

impl MockIterationStep {
    /// A prefill of `prefill` and a decode of `decode`, whatever their sizes.
    #[must_use]
    pub fn fixed(prefill: Duration, decode: Duration) -> Self {
        MockIterationStep {
            prefill_base_ns: duration_ns(prefill),
            prefill_per_token_ns: 0,
            decode_base_ns: duration_ns(decode),
            decode_per_sequence_ns: 0,
            time: MockTime::Sleep,
            stall: None,
            fail_at: None,
            calls: 0,
        }
    }

    /// Adds `per_token` to a prefill for every prompt token it processes.
    #[must_use]
    pub fn per_prompt_token(mut self, per_token: Duration) -> Self {
        self.prefill_per_token_ns = duration_ns(per_token);
        self
    }

    /// Adds `per_sequence` to a decode for every sequence in it.
    #[must_use]
    pub fn per_decode_sequence(mut self, per_sequence: Duration) -> Self {
        self.decode_per_sequence_ns = duration_ns(per_sequence);
        self
    }

    /// Busy-waits instead of sleeping.
    #[must_use]
    pub fn spinning(mut self) -> Self {
        self.time = MockTime::Spin;
        self
    }

    /// Advances `clock` instead of taking real time.
    #[must_use]
    pub fn simulated(mut self, clock: &SimulatedClock) -> Self {
        self.time = MockTime::Simulated(clock.clone());
        self
    }

    /// Call number `call` (0-based, prefills and decodes together) takes `extra` longer, once.
    #[must_use]
    pub fn stalling_once(mut self, call: u64, extra: Duration) -> Self {
        self.stall = Some((call, duration_ns(extra)));
        self
    }

    /// Fails from call number `call` (0-based) on.
    #[must_use]
    pub fn failing_at(mut self, call: u64) -> Self {
        self.fail_at = Some(call);
        self
    }

    /// Iterations run so far.
    #[must_use]
    pub fn calls(&self) -> u64 {
        self.calls
    }

    fn spend(&mut self, ns: u64) -> Result<(), MockIterationFailure> {
        let call = self.calls;
        self.calls += 1;
        if self.fail_at.is_some_and(|f| call >= f) {
            return Err(MockIterationFailure(call));
        }
        let mut ns = ns;
        if let Some((at, extra)) = self.stall
            && at == call
        {
            ns += extra;
        }
        match &self.time {
            MockTime::Simulated(clock) => clock.advance(ns),
            MockTime::Sleep => std::thread::sleep(Duration::from_nanos(ns)),
            MockTime::Spin => {
                let end = std::time::Instant::now() + Duration::from_nanos(ns);
                while std::time::Instant::now() < end {
                    std::hint::spin_loop();
                }
            }
        }
        Ok(())
    }
}

impl IterationStep for MockIterationStep {
    type Error = MockIterationFailure;

    fn prefill(
        &mut self,
        _slots: &[u32],
        prompt_tokens: &[u32],
    ) -> Result<(), MockIterationFailure> {
        let tokens: u64 = prompt_tokens.iter().map(|&p| u64::from(p)).sum();
        self.spend(self.prefill_base_ns + self.prefill_per_token_ns * tokens)
    }

    fn decode(&mut self, slots: &[u32]) -> Result<(), MockIterationFailure> {
        self.spend(self.decode_base_ns + self.decode_per_sequence_ns * slots.len() as u64)
    }
}

fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Which kind of iteration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IterationKind {
    /// Newly admitted requests processed their prompts and produced their first tokens.
    Prefill,
    /// Every running request produced one more token.
    Decode,
}

impl IterationKind {
    /// The name for records (`prefill`, `decode`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            IterationKind::Prefill => "prefill",
            IterationKind::Decode => "decode",
        }
    }
}

/// One iteration as the runner saw it, times in the serve clock's nanoseconds (since the
/// window's scheduled start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LlmIteration {
    /// Prefill or decode.
    pub kind: IterationKind,
    /// When the step was called.
    pub start_ns: u64,
    /// When it returned (device work complete).
    pub end_ns: u64,
    /// Sequences in it (the batch occupancy).
    pub sequences: u32,
    /// Tokens it processed: the prompts' sum for a prefill, one per sequence for a decode.
    pub tokens: u64,
    /// KV-cache tokens reserved by all running requests during it.
    pub kv_reserved_tokens: u64,
}

/// Not yet: a request's admission or token time before it happened.
const NEVER: u64 = u64::MAX;

/// Everything an LLM serve window records, in memory allocated before it, and the scheduler's
/// own working sets.
#[derive(Debug)]
pub struct LlmServeBuffer {
    admitted_ns: Vec<u64>,
    generated: Vec<u32>,
    token_ns: Vec<u64>,
    iterations: Vec<LlmIteration>,
    running: Vec<u32>,
    running_slots: Vec<u32>,
    free_slots: Vec<u32>,
    new_requests: Vec<u32>,
    new_slots: Vec<u32>,
    new_prompts: Vec<u32>,
}

impl LlmServeBuffer {
    /// Room for everything `requests` can produce under `policy`.
    #[must_use]
    pub fn new(requests: &LlmRequests, policy: &LlmServePolicy) -> Self {
        let n = requests.len();
        let tokens = requests.total_output_tokens();
        let slots = policy.max_batch() as usize;
        LlmServeBuffer {
            admitted_ns: vec![NEVER; n],
            generated: vec![0; n],
            token_ns: vec![NEVER; tokens],
            iterations: Vec::with_capacity(n + tokens),
            running: Vec::with_capacity(slots),
            running_slots: Vec::with_capacity(slots),
            free_slots: Vec::with_capacity(slots),
            new_requests: Vec::with_capacity(slots),
            new_slots: Vec::with_capacity(slots),
            new_prompts: Vec::with_capacity(slots),
        }
    }

    /// Whether this buffer was made for `requests` and `policy` (the runner refuses another).
    fn fits(&self, requests: &LlmRequests, policy: &LlmServePolicy) -> bool {
        let slots = policy.max_batch() as usize;
        self.admitted_ns.len() == requests.len()
            && self.token_ns.len() == requests.total_output_tokens()
            && self.iterations.capacity() >= requests.len() + requests.total_output_tokens()
            && [
                &self.running,
                &self.running_slots,
                &self.free_slots,
                &self.new_requests,
                &self.new_slots,
                &self.new_prompts,
            ]
            .iter()
            .all(|v| v.capacity() >= slots)
    }

    /// Forgets a previous window, keeping every allocation; slot `0` is handed out first.
    fn reset(&mut self, slots: u32) {
        self.admitted_ns.fill(NEVER);
        self.generated.fill(0);
        self.token_ns.fill(NEVER);
        self.iterations.clear();
        self.running.clear();
        self.running_slots.clear();
        self.free_slots.clear();
        self.free_slots.extend((0..slots).rev());
        self.new_requests.clear();
        self.new_slots.clear();
        self.new_prompts.clear();
    }

    /// Admits requests from `waiting` (the arrived ones from index `first` on) in order while
    /// the batch and the budget hold them, into `new_*`; `reserved` grows by their reservation.
    #[inline]
    fn admit(
        &mut self,
        waiting: &[LlmRequest],
        first: usize,
        policy: &LlmServePolicy,
        reserved: &mut u64,
    ) {
        self.new_requests.clear();
        self.new_slots.clear();
        self.new_prompts.clear();
        let max_batch = policy.max_batch() as usize;
        for (k, r) in waiting.iter().enumerate() {
            if self.running.len() + self.new_requests.len() >= max_batch
                || *reserved + r.reserved_tokens() > policy.kv_budget_tokens()
            {
                break;
            }
            let Some(slot) = self.free_slots.pop() else {
                break;
            };
            *reserved += r.reserved_tokens();
            self.new_requests.push((first + k) as u32);
            self.new_slots.push(slot);
            self.new_prompts.push(r.prompt_tokens);
        }
    }

    /// Records an iteration that ran from `start` to `end` and the tokens it produced; retires
    /// the requests it completed (their slots and reservations are freed).
    #[inline]
    fn record(
        &mut self,
        kind: IterationKind,
        start: u64,
        end: u64,
        reqs: &[LlmRequest],
        offsets: &[usize],
        reserved: &mut u64,
    ) {
        let (sequences, tokens) = match kind {
            IterationKind::Prefill => (
                self.new_requests.len(),
                self.new_prompts.iter().map(|&p| u64::from(p)).sum(),
            ),
            IterationKind::Decode => (self.running.len(), self.running.len() as u64),
        };
        // Never full: see `LlmServeBuffer::new`.
        if self.iterations.len() < self.iterations.capacity() {
            self.iterations.push(LlmIteration {
                kind,
                start_ns: start,
                end_ns: end,
                sequences: sequences as u32,
                tokens,
                kv_reserved_tokens: *reserved,
            });
        }
        match kind {
            IterationKind::Prefill => {
                for i in 0..self.new_requests.len() {
                    let r = self.new_requests[i] as usize;
                    self.admitted_ns[r] = start;
                    self.token_ns[offsets[r]] = end;
                    self.generated[r] = 1;
                    if reqs[r].output_tokens == 1 {
                        *reserved -= reqs[r].reserved_tokens();
                        self.free_slots.push(self.new_slots[i]);
                    } else {
                        self.running.push(r as u32);
                        self.running_slots.push(self.new_slots[i]);
                    }
                }
            }
            IterationKind::Decode => {
                let mut i = 0;
                while i < self.running.len() {
                    let r = self.running[i] as usize;
                    self.token_ns[offsets[r] + self.generated[r] as usize] = end;
                    self.generated[r] += 1;
                    if self.generated[r] == reqs[r].output_tokens {
                        *reserved -= reqs[r].reserved_tokens();
                        self.free_slots.push(self.running_slots[i]);
                        self.running.swap_remove(i);
                        self.running_slots.swap_remove(i);
                    } else {
                        i += 1;
                    }
                }
            }
        }
    }

    /// The counts of a window that ended (after it).
    fn outcome<E>(
        &self,
        requests: &LlmRequests,
        actual_start_ns: u64,
        error: Option<TimingError<E>>,
    ) -> LlmServeOutcome<E> {
        let window_ns = requests.window_ns();
        let offsets = &requests.token_offsets;
        let mut completed = 0u64;
        let mut unfinished = 0u64;
        let mut tokens_in_window = 0u64;
        for (r, req) in requests.requests().iter().enumerate() {
            let times = &self.token_ns[offsets[r]..offsets[r] + self.generated[r] as usize];
            tokens_in_window += times.iter().filter(|&&t| t <= window_ns).count() as u64;
            if self.admitted_ns[r] == NEVER {
                continue;
            }
            let done = self.generated[r] == req.output_tokens
                && times.last().is_some_and(|&t| t <= window_ns);
            if done {
                completed += 1;
            } else {
                unfinished += 1;
            }
        }
        let n = requests.len() as u64;
        LlmServeOutcome {
            actual_start_ns,
            window_ns,
            requests: n,
            requests_completed: completed,
            requests_unfinished: unfinished,
            requests_not_admitted: n - completed - unfinished,
            tokens_in_window,
            iterations_in_window: self
                .iterations
                .iter()
                .filter(|i| i.end_ns <= window_ns)
                .count() as u64,
            error,
        }
    }

    /// The iterations run, in order (the last may have ended after the window).
    #[must_use]
    pub fn iterations(&self) -> &[LlmIteration] {
        &self.iterations
    }

    /// When request `request`'s output tokens were complete, serve-clock ns, one per token
    /// generated (the first from its prefill). Empty for a request never admitted or out of
    /// range.
    #[must_use]
    pub fn token_times_ns(&self, requests: &LlmRequests, request: usize) -> &[u64] {
        let (Some(&start), Some(&generated)) = (
            requests.token_offsets.get(request),
            self.generated.get(request),
        ) else {
            return &[];
        };
        &self.token_ns[start..start + generated as usize]
    }
}

/// What an LLM serve window produced, besides what the buffer holds.
#[derive(Debug)]
pub struct LlmServeOutcome<E> {
    /// When the runner began, serve-clock nanoseconds (its lateness after the scheduled start).
    pub actual_start_ns: u64,
    /// The window's length (its end, on the serve clock), nanoseconds.
    pub window_ns: u64,
    /// Requests scheduled inside the window.
    pub requests: u64,
    /// Requests whose last token was out by the window's end.
    pub requests_completed: u64,
    /// Requests admitted but not complete by the window's end.
    pub requests_unfinished: u64,
    /// Requests never admitted (queued at the end, or not reached after an error).
    pub requests_not_admitted: u64,
    /// Output tokens complete by the window's end (completed requests or not).
    pub tokens_in_window: u64,
    /// Iterations that ended inside the window.
    pub iterations_in_window: u64,
    /// Why the window stopped early, if it did. What came before is kept.
    pub error: Option<TimingError<E>>,
}

/// Runs an LLM serve window on `clock`, whose zero is the window's scheduled start.
///
/// Waits for the start, then schedules `requests` under `policy` (see the module documentation)
/// until the window has passed. `buffer` must come from [`LlmServeBuffer::new`] for the same
/// requests and policy (otherwise the window does not start: [`TimingError::CapacityExhausted`]);
/// `policy.check(requests)` must have passed (a request that cannot fit is never admitted and
/// blocks the queue). Stops before the next iteration once `cancel` is set, with
/// [`TimingError::Cancelled`].
pub fn run_llm_serve<S: IterationStep, C: ServeClock>(
    step: &mut S,
    clock: &C,
    requests: &LlmRequests,
    policy: &LlmServePolicy,
    buffer: &mut LlmServeBuffer,
    cancel: &AtomicBool,
) -> LlmServeOutcome<S::Error> {
    let window_ns = requests.window_ns();
    let n = requests.len();
    if !buffer.fits(requests, policy) {
        return LlmServeOutcome {
            actual_start_ns: 0,
            window_ns,
            requests: n as u64,
            requests_completed: 0,
            requests_unfinished: 0,
            requests_not_admitted: n as u64,
            tokens_in_window: 0,
            iterations_in_window: 0,
            error: Some(TimingError::CapacityExhausted {
                capacity: buffer.iterations.capacity(),
            }),
        };
    }
    buffer.reset(policy.max_batch());
    let reqs = requests.requests();
    let offsets = &requests.token_offsets;
    clock.wait_until_ns(0);

    // --- timed window: clock reads, integer comparisons, writes into preallocated memory ---
    let actual_start_ns = clock.now_ns();
    let mut head = 0usize; // first request not yet admitted
    let mut arrived = 0usize; // requests whose arrival is <= now
    let mut reserved: u64 = 0;
    let mut error = None;
    let b = &mut *buffer;
    loop {
        if cancel.load(Ordering::Relaxed) {
            error = Some(TimingError::Cancelled {
                batches: b.iterations.len(),
            });
            break;
        }
        let now = clock.now_ns();
        if now >= window_ns {
            break;
        }
        while arrived < n && reqs[arrived].arrival_ns <= now {
            arrived += 1;
        }
        // 1. Admission, FCFS: stop at the first request that does not fit.
        b.admit(&reqs[head..arrived], head, policy, &mut reserved);
        head += b.new_requests.len();
        let (kind, result) = if !b.new_requests.is_empty() {
            // 2. A prefill iteration for the newly admitted requests.
            (
                IterationKind::Prefill,
                step.prefill(&b.new_slots, &b.new_prompts),
            )
        } else if !b.running.is_empty() {
            // 3. A decode iteration for every running request.
            (IterationKind::Decode, step.decode(&b.running_slots))
        } else {
            // 4. Nothing to run: wait for the next arrival (or the window's end).
            let next = reqs.get(arrived).map_or(u64::MAX, |r| r.arrival_ns);
            clock.wait_until_ns(next.min(window_ns));
            continue;
        };
        let end = clock.now_ns();
        if let Err(e) = result {
            // Leaving the window: the error may allocate now. The requests admitted for a
            // failed prefill keep their admission time and no token.
            for &r in &b.new_requests {
                b.admitted_ns[r as usize] = now;
            }
            error = Some(TimingError::Step {
                batches: b.iterations.len(),
                source: e,
            });
            break;
        }
        b.record(kind, now, end, reqs, offsets, &mut reserved);
        if end > window_ns {
            break;
        }
    }
    // --- end of the timed window ---

    buffer.outcome(requests, actual_start_ns, error)
}

/// One request's outcome, serve-clock nanoseconds (since the window's scheduled start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LlmRequestRecord {
    /// Index in arrival order.
    pub index: u32,
    /// Scheduled arrival.
    pub arrival_ns: u64,
    /// Prompt length, tokens.
    pub prompt_tokens: u32,
    /// Output length asked for, tokens.
    pub output_tokens: u32,
    /// When its prefill began, if it was admitted.
    pub admitted_ns: Option<u64>,
    /// When its first token was out.
    pub first_token_ns: Option<u64>,
    /// When its latest token was out (its last, if it completed).
    pub last_token_ns: Option<u64>,
    /// Tokens generated, inside the window or in the iteration that ran across its end.
    pub tokens_generated: u32,
    /// Whether every output token was out by the window's end.
    pub completed: bool,
}

impl LlmRequestRecord {
    /// Time to first token from the scheduled arrival (queueing included).
    #[must_use]
    pub fn ttft_ns(&self) -> Option<u64> {
        self.first_token_ns.map(|t| t - self.arrival_ns)
    }

    /// Time in the queue, from the scheduled arrival to the start of its prefill.
    #[must_use]
    pub fn queue_ns(&self) -> Option<u64> {
        self.admitted_ns.map(|t| t - self.arrival_ns)
    }

    /// End-to-end latency from the scheduled arrival to the last token, for a completed request.
    #[must_use]
    pub fn e2e_ns(&self) -> Option<u64> {
        self.completed
            .then_some(self.last_token_ns)
            .flatten()
            .map(|t| t - self.arrival_ns)
    }

    /// Time per output token after the first, `(last - first) / (output - 1)`, for a completed
    /// request of at least two tokens (vLLM's benchmark definition).
    #[must_use]
    pub fn tpot_ns(&self) -> Option<f64> {
        match (self.completed, self.first_token_ns, self.last_token_ns) {
            (true, Some(first), Some(last)) if self.output_tokens > 1 => {
                Some((last - first) as f64 / f64::from(self.output_tokens - 1))
            }
            _ => None,
        }
    }
}

/// Every request's record, in arrival order (after the window).
#[must_use]
pub fn llm_request_records(
    buffer: &LlmServeBuffer,
    requests: &LlmRequests,
) -> Vec<LlmRequestRecord> {
    let window_ns = requests.window_ns();
    requests
        .requests()
        .iter()
        .enumerate()
        .map(|(r, req)| {
            let times = buffer.token_times_ns(requests, r);
            let admitted = buffer.admitted_ns.get(r).copied().unwrap_or(NEVER);
            LlmRequestRecord {
                index: r as u32,
                arrival_ns: req.arrival_ns,
                prompt_tokens: req.prompt_tokens,
                output_tokens: req.output_tokens,
                admitted_ns: (admitted != NEVER).then_some(admitted),
                first_token_ns: times.first().copied(),
                last_token_ns: times.last().copied(),
                tokens_generated: times.len() as u32,
                completed: times.len() == req.output_tokens as usize
                    && times.last().is_some_and(|&t| t <= window_ns),
            }
        })
        .collect()
}

/// The inter-token latencies of request `request`: the gaps between its consecutive tokens, ns.
pub fn inter_token_ns<'a>(
    buffer: &'a LlmServeBuffer,
    requests: &'a LlmRequests,
    request: usize,
) -> impl Iterator<Item = u64> + 'a {
    buffer
        .token_times_ns(requests, request)
        .windows(2)
        .map(|w| w[1] - w[0])
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn req(arrival_ms: u64, prompt: u32, output: u32) -> LlmRequest {
        LlmRequest {
            arrival_ns: arrival_ms * MS,
            prompt_tokens: prompt,
            output_tokens: output,
        }
    }

    #[test]
    fn a_request_of_one_token_is_done_by_its_prefill() {
        let requests = LlmRequests::new(vec![req(0, 5, 1)], 100 * MS).unwrap();
        let policy = LlmServePolicy::new(4, 100, 64).unwrap();
        let clock = SimulatedClock::new();
        let mut step = MockIterationStep::fixed(Duration::from_millis(3), Duration::from_millis(1))
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
        assert_eq!(step.calls(), 1, "no decode for a one-token request");
        let r = llm_request_records(&buffer, &requests)[0];
        assert_eq!(
            (r.ttft_ns(), r.e2e_ns(), r.tpot_ns()),
            (Some(3 * MS), Some(3 * MS), None)
        );
        assert_eq!(out.requests_completed, 1);
    }

    #[test]
    fn a_buffer_for_other_requests_is_refused_before_the_window() {
        let small = LlmRequests::new(vec![req(0, 5, 2)], 100 * MS).unwrap();
        let large = LlmRequests::new(vec![req(0, 5, 2), req(1, 5, 2)], 100 * MS).unwrap();
        let policy = LlmServePolicy::new(4, 100, 64).unwrap();
        let clock = SimulatedClock::new();
        let mut step = MockIterationStep::fixed(Duration::ZERO, Duration::ZERO).simulated(&clock);
        let mut buffer = LlmServeBuffer::new(&small, &policy);
        let out = run_llm_serve(
            &mut step,
            &clock,
            &large,
            &policy,
            &mut buffer,
            &AtomicBool::new(false),
        );
        assert!(matches!(
            out.error,
            Some(TimingError::CapacityExhausted { .. })
        ));
        assert_eq!(step.calls(), 0);
    }
}
