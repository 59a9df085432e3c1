//! `rpcmeter run`: `run` orchestrates a run's `Settings` (which the command line builds and
//! checks, cli/run_settings.rs): outputs, schema, engine, sinks, reports, verdict. Testable
//! without clap: build a `Settings` and call `run`.
use super::outputs::{OutputSettings, Outputs};
use crate::analysis::{self, Meta};
use crate::error::{internal, run_failed};
use crate::grpc::transport::StreamLimits;
use crate::load::engine;
use crate::load::plan::{Control, Plan};
use crate::load::stage::Mix;
use crate::report::Format;
use crate::result::Run;
use crate::schema::{self, DataSource, RequestSource, SchemaSource};
use crate::sink::{
    details::{self, DetailsWriter},
    hdr_log::HdrLog,
    metrics::LiveMetrics,
    progress::Progress,
    progress::Style as ProgressStyle,
    Sinks,
};
use crate::stats::assertions::Assertion;
use std::process::ExitCode;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// How a shard meets the others.
#[derive(Debug, Clone)]
pub struct Coordination {
    /// The hub's HOST:PORT.
    pub addr: String,
    /// This process runs the hub (shard 0 of `--coordinator`; not `run --shards`' children).
    pub listen: bool,
    pub join_timeout: Duration,
    /// Shard 0 prints lines of the merged progress (None: `--quiet`).
    pub progress: Option<ProgressStyle>,
}

/// Everything a run needs, validated.
#[derive(Debug, Clone)]
pub struct Settings {
    pub schema: SchemaSource,
    /// The method, or for a workload the words naming it (`workload FILE`).
    pub call: String,
    /// `--workload`: the mix of calls, read and checked (each method is resolved at the start).
    pub workload: Option<crate::load::workload::Workload>,
    /// `--replay`: the calls of a binary log instead of --call or --workload, the log read
    /// (its rate paces `plan` when its own schedule is used).
    pub replay: Option<crate::replay::source::Log>,
    /// `--workload` with `--seed`: draw each call at random by weight instead of round robin.
    pub pick_seed: Option<u64>,
    pub data: DataSource,
    pub metadata: http::HeaderMap,
    pub deadline: Option<Duration>,
    pub plan: Plan,
    /// The stream flags as given: each streaming call of the run takes them, checked against
    /// its method's kind once the schema is read (`stage::stream_of`).
    pub stream: StreamLimits,
    pub outputs: OutputSettings,
    /// `--csv-details-header`/`--csv-details-trailer`: extra columns of `--csv-details`.
    pub csv_metadata: Vec<crate::sink::details::MetadataColumn>,
    pub checks: Vec<Assertion>,
    /// None: no progress (`-q`, or a run inside a series).
    pub progress: Option<ProgressStyle>,
    /// Read the target's Stats before and after (the lab's) to show the server's count.
    pub server_stats: bool,
    /// Print the machine's floor (the calibration cache) beside the results.
    pub floor: bool,
    pub name: Option<String>,
    pub tags: Vec<(String, String)>,
    pub arguments: Vec<String>,
    /// Where the result is recorded (None: --no-save).
    pub history: Option<crate::history::SaveTo>,
    /// `--metrics-addr`: serve live Prometheus metrics there during the run.
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// `--coordinator`: this shard meets the others, and shard 0 prints the merged result.
    pub coordination: Option<Coordination>,
}

/// Asks the schema for the method; a Ctrl-C while a server is being asked ends the wait.
pub(crate) fn resolve(settings: &Settings, control: &Control) -> anyhow::Result<prost_reflect::MethodDescriptor> {
    resolve_method(&settings.schema, &settings.call, &settings.plan.target, control)
}

/// `resolve` for the method `call` of `schema` (reflection asks `target`).
pub fn resolve_method(
    schema: &SchemaSource,
    call: &str,
    target: &crate::grpc::Target,
    control: &Control,
) -> anyhow::Result<prost_reflect::MethodDescriptor> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| internal(format!("cannot start a runtime: {e}")))?;
    runtime.block_on(async {
        let interrupted = async {
            while control.interrupts.load(Relaxed) == 0 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        tokio::select! {
            method = schema::resolve_method(schema, call, target) => method,
            _ = interrupted => Err(run_failed("interrupted before the run started")),
        }
    })
}

