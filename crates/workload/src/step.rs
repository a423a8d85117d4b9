//! ResNet18 training and inference steps.
//!
//! One step is one batch: for `train`, `zero_grad(set_to_none)`, forward, cross-entropy,
//! backward and a foreach SGD step (momentum 0.9, lr 0.01), the loop a PyTorch user writes; for
//! `infer`, an eval-mode forward under `c10::InferenceMode`. Both end with a device synchronize,
//! so the step returns only when the device has finished the batch. Inputs and labels are made
//! once, on the device, from the seed, and reused by every batch.
//!
//! The step runs inside the timed window: it builds no Rust collections, logs nothing and takes
//! no locks; libtorch's own per-op work is all there is. tch's non-`f_` methods (the ResNet's
//! layers use them) panic on a libtorch error; the step catches that at its boundary and returns
//! the message as a [`WorkloadError`].

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;

use coload_cohort_schema::{DeviceKind, MemoryInfo, MemorySource, Precision, Workload};
use tch::nn::{FuncT, ModuleT, VarStore};
use tch::{Device, Kind, Reduction, Tensor};

use crate::error::{WorkloadError, from_panic};
use crate::options::{WorkloadOptions, validate};
use crate::shim;
use coload_cohort_schema::DeviceChoice;

/// Classes of the ResNet18 head (ImageNet's 1000).
pub const NUM_CLASSES: i64 = 1000;
/// SGD learning rate.
pub const LEARNING_RATE: f64 = 0.01;
/// SGD momentum.
pub const MOMENTUM: f64 = 0.9;

/// The autograd guard inference runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum InferenceGuard {
    /// `c10::InferenceMode` through the C++ shim (what PyTorch's `torch.inference_mode()` does).
    #[default]
    InferenceMode,
    /// tch's `no_grad` (`torch.no_grad()`): the fallback, and a baseline to measure against.
    NoGrad,
}

impl InferenceGuard {
    /// The name recorded in `worker.json` (`runtime.inference_guard`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            InferenceGuard::InferenceMode => "inference_mode",
            InferenceGuard::NoGrad => "no_grad",
        }
    }
}

/// How the workload runs, for `worker.json`'s `device` and `runtime`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadInfo {
    /// CUDA or CPU.
    pub device_kind: DeviceKind,
    /// The CUDA ordinal (`cuda:N`), on CUDA.
    pub cuda_index: Option<usize>,
    /// libtorch's version (`2.11.0`).
    pub libtorch_version: String,
    /// The CUDA runtime libtorch was built with (`13.0`), when its CUDA library is loaded.
    pub cuda_version: Option<String>,
    /// The cuDNN libtorch was built with (`9.13.0`), when available.
    pub cudnn_version: Option<String>,
    /// `inference_mode` or `no_grad` for inference; `None` for training.
    pub inference_guard: Option<String>,
    /// Whether cuDNN benchmark (autotuning) is on (always on CUDA).
    pub cudnn_benchmark: bool,
    /// Host threads libtorch uses for intra-op work.
    pub torch_threads: u32,
}

/// What one inference forward produced, to show that it recorded no autograd history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputProbe {
    /// Whether the output requires a gradient (an autograd graph hangs from it).
    pub requires_grad: bool,
    /// Whether the output is an inference tensor (made under `InferenceMode`).
    pub is_inference: bool,
    /// Whether `InferenceMode` was enabled while the forward ran.
    pub inference_mode_was_enabled: bool,
}

/// One ResNet18 batch on a fixed synthetic batch. Implements [`coload_timing::Step`].
#[derive(Debug)]
pub struct ResNetStep {
    options: WorkloadOptions,
    device: Device,
    cuda_index: Option<usize>,
    guard: InferenceGuard,
    /// Keeps the variables alive (the model's closures hold shallow copies).
    vs: VarStore,
    model: FuncT<'static>,
    inputs: Tensor,
    labels: Tensor,
    sgd: Option<shim::Sgd>,
    last_loss: Option<Tensor>,
    batch_size: u32,
}

