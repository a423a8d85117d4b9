//! The ResNet18 workloads of coload, through libtorch (tch 0.24, libtorch 2.11.0).
//!
//! [`ResNetStep`] is one batch of ResNet18 (1000 classes) on a synthetic batch made once on the
//! device: `train` is forward, cross-entropy, backward and an SGD step (momentum 0.9, lr 0.01);
//! `infer` is an eval-mode forward under libtorch's `InferenceMode`. Each step ends with a device
//! synchronize and implements [`coload_timing::Step`]. A small C++ shim (`src/shim.cpp`, built
//! against the headers of the libtorch torch-sys found) supplies what tch lacks: the
//! `InferenceMode` guard, bf16 autocast, the foreach SGD update PyTorch uses by default, device
//! synchronize without panics, and the caching allocator's peak.
//!
//! [`Hog`] is the `hog` workload: device memory taken in steps and held through the window
//! (issue 12). [`probe_device`] asks the CUDA runtime (already loaded by libtorch) for the free
//! and total memory and the SM count this process sees, which under MPS are its share.
//!
//! Every libtorch failure becomes a [`WorkloadError`] carrying libtorch's message, CUDA
//! out-of-memory included; nothing panics out of this crate. This is the only library that links
//! libtorch.
//!
//! # Example
//!
//! ```
//! use coload_cohort_schema::{Precision, Workload};
//! use coload_timing::Step;
//! use coload_workload::{DeviceChoice, ResNetStep, WorkloadOptions};
//!
//! let options = WorkloadOptions {
//!     workload: Workload::Infer,
//!     device: DeviceChoice::Cpu,
//!     batch_size: 1,
//!     image_size: 32,
//!     precision: Precision::Fp32,
//!     seed: 0,
//! };
//! let mut step = ResNetStep::new(&options)?;
//! assert_eq!(step.step()?, 1);
//! assert_eq!(step.info().inference_guard.as_deref(), Some("inference_mode"));
//! # Ok::<(), coload_workload::WorkloadError>(())
//! ```

mod error;
mod hog;
mod options;
mod runtime;
mod shim;
mod step;

pub use coload_cohort_schema::DeviceChoice;
pub use error::WorkloadError;
pub use hog::{DEFAULT_HOLD_INTERVAL, DEFAULT_MIN_STEP_BYTES, DEFAULT_STEP_BYTES, Hog, HogOptions};
pub use options::WorkloadOptions;
pub use runtime::{CudaFacts, RuntimeError, cuda_ordinal, probe_device, runtime_loaded};
pub use step::{
    InferenceGuard, LEARNING_RATE, MOMENTUM, NUM_CLASSES, OutputProbe, ResNetStep, WorkloadInfo,
};
pub use tch;
