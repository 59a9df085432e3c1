//! Streaming calls on the same connections as unary ones: a stream is a call whose body is
//! a schedule of messages (ghz's `--stream-call-count`, `--stream-call-duration`,
//! `--stream-interval`). Messages are counted as they pass and never kept, but for the last
//! one when a workload step reads it.
use super::{finish, h2_failure as failure, within_deadline, Connection, Metadata, PreparedCall, Reply};
use crate::grpc::wire::{http_status_code, Deframer};
use bytes::Bytes;
use h2::{RecvStream, SendStream};
use http::{HeaderMap, StatusCode};
use std::time::{Duration, Instant};
use tonic::Code;

/// Which messages a method's call carries each way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum CallKind {
    Unary,
    /// Many requests, one response.
    ClientStream,
    /// One request, many responses.
    ServerStream,
    /// Many each way; run as ping-pong: each request waits for one response.
    Bidi,
}

impl CallKind {
    pub fn of(client_streaming: bool, server_streaming: bool) -> CallKind {
        match (client_streaming, server_streaming) {
            (false, false) => CallKind::Unary,
            (true, false) => CallKind::ClientStream,
            (false, true) => CallKind::ServerStream,
            (true, true) => CallKind::Bidi,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            CallKind::Unary => "unary",
            CallKind::ClientStream => "client streaming",
            CallKind::ServerStream => "server streaming",
            CallKind::Bidi => "bidirectional streaming",
        }
    }
}

/// When a stream ends, as ghz reads its flags: client and bidi streams send `count` messages
/// (or for `duration`) `interval` apart, then close their side and wait for the server's end;
/// a server stream is cancelled once `count` messages arrived or `duration` passed. An end
/// the client chose is an OK stream: the limit was the plan, not a failure.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamLimits {
    pub count: Option<u64>,
    pub duration: Option<Duration>,
    pub interval: Duration,
    pub bidi: Bidi,
    pub cancel: Option<CancelAfter>,
}

/// When the client cancels each stream itself (`--cancel-after`; grpc interop's
/// cancel_after_begin and cancel_after_first_response): it resets the stream (RST_STREAM
/// CANCEL), and the stream is OK unless the server ended it first with a status of its own,
/// as a server stream cut by its count is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelAfter {
    /// Once the stream is open, before any message.
    Begin,
    /// Once the first response message arrived (not on client streams: their one response
    /// ends them).
    FirstResponse,
    /// This long after the stream was opened, whatever it is doing.
    Time(Duration),
}

/// When a client or bidi stream's next request leaves: `--stream-interval` after the last
/// send, at most `--stream-call-count` of them, and the stream lasts its duration even when
/// its last message left earlier.
struct SendSchedule {
    index: u64,
    next_send: Instant,
    limits: StreamLimits,
    until: Option<Instant>,
}

impl SendSchedule {
    fn new(opened: Instant, limits: StreamLimits, until: Option<Instant>) -> SendSchedule {
        SendSchedule { index: 0, next_send: opened, limits, until }
    }

    /// Waits for the next request's turn and gives its index; None once the stream is done.
    async fn next(&mut self) -> Option<u64> {
        if self.limits.count.is_some_and(|n| self.index >= n) {
            return None;
        }
        if let Some(at) = self.until.filter(|at| self.next_send >= *at) {
            tokio::time::sleep_until(at.into()).await;
            return None;
        }
        if self.next_send > Instant::now() {
            tokio::time::sleep_until(self.next_send.into()).await;
        }
        Some(self.index)
    }

    fn sent(&mut self, at: Instant) {
        self.index += 1;
        self.next_send = at + self.limits.interval;
    }

    /// Whether request `index` is the last the count allows.
    fn is_last(&self, index: u64) -> bool {
        self.limits.count.is_some_and(|n| index + 1 >= n)
    }
}

