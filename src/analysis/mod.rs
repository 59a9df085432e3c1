//! Analysis: what a run's recording means, worked out once when the run is finished
//! (`finish`): the summary's numbers, the steady state and the warm-up cut out of the result,
//! the assertions checked, the notices, the server's count cross-checked. What it leaves is
//! the typed result (`result::Run`, made by `to_result`), the one model every format
//! (src/report), merge, compare and the history read; nothing here prints.
pub mod cross_check;
pub mod notices;
pub mod steady;
mod summary;
pub mod to_result;

pub use notices::{Notice, NoticeKind};
pub use steady::SteadyState;
pub use summary::*;

use crate::calibrate::Calibration;
use crate::grpc::status::PerStatus;
use crate::grpc::transport::{Bidi, CallKind};
use crate::load::engine::Recorded;
use crate::load::plan::Plan;
use crate::record::early::EarlyIntervals;
use crate::record::intervals::IntervalRow;
use crate::record::shard::NameTally;
use crate::stats::assertions::{Assertion, Metric, Value};
use crate::stats::{self, Latency};
use crate::units;
use hdrhistogram::Histogram;
use tonic::Code;

/// A run as the engine and the sinks left it, with what was read beside it.
pub struct Run<'a> {
    pub plan: Plan,
    pub meta: Meta,
    /// The method's full name, or the words naming a workload.
    pub call: &'a str,
    /// The kind of the run's calls (a mix of several: unary, its messages not counted apart)
    /// and, for bidi streams, how their requests wait for responses.
    pub kind: CallKind,
    pub bidi: Bidi,
    pub recorded: Recorded,
    pub checks: &'a [Assertion],
    pub rows: Vec<IntervalRow>,
    /// `--warmup auto`: the first intervals kept whole, to cut the warm-up found.
    pub early: Option<&'a EarlyIntervals>,
    /// `--workload`: each call's (name, method), in the mix's order.
    pub call_names: Vec<(String, String)>,
    /// `--workload` flows: each one's (name, steps).
    pub flow_names: Vec<(String, Vec<String>)>,
    /// `--workload` checks: each one's (call name, expression).
    pub check_names: Vec<(String, String)>,
    /// The machine's floor: None when left out (`--no-calibrate`), Some(None) when the
    /// machine was never calibrated.
    pub floor: Option<Option<Calibration>>,
    /// The client's hiccups during the run: measured beside the floor, and over backends.
    pub hiccups: Option<&'a Histogram<u64>>,
    /// The server's count, when the target serves the lab's Stats.
    pub server: Option<ServerSide>,
    /// Streams the client reset itself (warm-up included; `run --replay` where the log ended
    /// them CANCELLED, `--cancel-after`): OK calls to the client, cancelled ones to the server.
    pub client_resets: u64,
    /// `run --replay`: what the result says of the log, from what the run measured.
    pub replay: Option<FinishReplay<'a>>,
}

/// `run --replay`: the replay's section of the result, made from what the run measured and
/// the calls made of each call of the mix (in the mix's order).
pub type FinishReplay<'a> = Box<dyn FnOnce(&crate::record::Tally, &[u64]) -> crate::result::replay::Replay + 'a>;

/// The run's typed result, every analysis applied once, in this order: the steady state
/// found and (`--warmup auto`) the warm-up cut; the numbers; the notices; the floor's; the
/// server's; the assertions, checked on the result as a merged result's are (`check`).
pub fn finish(mut run: Run) -> crate::result::Run {
    let checks = run.checks;
    let replay = run.replay.take();
    let summary = summary_of(run);
    let mut result = to_result::result(&summary);
    result.replay = replay.map(|finish| {
        let calls: Vec<u64> = summary.call_shares.iter().map(|(_, share)| share.measured.calls).collect();
        finish(&summary.measured, &calls)
    });
    result.assertions = Some(checked(&result, checks, &summary.measured.call_latency));
    result
}

