//! The worker's command-line protocol: one definition of the flags that `bench-worker` parses
//! and a launcher passes on to every worker it starts.
//!
//! Both binaries flatten [`WorkerFlags`] into their own clap parsers, and a launcher turns the
//! values back into a worker's argv with [`crate::to_argv`], which is derived from the same
//! struct through serde. A flag added to [`WorkerFlags`] therefore reaches every worker, every
//! plan ([`crate::plan`]) and every manifest without anyone rebuilding an argv by hand.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use coload_cohort_schema::{
    ByteSize, DEFAULT_GPM_INTERVAL_S, DeclaredShare, DeviceChoice, Execution, ExecutionDeclaration,
    InputShape, MAX_GPM_INTERVAL_S, MIB, MIN_GPM_INTERVAL_S, MemoryFormat, Mode, ModelDeclaration,
    Precision, TimesliceInterval, Workload,
};

use crate::error::SpecError;
use crate::llm::{
    DEFAULT_LLM_MODEL, DEFAULT_OUTPUT_TOKENS, DEFAULT_PROMPT_TOKENS, llm_context_tokens,
    llm_model_names,
};
use crate::seconds::Seconds;

/// The largest `--max-batch` a serve worker takes (the batcher's limit in `coload-timing`,
/// which checks it again where it builds its batch sizes).
pub const MAX_BATCH: u32 = 1024;

/// The most untimed batches before the barrier: the article's protocol takes 20, and a worker
/// keeps a record of each, so an unbounded count would allocate without limit.
pub const MAX_WARMUP_BATCHES: u32 = 100_000;

/// The highest offered load, requests per second, of an open-loop worker or a capacity search
/// (far above what one GPU serves; the search names folders after its rates).
pub const MAX_RATE_PER_S: f64 = 1e6;

/// The model a worker runs when `--model` is not given: the article's.
pub const DEFAULT_MODEL: &str = "resnet18";

/// The measurement flags every worker of a cohort takes, and that the launcher passes on
/// unchanged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, clap::Args)]
pub struct WorkerFlags {
    /// How the workers share the GPU: exclusive, mig, timeslice, mig-timeslice or mps
    #[arg(long)]
    pub mode: Mode,

    /// Length of the timed window, seconds
    #[arg(long, default_value_t = Seconds::whole(45))]
    pub window_s: Seconds,

    /// Untimed batches before the barrier
    #[arg(long, default_value_t = 20)]
    pub warmup_batches: u32,

    /// Time from the leader's decision to the common start, seconds
    #[arg(long, default_value_t = Seconds::whole(5))]
    pub start_lead_s: Seconds,

    /// Seconds to wait at the barrier for the other workers before failing
    #[arg(long, default_value_t = Seconds::whole(600))]
    pub join_timeout_s: Seconds,

    /// Device: auto (first CUDA device, else CPU), cpu or cuda:N
    #[arg(long, default_value_t = DeviceChoice::Auto)]
    pub device: DeviceChoice,

    /// Images per batch (decode: sequences decoded together)
    #[arg(long, default_value_t = 32)]
    pub batch_size: u32,

    /// Height and width of the synthetic images
    #[arg(long, default_value_t = 224)]
    pub image_size: u32,

    /// Numeric precision: fp32 or bf16 (default fp32, the article's protocol; decode: bf16 on
    /// CUDA, fp32 on the CPU)
    #[arg(long)]
    pub precision: Option<Precision>,

    /// Memory layout of a built-in vision model's weights and input batch: contiguous (NCHW,
    /// the default) or channels-last (NHWC, how PyTorch users run convolutional networks on
    /// tensor cores, usually with --precision bf16); not for LLM workloads or --model-file
    #[arg(long, value_name = "FORMAT")]
    pub memory_format: Option<MemoryFormat>,

    /// Seed for weights and synthetic inputs
    #[arg(long, default_value_t = 0)]
    pub seed: u64,

    /// Model (default resnet18): resnet18, resnet34, resnet50, resnet101, resnet152,
    /// mobilenet_v2, efficientnet_b0..b3, densenet121, inception_v3 or squeezenet1_1; decode
    /// and serve-llm (default gpt2-small): gpt2-small, tinyllama-1.1b, gpt2-tiny or llama-tiny; in a mixed
    /// cohort one per workload, e.g. train=resnet50,infer=resnet18 or decode=gpt2-tiny,train=resnet18
    /// (every worker gets the same value)
    #[arg(long, conflicts_with = "model_file")]
    pub model: Option<ModelDeclaration>,

    /// A TorchScript model (torch.jit.script(model).save(path)) instead of --model; needs
    /// --input-shape and --num-classes
    #[arg(long, requires_all = ["input_shape", "num_classes"])]
    pub model_file: Option<PathBuf>,

    /// One input sample's shape for --model-file, C,H,W (e.g. 3,224,224)
    #[arg(long, requires = "model_file")]
    pub input_shape: Option<InputShape>,

    /// Classes the --model-file outputs (synthetic labels are drawn from 0..N)
    #[arg(long, requires = "model_file", value_parser = clap::value_parser!(u32).range(1..))]
    pub num_classes: Option<u32>,

    /// How batches are issued: eager (kernel by kernel), or cuda-graph (the step captured once
    /// after warmup and replayed: no launch cost per kernel; CUDA only); or one per workload of
    /// a mixed cohort, e.g. serve-llm=cuda-graph,train=eager
    #[arg(long, default_value_t = ExecutionDeclaration::One(Execution::Eager))]
    pub execution: ExecutionDeclaration,

    /// Fail (instead of warning) when the device does not match --mode
    #[arg(long)]
    pub strict_device: bool,

