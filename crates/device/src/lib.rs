//! What a coload worker actually got: the device behind its CUDA ordinal, whether that matches
//! the declared sharing mode, device-wide telemetry during the window, and host facts.
//!
//! - [`identify`] maps `CUDA_VISIBLE_DEVICES` / `NVIDIA_VISIBLE_DEVICES` and the workload's
//!   `cuda:N` to the NVML handle behind it (a whole GPU or a MIG device) and fills
//!   `worker.json`'s `device`.
//! - [`check_allocation`] compares the declared [`Mode`](coload_cohort_schema::Mode) with what
//!   NVML sees and names every mismatch (or fails, when strict); [`check_share`] does the same
//!   for the MPS share a worker declared against what the CUDA runtime reported to it.
//! - [`TelemetrySampler`] samples the physical GPU on its own thread into a preallocated buffer:
//!   telemetry with NVML's energy counter, and GPM activity counters (device-wide and per MIG
//!   instance; see [`Activity`]) where the GPU and driver offer them.
//! - [`host_snapshot`], [`host_info`], [`scheduler_identity`] and [`mps_client`] describe the
//!   host and the scheduler.
//!
//! NVML is reached through the [`NvmlSource`] trait: [`RealNvml`] loads `libnvidia-ml.so.1` at
//! run time (nothing links it, so binaries run where it is absent) and [`FakeNvml`] scripts
//! GPUs and MIG devices for tests. This crate does not link libtorch.
//!
//! # Example
//!
//! ```
//! use coload_cohort_schema::{DeviceKind, Mode};
//! use coload_device::{FakeNvml, SharingFacts, VisibleEnv, check_allocation, identify_with};
//!
//! let nvml = FakeNvml::new()
//!     .with_gpu("GPU-5d1c", "NVIDIA H100 80GB HBM3")
//!     .with_mig("1g.10gb", "MIG-8a3f");
//! let env = VisibleEnv { cuda_visible_devices: Some("MIG-8a3f".into()), ..VisibleEnv::default() };
//! let report = identify_with(Some(&nvml), &env, DeviceKind::Cuda, Some(0));
//! assert_eq!(report.info.mig_profile.as_deref(), Some("1g.10gb"));
//!
//! let warnings = check_allocation(Mode::Exclusive, &report.info, &SharingFacts::default(), false)
//!     .unwrap();
//! assert_eq!(warnings[0].kind, "unexpected_mig_device");
//! ```

mod activity;
mod allocation;
mod error;
mod fake;
mod gpm;
mod host;
mod identify;
mod nvml;
mod share;
mod telemetry;

pub use activity::{
    Activity, ActivityOptions, DEFAULT_GPM_INTERVAL_S, GpmScopeStatus, MAX_GPM_INTERVAL_S,
    MIN_GPM_INTERVAL_S, MigTarget, gpm_not_sampled,
};
pub use allocation::{
    SharingFacts, check_allocation, other_compute_processes, other_compute_processes_with,
};
pub use error::DeviceError;
pub use fake::FakeNvml;
pub use gpm::GpmTarget;
pub use host::{
    DEFAULT_MPS_PIPE_DIRECTORY, HostSnapshot, IDENTITY_VARIABLES, host_info, host_snapshot,
    mps_client, scheduler_identity,
};
pub use identify::{DeviceReport, VisibleEnv, identify, identify_with};
pub use nvml::{
    ComputeProcess, GpuFacts, MigFacts, NvmlSource, NvmlTarget, RealNvml, mig_profile_from_name,
};
pub use share::{
    MEMORY_FLOOR_FRACTION, MEMORY_SLACK_BYTES, SM_SLACK, check_share, mps_environment,
    mps_environment_from, physical_sm_count,
};
pub use telemetry::{
    DEFAULT_RATE_HZ, SamplerOutput, THROTTLE_REASONS, TelemetrySampler, samples_in_window,
    summarize, throttle_reason_names,
};