/// The run's `Summary`: everything `finish` works out but the assertions.
pub(crate) fn summary_of(run: Run) -> Summary {
    let Run {
        mut plan,
        meta,
        call,
        kind,
        bidi,
        mut recorded,
        checks: _,
        mut rows,
        early,
        call_names,
        flow_names,
        check_names,
        floor,
        hiccups,
        server,
        client_resets,
        replay: _,
    } = run;
    let steady = steady::steady_state(&rows, plan.interval);
    if let Some(early) = early {
        if let Some(length) = steady::cut_found_warmup(&mut recorded, &mut rows, &steady, early) {
            plan.warmup = length;
        }
    }
    // Taken out before `summarize` copies the measured tally: each backend's latency is most
    // of it with many addresses (1000: 36 MB).
    let backend_shares = backend_shares(&mut recorded);
    let mut summary = summarize(&plan, meta, call, &recorded, rows, steady);
    summary.messages = messages(kind, bidi, &recorded);
    // Each name with its numbers (the unsent calls' among them, and its calls sent only
    // beside), paired once.
    let (sent_names, sent_flows) = match summary.sent_only.as_mut() {
        Some(sent) => (
            Some(std::mem::take(&mut sent.by_name).into_iter().map(|n| n.latency).collect()),
            Some(std::mem::take(&mut sent.by_flow).into_iter().map(|f| f.share.latency).collect()),
        ),
        None => (None, None),
    };
    let measured = &mut summary.measured;
    summary.call_shares = with_sent(paired(call_names, std::mem::take(&mut measured.by_name), no_calls), sent_names);
    summary.flow_shares =
        with_sent(paired(flow_names, std::mem::take(&mut measured.by_flow), Default::default), sent_flows);
    summary.check_counts = paired(check_names, std::mem::take(&mut measured.checks), Default::default);
    summary.backend_shares = backend_shares;
    // Before the notices: the slow-backend judgement weighs the client's own stalls.
    summary.client.hiccups = hiccups.filter(|h| !h.is_empty()).map(crate::calibrate::Floor::of);
    summary.notices = notices::notices(&plan, &summary);
    if let Some(floor) = floor {
        add_floor(&mut summary, floor);
    }
    if let Some(server) = server {
        add_server(&mut summary, server, client_resets);
    }
    summary
}

/// Each address of the run with its backend's measured share, taken out of the measured tally.
/// An idle backend's latency is a full histogram: an empty one, that grows, stands for it.
fn backend_shares(recorded: &mut Recorded) -> Vec<(String, NameTally)> {
    let measured = &mut recorded.measured;
    let mut statuses = std::mem::take(&mut measured.by_backend).into_iter();
    let mut latency = measured.backend_latency.take().unwrap_or_default().into_iter();
    let share = |(statuses, latency): (Option<PerStatus>, Option<Histogram<u64>>)| match statuses {
        Some(statuses) if statuses.total() > 0 => {
            NameTally { calls: statuses.total(), statuses, latency: latency.unwrap_or_else(|| no_calls().latency) }
        }
        _ => no_calls(),
    };
    recorded.backends.iter().map(|a| (a.to_string(), share((statuses.next(), latency.next())))).collect()
}

/// Each name's share with its sent-only latencies, recorded in the same order as its
/// measured ones (`paired`); none when every due call was sent.
fn with_sent<N, T>(pairs: Vec<(N, T)>, sent: Option<Vec<Histogram<u64>>>) -> Vec<(N, Share<T>)> {
    let mut sent = sent.map(Vec::into_iter);
    pairs
        .into_iter()
        .map(|(name, measured)| (name, Share { measured, sent: sent.as_mut().and_then(Iterator::next) }))
        .collect()
}

/// The measured window as the result writes it, to the µs (`units::secs`): every rate is
/// of it, so that a rate read back from the file (`result::Run::window`) is the one written
/// (calls/s over the ns window and OK calls/s over the written one differed in the last digit).
fn window(r: &Recorded) -> std::time::Duration {
    units::whole_micros(r.window)
}