/// Runs `settings` to the end and says how it went: the exit code, or the error to print.
/// (A `--coordinator` shard runs through `coordinator::run_shard` instead.)
pub fn run(settings: Settings, control: Arc<Control>) -> anyhow::Result<ExitCode> {
    let mut outputs = Outputs::open(&settings.outputs)?;
    let (result, sinks_failed) = measure(&settings, &control, &mut outputs).inspect_err(|e| {
        let target = settings.plan.target.to_string();
        outputs.write_failed_start(settings.name.as_deref(), &settings.call, &target, e)
    })?;
    let mut problems: Vec<anyhow::Error> = outputs.write_reports(&result);
    problems.extend(outputs.commit());
    // Recorded after the reports, so a history that fails never costs one.
    record_in_history(settings.history.as_ref(), &result.to_value(), &mut problems);
    problems.extend(sinks_failed);
    verdict(&result, problems)
}

/// Records a result in the history. A --history asked for is an output like --export:
/// failing it is a problem (exit 1). The default history is a convenience: failing it (a
/// read-only home, no HOME) is a warning, and the exit code stays what the measurement says.
pub fn record_in_history(
    to: Option<&crate::history::SaveTo>,
    result: &serde_json::Value,
    problems: &mut Vec<anyhow::Error>,
) {
    let Some(to) = to else { return };
    if let Err(e) = to.record(result) {
        match to.explicit() {
            true => problems.push(e),
            false => eprintln!("rpcmeter: warning: {e} (--history PATH records elsewhere, --no-save not at all)"),
        }
    }
}

/// One run of a series (a sweep's step, a lab's step): no report written, no progress line,
/// not recorded in the history; the series reports. `--csv-details` is kept when
/// `keep_details` (a lab that reads each step's calls), dropped otherwise.
pub fn measure_step(mut settings: Settings, control: &Arc<Control>, keep_details: bool) -> anyhow::Result<Run> {
    let quiet = OutputSettings {
        format: Format::Table,
        primary: None,
        exports: vec![],
        csv_details: settings.outputs.csv_details.clone().filter(|_| keep_details),
        hdr_log: None,
    };
    settings.outputs = quiet.clone();
    settings.progress = None;
    settings.history = None;
    let mut outputs = Outputs::open(&quiet)?;
    let (result, _) = measure(&settings, control, &mut outputs)?;
    // The step's --csv-details is read by the lab right after: it must be in place.
    if let Some(failed) = outputs.commit().into_iter().next() {
        return Err(failed);
    }
    Ok(result)
}

/// The run itself, up to its result: schema, engine, sinks, the server's count. Writes no
/// report (`run` does; `sweep` gathers the results of its steps). The second value is a
/// side output that failed while the run went on.
pub fn measure(
    settings: &Settings,
    control: &Arc<Control>,
    outputs: &mut Outputs,
) -> anyhow::Result<(Run, Option<anyhow::Error>)> {
    measure_with(settings, control, outputs, Vec::new())
}

/// `measure`, `extra` sinks fed beside the run's own (a shard's intervals to its hub).
pub fn measure_with(
    settings: &Settings,
    control: &Arc<Control>,
    outputs: &mut Outputs,
    extra: Vec<Box<dyn crate::sink::Sink>>,
) -> anyhow::Result<(Run, Option<anyhow::Error>)> {
    let Stage { mix, replay } = prepare(settings, control).inspect_err(|_| outputs.discard())?;
    let plan = settings.plan.clone();
    // A workload or a replay is named by the run's words (`workload FILE`), one method by its
    // full name.
    let call = if mix.named { settings.call.clone() } else { mix.calls[0].method.clone() };
    let (call_names, flow_names, check_names) = (mix.call_names(), mix.flow_names(), mix.check_names());
    let (kind, bidi) = mix.streams();
    // Which of the mix's calls `--cancel-after` applies to (a unary call of a mix with streams
    // takes no stream flag).
    let cancelling: Vec<bool> = mix.calls.iter().map(|c| c.stream.cancel.is_some()).collect();
    let named = mix.named;
    // Two names may call one method (with other data): the server counts it once.
    let mut paths: Vec<String> = mix.calls.iter().map(|c| c.path.to_string()).collect();
    paths.sort_unstable();
    paths.dedup();
    let mut sinks = sinks(settings, outputs, &plan, &mix, &call, extra)?;
    // The probe reads one server's Stats: no cross-check of a run spread over several.
    let stats = (settings.server_stats && !plan.target.by_backend())
        .then(|| super::server_side::StatsProbe::before(&plan.target))
        .flatten();
    let started_at = SystemTime::now();
    // Beside the floor: the client's own stalls during the run, to compare with it; and over
    // backends, the noise that a slow backend must stand above (analysis::notices).
    let hiccups =
        (settings.floor || plan.target.by_backend()).then(crate::record::hiccup::HiccupMeter::start).flatten();
    let result = engine::run(plan.clone(), mix, &mut sinks, control);
    let hiccups = hiccups.and_then(|meter| meter.stop());
    let finished = sinks.finish();
    let recorded = result.inspect_err(|_| outputs.discard())?;
    let meta = Meta {
        run_id: uuid::Uuid::new_v4(),
        // A shard's clock starts at the shared start: its window begins there (merge places
        // it by this), not while it connected and waited.
        started_at: if plan.start.is_some() { recorded.started_at } else { started_at },
        name: settings.name.clone(),
        tags: settings.tags.clone(),
        arguments: settings.arguments.clone(),
    };
    let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
    let client_resets = client_resets(&cancelling, named, replay.as_ref(), &recorded);
    let result = analysis::finish(analysis::Run {
        plan,
        meta,
        call: &call,
        kind,
        bidi,
        recorded,
        checks: &settings.checks,
        rows: finished.rows,
        early: finished.early.as_ref(),
        call_names,
        flow_names,
        check_names,
        floor: settings.floor.then(crate::calibrate::cached),
        hiccups: hiccups.as_ref(),
        server: stats.and_then(|probe| probe.read(&paths)),
        client_resets,
        replay: replay.map(|r| Box::new(move |measured: &_, calls: &_| r.finish(measured, calls)) as Box<_>),
    });
    let mut result = result;
    // The peak is read again once the analysis has run: what it holds (a thousand backends'
    // shares, say) is the client's memory too, and the reports are written from it.
    if let Some(client) = result.client.as_mut() {
        client.max_rss_bytes = client.max_rss_bytes.max(crate::record::resource::usage().max_rss_bytes);
    }
    Ok((result, finished.result.err()))
}

