//! The telemetry sampler: a background thread that samples the physical GPU at a fixed rate,
//! with NVML's energy counter in every sample, and GPM activity counters at their own interval
//! (see [`crate::activity`]).
//!
//! The thread owns its NVML source and buffers allocated before it starts; it never grows them
//! (readings past their capacity are counted and dropped) and shares nothing with the timing
//! thread but one atomic stop flag. Stopping unparks the thread and joins it, which hands the
//! buffers back. Every figure is device-wide, except the GPM and energy figures of a MIG
//! worker's own GPU instance: under time-slicing or MPS NVML cannot attribute power, clocks,
//! utilization or activity to one process.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use coload_cohort_schema::{Max, MeanMax, MinMean, TelemetrySample, TelemetrySummary};

use crate::activity::{Activity, ActivityOptions, Harvest, SamplingPlan};
use crate::error::DeviceError;
use crate::identify::DeviceReport;
use crate::nvml::{NvmlSource, RealNvml};

/// The default sampling rate, hertz.
pub const DEFAULT_RATE_HZ: f64 = 10.0;

/// NVML clock-event (throttle) reason bits and their names (`nvmlClocksEventReasons`).
pub const THROTTLE_REASONS: [(u64, &str); 9] = [
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
];

/// The names of the reasons set in `bits`, in bit order.
#[must_use]
pub fn throttle_reason_names(bits: u64) -> Vec<String> {
    THROTTLE_REASONS
        .iter()
        .filter(|(bit, _)| bits & bit != 0)
        .map(|(_, name)| (*name).to_owned())
        .collect()
}

/// A running sampler. Start it before the window, stop it after.
#[derive(Debug)]
pub struct TelemetrySampler {
    stop: Arc<AtomicBool>,
    dropped: Arc<AtomicU64>,
    handle: Option<JoinHandle<Harvest>>,
    rate_hz: Option<f64>,
}

/// What the sampler gathered: the raw telemetry, its summary, and GPM and energy.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SamplerOutput {
    /// Raw device telemetry samples in time order (`telemetry.jsonl`), each with the energy
    /// counter where NVML answered it.
    pub samples: Vec<TelemetrySample>,
    /// Their device-wide summary (`None` without samples).
    pub summary: Option<TelemetrySummary>,
    /// GPM readings and what could not be sampled, and why.
    pub activity: Activity,
}