/// Serializes seeded construction: libtorch's default generator is process-wide, so two steps
/// built at once on different threads would interleave their draws. Only construction takes it,
/// never a step.
static BUILD_LOCK: Mutex<()> = Mutex::new(());

/// Runs `f`, turning a tch panic into a typed error.
fn catching<T>(f: impl FnOnce() -> Result<T, WorkloadError>) -> Result<T, WorkloadError> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|payload| Err(from_panic(payload.as_ref())))
}

fn resolve_device(choice: DeviceChoice) -> Result<Device, WorkloadError> {
    catching(|| match choice {
        DeviceChoice::Cpu => Ok(Device::Cpu),
        DeviceChoice::Auto => Ok(if tch::Cuda::is_available() {
            Device::Cuda(0)
        } else {
            Device::Cpu
        }),
        DeviceChoice::Cuda(n) => {
            if !tch::Cuda::is_available() {
                return Err(WorkloadError::CudaUnavailable(format!(
                    "cuda:{n} was asked for but libtorch sees no CUDA device (no GPU visible, \
                     or libtorch_cuda.so was not loaded: check `ldd <binary> | grep torch_cuda`)"
                )));
            }
            let count = tch::Cuda::device_count();
            if n as i64 >= count {
                return Err(WorkloadError::InvalidOption(format!(
                    "cuda:{n} was asked for but only {count} CUDA device(s) are visible"
                )));
            }
            Ok(Device::Cuda(n))
        }
    })
}

/// `13000` -> `13.0` (CUDA encodes major * 1000 + minor * 10).
pub(crate) fn cuda_version_text(v: i64) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

/// cuDNN 9 encodes major * 10000 + minor * 100 + patch; cuDNN 8 and older major * 1000 +
/// minor * 100 + patch.
pub(crate) fn cudnn_version_text(v: i64) -> String {
    if v >= 90_000 {
        format!("{}.{}.{}", v / 10_000, (v % 10_000) / 100, v % 100)
    } else {
        format!("{}.{}.{}", v / 1000, (v % 1000) / 100, v % 100)
    }
}

impl ResNetStep {
    /// Builds the model, the optimizer (training) and the synthetic batch on the device.
    pub fn new(options: &WorkloadOptions) -> Result<Self, WorkloadError> {
        Self::with_guard(options, InferenceGuard::InferenceMode)
    }

    /// [`ResNetStep::new`] with an explicit inference guard (to measure `no_grad` against
    /// `InferenceMode`). When the shim cannot enter `InferenceMode`, `no_grad` runs instead and
    /// [`ResNetStep::info`] says so.
    pub fn with_guard(
        options: &WorkloadOptions,
        guard: InferenceGuard,
    ) -> Result<Self, WorkloadError> {
        validate(options)?;
        let device = resolve_device(options.device)?;
        let cuda_index = match device {
            Device::Cuda(n) => Some(n),
            _ => None,
        };
        let guard = if guard == InferenceGuard::InferenceMode
            && shim::with_guard(shim::GUARD_INFERENCE_MODE, || {}).is_err()
        {
            InferenceGuard::NoGrad
        } else {
            guard
        };
        let _build = BUILD_LOCK
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        catching(|| {
            if device.is_cuda() {
                tch::Cuda::cudnn_set_benchmark(true);
            }
            tch::manual_seed(options.seed as i64);
            let vs = VarStore::new(device);
            let model = tch::vision::resnet::resnet18(&vs.root(), NUM_CLASSES);
            let b = i64::from(options.batch_size);
            let s = i64::from(options.image_size);
            let inputs = Tensor::f_randn([b, 3, s, s], (Kind::Float, device))?;
            let labels = Tensor::f_randint(NUM_CLASSES, [b], (Kind::Int64, device))?;
            let sgd = match options.workload {
                Workload::Train => {
                    let mut params = vs.trainable_variables();
                    Some(shim::Sgd::new(&mut params, LEARNING_RATE, MOMENTUM)?)
                }
                Workload::Infer | Workload::Hog => None,
            };
            if let Some(index) = cuda_index {
                shim::synchronize(index)?;
            }
            Ok(ResNetStep {
                options: *options,
                device,
                cuda_index,
                guard,
                vs,
                model,
                inputs,
                labels,
                sgd,
                last_loss: None,
                batch_size: options.batch_size,
            })
        })
    }

