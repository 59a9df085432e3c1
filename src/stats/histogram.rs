//! A histogram as bytes and as text: HdrHistogram's V2 format with deflate, base64 in JSON.
//! What every result, log and kept interval holds, read by whatever renders them.
use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;

/// A histogram in HdrHistogram's V2 format with deflate: what every result, log and kept
/// interval holds, so that any HdrHistogram implementation reads it and merges are exact.
pub fn pack(h: &Histogram<u64>) -> Vec<u8> {
    let mut out = Vec::new();
    // Serializing into a Vec cannot fail for a valid histogram.
    let _ = V2DeflateSerializer::new().serialize(h, &mut out);
    out
}

/// HdrHistogram's V2 cookies (plain, deflated) and header length, as its serialization
/// module defines them.
const V2_COOKIE: u32 = 0x1c84_9313;
const V2_DEFLATE_COOKIE: u32 = 0x1c84_9314;
const V2_HEADER: usize = 40;

/// The longest V2 payload read: 64 MiB, beyond the counts of any histogram HdrHistogram can
/// make (at most about 6.3 million counts, 9 bytes each at worst).
const MAX_PAYLOAD: usize = 64 << 20;

/// The inverse of `pack`; the error says what is wrong with the bytes. The header's payload
/// length is checked against the bytes there are: the deserializer makes room for it before
/// reading, so a header saying 4 GiB took 4 GiB.
pub fn unpack(bytes: &[u8]) -> Result<Histogram<u64>, String> {
    let word = |b: &[u8], at: usize| b.get(at..at + 4).map(|w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
    let inflated;
    let plain = match word(bytes, 0) {
        Some(V2_DEFLATE_COOKIE) => {
            use std::io::Read as _;
            let mut out = Vec::new();
            let limit = (V2_HEADER + MAX_PAYLOAD + 1) as u64;
            flate2::read::ZlibDecoder::new(bytes.get(8..).unwrap_or_default())
                .take(limit)
                .read_to_end(&mut out)
                .map_err(|e| format!("is not an HdrHistogram: {e}"))?;
            inflated = out;
            &inflated[..]
        }
        _ => bytes,
    };
    if word(plain, 0) == Some(V2_COOKIE) {
        let payload = word(plain, 4).unwrap_or(0) as usize;
        if payload > MAX_PAYLOAD || payload > plain.len().saturating_sub(V2_HEADER) {
            return Err(format!("is not an HdrHistogram: its header says {payload} bytes of counts, it holds fewer"));
        }
    }
    let mut reader = plain;
    Deserializer::new().deserialize(&mut reader).map_err(|e| format!("is not an HdrHistogram: {e:?}"))
}

/// `pack` as base64 text, as JSON results and interval logs carry it.
pub fn to_text(h: &Histogram<u64>) -> String {
    packed_text(&pack(h))
}

/// What `pack` made, as `to_text` writes it (a histogram packed earlier, kept as bytes).
pub fn packed_text(packed: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(packed)
}

/// The inverse of `to_text`.
pub fn from_text(text: &str) -> Result<Histogram<u64>, String> {
    let bytes =
        base64::engine::general_purpose::STANDARD.decode(text.trim()).map_err(|e| format!("is not base64: {e}"))?;
    unpack(&bytes)
}

/// A histogram field written as `to_text` (`#[serde(with = "crate::stats::histogram::as_text")]`).
pub mod as_text {
    use hdrhistogram::Histogram;

    pub fn serialize<S: serde::Serializer>(h: &Histogram<u64>, to: S) -> Result<S::Ok, S::Error> {
        to.serialize_str(&super::to_text(h))
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(from: D) -> Result<Histogram<u64>, D::Error> {
        let text: String = serde::Deserialize::deserialize(from)?;
        super::from_text(&text).map_err(serde::de::Error::custom)
    }
}
