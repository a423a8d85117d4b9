//! The cohort configuration every worker declares, and the rule for comparing two of them.

use std::collections::BTreeMap;
use std::fmt;

use crate::error::ValueError;
use serde::{Deserialize, Serialize};

/// How the GPU allocation unit each worker received is shared with the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// One whole GPU per worker (the baseline).
    Exclusive,
    /// One MIG instance per worker.
    Mig,
    /// Several workers time-sliced on one physical GPU.
    Timeslice,
    /// Several workers time-sliced on one MIG instance.
    MigTimeslice,
    /// Several workers as clients of one CUDA MPS server.
    Mps,
}

impl Mode {
    /// Every mode, in declaration order.
    pub const ALL: [Mode; 5] = [
        Mode::Exclusive,
        Mode::Mig,
        Mode::Timeslice,
        Mode::MigTimeslice,
        Mode::Mps,
    ];

    /// The name used on the command line and in documents.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Exclusive => "exclusive",
            Mode::Mig => "mig",
            Mode::Timeslice => "timeslice",
            Mode::MigTimeslice => "mig-timeslice",
            Mode::Mps => "mps",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Mode {
    type Err = ValueError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Mode::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown mode `{s}` (expected exclusive, mig, timeslice, mig-timeslice or mps)"
                )
                .into()
            })
    }
}

/// How long each process runs before the GPU switches to the next under time-slicing: the
/// names NVIDIA's DRA driver takes in a claim's `timeSlicingConfig.interval` (its
/// `TimeSlicingSettings` feature). `default` leaves the GPU's own setting; the driver maps the
/// others to `nvidia-smi compute-policy --set-timeslice` values (short, medium, long). The
/// device plugin has no such setting: a node there keeps the driver's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TimesliceInterval {
    /// The GPU's own time slice.
    Default,
    /// A short time slice.
    Short,
    /// A medium time slice.
    Medium,
    /// A long time slice.
    Long,
}

impl TimesliceInterval {
    /// Every interval, shortest name first as the driver lists them.
    pub const ALL: [TimesliceInterval; 4] = [
        TimesliceInterval::Default,
        TimesliceInterval::Short,
        TimesliceInterval::Medium,
        TimesliceInterval::Long,
    ];

    /// The name on the command line and in documents (`short`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            TimesliceInterval::Default => "default",
            TimesliceInterval::Short => "short",
            TimesliceInterval::Medium => "medium",
            TimesliceInterval::Long => "long",
        }
    }

    /// The name NVIDIA's DRA driver takes in `timeSlicingConfig.interval` (`Short`).
    #[must_use]
    pub fn driver_name(self) -> &'static str {
        match self {
            TimesliceInterval::Default => "Default",
            TimesliceInterval::Short => "Short",
            TimesliceInterval::Medium => "Medium",
            TimesliceInterval::Long => "Long",
        }
    }
}

impl fmt::Display for TimesliceInterval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for TimesliceInterval {
    type Err = ValueError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TimesliceInterval::ALL
            .into_iter()
            .find(|i| i.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown time-slice interval `{s}` (expected default, short, medium or long)"
                )
                .into()
            })
    }
}

/// What each worker runs. Training and inference rates are never added together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// Forward, cross-entropy, backward, SGD step.
    Train,
    /// Eval-mode forward under inference mode.
    Infer,
    /// Open-loop requests served by a dynamic batcher running the inference forward at padded
    /// batch sizes; measured per request (`requests.jsonl`).
    Serve,
    /// Takes device memory up to `--hog-bytes` (or until CUDA refuses) and holds it through the
    /// window; no samples. Shows whether a sharing mode keeps one tenant's memory from the others.
    Hog,
    /// A built-in decoder-only LLM in a closed loop: a batch of sequences prefills
    /// its prompt, then generates one token per step with the KV cache, then starts again. Each
    /// prefill and each decode step is one record; samples are generated tokens.
    Decode,
    /// A built-in decoder-only LLM serving open-loop requests with continuous (iteration-level)
    /// batching: each iteration, prefill or decode, is one record (samples are the
    /// tokens it generated), and each request is one line of `llm_requests.jsonl` (TTFT, TPOT).
    #[serde(rename = "serve-llm")]
    ServeLlm,
}

impl Workload {
    /// Whether the workload trains (a backward pass and an optimizer step); inference and
    /// serving run the eval-mode forward only.
    #[must_use]
    pub fn trains(self) -> bool {
        self == Workload::Train
    }

    /// Whether the workload runs a built-in LLM (`config.llm`, `--prompt-tokens`, ...).
    #[must_use]
    pub fn is_llm(self) -> bool {
        matches!(self, Workload::Decode | Workload::ServeLlm)
    }

    /// The name used on the command line and in documents.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Workload::Train => "train",
            Workload::Infer => "infer",
            Workload::Serve => "serve",
            Workload::Hog => "hog",
            Workload::Decode => "decode",
            Workload::ServeLlm => "serve-llm",
        }
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Workload {
    type Err = ValueError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "train" => Ok(Workload::Train),
            "infer" => Ok(Workload::Infer),
            "serve" => Ok(Workload::Serve),
            "hog" => Ok(Workload::Hog),
            "decode" => Ok(Workload::Decode),
            "serve-llm" => Ok(Workload::ServeLlm),
            _ => Err(format!(
                "unknown workload `{s}` (expected train, infer, serve, hog, decode or serve-llm)"
            )
            .into()),
        }
    }
}

/// Numeric precision of the workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// 32-bit floats everywhere (the article's protocol).
    #[default]
    Fp32,
    /// bfloat16 autocast around the forward pass.
    Bf16,
}

impl Precision {
    /// The name used on the command line and in documents.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Precision::Fp32 => "fp32",
            Precision::Bf16 => "bf16",
        }
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Precision {
    type Err = ValueError;

    fn from_str(s: &str) -> Result<Self, ValueError> {
        match s {
            "fp32" => Ok(Precision::Fp32),
            "bf16" => Ok(Precision::Bf16),
            other => Err(format!("unknown precision `{other}` (fp32 or bf16)").into()),
        }
    }
}