    /// --mode mps: each client gets the share NVIDIA's device plugin gives at `replicas: N`:
    /// 100/N % of the threads and 1/N of each GPU's memory (N is the node's setting, not the
    /// cohort size)
    #[arg(
        long,
        value_name = "N",
        value_parser = clap::value_parser!(u32).range(1..=100),
        conflicts_with_all = ["mps_unlimited", "mps_threads", "mps_memory"]
    )]
    pub mps_replicas: Option<u32>,

    /// --mode mps: no per-client limit (every client may use all SMs and all memory)
    #[arg(long, conflicts_with_all = ["mps_threads", "mps_memory"])]
    pub mps_unlimited: bool,

    /// --mode mps: active thread percentage of each client, 1-100 (with --mps-memory)
    #[arg(
        long,
        value_name = "P",
        requires = "mps_memory",
        value_parser = clap::value_parser!(u32).range(1..=100)
    )]
    pub mps_threads: Option<u32>,

    /// --mode mps: pinned device memory limit of each client, e.g. 20GiB (with --mps-threads)
    #[arg(long, value_name = "SIZE", requires = "mps_threads")]
    pub mps_memory: Option<ByteSize>,

    /// --mode timeslice, mig-timeslice: the time slice each process gets before the GPU
    /// switches: default, short, medium or long (set per cohort by a DRA claim; recorded in
    /// worker.json; the device plugin cannot set it)
    #[arg(long, value_name = "INTERVAL")]
    pub timeslice_interval: Option<TimesliceInterval>,

    /// hog workload: device memory to take and hold, e.g. 120GiB (default: all CUDA grants)
    #[arg(long, value_name = "SIZE")]
    pub hog_bytes: Option<ByteSize>,

    /// Device telemetry sampling rate during the window, hertz (0 turns it off, and with it
    /// the energy readings)
    #[arg(long, default_value_t = 10.0)]
    pub telemetry_hz: f64,

    /// GPU activity (NVML GPM) sampling interval, seconds, on the telemetry thread (0 turns it
    /// off; GPM needs a Hopper or later GPU, and where it is unsupported worker.json says why)
    #[arg(long, default_value_t = DEFAULT_GPM_INTERVAL_S)]
    pub gpm_interval_s: f64,

    /// decode, serve-llm: prompt length of every sequence, tokens (default 128; with
    /// --output-tokens, at most the model's context plus one; serve-llm: at most the context)
    #[arg(long, value_name = "TOKENS")]
    pub prompt_tokens: Option<u32>,

    /// decode: tokens each sequence generates per cycle, the first by the prefill; serve-llm:
    /// tokens each request asks for (default 128)
    #[arg(long, value_name = "TOKENS")]
    pub output_tokens: Option<u32>,
}

impl WorkerFlags {
    /// The model declaration, `resnet18` when none was given.
    #[must_use]
    pub fn model_declaration(&self) -> ModelDeclaration {
        self.model
            .clone()
            .unwrap_or_else(|| ModelDeclaration::One(DEFAULT_MODEL.to_owned()))
    }

    /// How a worker of `workload` runs: the declaration's entry for it (a hog runs nothing, and
    /// reads as eager when the declaration names none for it).
    pub fn execution_for(&self, workload: Workload) -> Result<Execution, SpecError> {
        match self.execution.execution_for(workload) {
            Err(_) if workload == Workload::Hog => Ok(Execution::Eager),
            other => other.map_err(|e| SpecError::flag("--execution", e)),
        }
    }

    /// The model a worker of `workload` runs: the declaration's entry for it, or the default
    /// (`resnet18`, or `gpt2-small` for an LLM workload) when `--model` is not given.
    pub fn model_for(&self, workload: Workload) -> Result<String, SpecError> {
        match &self.model {
            None if workload.is_llm() => Ok(DEFAULT_LLM_MODEL.to_owned()),
            None => Ok(DEFAULT_MODEL.to_owned()),
            Some(declaration) => declaration
                .model_for(workload)
                .map(str::to_owned)
                .map_err(|e| SpecError::flag("--model", e)),
        }
    }

    /// The precision a vision worker runs: `--precision`, fp32 when not given. An LLM worker
    /// takes `--precision` as it is (none: bf16 on CUDA, fp32 on the CPU).
    #[must_use]
    pub fn vision_precision(&self) -> Precision {
        self.precision.unwrap_or(Precision::Fp32)
    }

    /// The memory layout a vision worker runs: `--memory-format`, contiguous when not given.
    #[must_use]
    pub fn memory_format(&self) -> MemoryFormat {
        self.memory_format.unwrap_or_default()
    }

    /// An LLM worker's prompt and output lengths, tokens, with their defaults.
    #[must_use]
    pub fn llm_tokens(&self) -> (u32, u32) {
        (
            self.prompt_tokens.unwrap_or(DEFAULT_PROMPT_TOKENS),
            self.output_tokens.unwrap_or(DEFAULT_OUTPUT_TOKENS),
        )
    }

    /// Checks what clap cannot: ranges of the values, and the MPS share against the mode.
    pub fn validate(&self) -> Result<(), SpecError> {
        for (value, flag) in [
            (self.prompt_tokens, "--prompt-tokens"),
            (self.output_tokens, "--output-tokens"),
        ] {
            if value == Some(0) {
                return Err(SpecError::flag(
                    flag,
                    format!("{flag} must be at least 1 token, got 0"),
                ));
            }
        }
        if !self.telemetry_hz.is_finite() || self.telemetry_hz < 0.0 || self.telemetry_hz > 1000.0 {
            return Err(SpecError::flag(
                "--telemetry-hz",
                format!(
                    "--telemetry-hz must be between 0 and 1000, got {}",
                    self.telemetry_hz
                ),
            ));
        }
        self.validate_share()?;
        self.validate_timeslice_interval()?;
        self.validate_model_file()?;
        if self.warmup_batches > MAX_WARMUP_BATCHES {
            return Err(SpecError::flag(
                "--warmup-batches",
                format!(
                    "--warmup-batches must be at most {MAX_WARMUP_BATCHES}, got {}",
                    self.warmup_batches
                ),
            ));
        }
        if self.hog_bytes.is_some_and(|b| b.bytes() == 0) {
            return Err(SpecError::flag(
                "--hog-bytes",
                "--hog-bytes must be more than 0 (leave it out to take all CUDA grants)",
            ));
        }
        let (lo, hi) = (MIN_GPM_INTERVAL_S, MAX_GPM_INTERVAL_S);
        if !(self.gpm_interval_s == 0.0 || (lo..=hi).contains(&self.gpm_interval_s)) {
            return Err(SpecError::flag(
                "--gpm-interval-s",
                format!(
                    "--gpm-interval-s must be 0 (off) or between {lo} and {hi} seconds, got {}",
                    self.gpm_interval_s
                ),
            ));
        }
        if self.batch_size == 0 || self.image_size < 32 {
            return Err(SpecError::flag(
                "--batch-size",
                format!(
                    "--batch-size must be at least 1 and --image-size at least 32 (got {} and {})",
                    self.batch_size, self.image_size
                ),
            ));
        }
        Ok(())
    }

