//! `lab kv-throughput`: docs/experiments.md, "Throughput measured by the client". The
//! write-up's first graph divided each client's messages by the sum of its latencies and
//! averaged over clients, which is 1 / mean latency and must fall as the server saturates;
//! its second counted at the server. Here both, beside rpcmeter's system throughput (all
//! calls over one window), for the Storage service linearizable and relaxed, each client on
//! its own key and all on one key, and with the client's per-call trace (`--csv-details`, one
//! row per call, as the write-up's trace logging) on and off: the instrument's own cost.
use super::servers::{Built, Runtime, Server};
use super::{line_plot, Lab};
use crate::app::sweep::knee;
use crate::result::Run;
use crate::stats::Statistic;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub const TITLE: &str = "Lab: throughput measured by the client vs by the server (key/value store)";

struct Config {
    label: &'static str,
    relaxed: bool,
    one_key: bool,
    trace: bool,
}

const CONFIGS: [Config; 5] = [
    Config { label: "linearizable, own keys", relaxed: false, one_key: false, trace: false },
    Config { label: "linearizable, one key", relaxed: false, one_key: true, trace: false },
    Config { label: "relaxed, own keys", relaxed: true, one_key: false, trace: false },
    Config { label: "relaxed, one key", relaxed: true, one_key: true, trace: false },
    Config { label: "linearizable, own keys, per-call trace on", relaxed: false, one_key: false, trace: true },
];

struct Point {
    clients: u32,
    summary: Run,
    /// The write-up's client-side figure computed from every call (trace runs only).
    exact_client_side: Option<f64>,
}

pub fn run(mut lab: Lab) -> anyhow::Result<(PathBuf, PathBuf)> {
    let quick = lab.options.quick;
    let clients: &[u32] = if quick { &[1, 2, 4, 8] } else { &[1, 2, 4, 6, 8, 12, 16, 20, 25] };
    let each = if quick { Duration::from_secs(1) } else { Duration::from_secs(10) };
    lab.doc.para(format!(
        "Closed loop of PutValue calls, each client with its own HTTP/2 connection, {} clients, {} each{}. \
         Three throughputs per step: the write-up's client-side figure (per client: calls / sum of its latencies, averaged \
         over clients; = 1 / mean latency when clients are alike), rpcmeter's (all calls over the measured window), and the \
         server's ((received - 1) / (last - first arrival), from its Stats).",
        clients.iter().map(u32::to_string).collect::<Vec<_>>().join(", "),
        humantime::format_duration(each),
        if quick { " (quick mode; 1..25 clients, 10 s each without --quick)" } else { "" }
    ));
    let ready = lab.servers(&[Runtime::Rpcmeter])?;
    let Some((_, built)) = ready.first() else { return lab.finish() };
    let results = sweep(&mut lab, built, clients, each)?;
    step_table(&mut lab, &results);
    figures(&mut lab, &results);
    lab.doc.findings("What it shows", findings(&results));
    lab.finish()
}

