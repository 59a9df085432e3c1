//! `run --shard I/N --coordinator HOST:PORT`: the shards of one run meet, start together and
//! hand their results to one place. Shard 0 listens (the hub, on a thread of its own); every
//! shard, shard 0 included, joins it over TCP once its own connections to the target are up,
//! and proves it belongs to the run (trust.rs: the run's secret, never sent, and the run's
//! fingerprint). Each shard answers the hub's pings with the time on its own monotonic clock;
//! the ping with the least round trip tells, within half of it, which time of the shard's
//! clock is which instant of the hub's. When all N have joined, the hub sends each shard the
//! start as a time on that shard's own monotonic clock: the machines' wall clocks never enter,
//! and a shard that reads the start message late (a busy machine) still starts on time. While
//! the run goes each shard sends its interval tallies; at the end its whole result JSON
//! (histograms included); the hub merges them exactly (app/merge.rs) and shard 0 prints the
//! merged result, so one log holds the answer, judged there once (`--assert`). A shard lost
//! mid-run counts with the intervals it sent. `run --shards N` is the same hub in the parent
//! process, its children joining it (app/shards.rs). The messages: protocol.rs.
pub mod protocol;
pub mod trust;

use super::merge;
use super::outputs::{OutputSettings, Outputs};
use super::run::{Coordination, Settings};
use crate::error::{bad_input, output_failed, run_failed};
use crate::load::plan::Control;
use crate::load::plan::Start;
use crate::record::shard::{from_text, new_histogram, to_text};
use crate::report::Format;
use crate::result::{NoticeKind, Run};
use crate::stats::assertions::Assertion;
use crate::stats::histogram::packed_text;
use protocol::{invalid, receive, receive_bytes, send, Message, Tallies, MAX_LINE, MAX_RESULT, MAX_UNPROVEN, VERSION};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use trust::{Credentials, Fingerprint, Role, Secret};

/// Round trips measured per shard, at least, spread over at least `PING_SPAN`: the least is
/// the one least delayed by queues. A shard that has just joined may be busy for a while (on
/// a loaded machine all of 5 quick pings took 230 ms, and half of that came off its start).
const PINGS: u64 = 5;
const PING_SPAN: Duration = Duration::from_millis(300);
const PING_GAP: Duration = Duration::from_millis(20);
/// Time for the start to reach every shard, beyond the slowest round trip.
const START_MARGIN: Duration = Duration::from_millis(200);
/// After the first result, how long the hub waits for the others': the shards' runs have
/// the same length, so a shard that long late is lost (a vanished machine sends no end).
const RESULT_WAIT: Duration = Duration::from_secs(30);
/// How long a shard waits for the hub to confirm its result.
const ACK_WAIT: Duration = Duration::from_secs(30);
/// How long a connection has to prove itself, and a write may block.
const PROOF_WAIT: Duration = Duration::from_secs(10);
/// Connections still proving themselves at once; more are closed at once (each holds a
/// thread and a few KiB).
const MAX_PROVING: usize = 32;

/// What the hub's connection threads tell it; only of shards that proved themselves.
pub enum Event {
    Joined {
        index: u32,
        rtt: Duration,
        /// At this instant of the hub's, the shard's clock read this (ns).
        clock: (Instant, u64),
        stream: TcpStream,
    },
    Interval {
        index: u32,
        tallies: Box<Tallies>,
    },
    Result {
        index: u32,
        result: Box<Run>,
    },
    Failed {
        index: u32,
        why: String,
    },
    /// No more shard will come (`run --shards`: every child has ended).
    Closed,
}

/// What the hub gathered: each shard's result, or why it has none and the intervals it sent
/// before; and the agreed start, on this machine's wall clock (None: the run never started).
#[derive(Default)]
pub struct Outcome {
    pub results: BTreeMap<u32, Run>,
    pub missing: BTreeMap<u32, String>,
    pub intervals: BTreeMap<u32, Vec<Tallies>>,
    pub started_at: Option<SystemTime>,
}

/// Who may join, as every connection thread checks it.
struct Door {
    count: u32,
    secret: Secret,
    fingerprint: Fingerprint,
    /// The shard indexes proven so far: one connection each.
    claimed: Mutex<BTreeSet<u32>>,
    proving: AtomicUsize,
}

/// The listening side: shard 0's (or `run --shards`' parent's).
pub struct Hub {
    pub addr: SocketAddr,
    count: u32,
    events: mpsc::Receiver<Event>,
    /// Ends the hub's waits (`Event::Closed`).
    pub closer: mpsc::Sender<Event>,
    deadline: Instant,
    join_timeout: Duration,
    /// Print lines of the merged intervals as they arrive (None: shard 0 is `--quiet`).
    pub progress: Option<crate::sink::progress::Style>,
}

/// The whole run's progress on stderr, from the intervals every running shard has sent: a
/// line per interval on a terminal, one per `LINE_EVERY` of run time in a log (as a plain
/// run's progress, sink/progress.rs), each of the calls since the line before.
struct Progress {
    /// Run time a line is due at least this long after the last.
    every: Duration,
    /// Intervals already in a line or in the window.
    seen: usize,
    /// The intervals since the last line: calls, failed, latency, length.
    calls: u64,
    failed: u64,
    latency: hdrhistogram::Histogram<u64>,
    length: Duration,
}

impl Progress {
    fn new(style: crate::sink::progress::Style) -> Progress {
        Progress {
            every: style.every(),
            seen: 0,
            calls: 0,
            failed: 0,
            latency: new_histogram(),
            length: Duration::ZERO,
        }
    }

