//! The run history: every `run` result (the JSON of `--format json`, which holds the options
//! in `meta.arguments`, the summary, the interval series and the histograms) in an embedded
//! SQLite database, with the columns a listing needs beside it. One file, shared by every
//! run on the machine: WAL and a busy timeout, so runs that end at once all get recorded.
use crate::error::bad_input;
use anyhow::Context;
use rusqlite::{params, OptionalExtension};
use serde_json::Value;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a write waits for another writer (each holds the lock for a few ms).
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The schema's version (`PRAGMA user_version`), for the migrations to come.
const SCHEMA_VERSION: i64 = 1;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    started_at TEXT,
    name TEXT,
    target TEXT,
    call TEXT,
    mode TEXT,
    calls INTEGER,
    ok INTEGER,
    throughput_rps REAL,
    p50_us REAL,
    p99_us REAL,
    tags TEXT,   -- meta.tags, JSON
    result TEXT NOT NULL  -- the whole result, JSON
);
CREATE INDEX IF NOT EXISTS runs_started_at ON runs (started_at);
";

/// An open history database.
pub struct History {
    conn: rusqlite::Connection,
    path: PathBuf,
}

/// One run as `history list` shows it (the columns extracted from its result).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunRow {
    pub id: i64,
    /// RFC 3339, UTC, as `meta.started_at`.
    pub started_at: Option<String>,
    pub name: Option<String>,
    pub target: Option<String>,
    pub call: Option<String>,
    /// closed, open or burst.
    pub mode: Option<String>,
    /// Measured calls (`requests.total`).
    pub calls: Option<i64>,
    pub ok: Option<i64>,
    pub throughput_rps: Option<f64>,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    /// `meta.tags`, a JSON object.
    pub tags: Option<String>,
}

/// `$XDG_DATA_HOME/rpcmeter/history.sqlite3` (an absolute XDG_DATA_HOME only, as the XDG
/// Base Directory specification says), else `$HOME/.local/share/rpcmeter/history.sqlite3`;
/// None when neither is set.
pub fn default_path_from(xdg_data_home: Option<OsString>, home: Option<OsString>) -> Option<PathBuf> {
    let nonempty = |v: Option<OsString>| v.filter(|v| !v.is_empty()).map(PathBuf::from);
    let base = nonempty(xdg_data_home)
        .filter(|p| p.is_absolute())
        .or_else(|| nonempty(home).map(|h| h.join(".local").join("share")))?;
    Some(base.join("rpcmeter").join("history.sqlite3"))
}

/// The user's history, from this process's environment (see `default_path_from`).
pub fn default_path() -> Option<PathBuf> {
    default_path_from(std::env::var_os("XDG_DATA_HOME"), std::env::var_os("HOME"))
}

fn is_busy(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<rusqlite::Error>()
            .and_then(rusqlite::Error::sqlite_error_code)
            .is_some_and(|code| matches!(code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked))
    })
}

/// A history of ours created before histories were made 0600 (readable by others then)
/// becomes private, with its -wal and -shm files; another user's file is left as it is.
/// Best effort: a file that cannot be changed (immutable, a read-only mount) is still read,
/// and a write to it fails on its own, naming it.
fn make_private(path: &Path) {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    // SQLite names its side files by appending to the database's name.
    let side = |suffix: &str| {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        std::path::PathBuf::from(name)
    };
    for file in [path.to_path_buf(), side("-wal"), side("-shm")] {
        let Ok(meta) = std::fs::metadata(&file) else { continue };
        if meta.is_file() && meta.uid() == rustix::process::geteuid().as_raw() && meta.mode() & 0o077 != 0 {
            let _ = std::fs::set_permissions(&file, std::fs::Permissions::from_mode(meta.mode() & 0o700));
        }
    }
}

