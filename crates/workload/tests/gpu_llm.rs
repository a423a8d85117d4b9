//! The built-in LLM and the decode step on a real CUDA GPU (feature `gpu`; run on the H200
//! host). Without the feature this file holds no test, so a machine without a GPU
//! never counts these as passes.
//!
//! - a graph-replayed decode iteration computes what an eager decode computes: teacher-forced
//!   with the graph's own tokens, over two cycles (so the reset and the replays at every
//!   position of a fresh cycle are covered), in fp32 for a tight comparison;
//! - the default precision on CUDA is bf16, and it decodes finite logits;
//! - GPT-2 small decoding is launch-bound at batch 8, so a replay is faster than eager;
//! - TinyLlama-1.1B builds with its published parameter count and decodes on the device;
//! - the `serve-llm` step with one CUDA graph per batch-size bucket generates what the eager
//!   step generates under the real continuous batcher (fp32, sharp weights: the same tokens),
//!   an idle padding slot decoding past its context included; and GPT-2 small captures its
//!   buckets for 32 sequences and replays them to the tokens the same static decode computes
//!   eagerly (bf16: the same kernels at the same shapes).
//!
//! - the profiler records a decode step's kernels on the device, a graph replay's included.
//! - in bf16 on the card, GPT-2's eager decode attends through FlashAttention's variable-length
//!   kernel by default, and it computes what `scaled_dot_product_attention` under the position mask
//!   computes: sequences of different lengths in one step (eager), and a graph replay through
//!   flash against eager SDPA.
//!
//! Run with `--nocapture` to see the figures.
#![cfg(feature = "gpu")]

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use coload_cohort_schema::{DeviceKind, Execution, Precision};
use coload_timing::{
    IterationKind, LlmRequest, LlmRequests, LlmServeBuffer, LlmServePolicy, SimulatedClock, Step,
    run_llm_serve,
};
use coload_workload::{
    DecodeAttention, DecodeOptions, DecodeStep, DeviceChoice, LlmConfig, LlmModel, LlmPlacement,
    LlmPreset, LlmServeOptions, LlmServeStep,
};
use tch::{Device, Kind, Tensor};

fn options(
    model: LlmPreset,
    execution: Execution,
    precision: Option<Precision>,
    batch: u32,
    prompt: u32,
    generate: u32,
) -> DecodeOptions {
    DecodeOptions {
        model,
        device: DeviceChoice::Cuda(0),
        batch_size: batch,
        prompt_tokens: prompt,
        generate_tokens: generate,
        precision,
        seed: 21,
        execution,
        attention: None,
    }
}

#[test]
fn a_replayed_decode_computes_what_eager_decode_computes() {
    for preset in [LlmPreset::Gpt2Tiny, LlmPreset::LlamaTiny] {
        let o = options(preset, Execution::CudaGraph, Some(Precision::Fp32), 4, 6, 8);
        let mut graph = DecodeStep::new(&o).unwrap();
        assert_eq!(graph.info().execution, Execution::CudaGraph);
        let placement = LlmPlacement::new(Device::Cuda(0), Some(Precision::Fp32));
        let mut eager = LlmModel::new(&preset.config(), placement, 4, o.seed).unwrap();
        let mut worst: f64 = 0.0;
        for cycle in 0..2 {
            assert_eq!(graph.phase(), (IterationKind::Prefill, 0), "cycle {cycle}");
            graph.step().unwrap();
            let _ = eager.prefill(graph.prompt()).unwrap();
            for _ in 1..8 {
                let fed = Tensor::from_slice(&graph.tokens().unwrap())
                    .view([4, 1])
                    .to_device(Device::Cuda(0));
                graph.step().unwrap();
                let replayed = graph.graph_logits().unwrap().unwrap();
                let expected = eager.decode_step(&fed).unwrap().to_device(Device::Cpu);
                let gap = (&replayed - &expected).abs().max().double_value(&[])
                    / expected.abs().max().double_value(&[]);
                worst = worst.max(gap);
            }
            assert_eq!(graph.model().lengths(), [13, 13, 13, 13]);
            assert_eq!(eager.lengths(), [13, 13, 13, 13]);
        }
        println!("{preset}: replayed decode within {worst:e} of eager's logits");
        assert!(
            worst < 1e-4,
            "{preset}: replay is {worst:e} of the logits from eager"
        );
    }
}

