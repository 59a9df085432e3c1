//! `--format table`: the human report: summary, percentiles, a latency histogram,
//! statuses, the client's own cost and the notices that qualify the numbers.
use super::Summary;
use crate::stats::{Latency, PERCENTILES};
use hdrhistogram::Histogram;
use std::fmt::Write;

/// Renders a duration given in microseconds with a unit that keeps 3-4 digits.
pub fn us(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.3} s", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.2} ms", v / 1e3)
    } else {
        format!("{v:.1} µs")
    }
}

fn percentile_rows(out: &mut String, l: &Latency) {
    let values = [l.p50, l.p75, l.p90, l.p95, l.p99, l.p999, l.p9999];
    for ((label, _), v) in PERCENTILES.iter().zip(values) {
        let _ = writeln!(out, "  {label:<8} {}", us(v));
    }
    let _ = writeln!(out, "  {:<8} {}", "max", us(l.max));
}

pub fn render(s: &Summary, histogram: &Histogram<u64>) -> String {
    let mut o = String::new();
    let r = &s.requests;
    let mode = match (s.mode, &s.rps_target) {
        ("open", Some(rps)) => format!("open loop at {rps} calls/s, at most {} in flight", s.concurrency),
        ("burst", _) => format!("bursts of {}", s.concurrency),
        _ => format!("closed loop, {} workers", s.concurrency),
    };
    let _ = writeln!(
        o,
        "{} {}  ({mode}, {} connection(s)){}",
        s.target,
        s.call,
        s.connections,
        if s.partial { "  [PARTIAL]" } else { "" }
    );
    let _ = writeln!(o, "\nSummary:");
    let _ = writeln!(
        o,
        "  Calls:       {} (ok {}, failed {}), attempts {}, retries {}, out of retries {}",
        r.total, r.ok, r.failed, r.attempts, r.retries, r.retry_exhausted
    );
    let _ = writeln!(o, "  Duration:    {:.2} s", s.duration_s);
    let _ = writeln!(o, "  Throughput:  {:.1} calls/s ({:.1} ok/s)", s.throughput_rps, s.ok_rps);
    let l = &s.latency_us;
    let _ =
        writeln!(o, "  Latency:     min {}, mean {}, stdev {}, max {}", us(l.min), us(l.mean), us(l.stdev), us(l.max));
    if let Some(w) = &s.warmup {
        let _ = writeln!(
            o,
            "  Warm-up:     {:.2} s, {} calls, {:.1} calls/s, p50 {}, p99 {} (excluded from the result)",
            w.duration_s,
            w.calls,
            w.throughput_rps,
            us(w.latency_us.p50),
            us(w.latency_us.p99)
        );
    }
    let _ = writeln!(
        o,
        "\nLatency percentiles (call: first send{} to final answer):",
        if s.mode == "open" { ", or its intended time when sent behind schedule," } else { "" }
    );
    percentile_rows(&mut o, l);
    if r.retries > 0 {
        let _ = writeln!(o, "\nAttempt latency percentiles (each attempt alone):");
        percentile_rows(&mut o, &s.attempt_latency_us);
    }
    if let Some(lag) = &s.schedule_lag_us {
        let _ = writeln!(o, "\nSchedule lag (actual - intended send): p50 {}, p99 {}, max {}; {} sends more than 1 ms behind schedule with every slot busy", us(lag.p50), us(lag.p99), us(lag.max), s.late_sends);
    }
    if !histogram.is_empty() {
        let _ = writeln!(o, "\nLatency histogram:");
        bars(&mut o, histogram);
    }
    if !s.rounds.is_empty() {
        let _ = writeln!(o, "\nRounds:");
        for round in &s.rounds {
            let _ = writeln!(o, "  Took: {:.3} ms  RPS: {:.1}", round.took_ms, round.rps);
        }
    }
    let _ = writeln!(o, "\nStatus (per call):");
    for (name, n) in &s.statuses {
        let _ = writeln!(o, "  {name:<20} {n}");
    }
    if r.retries > 0 {
        let _ = writeln!(o, "Status (per attempt):");
        for (name, n) in &s.attempt_statuses {
            let _ = writeln!(o, "  {name:<20} {n}");
        }
    }
    let c = &s.client;
    let _ = writeln!(
        o,
        "\nClient cost: CPU {:.3} s ({:.2} µs/call, {:.0}% of {} thread(s)), max RSS {:.1} MB",
        c.cpu_s,
        c.cpu_us_per_request,
        c.utilization * 100.0,
        c.threads,
        c.max_rss_bytes as f64 / 1e6
    );
    for a in &s.assertions {
        let _ = writeln!(o, "Assert {}: {} (value {:.3})", a.assertion, if a.ok { "ok" } else { "BREACHED" }, a.value);
    }
    for n in &s.notices {
        let _ = writeln!(o, "Note: {n}");
    }
    o
}

/// Ten bars between min and max, linear buckets, as ghz shows them.
fn bars(o: &mut String, h: &Histogram<u64>) {
    const BUCKETS: u64 = 10;
    const WIDTH: f64 = 40.0;
    let (lo, hi) = (h.min(), h.max().max(h.min() + 1));
    let step = ((hi - lo) / BUCKETS).max(1);
    // Each recorded value lands in exactly one bar (HDR's equivalent ranges would overlap).
    let mut counts = [0u64; BUCKETS as usize];
    for v in h.iter_recorded() {
        let bar = ((v.value_iterated_to().saturating_sub(lo)) / step).min(BUCKETS - 1);
        counts[bar as usize] += v.count_at_value();
    }
    let most = *counts.iter().max().unwrap_or(&1) as f64;
    for (i, n) in counts.iter().enumerate() {
        let upper = if i as u64 + 1 == BUCKETS { hi } else { lo + (i as u64 + 1) * step };
        let bar = "■".repeat((*n as f64 / most.max(1.0) * WIDTH).round() as usize);
        let _ = writeln!(o, "  {:>10} [{n:>9}] |{bar}", us(upper as f64 / 1e3));
    }
}
