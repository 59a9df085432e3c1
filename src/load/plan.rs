//! The Plan: everything a run needs, validated. The CLI builds it; the engine only reads it.
use super::pacer::Pacer;
use super::retry::RetryPolicy;
use crate::grpc::{CallSpec, Target};
use std::time::Duration;

/// When a run ends (the first limit reached wins; at least one is set).
#[derive(Debug, Clone, Default)]
pub struct StopAt {
    /// Measured calls in all (`-n`; bursts: size x rounds).
    pub total: Option<u64>,
    /// Calls per worker (`--loop`, as rmeter's tasks x loop).
    pub per_worker: Option<u64>,
    /// Measured time (`-z`), after the warm-up.
    pub duration: Option<Duration>,
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub target: Target,
    pub spec: CallSpec,
    pub pacer: Pacer,
    /// Closed loop: concurrent workers (`-c`); open loop: most calls in flight; burst: its size.
    pub workers: u32,
    /// OS threads, each with its own current-thread runtime and connections.
    pub threads: u32,
    /// HTTP/2 connections, spread over the threads.
    pub connections: u32,
    pub stop: StopAt,
    /// Measured, reported apart, excluded from the result.
    pub warmup: Duration,
    /// Worker i starts after i/workers of this (rmeter's ramp-up).
    pub ramp: Duration,
    pub retry: RetryPolicy,
    /// Period of interval reports (progress, CSV, HDR log).
    pub interval: Duration,
    /// After the end (or the first Ctrl-C), how long calls in flight may still finish.
    pub drain: Duration,
    /// Keep response bodies for per-call details.
    pub keep_responses: bool,
}
