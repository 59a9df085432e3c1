//! Client-side load balancing over a target's addresses, by gRPC's policies (docs/targets.md):
//! `pick_first` (one connection per channel, to the first address that accepts) and
//! `round_robin` (one connection per address in every channel, calls over the ready ones in
//! turn). A channel lives on one worker thread (no locks on the call path); what the threads
//! share is the run's list of addresses, which a `dns:///` target's resolver updates.
use crate::grpc::transport::resolve;
use crate::grpc::{Connection, Connector, Lb, Reply, Target};
use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tonic::Code;

/// How often a `dns:///` target is resolved again during a run (grpc-go's DNS resolver
/// re-resolves on a connection's failure only, at most every 30 s: both are done here).
pub const RESOLVE_EVERY: Duration = Duration::from_secs(30);

/// The soonest a backend's failure makes the resolver look the name up again.
const RESOLVE_AFTER_FAILURE: Duration = Duration::from_secs(1);

/// A call that finds no backend ready waits this long before failing UNAVAILABLE: a dead
/// target must not turn a worker's loop into a spin.
const NONE_READY_WAIT: Duration = Duration::from_millis(50);

/// The run's addresses, shared by every thread: read when a channel is made or refreshed and
/// when a connection is opened, never per call.
pub struct Addresses {
    pub lb: Lb,
    /// Record each call under its backend (`Target::by_backend`).
    pub by_backend: bool,
    /// `dns:///`: resolved again while the run lasts.
    pub dns: bool,
    /// Every address seen during the run; a backend's index in results is its place here.
    known: Mutex<Vec<SocketAddr>>,
    /// The indices (in `known`) of the addresses the target resolves to now.
    current: Mutex<Vec<usize>>,
    /// Bumped whenever `current` changes; each channel compares it with its own.
    generation: AtomicU64,
    /// A backend's connection failed: a `dns:///` target may have moved.
    resolve_now: AtomicBool,
}

impl Addresses {
    pub fn new(target: &Target, resolved: &[SocketAddr]) -> Addresses {
        Addresses {
            lb: target.lb,
            by_backend: target.by_backend(),
            dns: target.unix.is_none() && target.addresses == crate::grpc::Addresses::Dns,
            known: Mutex::new(resolved.to_vec()),
            current: Mutex::new((0..resolved.len()).collect()),
            generation: AtomicU64::new(0),
            resolve_now: AtomicBool::new(false),
        }
    }

    /// Every address seen during the run, in the order of their indices.
    pub fn known(&self) -> Vec<SocketAddr> {
        self.known.lock().unwrap().clone()
    }

    /// How many backends a run broken down by backend records so far (0 for any other run).
    pub fn backends(&self) -> usize {
        match self.by_backend {
            true => self.known.lock().unwrap().len(),
            false => 0,
        }
    }

    /// The addresses the target resolves to now, each with its index.
    fn current(&self) -> Vec<(usize, SocketAddr)> {
        let known = self.known.lock().unwrap();
        self.current.lock().unwrap().iter().map(|&i| (i, known[i])).collect()
    }

    /// The index of `addr`, which becomes known if it was not.
    fn index_of(&self, addr: SocketAddr) -> usize {
        let mut known = self.known.lock().unwrap();
        match known.iter().position(|a| *a == addr) {
            Some(i) => i,
            None => {
                known.push(addr);
                known.len() - 1
            }
        }
    }

    /// A new resolution: true when it changed the current addresses. A name that resolves to
    /// nothing keeps the last addresses (grpc-go keeps them on a resolver error too).
    pub fn update(&self, resolved: &[SocketAddr]) -> bool {
        if resolved.is_empty() {
            return false;
        }
        let indices: Vec<usize> = resolved.iter().map(|a| self.index_of(*a)).collect();
        let mut current = self.current.lock().unwrap();
        if *current == indices {
            return false;
        }
        *current = indices;
        self.generation.fetch_add(1, Release);
        true
    }

    fn generation(&self) -> u64 {
        self.generation.load(Acquire)
    }

    /// A backend's connection failed or closed.
    fn failed(&self) {
        if self.dns {
            self.resolve_now.store(true, Relaxed);
        }
    }

    /// Resolves `target` again every `RESOLVE_EVERY`, and after a backend's failure (at most
    /// every `RESOLVE_AFTER_FAILURE`), on a thread of its own (the look-up blocks) until `stop`.
    pub fn keep_resolving(self: &Arc<Self>, target: Target, stop: Arc<AtomicBool>) {
        let addresses = self.clone();
        let _ = std::thread::Builder::new().name("rpcmeter-resolver".into()).spawn(move || {
            let mut last = Instant::now();
            while !stop.load(Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
                let due = last.elapsed() >= RESOLVE_EVERY
                    || (last.elapsed() >= RESOLVE_AFTER_FAILURE && addresses.resolve_now.load(Relaxed));
                if !due {
                    continue;
                }
                addresses.resolve_now.store(false, Relaxed);
                last = Instant::now();
                if let Ok(resolved) = resolve(&target) {
                    addresses.update(&resolved);
                }
            }
        });
    }
}

