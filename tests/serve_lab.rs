//! The lab served in-process on 127.0.0.1 port 0 and called over real connections.
use rpcmeter::lab::proto::echo::{echo_service_client::EchoServiceClient, Message};
use rpcmeter::lab::proto::lab::{
    stats_client::StatsClient, storage_client::StorageClient, test_service_client::TestServiceClient, CpuRequest,
    DbRequest, GetRequest, MethodStats, PutRequest, StatsReply, StatsRequest,
};
use rpcmeter::lab::{Consistency, DbSpec, LabConfig, LabServer, Model};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tonic::transport::Channel;
use tonic::Code;

/// Small work so that the whole file runs in seconds.
fn config(model: Model) -> LabConfig {
    LabConfig {
        addr: "127.0.0.1:0".into(),
        model,
        fib: 20,
        db_sleep: Duration::from_millis(20),
        ..LabConfig::default()
    }
}

async fn connect(server: &LabServer) -> Channel {
    Channel::from_shared(format!("http://{}", server.local_addr())).unwrap().connect().await.unwrap()
}

fn method<'a>(stats: &'a StatsReply, path: &str) -> &'a MethodStats {
    stats.methods.iter().find(|m| m.method == path).unwrap_or_else(|| panic!("no {path} in {stats:?}"))
}

/// (received, ok, failed, rejected)
fn counts(stats: &StatsReply, path: &str) -> (u64, u64, u64, u64) {
    let m = method(stats, path);
    (m.received, m.ok, m.failed, m.rejected)
}

