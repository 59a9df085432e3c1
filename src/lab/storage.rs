//! The versioned key/value store of docs/experiments.md, "Throughput measured by the client".
//! Every put makes a new version; none is lost.
use super::proto::lab::{storage_server, GetReply, GetRequest, PutReply, PutRequest};
use super::stats::Method;
use super::Lab;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use tonic::{Request, Response, Status};

#[derive(Debug, Clone, Default)]
pub(super) struct Versioned {
    value: Vec<u8>,
    version: u64,
}

pub(super) enum Store {
    /// One lock and one version counter for all keys: versions give the one global order
    /// of all writes. Gets share the lock, puts take it alone.
    Linearizable { store: RwLock<Linear>, max_bytes: u64 },
    /// One lock and one version counter per key: writes to different keys never wait
    /// for each other, and versions order the writes of each key only. A key whose first
    /// put was refused stays in the map at version 0, which reads as not found.
    Relaxed { keys: RwLock<HashMap<String, Arc<Mutex<Versioned>>>>, held: AtomicU64, max_bytes: u64 },
}

#[derive(Default)]
pub(super) struct Linear {
    version: u64,
    entries: HashMap<String, Versioned>,
    /// Bytes held, as `size` counts them.
    held: u64,
}

/// What a key costs beyond its key and value bytes (the map's slot, the String and Vec
/// headers, the version), so that many tiny keys are counted too.
pub(super) const ENTRY_OVERHEAD: u64 = 64;

/// The bytes a key holds for the bound (`LabConfig::kv_max_bytes`).
fn size(key: &str, value: &[u8]) -> u64 {
    key.len() as u64 + value.len() as u64 + ENTRY_OVERHEAD
}

/// A put refused: it would take the store past its bound.
#[derive(Debug)]
pub(super) struct Full {
    held: u64,
    adding: u64,
    max: u64,
}

impl Full {
    fn status(&self) -> Status {
        Status::resource_exhausted(format!(
            "the KV store is full: it holds {} bytes and this put needs {} more, above --kv-max-bytes {}",
            self.held, self.adding, self.max
        ))
    }
}

/// Adds `n` to `held` if the sum stays within `max`.
fn reserve(held: &AtomicU64, n: u64, max: u64) -> Result<(), Full> {
    held.fetch_update(Relaxed, Relaxed, |h| h.checked_add(n).filter(|&total| total <= max))
        .map(drop)
        .map_err(|held| Full { held, adding: n, max })
}

impl Store {
    pub fn new(relaxed: bool, max_bytes: u64) -> Store {
        if relaxed {
            Store::Relaxed { keys: RwLock::default(), held: AtomicU64::new(0), max_bytes }
        } else {
            Store::Linearizable { store: RwLock::default(), max_bytes }
        }
    }

    fn get(&self, key: &str) -> Option<Versioned> {
        match self {
            Store::Linearizable { store, .. } => store.read().expect("store lock").entries.get(key).cloned(),
            Store::Relaxed { keys, .. } => {
                let entry = keys.read().expect("store lock").get(key).cloned()?;
                let versioned = entry.lock().expect("key lock").clone();
                Some(versioned).filter(|v| v.version > 0)
            }
        }
    }

    /// Stores `value` under `key` and returns its version, unless that would hold more than
    /// the bound: then nothing changes.
    fn put(&self, key: String, value: Vec<u8>) -> Result<u64, Full> {
        match self {
            Store::Linearizable { store, max_bytes } => {
                let mut store = store.write().expect("store lock");
                let old = store.entries.get(&key).map_or(0, |v| size(&key, &v.value));
                let new = size(&key, &value);
                let held = store.held - old;
                if held + new > *max_bytes {
                    return Err(Full { held: store.held, adding: new.saturating_sub(old), max: *max_bytes });
                }
                store.held = held + new;
                store.version += 1;
                let version = store.version;
                store.entries.insert(key, Versioned { value, version });
                Ok(version)
            }
            Store::Relaxed { keys, held, max_bytes } => {
                let existing = keys.read().expect("store lock").get(&key).cloned();
                let entry = match existing {
                    Some(entry) => entry,
                    // The map's write lock only for a key's first put.
                    None => {
                        let mut keys = keys.write().expect("store lock");
                        match keys.get(&key) {
                            Some(entry) => entry.clone(),
                            None => {
                                reserve(held, size(&key, &[]), *max_bytes)?;
                                keys.entry(key).or_default().clone()
                            }
                        }
                    }
                };
                let mut versioned = entry.lock().expect("key lock");
                let (old, new) = (versioned.value.len() as u64, value.len() as u64);
                if new > old {
                    reserve(held, new - old, *max_bytes)?;
                } else {
                    held.fetch_sub(old - new, Relaxed);
                }
                versioned.version += 1;
                versioned.value = value;
                Ok(versioned.version)
            }
        }
    }
}

#[tonic::async_trait]
impl storage_server::Storage for Arc<Lab> {
    async fn get_value(&self, request: Request<GetRequest>) -> Result<Response<GetReply>, Status> {
        let lab = self.clone();
        let key = request.into_inner().key;
        self.call(Method::GetValue, async move {
            Ok(match lab.store.get(&key) {
                Some(Versioned { value, version }) => GetReply { value, version, found: true },
                None => GetReply::default(),
            })
        })
        .await
    }

    async fn put_value(&self, request: Request<PutRequest>) -> Result<Response<PutReply>, Status> {
        let lab = self.clone();
        let PutRequest { key, value } = request.into_inner();
        self.call(Method::PutValue, async move {
            lab.store.put(key, value).map(|version| PutReply { version }).map_err(|full| full.status())
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Puts from 8 threads at once never take either store past its bound, and what it
    /// counts as held is exactly what the puts it took hold.
    #[test]
    fn concurrent_puts_stay_within_the_bound() {
        for relaxed in [false, true] {
            let max = 50_000;
            let store = Store::new(relaxed, max);
            let accepted: u64 = std::thread::scope(|s| {
                let threads: Vec<_> = (0..8)
                    .map(|t| {
                        let store = &store;
                        s.spawn(move || {
                            (0..40)
                                .filter_map(|i| {
                                    // Half the puts overwrite a key of their own with a new length.
                                    let key = format!("t{t}-k{}", i % 20);
                                    store.put(key, vec![0; 500 + i * 10]).ok()
                                })
                                .count()
                        })
                    })
                    .collect();
                threads.into_iter().map(|t| t.join().unwrap() as u64).sum()
            });
            assert!(accepted > 0);
            let held = match &store {
                Store::Linearizable { store, .. } => {
                    let store = store.read().unwrap();
                    assert_eq!(store.held, store.entries.iter().map(|(k, v)| size(k, &v.value)).sum::<u64>());
                    store.held
                }
                Store::Relaxed { keys, held, .. } => {
                    let counted: u64 =
                        keys.read().unwrap().iter().map(|(k, v)| size(k, &v.lock().unwrap().value)).sum();
                    assert_eq!(held.load(Relaxed), counted, "relaxed");
                    counted
                }
            };
            assert!(held <= max, "relaxed {relaxed}: {held} > {max}");
        }
    }
}
