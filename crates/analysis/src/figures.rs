//! How a figure is written where a rule decides its precision: once, for every page that says
//! it (the study report, the decision table, docs/results.md).

/// `v` rounded to `digits` significant figures, halves away from zero (12.5 at two figures:
/// 13).
#[must_use]
pub fn round_sig(v: f64, digits: i32) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let scale = 10f64.powi(digits - 1 - v.abs().log10().floor() as i32);
    (v * scale).round() / scale
}

/// Significant figures a bracket `[lo, hi)` resolves: enough to tell its ends apart and no
/// more (`[848.5, 1009)`: 2; `[1000, 1100)`: 2; `[100, 101)`: 3), at least 1.
#[must_use]
pub fn bracket_digits(lo: f64, hi: f64) -> i32 {
    let width = (hi - lo).abs();
    if width <= 0.0 || !lo.is_finite() || !hi.is_finite() || lo <= 0.0 {
        return 3;
    }
    ((lo / width).log10().ceil() as i32 + 1).clamp(1, 6)
}

/// `12,345` (rounded to a whole number).
#[must_use]
pub fn thousands(v: f64) -> String {
    let n = v.round() as i64;
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 { format!("-{out}") } else { out }
}

/// `v` to `digits` significant figures, thousands separated, with the decimals those figures
/// need and no more: `566` (565.7 at three), `11,300`, `38.1`, `0.0123`, `50` (not `50.0`).
#[must_use]
pub fn significant(v: f64, digits: i32) -> String {
    if !v.is_finite() || v == 0.0 {
        return format!("{v}");
    }
    let r = round_sig(v, digits);
    // A whole number reads without decimals (`50`, not `50.0`).
    let decimals = if r.fract() == 0.0 {
        0
    } else {
        (digits - 1 - r.abs().log10().floor() as i32).max(0) as usize
    };
    let text = format!("{:.decimals$}", r.abs());
    let (int, frac) = text
        .split_once('.')
        .map_or((text.as_str(), None), |(a, b)| (a, Some(b)));
    let int = int
        .parse::<f64>()
        .map_or_else(|_| int.to_owned(), thousands);
    let sign = if r < 0.0 { "-" } else { "" };
    match frac {
        Some(f) => format!("{sign}{int}.{f}"),
        None => format!("{sign}{int}"),
    }
}

/// A rate to a tenth, thousands separated, without a trailing `.0`: `2,400`, `848.5`.
#[must_use]
pub fn tenths(v: f64) -> String {
    let r = (v * 10.0).round() / 10.0;
    if (r - r.round()).abs() < 1e-9 {
        thousands(r)
    } else {
        let tenth = ((r.abs() - r.abs().trunc()) * 10.0).round() as u8;
        format!("{}.{tenth}", thousands(r.trunc()))
    }
}

/// A capacity bracket `[passed, failed)` in words, to the significant figures the bracket
/// resolves: `850 to 1,000` for `[848.5, 1009)`, `at least 16,000`, `below 25`, `unknown`.
#[must_use]
pub fn capacity_words(passed: Option<f64>, failed: Option<f64>) -> String {
    match (passed, failed) {
        (Some(c), Some(f)) => {
            let digits = bracket_digits(c, f);
            format!(
                "{} to {}",
                thousands(round_sig(c, digits)),
                thousands(round_sig(f, digits))
            )
        }
        (Some(c), None) => format!("at least {}", tenths(c)),
        (None, Some(f)) => format!("below {}", tenths(f)),
        (None, None) => "unknown".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn significant_figures_read_with_thousands_and_the_decimals_they_need() {
        assert_eq!(significant(565.7, 3), "566");
        assert_eq!(significant(11310.0, 3), "11,300");
        assert_eq!(significant(38.05, 3), "38.1");
        assert_eq!(significant(1131.0, 3), "1,130");
        assert_eq!(significant(0.012_34, 3), "0.0123");
        assert_eq!(significant(-2468.0, 2), "-2,500");
        assert_eq!(significant(999.6, 3), "1,000");
        assert_eq!(significant(50.0, 3), "50");
    }

    #[test]
    fn a_bracket_reads_to_the_figures_it_resolves() {
        assert_eq!(capacity_words(Some(848.5), Some(1009.0)), "850 to 1,000");
        assert_eq!(capacity_words(Some(800.0), Some(1131.0)), "800 to 1,100");
        assert_eq!(capacity_words(Some(38.05), Some(45.25)), "38 to 45");
        assert_eq!(capacity_words(Some(16_000.0), None), "at least 16,000");
        assert_eq!(capacity_words(None, Some(24.0)), "below 24");
        assert!((round_sig(12.5, 2) - 13.0).abs() < 1e-9);
    }
}
