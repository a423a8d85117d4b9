//! `execution: cuda-graph` on a real CUDA GPU (feature `gpu`; run on the H200 host):
//!
//! - replay computes what eager computes: over several training steps the losses, the weights,
//!   the momentum-driven updates and the batch-norm statistics of a graph-replayed ResNet18
//!   agree with an eager ResNet18 built from the same seed; an inference replay's logits agree
//!   with an eager forward; the same for a TorchScript module;
//! - a module that reads a value back to the host in its forward cannot be captured, and says
//!   so with a typed error while the step is built;
//! - replay is faster than eager for ResNet18 b32 (the step is launch-bound on an H200).
//!
//! Without the feature this file holds no test, so a machine without a GPU never counts these
//! as passes. Run with `--nocapture` to see the figures.
#![cfg(feature = "gpu")]

mod agreement;
mod support;

use std::time::{Duration, Instant};

use coload_cohort_schema::{Execution, Precision, Workload};
use coload_timing::Step;
use coload_workload::{
    DeviceChoice, GRAPH_WARMUP_STEPS, ModelSource, ModelStep, TorchScriptSpec, WorkloadOptions,
    ZooModel,
};

fn options(
    workload: Workload,
    execution: Execution,
    batch_size: u32,
    image_size: u32,
) -> WorkloadOptions {
    WorkloadOptions {
        workload,
        device: DeviceChoice::Cuda(0),
        batch_size,
        image_size,
        precision: Precision::Fp32,
        seed: 11,
        model: ModelSource::Zoo(ZooModel::Resnet18),
        execution,
        memory_format: coload_workload::MemoryFormat::Contiguous,
    }
}

/// Runs two eager steps and a graph step side by side from one seed (the eager ones first catch
/// up with the graph's warmup steps) and checks that the graph's losses follow eager's step by
/// step and that its weights end where eager's end, within `tolerance` of the update
/// ([`agreement::update_gap`]). The second eager run is the noise floor: cuDNN's algorithms are
/// not bitwise deterministic, so two eager runs differ too, and the figures say by how much.
#[expect(
    clippy::print_stdout,
    reason = "the agreement figures go into the notes"
)]
fn train_agreement(eager_options: &WorkloadOptions, steps: usize, loss_tol: f64, update_tol: f64) {
    let mut graph_options = eager_options.clone();
    graph_options.execution = Execution::CudaGraph;
    let mut eager = ModelStep::new(eager_options).unwrap();
    let initial = eager.variables();
    let mut noise = ModelStep::new(eager_options).unwrap();
    for _ in 0..GRAPH_WARMUP_STEPS {
        eager.step().unwrap();
        noise.step().unwrap();
    }
    let mut graph = ModelStep::new(&graph_options).unwrap();
    assert_eq!(graph.info().execution, Execution::CudaGraph);
    let (gap, name) = agreement::update_gap(&initial, &eager.variables(), &graph.variables());
    let (floor, _) = agreement::update_gap(&initial, &eager.variables(), &noise.variables());
    assert!(
        gap < update_tol.max(3.0 * floor),
        "after warmup: {gap:e} of the update apart (most: {name}; eager against eager: {floor:e})"
    );
    let captured = graph.variables();

    // Losses step by step: (eager, its noise twin, graph).
    let mut losses = Vec::new();
    for _ in 0..steps {
        eager.step().unwrap();
        noise.step().unwrap();
        graph.step().unwrap();
        losses.push((
            eager.last_loss().unwrap().unwrap(),
            noise.last_loss().unwrap().unwrap(),
            graph.last_loss().unwrap().unwrap(),
        ));
    }
    // On a fixed batch the loss falls fast (ResNet18 from 6.9 to 1.5 in three steps), so a noise
    // of 1 % of the update moves it visibly: the graph's losses must stay within a few times
    // the eager twin's distance.
    let worst = |pick: fn(&(f64, f64, f64)) -> f64| {
        losses
            .iter()
            .map(|l| (l.0 - pick(l)).abs())
            .fold(0.0_f64, f64::max)
    };
    let (loss_gap, loss_floor) = (worst(|l| l.2), worst(|l| l.1));
    assert!(
        loss_gap <= (loss_tol * losses[0].0.abs().max(1.0)).max(3.0 * loss_floor),
        "losses (eager, eager twin, graph): {losses:?}"
    );
    let losses: Vec<f64> = losses.iter().map(|l| l.2).collect();
    let (gap, name) = agreement::update_gap(&initial, &eager.variables(), &graph.variables());
    let (floor, _) = agreement::update_gap(&initial, &eager.variables(), &noise.variables());
    // Two eager runs differ by cuDNN's reduction order (on the H200: 1.3e-2 of the update, most
    // of it in layer 4's batch-norm running variances); replay must stay within a few times that
    // floor, and the floor must itself be small, or the comparison would say nothing.
    assert!(
        floor < 5.0 * update_tol,
        "eager against eager is {floor:e} of the update apart: too noisy to compare"
    );
    assert!(
        gap < update_tol.max(3.0 * floor),
        "after {steps} replays: {gap:e} of the update apart (most: {name}; eager against eager: \
         {floor:e})"
    );
    // Replays did train: of the whole way the weights went, the replays made a good part.
    let moved = agreement::distance(&captured, &graph.variables())
        / agreement::distance(&initial, &graph.variables());
    assert!(
        moved > 0.1,
        "the replays moved the weights by {moved:e} of the whole update"
    );
    assert!(
        losses.last() < losses.first(),
        "the loss should fall on a fixed batch: {losses:?}"
    );
    println!(
        "agreement over {GRAPH_WARMUP_STEPS} warmup steps and {steps} replays: losses \
         {losses:?}, at most {loss_gap:e} from eager's (eager twin: {loss_floor:e}); graph \
         against eager {gap:e} of the update (most: {name}), eager against eager {floor:e}"
    );
}

