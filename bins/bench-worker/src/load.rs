//! What a worker runs in its window: a model step, or the hog holding its memory (issue 12).
//!
//! One enum so that the window runner, the warmup and the artifacts treat both alike; the hog's
//! steps are hold intervals of 0 samples (`coload_workload::Hog`).

use coload_cohort_schema::MemoryInfo;
use coload_timing::Step;
use coload_workload::{Hog, ModelStep, WorkloadError, WorkloadInfo};

/// The worker's load.
#[derive(Debug)]
pub(crate) enum Load {
    /// A model's training or inference step.
    Model(ModelStep),
    /// Device memory held through the window.
    Hog(Hog),
}

impl Load {
    /// Device, versions and guards, for `worker.json`.
    pub(crate) fn info(&self) -> WorkloadInfo {
        match self {
            Load::Model(s) => s.info(),
            Load::Hog(h) => h.info(),
        }
    }

    /// Peak device memory (the caching allocator's), on CUDA.
    pub(crate) fn peak_memory(&self) -> Option<MemoryInfo> {
        match self {
            Load::Model(s) => s.peak_memory(),
            Load::Hog(h) => h.peak_memory(),
        }
    }

    /// The hog, when this is one.
    pub(crate) fn as_hog(&self) -> Option<&Hog> {
        match self {
            Load::Hog(h) => Some(h),
            Load::Model(_) => None,
        }
    }
}

impl Step for Load {
    type Error = WorkloadError;

    fn step(&mut self) -> Result<u32, WorkloadError> {
        match self {
            Load::Model(s) => s.step(),
            Load::Hog(h) => h.step(),
        }
    }
}
