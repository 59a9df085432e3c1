//! A binary log file as a stream of `GrpcLogEntry`s, one at a time, each at most a limit:
//! a log of any size is read in the memory of its largest entry. Two framings exist:
//! grpc-go's file sink writes each entry behind its length as 4 bytes, big-endian
//! (grpc-go, internal/binarylog/sink.go, `bufferedSink`); grpc-java's examples write them
//! with protobuf's `writeDelimitedTo`, behind a varint. A file that is neither (truncated,
//! garbage, endless zeros) is refused at the first entry that is not one, in one line.
use super::proto::grpc_log_entry::{EventType, Payload};
use super::proto::GrpcLogEntry;
use prost::Message;
use std::io::{BufRead, ErrorKind, Read, Write};

/// How each entry's length is written before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize)]
pub enum Framing {
    /// 4 bytes, big-endian: grpc-go's file sink (`binarylog.NewTempFileSink`).
    Be32,
    /// A varint: protobuf's `writeDelimitedTo` (grpc-java's examples).
    Varint,
}

impl Framing {
    pub fn as_str(self) -> &'static str {
        match self {
            Framing::Be32 => "4-byte big-endian lengths (grpc-go)",
            Framing::Varint => "varint lengths (grpc-java's writeDelimitedTo)",
        }
    }

    /// The framing of a log that starts with `first` bytes: an entry is never empty (its
    /// call_id is not 0), so a varint length never starts with a 0 byte, and a 4-byte length
    /// does unless the entry is 16 MiB or more; None when there is no byte at all.
    pub fn detect(first: &[u8]) -> Option<Framing> {
        match first.first()? {
            0 => Some(Framing::Be32),
            _ => Some(Framing::Varint),
        }
    }

    /// Writes `entry` with this framing (tests, and logs made for a check).
    pub fn write(self, out: &mut impl Write, entry: &GrpcLogEntry) -> std::io::Result<()> {
        let body = entry.encode_to_vec();
        match self {
            Framing::Be32 => {
                let len = u32::try_from(body.len()).map_err(|_| std::io::Error::other("entry over 4 GiB"))?;
                out.write_all(&len.to_be_bytes())?;
            }
            Framing::Varint => {
                let mut len = Vec::with_capacity(10);
                prost::encoding::encode_varint(body.len() as u64, &mut len);
                out.write_all(&len)?;
            }
        }
        out.write_all(&body)
    }
}

/// The entries of a log, read in turn.
pub struct Entries<R> {
    input: R,
    framing: Framing,
    /// The largest entry accepted, in bytes.
    limit: u64,
    /// Where the next entry starts, and how many were read.
    offset: u64,
    count: u64,
    body: Vec<u8>,
}

impl<R: BufRead> Entries<R> {
    /// Reads `input` with `framing`, or the framing its first byte tells (`Framing::detect`).
    pub fn new(mut input: R, framing: Option<Framing>, limit: u64) -> Result<Entries<R>, String> {
        let framing = match framing {
            Some(framing) => framing,
            None => {
                let first = input.fill_buf().map_err(|e| format!("cannot read: {e}"))?;
                Framing::detect(first).ok_or("empty: no entry in it")?
            }
        };
        Ok(Entries { input, framing, limit, offset: 0, count: 0, body: Vec::new() })
    }

    pub fn framing(&self) -> Framing {
        self.framing
    }

