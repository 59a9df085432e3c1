//! The server's own count (the lab's Stats) beside the client's: where they disagree, and
//! why that may be.
use super::notices::{notice, wall_enough, Notice, NoticeKind};
use super::{ServerSide, Summary};
use crate::grpc::transport::CallKind;
use crate::stats;
use tonic::Code;

/// Where the client's and the server's counts disagree, and why that may be.
pub fn cross_check(s: &Summary, server: &ServerSide) -> Vec<Notice> {
    let mut out = Vec::new();
    let client_ok = s.all_attempts.get(Code::Ok);
    let client_attempts = s.all_attempts.total();
    // A server stream the client ends at its --stream-call-count or --stream-call-duration
    // is OK to the client and a cancelled call to the server: only arrivals compare.
    let server_stream = s.messages.as_ref().is_some_and(|m| m.kind == CallKind::ServerStream);
    if (server.ok != client_ok && !server_stream) || server.received != client_attempts {
        out.push(notice(
            NoticeKind::ServerCount,
            format!(
                "the server counted {} calls ({} ok) where the client sent {} ({} ok): another client is \
             calling it, or calls were lost between them",
                server.received, server.ok, client_attempts, client_ok
            ),
        ));
    }
    if let Some(server_rps) = server.throughput_rps.filter(|_| wall_enough(s)) {
        let client_rps = stats::rate(client_attempts, s.elapsed);
        if client_rps > 0.0 && (server_rps - client_rps).abs() / client_rps > 0.02 {
            out.push(notice(
                NoticeKind::ServerThroughput,
                format!(
                "server-side throughput {server_rps:.1} calls/s differs from the client's {client_rps:.1} by {:.1}%: \
                 the client's window includes its start and drain, the server's only first to last arrival",
                (server_rps - client_rps).abs() / client_rps * 100.0
            ),
            ));
        }
    }
    out
}