#[test]
fn a_replayed_training_step_computes_what_eager_computes() {
    // cuDNN's algorithms are not bitwise deterministic, so the comparison allows float noise
    // (the eager-against-eager figure shows its size), not a different computation: a missed,
    // repeated or stale update puts the weights a good fraction of the update apart.
    train_agreement(
        &options(Workload::Train, Execution::Eager, 16, 64),
        6,
        1e-3,
        1e-2,
    );
}

#[test]
fn a_replayed_inference_step_computes_what_eager_computes() {
    let mut eager = ModelStep::new(&options(Workload::Infer, Execution::Eager, 16, 64)).unwrap();
    let mut graph =
        ModelStep::new(&options(Workload::Infer, Execution::CudaGraph, 16, 64)).unwrap();
    graph.step().unwrap();
    let (e, g) = (eager.logits().unwrap(), graph.logits().unwrap());
    assert_eq!(e.size(), [16, 1000]);
    let gap = (&e - &g).abs().max().double_value(&[]);
    let scale = e.abs().max().double_value(&[]);
    assert!(
        gap <= 1e-3 * scale,
        "logits differ by {gap} (scale {scale})"
    );
    let probe = graph.probe_inference().unwrap();
    assert!(probe.is_inference && !probe.requires_grad);
}

#[test]
fn a_torchscript_module_replays_what_it_computes_eagerly() {
    let Some(m) = support::modules() else { return };
    let spec = TorchScriptSpec {
        path: m.path("small.pt"),
        input_shape: [1, 12, 12],
        num_classes: 10,
    };
    let mut o = options(Workload::Train, Execution::Eager, 8, 12);
    o.model = ModelSource::TorchScript(spec);
    train_agreement(&o, 6, 1e-4, 1e-4);
}

/// A failed capture leaves the process's CUDA RNG in capture mode: libtorch's
/// `CUDAGraph::capture_end` throws on the invalidated capture before its generator epilogue, so
/// any later random initialisation in the same process fails with "Offset increment outside graph
/// capture encountered unexpectedly" (seen on the H200). A worker ends at the refusal anyway; the
/// test runs the refusal in a child process of its own so the other tests keep a clean device.
#[test]
fn a_module_that_reads_back_to_the_host_cannot_be_captured() {
    const CHILD: &str = "COLOAD_GRAPH_REFUSAL_CHILD";
    if let Some(workload) = std::env::var_os(CHILD) {
        let workload: Workload = workload.to_str().unwrap().parse().unwrap();
        refusal_in_this_process(workload);
        return;
    }
    for workload in [Workload::Train, Workload::Infer] {
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "a_module_that_reads_back_to_the_host_cannot_be_captured",
                "--exact",
                "--test-threads=1",
                "--nocapture",
            ])
            .env(CHILD, workload.as_str())
            .status()
            .unwrap();
        assert!(
            status.success(),
            "the {workload} refusal failed in its child process"
        );
    }
}

#[expect(
    clippy::print_stdout,
    reason = "the refusal's message goes into the notes"
)]
fn refusal_in_this_process(workload: Workload) {
    let Some(m) = support::modules() else { return };
    let mut o = options(workload, Execution::CudaGraph, 4, 12);
    o.model = ModelSource::TorchScript(TorchScriptSpec {
        path: m.path("syncing.pt"),
        input_shape: [1, 12, 12],
        num_classes: 10,
    });
    let err = ModelStep::new(&o).unwrap_err();
    println!("{workload}: {err}");
    assert_eq!(
        err.kind(),
        coload_cohort_schema::FailureKind::CudaGraph,
        "{err}"
    );
    assert!(err.to_string().contains("--execution eager"), "{err}");
}

#[test]
fn bf16_autocast_is_captured_too() {
    let mut o = options(Workload::Train, Execution::CudaGraph, 16, 64);
    o.precision = Precision::Bf16;
    let mut step = ModelStep::new(&o).unwrap();
    for _ in 0..5 {
        step.step().unwrap();
    }
    assert!(step.last_loss().unwrap().unwrap().is_finite());
}

fn median_step(step: &mut ModelStep, warmup: usize, n: usize) -> Duration {
    for _ in 0..warmup {
        step.step().unwrap();
    }
    let mut times: Vec<Duration> = (0..n)
        .map(|_| {
            let t = Instant::now();
            step.step().unwrap();
            t.elapsed()
        })
        .collect();
    times.sort();
    times[n / 2]
}

#[test]
fn replay_beats_eager_for_resnet18_b32() {
    for workload in [Workload::Train, Workload::Infer] {
        let mut eager = ModelStep::new(&options(workload, Execution::Eager, 32, 224)).unwrap();
        let e = median_step(&mut eager, 15, 60);
        drop(eager);
        let mut graph = ModelStep::new(&options(workload, Execution::CudaGraph, 32, 224)).unwrap();
        let g = median_step(&mut graph, 15, 60);
        let peak = graph.peak_memory().unwrap().peak_device_bytes;
        println!(
            "resnet18 {workload} b32 224: eager {:.3} ms, cuda-graph {:.3} ms (peak {} bytes)",
            e.as_secs_f64() * 1e3,
            g.as_secs_f64() * 1e3,
            peak
        );
        assert!(
            g < e,
            "{workload}: replay {g:?} is not faster than eager {e:?}"
        );
    }
}