/// A logged stream as it is sent again (`run --replay`): each time is since the stream opened, the logged one
/// divided by `--speed`.
#[derive(Debug, Clone, Default)]
pub struct Script {
    /// The client's messages, framed, each with when it leaves.
    pub messages: Vec<(Duration, Bytes)>,
    /// When the client closes its side (after its last message); None: never, the stream is
    /// reset first (its client cancelled while it was still sending).
    pub close: Option<Duration>,
    /// When the client cancels the stream, when the log ended it CANCELLED (a client's log
    /// logs its cancel, a server's a CANCELLED status): the stream is reset then.
    pub cancel: Option<Duration>,
}

/// What a stream sends while its responses are read as they come.
trait Sends {
    /// The next message once its time has come; None once there is none left.
    async fn next(&mut self) -> Option<Bytes>;
    /// Waits until our side is to be closed.
    async fn close(&mut self);
}

/// The `--stream-*` flags' schedule (`--bidi free`).
struct Scheduled<'a> {
    schedule: SendSchedule,
    message: &'a mut dyn FnMut(u64) -> Bytes,
}

impl Sends for Scheduled<'_> {
    async fn next(&mut self) -> Option<Bytes> {
        let index = self.schedule.next().await?;
        self.schedule.sent(Instant::now());
        Some((self.message)(index))
    }

    /// The schedule's end already waited for the stream's duration.
    async fn close(&mut self) {}
}

/// A logged stream's times (`Connection::replay`).
struct Logged<'a> {
    opened: Instant,
    messages: std::slice::Iter<'a, (Duration, Bytes)>,
    close: Option<Duration>,
}

impl Sends for Logged<'_> {
    async fn next(&mut self) -> Option<Bytes> {
        let (at, message) = self.messages.next()?;
        tokio::time::sleep_until((self.opened + *at).into()).await;
        Some(message.clone())
    }

    async fn close(&mut self) {
        match self.close {
            Some(close) => tokio::time::sleep_until((self.opened + close).into()).await,
            None => std::future::pending().await,
        }
    }
}

/// `wait`'s outcome, or None once `until` has passed first.
async fn within<T>(until: Option<Instant>, wait: impl std::future::Future<Output = T>) -> Option<T> {
    match until {
        Some(at) => tokio::time::timeout_at(at.into(), wait).await.ok(),
        None => Some(wait.await),
    }
}

/// How a bidi stream's requests wait for its responses (`--bidi`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Bidi {
    /// Each request waits for one response; round trips are measured.
    #[default]
    PingPong,
    /// Requests leave on their schedule while responses are read as they come: servers that
    /// answer only once the client has closed its side (half-duplex) work too.
    Free,
}

/// What a stream reports as it goes; the engine records it into histograms.
pub trait StreamObserver {
    /// A request message left (its size without the prefix).
    fn sent(&mut self, bytes: u64);
    /// A whole response message arrived; `first` for the stream's first one, `after` the
    /// stream was opened (time to first message).
    fn received(&mut self, first: bool, after: Duration);
    /// Bidi ping-pong: a request's response came back `took` after it was sent.
    fn round_trip(&mut self, took: Duration);
}

impl Connection {
    /// One streaming call of `kind`; message `i` of the stream is `message(i)`, framed.
    /// `keep`: the reply brings the last whole response message (a workload step's captures
    /// and checks read it; the others are never kept) and the response's headers and trailers.
    pub async fn stream(
        &self,
        call: &PreparedCall,
        kind: CallKind,
        limits: StreamLimits,
        keep: bool,
        message: &mut dyn FnMut(u64) -> Bytes,
        observer: &mut dyn StreamObserver,
    ) -> Reply {
        let seen = Seen::default();
        let exchange = self.stream_exchange(call, kind, limits, keep, &seen, message, observer);
        let exchange = async {
            let Some(CancelAfter::Time(after)) = limits.cancel else { return exchange.await };
            match tokio::time::timeout(after, exchange).await {
                Ok(reply) => reply,
                // Dropped, the exchange resets its stream (RST_STREAM CANCEL).
                Err(_) => seen.cancelled(keep),
            }
        };
        within_deadline(call.deadline, exchange).await
    }

