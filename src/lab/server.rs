//! Starting and stopping the lab: the calls' runtime and the network threads (network.rs)
//! behind one background thread, and a bounded drain. Usable from sync code and from inside
//! another runtime.
use super::db::{Db, DbSpec};
use super::exec::Executor;
use super::network;
use super::proto::lab::StatsReply;
use super::stats::Stats;
use super::storage::{Consistency, Store};
use super::test_service::MAX_FIB;
use super::Lab;
use crate::error::bad_input;
use crate::input::ByteSize;
use std::net::SocketAddr;
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;
use tokio::sync::watch;
use tonic::transport::Server;

/// How long `shutdown` waits for calls in flight before it stops anyway (`LabConfig::drain`).
const DRAIN: Duration = Duration::from_secs(5);
/// How much longer than the drain `shutdown` waits for the server's thread to end, before
/// it leaves that thread behind: a margin, as the network threads end with the drain and the
/// calls' runtime threads, which a long fib may hold, are abandoned after 100 ms.
const DRAIN_GRACE: Duration = Duration::from_secs(1);

/// Bounds on the shape, so that no value asks for more threads, memory or semaphore permits
/// than a machine has (validate says so in one line instead of a panic or an abort).
const MAX_THREADS: usize = 1024;
const MAX_DB_POOL: usize = 1024;
/// Calls running and queued together.
const MAX_ADMITTED: usize = 1_000_000;
/// The longest `--spin`: past a few round trips a spin only burns the core.
const MAX_SPIN: Duration = Duration::from_millis(10);

/// The execution model: threaded or async (docs/experiments.md, "Threaded vs async servers").
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Model {
    /// An async runtime with `threads` threads and at most `threads × per_thread` calls in progress.
    Async,
    /// `threads` OS threads, each running one call at a time to completion.
    Threaded,
}

/// What `rpcmeter serve` serves; `Default` is the CLI's defaults.
#[derive(Debug, Clone)]
pub struct LabConfig {
    /// HOST:PORT; port 0 picks a free port.
    pub addr: String,
    pub model: Model,
    pub threads: usize,
    /// Calls in progress per thread (async model only).
    pub per_thread: usize,
    /// Calls that may wait for a free slot; `None` = as many as can run.
    pub queue: Option<usize>,
    /// fib(n) computed by a `Cpu` call that asks for n = 0.
    pub fib: u32,
    /// The database-side sleep of each `Db` call.
    pub db_sleep: Duration,
    pub db: DbSpec,
    pub db_pool: usize,
    /// What a `Storage` get may see of the puts before it.
    pub kv_consistency: Consistency,
    /// How far the eventual replica trails its primary (`Consistency::Eventual` only).
    pub kv_replica_lag: Duration,
    /// How long a network thread stays awake after an echo call (spin.rs); zero: never.
    pub spin: Duration,
    /// How long a shutdown waits for calls in flight (not a CLI option: 5 s).
    pub drain: Duration,
    /// Serve TLS (and require client certificates) instead of plaintext h2c.
    pub tls: Option<super::tls::LabTls>,
    /// Bytes the KV store may hold (keys, values and `storage::ENTRY_OVERHEAD` per key): a
    /// server anyone can reach must not be filled until it is killed.
    pub kv_max_bytes: ByteSize,
    /// Rows the Db table may hold.
    pub db_max_rows: u64,
    /// Answer Stats/Reset from peers beyond this machine's loopback too.
    pub allow_remote_reset: bool,
}

/// `--kv-max-bytes`' default: room for the lab's experiments, far below a machine's memory.
pub const KV_MAX_BYTES: ByteSize = ByteSize::mib(64);
/// `--kv-replica-lag`'s default: tens of loopback calls, so that a put-then-get misses.
pub const KV_REPLICA_LAG: Duration = Duration::from_millis(5);
/// The longest `--kv-replica-lag`: the replica's log holds every put of the last lag.
pub const MAX_KV_REPLICA_LAG: Duration = Duration::from_secs(60);
/// `--db-max-rows`' default: a long lab session's inserts, a file of tens of MB.
pub const DB_MAX_ROWS: u64 = 1_000_000;

