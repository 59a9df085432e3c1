//! What a log holds (`rpcmeter replay-info`): its methods, calls, time span, rate over time,
//! payload sizes, statuses and what cannot be replayed, read in one pass in bounded memory.
use super::calls::{Call, Calls, Leftovers, Limits};
use super::log::{Entries, Framing};
use super::source::Skip;
use crate::grpc::transport::CallKind;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::BufRead;
use std::time::Duration;

/// Distinct methods a log may hold (each keeps a histogram): a log of one service has few.
pub const MAX_METHODS: usize = 1000;
/// Distinct metadata keys listed.
const MAX_KEYS: usize = 100;
/// Rows of the rate over time.
const RATE_ROWS: usize = 20;

/// One method's calls.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Method {
    pub calls: u64,
    /// Calls with more than one message of the client, and of the server: the method's kind.
    pub client_streams: u64,
    pub server_streams: u64,
    /// Messages of the client and of the server, all calls together.
    pub client_messages: u64,
    pub server_messages: u64,
    /// Calls not sent by `run --replay`, each by its first reason (`Skip`).
    pub truncated: u64,
    pub no_request: u64,
    /// Status code -> calls; calls without an end are not in it.
    pub statuses: BTreeMap<u32, u64>,
    /// Logged latency (trailer time - header time), ns.
    #[serde(with = "crate::stats::histogram::as_text")]
    pub latency: Histogram<u64>,
    pub request_bytes: Sizes,
    pub response_bytes: Sizes,
}

/// Sizes seen: least, sum, most.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Sizes {
    pub min: u64,
    pub sum: u64,
    pub max: u64,
}

impl Sizes {
    fn add(&mut self, n: u64, first: bool) {
        self.min = if first { n } else { self.min.min(n) };
        self.max = self.max.max(n);
        self.sum = self.sum.saturating_add(n);
    }
}

impl Method {
    /// Calls `run --replay` sends.
    pub fn sendable(&self) -> u64 {
        self.calls - self.truncated - self.no_request
    }

    /// The method's kind, as its calls show it: a call with more than one message of the
    /// client makes it client streaming, of the server server streaming (both: bidi).
    pub fn kind(&self) -> CallKind {
        CallKind::of(self.client_streams > 0, self.server_streams > 0)
    }

    fn new() -> Method {
        Method {
            calls: 0,
            client_streams: 0,
            server_streams: 0,
            client_messages: 0,
            server_messages: 0,
            truncated: 0,
            no_request: 0,
            statuses: BTreeMap::new(),
            // 1 µs to an hour, 2 significant digits: about 25 KiB a method.
            latency: Histogram::new_with_bounds(1_000, 3_600_000_000_000, 2).expect("static bounds"),
            request_bytes: Sizes::default(),
            response_bytes: Sizes::default(),
        }
    }
}

/// Calls per period from the first call's start; the period doubles whenever the span would
/// need more rows than are kept, so a log of any span holds a few hundred counters.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Rate {
    pub period: Duration,
    pub counts: Vec<u64>,
}

impl Rate {
    const KEPT: usize = 512;

    fn new() -> Rate {
        Rate { period: Duration::from_millis(100), counts: Vec::new() }
    }

    fn add(&mut self, since_first: Duration) {
        let mut slot = (since_first.as_nanos() / self.period.as_nanos()) as usize;
        while slot >= Rate::KEPT {
            self.counts = self.counts.chunks(2).map(|pair| pair.iter().sum()).collect();
            self.period *= 2;
            slot = (since_first.as_nanos() / self.period.as_nanos()) as usize;
        }
        if self.counts.len() <= slot {
            self.counts.resize(slot + 1, 0);
        }
        self.counts[slot] += 1;
    }

    /// At most `rows` rows: (from, length, calls).
    pub fn rows(&self, rows: usize) -> Vec<(Duration, Duration, u64)> {
        let per = self.counts.len().div_ceil(rows.max(1)).max(1);
        let length = self.period * per as u32;
        self.counts.chunks(per).enumerate().map(|(i, c)| (length * i as u32, length, c.iter().sum())).collect()
    }
}

