//! `history --format html` / `history -o FILE.html`: the recorded runs' trend on one page:
//! OK throughput, p50 and p99 of OK calls and the error rate, run after run (oldest first),
//! each `call @ target` its own colour, failed runs (no call OK, an --assert breached) and
//! runs cut short (interrupted, a drain that ran out) marked in every plot and in the table.
use super::{boxed, notes, page};
use crate::report::html::color;
use crate::report::svg::{esc, latency_us, num, Axis, Mark, Plot, Scale};
use crate::result::Run;
use crate::stats::Statistic;
use std::fmt::Write as _;
use std::path::Path;

const FAILED: &str = "#c0392b";
const INTERRUPTED: &str = "#d68910";
/// Most run ids labelled on the run axis; the others are ticks without a label.
const LABELS: usize = 12;

/// How a run ended, when not well.
#[derive(Debug, Clone, PartialEq)]
enum Ending {
    /// No call OK, or an --assert breached: the run exited 1.
    Failed(String),
    /// Cut short: Ctrl-C, a drain that ran out, a partial merge.
    Interrupted(String),
}

/// One recorded run, as the trend reads it.
struct Point {
    id: i64,
    started: String,
    name: String,
    /// `call @ target`: runs of one group are joined by a line.
    group: String,
    calls: u64,
    ok: u64,
    failed: u64,
    throughput: f64,
    ok_rps: f64,
    /// Of OK calls when the result has them, else of every call; None without a value.
    p50_us: Option<f64>,
    p99_us: Option<f64>,
    mark: Option<Ending>,
}

impl Point {
    fn of(id: i64, r: &Run) -> Point {
        let latency = r.ok_latency_us.as_ref().unwrap_or(&r.latency_us);
        let stat = |p: f64| latency.micros(Statistic::Percentile(p)).filter(|us| us.is_finite() && *us > 0.0);
        let q = &r.requests;
        Point {
            id,
            started: r.meta.started_at.as_deref().map_or(String::new(), |t| t.get(..19).unwrap_or(t).replace('T', " ")),
            name: r.meta.name.clone().unwrap_or_default(),
            group: format!("{} @ {}", r.call, r.target),
            calls: q.total,
            ok: q.ok,
            failed: q.failed,
            throughput: r.throughput_rps,
            ok_rps: r.ok_calls_per_s(),
            p50_us: stat(50.0).filter(|_| q.ok > 0),
            p99_us: stat(99.0).filter(|_| q.ok > 0),
            mark: mark(r),
        }
    }

    fn error_rate(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.failed as f64 / self.calls as f64
        }
    }
}

/// Why a run failed (as `run` exits 1) or ended short; None for a run that went well.
fn mark(r: &Run) -> Option<Ending> {
    let q = &r.requests;
    if q.total == 0 {
        return Some(Ending::Failed("no call was answered".into()));
    }
    if q.ok == 0 {
        return Some(Ending::Failed(format!("every call failed ({} of {})", q.failed, q.total)));
    }
    let breached: Vec<String> =
        r.assertions.iter().flatten().filter(|a| !a.ok).map(|a| format!("{} (was {})", a.assertion, a.value)).collect();
    if !breached.is_empty() {
        return Some(Ending::Failed(format!("--assert breached: {}", breached.join(", "))));
    }
    r.partial().then(|| Ending::Interrupted(r.meta.ended.as_str().to_string()))
}

