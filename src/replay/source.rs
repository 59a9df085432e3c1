//! `run --replay`: a log's calls handed to the engine (load/logged.rs). A first pass
//! (`scan`) reads the whole log for its methods and what cannot be sent; then a reader thread
//! reads it again, call by call, into a bounded channel the workers draw from, so memory stays
//! that of a few hundred calls whatever the log's size. Each call goes out with its logged
//! request bytes (no re-encoding) and metadata, less what is dropped (`--replay-drop-header`,
//! credentials by the redaction rules, gRPC's and HTTP/2's own headers), `-m` adding or
//! overriding.
use super::calls::{Call, Calls, Limits};
use super::info::Info;
use super::log::{Entries, Framing};
use crate::error::bad_input;
use crate::grpc::transport::{CallKind, Script};
use crate::grpc::{CallSpec, PreparedCall};
use crate::load::logged::{CallLog, LoggedCall};
use crate::load::plan::ShardOf;
use crate::record::shard::{new_histogram, to_text};
use crate::result::slice::{Counts, LatencySummary, Slice};
use hdrhistogram::Histogram;
use http::{HeaderMap, HeaderName, HeaderValue};
use std::collections::BTreeMap;
use std::io::BufReader;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tonic::Code;

/// `run --replay FILE` and its flags.
#[derive(Debug, Clone)]
pub struct Settings {
    pub file: PathBuf,
    /// None: told by the file's first byte.
    pub framing: Option<Framing>,
    /// The largest entry read (`--replay-max-entry`).
    pub max_entry: u64,
    /// Each call at its logged offset from the first call divided by this (`--speed`); None:
    /// the log is a pool of calls drawn in order, paced by -c, --rps or --stages.
    pub speed: Option<f64>,
    /// `--replay-loop`: the log again once it ends (a pool always starts over).
    pub repeat: bool,
    /// `--replay-drop-header`: logged metadata never sent (lower case).
    pub drop_headers: Vec<String>,
    /// `--redact`: more metadata keys that are credentials, never sent from the log.
    pub redact: Vec<String>,
}

/// Headers the transport sets itself, or that gRPC and HTTP/2 own: never taken from a log.
const TRANSPORT_HEADERS: [&str; 8] =
    ["content-type", "te", "user-agent", "host", "content-length", "connection", "transfer-encoding", "lb-token"];

/// Why a call of the log is not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// A message cut by the log's limit (`payload_truncated`): not what was sent.
    Truncated,
    /// No message of the client in the log (cancelled first, or its entry lost).
    NoRequest,
}

impl Skip {
    /// Whether `call` can be sent as it was, and if not, why.
    pub fn of(call: &Call) -> Option<Skip> {
        match () {
            _ if call.requests.is_empty() => Some(Skip::NoRequest),
            _ if call.truncated() => Some(Skip::Truncated),
            _ => None,
        }
    }
}

/// What the first pass found. A sweep's steps share it, and the parent of `run --shards`
/// hands its own to each shard (`write_to`, `read_from`), so that the log is read whole once
/// before the calls are sent.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Scan {
    pub info: Info,
    /// The methods sent, in the mix's order (`LoggedCall::which`), and their kinds.
    pub methods: Vec<(String, CallKind)>,
    /// Calls of the log in all, and those that will be sent.
    pub calls: u64,
    pub sendable: u64,
}

impl Scan {
    /// Reads the whole log; refuses it (exit 2, one line) when it is not one or when no call
    /// of it can be sent.
    pub fn read(settings: &Settings) -> anyhow::Result<Scan> {
        let name = settings.file.display();
        let file = open(settings)?;
        let info = Info::read(BufReader::with_capacity(1 << 16, file), settings.framing, settings.max_entry)
            .map_err(|why| bad_input(format!("--replay {name}: {why}")))?;
        // A method with any streaming call is streaming: its calls of one message each way too.
        let methods: Vec<(String, CallKind)> = info
            .methods
            .iter()
            .filter(|(path, m)| m.sendable() > 0 && path.parse::<http::uri::PathAndQuery>().is_ok())
            .map(|(path, m)| (path.clone(), m.kind()))
            .collect();
        let sendable = methods.iter().map(|(p, _)| info.methods[p].sendable()).sum();
        let scan = Scan { calls: info.calls, sendable, methods, info };
        if sendable == 0 {
            let (truncated, none) = scan.info.skipped();
            return Err(bad_input(format!(
                "--replay {name}: no call of its {} can be sent ({truncated} with a message cut by the log's limit, {none} without a request)",
                scan.calls
            )));
        }
        Ok(scan)
    }

