//! Server reflection that wants credentials (an interceptor on reflection only, as servers
//! that authenticate every service do): `run` reaches it with -m or --reflect-metadata and is
//! refused without, in one line (exit 1: the target said no, nothing typed was wrong).
mod common;
use rpcmeter::lab::proto::echo::echo_service_server::{EchoService, EchoServiceServer};
use rpcmeter::lab::proto::echo::Message;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use tonic::{Request, Response, Status};

const TOKEN: &str = "Bearer reflect-me";

/// Echo, counting the calls that carried the reflection token (it should not leak to calls
/// when given as --reflect-metadata).
#[derive(Default)]
struct Echo {
    with_token: AtomicU64,
}

#[tonic::async_trait]
impl EchoService for Echo {
    async fn echo(&self, request: Request<Message>) -> Result<Response<Message>, Status> {
        if request.metadata().get("authorization").is_some_and(|v| v == TOKEN) {
            self.with_token.fetch_add(1, SeqCst);
        }
        Ok(Response::new(request.into_inner()))
    }
}

fn authorized(request: Request<()>) -> Result<Request<()>, Status> {
    match request.metadata().get("authorization") {
        Some(v) if v == TOKEN => Ok(request),
        _ => Err(Status::unauthenticated("reflection needs a token")),
    }
}

/// Serves echo and token-guarded reflection v1 (no v1alpha) on 127.0.0.1 port 0 until the
/// test process ends.
fn serve() -> (SocketAddr, Arc<Echo>) {
    let echo = Arc::new(Echo::default());
    let service = EchoServiceServer::from_arc(echo.clone());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            let reflection = tonic_reflection::server::Builder::configure()
                .register_encoded_file_descriptor_set(rpcmeter::lab::proto::FILE_DESCRIPTOR_SET)
                .build_v1()
                .unwrap();
            tonic::transport::Server::builder()
                .add_service(service)
                .add_service(tonic::service::interceptor::InterceptedService::new(reflection, authorized))
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
                .await
                .unwrap();
        });
    });
    (rx.recv().unwrap(), echo)
}

/// `rpcmeter run` over reflection: 5 calls; (exit code, stderr).
fn run(addr: SocketAddr, extra: &[&str]) -> (Option<i32>, String) {
    let mut cmd = common::rpcmeter();
    cmd.args(["run", "--plaintext", "-q", "--no-save", "--no-server-stats", "--call", "EchoService/echo", "-n", "5"])
        .args(extra)
        .arg(addr.to_string());
    let (code, _, stderr) = common::outcome(cmd);
    (code, stderr)
}

#[test]
fn reflection_metadata_reaches_a_server_that_wants_it() {
    let (addr, echo) = serve();
    let auth = format!(r#"{{"authorization": "{TOKEN}"}}"#);

    // Without the token: refused, in one line that names reflection and where the token goes.
    let (code, stderr) = run(addr, &[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("reflection") && stderr.contains("--reflect-metadata"), "{stderr}");
    assert!(stderr.contains("Unauthenticated"), "{stderr}");

    // --reflect-metadata: reflection gets the token, the calls do not.
    let (code, stderr) = run(addr, &["--reflect-metadata", &auth]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(echo.with_token.load(SeqCst), 0);

    // -m: reflection and every call get it.
    let (code, stderr) = run(addr, &["-m", &auth]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(echo.with_token.load(SeqCst), 5);

    // --reflect-metadata replaces -m's value of a key for reflection only.
    let (code, stderr) = run(addr, &["-m", r#"{"authorization": "Bearer wrong"}"#, "--reflect-metadata", &auth]);
    assert_eq!(code, Some(0), "{stderr}");

    // A bad --reflect-metadata is bad input, named as such.
    let (code, stderr) = run(addr, &["--reflect-metadata", "[1]"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--reflect-metadata"), "{stderr}");
}
