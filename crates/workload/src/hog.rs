//! The `hog` workload: take device memory and hold it.
//!
//! [`Hog::allocate`] takes device memory through libtorch's caching allocator (so through
//! `cudaMalloc`, which backs every byte it grants) in steps of [`HogOptions::step_bytes`], up to
//! [`HogOptions::target_bytes`] or until CUDA refuses. After a refusal the step halves, down to
//! [`HogOptions::min_step_bytes`], so the hog ends within one small step of all the device (or
//! its MPS share) would give. It then holds the memory: as a [`coload_timing::Step`], one step
//! is one hold interval of sleep, recorded as a batch of 0 samples, so its `batches.jsonl`
//! shows it held the memory through the whole window without loading the device.
//!
//! On the CPU there is no device memory to take; the hog refuses rather than measure host
//! memory, which no GPU sharing mode governs.

use std::time::Duration;

use coload_cohort_schema::{
    DeviceChoice, DeviceKind, Execution, HogReport, HogStop, MemoryInfo, MemorySource,
};
use tch::{Device, Kind, Tensor};

use crate::error::WorkloadError;
use crate::runtime::{cuda_ordinal, probe_device};
use crate::shim;
use crate::step::{WorkloadInfo, cuda_version_text, cudnn_version_text};

/// The default first step: 1 GiB.
pub const DEFAULT_STEP_BYTES: u64 = 1 << 30;
/// The default smallest step after a refusal: 64 MiB.
pub const DEFAULT_MIN_STEP_BYTES: u64 = 64 << 20;
/// The default hold interval: one recorded "batch" per second of the window.
pub const DEFAULT_HOLD_INTERVAL: Duration = Duration::from_secs(1);

/// How the hog takes memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HogOptions {
    /// Where: a CUDA device (`auto` or `cuda:N`); the CPU is refused.
    pub device: DeviceChoice,
    /// How much to take, bytes; `None` takes all CUDA grants.
    pub target_bytes: Option<u64>,
    /// The first step, bytes.
    pub step_bytes: u64,
    /// The smallest step after a refusal, bytes.
    pub min_step_bytes: u64,
    /// One hold interval (one recorded batch of 0 samples).
    pub hold_interval: Duration,
}

impl HogOptions {
    /// The defaults on `device`, taking `target_bytes` (or everything).
    #[must_use]
    pub fn new(device: DeviceChoice, target_bytes: Option<u64>) -> Self {
        HogOptions {
            device,
            target_bytes,
            step_bytes: DEFAULT_STEP_BYTES,
            min_step_bytes: DEFAULT_MIN_STEP_BYTES,
            hold_interval: DEFAULT_HOLD_INTERVAL,
        }
    }
}

/// Device memory taken and held. Implements [`coload_timing::Step`] (one hold interval per step,
/// 0 samples).
#[derive(Debug)]
pub struct Hog {
    held: Vec<Tensor>,
    cuda_index: usize,
    report: HogReport,
    hold_interval: Duration,
}

/// The outcome of one allocation attempt, for [`take`].
pub(crate) enum Attempt {
    /// Granted.
    Granted,
    /// CUDA refused (out of memory), with its message.
    Refused(String),
}

/// The allocation loop, apart from CUDA: asks `try_alloc` for steps until the target is reached
/// or the smallest step is refused. Returns (granted bytes, allocations, stop, first refusal).
pub(crate) fn take(
    options: &HogOptions,
    mut try_alloc: impl FnMut(u64) -> Result<Attempt, WorkloadError>,
) -> Result<(u64, u32, HogStop, Option<String>), WorkloadError> {
    let mut granted = 0_u64;
    let mut allocations = 0_u32;
    let mut refusal = None;
    let min_step = options.min_step_bytes.max(1);
    let mut step = options.step_bytes.max(min_step);
    loop {
        let want = match options.target_bytes {
            Some(target) => step.min(target.saturating_sub(granted)),
            None => step,
        };
        if want == 0 {
            return Ok((granted, allocations, HogStop::TargetReached, refusal));
        }
        match try_alloc(want)? {
            Attempt::Granted => {
                granted += want;
                allocations += 1;
            }
            Attempt::Refused(message) => {
                refusal.get_or_insert(message);
                if want <= min_step {
                    return Ok((granted, allocations, HogStop::Refused, refusal));
                }
                step = (want / 2).max(min_step);
            }
        }
    }
}