    /// The log's mean rate, calls/s to 0.1 (at least 0.1): on its own schedule the calls
    /// bring their own times, and this is the rate the report gives.
    pub fn mean_rate(&self) -> f64 {
        let span = self.info.span().as_secs_f64();
        let mean = if span > 0.0 { self.calls.saturating_sub(1) as f64 / span } else { 1.0 };
        (mean * 10.0).round().max(1.0) / 10.0
    }

    /// The scan as `read_from` takes it (JSON).
    pub fn write_to(&self, to: impl std::io::Write) -> std::io::Result<()> {
        serde_json::to_writer(to, self).map_err(std::io::Error::from)
    }

    /// A scan `write_to` wrote, at most `MAX_SCAN_TEXT` of it: standard input is bounded like
    /// every other input, even from the parent (the scan's own limits keep it far below); a
    /// longer or garbled one is bad input, one line and exit 2.
    pub fn read_from(from: impl std::io::Read) -> anyhow::Result<Scan> {
        use std::io::Read;
        let mut text = Vec::new();
        let whence = "the log's scan as the parent of the shards gave it";
        from.take(MAX_SCAN_TEXT.0 + 1)
            .read_to_end(&mut text)
            .map_err(|e| crate::error::internal(format!("{whence}: {e}")))?;
        if text.len() as u64 > MAX_SCAN_TEXT.0 {
            return Err(bad_input(format!("{whence}: longer than {MAX_SCAN_TEXT}")));
        }
        serde_json::from_slice(&text).map_err(|e| bad_input(format!("{whence}: {e}")))
    }

    /// One line on what is not sent, when something is not.
    pub fn skipped_line(&self) -> Option<String> {
        let (truncated, none) = self.info.skipped();
        (truncated + none > 0).then(|| {
            format!(
                "replay: {} of the log's {} calls are not sent: {truncated} with a message cut by the log's limit (payload_truncated), {none} without a request",
                truncated + none,
                self.calls
            )
        })
    }
}

/// A log to replay: its flags, and the log read once for what is known before the run (its
/// methods, its calls, its mean rate).
#[derive(Debug, Clone)]
pub struct Log {
    pub settings: Settings,
    pub scan: Arc<Scan>,
}

impl Log {
    pub fn read(settings: Settings) -> anyhow::Result<Log> {
        let scan = Arc::new(Scan::read(&settings)?);
        Ok(Log { settings, scan })
    }

    /// The log with a scan already made of its file (`scanned`: by a sweep's first step, by
    /// the parent of `run --shards`), or read now without one, or when the file's length is
    /// no longer the one scanned (it changed since).
    pub fn read_unless_scanned(settings: Settings, scanned: Option<Arc<Scan>>) -> anyhow::Result<Log> {
        let length = std::fs::metadata(&settings.file).map(|m| m.len()).ok();
        match scanned {
            Some(scan) if length == Some(scan.info.bytes) => Ok(Log { settings, scan }),
            _ => Log::read(settings),
        }
    }

    /// The rate of the log's own schedule (its mean, sped up), or None: the log is a pool of
    /// calls paced by -c, --rps or --stages.
    pub fn scheduled_rate(&self) -> Option<f64> {
        self.settings.speed.map(|speed| self.scan.mean_rate() * speed)
    }
}

fn open(settings: &Settings) -> anyhow::Result<std::fs::File> {
    let name = settings.file.display();
    let file = std::fs::File::open(&settings.file).map_err(|e| bad_input(format!("--replay {name}: {e}")))?;
    // Read twice (the scan, then the calls): a pipe or a device would not read the same.
    match file.metadata() {
        Ok(m) if m.is_file() => Ok(file),
        _ => Err(bad_input(format!("--replay {name}: not a regular file (the log is read twice)"))),
    }
}

/// The log's own numbers of the calls sent, by method.
#[derive(Default)]
struct Recorded {
    by_method: Vec<RecordedMethod>,
    /// Message bytes of the measured calls sent, as logged.
    payload_bytes: u64,
    /// Streams sent (warm-up included) that the log ended CANCELLED: the client resets each
    /// at its logged time (`Script::cancel`).
    resets: u64,
}

struct RecordedMethod {
    counts: Counts,
    statuses: BTreeMap<String, u64>,
    latency: Histogram<u64>,
}

