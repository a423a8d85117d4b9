//! The built-in LLM presets and their parameter counts.
//!
//! Two published configurations, with random weights (no download), and two tiny ones for CPU
//! tests and demos:
//!
//! | preset           | layers | width | heads (KV) | MLP            | vocab  | context | norm      | positions | head   |
//! | ---------------- | ------ | ----- | ---------- | -------------- | ------ | ------- | --------- | --------- | ------ |
//! | `gpt2-small`     | 12     | 768   | 12 (12)    | GELU 3072      | 50257  | 1024    | LayerNorm | learned   | tied   |
//! | `tinyllama-1.1b` | 22     | 2048  | 32 (4)     | SwiGLU 5632    | 32000  | 2048    | RMSNorm   | rotary    | untied |
//! | `gpt2-tiny`      | 2      | 64    | 4 (4)      | GELU 256       | 512    | 64      | LayerNorm | learned   | tied   |
//! | `llama-tiny`     | 2      | 64    | 4 (2)      | SwiGLU 176     | 512    | 128     | RMSNorm   | rotary    | untied |
//!
//! GPT-2 small is Radford et al. 2019's 124M model (Hugging Face `gpt2`: 124,439,808
//! parameters with the output head tied to the token embedding); TinyLlama-1.1B is Zhang et
//! al. 2024's (`TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T`: 1,100,048,384).
//! [`LlmConfig::param_count`] computes a configuration's count from its sizes, and a test builds
//! the tiny presets and counts their real tensors against it.

use std::fmt;
use std::str::FromStr;

use crate::error::LlmError;

/// The two transformer families.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LlmArchitecture {
    /// GPT-2: LayerNorm (with bias), learned absolute positions, a GELU (tanh) MLP, biases in
    /// every linear layer, a fused QKV projection.
    Gpt2,
    /// Llama: RMSNorm, rotary positions (the "rotate half" convention of Hugging Face's Llama),
    /// a SwiGLU MLP, no biases, grouped-query attention.
    Llama,
}

/// A built-in LLM configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LlmPreset {
    /// GPT-2 small (124M).
    Gpt2Small,
    /// TinyLlama-1.1B.
    TinyLlama1_1b,
    /// A two-layer GPT-2 for CPU tests.
    Gpt2Tiny,
    /// A two-layer Llama with grouped-query attention for CPU tests.
    LlamaTiny,
}

impl LlmPreset {
    /// Every preset, in the order `--help` lists them.
    pub const ALL: [LlmPreset; 4] = [
        LlmPreset::Gpt2Small,
        LlmPreset::TinyLlama1_1b,
        LlmPreset::Gpt2Tiny,
        LlmPreset::LlamaTiny,
    ];

    /// The name used on the command line and recorded in `config.model`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            LlmPreset::Gpt2Small => "gpt2-small",
            LlmPreset::TinyLlama1_1b => "tinyllama-1.1b",
            LlmPreset::Gpt2Tiny => "gpt2-tiny",
            LlmPreset::LlamaTiny => "llama-tiny",
        }
    }

    /// The preset's configuration.
    #[must_use]
    pub fn config(self) -> LlmConfig {
        match self {
            LlmPreset::Gpt2Small => LlmConfig::gpt2(12, 768, 12, 3072, 50257, 1024),
            LlmPreset::TinyLlama1_1b => LlmConfig::llama(22, 2048, 32, 4, 5632, 32000, 2048),
            LlmPreset::Gpt2Tiny => LlmConfig::gpt2(2, 64, 4, 256, 512, 64),
            LlmPreset::LlamaTiny => LlmConfig::llama(2, 64, 4, 2, 176, 512, 128),
        }
    }
}

impl fmt::Display for LlmPreset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for LlmPreset {
    type Err = LlmError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        LlmPreset::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| {
                LlmError::Config(format!(
                    "unknown LLM `{s}` (built-in LLMs: {})",
                    LlmPreset::ALL.map(LlmPreset::as_str).join(", ")
                ))
            })
    }
}

