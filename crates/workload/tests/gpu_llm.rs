//! The built-in LLM and the decode step on a real CUDA GPU (feature `gpu`; run on the H200
//! host, issue 24). Without the feature this file holds no test, so a machine without a GPU
//! never counts these as passes.
//!
//! - a graph-replayed decode iteration computes what an eager decode computes: teacher-forced
//!   with the graph's own tokens, over two cycles (so the reset and the replays at every
//!   position of a fresh cycle are covered), in fp32 for a tight comparison;
//! - the default precision on CUDA is bf16, and it decodes finite logits;
//! - GPT-2 small decoding is launch-bound at batch 8, so a replay is faster than eager;
//! - TinyLlama-1.1B builds with its published parameter count and decodes on the device.
//!
//! Run with `--nocapture` to see the figures.
#![cfg(feature = "gpu")]

use std::time::{Duration, Instant};

use coload_cohort_schema::{DeviceKind, Execution, Precision};
use coload_timing::{IterationKind, Step};
use coload_workload::{DecodeOptions, DecodeStep, DeviceChoice, LlmModel, LlmPlacement, LlmPreset};
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