    fn update(&mut self, count: u32, outcome: &Outcome) {
        let running = (0..count).filter(|i| !outcome.results.contains_key(i) && !outcome.missing.contains_key(i));
        let reached = running.map(|i| outcome.intervals.get(&i).map_or(0, Vec::len)).min().unwrap_or(0);
        for k in self.seen..reached {
            let each: Vec<&Tallies> = outcome.intervals.values().filter_map(|all| all.get(k)).collect();
            let Some(first) = each.first() else { continue };
            for t in &each {
                if let Ok(h) = from_text(&t.call_latency) {
                    let _ = self.latency.add(&h);
                }
            }
            self.calls += each.iter().map(|t| t.calls).sum::<u64>();
            self.failed += each.iter().map(|t| t.failed).sum::<u64>();
            self.length += Duration::from_nanos(first.length_ns);
            if self.length >= self.every {
                let at = Duration::from_nanos(first.at_ns.saturating_add(first.length_ns));
                self.line(at, each.len());
            }
        }
        self.seen = self.seen.max(reached);
    }

    /// The window's line, `at` run time at its end; the window starts again.
    fn line(&mut self, at: Duration, shards: usize) {
        let p99 = crate::stats::Statistic::Percentile(99.0).of(&self.latency);
        eprintln!(
            "rpcmeter: {:.1} s: {} calls ({:.1} calls/s, {} failed, p99 {}) from {shards} shards",
            at.as_secs_f64(),
            self.calls,
            crate::stats::rate(self.calls, self.length),
            self.failed,
            crate::units::duration(p99),
        );
        (self.calls, self.failed, self.length) = (0, 0, Duration::ZERO);
        self.latency.reset();
    }
}

/// Listens exactly on `addr`: an address as it is (`0.0.0.0:P`, `[::]:P` for every
/// interface), a name on the first address it resolves to that this machine has (`localhost`
/// on loopback). A name not resolved yet (a pod's own, before the cluster's DNS serves it) is
/// tried again until `within` has passed.
fn listen_on(addr: &str, within: Duration) -> anyhow::Result<TcpListener> {
    let until = Instant::now() + within;
    let cannot = |e: &dyn std::fmt::Display| bad_input(format!("--coordinator {addr}: cannot listen there: {e}"));
    if let Ok(exact) = addr.parse::<SocketAddr>() {
        return TcpListener::bind(exact).map_err(|e| cannot(&e));
    }
    if addr.rsplit_once(':').is_none_or(|(_, port)| port.parse::<u16>().is_err()) {
        return Err(bad_input(format!("--coordinator {addr}: not HOST:PORT")));
    }
    loop {
        match addr.to_socket_addrs() {
            Ok(resolved) => {
                let mut last = None;
                for at in resolved {
                    match TcpListener::bind(at) {
                        Ok(listener) => return Ok(listener),
                        Err(e) => last = Some(e),
                    }
                }
                return Err(cannot(&last.map_or("it resolves to no address".into(), |e| e.to_string())));
            }
            Err(e) if Instant::now() >= until => return Err(cannot(&e)),
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

impl Hub {
    /// Listens on `addr` (port 0: any free port) and prints the bound address on stderr; only
    /// shards that prove they hold its secret and run with its fingerprint may join.
    pub fn listen(addr: &str, count: u32, join_timeout: Duration, credentials: Credentials) -> anyhow::Result<Hub> {
        let Credentials { secret, fingerprint } = credentials;
        let listener = listen_on(addr, join_timeout)?;
        let bound = listener.local_addr().map_err(|e| bad_input(format!("--coordinator {addr}: {e}")))?;
        eprintln!("rpcmeter: coordinator listening on {bound} for {count} shards");
        let (tx, events) = mpsc::channel();
        let closer = tx.clone();
        let door = Arc::new(Door {
            count,
            secret,
            fingerprint,
            claimed: Mutex::new(BTreeSet::new()),
            proving: AtomicUsize::new(0),
        });
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                if door.proving.load(Relaxed) >= MAX_PROVING {
                    continue;
                }
                door.proving.fetch_add(1, Relaxed);
                let (tx, door) = (tx.clone(), door.clone());
                std::thread::spawn(move || serve(stream, &door, tx));
            }
        });
        let deadline = Instant::now() + join_timeout;
        Ok(Hub { addr: bound, count, events, closer, deadline, join_timeout, progress: None })
    }

    /// Where a shard on this machine reaches the hub.
    pub fn local_addr(&self) -> SocketAddr {
        let mut addr = self.addr;
        if addr.ip().is_unspecified() {
            addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        addr
    }

    /// Waits for every shard to join, starts them together, gathers their intervals and
    /// results. When `control` is interrupted (shard 0's Ctrl-C), every shard is told to stop.
    pub fn run(self, control: Option<Arc<Control>>) -> anyhow::Result<Outcome> {
        let interrupted = || control.as_ref().is_some_and(|c| c.interrupts.load(Relaxed) > 0);
        let mut joined = self.join(&interrupted)?;
        let outcome = start_together(&mut joined);
        Ok(self.gather(joined, &interrupted, outcome))
    }

    /// Waits until every shard has joined; on a timeout, a failure or an interrupt, tells
    /// those joined to abort and fails naming why.
    fn join(&self, interrupted: &dyn Fn() -> bool) -> anyhow::Result<Joined> {
        let n = self.count;
        let mut joined = Joined::new();
        while joined.len() < n as usize {
            let left = self.deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let absent: Vec<String> =
                    (0..n).filter(|i| !joined.contains_key(i)).map(|i| format!("{i}/{n}")).collect();
                return Err(abort(
                    &mut joined,
                    format!(
                        "shard {} did not join within --join-timeout {}",
                        absent.join(", "),
                        humantime::format_duration(self.join_timeout)
                    ),
                ));
            }
            if interrupted() {
                return Err(abort(&mut joined, "interrupted while the shards were joining".into()));
            }
            match self.events.recv_timeout(left.min(Duration::from_millis(50))) {
                Ok(Event::Joined { index, rtt, clock, stream }) => {
                    joined.insert(index, (rtt, clock, stream));
                }
                Ok(Event::Failed { index, why }) => {
                    return Err(abort(&mut joined, format!("shard {index}/{n} failed before the start: {why}")));
                }
                Ok(Event::Closed) => {
                    return Err(abort(&mut joined, "the shards ended before all had joined".into()));
                }
                Ok(Event::Result { .. } | Event::Interval { .. }) | Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return Err(abort(&mut joined, "the hub stopped".into())),
            }
        }
        Ok(joined)
    }

    /// Gathers the shards' intervals and results until each has sent its result, failed, or
    /// the wait after the first result ran out; stops them all on an interrupt.
    fn gather(&self, mut joined: Joined, interrupted: &dyn Fn() -> bool, mut outcome: Outcome) -> Outcome {
        let n = self.count;
        let mut stopped = false;
        let mut until: Option<Instant> = None;
        let mut progress = self.progress.map(Progress::new);
        while outcome.results.len() + outcome.missing.len() < n as usize {
            if !stopped && interrupted() {
                stopped = true;
                for (_, _, stream) in joined.values_mut() {
                    let _ = send(stream, &Message::Stop);
                }
            }
            if until.is_some_and(|u| Instant::now() >= u) {
                break;
            }
            match self.events.recv_timeout(Duration::from_millis(50)) {
                Ok(Event::Interval { index, tallies }) => {
                    outcome.intervals.entry(index).or_default().push(*tallies);
                    if let Some(progress) = &mut progress {
                        progress.update(n, &outcome);
                    }
                }
                Ok(Event::Result { index, result }) => {
                    if let Some((_, _, stream)) = joined.get_mut(&index) {
                        let _ = send(stream, &Message::Got);
                    }
                    outcome.results.insert(index, *result);
                    until.get_or_insert(Instant::now() + RESULT_WAIT);
                }
                Ok(Event::Failed { index, why }) => {
                    // The shard is told (a result refused is not waited on for its answer).
                    if let Some((_, _, stream)) = joined.get_mut(&index) {
                        let _ = send(stream, &Message::Abort { why: why.clone() });
                    }
                    outcome.missing.entry(index).or_insert(why);
                }
                Ok(Event::Joined { mut stream, .. }) => {
                    let _ = send(&mut stream, &Message::Abort { why: "the run has already started".into() });
                }
                Ok(Event::Closed) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
        }
        for index in 0..n {
            if !outcome.results.contains_key(&index) {
                outcome.missing.entry(index).or_insert_with(|| match until {
                    Some(_) => format!("sent no result within {} s of the first", RESULT_WAIT.as_secs()),
                    None => "ended without sending its result".into(),
                });
            }
        }
        outcome
    }
}

/// Each joined shard: its round trip, (the hub's instant, the shard's clock then) and its connection.
type Joined = BTreeMap<u32, (Duration, (Instant, u64), TcpStream)>;

/// Tells every joined shard to abort, and the error naming why.
fn abort(joined: &mut Joined, why: String) -> anyhow::Error {
    for (_, _, stream) in joined.values_mut() {
        let _ = send(stream, &Message::Abort { why: why.clone() });
    }
    run_failed(why)
}

/// Starts every shard at one instant, told to each as a time of its own clock; the outcome
/// begins with that start.
fn start_together(joined: &mut Joined) -> Outcome {
    let slowest = joined.values().map(|(rtt, _, _)| *rtt).max().unwrap_or_default();
    let start = Instant::now() + START_MARGIN + slowest;
    let outcome = Outcome {
        started_at: Some(SystemTime::now() + start.saturating_duration_since(Instant::now())),
        ..Outcome::default()
    };
    for (_, (at, shard_ns), stream) in joined.values_mut() {
        let at_ns = shard_ns.saturating_add(start.saturating_duration_since(*at).as_nanos() as u64);
        let _ = send(stream, &Message::Start { at_ns });
    }
    outcome
}

/// Counts a connection among those proving themselves until it has, or has gone.
struct Proving<'a>(&'a AtomicUsize, bool);

