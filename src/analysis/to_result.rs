//! The typed result (`result::Run`) of a finished run, made once from the analysis's
//! `Summary`: what every format renders, `--format json` writes and the history records.
//! Its keys are a stable interface (docs/design.md, "Stable interfaces"); new keys are only
//! ever added. The call-latency histogram rides along so that runs merge exactly.
use super::Summary;
use crate::grpc::status::{self, PerStatus};
use crate::grpc::transport::CallKind;
use crate::load::pacer::{Arrival, Pacer};
use crate::record::shard::to_text;
use crate::result::{self, LatencySummary, Mode, Process, Run, Slice, StreamKind, Verdict};
use crate::stats::histogram::packed_text as text;
use crate::stats::steady::Steadiness;
use crate::stats::Latency;
use crate::units;
use serde_json::Value;
use std::collections::BTreeMap;

/// The typed result of a finished run.
pub fn result(s: &Summary) -> Run {
    let open = match &s.pacer {
        Pacer::Open(rate, arrival) => Some((rate.to_string(), arrival)),
        _ => None,
    };
    Run {
        meta: meta(s, open.as_ref().map(|(_, a)| *a)),
        target: s.target.clone(),
        call: s.call.clone(),
        mode: mode(&s.pacer).into(),
        load: describe_load(s),
        concurrency: s.concurrency.into(),
        connections: s.connections.into(),
        partial: s.partial(),
        requests: requests(&s.requests),
        statuses: statuses(&s.statuses),
        attempt_statuses: statuses(&s.attempt_statuses),
        errors: s
            .errors
            .iter()
            .map(|e| result::ErrorCount {
                status: status::name(e.status).into(),
                message: e.message.clone(),
                count: e.count,
            })
            .collect(),
        duration_s: units::secs(s.duration),
        elapsed_s: Some(units::secs(s.elapsed)),
        throughput_rps: s.throughput_rps,
        ok_rps: Some(s.ok_rps),
        latency_us: LatencySummary::of(&s.latency),
        sent_latency_us: s.sent_only.as_ref().map(|t| LatencySummary::of_histogram(&t.call_latency)),
        ok_latency_us: Some(LatencySummary::of_histogram(&s.measured.ok_call_latency)),
        attempt_latency_us: Some(LatencySummary::of(&s.attempt_latency)),
        service_time_us: Some(LatencySummary::of(&s.service_time)),
        schedule_lag_us: s.schedule_lag.as_ref().map(LatencySummary::of),
        request_bytes: Some(s.measured.counts.request_bytes),
        response_bytes: Some(s.measured.counts.response_bytes),
        late_sends: Some(s.late_sends),
        late_wakeups: Some(s.late_wakeups),
        client: Some(client(&s.client)),
        notices: result::Notices(
            s.notices.iter().map(|n| result::Notice { kind: Some(n.kind.into()), message: n.text.clone() }).collect(),
        ),
        histograms: result::Histograms {
            sent_call_latency: s.sent_only.as_ref().map(|t| to_text(&t.call_latency)),
            ..histograms(&s.measured)
        },
        interval_s: Some(units::secs(s.interval)),
        intervals: Some(s.intervals.iter().map(interval_row).collect()),
        rps_target: open.as_ref().map(|(rate, _)| rate.clone()),
        loop_per_worker: s.loop_per_worker,
        steady_state: Some(steady_state(&s.steady, s.requests.ok)),
        warm_rounds: s.warm_rounds.map(|rounds| verdict(rounds).into()),
        warmup_rounds: match s.warm_rounds {
            Some(Steadiness::Steady { from }) => Some(from as u64),
            _ => None,
        },
        server: s.server.as_ref().map(server),
        calibration: s.floor.as_ref().map(calibration),
        messages: s.messages.as_ref().map(|m| messages(m, &s.measured)),
        warmup: s.warmup.as_ref().map(warmup),
        rounds: (!s.rounds.is_empty()).then(|| s.rounds.iter().map(round).collect()),
        calls_by_name: (!s.call_shares.is_empty()).then(|| calls_by_name(s, s.duration).into_iter().collect()),
        flows: (!s.flow_shares.is_empty()).then(|| flows(s, s.duration).into_iter().collect()),
        checks: (!s.check_counts.is_empty()).then(|| checks(s)),
        backends: (!s.backend_shares.is_empty()).then(|| backends(s, s.duration).into_iter().collect()),
        backend_intervals: (!s.backend_shares.is_empty()).then(|| backend_intervals(s)),
        replay: s.replay.clone(),
        ..Run::default()
    }
}

