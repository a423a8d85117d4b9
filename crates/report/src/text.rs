//! Plain-text output for a terminal: tables in aligned columns.

use super::document::Table;

/// The table in columns two spaces apart, the first left-aligned and the others right-aligned,
/// with no trailing spaces.
pub(crate) fn columns(t: &Table) -> String {
    let w = widths(t);
    let line = |cells: &[String]| {
        let s: Vec<String> = cells
            .iter()
            // A cell may hold a recorded name: shown on its one line, never acted on.
            .map(|c| coload_cohort_schema::text::escaped(c).into_owned())
            .enumerate()
            .map(|(i, c)| {
                let width = w.get(i).copied().unwrap_or(0);
                if i == 0 {
                    format!("{c:<width$}")
                } else {
                    format!("{c:>width$}")
                }
            })
            .collect();
        s.join("  ").trim_end().to_owned()
    };
    let mut out = line(&t.header);
    out.push('\n');
    for r in &t.rows {
        out.push_str(&line(r));
        out.push('\n');
    }
    out
}

/// Each column's width in characters: its widest cell, header included.
fn widths(t: &Table) -> Vec<usize> {
    let mut w: Vec<usize> = t.header.iter().map(|h| h.chars().count()).collect();
    for r in &t.rows {
        for (i, c) in r.iter().enumerate() {
            if let Some(x) = w.get_mut(i) {
                *x = (*x).max(c.chars().count());
            }
        }
    }
    w
}
