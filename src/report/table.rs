//! `--format table`: the human report: summary, percentiles, a latency histogram,
//! statuses and errors, the client's own cost and the notices that qualify the numbers.
use super::breakdown::Kind;
use super::{histogram, Export};
use crate::grpc::status;
use crate::result::{LatencySummary, Run, Verdict, Word, Words};
use crate::stats::{Latency, Statistic};
use crate::units::{bytes, duration};
use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::Duration;

pub struct Table;

impl Export for Table {
    fn render(&self, r: &Run) -> String {
        render(r)
    }
}

fn percentile_rows(out: &mut String, l: &Latency) {
    for &(p, v) in &l.percentiles {
        let _ = writeln!(out, "  {:<8} {}", Statistic::Percentile(p).label(), duration(v));
    }
    let _ = writeln!(out, "  {:<8} {}", "max", duration(l.max));
}

/// Open loop: call latency (from the intended send) beside service time (from the actual
/// send), and the calls sent only between them when some due calls were never sent.
fn percentile_columns(out: &mut String, columns: &[(&str, &Latency)]) {
    let mut line = |label: &str, cells: Vec<String>| {
        let cells: Vec<String> = cells.iter().map(|c| format!("{c:>12}")).collect();
        let _ = writeln!(out, "  {label:<8} {}", cells.join("  "));
    };
    line("", columns.iter().map(|(name, _)| name.to_string()).collect());
    for (i, &(p, _)) in columns[0].1.percentiles.iter().enumerate() {
        let cells = columns.iter().map(|(_, l)| l.percentiles.get(i).map_or(String::new(), |&(_, v)| duration(v)));
        line(&Statistic::Percentile(p).label(), cells.collect());
    }
    line("max", columns.iter().map(|(_, l)| duration(l.max)).collect());
}

fn render(r: &Run) -> String {
    let mut o = String::new();
    let sections: [fn(&mut String, &Run); 20] = [
        header,
        summary,
        messages,
        warmup,
        percentiles,
        schedule_lag,
        latency_histogram,
        rounds,
        steady_state,
        by_name,
        recorded_vs_replayed,
        by_flow,
        checks,
        by_backend,
        statuses,
        errors,
        client_cost,
        server,
        floor,
        verdicts,
    ];
    for section in sections {
        section(&mut o, r);
    }
    o
}

/// The target, the call, the load and whether the result is partial.
fn header(o: &mut String, r: &Run) {
    let _ = writeln!(
        o,
        "{} {}  ({}, {} connection(s)){}",
        short_target(&r.target),
        r.call,
        r.load,
        r.connections,
        if r.partial() { "  [PARTIAL]" } else { "" }
    );
}

/// Addresses of an `ipv4:`/`ipv6:` list shown in the header before the rest is counted.
const LISTED_ADDRESSES: usize = 3;

/// The target for the header: a long address list (a thousand backends is 16 KB) shows its
/// first addresses and how many there are (the JSON result keeps the whole target).
fn short_target(target: &str) -> std::borrow::Cow<'_, str> {
    let parts: Vec<&str> = target.split(',').collect();
    if parts.len() <= LISTED_ADDRESSES + 1 {
        return target.into();
    }
    format!("{},… ({} addresses)", parts[..LISTED_ADDRESSES].join(","), parts.len()).into()
}

/// A latency as the table writes it; "-" when the result has none.
fn at(l: &LatencySummary, stat: Statistic) -> String {
    l.get(stat).map_or_else(|| "-".into(), duration)
}

/// Calls, the measured window, throughput and latency in one line each.
fn summary(o: &mut String, r: &Run) {
    let q = &r.requests;
    let _ = writeln!(o, "\nSummary:");
    let _ = writeln!(
        o,
        "  Calls:       {} (ok {}, failed {}), attempts {}, retries {}, out of retries {}",
        q.total,
        q.ok,
        q.failed,
        q.attempts.unwrap_or(0),
        q.retries.unwrap_or(0),
        q.retry_exhausted.unwrap_or(0)
    );
    if let Some(unsent) = q.unsent.filter(|n| *n > 0) {
        let _ = writeln!(o, "  Unsent:      {unsent} calls due before the end were never sent");
    }
    // In the unit that keeps its digits: a 2 ms run read "0.00 s".
    let _ = writeln!(o, "  Duration:    {}", duration(r.window()));
    let _ = writeln!(o, "  Throughput:  {:.1} calls/s ({:.1} ok/s)", r.throughput_rps, r.ok_calls_per_s());
    let l = r.latency_us.latency();
    let _ = writeln!(
        o,
        "  Latency:     min {}, mean {}, stdev {}, max {}",
        duration(l.min),
        duration(l.mean),
        duration(l.stdev),
        duration(l.max)
    );
}