fn requests(r: &super::Requests) -> result::Requests {
    result::Requests {
        total: r.total,
        ok: r.ok,
        failed: r.failed,
        retries: Some(r.retries),
        attempts: Some(r.attempts),
        retry_exhausted: Some(r.retry_exhausted),
        abandoned: Some(r.abandoned),
        unsent: Some(r.unsent),
    }
}

/// The machine's floor; null when it was never calibrated.
fn calibration(floor: &Option<crate::calibrate::Calibration>) -> Value {
    floor.as_ref().and_then(|c| serde_json::to_value(c).ok()).unwrap_or(Value::Null)
}

fn warmup(w: &super::Phase) -> result::Warmup {
    result::Warmup {
        duration_s: units::secs(w.duration),
        calls: w.calls,
        throughput_rps: w.throughput_rps,
        latency_us: LatencySummary::of(&w.latency),
    }
}

fn round(r: &super::Round) -> result::Round {
    result::Round { took_ms: units::secs(r.took) * 1e3, rps: r.rps }
}

fn meta(s: &Summary, arrival: Option<&Arrival>) -> result::Meta {
    result::Meta {
        rpcmeter_version: env!("CARGO_PKG_VERSION").into(),
        schema_version: Some(result::SCHEMA_VERSION.into()),
        run_id: Some(s.meta.run_id.to_string().into()),
        started_at: Some(humantime::format_rfc3339_millis(s.meta.started_at).to_string()),
        name: s.meta.name.clone(),
        tags: s.meta.tags.iter().cloned().collect(),
        arguments: Some(s.meta.arguments.clone()),
        ended: s.ended,
        shard: Some(s.shard.map(|sh| format!("{}/{}", sh.index, sh.count))),
        // The seed is what makes a Poisson run drawn again exactly (`--seed`).
        arrival: arrival.map(|a| match a {
            Arrival::Uniform => result::Arrival { process: Process::Uniform.into(), seed: None },
            Arrival::Poisson { seed } => result::Arrival { process: Process::Poisson.into(), seed: Some(*seed) },
            Arrival::Logged => result::Arrival { process: Process::Logged.into(), seed: None },
        }),
        ..result::Meta::default()
    }
}

fn mode(pacer: &Pacer) -> Mode {
    match pacer {
        Pacer::Closed => Mode::Closed,
        Pacer::Open(..) => Mode::Open,
        Pacer::Burst { .. } => Mode::Burst,
    }
}

fn client(c: &super::Client) -> result::Client {
    result::Client {
        cpu_s: units::secs(c.cpu),
        cpu_us_per_request: units::micros(c.cpu_per_call),
        max_rss_bytes: c.max_rss_bytes,
        threads: c.threads.into(),
        utilization: c.utilization,
        hiccup_us: c.hiccups.map(|h| result::Hiccups {
            count: h.count,
            p50: units::micros(h.p50),
            p99: units::micros(h.p99),
            max: units::micros(h.max),
        }),
    }
}

fn histograms(m: &crate::record::Tally) -> result::Histograms {
    result::Histograms {
        call_latency: to_text(&m.call_latency),
        sent_call_latency: None,
        ok_call_latency: Some(to_text(&m.ok_call_latency)),
        attempt_latency: Some(to_text(m.attempt_latency())),
        service_time: Some(to_text(m.service_time())),
        schedule_lag: Some(to_text(m.schedule_lag())),
    }
}

