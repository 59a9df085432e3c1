//! `--format rmeter`: the markdown row of rmeter, the load tool of the test_service
//! experiment (docs/experiments.md, "Threaded vs async servers"), with its exact header,
//! counted right: Retries = attempts - calls (once), statuses per attempt, latency of the
//! whole call.
use super::Export;
use crate::grpc::status;
use crate::result::Run;
use crate::stats::Statistic;
use crate::units::{bytes, duration};
use tonic::Code;

pub struct Rmeter;

pub const HEADER: &str = "| Tasks | Loop | Duration | Successful | RetryMax | Retries | gRPC ResExh | gRPC Unavail | gRPC Other | Throughput (req/s) | Avg/Max/Min ms |\n\
|-------|------|----------|------------|----------|---------|-------------|--------------|------------|--------------------|----------------|";

pub fn row(r: &Run) -> String {
    let a = &r.attempt_statuses;
    let count = |code: Code| a.get(status::name(code)).copied().unwrap_or(0);
    let (exhausted, unavailable) = (count(Code::ResourceExhausted), count(Code::Unavailable));
    let other = a.values().sum::<u64>() - count(Code::Ok) - exhausted - unavailable;
    let ms = |stat: Statistic| r.latency_us.micros(stat).unwrap_or(0.0) / 1e3;
    format!(
        "| {} | {} | {:.2}s | {} | {} | {} | {} | {} | {} | {:.2} | {:.0}/{:.0}/{:.0} |",
        r.concurrency,
        r.loop_per_worker.map_or("-".to_string(), |n| n.to_string()),
        r.duration_s,
        r.requests.ok,
        r.requests.retry_exhausted.unwrap_or(0),
        r.requests.retries.unwrap_or(0),
        exhausted,
        unavailable,
        other,
        r.ok_calls_per_s(),
        ms(Statistic::Mean),
        ms(Statistic::Max),
        ms(Statistic::Min),
    )
}

impl Export for Rmeter {
    /// The table, then the client's own cost on a line of its own (the header stays exact).
    fn render(&self, r: &Run) -> String {
        let c = r.client.clone().unwrap_or_default();
        let partial = match r.partial() {
            true => format!("\nPARTIAL: the result ended {}\n", r.meta.ended.as_str()),
            false => String::new(),
        };
        let per_call = r.cpu_per_call().unwrap_or_default();
        format!(
            "{HEADER}\n{}\n{partial}\nClient cost: CPU {:.3} s ({}/call), max RSS {}\n",
            row(r),
            c.cpu_s,
            duration(per_call),
            bytes(c.max_rss_bytes)
        )
    }
}
