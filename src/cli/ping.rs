//! `rpcmeter ping TARGET`: the network's round trip (ICMP echo, else TCP connect) beside a gRPC
//! call, interleaved, as a latency baseline (`app::ping` measures and renders). The schema
//! and TLS flags are `run`'s own groups (`cli::target`); the request flags go through `run`'s parser.
use super::parse;
use super::target::{SchemaArgs, TlsArgs};
use crate::app::ping::{Settings, Trim};
use crate::error::bad_input;
use crate::ping::Method;
use crate::report::Format;
use std::time::Duration;

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
    #[arg(long, value_parser = parse::table_or_json(), default_value = "table")]
    pub format: Format,
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
    /// The ping these flags ask for, checked.
    pub fn settings(&self) -> anyhow::Result<Settings> {
        let args = self;
        let mut words: Vec<std::ffi::OsString> = vec!["ping".into(), args.target.clone().into()];
        let mut flag = |name: &str, value: Option<std::ffi::OsString>| {
            words.push(name.into());
            words.extend(value);
        };
        flag("--call", Some(args.call.clone().into()));
        flag("--data", Some(args.data.clone().into()));
        flag("--deadline", Some(humantime::format_duration(args.timeout).to_string().into()));
        flag("--connect-timeout", Some(humantime::format_duration(args.connect_timeout).to_string().into()));
        flag("--no-save", None);
        flag("--quiet", None);
        if let Some(m) = &args.metadata {
            flag("--metadata", Some(m.into()));
        }
        let mut run_args =
            super::run::parse_words(&words).map_err(|e| bad_input(format!("ping: {}", super::one_line(&e))))?;
        // The same groups as run's, checked by clap already: handed over whole, not as words.
        run_args.schema = args.schema.clone();
        run_args.tls = args.tls.clone();
        if run_args.target.unix.is_some() {
            return Err(bad_input("ping: a unix: target has no network round trip to compare with"));
        }
        Ok(Settings {
            run: run_args.settings(Vec::new())?,
            count: args.count,
            interval: args.interval,
            timeout: args.timeout,
            icmp: args.icmp,
            trim: args.trim,
            format: args.format,
        })
    }
}
