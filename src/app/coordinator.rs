//! `run --shard I/N --coordinator HOST:PORT`: the shards of one run meet, start together and
//! hand their results to one place. Shard 0 listens (the hub, on a thread of its own); every
//! shard, shard 0 included, joins it over TCP once its own connections to the target are up.
//! Each shard answers the hub's pings with the time on its own monotonic clock; the ping with
//! the least round trip tells, within half of it, which time of the shard's clock is which
//! instant of the hub's. When all N have joined, the hub sends each shard the start as a time
//! on that shard's own monotonic clock: the machines' wall clocks never enter, and a shard that
//! reads the start message late (a busy machine) still starts on time. At the end each shard sends its whole result JSON
//! (histograms included); the hub merges them exactly (app/merge.rs) and shard 0 prints the
//! merged result, so one log holds the answer. `run --shards N` is the same hub in the parent
//! process, its children joining it (app/shards.rs).
//!
//! The protocol: one JSON object per line, at most `MAX_LINE` bytes, except a result: its
//! line `{"result": LEN}` then LEN bytes of JSON, at most `MAX_RESULT`.
//! - shard to hub: `{"hello": I, "of": N}` (with `"failed": WHY` when it failed before
//!   joining), `{"pong": K, "at_ns": T}` (T: its own clock), `{"result": LEN}`, `{"failed": WHY}`;
//! - hub to shard: `{"ping": K}`, `{"start_at_ns": T}` (on the shard's clock), `{"abort": WHY}`, `{"stop": true}`
//!   (shard 0 was interrupted: drain as a Ctrl-C would), `{"got": true}` (result received).
use super::merge;
use super::outputs::{OutputSettings, Outputs};
use super::run::{Coordination, Settings};
use crate::error::{bad_input, output_failed, run_failed};
use crate::load::plan::Control;
use crate::load::plan::Start;
use crate::report::Format;
use crate::result::Run;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// Longest message line.
const MAX_LINE: u64 = 64 << 10;
/// Largest result a shard may send (a result with kept intervals is a few MiB).
const MAX_RESULT: u64 = 256 << 20;
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

fn send(stream: &mut TcpStream, message: &Value) -> std::io::Result<()> {
    let mut line = message.to_string();
    line.push('\n');
    stream.write_all(line.as_bytes())
}

fn invalid(why: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, why)
}

/// The next message; None at the end of the stream.
fn receive(reader: &mut impl BufRead) -> std::io::Result<Option<Value>> {
    let mut line = Vec::new();
    reader.take(MAX_LINE + 1).read_until(b'\n', &mut line)?;
    if line.is_empty() {
        return Ok(None);
    }
    if line.len() as u64 > MAX_LINE || line.last() != Some(&b'\n') {
        return Err(invalid("a message line too long or cut short".into()));
    }
    serde_json::from_slice(&line).map(Some).map_err(|e| invalid(format!("not a message: {e}")))
}

