//! `run --replay FILE`'s flags, and `rpcmeter replay-info FILE` (docs/replay.md).
use crate::error::bad_input;
use crate::input::ByteSize;
use crate::replay::log::Framing;
use crate::replay::source::Scan;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

/// The largest log entry read by default: gRPC's default message limit (4 MiB) with room for
/// its metadata.
const MAX_ENTRY: ByteSize = ByteSize::mib(16);

#[derive(Args, Debug, Clone, Default)]
pub struct ReplayArgs {
    /// Send the calls of a gRPC binary log (grpc.binarylog.v1, as grpc-go and grpc-java
    /// write it): by default each at its logged offset from the first call; with -c, --rps or
    /// --stages the log is a pool of calls drawn in order (docs/replay.md)
    #[arg(long, value_name = "FILE", conflicts_with_all = ["call", "workload", "data", "data_file"])]
    pub replay: Option<PathBuf>,
    /// How the log's entries are framed [default: told by its first byte]
    #[arg(long, value_enum, requires = "replay")]
    pub replay_framing: Option<Framing>,
    /// The log's own schedule, X times as fast (2: in half the time)
    #[arg(long, value_name = "X", requires = "replay", value_parser = speed)]
    pub speed: Option<f64>,
    /// The log's own schedule: start over when it ends (until -z, -n or Ctrl-C)
    #[arg(long, requires = "replay")]
    pub replay_loop: bool,
    /// Never send this logged metadata key (repeatable); credentials (the --redact rules)
    /// are never sent from a log: give your own with -m
    #[arg(long, value_name = "NAME", requires = "replay", action = clap::ArgAction::Append)]
    pub replay_drop_header: Vec<String>,
    /// The largest log entry read [default: 16MiB]
    #[arg(long, value_name = "SIZE", value_parser = crate::input::size)]
    pub replay_max_entry: Option<ByteSize>,
    /// The log's scan on standard input, as the parent of `run --shards` writes it for each
    /// shard (app/shards.rs): the shard reads the log only to send its calls
    #[arg(long, requires = "replay", conflicts_with = "shards", hide = true)]
    pub replay_scan_stdin: bool,
}

impl ReplayArgs {
    /// The scan `--replay-scan-stdin` passes, read from standard input.
    pub fn passed_scan(&self) -> anyhow::Result<Option<std::sync::Arc<Scan>>> {
        match self.replay_scan_stdin {
            true => Ok(Some(std::sync::Arc::new(Scan::read_from(std::io::stdin().lock())?))),
            false => Ok(None),
        }
    }
}

fn speed(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(x) if x.is_finite() && (1e-3..=1e6).contains(&x) => Ok(x),
        _ => Err(format!("{text:?}: expected a factor from 0.001 to 1000000, e.g. 2")),
    }
}

impl ReplayArgs {
    /// The replay these flags ask for; `scheduled`: no other load model was given, so the
    /// log's own times pace it.
    pub fn settings(
        &self,
        scheduled: bool,
        redact: &[String],
    ) -> anyhow::Result<Option<crate::replay::source::Settings>> {
        let Some(file) = &self.replay else {
            if self.replay_max_entry.is_some() {
                return Err(bad_input("--replay-max-entry applies to --replay"));
            }
            return Ok(None);
        };
        if !scheduled && (self.speed.is_some() || self.replay_loop) {
            return Err(bad_input(
                "--speed and --replay-loop apply to the log's own schedule; with -c, --rps or --stages the log is a pool drawn in order (and starts over when it ends)",
            ));
        }
        Ok(Some(crate::replay::source::Settings {
            file: file.clone(),
            framing: self.replay_framing,
            max_entry: self.replay_max_entry.unwrap_or(MAX_ENTRY).0,
            speed: scheduled.then_some(self.speed.unwrap_or(1.0)),
            repeat: self.replay_loop,
            drop_headers: self.replay_drop_header.iter().map(|h| h.to_ascii_lowercase()).collect(),
            redact: redact.to_vec(),
        }))
    }
}

/// `rpcmeter replay-info FILE`.
#[derive(Args, Debug)]
pub struct ReplayInfoArgs {
    /// The binary log
    pub file: PathBuf,
    /// How the log's entries are framed [default: told by its first byte]
    #[arg(long, value_enum)]
    pub framing: Option<Framing>,
    /// The largest log entry read [default: 16MiB]
    #[arg(long, value_name = "SIZE", value_parser = crate::input::size)]
    pub max_entry: Option<ByteSize>,
    /// Metadata keys whose values count as credentials, besides the built-in rule (repeatable)
    #[arg(long, value_name = "KEY")]
    pub redact: Vec<String>,
}

pub fn info(args: ReplayInfoArgs) -> anyhow::Result<ExitCode> {
    let name = args.file.display().to_string();
    let file = std::fs::File::open(&args.file).map_err(|e| bad_input(format!("{name}: {e}")))?;
    let input = std::io::BufReader::with_capacity(1 << 16, file);
    let info = crate::replay::info::Info::read(input, args.framing, args.max_entry.unwrap_or(MAX_ENTRY).0)
        .map_err(|why| bad_input(format!("{name}: {why}")))?;
    let redactor = crate::app::redact::Redactor::new(&args.redact);
    let text = info.render(&name, &|key| redactor.is_secret(key));
    super::to_stdout(text.as_bytes())
}