/// The page: `runs` oldest first, each its id and its result (or why it could not be read).
pub fn render(history: &Path, runs: &[(i64, Result<Run, String>)]) -> String {
    let title = "rpcmeter history: the trend of the recorded runs";
    let points: Vec<Point> = runs.iter().filter_map(|(id, r)| r.as_ref().ok().map(|r| Point::of(*id, r))).collect();
    let unread: Vec<String> =
        runs.iter().filter_map(|(id, r)| r.as_ref().err().map(|why| format!("#{id}: not drawn: {why}"))).collect();
    let mut body = format!(
        "<p class=\"meta\">{} run(s) of {}, oldest first.</p>\n",
        points.len(),
        esc(&history.display().to_string())
    );
    if points.is_empty() {
        body += &format!("<p>No runs recorded in {}.</p>\n", esc(&history.display().to_string()));
        body += &notes("Not drawn", &unread);
        return page(title, &body);
    }
    let bad: Vec<String> = points
        .iter()
        .filter_map(|p| match &p.mark {
            Some(Ending::Failed(why)) => Some(format!("#{} failed: {why}.", p.id)),
            Some(Ending::Interrupted(how)) => {
                Some(format!("#{} ended early ({how}): its numbers cover part of the run.", p.id))
            }
            None => None,
        })
        .collect();
    body += &boxed("failures", "alert", &bad);
    let groups = groups(&points);
    body += "<div class=\"grid\">";
    body += &throughput_plot(&points, &groups);
    body += &latency_plot(&points, &groups);
    body += &error_plot(&points);
    body += "</div>\n";
    body += &table(&points, &groups);
    let mut how = vec![
        "Latency is of OK calls (results older than ok_latency_us: of every call); a run without an OK call has none."
            .to_string(),
        "A failed run (no call OK, or an --assert breached) is shaded red, a run cut short orange.".to_string(),
    ];
    if groups.len() > 1 {
        how.push(format!(
            "The runs call {} methods or targets: each its own colour, and its runs joined by a line; compare runs of \
             one with `rpcmeter compare`.",
            groups.len()
        ));
    }
    how.extend(unread);
    body += &notes("Notes", &how);
    page(title, &body)
}

/// The distinct `call @ target` of the runs, in order of first appearance.
fn groups(points: &[Point]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for p in points {
        if !out.contains(&p.group) {
            out.push(p.group.clone());
        }
    }
    out
}

fn group_color(groups: &[String], group: &str) -> &'static str {
    color(groups.iter().position(|g| g == group).unwrap_or(0))
}

/// The run axis: one position a run, oldest left; at most `LABELS` ids labelled.
fn run_axis(points: &[Point]) -> Axis {
    let every = points.len().div_ceil(LABELS).max(1);
    let ticks = points
        .iter()
        .enumerate()
        .map(|(i, p)| (i as f64, (i % every == 0 || i + 1 == points.len()).then(|| format!("#{}", p.id))))
        .collect();
    Axis::with_ticks(-0.5, points.len() as f64 - 0.5, Scale::Linear, ticks, "run (oldest → newest)")
}

/// A plot over the runs with the failed and short runs shaded.
fn plot(id: &str, title: &str, points: &[Point], y: Axis) -> Plot {
    let mut p = Plot::new(id, "plot-trend", title, 620.0, 320.0, run_axis(points), y);
    let (mut failed, mut short) = (false, false);
    for (i, point) in points.iter().enumerate() {
        let x = i as f64;
        match &point.mark {
            Some(Ending::Failed(_)) => {
                p.band(x - 0.45, x + 0.45, FAILED, 0.18);
                failed = true;
            }
            Some(Ending::Interrupted(_)) => {
                p.band(x - 0.45, x + 0.45, INTERRUPTED, 0.22);
                short = true;
            }
            None => {}
        }
    }
    if failed {
        p.legend("failed run", FAILED, Mark::Area);
    }
    if short {
        p.legend("run cut short", INTERRUPTED, Mark::Area);
    }
    p
}

/// Each group's points of `value`, joined in run order.
fn group_lines(p: &mut Plot, points: &[Point], groups: &[String], value: &dyn Fn(&Point) -> Option<f64>, dashed: bool) {
    for group in groups {
        let c = group_color(groups, group);
        let line: Vec<(f64, f64)> = points
            .iter()
            .enumerate()
            .filter(|(_, pt)| &pt.group == group)
            .filter_map(|(i, pt)| value(pt).map(|v| (i as f64, v)))
            .collect();
        p.line(&line, c, if dashed { 1.6 } else { 2.0 }, dashed);
        for (i, pt) in points.iter().enumerate().filter(|(_, pt)| &pt.group == group) {
            if let Some(v) = value(pt) {
                let tip = format!("#{} {} {}: {}", pt.id, pt.name, pt.started, state(pt));
                if dashed {
                    p.ring(i as f64, v, 3.5, c, Some(&tip));
                } else {
                    p.dot(i as f64, v, 4.0, c, Some(&tip));
                }
            }
        }
    }
}

fn throughput_plot(points: &[Point], groups: &[String]) -> String {
    let top = points.iter().map(|p| p.throughput.max(p.ok_rps)).filter(|v| v.is_finite()).fold(0.0, f64::max);
    let y = Axis::linear(0.0, top.max(1.0) * 1.15, "calls/s", num);
    let mut p = plot("trend-throughput", "Throughput: OK calls/s (dashed: all calls/s)", points, y);
    group_lines(&mut p, points, groups, &|pt| Some(pt.ok_rps), false);
    if points.iter().any(|pt| pt.failed > 0) {
        group_lines(&mut p, points, groups, &|pt| Some(pt.throughput), true);
    }
    legend_groups(&mut p, groups);
    p.finish()
}

