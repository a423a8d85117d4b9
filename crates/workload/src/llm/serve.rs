//! The `serve-llm` step: the built-in LLM behind `coload_timing::run_llm_serve`'s continuous
//! batcher. Implements [`coload_timing::IterationStep`].
//!
//! The scheduler hands out its own slot ids (`0..max_batch`); this step keeps the running
//! sequences *compact* in the model's cache slots `0..b`, so that a decode is the model's
//! [`LlmModel::decode_step_in_blocks`] over the first `b` slots (the attention rounded up to
//! [`ATTEND_BLOCK`] positions), with nothing gathered:
//!
//! - a prefill puts each newly admitted request in the next free physical slot (`b`, `b + 1`,
//!   ...) and prefills it alone (`prefill_slots`, one forward per request: prompts differ in
//!   length, and a padded batch would compute the padding);
//! - a decode first retires the sequences the scheduler no longer lists (they completed): the
//!   last running sequence moves into the hole ([`LlmModel::move_slot`], a copy of the positions
//!   it holds), then decodes slots `0..b` and writes each argmax back as its next input.
//!
//! With `execution: cuda-graph` the decode is one CUDA-graph replay per iteration, as serving
//! engines run it (vLLM captures its decode for a set of batch sizes): at build, one graph per
//! batch-size bucket of [`decode_buckets`] (the powers of two below `max_batch`, and
//! `max_batch`), each over the first `n` slots of the step's own token buffer and the cache,
//! attending over the whole context under the position mask ([`LlmModel::decode_static`]: a
//! graph cannot change shape). A decode of `b` running sequences replays the smallest bucket
//! that holds them; the idle slots `b..n` it pads with compute garbage that no sequence reads,
//! and their positions are bounded inside the graph
//! (`LlmModel::decode_static_padded`). The host checks and counts only the `b` real
//! sequences. The prefill stays eager (one forward per admitted request). The same padded,
//! whole-context computation runs without graphs under [`LlmServeStep::static_buckets`], so
//! the CPU tests check it against the dynamic eager path.
//!
//! Prompts are windows of one random token pool drawn at build, the k-th admitted request's
//! starting k tokens further (modulo [`PROMPT_SHIFTS`]), so that no two running sequences share
//! a cache prefix. Each iteration ends with a device synchronize. The step's own bookkeeping
//! lives in vectors sized at build; the libtorch calls allocate what every step's do (tensor
//! handles, activations from the caching allocator), never cache memory.

use coload_cohort_schema::{DeviceChoice, Execution, MemoryInfo, Precision};
use coload_timing::IterationStep;
use tch::{Device, Kind, Tensor};

use crate::error::{LlmError, WorkloadError};
use crate::llm::config::{LlmConfig, LlmPreset};
use crate::llm::decode::{capture_decode, llm_info, llm_peak_memory};
use crate::llm::model::{LlmModel, LlmPlacement, at_least_one};
use crate::shim::{self, CapturePhase};
use crate::step::{WorkloadInfo, check_execution, resolve_device};

/// No physical slot (or no scheduler slot).
const NONE: u32 = u32::MAX;

/// How many different prompt windows the pool holds: the k-th request's prompt starts at token
/// `k mod PROMPT_SHIFTS` of the pool.
pub const PROMPT_SHIFTS: u32 = 64;

/// How the step runs a decode iteration.
#[derive(Debug)]
enum DecodePath {
    /// [`LlmModel::decode_step`] over the running slots, attending over the longest sequence.
    Dynamic,
    /// The running slots padded to the smallest of `sizes` that holds them, then
    /// `decode_static_padded` over the whole context: one replay of the size's graph where
    /// `graphs` holds one per size, else run eagerly ([`LlmServeStep::static_buckets`]).
    Buckets {
        sizes: Vec<i64>,
        graphs: Vec<shim::CudaGraph>,
    },
}

