//! `--format csv`: one row per interval, for spreadsheets and plots. Numbers are rounded to
//! what was measured (ns, µs), so no float noise such as 1.3489849999999999 reaches a cell.
use super::{Export, Summary};
use crate::units::{micros, secs};

pub struct Csv;

const HEADER: [&str; 15] = [
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
];

impl Export for Csv {
    fn render(&self, s: &Summary) -> String {
        let mut out = HEADER.join(",") + "\n";
        for row in &s.intervals {
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
            ];
            out += &cells.join(",");
            out.push('\n');
        }
        out
    }
}
