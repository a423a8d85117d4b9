//! GPM activity counters and the energy counter, sampled on the telemetry thread.
//!
//! Why a worker got the rate it got: GPM says how busy and how full the SMs were and how much
//! DRAM bandwidth was used; the energy counter says what it cost. Both are read by the telemetry
//! sampler's thread ([`crate::TelemetrySampler::start_with_activity`]), never by the thread that
//! times the window:
//!
//! - GPM every [`ActivityOptions::gpm_interval_s`] (default [`DEFAULT_GPM_INTERVAL_S`]): each
//!   reading is the metrics between two samples, so the first sample is taken when sampling
//!   starts and every later one yields a [`GpmRecord`] over `[previous, now]`. Device-wide, and
//!   for a MIG worker also its own GPU instance (`nvmlGpmMigSampleGet`).
//! - NVML's total energy counter with every telemetry sample (device-wide, and the MIG device's
//!   own counter where the driver offers one), so that the energy over any interval is known to
//!   within one sampling period and interpolated inside it.
//!
//! What cannot be sampled (GPM before Hopper, a driver without the calls, no permission, no
//! per-MIG energy counter) is found out once, when sampling starts, and recorded with its reason
//! in [`Activity`]: a fact for `worker.json`, not a warning per sample.

use std::time::Duration;

use coload_cohort_schema::{
    ActivityScope, EnergyReport, EnergyScopeReport, GpmRecord, GpmReport, GpmScopeReport,
    TelemetrySample,
};

use crate::error::{DeviceError, NvmlError};
use crate::gpm::GpmTarget;
use crate::identify::DeviceReport;
use crate::nvml::{NvmlSource, NvmlTarget};

pub use coload_cohort_schema::{DEFAULT_GPM_INTERVAL_S, MAX_GPM_INTERVAL_S, MIN_GPM_INTERVAL_S};

/// The MIG device a worker runs on, as the sampler addresses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MigTarget {
    /// Index of the MIG device within its parent (for the energy counter).
    pub mig_index: u32,
    /// Its GPU instance id (for GPM), when NVML told it.
    pub gpu_instance_id: Option<u32>,
}

impl MigTarget {
    /// The MIG device behind an identified worker, if it runs on one.
    #[must_use]
    pub fn from_report(report: &DeviceReport) -> Option<Self> {
        let mig_index = report.target?.mig_index?;
        Some(MigTarget {
            mig_index,
            gpu_instance_id: report.gpu_instance_id,
        })
    }
}

/// What the sampler reads besides the device telemetry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ActivityOptions {
    /// GPM sampling interval, seconds; `None` turns GPM off.
    pub gpm_interval_s: Option<f64>,
    /// Room for GPM readings, per scope.
    pub gpm_capacity: usize,
    /// The MIG device the worker runs on, when it does: its GPU instance gets GPM readings of
    /// its own, and its energy counter is read where the driver has one.
    pub mig: Option<MigTarget>,
}

impl ActivityOptions {
    /// No GPM, no MIG scope.
    #[must_use]
    pub fn off() -> Self {
        ActivityOptions {
            gpm_interval_s: None,
            gpm_capacity: 0,
            mig: None,
        }
    }

    /// GPM every `gpm_interval_s` (`None` or a value <= 0: off) with room for `covered_s`
    /// seconds of readings, and the MIG scope of `mig`.
    #[must_use]
    pub fn for_duration(
        gpm_interval_s: Option<f64>,
        covered_s: f64,
        mig: Option<MigTarget>,
    ) -> Self {
        let gpm_interval_s = gpm_interval_s.filter(|i| *i > 0.0);
        let gpm_capacity =
            gpm_interval_s.map_or(0, |i| (covered_s.max(0.0) / i).ceil() as usize + 2);
        ActivityOptions {
            gpm_interval_s,
            gpm_capacity,
            mig,
        }
    }

