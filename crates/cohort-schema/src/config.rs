//! The cohort configuration every worker declares, and the rule for comparing two of them.

use std::fmt;

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
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Mode::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown mode `{s}` (expected exclusive, mig, timeslice, mig-timeslice or mps)"
                )
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
    /// Takes device memory up to `--hog-bytes` (or until CUDA refuses) and holds it through the
    /// window; no samples. Shows whether a sharing mode keeps one tenant's memory from the others.
    Hog,
}

impl Workload {
    /// The name used on the command line and in documents.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Workload::Train => "train",
            Workload::Infer => "infer",
            Workload::Hog => "hog",
        }
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Workload {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "train" => Ok(Workload::Train),
            "infer" => Ok(Workload::Infer),
            "hog" => Ok(Workload::Hog),
            _ => Err(format!(
                "unknown workload `{s}` (expected train, infer or hog)"
            )),
        }
    }
}

/// Numeric precision of the workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
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
    type Err = String;

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
                .ok_or_else(|| format!("unknown device `{s}` (expected auto, cpu or cuda:N)")),
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

/// The configuration a worker declares. Every worker of a cohort must declare the same one,
/// field by field, except `workload` (a mixed cohort differs there by design).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerConfig {
    /// The sharing mode the cohort was launched under.
    pub mode: Mode,
    /// This worker's workload (the one field allowed to differ within a cohort).
    pub workload: Workload,
    /// Number of workers in the cohort.
    pub count: u32,
    /// Model name; always `resnet18` today.
    pub model: String,
    /// Images per batch.
    pub batch_size: u32,
    /// Height and width of the square synthetic images.
    pub image_size: u32,
    /// Numeric precision.
    pub precision: Precision,
    /// Batches run before the barrier.
    pub warmup_batches: u32,
    /// Length of the timed window, seconds.
    pub window_s: f64,
    /// Time between the leader publishing the start and the start itself, seconds.
    pub start_lead_s: f64,
    /// Seed for weights and synthetic inputs.
    pub seed: u64,
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
            warmup_batches: 20,
            window_s: 45.0,
            start_lead_s: 5.0,
            seed: 0,
        }
    }

    /// The fields on which `self` differs from `reference`, ignoring `workload`.
    ///
    /// This is the one comparison rule of the project: the barrier uses it before the start and
    /// the summarizer uses it again on the written reports.
    #[must_use]
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
        check("model", self.model.clone(), reference.model.clone());
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
        check(
            "precision",
            self.precision.to_string(),
            reference.precision.to_string(),
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
                .contains("time-slice")
        );
    }
}
