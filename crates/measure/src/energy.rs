//! Energy from NVML's total energy counter: readings, interpolation at an instant, the energy
//! over an interval.

use coload_cohort_schema::{EnergySpan, TelemetrySample};

/// The energy between `start_unix_ns` and `end_unix_ns` from counter readings `(t, mJ)` in
/// time order (see [`energy_mj_at`]); `None` unless readings surround both ends.
#[must_use]
pub fn energy_between(
    readings: &[(u64, u64)],
    start_unix_ns: u64,
    end_unix_ns: u64,
) -> Option<EnergySpan> {
    if end_unix_ns <= start_unix_ns {
        return None;
    }
    let start_mj = energy_mj_at(readings, start_unix_ns)?;
    let end_mj = energy_mj_at(readings, end_unix_ns)?;
    let joules = (end_mj - start_mj) / 1000.0;
    Some(EnergySpan {
        start_mj,
        end_mj,
        joules,
        mean_power_w: joules / ((end_unix_ns - start_unix_ns) as f64 / 1e9),
    })
}

/// The energy counter at `t_unix_ns`, millijoules, linearly interpolated between the last reading
/// at or before it and the first at or after it; `None` when no reading lies on one side, or the
/// counter went backwards (a driver reload resets it).
///
/// Readings are `(t_unix_ns, energy_mj)` in time order. The counter is sampled with every
/// telemetry sample (10 Hz by default), so the interpolation spans at most one sampling period.
#[must_use]
pub fn energy_mj_at(readings: &[(u64, u64)], t_unix_ns: u64) -> Option<f64> {
    let after = readings.partition_point(|(t, _)| *t < t_unix_ns);
    let (t1, e1) = *readings.get(after)?;
    if t1 == t_unix_ns {
        return Some(e1 as f64);
    }
    let (t0, e0) = *readings.get(after.checked_sub(1)?)?;
    if e1 < e0 || t1 <= t0 {
        return None;
    }
    let f = (t_unix_ns - t0) as f64 / (t1 - t0) as f64;
    Some(e0 as f64 + f * (e1 - e0) as f64)
}

/// The device-wide energy readings `(t_unix_ns, energy_mj)` of telemetry samples that have one.
#[must_use]
pub fn device_energy_readings(samples: &[TelemetrySample]) -> Vec<(u64, u64)> {
    samples
        .iter()
        .filter_map(|s| s.energy_mj.map(|e| (s.t_unix_ns, e)))
        .collect()
}

/// The MIG-instance energy readings of telemetry samples that have one.
#[must_use]
pub fn mig_energy_readings(samples: &[TelemetrySample]) -> Vec<(u64, u64)> {
    samples
        .iter()
        .filter_map(|s| s.mig_energy_mj.map(|e| (s.t_unix_ns, e)))
        .collect()
}