fn server(server: &super::ServerSide) -> result::Server {
    result::Server {
        received: server.received,
        ok: server.ok,
        failed: server.failed,
        rejected: server.rejected,
        messages_in: server.messages_in,
        messages_out: server.messages_out,
        throughput_rps: server.throughput_rps,
        cpu_s: units::secs(server.cpu),
        rss_bytes: server.rss_bytes,
        echo_spin_us: server.echo_spin.as_micros() as u64,
    }
}

fn messages(m: &super::Messages, measured: &crate::record::Tally) -> result::Messages {
    result::Messages {
        kind: stream_kind(m.kind).into(),
        sent: m.sent,
        received: m.received,
        sent_per_s: m.sent_per_s,
        received_per_s: m.received_per_s,
        round_trip_us: m.round_trip.as_ref().map(LatencySummary::of),
        round_trip_histogram: m.round_trip.as_ref().map(|_| to_text(measured.message_latency())),
        first_message_us: m.first_message.as_ref().map(LatencySummary::of),
        first_message_histogram: m.first_message.as_ref().map(|_| to_text(measured.first_message())),
    }
}

fn stream_kind(kind: CallKind) -> StreamKind {
    match kind {
        CallKind::Unary => StreamKind::Unary,
        CallKind::ClientStream => StreamKind::ClientStreaming,
        CallKind::ServerStream => StreamKind::ServerStreaming,
        CallKind::Bidi => StreamKind::Bidi,
    }
}

fn verdict(v: Steadiness) -> Verdict {
    match v {
        Steadiness::Steady { .. } => Verdict::Steady,
        Steadiness::NoSteadyState => Verdict::NoSteadyState,
        Steadiness::TooShort => Verdict::TooShort,
        Steadiness::NotFinite { .. } => Verdict::EmptyInterval,
    }
}

/// A run with no OK call is not judged: its latencies are those of failures. A run's and a
/// merge's verdict (app/merge.rs) are written by this one function.
pub fn steady_state(s: &super::SteadyState, ok: u64) -> result::SteadyState {
    result::SteadyState {
        verdict: if ok == 0 { Verdict::NotJudged } else { verdict(s.verdict) }.into(),
        steady_after_s: s.after.filter(|_| ok > 0).map(units::secs),
        intervals: s.intervals as u64,
        series: "p50 call latency per interval".into(),
    }
}

/// One row of the interval series (the same columns as `--format csv`).
fn interval_row(row: &crate::record::intervals::IntervalRow) -> result::IntervalRow {
    result::IntervalRow {
        t_s: units::secs(row.at),
        length_s: units::secs(row.length),
        phase: row.phase().into(),
        calls: row.calls,
        ok: Some(row.ok),
        failed: row.failed,
        rps: crate::stats::rate(row.calls, row.length),
        p50_us: units::micros(row.p50),
        p90_us: units::micros(row.p90),
        p99_us: units::micros(row.p99),
        max_us: units::micros(row.max),
        service_p99_us: units::micros(row.service_p99),
        client_cpu_total_s: units::secs(row.client_cpu_total),
        client_rss_bytes: row.client_rss_bytes,
        messages_sent: row.messages_sent,
        messages_received: row.messages_received,
        histogram: row.packed.as_ref().map(|p| text(&p.call_latency)),
        service_histogram: row.packed.as_ref().and_then(|p| p.service_time.as_deref()).map(text),
    }
}

/// `--workload`: each call name's slice (merge adds them).
fn calls_by_name(s: &Summary, window: std::time::Duration) -> Vec<(String, Slice)> {
    s.call_shares
        .iter()
        .map(|((name, method), share)| {
            let slice = sent_beside(slice(&share.measured, window), share.sent.as_ref());
            (name.clone(), Slice { method: Some(method.clone()), ..slice })
        })
        .collect()
}

/// A slice with its sent-only latencies, when some of its calls (flows) were due but never sent.
fn sent_beside(slice: Slice, sent: Option<&hdrhistogram::Histogram<u64>>) -> Slice {
    Slice { sent_latency_us: sent.map(LatencySummary::of_histogram), sent_histogram: sent.map(to_text), ..slice }
}

