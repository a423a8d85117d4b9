//! The document model: what a report says, before any output format.
//!
//! A [`Document`] is a list of [`Block`]s (headings, paragraphs, tables, lists) holding plain
//! text. The modules that decide *what* to say ([`super::comparison`], [`super::summary`]) build
//! one; the output modules ([`super::markdown`], [`super::html`], [`super::text`]) decide only
//! *how* it looks, so a new report builds a new document and gets every format, and a new format
//! serves every report.

use std::collections::BTreeMap;

use coload_cohort_schema::Workload;

/// Bytes per GiB, for memory figures people read.
const BYTES_PER_GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// A report as a sequence of blocks.
#[derive(Debug, Default)]
pub(crate) struct Document {
    /// The blocks, in reading order.
    pub(crate) blocks: Vec<Block>,
}

impl Document {
    /// Appends a heading of `level` (1 is the title).
    pub(crate) fn heading(&mut self, level: usize, text: impl Into<String>) {
        self.blocks.push(Block::Heading(level, text.into()));
    }

    /// Appends a paragraph.
    pub(crate) fn para(&mut self, text: impl Into<String>) {
        self.blocks.push(Block::Para(text.into()));
    }

    /// Appends a table.
    pub(crate) fn table(&mut self, table: Table) {
        self.blocks.push(Block::Table(table));
    }

    /// Appends a bulleted list.
    pub(crate) fn list(&mut self, items: Vec<String>) {
        self.blocks.push(Block::List(items));
    }

    /// Appends a list of findings: each a short lead (the need) and what the data say.
    pub(crate) fn findings(&mut self, items: Vec<(String, String)>) {
        self.blocks.push(Block::Findings(items));
    }

    /// Appends facts as `what: value` pairs (the provenance header).
    pub(crate) fn facts(&mut self, facts: Vec<(String, String)>) {
        if !facts.is_empty() {
            self.blocks.push(Block::Facts(facts));
        }
    }

    /// Appends a table of contents: a link to every level-2 heading of the document, however
    /// many come after it (the outputs list them when they render).
    pub(crate) fn contents(&mut self) {
        self.blocks.push(Block::Contents);
    }

    /// Appends `table`, folded under `summary` when it is longer than [`FOLD_ROWS`] rows.
    pub(crate) fn table_folded(&mut self, summary: impl Into<String>, table: Table) {
        if table.rows.len() > FOLD_ROWS {
            let mut inner = Document::default();
            inner.table(table);
            self.details(
                format!("{} ({} rows)", summary.into(), inner_rows(&inner)),
                inner,
            );
        } else {
            self.table(table);
        }
    }

    /// Appends figures shown side by side where the output can (HTML); others leave them out.
    pub(crate) fn figures(&mut self, figures: Vec<Figure>) {
        if !figures.is_empty() {
            self.blocks.push(Block::Figures(figures));
        }
    }

    /// Appends a section folded under `summary` where the output can (HTML `<details>`); others
    /// show `summary` as a level-3 heading with the blocks under it.
    pub(crate) fn details(&mut self, summary: impl Into<String>, inner: Document) {
        self.blocks
            .push(Block::Details(summary.into(), inner.blocks));
    }

    /// Appends the closing sections every report has: `Warnings` (only when there are any),
    /// then `Caveats`.
    pub(crate) fn warnings_and_caveats(&mut self, warnings: Vec<String>, caveats: &[String]) {
        if !warnings.is_empty() {
            self.heading(2, "Warnings");
            self.list(warnings);
        }
        self.heading(2, "Caveats");
        self.list(caveats.to_vec());
    }
}

/// Tables longer than this are folded ([`Document::table_folded`]): a reader sees the first
/// screen whole and opens what they want.
pub(crate) const FOLD_ROWS: usize = 8;

fn inner_rows(d: &Document) -> usize {
    d.blocks
        .iter()
        .map(|b| match b {
            Block::Table(t) => t.rows.len(),
            _ => 0,
        })
        .sum()
}

/// The anchor of a heading, as GitHub makes it for Markdown (lowercase; letters, digits,
/// `-` and `_` kept, spaces made `-`, everything else dropped), so that the HTML page and
/// `comparison.md` share their links.
pub(crate) fn anchor(text: &str) -> String {
    text.chars()
        .flat_map(char::to_lowercase)
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The level-2 headings of `blocks`, in order (for a table of contents).
pub(crate) fn sections(blocks: &[Block]) -> Vec<&str> {
    blocks
        .iter()
        .filter_map(|b| match b {
            Block::Heading(2, text) => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// One block of a [`Document`]. Text is plain: each output escapes it as its format needs.
#[derive(Debug)]
pub(crate) enum Block {
    /// A heading: its level (1 is the title) and text.
    Heading(usize, String),
    /// A paragraph.
    Para(String),
    /// A table.
    Table(Table),
    /// A bulleted list.
    List(Vec<String>),
    /// Findings: (lead, text) pairs, the lead set in bold.
    Findings(Vec<(String, String)>),
    /// Figures side by side (HTML only).
    Figures(Vec<Figure>),
    /// A folded section: its summary line and its blocks.
    Details(String, Vec<Block>),
    /// `what: value` pairs (the provenance header).
    Facts(Vec<(String, String)>),
    /// A table of contents: links to the document's level-2 headings.
    Contents,
}

/// A table of text cells under a header. Outputs align the first column left and the others
/// right (they hold figures).
#[derive(Debug)]
pub(crate) struct Table {
    pub(crate) header: Vec<String>,
    pub(crate) rows: Vec<Vec<String>>,
}

impl Table {
    pub(crate) fn new(header: &[&str]) -> Self {
        Table {
            header: header.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    pub(crate) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }
}

/// A figure with two decimals.
pub(crate) fn f2(x: f64) -> String {
    format!("{x:.2}")
}

/// A figure with three decimals.
pub(crate) fn f3(x: f64) -> String {
    format!("{x:.3}")
}

/// A figure with `digits` decimals, or `-` when absent.
pub(crate) fn opt(x: Option<f64>, digits: usize) -> String {
    x.map_or_else(|| "-".to_owned(), |v| format!("{v:.digits$}"))
}

/// Bytes as GiB with two decimals, or `-` when absent (signed: a headroom can be negative).
pub(crate) fn gib<T: Into<i128>>(bytes: Option<T>) -> String {
    opt(bytes.map(|b| b.into() as f64 / BYTES_PER_GIB), 2)
}

/// A workload mix as people say it: `1 infer, 6 train`.
pub(crate) fn mix(m: &BTreeMap<Workload, u32>) -> String {
    m.iter()
        .map(|(w, n)| format!("{n} {w}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A plot with its caption, for outputs that can show one (HTML).
#[derive(Debug)]
pub(crate) struct Figure {
    /// The plot as an SVG element (or a short HTML note where it could not be drawn).
    pub(crate) svg: String,
    /// What it shows, plain text.
    pub(crate) caption: String,
}

/// `train resnet50` (the workload and its group's model, where known).
pub(crate) fn group_label(workload: Workload, model: Option<&str>) -> String {
    model.map_or_else(|| workload.to_string(), |m| format!("{workload} {m}"))
}
