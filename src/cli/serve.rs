//! `rpcmeter serve`: the lab's reference services, until SIGINT, SIGTERM or SIGHUP.
use crate::error::bad_input;
use crate::lab::proto::lab::StatsReply;
use crate::lab::tls::{self, LabTls};
use crate::lab::{Consistency, DbSpec, LabConfig, LabServer, Model};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use tokio::signal::unix::{signal, SignalKind};

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// HOST:PORT to listen on; port 0 picks a free port.
    #[arg(long, default_value_t = LabConfig::default().addr)]
    pub addr: String,
    /// Execution model: threaded (one OS thread per call) or async (tasks on a runtime).
    #[arg(long, value_enum, default_value_t = LabConfig::default().model)]
    pub model: Model,
    /// Threads: runtime threads (async) or worker threads, one call each (threaded).
    #[arg(long, default_value_t = LabConfig::default().threads)]
    pub threads: usize,
    /// Calls in progress per thread, async model only [default: 5].
    #[arg(long)]
    pub per_thread: Option<usize>,
    /// Calls that may wait beyond the running ones; more are refused with
    /// RESOURCE_EXHAUSTED [default: as many as can run].
    #[arg(long)]
    pub queue: Option<usize>,
    /// n of fib(n) for a Cpu call that asks for 0.
    #[arg(long, default_value_t = LabConfig::default().fib)]
    pub fib: u32,
    /// Database-side sleep of each Db call, holding its pooled connection.
    #[arg(long, value_parser = crate::cli::parse::duration, default_value = "250ms")]
    pub db_sleep: std::time::Duration,
    /// sqlite:PATH (kept) or postgres://… [default: a temporary SQLite file, removed at exit].
    #[arg(long)]
    pub db: Option<DbSpec>,
    /// Database connections.
    #[arg(long, default_value_t = LabConfig::default().db_pool)]
    pub db_pool: usize,
    /// How long a network thread stays awake (spinning) after an echo call instead of
    /// sleeping until the next: lower latency and more calls/s for the price of a core while
    /// echo traffic lasts, counted in the server's CPU. 0 turns it off.
    #[arg(long, value_parser = crate::cli::parse::duration, default_value = "200us")]
    pub spin: std::time::Duration,
    /// Storage: what a GetValue may see of the puts before it. linearizable: one lock and
    /// one version order; relaxed: a lock and a version order per key; eventual: gets read a
    /// replica that applies each put --kv-replica-lag after it (a follower read), so a get
    /// may miss recent puts [default: linearizable].
    #[arg(long, value_enum, conflicts_with = "relax")]
    pub kv_consistency: Option<Consistency>,
    /// How far the eventual replica trails the puts (e.g. 500us, 5ms; 0: reads its writes);
    /// --kv-consistency eventual only [default: 5ms].
    #[arg(long, value_parser = super::parse::duration)]
    pub kv_replica_lag: Option<std::time::Duration>,
    /// Same as --kv-consistency relaxed.
    #[arg(long)]
    pub relax: bool,
    /// Serve TLS with this certificate chain (PEM); needs --tls-key.
    #[arg(long, requires = "tls_key", conflicts_with = "self_signed")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Require client certificates that chain to this CA (PEM): mutual TLS. With
    /// --self-signed, DIR/ca.pem works (it is read after DIR is written).
    #[arg(long)]
    pub tls_client_ca: Option<PathBuf>,
    /// Make a CA (reused on the next start: DIR/ca.pem + ca-key.pem), a server certificate
    /// for localhost, 127.0.0.1 and ::1 and a client certificate (valid a year), write them
    /// into DIR (ca.pem for clients, client.pem + client-key.pem for mutual TLS) and serve
    /// TLS with them. Links and files it did not make are refused.
    #[arg(long, value_name = "DIR")]
    pub self_signed: Option<PathBuf>,
    /// Bytes the Storage service's KV store may hold (keys, values and 64 bytes per key;
    /// e.g. 64MiB, 1G); a put beyond is refused with RESOURCE_EXHAUSTED.
    #[arg(long, default_value_t = crate::lab::KV_MAX_BYTES)]
    pub kv_max_bytes: crate::input::ByteSize,
    /// Rows the Db table may hold; a Db call beyond is refused with RESOURCE_EXHAUSTED (and
    /// its inserts rolled back).
    #[arg(long, default_value_t = crate::lab::DB_MAX_ROWS)]
    pub db_max_rows: u64,
    /// Answer Stats/Reset from any peer, not only from this machine's loopback.
    #[arg(long)]
    pub allow_remote_reset: bool,
}

impl ServeArgs {
    /// The TLS the flags ask for; --self-signed writes its files here, before listening.
    fn tls(&self) -> anyhow::Result<Option<LabTls>> {
        let client_ca = self.tls_client_ca.as_deref();
        match (&self.tls_cert, &self.tls_key, &self.self_signed) {
            (Some(cert), Some(key), None) => Ok(Some(LabTls::from_files(cert, key, client_ca)?)),
            (None, None, Some(dir)) => {
                let mut tls = tls::self_signed(dir)?.tls;
                tls.client_ca_pem = client_ca.map(tls::read_client_ca).transpose()?;
                Ok(Some(tls))
            }
            (None, None, None) if client_ca.is_some() => {
                Err(bad_input("--tls-client-ca needs TLS: --tls-cert and --tls-key, or --self-signed DIR"))
            }
            _ => Ok(None),
        }
    }

