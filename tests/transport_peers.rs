//! The lean transport against the other gRPC implementations the labs build (grpc-go and
//! grpc-java, labs/servers/): small, large and many concurrent calls, then a graceful stop
//! (GOAWAY) while calls run. A runtime whose toolchain is missing is skipped, said on stderr.
#[path = "common/echo_calls.rs"]
mod echo_calls;
#[path = "common/wait.rs"]
mod wait;
use rpcmeter::experiments::servers::{self, Runtime, Server};
use rpcmeter::grpc::{CallSpec, Connector, PreparedCall};
use std::time::Duration;
use tonic::Code;

fn echo() -> PreparedCall {
    PreparedCall::new(&CallSpec {
        path: "/EchoService/echo".parse().unwrap(),
        metadata: Default::default(),
        deadline: Some(Duration::from_secs(20)),
        messages: Default::default(),
    })
}

async fn against(runtime: Runtime) {
    let built = match servers::build(runtime) {
        Ok(built) => built,
        Err(why) => return eprintln!("skipped {}: {why}", runtime.name()),
    };
    let server = Server::start(runtime, &built, runtime.name(), &[]).unwrap();
    let target = server.target().unwrap();
    let conn = Connector::new(&target).unwrap().unary_only().connect().await.unwrap();
    let call = echo();

    echo_calls::all_echo(&conn, &call, ["hello".to_owned()]).await;
    // Larger than a frame and than the 64 KiB initial window, both ways, a few at once.
    echo_calls::all_echo(&conn, &call, (0..3).map(|i| format!("{i}").repeat(300_000))).await;
    echo_calls::all_echo(&conn, &call, (0..300).map(|i| format!("call {i}"))).await;

    // A graceful stop while 32 callers run: each call ends OK or UNAVAILABLE, none hangs.
    let ok_so_far = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let workers = echo_calls::until_refused(&conn, &call, 32, &ok_so_far);
    // Stopped once more than one call per caller has been answered.
    let counted = ok_so_far.clone();
    let stopping = tokio::task::spawn_blocking(move || {
        wait::wait_for_count("OK calls before the stop", 64, || counted.load(std::sync::atomic::Ordering::Relaxed));
        server.stop()
    });
    let statuses = tokio::time::timeout(Duration::from_secs(90), workers).await.expect("every call ends");
    let _ = stopping.await;
    let statuses: Vec<Code> = statuses.into_iter().flatten().collect();
    assert!(statuses.iter().filter(|&&s| s == Code::Ok).count() > 32, "calls ran before the stop");
    assert!(statuses.iter().all(|&s| s == Code::Ok || s == Code::Unavailable), "{statuses:?}");
    assert!(conn.is_closed());
}

#[tokio::test]
async fn grpc_go() {
    against(Runtime::Go).await;
}

#[tokio::test]
async fn grpc_java() {
    against(Runtime::Java).await;
}
