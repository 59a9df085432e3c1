//! The call path against real tonic servers on 127.0.0.1: statuses, deadlines, metadata,
//! broken connections, concurrency on one connection, TLS with and without client certs.
#[path = "common/echo_calls.rs"]
mod echo_calls;
#[path = "common/wait.rs"]
mod wait;
use bytes::Bytes;
use echo_calls::request;
use prost::Message as _;
use rpcmeter::grpc::tls::TlsOptions;
use rpcmeter::grpc::wire::frame;
use rpcmeter::grpc::{CallSpec, Connection, Connector, PreparedCall, Target};
use rpcmeter::lab::proto::echo::echo_service_server::{EchoService, EchoServiceServer};
use rpcmeter::lab::proto::echo::Message;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::rustls;
use tonic::{Code, Request, Response, Status};

/// The lab's echo service with test behaviours chosen by the request's content:
/// "fail" answers an error status, "sleep" never answers in time, "pause" answers after half a
/// millisecond, "headers" echoes what the client sent as metadata, anything else is echoed back.
struct Echo;

#[tonic::async_trait]
impl EchoService for Echo {
    async fn echo(&self, request: Request<Message>) -> Result<Response<Message>, Status> {
        let header = |name| request.metadata().get(name).map_or("", |v| v.to_str().unwrap()).to_owned();
        let content = match request.get_ref().content.as_str() {
            "fail" => return Err(Status::failed_precondition("no such key: ключ 100%")),
            "sleep" => {
                tokio::time::sleep(Duration::from_secs(30)).await;
                "woke".to_owned()
            }
            "pause" => {
                // Precise, unlike tokio's millisecond timer: the answer leaves after 500 µs.
                std::thread::sleep(Duration::from_micros(500));
                "paused".to_owned()
            }
            "headers" => format!("{}|{}", header("x-test"), header("grpc-timeout")),
            other => other.to_owned(),
        };
        Ok(Response::new(Message { content }))
    }
}

