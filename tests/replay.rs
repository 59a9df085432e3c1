//! `run --replay` and `replay-info` on a real binary log: grpc-go's own file sink
//! (labs/servers/go `--binlog`, GRPC_BINARY_LOG_FILTER='*'), recorded under a known workload
//! of two methods with varied payloads and a mix of statuses and, beside it, streams of each
//! kind, then replayed against a fresh server (itself logging, so the streams' times as it
//! saw them are compared with the log's); and broken logs refused in one line.
mod common;

use common::lab_process::LabProcess;
use rpcmeter::experiments::servers::{self, Built, Runtime, Server};
use rpcmeter::replay::calls::{Call, Calls, Limits};
use rpcmeter::replay::log::{Entries, Framing};
use rpcmeter::replay::source::Skip;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Four echoes for every two puts; the echoes' records cycle: 1, ~300 and ~2000 bytes, and one
/// answered UNAVAILABLE (14) by `--echo-status`; the puts' values are 2 or 600 bytes.
const MIX: &str = r#"
[[call]]
name = "echo"
method = "EchoService/echo"
data = '[{"content":"a"},{"content":"{{randomString 300}}"},{"content":"{{randomString 2000}}"},{"content":"status:14"}]'
weight = 4

[[call]]
name = "put"
method = "rpcmeter.lab.v1.Storage/PutValue"
data = '[{"key":"k{{.RequestNumber}}","value":"aGk="},{"key":"big{{.RequestNumber}}","value":"{{randomString 800}}"}]'
weight = 2
"#;

const ECHO: &str = "/EchoService/echo";
const PUT: &str = "/rpcmeter.lab.v1.Storage/PutValue";
const UPLOAD: &str = "/rpcmeter.lab.v1.Streaming/Upload";
const BIDI: &str = "/rpcmeter.lab.v1.Streaming/Echo";
const SUBSCRIBE: &str = "/rpcmeter.lab.v1.Streaming/Subscribe";

/// Streams recorded beside the workload, one method each, one stream at a time (so that a
/// method's calls replay in the order they were logged): a client stream and a ping-pong bidi
/// stream of messages 100 ms apart, and server streams of 4 chunks 20 ms apart.
const STREAMS: [(&str, &str, &str); 3] = [
    (
        "rpcmeter.lab.v1.Streaming/Upload",
        r#"[{"payload":"aGk=","seq":1},{"payload":"aGVsbG8gd29ybGQ=","seq":2}]"#,
        "--stream-call-count=4 --stream-interval=100ms",
    ),
    (
        "rpcmeter.lab.v1.Streaming/Echo",
        r#"[{"payload":"cGluZw==","seq":7}]"#,
        "--stream-call-count=3 --stream-interval=100ms",
    ),
    ("rpcmeter.lab.v1.Streaming/Subscribe", r#"{"count":4,"size":100,"interval_us":20000}"#, "--stream-call-count=4"),
];
const SPEED: u32 = 2;

fn rpcmeter() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
}

/// Runs to the end: exit code, stdout, stderr.
fn outcome(mut cmd: Command) -> (Option<i32>, String, String) {
    let out = cmd.stdin(std::process::Stdio::null()).output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

fn run_ok(cmd: Command) -> String {
    let (code, stdout, stderr) = outcome(cmd);
    assert_eq!(code, Some(0), "{stderr}");
    stdout
}

/// The grpc-go server, built once per version of its sources (None, said, without Go).
fn go_server() -> Option<Built> {
    if Command::new("go").arg("version").output().is_err() {
        eprintln!("skipped: no Go toolchain (labs/servers/go needs one)");
        return None;
    }
    Some(servers::build(Runtime::Go).unwrap_or_else(|why| panic!("{why}")))
}

/// What a Go server said after its first line: its binary log's path (with --binlog) and
/// its own count of calls received, by method.
fn server_said(rest: &str) -> (Option<PathBuf>, BTreeMap<String, u64>) {
    let log = rest.lines().find_map(|l| l.strip_prefix("binary log: ")).map(PathBuf::from);
    (log, column(rest, 1))
}

/// A column of the Go server's table by method (1: calls received, 5: messages in), its
/// methods with calls only.
fn column(said: &str, at: usize) -> BTreeMap<String, u64> {
    let row = |l: &str| {
        let cells: Vec<&str> = l.split_whitespace().collect();
        let received: u64 = cells.get(1)?.parse().ok()?;
        Some((cells[0].to_string(), cells.get(at)?.parse().ok()?)).filter(|_| received > 0)
    };
    said.lines().filter(|l| l.starts_with('/')).filter_map(row).collect()
}

/// Every call of a log, in the order they started.
fn calls_of(path: &Path) -> Vec<Call> {
    let file = std::io::BufReader::new(std::fs::File::open(path).unwrap());
    let mut calls = Calls::new(Entries::new(file, None, 16 << 20).unwrap(), Limits::default());
    let mut all = Vec::new();
    while let Some(call) = calls.next_call().unwrap() {
        all.push(call);
    }
    all
}

fn count_by_method(calls: &[Call]) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for c in calls {
        *counts.entry(c.method.clone()).or_default() += 1;
    }
    counts
}

