//! `--memory-format channels-last` on the CPU: the built-in models' convolution weights and the
//! input batch are laid out NHWC when asked and NCHW otherwise, they stay NHWC through training
//! steps, and the layout changes how the numbers are stored, not what the model computes.

use coload_cohort_schema::{Execution, Precision, Workload};
use coload_timing::Step;
use coload_workload::{
    DeviceChoice, MemoryFormat, MemoryLayout, ModelSource, ModelStep, WorkloadOptions, ZooModel,
};

fn options(model: ZooModel, workload: Workload, memory_format: MemoryFormat) -> WorkloadOptions {
    WorkloadOptions {
        workload,
        device: DeviceChoice::Cpu,
        batch_size: 2,
        image_size: 32,
        precision: Precision::Fp32,
        seed: 5,
        model: ModelSource::Zoo(model),
        execution: Execution::Eager,
        memory_format,
    }
}

fn build(model: ZooModel, workload: Workload, format: MemoryFormat) -> ModelStep {
    ModelStep::new(&options(model, workload, format))
        .unwrap_or_else(|e| panic!("{model} {workload} {format}: {e}"))
}

/// Every four-dimensional weight and the batch are NHWC; only 1x1 kernels (dense in both
/// orders) still read as NCHW-contiguous.
fn assert_channels_last(model: ZooModel, layout: MemoryLayout) {
    assert!(layout.weights_4d > 0, "{model}: {layout:?}");
    assert_eq!(
        layout.weights_channels_last, layout.weights_4d,
        "{model}: every convolution weight must be channels-last: {layout:?}"
    );
    assert!(
        layout.weights_contiguous < layout.weights_4d,
        "{model}: the kernels wider than 1x1 must no longer be NCHW: {layout:?}"
    );
    assert!(
        layout.inputs_channels_last && !layout.inputs_contiguous,
        "{model}: the input batch must be NHWC: {layout:?}"
    );
}

#[test]
fn weights_and_inputs_are_channels_last_when_asked_and_stay_so_through_training() {
    for model in [ZooModel::Resnet18, ZooModel::MobilenetV2] {
        for workload in [Workload::Train, Workload::Infer] {
            let mut step = build(model, workload, MemoryFormat::ChannelsLast);
            assert_channels_last(model, step.memory_layout());
            for _ in 0..2 {
                assert_eq!(step.step().unwrap(), 2);
            }
            // The optimizer updates the weights in place: they keep their layout.
            assert_channels_last(model, step.memory_layout());
            if workload == Workload::Train {
                let loss = step.last_loss().unwrap().unwrap();
                assert!(loss.is_finite() && loss > 0.0, "{model}: loss {loss}");
            }
        }
    }
}

#[test]
fn the_default_layout_is_contiguous() {
    for model in [ZooModel::Resnet18, ZooModel::MobilenetV2] {
        let step = build(model, Workload::Train, MemoryFormat::Contiguous);
        let layout = step.memory_layout();
        assert_eq!(
            layout.weights_contiguous, layout.weights_4d,
            "{model}: {layout:?}"
        );
        assert!(
            layout.weights_channels_last < layout.weights_4d,
            "{model}: only 1x1 kernels may read as channels-last: {layout:?}"
        );
        assert!(
            layout.inputs_contiguous && !layout.inputs_channels_last,
            "{model}: {layout:?}"
        );
    }
}

/// The same seed gives the same weights and batch in either layout, so the logits agree: the
/// conversion moved every number to its NHWC place rather than reinterpreting the storage.
#[test]
fn channels_last_computes_what_contiguous_computes() {
    for model in [ZooModel::Resnet18, ZooModel::MobilenetV2] {
        let mut nchw = build(model, Workload::Infer, MemoryFormat::Contiguous);
        let mut nhwc = build(model, Workload::Infer, MemoryFormat::ChannelsLast);
        let (a, b) = (nchw.logits().unwrap(), nhwc.logits().unwrap());
        let scale = a.abs().max().double_value(&[]);
        let gap = (&a - &b).abs().max().double_value(&[]);
        assert!(scale > 0.0, "{model}: all-zero logits");
        assert!(
            gap <= 1e-4 * scale.max(1.0),
            "{model}: channels-last logits are {gap} away from contiguous ones (scale {scale})"
        );
    }
}

#[test]
fn a_torchscript_model_is_refused_channels_last() {
    let options = WorkloadOptions {
        model: ModelSource::TorchScript(coload_workload::TorchScriptSpec {
            path: "models/m.pt".into(),
            input_shape: [1, 28, 28],
            num_classes: 10,
        }),
        ..options(
            ZooModel::Resnet18,
            Workload::Train,
            MemoryFormat::ChannelsLast,
        )
    };
    let err = ModelStep::new(&options).unwrap_err().to_string();
    assert!(
        err.contains("--memory-format channels-last") && err.contains("models/m.pt"),
        "{err}"
    );
}
