//! `rpcmeter run`: flags -> `Settings` (every check of how flags combine, before the network
//! or the disk is touched), then `run` orchestrates: outputs, schema, engine, sinks, reports,
//! verdict. Testable without clap: build a `Settings` and call `run`.
use super::outputs::{OutputSettings, Outputs};
use crate::analysis::{self, Meta, Summary};
use crate::cli::run::{self as cli, Compression, RunArgs, StagesOf};
use crate::error::{bad_input, internal, run_failed};
use crate::grpc::tls::TlsOptions;
use crate::grpc::transport::{Bidi, CallKind, StreamLimits, KEEPALIVE_TIMEOUT};
use crate::grpc::{CallSpec, Target};
use crate::load::engine::{self, Control};
use crate::load::pacer::{Arrival, Pacer, RateSchedule, Stages};
use crate::load::plan::{Plan, StopAt};
use crate::load::retry::RetryPolicy;
use crate::record::resource;
use crate::report::Format;
use crate::schema::{self, DataSource, RequestSource, SchemaSource};
use crate::sink::{details::DetailsWriter, hdr_log::HdrLog, metrics::LiveMetrics, progress::Progress, Sinks};
use crate::stats::assertions::{self, Assertion};
use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Memory one call in flight may take (its worker, h2 stream, buffers), for the up-front
/// check that the calls asked for can be in flight at once: measured at about 8.5 KiB.
const MEMORY_PER_CALL: u64 = 16 << 10;

/// Everything a run needs, validated.
#[derive(Debug, Clone)]
pub struct Settings {
    pub schema: SchemaSource,
    /// The method, or for a workload the words naming it (`workload FILE`).
    pub call: String,
    /// `--workload`: the mix of calls, read and checked (each method is resolved at the start).
    pub workload: Option<Vec<crate::load::workload::WorkloadCall>>,
    /// `--workload` with `--seed`: draw each call at random by weight instead of round robin.
    pub pick_seed: Option<u64>,
    pub data: DataSource,
    pub metadata: http::HeaderMap,
    pub deadline: Option<Duration>,
    /// The plan but for the method's path, which the schema gives.
    pub plan: Plan,
    pub outputs: OutputSettings,
    pub checks: Vec<Assertion>,
    pub progress: bool,
    /// Read the target's Stats before and after (the lab's) to show the server's count.
    pub server_stats: bool,
    /// Print the machine's floor (the calibration cache) beside the results.
    pub floor: bool,
    pub name: Option<String>,
    pub tags: Vec<(String, String)>,
    pub arguments: Vec<String>,
    /// Where the result is recorded (None: --no-save).
    pub history: Option<crate::history::SaveTo>,
    /// `--metrics-addr`: serve live Prometheus metrics there during the run.
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// `--coordinator`: this shard meets the others, and shard 0 prints the merged result.
    pub coordination: Option<super::coordinator::Coordination>,
}