    #[allow(clippy::too_many_arguments)] // one call's parts, each used once: no struct of its own
    async fn stream_exchange(
        &self,
        call: &PreparedCall,
        kind: CallKind,
        limits: StreamLimits,
        keep: bool,
        seen: &Seen,
        message: &mut dyn FnMut(u64) -> Bytes,
        observer: &mut dyn StreamObserver,
    ) -> Reply {
        let opened = Instant::now();
        let until = limits.duration.and_then(|d| opened.checked_add(d));
        let (response, mut out) = match self.open(&call.path, call.headers.clone()).await {
            Ok(pair) => pair,
            Err(reply) => return reply,
        };
        let inbound = Inbound::new(response, call.messages.receive, opened, keep, seen);
        if limits.cancel == Some(CancelAfter::Begin) {
            // h2 sends the stream's HEADERS before the reset, so the server sees it begin.
            return inbound.cancel(&mut out);
        }
        let first_response = limits.cancel == Some(CancelAfter::FirstResponse);
        let mut inbound = inbound;
        let mut outgoing = Outgoing { call, out: &mut out };
        if kind == CallKind::ServerStream {
            if let Err(reply) = outgoing.send(message(0), true, observer).await {
                return self.or_status(reply, inbound, observer).await;
            }
            let count = if first_response { Some(1) } else { limits.count };
            loop {
                if count.is_some_and(|n| inbound.reported >= n) {
                    return inbound.cancel(&mut out);
                }
                match within(until, inbound.next(observer)).await {
                    None => return inbound.cancel(&mut out),
                    Some(Ok(true)) => {}
                    Some(Ok(false)) => return inbound.finish(None, observer).await,
                    Some(Err(reply)) => return reply,
                }
            }
        }
        if kind == CallKind::Bidi && limits.bidi == Bidi::Free {
            return self.free_bidi(outgoing, inbound, limits, until, message, observer).await;
        }
        // Client and bidi streams: the schedule of requests, then our side closes. The last
        // counted request closes it itself: a ping-pong server that answers only some
        // requests (grpc interop's FullDuplexCall without response parameters) sees the end
        // instead of waiting for more while we wait for its answer.
        let mut schedule = SendSchedule::new(opened, limits, until);
        let mut closed = false;
        while let Some(index) = schedule.next().await {
            let sent_at = Instant::now();
            closed = schedule.is_last(index);
            if let Err(reply) = outgoing.send(message(index), closed, observer).await {
                return self.or_status(reply, inbound, observer).await;
            }
            schedule.sent(sent_at);
            if kind == CallKind::Bidi {
                match within(until, inbound.next(observer)).await {
                    Some(Ok(true)) if first_response => {
                        observer.round_trip(sent_at.elapsed());
                        return inbound.cancel(outgoing.out);
                    }
                    Some(Ok(true)) => observer.round_trip(sent_at.elapsed()),
                    // The server ended the stream first: its status says why.
                    Some(Ok(false)) => return inbound.finish(None, observer).await,
                    Some(Err(reply)) => return reply,
                    // The stream's time is up while its answer is awaited: our side closes.
                    None => break,
                }
            }
        }
        if !closed {
            if let Err(reply) = outgoing.send(Bytes::new(), true, observer).await {
                return self.or_status(reply, inbound, observer).await;
            }
        }
        let expected = (kind == CallKind::ClientStream).then_some(1);
        inbound.finish(expected, observer).await
    }

    /// A bidi stream whose requests leave on their schedule (then our side closes) while its
    /// responses are read as they come; the server's end stops the sending.
    async fn free_bidi(
        &self,
        outgoing: Outgoing<'_>,
        inbound: Inbound<'_>,
        limits: StreamLimits,
        until: Option<Instant>,
        message: &mut dyn FnMut(u64) -> Bytes,
        observer: &mut dyn StreamObserver,
    ) -> Reply {
        let schedule = SendSchedule::new(inbound.opened, limits, until);
        let first_response = limits.cancel == Some(CancelAfter::FirstResponse);
        self.both_ways(outgoing, inbound, Scheduled { schedule, message }, first_response, observer).await
    }

