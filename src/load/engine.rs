//! The engine: worker threads, each with one current-thread runtime owning its
//! connections (no call crosses threads); ONE worker loop for every load model, paced by
//! the `Pacer`; a collector on the calling thread merging each thread's `Tally` deltas.
//! The engine never prints: intervals go to what it feeds (`record::Feed`, the run's sinks),
//! the end to a `Recorded`.
use super::balance::{self, Channel, Dialer};
use super::logged::{CallLog, LoggedCall};
use super::plan::{Control, Plan};
pub use super::stage::{Mix, MixCall, MixFlow};
use super::workload::Pick;
use crate::error::run_failed;
use crate::grpc::transport::{CallKind, StreamLimits, StreamObserver};
use crate::grpc::{Connector, PreparedCall, Reply};
use crate::record::intervals::Interval;
use crate::record::resource;
use crate::record::shard::{nanos, new_histogram, Slots};
use crate::record::{CallRecord, Feed, Tally};
use crate::schema::RequestSource;
use bytes::Bytes;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use hdrhistogram::Histogram;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::{watch, Notify};
use tonic::Code;

/// Why a run ended.
/// Why the engine stopped. The result's `result::Ended` words it (and adds `Partial`, which
/// only a merge can be); analysis maps one onto the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Its own limit (-n, -z, --loop, rounds) was reached and every call was answered.
    Completed,
    /// Ctrl-C (or SIGTERM).
    Interrupted,
    /// Calls were still in flight when --drain ran out after the end.
    DrainTimedOut,
}

/// What the engine recorded of a run, before any analysis.
#[derive(Debug)]
pub struct Recorded {
    /// The schedule's zero on the wall clock.
    pub started_at: SystemTime,
    pub measured: Tally,
    pub warmup: Tally,
    /// From the end of the warm-up to the last measured answer.
    pub window: Duration,
    pub warmup_window: Duration,
    /// Burst mode: each round's wall time.
    pub rounds: Vec<Duration>,
    /// The client's own CPU time from the start of the clock to the end (warm-up included;
    /// connecting before the clock is not).
    pub cpu: Duration,
    /// Wall time over which `cpu` was measured.
    pub elapsed: Duration,
    pub max_rss_bytes: u64,
    /// Open loop ended by -z: calls due before the end that were never sent (the client or
    /// the in-flight limit could not keep the rate).
    pub unsent: u64,
    /// Their latencies' lower bounds (the end less each one's intended send time), and those
    /// by the index the mix's `pick` would have given each (a call name, or a flow; empty for
    /// one method): what analysis adds to the headline percentiles.
    pub unsent_latency: Histogram<u64>,
    pub unsent_by_pick: Vec<Histogram<u64>>,
    pub ended: Ended,
    /// Calls started but never answered (abandoned at a hard stop).
    pub abandoned: u64,
    /// Targets broken down by backend: every address of the run, by its index in
    /// `measured.by_backend` (empty otherwise).
    pub backends: Vec<std::net::SocketAddr>,
}

