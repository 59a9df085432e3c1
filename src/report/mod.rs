//! Reports: a `Summary` computed once from a run's result, rendered by one `Export` per
//! format (one file each). Measuring and printing stay apart, as hyperfine keeps them: nothing
//! here measures, and units (µs, MiB) appear only in the renderers (through `crate::units`).
pub mod csv;
pub mod html;
pub mod influx;
pub mod json;
pub mod junit;
pub mod of_result;
pub mod printable;
pub mod prometheus;
pub mod rmeter;
pub mod svg;
pub mod table;

use crate::grpc::status::PerStatus;
use crate::grpc::transport::{Bidi, CallKind};
use crate::load::engine::{Ended, Recorded};
use crate::load::pacer::{Arrival, Pacer, Stages};
use crate::load::plan::Plan;
use crate::record::intervals::IntervalRow;
use crate::stats::assertions::{Assertion, Metric, Value};
use crate::stats::steady::{self, Steadiness};
use crate::stats::{self, Latency};
use crate::units;
use std::time::{Duration, SystemTime};
use tonic::Code;

/// The report formats; each is one `Export`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
    Csv,
    Rmeter,
    /// Prometheus text exposition of the result (as ghz's `prometheus`).
    Prometheus,
    /// InfluxDB line protocol: the run (as ghz's `influx-summary`) and its intervals.
    Influx,
    /// JUnit XML of the `--assert` checks, for CI.
    Junit,
}

/// Renders a whole run as one document.
pub trait Export {
    fn render(&self, summary: &Summary) -> String;
}

impl Format {
    pub fn exporter(self) -> &'static dyn Export {
        match self {
            Format::Table => &table::Table,
            Format::Json => &json::Json,
            Format::Csv => &csv::Csv,
            Format::Rmeter => &rmeter::Rmeter,
            Format::Prometheus => &prometheus::Prometheus,
            Format::Influx => &influx::Influx,
            Format::Junit => &junit::Junit,
        }
    }
}

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

#[derive(Debug, Clone)]
pub struct Checked {
    pub assertion: Assertion,
    pub value: Value,
    pub ok: bool,
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

/// What qualifies the numbers, by kind, so that scripts can act on it (JSON `warnings`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoticeKind {
    Partial,
    ClosedLoop,
    BehindSchedule,
    ScheduleLag,
    Unsent,
    ClientCpu,
    SharedCores,
    LittlesLaw,
    Abandoned,
    ServerCount,
    ServerThroughput,
    WarmUp,
    NoSteadyState,
    Hiccups,
    SlowBackend,
}

impl NoticeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            NoticeKind::Partial => "partial",
            NoticeKind::ClosedLoop => "closed_loop",
            NoticeKind::BehindSchedule => "behind_schedule",
            NoticeKind::ScheduleLag => "schedule_lag",
            NoticeKind::Unsent => "unsent",
            NoticeKind::ClientCpu => "client_cpu",
            NoticeKind::SharedCores => "shared_cores",
            NoticeKind::LittlesLaw => "littles_law",
            NoticeKind::Abandoned => "abandoned",
            NoticeKind::ServerCount => "server_count",
            NoticeKind::ServerThroughput => "server_throughput",
            NoticeKind::WarmUp => "warm_up",
            NoticeKind::NoSteadyState => "no_steady_state",
            NoticeKind::Hiccups => "client_hiccups",
            NoticeKind::SlowBackend => "slow_backend",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    pub kind: NoticeKind,
    pub text: String,
}