impl History {
    /// Opens the history at `path`, creating it (and its directory) and its schema when
    /// missing. Errors name the file.
    pub fn open(path: &Path) -> anyhow::Result<History> {
        let open = || -> anyhow::Result<rusqlite::Connection> {
            // Private: results carry command lines. A directory made here is 0700, a new
            // database 0600 (SQLite gives its -wal and -shm files the database's mode).
            use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
            }
            match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path) {
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => make_private(path),
                Err(e) => return Err(e.into()),
                Ok(_) => {}
            }
            let conn = rusqlite::Connection::open(path)?;
            // Before anything else: switching to WAL and creating the schema take locks too.
            conn.busy_timeout(BUSY_TIMEOUT)?;
            // WAL: a run being recorded never blocks `history list`, nor the other way round.
            let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
            if !mode.eq_ignore_ascii_case("wal") {
                anyhow::bail!("cannot use WAL (journal mode {mode})");
            }
            let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
            if version > SCHEMA_VERSION {
                anyhow::bail!("written by a newer rpcmeter (schema {version}, this one knows {SCHEMA_VERSION})");
            }
            conn.execute_batch(SCHEMA)?;
            if version < SCHEMA_VERSION {
                conn.pragma_update(None, "user_version", SCHEMA_VERSION)?;
            }
            Ok(conn)
        };
        // Switching a new file to WAL can answer "database is locked" at once, without waiting
        // for the busy timeout, when other runs open it at the same moment: open again.
        let started = std::time::Instant::now();
        let conn = loop {
            match open() {
                Err(e) if started.elapsed() < BUSY_TIMEOUT && is_busy(&e) => {
                    std::thread::sleep(std::time::Duration::from_millis(5 + u64::from(std::process::id() % 10)));
                }
                other => break other.with_context(|| format!("history {}", path.display()))?,
            }
        };
        Ok(History { conn, path: path.to_path_buf() })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records one run result (a JSON object, as `report::json::value` makes it) and returns
    /// its id. The listing's columns are taken from it; `get` gives back exactly `result`.
    pub fn save(&self, result: &Value) -> anyhow::Result<i64> {
        if !result.is_object() {
            return Err(bad_input("a run result is a JSON object"));
        }
        // The listing's columns from the typed result; a value the type does not read leaves
        // them empty, and the result is kept as given all the same.
        let run = crate::result::Run::from_value(result.clone()).unwrap_or_default();
        let some = |text: &str| Some(text.to_string()).filter(|t| !t.is_empty());
        let count = |n: u64| i64::try_from(n).ok();
        let latency = |key: &str| run.latency_us.stats.get(key).copied();
        let tags = result.get("meta").and_then(|m| m.get("tags")).filter(|t| !t.is_null()).map(Value::to_string);
        self.conn
            .execute(
                "INSERT INTO runs (started_at, name, target, call, mode, calls, ok, throughput_rps, p50_us, p99_us, \
                 tags, result) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                params![
                    run.meta.started_at,
                    run.meta.name,
                    some(&run.target),
                    some(&run.call),
                    some(run.mode.as_str()),
                    result.get("requests").and_then(|_| count(run.requests.total)),
                    result.get("requests").and_then(|_| count(run.requests.ok)),
                    result.get("throughput_rps").map(|_| run.throughput_rps),
                    latency("p50"),
                    latency("p99"),
                    tags,
                    result.to_string(),
                ],
            )
            .with_context(|| format!("history {}", self.path.display()))?;
        Ok(self.conn.last_insert_rowid())
    }

    /// The `limit` newest runs (by start time, then by id), newest first; 0: all of them.
    /// Text columns are cut to what a listing shows (a history can come from elsewhere).
    pub fn list(&self, limit: usize) -> anyhow::Result<Vec<RunRow>> {
        let limit = if limit == 0 { -1 } else { i64::try_from(limit).unwrap_or(i64::MAX) };
        let rows = (|| {
            let mut statement = self.conn.prepare(
                "SELECT id, substr(started_at, 1, 64), substr(name, 1, 256), substr(target, 1, 256), \
                 substr(call, 1, 256), substr(mode, 1, 64), calls, ok, throughput_rps, p50_us, p99_us, \
                 substr(tags, 1, 4096) FROM runs ORDER BY started_at DESC, id DESC LIMIT ?1",
            )?;
            let rows = statement.query_map([limit], |r| {
                Ok(RunRow {
                    id: r.get(0)?,
                    started_at: r.get(1)?,
                    name: r.get(2)?,
                    target: r.get(3)?,
                    call: r.get(4)?,
                    mode: r.get(5)?,
                    calls: r.get(6)?,
                    ok: r.get(7)?,
                    throughput_rps: r.get(8)?,
                    p50_us: r.get(9)?,
                    p99_us: r.get(10)?,
                    tags: r.get(11)?,
                })
            })?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })();
        rows.with_context(|| format!("history {}", self.path.display()))
    }

    /// The result saved as run `id`, exactly as it was saved. A row larger than a result may
    /// be (`crate::input`) is refused unread: a history can come from elsewhere.
    pub fn get(&self, id: i64) -> anyhow::Result<Option<Value>> {
        let limit = crate::input::limit(crate::input::Kind::Result);
        let row: Option<(i64, Option<String>)> = self
            .conn
            .query_row(
                "SELECT octet_length(result), CASE WHEN octet_length(result) <= ?2 THEN result END \
                 FROM runs WHERE id = ?1",
                params![id, i64::try_from(limit.0).unwrap_or(i64::MAX)],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .with_context(|| format!("history {}", self.path.display()))?;
        let text = match row {
            None => None,
            Some((_, Some(text))) => Some(text),
            Some((size, None)) => {
                let label = format!("history {}: run #{id}", self.path.display());
                let size = u64::try_from(size).ok();
                return Err(crate::input::too_large(&label, size, crate::input::Kind::Result, limit));
            }
        };
        text.map(|t| serde_json::from_str(&t))
            .transpose()
            .with_context(|| format!("history {}: run #{id} is not JSON", self.path.display()))
    }

    /// Removes run `id`; false when there was none.
    pub fn remove(&self, id: i64) -> anyhow::Result<bool> {
        let removed = self
            .conn
            .execute("DELETE FROM runs WHERE id = ?1", [id])
            .with_context(|| format!("history {}", self.path.display()))?;
        Ok(removed > 0)
    }
}