/// A thread's hand-over to the collector.
#[allow(clippy::large_enum_variant)] // sent once per interval: a Box would buy nothing
enum Report {
    Ready(anyhow::Result<()>),
    /// `home` takes the two tallies back, emptied, for the thread's next hand-over. `thread`
    /// handed over at the end of its interval number `upto` (1 is the first; `u32::MAX` for
    /// its last hand-over: it holds no interval up any more).
    Delta {
        warmup: Tally,
        measured: Tally,
        last_answer: Option<Instant>,
        home: mpsc::Sender<Tally>,
        thread: u32,
        upto: u32,
    },
    Done,
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Phase {
    Connecting,
    Go(Instant),
    /// Stop sending; calls in flight may finish.
    Stop,
    /// Abandon calls in flight.
    Abort,
}

/// A call of the mix as the workers use it.
struct Prepared {
    requests: Arc<RequestSource>,
    /// The call's header block, built once for the whole run.
    call: PreparedCall,
    /// Calls of this name started so far: a workload's records cycle per name.
    started: AtomicU64,
    rules: Option<super::flow::Rules>,
    kind: CallKind,
    stream: StreamLimits,
}

/// State every worker thread shares.
struct Shared {
    plan: Plan,
    calls: Vec<Prepared>,
    pick: Pick,
    named: bool,
    flows: Vec<MixFlow>,
    /// The tallies' slots but the backends' (which each thread counts once connected).
    slots: Slots,
    log: Option<Arc<dyn CallLog>>,
    /// How threads open their channels and reconnect them.
    dialer: Dialer,
    details: Option<mpsc::SyncSender<CallRecord>>,
    tickets: AtomicU64,
    /// Poisson arrivals: scheduled sends leave in the tickets' order (`Turns`).
    in_order: bool,
    turns: Turns,
    measured_tickets: AtomicU64,
    started: AtomicU64,
    completed: AtomicU64,
    stopping: AtomicBool,
    phase: watch::Sender<Phase>,
    round_done: Notify,
    round_ends: Mutex<Vec<Instant>>,
    /// The wall clock at the run's start, set once before the go signal: intended send times
    /// in per-call details are this plus the schedule's offset, so they keep its exact spacing.
    start_wall: std::sync::OnceLock<SystemTime>,
}

impl Shared {
    /// No call starts any more; calls in flight may finish. Wakes every sleeping sender.
    fn stop_sending(&self) {
        self.stopping.store(true, Relaxed);
        self.dialer.stop.store(true, Relaxed);
        self.round_done.notify_waiters();
        self.turns.passed.notify_waiters();
        self.phase.send_if_modified(|p| {
            let running = matches!(p, Phase::Go(_));
            if running {
                *p = Phase::Stop;
            }
            running
        });
    }
}

/// Runs the plan to its end (or Ctrl-C), feeding `sinks` every interval (and every call, to
/// the sink that wants calls).
pub fn run(plan: Plan, mix: Mix, sinks: &mut dyn Feed, control: &Control) -> anyhow::Result<Recorded> {
    let threads = plan.threads.max(1);
    let (phase, phase_rx) = watch::channel(Phase::Connecting);
    // The resolver (a dns:/// target) ends with the run, however it ends.
    let (shared, _resolving) = share(plan, mix, sinks.calls(), phase)?;
    let (handles, reports) = start_threads(&shared, &phase_rx, threads)?;
    // Every connection is up before the clock starts; the first failure (or Ctrl-C) ends the run.
    let start = match await_connections(&reports, threads, control)
        .and_then(|()| wait_for_start(shared.plan.start.as_ref(), control))
    {
        Ok(start) => start,
        Err(e) => {
            shared.phase.send_replace(Phase::Abort);
            return Err(e);
        }
    };
    let usage_before = resource::usage();
    let now = (Instant::now(), SystemTime::now());
    let _ = shared.start_wall.set(match start.checked_duration_since(now.0) {
        Some(ahead) => now.1 + ahead,
        None => now.1 - now.0.duration_since(start),
    });
    shared.phase.send_replace(Phase::Go(start));
    let collected = collect(&shared, start, &reports, sinks, control, threads);
    for handle in handles {
        if handle.is_finished() || collected.ended == Ended::Completed {
            let _ = handle.join();
        }
    }
    Ok(recorded(&shared, start, collected, usage_before))
}

/// What every worker thread shares: the mix's calls prepared, the connector, the counters;
/// and the flag that stops a `dns:///` target's resolver when dropped.
fn share(
    plan: Plan,
    mix: Mix,
    details: Option<mpsc::SyncSender<CallRecord>>,
    phase: watch::Sender<Phase>,
) -> anyhow::Result<(Arc<Shared>, StopOnDrop)> {
    let connector = Connector::new(&plan.target)?;
    // Unary runs go over the lean transport (half the CPU per call of h2: docs/design.md,
    // "The lean transport"); streaming calls need h2.
    let unary = mix.calls.iter().all(|c| c.kind == CallKind::Unary);
    let connector = if unary { connector.unary_only() } else { connector };
    let connector = Arc::new(connector.beside_local_tasks());
    let addresses = Arc::new(balance::Addresses::new(&plan.target, connector.addresses()));
    let in_order =
        matches!(plan.pacer, super::pacer::Pacer::Open(_, super::pacer::Arrival::Poisson { .. })) && mix.log.is_none();
    let resolving = StopOnDrop(Arc::new(AtomicBool::new(false)));
    if addresses.dns {
        addresses.keep_resolving(plan.target.clone(), resolving.0.clone());
    }
    let slots = Slots {
        names: if mix.named { mix.calls.len() } else { 0 },
        flows: mix.flows.len(),
        checks: mix.checks(),
        backends: 0,
        // Each backend's latency is kept once per thread for the run (Tally::backend_latency),
        // but in every tally when the early intervals must subtract it.
        backend_latency: plan.warmup_auto,
        // Only open loop sends on a schedule (its calls' service time is not their latency),
        // only retries make an attempt shorter than its call, only streams have messages: a
        // closed unary run's tallies go without those histograms (264 KiB each, resident when
        // made: issue 38).
        schedule_lag: plan.pacer.is_open(),
        retries: plan.retry.max_retries > 0,
        streams: !unary,
    };
    let calls = mix
        .calls
        .into_iter()
        .map(|c| Prepared {
            call: PreparedCall::new(&plan.call.spec(c.path)),
            requests: c.requests,
            started: AtomicU64::new(0),
            rules: c.rules,
            kind: c.kind,
            stream: c.stream,
        })
        .collect();
    let shared = Arc::new(Shared {
        calls,
        pick: mix.pick,
        named: mix.named,
        slots,
        flows: mix.flows,
        log: mix.log,
        plan,
        dialer: Dialer { connector, addresses, stop: Arc::new(AtomicBool::new(false)) },
        details,
        tickets: AtomicU64::new(0),
        in_order,
        turns: Turns::default(),
        measured_tickets: AtomicU64::new(0),
        started: AtomicU64::new(0),
        completed: AtomicU64::new(0),
        stopping: AtomicBool::new(false),
        phase,
        round_done: Notify::new(),
        round_ends: Mutex::new(Vec::new()),
        start_wall: std::sync::OnceLock::new(),
    });
    Ok((shared, resolving))
}

/// Starts the worker threads, each connecting at once; returns them and their reports.
fn start_threads(
    shared: &Arc<Shared>,
    phase: &watch::Receiver<Phase>,
    threads: u32,
) -> anyhow::Result<(Vec<std::thread::JoinHandle<()>>, Receiver<Report>)> {
    // A thread hands over only with two spares the collector sent back, so it has at most one
    // delta on its way, besides its Ready and Done: the channel never fills, and sending never
    // allocates (std's channel allocated a block of 31 messages, 72 KiB, on the sending thread).
    let (report_tx, reports) = crossbeam_channel::bounded(threads as usize * 4);
    let mut handles = Vec::new();
    for index in 0..threads {
        let (shared, phase, tx) = (shared.clone(), phase.clone(), report_tx.clone());
        let handle = std::thread::Builder::new()
            .name(format!("rpcmeter-worker-{index}"))
            .spawn(move || worker_thread(index, shared, phase, tx))
            .map_err(|e| crate::error::internal(format!("cannot start a worker thread: {e}")))?;
        handles.push(handle);
    }
    Ok((handles, reports))
}

/// The run's record once the collector has ended: its windows, CPU, unsent calls and tallies.
fn recorded(shared: &Shared, start: Instant, collected: Collected, usage_before: resource::Usage) -> Recorded {
    let plan = &shared.plan;
    let rounds = round_lengths(start, &shared.round_ends.lock().unwrap());
    // Open loop: n calls at rate r take n/r of schedule, even when the last answer comes back
    // early; the run lasts that long, so that its window never exceeds the run.
    let sent = shared.started.load(Relaxed);
    // One cursor for both reads below: Poisson arrivals are read in turn, once.
    let started_at = shared.start_wall.get().copied().unwrap_or_else(SystemTime::now);
    let mut schedule = plan.pacer.cursor();
    // A log's schedule ends with its calls: the window ends at the last answer.
    let logged = shared.log.as_ref().filter(|log| log.scheduled());
    let slot_end = schedule
        .intended(plan.shard.global(sent))
        .filter(|_| sent > 0 && logged.is_none())
        .and_then(|due| start.checked_add(due));
    if let Some(wait) = slot_end.map(|end| end.saturating_duration_since(Instant::now())) {
        if collected.ended == Ended::Completed {
            std::thread::sleep(wait.min(plan.drain));
        }
    }
    let finished = Instant::now();
    let usage_after = resource::usage();
    let window_end = collected.last_answer.max(slot_end.unwrap_or(start)).min(finished);
    let ran = window_end.saturating_duration_since(start);
    // A drain that ran out still ran the whole schedule: what it never sent is as unsent.
    let (unsent, unsent_latency, unsent_by_pick) = match (plan.stop.duration, plan.stop.total, collected.ended) {
        (_, _, Ended::Interrupted) | (None, _, _) | (_, Some(_), _) => (0, new_histogram(), Vec::new()),
        (Some(d), None, _) => match logged.and_then(|log| log.due_before_end()) {
            // A log's times are not kept: its unsent calls are counted, not in the percentiles.
            Some(due) => (due.saturating_sub(sent), new_histogram(), Vec::new()),
            None => {
                let end = plan.warmup.saturating_add(d);
                let due = schedule.due_by(end).map_or(sent, |due| plan.shard.local_due(due).max(sent));
                let (latency, by_pick) = unsent_bounds(shared, &mut schedule, sent..due, end);
                (due - sent, latency, by_pick)
            }
        },
    };
    Recorded {
        started_at,
        window: ran.saturating_sub(plan.warmup),
        warmup_window: plan.warmup.min(ran),
        rounds,
        cpu: usage_after.cpu.saturating_sub(usage_before.cpu),
        elapsed: finished - start,
        unsent,
        unsent_latency,
        unsent_by_pick,
        max_rss_bytes: usage_after.max_rss_bytes,
        ended: collected.ended,
        abandoned: shared.started.load(Relaxed) - shared.completed.load(Relaxed),
        measured: collected.measured,
        warmup: collected.warmup,
        backends: if shared.dialer.addresses.by_backend { shared.dialer.addresses.known() } else { Vec::new() },
    }
}

/// The lower bounds of the calls of `unsent` (this shard's tickets, due before `end` but never
/// sent), in one histogram and by what the mix would have picked for each (the number a call
/// starts with is its ticket's when every earlier one started).
fn unsent_bounds(
    shared: &Shared,
    schedule: &mut super::pacer::Cursor,
    unsent: std::ops::Range<u64>,
    end: Duration,
) -> (Histogram<u64>, Vec<Histogram<u64>>) {
    let mut all = new_histogram();
    let picks = if shared.flows.is_empty() {
        if shared.named {
            shared.calls.len()
        } else {
            0
        }
    } else {
        shared.flows.len()
    };
    let mut by_pick = vec![new_histogram(); picks];
    let lowest = |d: Duration| Duration::from_nanos(all.lowest_equivalent(nanos(d)));
    let mut runs = Vec::new();
    schedule.unsent_bounds(unsent, &shared.plan.shard, end, lowest, |first, n, bound| runs.push((first, n, bound)));
    for (first, n, bound) in runs {
        let _ = all.record_n(nanos(bound), n);
        if picks > 0 {
            shared.pick.counts(first, n, |i, count| {
                let _ = by_pick[i].record_n(nanos(bound), count);
            });
        }
    }
    (all, by_pick)
}

/// Sets its flag when dropped: a helper thread's stop, whichever way `run` returns.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Relaxed);
    }
}