fn system_unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl TelemetrySampler {
    /// Samples the physical GPU behind `report` through the real NVML at `rate_hz`, keeping at
    /// most `capacity` samples, timestamped with the system clock.
    pub fn start(
        report: &DeviceReport,
        rate_hz: f64,
        capacity: usize,
    ) -> Result<Self, DeviceError> {
        let target = report.target.ok_or_else(|| {
            DeviceError::InvalidOption("no NVML device to sample (identify found none)".into())
        })?;
        let nvml = RealNvml::open()?;
        Self::start_with(
            Box::new(nvml),
            target.gpu_index,
            rate_hz,
            capacity,
            system_unix_ns,
        )
    }

    /// Samples physical GPU `gpu_index` of `source`, timestamping with `now_unix_ns` (pass the
    /// worker's anchored clock so samples and batches share one time base). No GPM, and no MIG
    /// energy counter; see [`TelemetrySampler::start_with_activity`].
    pub fn start_with<C>(
        source: Box<dyn NvmlSource>,
        gpu_index: u32,
        rate_hz: f64,
        capacity: usize,
        now_unix_ns: C,
    ) -> Result<Self, DeviceError>
    where
        C: Fn() -> u64 + Send + 'static,
    {
        Self::start_with_activity(
            source,
            gpu_index,
            Some(rate_hz),
            capacity,
            ActivityOptions::off(),
            now_unix_ns,
        )
    }

    /// Samples physical GPU `gpu_index` of `source` on one background thread: device telemetry
    /// at `rate_hz` (`None`: none) with the energy counter in each sample, and GPM as `activity`
    /// asks (device-wide, plus the worker's MIG GPU instance when it runs on one).
    ///
    /// Every NVML call, including GPM's start (support check, buffer allocation, first sample)
    /// and the energy counter probes, happens on that thread; the caller's thread only spawns
    /// it. Buffers are allocated here, before the thread starts, and never grow: readings past
    /// their capacity are counted and dropped.
    pub fn start_with_activity<C>(
        mut source: Box<dyn NvmlSource>,
        gpu_index: u32,
        rate_hz: Option<f64>,
        capacity: usize,
        activity: ActivityOptions,
        now_unix_ns: C,
    ) -> Result<Self, DeviceError>
    where
        C: Fn() -> u64 + Send + 'static,
    {
        if let Some(rate_hz) = rate_hz
            && !(rate_hz.is_finite() && rate_hz > 0.0 && rate_hz <= 1000.0)
        {
            return Err(DeviceError::InvalidOption(format!(
                "telemetry rate {rate_hz} Hz is outside (0, 1000]"
            )));
        }
        if capacity == 0 {
            return Err(DeviceError::InvalidOption(
                "telemetry capacity must be at least 1 sample".into(),
            ));
        }
        activity.validate()?;
        if rate_hz.is_none() && activity.gpm_interval_s.is_none() {
            return Err(DeviceError::InvalidOption(
                "nothing to sample: telemetry and GPM are both off".into(),
            ));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let dropped = Arc::new(AtomicU64::new(0));
        let mut plan = SamplingPlan::new(gpu_index, rate_hz, capacity, &activity);
        let (stop_flag, dropped_count) = (Arc::clone(&stop), Arc::clone(&dropped));
        let handle = std::thread::Builder::new()
            .name("coload-telemetry".into())
            .spawn(move || {
                plan.begin(source.as_mut(), &now_unix_ns);
                let mut next_telemetry = Instant::now();
                let mut next_gpm = Instant::now() + plan.gpm_period.unwrap_or_default();
                while !stop_flag.load(Ordering::Acquire) {
                    let now = Instant::now();
                    if let Some(period) = plan.telemetry_period
                        && now >= next_telemetry
                    {
                        if !plan.telemetry(source.as_mut(), &now_unix_ns) {
                            dropped_count.fetch_add(1, Ordering::Relaxed);
                        }
                        next_telemetry = advance(next_telemetry, period, now);
                    }
                    if let Some(period) = plan.gpm_period
                        && now >= next_gpm
                    {
                        plan.gpm(source.as_mut(), &now_unix_ns);
                        next_gpm = advance(next_gpm, period, now);
                    }
                    let wake = match (plan.telemetry_period, plan.gpm_period) {
                        (Some(_), Some(_)) => next_telemetry.min(next_gpm),
                        (Some(_), None) => next_telemetry,
                        _ => next_gpm,
                    };
                    let now = Instant::now();
                    if wake > now {
                        // Unparked early by `stop`; spurious wake-ups just check again.
                        std::thread::park_timeout(wake - now);
                    }
                }
                // One closing sample at the stop: the worker stops the sampler after its window
                // ends, and a window's energy is interpolated between readings that surround it
                // (at 10 Hz the last periodic reading can fall up to 100 ms before the end: seen
                // on the H200, where it left a window without energy).
                if plan.telemetry_period.is_some() && !plan.telemetry(source.as_mut(), &now_unix_ns)
                {
                    dropped_count.fetch_add(1, Ordering::Relaxed);
                }
                plan.finish()
            })?;
        Ok(TelemetrySampler {
            stop,
            dropped,
            handle: Some(handle),
            rate_hz,
        })
    }

    /// Telemetry samples dropped so far because the buffer was full.
    #[must_use]
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Stops the thread and returns every telemetry sample with their summary (`None` without
    /// samples). GPM readings are discarded; [`TelemetrySampler::stop_all`] keeps them.
    #[must_use]
    pub fn stop(self) -> (Vec<TelemetrySample>, Option<TelemetrySummary>) {
        let out = self.stop_all();
        (out.samples, out.summary)
    }

    /// Stops the thread and returns everything it gathered.
    #[must_use]
    pub fn stop_all(mut self) -> SamplerOutput {
        let harvest = self.finish();
        let summary = summarize(&harvest.samples, self.rate_hz);
        SamplerOutput {
            samples: harvest.samples,
            summary,
            activity: harvest.activity,
        }
    }

    fn finish(&mut self) -> Harvest {
        self.stop.store(true, Ordering::Release);
        let Some(handle) = self.handle.take() else {
            return Harvest::default();
        };
        handle.thread().unpark();
        handle.join().unwrap_or_default()
    }
}

/// The next deadline of a periodic task due at `due` and run at `now`: one period later, or now
/// when the thread has fallen a whole period behind (it never tries to catch up in a burst).
fn advance(due: Instant, period: Duration, now: Instant) -> Instant {
    let next = due + period;
    if next > now { next } else { now }
}

impl Drop for TelemetrySampler {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

/// The samples taken within `[start_unix_ns, end_unix_ns]` (samples are in time order).
#[must_use]
pub fn samples_in_window(
    samples: &[TelemetrySample],
    start_unix_ns: u64,
    end_unix_ns: u64,
) -> &[TelemetrySample] {
    let from = samples.partition_point(|s| s.t_unix_ns < start_unix_ns);
    let to = samples.partition_point(|s| s.t_unix_ns <= end_unix_ns);
    &samples[from..to.max(from)]
}

fn mean_max(values: impl Iterator<Item = f64>) -> Option<MeanMax> {
    let (mut n, mut sum, mut max) = (0u64, 0.0, f64::NEG_INFINITY);
    for v in values {
        n += 1;
        sum += v;
        max = max.max(v);
    }
    (n > 0).then(|| MeanMax {
        mean: sum / n as f64,
        max,
    })
}

/// The device-wide summary of `samples` for `worker.json` (`None` when there are none).
/// Each figure uses the samples where NVML answered it.
#[must_use]
pub fn summarize(samples: &[TelemetrySample], rate_hz: Option<f64>) -> Option<TelemetrySummary> {
    if samples.is_empty() {
        return None;
    }
    let power_w = mean_max(samples.iter().filter_map(|s| s.power_w));
    let temperature_c = mean_max(
        samples
            .iter()
            .filter_map(|s| s.temperature_c.map(f64::from)),
    )
    .map(|m| Max { max: m.max });
    let sm_clock_mhz = {
        let clocks = || samples.iter().filter_map(|s| s.sm_clock_mhz.map(f64::from));
        mean_max(clocks()).map(|m| MinMean {
            min: clocks().fold(f64::INFINITY, f64::min),
            mean: m.mean,
        })
    };
    let memory_used_bytes = mean_max(
        samples
            .iter()
            .filter_map(|s| s.memory_used_bytes.map(|b| b as f64)),
    )
    .map(|m| Max { max: m.max });
    let gpu_util_pct = mean_max(samples.iter().filter_map(|s| s.gpu_util_pct.map(f64::from)));
    let bits = samples
        .iter()
        .filter_map(|s| s.throttle_reasons)
        .fold(0, |acc, b| acc | b);
    Some(TelemetrySummary {
        scope: "device".to_owned(),
        samples: samples.len() as u64,
        rate_hz,
        power_w,
        temperature_c,
        sm_clock_mhz,
        memory_used_bytes,
        gpu_util_pct,
        throttle_reasons: throttle_reason_names(bits),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FakeNvml;

    fn sample(t: u64, power: f64, clock: u32) -> TelemetrySample {
        TelemetrySample {
            t_unix_ns: t,
            power_w: Some(power),
            sm_clock_mhz: Some(clock),
            temperature_c: Some(50),
            memory_used_bytes: Some(1000),
            gpu_util_pct: Some(80),
            memory_util_pct: None,
            throttle_reasons: Some(0),
            energy_mj: None,
            mig_energy_mj: None,
        }
    }

    #[test]
    fn summaries_are_device_wide_means_and_extremes() {
        let mut s = vec![
            sample(1, 100.0, 1980),
            sample(2, 300.0, 1500),
            sample(3, 200.0, 1980),
        ];
        s[1].throttle_reasons = Some(0x4 | 0x40);
        s[2].power_w = None;
        let sum = summarize(&s, Some(10.0)).unwrap();
        assert_eq!(sum.scope, "device");
        assert_eq!(sum.samples, 3);
        assert_eq!(sum.rate_hz, Some(10.0));
        assert_eq!(
            sum.power_w,
            Some(MeanMax {
                mean: 200.0,
                max: 300.0
            })
        );
        let clock = sum.sm_clock_mhz.unwrap();
        assert!((clock.min - 1500.0).abs() < 1e-9);
        assert!((clock.mean - 1820.0).abs() < 1e-9);
        assert_eq!(sum.temperature_c, Some(Max { max: 50.0 }));
        assert_eq!(
            sum.throttle_reasons,
            ["sw_power_cap", "hw_thermal_slowdown"]
        );
        assert!(summarize(&[], None).is_none());
    }

    #[test]
    fn a_sample_without_answers_leaves_every_figure_absent() {
        let blank = TelemetrySample {
            t_unix_ns: 5,
            ..TelemetrySample::default()
        };
        let sum = summarize(&[blank], None).unwrap();
        assert_eq!(sum.samples, 1);
        assert!(sum.power_w.is_none() && sum.sm_clock_mhz.is_none());
        assert!(sum.throttle_reasons.is_empty());
    }

    #[test]
    fn window_selection_is_inclusive_and_ordered() {
        let s: Vec<_> = (0..10).map(|t| sample(t * 10, 1.0, 1)).collect();
        let w = samples_in_window(&s, 20, 50);
        assert_eq!(
            w.iter().map(|s| s.t_unix_ns).collect::<Vec<_>>(),
            [20, 30, 40, 50]
        );
        assert!(samples_in_window(&s, 200, 300).is_empty());
        assert!(samples_in_window(&s, 50, 20).is_empty());
    }

    #[test]
    fn the_sampler_samples_at_its_rate_into_its_buffer_and_stops() {
        let nvml = FakeNvml::new().with_gpu("GPU-aaaa", "NVIDIA H200");
        let start = Instant::now();
        let clock = move || start.elapsed().as_nanos() as u64;
        let running = TelemetrySampler::start_with(Box::new(nvml), 0, 200.0, 1000, clock).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let stop_at = Instant::now();
        let (samples, summary) = running.stop();
        assert!(
            stop_at.elapsed() < Duration::from_millis(200),
            "stop must not wait a period"
        );
        // 200 Hz for 0.3 s: about 60, plus the closing sample; a loaded CI machine may manage
        // fewer, never more than 63.
        assert!(
            (10..=63).contains(&samples.len()),
            "{} samples",
            samples.len()
        );
        assert!(samples.windows(2).all(|w| w[0].t_unix_ns <= w[1].t_unix_ns));
        let summary = summary.unwrap();
        assert_eq!(summary.samples, samples.len() as u64);
        assert!(summary.power_w.unwrap().max >= 100.0);
    }

    /// A window's energy needs a reading after its end: the sampler takes one when stopped,
    /// whatever its period.
    #[test]
    fn stopping_takes_a_closing_sample() {
        let nvml = FakeNvml::new().with_gpu("GPU-aaaa", "NVIDIA H200");
        let start = Instant::now();
        let clock = move || start.elapsed().as_nanos() as u64;
        // 1 Hz: without the closing sample, only the first reading (at the start) would exist.
        let running = TelemetrySampler::start_with(Box::new(nvml), 0, 1.0, 100, clock).unwrap();
        std::thread::sleep(Duration::from_millis(150));
        let asked_ns = start.elapsed().as_nanos() as u64;
        let (samples, _) = running.stop();
        let last = samples.last().unwrap().t_unix_ns;
        assert!(
            last >= asked_ns,
            "the last reading ({last} ns) is before the stop ({asked_ns} ns): {} samples",
            samples.len()
        );
        assert!(samples.len() >= 2);
    }

    #[test]
    fn a_full_buffer_drops_samples_instead_of_growing() {
        let nvml = FakeNvml::new().with_gpu("GPU-aaaa", "NVIDIA H200");
        let running =
            TelemetrySampler::start_with(Box::new(nvml), 0, 500.0, 3, system_unix_ns).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        assert!(running.dropped() > 0);
        let (samples, _) = running.stop();
        assert_eq!(samples.len(), 3);
        assert_eq!(samples.capacity(), 3);
    }

    #[test]
    fn bad_rates_and_capacities_are_refused() {
        let mk = || Box::new(FakeNvml::new().with_gpu("GPU-aaaa", "x")) as Box<dyn NvmlSource>;
        for rate in [0.0, -1.0, f64::NAN, 1e6] {
            let err = TelemetrySampler::start_with(mk(), 0, rate, 10, system_unix_ns).unwrap_err();
            assert_eq!(err.kind(), coload_cohort_schema::FailureKind::InvalidOption);
        }
        assert!(TelemetrySampler::start_with(mk(), 0, 10.0, 0, system_unix_ns).is_err());
    }
}
