//! The study's index as a table for people.

use std::fmt::Write as _;

use coload_cohort_schema::study::{Index, Outcome};

/// The table printed at the end of a study: one row per cohort, aligned.
pub(crate) fn table(index: &Index) -> String {
    let header = ["cohort", "workers", "lanes", "outcome", "seconds", "note"];
    let rows: Vec<[String; 6]> = index
        .cohorts
        .iter()
        .map(|e| {
            let note = match (&e.reason, e.failed_dirs.last()) {
                (Some(r), Some(d)) => format!("{r} [kept: {d}]"),
                (Some(r), None) => r.clone(),
                (None, _) => e
                    .experiment
                    .clone()
                    .or_else(|| e.capacity.clone())
                    .or_else(|| e.isolation.clone())
                    .unwrap_or_default(),
            };
            [
                e.name.clone(),
                e.workers.clone(),
                e.lanes.clone().unwrap_or_else(|| "-".to_owned()),
                e.outcome.as_str().to_owned(),
                e.duration_s
                    .map_or_else(|| "-".to_owned(), |s| format!("{s:.0}")),
                note,
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut s = String::new();
        for (i, (c, w)) in cells.iter().zip(widths).enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else if i == 4 {
                let _ = write!(s, "{c:>w$}  ");
            } else {
                let _ = write!(s, "{c:<w$}  ");
            }
        }
        s.trim_end().to_owned()
    };
    let mut out = line(&header.map(str::to_owned));
    out.push('\n');
    for r in &rows {
        out.push_str(&line(r));
        out.push('\n');
    }
    let count = |o: Outcome| index.cohorts.iter().filter(|e| e.outcome == o).count();
    let _ = writeln!(
        out,
        "{} cohorts: {} complete ({} from earlier runs), {} failed ({} earlier), {} not \
         offered, {} not run, {} interrupted",
        index.cohorts.len(),
        count(Outcome::Complete) + count(Outcome::AlreadyComplete),
        count(Outcome::AlreadyComplete),
        count(Outcome::Failed) + count(Outcome::FailedEarlier),
        count(Outcome::FailedEarlier),
        count(Outcome::NotOffered),
        count(Outcome::NotRun),
        count(Outcome::Interrupted),
    );
    out
}
