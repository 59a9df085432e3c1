//! A run's per-backend series (`backend_intervals`) as two plots side by side: each backend's
//! calls/s and its p99 over time, the intervals where it failed calls ringed in red, and the
//! calls that found no ready backend as a line of their own. The addresses' legend is one
//! line of the page above both plots: nine addresses inside a plot hid half of it.
use super::{time_axis, Run, H, W};
use crate::report::svg::{esc, latency_us, num, Axis, Mark, Plot};
use crate::result::backend_intervals::{BackendIntervals, BackendSeries};
use std::fmt::Write as _;

/// Backends' colours: Tableau 10 without its red (failures are red) and its grey (the folded
/// line's), one for each of the `BACKEND_LINES` lines.
const COLORS: [&str; 8] = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22"];
/// The folded line's colour: grey, apart from every backend's own.
const OTHERS: &str = "#7f7f7f";
const FAILED: &str = "#c0392b";

/// The section's heading, legend and plots; nothing for a run not broken down by backend.
pub(super) fn backend_plots(i: usize, r: &Run) -> String {
    let Some(b) = r.backend_intervals.as_ref().filter(|b| !b.lines.is_empty()) else { return String::new() };
    // Each interval's end and length, which every line's values are aligned with.
    let times: Vec<(f64, f64)> = r.intervals.iter().map(|p| (p.t_s, p.length_s)).collect();
    let mut s = String::from("<h3>By backend, interval by interval</h3><p class=\"small\" id=\"backend-legend-");
    let _ = write!(s, "{i}\">");
    for (k, line) in b.lines.iter().enumerate() {
        let _ = write!(
            s,
            "<span style=\"white-space:nowrap;margin-right:14px\"><span class=\"swatch\" style=\"background:{}\"></span>{}</span> ",
            line_color(k, line),
            esc(&line.backend)
        );
    }
    s.push_str("<br>A red ring marks an interval in which the backend failed calls (its statuses on hover).</p>");
    s.push_str("<div class=\"grid\">");
    s.push_str(&rate_plot(i, b, &times));
    s.push_str(&p99_plot(i, b, &times));
    s.push_str("</div>\n");
    s
}

fn line_color(k: usize, line: &BackendSeries) -> &'static str {
    if line.backends.is_some() {
        OTHERS
    } else {
        COLORS[k % COLORS.len()]
    }
}

/// A per-interval count as a rate over the interval's length.
fn per_s(n: u64, length_s: f64) -> f64 {
    if length_s > 0.0 {
        n as f64 / length_s
    } else {
        f64::NAN
    }
}

/// Each backend's calls/s; rings where it failed calls; the calls without a backend dashed red.
fn rate_plot(i: usize, b: &BackendIntervals, times: &[(f64, f64)]) -> String {
    let rates = |counts: &[u64]| -> Vec<(f64, f64)> {
        times.iter().zip(counts).map(|(&(t, length), &n)| (t, per_s(n, length))).collect()
    };
    let lines: Vec<Vec<(f64, f64)>> = b.lines.iter().map(|l| rates(&l.calls)).collect();
    let no_backend = rates(&b.no_backend);
    let top = lines.iter().flatten().chain(&no_backend).map(|p| p.1).filter(|v| v.is_finite()).fold(0.0, f64::max);
    let y = Axis::linear(0.0, top.max(1.0) * 1.1, "calls/s (attempted)", num);
    let mut p = Plot::new(
        &format!("be-rps-{i}"),
        "plot-series plot-backends",
        "Calls/s per backend",
        W,
        H,
        time_axis(times.iter().map(|t| t.0)),
        y,
    );
    let mut any_failed = false;
    for (k, (line, points)) in b.lines.iter().zip(&lines).enumerate() {
        p.line(points, line_color(k, line), 2.0, false);
        for (j, &(t, rate)) in points.iter().enumerate() {
            let failed = line.failed_at(j);
            if failed > 0 {
                p.ring(t, rate, 5.0, FAILED, Some(&failed_tip(line, j, t)));
                any_failed = true;
            }
        }
    }
    if b.no_backend.iter().any(|&n| n > 0) {
        p.line(&no_backend, FAILED, 2.0, true);
        p.legend("no ready backend (failed)", FAILED, Mark::Dashed);
    }
    if any_failed {
        p.legend("interval with failed calls", FAILED, Mark::Ring);
    }
    if times.is_empty() {
        p.centered_note("no interval series in this file");
    }
    p.finish()
}

/// "10.0.0.2:50051 at 3 s: 12 of 40 failed (UNAVAILABLE 12)".
fn failed_tip(line: &BackendSeries, j: usize, t: f64) -> String {
    let statuses: Vec<String> = line
        .failed
        .iter()
        .filter_map(|(status, column)| column.get(j).filter(|&&n| n > 0).map(|n| format!("{status} {n}")))
        .collect();
    let calls = line.calls.get(j).copied().unwrap_or(0);
    format!("{} at {} s: {} of {calls} failed ({})", line.backend, num(t), line.failed_at(j), statuses.join(", "))
}

/// Each backend's p99 on a log axis (one slow backend among fast ones stays readable); a
/// gap where it had no calls.
fn p99_plot(i: usize, b: &BackendIntervals, times: &[(f64, f64)]) -> String {
    let lines: Vec<Vec<(f64, f64)>> = b
        .lines
        .iter()
        .map(|l| times.iter().zip(&l.p99_us).map(|(&(t, _), us)| (t, us.unwrap_or(f64::NAN))).collect())
        .collect();
    let values = || lines.iter().flatten().map(|p| p.1).filter(|v| v.is_finite() && *v > 0.0);
    let (lo, hi) = (values().fold(f64::INFINITY, f64::min), values().fold(0.0, f64::max));
    let y = if hi > 0.0 {
        Axis::log(lo * 0.8, hi * 1.25, "call latency p99 (log scale)", latency_us)
    } else {
        Axis::log(1.0, 1000.0, "call latency p99 (log scale)", latency_us)
    };
    let title = "p99 call latency per backend";
    let x = time_axis(times.iter().map(|t| t.0));
    let mut p = Plot::new(&format!("be-p99-{i}"), "plot-series plot-backends", title, W, H, x, y);
    for (k, (line, points)) in b.lines.iter().zip(&lines).enumerate() {
        p.line(points, line_color(k, line), 2.0, false);
    }
    if hi == 0.0 {
        p.centered_note("no calls reached a backend");
    }
    p.finish()
}
