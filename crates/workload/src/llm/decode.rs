//! The closed-loop `decode` step: the LLM analogue of `infer`.
//!
//! A batch of B sequences prefills a fixed random prompt of P tokens, then generates greedily
//! (argmax, on the device) one token per step with the KV cache until each sequence has G
//! tokens, then resets the cache and starts again with the same prompt. Each call of
//! [`coload_timing::Step::step`] is one iteration, a prefill or one decode step, and ends with
//! a device synchronize; it returns B, the tokens it generated, so samples/s is generated
//! tokens/s. [`DecodeStep::phase`] and `coload_timing::DecodeCycle` say which iteration comes
//! next; [`DecodeStep::restart`] puts the cycle at a prefill (before the window).
//!
//! With `execution: cuda-graph` the decode iteration is captured once in a CUDA graph (the
//! shim's whole-step capture, after warmup on a side stream) over static tensors: the latest
//! tokens `[B, 1]` in, the logits out, the argmax written back into the tokens and the
//! positions advanced inside the graph, attention over the whole context under the position
//! mask (a graph cannot change shape). Each decode iteration is then one replay. The prefill
//! stays eager: it runs once per cycle and is compute-bound, not launch-bound.

use std::panic::catch_unwind;

use coload_cohort_schema::{
    DecodeAttention, DeviceChoice, DeviceKind, Execution, MemoryInfo, MemorySource, Precision,
};
use coload_timing::{DecodeCycle, IterationKind, Step};
use tch::{Device, Kind, Tensor};

use crate::error::{LlmError, WorkloadError};
use crate::llm::config::LlmPreset;
use crate::llm::model::{LlmModel, LlmPlacement, at_least_one};
use crate::shim::{self, CapturePhase};
use crate::step::{
    GRAPH_WARMUP_STEPS, WorkloadInfo, check_execution, cuda_version_text, cudnn_version_text,
    resolve_device,
};

/// What the closed-loop decode workload runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeOptions {
    /// The model.
    pub model: LlmPreset,
    /// Where to run.
    pub device: DeviceChoice,
    /// Sequences decoded together (B).
    pub batch_size: u32,
    /// Prompt length (P), tokens.
    pub prompt_tokens: u32,
    /// Tokens generated per sequence and cycle (G), the first by the prefill.
    pub generate_tokens: u32,
    /// fp32 or bf16; `None`: bf16 on CUDA, fp32 on the CPU.
    pub precision: Option<Precision>,
    /// Seed of the weights and the prompt.
    pub seed: u64,
    /// Eager, or each decode iteration one CUDA-graph replay.
    pub execution: Execution,
    /// Which kernel decode attends through; `None`: the model's default
    /// ([`LlmModel::decode_attention`]).
    pub attention: Option<DecodeAttention>,
}

impl Default for DecodeOptions {
    /// GPT-2 small, 8 sequences of a 128-token prompt generating 128 tokens, on the best
    /// device, eager.
    fn default() -> Self {
        DecodeOptions {
            model: LlmPreset::Gpt2Small,
            device: DeviceChoice::Auto,
            batch_size: 8,
            prompt_tokens: 128,
            generate_tokens: 128,
            precision: None,
            seed: 0,
            execution: Execution::Eager,
            attention: None,
        }
    }
}

/// The closed-loop decode workload. Implements [`coload_timing::Step`].
#[derive(Debug)]
pub struct DecodeStep {
    /// The captured decode iteration, with `execution: cuda-graph`.
    graph: Option<shim::CudaGraph>,
    /// The logits the graph writes on every replay.
    graph_logits: Option<Tensor>,
    model: LlmModel,
    options: DecodeOptions,
    cycle: DecodeCycle,
    /// The prompt, `[B, P]` int64 on the device, drawn once from the seed.
    prompt: Tensor,
    /// Each sequence's latest token, `[B, 1]` int64 on the device (the decode's input).
    tokens: Tensor,
    /// The iteration of the cycle the next step runs (0: the prefill).
    next: u32,
    batch: i64,
    cuda_index: Option<usize>,
}

