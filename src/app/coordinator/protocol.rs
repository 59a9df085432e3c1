//! The coordinator's messages: one JSON object per line, typed by its `type`, read within a
//! bound. Before a peer has proved it holds the run's secret (trust.rs) the whole connection
//! may carry `MAX_UNPROVEN` bytes; after, a line may be `MAX_LINE` and a result `MAX_RESULT`.
//!
//! The conversation, shard (S) and hub (H):
//! - S: `hello` (protocol version, its index, the shard count, a nonce);
//! - H: `challenge` (version, its own nonce, and its proof over both nonces: the shard learns
//!   it reached its run's hub, not a stranger listening in its place);
//! - S: `proof` (over both nonces, its index and its fingerprint; `failed` when it failed
//!   before joining); the hub refuses a wrong proof, another fingerprint (naming the flags), a
//!   second claim of one index;
//! - H: `ping` k, S: `pong` k with its clock (the least round trip maps the shard's clock);
//! - H: `start` (a time on the shard's own clock), `stop` (drain as Ctrl-C), `abort`;
//! - S: `interval` every interval while it runs; `result` (its length, then that many bytes
//!   of result JSON) or `failed`;
//! - H: `got` (the result is in hand).
use super::trust::Fingerprint;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{BufRead, Read, Write};

/// The protocol's version: a peer that speaks another is refused with both named.
pub const VERSION: u32 = 1;
/// What a connection may send before it has proved itself, in all: enough for a hello and a
/// proof with its fingerprint.
pub const MAX_UNPROVEN: u64 = 8 << 10;
/// Longest line of a proven peer (an interval's histograms in text are a few KiB).
pub const MAX_LINE: u64 = 1 << 20;
/// Largest result a proven shard may send (a result with kept intervals is a few MiB).
pub const MAX_RESULT: u64 = 256 << 20;

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Message {
    Hello { version: u32, index: u32, of: u32, nonce: String },
    Challenge { version: u32, nonce: String, proof: String },
    Proof { proof: String, fingerprint: Fingerprint, failed: Option<String> },
    Ping { k: u64 },
    Pong { k: u64, at_ns: u64 },
    Start { at_ns: u64 },
    Stop,
    Abort { why: String },
    Interval(Box<Tallies>),
    Result { length: u64 },
    Failed { why: String },
    Got,
}

/// One interval of a shard's run, as it closed: what the hub keeps so that a shard lost
/// mid-run still counts up to its last interval.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Tallies {
    /// The end of the interval, from the shard's start (ns).
    pub at_ns: u64,
    pub length_ns: u64,
    /// Ended inside the warm-up: not part of the measured run.
    pub warmup: bool,
    pub calls: u64,
    pub ok: u64,
    pub failed: u64,
    /// Calls by status name.
    pub statuses: BTreeMap<String, u64>,
    /// Histograms in their text form (record/shard.rs `to_text`).
    pub call_latency: String,
    pub ok_call_latency: String,
    /// Service time, where it differs from the call latency (an open loop): with it, a lost
    /// shard's interval series is rebuilt whole (`of_intervals`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_time: Option<String>,
}

pub fn send(stream: &mut impl Write, message: &Message) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(message).map_err(std::io::Error::other)?;
    line.push(b'\n');
    stream.write_all(&line)
}

pub fn invalid(why: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, why)
}

/// The next message, of at most `max` bytes; None at the end of the stream.
pub fn receive(reader: &mut impl BufRead, max: u64) -> std::io::Result<Option<Message>> {
    let mut line = Vec::new();
    reader.take(max + 1).read_until(b'\n', &mut line)?;
    if line.is_empty() {
        return Ok(None);
    }
    if line.len() as u64 > max || line.last() != Some(&b'\n') {
        return Err(invalid("a message too long or cut short".into()));
    }
    serde_json::from_slice(&line).map(Some).map_err(|e| invalid(format!("not a message: {e}")))
}

/// The `length` bytes that follow a `result` message, read as they come (never reserved
/// ahead: a length is only a claim).
pub fn receive_bytes(reader: &mut impl BufRead, length: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    reader.take(length).read_to_end(&mut bytes)?;
    match bytes.len() as u64 == length {
        true => Ok(bytes),
        false => Err(invalid(format!("a result cut short at {} of {length} bytes", bytes.len()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_and_strangers_are_not_messages() {
        let m = Message::Hello { version: VERSION, index: 1, of: 2, nonce: "n".into() };
        let mut line = Vec::new();
        send(&mut line, &m).unwrap();
        assert_eq!(receive(&mut &line[..], MAX_LINE).unwrap(), Some(m));
        // The old protocol's hello, a line too long, a line cut short.
        assert!(receive(&mut &b"{\"hello\": 1, \"of\": 2}\n"[..], MAX_LINE).is_err());
        assert!(receive(&mut &[b'x'; 100][..], 50).is_err());
        assert!(receive(&mut &b"{\"type\":\"stop\"}"[..], MAX_LINE).is_err());
        assert_eq!(receive(&mut &b""[..], MAX_LINE).unwrap(), None);
        assert!(receive_bytes(&mut &b"abc"[..], 5).is_err());
    }
}