/// Waits until the server counts a call in flight: it does in the poll that starts the
/// call's work (computing fib, waiting for the database).
async fn until_a_call_is_in_flight(server: &LabServer) {
    while server.stats().in_flight == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn every_service_answers(model: Model) {
    let server = LabServer::start(config(model)).unwrap();
    let channel = connect(&server).await;

    let mut echo = EchoServiceClient::new(channel.clone());
    let reply = echo.echo(Message { content: "hi".into() }).await.unwrap().into_inner();
    assert_eq!(reply.content, "hi");

    let mut test = TestServiceClient::new(channel.clone());
    assert_eq!(test.cpu(CpuRequest { n: 0 }).await.unwrap().into_inner().result, 6765, "fib(--fib 20)");
    assert_eq!(test.cpu(CpuRequest { n: 10 }).await.unwrap().into_inner().result, 55);
    let too_big = test.cpu(CpuRequest { n: 46 }).await.unwrap_err();
    assert_eq!(too_big.code(), Code::InvalidArgument);
    let first = test.db(DbRequest { rows: 0 }).await.unwrap().into_inner().count;
    assert_eq!(first, 10, "a fresh temporary database holds this call's 10 rows");
    assert_eq!(test.db(DbRequest { rows: 3 }).await.unwrap().into_inner().count, 13);

    let mut storage = StorageClient::new(channel.clone());
    let missing = storage.get_value(GetRequest { key: "k".into() }).await.unwrap().into_inner();
    assert!(!missing.found && missing.version == 0 && missing.value.is_empty());
    let v1 = storage.put_value(PutRequest { key: "k".into(), value: b"one".to_vec() }).await.unwrap().into_inner();
    let v2 = storage.put_value(PutRequest { key: "k".into(), value: b"two".to_vec() }).await.unwrap().into_inner();
    assert!(v2.version > v1.version);
    let got = storage.get_value(GetRequest { key: "k".into() }).await.unwrap().into_inner();
    assert!(got.found);
    assert_eq!((got.value.as_slice(), got.version), (&b"two"[..], v2.version));

    let mut stats = StatsClient::new(channel);
    let seen = stats.get(StatsRequest {}).await.unwrap().into_inner();
    assert_eq!(counts(&seen, "/EchoService/echo"), (1, 1, 0, 0));
    assert_eq!(counts(&seen, "/rpcmeter.lab.v1.TestService/Cpu"), (3, 2, 1, 0));
    assert_eq!(counts(&seen, "/rpcmeter.lab.v1.TestService/Db"), (2, 2, 0, 0));
    assert_eq!(counts(&seen, "/rpcmeter.lab.v1.Storage/GetValue"), (2, 2, 0, 0));
    assert_eq!(counts(&seen, "/rpcmeter.lab.v1.Storage/PutValue"), (2, 2, 0, 0));
    assert_eq!(seen.received, 10, "Stats' own calls are not counted");
    assert_eq!(seen.in_flight, 0);
    assert!(seen.first_arrival_unix_s > 1e9 && seen.last_arrival_unix_s >= seen.first_arrival_unix_s);
    let expected_rps = 9.0 / (seen.last_arrival_unix_s - seen.first_arrival_unix_s);
    assert!((seen.server_rps - expected_rps).abs() <= expected_rps * 1e-6, "{seen:?}");
    assert!(seen.cpu_seconds > 0.0 && seen.rss_bytes > 0 && seen.uptime_s > 0.0);

    let before_reset = stats.reset(StatsRequest {}).await.unwrap().into_inner();
    assert_eq!(before_reset.received, 10, "Reset answers with the counts it zeroed");
    let after = stats.get(StatsRequest {}).await.unwrap().into_inner();
    assert_eq!(after.received, 0);
    assert!(after.methods.iter().all(|m| m.ok + m.failed + m.rejected == 0));
    assert_eq!((after.first_arrival_unix_s, after.server_rps), (0.0, 0.0));

    echo.echo(Message { content: "after".into() }).await.unwrap();
    let last = server.shutdown();
    assert_eq!(counts(&last, "/EchoService/echo"), (1, 1, 0, 0), "shutdown returns the final Stats");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_service_answers_async_model() {
    every_service_answers(Model::Async).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_service_answers_threaded_model() {
    every_service_answers(Model::Threaded).await;
}

/// The latch benchmark article's service and message (docs/experiments.md, "Echo warm-up")
/// exactly as printed (no package), compiled at run time and called with dynamic messages:
/// the article's own clients work. The article's snippet has no `syntax` line, and without
/// one it is proto2, which rejects its unlabelled field: the line it must have had is added
/// in front, nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_proto_compiled_as_the_article_has_it() {
    const ARTICLE_ECHO_PROTO: &str = "service EchoService {\n  rpc echo (Message) returns (Message) {}\n}\n\nmessage Message {\n  string content = 1;\n}\n";
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("echo_service.proto"), format!("syntax = \"proto3\";\n{ARTICLE_ECHO_PROTO}"))
        .unwrap();
    let fds = protox::compile(["echo_service.proto"], [dir.path()]).unwrap();
    let pool = prost_reflect::DescriptorPool::from_file_descriptor_set(fds).unwrap();
    let service = pool.get_service_by_name("EchoService").unwrap();
    let echo = service.methods().find(|m| m.name() == "echo").unwrap();
    let path = format!("/{}/{}", service.full_name(), echo.name());
    assert_eq!(path, "/EchoService/echo");

    let server = LabServer::start(config(Model::Async)).unwrap();
    let mut grpc = tonic::client::Grpc::new(connect(&server).await);
    let mut request = prost_reflect::DynamicMessage::new(echo.input());
    request.set_field_by_name("content", prost_reflect::Value::String("from the article".into()));
    grpc.ready().await.unwrap();
    let reply = grpc
        .unary(tonic::Request::new(request), path.parse().unwrap(), dynamic::Codec(echo.output()))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(reply.get_field_by_name("content").unwrap().as_str(), Some("from the article"));
    assert_eq!(counts(&server.stats(), "/EchoService/echo"), (1, 1, 0, 0));
}

/// A tonic codec for messages known only at run time.
mod dynamic {
    use prost::Message as _;
    use prost_reflect::{DynamicMessage, MessageDescriptor};
    use tonic::codec::{DecodeBuf, Decoder, EncodeBuf, Encoder};
    use tonic::Status;

    pub struct Codec(pub MessageDescriptor);
    pub struct Encode;
    pub struct Decode(MessageDescriptor);

    impl tonic::codec::Codec for Codec {
        type Encode = DynamicMessage;
        type Decode = DynamicMessage;
        type Encoder = Encode;
        type Decoder = Decode;
        fn encoder(&mut self) -> Encode {
            Encode
        }
        fn decoder(&mut self) -> Decode {
            Decode(self.0.clone())
        }
    }

    impl Encoder for Encode {
        type Item = DynamicMessage;
        type Error = Status;
        fn encode(&mut self, item: DynamicMessage, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
            item.encode(dst).map_err(|e| Status::internal(e.to_string()))
        }
    }

    impl Decoder for Decode {
        type Item = DynamicMessage;
        type Error = Status;
        fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<DynamicMessage>, Status> {
            DynamicMessage::decode(self.0.clone(), src).map(Some).map_err(|e| Status::internal(e.to_string()))
        }
    }
}

/// Lists the services through one version of the reflection API, and resolves each to the
/// files that define it (as grpcurl and ghz do): the names of the services those files hold.
macro_rules! reflected_services {
    ($pb:path, $channel:expr) => {{
        use pb::server_reflection_request::MessageRequest;
        use pb::server_reflection_response::MessageResponse;
        use prost::Message as _;
        use $pb as pb;
        let request = |message: MessageRequest| pb::ServerReflectionRequest {
            host: String::new(),
            message_request: Some(message),
        };
        let mut client = pb::server_reflection_client::ServerReflectionClient::new($channel);
        let ask = futures::stream::iter([request(MessageRequest::ListServices(String::new()))]);
        let mut replies = client.server_reflection_info(ask).await.unwrap().into_inner();
        let listed = match replies.message().await.unwrap().and_then(|r| r.message_response) {
            Some(MessageResponse::ListServicesResponse(list)) => {
                list.service.into_iter().map(|s| s.name).collect::<BTreeSet<String>>()
            }
            other => panic!("not a service list: {other:?}"),
        };
        let mut resolved = BTreeSet::new();
        for name in &listed {
            let ask = futures::stream::iter([request(MessageRequest::FileContainingSymbol(name.clone()))]);
            let mut replies = client.server_reflection_info(ask).await.unwrap().into_inner();
            match replies.message().await.unwrap().and_then(|r| r.message_response) {
                Some(MessageResponse::FileDescriptorResponse(files)) => {
                    for bytes in files.file_descriptor_proto {
                        let file = prost_types::FileDescriptorProto::decode(bytes.as_slice()).unwrap();
                        let package = file.package().to_string();
                        for service in &file.service {
                            let name = service.name().to_string();
                            resolved.insert(if package.is_empty() { name } else { format!("{package}.{name}") });
                        }
                    }
                }
                other => panic!("{name} not resolved: {other:?}"),
            }
        }
        (listed, resolved)
    }};
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflection_v1_and_v1alpha_and_health_serve_every_lab_service() {
    let server = LabServer::start(config(Model::Async)).unwrap();
    let channel = connect(&server).await;
    let lab = [
        "EchoService",
        "rpcmeter.lab.v1.TestService",
        "rpcmeter.lab.v1.Storage",
        "rpcmeter.lab.v1.Stats",
        "rpcmeter.lab.v1.Streaming",
    ];

    let v1 = reflected_services!(tonic_reflection::pb::v1, channel.clone());
    let v1alpha = reflected_services!(tonic_reflection::pb::v1alpha, channel.clone());
    for name in lab.into_iter().chain(["grpc.health.v1.Health"]) {
        for (listed, resolved) in [&v1, &v1alpha] {
            assert!(listed.contains(name) && resolved.contains(name), "{name} missing: {listed:?}, {resolved:?}");
        }
    }

    use tonic_health::pb::{health_check_response::ServingStatus, health_client::HealthClient, HealthCheckRequest};
    let mut health = HealthClient::new(channel);
    for name in lab.into_iter().chain([""]) {
        let reply = health.check(HealthCheckRequest { service: name.into() }).await.unwrap().into_inner();
        assert_eq!(reply.status(), ServingStatus::Serving, "{name:?}");
    }
}

/// A Cpu call at the cap holds the async model's only calls thread for seconds (fib(45):
/// about 8 s in a debug build). The network has its own threads: echo is still answered
/// meanwhile, and shutdown returns within its drain and 1 s more, leaving that call running
/// and counted in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_is_answered_and_shutdown_returns_while_a_long_call_holds_every_calls_thread() {
    let server = LabServer::start(LabConfig {
        threads: 1,
        per_thread: 1,
        drain: Duration::from_millis(100),
        ..config(Model::Async)
    })
    .unwrap();
    let mut test = TestServiceClient::new(connect(&server).await);
    let _call = tokio::spawn(async move { test.cpu(CpuRequest { n: 45 }).await });
    until_a_call_is_in_flight(&server).await;
    let mut echo = EchoServiceClient::new(connect(&server).await);
    echo.echo(Message { content: "hi".into() }).await.unwrap();
    let meanwhile = server.stats();
    assert_eq!(
        counts(&meanwhile, "/rpcmeter.lab.v1.TestService/Cpu"),
        (1, 0, 0, 0),
        "echo waited for fib: {meanwhile:?}"
    );
    let last = tokio::task::spawn_blocking(move || server.shutdown()).await.unwrap();
    assert_eq!(last.in_flight, 1, "{last:?}");
    assert_eq!(counts(&last, "/rpcmeter.lab.v1.TestService/Cpu"), (1, 0, 0, 0));
}

/// One thread and no queue: concurrent Db calls beyond the one running are refused at once,
/// and Stats counts exactly what the clients saw.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_control_refuses_beyond_running_plus_queue() {
    for model in [Model::Threaded, Model::Async] {
        let server = LabServer::start(LabConfig {
            threads: 1,
            per_thread: 1,
            queue: Some(0),
            db_sleep: Duration::from_millis(300),
            ..config(model)
        })
        .unwrap();
        let client = TestServiceClient::new(connect(&server).await);
        let calls = (0..8).map(|_| {
            let mut client = client.clone();
            tokio::spawn(async move { client.db(DbRequest { rows: 1 }).await })
        });
        let results = futures::future::join_all(calls).await;
        let ok = results.iter().filter(|r| r.as_ref().unwrap().is_ok()).count() as u64;
        let refused = results
            .iter()
            .filter(|r| matches!(r.as_ref().unwrap(), Err(s) if s.code() == Code::ResourceExhausted))
            .count() as u64;
        assert!(ok >= 1 && refused >= 1, "{model:?}: ok {ok}, refused {refused}");
        assert_eq!(ok + refused, 8, "{model:?}: no other outcome");
        let stats = server.shutdown();
        let (received, s_ok, failed, rejected) = counts(&stats, "/rpcmeter.lab.v1.TestService/Db");
        assert_eq!((received, s_ok, failed, rejected), (8, ok, 0, refused), "{model:?}");
        assert_eq!(received, s_ok + failed + rejected);
    }
}