/// Waits until each of `threads` worker threads has connected; the first failure, a thread
/// that ended, or Ctrl-C is the error.
fn await_connections(reports: &Receiver<Report>, threads: u32, control: &Control) -> anyhow::Result<()> {
    let mut connected = 0;
    while connected < threads {
        let ready = match reports.recv_timeout(Duration::from_millis(50)) {
            Ok(Report::Ready(ready)) => ready,
            Err(RecvTimeoutError::Timeout) if control.interrupts.load(Relaxed) == 0 => continue,
            Err(RecvTimeoutError::Timeout) => Err(anyhow::anyhow!("interrupted while connecting")),
            _ => Err(anyhow::anyhow!("a worker thread ended before connecting")),
        };
        connected += 1;
        // The transport's error already names the target.
        ready.map_err(|err| run_failed(format!("{err:#}")))?;
    }
    Ok(())
}

/// The schedule's zero, once it has come (less `START_LEAD`: threads wait the rest on their
/// precise timers). A shared start (--start-at, --coordinator) is the agreed instant itself,
/// not when this thread wakes up after it (a wake-up 3 ms late shifted every call of one
/// shard against the others'). Ctrl-C while waiting is the error.
fn wait_for_start(shared: Option<&super::plan::Start>, control: &Control) -> anyhow::Result<Instant> {
    let start = match shared {
        Some(start) => start.agree(control)?,
        None => Instant::now() + START_LEAD,
    };
    while let Some(left) = start.checked_duration_since(Instant::now()).and_then(|l| l.checked_sub(START_LEAD)) {
        if control.interrupts.load(Relaxed) > 0 {
            return Err(run_failed("interrupted while waiting for the start"));
        }
        std::thread::sleep(left.min(Duration::from_millis(20)));
    }
    Ok(start)
}

fn round_lengths(start: Instant, ends: &[Instant]) -> Vec<Duration> {
    let mut last = start;
    ends.iter()
        .map(|&end| {
            let length = end - last;
            last = end;
            length
        })
        .collect()
}

struct Collected {
    measured: Tally,
    warmup: Tally,
    last_answer: Instant,
    ended: Ended,
    /// Whether every tally keeps each backend's latency (`Slots::backend_latency`), the
    /// intervals' too; otherwise a thread's table of it comes with its last hand-over.
    each_backend: bool,
}

impl Collected {
    /// A thread's hand-over: its two tallies added to the run's and to the open interval, then
    /// emptied here, off the worker's thread, and sent `home` (a thread that has ended drops them).
    fn take(
        &mut self,
        [warmup, mut measured]: [Tally; 2],
        last_answer: Option<Instant>,
        interval: &mut Tally,
        home: &mpsc::Sender<Tally>,
    ) {
        // A thread's whole-run table is the run's, moved in (1000 backends: 36 MB), not the
        // interval's.
        let table = if self.each_backend { None } else { measured.backend_latency.take() };
        interval.add(&warmup);
        interval.add(&measured);
        self.warmup.add(&warmup);
        self.measured.add(&measured);
        if let Some(table) = table {
            self.measured.add_backend_latency(table);
        }
        if let Some(t) = last_answer {
            self.last_answer = self.last_answer.max(t);
        }
        for mut tally in [warmup, measured] {
            tally.clear();
            let _ = home.send(tally);
        }
    }
}

/// How the collector ends the run: Ctrl-C or the run's own end stop the sending, the drain's
/// end (or a second Ctrl-C) abandons the calls in flight.
struct Ending {
    /// The duration limit's end.
    end: Option<Instant>,
    /// When calls still in flight are abandoned (once sending stopped).
    abort_at: Option<Instant>,
    stopped_by_user: bool,
}

impl Ending {
    /// Turns Ctrl-C and the end into phases at `now`, saying in `ended` why the run ended;
    /// true once the collector should stop waiting for the threads.
    fn over(&mut self, shared: &Shared, now: Instant, interrupts: usize, ended: &mut Ended) -> bool {
        let plan = &shared.plan;
        if interrupts >= 1 && !self.stopped_by_user {
            self.stopped_by_user = true;
            *ended = Ended::Interrupted;
            shared.stop_sending();
            self.abort_at = now.checked_add(plan.drain);
        }
        if self.abort_at.is_none() && self.end.is_some_and(|e| now >= e) {
            // An open loop that fell behind would run past -z: the end stops sending.
            shared.stop_sending();
            self.abort_at = now.checked_add(plan.drain);
        }
        if interrupts >= 2 || self.abort_at.is_some_and(|a| now >= a) {
            if *shared.phase.borrow() != Phase::Abort {
                if *ended == Ended::Completed && shared.started.load(Relaxed) > shared.completed.load(Relaxed) {
                    *ended = Ended::DrainTimedOut;
                }
                shared.phase.send_replace(Phase::Abort);
                // Threads answer an abort at once; give them a moment to hand over, no more.
                self.abort_at = Some(now + Duration::from_millis(500));
            } else if self.abort_at.is_some_and(|a| now >= a) {
                if *ended == Ended::Completed {
                    *ended = Ended::DrainTimedOut;
                }
                return true;
            }
        }
        false
    }
}

