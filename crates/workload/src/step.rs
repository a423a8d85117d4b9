//! Training and inference steps of one model on a fixed synthetic batch.
//!
//! One step is one batch: for `train`, `zero_grad(set_to_none)`, forward, cross-entropy,
//! backward and a foreach SGD step (momentum 0.9, lr 0.01), the loop a PyTorch user writes; for
//! `infer`, an eval-mode forward under `c10::InferenceMode`. Both end with a device synchronize,
//! so the step returns only when the device has finished the batch. Inputs and labels are made
//! once, on the device, from the seed, and reused by every batch.
//!
//! With `execution: cuda-graph` the step is captured once in a CUDA graph while it is built
//! (after [`GRAPH_WARMUP_STEPS`] eager steps on a side stream, as PyTorch's documentation
//! captures a whole network), and every batch is then one replay and the synchronize: the same
//! kernels on the same static tensors, without a kernel launch per operation from the host. A
//! model that cannot be captured fails there, before the barrier.
//!
//! The step runs inside the timed window: it logs nothing and takes no locks, and for the
//! ResNets and MobileNetV2 it builds no Rust collection either; libtorch's own per-op work is
//! all there is. (tch's wrappers of list-taking ops, such as the concatenations inside
//! DenseNet, Inception and SqueezeNet, and `CModule::forward_ts` for a TorchScript model, build
//! a small Vec of tensor pointers per call; a CUDA-graph replay builds nothing.) tch's non-`f_`
//! methods (the built-in models' layers use them) panic on a libtorch error; the step catches
//! that at its boundary and returns the message as a [`WorkloadError`].

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;

use coload_cohort_schema::{
    DeviceKind, Execution, MemoryFormat, MemoryInfo, MemorySource, ModelFile, Precision,
    TORCHSCRIPT_MODEL, Workload,
};
use tch::nn::{ModuleT, VarStore};
use tch::{Device, Kind, Reduction, Tensor};

use crate::error::{WorkloadError, from_panic};
use crate::options::{ModelSource, WorkloadOptions, validate};
use crate::shim::{self, CapturePhase};
use crate::torchscript::{self, Script};
use coload_cohort_schema::DeviceChoice;

/// SGD learning rate.
pub const LEARNING_RATE: f64 = 0.01;
/// SGD momentum.
pub const MOMENTUM: f64 = 0.9;
/// Eager steps run on the capture's side stream before a CUDA graph is captured (PyTorch's
/// documentation uses 3 for whole-network capture): cuDNN autotuning, cuBLAS workspaces and the
/// optimizer's momentum buffers are made there, outside the capture.
pub const GRAPH_WARMUP_STEPS: u32 = 3;

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

/// How the workload runs, for `worker.json`'s `config`, `device` and `runtime`.
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
    /// The model's name for `config.model` (`resnet18`, ..., or `torchscript`).
    pub model: String,
    /// Trainable parameters of the model, in elements.
    pub parameter_count: u64,
    /// The TorchScript file's identity, for `config.model_file`.
    pub model_file: Option<ModelFile>,
    /// Eager, or one CUDA-graph replay per batch.
    pub execution: Execution,
}

/// How a step's tensors are laid out in memory ([`ModelStep::memory_layout`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryLayout {
    /// The model's four-dimensional variables (convolution weights).
    pub weights_4d: usize,
    /// How many of them are dense in channels-last (NHWC) order.
    pub weights_channels_last: usize,
    /// How many of them are dense in row-major (NCHW) order. A 1x1 convolution's weight is
    /// dense in both orders, so it counts in both.
    pub weights_contiguous: usize,
    /// Whether the synthetic input batch is dense in channels-last order.
    pub inputs_channels_last: bool,
    /// Whether the synthetic input batch is dense in row-major order.
    pub inputs_contiguous: bool,
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

/// The network a step runs.
#[derive(Debug)]
enum Net {
    /// A built-in model (its variables live in the step's `VarStore`).
    Zoo(Box<dyn ModuleT>),
    /// A TorchScript module.
    Script(Script),
}

impl Net {
    /// The logits of `xs`. A built-in model's layers panic on a libtorch error: call under
    /// [`catching`].
    fn forward(&self, xs: &Tensor, train: bool) -> Result<Tensor, WorkloadError> {
        match self {
            Net::Zoo(m) => Ok(m.forward_t(xs, train)),
            Net::Script(s) => s.forward(xs),
        }
    }
}