impl Hog {
    /// Takes the memory. `now_unix_ns` stamps the moment the hog starts holding it.
    pub fn allocate(
        options: &HogOptions,
        now_unix_ns: impl Fn() -> u64,
    ) -> Result<Self, WorkloadError> {
        if options.step_bytes == 0 || options.hold_interval.is_zero() {
            return Err(WorkloadError::InvalidOption(
                "the hog's step and hold interval must be more than zero".into(),
            ));
        }
        let Some(index) = cuda_ordinal(options.device)? else {
            let where_ = if options.device == DeviceChoice::Cpu {
                "on the CPU (--device cpu)".to_owned()
            } else {
                format!(
                    "libtorch sees no CUDA device, so --device {} is the CPU, and",
                    options.device
                )
            };
            return Err(WorkloadError::InvalidOption(format!(
                "the hog workload takes device memory to test whether a GPU sharing mode keeps \
                 one tenant's memory from the others; {where_} there is no device memory to \
                 take, and host memory is governed by no GPU sharing mode: run it on a GPU"
            )));
        };
        let device = Device::Cuda(index);
        let mut held = Vec::new();
        let (granted, allocations, stopped_by, refusal) = take(options, |bytes| {
            let size = i64::try_from(bytes).map_err(|_| {
                WorkloadError::InvalidOption(format!("{bytes} bytes is too large for one tensor"))
            })?;
            match Tensor::f_empty([size], (Kind::Uint8, device)) {
                Ok(t) => {
                    held.push(t);
                    Ok(Attempt::Granted)
                }
                Err(e) => match WorkloadError::from(e) {
                    WorkloadError::OutOfMemory(message) => Ok(Attempt::Refused(message)),
                    other => Err(other),
                },
            }
        })?;
        shim::synchronize(index)?;
        let memory_free_after_bytes = probe_device(index).ok().map(|f| f.memory_free_bytes);
        Ok(Hog {
            held,
            cuda_index: index,
            report: HogReport {
                target_bytes: options.target_bytes,
                step_bytes: options.step_bytes,
                min_step_bytes: options.min_step_bytes,
                granted_bytes: granted,
                allocations,
                stopped_by,
                refusal,
                memory_free_after_bytes,
                holding_since_unix_ns: now_unix_ns(),
                hold_interval_s: options.hold_interval.as_secs_f64(),
            },
            hold_interval: options.hold_interval,
        })
    }

    /// Device and versions, for `worker.json` (as [`crate::ResNetStep::info`] gives them).
    #[must_use]
    pub fn info(&self) -> WorkloadInfo {
        let (cudart, cudnn) = shim::cuda_versions();
        WorkloadInfo {
            device_kind: DeviceKind::Cuda,
            cuda_index: Some(self.cuda_index),
            libtorch_version: shim::torch_version(),
            cuda_version: cudart.map(cuda_version_text),
            cudnn_version: cudnn.map(cudnn_version_text),
            inference_guard: None,
            cudnn_benchmark: false,
            torch_threads: std::panic::catch_unwind(tch::get_num_threads)
                .map_or(0, |n| n.max(0) as u32),
            // The hog runs no model.
            model: "none".to_owned(),
            parameter_count: 0,
            model_file: None,
            execution: Execution::Eager,
        }
    }

    /// What the hog took and holds.
    #[must_use]
    pub fn report(&self) -> &HogReport {
        &self.report
    }

    /// The CUDA ordinal it holds memory on.
    #[must_use]
    pub fn cuda_index(&self) -> usize {
        self.cuda_index
    }

    /// Tensors held (one per granted allocation).
    #[must_use]
    pub fn held_tensors(&self) -> usize {
        self.held.len()
    }

    /// The caching allocator's peak reserved bytes on the device (what `cudaMalloc` granted,
    /// rounded to the allocator's blocks).
    #[must_use]
    pub fn peak_memory(&self) -> Option<MemoryInfo> {
        let peak = shim::peak_reserved_bytes(self.cuda_index).ok().flatten()?;
        Some(MemoryInfo {
            peak_device_bytes: peak,
            source: MemorySource::CachingAllocator,
        })
    }
}