/// The built-in LLM as a continuous-batching server's iteration step.
#[derive(Debug)]
pub struct LlmServeStep {
    model: LlmModel,
    decode_path: DecodePath,
    /// The prompt pool, `[1, max_prompt_tokens + PROMPT_SHIFTS]` int64 on the device.
    pool: Tensor,
    /// Requests prefilled since the step was built.
    admitted: u64,
    /// Each physical slot's latest token, `[max_batch, 1]` int64 on the device.
    tokens: Tensor,
    /// Scheduler slot -> physical slot.
    physical: Vec<u32>,
    /// Physical slot -> scheduler slot.
    scheduler: Vec<u32>,
    /// Physical slots `0..running` hold sequences.
    running: usize,
    /// Scratch: which scheduler slots the current decode lists.
    listed: Vec<bool>,
    /// With [`LlmServeStep::recording`]: physical slot -> index into `transcripts`.
    transcript_of: Vec<usize>,
    transcripts: Option<Vec<Vec<i64>>>,
    max_prompt_tokens: i64,
    cuda_index: Option<usize>,
    /// The preset it was built from, when it was ([`LlmServeStep::for_preset`]).
    preset: Option<LlmPreset>,
}

/// What a `serve-llm` worker's step runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LlmServeOptions {
    /// The model.
    pub model: LlmPreset,
    /// Where to run.
    pub device: DeviceChoice,
    /// The most requests running at once: the KV cache's slots.
    pub max_batch: u32,
    /// The longest prompt a request may have, tokens.
    pub max_prompt_tokens: u32,
    /// fp32 or bf16; `None`: bf16 on CUDA, fp32 on the CPU.
    pub precision: Option<Precision>,
    /// Seed of the weights and the prompt pool.
    pub seed: u64,
    /// Eager, or each decode iteration one replay of its batch-size bucket's CUDA graph.
    pub execution: Execution,
}

/// The eager serve step's attention length is the batch's longest sequence rounded up to a
/// multiple of this many positions ([`LlmModel::decode_step_in_blocks`]): continuous batching
/// changes the batch every iteration, and attending over exactly the longest sequence made
/// every decode a (batch, length) shape of its own, about `context` lengths for each batch, most
/// of them first met inside the window. With blocks of 128 a request of 512 + 128 tokens meets
/// one or two lengths, and a block costs at most 127 masked positions of extra attention.
pub(crate) const ATTEND_BLOCK: u32 = 128;

/// The decode batch sizes a `serve-llm` step captures a CUDA graph for: the powers of two below
/// `max_batch`, then `max_batch` (32: 1, 2, 4, 8, 16, 32; 640: 1, 2, ..., 512, 640). A decode
/// of `b` sequences runs the smallest that holds it, so at most about half of a replay's
/// sequences are padding, and a cache of `max_batch` slots needs `log2(max_batch) + 1` graphs.
/// vLLM captures a similar list (1, 2, 4, then steps of 8); powers of two keep the count
/// logarithmic for the 640-slot cache.
#[must_use]
pub fn decode_buckets(max_batch: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut b = 1;
    while b < max_batch {
        out.push(b);
        b = b.saturating_mul(2);
    }
    if max_batch > 0 {
        out.push(max_batch);
    }
    out
}

/// The batches [`LlmServeStep::warm_up`] runs for a cache of `slots` sequences: every batch up
/// to 32, then the powers of two below `slots`, then `slots`. Warming every batch up to a
/// cache of 640 sequences would prefill about 200,000 prompts one by one; a batch between two
/// warmed ones meets its first call inside the window only when the load reaches it.
#[must_use]
pub fn warmup_batches(slots: u32) -> Vec<u32> {
    const EVERY_UP_TO: u32 = 32;
    let mut out: Vec<u32> = (1..=slots.min(EVERY_UP_TO)).collect();
    let mut b = EVERY_UP_TO * 2;
    while b < slots {
        out.push(b);
        b *= 2;
    }
    if slots > EVERY_UP_TO {
        out.push(slots);
    }
    out
}
impl LlmServeStep {
    /// The step `options` describe: the preset on the device, its cache of `max_batch` slots of
    /// the whole context.
    pub fn for_preset(options: &LlmServeOptions) -> Result<Self, LlmError> {
        let device = resolve_device(options.device)?;
        // Before the model exists: a graph on the CPU is refused without building anything.
        check_execution(options.execution, device)?;
        let placement = LlmPlacement::new(device, options.precision);
        let mut step = Self::new(
            &options.model.config(),
            placement,
            options.max_batch,
            options.max_prompt_tokens,
            options.seed,
        )?;
        step.preset = Some(options.model);
        match options.execution {
            Execution::Eager => Ok(step),
            Execution::CudaGraph => step.capture_graphs(),
        }
    }

