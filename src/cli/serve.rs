//! `rpcmeter serve`: the lab's reference services, until SIGINT or SIGTERM.
use crate::error::bad_input;
use crate::lab::proto::lab::StatsReply;
use crate::lab::{DbSpec, LabConfig, LabServer, Model};
use std::fmt::Write as _;
use std::io::Write as _;
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
    #[arg(long, value_parser = crate::app::parse::duration, default_value = "250ms")]
    pub db_sleep: std::time::Duration,
    /// sqlite:PATH (kept) or postgres://… [default: a temporary SQLite file, removed at exit].
    #[arg(long)]
    pub db: Option<DbSpec>,
    /// Database connections.
    #[arg(long, default_value_t = LabConfig::default().db_pool)]
    pub db_pool: usize,
    /// Storage: per-key locks and versions instead of one global order.
    #[arg(long)]
    pub relax: bool,
}

impl ServeArgs {
    fn into_config(self) -> anyhow::Result<LabConfig> {
        let defaults = LabConfig::default();
        if self.model == Model::Threaded && self.per_thread.is_some() {
            return Err(bad_input("--per-thread applies to --model async only"));
        }
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
            relax: self.relax,
            drain: defaults.drain,
        })
    }
}

pub fn main(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let config = args.into_config()?;
    config.validate()?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    // Handlers before the first line: a signal sent as soon as it is read must drain, not kill.
    let (mut interrupt, mut terminate) = {
        let _inside = runtime.enter();
        (signal(SignalKind::interrupt())?, signal(SignalKind::terminate())?)
    };
    let shape = describe(&config);
    let server = LabServer::start(config)?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "listening on {}", server.local_addr())?;
    writeln!(out, "{shape}")?;
    out.flush()?;
    runtime.block_on(async {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
    });
    writeln!(out, "stopping: draining calls in flight (a second SIGINT or SIGTERM stops at once)")?;
    out.flush()?;
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
    let store = if config.relax { "relaxed" } else { "linearizable" };
    format!(
        "model {model}, queue {}; fib {}; db {} (pool {}, sleep {}); storage {store}",
        config.queue_len(),
        config.fib,
        config.db,
        config.db_pool,
        humantime::Duration::from(config.db_sleep),
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
