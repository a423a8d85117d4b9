//! Markdown output of a [`Document`] (`comparison.md`, `bench-summarize --format markdown`).

use std::fmt::Write as _;

use super::document::{Block, Document, Table, anchor, sections};

/// The document as Markdown: `#` headings, paragraphs, pipe tables (figures right-aligned) and
/// `-` lists, blocks separated by one blank line, ending with one newline.
pub(crate) fn markdown(doc: &Document) -> String {
    let mut out = String::new();
    let toc: Vec<String> = sections(&doc.blocks)
        .into_iter()
        .map(|h| format!("[{h}](#{})", anchor(h)))
        .collect();
    blocks(&mut out, &doc.blocks, &toc);
    out.truncate(out.trim_end().len());
    out.push('\n');
    // Names and ids come from recorded files: none of their characters may end a row or reach
    // a terminal that shows the file.
    coload_cohort_schema::text::escaped_lines(&out).into_owned()
}

fn blocks(out: &mut String, list: &[Block], toc: &[String]) {
    for b in list {
        match b {
            Block::Heading(level, text) => {
                let _ = writeln!(out, "{} {text}\n", "#".repeat(*level));
            }
            Block::Para(text) => {
                let _ = writeln!(out, "{text}\n");
            }
            Block::Table(t) => {
                out.push_str(&table(t));
                out.push('\n');
            }
            Block::List(items) => {
                for i in items {
                    let _ = writeln!(out, "- {i}");
                }
                out.push('\n');
            }
            Block::Findings(items) => {
                for (lead, text) in items {
                    let _ = writeln!(out, "- **{lead}** {text}");
                }
                out.push('\n');
            }
            // The charts are in report.html; the tables beside them hold the same figures.
            Block::Figures(_) => {}
            Block::Details(summary, inner) => {
                let _ = writeln!(out, "### {summary}\n");
                blocks(out, inner, toc);
            }
            Block::Facts(facts) => {
                for (what, value) in facts {
                    let _ = writeln!(out, "- **{what}**: {value}");
                }
                out.push('\n');
            }
            Block::Contents => {
                if !toc.is_empty() {
                    let _ = writeln!(out, "Contents: {}\n", toc.join(" · "));
                }
            }
        }
    }
}

/// A pipe table, the first column left-aligned and the others right-aligned.
pub(crate) fn table(t: &Table) -> String {
    let mut out = format!("| {} |\n", t.header.join(" | "));
    let sep: Vec<&str> = (0..t.header.len())
        .map(|i| if i == 0 { "---" } else { "---:" })
        .collect();
    let _ = writeln!(out, "| {} |", sep.join(" | "));
    for r in &t.rows {
        // A cell may hold a recorded name: no line break of it may end the row, and a `|` of it
        // is a character, not a column.
        let cells: Vec<String> = r
            .iter()
            .map(|c| coload_cohort_schema::text::escaped(c).replace('|', "\\|"))
            .collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    out
}
