//! A few SVG primitives for the report's charts, written by hand rather than through a plotting
//! library so that every chart shares one look: the page's font (SVG text inherits it), few
//! grid lines, one colour per sharing policy, units on every axis, and a `<title>` on every mark
//! so that hovering shows the exact figure.
//!
//! Coordinates: a [`Panel`] maps data to pixels inside its plot area; [`Scale`] is linear or
//! log10. Nothing here decides what a chart shows ([`super::charts`] does).

use std::fmt::Write as _;

use super::html::escape_html;

/// A numeric axis: the data range and how it maps onto pixels.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Scale {
    /// Linear from `lo` to `hi`.
    Linear { lo: f64, hi: f64 },
    /// log10 from `lo` to `hi` (both positive).
    Log { lo: f64, hi: f64 },
}

impl Scale {
    /// Where `v` falls between the ends, 0 to 1 (outside when `v` is outside).
    fn frac(self, v: f64) -> f64 {
        match self {
            Scale::Linear { lo, hi } => {
                if hi > lo {
                    (v - lo) / (hi - lo)
                } else {
                    0.5
                }
            }
            Scale::Log { lo, hi } => {
                let (l, h) = (lo.max(f64::MIN_POSITIVE).log10(), hi.max(lo).log10());
                if h > l {
                    (v.max(f64::MIN_POSITIVE).log10() - l) / (h - l)
                } else {
                    0.5
                }
            }
        }
    }
}

/// "Nice" tick values for a linear axis from `lo` to `hi`: about `n` of them, at 1, 2 or 5
/// times a power of ten.
pub(crate) fn nice_ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) || n == 0 {
        return vec![lo];
    }
    let raw = (hi - lo) / n as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let mut out = Vec::new();
    let mut v = (lo / step).ceil() * step;
    while v <= hi + step * 1e-9 {
        out.push(if v.abs() < step * 1e-9 { 0.0 } else { v });
        v += step;
    }
    out
}

/// Tick values for a log axis from `lo` to `hi`: 1, 2 and 5 times powers of ten inside it.
pub(crate) fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let mut out = Vec::new();
    if lo <= 0.0 || hi <= lo || lo.is_nan() || hi.is_nan() {
        return out;
    }
    let mut p = 10f64.powf(lo.log10().floor());
    while p <= hi {
        for m in [1.0, 2.0, 5.0] {
            let v = p * m;
            if v >= lo * (1.0 - 1e-9) && v <= hi * (1.0 + 1e-9) {
                out.push(v);
            }
        }
        p *= 10.0;
    }
    out
}

