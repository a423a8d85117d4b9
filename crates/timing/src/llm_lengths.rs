//! The lengths of a `serve-llm` window's requests: every request's prompt and output
//! length fixed ([`LlmRequests::fixed`]), drawn uniformly from a range ([`LlmRequests::uniform`])
//! or read from a trace's columns ([`LlmTrace`]). Like the arrivals, every length is decided
//! before the window, so the window only reads them, and a run's requests follow from its flags
//! and seed alone: every sharing policy serves the same requests.
//!
//! # Drawn lengths
//!
//! A request's prompt and output lengths are drawn, in arrival order, prompt then output, from
//! the xoshiro256++ generator of the Poisson arrivals ([`crate::ArrivalSchedule::poisson`])
//! seeded with the same seed and then jumped 2^128 draws ahead (the generator's own `jump`), so
//! the lengths never reuse the draws that spaced the arrivals: a long gap says nothing of the
//! next request's length. Both lengths are always drawn (a fixed one from a range of one
//! value), so request `k`'s lengths depend on the seed and `k` only: the same seed gives the
//! same lengths at any rate, with either range given or both. Each draw is exact (Lemire's
//! method with rejection), every length of the range equally likely.
//!
//! # A trace with lengths
//!
//! An arrivals file may carry two more columns for a `serve-llm` worker: the request's prompt
//! tokens and output tokens, whole numbers of at least 1, after its offset
//! (`0.25 512 128`, whitespace-separated). Every line carries both or none; a file without them
//! leaves the lengths to the flags. The requests of the window are checked against the policy
//! (the model's context, the KV budget) and a refused one is named by its file and line.

use crate::arrivals::{ArrivalSchedule, Xoshiro256pp, parse_trace};
use crate::error::{LlmServeError, ScheduleError};
use crate::llm_serve::{LlmRequest, LlmRequests, LlmServePolicy};

/// An inclusive range of lengths, tokens: at least 1, `min <= max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LengthRange {
    min: u32,
    max: u32,
}

impl LengthRange {
    /// Every length from `min` to `max`, both included; refused when `min` is 0 or above
    /// `max`.
    pub fn new(min: u32, max: u32) -> Result<Self, LlmServeError> {
        if min == 0 || min > max {
            return Err(LlmServeError::BadLengthRange { min, max });
        }
        Ok(LengthRange { min, max })
    }

    /// One length (`n` at least 1, as [`LlmRequests::new`] checks).
    #[must_use]
    pub fn fixed(n: u32) -> Self {
        LengthRange { min: n, max: n }
    }

    /// The shortest length, tokens.
    #[must_use]
    pub fn min(self) -> u32 {
        self.min
    }

    /// The longest length, tokens.
    #[must_use]
    pub fn max(self) -> u32 {
        self.max
    }

    /// A uniform draw from the range.
    fn draw(self, rng: &mut Xoshiro256pp) -> u32 {
        let span = u64::from(self.max - self.min) + 1;
        // Below `span`, which is at most 2^32: the sum stays within `max`.
        self.min + rng.below(span) as u32
    }
}

impl LlmRequests {
    /// Requests at `schedule`'s arrivals whose prompt and output lengths are drawn uniformly
    /// from `prompt` and `output` with the generator of `seed` jumped past the arrivals' draws
    /// (see the module's documentation): deterministic, and the same for every rate.
    pub fn uniform(
        schedule: &ArrivalSchedule,
        prompt: LengthRange,
        output: LengthRange,
        seed: u64,
    ) -> Result<Self, LlmServeError> {
        let mut rng = Xoshiro256pp::seeded(seed);
        rng.jump();
        let requests = schedule
            .offsets_ns()
            .iter()
            .map(|&arrival_ns| {
                let prompt_tokens = prompt.draw(&mut rng);
                let output_tokens = output.draw(&mut rng);
                LlmRequest {
                    arrival_ns,
                    prompt_tokens,
                    output_tokens,
                }
            })
            .collect();
        Self::new(requests, schedule.window_ns())
    }

    /// The shortest and longest prompt of the requests (`None` when there are none).
    #[must_use]
    pub fn prompt_range(&self) -> Option<LengthRange> {
        span(self.requests().iter().map(|r| r.prompt_tokens))
    }

    /// The shortest and longest output of the requests (`None` when there are none).
    #[must_use]
    pub fn output_range(&self) -> Option<LengthRange> {
        span(self.requests().iter().map(|r| r.output_tokens))
    }
}

fn span(lengths: impl Iterator<Item = u32>) -> Option<LengthRange> {
    lengths.fold(None, |range, n| {
        Some(match range {
            None => LengthRange { min: n, max: n },
            Some(LengthRange { min, max }) => LengthRange {
                min: min.min(n),
                max: max.max(n),
            },
        })
    })
}