/// gRPC's connection backoff (doc/connection-backoff.md in grpc/grpc): 1 s, then 1.6 times
/// the last, at most 120 s, each spread by ±20%.
#[derive(Debug, Clone)]
pub struct Backoff {
    next: Duration,
}

impl Backoff {
    const INITIAL: Duration = Duration::from_secs(1);
    const MULTIPLIER: f64 = 1.6;
    const JITTER: f64 = 0.2;
    const MAX: Duration = Duration::from_secs(120);

    pub fn new() -> Backoff {
        Backoff { next: Backoff::INITIAL }
    }

    /// How long to wait after a failed attempt to connect (from that attempt's start).
    pub fn wait(&mut self) -> Duration {
        use rand::RngExt;
        let this = self.next;
        self.next = this.mul_f64(Backoff::MULTIPLIER).min(Backoff::MAX);
        // The first wait is the initial backoff as it is; jitter spreads the later ones.
        if this == Backoff::INITIAL {
            return this;
        }
        this.mul_f64(1.0 + rand::rng().random_range(-Backoff::JITTER..=Backoff::JITTER))
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::new()
    }
}

/// One backend of a channel: a connection to one address (round_robin), or to the first of
/// the target's addresses that accepts (pick_first).
pub struct Backend {
    /// Its index among the run's addresses (pick_first: of the address that answered).
    index: Cell<usize>,
    /// Where it dials; empty: the target's own addresses (pick_first until a `dns:///`
    /// target's addresses change).
    addrs: RefCell<Vec<SocketAddr>>,
    /// None while it connects or waits to reconnect. `Rc`: a call clones the pointer, not
    /// h2's handle (whose clone takes a lock).
    conn: RefCell<Option<Rc<Connection>>>,
    reconnecting: Cell<bool>,
    /// Gone from the target's addresses: its reconnection stops.
    removed: Cell<bool>,
}

impl Backend {
    fn new(index: usize, addrs: Vec<SocketAddr>) -> Rc<Backend> {
        Rc::new(Backend {
            index: Cell::new(index),
            addrs: RefCell::new(addrs),
            conn: RefCell::new(None),
            reconnecting: Cell::new(false),
            removed: Cell::new(false),
        })
    }

    /// Its connection, when open.
    fn ready(&self) -> Option<Rc<Connection>> {
        self.conn.borrow().as_ref().filter(|c| !c.is_closed()).cloned()
    }

    /// Connects once (blocking the caller): the connection, or the error.
    async fn connect(&self, connector: &Connector, addresses: &Addresses) -> anyhow::Result<Rc<Connection>> {
        let addrs = self.addrs.borrow().clone();
        let dial = if addrs.is_empty() { None } else { Some(&addrs[..]) };
        let (conn, peer) = connector.connect_to(dial).await.inspect_err(|_| addresses.failed())?;
        // pick_first: the backend is whichever address answered.
        if let (true, Some(peer)) = (addresses.by_backend && addresses.lb == Lb::PickFirst, peer) {
            self.index.set(addresses.index_of(peer));
        }
        let conn = Rc::new(conn);
        *self.conn.borrow_mut() = Some(conn.clone());
        Ok(conn)
    }

    /// Reconnects in the background of the thread's LocalSet: at once, then after each
    /// failure with gRPC's backoff, until connected (or removed, or the run stops sending).
    fn reconnect(self: &Rc<Self>, connector: Arc<Connector>, addresses: Arc<Addresses>, stop: Arc<AtomicBool>) {
        if self.reconnecting.replace(true) {
            return;
        }
        let backend = self.clone();
        tokio::task::spawn_local(async move {
            let mut backoff = Backoff::new();
            while !backend.removed.get() && !stop.load(Relaxed) {
                let began = tokio::time::Instant::now();
                if backend.connect(&connector, &addresses).await.is_ok() {
                    break;
                }
                tokio::time::sleep_until(began + backoff.wait()).await;
            }
            backend.reconnecting.set(false);
        });
    }
}

/// What a channel's next call takes.
enum Picked {
    Ready(Rc<Connection>, usize),
    /// pick_first's one connection closed: the call reconnects it first.
    Reconnect(Rc<Backend>),
    /// round_robin: none of these many backends is ready.
    NoneReady(usize),
}

