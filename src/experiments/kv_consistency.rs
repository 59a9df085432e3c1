//! `lab kv-consistency`: docs/experiments.md, "Reads that miss the write just made". The
//! write-up promised to look at consistency and never did. Here each client runs a
//! put-then-get flow (`run --workload`: the put's version captured, the get checked against
//! it) on the Storage service in each consistency mode, and the checks count how often the
//! get missed the version its own put had just made, per mode and number of clients.
use super::servers::{Built, Runtime, Server};
use super::{line_plot, Lab};
use crate::result::Run;
use crate::stats::Statistic;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub const TITLE: &str = "Lab: reads that miss the write just made (key/value store, consistency modes)";

/// The get's checks, as the workload writes them: the first fails only on a stale read
/// (older than the put), the second on any version but the put's (newer ones included).
pub const NOT_STALE: &str = "version >= {{.version}}";
pub const EXACT: &str = "version == {{.version}}";

struct Config {
    label: &'static str,
    /// `serve` flags.
    serve: &'static [&'static str],
    /// The replica's lag, for the table ("–" when none).
    lag: Option<Duration>,
    /// All clients put and get one key, instead of one key each.
    one_key: bool,
}

const CONFIGS: [Config; 5] = [
    Config { label: "linearizable, own keys", serve: &[], lag: None, one_key: false },
    Config { label: "relaxed, own keys", serve: &["--kv-consistency", "relaxed"], lag: None, one_key: false },
    Config {
        label: "eventual 1ms, own keys",
        serve: &["--kv-consistency", "eventual", "--kv-replica-lag", "1ms"],
        lag: Some(Duration::from_millis(1)),
        one_key: false,
    },
    Config {
        label: "eventual 10ms, own keys",
        serve: &["--kv-consistency", "eventual", "--kv-replica-lag", "10ms"],
        lag: Some(Duration::from_millis(10)),
        one_key: false,
    },
    Config { label: "linearizable, one key", serve: &[], lag: None, one_key: true },
];

/// The workload of every step: one flow, a put of the client's key (or the shared key)
/// whose key and version are captured, then a get of that key checked against them.
pub fn workload(one_key: bool) -> String {
    let key = if one_key { "shared" } else { "client-{{.WorkerID}}" };
    format!(
        r#"# lab kv-consistency: each flow puts, then reads back what it put.
[[call]]
name = "put"
method = "rpcmeter.lab.v1.Storage/PutValue"
data = '{{"key":"{key}","value":"aGk="}}'
capture = {{ key = "request.key", version = "response.version" }}

[[call]]
name = "get"
method = "rpcmeter.lab.v1.Storage/GetValue"
data = '{{"key":"{{{{.key}}}}"}}'
check = ["{NOT_STALE}", "{EXACT}"]

[[flow]]
name = "put-then-get"
steps = ["put", "get"]
weight = 1
"#
    )
}

/// What one step measured, from its summary.
#[derive(Debug, Clone, Default, PartialEq)]
struct Measured {
    /// Flows that ran both steps OK.
    flows: u64,
    /// Gets whose answer was checked, and how many of them were stale / not the put's version.
    checked: u64,
    stale: u64,
    not_exact: u64,
    get_p50: Duration,
    flow_p50: Duration,
    flows_per_s: f64,
    /// Calls that ended in a status other than OK.
    failed: u64,
}

/// The step's numbers out of its result: the get's checks, the get's and the flow's slices.
fn measured(r: &Run) -> Measured {
    let check = |text: &str| r.checks.iter().flatten().find(|c| c.call == "get" && c.expression == text);
    let (pass, stale) = check(NOT_STALE).map_or((0, 0), |c| (c.pass, c.fail));
    let not_exact = check(EXACT).map_or(0, |c| c.fail);
    let p50 = |s: &crate::result::Slice| s.latency_us.get(Statistic::Percentile(50.0)).unwrap_or_default();
    let get = r.calls_by_name.as_ref().and_then(|n| n.get("get")).map(p50).unwrap_or_default();
    let flow = r.flows.iter().flatten().next().map(|f| f.1);
    let secs = r.duration_s;
    let flows = flow.map_or(0, |f| f.requests.ok);
    Measured {
        flows,
        checked: pass + stale,
        stale,
        not_exact,
        get_p50: get,
        flow_p50: flow.map_or(Duration::ZERO, p50),
        flows_per_s: if secs > 0.0 { flows as f64 / secs } else { 0.0 },
        failed: r.requests.failed,
    }
}

struct Point {
    clients: u32,
    m: Measured,
}

/// "a / b (x%)", or "–" when nothing was checked.
fn fraction(part: u64, total: u64) -> String {
    if total == 0 {
        return "–".into();
    }
    format!("{part} / {total} ({:.1}%)", 100.0 * part as f64 / total as f64)
}

fn percent(part: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        100.0 * part as f64 / total as f64
    }
}

