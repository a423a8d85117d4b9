//! Device telemetry: raw samples (`telemetry.jsonl`) and their summary in `worker.json`.
//!
//! Every figure here is device-wide: under time-slicing NVML cannot attribute power, clocks or
//! utilization to one process, so these describe the GPU the worker shared, not the worker.

use serde::{Deserialize, Serialize};

/// One raw sample of the physical GPU, as NVML reported it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct TelemetrySample {
    /// When the sample was taken.
    pub t_unix_ns: u64,
    /// Board power draw, watts.
    pub power_w: Option<f64>,
    /// Streaming-multiprocessor clock, MHz.
    pub sm_clock_mhz: Option<u32>,
    /// GPU temperature, degrees Celsius.
    pub temperature_c: Option<u32>,
    /// Device memory in use by all processes, bytes.
    pub memory_used_bytes: Option<u64>,
    /// Device-wide SM utilization over NVML's last sample period, percent.
    pub gpu_util_pct: Option<u32>,
    /// Device-wide memory-controller utilization, percent.
    pub memory_util_pct: Option<u32>,
    /// NVML clock-event (throttle) reason bits.
    pub throttle_reasons: Option<u64>,
    /// NVML's total energy counter of the physical GPU, millijoules since the driver loaded.
    #[serde(default)]
    pub energy_mj: Option<u64>,
    /// The same counter of the worker's MIG device, where the driver offers one.
    #[serde(default)]
    pub mig_energy_mj: Option<u64>,
}

/// Mean and maximum of a series.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MeanMax {
    /// Arithmetic mean.
    pub mean: f64,
    /// Largest value.
    pub max: f64,
}

/// Minimum and mean of a series.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MinMean {
    /// Smallest value.
    pub min: f64,
    /// Arithmetic mean.
    pub mean: f64,
}

/// Maximum of a series.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Max {
    /// Largest value.
    pub max: f64,
}

/// Device-wide telemetry over the window, in `worker.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TelemetrySummary {
    /// Always `device`: these figures describe the whole GPU (or MIG parent), not this worker.
    #[serde(default = "device_scope")]
    pub scope: String,
    /// Samples taken during the window.
    pub samples: u64,
    /// Sampling rate asked for, hertz.
    #[serde(default)]
    pub rate_hz: Option<f64>,
    /// Board power, watts.
    pub power_w: Option<MeanMax>,
    /// Temperature, degrees Celsius.
    pub temperature_c: Option<Max>,
    /// SM clock, MHz.
    pub sm_clock_mhz: Option<MinMean>,
    /// Device memory in use by all processes, bytes.
    pub memory_used_bytes: Option<Max>,
    /// Device-wide SM utilization, percent.
    #[serde(default)]
    pub gpu_util_pct: Option<MeanMax>,
    /// Names of the throttle reasons seen in any sample.
    pub throttle_reasons: Vec<String>,
}

fn device_scope() -> String {
    "device".to_owned()
}