/// `clients` connections, each a closed loop of `calls` echo calls; returns how many were
/// refused.
async fn closed_loop_echo_refusals(server: &LabServer, clients: usize, calls: usize) -> usize {
    let mut loops = Vec::new();
    for _ in 0..clients {
        let mut echo = EchoServiceClient::new(connect(server).await);
        loops.push(tokio::spawn(async move {
            let mut refused = 0;
            for _ in 0..calls {
                match echo.echo(Message { content: "hi".into() }).await {
                    Ok(_) => {}
                    Err(status) if status.code() == Code::ResourceExhausted => refused += 1,
                    Err(status) => panic!("{status:?}"),
                }
            }
            refused
        }));
    }
    futures::future::join_all(loops).await.into_iter().map(Result::unwrap).sum()
}

/// Threaded, N threads and queue Q: N + Q clients in a closed loop are never refused, however
/// their calls interleave with the workers (a call admitted while a worker is idle is not
/// queued; a call sent on receiving a reply finds its slot free).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threaded_model_admits_exactly_threads_plus_queue() {
    for (threads, queue, calls) in [(2, 2, 1000), (2, 0, 2000)] {
        let server = LabServer::start(LabConfig { threads, queue: Some(queue), ..config(Model::Threaded) }).unwrap();
        let refused = closed_loop_echo_refusals(&server, threads + queue, calls).await;
        assert_eq!(refused, 0, "threads {threads}, queue {queue}");
        let stats = server.shutdown();
        let total = ((threads + queue) * calls) as u64;
        assert_eq!(counts(&stats, "/EchoService/echo"), (total, total, 0, 0));
    }
}