pub fn run(mut lab: Lab) -> anyhow::Result<(PathBuf, PathBuf)> {
    let quick = lab.options.quick;
    let clients: &[u32] = if quick { &[1, 4, 16] } else { &[1, 2, 4, 8, 16, 32] };
    let each = if quick { Duration::from_millis(500) } else { Duration::from_secs(5) };
    lab.doc.para(format!(
        "Each client runs a put-then-get flow in a closed loop (`run --workload`, below): a PutValue whose key and \
         version are captured, then a GetValue of that key checked against them: `{NOT_STALE}` fails on a stale read \
         (a version older than the put's, or none), `{EXACT}` on any version but the put's (a newer one written by \
         another client included). Each client has its own HTTP/2 connection; {} clients, {} each{}. Stores: \
         linearizable, relaxed (per-key order), and eventual, whose gets are served by a replica that applies each put \
         `--kv-replica-lag` after it (1 ms: about one loopback call; 10 ms: far more); each client on its own key, and \
         linearizable with all clients on one key.",
        clients.iter().map(u32::to_string).collect::<Vec<_>>().join(", "),
        humantime::format_duration(each),
        if quick { " (quick mode; 1..32 clients, 5 s each without --quick)" } else { "" }
    ));
    let ready = lab.servers(&[Runtime::Rpcmeter])?;
    let Some((_, built)) = ready.first() else { return lab.finish() };
    let workloads = write_workloads(&mut lab)?;
    let results = sweep(&mut lab, built, &workloads, clients, each)?;
    step_table(&mut lab, &results);
    let series: Vec<(String, Vec<(f64, f64)>)> = results
        .iter()
        .map(|(c, points)| {
            (c.label.to_string(), points.iter().map(|p| (p.clients as f64, percent(p.m.stale, p.m.checked))).collect())
        })
        .collect();
    lab.doc.figure(
        line_plot("kv-stale", "Stale gets by store", "clients", "% of gets older than the put", &series),
        "how often the get after a put missed it, per store and number of clients",
    );
    lab.doc.findings("What it shows", findings(&results));
    lab.finish()
}

/// The two workload files (own keys, one key) beside the runs' results, named in the page.
fn write_workloads(lab: &mut Lab) -> anyhow::Result<Vec<PathBuf>> {
    let mut workloads = Vec::new();
    for one_key in [false, true] {
        let file = lab.results_dir().join(if one_key { "one-key.toml" } else { "own-keys.toml" });
        crate::app::outputs::write_whole(&file, workload(one_key).as_bytes())
            .map_err(|e| crate::error::output_failed(&file, e))?;
        workloads.push(file);
    }
    lab.doc.para(format!(
        "The workload files are beside the runs' results: {} (each client's key client-{{{{.WorkerID}}}}) and {} \
         (the key \"shared\").",
        workloads[0].display(),
        workloads[1].display()
    ));
    Ok(workloads)
}

/// Every store configuration at every client count, one measured run each; stops early
/// when the lab is interrupted.
fn sweep(
    lab: &mut Lab,
    built: &Built,
    workloads: &[PathBuf],
    clients: &[u32],
    each: Duration,
) -> anyhow::Result<Vec<(&'static Config, Vec<Point>)>> {
    let mut results: Vec<(&Config, Vec<Point>)> = Vec::new();
    for config in CONFIGS.iter() {
        if lab.interrupted() {
            break;
        }
        let args: Vec<String> = config.serve.iter().map(|s| s.to_string()).collect();
        let server = Server::start(Runtime::Rpcmeter, built, config.label, &args)?;
        let file: &Path = &workloads[usize::from(config.one_key)];
        let mut points = Vec::new();
        for &n in clients {
            if lab.interrupted() {
                break;
            }
            let label = format!("{}-{n}-clients", config.label.replace([',', ' '], "-").replace("--", "-"));
            let flags: Vec<String> = [
                "--workload",
                &file.display().to_string(),
                "-c",
                &n.to_string(),
                "--connections",
                &n.to_string(),
                "-z",
                &humantime::format_duration(each).to_string(),
            ]
            .map(String::from)
            .to_vec();
            let Some(summary) = lab.measure(&label, &server, &flags)? else { break };
            points.push(Point { clients: n, m: measured(&summary) });
        }
        results.push((config, points));
    }
    Ok(results)
}

/// The "Per step" table: staleness, latency and rate of every run.
fn step_table(lab: &mut Lab, results: &[(&Config, Vec<Point>)]) {
    lab.doc.heading("Per step");
    let mut rows = Vec::new();
    for (config, points) in results {
        for p in points {
            let m = &p.m;
            rows.push(vec![
                config.label.to_string(),
                config.lag.map_or("–".into(), |l| humantime::format_duration(l).to_string()),
                p.clients.to_string(),
                m.flows.to_string(),
                fraction(m.stale, m.checked),
                fraction(m.not_exact, m.checked),
                super::ms(m.get_p50),
                super::ms(m.flow_p50),
                super::per_s(m.flows_per_s),
                m.failed.to_string(),
            ]);
        }
    }
    lab.doc.table(
        &[
            "store",
            "replica lag",
            "clients",
            "flows",
            "stale gets (older than the put)",
            "gets not of the put's version",
            "get p50 ms",
            "flow p50 ms",
            "flows/s",
            "failed calls",
        ],
        rows,
    );
}