/// What the reader thread and the workers share.
struct Shared {
    stop: AtomicBool,
    /// Set once the run has ended: the reader only counts the calls due before the end.
    counting: AtomicBool,
    state: Mutex<State>,
    counted: std::sync::Condvar,
}

#[derive(Default)]
struct State {
    recorded: Recorded,
    /// Calls produced (sent to the workers, or counted) due before the end.
    due_before_end: u64,
    /// The reader has read as far as the end (or the log ended, or failed).
    reader_done: bool,
    /// Why the reader stopped early (the file changed under it).
    failed: Option<String>,
}

/// The engine's `CallLog` over a log file.
pub struct Source {
    calls: crossbeam_channel::Receiver<LoggedCall>,
    shared: Arc<Shared>,
    scheduled: bool,
    methods: Vec<String>,
}

/// Calls read ahead of the workers: a few milliseconds of a busy log.
const AHEAD: usize = 512;

/// The most of a scan's JSON a shard reads from standard input (`Scan::read_from`).
const MAX_SCAN_TEXT: crate::input::ByteSize = crate::input::ByteSize::mib(64);

impl Source {
    /// Starts the reader. `spec`: the plan's call options (-m as `metadata`, the deadline);
    /// `secret`: the redaction rules' judgement of a metadata key; `end`: the run's end
    /// (warm-up and -z) when it has one.
    pub fn start(
        settings: &Settings,
        scan: &Scan,
        spec: &CallSpec,
        secret: Arc<dyn Fn(&str) -> bool + Send + Sync>,
        shard: ShardOf,
        end: Option<Duration>,
    ) -> anyhow::Result<Source> {
        let file = open(settings)?;
        let (tx, rx) = crossbeam_channel::bounded(AHEAD);
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            counting: AtomicBool::new(false),
            state: Mutex::new(State::default()),
            counted: std::sync::Condvar::new(),
        });
        {
            let mut state = shared.state.lock().unwrap();
            state.recorded.by_method = scan
                .methods
                .iter()
                .map(|_| RecordedMethod {
                    counts: Counts::default(),
                    statuses: BTreeMap::new(),
                    latency: new_histogram(),
                })
                .collect();
        }
        let reader = Reader {
            settings: settings.clone(),
            methods: scan.methods.iter().enumerate().map(|(i, (m, kind))| (m.clone(), (i, *kind))).collect(),
            spec: spec.clone(),
            secret,
            shard,
            end,
            period: loop_period(&scan.info),
            shared: shared.clone(),
            tx,
        };
        std::thread::Builder::new()
            .name("rpcmeter-replay".into())
            .spawn(move || reader.run(file))
            .map_err(|e| crate::error::internal(format!("cannot start the log's reader: {e}")))?;
        let methods = scan.methods.iter().map(|(path, _)| path.clone()).collect();
        Ok(Source { calls: rx, shared, scheduled: settings.speed.is_some(), methods })
    }

    /// The log's own numbers of the calls sent, by call name (the method's path without its
    /// first '/', as `calls_by_name` names them).
    pub fn recorded(&self) -> BTreeMap<String, Slice> {
        let state = self.shared.state.lock().unwrap();
        self.methods
            .iter()
            .zip(&state.recorded.by_method)
            .filter(|(_, r)| r.counts.total > 0)
            .map(|(path, r)| {
                let slice = Slice {
                    requests: r.counts.clone(),
                    throughput_rps: 0.0,
                    statuses: r.statuses.clone(),
                    latency_us: LatencySummary::of_histogram(&r.latency),
                    histogram: to_text(&r.latency),
                    method: Some(method_name(path)),
                    ..Slice::default()
                };
                (call_name(path), slice)
            })
            .collect()
    }

    /// Message bytes of the measured calls sent, as the log holds them.
    pub fn payload_bytes(&self) -> u64 {
        self.shared.state.lock().unwrap().recorded.payload_bytes
    }

    /// Streams sent, warm-up included, that the client resets itself because the log ended
    /// them CANCELLED: each is OK to the client and, unless the server ended it first,
    /// cancelled to the server (analysis/cross_check.rs).
    pub fn resets(&self) -> u64 {
        self.shared.state.lock().unwrap().recorded.resets
    }

    /// Why the log was not read to its end, if it was not.
    pub fn failed(&self) -> Option<String> {
        self.shared.state.lock().unwrap().failed.clone()
    }
}

impl Drop for Source {
    fn drop(&mut self) {
        self.shared.stop.store(true, Relaxed);
    }
}