    pub(crate) fn validate(&self) -> Result<(), DeviceError> {
        if let Some(i) = self.gpm_interval_s {
            if !(MIN_GPM_INTERVAL_S..=MAX_GPM_INTERVAL_S).contains(&i) {
                return Err(DeviceError::InvalidOption(format!(
                    "GPM interval {i} s is outside [{MIN_GPM_INTERVAL_S}, {MAX_GPM_INTERVAL_S}] \
                     (0 turns GPM off)"
                )));
            }
            if self.gpm_capacity == 0 {
                return Err(DeviceError::InvalidOption(
                    "GPM capacity must be at least 1 reading".into(),
                ));
            }
        }
        Ok(())
    }
}

/// One GPM scope as the sampler tried it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpmScopeStatus {
    /// Device-wide or the MIG GPU instance.
    pub scope: ActivityScope,
    /// The GPU instance id, for scope `mig`.
    pub gpu_instance_id: Option<u32>,
    /// Whether sampling started.
    pub supported: bool,
    /// Why it did not start, or the first reason a later reading failed.
    pub reason: Option<String>,
    /// Readings that failed after sampling had started.
    pub failed_reads: u64,
}

/// What the sampler gathered besides the device telemetry, and what it could not gather.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Activity {
    /// The GPM interval asked for; `None` when GPM was off.
    pub gpm_interval_s: Option<f64>,
    /// Raw GPM readings in time order, scopes interleaved (`gpm.jsonl`).
    pub gpm: Vec<GpmRecord>,
    /// Each GPM scope tried.
    pub gpm_scopes: Vec<GpmScopeStatus>,
    /// GPM readings dropped because their buffer was full.
    pub gpm_dropped: u64,
    /// Whether telemetry samples were taken (the energy counter rides on them).
    pub telemetry_on: bool,
    /// Why the device energy counter was not read, when it was not.
    pub energy_reason: Option<String>,
    /// Whether the worker ran on a MIG device.
    pub on_mig: bool,
    /// Why the MIG device's energy counter was not read, when the worker ran on one.
    pub mig_energy_reason: Option<String>,
}

/// `worker.json`'s `gpm` when nothing was sampled at all (no NVML, the sampler did not start),
/// saying why.
#[must_use]
pub fn gpm_not_sampled(gpm_interval_s: Option<f64>, reason: impl Into<String>) -> GpmReport {
    GpmReport {
        interval_s: gpm_interval_s,
        supported: false,
        reason: Some(reason.into()),
        scopes: Vec::new(),
    }
}

impl Activity {
    /// `worker.json`'s `gpm` over `[start_unix_ns, end_unix_ns]` (the window): each scope's
    /// readings lying entirely inside it, summarized by [`coload_measure::gpm_window`].
    #[must_use]
    pub fn gpm_report(&self, start_unix_ns: u64, end_unix_ns: u64) -> GpmReport {
        if self.gpm_interval_s.is_none() {
            return gpm_not_sampled(None, "GPM sampling was turned off");
        }
        let scopes: Vec<GpmScopeReport> = self
            .gpm_scopes
            .iter()
            .map(|s| {
                let (metrics, samples) =
                    coload_measure::gpm_window(&self.gpm, s.scope, start_unix_ns, end_unix_ns);
                GpmScopeReport {
                    scope: s.scope,
                    gpu_instance_id: s.gpu_instance_id,
                    supported: s.supported,
                    reason: s.reason.clone(),
                    samples,
                    failed_reads: s.failed_reads,
                    metrics,
                }
            })
            .collect();
        let device = scopes.iter().find(|s| s.scope == ActivityScope::Device);
        GpmReport {
            interval_s: self.gpm_interval_s,
            supported: device.is_some_and(|d| d.supported),
            reason: match device {
                Some(d) if !d.supported => d.reason.clone(),
                Some(_) => None,
                None => Some("device-wide GPM was not tried".to_owned()),
            },
            scopes,
        }
    }