/// How a vision model's weights and input images are laid out in memory.
///
/// Channels-last (NHWC) is what PyTorch users on tensor-core GPUs run convolutional networks in,
/// usually with bf16: cuDNN's fastest convolution kernels take NHWC, and a contiguous (NCHW)
/// model pays a transpose around each of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MemoryFormat {
    /// Row-major NCHW, libtorch's default (the article's protocol).
    #[default]
    Contiguous,
    /// NHWC strides for every four-dimensional weight and for the input batch, as
    /// `model.to(memory_format=torch.channels_last)` and `x.to(memory_format=...)` make them.
    ChannelsLast,
}

impl MemoryFormat {
    /// The name used on the command line and in documents.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryFormat::Contiguous => "contiguous",
            MemoryFormat::ChannelsLast => "channels-last",
        }
    }

    /// Whether this is the default, contiguous layout (`worker.json` leaves the default out).
    #[must_use]
    pub fn is_contiguous(&self) -> bool {
        *self == MemoryFormat::Contiguous
    }
}

impl fmt::Display for MemoryFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for MemoryFormat {
    type Err = ValueError;

    fn from_str(s: &str) -> Result<Self, ValueError> {
        match s {
            "contiguous" => Ok(MemoryFormat::Contiguous),
            "channels-last" => Ok(MemoryFormat::ChannelsLast),
            other => {
                Err(format!("unknown memory format `{other}` (contiguous or channels-last)").into())
            }
        }
    }
}

/// Which device a worker runs on: `auto`, `cpu` or `cuda:N`.
///
/// Written as that text on the command line and in documents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum DeviceChoice {
    /// The first CUDA device when libtorch can use one, else the CPU.
    #[default]
    Auto,
    /// The host CPU.
    Cpu,
    /// CUDA device N (the N-th device CUDA sees, after `CUDA_VISIBLE_DEVICES`).
    Cuda(usize),
}

impl std::str::FromStr for DeviceChoice {
    type Err = ValueError;

    /// `auto`, `cpu` or `cuda:N` (`cuda` alone means `cuda:0`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(DeviceChoice::Auto),
            "cpu" => Ok(DeviceChoice::Cpu),
            "cuda" => Ok(DeviceChoice::Cuda(0)),
            _ => s
                .strip_prefix("cuda:")
                .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|n| n.parse().ok())
                .map(DeviceChoice::Cuda)
                .ok_or_else(|| {
                    format!("unknown device `{s}` (expected auto, cpu or cuda:N)").into()
                }),
        }
    }
}

/// How each batch is issued to the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Execution {
    /// Every batch issues its kernels one by one from the host (what a PyTorch user's loop does).
    #[default]
    Eager,
    /// The whole step was captured once in a CUDA graph after warmup; every batch is one replay
    /// and a synchronize, so no per-kernel launch cost is paid on the host.
    CudaGraph,
}

impl Execution {
    /// Every execution mode, in declaration order.
    pub const ALL: [Execution; 2] = [Execution::Eager, Execution::CudaGraph];

    /// The name used on the command line and in documents.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Execution::Eager => "eager",
            Execution::CudaGraph => "cuda-graph",
        }
    }
}

impl fmt::Display for Execution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Execution {
    type Err = ValueError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Execution::ALL
            .into_iter()
            .find(|e| e.as_str() == s)
            .ok_or_else(|| format!("unknown execution `{s}` (expected eager or cuda-graph)").into())
    }
}

/// Which kernel an LLM's decode steps attend through (`coload_workload::LlmModel`); all three
/// compute the same attention. See docs/llm.md for why the default is what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DecodeAttention {
    /// Every step through `scaled_dot_product_attention`, as PyTorch's decoders attend (under
    /// the position mask where the step's sequences differ in length or it is graph-captured).
    Sdpa,
    /// Eager steps through FlashAttention's variable-length kernel over each sequence's own
    /// keys, graph-captured steps through `scaled_dot_product_attention`.
    FlashEager,
    /// Every step through FlashAttention's variable-length kernel.
    Flash,
}

impl DecodeAttention {
    /// Every choice, in declaration order.
    pub const ALL: [DecodeAttention; 3] = [
        DecodeAttention::Sdpa,
        DecodeAttention::FlashEager,
        DecodeAttention::Flash,
    ];

    /// The name used on the command line and in documents.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            DecodeAttention::Sdpa => "sdpa",
            DecodeAttention::FlashEager => "flash-eager",
            DecodeAttention::Flash => "flash",
        }
    }
}

impl fmt::Display for DecodeAttention {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for DecodeAttention {
    type Err = ValueError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DecodeAttention::ALL
            .into_iter()
            .find(|a| a.as_str() == s)
            .ok_or_else(|| {
                format!("unknown decode attention `{s}` (expected sdpa, flash-eager or flash)")
                    .into()
            })
    }
}

/// The model name a worker records for a TorchScript file (`--model-file`).
pub const TORCHSCRIPT_MODEL: &str = "torchscript";

/// What identifies a user's TorchScript model (`--model-file`): the file's content, the input
/// it takes and the classes it outputs. The file's path is not part of it (each Pod may mount
/// the file elsewhere); the digest proves every worker ran the same model.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ModelFile {
    /// SHA-256 of the file, lowercase hex.
    pub sha256: String,
    /// One sample's shape, `[channels, height, width]`.
    pub input_shape: [u32; 3],
    /// Classes of the model's output (the synthetic labels are drawn from `0..num_classes`).
    pub num_classes: u32,
}

impl ModelFile {
    /// `C,H,W`, as on the command line.
    #[must_use]
    pub fn input_shape_text(&self) -> String {
        let [c, h, w] = self.input_shape;
        format!("{c},{h},{w}")
    }
}

/// What `--model` declares: one model for every worker, or one per workload in a mixed cohort
/// (`train=resnet50,infer=resnet18`). Every worker of a cohort is given the same declaration and
/// runs the entry of its own workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelDeclaration {
    /// Every worker runs this model.
    One(String),
    /// Each workload runs its own model.
    PerWorkload(BTreeMap<Workload, String>),
}

impl ModelDeclaration {
    /// The model a worker of `workload` runs, or why the declaration names none for it.
    pub fn model_for(&self, workload: Workload) -> Result<&str, ValueError> {
        match self {
            ModelDeclaration::One(name) => Ok(name),
            ModelDeclaration::PerWorkload(map) => {
                map.get(&workload).map(String::as_str).ok_or_else(|| {
                    format!(
                        "--model `{self}` names no model for {workload} workers; add \
                         {workload}=NAME"
                    )
                    .into()
                })
            }
        }
    }