fn statuses_of(calls: &[Call], method: &str) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for c in calls.iter().filter(|c| c.method == method) {
        let code = tonic::Code::from_i32(c.end.expect("every call ended").status as i32);
        *counts.entry(rpcmeter::grpc::status::name(code).to_string()).or_default() += 1;
    }
    counts
}

/// What a replay gave: its result, the server's own count of calls by method, the details'
/// CSV, all the server said, and the server's own binary log of the replay.
struct Replayed {
    result: Value,
    received: BTreeMap<String, u64>,
    details: PathBuf,
    said: String,
    log: PathBuf,
}

/// `run --replay log` at --speed 2 against a fresh Go server, itself logging.
fn replay(built: &Built, log: &Path, dir: &Path, label: &str) -> Replayed {
    let logging = Built { server: format!("env GRPC_BINARY_LOG_FILTER='*' {}", built.server), client: None };
    let server = Server::start(Runtime::Go, &logging, label, &["--binlog".into(), "--echo-status".into()]).unwrap();
    let (details, result) = (dir.join(format!("{label}.csv")), dir.join(format!("{label}.json")));
    let mut cmd = rpcmeter();
    cmd.args(["run", "--plaintext", "--no-save", "--no-calibrate", "-q", "--replay"])
        .arg(log)
        .args(["--speed", &SPEED.to_string(), "--format", "json", "--csv-details"])
        .arg(&details)
        .arg("-o")
        .arg(&result)
        .arg(&server.addr);
    let (code, _, stderr) = outcome(cmd);
    let said = server.stop();
    let (server_log, received) = server_said(&said);
    let server_log = server_log.expect("the server names its binary log");
    let kept = dir.join(format!("{label}.server.binlog"));
    std::fs::copy(&server_log, &kept).unwrap();
    std::fs::remove_file(&server_log).unwrap();
    assert_eq!(code, Some(0), "{stderr}");
    let result = serde_json::from_str(&std::fs::read_to_string(&result).unwrap()).unwrap();
    Replayed { result, received, details, said, log: kept }
}

/// Every time a streaming call's client sent a message or closed its side, since its start:
/// the log's calls of `method` in the order they started.
fn stream_times(calls: &[Call], method: &str) -> Vec<Vec<std::time::Duration>> {
    calls
        .iter()
        .filter(|c| c.method == method)
        .map(|c| c.requests.iter().map(|r| r.at).chain(c.half_close).collect())
        .collect()
}