impl Settings {
    pub fn from_args(args: &RunArgs, arguments: Vec<String>) -> anyhow::Result<Settings> {
        let redactor = super::redact::Redactor::new(&args.redact);
        let plaintext = match args.target.scheme_plaintext {
            Some(false) if args.tls.plaintext => return Err(bad_input("target https://... and --plaintext disagree")),
            Some(scheme) => scheme || args.tls.plaintext,
            None => args.tls.plaintext,
        };
        let tls = (!plaintext).then(|| TlsOptions {
            cacert: args.tls.cacert.clone(),
            cert: args.tls.cert.clone(),
            key: args.tls.key.clone(),
            servername: args.tls.servername.clone(),
            skip_verify: args.tls.skip_verify,
        });
        let target = Target {
            host: args.target.host.clone(),
            port: args.target.port,
            tls,
            authority: args.authority.clone(),
            connect_timeout: args.connect_timeout,
            keepalive: args.keepalive,
            keepalive_timeout: args.keepalive_timeout.unwrap_or(KEEPALIVE_TIMEOUT),
            unix: args.target.unix.clone(),
        };
        let metadata = args.metadata.as_deref().map(schema::metadata).transpose()?.unwrap_or_default();
        let schema = match (&args.schema.proto, &args.schema.protoset) {
            (Some(file), _) => {
                SchemaSource::Proto { file: file.clone(), import_paths: args.schema.import_paths.clone() }
            }
            (None, Some(set)) => SchemaSource::Protoset(set.clone()),
            (None, None) => {
                // Reflection gets -m, and --reflect-metadata on top (its keys replace -m's), as ghz.
                let mut reflect = metadata.clone();
                if let Some(json) = &args.reflect_metadata {
                    let only = schema::metadata_of("--reflect-metadata", json)?;
                    for key in only.keys() {
                        reflect.remove(key);
                    }
                    for (key, value) in &only {
                        reflect.append(key.clone(), value.clone());
                    }
                }
                SchemaSource::Reflection { metadata: reflect }
            }
        };
        let workload = args.workload.as_deref().map(crate::load::workload::read).transpose()?;
        let call = match (&args.call, &args.workload) {
            (Some(call), None) => call.clone(),
            (None, Some(file)) => format!("workload {}", file.display()),
            (Some(_), Some(_)) => {
                return Err(bad_input("--call and --workload together: the workload file names each call's method"))
            }
            (None, None) => return Err(bad_input("--call METHOD (or --workload FILE) is required")),
        };
        if workload.is_some() && (args.data.is_some() || args.data_file.is_some()) {
            return Err(bad_input("-d/-D and --workload together: each [[call]] of the workload gives its own data"));
        }
        if workload.is_some() && args.csv_details.is_some() {
            return Err(bad_input("--csv-details with --workload is not supported yet"));
        }
        if args.seed.is_some() && args.arrival.is_none() && workload.is_none() {
            return Err(bad_input("--seed applies to --arrival poisson or to --workload"));
        }
        let data = match (&args.data, &args.data_file) {
            (Some(json), _) => DataSource::Json(json.clone()),
            (None, Some(file)) => DataSource::File(file.clone()),
            (None, None) => DataSource::Empty,
        };
        let spec = CallSpec {
            path: http::uri::PathAndQuery::from_static("/"),
            metadata: metadata.clone(),
            deadline: args.deadline,
            messages: crate::grpc::transport::MessageOptions {
                send: args.max_msg_size as usize,
                receive: args.max_msg_size as usize,
                gzip: args.compression == Some(Compression::Gzip),
            },
        };
        Ok(Settings {
            schema,
            call,
            pick_seed: args.seed.filter(|_| workload.is_some()),
            workload,
            data,
            metadata,
            deadline: args.deadline,
            plan: plan(args, target, spec)?,
            outputs: OutputSettings {
                format: args.format,
                primary: args.output.clone(),
                exports: args.export.clone(),
                csv_details: args.csv_details.clone(),
                hdr_log: args.hdr_log.clone(),
            },
            checks: args.assert.as_deref().map(assertions::parse).transpose()?.unwrap_or_default(),
            progress: !args.quiet && std::io::stderr().is_terminal(),
            floor: !args.no_calibrate,
            server_stats: !args.no_server_stats,
            name: args.name.clone(),
            // Results, history and reports are shared; credentials stay with the run.
            tags: redactor.tags(&args.tag),
            arguments: redactor.arguments(arguments, args),
            history: crate::history::SaveTo::from_flags(args.no_save, args.history.as_deref()),
            metrics_addr: args.metrics_addr,
            coordination: coordination(args)?,
        })
    }
}

fn positive(flag: &str, n: u64) -> anyhow::Result<u64> {
    if n == 0 {
        Err(bad_input(format!("{flag} must be at least 1")))
    } else {
        Ok(n)
    }
}

/// `--coordinator` (or `run --shards`' `--join`): the merged result it prints is a table or JSON.
fn coordination(args: &RunArgs) -> anyhow::Result<Option<super::coordinator::Coordination>> {
    let (addr, listen) = match (&args.coordinator, &args.join) {
        (Some(addr), _) => (addr.clone(), args.shard.is_some_and(|s| s.index == 0)),
        (None, Some(addr)) => (addr.clone(), false),
        (None, None) => return Ok(None),
    };
    if !addr.rsplit_once(':').is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok()) {
        return Err(bad_input(format!("--coordinator {addr}: not HOST:PORT")));
    }
    if listen && !matches!(args.format, Format::Table | Format::Json) {
        use clap::ValueEnum;
        let asked = args.format.to_possible_value().map_or(String::new(), |v| v.get_name().to_string());
        return Err(bad_input(format!(
            "--coordinator prints the merged result as --format table or json, not {asked}"
        )));
    }
    Ok(Some(super::coordinator::Coordination { addr, listen, join_timeout: args.join_timeout }))
}

