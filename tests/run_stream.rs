//! Streaming calls in `rpcmeter run`: each kind against the lab, with the client's streams and
//! messages equal to the lab's own count (Stats); a server streaming method nobody here wrote
//! (tonic-health's Watch); a server that ends streams with its own statuses.
mod common;
use rpcmeter::lab::proto::lab::{MethodStats, StatsReply};
use rpcmeter::lab::{LabConfig, LabServer};
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

fn run(addr: &str, args: &[&str]) -> Value {
    run_measuring(addr, &[&["--no-calibrate"], args].concat())
}

/// As `run`, with the client's hiccups measured (`client.hiccup_us`), for a test whose
/// tolerance is how long the client was held up.
fn run_measuring(addr: &str, args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .args(["run", "--plaintext", "--quiet", "--no-save", "--format", "json", addr])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn lab() -> LabServer {
    LabServer::start(LabConfig { addr: "127.0.0.1:0".into(), ..LabConfig::default() }).unwrap()
}

fn method<'a>(stats: &'a StatsReply, name: &str) -> &'a MethodStats {
    let path = format!("/rpcmeter.lab.v1.Streaming/{name}");
    stats.methods.iter().find(|m| m.method == path).unwrap_or_else(|| panic!("no {path} in {stats:?}"))
}

#[test]
fn bidi_ping_pong_counts_streams_and_messages_as_the_lab_does() {
    let server = lab();
    let addr = server.local_addr().to_string();
    // Three records replayed message by message within each stream, 25 messages a stream.
    let data = r#"[{"payload":"YQ=="},{"payload":"YmI=","seq":1},{"payload":"Y2Nj","seq":2}]"#;
    let dir = tempfile::tempdir().unwrap();
    let prometheus = format!("prometheus={}", dir.path().join("run.prom").display());
    let influx = format!("influx={}", dir.path().join("run.influx").display());
    let call = ["--call", "rpcmeter.lab.v1.Streaming/Echo", "-d", data, "--stream-call-count", "25"];
    let r = run(&addr, &[&call[..], &["-c", "4", "-n", "40", "--export", &prometheus, "--export", &influx]].concat());
    let stats = server.shutdown();
    let echo = method(&stats, "Echo");
    assert_eq!(r["requests"]["ok"], 40);
    assert_eq!((echo.received, echo.ok), (40, 40));
    let m = &r["messages"];
    assert_eq!(m["kind"], "bidirectional streaming");
    assert_eq!((m["sent"].as_u64(), m["received"].as_u64()), (Some(1000), Some(1000)));
    assert_eq!((echo.messages_in, echo.messages_out), (1000, 1000));
    // One round trip per message, each shorter than its whole stream.
    assert_eq!(m["round_trip_us"]["count"], 1000);
    assert!(m["round_trip_us"]["max"].as_f64() <= r["latency_us"]["max"].as_f64(), "{m}");
    assert!(m["sent_per_s"].as_f64().unwrap() > 0.0);
    // The interval series counts the same messages.
    let per_interval = |key: &str| r["intervals"].as_array().unwrap().iter().map(|iv| iv[key].as_u64().unwrap()).sum();
    assert_eq!((per_interval("messages_sent"), per_interval("messages_received")), (1000u64, 1000u64));
    // The formats other tools read carry them too.
    let prom = std::fs::read_to_string(dir.path().join("run.prom")).unwrap();
    let sent = prom.lines().find(|l| l.starts_with("rpcmeter_run_messages_sent{")).unwrap();
    assert!(sent.ends_with(" 1000"), "{sent}");
    assert!(prom.contains("rpcmeter_run_round_trip_seconds_count{"), "{prom}");
    let line = std::fs::read_to_string(dir.path().join("run.influx")).unwrap();
    assert!(line.contains(",messages_sent=1000i,messages_received=1000i,"), "{line}");
}

