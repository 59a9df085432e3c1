//! The streaming service (docs/design.md, "Interfaces added in turn 2"): one method per
//! streaming kind, each stream counted as a call and each message as a message. Streams are
//! not admitted through the execution model: a long-lived stream would hold one of its
//! workers for its whole life, and a stream's work is the transport's, not the server's.
use super::proto::lab::{streaming_server, Chunk, SubscribeRequest, UploadSummary};
use super::stats::{Method, Outcome};
use super::Lab;
use futures::{Stream, StreamExt};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tonic::{Request, Response, Status, Streaming};

/// The largest chunk Subscribe makes: gRPC's usual largest message (4 MiB).
pub const MAX_CHUNK_BYTES: u32 = 4 << 20;
/// The longest pause Subscribe takes between chunks.
const MAX_INTERVAL: Duration = Duration::from_secs(3600);

type Chunks = Pin<Box<dyn Stream<Item = Result<Chunk, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl streaming_server::Streaming for Arc<Lab> {
    type SubscribeStream = Chunks;
    type EchoStream = Chunks;

    /// `count` chunks of `size` bytes (0: until the client cancels), `interval_us` apart.
    /// Each chunk is made when the transport asks for it, so a slow reader is never buffered for.
    async fn subscribe(&self, request: Request<SubscribeRequest>) -> Result<Response<Chunks>, Status> {
        let call = self.stats.arrive(Method::Subscribe);
        call.message_in();
        let SubscribeRequest { count, size, interval_us } = request.into_inner();
        if size > MAX_CHUNK_BYTES {
            return Err(Status::invalid_argument(format!("size {size} is more than {MAX_CHUNK_BYTES} bytes")));
        }
        let interval = Duration::from_micros(interval_us);
        if interval > MAX_INTERVAL {
            return Err(Status::invalid_argument(format!("interval_us {interval_us} is more than an hour")));
        }
        let payload = bytes::Bytes::from(vec![b'x'; size as usize]);
        let chunks = futures::stream::unfold((Some(call), 0u64), move |(call, seq)| {
            let payload = payload.clone();
            async move {
                let call = call?;
                if count != 0 && seq == count as u64 {
                    call.finish(Outcome::Ok);
                    return None;
                }
                if seq > 0 && !interval.is_zero() {
                    tokio::time::sleep(interval).await;
                }
                call.message_out();
                Some((Ok(Chunk { payload: payload.to_vec(), seq }), (Some(call), seq + 1)))
            }
        });
        // Dropped before its end (the client cancelled): the guard counts the call as failed.
        Ok(Response::new(Box::pin(chunks)))
    }

    /// Counts what arrives until the client closes its side.
    async fn upload(&self, request: Request<Streaming<Chunk>>) -> Result<Response<UploadSummary>, Status> {
        let call = self.stats.arrive(Method::Upload);
        let mut inbound = request.into_inner();
        let mut summary = UploadSummary::default();
        while let Some(chunk) = inbound.message().await? {
            call.message_in();
            summary.chunks += 1;
            summary.bytes += chunk.payload.len() as u64;
        }
        call.message_out();
        call.finish(Outcome::Ok);
        Ok(Response::new(summary))
    }

    /// Each chunk echoed as it arrives (the gRPC benchmark's STREAMING ping-pong); the stream
    /// ends when the client closes its side.
    async fn echo(&self, request: Request<Streaming<Chunk>>) -> Result<Response<Chunks>, Status> {
        let call = self.stats.arrive(Method::StreamEcho);
        let inbound = request.into_inner();
        let echoed = futures::stream::unfold((Some(call), inbound), |(call, mut inbound)| async move {
            let call = call?;
            match inbound.next().await {
                Some(Ok(chunk)) => {
                    call.message_in();
                    call.message_out();
                    Some((Ok(chunk), (Some(call), inbound)))
                }
                Some(Err(status)) => Some((Err(status), (None, inbound))),
                None => {
                    call.finish(Outcome::Ok);
                    None
                }
            }
        });
        Ok(Response::new(Box::pin(echoed)))
    }
}
