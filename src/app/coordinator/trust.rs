//! Who may take part in a coordinated run. Every run has a secret that its shards and its hub
//! share (`run --shards` makes one and hands it to its children in `SECRET_ENV`; a hand-started
//! `--coordinator` reads it from `--coordinator-secret-file` or `SECRET_ENV`; `kube` puts it in
//! the Job's Secret). Each side proves it holds the secret by the HMAC-SHA256 of the other's
//! random nonce, so the secret itself never crosses the wire and an old proof is worth nothing.
//! Beside it, the run's fingerprint: the flags that say what is measured (method, load,
//! workload), less a shard's own (its index, outputs, where it meets the others), so that a
//! shard started with other flags is refused at the door, the flag named.
use crate::error::bad_input;
use base64::Engine;
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The environment variable that holds a run's secret.
pub const SECRET_ENV: &str = "RPCMETER_COORDINATOR_SECRET";

/// The shortest secret taken: a guessable one would let a stranger in.
const MIN_SECRET: usize = 16;

/// A run's shared secret, as an HMAC-SHA256 key (its Debug shows no byte of it).
#[derive(Clone, Debug)]
pub struct Secret(hmac::Key);

/// Which side proves: a hub's proof can never be replayed as a shard's, nor the reverse.
#[derive(Clone, Copy)]
pub enum Role {
    Hub,
    Shard,
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD_NO_PAD.encode(bytes)
}

impl Secret {
    /// A secret of these bytes; one shorter than `MIN_SECRET` is refused (`from` says where
    /// it came from).
    pub fn new(bytes: &[u8], from: &str) -> anyhow::Result<Secret> {
        let bytes = bytes.trim_ascii();
        if bytes.len() < MIN_SECRET {
            return Err(bad_input(format!(
                "{from}: the coordinator's secret has {} bytes, fewer than {MIN_SECRET} (`openssl rand -hex 32` makes one)",
                bytes.len()
            )));
        }
        Ok(Secret(hmac::Key::new(hmac::HMAC_SHA256, bytes)))
    }

    /// A new random secret and its text, to hand to the shards in `SECRET_ENV`.
    pub fn generate() -> anyhow::Result<(Secret, String)> {
        let text = b64(&random::<32>()?);
        Ok((Secret::new(text.as_bytes(), "a generated secret")?, text))
    }

    /// The secret of a hand-started shard: from `file`, else from `SECRET_ENV`; refused
    /// without one (anyone who reaches the port could join the run otherwise).
    pub fn from_file_or_env(file: Option<&Path>) -> anyhow::Result<Secret> {
        if let Some(path) = file {
            let bytes = std::fs::read(path)
                .map_err(|e| bad_input(format!("--coordinator-secret-file {}: {e}", path.display())))?;
            return Secret::new(&bytes, &format!("--coordinator-secret-file {}", path.display()));
        }
        match std::env::var_os(SECRET_ENV) {
            Some(text) => Secret::new(text.as_encoded_bytes(), SECRET_ENV),
            None => Err(bad_input(format!(
                "--coordinator needs the run's secret, the same on every shard: --coordinator-secret-file FILE or {SECRET_ENV} \
                 (docs/shards.md)"
            ))),
        }
    }

    /// The proof, by `role`, of holding the secret, over the other side's nonce and what the
    /// proof vouches for (each part length-prefixed, so no two lists of parts read alike).
    pub fn prove(&self, role: Role, parts: &[&[u8]]) -> String {
        b64(self.tag(role, parts).as_ref())
    }

    /// Whether `proof` is the proof `prove` would give (compared in constant time).
    pub fn verify(&self, role: Role, parts: &[&[u8]], proof: &str) -> bool {
        let Ok(tag) = base64::engine::general_purpose::STANDARD_NO_PAD.decode(proof) else { return false };
        hmac::verify(&self.0, &message(role, parts), &tag).is_ok()
    }

    fn tag(&self, role: Role, parts: &[&[u8]]) -> hmac::Tag {
        hmac::sign(&self.0, &message(role, parts))
    }
}