/// A tonic server on its own runtime, so that killing it drops every connection at once.
struct Server {
    addr: SocketAddr,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Server {
    fn kill(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

fn tonic_server() -> tonic::transport::Server {
    // A small stream limit, so that concurrent calls must wait for a free stream.
    tonic::transport::Server::builder().max_concurrent_streams(16)
}

/// A runtime of its own and a listener registered with it (callable from inside another runtime).
fn server_runtime() -> (tokio::runtime::Runtime, TcpListener, SocketAddr) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    listener.set_nonblocking(true).unwrap();
    let listener = {
        let _in_runtime = runtime.enter();
        TcpListener::from_std(listener).unwrap()
    };
    (runtime, listener, addr)
}

fn serve_plaintext() -> Server {
    let (runtime, listener, addr) = server_runtime();
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
    runtime.spawn(tonic_server().add_service(EchoServiceServer::new(Echo)).serve_with_incoming(incoming));
    Server { addr, runtime: Some(runtime) }
}

/// tonic's TLS needs a feature the crate does not build with; a rustls acceptor in front of
/// `serve_with_incoming` serves the same bytes.
fn serve_tls(config: rustls::ServerConfig) -> Server {
    let (runtime, listener, addr) = server_runtime();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let incoming = futures::stream::unfold((listener, acceptor), |(listener, acceptor)| async move {
        loop {
            let tcp = match listener.accept().await {
                Ok((tcp, _)) => tcp,
                Err(e) => return Some((Err(e), (listener, acceptor))),
            };
            // A client that fails the handshake is dropped; the server goes on.
            if let Ok(tls) = acceptor.accept(tcp).await {
                return Some((Ok(TlsConn(tls)), (listener, acceptor)));
            }
        }
    });
    runtime.spawn(tonic_server().add_service(EchoServiceServer::new(Echo)).serve_with_incoming(incoming));
    Server { addr, runtime: Some(runtime) }
}

struct TlsConn(tokio_rustls::server::TlsStream<TcpStream>);

impl tonic::transport::server::Connected for TlsConn {
    type ConnectInfo = ();
    fn connect_info(&self) {}
}

impl AsyncRead for TlsConn {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsConn {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}

fn target(addr: SocketAddr, tls: Option<TlsOptions>) -> Target {
    Target { tls, ..Target::new(addr.ip().to_string(), addr.port()) }
}

/// A connector of the transport a test runs over: h2, or the lean one of `run`'s unary calls.
fn connector(lean: bool, target: &Target) -> anyhow::Result<Connector> {
    let connector = Connector::new(target)?;
    Ok(if lean { connector.unary_only() } else { connector })
}

async fn connect(lean: bool, target: &Target) -> Connection {
    connector(lean, target).unwrap().connect().await.unwrap()
}

fn echo_spec() -> CallSpec {
    CallSpec {
        path: "/EchoService/echo".parse().unwrap(),
        metadata: Default::default(),
        deadline: None,
        messages: Default::default(),
    }
}

async fn ok_call_counts_the_response_and_keeps_it_when_asked(lean: bool) {
    let server = serve_plaintext();
    let conn = connect(lean, &target(server.addr, None)).await;
    let sent = Message { content: "hello, echo".into() };

    let reply = conn.unary(&echo_spec(), frame(&sent.encode_to_vec()), false).await;
    assert_eq!(reply.status, Code::Ok, "{:?}", reply.message);
    assert_eq!(reply.response_bytes, sent.encoded_len() as u64);
    assert!(reply.response.is_none() && reply.message.is_none());

    let reply = conn.unary(&echo_spec(), frame(&sent.encode_to_vec()), true).await;
    assert_eq!(reply.status, Code::Ok);
    assert_eq!(reply.response.unwrap(), sent.encode_to_vec());
}

async fn error_status_and_message_come_through(lean: bool) {
    let server = serve_plaintext();
    let conn = connect(lean, &target(server.addr, None)).await;
    let reply = conn.unary(&echo_spec(), request("fail"), true).await;
    assert_eq!(reply.status, Code::FailedPrecondition);
    assert_eq!(reply.message.as_deref(), Some("no such key: ключ 100%"));
    assert_eq!(reply.response_bytes, 0);
}

async fn unknown_method_is_unimplemented(lean: bool) {
    let server = serve_plaintext();
    let conn = connect(lean, &target(server.addr, None)).await;
    let spec = CallSpec { path: "/EchoService/nope".parse().unwrap(), ..echo_spec() };
    assert_eq!(conn.unary(&spec, request("x"), false).await.status, Code::Unimplemented);
}

async fn metadata_and_grpc_timeout_reach_the_server(lean: bool) {
    let server = serve_plaintext();
    let conn = connect(lean, &target(server.addr, None)).await;
    let mut spec = echo_spec();
    spec.metadata.insert("x-test", "42".parse().unwrap());
    spec.deadline = Some(Duration::from_secs(20));
    let call = PreparedCall::new(&spec);
    for _ in 0..2 {
        let reply = conn.call(&call, request("headers"), true).await;
        let echoed = Message::decode(reply.response.unwrap()).unwrap().content;
        assert_eq!(echoed, "42|20000000u");
    }
}

async fn deadline_is_deadline_exceeded(lean: bool) {
    let server = serve_plaintext();
    let conn = connect(lean, &target(server.addr, None)).await;
    let spec = CallSpec { deadline: Some(Duration::from_millis(200)), ..echo_spec() };
    let reply = conn.unary(&spec, request("sleep"), false).await;
    assert_eq!(reply.status, Code::DeadlineExceeded);
    // The connection survives an expired call.
    assert_eq!(conn.unary(&spec, request("still there"), false).await.status, Code::Ok);
}

/// A deadline shorter than the local timer's millisecond tick: an answer that arrives after
/// it ends the call DEADLINE_EXCEEDED all the same, as grpc-go's client says (its deadline is
/// a time, not only a timer). Before, 1 ns let nearly every call through.
async fn a_deadline_below_the_timer_tick_is_still_enforced(lean: bool) {
    let server = serve_plaintext();
    let conn = connect(lean, &target(server.addr, None)).await;
    for (deadline, content) in [(Duration::from_nanos(1), "hi"), (Duration::from_micros(300), "pause")] {
        let call = PreparedCall::new(&CallSpec { deadline: Some(deadline), ..echo_spec() });
        for _ in 0..20 {
            let reply = conn.call(&call, request(content), false).await;
            assert_eq!(reply.status, Code::DeadlineExceeded, "{deadline:?} {content}: {:?}", reply.message);
        }
    }
    // No deadline: the same answers are OK.
    assert_eq!(conn.unary(&echo_spec(), request("pause"), false).await.status, Code::Ok);
}

async fn unreachable_port_fails_to_connect_with_exit_code_1(lean: bool) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let target = Target::new("127.0.0.1", port);
    let err = connector(lean, &target).unwrap().connect().await.err().expect("nothing listens there");
    assert_eq!(rpcmeter::error::exit_code(&err), 1, "{err}");
}

async fn killed_server_gives_unavailable_and_a_closed_connection(lean: bool) {
    let mut server = serve_plaintext();
    let conn = connect(lean, &target(server.addr, None)).await;
    assert_eq!(conn.unary(&echo_spec(), request("before"), false).await.status, Code::Ok);
    assert!(!conn.is_closed());
    server.kill();
    let reply = conn.unary(&echo_spec(), request("after"), false).await;
    assert_eq!(reply.status, Code::Unavailable, "{:?}", reply.message);
    assert!(reply.message.is_some());
    // The driver notices the end of the socket on its own; wait for it, without a time bound
    // in the assertion.
    for _ in 0..500 {
        if conn.is_closed() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(conn.is_closed());
}

async fn many_concurrent_calls_share_one_connection(lean: bool) {
    let server = serve_plaintext();
    let conn = connect(lean, &target(server.addr, None)).await;
    let call = PreparedCall::new(&echo_spec());
    echo_calls::all_echo(&conn, &call, (0..200).map(|i| format!("call {i}"))).await;
}

/// A CA, a server certificate for "localhost" and a client certificate, written as PEM files.
struct Pki {
    dir: tempfile::TempDir,
    server: rustls::ServerConfig,
    mtls_server: rustls::ServerConfig,
}

impl Pki {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

fn pki() -> Pki {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let leaf = |name: &str| {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec![name.to_owned()]).unwrap().signed_by(&key, &ca).unwrap();
        (cert, key)
    };
    let (server_cert, server_key) = leaf("localhost");
    let (client_cert, client_key) = leaf("client");

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ca.pem"), ca.pem()).unwrap();
    std::fs::write(dir.path().join("client.pem"), client_cert.pem()).unwrap();
    std::fs::write(dir.path().join("client.key"), client_key.serialize_pem()).unwrap();

    let server_config = |client_auth: Arc<dyn rustls::server::danger::ClientCertVerifier>| {
        let key = rustls::pki_types::PrivateKeyDer::try_from(server_key.serialize_der()).unwrap();
        let mut config = rustls::ServerConfig::builder()
            .with_client_cert_verifier(client_auth)
            .with_single_cert(vec![server_cert.der().clone()], key)
            .unwrap();
        config.alpn_protocols = vec![b"h2".to_vec()];
        config
    };
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.der().clone()).unwrap();
    let verify_clients = rustls::server::WebPkiClientVerifier::builder(Arc::new(roots)).build().unwrap();
    Pki {
        server: server_config(rustls::server::WebPkiClientVerifier::no_client_auth()),
        mtls_server: server_config(verify_clients),
        dir,
    }
}

async fn tls_call(lean: bool, target: &Target) -> Result<Code, String> {
    let conn = connector(lean, target).map_err(|e| e.to_string())?.connect().await.map_err(|e| e.to_string())?;
    Ok(conn.unary(&echo_spec(), request("over tls"), false).await.status)
}

async fn tls_with_cacert_servername_and_skip_verify(lean: bool) {
    let pki = pki();
    let server = serve_tls(pki.server.clone());
    let tls = |options: TlsOptions| target(server.addr, Some(options));
    let cacert = TlsOptions { cacert: Some(pki.path("ca.pem")), ..Default::default() };

    let named = TlsOptions { servername: Some("localhost".into()), ..cacert.clone() };
    assert_eq!(tls_call(lean, &tls(named)).await, Ok(Code::Ok));
    // The certificate names "localhost", not 127.0.0.1: verification must refuse it...
    assert!(tls_call(lean, &tls(cacert.clone())).await.is_err());
    // ...and so must the public roots, which never signed our CA...
    let public = TlsOptions { servername: Some("localhost".into()), ..Default::default() };
    assert!(tls_call(lean, &tls(public)).await.is_err());
    // ...unless told not to verify.
    let skip = TlsOptions { skip_verify: true, ..Default::default() };
    assert_eq!(tls_call(lean, &tls(skip)).await, Ok(Code::Ok));
    // A TLS client against a plaintext server fails to connect instead of hanging.
    let plain = serve_plaintext();
    let skip = TlsOptions { skip_verify: true, ..Default::default() };
    assert!(tls_call(lean, &target(plain.addr, Some(skip))).await.is_err());
}

async fn mutual_tls_needs_the_client_certificate(lean: bool) {
    let pki = pki();
    let server = serve_tls(pki.mtls_server.clone());
    let base =
        TlsOptions { cacert: Some(pki.path("ca.pem")), servername: Some("localhost".into()), ..Default::default() };
    let with_cert =
        TlsOptions { cert: Some(pki.path("client.pem")), key: Some(pki.path("client.key")), ..base.clone() };
    assert_eq!(tls_call(lean, &target(server.addr, Some(with_cert))).await, Ok(Code::Ok));
    // Without it, the server ends the handshake: a connect error or an UNAVAILABLE call.
    assert_ne!(tls_call(lean, &target(server.addr, Some(base))).await, Ok(Code::Ok));
}

#[test]
fn bad_tls_files_are_bad_input() {
    let pki = pki();
    let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
    let missing = TlsOptions { cacert: Some(pki.path("nope.pem")), ..Default::default() };
    let not_pem = TlsOptions { cacert: Some(pki.path("client.key")), ..Default::default() };
    let cert_only = TlsOptions { cert: Some(pki.path("client.pem")), ..Default::default() };
    for options in [missing, not_pem, cert_only] {
        let err = Connector::new(&target(addr, Some(options.clone()))).err().expect("bad TLS input");
        assert_eq!(rpcmeter::error::exit_code(&err), 2, "{options:?}: {err}");
    }
}

/// A certificate as `openssl req -x509` makes it: self-signed and marked as a CA. webpki
/// refuses such a certificate as a server's ("CA used as end entity"); given as --cacert, as
/// grpcurl and ghz users give it, it must be accepted, and only that certificate.
async fn a_self_signed_server_certificate_given_as_cacert_is_accepted(lean: bool) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let _ = rustls::crypto::ring::default_provider().install_default();
    let self_signed = || {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        (params.self_signed(&key).unwrap(), key)
    };
    let (cert, key) = self_signed();
    let (other, _) = self_signed();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("server.pem"), cert.pem()).unwrap();
    std::fs::write(dir.path().join("other.pem"), other.pem()).unwrap();
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
        )
        .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let server = serve_tls(config);
    let options = |file: &str| TlsOptions {
        cacert: Some(dir.path().join(file)),
        servername: Some("localhost".into()),
        ..Default::default()
    };
    assert_eq!(tls_call(lean, &target(server.addr, Some(options("server.pem")))).await, Ok(Code::Ok));
    let refused = tls_call(lean, &target(server.addr, Some(options("other.pem")))).await;
    assert!(refused.is_err(), "{refused:?}");
}