/// What the hub's connection threads tell it.
pub enum Event {
    Joined {
        index: u32,
        rtt: Duration,
        /// At this instant of the hub's, the shard's clock read this (ns).
        clock: (Instant, u64),
        stream: TcpStream,
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

/// What the hub gathered: each shard's result, or why it has none.
pub struct Outcome {
    pub results: BTreeMap<u32, Run>,
    pub missing: BTreeMap<u32, String>,
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
}

impl Hub {
    /// Listens on `addr` (port 0: any free port) and prints the bound address on stderr. A
    /// name (a pod's own, which the cluster's DNS may not serve yet) is listened for on every
    /// interface at its port: the name is for the other shards to find this one.
    pub fn listen(addr: &str, count: u32, join_timeout: Duration) -> anyhow::Result<Hub> {
        let on = match addr.parse::<SocketAddr>() {
            Ok(ip) => ip,
            Err(_) => {
                let port = addr.rsplit_once(':').and_then(|(_, port)| port.parse::<u16>().ok());
                let port = port.ok_or_else(|| bad_input(format!("--coordinator {addr}: not HOST:PORT")))?;
                SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, port))
            }
        };
        // A machine without IPv6 listens on IPv4's every interface instead.
        let listener = TcpListener::bind(on)
            .or_else(|e| match on.ip().is_unspecified() && on.is_ipv6() {
                true => TcpListener::bind((std::net::Ipv4Addr::UNSPECIFIED, on.port())),
                false => Err(e),
            })
            .map_err(|e| bad_input(format!("--coordinator {addr}: cannot listen there: {e}")))?;
        let bound = listener.local_addr().map_err(|e| bad_input(format!("--coordinator {addr}: {e}")))?;
        eprintln!("rpcmeter: coordinator listening on {bound} for {count} shards");
        let (tx, events) = mpsc::channel();
        let closer = tx.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let tx = tx.clone();
                std::thread::spawn(move || serve(stream, count, join_timeout, tx));
            }
        });
        let deadline = Instant::now() + join_timeout;
        Ok(Hub { addr: bound, count, events, closer, deadline, join_timeout })
    }

    /// Where a shard on this machine reaches the hub.
    pub fn local_addr(&self) -> SocketAddr {
        let mut addr = self.addr;
        if addr.ip().is_unspecified() {
            addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        addr
    }

    /// Waits for every shard to join, starts them together, gathers their results. When
    /// `control` is interrupted (shard 0's Ctrl-C), every shard is told to stop too.
    pub fn run(self, control: Option<Arc<Control>>) -> anyhow::Result<Outcome> {
        let n = self.count;
        let interrupted = || control.as_ref().is_some_and(|c| c.interrupts.load(Relaxed) > 0);
        let mut joined: BTreeMap<u32, (Duration, (Instant, u64), TcpStream)> = BTreeMap::new();
        let abort = |joined: &mut BTreeMap<u32, (Duration, (Instant, u64), TcpStream)>, why: String| {
            for (_, _, stream) in joined.values_mut() {
                let _ = send(stream, &json!({ "abort": why }));
            }
            run_failed(why)
        };
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
                Ok(Event::Joined { index, rtt, clock, mut stream }) => match joined.entry(index) {
                    std::collections::btree_map::Entry::Occupied(_) => {
                        let _ = send(&mut stream, &json!({ "abort": format!("shard {index}/{n} joined twice") }));
                    }
                    std::collections::btree_map::Entry::Vacant(place) => {
                        place.insert((rtt, clock, stream));
                    }
                },
                Ok(Event::Failed { index, why }) => {
                    return Err(abort(&mut joined, format!("shard {index}/{n} failed before the start: {why}")));
                }
                Ok(Event::Closed) => {
                    return Err(abort(&mut joined, "the shards ended before all had joined".into()));
                }
                Ok(Event::Result { .. }) | Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return Err(abort(&mut joined, "the hub stopped".into())),
            }
        }
        // One instant for all, told to each shard as a time of its own clock.
        let slowest = joined.values().map(|(rtt, _, _)| *rtt).max().unwrap_or_default();
        let start = Instant::now() + START_MARGIN + slowest;
        for (_, (at, shard_ns), stream) in joined.values_mut() {
            let at_ns = shard_ns.saturating_add(start.saturating_duration_since(*at).as_nanos() as u64);
            let _ = send(stream, &json!({ "start_at_ns": at_ns }));
        }
        let mut results = BTreeMap::new();
        let mut missing = BTreeMap::new();
        let mut stopped = false;
        let mut until: Option<Instant> = None;
        while results.len() + missing.len() < n as usize {
            if !stopped && interrupted() {
                stopped = true;
                for (_, _, stream) in joined.values_mut() {
                    let _ = send(stream, &json!({ "stop": true }));
                }
            }
            if until.is_some_and(|u| Instant::now() >= u) {
                break;
            }
            match self.events.recv_timeout(Duration::from_millis(50)) {
                Ok(Event::Result { index, result }) => {
                    if let Some((_, _, stream)) = joined.get_mut(&index) {
                        let _ = send(stream, &json!({ "got": true }));
                    }
                    results.insert(index, *result);
                    until.get_or_insert(Instant::now() + RESULT_WAIT);
                }
                Ok(Event::Failed { index, why }) => {
                    missing.entry(index).or_insert(why);
                }
                Ok(Event::Joined { mut stream, .. }) => {
                    let _ = send(&mut stream, &json!({ "abort": "the run has already started" }));
                }
                Ok(Event::Closed) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
        }
        for index in 0..n {
            if !results.contains_key(&index) {
                missing.entry(index).or_insert_with(|| match until {
                    Some(_) => format!("sent no result within {} s of the first", RESULT_WAIT.as_secs()),
                    None => "ended without sending its result".into(),
                });
            }
        }
        Ok(Outcome { results, missing })
    }
}