    /// `worker.json`'s `energy` over `[start_unix_ns, end_unix_ns]` from the counter readings in
    /// `samples` (interpolated at both ends): device-wide, and the MIG device's own when the
    /// worker ran on one (or why not).
    #[must_use]
    pub fn energy_report(
        &self,
        samples: &[TelemetrySample],
        start_unix_ns: u64,
        end_unix_ns: u64,
    ) -> EnergyReport {
        let scope = |scope, readings: Vec<(u64, u64)>, unavailable: &Option<String>| {
            let window = coload_measure::energy_between(&readings, start_unix_ns, end_unix_ns);
            let reason = if window.is_some() {
                None
            } else if !self.telemetry_on {
                Some(
                    "telemetry sampling was off (the energy counter is read with each telemetry \
                     sample)"
                        .to_owned(),
                )
            } else if let Some(r) = unavailable {
                Some(r.clone())
            } else {
                Some("the energy readings do not surround the window".to_owned())
            };
            EnergyScopeReport {
                scope,
                window,
                reason,
            }
        };
        let mut scopes = vec![scope(
            ActivityScope::Device,
            coload_measure::device_energy_readings(samples),
            &self.energy_reason,
        )];
        if self.on_mig {
            scopes.push(scope(
                ActivityScope::Mig,
                coload_measure::mig_energy_readings(samples),
                &self.mig_energy_reason,
            ));
        }
        EnergyReport { scopes }
    }
}

/// What the sampling thread hands back when it stops.
#[derive(Debug, Default)]
pub(crate) struct Harvest {
    pub(crate) samples: Vec<TelemetrySample>,
    pub(crate) activity: Activity,
}

/// One started GPM target on the thread, and when its last sample was taken.
#[derive(Debug)]
struct GpmState {
    target: GpmTarget,
    last_unix_ns: u64,
}

/// Everything the sampling thread does, with its buffers allocated before it starts.
#[derive(Debug)]
pub(crate) struct SamplingPlan {
    gpu_index: u32,
    pub(crate) telemetry_period: Option<Duration>,
    pub(crate) gpm_period: Option<Duration>,
    samples: Vec<TelemetrySample>,
    gpm: Vec<GpmState>,
    /// Whether the device and the MIG energy counters answered when probed.
    device_energy: bool,
    mig_energy: Option<NvmlTarget>,
    mig: Option<MigTarget>,
    activity: Activity,
}

impl SamplingPlan {
    /// Allocates the buffers (on the caller's thread, before sampling starts).
    pub(crate) fn new(
        gpu_index: u32,
        rate_hz: Option<f64>,
        capacity: usize,
        options: &ActivityOptions,
    ) -> Self {
        let scopes = if options.mig.is_some() { 2 } else { 1 };
        let gpm_capacity = if options.gpm_interval_s.is_some() {
            options.gpm_capacity * scopes
        } else {
            0
        };
        SamplingPlan {
            gpu_index,
            // Rates and intervals were checked at the door (coload_spec); a value no Duration
            // holds samples nothing rather than panicking.
            telemetry_period: rate_hz.and_then(|r| Duration::try_from_secs_f64(1.0 / r).ok()),
            gpm_period: options
                .gpm_interval_s
                .and_then(|s| Duration::try_from_secs_f64(s).ok()),
            samples: Vec::with_capacity(if rate_hz.is_some() { capacity } else { 0 }),
            gpm: Vec::with_capacity(scopes),
            device_energy: false,
            mig_energy: None,
            mig: options.mig,
            activity: Activity {
                gpm_interval_s: options.gpm_interval_s,
                gpm: Vec::with_capacity(gpm_capacity),
                gpm_scopes: Vec::with_capacity(scopes),
                gpm_dropped: 0,
                telemetry_on: rate_hz.is_some(),
                energy_reason: None,
                on_mig: options.mig.is_some(),
                mig_energy_reason: None,
            },
        }
    }

