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
    // Counts are added: one beyond 2^53 (what a JSON number holds exactly) is no count of a
    // run, and a few of them would overflow the sum.
    let r = &input.result;
    let counts = ["requests", "statuses", "attempt_statuses", "messages"]
        .into_iter()
        .flat_map(|key| r[key].as_object().into_iter().flatten().map(move |(name, n)| (format!("{key}.{name}"), n)))
        .chain(r["errors"].as_array().into_iter().flatten().map(|e| ("errors[].count".to_string(), &e["count"])));
    for (name, n) in counts {
        if n.as_u64().is_some_and(|n| n > MAX_COUNT) {
            return Err(bad_input(format!("{}: {name} {n} is not a count of calls", input.label)));
        }
    }
    Ok(input)
}

/// The largest count a result may hold: 2^53.
const MAX_COUNT: u64 = 1 << 53;

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

const LATE: [&str; 2] = ["late_sends", "late_wakeups"];

const COUNTS: [&str; 8] = ["total", "ok", "failed", "retries", "attempts", "retry_exhausted", "abandoned", "unsent"];

/// The merged result.
pub fn merge(inputs: &[Input]) -> anyhow::Result<Value> {
    let first = inputs.first().ok_or_else(|| bad_input("merge: no result given"))?;
    let sources = sources(inputs)?;
    let mixed = mixed(inputs);
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
            inputs.iter().map(|i| i.result["requests"][key].as_u64().unwrap_or(0)).fold(0, u64::saturating_add).into(),
        );
    }
    // The open loop's late sends, by cause (slot waits, late wake-ups): added, when the inputs have them.
    for key in LATE {
        if inputs.iter().any(|i| i.result.get(key).is_some()) {
            out.insert(key.into(), inputs.iter().map(|i| i.result[key].as_u64().unwrap_or(0)).sum::<u64>().into());
        }
    }
    for key in ["statuses", "attempt_statuses"] {
        let mut sum: BTreeMap<String, u64> = BTreeMap::new();
        for input in inputs {
            for (name, n) in input.result[key].as_object().into_iter().flatten() {
                let sum = sum.entry(name.clone()).or_default();
                *sum = sum.saturating_add(n.as_u64().unwrap_or(0));
            }
        }
        out.insert(key.into(), json!(sum));
    }
    let mut errors: BTreeMap<(String, String), u64> = BTreeMap::new();
    for input in inputs {
        for e in input.result["errors"].as_array().into_iter().flatten() {
            let key = (e["status"].as_str().unwrap_or("").to_string(), e["message"].as_str().unwrap_or("").to_string());
            let count = errors.entry(key).or_default();
            *count = count.saturating_add(e["count"].as_u64().unwrap_or(0));
        }
    }
    let mut errors: Vec<_> = errors.into_iter().collect();
    errors.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    out.insert(
        "errors".into(),
        errors.iter().map(|((s, m), n)| json!({"status": s, "message": m, "count": n})).collect::<Vec<_>>().into(),
    );
    // Throughput over the union of the measured windows: runs apart do not count the time
    // between them, runs that overlap count their overlap once.
    let mut windows = Vec::new();
    for input in inputs {
        windows.extend(measured_windows(&input.result).map_err(|e| bad_input(format!("{}: {e}", input.label)))?);
    }
    let windows = union(windows);
    let start = windows.first().map_or(0.0, |w| w.0);
    let span = windows.last().map_or(0.0, |w| w.1) - start;
    let measured: f64 = windows.iter().map(|(from, to)| to - from).sum();
    let total = requests["total"].as_u64().unwrap_or(0);
    let ok = out["statuses"][status::name(tonic::Code::Ok)].as_u64().unwrap_or(0);
    let rate = |n: u64| if measured > 0.0 { n as f64 / measured } else { 0.0 };
    let micros = |s: f64| (s * 1e6).round() / 1e6;
    out.insert("duration_s".into(), micros(measured).into());
    out.insert("duration_is".into(), DURATION_IS.into());
    out.insert("span_s".into(), micros(span).into());
    out.insert(
        "windows".into(),
        windows
            .iter()
            .map(|(from, to)| json!({"started_at": rfc3339(*from), "duration_s": micros(to - from)}))
            .collect::<Vec<_>>()
            .into(),
    );
    out.insert("throughput_rps".into(), rate(total).into());
    out.insert("ok_rps".into(), rate(ok).into());
    out.insert("requests".into(), requests.into());
    if let Some(kind) = first.result.get("messages").map(|m| m["kind"].clone()) {
        out.insert("messages".into(), merge_messages(inputs, kind, &rate)?);
    }
    if inputs.iter().any(|i| i.result.get("calls_by_name").is_some()) {
        out.insert("calls_by_name".into(), merge_calls_by_name(inputs, &rate)?);
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
    notices.extend(mixed.iter().cloned());
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
    // Mixed inputs: every value named, none passed off as the whole's.
    for key in MIXABLE {
        let values = distinct(inputs, key);
        if values.len() > 1 {
            out.insert(key.into(), values.join(", ").into());
        }
    }
    out.insert(
        "meta".into(),
        json!({
            "rpcmeter_version": env!("CARGO_PKG_VERSION"),
            "run_id": uuid::Uuid::new_v4().to_string(),
            "source_run_ids": sources,
            "merged_from": inputs.iter().map(|i| i.label.clone()).collect::<Vec<_>>(),
            "started_at": rfc3339(start),
            "ended": if partial { "partial" } else { "completed" },
            "name": first.result["meta"]["name"],
            "tags": first.result["meta"]["tags"],
            "mixed": mixed,
        }),
    );
    Ok(out.into())
}