/// One shard's connection, on the hub's side: its hello, round trips, then its result.
fn serve(stream: TcpStream, count: u32, join_timeout: Duration, tx: mpsc::Sender<Event>) {
    let _ = stream.set_nodelay(true);
    let Ok(mut writer) = stream.try_clone() else { return };
    let _ = stream.set_read_timeout(Some(join_timeout));
    let mut reader = BufReader::new(stream);
    let Ok(Some(hello)) = receive(&mut reader) else { return };
    let (Some(index), Some(of)) = (hello["hello"].as_u64(), hello["of"].as_u64()) else {
        let _ = send(&mut writer, &json!({ "abort": "not a shard of rpcmeter run" }));
        return;
    };
    if of != count as u64 || index >= of {
        let why = format!("this run has {count} shards: shard {index}/{of} is not one of them");
        let _ = send(&mut writer, &json!({ "abort": why }));
        return;
    }
    let index = index as u32;
    if let Some(why) = hello["failed"].as_str() {
        let _ = tx.send(Event::Failed { index, why: why.to_string() });
        return;
    }
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
        let answer = match send(&mut writer, &json!({ "ping": k })) {
            Ok(()) => receive(&mut reader).ok().flatten().filter(|m| m["pong"] == k),
            Err(_) => None,
        };
        let Some(shard_ns) = answer.and_then(|m| m["at_ns"].as_u64()) else {
            let _ = tx.send(Event::Failed { index, why: "left while joining".into() });
            return;
        };
        let took = sent.elapsed();
        if took < rtt {
            // The shard read its clock about halfway.
            (rtt, clock) = (took, (sent + took / 2, shard_ns));
        }
    }
    // The run is as long as it is: from here on, only the connection's end is a failure.
    let _ = reader.get_ref().set_read_timeout(None);
    if tx.send(Event::Joined { index, rtt, clock, stream: writer }).is_err() {
        return;
    }
    let gone = |e: String| Event::Failed { index, why: format!("disconnected before sending its result ({e})") };
    let event = loop {
        match receive(&mut reader) {
            Ok(Some(m)) if m.get("result").is_some() => {
                let length = m["result"].as_u64().unwrap_or(u64::MAX);
                if length > MAX_RESULT {
                    break Event::Failed { index, why: format!("sent a result of {length} bytes, more than 256 MiB") };
                }
                let mut bytes = vec![0; length as usize];
                if let Err(e) = reader.read_exact(&mut bytes) {
                    break gone(e.to_string());
                }
                break match serde_json::from_slice(&bytes) {
                    Ok(result) => match Run::from_value(result) {
                        Ok(result) => Event::Result { index, result: Box::new(result) },
                        Err(e) => Event::Failed { index, why: format!("sent a result that is not one: {e}") },
                    },
                    Err(e) => Event::Failed { index, why: format!("sent a result that is not JSON: {e}") },
                };
            }
            Ok(Some(m)) if m["failed"].is_string() => {
                break Event::Failed { index, why: m["failed"].as_str().unwrap_or("").to_string() }
            }
            Ok(Some(_)) => {}
            Ok(None) => break gone("end of stream".into()),
            Err(e) => break gone(e.to_string()),
        }
    };
    let _ = tx.send(event);
}

/// A shard's side: joins the hub, gets the start, sends the result.
pub struct Client {
    addr: String,
    index: u32,
    count: u32,
    join_timeout: Duration,
    control: Arc<Control>,
    /// Zero of the times this shard tells the hub (pongs) and is told (the start).
    epoch: Instant,
    writer: Mutex<Option<TcpStream>>,
    /// The hub's messages after the start (its answer to the result).
    from_hub: Mutex<Option<mpsc::Receiver<(Instant, Value)>>>,
}

impl Client {
    pub fn new(addr: String, index: u32, count: u32, join_timeout: Duration, control: Arc<Control>) -> Client {
        Client {
            addr,
            index,
            count,
            join_timeout,
            control,
            epoch: Instant::now(),
            writer: Mutex::new(None),
            from_hub: Mutex::new(None),
        }
    }

