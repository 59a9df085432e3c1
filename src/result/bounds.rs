//! The bounds a result's numbers are read within, so that a hand-edited or broken file is
//! refused in one line (exit 2) rather than drawn: no count beyond 2^53 (what a JSON number
//! holds exactly, and a few of them would overflow a sum), no negative or endless duration,
//! latency or rate, and no calls without a window to measure them in.
use super::{LatencySummary, Run, Slice};

/// The largest count a result may hold: 2^53.
pub const MAX_COUNT: u64 = 1 << 53;
/// About 31 years: no run, window or CPU time is longer.
const MAX_SECONDS: f64 = 1e9;
/// About 11.6 days in µs: the histograms hold latencies up to an hour.
const MAX_MICROS: f64 = 1e12;
/// Calls (or messages) per second: a billion is beyond any client.
const MAX_RATE: f64 = 1e9;

type Checked = Result<(), String>;

/// A number as the message shows it: huge ones in e-notation, not 309 digits.
fn show(x: f64) -> String {
    if x.is_finite() && x.abs() < 1e9 {
        x.to_string()
    } else {
        format!("{x:e}")
    }
}

fn count(path: &str, n: u64) -> Checked {
    match n <= MAX_COUNT {
        true => Ok(()),
        false => Err(format!("{path} {n} is not a count (at most 2^53)")),
    }
}

fn within(path: &str, x: f64, max: f64, what: &str) -> Checked {
    match x.is_finite() && (0.0..=max).contains(&x) {
        true => Ok(()),
        false => Err(format!("{path} {} is not {what} (0 to {})", show(x), show(max))),
    }
}

fn seconds(path: &str, s: f64) -> Checked {
    within(path, s, MAX_SECONDS, "a duration in seconds")
}

fn micros(path: &str, us: f64) -> Checked {
    within(path, us, MAX_MICROS, "a latency in µs")
}

fn rate(path: &str, r: f64) -> Checked {
    within(path, r, MAX_RATE, "a rate per second")
}

fn latency(path: &str, l: &LatencySummary) -> Checked {
    count(&format!("{path}.count"), l.count)?;
    l.stats.iter().try_for_each(|(stat, us)| micros(&format!("{path}.{stat}"), *us))
}

fn counts<'a>(path: &str, each: impl IntoIterator<Item = (&'a String, &'a u64)>) -> Checked {
    each.into_iter().try_for_each(|(name, n)| count(&format!("{path}.{name}"), *n))
}

/// OK and failed calls are among the calls made (both at most 2^53 here, so the sum holds).
fn outcomes(path: &str, total: u64, ok: u64, failed: u64) -> Checked {
    match ok + failed <= total {
        true => Ok(()),
        false => Err(format!("{path}.ok {ok} and {path}.failed {failed} are more than {path}.total {total}")),
    }
}

fn slice(path: &str, s: &Slice) -> Checked {
    let c = &s.requests;
    for (key, n) in [("total", c.total), ("ok", c.ok), ("failed", c.failed)] {
        count(&format!("{path}.requests.{key}"), n)?;
    }
    outcomes(&format!("{path}.requests"), c.total, c.ok, c.failed)?;
    rate(&format!("{path}.throughput_rps"), s.throughput_rps)?;
    counts(&format!("{path}.statuses"), &s.statuses)?;
    latency(&format!("{path}.latency_us"), &s.latency_us)
}