/// Streaming methods: the messages, apart from the streams.
fn messages(o: &mut String, r: &Run) {
    let Some(m) = &r.messages else { return };
    let _ = writeln!(
        o,
        "  Messages:    {} sent ({:.1}/s), {} received ({:.1}/s); each call is a stream ({}), its latency the stream's duration",
        m.sent, m.sent_per_s, m.received, m.received_per_s, m.kind
    );
    let line = |name: &str, l: &LatencySummary| {
        // A server that answered no message (a silent ping-pong) gave no time to show as 0 µs.
        if l.is_empty() {
            return format!("  {name} none (no message came back)");
        }
        let p = |p: f64| at(l, Statistic::Percentile(p));
        let (p50, p90, p99, max) = (p(50.0), p(90.0), p(99.0), at(l, Statistic::Max));
        format!("  {name} p50 {p50}, p90 {p90}, p99 {p99}, max {max} ({} messages)", l.count)
    };
    if let Some(l) = &m.round_trip_us {
        let _ = writeln!(o, "{}", line("Round trip:  ", l));
    }
    if let Some(l) = &m.first_message_us {
        let _ = writeln!(o, "{}", line("First msg:   ", l));
    }
}

/// The warm-up, shown apart.
fn warmup(o: &mut String, r: &Run) {
    if let Some(w) = &r.warmup {
        let _ = writeln!(
            o,
            "  Warm-up:     {}, {} calls, {:.1} calls/s, p50 {}, p99 {} (excluded from the result)",
            duration(w.window()),
            w.calls,
            w.throughput_rps,
            at(&w.latency_us, Statistic::Percentile(50.0)),
            at(&w.latency_us, Statistic::Percentile(99.0))
        );
    }
}

/// Latency percentiles: call beside service time in open loop; each attempt when retried.
fn percentiles(o: &mut String, r: &Run) {
    let l = r.latency_us.latency();
    let sent = r.sent_latency_us.as_ref().map(LatencySummary::latency);
    match (r.mode.as_str(), &r.service_time_us, sent) {
        ("open", Some(service), None) => {
            let _ = writeln!(
                o,
                "\nLatency percentiles (call: intended send time to final answer; service: actual send to final answer):"
            );
            percentile_columns(o, &[("call", &l), ("service", &service.latency())]);
        }
        ("open", Some(service), Some(sent)) => {
            let _ = writeln!(
                o,
                "\nLatency percentiles (call: intended send time to final answer, each of the {} calls never sent \
                 at its lower bound, the end less its intended send time; sent only: the calls sent; service: \
                 actual send to final answer):",
                r.requests.unsent.unwrap_or(0)
            );
            percentile_columns(o, &[("call", &l), ("sent only", &sent), ("service", &service.latency())]);
        }
        _ => {
            let _ = writeln!(o, "\nLatency percentiles (call: first send to final answer):");
            percentile_rows(o, &l);
        }
    }
    if let (Some(1..), Some(attempts)) = (r.requests.retries, &r.attempt_latency_us) {
        let _ = writeln!(o, "\nAttempt latency percentiles (each attempt alone):");
        percentile_rows(o, &attempts.latency());
    }
}

/// Open loop: how late sends left, and why.
fn schedule_lag(o: &mut String, r: &Run) {
    if let Some(lag) = &r.schedule_lag_us {
        let _ = writeln!(
            o,
            "\nSchedule lag (actual - intended send): p50 {}, p99 {}, max {}; sends more than 1 ms behind \
             schedule: {} waiting for an in-flight slot, {} late by the client's wake-up",
            at(lag, Statistic::Percentile(50.0)),
            at(lag, Statistic::Percentile(99.0)),
            at(lag, Statistic::Max),
            r.late_sends.unwrap_or(0),
            r.late_wakeups.unwrap_or(0)
        );
    }
}

