//! The gRPC wire format, shared by the load path and reflection: the 5-byte message
//! prefix, the deframer, `grpc-timeout`, `grpc-message`, and gRPC's HTTP status mapping.
use bytes::Bytes;
use http::{HeaderValue, StatusCode};
use std::time::Duration;
use tonic::Code;

/// Counts message bytes across data frames without copying them: a 5-byte prefix may
/// straddle two frames. Copies the messages out only when asked to keep them.
#[derive(Default)]
pub struct Deframer {
    prefix: [u8; 5],
    /// Bytes of the current prefix seen so far.
    have: usize,
    /// Bytes of the current message still to come.
    left: usize,
    /// Message bytes seen, without the prefixes.
    pub payload: u64,
    /// Whole or started messages seen.
    pub count: u64,
    /// The largest message length announced by a prefix so far.
    pub largest: usize,
}

impl Deframer {
    pub fn feed(&mut self, mut data: &[u8], mut keep: Option<&mut Vec<u8>>) {
        while !data.is_empty() {
            if self.left > 0 {
                let n = self.left.min(data.len());
                if let Some(out) = keep.as_deref_mut() {
                    out.extend_from_slice(&data[..n]);
                }
                self.payload += n as u64;
                self.left -= n;
                data = &data[n..];
            } else {
                let n = (5 - self.have).min(data.len());
                self.prefix[self.have..self.have + n].copy_from_slice(&data[..n]);
                self.have += n;
                data = &data[n..];
                if self.have == 5 {
                    let len = [self.prefix[1], self.prefix[2], self.prefix[3], self.prefix[4]];
                    self.left = u32::from_be_bytes(len) as usize;
                    self.largest = self.largest.max(self.left);
                    self.have = 0;
                    self.count += 1;
                }
            }
        }
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
    fn deframer_counts_messages_split_anywhere() {
        let mut wire = frame(b"hello").to_vec();
        wire.extend_from_slice(&frame(b""));
        wire.extend_from_slice(&frame(b"abc"));
        for split in 0..=wire.len() {
            let mut d = Deframer::default();
            let mut kept = Vec::new();
            d.feed(&wire[..split], Some(&mut kept));
            d.feed(&wire[split..], Some(&mut kept));
            assert_eq!((d.payload, d.count, d.complete()), (8, 3, true), "split at {split}");
            assert_eq!(kept, b"helloabc");
            assert_eq!(d.completed(), 3);
        }
        let mut d = Deframer::default();
        d.feed(&wire[..3], None);
        assert_eq!(d.completed(), 0, "half a prefix");
        d.feed(&wire[3..7], None);
        assert_eq!(d.completed(), 0, "the first message started, not whole");
        d.feed(&wire[7..10], None);
        assert_eq!(d.completed(), 1);
        let mut d = Deframer::default();
        d.feed(&wire[..7], None);
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
