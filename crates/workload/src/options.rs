//! What to run and where.

use std::path::PathBuf;

use coload_cohort_schema::{
    DeviceChoice, Execution, InputShape, MemoryFormat, Precision, Workload,
};

use crate::error::WorkloadError;
use crate::models::ZooModel;

/// Classes of the built-in models' heads (ImageNet's 1000).
pub const NUM_CLASSES: i64 = 1000;

/// A user's TorchScript model (`--model-file`), with what the file itself does not say: the
/// shape of one input sample and the number of classes it outputs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TorchScriptSpec {
    /// The `.pt` file saved by `torch.jit.script(...).save()` or `torch.jit.trace(...).save()`.
    pub path: PathBuf,
    /// One sample's shape, `[channels, height, width]`.
    pub input_shape: [u32; 3],
    /// Classes of the model's output; synthetic labels are drawn from `0..num_classes`.
    pub num_classes: u32,
}

/// `C,H,W` (e.g. `3,224,224`) -> `[3, 224, 224]`, every dimension at least 1.
pub fn parse_input_shape(text: &str) -> Result<[u32; 3], WorkloadError> {
    text.parse::<InputShape>()
        .map(|s| s.0)
        .map_err(|e| WorkloadError::InvalidOption(e.into()))
}

/// Which model a step runs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ModelSource {
    /// A built-in model, 1000 classes, on square `image_size` images.
    Zoo(ZooModel),
    /// A user's TorchScript file.
    TorchScript(TorchScriptSpec),
}

impl Default for ModelSource {
    fn default() -> Self {
        ModelSource::Zoo(ZooModel::default())
    }
}

/// Everything that decides what one batch computes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadOptions {
    /// Train or infer.
    pub workload: Workload,
    /// Where to run.
    pub device: DeviceChoice,
    /// Images per batch.
    pub batch_size: u32,
    /// Height and width of the square synthetic images (built-in models; a TorchScript model
    /// takes its `input_shape` instead).
    pub image_size: u32,
    /// fp32, or bf16 autocast around the forward pass (and the loss, when training).
    pub precision: Precision,
    /// Seed for the weights, the synthetic images and their labels.
    pub seed: u64,
    /// The model.
    pub model: ModelSource,
    /// Eager, or one CUDA-graph replay per batch.
    pub execution: Execution,
    /// The layout of the model's four-dimensional weights and of the input batch (built-in
    /// models only).
    pub memory_format: MemoryFormat,
}

impl Default for WorkloadOptions {
    /// The article's protocol: ResNet18 training, batch 32 of 3x224x224 fp32 images, seed 0,
    /// eager.
    fn default() -> Self {
        WorkloadOptions {
            workload: Workload::Train,
            device: DeviceChoice::Auto,
            batch_size: 32,
            image_size: 224,
            precision: Precision::Fp32,
            seed: 0,
            model: ModelSource::default(),
            execution: Execution::Eager,
            memory_format: MemoryFormat::Contiguous,
        }
    }
}

impl WorkloadOptions {
    /// One input sample's shape, `[channels, height, width]`.
    #[must_use]
    pub fn input_shape(&self) -> [u32; 3] {
        match &self.model {
            ModelSource::Zoo(_) => [3, self.image_size, self.image_size],
            ModelSource::TorchScript(spec) => spec.input_shape,
        }
    }

    /// Classes of the model's output.
    #[must_use]
    pub fn num_classes(&self) -> u32 {
        match &self.model {
            ModelSource::Zoo(_) => NUM_CLASSES as u32,
            ModelSource::TorchScript(spec) => spec.num_classes,
        }
    }
}

/// Refuses empty sizes, sizes that overflow libtorch's 64-bit sizes, and image sizes the
/// model cannot take.
pub(crate) fn validate(options: &WorkloadOptions) -> Result<(), WorkloadError> {
    if options.workload == Workload::Hog {
        return Err(not_a_model_step());
    }
    if options.batch_size == 0 {
        return Err(WorkloadError::InvalidOption(
            "batch size must be at least 1".into(),
        ));
    }
    let [c, h, w] = options.input_shape();
    if c == 0 || h == 0 || w == 0 {
        return Err(WorkloadError::InvalidOption(format!(
            "input shape {c},{h},{w}: image size and every dimension must be at least 1"
        )));
    }
    if options.num_classes() == 0 {
        return Err(WorkloadError::InvalidOption(
            "the number of classes must be at least 1".into(),
        ));
    }
    if options.memory_format == MemoryFormat::ChannelsLast
        && let ModelSource::TorchScript(spec) = &options.model
    {
        return Err(WorkloadError::InvalidOption(format!(
            "--memory-format channels-last applies to the built-in vision models, not to the \
             TorchScript file {} (its code may view or reshape its activations as contiguous \
             ones); leave --memory-format out with --model-file",
            spec.path.display()
        )));
    }
    let bytes = u128::from(options.batch_size) * u128::from(c) * u128::from(h) * u128::from(w) * 4;
    if bytes > i64::MAX as u128 {
        return Err(WorkloadError::InvalidOption(format!(
            "batch {} of {c}x{h}x{w} inputs is {bytes} bytes, beyond what libtorch can address",
            options.batch_size
        )));
    }
    Ok(())
}

/// The hog holds memory and runs no model: it is built with [`crate::Hog::allocate`].
pub(crate) fn not_a_model_step() -> WorkloadError {
    WorkloadError::InvalidOption(
        "the hog and decode workloads run no vision model step; build them with Hog::allocate \
         and DecodeStep::new"
            .into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_and_unaddressable_sizes_are_refused() {
        let ok = WorkloadOptions::default();
        assert!(validate(&ok).is_ok());
        let script = |input_shape, num_classes| WorkloadOptions {
            model: ModelSource::TorchScript(TorchScriptSpec {
                path: "m.pt".into(),
                input_shape,
                num_classes,
            }),
            ..WorkloadOptions::default()
        };
        assert!(validate(&script([1, 28, 28], 10)).is_ok());
        for o in [
            WorkloadOptions {
                batch_size: 0,
                ..ok.clone()
            },
            WorkloadOptions {
                image_size: 0,
                ..ok.clone()
            },
            WorkloadOptions {
                batch_size: u32::MAX,
                image_size: u32::MAX,
                ..ok.clone()
            },
            script([1, 0, 28], 10),
            WorkloadOptions {
                memory_format: MemoryFormat::ChannelsLast,
                ..script([1, 28, 28], 10)
            },
            script([1, 28, 28], 0),
            WorkloadOptions {
                workload: Workload::Hog,
                ..ok
            },
        ] {
            assert_eq!(
                validate(&o).unwrap_err().kind(),
                coload_cohort_schema::FailureKind::InvalidOption,
                "{o:?}"
            );
        }
    }

    #[test]
    fn input_shapes_parse_and_refuse() {
        assert_eq!(parse_input_shape("3,224,224").unwrap(), [3, 224, 224]);
        assert_eq!(parse_input_shape(" 1, 28 ,28").unwrap(), [1, 28, 28]);
        for bad in ["", "3,224", "3,224,224,1", "0,28,28", "3,x,28", "-1,28,28"] {
            let err = parse_input_shape(bad).unwrap_err();
            assert!(err.to_string().contains("C,H,W"), "{bad}: {err}");
        }
    }
}
