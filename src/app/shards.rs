//! `run --shards N`: the load split over N local processes, each `run --shard I/N` with one
//! shared `--start-at`, their results merged exactly. The same path as a distributed run on
//! Kubernetes (`rpcmeter kube`), on one machine: for a many-core host, and for tests.
use super::merge;
use crate::error::{output_failed, run_failed};
use crate::report::Format;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Time for every child to start, resolve the schema and connect before the shared start.
const LEAD: Duration = Duration::from_secs(3);

/// Flags of the whole run that the children must not get as they are (each child writes its
/// own JSON result) and whether each takes a value.
const PARENT_ONLY: [(&str, bool); 8] = [
    ("--shards", true),
    ("-o", true),
    ("--output", true),
    ("--format", true),
    ("-q", false),
    ("--quiet", false),
    ("--history", true),
    ("--no-save", false),
];

/// The user's `run` arguments without the parent's own flags.
fn child_arguments(arguments: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip_value = false;
    for arg in arguments.iter().skip_while(|a| *a != "run").skip(1) {
        if std::mem::take(&mut skip_value) {
            continue;
        }
        let name = arg.split('=').next().unwrap_or(arg);
        match PARENT_ONLY.iter().find(|(flag, _)| *flag == name) {
            Some((_, takes_value)) => skip_value = *takes_value && !arg.contains('='),
            None => out.push(arg.clone()),
        }
    }
    out
}

pub fn run_local(
    shards: u32,
    format: Format,
    output: Option<PathBuf>,
    arguments: &[String],
) -> anyhow::Result<ExitCode> {
    let exe = std::env::current_exe().map_err(|e| crate::error::internal(format!("cannot find rpcmeter: {e}")))?;
    let dir = tempfile::tempdir().map_err(|e| crate::error::internal(format!("no temporary directory: {e}")))?;
    let start = (SystemTime::now() + LEAD).duration_since(UNIX_EPOCH).unwrap_or_default().as_secs_f64();
    let common = child_arguments(arguments);
    let mut children = Vec::new();
    for index in 0..shards {
        let result = dir.path().join(format!("shard-{index}.json"));
        let child = Command::new(&exe)
            .arg("run")
            .args(&common)
            .args(["--shard", &format!("{index}/{shards}"), "--start-at", &format!("{start:.6}")])
            // A shard's result is a part: only the whole run is worth recording.
            .args(["--format", "json", "-q", "--no-save", "-o"])
            .arg(&result)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| crate::error::internal(format!("cannot start shard {index}: {e}")))?;
        children.push((index, result, child));
    }
    let mut inputs = Vec::new();
    let mut failed = Vec::new();
    for (index, result, child) in children {
        let out = child.wait_with_output().map_err(|e| crate::error::internal(format!("shard {index}: {e}")))?;
        let said = String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or("").to_string();
        match merge::read(&result) {
            Ok(mut input) if out.status.success() || result.exists() => {
                input.label = format!("shard {index}/{shards}");
                inputs.push(input);
                if !out.status.success() {
                    failed.push(format!("shard {index}/{shards}: {said}"));
                }
            }
            _ => failed.push(format!("shard {index}/{shards}: {said}")),
        }
    }
    if inputs.is_empty() {
        return Err(run_failed(failed.join("; ")));
    }
    let merged = merge::merge(&inputs)?;
    let text = match format {
        Format::Json => serde_json::to_string_pretty(&merged).unwrap_or_default() + "\n",
        _ => merge::table(&merged),
    };
    match &output {
        Some(path) => std::fs::write(path, &text).map_err(|e| output_failed(path, e))?,
        None => {
            std::io::stdout().write_all(text.as_bytes()).map_err(|e| output_failed(std::path::Path::new("-"), e))?
        }
    }
    match failed.is_empty() {
        true => Ok(ExitCode::SUCCESS),
        false => Err(run_failed(failed.join("; "))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parents_flags_stay_with_the_parent() {
        let args: Vec<String> = "rpcmeter run --shards 4 --plaintext -q -o out.json --format=json -c 8 h:1"
            .split(' ')
            .map(String::from)
            .collect();
        assert_eq!(child_arguments(&args), vec!["--plaintext", "-c", "8", "h:1"]);
    }
}
