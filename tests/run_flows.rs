//! `run --workload` with `[[flow]]`s, captures and checks, against the lab server: per-name,
//! per-flow and per-check counts equal to the server's own Stats.
use rpcmeter::lab::{LabConfig, LabServer};
use serde_json::Value;
#[path = "common/workload_cli.rs"]
mod workload_cli;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;
use workload_cli::{rpcmeter, run_json, stats_ok, workload_file};

const PUT: &str = "/rpcmeter.lab.v1.Storage/PutValue";
const GET: &str = "/rpcmeter.lab.v1.Storage/GetValue";

/// The issue's workload: a put whose key and version the get then reads and checks.
const PUT_THEN_GET: &str = r#"
[[call]]
name = "put"
method = "rpcmeter.lab.v1.Storage/PutValue"
data = '{"key":"f{{.UUID}}","value":"aGk="}'
weight = 3
capture = { key = "request.key", version = "response.version" }

[[call]]
name = "get"
method = "rpcmeter.lab.v1.Storage/GetValue"
data = '{"key":"{{.key}}"}'
weight = 7
check = ["found == true", "version == {{.version}}"]

[[flow]]
name = "put-then-get"
steps = ["put", "get"]
weight = 1
"#;

fn lab(config: LabConfig) -> LabServer {
    LabServer::start(LabConfig { addr: "127.0.0.1:0".into(), ..config }).unwrap()
}

fn workload(text: &str) -> (tempfile::TempDir, PathBuf) {
    workload_file("flows.toml", text, &[])
}

fn total(slice: &Value) -> u64 {
    slice["requests"]["total"].as_u64().unwrap_or_else(|| panic!("no requests in {slice}"))
}

/// The passes and failures of the check "call: expression" (the first, when two are the same).
fn check(r: &Value, key: &str) -> (u64, u64) {
    let list = r["checks"].as_array().unwrap_or_else(|| panic!("checks is no list: {}", r["checks"]));
    let named = |c: &&Value| format!("{}: {}", c["call"].as_str().unwrap(), c["expression"].as_str().unwrap()) == key;
    let c = list.iter().find(named).unwrap_or(&Value::Null);
    (c["pass"].as_u64().unwrap_or_else(|| panic!("no check {key} in {}", r["checks"])), c["fail"].as_u64().unwrap())
}

#[test]
fn put_then_get_checks_pass_and_every_count_is_the_servers() {
    let server = lab(LabConfig::default());
    let addr = server.local_addr().to_string();
    let (_dir, file) = workload(PUT_THEN_GET);
    let r = run_json(&addr, &file, &["-c", "4", "-n", "200", "--assert", "checks>99%"]);
    let stats = server.shutdown();
    let flow = &r["flows"]["put-then-get"];
    assert_eq!(total(flow), 200, "{flow}");
    assert_eq!(flow["requests"]["ok"], 200, "{flow}");
    assert_eq!(flow["steps"], serde_json::json!(["put", "get"]));
    assert_eq!(flow["latency_us"]["count"], 200);
    assert_eq!(total(&r["calls_by_name"]["put"]), 200);
    assert_eq!(total(&r["calls_by_name"]["get"]), 200);
    assert_eq!(r["requests"]["total"], 400);
    assert_eq!(stats_ok(&stats, PUT), 200);
    assert_eq!(stats_ok(&stats, GET), 200);
    assert_eq!(check(&r, "get: found == true"), (200, 0));
    assert_eq!(check(&r, "get: version == {{.version}}"), (200, 0));
    // The typed result reads the flow as a run of its own (what compare and report judge).
    let run = rpcmeter::result::Run::from_value(r.clone()).unwrap();
    let flow = run.of_slice("flows", "put-then-get").unwrap();
    assert_eq!((flow.requests.total, flow.requests.ok), (200, 200));
}

