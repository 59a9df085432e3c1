//! `--format table`: the human report: summary, percentiles, a latency histogram,
//! statuses and errors, the client's own cost and the notices that qualify the numbers.
use super::{describe_load, Export, Summary};
use crate::grpc::status;
use crate::load::pacer::Pacer;
use crate::stats::steady::Steadiness;
use crate::stats::{Latency, Statistic};
use crate::units::{bytes, duration};
use hdrhistogram::Histogram;
use std::fmt::Write;

pub struct Table;

impl Export for Table {
    fn render(&self, s: &Summary) -> String {
        render(s)
    }
}

fn percentile_rows(out: &mut String, l: &Latency) {
    for &(p, v) in &l.percentiles {
        let _ = writeln!(out, "  {:<8} {}", Statistic::Percentile(p).label(), duration(v));
    }
    let _ = writeln!(out, "  {:<8} {}", "max", duration(l.max));
}

/// Open loop: call latency (from the intended send) beside service time (from the actual send).
fn percentile_pairs(out: &mut String, call: &Latency, service: &Latency) {
    let _ = writeln!(out, "  {:<8} {:>12}  {:>12}", "", "call", "service");
    for (&(p, v), &(_, w)) in call.percentiles.iter().zip(&service.percentiles) {
        let _ = writeln!(out, "  {:<8} {:>12}  {:>12}", Statistic::Percentile(p).label(), duration(v), duration(w));
    }
    let _ = writeln!(out, "  {:<8} {:>12}  {:>12}", "max", duration(call.max), duration(service.max));
}