/// `--workload` results: each call name's counts and statuses added, its histogram added and
/// summarised again; a name is matched by name across the inputs.
fn merge_calls_by_name(inputs: &[Input], rate: &dyn Fn(u64) -> f64) -> anyhow::Result<Value> {
    struct Sum {
        method: Value,
        requests: [u64; 3],
        statuses: BTreeMap<String, u64>,
        latency: hdrhistogram::Histogram<u64>,
    }
    let mut names: BTreeMap<String, Sum> = BTreeMap::new();
    for input in inputs {
        for (name, v) in input.result["calls_by_name"].as_object().into_iter().flatten() {
            let at = |why: String| bad_input(format!("{}: calls_by_name.{name}.{why}", input.label));
            let sum = names.entry(name.clone()).or_insert_with(|| Sum {
                method: v["method"].clone(),
                requests: [0; 3],
                statuses: BTreeMap::new(),
                latency: new_histogram(),
            });
            if sum.method != v["method"] {
                return Err(at(format!("method {} is not the other inputs' {}", v["method"], sum.method)));
            }
            for (i, key) in ["total", "ok", "failed"].iter().enumerate() {
                sum.requests[i] = sum.requests[i].saturating_add(v["requests"][key].as_u64().unwrap_or(0));
            }
            for (status, n) in v["statuses"].as_object().into_iter().flatten() {
                let count = sum.statuses.entry(status.clone()).or_default();
                *count = count.saturating_add(n.as_u64().unwrap_or(0));
            }
            let h = from_text(v["histogram"].as_str().unwrap_or("")).map_err(|why| at(format!("histogram {why}")))?;
            sum.latency.add(&h).map_err(|e| at(format!("histogram: {e}")))?;
        }
    }
    Ok(names
        .into_iter()
        .map(|(name, sum)| {
            let [total, ok, failed] = sum.requests;
            let value = json!({
                "method": sum.method,
                "requests": {"total": total, "ok": ok, "failed": failed},
                "throughput_rps": rate(total),
                "statuses": sum.statuses,
                "latency_us": latency(&Latency::of(&sum.latency)),
                "histogram": to_text(&sum.latency),
            });
            (name, value)
        })
        .collect::<Map<_, _>>()
        .into())
}

