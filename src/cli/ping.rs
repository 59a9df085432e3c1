//! `rpcmeter ping TARGET`: the network's round trip (ICMP echo, else TCP connect) beside a gRPC
//! call, interleaved, as a latency baseline (`app::ping` measures and renders). The schema
//! TLS, metadata and connection flags are `run`'s own group (`cli::target::CallArgs`).
use super::parse;
use super::run_settings::CallParts;
use super::target::CallArgs;
use crate::app::ping::{Settings, Trim};
use crate::error::bad_input;
use crate::ping::Method;
use crate::report::Format;
use crate::schema::DataSource;
use std::time::Duration;

#[derive(clap::Args, Debug, Clone)]
pub struct PingArgs {
    /// The server: HOST:PORT (as `run` takes it); ICMP goes to HOST
    #[arg(value_parser = parse::target)]
    pub target: parse::TargetText,
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
    /// How to reach the target and what goes with the call: `run`'s own flags
    #[command(flatten)]
    pub calls: CallArgs,
    /// Leave out the samples these outlier flags mark, and say so (default: flag, keep all)
    #[arg(long, value_enum)]
    pub trim: Option<Trim>,
    /// Output format: the table, JSON, or one HTML page (every sample in order, box plots and
    /// violins of both round trips, the table); -o FILE.html makes it html
    #[arg(long, value_parser = parse::table_json_or_html(), default_value = "table")]
    pub format: Format,
    /// Write the report to FILE instead of standard output (FILE.html: the HTML page)
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<std::path::PathBuf>,
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
    crate::app::ping::run(&args.settings()?, &*super::interruptible()?)
}

impl PingArgs {
    /// The ping these flags ask for, checked; the gRPC side as `run` makes its calls.
    pub fn settings(&self) -> anyhow::Result<Settings> {
        if self.target.unix.is_some() {
            return Err(bad_input("ping: a unix: target has no network round trip to compare with"));
        }
        let CallParts { target, schema, call, .. } = self.calls.parts(&self.target, Some(self.timeout))?;
        Ok(Settings {
            schema,
            call: self.call.clone(),
            data: DataSource::Json(self.data.clone()),
            target,
            options: call,
            count: self.count,
            interval: self.interval,
            timeout: self.timeout,
            icmp: self.icmp,
            trim: self.trim,
            format: super::run_settings::primary_format(self.format, self.output.as_deref()),
            output: self.output.clone(),
        })
    }
}