#[test]
fn bf16_is_the_default_on_cuda_and_decodes_finite_logits() {
    let o = options(LlmPreset::LlamaTiny, Execution::CudaGraph, None, 2, 8, 4);
    let mut step = DecodeStep::new(&o).unwrap();
    assert_eq!(step.model().placement().precision, Precision::Bf16);
    for _ in 0..4 {
        assert_eq!(step.step().unwrap(), 2);
    }
    let logits = step.graph_logits().unwrap().unwrap();
    assert_eq!(logits.kind(), Kind::BFloat16);
    assert!(bool::try_from(logits.to_kind(Kind::Float).isfinite().all()).unwrap());
    assert_eq!(step.info().device_kind, DeviceKind::Cuda);
    assert!(step.peak_memory().unwrap().peak_device_bytes >= step.model().cache_bytes());
}

/// Worst gap between two logits tensors, relative to the largest logit of `expected`.
fn relative_gap(got: &Tensor, expected: &Tensor) -> f64 {
    let (got, expected) = (got.to_kind(Kind::Float), expected.to_kind(Kind::Float));
    (&got - &expected).abs().max().double_value(&[]) / expected.abs().max().double_value(&[])
}

#[test]
fn flash_decode_attends_as_masked_sdpa_does_over_sequences_of_different_lengths() {
    for preset in [LlmPreset::Gpt2Tiny, LlmPreset::LlamaTiny] {
        let placement = LlmPlacement::new(Device::Cuda(0), Some(Precision::Bf16));
        let mut flash = LlmModel::new(&preset.config(), placement, 3, 5).unwrap();
        let mut sdpa = LlmModel::new(&preset.config(), placement, 3, 5).unwrap();
        // GPT-2 (as many KV heads as query heads) decodes eagerly through flash by default; the
        // grouped-head Llama through SDPA, and through flash when asked.
        let default = if preset == LlmPreset::Gpt2Tiny {
            DecodeAttention::FlashEager
        } else {
            DecodeAttention::Sdpa
        };
        assert_eq!(flash.decode_attention(), default, "{preset}");
        flash
            .set_decode_attention(DecodeAttention::FlashEager)
            .unwrap();
        sdpa.set_decode_attention(DecodeAttention::Sdpa).unwrap();
        // Three sequences of 4, 11 and 7 tokens: every step is masked on the SDPA side.
        let vocab = i64::from(preset.config().vocab);
        let opts = (Kind::Int64, Device::Cuda(0));
        let mut worst: f64 = 0.0;
        for (slot, p) in [(0_i64, 4_i64), (1, 11), (2, 7)] {
            let prompt = Tensor::randint(vocab, [1, p], opts);
            let a = flash.prefill_slots(slot, &prompt).unwrap();
            let b = sdpa.prefill_slots(slot, &prompt).unwrap();
            worst = worst.max(relative_gap(&a, &b));
        }
        for _ in 0..6 {
            let fed = Tensor::randint(vocab, [3, 1], opts);
            let a = flash.decode_step(&fed).unwrap();
            let b = sdpa.decode_step(&fed).unwrap();
            worst = worst.max(relative_gap(&a, &b));
        }
        assert_eq!(flash.lengths(), [10, 17, 13]);
        println!("{preset}: flash decode within {worst:e} of masked SDPA's logits (bf16)");
        // bf16 logits of unit scale: one rounding step of the largest is 2^-8 of it.
        assert!(
            worst < 2e-2,
            "{preset}: flash is {worst:e} of the logits from SDPA"
        );
    }
}

#[test]
fn a_replayed_flash_decode_computes_what_eager_sdpa_computes_in_bf16() {
    for preset in [LlmPreset::Gpt2Tiny, LlmPreset::LlamaTiny] {
        let o = DecodeOptions {
            attention: Some(DecodeAttention::Flash),
            ..options(preset, Execution::CudaGraph, Some(Precision::Bf16), 4, 6, 8)
        };
        let mut graph = DecodeStep::new(&o).unwrap();
        assert_eq!(graph.model().decode_attention(), DecodeAttention::Flash);
        let placement = LlmPlacement::new(Device::Cuda(0), Some(Precision::Bf16));
        let mut eager = LlmModel::new(&preset.config(), placement, 4, o.seed).unwrap();
        eager.set_decode_attention(DecodeAttention::Sdpa).unwrap();
        let mut worst: f64 = 0.0;
        for _cycle in 0..2 {
            graph.step().unwrap();
            let _ = eager.prefill(graph.prompt()).unwrap();
            for _ in 1..8 {
                let fed = Tensor::from_slice(&graph.tokens().unwrap())
                    .view([4, 1])
                    .to_device(Device::Cuda(0));
                graph.step().unwrap();
                let replayed = graph.graph_logits().unwrap().unwrap();
                let expected = eager.decode_step(&fed).unwrap().to_device(Device::Cpu);
                worst = worst.max(relative_gap(&replayed, &expected));
            }
        }
        println!("{preset}: replayed flash decode within {worst:e} of eager SDPA (bf16)");
        assert!(
            worst < 2e-2,
            "{preset}: replay is {worst:e} of the logits from eager SDPA"
        );
    }
}