/// One batch of a model on a fixed synthetic batch. Implements [`coload_timing::Step`].
#[derive(Debug)]
pub struct ModelStep {
    /// The captured step, with `execution: cuda-graph`.
    graph: Option<shim::CudaGraph>,
    options: WorkloadOptions,
    device: Device,
    cuda_index: Option<usize>,
    guard: InferenceGuard,
    /// Keeps the variables alive (the model's closures hold shallow copies).
    vs: VarStore,
    net: Net,
    model_file: Option<ModelFile>,
    parameter_count: u64,
    inputs: Tensor,
    labels: Tensor,
    sgd: Option<shim::Sgd>,
    last_loss: Option<Tensor>,
    /// Inference's logits as the graph writes them on every replay (cuda-graph only).
    graph_logits: Option<Tensor>,
    batch_size: u32,
}

/// The name this step had when ResNet18 was the only model.
pub type ResNetStep = ModelStep;

/// Serializes seeded construction: libtorch's default generator is process-wide, so two steps
/// built at once on different threads would interleave their draws. Only construction takes it,
/// never a step.
pub(crate) static BUILD_LOCK: Mutex<()> = Mutex::new(());

/// Runs `f`, turning a tch panic into a typed error.
fn catching<T>(f: impl FnOnce() -> Result<T, WorkloadError>) -> Result<T, WorkloadError> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|payload| Err(from_panic(payload.as_ref())))
}