fn latency_plot(points: &[Point], groups: &[String]) -> String {
    let values = points.iter().flat_map(|p| [p.p50_us, p.p99_us]).flatten();
    let (lo, hi) = values.fold((f64::INFINITY, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let y = Axis::log(lo, hi, "latency of OK calls (log scale)", latency_us);
    let mut p = plot("trend-latency", "Latency: p50 (solid) and p99 (dashed)", points, y);
    group_lines(&mut p, points, groups, &|pt| pt.p50_us, false);
    group_lines(&mut p, points, groups, &|pt| pt.p99_us, true);
    if lo > hi {
        p.centered_note("no run has an OK call");
    }
    legend_groups(&mut p, groups);
    p.finish()
}

fn error_plot(points: &[Point]) -> String {
    let top = points.iter().map(|p| p.error_rate() * 100.0).fold(0.0, f64::max);
    let y = Axis::linear(0.0, (top * 1.15).clamp(1.0, 100.0), "calls failed (%)", |v| num(v) + "%");
    let mut p = plot("trend-errors", "Error rate", points, y);
    for (i, pt) in points.iter().enumerate().filter(|(_, pt)| pt.failed > 0) {
        let x = i as f64;
        let tip = format!("#{}: {} of {} calls failed ({:.2}%)", pt.id, pt.failed, pt.calls, pt.error_rate() * 100.0);
        p.rect(x - 0.3, x + 0.3, 0.0, pt.error_rate() * 100.0, FAILED, 0.85, Some(&tip));
    }
    if points.iter().all(|pt| pt.failed == 0) {
        p.centered_note("no failed calls");
    }
    p.legend("failed calls", FAILED, Mark::Area);
    p.finish()
}

fn legend_groups(p: &mut Plot, groups: &[String]) {
    if groups.len() > 1 {
        for (i, g) in groups.iter().enumerate().take(8) {
            p.legend(&crate::units::abridged(g, 40), color(i), Mark::Line);
        }
    }
}

/// A run's state in words: "completed", "failed: every call failed (20 of 20)".
fn state(p: &Point) -> String {
    match &p.mark {
        None => "completed".into(),
        Some(Ending::Failed(why)) => format!("failed: {why}"),
        Some(Ending::Interrupted(how)) => format!("cut short: {how}"),
    }
}

/// Every run drawn, newest first as `history list` prints them.
fn table(points: &[Point], groups: &[String]) -> String {
    let mut s = String::from(
        "<h2>Runs</h2>\n<div class=\"wide\"><table id=\"runs\"><tr><th>id</th><th>started (UTC)</th><th>name</th>\
         <th>call @ target</th><th>calls</th><th>OK</th><th>failed</th><th>error rate</th><th>OK calls/s</th>\
         <th>p50</th><th>p99</th><th>ended</th></tr>\n",
    );
    for p in points.iter().rev() {
        let (row, word) = match &p.mark {
            None => ("", "verdict v-no-change"),
            Some(Ending::Failed(_)) => (" class=\"run-failed\"", "verdict v-failed"),
            Some(Ending::Interrupted(_)) => (" class=\"run-interrupted\"", "verdict v-interrupted"),
        };
        let bad = if p.failed > 0 { "n bad" } else { "n" };
        let cell = |us: Option<f64>| us.map_or("–".into(), latency_us);
        let _ = writeln!(
            s,
            "<tr{row}><td>#{}</td><td>{}</td><td>{}</td><td class=\"wrap\"><span class=\"swatch\" style=\"background:{}\"></span>{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"{bad}\">{}</td><td class=\"{bad}\">{:.2}%</td>\
             <td class=\"n\">{:.1}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"{word}\">{}</td></tr>",
            p.id,
            esc(&p.started),
            esc(&p.name),
            group_color(groups, &p.group),
            esc(&p.group),
            p.calls,
            p.ok,
            p.failed,
            p.error_rate() * 100.0,
            p.ok_rps,
            cell(p.p50_us),
            cell(p.p99_us),
            esc(&state(p)),
        );
    }
    s + "</table></div>\n"
}