fn notice(kind: NoticeKind, text: impl Into<String>) -> Notice {
    Notice { kind, text: text.into() }
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
    pub assertions: Vec<Checked>,
    /// The measured histograms (ns) and counts: what `--format json` carries so that runs
    /// merge exactly.
    pub measured: crate::record::Tally,
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

/// The steady-state verdict of a run with no OK call: a failure's latency says nothing of
/// the service's, however flat it is.
pub const NOT_JUDGED: &str = "not judged: no call succeeded";

/// The steady-state verdict on the interval series, with what it was computed from.
#[derive(Debug, Clone, PartialEq)]
pub struct SteadyState {
    pub verdict: Steadiness,
    /// Where the steady part starts, from the start of the run.
    pub after: Option<Duration>,
    /// Full intervals analysed.
    pub intervals: usize,
}

/// PELT on the per-interval p50 latency of the full intervals (the last, shorter one is
/// left out: its few calls are no level). docs/design.md, "Measurement rules".
pub fn steady_state(rows: &[IntervalRow], interval: Duration) -> SteadyState {
    let full: Vec<&IntervalRow> = rows.iter().filter(|r| r.length >= interval).collect();
    let p50s: Vec<f64> = full.iter().map(|r| if r.calls == 0 { f64::NAN } else { r.p50.as_secs_f64() }).collect();
    let verdict = steady::latency_steadiness(&p50s);
    let after = match verdict {
        Steadiness::Steady { from } => Some(full.get(from).map_or(Duration::ZERO, |r| r.at.saturating_sub(r.length))),
        _ => None,
    };
    SteadyState { verdict, after, intervals: full.len() }
}

impl Summary {
    pub fn new(
        plan: &Plan,
        meta: Meta,
        call: &str,
        result: &Recorded,
        assertions: &[Assertion],
        intervals: Vec<IntervalRow>,
    ) -> Summary {
        let m = &result.measured;
        let c = &m.counts;
        let all_calls = c.calls + result.warmup.counts.calls;
        let wall = result.elapsed;
        let threads = plan.threads.max(1);
        let client = Client {
            hiccups: None,
            cpu: result.cpu,
            cpu_per_call: if all_calls == 0 {
                Duration::ZERO
            } else {
                result.cpu / all_calls.min(u32::MAX as u64) as u32
            },
            max_rss_bytes: result.max_rss_bytes,
            threads,
            utilization: if wall.is_zero() {
                0.0
            } else {
                result.cpu.as_secs_f64() / wall.as_secs_f64() / threads as f64
            },
        };
        let mut summary = Summary {
            meta,
            target: plan.target.to_string(),
            call: call.to_string(),
            pacer: plan.pacer.clone(),
            concurrency: plan.workers,
            connections: plan.connections,
            loop_per_worker: plan.stop.per_worker,
            active_workers: plan.active_workers.clone(),
            ended: result.ended,
            requests: Requests {
                total: c.calls,
                ok: c.ok(),
                failed: c.failed(),
                retries: c.retries(),
                attempts: c.attempts,
                retry_exhausted: c.retry_exhausted,
                abandoned: result.abandoned,
                unsent: result.unsent,
            },
            statuses: c.call_status,
            attempt_statuses: c.attempt_status,
            errors: errors(result),
            duration: result.window,
            throughput_rps: stats::rate(c.calls, result.window),
            ok_rps: stats::rate(c.ok(), result.window),
            latency: Latency::of(&m.call_latency),
            attempt_latency: Latency::of(&m.attempt_latency),
            service_time: Latency::of(&m.service_time),
            schedule_lag: plan.pacer.is_open().then(|| Latency::of(&m.schedule_lag)),
            late_sends: c.late_sends,
            late_wakeups: c.late_wakeups,
            warmup: (!plan.warmup.is_zero()).then(|| Phase {
                duration: result.warmup_window,
                calls: result.warmup.counts.calls,
                throughput_rps: stats::rate(result.warmup.counts.calls, result.warmup_window),
                latency: Latency::of(&result.warmup.call_latency),
            }),
            rounds: result
                .rounds
                .iter()
                .map(|&took| Round { took, rps: stats::rate(plan.workers as u64, took) })
                .collect(),
            client,
            notices: Vec::new(),
            assertions: Vec::new(),
            measured: m.clone(),
            intervals: intervals.clone(),
            interval: plan.interval,
            shard: (!plan.shard.is_whole()).then_some(plan.shard),
            floor: None,
            server: None,
            all_attempts: {
                let mut all = c.attempt_status;
                all.add(&result.warmup.counts.attempt_status);
                all
            },
            elapsed: result.elapsed,
            steady: steady_state(&intervals, plan.interval),
            warm_rounds: (!result.rounds.is_empty()).then(|| steady::warm_rounds(&result.rounds)),
            messages: (plan.kind != CallKind::Unary).then(|| Messages {
                kind: plan.kind,
                sent: c.messages_sent,
                received: c.messages_received,
                sent_per_s: stats::rate(c.messages_sent, result.window),
                received_per_s: stats::rate(c.messages_received, result.window),
                round_trip: (plan.kind == CallKind::Bidi && plan.stream.bidi == Bidi::PingPong)
                    .then(|| Latency::of(&m.message_latency)),
                first_message: (plan.kind == CallKind::ServerStream).then(|| Latency::of(&m.first_message)),
            }),
            call_names: Vec::new(),
            flow_names: Vec::new(),
            check_names: Vec::new(),
            backends: result.backends.iter().map(|a| a.to_string()).collect(),
        };
        summary.assertions = assertions
            .iter()
            .map(|a| {
                let value = summary.value(a.metric);
                Checked { assertion: a.clone(), value, ok: a.holds(value) }
            })
            .collect();
        summary.notices = notices(plan, &summary);
        summary
    }

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

    /// Each backend's address and measured share, in the order of the run's addresses.
    pub fn by_backend(&self) -> Vec<(&str, crate::record::shard::NameTally)> {
        self.backends
            .iter()
            .enumerate()
            .map(|(i, addr)| (addr.as_str(), self.measured.by_backend.get(i).cloned().unwrap_or_default()))
            .collect()
    }

    fn value(&self, metric: Metric) -> Value {
        match metric {
            Metric::Checks => {
                let (pass, fail) = self.measured.checks.iter().fold((0, 0), |(p, f), c| (p + c.0, f + c.1));
                Value::Fraction(if pass + fail == 0 { 0.0 } else { pass as f64 / (pass + fail) as f64 })
            }
            Metric::ErrorRate if self.requests.total == 0 => Value::Fraction(0.0),
            Metric::ErrorRate => Value::Fraction(self.requests.failed as f64 / self.requests.total as f64),
            Metric::Rps => Value::PerSecond(self.throughput_rps),
            Metric::Latency(stat) => Value::Latency(stat.of(&self.measured.call_latency)),
        }
    }

    /// Adds the machine's floor (None: never calibrated) and the client's hiccups during the
    /// run, flagged when well above the floor's: the client stalled, and every latency it
    /// timed may hold up to that stall.
    pub fn set_floor(
        &mut self,
        floor: Option<crate::calibrate::Calibration>,
        hiccups: Option<&hdrhistogram::Histogram<u64>>,
    ) {
        self.client.hiccups = hiccups.filter(|h| !h.is_empty()).map(crate::calibrate::Floor::of);
        if let (Some(run), Some(cal)) = (self.client.hiccups, &floor) {
            if hiccups_stand_out(run.p99, cal.hiccup.p99) {
                self.notices.push(notice(
                    NoticeKind::Hiccups,
                    format!(
                        "client hiccups: a 1 ms sleep overshot by p99 {} (max {}) during the run, {} on this machine idle \
                         (rpcmeter calibrate): the client's threads were held up (other load, too few cores), and its \
                         latencies may include up to that stall",
                        units::duration(run.p99),
                        units::duration(run.max),
                        units::duration(cal.hiccup.p99)
                    ),
                ));
            }
        }
        self.floor = Some(floor);
    }

    /// Adds the server's count and the checks that compare it with the client's.
    pub fn with_server(mut self, server: ServerSide) -> Summary {
        // A shard's server count holds every shard's calls (they load one server at once):
        // compared with one shard's, it would cry "another client" at its siblings.
        if self.shard.is_none() {
            self.notices.extend(cross_check(&self, &server));
        }
        self.server = Some(server);
        self
    }

    pub fn partial(&self) -> bool {
        self.ended.partial()
    }

    pub fn breached(&self) -> Vec<&Checked> {
        self.assertions.iter().filter(|a| !a.ok).collect()
    }
}

/// Failed calls grouped by status and message, most frequent first.
fn errors(result: &Recorded) -> Vec<ErrorKind> {
    let mut kinds: Vec<ErrorKind> = result
        .measured
        .errors
        .iter()
        .map(|((code, message), &count)| ErrorKind { status: Code::from_i32(*code), message: message.clone(), count })
        .collect();
    kinds.sort_by_key(|k| std::cmp::Reverse(k.count));
    kinds
}

/// Hiccups worth a notice: twice the calibrated floor's p99 and at least 500 µs above it (a
/// few hundred µs of scheduling noise is every shared machine's).
fn hiccups_stand_out(run_p99: Duration, floor_p99: Duration) -> bool {
    run_p99 > floor_p99 * 2 && run_p99 >= floor_p99 + Duration::from_micros(500)
}

/// What a sceptical reader must know to trust (or not) the numbers (docs/design.md,
/// "Measurement rules").
fn notices(plan: &Plan, s: &Summary) -> Vec<Notice> {
    let mut out = Vec::new();
    match s.ended {
        Ended::Interrupted => {
            out.push(notice(NoticeKind::Partial, "partial result: the run was stopped before its end"))
        }
        Ended::DrainTimedOut => out.push(notice(
            NoticeKind::Partial,
            format!(
                "partial result: calls were still in flight {} after the end (--drain)",
                units::duration(plan.drain)
            ),
        )),
        Ended::Completed => {}
    }
    if !plan.pacer.is_open() {
        out.push(notice(
            NoticeKind::ClosedLoop,
            "closed loop: a slow answer delays the next send, so coordinated omission is invisible here; \
             use --rps for an open loop that measures from the intended send time",
        ));
    }
    if plan.pacer.is_open() && s.requests.total > 0 && s.late_sends * 100 > s.requests.total {
        out.push(notice(NoticeKind::BehindSchedule, format!(
            "{} calls ({:.1}%) were sent more than 1 ms behind schedule because all --max-in-flight {} slots were busy: \
             the rate was not kept (their latency counts from the intended send time)",
            s.late_sends,
            100.0 * s.late_sends as f64 / s.requests.total as f64,
            plan.workers
        )));
    }
    if let Some(lag) = s.schedule_lag.as_ref().filter(|l| l.percentile(99.0) > Duration::from_millis(1)) {
        // Named by what most late sends waited for: a slot (the server or --max-in-flight),
        // or the client's own wake-up.
        let p99 = units::duration(lag.percentile(99.0));
        let text = if s.late_sends >= s.late_wakeups {
            format!(
                "schedule lag p99 {p99} is slot wait: {} calls waited for one of the {} in-flight slots \
                 ({} sends were late by the client's own wake-up); raise --max-in-flight, or the server \
                 stalled; latency still counts from the intended time",
                s.late_sends, plan.workers, s.late_wakeups
            )
        } else {
            format!(
                "schedule lag p99 {p99} is late wake-ups: {} sends left more than 1 ms late with a slot free \
                 (a busy or descheduled client; {} waited for a slot); latency still counts from the intended time",
                s.late_wakeups, s.late_sends
            )
        };
        out.push(notice(NoticeKind::ScheduleLag, text));
    }
    if s.requests.unsent > 0 {
        out.push(notice(
            NoticeKind::Unsent,
            format!(
                "{} calls were due before the end but never sent: the rate was not kept (the client or \
             --max-in-flight {} could not keep up); they are not in the totals",
                s.requests.unsent, plan.workers
            ),
        ));
    }
    // Utilisation over a short run is mostly start-up: no verdict on less than a second.
    if s.client.utilization > 0.85 && wall_enough(s) {
        out.push(notice(
            NoticeKind::ClientCpu,
            format!(
                "client CPU at {:.0}% of its {} thread(s): the client, not the server, may be the bottleneck",
                s.client.utilization * 100.0,
                s.client.threads
            ),
        ));
    }
    if plan.target.is_loopback() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        out.push(notice(
            NoticeKind::SharedCores,
            format!(
                "client and server share this machine's {cores} core(s): the client's CPU ({}/call) is taken \
                 from the server",
                units::duration(s.client.cpu_per_call)
            ),
        ));
    }
    out.extend(littles_law(plan, s));
    match (s.steady.verdict, s.steady.after) {
        _ if s.requests.ok == 0 => {}
        (Steadiness::NoSteadyState, _) => out.push(notice(
            NoticeKind::NoSteadyState,
            "no steady state reached: the per-interval p50 latency was still changing at the end; \
             a longer run (or a longer --warmup) may tell more",
        )),
        (Steadiness::Steady { .. }, Some(after)) if after > plan.warmup + plan.interval => out.push(notice(
            NoticeKind::WarmUp,
            format!(
                "the per-interval p50 latency was steady only after {:.1} s{}: the result includes that warm-up \
                 (--warmup {} excludes it)",
                after.as_secs_f64(),
                if plan.warmup.is_zero() {
                    String::new()
                } else {
                    format!(", not after the {} of --warmup", units::duration(plan.warmup))
                },
                humantime::format_duration(Duration::from_secs(after.as_secs_f64().ceil() as u64))
            ),
        )),
        _ => {}
    }
    out.extend(slow_backends(&s.by_backend()));
    if s.requests.abandoned > 0 {
        out.push(notice(
            NoticeKind::Abandoned,
            format!("{} calls were still in flight when the run was stopped and are not counted", s.requests.abandoned),
        ));
    }
    out
}

