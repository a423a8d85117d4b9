//! The decoder-only transformer and its preallocated KV cache.
//!
//! Weights are tch variables in one `VarStore` (so that they can be saved, counted and cast),
//! drawn from the seed; the forward is written out with libtorch ops, one function per block
//! part, so that the Python reference in `tests/llm.rs` can follow it name by name.
//!
//! # KV cache
//!
//! Each layer owns a key and a value tensor of `[slots, kv_heads, context, head_dim]`, head-major
//! as PyTorch's own decoders keep it, so that attention reads each head's keys contiguously
//! (position stride `head_dim`); zeroed once when the model is built: `slots` sequences (the
//! batch) of at most `context` positions. Nothing in a prefill or a decode step allocates cache
//! memory:
//!
//! - a prefill of `b` sequences of `P` tokens into slots `s..s+b` writes positions `0..P` with
//!   one `copy_` into a narrowed view (the prompt's keys transposed to head-major), and attends
//!   causally over its own fresh keys (the cache of those slots starts empty);
//! - a decode step writes each sequence's new key and value at its own position with one
//!   `index_copy_` into a row view of the cache (`[rows, kv_heads, head_dim]` with strides
//!   `[head_dim, context * head_dim, 1]`: row `slot * kv_heads * context + position` is that
//!   slot's position in every KV head at once), then attends over a narrowed view of the cache
//!   under an additive mask (0 where `j <= position`, minus infinity elsewhere) per sequence, so
//!   sequences of different lengths share one step.
//!
//! Each slot's position lives on the device (`positions`, advanced in place by the step, so a
//! captured CUDA graph replays correctly) and on the host (`lengths`, for the checks and the
//! attention length). An eager decode attends over the longest sequence's positions (the serve
//! step's rounded up to a block of `ATTEND_BLOCK` positions); a graph-captured decode ([`LlmModel::decode_static`]) over the whole context, since a graph
//! cannot change shape: the mask makes the two compute the same logits.
//!
//! An eager step whose sequences all hold the same number of positions (the closed-loop
//! `decode` workload's) attends over exactly those and its new one, with no mask, as PyTorch's
//! own decoders do in a closed loop.
//!
//! # Decode attention ([`DecodeAttention`])
//!
//! An eager decode step of a model with as many KV heads as query heads (GPT-2), where
//! FlashAttention's kernel runs (bf16 on an Ampere or later CUDA card, tried once when the model
//! is built), attends through its variable-length forward: each sequence's query over its own
//! keys up to its position, read in place through the rows views (slot `s` starts at row
//! `s * kv_heads * context`, its length on the device), with no mask and no narrowing. An eager
//! step is bound by the host launching its kernels, and that is one dispatched call a layer
//! where `scaled_dot_product_attention` first chooses its backend and cuDNN looks up its
//! execution plan: on the H200, in one process, alternated, GPT-2 small's eager decode made more
//! tokens a second through it at batch 8 and 32, the ratio's interval above 1
//! (docs/performance.md, "Decode attention"). With grouped KV heads (TinyLlama) the kernel
//! regroups the queries and splits the keys (flash-decoding), and its split-KV and combining
//! kernels and the regrouping copies ate the host's saving at batch 8 (a ratio below 1, not
//! settled); a graph-captured step pays nothing on the host, and cuDNN's fused kernel took less
//! device time than FlashAttention's for both models (the profiles there). So these attend as
//! PyTorch's decoders do:
//!
//! Decode attention is the call PyTorch's decoders make: the query `[b, heads, 1, head_dim]`,
//! keys and values `[b, kv_heads, attend, head_dim]`, `enable_gqa` when the model has fewer KV
//! heads than query heads, and the mask. The mask is built once per step, in the model's kind,
//! over the whole context and narrowed to the attended positions: `scaled_dot_product_attention`
//! would otherwise turn a boolean mask into an additive one in every layer (three kernels a
//! layer), and the memory-efficient kernel would pad a mask with a stride not a multiple of 16.
//!
//! # Kernels of a decode step
//!
//! Exact rewrites that launch fewer kernels than the plain formulas (the difference is bf16
//! rounding at most): the rotary embedding turns the queries and keys of the fused QKV
//! projection together, in three kernels for a prompt (`rotate`) and in one batched matrix
//! product per layer for a decode step ([`Rope`]), and a Llama block's two residual adds are
//! the output and down projections' own accumulation (`addmm_` into the residual stream, which
//! is `[b, hidden]` in a decode step). GPT-2's projections carry a bias, so its residual adds
//! stay separate.

#![expect(
    clippy::many_single_char_names,
    reason = "the papers' names: b batch, p prompt, q/k/v, x the residual stream, h its norm, d head width"
)]

use coload_cohort_schema::{DecodeAttention, Precision};
use tch::nn::{Init, VarStore};
use tch::{Device, Kind, Tensor};

use crate::error::LlmError;
use crate::llm::config::{LlmArchitecture, LlmConfig};

/// How the model computes: its device and the kind of its weights, activations and cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LlmPlacement {
    /// Where the weights and the cache live.
    pub device: Device,
    /// fp32, or bf16 weights, activations and cache (not autocast: an LLM served in bf16 keeps
    /// its weights in bf16).
    pub precision: Precision,
}

impl LlmPlacement {
    /// bf16 on CUDA, fp32 on the CPU (where bf16 matrix products are slow on most hosts), unless
    /// `precision` says otherwise.
    #[must_use]
    pub fn new(device: Device, precision: Option<Precision>) -> Self {
        let precision = precision.unwrap_or(if device.is_cuda() {
            Precision::Bf16
        } else {
            Precision::Fp32
        });
        LlmPlacement { device, precision }
    }

    /// Bytes of one element of the weights and the cache (4 for fp32, 2 for bf16).
    #[must_use]
    pub fn bytes_per_element(self) -> u64 {
        self.kind().elt_size_in_bytes() as u64
    }

    fn kind(self) -> Kind {
        match self.precision {
            Precision::Fp32 => Kind::Float,
            Precision::Bf16 => Kind::BFloat16,
        }
    }
}

#[derive(Debug)]
struct Norm {
    weight: Tensor,
    bias: Option<Tensor>,
}

#[derive(Debug)]
struct Layer {
    attn_norm: Norm,
    qkv_w: Tensor,
    qkv_b: Option<Tensor>,
    out_w: Tensor,
    out_b: Option<Tensor>,
    mlp_norm: Norm,
    /// GPT-2: `fc` (`[intermediate, hidden]`); Llama: gate and up stacked (`[2 * intermediate,
    /// hidden]`, gate first).
    up_w: Tensor,
    up_b: Option<Tensor>,
    down_w: Tensor,
    down_b: Option<Tensor>,
}

