//! Servers that behave as grpc-go's does where rpcmeter once went wrong (issue 33, "Protocol
//! corners"). Included by tests/transport_corners.rs as a module of its own.
use rpcmeter::lab::proto::echo::echo_service_server::{EchoService, EchoServiceServer};
use rpcmeter::lab::proto::echo::Message;
use rpcmeter::lab::proto::lab::{streaming_server, Chunk, SubscribeRequest, UploadSummary};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tonic::{Request, Response, Status};

/// A server on a thread and runtime of its own (the client's runtime cannot delay it), on
/// 127.0.0.1 port 0, until the test ends.
fn on_own_thread<F: std::future::Future<Output = ()> + Send + 'static>(
    serve: impl FnOnce(tokio::net::TcpListener) -> F + Send + 'static,
) -> SocketAddr {
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            addr_tx.send(listener.local_addr().unwrap()).unwrap();
            serve(listener).await;
        });
    });
    addr_rx.recv().unwrap()
}

/// grpc-timeout's value (`100m`, `250000u`, ...) as a duration.
fn grpc_timeout(value: &str) -> Option<Duration> {
    let (digits, unit) = value.split_at(value.len().checked_sub(1)?);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// A server whose every call outlasts its deadline, ended as grpc-go's server ends it: when
/// the grpc-timeout the request carried has passed since its headers arrived, the stream is
/// reset with CANCEL (grpc-go's server starts that timer when the headers arrive). Go's timers
/// are precise to microseconds, tokio's to a millisecond: the reset goes out from a thread's
/// sleep, so it can come before the client's own timer fires, as it does from grpc-go.
/// A call without grpc-timeout is never answered. Also gives the count of calls arrived.
pub fn resets_at_the_deadline() -> (SocketAddr, Arc<AtomicU64>) {
    let arrivals = Arc::new(AtomicU64::new(0));
    let counted = arrivals.clone();
    let addr = on_own_thread(|listener| async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else { return };
            let counted = counted.clone();
            tokio::spawn(async move {
                let Ok(mut conn) = h2::server::handshake(tcp).await else { return };
                while let Some(Ok((request, mut respond))) = conn.accept().await {
                    let arrived = Instant::now();
                    counted.fetch_add(1, Ordering::SeqCst);
                    let timeout = request.headers().get("grpc-timeout").and_then(|v| grpc_timeout(v.to_str().ok()?));
                    tokio::spawn(async move {
                        let Some(timeout) = timeout else {
                            return std::future::pending::<()>().await;
                        };
                        let at = arrived + timeout;
                        let _ = tokio::task::spawn_blocking(move || {
                            std::thread::sleep(at.saturating_duration_since(Instant::now()))
                        })
                        .await;
                        respond.send_reset(h2::Reason::CANCEL);
                    });
                }
            });
        }
    });
    (addr, arrivals)
}

/// The lab's echo, where content `inflate-to:N` is answered with N bytes of 'a' (a few KiB
/// once gzip-compressed: a small answer that inflates far beyond it).
struct Echo;

#[tonic::async_trait]
impl EchoService for Echo {
    async fn echo(&self, request: Request<Message>) -> Result<Response<Message>, Status> {
        let content = request.into_inner().content;
        let content = match content.strip_prefix("inflate-to:") {
            Some(n) => "a".repeat(n.parse().unwrap()),
            None => content,
        };
        Ok(Response::new(Message { content }))
    }
}

/// A server that gzip-compresses every answer, whatever the client says it accepts, as a
/// grpc-go server does with a compressor set server-wide; serves the
/// lab's echo (see `Echo`) and server reflection over the lab's files. And, as grpc-go's
/// server does, it fails a gzip-compressed request of a client that did not say it accepts
/// gzip (grpc-accept-encoding), since it would answer in kind: INTERNAL "grpc: client does not
/// support compressor gzip".
pub fn compresses_every_answer() -> SocketAddr {
    use tonic::codec::CompressionEncoding::Gzip;
    on_own_thread(|listener| async move {
        let always_gzip = |mut request: Request<()>| {
            let accepts = request.metadata().get("grpc-accept-encoding").and_then(|v| v.to_str().ok());
            let accepts_gzip = accepts.is_some_and(|list| list.split(',').any(|name| name.trim() == "gzip"));
            if request.metadata().get("grpc-encoding").is_some_and(|v| v == "gzip") && !accepts_gzip {
                return Err(Status::internal(
                    "grpc: failed to set send compressor: grpc: client does not support compressor gzip",
                ));
            }
            // tonic compresses an answer only for a client that accepts it: say it does.
            request.metadata_mut().insert("grpc-accept-encoding", "gzip".parse().unwrap());
            Ok(request)
        };
        let reflection = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(rpcmeter::lab::proto::FILE_DESCRIPTOR_SET)
            .build_v1()
            .unwrap()
            .send_compressed(Gzip);
        let echo = EchoServiceServer::new(Echo).send_compressed(Gzip).accept_compressed(Gzip);
        tonic::transport::Server::builder()
            .layer(tonic::service::InterceptorLayer::new(always_gzip))
            .add_service(echo)
            .add_service(reflection)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
            .await
            .unwrap();
    })
}

/// The lab's Streaming/Echo answered half-duplex, as some grpc-go services do: every chunk is
/// read until the client closes its side, then all are sent back in order. Serves reflection.
struct HalfDuplex;

type Chunks = std::pin::Pin<Box<dyn futures::Stream<Item = Result<Chunk, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl streaming_server::Streaming for HalfDuplex {
    type SubscribeStream = Chunks;
    type EchoStream = Chunks;

    async fn subscribe(&self, _: Request<SubscribeRequest>) -> Result<Response<Chunks>, Status> {
        Err(Status::unimplemented("half-duplex echo only"))
    }

    async fn upload(&self, _: Request<tonic::Streaming<Chunk>>) -> Result<Response<UploadSummary>, Status> {
        Err(Status::unimplemented("half-duplex echo only"))
    }

    async fn echo(&self, request: Request<tonic::Streaming<Chunk>>) -> Result<Response<Chunks>, Status> {
        let mut inbound = request.into_inner();
        let mut chunks = Vec::new();
        while let Some(chunk) = inbound.message().await? {
            chunks.push(Ok(chunk));
        }
        Ok(Response::new(Box::pin(futures::stream::iter(chunks))))
    }
}

pub fn half_duplex() -> SocketAddr {
    on_own_thread(|listener| async move {
        let reflection = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(rpcmeter::lab::proto::FILE_DESCRIPTOR_SET)
            .build_v1()
            .unwrap();
        tonic::transport::Server::builder()
            .add_service(streaming_server::StreamingServer::new(HalfDuplex))
            .add_service(reflection)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
            .await
            .unwrap();
    })
}
