//! `--format influx`: InfluxDB line protocol. One `rpcmeter_run` line as ghz's
//! `influx-summary` writes its `ghz_run` line (the same field names, latencies in integer
//! nanoseconds, the run's start as the timestamp), then one `rpcmeter_interval` line per
//! interval of the series, stamped at the interval's end. ghz's `influx-details` (a line per
//! call) has no counterpart here: a run keeps no per-call list in memory (`--csv-details`
//! streams calls to a file instead).
use super::prometheus::mode;
use super::{Export, Summary};
use crate::grpc::status;
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
    fn render(&self, s: &Summary) -> String {
        let mut tags: Vec<(String, String)> = s.meta.name.iter().map(|n| ("name".to_string(), tag(n))).collect();
        tags.extend([
            ("call".into(), tag(&s.call)),
            ("target".into(), tag(&s.target)),
            ("mode".into(), mode(&s.pacer).into()),
            ("c".into(), s.concurrency.to_string()),
            ("end_reason".into(), tag(s.ended.as_str())),
            ("has_errors".into(), (s.requests.failed > 0).to_string()),
        ]);
        // `tag_` keeps a --tag from colliding with the tags above (a key twice is no line).
        tags.extend(s.meta.tags.iter().map(|(k, v)| (format!("tag_{}", tag(k)), tag(v))));
        let tags: String = tags.iter().map(|(k, v)| format!(",{k}={v}")).collect();

        let r = &s.requests;
        let l = &s.latency;
        let mut fields = vec![
            format!("count={}i", r.total),
            format!("ok={}i", r.ok),
            format!("errors={}i", r.failed),
            format!("retries={}i", r.retries),
            format!("total={}", nanos(s.duration)),
            format!("rps={}", s.throughput_rps),
            format!("average={}", nanos(l.mean)),
            format!("fastest={}", nanos(l.min)),
            format!("slowest={}", nanos(l.max)),
            format!("stdev={}", nanos(l.stdev)),
            format!("median={}", nanos(l.percentile(50.0))),
        ];
        for (percent, value) in &l.percentiles {
            fields.push(format!("{}={}", crate::stats::Statistic::Percentile(*percent).key(), nanos(*value)));
        }
        // Beside the headline (every due call, the unsent at their lower bound): the calls sent only.
        if let Some(sent) = &s.sent_only {
            let sent = crate::stats::Latency::of(&sent.call_latency);
            fields.push(format!("unsent={}i", r.unsent));
            for (percent, value) in &sent.percentiles {
                fields.push(format!("sent_{}={}", crate::stats::Statistic::Percentile(*percent).key(), nanos(*value)));
            }
        }
        for (code, n) in s.statuses.nonzero() {
            fields.push(format!("status_{}={n}i", status::name(code)));
        }
        if let Some(m) = &s.messages {
            fields.push(format!("messages_sent={}i", m.sent));
            fields.push(format!("messages_received={}i", m.received));
            fields.push(format!("messages_sent_rate={}", m.sent_per_s));
            fields.push(format!("messages_received_rate={}", m.received_per_s));
            if let Some(l) = &m.round_trip {
                fields.push(format!("round_trip_median={}", nanos(l.percentile(50.0))));
                fields.push(format!("round_trip_p99={}", nanos(l.percentile(99.0))));
            }
            if let Some(l) = &m.first_message {
                fields.push(format!("first_message_median={}", nanos(l.percentile(50.0))));
                fields.push(format!("first_message_p99={}", nanos(l.percentile(99.0))));
            }
        }
        fields.push(format!("client_cpu={}", nanos(s.client.cpu)));
        fields.push(format!("client_max_rss_bytes={}i", s.client.max_rss_bytes));
        if !s.assertions.is_empty() {
            let breached: Vec<&str> = s.breached().iter().map(|a| a.assertion.text.as_str()).collect();
            fields.push(format!("assertions_breached={}i", breached.len()));
            fields.push(format!("breached={}", string_field(&breached.join(","))));
        }
        let mut out = String::new();
        let _ = writeln!(out, "rpcmeter_run{tags} {} {}", fields.join(","), timestamp(s.meta.started_at));
        for row in &s.intervals {
            let _ = writeln!(
                out,
                "rpcmeter_interval{tags},phase={} calls={}i,ok={}i,failed={}i,rps={},p50={},p90={},p99={},max={},\
                 client_cpu_total={},client_rss_bytes={}i {}",
                row.phase(),
                row.calls,
                row.ok,
                row.failed,
                crate::stats::rate(row.calls, row.length),
                nanos(row.p50),
                nanos(row.p90),
                nanos(row.p99),
                nanos(row.max),
                nanos(row.client_cpu_total),
                row.client_rss_bytes,
                timestamp(s.meta.started_at + row.at),
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Beside the headline (every due call), the calls sent only, when some were never sent.
    #[test]
    fn the_sent_only_percentiles_stand_beside_the_headline() {
        let text = Influx.render(&crate::analysis::fixture::with_unsent(10));
        let run = text.lines().next().unwrap();
        assert!(run.contains(",unsent=10i,") && run.contains(",sent_p99="), "{run}");
        assert!(!Influx.render(&crate::analysis::fixture::with_unsent(0)).contains("sent_p99"));
    }

    #[test]
    fn tags_and_strings_are_escaped() {
        assert_eq!(tag("a b,c=d"), "a\\ b\\,c\\=d");
        assert_eq!(tag(""), "-");
        assert_eq!(string_field("say \"hi\""), "\"say \\\"hi\\\"\"");
    }
}