impl DecodeStep {
    /// Builds the model, its cache for `batch_size` sequences and the prompt on the device;
    /// with `execution: cuda-graph`, captures the decode iteration.
    pub fn new(options: &DecodeOptions) -> Result<Self, LlmError> {
        let config = options.model.config();
        at_least_one("the batch size", i64::from(options.batch_size))?;
        at_least_one("prompt tokens", i64::from(options.prompt_tokens))?;
        at_least_one("generated tokens", i64::from(options.generate_tokens))?;
        let cycle = DecodeCycle::new(
            options.prompt_tokens,
            options.generate_tokens,
            config.context,
        )
        .map_err(|_| LlmError::PromptTooLong {
            prompt_tokens: i64::from(options.prompt_tokens),
            generate_tokens: i64::from(options.generate_tokens),
            context_tokens: i64::from(config.context),
        })?;
        let device = resolve_device(options.device)?;
        check_execution(options.execution, device)?;
        let cuda_index = match device {
            Device::Cuda(n) => Some(n),
            _ => None,
        };
        let placement = LlmPlacement::new(device, options.precision);
        let batch = i64::from(options.batch_size);
        let mut model = LlmModel::new(&config, placement, batch, options.seed)?;
        if let Some(attention) = options.attention {
            model.set_decode_attention(attention)?;
        }
        let prompt = {
            let _build = crate::step::BUILD_LOCK
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            tch::manual_seed(options.seed.wrapping_add(1) as i64);
            Tensor::f_randint(
                i64::from(config.vocab),
                [batch, i64::from(options.prompt_tokens)],
                (Kind::Int64, Device::Cpu),
            )?
            .f_to_device(device)?
        };
        let tokens = Tensor::f_zeros([batch, 1], (Kind::Int64, device))?;
        let mut step = DecodeStep {
            graph: None,
            graph_logits: None,
            model,
            options: options.clone(),
            cycle,
            prompt,
            tokens,
            next: 0,
            batch,
            cuda_index,
        };
        if options.execution == Execution::CudaGraph {
            step.capture()?;
        }
        if let Some(index) = cuda_index {
            shim::synchronize(index)?;
        }
        Ok(step)
    }

    /// Captures the decode iteration: each warmup prefills and decodes once eagerly-but-static
    /// on the capture's side stream (allocator pools, cuBLAS workspaces), then one decode is
    /// recorded. The cache and positions it leaves behind are reset by the next prefill.
    fn capture(&mut self) -> Result<(), LlmError> {
        let index = self.cuda_index.ok_or_else(|| {
            WorkloadError::InvalidOption("a CUDA graph needs a CUDA device".into())
        })?;
        let batch = self.batch;
        let mut captured = None;
        let what = format!("the {} decode step", self.options.model);
        let (model, prompt, tokens) = (&mut self.model, &self.prompt, &mut self.tokens);
        let graph = capture_decode(index, &what, |phase| {
            match phase {
                CapturePhase::Warmup => {
                    model.reset()?;
                    let logits = model.prefill(prompt)?;
                    tokens.f_copy_(&logits.f_argmax(-1, true)?)?;
                    let logits = model.decode_static(tokens, batch)?;
                    tokens.f_copy_(&logits.f_argmax(-1, true)?)?;
                }
                CapturePhase::Prepare => {}
                CapturePhase::Capture => {
                    let logits = model.decode_static(tokens, batch)?;
                    tokens.f_copy_(&logits.f_argmax(-1, true)?)?;
                    captured = Some(logits);
                }
            }
            Ok(())
        })?;
        self.graph = Some(graph);
        self.graph_logits = captured;
        self.model.reset()?;
        self.next = 0;
        Ok(())
    }

    /// Puts the cycle back at its prefill: call right before the window, so that batch `i` of
    /// the window is iteration `i mod G` of a cycle ([`DecodeCycle::phase`]).
    pub fn restart(&mut self) {
        self.next = 0;
    }

