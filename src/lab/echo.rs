//! The latch benchmark's echo service (docs/experiments.md, "Echo warm-up"): the cheapest
//! call, the one the benchmark measures.
use super::proto::echo::{echo_service_server::EchoService, Message};
use super::stats::Method;
use super::Lab;
use std::sync::Arc;
use tonic::{Request, Response, Status};

#[tonic::async_trait]
impl EchoService for Arc<Lab> {
    async fn echo(&self, request: Request<Message>) -> Result<Response<Message>, Status> {
        let message = request.into_inner();
        self.call(Method::Echo, async move { Ok(message) }).await
    }
}