#[test]
fn a_log_grpc_go_recorded_replays_method_by_method_with_its_times_and_bytes() {
    let Some(built) = go_server() else { return };
    let dir = tempfile::tempdir().unwrap();
    let recording = Built { server: format!("env GRPC_BINARY_LOG_FILTER='*' {}", built.server), client: None };
    let server =
        Server::start(Runtime::Go, &recording, "go, logging", &["--binlog".into(), "--echo-status".into()]).unwrap();
    // Both services' protos at once: no reflection call (nor Stats call) enters the log.
    let both = dir.path().join("both.proto");
    std::fs::write(&both, "syntax = \"proto3\";\nimport \"echo.proto\";\nimport \"rpcmeter/lab/v1/lab.proto\";\n")
        .unwrap();
    let mix = dir.path().join("mix.toml");
    std::fs::write(&mix, MIX).unwrap();
    let protos = Path::new(env!("CARGO_MANIFEST_DIR")).join("proto");
    let mut cmd = rpcmeter();
    cmd.args(["run", "--plaintext", "--no-save", "--no-calibrate", "--no-server-stats", "-q", "--proto"])
        .arg(&both)
        .arg("-i")
        .arg(format!("{},{}", dir.path().display(), protos.display()))
        .arg("--workload")
        .arg(&mix)
        .args(["--rps", "400", "-n", "300", &server.addr]);
    // The streams at the same time, each method's one at a time.
    let streams: Vec<std::process::Child> = STREAMS
        .iter()
        .map(|(method, data, flags)| {
            let mut stream = rpcmeter();
            stream
                .args(["run", "--plaintext", "--no-save", "--no-calibrate", "--no-server-stats", "-q", "--proto"])
                .arg(&both)
                .arg("-i")
                .arg(format!("{},{}", dir.path().display(), protos.display()))
                .args(["--call", method, "-d", data])
                .args(flags.split(' '))
                .args(["-c", "1", "-n", "3"])
                .arg(&server.addr)
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    run_ok(cmd);
    for mut stream in streams {
        assert!(stream.wait().unwrap().success());
    }
    let (log, recorded_by_server) = server_said(&server.stop());
    let log = log.expect("the server names its binary log");
    let kept = dir.path().join("grpc-go.binlog");
    std::fs::copy(&log, &kept).unwrap();
    std::fs::remove_file(&log).unwrap();

    // The log holds the workload's calls, as the logging server counted them.
    let calls = calls_of(&kept);
    let by_method = count_by_method(&calls);
    let streamed = [(UPLOAD, 3), (BIDI, 3), (SUBSCRIBE, 3)].map(|(m, n)| (m.to_string(), n));
    let mut workload = BTreeMap::from([(ECHO.to_string(), 200), (PUT.to_string(), 100)]);
    workload.extend(streamed.clone());
    assert_eq!(by_method, workload);
    assert_eq!(by_method, recorded_by_server);
    assert!(calls.iter().all(|c| Skip::of(c).is_none()), "every call can be sent");
    assert_eq!(statuses_of(&calls, ECHO)["UNAVAILABLE"], 50);
    let info = run_ok({
        let mut cmd = rpcmeter();
        cmd.arg("replay-info").arg(&kept);
        cmd
    });
    assert!(info.contains("| /EchoService/echo | 200 | OK 150, UNAVAILABLE 50 |"), "{info}");
    assert!(info.contains("calls: 309 from") && info.contains("4-byte big-endian"), "{info}");

    assert!(
        info.contains("| client streaming | 4.0/1.0 |") && info.contains("| server streaming | 1.0/4.0 |"),
        "{info}"
    );

    let replayed = replay(&built, &kept, dir.path(), "replayed");
    let (result, received, details) = (&replayed.result, &replayed.received, &replayed.details);
    let name = |path: &str| path.trim_start_matches('/').to_string();
    for (method, n) in &by_method {
        let slice = &result["calls_by_name"][name(method)];
        assert_eq!(slice["requests"]["total"].as_u64(), Some(*n), "{method}: {slice}");
        assert_eq!(received[method], *n, "the fresh server's own count of {method}");
        // The same server answers the same calls alike; the log's own numbers are beside them.
        let statuses: BTreeMap<String, u64> = serde_json::from_value(slice["statuses"].clone()).unwrap();
        assert_eq!(statuses, statuses_of(&calls, method), "{method}");
        let recorded = &result["replay"]["recorded"][name(method)];
        assert_eq!(recorded["requests"]["total"].as_u64(), Some(*n), "{recorded}");
        let recorded_statuses: BTreeMap<String, u64> = serde_json::from_value(recorded["statuses"].clone()).unwrap();
        assert_eq!(recorded_statuses, statuses);
        // The logged latency as the server logged it (trailer - header), to the histogram's 0.1 %.
        let logged_max = calls.iter().filter(|c| &c.method == method).map(|c| c.end.unwrap().after).max().unwrap();
        let shown = recorded["latency_us"]["max"].as_f64().unwrap();
        let want = logged_max.as_nanos() as f64 / 1e3;
        assert!((shown - want).abs() <= want * 0.001 + 0.001, "{method}: recorded max {shown} µs, logged {want} µs");
    }
    // The HTML report shows the two side by side.
    let html = dir.path().join("replayed.html");
    let mut report = rpcmeter();
    report.arg("report").arg(dir.path().join("replayed.json")).arg("-o").arg(&html);
    run_ok(report);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("<h3>Recorded vs replayed</h3>")
            && page.contains("<td>EchoService/echo</td><td class=\"n\">200 / 200</td>")
    );
    // Payload bytes: what the log holds of each request is what went out.
    let logged_bytes: u64 = calls.iter().map(|c| c.request_bytes()).sum();
    assert_eq!(result["replay"]["payload_bytes_logged"].as_u64(), Some(logged_bytes));
    assert_eq!(result["replay"]["payload_bytes_sent"].as_u64(), Some(logged_bytes));
    assert_eq!(result["requests"]["unsent"].as_u64(), Some(0));

    // Each call was due at its logged offset from the first call, halved (--speed 2), to 1 µs.
    let text = std::fs::read_to_string(details).unwrap();
    let mut rows = csv::Reader::from_reader(text.as_bytes());
    let header = rows.headers().unwrap().clone();
    let at = header.iter().position(|h| h == "intended").unwrap();
    let mut intended: Vec<i128> = rows.records().map(|r| r.unwrap()[at].parse().unwrap()).collect();
    intended.sort_unstable();
    let mut logged: Vec<i128> = calls.iter().map(|c| c.start.as_nanos() as i128).collect();
    logged.sort_unstable();
    assert_eq!(intended.len(), logged.len());
    for (k, (i, l)) in intended.iter().zip(&logged).enumerate() {
        let (sent, want) = (i - intended[0], (l - logged[0]) / SPEED as i128);
        assert!((sent - want).abs() <= 1_000, "call {k}: due at +{sent} ns, logged +{} ns / 2 = {want}", l - logged[0]);
    }

    // Streams: each message of the client and its close as logged, and every answer counted.
    let client_messages: u64 = calls.iter().filter(|c| !c.is_unary()).map(|c| c.requests.len() as u64).sum();
    let server_messages: u64 = calls.iter().filter(|c| !c.is_unary()).map(|c| c.responses).sum();
    assert_eq!((client_messages, server_messages), (3 * 4 + 3 * 3 + 3, 3 + 3 * 3 + 3 * 4));
    assert_eq!(result["messages"]["sent"].as_u64(), Some(client_messages), "{}", result["messages"]);
    assert_eq!(result["messages"]["received"].as_u64(), Some(server_messages), "{}", result["messages"]);
    let messages_in = column(&replayed.said, 5);
    for (method, _) in &streamed {
        let logged: u64 = calls.iter().filter(|c| &c.method == method).map(|c| c.requests.len() as u64).sum();
        assert_eq!(messages_in[method], logged, "{method}: messages the fresh server received");
    }
    // The fresh server's log of the replay has each stream's messages and close at the logged
    // times since the call's start, halved. Each call's times are taken against its own median
    // deviation (the server logs the call's start when it gets to it, late now and then on a
    // busy machine). Tolerance, from the log: half its median gap between two messages of a
    // stream, halved (the test's own interval, 100 ms, makes the gaps; a busy machine makes a
    // few of them short); the median of the deviations stays within it (a message sent at
    // once, or not sped up, is a gap off).
    let again = calls_of(&replayed.log);
    let mut gaps = Vec::new();
    let mut deviations = Vec::new();
    for method in [UPLOAD, BIDI] {
        let (logged, sent) = (stream_times(&calls, method), stream_times(&again, method));
        assert_eq!(logged.iter().map(Vec::len).collect::<Vec<_>>(), sent.iter().map(Vec::len).collect::<Vec<_>>());
        for (logged, sent) in logged.iter().zip(&sent) {
            let messages = &logged[..logged.len() - 1];
            gaps.extend(messages.windows(2).map(|w| (w[1] - w[0]) / SPEED));
            let mut call: Vec<i128> =
                logged.iter().zip(sent).map(|(l, s)| s.as_nanos() as i128 - (*l / SPEED).as_nanos() as i128).collect();
            let mut sorted = call.clone();
            sorted.sort_unstable();
            let median = sorted[sorted.len() / 2];
            call.iter_mut().for_each(|d| *d = (*d - median).abs());
            deviations.extend(call.into_iter().zip(logged).map(|(d, at)| (d, method, *at)));
        }
    }
    gaps.sort_unstable();
    let tolerance = (gaps[gaps.len() / 2].as_nanos() / 2) as i128;
    deviations.sort_unstable();
    let median = deviations[deviations.len() / 2];
    assert!(median.0 <= tolerance, "median deviation {} ns, tolerance {tolerance}: {deviations:?}", median.0);

    // The same entries written varint-delimited, as grpc-java's examples write them.
    let varint = dir.path().join("varint.binlog");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&varint).unwrap());
    let mut entries =
        Entries::new(std::io::BufReader::new(std::fs::File::open(&kept).unwrap()), None, 16 << 20).unwrap();
    while let Some(entry) = entries.next_entry().unwrap() {
        Framing::Varint.write(&mut out, &entry).unwrap();
    }
    drop(out);
    let again = replay(&built, &varint, dir.path(), "varint");
    let (again, received) = (&again.result, &again.received);
    assert!(again["replay"]["framing"].as_str().unwrap().starts_with("varint"), "{}", again["replay"]);
    for (method, n) in &by_method {
        assert_eq!(again["calls_by_name"][name(method)]["requests"]["total"].as_u64(), Some(*n), "{method}");
        assert_eq!(received[method], *n);
    }
    assert_eq!(again["replay"]["payload_bytes_sent"].as_u64(), Some(logged_bytes));
}

