//! The result of a run, as one typed and versioned document: what `run --format json` writes
//! and what `merge`, `compare`, `report`, `history`, `sweep`, the labs and the coordinator
//! read. Its keys are a stable interface (docs/design.md, "Stable interfaces"): latencies in
//! µs under `*_us`, durations in s under `*_s`, histograms as HdrHistogram text
//! (record::shard::to_text); keys are only ever added.
//!
//! A breakdown of a run (`calls_by_name`, `flows`, `backends`) maps a name to a `Slice`: the
//! same numbers as the whole run's (`Run::whole`), so what merges, compares or renders a run
//! takes a slice as well (`Run::of_slice`).
pub mod backend_intervals;
pub mod bounds;
pub mod notices;
pub mod replay;
pub mod slice;
pub mod words;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

pub use slice::{Counts, LatencySummary, Slice};
pub use words::{Mode, Process, StreamKind, Verdict, Word, Words};

/// `meta.schema_version`: MAJOR.MINOR. A reader refuses a newer major (a key it reads changed
/// meaning) and reads a newer minor (keys were only added). 2.0: `checks` is a list, one entry
/// per check (1.x keyed them "call: expression", so two identical checks were one), and the
/// call-latency histogram is written once (`histograms.call_latency`, no more `histogram`);
/// 1.x results still read. 2.1 added `elapsed_s`. 2.2: an open loop's calls due but never
/// sent count in the call latencies (`latency_us`, `ok_latency_us`, a flow's or a call
/// name's) at their lower bound, and `sent_latency_us` (with `histograms.sent_call_latency`,
/// a slice's `sent_latency_us` and `sent_histogram`) keeps the calls sent only.
/// 2.3 added `request_bytes` and `response_bytes`. 2.4: a merge of inputs of different
/// modes says `mode: "mixed"` (before, their modes joined: "closed, open", read as mixed),
/// each input's own `shards[].mode`; a merge's and a coordinator's own notices have their
/// kinds in `warnings` too, and new kinds (see `NoticeKind`). 2.5 added `backend_intervals`.
/// 2.6: a shard's intervals (and backend lines) carry their histograms, and a merge of
/// aligned inputs adds them into a merged interval series (the notice `series_left_out` when
/// it cannot).
pub const SCHEMA_VERSION: &str = "2.6";
const SCHEMA_MAJOR: u64 = 2;

/// The breakdowns whose values are slices, by key: what merge adds name by name and what
/// `--slice KEY=NAME` picks from.
pub const BREAKDOWNS: [&str; 3] = ["calls_by_name", "flows", "backends"];