#[test]
fn client_streams_send_each_record_once_unless_counted() {
    let server = lab();
    let addr = server.local_addr().to_string();
    let data = r#"[{"payload":"YQ=="},{"payload":"YQ=="},{"payload":"YQ=="},{"payload":"YQ=="},{"payload":"YQ=="}]"#;
    let once = run(&addr, &["--call", "rpcmeter.lab.v1.Streaming/Upload", "-d", data, "-c", "3", "-n", "30"]);
    let counted = run(
        &addr,
        &[
            "--call",
            "rpcmeter.lab.v1.Streaming/Upload",
            "-d",
            data,
            "--stream-call-count",
            "12",
            "--stream-interval",
            "2ms",
            "-c",
            "2",
            "-n",
            "4",
        ],
    );
    let stats = server.shutdown();
    let upload = method(&stats, "Upload");
    assert_eq!(once["messages"]["sent"], 150);
    assert_eq!(once["messages"]["received"], 30, "one summary per stream");
    assert_eq!(counted["messages"]["sent"], 48);
    assert_eq!((upload.received, upload.ok), (34, 34));
    assert_eq!((upload.messages_in, upload.messages_out), (198, 34));
    // 12 messages 2 ms apart: no stream can be shorter than the 11 gaps.
    assert!(counted["latency_us"]["min"].as_f64().unwrap() >= 22_000.0, "{}", counted["latency_us"]);
    assert_eq!(counted["messages"].get("round_trip_us"), None, "no round trips on a client stream");
}