/// The sizes of a decoder-only transformer.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmConfig {
    /// GPT-2 or Llama.
    pub architecture: LlmArchitecture,
    /// Transformer blocks.
    pub layers: u32,
    /// Width of the residual stream (`d_model`).
    pub hidden: u32,
    /// Query heads.
    pub heads: u32,
    /// Key/value heads (equal to `heads` without grouped-query attention).
    pub kv_heads: u32,
    /// Width of the MLP's hidden layer.
    pub intermediate: u32,
    /// Vocabulary size.
    pub vocab: u32,
    /// Positions the model attends over (learned positions: the table's length; rotary: the
    /// cache's longest sequence).
    pub context: u32,
    /// Epsilon of the LayerNorm / RMSNorm.
    pub norm_eps: f64,
    /// Base of the rotary frequencies (Llama).
    pub rope_theta: f64,
    /// Whether the output head is the token embedding (GPT-2) or a matrix of its own.
    pub tied_embeddings: bool,
    /// Standard deviation of the random weights (normal, mean 0; norm weights mean 1). 0.02 is
    /// GPT-2's; tests raise it so that every weight visibly moves the logits.
    pub init_std: f64,
}

impl LlmConfig {
    /// A GPT-2 of these sizes (LayerNorm eps 1e-5, tied head, init std 0.02).
    #[must_use]
    pub fn gpt2(
        layers: u32,
        hidden: u32,
        heads: u32,
        intermediate: u32,
        vocab: u32,
        context: u32,
    ) -> Self {
        LlmConfig {
            architecture: LlmArchitecture::Gpt2,
            layers,
            hidden,
            heads,
            kv_heads: heads,
            intermediate,
            vocab,
            context,
            norm_eps: 1e-5,
            rope_theta: 10_000.0,
            tied_embeddings: true,
            init_std: 0.02,
        }
    }

    /// A Llama of these sizes (RMSNorm eps 1e-5, rotary base 10000, untied head, init std
    /// 0.02).
    #[must_use]
    pub fn llama(
        layers: u32,
        hidden: u32,
        heads: u32,
        kv_heads: u32,
        intermediate: u32,
        vocab: u32,
        context: u32,
    ) -> Self {
        LlmConfig {
            architecture: LlmArchitecture::Llama,
            layers,
            hidden,
            heads,
            kv_heads,
            intermediate,
            vocab,
            context,
            norm_eps: 1e-5,
            rope_theta: 10_000.0,
            tied_embeddings: false,
            init_std: 0.02,
        }
    }

    /// Width of one attention head.
    #[must_use]
    pub fn head_dim(&self) -> u32 {
        self.hidden / self.heads.max(1)
    }

    /// Width of the keys (and of the values) of all KV heads together.
    #[must_use]
    pub fn kv_width(&self) -> u32 {
        self.kv_heads * self.head_dim()
    }

    /// Refuses sizes that cannot make this transformer.
    pub fn validate(&self) -> Result<(), LlmError> {
        let sizes = [
            ("layers", self.layers),
            ("hidden", self.hidden),
            ("heads", self.heads),
            ("kv_heads", self.kv_heads),
            ("intermediate", self.intermediate),
            ("vocab", self.vocab),
            ("context", self.context),
        ];
        if let Some((name, _)) = sizes.iter().find(|(_, v)| *v == 0) {
            return Err(LlmError::Config(format!("{name} must be at least 1")));
        }
        if !self.hidden.is_multiple_of(self.heads) {
            return Err(LlmError::Config(format!(
                "{} heads do not divide the width {}",
                self.heads, self.hidden
            )));
        }
        if !self.heads.is_multiple_of(self.kv_heads) {
            return Err(LlmError::Config(format!(
                "{} KV heads do not divide the {} query heads",
                self.kv_heads, self.heads
            )));
        }
        if self.architecture == LlmArchitecture::Gpt2 && self.kv_heads != self.heads {
            return Err(LlmError::Config(
                "a GPT-2 has as many KV heads as query heads".into(),
            ));
        }
        if self.architecture == LlmArchitecture::Llama && !self.head_dim().is_multiple_of(2) {
            return Err(LlmError::Config(format!(
                "rotary positions need an even head width, got {}",
                self.head_dim()
            )));
        }
        let finite = |x: f64| x.is_finite() && x > 0.0;
        if !finite(self.norm_eps) || !finite(self.rope_theta) || !finite(self.init_std) {
            return Err(LlmError::Config(format!(
                "norm_eps ({}), rope_theta ({}) and init_std ({}) must be positive and finite",
                self.norm_eps, self.rope_theta, self.init_std
            )));
        }
        Ok(())
    }

