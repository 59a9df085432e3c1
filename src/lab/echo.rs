//! The latch benchmark's echo service (docs/experiments.md, "Echo warm-up"): the cheapest
//! call, the one the benchmark measures. It skips the execution model, as streams do: it
//! does no work a model could admit or queue, so a latch burst of any size is answered, not
//! refused, and what the benchmark measures is the stack.
use super::proto::echo::{echo_service_server::EchoService, Message};
use super::stats::{Method, Outcome};
use super::Lab;
use std::sync::Arc;
use tonic::{Request, Response, Status};

#[tonic::async_trait]
impl EchoService for Arc<Lab> {
    async fn echo(&self, request: Request<Message>) -> Result<Response<Message>, Status> {
        let call = self.stats.arrive(Method::Echo);
        call.message_in();
        let message = request.into_inner();
        call.message_out();
        call.finish(Outcome::Ok);
        Ok(Response::new(message))
    }
}
