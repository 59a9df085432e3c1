//! The lean transport: a gRPC-only HTTP/2 client for `run`'s unary calls (issue 18).
//!
//! Hand-written on purpose. The `h2` crate is general HTTP/2: per call it builds an
//! `http::Request`, hashes a `HeaderMap`, HPACK-encodes it through a dynamic table and moves
//! frames through its stream store; at 64 calls in flight that was most of the client's CPU
//! (docs/design.md, "The call path: measured, not guessed"). A unary gRPC call needs far
//! less: its header block is the same for every call of a run, so it is encoded once
//! (`PreparedCall`) with no dynamic table; the request's DATA goes out from its prepared
//! bytes; responses are read in large batches and their messages counted in place
//! (`Deframer`). What HTTP/2 demands still holds: flow control both ways, the peer's
//! SETTINGS (max concurrent streams, initial window, max frame size), PING, GOAWAY,
//! RST_STREAM, CONTINUATION and padding. HPACK decoding of the responses is `loona-hpack`'s.
//!
//! One driver task per connection owns the socket; calls share its state under one mutex
//! (uncontended on `run`'s current-thread runtimes) and wake it when they have frames to send.
use bytes::{BufMut, Bytes, BytesMut};
use slab::Slab;
use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::future::{poll_fn, Future};
use std::hash::{BuildHasherDefault, Hasher};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::oneshot;
use tonic::Code;

use super::{reset_code, status_reply, Keepalive, PreparedCall, Reply};
use crate::grpc::wire::{http_status_code, percent_decode, Deframer};

const DATA: u8 = 0;
const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const PUSH_PROMISE: u8 = 5;
const PING: u8 = 6;
const GOAWAY: u8 = 7;
const WINDOW_UPDATE: u8 = 8;
const CONTINUATION: u8 = 9;

const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;

const CANCEL: u32 = 0x8;
const PROTOCOL_ERROR: u32 = 0x1;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// The frame size every peer must accept, and the largest we accept (we never raise it).
const DEFAULT_MAX_FRAME: usize = 16_384;
/// HTTP/2's initial window before SETTINGS say otherwise.
const DEFAULT_WINDOW: i64 = 65_535;
/// Our receive windows, as `handshake()` sets them for h2: large responses are not
/// throttled by WINDOW_UPDATE round trips.
const STREAM_WINDOW: u32 = 1 << 20;
const CONNECTION_WINDOW: u32 = 8 << 20;
/// The largest stream id; past it the connection can open no stream.
const MAX_STREAM_ID: u32 = (1 << 31) - 1;
/// Bytes read per read call at most: a whole round of responses at high concurrency.
const READ_BUFFER: usize = 64 << 10;
/// Reads per turn of the driver, so a flood of input cannot starve the calls it wakes.
const READS_PER_TURN: usize = 4;
/// The largest response header block taken: far above any real response's, a bound on memory.
const MAX_HEADER_BLOCK: usize = 16 << 20;
const HANDSHAKE_PING: [u8; 8] = *b"rpcmeter";
const KEEPALIVE_PING: [u8; 8] = *b"alive?..";

/// The part of every request's header block that depends on the connection, not the call:
/// `:method POST`, `:scheme`, `:authority`. HPACK static-table indices and literals
/// without indexing: nothing ever enters the peer's dynamic table, so the block is valid
/// on any connection and whatever HEADER_TABLE_SIZE the peer sets.
pub(super) fn connection_block(https: bool, authority: &str) -> Bytes {
    let mut out = BytesMut::new();
    out.put_u8(0x80 | 3); // :method POST
    out.put_u8(0x80 | if https { 7 } else { 6 }); // :scheme https / http
    literal(&mut out, Some(1), b":authority", authority.as_bytes());
    out.freeze()
}

/// One header field as an HPACK literal without indexing (RFC 7541, 6.2.2), by the static
/// table's index of its name when it has one; strings are sent as they are (no Huffman).
pub(super) fn literal(out: &mut BytesMut, name_index: Option<usize>, name: &[u8], value: &[u8]) {
    match name_index {
        Some(index) => integer(out, index, 4, 0),
        None => {
            out.put_u8(0);
            integer(out, name.len(), 7, 0);
            out.put_slice(name);
        }
    }
    integer(out, value.len(), 7, 0);
    out.put_slice(value);
}

/// An HPACK integer with an N-bit prefix (RFC 7541, 5.1).
fn integer(out: &mut BytesMut, mut value: usize, prefix_bits: u32, flags: u8) {
    let max = (1usize << prefix_bits) - 1;
    if value < max {
        out.put_u8(flags | value as u8);
        return;
    }
    out.put_u8(flags | max as u8);
    value -= max;
    while value >= 128 {
        out.put_u8((value % 128) as u8 | 0x80);
        value /= 128;
    }
    out.put_u8(value as u8);
}

fn frame_head(out: &mut BytesMut, len: usize, kind: u8, flags: u8, stream: u32) {
    out.put_uint(len as u64, 3);
    out.put_u8(kind);
    out.put_u8(flags);
    out.put_u32(stream);
}

