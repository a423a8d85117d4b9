//! Request-level figures of a `serve-llm` worker: TTFT, TPOT, inter-token and
//! end-to-end latency, output tokens/s, SLO attainment and goodput on TTFT and TPOT together,
//! and the overload verdict, read from `llm_requests.jsonl`.
//!
//! Only requests whose scheduled arrival lies in the common interval `[start, end)` count. A
//! request is *completed* when its last token was out by `end`, *unfinished* when it was
//! admitted (its prefill began) by `end` but is not complete, *not admitted* otherwise.
//!
//! - **TTFT** = first token - scheduled arrival (queueing included, no coordinated omission).
//!   Requests without a first token by `end` rank above every other: a percentile falling on
//!   them is null (it exceeded what the window could observe), as for `serve`.
//! - **TPOT** = `(last - first) / (output - 1)`, vLLM's benchmark definition, over the
//!   completed requests of at least two tokens.
//! - **ITL**: every gap between two consecutive tokens of a request, both out by `end`.
//! - **End-to-end** = last token - scheduled arrival; the requests not completed rank above.
//! - **Output tokens/s**: tokens of any request out inside the interval / its seconds.
//! - **SLO**: a request meets the objectives when it completed with its TTFT and its TPOT
//!   within them (a one-token request has no TPOT and is judged on its TTFT); unfinished and
//!   never-admitted requests are misses. Attainment = met / requests, goodput = met / seconds.
//!   LoadGen's early-stopping test counts the unfinished ones that had broken neither objective
//!   by `end` as *censored*, neither met nor missed: the window closed on them.
//!   The verdict (what `--find-capacity` searches on) is the TTFT and the TPOT at the quantile
//!   within their objectives and the server not overloaded. Requests arriving within one
//!   end-to-end latency of the interval's end cannot complete, so attainment is a lower bound
//!   (by about rate x e2e / requests); the percentile verdict is not biased that way for TPOT,
//!   and for TTFT only by the requests still waiting for their first token.
//! - **Overloaded**, by `serve`'s rule: more requests unfinished or not admitted at the end
//!   than [`crate::BACKLOG_FRACTION`] of them or [`crate::BACKLOG_BATCHES`] batches of
//!   `max_batch` (what a server that keeps up holds: the batch running and the one forming),
//!   or a queueing delay growing through the interval ([`crate::GROWTH_RATIO`],
//!   [`crate::GROWTH_FLOOR_NS`]).
//!
//! Percentiles are nearest-rank and exact: the per-request values (and the inter-token gaps,
//! 8 bytes each) are kept and sorted, a few MB for a 45 s window.

use std::path::Path;

use coload_cohort_schema::{
    LlmRequestReader, LlmSloAttainment, RequestLatencyMs, SchemaError, ServeLlmSummary,
};

use crate::interval::Span;
use crate::serve::{
    BACKLOG_BATCHES, BACKLOG_FRACTION, GROWTH_FLOOR_NS, GROWTH_RATIO, early_stopping_min_met,
};
use crate::stats::{P50, P90, P99, P999, nearest_rank};

/// Nanoseconds per millisecond.
const NS_PER_MS: f64 = 1e6;

/// The TTFT and TPOT objectives and the quantile each must meet.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LlmSlo {
    pub(crate) ttft_ms: f64,
    pub(crate) tpot_ms: f64,
    pub(crate) quantile: f64,
}

/// What one `serve-llm` worker's `llm_requests.jsonl` reduces to.
#[derive(Debug, Clone, Default)]
pub(crate) struct LlmScan {
    /// Lines in the whole file.
    pub(crate) file_requests: u64,
    requests: u64,
    completed: u64,
    unfinished: u64,
    /// Sorted ascending, nanoseconds.
    ttft_ns: Vec<f64>,
    tpot_ns: Vec<f64>,
    itl_ns: Vec<f64>,
    e2e_ns: Vec<f64>,
    queue_ns: Vec<f64>,
    tokens_in_interval: u64,
    /// Requests in the interval that ask for two tokens or more (the ones a TPOT judges).
    multi_token_requests: u64,
    slo_met: u64,
    /// Requests not completed by the end that had broken neither objective by then.
    slo_censored: u64,
    quarter_wait_sum_ns: [u128; 4],
    quarter_count: [u64; 4],
}