fn render(s: &Summary) -> String {
    let mut o = String::new();
    let r = &s.requests;
    let _ = writeln!(
        o,
        "{} {}  ({}, {} connection(s)){}",
        s.target,
        s.call,
        describe_load(s),
        s.connections,
        if s.partial() { "  [PARTIAL]" } else { "" }
    );
    let _ = writeln!(o, "\nSummary:");
    let _ = writeln!(
        o,
        "  Calls:       {} (ok {}, failed {}), attempts {}, retries {}, out of retries {}",
        r.total, r.ok, r.failed, r.attempts, r.retries, r.retry_exhausted
    );
    if r.unsent > 0 {
        let _ = writeln!(o, "  Unsent:      {} calls due before the end were never sent", r.unsent);
    }
    let _ = writeln!(o, "  Duration:    {:.2} s", s.duration.as_secs_f64());
    let _ = writeln!(o, "  Throughput:  {:.1} calls/s ({:.1} ok/s)", s.throughput_rps, s.ok_rps);
    let l = &s.latency;
    let _ = writeln!(
        o,
        "  Latency:     min {}, mean {}, stdev {}, max {}",
        duration(l.min),
        duration(l.mean),
        duration(l.stdev),
        duration(l.max)
    );
    if let Some(m) = &s.messages {
        let _ = writeln!(
            o,
            "  Messages:    {} sent ({:.1}/s), {} received ({:.1}/s); each call is a stream ({}), its latency the stream's duration",
            m.sent,
            m.sent_per_s,
            m.received,
            m.received_per_s,
            m.kind.as_str()
        );
        let line = |name: &str, l: &Latency| {
            format!(
                "  {name} p50 {}, p90 {}, p99 {}, max {} ({} messages)",
                duration(l.percentile(50.0)),
                duration(l.percentile(90.0)),
                duration(l.percentile(99.0)),
                duration(l.max),
                l.count
            )
        };
        if let Some(l) = &m.round_trip {
            let _ = writeln!(o, "{}", line("Round trip:  ", l));
        }
        if let Some(l) = &m.first_message {
            let _ = writeln!(o, "{}", line("First msg:   ", l));
        }
    }
    if let Some(w) = &s.warmup {
        let _ = writeln!(
            o,
            "  Warm-up:     {:.2} s, {} calls, {:.1} calls/s, p50 {}, p99 {} (excluded from the result)",
            w.duration.as_secs_f64(),
            w.calls,
            w.throughput_rps,
            duration(w.latency.percentile(50.0)),
            duration(w.latency.percentile(99.0))
        );
    }
    match s.pacer {
        Pacer::Open(..) => {
            let _ = writeln!(
                o,
                "\nLatency percentiles (call: intended send time to final answer; service: actual send to final answer):"
            );
            percentile_pairs(&mut o, l, &s.service_time);
        }
        _ => {
            let _ = writeln!(o, "\nLatency percentiles (call: first send to final answer):");
            percentile_rows(&mut o, l);
        }
    }
    if r.retries > 0 {
        let _ = writeln!(o, "\nAttempt latency percentiles (each attempt alone):");
        percentile_rows(&mut o, &s.attempt_latency);
    }
    if let Some(lag) = &s.schedule_lag {
        let _ = writeln!(
            o,
            "\nSchedule lag (actual - intended send): p50 {}, p99 {}, max {}; sends more than 1 ms behind \
             schedule: {} waiting for an in-flight slot, {} late by the client's wake-up",
            duration(lag.percentile(50.0)),
            duration(lag.percentile(99.0)),
            duration(lag.max),
            s.late_sends,
            s.late_wakeups
        );
    }
    if !s.measured.call_latency.is_empty() {
        let _ = writeln!(o, "\nLatency histogram (log scale: each bar's upper bound is a fixed ratio above the last):");
        bars(&mut o, &s.measured.call_latency);
    }
    if !s.rounds.is_empty() {
        let _ = writeln!(o, "\nRounds:");
        let warm = match s.warm_rounds {
            Some(Steadiness::Steady { from }) => from,
            _ => 0,
        };
        for (i, round) in s.rounds.iter().enumerate() {
            let tag = if i < warm { "  (warm-up)" } else { "" };
            let _ = writeln!(o, "  Took: {:.3} ms  RPS: {:.1}{tag}", round.took.as_secs_f64() * 1e3, round.rps);
        }
        let verdict = match s.warm_rounds {
            Some(Steadiness::Steady { from: 0 }) => "steady from the first round".to_string(),
            Some(Steadiness::Steady { from }) => format!("the first {from} round(s) were warm-up, steady after"),
            Some(Steadiness::NoSteadyState) => "no steady state: the rounds' times were still changing".to_string(),
            _ => "too few rounds to tell warm-up from steady state".to_string(),
        };
        let _ = writeln!(o, "  Rounds: {verdict}");
    }
    let _ = writeln!(
        o,
        "\nSteady state ({} intervals of p50 latency): {}",
        s.steady.intervals,
        match (s.steady.verdict, s.steady.after) {
            _ if r.ok == 0 => super::NOT_JUDGED.to_string(),
            (Steadiness::Steady { .. }, Some(after)) if after.is_zero() => "steady from the start".to_string(),
            (Steadiness::Steady { .. }, Some(after)) => format!("steady after {:.1} s", after.as_secs_f64()),
            (Steadiness::NoSteadyState, _) => "no steady state reached".to_string(),
            (Steadiness::TooShort, _) => "too few intervals to judge".to_string(),
            _ => "not judged: an interval had no calls".to_string(),
        }
    );
    if !s.call_names.is_empty() {
        let _ = writeln!(o, "\nBy call name:");
        let row = |o: &mut String, cells: [&str; 7]| {
            let [name, requests, failed, p50, p99, max, method] = cells;
            let _ = writeln!(o, "  {name:<16} {requests:>9} {failed:>9} {p50:>11} {p99:>11} {max:>11}  {method}");
        };
        row(&mut o, ["name", "requests", "failed", "p50", "p99", "max", "method"]);
        for (name, method, share) in s.by_name() {
            let l = crate::stats::Latency::of(&share.latency);
            let failed = share.calls - share.statuses.get(tonic::Code::Ok);
            let name = super::printable::printable(name).to_string();
            let (calls, failed) = (share.calls.to_string(), failed.to_string());
            let [p50, p99, max] = [l.percentile(50.0), l.percentile(99.0), l.max].map(duration);
            row(&mut o, [&name, &calls, &failed, &p50, &p99, &max, method]);
        }
    }
    let _ = writeln!(o, "\nStatus (per call):");
    for (code, n) in s.statuses.nonzero() {
        let _ = writeln!(o, "  {:<20} {n}", status::name(code));
    }
    if r.retries > 0 {
        let _ = writeln!(o, "Status (per attempt):");
        for (code, n) in s.attempt_statuses.nonzero() {
            let _ = writeln!(o, "  {:<20} {n}", status::name(code));
        }
    }
    if !s.errors.is_empty() {
        let _ = writeln!(o, "\nErrors (per call, by the server's message):");
        for e in s.errors.iter().take(10) {
            let _ = writeln!(
                o,
                "  {:>9}  {}: {}",
                e.count,
                status::name(e.status),
                super::printable::printable(&e.message)
            );
        }
        if s.errors.len() > 10 {
            let _ = writeln!(o, "  ... {} more kinds (all in --format json)", s.errors.len() - 10);
        }
    }
    let c = &s.client;
    let _ = writeln!(
        o,
        "\nClient cost: CPU {:.3} s ({}/call, {:.0}% of {} thread(s)), max RSS {}",
        c.cpu.as_secs_f64(),
        duration(c.cpu_per_call),
        c.utilization * 100.0,
        c.threads,
        bytes(c.max_rss_bytes)
    );
    if let Some(h) = c.hiccups {
        let _ = writeln!(
            o,
            "Client hiccups (1 ms sleep overshoot): p50 {} p99 {} max {}",
            duration(h.p50),
            duration(h.p99),
            duration(h.max)
        );
    }
    if let Some(server) = &s.server {
        let rps = server.throughput_rps.map_or(String::new(), |r| format!(", {r:.1} calls/s"));
        let _ = writeln!(
            o,
            "Server's count (its Stats): {} received (ok {}, failed {}, rejected {}){rps}, CPU {:.3} s, RSS {}",
            server.received,
            server.ok,
            server.failed,
            server.rejected,
            server.cpu.as_secs_f64(),
            bytes(server.rss_bytes)
        );
        if !server.echo_spin.is_zero() {
            let _ = writeln!(
                o,
                "  Server's CPU includes its spin: a network thread stays awake {} after each echo call (serve --spin)",
                duration(server.echo_spin)
            );
        }
        if s.messages.is_some() {
            let _ = writeln!(o, "  Server's messages: {} in, {} out", server.messages_in, server.messages_out);
        }
    }
    match &s.floor {
        Some(Some(c)) => {
            let _ = writeln!(o, "Floor: {}", crate::calibrate::floor_line(c));
        }
        Some(None) => {
            let _ = writeln!(
                o,
                "Floor: this machine is not calibrated (`rpcmeter calibrate` measures it once, in seconds)"
            );
        }
        None => {}
    }
    for a in &s.assertions {
        let _ = writeln!(o, "Assert {}: {} ({})", a.assertion.text, if a.ok { "ok" } else { "BREACHED" }, a.value);
    }
    for n in &s.notices {
        let _ = writeln!(o, "Note: {}", n.text);
    }
    o
}