/// A small log of `n` unary echo calls 1 ms apart, each with `payload` as its request.
fn small_log(n: u64, truncated: bool) -> Vec<u8> {
    mixed_log(n, truncated, &[(ECHO, b"\n\x02hi")])
}

/// A log of `n` unary calls 1 ms apart, of `methods` in turn (each with its request), every
/// fifth logged UNAVAILABLE, the logged latencies 100 µs to 700 µs.
fn mixed_log(n: u64, truncated: bool, methods: &[(&str, &[u8])]) -> Vec<u8> {
    use rpcmeter::replay::proto::grpc_log_entry::{EventType, Payload};
    use rpcmeter::replay::proto::{ClientHeader, GrpcLogEntry, Message, Trailer};
    let entry = |call: u64, ns: u64, kind: EventType, payload: Option<Payload>| GrpcLogEntry {
        timestamp: Some(prost_types::Timestamp { seconds: 1_700_000_000, nanos: ns as i32 }),
        call_id: call,
        sequence_id_within_call: 1,
        r#type: kind as i32,
        logger: 2,
        payload_truncated: truncated && kind == EventType::ClientMessage,
        payload,
        peer: None,
    };
    let mut out = Vec::new();
    for call in 1..=n {
        let ns = call * 1_000_000;
        let (method, request) = methods[call as usize % methods.len()];
        let header = ClientHeader { method_name: method.into(), ..Default::default() };
        let message = Message { length: request.len() as u32, data: request.to_vec() };
        let status = if call % 5 == 0 { 14 } else { 0 };
        let trailer = Trailer { status_code: status, ..Default::default() };
        for e in [
            entry(call, ns, EventType::ClientHeader, Some(Payload::ClientHeader(header))),
            entry(call, ns + 10, EventType::ClientMessage, Some(Payload::Message(message))),
            entry(call, ns + 100_000 * (call % 7 + 1), EventType::ServerTrailer, Some(Payload::Trailer(trailer))),
        ] {
            Framing::Be32.write(&mut out, &e).unwrap();
        }
    }
    out
}