/// The numbers of the run, before any judgement (no assertion, no notice, no floor, no server).
fn summarize(
    plan: &Plan,
    meta: Meta,
    call: &str,
    r: &Recorded,
    rows: Vec<IntervalRow>,
    steady: SteadyState,
) -> Summary {
    let (m, sent_only) = with_unsent(r);
    let m = &m;
    let c = &m.counts;
    Summary {
        meta,
        target: plan.target.to_string(),
        call: call.to_string(),
        pacer: plan.pacer.clone(),
        concurrency: plan.workers,
        connections: plan.connections,
        loop_per_worker: plan.stop.per_worker,
        active_workers: plan.active_workers.clone(),
        ended: ended(r.ended),
        requests: requests(r),
        statuses: c.call_status,
        attempt_statuses: c.attempt_status,
        errors: errors(r),
        duration: window(r),
        throughput_rps: stats::rate(c.calls, window(r)),
        ok_rps: crate::result::ok_calls_per_s(c.ok(), window(r)),
        latency: Latency::of(&m.call_latency),
        attempt_latency: Latency::of(m.attempt_latency()),
        service_time: Latency::of(m.service_time()),
        schedule_lag: plan.pacer.is_open().then(|| Latency::of(m.schedule_lag())),
        late_sends: c.late_sends,
        late_wakeups: c.late_wakeups,
        warmup: warmup(plan, r),
        rounds: r.rounds.iter().map(|&took| Round { took, rps: stats::rate(plan.workers as u64, took) }).collect(),
        client: client(plan, r),
        notices: Vec::new(),
        measured: m.clone(),
        sent_only,
        intervals: rows,
        interval: plan.interval,
        shard: (!plan.shard.is_whole()).then_some(plan.shard),
        floor: None,
        server: None,
        all_attempts: {
            let mut all = c.attempt_status;
            all.add(&r.warmup.counts.attempt_status);
            all
        },
        elapsed: r.elapsed,
        steady,
        warm_rounds: (!r.rounds.is_empty()).then(|| crate::stats::steady::warm_rounds(&r.rounds)),
        messages: None,
        call_shares: Vec::new(),
        flow_shares: Vec::new(),
        check_counts: Vec::new(),
        backend_shares: Vec::new(),
        replay: None,
    }
}

/// The measured tally with the calls due but never sent in its call latencies (every call's,
/// OK calls', and the name's or flow's the mix would have picked), each at its lower bound;
/// and the tally as recorded, of the calls sent only, when there were such calls. An unsent
/// call did not fail: it waited, so it is among the OK calls' latencies, which `compare`
/// judges; it made no attempt and was never served, so it is in no other histogram.
fn with_unsent(r: &Recorded) -> (crate::record::Tally, Option<crate::record::Tally>) {
    let mut m = r.measured.clone();
    if r.unsent_latency.is_empty() {
        return (m, None);
    }
    let add = |h: &mut Histogram<u64>, more: &Histogram<u64>| h.add(more).expect("same histogram bounds");
    add(&mut m.call_latency, &r.unsent_latency);
    add(&mut m.ok_call_latency, &r.unsent_latency);
    let shares: Vec<&mut Histogram<u64>> = match m.by_flow.is_empty() {
        true => m.by_name.iter_mut().map(|n| &mut n.latency).collect(),
        false => m.by_flow.iter_mut().map(|f| &mut f.share.latency).collect(),
    };
    for (share, unsent) in shares.into_iter().zip(&r.unsent_by_pick) {
        add(share, unsent);
    }
    (m, Some(r.measured.clone()))
}

/// Why the engine stopped, as the result names it.
fn ended(e: crate::load::engine::Ended) -> crate::result::Ended {
    use crate::load::engine::Ended as Engine;
    use crate::result::Ended;
    match e {
        Engine::Completed => Ended::Completed,
        Engine::Interrupted => Ended::Interrupted,
        Engine::DrainTimedOut => Ended::DrainTimedOut,
    }
}

fn requests(r: &Recorded) -> Requests {
    let c = &r.measured.counts;
    Requests {
        total: c.calls,
        ok: c.ok(),
        failed: c.failed(),
        retries: c.retries(),
        attempts: c.attempts,
        retry_exhausted: c.retry_exhausted,
        abandoned: r.abandoned,
        unsent: r.unsent,
    }
}

