//! What a share delivers against what it promises: one worker alone under a sharing policy (an
//! MPS share of the threads, unlimited MPS, time-slicing), its rate over the same card's
//! exclusive solo runs with the 95 % interval `compare` gives each repeated shape
//! (`RepeatStats::vs_solo`), against the share of the threads promised (MPS at R replicas:
//! 100/R %; unlimited MPS and time-slicing alone: the whole card, 100 %).

use coload_cohort_schema::{Comparison, Mode, RatioInterval, Workload};

use crate::frontier::policy_words;

/// One worker alone under one share.
#[derive(Debug, Clone, PartialEq)]
pub struct SharePoint {
    /// The worker's workload.
    pub workload: Workload,
    /// Its model, where known.
    pub model: Option<String>,
    /// The policy and share in a user's words.
    pub label: String,
    /// The share of the threads promised, percent.
    pub promised_pct: f64,
    /// Its rate over the same card's exclusive solo runs, with its 95 % interval.
    pub delivered: RatioInterval,
}

/// Every shape of one worker alone under a sharing policy with a ratio against its card's solo
/// runs (the first card's, where a shape ran on several); empty unless at least one of them
/// was promised less than the whole card (a study of shares).
#[must_use]
pub fn share_fidelity(c: &Comparison) -> Vec<SharePoint> {
    let mut out = Vec::new();
    for g in c.repeats.iter().filter(|g| g.count == 1) {
        let promised_pct = match (g.mode, g.share) {
            (Mode::Mps, Some(s)) => s.active_thread_percentage.map_or(100.0, f64::from),
            (Mode::Timeslice | Mode::Mps, _) => 100.0,
            _ => continue,
        };
        for (workload, stats) in &g.groups {
            let Some(r) = stats.vs_solo.first() else {
                continue;
            };
            out.push(SharePoint {
                workload: *workload,
                model: g.models.get(workload).cloned(),
                label: policy_words(g.mode, g.share.as_ref()),
                promised_pct,
                delivered: r.aggregate_vs_solo,
            });
        }
    }
    if out.iter().all(|p| p.promised_pct >= 100.0) {
        return Vec::new();
    }
    out.sort_by(|a, b| {
        a.workload
            .cmp(&b.workload)
            .then(a.promised_pct.total_cmp(&b.promised_pct))
            .then(a.label.cmp(&b.label))
    });
    out
}
