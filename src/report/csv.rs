//! `--format csv`: one row per interval, for spreadsheets and plots.
use super::IntervalRow;

pub fn render(rows: &[IntervalRow]) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    for row in rows {
        let _ = w.serialize(row);
    }
    if rows.is_empty() {
        // Still give the header, so that readers see the columns.
        let _ = w.write_record([
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
        ]);
    }
    String::from_utf8(w.into_inner().unwrap_or_default()).unwrap_or_default()
}