    /// Parameters of this configuration, in elements, from its sizes alone (nothing is
    /// allocated). The tied head counts once.
    #[must_use]
    pub fn param_count(&self) -> u64 {
        let h = u64::from(self.hidden);
        let kv = u64::from(self.kv_width());
        let i = u64::from(self.intermediate);
        let vocab = u64::from(self.vocab);
        let qkv_out = h + 2 * kv;
        let (per_layer, extra) = match self.architecture {
            LlmArchitecture::Gpt2 => (
                // two LayerNorms (weight and bias), QKV and output projections, the MLP; every
                // linear layer has a bias
                2 * 2 * h + (h * qkv_out + qkv_out) + (h * h + h) + (h * i + i) + (i * h + h),
                // positions and the final LayerNorm
                u64::from(self.context) * h + 2 * h,
            ),
            LlmArchitecture::Llama => (
                // two RMSNorms, QKV and output projections, gate, up and down; no bias
                2 * h + h * qkv_out + h * h + 3 * h * i,
                // the final RMSNorm
                h,
            ),
        };
        let head = if self.tied_embeddings { 0 } else { vocab * h };
        vocab * h + u64::from(self.layers) * per_layer + extra + head
    }
}

/// What one decode step must read from device memory (its read floor's numerator).
///
/// A decode step of a batch reads every weight once, except the tables it only gathers a row
/// from per sequence (the untied token embedding of a Llama, the learned position table of a
/// GPT-2; a GPT-2's token embedding is also its output head, read whole), and each sequence's
/// cached keys and values up to the step's position (every layer, keys and values, all KV
/// heads). Activations are left out: at decode they are a few rows per sequence. Over a card's
/// copy bandwidth (bytes read plus written per second, as a device-to-device copy measures
/// it) this is the time no implementation of the step can beat: the step's *read floor*. A
/// CUDA-graph step that attends over the whole cache under a mask reads more; the floor counts
/// what the step needs, and the measured time shows the rest.
impl LlmConfig {
    /// Elements of the tables a decode step only gathers rows from: a GPT-2's position table,
    /// an untied token embedding.
    #[must_use]
    pub fn gathered_param_count(&self) -> u64 {
        let h = u64::from(self.hidden);
        let positions = match self.architecture {
            LlmArchitecture::Gpt2 => u64::from(self.context) * h,
            LlmArchitecture::Llama => 0,
        };
        let token_table = if self.tied_embeddings {
            0
        } else {
            u64::from(self.vocab) * h
        };
        positions + token_table
    }

    /// Bytes of the weights one decode step reads: every parameter but the gathered tables.
    #[must_use]
    pub fn decode_weight_bytes(&self, bytes_per_element: u64) -> u64 {
        (self.param_count() - self.gathered_param_count()).saturating_mul(bytes_per_element)
    }

    /// Bytes of one sequence's cached keys and values at one position (all layers).
    #[must_use]
    pub fn kv_bytes_per_position(&self, bytes_per_element: u64) -> u64 {
        2 * u64::from(self.layers) * u64::from(self.kv_width()) * bytes_per_element
    }

    /// Bytes one decode step of `batch` sequences reads when each attends over `keys` cached
    /// positions (its own new one included).
    #[must_use]
    pub fn decode_step_read_bytes(&self, bytes_per_element: u64, batch: u32, keys: u32) -> u64 {
        let cache = u64::from(batch)
            .saturating_mul(u64::from(keys))
            .saturating_mul(self.kv_bytes_per_position(bytes_per_element));
        self.decode_weight_bytes(bytes_per_element)
            .saturating_add(cache)
    }

