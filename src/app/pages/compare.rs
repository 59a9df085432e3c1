//! `compare --format html` / `compare -o FILE.html`: the comparison as one page. First what
//! was decided (a regression, metrics not judged and why, else that nothing regressed), then
//! what went wrong in the runs (failed and unsent calls, a frozen or late client, a run cut
//! short, a merge), the runs side by side, the verdict table as `compare` prints it, a
//! forest plot of B / A per metric with its interval and the band of no change that matters,
//! and how the comparison was made.
use super::super::compare::{
    change_cell, format_p, format_value, resolution_cell, Metric, MetricComparison, Report, RunResult, Verdict,
};
use super::{boxed, notes, page};
use crate::report::svg::{esc, Axis, Mark, Plot, Scale};
use crate::units;
use std::fmt::Write as _;

const REGRESSION: &str = "#c0392b";
const IMPROVEMENT: &str = "#1e8449";
const NO_CHANGE: &str = "#555";
const NOT_JUDGED: &str = "#d68910";
const BAND: &str = "#27ae60";

pub fn render(r: &Report) -> String {
    let mut body = String::new();
    body += &headline(r);
    body += &boxed("disturbed", "alert", &what_went_wrong(r));
    body += &runs_table(r);
    body += &verdict_table(r);
    body += "<h2>B / A per metric</h2>\n<div class=\"grid\">";
    body += &forest(r);
    body += &error_rate_plot(r);
    body += "</div>\n<p class=\"small\">Each dot is B against A (the geometric means of each side's runs), its bar \
             the interval at the metric's Holm level; the green band is the change too small to matter \
             (--min-effect): an interval inside it is \"no change\", one that reaches past it without excluding 1 \
             is \"not judged\", as is a latency faster or unchanged on a side whose runs failed more of their calls, \
             by 1 pp or more on average (its OK calls may leave its slowest out). Throughput is better to the right, \
             latency to the left.</p>\n";
    let mut how = vec![r.runs_text(), r.family_text()];
    how.extend(r.notes.iter().cloned());
    how.extend(r.warnings.iter().map(|w| format!("warning: {w}")));
    body += &notes("How this was compared", &how);
    page("rpcmeter compare: B against A", &body)
}

/// The decision, first: regressions in red, metrics not judged in orange, else in green.
fn headline(r: &Report) -> String {
    let regressions: Vec<String> =
        r.regressions().map(|m| format!("{}: {}", m.metric.label(), m.change_text())).collect();
    let unjudged: Vec<String> = r
        .not_judged()
        .map(|m| match &m.verdict {
            Verdict::NotJudged(why) => format!("Not judged: {}: {why}", m.metric.label()),
            _ => String::new(),
        })
        .collect();
    let mut s = String::new();
    if !regressions.is_empty() {
        s += &boxed("headline", "alert", &[format!("Regression: B is worse than A in {}.", regressions.join("; "))]);
    }
    s += &boxed("not-judged", "unknown", &unjudged);
    if regressions.is_empty() && unjudged.is_empty() {
        let verdicts: Vec<String> =
            r.metrics.iter().map(|m| format!("{}: {}", m.metric.label(), m.verdict_text())).collect();
        s += &boxed("headline", "good", &[format!("No regression: {}.", verdicts.join("; "))]);
    }
    s
}

/// Every run that did not run clean, named: its failed calls, and what its result says made
/// some of its numbers the client's (unsent calls, a freeze, late wake-ups) or the merge's.
fn what_went_wrong(r: &Report) -> Vec<String> {
    let mut lines = Vec::new();
    for (side, run) in sides(r) {
        let who = format!("{side}: {}", run.label);
        if run.calls > 0 && run.failed > 0 {
            let share = 100.0 * run.failed as f64 / run.calls as f64;
            lines.push(format!("{who}: {} of {} calls failed ({share:.2}%).", run.failed, run.calls));
        }
        if run.calls == 0 {
            lines.push(format!("{who}: no call was made."));
        }
        if run.partial {
            lines.push(format!("{who}: ended early (partial): its numbers cover only part of the run."));
        }
        for d in &run.disturbances {
            lines.push(format!("{who}: {}.", d.why));
        }
    }
    lines
}