/// A call's name in the breakdown: its path without the first '/' ("EchoService/echo").
pub fn call_name(path: &str) -> String {
    path.trim_start_matches('/').to_string()
}

/// A method's full name as the schema gives it ("EchoService.echo").
pub fn method_name(path: &str) -> String {
    call_name(path).replacen('/', ".", 1)
}

impl CallLog for Source {
    fn next(&self) -> Option<LoggedCall> {
        self.calls.recv().ok()
    }

    fn sent(&self, call: &LoggedCall, warmup: bool) {
        let mut state = self.shared.state.lock().unwrap();
        // Counted as the server counts: every call of the run, the warm-up's too.
        state.recorded.resets += call.stream.as_ref().is_some_and(|s| s.cancel.is_some()) as u64;
        // The warm-up's calls are left out, as the run's own numbers leave them out.
        if warmup {
            return;
        }
        // The logged messages, framed as they are sent (their bytes are the log's).
        let payload = |framed: &bytes::Bytes| framed.len().saturating_sub(5) as u64;
        state.recorded.payload_bytes += match &call.stream {
            Some(script) => script.messages.iter().map(|(_, m)| payload(m)).sum(),
            None => payload(&call.request),
        };
        let Some((status, latency)) = call.recorded else { return };
        let Some(r) = state.recorded.by_method.get_mut(call.which) else { return };
        r.counts.total += 1;
        match status {
            Code::Ok => r.counts.ok += 1,
            _ => r.counts.failed += 1,
        }
        *r.statuses.entry(crate::grpc::status::name(status).to_string()).or_default() += 1;
        let _ = r.latency.record(latency.as_nanos().clamp(1, u64::MAX as u128) as u64);
    }

    fn scheduled(&self) -> bool {
        self.scheduled
    }

    fn due_before_end(&self) -> Option<u64> {
        if !self.scheduled {
            return None;
        }
        // The calls read ahead were counted as they were read; the reader counts on to the end.
        self.shared.counting.store(true, Relaxed);
        while self.calls.try_recv().is_ok() {}
        let mut state = self.shared.state.lock().unwrap();
        while !state.reader_done {
            while self.calls.try_recv().is_ok() {}
            state = self.shared.counted.wait_timeout(state, Duration::from_millis(10)).unwrap().0;
        }
        Some(state.due_before_end)
    }
}

/// From one pass of the log to the next (`--replay-loop`): its span and one mean gap more,
/// so the calls keep their mean spacing across the seam.
fn loop_period(info: &Info) -> Duration {
    let span = info.span();
    let gap = match info.calls {
        0 | 1 => Duration::from_millis(1),
        n => span / (n - 1).min(u32::MAX as u64) as u32,
    };
    (span + gap).max(Duration::from_micros(1))
}

/// A logged time divided by `--speed`, to the nanosecond.
fn scaled(logged: Duration, speed: f64) -> Duration {
    match speed {
        1.0 => logged,
        _ => Duration::from_nanos((logged.as_nanos() as f64 / speed).round() as u64),
    }
}

/// A header block, and the logged metadata it was made from.
type Header = (Vec<(String, bytes::Bytes)>, PreparedCall);

/// The reader thread: the log, call by call, into the channel.
struct Reader {
    settings: Settings,
    /// Each method's place in the mix, and its kind.
    methods: std::collections::HashMap<String, (usize, CallKind)>,
    spec: CallSpec,
    secret: Arc<dyn Fn(&str) -> bool + Send + Sync>,
    shard: ShardOf,
    end: Option<Duration>,
    period: Duration,
    shared: Arc<Shared>,
    tx: crossbeam_channel::Sender<LoggedCall>,
}

impl Reader {
    fn run(self, file: std::fs::File) {
        let failed = self.passes(file).err();
        let mut state = self.shared.state.lock().unwrap();
        state.failed = failed;
        state.reader_done = true;
        self.shared.counted.notify_all();
    }