    /// Checks the flags against one workload a worker runs: a serve worker runs eager only
    /// (its batches are padded to several sizes, each a different graph; a serve-llm worker
    /// captures a graph per decode batch-size bucket and takes either), and a per-workload
    /// model declaration must name a model for it (a hog runs none).
    pub fn validate_for(&self, workload: Workload) -> Result<(), SpecError> {
        let execution = self.execution_for(workload)?;
        if workload == Workload::Serve && execution != Execution::Eager {
            return Err(SpecError::flag(
                "--execution",
                format!(
                    "--workload serve runs eager only (its batches are padded to several sizes, \
                     each a different graph); --execution {execution} is for train, infer, \
                     decode and serve-llm (give one per workload: serve=eager,train=cuda-graph)"
                ),
            ));
        }
        if workload != Workload::Hog
            && let Some(model) = &self.model
        {
            model
                .model_for(workload)
                .map_err(|e| SpecError::flag("--model", e))?;
        }
        if self.memory_format() == MemoryFormat::ChannelsLast {
            self.validate_channels_last(workload)?;
        }
        if workload.is_llm() {
            self.validate_llm(workload)?;
        } else if workload != Workload::Hog
            && self.model_file.is_none()
            && let Ok(model) = self.model_for(workload)
            && llm_context_tokens(&model).is_some()
        {
            return Err(SpecError::flag(
                "--model",
                format!(
                    "{model} is an LLM, for --workload decode, not {workload}; in a mixed cohort \
                     give one model per workload (e.g. decode={model},train=resnet18)"
                ),
            ));
        }
        Ok(())
    }

    /// Channels-last lays out a convolutional network's four-dimensional weights and images:
    /// a built-in vision model has them; an LLM has neither, and a TorchScript file's own code
    /// may view its activations as contiguous ones.
    fn validate_channels_last(&self, workload: Workload) -> Result<(), SpecError> {
        if workload.is_llm() {
            return Err(SpecError::flag(
                "--memory-format",
                format!(
                    "--memory-format channels-last applies to the built-in vision models (train, \
                     infer, serve), not to --workload {workload}: an LLM has no image batch or \
                     convolution weights to lay out; leave --memory-format out"
                ),
            ));
        }
        if let Some(file) = &self.model_file {
            return Err(SpecError::flag(
                "--memory-format",
                format!(
                    "--memory-format channels-last applies to the built-in vision models, not to \
                     --model-file {} (its code may view or reshape its activations as \
                     contiguous ones); leave --memory-format out with --model-file",
                    file.display()
                ),
            ));
        }
        Ok(())
    }

    /// An LLM worker runs a built-in LLM whose context holds its prompt and output.
    fn validate_llm(&self, workload: Workload) -> Result<(), SpecError> {
        if self.model_file.is_some() {
            return Err(SpecError::flag(
                "--model-file",
                format!(
                    "--workload {workload} runs a built-in LLM ({}); --model-file is for train, \
                     infer and serve",
                    llm_model_names()
                ),
            ));
        }
        let model = self.model_for(workload)?;
        let Some(context) = llm_context_tokens(&model) else {
            return Err(SpecError::flag(
                "--model",
                format!(
                    "--workload {workload} runs a built-in LLM ({}), not `{model}`; in a mixed \
                     cohort give one model per workload (e.g. {workload}=gpt2-small,train={model})",
                    llm_model_names()
                ),
            ));
        };
        let (prompt, output) = self.llm_tokens();
        // The cache holds the prompt and every output token but the last (never fed back); a
        // serve-llm request reserves prompt + output (`LlmServePolicy::check`'s rule).
        let needed =
            u64::from(prompt) + u64::from(output) - u64::from(workload != Workload::ServeLlm);
        if needed > u64::from(context) {
            let flag = if self.prompt_tokens.is_some() || self.output_tokens.is_none() {
                "--prompt-tokens"
            } else {
                "--output-tokens"
            };
            return Err(SpecError::flag(
                flag,
                format!(
                    "--prompt-tokens {prompt} with --output-tokens {output} needs {needed} \
                     positions, but {model} has a context of {context} tokens; shorten the \
                     prompt or the output"
                ),
            ));
        }
        Ok(())
    }

    /// The MPS share flags go with `--mode mps`, and `--mode mps` needs one of them: a result
    /// measured under MPS means little without the share each client had.
    /// A user's TorchScript model comes with its input shape and class count, and they with it
    /// (what clap's `requires` says for flags, said again here for plan lines).
    fn validate_model_file(&self) -> Result<(), SpecError> {
        if self.num_classes == Some(0) {
            return Err(SpecError::flag(
                "--num-classes",
                "--num-classes must be at least 1, got 0",
            ));
        }
        match (
            &self.model_file,
            self.input_shape.is_some(),
            self.num_classes.is_some(),
        ) {
            (Some(_), false, _) | (Some(_), _, false) => Err(SpecError::flag(
                "--model-file",
                "--model-file needs --input-shape C,H,W and --num-classes N",
            )),
            (Some(_), true, true) if self.model.is_some() => Err(SpecError::flag(
                "--model",
                "--model and --model-file name two models: give one",
            )),
            (None, true, _) => Err(SpecError::flag(
                "--input-shape",
                "--input-shape is the shape of a --model-file's input: give --model-file too",
            )),
            (None, _, true) => Err(SpecError::flag(
                "--num-classes",
                "--num-classes is what a --model-file outputs: give --model-file too",
            )),
            _ => Ok(()),
        }
    }