/// How the load flags combine into a Plan; every limit that cannot be met is refused here.
fn plan(args: &RunArgs, target: Target, spec: CallSpec) -> anyhow::Result<Plan> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    let shard = args.shard.unwrap_or_default();
    if let Some(at) = args.start_at {
        if let Ok(late) = std::time::SystemTime::now().duration_since(at) {
            return Err(bad_input(format!(
                "--start-at: the clock is already {:.3} s past it (clocks of the shards' machines must agree)",
                late.as_secs_f64()
            )));
        }
    }
    let connections = positive("--connections", args.connections as u64)? as u32;
    let (warmup, warmup_auto) = match args.warmup {
        Some(super::parse::Warmup::Fixed(d)) => (d, false),
        Some(super::parse::Warmup::Auto) => (Duration::ZERO, true),
        None => (Duration::ZERO, false),
    };
    let mut stop = StopAt {
        total: args.total.map(|n| positive("-n/--total", n)).transpose()?.map(|n| shard.share(n)),
        per_worker: args.loop_count.map(|n| positive("--loop", n)).transpose()?,
        duration: args.duration,
    };
    // --stages: the run lasts as long as they do.
    if let Some(stages) = &args.stages {
        if warmup >= stages.length() {
            return Err(bad_input(format!(
                "--warmup {} is not shorter than the --stages ({}): nothing would be measured",
                humantime::format_duration(warmup),
                humantime::format_duration(stages.length())
            )));
        }
        stop.duration = Some(stages.length() - warmup);
    }
    let open_rate = match (&args.rps, &args.stages, args.stages_of) {
        (Some(rate), _, _) => Some(rate.clone()),
        (None, Some(stages), StagesOf::Rate) => Some(RateSchedule::stages(stages.clone())),
        _ => None,
    };
    if open_rate.is_none() && args.max_in_flight.is_some() {
        return Err(bad_input("--max-in-flight applies to an open loop (--rps, or --stages of rates)"));
    }
    if open_rate.is_none() && args.arrival.is_some() {
        return Err(bad_input("--arrival applies to an open loop (--rps, or --stages of rates)"));
    }
    if args.arrival == Some(cli::Arrival::Poisson)
        && args.seed.is_none()
        && !shard.is_whole()
        && args.start_at.is_none()
    {
        return Err(bad_input(
            "--shard with --arrival poisson needs --seed (or --start-at): every shard must draw the same arrivals",
        ));
    }
    let arrival = match args.arrival {
        None | Some(cli::Arrival::Uniform) => Arrival::Uniform,
        Some(cli::Arrival::Poisson) => {
            Arrival::Poisson { seed: args.seed.unwrap_or_else(|| default_seed(args.start_at)) }
        }
    };
    let mut active_workers = None;
    let (pacer, asked) = match (open_rate, args.burst, &args.stages) {
        (Some(rate), _, _) => {
            (Pacer::Open(rate, arrival), positive("--max-in-flight", args.max_in_flight.unwrap_or(256) as u64)?)
        }
        (None, None, Some(stages)) => {
            if let Some((_, n)) = stages.targets().find(|(_, n)| n.fract() != 0.0 || *n > u32::MAX as f64) {
                return Err(bad_input(format!(
                    "--stages {stages}: {n} workers is not a whole number up to {}",
                    u32::MAX
                )));
            }
            let peak = positive("--stages: the most workers of any stage", stages.peak() as u64)?;
            active_workers = Some(stages.clone());
            (Pacer::Closed, peak)
        }
        (None, Some(size), _) => {
            let size = positive("--burst", size as u64)?;
            let rounds = positive("--rounds", args.rounds.unwrap_or(1))?;
            stop.total = Some(
                size.checked_mul(rounds)
                    .ok_or_else(|| bad_input("--burst x --rounds is more calls than can be counted"))?,
            );
            (Pacer::Burst { size }, size)
        }
        (None, None, None) => (Pacer::Closed, positive("-c/--concurrency", args.concurrency.unwrap_or(8) as u64)?),
    };
    if stop.total == Some(0) {
        return Err(bad_input(format!("-n: shard {}/{} has no call of its own", shard.index, shard.count)));
    }
    let asked = shard.share(asked);
    if asked == 0 {
        return Err(bad_input(format!(
            "shard {}/{} has no worker of its own: more shards than workers (-c or --max-in-flight)",
            shard.index, shard.count
        )));
    }
    if stop.total.is_none() && stop.per_worker.is_none() && stop.duration.is_none() {
        stop.duration = Some(Duration::from_secs(5));
    }
    // No more calls can be in flight than will ever be made: -c 100000 -n 10 runs 10 workers.
    let workers = match stop.total {
        Some(n) if warmup.is_zero() => asked.min(n),
        _ => asked,
    } as u32;
    // An open loop starts workers as calls need them; the others are all busy at once, so
    // their memory must be there from the start.
    if !pacer.is_open() {
        if let Some(available) = resource::memory_available_bytes() {
            let needed = workers as u64 * MEMORY_PER_CALL;
            if needed > available / 2 {
                return Err(bad_input(format!(
                    "{} calls in flight at once would need about {} MiB, more than half of the {} MiB this machine has free",
                    workers,
                    needed >> 20,
                    available >> 20
                )));
            }
        }
    }
    // Each thread owns at least one connection and one worker; more would sit idle.
    let threads = match args.threads {
        Some(t) => positive("--threads", t as u64)? as u32,
        None => connections.min(cores).min(workers),
    };
    if threads > workers {
        return Err(bad_input(format!(
            "--threads {threads} is more than the {workers} calls in flight: some would stay idle"
        )));
    }
    if connections < threads {
        return Err(bad_input(format!(
            "--threads {threads} needs at least as many --connections (each thread owns its own), not {connections}"
        )));
    }
    if connections > workers {
        return Err(bad_input(format!(
            "--connections {connections} is more than the {workers} calls in flight: some would stay idle"
        )));
    }
    let ramp = args.ramp.unwrap_or_default();
    if let Some(d) = stop.duration.filter(|d| !ramp.is_zero() && ramp >= *d) {
        return Err(bad_input(format!(
            "--ramp {} is not shorter than -z {}: the last workers would never start",
            humantime::format_duration(ramp),
            humantime::format_duration(d)
        )));
    }
    // --ramp D: the workers of the whole run (every shard's) from 0 to all of them over D.
    if !ramp.is_zero() {
        let whole = if shard.is_whole() { workers } else { args.concurrency.unwrap_or(8) };
        active_workers = Some(Stages::new(0.0, &[(ramp, whole as f64)]));
    }
    if args.interval < Duration::from_millis(10) {
        return Err(bad_input("--interval must be at least 10ms"));
    }
    Ok(Plan {
        target,
        spec,
        // The schema tells the kind; `stream_of` checks the stream flags against it.
        kind: CallKind::Unary,
        stream: StreamLimits {
            count: args.stream_call_count,
            duration: args.stream_call_duration,
            interval: args.stream_interval.unwrap_or_default(),
            bidi: match args.bidi {
                Some(cli::BidiMode::Free) => Bidi::Free,
                Some(cli::BidiMode::PingPong) | None => Bidi::PingPong,
            },
        },
        pacer,
        workers,
        threads,
        connections,
        stop,
        warmup,
        active_workers,
        retry: RetryPolicy {
            max_retries: args.max_retries,
            base: Duration::from_millis(args.retry_ms),
            jitter: args.retry_jitter,
            retry_on: args.retry_on.clone(),
        },
        interval: args.interval,
        drain: args.drain,
        keep_responses: args.csv_details.is_some(),
        shard,
        start: args.start_at.map(crate::load::plan::Start::At),
        warmup_auto,
    })
}

