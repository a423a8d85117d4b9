//! The open-loop arrival schedule of a serve window, computed before the window.
//!
//! Requests arrive at instants fixed in advance, whatever the server does: that is what makes
//! the load *open-loop*, and what lets a request's latency be measured from its scheduled
//! arrival rather than from the moment a busy server got round to it (no coordinated omission).
//! The whole schedule is one sorted vector of offsets from the window's scheduled start, made
//! before the barrier; the window only reads it.
//!
//! - **Poisson** (the default): exponential inter-arrival times of mean `1 / rate`, drawn from
//!   a xoshiro256++ generator seeded through SplitMix64 (Blackman & Vigna, "Scrambled Linear
//!   Pseudorandom Number Generators", 2021). The generator is written out here, not taken from
//!   a crate, so that a seed recorded in `worker.json` gives the same schedule in every future
//!   version of coload.
//! - **Uniform**: one request every `1 / rate` seconds from the start.
//! - **A user's offsets**: a text file, one offset per line in seconds from the window's start
//!   (`#` comments and blank lines ignored), non-decreasing. Offsets at or past the window's
//!   end are left out and counted.

use std::fmt;
use std::str::FromStr;

use crate::error::ScheduleError;

/// The most requests one window may schedule: 64 Mi (512 MiB of offsets). A real window needs
/// far fewer (10 000 requests/s for 45 s is 450 000); a bogus rate must not take the host's
/// memory.
pub const MAX_REQUESTS: usize = 1 << 26;

/// Nanoseconds per second.
const NS_PER_S: f64 = 1e9;

/// How requests arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ArrivalKind {
    /// Exponential inter-arrival times (a Poisson process), seeded.
    #[default]
    Poisson,
    /// Evenly spaced.
    Uniform,
    /// Offsets read from a file.
    File,
}

impl ArrivalKind {
    /// The name used on the command line and in documents.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            ArrivalKind::Poisson => "poisson",
            ArrivalKind::Uniform => "uniform",
            ArrivalKind::File => "file",
        }
    }
}

impl fmt::Display for ArrivalKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ArrivalKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "poisson" => Ok(ArrivalKind::Poisson),
            "uniform" => Ok(ArrivalKind::Uniform),
            "file" => Ok(ArrivalKind::File),
            _ => Err(format!(
                "unknown arrival pattern `{s}` (expected poisson or uniform, or give --arrivals-file)"
            )),
        }
    }
}

/// The arrival instants of one window: offsets from its scheduled start, nanoseconds,
/// non-decreasing, every one before the window's end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArrivalSchedule {
    offsets_ns: Vec<u64>,
    window_ns: u64,
    kind: ArrivalKind,
    /// Offsets of a file that fell at or past the window's end.
    beyond_window: u64,
}

impl ArrivalSchedule {
    /// Poisson arrivals at `rate_per_s` over `window_ns`, from `seed`.
    pub fn poisson(rate_per_s: f64, seed: u64, window_ns: u64) -> Result<Self, ScheduleError> {
        check_rate(rate_per_s, window_ns)?;
        let mut offsets = Vec::with_capacity(expected_count(rate_per_s, window_ns));
        let mut rng = Xoshiro256pp::seeded(seed);
        let mean_gap_ns = NS_PER_S / rate_per_s;
        let mut t = 0.0f64;
        loop {
            t += -rng.unit_open_closed().ln() * mean_gap_ns;
            let ns = t.round();
            if ns >= window_ns as f64 {
                break;
            }
            if offsets.len() == MAX_REQUESTS {
                return Err(ScheduleError::TooManyRequests {
                    requests: offsets.len() + 1,
                    max: MAX_REQUESTS,
                });
            }
            offsets.push(ns as u64);
        }
        Ok(ArrivalSchedule {
            offsets_ns: offsets,
            window_ns,
            kind: ArrivalKind::Poisson,
            beyond_window: 0,
        })
    }

    /// One arrival every `1 / rate_per_s` seconds from the start (the first at offset 0).
    pub fn uniform(rate_per_s: f64, window_ns: u64) -> Result<Self, ScheduleError> {
        check_rate(rate_per_s, window_ns)?;
        let gap_ns = NS_PER_S / rate_per_s;
        let n = expected_count(rate_per_s, window_ns);
        let offsets: Vec<u64> = (0..=n)
            .map(|i| (i as f64 * gap_ns).round())
            .take_while(|&t| t < window_ns as f64)
            .map(|t| t as u64)
            .collect();
        Ok(ArrivalSchedule {
            offsets_ns: offsets,
            window_ns,
            kind: ArrivalKind::Uniform,
            beyond_window: 0,
        })
    }