    /// Bytes a decode step reads on average over one closed-loop cycle of `batch` sequences:
    /// a prefill of `prompt` tokens yields the first of `output` tokens, then decode step `t`
    /// (`t` = 1 .. `output` - 1) attends over `prompt + t` positions, `prompt + output / 2` on
    /// average (rounded to the nearest byte). `None` when the cycle has no decode step
    /// (`output` below 2).
    #[must_use]
    pub fn decode_cycle_read_bytes(
        &self,
        bytes_per_element: u64,
        batch: u32,
        prompt: u32,
        output: u32,
    ) -> Option<u64> {
        let steps = u64::from(output.checked_sub(1).filter(|&s| s > 0)?);
        // Twice the mean position, so that an odd output's half position stays exact.
        let twice_mean_keys = 2 * u64::from(prompt) + steps + 1;
        let cache_twice = u64::from(batch)
            .saturating_mul(twice_mean_keys)
            .saturating_mul(self.kv_bytes_per_position(bytes_per_element));
        Some(
            self.decode_weight_bytes(bytes_per_element)
                .saturating_add(cache_twice.div_ceil(2)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpt2_small_at_batch_8_reads_what_the_hand_count_says() {
        // GPT-2 small in bf16 (2 bytes), batch 8, prompt 512, 128 generated per cycle.
        // Weights: 124,439,808 parameters less the position table (1024 x 768 = 786,432; the
        // token embedding is the tied output head and is read whole) = 123,653,376 elements,
        // x 2 = 247,306,752 bytes.
        // Keys and values per sequence and position: 12 layers x 2 x 768 x 2 = 36,864 bytes.
        // Decode steps attend over 513 .. 639 positions, 576 on average:
        // 8 x 576 x 36,864 = 169,869,312 bytes.
        // Mean per decode step: 247,306,752 + 169,869,312 = 417,176,064 bytes.
        let c = LlmPreset::Gpt2Small.config();
        assert_eq!(c.decode_weight_bytes(2), 247_306_752);
        assert_eq!(c.kv_bytes_per_position(2), 36_864);
        assert_eq!(c.decode_cycle_read_bytes(2, 8, 512, 128), Some(417_176_064));
        // The first decode step: 8 x 513 x 36,864 = 151,289,856 of cache.
        assert_eq!(c.decode_step_read_bytes(2, 8, 513), 398_596_608);
        // TinyLlama: the untied token embedding (32000 x 2048) is gathered, the head read
        // whole; 22 layers x 2 x 4 KV heads x 64 x 2 bytes = 22,528 bytes a position.
        let t = LlmPreset::TinyLlama1_1b.config();
        assert_eq!(t.gathered_param_count(), 32_000 * 2048);
        assert_eq!(t.kv_bytes_per_position(2), 22_528);
        assert_eq!(t.decode_weight_bytes(2), (1_100_048_384 - 65_536_000) * 2);
        // At batch 8: 2,069,024,768 + 8 x 576 x 22,528 (103,809,024) = 2,172,833,792 bytes,
        // what scripts/perf/decode_table.py counts for the 2026-12-02 run's records.
        assert_eq!(
            t.decode_cycle_read_bytes(2, 8, 512, 128),
            Some(2_172_833_792)
        );
    }

    #[test]
    fn a_cycles_mean_is_the_mean_of_its_decode_steps() {
        let c = LlmPreset::LlamaTiny.config();
        for (batch, prompt, output) in [(1, 8, 2), (4, 16, 5), (3, 7, 6)] {
            let sum: u64 = (1..output)
                .map(|t| c.decode_step_read_bytes(4, batch, prompt + t))
                .sum();
            let steps = u64::from(output - 1);
            let mean = (sum + steps / 2) / steps;
            assert_eq!(
                c.decode_cycle_read_bytes(4, batch, prompt, output),
                Some(mean),
                "batch {batch}, prompt {prompt}, output {output}"
            );
        }
        // No decode step, no mean.
        assert_eq!(c.decode_cycle_read_bytes(4, 8, 16, 1), None);
        assert_eq!(c.decode_cycle_read_bytes(4, 8, 16, 0), None);
    }

    #[test]
    fn the_published_configurations_have_their_published_counts() {
        // Hugging Face `gpt2` (tied head) and TinyLlama-1.1B.
        assert_eq!(LlmPreset::Gpt2Small.config().param_count(), 124_439_808);
        assert_eq!(
            LlmPreset::TinyLlama1_1b.config().param_count(),
            1_100_048_384
        );
        // The tiny presets, as docs/llm.md lists them.
        assert_eq!(LlmPreset::Gpt2Tiny.config().param_count(), 136_960);
        assert_eq!(LlmPreset::LlamaTiny.config().param_count(), 158_016);
        // Untying GPT-2's head adds one vocab x width matrix.
        let mut untied = LlmPreset::Gpt2Small.config();
        untied.tied_embeddings = false;
        assert_eq!(untied.param_count(), 124_439_808 + 50_257 * 768);
    }

    #[test]
    fn names_round_trip_and_bad_sizes_are_refused() {
        for p in LlmPreset::ALL {
            assert_eq!(p.as_str().parse::<LlmPreset>().unwrap(), p);
            p.config().validate().unwrap();
        }
        let e = "gpt2".parse::<LlmPreset>().unwrap_err();
        assert!(e.to_string().contains("gpt2-small"), "{e}");
        let base = LlmPreset::LlamaTiny.config();
        for bad in [
            LlmConfig {
                layers: 0,
                ..base.clone()
            },
            LlmConfig {
                heads: 5,
                ..base.clone()
            },
            LlmConfig {
                kv_heads: 3,
                ..base.clone()
            },
            LlmConfig {
                hidden: 12,
                heads: 4,
                kv_heads: 4,
                ..base.clone()
            },
            LlmConfig {
                init_std: f64::NAN,
                ..base.clone()
            },
        ] {
            assert!(
                matches!(bad.validate(), Err(LlmError::Config(_))),
                "{bad:?}"
            );
        }
    }
}
