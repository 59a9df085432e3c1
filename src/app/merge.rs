//! `rpcmeter merge`: results of several runs (the shards of one distributed run, or any runs
//! of the same call) as one result, exactly: counts added, every histogram merged losslessly
//! so that the merged p99 is the p99 of all samples (never an average of p99s), throughput
//! over the union of the measured windows, each input's client cost kept and any input whose
//! client was the bottleneck named. The output is a result JSON like `run`'s, so that
//! compare, report and merge itself read it.
use crate::error::bad_input;
use crate::record::shard::{from_text, new_histogram, to_text};
use crate::report::breakdown::Kind;
use crate::result::slice::{add_statuses, merge_breakdown};
use crate::result::{self, LatencySummary, Run, BREAKDOWNS};
use hdrhistogram::Histogram;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, SystemTime};

pub(crate) mod series;

/// One input: where it came from and its result.
pub struct Input {
    pub label: String,
    pub result: Run,
}

impl Input {
    /// A result's JSON value as an input; anything that is not a result is bad input.
    pub fn of_value(label: String, value: Value) -> anyhow::Result<Input> {
        // Its numbers are bounded there (result::bounds): counts a sum holds, finite durations.
        let result = Run::from_value_requiring(value, &NEEDED).map_err(|e| bad_input(format!("{label}: {e}")))?;
        Ok(Input { label, result })
    }
}

impl Input {
    /// One slice of this input (`calls_by_name`, "put") as an input of its own.
    pub fn slice(self, key: &str, name: &str) -> anyhow::Result<Input> {
        let result = self.result.of_slice(key, name).map_err(|e| bad_input(format!("{}: {e}", self.label)))?;
        Ok(Input { label: format!("{} [{key}={name}]", self.label), result })
    }
}

/// Reads a result file; anything that is not a result of `run --format json` is bad input.
pub fn read(path: &Path) -> anyhow::Result<Input> {
    // A history id ("42", "#42") or a file.
    let text = crate::history::resolve_text(&path.to_string_lossy())?;
    let label = path.display().to_string();
    let value: Value = serde_json::from_str(&text).map_err(|e| bad_input(format!("{label}: not JSON: {e}")))?;
    Input::of_value(label, value)
}

/// What merge reads beside the counts: the histograms it adds, the start and length of a window.
const NEEDED: [&str; 3] = ["histograms", "meta", "duration_s"];

/// Results one after the other in one text, as `kubectl logs` of several pods gives them:
/// every JSON object that starts a line is read; other lines (a pod's error) are returned
/// apart, to be shown.
pub fn read_stream(text: &str, label: &str) -> anyhow::Result<(Vec<Input>, Vec<String>)> {
    let (mut inputs, mut skipped) = (Vec::new(), Vec::new());
    let mut rest = text;
    while !rest.trim().is_empty() {
        let line_end = rest.find('\n').map_or(rest.len(), |i| i + 1);
        if rest.starts_with('{') {
            let mut values = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
            if let Some(Ok(result)) = values.next() {
                let used = values.byte_offset();
                inputs.push(Input::of_value(format!("{label} #{}", inputs.len() + 1), result)?);
                rest = rest[used..].trim_start_matches([' ', '\t', '\r', '\n']);
                continue;
            }
        }
        let line = rest[..line_end].trim();
        if !line.is_empty() {
            skipped.push(line.to_string());
        }
        rest = &rest[line_end..];
    }
    Ok((inputs, skipped))
}

/// The merged result.
pub fn merge(inputs: &[Input]) -> anyhow::Result<Run> {
    let first = &inputs.first().ok_or_else(|| bad_input("merge: no result given"))?.result;
    let sources = sources(inputs)?;
    one_run(inputs)?;
    let mixed = mixed(inputs);
    // Throughput over the union of the measured windows: runs apart do not count the time
    // between them, runs that overlap count their overlap once.
    let mut windows = Vec::new();
    for input in inputs {
        windows.extend(measured_windows(&input.result).map_err(|e| bad_input(format!("{}: {e}", input.label)))?);
    }
    let each: f64 = windows.iter().map(|(from, to)| to - from).sum();
    let windows = union(windows);
    let start = windows.first().map_or(0.0, |w| w.0);
    let span = windows.last().map_or(0.0, |w| w.1) - start;
    let measured: f64 = windows.iter().map(|(from, to)| to - from).sum();
    // Some inputs ran at the same time: their windows overlap (by more than a µs's rounding).
    let together = measured < each - 1e-6;
    // To the µs, as written: the rates are of the window a reader reads back.
    let window = crate::units::from_secs(measured).unwrap_or_default();
    let rate = |n: u64| crate::stats::rate(n, window);
    let micros = |s: f64| (s * 1e6).round() / 1e6;

    let mut out = Run { ..Run::default() };
    merge_latencies(inputs, &mut out)?;
    merge_counts(inputs, &mut out);
    out.duration_s = crate::units::secs(window);
    out.duration_is = Some(DURATION_IS.into());
    out.span_s = Some(micros(span));
    out.windows = Some(
        windows
            .iter()
            .map(|(from, to)| result::Window { started_at: rfc3339(*from), duration_s: micros(to - from) })
            .collect(),
    );
    out.throughput_rps = rate(out.requests.total);
    out.ok_rps = Some(out.ok_calls_per_s());
    if let Some(kind) = first.messages.as_ref().map(|m| m.kind.clone()) {
        out.messages = Some(merge_messages(inputs, kind, &rate)?);
    }
    merge_breakdowns(inputs, &rate, &mut out)?;
    out.replay = merge_replay(inputs)?;
    out.shards = Some(inputs.iter().map(shard_part).collect());
    out.notices = notices(inputs, &mixed);
    out.partial = inputs.iter().any(|i| i.result.partial);
    copy_settings(inputs, &mut out);
    merge_series(inputs, together, &mut out);
    out.meta = result::Meta {
        rpcmeter_version: env!("CARGO_PKG_VERSION").into(),
        schema_version: Some(result::SCHEMA_VERSION.into()),
        run_id: Some(uuid::Uuid::new_v4().to_string().into()),
        source_run_ids: Some(sources.into_iter().map(Value::from).collect()),
        merged_from: Some(inputs.iter().map(|i| i.label.clone()).collect()),
        started_at: Some(rfc3339(start)),
        ended: if out.partial { result::Ended::Partial } else { result::Ended::Completed },
        name: first.meta.name.clone(),
        tags: first.meta.tags.clone(),
        mixed: Some(mixed),
        ..result::Meta::default()
    };
    Ok(out)
}