fn findings(results: &[(&Config, Vec<Point>)]) -> Vec<String> {
    let mut out = Vec::new();
    let (mut missed, mut held) = (Vec::new(), Vec::new());
    for (config, points) in results {
        let checked: u64 = points.iter().map(|p| p.m.checked).sum();
        if checked == 0 {
            out.push(format!("{}: no get was checked, so nothing is concluded.", config.label));
            continue;
        }
        let stale: u64 = points.iter().map(|p| p.m.stale).sum();
        let newer: u64 = points.iter().map(|p| p.m.not_exact.saturating_sub(p.m.stale)).sum();
        let steps: Vec<String> = points
            .iter()
            .filter(|p| p.m.checked > 0)
            .map(|p| {
                format!(
                    "{:.1}% at {} client{} (flow p50 {} ms)",
                    percent(p.m.stale, p.m.checked),
                    p.clients,
                    if p.clients == 1 { "" } else { "s" },
                    super::ms(p.m.flow_p50)
                )
            })
            .collect();
        let mut line = format!("{}: stale gets {}", config.label, steps.join(", "));
        if newer > 0 {
            line += &format!(
                "; {newer} gets saw a newer version than their put's, written by another client ({})",
                points
                    .iter()
                    .filter(|p| p.m.checked > 0)
                    .map(|p| format!(
                        "{:.1}% at {}",
                        percent(p.m.not_exact.saturating_sub(p.m.stale), p.m.checked),
                        p.clients
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        line.push('.');
        out.push(line);
        if stale > 0 {
            missed.push(config.label);
        } else {
            held.push(format!("{} ({checked} gets)", config.label));
        }
    }
    if !missed.is_empty() && !held.is_empty() {
        out.push(format!("Stale gets were measured with {} only; none with {}.", missed.join(", "), held.join(", ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The workload is valid TOML with the issue's syntax: the key and the version captured
    /// by the put, the get's data and checks templated on them, one flow of both.
    #[test]
    fn the_workload_puts_then_gets_and_checks_the_version() {
        for one_key in [false, true] {
            let text = workload(one_key);
            let doc: toml::Table = text.parse().unwrap();
            let calls = doc["call"].as_array().unwrap();
            let put = calls[0].as_table().unwrap();
            let key = if one_key { "shared" } else { "client-{{.WorkerID}}" };
            assert_eq!(put["data"].as_str().unwrap(), format!(r#"{{"key":"{key}","value":"aGk="}}"#));
            assert_eq!(put["capture"]["version"].as_str(), Some("response.version"));
            assert_eq!(put["capture"]["key"].as_str(), Some("request.key"));
            let get = calls[1].as_table().unwrap();
            assert_eq!(get["data"].as_str(), Some(r#"{"key":"{{.key}}"}"#));
            let checks: Vec<&str> = get["check"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
            assert_eq!(checks, [NOT_STALE, EXACT]);
            assert_eq!(doc["flow"][0]["steps"].as_array().unwrap().len(), 2);
        }
    }

    /// The findings restate the counts: stale per step, newer versions apart, and which
    /// stores had stale gets and which none.
    #[test]
    fn findings_name_the_stores_that_missed_and_those_that_did_not() {
        let point = |clients, checked, stale, not_exact| Point {
            clients,
            m: Measured { checked, stale, not_exact, flow_p50: Duration::from_millis(2), ..Measured::default() },
        };
        let results = vec![
            (&CONFIGS[0], vec![point(1, 100, 0, 0), point(4, 200, 0, 0)]),
            (&CONFIGS[2], vec![point(1, 100, 99, 99), point(4, 200, 10, 10)]),
            (&CONFIGS[4], vec![point(4, 200, 0, 150)]),
        ];
        let found = findings(&results);
        assert_eq!(
            found[1],
            "eventual 1ms, own keys: stale gets 99.0% at 1 client (flow p50 2.0 ms), 5.0% at 4 clients (flow p50 2.0 ms)."
        );
        assert!(found[2].contains("150 gets saw a newer version than their put's") && found[2].contains("75.0% at 4"));
        assert_eq!(
            found[3],
            "Stale gets were measured with eventual 1ms, own keys only; none with linearizable, own keys (300 gets), \
             linearizable, one key (200 gets)."
        );
    }

    #[test]
    fn fractions_say_when_nothing_was_checked() {
        assert_eq!(fraction(3, 12), "3 / 12 (25.0%)");
        assert_eq!(fraction(0, 0), "–");
    }
}