pub(crate) fn resolve_device(choice: DeviceChoice) -> Result<Device, WorkloadError> {
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

/// Refuses a CUDA-graph step where it cannot run, before anything is built.
pub(crate) fn check_execution(execution: Execution, device: Device) -> Result<(), WorkloadError> {
    if execution != Execution::CudaGraph {
        return Ok(());
    }
    if !device.is_cuda() {
        return Err(WorkloadError::InvalidOption(
            "--execution cuda-graph needs a CUDA device, and this step runs on the CPU; use \
             --execution eager on the CPU"
                .into(),
        ));
    }
    if !shim::cuda_graph_built() {
        return Err(WorkloadError::CudaGraph(
            "this build has no CUDA graph support (its libtorch has no libtorch_cuda.so); \
             rebuild against a CUDA libtorch, or use --execution eager"
                .into(),
        ));
    }
    Ok(())
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

impl ModelStep {
    /// Builds the model, the optimizer (training) and the synthetic batch on the device, and,
    /// with `execution: cuda-graph`, captures the step.
    pub fn new(options: &WorkloadOptions) -> Result<Self, WorkloadError> {
        Self::with_guard(options, InferenceGuard::InferenceMode)
    }

    /// [`ModelStep::new`] with an explicit inference guard (to measure `no_grad` against
    /// `InferenceMode`). When the shim cannot enter `InferenceMode`, `no_grad` runs instead and
    /// [`ModelStep::info`] says so.
    pub fn with_guard(
        options: &WorkloadOptions,
        guard: InferenceGuard,
    ) -> Result<Self, WorkloadError> {
        validate(options)?;
        if let ModelSource::Zoo(model) = options.model {
            model.check_image_size(options.image_size)?;
        }
        let device = resolve_device(options.device)?;
        check_execution(options.execution, device)?;
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
        let mut step = {
            let _build = BUILD_LOCK
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            catching(|| Self::build(options, device, cuda_index, guard))?
        };
        if options.execution == Execution::CudaGraph {
            step.capture()?;
        }
        Ok(step)
    }

    fn build(
        options: &WorkloadOptions,
        device: Device,
        cuda_index: Option<usize>,
        guard: InferenceGuard,
    ) -> Result<Self, WorkloadError> {
        if device.is_cuda() {
            tch::Cuda::cudnn_set_benchmark(true);
        }
        tch::manual_seed(options.seed as i64);
        let vs = VarStore::new(device);
        let num_classes = i64::from(options.num_classes());
        // Built-in weights first, then the batch, so the weights depend on the seed alone.
        let zoo = match &options.model {
            ModelSource::Zoo(model) => Some(model.build(&vs.root(), num_classes)),
            ModelSource::TorchScript(_) => None,
        };
        let b = i64::from(options.batch_size);
        let [c, h, w] = options.input_shape().map(i64::from);
        let mut inputs = Tensor::f_randn([b, c, h, w], (Kind::Float, device))?;
        let labels = Tensor::f_randint(num_classes, [b], (Kind::Int64, device))?;
        if options.memory_format == MemoryFormat::ChannelsLast {
            // Weights before the optimizer takes its handles and before any capture, as a
            // PyTorch user calls `model.to(memory_format=torch.channels_last)` before making the
            // optimizer; the batch once, so that every step (and a serve worker's views of its
            // first rows) reads NHWC.
            let mut variables: Vec<Tensor> = vs.variables().into_values().collect();
            shim::channels_last_(&mut variables)?;
            shim::channels_last_(std::slice::from_mut(&mut inputs))?;
        }
        let (net, model_file) = match (&options.model, zoo) {
            (_, Some(zoo)) => (Net::Zoo(zoo), None),
            (ModelSource::TorchScript(spec), None) => {
                let (script, file) =
                    torchscript::load(spec, options.workload, device, &vs, &inputs)?;
                (Net::Script(script), Some(file))
            }
            (ModelSource::Zoo(_), None) => unreachable!("a built-in model was built above"),
        };
        let parameter_count = match &net {
            Net::Zoo(_) => vs
                .trainable_variables()
                .iter()
                .map(|t| t.numel() as u64)
                .sum(),
            Net::Script(script) => script.parameter_count(&vs)?,
        };
        let sgd = match options.workload {
            Workload::Train => {
                let mut params = vs.trainable_variables();
                Some(shim::Sgd::new(&mut params, LEARNING_RATE, MOMENTUM)?)
            }
            Workload::Infer
            | Workload::Serve
            | Workload::Hog
            | Workload::Decode
            | Workload::ServeLlm => None,
        };
        if let Some(index) = cuda_index {
            shim::synchronize(index)?;
        }
        Ok(ModelStep {
            graph: None,
            options: options.clone(),
            device,
            cuda_index,
            guard,
            vs,
            net,
            model_file,
            parameter_count,
            inputs,
            labels,
            sgd,
            last_loss: None,
            graph_logits: None,
            batch_size: options.batch_size,
        })
    }

    /// Captures the step in a CUDA graph (see [`GRAPH_WARMUP_STEPS`] and the shim's
    /// `coload_graph_capture`). Training captures forward, loss, backward and the SGD step with
    /// the gradients set to none before capture, so backward writes them into the graph's own
    /// memory on every replay; inference captures the forward under its guard.
    fn capture(&mut self) -> Result<(), WorkloadError> {
        let index = self.cuda_index.ok_or_else(|| {
            WorkloadError::InvalidOption("a CUDA graph needs a CUDA device".into())
        })?;
        let workload = self.options.workload;
        let mut captured_loss = None;
        let mut captured_logits = None;
        let mut failed_in_capture = false;
        let graph = shim::CudaGraph::capture(index, GRAPH_WARMUP_STEPS, 0, |phase| {
            let result = match (workload, phase) {
                (Workload::Train, CapturePhase::Warmup) => self.train_step(),
                (Workload::Train, CapturePhase::Prepare) => self.zero_grad(),
                (Workload::Train, CapturePhase::Capture) => self
                    .forward_backward_update()
                    .map(|loss| captured_loss = Some(loss)),
                (Workload::Infer | Workload::Serve, CapturePhase::Warmup) => self.infer_step(),
                (Workload::Infer | Workload::Serve, CapturePhase::Capture) => self
                    .infer_logits()
                    .map(|logits| captured_logits = Some(logits)),
                (Workload::Infer | Workload::Serve, CapturePhase::Prepare) => Ok(()),
                (Workload::Hog | Workload::Decode | Workload::ServeLlm, _) => {
                    Err(crate::options::not_a_model_step())
                }
            };
            failed_in_capture = result.is_err() && phase == CapturePhase::Capture;
            result
        })
        .map_err(|e| match e {
            // A libtorch error raised while recording is a capture failure, whatever its text.
            WorkloadError::Libtorch(m) if failed_in_capture => WorkloadError::CudaGraph(format!(
                "the {} step cannot be captured in a CUDA graph (an operation that synchronizes \
                 with the host, or one CUDA graphs do not support); use --execution eager: {m}",
                self.model_name()
            )),
            other => other,
        })?;
        // The loss (training) or logits (inference) the graph writes on every replay.
        self.last_loss = captured_loss;
        self.graph_logits = captured_logits;
        self.graph = Some(graph);
        Ok(())
    }

    /// Device, versions, guards and the model's identity, for `worker.json`.
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
            inference_guard: (!self.options.workload.trains())
                .then(|| self.guard.as_str().to_owned()),
            cudnn_benchmark: self.device.is_cuda(),
            torch_threads: catch_unwind(tch::get_num_threads).map_or(0, |n| n.max(0) as u32),
            model: self.model_name().to_owned(),
            parameter_count: self.parameter_count,
            model_file: self.model_file.clone(),
            execution: self.options.execution,
        }
    }

    /// The model's name for `config.model`.
    fn model_name(&self) -> &'static str {
        match &self.options.model {
            ModelSource::Zoo(model) => model.as_str(),
            ModelSource::TorchScript(_) => TORCHSCRIPT_MODEL,
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
        self.parameter_count as i64
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

    /// How the step's tensors are laid out: its four-dimensional variables (weights) and how
    /// many of them are channels-last, and whether the input batch is. Outside the window only.
    #[must_use]
    pub fn memory_layout(&self) -> MemoryLayout {
        let four_d: Vec<Tensor> = self
            .vs
            .variables()
            .into_values()
            .filter(|t| t.dim() == 4)
            .collect();
        MemoryLayout {
            weights_4d: four_d.len(),
            weights_channels_last: four_d.iter().filter(|t| shim::is_channels_last(t)).count(),
            weights_contiguous: four_d.iter().filter(|t| t.is_contiguous()).count(),
            inputs_channels_last: shim::is_channels_last(&self.inputs),
            inputs_contiguous: self.inputs.is_contiguous(),
        }
    }

    /// Deep copies of every variable (weights and batch-norm statistics of a built-in model;
    /// the parameters of a TorchScript model being trained), by name. Outside the window only.
    #[must_use]
    pub fn variables(&self) -> Vec<(String, Tensor)> {
        let mut vars: Vec<(String, Tensor)> = self
            .vs
            .variables()
            .into_iter()
            .map(|(name, t)| (name, t.detach().copy()))
            .collect();
        vars.sort_by(|a, b| a.0.cmp(&b.0));
        vars
    }

    /// Inference's logits, to check that a replay computes what an eager forward computes:
    /// with `execution: cuda-graph`, a copy of what the last replay wrote; eagerly, one new
    /// forward as [`Step::step`](coload_timing::Step::step) runs it. Outside the window only.
    pub fn logits(&mut self) -> Result<Tensor, WorkloadError> {
        if let Some(logits) = &self.graph_logits {
            return catching(|| Ok(logits.detach().copy()));
        }
        let logits = self.infer_logits()?;
        catching(|| Ok(logits.detach().copy()))
    }

    /// Runs one inference forward the way [`Step::step`](coload_timing::Step::step) does and
    /// reports whether it recorded autograd history. Outside the window only.
    pub fn probe_inference(&mut self) -> Result<OutputProbe, WorkloadError> {
        let mut probe = None;
        let (net, inputs) = (&self.net, &self.inputs);
        self.run_guarded(self.infer_flags(), || {
            let out = net.forward(inputs, false)?;
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
        let no_grad = !self.options.workload.trains() && self.guard == InferenceGuard::NoGrad;
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

    fn zero_grad(&mut self) -> Result<(), WorkloadError> {
        self.sgd
            .as_mut()
            .ok_or_else(|| WorkloadError::InvalidOption("no optimizer for training".into()))?
            .zero_grad()
    }

    /// Forward, loss, backward and the SGD update; returns the loss (still on the device).
    fn forward_backward_update(&mut self) -> Result<Tensor, WorkloadError> {
        let (net, inputs, labels) = (&self.net, &self.inputs, &self.labels);
        let mut loss = None;
        let forward = || {
            let logits = net.forward(inputs, true)?;
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
        self.run_guarded(self.autocast_flag(), forward)?;
        let loss = loss.ok_or_else(|| WorkloadError::Libtorch("forward did not run".into()))?;
        catching(|| loss.f_backward().map_err(WorkloadError::from))?;
        self.sgd
            .as_mut()
            .ok_or_else(|| WorkloadError::InvalidOption("no optimizer for training".into()))?
            .step()?;
        Ok(loss)
    }

    fn train_step(&mut self) -> Result<(), WorkloadError> {
        self.zero_grad()?;
        let loss = self.forward_backward_update()?;
        self.last_loss = Some(loss);
        Ok(())
    }

    /// The synthetic input batch (`batch_size` images), for views of a smaller batch.
    pub(crate) fn inputs(&self) -> &Tensor {
        &self.inputs
    }

    /// One inference forward on `inputs` (a view of the first rows of the batch), ending with a
    /// device synchronize: the serve workload's batch.
    pub(crate) fn infer_on(&self, inputs: &Tensor) -> Result<(), WorkloadError> {
        let net = &self.net;
        self.run_guarded(self.infer_flags(), || {
            let _out = net.forward(inputs, false)?;
            Ok(())
        })?;
        if let Some(index) = self.cuda_index {
            shim::synchronize(index)?;
        }
        Ok(())
    }

    fn infer_step(&mut self) -> Result<(), WorkloadError> {
        let (net, inputs) = (&self.net, &self.inputs);
        self.run_guarded(self.infer_flags(), || {
            let _out = net.forward(inputs, false)?;
            Ok(())
        })
    }

    /// One inference forward under the inference guard, keeping its logits.
    fn infer_logits(&mut self) -> Result<Tensor, WorkloadError> {
        let (net, inputs) = (&self.net, &self.inputs);
        let mut logits = None;
        self.run_guarded(self.infer_flags(), || {
            logits = Some(net.forward(inputs, false)?);
            Ok(())
        })?;
        logits.ok_or_else(|| WorkloadError::Libtorch("the forward did not run".into()))
    }
}

impl coload_timing::Step for ModelStep {
    type Error = WorkloadError;

    fn step(&mut self) -> Result<u32, WorkloadError> {
        match (&mut self.graph, self.options.workload) {
            (Some(graph), _) => graph.replay()?,
            (None, Workload::Train) => self.train_step()?,
            (None, Workload::Infer | Workload::Serve) => self.infer_step()?,
            (None, Workload::Hog | Workload::Decode | Workload::ServeLlm) => {
                return Err(crate::options::not_a_model_step());
            }
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
            ..WorkloadOptions::default()
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
        let (net, inputs) = (&step.net, &step.inputs);
        step.run_guarded(step.autocast_flag(), || {
            kind = Some(net.forward(inputs, false)?.kind());
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
    fn cuda_graphs_are_refused_on_the_cpu_before_anything_is_built() {
        for workload in [Workload::Train, Workload::Infer] {
            let mut o = tiny(workload);
            o.execution = Execution::CudaGraph;
            let err = ModelStep::new(&o).unwrap_err();
            assert_eq!(
                err.kind(),
                coload_cohort_schema::FailureKind::InvalidOption,
                "{err}"
            );
            assert!(
                err.to_string()
                    .contains("--execution cuda-graph needs a CUDA device")
            );
        }
        // `auto` without a GPU resolves to the CPU and is refused the same way.
        if !tch::Cuda::is_available() {
            let mut o = tiny(Workload::Infer);
            o.device = DeviceChoice::Auto;
            o.execution = Execution::CudaGraph;
            assert_eq!(
                ModelStep::new(&o).unwrap_err().kind(),
                coload_cohort_schema::FailureKind::InvalidOption
            );
        }
    }

    #[test]
    fn the_shim_has_cuda_graphs_exactly_when_libtorch_has_cuda() {
        assert_eq!(
            shim::cuda_graph_built(),
            env!("COLOAD_LIBTORCH_CUDA_EXPECTED") == "1"
        );
    }

    #[test]
    fn versions_are_reported_and_decoded() {
        let step = ResNetStep::new(&tiny(Workload::Infer)).unwrap();
        assert!(step.info().libtorch_version.starts_with("2.11"));
        assert!(step.info().torch_threads >= 1);
        assert_eq!(step.parameter_count(), 11_689_512);
        let info = step.info();
        assert_eq!(info.model, "resnet18");
        assert_eq!(info.parameter_count, 11_689_512);
        assert_eq!(info.execution, Execution::Eager);
        assert!(info.model_file.is_none());
        assert_eq!(cuda_version_text(13000), "13.0");
        assert_eq!(cuda_version_text(12080), "12.8");
        assert_eq!(cudnn_version_text(91300), "9.13.0");
        assert_eq!(cudnn_version_text(8902), "8.9.2");
    }
}