/// The seed of Poisson arrivals when none is given: drawn at random, except for the shards
/// of one run (`--start-at`, which they share), which must draw the same arrivals so that
/// their interleaved tickets make the whole run's process.
fn default_seed(start_at: Option<SystemTime>) -> u64 {
    match start_at.and_then(|at| at.duration_since(std::time::UNIX_EPOCH).ok()) {
        Some(since) => since.as_nanos() as u64,
        None => rand::random(),
    }
}

/// The method path gRPC puts on the wire.
pub(crate) fn path(method: &prost_reflect::MethodDescriptor) -> anyhow::Result<http::uri::PathAndQuery> {
    format!("/{}/{}", method.parent_service().full_name(), method.name())
        .parse()
        .map_err(|_| bad_input(format!("--call: {} is not a valid path", method.full_name())))
}

/// The stream flags checked against the method's kind (a flag that would be ignored is
/// refused); client and bidi streams without a count or a duration send each record once.
fn stream_of(
    method: &prost_reflect::MethodDescriptor,
    kind: CallKind,
    given: StreamLimits,
    records: u64,
) -> anyhow::Result<StreamLimits> {
    let flags = [
        ("--stream-call-count", given.count.is_some()),
        ("--stream-call-duration", given.duration.is_some()),
        ("--stream-interval", !given.interval.is_zero()),
    ];
    if kind != CallKind::Bidi && given.bidi != Bidi::PingPong {
        return Err(bad_input(format!("--bidi: {} is {}, not bidirectional", method.full_name(), kind.as_str())));
    }
    let refused = |flag: &str| {
        bad_input(format!("{flag}: {} is {}; stream flags need a streaming method", method.full_name(), kind.as_str()))
    };
    match kind {
        CallKind::Unary => match flags.iter().find(|(_, set)| *set) {
            Some((flag, _)) => Err(refused(flag)),
            None => Ok(given),
        },
        CallKind::ServerStream if !given.interval.is_zero() => Err(bad_input(format!(
            "--stream-interval: {} is server streaming: the server paces its messages (the interval is for client and bidi streams)",
            method.full_name()
        ))),
        CallKind::ServerStream => Ok(given),
        CallKind::ClientStream | CallKind::Bidi if given.count.is_none() && given.duration.is_none() => {
            Ok(StreamLimits { count: Some(records), ..given })
        }
        CallKind::ClientStream | CallKind::Bidi => Ok(given),
    }
}