/// Where `rpcmeter run` records its result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SaveTo {
    /// `--history PATH`: asked for, so failing to record is an output failure.
    Explicit(PathBuf),
    /// The user's default history (None: neither XDG_DATA_HOME nor HOME is set).
    Default(Option<PathBuf>),
}

impl SaveTo {
    /// From `run`'s flags: None with --no-save.
    pub fn from_flags(no_save: bool, history: Option<&Path>) -> Option<SaveTo> {
        match (no_save, history) {
            (true, _) => None,
            (false, Some(path)) => Some(SaveTo::Explicit(path.to_path_buf())),
            (false, None) => Some(SaveTo::Default(default_path())),
        }
    }

    pub fn explicit(&self) -> bool {
        matches!(self, SaveTo::Explicit(_))
    }

    /// Records `result` and returns its id; the error is an output failure naming the file.
    pub fn record(&self, result: &Value) -> anyhow::Result<i64> {
        let path = match self {
            SaveTo::Explicit(path) | SaveTo::Default(Some(path)) => path,
            SaveTo::Default(None) => {
                let why = std::io::Error::other("neither XDG_DATA_HOME nor HOME is set");
                return Err(crate::error::output_failed(Path::new("the run history"), why));
            }
        };
        History::open(path).and_then(|h| h.save(result)).map_err(|e| {
            let why = std::io::Error::other(format!("run not recorded in this history: {}", e.root_cause()));
            crate::error::output_failed(path, why)
        })
    }
}

/// A run id as people write it: `42` or `#42`.
pub fn parse_id(arg: &str) -> Option<i64> {
    let digits = arg.strip_prefix('#').unwrap_or(arg);
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then(|| digits.parse().ok()).flatten()
}

/// A result named on the command line (for `compare`, `report`, ...): a file that exists,
/// else `42` or `#42` is run 42 of the user's default history. A file wins so that a result
/// saved as `5` is never silently replaced by run #5 (write `#5` when no such file exists).
/// Errors are bad input (exit 2), one line naming what is missing.
pub fn resolve(arg: &str) -> anyhow::Result<Value> {
    resolve_in(arg, None)
}

/// The text of a result named on the command line: a history id's saved JSON, or a file's
/// content as it is (its readers check it). `compare`, `report` and `merge` read through this.
pub fn resolve_text(arg: &str) -> anyhow::Result<String> {
    match history_id(arg) {
        Some(_) => Ok(serde_json::to_string(&resolve(arg)?).unwrap_or_default()),
        None => crate::input::read_string(Path::new(arg), crate::input::Kind::Result, arg),
    }
}

/// The run id `arg` names, unless a file of that name exists (see `resolve`).
fn history_id(arg: &str) -> Option<i64> {
    parse_id(arg).filter(|_| !Path::new(arg).exists())
}