/// The call latency histogram.
fn latency_histogram(o: &mut String, r: &Run) {
    let h = histogram(&r.histograms.call_latency);
    if !h.is_empty() {
        let _ = writeln!(o, "\nLatency histogram (log scale: each bar's upper bound is a fixed ratio above the last):");
        bars(o, &h);
    }
}

/// Bursts: each round, and which were warm-up.
fn rounds(o: &mut String, r: &Run) {
    let Some(rounds) = r.rounds.as_ref().filter(|r| !r.is_empty()) else { return };
    let _ = writeln!(o, "\nRounds:");
    let said = r.warm_rounds.as_ref();
    let steady = said.and_then(Word::known) == Some(Verdict::Steady);
    let warm = if steady { r.warmup_rounds.unwrap_or(0) as usize } else { 0 };
    for (i, round) in rounds.iter().enumerate() {
        let tag = if i < warm { "  (warm-up)" } else { "" };
        let _ = writeln!(o, "  Took: {:.3} ms  RPS: {:.1}{tag}", round.took_ms, round.rps);
    }
    let verdict = match (said, warm) {
        (Some(Word::Known(Verdict::Steady)), 0) => "steady from the first round".to_string(),
        (Some(Word::Known(Verdict::Steady)), from) => format!("the first {from} round(s) were warm-up, steady after"),
        (Some(Word::Known(Verdict::NoSteadyState)), _) => {
            "no steady state: the rounds' times were still changing".to_string()
        }
        // A newer version's word, as it wrote it.
        (Some(Word::Other(word)), _) if !word.is_empty() => word.clone(),
        _ => "too few rounds to tell warm-up from steady state".to_string(),
    };
    let _ = writeln!(o, "  Rounds: {verdict}");
}

/// The steady-state verdict on the interval series (a merge's table writes it too).
pub fn steady_state(o: &mut String, r: &Run) {
    let s = r.steady_state.clone().unwrap_or_default();
    let after = s.steady_after_s.and_then(|s| Duration::try_from_secs_f64(s).ok());
    let _ = writeln!(
        o,
        "\nSteady state ({} intervals of p50 latency): {}",
        s.intervals,
        match (&s.verdict, after) {
            _ if r.requests.ok == 0 => Verdict::NotJudged.as_str().to_string(),
            (Word::Known(Verdict::Steady), Some(after)) if after.is_zero() => "steady from the start".to_string(),
            (Word::Known(Verdict::Steady), Some(after)) => format!("steady after {:.1} s", after.as_secs_f64()),
            (Word::Known(Verdict::NoSteadyState), _) => "no steady state reached".to_string(),
            (Word::Known(Verdict::EmptyInterval), _) => "not judged: an interval had no calls".to_string(),
            (Word::Known(Verdict::NotJudged), _) => Verdict::NotJudged.as_str().to_string(),
            // A newer version's word, as it wrote it.
            (Word::Other(word), _) if !word.is_empty() => word.clone(),
            _ => "too few intervals to judge".to_string(),
        }
    );
}

/// `--workload`: one row per call name.
fn by_name(o: &mut String, r: &Run) {
    breakdown(o, r, Kind::Names);
}

/// `run --replay`: per call name, the log's own numbers (latency on the logger's side) beside
/// the run's.
fn recorded_vs_replayed(o: &mut String, r: &Run) {
    let Some(replay) = &r.replay else { return };
    let _ = writeln!(o, "\nRecorded (the log: {}) vs replayed:", super::printable::printable(&replay.file));
    let row = |o: &mut String, cells: [&str; 7]| {
        let [name, calls, p50, p99, recorded, replayed, statuses] = cells;
        let _ = writeln!(o, "  {name:<24} {calls:>13} {p50:>21} {p99:>21}  {recorded} -> {replayed}{statuses}");
    };
    row(o, ["name", "calls rec/now", "p50 rec/now", "p99 rec/now", "statuses rec", "now", ""]);
    let statuses = |counts: &BTreeMap<String, u64>| {
        in_code_order(counts).map(|(name, n)| format!("{name} {n}")).collect::<Vec<_>>().join(", ")
    };
    for (name, now) in r.calls_by_name.iter().flatten() {
        let recorded = replay.recorded.get(name).cloned().unwrap_or_default();
        let pair = |p: f64| {
            let stat = Statistic::Percentile(p);
            let rec = at(&recorded.latency_us, stat);
            let now = if now.requests.total == 0 { "-".into() } else { at(&now.latency_us, stat) };
            format!("{rec}/{now}")
        };
        let calls = format!("{}/{}", recorded.requests.total, now.requests.total);
        let name = super::printable::printable(name).to_string();
        row(o, [&name, &calls, &pair(50.0), &pair(99.0), &statuses(&recorded.statuses), &statuses(&now.statuses), ""]);
    }
}

