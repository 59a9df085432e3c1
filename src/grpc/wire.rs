//! The gRPC wire format, shared by the load path and reflection: the 5-byte message
//! prefix, the deframer, `grpc-timeout`, `grpc-message`, and gRPC's HTTP status mapping.
use bytes::Bytes;
use http::{HeaderValue, StatusCode};
use std::time::Duration;
use tonic::Code;

/// Counts message bytes across data frames without copying them: a 5-byte prefix may
/// straddle two frames. Copies the messages out only when asked to keep them. A message whose
/// flag says compressed is inflated (gzip) as it passes, within the size limit.
pub struct Deframer {
    prefix: [u8; 5],
    /// Bytes of the current prefix seen so far.
    have: usize,
    /// Bytes of the current message still to come (on the wire: compressed, if it is).
    left: usize,
    /// Message bytes seen, without the prefixes (inflated, for a compressed message).
    pub payload: u64,
    /// Whole or started messages seen.
    pub count: u64,
    /// The largest message length announced by a prefix so far.
    pub largest: usize,
    /// The largest message taken, on the wire or inflated (`--max-msg-size`).
    max: usize,
    /// The current message's inflater, when it came compressed; None for plain messages.
    inflating: Option<Box<Inflating>>,
}

impl Default for Deframer {
    fn default() -> Self {
        Deframer::new(usize::MAX)
    }
}

/// Why the messages of an answer cannot be taken: the call ends with this status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub code: Code,
    pub message: String,
}

impl Deframer {
    /// A deframer that refuses messages above `max` bytes, on the wire or once inflated.
    pub fn new(max: usize) -> Deframer {
        Deframer { prefix: [0; 5], have: 0, left: 0, payload: 0, count: 0, largest: 0, max, inflating: None }
    }

    pub fn feed(&mut self, mut data: &[u8], mut keep: Option<&mut Vec<u8>>) -> Result<(), Fault> {
        while !data.is_empty() {
            if self.left > 0 {
                let n = self.left.min(data.len());
                self.left -= n;
                match self.inflating.as_deref_mut() {
                    None => {
                        if let Some(out) = keep.as_deref_mut() {
                            out.extend_from_slice(&data[..n]);
                        }
                        self.payload += n as u64;
                    }
                    Some(inflating) => {
                        let before = inflating.size();
                        let written = inflating.write(&data[..n], self.left == 0);
                        self.payload += (inflating.size() - before) as u64;
                        inflating.hand_over(keep.as_deref_mut());
                        written?;
                        if self.left == 0 {
                            self.inflating = None;
                        }
                    }
                }
                data = &data[n..];
            } else {
                let n = (5 - self.have).min(data.len());
                self.prefix[self.have..self.have + n].copy_from_slice(&data[..n]);
                self.have += n;
                data = &data[n..];
                if self.have == 5 {
                    self.start_message()?;
                }
            }
        }
        Ok(())
    }

    /// A whole prefix came: its length and compressed flag rule the message that follows.
    fn start_message(&mut self) -> Result<(), Fault> {
        let len = [self.prefix[1], self.prefix[2], self.prefix[3], self.prefix[4]];
        self.left = u32::from_be_bytes(len) as usize;
        self.largest = self.largest.max(self.left);
        self.have = 0;
        self.count += 1;
        if self.left > self.max {
            let why = format!("received message larger than max ({} vs. {})", self.left, self.max);
            return Err(Fault { code: Code::ResourceExhausted, message: why });
        }
        match self.prefix[0] {
            0 => Ok(()),
            // An empty compressed message is an empty message: there is nothing to inflate.
            1 if self.left == 0 => Ok(()),
            1 => {
                self.inflating = Some(Box::new(Inflating::new(self.max)));
                Ok(())
            }
            flag => {
                let why = format!("a response message with compressed flag {flag} (gRPC knows 0 and 1)");
                Err(Fault { code: Code::Internal, message: why })
            }
        }
    }

    /// `feed`, keeping each whole message apart (a stream's, that a workload step captures
    /// from or checks): `current` collects the message under way, pushed to `whole` once whole.
    pub fn feed_keeping_each(
        &mut self,
        mut data: &[u8],
        current: &mut Vec<u8>,
        whole: &mut std::collections::VecDeque<Vec<u8>>,
    ) -> Result<(), Fault> {
        while !data.is_empty() {
            // At most the rest of the prefix or of the message: each boundary is seen.
            let wanted = if self.left > 0 { self.left } else { 5 - self.have };
            let (piece, rest) = data.split_at(wanted.min(data.len()));
            let before = self.completed();
            self.feed(piece, Some(current))?;
            if self.completed() > before {
                whole.push_back(std::mem::take(current));
            }
            data = rest;
        }
        Ok(())
    }

    /// Whole messages seen (a started one not counted until its last byte).
    pub fn completed(&self) -> u64 {
        self.count - (self.left > 0) as u64
    }

    /// True when no message is cut short.
    pub fn complete(&self) -> bool {
        self.have == 0 && self.left == 0
    }
}