/// A raw HTTP/2 server for one call: it answers UNIMPLEMENTED and hands back what the call
/// sent: its request head and the first chunk of its body.
async fn one_raw_call() -> (SocketAddr, tokio::task::JoinHandle<(http::request::Parts, Bytes)>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut conn = h2::server::handshake(tcp).await.unwrap();
        let (request, mut respond) = conn.accept().await.unwrap().unwrap();
        let (head, mut body) = request.into_parts();
        let first = body.data().await.unwrap().unwrap();
        let response = http::Response::builder().header("grpc-status", "12").body(()).unwrap();
        respond.send_response(response, true).unwrap();
        // Keep the connection driven until the client has read the answer.
        let _ = tokio::time::timeout(Duration::from_millis(200), conn.accept()).await;
        (head, first)
    });
    (addr, seen)
}

/// `--authority`: every call carries the given :authority.
async fn the_authority_is_sent_as_given(lean: bool) {
    let (addr, seen) = one_raw_call().await;
    let target = Target { authority: Some("api.example.com".into()), ..target(addr, None) };
    let conn = connect(lean, &target).await;
    assert_eq!(conn.unary(&echo_spec(), request("x"), false).await.status, Code::Unimplemented);
    let (head, _) = seen.await.unwrap();
    assert_eq!(head.uri.authority().map(|a| a.as_str()), Some("api.example.com"));
}