/// Every store configuration at every client count, one measured run each; stops early
/// when the lab is interrupted.
fn sweep(
    lab: &mut Lab,
    built: &Built,
    clients: &[u32],
    each: Duration,
) -> anyhow::Result<Vec<(&'static Config, Vec<Point>)>> {
    let mut results: Vec<(&Config, Vec<Point>)> = Vec::new();
    for config in CONFIGS.iter() {
        if lab.interrupted() {
            break;
        }
        let args: Vec<String> = if config.relaxed { vec!["--relax".into()] } else { vec![] };
        let server = Server::start(Runtime::Rpcmeter, built, config.label, &args)?;
        let mut points = Vec::new();
        for &n in clients {
            if lab.interrupted() {
                break;
            }
            let key = if config.one_key { "shared" } else { "client-{{.WorkerID}}" };
            let label = format!("{}-{n}-clients", config.label.replace([',', ' '], "-").replace("--", "-"));
            let mut flags: Vec<String> = [
                "--call",
                "rpcmeter.lab.v1.Storage/PutValue",
                "-d",
                &format!(r#"{{"key":"{key}","value":"aGVsbG8="}}"#),
                "-c",
                &n.to_string(),
                "--connections",
                &n.to_string(),
                "-z",
                &humantime::format_duration(each).to_string(),
            ]
            .map(String::from)
            .to_vec();
            let trace = lab.results_dir().join(format!("{label}.csv"));
            if config.trace {
                flags.extend(["--csv-details".to_string(), trace.display().to_string()]);
            }
            let Some(summary) = lab.measure(&label, &server, &flags)? else { break };
            let exact_client_side = config.trace.then(|| client_side_from_trace(&trace)).flatten();
            // The trace is one row per call: it has served its purpose.
            let _ = std::fs::remove_file(&trace);
            points.push(Point { clients: n, summary, exact_client_side });
        }
        results.push((config, points));
    }
    Ok(results)
}

/// The "Per step" table: the three throughputs, latency, failures and client CPU of every run.
fn step_table(lab: &mut Lab, results: &[(&Config, Vec<Point>)]) {
    lab.doc.heading("Per step");
    let mut rows = Vec::new();
    for (config, points) in results {
        for p in points {
            let s = &p.summary;
            rows.push(vec![
                config.label.to_string(),
                p.clients.to_string(),
                format!("{:.0}", client_side(s)),
                p.exact_client_side.map_or("–".into(), |x| format!("{x:.0}")),
                format!("{:.0}", s.throughput_rps),
                s.server.as_ref().and_then(|v| v.throughput_rps).map_or("–".into(), |x| format!("{x:.0}")),
                format!("{:.3}", s.latency_us.micros(Statistic::Percentile(50.0)).unwrap_or(0.0) / 1e3),
                format!("{:.3}", s.latency_us.micros(Statistic::Percentile(99.0)).unwrap_or(0.0) / 1e3),
                s.requests.failed.to_string(),
                format!("{:.1}", s.cpu_per_call().unwrap_or_default().as_secs_f64() * 1e6),
            ]);
        }
    }
    lab.doc.table(
        &[
            "store",
            "clients",
            "client-side, write-up's way (1/mean latency, calls/s)",
            "same, exact from every call",
            "rpcmeter: calls / window (calls/s)",
            "server-side (calls/s)",
            "p50 ms",
            "p99 ms",
            "failed",
            "client CPU µs/call",
        ],
        rows,
    );
}

/// The two plots: the write-up's two graphs beside rpcmeter's for the first configuration,
/// and rpcmeter's system throughput for every configuration.
fn figures(lab: &mut Lab, results: &[(&Config, Vec<Point>)]) {
    if let Some((_, points)) = results.first() {
        let series = vec![
            (
                "client-side, the write-up's first graph".to_string(),
                points.iter().map(|p| (p.clients as f64, client_side(&p.summary))).collect(),
            ),
            (
                "rpcmeter: all calls / window".to_string(),
                points.iter().map(|p| (p.clients as f64, p.summary.throughput_rps)).collect(),
            ),
            (
                "server-side, the write-up's second graph".to_string(),
                points
                    .iter()
                    .filter_map(|p| Some((p.clients as f64, p.summary.server.as_ref()?.throughput_rps?)))
                    .collect(),
            ),
        ];
        lab.doc.figure(
            line_plot(
                "kv-two-graphs",
                "Linearizable store, own keys: three throughputs",
                "clients",
                "calls/s",
                &series,
            ),
            "the write-up's two graphs on one plot, with rpcmeter's system throughput",
        );
    }
    let series: Vec<(String, Vec<(f64, f64)>)> = results
        .iter()
        .map(|(c, points)| {
            (c.label.to_string(), points.iter().map(|p| (p.clients as f64, p.summary.throughput_rps)).collect())
        })
        .collect();
    lab.doc.figure(
        line_plot(
            "kv-configs",
            "System throughput by store and keys",
            "clients",
            "calls/s (all calls / window)",
            &series,
        ),
        "linearizable vs relaxed, own keys vs one key, and the cost of the per-call trace",
    );
}

/// The write-up's client-side throughput from a summary: 1 / mean call latency.
fn client_side(s: &Run) -> f64 {
    let mean = s.latency_us.get(Statistic::Mean).unwrap_or_default().as_secs_f64();
    if mean > 0.0 {
        1.0 / mean
    } else {
        0.0
    }
}

/// The write-up's figure exactly: per worker, calls / sum of latencies, averaged over workers,
/// from the per-call CSV (`--csv-details`: latency_ns and worker columns).
fn client_side_from_trace(path: &Path) -> Option<f64> {
    let mut reader = csv::Reader::from_path(path).ok()?;
    let headers = reader.headers().ok()?.clone();
    let col = |name: &str| headers.iter().position(|h| h == name);
    let (latency, worker, warmup) = (col("latency_ns")?, col("worker")?, col("warmup"));
    let mut per_worker: std::collections::BTreeMap<u64, (u64, f64)> = Default::default();
    for record in reader.records() {
        let record = record.ok()?;
        if warmup.and_then(|w| record.get(w)).is_some_and(|w| w == "true") {
            continue;
        }
        let w: u64 = record.get(worker)?.parse().ok()?;
        let ns: f64 = record.get(latency)?.parse().ok()?;
        let e = per_worker.entry(w).or_default();
        e.0 += 1;
        e.1 += ns / 1e9;
    }
    let rates: Vec<f64> = per_worker.values().filter(|(_, s)| *s > 0.0).map(|(n, s)| *n as f64 / s).collect();
    (!rates.is_empty()).then(|| rates.iter().sum::<f64>() / rates.len() as f64)
}

fn findings(results: &[(&Config, Vec<Point>)]) -> Vec<String> {
    let mut out = Vec::new();
    for (config, points) in results {
        let (Some(first), Some(last)) = (points.first(), points.last()) else { continue };
        let tput: Vec<f64> = points.iter().map(|p| p.summary.throughput_rps).collect();
        let knee =
            knee(&tput).map_or("none within the steps".to_string(), |i| format!("{} clients", points[i].clients));
        out.push(format!(
            "{}: from {} to {} clients, the write-up's client-side figure went {:.0} → {:.0} calls/s while the system's went \
             {:.0} → {:.0}; knee: {knee}.",
            config.label,
            first.clients,
            last.clients,
            client_side(&first.summary),
            client_side(&last.summary),
            first.summary.throughput_rps,
            last.summary.throughput_rps,
        ));
    }
    let find = |label: &str| results.iter().find(|(c, _)| c.label == label).map(|(_, p)| p);
    if let (Some(off), Some(on)) = (find(CONFIGS[0].label), find(CONFIGS[4].label)) {
        let ratios: Vec<String> = off
            .iter()
            .zip(on)
            .map(|(a, b)| {
                format!("{} clients {:.2}x", a.clients, b.summary.throughput_rps / a.summary.throughput_rps.max(1e-9))
            })
            .collect();
        out.push(format!(
            "Per-call trace on / off, system throughput: {} (one run each: a few % is noise here).",
            ratios.join(", ")
        ));
    }
    out
}
