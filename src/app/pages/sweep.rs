//! `sweep ... run -o FILE.html` (or `--format html`): the sweep on one page. What its table
//! cannot show is the shape: throughput (all calls, OK calls, the server's count) and latency
//! against the load, the knee marked where more load stops buying throughput, and failed and
//! unsent calls against the load, beside the steps' table; steps cut short are ringed and
//! left out of the knee, as the table says.
use super::super::sweep::{knee_of, knee_points, knee_text, Done};
use super::{boxed, page};
use crate::report::svg::{esc, latency_us, num, Axis, Mark, Plot, Scale};
use crate::stats::Statistic;
use crate::units;
use std::fmt::Write as _;

const ALL: &str = "#1f77b4";
const OK: &str = "#2a7";
const SERVER: &str = "#444";
const FAILED: &str = "#c0392b";
const UNSENT: &str = "#d68910";
const KNEE: &str = "#8e44ad";

pub(crate) fn render(done: &[Done], not_run: &[String], failed_step: Option<&str>) -> String {
    let mut body = match done.first() {
        Some(d) => format!(
            "<p class=\"meta\">{} · {} · {} step(s) run, {} not run</p>\n",
            esc(&d.result.target),
            esc(&d.result.call),
            done.len(),
            not_run.len()
        ),
        None => String::new(),
    };
    body += &boxed("failures", "alert", &problems(done, not_run, failed_step));
    body += &format!("<p><b>{}</b></p>\n", esc(knee_text(done).trim()));
    if !done.is_empty() {
        body += "<div class=\"grid\">";
        body += &throughput_plot(done);
        body += &latency_plot(done);
        body += &failures_plot(done);
        body += "</div>\n";
    }
    body += &table(done, not_run);
    page("rpcmeter sweep", &body)
}

/// What went wrong, step by step: failed calls, calls never sent, steps cut short or not run.
fn problems(done: &[Done], not_run: &[String], failed_step: Option<&str>) -> Vec<String> {
    let mut lines = Vec::new();
    for d in done {
        let q = &d.result.requests;
        if q.failed > 0 {
            let share = 100.0 * q.failed as f64 / q.total.max(1) as f64;
            lines.push(format!("{}: {} of {} calls failed ({share:.2}%).", d.step.label, q.failed, q.total));
        }
        if let Some(unsent) = q.unsent.filter(|&n| n > 0) {
            lines.push(format!("{}: {unsent} calls were due but never sent: the rate was not kept.", d.step.label));
        }
        if d.partial() {
            lines.push(format!(
                "{}: cut short ({}); left out of the knee.",
                d.step.label,
                d.result.meta.ended.as_str()
            ));
        }
    }
    if !not_run.is_empty() {
        lines.push(format!("Not run: {}.", not_run.join(", ")));
    }
    if let Some(why) = failed_step {
        lines.push(format!("Stopped: step {why}."));
    }
    lines
}

/// Loads spanning this many times or more are drawn on a log axis (a linear one would crowd
/// the first steps into its corner).
const LOG_SPAN: f64 = 30.0;

/// The load axis, its ticks at the steps' loads (a label each, where they do not crowd):
/// linear from 0, or log when the loads span `LOG_SPAN` times or more.
fn load_axis(done: &[Done]) -> Axis {
    let (lo, hi) = done.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), d| (lo.min(d.step.load), hi.max(d.step.load)));
    let hi = hi.max(1.0);
    let log = lo > 0.0 && hi / lo >= LOG_SPAN;
    let (min, max, scale) = if log { (lo / 1.3, hi * 1.3, Scale::Log) } else { (0.0, hi * 1.08, Scale::Linear) };
    let at = |v: f64| if log { (v.ln() - min.ln()) / (max.ln() - min.ln()) } else { (v - min) / (max - min) };
    let mut last: Option<f64> = None;
    let ticks = done
        .iter()
        .map(|d| {
            let free = last.is_none_or(|l| (at(d.step.load) - at(l)).abs() >= 0.06);
            if free {
                last = Some(d.step.load);
            }
            (d.step.load, free.then(|| num(d.step.load)))
        })
        .collect();
    let title = if log { "load (clients or calls/s; log scale)" } else { "load (clients or calls/s)" };
    Axis::with_ticks(min, max, scale, ticks, title)
}

/// A plot against the load, with the knee marked and the steps cut short ringed on `y`.
fn plot(id: &str, title: &str, done: &[Done], y: Axis) -> Plot {
    let mut p = Plot::new(id, "plot-sweep", title, 620.0, 320.0, load_axis(done), y);
    if let Some(k) = knee_of(&knee_points(done)) {
        p.vline(done[k].step.load, KNEE, &format!("knee: {}", done[k].step.label));
    }
    p
}

fn line(p: &mut Plot, done: &[Done], value: &dyn Fn(&Done) -> Option<f64>, color: &str, dashed: bool, what: &str) {
    let points: Vec<(f64, f64)> = done.iter().filter_map(|d| value(d).map(|v| (d.step.load, v))).collect();
    p.line(&points, color, 2.0, dashed);
    for d in done {
        if let Some(v) = value(d) {
            let tip = format!("{}: {what} {}", d.step.label, num(v));
            p.dot(d.step.load, v, 4.0, color, Some(&tip));
            if d.partial() {
                p.ring(d.step.load, v, 8.0, UNSENT, Some(&format!("{}: cut short, not in the knee", d.step.label)));
            }
        }
    }
}