    /// Device, versions and guards, for `worker.json`.
    #[must_use]
    pub fn info(&self) -> WorkloadInfo {
        let (cudart, cudnn) = if self.device.is_cuda() {
            shim::cuda_versions()
        } else {
            (None, None)
        };
        WorkloadInfo {
            device_kind: if self.device.is_cuda() {
                DeviceKind::Cuda
            } else {
                DeviceKind::Cpu
            },
            cuda_index: self.cuda_index,
            libtorch_version: shim::torch_version(),
            cuda_version: cudart.map(cuda_version_text),
            cudnn_version: cudnn.map(cudnn_version_text),
            inference_guard: (self.options.workload == Workload::Infer)
                .then(|| self.guard.as_str().to_owned()),
            cudnn_benchmark: self.device.is_cuda(),
            torch_threads: catch_unwind(tch::get_num_threads).map_or(0, |n| n.max(0) as u32),
        }
    }

    /// The options this step was built with.
    #[must_use]
    pub fn options(&self) -> &WorkloadOptions {
        &self.options
    }

    /// Number of trainable parameters (11,689,512 for ResNet18 with 1000 classes).
    #[must_use]
    pub fn parameter_count(&self) -> i64 {
        self.vs
            .trainable_variables()
            .iter()
            .map(Tensor::numel)
            .map(|n| n as i64)
            .sum()
    }

    /// Peak bytes the CUDA caching allocator reserved on this device (`None` on CPU or when
    /// the allocator cannot say). Source: libtorch's caching allocator, through the shim.
    #[must_use]
    pub fn peak_memory(&self) -> Option<MemoryInfo> {
        let index = self.cuda_index?;
        let peak = shim::peak_reserved_bytes(index).ok().flatten()?;
        Some(MemoryInfo {
            peak_device_bytes: peak,
            source: MemorySource::CachingAllocator,
        })
    }

    /// Resets the caching allocator's peak (to measure the window alone). No-op on CPU.
    pub fn reset_peak_memory(&self) -> Result<(), WorkloadError> {
        match self.cuda_index {
            Some(index) => shim::reset_peak(index),
            None => Ok(()),
        }
    }

    /// The loss of the last training step, copied to the host (never called in the window).
    pub fn last_loss(&self) -> Result<Option<f64>, WorkloadError> {
        self.last_loss
            .as_ref()
            .map(|l| l.f_double_value(&[]).map_err(WorkloadError::from))
            .transpose()
    }

    /// Runs one inference forward the way [`Step::step`](coload_timing::Step::step) does and
    /// reports whether it recorded autograd history. Outside the window only.
    pub fn probe_inference(&mut self) -> Result<OutputProbe, WorkloadError> {
        let mut probe = None;
        let (model, inputs) = (&self.model, &self.inputs);
        self.run_guarded(self.infer_flags(), || {
            let out = model.forward_t(inputs, false);
            probe = Some(OutputProbe {
                requires_grad: out.requires_grad(),
                is_inference: out.f_is_inference()?,
                inference_mode_was_enabled: shim::inference_mode_enabled(),
            });
            Ok(())
        })?;
        probe.ok_or_else(|| WorkloadError::Libtorch("the inference probe did not run".into()))
    }

    fn autocast_flag(&self) -> i32 {
        match (self.options.precision, self.device.is_cuda()) {
            (Precision::Fp32, _) => 0,
            (Precision::Bf16, true) => shim::GUARD_AUTOCAST_CUDA_BF16,
            (Precision::Bf16, false) => shim::GUARD_AUTOCAST_CPU_BF16,
        }
    }

