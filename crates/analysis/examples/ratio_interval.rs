//! The ratio of two means with its 95 % interval, by the analysis crate's one rule
//! ([`coload_analysis::ratio::ratio_of_means`]), for scripts in other languages that set two
//! sides' repeats against each other (`scripts/perf/decode_table.py`):
//!
//!     cargo run -q -p coload-analysis --example ratio_interval -- 3872,3901 3065,3011
//!
//! prints `ratio low high` (`-` for an end the repeats cannot give: one run on both sides).

#![expect(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a command-line tool prints its answer and its errors"
)]

use std::process::ExitCode;

fn values(arg: &str) -> Result<Vec<f64>, String> {
    arg.split(',')
        .map(|v| {
            v.trim()
                .parse::<f64>()
                .map_err(|e| format!("`{v}` in `{arg}` is not a number: {e}"))
        })
        .collect()
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [a, b] = args.as_slice() else {
        eprintln!("usage: ratio_interval NUMERATOR,... DENOMINATOR,...");
        return ExitCode::from(2);
    };
    let (a, b) = match (values(a), values(b)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let Some(r) = coload_analysis::ratio::ratio_of_means(&a, &b) else {
        eprintln!("error: no ratio: a side is empty or its mean is not positive");
        return ExitCode::from(2);
    };
    let end = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v}"));
    println!("{} {} {}", r.ratio, end(r.low), end(r.high));
    ExitCode::SUCCESS
}