fn sides(r: &Report) -> impl Iterator<Item = (&'static str, &RunResult)> {
    r.a.iter().map(|run| ("A", run)).chain(r.b.iter().map(|run| ("B", run)))
}

/// The runs of each side, failures beside successes.
fn runs_table(r: &Report) -> String {
    let mut s = String::from(
        "<h2>Runs</h2>\n<div class=\"wide\"><table id=\"runs\"><tr><th>side</th><th>result</th><th>name</th>\
         <th>started</th><th>calls</th><th>OK</th><th>failed</th><th>OK calls/s</th><th>p50</th><th>p99</th>\
         <th>state</th></tr>\n",
    );
    for (side, run) in sides(r) {
        let bad = |n: u64| if n > 0 { "n bad" } else { "n" };
        let mut state: Vec<String> = Vec::new();
        if run.partial {
            state.push("partial".into());
        }
        if run.merged_from > 0 {
            state.push(format!("merged from {}", run.merged_from));
        }
        if run.failed > 0 {
            state.push("calls failed".into());
        }
        if run.disturbances.iter().any(|d| d.client) {
            state.push("client disturbed".into());
        }
        let class = if state.is_empty() { "" } else { " class=\"run-failed\"" };
        let _ = writeln!(
            s,
            "<tr{class}><td>{side}</td><td class=\"wrap\">{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"{}\">{}</td><td class=\"n\">{:.1}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
            esc(&run.label),
            esc(run.name.as_deref().unwrap_or("")),
            esc(run.started_at.as_deref().unwrap_or("")),
            run.calls,
            run.ok,
            bad(run.failed),
            run.failed,
            run.ok_rps,
            units::duration(run.p50),
            units::duration(run.p99),
            esc(&if state.is_empty() { "clean".to_string() } else { state.join(", ") }),
        );
    }
    s + "</table></div>\n"
}

/// The class of a verdict's word: `v-regression`, `v-no-change`, ...
fn verdict_class(v: &Verdict) -> String {
    format!("verdict v-{}", v.key().replace(' ', "-"))
}

/// The table `compare` prints, with the verdict in its own column and why beside it.
fn verdict_table(r: &Report) -> String {
    let mut s = format!(
        "<h2>Verdicts</h2>\n<p class=\"small\">Each side's runs (geometric mean; OK calls only for throughput and \
         latency), B / A with its interval at the metric's Holm level (B − A in percentage points for the error \
         rate), the change it can resolve, Welch's t (p adjusted by Holm), alpha {}{}.</p>\n\
         <div class=\"wide\"><table id=\"verdicts\"><tr><th>metric</th><th>A</th><th>B</th><th>B / A [interval]</th>\
         <th>resolves</th><th>p (Holm)</th><th>verdict</th><th>why</th></tr>\n",
        r.alpha,
        r.min_effect.map_or(String::new(), |m| format!(", smallest change that matters {:.1}%", m * 100.0))
    );
    for m in &r.metrics {
        let sides = m.sides();
        let show = |x: Option<f64>| x.map_or("–".into(), |x| format_value(m.metric.value(x)));
        let _ = writeln!(
            s,
            "<tr id=\"verdict-{}\"><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"{}\">{}</td><td>{}</td></tr>",
            m.metric.key(),
            esc(m.metric.label()),
            esc(&show(sides.map(|s| s.0))),
            esc(&show(sides.map(|s| s.1))),
            esc(&change_cell(m)),
            esc(&resolution_cell(m)),
            m.p_adjusted.map_or("–".into(), format_p),
            verdict_class(&m.verdict),
            m.verdict.key(),
            esc(&why(m)),
        );
    }
    s + "</table></div>\n"
}