fn message(role: Role, parts: &[&[u8]]) -> Vec<u8> {
    let mut out = match role {
        Role::Hub => b"rpcmeter coordinator hub v1".to_vec(),
        Role::Shard => b"rpcmeter coordinator shard v1".to_vec(),
    };
    for part in parts {
        out.extend((part.len() as u64).to_be_bytes());
        out.extend(*part);
    }
    out
}

/// N random bytes from the system's source.
fn random<const N: usize>() -> anyhow::Result<[u8; N]> {
    let mut bytes = [0; N];
    SystemRandom::new().fill(&mut bytes).map_err(|_| crate::error::internal("no randomness from the system"))?;
    Ok(bytes)
}

/// A fresh nonce, as text.
pub fn nonce() -> anyhow::Result<String> {
    Ok(b64(&random::<24>()?))
}

/// What a shard proves at the door: that it holds the run's secret, and what it runs.
#[derive(Clone, Debug)]
pub struct Credentials {
    pub secret: Secret,
    pub fingerprint: Fingerprint,
}

/// What a run measures, by flag: each value's SHA-256 (a value may be a credential, so only
/// its hash is sent and compared), and one hash over them all.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Fingerprint {
    pub hash: String,
    /// Flag (as the user writes it, `--rps`) -> the hash of its value(s).
    pub fields: BTreeMap<String, String>,
}

/// The largest fingerprint taken before a shard has proved itself.
pub const MAX_FIELDS: usize = 128;

impl Fingerprint {
    /// The fingerprint of these flags and values (values already as text, files read).
    pub fn of(values: BTreeMap<String, Vec<u8>>) -> Fingerprint {
        let digest = |bytes: &[u8]| b64(&ring::digest::digest(&ring::digest::SHA256, bytes).as_ref()[..12]);
        let fields: BTreeMap<String, String> =
            values.iter().map(|(flag, value)| (flag.clone(), digest(value))).collect();
        let mut all = Vec::new();
        for (flag, hash) in &fields {
            all.extend((flag.len() as u64).to_be_bytes());
            all.extend(flag.as_bytes());
            all.extend(hash.as_bytes());
        }
        Fingerprint { hash: digest(&all), fields }
    }

    /// The flags whose values differ between this run and `other` (given on one side only, or
    /// with another value); empty when they agree.
    pub fn differences(&self, other: &Fingerprint) -> Vec<String> {
        let mut flags: Vec<String> = self
            .fields
            .iter()
            .filter(|(flag, hash)| other.fields.get(*flag) != Some(hash))
            .map(|(flag, _)| flag.clone())
            .collect();
        flags.extend(other.fields.keys().filter(|flag| !self.fields.contains_key(*flag)).cloned());
        if flags.is_empty() && self.hash != other.hash {
            flags.push("(the fingerprint's hash)".into());
        }
        flags
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_holds_for_its_secret_role_and_parts_only() {
        let secret = Secret::new(b"0123456789abcdef", "test").unwrap();
        let other = Secret::new(b"0123456789abcdeX", "test").unwrap();
        let proof = secret.prove(Role::Shard, &[b"nonce", b"1"]);
        assert!(secret.verify(Role::Shard, &[b"nonce", b"1"], &proof));
        assert!(!other.verify(Role::Shard, &[b"nonce", b"1"], &proof));
        assert!(!secret.verify(Role::Hub, &[b"nonce", b"1"], &proof));
        assert!(!secret.verify(Role::Shard, &[b"nonce1"], &proof));
        assert!(!secret.verify(Role::Shard, &[b"nonce", b"1"], "not base64!"));
    }

    #[test]
    fn a_short_secret_is_refused() {
        assert!(Secret::new(b"short\n", "test").is_err());
        assert!(Secret::generate().is_ok());
    }

    #[test]
    fn differences_name_the_flags() {
        let of = |pairs: &[(&str, &str)]| {
            Fingerprint::of(pairs.iter().map(|(k, v)| (k.to_string(), v.as_bytes().to_vec())).collect())
        };
        let a = of(&[("--rps", "100"), ("--call", "x")]);
        assert!(a.differences(&a.clone()).is_empty());
        assert_eq!(a.differences(&of(&[("--rps", "200"), ("--call", "x")])), vec!["--rps"]);
        assert_eq!(a.differences(&of(&[("--rps", "100"), ("--call", "x"), ("-z", "2s")])), vec!["-z"]);
    }
}
