//! The MPS share a worker declares and what the CUDA runtime showed it.
//!
//! NVIDIA's device plugin, with MPS sharing at `replicas: N`, caps every client of a GPU at
//! `100 / N` percent of its threads (`set_default_active_thread_percentage`) and `total / N` of
//! its memory (`set_default_device_pinned_mem_limit`). A worker declares the share it was
//! launched under ([`DeclaredShare`]) and records what it actually got ([`ObservedShare`]: the
//! free and total memory `cudaMemGetInfo` reports and the SM count the runtime reports), so that
//! `worker.json` proves which share it ran under, also inside a Pod where the plugin set the
//! limits. The arithmetic that turns `replicas: N` into limits is [`DeclaredShare::replicas`],
//! the same integer arithmetic as the plugin's `daemon.go`.

use std::collections::BTreeMap;
use std::fmt;

use crate::error::ValueError;
use serde::{Deserialize, Serialize};

/// Bytes per MiB.
pub const MIB: u64 = 1 << 20;

/// A size in bytes, written as people and MPS write it: `20GiB`, `20538MiB`, `21474836480`.
///
/// Parsing takes a whole number of bytes, or a number with a binary (`KiB`, `MiB`, `GiB`,
/// `TiB`, also `Ki`, `Mi`, `Gi`, `Ti`) or decimal (`kB`, `MB`, `GB`, `TB`) unit. A bare `M` or
/// `G` is refused: MPS reads `20G` as 20 GiB, Kubernetes as 20 GB, and the reader cannot tell
/// which was meant. Displaying uses the largest binary unit that divides the value exactly.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ByteSize(pub u64);

impl ByteSize {
    /// The size in bytes.
    #[must_use]
    pub fn bytes(self) -> u64 {
        self.0
    }
}

const UNITS: [(&str, u64); 15] = [
    ("TiB", 1 << 40),
    ("GiB", 1 << 30),
    ("MiB", 1 << 20),
    ("KiB", 1 << 10),
    ("Ti", 1 << 40),
    ("Gi", 1 << 30),
    ("Mi", 1 << 20),
    ("Ki", 1 << 10),
    ("TB", 1_000_000_000_000),
    ("GB", 1_000_000_000),
    ("MB", 1_000_000),
    ("kB", 1_000),
    ("KB", 1_000),
    ("B", 1),
    ("", 1),
];

impl std::str::FromStr for ByteSize {
    type Err = ValueError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let text = s.trim();
        let digits = text.bytes().take_while(u8::is_ascii_digit).count();
        let (number, unit) = text.split_at(digits);
        let unit = unit.trim();
        if number.is_empty() {
            return Err(format!(
                "`{s}` is not a size: write a whole number with a unit, e.g. 20GiB or 20480MiB"
            )
            .into());
        }
        if matches!(unit, "K" | "M" | "G" | "T" | "k" | "m" | "g" | "t") {
            return Err(format!(
                "`{s}` is ambiguous: MPS reads {number}{unit} as binary, Kubernetes as decimal; \
                 write {number}{unit}iB (binary) or {number}{unit}B (decimal)",
                unit = unit.to_ascii_uppercase()
            )
            .into());
        }
        let factor = UNITS
            .iter()
            .find(|(name, _)| *name == unit)
            .map(|(_, f)| *f)
            .ok_or_else(|| {
                ValueError::from(format!(
                    "`{s}` has an unknown unit `{unit}` (use B, KiB, MiB, GiB, TiB, MB, GB, TB)"
                ))
            })?;
        number
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(factor))
            .map(ByteSize)
            .ok_or_else(|| format!("`{s}` is more bytes than this tool can count").into())
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (name, factor) in &UNITS[..4] {
            if self.0 >= *factor && self.0.is_multiple_of(*factor) {
                return write!(f, "{}{name}", self.0 / factor);
            }
        }
        write!(f, "{}", self.0)
    }
}

impl Serialize for ByteSize {
    /// As its text (`20GiB`), so that a flag holding one renders as it was typed.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// How an MPS share was declared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SharePolicy {
    /// No per-client limit: every client may use all SMs and all memory (`--mps-unlimited`).
    Unlimited,
    /// The device plugin's values for `replicas: N` (`--mps-replicas N`).
    Replicas,
    /// A thread percentage and a memory limit given explicitly (`--mps-threads`, `--mps-memory`).
    Explicit,
}

impl SharePolicy {
    /// The name used in documents.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            SharePolicy::Unlimited => "unlimited",
            SharePolicy::Replicas => "replicas",
            SharePolicy::Explicit => "explicit",
        }
    }
}

/// The share each MPS client (each worker) was declared to run under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeclaredShare {
    /// How it was declared.
    pub policy: SharePolicy,
    /// `N` of the device plugin's `replicas: N`, for [`SharePolicy::Replicas`].
    pub replicas: Option<u32>,
    /// The active thread percentage per client (`null`: no limit, 100 %).
    pub active_thread_percentage: Option<u32>,
    /// The pinned device memory limit per client, bytes (`null`: no limit, or the device's
    /// memory was not known when the share was declared).
    pub pinned_memory_limit_bytes: Option<u64>,
}

impl DeclaredShare {
    /// No per-client limit.
    #[must_use]
    pub fn unlimited() -> Self {
        DeclaredShare {
            policy: SharePolicy::Unlimited,
            replicas: None,
            active_thread_percentage: None,
            pinned_memory_limit_bytes: None,
        }
    }

