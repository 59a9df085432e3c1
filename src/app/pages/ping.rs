//! `ping --format html` / `ping -o FILE.html`: the round trips on one page. What a table
//! cannot show is the distribution and its course: every sample in order (network and gRPC,
//! losses and flagged outliers marked), box plots and violins of both (`report::html`'s, as
//! the ping-vs-gRPC lab draws them), beside the table and the difference `ping` prints.
use super::super::ping::{difference_text, flags_text, ms, outliers_text, trim_word, Analysed, Report};
use super::{boxed, notes, page};
use crate::report::html::{box_plot, violins, Distribution};
use crate::report::svg::{esc, latency_us, num, Axis, Mark, Plot};
use crate::stats::describe::Description;
use hdrhistogram::Histogram;
use std::fmt::Write as _;
use std::time::Duration;

const NETWORK: &str = "#1f77b4";
const GRPC: &str = "#d62728";
const LOST: &str = "#c0392b";

pub fn render(r: &Report) -> String {
    let net = r.method.name();
    let taken = r.icmp.0.answered.len() as u64 + r.icmp.0.lost;
    let mut body = format!(
        "<p class=\"meta\">{} of {} samples every {}{} · network: {} ({}) · gRPC: {} on one HTTP/2 connection, \
         warmed by one uncounted call</p>\n",
        taken,
        r.asked,
        esc(&humantime::format_duration(r.interval).to_string()),
        if r.interrupted { " (interrupted)" } else { "" },
        esc(net),
        esc(r.method.describe()),
        esc(&r.call),
    );
    body += &boxed("failures", "alert", &losses(r, taken));
    body += &format!("<p><b>{}</b></p>\n", esc(&difference_text(r)));
    body += &table(r);
    body += "<div class=\"grid\">";
    body += &series_plot(r);
    let (network, grpc) = (histogram(&r.icmp.0.answered), histogram(&r.grpc.0.answered));
    let label = format!("network ({net})");
    let ds = [Distribution { label: &label, histogram: &network }, Distribution { label: "gRPC", histogram: &grpc }];
    if !network.is_empty() || !grpc.is_empty() {
        body += &box_plot("ping-box", "Round trips (box p25–p75, whiskers p10–p90)", &ds);
        body += &violins("ping-violin", "Round trips: density", &ds);
    }
    body += "</div>\n";
    let outliers =
        vec![outliers_text(r), flags_text(net, &r.icmp.0, &r.icmp.1), flags_text("grpc", &r.grpc.0, &r.grpc.1)];
    body += &notes("Outliers", &outliers);
    page(&format!("rpcmeter ping {}", r.target), &body)
}

/// Lost probes and calls, and a series cut short: first, in red.
fn losses(r: &Report, taken: u64) -> Vec<String> {
    let mut lines = Vec::new();
    for (name, s) in [(format!("network ({})", r.method.name()), &r.icmp.0), ("gRPC".to_string(), &r.grpc.0)] {
        if s.lost > 0 {
            let first = s.first_loss.as_deref().map_or(String::new(), |why| format!(" (first: {why})"));
            lines.push(format!("{name}: {} of {} lost{first}.", s.lost, s.lost + s.answered.len() as u64));
        }
        if s.answered.is_empty() {
            lines.push(format!("{name}: nothing was answered."));
        }
    }
    if r.interrupted {
        lines.push(format!("Interrupted after {taken} of {} samples.", r.asked));
    }
    lines
}