/// Streaming results: messages added, their histograms added and summarised again, rates
/// over the union of the windows (`rate`).
fn merge_messages(inputs: &[Input], kind: Value, rate: &dyn Fn(u64) -> f64) -> anyhow::Result<Value> {
    let sum =
        |key: &str| inputs.iter().map(|i| i.result["messages"][key].as_u64().unwrap_or(0)).fold(0, u64::saturating_add);
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

/// What a merged `duration_s` is, said in the result and its table.
pub const DURATION_IS: &str = "union of the measured windows";

/// The measured windows of one result, in seconds since the epoch: a merged result's own list
/// (`windows`), else from its start plus its warm-up, for its measured duration.
fn measured_windows(result: &Value) -> Result<Vec<(f64, f64)>, String> {
    if let Some(windows) = result.get("windows").and_then(Value::as_array) {
        return windows.iter().map(|w| window(&w["started_at"], 0.0, &w["duration_s"])).collect();
    }
    let warmup = result["warmup"]["duration_s"].as_f64().unwrap_or(0.0);
    Ok(vec![window(&result["meta"]["started_at"], warmup, &result["duration_s"])?])
}

fn window(started: &Value, warmup: f64, duration: &Value) -> Result<(f64, f64), String> {
    let text = started.as_str().unwrap_or("");
    let started = humantime::parse_rfc3339(text)
        .map_err(|_| format!("started_at {text:?} is not a time"))?
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64();
    let length = duration.as_f64().filter(|d| d.is_finite() && *d >= 0.0);
    let length = length.ok_or_else(|| format!("duration_s {duration} is not a duration"))?;
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
enum Run {
    Id(String),
    Unnamed(String),
}

/// The runs an input holds: a merged result's sources, else the run itself.
fn runs(result: &Value) -> Vec<Run> {
    let meta = &result["meta"];
    let sources = meta["source_run_ids"].as_array().into_iter().flatten().filter_map(Value::as_str);
    let ids: Vec<Run> = sources.map(|id| Run::Id(id.to_string())).collect();
    if !ids.is_empty() {
        return ids;
    }
    if let Some(id) = meta["run_id"].as_str() {
        return vec![Run::Id(id.to_string())];
    }
    let tell = json!([meta["started_at"], meta["shard"], result["requests"], result["histograms"]["call_latency"]]);
    vec![Run::Unnamed(tell.to_string())]
}

/// The run ids of all inputs, each once: the same run given twice (a file and its copy, a
/// merge and one of its parts) would count its calls twice, so it is refused.
fn sources(inputs: &[Input]) -> anyhow::Result<Vec<String>> {
    let mut seen: Vec<(Run, &str)> = Vec::new();
    for input in inputs {
        for run in runs(&input.result) {
            if let Some((_, before)) = seen.iter().find(|(r, _)| *r == run) {
                let which = match &run {
                    Run::Id(id) => format!("run {id}"),
                    Run::Unnamed(_) => "a run without a run id (same start, counts and histogram)".into(),
                };
                return Err(bad_input(format!(
                    "merge: {} holds {which}, already given in {before}: its calls would count twice",
                    input.label
                )));
            }
            seen.push((run, &input.label));
        }
    }
    Ok(seen.into_iter().filter_map(|(run, _)| if let Run::Id(id) = run { Some(id) } else { None }).collect())
}

/// What inputs may differ in and still merge, with a warning: a merged closed and open loop,
/// or two methods, is rarely what was meant.
const MIXABLE: [&str; 3] = ["mode", "call", "target"];

fn distinct(inputs: &[Input], key: &str) -> Vec<String> {
    let mut values: Vec<String> = Vec::new();
    for input in inputs {
        let value = input.result[key].as_str().unwrap_or("").to_string();
        if !values.contains(&value) {
            values.push(value);
        }
    }
    values
}

/// One line per way the inputs differ, naming which input had which value.
fn mixed(inputs: &[Input]) -> Vec<String> {
    let mut out = Vec::new();
    for key in MIXABLE {
        if distinct(inputs, key).len() > 1 {
            let each: Vec<String> =
                inputs.iter().map(|i| format!("{} ({})", i.result[key].as_str().unwrap_or(""), i.label)).collect();
            out.push(format!("merged results of different {key}: {}", each.join(", ")));
        }
    }
    out
}

/// The span beside the union, when gaps between the windows were left out.
fn span_note(merged: &Value) -> String {
    let (union, span) = (merged["duration_s"].as_f64().unwrap_or(0.0), merged["span_s"].as_f64().unwrap_or(0.0));
    match span > union + 0.005 {
        true => format!("; first start to last end {span:.2} s"),
        false => String::new(),
    }
}

/// The warnings a merge prints: how its inputs differ.
pub fn warnings(merged: &Value) -> Vec<String> {
    merged["meta"]["mixed"].as_array().into_iter().flatten().filter_map(Value::as_str).map(String::from).collect()
}

/// A short table of the merged result.
pub fn table(merged: &Value) -> String {
    let l = &merged["latency_us"];
    // As `run`'s table writes durations.
    let ms = |v: &Value| {
        let us = v.as_f64().filter(|us| us.is_finite() && *us >= 0.0).unwrap_or(0.0);
        crate::units::duration(Duration::try_from_secs_f64(us / 1e6).unwrap_or(Duration::MAX))
    };
    let mut o = format!(
        "{} {}  (merged from {} results)\n  Calls:       {} (ok {}, failed {})\n  Duration:    {:.2} s ({DURATION_IS}{})\n  Throughput:  {:.1} calls/s\n  Latency:     p50 {}, p90 {}, p99 {}, p99.9 {}, max {}\n\nShards:\n",
        merged["target"].as_str().unwrap_or(""),
        merged["call"].as_str().unwrap_or(""),
        merged["shards"].as_array().map_or(0, Vec::len),
        merged["requests"]["total"],
        merged["requests"]["ok"],
        merged["requests"]["failed"],
        merged["duration_s"].as_f64().unwrap_or(0.0),
        span_note(merged),
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
    if let Some(names) = merged["calls_by_name"].as_object().filter(|n| !n.is_empty()) {
        o += "\nBy call name:\n";
        for (name, v) in names {
            let l = &v["latency_us"];
            o += &format!(
                "  {}: {} calls (failed {}), p50 {}, p99 {}, max {}  {}\n",
                crate::report::printable::printable(name),
                v["requests"]["total"],
                v["requests"]["failed"],
                ms(&l["p50"]),
                ms(&l["p99"]),
                ms(&l["max"]),
                v["method"].as_str().unwrap_or("")
            );
        }
    }
    for n in merged["notices"].as_array().into_iter().flatten() {
        o += &format!("Note: {}\n", n.as_str().unwrap_or(""));
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_apart_add_and_overlaps_count_once() {
        let u = union(vec![(10.0, 12.0), (0.0, 2.0), (1.0, 3.0), (3.0, 4.0)]);
        assert_eq!(u, vec![(0.0, 4.0), (10.0, 12.0)]);
    }

    #[test]
    fn a_window_beyond_the_year_9999_does_not_panic() {
        assert!(rfc3339(1e300).starts_with("9999-"));
        assert!(window(&"2024-01-01T00:00:00Z".into(), 0.0, &json!(-1.0)).is_err());
    }
}