    /// Connects, trying again until `within` has passed (the hub may not listen yet).
    fn connect(&self, within: Duration) -> anyhow::Result<TcpStream> {
        let until = Instant::now() + within;
        loop {
            let tried = self
                .addr
                .to_socket_addrs()
                .and_then(|mut addrs| addrs.next().ok_or_else(|| invalid("resolves to no address".into())))
                .and_then(|addr| TcpStream::connect_timeout(&addr, Duration::from_secs(1)));
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

    /// Joins the hub and waits for the start: the instant, on this machine's clock.
    pub fn agree(&self) -> anyhow::Result<Instant> {
        let stream = self.connect(self.join_timeout)?;
        let io = |e: std::io::Error| run_failed(format!("the coordinator at {}: {e}", self.addr));
        let mut writer = stream.try_clone().map_err(io)?;
        send(&mut writer, &json!({ "hello": self.index, "of": self.count })).map_err(io)?;
        let mut ponger = writer.try_clone().map_err(io)?;
        *self.writer.lock().unwrap() = Some(writer);
        let (tx, rx) = mpsc::channel();
        let (control, epoch) = (self.control.clone(), self.epoch);
        // Pings are answered on this thread at once (they measure the trip, not a wait);
        // a stop counts as the user's Ctrl-C would; the rest goes to whoever waits.
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stream);
            loop {
                let message = receive(&mut reader).ok().flatten();
                let at = Instant::now();
                match message {
                    Some(m) if m.get("ping").is_some() => {
                        let at_ns = epoch.elapsed().as_nanos() as u64;
                        let _ = send(&mut ponger, &json!({ "pong": m["ping"], "at_ns": at_ns }));
                    }
                    Some(m) if m["stop"] == true => {
                        control.interrupts.fetch_add(1, Relaxed);
                    }
                    Some(m) => {
                        if tx.send((at, m)).is_err() {
                            return;
                        }
                    }
                    None => {
                        let _ = tx.send((at, json!({ "gone": true })));
                        return;
                    }
                }
            }
        });
        loop {
            if self.control.interrupts.load(Relaxed) > 0 {
                return Err(run_failed("interrupted while waiting for the other shards"));
            }
            let Ok((_, message)) = rx.recv_timeout(Duration::from_millis(50)) else { continue };
            if let Some(at_ns) = message["start_at_ns"].as_u64() {
                *self.from_hub.lock().unwrap() = Some(rx);
                return Ok(self.epoch + Duration::from_nanos(at_ns));
            }
            if let Some(why) = message["abort"].as_str() {
                return Err(run_failed(format!("the coordinator ended the run: {why}")));
            }
            if message["gone"] == true {
                return Err(run_failed(format!(
                    "the coordinator at {} closed the connection before the start",
                    self.addr
                )));
            }
        }
    }

    /// Sends this shard's result; Ok once the hub has it.
    pub fn deliver(&self, result: &Value) -> anyhow::Result<()> {
        let bytes = serde_json::to_vec(result)?;
        let mut writer = self.writer.lock().unwrap();
        let writer = writer.as_mut().ok_or_else(|| run_failed("this shard never joined the coordinator"))?;
        send(writer, &json!({ "result": bytes.len() }))
            .and_then(|_| writer.write_all(&bytes))
            .and_then(|_| writer.flush())
            .map_err(|e| run_failed(format!("cannot send the result: {e}")))?;
        let from_hub = self.from_hub.lock().unwrap().take();
        let from_hub = from_hub.ok_or_else(|| run_failed("this shard never started"))?;
        let until = Instant::now() + ACK_WAIT;
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            match from_hub.recv_timeout(left) {
                Ok((_, m)) if m["got"] == true => return Ok(()),
                Ok((_, m)) if m["gone"] == true => break,
                Ok(_) => {}
                Err(_) => break,
            }
        }
        Err(run_failed(format!("the coordinator at {} did not confirm the result", self.addr)))
    }

    /// Tells the hub this shard failed (best effort: a shard that never joined connects for
    /// it, briefly), so that it is named at once rather than waited for.
    pub fn fail(&self, why: &str) {
        let mut writer = self.writer.lock().unwrap();
        match writer.as_mut() {
            Some(w) => {
                let _ = send(w, &json!({ "failed": why }));
            }
            None => {
                if let Ok(mut stream) = self.connect(self.join_timeout.min(Duration::from_secs(5))) {
                    let _ = send(&mut stream, &json!({ "hello": self.index, "of": self.count, "failed": why }));
                }
            }
        }
    }
}

