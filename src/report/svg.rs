//! Hand-written SVG for the HTML report: axes (linear or log10) with ticks and grid, lines,
//! bars, areas, dots and a legend, as plain strings. No fonts are measured here: the browser
//! lays out the text, so nothing depends on the fonts of the machine that writes the report.
use std::fmt::Write as _;

/// Escapes text for HTML and SVG (element content and quoted attributes alike); control
/// characters are written as `printable` writes them.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // A control character (from a server's message) is shown as its escape, never
            // raw: `report -o -` may write to a terminal. Newline and tab are layout.
            c if c != '\n' && c != '\t' && super::printable::unsafe_char(c) => {
                out.push_str(&super::printable::printable(c.encode_utf8(&mut [0; 4])))
            }
            c => out.push(c),
        }
    }
    out
}

/// A number with about three significant digits and no trailing zeros: `2.5`, `120`, `0.05`.
pub fn num(x: f64) -> String {
    let a = x.abs();
    let text = if a >= 100.0 || a == 0.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    };
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// A latency given in µs, in the unit that reads best: `250 µs`, `1.5 ms`, `2 s` (zero: `0`).
pub fn latency_us(us: f64) -> String {
    if us == 0.0 {
        "0".to_string()
    } else if us >= 1e6 {
        format!("{} s", num(us / 1e6))
    } else if us >= 1e3 {
        format!("{} ms", num(us / 1e3))
    } else {
        format!("{} µs", num(us))
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scale {
    Linear,
    Log,
}

/// One axis: its range, scale, ticks (a label, or none for a minor grid line) and title.
#[derive(Clone, Debug)]
pub struct Axis {
    pub min: f64,
    pub max: f64,
    pub scale: Scale,
    pub ticks: Vec<(f64, Option<String>)>,
    pub title: String,
}

/// A step of 1, 2, 2.5 or 5 times a power of ten, giving about `target` steps over `range`.
fn nice_step(range: f64, target: f64) -> f64 {
    let raw = range / target;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = match raw / magnitude {
        n if n <= 1.0 => 1.0,
        n if n <= 2.0 => 2.0,
        n if n <= 2.5 => 2.5,
        n if n <= 5.0 => 5.0,
        _ => 10.0,
    };
    step * magnitude
}

impl Axis {
    /// A linear axis over [min, max], widened to round ticks.
    pub fn linear(min: f64, max: f64, title: &str, label: impl Fn(f64) -> String) -> Axis {
        // Values from files can be near f64::MAX: widened to round ticks, the axis would end
        // at infinity and count infinitely many ticks.
        let (min, max) = (min.clamp(-1e300, 1e300), max.clamp(-1e300, 1e300));
        let (min, max) = if !(min.is_finite() && max.is_finite()) {
            (0.0, 1.0)
        } else if max - min <= f64::EPSILON * max.abs().max(1.0) {
            (min - 0.5 * min.abs().max(1.0), max + 0.5 * max.abs().max(1.0))
        } else {
            (min, max)
        };
        let step = nice_step(max - min, 5.0);
        let lo = (min / step).floor() * step;
        let hi = (max / step).ceil() * step;
        let n = (((hi - lo) / step).round() as usize).min(100);
        let ticks = (0..=n)
            .map(|i| {
                let v = lo + i as f64 * step;
                let v = if v.abs() < step * 1e-9 { 0.0 } else { v };
                (v, Some(label(v)))
            })
            .collect();
        Axis { min: lo, max: hi, scale: Scale::Linear, ticks, title: title.to_string() }
    }

    /// A log10 axis over [min, max] (both > 0), widened to whole decades; decades are
    /// labelled, and 2x and 5x too when the axis spans at most two decades.
    pub fn log(min: f64, max: f64, title: &str, label: impl Fn(f64) -> String) -> Axis {
        let min = if min.is_finite() && min > 0.0 { min } else { 1.0 };
        let max = if max.is_finite() && max > min { max } else { min * 10.0 };
        let lo = min.log10().floor() as i32;
        let mut hi = max.log10().ceil() as i32;
        if hi <= lo {
            hi = lo + 1;
        }
        let mut ticks = Vec::new();
        let few = hi - lo <= 2;
        for d in lo..=hi {
            let decade = 10f64.powi(d);
            ticks.push((decade, Some(label(decade))));
            if d == hi {
                break;
            }
            for m in 2..=9 {
                let v = decade * m as f64;
                ticks.push((v, (few && (m == 2 || m == 5)).then(|| label(v))));
            }
        }
        Axis { min: 10f64.powi(lo), max: 10f64.powi(hi), scale: Scale::Log, ticks, title: title.to_string() }
    }

    /// Explicit ticks over [min, max].
    pub fn with_ticks(min: f64, max: f64, scale: Scale, ticks: Vec<(f64, Option<String>)>, title: &str) -> Axis {
        Axis { min, max, scale, ticks, title: title.to_string() }
    }

    /// Where `v` falls on the axis, 0.0 at min and 1.0 at max (outside when out of range).
    /// Whether `v` lies on the axis, ends included.
    pub fn contains(&self, v: f64) -> bool {
        (self.min..=self.max).contains(&v)
    }

    pub fn frac(&self, v: f64) -> f64 {
        match self.scale {
            Scale::Linear => (v - self.min) / (self.max - self.min),
            Scale::Log => (v.max(self.min * 1e-3).log10() - self.min.log10()) / (self.max.log10() - self.min.log10()),
        }
    }
}

/// How a legend entry is drawn.
#[derive(Clone, Copy, Debug)]
pub enum Mark {
    Line,
    Dashed,
    Area,
    Dot,
    Ring,
}

/// One plot being drawn: an `<svg>` with a title, axes, and data clipped to the plot area.
pub struct Plot {
    id: String,
    body: String,
    legend: Vec<(String, String, Mark)>,
    /// Pixel positions of the data drawn, so the legend goes where it hides the fewest.
    marks: Vec<(f64, f64)>,
    pub width: f64,
    pub height: f64,
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
    pub x: Axis,
    pub y: Axis,
    /// Legend at the top left instead of the top right.
    pub legend_left: bool,
    /// Legend at the bottom instead of the top.
    pub legend_bottom: bool,
}

const FRAME: &str = "#444";
const GRID: &str = "#e3e3e3";
const MINOR: &str = "#f2f2f2";

impl Plot {
    /// A plot `width` x `height` (SVG units, scaled by the page) with an id and extra classes.
    pub fn new(id: &str, class: &str, title: &str, width: f64, height: f64, x: Axis, y: Axis) -> Plot {
        let mut p = Plot {
            id: id.to_string(),
            body: String::new(),
            legend: Vec::new(),
            marks: Vec::new(),
            width,
            height,
            left: 74.0,
            right: 34.0,
            top: 36.0,
            bottom: 50.0,
            x,
            y,
            legend_left: false,
            legend_bottom: false,
        };
        let _ = write!(
            p.body,
            r#"<svg id="{id}" class="plot {class}" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" aria-label="{t}"><title>{t}</title>"#,
            id = esc(id),
            class = esc(class),
            t = esc(title),
        );
        let _ = write!(
            p.body,
            r##"<rect x="0" y="0" width="{width}" height="{height}" fill="#fff"/><text class="title" x="{x}" y="22" text-anchor="middle">{t}</text>"##,
            x = width / 2.0,
            t = esc(title),
        );
        let _ = write!(
            p.body,
            r#"<clipPath id="{}-clip"><rect x="{}" y="{}" width="{}" height="{}"/></clipPath>"#,
            esc(id),
            p.left,
            p.top,
            p.plot_width(),
            p.plot_height()
        );
        p.axes();
        p
    }

    fn plot_width(&self) -> f64 {
        self.width - self.left - self.right
    }

    fn plot_height(&self) -> f64 {
        self.height - self.top - self.bottom
    }

    /// The x pixel of a data value.
    pub fn px(&self, x: f64) -> f64 {
        self.left + self.x.frac(x) * self.plot_width()
    }

    /// The y pixel of a data value.
    pub fn py(&self, y: f64) -> f64 {
        self.top + (1.0 - self.y.frac(y)) * self.plot_height()
    }

    fn axes(&mut self) {
        let (l, t, w, h) = (self.left, self.top, self.plot_width(), self.plot_height());
        let mut s = String::new();
        for (v, label) in &self.x.ticks {
            let x = self.px(*v);
            if !(l - 0.5..=l + w + 0.5).contains(&x) {
                continue;
            }
            let color = if label.is_some() { GRID } else { MINOR };
            let _ = write!(s, r#"<line x1="{x:.1}" y1="{t}" x2="{x:.1}" y2="{}" stroke="{color}"/>"#, t + h);
            if let Some(label) = label {
                let _ = write!(
                    s,
                    r#"<line x1="{x:.1}" y1="{b}" x2="{x:.1}" y2="{b5}" stroke="{FRAME}"/><text class="tick" x="{x:.1}" y="{ty}" text-anchor="middle">{}</text>"#,
                    esc(label),
                    b = t + h,
                    b5 = t + h + 5.0,
                    ty = t + h + 18.0,
                );
            }
        }
        for (v, label) in &self.y.ticks {
            let y = self.py(*v);
            if !(t - 0.5..=t + h + 0.5).contains(&y) {
                continue;
            }
            let color = if label.is_some() { GRID } else { MINOR };
            let _ = write!(s, r#"<line x1="{l}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="{color}"/>"#, l + w);
            if let Some(label) = label {
                let _ = write!(
                    s,
                    r#"<line x1="{l5}" y1="{y:.1}" x2="{l}" y2="{y:.1}" stroke="{FRAME}"/><text class="tick" x="{tx}" y="{ty:.1}" text-anchor="end">{}</text>"#,
                    esc(label),
                    l5 = l - 5.0,
                    tx = l - 8.0,
                    ty = y + 4.0,
                );
            }
        }
        let _ = write!(
            s,
            r#"<text class="axis" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            l + w / 2.0,
            self.height - 10.0,
            esc(&self.x.title)
        );
        let _ = write!(
            s,
            r#"<text class="axis" x="0" y="0" text-anchor="middle" transform="translate(16 {:.1}) rotate(-90)">{}</text>"#,
            t + h / 2.0,
            esc(&self.y.title)
        );
        self.body.push_str(&s);
    }

    fn clip(&self) -> String {
        format!(r#" clip-path="url(#{}-clip)""#, esc(&self.id))
    }

    /// A marker at a value on both axes is drawn whole, even on the frame (a point at the
    /// highest concurrency was cut in half); one off the axes is clipped.
    fn clip_outside(&self, x: f64, y: f64) -> String {
        if self.x.contains(x) && self.y.contains(y) {
            String::new()
        } else {
            self.clip()
        }
    }

    /// A line through the points; a non-finite value breaks it.
    pub fn line(&mut self, points: &[(f64, f64)], color: &str, width: f64, dashed: bool) {
        let mut d = String::new();
        let mut pen_down = false;
        for &(x, y) in points {
            if !(x.is_finite() && y.is_finite()) || (self.y.scale == Scale::Log && y <= 0.0) {
                pen_down = false;
                continue;
            }
            let (px, py) = (self.px(x), self.py(y));
            self.marks.push((px, py));
            let _ = write!(d, "{}{px:.1},{py:.1} ", if pen_down { "L" } else { "M" });
            pen_down = true;
        }
        if d.is_empty() {
            return;
        }
        let dash = if dashed { r#" stroke-dasharray="6 4""# } else { "" };
        let _ = write!(
            self.body,
            r#"<path d="{}" fill="none" stroke="{color}" stroke-width="{width}" stroke-linejoin="round"{dash}{}/>"#,
            d.trim_end(),
            self.clip()
        );
    }

    /// A rectangle in data coordinates, with an optional tooltip.
    #[allow(clippy::too_many_arguments)]
    pub fn rect(&mut self, x0: f64, x1: f64, y0: f64, y1: f64, fill: &str, opacity: f64, tip: Option<&str>) {
        let (a, b) = (self.px(x0), self.px(x1));
        let (c, d) = (self.py(y0), self.py(y1));
        // The corners and the middle of its top edge, where a bar's height is read.
        self.marks.extend([(a, c), (a, d), (b, c), (b, d), ((a + b) / 2.0, c.min(d))]);
        let _ = write!(
            self.body,
            r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{fill}" fill-opacity="{opacity}"{}>"#,
            a.min(b),
            c.min(d),
            (b - a).abs().max(0.5),
            (d - c).abs(),
            self.clip()
        );
        if let Some(tip) = tip {
            let _ = write!(self.body, "<title>{}</title>", esc(tip));
        }
        self.body.push_str("</rect>");
    }

    /// A band over the whole height between two x values (a phase, such as the warm-up).
    pub fn band(&mut self, x0: f64, x1: f64, fill: &str, opacity: f64) {
        let (a, b) = (self.px(x0), self.px(x1));
        let _ = write!(
            self.body,
            r#"<rect x="{:.1}" y="{}" width="{:.1}" height="{}" fill="{fill}" fill-opacity="{opacity}"{}/>"#,
            a.min(b),
            self.top,
            (b - a).abs(),
            self.plot_height(),
            self.clip()
        );
    }

    /// A dashed vertical line at `x`, with a label at its top unless the label is empty.
    pub fn vline(&mut self, x: f64, color: &str, label: &str) {
        let px = self.px(x);
        if !(self.left..=self.left + self.plot_width()).contains(&px) {
            return;
        }
        let _ = write!(
            self.body,
            r#"<line x1="{px:.1}" y1="{}" x2="{px:.1}" y2="{}" stroke="{color}" stroke-width="1.5" stroke-dasharray="5 3"/>"#,
            self.top,
            self.top + self.plot_height(),
        );
        // The line and its label are data a legend must not hide (a histogram's p99 and p99.9
        // lines were under it).
        let (top, bottom) = (self.top, self.top + self.plot_height());
        self.mark_every_8(top, |y| y <= bottom, |y| (px, y));
        let label_end = px + 4.0 + label.chars().count() as f64 * 6.4;
        self.mark_every_8(px + 4.0, |x| x < label_end, |x| (x, top + 10.0));
        if !label.is_empty() {
            let _ = write!(
                self.body,
                r#"<text class="note" x="{:.1}" y="{}" style="fill:{color}">{}</text>"#,
                px + 4.0,
                self.top + 14.0,
                esc(label)
            );
        }
    }

    /// Marks for the legend to avoid, every 8 units from `from` while `more`, at `at` of each:
    /// along a line or a label drawn as data (`vline`, `hline`).
    fn mark_every_8(&mut self, from: f64, more: impl Fn(f64) -> bool, at: impl Fn(f64) -> (f64, f64)) {
        let mut v = from;
        while more(v) {
            self.marks.push(at(v));
            v += 8.0;
        }
    }

    /// A dashed horizontal line across the plot at `y`, its label above its right end: data a
    /// legend must not hide, like `vline`'s (a mark every 8 units along both).
    pub fn hline(&mut self, y: f64, color: &str, label: &str) {
        let py = self.py(y);
        if !(self.top..=self.top + self.plot_height()).contains(&py) {
            return;
        }
        let (left, right) = (self.left, self.left + self.plot_width());
        let _ = write!(
            self.body,
            r#"<line x1="{left}" y1="{py:.1}" x2="{right}" y2="{py:.1}" stroke="{color}" stroke-width="1.6" stroke-dasharray="6 4"/>"#,
        );
        self.mark_every_8(left, |x| x <= right, |x| (x, py));
        let label_width = label.chars().count() as f64 * 6.4;
        self.mark_every_8(right - 4.0 - label_width, |x| x < right, |x| (x, py - 8.0));
        if !label.is_empty() {
            let _ = write!(
                self.body,
                r#"<text class="note" x="{:.1}" y="{:.1}" text-anchor="end" style="fill:{color}">{}</text>"#,
                right - 4.0,
                py - 4.0,
                esc(label)
            );
        }
    }

    /// A closed polygon in data coordinates.
    pub fn polygon(&mut self, points: &[(f64, f64)], fill: &str, opacity: f64, stroke: &str) {
        let mut d = String::new();
        for &(x, y) in points.iter().filter(|(x, y)| x.is_finite() && y.is_finite()) {
            let (px, py) = (self.px(x), self.py(y));
            self.marks.push((px, py));
            let _ = write!(d, "{px:.1},{py:.1} ");
        }
        let _ = write!(
            self.body,
            r#"<polygon points="{}" fill="{fill}" fill-opacity="{opacity}" stroke="{stroke}"{}/>"#,
            d.trim_end(),
            self.clip()
        );
    }

    /// A dot with an optional tooltip.
    pub fn dot(&mut self, x: f64, y: f64, r: f64, color: &str, tip: Option<&str>) {
        if !(x.is_finite() && y.is_finite()) {
            return;
        }
        let (px, py) = (self.px(x), self.py(y));
        self.marks.push((px, py));
        let _ = write!(
            self.body,
            r##"<circle cx="{px:.1}" cy="{py:.1}" r="{r}" fill="{color}" stroke="#fff" stroke-width="1"{}>"##,
            self.clip_outside(x, y)
        );
        if let Some(tip) = tip {
            let _ = write!(self.body, "<title>{}</title>", esc(tip));
        }
        self.body.push_str("</circle>");
    }

    /// An open circle (a marker that lets another one underneath show).
    pub fn ring(&mut self, x: f64, y: f64, r: f64, color: &str, tip: Option<&str>) {
        if !(x.is_finite() && y.is_finite()) {
            return;
        }
        let (px, py) = (self.px(x), self.py(y));
        self.marks.push((px, py));
        let _ = write!(
            self.body,
            r#"<circle cx="{px:.1}" cy="{py:.1}" r="{r}" fill="none" stroke="{color}" stroke-width="2"{}>"#,
            self.clip_outside(x, y)
        );
        if let Some(tip) = tip {
            let _ = write!(self.body, "<title>{}</title>", esc(tip));
        }
        self.body.push_str("</circle>");
    }

    /// A pixel-placed line segment in data coordinates (no clipping), e.g. a box plot's parts.
    pub fn segment(&mut self, (x0, y0): (f64, f64), (x1, y1): (f64, f64), color: &str, width: f64) {
        self.marks.extend([(self.px(x0), self.py(y0)), (self.px(x1), self.py(y1))]);
        let _ = write!(
            self.body,
            r#"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{color}" stroke-width="{width}"/>"#,
            self.px(x0),
            self.py(y0),
            self.px(x1),
            self.py(y1)
        );
    }

    /// Text at a data position.
    pub fn text(&mut self, x: f64, y: f64, anchor: &str, text: &str) {
        let _ = write!(
            self.body,
            r#"<text class="note" x="{:.1}" y="{:.1}" text-anchor="{anchor}">{}</text>"#,
            self.px(x),
            self.py(y),
            esc(text)
        );
    }

    /// Text in the middle of the plot area (e.g. "no failed calls").
    pub fn centered_note(&mut self, text: &str) {
        let _ = write!(
            self.body,
            r#"<text class="empty" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            self.left + self.plot_width() / 2.0,
            self.top + self.plot_height() / 2.0,
            esc(text)
        );
    }

    /// Adds a legend entry.
    pub fn legend(&mut self, label: &str, color: &str, mark: Mark) {
        self.legend.push((label.to_string(), color.to_string(), mark));
    }

    /// The corner of the plot for a legend `w` x `h`: the one covering the fewest data marks,
    /// the caller's choice (`legend_left`, `legend_bottom`) first among equals (a legend in
    /// the top right hid the last run's p99 and p99.9 dots).
    fn legend_place(&self, w: f64, h: f64) -> (f64, f64) {
        let (left, right) = (self.left + 8.0, self.left + self.plot_width() - w - 8.0);
        let (top, bottom) = (self.top + 8.0, self.top + self.plot_height() - h - 8.0);
        let x = |on_left: bool| if on_left { left } else { right };
        let y = |on_bottom: bool| if on_bottom { bottom } else { top };
        let (l, b) = (self.legend_left, self.legend_bottom);
        let corners = [(x(l), y(b)), (x(!l), y(b)), (x(l), y(!b)), (x(!l), y(!b))];
        // A mark counts with a margin of a dot's radius around the box.
        let hidden = |&(cx, cy): &(f64, f64)| {
            self.marks
                .iter()
                .filter(|(mx, my)| (cx - 6.0..=cx + w + 6.0).contains(mx) && (cy - 6.0..=cy + h + 6.0).contains(my))
                .count()
        };
        corners.into_iter().min_by_key(hidden).unwrap_or((x(l), y(b)))
    }

    /// The finished `<svg>`: frame and legend on top of the data.
    pub fn finish(mut self) -> String {
        let _ = write!(
            self.body,
            r#"<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="{FRAME}"/>"#,
            self.left,
            self.top,
            self.plot_width(),
            self.plot_height()
        );
        if !self.legend.is_empty() {
            // The browser lays the text out; 6.4 units a character fits DejaVu Sans at 12px.
            let longest = self.legend.iter().map(|(l, _, _)| l.chars().count()).max().unwrap_or(0) as f64;
            let w = 40.0 + longest * 6.4;
            let h = 8.0 + 17.0 * self.legend.len() as f64;
            let (x, y) = self.legend_place(w, h);
            let _ = write!(
                self.body,
                r##"<g class="legend"><rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}" fill="#fff" fill-opacity="0.85" stroke="#ccc"/>"##
            );
            for (i, (label, color, mark)) in self.legend.iter().enumerate() {
                let cy = y + 13.0 + 17.0 * i as f64;
                let (sx, ex) = (x + 6.0, x + 26.0);
                let swatch = match mark {
                    Mark::Line => format!(
                        r#"<line x1="{sx:.1}" y1="{cy:.1}" x2="{ex:.1}" y2="{cy:.1}" stroke="{color}" stroke-width="2.5"/>"#
                    ),
                    Mark::Dashed => format!(
                        r#"<line x1="{sx:.1}" y1="{cy:.1}" x2="{ex:.1}" y2="{cy:.1}" stroke="{color}" stroke-width="2" stroke-dasharray="5 3"/>"#
                    ),
                    Mark::Area => format!(
                        r#"<rect x="{sx:.1}" y="{:.1}" width="20" height="10" fill="{color}" fill-opacity="0.5"/>"#,
                        cy - 5.0
                    ),
                    Mark::Dot => format!(r#"<circle cx="{:.1}" cy="{cy:.1}" r="4" fill="{color}"/>"#, (sx + ex) / 2.0),
                    Mark::Ring => format!(
                        r#"<circle cx="{:.1}" cy="{cy:.1}" r="5" fill="none" stroke="{color}" stroke-width="2"/>"#,
                        (sx + ex) / 2.0
                    ),
                };
                let _ = write!(
                    self.body,
                    r#"{swatch}<text class="legend-text" x="{:.1}" y="{:.1}">{}</text>"#,
                    ex + 6.0,
                    cy + 4.0,
                    esc(label)
                );
            }
            self.body.push_str("</g>");
        }
        self.body.push_str("</svg>");
        self.body
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plot() -> Plot {
        let axis = |t| Axis::linear(0.0, 10.0, t, num);
        Plot::new("p", "", "t", 620.0, 320.0, axis("x"), axis("y"))
    }

    /// The legend leaves the top right when data sit there (it hid the last run's p99 dots).
    #[test]
    fn the_legend_goes_where_it_hides_no_data() {
        let mut p = plot();
        p.dot(9.8, 9.8, 4.0, "#000", None);
        p.dot(9.5, 9.0, 4.0, "#000", None);
        p.legend("p99", "#000", Mark::Dot);
        let (x, y) = p.legend_place(80.0, 25.0);
        assert!(x < p.px(5.0) || y > p.py(5.0), "legend at {x},{y} over the dots");
        // With nothing in the way the caller's corner stands: top right.
        let mut q = plot();
        q.dot(1.0, 1.0, 4.0, "#000", None);
        assert_eq!(q.legend_place(80.0, 25.0), (q.left + q.plot_width() - 88.0, q.top + 8.0));
    }

    /// A vertical marker line (a histogram's p99, p99.9) counts as data: the legend leaves
    /// the top right, where it hid the lines near the right edge.
    #[test]
    fn the_legend_does_not_hide_a_marker_line() {
        let mut p = plot();
        p.vline(9.0, "#000", "p99");
        p.vline(9.6, "#000", "p99.9");
        p.legend("calls", "#000", Mark::Area);
        let (w, h) = (80.0, 25.0);
        let (x, _) = p.legend_place(w, h);
        for line in [9.0, 9.6] {
            assert!(!(x - 6.0..=x + w + 6.0).contains(&p.px(line)), "legend at x {x} over the line at {}", p.px(line));
        }
    }

    /// A horizontal level (an open-loop run's throughput) and its label count as data: the
    /// legend asked for at the bottom goes to the top, where it hid neither.
    #[test]
    fn the_legend_does_not_hide_a_level_or_its_label() {
        let mut p = plot();
        p.legend_bottom = true;
        p.hline(0.5, "#000", "open500: 500.0 calls/s");
        p.legend("open loop at a rate (no concurrency)", "#888", Mark::Dashed);
        let (w, h) = (270.0, 25.0);
        let (_, y) = p.legend_place(w, h);
        assert!(y + h < p.py(0.5) - 20.0, "legend at y {y} over the level at {}", p.py(0.5));
        let svg = p.finish();
        assert!(svg.contains("text-anchor=\"end\" style=\"fill:#000\">open500: 500.0 calls/s</text>"), "{svg}");
    }

    /// A point on the frame (the highest concurrency) is drawn whole; one off the axes is clipped.
    #[test]
    fn a_marker_on_the_frame_is_not_cut() {
        let mut p = plot();
        p.dot(10.0, 5.0, 5.0, "#000", None);
        p.ring(20.0, 5.0, 5.0, "#000", None);
        let svg = p.finish();
        let circles: Vec<&str> = svg.split("<circle").skip(1).collect();
        assert!(!circles[0].split('>').next().unwrap().contains("clip-path"), "{}", circles[0]);
        assert!(circles[1].split('>').next().unwrap().contains("clip-path"), "{}", circles[1]);
    }

    #[test]
    fn escapes_markup() {
        assert_eq!(
            esc(r#"<script>alert("x&'y")</script>"#),
            "&lt;script&gt;alert(&quot;x&amp;&#39;y&quot;)&lt;/script&gt;"
        );
    }

    #[test]
    fn numbers_and_latencies_read_well() {
        assert_eq!(num(2.5), "2.5");
        assert_eq!(num(120.0), "120");
        assert_eq!(num(0.05), "0.05");
        assert_eq!(latency_us(250.0), "250 µs");
        assert_eq!(latency_us(1500.0), "1.5 ms");
        assert_eq!(latency_us(2e6), "2 s");
    }

    #[test]
    fn axes_round_to_nice_ticks() {
        let a = Axis::linear(0.0, 937.0, "", num);
        assert_eq!((a.min, a.max), (0.0, 1000.0));
        assert_eq!(a.ticks.iter().filter(|t| t.1.is_some()).count(), 6);
        let l = Axis::log(35.0, 4200.0, "", latency_us);
        assert_eq!((l.min, l.max), (10.0, 10_000.0));
        assert_eq!(
            l.ticks.iter().filter_map(|t| t.1.clone()).collect::<Vec<_>>(),
            ["10 µs", "100 µs", "1 ms", "10 ms"]
        );
        assert!((l.frac(100.0) - 1.0 / 3.0).abs() < 1e-9);
    }
}