    fn validate_share(&self) -> Result<(), SpecError> {
        for (value, flag) in [
            (self.mps_replicas, "--mps-replicas"),
            (self.mps_threads, "--mps-threads"),
        ] {
            if let Some(v) = value
                && !(1..=100).contains(&v)
            {
                return Err(SpecError::flag(
                    flag,
                    format!("{flag} must be between 1 and 100, got {v}"),
                ));
            }
        }
        let given = [
            self.mps_replicas.map(|_| "--mps-replicas"),
            self.mps_unlimited.then_some("--mps-unlimited"),
            self.mps_threads.map(|_| "--mps-threads"),
            self.mps_memory.map(|_| "--mps-memory"),
        ];
        let given: Vec<&'static str> = given.into_iter().flatten().collect();
        match (self.mode, given.first()) {
            (Mode::Mps, None) => Err(SpecError::flag(
                "--mode",
                "--mode mps needs the share each MPS client runs under: --mps-replicas N (what \
                 NVIDIA's device plugin gives at replicas: N, the node's setting), --mps-unlimited \
                 (no per-client limit), or --mps-threads P --mps-memory SIZE",
            )),
            (Mode::Mps, Some(first)) => {
                let pair = self.mps_threads.is_some() && self.mps_memory.is_some();
                if given.len() > 1 && !(pair && given.len() == 2) {
                    return Err(SpecError::flag(
                        first,
                        format!(
                            "{} declare different MPS shares: give one of --mps-replicas, \
                             --mps-unlimited, or --mps-threads with --mps-memory",
                            given.join(" and ")
                        ),
                    ));
                }
                if self.mps_threads.is_some() != self.mps_memory.is_some() {
                    return Err(SpecError::flag(
                        first,
                        "--mps-threads and --mps-memory are given together",
                    ));
                }
                if self.mps_memory.is_some_and(|m| m.bytes() < MIB) {
                    return Err(SpecError::flag(
                        "--mps-memory",
                        format!(
                            "--mps-memory {} is less than 1 MiB; MPS limits memory in whole MiB",
                            self.mps_memory.unwrap_or_default()
                        ),
                    ));
                }
                Ok(())
            }
            (mode, Some(flag)) => Err(SpecError::flag(
                flag,
                format!(
                    "{flag} declares an MPS share, but --mode is {mode}; use it with --mode mps"
                ),
            )),
            (_, None) => Ok(()),
        }
    }

    /// A time-slice interval belongs to a time-sliced mode. Under `mps` it would ask for MPS
    /// and time-slicing on one GPU at once, which no driver gives: MPS needs the GPU in
    /// `EXCLUSIVE_PROCESS` compute mode and time-slicing in `DEFAULT`.
    fn validate_timeslice_interval(&self) -> Result<(), SpecError> {
        let Some(interval) = self.timeslice_interval else {
            return Ok(());
        };
        match self.mode {
            Mode::Timeslice | Mode::MigTimeslice => Ok(()),
            Mode::Mps => Err(SpecError::flag(
                "--timeslice-interval",
                format!(
                    "--timeslice-interval {interval} asks for time-slicing, but --mode is mps: \
                     MPS and time-slicing cannot share one GPU at once (MPS needs the GPU in \
                     EXCLUSIVE_PROCESS compute mode, time-slicing in DEFAULT); leave it out, or \
                     use --mode timeslice"
                ),
            )),
            mode => Err(SpecError::flag(
                "--timeslice-interval",
                format!(
                    "--timeslice-interval {interval} sets time-slicing, but --mode is {mode}; use \
                     it with --mode timeslice or mig-timeslice"
                ),
            )),
        }
    }

    /// The declared MPS share, for a device of `memory_total_bytes` (NVML's total, where known);
    /// `None` outside mode `mps`.
    #[must_use]
    pub fn declared_share(&self, memory_total_bytes: Option<u64>) -> Option<DeclaredShare> {
        if self.mode != Mode::Mps {
            return None;
        }
        match (self.mps_replicas, self.mps_threads, self.mps_memory) {
            (Some(n), _, _) => Some(coload_measure::plugin_share(n, memory_total_bytes)),
            (None, Some(p), Some(m)) => Some(DeclaredShare::explicit(p, m.bytes())),
            _ if self.mps_unlimited => Some(DeclaredShare::unlimited()),
            _ => None,
        }
    }
}

/// A `serve-llm` worker's request lengths as its flags give them, tokens: each prompt from
/// `prompt_tokens` to `prompt_tokens_max` and each output from `output_tokens` to
/// `output_tokens_max`, drawn uniformly with the seed where a range is wider than one length
/// ([`ServeFlags::llm_lengths`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LlmLengths {
    /// The shortest prompt (`--prompt-tokens`).
    pub prompt_tokens: u32,
    /// The longest prompt (`--prompt-tokens-max`, else `--prompt-tokens`).
    pub prompt_tokens_max: u32,
    /// The shortest output (`--output-tokens`).
    pub output_tokens: u32,
    /// The longest output (`--output-tokens-max`, else `--output-tokens`).
    pub output_tokens_max: u32,
}

impl LlmLengths {
    /// Whether some length is drawn (a range wider than one length).
    #[must_use]
    pub fn is_drawn(&self) -> bool {
        self.prompt_tokens_max > self.prompt_tokens || self.output_tokens_max > self.output_tokens
    }

    /// What the longest request reserves of the KV cache: the longest prompt plus the longest
    /// output.
    #[must_use]
    pub fn longest_request_tokens(&self) -> u64 {
        u64::from(self.prompt_tokens_max) + u64::from(self.output_tokens_max)
    }
}

/// The open-loop workloads' flags: given to `serve` and `serve-llm` workers only, each the ones
/// for its workload ([`ServeFlags::for_workload`]; the worker refuses the others).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, clap::Args)]
pub struct ServeFlags {
    /// serve, serve-llm: offered load, requests per second, arriving open-loop whatever the
    /// server does
    #[arg(long, value_name = "PER_S")]
    pub rate: Option<f64>,

    /// serve, serve-llm: arrival pattern at --rate: poisson (exponential gaps, seeded by
    /// --seed) or uniform
    #[arg(long, value_enum, default_value_t = Arrivals::Poisson)]
    pub arrivals: Arrivals,

    /// serve, serve-llm: replay a trace instead of --rate: one offset per line, seconds from
    /// the window's start, non-decreasing (`#` comments allowed); for serve-llm a line may add
    /// the request's prompt and output tokens (`0.25 512 128`: on every line or none)
    #[arg(long, value_name = "FILE", conflicts_with = "rate")]
    pub arrivals_file: Option<PathBuf>,

    /// serve: the most requests in one batch (batches are padded to a power of two up to it);
    /// serve-llm: the most requests running at once (the KV cache's slots)
    #[arg(long, default_value_t = 32)]
    pub max_batch: u32,

    /// serve: how long the oldest waiting request may wait for more before its batch leaves, ms
    /// (0: take what has arrived)
    #[arg(long, default_value_t = 0.0, value_name = "MS")]
    pub max_queue_delay_ms: f64,

    /// serve: the latency objective, ms, recorded with the results for the summary's SLO
    /// attainment
    #[arg(long, value_name = "MS")]
    pub slo_ms: Option<f64>,

    /// serve-llm: KV-cache tokens the running requests may reserve together, each reserving its
    /// prompt plus output at admission (default: --max-batch times the model's context, which
    /// the preallocated cache holds; at least one request's prompt plus output)
    #[arg(long, value_name = "TOKENS")]
    pub kv_budget_tokens: Option<u64>,