#[test]
fn truncated_garbage_and_endless_logs_are_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let good = small_log(20, false);
    let cut = dir.path().join("cut.binlog");
    std::fs::write(&cut, &good[..good.len() - 7]).unwrap();
    let noise = dir.path().join("noise.binlog");
    std::fs::write(&noise, (0..100_000u32).map(|i| (i.wrapping_mul(2654435761) >> 11) as u8).collect::<Vec<_>>())
        .unwrap();
    let all_cut = dir.path().join("all-cut.binlog");
    std::fs::write(&all_cut, small_log(5, true)).unwrap();
    let refused = |args: &[&std::ffi::OsStr], why: &str| {
        let mut cmd = rpcmeter();
        cmd.args(args);
        let (code, _, stderr) = outcome(cmd);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(why) && !stderr.contains("panicked"), "{args:?}: {stderr}");
    };
    let os = |s: &'static str| std::ffi::OsStr::new(s);
    for info in [true, false] {
        let run = |file: &Path| -> Vec<&std::ffi::OsStr> {
            let file = Box::leak(file.as_os_str().to_owned().into_boxed_os_str());
            match info {
                true => vec![os("replay-info"), file],
                false => vec![os("run"), os("--plaintext"), os("--no-save"), os("--replay"), file, os("127.0.0.1:1")],
            }
        };
        refused(&run(&cut), "truncated");
        refused(&run(&noise), "entry 1 at byte 0");
    }
    // Endless input: zeros are no entry (replay-info reads them), and run --replay reads
    // only files it can read twice.
    refused(&[os("replay-info"), os("/dev/zero")], "call_id 0");
    refused(&[os("replay-info"), os("/dev/urandom")], "entry 1 at byte 0");
    refused(&[os("run"), os("--plaintext"), os("--replay"), os("/dev/zero"), os("127.0.0.1:1")], "not a regular file");
    // Nothing left to send once the truncated messages are skipped: refused before connecting.
    refused(
        &[os("run"), os("--plaintext"), os("--no-save"), os("--replay"), all_cut.as_os_str(), os("127.0.0.1:1")],
        "no call of its 5 can be sent (5 with a message cut",
    );
}