/// A backend is compared once it answered this many calls.
const SLOW_BACKEND_CALLS: u64 = 20;

/// The slow pod behind a name: a backend whose p50 latency is more than twice the median of
/// the other backends' p50 (and at least 100 µs above it, above a busy client's scheduling
/// noise), each with `SLOW_BACKEND_CALLS` calls or more.
fn slow_backends(backends: &[(&str, crate::record::shard::NameTally)]) -> Vec<Notice> {
    let judged: Vec<(&str, Duration, u64)> = backends
        .iter()
        .filter(|(_, share)| share.calls >= SLOW_BACKEND_CALLS)
        .map(|(addr, share)| (*addr, stats::Statistic::Percentile(50.0).of(&share.latency), share.calls))
        .collect();
    let mut out = Vec::new();
    for (i, &(addr, p50, calls)) in judged.iter().enumerate() {
        let mut others: Vec<Duration> =
            judged.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, (_, p, _))| *p).collect();
        if others.is_empty() {
            continue;
        }
        others.sort();
        let median = match others.len() {
            n if n % 2 == 1 => others[n / 2],
            n => (others[n / 2 - 1] + others[n / 2]) / 2,
        };
        if p50 > median * 2 && p50 - median >= Duration::from_micros(100) {
            out.push(notice(
                NoticeKind::SlowBackend,
                format!(
                    "backend {addr} is slow: p50 {} over {calls} calls, {:.1}x the other backends' median p50 ({}): \
                     a slow pod behind the name? (each backend's latency: backends in --format json)",
                    units::duration(p50),
                    p50.as_secs_f64() / median.as_secs_f64().max(1e-9),
                    units::duration(median),
                ),
            ));
        }
    }
    out
}