/// A whole result: a run's, a shard's, or several merged.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct Run {
    #[serde(default)]
    pub meta: Meta,
    #[serde(default)]
    pub target: String,
    #[serde(default)]
    pub call: String,
    /// closed | open | burst, or mixed: a merge of inputs of different modes (2.4).
    #[serde(default, deserialize_with = "words::mode")]
    pub mode: Word<Mode>,
    #[serde(default)]
    pub load: String,
    #[serde(default)]
    pub concurrency: u64,
    #[serde(default)]
    pub connections: u64,
    #[serde(default)]
    pub partial: bool,
    pub requests: Requests,
    #[serde(default)]
    pub statuses: BTreeMap<String, u64>,
    #[serde(default)]
    pub attempt_statuses: BTreeMap<String, u64>,
    #[serde(default)]
    pub errors: Vec<ErrorCount>,
    #[serde(default)]
    pub duration_s: f64,
    /// Wall time of the whole run, connecting and the warm-up included; results written
    /// before 2.1 lack it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_s: Option<f64>,
    #[serde(default)]
    pub throughput_rps: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ok_rps: Option<f64>,
    /// Every call's latency; in an open loop every due call's: one never sent counts at its
    /// lower bound, the end of the run less its intended send time (2.2; before, it was left out).
    #[serde(default)]
    pub latency_us: LatencySummary,
    /// Open loop with calls due but never sent: the latency of the calls sent only (what
    /// `latency_us` was before 2.2); absent when every due call was sent (then it is `latency_us`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_latency_us: Option<LatencySummary>,
    /// Of the calls that did not fail (latency_us counts failed calls too): those that ended
    /// OK and, in an open loop, those never sent, at their lower bound; results written
    /// before it existed lack it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ok_latency_us: Option<LatencySummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt_latency_us: Option<LatencySummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_time_us: Option<LatencySummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_lag_us: Option<LatencySummary>,
    /// The measured calls' bytes on the wire as gRPC messages: sent as framed (each message's
    /// 5-byte header included, every attempt's), received as the messages' payloads. Absent
    /// from results written before 2.3 and from merged ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_sends: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_wakeups: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<Client>,
    /// What qualifies the numbers: one list, written as `notices` (the texts) and `warnings`
    /// (each with its kind).
    #[serde(flatten)]
    pub notices: Notices,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assertions: Option<Vec<Checked>>,
    /// The histograms; the call latency's one key is `histograms.call_latency` (1.x wrote it
    /// twice, also as `histogram`: read when `call_latency` is absent, `Run::from_value`).
    #[serde(default)]
    pub histograms: Histograms,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intervals: Option<Vec<IntervalRow>>,
    /// Open loop: the rate asked for, as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rps_target: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_per_worker: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady_state: Option<SteadyState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warm_rounds: Option<Word<Verdict>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup_rounds: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<Server>,
    /// The machine's floor (calibrate::to_json); null when the machine was never calibrated,
    /// absent when left out.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub calibration: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<Messages>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<Warmup>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds: Option<Vec<Round>>,
    /// `--workload`: each call name's slice (with its `method`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls_by_name: Option<BTreeMap<String, Slice>>,
    /// Each flow's slice of whole flows (with its `steps` and early ends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flows: Option<BTreeMap<String, Slice>>,
    /// Client-side load balancing: each backend address's slice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backends: Option<BTreeMap<String, Slice>>,
    /// Client-side load balancing: the backends' calls interval by interval (2.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_intervals: Option<backend_intervals::BackendIntervals>,
    /// `--workload` checks, each its own entry in the workload's order (two identical checks
    /// on one call are two); 1.x results keyed them "call: expression" and still read.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "checks_list")]
    pub checks: Option<Vec<CheckCount>>,
    /// `run --replay`: the log, and its own numbers beside `calls_by_name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<replay::Replay>,
    // A merged result's own keys.
    /// What `duration_s` is (merge::DURATION_IS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_is: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub windows: Option<Vec<Window>>,
    /// Each input of a merge: its client, and its own slice of the calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shards: Option<Vec<ShardPart>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing_shards: Option<Vec<MissingShard>>,
    /// Keys this version does not know (written by a newer minor version): kept as they are.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct Meta {
    #[serde(default)]
    pub rpcmeter_version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_version: Option<String>,
    /// Read as any JSON: a string today; a new form is no reason to refuse.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default, deserialize_with = "null_is_default")]
    pub tags: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Vec<String>>,
    #[serde(default)]
    pub ended: Ended,
    /// `--shard`: "I/N"; null for a whole run, absent from a merged one (`Run::shard`).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub shard: Option<Option<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival: Option<Arrival>,
    // A merged result's own keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_run_ids: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged_from: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mixed: Option<Vec<String>>,
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// Why a result ends where it does (`meta.ended`), in the words results have always held.
/// A word this version does not know is refused: its partialness would be a guess.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Ended {
    /// Its own limit (-n, -z, --loop, rounds) was reached and every call was answered.
    #[default]
    #[serde(rename = "completed")]
    Completed,
    /// Ctrl-C (or SIGTERM).
    #[serde(rename = "interrupted")]
    Interrupted,
    /// Calls were still in flight when --drain ran out after the end.
    #[serde(rename = "drain timed out")]
    DrainTimedOut,
    /// A merge of which some part ended early, or lacks a shard.
    #[serde(rename = "partial")]
    Partial,
}

impl Ended {
    /// The result holds less than the run was asked for.
    pub fn partial(self) -> bool {
        self != Ended::Completed
    }

    /// The word the result holds (`meta.ended`), as every format names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Ended::Completed => "completed",
            Ended::Interrupted => "interrupted",
            Ended::DrainTimedOut => "drain timed out",
            Ended::Partial => "partial",
        }
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Arrival {
    pub process: Word<Process>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(default)]
