//! `rpcmeter ping TARGET`: the network's round trip (ICMP echo, else TCP connect) beside a gRPC
//! call, interleaved, as a latency baseline (`app::ping` measures and renders). The schema
//! and TLS flags are `run`'s own groups (`cli::target`); the request flags go through `run`'s parser.
use super::target::{SchemaArgs, TlsArgs};
use crate::app::parse;
use crate::ping::Method;
use std::time::Duration;

/// How the result is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PingFormat {
    Table,
    Json,
}

/// Which outlier flags trim the samples (never by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Trim {
    /// Iterated z-score passes, |z| > 3 (as the ping-vs-gRPC write-up).
    Z,
    /// Tukey's fences, 1.5 IQR beyond the quartiles.
    Tukey,
}

#[derive(clap::Args, Debug, Clone)]
pub struct PingArgs {
    /// The server: HOST:PORT (as `run` takes it); ICMP goes to HOST
    pub target: String,
    /// Samples per protocol (1 to 100000)
    #[arg(short = 'n', long = "count", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub count: u64,
    /// Time between samples (10ms to 1h)
    #[arg(long, default_value = "1s", value_parser = interval)]
    pub interval: Duration,
    /// Longest wait for one answer, ICMP or gRPC (the gRPC deadline)
    #[arg(long, default_value = "2s", value_parser = parse::positive_duration)]
    pub timeout: Duration,
    /// How the network round trip is measured
    #[arg(long, value_enum, default_value_t = Method::Auto)]
    pub icmp: Method,
    /// The gRPC method called beside it
    #[arg(long, default_value = "EchoService/echo")]
    pub call: String,
    /// Its request as JSON (protobuf JSON mapping)
    #[arg(short = 'd', long = "data", default_value = r#"{"content":"ping"}"#)]
    pub data: String,
    /// Request metadata (headers) as a JSON object
    #[arg(short = 'm', long)]
    pub metadata: Option<String>,
    #[command(flatten)]
    pub schema: SchemaArgs,
    #[command(flatten)]
    pub tls: TlsArgs,
    /// Longest wait for the connection and reflection
    #[arg(long, value_parser = parse::positive_duration, default_value = "10s")]
    pub connect_timeout: Duration,
    /// Leave out the samples these outlier flags mark, and say so (default: flag, keep all)
    #[arg(long, value_enum)]
    pub trim: Option<Trim>,
    /// Output format
    #[arg(long, value_enum, default_value_t = PingFormat::Table)]
    pub format: PingFormat,
}

/// The MIN..=MAX bounds of --interval: faster is a flood, slower is a typo.
fn interval(text: &str) -> Result<Duration, String> {
    let d = parse::duration(text)?;
    if d < Duration::from_millis(10) || d > Duration::from_secs(3600) {
        return Err(format!("{text:?}: the interval must be from 10ms to 1h"));
    }
    Ok(d)
}

pub fn main(args: PingArgs) -> anyhow::Result<std::process::ExitCode> {
    let settings = crate::app::ping::Settings::from_args(&args)?;
    crate::app::ping::run(&settings, &*crate::cli::interruptible()?)
}