/// The KV cache and each slot's position.
#[derive(Debug)]
struct KvCache {
    /// `[slots, kv_heads, context, head_dim]` per layer.
    keys: Vec<Tensor>,
    values: Vec<Tensor>,
    /// The same storage as rows `[rows, kv_heads, head_dim]` with strides `[head_dim, context *
    /// head_dim, 1]`, for the decode's `index_copy_`: row `slot * kv_heads * context + position`
    /// holds that slot's position in every KV head (rows overlap: row `r + context` of head `h`
    /// is row `r` of head `h + 1`; each write touches one row per slot).
    keys_rows: Vec<Tensor>,
    values_rows: Vec<Tensor>,
    /// Each slot's next position (= tokens it holds), int64 on the device.
    positions: Tensor,
    /// `slot * kv_heads * context` for every slot, int64 on the device.
    slot_base: Tensor,
    /// `0..context`, int64 on the device (the decode mask's key positions).
    key_positions: Tensor,
    /// 0 and minus infinity, 0-dimensional in the model's kind (the additive mask's values).
    mask_open: Tensor,
    mask_closed: Tensor,
    /// For the flash decode attention, int32 on the device: `0..=slots` (each sequence's one
    /// query), `slot * kv_heads * context` for `0..=slots` (each slot's first row in
    /// `keys_rows`), and each slot's attended length (its position + 1), written by each step.
    cu_queries: Tensor,
    cu_keys: Tensor,
    used_keys: Tensor,
    /// The host's copy of `positions`.
    lengths: Vec<i64>,
}

/// A decoder-only transformer with random weights and a KV cache for `slots` sequences.
#[derive(Debug)]
pub struct LlmModel {
    config: LlmConfig,
    placement: LlmPlacement,
    slots: i64,
    vs: VarStore,
    embed: Tensor,
    positions_embed: Option<Tensor>,
    layers: Vec<Layer>,
    final_norm: Norm,
    head: Tensor,
    /// Rotary tables (Llama): see [`Rope`].
    rope: Option<Rope>,
    cache: KvCache,
    /// Which kernel decode steps attend through ([`LlmModel::decode_attention`]).
    attention: DecodeAttention,
}

/// Refuses a count below 1.
pub(crate) fn at_least_one(what: &'static str, got: i64) -> Result<(), LlmError> {
    if got < 1 {
        return Err(LlmError::ZeroCount { what, got });
    }
    Ok(())
}

impl LlmModel {
    /// Builds `config` with random weights from `seed` (normal of `config.init_std`; norm
    /// weights around 1) on `placement`, and a zeroed KV cache for `slots` sequences of
    /// `config.context` positions.
    ///
    /// The weights are drawn on the CPU in fp32 from libtorch's generator seeded with `seed`
    /// (under the crate's build lock, so concurrent builds do not interleave their draws), then
    /// moved and cast, so one seed gives the same model on every device and precision.
    pub fn new(
        config: &LlmConfig,
        placement: LlmPlacement,
        slots: i64,
        seed: u64,
    ) -> Result<Self, LlmError> {
        config.validate()?;
        at_least_one("the number of sequence slots", slots)?;
        let _no_grad = tch::no_grad_guard();
        let _build = crate::step::BUILD_LOCK
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        tch::manual_seed(seed as i64);
        let mut vs = VarStore::new(Device::Cpu);
        let (embed, positions_embed, layers, final_norm, head) = build_weights(&vs, config)?;
        vs.set_device(placement.device);
        vs.set_kind(placement.kind());
        vs.freeze();
        let rope = match config.architecture {
            LlmArchitecture::Llama => Some(Rope::new(config, placement)?),
            LlmArchitecture::Gpt2 => None,
        };
        let cache = KvCache::new(config, placement, slots)?;
        let attention = default_attention(config, placement);
        Ok(LlmModel {
            config: config.clone(),
            placement,
            slots,
            vs,
            embed,
            positions_embed,
            layers,
            final_norm,
            head,
            rope,
            cache,
            attention,
        })
    }

    /// Which kernel decode steps attend through: [`DecodeAttention::FlashEager`] for a model
    /// with as many KV heads as query heads where FlashAttention's kernel runs (bf16 on a CUDA
    /// card of the Ampere generation or later, which the model tries once when it is built),
    /// [`DecodeAttention::Sdpa`] elsewhere.
    #[must_use]
    pub fn decode_attention(&self) -> DecodeAttention {
        self.attention
    }

