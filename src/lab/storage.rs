//! The versioned key/value store of docs/experiments.md, "Throughput measured by the client",
//! in three consistency modes ("Reads that miss the write just made" there). Every put makes
//! a new version; none is lost.
use super::proto::lab::{storage_server, GetReply, GetRequest, PutReply, PutRequest};
use super::stats::Method;
use super::Lab;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};
use tonic::{Request, Response, Status};

/// What a get may see of the puts answered before it (`serve --kv-consistency`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Consistency {
    /// One lock and one version order for all keys: a get sees every put answered before it.
    Linearizable,
    /// A lock and a version order per key: a get sees every put of its key answered before it.
    Relaxed,
    /// Puts go to a primary (one version order, as linearizable); gets are served by a
    /// replica that applies each put --kv-replica-lag after it was made, as a follower read:
    /// a get may miss the puts of the last lag.
    Eventual,
}

impl Consistency {
    pub fn name(self) -> &'static str {
        match self {
            Consistency::Linearizable => "linearizable",
            Consistency::Relaxed => "relaxed",
            Consistency::Eventual => "eventual",
        }
    }
}

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
    /// A primary and a lagging replica behind one lock (a get changes the replica too).
    Eventual { replica: Mutex<Replica>, lag: Duration, max_bytes: u64 },
}

/// The eventual store: the version order of the primary, what the replica shows, and the
/// puts it has not applied yet, oldest first.
#[derive(Default)]
pub(super) struct Replica {
    version: u64,
    visible: HashMap<String, Versioned>,
    log: VecDeque<Pending>,
    /// Bytes held by `visible` and `log` together, as `size` counts them: a put waiting in
    /// the log holds its bytes until the replica has it (then the value it replaces goes).
    held: u64,
}

/// A put the replica shows from `at` on.
struct Pending {
    at: Instant,
    key: String,
    versioned: Versioned,
}

impl Replica {
    /// Applies, in order, the puts due by `now`.
    fn catch_up(&mut self, now: Instant) {
        while self.log.front().is_some_and(|p| p.at <= now) {
            let Some(Pending { key, versioned, .. }) = self.log.pop_front() else { break };
            let key_len = key.len() as u64;
            if let Some(old) = self.visible.insert(key, versioned) {
                self.held -= key_len + old.value.len() as u64 + ENTRY_OVERHEAD;
            }
        }
    }
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
    /// `lag`: how far the eventual replica trails its primary (unused by the other modes).
    pub fn new(consistency: Consistency, lag: Duration, max_bytes: u64) -> Store {
        match consistency {
            Consistency::Linearizable => Store::Linearizable { store: RwLock::default(), max_bytes },
            Consistency::Relaxed => Store::Relaxed { keys: RwLock::default(), held: AtomicU64::new(0), max_bytes },
            Consistency::Eventual => Store::Eventual { replica: Mutex::default(), lag, max_bytes },
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
            Store::Eventual { replica, .. } => {
                let mut replica = replica.lock().expect("replica lock");
                replica.catch_up(Instant::now());
                replica.visible.get(key).cloned()
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
            Store::Eventual { replica, lag, max_bytes } => {
                let now = Instant::now();
                let mut replica = replica.lock().expect("replica lock");
                // What is due frees the values it replaces before this put is weighed.
                replica.catch_up(now);
                let new = size(&key, &value);
                if replica.held + new > *max_bytes {
                    return Err(Full { held: replica.held, adding: new, max: *max_bytes });
                }
                replica.held += new;
                replica.version += 1;
                let version = replica.version;
                replica.log.push_back(Pending { at: now + *lag, key, versioned: Versioned { value, version } });
                Ok(version)
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

    /// Puts from 8 threads at once never take a store past its bound, and what it counts
    /// as held is exactly what the puts it took hold.
    #[test]
    fn concurrent_puts_stay_within_the_bound() {
        for mode in [Consistency::Linearizable, Consistency::Relaxed, Consistency::Eventual] {
            let max = 50_000;
            let store = Store::new(mode, Duration::ZERO, max);
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
                Store::Eventual { replica, .. } => {
                    let replica = replica.lock().unwrap();
                    let counted: u64 = replica.visible.iter().map(|(k, v)| size(k, &v.value)).sum::<u64>()
                        + replica.log.iter().map(|p| size(&p.key, &p.versioned.value)).sum::<u64>();
                    assert_eq!(replica.held, counted, "eventual");
                    counted
                }
            };
            assert!(held <= max, "{mode:?}: {held} > {max}");
        }
    }

    fn version_of(store: &Store, key: &str) -> Option<u64> {
        store.get(key).map(|v| v.version)
    }

    /// Every mode reads its own writes when the replica does not lag: a get right after a
    /// put sees that put's version.
    #[test]
    fn without_lag_every_get_sees_the_put_before_it() {
        for mode in [Consistency::Linearizable, Consistency::Relaxed, Consistency::Eventual] {
            let store = Store::new(mode, Duration::ZERO, 1 << 20);
            for i in 0..500 {
                let key = format!("k{}", i % 7);
                let version = store.put(key.clone(), vec![1; i % 50]).unwrap();
                assert_eq!(version_of(&store, &key), Some(version), "{mode:?}, put {i}");
            }
        }
    }

    /// The eventual replica shows a put only `lag` after it: until then a get of its key
    /// returns the version before it (or nothing, for a new key), and then the new one.
    #[test]
    fn a_lagging_replica_serves_the_older_version_until_the_lag_has_passed() {
        let lag = Duration::from_millis(80);
        let store = Store::new(Consistency::Eventual, lag, 1 << 20);
        let first = store.put("k".into(), b"one".to_vec()).unwrap();
        assert_eq!(version_of(&store, "k"), None, "a new key is not on the replica yet");
        std::thread::sleep(lag + Duration::from_millis(20));
        assert_eq!(version_of(&store, "k"), Some(first));
        let second = store.put("k".into(), b"two".to_vec()).unwrap();
        assert!(second > first);
        let stale = store.get("k").unwrap();
        assert_eq!((stale.version, stale.value.as_slice()), (first, &b"one"[..]), "the older version, whole");
        std::thread::sleep(lag + Duration::from_millis(20));
        let fresh = store.get("k").unwrap();
        assert_eq!((fresh.version, fresh.value.as_slice()), (second, &b"two"[..]));
    }

    /// A replica far behind holds every put it has not applied: they count against the
    /// bound, so overwrites of one key are refused once the log fills it, and the log's
    /// room comes back as the replica catches up.
    #[test]
    fn the_replica_log_is_bounded_and_freed_as_it_is_applied() {
        let max = 10_000;
        let each = size("k", &[0; 100]);
        let lag = Duration::from_millis(150);
        let store = Store::new(Consistency::Eventual, lag, max);
        let taken = (0..1000).take_while(|_| store.put("k".into(), vec![0; 100]).is_ok()).count() as u64;
        assert_eq!(taken, max / each, "puts held until the bound");
        let Store::Eventual { replica, .. } = &store else { unreachable!() };
        assert!(replica.lock().unwrap().held <= max);
        std::thread::sleep(lag + Duration::from_millis(20));
        // Applied: one value of "k" remains, and the room of the others is back.
        store.put("k".into(), vec![0; 100]).expect("room again once the replica caught up");
        assert_eq!(replica.lock().unwrap().held, 2 * each, "the applied value and the new pending put");
        // Without lag the same overwrites never fill it.
        let store = Store::new(Consistency::Eventual, Duration::ZERO, max);
        for _ in 0..1000 {
            store.put("k".into(), vec![0; 100]).unwrap();
        }
    }
}