/// The collector: merges deltas, closes intervals, turns Ctrl-C and the end into phases.
fn collect(
    shared: &Shared,
    start: Instant,
    reports: &Receiver<Report>,
    sinks: &mut dyn Feed,
    control: &Control,
    threads: u32,
) -> Collected {
    let plan = &shared.plan;
    let mut out = Collected {
        measured: Tally::with_slots(shared.slots),
        warmup: Tally::with_slots(shared.slots),
        last_answer: start,
        ended: Ended::Completed,
        each_backend: shared.slots.backend_latency,
    };
    let mut interval = Tally::with_slots(shared.slots);
    let mut intervals_closed = 0u32;
    // Each thread's last hand-over, by the intervals it closed (`Report::Delta::upto`).
    let mut handed = vec![0u32; threads as usize];
    let mut done = 0;
    // The run's own end (duration limit) starts the drain too. Durations are bounded when
    // the flags are read, so these sums cannot overflow; checked all the same.
    let end = plan.stop.duration.and_then(|d| start.checked_add(plan.warmup.saturating_add(d)));
    let mut ending = Ending { end, abort_at: None, stopped_by_user: false };
    while done < threads {
        match reports.recv_timeout(Duration::from_millis(20)) {
            Ok(Report::Delta { warmup, measured, last_answer, home, thread, upto }) => {
                if let Some(h) = handed.get_mut(thread as usize) {
                    *h = upto;
                }
                out.take([warmup, measured], last_answer, &mut interval, &home);
            }
            Ok(Report::Done) => done += 1,
            Ok(Report::Ready(_)) | Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        let now = Instant::now();
        // Threads hand over at each interval's end; the interval closes once every thread has
        // (after a short grace), so that each call lands in the interval it belongs to. A
        // thread held up past the end (a busy machine) is waited for up to one more interval:
        // closing without it moved its calls into the next interval and left this one empty.
        let closes = plan.interval * (intervals_closed + 1);
        let all_handed = handed.iter().all(|&upto| upto > intervals_closed);
        let since = now.saturating_duration_since(start);
        if since >= closes + HANDOVER_GRACE && (all_handed || since >= closes + plan.interval.max(HANDOVER_GRACE)) {
            intervals_closed += 1;
            emit(sinks, &mut interval, shared, plan.interval * intervals_closed, plan.interval);
        }
        if ending.over(shared, now, control.interrupts.load(Relaxed), &mut out.ended) {
            break;
        }
    }
    // The last, shorter interval: what arrived after the last full one.
    let ran = out.last_answer.saturating_duration_since(start).max(plan.interval * intervals_closed);
    if interval.counts.calls > 0 {
        emit(sinks, &mut interval, shared, ran, ran - plan.interval * intervals_closed);
    }
    out
}

/// How far ahead of the go signal the run's clock starts: a worker thread parked in the
/// kernel took up to 2 ms to wake on a busy machine, and its first calls were then late by
/// that much, backlog that was only the start. Threads wait for the start on their precise
/// timers instead.
const START_LEAD: Duration = Duration::from_millis(5);

/// How long after an interval's end the collector waits for the threads' hand-overs.
const HANDOVER_GRACE: Duration = Duration::from_millis(25);

fn emit(sinks: &mut dyn Feed, interval: &mut Tally, shared: &Shared, at: Duration, length: Duration) {
    let in_flight = shared.started.load(Relaxed).saturating_sub(shared.completed.load(Relaxed));
    let warmup = at <= shared.plan.warmup;
    sinks.interval(&Interval { at, length, warmup, tally: interval, usage: resource::usage(), in_flight });
    interval.clear();
}

/// One worker thread: its own current-thread runtime, connections and tallies.
fn worker_thread(index: u32, shared: Arc<Shared>, mut phase: watch::Receiver<Phase>, tx: Sender<Report>) {
    // The precise timer paces the open loop's sends and every retry's backoff.
    if shared.plan.pacer.is_open() || shared.plan.retry.max_retries > 0 {
        crate::sys::no_timer_slack();
    }
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(err) => {
            let _ = tx.send(Report::Ready(Err(err.into())));
            return;
        }
    };
    // The calls and their connections' drivers are tasks of one LocalSet, so that they share
    // one queue (Connector::beside_local_tasks).
    tokio::task::LocalSet::new().block_on(&runtime, async move {
        let plan = &shared.plan;
        let threads = plan.threads.max(1);
        // Connections index, index + threads, ... live on this thread.
        let mine = (index..plan.connections.max(1)).step_by(threads as usize).count().max(1);
        let mut channels = Vec::with_capacity(mine);
        for _ in 0..mine {
            match Channel::open(&shared.dialer).await {
                Ok(c) => channels.push(c),
                Err(err) => {
                    let _ = tx.send(Report::Ready(Err(err)));
                    return;
                }
            }
        }
        let local = Local::new(index, &shared, &phase, channels);
        // Closed loop and bursts keep every worker busy from the start; an open loop starts
        // one per thread and adds one whenever none is left free for the next due call, so
        // memory follows the calls in flight, not --max-in-flight.
        let first = if plan.pacer.is_open() { 1 } else { plan.workers };
        let first: futures::stream::FuturesUnordered<Worker> =
            std::iter::from_fn(|| next_worker(&local)).take(first as usize).collect();
        let _ = tx.send(Report::Ready(Ok(())));
        let start = loop {
            match *phase.borrow_and_update() {
                Phase::Go(start) => break start,
                Phase::Abort | Phase::Stop => return,
                Phase::Connecting => {}
            }
            if phase.changed().await.is_err() {
                return;
            }
        };
        local.start.set(start);
        local.start_wall.set(shared.start_wall.get().copied().unwrap_or_else(SystemTime::now));
        // A task of its own, not part of the future `block_on` runs: what a connection's
        // driver wakes then runs before the driver's next turn, without the runtime first
        // polling the kernel for events (Connector::beside_local_tasks).
        let running = tokio_util::task::AbortOnDropHandle::new(tokio::task::spawn_local(workers(local.clone(), first)));
        let _stop_waits = tokio_util::task::AbortOnDropHandle::new(tokio::task::spawn_local(stop_waits(local.clone())));
        let flusher = async {
            let mut ends = 0u32;
            let mut tick =
                tokio::time::interval_at(tokio::time::Instant::from_std(start) + plan.interval, plan.interval);
            loop {
                tick.tick().await;
                ends += 1;
                if let Some(delta) = local.take_delta(index, ends) {
                    let _ = tx.send(delta);
                }
            }
        };
        tokio::select! {
            _ = running => {}
            _ = flusher => {}
            _ = wait_for(&mut phase, Phase::Abort) => {}
        }
        let _ = tx.send(local.last_delta(index));
        let _ = tx.send(Report::Done);
    });
}

/// Empty tallies each thread keeps for its hand-overs besides its two live ones: the two the
/// next hand-over swaps in (the collector sends back the two handed over well within an
/// interval; when it is late, the hand-over waits for the next interval).
const SPARE_TALLIES: usize = 2;

/// A worker of a thread, made before the start (its future is some 10 KiB).
type Worker = futures::future::LocalBoxFuture<'static, ()>;

/// The thread's next worker not started yet, if any.
fn next_worker(local: &Rc<Local>) -> Option<Worker> {
    let id = local.unstarted.borrow_mut().next()?;
    Some(Box::pin(worker(local.clone(), id)))
}

/// This thread's workers, `all` of them at the start and more when asked (`more_workers`),
/// beside the thread's timer; ends when every worker has.
async fn workers(local: Rc<Local>, mut all: futures::stream::FuturesUnordered<Worker>) {
    // FuturesUnordered polls only the workers that were woken (join_all polls all of
    // them on every wake-up below 30 futures: 8x the work with 8 workers).
    let run = async {
        local.timer.sleep_until(local.start.get()).await;
        loop {
            tokio::select! {
                ended = futures::StreamExt::next(&mut all), if !all.is_empty() => {
                    if ended.is_some() && all.is_empty() {
                        break;
                    }
                }
                _ = local.more_workers.notified() => {
                    if let Some(worker) = next_worker(&local) {
                        all.push(worker);
                    }
                }
            }
        }
    };
    local.timer.driving(run, || local.in_flight.get() > 0).await;
}

/// Ends the waits of this thread's senders once the run stops sending: one watcher per
/// thread, not a watch receiver per send.
async fn stop_waits(local: Rc<Local>) {
    let mut phase = local.phase.clone();
    let _ = phase.wait_for(|p| matches!(p, Phase::Stop | Phase::Abort)).await;
    local.timer.stop();
}

async fn wait_for(phase: &mut watch::Receiver<Phase>, wanted: Phase) {
    let _ = phase.wait_for(|p| *p == wanted).await;
}

/// What the workers of one thread share (single-threaded: RefCell, no locks).
struct Local {
    shared: Arc<Shared>,
    /// The schedule's zero, set at the go signal (the thread is ready before it).
    start: Cell<Instant>,
    /// `start` on the wall clock (`Shared::start_wall`).
    start_wall: Cell<SystemTime>,
    /// This thread's channels (`--connections`), each with its backends' connections.
    channels: Vec<Channel>,
    /// The slots of each of this thread's tallies.
    slots: Slots,
    warmup: RefCell<Tally>,
    measured: RefCell<Tally>,
    /// Empty tallies for the next hand-over: sent by `home` at the start, then by the collector;
    /// `ready` holds those received.
    home: mpsc::Sender<Tally>,
    spares: mpsc::Receiver<Tally>,
    ready: RefCell<Vec<Tally>>,
    last_answer: RefCell<Option<Instant>>,
    phase: watch::Receiver<Phase>,
    /// Worker ids of this thread not started yet (open loop starts them as needed).
    unstarted: RefCell<std::iter::StepBy<std::ops::Range<u32>>>,
    /// Started workers not in a call: free to take the next due call.
    idle: Cell<u32>,
    /// Calls in flight on this thread: their answers will wake it (`Timer::driving`).
    in_flight: Cell<u32>,
    /// Asks the thread's driver to start one more worker.
    more_workers: Notify,
    /// The open loop's precise timer, shared by this thread's workers.
    timer: super::timer::Timer,
    /// This thread's reader of the intended times (its tickets only grow).
    pacer: RefCell<crate::load::pacer::Cursor>,
}

