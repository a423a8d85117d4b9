//! Words for the provenance header: dates in UTC from the records' Unix nanoseconds (no
//! calendar crate: the civil-from-days rule of Howard Hinnant's `chrono`-compatible date
//! algorithms, <https://howardhinnant.github.io/date_algorithms.html>), and plain numbers.

/// A figure as the report writes it ([`super::svg::num`]: whole numbers above 100, two
/// significant decimals below 10).
pub(crate) fn number(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        super::svg::thousands(v)
    } else {
        super::svg::num(v)
    }
}

/// `(year, month, day)` of the day `days` after 1970-01-01.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `(date, time)` of a Unix instant in nanoseconds: `2026-12-01`, `00:45`.
fn utc(unix_ns: u64) -> (String, String) {
    let secs = i64::try_from(unix_ns / 1_000_000_000).unwrap_or(i64::MAX);
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let t = secs.rem_euclid(86_400);
    (
        format!("{y:04}-{m:02}-{d:02}"),
        format!("{:02}:{:02}", t / 3600, (t % 3600) / 60),
    )
}

/// The UTC day of a Unix instant in nanoseconds: `2026-12-01`.
pub(crate) fn utc_day(unix_ns: u64) -> String {
    utc(unix_ns).0
}

/// `2026-12-01 00:45 to 01:00 UTC`, or with both dates when the span crosses midnight.
pub(crate) fn utc_span(start_ns: u64, end_ns: u64) -> String {
    let (d0, t0) = utc(start_ns);
    let (d1, t1) = utc(end_ns.max(start_ns));
    if d0 == d1 {
        format!("{d0} {t0} to {t1} UTC")
    } else {
        format!("{d0} {t0} to {d1} {t1} UTC")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_read_in_utc() {
        assert_eq!(utc(0), ("1970-01-01".to_owned(), "00:00".to_owned()));
        // 2026-12-01T00:53:48Z, a cohort of the third round.
        assert_eq!(
            utc(1_796_086_428_196_827_629),
            ("2026-12-01".to_owned(), "00:53".to_owned())
        );
        // A leap day.
        assert_eq!(utc(1_709_164_800_000_000_000).0, "2024-02-29");
        assert_eq!(
            utc_span(1_796_000_000_000_000_000, 1_796_086_428_000_000_000),
            "2026-11-30 00:53 to 2026-12-01 00:53 UTC"
        );
    }
}