/// The table `ping` prints, as HTML: each protocol's description, trimmed when asked.
fn table(r: &Report) -> String {
    let mut tables = vec![(None, &r.icmp.1.all, &r.grpc.1.all)];
    if let Some(t) = r.trim {
        tables.push((Some(t), &r.icmp.1.trimmed, &r.grpc.1.trimmed));
    }
    let mut s = String::new();
    for (trimmed, a, b) in tables {
        match trimmed {
            None => s += "<h2>Round trips</h2>\n",
            Some(t) => {
                let _ = writeln!(
                    s,
                    "<h2>Trimmed (--trim {})</h2><p class=\"small\">The {} outliers are left out of this table and of \
                     the difference.</p>",
                    trim_word(t).to_lowercase(),
                    trim_word(t)
                );
            }
        }
        let _ = write!(
            s,
            "<table class=\"ping\"><tr><th></th><th>network ({})</th><th>gRPC</th></tr>",
            esc(r.method.name())
        );
        let count = |d: &Option<Description>| d.map_or(0, |d| d.count);
        let _ = write!(s, "<tr><td>count</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>", count(a), count(b));
        let labels = a.or(*b).map(|d| d.rows().map(|(label, _)| label)).unwrap_or_default();
        for (i, label) in labels.iter().enumerate() {
            let cell = |d: &Option<Description>| d.map_or("–".to_string(), |d| ms(d.rows()[i].1));
            let _ =
                write!(s, "<tr><td>{label}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>", cell(a), cell(b));
        }
        let lost = |n: u64| if n > 0 { "n bad" } else { "n" };
        let (x, y) = (r.icmp.0.lost, r.grpc.0.lost);
        let _ = write!(s, "<tr><td>lost</td><td class=\"{}\">{x}</td><td class=\"{}\">{y}</td></tr>", lost(x), lost(y));
        s += "</table>\n";
    }
    s
}

/// Every sample in the order taken: network and gRPC, z-score or Tukey outliers ringed,
/// losses as red bars over the whole height.
fn series_plot(r: &Report) -> String {
    let all = r.icmp.0.answered.iter().chain(&r.grpc.0.answered).map(|d| d.as_secs_f64() * 1e6);
    let (lo, hi) = all.fold((f64::INFINITY, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let last = (r.icmp.0.answered.len() as u64 + r.icmp.0.lost).max(1) as f64;
    let x = Axis::linear(0.0, (last - 1.0).max(1.0), "sample", num);
    let y = if lo > 0.0 && hi / lo > 20.0 {
        Axis::log(lo, hi, "round trip (log scale)", latency_us)
    } else {
        Axis::linear(0.0, hi.max(1.0) * 1.1, "round trip", latency_us)
    };
    let mut p = Plot::new("ping-series", "plot-series", "Every sample, in order", 620.0, 320.0, x, y);
    let mut lost_any = false;
    for (name, (s, a), c) in [(r.method.name(), &r.icmp, NETWORK), ("gRPC", &r.grpc, GRPC)] {
        for &at in &s.lost_at {
            p.band(at as f64 - 0.4, at as f64 + 0.4, LOST, 0.25);
            lost_any = true;
        }
        let points: Vec<(f64, f64)> =
            s.answered_at.iter().zip(&s.answered).map(|(&at, d)| (at as f64, d.as_secs_f64() * 1e6)).collect();
        p.line(&points, c, 1.2, false);
        for &(at, us) in &points {
            p.dot(at, us, 3.0, c, Some(&format!("{name} sample {at}: {}", latency_us(us))));
        }
        p.legend(name, c, Mark::Dot);
        for i in flagged(a).into_iter().filter(|&i| i < points.len()) {
            p.ring(points[i].0, points[i].1, 7.0, "#333", Some(&format!("{name} sample {}: an outlier", points[i].0)));
        }
    }
    if lost_any {
        p.legend("lost", LOST, Mark::Area);
    }
    p.legend("flagged outlier", "#333", Mark::Ring);
    p.finish()
}

/// The indices (into a side's answers) that either outlier rule flagged.
fn flagged(a: &Analysed) -> Vec<usize> {
    let mut flagged: Vec<usize> = a.z_passes.concat().into_iter().chain(a.tukey.iter().copied()).collect();
    flagged.sort_unstable();
    flagged.dedup();
    flagged
}

/// The answered round trips as a histogram of ns, as the report's plots take them.
fn histogram(sample: &[Duration]) -> Histogram<u64> {
    let mut h = crate::record::shard::new_histogram();
    for d in sample {
        h.saturating_record(d.as_nanos().min(u64::MAX as u128) as u64);
    }
    h
}
