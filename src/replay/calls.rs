//! The entries of a log made into calls, by `call_id`, from either logger's side (a client's
//! log and a server's hold the same events). Calls come out in the order they started (their
//! client headers' order in the file), each once its end is logged: a call is held until
//! then, and the calls that started after it wait behind it. Memory is bounded: at most
//! `Limits::calls` calls and `Limits::bytes` of their messages and metadata are held; beyond,
//! the oldest comes out as it is, its end unknown (a stream that lasts the whole log).
use super::log::Entries;
use super::proto::grpc_log_entry::{EventType, Payload};
use super::proto::GrpcLogEntry;
use bytes::Bytes;
use std::collections::{HashMap, VecDeque};
use std::io::BufRead;
use std::time::Duration;

/// How much of a log is held while its calls are put together.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub calls: usize,
    pub bytes: usize,
}

impl Default for Limits {
    /// 10,000 calls and 16 MiB: about 20 MiB at most with the maps' own memory.
    fn default() -> Limits {
        Limits { calls: 10_000, bytes: 16 << 20 }
    }
}

/// A call as the log holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub call_id: u64,
    /// The method's path: "/package.Service/Method".
    pub method: String,
    pub authority: String,
    /// The client header's metadata, as logged (gRPC's own keys are never logged).
    pub metadata: Vec<(String, Bytes)>,
    pub timeout: Option<Duration>,
    /// The client header's time, since the Unix epoch.
    pub start: Duration,
    /// The client's messages, in order.
    pub requests: Vec<Request>,
    /// Messages the server sent, and their bytes (as logged: `Message.length`).
    pub responses: u64,
    pub response_bytes: u64,
    /// When the client closed its side (`ClientHalfClose`), since the call's start; a server's
    /// log has none for a call whose handler never read to the end (a server stream's).
    pub half_close: Option<Duration>,
    /// The status and when it came, when the log has the call's end.
    pub end: Option<End>,
    /// The header's metadata was cut at the log's header limit (`payload_truncated`).
    pub header_truncated: bool,
}

/// A message of the client.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Since the call's start.
    pub at: Duration,
    /// The message's length on the wire; `data` may be shorter.
    pub length: u32,
    pub data: Bytes,
    /// Cut at the log's message limit (`payload_truncated`): not the message that was sent.
    pub truncated: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct End {
    /// The gRPC status code (a cancel without a trailer: CANCELLED).
    pub status: u32,
    /// Since the call's start: the latency on the logger's side.
    pub after: Duration,
}

impl Call {
    /// Some message of the client was cut by the log's limit: the call cannot be sent as it was.
    pub fn truncated(&self) -> bool {
        self.requests.iter().any(|r| r.truncated)
    }

    /// Sent and answered at most one message each way: a unary call's shape.
    pub fn is_unary(&self) -> bool {
        self.requests.len() <= 1 && self.responses <= 1
    }

    /// When the client's side closed, since the call's start: as logged, else with its last
    /// message (a server's log lacks it when the handler never read to the end).
    pub fn closed_after(&self) -> Duration {
        self.half_close.or_else(|| self.requests.last().map(|r| r.at)).unwrap_or_default()
    }

    /// Bytes the client sent, as logged.
    pub fn request_bytes(&self) -> u64 {
        self.requests.iter().map(|r| r.length as u64).sum()
    }

    fn held_bytes(&self) -> usize {
        let meta: usize = self.metadata.iter().map(|(k, v)| k.len() + v.len()).sum();
        meta + self.requests.iter().map(|r| r.data.len()).sum::<usize>() + self.method.len() + 128
    }
}

/// What the log held beside its calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Leftovers {
    /// Entries of calls whose client header is not in the log (it began during them), or
    /// that came after their call was let out.
    pub orphan_entries: u64,
    /// Calls let out before their end was read (held too long, or the log ended first).
    pub unfinished: u64,
}