    /// Sets which kernel decode steps attend through (all compute the same attention); refuses
    /// a FlashAttention choice where the kernel does not run. Before capturing a CUDA graph: a
    /// captured step keeps the kernels it was captured with.
    pub fn set_decode_attention(&mut self, attention: DecodeAttention) -> Result<(), LlmError> {
        if attention != DecodeAttention::Sdpa && !flash_decode_runs(&self.config, self.placement) {
            return Err(LlmError::Config(format!(
                "decode attention `{attention}`: FlashAttention's kernel does not run here (it \
                 needs bf16 on a CUDA card of the Ampere generation or later, and a head width a \
                 multiple of 8 up to 256); use `sdpa`"
            )));
        }
        self.attention = attention;
        Ok(())
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &LlmConfig {
        &self.config
    }

    /// Device and precision.
    #[must_use]
    pub fn placement(&self) -> LlmPlacement {
        self.placement
    }

    /// Sequences the cache holds.
    #[must_use]
    pub fn slots(&self) -> i64 {
        self.slots
    }

    /// The model's variables (to count or save them; `VarStore::save` to a `.safetensors` path
    /// writes them for the Python reference).
    #[must_use]
    pub fn var_store(&self) -> &VarStore {
        &self.vs
    }

    /// Parameters actually allocated (the tied head once).
    #[must_use]
    pub fn parameter_count(&self) -> u64 {
        self.vs.variables().values().map(|t| t.numel() as u64).sum()
    }

    /// Positions each slot holds (the host's copy).
    #[must_use]
    pub fn lengths(&self) -> &[i64] {
        &self.cache.lengths
    }

    /// Bytes of the KV cache.
    #[must_use]
    pub fn cache_bytes(&self) -> u64 {
        let per = |t: &Tensor| t.numel() as u64 * t.kind().elt_size_in_bytes() as u64;
        self.cache
            .keys
            .iter()
            .chain(&self.cache.values)
            .map(per)
            .sum()
    }

    /// Empties every slot (positions to 0). The cache's contents stay; they are never read
    /// past a slot's position.
    pub fn reset(&mut self) -> Result<(), LlmError> {
        let _ = self.cache.positions.f_zero_()?;
        self.cache.lengths.fill(0);
        Ok(())
    }

    /// Prefills slots `0..B` with `tokens` (`[B, P]`, int64 on the model's device) and returns
    /// the logits of each sequence's last position (`[B, vocab]`): the distribution of its first
    /// generated token.
    pub fn prefill(&mut self, tokens: &Tensor) -> Result<Tensor, LlmError> {
        self.prefill_slots(0, tokens)
    }

    /// Prefills slots `first..first + b` with `tokens` (`[b, P]`); the other slots keep their
    /// sequences.
    pub fn prefill_slots(&mut self, first: i64, tokens: &Tensor) -> Result<Tensor, LlmError> {
        let Some([b, p]) = crate::shim::shape2(tokens) else {
            return Err(LlmError::Shape {
                what: "prefill tokens",
                expected: "[batch, prompt]".into(),
                got: tokens.size(),
            });
        };
        at_least_one("the prefill's batch", b)?;
        at_least_one("prompt tokens", p)?;
        if p > i64::from(self.config.context) {
            return Err(LlmError::PromptTooLong {
                prompt_tokens: p,
                generate_tokens: 0,
                context_tokens: i64::from(self.config.context),
            });
        }
        if first < 0 || first + b > self.slots {
            return Err(LlmError::Slots {
                first,
                end: first + b,
                slots: self.slots,
            });
        }
        let _no_grad = tch::no_grad_guard();
        let logits = self.forward_prefill(first, tokens, b, p)?;
        let _ = self.cache.positions.f_narrow(0, first, b)?.f_fill_(p)?;
        for l in &mut self.cache.lengths[first as usize..(first + b) as usize] {
            *l = p;
        }
        Ok(logits)
    }

    /// One decode step for slots `0..b` (`tokens`: `[b, 1]`, each sequence's latest token):
    /// writes its key and value at each sequence's position, attends over the cache, returns
    /// the next-token logits (`[b, vocab]`) and advances each position by one.
    pub fn decode_step(&mut self, tokens: &Tensor) -> Result<Tensor, LlmError> {
        self.decode_step_in_blocks(tokens, 1)
    }

    /// [`LlmModel::decode_step`] attending over the longest sequence's positions rounded up to
    /// a multiple of `block` (at most the context): the mask hides the extra positions, so the
    /// logits are the same, and the attention takes `context / block` lengths instead of one
    /// per position. For continuous batching, whose batches change every iteration: every new
    /// (batch, length) shape can meet a first call inside the window (kernel choice, workspace),
    /// where a closed-loop decode repeats its shapes every cycle.
    pub fn decode_step_in_blocks(
        &mut self,
        tokens: &Tensor,
        block: u32,
    ) -> Result<Tensor, LlmError> {
        let b = self.check_decode(tokens)?;
        let longest = self.cache.lengths[..b as usize]
            .iter()
            .copied()
            .max()
            .unwrap_or(0);
        let attend = attend_in_blocks(longest, block, self.config.context);
        // When every sequence holds `longest` positions and the step attends over exactly those
        // and its new one, every key is visible to every query: no mask, as PyTorch's own
        // decoders attend in a closed loop (and SDPA may take its flash kernel, which takes none).
        let masked = attend != longest + 1
            || self.cache.lengths[..b as usize]
                .iter()
                .any(|&len| len != longest);
        let _no_grad = tch::no_grad_guard();
        let logits = self.forward_decode(tokens, b, attend, masked, false)?;
        self.advance(b)?;
        Ok(logits)
    }

    /// [`LlmModel::decode_step`] for a CUDA graph: attends over the whole context (a fixed
    /// shape; the mask hides the positions not yet written) and takes no decision on the host,
    /// so the same kernels replay at every position. The caller checks the slots first
    /// ([`LlmModel::check_decode`]) and records the step on the host afterwards
    /// ([`LlmModel::advance_host`]).
    pub(crate) fn decode_static(&mut self, tokens: &Tensor, b: i64) -> Result<Tensor, LlmError> {
        let _no_grad = tch::no_grad_guard();
        let logits = self.forward_decode(tokens, b, i64::from(self.config.context), true, true)?;
        let _ = self.cache.positions.f_narrow(0, 0, b)?.f_add_scalar_(1)?;
        Ok(logits)
    }

    /// [`LlmModel::decode_static`] over slots `0..n` of which only some hold sequences: the
    /// serve step's batch padded to a captured size. An idle slot computes garbage, writes it
    /// at its own position and advances, step after step; each position is then bounded to the
    /// context's last (one more kernel, no host decision), so that an idle slot's position never
    /// indexes the position tables or the cache past its own slot's positions. Harmless to the
    /// slot's later sequence: a prefill sets the position and writes the prompt's keys before
    /// any read, and the mask hides the positions not yet written. A running sequence never
    /// meets the bound ([`LlmModel::check_decode`] refuses a full slot on the host), except the
    /// step that fills its context, which leaves its device position one below its host length;
    /// that slot is refused from then on either way.
    pub(crate) fn decode_static_padded(
        &mut self,
        tokens: &Tensor,
        n: i64,
    ) -> Result<Tensor, LlmError> {
        let logits = self.decode_static(tokens, n)?;
        let last = i64::from(self.config.context) - 1;
        let _ = self.cache.positions.f_narrow(0, 0, n)?.f_clamp_max_(last)?;
        Ok(logits)
    }

    /// Checks a decode step's tokens and slots on the host; returns the batch.
    pub(crate) fn check_decode(&self, tokens: &Tensor) -> Result<i64, LlmError> {
        // Read without allocating: this runs in the timed window.
        let Some([b, 1]) = crate::shim::shape2(tokens) else {
            return Err(LlmError::Shape {
                what: "decode tokens",
                expected: "[batch, 1]".into(),
                got: tokens.size(),
            });
        };
        at_least_one("the decode's batch", b)?;
        if b > self.slots {
            return Err(LlmError::Slots {
                first: 0,
                end: b,
                slots: self.slots,
            });
        }
        let context = i64::from(self.config.context);
        for (slot, &len) in self.cache.lengths[..b as usize].iter().enumerate() {
            if len == 0 {
                return Err(LlmError::NotPrefilled { slot });
            }
            if len >= context {
                return Err(LlmError::ContextFull {
                    slot,
                    positions: len,
                });
            }
        }
        Ok(b)
    }

    fn advance(&mut self, b: i64) -> Result<(), LlmError> {
        let _ = self.cache.positions.f_narrow(0, 0, b)?.f_add_scalar_(1)?;
        self.advance_host(b);
        Ok(())
    }

    /// Moves slot `src`'s sequence (its keys, values and position) into slot `dst` and empties
    /// `src`: how a server keeps its running sequences in slots `0..b` when one in the middle
    /// completes. Copies only the positions the sequence holds.
    pub fn move_slot(&mut self, src: i64, dst: i64) -> Result<(), LlmError> {
        for s in [src, dst] {
            if s < 0 || s >= self.slots {
                return Err(LlmError::Slots {
                    first: s,
                    end: s + 1,
                    slots: self.slots,
                });
            }
        }
        if src == dst {
            return Ok(());
        }
        let len = self.cache.lengths[src as usize];
        let _no_grad = tch::no_grad_guard();
        if len > 0 {
            for cache in [&mut self.cache.keys, &mut self.cache.values] {
                for layer in cache.iter_mut() {
                    let from = layer.f_narrow(0, src, 1)?.f_narrow(2, 0, len)?;
                    layer
                        .f_narrow(0, dst, 1)?
                        .f_narrow(2, 0, len)?
                        .f_copy_(&from)?;
                }
            }
        }
        let from = self.cache.positions.f_narrow(0, src, 1)?;
        self.cache.positions.f_narrow(0, dst, 1)?.f_copy_(&from)?;
        self.cache.lengths[dst as usize] = len;
        self.clear_slot(src)
    }

    /// Empties slot `slot` (its position to 0); its cache is never read past that.
    pub fn clear_slot(&mut self, slot: i64) -> Result<(), LlmError> {
        if slot < 0 || slot >= self.slots {
            return Err(LlmError::Slots {
                first: slot,
                end: slot + 1,
                slots: self.slots,
            });
        }
        let _ = self.cache.positions.f_narrow(0, slot, 1)?.f_zero_()?;
        self.cache.lengths[slot as usize] = 0;
        Ok(())
    }

    /// Records on the host that slots `0..b` advanced by one position (the device's positions
    /// were advanced by a graph replay).
    pub(crate) fn advance_host(&mut self, b: i64) {
        for l in &mut self.cache.lengths[..b as usize] {
            *l += 1;
        }
    }

    /// The logits of every position of `tokens` (`[B, P]`) without the cache: the reference a
    /// cached decode must match. Leaves the cache alone.
    pub fn forward_full(&self, tokens: &Tensor) -> Result<Tensor, LlmError> {
        let (b, p) = match tokens.size()[..] {
            [b, p] => (b, p),
            ref other => {
                return Err(LlmError::Shape {
                    what: "tokens",
                    expected: "[batch, length]".into(),
                    got: other.to_vec(),
                });
            }
        };
        at_least_one("tokens", p)?;
        if p > i64::from(self.config.context) {
            return Err(LlmError::PromptTooLong {
                prompt_tokens: p,
                generate_tokens: 0,
                context_tokens: i64::from(self.config.context),
            });
        }
        let _no_grad = tch::no_grad_guard();
        let mut x = self.embed_prompt(tokens, p)?;
        for layer in &self.layers {
            let h = self.norm(&layer.attn_norm, &x)?;
            let (q, k, v) = self.qkv_prefill(layer, &h, b, p)?;
            let attn = self.attend_prefill(&q, &k, &v, b, p)?;
            x = x.f_add(&linear(&attn, &layer.out_w, layer.out_b.as_ref())?)?;
            x = x.f_add(&self.mlp(layer, &x)?)?;
        }
        let x = self.norm(&self.final_norm, &x)?;
        Ok(linear(&x, &self.head, None)?)
    }

    fn forward_prefill(
        &mut self,
        first: i64,
        tokens: &Tensor,
        b: i64,
        p: i64,
    ) -> Result<Tensor, LlmError> {
        let mut x = self.embed_prompt(tokens, p)?;
        for (i, layer) in self.layers.iter().enumerate() {
            let h = self.norm(&layer.attn_norm, &x)?;
            let (q, k, v) = self.qkv_prefill(layer, &h, b, p)?;
            self.cache.keys[i]
                .f_narrow(0, first, b)?
                .f_narrow(2, 0, p)?
                .f_copy_(&k.f_transpose(1, 2)?)?;
            self.cache.values[i]
                .f_narrow(0, first, b)?
                .f_narrow(2, 0, p)?
                .f_copy_(&v.f_transpose(1, 2)?)?;
            let attn = self.attend_prefill(&q, &k, &v, b, p)?;
            x = x.f_add(&linear(&attn, &layer.out_w, layer.out_b.as_ref())?)?;
            x = x.f_add(&self.mlp(layer, &x)?)?;
        }
        let last = x.f_select(1, p - 1)?;
        let last = self.norm(&self.final_norm, &last)?;
        Ok(linear(&last, &self.head, None)?)
    }

    /// Token (and, for GPT-2, position) embeddings of a prompt starting at position 0.
    fn embed_prompt(&self, tokens: &Tensor, p: i64) -> Result<Tensor, LlmError> {
        let x = Tensor::f_embedding(&self.embed, tokens, -1, false, false)?;
        match &self.positions_embed {
            Some(pos) => Ok(x.f_add(&pos.f_narrow(0, 0, p)?)?),
            None => Ok(x),
        }
    }

    /// Q, K, V of a prompt: `[b, p, heads, d]`, `[b, p, kv_heads, d]` twice, rotated (Llama).
    fn qkv_prefill(
        &self,
        layer: &Layer,
        h: &Tensor,
        b: i64,
        p: i64,
    ) -> Result<(Tensor, Tensor, Tensor), LlmError> {
        match &self.rope {
            Some(rope) => {
                let d = i64::from(self.config.head_dim());
                let cos = rope
                    .cos
                    .f_narrow(0, 0, p)?
                    .f_view_([1, p, 1, d].as_slice())?;
                let sin = rope
                    .signed_sin
                    .f_narrow(0, 0, p)?
                    .f_view_([1, p, 1, d].as_slice())?;
                self.qkv(layer, h, b, p, Some((&cos, &sin)))
            }
            None => self.qkv(layer, h, b, p, None),
        }
    }

    /// Q, K, V of `h` (`[b, p, hidden]`): `[b, p, heads, d]`,
    /// `[b, p, kv_heads, d]` twice. With `rope` (`cos` and `sin` broadcasting over `[b, p, 1,
    /// d]`), the queries and keys are rotated together: one `rotate` over the `heads +
    /// kv_heads` heads of each position, which the fused projection lays side by side.
    fn qkv(
        &self,
        layer: &Layer,
        h: &Tensor,
        b: i64,
        p: i64,
        rope: Option<(&Tensor, &Tensor)>,
    ) -> Result<(Tensor, Tensor, Tensor), LlmError> {
        let c = &self.config;
        let d = i64::from(c.head_dim());
        let (heads, kv_heads) = (i64::from(c.heads), i64::from(c.kv_heads));
        let (hd, kv) = (heads * d, kv_heads * d);
        let qkv = linear(h, &layer.qkv_w, layer.qkv_b.as_ref())?;
        let v = qkv
            .f_narrow(-1, hd + kv, kv)?
            .f_view_([b, p, kv_heads, d].as_slice())?;
        let (q, k) = match rope {
            Some((cos, sin)) => {
                let shape = [b, p, heads + kv_heads, d];
                let qk = qkv.f_narrow(-1, 0, hd + kv)?.f_view_(shape.as_slice())?;
                let rotated = rotate(&qk, cos, sin, shape)?;
                (
                    rotated.f_narrow(2, 0, heads)?,
                    rotated.f_narrow(2, heads, kv_heads)?,
                )
            }
            None => (
                qkv.f_narrow(-1, 0, hd)?
                    .f_view_([b, p, heads, d].as_slice())?,
                qkv.f_narrow(-1, hd, kv)?
                    .f_view_([b, p, kv_heads, d].as_slice())?,
            ),
        };
        Ok((q, k, v))
    }

    /// Q, K, V of one decode position (`h`: `[b, hidden]`): `[b, heads, 1, d]` (as attention
    /// takes it, with no transpose), and `[b, kv_heads, d]` twice (as the cache's rows take
    /// them). With `turns` (each sequence's rotation at its position, `[b, d, d]`: see
    /// [`Rope`]), the queries and keys are rotated together, in one batched matrix product over
    /// the `heads + kv_heads` heads the fused projection lays side by side.
    fn qkv_decode(
        &self,
        layer: &Layer,
        h: &Tensor,
        b: i64,
        turns: Option<&Tensor>,
    ) -> Result<(Tensor, Tensor, Tensor), LlmError> {
        let c = &self.config;
        let d = i64::from(c.head_dim());
        let (heads, kv_heads) = (i64::from(c.heads), i64::from(c.kv_heads));
        let (hd, kv) = (heads * d, kv_heads * d);
        let qkv = linear(h, &layer.qkv_w, layer.qkv_b.as_ref())?;
        let v = qkv
            .f_narrow(1, hd + kv, kv)?
            .f_view_([b, kv_heads, d].as_slice())?;
        let (q, k) = match turns {
            Some(turns) => {
                let rotated = qkv
                    .f_narrow(1, 0, hd + kv)?
                    .f_view_([b, heads + kv_heads, d].as_slice())?
                    .f_bmm(turns)?;
                (
                    rotated
                        .f_narrow(1, 0, heads)?
                        .f_view_([b, heads, 1, d].as_slice())?,
                    rotated
                        .f_narrow(1, heads, kv_heads)?
                        .f_view_([b, kv_heads, d].as_slice())?,
                )
            }
            None => (
                qkv.f_narrow(1, 0, hd)?
                    .f_view_([b, heads, 1, d].as_slice())?,
                qkv.f_narrow(1, hd, kv)?
                    .f_view_([b, kv_heads, d].as_slice())?,
            ),
        };
        Ok((q, k, v))
    }

    /// Causal attention of a prompt over itself: `[b, p, hidden]`.
    fn attend_prefill(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        b: i64,
        p: i64,
    ) -> Result<Tensor, LlmError> {
        let gqa = self.config.kv_heads != self.config.heads;
        let out = Tensor::f_scaled_dot_product_attention::<Tensor>(
            &q.f_transpose(1, 2)?,
            &k.f_transpose(1, 2)?,
            &v.f_transpose(1, 2)?,
            None,
            0.0,
            true,
            None,
            gqa,
        )?;
        Ok(out
            .f_transpose(1, 2)?
            .f_reshape([b, p, i64::from(self.config.hidden)])?)
    }

    /// One decode step over slots `0..b`, attending over the first `attend` positions, under
    /// the position mask when `masked` (without it, every sequence must hold `attend - 1`
    /// positions). The residual stream is `[b, hidden]`.
    fn forward_decode(
        &mut self,
        tokens: &Tensor,
        b: i64,
        attend: i64,
        masked: bool,
        captured: bool,
    ) -> Result<Tensor, LlmError> {
        let c = &self.config;
        let d = i64::from(c.head_dim());
        let (heads, kv_heads) = (i64::from(c.heads), i64::from(c.kv_heads));
        let (hidden, context) = (i64::from(c.hidden), i64::from(c.context));
        let positions = self.cache.positions.f_narrow(0, 0, b)?;
        let mut x = Tensor::f_embedding(
            &self.embed,
            &tokens.f_view_([b].as_slice())?,
            -1,
            false,
            false,
        )?;
        if let Some(pos) = &self.positions_embed {
            x = x.f_add(&pos.f_index_select(0, &positions)?)?;
        }
        let turns = match &self.rope {
            Some(rope) => Some(rope.turns.f_index_select(0, &positions)?),
            None => None,
        };
        let flash = match self.attention {
            DecodeAttention::Sdpa => false,
            DecodeAttention::FlashEager => !captured,
            DecodeAttention::Flash => true,
        };
        let mask = if masked && !flash {
            Some(self.decode_mask(&positions, b, attend)?)
        } else {
            None
        };
        // FlashAttention's per-step arguments: each slot's first query and first key row, and
        // the keys each sequence attends over (its position and its new one).
        let flash_args = if flash {
            let mut used = self.cache.used_keys.f_narrow(0, 0, b)?;
            used.f_copy_(&positions)?;
            let _ = used.f_add_scalar_(1)?;
            Some((
                self.cache.cu_queries.f_narrow(0, 0, b + 1)?,
                self.cache.cu_keys.f_narrow(0, 0, b + 1)?,
                used,
            ))
        } else {
            None
        };
        let write_at = self.cache.slot_base.f_narrow(0, 0, b)?.f_add(&positions)?;
        let gqa = kv_heads != heads;
        let llama = c.architecture == LlmArchitecture::Llama;
        for (i, layer) in self.layers.iter().enumerate() {
            let h = self.norm(&layer.attn_norm, &x)?;
            let (q, k, v) = self.qkv_decode(layer, &h, b, turns.as_ref())?;
            let _ = self.cache.keys_rows[i].f_index_copy_(0, &write_at, &k)?;
            let _ = self.cache.values_rows[i].f_index_copy_(0, &write_at, &v)?;
            if let Some((cu_queries, cu_keys, used_keys)) = &flash_args {
                // Each sequence's keys and values up to its position, in place: the rows views
                // give every slot's positions in every KV head (row stride `head_dim`, head
                // stride `context * head_dim`), slot `s` from row `cu_keys[s]`.
                let attn = crate::shim::flash_decode(
                    &q.f_view_([b, heads, d].as_slice())?,
                    &self.cache.keys_rows[i],
                    &self.cache.values_rows[i],
                    cu_queries,
                    cu_keys,
                    used_keys,
                    attend,
                )?
                .f_view_([b, hidden].as_slice())?;
                self.residual_and_mlp(layer, &mut x, &attn, llama)?;
                continue;
            }
            // The whole cache as it is when the step covers it (every graph-captured step of a
            // full batch): two views fewer a layer for the host to make.
            let (keys_view, values_view);
            let (keys, values) = if b == self.slots && attend == context {
                (&self.cache.keys[i], &self.cache.values[i])
            } else {
                keys_view = self.cache.keys[i]
                    .f_narrow(0, 0, b)?
                    .f_narrow(2, 0, attend)?;
                values_view = self.cache.values[i]
                    .f_narrow(0, 0, b)?
                    .f_narrow(2, 0, attend)?;
                (&keys_view, &values_view)
            };
            // One query position: [b, heads, 1, d] out is [b, hidden] as it lies, whichever
            // of the two layouts the kernel writes.
            let attn = Tensor::f_scaled_dot_product_attention(
                &q,
                keys,
                values,
                mask.as_ref(),
                0.0,
                false,
                None,
                gqa,
            )?
            .f_reshape([b, hidden])?;
            self.residual_and_mlp(layer, &mut x, &attn, llama)?;
        }
        let x = self.norm(&self.final_norm, &x)?;
        Ok(linear(&x, &self.head, None)?)
    }

    /// The rest of a decode layer after attention (`attn`: `[b, hidden]`): the output
    /// projection and the MLP, each added to the residual stream `x`.
    fn residual_and_mlp(
        &self,
        layer: &Layer,
        x: &mut Tensor,
        attn: &Tensor,
        llama: bool,
    ) -> Result<(), LlmError> {
        if llama {
            // No bias: the residual add is the projection's own accumulation (x += attn
            // out_w^T), one kernel instead of two.
            let _ = x.f_addmm_(attn, &layer.out_w.f_transpose(0, 1)?)?;
            let act = self.mlp_activation(layer, x)?;
            let _ = x.f_addmm_(&act, &layer.down_w.f_transpose(0, 1)?)?;
        } else {
            *x = x.f_add(&linear(attn, &layer.out_w, layer.out_b.as_ref())?)?;
            *x = x.f_add(&self.mlp(layer, x)?)?;
        }
        Ok(())
    }

    /// The additive mask of a decode step over slots `0..b` at `positions`: key position `j`
    /// is visible to a sequence at position `pos` when `j <= pos` (its own new key included): 0
    /// there, minus infinity elsewhere, `[b, 1, 1, attend]` in the model's kind. Built over the
    /// whole context and narrowed, so that every stride but the last is `context` (the
    /// memory-efficient kernel pads a mask with any stride not a multiple of 16).
    fn decode_mask(&self, positions: &Tensor, b: i64, attend: i64) -> Result<Tensor, LlmError> {
        let context = i64::from(self.config.context);
        let visible = self
            .cache
            .key_positions
            .f_unsqueeze(0)?
            .f_le_tensor(&positions.f_unsqueeze(1)?)?;
        Ok(self
            .cache
            .mask_open
            .f_where_self(&visible, &self.cache.mask_closed)?
            .f_view_([b, 1, 1, context].as_slice())?
            .f_narrow(3, 0, attend)?)
    }

    fn norm(&self, norm: &Norm, x: &Tensor) -> Result<Tensor, LlmError> {
        let shape = [i64::from(self.config.hidden)];
        let eps = self.config.norm_eps;
        Ok(match self.config.architecture {
            LlmArchitecture::Gpt2 => {
                x.f_layer_norm(shape, Some(&norm.weight), norm.bias.as_ref(), eps, true)?
            }
            LlmArchitecture::Llama => x.f_rms_norm(shape, Some(&norm.weight), eps)?,
        })
    }

    fn mlp(&self, layer: &Layer, x: &Tensor) -> Result<Tensor, LlmError> {
        let act = self.mlp_activation(layer, x)?;
        Ok(linear(&act, &layer.down_w, layer.down_b.as_ref())?)
    }

    /// The MLP up to its down projection: norm, up (and gate), activation.
    fn mlp_activation(&self, layer: &Layer, x: &Tensor) -> Result<Tensor, LlmError> {
        let h = self.norm(&layer.mlp_norm, x)?;
        let up = linear(&h, &layer.up_w, layer.up_b.as_ref())?;
        Ok(match self.config.architecture {
            LlmArchitecture::Gpt2 => up.f_gelu("tanh")?,
            LlmArchitecture::Llama => {
                let i = i64::from(self.config.intermediate);
                up.f_narrow(-1, 0, i)?
                    .f_silu()?
                    .f_mul(&up.f_narrow(-1, i, i)?)?
            }
        })
    }
}

fn linear(x: &Tensor, w: &Tensor, b: Option<&Tensor>) -> Result<Tensor, tch::TchError> {
    x.f_linear(w, b)
}

/// Rotary embedding, Hugging Face Llama's convention: `x * cos + rotate_half(x) * sin` with
/// `rotate_half([x1, x2]) = [-x2, x1]` over the two halves of each head; `x` is `shape` (four
/// dimensions, the last the head's: `[b, p, heads, head_dim]` or `[b, heads, 1, head_dim]`; any
/// strides), the result contiguous. Computed as `x * cos +
/// swap_halves(x) * signed_sin` in three kernels: `swap_halves` is a `flip` of the head seen as
/// `[2, head_dim / 2]` (one strided copy, where `roll` copies a strided input first and then
/// rolls), and the second product is accumulated into the first with `addcmul_`. `signed_sin` is
/// `sin` with its first half negated ([`rope_tables`]): the same products (a negation is exact),
/// without the `cat` of the two halves, which builds a list on the host and so allocates in the
/// timed window.
fn rotate(
    x: &Tensor,
    cos: &Tensor,
    signed_sin: &Tensor,
    shape: [i64; 4],
) -> Result<Tensor, tch::TchError> {
    let [b, p, n, d] = shape;
    let swapped = x
        .f_view_([b, p, n, 2, d / 2].as_slice())?
        .f_flip([3_i64].as_slice())?
        .f_reshape(shape)?;
    let mut out = x.f_mul(cos)?;
    let _ = out.f_addcmul_(&swapped, signed_sin)?;
    Ok(out)
}

/// The rotary embedding's tables, one rule in two shapes.
///
/// `cos` and `signed_sin` (`[context, head_dim]`) rotate a prompt's positions elementwise
/// (`rotate`). `turns` (`[context, head_dim, head_dim]`) holds the same rotation at each
/// position as a matrix `M` with `x M = x * cos + swap_halves(x) * signed_sin`: `cos` on the
/// diagonal and `signed_sin[i]` at row `partner(i)`, column `i` (`partner` swaps the halves), built
/// from the two tables. A decode step gathers each sequence's matrix once and rotates a layer's
/// queries and keys with one batched matrix product, where the elementwise form takes three
/// kernels a layer; the products are the same, summed in fp32 and rounded once.
#[derive(Debug)]
struct Rope {
    cos: Tensor,
    signed_sin: Tensor,
    turns: Tensor,
}

impl Rope {
    fn new(config: &LlmConfig, placement: LlmPlacement) -> Result<Self, LlmError> {
        let (cos, signed_sin) = rope_tables(config, placement)?;
        let d = i64::from(config.head_dim());
        let opts = (Kind::Float, placement.device);
        // swap[j][i] = 1 where j = partner(i): the identity with its halves of rows swapped.
        let swap = Tensor::f_eye(d, opts)?.f_roll([d / 2].as_slice(), [0_i64].as_slice())?;
        let cos32 = cos.f_to_kind(Kind::Float)?;
        let sin32 = signed_sin.f_to_kind(Kind::Float)?;
        let turns = cos32
            .f_diag_embed(0, -2, -1)?
            .f_add(&swap.f_unsqueeze(0)?.f_mul(&sin32.f_unsqueeze(1)?)?)?
            .f_to_kind(placement.kind())?;
        Ok(Rope {
            cos,
            signed_sin,
            turns,
        })
    }
}

/// `cos` and `sin` of `position * theta^(-2i/d)`, each frequency twice (`[context, d]`),
/// computed in fp32 and cast to the model's kind; the first half of `sin` negated for `rotate`.
fn rope_tables(config: &LlmConfig, placement: LlmPlacement) -> Result<(Tensor, Tensor), LlmError> {
    let d = i64::from(config.head_dim());
    let opts = (Kind::Float, placement.device);
    let exponents = Tensor::f_arange_start_step(0, d, 2, opts)?.f_div_scalar(d as f64)?;
    let inv_freq = Tensor::f_full([d / 2], config.rope_theta, opts)?
        .f_pow(&exponents)?
        .f_reciprocal()?;
    let t = Tensor::f_arange(i64::from(config.context), opts)?;
    let freqs = t.f_outer(&inv_freq)?;
    let emb = Tensor::f_cat(&[&freqs, &freqs], -1)?;
    // `rotate` multiplies `sin` by the head rolled by half its width: negating the first half
    // of `sin` makes that `rotate_half(x) * sin`.
    let sign = Tensor::f_cat(
        &[
            Tensor::f_full([d / 2], -1.0, opts)?,
            Tensor::f_ones([d / 2], opts)?,
        ],
        0,
    )?;
    Ok((
        emb.f_cos()?.f_to_kind(placement.kind())?,
        emb.f_sin()?.f_mul(&sign)?.f_to_kind(placement.kind())?,
    ))
}

type Weights = (Tensor, Option<Tensor>, Vec<Layer>, Norm, Tensor);

/// The variables, named as `tests/llm.rs`'s Python reference reads them.
fn build_weights(vs: &VarStore, c: &LlmConfig) -> Result<Weights, LlmError> {
    let root = vs.root();
    let std = c.init_std;
    let normal = Init::Randn {
        mean: 0.0,
        stdev: std,
    };
    let (h, i) = (i64::from(c.hidden), i64::from(c.intermediate));
    let qkv_out = h + 2 * i64::from(c.kv_width());
    let gpt2 = c.architecture == LlmArchitecture::Gpt2;
    let var = |path: &tch::nn::Path, name: &str, dims: &[i64], init| {
        path.f_var(name, dims, init).map_err(LlmError::from)
    };
    let norm = |path: &tch::nn::Path| -> Result<Norm, LlmError> {
        Ok(Norm {
            weight: var(
                path,
                "weight",
                &[h],
                Init::Randn {
                    mean: 1.0,
                    stdev: std,
                },
            )?,
            bias: if gpt2 {
                Some(var(path, "bias", &[h], normal)?)
            } else {
                None
            },
        })
    };
    let bias = |path: &tch::nn::Path, n: i64| -> Result<Option<Tensor>, LlmError> {
        if gpt2 {
            Ok(Some(var(path, "bias", &[n], normal)?))
        } else {
            Ok(None)
        }
    };
    let embed = var(&root, "embed", &[i64::from(c.vocab), h], normal)?;
    let positions_embed = if gpt2 {
        Some(var(&root, "positions", &[i64::from(c.context), h], normal)?)
    } else {
        None
    };
    let mut layers = Vec::with_capacity(c.layers as usize);
    for l in 0..c.layers {
        let p = root.sub("layers").sub(l.to_string());
        let (qkv, out, up, down) = (p.sub("qkv"), p.sub("out"), p.sub("up"), p.sub("down"));
        let up_rows = if gpt2 { i } else { 2 * i };
        layers.push(Layer {
            attn_norm: norm(&p.sub("attn_norm"))?,
            qkv_w: var(&qkv, "weight", &[qkv_out, h], normal)?,
            qkv_b: bias(&qkv, qkv_out)?,
            out_w: var(&out, "weight", &[h, h], normal)?,
            out_b: bias(&out, h)?,
            mlp_norm: norm(&p.sub("mlp_norm"))?,
            up_w: var(&up, "weight", &[up_rows, h], normal)?,
            up_b: bias(&up, up_rows)?,
            down_w: var(&down, "weight", &[h, i], normal)?,
            down_b: bias(&down, h)?,
        });
    }
    let final_norm = norm(&root.sub("final_norm"))?;
    let head = if c.tied_embeddings {
        embed.shallow_clone()
    } else {
        var(&root, "head", &[i64::from(c.vocab), h], normal)?
    };
    Ok((embed, positions_embed, layers, final_norm, head))
}

impl KvCache {
    fn new(c: &LlmConfig, placement: LlmPlacement, slots: i64) -> Result<Self, LlmError> {
        let context = i64::from(c.context);
        let (kv_heads, d) = (i64::from(c.kv_heads), i64::from(c.head_dim()));
        let shape = [slots, kv_heads, context, d];
        let opts = (placement.kind(), placement.device);
        // The last slot's last head starts at row (slots * kv_heads - 1) * context; the rows view
        // ends with that head's first row's last position, so that it stays inside the storage.
        let rows = (slots - 1) * kv_heads * context + context;
        let row_strides = [d, context * d, 1];
        let mut keys = Vec::with_capacity(c.layers as usize);
        let mut values = Vec::with_capacity(c.layers as usize);
        let mut keys_rows = Vec::with_capacity(c.layers as usize);
        let mut values_rows = Vec::with_capacity(c.layers as usize);
        for _ in 0..c.layers {
            let k = Tensor::f_zeros(shape, opts)?;
            let v = Tensor::f_zeros(shape, opts)?;
            keys_rows.push(k.f_as_strided([rows, kv_heads, d], row_strides, 0)?);
            values_rows.push(v.f_as_strided([rows, kv_heads, d], row_strides, 0)?);
            keys.push(k);
            values.push(v);
        }
        let int = (Kind::Int64, placement.device);
        let int32 = (Kind::Int, placement.device);
        Ok(KvCache {
            keys,
            values,
            keys_rows,
            values_rows,
            positions: Tensor::f_zeros([slots], int)?,
            slot_base: Tensor::f_arange(slots, int)?.f_mul_scalar(kv_heads * context)?,
            key_positions: Tensor::f_arange(context, int)?,
            mask_open: Tensor::f_zeros([], opts)?,
            mask_closed: Tensor::f_full([], f64::NEG_INFINITY, opts)?,
            cu_queries: Tensor::f_arange(slots + 1, int32)?,
            cu_keys: Tensor::f_arange(slots + 1, int32)?.f_mul_scalar(kv_heads * context)?,
            used_keys: Tensor::f_zeros([slots], int32)?,
            lengths: vec![0; slots as usize],
        })
    }
}

/// [`DecodeAttention::FlashEager`] for a model with as many KV heads as query heads where
/// FlashAttention's kernel runs, [`DecodeAttention::Sdpa`] otherwise (see the module's "Decode
/// attention").
fn default_attention(config: &LlmConfig, placement: LlmPlacement) -> DecodeAttention {
    if config.kv_heads == config.heads && flash_decode_runs(config, placement) {
        DecodeAttention::FlashEager
    } else {
        DecodeAttention::Sdpa
    }
}

/// Whether FlashAttention's variable-length decode attention runs for `config` on `placement`:
/// bf16 on CUDA, a head width the kernel takes, and one call on tiny tensors on the device
/// succeeding (libtorch has the kernel only for Ampere and later cards).
fn flash_decode_runs(config: &LlmConfig, placement: LlmPlacement) -> bool {
    let d = i64::from(config.head_dim());
    if !placement.device.is_cuda()
        || placement.precision != Precision::Bf16
        || d % 8 != 0
        || d > 256
    {
        return false;
    }
    let try_once = || -> Result<(), LlmError> {
        let _no_grad = tch::no_grad_guard();
        let (heads, kv_heads) = (i64::from(config.heads), i64::from(config.kv_heads));
        let opts = (placement.kind(), placement.device);
        let int32 = (Kind::Int, placement.device);
        let q = Tensor::f_zeros([1, heads, d], opts)?;
        let kv = Tensor::f_zeros([2, kv_heads, d], opts)?;
        let cu_q = Tensor::f_arange(2, int32)?;
        let cu_k = Tensor::f_arange(2, int32)?.f_mul_scalar(2)?;
        let used = Tensor::f_full([1], 2, int32)?;
        let _ = crate::shim::flash_decode(&q, &kv, &kv, &cu_q, &cu_k, &used, 2)?;
        Ok(())
    };
    try_once().is_ok()
}

/// The positions a decode attends over when its longest sequence holds `longest`: that
/// sequence's new one included, rounded up to a multiple of `block` (0 taken as 1), at most
/// `context`.
pub(crate) fn attend_in_blocks(longest: i64, block: u32, context: u32) -> i64 {
    let block = i64::from(block.max(1));
    ((longest + block) / block * block).min(i64::from(context))
}

#[cfg(test)]
mod tests {
    use super::attend_in_blocks;
    use super::{LlmModel, LlmPlacement};
    use crate::llm::config::LlmPreset;
    use tch::{Device, Kind, Tensor};

