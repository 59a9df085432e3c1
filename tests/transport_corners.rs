//! Protocol corners seen against grpc-go's interop server (issue 33), each against a server
//! on 127.0.0.1 that behaves as grpc-go's does (tests/common/grpc_go.rs).
#[allow(dead_code)] // the calls other transport tests share
#[path = "common/echo_calls.rs"]
mod echo_calls;
#[path = "common/grpc_go.rs"]
mod grpc_go;
use echo_calls::request;
use prost::Message as _;
use rpcmeter::grpc::transport::MessageOptions;
use rpcmeter::grpc::{CallSpec, Connection, Connector, PreparedCall, Target};
use rpcmeter::lab::proto::echo::Message;
use rpcmeter::schema::{resolve_method, SchemaSource};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tonic::Code;

async fn connect(lean: bool, addr: SocketAddr) -> Connection {
    let connector = Connector::new(&Target::new(addr.ip().to_string(), addr.port())).unwrap();
    let connector = if lean { connector.unary_only() } else { connector };
    connector.connect().await.unwrap()
}

fn echo_spec() -> CallSpec {
    CallSpec {
        path: "/EchoService/echo".parse().unwrap(),
        metadata: Default::default(),
        deadline: None,
        messages: Default::default(),
    }
}

/// A deadline that expires is DEADLINE_EXCEEDED whichever ends the call first: the client's
/// timer, or the server's RST_STREAM(CANCEL) at the deadline, as grpc-go's server sends it.
/// A busy client (a load generator at full tilt) meets both in one turn, the reset read
/// first: here its one thread is kept busy across the deadline once the server has all 40 calls.
async fn a_deadline_reset_by_the_server_is_deadline_exceeded(lean: bool) {
    const CALLS: u64 = 40;
    let deadline = Duration::from_millis(50);
    let (addr, arrivals) = grpc_go::resets_at_the_deadline();
    let conn = connect(lean, addr).await;
    let call = PreparedCall::new(&CallSpec { deadline: Some(deadline), ..echo_spec() });
    // Tasks of their own, as the engine's calls are: they run in the order they were woken.
    let calls = futures::future::join_all((0..CALLS).map(|_| {
        let (conn, call) = (conn.clone(), call.clone());
        tokio::spawn(async move { conn.call(&call, request("too slow"), false).await })
    }));
    let busy = async {
        while arrivals.load(Ordering::SeqCst) < CALLS {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // Blocks the client's only thread: the resets arrive meanwhile, the timers expire.
        std::thread::sleep(2 * deadline);
    };
    let (replies, ()) = futures::join!(calls, busy);
    let statuses: Vec<_> = replies.into_iter().map(Result::unwrap).map(|r| (r.status, r.message)).collect();
    let exceeded = statuses.iter().filter(|(code, _)| *code == Code::DeadlineExceeded).count();
    assert_eq!(exceeded, CALLS as usize, "{statuses:?}");
}

/// Answers come gzip-compressed (a server that compresses every one): each is inflated,
/// kept inflated when asked, and counted at its inflated size; a gzip request goes through,
/// since the client says it accepts gzip answers (grpc-go's server fails it otherwise).
async fn gzip_answers_are_inflated(lean: bool) {
    let addr = grpc_go::compresses_every_answer();
    let conn = connect(lean, addr).await;
    let gzip_requests = CallSpec { messages: MessageOptions { gzip: true, ..Default::default() }, ..echo_spec() };
    for (spec, content) in [
        (echo_spec(), "hello, gzip".to_owned()),
        (gzip_requests, "compressed both ways".to_owned()),
        // Many DATA frames, and more than one read of the inflater's output.
        (echo_spec(), "inflate-to:1000000".to_owned()),
    ] {
        let reply = conn.unary(&spec, request(&content), true).await;
        assert_eq!(reply.status, Code::Ok, "{:?}", reply.message);
        let expected = match content.strip_prefix("inflate-to:") {
            Some(n) => "a".repeat(n.parse().unwrap()),
            None => content,
        };
        let expected = Message { content: expected }.encode_to_vec();
        assert_eq!(reply.response_bytes, expected.len() as u64);
        assert!(reply.response.unwrap() == expected, "the answer comes back inflated");
    }
}

/// `--max-msg-size` holds for the inflated size: a small answer that inflates beyond it (2 MiB
/// of 'a' is 2 KiB of gzip; the limit 64 KiB) fails RESOURCE_EXHAUSTED, kept or not, without
/// inflating it whole; the connection goes on.
async fn a_gzip_answer_inflating_beyond_the_limit_is_resource_exhausted(lean: bool) {
    let addr = grpc_go::compresses_every_answer();
    let conn = connect(lean, addr).await;
    let small = CallSpec { messages: MessageOptions { receive: 64 << 10, ..Default::default() }, ..echo_spec() };
    for keep in [false, true] {
        let reply = conn.unary(&small, request("inflate-to:2097152"), keep).await;
        assert_eq!(reply.status, Code::ResourceExhausted, "{:?}", reply.message);
        let message = reply.message.unwrap();
        assert!(message.contains("after decompression larger than max"), "{message}");
    }
    assert_eq!(conn.unary(&small, request("within the limit"), false).await.status, Code::Ok);
}

/// Server reflection against a server that compresses every answer: its answers are inflated
/// (it once failed "undecodable answer").
#[tokio::test]
async fn reflection_reads_gzip_answers() {
    let addr = grpc_go::compresses_every_answer();
    let target = Target::new(addr.ip().to_string(), addr.port());
    let reflection = SchemaSource::Reflection { metadata: Default::default() };
    let echo = resolve_method(&reflection, "EchoService/echo", &target).await.unwrap();
    assert_eq!(echo.input().full_name(), "Message");
    let cpu = resolve_method(&reflection, "TestService.Cpu", &target).await.unwrap();
    assert_eq!(cpu.input().full_name(), "rpcmeter.lab.v1.CpuRequest");
}

/// `rpcmeter run` by reflection against that server: every call OK; with a --max-msg-size
/// below an answer's inflated size, every call RESOURCE_EXHAUSTED.
#[test]
fn run_against_a_server_that_compresses_every_answer() {
    let addr = grpc_go::compresses_every_answer();
    let run = |content: &str, extra: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
            .args(["run", "--plaintext", "--quiet", "--no-save", "--call", "EchoService/echo", "-n", "20"])
            .args(["-d", &format!(r#"{{"content":"{content}"}}"#), "--format", "json"])
            .args(extra)
            .arg(addr.to_string())
            .output()
            .unwrap();
        let report: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        report["statuses"].clone()
    };
    assert_eq!(run("hi", &[]), serde_json::json!({"OK": 20}));
    assert_eq!(run("inflate-to:200000", &["--max-msg-size", "100000"]), serde_json::json!({"RESOURCE_EXHAUSTED": 20}));
}

/// `--bidi free` against a half-duplex server (it answers once the client has closed its
/// side): every stream sends its 5 messages at --stream-interval, closes, and reads the 5
/// answers; no round trips are reported (requests and answers are not paired).
#[test]
fn free_bidi_streams_work_with_a_half_duplex_server() {
    let addr = grpc_go::half_duplex();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .args(["run", "--plaintext", "--quiet", "--no-save", "--call", "rpcmeter.lab.v1.Streaming/Echo"])
        .args(["-d", r#"{"payload":"YQ=="}"#, "--bidi", "free", "--stream-call-count", "5"])
        .args(["--stream-interval", "1ms", "-n", "10", "-c", "2", "--deadline", "10s", "--format", "json"])
        .arg(addr.to_string())
        .output()
        .unwrap();
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(report["statuses"], serde_json::json!({"OK": 10}), "{report}");
    let m = &report["messages"];
    assert_eq!((m["sent"].as_u64(), m["received"].as_u64()), (Some(50), Some(50)), "{m}");
    assert!(m.get("round_trip_us").is_none_or(|v| v.is_null()), "{m}");
    // On a method that is not bidi the flag would be ignored: refused, exit 2.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .args(["run", "--plaintext", "--quiet", "--no-save", "--call", "rpcmeter.lab.v1.Streaming/Upload"])
        .args(["--bidi", "free", "-n", "1"])
        .arg(addr.to_string())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--bidi: rpcmeter.lab.v1.Streaming.Upload is client streaming"), "{stderr}");
}

echo_calls::over_both_transports!(
    a_deadline_reset_by_the_server_is_deadline_exceeded,
    gzip_answers_are_inflated,
    a_gzip_answer_inflating_beyond_the_limit_is_resource_exhausted,
);