/// Whether a request not completed by `end` had already broken an objective then: its first
/// token later than the TTFT objective (or none yet, past it), or, with the first token out, its
/// remaining tokens unable to bring the TPOT within its objective even if they all came at once
/// (`end - first > tpot x (output - 1)`).
fn missed_by(
    r: &coload_cohort_schema::LlmRequestLine,
    first: Option<u64>,
    end: u64,
    slo: LlmSlo,
) -> bool {
    let ttft_ns = slo.ttft_ms * NS_PER_MS;
    match first {
        None => (end - r.arrival_unix_ns) as f64 > ttft_ns,
        Some(f) => {
            (f - r.arrival_unix_ns) as f64 > ttft_ns
                || (r.output_tokens > 1
                    && (end - f) as f64 > slo.tpot_ms * NS_PER_MS * f64::from(r.output_tokens - 1))
        }
    }
}

/// Streams `path`, keeping the requests whose arrival lies in `common`; `slo` counts those
/// meeting both objectives.
pub(crate) fn scan_llm_requests(
    path: &Path,
    common: Span,
    slo: Option<LlmSlo>,
) -> Result<LlmScan, SchemaError> {
    let (start, end) = (common.start_unix_ns, common.end_unix_ns);
    let len = common.len_ns().max(1);
    let mut s = LlmScan::default();
    for line in LlmRequestReader::open(path)? {
        let r = line?;
        s.file_requests += 1;
        s.tokens_in_interval += r
            .token_unix_ns
            .iter()
            .filter(|&&t| t >= start && t <= end)
            .count() as u64;
        if r.arrival_unix_ns < start || r.arrival_unix_ns >= end {
            continue;
        }
        s.requests += 1;
        s.multi_token_requests += u64::from(r.output_tokens > 1);
        let out: Vec<u64> = r
            .token_unix_ns
            .iter()
            .copied()
            .filter(|&t| t <= end)
            .collect();
        let completed = out.len() == r.output_tokens as usize;
        let admitted = r.admitted_unix_ns.filter(|&a| a <= end);
        let ttft = out.first().map(|&f| (f - r.arrival_unix_ns) as f64);
        if let Some(t) = ttft {
            s.ttft_ns.push(t);
        }
        s.itl_ns
            .extend(out.windows(2).map(|w| (w[1] - w[0]) as f64));
        let mut tpot = None;
        if completed {
            s.completed += 1;
            let (first, last) = (out[0], out[out.len() - 1]);
            s.e2e_ns.push((last - r.arrival_unix_ns) as f64);
            if r.output_tokens > 1 {
                let t = (last - first) as f64 / f64::from(r.output_tokens - 1);
                s.tpot_ns.push(t);
                tpot = Some(t);
            }
            if let (Some(slo), Some(ttft)) = (slo, ttft)
                && ttft <= slo.ttft_ms * NS_PER_MS
                && tpot.is_none_or(|t| t <= slo.tpot_ms * NS_PER_MS)
            {
                s.slo_met += 1;
            }
        } else {
            if admitted.is_some() {
                s.unfinished += 1;
            }
            if let Some(slo) = slo
                && !missed_by(&r, out.first().copied(), end, slo)
            {
                s.slo_censored += 1;
            }
        }
        // Its wait: to its admission, or so far when it was not admitted by the end.
        let wait = admitted.map_or(end, |a| a) - r.arrival_unix_ns;
        if let Some(a) = admitted {
            s.queue_ns.push((a - r.arrival_unix_ns) as f64);
        }
        let quarter =
            ((u128::from(r.arrival_unix_ns - start) * 4) / u128::from(len)).min(3) as usize;
        s.quarter_wait_sum_ns[quarter] += u128::from(wait);
        s.quarter_count[quarter] += 1;
    }
    for v in [
        &mut s.ttft_ns,
        &mut s.tpot_ns,
        &mut s.itl_ns,
        &mut s.e2e_ns,
        &mut s.queue_ns,
    ] {
        v.sort_unstable_by(f64::total_cmp);
    }
    Ok(s)
}

/// The value at nearest rank `permille` among `total`, of which `sorted` holds the observed
/// ones (the rest rank above them), nanoseconds; `None` when the rank falls beyond them.
fn at_rank(sorted: &[f64], total: u64, permille: u32) -> Option<f64> {
    if total == 0 {
        return None;
    }
    let rank = nearest_rank(total, permille);
    sorted
        .get(usize::try_from(rank).ok()?.checked_sub(1)?)
        .copied()
}