    /// How a decode iteration runs: [`Execution::CudaGraph`] once the graphs are captured
    /// ([`LlmServeStep::capture_graphs`]), else [`Execution::Eager`] (the
    /// [`LlmServeStep::static_buckets`] path included: it launches kernel by kernel).
    #[must_use]
    pub fn execution(&self) -> Execution {
        match &self.decode_path {
            DecodePath::Buckets { graphs, .. } if !graphs.is_empty() => Execution::CudaGraph,
            _ => Execution::Eager,
        }
    }

    /// The decode batch sizes the step pads to ([`decode_buckets`] of its slots); empty on the
    /// dynamic eager path, which decodes the running sequences as they are.
    #[must_use]
    pub fn bucket_sizes(&self) -> &[i64] {
        match &self.decode_path {
            DecodePath::Dynamic => &[],
            DecodePath::Buckets { sizes, .. } => sizes,
        }
    }

    /// Pads every decode to its batch-size bucket and runs the whole-context static decode
    /// eagerly: what the CUDA graphs of [`LlmServeStep::capture_graphs`] replay, kernel by
    /// kernel and on any device. For the CPU tests of the captured path's computation (the
    /// padding, the bound on idle positions, the buckets), not for measuring: it does the
    /// graphs' extra attention work without their launch savings. A step with graphs keeps them.
    #[must_use]
    pub fn static_buckets(mut self) -> Self {
        if matches!(self.decode_path, DecodePath::Dynamic) {
            self.decode_path = DecodePath::Buckets {
                sizes: self.bucket_list(),
                graphs: Vec::new(),
            };
        }
        self
    }

    /// Captures one CUDA graph per batch-size bucket ([`decode_buckets`]), so that every decode
    /// iteration is one replay: each graph decodes slots `0..n` of the step's token buffer
    /// (whose storage never moves) with `decode_static_padded` and writes the argmax back into
    /// it, after `GRAPH_WARMUP_STEPS` warmups on the capture's side stream (allocator pools,
    /// cuBLAS workspaces). Each graph keeps its own memory pool (the shim's capture), about one
    /// decode's activations at its size. Then forgets what the warmups and captures left in the
    /// cache. CUDA only.
    pub fn capture_graphs(mut self) -> Result<Self, LlmError> {
        check_execution(Execution::CudaGraph, self.model.placement().device)?;
        let index = self.cuda_index.ok_or_else(|| {
            WorkloadError::InvalidOption("a CUDA graph needs a CUDA device".into())
        })?;
        let sizes = self.bucket_list();
        let name = self.preset.map_or("custom", LlmPreset::as_str);
        let mut graphs = Vec::with_capacity(sizes.len());
        for &n in &sizes {
            let what = format!("the {name} serve step's decode of {n} sequences");
            let (model, tokens) = (&mut self.model, &self.tokens);
            graphs.push(capture_decode(index, &what, |phase| {
                let mut slots = tokens.f_narrow(0, 0, n)?;
                match phase {
                    CapturePhase::Warmup => {
                        model.reset()?;
                        let logits = model.decode_static_padded(&slots, n)?;
                        slots.f_copy_(&logits.f_argmax(-1, true)?)?;
                    }
                    CapturePhase::Prepare => {}
                    CapturePhase::Capture => {
                        let logits = model.decode_static_padded(&slots, n)?;
                        slots.f_copy_(&logits.f_argmax(-1, true)?)?;
                    }
                }
                Ok(())
            })?);
        }
        self.decode_path = DecodePath::Buckets { sizes, graphs };
        self.forget()?;
        self.synchronize()?;
        Ok(self)
    }

    fn bucket_list(&self) -> Vec<i64> {
        decode_buckets(self.physical.len() as u32)
            .into_iter()
            .map(i64::from)
            .collect()
    }

    /// Device, versions and the model's identity, for `worker.json`.
    #[must_use]
    pub fn info(&self) -> WorkloadInfo {
        let mut info = llm_info(
            &self.model,
            self.cuda_index,
            self.preset.unwrap_or(LlmPreset::Gpt2Small),
            self.execution(),
        );
        if self.preset.is_none() {
            "custom".clone_into(&mut info.model);
        }
        info
    }

    /// Peak bytes the CUDA caching allocator reserved (`None` on CPU).
    #[must_use]
    pub fn peak_memory(&self) -> Option<MemoryInfo> {
        llm_peak_memory(self.cuda_index)
    }

