//! The server's own count beside the client's: when the target serves the lab's
//! `rpcmeter.lab.v1.Stats`, `run` reads them before and after the run and takes the
//! difference (never resets them: others may be reading them too). A target without them is
//! simply not cross-checked.
use crate::analysis::ServerSide;
use crate::grpc::wire::frame;
use crate::grpc::{CallSpec, Connection, Connector, Target};
use crate::lab::proto::lab::{StatsReply, StatsRequest};
use prost::Message;
use std::time::Duration;

/// A connection to the target's Stats, on a runtime of its own (outside the engine's threads).
pub struct StatsProbe {
    runtime: tokio::runtime::Runtime,
    connection: Connection,
    /// The Stats before the run.
    before: StatsReply,
}

/// Stats answers quickly or not at all: a target without it must not delay the run.
const STATS_DEADLINE: Duration = Duration::from_secs(2);

impl StatsProbe {
    /// Reads the target's Stats; `None` when the target does not serve them.
    pub fn before(target: &Target) -> Option<StatsProbe> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
        let connector = Connector::new(target).ok()?;
        let connection =
            runtime.block_on(async { tokio::time::timeout(STATS_DEADLINE, connector.connect()).await }).ok()?.ok()?;
        let before = runtime.block_on(ask(&connection, "Get"))?;
        Some(StatsProbe { runtime, connection, before })
    }

    /// The server's side of the run for `methods` (wire paths, "/pkg.Service/Method"; a
    /// workload's several), added up.
    pub fn read(self, methods: &[&str]) -> Option<ServerSide> {
        let after = self.runtime.block_on(ask(&self.connection, "Get"))?;
        let zero = Default::default();
        let mut m = crate::lab::proto::lab::MethodStats::default();
        let mut seen = false;
        for method in methods {
            let Some(a) = after.methods.iter().find(|m| m.method == *method) else { continue };
            let b = self.before.methods.iter().find(|m| m.method == *method).unwrap_or(&zero);
            seen = true;
            m.received += a.received.saturating_sub(b.received);
            m.ok += a.ok.saturating_sub(b.ok);
            m.failed += a.failed.saturating_sub(b.failed);
            m.rejected += a.rejected.saturating_sub(b.rejected);
            m.messages_in += a.messages_in.saturating_sub(b.messages_in);
            m.messages_out += a.messages_out.saturating_sub(b.messages_out);
        }
        seen.then_some(())?;
        let cpu = (after.cpu_seconds - self.before.cpu_seconds).max(0.0);
        let echo = crate::lab::Method::Echo.path();
        Some(ServerSide {
            received: m.received,
            ok: m.ok,
            failed: m.failed,
            rejected: m.rejected,
            messages_in: m.messages_in,
            messages_out: m.messages_out,
            // The server's first-to-last-arrival rate is this run's only when the server had
            // seen no call before it and every arrival since was one of this run's methods.
            throughput_rps: (self.before.received == 0 && after.received == m.received).then_some(after.server_rps),
            cpu: Duration::try_from_secs_f64(cpu).unwrap_or_default(),
            rss_bytes: after.rss_bytes,
            // Only echo's calls spin (src/lab/spin.rs).
            echo_spin: if methods.contains(&echo) { Duration::from_micros(after.echo_spin_us) } else { Duration::ZERO },
        })
    }
}

/// Resets the target's Stats: for a lab that owns its server, so that each step's server-side
/// throughput is its own. False when the target has no Stats.
pub fn reset(target: &Target) -> bool {
    let Some(probe) = StatsProbe::before(target) else { return false };
    probe.runtime.block_on(ask(&probe.connection, "Reset")).is_some()
}

async fn ask(connection: &Connection, method: &str) -> Option<StatsReply> {
    let spec = CallSpec {
        path: format!("/rpcmeter.lab.v1.Stats/{method}").parse().ok()?,
        metadata: http::HeaderMap::new(),
        deadline: Some(STATS_DEADLINE),
        messages: Default::default(),
    };
    let reply = connection.unary(&spec, frame(&StatsRequest {}.encode_to_vec()), true).await;
    (reply.status == tonic::Code::Ok).then_some(())?;
    StatsReply::decode(reply.response?).ok()
}