/// The client's own cost: CPU over every call (warm-up included) and over its threads.
fn client(plan: &Plan, r: &Recorded) -> Client {
    let all_calls = r.measured.counts.calls + r.warmup.counts.calls;
    let threads = plan.threads.max(1);
    Client {
        hiccups: None,
        cpu: r.cpu,
        cpu_per_call: crate::result::cpu_per_call(r.cpu, all_calls),
        max_rss_bytes: r.max_rss_bytes,
        threads,
        utilization: if r.elapsed.is_zero() {
            0.0
        } else {
            r.cpu.as_secs_f64() / r.elapsed.as_secs_f64() / threads as f64
        },
    }
}

/// The warm-up, when the plan has one (a fixed one, or the one `--warmup auto` found).
fn warmup(plan: &Plan, r: &Recorded) -> Option<Phase> {
    (!plan.warmup.is_zero()).then(|| Phase {
        duration: units::whole_micros(r.warmup_window),
        calls: r.warmup.counts.calls,
        throughput_rps: stats::rate(r.warmup.counts.calls, units::whole_micros(r.warmup_window)),
        latency: Latency::of(&r.warmup.call_latency),
    })
}

/// Streaming methods: the messages, apart from the streams.
fn messages(kind: CallKind, bidi: Bidi, r: &Recorded) -> Option<Messages> {
    let (c, m) = (&r.measured.counts, &r.measured);
    (kind != CallKind::Unary).then(|| Messages {
        kind,
        sent: c.messages_sent,
        received: c.messages_received,
        sent_per_s: stats::rate(c.messages_sent, window(r)),
        received_per_s: stats::rate(c.messages_received, window(r)),
        round_trip: (kind == CallKind::Bidi && bidi == Bidi::PingPong).then(|| Latency::of(m.message_latency())),
        first_message: (kind == CallKind::ServerStream).then(|| Latency::of(m.first_message())),
    })
}

/// Failed calls grouped by status and message, most frequent first.
fn errors(r: &Recorded) -> Vec<ErrorKind> {
    let mut kinds: Vec<ErrorKind> = r
        .measured
        .errors
        .iter()
        .map(|((code, message), &count)| ErrorKind { status: Code::from_i32(*code), message: message.clone(), count })
        .collect();
    kinds.sort_by_key(|k| std::cmp::Reverse(k.count));
    kinds
}

/// Every `--assert` against a result read back (a merged one): its latencies from its
/// call-latency histogram, refused when that is not one.
pub fn check(run: &crate::result::Run, checks: &[Assertion]) -> anyhow::Result<Vec<crate::result::Checked>> {
    let latency = match checks.iter().any(|a| matches!(a.metric, Metric::Latency(_))) {
        true => crate::stats::histogram::from_text(&run.histograms.call_latency)
            .map_err(|why| crate::error::bad_input(format!("histograms.call_latency {why}")))?,
        false => Histogram::new(3).expect("3 significant digits are valid"),
    };
    Ok(checked(run, checks, &latency))
}

/// Every `--assert` against a result and its call latencies (ns).
fn checked(run: &crate::result::Run, checks: &[Assertion], latency: &Histogram<u64>) -> Vec<crate::result::Checked> {
    let r = &run.requests;
    let value = |metric: Metric| match metric {
        Metric::Checks => {
            let (pass, fail) = run.checks.iter().flatten().fold((0, 0), |(p, f), c| (p + c.pass, f + c.fail));
            Value::Fraction(if pass + fail == 0 { 0.0 } else { pass as f64 / (pass + fail) as f64 })
        }
        Metric::ErrorRate if r.total == 0 => Value::Fraction(0.0),
        Metric::ErrorRate => Value::Fraction(r.failed as f64 / r.total as f64),
        Metric::Rps => Value::PerSecond(run.throughput_rps),
        Metric::Latency(stat) => Value::Latency(stat.of(latency)),
    };
    let one = |a: &Assertion| {
        let v = value(a.metric);
        crate::result::Checked { assertion: a.text.clone(), value: v.to_string(), ok: a.holds(v) }
    };
    checks.iter().map(one).collect()
}

