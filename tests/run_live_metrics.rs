//! `run --metrics-addr`: live Prometheus metrics during a real run against the lab
//! (`rpcmeter serve`), read by a real Prometheus text parser; they grow between scrapes,
//! agree with the final result, and the endpoint is gone when the run ends. Also the final
//! result as `--format prometheus`, `influx` and `junit`.
mod common;
use common::lab_process::LabProcess;
use common::wait;
use prometheus_parse::{Scrape, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

/// One scrape as Prometheus does it: GET /metrics, the body parsed.
fn scrape(addr: &str) -> Scrape {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(stream, "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nAccept: text/plain\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or_else(|| panic!("{response}"));
    assert!(head.starts_with("HTTP/1.0 200") && head.contains("text/plain; version=0.0.4"), "{head}");
    Scrape::parse(body.lines().map(|l| Ok(l.to_string()))).unwrap_or_else(|e| panic!("{e}: {body}"))
}

fn counter(s: &Scrape, name: &str, label: Option<(&str, &str)>) -> f64 {
    let sample = s
        .samples
        .iter()
        .find(|x| x.metric == name && label.is_none_or(|(k, v)| x.labels.get(k) == Some(v)))
        .unwrap_or_else(|| panic!("no {name} {label:?} in {:?}", s.samples));
    match sample.value {
        Value::Counter(x) | Value::Gauge(x) => x,
        ref other => panic!("{name}: {other:?}"),
    }
}

/// The histogram's cumulative buckets (le, count), checked to be cumulative and to end at +Inf.
fn histogram(s: &Scrape, name: &str) -> Vec<(f64, f64)> {
    let sample = s.samples.iter().find(|x| x.metric == name).unwrap_or_else(|| panic!("no {name}"));
    let Value::Histogram(buckets) = &sample.value else { panic!("{name} is {:?}", sample.value) };
    let buckets: Vec<(f64, f64)> = buckets.iter().map(|b| (b.less_than, b.count)).collect();
    assert!(buckets.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1), "{buckets:?}");
    assert_eq!(buckets.last().unwrap().0, f64::INFINITY, "{buckets:?}");
    assert_eq!(buckets[0].0, 1e-5, "{buckets:?}");
    buckets
}

#[test]
fn live_metrics_grow_during_a_lab_run_and_close_after_it() {
    let lab = LabProcess::start(&[]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .args(["run", "--plaintext", "--quiet", "--no-save", "--call", "EchoService/echo", "-d", r#"{"content":"hi"}"#])
        .args(["--rps", "200", "-z", "3s", "--interval", "200ms", "--metrics-addr", "127.0.0.1:0", "--format", "json"])
        .arg(&lab.addr)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let url = line.trim().strip_prefix("rpcmeter: metrics on http://").unwrap_or_else(|| panic!("{line:?}"));
    let addr = url.strip_suffix("/metrics").unwrap().to_string();
    assert!(!addr.ends_with(":0"), "the bound port: {addr}");

    let ok = |s: &Scrape| counter(s, "rpcmeter_calls_total", Some(("status", "OK")));
    // Before the first answer there is no OK series yet.
    let ok_yet = |s: &Scrape| {
        let any = s.samples.iter().any(|x| x.metric == "rpcmeter_calls_total" && x.labels.get("status") == Some("OK"));
        if any {
            ok(s)
        } else {
            0.0
        }
    };
    // Scraped as the run goes (a scrape that answers is inside it): once calls are answered,
    // then once 50 more are.
    let scrape_when = |what: &str, more_than: f64| {
        wait::wait_for(what, wait::LIMIT, || {
            let s = scrape(&addr);
            if ok_yet(&s) > more_than {
                Ok(s)
            } else {
                Err(ok_yet(&s))
            }
        })
    };
    let first = scrape_when("OK calls in a scrape", 0.0);
    let second = scrape_when("50 more OK calls in a scrape", ok(&first) + 50.0);
    let cpu = |s: &Scrape| counter(s, "rpcmeter_client_cpu_seconds_total", None);
    assert!(cpu(&second) > cpu(&first), "client CPU grows");
    for s in [&first, &second] {
        let latency = histogram(s, "rpcmeter_call_latency_seconds");
        // Every answered call is in the +Inf bucket; echo answers well within 1 s.
        assert_eq!(latency.last().unwrap().1, ok(s));
        let one_second = latency.iter().find(|b| b.0 == 1.0).unwrap();
        assert_eq!(one_second.1, ok(s), "{latency:?}");
        histogram(s, "rpcmeter_schedule_lag_seconds");
        let in_flight = counter(s, "rpcmeter_in_flight", None);
        assert!((0.0..=256.0).contains(&in_flight), "{in_flight}");
        assert!(counter(s, "rpcmeter_client_rss_bytes", None) > 1e6);
    }
    assert!(second.docs["rpcmeter_calls_total"].contains("final gRPC status"));

    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{:?}", out.status);
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let total = result["requests"]["total"].as_f64().unwrap() + result["warmup"]["calls"].as_f64().unwrap_or(0.0);
    assert!(total >= ok(&second), "the final count includes every scraped call: {total} vs {}", ok(&second));
    // The run is over: nothing listens there any more.
    assert!(TcpStream::connect(&addr).is_err(), "{addr} still answers after the run");
}

#[test]
fn a_metrics_address_in_use_is_refused_in_one_line() {
    let lab = LabProcess::start(&[]);
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = taken.local_addr().unwrap().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .args(["run", "--plaintext", "-q", "--no-save", "--call", "EchoService/echo", "-n", "5", "--metrics-addr"])
        .args([taken.as_str(), lab.addr.as_str()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--metrics-addr") && stderr.contains(&taken) && stderr.lines().count() == 1, "{stderr}");
    for bad in ["localhost", "127.0.0.1:99999"] {
        let out = Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
            .args(["run", "--plaintext", "--call", "EchoService/echo", "--metrics-addr", bad, lab.addr.as_str()])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {stderr}");
        assert!(stderr.contains("--metrics-addr") && stderr.lines().count() == 1, "{stderr}");
    }
}

#[test]
fn the_final_result_as_prometheus_influx_and_junit() {
    let lab = LabProcess::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let (influx, junit) = (dir.path().join("run.influx"), dir.path().join("junit.xml"));
    let out = Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .args(["run", "--plaintext", "-q", "--no-save", "--call", "EchoService/echo", "-d", r#"{"content":"hi"}"#])
        .args(["-c", "2", "-n", "300", "--interval", "100ms", "--format", "prometheus", "--name", "ci smoke"])
        .args(["--assert", "p99<1ns,error_rate<1%,p50<=10s"])
        .arg("--export")
        .arg(format!("influx={}", influx.display()))
        .arg("--export")
        .arg(format!("junit={}", junit.display()))
        .arg(&lab.addr)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "p99<1ns is breached: {stderr}");

    let text = String::from_utf8_lossy(&out.stdout);
    let s = Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap();
    assert_eq!(counter(&s, "rpcmeter_run_count", None), 300.0);
    assert_eq!(counter(&s, "rpcmeter_run_calls", Some(("status", "OK"))), 300.0);
    assert_eq!(counter(&s, "rpcmeter_run_errors", None), 0.0);
    assert_eq!(histogram(&s, "rpcmeter_run_histogram_seconds").last().unwrap().1, 300.0);
    let p50 = s.samples.iter().find(|x| x.metric == "rpcmeter_run_latency_seconds").unwrap();
    let Value::Summary(quantiles) = &p50.value else { panic!("{:?}", p50.value) };
    assert!(quantiles.iter().any(|q| q.quantile == 0.99 && q.count > 0.0), "{quantiles:?}");
    // (prometheus-parse does not unescape `\"` in label values; escaping is unit-tested in
    // report::prometheus.)
    assert_eq!(p50.labels.get("name"), Some("ci smoke"));
    assert_eq!(counter(&s, "rpcmeter_run_assertion_ok", Some(("assertion", "p99<1ns"))), 0.0);
    assert_eq!(counter(&s, "rpcmeter_run_assertion_ok", Some(("assertion", "error_rate<1%"))), 1.0);

    // Line protocol: the run, then one line per interval, each `measurement,tags fields time`.
    let lines: Vec<String> = std::fs::read_to_string(&influx).unwrap().lines().map(String::from).collect();
    assert!(lines[0].starts_with("rpcmeter_run,name=ci\\ smoke,call=EchoService.echo,"), "{}", lines[0]);
    assert!(lines[0].contains(" count=300i,ok=300i,errors=0i,") && lines[0].contains(",p99="), "{}", lines[0]);
    assert!(lines.len() >= 2 && lines[1..].iter().all(|l| l.starts_with("rpcmeter_interval,")), "{lines:?}");
    let calls: u64 = lines[1..]
        .iter()
        .map(|l| l.split(" calls=").nth(1).unwrap().split('i').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(calls, 300, "the intervals hold every call");
    for line in &lines {
        let parts: Vec<&str> = line.rsplitn(2, ' ').collect();
        assert!(parts[0].parse::<u128>().unwrap() > 1_600_000_000_000_000_000, "ns timestamp: {line}");
    }

    // JUnit: written although the run failed, one testcase per assertion, the breach measured.
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("tests=\"4\" failures=\"1\" errors=\"0\""), "{xml}");
    assert_eq!(xml.matches("<testcase ").count(), 4, "{xml}");
    assert!(xml.contains("<testcase classname=\"rpcmeter.run\" name=\"p99&lt;1ns\""), "{xml}");
    assert!(xml.contains("<failure message=\"measured p99 = "), "{xml}");
    assert!(xml.contains("bound p99 &lt; 1ns"), "{xml}");
    assert!(xml.contains("testsuite name=\"rpcmeter run ci smoke\""), "{xml}");

    // A run that cannot start still leaves a JUnit report: one error naming why.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .args(["run", "--plaintext", "-q", "--no-save", "--call", "EchoService/echo", "-n", "5", "--connect-timeout"])
        .args(["2s", "--export"])
        .arg(format!("junit={}", junit.display()))
        .arg(closed.to_string())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("errors=\"1\"") && xml.contains("<error message=\""), "{xml}");
}

/// `--metrics-addr :PORT` listens on every interface, as Prometheus exporters take it
/// (node_exporter's `--web.listen-address=:9100`), with a warning that it is reachable.
#[test]
fn a_metrics_address_of_only_a_port_listens_on_every_interface() {
    let lab = LabProcess::start(&[]);
    let out = Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .args(["run", "--plaintext", "-q", "--no-save", "--call", "EchoService/echo", "-n", "5", "--metrics-addr"])
        .args([":0", lab.addr.as_str()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("metrics on http://0.0.0.0:"), "{stderr}");
    assert_eq!(stderr.lines().filter(|l| l.contains("warning") && l.contains("0.0.0.0")).count(), 1, "{stderr}");
}
