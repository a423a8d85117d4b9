//! Why the numbers are what they are: GPU activity counters (NVML GPM) and energy.
//!
//! GPM (GPU Performance Monitoring, Hopper and later) gives rates between two samples of the
//! GPU's performance counters: how busy the SMs were, how full they were (occupancy), how much of
//! the DRAM bandwidth was used. Energy comes from NVML's total energy counter (millijoules since
//! the driver loaded). Raw GPM readings go to `gpm.jsonl` ([`GpmRecord`], one line per reading
//! and scope); energy readings ride along in `telemetry.jsonl`
//! ([`crate::TelemetrySample::energy_mj`]). `worker.json` carries their window summaries
//! ([`GpmReport`], [`EnergyReport`]).
//!
//! Device-wide figures describe the whole GPU: under time-slicing and MPS they cannot be
//! attributed to one Pod. A MIG worker also gets figures of its own GPU instance where the driver
//! offers them.
//!
//! The two rules here ([`GpmStats::over`] and [`energy_mj_at`]) are used by the worker for its
//! window and by the summarizer for the common interval, so both say the same thing.

use serde::{Deserialize, Serialize};

/// The default GPM sampling interval, seconds. GPM metrics are rates between two samples; one
/// second gives 45 readings over the article's window at a negligible cost to the workers.
pub const DEFAULT_GPM_INTERVAL_S: f64 = 1.0;

/// The shortest GPM interval accepted, seconds: NVML computes the rates from counter deltas, and
/// over much shorter intervals they mostly measure the sampling jitter.
pub const MIN_GPM_INTERVAL_S: f64 = 0.1;

/// The longest GPM interval accepted, seconds.
pub const MAX_GPM_INTERVAL_S: f64 = 3600.0;

use crate::telemetry::MeanMax;

/// Bytes in a MiB: NVML reports PCIe and NVLink GPM rates in MiB/s; coload records bytes/s.
pub const BYTES_PER_MIB: f64 = 1024.0 * 1024.0;

/// What a figure describes: the whole physical GPU, or the MIG GPU instance the worker ran on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ActivityScope {
    /// The whole physical GPU (every process and MIG instance on it).
    Device,
    /// One MIG GPU instance.
    Mig,
}

impl ActivityScope {
    /// The name used in documents.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            ActivityScope::Device => "device",
            ActivityScope::Mig => "mig",
        }
    }
}

impl std::fmt::Display for ActivityScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The GPM metrics coload samples, one `T` each: [`GpmValues`] for one reading, [`GpmStats`] for
/// their mean and maximum. A metric NVML did not answer is `None`.
///
/// Utilizations are percent (0-100) of the interval between two GPM samples; occupancy is the
/// percent of the maximum resident warps; DRAM bandwidth is the percent of the theoretical peak.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(bound(deserialize = "T: Deserialize<'de>"))]
pub struct GpmMetrics<T> {
    /// Graphics engine (any work on the GPU) utilization, percent (`NVML_GPM_METRIC_GRAPHICS_UTIL`).
    #[serde(default)]
    pub graphics_util_pct: Option<T>,
    /// SM utilization: the share of SMs busy, percent (`NVML_GPM_METRIC_SM_UTIL`).
    #[serde(default)]
    pub sm_util_pct: Option<T>,
    /// SM occupancy: resident warps against the maximum, percent (`NVML_GPM_METRIC_SM_OCCUPANCY`).
    #[serde(default)]
    pub sm_occupancy_pct: Option<T>,
    /// Any tensor-core activity, percent (`NVML_GPM_METRIC_ANY_TENSOR_UTIL`).
    #[serde(default)]
    pub any_tensor_util_pct: Option<T>,
    /// DRAM bandwidth used against the theoretical maximum, percent (`NVML_GPM_METRIC_DRAM_BW_UTIL`).
    #[serde(default)]
    pub dram_bw_util_pct: Option<T>,
    /// Non-tensor FP32 activity, percent (`NVML_GPM_METRIC_FP32_UTIL`).
    #[serde(default)]
    pub fp32_util_pct: Option<T>,
    /// Non-tensor FP16 activity, percent (`NVML_GPM_METRIC_FP16_UTIL`).
    #[serde(default)]
    pub fp16_util_pct: Option<T>,
    /// Non-tensor FP64 activity, percent (`NVML_GPM_METRIC_FP64_UTIL`).
    #[serde(default)]
    pub fp64_util_pct: Option<T>,
    /// PCIe traffic to the GPU, bytes/s (`NVML_GPM_METRIC_PCIE_RX_PER_SEC`, MiB/s x 2^20).
    #[serde(default)]
    pub pcie_rx_bytes_per_s: Option<T>,
    /// PCIe traffic from the GPU, bytes/s (`NVML_GPM_METRIC_PCIE_TX_PER_SEC`, MiB/s x 2^20).
    #[serde(default)]
    pub pcie_tx_bytes_per_s: Option<T>,
    /// NVLink receive over all links, bytes/s (`NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC`).
    #[serde(default)]
    pub nvlink_rx_bytes_per_s: Option<T>,
    /// NVLink transmit over all links, bytes/s (`NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC`).
    #[serde(default)]
    pub nvlink_tx_bytes_per_s: Option<T>,
}