/// Every number of `r` within its bounds, or the first that is not, by its path. `timed`:
/// the result gives its window (`duration_s`); one that does not has no rate to mislead.
pub fn check(r: &Run, timed: bool) -> Checked {
    let q = &r.requests;
    let run_wide = [
        ("retries", q.retries),
        ("attempts", q.attempts),
        ("retry_exhausted", q.retry_exhausted),
        ("abandoned", q.abandoned),
        ("unsent", q.unsent),
    ];
    let whole = [("total", Some(q.total)), ("ok", Some(q.ok)), ("failed", Some(q.failed))];
    for (key, n) in whole.into_iter().chain(run_wide) {
        count(&format!("requests.{key}"), n.unwrap_or(0))?;
    }
    counts("statuses", &r.statuses)?;
    counts("attempt_statuses", &r.attempt_statuses)?;
    r.errors.iter().try_for_each(|e| count("errors[].count", e.count))?;
    count("late_sends", r.late_sends.unwrap_or(0))?;
    count("late_wakeups", r.late_wakeups.unwrap_or(0))?;
    seconds("duration_s", r.duration_s)?;
    // Calls without a window: every rate over it would be endless (or, merged, would count
    // those calls in another input's window).
    if timed && q.total > 0 && r.duration_s < 1e-6 {
        return Err(format!("duration_s {} with {} calls: no measured window", show(r.duration_s), q.total));
    }
    outcomes("requests", q.total, q.ok, q.failed)?;
    // Counts each within bounds can still be more than their window holds: every rate drawn
    // from them (report's, merge's) would be beyond any client.
    if timed && q.total as f64 > MAX_RATE * r.duration_s {
        let (total, window, rate) = (q.total, show(r.duration_s), show(MAX_RATE));
        return Err(format!("requests.total {total} in duration_s {window}: more than {rate} calls/s"));
    }
    rate("throughput_rps", r.throughput_rps)?;
    rate("ok_rps", r.ok_rps.unwrap_or(0.0))?;
    let latencies = [
        ("latency_us", Some(&r.latency_us)),
        ("ok_latency_us", r.ok_latency_us.as_ref()),
        ("attempt_latency_us", r.attempt_latency_us.as_ref()),
        ("service_time_us", r.service_time_us.as_ref()),
        ("schedule_lag_us", r.schedule_lag_us.as_ref()),
    ];
    for (key, l) in latencies {
        l.map_or(Ok(()), |l| latency(key, l))?;
    }
    for (key, s) in [("interval_s", r.interval_s), ("span_s", r.span_s)] {
        seconds(key, s.unwrap_or(0.0))?;
    }
    r.windows.iter().flatten().try_for_each(|w| seconds("windows[].duration_s", w.duration_s))?;
    if let Some(c) = &r.client {
        client(c)?;
    }
    if let Some(w) = &r.warmup {
        seconds("warmup.duration_s", w.duration_s)?;
        count("warmup.calls", w.calls)?;
        rate("warmup.throughput_rps", w.throughput_rps)?;
        latency("warmup.latency_us", &w.latency_us)?;
    }
    r.intervals.iter().flatten().try_for_each(interval)?;
    r.backend_intervals.iter().flat_map(|b| &b.lines).try_for_each(backend_series)?;
    r.backend_intervals
        .iter()
        .flat_map(|b| &b.no_backend)
        .try_for_each(|&n| count("backend_intervals.no_backend[]", n))?;
    if let Some(m) = &r.messages {
        count("messages.sent", m.sent)?;
        count("messages.received", m.received)?;
        rate("messages.sent_per_s", m.sent_per_s)?;
        rate("messages.received_per_s", m.received_per_s)?;
        m.round_trip_us.as_ref().map_or(Ok(()), |l| latency("messages.round_trip_us", l))?;
        m.first_message_us.as_ref().map_or(Ok(()), |l| latency("messages.first_message_us", l))?;
    }
    for key in super::BREAKDOWNS {
        for (name, s) in r.breakdown(key).into_iter().flatten() {
            slice(&format!("{key}.{name}"), s)?;
        }
    }
    for c in r.checks.iter().flatten() {
        count("checks[].pass", c.pass)?;
        count("checks[].fail", c.fail)?;
    }
    for s in r.shards.iter().flatten() {
        count("shards[].calls", s.calls)?;
        rate("shards[].throughput_rps", s.throughput_rps)?;
        s.client.as_ref().map_or(Ok(()), client)?;
    }
    Ok(())
}

fn client(c: &super::Client) -> Checked {
    seconds("client.cpu_s", c.cpu_s)?;
    micros("client.cpu_us_per_request", c.cpu_us_per_request)?;
    count("client.max_rss_bytes", c.max_rss_bytes)?;
    count("client.threads", c.threads)?;
    // CPU over wall time per thread: above 1 only by measuring noise.
    within("client.utilization", c.utilization, 1e3, "a share of the client's threads")
}

fn backend_series(line: &super::backend_intervals::BackendSeries) -> Checked {
    let columns =
        [("calls", &line.calls), ("ok", &line.ok)].into_iter().chain(line.failed.iter().map(|(s, c)| (s.as_str(), c)));
    for (key, column) in columns.chain(line.answering.iter().map(|c| ("answering", c))) {
        let path = format!("backend_intervals.lines[].{key}[]");
        column.iter().try_for_each(|&n| count(&path, n))?;
    }
    for (key, column) in [("p50_us", &line.p50_us), ("p99_us", &line.p99_us)] {
        let path = format!("backend_intervals.lines[].{key}[]");
        column.iter().flatten().try_for_each(|&v| micros(&path, v))?;
    }
    Ok(())
}

fn interval(row: &super::IntervalRow) -> Checked {
    seconds("intervals[].t_s", row.t_s)?;
    seconds("intervals[].length_s", row.length_s)?;
    for (key, n) in [("calls", row.calls), ("ok", row.ok.unwrap_or(0)), ("failed", row.failed)] {
        count(&format!("intervals[].{key}"), n)?;
    }
    rate("intervals[].rps", row.rps)?;
    let us = [
        ("p50_us", row.p50_us),
        ("p90_us", row.p90_us),
        ("p99_us", row.p99_us),
        ("max_us", row.max_us),
        ("service_p99_us", row.service_p99_us),
    ];
    us.into_iter().try_for_each(|(key, v)| micros(&format!("intervals[].{key}"), v))?;
    seconds("intervals[].client_cpu_total_s", row.client_cpu_total_s)?;
    count("intervals[].client_rss_bytes", row.client_rss_bytes)?;
    count("intervals[].messages_sent", row.messages_sent)?;
    count("intervals[].messages_received", row.messages_received)
}