    /// Bytes read so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The next entry, checked; None at the end of the file (between entries).
    pub fn next_entry(&mut self) -> Result<Option<GrpcLogEntry>, String> {
        let at = self.offset;
        let Some(len) = self.length()? else { return Ok(None) };
        let where_ = |why: String| format!("entry {} at byte {at}: {why}", self.count + 1);
        if len > self.limit {
            return Err(where_(format!(
                "{len} bytes, more than the {} an entry may have (--replay-max-entry): not a binary log in {}?",
                crate::units::bytes(self.limit),
                self.framing.as_str()
            )));
        }
        self.body.clear();
        let read = (&mut self.input).take(len).read_to_end(&mut self.body).map_err(|e| where_(e.to_string()))?;
        self.offset += read as u64;
        if (read as u64) < len {
            return Err(where_(format!("truncated: the file ends {read} bytes into its {len}")));
        }
        let entry = GrpcLogEntry::decode(&self.body[..])
            .map_err(|e| where_(format!("not a grpc.binarylog.v1.GrpcLogEntry ({e})")))?;
        check(&entry).map_err(|why| where_(why.to_string()))?;
        self.count += 1;
        Ok(Some(entry))
    }

    /// The next entry's length; None at the end of the file.
    fn length(&mut self) -> Result<Option<u64>, String> {
        let mut prefix = [0u8; 10];
        let mut got = 0usize;
        loop {
            let want = match self.framing {
                Framing::Be32 => 4,
                // A varint ends at its first byte below 0x80.
                Framing::Varint if got > 0 && prefix[got - 1] < 0x80 => break,
                Framing::Varint if got == prefix.len() => {
                    return Err(format!("entry {} at byte {}: its length is no varint", self.count + 1, self.offset))
                }
                Framing::Varint => got + 1,
            };
            if got == want {
                break;
            }
            match self.input.read(&mut prefix[got..want]) {
                Ok(0) if got == 0 => return Ok(None),
                Ok(0) => {
                    return Err(format!(
                        "entry {} at byte {}: truncated: the file ends inside its length",
                        self.count + 1,
                        self.offset
                    ))
                }
                Ok(n) => got += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("cannot read at byte {}: {e}", self.offset)),
            }
        }
        self.offset += got as u64;
        Ok(Some(match self.framing {
            Framing::Be32 => u32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]) as u64,
            Framing::Varint => prost::encoding::decode_varint(&mut &prefix[..got])
                .map_err(|_| format!("entry {} at byte {}: its length is no varint", self.count + 1, self.offset))?,
        }))
    }
}

