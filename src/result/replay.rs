//! `run --replay`: what the log was and its own numbers of the calls sent, beside the run's
//! (`calls_by_name`), name by name.
use super::slice::Slice;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct Replay {
    /// The log file, as given.
    #[serde(default)]
    pub file: String,
    #[serde(default)]
    pub framing: String,
    /// "log": each call at its logged offset divided by `speed`; "pool": drawn in order at
    /// the run's own pace (-c, --rps, --stages).
    #[serde(default)]
    pub schedule: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed: Option<f64>,
    /// Calls the log holds, and those not sent, by why.
    #[serde(default)]
    pub calls_in_log: u64,
    #[serde(default)]
    pub skipped_truncated: u64,
    #[serde(default)]
    pub skipped_no_request: u64,
    /// Message bytes of the calls sent, as the log holds them, and as the run sent them
    /// (gRPC's 5-byte frame header left out; warm-up calls left out of both).
    #[serde(default)]
    pub payload_bytes_logged: u64,
    #[serde(default)]
    pub payload_bytes_sent: u64,
    /// The log's own numbers (status, latency as the logger saw it: trailer time - header
    /// time) of the calls sent, by the names of `calls_by_name`; a call whose end the log
    /// lacks is not counted here.
    #[serde(default)]
    pub recorded: BTreeMap<String, Slice>,
}