    fn infer_flags(&self) -> i32 {
        let inference = match self.guard {
            InferenceGuard::InferenceMode => shim::GUARD_INFERENCE_MODE,
            InferenceGuard::NoGrad => 0,
        };
        inference | self.autocast_flag()
    }

    /// Runs `f` under the shim guards in `flags` (directly when there are none), catching
    /// panics; with the `no_grad` fallback for inference, under tch's `no_grad` guard.
    fn run_guarded(
        &self,
        flags: i32,
        f: impl FnOnce() -> Result<(), WorkloadError>,
    ) -> Result<(), WorkloadError> {
        let no_grad =
            self.options.workload == Workload::Infer && self.guard == InferenceGuard::NoGrad;
        let mut f = Some(f);
        let mut result = Ok(());
        let mut body = || {
            result = catching(|| {
                let _no_grad = no_grad.then(tch::no_grad_guard);
                f.take().map_or(Ok(()), |f| f())
            });
        };
        if flags == 0 {
            body();
        } else {
            shim::with_guard(flags, body)?;
        }
        result
    }

    fn train_step(&mut self) -> Result<(), WorkloadError> {
        let sgd = self
            .sgd
            .as_mut()
            .ok_or_else(|| WorkloadError::InvalidOption("no optimizer for training".into()))?;
        sgd.zero_grad()?;
        let (model, inputs, labels) = (&self.model, &self.inputs, &self.labels);
        let mut loss = None;
        let autocast = self.autocast_flag();
        let forward = || {
            let logits = model.forward_t(inputs, true);
            loss = Some(logits.f_cross_entropy_loss::<Tensor>(
                labels,
                None,
                Reduction::Mean,
                -100,
                0.0,
            )?);
            Ok(())
        };
        // Forward and loss under autocast (when bf16), backward outside it, as PyTorch's AMP
        // recipe does.
        self.run_guarded(autocast, forward)?;
        let loss = loss.ok_or_else(|| WorkloadError::Libtorch("forward did not run".into()))?;
        catching(|| loss.f_backward().map_err(WorkloadError::from))?;
        self.sgd.as_mut().map_or(Ok(()), shim::Sgd::step)?;
        self.last_loss = Some(loss);
        Ok(())
    }

    fn infer_step(&mut self) -> Result<(), WorkloadError> {
        let (model, inputs) = (&self.model, &self.inputs);
        self.run_guarded(self.infer_flags(), || {
            let _out = model.forward_t(inputs, false);
            Ok(())
        })
    }
}

impl coload_timing::Step for ResNetStep {
    type Error = WorkloadError;