/// Streams the client reset itself, warm-up included: a replay's where its log ended them
/// CANCELLED; with `--cancel-after`, at most every call of the mix's calls it applies to
/// (`cancelling`, by the mix's index; counted by name when the mix is `named`, else the run
/// is of one method). A stream it resets ends OK, so it is not retried: one reset a call.
fn client_resets(
    cancelling: &[bool],
    named: bool,
    replay: Option<&super::replay::Replaying>,
    r: &engine::Recorded,
) -> u64 {
    if let Some(replay) = replay {
        return replay.resets();
    }
    let calls = |t: &crate::record::Tally| match named {
        true => t.by_name.iter().zip(cancelling).filter(|(_, cancels)| **cancels).map(|(name, _)| name.calls).sum(),
        false => t.counts.calls * cancelling.iter().any(|cancels| *cancels) as u64,
    };
    calls(&r.measured) + calls(&r.warmup)
}

/// The run's sinks beside `extra`: the warm-up detector, progress, `--hdr-log`,
/// `--csv-details` and `--metrics-addr`, each with the file `outputs` opened for it.
fn sinks(
    settings: &Settings,
    outputs: &mut Outputs,
    plan: &Plan,
    mix: &Mix,
    call: &str,
    extra: Vec<Box<dyn crate::sink::Sink>>,
) -> anyhow::Result<Sinks> {
    let mut sinks = Sinks::default();
    for sink in extra {
        sinks.add(sink);
    }
    if plan.warmup_auto {
        sinks.early = Some(Default::default());
    }
    // A shard's result is merged with the others' (app/merge.rs): its interval series must
    // carry each interval's histograms to be added exactly (docs/results.md, "Merged intervals").
    sinks.keep_histograms = !plan.shard.is_whole();
    if let Some(style) = settings.progress {
        let planned = plan.stop.duration.map(|d| d.saturating_add(plan.warmup));
        sinks.add(Box::new(Progress::new(style, planned, plan.threads)));
    }
    if let Some(path) = &settings.outputs.hdr_log {
        let file = outputs.take(path).ok_or_else(|| internal("--hdr-log was not opened"))?;
        sinks.add(Box::new(HdrLog::new(path.clone(), file)?));
    }
    if let Some(path) = &settings.outputs.csv_details {
        let file = outputs.take(path).ok_or_else(|| internal("--csv-details was not opened"))?;
        // A workload's rows name their call, and read key and version with its own method (a
        // replay's calls have no schema: none is read).
        let calls = mix
            .calls
            .iter()
            .map(|c| details::Call { name: mix.named.then(|| c.name.clone()), method: c.schema.clone() })
            .collect();
        sinks.add(Box::new(DetailsWriter::start(path.clone(), file, calls, settings.csv_metadata.clone())));
    }
    if let Some(addr) = settings.metrics_addr {
        let target = plan.target.to_string();
        let live = LiveMetrics::start(addr, call, &target, plan.pacer.is_open()).inspect_err(|_| outputs.discard())?;
        eprintln!("rpcmeter: metrics on http://{}/metrics", live.addr);
        if !live.addr.ip().is_loopback() {
            eprintln!("rpcmeter: warning: metrics on {} can be read by anyone who reaches this machine", live.addr);
        }
        sinks.add(Box::new(live));
    }
    Ok(sinks)
}

