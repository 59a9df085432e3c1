//! `--format prometheus`: the result in Prometheus' text exposition format, as ghz's
//! `prometheus` printer writes its result (gauges `*_run_*`, a histogram and a summary of
//! latency), for a Pushgateway or a node-exporter textfile collector. Unlike ghz, latencies
//! are in seconds, Prometheus' base unit. The text writer and the fixed latency buckets here
//! are also what the live endpoint (`--metrics-addr`, `sink::metrics`) serves, so a run's
//! live and final numbers line up bucket for bucket.
//!
//! The format is written by hand: it is a few line shapes (`# HELP`, `# TYPE`, `name{labels}
//! value`), and the crates that write it want their own metric objects filled one observation
//! at a time, while ours come as HDR histograms and counters already summed.
use super::{histogram, Export};
use crate::grpc::status;
use crate::result::{LatencySummary, Run, Slice};
use crate::stats::Statistic;
use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

pub struct Prometheus;

/// Upper bounds of the latency histogram buckets: 1-2-5 per decade from 10 µs to 50 s, fixed
/// so that series from different runs and scrapes add up (`+Inf` follows).
pub const LATENCY_BUCKETS: [Duration; 22] = {
    let mut out = [Duration::ZERO; 22];
    let mut decade = 10_000u64; // ns
    let mut i = 0;
    while i < 21 {
        out[i] = Duration::from_nanos(decade);
        out[i + 1] = Duration::from_nanos(decade * 2);
        out[i + 2] = Duration::from_nanos(decade * 5);
        decade *= 10;
        i += 3;
    }
    out[21] = Duration::from_secs(100);
    out
};

/// Cumulative counts of `h` (ns) at each of `LATENCY_BUCKETS`. HDR keeps 3 significant digits:
/// a value counts in a bucket when the lowest value of its HDR bucket is within it, so a
/// recorded 10 µs counts as `le="1e-05"` (the bounds are round and start HDR buckets).
pub fn bucket_counts(h: &Histogram<u64>) -> [u64; LATENCY_BUCKETS.len()] {
    let mut out = [0u64; LATENCY_BUCKETS.len()];
    for v in h.iter_recorded() {
        let value = Duration::from_nanos(h.lowest_equivalent(v.value_iterated_to()));
        let first = LATENCY_BUCKETS.partition_point(|&le| le < value);
        for count in &mut out[first..] {
            *count += v.count_at_value();
        }
    }
    out
}

/// A Prometheus text exposition being written: families with their HELP and TYPE, then
/// samples. Label values are escaped as the format requires.
#[derive(Default)]
pub struct Exposition {
    text: String,
}

pub type Labels<'a> = [(&'a str, &'a str)];

impl Exposition {
    pub fn family(&mut self, name: &str, kind: &str, help: &str) -> &mut Self {
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = writeln!(self.text, "# HELP {name} {help}\n# TYPE {name} {kind}");
        self
    }

    pub fn sample(&mut self, name: &str, labels: &Labels, value: f64) -> &mut Self {
        self.text.push_str(name);
        if !labels.is_empty() {
            self.text.push('{');
            for (i, (key, v)) in labels.iter().enumerate() {
                let v = v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
                let _ = write!(self.text, "{}{key}=\"{v}\"", if i > 0 { "," } else { "" });
            }
            self.text.push('}');
        }
        let _ = writeln!(self.text, " {}", number(value));
        self
    }

    /// One gauge family with one sample.
    pub fn gauge(&mut self, name: &str, help: &str, labels: &Labels, value: f64) -> &mut Self {
        self.family(name, "gauge", help).sample(name, labels, value)
    }

    /// A histogram family (seconds) from cumulative bucket counts, their sum and count.
    pub fn histogram(
        &mut self,
        name: &str,
        help: &str,
        labels: &Labels,
        buckets: &[u64; LATENCY_BUCKETS.len()],
        sum: Duration,
        count: u64,
    ) -> &mut Self {
        self.family(name, "histogram", help);
        for (le, n) in LATENCY_BUCKETS.iter().zip(buckets) {
            let le = number(le.as_secs_f64());
            self.sample(&format!("{name}_bucket"), &with(labels, ("le", &le)), *n as f64);
        }
        self.sample(&format!("{name}_bucket"), &with(labels, ("le", "+Inf")), count as f64);
        self.sample(&format!("{name}_sum"), labels, sum.as_secs_f64());
        self.sample(&format!("{name}_count"), labels, count as f64)
    }

    pub fn finish(self) -> String {
        self.text
    }
}