    fn step(&mut self) -> Result<u32, WorkloadError> {
        match self.options.workload {
            Workload::Train => self.train_step()?,
            Workload::Infer => self.infer_step()?,
            Workload::Hog => return Err(crate::options::not_a_resnet_step()),
        }
        if let Some(index) = self.cuda_index {
            shim::synchronize(index)?;
        }
        Ok(self.batch_size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coload_timing::Step;

    fn tiny(workload: Workload) -> WorkloadOptions {
        WorkloadOptions {
            workload,
            device: DeviceChoice::Cpu,
            batch_size: 2,
            image_size: 64,
            precision: Precision::Fp32,
            seed: 7,
        }
    }

    /// Deep copies of every variable (weights and batch-norm statistics), by name.
    fn snapshot(step: &ResNetStep) -> Vec<(String, Tensor)> {
        let mut vars: Vec<_> = step
            .vs
            .variables()
            .into_iter()
            .map(|(name, t)| (name, t.detach().copy()))
            .collect();
        vars.sort_by(|a, b| a.0.cmp(&b.0));
        vars
    }

    fn changed(before: &[(String, Tensor)], step: &ResNetStep) -> Vec<String> {
        let now = step.vs.variables();
        before
            .iter()
            .filter(|(name, t)| !t.equal(&now[name]))
            .map(|(name, _)| name.clone())
            .collect()
    }

    #[test]
    fn training_changes_the_weights_and_lowers_the_loss() {
        let mut step = ResNetStep::new(&tiny(Workload::Train)).unwrap();
        let before = snapshot(&step);
        assert_eq!(step.step().unwrap(), 2);
        let first = step.last_loss().unwrap().unwrap();
        let moved = changed(&before, &step);
        assert!(moved.iter().any(|n| n == "fc.weight"), "{moved:?}");
        assert!(moved.iter().any(|n| n == "conv1.weight"));
        assert!(moved.iter().any(|n| n.ends_with("running_mean")));
        for _ in 0..4 {
            step.step().unwrap();
        }
        let last = step.last_loss().unwrap().unwrap();
        // A fixed batch of two images is memorized quickly: the loss must fall clearly.
        assert!(last < first * 0.9, "loss {first} -> {last}");
        assert!(
            first.is_finite() && first > 1.0,
            "ln(1000) ~ 6.9 at the start: {first}"
        );
        let info = step.info();
        assert_eq!(info.inference_guard, None);
        assert!(!info.cudnn_benchmark);
        assert_eq!(info.device_kind, DeviceKind::Cpu);
        assert!(step.peak_memory().is_none());
    }

    #[test]
    fn the_foreach_sgd_matches_the_textbook_update() {
        // p1 = p0 - lr * g0; p2 = p1 - lr * (momentum * g0 + g1).
        let mut w = Tensor::from_slice(&[1.0_f32, -2.0]).set_requires_grad(true);
        let mut sgd = shim::Sgd::new(std::slice::from_mut(&mut w), 0.1, 0.9).unwrap();
        let target = Tensor::from_slice(&[0.0_f32, 0.0]);
        let mut grads = Vec::new();
        for _ in 0..2 {
            sgd.zero_grad().unwrap();
            assert!(!w.grad().defined(), "zero_grad sets the gradient to none");
            let loss = (&w - &target).square().sum(Kind::Float);
            loss.backward();
            grads.push(w.grad().copy());
            sgd.step().unwrap();
        }
        let g0 = Vec::<f32>::try_from(&grads[0]).unwrap();
        let g1 = Vec::<f32>::try_from(&grads[1]).unwrap();
        let p = Vec::<f32>::try_from(&w.detach()).unwrap();
        let p0 = [1.0_f32, -2.0];
        for i in 0..2 {
            let expected = p0[i] - 0.1 * g0[i] - 0.1 * (0.9 * g0[i] + g1[i]);
            assert!((p[i] - expected).abs() < 1e-5, "{p:?} vs {expected}");
        }
    }

    #[test]
    fn inference_leaves_weights_alone_and_records_no_history() {
        let mut step = ResNetStep::new(&tiny(Workload::Infer)).unwrap();
        let before = snapshot(&step);
        for _ in 0..3 {
            assert_eq!(step.step().unwrap(), 2);
        }
        assert_eq!(changed(&before, &step), Vec::<String>::new());
        let probe = step.probe_inference().unwrap();
        assert_eq!(
            probe,
            OutputProbe {
                requires_grad: false,
                is_inference: true,
                inference_mode_was_enabled: true
            }
        );
        assert!(
            !shim::inference_mode_enabled(),
            "the guard ends with the step"
        );
        assert_eq!(
            step.info().inference_guard.as_deref(),
            Some("inference_mode")
        );
        assert!(step.last_loss().unwrap().is_none());
    }

    #[test]
    fn the_no_grad_fallback_runs_and_says_so() {
        let mut step =
            ResNetStep::with_guard(&tiny(Workload::Infer), InferenceGuard::NoGrad).unwrap();
        step.step().unwrap();
        let probe = step.probe_inference().unwrap();
        assert!(!probe.requires_grad && !probe.is_inference && !probe.inference_mode_was_enabled);
        assert_eq!(step.info().inference_guard.as_deref(), Some("no_grad"));
    }

    #[test]
    fn bf16_autocast_runs_the_forward_in_bf16_on_cpu() {
        let mut o = tiny(Workload::Train);
        o.precision = Precision::Bf16;
        let mut step = ResNetStep::new(&o).unwrap();
        step.step().unwrap();
        step.step().unwrap();
        assert!(step.last_loss().unwrap().unwrap().is_finite());
        // Weights stay fp32 (autocast casts per op); the logits come out in bf16.
        let fc = &step.vs.variables()["fc.weight"];
        assert_eq!(fc.kind(), Kind::Float);
        let mut kind = None;
        let (model, inputs) = (&step.model, &step.inputs);
        step.run_guarded(step.autocast_flag(), || {
            kind = Some(model.forward_t(inputs, false).kind());
            Ok(())
        })
        .unwrap();
        assert_eq!(kind, Some(Kind::BFloat16));
    }

    #[test]
    fn seeds_make_the_same_model_and_batch() {
        let a = ResNetStep::new(&tiny(Workload::Infer)).unwrap();
        let b = ResNetStep::new(&tiny(Workload::Infer)).unwrap();
        assert!(a.inputs.equal(&b.inputs) && a.labels.equal(&b.labels));
        assert!(a.vs.variables()["fc.weight"].equal(&b.vs.variables()["fc.weight"]));
    }

    #[test]
    fn a_libtorch_error_inside_a_step_is_typed() {
        let mut step = ResNetStep::new(&tiny(Workload::Train)).unwrap();
        // A label past the 1000 classes: cross-entropy (an f_ method) reports it.
        step.labels = Tensor::from_slice(&[5000_i64, 1]);
        let err = step.step().unwrap_err();
        assert_eq!(err.kind(), coload_cohort_schema::FailureKind::LibtorchError);
        assert!(err.to_string().contains("5000"), "{err}");

        // One channel instead of three: conv2d inside tch's ResNet (a panicking method).
        let mut step = ResNetStep::new(&tiny(Workload::Infer)).unwrap();
        step.inputs = Tensor::zeros([2, 1, 64, 64], (Kind::Float, Device::Cpu));
        let err = step.step().unwrap_err();
        assert_eq!(err.kind(), coload_cohort_schema::FailureKind::LibtorchError);
        assert!(err.to_string().to_lowercase().contains("channels"), "{err}");
        assert!(
            !shim::inference_mode_enabled(),
            "a failed step leaves no guard behind"
        );
    }

    #[test]
    fn unreachable_devices_and_absurd_sizes_are_typed_errors() {
        let mut o = tiny(Workload::Train);
        o.device = DeviceChoice::Cuda(7);
        let err = ResNetStep::new(&o).unwrap_err();
        if tch::Cuda::is_available() {
            assert_eq!(err.kind(), coload_cohort_schema::FailureKind::InvalidOption);
        } else {
            assert_eq!(
                err.kind(),
                coload_cohort_schema::FailureKind::CudaUnavailable
            );
        }
        assert!(err.to_string().contains("cuda:7"));

        // About 3 PB of input: no allocator can map it, whatever the overcommit policy.
        let mut o = tiny(Workload::Infer);
        o.batch_size = 1 << 20;
        o.image_size = 1 << 14;
        let err = ResNetStep::new(&o).unwrap_err();
        assert!(err.is_out_of_memory(), "{err:?}");
    }

    #[test]
    fn versions_are_reported_and_decoded() {
        let step = ResNetStep::new(&tiny(Workload::Infer)).unwrap();
        assert!(step.info().libtorch_version.starts_with("2.11"));
        assert!(step.info().torch_threads >= 1);
        assert_eq!(step.parameter_count(), 11_689_512);
        assert_eq!(cuda_version_text(13000), "13.0");
        assert_eq!(cuda_version_text(12080), "12.8");
        assert_eq!(cudnn_version_text(91300), "9.13.0");
        assert_eq!(cudnn_version_text(8902), "8.9.2");
    }
}