impl Default for LabConfig {
    fn default() -> Self {
        LabConfig {
            addr: "127.0.0.1:9000".into(),
            model: Model::Async,
            threads: 5,
            per_thread: 5,
            queue: None,
            fib: 30,
            db_sleep: Duration::from_millis(250),
            db: DbSpec::TempSqlite,
            db_pool: 25,
            kv_consistency: Consistency::Linearizable,
            kv_replica_lag: KV_REPLICA_LAG,
            spin: Duration::from_micros(200),
            drain: DRAIN,
            tls: None,
            kv_max_bytes: KV_MAX_BYTES,
            db_max_rows: DB_MAX_ROWS,
            allow_remote_reset: false,
        }
    }
}

impl LabConfig {
    /// How many calls can run at once (saturating; `validate` bounds it).
    pub fn running(&self) -> usize {
        match self.model {
            Model::Async => self.threads.saturating_mul(self.per_thread),
            Model::Threaded => self.threads,
        }
    }

    /// How many calls can wait beyond the running ones.
    pub fn queue_len(&self) -> usize {
        self.queue.unwrap_or_else(|| self.running())
    }

    /// Checks the shape and the fib; `LabServer::start` calls it too.
    pub fn validate(&self) -> anyhow::Result<()> {
        let positive = [("--threads", self.threads), ("--per-thread", self.per_thread), ("--db-pool", self.db_pool)];
        let positive_u64 = [("--kv-max-bytes", self.kv_max_bytes.0), ("--db-max-rows", self.db_max_rows)];
        if let Some((name, _)) = positive.iter().find(|(_, n)| *n == 0) {
            return Err(bad_input(format!("{name} must be at least 1")));
        }
        if let Some((name, _)) = positive_u64.iter().find(|(_, n)| *n == 0) {
            return Err(bad_input(format!("{name} must be at least 1")));
        }
        let at_most = [("--threads", self.threads, MAX_THREADS), ("--db-pool", self.db_pool, MAX_DB_POOL)];
        if let Some((name, n, max)) = at_most.iter().find(|(_, n, max)| n > max) {
            return Err(bad_input(format!("{name} {n} is above {max}")));
        }
        let running = match self.model {
            Model::Async => self.threads.checked_mul(self.per_thread).filter(|&n| n <= MAX_ADMITTED),
            Model::Threaded => Some(self.threads),
        };
        let Some(running) = running else {
            return Err(bad_input(format!(
                "--threads {} x --per-thread {} is above {MAX_ADMITTED} calls in progress",
                self.threads, self.per_thread
            )));
        };
        let queue = self.queue.unwrap_or(running);
        if running.checked_add(queue).is_none_or(|admitted| admitted > MAX_ADMITTED) {
            return Err(bad_input(format!(
                "--queue {queue}: {running} calls in progress + {queue} queued is above {MAX_ADMITTED}"
            )));
        }
        if self.spin > MAX_SPIN {
            return Err(bad_input(format!(
                "--spin {} is above {}: a network thread would hold its core that long after each echo",
                humantime::format_duration(self.spin),
                humantime::format_duration(MAX_SPIN)
            )));
        }
        if self.kv_replica_lag > MAX_KV_REPLICA_LAG {
            return Err(bad_input(format!(
                "--kv-replica-lag {} is above {}: the replica's log would hold every put of that long",
                humantime::format_duration(self.kv_replica_lag),
                humantime::format_duration(MAX_KV_REPLICA_LAG)
            )));
        }
        if self.fib > MAX_FIB {
            return Err(bad_input(format!("--fib {} is above {MAX_FIB} (naive fib(n) would run too long)", self.fib)));
        }
        Ok(())
    }
}

/// A running lab server. Dropping it stops it too; `shutdown` also returns the final Stats.
pub struct LabServer {
    addr: SocketAddr,
    lab: Arc<Lab>,
    stop: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
    /// Says (or hangs up) when the server's thread has done its work.
    done: mpsc::Receiver<()>,
    drain: Duration,
}