/// One compressed message being inflated. Its output is counted and kept only when asked, and
/// refused past the size limit, so that a small message that inflates without end (a zip
/// bomb) costs neither memory nor more time than the limit's worth.
struct Inflating {
    decoder: flate2::write::GzDecoder<Inflated>,
}

/// Where inflated bytes go: counted against the limit, kept until handed over.
struct Inflated {
    size: usize,
    max: usize,
    kept: Vec<u8>,
}

impl std::io::Write for Inflated {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.size += buf.len();
        if self.size > self.max {
            return Err(std::io::Error::other("above the size limit"));
        }
        self.kept.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Inflating {
    fn new(max: usize) -> Inflating {
        Inflating { decoder: flate2::write::GzDecoder::new(Inflated { size: 0, max, kept: Vec::new() }) }
    }

    /// Inflated bytes of the message so far.
    fn size(&self) -> usize {
        self.decoder.get_ref().size
    }

    /// Inflates `compressed`; `last`: the message's last bytes, so the gzip stream must end
    /// whole (its checksum and length right).
    fn write(&mut self, compressed: &[u8], last: bool) -> Result<(), Fault> {
        use std::io::Write;
        let mut done = self.decoder.write_all(compressed);
        if last && done.is_ok() {
            done = self.decoder.try_finish();
        }
        let max = self.decoder.get_ref().max;
        match done {
            Ok(()) => Ok(()),
            Err(_) if self.size() > max => Err(Fault {
                code: Code::ResourceExhausted,
                message: format!("received message after decompression larger than max (above {max})"),
            }),
            Err(e) => {
                Err(Fault { code: Code::Internal, message: format!("cannot inflate a gzip response message: {e}") })
            }
        }
    }

    /// Moves the bytes inflated so far to `keep`, or drops them when not kept.
    fn hand_over(&mut self, keep: Option<&mut Vec<u8>>) {
        let kept = &mut self.decoder.get_mut().kept;
        match keep {
            Some(out) if out.is_empty() => std::mem::swap(out, kept),
            Some(out) => out.append(kept),
            None => kept.clear(),
        }
    }
}

/// gRPC's mapping of an HTTP status to a code, for a response that is not 200.
pub fn http_status_code(status: StatusCode) -> Code {
    match status.as_u16() {
        400 => Code::Internal,
        401 => Code::Unauthenticated,
        403 => Code::PermissionDenied,
        404 => Code::Unimplemented,
        429 | 502 | 503 | 504 => Code::Unavailable,
        _ => Code::Unknown,
    }
}

/// grpc-message is percent-encoded UTF-8; a malformed escape is kept as it came.
pub fn percent_decode(raw: &[u8]) -> String {
    percent_encoding::percent_decode(raw).decode_utf8_lossy().into_owned()
}

/// grpc-timeout: at most 8 digits and a unit; the finest unit that fits, rounded up so the
/// server never gives up before the client does.
pub fn grpc_timeout(deadline: Duration) -> HeaderValue {
    let nanos = deadline.as_nanos();
    let units: [(u128, char); 6] = [
        (1, 'n'),
        (1_000, 'u'),
        (1_000_000, 'm'),
        (1_000_000_000, 'S'),
        (60_000_000_000, 'M'),
        (3_600_000_000_000, 'H'),
    ];
    let (value, unit) = units
        .iter()
        .map(|&(per, unit)| (nanos.div_ceil(per), unit))
        .find(|&(value, _)| value < 100_000_000)
        .unwrap_or((99_999_999, 'H'));
    HeaderValue::try_from(format!("{value}{unit}")).expect("digits and a letter are a valid header value")
}

/// The gRPC length-prefixed message: 1 byte compressed flag (0), 4 bytes length, message.
pub fn frame(message: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(5 + message.len());
    out.push(0);
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out.into()
}

/// A framed message compressed with gzip: the flag byte says so (`grpc-encoding: gzip`
/// goes with it). Request bodies are framed once per run; compressing them is per call.
pub fn gzip_frame(framed: &[u8]) -> Bytes {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    // Writing into a Vec cannot fail.
    let _ = encoder.write_all(framed.get(5..).unwrap_or_default());
    let compressed = encoder.finish().unwrap_or_default();
    let mut out = Vec::with_capacity(5 + compressed.len());
    out.push(1);
    out.extend_from_slice(&(compressed.len() as u32).to_be_bytes());
    out.extend_from_slice(&compressed);
    out.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_whole_message_is_kept_however_the_stream_is_split() {
        let mut wire = frame(b"hello").to_vec();
        wire.extend_from_slice(&gzip_frame(&frame(b"abc")));
        wire.extend_from_slice(&frame(b""));
        wire.extend_from_slice(&frame(b"xy"));
        for split in 0..=wire.len() {
            let (mut d, mut current, mut whole) = (Deframer::default(), Vec::new(), Default::default());
            d.feed_keeping_each(&wire[..split], &mut current, &mut whole).unwrap();
            d.feed_keeping_each(&wire[split..], &mut current, &mut whole).unwrap();
            let expected: Vec<&[u8]> = vec![b"hello", b"abc", b"", b"xy"];
            assert_eq!(whole, expected, "split at {split}");
            assert_eq!((d.completed(), d.payload), (4, 10));
        }
        // A message under way is not whole.
        let (mut d, mut current, mut whole) = (Deframer::default(), Vec::new(), Default::default());
        d.feed_keeping_each(&wire[..wire.len() - 1], &mut current, &mut whole).unwrap();
        assert_eq!(whole.back().map(Vec::as_slice), Some(&b""[..]));
    }

    #[test]
    fn deframer_counts_messages_split_anywhere() {
        let mut wire = frame(b"hello").to_vec();
        wire.extend_from_slice(&frame(b""));
        wire.extend_from_slice(&frame(b"abc"));
        for split in 0..=wire.len() {
            let mut d = Deframer::default();
            let mut kept = Vec::new();
            d.feed(&wire[..split], Some(&mut kept)).unwrap();
            d.feed(&wire[split..], Some(&mut kept)).unwrap();
            assert_eq!((d.payload, d.count, d.complete()), (8, 3, true), "split at {split}");
            assert_eq!(kept, b"helloabc");
            assert_eq!(d.completed(), 3);
        }
        let mut d = Deframer::default();
        d.feed(&wire[..3], None).unwrap();
        assert_eq!(d.completed(), 0, "half a prefix");
        d.feed(&wire[3..7], None).unwrap();
        assert_eq!(d.completed(), 0, "the first message started, not whole");
        d.feed(&wire[7..10], None).unwrap();
        assert_eq!(d.completed(), 1);
        let mut d = Deframer::default();
        d.feed(&wire[..7], None).unwrap();
        assert!(!d.complete());
    }

    #[test]
    fn a_gzip_frame_says_so_and_inflates_to_the_message() {
        use std::io::Read;
        let framed = gzip_frame(&frame(b"hello hello hello"));
        assert_eq!(framed[0], 1);
        assert_eq!(u32::from_be_bytes([framed[1], framed[2], framed[3], framed[4]]) as usize, framed.len() - 5);
        let mut inflated = String::new();
        flate2::read::GzDecoder::new(&framed[5..]).read_to_string(&mut inflated).unwrap();
        assert_eq!(inflated, "hello hello hello");
    }

    #[test]
    fn gzip_messages_are_inflated_split_anywhere() {
        let mut wire = gzip_frame(&frame(b"hello hello hello")).to_vec();
        wire.extend_from_slice(&frame(b"plain"));
        wire.extend_from_slice(&[1, 0, 0, 0, 0]); // an empty message flagged compressed
        wire.extend_from_slice(&gzip_frame(&frame(b"")));
        for split in 0..=wire.len() {
            let mut d = Deframer::default();
            let mut kept = Vec::new();
            d.feed(&wire[..split], Some(&mut kept)).unwrap();
            d.feed(&wire[split..], Some(&mut kept)).unwrap();
            assert_eq!(kept, b"hello hello helloplain", "split at {split}");
            assert_eq!((d.payload, d.count, d.completed(), d.complete()), (22, 4, 4, true), "split at {split}");
        }
    }

    #[test]
    fn a_broken_gzip_message_or_flag_is_internal() {
        let mut broken = gzip_frame(&frame(b"hello hello hello")).to_vec();
        let last = broken.len() - 1;
        broken[last] ^= 0xff; // the inflated length, in gzip's trailer
        let fault = Deframer::default().feed(&broken, None).unwrap_err();
        assert_eq!(fault.code, Code::Internal, "{fault:?}");
        let fault = Deframer::default().feed(&[2, 0, 0, 0, 1, 0], None).unwrap_err();
        assert_eq!(fault.code, Code::Internal, "{fault:?}");
    }

    #[test]
    fn the_limit_holds_on_the_wire_and_once_inflated() {
        let bomb = gzip_frame(&frame(&vec![0; 16 << 20]));
        assert!(bomb.len() < (16 << 20) / 100, "a small answer that inflates 100 times: {}", bomb.len());
        let mut d = Deframer::new(1 << 20);
        let mut kept = Vec::new();
        let fault = d.feed(&bomb, Some(&mut kept)).unwrap_err();
        assert_eq!(fault.code, Code::ResourceExhausted);
        assert!(kept.len() <= 1 << 20, "kept {} bytes", kept.len());
        let fault = Deframer::new(4).feed(&frame(b"hello"), None).unwrap_err();
        assert_eq!(fault.message, "received message larger than max (5 vs. 4)");
    }

    #[test]
    fn grpc_message_is_percent_decoded() {
        assert_eq!(percent_decode(b"caf%C3%A9 100%25 %zz%"), "café 100% %zz%");
    }

    #[test]
    fn grpc_timeout_uses_the_finest_unit_that_fits() {
        assert_eq!(grpc_timeout(Duration::from_millis(1500)), "1500000u");
        assert_eq!(grpc_timeout(Duration::from_secs(100)), "100000m");
        assert_eq!(grpc_timeout(Duration::from_nanos(5)), "5n");
        assert_eq!(grpc_timeout(Duration::from_secs(1 << 40)), "99999999H");
    }
}
