//! The arithmetic several coload crates share: what a worker computes over its window and the
//! summarizer over a cohort's common interval (GPM statistics, energy from NVML's counter), and
//! the MPS share NVIDIA's device plugin gives at `replicas: N`. The artifact types these fill
//! are `coload-cohort-schema`'s; the rules that compute them live here, once.
//!
//! # Example
//!
//! ```
//! use coload_measure::energy_between;
//!
//! // Counter readings (t_unix_ns, mJ): 10 W for 2 s.
//! let readings = [(0, 0), (1_000_000_000, 10_000), (2_000_000_000, 20_000)];
//! let span = energy_between(&readings, 500_000_000, 1_500_000_000).unwrap();
//! assert!((span.joules - 10.0).abs() < 1e-9);
//! ```

mod energy;
mod gpm;
mod share;

pub use energy::{device_energy_readings, energy_between, energy_mj_at, mig_energy_readings};
pub use gpm::gpm_window;
pub use share::plugin_share;

#[cfg(test)]
mod tests {
    use coload_cohort_schema::{ActivityScope, DeclaredShare, GpmRecord, GpmStats, GpmValues, MIB};

    fn rec(scope: ActivityScope, s: u64, e: u64, occ: f64) -> GpmRecord {
        GpmRecord {
            scope,
            gpu_instance_id: None,
            start_unix_ns: s,
            end_unix_ns: e,
            metrics: GpmValues {
                sm_occupancy_pct: Some(occ),
                ..GpmValues::default()
            },
        }
    }

    #[test]
    fn gpm_stats_keep_whole_readings_of_one_scope_and_weight_by_interval() {
        let records = [
            rec(ActivityScope::Device, 0, 10, 99.0), // crosses the start
            rec(ActivityScope::Device, 10, 20, 10.0),
            rec(ActivityScope::Device, 20, 50, 30.0), // three times as long
            rec(ActivityScope::Mig, 20, 30, 77.0),    // another scope
            rec(ActivityScope::Device, 50, 61, 99.0), // crosses the end
        ];
        let (stats, n) = crate::gpm_window(&records, ActivityScope::Device, 5, 60);
        assert_eq!(n, 2);
        let occ = stats.sm_occupancy_pct.unwrap();
        assert!((occ.mean - 25.0).abs() < 1e-12, "{occ:?}");
        assert!((occ.max - 30.0).abs() < 1e-12);
        assert!(stats.dram_bw_util_pct.is_none());
        let (none, n) = crate::gpm_window(&records, ActivityScope::Device, 21, 49);
        assert_eq!(n, 0);
        assert_eq!(none, GpmStats::default());
    }

    #[test]
    fn energy_is_interpolated_between_the_readings_around_each_end() {
        let readings = [(100, 1_000), (200, 2_000), (300, 4_000)];
        assert_eq!(crate::energy_mj_at(&readings, 150), Some(1_500.0));
        assert_eq!(crate::energy_mj_at(&readings, 200), Some(2_000.0));
        assert_eq!(crate::energy_mj_at(&readings, 250), Some(3_000.0));
        assert_eq!(crate::energy_mj_at(&readings, 99), None);
        assert_eq!(crate::energy_mj_at(&readings, 301), None);
        assert_eq!(crate::energy_mj_at(&[(1, 5), (2, 4)], 1), Some(5.0));
        assert_eq!(
            crate::energy_mj_at(&[(1, 5), (3, 4)], 2),
            None,
            "a reset counter"
        );
        let span = crate::energy_between(&readings, 150, 250).unwrap();
        assert!((span.joules - 1.5).abs() < 1e-12);
        // 1.5 J over 100 ns.
        assert!((span.mean_power_w - 1.5e7).abs() < 1e-3);
        assert!(crate::energy_between(&readings, 250, 150).is_none());
    }

    /// The device plugin's arithmetic (cmd/mps-control-daemon/mps/daemon.go): integer division
    /// throughout, memory in whole MiB.
    #[test]
    fn replicas_give_the_device_plugins_share() {
        // An H200 as NVML reports it: 143,771 MiB.
        let h200 = 143_771 * MIB;
        let s = crate::plugin_share(7, Some(h200));
        assert_eq!(s.active_thread_percentage, Some(14));
        assert_eq!(s.pinned_memory_limit_bytes, Some(20_538 * MIB));
        assert_eq!(
            s.describe(),
            "device-plugin replicas 7: 14 % of the threads, 20538 MiB of memory per client"
        );
        // 100/3 = 33, and a total that is not a whole number of MiB per replica rounds down.
        let s = crate::plugin_share(3, Some(10 * MIB + 5));
        assert_eq!(s.active_thread_percentage, Some(33));
        assert_eq!(s.pinned_memory_limit_bytes, Some(3 * MIB));
        let s = crate::plugin_share(1, Some(h200));
        assert_eq!(
            (s.active_thread_percentage, s.pinned_memory_limit_bytes),
            (Some(100), Some(h200))
        );
        assert_eq!(crate::plugin_share(7, None).pinned_memory_limit_bytes, None);
        assert_eq!(
            DeclaredShare::unlimited().describe(),
            "unlimited: all threads, all memory per client"
        );
    }
}