#[test]
fn a_profile_of_decode_steps_records_their_kernels() {
    for execution in [Execution::Eager, Execution::CudaGraph] {
        let o = options(LlmPreset::Gpt2Tiny, execution, None, 2, 8, 8);
        let mut step = DecodeStep::new(&o).unwrap();
        let profile = step.profile_decode(4, None).unwrap();
        assert!(
            profile.device_activities,
            "{execution}: no device activities"
        );
        let s = profile.summary(4, 10).unwrap();
        println!("gpt2-tiny b2 {execution}: {s}");
        // At least one matrix product a layer. CUPTI records the whole device, so another test
        // running meanwhile can only add to the count.
        let layers = f64::from(LlmPreset::Gpt2Tiny.config().layers);
        assert!(
            s.events_per_step >= layers,
            "{execution}: {} device events per step",
            s.events_per_step
        );
        assert!(s.us_per_step > 0.0);
    }
}

/// Median time of the decode iterations over `cycles` cycles (after one cycle of warmup).
fn median_decode(step: &mut DecodeStep, cycles: u32) -> Duration {
    let g = step.cycle().generate_tokens();
    for _ in 0..g {
        step.step().unwrap();
    }
    let mut times = Vec::new();
    for _ in 0..cycles * g {
        let decoding = step.phase().0 == IterationKind::Decode;
        let t = Instant::now();
        step.step().unwrap();
        if decoding {
            times.push(t.elapsed());
        }
    }
    times.sort();
    times[times.len() / 2]
}

#[test]
fn gpt2_small_decode_replays_faster_than_eager() {
    let eager_o = options(LlmPreset::Gpt2Small, Execution::Eager, None, 8, 128, 64);
    let graph_o = DecodeOptions {
        execution: Execution::CudaGraph,
        ..eager_o.clone()
    };
    let mut eager = DecodeStep::new(&eager_o).unwrap();
    let mut graph = DecodeStep::new(&graph_o).unwrap();
    let (e, g) = (median_decode(&mut eager, 3), median_decode(&mut graph, 3));
    println!("gpt2-small b8 bf16 decode step: eager {e:?}, cuda graph {g:?}");
    assert!(
        e < Duration::from_millis(100),
        "eager {e:?}: is this a GPU?"
    );
    assert!(g < e, "a replay ({g:?}) should beat eager launches ({e:?})");
}

#[test]
fn tinyllama_builds_with_its_published_size_and_decodes() {
    let o = options(
        LlmPreset::TinyLlama1_1b,
        Execution::CudaGraph,
        None,
        8,
        256,
        32,
    );
    let mut step = DecodeStep::new(&o).unwrap();
    assert_eq!(step.model().parameter_count(), 1_100_048_384);
    let t = median_decode(&mut step, 2);
    println!(
        "tinyllama-1.1b b8 bf16 decode step (graph): {t:?}; KV cache {} MiB",
        step.model().cache_bytes() >> 20
    );
    assert!(t < Duration::from_millis(100), "{t:?}: is this a GPU?");
}

fn request(arrival_ms: u64, prompt_tokens: u32, output_tokens: u32) -> LlmRequest {
    LlmRequest {
        arrival_ns: arrival_ms * 1_000_000,
        prompt_tokens,
        output_tokens,
    }
}

/// Runs `requests` on the simulated clock (exact: the step takes no simulated time) at most
/// `max_batch` at once over `step` (recording); returns each request's generated tokens and the
/// decode iterations' sizes.
fn serve(
    step: &mut LlmServeStep,
    requests: &LlmRequests,
    max_batch: u32,
    context: u32,
) -> (Vec<Vec<i64>>, Vec<u32>) {
    let policy = LlmServePolicy::new(max_batch, u64::from(max_batch * context), context).unwrap();
    policy.check(requests).unwrap();
    let mut buffer = LlmServeBuffer::new(requests, &policy);
    let out = run_llm_serve(
        step,
        &SimulatedClock::new(),
        requests,
        &policy,
        &mut buffer,
        &AtomicBool::new(false),
    );
    assert!(out.error.is_none(), "{:?}", out.error);
    assert_eq!(out.requests_completed, requests.len() as u64);
    let decodes = buffer
        .iterations()
        .iter()
        .filter(|i| i.kind == IterationKind::Decode)
        .map(|i| i.sequences)
        .collect();
    (step.transcripts().to_vec(), decodes)
}

