//! `rpcmeter run`: its flags, with ghz's and grpcurl's names. Each value is parsed and bounded
//! here (`cli::parse`); how the flags combine is checked in `run_settings`, which makes them
//! the typed `app::run::Settings`.
use super::parse;
use super::target::CallArgs;
use crate::load::pacer::RateSchedule;
use crate::report::Format;
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// The server: HOST:PORT (also [IPv6]:PORT, dns:///HOST:PORT, ipv4:ADDR:PORT,...,
    /// ipv6:[ADDR]:PORT,... for a list of addresses (--lb), http://HOST:PORT for plaintext,
    /// unix:PATH for a Unix socket; docs/targets.md)
    #[arg(value_parser = parse::target)]
    pub target: parse::TargetText,
    /// The method to call: package.Service/Method (or package.Service.Method)
    #[arg(long)]
    #[arg(help_heading = "What to call")]
    pub call: Option<String>,
    /// A workload from a TOML file, instead of --call and -d/-D: a weighted mix of calls
    /// ([[call]] with name, method, data or data_file, weight) and flows ([[flow]]: steps
    /// whose later calls use what earlier ones captured, with checks on the answers;
    /// docs/workload.md)
    #[arg(long, value_name = "FILE")]
    #[arg(help_heading = "What to call")]
    pub workload: Option<PathBuf>,
    /// `--replay FILE` and its flags (docs/replay.md)
    #[command(flatten, next_help_heading = "Replay a binary log")]
    pub replay: super::replay::ReplayArgs,
    /// The request as JSON (protobuf JSON mapping); an array holds several requests, sent in
    /// turn; string fields may hold templates such as {{.RequestNumber}}
    #[arg(short = 'd', long = "data", conflicts_with = "data_file")]
    #[arg(help_heading = "What to call")]
    pub data: Option<String>,
    /// Requests as JSON from a file ("-": stdin): one object, an array, or one object per
    /// line, sent in turn
    #[arg(short = 'D', long = "data-file")]
    #[arg(help_heading = "What to call")]
    pub data_file: Option<PathBuf>,
    /// How to reach the target and what goes with every call (the group `ping` shares)
    #[command(flatten, next_help_heading = "What to call")]
    pub calls: CallArgs,
    /// Keep the value of this metadata key or tag out of results, history and `kube`'s Job
    /// (repeatable; authorization, cookie and names with token, secret, password, key... are
    /// always kept out)
    #[arg(long, value_name = "KEY", action = clap::ArgAction::Append)]
    #[arg(help_heading = "What to call")]
    pub redact: Vec<String>,
    /// Streaming methods: messages each stream sends (client and bidi streams), or receives
    /// before it is cancelled (server streams); 0 on client and bidi streams: none, the stream
    /// only opens and closes (grpc interop's empty_stream) [default: client and bidi streams
    /// send the -d/-D messages once each]
    #[arg(long)]
    #[arg(help_heading = "Streams")]
    pub stream_call_count: Option<u64>,
    /// Streaming methods: each stream ends after this long (client and bidi streams close
    /// their side; a server stream is cancelled)
    #[arg(long, value_parser = parse::positive_duration)]
    #[arg(help_heading = "Streams")]
    pub stream_call_duration: Option<Duration>,
    /// Client and bidi streams: the time between one message's send and the next
    #[arg(long, value_parser = parse::positive_duration)]
    #[arg(help_heading = "Streams")]
    pub stream_interval: Option<Duration>,
    /// Bidi streams: ping-pong sends each message once the last one's answer came (round
    /// trips measured); free sends on schedule and reads meanwhile, for servers that answer
    /// only once the client closes its side [default: ping-pong]
    #[arg(long, value_enum)]
    #[arg(help_heading = "Streams")]
    pub bidi: Option<BidiMode>,
    /// Streaming methods: the client cancels each stream (RST_STREAM CANCEL) once it is open
    /// (`begin`), once the first response message came (`first-response`; not on client
    /// streams), or this long after it opened; the stream is OK unless the server ended it
    /// first (grpc interop's cancel_after_begin, cancel_after_first_response)
    #[arg(long, value_name = "begin|first-response|DURATION", value_parser = parse::cancel_after)]
    #[arg(help_heading = "Streams")]
    pub cancel_after: Option<crate::grpc::CancelAfter>,
    /// Closed loop: workers, each sending its next call when its last one is answered [default: 8]
    #[arg(short = 'c', long, conflicts_with_all = ["rps", "burst"])]
    #[arg(help_heading = "Load")]
    pub concurrency: Option<u32>,
    /// Stop after this many measured calls
    #[arg(short = 'n', long)]
    #[arg(help_heading = "Load")]
    pub total: Option<u64>,
    /// Stop after this much measured time, e.g. 10s [default: 5s when no other limit is given]
    #[arg(short = 'z', long, value_parser = parse::positive_duration)]
    #[arg(help_heading = "Load")]
    pub duration: Option<Duration>,
    /// Stop after this many measured calls per worker (closed loop)
    #[arg(long = "loop")]
    #[arg(help_heading = "Load")]
    pub loop_count: Option<u64>,
    /// Open loop: R calls/s whatever the server does, or FROM:TO:DURATION for a linear ramp of
    /// the rate; latency counts from each call's intended send time
    #[arg(long, value_parser = parse::rate_schedule, conflicts_with_all = ["burst", "loop_count"], allow_hyphen_values = true)]
    #[arg(help_heading = "Load")]
    pub rps: Option<RateSchedule>,
    /// Open loop: most calls in flight at once; a call due when all are busy is sent late
    /// and counted from its intended time [default: 256]
    #[arg(long)]
    #[arg(help_heading = "Load")]
    pub max_in_flight: Option<u32>,
    /// Bursts: fire N calls at once, wait for all to be answered, repeat --rounds times;
    /// prints each round's time and rate
    #[arg(long, requires = "rounds", conflicts_with_all = ["total", "duration", "loop_count", "ramp"])]
    #[arg(help_heading = "Load")]
    pub burst: Option<u32>,
    /// Bursts: how many rounds
    #[arg(long, requires = "burst")]
    #[arg(help_heading = "Load")]
    pub rounds: Option<u64>,
    /// Load in stages, as k6's: D:V,... each ramping linearly from the previous value to V over
    /// D (0s: a step), from 0; the run lasts their sum. V is a rate (open loop, the default)
    /// or a number of workers (--stages-of workers: closed loop)
    #[arg(long, value_parser = parse::stages, conflicts_with_all = ["rps", "concurrency", "burst", "total", "duration", "loop_count", "ramp"])]
    #[arg(help_heading = "Load")]
    pub stages: Option<crate::load::pacer::Stages>,
    /// What --stages move: the rate of an open loop, or the active workers of a closed loop
    #[arg(long, value_enum, requires = "stages", default_value_t = StagesOf::Rate)]
    #[arg(help_heading = "Load")]
    pub stages_of: StagesOf,
    /// Open loop: how calls arrive around the rate: evenly, or as a Poisson process
    /// (exponential gaps; intended times still exact)
    #[arg(long, value_enum)]
    #[arg(help_heading = "Load")]
    pub arrival: Option<Arrival>,
    /// Seed of --arrival poisson [default: drawn at random, and printed in the JSON result];
    /// with --workload, each call is drawn at random by weight from this seed
    #[arg(long)]
    #[arg(help_heading = "Load")]
    pub seed: Option<u64>,
    /// Closed loop: start the workers evenly over this time
    #[arg(long, value_parser = parse::duration, conflicts_with = "rps")]
    #[arg(help_heading = "Load")]
    pub ramp: Option<Duration>,
    /// Run this long first: measured and shown apart, excluded from the result; `auto`:
    /// exclude the warm-up that steady-state detection finds in the interval series
    #[arg(long, value_parser = parse::warmup, conflicts_with = "burst")]
    #[arg(help_heading = "Warm-up, retries and deadlines")]
    pub warmup: Option<parse::Warmup>,
    /// Retries after the first attempt of a call on a retryable status
    #[arg(long, default_value_t = 0)]
    #[arg(help_heading = "Warm-up, retries and deadlines")]
    pub max_retries: u32,
    /// First backoff before a retry in milliseconds, doubled on each further retry (at most 30 days)
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(0..=parse::MAX_DURATION.as_millis() as u64))]
    #[arg(help_heading = "Warm-up, retries and deadlines")]
    pub retry_ms: u64,
    /// Spread each backoff evenly over [backoff/2, backoff] so that retries do not align
    #[arg(long)]
    #[arg(help_heading = "Warm-up, retries and deadlines")]
    pub retry_jitter: bool,
    /// Statuses that are retried (comma-separated gRPC names)
    #[arg(long, value_delimiter = ',', value_parser = parse::retry_status, default_value = "RESOURCE_EXHAUSTED,UNAVAILABLE")]
    #[arg(help_heading = "Warm-up, retries and deadlines")]
    pub retry_on: Vec<tonic::Code>,
    /// Deadline of each attempt, e.g. 500ms (sent as grpc-timeout and enforced locally)
    #[arg(long, value_parser = parse::positive_duration)]
    #[arg(help_heading = "Warm-up, retries and deadlines")]
    pub deadline: Option<Duration>,
    /// HTTP/2 connections; calls are spread over them
    #[arg(long, default_value_t = 1)]
    #[arg(help_heading = "Connections")]
    pub connections: u32,
    /// Load balancing over the target's addresses, by gRPC's policy names: round_robin
    /// opens --connections to every address and spreads calls over the ready ones in turn
    /// (docs/targets.md)
    #[arg(long, value_enum, default_value_t = crate::grpc::Lb::PickFirst)]
    #[arg(help_heading = "Connections")]
    pub lb: crate::grpc::Lb,
    /// Client threads, each owning its connections [default: one per connection, at most the cores]
    #[arg(long)]
    #[arg(help_heading = "Connections")]
    pub threads: Option<u32>,
    /// Report format
    #[arg(long, value_enum, default_value_t = Format::Table)]
    #[arg(help_heading = "Output")]
    pub format: Format,
    /// Write the report to this file instead of standard output
    #[arg(short = 'o', long)]
    #[arg(help_heading = "Output")]
    pub output: Option<PathBuf>,
    /// Also write the report in another format to a file, e.g. json=run.json (repeatable)
    #[arg(long, value_parser = export)]
    #[arg(help_heading = "Output")]
    pub export: Vec<(Format, PathBuf)>,
    /// One CSV row per call (msg,key,version,timestamp,latency_ns,bytes,success,status,...), streamed
    #[arg(long)]
    #[arg(help_heading = "Output")]
    pub csv_details: Option<PathBuf>,
    /// With --csv-details: a column of each call's response header KEY (repeatable)
    #[arg(long, value_name = "KEY", requires = "csv_details")]
    #[arg(help_heading = "Output")]
    pub csv_details_header: Vec<String>,
    /// With --csv-details: a column of each call's response trailer KEY (repeatable)
    #[arg(long, value_name = "KEY", requires = "csv_details")]
    #[arg(help_heading = "Output")]
    pub csv_details_trailer: Vec<String>,
    /// HdrHistogram interval log of call latency (ns recorded, ms in HdrHistogram's tools)
    #[arg(long)]
    #[arg(help_heading = "Output")]
    pub hdr_log: Option<PathBuf>,
    /// Checks such as 'p99<10ms,p99.9<50ms,error_rate<1%,rps>=1000'; a breach exits 1
    #[arg(long)]
    #[arg(help_heading = "Output")]
    pub assert: Option<String>,
    /// A name for this run, carried into its results
    #[arg(long)]
    #[arg(help_heading = "Output")]
    pub name: Option<String>,
    /// A KEY=VALUE label carried into the results (repeatable)
    #[arg(long, value_parser = parse::key_value)]
    #[arg(help_heading = "Output")]
    pub tag: Vec<(String, String)>,
    /// Do not record this run in the history (`rpcmeter history`)
    #[arg(long, conflicts_with = "history")]
    #[arg(help_heading = "Output")]
    pub no_save: bool,
    /// The history this run is recorded in [default: $XDG_DATA_HOME/rpcmeter/history.sqlite3,
    /// else ~/.local/share/rpcmeter/history.sqlite3]
    #[arg(long, value_name = "PATH")]
    #[arg(help_heading = "Output")]
    pub history: Option<PathBuf>,
    #[command(flatten, next_help_heading = "Output")]
    pub input: crate::input::InputArgs,
    /// Serve live Prometheus metrics on HOST:PORT/metrics during the run (port 0: any free
    /// port, printed on stderr); updated every --interval, closed when the run ends
    /// (`:PORT`: every interface, as Prometheus exporters take it)
    #[arg(long, value_name = "HOST:PORT", value_parser = parse::listen_addr, conflicts_with = "shards")]
    #[arg(help_heading = "Output")]
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// Length of the intervals of progress, CSV rows and HDR log
    #[arg(long, value_parser = parse::positive_duration, default_value = "1s")]
    #[arg(help_heading = "Output")]
    pub interval: Duration,
    /// Longest wait for calls in flight after the end or the first Ctrl-C
    #[arg(long, value_parser = parse::duration, default_value = "5s")]
    #[arg(help_heading = "Output")]
    pub drain: Duration,
    /// Leave out the machine's floor (from `rpcmeter calibrate`'s cache) beside the results
    #[arg(long)]
    #[arg(help_heading = "Output")]
    pub no_calibrate: bool,
    /// Do not read the target's rpcmeter.lab.v1.Stats before and after the run (when it serves them) to show
    /// the server's own count beside the client's
    #[arg(long)]
    #[arg(help_heading = "Output")]
    pub no_server_stats: bool,
    /// Run only share I of N (I from 0) of the load the other flags describe as a whole:
    /// rate/N with the whole schedule's intended times interleaved, workers/N, -n/N; the
    /// shards' results merge exactly (`rpcmeter merge`)
    #[arg(long, value_parser = parse::shard, conflicts_with = "burst")]
    #[arg(help_heading = "Shards")]
    pub shard: Option<crate::load::plan::ShardOf>,
    /// Start the clock at this wall-clock time (Unix seconds, or RFC 3339), so that shards on
    /// several machines start together
    #[arg(long, value_parser = parse::start_at)]
    #[arg(help_heading = "Shards")]
    pub start_at: Option<std::time::SystemTime>,
    /// With --shard: meet the other shards at HOST:PORT and start together once all have joined
    /// (shard 0 listens there, port 0: any free port, printed on stderr; the others connect);
    /// shard 0 prints the merged result of all shards, the others one line on stderr
    #[arg(long, value_name = "HOST:PORT", requires = "shard", conflicts_with_all = ["shards", "start_at", "export"])]
    #[arg(help_heading = "Shards")]
    pub coordinator: Option<String>,
    /// With --coordinator: the file holding the run's secret, the same on every shard (else
    /// the environment's RPCMETER_COORDINATOR_SECRET; one of them is needed)
    #[arg(long, value_name = "FILE", requires = "coordinator")]
    pub coordinator_secret_file: Option<PathBuf>,
    /// As --coordinator, never listening: `run --shards`' own shards join their parent
    #[arg(long, value_name = "HOST:PORT", hide = true, requires = "shard", conflicts_with_all = ["coordinator", "start_at"])]
    #[arg(help_heading = "Shards")]
    pub join: Option<String>,
    /// How long shards of a --coordinator run wait for all of them to join
    #[arg(long, value_parser = parse::positive_duration, default_value = "60s")]
    #[arg(help_heading = "Shards")]
    pub join_timeout: Duration,
    /// Split the load over N local processes (shards) and print their merged result
    #[arg(long, value_parser = parse::shard_count, conflicts_with_all = ["shard", "burst", "csv_details", "hdr_log", "export"])]
    #[arg(help_heading = "Shards")]
    pub shards: Option<u32>,
    /// No progress (on a terminal a redrawn line; elsewhere a plain line every 10 s)
    #[arg(short = 'q', long)]
    #[arg(help_heading = "Output")]
    pub quiet: bool,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum StagesOf {
    Rate,
    Workers,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Arrival {
    Uniform,
    Poisson,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BidiMode {
    PingPong,
    Free,
}

/// `run`'s flags as clap declares them, for reading and rewriting the words of a `run`.
pub fn command() -> clap::Command {
    RunArgs::augment_args(clap::Command::new("run"))
}

/// `run`'s flags alone, for the subcommands that run a `run` of their own (demo, kube, sweep).
#[derive(clap::Parser)]
struct RunOnly {
    #[command(flatten)]
    args: RunArgs,
}

/// Reads `run`'s flags from words as `rpcmeter run` would (the first word is the program's);
/// a usage error is clap's, shortened to one line as every usage error is (`cli::one_line`).
pub fn parse_words<I, T>(words: I) -> anyhow::Result<RunArgs>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    <RunOnly as clap::Parser>::try_parse_from(words)
        .map(|r| r.args)
        .map_err(|e| crate::error::bad_input(super::one_line(&e)))
}

/// `run`'s words (the first is the program's) read as `rpcmeter run` reads them, into its
/// settings (the words after the first recorded as its arguments); a usage error in one line.
pub fn settings_of_words(words: &[String]) -> anyhow::Result<crate::app::run::Settings> {
    let parsed = parse_words(words)?;
    parsed.settings(words.get(1..).unwrap_or_default().to_vec())
}

/// `run RUN-ARGS...` given after another subcommand's own flags (`kube`, `sweep`), with `extra`
/// flags appended; a usage error names `what` in one line.
pub fn nested(what: &str, words: &[String], extra: &[String]) -> anyhow::Result<RunArgs> {
    use crate::error::bad_input;
    if words.first().map(String::as_str) != Some("run") {
        return Err(bad_input(format!(
            "{what}: give the run after the {what} flags: rpcmeter {what} ... run RUN-ARGS..."
        )));
    }
    parse_words(words.iter().chain(extra)).map_err(|e| bad_input(format!("{what} run: {e:#}")))
}

/// `FORMAT=FILE` for --export.
fn export(text: &str) -> Result<(Format, PathBuf), String> {
    use clap::ValueEnum;
    let (format, path) =
        text.split_once('=').ok_or_else(|| format!("{text:?}: expected FORMAT=FILE (e.g. json=run.json)"))?;
    let format = Format::from_str(format, true).map_err(|_| {
        format!("{format:?}: unknown format (table, json, csv, rmeter, prometheus, influx, junit, html)")
    })?;
    if path.is_empty() {
        return Err(format!("{text:?}: no file after ="));
    }
    let path = PathBuf::from(path);
    // Never a text table in a page's file (`-o FILE.html` draws the page).
    if format == Format::Table && super::run_settings::html_path(&path) {
        return Err(format!("{text:?}: the table is text, not a page: give html={}", path.display()));
    }
    Ok((format, path))
}