#[test]
fn server_streams_count_what_arrives_and_the_time_to_the_first_message() {
    let server = lab();
    let addr = server.local_addr().to_string();
    let whole = run(
        &addr,
        &["--call", "rpcmeter.lab.v1.Streaming/Subscribe", "-d", r#"{"count":20,"size":64}"#, "-c", "5", "-n", "25"],
    );
    let whole_stats = server.stats();
    // An endless subscription ended by the client after 7 messages: OK to the client,
    // cancelled to the server.
    let cut = run(
        &addr,
        &[
            "--call",
            "rpcmeter.lab.v1.Streaming/Subscribe",
            "-d",
            r#"{"count":0,"size":8,"interval_us":1000}"#,
            "--stream-call-count",
            "7",
            "-c",
            "2",
            "-n",
            "6",
        ],
    );
    let stats = server.shutdown();
    let subscribe = method(&whole_stats, "Subscribe");
    assert_eq!((subscribe.received, subscribe.ok), (25, 25));
    assert_eq!(whole["messages"]["received"], 500);
    assert_eq!(subscribe.messages_out, 500);
    assert_eq!(whole["messages"]["sent"], 25);
    assert_eq!(subscribe.messages_in, 25);
    assert_eq!(whole["messages"]["first_message_us"]["count"], 25);
    assert!(
        whole["messages"]["first_message_us"]["max"].as_f64() <= whole["latency_us"]["max"].as_f64(),
        "the first message comes before the stream's end"
    );

    assert_eq!(cut["requests"]["ok"], 6);
    assert_eq!(cut["messages"]["received"], 42);
    let subscribe = method(&stats, "Subscribe");
    assert_eq!(subscribe.received, 31);
    assert_eq!(subscribe.failed, 6, "the lab counts a stream its client cancelled as failed");
    // 7 messages 1 ms apart take at least the 6 gaps.
    assert!(cut["latency_us"]["min"].as_f64().unwrap() >= 6_000.0);
}

#[test]
fn a_stream_call_duration_ends_each_stream_on_time() {
    let server = lab();
    let addr = server.local_addr().to_string();
    let r = run_measuring(
        &addr,
        &[
            "--call",
            "rpcmeter.lab.v1.Streaming/Echo",
            "--stream-call-duration",
            "200ms",
            "--stream-interval",
            "5ms",
            "-c",
            "2",
            "-n",
            "4",
        ],
    );
    let stats = server.shutdown();
    let echo = method(&stats, "Echo");
    assert_eq!((echo.received, echo.ok), (4, 4));
    let latency = &r["latency_us"];
    assert!(latency["min"].as_f64().unwrap() >= 200_000.0, "{latency}");
    // A message every 5 ms for 200 ms: never more than 41 a stream. Each waits for its echo
    // (ping-pong) and then 5 ms: about 40 on a quiet machine, fewer when the client is held
    // up. So at least as many as fit in 200 ms at 5 ms plus tokio's 1 ms timer granularity,
    // the slowest round trip and the client's longest hiccup, both measured by the run itself
    // (a load of 20 on 2 cores left room for 6 a stream).
    let sent = r["messages"]["sent"].as_u64().unwrap();
    let round_trip = Duration::from_secs_f64(r["messages"]["round_trip_us"]["max"].as_f64().unwrap() / 1e6);
    let slowest = Duration::from_millis(6) + round_trip + common::client_hiccup_max(&r);
    let fit = (0.2 / slowest.as_secs_f64()).floor() as u64;
    assert!((4 * fit.max(1)..=4 * 41).contains(&sent), "{sent} sent; {fit} a stream fit at {slowest:?} each");
    assert_eq!((echo.messages_in, echo.messages_out), (sent, sent));
}

/// grpc.health.v1.Health/Watch as tonic-health serves it: the current status at once, then
/// one message per change, never an end of its own.
#[test]
fn health_watch_of_tonic_health_is_a_server_stream() {
    use tonic_health::ServingStatus;
    let dir = tempfile::tempdir().unwrap();
    let protoset = dir.path().join("health.protoset");
    std::fs::write(&protoset, tonic_health::pb::FILE_DESCRIPTOR_SET).unwrap();
    let mut server = common::ThreadServer::start(|| {
        let (reporter, service) = tonic_health::server::health_reporter();
        // The status of "flappy" changes every 10 ms: each change is a message to watchers.
        tokio::spawn(async move {
            for i in 0.. {
                let status = if i % 2 == 0 { ServingStatus::Serving } else { ServingStatus::NotServing };
                reporter.set_service_status("flappy", status).await;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
        tonic::service::Routes::new(service)
    });
    let addr = server.addr.to_string();
    let protoset = protoset.display().to_string();
    let watch = |extra: &[&str]| {
        let base = ["--protoset", protoset.as_str(), "--call", "grpc.health.v1.Health/Watch", "--no-server-stats"];
        run(&addr, &[&base[..], extra].concat())
    };
    let first = watch(&["-d", r#"{"service":"flappy"}"#, "--stream-call-count", "1", "-c", "4", "-n", "20"]);
    let three = watch(&["-d", r#"{"service":"flappy"}"#, "--stream-call-count", "3", "-c", "2", "-n", "4"]);
    let timed = watch(&["-d", r#"{"service":"flappy"}"#, "--stream-call-duration", "100ms", "-c", "1", "-n", "2"]);
    server.kill();

    assert_eq!(first["statuses"]["OK"], 20);
    assert_eq!(first["messages"]["received"], 20);
    assert_eq!(first["messages"]["first_message_us"]["count"], 20);
    // The first message, then two changes 10 ms apart: a stream lasts at least one change.
    assert_eq!(three["statuses"]["OK"], 4);
    assert_eq!(three["messages"]["received"], 12);
    assert!(three["latency_us"]["min"].as_f64().unwrap() >= 5_000.0, "{}", three["latency_us"]);
    // Watched for 100 ms: the first status and about ten changes each.
    assert_eq!(timed["statuses"]["OK"], 2);
    assert!(timed["latency_us"]["min"].as_f64().unwrap() >= 100_000.0);
    let received = timed["messages"]["received"].as_u64().unwrap();
    assert!((2 * 4..=2 * 12).contains(&received), "{received}");
}

/// A Streaming service written here, not the lab's: it ends streams with statuses of its own.
struct Refusing;

type Chunks = std::pin::Pin<Box<dyn futures::Stream<Item = Result<Chunk, tonic::Status>> + Send>>;
use rpcmeter::lab::proto::lab::{streaming_server, Chunk, SubscribeRequest, UploadSummary};

#[tonic::async_trait]
impl streaming_server::Streaming for Refusing {
    type SubscribeStream = Chunks;
    type EchoStream = Chunks;

    /// Refused before any message: a trailers-only answer.
    async fn subscribe(&self, _: tonic::Request<SubscribeRequest>) -> Result<tonic::Response<Chunks>, tonic::Status> {
        Err(tonic::Status::unavailable("no subscriptions today"))
    }

    /// Fails after the third message.
    async fn upload(
        &self,
        request: tonic::Request<tonic::Streaming<Chunk>>,
    ) -> Result<tonic::Response<UploadSummary>, tonic::Status> {
        let mut inbound = request.into_inner();
        let mut n = 0;
        while inbound.message().await?.is_some() {
            n += 1;
            if n == 3 {
                return Err(tonic::Status::invalid_argument("three is enough"));
            }
        }
        Ok(tonic::Response::new(UploadSummary { chunks: n, bytes: 0 }))
    }

    /// Echoes two messages, then ends the stream with PERMISSION_DENIED.
    async fn echo(
        &self,
        request: tonic::Request<tonic::Streaming<Chunk>>,
    ) -> Result<tonic::Response<Chunks>, tonic::Status> {
        use futures::StreamExt;
        let echoed = request
            .into_inner()
            .take(2)
            .chain(futures::stream::once(async { Err(tonic::Status::permission_denied("two is all you get")) }));
        Ok(tonic::Response::new(Box::pin(echoed)))
    }
}

#[test]
fn statuses_a_server_ends_streams_with_are_counted_per_stream() {
    let mut server =
        common::ThreadServer::start(|| tonic::service::Routes::new(streaming_server::StreamingServer::new(Refusing)));
    let addr = server.addr.to_string();
    let lab_proto = concat!(env!("CARGO_MANIFEST_DIR"), "/proto/rpcmeter/lab/v1/lab.proto");
    // Every stream fails, so the run exits 1; its JSON report is still written.
    let failing = |method: &str, extra: &[&str]| -> Value {
        let out = Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
            .args(["run", "--plaintext", "--quiet", "--no-save", "--no-calibrate", "--format", "json", &addr])
            .args(["--proto", lab_proto, "--call", &format!("rpcmeter.lab.v1.Streaming/{method}")])
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let subscribe = failing("Subscribe", &["-c", "2", "-n", "6"]);
    let upload = failing("Upload", &["--stream-call-count", "10", "-c", "2", "-n", "6"]);
    let echo = failing("Echo", &["--stream-call-count", "10", "-c", "2", "-n", "6"]);
    server.kill();

    assert_eq!(subscribe["statuses"]["UNAVAILABLE"], 6);
    assert_eq!(subscribe["errors"][0]["message"], "no subscriptions today");
    assert_eq!(subscribe["messages"]["received"], 0);
    assert_eq!(upload["statuses"]["INVALID_ARGUMENT"], 6);
    assert_eq!(upload["errors"][0]["message"], "three is enough");
    // Two answered pings per stream, then the server's end stops the third.
    assert_eq!(echo["statuses"]["PERMISSION_DENIED"], 6);
    assert_eq!(echo["errors"][0]["message"], "two is all you get");
    assert_eq!(echo["messages"]["received"], 12);
    assert_eq!(echo["messages"]["round_trip_us"]["count"], 12);
    // The third goes out unless the server's end is seen first.
    assert!((12..=18).contains(&echo["messages"]["sent"].as_u64().unwrap()), "{}", echo["messages"]);
}

#[test]
fn streaming_results_merge_their_messages_exactly() {
    let server = lab();
    let addr = server.local_addr().to_string();
    let dir = tempfile::tempdir().unwrap();
    let bidi = ["--call", "rpcmeter.lab.v1.Streaming/Echo", "--stream-call-count", "30", "-c", "2"];
    let a = run(&addr, &[&bidi[..], &["-n", "4"]].concat());
    let b = run(&addr, &[&bidi[..], &["-n", "6"]].concat());
    server.shutdown();
    let (a_file, b_file, merged_file) =
        (dir.path().join("a.json"), dir.path().join("b.json"), dir.path().join("merged.json"));
    std::fs::write(&a_file, a.to_string()).unwrap();
    std::fs::write(&b_file, b.to_string()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .arg("merge")
        .args([&a_file, &b_file])
        .arg("-o")
        .arg(&merged_file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let merged: Value = serde_json::from_str(&std::fs::read_to_string(&merged_file).unwrap()).unwrap();
    let m = &merged["messages"];
    assert_eq!(m["kind"], "bidirectional streaming");
    assert_eq!((m["sent"].as_u64(), m["received"].as_u64()), (Some(300), Some(300)));
    assert_eq!(m["round_trip_us"]["count"], 300);
    let max = |r: &Value| r["messages"]["round_trip_us"]["max"].as_f64().unwrap();
    assert_eq!(m["round_trip_us"]["max"].as_f64(), Some(max(&a).max(max(&b))));
}

/// A bidi server that answers no request and ends the stream OK once the client closes its
/// side, as grpc interop's FullDuplexCall does for requests without response parameters.
struct Silent;

#[tonic::async_trait]
impl streaming_server::Streaming for Silent {
    type SubscribeStream = Chunks;
    type EchoStream = Chunks;

    async fn subscribe(&self, _: tonic::Request<SubscribeRequest>) -> Result<tonic::Response<Chunks>, tonic::Status> {
        Err(tonic::Status::unimplemented("silent"))
    }

    async fn upload(
        &self,
        _: tonic::Request<tonic::Streaming<Chunk>>,
    ) -> Result<tonic::Response<UploadSummary>, tonic::Status> {
        Err(tonic::Status::unimplemented("silent"))
    }

    async fn echo(
        &self,
        request: tonic::Request<tonic::Streaming<Chunk>>,
    ) -> Result<tonic::Response<Chunks>, tonic::Status> {
        use futures::StreamExt;
        let unanswered = request.into_inner().filter_map(|_| async { None });
        Ok(tonic::Response::new(Box::pin(unanswered)))
    }
}

/// A ping-pong stream whose answer never comes: the stream's last request closes the
/// client's side (the server's end follows), its duration ends the wait (then our side
/// closes), and so does its deadline. A hang fails the test after COMMAND_LIMIT.
#[test]
fn a_ping_pong_stream_waits_no_longer_than_its_count_duration_or_deadline() {
    let mut server =
        common::ThreadServer::start(|| tonic::service::Routes::new(streaming_server::StreamingServer::new(Silent)));
    let addr = server.addr.to_string();
    let lab_proto = concat!(env!("CARGO_MANIFEST_DIR"), "/proto/rpcmeter/lab/v1/lab.proto");
    let echo = |extra: &[&str]| {
        let mut cmd = common::rpcmeter();
        cmd.args(["run", "--plaintext", "--quiet", "--no-save", "--no-calibrate", "--format", "json", &addr])
            .args(["--proto", lab_proto, "--call", "rpcmeter.lab.v1.Streaming/Echo", "-n", "2", "-c", "2"])
            .args(extra);
        let (code, stdout, stderr) = common::outcome(cmd);
        let r: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e} ({code:?}): {stderr}"));
        r
    };
    let one_each = echo(&[]);
    let timed = echo(&["--stream-call-count", "5", "--stream-call-duration", "300ms"]);
    let deadline = echo(&["--stream-call-count", "5", "--deadline", "300ms"]);
    server.kill();

    // One request each (-d's one record), sent with the end of the client's side.
    assert_eq!(one_each["statuses"]["OK"], 2, "{one_each}");
    assert_eq!((one_each["messages"]["sent"].as_u64(), one_each["messages"]["received"].as_u64()), (Some(2), Some(0)));
    // The first request's answer is awaited until the duration ends the stream: OK.
    assert_eq!(timed["statuses"]["OK"], 2, "{timed}");
    assert_eq!(timed["messages"]["sent"], 2);
    assert!(timed["latency_us"]["min"].as_f64().unwrap() >= 300_000.0, "{}", timed["latency_us"]);
    assert_eq!(deadline["statuses"]["DEADLINE_EXCEEDED"], 2, "{deadline}");
}

/// `--csv-details-header` and `--csv-details-trailer` carry a stream's response metadata as
/// they carry a unary call's: the headers and trailers of a whole stream, the headers alone of
/// a stream the client cancelled (it has no trailers).
#[test]
fn csv_details_carry_the_headers_and_trailers_of_streams() {
    let server = lab();
    let addr = server.local_addr().to_string();
    let dir = tempfile::tempdir().unwrap();
    let columns = |method: &str, extra: &[&str]| -> Vec<Vec<String>> {
        let csv = dir.path().join(format!("{method}.csv"));
        let call = format!("rpcmeter.lab.v1.Streaming/{method}");
        let args = ["--call", &call, "-c", "2", "-n", "4", "--csv-details", csv.to_str().unwrap()];
        let metadata = ["--csv-details-header", "content-type", "--csv-details-trailer", "grpc-status"];
        run(&addr, &[&args[..], &metadata, extra].concat());
        let text = std::fs::read_to_string(&csv).unwrap();
        let mut lines = text.lines();
        let head: Vec<&str> = lines.next().unwrap().split(',').collect();
        assert_eq!(head[head.len() - 2..], ["header:content-type", "trailer:grpc-status"], "{head:?}");
        lines.map(|l| l.split(',').rev().take(2).map(String::from).collect()).collect()
    };
    let whole = [String::from("0"), String::from("application/grpc")];
    for (method, extra) in
        [("Echo", &["--stream-call-count", "3"][..]), ("Upload", &[]), ("Subscribe", &["-d", r#"{"count":3}"#])]
    {
        let rows = columns(method, extra);
        assert_eq!(rows.len(), 4, "{method}");
        assert!(rows.iter().all(|r| r[..] == whole), "{method}: {rows:?}");
    }
    let cancelled = columns("Subscribe", &["-d", r#"{"count":0}"#, "--stream-call-count", "2"]);
    assert!(cancelled.iter().all(|r| r[..] == ["", "application/grpc"]), "{cancelled:?}");
    server.shutdown();
}

/// grpc interop's empty_stream: a stream that sends nothing, from an empty -d array, an
/// empty -D file or --stream-call-count 0; and what cannot be sent is refused in one line.
#[test]
fn an_empty_stream_sends_nothing_and_ends_ok() {
    let server = lab();
    let addr = server.local_addr().to_string();
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.json");
    std::fs::write(&empty, "").unwrap();
    let echo = ["--call", "rpcmeter.lab.v1.Streaming/Echo", "-c", "2", "-n", "4"];
    let from_array = run(&addr, &[&echo[..], &["-d", "[]"]].concat());
    let from_file = run(&addr, &[&echo[..], &["-D", empty.to_str().unwrap()]].concat());
    let upload = run(&addr, &["--call", "rpcmeter.lab.v1.Streaming/Upload", "--stream-call-count", "0", "-n", "4"]);
    let refused = |args: &[&str]| {
        let mut cmd = common::rpcmeter();
        cmd.args(["run", "--plaintext", "--quiet", "--no-save", "--no-calibrate", &addr]).args(args);
        let (code, _, stderr) = common::outcome(cmd);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        stderr
    };
    let subscribe = ["--call", "rpcmeter.lab.v1.Streaming/Subscribe"];
    let zero_received = refused(&[&subscribe[..], &["--stream-call-count", "0"]].concat());
    let nothing_to_send = refused(&[&echo[..], &["-d", "[]", "--stream-call-count", "3"]].concat());
    let unary_empty = refused(&["--call", "rpcmeter.lab.v1.TestService/Cpu", "-d", "[]"]);
    let stats = server.shutdown();

    for r in [&from_array, &from_file] {
        assert_eq!(r["statuses"]["OK"], 4, "{r}");
        assert_eq!((r["messages"]["sent"].as_u64(), r["messages"]["received"].as_u64()), (Some(0), Some(0)));
    }
    let lab_echo = method(&stats, "Echo");
    assert_eq!((lab_echo.ok, lab_echo.messages_in), (8, 0));
    // A client stream of nothing still gets its one summary.
    assert_eq!(upload["statuses"]["OK"], 4, "{upload}");
    assert_eq!((upload["messages"]["sent"].as_u64(), upload["messages"]["received"].as_u64()), (Some(0), Some(4)));
    assert!(zero_received.contains("--cancel-after begin"), "{zero_received}");
    assert!(nothing_to_send.contains("no message to send"), "{nothing_to_send}");
    assert!(unary_empty.contains("empty JSON array"), "{unary_empty}");
}

/// grpc interop's cancel_after_begin and cancel_after_first_response, and a cancel in time:
/// the client resets each stream at the point it chose; the stream is OK (the plan).
#[test]
fn cancel_after_begin_first_response_or_a_time_resets_each_stream() {
    let server = lab();
    let addr = server.local_addr().to_string();
    let call = |method: &str, extra: &[&str]| {
        let call = format!("rpcmeter.lab.v1.Streaming/{method}");
        run(&addr, &[&["--call", call.as_str(), "-c", "2", "-n", "4"][..], extra].concat())
    };
    let begin = call("Upload", &["--cancel-after", "begin", "--stream-call-count", "5"]);
    let first_bidi = call("Echo", &["--cancel-after", "first-response", "--stream-call-count", "5"]);
    let endless = r#"{"count":0,"size":8,"interval_us":1000}"#;
    let first_server = call("Subscribe", &["--cancel-after", "first-response", "-d", endless]);
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("timed.csv");
    let timed = call("Subscribe", &["--cancel-after", "50ms", "-d", endless, "--csv-details", csv.to_str().unwrap()]);
    let upload_first = {
        let mut cmd = common::rpcmeter();
        cmd.args(["run", "--plaintext", "--quiet", "--no-save", "--no-calibrate", &addr]).args([
            "--call",
            "rpcmeter.lab.v1.Streaming/Upload",
            "--cancel-after",
            "first-response",
        ]);
        common::outcome(cmd)
    };
    let stats = server.shutdown();

    let all_ok = |r: &Value| {
        assert_eq!((r["statuses"]["OK"].as_u64(), r["requests"]["total"].as_u64()), (Some(4), Some(4)), "{r}")
    };
    let messages = |r: &Value| (r["messages"]["sent"].as_u64().unwrap(), r["messages"]["received"].as_u64().unwrap());
    all_ok(&begin);
    assert_eq!(messages(&begin), (0, 0));
    all_ok(&first_bidi);
    assert_eq!(messages(&first_bidi), (4, 4), "one ping, one pong, then the reset");
    all_ok(&first_server);
    assert_eq!(messages(&first_server), (4, 4));
    all_ok(&timed);
    // The client's own resets are OK to it and cancelled to the server: no disagreement of
    // counts (before: "the server counted 4 calls (0 ok) where the client sent 4 (4 ok)").
    for r in [&begin, &first_bidi, &first_server, &timed] {
        let warnings = r["warnings"].as_array().cloned().unwrap_or_default();
        assert!(warnings.iter().all(|w| w["kind"] != "server_count"), "{warnings:?}");
    }
    assert!(timed["latency_us"]["min"].as_f64().unwrap() >= 50_000.0, "{}", timed["latency_us"]);
    assert!(messages(&timed).1 >= 4, "{}", timed["messages"]);
    // Dropped whole at its time, the stream still says what it received.
    let text = std::fs::read_to_string(&csv).unwrap();
    let bytes: Vec<u64> = text.lines().skip(1).map(|l| l.split(',').nth(5).unwrap().parse().unwrap()).collect();
    assert!(bytes.len() == 4 && bytes.iter().all(|b| *b >= 8 * 4), "{text}");
    let (code, _, stderr) = upload_first;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("client streaming"), "{stderr}");
    // What the server received: no message before the reset, one ping each. (Whether it
    // counts a stream OK or failed is a race: hyper ends a request body reset with CANCEL as
    // if it had ended, and the lab's answer may come before tonic sees the reset.)
    assert_eq!(method(&stats, "Upload").messages_in, 0);
    assert_eq!(method(&stats, "Echo").messages_in, 4);
}
