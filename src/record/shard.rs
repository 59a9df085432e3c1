//! A Tally holds everything one worker thread measured since its last hand-over:
//! HDR histograms and counters. Recording never allocates or locks; tallies merge
//! losslessly, so intervals, phases and (later) machines add up exactly.
use crate::grpc::status::PerStatus;
use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::time::Duration;
use tonic::Code;

/// Highest latency a histogram holds (larger values are clamped to it): one hour.
const MAX_NANOS: u64 = 3_600_000_000_000;

pub fn new_histogram() -> Histogram<u64> {
    // 3 significant digits over 1 ns..1 h: fixed size, so recording never resizes.
    Histogram::new_with_bounds(1, MAX_NANOS, 3).expect("static histogram bounds are valid")
}

/// A backend's latency histogram: 2 significant digits (1%) over the same range, 36 KiB of
/// counts instead of 264 KiB. Every histogram's counts are written when it is made
/// (hdrhistogram's `resize` fills them with zeros), so each is resident from the start: with
/// 1000 addresses the 3-digit ones took 264 MB per tally and 1.9 GB at the peak of a debug
/// build's run, and one per backend in each tally still 295 MB in release. So only the series'
/// lines have one in every tally (`Tally::backend_lines`), and each backend's own is kept once
/// per thread for the whole run (`Tally::backend_latency`; docs/design.md, "Recording: no
/// allocation on the call path", Backends).
pub fn new_backend_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_NANOS, 2).expect("static histogram bounds are valid")
}

// The text form of a histogram (what results and logs hold) is the statistics' own.
pub use crate::stats::histogram::{from_text, pack, to_text, unpack};

/// Counters of one tally. Every call ends with exactly one final status, so
/// `calls == sum(call_status)`; every attempt likewise.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counts {
    pub calls: u64,
    pub attempts: u64,
    /// Calls whose final answer was still retryable after the last allowed retry.
    pub retry_exhausted: u64,
    /// Final status of each call, indexed by gRPC code.
    pub call_status: PerStatus,
    /// Status of each attempt, indexed by gRPC code.
    pub attempt_status: PerStatus,
    /// Open loop: sends that left more than `LATE_SEND` after their intended time, mostly
    /// waiting for one of the in-flight slots to free (the pacer fell behind).
    pub late_sends: u64,
    /// Open loop: sends that left more than `LATE_SEND` late mostly for the client's own
    /// reasons, a slot free (a late wake-up: a busy or descheduled client).
    pub late_wakeups: u64,
    pub request_bytes: u64,
    pub response_bytes: u64,
    /// Streaming calls: messages each way (a unary call's one request and response are not
    /// counted here: its calls are its messages).
    pub messages_sent: u64,
    pub messages_received: u64,
}

/// A send later than this after its intended time counts as late.
pub const LATE_SEND: Duration = Duration::from_millis(1);

impl Counts {
    pub fn ok(&self) -> u64 {
        self.call_status.get(Code::Ok)
    }
    pub fn failed(&self) -> u64 {
        self.calls - self.ok()
    }
    pub fn retries(&self) -> u64 {
        self.attempts - self.calls
    }
    fn subtract(&mut self, o: &Counts) {
        self.calls = self.calls.saturating_sub(o.calls);
        self.attempts = self.attempts.saturating_sub(o.attempts);
        self.retry_exhausted = self.retry_exhausted.saturating_sub(o.retry_exhausted);
        self.late_sends = self.late_sends.saturating_sub(o.late_sends);
        self.late_wakeups = self.late_wakeups.saturating_sub(o.late_wakeups);
        self.request_bytes = self.request_bytes.saturating_sub(o.request_bytes);
        self.response_bytes = self.response_bytes.saturating_sub(o.response_bytes);
        self.messages_sent = self.messages_sent.saturating_sub(o.messages_sent);
        self.messages_received = self.messages_received.saturating_sub(o.messages_received);
        self.call_status.subtract(&o.call_status);
        self.attempt_status.subtract(&o.attempt_status);
    }

    fn add(&mut self, o: &Counts) {
        self.calls += o.calls;
        self.attempts += o.attempts;
        self.retry_exhausted += o.retry_exhausted;
        self.late_sends += o.late_sends;
        self.late_wakeups += o.late_wakeups;
        self.request_bytes += o.request_bytes;
        self.response_bytes += o.response_bytes;
        self.messages_sent += o.messages_sent;
        self.messages_received += o.messages_received;
        self.call_status.add(&o.call_status);
        self.attempt_status.add(&o.attempt_status);
    }
}