/// What a log holds (written whole for the shards of `run --shards`: `source::Scan`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Info {
    pub framing: Framing,
    pub bytes: u64,
    pub calls: u64,
    /// The first and last call's start, since the Unix epoch.
    pub first: Option<Duration>,
    pub last: Duration,
    pub methods: BTreeMap<String, Method>,
    /// Metadata keys and how many calls had each (at most `MAX_KEYS` keys).
    pub keys: BTreeMap<String, u64>,
    pub rate: Rate,
    pub leftovers: Leftovers,
    pub header_truncated: u64,
}

impl Info {
    /// Reads the whole log.
    pub fn read<R: BufRead>(input: R, framing: Option<Framing>, max_entry: u64) -> Result<Info, String> {
        let mut calls = Calls::new(Entries::new(input, framing, max_entry)?, Limits::default());
        let mut info = Info {
            framing: calls.entries().framing(),
            bytes: 0,
            calls: 0,
            first: None,
            last: Duration::ZERO,
            methods: BTreeMap::new(),
            keys: BTreeMap::new(),
            rate: Rate::new(),
            leftovers: Leftovers::default(),
            header_truncated: 0,
        };
        while let Some(call) = calls.next_call()? {
            info.add(&call)?;
        }
        info.bytes = calls.entries().offset();
        info.leftovers = calls.leftovers;
        Ok(info)
    }

    fn add(&mut self, call: &Call) -> Result<(), String> {
        let first = *self.first.get_or_insert(call.start);
        self.last = self.last.max(call.start);
        self.calls += 1;
        self.rate.add(call.start.saturating_sub(first));
        self.header_truncated += call.header_truncated as u64;
        if !self.methods.contains_key(&call.method) && self.methods.len() >= MAX_METHODS {
            return Err(format!("more than {MAX_METHODS} methods: not the log of a service?"));
        }
        let m = self.methods.entry(call.method.clone()).or_insert_with(Method::new);
        let seen = m.calls == 0;
        m.calls += 1;
        m.client_streams += (call.requests.len() > 1) as u64;
        m.server_streams += (call.responses > 1) as u64;
        m.client_messages += call.requests.len() as u64;
        m.server_messages += call.responses;
        match Skip::of(call) {
            Some(Skip::Truncated) => m.truncated += 1,
            Some(Skip::NoRequest) => m.no_request += 1,
            None => {}
        }
        if let Some(end) = call.end {
            *m.statuses.entry(end.status).or_default() += 1;
            let _ = m.latency.record(end.after.as_nanos().clamp(1_000, 3_600_000_000_000) as u64);
        }
        m.request_bytes.add(call.request_bytes(), seen);
        m.response_bytes.add(call.response_bytes, seen);
        for (key, _) in &call.metadata {
            if self.keys.len() < MAX_KEYS || self.keys.contains_key(key) {
                *self.keys.entry(key.clone()).or_default() += 1;
            }
        }
        Ok(())
    }

    /// Calls not sent by `run --replay`: (truncated, without a request).
    pub fn skipped(&self) -> (u64, u64) {
        self.methods.values().fold((0, 0), |(t, n), m| (t + m.truncated, n + m.no_request))
    }

    /// From the first call's start to the last one's.
    pub fn span(&self) -> Duration {
        self.last.saturating_sub(self.first.unwrap_or(self.last))
    }