/// Asks the schema for the method; a Ctrl-C while a server is being asked ends the wait.
pub(crate) fn resolve(settings: &Settings, control: &Control) -> anyhow::Result<prost_reflect::MethodDescriptor> {
    resolve_call(settings, &settings.call, control)
}

/// `resolve` for the method `call`.
fn resolve_call(settings: &Settings, call: &str, control: &Control) -> anyhow::Result<prost_reflect::MethodDescriptor> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| internal(format!("cannot start a runtime: {e}")))?;
    runtime.block_on(async {
        let interrupted = async {
            while control.interrupts.load(Relaxed) == 0 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        tokio::select! {
            method = schema::resolve_method(&settings.schema, call, &settings.plan.target) => method,
            _ = interrupted => Err(run_failed("interrupted before the run started")),
        }
    })
}

/// Runs `settings` to the end and says how it went: the exit code, or the error to print.
pub fn run(settings: Settings, control: Arc<Control>) -> anyhow::Result<ExitCode> {
    if let Some(how) = settings.coordination.clone() {
        return super::coordinator::run_shard(settings, control, &how);
    }
    let mut outputs = Outputs::open(&settings.outputs)?;
    let (summary, sinks_failed) = measure(&settings, &control, &mut outputs).inspect_err(|e| {
        let target = settings.plan.target.to_string();
        outputs.write_failed_start(settings.name.as_deref(), &settings.call, &target, e)
    })?;
    let mut problems: Vec<anyhow::Error> = outputs.write_reports(&summary);
    problems.extend(outputs.commit());
    // Recorded after the reports, so a history that fails never costs one. A --history asked
    // for is an output like --export: failing it exits 1. The default history is a
    // convenience: failing it (a read-only home, no HOME) is a warning, and the run's exit
    // code stays what the measurement says.
    if let Some(to) = &settings.history {
        if let Err(e) = to.record(&crate::report::json::value(&summary)) {
            match to.explicit() {
                true => problems.push(e),
                false => eprintln!("rpcmeter: warning: {e} (--history PATH records elsewhere, --no-save not at all)"),
            }
        }
    }
    problems.extend(sinks_failed);
    verdict(&summary, problems)
}

