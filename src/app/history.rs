//! `rpcmeter history`: list, show and remove the recorded runs (`crate::history`). Returns
//! the text to print; a run id that is not there is bad input (exit 2).
use crate::error::bad_input;
use crate::history::{History, RunRow};
use crate::report::Format;
use crate::units;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// The `limit` newest runs (0: all).
    List {
        limit: usize,
    },
    /// The `limit` newest runs (0: all) as one HTML page: their trend (`pages::history`).
    Trend {
        limit: usize,
    },
    Show {
        id: i64,
        /// Table: a short summary; JSON: the whole result, as `run --format json` printed it;
        /// HTML: its report, as `run -o FILE.html` draws it.
        format: Format,
    },
    Remove {
        id: i64,
    },
}

/// Runs `action` on the history at `path` (None: the user's default history) and returns
/// what to print. Reading a history that does not exist yet does not create it.
pub fn run(path: Option<PathBuf>, action: Action) -> anyhow::Result<String> {
    let path = match path {
        Some(path) => path,
        None => crate::history::default_path()
            .ok_or_else(|| bad_input("no history: neither XDG_DATA_HOME nor HOME is set (give --history PATH)"))?,
    };
    let history = match path.exists() {
        true => Some(History::open(&path).map_err(|e| bad_input(format!("{e:#}")))?),
        false => None,
    };
    let unknown = |id: i64| bad_input(format!("no run #{id} in the history {}", path.display()));
    match action {
        Action::List { limit } => {
            let rows = history.as_ref().map(|h| h.list(limit)).transpose()?.unwrap_or_default();
            Ok(match rows.is_empty() {
                true => format!("no runs recorded in {}\n", path.display()),
                false => list_table(&rows),
            })
        }
        Action::Trend { limit } => {
            let rows = history.as_ref().map(|h| h.list(limit)).transpose()?.unwrap_or_default();
            // Oldest first, as a trend reads; a row that is no result is named, not drawn.
            let mut runs = Vec::new();
            for row in rows.iter().rev() {
                let result = history.as_ref().map(|h| h.get(row.id)).transpose()?.flatten();
                let run = result
                    .ok_or_else(|| "removed while read".to_string())
                    .and_then(|value| crate::result::Run::from_value(value).map_err(|e| e.to_string()));
                runs.push((row.id, run));
            }
            Ok(super::pages::history::render(&path, &runs))
        }
        Action::Show { id, format } => {
            let result = history.as_ref().map(|h| h.get(id)).transpose()?.flatten().ok_or_else(|| unknown(id))?;
            Ok(match format {
                // As `report::json::Json` renders it, so the text is the run's own, byte for byte.
                Format::Json => serde_json::to_string_pretty(&result)? + "\n",
                Format::Html => {
                    let run = crate::result::Run::from_value(result)
                        .map_err(|e| bad_input(format!("history {}: run #{id}: {e}", path.display())))?;
                    Format::Html.exporter().render(&run)
                }
                _ => summary(id, &result, &path),
            })
        }
        Action::Remove { id } => match history.as_ref().map(|h| h.remove(id)).transpose().map_err(|e| {
            // The history could not be written (read-only, disk full): an output that failed.
            crate::error::output_failed(&path, std::io::Error::other(e.root_cause().to_string()))
        })? {
            Some(true) => Ok(format!("removed run #{id}\n")),
            _ => Err(unknown(id)),
        },
    }
}

/// A duration given in µs, for people ("-" when absent or beyond any duration).
fn micros(us: Option<f64>) -> String {
    seconds(us.map(|us| us / 1e6))
}

/// A duration given in seconds, for people ("-" when absent, negative or beyond any duration:
/// a history can hold results from elsewhere).
fn seconds(s: Option<f64>) -> String {
    s.and_then(|s| Duration::try_from_secs_f64(s).ok()).map_or_else(|| "-".into(), units::duration)
}

