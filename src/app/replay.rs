//! `run --replay FILE`: the log, read once for its methods and its rate when the run's settings
//! were made (and refused then when none of its calls can be sent: `source::Log`), its calls made the engine's mix (one call of the mix per method, each call
//! drawn from the log: load/logged.rs), and after the run the log's own numbers of the calls
//! sent, beside the run's per-name breakdown.
use super::redact::Redactor;
use super::run::Settings;
use crate::error::bad_input;
use crate::grpc::transport::{Bidi, CallKind, StreamLimits};
use crate::load::engine;
use crate::replay::source::{self, call_name, method_name, Log, Scan, Source};
use crate::result::replay::Replay;
use crate::schema::RequestSource;
use std::sync::Arc;

/// A replay under way: the log's reader, and what the result says of the log.
pub(crate) struct Replaying {
    source: Arc<Source>,
    replay: Replay,
    /// The mix's streaming calls (by index).
    streaming: Vec<usize>,
}

impl Replaying {
    /// Streams the client resets itself as the log ended them (CANCELLED), warm-up included.
    pub(crate) fn resets(&self) -> u64 {
        self.source.resets()
    }

    /// What the result says of the replay, with the log's own numbers of the calls sent and
    /// the bytes the run (`measured`) sent; `calls` are the calls made of each method (the
    /// mix's order).
    pub(crate) fn finish(self, measured: &crate::record::Tally, calls: &[u64]) -> Replay {
        if let Some(why) = self.source.failed() {
            eprintln!("rpcmeter: warning: --replay {}: the rest of the log was not sent: {why}", self.replay.file);
        }
        // A unary attempt's bytes are counted framed, a stream's messages without their
        // 5-byte prefix (a retried stream's attempts are taken as one).
        let counts = &measured.counts;
        let streams: u64 = self.streaming.iter().filter_map(|&i| calls.get(i)).sum();
        let unary_attempts = counts.attempts.saturating_sub(streams);
        Replay {
            recorded: self.source.recorded(),
            payload_bytes_logged: self.source.payload_bytes(),
            payload_bytes_sent: counts.request_bytes.saturating_sub(5 * unary_attempts),
            ..self.replay
        }
    }
}

/// The mix of a replay, its reader started (its plan is the run's: run_settings paced it at
/// the log's rate).
pub(crate) fn mix(settings: &Settings, log: &Log) -> anyhow::Result<(engine::Mix, Replaying)> {
    let Log { settings: replay, scan } = log;
    let plan = &settings.plan;
    let stream = settings.stream;
    if stream.count.is_some() || stream.duration.is_some() || !stream.interval.is_zero() {
        return Err(bad_input("--stream-*: a replayed log's calls are sent as they were logged"));
    }
    if let Some(line) = scan.skipped_line() {
        eprintln!("rpcmeter: {line}");
    }
    let redactor = Redactor::new(&replay.redact);
    if let Some(line) = not_sent(scan, replay, &redactor) {
        eprintln!("rpcmeter: {line}");
    }
    let end = plan.stop.duration.map(|d| plan.warmup.saturating_add(d));
    let secret = Arc::new(move |key: &str| redactor.is_secret(key));
    let empty = Arc::new(RequestSource::fixed(crate::grpc::wire::frame(&[])));
    let calls: Vec<engine::MixCall> = scan
        .methods
        .iter()
        .map(|(path, kind)| engine::MixCall {
            name: call_name(path),
            method: method_name(path),
            schema: None,
            path: path.parse().expect("the scan kept only methods that parse"),
            requests: empty.clone(),
            rules: None,
            kind: *kind,
            // A logged stream's messages leave at their times whatever comes back.
            stream: StreamLimits { bidi: Bidi::Free, ..StreamLimits::default() },
        })
        .collect();
    let spec = plan.call.spec(calls[0].path.clone());
    let source = Arc::new(Source::start(replay, scan, &spec, secret, plan.shard, end)?);
    let mix = engine::Mix {
        pick: crate::load::workload::Pick::round_robin(&vec![1; calls.len()]),
        calls,
        named: true,
        flows: Vec::new(),
        log: Some(source.clone()),
    };
    let (truncated, no_request) = scan.info.skipped();
    let replay = Replay {
        file: replay.file.display().to_string(),
        framing: scan.info.framing.as_str().to_string(),
        schedule: if replay.speed.is_some() { "log" } else { "pool" }.into(),
        speed: replay.speed,
        calls_in_log: scan.calls,
        skipped_truncated: truncated,
        skipped_no_request: no_request,
        ..Replay::default()
    };
    let streaming =
        scan.methods.iter().enumerate().filter(|(_, (_, k))| *k != CallKind::Unary).map(|(i, _)| i).collect();
    Ok((mix, Replaying { source, replay, streaming }))
}

/// One line naming the logged metadata keys that are not sent (never their values).
fn not_sent(scan: &Scan, replay: &source::Settings, redactor: &Redactor) -> Option<String> {
    let kept: Vec<String> = scan
        .info
        .keys
        .keys()
        .filter_map(|key| {
            let key = key.to_ascii_lowercase();
            if redactor.is_secret(&key) {
                Some(format!("{key} (a credential: give your own with -m)"))
            } else if replay.drop_headers.contains(&key) {
                Some(format!("{key} (--replay-drop-header)"))
            } else {
                None
            }
        })
        .collect();
    (!kept.is_empty()).then(|| format!("replay: logged metadata not sent: {}", kept.join(", ")))
}