/// What a channel needs from its thread to (re)connect.
pub struct Dialer {
    pub connector: Arc<Connector>,
    pub addresses: Arc<Addresses>,
    /// Set when the run stops sending: reconnections end.
    pub stop: Arc<AtomicBool>,
}

/// One channel of a worker thread (`--connections` of them in the run): its backends, and
/// whose turn is next.
pub struct Channel {
    backends: RefCell<Vec<Rc<Backend>>>,
    next: Cell<usize>,
    generation: Cell<u64>,
}

impl Channel {
    /// Opens the channel's connections. pick_first: one, an error if none accepts;
    /// round_robin: one per address, those that fail reconnect in the background, an error
    /// only if every one failed.
    pub async fn open(dialer: &Dialer) -> anyhow::Result<Channel> {
        let addresses = &dialer.addresses;
        let generation = addresses.generation();
        let current = addresses.current();
        let backends: Vec<Rc<Backend>> = match addresses.lb {
            Lb::PickFirst => {
                // No addresses of its own: it dials the target's, as a connector does (and
                // names the target, not an address, when none answers).
                let first = current.first().map_or(0, |(i, _)| *i);
                vec![Backend::new(first, Vec::new())]
            }
            Lb::RoundRobin => current.iter().map(|&(i, a)| Backend::new(i, vec![a])).collect(),
        };
        let mut first_error = None;
        for backend in &backends {
            if let Err(err) = backend.connect(&dialer.connector, addresses).await {
                first_error.get_or_insert(err);
            }
        }
        match first_error {
            Some(err) if backends.iter().all(|b| b.ready().is_none()) => return Err(err),
            _ => {}
        }
        for backend in backends.iter().filter(|b| b.ready().is_none()) {
            backend.reconnect(dialer.connector.clone(), addresses.clone(), dialer.stop.clone());
        }
        Ok(Channel { backends: RefCell::new(backends), next: Cell::new(0), generation: Cell::new(generation) })
    }

    /// The connection the next call takes, and its backend's index. pick_first: its one
    /// connection, reconnected first when it closed (the call fails UNAVAILABLE if that fails);
    /// round_robin: the next ready backend in turn, the closed ones reconnecting meanwhile.
    pub async fn pick(&self, dialer: &Dialer) -> Result<(Rc<Connection>, usize), Reply> {
        if dialer.addresses.dns && dialer.addresses.generation() != self.generation.get() {
            self.refresh(dialer);
        }
        match self.next_ready(dialer) {
            Picked::Ready(conn, index) => Ok((conn, index)),
            // Boxed: a connect's future (TCP, TLS, the HTTP/2 handshake) is some KiB, which every
            // call's future would otherwise carry and move (docs/design.md, "The call path").
            Picked::Reconnect(only) => match Box::pin(only.connect(&dialer.connector, &dialer.addresses)).await {
                Ok(conn) => Ok((conn, only.index.get())),
                Err(err) => {
                    tokio::time::sleep(NONE_READY_WAIT).await;
                    Err(Reply::error(Code::Unavailable, format!("{err:#}")))
                }
            },
            Picked::NoneReady(n) => {
                tokio::time::sleep(NONE_READY_WAIT).await;
                Err(Reply::error(
                    Code::Unavailable,
                    format!("no ready backend: all {n} are connecting or waiting to reconnect (--lb round_robin)"),
                ))
            }
        }
    }

    /// `pick` without waiting: the backends are borrowed only here, never across a wait.
    fn next_ready(&self, dialer: &Dialer) -> Picked {
        let backends = self.backends.borrow();
        if let [only] = &backends[..] {
            if let Some(conn) = only.ready() {
                return Picked::Ready(conn, only.index.get());
            }
            if dialer.addresses.lb == Lb::PickFirst {
                return Picked::Reconnect(only.clone());
            }
        }
        let n = backends.len();
        let start = self.next.get();
        for k in 0..n {
            let backend = &backends[(start + k) % n];
            match backend.ready() {
                Some(conn) => {
                    self.next.set((start + k + 1) % n);
                    return Picked::Ready(conn, backend.index.get());
                }
                None => {
                    if backend.conn.borrow_mut().take().is_some() {
                        dialer.addresses.failed();
                    }
                    backend.reconnect(dialer.connector.clone(), dialer.addresses.clone(), dialer.stop.clone());
                }
            }
        }
        Picked::NoneReady(n)
    }