/// Where the client's and the server's counts disagree, and why that may be.
fn cross_check(s: &Summary, server: &ServerSide) -> Vec<Notice> {
    let mut out = Vec::new();
    let client_ok = s.all_attempts.get(Code::Ok);
    let client_attempts = s.all_attempts.total();
    // A server stream the client ends at its --stream-call-count or --stream-call-duration
    // is OK to the client and a cancelled call to the server: only arrivals compare.
    let server_stream = s.messages.as_ref().is_some_and(|m| m.kind == CallKind::ServerStream);
    if (server.ok != client_ok && !server_stream) || server.received != client_attempts {
        out.push(notice(
            NoticeKind::ServerCount,
            format!(
                "the server counted {} calls ({} ok) where the client sent {} ({} ok): another client is \
             calling it, or calls were lost between them",
                server.received, server.ok, client_attempts, client_ok
            ),
        ));
    }
    if let Some(server_rps) = server.throughput_rps.filter(|_| wall_enough(s)) {
        let client_rps = stats::rate(client_attempts, s.elapsed);
        if client_rps > 0.0 && (server_rps - client_rps).abs() / client_rps > 0.02 {
            out.push(notice(
                NoticeKind::ServerThroughput,
                format!(
                "server-side throughput {server_rps:.1} calls/s differs from the client's {client_rps:.1} by {:.1}%: \
                 the client's window includes its start and drain, the server's only first to last arrival",
                (server_rps - client_rps).abs() / client_rps * 100.0
            ),
            ));
        }
    }
    out
}

