//! `serve` against HTTP/2's rules for a stream the lab has already answered (issue 41): a
//! client's malformed frames after the answer must still meet a stream error, as h2spec's
//! http2/8.1/1, 8.1.2.1/3 and 5.1/8 want. Those failed whenever the lab's answer to their
//! request (an unknown path, answered at once) left before the rest of the request arrived;
//! here the rest is sent only once the answer came, every time.
//!
//! Also h2spec's generic/2/2 and 2/3, which want a DATA frame in answer to their request (a
//! `GET /`, not a gRPC call), and http2/3.5/2, which wants an invalid connection preface met
//! by a closed connection (RFC 9113 section 3.4), not a reset one. With h2spec installed, the
//! six cases also run 20 times each.
use rpcmeter::lab::{LabConfig, LabServer};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

const DATA: u8 = 0;
const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const GOAWAY: u8 = 7;
const WINDOW_UPDATE: u8 = 8;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PROTOCOL_ERROR: u32 = 1;
const CANCEL: u32 = 8;
const STREAM_CLOSED: u32 = 5;

struct Frame {
    kind: u8,
    flags: u8,
    stream: u32,
    payload: Vec<u8>,
}

fn write_frame(conn: &mut TcpStream, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    let len = (payload.len() as u32).to_be_bytes();
    let mut frame = vec![len[1], len[2], len[3], kind, flags];
    frame.extend_from_slice(&stream.to_be_bytes());
    frame.extend_from_slice(payload);
    conn.write_all(&frame).unwrap();
}

/// None once the connection is closed (or the read timed out: the caller says which it wants).
fn read_frame(conn: &mut TcpStream) -> Option<Frame> {
    let mut head = [0u8; 9];
    conn.read_exact(&mut head).ok()?;
    let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
    let mut payload = vec![0; len];
    conn.read_exact(&mut payload).ok()?;
    let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
    Some(Frame { kind: head[3], flags: head[4], stream, payload })
}

/// An HPACK block of literal fields, never indexed nor Huffman-coded (each under 127 bytes).
fn block(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in fields {
        out.push(0x00);
        out.push(name.len() as u8);
        out.extend_from_slice(name.as_bytes());
        out.push(value.len() as u8);
        out.extend_from_slice(value.as_bytes());
    }
    out
}

/// Opens stream 1 with a POST to `/` (h2spec's request) and waits for the lab's whole answer
/// (the frame with END_STREAM); the connection then reads with a timeout.
fn answered_stream(addr: &str) -> TcpStream {
    let mut conn = TcpStream::connect(addr).unwrap();
    conn.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").unwrap();
    write_frame(&mut conn, SETTINGS, 0, 0, &[]);
    let request = block(&[(":method", "POST"), (":scheme", "http"), (":path", "/"), (":authority", addr)]);
    write_frame(&mut conn, HEADERS, END_HEADERS, 1, &request);
    conn.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    loop {
        let frame = read_frame(&mut conn).expect("the lab answers the request");
        if frame.kind == SETTINGS && frame.flags == 0 {
            write_frame(&mut conn, SETTINGS, 0x1, 0, &[]);
        }
        if matches!(frame.kind, HEADERS | DATA) && frame.stream == 1 && frame.flags & END_STREAM != 0 {
            break;
        }
    }
    conn.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    conn
}

/// What the lab did after the frames that break the rules: the first RST_STREAM code on
/// stream 1 that is not NO_ERROR, a GOAWAY's code, or None when it closed the connection.
/// A timeout with neither is the failure.
fn stream_error(conn: &mut TcpStream) -> Result<Option<u32>, String> {
    let mut seen = Vec::new();
    loop {
        let Some(frame) = read_frame(conn) else {
            return match conn.take_error() {
                Ok(None) if seen.is_empty() => Err("nothing: the frames were ignored".into()),
                _ => Err(format!("no stream error, only {seen:?}")),
            };
        };
        let code = || u32::from_be_bytes(frame.payload[..4].try_into().unwrap());
        match frame.kind {
            RST_STREAM if frame.stream == 1 && code() != 0 => return Ok(Some(code())),
            GOAWAY => return Ok(Some(u32::from_be_bytes(frame.payload[4..8].try_into().unwrap()))),
            kind => seen.push((kind, frame.stream)),
        }
    }
}