fn window_update(out: &mut BytesMut, stream: u32, increment: u32) {
    frame_head(out, 4, WINDOW_UPDATE, 0, stream);
    out.put_u32(increment);
}

fn rst_stream(out: &mut BytesMut, stream: u32, reason: u32) {
    frame_head(out, 4, RST_STREAM, 0, stream);
    out.put_u32(reason);
}

/// Stream ids hash to themselves (spread): the map from id to slot is on every frame.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | b as u64;
        }
    }
    fn write_u32(&mut self, id: u32) {
        self.0 = (id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// One call's stream, from its HEADERS to the reply taken by the call.
struct Stream {
    id: u32,
    /// The call waiting for the reply.
    waker: Option<Waker>,
    /// Request bytes not yet sent: held back by the send windows.
    unsent: Bytes,
    /// Whether `unsent` is in `State::blocked`.
    blocked: bool,
    /// Our send window on this stream.
    window: i64,
    /// The response's HEADERS came (the next HEADERS are its trailers).
    headers_seen: bool,
    messages: Deframer,
    kept: Option<Vec<u8>>,
    /// The response's headers and trailers, kept with the response.
    metadata: Option<super::Metadata>,
    /// Bytes received since the last WINDOW_UPDATE for this stream.
    unacked: u32,
    /// Set once the stream has ended, one way or another.
    reply: Option<Reply>,
    done: bool,
}

/// The connection's state, shared by the calls and the driver.
struct State {
    /// Frames waiting for the driver to write them.
    out: BytesMut,
    driver: Option<Waker>,
    /// The driver was woken and has not run since: no need to wake it again.
    driver_woken: bool,
    max_concurrent: usize,
    peer_initial_window: i64,
    peer_max_frame: usize,
    /// Our send window on the connection.
    window: i64,
    next_id: u32,
    streams: Slab<Stream>,
    /// Open streams by id.
    ids: HashMap<u32, usize, BuildHasherDefault<IdHasher>>,
    /// Calls waiting for a free stream slot, first come first served.
    waiters: VecDeque<(u64, Waker)>,
    next_waiter: u64,
    /// Streams with request bytes held back by flow control.
    blocked: Vec<usize>,
    /// Why no new call can start here (GOAWAY, failure, stream ids used up).
    refusal: Option<String>,
    /// The socket is gone: nothing more will be read or written.
    dead: bool,
    /// Every `Connection` holding this one is gone: end once no call is open.
    abandoned: bool,
    handshake: Option<oneshot::Sender<Result<(), String>>>,
}

struct Shared {
    state: Mutex<State>,
    closed: Arc<AtomicBool>,
    /// `connection_block`, ahead of each call's own header block.
    block: Bytes,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic under the lock poisons it; the state is still consistent enough to end calls.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl State {
    fn wake_driver(&mut self) {
        if !self.driver_woken {
            self.driver_woken = true;
            if let Some(driver) = &self.driver {
                driver.wake_by_ref();
            }
        }
    }

    fn refuse(&mut self, closed: &AtomicBool, why: String) {
        closed.store(true, Ordering::Relaxed);
        if self.refusal.is_none() {
            self.refusal = Some(why);
        }
        for (_, waiter) in self.waiters.drain(..) {
            waiter.wake();
        }
    }

    /// Opens a stream for a call and writes its HEADERS and as much DATA as the windows allow.
    fn open(&mut self, shared_block: &[u8], call: &PreparedCall, body: &Bytes, keep: bool) -> Result<usize, Reply> {
        let id = self.next_id;
        self.next_id += 2;
        let block_len = shared_block.len() + call.block.len();
        if block_len <= self.peer_max_frame {
            frame_head(&mut self.out, block_len, HEADERS, END_HEADERS, id);
            self.out.put_slice(shared_block);
            self.out.put_slice(&call.block);
        } else {
            let whole = [shared_block, &call.block[..]].concat();
            let mut pieces = whole.chunks(self.peer_max_frame).peekable();
            let mut kind = HEADERS;
            while let Some(piece) = pieces.next() {
                let flags = if pieces.peek().is_none() { END_HEADERS } else { 0 };
                frame_head(&mut self.out, piece.len(), kind, flags, id);
                self.out.put_slice(piece);
                kind = CONTINUATION;
            }
        }
        let key = self.streams.insert(Stream {
            id,
            waker: None,
            unsent: body.clone(),
            blocked: false,
            window: self.peer_initial_window,
            headers_seen: false,
            messages: Deframer::new(call.messages.receive),
            kept: keep.then(Vec::new),
            metadata: keep.then(Default::default),
            unacked: 0,
            reply: None,
            done: false,
        });
        self.ids.insert(id, key);
        self.send_data(key, true);
        self.wake_driver();
        Ok(key)
    }

    /// Writes DATA frames of a stream's unsent bytes within the windows and the frame size;
    /// the last one ends the stream.
    fn send_data(&mut self, key: usize, first: bool) {
        let max_frame = self.peer_max_frame;
        let Some(stream) = self.streams.get_mut(key) else { return };
        if stream.done || (!first && stream.unsent.is_empty()) {
            return;
        }
        stream.blocked = false;
        loop {
            let room = stream.window.min(self.window).max(0) as usize;
            let n = stream.unsent.len().min(max_frame).min(room);
            if n == 0 && !stream.unsent.is_empty() {
                stream.blocked = true;
                self.blocked.push(key);
                return;
            }
            let piece = stream.unsent.split_to(n);
            let last = stream.unsent.is_empty();
            frame_head(&mut self.out, n, DATA, if last { END_STREAM } else { 0 }, stream.id);
            self.out.put_slice(&piece);
            stream.window -= n as i64;
            self.window -= n as i64;
            if last {
                return;
            }
        }
    }

    fn flush_blocked(&mut self) {
        for key in std::mem::take(&mut self.blocked) {
            if self.streams.get(key).is_some_and(|s| s.blocked) {
                self.send_data(key, false);
            }
        }
    }

    /// Ends a stream with its reply (None: its call is gone), resetting it when asked; its
    /// slot goes to the next waiting call.
    fn complete(&mut self, key: usize, reply: Option<Reply>, reset: Option<u32>) {
        let Some(stream) = self.streams.get_mut(key) else { return };
        if stream.done {
            return;
        }
        stream.done = true;
        stream.unsent = Bytes::new();
        stream.reply = reply;
        if let Some(waker) = stream.waker.take() {
            waker.wake();
        }
        let id = stream.id;
        self.ids.remove(&id);
        if let Some(reason) = reset {
            rst_stream(&mut self.out, id, reason);
            self.wake_driver();
        }
        if let Some((_, waiter)) = self.waiters.pop_front() {
            waiter.wake();
        }
    }

    /// Ends every open stream with id above `above` as UNAVAILABLE.
    fn fail_streams(&mut self, above: u32, why: &str) {
        let doomed: Vec<usize> = self.ids.iter().filter(|(&id, _)| id > above).map(|(_, &key)| key).collect();
        for key in doomed {
            self.complete(key, Some(Reply::error(Code::Unavailable, why)), None);
        }
    }

    /// The socket is gone or the peer broke the protocol: every call here ends.
    fn die(&mut self, closed: &AtomicBool, why: String) {
        self.fail_streams(0, &why);
        self.dead = true;
        if let Some(handshake) = self.handshake.take() {
            let _ = handshake.send(Err(why.clone()));
        }
        self.refuse(closed, why);
    }
}

/// A lean connection as `Connection` holds it; dropping the last one lets the driver end.
pub(super) struct Handle {
    shared: Arc<Shared>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.abandoned = true;
        state.driver_woken = false;
        state.wake_driver();
    }
}

/// Starts HTTP/2 on `io` (preface, SETTINGS, windows), spawns the driver (on the LocalSet when
/// `local`: `Connector::beside_local_tasks`) and waits for the
/// answer to a PING, so the server's SETTINGS (which precede it) rule from the first call.
pub(super) async fn handshake<T>(
    io: T,
    block: Bytes,
    closed: Arc<AtomicBool>,
    keepalive: Option<Keepalive>,
    local: bool,
) -> Result<Handle, String>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut out = BytesMut::with_capacity(16 << 10);
    out.put_slice(PREFACE);
    frame_head(&mut out, 12, SETTINGS, 0, 0);
    out.put_u16(2); // ENABLE_PUSH
    out.put_u32(0);
    out.put_u16(4); // INITIAL_WINDOW_SIZE
    out.put_u32(STREAM_WINDOW);
    window_update(&mut out, 0, CONNECTION_WINDOW - DEFAULT_WINDOW as u32);
    frame_head(&mut out, 8, PING, 0, 0);
    out.put_slice(&HANDSHAKE_PING);
    let (ready, answered) = oneshot::channel();
    let state = State {
        out,
        driver: None,
        driver_woken: false,
        max_concurrent: usize::MAX,
        peer_initial_window: DEFAULT_WINDOW,
        peer_max_frame: DEFAULT_MAX_FRAME,
        window: DEFAULT_WINDOW,
        next_id: 1,
        streams: Slab::with_capacity(64),
        ids: HashMap::default(),
        waiters: VecDeque::new(),
        next_waiter: 0,
        blocked: Vec::new(),
        refusal: None,
        dead: false,
        abandoned: false,
        handshake: Some(ready),
    };
    let shared = Arc::new(Shared { state: Mutex::new(state), closed, block });
    let mut decoder = loona_hpack::Decoder::new();
    // What our SETTINGS leave it at (the default): a peer may not grow it beyond.
    decoder.set_max_allowed_table_size(4096);
    let driver = Driver {
        io,
        shared: shared.clone(),
        inbox: vec![0; READ_BUFFER].into_boxed_slice(),
        start: 0,
        end: 0,
        outbox: BytesMut::new(),
        decoder,
        continuation: None,
        unacked: 0,
        deferred: false,
        gone: false,
        keepalive: keepalive.map(|times| Pinger {
            times,
            timer: Box::pin(tokio::time::sleep(times.every)),
            outstanding: false,
        }),
    };
    super::spawn_beside_calls(local, driver);
    // Made before the wait: given up on (connect timeout), it lets the driver end.
    let handle = Handle { shared };
    match answered.await {
        Ok(Ok(())) => Ok(handle),
        Ok(Err(why)) => Err(why),
        Err(_) => Err("HTTP/2 handshake: the connection ended".to_owned()),
    }
}

impl Handle {
    /// One unary call: waits for a stream slot, sends, waits for the end of the stream.
    /// Dropped before the end (a deadline), it resets the stream (RST_STREAM CANCEL).
    pub(super) async fn call(&self, call: &PreparedCall, body: Bytes, keep: bool) -> Reply {
        let shared = &*self.shared;
        let mut queued = Queued { shared, ticket: None };
        let key = poll_fn(|cx| {
            let mut state = shared.lock();
            if let Some(why) = &state.refusal {
                return Poll::Ready(Err(Reply::error(Code::Unavailable, why.clone())));
            }
            if state.ids.len() < state.max_concurrent {
                queued.ticket = None;
                if state.next_id > MAX_STREAM_ID {
                    state.refuse(&shared.closed, "the connection's stream ids are used up".to_owned());
                    return Poll::Ready(Err(Reply::error(Code::Unavailable, "stream ids used up")));
                }
                return Poll::Ready(state.open(&shared.block, call, &body, keep));
            }
            let queue = &mut state.waiters;
            match queued.ticket.and_then(|ticket| queue.iter_mut().find(|(t, _)| *t == ticket)) {
                Some((_, waker)) => waker.clone_from(cx.waker()),
                None => {
                    let ticket = state.next_waiter;
                    state.next_waiter += 1;
                    state.waiters.push_back((ticket, cx.waker().clone()));
                    queued.ticket = Some(ticket);
                }
            }
            Poll::Pending
        })
        .await;
        drop(queued);
        let key = match key {
            Ok(key) => key,
            Err(reply) => return reply,
        };
        let open = Open { shared, key };
        poll_fn(|cx| {
            let mut state = open.shared.lock();
            let stream = &mut state.streams[open.key];
            match stream.reply.take() {
                Some(reply) => Poll::Ready(reply),
                None => {
                    if !stream.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                        stream.waker = Some(cx.waker().clone());
                    }
                    Poll::Pending
                }
            }
        })
        .await
    }
}