    /// The per-workload declaration, recorded in [`WorkerConfig::model_by_workload`].
    #[must_use]
    pub fn per_workload(&self) -> Option<&BTreeMap<Workload, String>> {
        match self {
            ModelDeclaration::One(_) => None,
            ModelDeclaration::PerWorkload(map) => Some(map),
        }
    }
}

impl fmt::Display for DeviceChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceChoice::Auto => f.write_str("auto"),
            DeviceChoice::Cpu => f.write_str("cpu"),
            DeviceChoice::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

impl std::str::FromStr for ModelDeclaration {
    type Err = ValueError;

    /// `NAME`, or `workload=NAME` pairs separated by commas. Names are not checked here (the
    /// workload crate knows which models exist).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.is_empty() {
            return Err(
                "--model is empty (e.g. resnet18, or train=resnet50,infer=resnet18)".into(),
            );
        }
        if !s.contains('=') {
            if s.contains(',') {
                return Err(format!(
                    "--model `{s}` lists several models; give one, or one per workload \
                     (train=resnet50,infer=resnet18)"
                )
                .into());
            }
            return Ok(ModelDeclaration::One(s.to_owned()));
        }
        parse_per_workload(
            s,
            ("--model", "NAME", "train=resnet50"),
            |workload, name, part| {
                if name.is_empty() {
                    return Err(format!("--model names no model for {workload} (`{part}`)").into());
                }
                Ok(name.to_owned())
            },
        )
        .map(ModelDeclaration::PerWorkload)
    }
}

impl fmt::Display for ModelDeclaration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelDeclaration::One(name) => f.write_str(name),
            ModelDeclaration::PerWorkload(map) => f.write_str(&per_workload_text(map)),
        }
    }
}

impl Serialize for DeviceChoice {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for DeviceChoice {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl Serialize for ModelDeclaration {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ModelDeclaration {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// What `--execution` declares: one execution for every worker, or one per workload in a mixed
/// cohort (`serve-llm=cuda-graph,train=eager`: a graph-captured LLM endpoint beside trainers as
/// PyTorch users run them). Every worker of a cohort is given the same declaration and runs the
/// entry of its own workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecutionDeclaration {
    /// Every worker runs this way.
    One(Execution),
    /// Each workload runs its own way.
    PerWorkload(BTreeMap<Workload, Execution>),
}

impl Default for ExecutionDeclaration {
    fn default() -> Self {
        ExecutionDeclaration::One(Execution::Eager)
    }
}

impl ExecutionDeclaration {
    /// How a worker of `workload` runs, or why the declaration names nothing for it.
    pub fn execution_for(&self, workload: Workload) -> Result<Execution, ValueError> {
        match self {
            ExecutionDeclaration::One(e) => Ok(*e),
            ExecutionDeclaration::PerWorkload(map) => {
                map.get(&workload).copied().ok_or_else(|| {
                    format!(
                        "--execution `{self}` names no execution for {workload} workers; add \
                     {workload}=eager or {workload}=cuda-graph"
                    )
                    .into()
                })
            }
        }
    }

    /// The per-workload declaration, recorded in [`WorkerConfig::execution_by_workload`].
    #[must_use]
    pub fn per_workload(&self) -> Option<&BTreeMap<Workload, Execution>> {
        match self {
            ExecutionDeclaration::One(_) => None,
            ExecutionDeclaration::PerWorkload(map) => Some(map),
        }
    }
}

impl std::str::FromStr for ExecutionDeclaration {
    type Err = ValueError;

    /// `eager`, `cuda-graph`, or `workload=EXECUTION` pairs separated by commas.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if !s.contains('=') {
            return Ok(ExecutionDeclaration::One(s.parse()?));
        }
        parse_per_workload(
            s,
            ("--execution", "EXECUTION", "serve-llm=cuda-graph"),
            |_, text, _| text.parse(),
        )
        .map(ExecutionDeclaration::PerWorkload)
    }
}

impl fmt::Display for ExecutionDeclaration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExecutionDeclaration::One(e) => f.write_str(e.as_str()),
            ExecutionDeclaration::PerWorkload(map) => f.write_str(&per_workload_text(map)),
        }
    }
}

impl Serialize for ExecutionDeclaration {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ExecutionDeclaration {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// One input sample's shape for a TorchScript model, written `C,H,W` on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct InputShape(pub [u32; 3]);

impl std::str::FromStr for InputShape {
    type Err = ValueError;

    /// Three positive integers separated by commas (`3,224,224`).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || {
            ValueError::from(format!(
                "input shape `{text}` is not C,H,W with three positive integers (e.g. 3,224,224)"
            ))
        };
        let dims: Vec<u32> = text
            .split(',')
            .map(|d| d.trim().parse::<u32>().map_err(|_| bad()))
            .collect::<Result<_, _>>()?;
        match dims.as_slice() {
            [c, h, w] if *c > 0 && *h > 0 && *w > 0 => Ok(InputShape([*c, *h, *w])),
            _ => Err(bad()),
        }
    }
}

impl fmt::Display for InputShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [c, h, w] = self.0;
        write!(f, "{c},{h},{w}")
    }
}