/// `--workload` flows: one row per flow.
fn by_flow(o: &mut String, r: &Run) {
    breakdown(o, r, Kind::Flows);
}

/// One breakdown, as merge's table and the HTML report print it (report::breakdown).
fn breakdown(o: &mut String, r: &Run, kind: Kind) {
    let slices = r.breakdown(kind.key()).into_iter().flatten();
    o.push_str(&super::breakdown::text(kind, slices.map(|(name, slice)| (name.as_str(), slice)), r.requests.total));
}

/// How much of a check's `CALL: EXPRESSION` the table prints.
const CHECK_CHARS: usize = 80;

/// `--workload` checks: passes and failures of each.
fn checks(o: &mut String, r: &Run) {
    let Some(checks) = r.checks.as_ref().filter(|c| !c.is_empty()) else { return };
    let _ = writeln!(o, "\nChecks:");
    for c in checks {
        let (pass, fail) = (c.pass, c.fail);
        // A check of a step that no flow reached (stopped before it) has no share to read as 0 %.
        let share = match pass + fail {
            0 => "never run".to_string(),
            all => format!("{:.2}%", pass as f64 * 100.0 / all as f64),
        };
        // A check's expected value may be a whole body: the line shows its start.
        let label = format!("{}: {}", c.call, c.expression);
        let label = super::printable::printable(&crate::units::abridged(&label, CHECK_CHARS)).to_string();
        let _ = writeln!(o, "  {label:<40} {pass:>9} passed {fail:>9} failed  ({share})");
    }
}

/// Targets broken down by backend: one row per address, idle ones gathered and the calls
/// that found no ready backend in a row of their own (report::breakdown::table_rows).
fn by_backend(o: &mut String, r: &Run) {
    breakdown(o, r, Kind::Backends);
}

/// Counts by status name, in the order of the statuses' codes (OK first), none of 0.
fn in_code_order(counts: &BTreeMap<String, u64>) -> impl Iterator<Item = (&str, u64)> {
    let mut all: Vec<(&str, u64)> = counts.iter().filter(|(_, n)| **n > 0).map(|(k, n)| (k.as_str(), *n)).collect();
    all.sort_by_key(|(name, _)| status::parse(name).map_or(i32::MAX, |c| c as i32));
    all.into_iter()
}

/// Statuses per call, and per attempt when retried.
fn statuses(o: &mut String, r: &Run) {
    let _ = writeln!(o, "\nStatus (per call):");
    for (name, n) in in_code_order(&r.statuses) {
        let _ = writeln!(o, "  {name:<20} {n}");
    }
    if r.requests.retries.unwrap_or(0) > 0 {
        let _ = writeln!(o, "Status (per attempt):");
        for (name, n) in in_code_order(&r.attempt_statuses) {
            let _ = writeln!(o, "  {name:<20} {n}");
        }
    }
}

/// Failed calls by status and message, the ten most frequent.
fn errors(o: &mut String, r: &Run) {
    if !r.errors.is_empty() {
        let _ = writeln!(o, "\nErrors (per call, by the server's message):");
        for e in r.errors.iter().take(10) {
            let _ = writeln!(o, "  {:>9}  {}: {}", e.count, e.status, super::printable::printable(&e.message));
        }
        if r.errors.len() > 10 {
            let _ = writeln!(o, "  ... {} more kinds (all in --format json)", r.errors.len() - 10);
        }
    }
}

