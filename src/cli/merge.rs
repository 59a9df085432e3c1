//! `rpcmeter merge RESULT.json...`: several results (shards of one run) as one, exactly.
use crate::app::merge;
use crate::error::output_failed;
use crate::report::Format;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct MergeArgs {
    /// Results of `rpcmeter run --format json` (or --export json=...), at least one; "-" reads
    /// results one after the other from standard input (`kubectl logs` of a sharded run)
    #[arg(required = true)]
    pub results: Vec<PathBuf>,
    /// Write the merged result (JSON) here, or its HTML report to FILE.html (as `run -o
    /// FILE.html`); the table goes to standard output
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// What standard output gets: a short table, the merged result as JSON, or any other
    /// format `run` prints (csv, prometheus, influx, junit, rmeter)
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Merge one slice of each result instead of the whole: KEY=NAME, KEY one of
    /// calls_by_name, flows, backends (e.g. `--slice calls_by_name=put`)
    #[arg(long, value_name = "KEY=NAME", value_parser = crate::result::parse_slice)]
    pub slice: Option<(String, String)>,
    #[command(flatten)]
    pub input: crate::input::InputArgs,
}

pub fn main(args: MergeArgs) -> anyhow::Result<ExitCode> {
    args.input.apply();
    let mut inputs = Vec::new();
    let mut skipped = Vec::new();
    for path in &args.results {
        if path == std::path::Path::new("-") {
            let text = crate::input::read_string(path, crate::input::Kind::Result, "standard input")?;
            let (read, other) = merge::read_stream(&text, "stdin")?;
            inputs.extend(read);
            skipped.extend(other);
        } else {
            inputs.push(merge::read(path)?);
        }
    }
    if let Some((key, name)) = &args.slice {
        inputs = inputs.into_iter().map(|i| i.slice(key, name)).collect::<anyhow::Result<_>>()?;
    }
    let mut merged = merge::merge(&inputs)?;
    for warning in merge::warnings(&merged) {
        eprintln!("rpcmeter: warning: {warning}");
    }
    for line in skipped {
        merged.notices.push(crate::result::NoticeKind::LeftOut, format!("not a result, left out: {line}"));
    }
    if let Some(path) = &args.output {
        // A .html file gets the page, never JSON (`run -o FILE.html` decides the same way).
        let text = match super::run_settings::html_path(path) {
            true => merge::render(&merged, Format::Html)?,
            false => merged.to_json_pretty(),
        };
        crate::app::outputs::write_whole(path, text.as_bytes()).map_err(|e| output_failed(path, e))?;
    }
    let text = merge::render(&merged, args.format)?;
    std::io::stdout().write_all(text.as_bytes()).map_err(|e| output_failed(std::path::Path::new("-"), e))?;
    Ok(ExitCode::SUCCESS)
}