impl coload_timing::Step for Hog {
    type Error = WorkloadError;

    /// One hold interval: sleeps (no allocation, no device work) and reports 0 samples.
    fn step(&mut self) -> Result<u32, WorkloadError> {
        std::thread::sleep(self.hold_interval);
        Ok(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(target: Option<u64>) -> HogOptions {
        HogOptions {
            device: DeviceChoice::Cpu,
            target_bytes: target,
            step_bytes: 1024,
            min_step_bytes: 64,
            hold_interval: Duration::from_millis(1),
        }
    }

    /// A device that grants `free` bytes in total, and refuses beyond.
    fn device(
        mut free: u64,
        calls: &mut Vec<u64>,
    ) -> impl FnMut(u64) -> Result<Attempt, WorkloadError> {
        move |bytes| {
            calls.push(bytes);
            if bytes <= free {
                free -= bytes;
                Ok(Attempt::Granted)
            } else {
                Ok(Attempt::Refused(format!(
                    "CUDA out of memory. Tried to allocate {bytes} B"
                )))
            }
        }
    }

    #[test]
    fn takes_the_target_in_steps_and_stops_there() {
        let mut calls = Vec::new();
        let (granted, n, stop, refusal) =
            take(&options(Some(2500)), device(10_000, &mut calls)).unwrap();
        assert_eq!(
            (granted, n, stop, refusal),
            (2500, 3, HogStop::TargetReached, None)
        );
        assert_eq!(calls, [1024, 1024, 452]);
    }

    #[test]
    fn without_a_target_it_halves_after_a_refusal_and_ends_within_one_small_step() {
        let mut calls = Vec::new();
        let (granted, n, stop, refusal) = take(&options(None), device(3000, &mut calls)).unwrap();
        assert_eq!(stop, HogStop::Refused);
        // 1024 + 1024 + 512 + 256 + 128 granted, each size after the first refusal of the one
        // above it; 64 refused too: within 64 bytes of the 3000 the device had.
        assert_eq!(granted, 2816 + 128);
        assert!(3000 - granted < 64, "{granted}");
        assert_eq!(n, 5);
        assert_eq!(calls, [1024, 1024, 1024, 512, 512, 256, 256, 128, 128, 64]);
        assert_eq!(
            refusal.as_deref(),
            Some("CUDA out of memory. Tried to allocate 1024 B")
        );
    }

    #[test]
    fn a_full_device_grants_nothing_and_other_errors_propagate() {
        let mut calls = Vec::new();
        let (granted, n, stop, _) = take(&options(None), device(0, &mut calls)).unwrap();
        assert_eq!((granted, n, stop), (0, 0, HogStop::Refused));
        let err = take(&options(None), |_| {
            Err(WorkloadError::Libtorch(
                "CUDA error: an illegal memory access".into(),
            ))
        })
        .unwrap_err();
        assert_eq!(err.kind(), coload_cohort_schema::FailureKind::LibtorchError);
    }

    #[test]
    fn the_cpu_is_refused_with_a_reason() {
        let err = Hog::allocate(&options(None), || 0).unwrap_err();
        assert_eq!(err.kind(), coload_cohort_schema::FailureKind::InvalidOption);
        assert!(
            err.to_string()
                .contains("on the CPU (--device cpu) there is no device memory"),
            "{err}"
        );
    }

    #[test]
    fn a_hold_interval_is_a_batch_of_no_samples() {
        use coload_timing::Step as _;
        // Built by hand: allocation needs a GPU (crates/workload/tests/gpu.rs takes it there).
        let mut hog = Hog {
            held: Vec::new(),
            cuda_index: 0,
            report: HogReport {
                target_bytes: None,
                step_bytes: 1,
                min_step_bytes: 1,
                granted_bytes: 0,
                allocations: 0,
                stopped_by: HogStop::Refused,
                refusal: None,
                memory_free_after_bytes: None,
                holding_since_unix_ns: 0,
                hold_interval_s: 0.02,
            },
            hold_interval: Duration::from_millis(20),
        };
        let t = std::time::Instant::now();
        assert_eq!(hog.step().unwrap(), 0);
        assert!(t.elapsed() >= Duration::from_millis(20));
    }
}