/// The client's own CPU, memory and hiccups (a merged result's clients are each input's).
fn client_cost(o: &mut String, r: &Run) {
    let Some(c) = &r.client else { return };
    let _ = writeln!(
        o,
        "\nClient cost: CPU {:.3} s ({}/call, {:.0}% of {} thread(s)), max RSS {}",
        c.cpu_s,
        duration(r.cpu_per_call().unwrap_or_default()),
        c.utilization * 100.0,
        c.threads,
        bytes(c.max_rss_bytes)
    );
    if let Some(h) = &c.hiccup_us {
        let us = |v: f64| duration(Duration::from_nanos((v * 1e3).round() as u64));
        let _ =
            writeln!(o, "Client hiccups (1 ms sleep overshoot): p50 {} p99 {} max {}", us(h.p50), us(h.p99), us(h.max));
    }
}

/// The server's own count, when it serves the lab's Stats.
fn server(o: &mut String, r: &Run) {
    if let Some(server) = &r.server {
        let rps = server.throughput_rps.map_or(String::new(), |r| format!(", {r:.1} calls/s"));
        let _ = writeln!(
            o,
            "Server's count (its Stats): {} received (ok {}, failed {}, rejected {}){rps}, CPU {:.3} s, RSS {}",
            server.received,
            server.ok,
            server.failed,
            server.rejected,
            server.cpu_s,
            bytes(server.rss_bytes)
        );
        if server.echo_spin_us > 0 {
            let _ = writeln!(
                o,
                "  Server's CPU includes its spin: a network thread stays awake {} after each echo call (serve --spin)",
                duration(Duration::from_micros(server.echo_spin_us))
            );
        }
        if r.messages.is_some() {
            let _ = writeln!(o, "  Server's messages: {} in, {} out", server.messages_in, server.messages_out);
        }
    }
}

/// The machine's floor.
fn floor(o: &mut String, r: &Run) {
    match &r.calibration {
        Some(c) if c.is_null() => {
            let _ = writeln!(
                o,
                "Floor: this machine is not calibrated (`rpcmeter calibrate` measures it once, in seconds)"
            );
        }
        Some(c) => {
            if let Ok(c) = serde_json::from_value::<crate::calibrate::Calibration>(c.clone()) {
                let _ = writeln!(o, "Floor: {}", crate::calibrate::floor_line(&c));
            }
        }
        None => {}
    }
}

