//! Schema: which method to call and what to send, from a .proto compiled at run time
//! (protox), a protoset, or server reflection.
//! (CONTRACT STUB: the signatures below are what the engine uses; bodies to be written.)
use crate::load::transport::Target;
use bytes::Bytes;
use prost_reflect::MethodDescriptor;
use std::path::PathBuf;

#[derive(Debug, Clone)]
pub enum SchemaSource {
    Proto { file: PathBuf, import_paths: Vec<PathBuf> },
    Protoset(PathBuf),
    /// Ask the target through grpc.reflection (v1, then v1alpha).
    Reflection,
}

/// Finds `call` ("pkg.Svc/Method" or "pkg.Svc.Method") in the schema. Unknown names are
/// `bad_input` errors that list what the schema has, with a did-you-mean.
pub async fn resolve_method(_source: &SchemaSource, _call: &str, _target: &Target) -> anyhow::Result<MethodDescriptor> {
    todo!()
}

/// Where request bodies come from.
#[derive(Debug, Clone)]
pub enum DataSource {
    /// `-d`: one JSON object (protobuf JSON mapping); may hold templates.
    Json(String),
    /// `-D`: a file ("-" = stdin): one JSON object, or JSON lines cycled call by call.
    File(PathBuf),
    /// Neither: the empty message.
    Empty,
}

/// Produces the framed request body of each call; encodes once when the body never changes.
pub struct RequestSource {}

impl RequestSource {
    /// Parses and checks all data up front; errors name the field at fault (`bad_input`).
    pub fn new(_method: &MethodDescriptor, _data: &DataSource) -> anyhow::Result<RequestSource> {
        todo!()
    }
    /// The framed body for call number `call` (0-based, run-wide) made by worker `worker`.
    pub fn request(&self, _call: u64, _worker: u32) -> Bytes {
        todo!()
    }
}

/// `-m` JSON object of request metadata to headers; `-bin` keys take base64 values.
pub fn metadata(_json: &str) -> anyhow::Result<http::HeaderMap> {
    todo!()
}
