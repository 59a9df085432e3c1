//! The `Summary`: a finished run's numbers, in the model's units (Durations, bytes, counts),
//! as the analysis (this module's parent) leaves them for the renderers (src/report).
use super::notices::Notice;
use super::steady::SteadyState;
use crate::grpc::status::PerStatus;
use crate::grpc::transport::CallKind;
use crate::load::pacer::{Pacer, Stages};
use crate::record::intervals::IntervalRow;
use crate::result::Ended;
use crate::stats::steady::Steadiness;
use crate::stats::Latency;
use std::time::{Duration, SystemTime};
use tonic::Code;

/// What the run was and why it ended, carried into results so that a file explains itself.
#[derive(Debug, Clone)]
pub struct Meta {
    /// A fresh UUID v4 per run (per shard of a sharded run), so that `merge` can refuse the
    /// same run given twice.
    pub run_id: uuid::Uuid,
    pub started_at: SystemTime,
    /// `--name`.
    pub name: Option<String>,
    /// `--tag k=v`, in the order given.
    pub tags: Vec<(String, String)>,
    /// The command line as given (after the program name).
    pub arguments: Vec<String>,
}

#[derive(Debug, Clone, Default)]
pub struct Requests {
    pub total: u64,
    pub ok: u64,
    pub failed: u64,
    pub retries: u64,
    pub attempts: u64,
    /// Calls that still failed after their last allowed retry (rmeter's RetryMax).
    pub retry_exhausted: u64,
    /// Calls started but never answered (abandoned at a hard stop); not in `total`.
    pub abandoned: u64,
    /// Open loop: calls due before the end that were never sent; not in `total`.
    pub unsent: u64,
}

#[derive(Debug, Clone)]
pub struct Client {
    /// Scheduler hiccups of the client during the run (record::hiccup), when measured.
    pub hiccups: Option<crate::calibrate::Floor>,
    pub cpu: Duration,
    pub cpu_per_call: Duration,
    pub max_rss_bytes: u64,
    pub threads: u32,
    /// CPU used over the run's wall time per client thread (1.0 = every thread always busy).
    pub utilization: f64,
}

/// The warm-up, measured and shown apart.
#[derive(Debug, Clone)]
pub struct Phase {
    pub duration: Duration,
    pub calls: u64,
    pub throughput_rps: f64,
    pub latency: Latency,
}

/// One round of `--burst`.
#[derive(Debug, Clone)]
pub struct Round {
    pub took: Duration,
    pub rps: f64,
}

/// What the server counted (the lab's Stats), beside what the client counted.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerSide {
    /// Attempts that reached the server (warm-up included).
    pub received: u64,
    pub ok: u64,
    pub failed: u64,
    pub rejected: u64,
    /// Messages the server received and sent on the method's calls (a unary call: one each).
    pub messages_in: u64,
    pub messages_out: u64,
    /// (received - 1) / (last - first arrival), when the run's method was the only one.
    pub throughput_rps: Option<f64>,
    /// The server process's CPU time over the run.
    pub cpu: Duration,
    pub rss_bytes: u64,
    /// How long the lab's network thread stays awake after each echo call (`serve --spin`),
    /// when the run's method was echo: that CPU is in `cpu`. Zero otherwise.
    pub echo_spin: Duration,
}

/// Failed calls of one status and message.
#[derive(Debug, Clone)]
pub struct ErrorKind {
    pub status: Code,
    pub message: String,
    pub count: u64,
}