/// The shards' results merged (partial when some are missing, each named), and one line per
/// shard missing.
pub fn merged(count: u32, results: &BTreeMap<u32, Run>, missing: &BTreeMap<u32, String>) -> anyhow::Result<Run> {
    let inputs: Vec<merge::Input> = results
        .iter()
        .map(|(index, result)| merge::Input { label: format!("shard {index}/{count}"), result: result.clone() })
        .collect();
    let mut merged = merge::merge(&inputs)?;
    if !missing.is_empty() {
        merged.partial = true;
        merged.meta.ended = crate::result::Ended::Partial;
        merged.missing_shards = Some(
            missing
                .iter()
                .map(|(i, why)| crate::result::MissingShard { shard: format!("{i}/{count}"), why: why.clone() })
                .collect(),
        );
        for (index, why) in missing {
            merged.notices.push(format!("shard {index}/{count} is missing from this result: {why}"));
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

/// One shard of a coordinated run, to its end: shard 0 also runs the hub and prints the
/// merged result; any other shard sends its result and says so in one line on stderr (its
/// own result goes to stdout only when the hub cannot take it: nothing measured is lost).
pub fn run_shard(mut settings: Settings, control: Arc<Control>, how: &Coordination) -> anyhow::Result<ExitCode> {
    let (index, count) = (settings.plan.shard.index, settings.plan.shard.count);
    let hub = match how.listen {
        true => Some(Hub::listen(&how.addr, count, how.join_timeout)?),
        false => None,
    };
    let addr = hub.as_ref().map_or(how.addr.clone(), |h| h.local_addr().to_string());
    let hub = hub.map(|hub| {
        let control = control.clone();
        std::thread::spawn(move || hub.run(Some(control)))
    });
    let client = Arc::new(Client::new(addr.clone(), index, count, how.join_timeout, control.clone()));
    let joining = client.clone();
    settings.plan.start = Some(Start::Agreed(Arc::new(move |_: &Control| joining.agree())));
    // The shard's own per-call files are its own; its report is the merged one.
    let own = OutputSettings { primary: None, exports: vec![], ..settings.outputs.clone() };
    let mut outputs = Outputs::open(&own)?;
    let measured = super::run::measure(&settings, &control, &mut outputs);
    let mut problems = outputs.commit();
    let summary = match measured {
        Ok((summary, sinks_failed)) => {
            problems.extend(sinks_failed);
            let delivered = client.deliver(&crate::report::json::value(&summary));
            if let (None, Err(e)) = (&hub, &delivered) {
                // The hub is gone: this shard's result is printed here instead.
                let mut here = Outputs::open(&OutputSettings { csv_details: None, hdr_log: None, ..settings.outputs })?;
                problems.extend(here.write_reports(&summary));
                problems.extend(here.commit());
                let problems: Vec<String> = problems.iter().map(|p| format!("{p:#}")).collect();
                return Err(run_failed(format!(
                    "shard {index}/{count}: {e:#}; its own result is printed instead{}",
                    problems.iter().map(|p| format!("; {p}")).collect::<String>()
                )));
            }
            Some(summary)
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
        let summary = summary.expect("a shard without a result has returned");
        eprintln!(
            "rpcmeter: shard {index}/{count}: {} calls measured, result given to the coordinator at {addr}",
            summary.requests.total
        );
        return super::run::verdict(&summary, problems);
    };
    let outcome = hub.join().map_err(|_| crate::error::internal("the coordinator's thread panicked"))??;
    if outcome.results.is_empty() {
        let why: Vec<String> = outcome.missing.iter().map(|(i, why)| format!("shard {i}/{count}: {why}")).collect();
        return Err(run_failed(format!("no shard gave a result ({})", why.join("; "))));
    }
    let merged = merged(count, &outcome.results, &outcome.missing)?;
    write_merged(&merged, settings.outputs.format, settings.outputs.primary.as_deref())?;
    if let Some(to) = &settings.history {
        if let Err(e) = to.record(&merged.to_value()) {
            match to.explicit() {
                true => problems.push(e),
                false => eprintln!("rpcmeter: warning: {e} (--history PATH records elsewhere, --no-save not at all)"),
            }
        }
    }
    let mut failed: Vec<String> =
        outcome.missing.iter().map(|(i, why)| format!("shard {i}/{count} is missing: {why}")).collect();
    failed.extend(problems.iter().map(|p| format!("{p:#}")));
    match failed.is_empty() {
        true => Ok(ExitCode::SUCCESS),
        false => Err(run_failed(failed.join("; "))),
    }
}