    /// A logged stream sent again (`run --replay`): its messages at their times since it
    /// opened, its side closed at its time, its responses read as they come (whatever the
    /// kind: a logged stream keeps its times, not a ping-pong's); reset at `script.cancel`,
    /// an OK stream as `--cancel-after` makes it.
    pub async fn replay(
        &self,
        call: &PreparedCall,
        script: &Script,
        keep: bool,
        observer: &mut dyn StreamObserver,
    ) -> Reply {
        let seen = Seen::default();
        let exchange = async {
            let opened = Instant::now();
            let (response, mut out) = match self.open(&call.path, call.headers.clone()).await {
                Ok(pair) => pair,
                Err(reply) => return reply,
            };
            let inbound = Inbound::new(response, call.messages.receive, opened, keep, &seen);
            let outgoing = Outgoing { call, out: &mut out };
            let logged = Logged { opened, messages: script.messages.iter(), close: script.close };
            self.both_ways(outgoing, inbound, logged, false, observer).await
        };
        let exchange = async {
            let Some(after) = script.cancel else { return exchange.await };
            match tokio::time::timeout(after, exchange).await {
                Ok(reply) => reply,
                // Dropped, the exchange resets its stream (RST_STREAM CANCEL).
                Err(_) => seen.cancelled(keep),
            }
        };
        within_deadline(call.deadline, exchange).await
    }

    /// Sends what `sends` gives as it gives it, then closes our side, while the responses are
    /// read as they come; the server's end stops the sending. `first_response`: the stream is
    /// cancelled once the first response came.
    async fn both_ways(
        &self,
        mut outgoing: Outgoing<'_>,
        mut inbound: Inbound<'_>,
        mut sends: impl Sends,
        first_response: bool,
        observer: &mut dyn StreamObserver,
    ) -> Reply {
        use futures::future::{select, Either};
        let shared = std::cell::RefCell::new(observer);
        let ended = {
            let sending = async {
                let mut relay = Relay(&shared);
                while let Some(message) = sends.next().await {
                    outgoing.send(message, false, &mut relay).await?;
                }
                sends.close().await;
                outgoing.send(Bytes::new(), true, &mut relay).await
            };
            // Ok(true): the first answer came and the stream is to be cancelled.
            let receiving = async {
                let mut relay = Relay(&shared);
                while inbound.next(&mut relay).await? {
                    if first_response {
                        return Ok(true);
                    }
                }
                Ok(false)
            };
            match select(std::pin::pin!(sending), std::pin::pin!(receiving)).await {
                Either::Left((Ok(()), receiving)) => receiving.await.map_err(Ended::Read),
                Either::Left((Err(reply), _)) => Err(Ended::Send(reply)),
                // The server ended its side first (its status follows): sending stops.
                Either::Right((read, _)) => read.map_err(Ended::Read),
            }
        };
        let observer = shared.into_inner();
        match ended {
            Ok(true) => inbound.cancel(outgoing.out),
            Ok(false) => inbound.finish(None, observer).await,
            Err(Ended::Read(reply)) => reply,
            Err(Ended::Send(reply)) => self.or_status(reply, inbound, observer).await,
        }
    }

    /// A send that failed: the server may have ended the stream with a status (a
    /// trailers-only answer and a reset); that status is the call's, else the send's failure.
    async fn or_status(&self, failed: Reply, inbound: Inbound<'_>, observer: &mut dyn StreamObserver) -> Reply {
        match tokio::time::timeout(Duration::from_millis(100), inbound.finish(None, observer)).await {
            Ok(reply) if reply.status != Code::Unavailable && reply.status != Code::Internal => reply,
            _ => failed,
        }
    }
}

/// Why a free bidi stream stopped before its status: a send or a read failed.
enum Ended {
    Send(Reply),
    Read(Reply),
}

