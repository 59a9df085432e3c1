//! `-m`: request metadata given as a JSON object of strings.
use crate::error::bad_input;
use base64::Engine;
use http::header::{HeaderMap, HeaderName, HeaderValue};

/// `-m` JSON object of request metadata to headers; `-bin` keys take base64 values.
/// Keys are lowercased (HTTP/2 requires it). A `-bin` value is checked to be base64 and sent
/// as base64 without padding, as gRPC carries binary metadata on the wire.
pub fn metadata(json: &str) -> anyhow::Result<HeaderMap> {
    metadata_of("-m", json)
}

/// The same for another flag (`--reflect-metadata`), whose name its errors give.
pub fn metadata_of(flag: &str, json: &str) -> anyhow::Result<HeaderMap> {
    let expected = r#"expected a JSON object of string values, e.g. {"authorization": "Bearer t"}"#;
    let value: serde_json::Value =
        serde_json::from_str(json).map_err(|e| bad_input(format!("{flag}: invalid JSON: {e}")))?;
    let serde_json::Value::Object(entries) = value else {
        return Err(bad_input(format!("{flag}: {expected}")));
    };
    let mut headers = HeaderMap::new();
    for (key, value) in entries {
        let name = HeaderName::from_bytes(key.to_lowercase().as_bytes())
            .map_err(|_| bad_input(format!("{flag}: invalid metadata key {key:?}")))?;
        let serde_json::Value::String(text) = value else {
            return Err(bad_input(format!("{flag}: key {key:?}: {expected}")));
        };
        let text = if name.as_str().ends_with("-bin") {
            let bytes = decode_base64(&text)
                .ok_or_else(|| bad_input(format!("{flag}: key {key:?}: a -bin value must be base64")))?;
            base64::engine::general_purpose::STANDARD_NO_PAD.encode(bytes)
        } else {
            text
        };
        let value = HeaderValue::from_str(&text)
            .map_err(|_| bad_input(format!("{flag}: key {key:?}: invalid metadata value {text:?}")))?;
        headers.append(name, value);
    }
    Ok(headers)
}

/// Standard base64, padded or not (gRPC accepts both).
fn decode_base64(text: &str) -> Option<Vec<u8>> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
    STANDARD.decode(text).or_else(|_| STANDARD_NO_PAD.decode(text)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(json: &str) -> String {
        let e = metadata(json).unwrap_err();
        assert_eq!(crate::error::exit_code(&e), 2);
        e.to_string()
    }

    #[test]
    fn keys_are_lowercased_and_values_kept() {
        let h = metadata(r#"{"Authorization": "Bearer abc", "x-run": "7"}"#).unwrap();
        assert_eq!(h.len(), 2);
        assert_eq!(h["authorization"], "Bearer abc");
        assert_eq!(h["x-run"], "7");
        assert!(metadata("{}").unwrap().is_empty());
    }

    #[test]
    fn bin_keys_take_base64_and_send_it_unpadded() {
        let h = metadata(r#"{"trace-bin": "AQID", "id-bin": "AQ=="}"#).unwrap();
        assert_eq!(h["trace-bin"], "AQID");
        assert_eq!(h["id-bin"], "AQ");
        assert!(err(r#"{"trace-bin": "not base64!"}"#).contains("key \"trace-bin\": a -bin value must be base64"));
    }

    #[test]
    fn bad_metadata_names_the_problem() {
        assert!(err(r#"{"a": 1"#).starts_with("-m: invalid JSON: "));
        assert!(err(r#"["a"]"#).starts_with("-m: expected a JSON object"));
        assert_eq!(err(r#"{"bad key": "v"}"#), "-m: invalid metadata key \"bad key\"");
        assert!(err(r#"{"n": 5}"#).starts_with("-m: key \"n\": expected a JSON object of string values"));
        assert_eq!(err(r#"{"k": "line\nbreak"}"#), "-m: key \"k\": invalid metadata value \"line\\nbreak\"");
    }
}