#[derive(Debug, Clone)]
pub struct Tally {
    /// Call latency: intended (open loop) or actual first send to the final answer,
    /// backoff included.
    pub call_latency: Histogram<u64>,
    /// Call latency of the calls that ended OK: what `compare` judges latency on (a failed
    /// call's latency, a fast rejection say, is no measure of the service).
    pub ok_call_latency: Histogram<u64>,
    /// Latency of each attempt on its own; None where it is the service time (a run without
    /// retries: a call's one attempt lasts from its send to its answer). This, the service
    /// time, the schedule lag and the two message histograms are made only for runs that need
    /// them (`Slots`: 264 KiB each, resident when made). Read through their accessors
    /// (`Tally::attempt_latency`, `Tally::schedule_lag`: an absent one reads as what it equals,
    /// or as empty), written by `record_*`; the fields are `record`'s own (early.rs keeps them
    /// absent or not).
    pub(super) attempt_latency: Option<Histogram<u64>>,
    /// Open loop: how late each send left behind its intended time.
    pub(super) schedule_lag: Option<Histogram<u64>>,
    /// From the actual first send to the final answer: what the server took, without the
    /// time a call waited to be sent; None where it is call latency (a closed loop, whose
    /// calls are timed from their send).
    pub(super) service_time: Option<Histogram<u64>>,
    /// Bidi ping-pong: from a request message's send to its response message.
    pub(super) message_latency: Option<Histogram<u64>>,
    /// Server streams: from the stream's start to its first response message.
    pub(super) first_message: Option<Histogram<u64>>,
    pub counts: Counts,
    /// Failed calls by status and the server's `grpc-message` (or the transport's error),
    /// as ghz groups them; at most `ERROR_KINDS` kinds, the rest counted under one line.
    pub errors: BTreeMap<(i32, String), u64>,
    /// `--workload`: each call name's own share, by its index in the mix (empty otherwise).
    pub by_name: Vec<NameTally>,
    /// `--workload` with flows: each flow's share, by its index in the workload.
    pub by_flow: Vec<FlowTally>,
    /// `--workload` checks, by their index in the workload: (pass, fail).
    pub checks: Vec<(u64, u64)>,
    /// Each backend address's calls by final status, by its index in the run's list of
    /// addresses (empty but for targets broken down by backend: docs/targets.md).
    pub by_backend: Vec<PerStatus>,
    /// Each backend's latency, by the same index, in a tally that keeps it (None otherwise).
    /// A worker thread keeps its measured calls' in one table for the whole run, which moves
    /// from one measured tally to the next at each hand-over and goes with the last one
    /// (engine.rs, `Local::take_delta`); its hand-overs' tallies go without, but for a run
    /// whose warm-up is found afterwards, where each interval's must subtract (`Slots`).
    pub backend_latency: Option<Vec<Histogram<u64>>>,
    /// The latency of the per-backend series' lines (`BACKEND_LINES`): the first backends'
    /// one each, then all the others' together (`Tally::record_backend`).
    pub backend_lines: Vec<Histogram<u64>>,
}

/// The backends of the run's list of addresses that each keep a line of their own in the
/// per-backend series, in the list's order; the rest are folded into one line. So an
/// interval's row holds at most this many lines and one more whatever the number of backends
/// (1000 addresses: 9 lines, not 1000), and the report's plots stay readable (docs/results.md,
/// `backend_intervals`).
pub const BACKEND_LINES: usize = 8;

/// One flow of a workload: whole flows (a `NameTally`: the status each ended with, the
/// latency from its start to its last answer) and why some ended early without a failed
/// status.
#[derive(Debug, Clone, Default)]
pub struct FlowTally {
    pub share: NameTally,
    /// Stopped by a failed check (`stop_on_check_failure`).
    pub stopped_by_check: u64,
    /// Ended because a capture could not be taken or used (too long, absent, wrong type).
    pub capture_errors: u64,
}

impl FlowTally {
    /// Flows that ran every step OK and were not stopped.
    pub fn ok(&self) -> u64 {
        self.share.statuses.get(Code::Ok).saturating_sub(self.stopped_by_check + self.capture_errors)
    }

    fn add(&mut self, o: &FlowTally) {
        self.share.add(&o.share);
        self.stopped_by_check += o.stopped_by_check;
        self.capture_errors += o.capture_errors;
    }

    fn subtract(&mut self, o: &FlowTally) {
        self.share.subtract(&o.share);
        self.stopped_by_check = self.stopped_by_check.saturating_sub(o.stopped_by_check);
        self.capture_errors = self.capture_errors.saturating_sub(o.capture_errors);
    }

    fn clear(&mut self) {
        self.share.clear();
        self.stopped_by_check = 0;
        self.capture_errors = 0;
    }
}

/// How a flow ended, for `Tally::record_flow`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowEnd {
    /// Every step ran; the status is the last step's (or the first failed one's).
    Status(Code),
    StoppedByCheck,
    CaptureError,
}

/// One call name of a workload: its calls, their final statuses and their latency.
#[derive(Debug, Clone)]
pub struct NameTally {
    pub calls: u64,
    pub statuses: PerStatus,
    pub latency: Histogram<u64>,
}

impl Default for NameTally {
    fn default() -> Self {
        NameTally { calls: 0, statuses: PerStatus::default(), latency: new_histogram() }
    }
}

impl NameTally {
    pub fn add(&mut self, other: &NameTally) {
        self.calls += other.calls;
        self.statuses.add(&other.statuses);
        self.latency.add(&other.latency).expect("same histogram bounds");
    }

    fn subtract(&mut self, other: &NameTally) {
        self.calls = self.calls.saturating_sub(other.calls);
        self.statuses.subtract(&other.statuses);
        let _ = self.latency.subtract(&other.latency);
    }

    fn clear(&mut self) {
        self.calls = 0;
        self.statuses = PerStatus::default();
        empty(&mut self.latency);
    }

    fn record(&mut self, latency: Duration, status: Code) {
        self.calls += 1;
        self.statuses.record(status);
        self.latency.saturating_record(nanos(latency));
    }
}

/// Distinct error messages kept per tally: a server that puts a counter in its messages
/// must not grow memory with the run.
pub const ERROR_KINDS: usize = 64;

