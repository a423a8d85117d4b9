//! What a worker runs in its window: a model step, an LLM's decode cycle, or the hog
//! holding its memory.
//!
//! One enum so that the window runner, the warmup and the artifacts treat them alike; the hog's
//! steps are hold intervals of 0 samples (`coload_workload::Hog`), the decode step's iterations
//! are a prefill or one decode step of B tokens (`coload_workload::DecodeStep`).

use coload_cohort_schema::MemoryInfo;
use coload_timing::Step;
use coload_workload::{DecodeStep, Hog, LlmError, ModelStep, WorkloadError, WorkloadInfo};

/// The worker's load.
#[derive(Debug)]
pub(crate) enum Load {
    /// A model's training or inference step.
    Model(ModelStep),
    /// Device memory held through the window.
    Hog(Hog),
    /// A built-in LLM prefilling and decoding in a closed loop.
    Decode(Box<DecodeStep>),
}

/// An LLM failure as the workload failure the worker reports: libtorch's and the device's
/// keep their own kind, everything the flags could have avoided is an invalid option.
pub(crate) fn llm_failure(e: LlmError) -> WorkloadError {
    match e {
        LlmError::Workload(e) => e,
        other => WorkloadError::InvalidOption(other.to_string()),
    }
}

impl Load {
    /// Device, versions and guards, for `worker.json`.
    pub(crate) fn info(&self) -> WorkloadInfo {
        match self {
            Load::Model(s) => s.info(),
            Load::Hog(h) => h.info(),
            Load::Decode(d) => d.info(),
        }
    }

    /// Peak device memory (the caching allocator's), on CUDA.
    pub(crate) fn peak_memory(&self) -> Option<MemoryInfo> {
        match self {
            Load::Model(s) => s.peak_memory(),
            Load::Hog(h) => h.peak_memory(),
            Load::Decode(d) => d.peak_memory(),
        }
    }

    /// The hog, when this is one.
    pub(crate) fn as_hog(&self) -> Option<&Hog> {
        match self {
            Load::Hog(h) => Some(h),
            Load::Model(_) | Load::Decode(_) => None,
        }
    }

    /// The decode step, when this is one.
    pub(crate) fn as_decode_mut(&mut self) -> Option<&mut DecodeStep> {
        match self {
            Load::Decode(d) => Some(d),
            Load::Model(_) | Load::Hog(_) => None,
        }
    }
}

impl Step for Load {
    type Error = WorkloadError;

    fn step(&mut self) -> Result<u32, WorkloadError> {
        match self {
            Load::Model(s) => s.step(),
            Load::Hog(h) => h.step(),
            Load::Decode(d) => d.step().map_err(llm_failure),
        }
    }
}