/// The calls of a log, in the order they started.
pub struct Calls<R> {
    entries: Entries<R>,
    limits: Limits,
    /// Call ids in the order their headers came.
    order: VecDeque<u64>,
    held: HashMap<u64, Call>,
    held_bytes: usize,
    pub leftovers: Leftovers,
    ended: bool,
}

impl<R: BufRead> Calls<R> {
    pub fn new(entries: Entries<R>, limits: Limits) -> Calls<R> {
        Calls {
            entries,
            limits,
            order: VecDeque::new(),
            held: HashMap::new(),
            held_bytes: 0,
            leftovers: Leftovers::default(),
            ended: false,
        }
    }

    pub fn entries(&self) -> &Entries<R> {
        &self.entries
    }

    /// The next call; None after the last. An entry that is not one ends the reading.
    pub fn next_call(&mut self) -> Result<Option<Call>, String> {
        loop {
            if let Some(call) = self.ready() {
                return Ok(Some(call));
            }
            if self.ended {
                return Ok(self.let_out());
            }
            match self.entries.next_entry()? {
                Some(entry) => self.add(entry),
                None => self.ended = true,
            }
        }
    }

    /// The oldest call, when its end is known or too much is held.
    fn ready(&mut self) -> Option<Call> {
        let first = *self.order.front()?;
        let done = self.held.get(&first).is_some_and(|c| c.end.is_some());
        let over = self.order.len() > self.limits.calls || self.held_bytes > self.limits.bytes;
        (done || over).then(|| self.let_out()).flatten()
    }

    fn let_out(&mut self) -> Option<Call> {
        let id = self.order.pop_front()?;
        let call = self.held.remove(&id)?;
        self.held_bytes -= call.held_bytes();
        self.leftovers.unfinished += call.end.is_none() as u64;
        Some(call)
    }

