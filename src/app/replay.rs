//! `run --replay FILE`: the log read once for its methods (and refused when none of its calls
//! can be sent), its calls made the engine's mix (one call of the mix per method, each call
//! drawn from the log: load/logged.rs), and after the run the log's own numbers of the calls
//! sent, beside the run's per-name breakdown.
use super::redact::Redactor;
use super::run::Settings;
use crate::error::bad_input;
use crate::grpc::transport::CallKind;
use crate::load::engine;
use crate::load::pacer::{Arrival, Pacer, RateSchedule};
use crate::load::plan::Plan;
use crate::replay::source::{self, call_name, method_name, Scan, Source};
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
    /// What the result says of the replay, with the log's own numbers of the calls sent and
    /// the bytes the run (`measured`) sent.
    pub(crate) fn finish(self, measured: &crate::record::Tally) -> Replay {
        if let Some(why) = self.source.failed() {
            eprintln!("rpcmeter: warning: --replay {}: the rest of the log was not sent: {why}", self.replay.file);
        }
        // A unary attempt's bytes are counted framed, a stream's messages without their
        // 5-byte prefix (a retried stream's attempts are taken as one).
        let counts = &measured.counts;
        let streams: u64 = self.streaming.iter().filter_map(|&i| measured.by_name.get(i)).map(|n| n.calls).sum();
        let unary_attempts = counts.attempts.saturating_sub(streams);
        Replay {
            recorded: self.source.recorded(),
            payload_bytes_logged: self.source.payload_bytes(),
            payload_bytes_sent: counts.request_bytes.saturating_sub(5 * unary_attempts),
            ..self.replay
        }
    }
}

/// The calls of a replay as the engine and the breakdown take them.
pub(crate) type Prepared = (engine::Mix, Plan, Vec<(String, String)>, Replaying);

/// The mix, plan and call names (name, method) of a replay, its reader started.
pub(crate) fn mix(settings: &Settings, replay: &source::Settings) -> anyhow::Result<Prepared> {
    let mut plan = settings.plan.clone();
    let stream = plan.stream;
    if stream.count.is_some() || stream.duration.is_some() || !stream.interval.is_zero() {
        return Err(bad_input("--stream-*: a replayed log's calls are sent as they were logged"));
    }
    let scan = Scan::read(replay)?;
    if let Some(line) = scan.skipped_line() {
        eprintln!("rpcmeter: {line}");
    }
    let redactor = Redactor::new(&replay.redact);
    if let Some(line) = not_sent(&scan, replay, &redactor) {
        eprintln!("rpcmeter: {line}");
    }
    // The result's messages: every streaming call's together, under the kind that covers them.
    let streams = |kinds: &[CallKind]| scan.methods.iter().any(|(_, k)| kinds.contains(k));
    plan.kind = CallKind::of(
        streams(&[CallKind::ClientStream, CallKind::Bidi]),
        streams(&[CallKind::ServerStream, CallKind::Bidi]),
    );
    // A logged stream's messages leave at their times whatever comes back.
    plan.stream.bidi = crate::grpc::transport::Bidi::Free;
    if let (Pacer::Open(_, Arrival::Logged), Some(speed)) = (&plan.pacer, replay.speed) {
        // The report's rate: the log's mean, sped up.
        let span = scan.info.span().as_secs_f64();
        let mean = if span > 0.0 { scan.calls.saturating_sub(1) as f64 / span } else { 1.0 };
        let mean = (mean * 10.0).round().max(1.0) / 10.0;
        plan.pacer = Pacer::Open(RateSchedule::constant(mean * speed), Arrival::Logged);
    }
    let end = plan.stop.duration.map(|d| plan.warmup.saturating_add(d));
    let secret = Arc::new(move |key: &str| redactor.is_secret(key));
    let source = Arc::new(Source::start(replay, &scan, &plan.spec, secret, plan.shard, end)?);
    let empty = Arc::new(RequestSource::fixed(crate::grpc::wire::frame(&[])));
    let calls: Vec<engine::MixCall> = scan
        .methods
        .iter()
        .map(|(path, kind)| engine::MixCall {
            path: path.parse().expect("the scan kept only methods that parse"),
            requests: empty.clone(),
            rules: None,
            kind: *kind,
            stream: plan.stream,
        })
        .collect();
    plan.spec.path = calls[0].path.clone();
    let names = scan.methods.iter().map(|(p, _)| (call_name(p), method_name(p))).collect();
    let mix = engine::Mix {
        pick: crate::load::workload::Pick::round_robin(&vec![1; calls.len()]),
        calls,
        named: true,
        flows: Vec::new(),
        checks: 0,
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
    Ok((mix, plan, names, Replaying { source, replay, streaming }))
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
