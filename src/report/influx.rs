//! `--format influx`: InfluxDB line protocol. One `rpcmeter_run` line as ghz's
//! `influx-summary` writes its `ghz_run` line (the same field names, latencies in integer
//! nanoseconds, the run's start as the timestamp), then one `rpcmeter_interval` line per
//! interval of the series, stamped at the interval's end. ghz's `influx-details` (a line per
//! call) has no counterpart here: a run keeps no per-call list in memory (`--csv-details`
//! streams calls to a file instead).
use super::Export;
use crate::result::{LatencySummary, Run};
use crate::stats::Statistic;
use std::fmt::Write as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub struct Influx;

/// A tag key or value: commas, equals signs and spaces escaped; an empty value becomes `-`
/// (line protocol has no empty tag values).
fn tag(text: &str) -> String {
    if text.is_empty() {
        return "-".into();
    }
    text.replace('\\', "\\\\").replace(',', "\\,").replace('=', "\\=").replace(' ', "\\ ").replace('\n', "\\n")
}

/// A string field value, quoted.
fn string_field(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

fn nanos(d: Duration) -> String {
    format!("{}i", d.as_nanos())
}

fn timestamp(at: SystemTime) -> u128 {
    at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos())
}

impl Export for Influx {
    fn render(&self, r: &Run) -> String {
        let tags = tags(r);
        let mut out = String::new();
        let started = r.started_at().unwrap_or(UNIX_EPOCH);
        let _ = writeln!(out, "rpcmeter_run{tags} {} {}", fields(r).join(","), timestamp(started));
        for row in r.intervals.iter().flatten() {
            let us = |v: f64| nanos(Duration::from_nanos((v * 1e3).round() as u64));
            let _ = writeln!(
                out,
                "rpcmeter_interval{tags},phase={} calls={}i,ok={}i,failed={}i,rps={},p50={},p90={},p99={},max={},\
                 client_cpu_total={},client_rss_bytes={}i {}",
                row.phase,
                row.calls,
                row.ok.unwrap_or(row.calls.saturating_sub(row.failed)),
                row.failed,
                row.rps,
                us(row.p50_us),
                us(row.p90_us),
                us(row.p99_us),
                us(row.max_us),
                nanos(Duration::try_from_secs_f64(row.client_cpu_total_s).unwrap_or_default()),
                row.client_rss_bytes,
                timestamp(started + Duration::try_from_secs_f64(row.t_s).unwrap_or_default()),
            );
        }
        out
    }
}

/// The tags every line carries: the run's name, call, target, mode and end, and its `--tag`s.
fn tags(r: &Run) -> String {
    let mut tags: Vec<(String, String)> = r.meta.name.iter().map(|n| ("name".to_string(), tag(n))).collect();
    tags.extend([
        ("call".into(), tag(&r.call)),
        ("target".into(), tag(&r.target)),
        ("mode".into(), r.mode.as_str().into()),
        ("c".into(), r.concurrency.to_string()),
        ("end_reason".into(), tag(r.meta.ended.as_str())),
        ("has_errors".into(), (r.requests.failed > 0).to_string()),
    ]);
    // `tag_` keeps a --tag from colliding with the tags above (a key twice is no line).
    tags.extend(r.meta.tags.iter().map(|(k, v)| (format!("tag_{}", tag(k)), tag(v))));
    tags.iter().map(|(k, v)| format!(",{k}={v}")).collect()
}

/// The run line's fields, named as ghz's `ghz_run` names them.
fn fields(r: &Run) -> Vec<String> {
    let q = &r.requests;
    let l = r.latency_us.latency();
    let mut fields = vec![
        format!("count={}i", q.total),
        format!("ok={}i", q.ok),
        format!("errors={}i", q.failed),
        format!("retries={}i", q.retries.unwrap_or(0)),
        format!("total={}", nanos(r.window())),
        format!("rps={}", r.throughput_rps),
        format!("average={}", nanos(l.mean)),
        format!("fastest={}", nanos(l.min)),
        format!("slowest={}", nanos(l.max)),
        format!("stdev={}", nanos(l.stdev)),
        format!("median={}", nanos(l.percentile(50.0))),
    ];
    for (percent, value) in &l.percentiles {
        fields.push(format!("{}={}", Statistic::Percentile(*percent).key(), nanos(*value)));
    }
    // Beside the headline (every due call, the unsent at their lower bound): the calls sent only.
    if let Some(sent) = &r.sent_latency_us {
        fields.push(format!("unsent={}i", q.unsent.unwrap_or(0)));
        for (percent, value) in &sent.latency().percentiles {
            fields.push(format!("sent_{}={}", Statistic::Percentile(*percent).key(), nanos(*value)));
        }
    }
    for (name, n) in r.statuses.iter().filter(|(_, n)| **n > 0) {
        fields.push(format!("status_{name}={n}i"));
    }
    if let Some(m) = &r.messages {
        fields.push(format!("messages_sent={}i", m.sent));
        fields.push(format!("messages_received={}i", m.received));
        fields.push(format!("messages_sent_rate={}", m.sent_per_s));
        fields.push(format!("messages_received_rate={}", m.received_per_s));
        for (name, l) in [("round_trip", &m.round_trip_us), ("first_message", &m.first_message_us)] {
            if let Some(l) = l.as_ref().map(LatencySummary::latency) {
                fields.push(format!("{name}_median={}", nanos(l.percentile(50.0))));
                fields.push(format!("{name}_p99={}", nanos(l.percentile(99.0))));
            }
        }
    }
    let c = r.client.clone().unwrap_or_default();
    fields.push(format!("client_cpu={}", nanos(Duration::try_from_secs_f64(c.cpu_s).unwrap_or_default())));
    fields.push(format!("client_max_rss_bytes={}i", c.max_rss_bytes));
    if r.assertions.as_ref().is_some_and(|a| !a.is_empty()) {
        let breached: Vec<&str> = r.breached().iter().map(|a| a.assertion.as_str()).collect();
        fields.push(format!("assertions_breached={}i", breached.len()));
        fields.push(format!("breached={}", string_field(&breached.join(","))));
    }
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Beside the headline (every due call), the calls sent only, when some were never sent.
    #[test]
    fn the_sent_only_percentiles_stand_beside_the_headline() {
        let render = |unsent| Influx.render(&crate::analysis::fixture::with_unsent(unsent));
        let text = render(10);
        let run = text.lines().next().unwrap();
        assert!(run.contains(",unsent=10i,") && run.contains(",sent_p99="), "{run}");
        assert!(!render(0).contains("sent_p99"));
    }

    #[test]
    fn tags_and_strings_are_escaped() {
        assert_eq!(tag("a b,c=d"), "a\\ b\\,c\\=d");
        assert_eq!(tag(""), "-");
        assert_eq!(string_field("say \"hi\""), "\"say \\\"hi\\\"\"");
    }
}
