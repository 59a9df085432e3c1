//! The flags that say how to reach a target and read its schema, flattened into every
//! subcommand that calls one (`run`, `ping`) so that each is defined once.
use clap::Args;
use std::path::PathBuf;

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
