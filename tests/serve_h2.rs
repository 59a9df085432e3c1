//! `serve` against HTTP/2's rules for a stream the lab has already answered (issue 41): a
//! client's malformed frames after the answer must still meet a stream error, as h2spec's
//! http2/8.1/1, 8.1.2.1/3 and 5.1/8 want. Those failed whenever the lab's answer to their
//! request (an unknown path, answered at once) left before the rest of the request arrived;
//! here the rest is sent only once the answer came, every time. With h2spec installed, the
//! three cases also run 20 times each.
use rpcmeter::lab::{LabConfig, LabServer};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

const DATA: u8 = 0;
const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const GOAWAY: u8 = 7;
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
/// (its trailers-only HEADERS with END_STREAM); the connection then reads with a timeout.
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
        if frame.kind == HEADERS && frame.stream == 1 && frame.flags & END_STREAM != 0 {
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

/// h2spec itself, when it is installed (`go install github.com/summerwind/h2spec/cmd/h2spec`):
/// the three cases 20 times each against `serve`'s services.
#[test]
fn h2spec_passes_the_three_cases_20_times_when_installed() {
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
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("3 tests, 3 passed"), "run {run}:\n{text}");
    }
    server.shutdown();
}