#[test]
fn a_stream_answered_early_still_meets_its_malformed_frames_with_a_stream_error() {
    let server = LabServer::start(LabConfig { addr: "127.0.0.1:0".into(), ..LabConfig::default() }).unwrap();
    let addr = server.local_addr().to_string();

    // http2/8.1/1: a second HEADERS without END_STREAM.
    let mut conn = answered_stream(&addr);
    write_frame(&mut conn, DATA, 0, 1, b"test");
    write_frame(&mut conn, HEADERS, END_HEADERS, 1, &block(&[("x-test", "ok")]));
    assert_eq!(stream_error(&mut conn), Ok(Some(PROTOCOL_ERROR)), "8.1/1");

    // http2/8.1.2.1/3: a pseudo-header as a trailer.
    let mut conn = answered_stream(&addr);
    write_frame(&mut conn, DATA, 0, 1, b"test");
    write_frame(&mut conn, HEADERS, END_HEADERS, 1, &block(&[(":method", "POST")]));
    assert_eq!(stream_error(&mut conn), Ok(Some(PROTOCOL_ERROR)), "8.1.2.1/3");

    // http2/5.1/8: DATA after the client's own RST_STREAM: STREAM_CLOSED, or the connection
    // ended (h2spec takes a GOAWAY and the close that follows).
    let mut conn = answered_stream(&addr);
    write_frame(&mut conn, RST_STREAM, 0, 1, &CANCEL.to_be_bytes());
    write_frame(&mut conn, DATA, END_STREAM, 1, b"test");
    let after = stream_error(&mut conn);
    assert!(matches!(after, Ok(Some(STREAM_CLOSED | PROTOCOL_ERROR))), "5.1/8: {after:?}");
    drop(conn);
    server.shutdown();
}

/// h2spec generic/2/2 (and 2/3, the same request): a `GET /` with the stream window at 0, then
/// a WINDOW_UPDATE of one byte on that stream, must bring a DATA frame of that byte. The lab
/// answered such a request, which is not a gRPC call, with trailers only: no DATA ever came.
#[test]
fn a_request_that_is_not_grpc_is_answered_with_a_body() {
    let server = LabServer::start(LabConfig { addr: "127.0.0.1:0".into(), ..LabConfig::default() }).unwrap();
    let addr = server.local_addr().to_string();
    let mut conn = TcpStream::connect(&addr).unwrap();
    conn.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").unwrap();
    const INITIAL_WINDOW_SIZE: u16 = 4;
    let window_zero = [&INITIAL_WINDOW_SIZE.to_be_bytes()[..], &0u32.to_be_bytes()].concat();
    write_frame(&mut conn, SETTINGS, 0, 0, &window_zero);
    let request = block(&[(":method", "GET"), (":scheme", "http"), (":path", "/"), (":authority", &addr)]);
    write_frame(&mut conn, HEADERS, END_HEADERS | END_STREAM, 1, &request);
    write_frame(&mut conn, WINDOW_UPDATE, 0, 1, &1u32.to_be_bytes());
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut seen = Vec::new();
    let data = loop {
        let Some(frame) = read_frame(&mut conn) else { panic!("no DATA frame, only {seen:?}") };
        if frame.kind == SETTINGS && frame.flags == 0 {
            write_frame(&mut conn, SETTINGS, 0x1, 0, &[]);
        }
        if frame.kind == DATA && frame.stream == 1 {
            break frame;
        }
        seen.push((frame.kind, frame.flags, frame.stream));
    };
    assert_eq!(data.payload.len(), 1, "the one byte the window allows");
    drop(conn);
    server.shutdown();
}

/// What the lab answers a request of this method and content-type on `/`: the HTTP status,
/// the headers and the body's text (a trailers-only answer has an empty body).
async fn answer_to(addr: &str, method: &str, content_type: Option<&str>) -> (u16, http::HeaderMap, String) {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut client, connection) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(connection);
    let mut request = http::Request::builder().method(method).uri(format!("http://{addr}/"));
    if let Some(content_type) = content_type {
        request = request.header("content-type", content_type);
    }
    let (response, _) = client.send_request(request.body(()).unwrap(), true).unwrap();
    let (head, mut body) = response.await.unwrap().into_parts();
    let mut text = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.unwrap();
        body.flow_control().release_capacity(chunk.len()).unwrap();
        text.extend_from_slice(&chunk);
    }
    (head.status.as_u16(), head.headers, String::from_utf8(text).unwrap())
}