/// Percentiles over `total` values of which `sorted` holds the observed ones, milliseconds;
/// mean and max over the observed.
fn latency(sorted: &[f64], total: u64) -> RequestLatencyMs {
    let pick = |p| at_rank(sorted, total, p).map(|ns| ns / NS_PER_MS);
    RequestLatencyMs {
        p50: pick(P50),
        p90: pick(P90),
        p99: pick(P99),
        p999: pick(P999),
        mean: (!sorted.is_empty())
            .then(|| sorted.iter().sum::<f64>() / sorted.len() as f64 / NS_PER_MS),
        max: sorted.last().map(|ns| ns / NS_PER_MS),
    }
}

/// What the summary knows of the worker besides its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LlmShape {
    pub(crate) prompt_tokens: u32,
    pub(crate) output_tokens: u32,
    pub(crate) max_batch: u32,
    pub(crate) kv_budget_tokens: u64,
    pub(crate) kv_cache_bytes: Option<u64>,
    pub(crate) kv_reserved_tokens_max: Option<u64>,
}

/// The figures of one `serve-llm` worker over an interval of `common_s` seconds.
pub(crate) fn serve_llm_summary(
    scan: &LlmScan,
    common_s: f64,
    shape: LlmShape,
    slo: Option<LlmSlo>,
) -> ServeLlmSummary {
    let not_admitted = scan.requests - scan.completed - scan.unfinished;
    let backlog = scan.unfinished + not_admitted;
    let mut reasons = Vec::new();
    let allowance = ((scan.requests as f64 * BACKLOG_FRACTION).ceil() as u64)
        .max(BACKLOG_BATCHES * u64::from(shape.max_batch));
    if backlog > allowance {
        reasons.push(format!(
            "{backlog} of {} requests ({:.1} %) were unfinished ({}) or not admitted ({}) at \
             the end (allowed: {allowance}): the completed rate {:.2}/s fell short of the \
             offered {:.2}/s",
            scan.requests,
            100.0 * backlog as f64 / scan.requests.max(1) as f64,
            scan.unfinished,
            not_admitted,
            scan.completed as f64 / common_s,
            scan.requests as f64 / common_s
        ));
    }
    let quarter_mean = |q: usize| {
        (scan.quarter_count[q] > 0)
            .then(|| scan.quarter_wait_sum_ns[q] as f64 / scan.quarter_count[q] as f64)
    };
    if let (Some(first), Some(last)) = (quarter_mean(0), quarter_mean(3))
        && last > GROWTH_RATIO * first + GROWTH_FLOOR_NS as f64
    {
        reasons.push(format!(
            "the queue kept growing: the mean wait for admission rose from {:.3} ms (requests \
             of the first quarter of the interval) to {:.3} ms (last quarter)",
            first / NS_PER_MS,
            last / NS_PER_MS
        ));
    }
    let overloaded = !reasons.is_empty();
    let tpot_count = scan.tpot_ns.len() as u64;
    let slo = slo.map(|slo| {
        let permille = (slo.quantile * 1000.0).round() as u32;
        let ttft_met = at_rank(&scan.ttft_ns, scan.requests, permille)
            .is_some_and(|t| t <= slo.ttft_ms * NS_PER_MS);
        // Each request's lengths are its own (drawn or from a trace), so whether a
        // TPOT is judged depends on the requests, not on the configured shortest output.
        let tpot_met = scan.multi_token_requests == 0
            || at_rank(&scan.tpot_ns, tpot_count, permille)
                .is_some_and(|t| t <= slo.tpot_ms * NS_PER_MS);
        // As for `serve`: a window of too few requests cannot show its percentile within the
        // objective with confidence, whatever it observed (a p99 of 50 requests is their
        // slowest one).
        // Requests the window's end cut off before they broke an objective are neither met nor
        // missed in the test (every window ends on a few: the last arrivals cannot complete).
        let misses = scan
            .requests
            .saturating_sub(scan.slo_met)
            .saturating_sub(scan.slo_censored);
        let min_met = early_stopping_min_met(misses, slo.quantile);
        let early_stopping_pass = scan.slo_met >= min_met;
        LlmSloAttainment {
            ttft_slo_ms: slo.ttft_ms,
            tpot_slo_ms: slo.tpot_ms,
            quantile: slo.quantile,
            met: scan.slo_met,
            attainment: scan.slo_met as f64 / scan.requests.max(1) as f64,
            goodput_per_s: scan.slo_met as f64 / common_s,
            ttft_met,
            tpot_met,
            early_stopping_pass,
            early_stopping_requests_needed: Some(min_met.saturating_add(misses)),
            censored: scan.slo_censored,
            meets: ttft_met && tpot_met && early_stopping_pass && !overloaded,
        }
    });
    ServeLlmSummary {
        prompt_tokens: shape.prompt_tokens,
        output_tokens: shape.output_tokens,
        max_batch: shape.max_batch,
        kv_budget_tokens: shape.kv_budget_tokens,
        requests: scan.requests,
        completed: scan.completed,
        unfinished: scan.unfinished,
        not_admitted,
        offered_per_s: scan.requests as f64 / common_s,
        completed_per_s: scan.completed as f64 / common_s,
        output_tokens_per_s: scan.tokens_in_interval as f64 / common_s,
        ttft_ms: latency(&scan.ttft_ns, scan.requests),
        tpot_ms: latency(&scan.tpot_ns, tpot_count),
        itl_ms: latency(&scan.itl_ns, scan.itl_ns.len() as u64),
        e2e_ms: latency(&scan.e2e_ns, scan.requests),
        queueing_ms: latency(&scan.queue_ns, scan.queue_ns.len() as u64),
        slo,
        overloaded,
        overload_reasons: reasons,
        percentiles_are_lower_bounds: overloaded,
        kv_cache_bytes: shape.kv_cache_bytes,
        kv_reserved_tokens_max: shape.kv_reserved_tokens_max,
    }
}

