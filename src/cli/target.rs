//! The flags that say how to reach a target, read its schema and make a call, flattened into
//! every subcommand that calls one (`run`, `ping`; `sweep` and the labs through `run`) so that
//! each is defined once.
use super::parse;
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

/// Everything about a call but its method and request: the schema, the metadata, TLS and the
/// connection's options.
#[derive(Args, Debug, Clone)]
pub struct CallArgs {
    #[command(flatten)]
    pub schema: SchemaArgs,
    /// Request metadata (headers) as a JSON object; keys ending in -bin take base64
    #[arg(short = 'm', long)]
    pub metadata: Option<String>,
    // "proto" and "protoset" are SchemaArgs' fields: flattened, their ids resolve here.
    /// Metadata for server reflection only (a JSON object, as -m), on top of -m's
    #[arg(long, conflicts_with_all = ["proto", "protoset"])]
    pub reflect_metadata: Option<String>,
    #[command(flatten)]
    pub tls: TlsArgs,
    /// The :authority header of every call (default: the target's HOST:PORT), as a virtual
    /// host or a proxy expects it
    #[arg(long)]
    pub authority: Option<String>,
    /// Largest message sent or received, in bytes (a larger one fails the call with
    /// RESOURCE_EXHAUSTED, as gRPC does); at most 2 GiB
    #[arg(long, default_value_t = 4 << 20, value_parser = clap::value_parser!(u32).range(1..=(i32::MAX as i64)))]
    pub max_msg_size: u32,
    /// Compress every request (`grpc-encoding`); the server must accept it
    #[arg(long, value_enum)]
    pub compression: Option<Compression>,
    /// Send an HTTP/2 PING this often on each connection; one unanswered for
    /// --keepalive-timeout closes it and ends its calls UNAVAILABLE
    #[arg(long, value_parser = parse::positive_duration)]
    pub keepalive: Option<Duration>,
    /// How long a keepalive PING may go unanswered (grpc-go's keepalive Timeout) [default: 20s]
    #[arg(long, value_parser = parse::positive_duration, requires = "keepalive")]
    pub keepalive_timeout: Option<Duration>,
    /// Longest wait for a connection (TCP, TLS and HTTP/2 handshakes) and for reflection
    #[arg(long, value_parser = parse::positive_duration, default_value = "10s")]
    pub connect_timeout: Duration,
}

/// Where the descriptors come from: a .proto, a protoset, else server reflection.
#[derive(Args, Debug, Clone)]
pub struct SchemaArgs {
    /// A .proto file, compiled at run time (no protoc needed); without it or --protoset,
    /// server reflection
    #[arg(long, conflicts_with = "protoset")]
    pub proto: Option<PathBuf>,
    /// Directories searched for the imports of --proto (comma-separated)
    #[arg(short = 'i', long = "import-paths", value_delimiter = ',')]
    pub import_paths: Vec<PathBuf>,
    /// A compiled FileDescriptorSet (protoc -o, buf build)
    #[arg(long)]
    pub protoset: Option<PathBuf>,
}

/// TLS (the default) or plaintext, and the certificates of both sides.
#[derive(Args, Debug, Clone)]
pub struct TlsArgs {
    /// Plaintext HTTP/2 (h2c), no TLS
    #[arg(long)]
    pub plaintext: bool,
    /// CA certificate(s) (PEM) that the server's certificate must chain to; a self-signed
    /// server certificate given here is accepted as it is
    #[arg(long, conflicts_with = "plaintext")]
    pub cacert: Option<PathBuf>,
    /// Client certificate (PEM) for mutual TLS; needs --key
    #[arg(long, conflicts_with = "plaintext", requires = "key")]
    pub cert: Option<PathBuf>,
    /// Client private key (PEM) for mutual TLS; needs --cert
    #[arg(long, conflicts_with = "plaintext", requires = "cert")]
    pub key: Option<PathBuf>,
    /// Server name checked against the certificate (default: the target's host)
    #[arg(long, conflicts_with = "plaintext")]
    pub servername: Option<String>,
    /// Accept any server certificate (the handshake is still checked)
    #[arg(long, conflicts_with = "plaintext")]
    pub skip_verify: bool,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Compression {
    Gzip,
}