    /// Probes the energy counters and starts GPM; on the sampling thread, once.
    pub(crate) fn begin(&mut self, source: &mut dyn NvmlSource, now_unix_ns: &dyn Fn() -> u64) {
        let device = NvmlTarget {
            gpu_index: self.gpu_index,
            mig_index: None,
        };
        if self.telemetry_period.is_some() {
            match source.energy_mj(device) {
                Ok(_) => self.device_energy = true,
                Err(r) => self.activity.energy_reason = Some(r.to_string()),
            }
            if let Some(mig) = self.mig {
                let target = NvmlTarget {
                    gpu_index: self.gpu_index,
                    mig_index: Some(mig.mig_index),
                };
                match source.energy_mj(target) {
                    Ok(_) => self.mig_energy = Some(target),
                    Err(r) => {
                        self.activity.mig_energy_reason =
                            Some(format!("no energy counter for this MIG device: {r}"));
                    }
                }
            }
        }
        if self.gpm_period.is_none() {
            return;
        }
        let mut targets = vec![(
            ActivityScope::Device,
            Some(GpmTarget {
                gpu_index: self.gpu_index,
                gpu_instance_id: None,
            }),
        )];
        if let Some(mig) = self.mig {
            targets.push((
                ActivityScope::Mig,
                mig.gpu_instance_id.map(|id| GpmTarget {
                    gpu_index: self.gpu_index,
                    gpu_instance_id: Some(id),
                }),
            ));
        }
        for (scope, target) in targets {
            let started = match target {
                Some(t) => source.gpm_begin(t),
                None => Err(NvmlError::new(
                    "nvmlGpmMigSampleGet",
                    None,
                    "the MIG GPU instance id is unknown, so its GPM cannot be addressed",
                )),
            };
            let last_unix_ns = now_unix_ns();
            self.activity.gpm_scopes.push(GpmScopeStatus {
                scope,
                gpu_instance_id: target.and_then(|t| t.gpu_instance_id),
                supported: started.is_ok(),
                reason: started.as_ref().err().map(ToString::to_string),
                failed_reads: 0,
            });
            if let (Some(target), Ok(())) = (target, started) {
                self.gpm.push(GpmState {
                    target,
                    last_unix_ns,
                });
            }
        }
    }

    /// Takes one telemetry sample with the energy counters; `false` when the buffer was full.
    pub(crate) fn telemetry(
        &mut self,
        source: &mut dyn NvmlSource,
        now_unix_ns: &dyn Fn() -> u64,
    ) -> bool {
        if self.samples.len() >= self.samples.capacity() {
            return false;
        }
        let mut s = source.sample(self.gpu_index, now_unix_ns());
        if self.device_energy {
            s.energy_mj = source
                .energy_mj(NvmlTarget {
                    gpu_index: self.gpu_index,
                    mig_index: None,
                })
                .ok();
        }
        if let Some(mig) = self.mig_energy {
            s.mig_energy_mj = source.energy_mj(mig).ok();
        }
        self.samples.push(s);
        true
    }

    /// Takes one GPM reading of every started scope.
    pub(crate) fn gpm(&mut self, source: &mut dyn NvmlSource, now_unix_ns: &dyn Fn() -> u64) {
        for state in &mut self.gpm {
            let result = source.gpm_next(state.target);
            let t = now_unix_ns();
            let scope = state.target.scope();
            match result {
                Ok(metrics) => {
                    if self.activity.gpm.len() < self.activity.gpm.capacity() {
                        self.activity.gpm.push(GpmRecord {
                            scope,
                            gpu_instance_id: state.target.gpu_instance_id,
                            start_unix_ns: state.last_unix_ns,
                            end_unix_ns: t,
                            metrics,
                        });
                    } else {
                        self.activity.gpm_dropped += 1;
                    }
                    state.last_unix_ns = t;
                }
                Err(reason) => {
                    if let Some(status) = self
                        .activity
                        .gpm_scopes
                        .iter_mut()
                        .find(|s| s.scope == scope)
                    {
                        status.failed_reads += 1;
                        status.reason.get_or_insert_with(|| reason.to_string());
                    }
                }
            }
        }
    }