#[test]
fn a_wrong_check_fails_every_time_and_the_assertion_exits_1() {
    let server = lab(LabConfig::default());
    let addr = server.local_addr().to_string();
    let wrong = PUT_THEN_GET.replace("version == {{.version}}", "version > {{.version}}");
    let (_dir, file) = workload(&wrong);
    let out = rpcmeter(&addr, &file, &["-c", "2", "-n", "50", "--assert", "checks>99%", "--format", "json"]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("checks>99%"));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(check(&r, "get: version > {{.version}}"), (0, 50));
    assert_eq!(check(&r, "get: found == true"), (50, 0));
    // Failed checks are no gRPC failures, and the flow goes on without stop_on_check_failure.
    assert_eq!(r["requests"]["failed"], 0);
    assert_eq!(r["flows"]["put-then-get"]["requests"]["ok"], 50);
    // Every call OK, yet the result says the checks failed: a notice names them.
    let notice = warning(&r, "failed_checks");
    assert!(notice.contains("1 of the workload's checks failed: \"get: version > {{.version}}\" 50 of 50"), "{notice}");
    let stats = server.shutdown();
    assert_eq!(stats_ok(&stats, GET), 50);
}

/// The message of the result's notice of `kind` (JSON `warnings`).
fn warning(r: &Value, kind: &str) -> String {
    let warnings = r["warnings"].as_array().unwrap_or_else(|| panic!("no warnings in {r}"));
    let found = warnings.iter().find(|w| w["kind"] == kind).unwrap_or_else(|| panic!("no {kind} in {warnings:?}"));
    found["message"].as_str().unwrap().to_owned()
}

#[test]
fn stop_on_check_failure_ends_the_flow_before_its_next_step() {
    let server = lab(LabConfig::default());
    let addr = server.local_addr().to_string();
    // The put's check fails (a new key's first version is never 0), so the get never goes.
    let text = PUT_THEN_GET
        .replace("capture = {", "check = [\"version == 0\"]\ncapture = {")
        .replace("weight = 1\n", "weight = 1\nstop_on_check_failure = true\n");
    let (_dir, file) = workload(&text);
    let r = run_json(&addr, &file, &["-c", "2", "-n", "30"]);
    let stats = server.shutdown();
    let flow = &r["flows"]["put-then-get"];
    assert_eq!((total(flow), flow["requests"]["failed"].as_u64().unwrap()), (30, 30), "{flow}");
    assert_eq!(flow["stopped_by_check"], 30);
    assert_eq!(check(&r, "put: version == 0"), (0, 30));
    assert_eq!(check(&r, "get: found == true"), (0, 0));
    assert_eq!((stats_ok(&stats, PUT), stats_ok(&stats, GET)), (30, 0));
    let notice = warning(&r, "flows_stopped");
    assert!(
        notice
            .contains("\"put-then-get\": 30 of 30 flows ended early with every call OK: stopped 30 by a failed check"),
        "{notice}"
    );
}