/// `--max-msg-size`: a message above the limit fails the call with RESOURCE_EXHAUSTED, as
/// gRPC does: unsent when it is the request, unread when it is the response.
async fn messages_above_the_limit_fail_the_call(lean: bool) {
    use rpcmeter::grpc::transport::MessageOptions;
    let server = serve_plaintext();
    let conn = connect(lean, &target(server.addr, None)).await;
    let small_send = CallSpec { messages: MessageOptions { send: 4, ..Default::default() }, ..echo_spec() };
    let reply = conn.unary(&small_send, request("more than four bytes"), false).await;
    assert_eq!(reply.status, Code::ResourceExhausted);
    assert!(reply.message.unwrap().contains("trying to send message larger than max"));
    let small_receive = CallSpec { messages: MessageOptions { receive: 4, ..Default::default() }, ..echo_spec() };
    let reply = conn.unary(&small_receive, request("more than four bytes"), false).await;
    assert_eq!(reply.status, Code::ResourceExhausted);
    assert!(reply.message.unwrap().contains("received message larger than max"));
    // Within the limits, the connection still serves calls.
    assert_eq!(conn.unary(&echo_spec(), request("ok"), false).await.status, Code::Ok);
}

/// `--compression gzip`: the request says `grpc-encoding: gzip` and its frame's flag is set.
async fn gzip_requests_are_marked_and_compressed(lean: bool) {
    use rpcmeter::grpc::transport::MessageOptions;
    let (addr, seen) = one_raw_call().await;
    let conn = connect(lean, &target(addr, None)).await;
    let spec = CallSpec { messages: MessageOptions { gzip: true, ..Default::default() }, ..echo_spec() };
    conn.unary(&spec, request(&"x".repeat(1000)), false).await;
    let (head, first) = seen.await.unwrap();
    assert_eq!(head.headers.get("grpc-encoding").map(|v| v.to_str().unwrap()), Some("gzip"));
    assert_eq!(first[0], 1, "the frame's compressed flag");
}