/// Async model: a call whose client goes away ends with it. The network thread hands each
/// call to the model's runtime; the stream's reset must reach the call there (it is aborted,
/// counted failed, and its slot is free) instead of leaving it to run its 10 s database sleep.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_call_abandoned_by_its_client_ends_with_it() {
    let server = LabServer::start(LabConfig {
        threads: 1,
        per_thread: 1,
        queue: Some(0),
        db_sleep: Duration::from_secs(10),
        drain: Duration::from_millis(100),
        ..config(Model::Async)
    })
    .unwrap();
    let mut test = TestServiceClient::new(connect(&server).await);
    let call = tokio::spawn(async move { test.db(DbRequest { rows: 1 }).await });
    until_a_call_is_in_flight(&server).await;
    call.abort(); // the client resets the stream
    assert!(call.await.unwrap_err().is_cancelled());
    let reset = std::time::Instant::now();
    while server.stats().in_flight > 0 && reset.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let stats = server.stats();
    assert_eq!(stats.in_flight, 0, "the call ran on after its reset: {stats:?}");
    assert_eq!(counts(&stats, "/rpcmeter.lab.v1.TestService/Db"), (1, 0, 1, 0), "abandoned: failed");
    drop(tokio::task::spawn_blocking(move || server.shutdown()));
}

/// Threaded model: a call whose client goes away stays in flight while its worker still runs
/// it, so "nothing in flight" means a free worker; then it counts as failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threaded_call_abandoned_by_its_client_stays_in_flight_until_its_work_ends() {
    let server = LabServer::start(LabConfig {
        threads: 1,
        queue: Some(0),
        db_sleep: Duration::from_secs(1),
        ..config(Model::Threaded)
    })
    .unwrap();
    let channel = connect(&server).await;
    let mut test = TestServiceClient::new(channel.clone());
    let call = tokio::spawn(async move { test.db(DbRequest { rows: 1 }).await });
    until_a_call_is_in_flight(&server).await;
    call.abort(); // the client resets the stream
    assert!(call.await.unwrap_err().is_cancelled());
    while server.stats().in_flight > 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut echo = EchoServiceClient::new(channel);
    echo.echo(Message { content: "the worker is free".into() }).await.expect("nothing in flight: admitted");
    let stats = server.shutdown();
    assert_eq!(counts(&stats, "/rpcmeter.lab.v1.TestService/Db"), (1, 0, 1, 0), "abandoned: failed");
    assert_eq!(counts(&stats, "/EchoService/echo"), (1, 1, 0, 0));
}

