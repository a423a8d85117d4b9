//! A user's TorchScript model (`--model-file`) end to end on the CPU, and every refusal. The
//! modules are made at test time by the provisioned PyTorch (see `support/mod.rs`).

use std::path::PathBuf;

use coload_cohort_schema::{Execution, Precision, TORCHSCRIPT_MODEL, Workload};
use coload_timing::Step;
use coload_workload::{
    DeviceChoice, ModelSource, ModelStep, TorchScriptSpec, WorkloadError, WorkloadOptions,
};

mod support;

use support::{Modules, modules};

fn options(
    path: PathBuf,
    workload: Workload,
    input_shape: [u32; 3],
    classes: u32,
) -> WorkloadOptions {
    WorkloadOptions {
        workload,
        device: DeviceChoice::Cpu,
        batch_size: 4,
        image_size: 224,
        precision: Precision::Fp32,
        seed: 5,
        model: ModelSource::TorchScript(TorchScriptSpec {
            path,
            input_shape,
            num_classes: classes,
        }),
        execution: Execution::Eager,
        memory_format: coload_workload::MemoryFormat::Contiguous,
    }
}

fn small(m: &Modules, workload: Workload) -> WorkloadOptions {
    options(m.path("small.pt"), workload, [1, 12, 12], 10)
}

#[test]
fn a_torchscript_model_trains_with_the_same_sgd() {
    let Some(m) = modules() else { return };
    let mut step = ModelStep::new(&small(m, Workload::Train)).unwrap();
    let info = step.info();
    let (sha, params) = m.facts("small.pt");
    assert_eq!(info.model, TORCHSCRIPT_MODEL);
    assert_eq!(info.parameter_count, params);
    let file = info.model_file.expect("the file's identity is recorded");
    assert_eq!(file.sha256, sha, "the digest is the file's SHA-256");
    assert_eq!((file.input_shape, file.num_classes), ([1, 12, 12], 10));

    let before = step.variables();
    assert!(!before.is_empty());
    assert_eq!(step.step().unwrap(), 4);
    let first = step.last_loss().unwrap().unwrap();
    let after = step.variables();
    let moved = before
        .iter()
        .zip(&after)
        .filter(|((_, a), (_, b))| !a.equal(b))
        .count();
    assert_eq!(moved, before.len(), "every parameter moves in an SGD step");
    for _ in 0..14 {
        step.step().unwrap();
    }
    let last = step.last_loss().unwrap().unwrap();
    // A fixed batch of four samples is being memorized (2.48 -> 2.19 here): the loss can only
    // fall if the optimizer's updates reach the module's own parameters.
    assert!(last < first * 0.95, "loss {first} -> {last}");
}

#[test]
fn a_torchscript_model_infers_under_inference_mode() {
    let Some(m) = modules() else { return };
    let mut step = ModelStep::new(&small(m, Workload::Infer)).unwrap();
    for _ in 0..3 {
        assert_eq!(step.step().unwrap(), 4);
    }
    let probe = step.probe_inference().unwrap();
    assert!(!probe.requires_grad && probe.is_inference && probe.inference_mode_was_enabled);
    let info = step.info();
    assert_eq!(info.inference_guard.as_deref(), Some("inference_mode"));
    assert_eq!(info.parameter_count, m.facts("small.pt").1);
    assert!(step.last_loss().unwrap().is_none());
}

/// The refusal for `options`: its kind, and a message that names the file.
fn refusal(options: &WorkloadOptions) -> WorkloadError {
    let err = ModelStep::new(options).expect_err("the file must be refused");
    let ModelSource::TorchScript(spec) = &options.model else {
        unreachable!()
    };
    assert!(
        err.to_string().contains(&spec.path.display().to_string()),
        "the message names the file: {err}"
    );
    err
}

#[test]
fn a_missing_or_unreadable_file_is_refused() {
    let Some(m) = modules() else { return };
    let err = refusal(&options(
        m.path("absent.pt"),
        Workload::Train,
        [1, 12, 12],
        10,
    ));
    assert_eq!(
        err.kind(),
        coload_cohort_schema::FailureKind::ModelFileMissing
    );
    assert!(err.to_string().contains("torch.jit.save"), "{err}");
    // A directory opens but cannot be read.
    let err = refusal(&options(
        m.dir.path().to_owned(),
        Workload::Infer,
        [1, 12, 12],
        10,
    ));
    assert_eq!(
        err.kind(),
        coload_cohort_schema::FailureKind::ModelFileUnreadable,
        "{err}"
    );
}

#[test]
fn a_file_that_is_not_torchscript_is_refused_with_libtorchs_message() {
    let Some(m) = modules() else { return };
    for (name, workload) in [
        ("garbage.pt", Workload::Train),
        ("garbage.pt", Workload::Infer),
        ("state_dict.pt", Workload::Infer),
    ] {
        let err = refusal(&options(m.path(name), workload, [1, 12, 12], 10));
        assert_eq!(
            err.kind(),
            coload_cohort_schema::FailureKind::ModelFileNotTorchscript,
            "{name}: {err}"
        );
        let text = err.to_string();
        assert!(text.contains("torch.jit.script"), "{text}");
        // libtorch's own reason follows, without its C++ backtrace.
        assert!(text.len() > 120 && !text.contains("frame #0"), "{text}");
    }
}

#[test]
fn a_wrong_input_shape_or_class_count_is_refused_at_build_time() {
    let Some(m) = modules() else { return };
    for workload in [Workload::Train, Workload::Infer] {
        // Three channels into a one-channel convolution.
        let err = refusal(&options(m.path("small.pt"), workload, [3, 12, 12], 10));
        assert_eq!(
            err.kind(),
            coload_cohort_schema::FailureKind::ModelFileInputShape,
            "{err}"
        );
        let text = err.to_string();
        assert!(text.contains("[4, 3, 12, 12]") && text.contains("--input-shape 3,12,12"));
        assert!(
            text.to_lowercase().contains("channels"),
            "libtorch's reason: {text}"
        );
        // Only the interpreter's final error, not its two tracebacks.
        assert!(!text.contains("Traceback"), "{text}");

        let err = refusal(&options(m.path("small.pt"), workload, [1, 12, 12], 5));
        assert_eq!(
            err.kind(),
            coload_cohort_schema::FailureKind::ModelFileOutputShape,
            "{err}"
        );
        assert!(err.to_string().contains("[4, 10]") && err.to_string().contains("[4, 5]"));
    }
    let err = refusal(&options(
        m.path("pair.pt"),
        Workload::Infer,
        [1, 12, 12],
        10,
    ));
    assert_eq!(
        err.kind(),
        coload_cohort_schema::FailureKind::ModelFileOutputShape
    );
    assert!(err.to_string().contains("a tuple"), "{err}");
}

#[test]
fn a_model_without_trainable_parameters_is_refused_for_training_only() {
    let Some(m) = modules() else { return };
    for name in ["frozen.pt", "noparams.pt"] {
        let err = refusal(&options(m.path(name), Workload::Train, [1, 12, 12], 10));
        assert_eq!(
            err.kind(),
            coload_cohort_schema::FailureKind::ModelFileNoParameters,
            "{name}: {err}"
        );
        assert!(err.to_string().contains("--workload infer"), "{err}");
        // The same file infers.
        let mut step = ModelStep::new(&options(m.path(name), Workload::Infer, [1, 12, 12], 10))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        step.step().unwrap();
        assert_eq!(step.info().parameter_count, 0, "{name}");
    }
}
