//! The common interval and each worker's overlap with it.
//!
//! Every worker times its own window `[start, end]`: `start` is when its first batch began (the
//! scheduled start plus its lateness), `end` is the scheduled start plus `window_s`. Only the
//! interval during which *every* worker was timing is shared load, so the figures are computed
//! over `[latest start, earliest end]` and only batches entirely inside it count: a batch that
//! began before the last worker started ran under less contention than the rest.

/// The least fraction of its own window a worker must spend inside the common interval.
///
/// Below it the summary would describe a cohort that was not really running together (one
/// worker started late, or the clocks disagree), so the cohort is refused. 0.80 allows a late
/// start of a few seconds in a window of tens of seconds, which the barrier already makes rare.
pub const MIN_OVERLAP_FRACTION: f64 = 0.80;

/// A half-open time span `[start_unix_ns, end_unix_ns)` in unix nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// Start, unix nanoseconds.
    pub start_unix_ns: u64,
    /// End, unix nanoseconds.
    pub end_unix_ns: u64,
}

impl Span {
    /// Its length, nanoseconds (0 when the end is not after the start).
    #[must_use]
    pub fn len_ns(self) -> u64 {
        self.end_unix_ns.saturating_sub(self.start_unix_ns)
    }

    /// Whether `[start, end]` lies entirely inside this span.
    #[must_use]
    pub fn contains(self, start_unix_ns: u64, end_unix_ns: u64) -> bool {
        start_unix_ns >= self.start_unix_ns && end_unix_ns <= self.end_unix_ns
    }
}

/// `[latest start, earliest end]` of `windows`; `None` when there is no window or when that
/// interval is empty (zero or negative length).
#[must_use]
pub fn common_interval(windows: &[Span]) -> Option<Span> {
    let start = windows.iter().map(|w| w.start_unix_ns).max()?;
    let end = windows.iter().map(|w| w.end_unix_ns).min()?;
    (end > start).then_some(Span {
        start_unix_ns: start,
        end_unix_ns: end,
    })
}

/// Which end of the common interval a window cut short.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CutSide {
    /// The window started last: the common interval starts at its start.
    LateStart,
    /// The window ended first: the common interval ends at its end.
    EarlyEnd,
}

/// One edge of a window: its start or its end.
type Edge = fn(&Span) -> u64;

/// A window that cut the common interval short, found by [`cuts`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut {
    /// Its index in the windows given.
    pub index: usize,
    /// Which end it cut.
    pub side: CutSide,
    /// The window it is measured against: the earliest start for a late start, the latest end
    /// for an early end (the lowest index among equals).
    pub against: usize,
    /// How much later it started, or how much earlier it ended, than `against`, nanoseconds.
    pub by_ns: u64,
}

/// The windows that made the common interval shorter than the longest window: every window that
/// started last when some started earlier, then every window that ended first when some ended
/// later.
///
/// This names the cause of a low overlap. A worker's overlap is low because *another* worker
/// started late or stopped early, so the worker below the threshold is the victim; the culprit
/// is the one that bounds the common interval. Empty when every window starts together and ends
/// together, or when there is no window.
#[must_use]
pub fn cuts(windows: &[Span]) -> Vec<Cut> {
    let by_start = windows
        .iter()
        .enumerate()
        .min_by_key(|(i, w)| (w.start_unix_ns, *i));
    let by_end = windows
        .iter()
        .enumerate()
        .max_by_key(|(i, w)| (w.end_unix_ns, std::cmp::Reverse(*i)));
    let (Some((earliest_start, _)), Some((latest_end, _))) = (by_start, by_end) else {
        return Vec::new();
    };
    let start: Edge = |w| w.start_unix_ns;
    let end: Edge = |w| w.end_unix_ns;
    let sides = [
        (CutSide::LateStart, earliest_start, start),
        (CutSide::EarlyEnd, latest_end, end),
    ];
    let mut out = Vec::new();
    for (side, against, edge) in sides {
        // Every start is at or after the earliest and every end at or before the latest, so the
        // distance from `against` says how far each window moved that edge of the interval.
        let distance = |w: &Span| edge(w).abs_diff(edge(&windows[against]));
        let by_ns = windows.iter().map(distance).max().unwrap_or(0);
        if by_ns == 0 {
            continue;
        }
        out.extend(
            windows
                .iter()
                .enumerate()
                .filter(|(_, w)| distance(w) == by_ns)
                .map(|(index, _)| Cut {
                    index,
                    side,
                    against,
                    by_ns,
                }),
        );
    }
    out
}