impl Serialize for InputShape {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for InputShape {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// One field of a [`ModelFile`] as text, for [`WorkerConfig::differences`].
type FileText = fn(&ModelFile) -> String;

/// `train=resnet50,infer=resnet18`.
/// `train=resnet50,infer=resnet18`: a per-workload declaration as the flags write it.
fn per_workload_text<T: fmt::Display>(map: &BTreeMap<Workload, T>) -> String {
    map.iter()
        .map(|(w, m)| format!("{w}={m}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// `workload=VALUE` pairs separated by commas (`flag`'s per-workload form; `what` names the
/// value, `example` is one pair), each value read by `value` (given the workload, the trimmed
/// text and the pair), at most one per workload.
fn parse_per_workload<T>(
    s: &str,
    (flag, what, example): (&str, &str, &str),
    value: impl Fn(Workload, &str, &str) -> Result<T, ValueError>,
) -> Result<BTreeMap<Workload, T>, ValueError> {
    let mut map = BTreeMap::new();
    for part in s.split(',').map(str::trim) {
        let (workload, text) = part.split_once('=').ok_or_else(|| {
            ValueError::from(format!(
                "`{part}` in {flag} is not of the form workload={what} (e.g. {example})"
            ))
        })?;
        let workload: Workload = workload.trim().parse()?;
        let v = value(workload, text.trim(), part)?;
        if map.insert(workload, v).is_some() {
            return Err(format!("{flag} names {workload} twice").into());
        }
    }
    Ok(map)
}

/// The configuration a worker declares. Every worker of a cohort must declare the same one,
/// field by field, except `workload` (a mixed cohort differs there by design) and, where the
/// cohort declared one model per workload (`model_by_workload`), the model of a worker of
/// another workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerConfig {
    /// The sharing mode the cohort was launched under.
    pub mode: Mode,
    /// This worker's workload (the one field allowed to differ within a cohort).
    pub workload: Workload,
    /// Number of workers in the cohort.
    pub count: u32,
    /// The model this worker runs: a built-in model's name (`resnet18`, `resnet50`, ...), or
    /// [`TORCHSCRIPT_MODEL`] for a user's TorchScript file (see `model_file`).
    pub model: String,
    /// Images per batch.
    pub batch_size: u32,
    /// Height and width of the square synthetic images (for a TorchScript model, the height of
    /// `model_file.input_shape`).
    pub image_size: u32,
    /// Numeric precision.
    pub precision: Precision,
    /// How a vision model's weights and inputs are laid out (`contiguous` in documents written
    /// before the option existed, and left out when it is the default).
    #[serde(default, skip_serializing_if = "MemoryFormat::is_contiguous")]
    pub memory_format: MemoryFormat,
    /// Batches run before the barrier.
    pub warmup_batches: u32,
    /// Length of the timed window, seconds.
    pub window_s: f64,
    /// Time between the leader publishing the start and the start itself, seconds.
    pub start_lead_s: f64,
    /// Seed for weights and synthetic inputs (and a serve worker's Poisson arrivals).
    pub seed: u64,
    /// How each batch is issued (`eager` in documents written before the option existed).
    #[serde(default)]
    pub execution: Execution,
    /// Trainable parameters of this worker's model; `null` before the model was built, and in
    /// documents written before it was recorded.
    #[serde(default)]
    pub parameter_count: Option<u64>,
    /// A mixed cohort's one model per workload (`{"train": "resnet50", "infer": "resnet18"}`),
    /// identical in every worker; `null` when every worker runs `model`.
    #[serde(default)]
    pub model_by_workload: Option<BTreeMap<Workload, String>>,
    /// A mixed cohort's one execution per workload (`{"serve-llm": "cuda-graph", "train":
    /// "eager"}`), identical in every worker; absent when every worker runs `execution`. Each
    /// worker's `execution` is then its own workload's entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_by_workload: Option<BTreeMap<Workload, Execution>>,
    /// The user's TorchScript file, when `model` is [`TORCHSCRIPT_MODEL`].
    #[serde(default)]
    pub model_file: Option<ModelFile>,
    /// A serve worker's arrivals, batching and SLO; absent for other workloads. Like
    /// `workload`, it belongs to the worker and is not compared across the cohort.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serve: Option<ServeConfig>,
    /// An LLM worker's model, batch and token counts; absent for other workloads.
    /// It belongs to the worker, like `serve`, and is not compared across the cohort.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm: Option<LlmConfig>,
    /// A `serve-llm` worker's arrivals, token counts, continuous-batching limits and objectives
    ///; absent for other workloads. The worker's own, like `serve`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serve_llm: Option<ServeLlmConfig>,
    /// `timeslice` / `mig-timeslice`: the time-slice interval the cohort declared
    /// (`--timeslice-interval`, which a DRA claim sets per cohort); absent when none was
    /// declared (the GPU's own setting, always so under the device plugin). Compared across the
    /// cohort like `mode`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeslice_interval: Option<TimesliceInterval>,
}

/// The scheduling policy of every `serve-llm` worker: admission in arrival order (a head that
/// does not fit blocks the queue) under `max_batch` and the KV budget, a prefill iteration for
/// the newly admitted requests before any decode (`coload_timing::run_llm_serve`).
pub const FCFS_PREFILL_FIRST: &str = "fcfs_prefill_first";

/// `config.serve_llm.lengths`: every request of `prompt_tokens` and `output_tokens`.
pub const LLM_LENGTHS_FIXED: &str = "fixed";
/// `config.serve_llm.lengths`: each request's lengths drawn uniformly, with the seed, from
/// `prompt_tokens..=prompt_tokens_max` and `output_tokens..=output_tokens_max`.
pub const LLM_LENGTHS_UNIFORM: &str = "uniform";
/// `config.serve_llm.lengths`: each request's lengths read from its line of the arrivals file.
pub const LLM_LENGTHS_FILE: &str = "file";

fn fixed_lengths() -> String {
    LLM_LENGTHS_FIXED.to_owned()
}

/// How a `serve-llm` worker's requests arrive and are batched, and the objectives it was run
/// for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServeLlmConfig {
    /// Offered load, requests per second (for a file: the file's requests / window).
    pub rate_per_s: f64,
    /// `poisson` (seeded by `seed`), `uniform` or `file`.
    pub arrivals: String,
    /// The offsets file, as given, when `arrivals` is `file`.
    #[serde(default)]
    pub arrivals_file: Option<String>,
    /// The seed of the Poisson arrivals (and of the model and its prompts).
    pub seed: u64,
    /// Prompt length of every request, tokens; the shortest where `lengths` is not `fixed`.
    pub prompt_tokens: u32,
    /// Output length of every request, tokens (the first comes out of its prefill); the
    /// shortest where `lengths` is not `fixed`.
    pub output_tokens: u32,
    /// How each request's lengths were set ([`LLM_LENGTHS_FIXED`], [`LLM_LENGTHS_UNIFORM`] or
    /// [`LLM_LENGTHS_FILE`]); absent in files written before the request lengths: `fixed`.
    #[serde(default = "fixed_lengths")]
    pub lengths: String,
    /// The longest prompt, tokens: `uniform`, the draw's upper end (`--prompt-tokens-max`);
    /// `file`, the longest of the trace's requests in the window; `null` when `fixed`.
    #[serde(default)]
    pub prompt_tokens_max: Option<u32>,
    /// The longest output, tokens, as `prompt_tokens_max`.
    #[serde(default)]
    pub output_tokens_max: Option<u32>,
    /// The most requests running at once (the KV cache's slots).
    pub max_batch: u32,
    /// KV-cache tokens the running requests may reserve together (each reserves its prompt
    /// plus its output at admission).
    pub kv_budget_tokens: u64,
    /// The model's context, tokens.
    pub context_tokens: u32,
    /// The scheduling policy ([`FCFS_PREFILL_FIRST`]).
    pub policy: String,
    /// The time-to-first-token objective, milliseconds (the summarizer's `--ttft-slo-ms`
    /// overrides it).
    #[serde(default)]
    pub ttft_slo_ms: Option<f64>,
    /// The time-per-output-token objective, milliseconds (the summarizer's `--tpot-slo-ms`
    /// overrides it).
    #[serde(default)]
    pub tpot_slo_ms: Option<f64>,
}

/// What an LLM worker (`decode`, `serve-llm`) runs: the built-in model, its batch and its token counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LlmConfig {
    /// The built-in preset (`gpt2-small`, `tinyllama-1.1b`, `gpt2-tiny`, `llama-tiny`).
    pub model: String,
    /// Sequences decoded together (`serve-llm`: the most running at once, its cache's slots).
    pub batch_size: u32,
    /// Prompt length of every sequence, tokens.
    pub prompt_tokens: u32,
    /// Tokens each sequence generates per cycle (the first by the prefill).
    pub output_tokens: u32,
    /// The precision of the weights, activations and KV cache (bf16 on CUDA and fp32 on the
    /// CPU unless `--precision` says otherwise).
    pub precision: Precision,
    /// The model's context, tokens (the most positions a sequence's cache holds).
    pub context_tokens: u32,
    /// Bytes of the preallocated KV cache; `null` before the model was built.
    #[serde(default)]
    pub kv_cache_bytes: Option<u64>,
    /// `decode` only: the bytes one decode step must read from device memory, averaged over a
    /// cycle's decode steps (`coload_workload::DecodeReads`: every weight once but the tables
    /// a step only gathers rows from, plus each sequence's keys and values up to its
    /// position). Over a card's copy bandwidth it is the step's read floor. Absent for
    /// `serve-llm` and in records written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_read_bytes: Option<u64>,
    /// The kernel decode steps attend through (`coload_workload::DecodeAttention`): `sdpa`
    /// (`scaled_dot_product_attention`, as PyTorch's decoders call it), `flash-eager` (eager
    /// steps through FlashAttention's variable-length kernel, graph-captured ones through
    /// SDPA) or `flash`. Absent in records written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_attention: Option<DecodeAttention>,
}

/// How a serve worker's requests arrive and are batched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServeConfig {
    /// Offered load, requests per second (for a file: the file's requests / window).
    pub rate_per_s: f64,
    /// `poisson` (seeded by `seed`), `uniform` or `file`.
    pub arrivals: String,
    /// The offsets file, as given, when `arrivals` is `file`.
    #[serde(default)]
    pub arrivals_file: Option<String>,
    /// The most requests in one batch.
    pub max_batch: u32,
    /// How long the oldest waiting request may wait for more before its batch leaves,
    /// milliseconds.
    pub max_queue_delay_ms: f64,
    /// The batch sizes the device runs (a batch is padded to the smallest one that fits), each
    /// warmed up before the barrier.
    pub padded_sizes: Vec<u32>,
    /// The latency objective the worker was run for, milliseconds (the summarizer's `--slo-ms`
    /// overrides it).
    #[serde(default)]
    pub slo_ms: Option<f64>,
}

/// One field on which two configurations differ.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigDifference {
    /// The field's name as it appears in `worker.json`.
    pub field: &'static str,
    /// The value in the configuration being checked.
    pub found: String,
    /// The value in the reference configuration.
    pub expected: String,
}