    /// `config` on `placement` with a cache of `max_batch` sequences, and a random prompt pool
    /// for prompts of up to `max_prompt_tokens`, from `seed`.
    pub fn new(
        config: &LlmConfig,
        placement: LlmPlacement,
        max_batch: u32,
        max_prompt_tokens: u32,
        seed: u64,
    ) -> Result<Self, LlmError> {
        at_least_one("the maximum batch", i64::from(max_batch))?;
        at_least_one("prompt tokens", i64::from(max_prompt_tokens))?;
        if max_prompt_tokens > config.context {
            return Err(LlmError::PromptTooLong {
                prompt_tokens: i64::from(max_prompt_tokens),
                generate_tokens: 0,
                context_tokens: i64::from(config.context),
            });
        }
        let slots = i64::from(max_batch);
        let model = LlmModel::new(config, placement, slots, seed)?;
        let device = placement.device;
        let pool = {
            let _build = crate::step::BUILD_LOCK
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            tch::manual_seed(seed.wrapping_add(1) as i64);
            Tensor::f_randint(
                i64::from(config.vocab),
                [1, i64::from(max_prompt_tokens) + i64::from(PROMPT_SHIFTS)],
                (Kind::Int64, Device::Cpu),
            )?
            .f_to_device(device)?
        };
        let tokens = Tensor::f_zeros([slots, 1], (Kind::Int64, device))?;
        let n = max_batch as usize;
        Ok(LlmServeStep {
            model,
            decode_path: DecodePath::Dynamic,
            pool,
            admitted: 0,
            tokens,
            physical: vec![NONE; n],
            scheduler: vec![NONE; n],
            running: 0,
            listed: vec![false; n],
            transcript_of: vec![usize::MAX; n],
            transcripts: None,
            max_prompt_tokens: i64::from(max_prompt_tokens),
            cuda_index: match device {
                Device::Cuda(i) => Some(i),
                _ => None,
            },
            preset: None,
        })
    }

    /// Before the barrier: prefills `batch` sequences at each of `prompt_tokens` and decodes
    /// them `decodes` times (each prompt plus `decodes` must fit the context), for each batch
    /// of [`warmup_batches`] (every one up to 32, then powers of two and the cache's slots), so
    /// that no kernel is chosen or compiled for the first time inside the window at the batches
    /// a serving window reaches; then forgets everything (the window's requests get the prompts
    /// they would have had without it). With batch-size buckets (CUDA graphs) the batches are
    /// the buckets, the only decode shapes the window runs: each graph is replayed (its capture
    /// already warmed its kernels) and each prefill runs. Returns how long each batch's decodes
    /// took, median, for the worker's notes.
    pub fn warm_up(
        &mut self,
        prompt_tokens: &[u32],
        decodes: u32,
    ) -> Result<Vec<(u32, std::time::Duration)>, LlmError> {
        let slots = self.physical.len() as u32;
        let all: Vec<u32> = (0..slots).collect();
        let batches = match &self.decode_path {
            DecodePath::Dynamic => warmup_batches(slots),
            DecodePath::Buckets { .. } => decode_buckets(slots),
        };
        let mut medians = Vec::with_capacity(batches.len());
        for batch in batches {
            let listed = &all[..batch as usize];
            let mut times = Vec::with_capacity(decodes as usize);
            for &p in prompt_tokens {
                let prompts = vec![p; batch as usize];
                self.prefill(listed, &prompts)?;
                for _ in 0..decodes {
                    let t = std::time::Instant::now();
                    self.decode(listed)?;
                    times.push(t.elapsed());
                }
                // Everything completes: the next round starts from empty slots.
                self.forget()?;
            }
            times.sort_unstable();
            if let Some(&median) = times.get(times.len() / 2) {
                medians.push((batch, median));
            }
        }
        self.forget()?;
        Ok(medians)
    }

    /// Empties every slot and restarts the prompt shifts, as if just built.
    fn forget(&mut self) -> Result<(), LlmError> {
        self.model.reset()?;
        let _ = self.tokens.f_zero_()?;
        self.physical.fill(NONE);
        self.scheduler.fill(NONE);
        self.transcript_of.fill(usize::MAX);
        if let Some(t) = self.transcripts.as_mut() {
            t.clear();
        }
        self.running = 0;
        self.admitted = 0;
        Ok(())
    }

    /// Records every sequence's generated tokens, in admission order (a device-to-host copy per
    /// iteration: for tests, never in a measured window).
    #[must_use]
    pub fn recording(mut self) -> Self {
        self.transcripts = Some(Vec::new());
        self
    }

