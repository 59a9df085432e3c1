//! The `Summary`: a finished run's numbers, in the model's units (Durations, bytes, counts),
//! as the analysis (this module's parent) leaves them for the renderers (src/report).
use super::notices::Notice;
use super::steady::SteadyState;
use crate::grpc::status::PerStatus;
use crate::grpc::transport::CallKind;
use crate::load::pacer::{Pacer, Stages};
use crate::record::intervals::IntervalRow;
use crate::record::shard::{FlowTally, NameTally};
use crate::result::Ended;
use crate::stats::steady::Steadiness;
use crate::stats::Latency;
use hdrhistogram::Histogram;
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
    /// `--workload`: each call's (name, method) with its measured share, in the mix's order.
    pub call_shares: Vec<((String, String), Share<NameTally>)>,
    /// `--workload` flows: each one's (name, steps) with its measured share.
    pub flow_shares: Vec<(FlowName, Share<FlowTally>)>,
    /// `--workload` checks: each one's (call name, expression) with its passes and failures.
    pub check_counts: Vec<((String, String), (u64, u64))>,
    /// Targets broken down by backend (docs/targets.md): every address of the run with its
    /// measured share.
    pub backend_shares: Vec<(String, NameTally)>,
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

/// A flow's name and its steps (its call names, in order).
pub type FlowName = (String, Vec<String>);

/// A call name's or a flow's measured share, with the latencies of its calls sent only when
/// some calls were due but never sent (`Summary::sent_only`): both travel with its name.
#[derive(Debug, Clone, Default)]
pub struct Share<T> {
    pub measured: T,
    pub sent: Option<Histogram<u64>>,
}

/// Each name with its share, paired once: the engine records the shares in the order of the
/// names it was given (the resolved stage's, `load::stage::Mix`); a name without a share
/// (never called) gets `empty`'s.
pub(crate) fn paired<N, T>(names: Vec<N>, shares: Vec<T>, empty: impl Fn() -> T) -> Vec<(N, T)> {
    let mut shares = shares.into_iter();
    names.into_iter().map(|name| (name, shares.next().unwrap_or_else(&empty))).collect()
}

/// A share that took no call: an empty histogram that grows as needed, not a full one (256
/// KB each): a thousand idle backends took 256 MB when each was a full one.
pub(crate) fn no_calls() -> NameTally {
    NameTally {
        calls: 0,
        statuses: Default::default(),
        latency: Histogram::new(3).expect("3 significant digits are valid"),
    }
}

impl Summary {
    /// `--workload` flows: each flow's name, steps and measured share, in the file's order.
    pub fn by_flow(&self) -> Vec<(&str, &[String], &FlowTally)> {
        self.flow_shares.iter().map(|((name, steps), share)| (name.as_str(), &steps[..], &share.measured)).collect()
    }

    /// `--workload` checks: each one's call name, expression, passes and failures.
    pub fn checks(&self) -> Vec<(&str, &str, u64, u64)> {
        self.check_counts
            .iter()
            .map(|((call, text), (pass, fail))| (call.as_str(), text.as_str(), *pass, *fail))
            .collect()
    }

    /// Each backend's address and measured share, in the order of the run's addresses (not
    /// copied: with many addresses, each backend's latency is most of a run's memory).
    pub fn by_backend(&self) -> Vec<(&str, &NameTally)> {
        self.backend_shares.iter().map(|(addr, share)| (addr.as_str(), share)).collect()
    }

    pub fn partial(&self) -> bool {
        self.ended.partial()
    }
}