impl Local {
    /// Thread `index`'s state once its `channels` are open, before the clock starts.
    fn new(index: u32, shared: &Arc<Shared>, phase: &watch::Receiver<Phase>, channels: Vec<Channel>) -> Rc<Local> {
        let (plan, threads) = (&shared.plan, shared.plan.threads.max(1));
        // Every tally this thread will use is allocated before the clock starts, each with a
        // slot for every call name, flow, check and backend: a hand-over swaps in an empty one
        // the collector sent back (allocating and copying a tally's histograms stalled the
        // thread ~4 ms each interval, a lag every open-loop call then due inherited).
        let slots = Slots { backends: shared.dialer.addresses.backends(), ..shared.slots };
        let (home, spares) = mpsc::channel();
        for _ in 0..SPARE_TALLIES {
            let _ = home.send(Tally::with_slots(slots));
        }
        // The thread's table of each backend's measured latency, which the measured tally
        // carries and hands on to the next (`take_delta`).
        let measured = Tally::with_slots(Slots { backend_latency: shared.dialer.addresses.by_backend, ..slots });
        Rc::new(Local {
            shared: shared.clone(),
            // Set at the go signal.
            start: Cell::new(Instant::now()),
            start_wall: Cell::new(SystemTime::now()),
            channels,
            slots,
            warmup: RefCell::new(Tally::with_slots(slots)),
            measured: RefCell::new(measured),
            home,
            spares,
            ready: RefCell::new(Vec::with_capacity(SPARE_TALLIES)),
            last_answer: RefCell::new(None),
            phase: phase.clone(),
            unstarted: RefCell::new((index..plan.workers).step_by(threads as usize)),
            idle: Cell::new(0),
            in_flight: Cell::new(0),
            more_workers: Notify::new(),
            timer: super::timer::Timer::new(),
            pacer: RefCell::new(plan.pacer.cursor()),
        })
    }

    /// Every slot of this thread is in a call: none idle, none left to start.
    fn full(&self) -> bool {
        self.idle.get() == 0 && self.unstarted.borrow().len() == 0
    }

    /// The tallies since the last hand-over, two spares taking their place; None while the
    /// collector has not sent two back yet (it is behind by an interval: the thread keeps
    /// recording into the tallies it has and hands them over next time, rather than allocate).
    fn take_delta(&self, thread: u32, upto: u32) -> Option<Report> {
        let mut spares = self.ready.borrow_mut();
        // Within its capacity: every tally of the thread but its two live ones fits.
        spares.extend(self.spares.try_iter());
        if spares.len() < 2 {
            return None;
        }
        let mut spare = || spares.pop().expect("two spares");
        let mut measured = std::mem::replace(&mut *self.measured.borrow_mut(), spare());
        // The table of each backend's latency stays on the thread, from one measured tally to
        // the next, until its last hand-over (`Tally::backend_latency`).
        if upto != u32::MAX && !self.slots.backend_latency {
            self.measured.borrow_mut().backend_latency = measured.backend_latency.take();
        }
        Some(Report::Delta {
            warmup: std::mem::replace(&mut *self.warmup.borrow_mut(), spare()),
            measured,
            last_answer: *self.last_answer.borrow(),
            home: self.home.clone(),
            thread,
            upto,
        })
    }

    /// The last hand-over, once the calls have ended: waits a moment for the collector's
    /// spares, then makes new ones (nothing is recorded any more).
    fn last_delta(&self, thread: u32) -> Report {
        let waited = Instant::now() + Duration::from_secs(1);
        loop {
            if let Some(report) = self.take_delta(thread, u32::MAX) {
                return report;
            }
            let left = waited.saturating_duration_since(Instant::now());
            match self.spares.recv_timeout(left) {
                Ok(spare) => self.ready.borrow_mut().push(spare),
                Err(_) => {
                    self.ready.borrow_mut().extend([Tally::with_slots(self.slots), Tally::with_slots(self.slots)])
                }
            }
        }
    }

    /// A call's final answer, into the thread's tally: its totals, its name's and its backend's
    /// shares (`at`: which call of the mix, which backend answered), its error.
    #[inline]
    fn record_answer(
        &self,
        warmup: bool,
        (which, backend): (usize, Option<usize>),
        (request, attempts): (&Bytes, u32),
        reply: &Reply,
        latency: Duration,
    ) {
        let mut tally = self.tally(warmup);
        if self.shared.calls[which].kind == CallKind::Unary {
            // A stream counts its request bytes message by message.
            tally.counts.request_bytes += request.len() as u64 * attempts as u64;
        }
        tally.counts.response_bytes += reply.response_bytes;
        tally.record_call(latency, reply.status, self.shared.plan.retry.exhausted(attempts, reply.status));
        if self.shared.named {
            tally.record_named(which, latency, reply.status);
        }
        if let (true, Some(index)) = (self.shared.dialer.addresses.by_backend, backend) {
            tally.record_backend(index, latency, reply.status);
        }
        if reply.status != Code::Ok {
            tally.record_error(reply.status, reply.message.as_deref().unwrap_or(""));
        }
    }

    /// A workload call's checks and captures on its answer (into a flow's `captured` values);
    /// says whether a check failed and whether a capture did.
    fn apply(
        &self,
        rules: &super::flow::Rules,
        warmup: bool,
        (request, reply): (&Bytes, &Reply),
        numbers: (u64, u32),
        captured: Option<&mut super::flow::Captured>,
    ) -> (bool, bool) {
        let mut scratch = super::flow::Captured::new();
        let values = captured.unwrap_or(&mut scratch);
        let mut shard = self.tally(warmup);
        let mut checks_failed = false;
        let applied = rules.apply(request, reply, numbers, values, |index, pass| {
            shard.record_check(index, pass);
            checks_failed |= !pass;
        });
        (checks_failed, applied.is_err())
    }

    fn tally(&self, warmup: bool) -> std::cell::RefMut<'_, Tally> {
        if warmup {
            self.warmup.borrow_mut()
        } else {
            self.measured.borrow_mut()
        }
    }

    /// Waits to send at `at`, precisely; false as soon as the run stops sending (the thread's
    /// `stop_waits` stops the timer).
    async fn wait_to_send(&self, at: Instant) -> bool {
        self.timer.sleep_until(at).await && !self.shared.stopping.load(Relaxed)
    }

    /// Waits until a worker's ramp start; false as soon as the run stops sending.
    async fn wait_to_start(&self, at: Instant) -> bool {
        self.sleep_until(at, |p| matches!(p, Phase::Stop | Phase::Abort)).await && !self.shared.stopping.load(Relaxed)
    }

    /// Waits out a retry's backoff; false only when calls in flight are abandoned, since a
    /// call already started is drained to its final answer like any other.
    async fn back_off(&self, at: Option<Instant>) -> bool {
        let Some(at) = at else { return false };
        // The precise timer: tokio's rounds up to its 1 ms tick, about 1 ms more on every
        // backoff (tests/run_engine.rs, retry_backoffs_last_as_designed_not_a_timer_tick_more).
        if self.timer.wait_until(at).await {
            return true;
        }
        // The run stopped sending, which ends the timer's waits: the rest on tokio's timer.
        self.sleep_until(at, |p| *p == Phase::Abort).await
    }

    async fn sleep_until(&self, at: Instant, interrupted: impl Fn(&Phase) -> bool) -> bool {
        let mut phase = self.phase.clone();
        tokio::select! {
            _ = tokio::time::sleep_until(at.into()) => true,
            _ = phase.wait_for(interrupted) => false,
        }
    }

    /// One attempt on the connection the worker's channel picks (reconnecting first when it
    /// has closed): a unary call, or a stream whose messages are recorded as they pass. Also
    /// says which backend answered (None: no backend was ready). `which`: the call of the mix,
    /// and the header block it is sent with (a logged call's own).
    ///
    /// A unary call's futures are built and moved (a memcpy each) on every call, so this is one
    /// async fn, not a layer more, and a stream's future (some KiB: h2's stream, its schedule,
    /// its timers) is boxed rather than carried by every unary call's (docs/design.md, "The
    /// call path").
    async fn attempt(
        &self,
        slot: usize,
        (which, header): (&Prepared, &PreparedCall),
        request: Bytes,
        body: StreamBody<'_>,
        warmup: bool,
    ) -> (Reply, Option<usize>) {
        let (connection, backend) = match self.channels[slot].pick(&self.shared.dialer).await {
            Ok(picked) => picked,
            Err(reply) => return (reply, None),
        };
        // Captures and checks read the answer (a stream's last message): only their calls keep it.
        let keep = self.shared.plan.keep_responses || which.rules.is_some();
        let reply = if which.kind == CallKind::Unary && body.script.is_none() {
            connection.call(header, request, keep).await
        } else {
            Box::pin(self.stream_on(&connection, (which, header), request, body, (warmup, keep))).await
        };
        (reply, Some(backend))
    }

    /// A streaming call, or a logged stream replayed, on `connection`.
    async fn stream_on(
        &self,
        connection: &crate::grpc::Connection,
        (which, header): (&Prepared, &PreparedCall),
        request: Bytes,
        body: StreamBody<'_>,
        (warmup, keep): (bool, bool),
    ) -> Reply {
        let mut observer = Messages { local: self, warmup };
        if let Some(script) = body.script {
            return connection.replay(header, script, keep, &mut observer).await;
        }
        let requests = &which.requests;
        // A server stream's one request is replayed call by call, as a unary call's; the
        // requests of client and bidi streams message by message within each stream (with a
        // flow's captured values; one they do not fit is sent empty, as `message` does).
        let mut message = |index| match which.kind {
            CallKind::ServerStream => request.clone(),
            _ => requests
                .message_with(body.call, index, body.worker, body.captured)
                .unwrap_or_else(|_| crate::grpc::wire::frame(&[])),
        };
        connection.stream(&which.call, which.kind, which.stream, keep, &mut message, &mut observer).await
    }
}