/// `run --replay` against `addr`, with `args` (--shards): its JSON result, also written to
/// `out` when given.
fn replay_json(log: &Path, addr: &str, args: &[&str], out: Option<&Path>) -> Value {
    let mut cmd = rpcmeter();
    cmd.args(["run", "--plaintext", "--no-save", "--no-calibrate", "-q", "--format", "json", "--replay"])
        .arg(log)
        .args(args)
        .arg(addr);
    let text = run_ok(cmd);
    if let Some(out) = out {
        std::fs::write(out, &text).unwrap();
    }
    serde_json::from_str(&text).unwrap()
}

#[test]
fn a_sharded_replay_and_a_merge_keep_the_logs_own_numbers_method_by_method() {
    let lab = LabProcess::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("mixed.binlog");
    std::fs::write(&log, mixed_log(40, false, &[(ECHO, b"\n\x02hi"), (PUT, b"\n\x01k\x12\x01v")])).unwrap();
    let whole = replay_json(&log, &lab.addr, &[], None);
    // The rate of the log's schedule is its mean: 39 gaps of 1 ms.
    assert_eq!(whole["rps_target"], "1000", "{}", whole["load"]);
    let recorded = &whole["replay"]["recorded"];
    assert_eq!(recorded["EchoService/echo"]["requests"]["total"].as_u64(), Some(20), "{recorded}");
    assert_eq!(recorded["EchoService/echo"]["statuses"]["UNAVAILABLE"].as_u64(), Some(4), "{recorded}");

    // Two shards, each every other call: merged, the log's numbers are the whole run's.
    let sharded = replay_json(&log, &lab.addr, &["--shards", "2"], None);
    assert_eq!(sharded["shards"].as_array().map(Vec::len), Some(2));
    let merged = &sharded["replay"];
    assert_eq!(merged["recorded"], *recorded, "{merged}");
    for key in ["calls_in_log", "payload_bytes_logged", "payload_bytes_sent", "file", "schedule", "speed"] {
        assert_eq!(merged[key], whole["replay"][key], "{key}");
    }

    // Two runs merged: counts and bytes added, histograms merged, the one log counted once.
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    replay_json(&log, &lab.addr, &[], Some(&a));
    replay_json(&log, &lab.addr, &[], Some(&b));
    let mut cmd = rpcmeter();
    cmd.args(["merge", "--format", "json"]).arg(&a).arg(&b);
    let both: Value = serde_json::from_str(&run_ok(cmd)).unwrap();
    let merged = &both["replay"];
    assert_eq!(merged["calls_in_log"].as_u64(), Some(40), "{merged}");
    assert_eq!(
        merged["payload_bytes_logged"].as_u64().unwrap(),
        2 * whole["replay"]["payload_bytes_logged"].as_u64().unwrap()
    );
    for name in ["EchoService/echo", "rpcmeter.lab.v1.Storage/PutValue"] {
        let (one, two) = (&recorded[name], &merged["recorded"][name]);
        assert_eq!(two["requests"]["total"].as_u64(), one["requests"]["total"].as_u64().map(|n| 2 * n), "{name}");
        assert_eq!(two["requests"]["failed"].as_u64(), one["requests"]["failed"].as_u64().map(|n| 2 * n), "{name}");
        assert_eq!(two["latency_us"]["count"].as_u64(), one["latency_us"]["count"].as_u64().map(|n| 2 * n), "{name}");
        for stat in ["min", "p50", "p99", "max"] {
            assert_eq!(two["latency_us"][stat], one["latency_us"][stat], "{name} {stat}");
        }
    }
}

/// The opens of `file` by any process while `run` runs (inotify). An event the same as the
/// last one queued, still unread, is merged into it: the reads and closes watched beside the
/// opens keep one process's opens apart, but two processes opening it at one instant are
/// counted once (a sharded run's shards do: `bytes_read` counts them).
fn opens_while(file: &Path, run: impl FnOnce()) -> usize {
    use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
    let watch = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC).unwrap();
    inotify::add_watch(&watch, file, WatchFlags::OPEN | WatchFlags::ACCESS | WatchFlags::CLOSE_NOWRITE).unwrap();
    run();
    let mut buffer = vec![std::mem::MaybeUninit::uninit(); 1 << 16];
    let mut events = inotify::Reader::new(&watch, &mut buffer);
    let mut opens = 0;
    loop {
        match events.next() {
            Ok(event) => {
                assert!(!event.events().contains(ReadFlags::QUEUE_OVERFLOW), "more events than inotify queues");
                opens += event.events().contains(ReadFlags::OPEN) as usize;
            }
            Err(rustix::io::Errno::AGAIN) => return opens,
            Err(e) => panic!("inotify: {e}"),
        }
    }
}

