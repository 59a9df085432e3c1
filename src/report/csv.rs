//! `--format csv`: one row per interval, for spreadsheets and plots. Numbers are rounded to
//! what was measured (ns, µs), so no float noise such as 1.3489849999999999 reaches a cell.
//! A result without an interval series (a merge) is one row: its whole measured window.
//! Every row says how the result ended (`ended`), so a partial one is never read as whole.
use super::{Export, Summary};
use crate::record::intervals::IntervalRow;
use crate::units::{micros, secs};

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
    fn render(&self, s: &Summary) -> String {
        let mut out = HEADER.join(",") + "\n";
        let whole = [whole(s)];
        let rows = if s.intervals.is_empty() && s.requests.total > 0 { &whole[..] } else { &s.intervals[..] };
        for row in rows {
            let cells = [
                secs(row.at).to_string(),
                row.phase().to_string(),
                row.calls.to_string(),
                row.ok.to_string(),
                row.failed.to_string(),
                format!("{:.3}", crate::stats::rate(row.calls, row.length)),
                micros(row.p50).to_string(),
                micros(row.p90).to_string(),
                micros(row.p99).to_string(),
                micros(row.max).to_string(),
                secs(row.client_cpu_total).to_string(),
                row.client_rss_bytes.to_string(),
                micros(row.service_p99).to_string(),
                row.messages_sent.to_string(),
                row.messages_received.to_string(),
                s.ended.as_str().to_string(),
            ];
            out += &cells.join(",");
            out.push('\n');
        }
        out
    }
}

/// The whole measured window as one row.
fn whole(s: &Summary) -> IntervalRow {
    let (l, m) = (&s.latency, s.messages.as_ref());
    IntervalRow {
        at: s.duration,
        length: s.duration,
        warmup: false,
        calls: s.requests.total,
        ok: s.requests.ok,
        failed: s.requests.failed,
        p50: l.percentile(50.0),
        p90: l.percentile(90.0),
        p99: l.percentile(99.0),
        max: l.max,
        service_p99: s.service_time.percentile(99.0),
        client_cpu_total: s.client.cpu,
        client_rss_bytes: s.client.max_rss_bytes,
        messages_sent: m.map_or(0, |m| m.sent),
        messages_received: m.map_or(0, |m| m.received),
    }
}