impl Default for Tally {
    fn default() -> Self {
        Tally {
            call_latency: new_histogram(),
            ok_call_latency: new_histogram(),
            attempt_latency: Some(new_histogram()),
            schedule_lag: None,
            service_time: Some(new_histogram()),
            message_latency: None,
            first_message: None,
            counts: Counts::default(),
            errors: BTreeMap::new(),
            by_name: Vec::new(),
            by_flow: Vec::new(),
            checks: Vec::new(),
            by_backend: Vec::new(),
            backend_latency: None,
            backend_lines: Vec::new(),
        }
    }
}

/// How many per-name, per-flow, per-check and per-backend slots a run's tallies hold, known
/// before the clock starts: a tally made with them finds every slot there when it records
/// (making one, its histogram's 264 KiB of counts, stalled a worker thread for milliseconds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Slots {
    pub names: usize,
    pub flows: usize,
    pub checks: usize,
    pub backends: usize,
    /// Each tally keeps each backend's latency (`Tally::backend_latency`): a run whose warm-up
    /// is found afterwards (`--warmup auto`), whose early intervals must subtract it exactly.
    pub backend_latency: bool,
    /// Open loop: the tallies hold a schedule lag and a service time histogram (a closed
    /// loop's service time is its call latency: `Tally::service_time`).
    pub schedule_lag: bool,
    /// Retries: the tallies hold an attempt latency histogram (without retries a call's
    /// attempt lasts as long as its service time: `Tally::attempt_latency`).
    pub retries: bool,
    /// Streaming calls: the tallies hold the message histograms (round trip, first message).
    pub streams: bool,
}

/// The histogram every absent one reads as: made once, on first read (after a run).
static EMPTY: std::sync::LazyLock<Histogram<u64>> = std::sync::LazyLock::new(new_histogram);

fn or_empty(h: &Option<Histogram<u64>>) -> &Histogram<u64> {
    h.as_ref().unwrap_or(&EMPTY)
}

/// `mine += theirs`, making `mine` only when `theirs` holds a histogram.
fn add_optional(mine: &mut Option<Histogram<u64>>, theirs: &Option<Histogram<u64>>) {
    if let Some(theirs) = theirs {
        mine.get_or_insert_with(new_histogram).add(theirs).expect("same histogram bounds");
    }
}

/// One side of `Tally::add` or `Tally::subtract` (`op`) for a histogram a tally may go without,
/// reading as another then (`mine_is`, `theirs_is`: `Tally::service_time`): `mine op theirs`,
/// made from what mine equals only when theirs has one of its own; None while neither has.
fn derived<E>(
    mine: Option<Histogram<u64>>,
    mine_is: &Histogram<u64>,
    theirs: Option<&Histogram<u64>>,
    theirs_is: &Histogram<u64>,
    op: fn(&mut Histogram<u64>, &Histogram<u64>) -> Result<(), E>,
) -> Option<Histogram<u64>> {
    if mine.is_none() && theirs.is_none() {
        return None;
    }
    let mut mine = mine.unwrap_or_else(|| mine_is.clone());
    // Same bounds on both sides (adding cannot fail); a subtracted part is in mine.
    let _ = op(&mut mine, theirs.unwrap_or(theirs_is));
    Some(mine)
}

/// A latency as a histogram records it: in ns, clamped to what it holds (1 ns to an hour).
pub fn nanos(d: Duration) -> u64 {
    (d.as_nanos() as u64).clamp(1, MAX_NANOS)
}

impl Tally {
    /// An empty tally with every slot of `slots` made.
    pub fn with_slots(slots: Slots) -> Tally {
        Tally {
            by_name: std::iter::repeat_with(NameTally::default).take(slots.names).collect(),
            by_flow: std::iter::repeat_with(FlowTally::default).take(slots.flows).collect(),
            checks: vec![(0, 0); slots.checks],
            by_backend: vec![PerStatus::default(); slots.backends],
            backend_latency: slots.backend_latency.then(|| backend_histograms(slots.backends)),
            backend_lines: backend_histograms(slots.backends.min(BACKEND_LINES + 1)),
            schedule_lag: slots.schedule_lag.then(new_histogram),
            service_time: slots.schedule_lag.then(new_histogram),
            attempt_latency: slots.retries.then(new_histogram),
            message_latency: slots.streams.then(new_histogram),
            first_message: slots.streams.then(new_histogram),
            // Written out, not `..Tally::default()`: that would make (and drop) the attempt and
            // service histograms a default tally has, 264 KiB each.
            call_latency: new_histogram(),
            ok_call_latency: new_histogram(),
            counts: Counts::default(),
            errors: BTreeMap::new(),
        }
    }

    /// The attempt latency histogram; the service time's in a tally without one of its own
    /// (no retries: `Slots::retries`).
    pub fn attempt_latency(&self) -> &Histogram<u64> {
        self.attempt_latency.as_ref().unwrap_or_else(|| self.service_time())
    }

    /// The service time histogram; call latency's in a tally without one of its own (a
    /// closed loop's: `Slots::schedule_lag`).
    pub fn service_time(&self) -> &Histogram<u64> {
        self.service_time.as_ref().unwrap_or(&self.call_latency)
    }

    /// The schedule lag histogram; empty when this tally has none (a closed loop's).
    pub fn schedule_lag(&self) -> &Histogram<u64> {
        or_empty(&self.schedule_lag)
    }