/// `--workload` flows: each flow a slice of whole flows (latency: from its start to its last
/// answer), with its steps and the flows a check or a capture ended early.
fn flows(s: &Summary, window: std::time::Duration) -> Vec<(String, Slice)> {
    s.flow_shares
        .iter()
        .map(|((name, steps), share)| {
            let flow = &share.measured;
            let mut slice = sent_beside(slice(&flow.share, window), share.sent.as_ref());
            let (total, ok) = (flow.share.calls, flow.ok());
            slice.requests = result::Counts { total, ok, failed: total - ok };
            slice.steps = Some(steps.clone());
            slice.stopped_by_check = Some(flow.stopped_by_check);
            slice.capture_errors = Some(flow.capture_errors);
            (name.to_owned(), slice)
        })
        .collect()
}

/// `--workload` checks, each its own entry, in the workload's order.
fn checks(s: &Summary) -> Vec<result::CheckCount> {
    s.checks()
        .into_iter()
        .map(|(call, text, pass, fail)| result::CheckCount { call: call.into(), expression: text.into(), pass, fail })
        .collect()
}

/// Targets broken down by backend: each address's slice (merge adds them).
fn backends(s: &Summary, window: std::time::Duration) -> Vec<(String, Slice)> {
    s.by_backend().into_iter().map(|(addr, share)| (addr.to_owned(), slice(share, window))).collect()
}

/// Targets broken down by backend: each interval's calls by backend, the first
/// `BACKEND_LINES` backends a line each and the rest folded into one.
fn backend_intervals(s: &Summary) -> result::backend_intervals::BackendIntervals {
    use crate::record::intervals::{BackendLine, BACKEND_LINES};
    use result::backend_intervals::BackendSeries;
    let n = s.intervals.len();
    let named = s.backend_shares.len().min(BACKEND_LINES);
    let folded = s.backend_shares.len() - named;
    let mut lines: Vec<BackendSeries> =
        s.backend_shares[..named].iter().map(|(address, _)| BackendSeries::named(address.clone(), n)).collect();
    let mut others = (folded > 0).then(|| BackendSeries {
        backends: Some(folded as u64),
        answering: Some(Vec::with_capacity(n)),
        ..BackendSeries::named(format!("({folded} other backend{})", if folded == 1 { "" } else { "s" }), n)
    });
    let mut no_backend = Vec::with_capacity(n);
    let empty = BackendLine::default();
    // A shard's lines carry their histograms, as its intervals do.
    let keep = s.intervals.iter().any(|row| row.packed.is_some());
    for row in &s.intervals {
        let at = row.backends.as_ref();
        for (k, series) in lines.iter_mut().enumerate() {
            push_line(series, at.and_then(|b| b.lines.get(k)).unwrap_or(&empty), keep);
        }
        if let Some(series) = &mut others {
            let folded = at.and_then(|b| b.others.as_ref());
            push_line(series, folded.map_or(&empty, |o| &o.line), keep);
            series.answering.get_or_insert_with(Vec::new).push(folded.map_or(0, |o| o.answering));
        }
        no_backend.push(row.calls.saturating_sub(at.map_or(0, |b| b.calls())));
    }
    lines.extend(others);
    result::backend_intervals::BackendIntervals { lines, no_backend }
}

/// One interval of a backend's line, with its histogram when the run `keep`s them.
fn push_line(
    series: &mut result::backend_intervals::BackendSeries,
    line: &crate::record::intervals::BackendLine,
    keep: bool,
) {
    let ok = line.statuses.get(tonic::Code::Ok);
    let failed: Vec<(&str, u64)> = line
        .statuses
        .nonzero()
        .filter(|(code, _)| *code != tonic::Code::Ok)
        .map(|(c, n)| (status::name(c), n))
        .collect();
    let latency = (line.calls() > 0).then(|| (units::micros(line.p50), units::micros(line.p99)));
    series.push(line.calls(), ok, &failed, latency);
    if keep {
        series.histograms.get_or_insert_with(Vec::new).push(line.packed.as_deref().map(text));
    }
}

