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
    /// Open loop with calls (flows) due but never sent: `latency_us` counts them at their
    /// lower bound; these are of the ones sent only (absent: the same as `latency_us`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_latency_us: Option<LatencySummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_histogram: Option<String>,
    /// A call name's method (`calls_by_name`): slices of one name merge only when it agrees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// A flow's steps, its call names in order (`flows`): must agree too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<Vec<String>>,
    /// A flow's runs that a check (`stop_on_check_failure`) or a capture error ended early,
    /// every call OK: added by merge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by_check: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture_errors: Option<u64>,
    /// Keys a newer minor version added: kept as they are, and required equal to merge.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

impl Slice {
    /// A flow's runs ended early, by a check and by a capture error.
    pub fn stopped(&self) -> (u64, u64) {
        (self.stopped_by_check.unwrap_or(0), self.capture_errors.unwrap_or(0))
    }
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

    /// The summary in the model's units again (the inverse of `of`): each statistic to the
    /// ns it was written from; one the summary lacks is zero, and percentiles are the
    /// reported ones it has.
    pub fn latency(&self) -> Latency {
        let at = |stat: Statistic| self.get_ns(stat).unwrap_or_default();
        let percentiles = crate::stats::REPORTED_PERCENTILES
            .iter()
            .filter_map(|&p| Some((p, self.get_ns(Statistic::Percentile(p))?)))
            .collect();
        Latency {
            count: self.count,
            min: at(Statistic::Min),
            mean: at(Statistic::Mean),
            stdev: at(Statistic::Stdev),
            max: at(Statistic::Max),
            percentiles,
        }
    }

    /// A statistic rounded to the ns (`units::micros` writes ns / 1000), None when absent or
    /// not a latency.
    fn get_ns(&self, stat: Statistic) -> Option<Duration> {
        let us = self.micros(stat).filter(|us| us.is_finite() && *us >= 0.0 && *us < 1e15)?;
        Some(Duration::from_nanos((us * 1e3).round() as u64))
    }

    /// Of no value: no count and every statistic 0 (how a result writes an empty histogram's
    /// summary; a summary written without `count` still has its statistics).
    pub fn is_empty(&self) -> bool {
        self.count == 0 && self.stats.values().all(|us| *us == 0.0)
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

/// Slices of one name, added: counts and statuses summed, histograms merged, summarised again.
#[derive(Default)]
pub struct SliceSum {
    counts: Counts,
    statuses: BTreeMap<String, u64>,
    latency: Option<Histogram<u64>>,
    /// The sent-only latencies, once a slice has them (each slice's own, else its latency).
    sent: Option<Histogram<u64>>,
    /// The first slice's own keys (method, steps, stop counts so far, newer keys).
    first: Option<Slice>,
}

/// Two counts of a flow's early ends added; none where neither input has one.
fn add_counts(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.saturating_add(b)),
        (a, b) => a.or(b),
    }
}

impl SliceSum {
    /// Adds one slice; refused (why, in words) when its histogram is not one or what names
    /// it (a call name's method, a flow's steps, a newer key) differs from the slices before.
    pub fn add(&mut self, s: &Slice) -> Result<(), String> {
        match &mut self.first {
            Some(first) => {
                same("method", &first.method, &s.method)?;
                same("steps", &first.steps, &s.steps)?;
                same_other(&first.other, &s.other)?;
                first.stopped_by_check = add_counts(first.stopped_by_check, s.stopped_by_check);
                first.capture_errors = add_counts(first.capture_errors, s.capture_errors);
            }
            None => self.first = Some(Slice { histogram: String::new(), ..s.clone() }),
        }
        let c = &mut self.counts;
        c.total = c.total.saturating_add(s.requests.total);
        c.ok = c.ok.saturating_add(s.requests.ok);
        c.failed = c.failed.saturating_add(s.requests.failed);
        add_statuses(&mut self.statuses, &s.statuses);
        let h = from_text(&s.histogram).map_err(|why| format!("histogram {why}"))?;
        self.add_sent(s, &h)?;
        self.latency.get_or_insert_with(new_histogram).add(&h).map_err(|e| format!("histogram: {e}"))
    }

    /// A slice's sent-only latencies (its latency when it has none) into their sum, which
    /// starts with the first slice that has them (with the latencies of the slices before).
    fn add_sent(&mut self, s: &Slice, latency: &Histogram<u64>) -> Result<(), String> {
        let own =
            s.sent_histogram.as_deref().map(from_text).transpose().map_err(|why| format!("sent_histogram {why}"))?;
        if self.sent.is_none() && own.is_some() {
            self.sent = Some(self.latency.clone().unwrap_or_else(new_histogram));
        }
        match &mut self.sent {
            Some(sent) => sent.add(own.as_ref().unwrap_or(latency)).map_err(|e| format!("sent_histogram: {e}")),
            None => Ok(()),
        }
    }

    /// The sum, its throughput by `rate` (calls per second of the window its calls share).
    pub fn finish(self, rate: &dyn Fn(u64) -> f64) -> Slice {
        let latency = self.latency.unwrap_or_else(new_histogram);
        Slice {
            throughput_rps: rate(self.counts.total),
            requests: self.counts,
            statuses: self.statuses,
            latency_us: LatencySummary::of_histogram(&latency),
            histogram: to_text(&latency),
            sent_latency_us: self.sent.as_ref().map(LatencySummary::of_histogram),
            sent_histogram: self.sent.as_ref().map(to_text),
            ..self.first.unwrap_or_default()
        }
    }
}

/// What names a slice (its method, its steps) agrees with the slices before.
fn same<T: PartialEq + Serialize>(key: &str, before: &Option<T>, now: &Option<T>) -> Result<(), String> {
    if before == now {
        return Ok(());
    }
    let show = |v: &Option<T>| v.as_ref().and_then(|v| serde_json::to_string(v).ok()).unwrap_or("none".into());
    Err(format!("{key} {} is not the other inputs' {}", show(now), show(before)))
}

fn same_other(before: &BTreeMap<String, Value>, now: &BTreeMap<String, Value>) -> Result<(), String> {
    let keys = before.keys().chain(now.keys());
    match keys.into_iter().find(|k| before.get(*k) != now.get(*k)) {
        None => Ok(()),
        Some(key) => same(key, &before.get(key).cloned(), &now.get(key).cloned()),
    }
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