/// One kept line of a trace with lengths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct TraceLengths {
    line: usize,
    prompt_tokens: u32,
    output_tokens: u32,
}

/// A `serve-llm` worker's arrivals file: its arrival schedule and, where its lines carry them,
/// every request's prompt and output lengths.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmTrace {
    name: String,
    schedule: ArrivalSchedule,
    /// The lengths of each arrival inside the window, in order; empty when the file has no
    /// length columns.
    lengths: Vec<TraceLengths>,
}

impl LlmTrace {
    /// Parses a trace (`name` is for messages): [`ArrivalSchedule::from_offsets_text`]'s
    /// offsets, each line optionally followed by its prompt and output tokens. Refused, naming
    /// the line: one length column, or more than two; lengths that are not whole numbers of at
    /// least 1 token; a line with lengths where the first line has none, or the other way
    /// round.
    pub fn from_text(name: &str, text: &str, window_ns: u64) -> Result<Self, ScheduleError> {
        let mut lengths = Vec::new();
        // The first line's shape (its number, whether it has lengths): every line must match.
        let mut shape: Option<(usize, bool)> = None;
        let schedule = parse_trace(name, text, window_ns, |line, content, extra, inside| {
            let bad = |message: String| ScheduleError::BadOffsetsLine {
                file: name.to_owned(),
                line,
                message,
            };
            let has = match extra.len() {
                0 => false,
                2 => true,
                n => {
                    return Err(bad(format!(
                        "`{content}` holds {} columns; a serve-llm trace line is `OFFSET_S` or \
                         `OFFSET_S PROMPT_TOKENS OUTPUT_TOKENS`",
                        n + 1
                    )));
                }
            };
            match shape {
                None => shape = Some((line, has)),
                Some((first, had)) if had != has => {
                    let (with, without) = if had { (first, line) } else { (line, first) };
                    return Err(bad(format!(
                        "line {with} gives prompt and output tokens but line {without} does not; \
                         give them on every line or on none"
                    )));
                }
                Some(_) => {}
            }
            if !has {
                return Ok(());
            }
            let tokens = |text: &str, what: &str| match text.parse::<u32>() {
                Ok(0) => Err(bad(format!("{what} must be at least 1 token, got 0"))),
                Ok(n) => Ok(n),
                Err(_) => Err(bad(format!("`{text}` is not a whole number of {what}"))),
            };
            let prompt_tokens = tokens(extra[0], "prompt tokens")?;
            let output_tokens = tokens(extra[1], "output tokens")?;
            if inside {
                lengths.push(TraceLengths {
                    line,
                    prompt_tokens,
                    output_tokens,
                });
            }
            Ok(())
        })?;
        debug_assert!(lengths.is_empty() || lengths.len() == schedule.len());
        Ok(LlmTrace {
            name: name.to_owned(),
            schedule,
            lengths,
        })
    }

    /// The arrivals.
    #[must_use]
    pub fn schedule(&self) -> &ArrivalSchedule {
        &self.schedule
    }

    /// Whether the lines carry prompt and output tokens.
    #[must_use]
    pub fn has_lengths(&self) -> bool {
        !self.lengths.is_empty()
    }