/// Assertions, then the notices that qualify the numbers. A latency assertion reads every
/// call, a failed one at its time to fail: a deadline's failures count at the deadline, less
/// than they would have taken, so its line says the failed share beside the value (a run
/// whose deadline failed its slowest calls passes `p99<...` on them).
fn verdicts(o: &mut String, r: &Run) {
    let q = &r.requests;
    let failed = match q.failed {
        0 => String::new(),
        n => format!("; {:.2}% of calls failed, each counted at its time to fail", n as f64 * 100.0 / q.total as f64),
    };
    for a in r.assertions.iter().flatten() {
        let latency = crate::stats::assertions::parse(&a.assertion).is_ok_and(|checks| {
            checks.iter().any(|c| matches!(c.metric, crate::stats::assertions::Metric::Latency(_)))
        });
        let beside = if latency { failed.as_str() } else { "" };
        let _ = writeln!(o, "Assert {}: {} ({}{beside})", a.assertion, if a.ok { "ok" } else { "BREACHED" }, a.value);
    }
    for n in r.notices.texts() {
        let _ = writeln!(o, "Note: {n}");
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::fixture::{self, plan, recorded, tally, warming_up};
    use crate::analysis::to_result::result;
    use crate::analysis::{ErrorKind, Messages, Round, ServerSide, Summary};
    use crate::grpc::transport::CallKind;
    use crate::load::pacer::Pacer;
    use crate::result::Ended;
    use crate::stats::steady::Steadiness;

    /// 1000 calls of 2 ms over 2 s, every tenth UNAVAILABLE.
    fn run() -> Summary {
        fixture::summary(plan(), recorded(tally(1000, Duration::from_millis(2), 10), Duration::from_secs(2)))
    }

    /// A section of the result of `s` (the summary as the analysis leaves it).
    fn text(section: fn(&mut String, &Run), s: &Summary) -> String {
        let mut o = String::new();
        section(&mut o, &result(s));
        o
    }

    #[test]
    fn every_section_in_order() {
        let all = render(&result(&run()));
        let at = |needle: &str| all.find(needle).unwrap_or_else(|| panic!("no {needle:?} in\n{all}"));
        let order = ["Summary:", "Latency percentiles", "Latency histogram", "Steady state", "Status (per call)"];
        let places: Vec<usize> = order.iter().map(|n| at(n)).collect();
        assert!(places.windows(2).all(|w| w[0] < w[1]), "{all}");
    }

    #[test]
    fn header_names_the_load_and_a_partial_run() {
        let mut s = run();
        assert_eq!(text(header, &s), "192.0.2.1:50051 Echo.echo  (closed loop, 8 workers, 2 connection(s))\n");
        s.ended = Ended::Interrupted;
        assert!(text(header, &s).ends_with("  [PARTIAL]\n"));
    }

    #[test]
    fn summary_counts_and_unsent_calls() {
        let mut s = run();
        let t = text(summary, &s);
        assert!(t.contains("Calls:       1000 (ok 900, failed 100)"), "{t}");
        assert!(t.contains("Throughput:  500.0 calls/s (450.0 ok/s)"), "{t}");
        assert!(!t.contains("Unsent"));
        s.requests.unsent = 7;
        assert!(text(summary, &s).contains("Unsent:      7 calls"));
    }

    #[test]
    fn messages_only_for_streams() {
        let mut s = run();
        assert_eq!(text(messages, &s), "");
        s.messages = Some(Messages {
            kind: CallKind::Bidi,
            sent: 10,
            received: 9,
            sent_per_s: 5.0,
            received_per_s: 4.5,
            round_trip: Some(s.latency.clone()),
            first_message: None,
        });
        let t = text(messages, &s);
        assert!(t.contains("10 sent (5.0/s), 9 received (4.5/s)") && t.contains("Round trip:"), "{t}");
        // A silent server's ping-pong: no message came back, so no round trip to read as 0 µs
        // (it printed "p50 0.0 µs, p90 0.0 µs, p99 0.0 µs, max 0.0 µs (0 messages)").
        let none = crate::stats::Latency::of(&hdrhistogram::Histogram::new(3).unwrap());
        s.messages.as_mut().unwrap().round_trip = Some(none);
        let t = text(messages, &s);
        assert!(t.contains("Round trip:   none (no message came back)\n"), "{t}");
    }

    #[test]
    fn warmup_only_when_there_was_one() {
        assert_eq!(text(warmup, &run()), "");
        let (r, rows, early) = warming_up(4, 12);
        let mut first = fixture::run(plan(), r, rows);
        first.early = Some(&early);
        let s = crate::analysis::summary_of(first);
        assert!(text(warmup, &s).contains("(excluded from the result)"));
    }

    #[test]
    fn percentiles_pair_call_and_service_in_open_loop() {
        let mut s = run();
        assert!(text(percentiles, &s).contains("(call: first send to final answer)"));
        s.pacer = Pacer::Open(crate::load::pacer::RateSchedule::constant(500.0), crate::load::pacer::Arrival::Uniform);
        assert!(text(percentiles, &s).contains("intended send time to final answer; service"));
        s.requests.retries = 1;
        assert!(text(percentiles, &s).contains("Attempt latency percentiles"));
    }

    #[test]
    fn schedule_lag_and_histogram_only_when_measured() {
        let mut s = run();
        assert_eq!(text(schedule_lag, &s), "");
        s.schedule_lag = Some(s.latency.clone());
        assert!(text(schedule_lag, &s).starts_with("\nSchedule lag"));
        let bars = text(latency_histogram, &s);
        assert_eq!(bars.lines().filter(|l| l.contains('|')).count(), 12, "{bars}");
    }

    #[test]
    fn rounds_tag_their_warmup() {
        let mut s = run();
        assert_eq!(text(rounds, &s), "");
        s.rounds = vec![
            Round { took: Duration::from_millis(9), rps: 1.0 },
            Round { took: Duration::from_millis(3), rps: 3.0 },
        ];
        s.warm_rounds = Some(Steadiness::Steady { from: 1 });
        let t = text(rounds, &s);
        assert!(
            t.contains("Took: 9.000 ms  RPS: 1.0  (warm-up)") && t.contains("the first 1 round(s) were warm-up"),
            "{t}"
        );
    }

    /// A verdict a newer minor version wrote is shown as written (before: any word it did not
    /// know read "not judged: an interval had no calls").
    #[test]
    fn a_newer_minors_verdict_is_shown_as_written() {
        let mut v = result(&run()).to_value();
        v["meta"]["schema_version"] = "2.9".into();
        v["steady_state"]["verdict"] = "drifting slowly".into();
        v["warm_rounds"] = "still warming".into();
        v["rounds"] = serde_json::json!([{"took_ms": 1.0, "rps": 1000.0}]);
        let r = Run::from_value(v).unwrap();
        let (mut steady, mut rounds_text) = (String::new(), String::new());
        steady_state(&mut steady, &r);
        rounds(&mut rounds_text, &r);
        assert!(steady.contains("): drifting slowly"), "{steady}");
        assert!(rounds_text.contains("Rounds: still warming"), "{rounds_text}");
    }

    #[test]
    fn steady_state_is_not_judged_without_an_ok_call() {
        let mut s = run();
        assert!(text(steady_state, &s).contains("too few intervals to judge"), "no rows: {}", text(steady_state, &s));
        s.requests.ok = 0;
        assert!(text(steady_state, &s).contains(Verdict::NotJudged.as_str()));
    }

    #[test]
    fn by_name_only_for_a_workload() {
        let mut s = run();
        assert_eq!(text(by_name, &s), "");
        s.call_shares = vec![(("get".into(), "Kv.Get".into()), Default::default())];
        let t = text(by_name, &s);
        assert!(
            t.contains("By call name:")
                && t.lines().any(|l| l.trim_start().starts_with("get") && l.ends_with("Kv.Get")),
            "{t}"
        );
    }

    #[test]
    fn statuses_and_the_ten_most_frequent_errors() {
        let mut s = run();
        assert!(text(statuses, &s).contains("UNAVAILABLE"), "{}", text(statuses, &s));
        s.errors =
            (0..12).map(|i| ErrorKind { status: tonic::Code::Internal, message: format!("e{i}"), count: 1 }).collect();
        assert!(text(errors, &s).contains("... 2 more kinds"));
    }

    #[test]
    fn client_server_and_floor_lines() {
        let mut s = run();
        assert!(text(client_cost, &s).contains("Client cost: CPU 0.500 s"));
        assert_eq!(text(server, &s), "");
        s.server = Some(ServerSide {
            received: 1000,
            ok: 900,
            failed: 100,
            rejected: 0,
            messages_in: 1000,
            messages_out: 900,
            throughput_rps: None,
            cpu: Duration::ZERO,
            rss_bytes: 0,
            echo_spin: Duration::ZERO,
        });
        assert!(text(server, &s).starts_with("Server's count (its Stats): 1000 received"));
        assert_eq!(text(floor, &s), "", "left out");
        s.floor = Some(None);
        assert!(text(floor, &s).contains("not calibrated"));
    }

    #[test]
    fn a_latency_assertion_says_the_failed_share_beside_its_value() {
        // Every tenth call failed: the latency assertion counts them at their time to fail.
        let mut r = result(&run());
        let checked = |assertion: &str, value: &str| crate::result::Checked {
            assertion: assertion.into(),
            value: value.into(),
            ok: true,
        };
        r.assertions = Some(vec![checked("p99<30ms", "2 ms"), checked("error_rate<20%", "10.00%")]);
        let mut t = String::new();
        verdicts(&mut t, &r);
        let line = |start: &str| t.lines().find(|l| l.starts_with(start)).unwrap_or_else(|| panic!("{t}")).to_string();
        assert_eq!(
            line("Assert p99"),
            "Assert p99<30ms: ok (2 ms; 10.00% of calls failed, each counted at its time to fail)"
        );
        assert_eq!(line("Assert error_rate"), "Assert error_rate<20%: ok (10.00%)");
    }

    #[test]
    fn verdicts_print_assertions_then_notices() {
        let s = run();
        let t = text(verdicts, &s);
        assert!(t.lines().all(|l| l.starts_with("Note: ")), "{t}");
        assert!(t.contains("closed loop"), "{t}");
    }
}
