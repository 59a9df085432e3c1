//! `run`'s flags -> `app::run::Settings`: every check of how the flags combine, before the
//! network is touched. Not only the flags are read: `settings` reads the workload file
//! (`--workload`, checked whole here; its data files are read when the run resolves its
//! calls), the `--replay` log (read whole once, `source::Log`: its methods and calls for the
//! run, its mean rate for the plan; the run reads it again call by call; a sweep's steps and
//! `run --shards`' shards take the first reading's scan), standard input (that scan, in a
//! shard: `--replay-scan-stdin`), the memory free
//! (/proc/meminfo, for the calls asked to be in flight at once), the cores (std's
//! `available_parallelism`, which reads the cgroup's CPU quota), the clock (`--start-at`)
//! and the system's random source (a Poisson seed); a coordinated run's `fingerprint` reads
//! the files its flags name (`FILE_VALUED`) and `credentials` the secret file. It stands in
//! the command line's layer so that `app` takes typed settings and never reads a flag struct.
use super::parse::TargetText;
use super::run::{self as flags, RunArgs, StagesOf};
use super::target::{CallArgs, Compression};
use crate::app::coordinator::trust::{Credentials, Fingerprint, Secret};
use crate::app::outputs::OutputSettings;
use crate::app::run::{Coordination, Settings};
use crate::error::bad_input;
use crate::grpc::tls::TlsOptions;
use crate::grpc::transport::{Bidi, StreamLimits, KEEPALIVE_TIMEOUT};
use crate::grpc::{CallOptions, Target};
use crate::load::pacer::{Arrival, Pacer, RateSchedule, Stages};
use crate::load::plan::{Plan, ShardOf, StopAt};
use crate::load::retry::RetryPolicy;
use crate::load::workload::Workload;
use crate::record::resource;
use crate::replay::source::{Log, Scan};
use crate::report::Format;
use crate::schema::{self, DataSource, SchemaSource};
use crate::sink::details::MetadataColumn;
use crate::sink::progress::Style as ProgressStyle;
use crate::stats::assertions;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Memory one call in flight may take (its worker, h2 stream, buffers), for the up-front
/// check that the calls asked for can be in flight at once: measured at about 8.5 KiB.
const MEMORY_PER_CALL: u64 = 16 << 10;

/// What the call flags make of a target: where and how to call, and what goes with each call.
pub struct CallParts {
    pub target: Target,
    pub metadata: http::HeaderMap,
    pub schema: SchemaSource,
    /// What goes with each call but its method's path, which the schema gives.
    pub call: CallOptions,
}

