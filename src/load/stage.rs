//! The resolved stage: a run's calls once the schema has answered (`app::run` resolves a
//! `--call`, `workload::Workload::mix` a workload, `app::replay` a log). Each call of the
//! `Mix` holds its name, method, wire path, kind, requests, stream limits and field rules
//! (captures and named checks); with the pick (the weights, chosen once) and the flows, the
//! mix is all the engine sends and all that the results are broken down by. The engine sizes
//! its per-name, per-flow and per-check tallies from it before the clock starts
//! (`record::shard::Slots`).
use super::flow::Rules;
use super::logged::CallLog;
use super::workload::Pick;
use crate::error::bad_input;
use crate::grpc::transport::{Bidi, CallKind, CancelAfter, StreamLimits};
use crate::schema::RequestSource;
use http::uri::PathAndQuery;
use prost_reflect::MethodDescriptor;
use std::sync::Arc;

/// What the calls of a run send: one method (`--call`), a workload's weighted mix, or the
/// methods of a replayed log.
pub struct Mix {
    pub calls: Vec<MixCall>,
    /// Which call each started call makes, from its run-wide start number.
    pub pick: Pick,
    /// Record each call name's share apart (a workload, a replay), besides the totals.
    pub named: bool,
    /// A workload's flows: when there are any, `pick` picks a flow, not a call.
    pub flows: Vec<MixFlow>,
    /// `run --replay`: each call drawn from the log (its method is a call of the mix).
    pub log: Option<Arc<dyn CallLog>>,
}

/// One call of a mix: its name, its method and what each of its calls sends and reads.
pub struct MixCall {
    /// Its name in the results: a workload's `[[call]]` name, a replayed method's path without
    /// the first slash, the method's full name for `--call`.
    pub name: String,
    /// The method's full name (`package.Service.Method`).
    pub method: String,
    /// The method as the schema describes it (None: a replay's calls, sent as logged).
    pub schema: Option<MethodDescriptor>,
    pub path: PathAndQuery,
    pub requests: Arc<RequestSource>,
    /// A workload call's captures and checks (None: its answers are not read).
    pub rules: Option<Rules>,
    pub kind: CallKind,
    pub stream: StreamLimits,
}

/// A flow of a workload: its steps (calls of the mix) made in order by one worker.
pub struct MixFlow {
    pub name: String,
    pub steps: Vec<usize>,
    pub stop_on_check_failure: bool,
}

impl Mix {
    /// `--call`: the one method, the stream flags (`given`) checked against its kind.
    pub fn single(method: &MethodDescriptor, requests: Arc<RequestSource>, given: StreamLimits) -> anyhow::Result<Mix> {
        let call = MixCall::new(method, requests, given)?;
        Ok(Mix { calls: vec![call], pick: Pick::round_robin(&[1]), named: false, flows: Vec::new(), log: None })
    }

    /// The workload's checks, all calls' together (`Rules::first_check` numbers them).
    pub fn checks(&self) -> usize {
        self.calls.iter().filter_map(|c| c.rules.as_ref()).map(Rules::checks).sum()
    }

    /// Each named call's (name, method), in the mix's order (none when the mix is one
    /// unnamed call): the recorded per-name tallies follow this order.
    pub fn call_names(&self) -> Vec<(String, String)> {
        match self.named {
            true => self.calls.iter().map(|c| (c.name.clone(), c.method.clone())).collect(),
            false => Vec::new(),
        }
    }

    /// Each flow's (name, step names), in the mix's order.
    pub fn flow_names(&self) -> Vec<(String, Vec<String>)> {
        let step = |&i: &usize| self.calls[i].name.clone();
        self.flows.iter().map(|f| (f.name.clone(), f.steps.iter().map(step).collect())).collect()
    }

    /// Each check's (call name, expression), in the order the checks are numbered.
    pub fn check_names(&self) -> Vec<(String, String)> {
        let texts = |c: &MixCall| c.rules.iter().flat_map(Rules::check_texts).map(str::to_owned).collect::<Vec<_>>();
        self.calls.iter().flat_map(|c| texts(c).into_iter().map(|t| (c.name.clone(), t))).collect()
    }