    /// serve-llm: draw each request's prompt length uniformly from --prompt-tokens to this,
    /// tokens, with --seed (every policy serves the same requests; default: every prompt is
    /// --prompt-tokens; an --arrivals-file with length columns gives them instead)
    #[arg(long, value_name = "TOKENS")]
    pub prompt_tokens_max: Option<u32>,

    /// serve-llm: draw each request's output length uniformly from --output-tokens to this,
    /// tokens, with --seed (the longest prompt plus the longest output must fit the model's
    /// context and the KV budget)
    #[arg(long, value_name = "TOKENS")]
    pub output_tokens_max: Option<u32>,

    /// serve-llm: the time-to-first-token objective, ms, from the scheduled arrival (with
    /// --tpot-slo-ms: SLO attainment, goodput and the capacity search)
    #[arg(long, value_name = "MS")]
    pub ttft_slo_ms: Option<f64>,

    /// serve-llm: the time-per-output-token objective, ms ((last - first token) / (output - 1))
    #[arg(long, value_name = "MS")]
    pub tpot_slo_ms: Option<f64>,
}

/// `--arrivals`: how a serve worker's requests are spaced at `--rate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Arrivals {
    /// Exponential inter-arrival times (a Poisson process).
    Poisson,
    /// Evenly spaced.
    Uniform,
}

/// Which worker of which cohort a process is, and where its files go: what the launcher sets
/// per worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, clap::Args)]
pub struct WorkerPlace {
    /// Cohort id shared by every worker; fresh for every cohort ([A-Za-z0-9._-], 1-128 chars)
    #[arg(long)]
    pub experiment: String,

    /// This worker's replica id, 0..count (default: $JOB_COMPLETION_INDEX)
    #[arg(long, env = "JOB_COMPLETION_INDEX")]
    pub replica: u32,

    /// Number of workers in the cohort
    #[arg(long)]
    pub count: u32,

    /// What this worker runs: train, infer, serve, hog (takes device memory and holds it),
    /// decode (a built-in LLM prefilling and generating tokens in a closed loop) or serve-llm
    /// (a built-in LLM serving open-loop requests with continuous batching)
    #[arg(long)]
    pub workload: Workload,

    /// Shared directory for the barrier (a ReadWriteMany volume across nodes)
    #[arg(long, default_value = "/mnt/benchmark-sync")]
    pub sync_dir: PathBuf,

    /// Directory for this worker's artifacts (created; an existing worker.json is never overwritten)
    #[arg(long)]
    pub out: PathBuf,
}

impl WorkerPlace {
    /// Checks the replica against the count.
    pub fn validate(&self) -> Result<(), SpecError> {
        if self.count == 0 {
            return Err(SpecError::flag("--count", "--count must be at least 1"));
        }
        if self.replica >= self.count {
            return Err(SpecError::flag(
                "--replica",
                format!(
                    "--replica {} is outside 0..{} (replica ids run from 0 to count - 1)",
                    self.replica, self.count
                ),
            ));
        }
        Ok(())
    }
}

impl ServeFlags {
    /// The flags a worker of `workload` gets: `None` for a workload that takes none, else the
    /// cohort's with the other open-loop workload's own flags left out (a `serve` worker takes
    /// no TTFT objective, a `serve-llm` worker no `--slo-ms`). The launcher and the cluster
    /// manifests both pass these on.
    #[must_use]
    pub fn for_workload(&self, workload: Workload) -> Option<ServeFlags> {
        match workload {
            Workload::Serve => Some(ServeFlags {
                kv_budget_tokens: None,
                prompt_tokens_max: None,
                output_tokens_max: None,
                ttft_slo_ms: None,
                tpot_slo_ms: None,
                ..self.clone()
            }),
            Workload::ServeLlm => Some(ServeFlags {
                slo_ms: None,
                max_queue_delay_ms: 0.0,
                ..self.clone()
            }),
            _ => None,
        }
    }

    /// Checks the serve flags against the workload of the worker that gets them: they apply to
    /// serve and serve-llm workers only, each its own, and their numbers must make sense.
    pub fn validate_for(&self, workload: Workload) -> Result<(), SpecError> {
        let open_loop = matches!(workload, Workload::Serve | Workload::ServeLlm);
        for (given, flag, applies) in [
            (self.rate.is_some(), "--rate", open_loop),
            (self.arrivals_file.is_some(), "--arrivals-file", open_loop),
            (
                self.slo_ms.is_some(),
                "--slo-ms",
                workload == Workload::Serve,
            ),
            (
                self.kv_budget_tokens.is_some(),
                "--kv-budget-tokens",
                workload == Workload::ServeLlm,
            ),
            (
                self.prompt_tokens_max.is_some(),
                "--prompt-tokens-max",
                workload == Workload::ServeLlm,
            ),
            (
                self.output_tokens_max.is_some(),
                "--output-tokens-max",
                workload == Workload::ServeLlm,
            ),
            (
                self.ttft_slo_ms.is_some(),
                "--ttft-slo-ms",
                workload == Workload::ServeLlm,
            ),
            (
                self.tpot_slo_ms.is_some(),
                "--tpot-slo-ms",
                workload == Workload::ServeLlm,
            ),
        ] {
            if given && !applies {
                let to = if flag == "--rate" || flag == "--arrivals-file" {
                    "--workload serve and serve-llm"
                } else if flag == "--slo-ms" {
                    "--workload serve (serve-llm takes --ttft-slo-ms and --tpot-slo-ms)"
                } else {
                    "--workload serve-llm"
                };
                return Err(SpecError::flag(
                    flag,
                    format!("{flag} applies to {to}, not {workload}"),
                ));
            }
        }
        self.validate()
    }

