//! Why the rates are what they are: GPM activity and energy over the common interval.
//!
//! Every worker on a physical GPU samples the same device-wide counters, so one worker's readings
//! stand for the GPU: the lowest replica whose files give readings inside the common interval.
//!
//! - GPM (`gpm.jsonl`): per physical GPU (scope `device`) and per MIG GPU instance a worker ran
//!   on (scope `mig`; once per GPU instance, however many of its compute instances the workers
//!   used, named as in [`crate::colocation`]), the mean (interval-weighted) and maximum of each metric over the readings
//!   lying entirely inside the common interval, the same rule as for batches
//!   ([`coload_measure::gpm_window`]).
//! - Energy (`telemetry.jsonl`, the counter read with every telemetry sample): per physical GPU,
//!   the counter interpolated at both ends of the common interval ([`coload_measure::energy_between`]),
//!   exact to within the interpolation inside one sampling period; summed over the cohort's
//!   GPUs. Samples per joule divide a workload group's kept samples by those device-wide joules,
//!   which every group of a mixed cohort shares (and, under MIG, instances outside the cohort
//!   too): a device-wide efficiency, labelled so.
//!
//! Nothing here can refuse a cohort: activity is evidence about the rates, not part of them. An
//! unreadable file is a warning, and a cohort recorded before GPM existed simply has none.

use std::cell::OnceCell;
use std::collections::BTreeMap;
use std::path::Path;

use coload_cohort_schema::{
    ActivityScope, DeviceEnergy, EnergySpan, EnergySummary, GpmDeviceSummary, GpmRecord, GpmStats,
    SummaryWarning, TelemetrySample, files, read_lines,
};

use crate::colocation::gpu_instances;
use crate::inputs::WorkerInput;
use crate::interval::Span;

/// GPM and energy of one cohort over its common interval.
#[derive(Debug, Default)]
pub(crate) struct CohortActivity {
    pub(crate) gpm: Vec<GpmDeviceSummary>,
    pub(crate) energy: Option<EnergySummary>,
    pub(crate) warnings: Vec<SummaryWarning>,
}

/// The files of one worker, each read at most once (a file that is absent or unreadable is
/// read as `None`).
struct Files<'a> {
    input: &'a WorkerInput,
    gpm: OnceCell<Option<Vec<GpmRecord>>>,
    telemetry: OnceCell<Option<Vec<TelemetrySample>>>,
}

fn read_optional<T: serde::de::DeserializeOwned>(
    dir: &Path,
    name: &str,
    warnings: &mut Vec<SummaryWarning>,
) -> Option<Vec<T>> {
    let path = dir.join(name);
    if !path.is_file() {
        return None;
    }
    match read_lines(&path) {
        Ok(v) => Some(v),
        Err(e) => {
            warnings.push(SummaryWarning {
                kind: "activity_unreadable".to_owned(),
                message: format!("{e}; its GPM or energy figures are left out"),
            });
            None
        }
    }
}

impl<'a> Files<'a> {
    fn new(input: &'a WorkerInput) -> Self {
        Files {
            input,
            gpm: OnceCell::new(),
            telemetry: OnceCell::new(),
        }
    }

    fn replica(&self) -> u32 {
        self.input.report.replica
    }

    fn gpm(&self, warnings: &mut Vec<SummaryWarning>) -> Option<&[GpmRecord]> {
        self.gpm
            .get_or_init(|| read_optional(&self.input.dir, files::GPM, warnings))
            .as_deref()
    }

    fn telemetry(&self, warnings: &mut Vec<SummaryWarning>) -> Option<&[TelemetrySample]> {
        self.telemetry
            .get_or_init(|| read_optional(&self.input.dir, files::TELEMETRY, warnings))
            .as_deref()
    }

    /// Why this worker has no GPM readings of `scope`, from its `worker.json`.
    fn gpm_reason(&self, scope: ActivityScope) -> Option<String> {
        let gpm = self.input.report.gpm.as_ref()?;
        gpm.scopes
            .iter()
            .find(|s| s.scope == scope)
            .and_then(|s| s.reason.clone())
            .or_else(|| gpm.reason.clone())
    }
}