/// Which streaming call a stream's messages belong to (templates render with its number).
#[derive(Clone, Copy)]
struct StreamBody<'a> {
    call: u64,
    worker: u32,
    /// A flow's values captured so far (its client stream's messages may use them).
    captured: &'a [(String, String)],
    /// A logged stream's messages and times (`run --replay`).
    script: Option<&'a crate::grpc::transport::Script>,
}

/// Records a stream's messages into the worker thread's tally as they pass: counts and
/// histograms only, so a long stream keeps memory flat.
struct Messages<'a> {
    local: &'a Local,
    warmup: bool,
}

impl StreamObserver for Messages<'_> {
    fn sent(&mut self, bytes: u64) {
        self.local.tally(self.warmup).record_message_sent(bytes);
    }

    fn received(&mut self, first: bool, after: Duration) {
        self.local.tally(self.warmup).record_message_received(first.then_some(after));
    }

    fn round_trip(&mut self, took: Duration) {
        self.local.tally(self.warmup).record_round_trip(took);
    }
}

/// THE worker loop: every load model is this loop with another `Pacer`. It stays whole (115
/// lines): its waits (ramp, round, intended time) are awaits of this one future, and every
/// async helper split out of it adds a future that is built and moved on each call (moves of
/// futures are memcpys that callgrind counted on this path: docs/design.md, "The call path").
async fn worker(local: Rc<Local>, id: u32) {
    let shared = &local.shared;
    let plan = &shared.plan;
    let slot = (id / plan.threads.max(1)) as usize % local.channels.len();
    // Durations are bounded when the flags are read; an Instant beyond the clock's range is
    // a time never reached.
    let start = local.start.get();
    let far = |d: Duration| start.checked_add(d);
    let Some(warmup_end) = far(plan.warmup) else { return };
    let end = plan.stop.duration.and_then(|d| far(plan.warmup.saturating_add(d)));
    let mut done = 0u64;
    let mut idle = Idle::new(&local.idle, &local.in_flight);
    // When this worker's last call ended, if every slot of the thread was busy until then
    // (none idle, none left to start): a call due earlier waited that long for a slot.
    let mut freed: Option<Instant> = None;
    while !shared.stopping.load(Relaxed) && plan.stop.per_worker.is_none_or(|n| done < n) {
        // --ramp, --stages: wait while the active workers are not more than this one's number
        // in the whole run; a call in flight always ends first (k6's graceful ramp-down).
        if let Some(active) = &plan.active_workers {
            let now = start.elapsed();
            let starts = active.first_above(plan.shard.global(id as u64) as f64, now).and_then(far);
            match starts {
                Some(at) if end.is_some_and(|e| at >= e) => break,
                Some(at) if at > start + now => {
                    if !local.wait_to_start(at).await {
                        break;
                    }
                    freed = None;
                }
                Some(_) => {}
                None => break,
            }
        }
        let ticket = shared.tickets.fetch_add(1, Relaxed);
        // Bursts: wait until the previous round has fully ended.
        let needed = plan.pacer.completed_before(ticket);
        while shared.completed.load(Acquire) < needed {
            let notified = shared.round_done.notified();
            if shared.completed.load(Acquire) >= needed || shared.stopping.load(Relaxed) {
                break;
            }
            notified.await;
        }
        // A logged call brings its own time (or none: the pacer's); none left ends the worker.
        let logged = match &shared.log {
            Some(log) => match log.next() {
                Some(call) => Some(call),
                None => break,
            },
            None => None,
        };
        let due = match logged.as_ref().and_then(|c| c.due) {
            Some(due) => Some(due),
            None => local.pacer.borrow_mut().intended(plan.shard.global(ticket)),
        };
        let intended = match due {
            Some(due) => match far(due) {
                Some(at) => Some(at),
                None => break,
            },
            None => None,
        };
        let now = Instant::now();
        let send_at = intended.unwrap_or(now);
        if end.is_some_and(|e| send_at >= e) || shared.stopping.load(Relaxed) {
            break;
        }
        let origin = match intended {
            None => Origin::Sent,
            // Due before this worker was free: until then every slot was busy, a wait that is
            // the server's doing (or --max-in-flight's); the rest is the client's own.
            Some(due) if now > due => {
                Origin::Intended { due, slot_wait: freed.map_or(Duration::ZERO, |f| f.saturating_duration_since(due)) }
            }
            Some(due) => {
                if !local.wait_to_send(due).await {
                    break;
                }
                Origin::Intended { due, slot_wait: Duration::ZERO }
            }
        };
        // Poisson arrivals: the earlier tickets' sends go first (`Turn`), and the claims of -n
        // below follow the tickets' order.
        let turn = match intended.is_some() && shared.in_order {
            true => match shared.turns.wait(ticket, &shared.stopping).await {
                Some(turn) => Some(turn),
                None => break,
            },
            false => None,
        };
        let warmup = send_at < warmup_end;
        if let (false, Some(n)) = (warmup, plan.stop.total) {
            let claimed = shared.measured_tickets.fetch_add(1, Relaxed) + 1;
            if claimed >= n {
                // The last measured call: senders still waiting for theirs have nothing to send.
                shared.stop_sending();
            }
            if claimed > n {
                break;
            }
        }
        let number = shared.started.fetch_add(1, Relaxed);
        let which = logged.as_ref().map_or_else(|| shared.pick.pick(number), |c| c.which);
        if idle.busy() == 0 {
            // No worker left free for the next due call: start one (if the thread has any left).
            local.more_workers.notify_one();
        }
        let answered = match shared.flows.is_empty() {
            true => call(&local, (id, ticket, slot), which, (origin, turn), warmup, None, logged.as_ref()).await.0,
            false => flow(&local, (id, ticket, slot), which, (origin, turn), warmup).await,
        };
        freed = local.full().then_some(answered);
        idle.free();
        let completed = shared.completed.fetch_add(1, AcqRel) + 1;
        if let crate::load::pacer::Pacer::Burst { size } = &plan.pacer {
            if completed.is_multiple_of(*size) {
                shared.round_ends.lock().unwrap().push(Instant::now());
                shared.round_done.notify_waiters();
            }
        }
        // --loop counts measured calls, as -n does.
        done += !warmup as u64;
    }
}

/// Counts a worker among its thread's idle ones while it lives outside a call, and among its
/// calls in flight while inside one.
struct Idle<'a> {
    count: &'a Cell<u32>,
    in_flight: &'a Cell<u32>,
    idle: bool,
}

impl<'a> Idle<'a> {
    fn new(count: &'a Cell<u32>, in_flight: &'a Cell<u32>) -> Idle<'a> {
        count.set(count.get() + 1);
        Idle { count, in_flight, idle: true }
    }

    /// Enters a call; returns how many workers are left idle.
    fn busy(&mut self) -> u32 {
        self.idle = false;
        self.in_flight.set(self.in_flight.get() + 1);
        self.count.set(self.count.get() - 1);
        self.count.get()
    }

    fn free(&mut self) {
        self.idle = true;
        self.in_flight.set(self.in_flight.get() - 1);
        self.count.set(self.count.get() + 1);
    }
}