/// A run ready to start: its calls resolved, and for a replay the log's reader.
struct Stage {
    mix: Mix,
    /// `--replay`: the log's reader, for its own numbers once the run is over.
    replay: Option<super::replay::Replaying>,
}

/// The run's stage: its calls resolved against the schema (or read from the log).
fn prepare(settings: &Settings, control: &Control) -> anyhow::Result<Stage> {
    if let Some(replay) = &settings.replay {
        let (mix, replaying) = super::replay::mix(settings, replay)?;
        return Ok(Stage { mix, replay: Some(replaying) });
    }
    let target = &settings.plan.target;
    let mix = match &settings.workload {
        Some(workload) => workload.mix(
            |method| resolve_method(&settings.schema, method, target, control),
            settings.stream,
            settings.pick_seed,
        )?,
        None => {
            let method = resolve(settings, control)?;
            let requests = Arc::new(RequestSource::new(&method, &settings.data)?);
            Mix::single(&method, requests, settings.stream)?
        }
    };
    Ok(Stage { mix, replay: None })
}

/// Exit 0, or one error naming every problem: no answer, every call failed, each breached
/// assertion, each output that could not be written.
pub(crate) fn verdict(result: &Run, outputs_failed: Vec<anyhow::Error>) -> anyhow::Result<ExitCode> {
    let mut problems: Vec<String> = Vec::new();
    let c = &result.requests;
    if c.total == 0 {
        problems.push("no call was answered".into());
    } else if c.ok == 0 {
        let mut statuses: Vec<(&String, &u64)> = result.statuses.iter().filter(|(_, n)| **n > 0).collect();
        statuses.sort_by_key(|(name, _)| crate::grpc::status::parse(name).map_or(i32::MAX, |c| c as i32));
        let statuses: Vec<String> = statuses.iter().map(|(name, n)| format!("{name} {n}")).collect();
        problems.push(format!("every call failed ({})", statuses.join(", ")));
    }
    for breach in result.breached() {
        problems.push(format!("assertion breached: {} (value {})", breach.assertion, breach.value));
    }
    problems.extend(outputs_failed.iter().map(|e| format!("{e:#}")));
    match problems.is_empty() {
        true => Ok(ExitCode::SUCCESS),
        // A lone output failure keeps its own class; with other problems, the run failed.
        false if problems.len() == 1 && outputs_failed.len() == 1 => {
            Err(outputs_failed.into_iter().next().expect("one"))
        }
        false => Err(run_failed(problems.join("; "))),
    }
}

#[cfg(test)]
mod tests {
    use super::client_resets;
    use crate::analysis::cross_check::cross_check;
    use crate::analysis::fixture::{plan, recorded, server, summary, tally};
    use std::time::Duration;
    use tonic::Code;

    /// A mix of 90 unary calls and 10 streams `--cancel-after` resets, all OK to the client:
    /// at most 10 fewer OK calls on the server are the resets; 15 fewer are 5 calls lost,
    /// which an allowance of every call of the run (100) hid.
    #[test]
    fn only_the_calls_cancel_after_applies_to_may_be_fewer_ok_calls_on_the_server() {
        let mut measured = tally(100, Duration::from_millis(1), 0);
        for i in 0..100 {
            measured.record_named((i >= 90) as usize, Duration::from_millis(1), Code::Ok);
        }
        let run = recorded(measured, Duration::from_secs(2));
        let resets = client_resets(&[false, true], true, None, &run);
        assert_eq!(resets, 10);
        let client = summary(plan(), run);
        assert!(cross_check(&client, &server(100, 90, None), resets).is_empty());
        let told = cross_check(&client, &server(100, 85, None), resets);
        assert_eq!(told.len(), 1, "{told:?}");
        assert!(
            told[0].text.contains("counted 100 calls (85 ok) where the client sent 100 (100 ok"),
            "{}",
            told[0].text
        );
        // One method it applies to: its every call.
        let one = recorded(tally(100, Duration::from_millis(1), 0), Duration::from_secs(2));
        assert_eq!(client_resets(&[true], false, None, &one), 100);
        assert_eq!(client_resets(&[false], false, None, &one), 0);
    }
}