    fn add(&mut self, entry: GrpcLogEntry) {
        let ts = entry.timestamp.unwrap_or_default();
        // Times before 1970 are taken as 1970: only differences matter.
        let at = Duration::new(ts.seconds.max(0) as u64, ts.nanos.clamp(0, 999_999_999) as u32);
        let kind = EventType::try_from(entry.r#type).unwrap_or(EventType::Unknown);
        if let (EventType::ClientHeader, Some(Payload::ClientHeader(h))) = (kind, &entry.payload) {
            // A call id seen again (two processes' logs in one file): the first call ends here.
            if self.held.contains_key(&entry.call_id) {
                self.order.retain(|id| *id != entry.call_id);
                if let Some(old) = self.held.remove(&entry.call_id) {
                    self.held_bytes -= old.held_bytes();
                    self.leftovers.unfinished += 1;
                }
            }
            let call = Call {
                call_id: entry.call_id,
                method: h.method_name.clone(),
                authority: h.authority.clone(),
                metadata: h
                    .metadata
                    .iter()
                    .flat_map(|m| &m.entry)
                    .map(|e| (e.key.clone(), Bytes::from(e.value.clone())))
                    .collect(),
                timeout: h.timeout.and_then(|t| Duration::try_from(t).ok()),
                start: at,
                requests: Vec::new(),
                responses: 0,
                response_bytes: 0,
                half_close: None,
                end: None,
                header_truncated: entry.payload_truncated,
            };
            self.held_bytes += call.held_bytes();
            self.order.push_back(entry.call_id);
            self.held.insert(entry.call_id, call);
            return;
        }
        let Some(call) = self.held.get_mut(&entry.call_id) else {
            self.leftovers.orphan_entries += 1;
            return;
        };
        let since = at.saturating_sub(call.start);
        match (kind, entry.payload) {
            (EventType::ClientMessage, Some(Payload::Message(m))) => {
                let data = Bytes::from(m.data);
                let truncated = entry.payload_truncated || (data.len() as u64) < m.length as u64;
                self.held_bytes += data.len();
                call.requests.push(Request { at: since, length: m.length, data, truncated });
            }
            (EventType::ServerMessage, Some(Payload::Message(m))) => {
                call.responses += 1;
                call.response_bytes += m.length as u64;
            }
            (EventType::ClientHalfClose, _) if call.half_close.is_none() => call.half_close = Some(since),
            (EventType::ServerTrailer, payload) if call.end.is_none() => {
                let status = match payload {
                    Some(Payload::Trailer(t)) => t.status_code,
                    _ => 0,
                };
                call.end = Some(End { status, after: since });
            }
            // Cancelled without a trailer: CANCELLED (code 1), as the client saw it.
            (EventType::Cancel, _) if call.end.is_none() => call.end = Some(End { status: 1, after: since }),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::log::tests::{encode, entry, unary};
    use crate::replay::log::Framing;

    fn calls(bytes: &[u8], limits: Limits) -> (Vec<Call>, Leftovers) {
        let mut calls = Calls::new(Entries::new(bytes, None, 1 << 20).unwrap(), limits);
        let mut all = Vec::new();
        while let Some(c) = calls.next_call().unwrap() {
            all.push(c);
        }
        (all, calls.leftovers)
    }

    /// Entries of several calls interleaved as a busy server logs them.
    fn interleaved() -> Vec<GrpcLogEntry> {
        let a = unary(1, 1_000_000, "/S/slow", b"a", 9_000_000, 0);
        let b = unary(2, 2_000_000, "/S/fast", b"bb", 1_000, 14);
        let c = unary(3, 3_000_000, "/S/fast", b"ccc", 2_000, 0);
        // a's header and message, then all of b and c, then a's end.
        [&a[..2], &b[..], &c[..], &a[2..]].concat()
    }

    #[test]
    fn calls_come_out_whole_in_the_order_they_started() {
        for framing in [Framing::Be32, Framing::Varint] {
            let (all, left) = calls(&encode(&interleaved(), framing), Limits::default());
            let ids: Vec<u64> = all.iter().map(|c| c.call_id).collect();
            assert_eq!(ids, [1, 2, 3]);
            assert_eq!(all[0].end, Some(End { status: 0, after: Duration::from_nanos(9_000_000) }));
            assert_eq!(all[0].half_close, Some(Duration::from_nanos(2)));
            assert_eq!(all[1].end.unwrap().status, 14);
            assert_eq!(all[1].requests[0].data, Bytes::from_static(b"bb"));
            assert_eq!(all[2].start, Duration::from_nanos(3_000_000));
            assert!(all.iter().all(|c| c.is_unary() && !c.truncated() && c.responses == 1));
            assert_eq!(left, Leftovers::default());
        }
    }

    #[test]
    fn what_is_held_is_bounded_and_the_oldest_comes_out_unfinished() {
        let (all, left) = calls(&encode(&interleaved(), Framing::Be32), Limits { calls: 1, bytes: 1 << 20 });
        let ids: Vec<u64> = all.iter().map(|c| c.call_id).collect();
        assert_eq!(ids, [1, 2, 3]);
        assert_eq!(all[0].end, None, "let out before its end: {left:?}");
        assert_eq!(left.unfinished, 1);
        // Its end, read later, belongs to no call held.
        assert_eq!(left.orphan_entries, 4);
    }

    #[test]
    fn truncated_messages_and_orphans_are_told() {
        let mut log = unary(5, 10, "/S/m", b"xyz", 100, 0);
        if let Some(Payload::Message(m)) = &mut log[1].payload {
            m.length = 3000;
        }
        log[1].payload_truncated = true;
        let orphan = entry(99, 4, 50, EventType::ServerHeader, None);
        log.insert(0, orphan);
        let (all, left) = calls(&encode(&log, Framing::Varint), Limits::default());
        assert!(all[0].truncated());
        assert_eq!(all[0].request_bytes(), 3000);
        assert_eq!(left.orphan_entries, 1);
    }
}