/// Bars on a log scale between min and max, so that both the body and the tail of a latency
/// distribution show (ghz's ten linear bars put nearly every call of a fast service in the
/// first). Each value lands in exactly one bar; a bar with any call in it is never empty.
fn bars(o: &mut String, h: &Histogram<u64>) {
    const BUCKETS: usize = 12;
    const WIDTH: f64 = 40.0;
    let (lo, hi) = (h.min().max(1) as f64, h.max().max(h.min() + 1) as f64);
    let ratio = (hi / lo).powf(1.0 / BUCKETS as f64);
    let upper = |i: usize| if i + 1 == BUCKETS { hi } else { lo * ratio.powi(i as i32 + 1) };
    let mut counts = [0u64; BUCKETS];
    for v in h.iter_recorded() {
        let value = h.highest_equivalent(v.value_iterated_to()).min(h.max()) as f64;
        let bar = (0..BUCKETS).find(|&i| value <= upper(i)).unwrap_or(BUCKETS - 1);
        counts[bar] += v.count_at_value();
    }
    let most = counts.iter().copied().max().unwrap_or(1).max(1) as f64;
    let total = h.len().max(1) as f64;
    for (i, &n) in counts.iter().enumerate() {
        let len = (n as f64 / most * WIDTH).round() as usize;
        let bar = "■".repeat(if n > 0 { len.max(1) } else { 0 });
        let _ = writeln!(
            o,
            "  <= {:>10} [{n:>9}] {:>6.2}% |{bar}",
            duration(std::time::Duration::from_nanos(upper(i) as u64)),
            n as f64 * 100.0 / total
        );
    }
}