impl Drop for Idle<'_> {
    fn drop(&mut self) {
        if self.idle {
            self.count.set(self.count.get() - 1);
        } else {
            self.in_flight.set(self.in_flight.get() - 1);
        }
    }
}

/// Poisson arrivals: the scheduled sends leave in the tickets' order. Threads (and a
/// thread's workers) race from their wake-ups to their sends: two sends due microseconds apart
/// (a Poisson process has many such gaps) left in the wrong order 1.6% of the time with 2
/// threads, and the sends' gaps failed the exponential law they are drawn from. Uniform sends
/// are 1/rate apart and keep their race (and its cost) out of the hot path.
#[derive(Default)]
struct Turns {
    /// How many tickets' sends have left.
    sent: AtomicU64,
    /// Wakes the waits parked for their turn, at each send (and when the run stops sending).
    passed: Notify,
}

/// How long a send due now spins (yielding to its thread's other tasks) for the earlier ones
/// before it parks until they have left. On a quiet machine they leave within microseconds of
/// each other (the schedule lag's p99 was 26-28 µs), so a short spin keeps the order at no
/// wake-up's cost. A busy machine deschedules the thread holding an earlier ticket for
/// milliseconds: a waiter that spun through that took a core from it and from the server
/// (two threads behind two busy loops: schedule lag p99 71-602 ms, against 7-17 ms for one
/// thread or uniform sends; bench/poisson_ks.sh).
const TURN_SPIN: Duration = Duration::from_micros(50);

impl Turns {
    /// Waits for ticket `ticket`'s turn: at once when the earlier sends have left (they were
    /// due before it, which is past), else spinning for TURN_SPIN and then parked until they
    /// have (the thread's other tasks run meanwhile). None when the run stops sending first
    /// (`stopping`): the send is not made, as one still waiting for its time is not.
    async fn wait<'a>(&'a self, ticket: u64, stopping: &AtomicBool) -> Option<Turn<'a>> {
        let mut spin_until = None;
        loop {
            // Made before the check: a turn passed between the check and the await wakes it.
            let passed = self.passed.notified();
            if self.sent.load(Acquire) >= ticket {
                return Some(Turn { turns: self, next: ticket + 1 });
            }
            if stopping.load(Relaxed) {
                return None;
            }
            let now = Instant::now();
            if now < *spin_until.get_or_insert(now + TURN_SPIN) {
                tokio::task::yield_now().await;
            } else {
                passed.await;
            }
        }
    }
}

/// The turn of the scheduled send of a ticket: passes to the next ticket when dropped.
struct Turn<'a> {
    turns: &'a Turns,
    next: u64,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.turns.sent.store(self.next, Release);
        self.turns.passed.notify_waiters();
    }
}

/// Where a call's latency starts.
#[derive(Clone, Copy)]
enum Origin {
    /// Closed loop and bursts: the actual send.
    Sent,
    /// Open loop: always the intended send time, as wrk2 counts it, so that any wait a slow
    /// server caused counts (coordinated omission corrected). `slot_wait`: how long after
    /// `due` every in-flight slot stayed busy (the rest of the lag is the client's wake-up).
    Intended { due: Instant, slot_wait: Duration },
}