/// A call waiting for a stream slot. Woken and then dropped without taking the slot (its
/// deadline passed), it hands the wake-up on, so no other waiter is left asleep.
struct Queued<'a> {
    shared: &'a Shared,
    ticket: Option<u64>,
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        let Some(ticket) = self.ticket else { return };
        let mut state = self.shared.lock();
        match state.waiters.iter().position(|(t, _)| *t == ticket) {
            Some(at) => drop(state.waiters.remove(at)),
            None => {
                if let Some((_, next)) = state.waiters.pop_front() {
                    next.wake();
                }
            }
        }
    }
}

/// A call's open stream: dropped before the reply came, the stream is reset.
struct Open<'a> {
    shared: &'a Shared,
    key: usize,
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        if !state.dead {
            state.complete(self.key, None, Some(CANCEL));
        } else {
            state.complete(self.key, None, None);
        }
        state.streams.remove(self.key);
    }
}

/// A header block being received over HEADERS and CONTINUATION frames.
struct Continuation {
    stream: u32,
    end_stream: bool,
    block: Vec<u8>,
}

/// The driver's keepalive PINGs.
struct Pinger {
    times: Keepalive,
    timer: Pin<Box<tokio::time::Sleep>>,
    /// A PING is out, unanswered; the timer is then its time limit.
    outstanding: bool,
}