/// One run of a series (a sweep's step, a lab's step): no report written, no progress line,
/// not recorded in the history; the series reports. `--csv-details` is kept when
/// `keep_details` (a lab that reads each step's calls), dropped otherwise.
pub fn measure_step(mut settings: Settings, control: &Arc<Control>, keep_details: bool) -> anyhow::Result<Summary> {
    let quiet = OutputSettings {
        format: Format::Table,
        primary: None,
        exports: vec![],
        csv_details: settings.outputs.csv_details.clone().filter(|_| keep_details),
        hdr_log: None,
    };
    settings.outputs = quiet.clone();
    settings.progress = false;
    settings.history = None;
    let mut outputs = Outputs::open(&quiet)?;
    let (summary, _) = measure(&settings, control, &mut outputs)?;
    // The step's --csv-details is read by the lab right after: it must be in place.
    if let Some(failed) = outputs.commit().into_iter().next() {
        return Err(failed);
    }
    Ok(summary)
}

/// The run itself, up to its `Summary`: schema, engine, sinks, the server's count. Writes no
/// report (`run` does; `sweep` gathers the summaries of its steps). The second value is a
/// side output that failed while the run went on.
pub fn measure(
    settings: &Settings,
    control: &Arc<Control>,
    outputs: &mut Outputs,
) -> anyhow::Result<(Summary, Option<anyhow::Error>)> {
    let prepared = (|| {
        if let Some(workload) = &settings.workload {
            return workload_mix(settings, workload, control);
        }
        let method = resolve(settings, control)?;
        let requests = Arc::new(RequestSource::new(&method, &settings.data)?);
        let mut plan = settings.plan.clone();
        plan.spec.path = path(&method)?;
        plan.kind = CallKind::of(method.is_client_streaming(), method.is_server_streaming());
        plan.stream = stream_of(&method, plan.kind, plan.stream, requests.records() as u64)?;
        let mix = engine::Mix::single(plan.spec.path.clone(), requests);
        Ok::<_, anyhow::Error>((method, mix, plan, Vec::new()))
    })();
    let (method, mix, plan, names) = prepared.inspect_err(|_| outputs.discard())?;
    let mix_paths: Vec<http::uri::PathAndQuery> = mix.calls.iter().map(|c| c.path.clone()).collect();

    let mut sinks = Sinks::default();
    if plan.warmup_auto {
        sinks.early = Some(Default::default());
    }
    if settings.progress {
        let planned = plan.stop.duration.map(|d| d.saturating_add(plan.warmup));
        sinks.add(Box::new(Progress::new(planned, plan.threads)));
    }
    if let Some(path) = &settings.outputs.hdr_log {
        let file = outputs.take(path).ok_or_else(|| internal("--hdr-log was not opened"))?;
        sinks.add(Box::new(HdrLog::new(path.clone(), file)?));
    }
    if let Some(path) = &settings.outputs.csv_details {
        let file = outputs.take(path).ok_or_else(|| internal("--csv-details was not opened"))?;
        sinks.add(Box::new(DetailsWriter::start(path.clone(), file, &method)));
    }
    if let Some(addr) = settings.metrics_addr {
        let target = plan.target.to_string();
        // A workload's label is the file, not its first method.
        let call = if names.is_empty() { method.full_name() } else { &settings.call };
        let live = LiveMetrics::start(addr, call, &target, plan.pacer.is_open()).inspect_err(|_| outputs.discard())?;
        eprintln!("rpcmeter: metrics on http://{}/metrics", live.addr);
        if !live.addr.ip().is_loopback() {
            eprintln!("rpcmeter: warning: metrics on {} can be read by anyone who reaches this machine", live.addr);
        }
        sinks.add(Box::new(live));
    }
    let stats = settings.server_stats.then(|| super::server_side::StatsProbe::before(&plan.target)).flatten();
    let started_at = SystemTime::now();
    // Beside the floor: the client's own stalls during the run, to compare with it.
    let hiccups = settings.floor.then(crate::record::hiccup::HiccupMeter::start).flatten();
    let result = engine::run(plan.clone(), mix, &mut sinks, control);
    let hiccups = hiccups.and_then(|meter| meter.stop());
    let finished = sinks.finish();
    let recorded = result.inspect_err(|_| outputs.discard())?;
    let meta = Meta {
        run_id: uuid::Uuid::new_v4(),
        // A shard's clock starts at the shared start: its window begins there (merge places
        // it by this), not while it connected and waited.
        started_at: if plan.start.is_some() { recorded.started_at } else { started_at },
        name: settings.name.clone(),
        tags: settings.tags.clone(),
        arguments: settings.arguments.clone(),
    };
    let mut paths: Vec<&str> = mix_paths.iter().map(|p| p.as_str()).collect();
    // Two names may call one method (with other data): the server counts it once.
    paths.sort_unstable();
    paths.dedup();
    let call = if names.is_empty() { method.full_name() } else { &settings.call };
    let summary = analysis::finish(analysis::Run {
        plan,
        meta,
        call,
        recorded,
        checks: &settings.checks,
        rows: finished.rows,
        early: finished.early.as_ref(),
        call_names: names,
        floor: settings.floor.then(crate::calibrate::cached),
        hiccups: hiccups.as_ref(),
        server: stats.and_then(|probe| probe.read(&paths)),
    });
    Ok((summary, finished.result.err()))
}