impl Proving<'_> {
    fn done(&mut self) {
        if !std::mem::replace(&mut self.1, true) {
            self.0.fetch_sub(1, Relaxed);
        }
    }
}

impl Drop for Proving<'_> {
    fn drop(&mut self) {
        self.done();
    }
}

/// One connection on the hub's side: its proof, round trips, then its intervals and result.
/// Nothing reaches the hub from a connection that has not proved itself.
fn serve(stream: TcpStream, door: &Door, tx: mpsc::Sender<Event>) {
    let mut proving = Proving(&door.proving, false);
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(PROOF_WAIT));
    let _ = stream.set_write_timeout(Some(PROOF_WAIT));
    let Ok(mut writer) = stream.try_clone() else { return };
    let mut reader = BufReader::with_capacity(1024, stream.take(MAX_UNPROVEN));
    let Some(index) = admit(&mut reader, &mut writer, door, &tx) else { return };
    proving.done();
    let n = door.count;
    let (mut rtt, mut clock) = (Duration::MAX, (Instant::now(), 0));
    let pinging = Instant::now();
    for k in 0.. {
        if k >= PINGS && pinging.elapsed() >= PING_SPAN {
            break;
        }
        if k > 0 {
            std::thread::sleep(PING_GAP);
        }
        let sent = Instant::now();
        let answer = match send(&mut writer, &Message::Ping { k }) {
            Ok(()) => receive(&mut reader, MAX_LINE).ok().flatten(),
            Err(_) => None,
        };
        let Some(Message::Pong { k: echoed, at_ns }) =
            answer.filter(|m| matches!(m, Message::Pong { k: e, .. } if *e == k))
        else {
            let _ = tx.send(Event::Failed { index, why: "left while joining".into() });
            return;
        };
        debug_assert_eq!(echoed, k);
        let took = sent.elapsed();
        if took < rtt {
            // The shard read its clock about halfway.
            (rtt, clock) = (took, (sent + took / 2, at_ns));
        }
    }
    // Proven: the run is as long as it is, and only the connection's end is a failure.
    reader.get_mut().set_limit(u64::MAX);
    let _ = reader.get_ref().get_ref().set_read_timeout(None);
    if tx.send(Event::Joined { index, rtt, clock, stream: writer }).is_err() {
        return;
    }
    let failed = |why: String| Event::Failed { index, why };
    let gone = |e: String| failed(format!("disconnected before sending its result ({e})"));
    let event = loop {
        match receive(&mut reader, MAX_LINE) {
            Ok(Some(Message::Interval(tallies))) => {
                if tx.send(Event::Interval { index, tallies }).is_err() {
                    return;
                }
            }
            Ok(Some(Message::Result { length })) if length > MAX_RESULT => {
                break failed(format!("sent a result of {length} bytes, more than {} MiB", MAX_RESULT >> 20));
            }
            Ok(Some(Message::Result { length })) => match receive_bytes(&mut reader, length) {
                Ok(bytes) => break result_of(index, n, &bytes),
                Err(e) => break gone(e.to_string()),
            },
            Ok(Some(Message::Failed { why })) => break failed(why),
            Ok(Some(other)) => break failed(format!("sent a message out of turn: {}", kind(&other))),
            Ok(None) => break gone("end of stream".into()),
            Err(e) => break gone(e.to_string()),
        }
    };
    let _ = tx.send(event);
}