/// Every histogram added, then summarised again from the sum.
fn merge_latencies(inputs: &[Input], out: &mut Run) -> anyhow::Result<()> {
    type Pick = fn(&result::Histograms) -> Option<&String>;
    let sum = |key: &str, pick: Pick| -> anyhow::Result<Histogram<u64>> {
        let mut sum = new_histogram();
        for input in inputs {
            let text = pick(&input.result.histograms).map_or("", String::as_str);
            let h = from_text(text).map_err(|why| bad_input(format!("{}: histograms.{key} {why}", input.label)))?;
            sum.add(&h).map_err(|e| bad_input(format!("{}: histograms.{key}: {e}", input.label)))?;
        }
        Ok(sum)
    };
    // Results written before a histogram existed (ok_call_latency), and slices, which keep
    // the call latency alone, merge without the others.
    let every = |key: &str, pick: Pick| -> anyhow::Result<Option<Histogram<u64>>> {
        match inputs.iter().all(|i| pick(&i.result.histograms).is_some()) {
            true => sum(key, pick).map(Some),
            false => Ok(None),
        }
    };
    let calls = sum("call_latency", |h| Some(&h.call_latency))?;
    let ok = every("ok_call_latency", |h| h.ok_call_latency.as_ref())?;
    let attempts = every("attempt_latency", |h| h.attempt_latency.as_ref())?;
    let service = every("service_time", |h| h.service_time.as_ref())?;
    let lag = every("schedule_lag", |h| h.schedule_lag.as_ref())?;
    // The calls sent only: each input's own, or its call latency when it sent every due call.
    let sent_only: Pick = |h| h.sent_call_latency.as_ref().or(Some(&h.call_latency));
    let any_unsent = inputs.iter().any(|i| i.result.histograms.sent_call_latency.is_some());
    let sent = if any_unsent { Some(sum("sent_call_latency", sent_only)?) } else { None };
    out.histograms = result::Histograms {
        call_latency: to_text(&calls),
        sent_call_latency: sent.as_ref().map(to_text),
        ok_call_latency: ok.as_ref().map(to_text),
        attempt_latency: attempts.as_ref().map(to_text),
        service_time: service.as_ref().map(to_text),
        schedule_lag: lag.as_ref().map(to_text),
    };
    out.latency_us = LatencySummary::of_histogram(&calls);
    out.sent_latency_us = sent.as_ref().map(LatencySummary::of_histogram);
    out.ok_latency_us = ok.as_ref().map(LatencySummary::of_histogram);
    out.attempt_latency_us = attempts.as_ref().map(LatencySummary::of_histogram);
    out.service_time_us = service.as_ref().map(LatencySummary::of_histogram);
    if inputs[0].result.schedule_lag_us.is_some() {
        out.schedule_lag_us = lag.as_ref().map(LatencySummary::of_histogram);
    }
    Ok(())
}

/// Counts, statuses and errors: added.
fn merge_counts(inputs: &[Input], out: &mut Run) {
    let r = &mut out.requests;
    // A run-wide count is added where inputs have it; slices have none, and get none.
    let add = |sum: Option<u64>, n: Option<u64>| match (sum, n) {
        (Some(a), Some(b)) => Some(a.saturating_add(b)),
        (a, b) => a.or(b),
    };
    for q in inputs.iter().map(|i| &i.result.requests) {
        r.total = r.total.saturating_add(q.total);
        r.ok = r.ok.saturating_add(q.ok);
        r.failed = r.failed.saturating_add(q.failed);
        r.retries = add(r.retries, q.retries);
        r.attempts = add(r.attempts, q.attempts);
        r.retry_exhausted = add(r.retry_exhausted, q.retry_exhausted);
        r.abandoned = add(r.abandoned, q.abandoned);
        r.unsent = add(r.unsent, q.unsent);
    }
    // The open loop's late sends, by cause (slot waits, late wake-ups): added, when the inputs have them.
    let late = |pick: fn(&Run) -> Option<u64>| -> Option<u64> {
        inputs.iter().any(|i| pick(&i.result).is_some()).then(|| inputs.iter().filter_map(|i| pick(&i.result)).sum())
    };
    out.late_sends = late(|r| r.late_sends);
    out.late_wakeups = late(|r| r.late_wakeups);
    for input in inputs {
        add_statuses(&mut out.statuses, &input.result.statuses);
        add_statuses(&mut out.attempt_statuses, &input.result.attempt_statuses);
    }
    let mut errors: BTreeMap<(String, String), u64> = BTreeMap::new();
    for e in inputs.iter().flat_map(|i| &i.result.errors) {
        let count = errors.entry((e.status.clone(), e.message.clone())).or_default();
        *count = count.saturating_add(e.count);
    }
    let mut errors: Vec<_> = errors.into_iter().collect();
    errors.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    out.errors =
        errors.into_iter().map(|((status, message), count)| result::ErrorCount { status, message, count }).collect();
}

