//! What a coload worker actually got: the device behind its CUDA ordinal, whether that matches
//! the declared sharing mode, device-wide telemetry during the window, and host facts.
//!
//! - [`identify`] maps `CUDA_VISIBLE_DEVICES` / `NVIDIA_VISIBLE_DEVICES` and the workload's
//!   `cuda:N` to the NVML handle behind it (a whole GPU or a MIG device) and fills
//!   `worker.json`'s `device`.
//! - [`visible`] is the one resolver of visible-device lists (`CUDA_VISIBLE_DEVICES` entries:
//!   indices, `GPU-` UUIDs and unique prefixes, `MIG-` UUIDs, the pre-R470
//!   `MIG-GPU-<uuid>/<gi>/<ci>`) against a [`Topology`]: the GPUs and MIG devices of a node,
//!   from any [`NvmlSource`] ([`Topology::from_nvml`]) or from saved `nvidia-smi -L` and
//!   `nvidia-smi --query-gpu=index,uuid,mig.mode.current --format=csv` text
//!   ([`Topology::from_listing`], [`Topology::with_query_csv`]). [`identify`] uses it; so can a
//!   launcher that plans a cohort on a node it only has the listing of.
//! - [`MigProfile`] reads MIG profiles as NVIDIA names them (`1g.10gb`, `1c.3g.40gb`,
//!   `1g.10gb+me`), GPU instance and compute instance apart.
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
//!
//! Planning from a node's saved listing, without NVML:
//!
//! ```
//! use coload_device::{FakeNvml, Topology, visible};
//!
//! let listing = "GPU 0: NVIDIA H200 (UUID: GPU-c10c-0000)\n  \
//!                  MIG 1g.18gb     Device  0: (UUID: MIG-2f5c-0000)\n  \
//!                  MIG 1g.18gb     Device  1: (UUID: MIG-2f5c-0001)\n\
//!                GPU 1: NVIDIA H200 (UUID: GPU-c10c-1111)\n";
//! let csv = "index, uuid, mig.mode.current\n0, GPU-c10c-0000, Enabled\n1, GPU-c10c-1111, Enabled\n";
//! let node = Topology::from_listing(listing)?.with_query_csv(csv)?;
//! // GPU 1 is in MIG mode without instances: it offers CUDA nothing.
//! assert_eq!(visible::all_devices(&node).len(), 2);
//! let worker = visible::resolve(&node, "MIG-2f5c-0001")?;
//! assert_eq!(worker[0].gpu.uuid, "GPU-c10c-0000");
//! // The same node as a fake NVML, for tests of what runs on it.
//! let nvml = FakeNvml::from_topology(&node);
//! assert_eq!(Topology::from_nvml(&nvml)?.gpus.len(), 2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod activity;
mod allocation;
mod error;
mod fake;
mod gpm;
mod host;
mod identify;
mod mig;
mod nvml;
mod share;
mod telemetry;
mod topology;
pub mod visible;

pub use activity::{
    Activity, ActivityOptions, DEFAULT_GPM_INTERVAL_S, GpmScopeStatus, MAX_GPM_INTERVAL_S,
    MIN_GPM_INTERVAL_S, MigTarget, gpm_not_sampled,
};
pub use allocation::{
    SharingFacts, check_allocation, other_compute_processes, other_compute_processes_with,
};
pub use error::{DeviceError, NvmlCode, NvmlError};
pub use fake::FakeNvml;
pub use gpm::GpmTarget;
pub use host::{
    DEFAULT_MPS_PIPE_DIRECTORY, HostSnapshot, IDENTITY_VARIABLES, host_info, host_snapshot,
    mps_client, scheduler_identity,
};
pub use identify::{DeviceReport, VisibleEnv, identify, identify_with};
pub use mig::MigProfile;
pub use nvml::{
    ComputeProcess, GpuFacts, MigEnumeration, MigFacts, NvmlSource, NvmlTarget, RealNvml,
    enumerate_mig_devices, mig_profile_from_name,
};
pub use share::{
    MEMORY_FLOOR_FRACTION, MEMORY_SLACK_BYTES, SM_SLACK, check_share, mps_environment,
    mps_environment_from, physical_sm_count,
};
pub use telemetry::{
    DEFAULT_RATE_HZ, SamplerOutput, THROTTLE_REASONS, TelemetrySampler, samples_in_window,
    summarize, throttle_reason_names,
};
pub use topology::{EnumerationWarning, ListingError, Topology, TopologyGpu};