    /// The kind of the run's calls and the bidi mode, for the messages counted apart: a
    /// replay counts every streaming call's messages together, under the kind that covers
    /// them; a workload of several calls counts its calls alone (as unary).
    pub fn streams(&self) -> (CallKind, Bidi) {
        let any = |kinds: &[CallKind]| self.calls.iter().any(|c| kinds.contains(&c.kind));
        match &self.calls[..] {
            [one] => (one.kind, one.stream.bidi),
            _ if self.log.is_some() => (
                CallKind::of(
                    any(&[CallKind::ClientStream, CallKind::Bidi]),
                    any(&[CallKind::ServerStream, CallKind::Bidi]),
                ),
                Bidi::Free,
            ),
            _ => (CallKind::Unary, Bidi::PingPong),
        }
    }
}

impl MixCall {
    /// A call of `method` with `requests`, unnamed but by the method; the stream flags
    /// (`given`) checked against its kind.
    pub fn new(
        method: &MethodDescriptor,
        requests: Arc<RequestSource>,
        given: StreamLimits,
    ) -> anyhow::Result<MixCall> {
        let kind = CallKind::of(method.is_client_streaming(), method.is_server_streaming());
        Ok(MixCall {
            name: method.full_name().to_owned(),
            method: method.full_name().to_owned(),
            schema: Some(method.clone()),
            path: path(method)?,
            stream: stream_of(method, kind, given, requests.records() as u64)?,
            requests,
            rules: None,
            kind,
        })
    }
}

/// The method path gRPC puts on the wire.
pub fn path(method: &MethodDescriptor) -> anyhow::Result<PathAndQuery> {
    format!("/{}/{}", method.parent_service().full_name(), method.name())
        .parse()
        .map_err(|_| bad_input(format!("--call: {} is not a valid path", method.full_name())))
}

/// The stream flags checked against the method's kind (a flag that would be ignored is
/// refused); client and bidi streams without a count or a duration send each record once
/// (none when -d/-D hold no record: an empty stream).
pub fn stream_of(
    method: &MethodDescriptor,
    kind: CallKind,
    given: StreamLimits,
    records: u64,
) -> anyhow::Result<StreamLimits> {
    let flags = [
        ("--stream-call-count", given.count.is_some()),
        ("--stream-call-duration", given.duration.is_some()),
        ("--stream-interval", !given.interval.is_zero()),
        ("--cancel-after", given.cancel.is_some()),
    ];
    let name = method.full_name();
    if kind != CallKind::Bidi && given.bidi != Bidi::PingPong {
        return Err(bad_input(format!("--bidi: {name} is {}, not bidirectional", kind.as_str())));
    }
    if kind == CallKind::ServerStream && given.count == Some(0) {
        return Err(bad_input(format!(
            "--stream-call-count 0: {name} is server streaming, whose count is the messages received before it is cancelled (--cancel-after begin cancels at once)"
        )));
    }
    if kind == CallKind::ClientStream && given.cancel == Some(CancelAfter::FirstResponse) {
        return Err(bad_input(format!(
            "--cancel-after first-response: {name} is client streaming, whose one response ends it"
        )));
    }
    let sends = given.count.is_some_and(|n| n > 0) || given.duration.is_some();
    if records == 0 && sends {
        let flag = if given.duration.is_some() { "--stream-call-duration" } else { "--stream-call-count" };
        return Err(bad_input(format!("{flag}: -d/-D hold no message to send (an empty array or file)")));
    }
    let refused = |flag: &str| {
        bad_input(format!("{flag}: {} is {}; stream flags need a streaming method", method.full_name(), kind.as_str()))
    };
    match kind {
        CallKind::Unary => match flags.iter().find(|(_, set)| *set) {
            Some((flag, _)) => Err(refused(flag)),
            None => Ok(given),
        },
        CallKind::ServerStream if !given.interval.is_zero() => Err(bad_input(format!(
            "--stream-interval: {} is server streaming: the server paces its messages (the interval is for client and bidi streams)",
            method.full_name()
        ))),
        CallKind::ServerStream => Ok(given),
        CallKind::ClientStream | CallKind::Bidi if given.count.is_none() && given.duration.is_none() => {
            Ok(StreamLimits { count: Some(records), ..given })
        }
        CallKind::ClientStream | CallKind::Bidi => Ok(given),
    }
}