/// `rpcmeter ARGS`, run to its end: its output, and the bytes it and every process it started
/// read (Linux's `rchar` in /proc/PID/io, of a shell that waited for it: a process's count
/// takes in each child's as the child is waited for).
fn bytes_read(args: &[&std::ffi::OsStr]) -> (String, u64) {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", r#""$@" && grep '^rchar:' /proc/$$/io >&2"#, "sh", env!("CARGO_BIN_EXE_rpcmeter")]).args(args);
    let (code, stdout, stderr) = outcome(cmd);
    assert_eq!(code, Some(0), "{stderr}");
    let read = stderr.lines().last().and_then(|l| l.strip_prefix("rchar:")).map(|n| n.trim().parse().unwrap());
    (stdout, read.unwrap_or_else(|| panic!("no rchar: {stderr}")))
}

/// The log is read whole once before its calls are sent, however many runs send them: a
/// sweep's steps share the first step's scan, and the parent of `run --shards` hands its scan
/// to each shard. Before, each step and each shard read the log whole again (a 2 GiB log:
/// seconds each): a sweep of 3 steps opened it 6 times, `run --shards 2` read it 5 times.
#[test]
fn a_sweep_and_a_sharded_replay_read_the_log_whole_once() {
    let lab = LabProcess::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    // More calls than a run reads ahead of its workers (source.rs AHEAD): a step's pool of
    // them never starts over, which would open the log again.
    let pool = dir.path().join("pool.binlog");
    std::fs::write(&pool, small_log(1000, false)).unwrap();
    let opens = opens_while(&pool, || {
        let mut cmd = rpcmeter();
        cmd.args(["sweep", "--clients", "1..3", "run", "--plaintext", "--no-save", "--no-calibrate", "-q"])
            .args(["--format", "json", "-n", "10", "--replay"])
            .arg(&pool)
            .arg(&lab.addr);
        let steps: Value = serde_json::from_str(&run_ok(cmd)).unwrap();
        assert_eq!(steps["steps"].as_array().map(Vec::len), Some(3), "{steps}");
    });
    assert_eq!(opens, 1 + 3, "a scan, then each step's calls");

    // 64 echoes of 64 KiB: 4 MiB of log, far above what the rest of the run reads (its
    // answers, the shards' results).
    let mut echo = b"\n\x80\x80\x04".to_vec();
    echo.resize(echo.len() + (64 << 10), b'a');
    let log = dir.path().join("big.binlog");
    std::fs::write(&log, mixed_log(64, false, &[(ECHO, &echo)])).unwrap();
    let size = std::fs::metadata(&log).unwrap().len();
    let os = |s: &'static str| std::ffi::OsStr::new(s);
    let (out, read) = bytes_read(&[
        os("run"),
        os("--plaintext"),
        os("--no-save"),
        os("--no-calibrate"),
        os("-q"),
        os("--format"),
        os("json"),
        os("--shards"),
        os("2"),
        os("--replay"),
        log.as_os_str(),
        std::ffi::OsStr::new(&lab.addr),
    ]);
    let sharded: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(sharded["requests"]["ok"].as_u64(), Some(64), "{}", sharded["requests"]);
    let times = read as f64 / size as f64;
    assert!((3.0..4.0).contains(&times), "the log read {times:.2} times: the parent's scan, then each shard's calls");
}

/// One logged event of a call: its time (ns into the log), kind and payload.
type Event =
    (u64, rpcmeter::replay::proto::grpc_log_entry::EventType, Option<rpcmeter::replay::proto::grpc_log_entry::Payload>);

/// A log of `calls` (call ids from 1), each its events, as grpc-go's client logs them.
fn log_of(calls: &[Vec<Event>]) -> Vec<u8> {
    use rpcmeter::replay::proto::GrpcLogEntry;
    let mut out = Vec::new();
    for (id, events) in calls.iter().enumerate() {
        for (ns, kind, payload) in events.iter().cloned() {
            let entry = GrpcLogEntry {
                timestamp: Some(prost_types::Timestamp { seconds: 1_700_000_000, nanos: ns as i32 }),
                call_id: id as u64 + 1,
                sequence_id_within_call: 1,
                r#type: kind as i32,
                logger: 1,
                payload_truncated: false,
                payload,
                peer: None,
            };
            Framing::Be32.write(&mut out, &entry).unwrap();
        }
    }
    out
}