/// `2024-05-01T10:00:00.123Z` as `2024-05-01 10:00:00` (UTC).
fn started(at: Option<&str>) -> String {
    at.map_or_else(|| "-".into(), |at| at.get(..19).unwrap_or(at).replace('T', " "))
}

fn or_dash<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
}

/// The list as a table: text columns aligned left, numbers right.
fn list_table(rows: &[RunRow]) -> String {
    const HEADER: [&str; 11] =
        ["id", "started (UTC)", "name", "target", "call", "mode", "calls", "ok", "throughput", "p50", "p99"];
    const NUMERIC: [bool; 11] = [true, false, false, false, false, false, true, true, true, true, true];
    let cells: Vec<[String; 11]> = rows
        .iter()
        .map(|r| {
            [
                format!("#{}", r.id),
                started(r.started_at.as_deref()),
                or_dash(r.name.as_deref()),
                or_dash(r.target.as_deref()),
                or_dash(r.call.as_deref()),
                or_dash(r.mode.as_deref()),
                or_dash(r.calls),
                or_dash(r.ok),
                r.throughput_rps.map_or_else(|| "-".into(), |rps| format!("{rps:.1}/s")),
                micros(r.p50_us),
                micros(r.p99_us),
            ]
        })
        .collect();
    let width = |i: usize| cells.iter().map(|c| c[i].chars().count()).chain([HEADER[i].len()]).max().unwrap_or(0);
    let widths: Vec<usize> = (0..HEADER.len()).map(width).collect();
    let line = |cells: &[&str]| {
        let padded: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| match NUMERIC[i] {
                true => format!("{c:>w$}", w = widths[i]),
                false => format!("{c:<w$}", w = widths[i]),
            })
            .collect();
        padded.join("  ").trim_end().to_string() + "\n"
    };
    let mut out = line(&HEADER);
    for row in &cells {
        out += &line(&row.each_ref().map(String::as_str));
    }
    out
}

/// A word as a shell would need it to get it back: quoted when it holds anything but
/// `[A-Za-z0-9_./:=,@%+-]`.
pub fn shell_word(word: &str) -> String {
    let plain = !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "_./:=,@%+-".contains(c));
    match plain {
        true => word.to_string(),
        false => format!("'{}'", word.replace('\'', r"'\''")),
    }
}