/// Each breakdown (`calls_by_name`, `flows`, `backends`): its slices added name by name; and
/// the checks' passes and failures, check by check.
fn merge_breakdowns(inputs: &[Input], rate: &dyn Fn(u64) -> f64, out: &mut Run) -> anyhow::Result<()> {
    for key in BREAKDOWNS {
        if inputs.iter().all(|i| i.result.breakdown(key).is_none()) {
            continue;
        }
        let maps = inputs.iter().filter_map(|i| Some((i.label.as_str(), i.result.breakdown(key)?)));
        let merged = merge_breakdown(maps, rate)
            .map_err(|(label, name, why)| bad_input(format!("{label}: {key}.{name}.{why}")))?;
        if let Some(slot) = out.breakdown_mut(key) {
            *slot = Some(merged);
        }
    }
    if inputs.iter().any(|i| i.result.checks.is_some()) {
        out.checks = Some(merge_checks(inputs.iter().filter_map(|i| i.result.checks.as_deref())));
    }
    Ok(())
}

/// `run --replay`: the log's own numbers of the calls sent added method by method (counts
/// added, histograms merged), bytes sent and logged added; what describes a log (its calls,
/// those not sent) counted once per log (shards of one replay each read the whole log).
fn merge_replay(inputs: &[Input]) -> anyhow::Result<Option<result::replay::Replay>> {
    let replays: Vec<(&str, &result::replay::Replay)> =
        inputs.iter().filter_map(|i| Some((i.label.as_str(), i.result.replay.as_ref()?))).collect();
    let Some((_, first)) = replays.first() else { return Ok(None) };
    let recorded = merge_breakdown(replays.iter().map(|(label, r)| (*label, &r.recorded)), &|_| 0.0)
        .map_err(|(label, name, why)| bad_input(format!("{label}: replay.recorded.{name}.{why}")))?;
    let mut logs: Vec<(&str, u64)> = Vec::new();
    let mut out = result::replay::Replay { recorded, ..(*first).clone() };
    let (mut calls, mut truncated, mut no_request, mut logged, mut sent) = (0u64, 0u64, 0u64, 0u64, 0u64);
    for (_, r) in &replays {
        logged = logged.saturating_add(r.payload_bytes_logged);
        sent = sent.saturating_add(r.payload_bytes_sent);
        if logs.contains(&(r.file.as_str(), r.calls_in_log)) {
            continue;
        }
        logs.push((r.file.as_str(), r.calls_in_log));
        calls = calls.saturating_add(r.calls_in_log);
        truncated = truncated.saturating_add(r.skipped_truncated);
        no_request = no_request.saturating_add(r.skipped_no_request);
    }
    let mut files: Vec<&str> = Vec::new();
    for (file, _) in logs {
        if !files.contains(&file) {
            files.push(file);
        }
    }
    out.file = files.join(", ");
    (out.calls_in_log, out.skipped_truncated, out.skipped_no_request) = (calls, truncated, no_request);
    (out.payload_bytes_logged, out.payload_bytes_sent) = (logged, sent);
    Ok(Some(out))
}

/// Checks added check by check: the n-th check of a call and expression in one input is
/// the n-th of the same in every other (two identical checks stay two); in first-seen order.
fn merge_checks<'a>(lists: impl Iterator<Item = &'a [result::CheckCount]>) -> Vec<result::CheckCount> {
    let mut out: Vec<result::CheckCount> = Vec::new();
    for list in lists {
        let mut seen: BTreeMap<(&str, &str), usize> = BTreeMap::new();
        for c in list {
            let nth = seen.entry((&c.call, &c.expression)).or_default();
            let same = |o: &&mut result::CheckCount| o.call == c.call && o.expression == c.expression;
            match out.iter_mut().filter(same).nth(*nth) {
                Some(sum) => {
                    sum.pass = sum.pass.saturating_add(c.pass);
                    sum.fail = sum.fail.saturating_add(c.fail);
                }
                None => out.push(c.clone()),
            }
            *nth += 1;
        }
    }
    out
}

