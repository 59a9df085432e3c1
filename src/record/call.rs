//! One call as the engine saw it end, for the sinks that want every call (`--csv-details`).
use crate::grpc::Reply;
use bytes::Bytes;
use std::time::{Duration, SystemTime};

/// One call as it ended, for per-call details (`--csv-details`).
#[derive(Debug)]
pub struct CallRecord {
    pub call: u64,
    /// A workload's call: its index in the mix (0 for `--call`).
    pub which: usize,
    pub worker: u32,
    /// The actual first send (wall clock).
    pub sent_at: SystemTime,
    /// Open loop: the schedule's due time of the call (wall clock); None in closed loop and bursts.
    pub intended: Option<SystemTime>,
    pub latency: Duration,
    pub request: Bytes,
    pub reply: Reply,
    pub attempts: u32,
    pub warmup: bool,
}