/// A workload's flow: its steps in order, each leaving when the previous answer came,
/// the captures of each feeding the later ones. Its latency runs from its start (the
/// intended one in an open loop) to its last answer; returns when that came.
async fn flow(
    local: &Local,
    at: (u32, u64, usize),
    which: usize,
    (origin, mut turn): (Origin, Option<Turn<'_>>),
    warmup: bool,
) -> Instant {
    use crate::record::shard::FlowEnd;
    let flow = &local.shared.flows[which];
    let start = match origin {
        Origin::Intended { due, .. } => due,
        Origin::Sent => Instant::now(),
    };
    let mut captured = super::flow::Captured::new();
    let (mut answered, mut end) = (start, FlowEnd::Status(Code::Ok));
    for (i, &step) in flow.steps.iter().enumerate() {
        let origin = if i == 0 { origin } else { Origin::Sent };
        let (at, step) = call(local, at, step, (origin, turn.take()), warmup, Some(&mut captured), None).await;
        answered = at;
        end = match step {
            Step::Answered { status, .. } if status != Code::Ok => FlowEnd::Status(status),
            Step::Answered { checks_failed: true, .. } if flow.stop_on_check_failure => FlowEnd::StoppedByCheck,
            Step::Answered { capture_failed: true, .. } | Step::Unsendable => FlowEnd::CaptureError,
            Step::Answered { .. } => continue,
        };
        break;
    }
    local.tally(warmup).record_flow(which, answered.saturating_duration_since(start), end);
    answered
}

/// How a call of a flow went.
enum Step {
    Answered {
        status: Code,
        checks_failed: bool,
        capture_failed: bool,
    },
    /// Its request could not be made from the values captured (not sent, not counted).
    Unsendable,
}

/// One call: attempts with backoff until a final answer, recorded once; returns when the
/// answer came. `at`: the worker, the call's ticket and the worker's connection slot;
/// `captured`: a flow's values so far (its templates use them, its captures add to them);
/// `logged`: a call from a log (`run --replay`), sent with its own request and metadata.
#[allow(clippy::too_many_arguments)] // one call site each; the engine's own hot path
async fn call(
    local: &Local,
    (worker, ticket, slot): (u32, u64, usize),
    which: usize,
    (origin, turn): (Origin, Option<Turn<'_>>),
    warmup: bool,
    captured: Option<&mut super::flow::Captured>,
    logged: Option<&LoggedCall>,
) -> (Instant, Step) {
    let plan = &local.shared.plan;
    // Numbers of the whole run, as the unsharded schedule gives them: shards' calls and
    // workers never share a {{.RequestNumber}} or {{.WorkerID}} (see ShardOf::global).
    let (ticket, worker) = (plan.shard.global(ticket), plan.shard.global(worker as u64) as u32);
    let named = local.shared.named;
    let prepared = &local.shared.calls[which];
    if let (Some(log), Some(call)) = (&local.shared.log, logged) {
        log.sent(call, warmup);
    }
    let Some(request) = request(prepared, named, (ticket, worker), logged, captured.as_deref()) else {
        return (Instant::now(), Step::Unsendable);
    };
    let header = logged.map_or(&prepared.call, |c| &c.call);
    // The wall clock is read only for per-call details.
    let wall = local.shared.details.as_ref().map(|_| SystemTime::now());
    let first_send = Instant::now();
    // The send's clocks are read: the next ticket's send may go.
    drop(turn);
    let start = match origin {
        Origin::Sent => first_send,
        Origin::Intended { due, slot_wait } => {
            local.tally(warmup).record_lag(first_send.saturating_duration_since(due), slot_wait);
            due
        }
    };
    let mut attempts = 0u32;
    // The backend of the last attempt: the call's answer is its.
    let mut backend: Option<usize>;
    let (reply, answered) = loop {
        attempts += 1;
        let began = if attempts == 1 { first_send } else { Instant::now() };
        let (reply, answered_by) = local
            .attempt(
                slot,
                (prepared, header),
                request.clone(),
                StreamBody {
                    call: ticket,
                    worker,
                    captured: captured.as_deref().map_or(&[], |c| &c[..]),
                    script: logged.and_then(|c| c.stream.as_deref()),
                },
                warmup,
            )
            .await;
        backend = answered_by;
        // One clock read ends the attempt and, when it is the last, the call.
        let ended = Instant::now();
        local.tally(warmup).record_attempt(ended - began, reply.status);
        match plan.retry.backoff(attempts, reply.status) {
            Some(wait) if local.back_off(Instant::now().checked_add(wait)).await => continue,
            _ => break (reply, ended),
        }
    };
    let latency = answered - start;
    local.tally(warmup).record_service_time(answered - first_send);
    local.record_answer(warmup, (which, backend), (&request, attempts), &reply, latency);
    let (checks_failed, capture_failed) = match &prepared.rules {
        Some(rules) => local.apply(rules, warmup, (&request, &reply), (ticket, worker), captured),
        None => (false, false),
    };
    let step = Step::Answered { status: reply.status, checks_failed, capture_failed };
    *local.last_answer.borrow_mut() = Some(answered);
    if local.shared.details.is_some() {
        let sent_at = wall.unwrap_or(UNIX_EPOCH);
        let (intended, call) = (None, ticket);
        let record = CallRecord { call, which, worker, sent_at, intended, latency, request, reply, attempts, warmup };
        local.write_details(origin, record);
    }
    (answered, step)
}

impl Local {
    /// `--csv-details`: the call's row, its intended time (None as `call` makes it) put on
    /// the wall clock when it had one. Synchronous, so `call`'s future carries no state for it.
    fn write_details(&self, origin: Origin, mut record: CallRecord) {
        let Some(details) = &self.shared.details else { return };
        record.intended = match origin {
            Origin::Intended { due, .. } => {
                self.start_wall.get().checked_add(due.saturating_duration_since(self.start.get()))
            }
            Origin::Sent => None,
        };
        // Bounded channel: a slow disk slows the run rather than growing memory.
        let _ = details.send(record);
    }
}

/// A call's request: a logged call's own, or made from the call's requests for its numbers
/// (`at`: the run-wide call and worker numbers) and a flow's captured values; None when those
/// values do not fit its template.
#[inline]
fn request(
    prepared: &Prepared,
    named: bool,
    (ticket, worker): (u64, u32),
    logged: Option<&LoggedCall>,
    captured: Option<&super::flow::Captured>,
) -> Option<Bytes> {
    Some(match (logged, captured) {
        (Some(call), _) => call.request.clone(),
        (None, Some(values)) => {
            prepared.requests.message_with(ticket, prepared.started.fetch_add(1, Relaxed), worker, values).ok()?
        }
        // Templates still see the run-wide call number; records cycle within the name.
        (None, None) if named => prepared.requests.message(ticket, prepared.started.fetch_add(1, Relaxed), worker),
        (None, None) => prepared.requests.request(ticket, worker),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_are_awaited_until_each_thread_is_ready() {
        let (tx, rx) = crossbeam_channel::unbounded();
        for _ in 0..3 {
            tx.send(Report::Ready(Ok(()))).unwrap();
        }
        assert!(await_connections(&rx, 3, &Control::default()).is_ok());
        tx.send(Report::Ready(Ok(()))).unwrap();
        tx.send(Report::Ready(Err(anyhow::anyhow!("127.0.0.1:1: connection refused")))).unwrap();
        let err = await_connections(&rx, 2, &Control::default()).unwrap_err();
        assert_eq!(format!("{err:#}"), "127.0.0.1:1: connection refused");
    }

    #[test]
    fn a_thread_gone_or_ctrl_c_ends_the_wait_for_connections() {
        let (tx, rx) = crossbeam_channel::unbounded::<Report>();
        drop(tx);
        assert!(format!("{:#}", await_connections(&rx, 1, &Control::default()).unwrap_err()).contains("ended"));
        let (_tx, rx) = crossbeam_channel::unbounded::<Report>();
        let stopped = Control::default();
        stopped.interrupts.store(1, Relaxed);
        assert!(format!("{:#}", await_connections(&rx, 1, &stopped).unwrap_err()).contains("interrupted"));
    }

    #[test]
    fn the_start_is_a_lead_ahead_or_the_agreed_instant() {
        let before = Instant::now();
        let start = wait_for_start(None, &Control::default()).unwrap();
        assert!(start >= before + START_LEAD, "threads get the lead to wait on their timers");
        let at = std::time::SystemTime::now() + Duration::from_millis(30);
        let start = wait_for_start(Some(&super::super::plan::Start::At(at)), &Control::default()).unwrap();
        assert!(start >= before + Duration::from_millis(25), "the agreed instant, not now");
        let stopped = Control::default();
        stopped.interrupts.store(1, Relaxed);
        let later = std::time::SystemTime::now() + Duration::from_secs(5);
        assert!(wait_for_start(Some(&super::super::plan::Start::At(later)), &stopped).is_err(), "Ctrl-C ends the wait");
    }

    /// The size of the future that `make` would return, read from its type: `make` is never
    /// called, so its arguments are `never()`s.
    fn future_size<F: std::future::Future>(_: impl FnOnce() -> F) -> usize {
        std::mem::size_of::<F>()
    }

    fn never<T>() -> T {
        unreachable!("future_size never calls what makes the future")
    }

    /// A unary call's futures are built and moved (a memcpy each) on every call: the worker's
    /// `call`, its `attempt`, the connection's `call`. They stay small by boxing what only other
    /// calls need: streams and replays (`Local::stream_on`), reconnecting (`Channel::pick`),
    /// h2's exchange (`Connection::send`).
    #[test]
    fn a_unary_calls_futures_stay_small() {
        let body = StreamBody { call: 0, worker: 0, captured: &[], script: None };
        let sizes = [
            ("call", future_size(|| call(never(), (0, 0, 0), 0, (Origin::Sent, None), false, None, None))),
            (
                "attempt",
                future_size(|| {
                    let (local, prepared): (&Local, &Prepared) = (never(), never());
                    local.attempt(0, (prepared, &prepared.call), Bytes::new(), body, false)
                }),
            ),
            (
                "Connection::call",
                future_size(|| never::<&crate::grpc::Connection>().call(never(), Bytes::new(), false)),
            ),
        ];
        for (name, size) in sizes {
            assert!(size <= CALL_FUTURE_MOST, "{name}'s future is {size} bytes");
        }
    }

    /// The most a unary call's future may take, in bytes, in a debug build (where `call`'s is
    /// 1,328 bytes; with a stream's future inside, over 20 KiB).
    const CALL_FUTURE_MOST: usize = 2048;

    #[test]
    fn rounds_are_the_times_between_their_ends() {
        let start = Instant::now();
        let ms = Duration::from_millis;
        assert_eq!(round_lengths(start, &[start + ms(3), start + ms(10)]), [ms(3), ms(7)]);
    }

    /// A send due while an earlier ticket's has not left (its thread descheduled, as a busy
    /// machine does) parks after TURN_SPIN: here ticket 0's send is held 300 ms by another
    /// thread, and the waiter of ticket 1 takes almost no CPU meanwhile, then goes as soon as
    /// ticket 0 has. It spun through the whole wait (yielding), and took the core the earlier
    /// send needed. A run that stops sending ends the parked waits.
    #[test]
    fn a_send_waiting_for_its_turn_parks_rather_than_spins() {
        let thread_cpu = || {
            let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
            Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
        };
        let rt = || tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let (turns, going) = (Turns::default(), AtomicBool::new(false));
        let held = Duration::from_millis(300);
        let (cpu, next) = std::thread::scope(|scope| {
            scope.spawn(|| {
                let first = rt().block_on(turns.wait(0, &going)).expect("ticket 0's turn is at once");
                // The disturbance itself: the earlier send is this late.
                std::thread::sleep(held);
                drop(first);
            });
            let before = thread_cpu();
            let turn = rt().block_on(turns.wait(1, &going)).expect("ticket 1's turn after ticket 0's send");
            (thread_cpu() - before, turn.next)
        });
        assert_eq!(next, 2);
        assert!(cpu < held / 10, "the wait for the earlier send took {cpu:?} of CPU in {held:?}");

        let stopping = AtomicBool::new(false);
        let ended = std::thread::scope(|scope| {
            let waiting = scope.spawn(|| rt().block_on(turns.wait(5, &stopping)).is_none());
            std::thread::sleep(Duration::from_millis(20));
            stopping.store(true, Relaxed);
            turns.passed.notify_waiters();
            waiting.join().unwrap()
        });
        assert!(ended, "a stopped run's waiter went on to send");
    }
}