/// One input's row under `shards`: its client, whether it was the bottleneck, its slice.
fn shard_part(i: &Input) -> result::ShardPart {
    let r = &i.result;
    use crate::result::NoticeKind::{BehindSchedule, ClientCpu, Unsent};
    // The notices that say the client, not the server, held the rate back.
    let bottleneck = [ClientCpu, BehindSchedule, Unsent].into_iter().any(|kind| r.notices.has(kind));
    let whole = r.whole();
    result::ShardPart {
        input: i.label.clone(),
        shard: r.shard().map(String::from),
        calls: r.requests.total,
        throughput_rps: r.throughput_rps,
        client: r.client.clone(),
        bottleneck,
        mode: Some(r.mode.clone()),
        slice: Some(result::ShardSlice {
            requests: whole.requests,
            statuses: whole.statuses,
            latency_us: whole.latency_us,
            histogram: whole.histogram,
        }),
    }
}

/// What the merge says about itself, then each input's own notices, each of its kind.
fn notices(inputs: &[Input], mixed: &[String]) -> result::Notices {
    use crate::result::NoticeKind::{ClientBottleneck, Merged, MixedInputs};
    let mut notices = result::Notices::default();
    notices.push(Merged, format!("merged from {} results: every histogram and count added exactly", inputs.len()));
    for line in mixed {
        notices.push(MixedInputs, line.clone());
    }
    for part in inputs.iter().map(shard_part).filter(|p| p.bottleneck) {
        notices.push(ClientBottleneck, format!("{}: its client was the bottleneck (see its notices)", part.input));
    }
    for i in inputs {
        let own = i.result.notices.0.iter();
        notices.0.extend(own.map(|n| result::Notice { message: format!("{}: {}", i.label, n.message), ..n.clone() }));
    }
    notices
}

/// The interval series and the per-backend one, added interval by interval when the inputs'
/// intervals cover the same time (`series`); else left out, and why said. Plain runs' results
/// (no interval histograms) have no series to add: that is said only when they ran at the
/// same time (`together`), where shards of one run would have had one.
fn merge_series(inputs: &[Input], together: bool, out: &mut Run) {
    use crate::result::NoticeKind::SeriesLeftOut;
    let per_backend = inputs.iter().any(|i| i.result.backend_intervals.is_some());
    if !inputs.iter().any(|i| series::has_histograms(&i.result)) {
        // Slices (`--slice`) and bursts have no series at all: nothing is left out.
        let plain = inputs.iter().any(|i| i.result.intervals.as_ref().is_some_and(|rows| !rows.is_empty()));
        if together && plain {
            out.notices.push(SeriesLeftOut, PLAIN_TOGETHER);
        }
        return;
    }
    match series::intervals(inputs) {
        Ok(rows) => {
            out.intervals = rows;
            steady_state(inputs, out);
        }
        Err(why) => {
            let also = if per_backend { " (and the per-backend one)" } else { "" };
            out.notices.push(SeriesLeftOut, format!("the interval series{also} is not merged: {why}"));
            return;
        }
    }
    let n = out.intervals.as_ref().map_or(0, Vec::len);
    match series::backend_intervals(inputs, n) {
        Ok(lines) => out.backend_intervals = lines,
        Err(why) => out.notices.push(SeriesLeftOut, format!("the per-backend series is not merged: {why}")),
    }
}

/// Plain runs merged that ran at the same time: what their series lacks, and how to get it.
const PLAIN_TOGETHER: &str = "no interval series: these runs overlap in time, but a plain run's intervals \
     carry no histograms to add; run them as shards of one run (--shard I/N --start-at TIME each, or \
     run --shards N) to have one";

/// The steady state of the merged series, judged as a single run's is (analysis/steady.rs),
/// and its notice said as a single run's is (analysis/notices.rs `steadiness`); none without
/// a series. The whole's verdict, over every input's calls, replaces the inputs' own
/// steady-state notices: each judged a share of the calls, and two shards of one run may
/// disagree with each other and with the whole (one "no steady state", one "steady after
/// 4.5 s", the whole "steady after 4.0 s", the truth 4 s).
fn steady_state(inputs: &[Input], out: &mut Run) {
    use crate::analysis::{notices, steady, to_result};
    use crate::result::NoticeKind::{NoSteadyState, WarmUp};
    let Some(rows) = out.intervals.as_deref() else { return };
    let interval = Duration::try_from_secs_f64(out.interval_s.unwrap_or(0.0)).unwrap_or_default();
    let found = steady::of_result_rows(rows, interval);
    out.steady_state = Some(to_result::steady_state(&found, out.requests.ok));
    // The warm-up every input excluded: a later steady state is in the merged result.
    let warmup = inputs.iter().map(|i| i.result.warmup.as_ref().map_or(Duration::ZERO, result::Warmup::window)).min();
    let said = notices::steadiness(&found, out.requests.ok, warmup.unwrap_or_default(), interval);
    let steadiness = |n: &result::Notice| n.kind.as_ref().and_then(result::Word::known);
    out.notices.0.retain(|n| !matches!(steadiness(n), Some(WarmUp | NoSteadyState)));
    if let Some(n) = said {
        out.notices.push(n.kind, n.text);
    }
}

/// What the run was, from the first input; what inputs differ in named with every value, none
/// passed off as the whole's: calls and targets joined, a mode `mixed` (each input's under
/// `shards`) with each input's load.
fn copy_settings(inputs: &[Input], out: &mut Run) {
    let first = &inputs[0].result;
    let joined = |pick: Setting| distinct(inputs, pick).join(", ");
    out.target = joined(|r| r.target.as_str());
    out.call = joined(|r| r.call.as_str());
    out.mode = first.mode.clone();
    out.load = first.load.clone();
    if distinct(inputs, |r| r.mode.as_str()).len() > 1 {
        out.mode = result::Mode::Mixed.into();
        out.load = format!("mixed: {}", distinct(inputs, |r| r.load.as_str()).join("; "));
    }
    out.concurrency = first.concurrency;
    out.connections = first.connections;
    out.rps_target = first.rps_target.clone();
    out.interval_s = first.interval_s;
}