/// How a logged call ended: with the server's status (OK), or with the client's cancel, after
/// it closed its side or while it was still sending.
#[derive(Clone, Copy, PartialEq)]
enum Ended {
    Ok,
    Cancelled,
    CancelledSending,
}

/// A call of `method` from `at` (ns): its client's `messages` (each with when it left, since
/// `at`) and its half-close with the last one (none when cancelled while sending), `answers`
/// messages of the server, and its end `after` the start.
fn logged_call(at: u64, method: &str, messages: &[(u64, &[u8])], answers: u64, after: u64, end: Ended) -> Vec<Event> {
    use rpcmeter::replay::proto::grpc_log_entry::{EventType, Payload};
    use rpcmeter::replay::proto::{ClientHeader, Message, Trailer};
    let message = |data: &[u8]| Some(Payload::Message(Message { length: data.len() as u32, data: data.to_vec() }));
    let header = ClientHeader { method_name: method.into(), ..Default::default() };
    let mut events = vec![(at, EventType::ClientHeader, Some(Payload::ClientHeader(header)))];
    events.extend(messages.iter().map(|(since, data)| (at + since, EventType::ClientMessage, message(data))));
    if end != Ended::CancelledSending {
        events.push((at + messages.last().unwrap().0, EventType::ClientHalfClose, None));
    }
    events
        .extend((1..=answers).map(|i| (at + after * i / (answers + 1), EventType::ServerMessage, message(b"\n\x01x"))));
    events.push(match end {
        Ended::Ok => (at + after, EventType::ServerTrailer, Some(Payload::Trailer(Trailer::default()))),
        Ended::Cancelled | Ended::CancelledSending => (at + after, EventType::Cancel, None),
    });
    events
}

/// A stream the log ended CANCELLED (the client's cancel) is reset by the replay at its logged
/// time: OK to the client, as --cancel-after's streams are, and cancelled to the server, whose
/// count then has an OK call fewer. That is no disagreement between the two: before, the server
/// cross-check said "the server counted 7 calls (6 ok) where the client sent 7 (7 ok)" in any
/// replay whose methods were not all server streams. A client stream cancelled while its client
/// was still sending is reset too, at its time, not closed with its last message (the server
/// then answered it OK 30 ms before).
#[test]
fn a_stream_reset_as_the_log_ended_it_is_no_disagreement_with_the_servers_count() {
    let lab = LabProcess::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("cancelled.binlog");
    const MS: u64 = 1_000_000;
    // Chunks of 8 bytes 1 ms apart until the client cancels, which it did at 30 ms.
    let endless: &[u8] = b"\x10\x08\x18\xe8\x07";
    let mut calls = vec![
        logged_call(0, SUBSCRIBE, &[(10, endless)], 3, 30 * MS, Ended::Cancelled),
        logged_call(MS, UPLOAD, &[(10, b"\n\x02hi"), (10 * MS, b"\n\x02hi")], 1, 11 * MS, Ended::Ok),
        logged_call(2 * MS, UPLOAD, &[(10, b"\n\x02hi"), (10 * MS, b"\n\x02hi")], 0, 40 * MS, Ended::CancelledSending),
    ];
    calls.extend((0..5).map(|i| logged_call((60 + i) * MS, ECHO, &[(10, b"\n\x02hi")], 1, MS / 2, Ended::Ok)));
    std::fs::write(&log, log_of(&calls)).unwrap();
    let r = replay_json(&log, &lab.addr, &[], None);
    assert_eq!((r["requests"]["total"].as_u64(), r["statuses"]["OK"].as_u64()), (Some(8), Some(8)), "{r}");
    // The server stream is dropped at the reset, a failed call to the server; whether the lab
    // counts the client stream failed is a race (hyper ends a request body reset with CANCEL as
    // if it had ended, and the lab's answer may come before tonic sees the reset).
    let server = &r["server"];
    let (ok, failed) = (server["ok"].as_u64().unwrap(), server["failed"].as_u64().unwrap());
    assert!(server["received"] == 8 && ok + failed == 8 && (1..=2).contains(&failed), "{server}");
    // The client stream lasted to its reset at 40 ms: closed with its last message at 10 ms, it
    // was answered then (before: 21.9 and 22.6 ms, on a machine at load 9).
    let upload = &r["calls_by_name"]["rpcmeter.lab.v1.Streaming/Upload"]["latency_us"];
    assert!(upload["max"].as_f64().unwrap() >= 40_000.0, "{upload}");
    let warnings = r["warnings"].as_array().cloned().unwrap_or_default();
    assert!(warnings.iter().all(|w| w["kind"] != "server_count"), "{warnings:?}");
}
