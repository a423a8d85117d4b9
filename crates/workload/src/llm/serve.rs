//! The `serve-llm` step: the built-in LLM behind `coload_timing::run_llm_serve`'s continuous
//! batcher (issue 24). Implements [`coload_timing::IterationStep`].
//!
//! The scheduler hands out its own slot ids (`0..max_batch`); this step keeps the running
//! sequences *compact* in the model's cache slots `0..b`, so that a decode is the model's
//! [`LlmModel::decode_step`] over the first `b` slots, with nothing gathered:
//!
//! - a prefill puts each newly admitted request in the next free physical slot (`b`, `b + 1`,
//!   ...) and prefills it alone (`prefill_slots`, one forward per request: prompts differ in
//!   length, and a padded batch would compute the padding);
//! - a decode first retires the sequences the scheduler no longer lists (they completed): the
//!   last running sequence moves into the hole ([`LlmModel::move_slot`], a copy of the positions
//!   it holds), then decodes slots `0..b` and writes each argmax back as its next input.
//!
//! Prompts are windows of one random token pool drawn at build, the k-th admitted request's
//! starting k tokens further (modulo [`PROMPT_SHIFTS`]), so that no two running sequences share
//! a cache prefix. Each iteration ends with a device synchronize. The step's own bookkeeping lives in vectors sized at build; the
//! libtorch calls allocate what every step's do (tensor handles, activations from the caching
//! allocator), never cache memory.

use coload_cohort_schema::{DeviceChoice, Execution, MemoryInfo, Precision};
use coload_timing::IterationStep;
use tch::{Device, Kind, Tensor};

use crate::error::LlmError;
use crate::llm::config::{LlmConfig, LlmPreset};
use crate::llm::decode::{llm_info, llm_peak_memory};
use crate::llm::model::{LlmModel, LlmPlacement, at_least_one};
use crate::shim;
use crate::step::{WorkloadInfo, resolve_device};

/// No physical slot (or no scheduler slot).
const NONE: u32 = u32::MAX;

/// How many different prompt windows the pool holds: the k-th request's prompt starts at token
/// `k mod PROMPT_SHIFTS` of the pool.
pub const PROMPT_SHIFTS: u32 = 64;

/// The built-in LLM as a continuous-batching server's iteration step.
#[derive(Debug)]
pub struct LlmServeStep {
    model: LlmModel,
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
        let placement = LlmPlacement::new(device, options.precision);
        let mut step = Self::new(
            &options.model.config(),
            placement,
            options.max_batch,
            options.max_prompt_tokens,
            options.seed,
        )?;
        step.preset = Some(options.model);
        Ok(step)
    }

    /// Device, versions and the model's identity, for `worker.json` (eager execution).
    #[must_use]
    pub fn info(&self) -> WorkloadInfo {
        let mut info = llm_info(
            &self.model,
            self.cuda_index,
            self.preset.unwrap_or(LlmPreset::Gpt2Small),
            Execution::Eager,
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
    /// they would have had without it). Returns how long each batch's decodes took, median,
    /// for the worker's notes.
    pub fn warm_up(
        &mut self,
        prompt_tokens: &[u32],
        decodes: u32,
    ) -> Result<Vec<(u32, std::time::Duration)>, LlmError> {
        let slots = self.physical.len() as u32;
        let all: Vec<u32> = (0..slots).collect();
        let batches = warmup_batches(slots);
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
        let input = self.tokens.f_narrow(0, 0, b)?;
        let logits = self.model.decode_step(&input)?;
        let _no_grad = tch::no_grad_guard();
        self.tokens
            .f_narrow(0, 0, b)?
            .f_copy_(&logits.f_argmax(-1, true)?)?;
        self.synchronize()?;
        self.record(0, self.running)
    }
}

#[cfg(test)]
mod tests {
    use super::warmup_batches;

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
