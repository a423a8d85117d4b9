//! What to run and where.

use coload_cohort_schema::{DeviceChoice, Precision, Workload};

use crate::error::WorkloadError;

/// Everything that decides what one batch computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkloadOptions {
    /// Train or infer.
    pub workload: Workload,
    /// Where to run.
    pub device: DeviceChoice,
    /// Images per batch.
    pub batch_size: u32,
    /// Height and width of the square synthetic images.
    pub image_size: u32,
    /// fp32, or bf16 autocast around the forward pass (and the loss, when training).
    pub precision: Precision,
    /// Seed for the weights, the synthetic images and their labels.
    pub seed: u64,
}

impl Default for WorkloadOptions {
    /// The article's protocol: training, batch 32 of 3x224x224 fp32 images, seed 0.
    fn default() -> Self {
        WorkloadOptions {
            workload: Workload::Train,
            device: DeviceChoice::Auto,
            batch_size: 32,
            image_size: 224,
            precision: Precision::Fp32,
            seed: 0,
        }
    }
}

/// Bytes in one input batch, refusing sizes that overflow libtorch's 64-bit sizes.
pub(crate) fn validate(options: &WorkloadOptions) -> Result<(), WorkloadError> {
    if options.workload == Workload::Hog {
        return Err(not_a_resnet_step());
    }
    if options.batch_size == 0 {
        return Err(WorkloadError::InvalidOption(
            "batch size must be at least 1".into(),
        ));
    }
    if options.image_size == 0 {
        return Err(WorkloadError::InvalidOption(
            "image size must be at least 1".into(),
        ));
    }
    let bytes = u128::from(options.batch_size) * 3 * u128::from(options.image_size).pow(2) * 4;
    if bytes > i64::MAX as u128 {
        return Err(WorkloadError::InvalidOption(format!(
            "batch {} of {}x{} images is {bytes} bytes, beyond what libtorch can address",
            options.batch_size, options.image_size, options.image_size
        )));
    }
    Ok(())
}

/// The hog holds memory and runs no model: it is built with [`crate::Hog::allocate`].
pub(crate) fn not_a_resnet_step() -> WorkloadError {
    WorkloadError::InvalidOption(
        "the hog workload runs no ResNet18 step; build it with Hog::allocate".into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_and_unaddressable_sizes_are_refused() {
        let ok = WorkloadOptions::default();
        assert!(validate(&ok).is_ok());
        for o in [
            WorkloadOptions {
                batch_size: 0,
                ..ok
            },
            WorkloadOptions {
                image_size: 0,
                ..ok
            },
            WorkloadOptions {
                batch_size: u32::MAX,
                image_size: u32::MAX,
                ..ok
            },
            WorkloadOptions {
                workload: Workload::Hog,
                ..ok
            },
        ] {
            assert_eq!(
                validate(&o).unwrap_err().kind(),
                coload_cohort_schema::FailureKind::InvalidOption
            );
        }
    }
}
