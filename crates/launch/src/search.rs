//! The capacity search: the highest offered rate at which a serve worker meets its latency
//! objective, found by probing whole cohorts.
//!
//! A probe runs a complete cohort at one rate and answers pass or fail (the SLO verdict of
//! [`coload_cohort_schema::SloAttainment::meets`]: the observed percentile within the objective,
//! MLPerf LoadGen's early-stopping test passed, the server not overloaded). The search assumes
//! what queueing makes true on average: more load never lowers latency, so pass/fail is
//! monotone in the rate. It then keeps one invariant: `low` passed and `high` failed, with
//! `low < high`.
//!
//! 1. **Bracketing.** Probe the start rate. If it passes, double until a probe fails (or the
//!    maximum rate passes); if it fails, halve until one passes (or the minimum rate fails).
//! 2. **Bisecting.** Probe the geometric mean of the bracket (the bracket was found by doubling,
//!    so its relative width is what matters) and move the end it replaces, until
//!    `high / low - 1 <= tolerance` or the probes run out.
//!
//! The capacity reported is `low`: a rate that was measured to pass, never an interpolation.
//! Every probe is kept, so a reader sees the bracket and any noise. With a budget of `n` probes
//! and a start within a factor `2^k` of the capacity, bracketing takes `k + 1` probes and each
//! bisection halves the bracket's logarithm: from a factor-2 bracket, 5 % needs
//! `ceil(log2(ln 2 / ln 1.05)) = 4` more.

/// How to search.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CapacitySearch {
    /// The first rate probed, requests per second.
    pub start_per_s: f64,
    /// Never probe below this rate.
    pub min_per_s: f64,
    /// Never probe above this rate.
    pub max_per_s: f64,
    /// The most cohorts to run.
    pub max_probes: u32,
    /// Stop when `high / low - 1` is at most this.
    pub tolerance: f64,
}

impl CapacitySearch {
    /// Checks the numbers, naming the flag at fault.
    pub fn validate(&self) -> Result<(), CapacitySearchError> {
        for (name, v) in [
            ("--rate", self.start_per_s),
            ("--rate-min", self.min_per_s),
            ("--rate-max", self.max_per_s),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(CapacitySearchError(format!(
                    "{name} must be a positive number of requests per second, got {v}"
                )));
            }
        }
        if !(self.min_per_s <= self.start_per_s && self.start_per_s <= self.max_per_s) {
            return Err(CapacitySearchError(format!(
                "the capacity search needs --rate-min <= --rate <= --rate-max, got {} <= {} <= {}",
                self.min_per_s, self.start_per_s, self.max_per_s
            )));
        }
        if self.max_probes < 2 {
            return Err(CapacitySearchError(format!(
                "--max-probes must be at least 2 (one passing and one failing rate), got {}",
                self.max_probes
            )));
        }
        if !(self.tolerance.is_finite() && self.tolerance > 0.0) {
            return Err(CapacitySearchError(format!(
                "--capacity-tolerance must be a positive fraction (0.05 is 5 %), got {}",
                self.tolerance
            )));
        }
        Ok(())
    }
}

pub use coload_cohort_schema::StopReason;

/// Why a capacity search's numbers were refused; the message names the flag at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CapacitySearchError(pub String);

/// What the search found.
#[derive(Debug, Clone, PartialEq)]
pub struct CapacityResult {
    /// The highest rate that passed below every rate that failed (`None` when none passed).
    pub capacity_per_s: Option<f64>,
    /// The lowest rate that failed above it (`None` when none failed).
    pub failed_above_per_s: Option<f64>,
    /// Why it stopped.
    pub stop: StopReason,
    /// Every probe in order: rate and pass.
    pub probes: Vec<(f64, bool)>,
}

/// Rounds a rate to four significant digits, so that probe rates read cleanly.
fn round_rate(r: f64) -> f64 {
    if r <= 0.0 || !r.is_finite() {
        return r;
    }
    let scale = 10f64.powi(3 - r.log10().floor() as i32);
    (r * scale).round() / scale
}

/// Runs the search, calling `probe(rate)` for each cohort; a probe error stops the search and
/// is returned with nothing lost (the caller keeps its own record of the probes).
pub fn find_capacity<E>(
    search: &CapacitySearch,
    mut probe: impl FnMut(f64) -> Result<bool, E>,
) -> Result<CapacityResult, E> {
    let mut probes: Vec<(f64, bool)> = Vec::new();
    let mut run = |rate: f64, probes: &mut Vec<(f64, bool)>| -> Result<bool, E> {
        let passed = probe(rate)?;
        probes.push((rate, passed));
        Ok(passed)
    };
    let budget = search.max_probes as usize;
    let mut rate = round_rate(search.start_per_s);
    let (mut low, mut high);
    // Bracketing.
    if run(rate, &mut probes)? {
        low = rate;
        loop {
            if low >= search.max_per_s {
                return Ok(result(Some(low), None, StopReason::MaxRatePasses, probes));
            }
            if probes.len() >= budget {
                return Ok(result(Some(low), None, StopReason::ProbesExhausted, probes));
            }
            rate = round_rate((low * 2.0).min(search.max_per_s));
            if run(rate, &mut probes)? {
                low = rate;
            } else {
                high = rate;
                break;
            }
        }
    } else {
        high = rate;
        loop {
            if high <= search.min_per_s {
                return Ok(result(None, Some(high), StopReason::MinRateFails, probes));
            }
            if probes.len() >= budget {
                return Ok(result(
                    None,
                    Some(high),
                    StopReason::ProbesExhausted,
                    probes,
                ));
            }
            rate = round_rate((high / 2.0).max(search.min_per_s));
            if run(rate, &mut probes)? {
                low = rate;
                break;
            }
            high = rate;
        }
    }
    // Bisecting, in the logarithm of the rate.
    loop {
        if high / low - 1.0 <= search.tolerance {
            return Ok(result(Some(low), Some(high), StopReason::Converged, probes));
        }
        if probes.len() >= budget {
            return Ok(result(
                Some(low),
                Some(high),
                StopReason::ProbesExhausted,
                probes,
            ));
        }
        let mid = round_rate((low * high).sqrt());
        if mid <= low || mid >= high {
            // Four significant digits cannot split the bracket any further.
            return Ok(result(Some(low), Some(high), StopReason::Converged, probes));
        }
        if run(mid, &mut probes)? {
            low = mid;
        } else {
            high = mid;
        }
    }
}

