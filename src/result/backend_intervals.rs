//! `backend_intervals`: targets broken down by backend, interval by interval, so that a
//! reader sees when a backend went down, came back or slowed. Column by column: each line's
//! value number `i` is the interval `intervals[i]`'s. The first `lines` are the first backends
//! of the run's list of addresses, one each (at most record::intervals::BACKEND_LINES); the
//! backends past them are folded into one last line, so the series stays a few lines whatever
//! the number of addresses (docs/results.md).
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(default)]
pub struct BackendIntervals {
    pub lines: Vec<BackendSeries>,
    /// Calls that found no ready backend (they failed before reaching one), per interval: with
    /// every line's calls, they add up to the interval's `calls`.
    pub no_backend: Vec<u64>,
}

/// One backend's (or the folded backends') series.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(default)]
pub struct BackendSeries {
    /// The backend's address; the folded line's "(N other backends)".
    pub backend: String,
    /// The folded line only: how many backends it holds, and how many of them answered a
    /// call in each interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backends: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answering: Option<Vec<u64>>,
    pub calls: Vec<u64>,
    pub ok: Vec<u64>,
    /// Failed calls by final status, each status that occurred with its count per interval.
    pub failed: BTreeMap<String, Vec<u64>>,
    /// Call latency; null in an interval without calls.
    pub p50_us: Vec<Option<f64>>,
    pub p99_us: Vec<Option<f64>>,
    /// Each interval's latency histogram (2.6; null without calls), as the interval series
    /// carries them: in a shard's result and a merge of them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub histograms: Option<Vec<Option<String>>>,
}

impl BackendSeries {
    /// A line named `backend` with room for `intervals` values.
    pub fn named(backend: String, intervals: usize) -> BackendSeries {
        BackendSeries {
            backend,
            calls: Vec::with_capacity(intervals),
            ok: Vec::with_capacity(intervals),
            p50_us: Vec::with_capacity(intervals),
            p99_us: Vec::with_capacity(intervals),
            ..BackendSeries::default()
        }
    }

    /// Appends one interval's values: its calls, OK ones, failed ones by status and latency
    /// (none without calls).
    pub fn push(&mut self, calls: u64, ok: u64, failed: &[(&str, u64)], p50_p99_us: Option<(f64, f64)>) {
        let at = self.calls.len();
        self.calls.push(calls);
        self.ok.push(ok);
        for (status, n) in failed {
            let column = self.failed.entry(status.to_string()).or_default();
            column.resize(at, 0);
            column.push(*n);
        }
        for column in self.failed.values_mut() {
            column.resize(at + 1, 0);
        }
        self.p50_us.push(p50_p99_us.map(|p| p.0));
        self.p99_us.push(p50_p99_us.map(|p| p.1));
    }

    /// Failed calls of interval `i`, every status's.
    pub fn failed_at(&self, i: usize) -> u64 {
        self.failed.values().filter_map(|c| c.get(i)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_first_seen_late_is_zero_before_and_every_column_as_long_as_calls() {
        let mut line = BackendSeries::named("a:1".into(), 3);
        line.push(10, 10, &[], Some((1.0, 2.0)));
        line.push(5, 2, &[("UNAVAILABLE", 3)], Some((1.0, 9.0)));
        line.push(0, 0, &[], None);
        assert_eq!(line.failed["UNAVAILABLE"], vec![0, 3, 0]);
        assert_eq!((line.failed_at(1), line.failed_at(2)), (3, 0));
        assert_eq!(line.p99_us, vec![Some(2.0), Some(9.0), None]);
        let json = serde_json::to_value(&line).unwrap();
        assert_eq!(json["p50_us"][2], serde_json::Value::Null);
        assert!(json.get("backends").is_none(), "only the folded line says how many it holds");
    }
}
