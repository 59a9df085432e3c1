//! `rpcmeter history`: the runs `rpcmeter run` recorded (see `crate::history`).
use crate::app::history::Action;
use crate::app::pages::Destination;
use crate::report::Format;
use clap::{Args, Subcommand};
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
    /// `history --format html`: the list as `history list --format html` draws it
    #[arg(long, value_parser = super::parse::formats(&["table", "html"]))]
    pub format: Option<Format>,
    /// `history -o FILE`: the list written to FILE, as `history list -o FILE`
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub input: crate::input::InputArgs,
    /// What to do [default: list]
    #[command(subcommand)]
    pub command: Option<HistoryCommand>,
}

#[derive(Subcommand, Debug)]
pub enum HistoryCommand {
    /// The recorded runs, newest first: id, start, name, target, call, mode, calls, ok,
    /// throughput, p50, p99; or (--format html, -o FILE.html) one page with their trend:
    /// throughput, p50, p99 and error rate run after run, failed and interrupted runs marked.
    List {
        /// Show at most N runs (0: all) [default: 20]
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
        /// The table, or the HTML page of the trend (the default with -o FILE.html)
        #[arg(long, value_parser = super::parse::formats(&["table", "html"]))]
        format: Option<Format>,
        /// Write the list to FILE instead of standard output (FILE.html: the HTML page)
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// One run: a short summary, (--format json) its whole result as `run --format json`
    /// printed it, or (--format html) its report as `run -o FILE.html` draws it.
    Show {
        /// The run's id (42 or #42)
        #[arg(value_parser = id)]
        id: i64,
        #[arg(long, value_parser = super::parse::table_json_or_html(), default_value = "table")]
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
    let command = args.command.unwrap_or(HistoryCommand::List { limit: None, format: None, output: None });
    let listing = matches!(command, HistoryCommand::List { .. });
    let given = [("--limit", args.limit.is_some()), ("--format", args.format.is_some()), ("-o", args.output.is_some())];
    if let Some((flag, _)) = given.iter().find(|(_, set)| *set && !listing) {
        return Err(crate::error::bad_input(format!(
            "{flag} before the command is for listing runs (history {flag} ..., or history list {flag} ...)"
        )));
    }
    let (action, output) = match command {
        HistoryCommand::List { limit, format, output } => {
            let output = output.or(args.output);
            let format = format.or(args.format).unwrap_or(Format::Table);
            let limit = limit.or(args.limit).unwrap_or(20);
            match super::run_settings::primary_format(format, output.as_deref()) {
                Format::Html => (Action::Trend { limit }, output),
                _ => (Action::List { limit }, output),
            }
        }
        HistoryCommand::Show { id, format } => (Action::Show { id, format }, None),
        HistoryCommand::Rm { id } => (Action::Remove { id }, None),
    };
    let destination = Destination::open(output.as_deref())?;
    let text = crate::app::history::run(args.history, action)?;
    destination.write(&text, "history")?;
    Ok(ExitCode::SUCCESS)
}