    /// The recorded tokens of each sequence, in admission order (empty unless
    /// [`LlmServeStep::recording`]).
    #[must_use]
    pub fn transcripts(&self) -> &[Vec<i64>] {
        self.transcripts.as_deref().unwrap_or(&[])
    }

    /// The prompt of the `admitted`-th request (0-based, in admission order) if it has
    /// `prompt_tokens` tokens, `[1, prompt_tokens]`.
    pub fn request_prompt(&self, admitted: u64, prompt_tokens: u32) -> Result<Tensor, LlmError> {
        let p = i64::from(prompt_tokens);
        if p > self.max_prompt_tokens {
            return Err(LlmError::PromptLongerThanBuilt {
                prompt_tokens: p,
                max_prompt_tokens: self.max_prompt_tokens,
            });
        }
        let shift = (admitted % u64::from(PROMPT_SHIFTS)) as i64;
        Ok(self.pool.f_narrow(1, shift, p)?)
    }

    /// The model.
    #[must_use]
    pub fn model(&self) -> &LlmModel {
        &self.model
    }

    /// Sequences in the cache now (the last iteration's, until a decode retires completed ones).
    #[must_use]
    pub fn running(&self) -> usize {
        self.running
    }

    /// Empties physical slot `phys`'s sequence by moving the last running one into it.
    fn retire(&mut self, phys: usize) -> Result<(), LlmError> {
        let last = self.running - 1;
        let gone = self.scheduler[phys] as usize;
        if phys == last {
            self.model.clear_slot(last as i64)?;
        } else {
            self.model.move_slot(last as i64, phys as i64)?;
            let from = self.tokens.f_narrow(0, last as i64, 1)?;
            self.tokens.f_narrow(0, phys as i64, 1)?.f_copy_(&from)?;
            let moved = self.scheduler[last];
            self.physical[moved as usize] = phys as u32;
            self.scheduler[phys] = moved;
            self.transcript_of[phys] = self.transcript_of[last];
        }
        self.physical[gone] = NONE;
        self.scheduler[last] = NONE;
        self.transcript_of[last] = usize::MAX;
        self.running = last;
        Ok(())
    }

    fn scheduler_slot(&self, slot: u32) -> Result<usize, LlmError> {
        let s = slot as usize;
        if s >= self.physical.len() {
            return Err(LlmError::Slots {
                first: i64::from(slot),
                end: i64::from(slot) + 1,
                slots: self.physical.len() as i64,
            });
        }
        Ok(s)
    }

    fn record(&mut self, first: usize, end: usize) -> Result<(), LlmError> {
        if self.transcripts.is_none() {
            return Ok(());
        }
        let latest = Vec::<i64>::try_from(
            &self
                .tokens
                .f_narrow(0, first as i64, (end - first) as i64)?
                .f_flatten(0, -1)?
                .f_to_device(Device::Cpu)?,
        )
        .map_err(crate::error::WorkloadError::from)?;
        let transcripts = self.transcripts.get_or_insert_with(Vec::new);
        for (phys, token) in (first..end).zip(latest) {
            if let Some(t) = transcripts.get_mut(self.transcript_of[phys]) {
                t.push(token);
            }
        }
        Ok(())
    }

    fn synchronize(&self) -> Result<(), LlmError> {
        if let Some(index) = self.cuda_index {
            shim::synchronize(index)?;
        }
        Ok(())
    }
}

impl IterationStep for LlmServeStep {
    type Error = LlmError;

    fn prefill(&mut self, slots: &[u32], prompt_tokens: &[u32]) -> Result<(), LlmError> {
        // A one-token request completes in its prefill; the scheduler may reuse its slot before
        // any decode has retired it. Retire those first, so the new sequences land together.
        for &slot in slots {
            let stale = self.physical[self.scheduler_slot(slot)?];
            if stale != NONE {
                self.retire(stale as usize)?;
            }
        }
        let first = self.running;
        for (&slot, &p) in slots.iter().zip(prompt_tokens) {
            let prompt = self.request_prompt(self.admitted, p)?;
            let phys = self.running;
            if phys >= self.physical.len() {
                return Err(LlmError::Slots {
                    first: phys as i64,
                    end: phys as i64 + 1,
                    slots: self.physical.len() as i64,
                });
            }
            let logits = self.model.prefill_slots(phys as i64, &prompt)?;
            self.admitted += 1;
            let _no_grad = tch::no_grad_guard();
            self.tokens
                .f_narrow(0, phys as i64, 1)?
                .f_copy_(&logits.f_argmax(-1, true)?)?;
            self.physical[slot as usize] = phys as u32;
            self.scheduler[phys] = slot;
            self.running += 1;
            if let Some(t) = self.transcripts.as_mut() {
                self.transcript_of[phys] = t.len();
                t.push(Vec::new());
            }
        }
        self.synchronize()?;
        self.record(first, self.running)
    }

