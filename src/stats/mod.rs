//! Statistics: the one vocabulary of latency statistics (reports, assertions and the JSON
//! keys all come from `Statistic`), and the summaries made from recorded histograms.
pub mod assertions;
pub mod compare;
pub mod describe;
pub mod histogram;
pub mod steady;

use hdrhistogram::Histogram;
use std::time::Duration;

/// A statistic of a latency distribution. `Percentile` holds a percent in (0, 100].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Statistic {
    Min,
    Mean,
    Stdev,
    Max,
    Percentile(f64),
}

/// The percentiles every report prints, in order.
pub const REPORTED_PERCENTILES: [f64; 9] = [10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 99.99];

impl Statistic {
    /// `min`, `mean`, `stdev`, `max`, or any percentile as `pNN` (`p42`, `p99.9`; `p999` and
    /// `p9999` as the JSON keys spell 99.9 and 99.99). `None` for anything else.
    pub fn parse(name: &str) -> Option<Statistic> {
        match name.trim() {
            "min" => Some(Statistic::Min),
            "mean" | "avg" => Some(Statistic::Mean),
            "stdev" => Some(Statistic::Stdev),
            "max" => Some(Statistic::Max),
            "p999" => Some(Statistic::Percentile(99.9)),
            "p9999" => Some(Statistic::Percentile(99.99)),
            other => {
                let digits = other.strip_prefix('p')?;
                // Digits and one dot only: "p1e2", "pinf" and "p-5" are not percentiles.
                if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit() || c == '.') {
                    return None;
                }
                let percent: f64 = digits.parse().ok()?;
                (percent > 0.0 && percent <= 100.0).then_some(Statistic::Percentile(percent))
            }
        }
    }

    /// How people write it: `p99.9`, `mean`.
    pub fn label(&self) -> String {
        match self {
            Statistic::Min => "min".into(),
            Statistic::Mean => "mean".into(),
            Statistic::Stdev => "stdev".into(),
            Statistic::Max => "max".into(),
            Statistic::Percentile(p) => format!("p{p}"),
        }
    }

    /// Its key in JSON results: the label without the dot (`p999`), as results always had.
    pub fn key(&self) -> String {
        self.label().replace('.', "")
    }

    /// Its value in `h` (nanoseconds recorded); zero for an empty histogram.
    pub fn of(&self, h: &Histogram<u64>) -> Duration {
        if h.is_empty() {
            return Duration::ZERO;
        }
        let nanos = match self {
            Statistic::Min => h.min() as f64,
            Statistic::Mean => h.mean(),
            Statistic::Stdev => h.stdev(),
            Statistic::Max => h.max() as f64,
            // p / 100 rounded to 8 decimals: 99.9 / 100 is 0.9990000000000001 in floating
            // point, which moves the percentile to the next sample at a bucket boundary.
            Statistic::Percentile(p) => h.value_at_quantile((p * 1e6).round() / 1e8) as f64,
        };
        Duration::from_nanos(nanos.round() as u64)
    }
}

/// A latency distribution summarised: count, min, mean, stdev, max and the reported percentiles.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Latency {
    pub count: u64,
    pub min: Duration,
    pub mean: Duration,
    pub stdev: Duration,
    pub max: Duration,
    /// (percent, value) for each of `REPORTED_PERCENTILES`.
    pub percentiles: Vec<(f64, Duration)>,
}

impl Latency {
    pub fn of(h: &Histogram<u64>) -> Latency {
        Latency {
            count: h.len(),
            min: Statistic::Min.of(h),
            mean: Statistic::Mean.of(h),
            stdev: Statistic::Stdev.of(h),
            max: Statistic::Max.of(h),
            percentiles: REPORTED_PERCENTILES.iter().map(|&p| (p, Statistic::Percentile(p).of(h))).collect(),
        }
    }

    /// A reported percentile; zero when `percent` is not one of `REPORTED_PERCENTILES`.
    pub fn percentile(&self, percent: f64) -> Duration {
        self.percentiles.iter().find(|(p, _)| *p == percent).map_or(Duration::ZERO, |&(_, v)| v)
    }

    /// Every statistic with its value, in report order: min, mean, stdev, percentiles, max.
    pub fn statistics(&self) -> Vec<(Statistic, Duration)> {
        let mut all = vec![(Statistic::Min, self.min), (Statistic::Mean, self.mean), (Statistic::Stdev, self.stdev)];
        all.extend(self.percentiles.iter().map(|&(p, v)| (Statistic::Percentile(p), v)));
        all.push((Statistic::Max, self.max));
        all
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::shard::Tally;
    use tonic::Code;

    #[test]
    fn latency_summary_of_a_known_distribution() {
        let mut s = Tally::default();
        for ms in 1..=100u64 {
            s.record_call(Duration::from_millis(ms), Code::Ok, false);
        }
        let l = Latency::of(&s.call_latency);
        let near = |d: Duration, ms: f64| (d.as_secs_f64() * 1e3 - ms).abs() < ms * 1e-3 + 1e-3;
        assert_eq!(l.count, 100);
        assert!(near(l.percentile(50.0), 50.0), "{:?}", l.percentile(50.0));
        assert!(near(l.percentile(99.0), 99.0));
        assert!(near(l.percentile(10.0), 10.0));
        assert!(near(l.max, 100.0) && near(l.min, 1.0) && near(l.mean, 50.5));
        assert!(near(Statistic::Percentile(42.0).of(&s.call_latency), 42.0));
        // 99.9 % of 1000 samples is the 999th, not the 1000th (99.9 / 100 > 0.999 in f64).
        let mut h = crate::record::shard::new_histogram();
        for v in 1..=1000u64 {
            h.record(v * 1000).unwrap();
        }
        assert_eq!(Statistic::Percentile(99.9).of(&h), Duration::from_nanos(h.value_at_quantile(0.999)));
        assert_eq!(rate(100, Duration::from_secs(4)), 25.0);
        assert_eq!(rate(100, Duration::ZERO), 0.0);
    }

    #[test]
    fn statistics_parse_as_people_write_them() {
        assert_eq!(Statistic::parse("p99.9"), Some(Statistic::Percentile(99.9)));
        assert_eq!(Statistic::parse("p999"), Some(Statistic::Percentile(99.9)));
        assert_eq!(Statistic::parse("p42"), Some(Statistic::Percentile(42.0)));
        assert_eq!(Statistic::parse("mean"), Some(Statistic::Mean));
        for bad in ["p0", "p101", "p", "pinf", "p1e2", "p-5", "median", ""] {
            assert_eq!(Statistic::parse(bad), None, "{bad}");
        }
        assert_eq!(Statistic::Percentile(99.9).key(), "p999");
        assert_eq!(Statistic::Percentile(99.99).label(), "p99.99");
        // Every reported percentile's key is one parse understands.
        for p in REPORTED_PERCENTILES {
            assert_eq!(Statistic::parse(&Statistic::Percentile(p).key()), Some(Statistic::Percentile(p)));
        }
    }
}