/// A request that is not a gRPC call gets grpc-go's answer (its `ServeHTTP`): 405 for a method
/// other than POST, 415 for a content-type other than gRPC's, each with a line of text saying
/// why; a gRPC call to the same path is still answered in gRPC (UNIMPLEMENTED, trailers only).
#[test]
fn a_request_that_is_not_grpc_gets_an_http_status_and_a_grpc_call_still_a_grpc_status() {
    let server = LabServer::start(LabConfig { addr: "127.0.0.1:0".into(), ..LabConfig::default() }).unwrap();
    let addr = server.local_addr().to_string();
    let runtime = tokio::runtime::Runtime::new().unwrap();

    let (status, headers, text) = runtime.block_on(answer_to(&addr, "GET", None));
    assert_eq!((status, headers.get("allow").map(|v| v.to_str().unwrap())), (405, Some("POST")));
    assert_eq!(text, "invalid gRPC request method \"GET\"\n");
    assert!(headers.get("grpc-status").is_none(), "{headers:?}");

    for content_type in [None, Some("application/json"), Some("application/grpc-web")] {
        let (status, headers, text) = runtime.block_on(answer_to(&addr, "POST", content_type));
        assert_eq!(status, 415, "{content_type:?}");
        assert_eq!(headers["content-type"], "text/plain; charset=utf-8");
        assert_eq!(text, format!("invalid gRPC request content-type {:?}\n", content_type.unwrap_or("")));
    }

    for content_type in ["application/grpc", "application/grpc+proto", "application/grpc;charset=utf-8"] {
        let (status, headers, text) = runtime.block_on(answer_to(&addr, "POST", Some(content_type)));
        assert_eq!((status, headers["grpc-status"].as_bytes(), text.as_str()), (200, &b"12"[..], ""), "{content_type}");
        assert_eq!(headers["grpc-message"], "unknown%20method%20/", "{content_type}");
    }
    drop(runtime);
    server.shutdown();
}

/// h2spec http2/3.5/2: bytes that are not the client's connection preface end the connection
/// (RFC 9113 section 3.4: a connection error, whose GOAWAY may be left out). The lab closed it
/// with the rest of those bytes unread, so that the kernel reset it: the client read
/// ECONNRESET, and a reset may discard what the server sent before it. Now it ends with a
/// clean close: the server's SETTINGS, then the end of the stream.
#[test]
fn an_invalid_preface_closes_the_connection_without_a_reset() {
    let server = LabServer::start(LabConfig { addr: "127.0.0.1:0".into(), ..LabConfig::default() }).unwrap();
    let mut conn = TcpStream::connect(server.local_addr()).unwrap();
    conn.write_all(b"INVALID CONNECTION PREFACE\r\n\r\n").unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut received = Vec::new();
    let end = conn.read_to_end(&mut received);
    assert!(end.is_ok(), "{end:?} after {} bytes", received.len());
    assert_eq!(received.get(3), Some(&SETTINGS), "the server's preface first: {received:?}");
    drop(conn);
    server.shutdown();
}

/// h2spec itself, when it is installed (`go install github.com/summerwind/h2spec/cmd/h2spec`):
/// the six cases 20 times each against `serve`'s services.
#[test]
fn h2spec_passes_the_six_cases_20_times_when_installed() {
    let h2spec = std::env::var_os("H2SPEC").map(std::path::PathBuf::from).or_else(|| {
        let home = std::env::var_os("HOME")?;
        let installed = std::path::Path::new(&home).join("go/bin/h2spec");
        installed.exists().then_some(installed)
    });
    let Some(h2spec) = h2spec else {
        eprintln!("h2spec is not installed (~/go/bin/h2spec or $H2SPEC): skipped");
        return;
    };
    let server = LabServer::start(LabConfig { addr: "127.0.0.1:0".into(), ..LabConfig::default() }).unwrap();
    let port = server.local_addr().port().to_string();
    for run in 1..=20 {
        let out = std::process::Command::new(&h2spec)
            .args(["-p", &port, "http2/8.1/1", "http2/8.1.2.1/3", "http2/5.1/8"])
            .args(["generic/2/2", "generic/2/3", "http2/3.5/2"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("6 tests, 6 passed"), "run {run}:\n{text}");
    }
    server.shutdown();
}
