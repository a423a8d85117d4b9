//! Ratios against a baseline with their 95% interval, the words an interval allows, and when a
//! repeated shape has been measured enough.
//!
//! Every verdict coload states is a ratio: a cohort's rate, tail or energy over the same
//! workload alone. Both sides are noisy: on one H200 six solo trainers within three minutes
//! spread over 15 %, so a baseline is a set of repeats, not one run, and the interval of the
//! ratio must carry the baseline's own noise as well as the cohort's.
//!
//! **The interval: the delta method on the log of the ratio** (Welch's unequal-variance
//! interval, taken on the log scale). For means `a` (n_a values, standard deviation s_a) and `b`
//! (n_b, s_b), `ln(a/b)` has the approximate standard error
//! `se = sqrt(s_a^2 / (n_a a^2) + s_b^2 / (n_b b^2))` (each term a squared coefficient of
//! variation of a mean), with Welch-Satterthwaite degrees of freedom, and the interval is
//! `a/b * exp(+-t(0.975, df) * se)`. Chosen over Fieller's interval because the quantities are
//! positive rates whose noise is multiplicative (a card 12 % faster is 12 % faster at every
//! rate), because the interval is never negative and never unbounded (Fieller's is unbounded
//! when the baseline's interval reaches zero), and because a ratio and its inverse get the same
//! interval inverted. The coverage test in `tests/ratio_coverage.rs` simulates 1,000 studies.
//!
//! When one side was measured once, its spread is unknown; the other side's coefficient of
//! variation stands in for it (the same workload on the same card: a cohort is assumed as
//! noisy, relatively, as its baseline), and the degrees of freedom are the measured side's.
//! With one value on both sides there is no interval.
//!
//! **Words follow the interval**, never a fixed threshold: a ratio is *as fast as* the baseline
//! only when its interval contains 1 and lies within the stated tolerance of it; *slower* or
//! *faster* only when the interval excludes 1; otherwise it is *not settled*.
//!
//! **Repeats stop when the verdict is settled** ([`stop_rule`]): a shape is repeated until its
//! ratio's interval is narrower than the precision asked for, or until no value inside the
//! interval could change the verdict (the interval lies on one side of every threshold the
//! verdict uses), or until the maximum number of repeats; never before two repeats, since one
//! value has no spread.

pub use coload_cohort_schema::RatioInterval;
use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::stats::mean_stddev;

/// The ratio of the mean of `numerator` over the mean of `denominator`, with its 95% interval
/// by the delta method on the log ratio (see the module's documentation). `None` when either
/// side is empty, or a mean is not positive and finite.
#[must_use]
pub fn ratio_of_means(numerator: &[f64], denominator: &[f64]) -> Option<RatioInterval> {
    let (a, sa) = mean_stddev(numerator)?;
    let (b, sb) = mean_stddev(denominator)?;
    ratio_of_estimates(
        (a, sa, numerator.len() as u32),
        (b, sb, denominator.len() as u32),
    )
}

/// [`ratio_of_means`] from each side's mean, sample standard deviation and count (what an
/// [`Estimate`](coload_cohort_schema::Estimate) keeps). `None` for a count of 0, or a mean that
/// is not positive and finite.
#[must_use]
pub fn ratio_of_estimates(
    (a, sa, n_a): (f64, f64, u32),
    (b, sb, n_b): (f64, f64, u32),
) -> Option<RatioInterval> {
    if n_a == 0 || n_b == 0 || !(a.is_finite() && b.is_finite() && a > 0.0 && b > 0.0) {
        return None;
    }
    let (na, nb) = (f64::from(n_a), f64::from(n_b));
    let ratio = a / b;
    let out = |low, high| RatioInterval {
        ratio,
        low,
        high,
        n_numerator: n_a,
        n_denominator: n_b,
    };
    // Squared coefficients of variation of each value; a side measured once borrows the
    // other's (see the module's documentation).
    let (cv2_a, cv2_b, df) = match (n_a >= 2, n_b >= 2) {
        (false, false) => return Some(out(None, None)),
        (true, true) => {
            let (va, vb) = ((sa / a).powi(2) / na, (sb / b).powi(2) / nb);
            let df = welch_df(va, na, vb, nb);
            return Some(interval(ratio, va + vb, df, out));
        }
        (true, false) => ((sa / a).powi(2), (sa / a).powi(2), na - 1.0),
        (false, true) => ((sb / b).powi(2), (sb / b).powi(2), nb - 1.0),
    };
    Some(interval(ratio, cv2_a / na + cv2_b / nb, df, out))
}

