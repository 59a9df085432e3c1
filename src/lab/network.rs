//! The lab's network threads (issue 18): tonic's server runs on current-thread runtimes, one
//! per core, each accepting from the one listening socket, so that a connection and all its
//! streams stay on the thread that accepted it. The calls themselves run on the lab's runtime,
//! whose threads are the execution model's (`LabConfig::threads`); only echo's fast path
//! (echo.rs) is answered on the network thread, as it does no work a model could schedule.
//!
//! Why not tokio's multi-thread runtime, as tonic's server is usually run: there hyper's task
//! for each stream is woken into its thread's LIFO slot and runs before the connection's, so
//! each answer is written on its own (a `writev` per call), and another idle runtime thread is
//! woken (a futex per call) to steal stream tasks that then contend with the connection for
//! h2's stream-store lock. On a current-thread runtime the streams woken by one read all run
//! first and the connection writes their answers in one `writev`: under h2load's echo at 64
//! streams, server CPU per call fell from about 17 µs to 8.3 (docs/design.md, "Network threads").
use super::health::HealthService;
use super::linger::Lingering;
use super::proto::echo::echo_service_server::EchoServiceServer;
use super::proto::lab::{
    stats_server::StatsServer, storage_server::StorageServer, streaming_server::StreamingServer,
    test_service_server::TestServiceServer,
};
use super::proto::FILE_DESCRIPTOR_SET;
use super::Lab;
use super::{echo, spin};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use tokio::runtime::Handle;
use tokio::sync::watch;
use tokio_stream::StreamExt;
use tokio_util::task::AbortOnDropHandle;
use tonic::codec::CompressionEncoding::Gzip;
use tonic::transport::server::TcpIncoming;
use tonic::transport::Server;
use tonic::Status;
use tonic_health::pb::health_server::HealthServer;

/// Starts one network thread per core, each serving `listener` until `stopped` turns true
/// (or its sender is gone) and then draining for at most `drain`. Calls run on `calls`.
pub fn start(
    lab: &Arc<Lab>,
    listener: &std::net::TcpListener,
    stopped: &watch::Receiver<bool>,
    drain: Duration,
    calls: &Handle,
) -> anyhow::Result<Vec<JoinHandle<()>>> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut threads = Vec::with_capacity(cores);
    for i in 0..cores {
        // Each thread has its own descriptor of the one socket: whichever is free accepts.
        let listener = listener.try_clone()?;
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let (lab, stopped, calls) = (lab.clone(), stopped.clone(), calls.clone());
        let thread = std::thread::Builder::new()
            .name(format!("rpcmeter-net-{i}"))
            .spawn(move || runtime.block_on(serve(lab, listener, stopped, drain, calls)))?;
        threads.push(thread);
    }
    Ok(threads)
}

/// Streams a client may reset before the server has taken them up, per connection, before
/// h2 ends the connection with GOAWAY ENHANCE_YOUR_CALM "too_many_resets" (its guard against
/// CVE-2023-44487, "rapid reset"). h2's default, 20, was reached by `run --deadline 250us`
/// alone whenever this thread fell behind for a moment (8 callers whose deadlines pass every
/// 250 µs reset 32 streams a millisecond): calls in flight then failed UNAVAILABLE, the lab's
/// rule and not the service. grpc-go's server sends no GOAWAY for resets at all. 4096 takes a
/// stall of 100 ms at that pace; it still bounds what one connection holds (a reset stream
/// waiting holds its request's headers, a few hundred bytes), and a stream taken up costs
/// the server what a call costs, so a stranger's resets buy no more than calls would.
/// tests/serve_h2.rs sends both: 50 resets at once and 100,000 in a burst (served, with the
/// server's RSS a few MiB larger; a server that fell behind would send the GOAWAY).
const MAX_PENDING_ACCEPT_RESETS: usize = 4096;