/// The fraction of `own` that lies inside `common`: `|own ∩ common| / |own|`.
///
/// `common` is normally inside `own`, which makes this `|common| / |own|`; the intersection keeps
/// it within `[0, 1]` whatever is passed. A window of zero length has overlap 0 (it timed
/// nothing), and so has a missing common interval.
#[must_use]
pub fn overlap_fraction(own: Span, common: Option<Span>) -> f64 {
    let own_ns = own.len_ns();
    let Some(common) = common else { return 0.0 };
    if own_ns == 0 {
        return 0.0;
    }
    let inter = Span {
        start_unix_ns: own.start_unix_ns.max(common.start_unix_ns),
        end_unix_ns: own.end_unix_ns.min(common.end_unix_ns),
    };
    inter.len_ns() as f64 / own_ns as f64
}

#[cfg(test)]
#[expect(
    clippy::float_cmp,
    reason = "the figures are exact by construction and the tests assert them exactly"
)]
mod tests {
    use super::*;

    fn s(a: u64, b: u64) -> Span {
        Span {
            start_unix_ns: a,
            end_unix_ns: b,
        }
    }

    #[test]
    fn late_starter_sets_the_start() {
        let w = [s(0, 10_000), s(300, 10_000), s(100, 10_000)];
        let c = common_interval(&w).unwrap();
        assert_eq!(c, s(300, 10_000));
        assert_eq!(overlap_fraction(w[0], Some(c)), 0.97);
        assert_eq!(overlap_fraction(w[1], Some(c)), 1.0);
    }

    #[test]
    fn degenerate_intervals() {
        assert_eq!(common_interval(&[]), None);
        // Touching windows share no time.
        assert_eq!(common_interval(&[s(0, 5), s(5, 9)]), None);
        assert_eq!(common_interval(&[s(0, 5), s(6, 9)]), None);
        assert_eq!(overlap_fraction(s(0, 5), None), 0.0);
        // Zero-length own window.
        assert_eq!(overlap_fraction(s(4, 4), Some(s(0, 9))), 0.0);
        // One worker: its own window is the common interval.
        let one = [s(7, 17)];
        assert_eq!(overlap_fraction(one[0], common_interval(&one)), 1.0);
    }

    #[test]
    fn cuts_name_the_latest_start_and_the_earliest_end() {
        // Replica 1 starts 2 s late: it, not replica 0, cut the interval.
        let late = [s(0, 10_000), s(2_000, 10_000)];
        assert_eq!(
            cuts(&late),
            [Cut {
                index: 1,
                side: CutSide::LateStart,
                against: 0,
                by_ns: 2_000
            }]
        );
        // Replica 2 starts last and replica 0 ends first; two late starters tie.
        let both = [s(0, 9_000), s(500, 10_000), s(500, 10_000), s(100, 9_500)];
        let found: Vec<(usize, CutSide, usize, u64)> = cuts(&both)
            .iter()
            .map(|c| (c.index, c.side, c.against, c.by_ns))
            .collect();
        assert_eq!(
            found,
            [
                (1, CutSide::LateStart, 0, 500),
                (2, CutSide::LateStart, 0, 500),
                (0, CutSide::EarlyEnd, 1, 1_000),
            ]
        );
        // Windows that coincide cut nothing, and neither does a single one.
        assert_eq!(cuts(&[s(3, 9), s(3, 9)]), []);
        assert_eq!(cuts(&[s(3, 9)]), []);
        assert_eq!(cuts(&[]), []);
    }

    #[test]
    fn containment_is_inclusive_at_both_ends() {
        let c = s(10, 20);
        assert!(c.contains(10, 20));
        assert!(!c.contains(9, 12));
        assert!(!c.contains(15, 21));
    }
}
