//! `rpcmeter report`: result files in, one HTML page out. Every file is read and checked
//! before anything is written; a file that cannot be read or is no result is named (exit 2).
use crate::error::{bad_input, output_failed};
use crate::report::html;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Reads the results (or one slice of each: `--slice calls_by_name=put`), in the order given.
pub fn load(files: &[PathBuf], slice: Option<&(String, String)>) -> anyhow::Result<Vec<html::Run>> {
    files
        .iter()
        .map(|path| {
            let name = path.display().to_string();
            // A history id ("42", "#42") or a file.
            let text = crate::history::resolve_text(&name)?;
            let Some((key, part)) = slice else {
                return html::parse(&name, &text).map_err(|why| bad_input(format!("{name}: {why}")));
            };
            let run = crate::result::Run::parse(&text).map_err(|why| bad_input(format!("{name}: {why}")))?;
            let run = run.of_slice(key, part).map_err(|why| bad_input(format!("{name}: {why}")))?;
            html::of_result(&format!("{name} [{key}={part}]"), &run).map_err(|why| bad_input(format!("{name}: {why}")))
        })
        .collect()
}

/// Writes the report of `files` (or of one slice of each) to `output` (`-`: standard output).
pub fn report(files: &[PathBuf], slice: Option<&(String, String)>, output: &Path) -> anyhow::Result<ExitCode> {
    let runs = load(files, slice)?;
    let page = html::render(&runs);
    let written = if output == Path::new("-") {
        let mut out = std::io::stdout().lock();
        out.write_all(page.as_bytes()).and_then(|_| out.flush())
    } else {
        crate::app::outputs::write_whole(output, page.as_bytes())
    };
    written.map_err(|e| output_failed(output, e))?;
    let what = format!(
        "wrote the report of {} run{} ({}) to {}",
        runs.len(),
        if runs.len() == 1 { "" } else { "s" },
        crate::units::bytes(page.len() as u64),
        if output == Path::new("-") { "standard output".to_string() } else { output.display().to_string() }
    );
    // Standard output holds the report itself when it is the output.
    // A note that cannot be printed (a closed pipe) fails nothing: the report is written.
    let _ = match output == Path::new("-") {
        true => writeln!(std::io::stderr(), "{what}"),
        false => writeln!(std::io::stdout(), "{what}"),
    };
    Ok(ExitCode::SUCCESS)
}