/// Why a metric got its verdict, in words.
fn why(m: &MetricComparison) -> String {
    match &m.verdict {
        Verdict::NotJudged(why) => why.clone(),
        Verdict::Regression | Verdict::Improvement => m.change_text(),
        Verdict::NoChange => match m.shift.filter(|s| s.significant()) {
            Some(_) => format!("{}, smaller than --min-effect {}", m.change_text(), m.amount(m.matters)),
            None => format!("the interval rules out a change of {} or more", m.amount(m.matters)),
        },
    }
}

fn verdict_color(v: &Verdict) -> &'static str {
    match v {
        Verdict::Regression => REGRESSION,
        Verdict::Improvement => IMPROVEMENT,
        Verdict::NoChange => NO_CHANGE,
        Verdict::NotJudged(_) => NOT_JUDGED,
    }
}

/// Ratios a reader knows, as the ratio axis's ticks, the most telling first: each is
/// labelled when no earlier one is within `TICK_GAP` of it (the axis's share), else a grid line.
const RATIO_TICKS: [f64; 17] =
    [1.0, 0.1, 10.0, 0.5, 2.0, 0.01, 100.0, 0.001, 1000.0, 0.2, 5.0, 0.8, 1.25, 0.9, 1.1, 0.67, 1.5];
const TICK_GAP: f64 = 0.07;

fn ratio_ticks(lo: f64, hi: f64) -> Vec<(f64, Option<String>)> {
    let at = |t: f64| (t.ln() - lo.ln()) / (hi.ln() - lo.ln());
    let mut labelled: Vec<f64> = Vec::new();
    let mut ticks = Vec::new();
    for t in RATIO_TICKS.into_iter().filter(|&t| t >= lo && t <= hi) {
        let free = labelled.iter().all(|&l| (at(l) - at(t)).abs() >= TICK_GAP);
        if free {
            labelled.push(t);
        }
        ticks.push((t, free.then(|| crate::report::svg::num(t))));
    }
    ticks
}

/// The forest plot of the relative metrics: B / A with its interval on a log axis, one row a
/// metric, the band of no change that matters behind each; a metric without an interval says
/// why in its row.
fn forest(r: &Report) -> String {
    let rows: Vec<&MetricComparison> = r.metrics.iter().filter(|m| m.metric.relative()).collect();
    if rows.is_empty() {
        return String::new();
    }
    // The axis holds every interval and band, within 1/1000..1000 (beyond is drawn at the edge).
    let (mut lo, mut hi) = (1.0f64, 1.0f64);
    for m in &rows {
        lo = lo.min(1.0 / (1.0 + m.matters));
        hi = hi.max(1.0 + m.matters);
        if let Some((ratio, low, high)) = m.ratio() {
            lo = lo.min(low).min(ratio);
            hi = hi.max(high).max(ratio);
        }
    }
    let (lo, hi) = ((lo / 1.1).max(1e-3), (hi * 1.1).min(1e3));
    let x = Axis::with_ticks(lo, hi, Scale::Log, ratio_ticks(lo, hi), "B / A (log scale)");
    let n = rows.len() as f64;
    let y_ticks = rows.iter().enumerate().map(|(i, m)| (n - 1.0 - i as f64, Some(short(m.metric).to_string())));
    let y = Axis::with_ticks(-0.6, n - 0.4, Scale::Linear, y_ticks.collect(), "");
    let height = 110.0 + 70.0 * n;
    let mut p = Plot::new("forest", "plot-forest", "B / A per metric, with its interval", 620.0, height, x, y);
    p.vline(1.0, "#444", "B = A");
    let clamp = |v: f64| v.clamp(lo, hi);
    let mut seen: Vec<&'static str> = Vec::new();
    for (i, m) in rows.iter().enumerate() {
        let row = n - 1.0 - i as f64;
        let band = (1.0 / (1.0 + m.matters), 1.0 + m.matters);
        let tip = format!("{}: a change within {} is no change that matters", m.metric.label(), m.amount(m.matters));
        p.rect(clamp(band.0), clamp(band.1), row - 0.28, row + 0.28, BAND, 0.15, Some(&tip));
        let color = verdict_color(&m.verdict);
        match m.ratio() {
            Some((ratio, low, high)) => {
                let (a, b) = (clamp(low), clamp(high));
                p.line(&[(a, row), (b, row)], color, 3.0, false);
                for end in [a, b] {
                    p.segment((end, row - 0.12), (end, row + 0.12), color, 2.0);
                }
                let tip = format!("{}: B / A {ratio:.3} [{low:.3}, {high:.3}]: {}", m.metric.label(), m.verdict_text());
                p.dot(clamp(ratio), row, 6.0, color, Some(&tip));
                p.text(clamp(ratio), row + 0.22, "middle", &format!("{ratio:.3} · {}", m.verdict.key()));
            }
            // At the left edge: the legend takes a right corner, where the data are.
            None => p.text(lo * 1.03, row + 0.1, "start", &format!("{}: no interval (see Verdicts)", m.verdict.key())),
        }
        if !seen.contains(&m.verdict.key()) {
            seen.push(m.verdict.key());
            p.legend(m.verdict.key(), color, Mark::Dot);
        }
    }
    p.legend("no change that matters", BAND, Mark::Area);
    p.finish()
}