fn with<'a>(labels: &Labels<'a>, extra: (&'a str, &'a str)) -> Vec<(&'a str, &'a str)> {
    let mut all = labels.to_vec();
    all.push(extra);
    all
}

/// A sample value as the format spells it (`+Inf`, `NaN`, else Rust's shortest round trip).
fn number(x: f64) -> String {
    match x {
        x if x.is_nan() => "NaN".into(),
        x if x.is_infinite() => if x > 0.0 { "+Inf" } else { "-Inf" }.into(),
        x => format!("{x}"),
    }
}

/// The sum of the values in `h` (ns): its mean times its count, as HDR keeps no exact sum.
pub fn histogram_sum(h: &Histogram<u64>) -> Duration {
    Duration::from_secs_f64((h.mean() * h.len() as f64 / 1e9).max(0.0))
}

/// A label name from free text (a `--tag` key): letters, digits and `_`, not starting with a digit.
pub fn label_name(text: &str) -> String {
    let mut name: String = text.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        name.insert(0, '_');
    }
    name
}

impl Export for Prometheus {
    fn render(&self, r: &Run) -> String {
        let tags: Vec<(String, String)> =
            r.meta.tags.iter().map(|(k, v)| (format!("tag_{}", label_name(k)), v.clone())).collect();
        let mut labels: Vec<(&str, &str)> = vec![
            ("name", r.meta.name.as_deref().unwrap_or("")),
            ("call", &r.call),
            ("target", &r.target),
            ("mode", r.mode.as_str()),
            ("end_reason", r.meta.ended.as_str()),
        ];
        labels.extend(tags.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let mut out = Exposition::default();
        run_families(&mut out, r, &labels);
        messages(&mut out, r, &labels);
        client_and_assertions(&mut out, r, &labels);
        names_and_flows(&mut out, r, &labels);
        checks(&mut out, r, &labels);
        // Targets broken down by backend: each address's calls by status and its latency.
        if let Some(backends) = &r.backends {
            let help = "Measured calls answered by each backend, by final status";
            calls_by_status(&mut out, "rpcmeter_run_backend_calls", help, &labels, "backend", backends);
            let help = "Call latency percentiles of each backend";
            quantiles(&mut out, "rpcmeter_run_backend_latency_seconds", help, &labels, "backend", backends);
        }
        out.finish()
    }
}

/// The whole run's gauges, calls by status, and its call latency (histogram and summary)
/// and, open loop, schedule lag.
fn run_families(out: &mut Exposition, r: &Run, labels: &Labels) {
    let q = &r.requests;
    let l = r.latency_us.latency();
    let h = histogram(&r.histograms.call_latency);
    out.gauge("rpcmeter_run_count", "Measured calls answered", labels, q.total as f64)
        .gauge("rpcmeter_run_errors", "Measured calls that did not end OK", labels, q.failed as f64)
        .gauge("rpcmeter_run_retries", "Attempts beyond the first of each call", labels, q.retries.unwrap_or(0) as f64)
        .gauge("rpcmeter_run_duration_seconds", "The measured window", labels, r.duration_s)
        .gauge("rpcmeter_run_rps", "Calls per second of the measured window", labels, r.throughput_rps)
        .gauge("rpcmeter_run_average_seconds", "Mean call latency", labels, l.mean.as_secs_f64())
        .gauge("rpcmeter_run_fastest_seconds", "Fastest call", labels, l.min.as_secs_f64())
        .gauge("rpcmeter_run_slowest_seconds", "Slowest call", labels, l.max.as_secs_f64());
    out.family("rpcmeter_run_calls", "gauge", "Measured calls by final gRPC status");
    for (name, n) in r.statuses.iter().filter(|(_, n)| **n > 0) {
        out.sample("rpcmeter_run_calls", &with(labels, ("status", name)), *n as f64);
    }
    out.histogram(
        "rpcmeter_run_histogram_seconds",
        "Call latency, fixed log-spaced buckets",
        labels,
        &bucket_counts(&h),
        histogram_sum(&h),
        h.len(),
    );
    summary(out, "rpcmeter_run_latency_seconds", "Call latency percentiles", labels, &r.latency_us, &h);
    if let Some(sent) = &r.sent_latency_us {
        // Beside the headline, which counts the calls never sent at their lower bound.
        let sent_h = histogram(r.histograms.sent_call_latency.as_deref().unwrap_or_default());
        let help = "Open loop: call latency percentiles of the calls sent only";
        summary(out, "rpcmeter_run_sent_latency_seconds", help, labels, sent, &sent_h);
    }
    if let Some(lag) = &r.schedule_lag_us {
        let lag_h = histogram(r.histograms.schedule_lag.as_deref().unwrap_or_default());
        let help = "Open loop: actual minus intended send time";
        summary(out, "rpcmeter_run_schedule_lag_seconds", help, labels, lag, &lag_h);
    }
}

/// Streaming methods: messages each way, their rates, and their latencies.
fn messages(out: &mut Exposition, r: &Run, labels: &Labels) {
    let Some(m) = &r.messages else { return };
    out.gauge("rpcmeter_run_messages_sent", "Streaming: request messages sent", labels, m.sent as f64)
        .gauge("rpcmeter_run_messages_received", "Streaming: response messages received", labels, m.received as f64)
        .gauge("rpcmeter_run_messages_sent_per_second", "Streaming: messages sent per second", labels, m.sent_per_s)
        .gauge(
            "rpcmeter_run_messages_received_per_second",
            "Streaming: messages received per second",
            labels,
            m.received_per_s,
        );
    if let Some(round_trip) = &m.round_trip_us {
        let help = "Bidi ping-pong: a request message to its response";
        let h = histogram(m.round_trip_histogram.as_deref().unwrap_or_default());
        summary(out, "rpcmeter_run_round_trip_seconds", help, labels, round_trip, &h);
    }
    if let Some(first) = &m.first_message_us {
        let help = "Server streams: the stream's start to its first message";
        let h = histogram(m.first_message_histogram.as_deref().unwrap_or_default());
        summary(out, "rpcmeter_run_first_message_seconds", help, labels, first, &h);
    }
}

/// The client's own CPU and memory, and each `--assert` as 1 (held) or 0.
fn client_and_assertions(out: &mut Exposition, r: &Run, labels: &Labels) {
    let c = r.client.clone().unwrap_or_default();
    out.gauge("rpcmeter_run_client_cpu_seconds", "The client's user+system CPU time", labels, c.cpu_s).gauge(
        "rpcmeter_run_client_max_rss_bytes",
        "The client's peak resident memory",
        labels,
        c.max_rss_bytes as f64,
    );
    let assertions = r.assertions.as_deref().unwrap_or_default();
    if !assertions.is_empty() {
        out.family("rpcmeter_run_assertion_ok", "gauge", "1 when the --assert check held, else 0");
        for a in assertions {
            let held = if a.ok { 1.0 } else { 0.0 };
            out.sample("rpcmeter_run_assertion_ok", &with(labels, ("assertion", &a.assertion)), held);
        }
    }
}

/// `--workload`: each call name's calls by status and latency; each flow's by how it ended.
fn names_and_flows(out: &mut Exposition, r: &Run, labels: &Labels) {
    if let Some(names) = &r.calls_by_name {
        let help = "--workload: measured calls of each name by final status";
        calls_by_status(out, "rpcmeter_run_name_calls", help, labels, "call_name", names);
        let help = "--workload: call latency percentiles of each name";
        quantiles(out, "rpcmeter_run_name_latency_seconds", help, labels, "call_name", names);
    }
    let Some(flows) = &r.flows else { return };
    let help =
        "--workload: measured flows of each flow by outcome (ok, a failed status, stopped by a check, a capture error)";
    out.family("rpcmeter_run_flows", "gauge", help);
    for (name, flow) in flows {
        let (stopped_by_check, capture_errors) = flow.stopped();
        let ok_status = flow.statuses.get(status::name(tonic::Code::Ok)).copied().unwrap_or(0);
        let outcomes = [
            ("ok", flow.requests.ok),
            ("failed_status", flow.requests.total.saturating_sub(ok_status)),
            ("stopped_by_check", stopped_by_check),
            ("capture_error", capture_errors),
        ];
        for (outcome, n) in outcomes {
            let labels = [with(labels, ("flow", name)), vec![("outcome", outcome)]].concat();
            out.sample("rpcmeter_run_flows", &labels, n as f64);
        }
    }
    let help = "--workload: latency percentiles of each flow, from its start to its last answer";
    quantiles(out, "rpcmeter_run_flow_latency_seconds", help, labels, "flow", flows);
}

/// `--workload` checks: each one's passes and failures, by its place in the workload.
fn checks(out: &mut Exposition, r: &Run, labels: &Labels) {
    let Some(checks) = r.checks.as_ref().filter(|c| !c.is_empty()) else { return };
    out.family("rpcmeter_run_checks", "gauge", "--workload: each check's results (pass, fail)");
    for (position, c) in checks.iter().enumerate() {
        // The check's place in the workload: two identical checks are two series.
        let position = position.to_string();
        for (result, n) in [("pass", c.pass), ("fail", c.fail)] {
            let labels = [
                with(labels, ("call_name", &c.call)),
                vec![("check", &c.expression), ("position", &position), ("result", result)],
            ]
            .concat();
            out.sample("rpcmeter_run_checks", &labels, n as f64);
        }
    }
}

/// A breakdown's calls (by call name, by backend) by final status, one sample each.
fn calls_by_status(
    out: &mut Exposition,
    family: &str,
    help: &str,
    labels: &Labels,
    key: &str,
    slices: &BTreeMap<String, Slice>,
) {
    out.family(family, "gauge", help);
    for (name, slice) in slices {
        for (status, n) in slice.statuses.iter().filter(|(_, n)| **n > 0) {
            let labels = [with(labels, (key, name)), vec![("status", status)]].concat();
            out.sample(family, &labels, *n as f64);
        }
    }
}

/// A breakdown's p50, p90 and p99 (of call names, flows, backends), one sample each.
fn quantiles(
    out: &mut Exposition,
    family: &str,
    help: &str,
    labels: &Labels,
    key: &str,
    slices: &BTreeMap<String, Slice>,
) {
    out.family(family, "gauge", help);
    for (name, slice) in slices {
        let latency = histogram(&slice.histogram);
        for p in [50.0, 90.0, 99.0] {
            let q = number(p / 100.0);
            let labels = [with(labels, (key, name)), vec![("quantile", &q)]].concat();
            let value = Statistic::Percentile(p).of(&latency);
            out.sample(family, &labels, value.as_secs_f64());
        }
    }
}

/// A summary family: the reported percentiles as quantiles, with sum and count.
fn summary(
    out: &mut Exposition,
    name: &str,
    help: &str,
    labels: &Labels,
    latency: &LatencySummary,
    h: &Histogram<u64>,
) {
    out.family(name, "summary", help);
    for (percent, value) in &latency.latency().percentiles {
        let q = number(percent / 100.0);
        out.sample(name, &with(labels, ("quantile", &q)), value.as_secs_f64());
    }
    out.sample(&format!("{name}_sum"), labels, histogram_sum(h).as_secs_f64());
    out.sample(&format!("{name}_count"), labels, h.len() as f64);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_log_spaced_and_cumulative() {
        assert_eq!(LATENCY_BUCKETS[0], Duration::from_micros(10));
        assert_eq!(LATENCY_BUCKETS[2], Duration::from_micros(50));
        assert_eq!(LATENCY_BUCKETS[20], Duration::from_secs(50));
        assert!(LATENCY_BUCKETS.windows(2).all(|w| w[0] < w[1]));
        let mut h = Histogram::<u64>::new(3).unwrap();
        for us in [5u64, 10, 11, 150, 150, 3_000_000] {
            h.record(us * 1000).unwrap();
        }
        let counts = bucket_counts(&h);
        // <= 10 µs: 5 and 10; <= 20 µs: + 11; <= 200 µs: + both 150s; 3 s only from 5 s on.
        assert_eq!(&counts[..6], &[2, 3, 3, 3, 5, 5]);
        assert_eq!(counts[LATENCY_BUCKETS.iter().position(|&b| b == Duration::from_secs(2)).unwrap()], 5);
        assert_eq!(counts[LATENCY_BUCKETS.iter().position(|&b| b == Duration::from_secs(5)).unwrap()], 6);
    }

    /// Beside the headline (every due call), the calls sent only, when some were never sent.
    #[test]
    fn the_sent_only_percentiles_stand_beside_the_headline() {
        let render = |unsent| Prometheus.render(&crate::analysis::fixture::with_unsent(unsent));
        let text = render(10);
        let line =
            |name: &str| text.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("{text}")).to_string();
        assert!(line("rpcmeter_run_latency_seconds_count").ends_with(" 110"), "{text}");
        assert!(line("rpcmeter_run_sent_latency_seconds_count").ends_with(" 100"), "{text}");
        assert!(!render(0).contains("rpcmeter_run_sent_latency_seconds"));
    }

    #[test]
    fn label_values_and_names_are_escaped() {
        let mut e = Exposition::default();
        e.gauge("m", "help", &[("a", "x\"y\\z\nw")], 1.5);
        assert_eq!(e.finish(), "# HELP m help\n# TYPE m gauge\nm{a=\"x\\\"y\\\\z\\nw\"} 1.5\n");
        assert_eq!(label_name("team-a.b"), "team_a_b");
        assert_eq!(label_name("1x"), "_1x");
        assert_eq!(number(f64::INFINITY), "+Inf");
    }
}
