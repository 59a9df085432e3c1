//! `--format json`: the result as one object. Its keys are a stable interface (docs/design.md,
//! "Stable interfaces"): latencies in µs under `*_us`, durations in s under `*_s`; new keys
//! are only ever added. The call-latency histogram rides along so that runs merge exactly.
use super::{describe_load, Export, Summary};
use crate::grpc::status::{self, PerStatus};
use crate::load::pacer::{Arrival, Pacer};
use crate::record::shard::to_text;
use crate::stats::Latency;
use crate::units;
use serde_json::{json, Map, Value};

pub struct Json;

impl Export for Json {
    fn render(&self, s: &Summary) -> String {
        // Serializing a serde_json::Value cannot fail.
        serde_json::to_string_pretty(&value(s)).unwrap_or_default() + "\n"
    }
}

pub fn value(s: &Summary) -> Value {
    let r = &s.requests;
    let c = &s.client;
    let mut out = json!({
        "meta": {
            "rpcmeter_version": env!("CARGO_PKG_VERSION"),
            "run_id": s.meta.run_id.to_string(),
            "started_at": humantime::format_rfc3339_millis(s.meta.started_at).to_string(),
            "name": s.meta.name,
            "tags": s.meta.tags.iter().map(|(k, v)| (k.clone(), Value::from(v.clone()))).collect::<Map<_, _>>(),
            "arguments": s.meta.arguments,
            "ended": s.ended.as_str(),
            "shard": s.shard.map(|sh| format!("{}/{}", sh.index, sh.count)),
        },
        "target": s.target,
        "call": s.call,
        "mode": match s.pacer { Pacer::Closed => "closed", Pacer::Open(..) => "open", Pacer::Burst { .. } => "burst" },
        "load": describe_load(s),
        "concurrency": s.concurrency,
        "connections": s.connections,
        "partial": s.partial(),
        "requests": {
            "total": r.total,
            "ok": r.ok,
            "failed": r.failed,
            "retries": r.retries,
            "attempts": r.attempts,
            "retry_exhausted": r.retry_exhausted,
            "abandoned": r.abandoned,
            "unsent": r.unsent,
        },
        "statuses": statuses(&s.statuses),
        "attempt_statuses": statuses(&s.attempt_statuses),
        "errors": s.errors.iter().map(|e| json!({
            "status": status::name(e.status), "message": e.message, "count": e.count,
        })).collect::<Vec<_>>(),
        "duration_s": units::secs(s.duration),
        "throughput_rps": s.throughput_rps,
        "ok_rps": s.ok_rps,
        "latency_us": latency(&s.latency),
        // Of the calls that ended OK only (latency_us counts failed calls too).
        "ok_latency_us": latency(&crate::stats::Latency::of(&s.measured.ok_call_latency)),
        "attempt_latency_us": latency(&s.attempt_latency),
        "service_time_us": latency(&s.service_time),
        "late_sends": s.late_sends,
        "late_wakeups": s.late_wakeups,
        "client": {
            "cpu_s": units::secs(c.cpu),
            "cpu_us_per_request": units::micros(c.cpu_per_call),
            "max_rss_bytes": c.max_rss_bytes,
            "threads": c.threads,
            "utilization": c.utilization,
            "hiccup_us": c.hiccups.map(|h| json!({
                "count": h.count, "p50": units::micros(h.p50), "p99": units::micros(h.p99), "max": units::micros(h.max),
            })),
        },
        "notices": s.notices.iter().map(|n| n.text.clone()).collect::<Vec<_>>(),
        "warnings": s.notices.iter().map(|n| json!({"kind": n.kind.as_str(), "message": n.text})).collect::<Vec<_>>(),
        "assertions": s.assertions.iter().map(|a| json!({
            "assertion": a.assertion.text, "value": a.value.to_string(), "ok": a.ok,
        })).collect::<Vec<_>>(),
        "histogram": to_text(&s.measured.call_latency),
        "histograms": {
            "call_latency": to_text(&s.measured.call_latency),
            "ok_call_latency": to_text(&s.measured.ok_call_latency),
            "attempt_latency": to_text(&s.measured.attempt_latency),
            "service_time": to_text(&s.measured.service_time),
            "schedule_lag": to_text(&s.measured.schedule_lag),
        },
        "interval_s": units::secs(s.interval),
        "intervals": s.intervals.iter().map(interval_row).collect::<Vec<_>>(),
    });
    let fields = out.as_object_mut().expect("built as an object");
    if let Pacer::Open(rate, arrival) = &s.pacer {
        fields.insert("rps_target".into(), rate.to_string().into());
        // The seed is what makes a Poisson run drawn again exactly (`--seed`).
        let arrival = match arrival {
            Arrival::Uniform => json!({"process": "uniform"}),
            Arrival::Poisson { seed } => json!({"process": "poisson", "seed": seed}),
        };
        fields["meta"].as_object_mut().expect("built as an object").insert("arrival".into(), arrival);
    }
    if !s.call_names.is_empty() {
        fields.insert("calls_by_name".into(), calls_by_name(s, s.duration));
    }
    if !s.flow_names.is_empty() {
        fields.insert("flows".into(), flows(s, s.duration));
    }
    if !s.check_names.is_empty() {
        fields.insert("checks".into(), checks(s));
    }
    if let Some(n) = s.loop_per_worker {
        fields.insert("loop_per_worker".into(), n.into());
    }
    fields.insert("steady_state".into(), steady_state(&s.steady, s.requests.ok));
    if let Some(rounds) = s.warm_rounds {
        fields.insert("warm_rounds".into(), verdict(rounds).into());
        if let crate::stats::steady::Steadiness::Steady { from } = rounds {
            fields.insert("warmup_rounds".into(), from.into());
        }
    }
    if let Some(server) = &s.server {
        fields.insert(
            "server".into(),
            json!({
                "received": server.received,
                "ok": server.ok,
                "failed": server.failed,
                "rejected": server.rejected,
                "messages_in": server.messages_in,
                "messages_out": server.messages_out,
                "throughput_rps": server.throughput_rps,
                "cpu_s": units::secs(server.cpu),
                "rss_bytes": server.rss_bytes,
                "echo_spin_us": server.echo_spin.as_micros() as u64,
            }),
        );
    }
    if let Some(floor) = &s.floor {
        let calibration =
            floor.as_ref().and_then(|c| serde_json::from_str::<Value>(&crate::calibrate::to_json(c)).ok());
        fields.insert("calibration".into(), calibration.unwrap_or(Value::Null));
    }
    if let Some(m) = &s.messages {
        let mut messages = json!({
            "kind": m.kind.as_str(),
            "sent": m.sent,
            "received": m.received,
            "sent_per_s": m.sent_per_s,
            "received_per_s": m.received_per_s,
        });
        let each = messages.as_object_mut().expect("built as an object");
        if let Some(l) = &m.round_trip {
            each.insert("round_trip_us".into(), latency(l));
            each.insert("round_trip_histogram".into(), to_text(&s.measured.message_latency).into());
        }
        if let Some(l) = &m.first_message {
            each.insert("first_message_us".into(), latency(l));
            each.insert("first_message_histogram".into(), to_text(&s.measured.first_message).into());
        }
        fields.insert("messages".into(), messages);
    }
    if let Some(lag) = &s.schedule_lag {
        fields.insert("schedule_lag_us".into(), latency(lag));
    }
    if let Some(w) = &s.warmup {
        fields.insert(
            "warmup".into(),
            json!({
                "duration_s": units::secs(w.duration),
                "calls": w.calls,
                "throughput_rps": w.throughput_rps,
                "latency_us": latency(&w.latency),
            }),
        );
    }
    if !s.rounds.is_empty() {
        let rounds = s.rounds.iter().map(|r| json!({"took_ms": units::secs(r.took) * 1e3, "rps": r.rps}));
        fields.insert("rounds".into(), rounds.collect::<Vec<_>>().into());
    }
    out
}

