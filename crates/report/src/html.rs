//! HTML output: a [`Document`] as one self-contained page (`report.html`): the style inline, the
//! charts as inline SVG, no script and no external asset, so the page opens offline and reads
//! the same in any browser.
//!
//! Figures sit side by side (they wrap on a narrow screen); folded sections are `<details>`, so
//! the first screen holds the verdict and everything per cohort is one click away.

use std::fmt::Write as _;

use super::document::{Block, Document, Figure, Table, anchor, sections};

/// The page's style: a readable system font, tables with light rules, the charts' text classes
/// (see [`super::svg`]): tick labels, axis titles with units, light grid lines, dashed
/// reference lines.
const STYLE: &str = "\
:root{--ink:#1d232a;--muted:#5b6770;--rule:#d9dee2}
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,'Noto Sans','DejaVu Sans',sans-serif;\
font-size:16px;line-height:1.45;color:var(--ink);max-width:1240px;margin:1.2em auto;padding:0 1.2em}
h1{font-size:1.6em;margin:.2em 0 .3em}h2{font-size:1.25em;margin:1.1em 0 .4em;\
border-bottom:1px solid var(--rule);padding-bottom:.2em}h3{font-size:1.05em}
p.note{color:var(--muted);margin:.2em 0}
ul.findings{margin:.5em 0 .4em;padding-left:1.2em;font-size:.95em;line-height:1.38}ul.findings li{margin:.15em 0}
.figures{display:flex;flex-wrap:wrap;gap:16px 24px;align-items:flex-start}
figure{margin:.4em 0}figcaption{font-size:.85em;color:var(--muted);max-width:600px}
table{border-collapse:collapse;margin:.5em 0 1.2em;font-size:.9em;font-variant-numeric:tabular-nums}
th,td{border-bottom:1px solid var(--rule);padding:.25em .7em;text-align:right}
th.t,td.t{text-align:left}th{font-weight:600;border-bottom:2px solid #aab3ba}
details{border:1px solid var(--rule);border-radius:6px;padding:.3em .8em;margin:.4em 0}
details[open]{padding-bottom:.8em}summary{cursor:pointer;font-weight:600}
svg.chart{font-family:inherit;max-width:100%;height:auto}
svg .tick{font-size:12px;fill:#3d464d}svg .axis-title{font-size:13px;fill:#3d464d}
svg .panel-title{font-size:13px;font-weight:600;fill:var(--ink)}svg .legend{font-size:13px;fill:var(--ink)}
svg .grid{stroke:#e6e9ec;stroke-width:1}svg .axis{stroke:#8a949b;stroke-width:1}
svg .ref{stroke:#333;stroke-width:1;stroke-dasharray:5 4}svg .ref-label{font-size:11px;fill:#333}
svg .legend-line{stroke:none}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:.1em 1em;margin:.4em 0 .6em;\
font-size:.85em;color:var(--muted)}dl.facts dt{font-weight:600;color:var(--ink)}dl.facts dd{margin:0}
@media (min-width:1100px){dl.facts{grid-template-columns:max-content 1fr max-content 1fr}}
nav.toc{font-size:.85em;margin:.3em 0 .2em;line-height:1.7}nav.toc a{color:#1f6fb4;margin-right:.2em}
.scroll{overflow-x:auto;max-width:100%}
@media (max-width:900px){body{font-size:15px;padding:0 .6em}th,td{padding:.2em .4em}\
figure{margin:.4em 0;max-width:100%}}";

/// The page: `title`, then the document's blocks.
pub(crate) fn page(title: &str, doc: &Document) -> String {
    let mut out = format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>\n",
        escape_html(title)
    );
    out.push_str(STYLE);
    out.push_str("\n</style>\n</head>\n<body>\n");
    let toc: Vec<&str> = sections(&doc.blocks);
    blocks(&mut out, &doc.blocks, &toc);
    out.push_str("</body>\n</html>\n");
    out
}

fn blocks(out: &mut String, list: &[Block], toc: &[&str]) {
    for b in list {
        match b {
            Block::Heading(2, text) => {
                let _ = writeln!(
                    out,
                    "<h2 id=\"{}\">{}</h2>",
                    escape_html(&anchor(text)),
                    escape_html(text)
                );
            }
            Block::Heading(level, text) => {
                let _ = writeln!(out, "<h{level}>{}</h{level}>", escape_html(text));
            }
            Block::Facts(facts) => {
                out.push_str("<dl class=\"facts\">\n");
                for (what, value) in facts {
                    let _ = writeln!(
                        out,
                        "<dt>{}</dt><dd>{}</dd>",
                        escape_html(what),
                        escape_html(value)
                    );
                }
                out.push_str("</dl>\n");
            }
            Block::Contents => {
                if !toc.is_empty() {
                    out.push_str("<nav class=\"toc\"><strong>Contents:</strong> ");
                    let links: Vec<String> = toc
                        .iter()
                        .map(|h| {
                            format!(
                                "<a href=\"#{}\">{}</a>",
                                escape_html(&anchor(h)),
                                escape_html(h)
                            )
                        })
                        .collect();
                    out.push_str(&links.join(" · "));
                    out.push_str("</nav>\n");
                }
            }
            Block::Para(text) => {
                let _ = writeln!(out, "<p class=\"note\">{}</p>", escape_html(text));
            }
            Block::Table(t) => out.push_str(&table(t)),
            Block::List(items) => {
                out.push_str("<ul>\n");
                for i in items {
                    let _ = writeln!(out, "<li>{}</li>", escape_html(i));
                }
                out.push_str("</ul>\n");
            }
            Block::Findings(items) => {
                out.push_str("<ul class=\"findings\">\n");
                for (lead, text) in items {
                    let _ = writeln!(
                        out,
                        "<li><strong>{}</strong> {}</li>",
                        escape_html(lead),
                        escape_html(text)
                    );
                }
                out.push_str("</ul>\n");
            }
            Block::Figures(figures) => {
                out.push_str("<div class=\"figures\">\n");
                for f in figures {
                    out.push_str(&figure(f));
                }
                out.push_str("</div>\n");
            }
            Block::Details(summary, inner) => {
                let _ = writeln!(
                    out,
                    "<details>\n<summary>{}</summary>",
                    escape_html(summary)
                );
                blocks(out, inner, toc);
                out.push_str("</details>\n");
            }
        }
    }
}

fn figure(f: &Figure) -> String {
    format!(
        "<figure>\n{}\n<figcaption>{}</figcaption>\n</figure>\n",
        f.svg,
        escape_html(&f.caption)
    )
}

/// Whether a cell reads as a figure (right-aligned): a number, `-`, or an interval.
fn is_figure(cell: &str) -> bool {
    let c = cell.trim();
    c == "-"
        || c.starts_with('[')
        || c.split_once(' ').is_some_and(|(head, rest)| {
            // `3,835 (95 % CI 3,803 to 3,866)`: a figure and its interval.
            head.replace(',', "").parse::<f64>().is_ok() && rest.starts_with(['(', '['])
        })
        || c.replace(',', "").parse::<f64>().is_ok()
        || c.parse::<f64>().is_ok()
        || c.split(" / ").all(|p| p.trim().parse::<f64>().is_ok())
}

fn table(t: &Table) -> String {
    // Columns of figures align right, columns of words left (the first one always left).
    let text_col: Vec<bool> = (0..t.header.len())
        .map(|i| {
            i == 0
                || t.rows
                    .iter()
                    .any(|r| r.get(i).is_some_and(|c| !is_figure(c)))
        })
        .collect();
    let class = |i: usize| {
        if text_col.get(i).copied().unwrap_or(false) {
            " class=\"t\""
        } else {
            ""
        }
    };
    // Wide tables scroll inside their own box on a narrow screen, so the page never does.
    let mut out = String::from("<div class=\"scroll\"><table>\n<thead><tr>");
    for (i, h) in t.header.iter().enumerate() {
        let _ = write!(out, "<th{}>{}</th>", class(i), escape_html(h));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for r in &t.rows {
        out.push_str("<tr>");
        for (i, c) in r.iter().enumerate() {
            let _ = write!(out, "<td{}>{}</td>", class(i), escape_html(c));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table></div>\n");
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