/// Stats under a closed loop of echo calls: every Get has ok + failed + rejected <= received,
/// and Resets taken all along lose no call: their replies add up to every call made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_snapshots_are_consistent_and_resets_lose_no_call() {
    let server = LabServer::start(config(Model::Async)).unwrap();
    let mut stats = StatsClient::new(connect(&server).await);
    for reset in [false, true] {
        let (clients, calls) = (4, 500);
        let load = {
            let channel = connect(&server).await;
            tokio::spawn(async move {
                let echo = EchoServiceClient::new(channel);
                let loops = (0..clients).map(|_| {
                    let mut echo = echo.clone();
                    tokio::spawn(async move {
                        for _ in 0..calls {
                            echo.echo(Message { content: "hi".into() }).await.unwrap();
                        }
                    })
                });
                futures::future::join_all(loops).await.into_iter().for_each(Result::unwrap);
            })
        };
        let (mut received, mut ok, mut replies) = (0, 0, 0);
        loop {
            let done = load.is_finished();
            let reply = if reset { stats.reset(StatsRequest {}).await } else { stats.get(StatsRequest {}).await };
            let reply = reply.unwrap().into_inner();
            let (r, o, f, j) = counts(&reply, "/EchoService/echo");
            if reset {
                (received, ok) = (received + r, ok + o);
            } else {
                assert!(o + f + j <= r, "{reply:?}");
            }
            replies += 1;
            if done {
                break;
            }
        }
        load.await.unwrap();
        if reset {
            assert!(replies > 2, "resets taken while the calls ran");
            assert_eq!((received, ok), (clients * calls, clients * calls), "over {replies} resets");
        } else {
            stats.reset(StatsRequest {}).await.unwrap();
        }
    }
}

/// 40 concurrent Db calls: every row counted, none lost or doubled. Returns the counts.
async fn db_counts_are_exact(db: DbSpec) -> Vec<u64> {
    let server = LabServer::start(LabConfig { db, ..config(Model::Async) }).unwrap();
    let client = TestServiceClient::new(connect(&server).await);
    let before = client.clone().db(DbRequest { rows: 1 }).await.unwrap().into_inner().count;
    let calls = (0..40).map(|_| {
        let mut client = client.clone();
        tokio::spawn(async move { client.db(DbRequest { rows: 3 }).await.unwrap().into_inner().count })
    });
    let counts: Vec<u64> = futures::future::join_all(calls).await.into_iter().map(Result::unwrap).collect();
    for &count in &counts {
        assert!(count > before && count <= before + 120, "count {count} outside ({before}, {before} + 120]");
    }
    // The insert transactions are serialised: each call sees its own distinct total.
    let distinct: BTreeSet<u64> = counts.iter().copied().collect();
    assert_eq!(distinct, (1..=40).map(|k| before + 3 * k).collect::<BTreeSet<u64>>(), "{counts:?}");
    let after = client.clone().db(DbRequest { rows: 1 }).await.unwrap().into_inner().count;
    assert_eq!(after, before + 40 * 3 + 1);
    let stats = server.shutdown();
    assert_eq!(counts_of_db(&stats), (42, 42, 0, 0));
    counts
}

