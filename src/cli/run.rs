//! `rpcmeter run`: raw flags (ghz/grpcurl names) -> a validated Plan -> the engine -> reports.
use crate::error::{bad_input, run_failed};
use crate::load::engine::{self, Control, Interval, IntervalSink};
use crate::load::pacer::{Pacer, RateSchedule};
use crate::load::plan::{Plan, StopAt};
use crate::load::retry::RetryPolicy;
use crate::load::transport::{CallSpec, Target, TlsOptions};
use crate::report::{self, details, IntervalRow, Summary};
use crate::schema::{self, DataSource, RequestSource, SchemaSource};
use crate::stats::assertions;
use clap::{Args, ValueEnum};
use hdrhistogram::serialization::interval_log::{IntervalLogWriter, IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;
use indicatif::{ProgressBar, ProgressStyle};
use std::fs::File;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Json,
    Csv,
    Rmeter,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The server, HOST:PORT
    pub target: String,
    /// A .proto file, compiled at run time (no protoc needed)
    #[arg(long, conflicts_with = "protoset")]
    pub proto: Option<PathBuf>,
    /// Directories searched for imports of --proto (comma-separated)
    #[arg(short = 'i', long = "import-paths", value_delimiter = ',')]
    pub import_paths: Vec<PathBuf>,
    /// A compiled FileDescriptorSet (protoc -o / buf build)
    #[arg(long)]
    pub protoset: Option<PathBuf>,
    /// The method: pkg.Service/Method or pkg.Service.Method
    #[arg(long)]
    pub call: String,
    /// Request as JSON (protobuf JSON mapping); string fields may hold templates
    #[arg(short = 'd', long = "data", conflicts_with = "data_file")]
    pub data: Option<String>,
    /// Request JSON from a file ("-": stdin); several objects/lines are replayed in turn
    #[arg(short = 'D', long = "data-file")]
    pub data_file: Option<PathBuf>,
    /// Request metadata as a JSON object
    #[arg(short = 'm', long)]
    pub metadata: Option<String>,
    /// Plaintext HTTP/2 (h2c), no TLS
    #[arg(long)]
    pub plaintext: bool,
    #[arg(long, conflicts_with = "plaintext")]
    pub cacert: Option<PathBuf>,
    #[arg(long, conflicts_with = "plaintext", requires = "key")]
    pub cert: Option<PathBuf>,
    #[arg(long, conflicts_with = "plaintext", requires = "cert")]
    pub key: Option<PathBuf>,
    #[arg(long, conflicts_with = "plaintext")]
    pub servername: Option<String>,
    #[arg(long, conflicts_with = "plaintext")]
    pub skip_verify: bool,
    /// Closed loop: concurrent workers (bursts: use --burst)
    #[arg(short = 'c', long, default_value_t = 8)]
    pub concurrency: u32,
    /// Measured calls in all
    #[arg(short = 'n', long)]
    pub total: Option<u64>,
    /// Measured duration, e.g. 10s (default 5s when no other limit is given)
    #[arg(short = 'z', long)]
    pub duration: Option<String>,
    /// Calls per worker (rmeter's tasks x loop)
    #[arg(long = "loop")]
    pub loop_count: Option<u64>,
    /// Open loop: R calls/s, or FROM:TO:DURATION for a linear ramp of the rate
    #[arg(long, conflicts_with_all = ["burst", "loop_count"], allow_hyphen_values = true)]
    pub rps: Option<String>,
    /// Open loop: most calls in flight at once
    #[arg(long, default_value_t = 256)]
    pub max_in_flight: u32,
    /// Bursts: fire N calls at once, wait for all, repeat --rounds times
    #[arg(long, requires = "rounds")]
    pub burst: Option<u32>,
    #[arg(long, requires = "burst")]
    pub rounds: Option<u64>,
    /// Start workers evenly over this time (rmeter's ramp-up)
    #[arg(long)]
    pub ramp: Option<String>,
    /// Measured, shown apart and excluded from the result
    #[arg(long, conflicts_with = "burst")]
    pub warmup: Option<String>,
    /// Retries after the first attempt on a retryable status
    #[arg(long, default_value_t = 0)]
    pub max_retries: u32,
    /// First backoff in milliseconds, doubled on each retry
    #[arg(long, default_value_t = 1000)]
    pub retry_ms: u64,
    /// Spread each backoff over [backoff/2, backoff]
    #[arg(long)]
    pub retry_jitter: bool,
    /// Statuses that are retried (comma-separated gRPC names)
    #[arg(long, value_delimiter = ',', default_value = "RESOURCE_EXHAUSTED,UNAVAILABLE")]
    pub retry_on: Vec<String>,
    /// Deadline of each attempt, e.g. 500ms
    #[arg(long)]
    pub deadline: Option<String>,
    /// HTTP/2 connections; calls are spread over them
    #[arg(long, default_value_t = 1)]
    pub connections: u32,
    /// Client threads, each owning its connections (default: one per connection, at most the cores)
    #[arg(long)]
    pub threads: Option<u32>,
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Write the report here instead of stdout
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// Per-call CSV (msg,key,version,timestamp,latency_ns,bytes,success,...), streamed
    #[arg(long)]
    pub csv_details: Option<PathBuf>,
    /// HdrHistogram interval log of call latency (ns)
    #[arg(long)]
    pub hdr_log: Option<PathBuf>,
    /// Checks such as 'p99<10ms,error_rate<1%,rps>=1000'; a breach exits 1
    #[arg(long)]
    pub assert: Option<String>,
    /// Interval of the progress, CSV rows and HDR log
    #[arg(long, default_value = "1s")]
    pub interval: String,
    /// Longest wait for calls in flight after the end or the first Ctrl-C
    #[arg(long, default_value = "5s")]
    pub drain: String,
    /// No progress bar
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

/// Parses a duration flag; nonsense gets one line naming the flag.
pub fn duration(flag: &str, text: &str) -> anyhow::Result<Duration> {
    humantime::parse_duration(text.trim())
        .map_err(|_| bad_input(format!("{flag}: invalid duration {text:?} (expected e.g. 500ms, 10s, 2m)")))
}

fn positive(flag: &str, n: u64) -> anyhow::Result<u64> {
    if n == 0 {
        Err(bad_input(format!("{flag} must be at least 1")))
    } else {
        Ok(n)
    }
}

/// The slowest rate worth pacing: one call every 1000 s.
const MIN_RATE: f64 = 0.001;

fn rate(text: &str) -> anyhow::Result<f64> {
    match text.trim().parse::<f64>() {
        Ok(r) if r.is_finite() && r >= MIN_RATE => Ok(r),
        _ => Err(bad_input(format!("--rps: {text:?} is not a rate of at least {MIN_RATE} calls/s"))),
    }
}

/// `R` or `FROM:TO:DURATION`.
pub fn rate_schedule(text: &str) -> anyhow::Result<RateSchedule> {
    let parts: Vec<&str> = text.split(':').collect();
    match parts.as_slice() {
        [r] => Ok(RateSchedule::constant(rate(r)?)),
        [from, to, over] => {
            let over = duration("--rps", over)?;
            if over.is_zero() {
                return Err(bad_input("--rps: the ramp duration must be above zero"));
            }
            Ok(RateSchedule { from: rate(from)?, to: rate(to)?, over })
        }
        _ => Err(bad_input(format!("--rps: {text:?}: expected R or FROM:TO:DURATION (e.g. 100:1000:30s)"))),
    }
}

/// `HOST:PORT` or `[IPv6]:PORT`.
pub fn target(text: &str) -> anyhow::Result<(String, u16)> {
    let bad = || bad_input(format!("target {text:?}: expected HOST:PORT (e.g. 127.0.0.1:9000)"));
    let (host, port) = text.rsplit_once(':').ok_or_else(bad)?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port: u16 = port.parse().map_err(|_| bad())?;
    if host.is_empty() || port == 0 {
        return Err(bad());
    }
    Ok((host.to_string(), port))
}

fn status_code(name: &str) -> anyhow::Result<tonic::Code> {
    let upper = name.trim().to_ascii_uppercase();
    crate::stats::STATUS_NAMES
        .iter()
        .position(|&n| n == upper)
        .map(|i| tonic::Code::from_i32(i as i32))
        .ok_or_else(|| bad_input(format!("--retry-on: unknown gRPC status {name:?}")))
}

/// The method path gRPC puts on the wire.
fn path(method: &prost_reflect::MethodDescriptor) -> anyhow::Result<http::uri::PathAndQuery> {
    format!("/{}/{}", method.parent_service().full_name(), method.name())
        .parse()
        .map_err(|_| bad_input(format!("--call: {} is not a valid path", method.full_name())))
}

/// Turns validated arguments into a Plan (everything but the method-dependent parts).
fn plan(args: &RunArgs, spec: CallSpec, target: Target) -> anyhow::Result<Plan> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    let connections = positive("--connections", args.connections as u64)? as u32;
    let mut stop = StopAt {
        total: args.total.map(|n| positive("-n/--total", n)).transpose()?,
        per_worker: args.loop_count.map(|n| positive("--loop", n)).transpose()?,
        duration: args.duration.as_deref().map(|d| duration("-z/--duration", d)).transpose()?,
    };
    if stop.duration.is_some_and(|d| d.is_zero()) {
        return Err(bad_input("-z/--duration must be above zero"));
    }
    let (pacer, workers) = match (&args.rps, args.burst) {
        (Some(r), _) => {
            (Pacer::Open(rate_schedule(r)?), positive("--max-in-flight", args.max_in_flight as u64)? as u32)
        }
        (None, Some(size)) => {
            let size = positive("--burst", size as u64)?;
            let rounds = positive("--rounds", args.rounds.unwrap_or(1))?;
            stop.total = Some(size * rounds);
            (Pacer::Burst { size }, size as u32)
        }
        (None, None) => (Pacer::Closed, positive("-c/--concurrency", args.concurrency as u64)? as u32),
    };
    if stop.total.is_none() && stop.per_worker.is_none() && stop.duration.is_none() {
        stop.duration = Some(Duration::from_secs(5));
    }
    // Each thread owns at least one connection and one worker; more would sit idle.
    let threads = match args.threads {
        Some(t) => positive("--threads", t as u64)? as u32,
        None => connections.min(cores),
    }
    .min(workers);
    if connections < threads {
        return Err(bad_input(format!(
            "--threads {threads} needs at least as many --connections (each thread owns its own)"
        )));
    }
    if connections > workers {
        return Err(bad_input(format!(
            "--connections {connections} is more than the {workers} calls in flight: some would stay idle"
        )));
    }
    let ramp = args.ramp.as_deref().map(|d| duration("--ramp", d)).transpose()?.unwrap_or_default();
    if let Some(d) = stop.duration.filter(|d| !ramp.is_zero() && ramp >= *d) {
        return Err(bad_input(format!(
            "--ramp {} is not shorter than -z {}: the last workers would never start",
            humantime::format_duration(ramp),
            humantime::format_duration(d)
        )));
    }
    let interval = duration("--interval", &args.interval)?;
    if interval < Duration::from_millis(10) {
        return Err(bad_input("--interval must be at least 10ms"));
    }
    Ok(Plan {
        target,
        spec,
        pacer,
        workers,
        threads,
        connections,
        stop,
        warmup: args.warmup.as_deref().map(|d| duration("--warmup", d)).transpose()?.unwrap_or_default(),
        ramp,
        retry: RetryPolicy {
            max_retries: args.max_retries,
            base: Duration::from_millis(args.retry_ms),
            jitter: args.retry_jitter,
            retry_on: args.retry_on.iter().map(|s| status_code(s)).collect::<anyhow::Result<_>>()?,
        },
        interval,
        drain: duration("--drain", &args.drain)?,
        keep_responses: args.csv_details.is_some(),
    })
}