/// `unix:PATH` targets: calls over a Unix socket, with keepalive PINGs on (answered, so the
/// connection stays up across an idle stretch longer than the keepalive period).
async fn unix_socket_targets_with_keepalive(lean: bool) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("echo.sock");
    let listener = tokio::net::UnixListener::bind(&path).unwrap();
    let incoming = tokio_stream::wrappers::UnixListenerStream::new(listener);
    let server = tokio::spawn(tonic_server().add_service(EchoServiceServer::new(Echo)).serve_with_incoming(incoming));
    let target =
        Target { unix: Some(path.clone()), keepalive: Some(Duration::from_millis(50)), ..Target::new("localhost", 0) };
    assert_eq!(target.to_string(), format!("unix:{}", path.display()));
    assert!(target.is_loopback());
    let conn = connect(lean, &target).await;
    assert_eq!(conn.unary(&echo_spec(), request("over a socket"), false).await.status, Code::Ok);
    // The idle stretch under test: six keepalive periods with no call.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!conn.is_closed(), "answered keepalive PINGs must not close the connection");
    assert_eq!(conn.unary(&echo_spec(), request("still"), false).await.status, Code::Ok);
    server.abort();
}

/// Messages larger than one frame (16 KiB) and than HTTP/2's initial 64 KiB window, both
/// ways: the request waits for the server's WINDOW_UPDATEs, the response is reassembled.
async fn messages_larger_than_a_frame_and_a_window(lean: bool) {
    let server = serve_plaintext();
    let conn = connect(lean, &target(server.addr, None)).await;
    let call = PreparedCall::new(&echo_spec());
    echo_calls::all_echo(&conn, &call, (0..4).map(|i| format!("{i}").repeat(300_000))).await;
}

/// The lab's echo, counting the calls it answers.
struct CountingEcho(Arc<std::sync::atomic::AtomicU64>);

#[tonic::async_trait]
impl EchoService for CountingEcho {
    async fn echo(&self, request: Request<Message>) -> Result<Response<Message>, Status> {
        // A millisecond's work: calls are in flight when the server stops.
        tokio::time::sleep(Duration::from_millis(1)).await;
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(Response::new(request.into_inner()))
    }
}