/// A figure as people write it: `3,851`, `0.15`, `58.5`.
pub(crate) fn num(v: f64) -> String {
    let a = v.abs();
    if a >= 1000.0 {
        thousands(v)
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 || a == 0.0 {
        let s = format!("{v:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        format!("{v:.2}")
    }
}

/// A request rate as people write it: whole numbers without decimals (`25`, `16,000`), others
/// to one decimal (`848.5`), never rounded to a whole number the way [`num`] rounds figures
/// above 100 (a capacity of 848.5 requests/s is not 849).
pub(crate) fn rate(v: f64) -> String {
    coload_analysis::figures::tenths(v)
}

/// A tick label: whole numbers without decimals (`30`, `6,000`), others as [`num`] writes them.
pub(crate) fn tick(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        thousands(v)
    } else {
        num(v)
    }
}

/// `12,345` (rounded to a whole number).
pub(crate) fn thousands(v: f64) -> String {
    coload_analysis::figures::thousands(v)
}

/// An SVG document being written.
#[derive(Debug)]
pub(crate) struct Svg {
    width: f64,
    height: f64,
    body: String,
}

impl Svg {
    /// An empty drawing of `width` x `height` pixels, described by `label` for screen readers.
    pub(crate) fn new(width: f64, height: f64) -> Self {
        Svg {
            width,
            height,
            body: String::new(),
        }
    }

    /// Text at (x, y); `anchor` is `start`, `middle` or `end`; `class` picks the page's style.
    pub(crate) fn text(&mut self, x: f64, y: f64, anchor: &str, class: &str, text: &str) {
        let _ = writeln!(
            self.body,
            "<text x=\"{x:.1}\" y=\"{y:.1}\" text-anchor=\"{anchor}\" class=\"{class}\">{}</text>",
            escape_html(text)
        );
    }

    /// Text rotated -90 degrees about (x, y) (a y-axis title).
    pub(crate) fn vtext(&mut self, x: f64, y: f64, class: &str, text: &str) {
        let _ = writeln!(
            self.body,
            "<text x=\"{x:.1}\" y=\"{y:.1}\" text-anchor=\"middle\" class=\"{class}\" \
             transform=\"rotate(-90 {x:.1} {y:.1})\">{}</text>",
            escape_html(text)
        );
    }

    /// A straight line.
    pub(crate) fn line(&mut self, a: (f64, f64), b: (f64, f64), class: &str) {
        let _ = writeln!(
            self.body,
            "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" class=\"{class}\"/>",
            a.0, a.1, b.0, b.1
        );
    }

    /// A filled rectangle with a hover title.
    pub(crate) fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, color: &str, title: &str) {
        let _ = writeln!(
            self.body,
            "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{color}\">\
             <title>{}</title></rect>",
            w.max(0.0),
            h.max(0.0),
            escape_html(title)
        );
    }

    /// A polyline through `points` in `color`; `dash` draws it dashed.
    pub(crate) fn path(&mut self, points: &[(f64, f64)], color: &str, dash: bool, title: &str) {
        if points.is_empty() {
            return;
        }
        let mut d = String::new();
        for (i, (x, y)) in points.iter().enumerate() {
            let _ = write!(d, "{}{x:.1},{y:.1}", if i == 0 { "M" } else { " L" });
        }
        let _ = writeln!(
            self.body,
            "<path d=\"{d}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\"{}>\
             <title>{}</title></path>",
            if dash {
                " stroke-dasharray=\"6 4\""
            } else {
                ""
            },
            escape_html(title)
        );
    }

    /// A dot with a hover title; `hollow` leaves it unfilled.
    pub(crate) fn dot(&mut self, x: f64, y: f64, r: f64, color: &str, hollow: bool, title: &str) {
        let fill = if hollow { "#fff" } else { color };
        let _ = writeln!(
            self.body,
            "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"{r:.1}\" fill=\"{fill}\" stroke=\"{color}\" \
             stroke-width=\"1.5\"><title>{}</title></circle>",
            escape_html(title)
        );
    }

    /// A square marker centred on (x, y), `size` pixels wide, with a hover title; `hollow`
    /// leaves it unfilled.
    pub(crate) fn square(
        &mut self,
        x: f64,
        y: f64,
        size: f64,
        color: &str,
        hollow: bool,
        title: &str,
    ) {
        let fill = if hollow { "#fff" } else { color };
        let _ = writeln!(
            self.body,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{size:.1}\" height=\"{size:.1}\" \
             fill=\"{fill}\" stroke=\"{color}\" stroke-width=\"1.5\"><title>{}</title></rect>",
            x - size / 2.0,
            y - size / 2.0,
            escape_html(title)
        );
    }

    /// A legend entry: a swatch (a square, or a line when `line`) and its label; returns the
    /// x after it.
    pub(crate) fn legend_item(
        &mut self,
        x: f64,
        y: f64,
        color: &str,
        line: bool,
        label: &str,
    ) -> f64 {
        if line {
            self.line((x, y - 4.0), (x + 18.0, y - 4.0), "legend-line");
            let _ = writeln!(
                self.body,
                "<line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{color}\" \
                 stroke-width=\"2.5\"/>",
                y - 4.0,
                x + 18.0,
                y - 4.0
            );
        } else {
            let _ = writeln!(
                self.body,
                "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"12\" height=\"12\" fill=\"{color}\"/>",
                y - 10.0
            );
        }
        self.text(x + 22.0, y, "start", "legend", label);
        x + 22.0 + 7.5 * label.chars().count() as f64 + 18.0
    }

    /// The finished element, `role="img"` with `label` as its accessible name.
    pub(crate) fn finish(self, label: &str) -> String {
        format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" width=\"{w:.0}\" \
             height=\"{h:.0}\" viewBox=\"0 0 {w:.0} {h:.0}\" role=\"img\" aria-label=\"{}\">\n{}</svg>",
            escape_html(label),
            self.body,
            w = self.width,
            h = self.height
        )
    }
}

/// A plot area inside an [`Svg`]: pixel rectangle and the two scales.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Panel {
    /// Left, top, right, bottom of the plot area, pixels.
    pub(crate) left: f64,
    pub(crate) top: f64,
    pub(crate) right: f64,
    pub(crate) bottom: f64,
    pub(crate) x: Scale,
    pub(crate) y: Scale,
}