/// Closed loop keeps `workers` calls in flight, so throughput x mean latency must equal
/// them (Little's law); less means workers spent time outside calls: the client's own.
fn littles_law(plan: &Plan, s: &Summary) -> Option<Notice> {
    let closed = matches!(plan.pacer, Pacer::Closed) && plan.active_workers.is_none() && wall_enough(s);
    if !closed || s.requests.total < 100 {
        return None;
    }
    let in_flight = s.throughput_rps * s.latency.mean.as_secs_f64();
    let off = (in_flight - plan.workers as f64).abs() / plan.workers as f64;
    (off > 0.02).then(|| {
        notice(
            NoticeKind::LittlesLaw,
            format!(
                "Little's law: {} workers, but throughput x mean latency = {in_flight:.2} in flight ({:.1}% off): \
             workers spent that share of the time outside calls, in the client itself",
                plan.workers,
                off * 100.0
            ),
        )
    })
}

/// Whether the run was long enough to judge the client's CPU use.
fn wall_enough(s: &Summary) -> bool {
    s.duration + s.warmup.as_ref().map_or(Duration::ZERO, |w| w.duration) >= Duration::from_secs(1)
}

/// The mode as words: "closed loop, 8 workers".
pub fn describe_load(s: &Summary) -> String {
    match &s.pacer {
        Pacer::Open(rate, Arrival::Uniform) => {
            format!("open loop at {} calls/s, at most {} in flight", rate, s.concurrency)
        }
        Pacer::Open(rate, Arrival::Poisson { seed }) => format!(
            "open loop, Poisson arrivals (seed {seed}) at {} calls/s, at most {} in flight",
            rate, s.concurrency
        ),
        Pacer::Burst { .. } => format!("bursts of {}", s.concurrency),
        Pacer::Closed => match &s.active_workers {
            Some(stages) => format!("closed loop, {} workers, active in stages {stages}", s.concurrency),
            None => format!("closed loop, {} workers", s.concurrency),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slow_backend_stands_above_twice_the_others_median() {
        let share = |p50_us: u64, calls: u64| {
            let mut t = crate::record::shard::NameTally::default();
            for _ in 0..calls {
                t.latency.record(p50_us * 1000).unwrap();
            }
            t.calls = calls;
            t
        };
        let kinds = |backends: &[(&str, crate::record::shard::NameTally)]| {
            slow_backends(backends).iter().map(|n| n.text.split(' ').nth(1).unwrap().to_string()).collect::<Vec<_>>()
        };
        // Three backends: one at 2.5x the median of the others (1 ms and 1.2 ms: 1.1 ms).
        let three = [("a:1", share(1000, 50)), ("b:1", share(1200, 50)), ("c:1", share(2750, 50))];
        assert_eq!(kinds(&three), vec!["c:1"]);
        // Below twice the median is not slow; too few calls are not judged.
        assert!(kinds(&[("a:1", share(1000, 50)), ("b:1", share(1900, 50))]).is_empty());
        assert!(kinds(&[("a:1", share(1000, 50)), ("b:1", share(5000, 19))]).is_empty());
        // Microseconds apart is scheduling noise, not a slow pod.
        assert!(kinds(&[("a:1", share(20, 50)), ("b:1", share(90, 50))]).is_empty());
        assert!(kinds(&[("a:1", share(1000, 50))]).is_empty(), "one backend has no others");
    }

    #[test]
    fn hiccups_stand_out_only_well_above_the_floor() {
        let us = Duration::from_micros;
        assert!(hiccups_stand_out(us(5_000), us(100)));
        assert!(!hiccups_stand_out(us(500), us(100)), "within 500 µs of the floor");
        assert!(!hiccups_stand_out(us(1_900), us(1_000)), "under twice the floor");
        assert!(hiccups_stand_out(us(2_100), us(1_000)));
    }
}