/// What makes a decoded message a log entry: every field the format says is set, and the
/// payload its type calls for (protobuf decodes almost any bytes into some message).
fn check(entry: &GrpcLogEntry) -> Result<(), &'static str> {
    if entry.call_id == 0 {
        return Err("call_id 0: not a binary log entry");
    }
    if entry.timestamp.is_none() {
        return Err("no timestamp: not a binary log entry");
    }
    let kind = EventType::try_from(entry.r#type).map_err(|_| "an unknown event type: not a binary log entry")?;
    let fits = match (kind, &entry.payload) {
        (EventType::ClientHeader, Some(Payload::ClientHeader(h))) => h.method_name.starts_with('/'),
        (EventType::ServerHeader, Some(Payload::ServerHeader(_)) | None) => true,
        (EventType::ClientMessage | EventType::ServerMessage, Some(Payload::Message(_))) => true,
        (EventType::ServerTrailer, Some(Payload::Trailer(_)) | None) => true,
        (EventType::ClientHalfClose | EventType::Cancel, None) => true,
        _ => false,
    };
    match (kind, fits) {
        (EventType::Unknown, _) => Err("event type 0: not a binary log entry"),
        (_, true) => Ok(()),
        (_, false) => Err("its payload does not fit its event type: not a binary log entry"),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::replay::proto::{grpc_log_entry::Logger, ClientHeader, Message as LogMessage, Trailer};

    /// An entry of call `call` at `ns` after the epoch.
    pub fn entry(call: u64, seq: u64, ns: u64, kind: EventType, payload: Option<Payload>) -> GrpcLogEntry {
        GrpcLogEntry {
            timestamp: Some(prost_types::Timestamp {
                seconds: (ns / 1_000_000_000) as i64,
                nanos: (ns % 1_000_000_000) as i32,
            }),
            call_id: call,
            sequence_id_within_call: seq,
            r#type: kind as i32,
            logger: Logger::Server as i32,
            payload,
            payload_truncated: false,
            peer: None,
        }
    }

    /// A whole unary call: header at `ns`, request `data`, trailer `took` later with `status`.
    pub fn unary(call: u64, ns: u64, method: &str, data: &[u8], took: u64, status: u32) -> Vec<GrpcLogEntry> {
        let header = ClientHeader { method_name: method.into(), ..Default::default() };
        let message = LogMessage { length: data.len() as u32, data: data.to_vec() };
        let reply = LogMessage { length: 3, data: b"abc".to_vec() };
        vec![
            entry(call, 1, ns, EventType::ClientHeader, Some(Payload::ClientHeader(header))),
            entry(call, 2, ns + 1, EventType::ClientMessage, Some(Payload::Message(message))),
            entry(call, 3, ns + 2, EventType::ClientHalfClose, None),
            entry(call, 4, ns + 3, EventType::ServerHeader, Some(Payload::ServerHeader(Default::default()))),
            entry(call, 5, ns + 4, EventType::ServerMessage, Some(Payload::Message(reply))),
            entry(
                call,
                6,
                ns + took,
                EventType::ServerTrailer,
                Some(Payload::Trailer(Trailer { status_code: status, ..Default::default() })),
            ),
        ]
    }

    pub fn encode(entries: &[GrpcLogEntry], framing: Framing) -> Vec<u8> {
        let mut out = Vec::new();
        for e in entries {
            framing.write(&mut out, e).unwrap();
        }
        out
    }

    fn read_all(bytes: &[u8], framing: Option<Framing>) -> Result<Vec<GrpcLogEntry>, String> {
        let mut entries = Entries::new(bytes, framing, 1 << 20)?;
        let mut all = Vec::new();
        while let Some(e) = entries.next_entry()? {
            all.push(e);
        }
        Ok(all)
    }

    #[test]
    fn both_framings_are_read_and_told_apart() {
        let log =
            [unary(7, 1_000, "/EchoService/echo", b"hello", 500, 0), unary(8, 2_000, "/A/b", &[0; 300], 9, 5)].concat();
        for framing in [Framing::Be32, Framing::Varint] {
            let bytes = encode(&log, framing);
            assert_eq!(Entries::new(&bytes[..], None, 1 << 20).unwrap().framing(), framing);
            assert_eq!(read_all(&bytes, None).unwrap(), log, "{framing:?}");
        }
    }

    #[test]
    fn truncated_garbage_and_endless_input_are_refused_in_a_line() {
        let log = encode(&unary(7, 1_000, "/EchoService/echo", b"hello", 500, 0), Framing::Be32);
        for cut in [2, 4, 10, log.len() - 1] {
            let err = read_all(&log[..cut], None).unwrap_err();
            assert!(err.contains("truncated"), "cut at {cut}: {err}");
        }
        // Endless zeros: an entry of no bytes is no entry.
        let zeros = vec![0u8; 4096];
        assert!(read_all(&zeros, None).unwrap_err().contains("call_id 0"));
        // Text, random bytes: a length beyond the limit, or no entry.
        let text = b"yes\nyes\nyes\nyes\n".repeat(100);
        assert!(read_all(&text, None).is_err());
        let noise: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
        for framing in [None, Some(Framing::Be32), Some(Framing::Varint)] {
            let err = read_all(&noise, framing).unwrap_err();
            assert!(err.starts_with("entry 1 at byte 0") && !err.contains('\n'), "{err}");
        }
        assert_eq!(read_all(&[], None).unwrap_err(), "empty: no entry in it");
        // An entry beyond the limit is refused before it is read.
        let big = encode(&unary(1, 1, "/A/b", &[7; 5000], 1, 0), Framing::Varint);
        let mut entries = Entries::new(&big[..], None, 1000).unwrap();
        assert!(entries.next_entry().unwrap().is_some());
        assert!(entries.next_entry().unwrap_err().contains("more than the"));
    }
}
