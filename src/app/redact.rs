//! Secrets kept out of what a run writes: the values of metadata (`-m`,
//! `--reflect-metadata`) and tags whose names look like credentials, and of any name given
//! with `--redact`, are replaced by `REDACTED` in the command line that results, the history
//! and `kube`'s Job carry. Only names are judged, never values; request bodies (`-d`, `-D`)
//! are data, not credentials, and are kept (a KV request's "key" is its key).
/// What a redacted value becomes.
pub const REDACTED: &str = "REDACTED";

/// Parts of a name that mark a credential, matched anywhere in it (lower case).
const SECRET_PARTS: [&str; 9] =
    ["authorization", "cookie", "token", "secret", "password", "passwd", "credential", "apikey", "api-key"];

/// Words (between '-' or '_') that mark a credential only as a whole word: "x-api-key" and
/// "auth", not "monkey" or "author".
const SECRET_WORDS: [&str; 5] = ["key", "auth", "session", "signature", "pwd"];

/// Judges names: the built-in rule plus the `--redact` names.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    extra: Vec<String>,
}

impl Redactor {
    pub fn new(extra: &[String]) -> Redactor {
        Redactor { extra: extra.iter().map(|n| n.to_lowercase()).collect() }
    }

    /// Whether the value of `name` (a metadata key, a tag name) is kept out of results.
    pub fn is_secret(&self, name: &str) -> bool {
        let name = name.to_lowercase();
        self.extra.contains(&name)
            || SECRET_PARTS.iter().any(|part| name.replace('_', "-").contains(part))
            || name.split(['-', '_']).any(|word| SECRET_WORDS.contains(&word))
    }

    /// A metadata JSON object with the values of its secret names replaced; None when it
    /// names no secret (or is no object: it was refused before anything was written).
    pub fn metadata(&self, json: &str) -> Option<String> {
        let serde_json::Value::Object(mut entries) = serde_json::from_str(json).ok()? else { return None };
        let mut found = false;
        for (name, value) in entries.iter_mut() {
            if self.is_secret(name) {
                *value = REDACTED.into();
                found = true;
            }
        }
        found.then(|| serde_json::Value::Object(entries).to_string())
    }

    /// The names of `json`'s secrets (for `kube`'s note).
    pub fn secret_names(&self, json: &str) -> Vec<String> {
        match serde_json::from_str(json) {
            Ok(serde_json::Value::Object(entries)) => entries.keys().filter(|n| self.is_secret(n)).cloned().collect(),
            _ => Vec::new(),
        }
    }

    /// `run`'s command line as a result records it. The values are found as clap parsed
    /// them and replaced wherever they stand (`-m X`, `--metadata=X`, `-mX`), so no way of
    /// writing the flag slips through.
    /// `metadata` holds the JSON objects given (`-m`, `--reflect-metadata`), `tags` the `--tag`s.
    pub fn arguments(
        &self,
        words: Vec<String>,
        metadata: [&Option<String>; 2],
        tags: &[(String, String)],
    ) -> Vec<String> {
        let mut swaps: Vec<(String, String)> = Vec::new();
        for json in metadata.into_iter().flatten() {
            if let Some(redacted) = self.metadata(json) {
                swaps.push((json.clone(), redacted));
            }
        }
        for (name, value) in tags.iter().filter(|(name, _)| self.is_secret(name)) {
            swaps.push((format!("{name}={value}"), format!("{name}={REDACTED}")));
        }
        words
            .into_iter()
            .map(|word| swaps.iter().fold(word, |word, (from, to)| word.replace(from.as_str(), to)))
            .collect()
    }

    /// Tags as a result records them.
    pub fn tags(&self, tags: &[(String, String)]) -> Vec<(String, String)> {
        tags.iter()
            .map(|(name, value)| match self.is_secret(name) {
                true => (name.clone(), REDACTED.to_string()),
                false => (name.clone(), value.clone()),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_told_by_their_names() {
        let r = Redactor::new(&["X-Tenant".into()]);
        for name in [
            "authorization",
            "Proxy-Authorization",
            "cookie",
            "x-auth-token",
            "x-api-key",
            "apikey",
            "api_key",
            "x-amz-security-token",
            "client_secret",
            "db-password",
            "key",
            "x-session",
            "x-tenant",
        ] {
            assert!(r.is_secret(name), "{name}");
        }
        for name in ["x-run", "user-agent", "x-request-id", "monkey", "author", "keyspace", "grpc-timeout"] {
            assert!(!r.is_secret(name), "{name}");
        }
    }

    #[test]
    fn only_secret_values_are_replaced_wherever_the_flag_stands() {
        let r = Redactor::new(&[]);
        let json = r#"{"authorization": "Bearer abc123", "x-run": "7"}"#;
        let metadata = Some(json.to_string());
        let tags = [("token".to_string(), "t0p".to_string()), ("host".to_string(), "ci".to_string())];
        let words: Vec<String> = [
            "run",
            "-m",
            json,
            &format!("--metadata={json}"),
            "--tag",
            "token=t0p",
            "--tag",
            "host=ci",
            "-d",
            r#"{"key":"k1"}"#,
        ]
        .map(String::from)
        .to_vec();
        let kept = r.arguments(words, [&metadata, &None], &tags).join(" ");
        assert!(!kept.contains("abc123") && !kept.contains("t0p"), "{kept}");
        assert!(
            kept.contains(r#""x-run":"7""#) && kept.contains("host=ci") && kept.contains(r#"{"key":"k1"}"#),
            "{kept}"
        );
        assert_eq!(kept.matches(REDACTED).count(), 3, "{kept}");
        // Nothing secret: the words stay as typed.
        assert_eq!(r.metadata(r#"{"x-run": "7"}"#), None);
    }
}