impl Panel {
    /// The pixel x of data `v`.
    pub(crate) fn px(&self, v: f64) -> f64 {
        self.left + self.x.frac(v) * (self.right - self.left)
    }

    /// The pixel y of data `v` (up is larger).
    pub(crate) fn py(&self, v: f64) -> f64 {
        self.bottom - self.y.frac(v) * (self.bottom - self.top)
    }

    /// Draws the y axis: horizontal grid lines at `ticks` (light), their labels, and the axis
    /// title (with its unit) rotated along the left edge; the x axis line along the bottom.
    pub(crate) fn y_axis(
        &self,
        svg: &mut Svg,
        ticks: &[f64],
        fmt: &dyn Fn(f64) -> String,
        title: &str,
    ) {
        for t in ticks {
            let y = self.py(*t);
            svg.line((self.left, y), (self.right, y), "grid");
            svg.text(self.left - 6.0, y + 4.0, "end", "tick", &fmt(*t));
        }
        svg.line((self.left, self.bottom), (self.right, self.bottom), "axis");
        svg.vtext(
            self.left - 52.0,
            f64::midpoint(self.top, self.bottom),
            "axis-title",
            title,
        );
    }

    /// Draws x tick labels at `ticks` under the axis, and the axis title (with its unit).
    /// Tick labels may hold one line break (`6 train\n+1 infer`): the second line goes under
    /// the first, and the axis title under both.
    pub(crate) fn x_axis(&self, svg: &mut Svg, ticks: &[(f64, String)], title: &str) {
        let mut lines = 1.0;
        for (v, label) in ticks {
            let x = self.px(*v);
            svg.line((x, self.bottom), (x, self.bottom + 4.0), "axis");
            for (i, line) in label.split('\n').enumerate() {
                let i = i as f64;
                svg.text(x, self.bottom + 18.0 + 13.0 * i, "middle", "tick", line);
                lines = f64::max(lines, i + 1.0);
            }
        }
        svg.text(
            f64::midpoint(self.left, self.right),
            self.bottom + 25.0 + 13.0 * lines,
            "middle",
            "axis-title",
            title,
        );
    }

    /// A dashed reference line across the panel at data y `v`, labelled just outside its
    /// right end (keep a margin of about 40 pixels there), so that no mark covers the label.
    pub(crate) fn reference(&self, svg: &mut Svg, v: f64, label: &str) {
        let y = self.py(v);
        svg.line((self.left, y), (self.right, y), "ref");
        svg.text(self.right + 4.0, y + 4.0, "start", "ref-label", label);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_numbers_inside_the_range() {
        assert_eq!(nice_ticks(0.0, 1.0, 4), [0.0, 0.25, 0.5, 0.75, 1.0]);
        assert_eq!(nice_ticks(0.0, 6200.0, 4), [0.0, 2000.0, 4000.0, 6000.0]);
        assert_eq!(log_ticks(0.8, 12.0), [1.0, 2.0, 5.0, 10.0]);
        assert!(log_ticks(0.0, 1.0).is_empty());
    }

    #[test]
    fn figures_read_as_people_write_them() {
        assert_eq!(num(3850.7), "3,851");
        assert_eq!(num(58.53), "58.5");
        assert_eq!(num(0.151), "0.15");
        assert_eq!(num(1.0), "1");
        assert_eq!(num(1.52), "1.52");
        assert_eq!(thousands(1_234_567.0), "1,234,567");
        assert_eq!(tick(30.0), "30");
        assert_eq!(tick(0.25), "0.25");
        assert_eq!(rate(25.0), "25");
        assert_eq!(rate(848.5), "848.5");
        assert_eq!(rate(16_000.0), "16,000");
        assert_eq!(rate(37.5), "37.5");
    }

    #[test]
    fn scales_map_the_ends_to_the_edges() {
        let p = Panel {
            left: 10.0,
            top: 0.0,
            right: 110.0,
            bottom: 100.0,
            x: Scale::Linear { lo: 0.0, hi: 10.0 },
            y: Scale::Log { lo: 1.0, hi: 100.0 },
        };
        assert!((p.px(5.0) - 60.0).abs() < 1e-9);
        assert!((p.py(10.0) - 50.0).abs() < 1e-9);
        assert!((p.py(100.0) - 0.0).abs() < 1e-9);
    }
}