fn counts_of_db(stats: &StatsReply) -> (u64, u64, u64, u64) {
    counts(stats, "/rpcmeter.lab.v1.TestService/Db")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn db_counts_exact_under_40_concurrent_calls_on_sqlite() {
    db_counts_are_exact(DbSpec::TempSqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn db_counts_exact_under_40_concurrent_calls_on_postgres() {
    let Ok(url) = std::env::var("RPCMETER_TEST_PG_URL") else {
        println!("skipped: RPCMETER_TEST_PG_URL is not set (scripts/start-postgres.sh prints one)");
        return;
    };
    db_counts_are_exact(url.parse().unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_path_keeps_its_rows_across_servers() {
    let dir = tempfile::tempdir().unwrap();
    let db = DbSpec::Sqlite(dir.path().join("kept.db"));
    for expected in [5, 10] {
        let server = LabServer::start(LabConfig { db: db.clone(), ..config(Model::Async) }).unwrap();
        let mut client = TestServiceClient::new(connect(&server).await);
        assert_eq!(client.db(DbRequest { rows: 5 }).await.unwrap().into_inner().count, expected);
    }
}

#[test]
fn unreachable_database_fails_at_start_with_one_line() {
    // Port 1 on loopback: nothing listens there.
    let db: DbSpec = "postgres://nobody:secret@127.0.0.1:1/none".parse().unwrap();
    let err = LabServer::start(LabConfig { db, ..config(Model::Async) }).err().expect("must fail");
    let message = format!("{err:#}");
    assert_eq!(rpcmeter::error::exit_code(&err), 2);
    assert!(message.starts_with("cannot use database postgres://nobody:***@127.0.0.1:1/none"), "{message}");
    assert!(!message.contains("secret") && !message.contains('\n'), "{message}");
    assert!(message.contains("Connection refused"), "the cause, not only tokio-postgres' summary: {message}");
}

#[test]
fn port_in_use_and_bad_address_fail_with_exit_code_2() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    for bad in [addr.as_str(), "not an address", "127.0.0.1:99999"] {
        let err = LabServer::start(LabConfig { addr: bad.into(), ..config(Model::Async) }).err().expect(bad);
        assert_eq!(rpcmeter::error::exit_code(&err), 2, "{bad}");
        assert!(format!("{err:#}").starts_with(&format!("cannot listen on {bad}: ")), "{err:#}");
    }
}

/// Many tasks put concurrently; returns (key, version, value) of every put and the final
/// Get of every key.
async fn concurrent_puts(
    kv_consistency: Consistency,
) -> (Vec<(String, u64, Vec<u8>)>, BTreeMap<String, (u64, Vec<u8>)>) {
    let server =
        LabServer::start(LabConfig { kv_consistency, kv_replica_lag: Duration::ZERO, ..config(Model::Async) }).unwrap();
    let client = StorageClient::new(connect(&server).await);
    let tasks = (0..16).map(|task| {
        let mut client = client.clone();
        tokio::spawn(async move {
            let mut puts = Vec::new();
            for i in 0..25 {
                let key = format!("key-{}", (task + i) % 4);
                let value = format!("task {task} put {i}").into_bytes();
                let put = PutRequest { key: key.clone(), value: value.clone() };
                let version = client.put_value(put).await.unwrap().into_inner().version;
                puts.push((key, version, value));
            }
            // One task's puts are sequential: each must see a newer version of the store
            // (linearizable) or at least of its key (relaxed, checked per key below).
            puts
        })
    });
    let puts: Vec<_> = futures::future::join_all(tasks).await.into_iter().flat_map(Result::unwrap).collect();
    let mut last = BTreeMap::new();
    for key in (0..4).map(|k| format!("key-{k}")) {
        let got = client.clone().get_value(GetRequest { key: key.clone() }).await.unwrap().into_inner();
        assert!(got.found);
        last.insert(key, (got.version, got.value));
    }
    let stats = server.shutdown();
    assert_eq!(counts(&stats, "/rpcmeter.lab.v1.Storage/PutValue"), (400, 400, 0, 0));
    assert_eq!(counts(&stats, "/rpcmeter.lab.v1.Storage/GetValue"), (4, 4, 0, 0));
    (puts, last)
}

/// The last put of each key (highest version) is what Get returns: no write lost.
fn assert_last_write_wins(puts: &[(String, u64, Vec<u8>)], last: &BTreeMap<String, (u64, Vec<u8>)>) {
    for (key, (version, value)) in last {
        let newest = puts.iter().filter(|(k, ..)| k == key).max_by_key(|(_, v, _)| *v).unwrap();
        assert_eq!((version, value), (&newest.1, &newest.2), "{key}");
    }
}

/// Linearizable, and eventual without lag (its primary has the same one order).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn linearizable_store_orders_every_put_once_globally() {
    for mode in [Consistency::Linearizable, Consistency::Eventual] {
        let (puts, last) = concurrent_puts(mode).await;
        let versions: BTreeSet<u64> = puts.iter().map(|(_, v, _)| *v).collect();
        assert_eq!(versions, (1..=400).collect(), "{mode:?}: one global order: versions 1..=400, each once");
        for task in puts.chunks(25) {
            assert!(task.windows(2).all(|w| w[0].1 < w[1].1), "a task's sequential puts go forward");
        }
        assert_last_write_wins(&puts, &last);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relaxed_store_orders_every_put_once_per_key() {
    let (puts, last) = concurrent_puts(Consistency::Relaxed).await;
    let mut per_key: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for (key, version, _) in &puts {
        per_key.entry(key.as_str()).or_default().push(*version);
    }
    for (key, mut versions) in per_key {
        versions.sort();
        assert_eq!(versions, (1..=100).collect::<Vec<u64>>(), "{key}: versions 1..=100, each once");
    }
    for task in puts.chunks(25) {
        for key in (0..4).map(|k| format!("key-{k}")) {
            let mine: Vec<u64> = task.iter().filter(|(k, ..)| *k == key).map(|(_, v, _)| *v).collect();
            assert!(mine.windows(2).all(|w| w[0] < w[1]), "a task's puts of {key} go forward");
        }
    }
    assert_last_write_wins(&puts, &last);
}

/// The health protocol (https://github.com/grpc/grpc/blob/master/doc/health-checking.md):
/// Check of a service the server does not know is NOT_FOUND, but Watch of one sends
/// SERVICE_UNKNOWN and keeps the stream open (the service may come later).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_watch_of_an_unknown_service_says_service_unknown_and_stays_open() {
    use tonic_health::pb::{health_check_response::ServingStatus, health_client::HealthClient, HealthCheckRequest};
    let server = LabServer::start(config(Model::Async)).unwrap();
    let mut health = HealthClient::new(connect(&server).await);
    let unknown = || HealthCheckRequest { service: "no.such.Service".into() };
    assert_eq!(health.check(unknown()).await.unwrap_err().code(), Code::NotFound);
    let mut watch = health.watch(unknown()).await.expect("a stream, not an error").into_inner();
    let first = watch.message().await.unwrap().expect("a first message");
    assert_eq!(first.status(), ServingStatus::ServiceUnknown);
    let next = tokio::time::timeout(Duration::from_millis(300), watch.message()).await;
    assert!(next.is_err(), "the stream must stay open: {next:?}");
}

/// A shutdown turns every service NOT_SERVING before it drains: a watcher hears it, then its
/// stream ends, so that an open Watch does not hold the drain for its whole 5 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_turns_health_not_serving_and_ends_watch_streams() {
    use tonic_health::pb::{health_check_response::ServingStatus, health_client::HealthClient, HealthCheckRequest};
    let server = LabServer::start(config(Model::Async)).unwrap();
    let mut health = HealthClient::new(connect(&server).await);
    let mut watches = Vec::new();
    for name in ["", "rpcmeter.lab.v1.TestService"] {
        let mut watch = health.watch(HealthCheckRequest { service: name.into() }).await.unwrap().into_inner();
        assert_eq!(watch.message().await.unwrap().unwrap().status(), ServingStatus::Serving, "{name:?}");
        watches.push(watch);
    }
    let stopping = std::thread::spawn(move || {
        let started = std::time::Instant::now();
        server.shutdown();
        started.elapsed()
    });
    for mut watch in watches {
        let next = tokio::time::timeout(Duration::from_secs(5), watch.message()).await;
        assert_eq!(next.unwrap().unwrap().unwrap().status(), ServingStatus::NotServing);
        let end = tokio::time::timeout(Duration::from_secs(3), watch.message()).await;
        assert!(matches!(end, Ok(Ok(None))), "the stream ends after NOT_SERVING: {end:?}");
    }
    let took = stopping.join().unwrap();
    assert!(took < Duration::from_secs(3), "open Watch streams held the drain for {took:?}");
}

/// An unknown method, or a method of an unknown service, is UNIMPLEMENTED with a message
/// that names it (tonic's own answer has none).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unimplemented_names_the_unknown_method() {
    let server = LabServer::start(config(Model::Async)).unwrap();
    let channel = connect(&server).await;
    for path in ["/rpcmeter.lab.v1.Stats/Nope", "/no.such.Service/Call"] {
        let mut grpc = tonic::client::Grpc::new(channel.clone());
        grpc.ready().await.unwrap();
        let status = grpc
            .unary::<_, StatsReply, _>(
                tonic::Request::new(StatsRequest {}),
                path.parse().unwrap(),
                tonic_prost::ProstCodec::default(),
            )
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::Unimplemented, "{path}");
        assert_eq!(status.message(), format!("unknown method {path}"));
    }
}

/// The KV store holds at most `kv_max_bytes` (keys, values and 64 bytes per key): a put
/// beyond is RESOURCE_EXHAUSTED naming the bound, and changes nothing; overwriting a key
/// with a value no larger still succeeds.
async fn kv_store_is_bounded(kv_consistency: Consistency) {
    let server = LabServer::start(LabConfig {
        kv_max_bytes: rpcmeter::input::ByteSize(10_000),
        kv_consistency,
        kv_replica_lag: Duration::ZERO,
        ..config(Model::Async)
    })
    .unwrap();
    let mut storage = StorageClient::new(connect(&server).await);
    let put = |key: &str, len: usize| PutRequest { key: key.into(), value: vec![b'x'; len] };
    storage.put_value(put("a", 4000)).await.unwrap();
    storage.put_value(put("b", 4000)).await.unwrap();
    let full = storage.put_value(put("c", 4000)).await.unwrap_err();
    assert_eq!(full.code(), Code::ResourceExhausted, "{full:?}");
    assert!(full.message().contains("--kv-max-bytes 10000"), "{}", full.message());
    let missing = storage.get_value(GetRequest { key: "c".into() }).await.unwrap().into_inner();
    assert!(!missing.found, "a refused put stores nothing: {missing:?}");
    let grow = storage.put_value(put("a", 9000)).await.unwrap_err();
    assert_eq!(grow.code(), Code::ResourceExhausted);
    let kept = storage.get_value(GetRequest { key: "a".into() }).await.unwrap().into_inner();
    assert_eq!(kept.value.len(), 4000, "a refused overwrite keeps the old value");
    storage.put_value(put("a", 100)).await.expect("a smaller value frees room");
    storage.put_value(put("c", 3800)).await.expect("room freed by the smaller value");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn linearizable_kv_store_refuses_puts_beyond_its_bound() {
    kv_store_is_bounded(Consistency::Linearizable).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relaxed_kv_store_refuses_puts_beyond_its_bound() {
    kv_store_is_bounded(Consistency::Relaxed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eventual_kv_store_refuses_puts_beyond_its_bound() {
    kv_store_is_bounded(Consistency::Eventual).await;
}

/// One client puts then gets its key, 200 times, over a real connection: how many gets
/// returned a version other than the one the put just answered.
async fn put_then_get_misses(kv_consistency: Consistency, kv_replica_lag: Duration) -> usize {
    let server = LabServer::start(LabConfig { kv_consistency, kv_replica_lag, ..config(Model::Async) }).unwrap();
    let mut storage = StorageClient::new(connect(&server).await);
    let mut missed = 0;
    for i in 0..200 {
        let put = PutRequest { key: "mine".into(), value: format!("put {i}").into_bytes() };
        let version = storage.put_value(put).await.unwrap().into_inner().version;
        let got = storage.get_value(GetRequest { key: "mine".into() }).await.unwrap().into_inner();
        if !got.found || got.version != version {
            assert!(got.version < version, "a miss is an older version, never a newer one: {got:?} vs {version}");
            missed += 1;
        }
    }
    missed
}

/// Ground truth of `lab kv-consistency`: every mode reads its writes when nothing lags; a
/// replica that lags far more than a call takes misses (nearly) every write just made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_after_a_put_misses_it_only_on_a_lagging_replica() {
    for mode in [Consistency::Linearizable, Consistency::Relaxed, Consistency::Eventual] {
        assert_eq!(put_then_get_misses(mode, Duration::ZERO).await, 0, "{mode:?} without lag");
    }
    let missed = put_then_get_misses(Consistency::Eventual, Duration::from_secs(2)).await;
    assert_eq!(missed, 200, "2 s of lag: every get is served before its put is applied");
}

/// The Db table holds at most `db_max_rows`: a call that would pass it is RESOURCE_EXHAUSTED
/// naming the bound and inserts nothing (its transaction rolls back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn db_table_refuses_rows_beyond_its_bound() {
    let server = LabServer::start(LabConfig { db_max_rows: 25, ..config(Model::Async) }).unwrap();
    let mut test = TestServiceClient::new(connect(&server).await);
    assert_eq!(test.db(DbRequest { rows: 10 }).await.unwrap().into_inner().count, 10);
    assert_eq!(test.db(DbRequest { rows: 10 }).await.unwrap().into_inner().count, 20);
    let full = test.db(DbRequest { rows: 10 }).await.unwrap_err();
    assert_eq!(full.code(), Code::ResourceExhausted, "{full:?}");
    assert!(full.message().contains("--db-max-rows 25"), "{}", full.message());
    assert_eq!(test.db(DbRequest { rows: 5 }).await.unwrap().into_inner().count, 25, "the refused rows rolled back");
}

/// This machine's address on its default route, if it has one that is not loopback.
fn non_loopback_ip() -> Option<std::net::IpAddr> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    // A UDP connect sends nothing: it only picks the route and so the local address.
    socket.connect("192.0.2.1:9").ok()?;
    Some(socket.local_addr().ok()?.ip()).filter(|ip| !ip.is_loopback() && !ip.is_unspecified())
}

/// Stats/Reset zeroes what every client reads: from a peer that is not on this machine's
/// loopback it is PERMISSION_DENIED unless `allow_remote_reset`; Get is answered to anyone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_reset_from_a_remote_peer_is_refused_unless_allowed() {
    let Some(ip) = non_loopback_ip() else {
        eprintln!("skipped: this machine has no address but loopback");
        return;
    };
    for allow_remote_reset in [false, true] {
        let server =
            LabServer::start(LabConfig { addr: "0.0.0.0:0".into(), allow_remote_reset, ..config(Model::Async) })
                .unwrap();
        let port = server.local_addr().port();
        let remote = Channel::from_shared(format!("http://{ip}:{port}")).unwrap().connect().await.unwrap();
        let mut stats = StatsClient::new(remote);
        stats.get(StatsRequest {}).await.expect("Get is answered to anyone");
        let reset = stats.reset(StatsRequest {}).await;
        if allow_remote_reset {
            reset.expect("allowed");
        } else {
            let refused = reset.unwrap_err();
            assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
            assert!(refused.message().contains("--allow-remote-reset"), "{}", refused.message());
        }
        let local = Channel::from_shared(format!("http://127.0.0.1:{port}")).unwrap().connect().await.unwrap();
        StatsClient::new(local).reset(StatsRequest {}).await.expect("loopback may reset");
    }
}
