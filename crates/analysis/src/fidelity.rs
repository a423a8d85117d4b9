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

impl SharePoint {
    /// What the share delivered over what it promised: [`SharePoint::delivered`] divided by
    /// the promised fraction (see [`of_promise`]).
    #[must_use]
    pub fn of_promise(&self) -> Option<RatioInterval> {
        of_promise(&self.delivered, self.promised_pct)
    }
}

/// A share's delivered fraction of solo over the fraction it promised (`promised_pct` / 100):
/// 1 where it got exactly its promise, above where it got more. The promise is a configured
/// percentage, exact, so the interval scales with the ratio. `None` for a promise that is not
/// a positive percentage.
#[must_use]
pub fn of_promise(delivered: &RatioInterval, promised_pct: f64) -> Option<RatioInterval> {
    if !(promised_pct.is_finite() && promised_pct > 0.0) {
        return None;
    }
    let share = promised_pct / 100.0;
    Some(RatioInterval {
        ratio: delivered.ratio / share,
        low: delivered.low.map(|l| l / share),
        high: delivered.high.map(|h| h / share),
        ..*delivered
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_over_its_promise_scales_the_interval_with_the_ratio() {
        let delivered = RatioInterval {
            ratio: 0.36,
            low: Some(0.30),
            high: Some(0.42),
            n_numerator: 2,
            n_denominator: 3,
        };
        let r = of_promise(&delivered, 25.0).unwrap();
        assert!((r.ratio - 1.44).abs() < 1e-12, "{r:?}");
        assert!((r.low.unwrap() - 1.20).abs() < 1e-12 && (r.high.unwrap() - 1.68).abs() < 1e-12);
        assert_eq!((r.n_numerator, r.n_denominator), (2, 3));
        assert!((of_promise(&delivered, 100.0).unwrap().ratio - 0.36).abs() < 1e-12);
        assert!(of_promise(&delivered, 0.0).is_none());
        assert!(of_promise(&delivered, f64::NAN).is_none());
    }
}
