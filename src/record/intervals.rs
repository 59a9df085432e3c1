//! The interval series: what the engine hands its sinks as each interval closes, and the
//! row kept of it (one per interval, 1 s by default), small whatever the run's length.
//! `--format csv` prints the rows; progress shows the last one.
use super::resource::Usage;
use super::Tally;
use crate::stats::Statistic;
use std::time::Duration;

/// What one interval measured, handed to sinks as it closes.
pub struct Interval<'a> {
    /// End of the interval, from the start of the run.
    pub at: Duration,
    pub length: Duration,
    /// Whether the interval ended inside the warm-up.
    pub warmup: bool,
    /// Warm-up and measured calls of this interval together.
    pub tally: &'a Tally,
    pub usage: Usage,
    /// Calls started and not yet answered when the interval closed (live metrics).
    pub in_flight: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct IntervalRow {
    /// End of the interval, from the start of the run.
    pub at: Duration,
    pub length: Duration,
    pub warmup: bool,
    pub calls: u64,
    pub ok: u64,
    pub failed: u64,
    pub p50: Duration,
    pub p90: Duration,
    pub p99: Duration,
    pub max: Duration,
    /// Service time (actual send to answer) p99: in open loop, what the server took.
    pub service_p99: Duration,
    /// The client's CPU time from its start to the end of this interval.
    pub client_cpu_total: Duration,
    pub client_rss_bytes: u64,
    /// Streaming calls' messages each way (0 for unary calls).
    pub messages_sent: u64,
    pub messages_received: u64,
}

impl IntervalRow {
    pub fn of(iv: &Interval) -> IntervalRow {
        let h = &iv.tally.call_latency;
        let c = &iv.tally.counts;
        IntervalRow {
            at: iv.at,
            length: iv.length,
            warmup: iv.warmup,
            calls: c.calls,
            ok: c.ok(),
            failed: c.failed(),
            p50: Statistic::Percentile(50.0).of(h),
            p90: Statistic::Percentile(90.0).of(h),
            p99: Statistic::Percentile(99.0).of(h),
            max: Statistic::Max.of(h),
            service_p99: Statistic::Percentile(99.0).of(&iv.tally.service_time),
            client_cpu_total: iv.usage.cpu,
            client_rss_bytes: iv.usage.rss_bytes,
            messages_sent: c.messages_sent,
            messages_received: c.messages_received,
        }
    }

    pub fn phase(&self) -> &'static str {
        if self.warmup {
            "warmup"
        } else {
            "measured"
        }
    }
}