/// The machine's floor (None: never calibrated), with a notice when the client's hiccups
/// during the run stand well above the floor's.
fn add_floor(s: &mut Summary, floor: Option<Calibration>) {
    if let (Some(run), Some(cal)) = (s.client.hiccups, &floor) {
        s.notices.extend(notices::hiccups(run, cal));
    }
    s.floor = Some(floor);
}

/// The server's count, and the checks that compare it with the client's (`resets`: streams
/// the client reset itself).
fn add_server(s: &mut Summary, server: ServerSide, resets: u64) {
    // A shard's server count holds every shard's calls (they load one server at once):
    // compared with one shard's, it would cry "another client" at its siblings.
    if s.shard.is_none() {
        s.notices.extend(cross_check::cross_check(s, &server, resets));
    }
    s.server = Some(server);
}

/// Runs made up for unit tests: a plan, what the engine might have recorded, the interval
/// series of a server slow for its first seconds.
#[cfg(test)]
pub(crate) mod fixture {
    use super::*;
    use crate::grpc::transport::Target;
    use crate::load::engine::Ended;
    use crate::load::pacer::Pacer;
    use crate::load::plan::{ShardOf, StopAt};
    use crate::record::intervals::Interval;
    use crate::record::Tally;
    use std::time::{Duration, SystemTime};

    /// A server that received `received` calls and answered `ok` of them OK, at `rps` if it
    /// said so.
    pub fn server(received: u64, ok: u64, rps: Option<f64>) -> ServerSide {
        ServerSide {
            received,
            ok,
            failed: received - ok,
            rejected: 0,
            messages_in: received,
            messages_out: ok,
            throughput_rps: rps,
            cpu: Duration::ZERO,
            rss_bytes: 0,
            echo_spin: Duration::ZERO,
        }
    }

    /// Closed loop, 8 workers on 2 threads, 1 s intervals, against a remote target.
    pub fn plan() -> Plan {
        Plan {
            target: Target::new("192.0.2.1", 50051),
            call: Default::default(),
            pacer: Pacer::Closed,
            workers: 8,
            threads: 2,
            connections: 2,
            stop: StopAt { duration: Some(Duration::from_secs(10)), ..Default::default() },
            warmup: Duration::ZERO,
            active_workers: None,
            retry: Default::default(),
            interval: Duration::from_secs(1),
            drain: Duration::from_secs(1),
            keep_responses: false,
            shard: ShardOf::default(),
            start: None,
            warmup_auto: false,
        }
    }

    pub fn meta() -> Meta {
        Meta {
            run_id: uuid::Uuid::nil(),
            started_at: SystemTime::UNIX_EPOCH,
            name: None,
            tags: vec![],
            arguments: vec![],
        }
    }

    /// `calls` calls of `latency`, every `fail_every`-th one UNAVAILABLE (0: none).
    pub fn tally(calls: u64, latency: Duration, fail_every: u64) -> Tally {
        let mut t = Tally::default();
        for i in 1..=calls {
            let status = if fail_every > 0 && i % fail_every == 0 { Code::Unavailable } else { Code::Ok };
            t.record_attempt(latency, status);
            t.record_call(latency, status, false);
            if status != Code::Ok {
                t.record_error(status, "down");
            }
        }
        t
    }

    pub fn recorded(measured: Tally, window: Duration) -> Recorded {
        Recorded {
            started_at: SystemTime::UNIX_EPOCH,
            measured,
            warmup: Tally::default(),
            window,
            warmup_window: Duration::ZERO,
            rounds: vec![],
            cpu: Duration::from_millis(500),
            elapsed: window,
            max_rss_bytes: 10 << 20,
            unsent: 0,
            unsent_latency: crate::record::shard::new_histogram(),
            unsent_by_pick: vec![],
            ended: Ended::Completed,
            abandoned: 0,
            backends: vec![],
        }
    }

