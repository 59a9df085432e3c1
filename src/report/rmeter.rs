//! `--format rmeter`: seed 002's markdown row, with its exact header, counted right:
//! Retries = attempts - calls (once), statuses per attempt, latency of the whole call.
use super::Summary;

pub const HEADER: &str = "| Tasks | Loop | Duration | Successful | RetryMax | Retries | gRPC ResExh | gRPC Unavail | gRPC Other | Throughput (req/s) | Avg/Max/Min ms |\n\
|-------|------|----------|------------|----------|---------|-------------|--------------|------------|--------------------|----------------|";

pub fn row(s: &Summary) -> String {
    let st = |name: &str| s.attempt_statuses.get(name).copied().unwrap_or(0);
    let failed_attempts: u64 = s.attempt_statuses.iter().filter(|(k, _)| **k != "OK").map(|(_, v)| v).sum();
    let other = failed_attempts - st("RESOURCE_EXHAUSTED") - st("UNAVAILABLE");
    let l = &s.latency_us;
    format!(
        "| {} | {} | {:.2}s | {} | {} | {} | {} | {} | {} | {:.2} | {:.0}/{:.0}/{:.0} |",
        s.concurrency,
        s.loop_per_worker.map_or("-".to_string(), |n| n.to_string()),
        s.duration_s,
        s.requests.ok,
        s.requests.retry_exhausted,
        s.requests.retries,
        st("RESOURCE_EXHAUSTED"),
        st("UNAVAILABLE"),
        other,
        s.ok_rps,
        l.mean / 1e3,
        l.max / 1e3,
        l.min / 1e3,
    )
}

/// The table, then the client's own cost on a line of its own (the header stays exact).
pub fn render(s: &Summary) -> String {
    let c = &s.client;
    format!(
        "{HEADER}\n{}\n\nClient cost: CPU {:.3} s ({:.2} µs/call), max RSS {:.1} MB\n",
        row(s),
        c.cpu_s,
        c.cpu_us_per_request,
        c.max_rss_bytes as f64 / 1e6
    )
}