/// A server shut down gracefully while calls run (GOAWAY, then the calls in flight finish):
/// every call ends with a status, OK exactly for the calls the server answered, the rest
/// UNAVAILABLE; the connection says it is closed.
async fn graceful_shutdown_ends_every_call_with_a_status(lean: bool) {
    let (runtime, listener, addr) = server_runtime();
    let answered = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
    let service = EchoServiceServer::new(CountingEcho(answered.clone()));
    let serving = runtime.spawn(tonic_server().add_service(service).serve_with_incoming_shutdown(incoming, async {
        let _ = stopped.await;
    }));
    let conn = connect(lean, &target(addr, None)).await;
    let call = PreparedCall::new(&echo_spec());
    let ok_so_far = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let workers = echo_calls::until_refused(&conn, &call, 32, &ok_so_far);
    // Stopped once every caller has had calls answered.
    let counted = ok_so_far.clone();
    let stopping = tokio::task::spawn_blocking(move || {
        wait::wait_for_count("OK calls before the stop", 64, || counted.load(std::sync::atomic::Ordering::Relaxed));
        let _ = stop.send(());
    });
    let (statuses, stopped) =
        tokio::time::timeout(Duration::from_secs(90), async { futures::join!(workers, stopping) })
            .await
            .expect("every call ends");
    stopped.unwrap();
    let statuses: Vec<Code> = statuses.into_iter().flatten().collect();
    let ok = statuses.iter().filter(|&&s| s == Code::Ok).count() as u64;
    assert!(statuses.iter().all(|&s| s == Code::Ok || s == Code::Unavailable), "{statuses:?}");
    assert!(ok > 0);
    // The server's own end: its last answers are counted by then.
    let _ = tokio::time::timeout(Duration::from_secs(5), serving).await;
    assert_eq!(ok, answered.load(std::sync::atomic::Ordering::Relaxed), "OK exactly for the calls answered");
    assert!(conn.is_closed());
    runtime.shutdown_background();
}

/// A stream reset by the server maps per gRPC's table of HTTP/2 error codes.
async fn a_stream_reset_by_the_server_maps_to_its_grpc_code(lean: bool) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let reasons = [h2::Reason::REFUSED_STREAM, h2::Reason::ENHANCE_YOUR_CALM, h2::Reason::INTERNAL_ERROR];
    let server = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut conn = h2::server::handshake(tcp).await.unwrap();
        for reason in reasons {
            let (_, mut respond) = conn.accept().await.unwrap().unwrap();
            respond.send_reset(reason);
        }
        // Keep the connection driven until the client has read the resets.
        let _ = tokio::time::timeout(Duration::from_millis(500), conn.accept()).await;
    });
    let conn = connect(lean, &target(addr, None)).await;
    for expected in [Code::Unavailable, Code::ResourceExhausted, Code::Internal] {
        let reply = conn.unary(&echo_spec(), request("x"), false).await;
        assert_eq!(reply.status, expected, "{:?}", reply.message);
    }
    server.abort();
}

/// A hand-written HTTP/2 server end, for what the h2 crate's server will not do: a GOAWAY
/// with a last stream id of our choosing (h2's is always the last stream it has seen), or
/// silence once the handshake is done.
mod raw {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    pub const HEADERS: u8 = 1;
    pub const DATA: u8 = 0;
    pub const SETTINGS: u8 = 4;
    pub const PING: u8 = 6;
    pub const GOAWAY: u8 = 7;
    pub const END_STREAM: u8 = 0x1;
    pub const ACK: u8 = 0x1;
    pub const END_HEADERS: u8 = 0x4;

    pub struct Frame {
        pub kind: u8,
        pub flags: u8,
        pub stream: u32,
    }

    pub struct Peer {
        tcp: TcpStream,
        /// Frames are still read, but no SETTINGS or PING is acknowledged.
        pub silent: bool,
    }

