//! The built-in LLM on the CPU:
//!
//! - parameter counts of the real tensors against [`LlmConfig::param_count`] (whose published
//!   figures are pinned in the crate's unit tests);
//! - a cached decode computes what a full forward without the cache computes, step by step,
//!   including sequences of different lengths decoded together;
//! - the logits match an independent PyTorch implementation of both architectures, written in
//!   the Python below from the architectures' definitions (explicit softmax attention, its own
//!   rotary tables, repeated KV heads), fed the weights tch saved as safetensors;
//! - the closed-loop decode step generates what the full forward's argmax says;
//! - bad input is refused with typed errors.
//!
//! The Python runs with the project's PyTorch (`.venv`, `$COLOAD_PYTHON` or `python3`); if none
//! can `import torch` the comparison fails saying so rather than skip.
//!
//! Tolerances: fp32 on the CPU, so the cached and full paths differ only by summation order
//! (seen: about 1e-6 of the logits' scale); the Python reference computes in float64. Both
//! comparisons allow 1e-4 of the largest logit, far below what a wrong mask, position or
//! cache entry moves them (tens of percent with these weights: `init_std` 0.2 makes attention
//! sharp enough that every position matters).

mod support;

use std::process::Command;
use std::sync::atomic::AtomicBool;

use coload_cohort_schema::{DeviceChoice, Execution, FailureKind, Precision};
use coload_timing::{
    ArrivalSchedule, BatchBuffer, Clock, IterationKind, IterationStep, LlmRequest, LlmRequests,
    LlmServeBuffer, LlmServePolicy, MonotonicClock, SimulatedClock, Step, llm_request_records,
    run_llm_serve, run_window,
};
use coload_workload::{
    DecodeAttention, DecodeOptions, DecodeStep, LlmArchitecture, LlmConfig, LlmError, LlmModel,
    LlmPlacement, LlmPreset, LlmServeStep,
};
use tch::{Device, Kind, Tensor};

const TOLERANCE: f64 = 1e-4;

fn cpu() -> LlmPlacement {
    LlmPlacement::new(Device::Cpu, Some(Precision::Fp32))
}

/// A tiny preset with weights large enough to make attention sharp.
fn tiny(preset: LlmPreset) -> LlmConfig {
    LlmConfig {
        init_std: 0.2,
        ..preset.config()
    }
}

