//! The workloads of coload, through libtorch (tch 0.24, libtorch 2.11.0).
//!
//! [`ModelStep`] is one batch of a model on a synthetic batch made once on the device: a
//! built-in ImageNet classifier ([`ZooModel`]: ResNet18 by default, ResNet50, MobileNetV2,
//! EfficientNet-B0 and more) or a user's TorchScript file ([`TorchScriptSpec`]). `train` is
//! forward, cross-entropy, backward and an SGD step (momentum 0.9, lr 0.01); `infer` is an
//! eval-mode forward under libtorch's `InferenceMode`. With `execution: cuda-graph` the step is
//! captured once in a CUDA graph and every batch is one replay. Each step ends with a device
//! synchronize and implements [`coload_timing::Step`]. A small C++ shim (`src/shim.cpp`, built
//! against the headers of the libtorch torch-sys found) supplies what tch lacks: the
//! `InferenceMode` guard, bf16 autocast, the foreach SGD update PyTorch uses by default, CUDA
//! graph capture and replay, device synchronize without panics, and the caching allocator's
//! peak.
//!
//! [`ServeStep`] is the `serve` workload: the inference forward at a fixed set of padded batch
//! sizes, each a view of one synthetic batch, for the dynamic batcher of
//! `coload_timing::run_serve`; it implements [`coload_timing::BatchStep`].
//!
//! [`DecodeStep`] is the closed-loop `decode` workload: a built-in decoder-only
//! transformer ([`LlmModel`]: GPT-2 small, TinyLlama-1.1B, tiny CPU presets; random weights)
//! prefills a batch of prompts, then generates one token per step with a preallocated KV cache,
//! eager or one CUDA-graph replay per decode step; it implements [`coload_timing::Step`].
//!
//! [`Hog`] is the `hog` workload: device memory taken in steps and held through the window
//!. [`probe_device`] asks the CUDA runtime (already loaded by libtorch) for the free
//! and total memory and the SM count this process sees, which under MPS are its share.
//!
//! [`profile::Profiler`] wraps libtorch's Kineto profiler around any of these steps (what
//! `torch.profiler.profile` drives from Python); [`DecodeStep::profile_decode`] profiles decode
//! steps and `examples/decode_profile.rs` prints where their time goes.
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
//! use coload_workload::{DeviceChoice, ModelSource, ModelStep, WorkloadOptions, ZooModel};
//!
//! let options = WorkloadOptions {
//!     workload: Workload::Infer,
//!     device: DeviceChoice::Cpu,
//!     batch_size: 1,
//!     image_size: 32,
//!     precision: Precision::Fp32,
//!     model: ModelSource::Zoo(ZooModel::MobilenetV2),
//!     ..WorkloadOptions::default()
//! };
//! let mut step = ModelStep::new(&options)?;
//! assert_eq!(step.step()?, 1);
//! assert_eq!(step.info().inference_guard.as_deref(), Some("inference_mode"));
//! assert_eq!(step.info().model, "mobilenet_v2");
//! # Ok::<(), coload_workload::WorkloadError>(())
//! ```

mod error;
mod hog;
mod llm;
mod models;
mod options;
pub mod profile;
mod runtime;
mod serve;
mod shim;
mod step;
mod torchscript;

pub use coload_cohort_schema::{DeviceChoice, MemoryFormat};
pub use error::{LlmError, ModelFileProblem, WorkloadError};
pub use hog::{DEFAULT_HOLD_INTERVAL, DEFAULT_MIN_STEP_BYTES, DEFAULT_STEP_BYTES, Hog, HogOptions};
pub use llm::{
    DecodeAttention, DecodeOptions, DecodeStep, LlmArchitecture, LlmConfig, LlmModel, LlmPlacement,
    LlmPreset, LlmServeOptions, LlmServeStep, PROMPT_SHIFTS, decode_buckets, warmup_batches,
};
pub use models::{MIN_IMAGE_SIZE, ZooModel};
pub use options::{ModelSource, NUM_CLASSES, TorchScriptSpec, WorkloadOptions, parse_input_shape};
pub use runtime::{CudaFacts, RuntimeError, cuda_ordinal, probe_device, runtime_loaded};
pub use serve::ServeStep;
pub use step::{
    GRAPH_WARMUP_STEPS, InferenceGuard, LEARNING_RATE, MOMENTUM, MemoryLayout, ModelStep,
    OutputProbe, ResNetStep, WorkloadInfo,
};
pub use tch;