    impl Peer {
        /// Reads the client's preface and sends our (empty) SETTINGS.
        pub async fn start(mut tcp: TcpStream) -> Peer {
            let mut preface = [0; 24];
            tcp.read_exact(&mut preface).await.unwrap();
            assert_eq!(&preface, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
            let mut peer = Peer { tcp, silent: false };
            peer.send(SETTINGS, 0, 0, &[]).await;
            peer
        }

        pub async fn send(&mut self, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
            let mut frame = (payload.len() as u32).to_be_bytes()[1..].to_vec();
            frame.extend_from_slice(&[kind, flags]);
            frame.extend_from_slice(&stream.to_be_bytes());
            frame.extend_from_slice(payload);
            self.tcp.write_all(&frame).await.unwrap();
        }

        /// The next frame, acknowledged when it is a SETTINGS or a PING (unless silent); None
        /// at the end of the connection.
        pub async fn next(&mut self) -> Option<Frame> {
            let mut head = [0; 9];
            self.tcp.read_exact(&mut head).await.ok()?;
            let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
            let mut payload = vec![0; len];
            self.tcp.read_exact(&mut payload).await.ok()?;
            let frame = Frame {
                kind: head[3],
                flags: head[4],
                stream: u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff,
            };
            if !self.silent && frame.flags & ACK == 0 {
                match frame.kind {
                    SETTINGS => self.send(SETTINGS, ACK, 0, &[]).await,
                    PING => self.send(PING, ACK, 0, &payload).await,
                    _ => {}
                }
            }
            Some(frame)
        }

        /// A gRPC response carrying `message`: HEADERS, one DATA, trailers with grpc-status 0.
        pub async fn answer(&mut self, stream: u32, message: &[u8]) {
            let mut head = vec![0x88]; // :status 200, from HPACK's static table
            head.extend(literal("content-type", "application/grpc"));
            self.send(HEADERS, END_HEADERS, stream, &head).await;
            self.send(DATA, 0, stream, message).await;
            self.send(HEADERS, END_HEADERS | END_STREAM, stream, &literal("grpc-status", "0")).await;
        }

        pub async fn goaway(&mut self, last_stream: u32) {
            let mut payload = last_stream.to_be_bytes().to_vec();
            payload.extend_from_slice(&0u32.to_be_bytes()); // NO_ERROR
            payload.extend_from_slice(b"bye"); // debug data
            self.send(GOAWAY, 0, 0, &payload).await;
        }
    }

    /// An HPACK literal without indexing, a new name, no Huffman (RFC 7541, 6.2.2).
    fn literal(name: &str, value: &str) -> Vec<u8> {
        let mut out = vec![0, name.len() as u8];
        out.extend_from_slice(name.as_bytes());
        out.push(value.len() as u8);
        out.extend_from_slice(value.as_bytes());
        out
    }
}

/// A GOAWAY whose last stream id is below calls in flight: the server answers the streams up
/// to it, and the calls above it end UNAVAILABLE (never processed, so safe to retry); none
/// hangs, and the connection ends.
async fn a_goaway_below_calls_in_flight_ends_them_unavailable(lean: bool) {
    const CALLS: usize = 6;
    const LAST_STREAM: u32 = 5; // streams 1, 3 and 5
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let mut peer = raw::Peer::start(listener.accept().await.unwrap().0).await;
        let mut requests = Vec::new();
        while requests.len() < CALLS {
            let frame = peer.next().await.expect("the client sends every call");
            if matches!(frame.kind, raw::HEADERS | raw::DATA) && frame.flags & raw::END_STREAM != 0 {
                requests.push(frame.stream);
            }
        }
        peer.goaway(LAST_STREAM).await;
        for stream in requests.into_iter().filter(|&id| id <= LAST_STREAM) {
            peer.answer(stream, &request(&format!("stream {stream}"))).await;
        }
        // Left open by the server: the client ends it once its last stream is done.
        while peer.next().await.is_some() {}
    });
    let conn = connect(lean, &target(addr, None)).await;
    let call = PreparedCall::new(&echo_spec());
    let calls = (0..CALLS).map(|i| conn.call(&call, request(&format!("call {i}")), true));
    let replies =
        tokio::time::timeout(Duration::from_secs(3), futures::future::join_all(calls)).await.expect("no call hangs");
    let mut answered = Vec::new();
    for reply in replies {
        match reply.status {
            Code::Ok => answered.push(Message::decode(reply.response.unwrap()).unwrap().content),
            // The same words from both engines: a run counts errors by status and message.
            Code::Unavailable => assert_eq!(
                reply.message.as_deref(),
                Some("connection closed by the server (GOAWAY not a result of an error: bye)")
            ),
            other => panic!("{other:?}: {:?}", reply.message),
        }
    }
    answered.sort();
    assert_eq!(answered, ["stream 1", "stream 3", "stream 5"]);
    assert!(conn.is_closed());
    let late = tokio::time::timeout(Duration::from_secs(1), conn.call(&call, request("late"), false)).await;
    assert_eq!(late.expect("a call after the GOAWAY does not hang").status, Code::Unavailable);
    tokio::time::timeout(Duration::from_secs(2), server).await.expect("the client closes the connection").unwrap();
}