/// What a response's HEADERS or trailers say that a gRPC client needs.
#[derive(Default)]
struct Head {
    status: Option<u16>,
    grpc_status: Option<Code>,
    grpc_message: Option<String>,
    /// Every header but pseudo-headers, when the stream keeps them.
    pairs: Vec<(String, String)>,
}

/// The task that owns the socket: reads and handles frames, writes what the calls queued.
struct Driver<T> {
    io: T,
    shared: Arc<Shared>,
    inbox: Box<[u8]>,
    /// Unhandled input is `inbox[start..end]`.
    start: usize,
    end: usize,
    /// Bytes being written, taken from `State::out`.
    outbox: BytesMut,
    decoder: loona_hpack::Decoder<'static>,
    continuation: Option<Continuation>,
    /// Bytes received on the connection since its last WINDOW_UPDATE.
    unacked: u32,
    /// This turn's write was put off for one turn (see `poll`).
    deferred: bool,
    /// Nothing more will be read: the peer closed, or broke the protocol.
    gone: bool,
    keepalive: Option<Pinger>,
}

impl<T: AsyncRead + AsyncWrite + Unpin> Future for Driver<T> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let shared = this.shared.clone();
        {
            let mut state = shared.lock();
            state.driver_woken = false;
            if !state.driver.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                state.driver = Some(cx.waker().clone());
            }
        }
        let woke = !this.gone && this.read(cx, &shared);
        this.poll_keepalive(cx, &shared);
        // The calls just woken are queued behind this task: letting them run before writing
        // puts their next requests in the same write as this turn's control frames (a PING
        // ACK, WINDOW_UPDATEs): one write instead of two.
        if woke && !this.deferred {
            this.deferred = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        this.deferred = false;
        let written = this.write(cx, &shared);
        let mut state = shared.lock();
        let finished = state.dead || ((state.abandoned || state.refusal.is_some()) && state.ids.is_empty());
        if finished && (written.is_err() || (this.outbox.is_empty() && state.out.is_empty())) {
            let why = match written {
                Err(e) => format!("connection error: {e}"),
                Ok(()) => "connection closed".to_owned(),
            };
            state.die(&shared.closed, why);
            drop(state);
            let _ = Pin::new(&mut this.io).poll_shutdown(cx);
            return Poll::Ready(());
        }
        if let Err(e) = written {
            state.die(&shared.closed, format!("connection error: {e}"));
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> Driver<T> {
    /// Reads until the socket has nothing more (or a few times at most), handling every
    /// whole frame; true when calls were woken.
    fn read(&mut self, cx: &mut Context<'_>, shared: &Shared) -> bool {
        let mut woke = false;
        for turn in 0.. {
            if turn == READS_PER_TURN {
                // More may wait; come back after the calls had their turn.
                cx.waker().wake_by_ref();
                break;
            }
            if self.start > 0 {
                self.inbox.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            let mut buf = ReadBuf::new(&mut self.inbox[self.end..]);
            let why = match Pin::new(&mut self.io).poll_read(cx, &mut buf) {
                Poll::Pending => break,
                Poll::Ready(Ok(())) if buf.filled().is_empty() => "connection closed by the server".to_owned(),
                Poll::Ready(Ok(())) => {
                    self.end += buf.filled().len();
                    let mut state = shared.lock();
                    match self.frames(&mut state, shared) {
                        Ok(any) => {
                            woke |= any;
                            continue;
                        }
                        Err(why) => {
                            let mut goaway = BytesMut::new();
                            frame_head(&mut goaway, 8, GOAWAY, 0, 0);
                            goaway.put_u32(0);
                            goaway.put_u32(PROTOCOL_ERROR);
                            state.out.put_slice(&goaway);
                            format!("HTTP/2 protocol error: {why}")
                        }
                    }
                }
                Poll::Ready(Err(e)) => format!("connection error: {e}"),
            };
            self.gone = true;
            shared.lock().die(&shared.closed, why);
            return true;
        }
        woke
    }

    /// Handles the whole frames in the inbox; true when a call was woken.
    fn frames(&mut self, state: &mut State, shared: &Shared) -> Result<bool, String> {
        let mut woke = false;
        while let [l0, l1, l2, kind, flags, s0, s1, s2, s3, ..] = self.inbox[self.start..self.end] {
            let len = u32::from_be_bytes([0, l0, l1, l2]) as usize;
            if len > DEFAULT_MAX_FRAME {
                return Err(format!("a frame of {len} bytes, above SETTINGS_MAX_FRAME_SIZE"));
            }
            if self.end - self.start < 9 + len {
                break;
            }
            let stream = u32::from_be_bytes([s0, s1, s2, s3]) & MAX_STREAM_ID;
            let at = self.start + 9;
            self.start = at + len;
            // Taken out of self for the call: the frame's bytes are borrowed from the inbox.
            let inbox = std::mem::take(&mut self.inbox);
            let handled = self.frame(state, shared, kind, flags, stream, &inbox[at..at + len]);
            self.inbox = inbox;
            woke |= handled?;
        }
        Ok(woke)
    }

    /// One frame of the server's, by its type; true when a call was woken.
    fn frame(
        &mut self,
        state: &mut State,
        shared: &Shared,
        kind: u8,
        flags: u8,
        stream: u32,
        payload: &[u8],
    ) -> Result<bool, String> {
        if self.continuation.is_some() && kind != CONTINUATION {
            return Err("a header block interrupted before its end".to_owned());
        }
        match kind {
            DATA => self.data(state, flags, stream, payload),
            HEADERS => self.headers_frame(state, flags, stream, payload),
            CONTINUATION => self.continuation(state, flags, stream, payload),
            RST_STREAM => state.reset(stream, payload),
            SETTINGS if flags & ACK != 0 => Ok(false),
            SETTINGS => state.settings(payload).map(|()| false),
            PUSH_PROMISE => Err("PUSH_PROMISE, though push is disabled".to_owned()),
            PING => self.ping(state, flags, payload).map(|()| false),
            GOAWAY => state.goaway(shared, payload).map(|()| true),
            WINDOW_UPDATE => state.window_update(stream, payload).map(|()| false),
            // PRIORITY and unknown frame types.
            _ => Ok(false),
        }
    }

    /// DATA: counted against the connection's window (updated at half of it), then given
    /// to its stream if the stream is still ours; true when that ended the call.
    fn data(&mut self, state: &mut State, flags: u8, stream: u32, payload: &[u8]) -> Result<bool, String> {
        if stream == 0 {
            return Err("DATA on stream 0".to_owned());
        }
        let data = unpad(flags, payload)?;
        self.unacked += payload.len() as u32;
        if self.unacked >= CONNECTION_WINDOW / 2 {
            window_update(&mut state.out, 0, std::mem::take(&mut self.unacked));
            state.wake_driver();
        }
        let Some(key) = state.ids.get(&stream).copied() else { return Ok(false) };
        on_data(state, key, data, flags & END_STREAM != 0, payload.len() as u32);
        Ok(state.streams[key].done)
    }

    /// HEADERS: a whole header block, or its first part, which CONTINUATION frames follow.
    fn headers_frame(&mut self, state: &mut State, flags: u8, stream: u32, payload: &[u8]) -> Result<bool, String> {
        let mut block = unpad(flags, payload)?;
        if flags & PRIORITY != 0 {
            block = block.get(5..).ok_or("HEADERS too short for its priority")?;
        }
        let end_stream = flags & END_STREAM != 0;
        if flags & END_HEADERS != 0 {
            self.headers(state, stream, end_stream, block)
        } else {
            self.continuation = Some(Continuation { stream, end_stream, block: block.to_vec() });
            Ok(false)
        }
    }

    /// CONTINUATION: the next part of the header block under way (at most `MAX_HEADER_BLOCK`).
    fn continuation(&mut self, state: &mut State, flags: u8, stream: u32, payload: &[u8]) -> Result<bool, String> {
        let Some(mut continuation) = self.continuation.take() else {
            return Err("CONTINUATION without HEADERS".to_owned());
        };
        if continuation.stream != stream {
            return Err("CONTINUATION on another stream".to_owned());
        }
        continuation.block.extend_from_slice(payload);
        if continuation.block.len() > MAX_HEADER_BLOCK {
            return Err(format!("a header block above {MAX_HEADER_BLOCK} bytes"));
        }
        if flags & END_HEADERS == 0 {
            self.continuation = Some(continuation);
            return Ok(false);
        }
        self.headers(state, stream, continuation.end_stream, &continuation.block)
    }

    /// PING: the server's answered; an answer to ours ends the handshake or the keepalive's wait.
    fn ping(&mut self, state: &mut State, flags: u8, payload: &[u8]) -> Result<(), String> {
        let opaque: [u8; 8] = payload.try_into().map_err(|_| "PING of a wrong size")?;
        if flags & ACK == 0 {
            frame_head(&mut state.out, 8, PING, ACK, 0);
            state.out.put_slice(&opaque);
            state.wake_driver();
        } else if opaque == HANDSHAKE_PING {
            if let Some(handshake) = state.handshake.take() {
                let _ = handshake.send(Ok(()));
            }
        } else if opaque == KEEPALIVE_PING {
            if let Some(keepalive) = &mut self.keepalive {
                keepalive.outstanding = false;
                let next = tokio::time::Instant::now() + keepalive.times.every;
                keepalive.timer.as_mut().reset(next);
            }
        }
        Ok(())
    }

    /// A whole header block: decoded always (HPACK's table must follow every block), then
    /// applied to its stream if the stream is still ours.
    fn headers(&mut self, state: &mut State, stream: u32, end_stream: bool, block: &[u8]) -> Result<bool, String> {
        let mut head = Head::default();
        let key = state.ids.get(&stream).copied();
        let keep = key.is_some_and(|k| state.streams[k].metadata.is_some());
        self.decoder
            .decode_with_cb(block, |name: Cow<[u8]>, value: Cow<[u8]>| {
                if keep && !name.starts_with(b":") {
                    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
                    head.pairs.push((text(&name), text(&value)));
                }
                match &name[..] {
                    b":status" => head.status = std::str::from_utf8(&value).ok().and_then(|s| s.parse().ok()),
                    b"grpc-status" => head.grpc_status = Some(Code::from_bytes(&value)),
                    b"grpc-message" => head.grpc_message = Some(percent_decode(&value)),
                    _ => {}
                }
            })
            .map_err(|e| format!("HPACK: {e}"))?;
        let Some(key) = key else { return Ok(false) };
        on_head(state, key, head, end_stream);
        Ok(state.streams[key].done)
    }

    fn poll_keepalive(&mut self, cx: &mut Context<'_>, shared: &Shared) {
        let Some(keepalive) = &mut self.keepalive else { return };
        while keepalive.timer.as_mut().poll(cx).is_ready() {
            let mut state = shared.lock();
            if keepalive.outstanding {
                let why = keepalive.times.unanswered();
                state.die(&shared.closed, why);
                // Nothing left to say to a gone peer: unwritten frames would keep the socket
                // (and the calls' request bytes) until TCP gave up, minutes later.
                state.out.clear();
                self.outbox.clear();
                return;
            }
            frame_head(&mut state.out, 8, PING, 0, 0);
            state.out.put_slice(&KEEPALIVE_PING);
            state.wake_driver();
            keepalive.outstanding = true;
            keepalive.timer.as_mut().reset(tokio::time::Instant::now() + keepalive.times.timeout);
        }
    }

    /// Writes what the calls queued, in as few writes as the socket takes.
    fn write(&mut self, cx: &mut Context<'_>, shared: &Shared) -> std::io::Result<()> {
        loop {
            if self.outbox.is_empty() {
                let mut state = shared.lock();
                if state.out.is_empty() {
                    break;
                }
                std::mem::swap(&mut self.outbox, &mut state.out);
            }
            while !self.outbox.is_empty() {
                match Pin::new(&mut self.io).poll_write(cx, &self.outbox) {
                    Poll::Pending => return Ok(()),
                    Poll::Ready(Ok(0)) => return Err(std::io::ErrorKind::WriteZero.into()),
                    Poll::Ready(Ok(n)) => {
                        let _ = self.outbox.split_to(n);
                    }
                    Poll::Ready(Err(e)) => return Err(e),
                }
            }
            self.outbox.clear();
        }
        match Pin::new(&mut self.io).poll_flush(cx) {
            Poll::Ready(Err(e)) => Err(e),
            _ => Ok(()),
        }
    }
}

/// The frames that change the connection's state alone (no part of the reader's own).
impl State {
    /// RST_STREAM: the stream's call ends with the reset's status; true when it was ours.
    fn reset(&mut self, stream: u32, payload: &[u8]) -> Result<bool, String> {
        let [a, b, c, d] = payload else { return Err("RST_STREAM of a wrong size".to_owned()) };
        let Some(key) = self.ids.get(&stream).copied() else { return Ok(false) };
        let reason = h2::Reason::from(u32::from_be_bytes([*a, *b, *c, *d]));
        let reply = Reply::error(reset_code(reason), format!("stream reset by the server: {reason}"));
        self.complete(key, Some(reply), None);
        Ok(true)
    }

    /// SETTINGS: the server's limits taken (streams at once, initial window, frame size) and
    /// acknowledged; the calls waiting for a slot look again.
    fn settings(&mut self, payload: &[u8]) -> Result<(), String> {
        if !payload.len().is_multiple_of(6) {
            return Err("SETTINGS of a wrong size".to_owned());
        }
        for setting in payload.chunks(6) {
            let value = u32::from_be_bytes([setting[2], setting[3], setting[4], setting[5]]);
            match u16::from_be_bytes([setting[0], setting[1]]) {
                // HEADER_TABLE_SIZE (1) only limits a dynamic table we never use.
                3 => self.max_concurrent = value as usize,
                4 => {
                    if value > MAX_STREAM_ID {
                        return Err("SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1".to_owned());
                    }
                    let delta = value as i64 - self.peer_initial_window;
                    self.peer_initial_window = value as i64;
                    let keys: Vec<usize> = self.ids.values().copied().collect();
                    for key in keys {
                        self.streams[key].window += delta;
                    }
                }
                5 => {
                    if !(DEFAULT_MAX_FRAME as u32..=(1 << 24) - 1).contains(&value) {
                        return Err(format!("SETTINGS_MAX_FRAME_SIZE {value}"));
                    }
                    self.peer_max_frame = value as usize;
                }
                _ => {}
            }
        }
        frame_head(&mut self.out, 0, SETTINGS, ACK, 0);
        self.flush_blocked();
        // The limit may have grown.
        for (_, waiter) in self.waiters.drain(..) {
            waiter.wake();
        }
        self.wake_driver();
        Ok(())
    }

    /// GOAWAY: the streams above the last the server processed fail, those below still
    /// finish; no new call is taken.
    fn goaway(&mut self, shared: &Shared, payload: &[u8]) -> Result<(), String> {
        let [a, b, c, d, e, f, g, h, debug @ ..] = payload else {
            return Err("GOAWAY too short".to_owned());
        };
        let last = u32::from_be_bytes([*a, *b, *c, *d]) & MAX_STREAM_ID;
        let reason = h2::Reason::from(u32::from_be_bytes([*e, *f, *g, *h]));
        let why = super::goaway_message(reason, &String::from_utf8_lossy(debug));
        self.fail_streams(last, &why);
        self.refuse(&shared.closed, why);
        self.wake_driver();
        Ok(())
    }

    /// WINDOW_UPDATE: the connection's (stream 0) or a stream's send window grows; what
    /// waited for it may go.
    fn window_update(&mut self, stream: u32, payload: &[u8]) -> Result<(), String> {
        let [a, b, c, d] = payload else { return Err("WINDOW_UPDATE of a wrong size".to_owned()) };
        let increment = (u32::from_be_bytes([*a, *b, *c, *d]) & MAX_STREAM_ID) as i64;
        if stream == 0 {
            self.window += increment;
        } else if let Some(key) = self.ids.get(&stream).copied() {
            self.streams[key].window += increment;
        }
        self.flush_blocked();
        self.wake_driver();
        Ok(())
    }
}

/// The payload of a DATA or HEADERS frame without its padding.
fn unpad(flags: u8, payload: &[u8]) -> Result<&[u8], String> {
    if flags & PADDED == 0 {
        return Ok(payload);
    }
    let (&pad, rest) = payload.split_first().ok_or("a padded frame without its pad length")?;
    rest.len().checked_sub(pad as usize).map(|n| &rest[..n]).ok_or_else(|| "padding longer than the frame".to_owned())
}

fn on_data(state: &mut State, key: usize, data: &[u8], end_stream: bool, len: u32) {
    let stream = &mut state.streams[key];
    if stream.done {
        return;
    }
    if !stream.headers_seen {
        let reply = Reply::error(Code::Internal, "DATA before the response headers");
        return state.complete(key, Some(reply), Some(PROTOCOL_ERROR));
    }
    if let Err(fault) = stream.messages.feed(data, stream.kept.as_mut()) {
        return state.complete(key, Some(fault.into()), Some(CANCEL));
    }
    if end_stream {
        let reply = Reply::error(Code::Internal, "stream ended without trailers");
        return state.complete(key, Some(reply), None);
    }
    stream.unacked += len;
    if stream.unacked >= STREAM_WINDOW / 2 {
        let increment = std::mem::take(&mut stream.unacked);
        let id = stream.id;
        window_update(&mut state.out, id, increment);
        state.wake_driver();
    }
}

fn on_head(state: &mut State, key: usize, mut head: Head, end_stream: bool) {
    let stream = &mut state.streams[key];
    if stream.done {
        return;
    }
    // A stream the server ends before reading all of the request is reset: its rest is not sent.
    let reset = (!end_stream || !stream.unsent.is_empty()).then_some(CANCEL);
    let reply = if stream.headers_seen {
        let kept = stream.kept.take();
        let mut reply = status_reply(head.grpc_status, head.grpc_message, &stream.messages, kept, Some(1));
        if let Some(mut metadata) = stream.metadata.take() {
            metadata.trailers = head.pairs;
            reply.metadata = metadata;
        }
        reply
    } else {
        stream.headers_seen = true;
        if let Some(metadata) = &mut stream.metadata {
            metadata.headers = std::mem::take(&mut head.pairs);
        }
        match head.status {
            Some(200) => {}
            Some(other) => {
                let status = http::StatusCode::from_u16(other).unwrap_or(http::StatusCode::BAD_REQUEST);
                let reply = Reply::error(http_status_code(status), format!("HTTP status {status}"));
                return state.complete(key, Some(reply), reset);
            }
            None => {
                let reply = Reply::error(Code::Internal, "response without :status");
                return state.complete(key, Some(reply), Some(PROTOCOL_ERROR));
            }
        }
        if head.grpc_status.is_some() {
            // Trailers-only: the status is in the headers and there is no body.
            let mut reply = status_reply(head.grpc_status, head.grpc_message, &Deframer::default(), None, Some(1));
            if let Some(mut metadata) = stream.metadata.take() {
                metadata.trailers = std::mem::take(&mut metadata.headers);
                reply.metadata = metadata;
            }
            reply
        } else if end_stream {
            Reply::error(Code::Internal, "stream ended without trailers")
        } else {
            return;
        }
    };
    state.complete(key, Some(reply), reset);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hpack_integers_follow_rfc_7541() {
        // RFC 7541, C.1.1 and C.1.2: 10 and 1337 with a 5-bit prefix.
        let mut out = BytesMut::new();
        integer(&mut out, 10, 5, 0);
        integer(&mut out, 1337, 5, 0);
        assert_eq!(&out[..], &[10, 31, 154, 10]);
    }

    #[test]
    fn our_header_blocks_decode_to_what_we_meant() {
        let mut block = BytesMut::from(&connection_block(false, "example.com:50051")[..]);
        literal(&mut block, Some(4), b":path", b"/svc.Service/Method");
        literal(&mut block, Some(31), b"content-type", b"application/grpc");
        literal(&mut block, None, b"te", &[b'x'; 200]);
        let headers = loona_hpack::Decoder::new().decode(&block).unwrap();
        let headers: Vec<(&[u8], &[u8])> = headers.iter().map(|(n, v)| (&n[..], &v[..])).collect();
        assert_eq!(
            headers,
            [
                (&b":method"[..], &b"POST"[..]),
                (b":scheme", b"http"),
                (b":authority", b"example.com:50051"),
                (b":path", b"/svc.Service/Method"),
                (b"content-type", b"application/grpc"),
                (b"te", &[b'x'; 200]),
            ]
        );
    }

    #[test]
    fn the_hpack_decoder_does_not_panic_on_garbage() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand::rngs::ChaCha8Rng::seed_from_u64(18);
        let mut decoder = loona_hpack::Decoder::new();
        decoder.set_max_allowed_table_size(4096);
        for _ in 0..20_000 {
            let len = rng.random_range(0..40);
            let block: Vec<u8> = (0..len).map(|_| rng.random()).collect();
            let _ = decoder.decode_with_cb(&block, |_, _| {});
        }
    }

    #[test]
    fn padding_is_removed_and_checked() {
        assert_eq!(unpad(PADDED, &[2, b'a', b'b', 0, 0]).unwrap(), b"ab");
        assert_eq!(unpad(0, b"ab").unwrap(), b"ab");
        assert!(unpad(PADDED, &[5, b'a']).is_err());
        assert!(unpad(PADDED, &[]).is_err());
    }
}