impl LabServer {
    /// Binds, opens the database and starts serving; returns once listening. A bad address,
    /// a port in use or a database that cannot be used is a one-line `bad_input` error.
    pub fn start(config: LabConfig) -> anyhow::Result<LabServer> {
        config.validate()?;
        // tonic reads the certificate and key when it is given them: a bad one is refused
        // here, before anything listens.
        if let Some(tls) = &config.tls {
            Server::builder().tls_config(tls.server_config()).map_err(|e| {
                let cause = std::error::Error::source(&e).map(|s| format!(": {s}")).unwrap_or_default();
                bad_input(format!("TLS certificate or key: {e}{cause}"))
            })?;
        }
        let listener = std::net::TcpListener::bind(&config.addr)
            .map_err(|e| bad_input(format!("cannot listen on {}: {e}", config.addr)))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = watch::channel(false);
        // The handshake is a std channel, so this never blocks a runtime on itself.
        let (ready, started) = mpsc::channel();
        let (finished, done) = mpsc::channel();
        let drain = config.drain;
        let thread = std::thread::Builder::new().name("rpcmeter-lab".into()).spawn(move || {
            let runtime_and_lab = build_runtime(&config).and_then(|runtime| {
                let lab = runtime.block_on(Lab::new(config, runtime.handle().clone()))?;
                Ok((runtime, Arc::new(lab)))
            });
            match runtime_and_lab {
                Ok((runtime, lab)) => match network::start(&lab, &listener, &stopped, drain, runtime.handle()) {
                    Ok(network) => {
                        let _ = ready.send(Ok(lab));
                        // Each network thread ends at most `drain` after the stop.
                        for thread in network {
                            let _ = thread.join();
                        }
                        // Calls still running after the drain (a long fib, a blocking sleep) are abandoned.
                        runtime.shutdown_timeout(Duration::from_millis(100));
                        let _ = finished.send(());
                    }
                    // The threads started already end as `stop` goes with the caller's error.
                    Err(err) => drop(ready.send(Err(err))),
                },
                Err(err) => drop(ready.send(Err(err))),
            }
        })?;
        match started.recv() {
            Ok(Ok(lab)) => Ok(LabServer { addr, lab, stop, thread: Some(thread), done, drain }),
            Ok(Err(err)) => Err(err),
            Err(_) => Err(anyhow::anyhow!("the lab server thread died while starting")),
        }
    }

    /// The address it listens on (the real port when asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn stats(&self) -> StatsReply {
        self.lab.stats.snapshot()
    }

    /// Reads the Stats of this server from any thread, also while another one shuts it down.
    pub fn stats_reader(&self) -> StatsReader {
        StatsReader(self.lab.clone())
    }

    /// Stops accepting calls, waits up to `drain` (5 s) for those in flight, and returns the
    /// final Stats. It returns within `drain` + 1 s whatever the calls do: calls still running
    /// then (a long fib) are abandoned on the calls' runtime threads and counted in `in_flight`.
    /// It blocks the calling thread: clients in this process must not need that thread to
    /// answer the server's goodbye (a current-thread runtime would), or the wait runs its 5 s.
    pub fn shutdown(mut self) -> StatsReply {
        self.stop_and_join();
        self.stats()
    }

    fn stop_and_join(&mut self) {
        // Health first, so that a watcher (a load balancer) hears NOT_SERVING before the
        // listener closes.
        self.lab.health.stop_serving();
        let _ = self.stop.send(true);
        if let Some(thread) = self.thread.take() {
            match self.done.recv_timeout(self.drain + DRAIN_GRACE) {
                // Done, or the thread ended without saying so (it panicked): it ends at once.
                Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => drop(thread.join()),
                // Stuck: leave it behind rather than hang the caller.
                Err(mpsc::RecvTimeoutError::Timeout) => drop(thread),
            }
        }
    }
}

/// A `LabServer`'s Stats, readable from any thread while the server lives or stops.
#[derive(Clone)]
pub struct StatsReader(Arc<Lab>);

impl StatsReader {
    pub fn get(&self) -> StatsReply {
        self.0.stats.snapshot()
    }
}

impl Drop for LabServer {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

/// The calls' runtime (the network has its own threads, network.rs).
fn build_runtime(config: &LabConfig) -> anyhow::Result<tokio::runtime::Runtime> {
    // In the threaded model the runtime only admits calls and does the database's I/O:
    // the calls themselves run on the worker threads.
    let threads = match config.model {
        Model::Async => config.threads,
        Model::Threaded => 1,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("rpcmeter-lab-rt")
        .enable_all()
        .build()?;
    Ok(runtime)
}

impl Lab {
    async fn new(config: LabConfig, runtime: tokio::runtime::Handle) -> anyhow::Result<Lab> {
        let db = Db::open(&config.db, config.db_pool, config.db_max_rows).await?;
        let exec = match config.model {
            Model::Async => Executor::new_async(config.running(), config.queue_len()),
            Model::Threaded => Executor::new_threaded(config.threads, config.queue_len(), runtime)?,
        };
        let store = Store::new(config.kv_consistency, config.kv_replica_lag, config.kv_max_bytes.0);
        Ok(Lab { stats: Arc::new(Stats::new(config.spin)), config, exec, db, store, health: Default::default() })
    }
}