impl CallArgs {
    /// These flags applied to the target `text`, each call with `deadline`.
    pub fn parts(&self, text: &TargetText, deadline: Option<Duration>) -> anyhow::Result<CallParts> {
        if text.userinfo {
            return Err(bad_input(format!(
                "target {}@{}:{}: a gRPC target takes no USER:PASS@ (send credentials as metadata: \
                 -m '{{\"authorization\": \"Basic ...\"}}')",
                crate::app::redact::REDACTED,
                text.host,
                text.port
            )));
        }
        let plaintext = match text.scheme_plaintext {
            Some(false) if self.tls.plaintext => return Err(bad_input("target https://... and --plaintext disagree")),
            Some(scheme) => scheme || self.tls.plaintext,
            None => self.tls.plaintext,
        };
        let tls = (!plaintext).then(|| TlsOptions {
            cacert: self.tls.cacert.clone(),
            cert: self.tls.cert.clone(),
            key: self.tls.key.clone(),
            servername: self.tls.servername.clone(),
            skip_verify: self.tls.skip_verify,
        });
        let target = Target {
            host: text.host.clone(),
            port: text.port,
            tls,
            authority: self.authority.clone(),
            connect_timeout: self.connect_timeout,
            keepalive: self.keepalive,
            keepalive_timeout: self.keepalive_timeout.unwrap_or(KEEPALIVE_TIMEOUT),
            unix: text.unix.clone(),
            addresses: text.addresses.clone(),
            lb: Default::default(),
        };
        let metadata = self.metadata.as_deref().map(schema::metadata).transpose()?.unwrap_or_default();
        let schema = match (&self.schema.proto, &self.schema.protoset) {
            (Some(file), _) => {
                SchemaSource::Proto { file: file.clone(), import_paths: self.schema.import_paths.clone() }
            }
            (None, Some(set)) => SchemaSource::Protoset(set.clone()),
            (None, None) => {
                // Reflection gets -m, and --reflect-metadata on top (its keys replace -m's), as ghz.
                let mut reflect = metadata.clone();
                if let Some(json) = &self.reflect_metadata {
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
        let call = CallOptions {
            metadata: metadata.clone(),
            deadline,
            messages: crate::grpc::transport::MessageOptions {
                send: self.max_msg_size as usize,
                receive: self.max_msg_size as usize,
                gzip: self.compression == Some(Compression::Gzip),
            },
        };
        Ok(CallParts { target, metadata, schema, call })
    }
}

impl RunArgs {
    /// The run these flags describe, checked; `arguments` are its words as given (a result
    /// records them, redacted).
    pub fn settings(&self, arguments: Vec<String>) -> anyhow::Result<Settings> {
        self.settings_scanned(arguments, self.replay.passed_scan()?)
    }

    /// `settings`, the `--replay` log's scan given (`scanned`: made of the same file by a
    /// sweep's first step, or passed by the parent of `run --shards`) rather than read again.
    pub fn settings_scanned(&self, arguments: Vec<String>, scanned: Option<Arc<Scan>>) -> anyhow::Result<Settings> {
        let args = self;
        let coordination = coordination(args)?;
        let redactor = crate::app::redact::Redactor::new(&args.redact);
        let CallParts { mut target, metadata, schema, call: options } =
            args.calls.parts(&args.target, args.deadline)?;
        target.lb = args.lb;
        if target.unix.is_some() && args.lb == crate::grpc::Lb::RoundRobin {
            return Err(bad_input(format!(
                "--lb round_robin: {} is one Unix socket, one backend (round_robin balances a host name's or an ipv4:/ipv6: list's addresses)",
                target
            )));
        }
        let replay = args.replay.settings(replay_scheduled(args), &args.redact)?;
        let call = called(args, replay.as_ref())?;
        let checks = args.assert.as_deref().map(assertions::parse).transpose()?.unwrap_or_default();
        let workload = workload(args, &checks)?;
        let data = match (&args.data, &args.data_file) {
            (Some(json), _) => DataSource::Json(json.clone()),
            (None, Some(file)) => DataSource::File(file.clone()),
            (None, None) => DataSource::Empty,
        };
        // Read whole, once, before the plan: on its own schedule the log's mean rate is the plan's.
        let replay = replay.map(|replay| Log::read_unless_scanned(replay, scanned)).transpose()?;
        let plan = plan(args, target, options, replay.as_ref())?;
        Ok(Settings {
            schema,
            call,
            replay,
            pick_seed: args.seed.filter(|_| workload.is_some()),
            workload,
            data,
            metadata,
            deadline: args.deadline,
            plan,
            stream: stream_flags(args),
            outputs: OutputSettings {
                format: primary_format(args.format, args.output.as_deref()),
                primary: args.output.clone(),
                exports: args.export.clone(),
                csv_details: args.csv_details.clone(),
                hdr_log: args.hdr_log.clone(),
            },
            csv_metadata: csv_metadata(args),
            checks,
            progress: ProgressStyle::of_stderr(args.quiet),
            floor: !args.no_calibrate,
            server_stats: !args.no_server_stats,
            name: args.name.clone(),
            // Results, history and reports are shared; credentials stay with the run.
            tags: redactor.tags(&args.tag),
            arguments: redactor.arguments(arguments, [&args.calls.metadata, &args.calls.reflect_metadata], &args.tag),
            history: crate::history::SaveTo::from_flags(args.no_save, args.history.as_deref()),
            metrics_addr: args.metrics_addr,
            coordination,
        })
    }
}

/// The words naming what the run calls: the method (`--call`), `workload FILE` or `replay FILE`.
fn called(args: &RunArgs, replay: Option<&crate::replay::source::Settings>) -> anyhow::Result<String> {
    match (&args.call, &args.workload, replay) {
        (None, None, Some(replay)) => Ok(format!("replay {}", replay.file.display())),
        (Some(call), None, _) => Ok(call.clone()),
        (None, Some(file), _) => Ok(format!("workload {}", file.display())),
        (Some(_), Some(_), _) => {
            Err(bad_input("--call and --workload together: the workload file names each call's method"))
        }
        (None, None, None) => Err(bad_input("--call METHOD (or --workload FILE) is required")),
    }
}

/// `--workload`, read and checked (load/workload.rs), and the flags that go with it or not:
/// -d/-D (each call gives its own data), --seed, `--assert checks...` (`checks`).
fn workload(args: &RunArgs, checks: &[assertions::Assertion]) -> anyhow::Result<Option<Workload>> {
    let workload = args.workload.as_deref().map(crate::load::workload::read).transpose()?;
    if workload.is_some() && (args.data.is_some() || args.data_file.is_some()) {
        return Err(bad_input("-d/-D and --workload together: each [[call]] of the workload gives its own data"));
    }
    if args.seed.is_some() && args.arrival.is_none() && workload.is_none() {
        return Err(bad_input("--seed applies to --arrival poisson or to --workload"));
    }
    let has_checks = workload.as_ref().is_some_and(Workload::has_checks);
    if checks.iter().any(|a| a.metric == assertions::Metric::Checks) && !has_checks {
        return Err(bad_input("--assert checks...: no [[call]] of a --workload has a check to count"));
    }
    Ok(workload)
}

/// `--csv-details-header` and `--csv-details-trailer`: the metadata columns, keys lowercased.
fn csv_metadata(args: &RunArgs) -> Vec<MetadataColumn> {
    let headers = args.csv_details_header.iter().map(|k| MetadataColumn::Header(k.to_ascii_lowercase()));
    let trailers = args.csv_details_trailer.iter().map(|k| MetadataColumn::Trailer(k.to_ascii_lowercase()));
    headers.chain(trailers).collect()
}

fn positive(flag: &str, n: u64) -> anyhow::Result<u64> {
    if n == 0 {
        Err(bad_input(format!("{flag} must be at least 1")))
    } else {
        Ok(n)
    }
}

/// `--coordinator` (or `run --shards`' `--join`): where the shards meet.
fn coordination(args: &RunArgs) -> anyhow::Result<Option<Coordination>> {
    let (addr, listen) = match (&args.coordinator, &args.join) {
        (Some(addr), _) => (addr.clone(), args.shard.is_some_and(|s| s.index == 0)),
        (None, Some(addr)) => (addr.clone(), false),
        (None, None) => return Ok(None),
    };
    if !addr.rsplit_once(':').is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok()) {
        return Err(bad_input(format!("--coordinator {addr}: not HOST:PORT")));
    }
    Ok(Some(Coordination {
        addr,
        listen,
        join_timeout: args.join_timeout,
        progress: ProgressStyle::of_stderr(args.quiet),
    }))
}

/// What a shard of a coordinated run proves at the door: the run's secret (from
/// `--coordinator-secret-file` or the environment: refused without) and its fingerprint.
pub fn credentials(args: &RunArgs, arguments: &[String]) -> anyhow::Result<Credentials> {
    let secret = Secret::from_file_or_env(args.coordinator_secret_file.as_deref())?;
    Ok(Credentials { secret, fingerprint: fingerprint(arguments)? })
}

/// `run`'s flags that are a shard's own (which shard, where it meets the others, its outputs,
/// its machine's files and identity) or the whole run's judge's (`--assert`, judged once on
/// the merged result): left out of the run's fingerprint.
const NOT_FINGERPRINTED: [&str; 30] = [
    "shard",
    "shards",
    "replay_scan_stdin",
    "start_at",
    "coordinator",
    "coordinator_secret_file",
    "join",
    "join_timeout",
    "format",
    "output",
    "export",
    "csv_details",
    "csv_details_header",
    "csv_details_trailer",
    "hdr_log",
    "history",
    "no_save",
    "quiet",
    "name",
    "tag",
    "redact",
    "metrics_addr",
    "no_calibrate",
    "no_server_stats",
    "max_input_size",
    "cert",
    "key",
    "cacert",
    "import_paths",
    "assert",
];

/// Flags whose value is a file: its content is what the run uses (the same file may lie at
/// other paths on other machines).
const FILE_VALUED: [&str; 4] = ["proto", "protoset", "workload", "data_file"];

/// The run's fingerprint from its command line (`arguments`, after the program's name): every
/// flag of `run` with its value (given or default, files by their content), less
/// `NOT_FINGERPRINTED`, and the rpcmeter version.
pub fn fingerprint(arguments: &[String]) -> anyhow::Result<Fingerprint> {
    use clap::CommandFactory;
    let command = super::Cli::command();
    let matches = command
        .clone()
        .try_get_matches_from(std::iter::once("rpcmeter".to_string()).chain(arguments.iter().cloned()))
        .map_err(|e| bad_input(super::one_line(&e)))?;
    let run = matches.subcommand_matches("run").ok_or_else(|| bad_input("not a run"))?;
    let run_command = command.find_subcommand("run").ok_or_else(|| bad_input("not a run"))?;
    let mut values: std::collections::BTreeMap<String, Vec<u8>> = std::collections::BTreeMap::new();
    values.insert("(rpcmeter version)".into(), env!("CARGO_PKG_VERSION").into());
    for id in run.ids().map(|id| id.as_str()).filter(|id| !NOT_FINGERPRINTED.contains(id)) {
        let Some(arg) = run_command.get_arguments().find(|a| a.get_id() == id) else { continue };
        let Ok(Some(raw)) = run.try_get_raw(id) else { continue };
        let mut value = Vec::new();
        for (i, word) in raw.enumerate() {
            if i > 0 {
                value.push(0);
            }
            let content = FILE_VALUED.contains(&id).then(|| std::fs::read(word).ok()).flatten();
            value.extend(content.unwrap_or_else(|| word.as_encoded_bytes().to_vec()));
        }
        let flag = match (arg.get_long(), arg.get_short()) {
            (Some(long), _) => format!("--{long}"),
            (None, Some(short)) => format!("-{short}"),
            (None, None) => id.to_uppercase(),
        };
        values.insert(flag, value);
    }
    Ok(Fingerprint::of(values))
}

/// `--replay` without another load model (-c, --rps, --stages, --burst): an open loop whose
/// schedule is the log's own.
fn replay_scheduled(args: &RunArgs) -> bool {
    args.replay.replay.is_some()
        && args.concurrency.is_none()
        && args.rps.is_none()
        && args.stages.is_none()
        && args.burst.is_none()
}

/// How the load flags combine into a Plan; every limit that cannot be met is refused here.
/// In the order each step needs the one before: when it starts and stops, how calls are
/// paced (and so how many may be in flight), the workers, threads and connections, the ramp.
fn plan(args: &RunArgs, target: Target, call: CallOptions, replay: Option<&Log>) -> anyhow::Result<Plan> {
    let shard = args.shard.unwrap_or_default();
    check_start_at(args.start_at)?;
    let connections = positive("--connections", args.connections as u64)? as u32;
    let (warmup, warmup_auto) = match args.warmup {
        Some(super::parse::Warmup::Fixed(d)) => (d, false),
        Some(super::parse::Warmup::Auto) => (Duration::ZERO, true),
        None => (Duration::ZERO, false),
    };
    let mut stop = stop_at(args, shard, warmup)?;
    let Paced { pacer, asked, mut active_workers } = paced(args, shard, &mut stop, replay)?;
    // The log's schedule ends with the log (unless --replay-loop: then -z, -n or Ctrl-C).
    if stop.total.is_none() && stop.per_worker.is_none() && stop.duration.is_none() && !replay_scheduled(args) {
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
        check_memory(workers)?;
    }
    let threads = threads(args.threads, connections, workers)?;
    if let Some(ramp) = ramp(args, &stop, shard, workers)? {
        active_workers = Some(ramp);
    }
    if args.interval < Duration::from_millis(10) {
        return Err(bad_input("--interval must be at least 10ms"));
    }
    Ok(Plan {
        target,
        call,
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

/// `--start-at` must lie ahead on this machine's clock.
fn check_start_at(start_at: Option<SystemTime>) -> anyhow::Result<()> {
    match start_at.map(|at| SystemTime::now().duration_since(at)) {
        Some(Ok(late)) => Err(bad_input(format!(
            "--start-at: the clock is already {:.3} s past it (clocks of the shards' machines must agree)",
            late.as_secs_f64()
        ))),
        _ => Ok(()),
    }
}

/// The limits the flags set (-n as this shard's share, --loop, -z); `--stages` last as long
/// as they do. A burst's total is its rounds' (`paced`); no limit at all is 5 s (`plan`).
fn stop_at(args: &RunArgs, shard: ShardOf, warmup: Duration) -> anyhow::Result<StopAt> {
    let mut stop = StopAt {
        total: args.total.map(|n| positive("-n/--total", n)).transpose()?.map(|n| shard.share(n)),
        per_worker: args.loop_count.map(|n| positive("--loop", n)).transpose()?,
        duration: args.duration,
    };
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
    Ok(stop)
}

/// How calls are paced, and what that asks of the workers.
struct Paced {
    pacer: Pacer,
    /// This shard's calls in flight at most: -c, --max-in-flight, the stages' peak, a burst.
    asked: u64,
    /// `--stages` of workers: how many are active over time.
    active_workers: Option<Stages>,
}

/// The load model the flags choose (open loop, stages of workers, bursts, closed loop); a
/// burst sets the run's total (`stop`).
fn paced(args: &RunArgs, shard: ShardOf, stop: &mut StopAt, replay: Option<&Log>) -> anyhow::Result<Paced> {
    let open_rate = open_rate(args, shard, replay)?;
    let (pacer, asked, active_workers) = match (open_rate, args.burst, &args.stages) {
        (Some((rate, arrival)), _, _) => {
            let asked = positive("--max-in-flight", args.max_in_flight.unwrap_or(256) as u64)?;
            (Pacer::Open(rate, arrival), asked, None)
        }
        (None, None, Some(stages)) => {
            if let Some((_, n)) = stages.targets().find(|(_, n)| n.fract() != 0.0 || *n > u32::MAX as f64) {
                return Err(bad_input(format!(
                    "--stages {stages}: {n} workers is not a whole number up to {}",
                    u32::MAX
                )));
            }
            let peak = positive("--stages: the most workers of any stage", stages.peak() as u64)?;
            (Pacer::Closed, peak, Some(stages.clone()))
        }
        (None, Some(size), _) => {
            let size = positive("--burst", size as u64)?;
            let rounds = positive("--rounds", args.rounds.unwrap_or(1))?;
            stop.total = Some(
                size.checked_mul(rounds)
                    .ok_or_else(|| bad_input("--burst x --rounds is more calls than can be counted"))?,
            );
            (Pacer::Burst { size }, size, None)
        }
        (None, None, None) => {
            (Pacer::Closed, positive("-c/--concurrency", args.concurrency.unwrap_or(8) as u64)?, None)
        }
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
    Ok(Paced { pacer, asked, active_workers })
}

/// An open loop's rate and arrivals (--rps, --stages of rates, a replayed log's schedule),
/// or None: the flags that apply only to an open loop are refused without one.
fn open_rate(args: &RunArgs, shard: ShardOf, replay: Option<&Log>) -> anyhow::Result<Option<(RateSchedule, Arrival)>> {
    let open_rate = match (replay.and_then(Log::scheduled_rate), &args.rps, &args.stages, args.stages_of) {
        (Some(logged), _, _, _) => Some(RateSchedule::constant(logged)),
        (None, Some(rate), _, _) => Some(rate.clone()),
        (None, None, Some(stages), StagesOf::Rate) => Some(RateSchedule::stages(stages.clone())),
        _ => None,
    };
    if replay_scheduled(args) && args.arrival.is_some() {
        return Err(bad_input(
            "--arrival: the log's own schedule says when each call is sent (with --rps or --stages it is a pool of calls)",
        ));
    }
    if open_rate.is_none() && args.max_in_flight.is_some() {
        return Err(bad_input("--max-in-flight applies to an open loop (--rps, or --stages of rates)"));
    }
    if open_rate.is_none() && args.arrival.is_some() {
        return Err(bad_input("--arrival applies to an open loop (--rps, or --stages of rates)"));
    }
    if args.arrival == Some(flags::Arrival::Poisson)
        && args.seed.is_none()
        && !shard.is_whole()
        && args.start_at.is_none()
    {
        return Err(bad_input(
            "--shard with --arrival poisson needs --seed (or --start-at): every shard must draw the same arrivals",
        ));
    }
    let arrival = match args.arrival {
        _ if replay_scheduled(args) => Arrival::Logged,
        None | Some(flags::Arrival::Uniform) => Arrival::Uniform,
        Some(flags::Arrival::Poisson) => {
            Arrival::Poisson { seed: args.seed.unwrap_or_else(|| default_seed(args.start_at)) }
        }
    };
    Ok(open_rate.map(|rate| (rate, arrival)))
}

/// Refuses `workers` calls in flight at once when they would take more than half the memory
/// this machine has free (`MEMORY_PER_CALL` each).
fn check_memory(workers: u32) -> anyhow::Result<()> {
    let Some(available) = resource::memory_available_bytes() else { return Ok(()) };
    let needed = workers as u64 * MEMORY_PER_CALL;
    if needed > available / 2 {
        return Err(bad_input(format!(
            "{} calls in flight at once would need about {} MiB, more than half of the {} MiB this machine has free",
            workers,
            needed >> 20,
            available >> 20
        )));
    }
    Ok(())
}

/// `--threads`, or one per connection up to the cores and the workers: each thread owns at
/// least one connection and one worker; more would sit idle.
fn threads(asked: Option<u32>, connections: u32, workers: u32) -> anyhow::Result<u32> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    let threads = match asked {
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
    Ok(threads)
}

/// `--ramp D`: the workers of the whole run (every shard's) from 0 to all of them over D,
/// which must end before -z does.
fn ramp(args: &RunArgs, stop: &StopAt, shard: ShardOf, workers: u32) -> anyhow::Result<Option<Stages>> {
    let ramp = args.ramp.unwrap_or_default();
    if ramp.is_zero() {
        return Ok(None);
    }
    if let Some(d) = stop.duration.filter(|d| ramp >= *d) {
        return Err(bad_input(format!(
            "--ramp {} is not shorter than -z {}: the last workers would never start",
            humantime::format_duration(ramp),
            humantime::format_duration(d)
        )));
    }
    let whole = if shard.is_whole() { workers } else { args.concurrency.unwrap_or(8) };
    Ok(Some(Stages::new(0.0, &[(ramp, whole as f64)])))
}

/// The stream flags as given; the schema tells each method's kind, against which
/// `stage::stream_of` checks them.
fn stream_flags(args: &RunArgs) -> StreamLimits {
    StreamLimits {
        count: args.stream_call_count,
        duration: args.stream_call_duration,
        interval: args.stream_interval.unwrap_or_default(),
        bidi: match args.bidi {
            Some(flags::BidiMode::Free) => Bidi::Free,
            Some(flags::BidiMode::PingPong) | None => Bidi::PingPong,
        },
        cancel: args.cancel_after,
    }
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

/// `-o FILE.html` draws the HTML report, as a user of ghz's `-O html` expects, unless
/// `--format` names a format other than the default table. The commands with a page of their
/// own (compare, history, ping, sweep) decide the same way.
pub fn primary_format(format: Format, output: Option<&std::path::Path>) -> Format {
    match format {
        Format::Table if output.is_some_and(html_path) => Format::Html,
        other => other,
    }
}

/// A file named for a page: `.html` or `.htm`, in any case.
pub fn html_path(path: &std::path::Path) -> bool {
    path.extension().is_some_and(|e| e.eq_ignore_ascii_case("html") || e.eq_ignore_ascii_case("htm"))
}

#[cfg(test)]
mod tests {
    use crate::load::pacer::{Arrival, Pacer, RateSchedule};
    use crate::replay::log::tests::{encode, unary};
    use crate::replay::log::Framing;

    /// The plan of `run --replay LOG` and `extra` flags, LOG 11 calls 100 ms apart (10 calls/s).
    fn plan_of(extra: &[&str]) -> crate::load::plan::Plan {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("calls.binlog");
        let calls: Vec<_> = (0..11).flat_map(|i| unary(i + 1, i * 100_000_000, "/A/b", b"hi", 500, 0)).collect();
        std::fs::write(&log, encode(&calls, Framing::Be32)).unwrap();
        let log = log.to_str().unwrap();
        let words: Vec<String> = [&["rpcmeter", "--plaintext", "--replay", log], extra, &["127.0.0.1:1"]]
            .concat()
            .iter()
            .map(|w| w.to_string())
            .collect();
        super::super::run::settings_of_words(&words).unwrap().plan
    }

    #[test]
    fn a_replay_on_the_logs_schedule_is_planned_at_the_logs_rate() {
        assert_eq!(plan_of(&[]).pacer, Pacer::Open(RateSchedule::constant(10.0), Arrival::Logged));
        assert_eq!(plan_of(&["--speed", "2"]).pacer, Pacer::Open(RateSchedule::constant(20.0), Arrival::Logged));
        // A pool of calls is paced by the flags.
        assert_eq!(plan_of(&["-c", "2"]).pacer, Pacer::Closed);
    }
}