pub struct Requests {
    pub total: u64,
    pub ok: u64,
    pub failed: u64,
    /// The counts below are the whole run's: a slice does not know them (absent from a
    /// slice's result, never a made-up 0 beside its total).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retries: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_exhausted: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub abandoned: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unsent: Option<u64>,
}

#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct ErrorCount {
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub count: u64,
}

#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(default)]
pub struct Client {
    pub cpu_s: f64,
    pub cpu_us_per_request: f64,
    pub max_rss_bytes: u64,
    pub threads: u64,
    pub utilization: f64,
    pub hiccup_us: Option<Hiccups>,
}

#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(default)]
pub struct Hiccups {
    pub count: u64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

pub use notices::{Kind, Notice, NoticeKind, Notices, Warning};

#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(default)]
pub struct Checked {
    pub assertion: String,
    pub value: String,
    pub ok: bool,
}

#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct Histograms {
    /// `latency_us`'s: every due call.
    #[serde(default)]
    pub call_latency: String,
    /// `sent_latency_us`'s: the calls sent only (absent: the same as `call_latency`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_call_latency: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ok_call_latency: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt_latency: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_lag: Option<String>,
}

/// One row of the interval series (the same columns as `--format csv`).
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(default)]
pub struct IntervalRow {
    pub t_s: f64,
    pub length_s: f64,
    /// measured | warmup
    pub phase: String,
    pub calls: u64,
    /// Results written before it existed lack it: calls - failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ok: Option<u64>,
    pub failed: u64,
    pub rps: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    pub service_p99_us: f64,
    pub client_cpu_total_s: f64,
    pub client_rss_bytes: u64,
    pub messages_sent: u64,
    pub messages_received: u64,
    /// The interval's call-latency histogram (2.6), as `histograms.call_latency` is written:
    /// in a shard's result and a merge of them, so that a merge adds interval i exactly.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub histogram: Option<String>,
    /// Its service-time histogram, where it differs from `histogram` (an open loop).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_histogram: Option<String>,
}

#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(default)]
pub struct SteadyState {
    pub verdict: Word<Verdict>,
    pub steady_after_s: Option<f64>,
    pub intervals: u64,
    pub series: String,
}

#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(default)]
pub struct Server {
    pub received: u64,
    pub ok: u64,
    pub failed: u64,
    pub rejected: u64,
    pub messages_in: u64,
    pub messages_out: u64,
    pub throughput_rps: Option<f64>,
    pub cpu_s: f64,
    pub rss_bytes: u64,
    pub echo_spin_us: u64,
}

#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct Messages {
    #[serde(default)]
    pub kind: Word<StreamKind>,
    #[serde(default)]
    pub sent: u64,
    #[serde(default)]
    pub received: u64,
    #[serde(default)]
    pub sent_per_s: f64,
    #[serde(default)]
    pub received_per_s: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round_trip_us: Option<LatencySummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round_trip_histogram: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_message_us: Option<LatencySummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_message_histogram: Option<String>,
}

#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(default)]
pub struct Warmup {
    pub duration_s: f64,
    pub calls: u64,
    pub throughput_rps: f64,
    pub latency_us: LatencySummary,
}

impl Warmup {
    /// The warm-up's window (`duration_s`), read back as `Run::window` reads the measured one;
    /// zero when it is none.
    pub fn window(&self) -> Duration {
        crate::units::from_secs(self.duration_s).unwrap_or_default()
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(default)]
pub struct Round {
    pub took_ms: f64,
    pub rps: f64,
}

#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct CheckCount {
    #[serde(default)]
    pub call: String,
    #[serde(default)]
    pub expression: String,
    #[serde(default)]
    pub pass: u64,
    #[serde(default)]
    pub fail: u64,
}

/// `checks` as a list, or as 1.x wrote it (a map keyed "call: expression"): its entries.
fn checks_list<'de, D>(d: D) -> Result<Option<Vec<CheckCount>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Written {
        List(Vec<CheckCount>),
        Keyed(BTreeMap<String, CheckCount>),
    }
    Ok(Option::<Written>::deserialize(d)?.map(|w| match w {
        Written::List(list) => list,
        Written::Keyed(map) => map.into_values().collect(),
    }))
}