/// One observer for both sides of a free bidi stream, borrowed only for each report.
struct Relay<'a, 'b>(&'a std::cell::RefCell<&'b mut dyn StreamObserver>);

impl StreamObserver for Relay<'_, '_> {
    fn sent(&mut self, bytes: u64) {
        self.0.borrow_mut().sent(bytes);
    }
    fn received(&mut self, first: bool, after: Duration) {
        self.0.borrow_mut().received(first, after);
    }
    fn round_trip(&mut self, took: Duration) {
        self.0.borrow_mut().round_trip(took);
    }
}

/// The request side of a stream.
struct Outgoing<'a> {
    call: &'a PreparedCall,
    out: &'a mut SendStream<Bytes>,
}

impl Outgoing<'_> {
    /// Sends one framed message (`end`: and closes our side; an empty body only closes),
    /// waiting for flow-control window so that a fast sender never queues without bound.
    async fn send(&mut self, framed: Bytes, end: bool, observer: &mut dyn StreamObserver) -> Result<(), Reply> {
        if framed.is_empty() {
            return self.out.send_data(framed, end).map_err(|e| failure(&e));
        }
        let size = framed.len().saturating_sub(5);
        if size > self.call.messages.send {
            let why = format!("trying to send message larger than max ({size} vs. {})", self.call.messages.send);
            return Err(Reply::error(Code::ResourceExhausted, why));
        }
        let mut data = if self.call.messages.gzip { crate::grpc::wire::gzip_frame(&framed) } else { framed };
        while !data.is_empty() {
            self.out.reserve_capacity(data.len());
            let granted = match std::future::poll_fn(|cx| self.out.poll_capacity(cx)).await {
                Some(Ok(n)) => n,
                Some(Err(e)) => return Err(failure(&e)),
                None => return Err(Reply::error(Code::Unavailable, "stream closed while sending")),
            };
            if granted == 0 {
                continue;
            }
            let piece = data.split_to(granted.min(data.len()));
            self.out.send_data(piece, end && data.is_empty()).map_err(|e| failure(&e))?;
        }
        observer.sent(size as u64);
        Ok(())
    }
}

/// What a stream received so far, kept outside it: a stream cancelled by time
/// (`CancelAfter::Time`) is dropped whole, and its reply still says what came.
#[derive(Default)]
struct Seen {
    /// Response payload bytes of whole and partial messages.
    bytes: std::cell::Cell<u64>,
    /// The response's headers, when kept.
    headers: std::cell::RefCell<Vec<(String, String)>>,
    /// The last response message counted, when kept.
    last: std::cell::RefCell<Option<Vec<u8>>>,
}

impl Seen {
    /// The OK reply of a stream the client ended itself (it has no trailers).
    fn cancelled(&self, keep: bool) -> Reply {
        let headers = if keep { self.headers.take() } else { Vec::new() };
        Reply {
            status: Code::Ok,
            response_bytes: self.bytes.get(),
            response: self.last.take().map(Bytes::from),
            message: None,
            metadata: Metadata { headers, trailers: Vec::new() },
        }
    }
}

/// A stream's response messages kept for its reply: whole ones wait in `whole` until counted,
/// so that the last one is the last counted (a frame may bring more than `--stream-call-count`
/// lets count); at most a frame's worth wait. The last counted goes to `Seen::last`.
#[derive(Default)]
struct Kept {
    current: Vec<u8>,
    whole: std::collections::VecDeque<Vec<u8>>,
}

/// The response side of a stream: whole messages counted as they complete.
struct Inbound<'a> {
    response: Option<h2::client::ResponseFuture>,
    body: Option<RecvStream>,
    /// A trailers-only answer: the status is in the headers.
    ended: Option<HeaderMap>,
    /// When the reply is to bring the last message counted.
    kept: Option<Kept>,
    /// Whether the reply brings the response's headers and trailers (`Connection::stream`'s
    /// `keep`); the headers are kept in `seen`.
    keep: bool,
    seen: &'a Seen,
    messages: Deframer,
    /// Whole messages already handed to the observer.
    reported: u64,
    opened: Instant,
}

