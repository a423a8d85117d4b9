//! HTML output: a [`Document`] and its figures as one self-contained page (`report.html`), with
//! the style inline and the plots as inline SVG, so that the page opens offline with no external
//! asset.

use std::fmt::Write as _;

use super::document::{Block, Document, Figure, Table};

const STYLE: &str = "body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;\
color:#222}table{border-collapse:collapse;margin:.5em 0 1.5em}th,td{border:1px solid #ccc;\
padding:.2em .6em;text-align:right}th:first-child,td:first-child{text-align:left}\
th{background:#f3f3f3}figure{margin:1em 0}figcaption{font-size:.9em;color:#555}";

/// The page: `title`, the document's blocks, then the figures under a `Plots` heading.
pub(crate) fn page(title: &str, doc: &Document, figures: &[Figure]) -> String {
    let mut out = format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>{}</title>\n<style>",
        escape_html(title)
    );
    out.push_str(STYLE);
    out.push_str("</style>\n</head>\n<body>\n");
    for b in &doc.blocks {
        match b {
            Block::Heading(level, text) => {
                let _ = writeln!(out, "<h{level}>{}</h{level}>", escape_html(text));
            }
            Block::Para(text) => {
                let _ = writeln!(out, "<p>{}</p>", escape_html(text));
            }
            Block::Table(t) => out.push_str(&table(t)),
            Block::List(items) => {
                out.push_str("<ul>\n");
                for i in items {
                    let _ = writeln!(out, "<li>{}</li>", escape_html(i));
                }
                out.push_str("</ul>\n");
            }
        }
    }
    if !figures.is_empty() {
        out.push_str("<h2>Plots</h2>\n");
    }
    for f in figures {
        let _ = writeln!(
            out,
            "<figure>\n{}\n<figcaption>{}</figcaption>\n</figure>",
            f.svg,
            escape_html(&f.caption)
        );
    }
    out.push_str("</body>\n</html>\n");
    out
}

fn table(t: &Table) -> String {
    let mut out = String::from("<table>\n<thead><tr>");
    for h in &t.header {
        let _ = write!(out, "<th>{}</th>", escape_html(h));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for r in &t.rows {
        out.push_str("<tr>");
        for c in r {
            let _ = write!(out, "<td>{}</td>", escape_html(c));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table>\n");
    out
}

/// Escapes text for HTML element content and attribute values.
pub(crate) fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(ch),
        }
    }
    out
}