    /// An explicit thread percentage and memory limit.
    #[must_use]
    pub fn explicit(active_thread_percentage: u32, pinned_memory_limit_bytes: u64) -> Self {
        DeclaredShare {
            policy: SharePolicy::Explicit,
            replicas: None,
            active_thread_percentage: Some(active_thread_percentage),
            pinned_memory_limit_bytes: Some(pinned_memory_limit_bytes),
        }
    }

    /// The share in a few words, for labels: `replicas 7`, `unlimited`, `50 % threads, 8192 MiB`.
    #[must_use]
    pub fn label(&self) -> String {
        match (self.policy, self.replicas) {
            (SharePolicy::Replicas, Some(n)) => format!("replicas {n}"),
            (SharePolicy::Unlimited, _) => "unlimited".to_owned(),
            _ => {
                let threads = self
                    .active_thread_percentage
                    .map_or_else(|| "all threads".to_owned(), |p| format!("{p} % threads"));
                match self.pinned_memory_limit_bytes {
                    Some(b) => format!("{threads}, {} MiB", b / MIB),
                    None => threads,
                }
            }
        }
    }

    /// The share in words: `replicas 7: 14 % of the threads, 20538 MiB per client`.
    #[must_use]
    pub fn describe(&self) -> String {
        let threads = self.active_thread_percentage.map_or_else(
            || "all threads".to_owned(),
            |p| format!("{p} % of the threads"),
        );
        let memory = match (self.policy, self.pinned_memory_limit_bytes) {
            (_, Some(b)) => format!("{} MiB of memory", b / MIB),
            (SharePolicy::Replicas, None) => "1/N of the memory (device size unknown)".to_owned(),
            (_, None) => "all memory".to_owned(),
        };
        let head = match (self.policy, self.replicas) {
            (SharePolicy::Replicas, Some(n)) => format!("device-plugin replicas {n}"),
            (policy, _) => policy.as_str().to_owned(),
        };
        format!("{head}: {threads}, {memory} per client")
    }
}

/// What the CUDA runtime reported to the worker, before it built its workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObservedShare {
    /// `cudaMemGetInfo`'s free memory, bytes. Under an MPS pinned memory limit this is at most
    /// the limit, while [`ObservedShare::memory_total_bytes`] stays the device's size.
    pub memory_free_bytes: u64,
    /// `cudaMemGetInfo`'s total memory, bytes.
    pub memory_total_bytes: u64,
    /// The SM count the runtime reports (`cudaDevAttrMultiProcessorCount`); under an MPS active
    /// thread percentage, the SMs the client may use.
    pub sm_count: Option<u32>,
    /// The physical SM count of this GPU model, where coload knows it (`null` otherwise).
    pub physical_sm_count: Option<u32>,
}

/// The share section of `worker.json`: what the worker was told and what it got.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShareReport {
    /// The declared MPS share (`null` outside mode `mps`).
    pub declared: Option<DeclaredShare>,
    /// Every `CUDA_MPS_*` variable in the worker's environment, verbatim.
    #[serde(default)]
    pub mps_environment: BTreeMap<String, String>,
    /// What the CUDA runtime reported (`null` on the CPU or when it could not be asked).
    pub observed: Option<ObservedShare>,
    /// Why the runtime could not be asked, when it could not.
    #[serde(default)]
    pub observed_error: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_in_binary_and_decimal_units() {
        for (text, bytes) in [
            ("21474836480", 21_474_836_480),
            ("20GiB", 20 << 30),
            ("20Gi", 20 << 30),
            ("20538MiB", 20538 << 20),
            ("1TiB", 1 << 40),
            ("20GB", 20_000_000_000),
            ("512 MB", 512_000_000),
            ("7B", 7),
        ] {
            assert_eq!(text.parse::<ByteSize>().unwrap(), ByteSize(bytes), "{text}");
        }
    }

    #[test]
    fn ambiguous_and_bad_sizes_are_refused_with_a_reason() {
        let e = "20G".parse::<ByteSize>().unwrap_err();
        assert_eq!(
            e,
            "`20G` is ambiguous: MPS reads 20G as binary, Kubernetes as decimal; write 20GiB \
             (binary) or 20GB (decimal)"
        );
        assert!(
            "GiB"
                .parse::<ByteSize>()
                .unwrap_err()
                .message()
                .contains("not a size")
        );
        assert!(
            "20XB"
                .parse::<ByteSize>()
                .unwrap_err()
                .message()
                .contains("unknown unit")
        );
        assert!(
            "99999999999TiB"
                .parse::<ByteSize>()
                .unwrap_err()
                .message()
                .contains("more bytes")
        );
    }

    #[test]
    fn sizes_display_in_the_largest_exact_binary_unit_and_round_trip() {
        for (bytes, text) in [
            (20 << 30, "20GiB"),
            (20538 << 20, "20538MiB"),
            (3 << 10, "3KiB"),
            // 1.5 KiB is no whole number of any unit: plain bytes.
            (1536, "1536"),
        ] {
            assert_eq!(ByteSize(bytes).to_string(), text);
        }
        for b in [0, 1, 1023, 1 << 20, 150_754_820_096] {
            let text = ByteSize(b).to_string();
            assert_eq!(text.parse::<ByteSize>().unwrap(), ByteSize(b), "{text}");
        }
        assert_eq!(
            serde_json::to_string(&ByteSize(20 << 30)).unwrap(),
            "\"20GiB\""
        );
    }
}