/// Streaming results: messages added, their histograms added and summarised again, rates
/// over the union of the windows (`rate`).
fn merge_messages(
    inputs: &[Input],
    kind: result::Word<result::StreamKind>,
    rate: &dyn Fn(u64) -> f64,
) -> anyhow::Result<result::Messages> {
    let sum = |pick: fn(&result::Messages) -> u64| {
        inputs.iter().filter_map(|i| i.result.messages.as_ref().map(pick)).fold(0, u64::saturating_add)
    };
    let (sent, received) = (sum(|m| m.sent), sum(|m| m.received));
    let mut out = result::Messages {
        kind,
        sent,
        received,
        sent_per_s: rate(sent),
        received_per_s: rate(received),
        ..result::Messages::default()
    };
    type Pick = fn(&result::Messages) -> Option<&String>;
    let histogram = |key: &str, pick: Pick| -> anyhow::Result<Option<Histogram<u64>>> {
        if inputs[0].result.messages.as_ref().and_then(pick).is_none() {
            return Ok(None);
        }
        let mut all = new_histogram();
        for input in inputs {
            let text = input.result.messages.as_ref().and_then(pick).map_or("", String::as_str);
            let h = from_text(text).map_err(|why| bad_input(format!("{}: messages.{key} {why}", input.label)))?;
            all.add(&h).map_err(|e| bad_input(format!("{}: messages.{key}: {e}", input.label)))?;
        }
        Ok(Some(all))
    };
    if let Some(h) = histogram("round_trip_histogram", |m| m.round_trip_histogram.as_ref())? {
        out.round_trip_us = Some(LatencySummary::of_histogram(&h));
        out.round_trip_histogram = Some(to_text(&h));
    }
    if let Some(h) = histogram("first_message_histogram", |m| m.first_message_histogram.as_ref())? {
        out.first_message_us = Some(LatencySummary::of_histogram(&h));
        out.first_message_histogram = Some(to_text(&h));
    }
    Ok(out)
}

/// A merged result in any format `run` prints: JSON as it is, the table of its shards, every
/// other format as it renders a run.
pub fn render(merged: &Run, format: crate::report::Format) -> anyhow::Result<String> {
    use crate::report::Format;
    Ok(match format {
        Format::Json => merged.to_json_pretty(),
        Format::Table => table(merged),
        other => other.exporter().render(merged),
    })
}

/// What a merged `duration_s` is, said in the result and its table.
pub const DURATION_IS: &str = "union of the measured windows";

/// The measured windows of one result, in seconds since the epoch: a merged result's own list
/// (`windows`), else from its start plus its warm-up, for its measured duration.
fn measured_windows(result: &Run) -> Result<Vec<(f64, f64)>, String> {
    if let Some(windows) = &result.windows {
        return windows.iter().map(|w| window(&w.started_at, 0.0, w.duration_s)).collect();
    }
    let warmup = result.warmup.as_ref().map_or(0.0, |w| w.duration_s);
    window(result.meta.started_at.as_deref().unwrap_or(""), warmup, result.duration_s).map(|w| vec![w])
}

fn window(text: &str, warmup: f64, duration: f64) -> Result<(f64, f64), String> {
    let started = humantime::parse_rfc3339(text)
        .map_err(|_| format!("started_at {text:?} is not a time"))?
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64();
    let length = Some(duration).filter(|d| d.is_finite() && *d >= 0.0);
    let length = length.ok_or_else(|| format!("duration_s {duration} is not a duration"))?;
    let warmup = if warmup.is_finite() && warmup >= 0.0 { warmup } else { 0.0 };
    Ok((started + warmup, started + warmup + length))
}

/// Windows sorted, those that overlap or touch made one.
fn union(mut windows: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    windows.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Vec<(f64, f64)> = Vec::new();
    for (from, to) in windows {
        match out.last_mut() {
            Some(last) if from <= last.1 => last.1 = last.1.max(to),
            _ => out.push((from, to)),
        }
    }
    out
}

fn rfc3339(epoch_s: f64) -> String {
    // humantime writes years up to 9999 only; a window beyond is a broken input's.
    let epoch_s = epoch_s.clamp(0.0, 253_402_300_799.0);
    let at = SystemTime::UNIX_EPOCH + Duration::try_from_secs_f64(epoch_s).unwrap_or_default();
    humantime::format_rfc3339_micros(at).to_string()
}

/// One run an input holds: its id, or for a result written before run ids existed, what
/// tells it apart (its start, shard, counts and call-latency histogram).
#[derive(PartialEq)]
enum RunId {
    Id(String),
    Unnamed(String),
}

