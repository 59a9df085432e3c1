//! `--format rmeter`: the markdown row of rmeter, the load tool of the test_service
//! experiment (docs/experiments.md, "Threaded vs async servers"), with its exact header,
//! counted right: Retries = attempts - calls (once), statuses per attempt, latency of the
//! whole call.
use super::{Export, Summary};
use crate::units::{bytes, duration};
use tonic::Code;

pub struct Rmeter;

pub const HEADER: &str = "| Tasks | Loop | Duration | Successful | RetryMax | Retries | gRPC ResExh | gRPC Unavail | gRPC Other | Throughput (req/s) | Avg/Max/Min ms |\n\
|-------|------|----------|------------|----------|---------|-------------|--------------|------------|--------------------|----------------|";

pub fn row(s: &Summary) -> String {
    let a = &s.attempt_statuses;
    let (exhausted, unavailable) = (a.get(Code::ResourceExhausted), a.get(Code::Unavailable));
    let other = a.total() - a.get(Code::Ok) - exhausted - unavailable;
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    let l = &s.latency;
    format!(
        "| {} | {} | {:.2}s | {} | {} | {} | {} | {} | {} | {:.2} | {:.0}/{:.0}/{:.0} |",
        s.concurrency,
        s.loop_per_worker.map_or("-".to_string(), |n| n.to_string()),
        s.duration.as_secs_f64(),
        s.requests.ok,
        s.requests.retry_exhausted,
        s.requests.retries,
        exhausted,
        unavailable,
        other,
        s.ok_rps,
        ms(l.mean),
        ms(l.max),
        ms(l.min),
    )
}

impl Export for Rmeter {
    /// The table, then the client's own cost on a line of its own (the header stays exact).
    fn render(&self, s: &Summary) -> String {
        let c = &s.client;
        let partial = match s.ended.partial() {
            true => format!("\nPARTIAL: the result ended {}\n", s.ended.as_str()),
            false => String::new(),
        };
        format!(
            "{HEADER}\n{}\n{partial}\nClient cost: CPU {:.3} s ({}/call), max RSS {}\n",
            row(s),
            c.cpu.as_secs_f64(),
            duration(c.cpu_per_call),
            bytes(c.max_rss_bytes)
        )
    }
}