/// One network thread's server: tonic's, with the lab's services behind `Dispatch`.
async fn serve(
    lab: Arc<Lab>,
    listener: std::net::TcpListener,
    stopped: watch::Receiver<bool>,
    drain: Duration,
    calls: Handle,
) {
    let health_service = HealthServer::new(HealthService(lab.clone()));
    // Health too, so that ghz and grpcurl can call grpc.health.v1.Health through reflection.
    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    // The descriptor set is compiled in and the tests read it back: it cannot break at run time.
    let reflection_v1 = reflection().build_v1().expect("the lab's descriptor set");
    let reflection_v1alpha = reflection().build_v1alpha().expect("the lab's descriptor set");
    let listener = tokio::net::TcpListener::from_std(listener).expect("a nonblocking std listener inside the runtime");
    // Each connection closes lingering (linger.rs): an invalid preface is closed, not reset.
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true)).map(|conn| conn.map(Lingering::new));

    let until = |mut stopped: watch::Receiver<bool>| async move {
        let _ = stopped.wait_for(|stop| *stop).await;
    };
    let builder = match lab.config.tls.as_ref().map(|tls| Server::builder().tls_config(tls.server_config())) {
        None => Server::builder(),
        Some(Ok(builder)) => builder,
        // `LabServer::start` took the very same configuration: this cannot happen.
        Some(Err(_)) => return,
    };
    // Between echo calls this thread stays awake for `--spin` (spin.rs says why).
    tokio::task::spawn(spin::between_echo_calls(lab.config.spin));
    let dispatch = lab.clone();
    let server = builder
        .http2_max_pending_accept_reset_streams(Some(MAX_PENDING_ACCEPT_RESETS))
        .layer(tower_layer::layer_fn(move |inner| Dispatch { inner, lab: dispatch.clone(), calls: calls.clone() }))
        // Clients may compress requests (`run --compression gzip`); answers go uncompressed.
        .add_service(EchoServiceServer::new(lab.clone()).accept_compressed(Gzip))
        .add_service(TestServiceServer::new(lab.clone()).accept_compressed(Gzip))
        .add_service(StorageServer::new(lab.clone()).accept_compressed(Gzip))
        .add_service(StreamingServer::new(lab.clone()).accept_compressed(Gzip))
        .add_service(StatsServer::new(lab))
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .serve_with_incoming_shutdown(incoming, until(stopped.clone()));
    tokio::select! {
        // tonic retries failed accepts itself; the server future ends only after a stop.
        _ = server => {}
        _ = async { until(stopped).await; tokio::time::sleep(drain).await } => {}
    }
}

/// A layer inside tonic's server, on the network thread: echo's fast path is answered here;
/// every other call is handed, whole, to the lab's runtime, and aborted there when the
/// network side drops it (the client reset the stream, or its grpc-timeout passed).
#[derive(Clone)]
struct Dispatch<S> {
    inner: S,
    lab: Arc<Lab>,
    calls: Handle,
}

type BoxFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>;

impl<S, B> tower_service::Service<http::Request<B>> for Dispatch<S>
where
    S: tower_service::Service<http::Request<Unread<B>>, Response = http::Response<tonic::body::Body>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        if let Some(refusal) = not_grpc(&request) {
            // The rest of the request is still read, as after any answer that leaves first.
            drop(Unread::new(request.into_body()));
            return Box::pin(std::future::ready(Ok(refusal)));
        }
        if echo::takes_fast_path(&request) {
            spin::echo_arrived();
            let lab = self.lab.clone();
            return Box::pin(async move { Ok(echo::fast_echo(&lab, request.into_body()).await) });
        }
        let path = request.uri().path().to_owned();
        let request = request.map(Unread::new);
        let running = AbortOnDropHandle::new(self.calls.spawn(self.inner.call(request)));
        Box::pin(async move {
            match running.await {
                Ok(answer) => answer.map(|response| name_unknown_method(response, &path)),
                Err(ended) if ended.is_panic() => Ok(Status::internal("the call panicked").into_http()),
                Err(_) => Ok(Status::unavailable("the server is stopping").into_http()),
            }
        })
    }
}