    /// The report, as text; `secret` tells the metadata keys whose values are never sent nor
    /// written unless asked (the redaction rules).
    pub fn render(&self, name: &str, secret: &dyn Fn(&str) -> bool) -> String {
        use crate::units::{bytes, duration};
        use std::fmt::Write;
        let mut o = String::new();
        let _ = writeln!(o, "log: {name}: {} in {}", bytes(self.bytes), self.framing.as_str());
        let first = self
            .first
            .map_or("-".to_string(), |f| humantime::format_rfc3339_micros(std::time::UNIX_EPOCH + f).to_string());
        let span = self.span();
        let rate = match span.as_secs_f64() {
            s if s > 0.0 => format!(" ({:.1} calls/s)", (self.calls.saturating_sub(1)) as f64 / s),
            _ => String::new(),
        };
        let _ = writeln!(o, "calls: {} from {first} over {}{rate}", self.calls, duration(span));
        let (truncated, none) = self.skipped();
        let _ = writeln!(
            o,
            "not replayed: {truncated} with a message cut by the log's limit (payload_truncated), {none} without a request"
        );
        let l = &self.leftovers;
        let _ = writeln!(
            o,
            "incomplete: {} calls without their end in the log, {} entries of calls whose start is not in it, {} headers cut by the log's limit",
            l.unfinished, l.orphan_entries, self.header_truncated
        );
        let _ = writeln!(
            o,
            "\n| method | calls | statuses | p50 | p99 | max | request bytes min/mean/max | response bytes mean | kind | messages a call, client/server (mean) |"
        );
        let _ = writeln!(o, "|---|---|---|---|---|---|---|---|---|---|");
        for (path, m) in &self.methods {
            let statuses: Vec<String> = m
                .statuses
                .iter()
                .map(|(code, n)| format!("{} {n}", crate::grpc::status::name(tonic::Code::from_i32(*code as i32))))
                .collect();
            let q = |q: f64| match m.latency.is_empty() {
                true => "-".to_string(),
                false => duration(Duration::from_nanos(m.latency.value_at_quantile(q))),
            };
            let mean = |s: &Sizes| s.sum / m.calls.max(1);
            let per_call = |n: u64| n as f64 / m.calls.max(1) as f64;
            let _ = writeln!(
                o,
                "| {path} | {} | {} | {} | {} | {} | {}/{}/{} | {} | {} | {:.1}/{:.1} |",
                m.calls,
                statuses.join(", "),
                q(0.5),
                q(0.99),
                q(1.0),
                m.request_bytes.min,
                mean(&m.request_bytes),
                m.request_bytes.max,
                mean(&m.response_bytes),
                m.kind().as_str(),
                per_call(m.client_messages),
                per_call(m.server_messages)
            );
        }
        if !self.keys.is_empty() {
            let keys: Vec<String> = self
                .keys
                .iter()
                .map(|(k, n)| match secret(k) {
                    true => format!("{k} ({n}, a credential: not sent unless -m gives it)"),
                    false => format!("{k} ({n})"),
                })
                .collect();
            let _ = writeln!(o, "\nmetadata keys (calls): {}", keys.join(", "));
        }
        let _ = writeln!(o, "\n| from | calls | calls/s |");
        let _ = writeln!(o, "|---|---|---|");
        for (from, length, n) in self.rate.rows(RATE_ROWS) {
            let _ = writeln!(o, "| {} | {n} | {:.1} |", duration(from), n as f64 / length.as_secs_f64());
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::log::tests::{encode, unary};

    #[test]
    fn a_log_is_described_method_by_method() {
        let mut log = Vec::new();
        for i in 0..100u64 {
            let (method, status) = if i % 4 == 0 { ("/S/put", 14) } else { ("/S/get", 0) };
            log.extend(unary(i + 1, 1_000_000_000 + i * 10_000_000, method, &vec![1; i as usize], 2_000_000, status));
        }
        let info = Info::read(&encode(&log, Framing::Be32)[..], None, 1 << 20).unwrap();
        assert_eq!(info.calls, 100);
        assert_eq!(info.span(), Duration::from_millis(990));
        assert_eq!(info.methods["/S/put"].calls, 25);
        assert_eq!(info.methods["/S/put"].statuses[&14], 25);
        assert_eq!(info.methods["/S/get"].request_bytes.max, 99);
        let text = info.render("log.bin", &|_| false);
        assert!(text.contains("| /S/put | 25 | UNAVAILABLE 25 | 2.0"), "{text}");
        assert!(text.contains("calls: 100 from") && text.contains("(100.0 calls/s)"), "{text}");
    }

    #[test]
    fn the_rate_keeps_few_counters_whatever_the_span() {
        let mut rate = Rate::new();
        for s in [0u64, 1, 2, 86_400 * 365] {
            rate.add(Duration::from_secs(s));
        }
        assert!(rate.counts.len() <= Rate::KEPT);
        assert_eq!(rate.counts.iter().sum::<u64>(), 4);
        assert_eq!(rate.rows(20).iter().map(|r| r.2).sum::<u64>(), 4);
    }
}
