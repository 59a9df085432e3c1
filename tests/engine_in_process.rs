//! The engine called in this process, not through the binary: what it counts where real time
//! is not the point (exact totals, the analysis of what it recorded), in a fraction of a second.
mod common;
use common::*;
use rpcmeter::grpc::transport::{Bidi, CallKind, StreamLimits, Target};
use rpcmeter::load::engine::{self, Ended, Mix};
use rpcmeter::load::pacer::Pacer;
use rpcmeter::load::plan::{Control, Plan, ShardOf, StopAt};
use rpcmeter::schema::{DataSource, RequestSource, SchemaSource};
use rpcmeter::sink::Sinks;
use std::sync::Arc;
use std::time::Duration;

/// Closed loop, `workers` on one thread and connection, `total` calls of echo.
fn plan(addr: std::net::SocketAddr, workers: u32, total: u64) -> (Plan, Mix) {
    let target = Target::new(addr.ip().to_string(), addr.port());
    let schema = SchemaSource::Proto { file: echo_proto(), import_paths: vec![] };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let method = runtime.block_on(rpcmeter::schema::resolve_method(&schema, "EchoService/echo", &target)).unwrap();
    let requests = Arc::new(RequestSource::new(&method, &DataSource::Json(r#"{"content":"hi"}"#.into())).unwrap());
    let plan = Plan {
        target,
        call: Default::default(),
        pacer: Pacer::Closed,
        workers,
        threads: 1,
        connections: 1,
        stop: StopAt { total: Some(total), ..Default::default() },
        warmup: Duration::ZERO,
        active_workers: None,
        retry: Default::default(),
        interval: Duration::from_secs(1),
        drain: Duration::from_secs(2),
        keep_responses: false,
        shard: ShardOf::default(),
        start: None,
        warmup_auto: false,
    };
    let mix = Mix::single(&method, requests, StreamLimits::default()).unwrap();
    (plan, mix)
}

#[test]
fn every_call_of_a_total_is_recorded_once_and_finished_into_a_summary() {
    let server = TestServer::start(Behaviour::Echo);
    let (plan, mix) = plan(server.addr, 4, 300);
    let mut sinks = Sinks::default();
    let recorded = engine::run(plan.clone(), mix, &mut sinks, &Control::default()).unwrap();
    let finished = sinks.finish();
    let c = &recorded.measured.counts;
    assert_eq!((c.calls, c.ok(), c.attempts), (300, 300, 300));
    assert_eq!((recorded.abandoned, recorded.unsent, recorded.ended), (0, 0, Ended::Completed));
    assert_eq!(recorded.warmup.counts.calls, 0, "no warm-up planned");
    assert_eq!(server.calls(), 300, "the server answered each call once");
    assert_eq!(recorded.measured.call_latency.len(), 300);
    let summary = rpcmeter::analysis::finish(rpcmeter::analysis::Run {
        plan,
        meta: rpcmeter::analysis::Meta {
            run_id: uuid::Uuid::nil(),
            started_at: recorded.started_at,
            name: None,
            tags: vec![],
            arguments: vec![],
        },
        call: "EchoService.echo",
        kind: CallKind::Unary,
        bidi: Bidi::PingPong,
        recorded,
        checks: &[],
        rows: finished.rows,
        early: None,
        call_names: vec![],
        flow_names: vec![],
        check_names: vec![],
        floor: None,
        hiccups: None,
        server: None,
        client_resets: 0,
        replay: None,
    });
    assert_eq!((summary.requests.total, summary.requests.ok, summary.requests.failed), (300, 300, 0));
    let at = |stat| summary.latency_us.micros(stat).unwrap();
    use rpcmeter::stats::Statistic;
    assert!(summary.throughput_rps > 0.0 && at(Statistic::Max) >= at(Statistic::Min));
    assert!(summary.notices.has(rpcmeter::result::NoticeKind::ClosedLoop), "{:?}", summary.notices);
}

#[test]
fn a_target_that_refuses_ends_the_run_before_any_call() {
    // A port with nothing behind it: the engine says so, nothing is recorded.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let server = TestServer::start(Behaviour::Echo);
    let (mut plan, mix) = plan(server.addr, 2, 10);
    plan.target = Target::new("127.0.0.1", closed.port());
    plan.target.connect_timeout = Duration::from_secs(2);
    let err = engine::run(plan, mix, &mut Sinks::default(), &Control::default()).unwrap_err();
    assert!(format!("{err:#}").contains(&closed.port().to_string()), "{err:#}");
    assert_eq!(server.calls(), 0);
}