/// A message's type, as the protocol names it.
fn kind(message: &Message) -> String {
    serde_json::to_value(message).ok().and_then(|v| v["type"].as_str().map(String::from)).unwrap_or_default()
}

/// A shard's result as the hub takes it: JSON of a result that merges (its counts bounded,
/// its histograms read); anything else fails that shard alone.
fn result_of(index: u32, count: u32, bytes: &[u8]) -> Event {
    let label = format!("shard {index}/{count}");
    let checked = serde_json::from_slice(bytes)
        .map_err(|e| bad_input(format!("not JSON: {e}")))
        .and_then(|value| merge::Input::of_value(label, value))
        .and_then(|input| merge::merge(std::slice::from_ref(&input)).map(|_| input));
    match checked {
        Ok(input) => Event::Result { index, result: Box::new(input.result) },
        Err(e) => Event::Failed { index, why: format!("sent a result that cannot be merged: {e:#}") },
    }
}

/// The door: a hello of this protocol for a shard of this run, the proof that it holds the
/// run's secret, its fingerprint the same as this run's, its index not claimed yet. Returns
/// the shard's index; None when it is turned away (told why only once it has proved itself:
/// a stranger learns nothing) or failed before joining (the hub is told).
fn admit(reader: &mut impl BufRead, writer: &mut TcpStream, door: &Door, tx: &mpsc::Sender<Event>) -> Option<u32> {
    let n = door.count;
    let refuse = |writer: &mut TcpStream, why: String| {
        let _ = send(writer, &Message::Abort { why });
        None
    };
    let (index, shard_nonce) = match receive(reader, MAX_UNPROVEN).ok().flatten()? {
        Message::Hello { version, .. } if version != VERSION => {
            return refuse(
                writer,
                format!("this coordinator speaks protocol {VERSION}, the shard {version}: use one rpcmeter"),
            )
        }
        Message::Hello { index, of, .. } if of != n || index >= of => {
            return refuse(writer, format!("this run has {n} shards: shard {index}/{of} is not one of them"))
        }
        Message::Hello { index, nonce, .. } if nonce.len() <= 64 => (index, nonce),
        _ => return None,
    };
    let nonce = trust::nonce().ok()?;
    let proof = door.secret.prove(Role::Hub, &[shard_nonce.as_bytes(), nonce.as_bytes()]);
    send(writer, &Message::Challenge { version: VERSION, nonce: nonce.clone(), proof }).ok()?;
    let Message::Proof { proof, fingerprint, failed } = receive(reader, MAX_UNPROVEN).ok().flatten()? else {
        return None;
    };
    let vouched = [nonce.as_bytes(), shard_nonce.as_bytes(), &index.to_be_bytes(), fingerprint.hash.as_bytes()];
    if fingerprint.fields.len() > trust::MAX_FIELDS || !door.secret.verify(Role::Shard, &vouched, &proof) {
        return refuse(writer, "not a shard of this run (its secret differs)".into());
    }
    if let Some(why) = failed {
        let _ = tx.send(Event::Failed { index, why });
        return None;
    }
    let differ = door.fingerprint.differences(&fingerprint);
    if !differ.is_empty() {
        let why = format!(
            "shard {index}/{n} was started with other flags than the coordinator: {} differ (every shard runs the same load)",
            differ.join(", ")
        );
        let _ = tx.send(Event::Failed { index, why: why.clone() });
        return refuse(writer, why);
    }
    if !door.claimed.lock().unwrap_or_else(|e| e.into_inner()).insert(index) {
        eprintln!("rpcmeter: refused a second shard {index}/{n}: that shard has already joined");
        return refuse(writer, format!("shard {index}/{n} has already joined: a second claim is refused"));
    }
    Some(index)
}

/// A shard's side: joins the hub, gets the start, streams its intervals, sends the result.
pub struct Client {
    addr: String,
    index: u32,
    count: u32,
    join_timeout: Duration,
    secret: Secret,
    fingerprint: Fingerprint,
    control: Arc<Control>,
    /// Zero of the times this shard tells the hub (pongs) and is told (the start).
    epoch: Instant,
    writer: Mutex<Option<TcpStream>>,
    /// The hub's messages after the start (its answer to the result).
    from_hub: Mutex<Option<mpsc::Receiver<Message>>>,
}

/// The end of the hub's stream, as the reading thread tells it.
const GONE: &str = "\0gone";

impl Client {
    pub fn new(
        how: &Coordination,
        credentials: Credentials,
        addr: String,
        index: u32,
        count: u32,
        control: Arc<Control>,
    ) -> Client {
        Client {
            addr,
            index,
            count,
            join_timeout: how.join_timeout,
            secret: credentials.secret,
            fingerprint: credentials.fingerprint,
            control,
            epoch: Instant::now(),
            writer: Mutex::new(None),
            from_hub: Mutex::new(None),
        }
    }