impl fmt::Display for ConfigDifference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} != {}", self.field, self.found, self.expected)
    }
}

impl WorkerConfig {
    /// The article's protocol for one worker: ResNet18, batch 32, 3x224x224 fp32, 20 warmup
    /// batches, a 45 s window, a 5 s start lead, seed 0.
    #[must_use]
    pub fn article(mode: Mode, workload: Workload, count: u32) -> Self {
        WorkerConfig {
            mode,
            workload,
            count,
            model: "resnet18".into(),
            batch_size: 32,
            image_size: 224,
            precision: Precision::Fp32,
            memory_format: MemoryFormat::Contiguous,
            warmup_batches: 20,
            window_s: 45.0,
            start_lead_s: 5.0,
            seed: 0,
            execution: Execution::Eager,
            parameter_count: None,
            model_by_workload: None,
            execution_by_workload: None,
            model_file: None,
            serve: None,
            llm: None,
            serve_llm: None,
            timeslice_interval: None,
        }
    }

    /// A short name for the model, for labels and grouping: the model's name, or
    /// `torchscript:<first 12 hex digits of its SHA-256>` for a TorchScript file.
    #[must_use]
    pub fn model_label(&self) -> String {
        match &self.model_file {
            Some(file) if self.model == TORCHSCRIPT_MODEL => {
                let short = file.sha256.get(..12).unwrap_or(&file.sha256);
                format!("{TORCHSCRIPT_MODEL}:{short}")
            }
            _ => self.model.clone(),
        }
    }