/// `[b, p]` token ids from `seed`, drawn with a generator of the test's own: libtorch's global
/// one is reseeded by every model built on another test thread.
fn tokens(config: &LlmConfig, b: i64, p: i64, seed: u64) -> Tensor {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let ids: Vec<i64> = (0..b * p)
        .map(|_| {
            // xorshift64*
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            (state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as i64 % i64::from(config.vocab)
        })
        .collect();
    Tensor::from_slice(&ids).view([b, p])
}

/// Largest absolute difference, relative to the largest absolute logit of `reference`.
fn gap(got: &Tensor, reference: &Tensor) -> f64 {
    let diff = (got - reference).abs().max().double_value(&[]);
    diff / reference.abs().max().double_value(&[])
}

#[test]
fn real_tensors_count_what_the_formula_counts() {
    for preset in [LlmPreset::Gpt2Tiny, LlmPreset::LlamaTiny] {
        let config = preset.config();
        let model = LlmModel::new(&config, cpu(), 1, 0).unwrap();
        assert_eq!(model.parameter_count(), config.param_count(), "{preset}");
    }
    // GPT-2 small itself (drawn as 500 MB of fp32 on the CPU, kept in bf16): tied, 124M, and
    // its KV cache for 8 sequences in bf16 as docs/llm.md gives it.
    let config = LlmPreset::Gpt2Small.config();
    let bf16 = LlmPlacement::new(Device::Cpu, Some(Precision::Bf16));
    let model = LlmModel::new(&config, bf16, 8, 0).unwrap();
    assert_eq!(model.parameter_count(), 124_439_808);
    assert_eq!(model.cache_bytes(), 12 * 2 * 8 * 1024 * 768 * 2);
    assert_eq!(model.cache_bytes(), 301_989_888);
    drop(model);
    // An untied GPT-2 and a tied Llama count their heads the other way round.
    for (preset, tied) in [(LlmPreset::Gpt2Tiny, false), (LlmPreset::LlamaTiny, true)] {
        let config = LlmConfig {
            tied_embeddings: tied,
            ..preset.config()
        };
        let model = LlmModel::new(&config, cpu(), 1, 0).unwrap();
        assert_eq!(
            model.parameter_count(),
            config.param_count(),
            "{preset} tied={tied}"
        );
    }
}

/// Prefills slot `s` with its own prompt length, then decodes all slots together with teacher
/// forcing (the true next token), comparing every step's logits with the full forward's at
/// that position. Sequence `s` starts with `prompts[s]` tokens, so the slots sit at different
/// positions in every step: the per-sequence positions and masks are exercised.
fn cached_against_full(config: &LlmConfig, block: u32) -> f64 {
    let prompts = [5_i64, 3, 7];
    let total = 12;
    let all = tokens(config, 3, total, 5);
    let mut model = LlmModel::new(config, cpu(), 3, 1).unwrap();
    let full = model.forward_full(&all).unwrap();
    assert_eq!(full.size(), [3, total, i64::from(config.vocab)]);
    let mut worst: f64 = 0.0;
    for (s, &p) in prompts.iter().enumerate() {
        let s = s as i64;
        let logits = model
            .prefill_slots(s, &all.narrow(0, s, 1).narrow(1, 0, p))
            .unwrap();
        worst = worst.max(gap(&logits, &full.get(s).get(p - 1).unsqueeze(0)));
    }
    assert_eq!(model.lengths(), prompts);
    // Decode until the longest sequence reaches `total` tokens.
    for step in 0..(total - prompts[2]) {
        let next: Vec<Tensor> = prompts
            .iter()
            .enumerate()
            .map(|(s, &p)| all.get(s as i64).narrow(0, p + step, 1))
            .collect();
        let next = Tensor::stack(&next, 0);
        let logits = model.decode_step_in_blocks(&next, block).unwrap();
        for (s, &p) in prompts.iter().enumerate() {
            let reference = full.get(s as i64).get(p + step);
            worst = worst.max(gap(&logits.get(s as i64), &reference));
        }
    }
    assert_eq!(model.lengths(), [10, 8, 12]);
    worst
}

#[test]
fn a_cached_decode_computes_what_the_full_forward_computes() {
    // Block 1 attends over exactly the longest sequence; blocks of 4 and 16 over more positions,
    // masked (the serve step's rounding, `decode_step_in_blocks`).
    for preset in [LlmPreset::Gpt2Tiny, LlmPreset::LlamaTiny] {
        for block in [1, 4, 16] {
            let worst = cached_against_full(&tiny(preset), block);
            assert!(
                worst < TOLERANCE,
                "{preset}, block {block}: cached decode is {worst:e} of the logits' scale from the \
                 full forward"
            );
        }
    }
}

#[test]
fn a_reset_forgets_the_previous_sequences() {
    let config = tiny(LlmPreset::LlamaTiny);
    let mut model = LlmModel::new(&config, cpu(), 2, 1).unwrap();
    let a = tokens(&config, 2, 6, 1);
    let b = tokens(&config, 2, 4, 2);
    let first = model.prefill(&b).unwrap();
    let _ = model.prefill(&a).unwrap();
    let _ = model.decode_step(&a.narrow(1, 0, 1)).unwrap();
    model.reset().unwrap();
    assert_eq!(model.lengths(), [0, 0]);
    // After the reset, the same prompt gives the same logits, and a decode step matches the
    // full forward of the new prompt alone (nothing of `a` leaks in).
    let again = model.prefill(&b).unwrap();
    assert!(gap(&again, &first) < TOLERANCE);
    let next = tokens(&config, 2, 1, 3);
    let logits = model.decode_step(&next).unwrap();
    let full = model.forward_full(&Tensor::cat(&[&b, &next], 1)).unwrap();
    assert!(gap(&logits, &full.select(1, 4)) < TOLERANCE);
}

/// The reference: the architectures as their papers and Hugging Face's implementations define
/// them, in float64, sharing no code with the Rust model. Reads the safetensors file by hand
/// (its format is eight bytes of header length, a JSON header, raw little-endian data).
const REFERENCE: &str = r#"
import json, math, struct, sys
import torch

def load(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", info
        start, end = info["data_offsets"]
        raw = bytearray(data[8 + n + start:8 + n + end])
        out[name] = torch.frombuffer(raw, dtype=torch.float32).reshape(info["shape"]).double()
    return out

def reference(cfg):
    W = load(cfg["weights"])
    tokens = torch.tensor(cfg["tokens"], dtype=torch.long)
    gpt2 = cfg["architecture"] == "gpt2"
    H, KV, hidden, inter, eps = cfg["heads"], cfg["kv_heads"], cfg["hidden"], cfg["intermediate"], cfg["eps"]
    d = hidden // H
    B, P = tokens.shape

    def norm(x, name):
        if gpt2:
            mean = x.mean(-1, keepdim=True)
            var = ((x - mean) ** 2).mean(-1, keepdim=True)
            return (x - mean) / torch.sqrt(var + eps) * W[name + ".weight"] + W[name + ".bias"]
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * W[name + ".weight"]

    def dense(x, name):
        y = x @ W[name + ".weight"].T
        if gpt2:
            y = y + W[name + ".bias"]
        return y

    def rotary(x):
        # x: [B, heads, P, d]; Llama's rotate-half convention.
        inv_freq = 1.0 / (cfg["theta"] ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
        angles = torch.arange(P, dtype=torch.float64)[:, None] * inv_freq[None, :]
        cos = torch.cat([angles.cos(), angles.cos()], -1)
        sin = torch.cat([angles.sin(), angles.sin()], -1)
        x1, x2 = x[..., : d // 2], x[..., d // 2 :]
        return x * cos + torch.cat([-x2, x1], -1) * sin

    x = W["embed"][tokens]
    if gpt2:
        x = x + W["positions"][:P]
    causal = torch.ones(P, P, dtype=torch.bool).tril()
    for l in range(cfg["layers"]):
        pre = f"layers.{l}."
        h = norm(x, pre + "attn_norm")
        qkv = dense(h, pre + "qkv")
        q = qkv[..., :hidden].reshape(B, P, H, d).transpose(1, 2)
        k = qkv[..., hidden:hidden + KV * d].reshape(B, P, KV, d).transpose(1, 2)
        v = qkv[..., hidden + KV * d:].reshape(B, P, KV, d).transpose(1, 2)
        if not gpt2:
            q, k = rotary(q), rotary(k)
        # Grouped-query attention: query head i reads KV head i // (H // KV).
        k = k.repeat_interleave(H // KV, dim=1)
        v = v.repeat_interleave(H // KV, dim=1)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(d)
        scores = scores.masked_fill(~causal, float("-inf"))
        y = torch.softmax(scores, -1) @ v
        x = x + dense(y.transpose(1, 2).reshape(B, P, hidden), pre + "out")
        h = norm(x, pre + "mlp_norm")
        u = dense(h, pre + "up")
        if gpt2:
            a = 0.5 * u * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (u + 0.044715 * u ** 3)))
        else:
            gate, up = u[..., :inter], u[..., inter:]
            a = gate * torch.sigmoid(gate) * up
        x = x + dense(a, pre + "down")
    x = norm(x, "final_norm")
    head = W["embed"] if cfg["tied"] else W["head"]
    logits = (x @ head.T).float().contiguous()
    with open(cfg["out"], "wb") as f:
        f.write(logits.numpy().tobytes())

with open(sys.argv[1]) as jobs:
    for line in jobs:
        reference(json.loads(line))
"#;

/// Runs the reference on each `(model, tokens)` (one Python process for all, since importing
/// torch takes seconds); returns each one's logits `[B, P, vocab]`.
fn pytorch_logits(jobs: &[(&LlmModel, &Tensor)]) -> Vec<Tensor> {
    let python = support::torch_python().unwrap_or_else(|| {
        panic!(
            "no Python that can `import torch` (tried $COLOAD_PYTHON, the workspace's .venv and \
             python3 on PATH): the LLM reference test needs one; run it through \
             scripts/with-libtorch, which provisions .venv"
        )
    });
    let dir = tempfile::tempdir().unwrap();
    let mut lines = Vec::new();
    for (i, (model, tokens)) in jobs.iter().enumerate() {
        let weights = dir.path().join(format!("weights{i}.safetensors"));
        model.var_store().save(&weights).unwrap();
        let c = model.config();
        let rows: Vec<Vec<i64>> = Vec::<Vec<i64>>::try_from(*tokens).unwrap();
        let rows = rows
            .iter()
            .map(|r| {
                format!(
                    "[{}]",
                    r.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
                )
            })
            .collect::<Vec<_>>()
            .join(",");
        lines.push(format!(
            r#"{{"weights":"{}","out":"{}","tokens":[{rows}],"architecture":"{}","layers":{},"heads":{},"kv_heads":{},"hidden":{},"intermediate":{},"eps":{:e},"theta":{:e},"tied":{}}}"#,
            weights.display(),
            dir.path().join(format!("logits{i}.f32")).display(),
            match c.architecture {
                LlmArchitecture::Gpt2 => "gpt2",
                LlmArchitecture::Llama => "llama",
            },
            c.layers,
            c.heads,
            c.kv_heads,
            c.hidden,
            c.intermediate,
            c.norm_eps,
            c.rope_theta,
            c.tied_embeddings
        ));
    }
    let jobs_file = dir.path().join("jobs.jsonl");
    std::fs::write(&jobs_file, lines.join("\n")).unwrap();
    let script = dir.path().join("reference.py");
    std::fs::write(&script, REFERENCE).unwrap();
    let out = Command::new(&python)
        .arg(&script)
        .arg(&jobs_file)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "the PyTorch reference failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    jobs.iter()
        .enumerate()
        .map(|(i, (model, tokens))| {
            let bytes = std::fs::read(dir.path().join(format!("logits{i}.f32"))).unwrap();
            let values: Vec<f32> = bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            let (b, p) = (tokens.size()[0], tokens.size()[1]);
            Tensor::from_slice(&values).view([b, p, i64::from(model.config().vocab)])
        })
        .collect()
}

#[test]
fn logits_match_an_independent_pytorch_implementation() {
    let presets = [LlmPreset::Gpt2Tiny, LlmPreset::LlamaTiny];
    let mut models: Vec<LlmModel> = presets
        .iter()
        .map(|&p| LlmModel::new(&tiny(p), cpu(), 2, 3).unwrap())
        .collect();
    let inputs: Vec<Tensor> = models
        .iter()
        .map(|m| tokens(m.config(), 2, 10, 7))
        .collect();
    let jobs: Vec<(&LlmModel, &Tensor)> = models.iter().zip(&inputs).collect();
    let references = pytorch_logits(&jobs);
    for (((preset, model), all), reference) in presets
        .iter()
        .zip(&mut models)
        .zip(&inputs)
        .zip(&references)
    {
        let full = model.forward_full(all).unwrap();
        let full_gap = gap(&full, reference);
        assert!(
            full_gap < TOLERANCE,
            "{preset}: the full forward is {full_gap:e} of the logits' scale from PyTorch's"
        );
        // The cached path too: prefill 6, decode 4.
        let mut worst = gap(
            &model.prefill(&all.narrow(1, 0, 6)).unwrap(),
            &reference.select(1, 5),
        );
        for t in 6..10 {
            let logits = model.decode_step(&all.narrow(1, t, 1)).unwrap();
            worst = worst.max(gap(&logits, &reference.select(1, t)));
        }
        assert!(
            worst < TOLERANCE,
            "{preset}: the cached decode is {worst:e} of the logits' scale from PyTorch's"
        );
        // And the comparison can tell models apart: another seed is far off.
        let other = LlmModel::new(model.config(), cpu(), 2, 4).unwrap();
        assert!(gap(&other.forward_full(all).unwrap(), reference) > 0.1);
    }
}

fn decode_options(batch: u32, prompt: u32, generate: u32) -> DecodeOptions {
    DecodeOptions {
        model: LlmPreset::LlamaTiny,
        device: DeviceChoice::Cpu,
        batch_size: batch,
        prompt_tokens: prompt,
        generate_tokens: generate,
        precision: None,
        seed: 9,
        execution: Execution::Eager,
        attention: None,
    }
}

#[test]
fn the_decode_step_generates_what_the_full_forward_argmax_says() {
    let mut step = DecodeStep::new(&decode_options(2, 4, 5)).unwrap();
    assert_eq!(
        step.model().placement().precision,
        Precision::Fp32,
        "fp32 on the CPU"
    );
    let prompt = step.prompt().shallow_clone();
    let mut generated = Vec::new();
    for i in 0..5 {
        let expected = if i == 0 {
            (IterationKind::Prefill, 0)
        } else {
            (IterationKind::Decode, 4 + i - 1)
        };
        assert_eq!(step.phase(), expected, "iteration {i}");
        assert_eq!(step.step().unwrap(), 2, "two tokens per iteration");
        generated.push(Tensor::from_slice(&step.tokens().unwrap()).view([2, 1]));
    }
    assert_eq!(
        step.phase(),
        (IterationKind::Prefill, 0),
        "the cycle restarts"
    );
    assert_eq!(step.model().lengths(), [8, 8], "4 prompt + 4 fed back");
    // Greedy decoding: each token is the argmax of the full forward over what came before.
    let sequence = Tensor::cat(&[&prompt, &Tensor::cat(&generated, 1)], 1);
    let full = step
        .model()
        .forward_full(&sequence.narrow(1, 0, 8))
        .unwrap();
    let argmax = full.narrow(1, 3, 5).argmax(-1, false);
    assert!(
        argmax.equal(&sequence.narrow(1, 4, 5)),
        "generated {sequence:?}, argmax {argmax:?}"
    );
    // The next cycle starts again from the same prompt and so generates the same tokens.
    step.step().unwrap();
    assert_eq!(
        step.tokens().unwrap(),
        Vec::<i64>::try_from(generated[0].flatten(0, -1)).unwrap()
    );
    assert_eq!(step.model().lengths(), [4, 4]);
    let info = step.info();
    assert_eq!(info.model, "llama-tiny");
    assert_eq!(
        info.parameter_count,
        LlmPreset::LlamaTiny.config().param_count()
    );
}

#[test]
fn bad_input_is_refused_with_typed_errors() {
    let config = tiny(LlmPreset::Gpt2Tiny);
    let context = i64::from(config.context);
    let mut model = LlmModel::new(&config, cpu(), 2, 0).unwrap();
    let empty = Tensor::zeros([2, 0], (Kind::Int64, Device::Cpu));
    assert!(matches!(
        model.prefill(&empty),
        Err(LlmError::ZeroCount { got: 0, .. })
    ));
    let long = tokens(&config, 2, context + 1, 0);
    let e = model.prefill(&long).unwrap_err();
    assert!(
        matches!(e, LlmError::PromptTooLong { prompt_tokens, .. } if prompt_tokens == context + 1)
    );
    assert_eq!(e.kind(), FailureKind::InvalidOption);
    assert!(model.forward_full(&long).is_err());
    let e = model.decode_step(&tokens(&config, 2, 1, 0)).unwrap_err();
    assert!(matches!(e, LlmError::NotPrefilled { slot: 0 }), "{e}");
    assert!(matches!(
        model.prefill(&tokens(&config, 3, 4, 0)),
        Err(LlmError::Slots {
            end: 3,
            slots: 2,
            ..
        })
    ));
    assert!(matches!(
        model.prefill_slots(-1, &tokens(&config, 1, 4, 0)),
        Err(LlmError::Slots { .. })
    ));
    assert!(matches!(
        model.prefill(&Tensor::zeros([4], (Kind::Int64, Device::Cpu))),
        Err(LlmError::Shape { .. })
    ));
    let _ = model.prefill(&tokens(&config, 2, 4, 0)).unwrap();
    assert!(matches!(
        model.decode_step(&tokens(&config, 2, 2, 0)),
        Err(LlmError::Shape { .. })
    ));
    // Negative token ids: libtorch's own refusal, typed, not a panic.
    let negative = Tensor::from_slice(&[-1_i64, 5]).view([2, 1]);
    let e = model.decode_step(&negative).unwrap_err();
    assert_eq!(e.kind(), FailureKind::LibtorchError, "{e}");
    // Fill slot 0 to the context, then one more step is refused.
    model.reset().unwrap();
    let _ = model.prefill(&tokens(&config, 2, context, 0)).unwrap();
    let e = model.decode_step(&tokens(&config, 2, 1, 0)).unwrap_err();
    assert!(matches!(e, LlmError::ContextFull { slot: 0, .. }), "{e}");
    assert!(matches!(
        LlmModel::new(&config, cpu(), 0, 0),
        Err(LlmError::ZeroCount { .. })
    ));
    assert!(matches!(
        LlmModel::new(
            &LlmConfig {
                heads: 3,
                kv_heads: 3,
                ..config.clone()
            },
            cpu(),
            1,
            0
        ),
        Err(LlmError::Config(_))
    ));

    for (b, p, g) in [(0, 4, 4), (2, 0, 4), (2, 4, 0)] {
        let e = DecodeStep::new(&decode_options(b, p, g)).unwrap_err();
        assert!(matches!(e, LlmError::ZeroCount { got: 0, .. }), "{e}");
        assert_eq!(e.kind(), FailureKind::InvalidOption);
    }
    // llama-tiny has 128 positions: 100 + 30 - 1 = 129 do not fit; 100 + 29 - 1 do.
    let e = DecodeStep::new(&decode_options(1, 100, 30)).unwrap_err();
    assert!(e.to_string().contains("129 positions"), "{e}");
    assert!(DecodeStep::new(&decode_options(1, 100, 29)).is_ok());
    let mut graph = decode_options(1, 4, 4);
    graph.execution = Execution::CudaGraph;
    let e = DecodeStep::new(&graph).unwrap_err();
    assert_eq!(e.kind(), FailureKind::InvalidOption, "{e}");
}

#[test]
fn one_seed_makes_one_model_on_every_precision() {
    let config = tiny(LlmPreset::LlamaTiny);
    let all = tokens(&config, 1, 6, 1);
    let a = LlmModel::new(&config, cpu(), 1, 5).unwrap();
    let b = LlmModel::new(&config, cpu(), 1, 5).unwrap();
    assert!(
        a.forward_full(&all)
            .unwrap()
            .equal(&b.forward_full(&all).unwrap())
    );
    let bf16 = LlmModel::new(
        &config,
        LlmPlacement::new(Device::Cpu, Some(Precision::Bf16)),
        1,
        5,
    )
    .unwrap();
    let logits = bf16.forward_full(&all).unwrap();
    assert_eq!(logits.kind(), Kind::BFloat16);
    // The same weights rounded to bf16: close to fp32's logits, not equal.
    let g = gap(&logits.to_kind(Kind::Float), &a.forward_full(&all).unwrap());
    assert!(g > 0.0 && g < 0.1, "bf16 against fp32: {g:e}");
}

fn request(arrival_ms: u64, prompt_tokens: u32, output_tokens: u32) -> LlmRequest {
    LlmRequest {
        arrival_ns: arrival_ms * 1_000_000,
        prompt_tokens,
        output_tokens,
    }
}

/// Greedy generation of `output` tokens from `prompt` by a model of its own, one sequence.
fn alone(config: &LlmConfig, seed: u64, prompt: &Tensor, output: u32) -> Vec<i64> {
    let mut model = LlmModel::new(config, cpu(), 1, seed).unwrap();
    let mut token = model.prefill(prompt).unwrap().argmax(-1, true);
    let mut out = vec![token.int64_value(&[0, 0])];
    for _ in 1..output {
        token = model.decode_step(&token).unwrap().argmax(-1, true);
        out.push(token.int64_value(&[0, 0]));
    }
    out
}

/// The real model behind the continuous batcher, on the simulated clock (the step takes no
/// simulated time, so the schedule is exact): five requests at 0 and one at 1 ms, at most three
/// running. Request 2 wants one token (it completes in its prefill and its slot is reused
/// before any decode retires it), requests complete in another order than they arrived (the
/// cache is compacted around the holes), prefills run while others are mid-generation. Every
/// request must still generate exactly what it generates alone.
#[test]
fn continuous_batching_generates_what_each_request_generates_alone() {
    let config = tiny(LlmPreset::LlamaTiny);
    let requests = LlmRequests::new(
        vec![
            request(0, 4, 3),
            request(0, 7, 5),
            request(0, 5, 1),
            request(0, 3, 6),
            request(0, 6, 4),
            request(1, 2, 2),
        ],
        10_000_000,
    )
    .unwrap();
    let policy = LlmServePolicy::new(3, 1000, config.context).unwrap();
    policy.check(&requests).unwrap();
    let clock = SimulatedClock::new();
    let mut step = LlmServeStep::new(&config, cpu(), 3, 8, 11)
        .unwrap()
        .recording();
    // A warmup before the window leaves nothing behind.
    let medians = step.warm_up(&[8, 2], 2).unwrap();
    assert_eq!(medians.iter().map(|m| m.0).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(step.running(), 0);
    assert!(step.transcripts().is_empty());
    let mut buffer = LlmServeBuffer::new(&requests, &policy);
    let out = run_llm_serve(
        &mut step,
        &clock,
        &requests,
        &policy,
        &mut buffer,
        &AtomicBool::new(false),
    );
    assert!(out.error.is_none(), "{:?}", out.error);
    assert_eq!(out.requests_completed, 6);
    let records = llm_request_records(&buffer, &requests);
    assert!(records.iter().all(|r| r.completed));
    // FCFS: the k-th sequence prefilled is request k.
    let transcripts = step.transcripts().to_vec();
    assert_eq!(transcripts.len(), 6);
    for (k, r) in requests.requests().iter().enumerate() {
        let prompt = step.request_prompt(k as u64, r.prompt_tokens).unwrap();
        assert_eq!(
            transcripts[k],
            alone(&config, 11, &prompt, r.output_tokens),
            "request {k}"
        );
    }
    // It was batching: a decode of three sequences, and a prefill while others were running.
    let iterations = buffer.iterations();
    assert!(
        iterations
            .iter()
            .any(|i| i.kind == IterationKind::Decode && i.sequences == 3)
    );
    assert!(
        iterations
            .windows(2)
            .any(|w| w[0].kind == IterationKind::Decode && w[1].kind == IterationKind::Prefill)
    );
    // Retirement is lazy: the request that completed in the last decode stays in the cache
    // until another iteration lists the running slots.
    assert_eq!(step.running(), 1);
    assert_eq!(step.model().lengths().iter().filter(|&&l| l > 0).count(), 1);
}

/// Three waves of three long requests (each running alone in its wave's last steps), then a
/// mixed wave of seven that fills all four slots: a one-token request, completions out of
/// arrival order, requests waiting for a slot. With a cache of four slots the buckets are 1, 2
/// and 4, so while three run the fourth slot is padding, for `3 * (context - 25)` decode steps
/// (more than the context: 117 for GPT-2 tiny, 309 for Llama tiny) before a request first lands
/// in it.
fn padded_schedule(context: u32) -> LlmRequests {
    let mut requests = Vec::new();
    for wave in 0..3 {
        for (prompt, shorter) in [(4, 8), (5, 16), (6, 24)] {
            requests.push(request(wave, prompt, context - shorter));
        }
    }
    for (prompt, output) in [(3, 10), (7, 5), (5, 1), (4, 12), (6, 4), (2, 7), (8, 3)] {
        requests.push(request(3, prompt, output));
    }
    LlmRequests::new(requests, 10_000_000).unwrap()
}

/// Runs `padded_schedule` on the simulated clock over a four-slot serve step of `config`, the
/// dynamic eager decode or the bucketed static one (what the CUDA graphs replay); returns what
/// each request generated, the iterations, and the step.
fn serve_padded(
    config: &LlmConfig,
    bucketed: bool,
) -> (
    Vec<Vec<i64>>,
    Vec<coload_timing::LlmIteration>,
    LlmServeStep,
) {
    let requests = padded_schedule(config.context);
    let policy = LlmServePolicy::new(4, 4 * u64::from(config.context), config.context).unwrap();
    policy.check(&requests).unwrap();
    let step = LlmServeStep::new(config, cpu(), 4, 8, 5)
        .unwrap()
        .recording();
    let mut step = if bucketed {
        step.static_buckets()
    } else {
        step
    };
    let mut buffer = LlmServeBuffer::new(&requests, &policy);
    let out = run_llm_serve(
        &mut step,
        &SimulatedClock::new(),
        &requests,
        &policy,
        &mut buffer,
        &AtomicBool::new(false),
    );
    assert!(out.error.is_none(), "bucketed {bucketed}: {:?}", out.error);
    assert_eq!(out.requests_completed, 16, "bucketed {bucketed}");
    (
        step.transcripts().to_vec(),
        buffer.iterations().to_vec(),
        step,
    )
}

/// The CUDA graphs' computation on the CPU: every decode padded to its batch-size
/// bucket, attention over the whole context under the mask, the idle slots' positions bounded
/// inside the step. It must generate exactly what the dynamic eager decode generates (and so
/// what each request generates alone), through slot moves, a slot reused before a decode
/// retires it, and a padding slot that decoded garbage for more steps than its context holds
/// before a request lands in it; the host counts only the real sequences.
#[test]
fn the_bucketed_static_decode_generates_what_the_dynamic_decode_generates() {
    for preset in [LlmPreset::Gpt2Tiny, LlmPreset::LlamaTiny] {
        let config = tiny(preset);
        let (dynamic, _, _) = serve_padded(&config, false);
        let (bucketed, iterations, step) = serve_padded(&config, true);
        assert_eq!(step.bucket_sizes(), [1, 2, 4]);
        assert_eq!(step.execution(), Execution::Eager);
        let requests = padded_schedule(config.context);
        assert_eq!(bucketed.len(), requests.len());
        for (k, r) in requests.requests().iter().enumerate() {
            assert_eq!(bucketed[k].len(), r.output_tokens as usize, "{preset} {k}");
            assert_eq!(bucketed[k], dynamic[k], "{preset}: request {k}");
        }
        for k in [0, 9, 13] {
            let r = requests.requests()[k];
            let prompt = step.request_prompt(k as u64, r.prompt_tokens).unwrap();
            assert_eq!(
                bucketed[k],
                alone(&config, 5, &prompt, r.output_tokens),
                "{preset}: request {k} alone"
            );
        }
        // The fourth slot was padding for more decode steps than the context holds positions,
        // then held a request.
        let decodes = |n: u32| {
            iterations
                .iter()
                .filter(move |i| i.kind == IterationKind::Decode && i.sequences == n)
        };
        let first_full = iterations
            .iter()
            .position(|i| i.kind == IterationKind::Decode && i.sequences == 4)
            .expect("a decode of four sequences");
        let padded_before = iterations[..first_full]
            .iter()
            .filter(|i| i.kind == IterationKind::Decode && i.sequences == 3)
            .count();
        assert!(
            padded_before > config.context as usize,
            "{preset}: {padded_before} padded decodes before the slot was used"
        );
        assert!(decodes(1).count() > 0 && decodes(2).count() > 0);
        // The host advanced only the real sequences: the slots it holds no sequence in are at
        // length 0, whatever the device's padding did.
        let held = step.model().lengths().iter().filter(|&&l| l > 0).count();
        assert_eq!(
            held,
            step.running(),
            "{preset}: {:?}",
            step.model().lengths()
        );
    }
}

/// The bucketed step warms its buckets, the only decode shapes its window runs, and leaves
/// nothing behind.
#[test]
fn a_bucketed_serve_step_warms_each_bucket() {
    let config = tiny(LlmPreset::Gpt2Tiny);
    let mut step = LlmServeStep::new(&config, cpu(), 5, 8, 0)
        .unwrap()
        .recording()
        .static_buckets();
    let medians = step.warm_up(&[8, 2], 3).unwrap();
    assert_eq!(
        medians.iter().map(|m| m.0).collect::<Vec<_>>(),
        [1, 2, 4, 5]
    );
    assert_eq!(step.running(), 0);
    assert!(step.transcripts().is_empty());
    assert!(step.model().lengths().iter().all(|&l| l == 0));
    // Eager steps keep warming every batch up to 32.
    let mut eager = LlmServeStep::new(&config, cpu(), 5, 8, 0).unwrap();
    let medians = eager.warm_up(&[8], 1).unwrap();
    assert_eq!(medians.len(), 5);
    assert!(eager.bucket_sizes().is_empty());
    // A CUDA graph needs a CUDA device.
    let e = LlmServeStep::new(&config, cpu(), 5, 8, 0)
        .unwrap()
        .capture_graphs()
        .unwrap_err();
    assert!(e.to_string().contains("needs a CUDA device"), "{e}");
}

#[test]
fn the_serve_step_refuses_what_it_was_not_built_for() {
    let config = tiny(LlmPreset::Gpt2Tiny);
    let mut step = LlmServeStep::new(&config, cpu(), 2, 8, 0).unwrap();
    assert!(matches!(
        step.prefill(&[0], &[9]),
        Err(LlmError::PromptLongerThanBuilt {
            prompt_tokens: 9,
            max_prompt_tokens: 8
        })
    ));
    assert!(matches!(
        step.decode(&[1]),
        Err(LlmError::NotPrefilled { slot: 1 })
    ));
    assert!(matches!(
        step.prefill(&[5], &[4]),
        Err(LlmError::Slots { .. })
    ));
    assert!(matches!(
        LlmServeStep::new(&config, cpu(), 2, config.context + 1, 0),
        Err(LlmError::PromptTooLong { .. })
    ));
    assert!(matches!(
        LlmServeStep::new(&config, cpu(), 0, 8, 0),
        Err(LlmError::ZeroCount { .. })
    ));
    step.prefill(&[0, 1], &[4, 8]).unwrap();
    step.decode(&[1, 0]).unwrap();
    assert_eq!(step.model().lengths(), [5, 9]);
    // Slot 0's request completed: the next decode retires it and moves slot 1's sequence down.
    step.decode(&[1]).unwrap();
    assert_eq!(step.running(), 1);
    assert_eq!(step.model().lengths(), [10, 0]);
    // A new request in slot 1; then the older one completes and the new one moves down.
    step.prefill(&[0], &[3]).unwrap();
    step.decode(&[0]).unwrap();
    assert_eq!(step.running(), 1);
    assert_eq!(step.model().lengths(), [4, 0]);
}

/// The decode step in the ordinary window runner on the real clock: every record is one
/// iteration of B tokens, and after a restart the cycle's phases line up with the record
/// indices, as docs/llm.md proposes to tag them.
#[test]
fn the_decode_step_runs_in_the_window_and_its_records_take_their_phases() {
    let mut step = DecodeStep::new(&decode_options(2, 6, 4)).unwrap();
    for _ in 0..3 {
        step.step().unwrap();
    }
    step.restart();
    let clock = Clock::anchor();
    let mut buffer = BatchBuffer::with_capacity(100_000);
    let start = clock.now_unix_ns() + 5_000_000;
    // A second: the tiny model's iterations take a millisecond or so, but other tests of this
    // binary load both cores of a small CI machine (seen: none in 300 ms).
    let outcome = run_window(
        &mut step,
        &clock,
        start,
        std::time::Duration::from_secs(1),
        &mut buffer,
    );
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    let records = buffer.records(&clock);
    assert!(records.len() >= 2, "{} iterations in 1 s", records.len());
    assert!(records.iter().all(|r| r.samples == 2));
    let cycle = step.cycle();
    let phases: Vec<IterationKind> = (0..8).map(|i| cycle.phase(i).0).collect();
    let (p, d) = (IterationKind::Prefill, IterationKind::Decode);
    assert_eq!(phases, [p, d, d, d, p, d, d, d]);
    // The step's own count agrees: the next iteration is the one after the last recorded (or
    // the one that ran across the window's end).
    let next = step.phase();
    let after_last = cycle.phase(records.len() as u64);
    let across_end = cycle.phase(records.len() as u64 + 1);
    assert!(next == after_last || next == across_end, "{next:?}");
}

/// The real model behind the continuous batcher on the real clock: requests complete, their
/// latencies are real and ordered (TTFT <= end-to-end), tokens are counted.
#[test]
fn the_serve_step_serves_a_window_on_the_real_clock() {
    let config = tiny(LlmPreset::LlamaTiny);
    // A second, as for the decode window: other tests of this binary share the cores.
    let window_ns = 1_000_000_000;
    let schedule = ArrivalSchedule::uniform(50.0, window_ns).unwrap();
    let requests = LlmRequests::fixed(&schedule, 6, 4).unwrap();
    let policy = LlmServePolicy::new(4, 4 * 10, config.context).unwrap();
    policy.check(&requests).unwrap();
    let mut step = LlmServeStep::new(&config, cpu(), 4, 6, 1).unwrap();
    step.warm_up(&[6], 2).unwrap();
    let mut buffer = LlmServeBuffer::new(&requests, &policy);
    let clock =
        MonotonicClock::new(std::time::Instant::now() + std::time::Duration::from_millis(5));
    let out = run_llm_serve(
        &mut step,
        &clock,
        &requests,
        &policy,
        &mut buffer,
        &AtomicBool::new(false),
    );
    assert!(out.error.is_none(), "{:?}", out.error);
    assert!(out.requests_completed >= 2, "{out:?}");
    for r in llm_request_records(&buffer, &requests)
        .iter()
        .filter(|r| r.completed)
    {
        let (ttft, e2e) = (r.ttft_ns().unwrap(), r.e2e_ns().unwrap());
        assert!(0 < ttft && ttft <= e2e, "{r:?}");
        assert!(r.tpot_ns().unwrap() > 0.0);
    }
    assert!(out.tokens_in_window >= 4 * out.requests_completed);
}

#[test]
fn a_cpu_model_attends_through_sdpa_and_refuses_flash() {
    let placement = LlmPlacement::new(Device::Cpu, None);
    let mut model = LlmModel::new(&LlmPreset::LlamaTiny.config(), placement, 2, 0).unwrap();
    assert_eq!(model.decode_attention(), DecodeAttention::Sdpa);
    for flash in [DecodeAttention::FlashEager, DecodeAttention::Flash] {
        let err = model.set_decode_attention(flash).unwrap_err().to_string();
        assert!(
            err.contains("FlashAttention") && err.contains("sdpa"),
            "{err}"
        );
        assert_eq!(model.decode_attention(), DecodeAttention::Sdpa);
    }
    model.set_decode_attention(DecodeAttention::Sdpa).unwrap();
    // The names round-trip, and a decode step built asking for flash on the CPU says why not.
    for a in DecodeAttention::ALL {
        assert_eq!(a.as_str().parse::<DecodeAttention>().unwrap(), a);
    }
    assert!("flash-attn".parse::<DecodeAttention>().is_err());
    let options = DecodeOptions {
        attention: Some(DecodeAttention::Flash),
        ..decode_options(2, 4, 3)
    };
    let err = DecodeStep::new(&options).unwrap_err().to_string();
    assert!(err.contains("FlashAttention"), "{err}");
}