/// The runs an input holds: a merged result's sources, else the run itself.
fn runs(result: &Run) -> Vec<RunId> {
    let meta = &result.meta;
    let sources = meta.source_run_ids.iter().flatten().filter_map(Value::as_str);
    let ids: Vec<RunId> = sources.map(|id| RunId::Id(id.to_string())).collect();
    if !ids.is_empty() {
        return ids;
    }
    if let Some(id) = meta.run_id.as_ref().and_then(Value::as_str) {
        return vec![RunId::Id(id.to_string())];
    }
    let tell = (&meta.started_at, result.shard(), &result.requests, &result.histograms.call_latency);
    vec![RunId::Unnamed(serde_json::to_string(&tell).unwrap_or_default())]
}

/// The run ids of all inputs, each once: the same run given twice (a file and its copy, a
/// merge and one of its parts) would count its calls twice, so it is refused.
fn sources(inputs: &[Input]) -> anyhow::Result<Vec<String>> {
    let mut seen: Vec<(RunId, &str)> = Vec::new();
    for input in inputs {
        for run in runs(&input.result) {
            if let Some((_, before)) = seen.iter().find(|(r, _)| *r == run) {
                let which = match &run {
                    RunId::Id(id) => format!("run {id}"),
                    RunId::Unnamed(_) => "a run without a run id (same start, counts and histogram)".into(),
                };
                return Err(bad_input(format!(
                    "merge: {} holds {which}, already given in {before}: its calls would count twice",
                    input.label
                )));
            }
            seen.push((run, &input.label));
        }
    }
    Ok(seen.into_iter().filter_map(|(run, _)| if let RunId::Id(id) = run { Some(id) } else { None }).collect())
}

/// What the shards of one run agree on, as their results say it (not `load`, which names
/// each shard's own share of the workers).
const SAME_RUN: [(&str, Setting); 5] = [
    ("method", |r| r.call.as_str()),
    ("mode", |r| r.mode.as_str()),
    ("target", |r| r.target.as_str()),
    ("rate", |r| r.rps_target.as_deref().unwrap_or("none")),
    ("shard count", |r| r.shard().and_then(|s| s.split_once('/')).map_or("", |(_, n)| n)),
];

/// The run fingerprint a coordinated shard's result carries (`meta.fingerprint`).
fn fingerprint(result: &Run) -> Option<super::coordinator::trust::Fingerprint> {
    serde_json::from_value(result.meta.other.get("fingerprint")?.clone()).ok()
}

/// Shards that disagree are not merged: inputs that are shards of a split run (`--shard`)
/// must agree on method, mode, target, rate and shard count, and, when their results
/// carry it, on every flag of the run's fingerprint (duration, workload...); the first
/// difference is refused, named.
fn one_run(inputs: &[Input]) -> anyhow::Result<()> {
    let shards: Vec<&Input> =
        inputs.iter().filter(|i| i.result.shard().is_some() && i.result.meta.merged_from.is_none()).collect();
    let Some((first, others)) = shards.split_first() else { return Ok(()) };
    for other in others {
        let (a, b) = (&first.result, &other.result);
        let mut differ: Vec<String> = SAME_RUN
            .iter()
            .filter(|(_, pick)| pick(a) != pick(b))
            .map(|(name, pick)| format!("{name} {:?} and {:?}", pick(a), pick(b)))
            .collect();
        if let (Some(x), Some(y)) = (fingerprint(a), fingerprint(b)) {
            let flags = x.differences(&y);
            if !flags.is_empty() {
                differ.push(format!("flags {}", flags.join(", ")));
            }
        }
        if !differ.is_empty() {
            return Err(bad_input(format!(
                "merge: {} and {} are shards that disagree ({}): not merged, they are not one run",
                first.label,
                other.label,
                differ.join("; ")
            )));
        }
    }
    Ok(())
}

/// What inputs may differ in and still merge, with a warning: a merged closed and open loop,
/// or two methods, is rarely what was meant.
const MIXABLE: [(&str, Setting); 3] =
    [("mode", |r| r.mode.as_str()), ("call", |r| r.call.as_str()), ("target", |r| r.target.as_str())];

/// One setting of a result, read.
type Setting = fn(&Run) -> &str;

fn distinct(inputs: &[Input], pick: Setting) -> Vec<String> {
    let mut values: Vec<String> = Vec::new();
    for input in inputs {
        let value = pick(&input.result).to_string();
        if !values.contains(&value) {
            values.push(value);
        }
    }
    values
}

/// One line per way the inputs differ, naming which input had which value.
fn mixed(inputs: &[Input]) -> Vec<String> {
    let mut out = Vec::new();
    for (key, pick) in MIXABLE {
        if distinct(inputs, pick).len() > 1 {
            let each: Vec<String> = inputs.iter().map(|i| format!("{} ({})", pick(&i.result), i.label)).collect();
            out.push(format!("merged results of different {key}: {}", each.join(", ")));
        }
    }
    out
}

/// The span beside the union, when gaps between the windows were left out.
fn span_note(merged: &Run) -> String {
    let (union, span) = (merged.duration_s, merged.span_s.unwrap_or(0.0));
    match span > union + 0.005 {
        true => format!("; first start to last end {span:.2} s"),
        false => String::new(),
    }
}

/// The warnings a merge prints: how its inputs differ.
pub fn warnings(merged: &Run) -> Vec<String> {
    merged.meta.mixed.clone().unwrap_or_default()
}