    /// Every pass over the log; Err when a pass could not read it.
    fn passes(&self, mut file: std::fs::File) -> Result<(), String> {
        let mut index = 0u64;
        let mut first: Option<Duration> = None;
        // Each method's last header block and the metadata it was made from: calls that log
        // the same metadata (most do) share it instead of encoding it again.
        let mut headers: Vec<Option<Header>> = vec![None; self.methods.len()];
        for pass in 0u32.. {
            let entries =
                Entries::new(BufReader::with_capacity(1 << 16, file), self.settings.framing, self.settings.max_entry)?;
            let mut calls = Calls::new(entries, Limits::default());
            let mut any = false;
            while let Some(call) = calls.next_call()? {
                let start = *first.get_or_insert(call.start);
                if Skip::of(&call).is_some() {
                    continue;
                }
                let Some(&(which, kind)) = self.methods.get(&call.method) else { continue };
                index += 1;
                if (index - 1) % self.shard.count as u64 != self.shard.index as u64 {
                    continue;
                }
                any = true;
                let due = self
                    .settings
                    .speed
                    .map(|speed| scaled(call.start.saturating_sub(start) + self.period * pass, speed));
                let mut logged = self.logged(due, which, &call, &mut headers[which]);
                if kind != CallKind::Unary {
                    logged.stream = Some(Box::new(self.script(&call, kind)));
                }
                if !self.hand_over(logged) {
                    return Ok(());
                }
            }
            // A pool starts over; the log's schedule only with --replay-loop.
            if !any || (self.settings.speed.is_some() && !self.settings.repeat) {
                return Ok(());
            }
            file = std::fs::File::open(&self.settings.file).map_err(|e| format!("cannot open it again: {e}"))?;
        }
        Ok(())
    }

    /// Sends one call to the workers (or, once the run has ended, counts it); false when the
    /// reader should stop.
    fn hand_over(&self, call: LoggedCall) -> bool {
        let before_end = match (call.due, self.end) {
            (Some(due), Some(end)) => due < end,
            _ => true,
        };
        if before_end {
            self.shared.state.lock().unwrap().due_before_end += 1;
        }
        let mut logged = Some(call);
        loop {
            if self.shared.stop.load(Relaxed) {
                return false;
            }
            if self.shared.counting.load(Relaxed) {
                // Counting on to the end of the run's time: calls in the order they started.
                return before_end;
            }
            match self.tx.send_timeout(logged.take().expect("kept until sent"), Duration::from_millis(50)) {
                Ok(()) => return true,
                Err(crossbeam_channel::SendTimeoutError::Timeout(back)) => logged = Some(back),
                Err(crossbeam_channel::SendTimeoutError::Disconnected(_)) => return false,
            }
        }
    }

    /// A streaming call's messages and close at their logged times since its start, divided
    /// by `--speed` (a pool keeps them as logged), and its reset where the log ended it
    /// CANCELLED. A client or bidi stream cancelled before its client closed is never closed:
    /// closed with its last message, the server's answer would end it first, OK to both. A
    /// server stream's client closes with its one request, as gRPC clients do (a server's log
    /// lacks that close when the handler never read to the end).
    fn script(&self, call: &Call, kind: CallKind) -> Script {
        let speed = self.settings.speed.unwrap_or(1.0);
        let cancelled = call.end.filter(|end| end.status == Code::Cancelled as u32);
        let still_sending = matches!(kind, CallKind::ClientStream | CallKind::Bidi) && call.half_close.is_none();
        Script {
            messages: call.requests.iter().map(|r| (scaled(r.at, speed), crate::grpc::wire::frame(&r.data))).collect(),
            close: (cancelled.is_none() || !still_sending).then(|| scaled(call.closed_after(), speed)),
            cancel: cancelled.map(|end| scaled(end.after, speed)),
        }
    }

    /// The call as the engine sends it; `last`: its method's last header block, reused when
    /// the metadata is the same.
    fn logged(&self, due: Option<Duration>, which: usize, call: &Call, last: &mut Option<Header>) -> LoggedCall {
        let header = match last {
            Some((metadata, prepared)) if *metadata == call.metadata => prepared.clone(),
            _ => {
                let mut spec = self.spec.clone();
                spec.path = call.method.parse().expect("the scan kept only methods that parse");
                spec.metadata = self.metadata(call);
                let prepared = PreparedCall::new(&spec);
                *last = Some((call.metadata.clone(), prepared.clone()));
                prepared
            }
        };
        LoggedCall {
            due,
            which,
            call: header,
            request: crate::grpc::wire::frame(&call.requests[0].data),
            stream: None,
            recorded: call.end.map(|end| (Code::from_i32(end.status as i32), end.after)),
        }
    }