/// A workload's calls resolved and checked: the mix, its first method (for what needs one
/// method), the plan, and the calls' names and methods in the mix's order.
#[allow(clippy::type_complexity)]
fn workload_mix(
    settings: &Settings,
    workload: &[crate::load::workload::WorkloadCall],
    control: &Control,
) -> anyhow::Result<(prost_reflect::MethodDescriptor, engine::Mix, Plan, Vec<(String, String)>)> {
    let mut calls = Vec::new();
    let mut methods = Vec::new();
    for call in workload {
        let at = |e: anyhow::Error| {
            // The schema's messages speak of --call; here the method comes from the file.
            let why = format!("{e:#}");
            let why = why.strip_prefix("--call ").map_or(why.clone(), |rest| format!("method {rest}"));
            bad_input(format!("--workload: call {:?}: {why}", call.name))
        };
        let method = resolve_call(settings, &call.method, control).map_err(at)?;
        if method.is_client_streaming() || method.is_server_streaming() {
            return Err(bad_input(format!(
                "--workload: call {:?}: {} is a streaming method; a workload's calls are unary (for now)",
                call.name,
                method.full_name()
            )));
        }
        let requests = Arc::new(RequestSource::new(&method, &call.data).map_err(at)?);
        calls.push(engine::MixCall { path: path(&method)?, requests });
        methods.push(method);
    }
    let weights: Vec<u32> = workload.iter().map(|c| c.weight).collect();
    let pick = match settings.pick_seed {
        Some(seed) => crate::load::workload::Pick::random(&weights, seed),
        None => crate::load::workload::Pick::round_robin(&weights),
    };
    let mut plan = settings.plan.clone();
    plan.spec.path = calls[0].path.clone();
    plan.kind = CallKind::Unary;
    plan.stream = stream_of(&methods[0], plan.kind, plan.stream, 1)?;
    let names = workload.iter().zip(&methods).map(|(c, m)| (c.name.clone(), m.full_name().to_owned())).collect();
    Ok((methods.swap_remove(0), engine::Mix { calls, pick, named: true }, plan, names))
}

/// Exit 0, or one error naming every problem: no answer, every call failed, each breached
/// assertion, each output that could not be written.
pub(crate) fn verdict(summary: &Summary, outputs_failed: Vec<anyhow::Error>) -> anyhow::Result<ExitCode> {
    let mut problems: Vec<String> = Vec::new();
    let c = &summary.requests;
    if c.total == 0 {
        problems.push("no call was answered".into());
    } else if c.ok == 0 {
        let statuses: Vec<String> =
            summary.statuses.nonzero().map(|(code, n)| format!("{} {n}", crate::grpc::status::name(code))).collect();
        problems.push(format!("every call failed ({})", statuses.join(", ")));
    }
    for breach in summary.breached() {
        problems.push(format!("assertion breached: {} (value {})", breach.assertion.text, breach.value));
    }
    problems.extend(outputs_failed.iter().map(|e| format!("{e:#}")));
    match problems.is_empty() {
        true => Ok(ExitCode::SUCCESS),
        // A lone output failure keeps its own class; with other problems, the run failed.
        false if problems.len() == 1 && outputs_failed.len() == 1 => {
            Err(outputs_failed.into_iter().next().expect("one"))
        }
        false => Err(run_failed(problems.join("; "))),
    }
}