    /// A `serve-llm` worker's request lengths when the flags give them: each prompt from
    /// `--prompt-tokens` to `--prompt-tokens-max`, each output from `--output-tokens` to
    /// `--output-tokens-max` (fixed where no maximum is given). Refused, naming the flag: a
    /// maximum below its base, or the longest request (longest prompt plus longest output, what
    /// it reserves) longer than the model's context.
    pub fn llm_lengths(&self, flags: &WorkerFlags) -> Result<LlmLengths, SpecError> {
        let (prompt, output) = flags.llm_tokens();
        for (max, base, flag, base_flag) in [
            (
                self.prompt_tokens_max,
                prompt,
                "--prompt-tokens-max",
                "--prompt-tokens",
            ),
            (
                self.output_tokens_max,
                output,
                "--output-tokens-max",
                "--output-tokens",
            ),
        ] {
            if let Some(max) = max
                && max < base
            {
                return Err(SpecError::flag(
                    flag,
                    format!(
                        "{flag} {max} is below {base_flag} {base}: the lengths are drawn from \
                         {base_flag} to {flag}; give {flag} of at least {base}"
                    ),
                ));
            }
        }
        let lengths = LlmLengths {
            prompt_tokens: prompt,
            prompt_tokens_max: self.prompt_tokens_max.unwrap_or(prompt),
            output_tokens: output,
            output_tokens_max: self.output_tokens_max.unwrap_or(output),
        };
        let model = flags.model_for(Workload::ServeLlm)?;
        if let Some(context) = llm_context_tokens(&model)
            && lengths.longest_request_tokens() > u64::from(context)
            && lengths.is_drawn()
        {
            let (prompt, output) = self.longest_flags();
            let flag = if self.prompt_tokens_max.is_some() {
                prompt
            } else {
                output
            };
            return Err(SpecError::flag(
                flag,
                format!(
                    "the longest request, {prompt} {} with {output} {}, needs {} positions, but \
                     {model} has a context of {context} tokens; lower the maximum lengths",
                    lengths.prompt_tokens_max,
                    lengths.output_tokens_max,
                    lengths.longest_request_tokens()
                ),
            ));
        }
        Ok(lengths)
    }

    /// The flags that set the longest prompt and the longest output.
    fn longest_flags(&self) -> (&'static str, &'static str) {
        (
            if self.prompt_tokens_max.is_some() {
                "--prompt-tokens-max"
            } else {
                "--prompt-tokens"
            },
            if self.output_tokens_max.is_some() {
                "--output-tokens-max"
            } else {
                "--output-tokens"
            },
        )
    }

    /// A `serve-llm` worker's KV-cache budget, tokens: `--kv-budget-tokens`, or `--max-batch`
    /// times the context of `model` (what the preallocated cache holds). Refused when it cannot
    /// hold the longest request the flags make (longest prompt plus longest output): that
    /// request could never be admitted.
    pub fn kv_budget_tokens_for(&self, flags: &WorkerFlags) -> Result<u64, SpecError> {
        let lengths = self.llm_lengths(flags)?;
        let model = flags.model_for(Workload::ServeLlm)?;
        let context = llm_context_tokens(&model).unwrap_or(0);
        let budget = self
            .kv_budget_tokens
            .unwrap_or(u64::from(self.max_batch) * u64::from(context));
        let request = lengths.longest_request_tokens();
        if budget < request {
            let (prompt, output) = self.longest_flags();
            let which = if lengths.is_drawn() {
                "the longest request: it reserves"
            } else {
                "one request: each reserves"
            };
            return Err(SpecError::flag(
                "--kv-budget-tokens",
                format!(
                    "--kv-budget-tokens {budget} cannot hold {which} {prompt} {} plus {output} \
                     {} = {request} tokens; give at least {request}",
                    lengths.prompt_tokens_max, lengths.output_tokens_max
                ),
            ));
        }
        Ok(budget)
    }

    /// A `--rate` must schedule at least one request in a window of `window_s`: a rate whose
    /// first request would arrive after the window runs the whole window for nothing. The one
    /// rule for a cohort's spec and a worker's own flags.
    pub fn rate_in_window(&self, window_s: Seconds) -> Result<(), SpecError> {
        match self.rate {
            Some(rate) if self.arrivals_file.is_none() => {
                Self::rate_fits_window("--rate", rate, window_s)
            }
            _ => Ok(()),
        }
    }

    /// [`ServeFlags::rate_in_window`] for the rate `flag` gives.
    pub fn rate_fits_window(
        flag: &'static str,
        rate: f64,
        window_s: Seconds,
    ) -> Result<(), SpecError> {
        let window_s = window_s.get();
        if rate * window_s < 1.0 {
            return Err(SpecError::flag(
                flag,
                format!(
                    "{flag} {rate:?} schedules no request in a {window_s} s window: give at least \
                     {:.6} requests per second (1 / --window-s)",
                    1.0 / window_s
                ),
            ));
        }
        Ok(())
    }