/// One measured window of a merged result.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(default)]
pub struct Window {
    pub started_at: String,
    pub duration_s: f64,
}

/// One input of a merge: where it came from, its client and its slice of the calls.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct ShardPart {
    #[serde(default)]
    pub input: String,
    #[serde(default)]
    pub shard: Option<String>,
    #[serde(default)]
    pub calls: u64,
    #[serde(default)]
    pub throughput_rps: f64,
    #[serde(default)]
    pub client: Option<Client>,
    #[serde(default)]
    pub bottleneck: bool,
    /// Its mode (2.4): what a merged `mode: "mixed"` is made of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<Word<Mode>>,
    /// Its calls as a slice (results merged before slices were kept lack it).
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub slice: Option<ShardSlice>,
}

/// A shard's slice beside its other keys (`throughput_rps` is the row's own).
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct ShardSlice {
    pub requests: Counts,
    pub statuses: BTreeMap<String, u64>,
    pub latency_us: LatencySummary,
    pub histogram: String,
}

#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(default)]
pub struct MissingShard {
    pub shard: String,
    pub why: String,
}

/// A present key, null included, is Some (`calibration: null` says "never calibrated").
fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

fn null_is_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// OK calls per second of the measured window: the one formula for a run (analysis), a
/// merge, a slice and every format (`Run::ok_calls_per_s`).
pub fn ok_calls_per_s(ok: u64, window: Duration) -> f64 {
    crate::stats::rate(ok, window)
}

/// The client's CPU per call: the process's CPU from the clock's start (so the warm-up's
/// included) over every call it made, the warm-up's included.
pub fn cpu_per_call(cpu: Duration, calls_with_warmup: u64) -> Duration {
    match calls_with_warmup {
        0 => Duration::ZERO,
        // To the ns, in integers: a float would make 500 ms over 500 calls 999.999 µs.
        n => Duration::from_nanos(u64::try_from(cpu.as_nanos() / u128::from(n)).unwrap_or(u64::MAX)),
    }
}

/// Why a text is not a result, in one line.
#[derive(Debug, Clone, PartialEq)]
pub enum NotAResult {
    NotJson(String),
    /// A JSON value, but not a result: what is missing or of the wrong kind.
    Not(String),
    /// A result of a schema this version does not read.
    Newer(String),
    /// A result without the slice asked for.
    NoSlice(String),
}

impl NotAResult {
    /// Why, without saying "not a result" (for a reader that says it its own way).
    pub fn why(&self) -> &str {
        match self {
            NotAResult::NotJson(why) | NotAResult::Not(why) | NotAResult::Newer(why) | NotAResult::NoSlice(why) => why,
        }
    }
}

impl std::fmt::Display for NotAResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotAResult::NotJson(why) => write!(f, "not JSON: {why}"),
            NotAResult::Not(why) => write!(f, "not a result of rpcmeter run --format json: {why}"),
            NotAResult::Newer(why) | NotAResult::NoSlice(why) => f.write_str(why),
        }
    }
}

impl Run {
    /// A result from its JSON text: refused (one line) when it is not a result or is of a
    /// newer major schema than this rpcmeter reads.
    pub fn parse(text: &str) -> Result<Run, NotAResult> {
        let value: Value = serde_json::from_str(text).map_err(|e| NotAResult::NotJson(e.to_string()))?;
        Run::from_value(value)
    }

    pub fn from_value(value: Value) -> Result<Run, NotAResult> {
        Run::from_value_requiring(value, &[])
    }

    /// A result that has `keys` beside the counts every reader needs (merge needs the
    /// histograms and the duration).
    pub fn from_value_requiring(value: Value, keys: &[&str]) -> Result<Run, NotAResult> {
        for key in ["requests"].iter().chain(keys) {
            if value.get(key).is_none() {
                return Err(NotAResult::Not(format!("no \"{key}\"")));
            }
        }
        check_version(&value["meta"]["schema_version"])?;
        let value = one_histogram_key(value);
        let timed = value.get("duration_s").is_some();
        let run: Run = serde_path_to_error::deserialize(value)
            .map_err(|e| NotAResult::Not(format!("{}: {}", e.path(), e.inner())))?;
        bounds::check(&run, timed).map_err(NotAResult::Not)?;
        Ok(run)
    }