    /// Connects, trying again until `within` has passed (the hub may not listen yet), each
    /// address the hub's name resolves to in turn.
    fn connect(&self, within: Duration) -> anyhow::Result<TcpStream> {
        let until = Instant::now() + within;
        loop {
            let tried = self.addr.to_socket_addrs().and_then(|addrs| {
                let mut last = invalid("resolves to no address".into());
                for addr in addrs {
                    match TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
                        Ok(stream) => return Ok(stream),
                        Err(e) => last = e,
                    }
                }
                Err(last)
            });
            match tried {
                Ok(stream) => {
                    let _ = stream.set_nodelay(true);
                    return Ok(stream);
                }
                Err(e) if Instant::now() >= until => {
                    return Err(run_failed(format!(
                        "cannot join the coordinator at {} within --join-timeout {}: {e}",
                        self.addr,
                        humantime::format_duration(within)
                    )))
                }
                Err(_) if self.control.interrupts.load(Relaxed) > 0 => {
                    return Err(run_failed("interrupted while joining the coordinator"))
                }
                Err(_) => std::thread::sleep(Duration::from_millis(200)),
            }
        }
    }

    /// Says hello, checks the hub's proof and gives this shard's (with `failed` when it
    /// failed before joining); returns the reader of the hub's next messages, None when the
    /// connection closed before any answer (a hub busy with strangers' connections).
    fn handshake(
        &self,
        stream: &TcpStream,
        failed: Option<&str>,
    ) -> anyhow::Result<Option<BufReader<std::io::Take<TcpStream>>>> {
        let io = |e: std::io::Error| run_failed(format!("the coordinator at {}: {e}", self.addr));
        let mut writer = stream.try_clone().map_err(io)?;
        let _ = stream.set_read_timeout(Some(PROOF_WAIT.max(self.join_timeout)));
        let mut reader = BufReader::with_capacity(1024, stream.try_clone().map_err(io)?.take(MAX_UNPROVEN));
        let nonce = trust::nonce()?;
        send(
            &mut writer,
            &Message::Hello { version: VERSION, index: self.index, of: self.count, nonce: nonce.clone() },
        )
        .map_err(io)?;
        let (hub_nonce, proof) = match receive(&mut reader, MAX_UNPROVEN).ok().flatten() {
            None => return Ok(None),
            Some(Message::Challenge { version: VERSION, nonce, proof }) => (nonce, proof),
            Some(Message::Challenge { version, .. }) => {
                return Err(run_failed(format!(
                    "the coordinator at {} speaks protocol {version}, this shard {VERSION}: use one rpcmeter",
                    self.addr
                )))
            }
            Some(Message::Abort { why }) => {
                return Err(run_failed(format!("the coordinator refused this shard: {why}")))
            }
            _ => return Err(run_failed(format!("the coordinator at {} did not answer as one", self.addr))),
        };
        if !self.secret.verify(Role::Hub, &[nonce.as_bytes(), hub_nonce.as_bytes()], &proof) {
            return Err(run_failed(format!(
                "the coordinator at {} does not hold this run's secret: not joined",
                self.addr
            )));
        }
        let vouched =
            [hub_nonce.as_bytes(), nonce.as_bytes(), &self.index.to_be_bytes(), self.fingerprint.hash.as_bytes()];
        let proof = self.secret.prove(Role::Shard, &vouched);
        let failed = failed.map(String::from);
        send(&mut writer, &Message::Proof { proof, fingerprint: self.fingerprint.clone(), failed }).map_err(io)?;
        // The hub is proven: its messages are bounded per line only.
        reader.get_mut().set_limit(u64::MAX);
        let _ = stream.set_read_timeout(None);
        Ok(Some(reader))
    }

    /// Joins the hub and waits for the start: the instant, on this machine's clock.
    pub fn agree(&self) -> anyhow::Result<Instant> {
        let until = Instant::now() + self.join_timeout;
        let (stream, mut reader) = loop {
            let stream = self.connect(until.saturating_duration_since(Instant::now()))?;
            match self.handshake(&stream, None)? {
                Some(reader) => break (stream, reader),
                None if Instant::now() < until => std::thread::sleep(Duration::from_millis(200)),
                None => {
                    return Err(run_failed(format!(
                        "the coordinator at {} closed every connection before answering, until --join-timeout {}",
                        self.addr,
                        humantime::format_duration(self.join_timeout)
                    )))
                }
            }
        };
        let io = |e: std::io::Error| run_failed(format!("the coordinator at {}: {e}", self.addr));
        let mut ponger = stream.try_clone().map_err(io)?;
        *self.writer.lock().unwrap() = Some(stream);
        let (tx, rx) = mpsc::channel();
        let (control, epoch) = (self.control.clone(), self.epoch);
        // Pings are answered on this thread at once (they measure the trip, not a wait);
        // a stop counts as the user's Ctrl-C would; the rest goes to whoever waits.
        std::thread::spawn(move || loop {
            match receive(&mut reader, MAX_LINE) {
                Ok(Some(Message::Ping { k })) => {
                    let at_ns = epoch.elapsed().as_nanos() as u64;
                    let _ = send(&mut ponger, &Message::Pong { k, at_ns });
                }
                Ok(Some(Message::Stop)) => {
                    control.interrupts.fetch_add(1, Relaxed);
                }
                Ok(Some(m)) => {
                    if tx.send(m).is_err() {
                        return;
                    }
                }
                Ok(None) | Err(_) => {
                    let _ = tx.send(Message::Failed { why: GONE.into() });
                    return;
                }
            }
        });
        loop {
            if self.control.interrupts.load(Relaxed) > 0 {
                return Err(run_failed("interrupted while waiting for the other shards"));
            }
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(Message::Start { at_ns }) => {
                    *self.from_hub.lock().unwrap() = Some(rx);
                    return Ok(self.epoch + Duration::from_nanos(at_ns));
                }
                Ok(Message::Abort { why }) => return Err(run_failed(format!("the coordinator ended the run: {why}"))),
                Ok(Message::Failed { .. }) => {
                    return Err(run_failed(format!(
                        "the coordinator at {} closed the connection before the start",
                        self.addr
                    )))
                }
                Ok(_) | Err(_) => {}
            }
        }
    }

    /// Sends one message to the hub (best effort: an interval lost is not the run lost).
    fn tell(&self, message: &Message) -> bool {
        let mut writer = self.writer.lock().unwrap();
        writer.as_mut().is_some_and(|w| send(w, message).is_ok())
    }

    /// Sends this shard's result; Ok once the hub has it.
    pub fn deliver(&self, result: &Value) -> anyhow::Result<()> {
        let bytes = serde_json::to_vec(result)?;
        {
            let mut writer = self.writer.lock().unwrap();
            let writer = writer.as_mut().ok_or_else(|| run_failed("this shard never joined the coordinator"))?;
            send(writer, &Message::Result { length: bytes.len() as u64 })
                .and_then(|_| writer.write_all(&bytes))
                .and_then(|_| writer.flush())
                .map_err(|e| run_failed(format!("cannot send the result: {e}")))?;
        }
        let from_hub = self.from_hub.lock().unwrap().take();
        let from_hub = from_hub.ok_or_else(|| run_failed("this shard never started"))?;
        let until = Instant::now() + ACK_WAIT;
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            match from_hub.recv_timeout(left) {
                Ok(Message::Got) => return Ok(()),
                Ok(Message::Abort { why }) => return Err(run_failed(format!("the coordinator refused it: {why}"))),
                Ok(Message::Failed { .. }) | Err(_) => break,
                Ok(_) => {}
            }
        }
        Err(run_failed(format!("the coordinator at {} did not confirm the result", self.addr)))
    }

    /// Tells the hub this shard failed (best effort: a shard that never joined connects and
    /// proves itself for it, briefly), so that it is named at once rather than waited for.
    pub fn fail(&self, why: &str) {
        if self.tell(&Message::Failed { why: why.into() }) {
            return;
        }
        if let Ok(stream) = self.connect(self.join_timeout.min(Duration::from_secs(5))) {
            let _ = self.handshake(&stream, Some(why));
        }
    }
}