    fn into_config(self) -> anyhow::Result<LabConfig> {
        let defaults = LabConfig::default();
        if self.model == Model::Threaded && self.per_thread.is_some() {
            return Err(bad_input("--per-thread applies to --model async only"));
        }
        let kv_consistency = match (self.relax, self.kv_consistency) {
            (true, _) => Consistency::Relaxed,
            (false, mode) => mode.unwrap_or(defaults.kv_consistency),
        };
        if kv_consistency != Consistency::Eventual && self.kv_replica_lag.is_some() {
            return Err(bad_input("--kv-replica-lag applies to --kv-consistency eventual only"));
        }
        let tls = self.tls()?;
        Ok(LabConfig {
            addr: self.addr,
            model: self.model,
            threads: self.threads,
            per_thread: self.per_thread.unwrap_or(defaults.per_thread),
            queue: self.queue,
            fib: self.fib,
            db_sleep: self.db_sleep,
            db: self.db.unwrap_or(defaults.db),
            db_pool: self.db_pool,
            kv_consistency,
            kv_replica_lag: self.kv_replica_lag.unwrap_or(defaults.kv_replica_lag),
            spin: self.spin,
            drain: defaults.drain,
            tls,
            kv_max_bytes: self.kv_max_bytes,
            db_max_rows: self.db_max_rows,
            allow_remote_reset: self.allow_remote_reset,
        })
    }
}

pub fn main(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let args_self_signed = args.self_signed.clone();
    let config = args.into_config()?;
    config.validate()?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    // Handlers before the first line: a signal sent as soon as it is read must drain, not kill.
    // A hang-up (its terminal closed) drains as SIGTERM does.
    let (mut interrupt, mut terminate, mut hangup) = {
        let _inside = runtime.enter();
        (signal(SignalKind::interrupt())?, signal(SignalKind::terminate())?, signal(SignalKind::hangup())?)
    };
    let shape = match &args_self_signed {
        Some(dir) => format!(
            "{}\ncertificates in {dir}: ca.pem for clients (run --cacert {dir}/ca.pem), client.pem + client-key.pem for mutual TLS",
            describe(&config),
            dir = dir.display()
        ),
        None => describe(&config),
    };
    let plaintext = config.tls.is_none();
    let server = LabServer::start(config)?;
    if plaintext && !server.local_addr().ip().is_loopback() {
        eprintln!(
            "warning: serving plaintext on {}: anyone who reaches it can call every method (--self-signed DIR or --tls-cert serve TLS)",
            server.local_addr()
        );
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "listening on {}", server.local_addr())?;
    writeln!(out, "{shape}")?;
    out.flush()?;
    runtime.block_on(async {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
            _ = hangup.recv() => {}
        }
    });
    // Best effort: after a hang-up the terminal may be gone, and the drain must still happen.
    let _ =
        writeln!(out, "stopping: draining calls in flight (a second signal stops at once)").and_then(|_| out.flush());
    // The drain blocks (at most its 5 s and 1 s more) on a thread of its own, so that a
    // second signal is heard meanwhile.
    let reader = server.stats_reader();
    let (stopped, drained) = tokio::sync::oneshot::channel();
    std::thread::Builder::new().name("rpcmeter-drain".into()).spawn(move || drop(stopped.send(server.shutdown())))?;
    let drained = runtime.block_on(async {
        tokio::select! {
            stats = drained => Some(stats),
            _ = interrupt.recv() => None,
            _ = terminate.recv() => None,
            _ = hangup.recv() => None,
        }
    });
    let stats = match drained {
        Some(Ok(stats)) => stats,
        // The drain's thread panicked: what was counted is still worth printing.
        Some(Err(_)) => reader.get(),
        None => {
            let stats = reader.get();
            eprintln!("second signal: stopped without waiting; calls still in flight: {}", stats.in_flight);
            stats
        }
    };
    write!(out, "{}", summary(&stats))?;
    out.flush()?;
    // Returning ends the process, the drain's thread and any call still running included.
    Ok(ExitCode::SUCCESS)
}

fn describe(config: &LabConfig) -> String {
    let model = match config.model {
        Model::Async => format!("async, {} threads x {} calls", config.threads, config.per_thread),
        Model::Threaded => format!("threaded, {} threads", config.threads),
    };
    let store = match config.kv_consistency {
        Consistency::Eventual => {
            format!("eventual, replica lag {}", humantime::Duration::from(config.kv_replica_lag))
        }
        mode => mode.name().to_string(),
    };
    let tls = match &config.tls {
        None => "plaintext (h2c)",
        Some(tls) if tls.mutual() => "TLS, client certificates required",
        Some(_) => "TLS",
    };
    format!(
        "model {model}, queue {}; fib {}; db {} (pool {}, sleep {}, at most {} rows); storage {store} (at most {}); echo spin {}; {tls}",
        config.queue_len(),
        config.fib,
        config.db,
        config.db_pool,
        humantime::Duration::from(config.db_sleep),
        config.db_max_rows,
        config.kv_max_bytes,
        humantime::Duration::from(config.spin),
    )
}

/// The final Stats as a table, with the server-side throughput of docs/experiments.md,
/// "Throughput measured by the client".
pub(crate) fn summary(stats: &StatsReply) -> String {
    let mut s = format!("{:<36} {:>10} {:>10} {:>10} {:>10}\n", "method", "received", "ok", "failed", "rejected");
    for m in &stats.methods {
        let _ = writeln!(s, "{:<36} {:>10} {:>10} {:>10} {:>10}", m.method, m.received, m.ok, m.failed, m.rejected);
    }
    let _ = writeln!(
        s,
        "received {} calls; server-side throughput {:.1} calls/s ((received - 1) / (last - first arrival)); \
         cpu {:.2} s; rss {:.1} MiB; uptime {:.1} s; still in flight {}",
        stats.received,
        stats.server_rps,
        stats.cpu_seconds,
        stats.rss_bytes as f64 / (1 << 20) as f64,
        stats.uptime_s,
        stats.in_flight,
    );
    s
}