    /// The logged metadata that is sent, then `-m` (which replaces a logged key it names).
    fn metadata(&self, call: &Call) -> HeaderMap {
        let given = &self.spec.metadata;
        let mut out = HeaderMap::with_capacity(call.metadata.len() + given.len());
        for (key, value) in &call.metadata {
            let key = key.to_ascii_lowercase();
            if !sent(&key, &self.settings.drop_headers, &*self.secret) {
                continue;
            }
            let Ok(name) = HeaderName::from_bytes(key.as_bytes()) else { continue };
            if given.contains_key(&name) {
                continue;
            }
            // Binary values travel base64-encoded (gRPC over HTTP/2, "-bin" keys).
            let value = match key.ends_with("-bin") {
                true => {
                    use base64::Engine;
                    HeaderValue::try_from(base64::engine::general_purpose::STANDARD_NO_PAD.encode(value))
                }
                false => HeaderValue::from_bytes(value),
            };
            if let Ok(value) = value {
                out.append(name, value);
            }
        }
        for (name, value) in given {
            out.append(name, value.clone());
        }
        out
    }
}

/// Whether a logged metadata key is sent: not one of gRPC's or the transport's own, not
/// dropped by `--replay-drop-header`, not a credential by the redaction rules.
pub fn sent(key: &str, dropped: &[String], secret: &dyn Fn(&str) -> bool) -> bool {
    !(key.starts_with(':')
        || key.starts_with("grpc-")
        || TRANSPORT_HEADERS.contains(&key)
        || dropped.iter().any(|d| d == key)
        || secret(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_applications_metadata_is_sent() {
        let secret = |k: &str| k == "authorization";
        let dropped = vec!["x-request-id".to_string()];
        for key in ["x-tenant", "trace-bin", "x-b3-traceid"] {
            assert!(sent(key, &dropped, &secret), "{key}");
        }
        for key in ["authorization", "x-request-id", "grpc-timeout", ":authority", "user-agent", "te"] {
            assert!(!sent(key, &dropped, &secret), "{key}");
        }
    }

    /// What a shard of `run --shards` reads on its standard input is the parent's scan, whole.
    #[test]
    fn a_scan_on_standard_input_is_read_up_to_its_bound() {
        // Endless input (a stranger's `--replay-scan-stdin < /dev/zero`) ends at the bound.
        let endless = std::io::repeat(b' ');
        let error = Scan::read_from(endless).unwrap_err();
        assert!(error.to_string().contains("longer than 64.0 MiB"), "{error}");
        // Bad input (exit 2), as any other input that is not what it should be.
        assert_eq!(crate::error::exit_code(&error), 2, "{error}");
        let error = Scan::read_from(&b"{\"calls\": 1}"[..]).unwrap_err();
        assert!(error.to_string().contains("the log's scan as the parent of the shards gave it"), "{error}");
        assert_eq!(crate::error::exit_code(&error), 2, "{error}");
    }

    #[test]
    fn a_scan_written_reads_back_the_same() {
        use crate::replay::log::tests::{encode, unary};
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("calls.binlog");
        let calls: Vec<_> =
            (0..5).flat_map(|i| unary(i + 1, i * 1_000_000, "/A/b", b"hi", 500 + i, i as u32 % 2)).collect();
        std::fs::write(&file, encode(&calls, Framing::Be32)).unwrap();
        let settings = Settings {
            file,
            framing: None,
            max_entry: 1 << 20,
            speed: Some(1.0),
            repeat: false,
            drop_headers: vec![],
            redact: vec![],
        };
        let scan = Scan::read(&settings).unwrap();
        let mut written = Vec::new();
        scan.write_to(&mut written).unwrap();
        let back = Scan::read_from(&written[..]).unwrap();
        assert_eq!(format!("{back:?}"), format!("{scan:?}"));
        assert_eq!(back.info.methods["/A/b"].latency, scan.info.methods["/A/b"].latency);
        // Of the same file, it is taken as it is; of a file changed since, the file is read.
        let log = Log::read_unless_scanned(settings.clone(), Some(Arc::new(back))).unwrap();
        assert_eq!(log.scan.info.bytes, std::fs::metadata(&settings.file).unwrap().len());
        let mut stale = scan.clone();
        stale.calls = 99;
        assert_eq!(Log::read_unless_scanned(settings.clone(), Some(Arc::new(stale.clone()))).unwrap().scan.calls, 99);
        stale.info.bytes += 1;
        assert_eq!(Log::read_unless_scanned(settings, Some(Arc::new(stale))).unwrap().scan.calls, 5);
    }

    #[test]
    fn call_names_are_paths_without_the_first_slash() {
        assert_eq!(call_name("/EchoService/echo"), "EchoService/echo");
        assert_eq!(method_name("/rpcmeter.lab.v1.Stats/Get"), "rpcmeter.lab.v1.Stats.Get");
    }
}