    /// The phase of the next step and the positions each sequence's cache holds before it.
    #[must_use]
    pub fn phase(&self) -> (IterationKind, u32) {
        self.cycle.phase(u64::from(self.next))
    }

    /// The cycle (P and G).
    #[must_use]
    pub fn cycle(&self) -> DecodeCycle {
        self.cycle
    }

    /// The bytes a decode step of this cycle must read, on average over the cycle's decode
    /// steps ([`crate::LlmConfig::decode_cycle_read_bytes`] in the model's precision); `None`
    /// when a cycle has no decode step.
    #[must_use]
    pub fn decode_read_bytes(&self) -> Option<u64> {
        let o = &self.options;
        self.model.config().decode_cycle_read_bytes(
            self.model.placement().bytes_per_element(),
            o.batch_size,
            o.prompt_tokens,
            o.generate_tokens,
        )
    }

    /// The model.
    #[must_use]
    pub fn model(&self) -> &LlmModel {
        &self.model
    }

    /// The prompt every cycle prefills, `[B, P]` int64 on the device.
    pub fn prompt(&self) -> &Tensor {
        &self.prompt
    }

    /// The options this step was built with.
    #[must_use]
    pub fn options(&self) -> &DecodeOptions {
        &self.options
    }

    /// Each sequence's latest token, copied to the host (outside the window only).
    pub fn tokens(&self) -> Result<Vec<i64>, LlmError> {
        Ok(
            Vec::<i64>::try_from(&self.tokens.f_flatten(0, -1)?.f_to_device(Device::Cpu)?)
                .map_err(WorkloadError::from)?,
        )
    }

    /// The logits the CUDA graph wrote on its last replay, copied (outside the window only).
    pub fn graph_logits(&self) -> Result<Option<Tensor>, LlmError> {
        Ok(self
            .graph_logits
            .as_ref()
            .map(|l| {
                l.f_detach()
                    .and_then(|d| d.f_contiguous()?.f_to_device(Device::Cpu))
            })
            .transpose()?)
    }

    /// Device, versions and the model's identity, for `worker.json`.
    #[must_use]
    pub fn info(&self) -> WorkloadInfo {
        llm_info(
            &self.model,
            self.cuda_index,
            self.options.model,
            self.options.execution,
        )
    }

    /// Peak bytes the CUDA caching allocator reserved (`None` on CPU).
    #[must_use]
    pub fn peak_memory(&self) -> Option<MemoryInfo> {
        llm_peak_memory(self.cuda_index)
    }

    /// Profiles `steps` decode iterations of a fresh cycle: restarts the cycle, runs its
    /// prefill outside the profiler, then runs `steps` decode iterations (each a replay with
    /// `execution: cuda-graph`) under libtorch's profiler, device activities included on CUDA.
    /// Writes the chrome trace to `trace` when given. The cycle stays where the steps left it;
    /// call [`DecodeStep::restart`] before a timed window. `steps` must be 1 to G - 1 (the
    /// decode iterations of one cycle).
    pub fn profile_decode(
        &mut self,
        steps: u32,
        trace: Option<&std::path::Path>,
    ) -> Result<crate::profile::Profile, LlmError> {
        let most = self.cycle.generate_tokens() - 1;
        if steps == 0 || steps > most {
            return Err(LlmError::Workload(WorkloadError::InvalidOption(format!(
                "cannot profile {steps} decode steps: a cycle of {} generated tokens has {most} \
                 (profile 1 to {most})",
                self.cycle.generate_tokens()
            ))));
        }
        self.restart();
        self.step()?;
        let profiler = crate::profile::Profiler::start(self.cuda_index.is_some())?;
        for _ in 0..steps {
            self.step()?;
        }
        Ok(profiler.stop(trace)?)
    }

    fn prefill(&mut self) -> Result<(), LlmError> {
        self.model.reset()?;
        let logits = self.model.prefill(&self.prompt)?;
        self.tokens.f_copy_(&logits.f_argmax(-1, true)?)?;
        Ok(())
    }

