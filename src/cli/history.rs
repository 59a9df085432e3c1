//! `rpcmeter history`: the runs `rpcmeter run` recorded (see `crate::history`).
use crate::app::history::Action;
use crate::report::Format;
use clap::{Args, Subcommand};
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct HistoryArgs {
    /// The history database [default: $XDG_DATA_HOME/rpcmeter/history.sqlite3, else
    /// ~/.local/share/rpcmeter/history.sqlite3]
    #[arg(long, global = true, value_name = "PATH")]
    pub history: Option<PathBuf>,
    /// `history --limit N`: list at most N runs, as `history list --limit N`
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    #[command(flatten)]
    pub input: crate::input::InputArgs,
    /// What to do [default: list]
    #[command(subcommand)]
    pub command: Option<HistoryCommand>,
}

#[derive(Subcommand, Debug)]
pub enum HistoryCommand {
    /// The recorded runs, newest first: id, start, name, target, call, mode, calls, ok,
    /// throughput, p50, p99.
    List {
        /// Show at most N runs (0: all) [default: 20]
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
    },
    /// One run: a short summary, or (--format json) its whole result as `run --format json`
    /// printed it.
    Show {
        /// The run's id (42 or #42)
        #[arg(value_parser = id)]
        id: i64,
        #[arg(long, value_parser = super::parse::table_or_json(), default_value = "table")]
        format: Format,
    },
    /// Remove a run from the history.
    Rm {
        /// The run's id (42 or #42)
        #[arg(value_parser = id)]
        id: i64,
    },
}

fn id(text: &str) -> Result<i64, String> {
    crate::history::parse_id(text).ok_or_else(|| format!("{text:?}: expected a run id such as 42 or #42"))
}

pub fn main(args: HistoryArgs) -> anyhow::Result<ExitCode> {
    args.input.apply();
    let command = args.command.unwrap_or(HistoryCommand::List { limit: None });
    if args.limit.is_some() && !matches!(command, HistoryCommand::List { .. }) {
        return Err(crate::error::bad_input(
            "--limit is for listing runs (history --limit N, or history list --limit N)",
        ));
    }
    let action = match command {
        HistoryCommand::List { limit } => Action::List { limit: limit.or(args.limit).unwrap_or(20) },
        HistoryCommand::Show { id, format } => Action::Show { id, format },
        HistoryCommand::Rm { id } => Action::Remove { id },
    };
    let text = crate::app::history::run(args.history, action)?;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|_| out.flush())
        .map_err(|e| crate::error::output_failed(std::path::Path::new("-"), e))?;
    Ok(ExitCode::SUCCESS)
}
