//! The lab: reference services with known behaviour (docs/design.md, "`rpcmeter serve`").
//! Every lab call goes through `Lab::call`: counted by `stats`, admitted and run by `exec`.
use std::future::Future;
use std::sync::Arc;
use tonic::{Response, Status};

mod db;
mod echo;
mod exec;
mod health;
mod linger;
mod network;
mod server;
mod spin;
mod stats;
mod storage;
mod streaming;
mod test_service;
pub mod tls;

pub use db::DbSpec;
pub use server::{
    LabConfig, LabServer, Model, StatsReader, DB_MAX_ROWS, KV_MAX_BYTES, KV_REPLICA_LAG, MAX_KV_REPLICA_LAG,
};
pub use stats::Method;
pub use storage::Consistency;
pub use streaming::MAX_CHUNK_BYTES;

use exec::Executor;
use stats::{Outcome, Stats};

/// Everything the services share.
pub struct Lab {
    config: LabConfig,
    stats: Arc<Stats>,
    exec: Executor,
    db: db::Db,
    store: storage::Store,
    health: health::LabHealth,
}

impl Lab {
    /// Counts, admits and runs one call of `method`.
    async fn call<F, T>(&self, method: Method, work: F) -> Result<Response<T>, Status>
    where
        F: Future<Output = Result<T, Status>> + Send + 'static,
        T: Send + 'static,
    {
        let call = self.stats.arrive(method);
        call.message_in();
        let Ok(admission) = self.exec.admit() else {
            call.finish(Outcome::Rejected);
            return Err(Status::resource_exhausted(
                "server busy: every worker is running a call and the queue is full",
            ));
        };
        // The call's guard travels with its work and comes back with the result, so a call
        // stays in flight until its work really ends: in the threaded model a worker runs on
        // after the client has gone, and drops the guard (failed) when the reply finds no one.
        match admission.run(async move { (work.await, call) }).await {
            Ok((Ok(reply), call)) => {
                call.message_out();
                call.finish(Outcome::Ok);
                Ok(Response::new(reply))
            }
            Ok((Err(status), call)) => {
                call.finish(Outcome::Failed);
                Err(status)
            }
            // The guard went down with the work: counted as failed.
            Err(exec::Panicked) => Err(Status::internal("the call panicked")),
        }
    }
}

/// Code generated from proto/ by build.rs.
pub mod proto {
    /// The latch benchmark's echo service (docs/experiments.md, "Echo warm-up"): no package,
    /// as the article has it.
    pub mod echo {
        tonic::include_proto!("_");
    }
    pub mod lab {
        tonic::include_proto!("rpcmeter.lab.v1");
    }
    /// The encoded descriptor set of every lab proto, for server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/lab_descriptor.bin"));
    /// The .proto sources, for `rpcmeter protos`.
    pub const SOURCES: &[(&str, &str)] = &[
        ("echo.proto", include_str!("../../proto/echo.proto")),
        ("rpcmeter/lab/v1/lab.proto", include_str!("../../proto/rpcmeter/lab/v1/lab.proto")),
    ];
}