/// A sink that sends each interval's tallies to the hub as it closes.
struct ToHub(Arc<Client>);

impl crate::sink::Sink for ToHub {
    fn interval(&mut self, interval: &crate::record::intervals::Interval, row: &crate::record::intervals::IntervalRow) {
        let t = interval.tally;
        // A shard's row keeps its histograms packed already (Sinks::keep_histograms): sent
        // as they are, not packed twice.
        let (call_latency, service_time) = match &row.packed {
            Some(p) => (packed_text(&p.call_latency), p.service_time.as_deref().map(packed_text)),
            None => {
                (to_text(&t.call_latency), (t.service_time() != &t.call_latency).then(|| to_text(t.service_time())))
            }
        };
        let statuses =
            t.counts.call_status.nonzero().map(|(code, n)| (crate::grpc::status::name(code).to_string(), n)).collect();
        let tallies = Tallies {
            at_ns: interval.at.as_nanos() as u64,
            length_ns: interval.length.as_nanos() as u64,
            warmup: interval.warmup,
            calls: t.counts.calls,
            ok: t.counts.ok(),
            failed: t.counts.failed(),
            statuses,
            call_latency,
            ok_call_latency: to_text(&t.ok_call_latency),
            service_time,
        };
        self.0.tell(&Message::Interval(Box::new(tallies)));
    }
}

/// A shard's run rebuilt from the intervals it sent, for a shard lost before its result:
/// its measured intervals' counts and histograms, its window from the agreed start. None
/// when it sent no measured interval.
fn of_intervals(
    index: u32,
    count: u32,
    tallies: &[Tallies],
    started_at: SystemTime,
    like: Option<&Run>,
) -> Option<Run> {
    let measured: Vec<&Tallies> = tallies.iter().filter(|t| !t.warmup).collect();
    let first = measured.first()?;
    let (mut calls, mut ok) = (new_histogram(), new_histogram());
    let mut run = Run::default();
    for t in &measured {
        calls.add(from_text(&t.call_latency).ok()?).ok()?;
        ok.add(from_text(&t.ok_call_latency).ok()?).ok()?;
        run.requests.total = run.requests.total.saturating_add(t.calls);
        run.requests.ok = run.requests.ok.saturating_add(t.ok);
        run.requests.failed = run.requests.failed.saturating_add(t.failed);
        crate::result::slice::add_statuses(&mut run.statuses, &t.statuses);
    }
    let length = Duration::from_nanos(measured.iter().map(|t| t.length_ns).fold(0, u64::saturating_add));
    // Its clock started at the agreed start, as a whole shard's result says; the measured
    // window after its warm-up intervals (merge places it by both).
    let warmup = Duration::from_nanos(first.at_ns.saturating_sub(first.length_ns));
    if !warmup.is_zero() {
        run.warmup = Some(crate::result::Warmup { duration_s: warmup.as_secs_f64(), ..Default::default() });
    }
    run.interval_s = like
        .and_then(|l| l.interval_s)
        .or_else(|| tallies.iter().map(|t| t.length_ns).max().map(|ns| Duration::from_nanos(ns).as_secs_f64()));
    run.intervals = rows_of(tallies);
    if let Some(like) = like {
        (run.target, run.call, run.mode, run.load) =
            (like.target.clone(), like.call.clone(), like.mode.clone(), like.load.clone());
        run.rps_target = like.rps_target.clone();
    }
    run.requests.attempts = Some(run.requests.total);
    // To the µs, as every result's: its rates are read back from it (`result::Run::window`).
    let length = crate::units::whole_micros(length);
    run.duration_s = crate::units::secs(length);
    run.throughput_rps = crate::stats::rate(run.requests.total, length);
    run.latency_us = crate::result::LatencySummary::of_histogram(&calls);
    run.histograms = crate::result::Histograms {
        call_latency: to_text(&calls),
        ok_call_latency: Some(to_text(&ok)),
        ..Default::default()
    };
    run.partial = true;
    run.notices
        .push(NoticeKind::Rebuilt, format!("rebuilt from the {} intervals it sent before it was lost", measured.len()));
    run.meta = crate::result::Meta {
        rpcmeter_version: env!("CARGO_PKG_VERSION").into(),
        run_id: Some(uuid::Uuid::new_v4().to_string().into()),
        started_at: Some(humantime::format_rfc3339_micros(started_at).to_string()),
        ended: crate::result::Ended::Partial,
        shard: Some(Some(format!("{index}/{count}"))),
        // The run's fingerprint, the same on every shard (checked at the door).
        other: like
            .and_then(|l| l.meta.other.get("fingerprint"))
            .map_or_else(Default::default, |f| [("fingerprint".to_string(), f.clone())].into()),
        ..Default::default()
    };
    Some(run)
}

