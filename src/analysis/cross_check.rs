//! The server's own count (the lab's Stats) beside the client's: where they disagree, and
//! why that may be.
use super::notices::{notice, wall_enough, Notice, NoticeKind};
use super::{ServerSide, Summary};
use crate::grpc::transport::CallKind;
use crate::stats;
use tonic::Code;

/// Where the client's and the server's counts disagree, and why that may be. `resets`: streams
/// the client reset itself (a replayed log's CANCELLED ones, `--cancel-after`'s).
pub fn cross_check(s: &Summary, server: &ServerSide, resets: u64) -> Vec<Notice> {
    [counts(s, server, resets), throughput(s, server)].into_iter().flatten().collect()
}

/// Calls and OK calls, every attempt of the run (warm-up included) on both sides.
fn counts(s: &Summary, server: &ServerSide, resets: u64) -> Option<Notice> {
    let client_ok = s.all_attempts.get(Code::Ok);
    let client_attempts = s.all_attempts.total();
    // A server stream the client ends at its --stream-call-count or --stream-call-duration
    // is OK to the client and a cancelled call to the server: only arrivals compare.
    let server_stream = s.messages.as_ref().is_some_and(|m| m.kind == CallKind::ServerStream);
    // A stream the client resets (--cancel-after, or as a replayed log ended it) is OK to the
    // client too, and cancelled to the server unless the server ended it first; reset at once,
    // it may never reach the server's handler: up to that many fewer OK calls and arrivals.
    let within = |server: u64, client: u64| server <= client && server.saturating_add(resets) >= client;
    (!(within(server.ok, client_ok) || server_stream) || !within(server.received, client_attempts)).then(|| {
        let reset = match resets {
            0 => String::new(),
            n => format!(", {n} of them streams it may have reset itself"),
        };
        notice(
            NoticeKind::ServerCount,
            format!(
                "the server counted {} calls ({} ok) where the client sent {} ({} ok{reset}): another client is \
             calling it, or calls were lost between them",
                server.received, server.ok, client_attempts, client_ok
            ),
        )
    })
}

/// Throughput more than 2% apart, over a run long enough to judge.
fn throughput(s: &Summary, server: &ServerSide) -> Option<Notice> {
    let server_rps = server.throughput_rps.filter(|_| wall_enough(s))?;
    let client_rps = stats::rate(s.all_attempts.total(), s.elapsed);
    let off = (server_rps - client_rps).abs() / client_rps;
    (client_rps > 0.0 && off > 0.02).then(|| {
        notice(
            NoticeKind::ServerThroughput,
            format!(
                "server-side throughput {server_rps:.1} calls/s differs from the client's {client_rps:.1} by {:.1}%: \
                 the client's window includes its start and drain, the server's only first to last arrival",
                off * 100.0
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::fixture::*;
    use std::time::Duration;

    /// 1000 attempts, 900 OK, over 2 s: 500 calls/s.
    fn client() -> Summary {
        summary(plan(), recorded(tally(1000, Duration::from_millis(1), 10), Duration::from_secs(2)))
    }

    #[test]
    fn the_same_count_on_both_sides_says_nothing() {
        assert!(cross_check(&client(), &server(1000, 900, Some(505.0)), 0).is_empty());
    }

    #[test]
    fn another_count_is_told() {
        let n = cross_check(&client(), &server(1200, 1100, None), 0);
        assert_eq!(n.iter().map(|n| n.kind).collect::<Vec<_>>(), [NoticeKind::ServerCount]);
        assert!(n[0].text.contains("1200 calls (1100 ok) where the client sent 1000 (900 ok)"), "{}", n[0].text);
    }

    /// Streams the client reset itself (as a replayed log ended them, --cancel-after) are OK
    /// to it and may be cancelled to the server: up to that many fewer OK calls there agree, one more does not,
    /// nor more OK calls than the client's.
    #[test]
    fn streams_reset_as_logged_may_be_fewer_ok_calls_on_the_server_and_no_more() {
        for ok in [898, 899, 900] {
            assert!(cross_check(&client(), &server(1000, ok, None), 2).is_empty(), "{ok} ok");
        }
        for ok in [897, 901] {
            let n = cross_check(&client(), &server(1000, ok, None), 2);
            assert_eq!(n.iter().map(|n| n.kind).collect::<Vec<_>>(), [NoticeKind::ServerCount], "{ok} ok");
            assert!(
                n[0].text.contains("sent 1000 (900 ok, 2 of them streams it may have reset itself)"),
                "{}",
                n[0].text
            );
        }
        // Without resets, one OK call fewer on the server is a mismatch.
        assert_eq!(cross_check(&client(), &server(1000, 899, None), 0).len(), 1);
        // Reset at once, a stream may never reach the server's handler: as many fewer arrivals.
        assert!(cross_check(&client(), &server(998, 898, None), 2).is_empty());
        assert_eq!(cross_check(&client(), &server(997, 897, None), 2).len(), 1);
    }

    #[test]
    fn throughput_more_than_2_percent_apart_is_told() {
        let n = cross_check(&client(), &server(1000, 900, Some(520.0)), 0);
        assert_eq!(n.iter().map(|n| n.kind).collect::<Vec<_>>(), [NoticeKind::ServerThroughput]);
    }
}
