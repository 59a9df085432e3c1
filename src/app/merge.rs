//! `rpcmeter merge`: results of several runs (the shards of one distributed run, or any runs
//! of the same call) as one result, exactly: counts added, every histogram merged losslessly
//! so that the merged p99 is the p99 of all samples (never an average of p99s), throughput
//! over the union of the measured windows, each input's client cost kept and any input whose
//! client was the bottleneck named. The output is a result JSON like `run`'s, so that
//! compare, report and merge itself read it.
use crate::error::bad_input;
use crate::grpc::status;
use crate::record::shard::new_histogram;
use crate::record::shard::{from_text, to_text};
use crate::report::json::latency;
use crate::stats::Latency;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// One input: where it came from and its result JSON.
pub struct Input {
    pub label: String,
    pub result: Value,
}

/// Reads a result file; anything that is not a result of `run --format json` is bad input.
pub fn read(path: &Path) -> anyhow::Result<Input> {
    // A history id ("42", "#42") or a file.
    let text = crate::history::resolve_text(&path.to_string_lossy())?;
    let result: Value =
        serde_json::from_str(&text).map_err(|e| bad_input(format!("{}: not JSON: {e}", path.display())))?;
    checked(Input { label: path.display().to_string(), result })
}

fn checked(input: Input) -> anyhow::Result<Input> {
    for key in ["requests", "histograms", "meta", "duration_s"] {
        if input.result.get(key).is_none() {
            return Err(bad_input(format!(
                "{}: not a result of rpcmeter run --format json (no \"{key}\")",
                input.label
            )));
        }
    }
    Ok(input)
}

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
                inputs.push(checked(Input { label: format!("{label} #{}", inputs.len() + 1), result })?);
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

const HISTOGRAMS: [(&str, &str); 5] = [
    ("call_latency", "latency_us"),
    ("ok_call_latency", "ok_latency_us"),
    ("attempt_latency", "attempt_latency_us"),
    ("service_time", "service_time_us"),
    ("schedule_lag", "schedule_lag_us"),
];

const COUNTS: [&str; 8] = ["total", "ok", "failed", "retries", "attempts", "retry_exhausted", "abandoned", "unsent"];