impl<'a> Inbound<'a> {
    fn new(response: h2::client::ResponseFuture, max: usize, opened: Instant, keep: bool, seen: &'a Seen) -> Self {
        Inbound {
            response: Some(response),
            body: None,
            ended: None,
            kept: keep.then(Default::default),
            keep,
            seen,
            messages: Deframer::new(max),
            reported: 0,
            opened,
        }
    }

    /// Waits for the next whole message: true when one arrived, false when the server's data
    /// ended (its status follows).
    async fn next(&mut self, observer: &mut dyn StreamObserver) -> Result<bool, Reply> {
        // Polled in place, not taken: a wait cut short by the stream's duration must leave
        // the answer to `finish`.
        if let Some(pending) = self.response.as_mut() {
            let response = pending.await;
            self.response = None;
            let response = response.map_err(|e| failure(&e))?;
            if response.status() != StatusCode::OK {
                let status = response.status();
                return Err(Reply::error(http_status_code(status), format!("HTTP status {status}")));
            }
            if response.headers().contains_key("grpc-status") {
                self.ended = Some(response.headers().clone());
            } else {
                if self.keep {
                    self.seen.headers.replace(Metadata::of(response.headers()));
                }
                self.body = Some(response.into_body());
            }
        }
        loop {
            if self.messages.completed() > self.reported {
                self.reported += 1;
                if let Some(kept) = self.kept.as_mut() {
                    self.seen.last.replace(kept.whole.pop_front());
                }
                observer.received(self.reported == 1, self.opened.elapsed());
                return Ok(true);
            }
            let Some(body) = self.body.as_mut() else { return Ok(false) };
            let chunk = match body.data().await {
                None => return Ok(false),
                Some(Err(e)) => return Err(failure(&e)),
                Some(Ok(chunk)) => chunk,
            };
            let fed = match self.kept.as_mut() {
                Some(kept) => self.messages.feed_keeping_each(&chunk, &mut kept.current, &mut kept.whole),
                None => self.messages.feed(&chunk, None),
            };
            self.seen.bytes.set(self.messages.payload);
            let _ = body.flow_control().release_capacity(chunk.len());
            // Dropping the stream resets it: the rest is not read.
            fed?;
        }
    }

    /// Reads what is left and the status; an OK must bring `expected` messages when given.
    async fn finish(mut self, expected: Option<u64>, observer: &mut dyn StreamObserver) -> Reply {
        loop {
            match self.next(observer).await {
                Ok(true) => {}
                Ok(false) => break,
                Err(reply) => return reply,
            }
        }
        // As a unary call's: a trailers-only answer's metadata is its trailers.
        let last = self.seen.last.take();
        if let Some(ended) = self.ended.take() {
            let reply = finish(&ended, &self.messages, last, expected);
            return self.with_metadata(reply, Some(&ended));
        }
        let Some(mut body) = self.body.take() else {
            return Reply::error(Code::Internal, "stream ended without a response");
        };
        match body.trailers().await {
            Ok(Some(trailers)) => {
                let reply = finish(&trailers, &self.messages, last, expected);
                self.with_metadata(reply, Some(&trailers))
            }
            Ok(None) => Reply::error(Code::Internal, "stream ended without trailers"),
            Err(e) => failure(&e),
        }
    }

    /// `reply` with the response's headers and `trailers` when they are kept.
    fn with_metadata(&mut self, mut reply: Reply, trailers: Option<&HeaderMap>) -> Reply {
        if self.keep {
            let trailers = trailers.map(Metadata::of).unwrap_or_default();
            reply.metadata = Metadata { headers: self.seen.headers.take(), trailers };
        }
        reply
    }

    /// The client's own end of a stream (a server stream's count or duration reached,
    /// `--cancel-after`): the stream is reset (CANCEL) and the call is OK.
    fn cancel(self, out: &mut SendStream<Bytes>) -> Reply {
        out.send_reset(h2::Reason::CANCEL);
        self.seen.cancelled(self.keep)
    }
}
