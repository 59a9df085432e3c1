//! A result read back (`result::Run`: a merged one, a slice of a run) as a Summary, so that
//! every format `run` prints renders it too. What a result does not keep (the interval
//! series of a merge, assertions, the server's count) is left out, not made up.
use super::{Client, ErrorKind, Messages, Meta, Notice, NoticeKind, Phase, Requests, SteadyState, Summary};
use crate::error::bad_input;
use crate::grpc::status::{self, PerStatus};
use crate::grpc::transport::CallKind;
use crate::load::pacer::{Arrival, Pacer, RateSchedule};
use crate::record::shard::{from_text, NameTally, Tally};
use crate::result::{self, Run};
use crate::stats::steady::Steadiness;
use crate::stats::Latency;
use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

/// The Summary of a result, its latencies summarised again from its histograms.
pub fn summary(run: &Run) -> anyhow::Result<Summary> {
    let measured = measured(run)?;
    let sent_only = match &run.histograms.sent_call_latency {
        Some(text) => Some(Tally {
            call_latency: from_text(text).map_err(|why| bad_input(format!("histograms.sent_call_latency {why}")))?,
            ..Tally::default()
        }),
        None => None,
    };
    let duration = seconds(run.duration_s);
    let r = &run.requests;
    let statuses = per_status(&run.statuses);
    Ok(Summary {
        meta: meta(run),
        target: run.target.clone(),
        call: run.call.clone(),
        pacer: pacer(run),
        concurrency: clamp32(run.concurrency),
        connections: clamp32(run.connections),
        loop_per_worker: run.loop_per_worker,
        active_workers: None,
        ended: run.meta.ended,
        requests: Requests {
            total: r.total,
            ok: r.ok,
            failed: r.failed,
            retries: r.retries.unwrap_or(0),
            attempts: r.attempts.unwrap_or(0),
            retry_exhausted: r.retry_exhausted.unwrap_or(0),
            abandoned: r.abandoned.unwrap_or(0),
            unsent: r.unsent.unwrap_or(0),
        },
        statuses,
        attempt_statuses: per_status(&run.attempt_statuses),
        errors: run
            .errors
            .iter()
            .map(|e| ErrorKind {
                status: status::parse(&e.status).unwrap_or(tonic::Code::Unknown),
                message: e.message.clone(),
                count: e.count,
            })
            .collect(),
        duration,
        throughput_rps: run.throughput_rps,
        ok_rps: run.ok_calls_per_s(),
        latency: Latency::of(&measured.call_latency),
        sent_only,
        attempt_latency: Latency::of(&measured.attempt_latency),
        service_time: Latency::of(&measured.service_time),
        schedule_lag: run.schedule_lag_us.as_ref().map(|_| Latency::of(&measured.schedule_lag)),
        late_sends: run.late_sends.unwrap_or(0),
        late_wakeups: run.late_wakeups.unwrap_or(0),
        warmup: run.warmup.as_ref().map(|w| Phase {
            duration: seconds(w.duration_s),
            calls: w.calls,
            throughput_rps: w.throughput_rps,
            latency: Latency::default(),
        }),
        rounds: Vec::new(),
        client: client(run),
        notices: notices(run),
        assertions: Vec::new(),
        messages: run.messages.as_ref().map(messages),
        call_names: names(run),
        flow_names: run
            .flows
            .iter()
            .flatten()
            .map(|(name, s)| (name.clone(), s.steps.clone().unwrap_or_default()))
            .collect(),
        check_names: run.checks.iter().flatten().map(|c| (c.call.clone(), c.expression.clone())).collect(),
        backends: run.backends.iter().flat_map(BTreeMap::keys).cloned().collect(),
        replay: run.replay.clone(),
        measured,
        intervals: Vec::new(),
        interval: seconds(run.interval_s.unwrap_or(1.0)),
        shard: run.shard().and_then(shard_of),
        floor: None,
        server: None,
        all_attempts: per_status(&run.attempt_statuses),
        elapsed: duration,
        steady: SteadyState { verdict: Steadiness::TooShort, after: None, intervals: 0 },
        warm_rounds: None,
    })
}

/// The histograms (and a workload's call names') as the engine keeps them.
fn measured(run: &Run) -> anyhow::Result<Tally> {
    let read = |key: &str, text: Option<&String>| -> anyhow::Result<Histogram<u64>> {
        match text {
            Some(text) => from_text(text).map_err(|why| bad_input(format!("histograms.{key} {why}"))),
            None => Ok(crate::record::shard::new_histogram()),
        }
    };
    let h = &run.histograms;
    let m = run.messages.as_ref();
    let mut shard = Tally {
        call_latency: read("call_latency", Some(&h.call_latency))?,
        ok_call_latency: read("ok_call_latency", h.ok_call_latency.as_ref())?,
        attempt_latency: read("attempt_latency", h.attempt_latency.as_ref())?,
        service_time: read("service_time", h.service_time.as_ref())?,
        schedule_lag: read("schedule_lag", h.schedule_lag.as_ref())?,
        message_latency: read("round_trip_histogram", m.and_then(|m| m.round_trip_histogram.as_ref()))?,
        first_message: read("first_message_histogram", m.and_then(|m| m.first_message_histogram.as_ref()))?,
        ..Tally::default()
    };
    for slice in run.calls_by_name.iter().flat_map(BTreeMap::values) {
        let latency = from_text(&slice.histogram).map_err(|why| bad_input(format!("calls_by_name histogram {why}")))?;
        shard.by_name.push(NameTally { calls: slice.requests.total, statuses: per_status(&slice.statuses), latency });
    }
    for slice in run.flows.iter().flat_map(BTreeMap::values) {
        let latency = from_text(&slice.histogram).map_err(|why| bad_input(format!("flows histogram {why}")))?;
        let (stopped_by_check, capture_errors) = slice.stopped();
        shard.by_flow.push(crate::record::shard::FlowTally {
            share: NameTally { calls: slice.requests.total, statuses: per_status(&slice.statuses), latency },
            stopped_by_check,
            capture_errors,
        });
    }
    shard.checks = run.checks.iter().flatten().map(|c| (c.pass, c.fail)).collect();
    for slice in run.backends.iter().flat_map(BTreeMap::values) {
        let latency = from_text(&slice.histogram).map_err(|why| bad_input(format!("backends histogram {why}")))?;
        shard.by_backend.push(NameTally {
            calls: slice.requests.total,
            statuses: per_status(&slice.statuses),
            latency,
        });
    }
    Ok(shard)
}