/// The TTFT and TPOT at `quantile` among those a summary keeps (p50, p90, p99, p99.9),
/// milliseconds; `None` for another quantile or where the summary has none.
#[must_use]
pub fn llm_latency_at(s: &ServeLlmSummary, quantile: f64) -> (Option<f64>, Option<f64>) {
    (
        crate::serve::request_latency_at(&s.ttft_ms, quantile),
        crate::serve::request_latency_at(&s.tpot_ms, quantile),
    )
}

#[cfg(test)]
#[expect(
    clippy::float_cmp,
    reason = "the figures are exact by construction and the tests assert them exactly"
)]
mod tests {
    use std::fmt::Write as _;

    use super::*;

    const MS: u64 = 1_000_000;

    /// `(arrival, admitted, token times, output)` in ms, as `llm_requests.jsonl`.
    type Req<'a> = (u64, Option<u64>, &'a [u64], u32);

    fn file(requests: &[Req<'_>]) -> tempfile::TempPath {
        let mut text = String::new();
        for (i, (arrival, admitted, tokens, output)) in requests.iter().enumerate() {
            let ns: Vec<String> = tokens.iter().map(|t| (t * MS).to_string()).collect();
            let opt =
                |v: Option<u64>| v.map_or_else(|| "null".to_owned(), |t| (t * MS).to_string());
            writeln!(
                text,
                r#"{{"index":{i},"arrival_unix_ns":{},"prompt_tokens":8,"output_tokens":{output},"admitted_unix_ns":{},"first_token_unix_ns":{},"last_token_unix_ns":{},"tokens_generated":{},"completed":{},"token_unix_ns":[{}]}}"#,
                arrival * MS,
                opt(*admitted),
                opt(tokens.first().copied()),
                opt(tokens.last().copied()),
                tokens.len(),
                tokens.len() == *output as usize,
                ns.join(",")
            )
            .unwrap();
        }
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), text).unwrap();
        f.into_temp_path()
    }

    fn span(a_ms: u64, b_ms: u64) -> Span {
        Span {
            start_unix_ns: a_ms * MS,
            end_unix_ns: b_ms * MS,
        }
    }

    const SHAPE: LlmShape = LlmShape {
        prompt_tokens: 8,
        output_tokens: 3,
        max_batch: 1,
        kv_budget_tokens: 22,
        kv_cache_bytes: Some(4096),
        kv_reserved_tokens_max: Some(11),
    };

    /// Requests of different output lengths (drawn or from a trace), each judged by
    /// its own: TPOT = (last - first) / (its output - 1). Interval [0, 100) ms:
    ///
    /// | request | arrival | output | tokens             | TPOT          | TTFT |
    /// | 0       | 0       | 5      | 10, 12, 14, 16, 18 | 8 / 4 = 2     | 10   |
    /// | 1       | 10      | 2      | 30, 36             | 6 / 1 = 6     | 20   |
    /// | 2       | 20      | 1      | 40                 | none          | 20   |
    /// | 3       | 30      | 3      | 50, 54, 58         | 8 / 2 = 4     | 20   |
    #[test]
    fn tpot_divides_by_each_request_s_own_output() {
        let p = file(&[
            (0, Some(0), &[10, 12, 14, 16, 18], 5),
            (10, Some(20), &[30, 36], 2),
            (20, Some(30), &[40], 1),
            (30, Some(40), &[50, 54, 58], 3),
        ]);
        let slo = LlmSlo {
            ttft_ms: 20.0,
            tpot_ms: 5.0,
            quantile: 0.5,
        };
        let scan = scan_llm_requests(&p, span(0, 100), Some(slo)).unwrap();
        // The configured shortest output is 1 (lengths from 1 to 5): the TPOT is still judged.
        let shape = LlmShape {
            output_tokens: 1,
            ..SHAPE
        };
        let s = serve_llm_summary(&scan, 0.1, shape, Some(slo));
        assert_eq!((s.requests, s.completed), (4, 4));
        // TPOT over the three of two tokens or more: 2, 4, 6 -> p50 4, max 6, mean 4.
        assert_eq!(
            (s.tpot_ms.p50, s.tpot_ms.max, s.tpot_ms.mean),
            (Some(4.0), Some(6.0), Some(4.0))
        );
        // Every token out by the end: 5 + 2 + 1 + 3.
        assert_eq!(s.output_tokens_per_s, 110.0);
        // Met: 0 (10, 2), 2 (20, one token: TTFT only), 3 (20, 4); 1's TPOT of 6 misses.
        let a = s.slo.unwrap();
        assert_eq!(a.met, 3);
        assert!(a.ttft_met && a.tpot_met, "{a:?}");
        // A TPOT objective below the median (4 ms) fails the verdict, though the shortest
        // configured output is one token.
        let tight = LlmSlo {
            tpot_ms: 3.0,
            ..slo
        };
        let s = serve_llm_summary(&scan, 0.1, shape, Some(tight));
        assert!(!s.slo.unwrap().tpot_met && !s.slo.unwrap().meets);
        // Only one-token requests: no TPOT to judge, the verdict rests on the TTFT.
        let p = file(&[(0, Some(0), &[10], 1), (10, Some(10), &[20], 1)]);
        let scan = scan_llm_requests(&p, span(0, 100), Some(tight)).unwrap();
        let s = serve_llm_summary(&scan, 0.1, shape, Some(tight));
        assert!(s.tpot_ms.p50.is_none() && s.slo.unwrap().tpot_met);
    }

    /// Interval [10, 110) ms, output 3 tokens each:
    ///
    /// | request | arrival | admitted | tokens        | in interval? | state       | TTFT | TPOT | e2e |
    /// | 0       | 5       | 6        | 8, 9, 10      | no           | -           |      |      |     |
    /// | 1       | 10      | 12       | 20, 24, 28    | yes          | completed   | 10   | 4    | 18  |
    /// | 2       | 20      | 30       | 40, 50, 60    | yes          | completed   | 20   | 10   | 40  |
    /// | 3       | 30      | 60       | 70, 72, 74    | yes          | completed   | 40   | 2    | 44  |
    /// | 4       | 90      | 100      | 105, 112      | yes          | unfinished  | 15   |      |     |
    /// | 5       | 100     | 111      | 115           | yes          | not admitted|      |      |     |
    ///
    /// Inter-token gaps out by 110: 4, 4, 10, 10, 2, 2 (request 4's second token is at 112).
    /// Tokens out in [10, 110]: 10 (request 0's last), 20, 24, 28, 40, 50, 60, 70, 72, 74, 105.
    #[test]
    fn hand_computed_figures() {
        let p = file(&[
            (5, Some(6), &[8, 9, 10], 3),
            (10, Some(12), &[20, 24, 28], 3),
            (20, Some(30), &[40, 50, 60], 3),
            (30, Some(60), &[70, 72, 74], 3),
            (90, Some(100), &[105, 112], 3),
            (100, Some(111), &[115], 3),
        ]);
        let slo = LlmSlo {
            ttft_ms: 20.0,
            tpot_ms: 5.0,
            quantile: 0.5,
        };
        let scan = scan_llm_requests(&p, span(10, 110), Some(slo)).unwrap();
        assert_eq!(scan.file_requests, 6);
        let s = serve_llm_summary(&scan, 0.1, SHAPE, Some(slo));
        assert_eq!(
            (s.requests, s.completed, s.unfinished, s.not_admitted),
            (5, 3, 1, 1)
        );
        assert_eq!(s.offered_per_s, 50.0);
        assert_eq!(s.completed_per_s, 30.0);
        assert_eq!(s.output_tokens_per_s, 110.0);
        // TTFT: 10, 15, 20, 40 observed, one missing above: ranks of 5.
        // p50 -> 3rd (20), p90 -> 5th (none).
        assert_eq!(s.ttft_ms.p50, Some(20.0));
        assert_eq!(s.ttft_ms.p90, None);
        assert_eq!(s.ttft_ms.max, Some(40.0));
        assert_eq!(s.ttft_ms.mean, Some(21.25));
        // TPOT over the completed: 2, 4, 10 -> p50 = 4, p99 = 10.
        assert_eq!(
            (s.tpot_ms.p50, s.tpot_ms.p99, s.tpot_ms.mean),
            (Some(4.0), Some(10.0), Some(16.0 / 3.0))
        );
        // ITL: 2, 2, 4, 4, 10, 10 -> p50 = 3rd = 4, p90 = 6th = 10.
        assert_eq!((s.itl_ms.p50, s.itl_ms.p90), (Some(4.0), Some(10.0)));
        // End-to-end: 18, 40, 44 of 5 -> p50 = 3rd = 44, p90 = none.
        assert_eq!((s.e2e_ms.p50, s.e2e_ms.p90), (Some(44.0), None));
        // Queueing of the admitted by the end: 2, 10, 30, 10 -> p50 = 2nd of 4 = 10.
        assert_eq!(s.queueing_ms.p50, Some(10.0));
        // SLO 20 ms TTFT and 5 ms TPOT: request 1 (10, 4) meets both; request 2's TPOT (10)
        // and request 3's TTFT (40) miss; 4 and 5 did not complete, and had broken neither
        // objective by 110 (4: TTFT 15, 5 ms since its first token of 2 x 5 allowed; 5: 10 ms
        // without a first token): censored.
        let slo = s.slo.unwrap();
        assert_eq!((slo.met, slo.attainment, slo.goodput_per_s), (1, 0.2, 10.0));
        assert_eq!(slo.censored, 2);
        // At p50: TTFT 20 <= 20 and TPOT 4 <= 5: both percentiles are met, but 1 request met of
        // 3 judged does not show the median within the objectives with 99 % confidence
        // (LoadGen's early stopping needs 14 requests with 2 misses): the verdict fails.
        assert!(slo.ttft_met && slo.tpot_met, "{slo:?}");
        assert!(!slo.early_stopping_pass && !slo.meets, "{slo:?}");
        assert_eq!(slo.early_stopping_requests_needed, Some(14));
        assert!(!s.overloaded, "{:?}", s.overload_reasons);
        assert_eq!(s.kv_cache_bytes, Some(4096));
        // A TTFT objective 1 ms tighter fails the TTFT at p50.
        let tight = LlmSlo {
            ttft_ms: 19.0,
            ..slo_of(&slo)
        };
        let s = serve_llm_summary(&scan, 0.1, SHAPE, Some(tight));
        assert!(!s.slo.unwrap().ttft_met && !s.slo.unwrap().meets);
        // And at p99 the TTFT falls on the request without a first token: not met.
        let p99 = LlmSlo {
            quantile: 0.99,
            ttft_ms: 1000.0,
            tpot_ms: 1000.0,
        };
        let s = serve_llm_summary(&scan, 0.1, SHAPE, Some(p99));
        let a = s.slo.unwrap();
        assert!(!a.ttft_met && a.tpot_met && !a.meets);
        // Every completed request meets objectives that loose.
        assert_eq!(
            scan_llm_requests(&p, span(10, 110), Some(p99))
                .unwrap()
                .slo_met,
            3
        );
    }

    fn slo_of(a: &LlmSloAttainment) -> LlmSlo {
        LlmSlo {
            ttft_ms: a.ttft_slo_ms,
            tpot_ms: a.tpot_slo_ms,
            quantile: a.quantile,
        }
    }

    #[test]
    fn a_backlog_beyond_two_batches_is_overloaded() {
        // Interval [0, 100) ms, max batch 1: three requests complete, one runs at the end and
        // two wait. Waits for admission: 0 and 10 ms (first quarter), 10 ms, then 14 ms and,
        // not admitted by the end, 23 and 22 ms (last quarter).
        let p = file(&[
            (0, Some(0), &[10, 20, 30], 3),
            (20, Some(30), &[40, 50, 60], 3),
            (50, Some(60), &[70, 80, 90], 3),
            (76, Some(90), &[101], 3),
            (77, None, &[], 3),
            (78, None, &[], 3),
        ]);
        let scan = scan_llm_requests(&p, span(0, 100), None).unwrap();
        let s = serve_llm_summary(&scan, 0.1, SHAPE, None);
        assert_eq!(
            (s.completed, s.unfinished, s.not_admitted),
            (3, 1, 2),
            "{s:?}"
        );
        // A backlog of 3 exceeds the allowance of 2 batches of 1; and the mean wait grew from
        // 5 ms (first quarter) to 19.667 ms (last), more than twice plus 1 ms.
        assert!(s.overloaded);
        assert_eq!(s.overload_reasons.len(), 2, "{:?}", s.overload_reasons);
        assert!(s.overload_reasons[0].starts_with("3 of 6 requests (50.0 %)"));
        assert!(
            s.overload_reasons[1].contains("rose from 5.000 ms")
                && s.overload_reasons[1].contains("to 19.667 ms"),
            "{:?}",
            s.overload_reasons
        );
        // With room for two batches of 2, the backlog is allowed; the growth is not.
        let wide = LlmShape {
            max_batch: 2,
            ..SHAPE
        };
        let s = serve_llm_summary(&scan, 0.1, wide, None);
        assert_eq!(s.overload_reasons.len(), 1, "{:?}", s.overload_reasons);
        let slo = LlmSlo {
            ttft_ms: 1e6,
            tpot_ms: 1e6,
            quantile: 0.5,
        };
        let s = serve_llm_summary(&scan, 0.1, wide, Some(slo));
        let a = s.slo.unwrap();
        assert!(a.ttft_met && a.tpot_met && !a.meets, "overloaded: {a:?}");
    }

    #[test]
    fn one_token_requests_are_judged_on_their_ttft() {
        let p = file(&[(0, Some(1), &[5], 1), (10, Some(10), &[30], 1)]);
        let slo = LlmSlo {
            ttft_ms: 10.0,
            tpot_ms: 1.0,
            quantile: 0.5,
        };
        let scan = scan_llm_requests(&p, span(0, 100), Some(slo)).unwrap();
        let one = LlmShape {
            output_tokens: 1,
            ..SHAPE
        };
        let s = serve_llm_summary(&scan, 0.1, one, Some(slo));
        assert_eq!(s.tpot_ms.p50, None);
        let a = s.slo.unwrap();
        assert_eq!(a.met, 1);
        assert!(a.tpot_met && a.ttft_met);
        // Two requests cannot show a median with confidence.
        assert!(!a.early_stopping_pass && !a.meets);
    }

    /// The window's end cuts off the last arrivals of every window. Interval [0, 100) ms, TTFT
    /// objective 10 ms, TPOT 5 ms, three-token requests:
    ///
    /// | request | arrival | tokens by 100 | at the end                                       |
    /// | 0       | 0       | 2, 4, 6       | met                                              |
    /// | 1       | 50      | 70, 99        | missed: TTFT 20 ms                               |
    /// | 2       | 60      | 65, 80        | missed: 35 ms since its first token, 10 allowed  |
    /// | 3       | 80      | none          | missed: 20 ms without a first token              |
    /// | 4       | 90      | 95, 97        | censored: TTFT 5, 5 ms since it, 2 x 5 allowed   |
    /// | 5       | 95      | none          | censored: 5 ms without a first token, 10 allowed |
    ///
    /// Attainment still counts the censored as misses (1 of 6); the early-stopping test does
    /// not: 1 met and 3 missed.
    #[test]
    fn requests_the_end_cut_off_are_censored_not_missed() {
        let p = file(&[
            (0, Some(1), &[2, 4, 6], 3),
            (50, Some(51), &[70, 99], 3),
            (60, Some(61), &[65, 80], 3),
            (80, None, &[], 3),
            (90, Some(91), &[95, 97], 3),
            (95, None, &[], 3),
        ]);
        let slo = LlmSlo {
            ttft_ms: 10.0,
            tpot_ms: 5.0,
            quantile: 0.5,
        };
        let scan = scan_llm_requests(&p, span(0, 100), Some(slo)).unwrap();
        assert_eq!((scan.slo_met, scan.slo_censored), (1, 2));
        let a = serve_llm_summary(&scan, 0.1, SHAPE, Some(slo)).slo.unwrap();
        assert_eq!(a.censored, 2);
        assert_eq!(a.attainment, 1.0 / 6.0);
        // 1 met against 3 missed, not against 5.
        assert_eq!(
            a.early_stopping_requests_needed,
            Some(early_stopping_min_met(3, 0.5) + 3)
        );
    }

    /// A p99 probe of 459 requests that met both objectives passes with the few the window's
    /// end cut off: they are censored, not misses (counted as misses they would ask for 1,000
    /// more requests, the H200 capacity search's first figure).
    #[test]
    fn a_window_full_of_met_requests_passes_with_its_last_arrivals_in_flight() {
        let mut owned: Vec<(u64, Option<u64>, Vec<u64>, u32)> = (0..459)
            .map(|i| (i * 2, Some(i * 2), vec![i * 2 + 1, i * 2 + 2], 2))
            .collect();
        let end = 2 * 459 + 10;
        // Three arrive in the window's last milliseconds and are running at its end.
        for k in (1..=3).rev() {
            owned.push((end - k, Some(end - k), vec![end - k + 1], 2));
        }
        let borrowed: Vec<Req<'_>> = owned
            .iter()
            .map(|(a, ad, t, o)| (*a, *ad, t.as_slice(), *o))
            .collect();
        let p = file(&borrowed);
        let slo = LlmSlo {
            ttft_ms: 10.0,
            tpot_ms: 10.0,
            quantile: 0.99,
        };
        let scan = scan_llm_requests(&p, span(0, end), Some(slo)).unwrap();
        let two = LlmShape {
            output_tokens: 2,
            ..SHAPE
        };
        let a = serve_llm_summary(&scan, end as f64 / 1e3, two, Some(slo))
            .slo
            .unwrap();
        assert_eq!((a.met, a.censored), (459, 3));
        assert!(a.early_stopping_pass && a.ttft_met && a.tpot_met, "{a:?}");
    }

    /// At p99 a window must hold 459 requests that all meet the objectives (LoadGen's early
    /// stopping, as for `serve`): 458 observe a p99 within them and still fail, so a short
    /// probe cannot pass on its slowest request.
    #[test]
    fn p99_needs_459_requests_without_a_miss() {
        let judge = |n: u64| {
            let owned: Vec<(u64, Option<u64>, Vec<u64>, u32)> = (0..n)
                .map(|i| (i * 2, Some(i * 2), vec![i * 2 + 1], 1))
                .collect();
            let borrowed: Vec<Req<'_>> = owned
                .iter()
                .map(|(a, ad, t, o)| (*a, *ad, t.as_slice(), *o))
                .collect();
            let p = file(&borrowed);
            let slo = LlmSlo {
                ttft_ms: 10.0,
                tpot_ms: 10.0,
                quantile: 0.99,
            };
            let scan = scan_llm_requests(&p, span(0, 2 * n + 10), Some(slo)).unwrap();
            let one = LlmShape {
                output_tokens: 1,
                ..SHAPE
            };
            serve_llm_summary(&scan, (2 * n + 10) as f64 / 1e3, one, Some(slo))
                .slo
                .unwrap()
        };
        let short = judge(458);
        assert!(short.ttft_met && short.tpot_met, "{short:?}");
        assert!(!short.early_stopping_pass && !short.meets, "{short:?}");
        assert_eq!(short.early_stopping_requests_needed, Some(459));
        let enough = judge(459);
        assert!(enough.early_stopping_pass && enough.meets, "{enough:?}");
    }
}