/// One GPM reading: each metric over the interval between two samples.
pub type GpmValues = GpmMetrics<f64>;

/// Mean and maximum of each GPM metric over a set of readings.
pub type GpmStats = GpmMetrics<MeanMax>;

/// The names of the GPM metrics, in field order (the JSON keys).
pub const GPM_METRIC_NAMES: [&str; 12] = [
    "graphics_util_pct",
    "sm_util_pct",
    "sm_occupancy_pct",
    "any_tensor_util_pct",
    "dram_bw_util_pct",
    "fp32_util_pct",
    "fp16_util_pct",
    "fp64_util_pct",
    "pcie_rx_bytes_per_s",
    "pcie_tx_bytes_per_s",
    "nvlink_rx_bytes_per_s",
    "nvlink_tx_bytes_per_s",
];

impl<T> Default for GpmMetrics<T> {
    fn default() -> Self {
        GpmMetrics {
            graphics_util_pct: None,
            sm_util_pct: None,
            sm_occupancy_pct: None,
            any_tensor_util_pct: None,
            dram_bw_util_pct: None,
            fp32_util_pct: None,
            fp16_util_pct: None,
            fp64_util_pct: None,
            pcie_rx_bytes_per_s: None,
            pcie_tx_bytes_per_s: None,
            nvlink_rx_bytes_per_s: None,
            nvlink_tx_bytes_per_s: None,
        }
    }
}

impl<T> GpmMetrics<T> {
    /// Every metric with its name, in [`GPM_METRIC_NAMES`] order.
    #[must_use]
    pub fn fields(&self) -> [(&'static str, Option<&T>); 12] {
        let v = [
            self.graphics_util_pct.as_ref(),
            self.sm_util_pct.as_ref(),
            self.sm_occupancy_pct.as_ref(),
            self.any_tensor_util_pct.as_ref(),
            self.dram_bw_util_pct.as_ref(),
            self.fp32_util_pct.as_ref(),
            self.fp16_util_pct.as_ref(),
            self.fp64_util_pct.as_ref(),
            self.pcie_rx_bytes_per_s.as_ref(),
            self.pcie_tx_bytes_per_s.as_ref(),
            self.nvlink_rx_bytes_per_s.as_ref(),
            self.nvlink_tx_bytes_per_s.as_ref(),
        ];
        let mut i = 0;
        v.map(|x| {
            let name = GPM_METRIC_NAMES[i];
            i += 1;
            (name, x)
        })
    }

    /// Builds metrics field by field: `f(i)` gives the metric named `GPM_METRIC_NAMES[i]`.
    #[must_use]
    pub fn from_fn(mut f: impl FnMut(usize) -> Option<T>) -> Self {
        GpmMetrics {
            graphics_util_pct: f(0),
            sm_util_pct: f(1),
            sm_occupancy_pct: f(2),
            any_tensor_util_pct: f(3),
            dram_bw_util_pct: f(4),
            fp32_util_pct: f(5),
            fp16_util_pct: f(6),
            fp64_util_pct: f(7),
            pcie_rx_bytes_per_s: f(8),
            pcie_tx_bytes_per_s: f(9),
            nvlink_rx_bytes_per_s: f(10),
            nvlink_tx_bytes_per_s: f(11),
        }
    }

    /// The metric named `name` (one of [`GPM_METRIC_NAMES`]).
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&T> {
        self.fields()
            .into_iter()
            .find(|(n, _)| *n == name)
            .and_then(|(_, v)| v)
    }
}

/// One line of `gpm.jsonl`: the GPM metrics between two samples of one scope.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GpmRecord {
    /// Device-wide, or the worker's MIG GPU instance.
    pub scope: ActivityScope,
    /// The MIG GPU instance id, for scope `mig`.
    #[serde(default)]
    pub gpu_instance_id: Option<u32>,
    /// When the first of the two samples was taken.
    pub start_unix_ns: u64,
    /// When the second was taken.
    pub end_unix_ns: u64,
    /// The metrics over `[start_unix_ns, end_unix_ns]`.
    #[serde(flatten)]
    pub metrics: GpmValues,
}

