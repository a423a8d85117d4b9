//! The serve workload: the inference forward at a fixed set of padded batch sizes.
//!
//! A dynamic batcher (`coload_timing::run_serve`) hands this step batches of 1 to `max_batch`
//! requests, padded to one of a few sizes. Each size is a view of the first rows of one
//! synthetic batch made before the window, so a batch allocates no input; each size is warmed
//! up before the barrier ([`ServeStep::warm_up`]), so that cuDNN's autotuning for that shape
//! never lands in the window. The forward is the `infer` workload's (eval mode, under
//! `InferenceMode`), ending with a device synchronize: every request of the batch completes then.

use std::time::{Duration, Instant};

use coload_cohort_schema::{MemoryInfo, Workload};
use coload_timing::BatchStep;
use tch::Tensor;

use crate::error::WorkloadError;
use crate::options::WorkloadOptions;
use crate::step::{ResNetStep, WorkloadInfo};

/// The inference forward at padded batch sizes. Implements [`coload_timing::BatchStep`].
#[derive(Debug)]
pub struct ServeStep {
    inner: ResNetStep,
    sizes: Vec<u32>,
    /// One input view per size, in the order of `sizes`.
    views: Vec<Tensor>,
    /// `slot[padded]` is the index of that size's view; `usize::MAX` when not prepared.
    slot: Vec<usize>,
}

impl ServeStep {
    /// Builds the model and one input batch of the largest of `padded_sizes`, with a view for
    /// each size. `options.batch_size` is ignored (the sizes decide); `options.workload` must be
    /// `serve`.
    pub fn new(options: &WorkloadOptions, padded_sizes: &[u32]) -> Result<Self, WorkloadError> {
        if options.workload != Workload::Serve {
            return Err(WorkloadError::InvalidOption(format!(
                "the serve step runs the serve workload, not {}",
                options.workload
            )));
        }
        let mut sizes = padded_sizes.to_vec();
        sizes.sort_unstable();
        sizes.dedup();
        let largest = match sizes.last() {
            Some(&l) if sizes[0] > 0 => l,
            _ => {
                return Err(WorkloadError::InvalidOption(format!(
                    "padded batch sizes {padded_sizes:?} must be non-empty and at least 1"
                )));
            }
        };
        let inner = ResNetStep::new(&WorkloadOptions {
            batch_size: largest,
            ..options.clone()
        })?;
        let views = sizes
            .iter()
            .map(|&s| inner.inputs().f_narrow(0, 0, i64::from(s)))
            .collect::<Result<Vec<_>, _>>()?;
        let mut slot = vec![usize::MAX; largest as usize + 1];
        for (i, &s) in sizes.iter().enumerate() {
            slot[s as usize] = i;
        }
        Ok(ServeStep {
            inner,
            sizes,
            views,
            slot,
        })
    }

    /// The padded sizes prepared, ascending.
    #[must_use]
    pub fn sizes(&self) -> &[u32] {
        &self.sizes
    }

    /// Runs `batches` forwards at every size (before the barrier: cuDNN autotunes each shape on
    /// its first run), calling `on_size(size, median)` after each size. Returns each size's
    /// median batch time.
    pub fn warm_up(
        &mut self,
        batches: u32,
        mut on_size: impl FnMut(u32, Duration),
    ) -> Result<Vec<(u32, Duration)>, WorkloadError> {
        let mut out = Vec::with_capacity(self.sizes.len());
        for (i, &size) in self.sizes.iter().enumerate() {
            let mut times = Vec::with_capacity(batches as usize);
            for _ in 0..batches.max(1) {
                let t = Instant::now();
                self.inner.infer_on(&self.views[i])?;
                times.push(t.elapsed());
            }
            times.sort_unstable();
            let median = times[times.len() / 2];
            on_size(size, median);
            out.push((size, median));
        }
        Ok(out)
    }

    /// Device, versions and guards, for `worker.json`.
    #[must_use]
    pub fn info(&self) -> WorkloadInfo {
        self.inner.info()
    }

    /// Peak bytes the CUDA caching allocator reserved (`None` on CPU).
    #[must_use]
    pub fn peak_memory(&self) -> Option<MemoryInfo> {
        self.inner.peak_memory()
    }

    /// Resets the caching allocator's peak. No-op on CPU.
    pub fn reset_peak_memory(&self) -> Result<(), WorkloadError> {
        self.inner.reset_peak_memory()
    }
}

impl BatchStep for ServeStep {
    type Error = WorkloadError;

    fn run_batch(&mut self, requests: u32, padded: u32) -> Result<(), WorkloadError> {
        let i = self
            .slot
            .get(padded as usize)
            .copied()
            .unwrap_or(usize::MAX);
        if i == usize::MAX || requests > padded {
            // Leaving the window with an error: formatting may allocate now.
            return Err(WorkloadError::InvalidOption(format!(
                "a batch of {requests} requests padded to {padded}, a size not prepared \
                 (prepared: {:?})",
                self.sizes
            )));
        }
        self.inner.infer_on(&self.views[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coload_cohort_schema::{DeviceChoice, Execution, FailureKind, Precision};

    fn tiny() -> WorkloadOptions {
        WorkloadOptions {
            workload: Workload::Serve,
            device: DeviceChoice::Cpu,
            batch_size: 32,
            image_size: 32,
            precision: Precision::Fp32,
            seed: 3,
            model: crate::ModelSource::default(),
            execution: Execution::Eager,
            memory_format: coload_cohort_schema::MemoryFormat::Contiguous,
        }
    }

    #[test]
    fn every_size_is_a_view_of_the_first_rows() {
        let step = ServeStep::new(&tiny(), &[4, 1, 2, 2]).unwrap();
        assert_eq!(step.sizes(), [1, 2, 4]);
        for (view, size) in step.views.iter().zip(step.sizes()) {
            assert_eq!(view.size(), [i64::from(*size), 3, 32, 32]);
            // A view shares the batch's storage: no copy per size.
            assert_eq!(view.data_ptr(), step.inner.inputs().data_ptr());
        }
        assert_eq!(
            step.inner.inputs().size()[0],
            4,
            "the batch is the largest size"
        );
        assert_eq!(
            step.info().inference_guard.as_deref(),
            Some("inference_mode")
        );
    }

    #[test]
    fn batches_run_at_prepared_sizes_only() {
        let mut step = ServeStep::new(&tiny(), &[1, 2, 4]).unwrap();
        step.run_batch(3, 4).unwrap();
        step.run_batch(1, 1).unwrap();
        let e = step.run_batch(3, 3).unwrap_err();
        assert_eq!(e.kind(), FailureKind::InvalidOption);
        assert!(e.to_string().contains("padded to 3"), "{e}");
        assert!(step.run_batch(5, 4).is_err());
        assert!(step.run_batch(1, 99).is_err());
        let mut seen = Vec::new();
        let medians = step.warm_up(2, |s, _| seen.push(s)).unwrap();
        assert_eq!(seen, [1, 2, 4]);
        assert!(medians.iter().all(|(_, d)| *d > Duration::ZERO));
    }

    #[test]
    fn bad_sizes_and_workloads_are_refused() {
        assert!(ServeStep::new(&tiny(), &[]).is_err());
        assert!(ServeStep::new(&tiny(), &[0, 4]).is_err());
        let mut o = tiny();
        o.workload = Workload::Infer;
        assert_eq!(
            ServeStep::new(&o, &[1]).unwrap_err().kind(),
            FailureKind::InvalidOption
        );
    }
}