    /// The round trip histogram; empty when this tally has none (no streams).
    pub fn message_latency(&self) -> &Histogram<u64> {
        or_empty(&self.message_latency)
    }

    /// The first message histogram; empty when this tally has none (no streams).
    pub fn first_message(&self) -> &Histogram<u64> {
        or_empty(&self.first_message)
    }

    /// The attempt's latency is recorded where the tally has a histogram for it (it is the
    /// call's service time otherwise: `Slots::retries`).
    pub fn record_attempt(&mut self, latency: Duration, status: Code) {
        if let Some(h) = &mut self.attempt_latency {
            h.saturating_record(nanos(latency));
        }
        self.counts.attempts += 1;
        self.counts.attempt_status.record(status);
    }

    pub fn record_call(&mut self, latency: Duration, status: Code, retry_exhausted: bool) {
        self.call_latency.saturating_record(nanos(latency));
        if status == Code::Ok {
            self.ok_call_latency.saturating_record(nanos(latency));
        }
        self.counts.calls += 1;
        self.counts.call_status.record(status);
        self.counts.retry_exhausted += retry_exhausted as u64;
    }

    /// `--workload`: a call of the mix's call number `index` ended (besides `record_call`).
    /// The slot is there in a tally made `with_slots` of the run; one beyond them is made
    /// here (a tally made otherwise, in tests and merges).
    pub fn record_named(&mut self, index: usize, latency: Duration, status: Code) {
        if index >= self.by_name.len() {
            self.by_name.resize_with(index + 1, NameTally::default);
        }
        self.by_name[index].record(latency, status);
    }

    /// A flow ended, `latency` after it started (its slot as `record_named`'s). An ended flow
    /// is counted under the status that ended it (OK when a check or a capture stopped it:
    /// its calls were answered).
    pub fn record_flow(&mut self, index: usize, latency: Duration, end: FlowEnd) {
        if index >= self.by_flow.len() {
            self.by_flow.resize_with(index + 1, FlowTally::default);
        }
        let flow = &mut self.by_flow[index];
        flow.share.record(latency, if let FlowEnd::Status(code) = end { code } else { Code::Ok });
        flow.stopped_by_check += (end == FlowEnd::StoppedByCheck) as u64;
        flow.capture_errors += (end == FlowEnd::CaptureError) as u64;
    }

    /// Check number `index` of the workload passed or failed.
    pub fn record_check(&mut self, index: usize, pass: bool) {
        if index >= self.checks.len() {
            self.checks.resize(index + 1, (0, 0));
        }
        let (passed, failed) = &mut self.checks[index];
        *passed += pass as u64;
        *failed += !pass as u64;
    }

    /// A call answered by the backend at `index` of the run's addresses (besides `record_call`);
    /// its slot as `record_named`'s (a backend that a `dns:///` target's resolver finds
    /// during the run gets its slot here, the one allocation a recording may make).
    /// Its latency goes into its line's histogram, and into its own in a tally that keeps it.
    pub fn record_backend(&mut self, index: usize, latency: Duration, status: Code) {
        if index >= self.by_backend.len() {
            self.by_backend.resize(index + 1, PerStatus::default());
        }
        self.by_backend[index].record(status);
        if let Some(each) = &mut self.backend_latency {
            grow(each, index + 1);
            each[index].saturating_record(nanos(latency));
        }
        grow(&mut self.backend_lines, line(index) + 1);
        self.backend_lines[line(index)].saturating_record(nanos(latency));
    }

    /// Adds a table of each backend's latency (a worker thread's, at its last hand-over) to
    /// this tally's; moved in, not copied, when this tally has none.
    pub fn add_backend_latency(&mut self, table: Vec<Histogram<u64>>) {
        match &mut self.backend_latency {
            Some(mine) => add_histograms(mine, &table),
            None => self.backend_latency = Some(table),
        }
    }

    /// A failed call's message; allocates only for failures, and only for a kind not seen yet.
    pub fn record_error(&mut self, status: Code, message: &str) {
        add_error(&mut self.errors, (status as i32, message), 1);
    }

    /// Recorded where the tally has a histogram for it (it is call latency otherwise: a closed
    /// loop's, `Slots::schedule_lag`).
    pub fn record_service_time(&mut self, took: Duration) {
        if let Some(h) = &mut self.service_time {
            h.saturating_record(nanos(took));
        }
    }

    /// A stream's request message left.
    pub fn record_message_sent(&mut self, bytes: u64) {
        self.counts.messages_sent += 1;
        self.counts.request_bytes += bytes;
    }

    /// A stream's response message arrived; `first` of its stream, `after` the stream opened.
    pub fn record_message_received(&mut self, first: Option<Duration>) {
        self.counts.messages_received += 1;
        if let Some(after) = first {
            self.first_message.get_or_insert_with(new_histogram).saturating_record(nanos(after));
        }
    }

    /// Bidi ping-pong: one request's round trip.
    pub fn record_round_trip(&mut self, took: Duration) {
        self.message_latency.get_or_insert_with(new_histogram).saturating_record(nanos(took));
    }