pub fn verdict(v: crate::stats::steady::Steadiness) -> &'static str {
    use crate::stats::steady::Steadiness::*;
    match v {
        Steady { .. } => "steady",
        NoSteadyState => "no steady state",
        TooShort => "too short to judge",
        NotFinite { .. } => "an interval without calls",
    }
}

/// A run with no OK call is not judged: its latencies are those of failures.
fn steady_state(s: &super::SteadyState, ok: u64) -> Value {
    json!({
        "verdict": if ok == 0 { super::NOT_JUDGED } else { verdict(s.verdict) },
        "steady_after_s": s.after.filter(|_| ok > 0).map(units::secs),
        "intervals": s.intervals,
        "series": "p50 call latency per interval",
    })
}

/// One row of the interval series (the same columns as `--format csv`).
fn interval_row(row: &crate::record::intervals::IntervalRow) -> Value {
    json!({
        "t_s": units::secs(row.at),
        "length_s": units::secs(row.length),
        "phase": row.phase(),
        "calls": row.calls,
        "ok": row.ok,
        "failed": row.failed,
        "rps": crate::stats::rate(row.calls, row.length),
        "p50_us": units::micros(row.p50),
        "p90_us": units::micros(row.p90),
        "p99_us": units::micros(row.p99),
        "max_us": units::micros(row.max),
        "service_p99_us": units::micros(row.service_p99),
        "client_cpu_total_s": units::secs(row.client_cpu_total),
        "client_rss_bytes": row.client_rss_bytes,
        "messages_sent": row.messages_sent,
        "messages_received": row.messages_received,
    })
}