    fn decode(&mut self) -> Result<(), LlmError> {
        if let Some(graph) = &mut self.graph {
            // The host's checks and lengths as an eager step keeps them; the graph advances
            // the device's positions itself.
            self.model.check_decode(&self.tokens)?;
            graph.replay()?;
            self.model.advance_host(self.batch);
            return Ok(());
        }
        let logits = self.model.decode_step(&self.tokens)?;
        let _no_grad = tch::no_grad_guard();
        self.tokens.f_copy_(&logits.f_argmax(-1, true)?)?;
        Ok(())
    }
}

/// Captures an LLM decode iteration in a CUDA graph on CUDA device `index`: `f` runs at each
/// [`CapturePhase`] (`GRAPH_WARMUP_STEPS` warmups on the capture's side stream, then the
/// recorded step). A failure while recording is a [`WorkloadError::CudaGraph`] naming `what`
/// (`the gpt2-small decode step`) and saying to run eager; one in a warmup is returned as is.
pub(crate) fn capture_decode<F>(
    index: usize,
    what: &str,
    mut f: F,
) -> Result<shim::CudaGraph, LlmError>
where
    F: FnMut(CapturePhase) -> Result<(), LlmError>,
{
    let mut failure: Option<LlmError> = None;
    let mut failed_in_capture = false;
    let graph = shim::CudaGraph::capture(index, GRAPH_WARMUP_STEPS, 0, |phase| {
        let result = f(phase);
        failed_in_capture = result.is_err() && phase == CapturePhase::Capture;
        result.map_err(|e| {
            let shown = WorkloadError::Libtorch(e.to_string());
            failure = Some(e);
            shown
        })
    });
    graph.map_err(|e| match (failure, failed_in_capture) {
        (Some(inner), true) => LlmError::Workload(WorkloadError::CudaGraph(format!(
            "{what} cannot be captured in a CUDA graph; use --execution eager: {inner}"
        ))),
        (Some(inner), false) => inner,
        (None, _) => LlmError::Workload(e),
    })
}

/// An LLM step's device, versions and model identity, for `worker.json` (the decode and the
/// serve step alike).
pub(crate) fn llm_info(
    model: &LlmModel,
    cuda_index: Option<usize>,
    preset: LlmPreset,
    execution: Execution,
) -> WorkloadInfo {
    let device = model.placement().device;
    let (cudart, cudnn) = if device.is_cuda() {
        shim::cuda_versions()
    } else {
        (None, None)
    };
    WorkloadInfo {
        device_kind: if device.is_cuda() {
            DeviceKind::Cuda
        } else {
            DeviceKind::Cpu
        },
        cuda_index,
        libtorch_version: shim::torch_version(),
        cuda_version: cudart.map(cuda_version_text),
        cudnn_version: cudnn.map(cudnn_version_text),
        inference_guard: Some(crate::step::InferenceGuard::NoGrad.as_str().to_owned()),
        cudnn_benchmark: false,
        torch_threads: catch_unwind(tch::get_num_threads).map_or(0, |n| n.max(0) as u32),
        model: preset.as_str().to_owned(),
        parameter_count: model.parameter_count(),
        model_file: None,
        execution,
    }
}

/// Peak bytes the CUDA caching allocator reserved on device `cuda_index` (`None` on CPU).
pub(crate) fn llm_peak_memory(cuda_index: Option<usize>) -> Option<MemoryInfo> {
    let index = cuda_index?;
    let peak = shim::peak_reserved_bytes(index).ok().flatten()?;
    Some(MemoryInfo {
        peak_device_bytes: peak,
        source: MemorySource::CachingAllocator,
    })
}

impl Step for DecodeStep {
    type Error = LlmError;

    fn step(&mut self) -> Result<u32, LlmError> {
        if self.next == 0 {
            self.prefill()?;
        } else {
            self.decode()?;
        }
        if let Some(index) = self.cuda_index {
            shim::synchronize(index)?;
        }
        self.next = (self.next + 1) % self.cycle.generate_tokens();
        Ok(self.options.batch_size)
    }
}
