//! `--format csv`: one row per interval, for spreadsheets and plots. Numbers are rounded to
//! what was measured (ns, µs), so no float noise such as 1.3489849999999999 reaches a cell.
//! A result without an interval series (a merge) is one row: its whole measured window.
//! Every row says how the result ended (`ended`), so a partial one is never read as whole.
use super::Export;
use crate::result::{IntervalRow, Run};
use crate::stats::Statistic;

pub struct Csv;

const HEADER: [&str; 16] = [
    "t_s",
    "phase",
    "calls",
    "ok",
    "failed",
    "rps",
    "p50_us",
    "p90_us",
    "p99_us",
    "max_us",
    "client_cpu_total_s",
    "client_rss_bytes",
    "service_p99_us",
    "messages_sent",
    "messages_received",
    "ended",
];

impl Export for Csv {
    fn render(&self, r: &Run) -> String {
        let mut out = HEADER.join(",") + "\n";
        let whole = [whole(r)];
        let series = r.intervals.as_deref().unwrap_or_default();
        let rows = if series.is_empty() && r.requests.total > 0 { &whole[..] } else { series };
        for row in rows {
            let cells = [
                row.t_s.to_string(),
                row.phase.clone(),
                row.calls.to_string(),
                row.ok.unwrap_or(row.calls.saturating_sub(row.failed)).to_string(),
                row.failed.to_string(),
                format!("{:.3}", row.rps),
                row.p50_us.to_string(),
                row.p90_us.to_string(),
                row.p99_us.to_string(),
                row.max_us.to_string(),
                row.client_cpu_total_s.to_string(),
                row.client_rss_bytes.to_string(),
                row.service_p99_us.to_string(),
                row.messages_sent.to_string(),
                row.messages_received.to_string(),
                r.meta.ended.as_str().to_string(),
            ];
            out += &cells.join(",");
            out.push('\n');
        }
        out
    }
}

/// The whole measured window as one row.
fn whole(r: &Run) -> IntervalRow {
    let (l, m) = (&r.latency_us, r.messages.as_ref());
    let p = |l: &crate::result::LatencySummary, p: f64| l.micros(Statistic::Percentile(p)).unwrap_or(0.0);
    let client = r.client.clone().unwrap_or_default();
    IntervalRow {
        t_s: r.duration_s,
        length_s: r.duration_s,
        phase: "measured".into(),
        calls: r.requests.total,
        ok: Some(r.requests.ok),
        failed: r.requests.failed,
        rps: r.throughput_rps,
        p50_us: p(l, 50.0),
        p90_us: p(l, 90.0),
        p99_us: p(l, 99.0),
        max_us: l.micros(Statistic::Max).unwrap_or(0.0),
        service_p99_us: r.service_time_us.as_ref().map_or(0.0, |s| p(s, 99.0)),
        client_cpu_total_s: client.cpu_s,
        client_rss_bytes: client.max_rss_bytes,
        messages_sent: m.map_or(0, |m| m.sent),
        messages_received: m.map_or(0, |m| m.received),
        ..IntervalRow::default()
    }
}
