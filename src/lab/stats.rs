//! Server-side counters (`Stats`, docs/design.md, "The lab messages"): per method, atomics
//! only, because every lab call passes here, the benchmarked echo included.
use super::proto::lab::{stats_server, MethodStats, StatsReply, StatsRequest};
use super::Lab;
use std::sync::atomic::{AtomicU64, Ordering::AcqRel, Ordering::Acquire, Ordering::Relaxed, Ordering::Release};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tonic::{Request, Response, Status};

/// The lab methods that are counted (Stats' own calls are not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Echo,
    Cpu,
    Db,
    GetValue,
    PutValue,
    Subscribe,
    Upload,
    StreamEcho,
}

impl Method {
    pub const ALL: [Method; 8] = [
        Method::Echo,
        Method::Cpu,
        Method::Db,
        Method::GetValue,
        Method::PutValue,
        Method::Subscribe,
        Method::Upload,
        Method::StreamEcho,
    ];

    /// The full gRPC path, as clients and the Stats reply name it.
    pub fn path(self) -> &'static str {
        match self {
            Method::Echo => "/EchoService/echo",
            Method::Cpu => "/rpcmeter.lab.v1.TestService/Cpu",
            Method::Db => "/rpcmeter.lab.v1.TestService/Db",
            Method::GetValue => "/rpcmeter.lab.v1.Storage/GetValue",
            Method::PutValue => "/rpcmeter.lab.v1.Storage/PutValue",
            Method::Subscribe => "/rpcmeter.lab.v1.Streaming/Subscribe",
            Method::Upload => "/rpcmeter.lab.v1.Streaming/Upload",
            Method::StreamEcho => "/rpcmeter.lab.v1.Streaming/Echo",
        }
    }
}

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// An error status other than rejection, or a call the client abandoned.
    Failed,
    /// RESOURCE_EXHAUSTED from admission control.
    Rejected,
}

#[derive(Default)]
struct Counters {
    received: AtomicU64,
    ok: AtomicU64,
    failed: AtomicU64,
    rejected: AtomicU64,
    messages_in: AtomicU64,
    messages_out: AtomicU64,
}

pub struct Stats {
    methods: [Counters; Method::ALL.len()],
    /// Unix nanoseconds; 0 = no call yet.
    first_arrival: AtomicU64,
    last_arrival: AtomicU64,
    in_flight: AtomicU64,
    started: Instant,
    /// `serve --spin`, reported so that a reader of the CPU knows echo's spin is in it.
    echo_spin: Duration,
}

impl Stats {
    pub fn new(echo_spin: Duration) -> Stats {
        Stats { echo_spin, ..Stats::default() }
    }
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            methods: Default::default(),
            first_arrival: AtomicU64::new(0),
            last_arrival: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
            started: Instant::now(),
            echo_spin: Duration::ZERO,
        }
    }
}

impl Stats {
    /// Counts a call's arrival; the returned guard counts its outcome when dropped, so a
    /// call whose client went away (its future dropped, or its reply undelivered) still ends
    /// as failed. The guard owns a reference to `self`, so it can travel with the call's work
    /// to a worker thread and be counted where that work really ends.
    pub fn arrive(self: &Arc<Self>, method: Method) -> Call {
        let now = unix_nanos();
        self.methods[method as usize].received.fetch_add(1, Relaxed);
        // The earliest arrival, whichever call gets here first.
        let _ = self.first_arrival.fetch_update(Relaxed, Relaxed, |first| (first == 0 || now < first).then_some(now));
        self.last_arrival.fetch_max(now, Relaxed);
        self.in_flight.fetch_add(1, Relaxed);
        Call { stats: self.clone(), method, outcome: Outcome::Failed }
    }

    pub fn snapshot(&self) -> StatsReply {
        self.read(|n| n.load(Acquire))
    }

    /// Zeroes the counters and arrival times and returns what they held: each is swapped
    /// with 0, so a call counted meanwhile is in this reply or in the next period, never lost.
    /// `in_flight` is a gauge, not a counter: it stays, and calls in flight across a reset
    /// are counted when they end.
    pub fn take(&self) -> StatsReply {
        self.read(|n| n.swap(0, AcqRel))
    }