#[test]
fn the_table_and_the_report_say_why_flows_ended_early() {
    let server = lab(LabConfig::default());
    let addr = server.local_addr().to_string();
    let text = PUT_THEN_GET
        .replace("capture = {", "check = [\"version == 0\"]\ncapture = {")
        .replace("weight = 1\n", "weight = 1\nstop_on_check_failure = true\n");
    let (dir, file) = workload(&text);
    let out = rpcmeter(&addr, &file, &["-c", "2", "-n", "10"]);
    let table = String::from_utf8_lossy(&out.stdout);
    let mut lines = table.lines().skip_while(|l| !l.trim_start().starts_with("put-then-get "));
    let row = lines.next().unwrap_or_else(|| panic!("{table}"));
    assert!(row.contains(" 10 "), "{row}");
    let why = lines.next().unwrap();
    assert!(why.trim_start().starts_with("stopped 10 by a failed check (stop_on_check_failure)"), "{table}");
    // The get's check never ran: it read "0 passed 0 failed (0.00%)", as if it failed.
    let never = table.lines().find(|l| l.trim_start().starts_with("get: found == true")).unwrap();
    assert!(never.ends_with("0 passed         0 failed  (never run)"), "{never}");
    let json = dir.path().join("r.json");
    let out = rpcmeter(&addr, &file, &["-c", "2", "-n", "10", "--format", "json", "-o", json.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let page = Command::new(env!("CARGO_BIN_EXE_rpcmeter")).args(["report", "-o", "-"]).arg(&json).output().unwrap();
    let page = String::from_utf8_lossy(&page.stdout);
    let alert = page
        .split("id=\"failures\"")
        .nth(1)
        .unwrap_or_else(|| panic!("no failure box"))
        .split("</div>")
        .next()
        .unwrap();
    assert!(alert.contains("Check &quot;put: version == 0&quot; failed 10 of 10."), "{alert}");
    assert!(alert.contains("ended early, every call OK: stopped 10 by a failed check"), "{alert}");
    server.shutdown();
}

#[test]
fn merge_adds_the_flows_stopped_by_a_check() {
    let server = lab(LabConfig::default());
    let addr = server.local_addr().to_string();
    let text = PUT_THEN_GET
        .replace("capture = {", "check = [\"version == 0\"]\ncapture = {")
        .replace("weight = 1\n", "weight = 1\nstop_on_check_failure = true\n");
    let (dir, file) = workload(&text);
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    for (path, n) in [(&a, "12"), (&b, "7")] {
        let out = rpcmeter(&addr, &file, &["-c", "2", "-n", n, "--format", "json", "-o", path.to_str().unwrap()]);
        assert!(out.status.success() || out.status.code() == Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let out = Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .args(["merge", "--format", "json"])
        .args([&a, &b])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let m: Value = serde_json::from_slice(&out.stdout).unwrap();
    let flow = &m["flows"]["put-then-get"];
    assert_eq!((total(flow), flow["stopped_by_check"].as_u64().unwrap()), (19, 19), "{flow}");
    assert_eq!(check(&m, "put: version == 0"), (0, 19));
    server.shutdown();
}

#[test]
fn two_flows_by_weight_count_like_the_server() {
    let server = lab(LabConfig::default());
    let addr = server.local_addr().to_string();
    let text = format!(
        "{PUT_THEN_GET}\n[[flow]]\nname = \"put-only\"\nsteps = [\"put\"]\nweight = 3\n\n\
         [[flow]]\nname = \"put-get-get\"\nsteps = [\"put\", \"get\", \"get\"]\nweight = 1\n"
    );
    let (_dir, file) = workload(&text);
    let r = run_json(&addr, &file, &["-n", "100", "--rps", "500"]);
    let stats = server.shutdown();
    let flows = &r["flows"];
    // Smooth round robin over 1:3:1: exactly 20, 60, 20 of 100.
    assert_eq!(
        (total(&flows["put-then-get"]), total(&flows["put-only"]), total(&flows["put-get-get"])),
        (20, 60, 20),
        "{flows}"
    );
    assert_eq!(total(&r["calls_by_name"]["put"]), 100);
    assert_eq!(total(&r["calls_by_name"]["get"]), 20 + 40);
    assert_eq!((stats_ok(&stats, PUT), stats_ok(&stats, GET)), (100, 60));
    assert_eq!(check(&r, "get: version == {{.version}}"), (60, 0));
}

/// One Db call, and a flow that makes it twice.
const TWICE_DB: &str = r#"
[[call]]
name = "db"
method = "rpcmeter.lab.v1.TestService/Db"
data = { rows = 1 }

[[flow]]
name = "twice"
steps = ["db", "db"]
weight = 1
"#;

#[test]
fn an_open_loop_flows_latency_covers_both_steps() {
    // Every Db call sleeps 20 ms on the server: a flow of two takes 40 ms at least.
    let server = lab(LabConfig { db_sleep: Duration::from_millis(20), ..LabConfig::default() });
    let addr = server.local_addr().to_string();
    let (_dir, file) = workload(TWICE_DB);
    let r = run_json(&addr, &file, &["--rps", "20", "-n", "10"]);
    let flow = &r["flows"]["twice"];
    assert_eq!(total(flow), 10, "{flow}");
    let call_min = r["calls_by_name"]["db"]["latency_us"]["min"].as_f64().unwrap();
    let flow_min = flow["latency_us"]["min"].as_f64().unwrap();
    assert!(call_min >= 20_000.0, "{call_min}");
    assert!(flow_min >= 40_000.0 && flow_min >= 2.0 * call_min * 0.95, "flow {flow_min} µs, call {call_min} µs");
    assert_eq!(r["calls_by_name"]["db"]["requests"]["total"], 20);
}

/// Issue 39: a flow due but never started counts in its flow's latency at its lower bound
/// (the end less its intended start), the flows started only beside it (before: left out).
#[test]
fn a_flow_due_but_never_started_counts_in_its_latency_at_its_lower_bound() {
    // Each Db call sleeps 200 ms: 2 flows in flight of 400 ms each cannot keep 50 flows/s.
    let server = lab(LabConfig { db_sleep: Duration::from_millis(200), ..LabConfig::default() });
    let addr = server.local_addr().to_string();
    let (_dir, file) = workload(TWICE_DB);
    let r = run_json(&addr, &file, &["--rps", "50", "-z", "1s", "--max-in-flight", "2"]);
    let flow = &r["flows"]["twice"];
    let (started, unsent) = (total(flow), r["requests"]["unsent"].as_u64().unwrap());
    assert!(unsent >= 20 && started + unsent == 50, "{started} flows started, {unsent} not: {}", r["requests"]);
    assert_eq!(flow["latency_us"]["count"].as_u64(), Some(started + unsent), "{flow}");
    assert_eq!(flow["sent_latency_us"]["count"].as_u64(), Some(started), "{flow}");
    // Flow k is due at k/50 s; the first never started had waited 1 s - started/50 at the end.
    let bound = 1.0 - started as f64 / 50.0;
    let max = flow["latency_us"]["max"].as_f64().unwrap() / 1e6;
    assert!(max >= bound * 0.999, "max {max} s below the first unstarted flow's bound {bound} s");
}

#[test]
fn flows_and_checks_reach_every_format_and_merge_adds_them() {
    let server = lab(LabConfig::default());
    let addr = server.local_addr().to_string();
    let (dir, file) = workload(PUT_THEN_GET);
    let (a, b, merged) = (dir.path().join("a.json"), dir.path().join("b.json"), dir.path().join("m.json"));
    for (path, n) in [(&a, "40"), (&b, "20")] {
        let out = rpcmeter(&addr, &file, &["-c", "2", "-n", n, "--format", "json", "-o", path.to_str().unwrap()]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let bin = || Command::new(env!("CARGO_BIN_EXE_rpcmeter"));
    let out = bin().args(["merge", "--format", "json", "-o"]).arg(&merged).args([&a, &b]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let m: Value = serde_json::from_slice(&std::fs::read(&merged).unwrap()).unwrap();
    let flow = &m["flows"]["put-then-get"];
    assert_eq!((total(flow), flow["requests"]["ok"].as_u64().unwrap()), (60, 60), "{flow}");
    assert_eq!(flow["latency_us"]["count"], 60);
    assert_eq!(flow["steps"], serde_json::json!(["put", "get"]));
    assert_eq!(check(&m, "get: version == {{.version}}"), (60, 0));
    let out = bin().arg("merge").args([&a, &b]).output().unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    let row = table.lines().find(|l| l.trim_start().starts_with("put-then-get")).unwrap_or_else(|| panic!("{table}"));
    assert_eq!(row.split_whitespace().take(3).collect::<Vec<_>>(), ["put-then-get", "60", "0"], "{table}");
    assert!(table.contains("  get: found == true: 60 passed, 0 failed"), "{table}");

    let out = rpcmeter(&addr, &file, &["-c", "2", "-n", "10"]);
    let table = String::from_utf8_lossy(&out.stdout);
    let row = table.lines().find(|l| l.trim_start().starts_with("put-then-get ")).unwrap_or_else(|| panic!("{table}"));
    assert!(row.contains(" 10 ") && row.contains("put -> get"), "{row}");
    assert!(table.contains("get: version == {{.version}}") && table.contains("10 passed"), "{table}");

    let out = rpcmeter(&addr, &file, &["-c", "2", "-n", "10", "--format", "prometheus"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let has = |start: &str, parts: &[&str], end: &str| {
        text.lines().any(|l| l.starts_with(start) && parts.iter().all(|p| l.contains(p)) && l.ends_with(end))
    };
    assert!(has("rpcmeter_run_flows{", &["flow=\"put-then-get\"", "outcome=\"ok\""], " 10"), "{text}");
    assert!(has("rpcmeter_run_checks{", &["check=\"found == true\"", "result=\"pass\""], " 10"), "{text}");
    assert!(text.contains("rpcmeter_run_flow_latency_seconds{"), "{text}");

    let html = dir.path().join("r.html");
    let out = bin().arg("report").arg(&merged).arg("-o").arg(&html).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("By flow") && page.contains("<td>put-then-get</td>"), "no flow table in the report");
    assert!(page.contains("<h3>Checks</h3>") && page.contains("version == {{.version}}"), "no checks in the report");
    server.shutdown();
}

#[test]
fn csv_details_of_a_workload_name_each_call_and_carry_chosen_headers_and_trailers() {
    let server = lab(LabConfig::default());
    let addr = server.local_addr().to_string();
    let (dir, file) = workload(PUT_THEN_GET);
    let csv = dir.path().join("calls.csv");
    let csv_arg = csv.to_str().unwrap();
    let args = ["-c", "2", "-n", "10", "--csv-details", csv_arg, "--csv-details-header", "Content-Type"];
    let out = rpcmeter(&addr, &file, &[&args[..], &["--csv-details-trailer", "grpc-status"]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(head[12..], ["name", "header:content-type", "trailer:grpc-status"], "{head:?}");
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 20);
    let named = |name: &str| rows.iter().filter(|r| r[12] == name).count();
    assert_eq!((named("put"), named("get")), (10, 10));
    assert!(rows.iter().all(|r| r[13] == "application/grpc" && r[14] == "0"), "{text}");
    // Each get's row reads its own method's version, the one its put wrote.
    assert!(rows.iter().all(|r| !r[2].is_empty() && !r[1].is_empty()), "{text}");
    server.shutdown();
}

#[test]
fn headers_and_trailers_are_captured_and_checked() {
    let server = lab(LabConfig::default());
    let addr = server.local_addr().to_string();
    let text = PUT_THEN_GET
        .replace("capture = { key", "capture = { kind = \"header.content-type\", key")
        .replace(
            "check = [\"found == true\"",
            "check = [\"header.content-type == {{.kind}}\", \"trailer.grpc-status == 0\", \"trailer.grpc-status >= 0.0\", \"exists trailer.nope\", \"found == true\"",
        );
    let (_dir, file) = workload(&text);
    let r = run_json(&addr, &file, &["-c", "2", "-n", "20"]);
    assert_eq!(check(&r, "get: header.content-type == {{.kind}}"), (20, 0), "{}", r["checks"]);
    assert_eq!(check(&r, "get: trailer.grpc-status == 0"), (20, 0));
    // Ordered, a trailer is a number ("0" < "0.0" as text).
    assert_eq!(check(&r, "get: trailer.grpc-status >= 0.0"), (20, 0));
    assert_eq!(check(&r, "get: exists trailer.nope"), (0, 20));
    server.shutdown();
}

#[test]
fn a_captured_bytes_value_goes_into_another_calls_bytes_field() {
    let server = lab(LabConfig::default());
    let addr = server.local_addr().to_string();
    // The get's value (bytes, captured as base64) is put under a second key, read back and
    // compared: was refused before the run ("field \"value\" (bytes): invalid base64").
    let text = r#"
[[call]]
name = "put"
method = "rpcmeter.lab.v1.Storage/PutValue"
data = '{"key":"b{{.UUID}}","value":"{{randomString 12}}"}'
capture = { key = "request.key" }

[[call]]
name = "get"
method = "rpcmeter.lab.v1.Storage/GetValue"
data = '{"key":"{{.key}}"}'
capture = { value = "response.value" }

[[call]]
name = "copy"
method = "rpcmeter.lab.v1.Storage/PutValue"
data = '{"key":"{{.key}}-copy","value":"{{.value}}"}'

[[call]]
name = "get-copy"
method = "rpcmeter.lab.v1.Storage/GetValue"
data = '{"key":"{{.key}}-copy"}'
check = ["value == {{.value}}", "value != AAAA"]

[[flow]]
name = "copy"
steps = ["put", "get", "copy", "get-copy"]
"#;
    let (_dir, file) = workload(text);
    let r = run_json(&addr, &file, &["-c", "2", "-n", "20"]);
    let stats = server.shutdown();
    let flow = &r["flows"]["copy"];
    assert_eq!((total(flow), flow["requests"]["ok"].as_u64().unwrap()), (20, 20), "{flow}");
    assert_eq!(check(&r, "get-copy: value == {{.value}}"), (20, 0));
    assert_eq!(check(&r, "get-copy: value != AAAA"), (20, 0));
    assert_eq!((stats_ok(&stats, PUT), stats_ok(&stats, GET)), (40, 40));
}

/// A server stream's last message is captured from and checked; a client stream's answer is
/// checked; the run's stream flags shape both.
const STREAMS: &str = r#"
[[call]]
name = "subscribe"
method = "rpcmeter.lab.v1.Streaming/Subscribe"
data = { count = 3, size = 4 }
capture = { seq = "response.seq", payload = "response.payload" }
check = ["seq == 2", "exists payload"]

[[call]]
name = "upload"
method = "rpcmeter.lab.v1.Streaming/Upload"
data = '{"payload":"{{.payload}}","seq":"{{.seq}}"}'
check = ["chunks == 4", "bytes == 16"]

[[flow]]
name = "subscribe-then-upload"
steps = ["subscribe", "upload"]
"#;

const SUBSCRIBE: &str = "/rpcmeter.lab.v1.Streaming/Subscribe";
const UPLOAD: &str = "/rpcmeter.lab.v1.Streaming/Upload";

#[test]
fn a_server_streams_last_message_is_captured_and_a_client_streams_answer_checked() {
    let server = lab(LabConfig::default());
    let addr = server.local_addr().to_string();
    let (_dir, file) = workload(STREAMS);
    // Each stream of four: the server stream ends by itself after its 3, the client stream
    // sends 4 requests, each with the last chunk's payload and seq.
    let r = run_json(&addr, &file, &["-c", "2", "-n", "10", "--stream-call-count", "4", "--assert", "checks>=100%"]);
    let flow = &r["flows"]["subscribe-then-upload"];
    assert_eq!((total(flow), flow["requests"]["ok"].as_u64().unwrap()), (10, 10), "{flow}");
    assert_eq!(check(&r, "subscribe: seq == 2"), (10, 0));
    assert_eq!(check(&r, "subscribe: exists payload"), (10, 0));
    assert_eq!(check(&r, "upload: chunks == 4"), (10, 0));
    assert_eq!(check(&r, "upload: bytes == 16"), (10, 0));
    let stats = server.stats();
    let method = |path: &str| stats.methods.iter().find(|m| m.method == path).cloned().unwrap_or_default();
    assert_eq!((method(SUBSCRIBE).ok, method(SUBSCRIBE).messages_out), (10, 30));
    assert_eq!((method(UPLOAD).ok, method(UPLOAD).messages_in), (10, 40));
    // Refused before the run: a client stream's requests are many.
    let (_dir, file) = workload(&STREAMS.replace("\"bytes == 16\"", "\"exists request.seq\""));
    let out = rpcmeter(&addr, &file, &["-n", "1"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("request.seq: rpcmeter.lab.v1.Streaming.Upload sends a stream of requests"), "{stderr}");
    server.shutdown();
}

#[test]
fn a_server_stream_cut_by_its_count_is_read_at_its_last_counted_message() {
    let server = lab(LabConfig::default());
    let addr = server.local_addr().to_string();
    // count 0: the server streams until the client cancels, after its 2nd chunk here.
    let text = STREAMS.replace("count = 3", "count = 0").replace("seq == 2", "seq == 1");
    let (_dir, file) = workload(&text);
    let r = run_json(&addr, &file, &["-c", "2", "-n", "6", "--stream-call-count", "2"]);
    assert_eq!(check(&r, "subscribe: seq == 1"), (6, 0), "{}", r["checks"]);
    assert_eq!(check(&r, "upload: chunks == 4"), (0, 6));
    server.shutdown();
}

#[test]
fn a_capture_beyond_64_kib_ends_its_flow_as_a_capture_error() {
    let server = lab(LabConfig::default());
    let addr = server.local_addr().to_string();
    // 96 000 base64 characters are 72 000 bytes stored; read back, they are 96 000 again.
    let text = PUT_THEN_GET
        .replace("\"value\":\"aGk=\"", "\"value\":\"{{randomString 96000}}\"")
        .replace("check = [", "capture = { value = \"response.value\" }\ncheck = [");
    let (_dir, file) = workload(&text);
    let r = run_json(&addr, &file, &["-c", "2", "-n", "10"]);
    let flow = &r["flows"]["put-then-get"];
    assert_eq!((total(flow), flow["requests"]["failed"].as_u64().unwrap()), (10, 10), "{flow}");
    assert_eq!(flow["capture_errors"], 10);
    // The calls themselves were answered OK, and the get's checks still counted.
    assert_eq!(r["requests"]["failed"], 0);
    assert_eq!(check(&r, "get: found == true"), (10, 0));
    let notice = warning(&r, "flows_stopped");
    assert!(notice.contains("stopped 10 by a capture error (a value absent, over 64 KiB"), "{notice}");
    server.shutdown();
}

#[test]
fn bad_flows_captures_and_checks_are_refused_with_one_line() {
    let server = lab(LabConfig::default());
    let addr = server.local_addr().to_string();
    let refused = |text: &str, args: &[&str], wanted: &str| {
        let (_dir, file) = workload(text);
        let out = rpcmeter(&addr, &file, &[args, &["-n", "5"]].concat());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{wanted}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(stderr.contains(wanted), "wanted {wanted:?} in {stderr}");
    };
    refused(&PUT_THEN_GET.replace("found == true", "fuond == true"), &[], "GetReply has no field \"fuond\"");
    refused(&PUT_THEN_GET.replace("response.version", "response.nope"), &[], "capture \"version\"");
    refused(&PUT_THEN_GET.replace("found == true", "found ~ true"), &[], "is not one of == != < <= > >=");
    // Checks that could never pass (or pass by text order) are refused, not failed 100%.
    refused(&PUT_THEN_GET.replace("found == true", "found < 5"), &[], "check \"found < 5\": found is a bool");
    refused(&PUT_THEN_GET.replace("found == true", "found == 5"), &[], "compare it with true or false, not \"5\"");
    refused(
        &PUT_THEN_GET.replace("found == true", "version == banana"),
        &[],
        "version is a number (uint64): \"banana\" is not one",
    );
    refused(&PUT_THEN_GET.replace("found == true", "value > 5"), &[], "value is bytes: compare it with == or !=");
    refused(&PUT_THEN_GET.replace("found == true", "value == hi!"), &[], "\"hi!\" is not base64");
    refused(&PUT_THEN_GET.replace("found == true", "header.x > many"), &[], "\"many\" is not one");
    let echo = "[[call]]\nname = \"e\"\nmethod = \"EchoService/echo\"\nweight = 1\ncheck = [\"content > 5\"]\n";
    refused(echo, &[], "content is text (string): compare it with == or != (< <= > >= order numbers)");
    refused(&PUT_THEN_GET.replace("[\"put\", \"get\"]", "[\"get\", \"put\"]"), &[], "which no earlier step captures");
    refused(&PUT_THEN_GET.replace("[\"put\", \"get\"]", "[\"put\", \"nope\"]"), &[], "step \"nope\" is no [[call]]");
    refused(&PUT_THEN_GET.replace("[\"put\", \"get\"]", "[\"put\"]"), &[], "call \"get\" is in no [[flow]]");
    let no_checks = PUT_THEN_GET.replace("check = [\"found == true\", \"version == {{.version}}\"]", "");
    refused(&no_checks, &["--assert", "checks>99%"], "no [[call]] of a --workload has a check");
    let no_flow = PUT_THEN_GET.split("[[flow]]").next().unwrap().to_string();
    refused(&no_flow, &[], "capture is for the later steps of a [[flow]]");
    server.shutdown();
}

#[test]
fn checks_without_flows_count_on_every_call_and_enums_compare_by_name_or_number() {
    let server = lab(LabConfig::default());
    let addr = server.local_addr().to_string();
    let text = r#"
[[call]]
name = "health"
method = "grpc.health.v1.Health/Check"
weight = 1
check = ["status == SERVING", "status == 1", "status != NOT_SERVING", "exists status"]

[[call]]
name = "get"
method = "rpcmeter.lab.v1.Storage/GetValue"
data = '{"key":"never-put-{{.UUID}}"}'
weight = 3
check = ["found == false", "version < 1"]
"#;
    let (_dir, file) = workload(text);
    let r = run_json(&addr, &file, &["-c", "2", "-n", "40", "--assert", "checks>=100%"]);
    for key in ["health: status == SERVING", "health: status == 1", "health: status != NOT_SERVING"] {
        assert_eq!(check(&r, key), (10, 0), "{key}: {}", r["checks"]);
    }
    assert_eq!(check(&r, "health: exists status"), (10, 0));
    assert_eq!(check(&r, "get: found == false"), (30, 0));
    assert_eq!(check(&r, "get: version < 1"), (30, 0));
    assert!(r.get("flows").is_none());
    server.shutdown();
}