/// Welch-Satterthwaite degrees of freedom for two variance terms `va` (of a mean of `na`
/// values) and `vb`; the smaller side's `n - 1` when both terms are zero.
fn welch_df(va: f64, na: f64, vb: f64, nb: f64) -> f64 {
    let denom = va * va / (na - 1.0) + vb * vb / (nb - 1.0);
    if denom > 0.0 {
        (va + vb).powi(2) / denom
    } else {
        (na.min(nb) - 1.0).max(1.0)
    }
}

fn interval(
    ratio: f64,
    var_log: f64,
    df: f64,
    out: impl Fn(Option<f64>, Option<f64>) -> RatioInterval,
) -> RatioInterval {
    let Some(t) = StudentsT::new(0.0, 1.0, df.max(1.0))
        .ok()
        .map(|d| d.inverse_cdf(0.975))
    else {
        return out(None, None);
    };
    let half = t * var_log.max(0.0).sqrt();
    out(Some(ratio * (-half).exp()), Some(ratio * half.exp()))
}

/// The aggregate against one worker alone from which sharing counts as adding throughput: the
/// verdict's threshold, and one the stopping rule keeps an interval clear of.
pub const GAIN: f64 = 1.10;

/// How close to its solo rate, relatively, one worker alone under a sharing policy must provably
/// be (its whole 95 % interval within 1 +- this) to run "as fast as a whole GPU". Two solo runs
/// on one card differ by a few percent, so a tighter bound could never be shown.
pub const ALONE_TOLERANCE: f64 = 0.05;

/// Every ratio at which the verdict's words about a throughput ratio change: slower or faster
/// than solo (1), "as fast as" (within [`ALONE_TOLERANCE`]) and "adds throughput" ([`GAIN`]).
/// A repeated shape whose interval lies clear of all of them cannot change its verdict.
pub const VERDICT_THRESHOLDS: [f64; 4] = [1.0 - ALONE_TOLERANCE, 1.0, 1.0 + ALONE_TOLERANCE, GAIN];

/// What an interval allows a sentence to say about a ratio against 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RatioWords {
    /// The interval contains 1 and lies within the tolerance of it.
    AsFastAs,
    /// The interval lies below 1.
    Below,
    /// The interval lies above 1.
    Above,
    /// The interval contains 1 but is wider than the tolerance (or there is none): the data do
    /// not say.
    NotSettled,
}

/// The words a ratio's interval allows, with `tolerance` the relative distance from 1 within
/// which "as fast as" may be said (0.05: the whole interval within 0.95 and 1.05).
#[must_use]
pub fn ratio_words(r: &RatioInterval, tolerance: f64) -> RatioWords {
    match r.side_of(1.0) {
        Some(true) => RatioWords::Above,
        Some(false) => RatioWords::Below,
        None => match (r.low, r.high) {
            (Some(low), Some(high)) if low >= 1.0 - tolerance && high <= 1.0 + tolerance => {
                RatioWords::AsFastAs
            }
            _ => RatioWords::NotSettled,
        },
    }
}

/// Why a repeated shape stopped (or must go on).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// Fewer than two repeats, or the interval still allows more than one verdict and is wider
    /// than the precision: run another repeat.
    Continue,
    /// The interval is narrower than the precision asked for.
    Precise,
    /// Every value inside the interval gives the same verdict: more repeats cannot change it.
    Settled,
    /// The maximum number of repeats was reached first.
    MaxRepeats,
}

impl StopReason {
    /// Whether no further repeat is needed.
    #[must_use]
    pub fn stops(self) -> bool {
        self != Self::Continue
    }
}

/// The smallest number of repeats a shape is given before it may stop: one value has no spread.
pub const MIN_REPEATS: u32 = 2;

/// Whether a shape whose ratio is `r` after `repeats` repeats has been measured enough:
/// `precision` is the relative interval width asked for (`(high - low) / ratio`), `thresholds`
/// every ratio at which the verdict fed by this ratio changes its words (1, and a gain or tail
/// threshold where the verdict uses one), `max_repeats` the most repeats allowed.
#[must_use]
pub fn stop_rule(
    r: Option<&RatioInterval>,
    repeats: u32,
    precision: f64,
    thresholds: &[f64],
    max_repeats: u32,
) -> StopReason {
    if repeats < MIN_REPEATS.min(max_repeats) {
        return StopReason::Continue;
    }
    if let Some(width) = r.and_then(RatioInterval::relative_width) {
        if width <= precision {
            return StopReason::Precise;
        }
        if let Some(r) = r
            && !thresholds.is_empty()
            && thresholds.iter().all(|t| r.side_of(*t).is_some())
        {
            return StopReason::Settled;
        }
    }
    if repeats >= max_repeats {
        StopReason::MaxRepeats
    } else {
        StopReason::Continue
    }
}

#[cfg(test)]
#[expect(
    clippy::float_cmp,
    reason = "the figures are exact by construction and the tests assert them exactly"
)]
mod tests {
    use super::*;

