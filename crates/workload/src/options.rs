//! What to run and where.

use std::fmt;
use std::str::FromStr;

use coload_cohort_schema::{Precision, Workload};

use crate::error::WorkloadError;

/// Which device the workload runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum DeviceChoice {
    /// The first CUDA device when libtorch can use one, else the CPU.
    #[default]
    Auto,
    /// The host CPU.
    Cpu,
    /// CUDA device N (the N-th device CUDA sees, after `CUDA_VISIBLE_DEVICES`).
    Cuda(usize),
}

impl FromStr for DeviceChoice {
    type Err = WorkloadError;

    /// `auto`, `cpu` or `cuda:N` (`cuda` alone means `cuda:0`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(DeviceChoice::Auto),
            "cpu" => Ok(DeviceChoice::Cpu),
            "cuda" => Ok(DeviceChoice::Cuda(0)),
            _ => s
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(DeviceChoice::Cuda)
                .ok_or_else(|| {
                    WorkloadError::InvalidOption(format!(
                        "unknown device `{s}` (expected auto, cpu or cuda:N)"
                    ))
                }),
        }
    }
}

impl fmt::Display for DeviceChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceChoice::Auto => f.write_str("auto"),
            DeviceChoice::Cpu => f.write_str("cpu"),
            DeviceChoice::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_choices_round_trip_through_text() {
        for (text, choice) in [
            ("auto", DeviceChoice::Auto),
            ("cpu", DeviceChoice::Cpu),
            ("cuda:0", DeviceChoice::Cuda(0)),
            ("cuda:7", DeviceChoice::Cuda(7)),
        ] {
            assert_eq!(text.parse::<DeviceChoice>().unwrap(), choice);
            assert_eq!(choice.to_string(), text);
        }
        assert_eq!(
            "cuda".parse::<DeviceChoice>().unwrap(),
            DeviceChoice::Cuda(0)
        );
        for bad in ["gpu", "cuda:", "cuda:x", "cuda:-1", ""] {
            let err = bad.parse::<DeviceChoice>().unwrap_err();
            assert_eq!(err.kind(), "invalid_option", "{bad}");
        }
    }

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
        ] {
            assert_eq!(validate(&o).unwrap_err().kind(), "invalid_option");
        }
    }
}