    /// Parses an offsets file (`name` is for messages): one offset per line, seconds from the
    /// window's start, non-decreasing; `#` starts a comment. Offsets at or past the window's end
    /// are left out ([`ArrivalSchedule::beyond_window`]). A line with more than the offset is
    /// refused: the length columns of a `serve-llm` trace ([`crate::LlmTrace`]) mean nothing to
    /// a `serve` worker, and reading past them would replay a trace other than the one written.
    pub fn from_offsets_text(
        name: &str,
        text: &str,
        window_ns: u64,
    ) -> Result<Self, ScheduleError> {
        parse_trace(name, text, window_ns, |line, content, extra, _| {
            if extra.is_empty() {
                return Ok(());
            }
            Err(ScheduleError::BadOffsetsLine {
                file: name.to_owned(),
                line,
                message: format!(
                    "`{content}` holds {} columns; a serve trace has one offset per line (prompt \
                     and output token columns are for --workload serve-llm)",
                    extra.len() + 1
                ),
            })
        })
    }

    /// The arrival offsets, nanoseconds from the window's scheduled start, non-decreasing.
    #[must_use]
    pub fn offsets_ns(&self) -> &[u64] {
        &self.offsets_ns
    }

    /// Requests scheduled inside the window.
    #[must_use]
    pub fn len(&self) -> usize {
        self.offsets_ns.len()
    }

    /// Whether no request is scheduled (never true for a schedule built here).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.offsets_ns.is_empty()
    }

    /// The window the schedule covers, nanoseconds.
    #[must_use]
    pub fn window_ns(&self) -> u64 {
        self.window_ns
    }

    /// How the schedule was made.
    #[must_use]
    pub fn kind(&self) -> ArrivalKind {
        self.kind
    }

    /// Offsets of a file that fell at or past the window's end (0 for generated schedules).
    #[must_use]
    pub fn beyond_window(&self) -> u64 {
        self.beyond_window
    }

    /// The offered rate the schedule realizes: requests / window seconds.
    #[must_use]
    pub fn realized_rate_per_s(&self) -> f64 {
        if self.window_ns == 0 {
            return 0.0;
        }
        self.offsets_ns.len() as f64 / (self.window_ns as f64 / NS_PER_S)
    }
}

/// Parses a trace: per line (`#` comments and blank lines skipped) whitespace-separated
/// columns, the first an offset in seconds from the window's start, non-decreasing. `columns`
/// sees every line's 1-based number, its content, the columns after the offset and whether
/// the offset falls inside the window (it is kept) before the line counts; its error stops the
/// parse.
pub(crate) fn parse_trace(
    name: &str,
    text: &str,
    window_ns: u64,
    mut columns: impl FnMut(usize, &str, &[&str], bool) -> Result<(), ScheduleError>,
) -> Result<ArrivalSchedule, ScheduleError> {
    let mut offsets = Vec::new();
    let mut beyond = 0u64;
    let mut seen = 0usize;
    let mut previous: Option<(usize, f64)> = None;
    // The columns after the offset, reused from line to line.
    let mut extra: Vec<&str> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let content = raw.split('#').next().unwrap_or("").trim();
        let mut fields = content.split_whitespace();
        let Some(first) = fields.next() else {
            continue;
        };
        extra.clear();
        extra.extend(fields);
        let bad = |message: String| ScheduleError::BadOffsetsLine {
            file: name.to_owned(),
            line,
            message,
        };
        let s: f64 = first
            .parse()
            .map_err(|_| bad(format!("`{first}` is not a number of seconds")))?;
        if !s.is_finite() || s < 0.0 {
            return Err(bad(format!(
                "offset {first} s is not a finite, non-negative number of seconds"
            )));
        }
        if let Some((pline, p)) = previous
            && s < p
        {
            return Err(ScheduleError::UnsortedOffsets {
                file: name.to_owned(),
                line,
                offset_s: s,
                previous_line: pline,
                previous_s: p,
            });
        }
        previous = Some((line, s));
        let ns = (s * NS_PER_S).round();
        let inside = ns < window_ns as f64;
        columns(line, content, &extra, inside)?;
        seen += 1;
        if !inside {
            beyond += 1;
            continue;
        }
        if offsets.len() == MAX_REQUESTS {
            return Err(ScheduleError::TooManyRequests {
                requests: offsets.len() + 1,
                max: MAX_REQUESTS,
            });
        }
        offsets.push(ns as u64);
    }
    if seen == 0 {
        return Err(ScheduleError::EmptyOffsets {
            file: name.to_owned(),
        });
    }
    if offsets.is_empty() {
        return Err(ScheduleError::NoOffsetInWindow {
            file: name.to_owned(),
            offsets: seen,
            window_s: window_ns as f64 / NS_PER_S,
        });
    }
    Ok(ArrivalSchedule {
        offsets_ns: offsets,
        window_ns,
        kind: ArrivalKind::File,
        beyond_window: beyond,
    })
}