/// A lost shard's interval series, from the tallies it sent: each interval's counts and
/// histograms, so that the merged series holds its share until it was lost. Its client's CPU
/// and memory were not sent: 0. None when a histogram does not read.
fn rows_of(tallies: &[Tallies]) -> Option<Vec<crate::result::IntervalRow>> {
    let row = |t: &Tallies| -> Option<crate::result::IntervalRow> {
        let calls = from_text(&t.call_latency).ok()?;
        let service = t.service_time.as_deref().map_or(Ok(calls.clone()), from_text).ok()?;
        let length = Duration::from_nanos(t.length_ns);
        let mut row = crate::result::IntervalRow {
            t_s: crate::units::secs(Duration::from_nanos(t.at_ns)),
            length_s: crate::units::secs(length),
            phase: if t.warmup { "warmup" } else { "measured" }.into(),
            calls: t.calls,
            ok: Some(t.ok),
            failed: t.failed,
            rps: crate::stats::rate(t.calls, length),
            histogram: Some(t.call_latency.clone()),
            service_histogram: t.service_time.clone(),
            ..Default::default()
        };
        merge::series::latency_columns(&mut row, &calls, &service);
        Some(row)
    };
    tallies.iter().map(row).collect()
}

/// The shards' results merged (partial when some are missing, each named; a missing shard's
/// intervals merged in its place), every window placed on the agreed start as this machine's
/// clock reads it (not each machine's own wall clock). A result that cannot be merged with
/// the others is left out and named, never the whole answer lost.
pub fn merged(count: u32, outcome: &Outcome) -> anyhow::Result<Run> {
    let mut missing = outcome.missing.clone();
    let mut inputs: Vec<merge::Input> = Vec::new();
    let like = outcome.results.values().next();
    for (index, result) in &outcome.results {
        let mut result = result.clone();
        if let Some(at) = outcome.started_at {
            result.meta.started_at = Some(humantime::format_rfc3339_micros(at).to_string());
        }
        inputs.push(merge::Input { label: format!("shard {index}/{count}"), result });
    }
    let mut rebuilt = BTreeSet::new();
    for (index, tallies) in &outcome.intervals {
        let lost = !outcome.results.contains_key(index);
        let part = outcome.started_at.filter(|_| lost).and_then(|at| of_intervals(*index, count, tallies, at, like));
        if let Some(result) = part {
            rebuilt.insert(*index);
            inputs.push(merge::Input { label: format!("shard {index}/{count} (its intervals)"), result });
        }
    }
    let mut kept: Vec<merge::Input> = Vec::new();
    for input in inputs {
        kept.push(input);
        if let Err(e) = merge::merge(&kept) {
            let input = kept.pop().expect("just pushed");
            let index = input.result.shard().and_then(|s| s.split('/').next()?.parse().ok()).unwrap_or(u32::MAX);
            missing.insert(index, format!("its result does not merge with the others': {e:#}"));
        }
    }
    if kept.is_empty() {
        let why: Vec<String> = missing.iter().map(|(i, why)| format!("shard {i}/{count}: {why}")).collect();
        return Err(run_failed(format!("no shard gave a result ({})", why.join("; "))));
    }
    let mut merged = merge::merge(&kept)?;
    if !missing.is_empty() {
        merged.partial = true;
        merged.meta.ended = crate::result::Ended::Partial;
        merged.missing_shards = Some(
            missing
                .iter()
                .map(|(i, why)| crate::result::MissingShard { shard: format!("{i}/{count}"), why: why.clone() })
                .collect(),
        );
        for (index, why) in &missing {
            let kept = match rebuilt.contains(index) {
                true => " (what it measured until then is merged, from the intervals it sent)",
                false => "",
            };
            merged.notices.push(
                NoticeKind::ShardMissing,
                format!("shard {index}/{count} is missing from this result: {why}{kept}"),
            );
        }
    }
    Ok(merged)
}

/// Writes a merged result as the run's `--format` (any of them) to `-o` or stdout.
pub fn write_merged(merged: &Run, format: Format, output: Option<&Path>) -> anyhow::Result<()> {
    let text = merge::render(merged, format)?;
    match output {
        Some(path) => super::outputs::write_whole(path, text.as_bytes()).map_err(|e| output_failed(path, e)),
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes()).and_then(|_| out.flush()).map_err(|e| output_failed(Path::new("-"), e))
        }
    }
}

