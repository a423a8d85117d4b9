//! Simulated studies with known true ratios and known run-to-run noise: the 95% interval of a
//! ratio against its baseline covers the truth about 95% of the time, and repeats stop where
//! the noise says they should, never before two.

use coload_analysis::ratio::{MIN_REPEATS, StopReason, ratio_of_means, stop_rule};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand_distr::{Distribution, Normal};

/// A solo trainer's rate on one H200, samples/s, and the run-to-run spread seen there (six
/// back-to-back solos over 15 %: a standard deviation of about 5 %).
const SOLO: f64 = 3_600.0;
const CV: f64 = 0.05;

fn runs(rng: &mut StdRng, mean: f64, cv: f64, n: usize) -> Vec<f64> {
    let d = Normal::new(mean, mean * cv).expect("a positive spread");
    (0..n).map(|_| d.sample(rng)).collect()
}

/// The share of `studies` simulated studies whose interval covers the true ratio.
fn coverage(seed: u64, truth: f64, n_cohort: usize, n_solo: usize, studies: usize) -> f64 {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut covered = 0;
    for _ in 0..studies {
        let cohort = runs(&mut rng, SOLO * truth, CV, n_cohort);
        let solo = runs(&mut rng, SOLO, CV, n_solo);
        let r = ratio_of_means(&cohort, &solo).expect("positive means");
        if r.low.expect("an interval") <= truth && truth <= r.high.expect("an interval") {
            covered += 1;
        }
    }
    f64::from(covered) / studies as f64
}

#[test]
fn the_95_percent_interval_covers_the_true_ratio_in_93_to_97_percent_of_studies() {
    // The shapes a study runs: three cohorts against three solos, two against four, one cohort
    // against three solos (its spread borrowed from the baseline's), at a slowdown and a gain.
    for (seed, truth, n_cohort, n_solo) in [
        (1, 0.36, 3, 3),
        (2, 1.67, 3, 3),
        (3, 0.95, 2, 4),
        (4, 0.50, 1, 3),
        (5, 1.00, 5, 5),
    ] {
        let c = coverage(seed, truth, n_cohort, n_solo, 1_000);
        assert!(
            (0.93..=0.97).contains(&c),
            "true ratio {truth}, {n_cohort} cohorts against {n_solo} solos: coverage {c}"
        );
    }
}

/// Repeats one shape (a cohort and its baseline, one of each per repeat, as an interleaved
/// block runs them) until [`stop_rule`] stops; returns the repeats run and why it stopped.
fn repeats_until_stop(
    rng: &mut StdRng,
    truth: f64,
    precision: f64,
    thresholds: &[f64],
    max: u32,
) -> (u32, StopReason) {
    let (mut cohort, mut solo) = (Vec::new(), Vec::new());
    loop {
        cohort.extend(runs(rng, SOLO * truth, CV, 1));
        solo.extend(runs(rng, SOLO, CV, 1));
        let n = cohort.len() as u32;
        let r = ratio_of_means(&cohort, &solo);
        let why = stop_rule(r.as_ref(), n, precision, thresholds, max);
        if why.stops() {
            return (n, why);
        }
    }
}

/// The repeats at which the expected relative width of the interval,
/// `2 t(0.975, df) sqrt(2 cv^2 / n)` with Welch's df = 2 (n - 1) for equal spreads, first reaches
/// `precision`.
fn expected_repeats(precision: f64) -> u32 {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    (2..1_000)
        .find(|&n| {
            let t = StudentsT::new(0.0, 1.0, 2.0 * f64::from(n - 1))
                .unwrap()
                .inverse_cdf(0.975);
            2.0 * t * (2.0 * CV * CV / f64::from(n)).sqrt() <= precision
        })
        .unwrap()
}

fn median(mut v: Vec<u32>) -> u32 {
    v.sort_unstable();
    v[v.len() / 2]
}

#[test]
fn repeats_stop_at_the_expected_count_for_a_loose_and_a_tight_precision() {
    let mut rng = StdRng::seed_from_u64(7);
    for precision in [0.15, 0.06] {
        let expected = expected_repeats(precision);
        // A true ratio of 1 against a threshold at 1: only precision can stop it.
        let stops: Vec<u32> = (0..400)
            .map(|_| repeats_until_stop(&mut rng, 1.0, precision, &[1.0], 200).0)
            .collect();
        assert!(stops.iter().all(|n| *n >= MIN_REPEATS), "{stops:?}");
        let m = median(stops);
        let (lo, hi) = (expected * 3 / 4, expected * 5 / 4 + 1);
        assert!(
            (lo..=hi).contains(&m),
            "precision {precision}: median stop at {m} repeats, expected about {expected}"
        );
    }
    assert!(expected_repeats(0.06) > 3 * expected_repeats(0.15));
}

#[test]
fn a_verdict_far_from_its_threshold_settles_in_few_repeats_and_never_before_two() {
    let mut rng = StdRng::seed_from_u64(11);
    // Seven trainers under plugin MPS against one alone: about 0.36x, far below 1.
    let outcomes: Vec<(u32, StopReason)> = (0..400)
        .map(|_| repeats_until_stop(&mut rng, 0.36, 0.001, &[1.0], 50))
        .collect();
    assert!(outcomes.iter().all(|(n, _)| *n >= MIN_REPEATS));
    assert!(outcomes.iter().all(|(_, why)| *why == StopReason::Settled));
    assert_eq!(median(outcomes.iter().map(|(n, _)| *n).collect()), 2);
}