fn names(run: &Run) -> Vec<(String, String)> {
    let method = |s: &result::Slice| s.method.clone().unwrap_or_default();
    run.calls_by_name.iter().flatten().map(|(name, s)| (name.clone(), method(s))).collect()
}

fn meta(run: &Run) -> Meta {
    let m = &run.meta;
    let started = m.started_at.as_deref().and_then(|t| humantime::parse_rfc3339(t).ok());
    let run_id = m.run_id.as_ref().and_then(|id| id.as_str()).and_then(|id| uuid::Uuid::parse_str(id).ok());
    Meta {
        run_id: run_id.unwrap_or_default(),
        started_at: started.unwrap_or(SystemTime::UNIX_EPOCH),
        name: m.name.clone(),
        tags: m.tags.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        arguments: m.arguments.clone().unwrap_or_default(),
    }
}

/// The pacer as the result names it; a merge of mixed modes is rendered as its first.
fn pacer(run: &Run) -> Pacer {
    match run.mode.split(", ").next().unwrap_or("") {
        "open" => {
            let rate = run.rps_target.as_deref().and_then(|r| r.parse::<f64>().ok()).unwrap_or(run.throughput_rps);
            let arrival = match &run.meta.arrival {
                Some(result::Arrival { process, seed: Some(seed) }) if process == "poisson" => {
                    Arrival::Poisson { seed: *seed }
                }
                Some(result::Arrival { process, .. }) if process == "logged" => Arrival::Logged,
                _ => Arrival::Uniform,
            };
            Pacer::Open(RateSchedule::constant(rate), arrival)
        }
        "burst" => Pacer::Burst { size: run.concurrency },
        _ => Pacer::Closed,
    }
}

fn client(run: &Run) -> Client {
    let c = run.client.clone().unwrap_or_default();
    Client {
        hiccups: None,
        cpu: seconds(c.cpu_s),
        cpu_per_call: run.cpu_per_call().unwrap_or_default(),
        max_rss_bytes: c.max_rss_bytes,
        threads: clamp32(c.threads),
        utilization: c.utilization,
    }
}

/// The result's notices, each with its kind where the result names it.
fn notices(run: &Run) -> Vec<Notice> {
    let kinds: BTreeMap<&str, &str> =
        run.warnings.iter().flatten().map(|w| (w.message.as_str(), w.kind.as_str())).collect();
    let kind = |text: &str| kinds.get(text).and_then(|k| NoticeKind::named(k));
    // A merge's own notices have no kind of their own; Partial is what they qualify.
    run.notices
        .iter()
        .map(|text| Notice { kind: kind(text).unwrap_or(NoticeKind::Partial), text: text.clone() })
        .collect()
}

fn messages(m: &result::Messages) -> Messages {
    let kind = match m.kind.as_str() {
        "client streaming" => CallKind::ClientStream,
        "server streaming" => CallKind::ServerStream,
        "bidirectional streaming" => CallKind::Bidi,
        _ => CallKind::Unary,
    };
    let latency = |h: &Option<String>| h.as_deref().and_then(|t| from_text(t).ok()).map(|h| Latency::of(&h));
    Messages {
        kind,
        sent: m.sent,
        received: m.received,
        sent_per_s: m.sent_per_s,
        received_per_s: m.received_per_s,
        round_trip: latency(&m.round_trip_histogram),
        first_message: latency(&m.first_message_histogram),
    }
}

fn per_status(counts: &BTreeMap<String, u64>) -> PerStatus {
    let mut out = PerStatus::default();
    for (name, n) in counts {
        out.record_many(status::parse(name).unwrap_or(tonic::Code::Unknown), *n);
    }
    out
}

fn shard_of(text: &str) -> Option<crate::load::plan::ShardOf> {
    let (index, count) = text.split_once('/')?;
    Some(crate::load::plan::ShardOf { index: index.parse().ok()?, count: count.parse().ok()? })
}

fn seconds(s: f64) -> Duration {
    Duration::try_from_secs_f64(s).unwrap_or_default()
}

fn clamp32(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind a run writes comes back as itself (before: slow_backend came back as
    /// partial, a list of kinds here had not been told of it).
    #[test]
    fn every_notice_kind_reads_back_as_itself() {
        let mut run = Run::default();
        for kind in NoticeKind::ALL {
            let message = format!("a {} notice", kind.as_str());
            run.notices.push(message.clone());
            run.warnings.get_or_insert_with(Vec::new).push(result::Warning { kind: kind.as_str().into(), message });
        }
        let read: Vec<NoticeKind> = notices(&run).into_iter().map(|n| n.kind).collect();
        assert_eq!(read, NoticeKind::ALL.to_vec());
    }
}
