//! `rpcmeter lab NAME`: one experiment of docs/experiments.md, rerun on this machine; a
//! markdown summary and an HTML report per lab (see `experiments`).
use crate::experiments::{self, servers::Runtime, Name, Options};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct LabArgs {
    /// The experiment
    #[arg(value_enum)]
    pub name: Name,
    /// Each lab in about a minute: smaller loads and fewer rounds (CI runs this)
    #[arg(long)]
    pub quick: bool,
    /// Directory for the reports: DIR/NAME.md, DIR/NAME.html, and each run's JSON in DIR/NAME/
    #[arg(long, default_value = "rpcmeter-lab")]
    pub out: PathBuf,
    /// Runtimes to include (the others' servers are not built, and the report says so)
    #[arg(long, value_enum, value_delimiter = ',', default_value = "rpcmeter,go,java,python,ruby")]
    pub runtimes: Vec<Runtime>,
    /// postgres://... (or postgresql://, or sqlite:PATH) for the Db calls (a temporary SQLite file otherwise)
    #[arg(long)]
    pub db: Option<String>,
    /// Fail (exit 1) when a runtime's server cannot be built, instead of skipping it
    #[arg(long)]
    pub strict: bool,
}

pub fn main(args: LabArgs) -> anyhow::Result<ExitCode> {
    // Checked before any server is built or started: a server that refuses it would only say
    // so on its stderr, after the build.
    if let Some(db) = &args.db {
        db.parse::<crate::lab::DbSpec>().map_err(|why| crate::error::bad_input(format!("--db: {why}")))?;
    }
    let control = super::interruptible()?;
    let options = Options {
        quick: args.quick,
        out: args.out,
        runtimes: args.runtimes,
        db: args.db,
        strict: args.strict,
        read_run: super::run::settings_of_words,
    };
    experiments::run(args.name, &options, control)?;
    Ok(ExitCode::SUCCESS)
}