/// `--workload`: each call name's requests, statuses, latency and histogram (merge adds them).
fn calls_by_name(s: &Summary, window: std::time::Duration) -> Value {
    s.by_name()
        .into_iter()
        .map(|(name, method, share)| {
            let ok = share.statuses.get(tonic::Code::Ok);
            let value = json!({
                "method": method,
                "requests": {"total": share.calls, "ok": ok, "failed": share.calls - ok},
                "throughput_rps": crate::stats::rate(share.calls, window),
                "statuses": statuses(&share.statuses),
                "latency_us": latency(&Latency::of(&share.latency)),
                "histogram": to_text(&share.latency),
            });
            (name.to_owned(), value)
        })
        .collect::<Map<_, _>>()
        .into()
}

/// `--workload` flows: each flow a slice of whole flows (latency: from its start to its last
/// answer), with its steps and the flows a check or a capture ended early.
fn flows(s: &Summary, window: std::time::Duration) -> Value {
    s.by_flow()
        .into_iter()
        .map(|(name, steps, flow)| {
            let share = &flow.share;
            let value = json!({
                "steps": steps,
                "requests": {"total": share.calls, "ok": flow.ok(), "failed": share.calls - flow.ok()},
                "throughput_rps": crate::stats::rate(share.calls, window),
                "statuses": statuses(&share.statuses),
                "stopped_by_check": flow.stopped_by_check,
                "capture_errors": flow.capture_errors,
                "latency_us": latency(&Latency::of(&share.latency)),
                "histogram": to_text(&share.latency),
            });
            (name.to_owned(), value)
        })
        .collect::<Map<_, _>>()
        .into()
}

/// `--workload` checks, keyed "call: expression".
fn checks(s: &Summary) -> Value {
    s.checks()
        .into_iter()
        .map(|(call, text, pass, fail)| {
            (format!("{call}: {text}"), json!({"call": call, "expression": text, "pass": pass, "fail": fail}))
        })
        .collect::<Map<_, _>>()
        .into()
}

fn statuses(counts: &PerStatus) -> Value {
    counts.nonzero().map(|(code, n)| (status::name(code).to_string(), Value::from(n))).collect::<Map<_, _>>().into()
}

/// A latency summary in µs, keyed by each statistic's JSON key (p50, p999, ...).
pub fn latency(l: &Latency) -> Value {
    let mut out = Map::new();
    out.insert("count".into(), l.count.into());
    for (stat, value) in l.statistics() {
        out.insert(stat.key(), units::micros(value).into());
    }
    out.into()
}