    /// `slot_wait`: the part of `lag` during which every in-flight slot was busy; a late send
    /// counts under the larger part of its lag, the slot wait or the client's own lateness.
    /// The histogram is there in a tally made `with_slots` of an open-loop run (as are the
    /// message histograms of a streaming run's); it is made here otherwise (tests, merges).
    pub fn record_lag(&mut self, lag: Duration, slot_wait: Duration) {
        self.schedule_lag.get_or_insert_with(new_histogram).saturating_record(nanos(lag));
        if lag > LATE_SEND {
            let waited = slot_wait >= lag / 2;
            self.counts.late_sends += waited as u64;
            self.counts.late_wakeups += !waited as u64;
        }
    }

    pub fn add(&mut self, other: &Tally) {
        // Same bounds on both sides, so adding cannot fail. The derived ones first, from what
        // each side's equals before this add.
        let attempts = self.attempt_latency.take();
        self.attempt_latency =
            derived(attempts, self.service_time(), other.attempt_latency.as_ref(), other.service_time(), |m, t| {
                m.add(t)
            });
        let service = self.service_time.take();
        self.service_time =
            derived(service, &self.call_latency, other.service_time.as_ref(), &other.call_latency, |m, t| m.add(t));
        self.call_latency.add(&other.call_latency).expect("same histogram bounds");
        self.ok_call_latency.add(&other.ok_call_latency).expect("same histogram bounds");
        add_optional(&mut self.schedule_lag, &other.schedule_lag);
        add_optional(&mut self.message_latency, &other.message_latency);
        add_optional(&mut self.first_message, &other.first_message);
        self.counts.add(&other.counts);
        for ((code, message), n) in &other.errors {
            add_error(&mut self.errors, (*code, message), *n);
        }
        add_each(&mut self.by_name, &other.by_name, NameTally::default, NameTally::add);
        add_each(&mut self.by_backend, &other.by_backend, PerStatus::default, PerStatus::add);
        if let Some(theirs) = &other.backend_latency {
            add_histograms(self.backend_latency.get_or_insert_with(Vec::new), theirs);
        }
        add_histograms(&mut self.backend_lines, &other.backend_lines);
        add_each(&mut self.by_flow, &other.by_flow, FlowTally::default, FlowTally::add);
        add_each(&mut self.checks, &other.checks, Default::default, |mine, theirs| {
            mine.0 += theirs.0;
            mine.1 += theirs.1;
        });
    }

    /// Takes out what `part` recorded, when `part` was added into this tally before (a
    /// warm-up found afterwards). Histograms subtract exactly (they cannot fail: every
    /// count of `part` is in this tally); nothing goes below zero.
    pub fn subtract(&mut self, part: &Tally) {
        let attempts = self.attempt_latency.take();
        self.attempt_latency =
            derived(attempts, self.service_time(), part.attempt_latency.as_ref(), part.service_time(), |m, t| {
                m.subtract(t)
            });
        let service = self.service_time.take();
        self.service_time =
            derived(service, &self.call_latency, part.service_time.as_ref(), &part.call_latency, |m, t| m.subtract(t));
        let _ = self.call_latency.subtract(&part.call_latency);
        let _ = self.ok_call_latency.subtract(&part.ok_call_latency);
        for (mine, theirs) in [
            (&mut self.schedule_lag, &part.schedule_lag),
            (&mut self.message_latency, &part.message_latency),
            (&mut self.first_message, &part.first_message),
        ] {
            if let (Some(mine), Some(theirs)) = (mine, theirs) {
                let _ = mine.subtract(theirs);
            }
        }
        self.counts.subtract(&part.counts);
        for (key, n) in &part.errors {
            if let Some(mine) = self.errors.get_mut(key) {
                *mine = mine.saturating_sub(*n);
            }
        }
        self.errors.retain(|_, n| *n > 0);
        for (mine, theirs) in self.by_name.iter_mut().zip(&part.by_name) {
            mine.subtract(theirs);
        }
        for (mine, theirs) in self.by_backend.iter_mut().zip(&part.by_backend) {
            mine.subtract(theirs);
        }
        let mine = self.backend_latency.iter_mut().flatten().zip(part.backend_latency.iter().flatten());
        for (mine, theirs) in mine.chain(self.backend_lines.iter_mut().zip(&part.backend_lines)) {
            let _ = mine.subtract(theirs);
        }
        for (mine, theirs) in self.by_flow.iter_mut().zip(&part.by_flow) {
            mine.subtract(theirs);
        }
        for (mine, theirs) in self.checks.iter_mut().zip(&part.checks) {
            *mine = (mine.0.saturating_sub(theirs.0), mine.1.saturating_sub(theirs.1));
        }
    }

    /// Empties the tally, keeping its histograms' memory.
    pub fn clear(&mut self) {
        let optional = [
            &mut self.attempt_latency,
            &mut self.service_time,
            &mut self.schedule_lag,
            &mut self.message_latency,
            &mut self.first_message,
        ];
        for h in [&mut self.call_latency, &mut self.ok_call_latency].into_iter().chain(optional.into_iter().flatten()) {
            empty(h);
        }
        self.counts = Counts::default();
        self.errors.clear();
        for name in &mut self.by_name {
            name.clear();
        }
        self.by_backend.fill(PerStatus::default());
        for h in self.backend_latency.iter_mut().flatten().chain(&mut self.backend_lines) {
            empty(h);
        }
        for flow in &mut self.by_flow {
            flow.clear();
        }
        for check in &mut self.checks {
            *check = (0, 0);
        }
    }
}

