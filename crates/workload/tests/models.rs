//! Every built-in model trains and infers on the CPU at a small shape (batch 2, the smallest
//! image each model takes), with the parameter count torchvision gives for the same
//! architecture: the count pins the architecture, the steps show that the model runs end to end
//! through the worker's step (forward, loss, backward, foreach SGD; inference under
//! `InferenceMode`).

mod agreement;

use coload_cohort_schema::{Execution, Precision, Workload};
use coload_timing::Step;
use coload_workload::{
    DeviceChoice, MemoryFormat, ModelSource, ModelStep, WorkloadOptions, ZooModel,
};

/// Trainable parameters with 1000 classes, as torchvision counts them
/// (`sum(p.numel() for p in torchvision.models.NAME().parameters())`; Inception v3 without its
/// auxiliary classifier, which tch does not build).
fn torchvision_parameters(model: ZooModel) -> u64 {
    match model {
        ZooModel::Resnet18 => 11_689_512,
        ZooModel::Resnet34 => 21_797_672,
        ZooModel::Resnet50 => 25_557_032,
        ZooModel::Resnet101 => 44_549_160,
        ZooModel::Resnet152 => 60_192_808,
        ZooModel::MobilenetV2 => 3_504_872,
        ZooModel::EfficientnetB0 => 5_288_548,
        ZooModel::EfficientnetB1 => 7_794_184,
        ZooModel::EfficientnetB2 => 9_109_994,
        ZooModel::EfficientnetB3 => 12_233_232,
        ZooModel::Densenet121 => 7_978_856,
        ZooModel::InceptionV3 => 23_834_568,
        ZooModel::Squeezenet1_1 => 1_235_496,
    }
}

/// The smallest image the model takes (the tests' shape).
fn smallest_image(model: ZooModel) -> u32 {
    (16..=256)
        .find(|s| model.check_image_size(*s).is_ok())
        .expect("every model takes some size up to 256")
}

fn options(model: ZooModel, workload: Workload) -> WorkloadOptions {
    WorkloadOptions {
        workload,
        device: DeviceChoice::Cpu,
        batch_size: 2,
        image_size: smallest_image(model),
        precision: Precision::Fp32,
        seed: 3,
        model: ModelSource::Zoo(model),
        execution: Execution::Eager,
        memory_format: MemoryFormat::Contiguous,
    }
}

fn changed(before: &[(String, tch::Tensor)], after: &[(String, tch::Tensor)]) -> usize {
    before
        .iter()
        .zip(after)
        .filter(|((a, x), (b, y))| {
            assert_eq!(a, b);
            !x.equal(y)
        })
        .count()
}

/// One training step moves most variables and gives a finite loss; one inference step moves
/// none and records no autograd history.
#[expect(
    clippy::print_stdout,
    reason = "the test prints each model's size and time for the notes"
)]
fn trains_and_infers(model: ZooModel) {
    let started = std::time::Instant::now();
    let mut train =
        ModelStep::new(&options(model, Workload::Train)).unwrap_or_else(|e| panic!("{model}: {e}"));
    let info = train.info();
    assert_eq!(info.model, model.as_str());
    assert_eq!(
        info.parameter_count,
        torchvision_parameters(model),
        "{model}: parameter count"
    );
    let before = train.variables();
    assert_eq!(train.step().unwrap_or_else(|e| panic!("{model}: {e}")), 2);
    let loss = train.last_loss().unwrap().unwrap();
    assert!(loss.is_finite() && loss > 0.0, "{model}: loss {loss}");
    let moved = changed(&before, &train.variables());
    assert!(
        moved * 2 > before.len(),
        "{model}: only {moved} of {} variables moved in a training step",
        before.len()
    );

    let mut infer =
        ModelStep::new(&options(model, Workload::Infer)).unwrap_or_else(|e| panic!("{model}: {e}"));
    let before = infer.variables();
    assert_eq!(infer.step().unwrap_or_else(|e| panic!("{model}: {e}")), 2);
    assert_eq!(changed(&before, &infer.variables()), 0, "{model}");
    let probe = infer.probe_inference().unwrap();
    assert!(
        !probe.requires_grad && probe.is_inference,
        "{model}: {probe:?}"
    );
    println!(
        "{model}: {} parameters, train + infer at {1}x{1} in {2:.2} s",
        info.parameter_count,
        smallest_image(model),
        started.elapsed().as_secs_f64()
    );
}

/// One test per model, so that they run in parallel and each names its model.
macro_rules! model_tests {
    ($($name:ident => $model:expr,)*) => {
        $(
            #[test]
            fn $name() {
                trains_and_infers($model);
            }
        )*

        #[test]
        fn every_model_has_a_test() {
            let tested = [$($model),*];
            for m in ZooModel::ALL {
                assert!(tested.contains(&m), "{m} has no train-and-infer test");
            }
        }
    };
}

model_tests! {
    resnet18 => ZooModel::Resnet18,
    resnet34 => ZooModel::Resnet34,
    resnet50 => ZooModel::Resnet50,
    resnet101 => ZooModel::Resnet101,
    resnet152 => ZooModel::Resnet152,
    mobilenet_v2 => ZooModel::MobilenetV2,
    efficientnet_b0 => ZooModel::EfficientnetB0,
    efficientnet_b1 => ZooModel::EfficientnetB1,
    efficientnet_b2 => ZooModel::EfficientnetB2,
    efficientnet_b3 => ZooModel::EfficientnetB3,
    densenet121 => ZooModel::Densenet121,
    inception_v3 => ZooModel::InceptionV3,
    squeezenet1_1 => ZooModel::Squeezenet1_1,
}

#[test]
fn a_size_the_model_cannot_take_fails_before_building() {
    let mut o = options(ZooModel::Densenet121, Workload::Infer);
    o.image_size = 64;
    let err = ModelStep::new(&o).unwrap_err();
    assert_eq!(err.kind(), coload_cohort_schema::FailureKind::InvalidOption);
    assert!(
        err.to_string().contains("densenet121 cannot take 64x64"),
        "{err}"
    );
}

/// The measure `tests/gpu_graph.rs` compares CUDA-graph replay with eager by can fail: two runs
/// from one seed end where each other ends, and one step more lands far away.
#[test]
fn the_update_gap_tells_the_same_training_from_one_step_more() {
    let o = options(ZooModel::Resnet18, Workload::Train);
    let mut a = ModelStep::new(&o).unwrap();
    let initial = a.variables();
    let mut b = ModelStep::new(&o).unwrap();
    for _ in 0..4 {
        a.step().unwrap();
        b.step().unwrap();
    }
    let (same, name) = agreement::update_gap(&initial, &a.variables(), &b.variables());
    assert!(
        same < 1e-6,
        "the same training ended apart: {same:e} ({name})"
    );
    b.step().unwrap();
    let (one_more, _) = agreement::update_gap(&initial, &a.variables(), &b.variables());
    assert!(
        one_more > 0.05,
        "one step more should be far apart: {one_more:e}"
    );
}