    /// Reads every counter with `read`. Outcomes are read before `received`, and a call's
    /// outcome is counted (Release) after its arrival, so ok + failed + rejected <= received
    /// in every snapshot.
    fn read(&self, read: impl Fn(&AtomicU64) -> u64) -> StatsReply {
        let methods: Vec<MethodStats> = Method::ALL
            .iter()
            .map(|&m| {
                let c = &self.methods[m as usize];
                let (ok, failed, rejected) = (read(&c.ok), read(&c.failed), read(&c.rejected));
                MethodStats {
                    method: m.path().to_string(),
                    received: read(&c.received),
                    ok,
                    failed,
                    rejected,
                    messages_in: read(&c.messages_in),
                    messages_out: read(&c.messages_out),
                }
            })
            .collect();
        let received: u64 = methods.iter().map(|m| m.received).sum();
        let first = read(&self.first_arrival) as f64 / 1e9;
        let last = read(&self.last_arrival) as f64 / 1e9;
        // n arrivals span n - 1 intervals between the first and the last (docs/experiments.md,
        // "Throughput measured by the client").
        let server_rps = if received >= 2 && last > first { (received - 1) as f64 / (last - first) } else { 0.0 };
        let usage = crate::record::resource::usage();
        StatsReply {
            methods,
            received,
            first_arrival_unix_s: first,
            last_arrival_unix_s: last,
            server_rps,
            cpu_seconds: usage.cpu.as_secs_f64(),
            rss_bytes: usage.rss_bytes,
            in_flight: self.in_flight.load(Relaxed),
            uptime_s: self.started.elapsed().as_secs_f64(),
            echo_spin_us: self.echo_spin.as_micros().try_into().unwrap_or(u64::MAX),
        }
    }
}

/// One call between arrival and answer.
pub struct Call {
    stats: Arc<Stats>,
    method: Method,
    outcome: Outcome,
}

impl Call {
    pub fn finish(mut self, outcome: Outcome) {
        self.outcome = outcome;
    }

    /// A message of this call arrived (a unary call's request too).
    pub fn message_in(&self) {
        self.stats.methods[self.method as usize].messages_in.fetch_add(1, Relaxed);
    }

    /// A message of this call was handed to the transport.
    pub fn message_out(&self) {
        self.stats.methods[self.method as usize].messages_out.fetch_add(1, Relaxed);
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        let c = &self.stats.methods[self.method as usize];
        match self.outcome {
            Outcome::Ok => &c.ok,
            Outcome::Failed => &c.failed,
            Outcome::Rejected => &c.rejected,
        }
        .fetch_add(1, Release);
        self.stats.in_flight.fetch_sub(1, Relaxed);
    }
}

fn unix_nanos() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// Stats is read outside admission control: observing a busy server must not be refused.
#[tonic::async_trait]
impl stats_server::Stats for Arc<Lab> {
    async fn get(&self, _: Request<StatsRequest>) -> Result<Response<StatsReply>, Status> {
        Ok(Response::new(self.stats.snapshot()))
    }

    /// Answers with the counts it zeroed; `may_reset` says who may.
    async fn reset(&self, request: Request<StatsRequest>) -> Result<Response<StatsReply>, Status> {
        may_reset(request.remote_addr(), self.config.allow_remote_reset)?;
        Ok(Response::new(self.stats.take()))
    }
}

/// Zeroing what every client reads is for this machine (a lab that owns its server), unless
/// `--allow-remote-reset`: a peer whose address is unknown counts as remote.
fn may_reset(peer: Option<std::net::SocketAddr>, allow_remote: bool) -> Result<(), Status> {
    let local = peer.is_some_and(|peer| peer.ip().to_canonical().is_loopback());
    if local || allow_remote {
        return Ok(());
    }
    let peer = peer.map_or("an unknown peer".to_string(), |p| p.ip().to_string());
    Err(Status::permission_denied(format!(
        "Stats/Reset is for clients on the server's machine, not {peer}: start serve with --allow-remote-reset to allow it"
    )))
}

#[cfg(test)]
mod tests {
    use super::may_reset;

    #[test]
    fn reset_is_for_loopback_peers_unless_allowed() {
        for local in ["127.0.0.1:5000", "[::1]:5000", "[::ffff:127.0.0.1]:5000"] {
            assert!(may_reset(Some(local.parse().unwrap()), false).is_ok(), "{local}");
        }
        for remote in [Some("192.0.2.2:5000".parse().unwrap()), Some("[2001:db8::1]:5000".parse().unwrap()), None] {
            let refused = may_reset(remote, false).unwrap_err();
            assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{remote:?}");
            assert!(refused.message().contains("--allow-remote-reset"), "{}", refused.message());
            assert!(may_reset(remote, true).is_ok(), "{remote:?}");
        }
    }
}