    #[test]
    fn the_ratio_is_the_ratio_of_the_means_and_its_interval_contains_it() {
        let r = ratio_of_means(&[90.0, 100.0, 110.0], &[200.0, 190.0, 210.0]).unwrap();
        assert_eq!(r.ratio, 0.5);
        assert!(r.low.unwrap() < 0.5 && 0.5 < r.high.unwrap());
        assert_eq!((r.n_numerator, r.n_denominator), (3, 3));
    }

    #[test]
    fn the_interval_inverts_with_the_ratio() {
        let a = [90.0, 100.0, 110.0];
        let b = [200.0, 180.0, 215.0, 205.0];
        let ab = ratio_of_means(&a, &b).unwrap();
        let ba = ratio_of_means(&b, &a).unwrap();
        assert!((ab.low.unwrap() * ba.high.unwrap() - 1.0).abs() < 1e-12);
        assert!((ab.high.unwrap() * ba.low.unwrap() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn a_noisier_baseline_widens_the_interval() {
        let cohort = [100.0, 101.0, 99.0];
        let steady = ratio_of_means(&cohort, &[100.0, 101.0, 99.0]).unwrap();
        let noisy = ratio_of_means(&cohort, &[85.0, 100.0, 115.0]).unwrap();
        assert!(noisy.relative_width().unwrap() > 3.0 * steady.relative_width().unwrap());
    }

    #[test]
    fn one_value_on_a_side_borrows_the_other_sides_spread_and_none_gives_no_interval() {
        let one = ratio_of_means(&[100.0], &[95.0, 100.0, 105.0]).unwrap();
        let both = ratio_of_means(&[95.0, 100.0, 105.0], &[95.0, 100.0, 105.0]).unwrap();
        // Same relative spread and the same n on the repeated side: the single value counts as
        // one value of that spread, so its interval is wider than with three.
        assert!(one.relative_width().unwrap() > both.relative_width().unwrap());
        let none = ratio_of_means(&[100.0], &[100.0]).unwrap();
        assert_eq!((none.low, none.high), (None, None));
        assert_eq!(none.ratio, 1.0);
    }

    #[test]
    fn no_ratio_without_positive_finite_means() {
        assert!(ratio_of_means(&[], &[1.0]).is_none());
        assert!(ratio_of_means(&[1.0], &[0.0]).is_none());
        assert!(ratio_of_means(&[1.0], &[-1.0, -2.0]).is_none());
        assert!(ratio_of_means(&[f64::NAN], &[1.0]).is_none());
    }

    fn r(low: f64, high: f64) -> RatioInterval {
        RatioInterval {
            ratio: f64::midpoint(low, high),
            low: Some(low),
            high: Some(high),
            n_numerator: 3,
            n_denominator: 3,
        }
    }

    #[test]
    fn words_follow_the_interval() {
        assert_eq!(ratio_words(&r(0.97, 1.02), 0.05), RatioWords::AsFastAs);
        assert_eq!(ratio_words(&r(0.90, 1.02), 0.05), RatioWords::NotSettled);
        assert_eq!(ratio_words(&r(0.90, 0.98), 0.05), RatioWords::Below);
        assert_eq!(ratio_words(&r(1.01, 1.03), 0.05), RatioWords::Above);
        // The old fixed rule called 0.97x "as fast as" whatever its spread; with an interval
        // from 0.93 to 1.01 it is not settled at a 5 % tolerance.
        assert_eq!(ratio_words(&r(0.93, 1.01), 0.05), RatioWords::NotSettled);
    }

    #[test]
    fn stopping_needs_two_repeats_then_precision_or_a_settled_verdict() {
        let wide_below = r(0.50, 0.80);
        let narrow = r(0.99, 1.005);
        let straddling = r(0.90, 1.20);
        assert_eq!(
            stop_rule(Some(&narrow), 1, 0.02, &[1.0], 10),
            StopReason::Continue
        );
        assert_eq!(
            stop_rule(Some(&narrow), 2, 0.02, &[1.0], 10),
            StopReason::Precise
        );
        assert_eq!(
            stop_rule(Some(&wide_below), 2, 0.02, &[1.0], 10),
            StopReason::Settled
        );
        // Below 1 but straddling the gain threshold of another verdict: not settled.
        assert_eq!(
            stop_rule(Some(&wide_below), 2, 0.02, &[1.0, 0.6], 10),
            StopReason::Continue
        );
        assert_eq!(
            stop_rule(Some(&straddling), 3, 0.02, &[1.0], 10),
            StopReason::Continue
        );
        assert_eq!(
            stop_rule(Some(&straddling), 10, 0.02, &[1.0], 10),
            StopReason::MaxRepeats
        );
        assert_eq!(stop_rule(None, 1, 0.02, &[1.0], 1), StopReason::MaxRepeats);
    }
}