    /// Hands the buffers back.
    pub(crate) fn finish(self) -> Harvest {
        Harvest {
            samples: self.samples,
            activity: self.activity,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Instant;

    use coload_cohort_schema::GpmValues;

    use super::*;
    use crate::fake::{FAKE_ENERGY_START_MJ, FAKE_ENERGY_STEP_MJ};
    use crate::{FakeNvml, GpuFacts, MigFacts, TelemetrySampler};

    /// A fake that notes the name of the thread every GPM and energy call came from.
    #[derive(Debug)]
    struct ThreadCheck {
        inner: FakeNvml,
        threads: Arc<Mutex<Vec<String>>>,
    }

    impl ThreadCheck {
        fn note(&self) {
            let name = std::thread::current().name().unwrap_or("?").to_owned();
            self.threads.lock().unwrap().push(name);
        }
    }

    impl NvmlSource for ThreadCheck {
        fn driver_version(&self) -> Option<String> {
            self.inner.driver_version()
        }
        fn cuda_driver_version(&self) -> Option<String> {
            self.inner.cuda_driver_version()
        }
        fn gpu_count(&self) -> Result<u32, NvmlError> {
            self.inner.gpu_count()
        }
        fn gpu(&self, index: u32) -> Result<GpuFacts, NvmlError> {
            self.inner.gpu(index)
        }
        fn max_mig_devices(&self, gpu_index: u32) -> Result<u32, NvmlError> {
            self.inner.max_mig_devices(gpu_index)
        }
        fn mig_device(
            &self,
            gpu_index: u32,
            mig_index: u32,
        ) -> Result<Option<MigFacts>, NvmlError> {
            self.inner.mig_device(gpu_index, mig_index)
        }
        fn compute_processes(
            &self,
            target: NvmlTarget,
        ) -> Result<Vec<crate::ComputeProcess>, NvmlError> {
            self.inner.compute_processes(target)
        }
        fn sample(&mut self, gpu_index: u32, t_unix_ns: u64) -> TelemetrySample {
            self.note();
            self.inner.sample(gpu_index, t_unix_ns)
        }
        fn energy_mj(&mut self, target: NvmlTarget) -> Result<u64, NvmlError> {
            self.note();
            self.inner.energy_mj(target)
        }
        fn gpm_begin(&mut self, target: GpmTarget) -> Result<(), NvmlError> {
            self.note();
            self.inner.gpm_begin(target)
        }
        fn gpm_next(&mut self, target: GpmTarget) -> Result<GpmValues, NvmlError> {
            self.note();
            self.inner.gpm_next(target)
        }
    }

    fn clock() -> impl Fn() -> u64 + Send + 'static {
        let start = Instant::now();
        move || 1_000_000_000 + start.elapsed().as_nanos() as u64
    }

    /// Runs a sampler for `ms` with telemetry at 100 Hz and GPM every 0.1 s.
    fn run(source: Box<dyn NvmlSource>, mig: Option<MigTarget>, ms: u64) -> crate::SamplerOutput {
        let options = ActivityOptions::for_duration(Some(MIN_GPM_INTERVAL_S), 5.0, mig);
        let sampler =
            TelemetrySampler::start_with_activity(source, 0, Some(100.0), 1000, options, clock())
                .unwrap();
        std::thread::sleep(Duration::from_millis(ms));
        sampler.stop_all()
    }

    fn mig_gpu() -> FakeNvml {
        FakeNvml::new()
            .with_gpu("GPU-aaaa", "NVIDIA H100 80GB HBM3")
            .with_mig("1g.10gb", "MIG-1111")
            .with_mig("1g.10gb", "MIG-2222")
    }

    #[test]
    fn supported_gpm_and_energy_are_read_on_the_telemetry_thread_only() {
        let threads = Arc::new(Mutex::new(Vec::new()));
        let source = ThreadCheck {
            inner: FakeNvml::new()
                .with_gpu("GPU-aaaa", "NVIDIA H200")
                .with_gpm(),
            threads: Arc::clone(&threads),
        };
        let out = run(Box::new(source), None, 650);
        let names = threads.lock().unwrap().clone();
        assert!(!names.is_empty());
        assert!(
            names.iter().all(|n| n == "coload-telemetry"),
            "NVML called from {names:?}"
        );

        let a = &out.activity;
        assert_eq!(a.gpm_interval_s, Some(MIN_GPM_INTERVAL_S));
        assert_eq!(a.gpm_scopes.len(), 1);
        assert!(a.gpm_scopes[0].supported && a.gpm_scopes[0].reason.is_none());
        // 0.65 s at 0.1 s: about 6 readings; a loaded machine may manage fewer.
        assert!((2..=7).contains(&a.gpm.len()), "{} readings", a.gpm.len());
        for pair in a.gpm.windows(2) {
            assert_eq!(
                pair[0].end_unix_ns, pair[1].start_unix_ns,
                "each reading starts where the last ended"
            );
        }
        for r in &a.gpm {
            assert_eq!(r.scope, ActivityScope::Device);
            assert!(r.end_unix_ns > r.start_unix_ns);
            let occ = r.metrics.sm_occupancy_pct.unwrap();
            assert!((24.0..=26.0).contains(&occ), "{occ}");
            assert!(r.metrics.nvlink_rx_bytes_per_s.is_none());
        }

        // The energy counter rides on every telemetry sample.
        let energy: Vec<u64> = out.samples.iter().map(|s| s.energy_mj.unwrap()).collect();
        assert!(energy.len() >= 10, "{} samples", energy.len());
        // The first reading was the probe at start.
        assert_eq!(energy[0], FAKE_ENERGY_START_MJ + FAKE_ENERGY_STEP_MJ);
        assert!(
            energy
                .windows(2)
                .all(|w| w[1] == w[0] + FAKE_ENERGY_STEP_MJ)
        );
        assert!(out.samples.iter().all(|s| s.mig_energy_mj.is_none()));

        let (first, last) = (&out.samples[0], out.samples.last().unwrap());
        let report = a.energy_report(&out.samples, first.t_unix_ns, last.t_unix_ns);
        assert_eq!(report.scopes.len(), 1);
        let span = report.scopes[0].window.unwrap();
        let steps = (energy.len() - 1) as f64;
        assert!((span.joules - steps * FAKE_ENERGY_STEP_MJ as f64 / 1000.0).abs() < 1e-6);

        let window = a.gpm_report(a.gpm[0].start_unix_ns, a.gpm.last().unwrap().end_unix_ns);
        assert!(window.supported && window.reason.is_none());
        assert_eq!(window.scopes[0].samples, a.gpm.len() as u64);
        assert!(window.scopes[0].metrics.sm_occupancy_pct.unwrap().max <= 26.0);
    }

    #[test]
    fn unsupported_gpm_is_one_fact_with_its_reason_and_energy_still_flows() {
        let reason = "nvmlGpmQueryDeviceSupport: the requested operation is not available";
        let nvml = FakeNvml::new()
            .with_gpu("GPU-aaaa", "NVIDIA A100")
            .with_gpm_unsupported(NvmlError::new(
                "nvmlGpmQueryDeviceSupport",
                Some(crate::NvmlCode::NotSupported),
                "the requested operation is not available",
            ));
        let out = run(Box::new(nvml), None, 300);
        let a = &out.activity;
        assert!(a.gpm.is_empty());
        assert_eq!(a.gpm_scopes.len(), 1);
        assert!(!a.gpm_scopes[0].supported);
        assert_eq!(a.gpm_scopes[0].reason.as_deref(), Some(reason));
        // Not tried again and again: no failed reads pile up.
        assert_eq!(a.gpm_scopes[0].failed_reads, 0);
        let report = a.gpm_report(0, u64::MAX);
        assert!(!report.supported);
        assert_eq!(report.reason.as_deref(), Some(reason));
        assert_eq!(report.scopes[0].samples, 0);
        assert_eq!(
            report.scopes[0].metrics,
            coload_cohort_schema::GpmStats::default()
        );
        assert!(out.samples.iter().all(|s| s.energy_mj.is_some()));
    }

    #[test]
    fn a_mig_worker_gets_its_instance_beside_the_device() {
        let mig = MigTarget {
            mig_index: 1,
            gpu_instance_id: Some(8),
        };
        let out = run(Box::new(mig_gpu().with_gpm()), Some(mig), 450);
        let a = &out.activity;
        let scopes: Vec<(ActivityScope, Option<u32>, bool)> = a
            .gpm_scopes
            .iter()
            .map(|s| (s.scope, s.gpu_instance_id, s.supported))
            .collect();
        assert_eq!(
            scopes,
            [
                (ActivityScope::Device, None, true),
                (ActivityScope::Mig, Some(8), true)
            ]
        );
        let mig_reads: Vec<&GpmRecord> = a
            .gpm
            .iter()
            .filter(|r| r.scope == ActivityScope::Mig)
            .collect();
        assert!(!mig_reads.is_empty());
        for r in &mig_reads {
            assert_eq!(r.gpu_instance_id, Some(8));
            // The fake's instance reads half of the device's figures.
            assert!((r.metrics.graphics_util_pct.unwrap() - 41.0).abs() < 1e-9);
        }
        let report = a.gpm_report(0, u64::MAX);
        assert_eq!(report.scopes.len(), 2);
        assert_eq!(report.scopes[1].samples, mig_reads.len() as u64);

        // No per-MIG energy counter by default: said once, with the driver's words.
        let energy = a.energy_report(&out.samples, 0, u64::MAX);
        assert_eq!(energy.scopes.len(), 2);
        assert_eq!(energy.scopes[1].scope, ActivityScope::Mig);
        assert!(energy.scopes[1].window.is_none());
        let why = energy.scopes[1].reason.as_deref().unwrap();
        assert!(
            why.starts_with(
                "no energy counter for this MIG device: nvmlDeviceGetTotalEnergyConsumption: \
                 the requested operation"
            ),
            "{why}"
        );
        assert!(out.samples.iter().all(|s| s.mig_energy_mj.is_none()));
    }

    #[test]
    fn a_mig_energy_counter_is_sampled_where_the_driver_has_one() {
        let mig = MigTarget {
            mig_index: 0,
            gpu_instance_id: Some(7),
        };
        let out = run(Box::new(mig_gpu().with_mig_energy()), Some(mig), 250);
        assert!(out.samples.iter().all(|s| s.mig_energy_mj.is_some()));
        let (first, last) = (&out.samples[0], out.samples.last().unwrap());
        let energy = out
            .activity
            .energy_report(&out.samples, first.t_unix_ns, last.t_unix_ns);
        assert!(
            energy.scopes.iter().all(|s| s.window.is_some()),
            "{energy:?}"
        );
        // GPM was not scripted here: both scopes say so.
        assert!(out.activity.gpm_scopes.iter().all(|s| !s.supported));
    }

    #[test]
    fn a_mig_instance_without_gpm_or_without_an_id_says_why() {
        let mig = MigTarget {
            mig_index: 0,
            gpu_instance_id: Some(7),
        };
        let nvml = mig_gpu()
            .with_gpm()
            .with_mig_gpm_unsupported(NvmlError::new(
                "nvmlGpmMigSampleGet",
                Some(crate::NvmlCode::NotSupported),
                "not supported",
            ));
        let out = run(Box::new(nvml), Some(mig), 300);
        let report = out.activity.gpm_report(0, u64::MAX);
        assert!(report.supported, "device-wide still works");
        assert!(report.scopes[0].samples > 0);
        assert!(!report.scopes[1].supported);
        assert_eq!(
            report.scopes[1].reason.as_deref(),
            Some("nvmlGpmMigSampleGet: not supported")
        );
        assert!(
            out.activity
                .gpm
                .iter()
                .all(|r| r.scope == ActivityScope::Device)
        );

        let unknown = MigTarget {
            mig_index: 0,
            gpu_instance_id: None,
        };
        let out = run(Box::new(mig_gpu().with_gpm()), Some(unknown), 150);
        let why = out.activity.gpm_scopes[1].reason.as_deref().unwrap();
        assert!(why.contains("GPU instance id is unknown"), "{why}");
    }

    #[test]
    fn gpm_without_telemetry_runs_and_energy_says_why_it_is_missing() {
        let nvml = FakeNvml::new()
            .with_gpu("GPU-aaaa", "NVIDIA H200")
            .with_gpm();
        let options = ActivityOptions::for_duration(Some(0.1), 5.0, None);
        let sampler =
            TelemetrySampler::start_with_activity(Box::new(nvml), 0, None, 10, options, clock())
                .unwrap();
        std::thread::sleep(Duration::from_millis(350));
        let out = sampler.stop_all();
        assert!(out.samples.is_empty() && out.summary.is_none());
        assert!(!out.activity.gpm.is_empty());
        let energy = out.activity.energy_report(&out.samples, 0, u64::MAX);
        let why = energy.scopes[0].reason.as_deref().unwrap();
        assert!(why.starts_with("telemetry sampling was off"), "{why}");
    }

    #[test]
    fn turned_off_gpm_is_recorded_as_off() {
        let off = Activity::default().gpm_report(0, 1);
        assert_eq!(off.interval_s, None);
        assert!(!off.supported);
        assert_eq!(off.reason.as_deref(), Some("GPM sampling was turned off"));
    }

    #[test]
    fn bad_gpm_options_are_refused() {
        let mk = || Box::new(FakeNvml::new().with_gpu("GPU-aaaa", "x")) as Box<dyn NvmlSource>;
        for interval in [0.05, 7200.0, f64::NAN] {
            let options = ActivityOptions {
                gpm_interval_s: Some(interval),
                gpm_capacity: 10,
                mig: None,
            };
            let err =
                TelemetrySampler::start_with_activity(mk(), 0, Some(10.0), 10, options, clock())
                    .unwrap_err();
            assert_eq!(err.kind(), coload_cohort_schema::FailureKind::InvalidOption);
            assert!(err.to_string().contains("GPM interval"), "{err}");
        }
        let err = TelemetrySampler::start_with_activity(
            mk(),
            0,
            None,
            10,
            ActivityOptions::off(),
            clock(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("nothing to sample"), "{err}");
        assert_eq!(
            ActivityOptions::for_duration(Some(0.0), 10.0, None).gpm_interval_s,
            None
        );
        assert_eq!(
            ActivityOptions::for_duration(Some(1.0), 45.5, None).gpm_capacity,
            48
        );
    }

    #[test]
    fn window_reports_use_only_readings_inside_the_window() {
        let rec = |s: u64, e: u64, occ: f64| GpmRecord {
            scope: ActivityScope::Device,
            gpu_instance_id: None,
            start_unix_ns: s,
            end_unix_ns: e,
            metrics: GpmValues {
                sm_occupancy_pct: Some(occ),
                ..GpmValues::default()
            },
        };
        let activity = Activity {
            gpm_interval_s: Some(1.0),
            gpm: vec![
                rec(0, 10, 90.0),
                rec(10, 20, 20.0),
                rec(20, 30, 30.0),
                rec(30, 40, 90.0),
            ],
            gpm_scopes: vec![GpmScopeStatus {
                scope: ActivityScope::Device,
                gpu_instance_id: None,
                supported: true,
                reason: None,
                failed_reads: 1,
            }],
            telemetry_on: true,
            ..Activity::default()
        };
        let r = activity.gpm_report(10, 35);
        assert_eq!(r.scopes[0].samples, 2);
        assert_eq!(r.scopes[0].failed_reads, 1);
        let occ = r.scopes[0].metrics.sm_occupancy_pct.unwrap();
        assert!((occ.mean - 25.0).abs() < 1e-12 && (occ.max - 30.0).abs() < 1e-12);

        let samples: Vec<TelemetrySample> = [(0u64, 0u64), (100, 10_000), (200, 30_000)]
            .iter()
            .map(|&(t, e)| TelemetrySample {
                t_unix_ns: t,
                energy_mj: Some(e),
                ..TelemetrySample::default()
            })
            .collect();
        let e = activity.energy_report(&samples, 50, 150);
        let span = e.scopes[0].window.unwrap();
        assert!((span.start_mj - 5_000.0).abs() < 1e-9 && (span.end_mj - 20_000.0).abs() < 1e-9);
        assert!((span.joules - 15.0).abs() < 1e-9);
        let outside = activity.energy_report(&samples, 50, 250);
        assert!(outside.scopes[0].window.is_none());
        assert_eq!(
            outside.scopes[0].reason.as_deref(),
            Some("the energy readings do not surround the window")
        );
    }

    #[test]
    fn the_real_sampler_fails_cleanly_without_nvml() {
        // On a host without the driver this is NvmlUnavailable, naming the library; with one it
        // starts (and stops) for real.
        let report = DeviceReport {
            info: coload_cohort_schema::DeviceInfo::cpu(),
            warnings: Vec::new(),
            target: Some(NvmlTarget {
                gpu_index: 0,
                mig_index: None,
            }),
            gpu_instance_id: None,
        };
        match TelemetrySampler::start(&report, 10.0, 10) {
            Ok(sampler) => drop(sampler.stop_all()),
            Err(e) => {
                eprintln!("without NVML: {e}");
                assert_eq!(e.kind(), coload_cohort_schema::FailureKind::NvmlUnavailable);
                assert!(e.to_string().contains("libnvidia-ml"), "{e}");
            }
        }
    }
}