fn result(
    low: Option<f64>,
    high: Option<f64>,
    stop: StopReason,
    probes: Vec<(f64, bool)>,
) -> CapacityResult {
    CapacityResult {
        capacity_per_s: low,
        failed_above_per_s: high,
        stop,
        probes,
    }
}

#[cfg(test)]
#[expect(
    clippy::float_cmp,
    reason = "the rates are exact by construction and the tests assert them exactly"
)]
mod tests {
    use super::*;

    fn search(start: f64) -> CapacitySearch {
        CapacitySearch {
            start_per_s: start,
            min_per_s: 1.0,
            max_per_s: 100_000.0,
            max_probes: 20,
            tolerance: 0.05,
        }
    }

    /// A server that passes at or below `capacity`.
    fn threshold(capacity: f64) -> impl FnMut(f64) -> Result<bool, ()> {
        move |r| Ok(r <= capacity)
    }

    #[test]
    fn finds_a_capacity_above_the_start_within_the_tolerance() {
        let r = find_capacity(&search(100.0), threshold(737.0)).unwrap();
        assert_eq!(r.stop, StopReason::Converged);
        let (low, high) = (r.capacity_per_s.unwrap(), r.failed_above_per_s.unwrap());
        assert!(low <= 737.0 && high > 737.0, "{low} {high}");
        assert!(high / low - 1.0 <= 0.05);
        // Bracketing: 100, 200, 400 pass, 800 fails; then bisection.
        let rates: Vec<f64> = r.probes.iter().map(|p| p.0).collect();
        assert_eq!(&rates[..4], [100.0, 200.0, 400.0, 800.0]);
        assert!(r.probes.len() <= 4 + 4, "{:?}", r.probes);
        // Every pass is below every fail: the invariant held.
        let max_pass = r
            .probes
            .iter()
            .filter(|p| p.1)
            .map(|p| p.0)
            .fold(0.0, f64::max);
        let min_fail = r
            .probes
            .iter()
            .filter(|p| !p.1)
            .map(|p| p.0)
            .fold(f64::MAX, f64::min);
        assert!(max_pass < min_fail);
        assert_eq!(low, max_pass);
    }

    #[test]
    fn finds_a_capacity_below_the_start() {
        let r = find_capacity(&search(1000.0), threshold(90.0)).unwrap();
        assert_eq!(r.stop, StopReason::Converged);
        assert!(r.capacity_per_s.unwrap() <= 90.0);
        assert!(r.failed_above_per_s.unwrap() > 90.0);
        let rates: Vec<f64> = r.probes.iter().map(|p| p.0).collect();
        assert_eq!(&rates[..5], [1000.0, 500.0, 250.0, 125.0, 62.5]);
    }

    #[test]
    fn bounds_and_budget_stop_the_search() {
        let r = find_capacity(&search(100.0), threshold(1e9)).unwrap();
        assert_eq!(r.stop, StopReason::MaxRatePasses);
        assert_eq!(r.capacity_per_s, Some(100_000.0));
        let r = find_capacity(&search(100.0), threshold(0.1)).unwrap();
        assert_eq!(r.stop, StopReason::MinRateFails);
        assert_eq!(r.capacity_per_s, None);
        assert_eq!(r.failed_above_per_s, Some(1.0));
        let mut s = search(100.0);
        s.max_probes = 3;
        let r = find_capacity(&s, threshold(737.0)).unwrap();
        assert_eq!(r.stop, StopReason::ProbesExhausted);
        assert_eq!(r.probes.len(), 3);
        assert_eq!(r.capacity_per_s, Some(400.0));
        assert_eq!(r.failed_above_per_s, None);
    }

    #[test]
    fn a_probe_error_stops_the_search() {
        let mut n = 0;
        let e = find_capacity(&search(100.0), |_| {
            n += 1;
            if n == 3 {
                Err("cohort failed")
            } else {
                Ok(true)
            }
        })
        .unwrap_err();
        assert_eq!(e, "cohort failed");
    }

    #[test]
    fn bad_searches_are_refused() {
        let mut s = search(100.0);
        s.start_per_s = 0.0;
        assert!(
            s.validate()
                .unwrap_err()
                .0
                .contains("--rate must be a positive")
        );
        let mut s = search(100.0);
        s.min_per_s = 200.0;
        assert!(s.validate().unwrap_err().0.contains("--rate-min <= --rate"));
        let mut s = search(100.0);
        s.max_probes = 1;
        assert!(s.validate().is_err());
        let mut s = search(100.0);
        s.tolerance = 0.0;
        assert!(s.validate().is_err());
        assert!(search(100.0).validate().is_ok());
        assert_eq!(round_rate(123.456_78), 123.5);
        assert_eq!(round_rate(0.012_345_6), 0.012_35);
    }
}