    /// The run as `finish` takes it: no checks, no floor, no server.
    pub fn run(plan: Plan, recorded: Recorded, rows: Vec<IntervalRow>) -> Run<'static> {
        Run {
            plan,
            meta: meta(),
            call: "Echo.echo",
            kind: CallKind::Unary,
            bidi: Bidi::PingPong,
            recorded,
            checks: &[],
            rows,
            early: None,
            call_names: vec![],
            flow_names: vec![],
            check_names: vec![],
            floor: None,
            hiccups: None,
            server: None,
            client_resets: 0,
            replay: None,
        }
    }

    /// 100 calls in each of `slow + fast` 1 s intervals: 12 ms for the first `slow`, 3 ms
    /// after. The recorded run (every call measured), its rows, and the early intervals kept.
    pub fn warming_up(slow: usize, fast: usize) -> (Recorded, Vec<IntervalRow>, EarlyIntervals) {
        let (mut all, mut rows, mut early) = (Tally::default(), Vec::new(), EarlyIntervals::default());
        for i in 0..slow + fast {
            let level = if i < slow { 12_000 } else { 3_000 };
            // A little spread, as real calls have: a level, not one value.
            let mut t = Tally::default();
            for k in 0..100u64 {
                t.record_attempt(Duration::from_micros(level + k * 7), Code::Ok);
                t.record_call(Duration::from_micros(level + k * 7), Code::Ok, false);
            }
            let second = Duration::from_secs(1);
            let iv = Interval {
                at: second * (i as u32 + 1),
                length: second,
                warmup: false,
                tally: &t,
                usage: Default::default(),
                in_flight: 0,
            };
            rows.push(IntervalRow::of(&iv));
            early.keep(&iv);
            all.add(&t);
        }
        (recorded(all, Duration::from_secs((slow + fast) as u64)), rows, early)
    }

    pub fn summary(plan: Plan, recorded: Recorded) -> Summary {
        summary_of(run(plan, recorded, vec![]))
    }

    /// The result of an open loop of 100 calls of 1 ms sent and `unsent` never sent, each at
    /// a lower bound of 500 ms.
    pub fn with_unsent(unsent: u64) -> crate::result::Run {
        let mut r = recorded(tally(100, Duration::from_millis(1), 0), Duration::from_secs(1));
        let mut bounds = crate::record::shard::new_histogram();
        bounds.record_n(500_000_000, unsent).unwrap();
        (r.unsent, r.unsent_latency) = (unsent, bounds);
        let mut p = plan();
        p.pacer = Pacer::Open(crate::load::pacer::RateSchedule::constant(200.0), crate::load::pacer::Arrival::Uniform);
        finish(run(p, r, vec![]))
    }
}

#[cfg(test)]
mod tests {
    use super::fixture::*;
    use super::*;
    use crate::stats::steady::Steadiness;
    use std::time::Duration;

    #[test]
    fn numbers_are_of_the_measured_window() {
        let s = summary(plan(), recorded(tally(1000, Duration::from_millis(2), 10), Duration::from_secs(2)));
        assert_eq!((s.requests.total, s.requests.ok, s.requests.failed), (1000, 900, 100));
        assert_eq!(s.throughput_rps, 500.0);
        assert_eq!(s.ok_rps, 450.0);
        assert_eq!(s.errors.len(), 1);
        assert_eq!((s.errors[0].status, s.errors[0].count), (Code::Unavailable, 100));
        assert!(s.warmup.is_none(), "no warm-up planned, none shown");
        assert!(s.messages.is_none(), "unary");

        // A window of a few ms, not a whole µs: the rates are of the window as written, so
        // the file read back gives them again to the bit (calls/s was of the ns window, OK
        // calls/s of the written one: `2123.8 calls/s (2124.0 ok/s)` with every call OK).
        let all_ok = tally(5, Duration::from_millis(1), 0);
        let s = summary(plan(), recorded(all_ok, Duration::from_nanos(1_918_600)));
        assert_eq!(s.duration, Duration::from_micros(1919));
        assert_eq!((s.requests.ok, s.throughput_rps), (5, s.ok_rps));
        let back = crate::result::Run::parse(&to_result::result(&s).to_json_pretty()).unwrap();
        assert_eq!((back.throughput_rps, back.ok_calls_per_s()), (s.throughput_rps, s.throughput_rps));
    }