fn check_rate(rate_per_s: f64, window_ns: u64) -> Result<(), ScheduleError> {
    if !rate_per_s.is_finite() || rate_per_s <= 0.0 {
        return Err(ScheduleError::BadRate { rate_per_s });
    }
    let expected = rate_per_s * window_ns as f64 / NS_PER_S;
    if expected > MAX_REQUESTS as f64 {
        return Err(ScheduleError::TooManyRequests {
            requests: expected.ceil() as usize,
            max: MAX_REQUESTS,
        });
    }
    Ok(())
}

/// The expected number of arrivals plus a margin for Poisson's spread (six standard
/// deviations), so that the vector is allocated once.
fn expected_count(rate_per_s: f64, window_ns: u64) -> usize {
    let mean = rate_per_s * window_ns as f64 / NS_PER_S;
    let margin = 6.0 * mean.sqrt() + 16.0;
    ((mean + margin).ceil() as usize).min(MAX_REQUESTS)
}

/// xoshiro256++ (Blackman & Vigna), seeded by SplitMix64 as its authors recommend.
#[derive(Debug, Clone)]
pub(crate) struct Xoshiro256pp {
    s: [u64; 4],
}

impl Xoshiro256pp {
    pub(crate) fn seeded(seed: u64) -> Self {
        let mut sm = seed;
        let mut next = || {
            sm = sm.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = sm;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Xoshiro256pp {
            s: [next(), next(), next(), next()],
        }
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Jumps 2^128 draws ahead (the reference `jump()` of xoshiro256plusplus.c): the stream
    /// from here never overlaps the first 2^128 draws of the unjumped generator, so two uses of
    /// one seed (arrivals, request lengths) are independent.
    pub(crate) fn jump(&mut self) {
        const JUMP: [u64; 4] = [
            0x180E_C6D3_3CFD_0ABA,
            0xD5A6_1266_F0C9_392C,
            0xA958_2618_E03F_C9AA,
            0x39AB_DC45_29B1_661C,
        ];
        let mut jumped = [0u64; 4];
        for word in JUMP {
            for bit in 0..64 {
                if word & (1u64 << bit) != 0 {
                    for (j, s) in jumped.iter_mut().zip(self.s) {
                        *j ^= s;
                    }
                }
                self.next_u64();
            }
        }
        self.s = jumped;
    }

    /// A uniform draw in `0..n` (`n` at least 1), exact: Lemire's multiply-shift with
    /// rejection ("Fast Random Integer Generation in an Interval", 2019), so no value is
    /// favoured whatever `n` is.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        // 2^64 mod n: the low products below it would make some values more likely.
        let threshold = n.wrapping_neg() % n;
        loop {
            let m = u128::from(self.next_u64()) * u128::from(n);
            if (m as u64) >= threshold {
                return (m >> 64) as u64;
            }
        }
    }

    /// A uniform draw in `(0, 1]` with 53 random bits (never 0, so `ln` is finite).
    pub(crate) fn unit_open_closed(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn the_generator_matches_its_reference_output() {
        // SplitMix64 from seed 0 gives 0xE220A8397B1DCDAF first (Vigna's splitmix64.c); the
        // xoshiro256++ outputs from state {1, 2, 3, 4} were computed by a line-by-line Python
        // transliteration of xoshiro256plusplus.c.
        let mut sm = 0u64;
        sm = sm.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = sm;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        assert_eq!(z ^ (z >> 31), 0xE220_A839_7B1D_CDAF);
        let mut r = Xoshiro256pp { s: [1, 2, 3, 4] };
        assert_eq!(r.next_u64(), 41_943_041);
        assert_eq!(r.next_u64(), 58_720_359);
        assert_eq!(r.next_u64(), 3_588_806_011_781_223);
    }

    #[test]
    fn poisson_has_the_asked_rate_and_exponential_gaps() {
        let s = ArrivalSchedule::poisson(1000.0, 7, 100 * S).unwrap();
        // 100 000 expected; the count's standard deviation is 316.
        assert!((s.len() as f64 - 100_000.0).abs() < 1600.0, "{}", s.len());
        let gaps: Vec<f64> = s
            .offsets_ns()
            .windows(2)
            .map(|w| (w[1] - w[0]) as f64 / 1e6)
            .collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        assert!((mean - 1.0).abs() < 0.02, "mean gap {mean} ms");
        // An exponential's standard deviation equals its mean; P(gap > mean) = 1/e.
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
        assert!((var.sqrt() - 1.0).abs() < 0.03, "sd {}", var.sqrt());
        let above = gaps.iter().filter(|g| **g > 1.0).count() as f64 / gaps.len() as f64;
        assert!((above - (-1.0f64).exp()).abs() < 0.01, "{above}");
        assert!(s.offsets_ns().windows(2).all(|w| w[0] <= w[1]));
        assert!(*s.offsets_ns().last().unwrap() < 100 * S);
    }

    #[test]
    fn poisson_is_reproducible_from_its_seed() {
        let a = ArrivalSchedule::poisson(500.0, 42, S).unwrap();
        let b = ArrivalSchedule::poisson(500.0, 42, S).unwrap();
        let c = ArrivalSchedule::poisson(500.0, 43, S).unwrap();
        assert_eq!(a, b);
        assert_ne!(a.offsets_ns(), c.offsets_ns());
    }

    #[test]
    fn uniform_is_evenly_spaced() {
        let s = ArrivalSchedule::uniform(4.0, S).unwrap();
        assert_eq!(s.offsets_ns(), [0, 250_000_000, 500_000_000, 750_000_000]);
        let s = ArrivalSchedule::uniform(3.0, S).unwrap();
        assert_eq!(s.offsets_ns(), [0, 333_333_333, 666_666_667]);
        assert_eq!(s.kind(), ArrivalKind::Uniform);
        assert!((s.realized_rate_per_s() - 3.0).abs() < 1e-12);
    }

    #[test]
    fn bad_rates_are_refused() {
        for rate in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let e = ArrivalSchedule::poisson(rate, 0, S).unwrap_err();
            assert!(matches!(e, ScheduleError::BadRate { .. }), "{rate}");
            assert!(ArrivalSchedule::uniform(rate, S).is_err());
        }
        let e = ArrivalSchedule::poisson(0.0, 0, S).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--rate must be a positive number of requests per second, got 0"
        );
        let e = ArrivalSchedule::uniform(1e9, 3600 * S).unwrap_err();
        assert!(e.to_string().contains("lower --rate or --window-s"), "{e}");
    }