/// Empties `h` if it holds anything (resetting writes every count: 264 KiB for nothing).
fn empty(h: &mut Histogram<u64>) {
    if !h.is_empty() {
        h.reset();
    }
}

/// Adds slot by slot (per name, flow, check or backend), growing `mine` with `new` to
/// `theirs`' length.
fn add_each<T>(mine: &mut Vec<T>, theirs: &[T], new: fn() -> T, add: fn(&mut T, &T)) {
    if mine.len() < theirs.len() {
        mine.resize_with(theirs.len(), new);
    }
    for (mine, theirs) in mine.iter_mut().zip(theirs) {
        add(mine, theirs);
    }
}

/// `n` backend histograms (`new_backend_histogram`).
fn backend_histograms(n: usize) -> Vec<Histogram<u64>> {
    std::iter::repeat_with(new_backend_histogram).take(n).collect()
}

/// Grows `backends` to `n` backend histograms: only for a backend a `dns:///` target's
/// resolver found during the run (a run's tallies are made with a slot for each one known).
fn grow(backends: &mut Vec<Histogram<u64>>, n: usize) {
    if backends.len() < n {
        backends.resize_with(n, new_backend_histogram);
    }
}

/// Adds backend histograms index by index, growing `mine` to `theirs`.
fn add_histograms(mine: &mut Vec<Histogram<u64>>, theirs: &[Histogram<u64>]) {
    add_each(mine, theirs, new_backend_histogram, |mine, theirs| mine.add(theirs).expect("same histogram bounds"));
}

/// The series' line of the backend at `index` (`BACKEND_LINES`).
fn line(index: usize) -> usize {
    index.min(BACKEND_LINES)
}

/// Where messages beyond `ERROR_KINDS` are counted.
const OTHER_MESSAGES: &str = "(other messages)";