    /// The window's requests with the trace's lengths, checked against `policy` (the model's
    /// context, the KV budget): a refused request is named by its line. `None` when the trace
    /// carries no lengths (the flags give them).
    pub fn requests(&self, policy: &LlmServePolicy) -> Result<Option<LlmRequests>, ScheduleError> {
        if !self.has_lengths() {
            return Ok(None);
        }
        let requests = self
            .schedule
            .offsets_ns()
            .iter()
            .zip(&self.lengths)
            .map(|(&arrival_ns, l)| LlmRequest {
                arrival_ns,
                prompt_tokens: l.prompt_tokens,
                output_tokens: l.output_tokens,
            })
            .collect();
        let refused = |refusal: LlmServeError| {
            let request = match refusal {
                LlmServeError::ZeroTokens { request, .. }
                | LlmServeError::LongerThanContext { request, .. }
                | LlmServeError::BudgetTooSmall { request, .. }
                | LlmServeError::BadArrival { request, .. } => Some(request),
                _ => None,
            };
            ScheduleError::LlmTraceRefused {
                file: self.name.clone(),
                line: request.and_then(|r| self.lengths.get(r)).map(|l| l.line),
                refusal,
            }
        };
        let requests = LlmRequests::new(requests, self.schedule.window_ns()).map_err(refused)?;
        policy.check(&requests).map_err(refused)?;
        Ok(Some(requests))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn lengths(r: &LlmRequests) -> Vec<(u32, u32)> {
        r.requests()
            .iter()
            .map(|r| (r.prompt_tokens, r.output_tokens))
            .collect()
    }

    #[test]
    fn the_exact_draw_covers_its_range_evenly() {
        let mut rng = Xoshiro256pp::seeded(3);
        let mut counts = [0u32; 5];
        for _ in 0..50_000 {
            counts[rng.below(5) as usize] += 1;
        }
        // 10 000 expected each; the standard deviation is about 89.
        for c in counts {
            assert!((9_550..=10_450).contains(&c), "{counts:?}");
        }
        assert_eq!(rng.below(1), 0);
        // The full 32-bit span (a range of 1..=u32::MAX plus one) stays inside it.
        let r = LengthRange::new(1, u32::MAX).unwrap();
        for _ in 0..1000 {
            assert!(r.draw(&mut rng) >= 1);
        }
    }

    #[test]
    fn drawn_lengths_are_uniform_inside_their_ranges_and_reproducible() {
        let schedule = ArrivalSchedule::uniform(10_000.0, S).unwrap();
        let prompt = LengthRange::new(16, 48).unwrap();
        let output = LengthRange::new(1, 8).unwrap();
        let a = LlmRequests::uniform(&schedule, prompt, output, 42).unwrap();
        let b = LlmRequests::uniform(&schedule, prompt, output, 42).unwrap();
        let c = LlmRequests::uniform(&schedule, prompt, output, 43).unwrap();
        assert_eq!(a, b, "same seed, same lengths");
        assert_ne!(lengths(&a), lengths(&c), "another seed, other lengths");
        assert_eq!(a.len(), 10_000);
        assert_eq!(
            a.prompt_range(),
            Some(prompt),
            "every end of the range is drawn"
        );
        assert_eq!(a.output_range(), Some(output));
        let mean = |f: fn(&LlmRequest) -> u32| {
            a.requests().iter().map(|r| f64::from(f(r))).sum::<f64>() / a.len() as f64
        };
        // Uniform on 16..=48: mean 32, sd 9.5, so the mean of 10 000 is within 0.3 of it.
        assert!((mean(|r| r.prompt_tokens) - 32.0).abs() < 0.3);
        assert!((mean(|r| r.output_tokens) - 4.5).abs() < 0.1);
        // The arrivals are the schedule's.
        assert!(
            a.requests()
                .iter()
                .zip(schedule.offsets_ns())
                .all(|(r, &t)| r.arrival_ns == t)
        );
    }

    #[test]
    fn a_request_keeps_its_lengths_whatever_the_rate_and_the_other_range() {
        let slow = ArrivalSchedule::poisson(5.0, 7, 10 * S).unwrap();
        let fast = ArrivalSchedule::poisson(50.0, 7, 10 * S).unwrap();
        let prompt = LengthRange::new(4, 60).unwrap();
        let output = LengthRange::new(2, 30).unwrap();
        let a = LlmRequests::uniform(&slow, prompt, output, 7).unwrap();
        let b = LlmRequests::uniform(&fast, prompt, output, 7).unwrap();
        assert!(a.len() < b.len());
        assert_eq!(lengths(&a), lengths(&b)[..a.len()]);
        // With the output fixed, the prompts are the same draws.
        let c = LlmRequests::uniform(&slow, prompt, LengthRange::fixed(9), 7).unwrap();
        let prompts = |r: &LlmRequests| -> Vec<u32> {
            r.requests().iter().map(|r| r.prompt_tokens).collect()
        };
        assert_eq!(prompts(&a), prompts(&c));
        assert!(c.requests().iter().all(|r| r.output_tokens == 9));
        // The lengths do not reuse the arrivals' draws: without the jump, the first prompt of
        // a wide range would be the unjumped generator's first draw.
        let mut unjumped = Xoshiro256pp::seeded(7);
        let wide = LengthRange::new(1, u32::MAX).unwrap();
        let d = LlmRequests::uniform(&slow, wide, output, 7).unwrap();
        assert_ne!(d.requests()[0].prompt_tokens, wide.draw(&mut unjumped));
    }

    #[test]
    fn ranges_are_checked() {
        assert_eq!(
            LengthRange::new(8, 4).unwrap_err().to_string(),
            "the length range 8..=4 is empty or starts at 0; give a shortest length of at \
             least 1 and a longest of at least the shortest"
        );
        assert!(LengthRange::new(0, 4).is_err());
        assert_eq!(LengthRange::new(4, 4).unwrap(), LengthRange::fixed(4));
    }

    fn policy(budget: u64) -> LlmServePolicy {
        LlmServePolicy::new(4, budget, 64).unwrap()
    }

    #[test]
    fn a_trace_gives_each_request_its_lengths() {
        let text =
            "# offset prompt output\n0 8 4\n0.25\t16  2 # tabs and spaces\n\n0.5 3 1\n2 9 9\n";
        let trace = LlmTrace::from_text("t.txt", text, S).unwrap();
        assert!(trace.has_lengths());
        assert_eq!(trace.schedule().offsets_ns(), [0, S / 4, S / 2]);
        assert_eq!(trace.schedule().beyond_window(), 1);
        let r = trace.requests(&policy(256)).unwrap().unwrap();
        assert_eq!(lengths(&r), [(8, 4), (16, 2), (3, 1)]);
        assert_eq!(r.prompt_range(), Some(LengthRange::new(3, 16).unwrap()));
        // Without the columns, the flags give the lengths.
        let plain = LlmTrace::from_text("t.txt", "0\n0.5\n", S).unwrap();
        assert!(!plain.has_lengths());
        assert_eq!(plain.requests(&policy(256)).unwrap(), None);
        assert_eq!(
            plain.schedule(),
            &ArrivalSchedule::from_offsets_text("t.txt", "0\n0.5\n", S).unwrap()
        );
    }

    #[test]
    fn bad_trace_lines_are_refused_by_file_and_line() {
        let refused = |text: &str| {
            LlmTrace::from_text("t.txt", text, S)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            refused("0 8 4\n0.1 8\n"),
            "t.txt:2: `0.1 8` holds 2 columns; a serve-llm trace line is `OFFSET_S` or \
             `OFFSET_S PROMPT_TOKENS OUTPUT_TOKENS`"
        );
        assert!(refused("0 8 4 1\n").starts_with("t.txt:1: `0 8 4 1` holds 4 columns"));
        assert_eq!(
            refused("0 8 4\n0.1 0 4\n"),
            "t.txt:2: prompt tokens must be at least 1 token, got 0"
        );
        assert_eq!(
            refused("0 8 0\n"),
            "t.txt:1: output tokens must be at least 1 token, got 0"
        );
        assert_eq!(
            refused("0 8 4\n0.1 eight 4\n"),
            "t.txt:2: `eight` is not a whole number of prompt tokens"
        );
        assert_eq!(
            refused("0 8 -4\n"),
            "t.txt:1: `-4` is not a whole number of output tokens"
        );
        assert_eq!(
            refused("0 8 2.5\n"),
            "t.txt:1: `2.5` is not a whole number of output tokens"
        );
        assert_eq!(
            refused("0 8 4\n0.1\n"),
            "t.txt:2: line 1 gives prompt and output tokens but line 2 does not; give them on \
             every line or on none"
        );
        assert_eq!(
            refused("# header\n0\n0.1 8 4\n"),
            "t.txt:3: line 3 gives prompt and output tokens but line 2 does not; give them on \
             every line or on none"
        );
        // Lines past the window are checked too: the file is one trace.
        assert!(refused("0 8 4\n5 8 x\n").starts_with("t.txt:2: `x`"));
        // The offsets keep their own checks.
        assert!(refused("0.5 8 4\n0.1 8 4\n").starts_with("t.txt:2: offset 0.1 s comes before"));
    }

    #[test]
    fn a_request_the_policy_cannot_serve_is_named_by_its_line() {
        let text = "0 8 4\n# a long one\n0.1 60 5\n";
        let trace = LlmTrace::from_text("t.txt", text, S).unwrap();
        let e = trace.requests(&policy(256)).unwrap_err();
        assert!(matches!(
            e,
            ScheduleError::LlmTraceRefused {
                line: Some(3),
                refusal: LlmServeError::LongerThanContext { request: 1, .. },
                ..
            }
        ));
        assert_eq!(
            e.to_string(),
            "t.txt:3: request 1: a prompt of 60 tokens and 5 output tokens need 65 positions, \
             more than the model's context of 64; shorten the prompt or the output"
        );
        let trace = LlmTrace::from_text("t.txt", "0 8 4\n0.1 30 20\n", S).unwrap();
        let e = trace.requests(&policy(40)).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("t.txt:2: request 1 reserves 50 KV-cache tokens")
        );
        assert!(trace.requests(&policy(50)).is_ok());
    }

    #[test]
    fn a_serve_trace_refuses_length_columns() {
        let e = ArrivalSchedule::from_offsets_text("t.txt", "0\n0.5 8 4\n", S).unwrap_err();
        assert_eq!(
            e.to_string(),
            "t.txt:2: `0.5 8 4` holds 3 columns; a serve trace has one offset per line (prompt \
             and output token columns are for --workload serve-llm)"
        );
    }
}