    /// Issue 39: the calls due but never sent join the headline (every call's, OK calls' and
    /// their flow's latency) at their lower bounds; the calls sent only stay beside it, in the
    /// result too. A run that sent every due call has no sent-only figures.
    #[test]
    fn unsent_calls_join_the_headline_and_the_sent_only_stay_beside() {
        use crate::record::shard::{new_histogram, FlowTally};
        let mut r = recorded(tally(100, Duration::from_millis(1), 0), Duration::from_secs(1));
        r.measured.by_flow = vec![FlowTally::default(), FlowTally::default()];
        let (mut all, mut first, mut second) = (new_histogram(), new_histogram(), new_histogram());
        all.record_n(500_000_000, 10).unwrap();
        first.record_n(500_000_000, 6).unwrap();
        second.record_n(500_000_000, 4).unwrap();
        (r.unsent, r.unsent_latency, r.unsent_by_pick) = (10, all, vec![first, second]);
        let mut run = run(plan(), r, vec![]);
        run.flow_names = vec![("a".into(), vec![]), ("b".into(), vec![])];
        let s = summary_of(run);
        assert_eq!((s.requests.total, s.requests.unsent, s.latency.count), (100, 10, 110));
        assert!(s.latency.percentile(99.0) >= Duration::from_millis(500), "{:?}", s.latency);
        assert_eq!(s.measured.ok_call_latency.len(), 110, "an unsent call did not fail");
        assert_eq!(s.measured.attempt_latency().len(), 100, "nor was it sent");
        let sent = s.sent_only.as_ref().expect("sent-only figures beside");
        assert_eq!(sent.call_latency.len(), 100);
        assert!(sent.call_latency.max() < 2_000_000);
        let result = to_result::result(&s);
        assert_eq!((result.latency_us.count, result.sent_latency_us.as_ref().unwrap().count), (110, 100));
        let flows = result.flows.unwrap();
        assert_eq!((flows["a"].latency_us.count, flows["b"].latency_us.count), (6, 4));
        assert_eq!(flows["a"].sent_latency_us.as_ref().unwrap().count, 0);
        let back = crate::result::Run::parse(&to_result::result(&s).to_json_pretty()).unwrap();
        assert_eq!(back.histograms.sent_call_latency, result.histograms.sent_call_latency);
        // Every due call sent: the headline is the calls sent, nothing beside it.
        let clean = summary(plan(), recorded(tally(100, Duration::from_millis(1), 0), Duration::from_secs(1)));
        assert!(clean.sent_only.is_none() && to_result::result(&clean).sent_latency_us.is_none());
    }

    /// Each call name's sent-only latencies travel with its name and numbers, paired once
    /// (before: to_result looked them up in the sent-only tally by the name's index).
    #[test]
    fn each_names_sent_only_latencies_are_its_own() {
        use crate::record::shard::{new_histogram, NameTally};
        let mut r = recorded(tally(100, Duration::from_millis(1), 0), Duration::from_secs(1));
        let at = |ns: u64, n: u64| {
            let mut h = new_histogram();
            h.record_n(ns, n).unwrap();
            h
        };
        let name = |calls: u64| NameTally { calls, latency: at(1_000_000, calls), ..NameTally::default() };
        r.measured.by_name = vec![name(30), name(70)];
        (r.unsent, r.unsent_latency, r.unsent_by_pick) =
            (10, at(500_000_000, 10), vec![at(500_000_000, 6), at(500_000_000, 4)]);
        let mut run = run(plan(), r, vec![]);
        run.call_names = vec![("put".into(), "Kv.Put".into()), ("get".into(), "Kv.Get".into())];
        let s = summary_of(run);
        let sent: Vec<(&str, Option<u64>)> = s
            .call_shares
            .iter()
            .map(|((name, _), share)| (name.as_str(), share.sent.as_ref().map(|h| h.len())))
            .collect();
        assert_eq!(sent, [("put", Some(30)), ("get", Some(70))]);
        let names = to_result::result(&s).calls_by_name.unwrap();
        let counts = |n: &str| (names[n].latency_us.count, names[n].sent_latency_us.as_ref().map(|l| l.count));
        assert_eq!((counts("put"), counts("get")), ((36, Some(30)), (74, Some(70))));
    }

