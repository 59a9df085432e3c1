//! Protocol corners seen against grpc-go's interop server (issue 33), each against a server
//! on 127.0.0.1 that behaves as grpc-go's does (tests/common/grpc_go.rs).
#[path = "common/echo_calls.rs"]
mod echo_calls;
#[path = "common/grpc_go.rs"]
mod grpc_go;
use echo_calls::request;
use rpcmeter::grpc::{CallSpec, Connection, Connector, PreparedCall, Target};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tonic::Code;

async fn connect(lean: bool, addr: SocketAddr) -> Connection {
    let connector = Connector::new(&Target::new(addr.ip().to_string(), addr.port())).unwrap();
    let connector = if lean { connector.unary_only() } else { connector };
    connector.connect().await.unwrap()
}

fn echo_spec() -> CallSpec {
    CallSpec {
        path: "/EchoService/echo".parse().unwrap(),
        metadata: Default::default(),
        deadline: None,
        messages: Default::default(),
    }
}

/// A deadline that expires is DEADLINE_EXCEEDED whichever ends the call first: the client's
/// timer, or the server's RST_STREAM(CANCEL) at the deadline, as grpc-go's server sends it.
/// A busy client (a load generator at full tilt) meets both in one turn, the reset read
/// first: here its one thread is kept busy across the deadline once the server has all 40 calls.
async fn a_deadline_reset_by_the_server_is_deadline_exceeded(lean: bool) {
    const CALLS: u64 = 40;
    let deadline = Duration::from_millis(50);
    let (addr, arrivals) = grpc_go::resets_at_the_deadline();
    let conn = connect(lean, addr).await;
    let call = PreparedCall::new(&CallSpec { deadline: Some(deadline), ..echo_spec() });
    // Tasks of their own, as the engine's calls are: they run in the order they were woken.
    let calls = futures::future::join_all((0..CALLS).map(|_| {
        let (conn, call) = (conn.clone(), call.clone());
        tokio::spawn(async move { conn.call(&call, request("too slow"), false).await })
    }));
    let busy = async {
        while arrivals.load(Ordering::SeqCst) < CALLS {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // Blocks the client's only thread: the resets arrive meanwhile, the timers expire.
        std::thread::sleep(2 * deadline);
    };
    let (replies, ()) = futures::join!(calls, busy);
    let statuses: Vec<_> = replies.into_iter().map(Result::unwrap).map(|r| (r.status, r.message)).collect();
    let exceeded = statuses.iter().filter(|(code, _)| *code == Code::DeadlineExceeded).count();
    assert_eq!(exceeded, CALLS as usize, "{statuses:?}");
}

/// Every test above, over each transport.
macro_rules! over_both_transports {
    ($($case:ident),* $(,)?) => {
        mod over_h2 {
            $(#[tokio::test]
            async fn $case() {
                super::$case(false).await
            })*
        }
        mod over_lean {
            $(#[tokio::test]
            async fn $case() {
                super::$case(true).await
            })*
        }
    };
}

over_both_transports!(a_deadline_reset_by_the_server_is_deadline_exceeded);
