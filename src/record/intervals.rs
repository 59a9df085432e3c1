//! The interval series: what the engine hands its sinks as each interval closes, and the
//! row kept of it (one per interval, 1 s by default), small whatever the run's length.
//! `--format csv` prints the rows; progress shows the last one.
use super::resource::Usage;
use super::shard::{new_backend_histogram, pack, NameTally};
use super::Tally;
use crate::grpc::status::PerStatus;
use crate::stats::Statistic;
use hdrhistogram::Histogram;
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
    /// Targets broken down by backend: each backend's part of the interval (None otherwise).
    pub backends: Option<BackendRow>,
    /// The interval's histograms packed (`stats::histogram::pack`), kept for a result that
    /// will be merged (a shard's), so that a merge adds interval i of every shard exactly
    /// (app/merge.rs); None otherwise: a long run's rows stay small.
    pub packed: Option<Packed>,
}

/// One interval's latency histograms, packed: its call latency, and its service time where
/// that differs (an open loop; a closed loop's equals the call latency).
#[derive(Debug, Clone, PartialEq)]
pub struct Packed {
    pub call_latency: Vec<u8>,
    pub service_time: Option<Vec<u8>>,
}

/// The backends of the run's list of addresses that each keep a line of their own in the
/// per-backend series, in the list's order; the rest are folded into one line. So an
/// interval's row holds at most this many lines and one more whatever the number of backends
/// (1000 addresses: 9 lines, not 1000), and the report's plots stay readable (docs/results.md,
/// `backend_intervals`).
pub const BACKEND_LINES: usize = 8;

/// One interval's calls by backend: the first `BACKEND_LINES` backends' lines, by index, and
/// the rest folded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BackendRow {
    pub lines: Vec<BackendLine>,
    /// The backends past the first `BACKEND_LINES`, folded (None when there are none).
    pub others: Option<Others>,
}

/// The backends beyond the first `BACKEND_LINES` as one line.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Others {
    pub line: BackendLine,
    /// How many backends it holds, and how many of them answered a call in the interval.
    pub backends: u64,
    pub answering: u64,
}

/// One backend's (or the folded backends') calls of an interval: their final statuses and
/// latency (zero without calls).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BackendLine {
    pub statuses: PerStatus,
    pub p50: Duration,
    pub p99: Duration,
    /// Its latency histogram packed, kept as `IntervalRow::packed` is (None without calls).
    pub packed: Option<Vec<u8>>,
}

impl BackendLine {
    fn of(statuses: PerStatus, h: &Histogram<u64>, keep: bool) -> BackendLine {
        BackendLine {
            statuses,
            p50: Statistic::Percentile(50.0).of(h),
            p99: Statistic::Percentile(99.0).of(h),
            packed: (keep && !h.is_empty()).then(|| pack(h)),
        }
    }

    pub fn calls(&self) -> u64 {
        self.statuses.total()
    }
}

impl BackendRow {
    /// The row of an interval's per-backend tallies; None when the run breaks nothing down by
    /// backend. Runs on the collector, once per interval: the folded line's histogram is made
    /// (and with `keep`, every line's packed) here, never on a worker thread.
    pub fn of(backends: &[NameTally], keep: bool) -> Option<BackendRow> {
        if backends.is_empty() {
            return None;
        }
        let split = backends.len().min(BACKEND_LINES);
        let lines = backends[..split].iter().map(|b| BackendLine::of(b.statuses, &b.latency, keep)).collect();
        let rest = &backends[split..];
        let others = (!rest.is_empty()).then(|| {
            let (mut statuses, mut latency, mut answering) = (PerStatus::default(), new_backend_histogram(), 0);
            for b in rest.iter().filter(|b| b.calls > 0) {
                statuses.add(&b.statuses);
                latency.add(&b.latency).expect("same histogram bounds");
                answering += 1;
            }
            Others { line: BackendLine::of(statuses, &latency, keep), backends: rest.len() as u64, answering }
        });
        Some(BackendRow { lines, others })
    }

    /// Every line's calls: those of the calls that reached a backend.
    pub fn calls(&self) -> u64 {
        self.lines.iter().chain(self.others.as_ref().map(|o| &o.line)).map(BackendLine::calls).sum()
    }
}

impl IntervalRow {
    pub fn of(iv: &Interval) -> IntervalRow {
        IntervalRow::keeping(iv, false)
    }

    /// The row, with its histograms packed when `keep` (a shard's run: `IntervalRow::packed`).
    pub fn keeping(iv: &Interval, keep: bool) -> IntervalRow {
        let h = &iv.tally.call_latency;
        let c = &iv.tally.counts;
        let service = &iv.tally.service_time;
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
            service_p99: Statistic::Percentile(99.0).of(service),
            client_cpu_total: iv.usage.cpu,
            client_rss_bytes: iv.usage.rss_bytes,
            messages_sent: c.messages_sent,
            messages_received: c.messages_received,
            backends: BackendRow::of(&iv.tally.by_backend, keep),
            packed: keep.then(|| Packed { call_latency: pack(h), service_time: (service != h).then(|| pack(service)) }),
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

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    #[test]
    fn backends_past_the_first_lines_fold_into_one_with_their_latency_together() {
        let mut tally = Tally::with_slots(super::super::shard::Slots { backends: 11, ..Default::default() });
        // Backend 0 answers 10 calls at 1 ms; of the 3 folded ones, 9 answers 4 at 2 ms and
        // fails 1, 10 answers one at 50 ms, 8 none.
        for _ in 0..10 {
            tally.record_backend(0, Duration::from_millis(1), Code::Ok);
        }
        for _ in 0..4 {
            tally.record_backend(9, Duration::from_millis(2), Code::Ok);
        }
        tally.record_backend(9, Duration::from_millis(2), Code::Unavailable);
        tally.record_backend(10, Duration::from_millis(50), Code::Ok);
        let row = BackendRow::of(&tally.by_backend, false).unwrap();
        assert_eq!(row.lines.len(), BACKEND_LINES);
        assert_eq!((row.lines[0].calls(), row.lines[1].calls()), (10, 0));
        let others = row.others.as_ref().unwrap();
        assert_eq!((others.backends, others.answering, others.line.calls()), (3, 2, 6));
        assert_eq!(others.line.statuses.get(Code::Unavailable), 1);
        let p99 = others.line.p99.as_secs_f64();
        assert!((p99 / 0.050 - 1.0).abs() < 0.01, "{p99}");
        assert_eq!(row.calls(), 16);
        assert_eq!(BackendRow::of(&[], false), None, "a run not broken down by backend has no row");
    }
}