    fn decode(&mut self, slots: &[u32]) -> Result<(), LlmError> {
        self.listed.fill(false);
        for &slot in slots {
            let s = self.scheduler_slot(slot)?;
            if self.physical[s] == NONE {
                return Err(LlmError::NotPrefilled { slot: s });
            }
            self.listed[s] = true;
        }
        // Retire the sequences the scheduler no longer runs (they completed).
        let mut phys = 0;
        while phys < self.running {
            if self.listed[self.scheduler[phys] as usize] {
                phys += 1;
            } else {
                self.retire(phys)?;
            }
        }
        let b = self.running as i64;
        let mut input = self.tokens.f_narrow(0, 0, b)?;
        match &mut self.decode_path {
            DecodePath::Dynamic => {
                let logits = self.model.decode_step_in_blocks(&input, ATTEND_BLOCK)?;
                let _no_grad = tch::no_grad_guard();
                input.f_copy_(&logits.f_argmax(-1, true)?)?;
            }
            DecodePath::Buckets { sizes, graphs } => {
                // The smallest bucket that holds the running sequences (no allocation: this
                // runs in the timed window).
                let bucket = sizes.partition_point(|&n| n < b);
                let Some(&n) = sizes.get(bucket) else {
                    return Err(LlmError::Slots {
                        first: 0,
                        end: b,
                        slots: self.physical.len() as i64,
                    });
                };
                // The host checks and counts the real sequences only; the graph (or its eager
                // twin) also advances the padded slots' device positions, bounded.
                self.model.check_decode(&input)?;
                if let Some(graph) = graphs.get_mut(bucket) {
                    graph.replay()?;
                } else {
                    let mut padded = self.tokens.f_narrow(0, 0, n)?;
                    let logits = self.model.decode_static_padded(&padded, n)?;
                    let _no_grad = tch::no_grad_guard();
                    padded.f_copy_(&logits.f_argmax(-1, true)?)?;
                }
                self.model.advance_host(b);
            }
        }
        self.synchronize()?;
        self.record(0, self.running)
    }
}

#[cfg(test)]
mod tests {
    use super::{decode_buckets, warmup_batches};

    /// Powers of two below the cache's slots, then the slots: every batch has a bucket at most
    /// twice its size, and each bucket is a batch the warmup of an eager step runs too.
    #[test]
    fn decode_buckets_are_powers_of_two_and_the_cache() {
        assert_eq!(decode_buckets(1), [1]);
        assert_eq!(decode_buckets(2), [1, 2]);
        assert_eq!(decode_buckets(3), [1, 2, 3]);
        assert_eq!(decode_buckets(5), [1, 2, 4, 5]);
        assert_eq!(decode_buckets(32), [1, 2, 4, 8, 16, 32]);
        assert_eq!(
            decode_buckets(640),
            [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 640]
        );
        assert!(decode_buckets(0).is_empty());
        for slots in 1..=700 {
            let buckets = decode_buckets(slots);
            assert_eq!(buckets.last(), Some(&slots));
            assert!(buckets.windows(2).all(|w| w[0] < w[1] && w[1] <= 2 * w[0]));
            let warmed = warmup_batches(slots);
            assert!(buckets.iter().all(|b| warmed.contains(b)), "{slots}");
        }
    }

    /// Every batch up to 32, then powers of two and the cache's own size: a 640-sequence cache
    /// warms 37 batches, not 640.
    #[test]
    fn warmup_batches_are_bounded() {
        assert_eq!(warmup_batches(3), [1, 2, 3]);
        assert_eq!(warmup_batches(32), (1..=32).collect::<Vec<_>>());
        let big = warmup_batches(640);
        assert_eq!(big[..32], (1..=32).collect::<Vec<_>>()[..]);
        assert_eq!(big[32..], [64, 128, 256, 512, 640]);
        assert_eq!(warmup_batches(64)[32..], [64]);
        assert!(warmup_batches(0).is_empty());
    }
}