/// The merged result.
pub fn merge(inputs: &[Input]) -> anyhow::Result<Value> {
    let first = inputs.first().ok_or_else(|| bad_input("merge: no result given"))?;
    let calls: Vec<&str> = inputs.iter().map(|i| i.result["call"].as_str().unwrap_or("")).collect();
    if calls.iter().any(|c| *c != calls[0]) {
        return Err(bad_input(format!("merge: the results call different methods ({})", calls.join(", "))));
    }
    let mut out = Map::new();
    // Histograms: added, then summarised again from the sum.
    let mut histograms = Map::new();
    for (key, summary_key) in HISTOGRAMS {
        // Results written before a histogram existed (ok_call_latency) merge without it.
        if key == "ok_call_latency" && inputs.iter().any(|i| i.result["histograms"].get(key).is_none()) {
            continue;
        }
        let mut sum = new_histogram();
        for input in inputs {
            let text = input.result["histograms"][key].as_str().unwrap_or("");
            let h = from_text(text).map_err(|why| bad_input(format!("{}: histograms.{key} {why}", input.label)))?;
            sum.add(&h).map_err(|e| bad_input(format!("{}: histograms.{key}: {e}", input.label)))?;
        }
        histograms.insert(key.into(), to_text(&sum).into());
        if key == "call_latency" {
            out.insert("histogram".into(), to_text(&sum).into());
        }
        if key != "schedule_lag" || first.result.get(summary_key).is_some() {
            out.insert(summary_key.into(), latency(&Latency::of(&sum)));
        }
    }
    out.insert("histograms".into(), histograms.into());
    // Counts: added.
    let mut requests = Map::new();
    for key in COUNTS {
        requests.insert(
            key.into(),
            inputs.iter().map(|i| i.result["requests"][key].as_u64().unwrap_or(0)).sum::<u64>().into(),
        );
    }
    for key in ["statuses", "attempt_statuses"] {
        let mut sum: BTreeMap<String, u64> = BTreeMap::new();
        for input in inputs {
            for (name, n) in input.result[key].as_object().into_iter().flatten() {
                *sum.entry(name.clone()).or_default() += n.as_u64().unwrap_or(0);
            }
        }
        out.insert(key.into(), json!(sum));
    }
    let mut errors: BTreeMap<(String, String), u64> = BTreeMap::new();
    for input in inputs {
        for e in input.result["errors"].as_array().into_iter().flatten() {
            let key = (e["status"].as_str().unwrap_or("").to_string(), e["message"].as_str().unwrap_or("").to_string());
            *errors.entry(key).or_default() += e["count"].as_u64().unwrap_or(0);
        }
    }
    let mut errors: Vec<_> = errors.into_iter().collect();
    errors.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    out.insert(
        "errors".into(),
        errors.iter().map(|((s, m), n)| json!({"status": s, "message": m, "count": n})).collect::<Vec<_>>().into(),
    );
    // Throughput over the union of the measured windows.
    let windows: Vec<(f64, f64)> = inputs.iter().map(|i| window(&i.result)).collect::<anyhow::Result<_>>()?;
    let start = windows.iter().map(|w| w.0).fold(f64::INFINITY, f64::min);
    let end = windows.iter().map(|w| w.1).fold(f64::NEG_INFINITY, f64::max);
    let span = (end - start).max(0.0);
    let total = requests["total"].as_u64().unwrap_or(0);
    let ok = out["statuses"][status::name(tonic::Code::Ok)].as_u64().unwrap_or(0);
    let rate = |n: u64| if span > 0.0 { n as f64 / span } else { 0.0 };
    out.insert("duration_s".into(), ((span * 1e6).round() / 1e6).into());
    out.insert("throughput_rps".into(), rate(total).into());
    out.insert("ok_rps".into(), rate(ok).into());
    out.insert("requests".into(), requests.into());
    if let Some(kind) = first.result.get("messages").map(|m| m["kind"].clone()) {
        out.insert("messages".into(), merge_messages(inputs, kind, &rate)?);
    }
    // Each input's client, and which were the bottleneck.
    let shards: Vec<Value> = inputs
        .iter()
        .map(|i| {
            let warnings = i.result["warnings"].as_array().cloned().unwrap_or_default();
            let bottleneck = warnings
                .iter()
                .any(|w| matches!(w["kind"].as_str(), Some("client_cpu" | "behind_schedule" | "unsent")));
            json!({
                "input": i.label,
                "shard": i.result["meta"]["shard"],
                "calls": i.result["requests"]["total"],
                "throughput_rps": i.result["throughput_rps"],
                "client": i.result["client"],
                "bottleneck": bottleneck,
            })
        })
        .collect();
    let mut notices: Vec<String> =
        vec![format!("merged from {} results: every histogram and count added exactly", inputs.len())];
    for s in shards.iter().filter(|s| s["bottleneck"] == true) {
        notices.push(format!("{}: its client was the bottleneck (see its notices)", s["input"].as_str().unwrap_or("")));
    }
    for i in inputs {
        for n in i.result["notices"].as_array().into_iter().flatten() {
            notices.push(format!("{}: {}", i.label, n.as_str().unwrap_or("")));
        }
    }
    let partial = inputs.iter().any(|i| i.result["partial"] == true);
    out.insert("shards".into(), shards.into());
    out.insert("partial".into(), partial.into());
    out.insert("notices".into(), notices.into());
    for key in ["target", "call", "mode", "load", "concurrency", "connections", "rps_target", "interval_s"] {
        if let Some(v) = first.result.get(key) {
            out.insert(key.into(), v.clone());
        }
    }
    let started = humantime::format_rfc3339_millis(SystemTime::UNIX_EPOCH + Duration::from_secs_f64(start.max(0.0)));
    out.insert(
        "meta".into(),
        json!({
            "rpcmeter_version": env!("CARGO_PKG_VERSION"),
            "merged_from": inputs.iter().map(|i| i.label.clone()).collect::<Vec<_>>(),
            "started_at": started.to_string(),
            "ended": if partial { "partial" } else { "completed" },
            "name": first.result["meta"]["name"],
            "tags": first.result["meta"]["tags"],
        }),
    );
    Ok(out.into())
}