/// The answer to a request that is not a gRPC call, as grpc-go's `ServeHTTP` gives it
/// (<https://github.com/grpc/grpc-go/blob/v1.72.1/internal/transport/handler_server.go>):
/// 405 to a method other than POST, then 415 to a content-type other than gRPC's, each with a
/// line of text saying why. gRPC's protocol asks for the 415
/// (<https://github.com/grpc/grpc/blob/master/doc/PROTOCOL-HTTP2.md>, "Content-Type") so that
/// no other HTTP client takes a gRPC error, HTTP 200, for a success. grpc-go's own transport
/// sends the same statuses in headers alone, with a grpc-status; the body here makes it an
/// ordinary HTTP answer, which h2spec's generic/2/2 and 2/3 want (a DATA frame). tonic would
/// route such a request as a call: UNIMPLEMENTED in trailers only. None for a gRPC request.
fn not_grpc<B>(request: &http::Request<B>) -> Option<http::Response<tonic::body::Body>> {
    let (status, problem) = if request.method() != http::Method::POST {
        (http::StatusCode::METHOD_NOT_ALLOWED, format!("invalid gRPC request method {:?}", request.method().as_str()))
    } else {
        let content_type = request.headers().get(http::header::CONTENT_TYPE).map_or(&b""[..], |v| v.as_bytes());
        if is_grpc(content_type) {
            return None;
        }
        let content_type = String::from_utf8_lossy(content_type);
        (http::StatusCode::UNSUPPORTED_MEDIA_TYPE, format!("invalid gRPC request content-type {content_type:?}"))
    };
    let body = http_body_util::Full::new(bytes::Bytes::from(problem + "\n"));
    let mut response = http::Response::new(tonic::body::Body::new(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/plain; charset=utf-8"));
    if status == http::StatusCode::METHOD_NOT_ALLOWED {
        headers.insert(http::header::ALLOW, http::HeaderValue::from_static("POST"));
    }
    Some(response)
}

/// gRPC's content-type, `application/grpc` alone or followed by `+subtype` or `;parameters`,
/// as grpc-go reads it (`ContentSubtype` in its internal/grpcutil/method.go).
fn is_grpc(content_type: &[u8]) -> bool {
    match content_type.strip_prefix(b"application/grpc") {
        Some(rest) => rest.first().is_none_or(|c| matches!(c, b'+' | b';')),
        None => false,
    }
}

/// How long the rest of a request is read after the service dropped it unread.
const UNREAD_GRACE: Duration = Duration::from_secs(1);

/// A request's body as the service sees it. A service may answer before the request has
/// ended (an unknown method answers at once); dropped then, the body is read on to its end
/// in the background for up to `UNREAD_GRACE`. Without that, h2 would reset the stream
/// (NO_ERROR) as soon as the answer went, and ignore whatever else the client sent on it,
/// a malformed trailer or a DATA after its own reset included, where HTTP/2 wants a stream
/// error: h2spec http2/8.1/1, 8.1.2.1/3 and 5.1/8 failed whenever the answer left first
/// (tests/serve_h2.rs).
pub struct Unread<B: http_body::Body + Send + 'static> {
    body: Option<std::pin::Pin<Box<B>>>,
    ended: bool,
}

impl<B: http_body::Body + Send + 'static> Unread<B> {
    fn new(body: B) -> Self {
        Unread { body: Some(Box::pin(body)), ended: false }
    }
}

impl<B: http_body::Body + Send + 'static> http_body::Body for Unread<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<B::Data>, B::Error>>> {
        let Some(body) = self.body.as_mut() else { return std::task::Poll::Ready(None) };
        let frame = std::task::ready!(body.as_mut().poll_frame(cx));
        if !matches!(frame, Some(Ok(_))) {
            self.ended = true;
        }
        std::task::Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.body.as_ref().is_none_or(|b| b.is_end_stream())
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.as_ref().map_or_else(|| http_body::SizeHint::with_exact(0), |b| b.size_hint())
    }
}

impl<B: http_body::Body + Send + 'static> Drop for Unread<B> {
    fn drop(&mut self) {
        let Some(mut body) = self.body.take() else { return };
        if self.ended || body.is_end_stream() {
            return;
        }
        // Dropped outside a runtime (never, in the lab): the stream is reset at once, as before.
        let Ok(runtime) = Handle::try_current() else { return };
        runtime.spawn(async move {
            let _ = tokio::time::timeout(UNREAD_GRACE, async {
                while let Some(Ok(_)) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {}
            })
            .await;
        });
    }
}

/// tonic answers a method it does not know (in a known service or not) with UNIMPLEMENTED
/// and no message: the answer names the method, so that a typo shows in the client's error.
fn name_unknown_method(response: http::Response<tonic::body::Body>, path: &str) -> http::Response<tonic::body::Body> {
    let headers = response.headers();
    let unimplemented = headers.get("grpc-status").is_some_and(|s| s.as_bytes() == b"12");
    if unimplemented && headers.get("grpc-message").is_none_or(|m| m.is_empty()) {
        return Status::unimplemented(format!("unknown method {path}")).into_http();
    }
    response
}