    #[test]
    fn offsets_files_are_parsed_and_checked() {
        let text = "# a trace\n0\n0.001  # one ms\n\n0.001\n0.5\n2.0\n3\n";
        let s = ArrivalSchedule::from_offsets_text("t.txt", text, S).unwrap();
        assert_eq!(s.offsets_ns(), [0, 1_000_000, 1_000_000, 500_000_000]);
        assert_eq!(s.beyond_window(), 2);
        assert_eq!(s.kind(), ArrivalKind::File);

        let e = ArrivalSchedule::from_offsets_text("t.txt", "# nothing\n\n", S).unwrap_err();
        assert_eq!(
            e.to_string(),
            "t.txt holds no arrival offsets; write one offset per line, in seconds from the window's start"
        );
        let e = ArrivalSchedule::from_offsets_text("t.txt", "0.2\n0.1\n", S).unwrap_err();
        assert_eq!(
            e.to_string(),
            "t.txt:2: offset 0.1 s comes before 0.2 s on line 1; sort the offsets (non-decreasing)"
        );
        let e = ArrivalSchedule::from_offsets_text("t.txt", "0\nabc\n", S).unwrap_err();
        assert_eq!(e.to_string(), "t.txt:2: `abc` is not a number of seconds");
        let e = ArrivalSchedule::from_offsets_text("t.txt", "-1\n", S).unwrap_err();
        assert!(e.to_string().starts_with("t.txt:1: offset -1 s"), "{e}");
        let e = ArrivalSchedule::from_offsets_text("t.txt", "5\n6\n", S).unwrap_err();
        assert_eq!(
            e.to_string(),
            "t.txt: none of its 2 offsets falls inside the 1 s window; shift the trace or lengthen --window-s"
        );
    }

    #[test]
    fn arrival_kinds_round_trip() {
        for k in [
            ArrivalKind::Poisson,
            ArrivalKind::Uniform,
            ArrivalKind::File,
        ] {
            assert_eq!(k.as_str().parse::<ArrivalKind>().unwrap(), k);
        }
        assert!(
            "bursty"
                .parse::<ArrivalKind>()
                .unwrap_err()
                .contains("bursty")
        );
    }
}
