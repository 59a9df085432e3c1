//! A slice: the calls of a run, or of one part of it (a call name, a flow, a backend, a shard),
//! counted, summarised and kept as a histogram, so that slices add exactly.
use crate::record::shard::{from_text, new_histogram, to_text};
use crate::stats::{Latency, Statistic};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct Slice {
    pub requests: Counts,
    #[serde(default)]
    pub throughput_rps: f64,
    #[serde(default)]
    pub statuses: BTreeMap<String, u64>,
    #[serde(default)]
    pub latency_us: LatencySummary,
    /// HdrHistogram text of the latencies (ns), as every result holds them.
    #[serde(default)]
    pub histogram: String,
    /// What a kind of slice adds (a call name's "method", a flow's "steps"): slices of one
    /// name merge only when these agree.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(default)]
pub struct Counts {
    pub total: u64,
    pub ok: u64,
    pub failed: u64,
}

/// A latency summary in µs (to the ns, units::micros): the count, and each statistic by its JSON key (p50, p999, ...).
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct LatencySummary {
    #[serde(default)]
    pub count: u64,
    #[serde(flatten)]
    pub stats: BTreeMap<String, f64>,
}

impl LatencySummary {
    pub fn of(l: &Latency) -> LatencySummary {
        let stats = l.statistics().into_iter().map(|(stat, v)| (stat.key(), crate::units::micros(v))).collect();
        LatencySummary { count: l.count, stats }
    }

    pub fn of_histogram(h: &Histogram<u64>) -> LatencySummary {
        LatencySummary::of(&Latency::of(h))
    }

    /// A statistic in µs, when the summary has it.
    pub fn micros(&self, stat: Statistic) -> Option<f64> {
        self.stats.get(&stat.key()).copied()
    }

    /// A statistic as a Duration; None when absent or not a latency (negative, NaN, huge).
    pub fn get(&self, stat: Statistic) -> Option<Duration> {
        self.micros(stat).and_then(|us| Duration::try_from_secs_f64(us / 1e6).ok())
    }
}

/// Extras of a slice that count (a flow's early ends): added by merge, not required equal.
const SUMMED_EXTRAS: [&str; 2] = ["stopped_by_check", "capture_errors"];

/// Slices of one name, added: counts and statuses summed, histograms merged, summarised again.
pub struct SliceSum {
    counts: Counts,
    statuses: BTreeMap<String, u64>,
    latency: Histogram<u64>,
    extra: Option<BTreeMap<String, Value>>,
}

impl Default for SliceSum {
    fn default() -> SliceSum {
        SliceSum { counts: Counts::default(), statuses: BTreeMap::new(), latency: new_histogram(), extra: None }
    }
}

impl SliceSum {
    /// Adds one slice; refused (why, in words) when its histogram is not one or its extras
    /// (a call name's method) differ from those added before.
    pub fn add(&mut self, s: &Slice) -> Result<(), String> {
        // Counters among the extras add up; the others (a name's method, a flow's steps) must agree.
        let (counters, same): (BTreeMap<_, _>, BTreeMap<_, _>) =
            s.extra.clone().into_iter().partition(|(k, _)| SUMMED_EXTRAS.contains(&k.as_str()));
        match &mut self.extra {
            Some(before) => {
                let before_same: BTreeMap<_, _> = before
                    .iter()
                    .filter(|(k, _)| !SUMMED_EXTRAS.contains(&k.as_str()))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                if before_same != same {
                    return Err(extras_differ(&before_same, &same));
                }
                for (key, n) in counters {
                    let sum =
                        before.get(&key).and_then(Value::as_u64).unwrap_or(0).saturating_add(n.as_u64().unwrap_or(0));
                    before.insert(key, sum.into());
                }
            }
            None => self.extra = Some(s.extra.clone()),
        }
        let c = &mut self.counts;
        c.total = c.total.saturating_add(s.requests.total);
        c.ok = c.ok.saturating_add(s.requests.ok);
        c.failed = c.failed.saturating_add(s.requests.failed);
        add_statuses(&mut self.statuses, &s.statuses);
        let h = from_text(&s.histogram).map_err(|why| format!("histogram {why}"))?;
        self.latency.add(&h).map_err(|e| format!("histogram: {e}"))
    }

    /// The sum, its throughput by `rate` (calls per second of the window its calls share).
    pub fn finish(self, rate: &dyn Fn(u64) -> f64) -> Slice {
        Slice {
            throughput_rps: rate(self.counts.total),
            requests: self.counts,
            statuses: self.statuses,
            latency_us: LatencySummary::of_histogram(&self.latency),
            histogram: to_text(&self.latency),
            extra: self.extra.unwrap_or_default(),
        }
    }
}

fn extras_differ(before: &BTreeMap<String, Value>, now: &BTreeMap<String, Value>) -> String {
    let keys = before.keys().chain(now.keys());
    let key = keys.into_iter().find(|k| before.get(*k) != now.get(*k)).cloned().unwrap_or_default();
    let show = |v: Option<&Value>| v.map_or("none".to_string(), Value::to_string);
    format!("{key} {} is not the other inputs' {}", show(now.get(&key)), show(before.get(&key)))
}

pub fn add_statuses(sum: &mut BTreeMap<String, u64>, more: &BTreeMap<String, u64>) {
    for (name, n) in more {
        let count = sum.entry(name.clone()).or_default();
        *count = count.saturating_add(*n);
    }
}

/// Breakdowns (name -> slice) of several results added name by name; a name is matched by
/// name across the inputs; an error is (input, name, why).
pub fn merge_breakdown<'a>(
    maps: impl Iterator<Item = (&'a str, &'a BTreeMap<String, Slice>)>,
    rate: &dyn Fn(u64) -> f64,
) -> Result<BTreeMap<String, Slice>, (String, String, String)> {
    let mut names: BTreeMap<String, SliceSum> = BTreeMap::new();
    for (label, map) in maps {
        for (name, slice) in map {
            names.entry(name.clone()).or_default().add(slice).map_err(|why| (label.to_string(), name.clone(), why))?;
        }
    }
    Ok(names.into_iter().map(|(name, sum)| (name, sum.finish(rate))).collect())
}