    /// The target's addresses changed (`dns:///`): pick_first dials the new ones at its next
    /// reconnection; round_robin keeps the backends still there, drops the others and
    /// connects to the new ones.
    fn refresh(&self, dialer: &Dialer) {
        let addresses = &dialer.addresses;
        self.generation.set(addresses.generation());
        let current = addresses.current();
        let mut backends = self.backends.borrow_mut();
        if addresses.lb == Lb::PickFirst {
            if let Some(only) = backends.first() {
                *only.addrs.borrow_mut() = current.iter().map(|(_, a)| *a).collect();
            }
            return;
        }
        let mut kept: Vec<Rc<Backend>> = Vec::with_capacity(current.len());
        for (index, addr) in current {
            match backends.iter().find(|b| b.index.get() == index) {
                Some(b) => kept.push(b.clone()),
                None => {
                    let fresh = Backend::new(index, vec![addr]);
                    fresh.reconnect(dialer.connector.clone(), addresses.clone(), dialer.stop.clone());
                    kept.push(fresh);
                }
            }
        }
        for gone in backends.iter().filter(|b| !kept.iter().any(|k| Rc::ptr_eq(k, b))) {
            gone.removed.set(true);
        }
        *backends = kept;
        self.next.set(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_follows_grpc_connection_backoff() {
        let mut b = Backoff::new();
        assert_eq!(b.wait(), Duration::from_secs(1));
        let second = b.wait().as_secs_f64();
        assert!((1.6 * 0.8..=1.6 * 1.2).contains(&second), "{second}");
        let third = b.wait().as_secs_f64();
        assert!((2.56 * 0.8..=2.56 * 1.2).contains(&third), "{third}");
        for _ in 0..20 {
            b.wait();
        }
        assert!(b.wait() <= Duration::from_secs(144), "at most 120 s plus its jitter");
        assert!(b.wait() >= Duration::from_secs(96));
    }

    /// Which backends four picks take (sorted), once the backends new to the channel may have connected.
    async fn picks(channel: &Channel, dialer: &Dialer) -> Vec<usize> {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let mut seen = Vec::new();
        for _ in 0..4 {
            seen.push(channel.pick(dialer).await.map(|(_, i)| i).unwrap());
        }
        seen.sort();
        seen
    }

    #[test]
    fn a_round_robin_channel_follows_the_names_new_addresses() {
        use crate::lab::{LabConfig, LabServer};
        let lab = || LabServer::start(LabConfig { addr: "127.0.0.1:0".into(), ..LabConfig::default() }).unwrap();
        let (a, b) = (lab(), lab());
        let (a_addr, b_addr) = (a.local_addr(), b.local_addr());
        let target = Target {
            addresses: crate::grpc::Addresses::Dns,
            lb: Lb::RoundRobin,
            ..Target::new("127.0.0.1", a_addr.port())
        };
        let connector = Arc::new(Connector::new(&target).unwrap());
        let addresses = Arc::new(Addresses::new(&target, connector.addresses()));
        let dialer = Dialer { connector, addresses: addresses.clone(), stop: Arc::new(AtomicBool::new(false)) };
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        tokio::task::LocalSet::new().block_on(&runtime, async {
            let channel = Channel::open(&dialer).await.unwrap();
            assert_eq!(picks(&channel, &dialer).await, vec![0, 0, 0, 0]);
            assert!(addresses.update(&[a_addr, b_addr]));
            // The channel sees the new addresses at its next pick, and connects to them then.
            channel.pick(&dialer).await.unwrap();
            assert_eq!(picks(&channel, &dialer).await, vec![0, 0, 1, 1], "the new address joins the rotation");
            assert!(addresses.update(&[b_addr]));
            assert_eq!(picks(&channel, &dialer).await, vec![1, 1, 1, 1], "the address gone leaves it");
        });
        // The connections end with the runtime, before the servers wait for them to close.
        drop(runtime);
        drop((a, b));
    }

    #[test]
    fn a_new_resolution_keeps_indices_and_appends_new_addresses() {
        let a: SocketAddr = "10.0.0.1:80".parse().unwrap();
        let b: SocketAddr = "10.0.0.2:80".parse().unwrap();
        let c: SocketAddr = "10.0.0.3:80".parse().unwrap();
        let addresses = Addresses::new(&Target::new("example.com", 80), &[a, b]);
        assert!(!addresses.update(&[a, b]), "the same addresses change nothing");
        assert!(!addresses.update(&[]), "a failed look-up keeps the last addresses");
        assert_eq!(addresses.generation(), 0);
        assert!(addresses.update(&[b, c]));
        assert_eq!(addresses.generation(), 1);
        assert_eq!(addresses.current(), vec![(1, b), (2, c)]);
        assert_eq!(addresses.known(), vec![a, b, c], "a backend gone keeps its index and its results");
    }
}