    #[test]
    fn the_clients_cost_counts_every_call_and_thread() {
        let mut r = recorded(tally(400, Duration::from_millis(1), 0), Duration::from_secs(1));
        r.warmup = tally(100, Duration::from_millis(1), 0);
        let c = client(&plan(), &r);
        assert_eq!(c.cpu_per_call, Duration::from_millis(1), "500 ms over 500 calls, warm-up's included");
        assert_eq!(c.utilization, 0.25, "0.5 s of CPU over 1 s on 2 threads");
    }

    #[test]
    fn a_planned_warmup_is_shown_apart() {
        let mut r = recorded(tally(100, Duration::from_millis(1), 0), Duration::from_secs(1));
        r.warmup = tally(50, Duration::from_millis(5), 0);
        r.warmup_window = Duration::from_millis(500);
        let mut p = plan();
        p.warmup = Duration::from_millis(500);
        let w = warmup(&p, &r).unwrap();
        assert_eq!((w.calls, w.throughput_rps), (50, 100.0));
        assert!(w.latency.max.abs_diff(Duration::from_millis(5)) < Duration::from_micros(10), "{:?}", w.latency.max);
    }

    #[test]
    fn assertions_are_checked_against_the_summary() {
        let checks = crate::stats::assertions::parse("error_rate<5%,rps>=100").unwrap();
        let mut run = run(plan(), recorded(tally(1000, Duration::from_millis(2), 10), Duration::from_secs(2)), vec![]);
        run.checks = &checks;
        let s = finish(run);
        let ok: Vec<bool> = s.assertions.iter().flatten().map(|a| a.ok).collect();
        assert_eq!(ok, [false, true], "10% failed; 500 calls/s");
        assert_eq!(s.breached().len(), 1);
    }

    #[test]
    fn warmup_auto_cuts_the_found_warmup_once_and_loses_no_call() {
        let (recorded, rows, early) = warming_up(4, 12);
        let mut p = plan();
        p.warmup_auto = true;
        let mut run = run(p, recorded, rows);
        run.early = Some(&early);
        let s = summary_of(run);
        // PELT may judge a level or two late; never early, never not at all.
        let Steadiness::Steady { from } = s.steady.verdict else { panic!("{:?}", s.steady) };
        assert!((4..=6).contains(&from), "{:?}", s.steady);
        let w = s.warmup.as_ref().expect("the warm-up found is shown as one");
        assert_eq!((w.duration, w.calls), (Duration::from_secs(from as u64), 100 * from as u64));
        assert_eq!(s.requests.total + w.calls, 1600, "the rest is measured, none lost");
        assert_eq!(s.duration, Duration::from_secs(16 - from as u64));
        assert!(s.latency.max < Duration::from_millis(4), "only the fast server is left: {:?}", s.latency.max);
        let marked: Vec<bool> = s.intervals.iter().map(|r| r.warmup).collect();
        assert_eq!(marked, (0..16).map(|i| i < from).collect::<Vec<_>>());
        assert!(!s.notices.iter().any(|n| n.kind == NoticeKind::WarmUp), "the warm-up is out: {:?}", s.notices);
    }

    #[test]
    fn without_warmup_auto_the_warmup_stays_in_and_a_notice_says_so() {
        let (recorded, rows, _) = warming_up(4, 12);
        let s = summary_of(run(plan(), recorded, rows));
        assert_eq!(s.requests.total, 1600);
        assert!(s.warmup.is_none());
        assert!(s.notices.iter().any(|n| n.kind == NoticeKind::WarmUp), "{:?}", s.notices);
    }
}