fn throughput_plot(done: &[Done]) -> String {
    let server = |d: &Done| d.result.server.as_ref().and_then(|s| s.throughput_rps);
    let top = done
        .iter()
        .map(|d| d.result.throughput_rps.max(server(d).unwrap_or(0.0)))
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let y = Axis::linear(0.0, top.max(1.0) * 1.15, "throughput (calls/s)", num);
    let mut p = plot("sweep-throughput", "Throughput against load", done, y);
    // Top left: empty under a curve that rises with the load (a segment has no marks).
    p.legend_left = true;
    line(&mut p, done, &|d| Some(d.result.throughput_rps), ALL, false, "calls/s");
    line(&mut p, done, &|d| Some(d.result.ok_calls_per_s()), OK, true, "OK calls/s");
    p.legend("all calls/s", ALL, Mark::Line);
    p.legend("OK calls/s (the knee's)", OK, Mark::Dashed);
    if done.iter().any(|d| server(d).is_some()) {
        line(&mut p, done, &server, SERVER, true, "server calls/s");
        p.legend("server-side calls/s", SERVER, Mark::Dashed);
    }
    legend_partial(&mut p, done);
    p.finish()
}

fn latency_plot(done: &[Done]) -> String {
    let at = |d: &Done, q: f64| d.result.latency_us.micros(Statistic::Percentile(q)).filter(|us| *us > 0.0);
    let values = done.iter().flat_map(|d| [at(d, 50.0), at(d, 99.0)]).flatten();
    let (lo, hi) = values.fold((f64::INFINITY, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let y = Axis::log(lo, hi, "call latency (log scale)", latency_us);
    let mut p = plot("sweep-latency", "Latency against load", done, y);
    line(&mut p, done, &|d| at(d, 50.0), ALL, false, "p50 µs");
    line(&mut p, done, &|d| at(d, 99.0), FAILED, true, "p99 µs");
    p.legend("p50", ALL, Mark::Line);
    p.legend("p99", FAILED, Mark::Dashed);
    legend_partial(&mut p, done);
    p.finish()
}

fn failures_plot(done: &[Done]) -> String {
    let failed = |d: &Done| d.result.requests.failed as f64;
    let unsent = |d: &Done| d.result.requests.unsent.unwrap_or(0) as f64;
    let top = done.iter().map(|d| failed(d).max(unsent(d))).fold(0.0, f64::max);
    let y = Axis::linear(0.0, top.max(1.0) * 1.15, "calls", num);
    let mut p = plot("sweep-failures", "Failed and unsent calls against load", done, y);
    line(&mut p, done, &|d| Some(failed(d)), FAILED, false, "failed");
    p.legend("failed calls", FAILED, Mark::Line);
    if done.iter().any(|d| unsent(d) > 0.0) {
        line(&mut p, done, &|d| Some(unsent(d)), UNSENT, true, "unsent");
        p.legend("due, never sent", UNSENT, Mark::Dashed);
    }
    if top == 0.0 {
        p.centered_note("no failed or unsent calls");
    }
    p.finish()
}

fn legend_partial(p: &mut Plot, done: &[Done]) {
    if done.iter().any(Done::partial) {
        p.legend("cut short (not in the knee)", UNSENT, Mark::Ring);
    }
}

/// The steps' table, as `sweep` prints it.
fn table(done: &[Done], not_run: &[String]) -> String {
    let mut s = String::from(
        "<h2>Steps</h2>\n<div class=\"wide\"><table id=\"steps\"><tr><th>step</th><th>calls</th><th>calls/s</th>\
         <th>OK calls/s</th><th>server calls/s</th><th>p50</th><th>p99</th><th>failed</th><th>unsent</th>\
         <th>retries</th><th>ended</th></tr>\n",
    );
    let knee = knee_of(&knee_points(done));
    for (i, d) in done.iter().enumerate() {
        let r = &d.result;
        let latency = |p: f64| r.latency_us.get(Statistic::Percentile(p)).map_or("–".into(), units::duration);
        let server = r.server.as_ref().and_then(|v| v.throughput_rps).map_or("–".to_string(), |x| format!("{x:.1}"));
        let bad = |n: u64| if n > 0 { "n bad" } else { "n" };
        let (failed, unsent) = (r.requests.failed, r.requests.unsent.unwrap_or(0));
        let row = if d.partial() { " class=\"run-interrupted\"" } else { "" };
        let mut ended = if d.partial() { format!("cut short ({})", r.meta.ended.as_str()) } else { "whole".into() };
        if knee == Some(i) {
            ended += " · the knee";
        }
        let _ = writeln!(
            s,
            "<tr{row}><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{:.1}</td><td class=\"n\">{:.1}</td>\
             <td class=\"n\">{server}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"{}\">{failed}</td>\
             <td class=\"{}\">{unsent}</td><td class=\"n\">{}</td><td>{}</td></tr>",
            esc(&d.step.label),
            r.requests.total,
            r.throughput_rps,
            r.ok_calls_per_s(),
            latency(50.0),
            latency(99.0),
            bad(failed),
            bad(unsent),
            r.requests.retries.unwrap_or(0),
            esc(&ended),
        );
    }
    for label in not_run {
        let _ = writeln!(s, "<tr class=\"run-failed\"><td>{}</td><td colspan=\"10\">not run</td></tr>", esc(label));
    }
    s + "</table></div>\n"
}