fn add_error(errors: &mut BTreeMap<(i32, String), u64>, (code, message): (i32, &str), n: u64) {
    let others = errors.keys().filter(|(_, m)| m == OTHER_MESSAGES).count();
    let known = errors.len() - others < ERROR_KINDS || message == OTHER_MESSAGES;
    let key = if known || errors.contains_key(&(code, message.to_owned())) { message } else { OTHER_MESSAGES };
    *errors.entry((code, key.to_owned())).or_default() += n;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes of histogram counts a tally holds for its backends (resident: a histogram's
    /// counts are all written when it is made).
    fn backend_bytes(tally: &Tally) -> usize {
        let each = tally.backend_latency.iter().flatten();
        each.chain(&tally.backend_lines).map(|h| h.distinct_values() * 8).sum()
    }

    #[test]
    fn a_thousand_backends_cost_a_hand_over_tally_the_series_lines_not_a_histogram_each() {
        // A run's tallies on a worker thread: the warm-up, the measured one with the thread's
        // table of each backend's latency, and the spares (engine.rs, SPARE_TALLIES). With a
        // histogram per backend in each, 1000 addresses peaked at 295 MB (issue 41).
        let slots = Slots { backends: 1000, ..Slots::default() };
        let hand_over = Tally::with_slots(slots);
        assert_eq!((hand_over.by_backend.len(), hand_over.backend_lines.len()), (1000, BACKEND_LINES + 1));
        assert!(backend_bytes(&hand_over) <= 1 << 20, "{} KiB of counts", backend_bytes(&hand_over) >> 10);
        let table = Tally::with_slots(Slots { backend_latency: true, ..slots });
        assert!(backend_bytes(&table) <= 40 << 20, "{} MiB of counts", backend_bytes(&table) >> 20);
        // The collector takes a thread's table in, not a copy of it, and adds the next.
        let mut run = hand_over.clone();
        let mut table = table.backend_latency.unwrap();
        table[999].record(1000).unwrap();
        let first = table.clone();
        let at = first.as_ptr();
        run.add_backend_latency(first);
        run.add_backend_latency(table);
        assert_eq!(run.backend_latency.as_ref().unwrap().as_ptr(), at);
        assert_eq!(run.backend_latency.as_ref().unwrap()[999].len(), 2);
    }

    #[test]
    fn a_backends_latency_is_within_one_percent_and_merges_with_a_full_histogram() {
        let (mut backend, mut full) = (new_backend_histogram(), new_histogram());
        for us in 1..=1000u64 {
            backend.record(nanos(Duration::from_micros(us * 37))).unwrap();
            full.record(nanos(Duration::from_micros(us * 37))).unwrap();
        }
        for q in [0.5, 0.99, 0.999] {
            let (coarse, fine) = (backend.value_at_quantile(q) as f64, full.value_at_quantile(q) as f64);
            assert!((coarse / fine - 1.0).abs() < 0.01, "q{q}: {coarse} against {fine}");
        }
        backend.add(&full).unwrap();
        assert_eq!(backend.len(), 2000);
    }

    #[test]
    fn only_the_histograms_a_run_records_into_are_made() {
        // A closed unary run: no schedule lag, no messages (264 KiB each, resident: issue 38).
        let closed = Tally::with_slots(Slots::default());
        assert!(closed.schedule_lag.is_none() && closed.message_latency.is_none() && closed.first_message.is_none());
        let open = Tally::with_slots(Slots { schedule_lag: true, ..Slots::default() });
        assert!(open.schedule_lag.is_some() && open.message_latency.is_none());
        let streams = Tally::with_slots(Slots { streams: true, ..Slots::default() });
        assert!(streams.message_latency.is_some() && streams.first_message.is_some());
        assert!(streams.schedule_lag.is_none());
        // Absent reads as empty, and merges, subtracts and clears as empty.
        let (mut all, mut part) = (closed.clone(), open.clone());
        part.record_lag(Duration::from_millis(3), Duration::ZERO);
        part.record_round_trip(Duration::from_millis(2));
        assert_eq!((all.schedule_lag().len(), all.message_latency().len(), all.first_message().len()), (0, 0, 0));
        all.add(&part);
        all.add(&closed);
        assert_eq!((all.schedule_lag().len(), all.message_latency().len()), (1, 1));
        all.subtract(&closed);
        all.subtract(&part);
        assert_eq!((all.schedule_lag().len(), all.message_latency().len()), (0, 0));
        part.clear();
        assert!(part.schedule_lag().is_empty() && part.message_latency().is_empty());
        assert_eq!(closed.schedule_lag(), &new_histogram());
    }

    #[test]
    fn attempts_and_service_time_are_made_only_where_they_differ_from_what_they_equal() {
        // A closed loop without retries: a call's one attempt and its service time are its
        // latency (engine.rs, `call`), and main's results held three identical histograms.
        let closed = Tally::with_slots(Slots::default());
        assert!(closed.attempt_latency.is_none() && closed.service_time.is_none());
        let open = Tally::with_slots(Slots { schedule_lag: true, ..Slots::default() });
        assert!(open.service_time.is_some() && open.attempt_latency.is_none());
        let retries = Tally::with_slots(Slots { retries: true, ..Slots::default() });
        assert!(retries.attempt_latency.is_some() && retries.service_time.is_none());
        // Absent reads as what it equals; merged with a tally that has its own, exactly.
        let (mut a, mut b) = (closed, Tally::default());
        for us in 1..=10 {
            a.record_attempt(Duration::from_micros(us), Code::Ok);
            a.record_service_time(Duration::from_micros(us));
            a.record_call(Duration::from_micros(us), Code::Ok, false);
        }
        b.record_attempt(Duration::from_millis(2), Code::Ok);
        b.record_service_time(Duration::from_millis(3));
        b.record_call(Duration::from_millis(5), Code::Ok, false);
        assert!(a.attempt_latency() == &a.call_latency && a.service_time() == &a.call_latency);
        let mut all = a.clone();
        all.add(&b);
        // Each holds a's 10 calls (1-10 µs) and b's own value of it (2, 3 and 5 ms).
        for (h, theirs) in [
            (all.attempt_latency(), b.attempt_latency()),
            (all.service_time(), b.service_time()),
            (&all.call_latency, &b.call_latency),
        ] {
            assert_eq!((h.len(), h.count_between(1000, 10_000), h.max()), (11, 10, theirs.max()));
        }
        all.subtract(&b);
        assert_eq!((all.attempt_latency(), all.service_time()), (&a.call_latency, &a.call_latency));
        let mut other = b.clone();
        other.add(&a);
        other.subtract(&a);
        assert_eq!((other.attempt_latency(), other.service_time()), (b.attempt_latency(), b.service_time()));
        a.add(&a.clone());
        assert!(a.attempt_latency.is_none() && a.service_time.is_none(), "none made by merging");
    }

    #[test]
    fn merge_is_lossless_and_clear_resets() {
        let mut a = Tally::default();
        let mut b = Tally::default();
        for i in 1..=1000u64 {
            let s = if i % 10 == 0 { Code::Unavailable } else { Code::Ok };
            let target = if i % 2 == 0 { &mut a } else { &mut b };
            target.record_attempt(Duration::from_micros(i), s);
            target.record_call(Duration::from_micros(i), s, false);
        }
        let mut all = a.clone();
        a.clear();
        all.add(&b);
        assert_eq!(a.counts, Counts::default());
        assert_eq!(a.call_latency.len(), 0);
        assert_eq!(all.counts.calls, 1000);
        assert_eq!(all.counts.ok(), 900);
        assert_eq!(all.counts.failed(), 100);
        assert_eq!(all.counts.call_status.get(Code::Unavailable), 100);
        assert_eq!(all.call_latency.len(), 1000);
        // The merged p50 is the p50 of all samples (500 µs), within 3 significant digits.
        let p50 = all.call_latency.value_at_quantile(0.5) as f64;
        assert!((p50 - 500_000.0).abs() / 500_000.0 < 0.001, "{p50}");
    }

    #[test]
    fn per_name_shares_merge_and_subtract_exactly() {
        let (mut a, mut b) = (Tally::default(), Tally::default());
        for i in 0..100u64 {
            let (tally, index) = if i % 3 == 0 { (&mut a, 0) } else { (&mut b, 1 + (i % 2) as usize) };
            tally.record_named(index, Duration::from_micros(i + 1), Code::Ok);
        }
        let mut all = a.clone();
        all.add(&b);
        let calls: Vec<u64> = all.by_name.iter().map(|n| n.calls).collect();
        assert_eq!(calls, vec![34, 33, 33]);
        assert_eq!(all.by_name[1].latency.len(), 33);
        all.subtract(&b);
        let calls: Vec<u64> = all.by_name.iter().map(|n| n.calls).collect();
        assert_eq!(calls, vec![34, 0, 0]);
        all.clear();
        assert_eq!(all.by_name[0].calls + all.by_name[0].latency.len(), 0);
    }

    #[test]
    fn per_backend_shares_merge_subtract_and_clear() {
        // 11 backends, 8 to 10 folded into the last line (the slots grow past the 3 made); `a`
        // keeps each backend's latency (a thread's measured tally), `b` only the lines.
        let slots = Slots { backends: 3, ..Slots::default() };
        let (mut a, mut b) = (Tally::with_slots(Slots { backend_latency: true, ..slots }), Tally::with_slots(slots));
        for i in 0..99u64 {
            let shard = if i % 2 == 0 { &mut a } else { &mut b };
            let status = if i % 10 == 0 { Code::Unavailable } else { Code::Ok };
            shard.record_backend((i % 11) as usize, Duration::from_micros(i + 1), status);
        }
        let mut all = a.clone();
        all.add(&b);
        assert_eq!(all.by_backend.iter().map(PerStatus::total).collect::<Vec<_>>(), vec![9; 11]);
        assert_eq!(all.by_backend.iter().map(|n| n.get(Code::Unavailable)).sum::<u64>(), 10);
        let lines: Vec<u64> = all.backend_lines.iter().map(|h| h.len()).collect();
        assert_eq!(lines, [9, 9, 9, 9, 9, 9, 9, 9, 27]);
        let each: Vec<u64> = all.backend_latency.as_ref().unwrap().iter().map(|h| h.len()).collect();
        assert_eq!(each, [5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5], "a's calls only");
        all.subtract(&b);
        assert_eq!(all.by_backend.iter().map(PerStatus::total).sum::<u64>(), 50);
        assert_eq!(all.backend_lines.iter().map(|h| h.len()).sum::<u64>(), 50);
        all.subtract(&a);
        assert!(all.backend_latency.iter().flatten().all(|h| h.is_empty()));
        a.clear();
        assert!(a.by_backend.iter().all(|n| n.total() == 0));
        assert!(a.backend_lines.iter().chain(a.backend_latency.iter().flatten()).all(|h| h.is_empty()));
    }

    #[test]
    fn retries_are_attempts_minus_calls() {
        let mut s = Tally::default();
        // One call: two rejected attempts then OK; one call that ran out of retries.
        s.record_attempt(Duration::from_millis(1), Code::ResourceExhausted);
        s.record_attempt(Duration::from_millis(1), Code::ResourceExhausted);
        s.record_attempt(Duration::from_millis(1), Code::Ok);
        s.record_call(Duration::from_millis(5), Code::Ok, false);
        s.record_attempt(Duration::from_millis(1), Code::Unavailable);
        s.record_attempt(Duration::from_millis(1), Code::Unavailable);
        s.record_call(Duration::from_millis(5), Code::Unavailable, true);
        assert_eq!(s.counts.calls, 2);
        assert_eq!(s.counts.attempts, 5);
        assert_eq!(s.counts.retries(), 3);
        assert_eq!(s.counts.retry_exhausted, 1);
        assert_eq!(s.counts.attempt_status.get(Code::ResourceExhausted), 2);
    }

    #[test]
    fn errors_are_grouped_by_message_and_bounded() {
        let mut s = Tally::default();
        for i in 0..1000 {
            s.record_error(Code::Internal, &format!("boom {}", i % 100));
        }
        s.record_error(Code::Internal, "boom 1");
        assert!(s.errors.len() <= ERROR_KINDS + 1);
        assert_eq!(s.errors[&(Code::Internal as i32, "boom 1".to_string())], 11);
        assert_eq!(s.errors.values().sum::<u64>(), 1001);
        let mut all = Tally::default();
        all.add(&s);
        assert_eq!(all.errors, s.errors);
    }

    #[test]
    fn histograms_round_trip_through_text() {
        let mut h = new_histogram();
        for v in [1000u64, 2_000_000, 12_000_000] {
            h.record(v).unwrap();
        }
        assert_eq!(from_text(&to_text(&h)).unwrap(), h);
        assert!(from_text("%%%").unwrap_err().contains("not base64"));
        assert!(from_text("aGVsbG8=").unwrap_err().contains("not an HdrHistogram"));
    }

    #[test]
    fn a_part_added_before_subtracts_exactly() {
        let (mut whole, mut early) = (Tally::default(), Tally::default());
        for i in 1..=100u64 {
            let part = if i <= 30 { &mut early } else { &mut whole };
            part.record_attempt(Duration::from_micros(i), Code::Ok);
            part.record_call(Duration::from_micros(i), Code::Ok, false);
        }
        let late = whole.clone();
        whole.add(&early);
        whole.subtract(&early);
        assert_eq!(whole.counts, late.counts);
        assert_eq!(whole.call_latency, late.call_latency);
    }

    #[test]
    fn a_late_send_counts_under_the_larger_part_of_its_lag() {
        let mut s = Tally::default();
        let ms = Duration::from_millis;
        s.record_lag(Duration::from_micros(50), Duration::from_micros(50)); // not late
        s.record_lag(ms(30), ms(29)); // waited for a slot
        s.record_lag(ms(30), ms(15)); // half and half: the slot
        s.record_lag(ms(30), ms(1)); // a late wake-up, not a backlog
        s.record_lag(ms(30), Duration::ZERO);
        assert_eq!((s.counts.late_sends, s.counts.late_wakeups), (2, 2));
        assert_eq!(s.schedule_lag().len(), 5);
    }
}