/// Progress, interval rows and the HDR log, fed by the engine every interval.
struct Sinks<'a, 'b> {
    progress: Option<ProgressBar>,
    rows: Vec<IntervalRow>,
    hdr: Option<IntervalLogWriter<'a, 'b, File, V2DeflateSerializer>>,
    calls: u64,
    failed: u64,
}

impl IntervalSink for Sinks<'_, '_> {
    fn interval(&mut self, iv: &Interval) {
        let row = IntervalRow::of(iv);
        self.calls += row.calls;
        self.failed += row.failed;
        if let Some(bar) = &self.progress {
            bar.set_message(format!(
                "{} calls, {:.0} calls/s, {} errors, p99 {}{}",
                self.calls,
                row.rps,
                self.failed,
                report::table::us(row.p99_us),
                if iv.warmup { " (warm-up)" } else { "" }
            ));
        }
        if let Some(log) = &mut self.hdr {
            let start = iv.at.saturating_sub(iv.length);
            let tag = Tag::new(if iv.warmup { "warmup" } else { "measured" });
            let _ = log.write_histogram(&iv.shard.call_latency, start, iv.length, tag);
        }
        self.rows.push(row);
    }
}

/// Creates an output file before the run, so that an unwritable path costs nothing measured.
fn create(flag: &str, path: &PathBuf) -> anyhow::Result<File> {
    File::create(path).map_err(|e| bad_input(format!("{flag} {}: {e}", path.display())))
}