#[test]
fn a_graph_bucketed_serve_step_generates_what_the_eager_one_generates() {
    for preset in [LlmPreset::Gpt2Tiny, LlmPreset::LlamaTiny] {
        // Sharp attention (as the CPU tests): a wrong position or cache entry moves the argmax.
        let config = LlmConfig {
            init_std: 0.2,
            ..preset.config()
        };
        let c = config.context;
        // Three long requests at a time (the fourth slot pads bucket 4) for more decode steps
        // than the context, then a mixed wave that fills every slot.
        let mut list = Vec::new();
        for wave in 0..3 {
            for (prompt, shorter) in [(4, 8), (5, 16), (6, 24)] {
                list.push(request(wave, prompt, c - shorter));
            }
        }
        for (prompt, output) in [(3, 10), (7, 5), (5, 1), (4, 12), (6, 4), (2, 7), (8, 3)] {
            list.push(request(3, prompt, output));
        }
        let requests = LlmRequests::new(list, 10_000_000).unwrap();
        let placement = LlmPlacement::new(Device::Cuda(0), Some(Precision::Fp32));
        let build = || {
            LlmServeStep::new(&config, placement, 4, 8, 5)
                .unwrap()
                .recording()
        };
        let mut graph = build().capture_graphs().unwrap();
        assert_eq!(graph.execution(), Execution::CudaGraph);
        assert_eq!(graph.info().execution, Execution::CudaGraph);
        assert_eq!(graph.bucket_sizes(), [1, 2, 4]);
        let (replayed, sizes) = serve(&mut graph, &requests, 4, c);
        let (eager, _) = serve(&mut build(), &requests, 4, c);
        assert!(sizes.iter().filter(|&&b| b == 3).count() > c as usize);
        assert!(sizes.contains(&4));
        for (k, (r, e)) in replayed.iter().zip(&eager).enumerate() {
            assert_eq!(r, e, "{preset}: request {k}");
        }
        println!(
            "{preset}: {} requests, {} decode steps replayed, the same tokens as eager",
            replayed.len(),
            sizes.len()
        );
    }
}

#[test]
fn gpt2_small_captures_its_buckets_for_32_sequences_and_replays_them() {
    let options = LlmServeOptions {
        model: LlmPreset::Gpt2Small,
        device: DeviceChoice::Cuda(0),
        max_batch: 32,
        max_prompt_tokens: 64,
        precision: None,
        seed: 7,
        execution: Execution::CudaGraph,
    };
    let mut graph = LlmServeStep::for_preset(&options).unwrap().recording();
    assert_eq!(graph.bucket_sizes(), [1, 2, 4, 8, 16, 32]);
    assert_eq!(graph.info().execution, Execution::CudaGraph);
    assert_eq!(graph.model().placement().precision, Precision::Bf16);
    let mut twin = LlmServeStep::for_preset(&LlmServeOptions {
        execution: Execution::Eager,
        ..options.clone()
    })
    .unwrap()
    .recording()
    .static_buckets();
    let mut eager = LlmServeStep::for_preset(&LlmServeOptions {
        execution: Execution::Eager,
        ..options.clone()
    })
    .unwrap()
    .recording();
    for (name, step) in [
        ("graph", &mut graph),
        ("static eager", &mut twin),
        ("eager", &mut eager),
    ] {
        let medians = step.warm_up(&[16, 64], 8).unwrap();
        let text: Vec<String> = medians.iter().map(|(b, d)| format!("{b}: {d:?}")).collect();
        println!(
            "gpt2-small bf16 serve decode medians, {name}: {}",
            text.join(", ")
        );
    }
    // 48 requests at once of different lengths: the batch fills to 32, then drains through
    // every bucket as requests complete and queued ones take their slots.
    let list = (0..48)
        .map(|k| request(0, 16 + (k * 7) % 49, 8 + (k * 5) % 33))
        .collect();
    let requests = LlmRequests::new(list, 10_000_000).unwrap();
    let context = LlmPreset::Gpt2Small.config().context;
    let (replayed, sizes) = serve(&mut graph, &requests, 32, context);
    let (static_eager, _) = serve(&mut twin, &requests, 32, context);
    let (dynamic, _) = serve(&mut eager, &requests, 32, context);
    assert!(sizes.contains(&32) && sizes.iter().any(|&b| b < 16));
    // The replays are the static decode's kernels at the same shapes: the same tokens.
    assert_eq!(replayed, static_eager);
    // The dynamic eager decode attends over fewer positions: bf16 rounds otherwise, and a
    // greedy chain may leave the other at a near tie. Each request's first token comes from
    // the same eager prefill.
    let (mut same, mut all) = (0, 0);
    for (r, d) in replayed.iter().zip(&dynamic) {
        assert_eq!(r[0], d[0]);
        same += r.iter().zip(d).take_while(|(a, b)| a == b).count();
        all += r.len();
    }
    println!(
        "gpt2-small bf16: {same} of {all} tokens as the dynamic eager decode's, up to each request's first difference"
    );
}
