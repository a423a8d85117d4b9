//! The MPS share NVIDIA's device plugin gives each client.

use coload_cohort_schema::{DeclaredShare, MIB, SharePolicy};

/// The device plugin's share for `replicas: N` on a GPU of `memory_total_bytes` (NVML's
/// total, as the plugin reads it): `100 / N` percent of the threads and `total / N` of the
/// memory in whole MiB, both rounded down, exactly as `daemon.go` computes them
/// (`fmt.Sprintf("%d", 100/replicas)`, `fmt.Sprintf("%vM", total/replicas/1024/1024)`).
/// `replicas` must be at least 1.
#[must_use]
pub fn plugin_share(replicas: u32, memory_total_bytes: Option<u64>) -> DeclaredShare {
    let n = replicas.max(1);
    DeclaredShare {
        policy: SharePolicy::Replicas,
        replicas: Some(n),
        active_thread_percentage: Some(100 / n),
        pinned_memory_limit_bytes: memory_total_bytes.map(|total| total / u64::from(n) / MIB * MIB),
    }
}