/// The whole run's `--assert`, judged once on the merged result (the shards never judge their
/// share: 50 calls/s of a 100/s run is no breach of `rps>=80`). The verdicts are written into
/// the result; returns one line per breach. `kube`'s pod 0 and `run --shards` judge here too.
pub fn judge(merged: &mut Run, checks: &[Assertion]) -> anyhow::Result<Vec<String>> {
    if checks.is_empty() {
        return Ok(Vec::new());
    }
    let checked = crate::analysis::check(merged, checks)?;
    let breaches = checked
        .iter()
        .filter(|c| !c.ok)
        .map(|c| format!("assertion breached: {} (value {})", c.assertion, c.value))
        .collect();
    merged.assertions = Some(checked);
    Ok(breaches)
}

/// How a sharded run ends where its results meet (shard 0, `run --shards`' parent): the
/// merged result judged, written and recorded once.
pub struct Conclusion<'a> {
    pub count: u32,
    pub checks: &'a [Assertion],
    pub format: Format,
    pub output: Option<&'a Path>,
    pub history: Option<&'a crate::history::SaveTo>,
    /// Interrupted by the user: the result is marked so.
    pub interrupted: bool,
    /// What already failed (a shard, an output): each makes the exit 1.
    pub failed: Vec<String>,
}

/// Merges, judges, writes and records the outcome; exit 1 naming every shard missing, every
/// assertion breached and every output that failed.
pub fn conclude(outcome: &Outcome, end: Conclusion) -> anyhow::Result<ExitCode> {
    let Conclusion { count, checks, format, output, history, interrupted, mut failed } = end;
    let mut merged = merged(count, outcome)?;
    if interrupted {
        merged.partial = true;
        merged.meta.ended = crate::result::Ended::Interrupted;
        merged.notices.push(NoticeKind::Partial, "interrupted: the shards were stopped and what they measured merged");
    }
    let breaches = judge(&mut merged, checks)?;
    write_merged(&merged, format, output)?;
    let mut problems = Vec::new();
    super::run::record_in_history(history, &merged.to_value(), &mut problems);
    let missing = merged.missing_shards.iter().flatten();
    let mut all: Vec<String> = missing.map(|m| format!("shard {} is missing: {}", m.shard, m.why)).collect();
    all.append(&mut failed);
    all.extend(breaches);
    all.extend(problems.iter().map(|p| format!("{p:#}")));
    match all.is_empty() {
        true => Ok(ExitCode::SUCCESS),
        false => Err(run_failed(all.join("; "))),
    }
}

/// One shard of a coordinated run, to its end: shard 0 also runs the hub and prints the
/// merged result; any other shard sends its result and says so in one line on stderr (its
/// own result goes to stdout only when the hub cannot take it: nothing measured is lost).
pub fn run_shard(
    mut settings: Settings,
    control: Arc<Control>,
    how: &Coordination,
    credentials: Credentials,
) -> anyhow::Result<ExitCode> {
    let (index, count) = (settings.plan.shard.index, settings.plan.shard.count);
    // A shard never judges its share; the merged run is judged once, where it is merged.
    let checks = std::mem::take(&mut settings.checks);
    let hub = match how.listen {
        true => Some(Hub::listen(&how.addr, count, how.join_timeout, credentials.clone())?),
        false => None,
    };
    let hub = hub.map(|hub| Hub { progress: how.progress, ..hub });
    let addr = hub.as_ref().map_or(how.addr.clone(), |h| h.local_addr().to_string());
    let hub = hub.map(|hub| {
        let control = control.clone();
        std::thread::spawn(move || hub.run(Some(control)))
    });
    let fingerprint = serde_json::to_value(&credentials.fingerprint)?;
    let client = Arc::new(Client::new(how, credentials, addr.clone(), index, count, control.clone()));
    let joining = client.clone();
    settings.plan.start = Some(Start::Agreed(Arc::new(move |_: &Control| joining.agree())));
    // The shard's own per-call files are its own; its report is the merged one.
    let own = OutputSettings { primary: None, exports: vec![], ..settings.outputs.clone() };
    let mut outputs = Outputs::open(&own)?;
    let to_hub: Box<dyn crate::sink::Sink> = Box::new(ToHub(client.clone()));
    let measured = super::run::measure_with(&settings, &control, &mut outputs, vec![to_hub]);
    let mut problems = outputs.commit();
    let result = match measured {
        Ok((result, sinks_failed)) => {
            problems.extend(sinks_failed);
            // The result says which run it is a shard of: `merge` of such files checks it.
            let mut value = result.to_value();
            value["meta"]["fingerprint"] = fingerprint;
            let delivered = client.deliver(&value);
            if let (None, Err(e)) = (&hub, &delivered) {
                // The hub is gone: this shard's result is printed here instead.
                let mut here = Outputs::open(&OutputSettings { csv_details: None, hdr_log: None, ..settings.outputs })?;
                problems.extend(here.write_reports(&result));
                problems.extend(here.commit());
                let problems: Vec<String> = problems.iter().map(|p| format!("{p:#}")).collect();
                return Err(run_failed(format!(
                    "shard {index}/{count}: {e:#}; its own result is printed instead{}",
                    problems.iter().map(|p| format!("; {p}")).collect::<String>()
                )));
            }
            Some(result)
        }
        Err(e) => {
            client.fail(&format!("{e:#}"));
            if hub.is_none() {
                return Err(e);
            }
            eprintln!("rpcmeter: shard {index}/{count}: {e:#}");
            None
        }
    };
    let Some(hub) = hub else {
        let result = result.expect("a shard without a result has returned");
        eprintln!(
            "rpcmeter: shard {index}/{count}: {} calls measured, result given to the coordinator at {addr}",
            result.requests.total
        );
        return super::run::verdict(&result, problems);
    };
    let outcome = hub.join().map_err(|_| crate::error::internal("the coordinator's thread panicked"))??;
    let end = Conclusion {
        count,
        checks: &checks,
        format: settings.outputs.format,
        output: settings.outputs.primary.as_deref(),
        history: settings.history.as_ref(),
        interrupted: false,
        failed: problems.iter().map(|p| format!("{p:#}")).collect(),
    };
    conclude(&outcome, end)
}
