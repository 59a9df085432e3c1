//! grpc.health.v1.Health as the protocol has it
//! (https://github.com/grpc/grpc/blob/master/doc/health-checking.md): Check of a service the
//! server does not know is NOT_FOUND, Watch of one sends SERVICE_UNKNOWN and keeps the stream
//! open (tonic-health answers NOT_FOUND to both). One state for every network thread, so
//! that a shutdown turns every service NOT_SERVING at once, before the drain.
use super::proto::echo::echo_service_server::EchoServiceServer;
use super::proto::lab::{
    stats_server::StatsServer, storage_server::StorageServer, streaming_server::StreamingServer,
    test_service_server::TestServiceServer,
};
use super::Lab;
use futures::Stream;
use std::pin::Pin;
use std::sync::Arc;
use tokio::sync::watch;
use tonic::server::NamedService;
use tonic::{Request, Response, Status};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::{health_server::Health, HealthCheckRequest, HealthCheckResponse};

/// The services health answers for; "" is the server as a whole.
const SERVICES: [&str; 6] = [
    "",
    <EchoServiceServer<Arc<Lab>> as NamedService>::NAME,
    <TestServiceServer<Arc<Lab>> as NamedService>::NAME,
    <StorageServer<Arc<Lab>> as NamedService>::NAME,
    <StatsServer<Arc<Lab>> as NamedService>::NAME,
    <StreamingServer<Arc<Lab>> as NamedService>::NAME,
];

/// Serving until `stop_serving`; then every service is NOT_SERVING for good.
pub struct LabHealth {
    serving: watch::Sender<bool>,
}

impl Default for LabHealth {
    fn default() -> LabHealth {
        LabHealth { serving: watch::Sender::new(true) }
    }
}

impl LabHealth {
    /// Called as the shutdown begins: watchers hear NOT_SERVING, then their streams end.
    pub fn stop_serving(&self) {
        self.serving.send_replace(false);
    }
}

fn status(known: bool, serving: bool) -> ServingStatus {
    match (known, serving) {
        (false, _) => ServingStatus::ServiceUnknown,
        (true, true) => ServingStatus::Serving,
        (true, false) => ServingStatus::NotServing,
    }
}

/// The service over the lab's one `LabHealth`.
#[derive(Clone)]
pub struct HealthService(pub Arc<Lab>);

type WatchStream = Pin<Box<dyn Stream<Item = Result<HealthCheckResponse, Status>> + Send>>;

#[tonic::async_trait]
impl Health for HealthService {
    async fn check(&self, request: Request<HealthCheckRequest>) -> Result<Response<HealthCheckResponse>, Status> {
        let service = request.into_inner().service;
        if !SERVICES.contains(&service.as_str()) {
            return Err(Status::not_found(format!("unknown service {service:?}")));
        }
        let status = status(true, *self.0.health.serving.borrow());
        Ok(Response::new(HealthCheckResponse { status: status as i32 }))
    }

    type WatchStream = WatchStream;

    /// Sends the status now and at each change. A stream ends only once the server stops
    /// serving (after saying so), so an open Watch never holds the drain.
    async fn watch(&self, request: Request<HealthCheckRequest>) -> Result<Response<WatchStream>, Status> {
        let known = SERVICES.contains(&request.into_inner().service.as_str());
        let serving = self.0.health.serving.subscribe();
        let stream = futures::stream::unfold((serving, None), move |(mut serving, sent)| async move {
            loop {
                let now_serving = *serving.borrow_and_update();
                let now = status(known, now_serving);
                if sent != Some(now) {
                    return Some((Ok(HealthCheckResponse { status: now as i32 }), (serving, Some(now))));
                }
                if !now_serving || serving.changed().await.is_err() {
                    return None;
                }
            }
        });
        Ok(Response::new(Box::pin(stream)))
    }
}