/// GPM in `worker.json`: whether it could be sampled, and each scope's figures over the window.
///
/// An unsupported GPU (before Hopper), a driver without the calls, or a process not permitted to
/// read the counters is a fact recorded here once, not a warning.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpmReport {
    /// The sampling interval asked for, seconds; `null` when GPM sampling was turned off.
    pub interval_s: Option<f64>,
    /// Whether GPM could be sampled device-wide.
    pub supported: bool,
    /// Why not, when not.
    #[serde(default)]
    pub reason: Option<String>,
    /// One entry per scope tried: `device`, and `mig` when the worker ran on a MIG device.
    #[serde(default)]
    pub scopes: Vec<GpmScopeReport>,
}

/// One scope's GPM figures over the worker's window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpmScopeReport {
    /// Device-wide or the MIG GPU instance.
    pub scope: ActivityScope,
    /// The MIG GPU instance id, for scope `mig`.
    #[serde(default)]
    pub gpu_instance_id: Option<u32>,
    /// Whether this scope could be sampled.
    pub supported: bool,
    /// Why not, or why some readings failed.
    #[serde(default)]
    pub reason: Option<String>,
    /// Readings lying entirely inside the window.
    pub samples: u64,
    /// Readings that failed after sampling had started.
    #[serde(default)]
    pub failed_reads: u64,
    /// Mean (interval-weighted) and maximum of each metric over those readings.
    pub metrics: GpmStats,
}

/// Energy over one interval from NVML's total energy counter.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EnergySpan {
    /// The counter at the interval's start, millijoules (interpolated between the two readings
    /// around it).
    pub start_mj: f64,
    /// The counter at the interval's end, millijoules.
    pub end_mj: f64,
    /// `(end - start) / 1000`.
    pub joules: f64,
    /// Joules over the interval's seconds.
    pub mean_power_w: f64,
}

/// Energy in `worker.json`, over the worker's window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnergyReport {
    /// One entry per scope tried: `device`, and `mig` when the worker ran on a MIG device.
    pub scopes: Vec<EnergyScopeReport>,
}

/// One scope's energy over the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnergyScopeReport {
    /// Device-wide or the MIG GPU instance.
    pub scope: ActivityScope,
    /// The counter over the window; `null` when not available.
    pub window: Option<EnergySpan>,
    /// Why not available, when not (a driver that offers no per-MIG counter says so here).
    #[serde(default)]
    pub reason: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_names_match_the_json_keys() {
        let v = GpmValues::from_fn(|i| Some(i as f64));
        let json = serde_json::to_value(v).unwrap();
        for (i, (name, value)) in v.fields().into_iter().enumerate() {
            assert_eq!(json[name], serde_json::json!(i as f64), "{name}");
            assert_eq!(value.copied(), Some(i as f64));
            assert_eq!(v.get(name).copied(), Some(i as f64));
        }
        assert_eq!(json.as_object().unwrap().len(), GPM_METRIC_NAMES.len());
    }
}