    #[test]
    fn the_decode_mask_opens_each_sequences_positions_with_aligned_strides() {
        let config = LlmPreset::Gpt2Tiny.config();
        let context = i64::from(config.context);
        let model = LlmModel::new(&config, LlmPlacement::new(Device::Cpu, None), 3, 0).unwrap();
        let positions = Tensor::from_slice(&[4_i64, 0, 9]);
        let attend = 13;
        let mask = model.decode_mask(&positions, 3, attend).unwrap();
        assert_eq!(mask.size(), [3, 1, 1, attend]);
        assert_eq!(mask.kind(), Kind::Float);
        // Every stride but the last is the context's (64: a multiple of 16), the last 1.
        assert_eq!(mask.stride(), [context, context, context, 1]);
        let rows: Vec<Vec<f32>> = (0..3)
            .map(|s| Vec::<f32>::try_from(mask.get(s).flatten(0, -1)).unwrap())
            .collect();
        for (row, open) in rows.iter().zip([4_usize, 0, 9]) {
            for (j, &value) in row.iter().enumerate() {
                if j <= open {
                    assert!(
                        value == 0.0,
                        "position {j} of a sequence at {open}: {value}"
                    );
                } else {
                    assert!(
                        value == f32::NEG_INFINITY,
                        "position {j} at {open}: {value}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_attention_length_rounds_up_to_its_block() {
        // A sequence of 511 tokens decodes its 512th: one block of 128.
        assert_eq!(attend_in_blocks(511, 128, 1024), 512);
        assert_eq!(attend_in_blocks(512, 128, 1024), 640);
        assert_eq!(attend_in_blocks(639, 128, 1024), 640);
        // Never past the context; a block of 1 (or 0) is the exact length.
        assert_eq!(attend_in_blocks(1000, 128, 1024), 1024);
        assert_eq!(attend_in_blocks(12, 1, 1024), 13);
        assert_eq!(attend_in_blocks(12, 0, 1024), 13);
    }
}
