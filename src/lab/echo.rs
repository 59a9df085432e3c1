//! The latch benchmark's echo service (docs/experiments.md, "Echo warm-up"): the cheapest
//! call, the one the benchmark measures. It skips the execution model, as streams do: it
//! does no work a model could admit or queue, so a latch burst of any size is answered, not
//! refused, and what the benchmark measures is the stack. `fast_echo` answers it on the
//! network thread (network.rs), without tonic's router and codec; the service below answers
//! what that path leaves to tonic.
use super::proto::echo::{echo_service_server::EchoService, Message};
use super::stats::{Method, Outcome};
use super::Lab;
use std::sync::Arc;
use tonic::{Request, Response, Status};

#[tonic::async_trait]
impl EchoService for Arc<Lab> {
    async fn echo(&self, request: Request<Message>) -> Result<Response<Message>, Status> {
        count_answered(self);
        Ok(Response::new(request.into_inner()))
    }
}

/// Counts one echo answered, on either path: its message in and out.
fn count_answered(lab: &Lab) {
    let call = lab.stats.arrive(Method::Echo);
    call.message_in();
    call.message_out();
    call.finish(Outcome::Ok);
}

/// Whether a request takes echo's fast path (issue 18), answered on the network thread
/// (network.rs) without tonic's router (axum), per-call boxing and codec: `serve`'s most
/// benchmarked call. Under h2load, 3 interleaved rounds, it moved echo from 1.57x grpc-go's
/// calls/s to 1.66x at 8 streams and from 1.09x to 1.31x at 64 (docs/design.md, "`serve`'s
/// echo"). Only plain requests take it: a compressed one goes the usual way, and tonic answers it.
pub fn takes_fast_path<B>(request: &http::Request<B>) -> bool {
    request.uri().path() == Method::Echo.path()
        && request.headers().get("grpc-encoding").is_none_or(|e| e == "identity")
}

/// tonic's default limit on a received message, which the usual path applies.
const MAX_MESSAGE: usize = 4 << 20;

/// Echo's answer on the fast path, with tonic's statuses for what it refuses.
pub async fn fast_echo<B>(lab: &Lab, body: B) -> http::Response<tonic::body::Body>
where
    B: http_body::Body<Data = bytes::Bytes>,
{
    use http_body_util::BodyExt;
    // A call is counted once its request has arrived, as on the usual path, where a client
    // that resets the stream before that never reaches the service.
    let Ok(request) = body.collect().await else { return Status::cancelled("the request was reset").into_http() };
    match echoed(&request.to_bytes()) {
        Ok(frame) => {
            count_answered(lab);
            let mut trailers = http::HeaderMap::with_capacity(1);
            trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
            let mut response =
                http::Response::new(tonic::body::Body::new(Reply { data: Some(frame), trailers: Some(trailers) }));
            response
                .headers_mut()
                .insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/grpc"));
            response
        }
        Err(status) => {
            lab.stats.arrive(Method::Echo).finish(Outcome::Failed);
            status.into_http()
        }
    }
}

/// The answer's gRPC frame for a request body holding an uncompressed Message, with tonic's
/// statuses and words for what it refuses; like tonic, it ignores what follows the first message.
fn echoed(body: &[u8]) -> Result<bytes::Bytes, Status> {
    use prost::Message as _;
    let Some((&[flag, a, b, c, d], rest)) = body.split_first_chunk::<5>() else {
        return Err(Status::internal(if body.is_empty() {
            "Missing request message."
        } else {
            "Unexpected EOF decoding stream."
        }));
    };
    if flag != 0 {
        return Err(Status::internal(
            "protocol error: received message with compressed-flag but no grpc-encoding was specified",
        ));
    }
    let len = u32::from_be_bytes([a, b, c, d]) as usize;
    if len > MAX_MESSAGE {
        return Err(Status::out_of_range(format!(
            "Error, decoded message length too large: found {len} bytes, the limit is: {MAX_MESSAGE} bytes"
        )));
    }
    let Some(message) = rest.get(..len) else { return Err(Status::internal("Unexpected EOF decoding stream.")) };
    let message =
        Message::decode(message).map_err(|e| Status::internal(format!("failed to decode Protobuf message: {e}")))?;
    let mut frame = bytes::BytesMut::with_capacity(5 + message.encoded_len());
    frame.extend_from_slice(&[0; 5]);
    message.encode(&mut frame).map_err(|e| Status::internal(e.to_string()))?;
    let len = (frame.len() - 5) as u32;
    frame[1..5].copy_from_slice(&len.to_be_bytes());
    Ok(frame.freeze())
}

/// One DATA frame, then the trailers.
struct Reply {
    data: Option<bytes::Bytes>,
    trailers: Option<http::HeaderMap>,
}

impl http_body::Body for Reply {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, Self::Error>>> {
        let frame = match self.data.take() {
            Some(data) => Some(http_body::Frame::data(data)),
            None => self.trailers.take().map(http_body::Frame::trailers),
        };
        std::task::Poll::Ready(frame.map(Ok))
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_none() && self.trailers.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    fn frame(flag: u8, message: &[u8]) -> Vec<u8> {
        let mut out = vec![flag];
        out.extend_from_slice(&(message.len() as u32).to_be_bytes());
        out.extend_from_slice(message);
        out
    }

    #[test]
    fn the_fast_path_answers_as_tonic_does() {
        let hi = b"\x0a\x02hi"; // Message{content: "hi"}
        assert_eq!(&echoed(&frame(0, hi)).unwrap()[..], &frame(0, hi)[..]);
        // What follows the first message is ignored, as tonic's unary calls ignore it.
        let two = [frame(0, hi), frame(0, hi)].concat();
        assert_eq!(&echoed(&two).unwrap()[..], &frame(0, hi)[..]);
        let refused = |body: &[u8]| echoed(body).map(|_| ()).unwrap_err();
        assert_eq!(refused(b"").message(), "Missing request message.");
        assert_eq!(refused(&frame(0, hi)[..6]).message(), "Unexpected EOF decoding stream.");
        assert_eq!(refused(&frame(0, hi)[..3]).code(), Code::Internal);
        assert!(refused(&frame(1, hi)).message().contains("compressed-flag but no grpc-encoding"));
        let mut huge = frame(0, b"");
        huge[1..5].copy_from_slice(&(MAX_MESSAGE as u32 + 1).to_be_bytes());
        assert_eq!(refused(&huge).code(), Code::OutOfRange);
        assert!(refused(&frame(0, b"\x0a\x05hi")).message().starts_with("failed to decode Protobuf message"));
    }
}