/// Streaming results: messages added, their histograms added and summarised again, rates
/// over the union of the windows (`rate`).
fn merge_messages(inputs: &[Input], kind: Value, rate: &dyn Fn(u64) -> f64) -> anyhow::Result<Value> {
    let sum = |key: &str| inputs.iter().map(|i| i.result["messages"][key].as_u64().unwrap_or(0)).sum::<u64>();
    let (sent, received) = (sum("sent"), sum("received"));
    let mut out = json!({
        "kind": kind,
        "sent": sent,
        "received": received,
        "sent_per_s": rate(sent),
        "received_per_s": rate(received),
    });
    for (histogram, summary_key) in
        [("round_trip_histogram", "round_trip_us"), ("first_message_histogram", "first_message_us")]
    {
        if inputs[0].result["messages"].get(histogram).is_none() {
            continue;
        }
        let mut all = new_histogram();
        for input in inputs {
            let text = input.result["messages"][histogram].as_str().unwrap_or("");
            let h = from_text(text).map_err(|why| bad_input(format!("{}: messages.{histogram} {why}", input.label)))?;
            all.add(&h).map_err(|e| bad_input(format!("{}: messages.{histogram}: {e}", input.label)))?;
        }
        out[summary_key] = latency(&Latency::of(&all));
        out[histogram] = to_text(&all).into();
    }
    Ok(out)
}

/// The measured window of one result, in seconds since the epoch: from its start plus its
/// warm-up, for its measured duration.
fn window(result: &Value) -> anyhow::Result<(f64, f64)> {
    let started = result["meta"]["started_at"].as_str().unwrap_or("");
    let started = humantime::parse_rfc3339(started)
        .map_err(|_| bad_input(format!("meta.started_at {started:?} is not a time")))?
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64();
    let warmup = result["warmup"]["duration_s"].as_f64().unwrap_or(0.0);
    let start = started + warmup;
    Ok((start, start + result["duration_s"].as_f64().unwrap_or(0.0)))
}

/// A short table of the merged result.
pub fn table(merged: &Value) -> String {
    let l = &merged["latency_us"];
    let ms = |v: &Value| format!("{:.3} ms", v.as_f64().unwrap_or(0.0) / 1e3);
    let mut o = format!(
        "{} {}  (merged from {} results)\n  Calls:       {} (ok {}, failed {})\n  Duration:    {:.2} s (union of the windows)\n  Throughput:  {:.1} calls/s\n  Latency:     p50 {}, p90 {}, p99 {}, p99.9 {}, max {}\n\nShards:\n",
        merged["target"].as_str().unwrap_or(""),
        merged["call"].as_str().unwrap_or(""),
        merged["shards"].as_array().map_or(0, Vec::len),
        merged["requests"]["total"],
        merged["requests"]["ok"],
        merged["requests"]["failed"],
        merged["duration_s"].as_f64().unwrap_or(0.0),
        merged["throughput_rps"].as_f64().unwrap_or(0.0),
        ms(&l["p50"]),
        ms(&l["p90"]),
        ms(&l["p99"]),
        ms(&l["p999"]),
        ms(&l["max"]),
    );
    for s in merged["shards"].as_array().into_iter().flatten() {
        o += &format!(
            "  {}: {} calls, {:.1} calls/s, client CPU {} µs/call{}\n",
            s["input"].as_str().unwrap_or(""),
            s["calls"],
            s["throughput_rps"].as_f64().unwrap_or(0.0),
            s["client"]["cpu_us_per_request"],
            if s["bottleneck"] == true { "  [client was the bottleneck]" } else { "" }
        );
    }
    for n in merged["notices"].as_array().into_iter().flatten() {
        o += &format!("Note: {}\n", n.as_str().unwrap_or(""));
    }
    o
}
