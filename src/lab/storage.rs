//! The versioned key/value store of docs/experiments.md, "Throughput measured by the client".
//! Every put makes a new version; none is lost.
use super::proto::lab::{storage_server, GetReply, GetRequest, PutReply, PutRequest};
use super::stats::Method;
use super::Lab;
use std::collections::HashMap;
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
    Linearizable(RwLock<Linear>),
    /// One lock and one version counter per key: writes to different keys never wait
    /// for each other, and versions order the writes of each key only.
    Relaxed(RwLock<HashMap<String, Arc<Mutex<Versioned>>>>),
}

#[derive(Default)]
pub(super) struct Linear {
    version: u64,
    entries: HashMap<String, Versioned>,
}

impl Store {
    pub fn new(relaxed: bool) -> Store {
        if relaxed {
            Store::Relaxed(RwLock::default())
        } else {
            Store::Linearizable(RwLock::default())
        }
    }

    fn get(&self, key: &str) -> Option<Versioned> {
        match self {
            Store::Linearizable(store) => store.read().expect("store lock").entries.get(key).cloned(),
            Store::Relaxed(keys) => {
                let entry = keys.read().expect("store lock").get(key).cloned()?;
                let versioned = entry.lock().expect("key lock").clone();
                Some(versioned)
            }
        }
    }

    /// Stores `value` under `key` and returns its version.
    fn put(&self, key: String, value: Vec<u8>) -> u64 {
        match self {
            Store::Linearizable(store) => {
                let mut store = store.write().expect("store lock");
                store.version += 1;
                let version = store.version;
                store.entries.insert(key, Versioned { value, version });
                version
            }
            Store::Relaxed(keys) => {
                let existing = keys.read().expect("store lock").get(&key).cloned();
                // The map's write lock only for a key's first put.
                let entry =
                    existing.unwrap_or_else(|| keys.write().expect("store lock").entry(key).or_default().clone());
                let mut versioned = entry.lock().expect("key lock");
                versioned.version += 1;
                versioned.value = value;
                versioned.version
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
        self.call(Method::PutValue, async move { Ok(PutReply { version: lab.store.put(key, value) }) }).await
    }
}