/// Everything a report prints, in the model's units (Durations, bytes, counts).
#[derive(Debug, Clone)]
pub struct Summary {
    pub meta: Meta,
    pub target: String,
    pub call: String,
    pub pacer: Pacer,
    /// Closed loop: workers; open loop: most calls in flight; bursts: the burst size.
    pub concurrency: u32,
    pub connections: u32,
    pub loop_per_worker: Option<u64>,
    /// Closed loop: the active workers over time (`--ramp`, `--stages`).
    pub active_workers: Option<Stages>,
    pub ended: Ended,
    pub requests: Requests,
    pub statuses: PerStatus,
    pub attempt_statuses: PerStatus,
    pub errors: Vec<ErrorKind>,
    /// The measured window: from the end of the warm-up to the last measured answer.
    pub duration: Duration,
    pub throughput_rps: f64,
    /// Calls answered OK per second (rmeter's Throughput).
    pub ok_rps: f64,
    pub latency: Latency,
    pub attempt_latency: Latency,
    /// Actual first send to final answer (open loop: without the wait to be sent).
    pub service_time: Latency,
    pub schedule_lag: Option<Latency>,
    /// Open loop: sends more than 1 ms late mostly waiting for an in-flight slot...
    pub late_sends: u64,
    /// ...and mostly for the client's own wake-up, a slot free.
    pub late_wakeups: u64,
    pub warmup: Option<Phase>,
    pub rounds: Vec<Round>,
    pub client: Client,
    pub notices: Vec<Notice>,
    /// The measured histograms (ns) and counts: what `--format json` carries so that runs
    /// merge exactly. Open loop: the call latencies (every call's, OK calls', each name's or
    /// flow's) count the calls due but never sent too, each at its lower bound (the end less
    /// its intended send time): every due call is in the headline (issue 39).
    pub measured: crate::record::Tally,
    /// When some calls were due but never sent: the tally as recorded, of the calls sent only
    /// (the figures shown beside the headline as "sent only"); None when every due call was sent.
    pub sent_only: Option<crate::record::Tally>,
    /// One row per interval (`--format csv`).
    pub intervals: Vec<IntervalRow>,
    /// The length of a full interval.
    pub interval: Duration,
    /// `--shard`: which share of a split load this result is.
    pub shard: Option<crate::load::plan::ShardOf>,
    /// The machine's floor beside the results: None when left out (`--no-calibrate`),
    /// Some(None) when the machine was never calibrated.
    pub floor: Option<Option<crate::calibrate::Calibration>>,
    /// The server's own count, when the target serves the lab's Stats.
    pub server: Option<ServerSide>,
    /// Every attempt of the run by status, warm-up included: what a server counts.
    pub all_attempts: PerStatus,
    /// Wall time of the whole run (warm-up included).
    pub elapsed: Duration,
    /// Where the run's per-interval p50 latency stopped changing (warm-up included).
    pub steady: SteadyState,
    /// Bursts: which rounds were warm-up, by the same method on the rounds' times.
    pub warm_rounds: Option<Steadiness>,
    /// Streaming methods: messages, apart from the calls (streams) counted above.
    pub messages: Option<Messages>,
    /// `--workload`: each call's (name, method), in the mix's order; its results are
    /// `measured.by_name` at the same index.
    pub call_names: Vec<(String, String)>,
    /// `--workload` flows: each one's (name, steps); results in `measured.by_flow`.
    pub flow_names: Vec<(String, Vec<String>)>,
    /// `--workload` checks: each one's (call name, expression); results in `measured.checks`.
    pub check_names: Vec<(String, String)>,
    /// Targets broken down by backend (docs/targets.md): every address of the run; its
    /// results are `measured.by_backend` at the same index.
    pub backends: Vec<String>,
    /// `run --replay`: the log, and its own numbers of the calls sent.
    pub replay: Option<crate::result::replay::Replay>,
}

/// A streaming run's messages; the calls above are its streams (their latency: each
/// stream's duration).
#[derive(Debug, Clone)]
pub struct Messages {
    pub kind: CallKind,
    pub sent: u64,
    pub received: u64,
    pub sent_per_s: f64,
    pub received_per_s: f64,
    /// Bidi ping-pong: each request to its response.
    pub round_trip: Option<Latency>,
    /// Server streams: from the stream's start to its first response.
    pub first_message: Option<Latency>,
}

impl Summary {
    /// `--workload`: each call's name, method and measured share, in the mix's order (a name
    /// never called has an empty share).
    pub fn by_name(&self) -> Vec<(&str, &str, crate::record::shard::NameTally)> {
        self.call_names
            .iter()
            .enumerate()
            .map(|(i, (name, method))| {
                (name.as_str(), method.as_str(), self.measured.by_name.get(i).cloned().unwrap_or_default())
            })
            .collect()
    }

    /// `--workload` flows: each flow's name, steps and measured share, in the file's order.
    pub fn by_flow(&self) -> Vec<(&str, &[String], crate::record::shard::FlowTally)> {
        let share = |i: usize| self.measured.by_flow.get(i).cloned().unwrap_or_default();
        self.flow_names.iter().enumerate().map(|(i, (name, steps))| (name.as_str(), &steps[..], share(i))).collect()
    }

    /// `--workload` checks: each one's call name, expression, passes and failures.
    pub fn checks(&self) -> Vec<(&str, &str, u64, u64)> {
        let counts = |i: usize| self.measured.checks.get(i).copied().unwrap_or_default();
        self.check_names
            .iter()
            .enumerate()
            .map(|(i, (call, text))| (call.as_str(), text.as_str(), counts(i).0, counts(i).1))
            .collect()
    }

    /// Each backend's address and measured share, in the order of the run's addresses. A
    /// backend that took no call gets an empty histogram that grows as needed, not a copy of
    /// a full one (256 KB each): a thousand idle backends took 256 MB at every call of this.
    pub fn by_backend(&self) -> Vec<(&str, crate::record::shard::NameTally)> {
        let share = |i: usize| match self.measured.by_backend.get(i) {
            Some(tally) if tally.calls > 0 => tally.clone(),
            _ => crate::record::shard::NameTally {
                calls: 0,
                statuses: Default::default(),
                latency: hdrhistogram::Histogram::new(3).expect("3 significant digits are valid"),
            },
        };
        self.backends.iter().enumerate().map(|(i, addr)| (addr.as_str(), share(i))).collect()
    }

    pub fn partial(&self) -> bool {
        self.ended.partial()
    }
}
