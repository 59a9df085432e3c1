//! Calls that bring their own method, request, metadata and time (`run --replay`, src/replay):
//! the engine draws each call from a `CallLog` instead of making it from its mix's requests.
//! A log's own times make an open loop whose schedule is the log (each call due at its
//! offset, latency counted from then, calls never sent counted as unsent); without them the
//! log is a pool of calls paced by the plan's `Pacer`.
use crate::grpc::transport::Script;
use crate::grpc::PreparedCall;
use bytes::Bytes;
use std::time::Duration;
use tonic::Code;

/// One call drawn from a log.
pub struct LoggedCall {
    /// When it is due, from the start of the run; None: when the plan's pacer says.
    pub due: Option<Duration>,
    /// Its method, as an index of the mix's calls (the per-name breakdown's).
    pub which: usize,
    /// Its method and metadata, as sent.
    pub call: PreparedCall,
    /// The framed request (a stream's first message, or none: empty).
    pub request: Bytes,
    /// A streaming call's messages and half-close, at their logged times; None: a unary call.
    pub stream: Option<Box<Script>>,
    /// The status and latency the log recorded for it, when it has its end.
    pub recorded: Option<(Code, Duration)>,
}

/// Where a run's calls come from when they are logged ones. Drawn by every worker thread.
pub trait CallLog: Send + Sync {
    /// The next call; None once there is none left (the run then ends as `-n` ends it).
    fn next(&self) -> Option<LoggedCall>;

    /// `call` is being sent (in the warm-up, or measured): the log's own numbers of the calls
    /// sent are kept beside the run's.
    fn sent(&self, call: &LoggedCall, warmup: bool);

    /// Whether calls come with the log's own times (else the log is a pool).
    fn scheduled(&self) -> bool;

    /// With the log's own times: of the calls due before the run's end, how many were drawn
    /// or are still to come (read on to the end's time); None when the log is a pool.
    fn due_before_end(&self) -> Option<u64>;
}