/// `resolve`, with ids looked up in `history` (None: the user's default history).
pub fn resolve_in(arg: &str, history: Option<&Path>) -> anyhow::Result<Value> {
    let Some(id) = history_id(arg) else {
        let text = crate::input::read_string(Path::new(arg), crate::input::Kind::Result, arg)?;
        return serde_json::from_str(&text).map_err(|e| bad_input(format!("{arg}: not a JSON result: {e}")));
    };
    let path = match history {
        Some(path) => path.to_path_buf(),
        None => default_path()
            .ok_or_else(|| bad_input(format!("{arg}: no history (neither XDG_DATA_HOME nor HOME is set)")))?,
    };
    if !path.exists() {
        return Err(bad_input(format!("{arg}: no history at {}", path.display())));
    }
    let history = History::open(&path).map_err(|e| bad_input(format!("{e:#}")))?;
    history.get(id)?.ok_or_else(|| bad_input(format!("no run #{id} in the history {}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(started_at: &str, name: &str, rps: f64) -> Value {
        json!({
            "meta": {"started_at": started_at, "name": name, "tags": {"k": "v"}, "arguments": ["run", "-n", "5"],
                     "ended": "completed"},
            "target": "127.0.0.1:9000",
            "call": "EchoService.echo",
            "mode": "closed",
            "requests": {"total": 5, "ok": 4},
            "duration_s": 1.0,
            "throughput_rps": rps,
            "latency_us": {"count": 5, "p50": 123.457, "p99": 0.1 + 0.2},
            "intervals": [{"t_s": 1.0, "rps": 1.0 / 3.0}],
            "histogram": "HISTFAAAAB",
        })
    }

    fn temp() -> (tempfile::TempDir, History) {
        let dir = tempfile::tempdir().unwrap();
        let history = History::open(&dir.path().join("sub").join("h.sqlite3")).unwrap();
        (dir, history)
    }

    #[test]
    fn saved_json_comes_back_exactly() {
        let (_dir, h) = temp();
        // Floats that need all 17 digits must survive the text round trip bit for bit; without
        // serde_json's float_roundtrip, about one in ten (18592.848051603418 for one) does not.
        let mut saved = result("2024-05-01T10:00:00.000Z", "a", 18592.848051603418);
        saved["rates"] = json!([215.98303019505494, 95192.40395194259, 60914.804685290204, 97277.57855466855]);
        saved["odd"] = json!([f64::MIN_POSITIVE, 1e300, -0.0, 5e-324, 0.30000000000000004, 2.0f64.sqrt(), u64::MAX]);
        let id = h.save(&saved).unwrap();
        let got = h.get(id).unwrap().unwrap();
        assert_eq!(got, saved);
        assert_eq!(serde_json::to_string_pretty(&got).unwrap(), serde_json::to_string_pretty(&saved).unwrap());
        let rows = h.list(0).unwrap();
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        assert_eq!((r.id, r.name.as_deref(), r.mode.as_deref()), (id, Some("a"), Some("closed")));
        assert_eq!((r.calls, r.ok, r.throughput_rps), (Some(5), Some(4), Some(18592.848051603418)));
        assert_eq!((r.p50_us, r.p99_us), (Some(123.457), Some(0.1 + 0.2)));
        assert_eq!(r.tags.as_deref(), Some(r#"{"k":"v"}"#));
        assert_eq!(h.get(id + 1).unwrap(), None);
    }

    #[test]
    fn list_is_newest_first_and_limited() {
        let (_dir, h) = temp();
        let a = h.save(&result("2024-05-01T10:00:00.000Z", "a", 1.0)).unwrap();
        let c = h.save(&result("2024-05-03T10:00:00.000Z", "c", 1.0)).unwrap();
        let b = h.save(&result("2024-05-02T10:00:00.000Z", "b", 1.0)).unwrap();
        let b2 = h.save(&result("2024-05-02T10:00:00.000Z", "b2", 1.0)).unwrap();
        let ids = |rows: Vec<RunRow>| rows.iter().map(|r| r.id).collect::<Vec<_>>();
        assert_eq!(ids(h.list(0).unwrap()), [c, b2, b, a]);
        assert_eq!(ids(h.list(2).unwrap()), [c, b2]);
    }

    #[test]
    fn remove_removes_one_run() {
        let (_dir, h) = temp();
        let a = h.save(&result("2024-05-01T10:00:00.000Z", "a", 1.0)).unwrap();
        let b = h.save(&result("2024-05-02T10:00:00.000Z", "b", 1.0)).unwrap();
        assert!(h.remove(a).unwrap());
        assert!(!h.remove(a).unwrap());
        assert_eq!(h.get(a).unwrap(), None);
        assert!(h.get(b).unwrap().is_some());
        assert_eq!(h.list(0).unwrap().len(), 1);
    }

    #[test]
    fn only_objects_are_saved_and_missing_fields_are_null() {
        let (_dir, h) = temp();
        assert!(h.save(&json!([1, 2])).is_err());
        let id = h.save(&json!({})).unwrap();
        let row = h.list(0).unwrap().remove(0);
        assert_eq!(row, RunRow { id, ..RunRow::default() });
    }

    #[test]
    fn reopening_keeps_the_runs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.sqlite3");
        let id = History::open(&path).unwrap().save(&result("2024-05-01T10:00:00.000Z", "a", 1.0)).unwrap();
        let h = History::open(&path).unwrap();
        assert_eq!(h.list(0).unwrap()[0].id, id);
        let mode: String = h.conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
        assert_eq!(mode, "wal");
    }

    #[test]
    fn concurrent_writers_lose_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.sqlite3");
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(8));
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let (path, barrier) = (path.clone(), barrier.clone());
                std::thread::spawn(move || {
                    // Every thread opens the (not yet existing) file at once, as runs would.
                    barrier.wait();
                    let h = History::open(&path).unwrap();
                    (0..25)
                        .map(|i| h.save(&result("2024-05-01T10:00:00.000Z", &format!("{t}-{i}"), 1.0)).unwrap())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut ids: Vec<i64> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 200);
        let rows = History::open(&path).unwrap().list(0).unwrap();
        let mut names: Vec<String> = rows.into_iter().filter_map(|r| r.name).collect();
        names.sort();
        let mut expected: Vec<String> = (0..8).flat_map(|t| (0..25).map(move |i| format!("{t}-{i}"))).collect();
        expected.sort();
        assert_eq!(names, expected);
    }

    #[test]
    fn default_path_follows_xdg() {
        let p = |x: Option<&str>, h: Option<&str>| default_path_from(x.map(Into::into), h.map(Into::into));
        assert_eq!(p(Some("/x"), Some("/h")), Some(PathBuf::from("/x/rpcmeter/history.sqlite3")));
        assert_eq!(p(Some("rel"), Some("/h")), Some(PathBuf::from("/h/.local/share/rpcmeter/history.sqlite3")));
        assert_eq!(p(Some(""), Some("/h")), Some(PathBuf::from("/h/.local/share/rpcmeter/history.sqlite3")));
        assert_eq!(p(None, None), None);
    }

    #[test]
    fn runs_record_where_the_flags_say() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.sqlite3");
        assert_eq!(SaveTo::from_flags(true, Some(&path)), None);
        let to = SaveTo::from_flags(false, Some(&path)).unwrap();
        assert!(to.explicit());
        let saved = result("2024-05-01T10:00:00.000Z", "a", 1.0);
        let id = to.record(&saved).unwrap();
        assert_eq!(History::open(&path).unwrap().get(id).unwrap(), Some(saved.clone()));
        assert!(!SaveTo::from_flags(false, None).unwrap().explicit());
        // A history that cannot be written: an output failure (exit 1) naming the file.
        let blocked = dir.path().join("file");
        std::fs::write(&blocked, "").unwrap();
        let err = SaveTo::Explicit(blocked.join("h.sqlite3")).record(&saved).unwrap_err();
        assert_eq!(crate::error::exit_code(&err), 1);
        assert!(format!("{err:#}").starts_with(&blocked.join("h.sqlite3").display().to_string()), "{err:#}");
        assert_eq!(crate::error::exit_code(&SaveTo::Default(None).record(&saved).unwrap_err()), 1);
    }

    #[test]
    fn ids_and_files_resolve() {
        assert_eq!(parse_id("42"), Some(42));
        assert_eq!(parse_id("#42"), Some(42));
        assert_eq!(parse_id("./42"), None);
        assert_eq!(parse_id("#"), None);
        assert_eq!(parse_id("-1"), None);
        assert_eq!(parse_id("99999999999999999999"), None);
        let (dir, h) = temp();
        let saved = result("2024-05-01T10:00:00.000Z", "a", 1.0);
        let id = h.save(&saved).unwrap();
        assert_eq!(resolve_in(&format!("#{id}"), Some(h.path())).unwrap(), saved);
        assert_eq!(resolve_in(&id.to_string(), Some(h.path())).unwrap(), saved);
        let missing = resolve_in("#999", Some(h.path())).unwrap_err();
        assert_eq!(crate::error::exit_code(&missing), 2);
        let file = dir.path().join("r.json");
        std::fs::write(&file, saved.to_string()).unwrap();
        assert_eq!(resolve_in(file.to_str().unwrap(), Some(h.path())).unwrap(), saved);
        let absent = resolve_in(dir.path().join("nope.json").to_str().unwrap(), None).unwrap_err();
        assert_eq!(crate::error::exit_code(&absent), 2);
        // An id in a history that does not exist is not created by the lookup.
        let nowhere = dir.path().join("none.sqlite3");
        assert_eq!(crate::error::exit_code(&resolve_in("1", Some(&nowhere)).unwrap_err()), 2);
        assert!(!nowhere.exists());
    }
}