/// A few lines on one run: what was measured, how it went, where the whole result is.
fn summary(id: i64, r: &Value, path: &Path) -> String {
    let text = |p: &str| r.pointer(p).and_then(Value::as_str);
    let int = |p: &str| r.pointer(p).and_then(Value::as_u64);
    let real = |p: &str| r.pointer(p).and_then(Value::as_f64);
    let mut out = format!("run #{id}");
    if let Some(name) = text("/meta/name") {
        out += &format!(" {name:?}");
    }
    out += &format!(", started {} UTC", started(text("/meta/started_at")));
    if let Some(ended) = text("/meta/ended") {
        out += &format!(", {ended}");
    }
    out += "\n";
    if let Some(tags) = r.pointer("/meta/tags").and_then(Value::as_object).filter(|t| !t.is_empty()) {
        let tags: Vec<String> = tags.iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default())).collect();
        out += &format!("tags:       {}\n", tags.join(" "));
    }
    if let Some(arguments) = r.pointer("/meta/arguments").and_then(Value::as_array) {
        let words: Vec<String> = arguments.iter().filter_map(Value::as_str).map(shell_word).collect();
        out += &format!("command:    rpcmeter {}\n", words.join(" "));
    }
    out += &format!("target:     {} {}\n", or_dash(text("/target")), or_dash(text("/call")));
    out += &format!("load:       {}\n", text("/load").or(text("/mode")).unwrap_or("-"));
    out += &format!(
        "calls:      {} ({} ok, {} failed) in {}\n",
        or_dash(int("/requests/total")),
        or_dash(int("/requests/ok")),
        or_dash(int("/requests/failed")),
        seconds(real("/duration_s")),
    );
    out +=
        &format!("throughput: {}\n", real("/throughput_rps").map_or_else(|| "-".into(), |rps| format!("{rps:.1}/s")));
    out += &format!(
        "latency:    p50 {}  p90 {}  p99 {}  max {}\n",
        micros(real("/latency_us/p50")),
        micros(real("/latency_us/p90")),
        micros(real("/latency_us/p99")),
        micros(real("/latency_us/max")),
    );
    if let Some(statuses) = r.pointer("/statuses").and_then(Value::as_object).filter(|s| !s.is_empty()) {
        let statuses: Vec<String> = statuses.iter().map(|(k, v)| format!("{k} {v}")).collect();
        out += &format!("statuses:   {}\n", statuses.join(", "));
    }
    out += &format!("(the whole result: rpcmeter history --history {} show {id} --format json)\n", path.display());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn saved() -> (tempfile::TempDir, PathBuf, i64, Value) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.sqlite3");
        let result = json!({
            "meta": {"started_at": "2024-05-01T10:00:00.123Z", "name": "base", "tags": {"k": "v"},
                     "arguments": ["run", "-n", "5"], "ended": "completed"},
            "target": "127.0.0.1:9000", "call": "EchoService.echo", "mode": "closed", "load": "closed loop, 8 workers",
            "requests": {"total": 5, "ok": 5, "failed": 0}, "duration_s": 0.5, "throughput_rps": 10.0,
            "latency_us": {"p50": 437.5, "p90": 900.0, "p99": 12345.0, "max": 20000.0}, "statuses": {"OK": 5},
        });
        let id = History::open(&path).unwrap().save(&result).unwrap();
        (dir, path, id, result)
    }

    #[test]
    fn list_shows_one_row_per_run() {
        let (_dir, path, id, _) = saved();
        let text = run(Some(path), Action::List { limit: 20 }).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        for column in
            ["id", "started (UTC)", "name", "target", "call", "mode", "calls", "ok", "throughput", "p50", "p99"]
        {
            assert!(lines[0].contains(column), "{text}");
        }
        for cell in [&format!("#{id}"), "2024-05-01 10:00:00", "base", "EchoService.echo", "10.0/s", "437.5 µs"] {
            assert!(lines[1].contains(cell), "{cell} in {text}");
        }
    }

    #[test]
    fn show_prints_the_result_or_a_summary() {
        let (_dir, path, id, result) = saved();
        let json = run(Some(path.clone()), Action::Show { id, format: Format::Json }).unwrap();
        assert_eq!(json, serde_json::to_string_pretty(&result).unwrap() + "\n");
        let table = run(Some(path), Action::Show { id, format: Format::Table }).unwrap();
        assert!(table.starts_with(&format!("run #{id} \"base\", started 2024-05-01 10:00:00 UTC")), "{table}");
        assert!(table.contains("p99 12.35 ms"), "{table}");
        assert!(table.contains("command:    rpcmeter run -n 5\n"), "{table}");
        assert_eq!(shell_word(r#"{"content":"it's"}"#), r#"'{"content":"it'\''s"}'"#);
    }

    #[test]
    fn unknown_ids_and_absent_histories_are_bad_input() {
        let (dir, path, id, _) = saved();
        assert_eq!(run(Some(path.clone()), Action::Remove { id }).unwrap(), format!("removed run #{id}\n"));
        for action in [Action::Remove { id }, Action::Show { id, format: Format::Json }] {
            assert_eq!(crate::error::exit_code(&run(Some(path.clone()), action).unwrap_err()), 2);
        }
        let absent = dir.path().join("absent.sqlite3");
        assert!(run(Some(absent.clone()), Action::List { limit: 0 }).unwrap().starts_with("no runs recorded"));
        let err = run(Some(absent.clone()), Action::Show { id: 1, format: Format::Table }).unwrap_err();
        assert_eq!(crate::error::exit_code(&err), 2);
        assert!(!absent.exists(), "reading must not create the history");
    }
}