/// One share of a run (a call name's, a backend's) as a slice.
fn slice(share: &crate::record::shard::NameTally, window: std::time::Duration) -> Slice {
    let ok = share.statuses.get(tonic::Code::Ok);
    Slice {
        requests: result::Counts { total: share.calls, ok, failed: share.calls - ok },
        throughput_rps: crate::stats::rate(share.calls, window),
        statuses: statuses(&share.statuses),
        latency_us: LatencySummary::of(&Latency::of(&share.latency)),
        histogram: to_text(&share.latency),
        ..Slice::default()
    }
}

fn statuses(counts: &PerStatus) -> BTreeMap<String, u64> {
    counts.nonzero().map(|(code, n)| (status::name(code).to_string(), n)).collect()
}

/// A latency summary in µs, keyed by each statistic's JSON key (p50, p999, ...).
pub fn latency(l: &Latency) -> Value {
    serde_json::to_value(LatencySummary::of(l)).unwrap_or_default()
}

/// The mode as words: "closed loop, 8 workers".
pub fn describe_load(s: &Summary) -> String {
    match &s.pacer {
        Pacer::Open(rate, Arrival::Uniform) => {
            format!("open loop at {} calls/s, at most {} in flight", rate, s.concurrency)
        }
        Pacer::Open(rate, Arrival::Poisson { seed }) => format!(
            "open loop, Poisson arrivals (seed {seed}) at {} calls/s, at most {} in flight",
            rate, s.concurrency
        ),
        Pacer::Open(rate, Arrival::Logged) => {
            format!("open loop on the log's schedule (mean {rate} calls/s), at most {} in flight", s.concurrency)
        }
        Pacer::Burst { .. } => format!("bursts of {}", s.concurrency),
        Pacer::Closed => match &s.active_workers {
            Some(stages) => format!("closed loop, {} workers, active in stages {stages}", s.concurrency),
            None => format!("closed loop, {} workers", s.concurrency),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::fixture;
    use std::time::Duration;

    /// Two identical checks on one call are two entries (before: keyed "call: expression",
    /// the second overwrote the first).
    #[test]
    fn two_identical_checks_are_two_entries() {
        let measured = fixture::tally(10, Duration::from_millis(1), 0);
        let mut s = fixture::summary(fixture::plan(), fixture::recorded(measured, Duration::from_secs(1)));
        let check = || ("get".to_string(), "status == OK".to_string());
        s.check_counts = vec![(check(), (3, 0)), (check(), (0, 4))];
        let checks = result(&s).checks.unwrap();
        let counts: Vec<(&str, u64, u64)> = checks.iter().map(|c| (c.call.as_str(), c.pass, c.fail)).collect();
        assert_eq!(counts, [("get", 3, 0), ("get", 0, 4)]);
        let back = Run::parse(&result(&s).to_json_pretty()).unwrap();
        assert_eq!(back.checks.unwrap(), checks, "read back as written");
    }

    /// A merge judges the series as written (`of_result_rows`), a run its rows as recorded
    /// (`steady_state`): the same rows give the same verdict either way, a 0.3 s interval
    /// (0.299999… s read back) included.
    #[test]
    fn rows_as_written_are_judged_as_the_rows_they_were_written_from() {
        use crate::analysis::steady::{of_result_rows, steady_state};
        let (_, rows, _) = fixture::warming_up(4, 12);
        let written: Vec<result::IntervalRow> = rows.iter().map(interval_row).collect();
        let second = Duration::from_secs(1);
        assert_eq!(of_result_rows(&written, second), steady_state(&rows, second));
        assert_eq!(steady_state(&rows, second).after, Some(Duration::from_secs(4)));
        let tenths: Vec<result::IntervalRow> =
            written.iter().map(|r| result::IntervalRow { length_s: 0.3, ..r.clone() }).collect();
        let interval = Duration::try_from_secs_f64(0.3).unwrap();
        assert_eq!(of_result_rows(&tenths, interval).intervals, 16);
    }
}
