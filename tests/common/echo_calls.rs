//! Echo calls over a `Connection`, shared by the transport tests (tests/transport.rs,
//! tests/transport_peers.rs), which include this file as a module of their own.
use bytes::Bytes;
use prost::Message as _;
use rpcmeter::grpc::wire::frame;
use rpcmeter::grpc::{Connection, PreparedCall};
use rpcmeter::lab::proto::echo::Message;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use tonic::Code;

/// The framed echo request carrying `content`.
pub fn request(content: &str) -> Bytes {
    frame(&Message { content: content.into() }.encode_to_vec())
}

/// One call per content, all at once on `conn`: each must come back OK with its own content.
pub async fn all_echo(conn: &Connection, call: &PreparedCall, contents: impl IntoIterator<Item = String>) {
    let calls =
        contents.into_iter().map(|content| async move { (conn.call(call, request(&content), true).await, content) });
    for (reply, content) in futures::future::join_all(calls).await {
        assert_eq!(reply.status, Code::Ok, "{:?}", reply.message);
        assert_eq!(Message::decode(reply.response.unwrap()).unwrap().content, content);
    }
}

/// `callers` callers calling in a loop until a call is not OK (the server going away):
/// every caller's statuses, its last one the first that was not OK. `ok` counts the OK
/// answers as they come (for a test to stop the server once calls run).
pub async fn until_refused(conn: &Connection, call: &PreparedCall, callers: usize, ok: &AtomicU64) -> Vec<Vec<Code>> {
    let workers = (0..callers).map(|_| async move {
        let mut statuses = Vec::new();
        loop {
            let reply = conn.call(call, request("until the end"), false).await;
            statuses.push(reply.status);
            if reply.status == Code::Ok {
                ok.fetch_add(1, Relaxed);
            }
            if reply.status != Code::Ok {
                return statuses;
            }
        }
    });
    futures::future::join_all(workers).await
}

/// Each named test (an `async fn case(lean: bool)` of the including file) over each
/// transport: h2's and the lean one.
#[allow(unused_macros)]
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
#[allow(unused_imports)]
pub(crate) use over_both_transports;