    /// `execution` and `execution_by_workload` as [`WorkerConfig::differences`] compares them.
    fn execution_differences(&self, reference: &WorkerConfig) -> Vec<ConfigDifference> {
        let mut out = Vec::new();
        let mut push = |field: &'static str, found: String, expected: String| {
            if found != expected {
                out.push(ConfigDifference {
                    field,
                    found,
                    expected,
                });
            }
        };
        // As for the model: a per-workload declaration is identical everywhere, each worker runs
        // its own workload's entry, and executions compare only within a workload.
        let executions = |c: &WorkerConfig| {
            c.execution_by_workload
                .as_ref()
                .map_or_else(|| "none".to_owned(), per_workload_text)
        };
        push(
            "execution_by_workload",
            executions(self),
            executions(reference),
        );
        match &self.execution_by_workload {
            Some(declared) => {
                if declared.get(&self.workload) != Some(&self.execution) {
                    push(
                        "execution",
                        self.execution.to_string(),
                        declared.get(&self.workload).map_or_else(
                            || format!("none declared for {}", self.workload),
                            |e| format!("{e} (declared for {})", self.workload),
                        ),
                    );
                } else if self.workload == reference.workload {
                    push(
                        "execution",
                        self.execution.to_string(),
                        reference.execution.to_string(),
                    );
                }
            }
            None => push(
                "execution",
                self.execution.to_string(),
                reference.execution.to_string(),
            ),
        }
        out
    }

    /// The fields on which `self` differs from `reference`, ignoring `workload` and `serve`
    /// (the worker's own).
    ///
    /// This is the one comparison rule of the project: the barrier uses it before the start and
    /// the summarizer uses it again on the written reports. Two exceptions follow from what the
    /// fields mean:
    ///
    /// - Where the cohort declared one model per workload (`model_by_workload`), the declaration
    ///   itself must be identical, each worker's `model` must be the one declared for its own
    ///   workload, and `model` and `parameter_count` are compared only between workers of the
    ///   same workload.
    /// - `parameter_count` follows from the model; it is compared where both sides know it
    ///   (documents written before it was recorded do not).
    #[must_use]
    #[expect(
        clippy::too_many_lines,
        reason = "the one comparison rule, one line per compared field, read top to bottom"
    )]
    pub fn differences(&self, reference: &WorkerConfig) -> Vec<ConfigDifference> {
        let mut out = Vec::new();
        let mut check = |field: &'static str, found: String, expected: String| {
            if found != expected {
                out.push(ConfigDifference {
                    field,
                    found,
                    expected,
                });
            }
        };
        check("mode", self.mode.to_string(), reference.mode.to_string());
        check("count", self.count.to_string(), reference.count.to_string());
        let interval = |c: &WorkerConfig| {
            c.timeslice_interval
                .map_or_else(|| "none".to_owned(), |i| i.to_string())
        };
        check("timeslice_interval", interval(self), interval(reference));
        check(
            "model_by_workload",
            self.model_by_workload
                .as_ref()
                .map_or_else(|| "none".to_owned(), per_workload_text),
            reference
                .model_by_workload
                .as_ref()
                .map_or_else(|| "none".to_owned(), per_workload_text),
        );
        let mut model_checked = false;
        // A hog runs no model: its `model` and `parameter_count` say nothing to compare. An LLM
        // worker and a vision worker run models of different kinds: the LLM's name,
        // size and precision follow from its own flags and device, not from the vision model's.
        let llm_and_vision = self.workload.is_llm() != reference.workload.is_llm();
        let hog = self.workload == Workload::Hog || reference.workload == Workload::Hog;
        if let Some(declared) = &self.model_by_workload
            && !hog
            && declared.get(&self.workload) != Some(&self.model)
        {
            let expected = declared.get(&self.workload).map_or_else(
                || format!("none declared for {}", self.workload),
                |m| format!("{m} (declared for {})", self.workload),
            );
            check("model", self.model.clone(), expected);
            model_checked = true;
        }
        let per_workload =
            self.model_by_workload.is_some() || reference.model_by_workload.is_some();
        if !hog && !llm_and_vision && (!per_workload || self.workload == reference.workload) {
            if !model_checked {
                check("model", self.model.clone(), reference.model.clone());
            }
            if let (Some(a), Some(b)) = (self.parameter_count, reference.parameter_count) {
                check("parameter_count", a.to_string(), b.to_string());
            }
        }
        let file = |c: &WorkerConfig, f: fn(&ModelFile) -> String| {
            c.model_file.as_ref().map_or_else(|| "none".to_owned(), f)
        };
        let file_fields: [(&'static str, FileText); 3] = [
            ("model_file.sha256", |m| m.sha256.clone()),
            ("model_file.input_shape", ModelFile::input_shape_text),
            ("model_file.num_classes", |m| m.num_classes.to_string()),
        ];
        for (field, text) in file_fields {
            check(field, file(self, text), file(reference, text));
        }
        for d in self.execution_differences(reference) {
            check(d.field, d.found, d.expected);
        }
        check(
            "batch_size",
            self.batch_size.to_string(),
            reference.batch_size.to_string(),
        );
        check(
            "image_size",
            self.image_size.to_string(),
            reference.image_size.to_string(),
        );
        if !llm_and_vision {
            check(
                "precision",
                self.precision.to_string(),
                reference.precision.to_string(),
            );
        }
        check(
            "memory_format",
            self.memory_format.to_string(),
            reference.memory_format.to_string(),
        );
        check(
            "warmup_batches",
            self.warmup_batches.to_string(),
            reference.warmup_batches.to_string(),
        );
        // Floats compare by their exact bits through their shortest round-trip text.
        check(
            "window_s",
            self.window_s.to_string(),
            reference.window_s.to_string(),
        );
        check(
            "start_lead_s",
            self.start_lead_s.to_string(),
            reference.start_lead_s.to_string(),
        );
        check("seed", self.seed.to_string(), reference.seed.to_string());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn sample() -> WorkerConfig {
        WorkerConfig::article(Mode::Timeslice, Workload::Train, 7)
    }

    #[test]
    fn device_choices_round_trip_through_text_and_json() {
        for (text, choice) in [
            ("auto", DeviceChoice::Auto),
            ("cpu", DeviceChoice::Cpu),
            ("cuda:0", DeviceChoice::Cuda(0)),
            ("cuda:7", DeviceChoice::Cuda(7)),
        ] {
            assert_eq!(text.parse::<DeviceChoice>().unwrap(), choice);
            assert_eq!(choice.to_string(), text);
            let json = serde_json::to_string(&choice).unwrap();
            assert_eq!(json, format!("\"{text}\""));
            assert_eq!(serde_json::from_str::<DeviceChoice>(&json).unwrap(), choice);
        }
        assert_eq!(
            "cuda".parse::<DeviceChoice>().unwrap(),
            DeviceChoice::Cuda(0)
        );
        for bad in ["gpu", "cuda:", "cuda:x", "cuda:-1", "cuda:+1", ""] {
            let err = bad.parse::<DeviceChoice>().unwrap_err();
            assert!(err.contains("expected auto, cpu or cuda:N"), "{bad}: {err}");
        }
        assert!(serde_json::from_str::<DeviceChoice>("\"gpu\"").is_err());
    }

    #[test]
    fn a_timeslice_interval_is_named_recorded_and_compared() {
        for i in TimesliceInterval::ALL {
            assert_eq!(i.as_str().parse::<TimesliceInterval>().unwrap(), i);
            let json = serde_json::to_string(&i).unwrap();
            assert_eq!(json, format!("\"{i}\""));
        }
        assert_eq!(TimesliceInterval::Short.driver_name(), "Short");
        let e = "Short".parse::<TimesliceInterval>().unwrap_err();
        assert!(e.contains("expected default, short, medium or long"), "{e}");
        let a = sample();
        let mut b = sample();
        // A document without the field reads as none declared, and writes none.
        let text = serde_json::to_string(&a).unwrap();
        assert!(!text.contains("timeslice_interval"), "{text}");
        b.timeslice_interval = Some(TimesliceInterval::Long);
        let text = serde_json::to_string(&b).unwrap();
        assert!(text.contains("\"timeslice_interval\":\"long\""), "{text}");
        let diffs: Vec<String> = b.differences(&a).iter().map(ToString::to_string).collect();
        assert_eq!(diffs, ["timeslice_interval long != none"]);
    }

    #[test]
    fn workload_is_not_a_difference() {
        let a = sample();
        let mut b = sample();
        b.workload = Workload::Infer;
        assert!(a.differences(&b).is_empty());
    }

    #[test]
    fn every_other_field_is_named() {
        let a = sample();
        let mut b = sample();
        b.batch_size = 64;
        b.window_s = 45.5;
        let diffs = b.differences(&a);
        let text: Vec<String> = diffs.iter().map(ToString::to_string).collect();
        assert_eq!(text, ["batch_size 64 != 32", "window_s 45.5 != 45"]);
    }

    #[test]
    fn model_execution_and_model_file_are_named() {
        let reference = sample();
        let mut other = sample();
        other.model = "resnet50".into();
        other.execution = Execution::CudaGraph;
        other.parameter_count = Some(25_557_032);
        let text: Vec<String> = other
            .differences(&reference)
            .iter()
            .map(ToString::to_string)
            .collect();
        // parameter_count is unknown in `a`: not a difference by itself.
        assert_eq!(
            text,
            [
                "model resnet50 != resnet18",
                "execution cuda-graph != eager"
            ]
        );

        let mut known = sample();
        known.parameter_count = Some(11_689_512);
        let mut off_by_one = known.clone();
        off_by_one.parameter_count = Some(11_689_513);
        assert_eq!(
            off_by_one.differences(&known)[0].to_string(),
            "parameter_count 11689513 != 11689512"
        );

        let file = ModelFile {
            sha256: "ab".repeat(32),
            input_shape: [1, 28, 28],
            num_classes: 10,
        };
        let mut script = sample();
        script.model = TORCHSCRIPT_MODEL.into();
        script.model_file = Some(file.clone());
        let mut other_file = script.clone();
        other_file.model_file = Some(ModelFile {
            sha256: "cd".repeat(32),
            input_shape: [3, 28, 28],
            ..file
        });
        let fields: Vec<&str> = other_file
            .differences(&script)
            .iter()
            .map(|d| d.field)
            .collect();
        assert_eq!(fields, ["model_file.sha256", "model_file.input_shape"]);
        assert_eq!(script.model_label(), "torchscript:abababababab");
        assert_eq!(reference.model_label(), "resnet18");
    }

    #[test]
    fn a_per_workload_model_declaration_lets_workloads_differ_only_as_declared() {
        let declared: ModelDeclaration = "train=resnet50,infer=resnet18".parse().unwrap();
        let map = declared.per_workload().cloned();
        let worker = |workload: Workload| {
            let mut c = sample();
            c.workload = workload;
            c.model = declared.model_for(workload).unwrap().to_owned();
            c.parameter_count = Some(if workload == Workload::Train {
                25_557_032
            } else {
                11_689_512
            });
            c.model_by_workload.clone_from(&map);
            c
        };
        let (train, infer) = (worker(Workload::Train), worker(Workload::Infer));
        assert!(infer.differences(&train).is_empty());
        assert!(train.differences(&infer).is_empty());

        // A trainer that runs another model than the one declared for training.
        let mut rogue = worker(Workload::Train);
        rogue.model = "resnet18".into();
        let text: Vec<String> = rogue
            .differences(&infer)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(text, ["model resnet18 != resnet50 (declared for train)"]);
        let text: Vec<String> = rogue
            .differences(&train)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(text, ["model resnet18 != resnet50 (declared for train)"]);

        // A worker given another declaration, or none.
        let mut other = worker(Workload::Infer);
        other.model_by_workload = None;
        let fields: Vec<&str> = other.differences(&train).iter().map(|d| d.field).collect();
        assert_eq!(fields, ["model_by_workload"]);
        // Without a declaration, different models are a difference whatever the workloads.
        let mut plain_train = sample();
        plain_train.model = "resnet50".into();
        let mut plain_infer = sample();
        plain_infer.workload = Workload::Infer;
        let fields: Vec<&str> = plain_infer
            .differences(&plain_train)
            .iter()
            .map(|d| d.field)
            .collect();
        assert_eq!(fields, ["model"]);
    }

    /// A graph-captured LLM endpoint beside eager trainers: one execution per
    /// workload, identical in every worker, each worker running its own workload's entry.
    #[test]
    fn a_per_workload_execution_lets_workloads_differ_only_as_declared() {
        let declared: ExecutionDeclaration = "serve-llm=cuda-graph,train=eager".parse().unwrap();
        assert_eq!(declared.to_string(), "train=eager,serve-llm=cuda-graph");
        assert_eq!(
            declared
                .to_string()
                .parse::<ExecutionDeclaration>()
                .unwrap(),
            declared
        );
        let map = declared.per_workload().cloned();
        let worker = |workload: Workload| {
            let mut c = sample();
            c.workload = workload;
            c.execution = declared.execution_for(workload).unwrap();
            c.execution_by_workload.clone_from(&map);
            c
        };
        let (train, server) = (worker(Workload::Train), worker(Workload::ServeLlm));
        assert_eq!(server.execution, Execution::CudaGraph);
        assert!(server.differences(&train).is_empty());
        assert!(train.differences(&server).is_empty());
        // A trainer that captured a graph though eager was declared for training.
        let mut rogue = worker(Workload::Train);
        rogue.execution = Execution::CudaGraph;
        let text: Vec<String> = rogue
            .differences(&server)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(text, ["execution cuda-graph != eager (declared for train)"]);
        // A worker given no declaration.
        let mut other = worker(Workload::Train);
        other.execution_by_workload = None;
        let fields: Vec<&str> = other.differences(&server).iter().map(|d| d.field).collect();
        assert_eq!(fields, ["execution_by_workload", "execution"]);
        // Without a declaration, executions differ whatever the workloads.
        let mut plain = sample();
        plain.workload = Workload::ServeLlm;
        plain.execution = Execution::CudaGraph;
        let fields: Vec<&str> = plain
            .differences(&sample())
            .iter()
            .map(|d| d.field)
            .collect();
        assert_eq!(fields, ["execution"]);
    }

    #[test]
    fn execution_declarations_parse_and_refuse() {
        assert_eq!(
            "cuda-graph".parse::<ExecutionDeclaration>().unwrap(),
            ExecutionDeclaration::One(Execution::CudaGraph)
        );
        let two: ExecutionDeclaration = "train=eager, infer=cuda-graph".parse().unwrap();
        assert_eq!(
            two.execution_for(Workload::Infer).unwrap(),
            Execution::CudaGraph
        );
        let e = two.execution_for(Workload::Serve).unwrap_err().to_string();
        assert!(e.contains("names no execution for serve workers"), "{e}");
        for bad in [
            "train=eager,train=cuda-graph",
            "train",
            "fast",
            "train=fast",
            "gpu=eager,x",
        ] {
            assert!(bad.parse::<ExecutionDeclaration>().is_err(), "{bad}");
        }
        let e = "train=eager,train=cuda-graph"
            .parse::<ExecutionDeclaration>()
            .unwrap_err()
            .to_string();
        assert!(e.contains("names train twice"), "{e}");
    }

    #[test]
    fn model_declarations_parse_and_refuse() {
        assert_eq!(
            "resnet50".parse::<ModelDeclaration>().unwrap(),
            ModelDeclaration::One("resnet50".into())
        );
        let d: ModelDeclaration = " infer = resnet18 , train=resnet50".parse().unwrap();
        assert_eq!(d.to_string(), "train=resnet50,infer=resnet18");
        assert_eq!(d.model_for(Workload::Infer).unwrap(), "resnet18");
        let only_train: ModelDeclaration = "train=resnet50".parse().unwrap();
        let err = only_train.model_for(Workload::Infer).unwrap_err();
        assert!(err.contains("no model for infer"), "{err}");
        for (bad, says) in [
            ("", "empty"),
            ("resnet18,resnet50", "several models"),
            ("train=resnet50,resnet18", "workload=NAME"),
            ("fly=resnet18", "unknown workload"),
            ("train=", "no model for train"),
            ("train=a,train=b", "twice"),
        ] {
            let err = bad.parse::<ModelDeclaration>().unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
        for e in Execution::ALL {
            assert_eq!(e.as_str().parse::<Execution>().unwrap(), e);
            assert_eq!(
                serde_json::to_string(&e).unwrap(),
                format!("\"{}\"", e.as_str())
            );
        }
        assert!(
            "graph"
                .parse::<Execution>()
                .unwrap_err()
                .message()
                .contains("cuda-graph")
        );
    }

    #[test]
    fn documents_without_the_new_fields_read_as_eager_and_unknown() {
        let mut value = serde_json::to_value(sample()).unwrap();
        let object = value.as_object_mut().unwrap();
        for key in [
            "execution",
            "parameter_count",
            "model_by_workload",
            "model_file",
        ] {
            object.remove(key);
        }
        let old: WorkerConfig = serde_json::from_value(value).unwrap();
        assert_eq!(old, sample());
        assert_eq!(old.execution, Execution::Eager);
    }

    /// A `config.serve_llm` written before the request lengths reads as fixed
    /// lengths; the new fields round-trip.
    #[test]
    fn serve_llm_configs_without_lengths_read_as_fixed() {
        let old = r#"{"rate_per_s":15.0,"arrivals":"poisson","arrivals_file":null,"seed":0,
            "prompt_tokens":32,"output_tokens":16,"max_batch":8,"kv_budget_tokens":512,
            "context_tokens":64,"policy":"fcfs_prefill_first","ttft_slo_ms":200.0,
            "tpot_slo_ms":20.0}"#;
        let c: ServeLlmConfig = serde_json::from_str(old).unwrap();
        assert_eq!(c.lengths, LLM_LENGTHS_FIXED);
        assert_eq!((c.prompt_tokens_max, c.output_tokens_max), (None, None));
        let drawn = ServeLlmConfig {
            lengths: LLM_LENGTHS_UNIFORM.to_owned(),
            prompt_tokens_max: Some(48),
            output_tokens_max: Some(32),
            ..c
        };
        let text = serde_json::to_string(&drawn).unwrap();
        assert!(
            text.contains(r#""lengths":"uniform","prompt_tokens_max":48"#),
            "{text}"
        );
        assert_eq!(
            serde_json::from_str::<ServeLlmConfig>(&text).unwrap(),
            drawn
        );
    }

    #[test]
    fn modes_round_trip_through_text_and_json() {
        for mode in Mode::ALL {
            assert_eq!(mode.as_str().parse::<Mode>().unwrap(), mode);
            let json = serde_json::to_string(&mode).unwrap();
            assert_eq!(json, format!("\"{}\"", mode.as_str()));
        }
        assert!(
            "time-slice"
                .parse::<Mode>()
                .unwrap_err()
                .message()
                .contains("time-slice")
        );
    }
}