    /// The result as JSON: keys sorted, as every result has been written.
    pub fn to_value(&self) -> Value {
        // A struct of strings, numbers and maps with string keys serializes without fail.
        serde_json::to_value(self).unwrap_or_default()
    }

    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(&self.to_value()).unwrap_or_default() + "\n"
    }

    /// The whole run's numbers as a slice.
    pub fn whole(&self) -> Slice {
        Slice {
            requests: Counts { total: self.requests.total, ok: self.requests.ok, failed: self.requests.failed },
            throughput_rps: self.throughput_rps,
            statuses: self.statuses.clone(),
            latency_us: self.latency_us.clone(),
            histogram: self.histograms.call_latency.clone(),
            ..Slice::default()
        }
    }

    /// The breakdown `key` (one of BREAKDOWNS).
    pub fn breakdown(&self, key: &str) -> Option<&BTreeMap<String, Slice>> {
        match key {
            "calls_by_name" => self.calls_by_name.as_ref(),
            "flows" => self.flows.as_ref(),
            "backends" => self.backends.as_ref(),
            _ => None,
        }
    }

    pub fn breakdown_mut(&mut self, key: &str) -> Option<&mut Option<BTreeMap<String, Slice>>> {
        match key {
            "calls_by_name" => Some(&mut self.calls_by_name),
            "flows" => Some(&mut self.flows),
            "backends" => Some(&mut self.backends),
            _ => None,
        }
    }

    /// One slice of this run (`calls_by_name`, "put") as a run of its own: its calls, statuses
    /// and latency; what the run was (target, mode, meta) the parent's; what a slice does not
    /// hold (clients, intervals, breakdowns) left out. So compare, merge and every format take
    /// it as they take a whole run.
    pub fn of_slice(&self, key: &str, name: &str) -> Result<Run, NotAResult> {
        let map = self.breakdown(key).ok_or_else(|| {
            NotAResult::NoSlice(format!(
                "--slice {key}={name}: this result has no {key} (breakdowns: {})",
                BREAKDOWNS.join(", ")
            ))
        })?;
        let slice = map.get(name).ok_or_else(|| {
            let names: Vec<&str> = map.keys().map(String::as_str).collect();
            NotAResult::NoSlice(format!("--slice {key}={name}: no such name in {key} (it has: {})", names.join(", ")))
        })?;
        Ok(self.as_slice_run(key, name, slice))
    }

    fn as_slice_run(&self, key: &str, name: &str, s: &Slice) -> Run {
        let c = &s.requests;
        let mut meta = self.meta.clone();
        meta.name = Some(match &self.meta.name {
            Some(run) => format!("{run} [{key}={name}]"),
            None => format!("[{key}={name}]"),
        });
        Run {
            meta,
            target: self.target.clone(),
            call: s.method.clone().unwrap_or_else(|| self.call.clone()),
            mode: self.mode.clone(),
            load: self.load.clone(),
            concurrency: self.concurrency,
            connections: self.connections,
            partial: self.partial,
            requests: Requests { total: c.total, ok: c.ok, failed: c.failed, ..Requests::default() },
            statuses: s.statuses.clone(),
            attempt_statuses: s.statuses.clone(),
            duration_s: self.duration_s,
            throughput_rps: s.throughput_rps,
            ok_rps: Some(ok_calls_per_s(c.ok, self.window())),
            latency_us: s.latency_us.clone(),
            histograms: Histograms { call_latency: s.histogram.clone(), ..Histograms::default() },
            interval_s: self.interval_s,
            windows: self.windows.clone(),
            duration_is: self.duration_is.clone(),
            span_s: self.span_s,
            warmup: self.warmup.clone(),
            ..Run::default()
        }
    }

    /// The measured window (`duration_s`); zero when it is none.
    pub fn window(&self) -> Duration {
        crate::units::from_secs(self.duration_s).unwrap_or_default()
    }

    /// Wall time of the whole run (`elapsed_s`); without it, the measured window and the
    /// warm-up's.
    pub fn elapsed(&self) -> Duration {
        let warmup = self.warmup.as_ref().map_or(0.0, |w| w.duration_s);
        Duration::try_from_secs_f64(self.elapsed_s.unwrap_or(self.duration_s + warmup)).unwrap_or_default()
    }

    /// OK calls per second of the measured window (`ok_calls_per_s`).
    pub fn ok_calls_per_s(&self) -> f64 {
        ok_calls_per_s(self.requests.ok, self.window())
    }

    /// The client's CPU per call (`cpu_per_call`); None when the result has no client (a
    /// merge, a slice: their clients are each input's, under `shards`).
    pub fn cpu_per_call(&self) -> Option<Duration> {
        let cpu = Duration::try_from_secs_f64(self.client.as_ref()?.cpu_s).ok()?;
        let warmup = self.warmup.as_ref().map_or(0, |w| w.calls);
        Some(cpu_per_call(cpu, self.requests.total.saturating_add(warmup)))
    }

    /// The result holds less than its run was asked for (`meta.ended`).
    pub fn partial(&self) -> bool {
        self.meta.ended.partial()
    }

    /// The `--assert` checks that did not hold.
    pub fn breached(&self) -> Vec<&Checked> {
        self.assertions.iter().flatten().filter(|a| !a.ok).collect()
    }

    /// When the run started (`meta.started_at`), when the result says.
    pub fn started_at(&self) -> Option<std::time::SystemTime> {
        self.meta.started_at.as_deref().and_then(|t| humantime::parse_rfc3339(t).ok())
    }

    /// The call-latency histogram (ns); refused in words when the text is not one.
    pub fn call_histogram(&self) -> Result<hdrhistogram::Histogram<u64>, String> {
        crate::stats::histogram::from_text(&self.histograms.call_latency)
            .map_err(|why| format!("histograms.call_latency {why}"))
    }

    /// `--shard`: which share of a split load this result is ("I/N").
    pub fn shard(&self) -> Option<&str> {
        self.meta.shard.as_ref().and_then(|s| s.as_deref())
    }

    /// The runs this result holds: a merged result's sources, else its own id.
    pub fn run_ids(&self) -> Vec<&Value> {
        match self.meta.source_run_ids.as_ref().filter(|s| !s.is_empty()) {
            Some(sources) => sources.iter().collect(),
            None => self.meta.run_id.iter().collect(),
        }
    }
}