/// A latency statistic as `run`'s table writes durations; "-" when it is none.
fn ms(l: &LatencySummary, stat: &str) -> String {
    let stat = crate::stats::Statistic::parse(stat).expect("a statistic's name");
    let us = l.micros(stat).filter(|us| us.is_finite() && *us >= 0.0).unwrap_or(0.0);
    crate::units::duration(Duration::try_from_secs_f64(us / 1e6).unwrap_or(Duration::MAX))
}

/// A short table of the merged result.
pub fn table(merged: &Run) -> String {
    let l = &merged.latency_us;
    let shards = merged.shards.as_deref().unwrap_or_default();
    let mixed = merged.mode.known() == Some(result::Mode::Mixed);
    let mut o = format!(
        "{} {}  (merged from {} results, mode {}){}\n  Calls:       {} (ok {}, failed {})\n  Duration:    {} ({DURATION_IS}{})\n  Throughput:  {:.1} calls/s\n  Latency:     p50 {}, p90 {}, p99 {}, p99.9 {}, max {}\n",
        merged.target,
        merged.call,
        shards.len(),
        merged.mode,
        if merged.meta.ended.partial() { "  [PARTIAL]" } else { "" },
        merged.requests.total,
        merged.requests.ok,
        merged.requests.failed,
        crate::units::duration(merged.window()),
        span_note(merged),
        merged.throughput_rps,
        ms(l, "p50"),
        ms(l, "p90"),
        ms(l, "p99"),
        ms(l, "p99.9"),
        ms(l, "max"),
    );
    // Judged on the merged series, none without one.
    if merged.steady_state.is_some() {
        crate::report::table::steady_state(&mut o, merged);
    }
    o += "\nShards:\n";
    for s in shards {
        // A slice has no client of its own: its run's served every name.
        let cpu = s.client.as_ref().map_or(String::new(), |c| format!(", client CPU {} µs/call", c.cpu_us_per_request));
        // Inputs of different modes: each one's.
        let mode = s.mode.as_ref().filter(|_| mixed).map_or(String::new(), |m| format!(" ({m})"));
        o += &format!(
            "  {}{mode}: {} calls, {:.1} calls/s{cpu}{}\n",
            s.input,
            s.calls,
            s.throughput_rps,
            if s.bottleneck { "  [client was the bottleneck]" } else { "" }
        );
    }
    for kind in Kind::ALL {
        let slices = merged.breakdown(kind.key()).into_iter().flatten();
        o += &crate::report::breakdown::text(kind, slices.map(|(name, s)| (name.as_str(), s)), merged.requests.total);
    }
    if let Some(checks) = merged.checks.as_ref().filter(|c| !c.is_empty()) {
        o += "\nChecks:\n";
        for c in checks {
            let key = format!("{}: {}", c.call, c.expression);
            o += &format!("  {}: {} passed, {} failed\n", crate::report::printable::printable(&key), c.pass, c.fail);
        }
    }
    // As run's table writes them (report/table.rs `verdicts`): the whole run's, judged once.
    for a in merged.assertions.iter().flatten() {
        o += &format!("Assert {}: {} ({})\n", a.assertion, if a.ok { "ok" } else { "BREACHED" }, a.value);
    }
    for n in merged.notices.texts() {
        o += &format!("Note: {n}\n");
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 39: the headline (every due call) and the calls sent only each add exactly; an
    /// input that sent every due call adds its call latency to both.
    #[test]
    fn the_sent_only_latencies_add_beside_the_headline() {
        let input =
            |label: &str, unsent| Input { label: label.into(), result: crate::analysis::fixture::with_unsent(unsent) };
        let mut out = Run::default();
        merge_latencies(&[input("a", 10), input("b", 0)], &mut out).unwrap();
        assert_eq!((out.latency_us.count, out.sent_latency_us.as_ref().map(|l| l.count)), (210, Some(200)));
        assert_eq!(from_text(out.histograms.sent_call_latency.as_deref().unwrap()).unwrap().len(), 200);
        let mut clean = Run::default();
        merge_latencies(&[input("a", 0), input("b", 0)], &mut clean).unwrap();
        assert!(clean.sent_latency_us.is_none() && clean.histograms.sent_call_latency.is_none());
        // Slices alike: a flow's sent-only latencies, or its latency where it has none.
        let slice = |sent: Option<u64>| {
            let mut h = new_histogram();
            h.record_n(1_000_000, 5).unwrap();
            let mut s = result::Slice { histogram: to_text(&h), ..Default::default() };
            if let Some(unsent) = sent {
                s.sent_histogram = Some(to_text(&h));
                h.record_n(500_000_000, unsent).unwrap();
                s.histogram = to_text(&h);
            }
            std::collections::BTreeMap::from([("f".to_string(), s)])
        };
        let (a, b, c) = (slice(None), slice(Some(3)), slice(None));
        let sum = result::slice::merge_breakdown([("a", &a), ("b", &b), ("c", &c)].into_iter(), &|_| 0.0).unwrap();
        assert_eq!((sum["f"].latency_us.count, sum["f"].sent_latency_us.as_ref().map(|l| l.count)), (18, Some(15)));
    }

    /// Shard `i` of 2: 16 half-second intervals, the first `slow` at 100 ms a call, the
    /// rest at 1 ms, its --warmup `warmup_s`, and the steady-state notice of its own.
    fn shard(i: u32, slow: usize, warmup_s: f64) -> Input {
        let mut all = new_histogram();
        let rows = (0..16)
            .map(|k| {
                let mut h = new_histogram();
                h.record_n(if k < slow { 100_000_000 } else { 1_000_000 }, 50).unwrap();
                all.add(&h).unwrap();
                let t_s = 0.5 * (k + 1) as f64;
                let phase = if t_s <= warmup_s { "warmup" } else { "measured" };
                let histogram = Some(to_text(&h));
                result::IntervalRow {
                    t_s,
                    length_s: 0.5,
                    phase: phase.into(),
                    calls: 50,
                    histogram,
                    ..Default::default()
                }
            })
            .collect();
        let mut result =
            Run { intervals: Some(rows), interval_s: Some(0.5), duration_s: 8.0 - warmup_s, ..Run::default() };
        (result.requests.total, result.requests.ok) = (800, 800);
        result.histograms.call_latency = to_text(&all);
        result.meta.shard = Some(Some(format!("{i}/2")));
        result.meta.started_at = Some("2026-11-27T12:00:00Z".into());
        if warmup_s > 0.0 {
            result.warmup = Some(result::Warmup { duration_s: warmup_s, ..Default::default() });
        }
        result.notices.push(result::NoticeKind::NoSteadyState, "no steady state reached: its own verdict");
        Input { label: format!("{i}.json"), result }
    }

    fn steadiness_notices(merged: &Run) -> Vec<&str> {
        use crate::result::NoticeKind::{NoSteadyState, WarmUp};
        let steadiness =
            |n: &&result::Notice| matches!(n.kind.as_ref().and_then(result::Word::known), Some(WarmUp | NoSteadyState));
        merged.notices.0.iter().filter(steadiness).map(|n| n.message.as_str()).collect()
    }

    /// The merged series' warm-up is said once, as a run's is (analysis/notices.rs
    /// `steadiness`), in place of each shard's own verdict; not when every shard's --warmup
    /// excluded it.
    #[test]
    fn a_merged_warm_up_is_said_once_unless_every_input_excluded_it() {
        let merged = merge(&[shard(0, 8, 0.0), shard(1, 8, 0.0)]).unwrap();
        let after = merged.steady_state.as_ref().and_then(|s| s.steady_after_s);
        assert_eq!(after, Some(4.0), "{:?}", merged.steady_state);
        let said = "the per-interval p50 latency was steady only after 4.0 s: the result includes that warm-up \
                    (--warmup 4s excludes it)";
        assert_eq!(steadiness_notices(&merged), [said]);
        let covered = merge(&[shard(0, 8, 4.0), shard(1, 8, 4.0)]).unwrap();
        assert_eq!(covered.steady_state, merged.steady_state);
        assert!(steadiness_notices(&covered).is_empty(), "{:?}", covered.notices);
        let one = merge(&[shard(0, 8, 4.0), shard(1, 8, 0.0)]).unwrap();
        assert_eq!(steadiness_notices(&one), [said]);
        // Still changing at the end: the last 2 of 16 intervals fast.
        let late = merge(&[shard(0, 14, 0.0), shard(1, 14, 0.0)]).unwrap();
        let [text] = steadiness_notices(&late)[..] else { panic!("{:?}", late.notices) };
        assert!(text.starts_with("no steady state reached: the per-interval p50"), "{text}");
    }

    #[test]
    fn windows_apart_add_and_overlaps_count_once() {
        let u = union(vec![(10.0, 12.0), (0.0, 2.0), (1.0, 3.0), (3.0, 4.0)]);
        assert_eq!(u, vec![(0.0, 4.0), (10.0, 12.0)]);
    }

    /// The n-th of two identical checks adds to the n-th of the other input's.
    #[test]
    fn identical_checks_add_one_by_one() {
        let check =
            |call: &str, pass, fail| result::CheckCount { call: call.into(), expression: "x".into(), pass, fail };
        let a = [check("get", 1, 0), check("get", 0, 2), check("put", 3, 0)];
        let b = [check("get", 10, 0), check("get", 0, 20)];
        let sum = merge_checks([&a[..], &b[..]].into_iter());
        assert_eq!(sum, [check("get", 11, 0), check("get", 0, 22), check("put", 3, 0)]);
    }

    #[test]
    fn shards_whose_fingerprints_differ_are_refused_naming_the_flag() {
        use crate::app::coordinator::trust::Fingerprint;
        let shard = |i: u32, rps: &str| {
            let mut result = Run::default();
            result.meta.shard = Some(Some(format!("{i}/2")));
            let values = [("--rps".to_string(), rps.as_bytes().to_vec())].into();
            let print = serde_json::to_value(Fingerprint::of(values)).unwrap();
            result.meta.other.insert("fingerprint".into(), print);
            Input { label: format!("{i}.json"), result }
        };
        let why = one_run(&[shard(0, "100"), shard(1, "200")]).unwrap_err().to_string();
        assert!(why.contains("flags --rps"), "{why}");
        assert!(one_run(&[shard(0, "100"), shard(1, "100")]).is_ok());
    }

    #[test]
    fn a_window_beyond_the_year_9999_does_not_panic() {
        assert!(rfc3339(1e300).starts_with("9999-"));
        assert!(window("2024-01-01T00:00:00Z", 0.0, -1.0).is_err());
    }
}