/// Serves one connection on `listener` that goes silent once the handshake is done: the
/// handshake's PING is answered, no frame after it; ends when the client closes.
fn silent_peer(listener: TcpListener) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut peer = raw::Peer::start(listener.accept().await.unwrap().0).await;
        while peer.next().await.expect("the client's handshake").kind != raw::PING {}
        peer.silent = true;
        while peer.next().await.is_some() {}
    })
}

/// A peer that goes silent once the handshake is done (it reads, but answers no PING): with
/// keepalive on, a call in flight ends UNAVAILABLE once a PING has gone unanswered for the
/// keepalive timeout, and the connection is closed.
async fn keepalive_ends_the_calls_of_a_silent_peer(lean: bool) {
    let every = Duration::from_millis(100);
    let timeout = Duration::from_millis(300);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = silent_peer(listener);
    let target = Target { keepalive: Some(every), keepalive_timeout: timeout, ..target(addr, None) };
    let conn = connect(lean, &target).await;
    let started = std::time::Instant::now();
    // Slack for a loaded machine: the test runs under `nice` beside benchmarks.
    let bound = every + timeout + Duration::from_secs(2);
    let reply = tokio::time::timeout(bound, conn.unary(&echo_spec(), request("anyone there?"), false))
        .await
        .expect("the call ends within the keepalive interval plus its timeout");
    assert!(started.elapsed() >= timeout, "ended by the keepalive timeout, not before: {:?}", started.elapsed());
    assert_eq!(reply.status, Code::Unavailable, "{:?}", reply.message);
    let message = reply.message.unwrap();
    assert!(message.contains("keepalive PING unanswered"), "{message}");
    assert!(conn.is_closed());
    tokio::time::timeout(Duration::from_secs(2), server).await.expect("the client closes the connection").unwrap();
}

/// `run --keepalive-timeout` reaches the transport: a silent peer's call ends UNAVAILABLE
/// within the flag's timeout, not the 20 s default, and the run exits 1 (its calls failed).
#[tokio::test]
async fn run_ends_the_calls_of_a_silent_peer_after_its_keepalive_timeout() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    silent_peer(listener);
    let proto = concat!(env!("CARGO_MANIFEST_DIR"), "/proto/echo.proto");
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_rpcmeter"))
        .args(["run", "--plaintext", "--proto", proto, "--call", "EchoService/echo", "-d", r#"{"content":"hi"}"#])
        .args(["-n", "1", "--no-server-stats", "--keepalive", "100ms", "--keepalive-timeout", "300ms"])
        .arg(addr.to_string())
        .output();
    let out = tokio::time::timeout(Duration::from_secs(15), out).await.expect("the run ends well before 20 s").unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("keepalive PING unanswered within 300ms"), "{stdout}");
}

echo_calls::over_both_transports!(
    ok_call_counts_the_response_and_keeps_it_when_asked,
    error_status_and_message_come_through,
    unknown_method_is_unimplemented,
    metadata_and_grpc_timeout_reach_the_server,
    deadline_is_deadline_exceeded,
    a_deadline_below_the_timer_tick_is_still_enforced,
    unreachable_port_fails_to_connect_with_exit_code_1,
    killed_server_gives_unavailable_and_a_closed_connection,
    many_concurrent_calls_share_one_connection,
    tls_with_cacert_servername_and_skip_verify,
    mutual_tls_needs_the_client_certificate,
    a_self_signed_server_certificate_given_as_cacert_is_accepted,
    the_authority_is_sent_as_given,
    messages_above_the_limit_fail_the_call,
    gzip_requests_are_marked_and_compressed,
    unix_socket_targets_with_keepalive,
    messages_larger_than_a_frame_and_a_window,
    graceful_shutdown_ends_every_call_with_a_status,
    a_stream_reset_by_the_server_maps_to_its_grpc_code,
    a_goaway_below_calls_in_flight_ends_them_unavailable,
    keepalive_ends_the_calls_of_a_silent_peer,
);