    /// Checks the numbers: a positive rate and objective, a queue delay of 0 or more.
    pub fn validate(&self) -> Result<(), SpecError> {
        if let Some(rate) = self.rate
            && !(rate.is_finite() && rate > 0.0 && rate <= MAX_RATE_PER_S)
        {
            return Err(SpecError::flag(
                "--rate",
                format!(
                    "--rate must be a positive number of requests per second, at most \
                     {MAX_RATE_PER_S}, got {rate}"
                ),
            ));
        }
        if !(self.max_queue_delay_ms.is_finite() && self.max_queue_delay_ms >= 0.0) {
            return Err(SpecError::flag(
                "--max-queue-delay-ms",
                format!(
                    "--max-queue-delay-ms must be a number of milliseconds >= 0, got {}",
                    self.max_queue_delay_ms
                ),
            ));
        }
        for (value, flag) in [
            (self.slo_ms, "--slo-ms"),
            (self.ttft_slo_ms, "--ttft-slo-ms"),
            (self.tpot_slo_ms, "--tpot-slo-ms"),
        ] {
            if let Some(slo) = value
                && !(slo.is_finite() && slo > 0.0)
            {
                return Err(SpecError::flag(
                    flag,
                    format!("{flag} must be a positive number of milliseconds, got {slo}"),
                ));
            }
        }
        if self.kv_budget_tokens == Some(0) {
            return Err(SpecError::flag(
                "--kv-budget-tokens",
                "--kv-budget-tokens must be at least 1 token (leave it out for --max-batch \
                 times the model's context)",
            ));
        }
        if !(1..=MAX_BATCH).contains(&self.max_batch) {
            return Err(SpecError::flag(
                "--max-batch",
                format!(
                    "--max-batch must be between 1 and {MAX_BATCH}, got {}",
                    self.max_batch
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {

    use clap::{CommandFactory, Parser};

    use super::*;
    use crate::argv::to_argv;

    #[derive(Debug, Parser)]
    struct Both {
        #[command(flatten)]
        place: WorkerPlace,
        #[command(flatten)]
        flags: WorkerFlags,
        #[command(flatten)]
        serve: ServeFlags,
    }

    fn unusual_serve() -> ServeFlags {
        ServeFlags {
            rate: Some(250.5),
            arrivals: Arrivals::Uniform,
            arrivals_file: None,
            max_batch: 8,
            max_queue_delay_ms: 1.5,
            slo_ms: Some(10.0),
            kv_budget_tokens: Some(4096),
            prompt_tokens_max: Some(64),
            output_tokens_max: Some(24),
            ttft_slo_ms: Some(500.0),
            tpot_slo_ms: Some(50.0),
        }
    }

    /// Every field away from its default, so that a field left out of the argv shows.
    fn unusual() -> (WorkerPlace, WorkerFlags) {
        (
            WorkerPlace {
                experiment: "exp-1".into(),
                replica: 3,
                count: 7,
                workload: Workload::Infer,
                sync_dir: "/sync dir/with space".into(),
                out: "out/worker-3".into(),
            },
            WorkerFlags {
                mode: Mode::Mps,
                window_s: Seconds::new(12.5).unwrap(),
                warmup_batches: 3,
                start_lead_s: Seconds::whole(2),
                join_timeout_s: Seconds::new(0.25).unwrap(),
                device: DeviceChoice::Cuda(1),
                batch_size: 4,
                image_size: 64,
                precision: Some(Precision::Bf16),
                memory_format: Some(MemoryFormat::ChannelsLast),
                seed: 17,
                model: Some("train=resnet50,infer=mobilenet_v2".parse().unwrap()),
                model_file: None,
                input_shape: None,
                num_classes: None,
                execution: ExecutionDeclaration::One(Execution::CudaGraph),
                strict_device: true,
                mps_replicas: None,
                mps_unlimited: false,
                mps_threads: Some(14),
                mps_memory: Some(ByteSize(20 << 30)),
                timeslice_interval: None,
                hog_bytes: Some(ByteSize(120 << 30)),
                telemetry_hz: 0.0,
                gpm_interval_s: 2.5,
                prompt_tokens: Some(48),
                output_tokens: Some(16),
            },
        )
    }

    /// [`unusual`] with a TorchScript file instead of a built-in model (the two conflict).
    fn unusual_file() -> (WorkerPlace, WorkerFlags) {
        let (place, mut flags) = unusual();
        flags.model = None;
        flags.model_file = Some("model dir/m.pt".into());
        flags.input_shape = Some(InputShape([1, 28, 28]));
        flags.num_classes = Some(10);
        (place, flags)
    }

    fn argv_of((place, flags): &(WorkerPlace, WorkerFlags)) -> Vec<String> {
        let mut argv = to_argv(place).unwrap();
        argv.extend(to_argv(flags).unwrap());
        argv
    }

    /// The serve flags with a trace file instead of a rate (the two conflict).
    fn unusual_serve_file() -> ServeFlags {
        ServeFlags {
            rate: None,
            arrivals_file: Some("trace dir/offsets.txt".into()),
            ..unusual_serve()
        }
    }

    /// The MPS share flags exclude each other: these variants of [`unusual`] render the others.
    fn unusual_replicas() -> (WorkerPlace, WorkerFlags) {
        let (place, mut flags) = unusual();
        flags.mps_replicas = Some(7);
        flags.mps_threads = None;
        flags.mps_memory = None;
        (place, flags)
    }

    fn unusual_unlimited() -> (WorkerPlace, WorkerFlags) {
        let (place, mut flags) = unusual();
        flags.mps_unlimited = true;
        flags.mps_threads = None;
        flags.mps_memory = None;
        (place, flags)
    }

    fn unusual_timeslice() -> (WorkerPlace, WorkerFlags) {
        let (place, mut flags) = unusual_unlimited();
        flags.mode = Mode::Timeslice;
        flags.mps_unlimited = false;
        flags.timeslice_interval = Some(TimesliceInterval::Long);
        (place, flags)
    }

    fn parse(argv: Vec<String>) -> Both {
        let mut full: Vec<String> = vec!["worker".into()];
        full.extend(argv);
        Both::try_parse_from(full).unwrap()
    }

    #[test]
    fn rendering_then_parsing_gives_the_same_flags() {
        for (case, serve) in [
            (unusual(), unusual_serve()),
            (unusual_file(), unusual_serve_file()),
            (unusual_replicas(), unusual_serve()),
            (unusual_unlimited(), unusual_serve()),
            (unusual_timeslice(), unusual_serve()),
        ] {
            let mut argv = argv_of(&case);
            argv.extend(to_argv(&serve).unwrap());
            let back = parse(argv);
            assert_eq!(back.place, case.0);
            assert_eq!(back.flags, case.1);
            assert_eq!(back.serve, serve);
        }
    }

    #[test]
    fn every_flag_clap_knows_is_rendered() {
        let mut argv = argv_of(&unusual());
        argv.extend(argv_of(&unusual_file()));
        argv.extend(argv_of(&unusual_replicas()));
        argv.extend(argv_of(&unusual_unlimited()));
        argv.extend(argv_of(&unusual_timeslice()));
        argv.extend(to_argv(&unusual_serve()).unwrap());
        argv.extend(to_argv(&unusual_serve_file()).unwrap());
        let rendered: Vec<String> = argv
            .iter()
            .filter_map(|a| a.strip_prefix("--"))
            .map(str::to_owned)
            .collect();
        let command = Both::command();
        let known: Vec<&str> = command
            .get_arguments()
            .filter_map(clap::Arg::get_long)
            .collect();
        for long in &known {
            assert!(
                rendered.iter().any(|r| r == long),
                "--{long} is a worker flag but is never rendered: {rendered:?}"
            );
        }
        for r in &rendered {
            assert!(known.contains(&r.as_str()), "--{r} is rendered but unknown");
        }
    }

    #[test]
    fn false_and_defaults_round_trip() {
        let mut flags = unusual().1;
        flags.strict_device = false;
        flags.window_s = Seconds::whole(45);
        let argv = to_argv(&flags).unwrap();
        assert!(!argv.iter().any(|a| a == "--strict-device"));
        let i = argv.iter().position(|a| a == "--window-s").unwrap();
        assert_eq!(argv[i + 1], "45");
        let mut full = to_argv(&unusual().0).unwrap();
        full.extend(argv);
        assert_eq!(parse(full).flags, flags);
    }

    #[test]
    fn a_model_and_a_model_file_conflict_and_the_default_model_is_resnet18() {
        let mut argv = argv_of(&unusual_file());
        argv.extend(["--model".into(), "resnet50".into()]);
        let mut full: Vec<String> = vec!["worker".into()];
        full.extend(argv);
        assert!(Both::try_parse_from(full).is_err());
        let mut flags = unusual().1;
        flags.model = None;
        assert_eq!(
            flags.model_declaration(),
            ModelDeclaration::One("resnet18".into())
        );
    }

    #[test]
    fn bad_values_are_named() {
        let e = parse_flags(&["--mode", "timeslice", "--window-s=-1"]).unwrap_err();
        assert_eq!(e, "ValueValidation");
        let e = parse_flags(&["--mode", "timeslice", "--window-s", "0"]).unwrap_err();
        assert_eq!(e, "ValueValidation");
        let mut place = unusual().0;
        place.replica = 7;
        assert!(
            place
                .validate()
                .unwrap_err()
                .to_string()
                .contains("outside 0..7")
        );
    }

    fn parse_flags(args: &[&str]) -> Result<WorkerFlags, String> {
        #[derive(Debug, Parser)]
        struct Only {
            #[command(flatten)]
            flags: WorkerFlags,
        }
        let mut full = vec!["worker"];
        full.extend_from_slice(args);
        let only = Only::try_parse_from(full).map_err(|e| format!("{:?}", e.kind()))?;
        only.flags.validate().map_err(|e| e.to_string())?;
        Ok(only.flags)
    }

    #[test]
    fn a_timeslice_interval_goes_with_a_time_sliced_mode_only() {
        let f = parse_flags(&["--mode", "timeslice", "--timeslice-interval", "short"]).unwrap();
        assert_eq!(f.timeslice_interval, Some(TimesliceInterval::Short));
        assert!(parse_flags(&["--mode", "mig-timeslice", "--timeslice-interval", "long"]).is_ok());
        let e = parse_flags(&[
            "--mode",
            "mps",
            "--mps-unlimited",
            "--timeslice-interval",
            "short",
        ])
        .unwrap_err();
        assert!(
            e.contains("MPS and time-slicing cannot share one GPU at once"),
            "{e}"
        );
        let e = parse_flags(&["--mode", "exclusive", "--timeslice-interval", "long"]).unwrap_err();
        assert!(
            e.contains("--timeslice-interval long sets time-slicing, but --mode is exclusive"),
            "{e}"
        );
        assert!(parse_flags(&["--mode", "timeslice", "--timeslice-interval", "Short"]).is_err());
    }

    #[test]
    fn channels_last_is_for_the_built_in_vision_models() {
        let flags = |extra: &[&str]| {
            let mut args = vec!["--mode", "exclusive", "--memory-format", "channels-last"];
            args.extend_from_slice(extra);
            parse_flags(&args).unwrap()
        };
        let vision = flags(&[]);
        assert_eq!(vision.memory_format(), MemoryFormat::ChannelsLast);
        for w in [
            Workload::Train,
            Workload::Infer,
            Workload::Serve,
            Workload::Hog,
        ] {
            assert!(vision.validate_for(w).is_ok(), "{w}");
        }
        for w in [Workload::Decode, Workload::ServeLlm] {
            let e = flags(&["--model", "gpt2-tiny"])
                .validate_for(w)
                .unwrap_err();
            assert!(
                e.to_string().starts_with(&format!(
                    "--memory-format channels-last applies to the built-in vision models \
                     (train, infer, serve), not to --workload {w}"
                )),
                "{e}"
            );
        }
        let file = flags(&[
            "--model-file",
            "m dir/m.pt",
            "--input-shape",
            "1,28,28",
            "--num-classes",
            "10",
        ]);
        let e = file.validate_for(Workload::Train).unwrap_err().to_string();
        assert!(e.contains("not to --model-file m dir/m.pt"), "{e}");
        // Contiguous, given or not, is the default and goes everywhere.
        let given = parse_flags(&["--mode", "exclusive", "--memory-format", "contiguous"]).unwrap();
        assert!(given.validate_for(Workload::Decode).is_ok());
        assert_eq!(
            parse_flags(&["--mode", "exclusive"])
                .unwrap()
                .memory_format(),
            MemoryFormat::Contiguous
        );
        assert!(parse_flags(&["--mode", "exclusive", "--memory-format", "nhwc"]).is_err());
    }

    #[test]
    fn mode_mps_needs_exactly_one_share() {
        let e = parse_flags(&["--mode", "mps"]).unwrap_err();
        assert!(
            e.starts_with(
                "--mode mps needs the share each MPS client runs under: --mps-replicas N"
            ),
            "{e}"
        );
        let f = parse_flags(&["--mode", "mps", "--mps-replicas", "7"]).unwrap();
        let share = f.declared_share(Some(143_771 * MIB)).unwrap();
        assert_eq!(share.active_thread_percentage, Some(14));
        assert_eq!(share.pinned_memory_limit_bytes, Some(20_538 * MIB));
        let f = parse_flags(&["--mode", "mps", "--mps-unlimited"]).unwrap();
        assert_eq!(f.declared_share(None), Some(DeclaredShare::unlimited()));
        let f = parse_flags(&[
            "--mode",
            "mps",
            "--mps-threads",
            "50",
            "--mps-memory",
            "8GiB",
        ])
        .unwrap();
        assert_eq!(
            f.declared_share(None),
            Some(DeclaredShare::explicit(50, 8 << 30))
        );
        // clap refuses the combinations that make no sense.
        for bad in [
            &["--mode", "mps", "--mps-replicas", "7", "--mps-unlimited"][..],
            &["--mode", "mps", "--mps-threads", "50"],
            &["--mode", "mps", "--mps-memory", "8GiB"],
            &["--mode", "mps", "--mps-replicas", "0"],
            &[
                "--mode",
                "mps",
                "--mps-threads",
                "101",
                "--mps-memory",
                "8GiB",
            ],
        ] {
            assert!(parse_flags(bad).is_err(), "{bad:?} was accepted");
        }
        let e = parse_flags(&["--mode", "timeslice", "--mps-replicas", "7"]).unwrap_err();
        assert_eq!(
            e,
            "--mps-replicas declares an MPS share, but --mode is timeslice; use it with --mode mps"
        );
        assert_eq!(
            parse_flags(&["--mode", "timeslice"])
                .unwrap()
                .declared_share(None),
            None
        );
        let e = parse_flags(&[
            "--mode",
            "mps",
            "--mps-threads",
            "5",
            "--mps-memory",
            "100KiB",
        ])
        .unwrap_err();
        assert!(e.contains("less than 1 MiB"), "{e}");
        let e = parse_flags(&["--mode", "exclusive", "--hog-bytes", "0"]).unwrap_err();
        assert!(e.starts_with("--hog-bytes must be more than 0"), "{e}");
    }
}
