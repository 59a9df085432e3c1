//! Statistics: turn recorded histograms and counts into the numbers reports print.
pub mod assertions;

use hdrhistogram::Histogram;
use serde::Serialize;
use std::time::Duration;

/// Percentile summary of one latency histogram, in microseconds.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Latency {
    pub count: u64,
    pub min: f64,
    pub mean: f64,
    pub stdev: f64,
    pub p50: f64,
    pub p75: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub p999: f64,
    pub p9999: f64,
    pub max: f64,
}

/// The percentiles every report prints, as (label, quantile).
pub const PERCENTILES: [(&str, f64); 7] =
    [("p50", 0.5), ("p75", 0.75), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99), ("p99.9", 0.999), ("p99.99", 0.9999)];

impl Latency {
    pub fn of(h: &Histogram<u64>) -> Latency {
        if h.is_empty() {
            return Latency::default();
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        let q = |x: f64| us(h.value_at_quantile(x));
        Latency {
            count: h.len(),
            min: us(h.min()),
            mean: h.mean() / 1000.0,
            stdev: h.stdev() / 1000.0,
            p50: q(0.5),
            p75: q(0.75),
            p90: q(0.9),
            p95: q(0.95),
            p99: q(0.99),
            p999: q(0.999),
            p9999: q(0.9999),
            max: us(h.max()),
        }
    }
}

/// Throughput of a window: calls that ended in it per second of it.
pub fn rate(calls: u64, window: Duration) -> f64 {
    if window.is_zero() {
        0.0
    } else {
        calls as f64 / window.as_secs_f64()
    }
}

/// gRPC status names as gRPC spells them (OK, UNAVAILABLE, ...), indexed by code.
pub const STATUS_NAMES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

/// The non-zero entries of a per-status counter array, by name.
pub fn statuses(counts: &[u64; 17]) -> Vec<(&'static str, u64)> {
    STATUS_NAMES.iter().zip(counts).filter(|(_, &n)| n > 0).map(|(&name, &n)| (name, n)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::shard::Shard;
    use tonic::Code;

    #[test]
    fn latency_summary_in_microseconds() {
        let mut s = Shard::default();
        for ms in 1..=100u64 {
            s.record_call(Duration::from_millis(ms), Code::Ok, false);
        }
        let l = Latency::of(&s.call_latency);
        assert_eq!(l.count, 100);
        assert!((l.p50 - 50_000.0).abs() < 50.0, "{}", l.p50);
        assert!((l.p99 - 99_000.0).abs() < 100.0, "{}", l.p99);
        assert!((l.max - 100_000.0).abs() < 100.0);
        assert!((l.min - 1_000.0).abs() < 1.0);
        assert!((l.mean - 50_500.0).abs() < 60.0);
    }

    #[test]
    fn statuses_lists_nonzero_by_grpc_name() {
        let mut c = [0u64; 17];
        c[0] = 5;
        c[Code::Unavailable as usize] = 2;
        assert_eq!(statuses(&c), vec![("OK", 5), ("UNAVAILABLE", 2)]);
        assert_eq!(rate(100, Duration::from_secs(4)), 25.0);
        assert_eq!(rate(100, Duration::ZERO), 0.0);
    }
}
