//! The call path: gRPC unary calls spoken over the `h2` crate directly.
//! (CONTRACT STUB: the signatures below are what the engine uses; bodies to be written.)
use bytes::Bytes;
use std::path::PathBuf;
use std::time::Duration;

/// Where to call, as the user gave it (`HOST:PORT`) plus TLS choices.
#[derive(Debug, Clone)]
pub struct Target {
    pub host: String,
    pub port: u16,
    /// None: plaintext (h2c with prior knowledge).
    pub tls: Option<TlsOptions>,
}

#[derive(Debug, Clone, Default)]
pub struct TlsOptions {
    pub cacert: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    pub servername: Option<String>,
    pub skip_verify: bool,
}

/// What every call of a run sends besides its body: the method's path, metadata, deadline.
#[derive(Debug, Clone)]
pub struct CallSpec {
    /// e.g. "/rpcmeter.lab.v1.TestService/Cpu"
    pub path: http::uri::PathAndQuery,
    pub metadata: http::HeaderMap,
    pub deadline: Option<Duration>,
}

/// The outcome of one call. Transport failures map to a gRPC code (UNAVAILABLE, ...).
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: tonic::Code,
    /// Size of the response message(s) received, without framing.
    pub response_bytes: u64,
    /// The response message (unframed), only when asked for.
    pub response: Option<Bytes>,
    /// grpc-message or the transport error, when the status is not OK.
    pub message: Option<String>,
}

/// Built once per run: resolved address, TLS configuration, authority.
pub struct Connector {}

impl Connector {
    /// Resolves the target and loads TLS material; bad files are `bad_input` errors.
    pub fn new(_target: &Target) -> anyhow::Result<Connector> {
        todo!()
    }
    /// Opens one HTTP/2 connection; its driver task is spawned on the current runtime.
    pub async fn connect(&self) -> anyhow::Result<Connection> {
        todo!()
    }
}

/// One HTTP/2 connection; cheap to clone, calls on clones share it.
#[derive(Clone)]
pub struct Connection {}

impl Connection {
    /// One unary call with an already framed request body.
    pub async fn unary(&self, _spec: &CallSpec, _framed_request: Bytes, _keep_response: bool) -> Reply {
        todo!()
    }
    /// True once the connection can carry no more calls (peer gone, GOAWAY).
    pub fn is_closed(&self) -> bool {
        todo!()
    }
}

/// The gRPC length-prefixed message: 1 byte compressed flag (0), 4 bytes length, message.
pub fn frame(message: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(5 + message.len());
    out.push(0);
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out.into()
}