/// `--slice KEY=NAME`: which slice of a result to take.
pub fn parse_slice(text: &str) -> Result<(String, String), String> {
    let (key, name) = text.split_once('=').ok_or_else(|| format!("not KEY=NAME (e.g. calls_by_name=put): {text}"))?;
    if !BREAKDOWNS.contains(&key) {
        return Err(format!("{key} is no breakdown (one of {})", BREAKDOWNS.join(", ")));
    }
    Ok((key.to_string(), name.to_string()))
}

/// 1.x wrote the call-latency histogram twice (`histogram` and `histograms.call_latency`):
/// `histogram` is read as `histograms.call_latency` where that is absent, and dropped.
fn one_histogram_key(mut value: Value) -> Value {
    let Some(run) = value.as_object_mut() else { return value };
    if let Some(old) = run.remove("histogram") {
        let histograms = run.entry("histograms").or_insert_with(|| Value::Object(Default::default()));
        if let Some(h) = histograms.as_object_mut() {
            h.entry("call_latency").or_insert(old);
        }
    }
    value
}

/// Refuses a newer major schema: its keys may mean what this version does not know.
fn check_version(version: &Value) -> Result<(), NotAResult> {
    let text = match version {
        Value::Null => return Ok(()),
        Value::String(text) => text,
        other => return Err(NotAResult::Not(format!("meta.schema_version {other} is not MAJOR.MINOR"))),
    };
    let major = text.split('.').next().and_then(|m| m.parse::<u64>().ok());
    match major {
        Some(m) if m <= SCHEMA_MAJOR => Ok(()),
        Some(_) => Err(NotAResult::Newer(format!(
            "schema version {text} is newer than this rpcmeter reads ({SCHEMA_VERSION}): upgrade rpcmeter"
        ))),
        None => Err(NotAResult::Not(format!("meta.schema_version {text:?} is not MAJOR.MINOR"))),
    }
}

#[cfg(test)]
mod tests;
