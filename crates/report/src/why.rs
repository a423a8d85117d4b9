//! The "why" view: GPU activity (GPM) and energy next to the rates and tails they explain.
//!
//! A cohort's rate says what sharing did; SM occupancy and DRAM bandwidth say why (a GPU whose
//! SMs are busy but a quarter full has room that MPS can fill and time-slicing cannot), and
//! samples per joule say what it cost. These tables are rendered into the summary (text and
//! Markdown) and the comparison (Markdown and HTML) by the functions here, kept apart from the
//! other renderings so that each stays small.

use std::fmt::Write as _;

use coload_cohort_schema::{CohortSummary, Comparison, MeanMax};

use super::document::Table;

/// What the comparison's "why" section says above its table. The attribution caveat itself is
/// stated once, in the caveats.
pub(crate) const WHY_NOTE: &str = "Device-wide NVML GPM activity and energy over each cohort's \
     common interval, beside the rate and tail they explain: SM occupancy (resident warps against \
     the maximum) and DRAM bandwidth (against the peak) are means over the GPU; samples/J divides \
     the group's kept samples by the whole GPU's joules, which every group of a mixed cohort \
     shares. See the caveats on attribution.";

fn pct(x: Option<&MeanMax>) -> String {
    x.map_or_else(|| "-".to_owned(), |m| format!("{:.1}", m.mean))
}

fn pct_mean_max(x: Option<&MeanMax>) -> String {
    x.map_or_else(
        || "-".to_owned(),
        |m| format!("{:.1} / {:.1}", m.mean, m.max),
    )
}

fn per_joule(x: Option<f64>) -> String {
    x.map_or_else(|| "-".to_owned(), |v| format!("{v:.3}"))
}

/// The summary's GPM table (one row per device and scope) and its energy line; `None` when the
/// cohort recorded neither.
pub(crate) fn summary_activity(s: &CohortSummary) -> Option<(Option<Table>, Option<String>)> {
    if s.gpm.is_empty() && s.energy.is_none() {
        return None;
    }
    let table = (!s.gpm.is_empty()).then(|| {
        let mut t = Table::new(&[
            "device",
            "scope",
            "replica",
            "readings",
            "graphics % (mean / max)",
            "SM util %",
            "SM occupancy %",
            "tensor %",
            "DRAM BW %",
            "note",
        ]);
        for d in &s.gpm {
            let m = &d.metrics;
            t.row(vec![
                d.device.clone(),
                d.scope.to_string(),
                d.replica.map_or_else(|| "-".to_owned(), |r| r.to_string()),
                d.samples.to_string(),
                pct_mean_max(m.graphics_util_pct.as_ref()),
                pct_mean_max(m.sm_util_pct.as_ref()),
                pct_mean_max(m.sm_occupancy_pct.as_ref()),
                pct_mean_max(m.any_tensor_util_pct.as_ref()),
                pct_mean_max(m.dram_bw_util_pct.as_ref()),
                d.reason.clone().unwrap_or_else(|| "-".to_owned()),
            ]);
        }
        t
    });
    let energy = s.energy.as_ref().map(|e| {
        let mut line = format!(
            "energy (device-wide, common interval): {:.1} J, mean {:.1} W",
            e.joules, e.mean_power_w
        );
        let per_group: Vec<String> = s
            .groups
            .iter()
            .filter_map(|(w, g)| g.samples_per_device_joule.map(|v| format!("{w} {v:.3}")))
            .collect();
        if !per_group.is_empty() {
            let _ = write!(line, "; samples per device joule: {}", per_group.join(", "));
        }
        line
    });
    Some((table, energy))
}

/// The comparison's "why" table: one row per cohort and workload group, ordered by mode and
/// shape, each labelled by its policy (the study's name, else the mode and its MPS share);
/// `None` when no cohort recorded GPM or energy.
pub(crate) fn comparison_why(c: &Comparison, ctx: &super::ReportContext) -> Option<Table> {
    if c.cohorts
        .iter()
        .all(|k| k.gpm.is_none() && k.joules.is_none())
    {
        return None;
    }
    let mut t = Table::new(&[
        "policy",
        "workers",
        "experiment",
        "group",
        "aggregate samples/s",
        "p99 ms",
        "SM occupancy %",
        "DRAM BW %",
        "SM util %",
        "samples/J (device)",
    ]);
    let mut cohorts: Vec<_> = c.cohorts.iter().collect();
    // Stable: repeats of one shape keep the order they were given in.
    cohorts.sort_by(|a, b| {
        (a.mode, &a.workload_mix, a.count).cmp(&(b.mode, &b.workload_mix, b.count))
    });
    for k in cohorts {
        let mix: Vec<String> = k
            .workload_mix
            .iter()
            .map(|(w, n)| format!("{n} {w}"))
            .collect();
        let gpm = k.gpm.as_ref();
        for (workload, g) in &k.groups {
            t.row(vec![
                super::verdict::policy_label(ctx, k),
                mix.join(", "),
                k.experiment.clone(),
                workload.to_string(),
                super::svg::num(g.aggregate_samples_per_s),
                super::svg::num(g.p99_ms),
                pct(gpm.and_then(|m| m.sm_occupancy_pct.as_ref())),
                pct(gpm.and_then(|m| m.dram_bw_util_pct.as_ref())),
                pct(gpm.and_then(|m| m.sm_util_pct.as_ref())),
                per_joule(g.samples_per_device_joule),
            ]);
        }
    }
    Some(t)
}