/// The GPM summary of `device` at `scope` from the first of `members` (in replica order) whose
/// readings fall inside `common`; with none, why (from the first worker that says).
fn gpm_summary(
    device: &str,
    scope: ActivityScope,
    members: &[&Files<'_>],
    common: Span,
    warnings: &mut Vec<SummaryWarning>,
) -> GpmDeviceSummary {
    for f in members {
        let Some(records) = f.gpm(warnings) else {
            continue;
        };
        let (metrics, samples) =
            coload_measure::gpm_window(records, scope, common.start_unix_ns, common.end_unix_ns);
        if samples > 0 {
            return GpmDeviceSummary {
                device: device.to_owned(),
                scope,
                replica: Some(f.replica()),
                samples,
                interval_s: f.input.report.gpm.as_ref().and_then(|g| g.interval_s),
                metrics,
                reason: None,
            };
        }
    }
    let reason = members
        .iter()
        .find_map(|f| f.gpm_reason(scope))
        .unwrap_or_else(|| {
            "no GPM readings lie inside the common interval (sampling interval longer than the \
             interval, or gpm.jsonl missing)"
                .to_owned()
        });
    GpmDeviceSummary {
        device: device.to_owned(),
        scope,
        replica: None,
        samples: 0,
        interval_s: None,
        metrics: GpmStats::default(),
        reason: Some(reason),
    }
}

/// GPM and energy of the cohort `inputs` (sorted by replica) over `common`.
pub(crate) fn cohort_activity(inputs: &[WorkerInput], common: Span) -> CohortActivity {
    let mut out = CohortActivity::default();
    // Nothing recorded by any worker (a cohort from before GPM and energy, or a CPU cohort):
    // no entries and no warnings.
    let recorded = |w: &WorkerInput| {
        w.report.gpm.is_some()
            || w.report.energy.is_some()
            || w.dir.join(files::GPM).is_file()
            || w.dir.join(files::TELEMETRY).is_file()
    };
    if !inputs.iter().any(recorded) {
        return out;
    }
    let all: Vec<Files<'_>> = inputs.iter().map(Files::new).collect();
    let any_gpm = inputs
        .iter()
        .any(|w| w.report.gpm.is_some() || w.dir.join(files::GPM).is_file());

    // Physical GPUs, in UUID order, each with its workers in replica order.
    let mut by_gpu: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, w) in inputs.iter().enumerate() {
        if let Some(g) = w.report.device.as_ref().and_then(|d| d.gpu_uuid.as_ref()) {
            by_gpu.entry(g.clone()).or_default().push(i);
        }
    }
    // MIG GPU instances, once each: the workers on compute instances of one GPU instance all
    // sample its GPM (`nvmlGpmMigSampleGet` addresses the GPU instance), so one stands for it.
    let devices: Vec<_> = inputs.iter().map(|w| w.report.device.as_ref()).collect();
    let mut by_instance: Vec<(String, Vec<usize>)> = gpu_instances(&devices)
        .into_values()
        .map(|g| (g.label, g.members))
        .collect();
    by_instance.sort();

    let mut energy: Vec<DeviceEnergy> = Vec::new();
    let mut without_energy: Vec<String> = Vec::new();
    for (gpu, members) in &by_gpu {
        let picked = pick(&all, members);
        if any_gpm {
            out.gpm.push(gpm_summary(
                gpu,
                ActivityScope::Device,
                &picked,
                common,
                &mut out.warnings,
            ));
        }
        match gpu_energy(&picked, common, &mut out.warnings) {
            Some((replica, span)) => energy.push(DeviceEnergy {
                device: gpu.clone(),
                replica,
                joules: span.joules,
            }),
            None => without_energy.push(gpu.clone()),
        }
    }
    if any_gpm {
        for (instance, members) in &by_instance {
            let picked = pick(&all, members);
            out.gpm.push(gpm_summary(
                instance,
                ActivityScope::Mig,
                &picked,
                common,
                &mut out.warnings,
            ));
        }
    }

    if without_energy.is_empty() && !energy.is_empty() {
        let joules: f64 = energy.iter().map(|d| d.joules).sum();
        let seconds = common.len_ns() as f64 / 1e9;
        out.energy = Some(EnergySummary {
            scope: ActivityScope::Device,
            joules,
            mean_power_w: joules / seconds,
            devices: energy,
        });
    } else if !energy.is_empty() {
        out.warnings.push(SummaryWarning {
            kind: "energy_incomplete".to_owned(),
            message: format!(
                "no energy readings around the common interval for {}: the cohort's energy and \
                 samples per joule are left out",
                without_energy.join(", ")
            ),
        });
    }
    out
}

/// The workers at `indices`, in that order.
fn pick<'s, 'a>(all: &'s [Files<'a>], indices: &[usize]) -> Vec<&'s Files<'a>> {
    indices.iter().map(|&i| &all[i]).collect()
}

/// A physical GPU's energy over `common`: the first worker (in replica order) whose energy
/// readings surround both ends.
fn gpu_energy(
    members: &[&Files<'_>],
    common: Span,
    warnings: &mut Vec<SummaryWarning>,
) -> Option<(u32, EnergySpan)> {
    for f in members {
        let Some(samples) = f.telemetry(warnings) else {
            continue;
        };
        let readings = coload_measure::device_energy_readings(samples);
        if let Some(span) =
            coload_measure::energy_between(&readings, common.start_unix_ns, common.end_unix_ns)
        {
            return Some((f.replica(), span));
        }
    }
    None
}
