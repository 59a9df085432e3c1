//! `rpcmeter report RESULT.json... -o report.html`: one self-contained HTML page (inline CSS
//! and SVG, nothing fetched) with each run's plots and, for several runs, their comparison.
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// Result files written by `rpcmeter run --format json` (or `--export json=FILE`).
    #[arg(required = true, value_name = "RESULT.json")]
    pub files: Vec<PathBuf>,
    /// The HTML file to write (`-`: standard output).
    #[arg(short = 'o', long, default_value = "report.html")]
    pub output: PathBuf,
    /// Report one slice of each result instead of the whole: KEY=NAME, KEY one of
    /// calls_by_name, flows, backends (e.g. `--slice calls_by_name=put`)
    #[arg(long, value_name = "KEY=NAME", value_parser = crate::result::parse_slice)]
    pub slice: Option<(String, String)>,
    #[command(flatten)]
    pub input: crate::input::InputArgs,
}

pub fn main(args: ReportArgs) -> anyhow::Result<ExitCode> {
    args.input.apply();
    crate::app::report::report(&args.files, args.slice.as_ref(), &args.output)
}
