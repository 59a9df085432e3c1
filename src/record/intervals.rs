//! The interval series: what the engine hands its sinks as each interval closes, and the
//! row kept of it (one per interval, 1 s by default), small whatever the run's length.
//! `--format csv` prints the rows; progress shows the last one.
use super::resource::Usage;
use super::shard::pack;
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

/// How many backends keep a line of their own in the per-backend series (record/shard.rs).
pub use super::shard::BACKEND_LINES;

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

/// A line's latency where the tally has none (a line whose backends took no call).
static EMPTY_LINE: std::sync::LazyLock<Histogram<u64>> = std::sync::LazyLock::new(super::shard::new_backend_histogram);

impl BackendRow {
    /// The row of an interval's tally, by backend; None when the run breaks nothing down by
    /// backend. Each line's latency is the tally's histogram of that line
    /// (`Tally::backend_lines`, the folded backends' together); with `keep`, every line's is
    /// packed too (on the collector, once per interval, never on a worker thread).
    pub fn of(tally: &Tally, keep: bool) -> Option<BackendRow> {
        let backends = &tally.by_backend;
        if backends.is_empty() {
            return None;
        }
        let latency = |line: usize| tally.backend_lines.get(line).unwrap_or(&EMPTY_LINE);
        let split = backends.len().min(BACKEND_LINES);
        let lines = backends[..split].iter().enumerate().map(|(i, b)| BackendLine::of(*b, latency(i), keep)).collect();
        let rest = &backends[split..];
        let others = (!rest.is_empty()).then(|| {
            let (mut statuses, mut answering) = (PerStatus::default(), 0);
            for b in rest.iter().filter(|b| b.total() > 0) {
                statuses.add(b);
                answering += 1;
            }
            let line = BackendLine::of(statuses, latency(BACKEND_LINES), keep);
            Others { line, backends: rest.len() as u64, answering }
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
        let service = iv.tally.service_time();
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
            backends: BackendRow::of(iv.tally, keep),
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
        let row = BackendRow::of(&tally, false).unwrap();
        assert_eq!(row.lines.len(), BACKEND_LINES);
        assert_eq!((row.lines[0].calls(), row.lines[1].calls()), (10, 0));
        let others = row.others.as_ref().unwrap();
        assert_eq!((others.backends, others.answering, others.line.calls()), (3, 2, 6));
        assert_eq!(others.line.statuses.get(Code::Unavailable), 1);
        let p99 = others.line.p99.as_secs_f64();
        assert!((p99 / 0.050 - 1.0).abs() < 0.01, "{p99}");
        assert_eq!(row.calls(), 16);
        assert_eq!(BackendRow::of(&Tally::default(), false), None, "a run not broken down by backend has no row");
    }
}