/// The error rate's difference, B − A in percentage points, with its interval and the ±1 pp
/// band; nothing when the error rate was not compared.
fn error_rate_plot(r: &Report) -> String {
    let Some(m) = r.metrics.iter().find(|m| m.metric == Metric::ErrorRate) else { return String::new() };
    let band = m.matters * 100.0;
    let interval = m.shift.map(|s| (s.difference * 100.0, s.ci.low.max(-1.0) * 100.0, s.ci.high.min(1.0) * 100.0));
    let reach = interval.map_or(0.0, |(d, low, high)| d.abs().max(low.abs()).max(high.abs()));
    let half = reach.max(band) * 1.2;
    let signed = |v: f64| if v > 0.0 { format!("+{}", crate::report::svg::num(v)) } else { crate::report::svg::num(v) };
    let x = Axis::linear(-half, half, "B − A (percentage points of calls failed)", signed);
    let y = Axis::with_ticks(-0.6, 0.6, Scale::Linear, vec![(0.0, Some("errors".into()))], "");
    let mut p = Plot::new("forest-errors", "plot-forest", "Error rate: B − A, with its interval", 620.0, 180.0, x, y);
    p.rect(-band, band, -0.3, 0.3, BAND, 0.15, Some(&format!("a change within ±{band:.2} pp is no change")));
    p.vline(0.0, "#444", "B = A");
    let color = verdict_color(&m.verdict);
    match interval {
        Some((d, low, high)) => {
            p.line(&[(low, 0.0), (high, 0.0)], color, 3.0, false);
            for end in [low, high] {
                p.segment((end, -0.12), (end, 0.12), color, 2.0);
            }
            let tip = format!("error rate B − A {d:+.2} pp [{low:+.2}, {high:+.2}]: {}", m.verdict_text());
            p.dot(d, 0.0, 6.0, color, Some(&tip));
            // Below the dot: above it is the B = A line's label.
            p.text(d, -0.45, "middle", &format!("{d:+.2} pp · {}", m.verdict.key()));
        }
        None => p.text(-half * 0.97, -0.45, "start", &format!("{}: no interval (see Verdicts)", m.verdict.key())),
    }
    p.legend(m.verdict.key(), color, Mark::Dot);
    p.legend("no change that matters", BAND, Mark::Area);
    p.finish()
}

/// A metric's row label, short enough for the plot's left margin.
fn short(metric: Metric) -> &'static str {
    match metric {
        Metric::Throughput => "throughput",
        Metric::P50 => "p50",
        Metric::P99 => "p99",
        Metric::ErrorRate => "errors",
    }
}