pub fn main(args: RunArgs) -> anyhow::Result<ExitCode> {
    let (host, port) = target(&args.target)?;
    let tls = (!args.plaintext).then(|| TlsOptions {
        cacert: args.cacert.clone(),
        cert: args.cert.clone(),
        key: args.key.clone(),
        servername: args.servername.clone(),
        skip_verify: args.skip_verify,
    });
    let target = Target { host, port, tls };
    let source = match (&args.proto, &args.protoset) {
        (Some(file), _) => SchemaSource::Proto { file: file.clone(), import_paths: args.import_paths.clone() },
        (None, Some(set)) => SchemaSource::Protoset(set.clone()),
        (None, None) => SchemaSource::Reflection,
    };
    let data = match (&args.data, &args.data_file) {
        (Some(json), _) => DataSource::Json(json.clone()),
        (None, Some(file)) => DataSource::File(file.clone()),
        (None, None) => DataSource::Empty,
    };
    let metadata = args.metadata.as_deref().map(schema::metadata).transpose()?.unwrap_or_default();
    let deadline = args.deadline.as_deref().map(|d| duration("--deadline", d)).transpose()?;
    let checks = args.assert.as_deref().map(assertions::parse).transpose()?.unwrap_or_default();
    // Validate every flag before touching the network or the disk.
    let placeholder = CallSpec { path: http::uri::PathAndQuery::from_static("/"), metadata, deadline };
    let mut plan = plan(&args, placeholder, target)?;
    let mut output = args.output.as_ref().map(|p| create("-o", p)).transpose()?;
    let mut hdr_file = args.hdr_log.as_ref().map(|p| create("--hdr-log", p)).transpose()?;
    let details_file = args.csv_details.as_ref().map(|p| create("--csv-details", p)).transpose()?;

    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let method = runtime.block_on(schema::resolve_method(&source, &args.call, &plan.target))?;
    drop(runtime);
    plan.spec.path = path(&method)?;
    let requests = Arc::new(RequestSource::new(&method, &data)?);
    let details = details_file.map(|file| details::start(file, &method));

    let control = Arc::new(Control::default());
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let control = control.clone();
        // SAFETY: the handler only increments an atomic, which is async-signal-safe.
        unsafe {
            signal_hook::low_level::register(signal, move || {
                control.interrupts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            })
        }?;
    }
    let mut serializer = V2DeflateSerializer::new();
    let hdr = match hdr_file.as_mut() {
        Some(file) => Some(
            IntervalLogWriterBuilder::new()
                .with_start_time(std::time::SystemTime::now())
                .with_base_time(std::time::SystemTime::now())
                .with_max_value_divisor(1e6) // ns recorded, ms shown by HdrHistogram's tools
                .begin_log_with(file, &mut serializer)?,
        ),
        None => None,
    };
    let progress = (!args.quiet && std::io::stderr().is_terminal()).then(|| {
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.enable_steady_tick(Duration::from_millis(200));
        bar
    });
    let mut sinks = Sinks { progress, rows: Vec::new(), hdr, calls: 0, failed: 0 };
    let result = engine::run(plan.clone(), requests, details.as_ref().map(|d| d.sender.clone()), &mut sinks, &control);
    if let Some(bar) = &sinks.progress {
        bar.finish_and_clear();
    }
    let result = result?;
    if let Some(d) = details {
        d.finish()?;
    }
    let summary = Summary::new(&plan, method.full_name(), &result, &checks);
    let text = match args.format {
        Format::Table => report::table::render(&summary, &result.measured.call_latency),
        Format::Json => report::json::render(&summary),
        Format::Csv => report::csv::render(&sinks.rows),
        Format::Rmeter => report::rmeter::render(&summary),
    };
    match output.as_mut() {
        Some(file) => file.write_all(text.as_bytes())?,
        None => std::io::stdout().write_all(text.as_bytes())?,
    }
    let c = &summary.requests;
    if c.total > 0 && c.ok == 0 {
        let statuses: Vec<String> = summary.statuses.iter().map(|(k, v)| format!("{k} {v}")).collect();
        return Err(run_failed(format!("every call failed ({})", statuses.join(", "))));
    }
    if c.total == 0 {
        return Err(run_failed("no call was answered"));
    }
    if let Some(first) = summary.breached().first() {
        return Err(run_failed(format!("assertion breached: {} (value {:.3})", first.assertion, first.value)));
    }
    Ok(ExitCode::SUCCESS)
}
